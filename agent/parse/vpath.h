/* SPDX-License-Identifier: Apache-2.0 */
/* Virtual paths of the file routes (API.md "Paths"): pure functions, no
 * system calls, unit-tested and fuzzed.
 *
 * The mapping is the reference sidecar's (sidecar_paths.py):
 *   "/", "", ".", "workspace"        -> /workspace
 *   "a/b", "./a/b", "workspace/a/b"  -> /workspace/a/b
 *   "/workspace/a/b"   -> root /workspace, rel "a/b", writable
 *   "/outputs/x", "/uploads/x", "/skills/x" -> /mnt/user-data/outputs/x, ...
 *   "/mnt/skills/x"    -> root /mnt/skills, rel "x", read-only
 *   "a\\b" is "a/b"; white space around the path is dropped
 *   "/workspace/../etc", "/etc/passwd", "/proc/self/root/..." -> -EPERM
 *   "/mnt", "/mnt/x"   -> -EPERM, but bk_vpath_parse_ls: root /mnt
 *
 * The lexical check here is only the first gate: the helper that touches
 * the files resolves rel with openat2(RESOLVE_IN_ROOT) below a descriptor
 * of the root, so symlinks (also ones swapped in during the call) can never
 * leave the root whatever this file decides. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define BK_VPATH_MAX 4096 /* bytes of a request path */
#define BK_NAME_MAX 255   /* bytes of one component */

enum bk_vroot {
	BK_VROOT_WORKSPACE,
	BK_VROOT_OUTPUTS,
	BK_VROOT_UPLOADS,
	BK_VROOT_SKILLS,
	BK_VROOT_TMP,
	BK_VROOT_MNT, /* /ls only: the /mnt hierarchy itself (bk_vpath_parse_ls) */
	BK_VROOT_N,
};

struct bk_vroot_info {
	const char *path; /* absolute path in the sandbox container */
	bool writable;
};
extern const struct bk_vroot_info bk_vroots[BK_VROOT_N];

struct bk_vpath {
	enum bk_vroot root;
	bool writable;
	bool trailing_slash;          /* the request named a directory ("a/b/") */
	char rel[BK_VPATH_MAX + 1];   /* "." for the root itself, else "a/b" (no "", ".", "..") */
	char abs[BK_VPATH_MAX + 64];  /* normalised virtual path: "/workspace/a/b" */
};

/* Validate and normalise the request path in[0..len). Returns 0, or
 *   -EINVAL        empty
 *   -EILSEQ        a NUL byte
 *   -ENAMETOOLONG  longer than BK_VPATH_MAX, or a component over BK_NAME_MAX
 *   -EPERM         not under an allowed root, or a ".." that leaves the root
 *                  (also transiently: "/tmp/../tmp/x" is refused). */
int bk_vpath_parse(const char *in, size_t len, struct bk_vpath *out);
/* As bk_vpath_parse, and a path under /mnt that is in no other root gets
 * root BK_VROOT_MNT (read-only): /ls may list the /mnt hierarchy. */
int bk_vpath_parse_ls(const char *in, size_t len, struct bk_vpath *out);
/* A real absolute path as it is (no mapping, no aliases: what a command or
 * the file helper names): the same roots, and /mnt when mnt is set. */
int bk_vpath_parse_abs(const char *in, size_t len, bool mnt, struct bk_vpath *out);

static inline bool bk_vpath_is_root(const struct bk_vpath *v) { return v->rel[0] == '.' && v->rel[1] == '\0'; }

/* Split a normalised rel path into its directory part (written to dir,
 * "." when there is none) and its last component (returned, points into
 * rel). -ENAMETOOLONG when dir does not fit. */
int bk_vpath_split(const char *rel, char *dir, size_t dirlen, const char **base);

/* Join a normalised virtual directory and a relative suffix ("a/b") into
 * out. -ENAMETOOLONG when it does not fit. */
int bk_vpath_join(const char *dir, const char *suffix, char *out, size_t outlen);

/* ---- glob patterns ------------------------------------------------------
 * Segments separated by '/', each matched with fnmatch(3) (FNM_PERIOD: a
 * leading '.' must be matched explicitly); a "**" segment matches zero or
 * more directories (not hidden ones). */
#define BK_GLOB_MAX 1024     /* bytes of a pattern */
#define BK_GLOB_SEGS 64      /* segments of a pattern */

/* Validate a glob pattern relative to a base directory: non-empty, at most
 * BK_GLOB_MAX bytes / BK_GLOB_SEGS segments, no ".." segment, not absolute.
 * 0 or -EINVAL / -ENAMETOOLONG / -EPERM (".."). */
int bk_glob_check(const char *pattern);
/* Does the relative path (segments separated by '/') match the pattern? */
bool bk_glob_match(const char *pattern, const char *path);
/* Python's Path.rglob(pattern) (the reference's /glob): does the pattern
 * match the relative path's last segments, with pathlib's wildcards ('*'
 * matches a leading '.', '\\' is literal, "**" is any directories)? */
bool bk_glob_match_rglob(const char *pattern, const char *path);
/* Whether the pattern can match paths deeper than `depth` segments (it has
 * a "**" or more segments than that). */
bool bk_glob_deeper(const char *pattern, int depth);
/* An absolute pattern ("/workspace/src/ ** / *.c") is split into its longest
 * prefix of segments without glob magic (written to base, a path for
 * bk_vpath_parse) and the rest (returned; points into pattern). A pattern
 * without magic at all keeps its last segment as the rest. NULL when base
 * does not fit. */
const char *bk_glob_split_abs(const char *pattern, char *base, size_t baselen);
