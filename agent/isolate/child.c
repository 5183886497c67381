/* SPDX-License-Identifier: Apache-2.0 */
/* The exec child and its spawn (see child.h). */
#include "agent/isolate/child.h"
#include "agent/isolate/pty.h"
#include "agent/isolate/landlock.h"
#include "agent/isolate/masks.h"
#include "agent/isolate/netlink.h"
#include "agent/isolate/privs.h"
#include "agent/isolate/seccomp.h"
#include "agent/isolate/step.h"
#include "agent/parse/netdev.h"
#include "agent/parse/procstatus.h"
#include "lib/clone3.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/missing.h"
#include "lib/util.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

/* The agent's word to the monitor that it has read the command's
 * /proc/<pid>/status; the monitor's wait for it after the command ended. */
#define BK_READ_SIGNAL SIGUSR1
#define BK_READ_WAIT_S 10

/* The child's report on the info pipe. */
struct child_msg {
	int kind; /* 1 ready, 2 error, 3 parked (a warm slot waiting for its command) */
	int err;
	char layer[24];
	char msg[200];
	uint64_t netns_ino;
	int seccomp_mode;                  /* PR_GET_SECCOMP after the install */
	int landlock_enforced;             /* landlock_restrict_self returned 0 */
	uint64_t t_start, t_ready;         /* CLOCK_MONOTONIC: the first step, the report */
	uint32_t t_ns[BK_PH_N];            /* the steps' time by phase (enum bk_phase) */
	int n_if;
	char ifaces[BK_MAX_IFACES][IFNAMSIZ];
};

/* A warm slot's command (warm.h), sent by the agent on the slot's go
 * socket: this header (with the Landlock ruleset as SCM_RIGHTS when
 * landlock is 1), then cwd, command and env_n "K=V" strings, each
 * NUL-terminated, env_len bytes in all. */
#define BK_GO_MAGIC 0x6b78626fu
struct go_hdr {
	uint32_t magic;
	uint32_t cwd_len, cmd_len, env_len, env_n; /* lengths with their NULs */
	int32_t landlock;
};
#define BK_GO_MAX (1u << 20)

struct child_args {
	int info_fd, out_fd, err_fd, devnull;
	int go_fd;                /* a warm slot: its command comes here (-1: already given) */
	int pty_sock;             /* a terminal (pty.h): its master goes here (-1: no terminal) */
	uint16_t pty_rows, pty_cols;
	int pidfd;                /* sandbox container init */
	bool direct;              /* born as the command (spawn_direct): no monitor */
	int n_v1;                 /* v1 cgroup.procs to write "0" to (hybrid hosts) */
	int v1_procs[BK_CG_V1_MAX];
	const char *v1_err[BK_CG_V1_MAX];
	bool fresh_netns;
	int netns_fd;
	int landlock_fd;
	const struct bk_seccomp *seccomp; /* NULL: the layer is off (testing) */
	const struct proc_masks *masks;
	int cap_last;
	const char *fault;        /* testing.fault: child_steps[] says where it acts */
	uid_t uid;
	gid_t gid;
	const char *cwd;
	char *const *argv;
	char *const *envp;
	char *argv_buf[4];        /* a warm slot's argv (wait_go) */
	size_t step;              /* the step running (run_steps) */
	uint64_t step_t0;         /* ... since */
	struct child_msg ready;   /* the "ready" report, filled as the steps go */
	const char *what;         /* the failing step's sentence */
};

/* What the exec child reads of the agent's memory, kept until it no longer
 * shares it (spawn_child): its arguments, its /proc masks, its argv; for a
 * child beside the agent (spawn_direct), its stack and its donor. */
struct spawn_mem {
	struct child_args ca;
	struct proc_masks masks;
	char *argv[4];
	char *stack;
	struct tls_donor *donor;
};

/* ---- the child: only async-signal-safe work from here on ------------------- */

static _Noreturn void child_fail(const struct child_args *a, const char *layer, const char *what, int err)
{
	struct child_msg m;
	memset(&m, 0, sizeof(m));
	m.kind = 2;
	m.err = err;
	size_t l = strlen(layer);
	memcpy(m.layer, layer, l < sizeof(m.layer) - 1 ? l : sizeof(m.layer) - 1);
	l = strlen(what);
	memcpy(m.msg, what, l < sizeof(m.msg) - 1 ? l : sizeof(m.msg) - 1);
	(void)!write(a->info_fd, &m, sizeof(m));
	_exit(127);
}

/* A step's failure: its sentence, and errno for the report. */
static int failed(struct child_args *a, const char *what, int err)
{
	a->what = what;
	return -(err > 0 ? err : EIO);
}

static int write0(int fd)
{
	return write(fd, "0", 1) == 1 ? 0 : -errno;
}

/* The monitor: parent of the command, unprivileged, holds no descriptor,
 * exits with the command's status. It reaps the command only once the
 * agent has read the command's /proc/<pid>/status for the receipt and said
 * so (BK_READ_SIGNAL, blocked here since before the command was made; at
 * most BK_READ_WAIT_S after the command ended): until then the pid is the
 * command, alive or a zombie, so the agent's read cannot miss it. */
static _Noreturn void monitor(const struct child_args *a, pid_t cmd)
{
	/* a graceful stop's SIGTERM (bk_exec_cg_term) is for the command, not
	 * for its monitor, which is in the same cgroup */
	sigset_t term;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigprocmask(SIG_BLOCK, &term, NULL);
	syscall(SYS_close_range, 0, ~0U, 0);
	if (bk_privs_drop(a->uid, a->gid, a->cap_last) < 0) {
		kill(cmd, SIGKILL);
		_exit(127);
	}
	siginfo_t si;
	while (waitid(P_PID, (id_t)cmd, &si, WEXITED | WNOWAIT) < 0)
		if (errno != EINTR)
			_exit(127);
	sigset_t read_done;
	sigemptyset(&read_done);
	sigaddset(&read_done, BK_READ_SIGNAL);
	struct timespec wait = { BK_READ_WAIT_S, 0 };
	while (sigtimedwait(&read_done, NULL, &wait) < 0 && errno == EINTR)
		;
	int st;
	while (waitpid(cmd, &st, 0) < 0)
		if (errno != EINTR)
			_exit(127);
	if (WIFSIGNALED(st)) {
		/* ended by a signal: so does its monitor (as nsenter does), the
		 * agent reads which (the /process routes' exit_code -N) */
		int sig = WTERMSIG(st);
		struct rlimit no_core = { 1, 1 }; /* 1: no core, to a file or a pipe */
		setrlimit(RLIMIT_CORE, &no_core);
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
		signal(sig, SIG_DFL);
		sigset_t s;
		sigemptyset(&s);
		sigaddset(&s, sig);
		sigprocmask(SIG_UNBLOCK, &s, NULL);
		kill(getpid(), sig);
	}
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* Nothing of the agent's but what the steps use: a descriptor another
 * exec's setup had open at the clone (the write end of its stdout, its
 * report pipe, a slot's go socket) must not live on here, above all not
 * in a slot parked for seconds, where it would hold that exec's EOF. */
static int close_others(struct child_args *a)
{
	int keep[9 + BK_CG_V1_MAX], n = 0;
	int cand[] = { a->info_fd, a->out_fd, a->err_fd, a->devnull, a->go_fd, a->pidfd, a->netns_fd, a->landlock_fd,
		       a->pty_sock };
	for (size_t i = 0; i < ARRAY_SIZE(cand); i++)
		if (cand[i] >= 0)
			keep[n++] = cand[i];
	for (int i = 0; i < a->n_v1; i++)
		if (a->v1_procs[i] >= 0)
			keep[n++] = a->v1_procs[i];
	for (int i = 1; i < n; i++) /* insertion sort: a few descriptors */
		for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	unsigned lo = 3;
	for (int i = 0; i < n; i++) {
		if ((unsigned)keep[i] > lo && syscall(SYS_close_range, lo, (unsigned)keep[i] - 1, 0) < 0)
			return failed(a, "cannot close the agent's other descriptors", errno);
		if ((unsigned)keep[i] + 1 > lo)
			lo = (unsigned)keep[i] + 1;
	}
	if (syscall(SYS_close_range, lo, ~0U, 0) < 0)
		return failed(a, "cannot close the agent's other descriptors", errno);
	return 0;
}

/* The v1 hierarchies (hybrid hosts): joined before anything runs. */
static int join_v1_cgroups(struct child_args *a)
{
	for (int i = 0; i < a->n_v1; i++)
		if (write0(a->v1_procs[i]) < 0)
			return failed(a, a->v1_err[i], errno);
	return 0;
}

static bool fresh(const struct child_args *a) { return a->fresh_netns; }
static bool warm(const struct child_args *a);
static bool pod_netns(const struct child_args *a) { return !a->fresh_netns; }
static bool landlock_on(const struct child_args *a) { return a->landlock_fd >= 0; }
static bool seccomp_on(const struct child_args *a) { return a->seccomp != NULL; }

/* A fresh namespace, made by the agent and never used, lo up. */
static int enter_fresh_netns(struct child_args *a)
{
	if (setns(a->netns_fd, CLONE_NEWNET) < 0)
		return failed(a, "cannot enter the exec network namespace", errno);
	return 0;
}

static int enter_pod_netns(struct child_args *a)
{
	if (setns(a->pidfd, CLONE_NEWNET) < 0)
		return failed(a, "cannot join the pod network namespace", errno);
	return 0;
}

/* The receipt, read back from the kernel: a fresh namespace must hold
 * nothing but lo. The list is the kernel's net/dev of this process's
 * namespace (its /proc is the one own_proc mounted), which the kernel
 * prints under RCU; an RTM_GETLINK dump would wait for the rtnl lock
 * behind any namespace's creation or cleanup on the node (a p99 of 0.66 ms
 * against 0.08 ms here, with namespaces made and removed beside it). */
static int netns_receipt(struct child_args *a)
{
	char buf[16384];
	size_t len;
	int n = bk_proc_read("/proc/thread-self/net/dev", buf, sizeof(buf), &len);
	if (n == 0)
		n = bk_netdev_parse(buf, len, a->ready.ifaces, BK_MAX_IFACES);
	if (n < 0)
		return failed(a, "cannot list interfaces of the exec network namespace", -n);
	a->ready.n_if = n;
	if (a->fresh_netns && (n != 1 || !streq(a->ready.ifaces[0], "lo")))
		return failed(a, "the fresh network namespace has interfaces other than lo", EEXIST);
	struct stat st;
	if (stat("/proc/self/ns/net", &st) < 0)
		return failed(a, "cannot stat the exec network namespace", errno);
	a->ready.netns_ino = st.st_ino;
	return 0;
}

static int enter_container(struct child_args *a)
{
	if (setns(a->pidfd, CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP) < 0)
		return failed(a, "cannot enter the sandbox container's namespaces", errno);
	/* an IPC namespace of the exec's own: its SysV objects and POSIX
	 * message queues die with it, none is left for a later exec or a
	 * later session, and it sees none of the container's */
	if (unshare(CLONE_NEWIPC) < 0)
		return failed(a, "cannot create the exec's IPC namespace", errno);
	return 0;
}

/* The command runs as init of a fresh pid namespace below the container's:
 * when it exits the kernel kills whatever it left behind, and orphans never
 * land on the container's own init (which may not reap them). This process
 * stays as its parent (the monitor) and reports its exit. */
static void run_steps(struct child_args *a, size_t from);
static uint64_t mono_ns(void);

/* A fresh process's signal state, not the agent thread's (which blocks
 * SIGTERM/SIGINT for its signalfd and ignores SIGPIPE), nor what the
 * agent's own parent left ignored (a shell's `agent &` ignores
 * SIGINT/SIGQUIT: Ctrl-C on an exec's terminal would not reach its
 * foreground job, an ignored signal stays so across execve). The
 * dispositions first, then the mask: nothing of the agent's runs here. */
static void fresh_signals(void)
{
	/* only the signals not at their default now (SigIgn, SigCgt of this
	 * process's own copy of the dispositions, as the kernel shows them):
	 * one read of the status instead of 62 sigaction calls, ~11 us against
	 * ~59 us here; every signal when it cannot be read */
	uint64_t set = ~0ull;
	char buf[8192];
	size_t len;
	struct bk_proc_status ps;
	if (bk_self_status(buf, sizeof(buf), &len) == 0 && bk_proc_status_parse(buf, len, &ps) == 0 &&
	    (ps.seen & BK_PS_SIGNALS))
		set = ps.sig_ign | ps.sig_cgt;
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	for (int sig = 1; sig < NSIG && sig <= 64; sig++)
		if (sig != SIGKILL && sig != SIGSTOP && (set >> (sig - 1) & 1))
			sigaction(sig, &dfl, NULL); /* (glibc's own: EINVAL, harmless) */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* The command's first instructions, on its own stack (enter_pidns). */
static int command_entry(void *arg)
{
	struct child_args *a = arg;
	fresh_signals();
	/* (not a _Noreturn call: instrumented builds would take this stack
	 * for a foreign one and warn) */
	run_steps(a, a->step + 1);
	return 127;
}

/* spawn_direct's bound on the setup: a step stuck in an interruptible
 * wait (a working directory on a hung network filesystem) fails with
 * EINTR, and the exec with it, instead of holding its request. */
#define BK_SETUP_S 10
static void setup_alarm(int sig) { (void)sig; }

/* The child of spawn_direct, on its own stack: it is the command. */
static int direct_entry(void *arg)
{
	struct child_args *a = arg;
	fresh_signals();
	struct sigaction al = { .sa_handler = setup_alarm }; /* no SA_RESTART */
	sigaction(SIGALRM, &al, NULL);
	alarm(BK_SETUP_S);
	a->ready.kind = 1;
	a->ready.t_start = mono_ns();
	run_steps(a, 0);
	return 127;
}

/* The command is born sharing this process's memory (CLONE_VM, as
 * posix_spawn does), and this one waits (CLONE_VFORK) until it has called
 * execve or ended: no copy of the agent's memory is made for it, and its
 * execve has none to tear down. It takes the remaining steps on a stack of
 * its own; this process then becomes its monitor. */
static int enter_pidns(struct child_args *a)
{
	if (a->direct) {
		/* born in it (spawn_direct's CLONE_NEWPID): the kernel's word */
		if (getpid() != 1)
			return failed(a, "the exec is not the init of its own pid namespace", EPERM);
		return 0;
	}
	sigset_t read_done;
	sigemptyset(&read_done);
	sigaddset(&read_done, BK_READ_SIGNAL);
	sigprocmask(SIG_BLOCK, &read_done, NULL);
	const size_t stack_size = 1u << 20;
	char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return failed(a, "cannot map the command's stack", errno);
	if (warm(a))
		prctl(PR_SET_NAME, "boxkite-slotmon", 0, 0, 0);
	int cmd_pid = clone(command_entry, stack + stack_size, CLONE_VM | CLONE_VFORK | CLONE_NEWPID | SIGCHLD, a);
	if (cmd_pid < 0)
		return failed(a, "cannot create the exec pid namespace", errno);
	/* a warm slot's monitor was made at the agent's background priority:
	 * it reaps the command at the ordinary one */
	if (warm(a))
		setpriority(PRIO_PROCESS, 0, 0);
	monitor(a, (pid_t)cmd_pid);
}

/* The container's masks on the exec's /proc, as the runtime applied them
 * to the container's: a masked file gets /dev/null (the container's, which
 * must be the null device), a masked directory an empty read-only tmpfs, a
 * read-only path a read-only bind of itself. A path the kernel does not
 * have is skipped, as the runtime does. */
static int apply_proc_masks(struct child_args *a)
{
	bool null_ok = false;
	for (int i = 0; i < a->masks->n; i++) {
		const struct proc_mask *m = &a->masks->m[i];
		struct stat st;
		if (lstat(m->path, &st) < 0) {
			if (errno == ENOENT)
				continue;
			return failed(a, "cannot stat a masked path of the exec's /proc", errno);
		}
		const unsigned long lock = MS_NOSUID | MS_NODEV | MS_NOEXEC;
		if (m->masked && S_ISDIR(st.st_mode)) {
			if (mount("tmpfs", m->path, "tmpfs", MS_RDONLY | lock, "size=0,mode=0555") < 0)
				return failed(a, "cannot mask a directory of the exec's /proc", errno);
		} else if (m->masked) {
			struct stat nst;
			if (!null_ok && (stat("/dev/null", &nst) < 0 || !S_ISCHR(nst.st_mode) ||
					 nst.st_rdev != makedev(1, 3)))
				return failed(a, "the container's /dev/null is not the null device", EPERM);
			null_ok = true;
			if (mount("/dev/null", m->path, NULL, MS_BIND, NULL) < 0)
				return failed(a, "cannot mask a file of the exec's /proc", errno);
		} else if (mount(m->path, m->path, NULL, MS_BIND | MS_REC, NULL) < 0 ||
			   mount(NULL, m->path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | lock, NULL) < 0) {
			return failed(a, "cannot make a path of the exec's /proc read-only", errno);
		}
	}
	return 0;
}

/* Its own /proc: the container's shows every exec of the pod, all running
 * as the same user, so one exec could read another's /proc/PID/environ
 * (secret_env) or memory. A private mount namespace (a copy of the
 * container's: /workspace is still shared) with a proc of the exec's own
 * pid namespace shows only its own processes, with the container's masks
 * (apply_proc_masks). A message queue filesystem at /dev/mqueue is the
 * container's IPC namespace's: the exec gets one of its own there. */
static int own_proc(struct child_args *a)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return failed(a, "cannot create the exec's mount namespace", errno);
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return failed(a, "cannot mount the exec's /proc", errno);
	int r = apply_proc_masks(a);
	if (r < 0)
		return r;
	struct statfs sf;
	if (statfs("/dev/mqueue", &sf) == 0 && (unsigned long)sf.f_type == MQUEUE_MAGIC &&
	    mount("mqueue", "/dev/mqueue", "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return failed(a, "cannot mount the exec's /dev/mqueue", errno);
	return 0;
}

static int stdio_limits(struct child_args *a)
{
	if (a->pty_sock >= 0) {
		const char *what = NULL;
		int r = bk_pty_child(a->pty_sock, a->pty_rows, a->pty_cols, a->uid, a->gid, &what);
		a->pty_sock = -1;
		if (r < 0)
			return failed(a, what, -r);
	} else if (dup2(a->devnull, 0) < 0 || dup2(a->out_fd, 1) < 0 || dup2(a->err_fd, 2) < 0) {
		return failed(a, "cannot set up stdio", errno);
	}
	/* 1024 (select()'s FD_SETSIZE), whatever the agent raised its own
	 * to; below it only where the agent's hard limit is lower (raising a
	 * hard limit needs CAP_SYS_RESOURCE) */
	struct rlimit nofile = { 1024, 1024 }, core = { 0, 0 }, cur;
	if (getrlimit(RLIMIT_NOFILE, &cur) == 0 && cur.rlim_max < 1024)
		nofile.rlim_cur = nofile.rlim_max = cur.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &nofile) < 0 || setrlimit(RLIMIT_CORE, &core) < 0)
		return failed(a, "cannot set rlimits", errno);
	return 0;
}

static int drop_privileges(struct child_args *a)
{
	int r = bk_privs_drop(a->uid, a->gid, a->cap_last);
	if (r < 0)
		return failed(a, "cannot drop privileges to the sandbox user", -r);
	return 0;
}

/* The kernel's execute allowlist (no_new_privs is set by the drop). */
static int apply_landlock(struct child_args *a)
{
	int r = bk_landlock_apply(a->landlock_fd);
	if (r < 0)
		return failed(a, "cannot apply the Landlock execute allowlist", -r);
	a->ready.landlock_enforced = 1;
	return 0;
}

static int enter_cwd(struct child_args *a)
{
	if (chdir(a->cwd) < 0)
		return failed(a, "cannot change to the working directory", errno);
	if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		return failed(a, "cannot close inherited file descriptors", errno);
	return 0;
}

/* CLOCK_MONOTONIC (vDSO, async-signal-safe) */
static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The filter, last before execve: every step above needs what it denies
 * (setns, unshare, mount). no_new_privs is set by the drop. */
static int apply_seccomp(struct child_args *a)
{
	int r = bk_seccomp_install(a->seccomp);
	if (r < 0)
		return failed(a, "cannot install the seccomp filter", -r);
	return 0;
}

/* The kernel's word that the filter is in force (also with the layer
 * off, for the report): the thread's seccomp mode. The receipt's
 * Seccomp/Seccomp_filters are read by the agent from the command's own
 * /proc/<pid>/status (seccomp_readback in exec.c's terms). */
static int seccomp_check(struct child_args *a)
{
	int m = bk_seccomp_mode_self();
	if (m < 0)
		return failed(a, "cannot read the seccomp mode (PR_GET_SECCOMP)", -m);
	a->ready.seccomp_mode = m;
	if (a->seccomp && m != SECCOMP_MODE_FILTER)
		return failed(a, "the seccomp filter is not in force after its install", EPERM);
	return 0;
}

static bool warm(const struct child_args *a) { return a->go_fd >= 0; }

static int read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = read(fd, (char *)buf + got, n - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		got += (size_t)k;
	}
	return 0;
}

/* A warm slot parks here, made ahead of its request with every step above
 * taken (warm.h), and says so on the info pipe. Its command, working
 * directory, environment and Landlock ruleset come on the go socket; EOF
 * there (the slot discarded, the agent gone) ends it. From here on it is
 * an exec like any other: the steps below run for the command, and its
 * report times only them. */
static int wait_go(struct child_args *a)
{
	/* `ps` and the tests tell a parked slot from a running exec by it */
	prctl(PR_SET_NAME, "boxkite-slot", 0, 0, 0);
	struct child_msg parked = { .kind = 3 };
	if (write(a->info_fd, &parked, sizeof(parked)) != sizeof(parked))
		_exit(127);
	struct go_hdr h;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &h, .iov_len = sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n;
	do
		n = recvmsg(a->go_fd, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	if (n != sizeof(h) || h.magic != BK_GO_MAGIC)
		_exit(127); /* discarded: nothing to report */
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	a->landlock_fd = -1;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&a->landlock_fd, CMSG_DATA(c), sizeof(int));
	if (h.landlock && a->landlock_fd < 0)
		return failed(a, "the slot's Landlock ruleset did not arrive", EPROTO);
	size_t len = (size_t)h.cwd_len + h.cmd_len + h.env_len;
	if (!h.cwd_len || !h.cmd_len || len > BK_GO_MAX || h.env_n > len)
		return failed(a, "the slot's command is malformed", EPROTO);
	size_t vec = ((size_t)h.env_n + 1) * sizeof(char *);
	char *buf = mmap(NULL, len + vec + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return failed(a, "no memory for the slot's command", errno);
	if (read_full(a->go_fd, buf + vec, len) < 0)
		_exit(127);
	close(a->go_fd);
	a->go_fd = -1;
	char **env = (char **)(void *)buf, *p = buf + vec, *end = buf + vec + len;
	a->cwd = p;
	p += h.cwd_len;
	char *cmd = p;
	p += h.cmd_len;
	if (a->cwd[h.cwd_len - 1] || cmd[h.cmd_len - 1])
		return failed(a, "the slot's command is malformed", EPROTO);
	for (uint32_t i = 0; i < h.env_n; i++) {
		char *z = memchr(p, '\0', (size_t)(end - p));
		if (!z)
			return failed(a, "the slot's command is malformed", EPROTO);
		env[i] = p;
		p = z + 1;
	}
	env[h.env_n] = NULL;
	a->argv_buf[0] = "sh";
	a->argv_buf[1] = "-c";
	a->argv_buf[2] = cmd;
	a->argv_buf[3] = NULL;
	a->argv = a->argv_buf;
	a->envp = env;
	/* the slot was made at the agent's background priority; the command
	 * runs at the ordinary one */
	struct sched_param sp = { 0 };
	if (sched_setscheduler(0, SCHED_OTHER, &sp) < 0 || setpriority(PRIO_PROCESS, 0, 0) < 0)
		return failed(a, "cannot reset the slot's scheduling priority", errno);
	/* this exec's time starts now */
	memset(a->ready.t_ns, 0, sizeof(a->ready.t_ns));
	a->ready.t_start = mono_ns();
	return 0;
}

/* Returns only on failure. */
static int exec_shell(struct child_args *a)
{
	alarm(0); /* spawn_direct's setup bound: an alarm would outlive execve */
	a->ready.t_ready = mono_ns();
	(void)!write(a->info_fd, &a->ready, sizeof(a->ready));
	execve("/bin/sh", a->argv, a->envp);
	return failed(a, "cannot execute /bin/sh in the sandbox container", errno);
}

/* The child's layers, in order. A failure reports the step's layer; the
 * step's time counts in its phase (the report's t_ns). */
static const struct child_step {
	const char *layer;
	int (*run)(struct child_args *);
	bool (*when)(const struct child_args *); /* NULL: always */
	int phase;
	struct bk_fault fault;
} child_steps[] = {
	{ "exec",      .run = close_others,      .phase = BK_PH_CLONE },
	{ "cgroup",    .run = join_v1_cgroups,   .phase = BK_PH_V1_JOIN },
	{ "netns",     .run = enter_fresh_netns, .when = fresh, .phase = BK_PH_NETNS,
	  .fault = { "netns", EPERM, "injected fault: netns setup refused" } },
	{ "netns",     .run = enter_pod_netns,   .when = pod_netns, .phase = BK_PH_NETNS },
	{ "container", .run = enter_container,   .phase = BK_PH_CONTAINER,
	  .fault = { "setns", EPERM, "injected fault: setns refused" } },
	{ "container", .run = enter_pidns,       .phase = BK_PH_CONTAINER,
	  .fault = { "pidns", EPERM, "injected fault: pid namespace refused" } },
	{ "container", .run = own_proc,          .phase = BK_PH_CONTAINER },
	{ "container", .run = stdio_limits,      .phase = BK_PH_PRIVS },
	{ "exec",      .run = wait_go,           .when = warm, .phase = -1 },
	{ "netns",     .run = netns_receipt,     .phase = BK_PH_NETNS },
	{ "container", .run = drop_privileges,   .phase = BK_PH_PRIVS },
	{ "landlock",  .run = apply_landlock,    .when = landlock_on, .phase = BK_PH_LANDLOCK },
	{ "container", .run = enter_cwd,         .phase = BK_PH_PRIVS },
	{ "seccomp",   .run = apply_seccomp,     .when = seccomp_on, .phase = BK_PH_SECCOMP,
	  .fault = { "seccomp", EPERM, "injected fault: seccomp filter refused" } },
	{ "seccomp",   .run = seccomp_check,     .phase = BK_PH_SECCOMP },
	{ "exec",      .run = exec_shell,        .phase = BK_PH_REPORT },
};

/* The steps from `from` on. The step that makes the command
 * (enter_pidns) does not return there: the command goes on from the step
 * after it (command_entry), its time counted from a->step_t0. */
static void run_steps(struct child_args *a, size_t from)
{
	if (from > 0 && a->step_t0)
		a->ready.t_ns[child_steps[from - 1].phase] += (uint32_t)(mono_ns() - a->step_t0);
	for (size_t i = from; i < ARRAY_SIZE(child_steps); i++) {
		const struct child_step *s = &child_steps[i];
		if (s->when && !s->when(a))
			continue;
		if (bk_fault_hit(&s->fault, a->fault))
			child_fail(a, s->layer, s->fault.msg, s->fault.err);
		a->step = i;
		uint64_t t = a->step_t0 = mono_ns();
		int r = s->run(a);
		if (s->phase >= 0)
			a->ready.t_ns[s->phase] += (uint32_t)(mono_ns() - t);
		if (r < 0)
			child_fail(a, s->layer, a->what, -r);
	}
	/* not reached: exec_shell returns only on failure */
}

static _Noreturn void child_main(struct child_args *a)
{
	a->ready.kind = 1;
	a->ready.t_start = mono_ns();
	run_steps(a, 0);
	_exit(127);
}

/* ---- the agent's side -------------------------------------------------------- */

static int pipe_pair(int *rd, int *wr)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	*rd = p[0];
	*wr = p[1];
	return 0;
}

static void spawned(struct exec_ctx *x)
{
	if (x->req->spawned && !x->spawned_called) {
		x->spawned_called = true;
		x->req->spawned(x->req->spawned_ud);
	}
}

/* The command is in its cgroup with every layer set up (`boxkitectl events`). */
static void log_started(struct exec_ctx *x)
{
	log_info("exec_start", LS("exec_id", x->res->exec_id), LS("pod", x->pod->pod_name),
		 LS("namespace", x->pod->pod_namespace), LS("pod_uid", x->pod->pod_uid),
		 LS("policy", x->res->policy[0] ? x->res->policy : NULL), LS("netns", x->fresh_netns ? "fresh" : "pod"));
}

/* The command's pid in the agent's pid namespace: the monitor's (pid's)
 * only child. 0 or -errno. */
static int command_pid(pid_t monitor, pid_t *cmd)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/task/%d/children", (int)monitor, (int)monitor);
	_cleanup_free_ char *txt = NULL;
	int r = read_file_at(AT_FDCWD, p, 256, &txt, NULL);
	if (r < 0)
		return r;
	uint64_t v;
	char *sp = strchr(txt, ' ');
	if (sp)
		*sp = '\0';
	if (parse_u64(txt, &v) < 0 || v == 0 || v > INT32_MAX)
		return -ESRCH;
	*cmd = (pid_t)v;
	return 0;
}

/* The receipt's process fields, from the command's own /proc/<pid>/status
 * after its execve (its monitor, pid, reaps it only after our word, so the
 * pid is still the command, alive or a zombie): credentials, capability
 * sets, no_new_privs, seccomp. What the layers promised must be what the
 * kernel shows there, else the exec fails (layer container or seccomp).
 * Then the monitor is told. */
static int status_readback(struct exec_ctx *x, pid_t pid, int child_mode)
{
	uint64_t t0 = mono_ns();
	pid_t cmd = 0;
	_cleanup_free_ char *txt = NULL;
	size_t len = 0;
	char path[48] = "";
	int r = 0;
	if (x->direct)
		cmd = pid; /* the command itself (spawn_direct) */
	else
		r = command_pid(pid, &cmd);
	if (r == 0) {
		snprintf(path, sizeof(path), "/proc/%d/status", (int)cmd);
		r = read_file_at(AT_FDCWD, path, 65536, &txt, &len);
	}
	/* (the agent reaps its own child only after this read) */
	if (!x->direct)
		syscall(SYS_pidfd_send_signal, x->pidfd, BK_READ_SIGNAL, NULL, 0);
	struct bk_proc_status *ps = &x->res->proc;
	if (r == 0)
		r = bk_proc_status_parse(txt, len, ps);
	x->res->t_us[BK_PH_SECCOMP_READ] = (uint32_t)((mono_ns() - t0 + 500) / 1000);
	if (r < 0)
		return bk_fail(&x->err, r, "container", "cannot read the command's %s: %s", path[0] ? path : "pid",
			       strerror(-r));
	snprintf(x->res->proc_source, sizeof(x->res->proc_source), "%s", "proc_status_after_execve");
	/* testing.fault "seccomp_readback": the read shows no filter */
	if (x->cfg->fault[0] && streq(x->cfg->fault, "seccomp_readback"))
		ps->seccomp_filters = 0;
	x->res->seccomp_mode = ps->seccomp;
	x->res->seccomp_filters = ps->seccomp_filters;
	x->res->uid = (uint32_t)ps->uid[0];
	x->res->gid = (uint32_t)ps->gid[0];
	if (ps->seccomp != child_mode || (x->cfg->layer_seccomp && (ps->seccomp != SECCOMP_MODE_FILTER ||
								     ps->seccomp_filters < 1)))
		return bk_fail(&x->err, -EPERM, "seccomp",
			       "the seccomp filter is not in force in the command (Seccomp %d, Seccomp_filters %d)",
			       ps->seccomp, ps->seccomp_filters);
	bool ids = true;
	for (int i = 0; i < 4; i++)
		ids = ids && ps->uid[i] == (int64_t)x->pod->uid && ps->gid[i] == (int64_t)x->pod->gid;
	if (!ids || ps->n_groups != 0)
		return bk_fail(&x->err, -EPERM, "container",
			       "the command does not run as the sandbox user %u:%u alone (Uid %lld, Gid %lld, %d groups)",
			       (unsigned)x->pod->uid, (unsigned)x->pod->gid, (long long)ps->uid[1],
			       (long long)ps->gid[1], ps->n_groups);
	if (ps->cap_inh | ps->cap_prm | ps->cap_eff | ps->cap_bnd | ps->cap_amb || ps->no_new_privs != 1)
		return bk_fail(&x->err, -EPERM, "container",
			       "the command holds privileges (CapEff %016llx, CapBnd %016llx, NoNewPrivs %d)",
			       (unsigned long long)ps->cap_eff, (unsigned long long)ps->cap_bnd, ps->no_new_privs);
	return 0;
}

/* A child beside this thread (spawn_direct): how long this thread leaves it
 * before it reads the report, unless the command ends or writes first. */
#define BK_REPORT_DEFER_MS 5

/* The child's report: "ready" (then EOF at execve) or the failed step.
 * beside: the child runs beside this thread (spawn_direct with a donor):
 * this thread is not woken at its execve to read the report, only when
 * the command has ended, written, or run BK_REPORT_DEFER_MS. A short
 * command then runs without this thread taking a CPU from it; its output
 * is read only after the report and the read-back of its status, as
 * before. */
static int wait_report(struct exec_ctx *x, int info_fd, pid_t pid, bool beside)
{
	struct child_msg m, last = { 0 };
	uint64_t t_eof = 0, t_look = 0;
	if (beside && x->pty_sock < 0 && x->out_fd >= 0 && x->err_fd >= 0) {
		struct pollfd pf[3] = {
			{ .fd = x->pidfd, .events = POLLIN },
			{ .fd = x->out_fd, .events = POLLIN },
			{ .fd = x->err_fd, .events = POLLIN },
		};
		/* testing.fault "report_late": 60 s, the children held so long
		 * (their donors with them) */
		bool late = x->cfg->fault[0] && streq(x->cfg->fault, "report_late");
		(void)poll(pf, 3, late ? 60000 : BK_REPORT_DEFER_MS);
		t_look = mono_ns();
	}
	for (;;) {
		struct pollfd pf = { .fd = info_fd, .events = POLLIN };
		int pr = poll(&pf, 1, 10000);
		if (pr <= 0) {
			last.kind = 2;
			snprintf(last.layer, sizeof(last.layer), "exec");
			snprintf(last.msg, sizeof(last.msg), "the exec child did not finish its setup in time");
			break;
		}
		ssize_t n = read(info_fd, &m, sizeof(m));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			t_eof = mono_ns();
			break;
		}
		if (n == sizeof(m))
			last = m;
	}
	if (last.kind != 1) {
		if (last.kind == 0) {
			last.kind = 2;
			snprintf(last.layer, sizeof(last.layer), "exec");
			snprintf(last.msg, sizeof(last.msg), "the exec child died during setup");
		}
		bk_exec_cg_kill(&x->cg, 2000);
		siginfo_t si;
		waitid(P_PIDFD, (id_t)x->pidfd, &si, WEXITED);
		return bk_fail(&x->err, -(last.err ? last.err : EIO), last.layer, "%s%s%s", last.msg,
			       last.err ? ": " : "", last.err ? strerror(last.err) : "");
	}
	x->res->netns_inode = last.netns_ino;
	x->res->landlock = last.landlock_enforced == 1;
	/* the child's steps by phase (the report step's own time is the
	 * write; from it until the EOF of execve is the agent's to time) */
	for (int k = 0; k < BK_PH_N; k++)
		if (k != BK_PH_REPORT)
			x->res->t_us[k] += (last.t_ns[k] + 500) / 1000;
	if (last.t_start > x->t_clone)
		x->res->t_us[BK_PH_CLONE] += (uint32_t)((last.t_start - x->t_clone + 500) / 1000);
	/* a deferred read: the command's time since its execve until this
	 * thread looked is the run's (bk_exec_run moves it there), not the
	 * report's */
	uint64_t t_had = last.t_ready;
	if (t_look > last.t_ready && last.t_ready) {
		x->ran_before_us = (uint32_t)((t_look - last.t_ready + 500) / 1000);
		t_had = t_look;
	}
	if (t_eof > t_had && t_had)
		x->res->t_us[BK_PH_REPORT] = (uint32_t)((t_eof - t_had + 500) / 1000);
	int r = status_readback(x, pid, last.seccomp_mode);
	if (r < 0) {
		x->res->killed_after_start = true;
		bk_exec_cg_kill(&x->cg, 2000);
		siginfo_t si;
		waitid(P_PIDFD, (id_t)x->pidfd, &si, WEXITED);
		return r;
	}
	x->res->n_ifaces = last.n_if < BK_MAX_IFACES ? last.n_if : BK_MAX_IFACES;
	memcpy(x->res->ifaces, last.ifaces, sizeof(x->res->ifaces));
	return 0;
}

#if BK_SPAWN_DIRECT
/* The children's stacks, kept for the next spawn: a fresh mapping per exec
 * costs its faults and, at its unmap, a TLB flush on every CPU the agent
 * runs on. A stack is the child's only until its execve (or its end). */
#define BK_STACK_SIZE (512u << 10)
#define BK_STACK_KEEP 16
static pthread_mutex_t stacks_lock = PTHREAD_MUTEX_INITIALIZER;
static char *stacks[BK_STACK_KEEP];
static int n_stacks;

static char *stack_get(void)
{
	char *st = NULL;
	pthread_mutex_lock(&stacks_lock);
	if (n_stacks > 0)
		st = stacks[--n_stacks];
	pthread_mutex_unlock(&stacks_lock);
	if (st)
		return st;
	/* a guard page below it */
	st = mmap(NULL, BK_STACK_SIZE + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (st == MAP_FAILED)
		return NULL;
	if (mprotect(st, 4096, PROT_NONE) < 0) {
		munmap(st, BK_STACK_SIZE + 4096);
		return NULL;
	}
	return st;
}

static void stack_put(char *st)
{
	pthread_mutex_lock(&stacks_lock);
	if (n_stacks < BK_STACK_KEEP) {
		stacks[n_stacks++] = st;
		st = NULL;
	}
	pthread_mutex_unlock(&stacks_lock);
	if (st)
		munmap(st, BK_STACK_SIZE + 4096);
}

/* Thread-local storage for children that run beside the agent. A child
 * born sharing the agent's memory runs glibc's code (errno, the cancel
 * state: the thread pointer's block). Held by CLONE_VFORK, it can use the
 * block of the thread that cloned it, which waits. Not held, it must have
 * a block no running thread uses: glibc has no way to make one, so it
 * takes a thread's that never runs again, a donor. A donor is a thread of
 * the agent (boxkite-tls) parked for good, every signal blocked, in a raw
 * futex wait that touches no memory of its block; it lends its block to
 * one child at a time, from the clone until the child no longer uses the
 * agent's memory (its execve or its end: the report pipe's EOF, or its
 * reap, as the agent sees them). As many are made as the machine has
 * CPUs, when first needed, and stay: beyond them a child holds its thread.
 * A child beside its thread gains only while a CPU is free for that thread
 * (its report is read when the command ends or writes, or after 5 ms: a
 * command slowed by a busy machine takes a wake-up more); at 16 clients,
 * a donor for every exec made the execs 2.4% slower, four at most 1.4%,
 * one a CPU 0.8-1.0% (within the rounds' noise). */
struct tls_donor {
	uint64_t tp; /* its thread pointer: what CLONE_SETTLS sets */
	atomic_int parked;
	struct tls_donor *next;
};
static struct tls_donor *donors; /* free, under stacks_lock */
static int n_donors_made;        /* made so far, at most one a CPU; under stacks_lock */

static void *donor_main(void *arg)
{
	struct tls_donor *d = arg;
	d->tp = (uint64_t)(uintptr_t)__builtin_thread_pointer();
	atomic_store_explicit(&d->parked, 1, memory_order_release);
	for (;;) {
		long r;
		register long r10 __asm__("r10") = 0; /* no timeout */
		__asm__ volatile("syscall"
				 : "=a"(r)
				 : "0"((long)SYS_futex), "D"(&d->parked), "S"((long)FUTEX_WAIT_PRIVATE), "d"(1L),
				   "r"(r10)
				 : "rcx", "r11", "memory");
	}
	return NULL;
}

/* A parked donor, or NULL (one a CPU lent, or a thread could not be made:
 * the caller's child then holds this thread, CLONE_VFORK) */
static struct tls_donor *donor_get(void)
{
	static int max; /* under stacks_lock */
	pthread_mutex_lock(&stacks_lock);
	if (!max) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		max = n < 1 ? 1 : n > 64 ? 64 : (int)n;
	}
	struct tls_donor *d = donors;
	bool make = !d && n_donors_made < max;
	if (d)
		donors = d->next;
	else if (make)
		n_donors_made++;
	pthread_mutex_unlock(&stacks_lock);
	if (!make)
		return d;
	d = calloc(1, sizeof(*d));
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 64u << 10);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t t;
	int r = d ? pthread_create(&t, &at, donor_main, d) : ENOMEM;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	if (r != 0) {
		free(d);
		pthread_mutex_lock(&stacks_lock);
		n_donors_made--;
		pthread_mutex_unlock(&stacks_lock);
		return NULL;
	}
	pthread_setname_np(t, "boxkite-tls");
	/* its block is lent only once the thread no longer touches it: from
	 * the store of parked on, it runs only the raw wait */
	while (!atomic_load_explicit(&d->parked, memory_order_acquire))
		sched_yield();
	return d;
}

/* A donor whose child has left the agent's memory */
static void donor_put(struct tls_donor *d)
{
	pthread_mutex_lock(&stacks_lock);
	d->next = donors;
	donors = d;
	pthread_mutex_unlock(&stacks_lock);
}

/* An exec made on request: its child is the command itself, born sharing
 * the agent's memory (CLONE_VM, as posix_spawn does), as the init of a pid
 * namespace of its own (CLONE_NEWPID), below the agent's: a pid namespace
 * can be made only below the maker's own. No copy of the agent's memory is
 * made, none is written to behind the agent, and no monitor stays: the
 * agent is its parent. The child runs on a donor's thread-local storage
 * (above), beside this thread, which is not woken at its execve; m keeps
 * its stack and donor until then (spawn_release). Without a donor, this
 * thread waits (CLONE_VFORK) for its execve or its end, as posix_spawn
 * does. The child's pid, or -errno. */
static long spawn_direct(struct clone_args *args, struct child_args *ca, struct spawn_mem *m)
{
	char *stack = stack_get();
	if (!stack)
		return -ENOMEM;
	/* testing.fault "tls_donor": none (the CLONE_VFORK way) */
	m->donor = ca->fault && streq(ca->fault, "tls_donor") ? NULL : donor_get();
	args->flags |= CLONE_VM | CLONE_NEWPID | (m->donor ? CLONE_SETTLS : CLONE_VFORK);
	args->tls = m->donor ? m->donor->tp : 0;
	args->stack = (uint64_t)(uintptr_t)stack + 4096;
	args->stack_size = BK_STACK_SIZE;
	/* nothing of the agent's (its handlers) may run on the child's stack
	 * before direct_entry has reset them */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	long pid = bk_clone3_fn(args, direct_entry, ca);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid > 0 && m->donor) {
		m->stack = stack;
		return pid;
	}
	stack_put(stack);
	if (m->donor)
		donor_put(steal_ptr(&m->donor));
	return pid;
}

static void spawn_release(struct spawn_mem *m)
{
	if (m->stack)
		stack_put(m->stack);
	if (m->donor)
		donor_put(m->donor);
	free(m);
}
#else
/* glibc has no clone3 that takes a function: elsewhere every exec child is
 * a copy of the agent that stays as its command's monitor */
static long spawn_direct(struct clone_args *args, struct child_args *ca, struct spawn_mem *m)
{
	(void)args, (void)ca, (void)m, (void)direct_entry;
	return -ENOSYS;
}

static void spawn_release(struct spawn_mem *m)
{
	free(m);
}
#endif

static void spawn_releasep(struct spawn_mem **m)
{
	if (*m)
		spawn_release(*m);
}

/* clone3 the exec child into the exec cgroup, in the sandbox container's
 * pid namespace. go_child: a warm slot's end of its go socket (-1: the
 * command is given now, from x->req). Leaves x->pidfd, x->out_fd,
 * x->err_fd; *info_rd: the child's report pipe; *pid_out: its pid;
 * *beside: for a child that runs beside this thread in the agent's memory
 * (spawn_direct), what it uses there, for spawn_release once it no longer
 * does (else NULL). */
static int spawn_child(struct exec_ctx *x, int go_child, int *info_rd_out, pid_t *pid_out,
		       struct spawn_mem **beside)
{
	struct bk_engine *e = x->e;
	const struct bk_exec_req *req = x->req;
	_cleanup_close_ int info_rd = -1, info_wr = -1, out_wr = -1, err_wr = -1, pty_child = -1;
	if (req->pty) {
		/* a terminal: the child sends its master on pty_child (pty.h) */
		int sv[2];
		if (go_child >= 0 || socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
			return bk_fail(&x->err, go_child >= 0 ? -EINVAL : -errno, "exec",
				       "cannot create the terminal's socket");
		x->pty_sock = sv[0];
		pty_child = sv[1];
	} else if (pipe_pair(&x->out_fd, &out_wr) < 0 || pipe_pair(&x->err_fd, &err_wr) < 0) {
		return bk_fail(&x->err, -errno, "exec", "cannot create pipes: %s", strerror(errno));
	}
	if (pipe_pair(&info_rd, &info_wr) < 0)
		return bk_fail(&x->err, -errno, "exec", "cannot create pipes: %s", strerror(errno));
	/* (not zeroed: every field is set below; 9 KB an exec) */
	_cleanup_(spawn_releasep) struct spawn_mem *m = malloc(sizeof(*m));
	if (!m)
		return bk_fail(&x->err, -ENOMEM, "container", "no memory for the container's /proc masks");
	m->stack = NULL;
	m->donor = NULL;
	int mr = bk_proc_masks_get(x->pod, &m->masks, &x->err);
	if (mr < 0)
		return mr;
	char **argv = m->argv;
	argv[0] = "sh", argv[1] = "-c", argv[2] = (char *)req->command, argv[3] = NULL;
	struct child_args *a = &m->ca;
	*a = (struct child_args){
		.info_fd = info_wr, .out_fd = out_wr, .err_fd = err_wr, .go_fd = go_child,
		.devnull = req->stdin_fd > 0 ? req->stdin_fd : e->devnull,
		.pty_sock = pty_child, .pty_rows = req->pty_rows, .pty_cols = req->pty_cols,
		.pidfd = x->pod->sandbox_pidfd, .n_v1 = x->cg.n_v1,
		.fresh_netns = x->fresh_netns, .netns_fd = x->netns_fd, .landlock_fd = x->landlock_fd,
		.seccomp = x->cfg->layer_seccomp ? &e->seccomp : NULL, .masks = &m->masks,
		.cap_last = e->cap_last, .fault = x->cfg->fault[0] ? x->cfg->fault : NULL,
		.uid = x->pod->uid, .gid = x->pod->gid, .cwd = req->cwd ? req->cwd : "/workspace",
		.argv = argv, .envp = req->env,
	};
	for (int i = 0; i < x->cg.n_v1; i++) {
		a->v1_procs[i] = x->cg.v1[i].procs_fd;
		a->v1_err[i] = x->cg.v1[i].join_err;
	}
	/* made on request: the command itself (spawn_direct); a warm slot
	 * parks for seconds and cannot hold this thread: its child is a copy
	 * of the agent and stays as its command's monitor (enter_pidns) */
	a->direct = BK_SPAWN_DIRECT && go_child < 0;
	/* The monitor is born in the container's pid namespace: the thread's
	 * pid_for_children is switched for this clone only. */
	if (!a->direct && setns(x->pod->sandbox_pidfd, CLONE_NEWPID) < 0)
		return bk_fail(&x->err, -errno, NULL, "cannot enter the sandbox container's pid namespace: %s",
			       strerror(errno));
	int pidfd = -1;
	x->t_clone = mono_ns();
	struct clone_args args = {
		.flags = CLONE_PIDFD | CLONE_INTO_CGROUP,
		.pidfd = (uint64_t)(uintptr_t)&pidfd,
		.exit_signal = SIGCHLD,
		.cgroup = (uint64_t)x->cg.v2_fd,
	};
	long pid;
	int clone_errno;
	if (a->direct) {
		pid = spawn_direct(&args, a, m);
		clone_errno = pid < 0 ? (int)-pid : 0;
		x->direct = true;
	} else {
		pid = syscall(SYS_clone3, &args, sizeof(args));
		clone_errno = errno;
		if (pid == 0)
			child_main(a);
	}
	spawned(x);
	if (!a->direct && setns(e->self_pidns, CLONE_NEWPID) < 0) {
		/* cannot happen for our own namespace; never spawn from a
		 * thread whose pid_for_children is wrong */
		log_errorf("pidns_restore", "cannot return to the agent's pid namespace: %s", strerror(errno));
		abort();
	}
	if (pid < 0)
		return bk_fail(&x->err, -clone_errno, "cgroup", "clone3 into the exec cgroup failed: %s",
			       strerror(clone_errno));
	x->pidfd = pidfd;
	/* only the child writes these now: EOF comes with its end */
	close(steal_fd(&info_wr));
	if (out_wr >= 0)
		close(steal_fd(&out_wr));
	if (err_wr >= 0)
		close(steal_fd(&err_wr));
	if (pty_child >= 0)
		close(steal_fd(&pty_child));
	*info_rd_out = steal_fd(&info_rd);
	*pid_out = (pid_t)pid;
	*beside = m->stack ? steal_ptr(&m) : NULL;
	return 0;
}

int bk_step_spawn(struct exec_ctx *x)
{
	_cleanup_close_ int info_rd = -1;
	pid_t pid;
	struct spawn_mem *beside;
	int r = spawn_child(x, -1, &info_rd, &pid, &beside);
	if (r < 0)
		return r;
	if (x->watched)
		bk_filter_watch_pid(x->e, x->res, pid);
	r = wait_report(x, info_rd, pid, beside != NULL);
	/* the child has left the agent's memory: the report's EOF (its execve
	 * or its end), or wait_report reaped it */
	if (beside)
		spawn_release(beside);
	if (r == 0 && x->pty_sock >= 0) {
		/* sent before the child's "ready" report */
		int m = bk_pty_recv_master(x->pty_sock);
		close(steal_fd(&x->pty_sock));
		if (m < 0) {
			bk_exec_cg_kill(&x->cg, 2000);
			x->res->killed_after_start = true;
			return bk_fail(&x->err, m, "container", "the exec's terminal did not reach the agent: %s",
				       strerror(-m));
		}
		x->out_fd = m;
	}
	if (r == 0)
		log_started(x);
	return r;
}

int bk_step_park(struct exec_ctx *x)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return bk_fail(&x->err, -errno, "exec", "cannot create the slot's socket: %s", strerror(errno));
	_cleanup_close_ int go_child = sv[1], info_rd = -1;
	x->go_fd = sv[0];
	pid_t pid;
	struct spawn_mem *beside; /* (a parked child is a copy: never beside) */
	int r = spawn_child(x, go_child, &info_rd, &pid, &beside);
	if (r < 0)
		return r;
	close(steal_fd(&go_child));
	/* parked (kind 3), or the step that failed */
	struct child_msg m = { 0 };
	struct pollfd pf = { .fd = info_rd, .events = POLLIN };
	ssize_t n = -1;
	if (poll(&pf, 1, 10000) == 1)
		do
			n = read(info_rd, &m, sizeof(m));
		while (n < 0 && errno == EINTR);
	if (n != sizeof(m) || m.kind != 3) {
		bk_exec_cg_kill(&x->cg, 2000);
		siginfo_t si;
		waitid(P_PIDFD, (id_t)x->pidfd, &si, WEXITED);
		if (n == sizeof(m) && m.kind == 2)
			return bk_fail(&x->err, -(m.err ? m.err : EIO), m.layer, "%s", m.msg);
		return bk_fail(&x->err, -EIO, "exec", "the slot's child did not park");
	}
	x->info_fd = steal_fd(&info_rd);
	x->park_pid = pid;
	return 0;
}

/* A command's strings, as wait_go reads them (struct go_hdr). */
static size_t go_payload(const struct bk_exec_req *req, char *out, uint32_t *env_n, size_t *env_len)
{
	const char *cwd = req->cwd ? req->cwd : "/workspace";
	size_t n = 0, cl = strlen(cwd) + 1, ml = strlen(req->command) + 1;
	if (out)
		memcpy(out, cwd, cl), memcpy(out + cl, req->command, ml);
	n = cl + ml;
	*env_n = 0;
	*env_len = 0;
	for (char *const *p = req->env; p && *p; p++) {
		size_t l = strlen(*p) + 1;
		if (out)
			memcpy(out + n, *p, l);
		n += l;
		*env_len += l;
		(*env_n)++;
	}
	return n;
}

static int send_full(int fd, const char *buf, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t k = send(fd, buf + done, n - done, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		done += (size_t)k;
	}
	return 0;
}

int bk_step_go(struct exec_ctx *x)
{
	const struct bk_exec_req *req = x->req;
	uint32_t env_n;
	size_t env_len, len = go_payload(req, NULL, &env_n, &env_len);
	_cleanup_free_ char *buf = malloc(len);
	if (!buf)
		return bk_fail(&x->err, -ENOMEM, "exec", "no memory for the command");
	go_payload(req, buf, &env_n, &env_len);
	const char *cwd = req->cwd ? req->cwd : "/workspace";
	struct go_hdr h = { .magic = BK_GO_MAGIC, .cwd_len = (uint32_t)strlen(cwd) + 1,
			    .cmd_len = (uint32_t)strlen(req->command) + 1, .env_len = (uint32_t)env_len,
			    .env_n = env_n, .landlock = x->landlock_fd >= 0 };
	if (len > BK_GO_MAX)
		return bk_fail(&x->err, -E2BIG, "exec", "the command and its environment are too large");
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = { .iov_base = &h, .iov_len = sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (x->landlock_fd >= 0) {
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &x->landlock_fd, sizeof(int));
	}
	x->t_clone = mono_ns();
	ssize_t k;
	do
		k = sendmsg(x->go_fd, &mh, MSG_NOSIGNAL);
	while (k < 0 && errno == EINTR);
	if (k != (ssize_t)sizeof(h)) {
		/* the slot's child went before its command (its pod gone, or
		 * killed): nothing ran; the caller makes the exec afresh */
		x->slot_gone = true;
		return bk_fail(&x->err, k < 0 ? -errno : -EIO, "exec", "the warm slot was gone");
	}
	int r = send_full(x->go_fd, buf, len);
	close(steal_fd(&x->go_fd));
	spawned(x);
	if (r < 0) {
		bk_exec_cg_kill(&x->cg, 2000);
		siginfo_t si;
		waitid(P_PIDFD, (id_t)x->pidfd, &si, WEXITED);
		return bk_fail(&x->err, r, "exec", "cannot give the warm slot its command: %s", strerror(-r));
	}
	if (x->watched)
		bk_filter_watch_pid(x->e, x->res, x->park_pid);
	r = wait_report(x, x->info_fd, x->park_pid, false);
	close(steal_fd(&x->info_fd));
	if (r == 0)
		log_started(x);
	return r;
}
