/* SPDX-License-Identifier: Apache-2.0 */
/* The exec's seccomp filter (agent/isolate/seccomp.c) against the real
 * kernel. Each case forks a child that sets no_new_privs, installs the
 * filter built as at agent start, and makes the calls; the same calls in a
 * control child without the filter show that the refusals come from the
 * filter (this test runs as root, so most of them would succeed, or fail
 * with another errno). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/isolate/seccomp.h"
#include "agent/parse/procstatus.h"
#include "lib/missing.h"
#include "lib/util.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

static int bad;

/* r: a syscall's return; want_errno 0: must succeed (an fd is closed) */
static void expect(const char *what, long r, int want_errno)
{
	int e = errno;
	if (want_errno == 0 && r >= 0) {
		if (r > 2 && r < 65536 && strncmp(what, "getpid", 6) != 0)
			close((int)r);
		return;
	}
	if (want_errno != 0 && r < 0 && e == want_errno)
		return;
	fprintf(stderr, "  %s: returned %ld, errno %d (%s), want %s\n", what, r, r < 0 ? e : 0,
		r < 0 ? strerror(e) : "-", want_errno ? strerror(want_errno) : "success");
	bad++;
}

static long raw_clone(unsigned long flags)
{
	long r = syscall(SYS_clone, flags | SIGCHLD, 0, NULL, NULL, 0);
	if (r == 0)
		_exit(0);
	if (r > 0)
		waitpid((pid_t)r, NULL, 0);
	return r;
}

#if defined(__x86_64__)
static bool have_int80 = true; /* test_filtered's probe */

static long int80(long nr)
{
	long r;
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(nr) : "memory");
	return r;
}
#endif

/* The calls under the filter, in a child: exits with the number of
 * surprises. */
static void filtered_calls(void)
{
	struct bk_seccomp f;
	if (bk_seccomp_build(&f) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || bk_seccomp_install(&f) < 0)
		_exit(100);
	int mode = -1, filters = -1;
	char buf[8192];
	int sfd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t sn = sfd >= 0 ? read(sfd, buf, sizeof(buf)) : -1;
	struct bk_proc_status ps;
	expect("read back /proc/self/status", sn > 0 ? bk_proc_status_parse(buf, (size_t)sn, &ps) : -EIO, 0);
	mode = ps.seccomp;
	filters = ps.seccomp_filters;
	int kmode = bk_seccomp_mode_self();
	if (mode != SECCOMP_MODE_FILTER || filters < 1 || kmode != SECCOMP_MODE_FILTER) {
		fprintf(stderr, "  read back: Seccomp %d, Seccomp_filters %d, PR_GET_SECCOMP %d\n", mode, filters, kmode);
		bad++;
	}
	/* the families a command needs */
	expect("socket(AF_UNIX, SOCK_STREAM)", socket(AF_UNIX, SOCK_STREAM, 0), 0);
	expect("socket(AF_UNIX, SOCK_DGRAM|SOCK_CLOEXEC|SOCK_NONBLOCK)",
	       socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), 0);
	expect("socket(AF_INET, SOCK_STREAM)", socket(AF_INET, SOCK_STREAM, 0), 0);
	expect("socket(AF_INET6, SOCK_DGRAM)", socket(AF_INET6, SOCK_DGRAM, 0), 0);
	expect("socket(AF_NETLINK, NETLINK_ROUTE)", socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), 0);
	expect("socketpair(AF_UNIX)", ({ int sv[2]; int r = socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
					 if (r == 0) { close(sv[0]); close(sv[1]); } r; }), 0);
	/* the others */
	expect("socket(AF_VSOCK)", socket(AF_VSOCK, SOCK_STREAM, 0), EPERM);
	expect("socket(AF_PACKET)", socket(AF_PACKET, SOCK_RAW, 0), EPERM);
	expect("socket(AF_NETLINK, NETLINK_AUDIT)", socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT), EPERM);
	expect("socket(AF_NETLINK, NETLINK_SOCK_DIAG)", socket(AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG), EPERM);
	expect("socket(AF_VSOCK with high bits set)", syscall(SYS_socket, (1UL << 32) | AF_VSOCK, SOCK_STREAM, 0),
	       EPERM);
	expect("socket(AF_NETLINK, high bits | NETLINK_AUDIT)",
	       syscall(SYS_socket, AF_NETLINK, SOCK_RAW, (1UL << 32) | NETLINK_AUDIT), EPERM);
	expect("socketpair(AF_INET)", ({ int sv[2]; socketpair(AF_INET, SOCK_STREAM, 0, sv); }), EPERM);
	/* namespaces */
	expect("unshare(0)", unshare(0), 0);
	expect("unshare(CLONE_FILES)", unshare(CLONE_FILES), 0);
	expect("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER), EPERM);
	expect("unshare(CLONE_NEWNET)", unshare(CLONE_NEWNET), EPERM);
	expect("unshare(CLONE_NEWTIME)", unshare(CLONE_NEWTIME), EPERM);
	expect("setns(-1, 0)", setns(-1, 0), EPERM);
	expect("fork()", raw_clone(0), 0);
	expect("clone(CLONE_NEWUSER)", raw_clone(CLONE_NEWUSER), EPERM);
	expect("clone(CLONE_NEWNS)", raw_clone(CLONE_NEWNS), EPERM);
	struct clone_args ca = { .exit_signal = SIGCHLD };
	expect("clone3", syscall(SYS_clone3, &ca, sizeof(ca)), ENOSYS);
	/* kernel surfaces */
	struct io_uring_params p = { 0 };
	expect("io_uring_setup", syscall(__NR_io_uring_setup, 1, &p), EPERM);
	expect("io_uring_enter", syscall(__NR_io_uring_enter, -1, 0, 0, 0, NULL, 0), EPERM);
	expect("bpf", syscall(SYS_bpf, 0, NULL, 0), EPERM);
	expect("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
	expect("userfaultfd", syscall(SYS_userfaultfd, 0), EPERM);
	expect("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0), EPERM);
	expect("add_key", syscall(SYS_add_key, NULL, NULL, NULL, 0, 0), EPERM);
	expect("mount", mount("none", "/nonexistent-bk", "tmpfs", 0, NULL), EPERM);
	expect("umount2", umount2("/nonexistent-bk", 0), EPERM);
	expect("fsopen", syscall(__NR_fsopen, "tmpfs", 0), EPERM);
	expect("open_tree", syscall(__NR_open_tree, -1, "/", 0), EPERM);
	expect("open_tree_attr", syscall(__NR_open_tree_attr, -1, "/", 0, NULL, 0), EPERM);
	expect("open_by_handle_at", syscall(SYS_open_by_handle_at, -1, NULL, 0), EPERM);
	expect("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0), EPERM);
	/* a terminal's ioctls pass (EBADF: the kernel saw the call), faking
	 * its input does not (issue 18) */
	expect("ioctl(-1, TIOCGWINSZ)", ({ struct winsize ws; ioctl(-1, TIOCGWINSZ, &ws); }), EBADF);
	expect("ioctl(-1, TIOCSWINSZ)", ({ struct winsize ws = { 0 }; ioctl(-1, TIOCSWINSZ, &ws); }), EBADF);
	expect("ioctl(-1, TIOCSTI)", ({ char c = 'x'; ioctl(-1, TIOCSTI, &c); }), EPERM);
	expect("ioctl(-1, TIOCLINUX)", ({ char c = 0; ioctl(-1, TIOCLINUX, &c); }), EPERM);
	expect("ioctl(-1, TIOCSTI with high bits set)", syscall(SYS_ioctl, -1, (1UL << 32) | TIOCSTI, NULL), EPERM);
	/* other ABIs */
#if defined(__x86_64__)
	expect("x32 getpid", syscall(SYS_getpid | 0x40000000), EPERM);
	if (have_int80) {
		long r = int80(20); /* getpid in the i386 table */
		if (r != -EPERM) {
			fprintf(stderr, "  int 0x80 getpid: %ld, want -EPERM\n", r);
			bad++;
		}
	}
#endif
	expect("getpid", getpid(), 0);
	_exit(bad);
}

/* The same families and calls without the filter (root): what the filter
 * changes. Exits with the number of surprises. */
static void control_calls(void)
{
	expect("control: socket(AF_VSOCK)", socket(AF_VSOCK, SOCK_STREAM, 0), 0);
	expect("control: socket(AF_PACKET)", socket(AF_PACKET, SOCK_RAW, 0), 0);
	expect("control: socket(AF_NETLINK, NETLINK_AUDIT)", socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT), 0);
	expect("control: unshare(CLONE_NEWNET)", unshare(CLONE_NEWNET), 0);
	expect("control: setns(-1, 0)", setns(-1, 0), EBADF);
	expect("control: ioctl(-1, TIOCSTI)", ({ char c = 'x'; ioctl(-1, TIOCSTI, &c); }), EBADF);
	expect("control: bpf(0, NULL)", syscall(SYS_bpf, 0, NULL, 0), EINVAL);
	expect("control: mount on a missing path", mount("none", "/nonexistent-bk", "tmpfs", 0, NULL), ENOENT);
	struct io_uring_params p = { 0 };
	long fd = syscall(__NR_io_uring_setup, 1, &p);
	if (fd < 0 && errno != EPERM)
		expect("control: io_uring_setup", fd, 0);
	else if (fd >= 0)
		close((int)fd);
	_exit(bad);
}

static int in_child(void (*fn)(void))
{
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0)
		fn();
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void test_build(void **state)
{
	struct bk_seccomp f;
	assert_int_equal(bk_seccomp_build(&f), 0);
	assert_true(f.len > 10 && f.len <= BK_SECCOMP_MAX_INSNS);
	/* it ends in returns, never falls off the end */
	assert_int_equal(BPF_CLASS(f.insns[f.len - 1].code), BPF_RET);
}

/* ---- the whole table, by running the program in user space ------------------------- */

/* A classic-BPF interpreter for the instructions the builder emits; any
 * other instruction fails the test. */
static uint32_t run(const struct bk_seccomp *f, const struct seccomp_data *d)
{
	uint32_t A = 0;
	for (unsigned pc = 0; pc < f->len; pc++) {
		const struct sock_filter *in = &f->insns[pc];
		switch (in->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			assert_true(in->k + 4 <= sizeof(*d) && in->k % 4 == 0);
			memcpy(&A, (const char *)d + in->k, 4);
			break;
		case BPF_RET | BPF_K: return in->k;
		case BPF_JMP | BPF_JEQ | BPF_K: pc += A == in->k ? in->jt : in->jf; break;
		case BPF_JMP | BPF_JGE | BPF_K: pc += A >= in->k ? in->jt : in->jf; break;
		case BPF_JMP | BPF_JGT | BPF_K: pc += A > in->k ? in->jt : in->jf; break;
		case BPF_JMP | BPF_JSET | BPF_K: pc += (A & in->k) ? in->jt : in->jf; break;
		default: fail_msg("instruction %u: unexpected code 0x%x", pc, in->code);
		}
	}
	fail_msg("the program fell off its end");
	return 0;
}

#define EPERM_RET (SECCOMP_RET_ERRNO | EPERM)
#define ENOSYS_RET (SECCOMP_RET_ERRNO | ENOSYS)

/* Written here again, apart from seccomp.c: what must be refused. */
static const int must_eperm[] = {
	__NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register, __NR_bpf, __NR_perf_event_open,
	__NR_userfaultfd, __NR_kexec_load, __NR_kexec_file_load, __NR_init_module, __NR_finit_module,
	__NR_delete_module, __NR_add_key, __NR_keyctl, __NR_request_key, __NR_mount, __NR_umount2,
	__NR_pivot_root, __NR_move_mount, __NR_open_tree, __NR_open_tree_attr, __NR_fsopen, __NR_fsconfig,
	__NR_fsmount, __NR_fspick, __NR_mount_setattr, __NR_setns, __NR_open_by_handle_at, __NR_syslog,
};

static void test_table(void **state)
{
	struct bk_seccomp f;
	assert_int_equal(bk_seccomp_build(&f), 0);
	struct seccomp_data d = { .arch = AUDIT_ARCH_X86_64 };
	/* every number, arguments zero */
	for (uint32_t nr = 0; nr < 1024; nr++) {
		d.nr = (int)nr;
		uint32_t want = SECCOMP_RET_ALLOW;
		for (size_t i = 0; i < ARRAY_SIZE(must_eperm); i++)
			if ((uint32_t)must_eperm[i] == nr)
				want = EPERM_RET;
		if (nr == __NR_clone3)
			want = ENOSYS_RET;
		if (nr == __NR_socket || nr == __NR_socketpair) /* family 0 (AF_UNSPEC) */
			want = EPERM_RET;
		uint32_t got = run(&f, &d);
		if (got != want)
			fail_msg("syscall %u: 0x%x, want 0x%x", nr, got, want);
		d.nr = (int)(nr | 0x40000000); /* x32 */
		assert_int_equal(run(&f, &d), EPERM_RET);
	}
	d.nr = -1;
	assert_int_equal(run(&f, &d), EPERM_RET);
	/* another ABI */
	d.arch = AUDIT_ARCH_I386;
	for (int nr = 0; nr < 512; nr++) {
		d.nr = nr;
		assert_int_equal(run(&f, &d), EPERM_RET);
	}
	d.arch = AUDIT_ARCH_X86_64;
	/* socket families and netlink protocols */
	for (uint64_t fam = 0; fam < 64; fam++)
		for (uint64_t proto = 0; proto < 32; proto++) {
			d.nr = __NR_socket;
			d.args[0] = fam | (fam == 40 ? 1ull << 32 : 0); /* a high half changes nothing */
			d.args[1] = SOCK_RAW | SOCK_CLOEXEC;
			d.args[2] = proto;
			bool ok = fam == AF_UNIX || fam == AF_INET || fam == AF_INET6 ||
				  (fam == AF_NETLINK && proto == NETLINK_ROUTE);
			assert_int_equal(run(&f, &d), ok ? SECCOMP_RET_ALLOW : EPERM_RET);
			d.nr = __NR_socketpair;
			assert_int_equal(run(&f, &d), fam == AF_UNIX ? SECCOMP_RET_ALLOW : EPERM_RET);
		}
	/* namespace flags, one bit at a time */
	for (int bit = 0; bit < 64; bit++) {
		uint64_t fl = 1ull << bit;
		bool ns = fl & (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
				CLONE_NEWPID | CLONE_NEWNET);
		d.args[0] = fl;
		d.nr = __NR_clone;
		assert_int_equal(run(&f, &d), ns ? EPERM_RET : SECCOMP_RET_ALLOW);
		d.nr = __NR_unshare;
		assert_int_equal(run(&f, &d), ns || fl == CLONE_NEWTIME ? EPERM_RET : SECCOMP_RET_ALLOW);
	}
}

/* Does this kernel have the i386 entry (int 0x80) at all? Without it
 * (ia32 emulation off: the instruction faults, SIGSEGV) the i386 table
 * cannot be reached, filter or not, and there is nothing to check there. */
static void int80_probe(void)
{
	signal(SIGSEGV, SIG_DFL); /* not cmocka's: the fault must end this child */
#if defined(__x86_64__)
	int80(20);
#endif
	_exit(0);
}

static void test_filtered(void **state)
{
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0)
		int80_probe();
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	have_int80 = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (!have_int80)
		fprintf(stderr, "  int 0x80: this kernel has no i386 entry (the probe ended by signal %d): "
				"not checked\n", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	assert_int_equal(in_child(filtered_calls), 0);
}
static void test_control(void **state) { assert_int_equal(in_child(control_calls), 0); }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_filtered),
		cmocka_unit_test(test_control),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
