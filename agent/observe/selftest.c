/* SPDX-License-Identifier: Apache-2.0 */
/* The node self-test: at start and every selftest_interval seconds, a
 * throwaway exec context (a cgroup carrying the BPF programs, a fresh network
 * namespace) probes the verify targets. The probe namespace holds every
 * target address on its own lo, so without the BPF layer each probe would
 * connect (or be refused by the local stack) — and no packet can leave the
 * machine. Any probe that is not refused by BPF, or a layer that cannot be
 * built, marks the node unsafe: execs are refused until a later run passes. */
#include "agent/observe/observe.h"
#include "agent/parse/policy.h"
#include "agent/parse/target.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/missing.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

struct target {
	int family;
	unsigned char addr[16];
	uint16_t port;
	const char *name;
};

/* clone3 child: only syscalls (multi-threaded parent) */
static _Noreturn void probe_child(int netns_fd, const struct target *t, int n, int out_fd)
{
	int res[4] = { 0 };
	if (setns(netns_fd, CLONE_NEWNET) < 0)
		_exit(2);
	for (int i = 0; i < n; i++) {
		int s = socket(t[i].family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0) {
			res[i] = errno;
			continue;
		}
		if (t[i].family == AF_INET) {
			struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(t[i].port) };
			memcpy(&sa.sin_addr, t[i].addr, 4);
			res[i] = connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? errno : 0;
		} else {
			struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons(t[i].port) };
			memcpy(&sa.sin6_addr, t[i].addr, 16);
			res[i] = connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? errno : 0;
		}
		close(s);
	}
	(void)!write(out_fd, res, sizeof(res));
	_exit(0);
}

static int probe_once(struct bk_agent *a, int cg_fd, uint64_t cgid, int netns_fd, const struct bk_profile *prof,
		      const struct target *t, int n, char *err, size_t errlen)
{
	struct bk_engine *e = &a->engine;
	struct bk_filter_att att;
	memset(&att, 0, sizeof(att));
	char ferr[300] = "";
	struct bk_policy pol = { .flags = 0, .profile = prof->id };
	int r = bk_filter_attach(e->filter, cg_fd, cgid, pol, &att, ferr, sizeof(ferr));
	if (r < 0) {
		bk_filter_detach(e->filter, cg_fd, &att);
		return bk_fail_buf(err, errlen, r, "bpf: cannot attach the filters to the self-test cgroup: %s", ferr);
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		bk_filter_detach(e->filter, cg_fd, &att);
		return -errno;
	}
	int pidfd = -1;
	struct clone_args ca = { .flags = CLONE_PIDFD | CLONE_INTO_CGROUP, .pidfd = (uint64_t)(uintptr_t)&pidfd,
				 .exit_signal = SIGCHLD, .cgroup = (uint64_t)cg_fd };
	long pid = syscall(SYS_clone3, &ca, sizeof(ca));
	int clone_errno = errno;
	if (pid == 0)
		probe_child(netns_fd, t, n, p[1]);
	close(p[1]);
	int res[4] = { -1, -1, -1, -1 };
	if (pid > 0) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		if (poll(&pf, 1, 10000) > 0)
			(void)!read(p[0], res, sizeof(res));
		kill((pid_t)pid, SIGKILL);
		siginfo_t si;
		waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED);
		close(pidfd);
	}
	close(p[0]);
	bk_filter_detach(e->filter, cg_fd, &att);
	if (pid < 0) {
		return bk_fail_buf(err, errlen, -EIO, "cgroup: cannot start a probe in the self-test cgroup: %s",
				   strerror(clone_errno));
	}
	for (int i = 0; i < n; i++) {
		/* the four outcomes of verify; in the probe namespace every
		 * target is local and only the BPF layer stands in between,
		 * so an EPERM is BPF's */
		struct bk_verify_probe pr;
		memset(&pr, 0, sizeof(pr));
		struct bk_cidr host = { .family = t[i].family == AF_INET ? 4 : 6,
					.plen = t[i].family == AF_INET ? 32 : 128 };
		memcpy(host.addr, t[i].addr, t[i].family == AF_INET ? 4 : 16);
		uint32_t why;
		pr.expect_allowed = bk_policy_admits_tcp(&a->cfg.policy, prof, &host, t[i].port, &why);
		if (res[i] == 0)
			snprintf(pr.result, sizeof(pr.result), "connected");
		else if (res[i] > 0)
			snprintf(pr.result, sizeof(pr.result), "%s",
				 strerrorname_np(res[i]) ? strerrorname_np(res[i]) : "error");
		bk_probe_judge(&pr, NULL, "bpf", false);
		if (pr.pass)
			continue;
		char as[INET6_ADDRSTRLEN];
		inet_ntop(t[i].family, t[i].addr, as, sizeof(as));
		return bk_fail_buf(err, errlen, -EPERM,
				   "bpf: probe to %s (%s:%u) under profile %s: %s (%s), expected %s", t[i].name, as,
				   t[i].port, prof->name, bk_probe_outcome_name(pr.outcome), pr.reason,
				   pr.expect_allowed ? "allowed" : "stopped");
	}
	return 0;
}

static int selftest_once(struct bk_agent *a, char *err, size_t errlen)
{
	struct bk_engine *e = &a->engine;
	int r;
	/* netns layer: a fresh namespace holds lo and nothing else */
	if (a->cfg.layer_netns) {
		_cleanup_close_ int fd = bk_engine_fresh_netns(e);
		if (fd < 0) {
			return bk_fail_buf(err, errlen, fd, "netns: cannot create a network namespace: %s", strerror(-fd));
		}
		if (setns(fd, CLONE_NEWNET) < 0) {
			int e2 = errno;
			return bk_fail_buf(err, errlen, -e2, "netns: cannot enter a fresh network namespace: %s", strerror(e2));
		}
		char names[BK_MAX_IFACES][IFNAMSIZ];
		int n = bk_netns_list(names, BK_MAX_IFACES);
		if (setns(e->self_netns, CLONE_NEWNET) < 0)
			abort();
		/* what netlink listed, for the pod reports' netns layer */
		char list[256] = "";
		size_t off = 0;
		for (int i = 0; i < n && i < BK_MAX_IFACES && off < sizeof(list); i++)
			off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s", i ? "," : "", names[i]);
		pthread_mutex_lock(&a->stats_lock);
		a->netns_checked_at = (int64_t)time(NULL);
		snprintf(a->netns_fresh_ifaces, sizeof(a->netns_fresh_ifaces), "%s", n < 0 ? "" : list);
		pthread_mutex_unlock(&a->stats_lock);
		if (n != 1 || !streq(names[0], "lo")) {
			return bk_fail_buf(err, errlen, -EEXIST,
					   "netns: a fresh network namespace does not hold exactly lo (%d interfaces)", n);
		}
	}
	if (!e->filter)
		return 0; /* the BPF layer is off by (testing) configuration */
	struct target t[4];
	for (int i = 0; i < 4; i++) {
		t[i].name = bk_target_names[i];
		if (bk_parse_target(a->cfg.targets[i], &t[i].family, t[i].addr, &t[i].port) < 0) {
			return bk_fail_buf(err, errlen, -EINVAL, "config: verify target %s is not addr:port",
					   bk_target_names[i]);
		}
	}
	/* the probe namespace: every target is a local address there */
	_cleanup_close_ int pns = bk_engine_fresh_netns(e);
	if (pns < 0) {
		return bk_fail_buf(err, errlen, pns, "netns: cannot create the probe namespace: %s", strerror(-pns));
	}
	if (setns(pns, CLONE_NEWNET) < 0)
		return -errno;
	r = 0;
	for (int i = 0; i < 4 && r == 0; i++)
		r = bk_netns_lo_addr_add(t[i].family, t[i].addr);
	if (setns(e->self_netns, CLONE_NEWNET) < 0)
		abort();
	if (r < 0 && r != -EEXIST) {
		return bk_fail_buf(err, errlen, r, "netns: cannot add the probe addresses: %s", strerror(-r));
	}
	const char *base = strrchr(a->cfg.bpffs, '/');
	char cg[700];
	snprintf(cg, sizeof(cg), "%s/%s-selftest", e->mounts.v2, base ? base + 1 : "boxkite");
	rmdir(cg);
	if (mkdir(cg, 0700) < 0) {
		int e2 = errno;
		return bk_fail_buf(err, errlen, -e2, "cgroup: cannot create %s: %s", cg, strerror(e2));
	}
	_cleanup_close_ int cfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	uint64_t cgid = 0;
	if (cfd < 0 || bk_cgroup_id(cg, &cgid) < 0) {
		rmdir(cg);
		return bk_fail_buf(err, errlen, -EIO, "cgroup: cannot open %s", cg);
	}
	/* every target under every profile, each expected to end as the
	 * profile decides it (bk_policy_admits_tcp): stopped, or allowed */
	for (int i = 0; i < a->cfg.policy.n && r == 0; i++)
		r = probe_once(a, cfd, cgid, pns, &a->cfg.policy.prof[i], t, 4, err, errlen);
	closep(&cfd);
	rmdir(cg);
	return r;
}

int bk_selftest_run(struct bk_agent *a)
{
	char err[512] = "";
	int r = selftest_once(a, err, sizeof(err));
	__atomic_add_fetch(&a->selftest_runs, 1, __ATOMIC_RELAXED);
	bool was = a->node_safe;
	if (r == 0) {
		a->selftest_last_ok = (int64_t)time(NULL);
		a->node_safe = 1;
		if (!was)
			log_infof("selftest", "node self-test passed: execs are served");
	} else {
		__atomic_add_fetch(&a->selftest_failures, 1, __ATOMIC_RELAXED);
		snprintf(a->selftest_error, sizeof(a->selftest_error), "%s", err);
		a->node_safe = 0;
		log_errorf("selftest", "node self-test FAILED, node marked unsafe, execs refused: %s", err);
	}
	return r;
}

static pthread_t st_thread;
static bool st_started;
static pthread_mutex_t st_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t st_cond = PTHREAD_COND_INITIALIZER;
static bool st_stop;

static void *st_main(void *arg)
{
	struct bk_agent *a = arg;
	for (;;) {
		pthread_mutex_lock(&st_lock);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += a->cfg.selftest_interval;
		while (!st_stop && pthread_cond_timedwait(&st_cond, &st_lock, &ts) == 0)
			;
		bool stop = st_stop;
		pthread_mutex_unlock(&st_lock);
		if (stop)
			break;
		bk_selftest_run(a);
	}
	return NULL;
}

int bk_selftest_start(struct bk_agent *a)
{
	if (!a->cfg.selftest_interval)
		return 0;
	int r = pthread_create(&st_thread, NULL, st_main, a);
	if (r)
		return -r;
	st_started = true;
	return 0;
}

void bk_selftest_stop(void)
{
	if (!st_started)
		return;
	pthread_mutex_lock(&st_lock);
	st_stop = true;
	pthread_cond_signal(&st_cond);
	pthread_mutex_unlock(&st_lock);
	pthread_join(st_thread, NULL);
	st_started = false;
}
