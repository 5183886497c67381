/* SPDX-License-Identifier: Apache-2.0 */
/* The one privilege drop (systemd's drop_privileges(), bubblewrap's
 * drop_privs()). Every de-privileged process the agent makes — the exec
 * child, its monitor, the file helper — goes through this routine and no
 * other, so the rules exist once:
 *   - root is refused: boxkite only ever acts as a non-root sandbox user;
 *   - bounding set emptied (cap 0..cap_last; already empty in a process
 *     cloned from the agent after bk_privs_hand_over), ambient set cleared;
 *   - supplementary groups cleared, then gid, then uid set (real, effective
 *     and saved), each read back from the kernel; the inheritable set
 *     cleared;
 *   - no_new_privs set (execve can never gain a privilege again);
 *   - not dumpable (no other process of the same uid may ptrace or read
 *     /proc of this one until it execs);
 *   - all of it read back from the kernel before it returns: ids (real,
 *     effective, saved, filesystem), no groups, all five capability sets
 *     empty, no_new_privs set — from the thread's /proc status in one
 *     read where a procfs of its own pid namespace is at /proc, else by
 *     getres*id, getgroups, capget and every bounding and ambient bit.
 * Raw syscalls, not glibc's setres*id: in a clone3() child of a
 * multi-threaded process glibc would broadcast the change to threads that
 * do not exist there (and wait for them).
 * Async-signal-safe: no allocation, no locks (it runs between clone and
 * execve). Returns 0, or -errno (-EPERM when a read-back disagrees). */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

int bk_privs_drop(uid_t uid, gid_t gid, int cap_last);

/* The agent's own bounding set emptied, once at its start while it has one
 * thread (every later thread copies that thread's credentials, and every
 * process cloned from one of them), its capabilities kept in its
 * inheritable set instead. An exec child then has no bounding set left to
 * drop: 41 PR_CAPBSET_DROP calls, each a new set of credentials, cost
 * about 90 us here. A root execve gets bounding | inheritable as
 * permitted, so the file helper (channel.c) still starts with what it
 * needs; bk_privs_drop clears the inheritable set of whatever it
 * de-privileges. Read back from the thread's status. 0 (and
 * bk_privs_bset_empty set), or -errno: -EBUSY when a second thread exists
 * already (nothing changed); after another error the bounding set may be
 * partly emptied. Either way bk_privs_drop then empties it in each child,
 * as before. */
int bk_privs_hand_over(void);
/* Set by bk_privs_hand_over: this process's threads have no bounding set. */
extern bool bk_privs_bset_empty;

/* The drop read back in one look at what the kernel shows of this thread
 * (its status: ids, groups, all five capability sets, no_new_privs): 1 if
 * it agrees, -EPERM if not, 0 if it cannot be read here (a helper in a
 * mount namespace whose /proc is not of its pid namespace): then
 * bk_privs_drop asks the kernel call by call. */
int bk_privs_readback(uid_t uid, gid_t gid);

/* A file of procfs (path below /proc) into buf, whole (no allocation): 0,
 * or -errno (-EXDEV: what is there is not of a procfs; -EFBIG: larger than
 * cap). */
int bk_proc_read(const char *path, char *buf, size_t cap, size_t *len);
/* This thread's /proc/thread-self/status (bk_proc_read). */
int bk_self_status(char *buf, size_t cap, size_t *len);

struct exec_ctx;
/* The first step of an exec (layer "container"): its sandbox user is not
 * root — refused before anything is built (bk_privs_drop in the exec child
 * would refuse it too, later). */
int bk_step_sandbox_user(struct exec_ctx *x);
