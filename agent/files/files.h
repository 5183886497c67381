/* SPDX-License-Identifier: Apache-2.0 */
/* agent/files/: the file routes of the reference sidecar (docs/api.md:
 * /file-create, /view, /read-image, /str-replace, /ls, /glob, /grep,
 * /present-files) and the session wipe, on the sandbox container's files.
 * Typed in, typed out: agent/api/op_files.c
 * turns a request's JSON arguments into a struct bk_file_req and a struct
 * bk_file_result into the response; this room holds no JSON.
 *
 *   files.h     this comment and the room's interface
 *   internal.h  what the room's files share: limits, the request as it
 *               crosses exec, the helper's context, the pipe's records
 *   channel.c   agent side: spawn the helper, read its records into a
 *               struct bk_file_result under a deadline, hash the bytes of
 *               presented files, the "file_op" audit line, the session
 *               wipe's entry bk_files_wipe()
 *   wire.c      the binary encodings that cross exec: the request (sealed
 *               memfd, decoded and checked again by the helper) and the
 *               result records (pipe, checked by the agent); the typed
 *               result (MIME types, freeing)
 *   helper.c    the helper process: the constructor that runs before
 *               main, request decoding, entering the container and the
 *               privilege drop, dispatch
 *   context.c   the helper's working context: its replies (a result or a
 *               refusal), its time budget, allocation that refuses
 *   ops.c       the eight operations (helper side)
 *   walk.c      bounded directory walks: glob and grep visits
 *   fs.c        filesystem primitives: openat2 resolution in a root, reads,
 *               sorted directory listings, mkdir -p, atomic writes
 *   wipe.c      the session wipe: the helper's removal walk
 *
 * Every operation runs in a short-lived helper process:
 *
 *   agent thread    makes the helper's own cgroup below the pod's
 *                   (isolate/cgroup.c, as for an exec: memory.max, pids.max)
 *                --clone3(CLONE_INTO_CGROUP) + execve(/proc/self/exe,
 *                   argv[0] "boxkite-file-helper")
 *                  fd 3: the validated request (sealed memfd)
 *                  fd 4: the result pipe      fd 5: the sandbox's pidfd
 *                  fd 6..: its v1 cgroup.procs (hybrid hosts)
 *   helper (a constructor, before main):
 *                  join its v1 cgroups; RLIMIT_AS, RLIMIT_CPU
 *                  setns(pidfd, CLONE_NEWNS)   (the mount namespace only)
 *                  drop to the sandbox user: no groups, no caps,
 *                  no_new_privs, not dumpable, dies with its parent
 *                  open the allowed root (no symlink on the way),
 *                  resolve the rest with openat2(rootfd, rel,
 *                  RESOLVE_IN_ROOT | NO_MAGICLINKS | NO_XDEV)
 *                  do the work, write records on the pipe, _exit
 *   agent thread <- records (typed results; file bytes to hash);
 *                   kills the cgroup at the deadline, removes it always
 *
 * The helper can therefore never do more than the sandbox user could do in
 * its own container, and a symlink (also one swapped in during the call)
 * never leads out of the root: RESOLVE_IN_ROOT makes "/" and ".." of every
 * link stop at the root, NO_MAGICLINKS refuses /proc/<pid>/root-style links,
 * NO_XDEV refuses mount crossings. The lexical check in vpath.c only gives
 * early, readable refusals (and is repeated in the helper).
 *
 * Why exec and not a bare fork(): a fork of the multi-threaded agent would
 * carry a copy of its whole heap (other pods' requests, secret_env values)
 * into a process that runs as the sandbox user, and inherit any lock another
 * thread held at that instant (libasan's allocator does deadlock there; so
 * could any library's). The exec'd helper starts from a clean image.
 * It uses no OpenSSL (file bytes are streamed to the agent, which hashes
 * them), no NSS, no locale, no dlopen: nothing the container's files could
 * configure. Neither side trusts the other's bytes: the helper checks the
 * request's lengths and fields again, the agent bounds and checks every
 * record (the helper reads attacker-controlled files). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "agent/caller/pod.h"
#include "agent/parse/vpath.h"

enum bk_file_op {
	BK_FILE_CREATE,
	BK_FILE_VIEW,
	BK_FILE_STR_REPLACE,
	BK_FILE_LS,
	BK_FILE_GLOB,
	BK_FILE_GREP,
	BK_FILE_PRESENT,
	BK_FILE_READ_IMAGE,
	BK_FILE_WIPE, /* the session wipe: not a request of its own */
};
#define BK_FILE_OP_N (BK_FILE_WIPE + 1)

/* The operation's name in requests and logs: "file_create", "view",
 * "str_replace", "ls", "glob", "grep", "present_files", "read_image",
 * "wipe". */
const char *bk_file_op_name(enum bk_file_op op);

/* Limits a request is checked against (at the API edge, and again in the
 * helper). */
#define BK_FILE_PRESENT_MAX 100          /* present_files paths */
#define BK_FILE_GREP_PATTERN_MAX 4096    /* bytes of a grep pattern */
#define BK_FILE_GREP_MATCH_MAX 5000      /* grep max_matches (larger ones are clamped, as the reference) */
#define BK_FILE_GREP_MATCH_DEFAULT 500
#define BK_FILE_CONTENT_MAX (10u << 20)  /* characters of file_create content, str_replace strings */
#define BK_FILE_VIEW_MAX (25u << 20)     /* bytes of a file /view reads */
#define BK_FILE_EDIT_MAX (10u << 20)     /* bytes of a file /str-replace edits */
#define BK_FILE_VIEW_CHARS 102400        /* a longer /view content is cut here + "\n... (truncated)" */
#define BK_FILE_IMAGE_MAX (20u << 20)    /* bytes of a /read-image file: its base64 fits in one response */
/* Bytes of a response body: a larger answer is refused (422 unviewable). */
#define BK_FILE_RESULT_MAX (30u << 20)

/* A validated request: plain data. Strings are NUL-terminated and borrowed
 * (the caller keeps them alive during the call); paths is the caller's. */
struct bk_file_req {
	enum bk_file_op op;
	struct bk_vpath vp;                /* all but present_files and wipe */
	const char *content;               /* file_create */
	size_t content_len;
	bool has_range;                    /* view */
	long long range_start, range_end;  /* 1-based, inclusive; end -1: to the end */
	const char *old_str, *new_str;     /* str_replace */
	size_t old_len, new_len;
	bool replace_all;
	const char *pattern;               /* glob: relative pattern; grep: regex */
	const char *glob;                  /* grep: file filter or NULL */
	long max_matches;                  /* grep: 1 .. BK_FILE_GREP_MATCH_MAX */
	struct bk_vpath *paths;            /* present_files */
	size_t npaths;
};

/* The type of a directory entry (lstat: a link is a "symlink"). */
enum bk_file_type { BK_FILE_T_FILE, BK_FILE_T_DIRECTORY, BK_FILE_T_SYMLINK, BK_FILE_T_OTHER, BK_FILE_T_UNKNOWN };
#define BK_FILE_T_N (BK_FILE_T_UNKNOWN + 1)
/* "file", "directory", "symlink", "other", "unknown" */
const char *bk_file_type_name(enum bk_file_type t);

/* Strings read from the container (names, contents, matches) arrive as
 * valid UTF-8 (invalid sequences replaced by U+FFFD) without NUL bytes. */
struct bk_file_entry { /* ls, view of a directory: a name; glob: a virtual path */
	char *name;
	enum bk_file_type type;
	uint64_t size; /* 0 when unknown */
	int64_t mtime_sec; /* st_mtim (lstat) */
	uint32_t mtime_nsec;
};
struct bk_file_match { /* grep */
	char *path;
	uint64_t line; /* 1-based */
	char *text;    /* the line without its end, cut at GREP_TEXT_MAX bytes */
};
struct bk_file_presented { /* present_files, in request order */
	char *path;        /* in /mnt/user-data/outputs */
	uint64_t size;
	const char *mime;  /* bk_mime_type(path); unknown: text/plain when text */
	bool text;         /* the first 8 KiB: UTF-8 without NUL bytes (or empty) */
	char sha256[65];   /* hex of the bytes the helper read; "" when none */
};
struct bk_file_copy { /* present_files: a file copied into outputs */
	char *source, *destination;
};

#define BK_FILE_CODE_MAX 32
#define BK_FILE_DETAIL_MAX 1024

/* What an operation answered. status 200: the op's fields below are set
 * (the request's own path is not repeated here); any other status: code
 * and detail say why, and no op field is set. */
struct bk_file_result {
	int status;
	char code[BK_FILE_CODE_MAX];
	char detail[BK_FILE_DETAIL_MAX];
	char layer[16]; /* a refusal because the helper's isolation could not be made: "cgroup" */
	/* file_create */
	uint64_t size; /* also view (bytes of the file) */
	bool created;
	/* view */
	bool is_directory;
	char *content; /* NULL for a directory; read_image: the base64 of the bytes */
	size_t content_len;
	uint64_t lines; /* the file's lines, as Python's split('\n') counts them */
	char *mime;     /* read_image */
	/* view of a directory, ls, glob (sorted) */
	struct bk_file_entry *entries;
	size_t nentries;
	bool truncated; /* also glob, grep: a bound was hit */
	/* str_replace */
	uint64_t occurrences;
	/* grep */
	struct bk_file_match *grep;
	size_t ngrep;
	char *grep_error; /* an invalid pattern: status 200, no matches, this sentence */
	/* present_files */
	struct bk_file_presented *files;
	size_t nfiles;
	struct bk_file_copy *copies;
	size_t ncopies;
	/* wipe */
	uint64_t removed, kept;
	char **unavailable; /* roots that could not be opened */
	size_t nunavailable;
};

void bk_file_result_free(struct bk_file_result *r);

/* Run q in a helper as the pod's sandbox user (res is overwritten).
 * Returns 0 with res filled: status 200 and the op's fields, or the
 * helper's refusal (status, code, detail). Returns -errno, with res->status,
 * code and detail set, when the operation could not run at all:
 *   -EPERM      503 isolation_failed     (the sandbox runs as root)
 *   -ENXIO      503 sandbox_unavailable  (no sandbox container)
 *   -ENOMEM     503 out_of_memory
 *   -EACCES ... 503 isolation_failed, layer "cgroup" (the helper's own
 *                                          cgroup could not be made or
 *                                          entered: nothing ran)
 *   -ETIMEDOUT  504 timeout              (the agent killed its cgroup)
 *   -ETIME      422 resource_limit       (its CPU limit killed it)
 *   -EDQUOT     507 resource_limit       (its memory limit killed it)
 *   other       500 helper_failed        (the helper died
 *                                          or sent malformed records;
 *                                          logged as "file_helper")
 * Free res with bk_file_result_free() in every case. Does not log the audit
 * line: the caller does (bk_files_audit) with the status it answers. */
int bk_files_run(struct bk_agent *a, const struct bk_pod *pod, const struct bk_file_req *q,
		 struct bk_file_result *res);

/* The "file_op" audit line: op, pod, namespace, pod_uid, path (when vp is
 * set and not empty: paths only, never contents or patterns), status,
 * duration_ms since t0 (now_ns()). info below status 500, else warn. */
void bk_files_audit(const struct bk_pod *pod, enum bk_file_op op, const struct bk_vpath *vp, int status,
		    uint64_t t0);

/* Remove what the previous session could have left in the pod's sandbox
 * container (wipe.c: the session roots /workspace, /tmp,
 * /mnt/user-data/outputs and /dev/shm, the sandbox user's files on every
 * other writable mount, the container's SysV IPC objects and POSIX message
 * queues), never following a link, never crossing a mount. Entries that
 * cannot be removed are counted in *kept. Returns 0 only when nothing was
 * kept; else -errno with a sentence in err (what was kept or could not be
 * reached). */
int bk_files_wipe(struct bk_agent *a, const struct bk_pod *pod, uint64_t *removed, uint64_t *kept, char *err,
		  size_t errlen);

/* MIME type from a file name's extension (application/octet-stream when
 * unknown). */
const char *bk_mime_type(const char *name);
