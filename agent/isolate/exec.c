/* SPDX-License-Identifier: Apache-2.0 */
/* The exec engine (see exec.h): the engine's lifetime, the table of steps
 * one exec takes, the run of its command, and the teardown. */
#include "agent/isolate/exec.h"
#include "agent/isolate/child.h"
#include "agent/isolate/landlock.h"
#include "agent/isolate/privs.h"
#include "agent/isolate/records.h"
#include "agent/isolate/step.h"
#include "agent/isolate/warm.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/missing.h"
#include "lib/util.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>

/* ---- engine ------------------------------------------------------------------ */

static int cap_last_cap(void)
{
	_cleanup_free_ char *cl = NULL;
	uint64_t v;
	if (read_file_at(AT_FDCWD, "/proc/sys/kernel/cap_last_cap", 64, &cl, NULL) == 0 &&
	    (cl[strcspn(cl, "\n")] = '\0', parse_u64(cl, &v) == 0) && v < 64)
		return (int)v;
	return 63;
}

/* The BPF layer: the object loaded, pinned and attached to the keepalive
 * cgroup, every profile's rules in its maps, the denial event thread. */
static int engine_bpf(struct bk_engine *e, char *err, size_t errlen)
{
	const struct bk_config *cfg = e->cfg;
	const char *base = strrchr(cfg->bpffs, '/');
	snprintf(e->keepalive, sizeof(e->keepalive), "%s/%s-keepalive", e->mounts.v2, base ? base + 1 : cfg->bpffs);
	char ferr[400] = "";
	int r = bk_filter_open(cfg->bpffs, e->keepalive, e->features.have[BK_F_BPF_TASK_INFO], &e->filter, ferr,
			       sizeof(ferr));
	if (r < 0)
		return bk_fail_buf(err, errlen, r, "bpf: %s", ferr);
	r = bk_filter_load_policy(e->filter, &cfg->policy, ferr, sizeof(ferr));
	if (r < 0)
		return bk_fail_buf(err, errlen, r, "bpf: %s", ferr);
	return bk_filter_events_start(e, err, errlen);
}

/* warm slots (warm.h): made and torn down by the steps below */
static int park_slot(struct bk_engine *e, struct bk_warm_slot *w);
static void discard_slot(struct bk_warm_slot *w);

int bk_engine_init(struct bk_engine *e, struct bk_config *cfg, char *err, size_t errlen)
{
	memset(e, 0, sizeof(*e));
	e->cfg = cfg;
	e->self_pidns = e->self_netns = e->devnull = -1;
	pthread_mutex_init(&e->lock, NULL);
	int r = bk_cgroup_discover(&e->mounts);
	if (r < 0)
		return bk_fail_buf(err, errlen, r,
				   "cgroup: no cgroup2 hierarchy mounted (needed for the BPF layer and cgroup.kill)");
	/* what this kernel offers, before anything depends on it */
	const char *base = strrchr(cfg->bpffs, '/');
	char probe_cg[1100];
	snprintf(probe_cg, sizeof(probe_cg), "%s/%s-probe", e->mounts.v2, base ? base + 1 : cfg->bpffs);
	if ((r = bk_features_probe(&e->features, cfg, probe_cg, err, errlen)) < 0)
		return r;
	e->self_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
	e->self_netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	e->cap_last = cap_last_cap();
	e->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (e->self_pidns < 0 || e->self_netns < 0 || e->devnull < 0)
		return bk_fail_buf(err, errlen, -errno, "cannot open /proc/self/ns/pid or /dev/null: %s", strerror(errno));
	if (cfg->layer_seccomp && (r = bk_seccomp_build(&e->seccomp)) < 0)
		return bk_fail_buf(err, errlen, r, "seccomp: the exec filter does not fit a classic BPF program");
	if (cfg->layer_netns && (r = bk_netns_pool_start(&e->netns, e->self_netns, err, errlen)) < 0)
		return r;
	if (cfg->layer_bpf && (r = engine_bpf(e, err, errlen)) < 0)
		return r;
	static const struct bk_warm_ops warm_ops = { park_slot, discard_slot };
	if (cfg->warm_slots && (r = bk_warm_start(e, &warm_ops, err, errlen)) < 0)
		return r;
	return 0;
}

void bk_engine_fini(struct bk_engine *e)
{
	bk_warm_stop(e);
	bk_netns_pool_stop(&e->netns);
	closep(&e->self_netns);
	bk_filter_events_stop(e);
	if (e->filter) {
		bk_filter_close(e->filter);
		e->filter = NULL;
	}
	closep(&e->self_pidns);
	closep(&e->devnull);
	/* e->records stays mapped until the process ends: an exec's removal
	 * (after its answer, bk_later) may still clear its slot meanwhile */
	pthread_mutex_destroy(&e->lock);
}

void bk_exec_result_free(struct bk_exec_result *r)
{
	free(r->out);
	free(r->err);
	free(r->policy_rules);
	r->out = r->err = r->policy_rules = NULL;
}

/* ---- the steps ----------------------------------------------------------------- */


static bool bpf_on(const struct exec_ctx *x) { return x->e->filter != NULL; }
static bool fresh_netns(const struct exec_ctx *x) { return x->fresh_netns; }
static bool landlock_on(const struct exec_ctx *x) { return x->req->landlock && x->cfg->layer_landlock; }

/* The layers of one exec, in order (exec.h); the exec child takes its own
 * steps after the last of these (child.h). A layer turned off by the
 * operator (layers.netns/bpf/landlock) or not wanted by this exec (a
 * profile in the pod's network namespace, a session without allowed
 * commands) is skipped by its `when`. The first ones do not depend on the
 * request: a warm slot (warm.h) takes them ahead of it. */
static const struct step {
	const char *layer;                      /* named by a failure of the step */
	int (*run)(struct exec_ctx *);
	bool (*when)(const struct exec_ctx *);  /* NULL: always */
	int phase;                              /* timed in res->t_us[phase] */
	struct bk_fault fault;                  /* testing.fault that fails it */
} ahead_steps[] = {
	{ "container", bk_step_sandbox_user, .phase = BK_PH_CGROUP },
	{ "cgroup",    bk_step_cgroup,       .phase = BK_PH_CGROUP,
	  .fault = { "cgroup", EACCES, "injected fault: exec cgroup creation refused" } },
	{ "cgroup",    bk_step_record,       .phase = BK_PH_CGROUP },
	{ "bpf",       bk_step_bpf,          .when = bpf_on, .phase = BK_PH_BPF,
	  .fault = { "bpf", EPERM, "injected fault: BPF attach refused" } },
	{ "netns",     bk_step_netns,        .when = fresh_netns, .phase = BK_PH_NETNS },
};

/* Then, for an exec made on request: the session's execute allowlist and
 * the child, which goes through to the command ... */
static const struct step request_steps[] = {
	{ "landlock",  bk_step_landlock,     .when = landlock_on, .phase = BK_PH_LANDLOCK,
	  .fault = { "landlock", EPERM, "injected fault" } },
	{ "container", bk_step_spawn,        .phase = BK_PH_SPAWN },
};

/* ... for a warm slot where the child is born as its command
 * (BK_SPAWN_DIRECT): nothing more. The slot holds its cgroups, programs and
 * namespace; the request that takes it spawns into them. (A child parked
 * ahead would be a copy of the agent: while it waited, every page the
 * agent wrote was copied first, ~200 faults an exec, and the copy itself
 * was made beside the requests.) Elsewhere: the child, parked before the
 * command ... */
static const struct step park_steps[] = {
	{ "container", bk_step_park,         .phase = BK_PH_SPAWN },
};

/* ... and for the request that takes the slot: the session's execute
 * allowlist, its denial events, the command (spawned, or given to the
 * parked child). */
static const struct step take_steps_warm[] = {
	{ "landlock",  bk_step_landlock,     .when = landlock_on, .phase = BK_PH_LANDLOCK,
	  .fault = { "landlock", EPERM, "injected fault" } },
	{ "bpf",       bk_step_bpf_take,     .when = bpf_on, .phase = BK_PH_BPF },
	{ "container", BK_SPAWN_DIRECT ? bk_step_spawn : bk_step_go, .phase = BK_PH_SPAWN },
};

static int take_steps(struct exec_ctx *x, const struct step *table, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct step *s = &table[i];
		if (s->when && !s->when(x))
			continue;
		uint64_t t = now_ns();
		int r = bk_fault_hit(&s->fault, x->cfg->fault) ?
				bk_fail(&x->err, -s->fault.err, NULL, "%s", s->fault.msg) : s->run(x);
		x->res->t_us[s->phase] += (uint32_t)((now_ns() - t) / 1000);
		if (r < 0) {
			/* the one failure path: the command never starts, and the
			 * result names the layer (the step's, unless the failure
			 * belongs to another, e.g. the child's report) */
			snprintf(x->res->layer, sizeof(x->res->layer), "%s", x->err.layer[0] ? x->err.layer : s->layer);
			snprintf(x->res->error, sizeof(x->res->error), "%s", x->err.msg[0] ? x->err.msg : strerror(-r));
			/* a child that could not join the container's kept v1
			 * cgroups: the next exec opens them afresh */
			if (s->phase == BK_PH_SPAWN)
				bk_exec_cg_kept_drop(&x->cg);
			return r;
		}
	}
	return 0;
}

/* ---- the run: output under caps, the timeout, the requester ----------------- */

struct run {
	bool exited, out_eof, err_eof, killed;
	uint64_t kill_deadline;
	int status, sig; /* sig: the signal that ended the command (0: exited) */
	bool termed, term_init; /* term_fd: TERM sent; the command's default action taken */
	size_t cap[2]; /* allocated for res->out, res->err */
	int wake_fd;   /* streamed: eventfd the denial events write (-1: none) */
	int denied_sent; /* streamed: res->denied[] entries given to the sink */
};

/* Kill everything in the exec cgroup, and give what is left 5 s to close
 * its output. */
static void kill_all(struct exec_ctx *x, struct run *st)
{
	x->emptied = bk_exec_cg_kill(&x->cg, 0) == 0;
	st->killed = true;
	st->kill_deadline = now_ns() + 5000000000ull;
}

static int append(char **buf, size_t *len, size_t *cap, const char *src, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t nc = *cap ? *cap : 4096;
		while (nc < *len + n + 1)
			nc *= 2;
		char *nb = realloc(*buf, nc);
		if (!nb)
			return -ENOMEM;
		*buf = nb;
		*cap = nc;
	}
	memcpy(*buf + *len, src, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

/* One read of stdout (k 0) or stderr (k 1), kept up to the output cap;
 * output past it ends the command (truncated). */
static void read_output(struct exec_ctx *x, struct run *st, int k, int fd)
{
	struct bk_exec_result *res = x->res;
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));
	if (n <= 0) {
		/* (EAGAIN: a terminal's master, non-blocking; EIO: its last
		 * holder is gone, the end of its output) */
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			return;
		if (k == 0)
			st->out_eof = true;
		else
			st->err_eof = true;
		return;
	}
	char **b = k == 0 ? &res->out : &res->err;
	size_t *bl = k == 0 ? &res->outlen : &res->errlen;
	uint64_t cap = k == 0 || !x->req->err_cap ? x->req->out_cap : x->req->err_cap;
	size_t room = *bl < cap ? cap - *bl : 0;
	size_t take = (size_t)n < room ? (size_t)n : room;
	const struct bk_exec_sink *sk = x->req->sink;
	if (sk) {
		/* streamed: the sink has it; the lengths count what was given */
		*bl += take;
		if (take && sk->output(sk->ud, k, buf, take) < 0 && !st->killed) {
			res->requester_gone = true;
			kill_all(x, st);
		}
	} else if (take && append(b, bl, &st->cap[k], buf, take) < 0) {
		res->truncated = true;
		take = 0;
	}
	if (take < (size_t)n)
		res->truncated = true;
	if (res->truncated && !st->killed)
		kill_all(x, st);
}

/* Streamed: the denials the ring buffer added since the last call, to the
 * sink (copied under the engine lock, given outside it). */
static void stream_denials(struct exec_ctx *x, struct run *st)
{
	const struct bk_exec_sink *sk = x->req->sink;
	for (;;) {
		struct bk_denial d;
		bool have = false;
		pthread_mutex_lock(&x->e->lock);
		if (st->denied_sent < x->res->n_denied) {
			d = x->res->denied[st->denied_sent++];
			have = true;
		}
		pthread_mutex_unlock(&x->e->lock);
		if (!have)
			return;
		if (sk->denied(sk->ud, &d) < 0 && !st->killed) {
			x->res->requester_gone = true;
			kill_all(x, st);
		}
	}
}

static void reap(struct exec_ctx *x, struct run *st)
{
	siginfo_t si = { 0 };
	if (waitid(P_PIDFD, (id_t)x->pidfd, &si, WEXITED) == 0) {
		st->exited = true;
		st->status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
		st->sig = si.si_code == CLD_EXITED ? 0 : si.si_status;
		/* whatever the command left behind dies with it */
		if (!st->killed)
			kill_all(x, st);
	}
}

static void run_command(struct exec_ctx *x)
{
	struct bk_exec_result *res = x->res;
	const struct bk_exec_req *req = x->req;
	uint64_t deadline = x->t0 + (req->timeout_ms ? (uint64_t)req->timeout_ms * 1000000ull
						    : (uint64_t)req->timeout_s * 1000000000ull);
	struct run st = { .wake_fd = -1, .err_eof = x->err_fd < 0 };
	const struct bk_exec_sink *sk = req->sink;
	bool pty = req->pty && sk && sk->pty_io; /* x->out_fd is the terminal's master */
	bool pending = pty;                      /* input waits for the terminal (first: what the
						  * request brought, /pty-exec's input_bytes) */
	uint64_t active = now_ns();              /* the last input or output (req->idle_s) */
	if (sk) {
		if (x->watched && (st.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) >= 0)
			bk_filter_watch_wake(x->e, res, st.wake_fd);
		if (sk->started(sk->ud, res) < 0) {
			res->requester_gone = true;
			kill_all(x, &st);
		}
	}
	while (!(st.exited && st.out_eof && st.err_eof)) {
		struct pollfd pf[7];
		int np = 0, io = -1, ie = -1, ip = -1, ic = -1, iw = -1, it = -1, ig = -1;
		if (st.wake_fd >= 0) { iw = np; pf[np++] = (struct pollfd){ .fd = st.wake_fd, .events = POLLIN }; }
		if (!st.out_eof) { io = np; pf[np++] = (struct pollfd){ .fd = x->out_fd, .events = (short)(POLLIN | (pending ? POLLOUT : 0)) }; }
		if (!st.err_eof) { ie = np; pf[np++] = (struct pollfd){ .fd = x->err_fd, .events = POLLIN }; }
		if (!st.exited) { ip = np; pf[np++] = (struct pollfd){ .fd = x->pidfd, .events = POLLIN }; }
		/* nobody is left to read the answer: do not leave the exec running */
		if (req->client_fd >= 0 && !st.killed) { ic = np; pf[np++] = (struct pollfd){ .fd = req->client_fd, .events = (short)(POLLRDHUP | (pty && !pending && !st.out_eof ? POLLIN : 0)) }; }
		/* its pod's sandbox gone: a command made on request is in a pid
		 * namespace of its own, not below the container's, so the kernel
		 * does not end it with the container's; the agent does (child.c) */
		if (x->direct && !st.killed && x->pod->sandbox_pidfd >= 0) { ig = np; pf[np++] = (struct pollfd){ .fd = x->pod->sandbox_pidfd, .events = POLLIN }; }
		if (req->term_fd > 0 && !st.killed && !st.termed) { it = np; pf[np++] = (struct pollfd){ .fd = req->term_fd, .events = POLLIN }; }
		uint64_t now = now_ns();
		uint64_t until = st.killed ? st.kill_deadline : deadline;
		bool idle_first = false;
		if (!st.killed && req->idle_s && active + (uint64_t)req->idle_s * 1000000000ull < until) {
			until = active + (uint64_t)req->idle_s * 1000000000ull;
			idle_first = true;
		}
		int to = until > now ? (int)((until - now) / 1000000) + 1 : 0;
		int pr = poll(pf, (nfds_t)np, to);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0) {
			if (st.killed)
				break; /* nothing left that could write: stop waiting */
			if (idle_first && now_ns() < active + (uint64_t)req->idle_s * 1000000000ull)
				continue;
			res->timed_out = true;
			kill_all(x, &st);
			continue;
		}
		/* a command that never stops writing keeps poll from ever timing
		 * out: its deadline (and the kill's) is checked on every wake-up too */
		if (!st.killed && now_ns() >= deadline) {
			res->timed_out = true;
			kill_all(x, &st);
		} else if (st.killed && now_ns() >= st.kill_deadline) {
			break;
		}
		if (pty && io >= 0 && (pf[io].revents & POLLIN))
			active = now_ns();
		if (pty && ((ic >= 0 && (pf[ic].revents & POLLIN)) || (io >= 0 && (pf[io].revents & POLLOUT)))) {
			active = now_ns();
			int pr2 = sk->pty_io(sk->ud, x->out_fd, ic >= 0 && (pf[ic].revents & POLLIN));
			if (pr2 < 0 && !st.killed) {
				res->requester_gone = true;
				kill_all(x, &st);
			}
			pending = pr2 == 1;
		}
		if (ic >= 0 && (pf[ic].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			res->requester_gone = true;
			kill_all(x, &st);
		}
		if (ig >= 0 && (pf[ig].revents & (POLLIN | POLLHUP | POLLERR)) && !st.killed)
			kill_all(x, &st);
		if (it >= 0 && pf[it].revents) {
			st.termed = true;
			if (!st.exited)
				bk_exec_cg_term(&x->cg, &st.term_init);
		}
		if (io >= 0 && (pf[io].revents & (POLLIN | POLLHUP | POLLERR)))
			read_output(x, &st, 0, x->out_fd);
		if (ie >= 0 && (pf[ie].revents & (POLLIN | POLLHUP | POLLERR)))
			read_output(x, &st, 1, x->err_fd);
		if (ip >= 0 && (pf[ip].revents & POLLIN))
			reap(x, &st);
		if (iw >= 0 && (pf[iw].revents & POLLIN)) {
			uint64_t v;
			if (read(st.wake_fd, &v, sizeof(v)) < 0) {
				/* EAGAIN: nothing new */
			}
			stream_denials(x, &st);
		}
	}
	if (st.wake_fd >= 0) {
		bk_filter_watch_wake(x->e, res, -1);
		close(st.wake_fd);
		stream_denials(x, &st);
	}
	if (!st.exited) {
		siginfo_t si = { 0 };
		bk_exec_cg_kill(&x->cg, 2000);
		if (waitid(P_PIDFD, (id_t)x->pidfd, &si, WEXITED) == 0) {
			st.status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
			st.sig = si.si_code == CLD_EXITED ? 0 : si.si_status;
		}
	}
	res->exit_code = res->timed_out ? 124 : st.status;
	/* stopped while it had no handler for TERM: ended by that TERM, as a
	 * process outside a pid namespace of its own would be, whether the
	 * agent's SIGKILL or its own exit came first */
	res->signal = st.term_init ? SIGTERM : st.sig;
	if (st.term_init && !res->timed_out)
		res->exit_code = 128 + SIGTERM;
	uint64_t t_receipt = now_ns();
	/* did the BPF layer hold until the end? (read back again): every
	 * program still on the exec cgroup, and no ended exec's cgroup lost
	 * its programs meanwhile (a hole, bk_filter_removing: a socket of that
	 * exec could have been used from here unfiltered) */
	if (x->e->filter) {
		uint64_t holes = bk_filter_holes(x->e->filter);
		_cleanup_close_ int cgfd = open(x->cg.v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		res->bpf_held = cgfd >= 0 && bk_filter_attached(x->e->filter, cgfd) == BK_NPROGS &&
				holes == x->holes0;
	} else {
		res->bpf_held = true;
	}
	/* the receipt's caps, cgroup id and policy: as the kernel holds them
	 * at the end of the run (not as configured) */
	res->limits_read = bk_exec_cg_read_limits(&x->e->mounts, &x->cg, &res->pids_max, &res->memory_max) == 0;
	uint64_t id = 0;
	res->cgroup_id = bk_cgroup_id(x->cg.v2, &id) == 0 ? id : 0;
	if (x->e->filter)
		bk_filter_readback(x->e->filter, &x->cfg->policy, &x->att, x->cg.id, res);
	res->t_us[BK_PH_RECEIPT] = (uint32_t)((now_ns() - t_receipt) / 1000);
	if (!res->out)
		res->out = strdup("");
	if (!res->err)
		res->err = strdup("");
}

static uint64_t unix_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ---- teardown: whatever the steps made, in every case ---------------------- */

struct removal {
	struct bk_exec_cg_dirs *dirs;
	const struct bk_config *cfg;
	struct bk_records *records;
	struct bk_filter *filter; /* every program was attached: read them back first */
	bool recorded;
	int record_slot;
	char exec_id[sizeof(((struct bk_exec_result *)0)->exec_id)];
};

/* The exec's cgroup directories removed (dr: their removal's result):
 * then its crash-recovery record. */
static void removed(const struct removal *rm, int dr)
{
	if (dr < 0)
		log_errorf("exec_cleanup", "exec %s: cannot remove its cgroups (left for the next agent start): %s",
			   rm->exec_id, strerror(-dr));
	else if (rm->recorded)
		bk_exec_record_remove(rm->cfg, rm->records, rm->exec_id, rm->record_slot);
}

/* What removed() needs of an exec. */
static void removal_of(struct removal *rm, const struct exec_ctx *x)
{
	rm->cfg = x->cfg;
	rm->records = x->e->records;
	rm->recorded = x->recorded;
	rm->record_slot = x->record_slot;
	snprintf(rm->exec_id, sizeof(rm->exec_id), "%s", x->res->exec_id);
}

/* Before an ended exec's cgroup goes: are its programs still on it?
 * (bk_filter_removing: after the removal no one can take them off) */
static void bpf_check(struct bk_filter *f, const char *v2, const char *exec_id)
{
	_cleanup_close_ int fd = open(v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		bk_filter_removing(f, fd, exec_id);
}

static void remove_now(void *arg)
{
	struct removal *rm = arg;
	if (rm->filter && bk_exec_cg_dirs_v2(rm->dirs))
		bpf_check(rm->filter, bk_exec_cg_dirs_v2(rm->dirs), rm->exec_id);
	removed(rm, bk_exec_cg_dirs_remove(rm->dirs));
	free(rm);
}

/* After the answer (bk_later): the answer depends on none of it (its
 * processes are gone, its receipt read), and its ~100 us are off the
 * request's way. A crash before then leaves the record: the next start
 * removes what it names (recover.c). Without a request's window, now. */
static void remove_later(struct exec_ctx *x, bool check_bpf)
{
	struct bk_filter *f = check_bpf ? x->e->filter : NULL;
	struct removal *rm = malloc(sizeof(*rm));
	if (!rm || !(rm->dirs = bk_exec_cg_take_dirs(&x->cg))) {
		free(rm); /* out of memory: here and now */
		if (f && x->cg.v2[0])
			bpf_check(f, x->cg.v2, x->res->exec_id);
		struct removal now = { 0 };
		removal_of(&now, x);
		removed(&now, bk_exec_cg_destroy(&x->cg));
		return;
	}
	removal_of(rm, x);
	rm->filter = f;
	if (bk_later(remove_now, rm) < 0)
		remove_now(rm);
}

static void teardown(struct exec_ctx *x)
{
	struct bk_engine *e = x->e;
	struct bk_exec_result *res = x->res;
	if (x->req->spawned && !x->spawned_called)
		x->req->spawned(x->req->spawned_ud);
	uint64_t t = now_ns();
	int kr = 0;
	if (x->cg.v2[0] && !x->emptied) {
		kr = bk_exec_cg_kill(&x->cg, 5000);
		if (kr < 0)
			log_errorf("exec_cleanup", "exec %s: processes survive in %s: %s", res->exec_id, x->cg.v2,
				   strerror(-kr));
	}
	/* its child, if not reaped yet (a slot torn down unused, a setup that
	 * failed): a zombie in the pod's pid namespace would hold the pod's
	 * init in its exit (the kernel waits for every pid of the namespace) */
	if (x->pidfd >= 0) {
		siginfo_t si;
		waitid(P_PIDFD, (id_t)x->pidfd, &si, WEXITED | (kr < 0 || !x->cg.v2[0] ? WNOHANG : 0));
	}
	bk_filter_events_drain(e);
	if (x->watched)
		bk_filter_unwatch(e, res);
	if (e->filter && x->att.attached) {
		uint64_t tot = bk_filter_denied(e->filter, x->att.cgid);
		if (tot > res->denied_total)
			res->denied_total = tot;
	}
	if (!res->policy[0])
		snprintf(res->policy, sizeof(res->policy), "%s", x->req->profile->name);
	/* not detached: its sockets (handed to another exec, held by a process
	 * that outlived the kill) keep its programs, which now refuse them as
	 * stale; they go when the kernel releases the cgroup (filter.c) */
	bool all_attached = e->filter && x->att.n_attached == BK_NPROGS;
	if (e->filter)
		bk_filter_retire(e->filter, &x->att);
	remove_later(x, all_attached);
	closep(&x->pidfd);
	closep(&x->go_fd);
	closep(&x->info_fd);
	closep(&x->netns_fd);
	closep(&x->landlock_fd);
	closep(&x->out_fd);
	closep(&x->err_fd);
	closep(&x->pty_sock);
	res->t_us[BK_PH_TEARDOWN] = (uint32_t)((now_ns() - t) / 1000);
	res->duration_ms = (double)(now_ns() - x->t0) / 1e6;
	res->ended_unix_ns = unix_ns();
}

/* ---- one exec ------------------------------------------------------------------ */

static void exec_ctx_init(struct exec_ctx *x, struct bk_engine *e, const struct bk_pod *pod,
			  const struct bk_exec_req *req, struct bk_exec_result *res)
{
	memset(x, 0, sizeof(*x));
	x->e = e;
	x->cfg = e->cfg;
	x->pod = pod;
	x->req = req;
	x->res = res;
	x->t0 = now_ns();
	x->fresh_netns = e->cfg->layer_netns && req->profile->fresh_netns;
	bk_exec_cg_init(&x->cg);
	x->netns_fd = x->landlock_fd = x->pidfd = x->out_fd = x->err_fd = x->go_fd = x->info_fd = -1;
	x->pty_sock = -1;
	x->record_slot = -1;

	memset(res, 0, sizeof(*res));
	res->started_unix_ns = unix_ns(); /* (after the memset: the receipt's started_at) */
	random_id(res->exec_id, sizeof(res->exec_id));
	res->fresh_netns = x->fresh_netns;
}

/* The command runs: what only the setup needed goes, so that a live exec
 * holds few of the agent's descriptors (its pidfd, stdout and stderr; the
 * programs are held by its cgroup, the namespace and the Landlock ruleset by
 * the command, its cgroups by their paths). */
static void setup_done(struct exec_ctx *x)
{
	closep(&x->netns_fd);
	closep(&x->landlock_fd);
	bk_exec_cg_setup_done(&x->cg);
}

/* A request takes a warm slot: the slot's exec becomes its own (the
 * slot's cgroups, programs, namespace, and its parked child where there is
 * one; its receipt so far),
 * timed and watched from now. */
static void adopt(struct exec_ctx *x, struct bk_warm_slot *w, const struct bk_pod *pod,
		  const struct bk_exec_req *req, struct bk_exec_result *res)
{
	*x = w->x;
	*res = w->res;
	memset(res->t_us, 0, sizeof(res->t_us));
	x->pod = pod;
	x->req = req;
	x->res = res;
	x->warm_prep = false;
	x->warm = true;
	x->t0 = now_ns();
	res->started_unix_ns = unix_ns();
	res->warm = true;
	bk_pod_release(&w->pod);
	free(w);
}

static int park_slot(struct bk_engine *e, struct bk_warm_slot *w)
{
	struct exec_ctx *x = &w->x;
	char id[sizeof(w->res.exec_id)];
	memcpy(id, w->res.exec_id, sizeof(id)); /* given by warm.c */
	exec_ctx_init(x, e, &w->pod, &w->req, &w->res);
	if (id[0])
		memcpy(w->res.exec_id, id, sizeof(id));
	x->warm_prep = true;
	int r = take_steps(x, ahead_steps, ARRAY_SIZE(ahead_steps));
	/* (a slot without a child keeps what the spawn needs: its cgroups'
	 * descriptors and its namespace's) */
	if (r == 0 && !BK_SPAWN_DIRECT) {
		r = take_steps(x, park_steps, ARRAY_SIZE(park_steps));
		if (r == 0)
			setup_done(x);
	}
	return r;
}

static void discard_slot(struct bk_warm_slot *w)
{
	teardown(&w->x);
	bk_exec_result_free(&w->res);
	bk_pod_release(&w->pod);
	free(w);
}

int bk_exec_run(struct bk_engine *e, const struct bk_pod *pod, const struct bk_exec_req *req,
		struct bk_exec_result *res)
{
	struct exec_ctx x;
	bk_warm_busy(e);
	struct bk_warm_slot *w = req->stdin_fd > 0 ? NULL : bk_warm_take(e, pod, req);
	int r = -EAGAIN;
	if (w) {
		adopt(&x, w, pod, req, res);
		r = take_steps(&x, take_steps_warm, ARRAY_SIZE(take_steps_warm));
		if (r < 0 && x.slot_gone) {
			/* nothing ran: the exec is made afresh below */
			struct bk_exec_req none = { .profile = req->profile };
			x.req = &none;
			teardown(&x);
			bk_exec_result_free(res);
			w = NULL;
		}
	}
	if (!w) {
		exec_ctx_init(&x, e, pod, req, res);
		r = take_steps(&x, ahead_steps, ARRAY_SIZE(ahead_steps));
		if (r == 0)
			r = take_steps(&x, request_steps, ARRAY_SIZE(request_steps));
	}
	if (r == 0) {
		setup_done(&x);
		uint64_t t = now_ns();
		run_command(&x);
		res->t_us[BK_PH_RUN] = (uint32_t)((now_ns() - t) / 1000) - res->t_us[BK_PH_RECEIPT];
		/* (within the step's time: never more) */
		uint32_t ran = x.ran_before_us < res->t_us[BK_PH_SPAWN] ? x.ran_before_us : res->t_us[BK_PH_SPAWN];
		res->t_us[BK_PH_SPAWN] -= ran;
		res->t_us[BK_PH_RUN] += ran;
	}
	teardown(&x);
	/* the pod's slots made up again once this exec is over: not beside
	 * it (their cgroups, namespaces and forks contend with its run and
	 * teardown for the same kernel locks and the same CPUs) */
	bk_warm_want(e, pod, req);
	return r;
}
