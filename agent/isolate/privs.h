/* SPDX-License-Identifier: Apache-2.0 */
/* The one privilege drop (systemd's drop_privileges(), bubblewrap's
 * drop_privs()). Every de-privileged process the agent makes — the exec
 * child, its monitor, the file helper — goes through this routine and no
 * other, so the rules exist once:
 *   - root is refused: boxkite only ever acts as a non-root sandbox user;
 *   - bounding set emptied (cap 0..cap_last), ambient set cleared;
 *   - supplementary groups cleared, then gid, then uid set (real, effective
 *     and saved), each read back from the kernel;
 *   - no_new_privs set (execve can never gain a privilege again);
 *   - not dumpable (no other process of the same uid may ptrace or read
 *     /proc of this one until it execs);
 *   - capget: effective, permitted and inheritable empty; every bounding
 *     and ambient bit read back clear.
 * Raw syscalls, not glibc's setres*id: in a clone3() child of a
 * multi-threaded process glibc would broadcast the change to threads that
 * do not exist there (and wait for them).
 * Async-signal-safe: no allocation, no locks (it runs between clone and
 * execve). Returns 0, or -errno (-EPERM when a read-back disagrees). */
#pragma once
#include <sys/types.h>

int bk_privs_drop(uid_t uid, gid_t gid, int cap_last);

struct exec_ctx;
/* The first step of an exec (layer "container"): its sandbox user is not
 * root — refused before anything is built (bk_privs_drop in the exec child
 * would refuse it too, later). */
int bk_step_sandbox_user(struct exec_ctx *x);
