/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel constants newer than the build host's headers (Debian 12 ships
 * 6.1 headers; the agent runs on 6.1 to 7.x). Defined here once, never in
 * a .c file (nsjail's missing_defs.h, systemd's missing_*.h). Every value
 * is the kernel's UAPI value; each names the release that added it. */
#pragma once
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL /* 5.7 */
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2) /* 5.11 */
#endif
#ifndef P_PIDFD
#define P_PIDFD 3 /* waitid on a pidfd, 5.4 */
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* 6.5 */
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452 /* 6.6 */
#endif
#ifndef F_SETPIPE_SZ
#define F_SETPIPE_SZ 1031
#endif
#ifndef __NR_landlock_create_ruleset /* 5.13 */
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467 /* 6.15: open_tree with mount attributes (the mount API) */
#endif
#ifndef MQUEUE_MAGIC
#define MQUEUE_MAGIC 0x19800202 /* ipc/mqueue.c: not in the uapi headers */
#endif
#ifndef ENOTSUPP
#define ENOTSUPP 524 /* the kernel's internal "operation not supported" (include/linux/errno.h), which the bpf syscall returns as is */
#endif
