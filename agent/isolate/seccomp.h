/* SPDX-License-Identifier: Apache-2.0 */
/* The seccomp layer (issue 13): one classic-BPF filter per exec, built once
 * at agent start and installed by the exec child after the privilege drop
 * (no_new_privs) and just before execve, so that nothing of the command
 * runs without it. It answers EPERM (ENOSYS for clone3), never kills, so
 * that programs degrade as they would on a kernel without the facility:
 *
 *   socket()       only AF_UNIX, AF_INET, AF_INET6, and AF_NETLINK with
 *                  protocol NETLINK_ROUTE (the cgroup sock_create hook of
 *                  the BPF layer sees inet sockets only: AF_VSOCK,
 *                  AF_PACKET, AF_BLUETOOTH, ... would pass it)
 *   socketpair()   AF_UNIX only
 *   clone/unshare  no CLONE_NEW* flag (a user namespace hands out
 *                  capabilities over fresh namespaces: nftables, mounts)
 *   ioctl          not TIOCSTI (faking a terminal's input) nor TIOCLINUX;
 *                  every other terminal ioctl is allowed (issue 18's PTYs)
 *   clone3         ENOSYS (its flags are in memory the filter cannot
 *                  read; glibc falls back to clone)
 *   EPERM          io_uring_setup/enter/register (its operations bypass
 *                  seccomp), bpf, perf_event_open, userfaultfd, kexec_load,
 *                  kexec_file_load, init/finit/delete_module, add_key,
 *                  keyctl, request_key, mount, umount2, pivot_root,
 *                  move_mount, open_tree, open_tree_attr, fsopen, fsconfig,
 *                  fsmount, fspick, mount_setattr, setns,
 *                  open_by_handle_at, syslog
 *   another ABI    EPERM for any other audit arch (i386 via int 0x80) and
 *                  for the x32 numbers (nr & 0x40000000)
 *
 * Everything else is allowed (the kernel's action cache then skips the
 * filter for those syscalls). ptrace, process_vm_* and pidfd_* are left
 * alone: the command is init of its own pid namespace, so it can name only
 * its own processes (its monitor and the container's are outside it).
 *
 * The receipt (isolation.seccomp) is read back from /proc/self/status of
 * the exec's process after the install: Seccomp (2 = filter) and
 * Seccomp_filters (ours plus any the agent itself runs under). */
#pragma once
#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define BK_SECCOMP_MAX_INSNS 128

struct bk_seccomp {
	struct sock_filter insns[BK_SECCOMP_MAX_INSNS];
	unsigned short len;
};

/* Build the filter (at agent start). 0, or -E2BIG when a jump or the
 * program does not fit (a bug: the start fails). */
int bk_seccomp_build(struct bk_seccomp *f);

/* Install f in the calling thread (no_new_privs must be set). 0 or
 * -errno. Async-signal-safe. */
int bk_seccomp_install(const struct bk_seccomp *f);

/* The calling thread's seccomp mode as the kernel holds it
 * (PR_GET_SECCOMP: 2 under a filter), or -errno. Async-signal-safe. */
int bk_seccomp_mode_self(void);

