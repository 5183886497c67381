/* SPDX-License-Identifier: Apache-2.0 */
/* The seccomp layer (see seccomp.h): the filter, written as classic BPF by
 * a small assembler with forward labels, its install, its read-back. */
#include "agent/isolate/seccomp.h"
#include "lib/missing.h"
#include "lib/util.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define BK_AUDIT_ARCH AUDIT_ARCH_X86_64
#define BK_X32_BIT 0x40000000u /* __X32_SYSCALL_BIT */
#elif defined(__aarch64__)
#define BK_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "the seccomp layer knows x86_64 and aarch64"
#endif

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Namespace flags. clone() carries the exit signal in its low byte
 * (CSIGNAL), where unshare() has CLONE_NEWTIME: clone() cannot make a time
 * namespace (only clone3 and unshare can). */
#define NS_FLAGS_CLONE                                                                                   \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |   \
	 CLONE_NEWNET)
#define NS_FLAGS_UNSHARE (NS_FLAGS_CLONE | CLONE_NEWTIME)

/* The low 32 bits of an argument: every argument looked at is an int or a
 * flag word whose high half the kernel ignores (socket's family and
 * protocol are int; clone and unshare take lower_32_bits of the flags). */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#else
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i) + 4)
#endif

/* Syscalls answered EPERM whatever their arguments. */
static const int denied[] = {
	__NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
	__NR_bpf, __NR_perf_event_open, __NR_userfaultfd,
	__NR_kexec_load, __NR_kexec_file_load, __NR_init_module, __NR_finit_module, __NR_delete_module,
	__NR_add_key, __NR_keyctl, __NR_request_key,
	__NR_mount, __NR_umount2, __NR_pivot_root, __NR_move_mount, __NR_open_tree, __NR_open_tree_attr,
	__NR_fsopen, __NR_fsconfig, __NR_fsmount, __NR_fspick, __NR_mount_setattr,
	__NR_setns, __NR_open_by_handle_at, __NR_syslog,
};

/* ---- a tiny assembler: jumps go forward to labels --------------------------------- */

#define MAX_LABELS 96
#define L_NEXT (-1) /* the next instruction */

struct as {
	struct bk_seccomp *f;
	int at[MAX_LABELS];             /* where each label is (-1: not yet) */
	int n_labels;
	short jt[BK_SECCOMP_MAX_INSNS], jf[BK_SECCOMP_MAX_INSNS];
	bool full;
};

static int new_label(struct as *a)
{
	if (a->n_labels == MAX_LABELS) {
		a->full = true;
		return 0;
	}
	a->at[a->n_labels] = -1;
	return a->n_labels++;
}

static void emit(struct as *a, uint16_t code, uint32_t k, int jt, int jf)
{
	if (a->f->len >= BK_SECCOMP_MAX_INSNS) {
		a->full = true;
		return;
	}
	a->jt[a->f->len] = (short)jt;
	a->jf[a->f->len] = (short)jf;
	a->f->insns[a->f->len++] = (struct sock_filter){ .code = code, .k = k };
}

static void ld(struct as *a, uint32_t off) { emit(a, BPF_LD | BPF_W | BPF_ABS, off, L_NEXT, L_NEXT); }
static void ret(struct as *a, uint32_t v) { emit(a, BPF_RET | BPF_K, v, L_NEXT, L_NEXT); }
/* if (A op k) goto jt else goto jf */
static void jeq(struct as *a, uint32_t k, int jt, int jf) { emit(a, BPF_JMP | BPF_JEQ | BPF_K, k, jt, jf); }
static void jge(struct as *a, uint32_t k, int jt, int jf) { emit(a, BPF_JMP | BPF_JGE | BPF_K, k, jt, jf); }
static void jgt(struct as *a, uint32_t k, int jt, int jf) { emit(a, BPF_JMP | BPF_JGT | BPF_K, k, jt, jf); }
static void jset(struct as *a, uint32_t k, int jt, int jf) { emit(a, BPF_JMP | BPF_JSET | BPF_K, k, jt, jf); }
static void label(struct as *a, int l) { a->at[l] = a->f->len; }

static int resolve(struct as *a)
{
	if (a->full)
		return -E2BIG;
	for (unsigned i = 0; i < a->f->len; i++) {
		struct sock_filter *in = &a->f->insns[i];
		if (BPF_CLASS(in->code) != BPF_JMP)
			continue;
		int t[2] = { a->jt[i], a->jf[i] };
		uint8_t *dst[2] = { &in->jt, &in->jf };
		for (int k = 0; k < 2; k++) {
			if (t[k] != L_NEXT && a->at[t[k]] < 0)
				return -E2BIG;
			int off = t[k] == L_NEXT ? 0 : a->at[t[k]] - (int)i - 1;
			if (off < 0 || off > 255)
				return -E2BIG;
			*dst[k] = (uint8_t)off;
		}
	}
	return 0;
}

/* ---- the filter ------------------------------------------------------------------------ */

/* Syscall numbers [lo, hi] that go to one label. */
struct range {
	uint32_t lo, hi;
	int to;
};

static int by_nr(const void *x, const void *y)
{
	const struct range *p = x, *q = y;
	return p->lo < q->lo ? -1 : p->lo > q->lo;
}

/* The syscall number in A among the sorted ranges [l, r), everything else
 * allowed: a binary tree of JGE down to at most two ranges. The kernel
 * runs the filter once per syscall number at install time to cache the
 * numbers it always allows (seccomp_cache_prepare), so the depth of this
 * tree, not the length of the program, is what an install costs. */
static void tree(struct as *a, const struct range *rg, int l, int r)
{
	if (r - l <= 2) {
		for (int i = l; i < r; i++) {
			if (rg[i].lo == rg[i].hi) {
				jeq(a, rg[i].lo, rg[i].to, L_NEXT);
				continue;
			}
			int skip = new_label(a);
			jge(a, rg[i].lo, L_NEXT, skip);
			jgt(a, rg[i].hi, skip, rg[i].to);
			label(a, skip);
		}
		ret(a, SECCOMP_RET_ALLOW);
		return;
	}
	int m = (l + r) / 2, right = new_label(a);
	jge(a, rg[m].lo, right, L_NEXT);
	tree(a, rg, l, m);
	label(a, right);
	tree(a, rg, m, r);
}

int bk_seccomp_build(struct bk_seccomp *f)
{
	memset(f, 0, sizeof(*f));
	struct as a = { .f = f };
	int allow = new_label(&a), eperm = new_label(&a), enosys = new_label(&a), sock = new_label(&a),
	    sockpair = new_label(&a), clone = new_label(&a), unshare = new_label(&a), ioctl = new_label(&a);

	struct range rg[ARRAY_SIZE(denied) + 6] = {
		{ __NR_socket, __NR_socket, sock },       { __NR_socketpair, __NR_socketpair, sockpair },
		{ __NR_clone, __NR_clone, clone },        { __NR_unshare, __NR_unshare, unshare },
		{ __NR_clone3, __NR_clone3, enosys },     { __NR_ioctl, __NR_ioctl, ioctl },
	};
	int n = 6;
	for (size_t i = 0; i < ARRAY_SIZE(denied); i++)
		rg[n++] = (struct range){ (uint32_t)denied[i], (uint32_t)denied[i], eperm };
	qsort(rg, (size_t)n, sizeof(rg[0]), by_nr);
	int m = 0; /* neighbours with one destination become one range */
	for (int i = 0; i < n; i++) {
		if (m > 0 && rg[i].lo == rg[m - 1].hi + 1 && rg[i].to == rg[m - 1].to)
			rg[m - 1].hi = rg[i].hi;
		else if (m == 0 || rg[i].lo != rg[m - 1].hi) /* (a number listed twice) */
			rg[m++] = rg[i];
	}

	ld(&a, offsetof(struct seccomp_data, arch));
	jeq(&a, BK_AUDIT_ARCH, L_NEXT, eperm);
	ld(&a, offsetof(struct seccomp_data, nr));
#ifdef BK_X32_BIT
	jset(&a, BK_X32_BIT, eperm, L_NEXT);
#endif
	tree(&a, rg, 0, m);

	label(&a, sock);
	ld(&a, ARG_LO(0));
	jeq(&a, AF_UNIX, allow, L_NEXT);
	jeq(&a, AF_INET, allow, L_NEXT);
	jeq(&a, AF_INET6, allow, L_NEXT);
	jeq(&a, AF_NETLINK, L_NEXT, eperm);
	ld(&a, ARG_LO(2));
	jeq(&a, NETLINK_ROUTE, allow, eperm);

	label(&a, sockpair);
	ld(&a, ARG_LO(0));
	jeq(&a, AF_UNIX, allow, eperm);

	label(&a, clone);
	ld(&a, ARG_LO(0));
	jset(&a, NS_FLAGS_CLONE, eperm, allow);

	label(&a, unshare);
	ld(&a, ARG_LO(0));
	jset(&a, NS_FLAGS_UNSHARE, eperm, allow);

	/* a terminal's ioctls are allowed, but not faking its input
	 * (TIOCSTI) nor the console's (TIOCLINUX) */
	label(&a, ioctl);
	ld(&a, ARG_LO(1));
	jeq(&a, TIOCSTI, eperm, L_NEXT);
	jeq(&a, TIOCLINUX, eperm, allow);

	label(&a, allow);
	ret(&a, SECCOMP_RET_ALLOW);
	label(&a, eperm);
	ret(&a, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
	label(&a, enosys);
	ret(&a, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
	return resolve(&a);
}

int bk_seccomp_install(const struct bk_seccomp *f)
{
	struct sock_fprog prog = { .len = f->len, .filter = (struct sock_filter *)f->insns };
	if (f->len == 0)
		return -EINVAL;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return -errno;
	return 0;
}

int bk_seccomp_mode_self(void)
{
	int m = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
	return m < 0 ? -errno : m;
}
