/* SPDX-License-Identifier: Apache-2.0 */
/* What the files of agent/files/ share (files.h names each file's concern):
 * limits, the request as it crosses exec, the helper's context and replies,
 * the records on the helper's pipe, the filesystem primitives and walks.
 * Nothing outside agent/files/ includes this. */
#pragma once
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "agent/files/files.h"
#include "lib/util.h"

/* ---- the helper process ------------------------------------------------------------- */
#define HELPER_ARGV0 "boxkite-file-helper"
/* HELPER_ARGV0, defined in helper.c: the agent spawns the helper under the
 * name its constructor looks for, and the reference links helper.c (and
 * its constructor) into every binary that can spawn it. */
extern const char bkf_helper_argv0[];
#define FD_REQ 3   /* the request (sealed memfd) */
#define FD_CHAN 4  /* the result pipe */
#define FD_PIDFD 5 /* the sandbox container's init */
#define FD_CG0 6   /* v1 cgroup.procs of the helper's cgroups (hybrid hosts) */
#define FD_CG_MAX 8 /* ... at most this many: FD_CG0 .. FD_CG0 + FD_CG_MAX - 1 */

/* ---- limits ----------------------------------------------------------------------- */
#define REQ_MAX (64u << 20)              /* encoded request (content is at most BK_REQ_MAX) */
#define HELPER_TIMEOUT_MS 10000          /* the agent kills the helper after this */
#define WIPE_TIMEOUT_MS 60000            /* ... or this, for the session wipe */
#define WORK_BUDGET_MS 8000              /* walks stop (truncated) after this */
/* The helper's own cgroup (below the pod's: charged to the pod) and rlimits.
 * A pattern or walk that would take more dies at the limit and is answered
 * 422/507 resource_limit; the agent's own memory never moves. */
#define HELPER_MEMORY_MAX (512ull << 20) /* memory.max; RLIMIT_AS: this above what is mapped at start */
#define HELPER_PIDS_MAX 1                /* the helper alone: it never forks */
#define HELPER_CPU_S 5                   /* RLIMIT_CPU soft (SIGXCPU); hard one second later */
#define WORK_CPU_BUDGET_MS 4000          /* walks stop (truncated) after this much CPU */
#define VIEW_MAX BK_FILE_VIEW_MAX        /* larger files are unviewable (422) */
#define BINARY_PROBE 8192                /* a NUL byte in here: binary */
#define EDIT_RESULT_MAX (64u << 20)      /* str_replace result */
#define RESULT_MAX BK_FILE_RESULT_MAX    /* string bytes of a result (its JSON is larger still) */
#define REC_MAX (128u * 1024u)           /* one record on the helper pipe */
#define LS_MAX 10000
#define GLOB_MATCH_MAX 10000
#define WALK_VISIT_MAX 100000
#define WALK_DEPTH_MAX 32
#define GREP_TEXT_MAX 4096               /* bytes of a grep match's line (cut on a character) */
/* PCRE2's bounds on one line's match: a pattern that backtracks beyond
 * them stops the search (truncated, with an error sentence). */
#define GREP_MATCH_LIMIT 1000000
#define GREP_DEPTH_LIMIT 10000
#define GREP_HEAP_KIB (64u * 1024u)
#define GREP_BYTES_MAX (256u << 20)
#define PRESENT_BYTES_MAX (256u << 20)
#define WIPE_UNAVAILABLE_MAX 64         /* what the wipe could not reach, named in its error */
#define WIPE_OPS_MAX 2000000
#define SYMLINK_HOPS_MAX 16

/* The request as the helper gets it: the validated request and who the
 * helper becomes. */
struct freq {
	struct bk_file_req rq;
	uid_t uid;
	gid_t gid;
	int cap_last;
	pid_t parent; /* the agent, for the helper's parent-death check */
	uint32_t n_cg; /* v1 cgroups the helper joins (fds FD_CG0..): it checks it did */
};

/* ---- wire.c: the encodings that cross exec ------------------------------------------- */

/* The request into a malloc'd buffer (at most REQ_MAX bytes). */
int bkf_req_encode(const struct freq *q, char **out, size_t *outlen);
/* The request back in the helper, every length and field checked again:
 * its strings point into buf (which must stay alive); q->rq.paths is
 * malloc'd. -EPROTO when malformed. */
int bkf_req_decode(char *buf, size_t len, struct freq *q);

/* Records on the helper's pipe: a header, then len (<= REC_MAX) bytes. */
enum {
	REC_END = 2,     /* a 200 result's scalars: the last record */
	REC_HBEGIN = 3,  /* present_files: file idx starts (u32 idx) */
	REC_HDATA = 4,   /* present_files: bytes of file idx (u32 idx, bytes) */
	REC_ERROR = 5,   /* a refusal (status, code, detail): the last record */
	REC_CONTENT = 6, /* view: the next piece of the content */
	REC_ENTRY = 7,   /* one element of a list of the result */
};
struct rec_hdr {
	uint32_t type;
	uint32_t len;
};

int bkf_rec_write(int fd, uint32_t type, const void *p1, size_t n1, const void *p2, size_t n2);
/* Helper side: the records of a 200 result, or of a refusal. */
int bkf_send_result(int fd, const struct bk_file_result *r);
int bkf_send_error(int fd, int status, const char *code, const char *detail);
/* Bytes of the strings a result holds (a lower bound of its JSON's). */
size_t bkf_result_bytes(const struct bk_file_result *r);

/* Agent side: add one record (not HBEGIN/HDATA) of a result for op to r;
 * *bytes counts string bytes received, *done is set by the last record.
 * -EPROTO for a record that does not belong, -EMSGSIZE over the bounds. */
int bkf_rec_apply(struct bk_file_result *r, enum bk_file_op op, uint32_t type, const char *p, size_t n,
		  size_t *bytes, bool *done);

/* ---- context.c: the helper's context and replies ---------------------------------------- */

struct hctx {
	int chan;
	const struct bk_file_req *rq;
	uid_t uid;           /* the sandbox user the helper runs as */
	uint64_t budget_end; /* monotonic ns */
};

/* The helper's answer when it reached its memory limit (507 resource_limit). */
_Noreturn void bkf_out_of_memory(struct hctx *h);

/* Send r (status 200) and exit. */
_Noreturn void bkf_reply(struct hctx *h, const struct bk_file_result *r);
/* Send a refusal and exit. */
_Noreturn void bkf_fail(struct hctx *h, int status, const char *code, const char *fmt, ...) _printf_(4, 5);
/* The refusal for a positive errno about the virtual path path. */
_Noreturn void bkf_errno(struct hctx *h, int err, const char *path);
bool bkf_over_budget(const struct hctx *h);
/* n bytes as a valid UTF-8 string without NULs (U+FFFD for the rest), or
 * the helper answers resource_limit. */
char *bkf_sanitized(struct hctx *h, const char *s, size_t n);
/* A copy of s, or the helper answers resource_limit. */
char *bkf_strdup(struct hctx *h, const char *s);
/* A result array of n elements of size sz, or the helper answers
 * resource_limit. */
void *bkf_calloc(struct hctx *h, size_t n, size_t sz);

/* ---- ops.c, wipe.c: the operations (helper side; fill r or refuse) ---------------------- */
void bkf_op_create(struct hctx *h, struct bk_file_result *r);
void bkf_op_view(struct hctx *h, struct bk_file_result *r);
void bkf_op_str_replace(struct hctx *h, struct bk_file_result *r);
void bkf_op_ls(struct hctx *h, struct bk_file_result *r);
void bkf_op_glob(struct hctx *h, struct bk_file_result *r);
void bkf_op_grep(struct hctx *h, struct bk_file_result *r);
void bkf_op_present(struct hctx *h, struct bk_file_result *r);
void bkf_op_read_image(struct hctx *h, struct bk_file_result *r);
void bkf_op_wipe(struct hctx *h, struct bk_file_result *r);
/* The wipe's privileged part, before the helper enters the container's
 * mount namespace and drops privileges: read the container's writable
 * mounts, empty its IPC namespace (which the helper stays in). */
void bkf_wipe_prepare(int pidfd);

/* ---- walk.c: bounded walks ----------------------------------------------------------- */

/* glob: the regular files below the directory fd (the request's path)
 * whose path matches h->rq->pattern at any depth (Python's rglob), sorted,
 * into r->entries, r->truncated. */
void bkf_glob_walk(struct hctx *h, int fd, struct bk_file_result *r);
/* grep: the lines matching re in the file or directory fd (the request's
 * path) into r->grep, r->truncated; at most h->rq->max_matches. */
void bkf_grep_walk(struct hctx *h, const pcre2_code *re, int fd, bool is_dir, struct bk_file_result *r);

/* ---- fs.c: filesystem primitives ------------------------------------------------------- */

/* The root directory itself: no symlink anywhere on its path. */
int bkf_open_root(enum bk_vroot r, int flags);
/* A mount point by its absolute path: no symlink anywhere on it. */
int bkf_open_mount_root(const char *path, int flags);
/* rel below rootfd; whatever symlinks say, resolution stays in the root. */
int bkf_in_root(int rootfd, const char *rel, int flags, mode_t mode);
/* One name in a directory, which must not be a symlink nor a mount. */
int bkf_beneath(int dirfd, const char *name, int flags);
/* All of fd (at most max bytes, else -EFBIG), NUL-terminated. */
int bkf_read_all(int fd, size_t max, char **out, size_t *outlen);
bool bkf_is_binary(const char *buf, size_t len);
/* Blocking reads from now on (files are opened O_NONBLOCK so that a FIFO
 * cannot hang the helper at open). */
void bkf_blocking(int fd);

struct dent {
	char *name;
	struct stat st;
	bool stat_ok;
};
/* Up to max entries of the directory dfd (not consumed), sorted by name,
 * with lstat data. *more is set when entries were left out. */
int bkf_read_dir(int dfd, size_t max, struct dent **out, size_t *nout, bool *more);
void bkf_dents_free(struct dent *d, size_t n);
enum bk_file_type bkf_dent_type(const struct dent *d);

/* Where a write to rel lands: the directory (*dirfd) and the name in it
 * (base). A final symlink is followed within the root; with mkdirs,
 * missing directories of rel are created. */
int bkf_resolve_final(int rootfd, const char *rel, bool mkdirs, int *dirfd, char base[BK_NAME_MAX + 1]);

/* A temp file in a directory, renamed over its target when complete. */
struct tmpfile {
	int dirfd; /* borrowed */
	int fd;
	char name[64];
};
int bkf_tmp_open(struct tmpfile *t, int dirfd, mode_t mode);
int bkf_tmp_write(struct tmpfile *t, const char *p, size_t n);
void bkf_tmp_abort(struct tmpfile *t);
/* fsync, then rename over base; on failure the temp file is removed. old:
 * the file replaced (its mode is kept), or NULL. */
int bkf_tmp_commit(struct tmpfile *t, const char *base, const struct stat *old);
int bkf_atomic_write(int dirfd, const char *base, const char *data, size_t len, const struct stat *old);

/* Python's universal newlines, in place: "\r\n" and a lone "\r" read as
 * "\n" (/view, /grep). Returns the new length. */
size_t bkf_universal_newlines(char *s, size_t n);
