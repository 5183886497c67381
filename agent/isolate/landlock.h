/* SPDX-License-Identifier: Apache-2.0 */
/* Command allowlist, layer 2 of 2 (issue 8): a Landlock ruleset that
 * handles only LANDLOCK_ACCESS_FS_EXECUTE and grants it on exactly the
 * files a session may execute — each allowed binary, /bin/sh (which runs
 * the command line) and their interpreters (ELF PT_INTERP, i.e. the
 * dynamic loader, and "#!" interpreters) — so that whatever layer 1
 * (agent/parse/cmdparse.h) missed, execve() of anything else fails with EACCES.
 * Reading and writing files is not affected (no other access is handled).
 *
 * Landlock rules attach to inodes: a copy of an allowed binary, or a
 * symlink named like one pointing elsewhere, is not executable; a hard
 * link to an allowed binary is (it is the same file).
 *
 * Known limits (SECURITY.md): Landlock checks execve() and the kernel's
 * open of the ELF interpreter, not mmap(PROT_EXEC). The dynamic loader must
 * be executable for dynamic binaries to start, and run as a program
 * ("/lib64/ld-linux-x86-64.so.2 /any/elf") it maps any readable ELF
 * without an execve check; likewise any allowed interpreter (sh builtins,
 * awk, python3, ...) runs arbitrary code inside itself. The kernel layer
 * stops programs from being *executed*, not code from running.
 *
 * Usage in the exec path (exec.h):
 *   step "landlock", in the agent (malloc fine): bk_step_landlock, i.e.
 *     rootfd = open("/proc/<sandbox init>/root", O_PATH)
 *     bk_landlock_ruleset_at(rootfd, req->landlock_paths, n, &rs)
 *   exec child, after no_new_privs, before execve:  bk_landlock_apply(rs)
 * All paths are resolved beneath rootfd (openat2 RESOLVE_IN_ROOT): the
 * sandbox's own files, its symlinks confined to its root, never the
 * agent's. Every function fails closed: on error nothing is applied and
 * no descriptor is leaked. */
#pragma once
#include <stddef.h>

#define BK_LANDLOCK_MAX_FILES 1024 /* files in one ruleset */
#define BK_LANDLOCK_INTERP_DEPTH 4 /* "#!" chain, as the kernel's limit */

/* Highest Landlock ABI the kernel supports, 0 when it has none (or it is
 * disabled). */
int bk_landlock_abi(void);

/* A ruleset handling LANDLOCK_ACCESS_FS_EXECUTE, granting it on each of
 * fds[0..n) (O_PATH or other descriptors of regular files; a directory is
 * refused with -EINVAL: a rule on it would allow everything beneath).
 * *ruleset_fd is O_CLOEXEC. -EOPNOTSUPP when Landlock is unavailable. The
 * fds stay the caller's. */
int bk_landlock_ruleset_fds(const int *fds, size_t n, int *ruleset_fd);

/* Restrict the calling thread (and what it executes) to the ruleset.
 * Async-signal-safe: one landlock_restrict_self() system call, meant for
 * the exec child between clone3() and execve(). The caller must already
 * have set PR_SET_NO_NEW_PRIVS (or the kernel refuses without
 * CAP_SYS_ADMIN). 0 or -errno; on error nothing was applied. The ruleset
 * fd stays open (O_CLOEXEC: execve closes it). */
int bk_landlock_apply(int ruleset_fd);

/* The canonical absolute path of path (absolute, or relative to "/")
 * beneath rootfd: every symlink resolved as the sandbox would see it,
 * confined to rootfd (a "../../etc" or "/etc" link target stays inside).
 * 0, -ENOENT, -ENOTDIR, -ELOOP (over 40 links), -ENAMETOOLONG, -errno. */
int bk_landlock_realpath_at(int rootfd, const char *path, char *out, size_t outlen);

/* Find a command word the way /bin/sh will: a word with '/' is a path
 * (relative to cwd), any other is looked up in the ':'-separated path_env
 * (an empty entry is cwd). The first regular file with an execute bit
 * wins. Writes its canonical path (bk_landlock_realpath_at) to out.
 * 0 or -ENOENT (no such command), -EACCES (found, but no execute bit),
 * -errno. */
int bk_landlock_which_at(int rootfd, const char *cwd, const char *path_env, const char *word, char *out,
			 size_t outlen);

/* A bk_cmd_resolve_fn (agent/parse/cmdparse.h) over bk_landlock_which_at. */
struct bk_landlock_resolver {
	int rootfd;           /* root of the sandbox container (or AT_FDCWD for "/") */
	const char *cwd;      /* working directory of the exec, e.g. "/workspace" */
	const char *path_env; /* PATH of the exec */
};
int bk_landlock_resolve(void *ud, const char *word, char *out, size_t outlen);

/* O_PATH descriptors (O_CLOEXEC) of the files to allow: /bin/sh, each of
 * paths[0..n), and the interpreters of every one of them, recursively up
 * to BK_LANDLOCK_INTERP_DEPTH, deduplicated by inode, all resolved beneath
 * rootfd. A path that does not exist or is not a regular file fails the
 * call; an interpreter that does not exist is skipped (nothing could
 * start it anyway). Returns the count written to fds (close them), or
 * -errno (then none is open); -E2BIG over maxfds. */
int bk_landlock_collect_at(int rootfd, const char *const *paths, size_t n, int *fds, size_t maxfds);

/* bk_landlock_collect_at + bk_landlock_ruleset_fds. */
int bk_landlock_ruleset_at(int rootfd, const char *const *paths, size_t n, int *ruleset_fd);

/* The same beneath "/" of the calling process. */
int bk_landlock_ruleset(const char *const *exec_paths, size_t n, int *ruleset_fd);

struct exec_ctx;
/* Step "landlock" of an exec whose session has allowed commands: the
 * ruleset for req->landlock_paths beneath the sandbox container's root
 * (x->landlock_fd), which the exec child applies. Fails with x->err.msg
 * "cannot open the sandbox container's root", "the kernel has no Landlock"
 * or the ruleset's error (strerror). */
int bk_step_landlock(struct exec_ctx *x);
