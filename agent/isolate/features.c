/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel feature probe (features.h): each facility tried, not its
 * version number read. */
#include "agent/isolate/features.h"
#include "agent/caller/pod.h"
#include "agent/isolate/filter.h"
#include "agent/isolate/landlock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/missing.h"
#include "lib/util.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

const struct bk_feature_desc bk_feature_desc[BK_F_N] = {
	[BK_F_BPF_PROGS] = { "bpf_cgroup_programs", BK_NEED_BPF,
			     "the cgroup BPF program types cgroup_skb, cgroup_sock and cgroup_sock_addr with every "
			     "helper the egress programs call (5.8 for all of them)", NULL },
	[BK_F_BPF_LINK] = { "bpf_link_cgroup", BK_NEED_BPF,
			    "BPF programs on cgroups for each hook of the egress filter: as links (BPF_LINK_CREATE, 5.7; "
			    "the keepalive cgroup) and attached to the cgroup itself (BPF_PROG_ATTACH, multi; each exec)",
			    NULL },
	[BK_F_BPF_RINGBUF] = { "bpf_ringbuf", BK_NEED_BPF, "the BPF ring buffer (5.8), which carries denial events",
			       NULL },
	[BK_F_BPF_TASK_INFO] = { "bpf_task_info", BK_NEED_OPTIONAL,
				 "bpf_get_current_pid_tgid and bpf_get_current_comm in the socket hooks (5.7)",
				 "denial events of the socket hooks name the exec (its first process) instead of the "
				 "process that asked" },
	[BK_F_CLONE_INTO_CGROUP] = { "clone3_into_cgroup", BK_NEED_ALWAYS,
				     "clone3(CLONE_INTO_CGROUP) (5.7), which starts each exec inside its cgroup", NULL },
	[BK_F_CGROUP_KILL] = { "cgroup_kill", BK_NEED_OPTIONAL, "cgroup.kill (5.14)",
			       "an exec's processes are killed one by one from cgroup.procs (a process forking "
			       "meanwhile can take more rounds)" },
	[BK_F_SO_PEERPIDFD] = { "so_peerpidfd", BK_NEED_OPTIONAL, "SO_PEERPIDFD (6.5)",
				"callers are identified by SO_PEERCRED and pidfd_open, re-checked by who holds the "
				"peer socket (sock_diag)" },
	[BK_F_UNIX_DIAG] = { "unix_diag", BK_NEED_FALLBACK,
			     "sock_diag for unix sockets (CONFIG_UNIX_DIAG), with which the SO_PEERCRED fallback "
			     "re-checks the caller", NULL },
	[BK_F_PIDFD_OPEN] = { "pidfd_open", BK_NEED_ALWAYS, "pidfd_open (5.3)", NULL },
	[BK_F_OPENAT2] = { "openat2", BK_NEED_ALWAYS, "openat2 with RESOLVE_IN_ROOT (5.6)", NULL },
	[BK_F_LANDLOCK] = { "landlock", BK_NEED_OPTIONAL, "Landlock (5.13, and in the boot-time LSM list)",
			    "execs of sessions with allowed_commands fail closed (layer landlock)" },
	[BK_F_SECCOMP] = { "seccomp_filter", BK_NEED_SECCOMP,
			   "seccomp filters (3.5; SECCOMP_GET_ACTION_AVAIL 4.14), which carry the per-exec seccomp layer",
			   NULL },
};

const char *bk_features_identity(const struct bk_features *f)
{
	return f->peerpidfd ? "so_peerpidfd" : "so_peercred";
}

static void why(struct bk_features *f, enum bk_feature k, const char *fmt, ...) _printf_(3, 4);
static void why(struct bk_features *f, enum bk_feature k, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->detail[k], sizeof(f->detail[k]), fmt, ap);
	va_end(ap);
}

/* ---- BPF ------------------------------------------------------------------------- */

#define INSN(c, d, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), .imm = (i) })

/* 1 when programs of type t may call helper id. libbpf's probe knows the
 * verifier's older wording only ("unknown func", "invalid func"); newer
 * kernels (6.12) say "program of this type cannot use helper": a load of
 * our own with the verifier's log settles it. why gets the verifier's
 * line when the helper is missing. */
static int probe_helper(enum bpf_prog_type t, enum bpf_attach_type at, int id, char *whyb, size_t wl)
{
	int r = libbpf_probe_bpf_helper(t, (enum bpf_func_id)id, NULL);
	if (r < 0)
		return r;
	struct bpf_insn insns[] = {
		INSN(BPF_JMP | BPF_CALL, 0, id),
		INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 1),
		INSN(BPF_JMP | BPF_EXIT, 0, 0),
	};
	char log[8192] = "";
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = at, .log_buf = log, .log_size = sizeof(log),
		    .log_level = 1);
	int fd = bpf_prog_load(t, NULL, "GPL", insns, ARRAY_SIZE(insns), &o);
	if (fd >= 0) {
		close(fd);
		return r ? 1 : 0;
	}
	static const char *const missing[] = { "cannot use helper", "unknown func ", "invalid func " };
	for (size_t i = 0; i < ARRAY_SIZE(missing); i++) {
		char *m = strstr(log, missing[i]);
		if (!m)
			continue;
		while (m > log && m[-1] != '\n')
			m--;
		snprintf(whyb, wl, "%.*s", (int)strcspn(m, "\n"), m);
		return 0;
	}
	if (!r)
		snprintf(whyb, wl, "libbpf's probe of helper #%d says no", id);
	return r ? 1 : 0;
}

static const char *type_name(enum bpf_prog_type t)
{
	const char *n = libbpf_bpf_prog_type_str(t);
	return n ? n : "?";
}

static void probe_bpf(struct bk_features *f)
{
	f->have[BK_F_BPF_PROGS] = true;
	static const enum bpf_prog_type types[] = { BPF_PROG_TYPE_CGROUP_SKB, BPF_PROG_TYPE_CGROUP_SOCK,
						    BPF_PROG_TYPE_CGROUP_SOCK_ADDR };
	for (size_t i = 0; i < ARRAY_SIZE(types); i++)
		if (libbpf_probe_bpf_prog_type(types[i], NULL) != 1) {
			f->have[BK_F_BPF_PROGS] = false;
			why(f, BK_F_BPF_PROGS, "no %s programs", type_name(types[i]));
			return;
		}
	f->have[BK_F_BPF_RINGBUF] = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1;
	if (!f->have[BK_F_BPF_RINGBUF])
		why(f, BK_F_BPF_RINGBUF, "no BPF_MAP_TYPE_RINGBUF");
	struct bk_prog_helpers uses[BK_NPROGS];
	int r = bk_filter_helper_uses(uses);
	if (r < 0) {
		f->have[BK_F_BPF_PROGS] = false;
		why(f, BK_F_BPF_PROGS, "cannot open the BPF object: %s", strerror(-r));
		return;
	}
	/* pid and comm are optional (the events degrade); every other
	 * helper is part of the decision or of counting it */
	f->have[BK_F_BPF_TASK_INFO] = true;
	for (int i = 0; i < BK_NPROGS; i++)
		for (int k = 0; k < uses[i].n; k++) {
			int id = uses[i].helpers[k];
			bool task = id == BPF_FUNC_get_current_pid_tgid || id == BPF_FUNC_get_current_comm;
			enum bk_feature fk = task && uses[i].type != BPF_PROG_TYPE_CGROUP_SKB ? BK_F_BPF_TASK_INFO
											: BK_F_BPF_PROGS;
			if (!f->have[fk])
				continue;
			char line[120] = "";
			int p = probe_helper(uses[i].type, uses[i].attach, id, line, sizeof(line));
			if (p == 1)
				continue;
			f->have[fk] = false;
			if (p < 0)
				why(f, fk, "%s (%s): cannot probe helper #%d: %s", uses[i].prog, type_name(uses[i].type), id,
				    strerror(-p));
			else
				why(f, fk, "%s (%s): %s", uses[i].prog, type_name(uses[i].type), line);
		}
}

/* Each hook of ours, a trivial program linked to the probe cgroup and
 * released again, then attached to it (multi) and detached again. */
static void probe_links(struct bk_features *f, int cg_fd)
{
	static const struct {
		enum bpf_prog_type t;
		enum bpf_attach_type a;
	} hooks[] = {
		{ BPF_PROG_TYPE_CGROUP_SOCK, BPF_CGROUP_INET_SOCK_CREATE },
		{ BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_INET4_CONNECT },
		{ BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_INET6_CONNECT },
		{ BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_UDP4_SENDMSG },
		{ BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_UDP6_SENDMSG },
		{ BPF_PROG_TYPE_CGROUP_SKB, BPF_CGROUP_INET_EGRESS },
		{ BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_UDP4_RECVMSG },
		{ BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_CGROUP_UDP6_RECVMSG },
	};
	f->have[BK_F_BPF_LINK] = true;
	for (size_t i = 0; i < ARRAY_SIZE(hooks); i++) {
		struct bpf_insn insns[] = { INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 1), INSN(BPF_JMP | BPF_EXIT, 0, 0) };
		LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = hooks[i].a);
		int pfd = bpf_prog_load(hooks[i].t, NULL, "GPL", insns, ARRAY_SIZE(insns), &o);
		int lfd = pfd >= 0 ? bpf_link_create(pfd, cg_fd, hooks[i].a, NULL) : -1;
		int e = errno, ar = -1;
		if (lfd >= 0) {
			close(lfd);
			ar = bpf_prog_attach(pfd, cg_fd, hooks[i].a, BPF_F_ALLOW_MULTI);
			e = errno;
			if (ar == 0)
				bpf_prog_detach2(pfd, cg_fd, hooks[i].a);
		}
		if (pfd >= 0)
			close(pfd);
		if (lfd < 0 || ar < 0) {
			f->have[BK_F_BPF_LINK] = false;
			why(f, BK_F_BPF_LINK, "%s of %s on a cgroup: %s",
			    pfd < 0 ? "loading a program" : lfd < 0 ? "a link" : "attaching a program (multi)",
			    libbpf_bpf_attach_type_str(hooks[i].a), strerror(e));
			return;
		}
	}
}

/* ---- processes, files, sockets ------------------------------------------------------ */

/* clone3(CLONE_INTO_CGROUP) with a descriptor that cannot be open: EBADF
 * means the kernel knows the flag (it looked the cgroup up), EINVAL or
 * ENOSYS that it does not. No process is made. */
static bool probe_clone_into_cgroup(void)
{
	struct clone_args a = { .flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD, .cgroup = INT_MAX };
	long pid = syscall(SYS_clone3, &a, sizeof(a));
	if (pid == 0)
		_exit(0);
	if (pid > 0) {
		waitpid((pid_t)pid, NULL, 0);
		return true;
	}
	return errno == EBADF;
}

static bool probe_so_peerpidfd(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return false;
	int fd = -1;
	socklen_t l = sizeof(fd);
	bool ok = getsockopt(sv[0], SOL_SOCKET, SO_PEERPIDFD, &fd, &l) == 0 && fd >= 0;
	if (fd >= 0)
		close(fd);
	close(sv[0]);
	close(sv[1]);
	return ok;
}

static bool probe_unix_diag(char *whyb, size_t wl)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return false;
	struct stat st;
	uint64_t peer = 0;
	int r = bk_unix_peer_ino(sv[0], -1, &peer);
	bool ok = r == 0 && fstat(sv[1], &st) == 0 && peer == (uint64_t)st.st_ino;
	if (r < 0)
		snprintf(whyb, wl, "sock_diag of a unix socket: %s", strerror(-r));
	else if (!ok)
		snprintf(whyb, wl, "sock_diag names another peer than the socket's");
	close(sv[0]);
	close(sv[1]);
	return ok;
}

static bool probe_pidfd_open(void)
{
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static bool probe_openat2(void)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static bool probe_seccomp(void)
{
	uint32_t action = SECCOMP_RET_KILL_PROCESS;
	return syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

/* ---- the probe ------------------------------------------------------------------------- */

static bool needed(const struct bk_features *f, const struct bk_config *cfg, enum bk_feature k)
{
	switch (bk_feature_desc[k].need) {
	case BK_NEED_ALWAYS: return true;
	case BK_NEED_BPF: return cfg->layer_bpf;
	case BK_NEED_SECCOMP: return cfg->layer_seccomp;
	case BK_NEED_FALLBACK: return !f->peerpidfd;
	default: return false;
	}
}

int bk_features_probe(struct bk_features *f, const struct bk_config *cfg, const char *probe_cg, char *err,
		      size_t errlen)
{
	memset(f, 0, sizeof(*f));
	struct utsname u;
	snprintf(f->kernel, sizeof(f->kernel), "%s", uname(&u) == 0 ? u.release : "unknown");
	for (int i = 0; i < cfg->n_mask_features; i++) {
		bool known = false;
		for (int k = 0; k < BK_F_N; k++)
			if (streq(bk_feature_desc[k].name, cfg->mask_features[i]))
				known = f->masked[k] = true;
		if (!known)
			return bk_fail_buf(err, errlen, -EINVAL, "testing.mask_features: no kernel feature is named \"%s\"",
					   cfg->mask_features[i]);
	}

	probe_bpf(f);
	if (mkdir(probe_cg, 0755) < 0 && errno != EEXIST)
		return bk_fail_buf(err, errlen, -errno, "cannot create the probe cgroup %s: %s", probe_cg,
				   strerror(errno));
	int cg_fd = open(probe_cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg_fd >= 0) {
		if (f->have[BK_F_BPF_PROGS])
			probe_links(f, cg_fd);
		else
			why(f, BK_F_BPF_LINK, "not probed: no cgroup BPF programs");
		f->have[BK_F_CGROUP_KILL] = faccessat(cg_fd, "cgroup.kill", F_OK, 0) == 0;
		close(cg_fd);
	}
	rmdir(probe_cg);
	f->have[BK_F_CLONE_INTO_CGROUP] = probe_clone_into_cgroup();
	f->have[BK_F_SO_PEERPIDFD] = probe_so_peerpidfd();
	f->have[BK_F_UNIX_DIAG] = probe_unix_diag(f->detail[BK_F_UNIX_DIAG], sizeof(f->detail[BK_F_UNIX_DIAG]));
	f->have[BK_F_PIDFD_OPEN] = probe_pidfd_open();
	f->have[BK_F_OPENAT2] = probe_openat2();
	f->landlock_abi = bk_landlock_abi();
	f->have[BK_F_LANDLOCK] = f->landlock_abi > 0;
	f->have[BK_F_SECCOMP] = probe_seccomp();

	for (int k = 0; k < BK_F_N; k++)
		if (f->masked[k]) {
			f->have[k] = false;
			why(f, (enum bk_feature)k, "masked by testing.mask_features");
		}
	if (!f->have[BK_F_LANDLOCK])
		f->landlock_abi = 0;
	f->peerpidfd = f->have[BK_F_SO_PEERPIDFD];

	struct log_field fields[BK_F_N + 4];
	int nf = 0;
	fields[nf++] = LS("kernel", f->kernel);
	for (int k = 0; k < BK_F_N; k++)
		fields[nf++] = LB(bk_feature_desc[k].name, f->have[k]);
	fields[nf++] = LI("landlock_abi", f->landlock_abi);
	fields[nf++] = LS("identity", bk_features_identity(f));
	fields[nf] = LEND;
	log_emit(LOG_INFO, "kernel_features", fields);

	for (int k = 0; k < BK_F_N; k++) {
		if (f->have[k])
			continue;
		const struct bk_feature_desc *d = &bk_feature_desc[k];
		/* valgrind (3.19) answers clone3, pidfd_open, openat2, ... with
		 * ENOSYS whatever the kernel has: under it the start goes on,
		 * said loudly, and an exec fails closed at the step that needs
		 * the facility (tests/valgrind.sh) */
		if (needed(f, cfg, (enum bk_feature)k) && RUNNING_ON_VALGRIND) {
			log_warn("kernel_feature_unverified", LS("feature", d->name), LS("what", d->what),
				 LS("detail", "running under valgrind, whose syscall emulation may lack it; "
					      "whatever needs it fails closed"));
			continue;
		}
		if (needed(f, cfg, (enum bk_feature)k))
			return bk_fail_buf(err, errlen, -EOPNOTSUPP, "kernel %s lacks %s: %s%s%s", f->kernel, d->name,
					   d->what, f->detail[k][0] ? "; " : "", f->detail[k]);
		if (d->without)
			log_warn("kernel_feature_missing", LS("feature", d->name), LS("what", d->what),
				 LS("detail", f->detail[k]), LS("effect", d->without));
	}
	return 0;
}
