/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/session/run.h"
#include "agent/session/livepolicy.h"
#include "agent/session/allowlist.h"
#include "agent/session/session.h"
#include "lib/log.h"

#include <pthread.h>

const double bk_hist_bounds[BK_HIST_BUCKETS] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
						  0.1,   0.25,   0.5,   1,    5,     30 };

/* The clean environment: only what API.md lists, plus secret_env. */
#define ENV_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

struct env {
	char *v[BK_SECRETS_MAX + 5];
	char *owned[BK_SECRETS_MAX];
	size_t n;
};

static void env_build(struct env *e, const struct bk_exec_args *ea)
{
	memset(e, 0, sizeof(*e));
	e->v[e->n++] = ENV_PATH;
	e->v[e->n++] = "HOME=/workspace";
	e->v[e->n++] = "LANG=C.UTF-8";
	e->v[e->n++] = "TERM=dumb";
	for (size_t i = 0; i < ea->nsecrets && i < BK_SECRETS_MAX; i++) {
		if (asprintf(&e->owned[i], "%s=%s", ea->secret_names[i], ea->secret_values[i]) < 0)
			e->owned[i] = NULL;
		if (e->owned[i])
			e->v[e->n++] = e->owned[i];
	}
	e->v[e->n] = NULL;
}

static void env_free(struct env *e)
{
	for (size_t i = 0; i < BK_SECRETS_MAX; i++)
		free(e->owned[i]);
}

struct spawn_ctx {
	struct bk_agent *a;
	const char *pod_uid;
};

static void exec_spawned(void *ud)
{
	struct spawn_ctx *sc = ud;
	bk_session_exec_spawned(sc->a, sc->pod_uid);
}

/* Denials by sandbox and reason, for the metrics: every sampled denial
 * under its reason, the rest of the exact total as "unsampled". */
static void count_denials(struct bk_agent *a, const struct bk_pod *p, const struct bk_exec_result *r)
{
	if (!r->denied_total)
		return;
	pthread_mutex_lock(&a->stats_lock);
	uint64_t listed = 0;
	for (int i = 0; i <= r->n_denied; i++) {
		const char *reason = i < r->n_denied ? r->denied[i].reason : "unsampled";
		uint64_t add = 1;
		if (i == r->n_denied) {
			add = r->denied_total > listed ? r->denied_total - listed : 0;
			if (!add)
				break;
		}
		listed += i < r->n_denied ? 1 : 0;
		int k;
		for (k = 0; k < a->n_deny; k++)
			if (streq(a->deny[k].pod, p->pod_name) && streq(a->deny[k].ns, p->pod_namespace) &&
			    streq(a->deny[k].reason, reason))
				break;
		if (k == a->n_deny) {
			if (a->n_deny == BK_MAX_DENY_SERIES)
				continue;
			struct bk_deny_series *s = &a->deny[a->n_deny++];
			snprintf(s->pod, sizeof(s->pod), "%s", p->pod_name);
			snprintf(s->ns, sizeof(s->ns), "%s", p->pod_namespace);
			snprintf(s->reason, sizeof(s->reason), "%s", reason);
			s->count = 0;
		}
		a->deny[k].count += add;
	}
	pthread_mutex_unlock(&a->stats_lock);
}

/* The pod's row of counters (stats_lock held), made on first use. When the
 * table is full, the least recently updated row without live execs (a pod
 * long gone, most likely) makes room; NULL if every row has live execs. */
static struct bk_pod_stats *pod_stats(struct bk_agent *a, const struct bk_pod *p)
{
	struct bk_pod_stats *lru = NULL;
	for (int i = 0; i < a->n_pods; i++) {
		struct bk_pod_stats *ps = &a->pods[i];
		if (streq(ps->pod, p->pod_name) && streq(ps->ns, p->pod_namespace))
			return ps;
		if (!ps->live && (!lru || ps->last_ns < lru->last_ns))
			lru = ps;
	}
	struct bk_pod_stats *ps = a->n_pods < BK_MAX_POD_SERIES ? &a->pods[a->n_pods++] : lru;
	if (!ps)
		return NULL;
	memset(ps, 0, sizeof(*ps));
	snprintf(ps->pod, sizeof(ps->pod), "%s", p->pod_name);
	snprintf(ps->ns, sizeof(ps->ns), "%s", p->pod_namespace);
	return ps;
}

enum { OUT_COMPLETED, OUT_TIMEOUT, OUT_FAILED, OUT_UNSAFE };

/* outcome: OUT_*; live: +1 at the start of an exec, -1 at its end. */
static void count_pod(struct bk_agent *a, const struct bk_pod *p, int outcome, int li, int live,
		      const struct bk_exec_result *res)
{
	pthread_mutex_lock(&a->stats_lock);
	struct bk_pod_stats *ps = pod_stats(a, p);
	if (ps) {
		ps->last_ns = now_ns();
		if (live > 0)
			ps->live++;
		else if (live < 0 && ps->live)
			ps->live--;
		if (outcome >= 0)
			ps->execs[outcome]++;
		if (li >= 0)
			ps->layer_failures[li]++;
		if (res && (outcome == OUT_COMPLETED || outcome == OUT_TIMEOUT)) {
			int bi = 0;
			while (bi < BK_HIST_BUCKETS && res->duration_ms / 1000.0 > bk_hist_bounds[bi])
				bi++;
			ps->hist[bi]++;
			ps->hist_sum += res->duration_ms / 1000.0;
			ps->denied += res->denied_total;
		}
	}
	pthread_mutex_unlock(&a->stats_lock);
}

static void count_outcome(struct bk_agent *a, const struct bk_pod *pod, const struct bk_exec_result *res, int r)
{
	if (r < 0) {
		__atomic_add_fetch(&a->execs_failed, 1, __ATOMIC_RELAXED);
		static const char *const lay[] = { "cgroup", "bpf", "netns", "container", "exec" };
		int li = 5;
		for (int i = 0; i < 5; i++)
			if (streq(res->layer, lay[i]))
				li = i;
		__atomic_add_fetch(&a->layer_failures[li], 1, __ATOMIC_RELAXED);
		count_pod(a, pod, OUT_FAILED, li, -1, res);
		return;
	}
	__atomic_add_fetch(res->timed_out ? &a->execs_timeout : &a->execs_ok, 1, __ATOMIC_RELAXED);
	count_denials(a, pod, res);
	pthread_mutex_lock(&a->stats_lock);
	int bi = 0;
	while (bi < BK_HIST_BUCKETS && res->duration_ms / 1000.0 > bk_hist_bounds[bi])
		bi++;
	a->hist[bi]++;
	a->hist_sum += res->duration_ms / 1000.0;
	pthread_mutex_unlock(&a->stats_lock);
	count_pod(a, pod, res->timed_out ? OUT_TIMEOUT : OUT_COMPLETED, -1, -1, res);
}

/* The audit line of the exec, then one line per denied connection. */
static void audit(const struct bk_pod *pod, const struct bk_exec_result *res, int r)
{
#define EXEC_HEAD                                                                                          \
	LS("exec_id", res->exec_id), LS("pod", pod->pod_name), LS("namespace", pod->pod_namespace),          \
		LS("pod_uid", pod->pod_uid), LD("duration_ms", res->duration_ms),                          \
		LO("phases_us", LI("cgroup", res->t_us[BK_PH_CGROUP]), LI("bpf", res->t_us[BK_PH_BPF]),             \
		   LI("netns", res->t_us[BK_PH_NETNS]), LI("spawn", res->t_us[BK_PH_SPAWN]),                         \
		   LI("run", res->t_us[BK_PH_RUN]), LI("teardown", res->t_us[BK_PH_TEARDOWN]),                       \
		   LI("clone", res->t_us[BK_PH_CLONE]), LI("v1_join", res->t_us[BK_PH_V1_JOIN]),                     \
		   LI("container", res->t_us[BK_PH_CONTAINER]), LI("privs", res->t_us[BK_PH_PRIVS]),                 \
		   LI("landlock", res->t_us[BK_PH_LANDLOCK]), LI("seccomp", res->t_us[BK_PH_SECCOMP]),               \
		   LI("report", res->t_us[BK_PH_REPORT]), LI("seccomp_readback", res->t_us[BK_PH_SECCOMP_READ]),             \
		   LI("receipt", res->t_us[BK_PH_RECEIPT]))
	if (r < 0) {
		log_warn("exec", EXEC_HEAD, LS("outcome", "isolation_failed"), LS("layer", res->layer),
			 LS("error", res->error));
		return;
	}
	log_info("exec", EXEC_HEAD,
		 LS("outcome", res->requester_gone ? "requester_gone" : res->timed_out ? "timeout" : "completed"),
		 LI("exit_code", res->exit_code), LS("netns", res->fresh_netns ? "fresh" : "pod"),
		 LS("policy", res->policy), LB("bpf", res->n_progs == BK_NPROGS), LD("denied", res->denied_total),
		 LB("warm", res->warm));
#undef EXEC_HEAD
	/* each denial was logged as it happened (isolate/filter.c) */
}

/* ---- the node's exec budget, shared between pods --------------------------------------
 * Each live exec holds descriptors of the agent (BK_EXEC_FDS in main.c);
 * a->limits.exec_budget is how many the agent's RLIMIT_NOFILE allows at
 * once, and one pod may hold at most exec_per_pod of them (a quarter): a
 * pod over its share is refused (429 pod_exec_limit) before its exec
 * costs anything, so that it cannot make another pod's exec fail for
 * want of descriptors; the node at its budget refuses with 503
 * node_exec_budget. */

struct pod_live {
	char pod_uid[BK_UID_LEN + 1];
	int n;
};

static pthread_mutex_t budget_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pod_live *live_tab;
static int n_live_tab, cap_live_tab, live_total;

static int budget_take(struct bk_agent *a, const char *pod_uid, struct bk_refusal *ref)
{
	const struct bk_limits *L = &a->limits;
	int r = 0;
	pthread_mutex_lock(&budget_lock);
	struct pod_live *pl = NULL;
	for (int i = 0; i < n_live_tab && !pl; i++)
		if (streq(live_tab[i].pod_uid, pod_uid))
			pl = &live_tab[i];
	if (L->exec_per_pod && pl && pl->n >= L->exec_per_pod) {
		ref->code = "pod_exec_limit";
		r = bk_fail(&ref->err, -EBUSY, "",
			    "this pod has %d execs running, its share of the node's exec budget (%d of %d); "
			    "the command did not run: retry when one ends",
			    pl->n, L->exec_per_pod, L->exec_budget);
	} else if (L->exec_budget && live_total >= L->exec_budget) {
		ref->code = "node_exec_budget";
		r = bk_fail(&ref->err, -EBUSY, "",
			    "the node runs %d execs, its budget (descriptors of the agent); the command did not run",
			    live_total);
	} else if (!pl) {
		if (n_live_tab == cap_live_tab) {
			int nc = cap_live_tab ? cap_live_tab * 2 : 16;
			struct pod_live *nt = realloc(live_tab, (size_t)nc * sizeof(*nt));
			if (!nt) {
				ref->code = "out_of_memory";
				r = bk_fail(&ref->err, -ENOMEM, "", "no room to count this exec");
				goto out;
			}
			live_tab = nt;
			cap_live_tab = nc;
		}
		pl = &live_tab[n_live_tab++];
		snprintf(pl->pod_uid, sizeof(pl->pod_uid), "%s", pod_uid);
		pl->n = 0;
	}
	if (r == 0) {
		pl->n++;
		live_total++;
	}
out:
	pthread_mutex_unlock(&budget_lock);
	if (r < 0)
		__atomic_add_fetch(&a->refused_execs_budget, 1, __ATOMIC_RELAXED);
	return r;
}

static void budget_give(const char *pod_uid)
{
	pthread_mutex_lock(&budget_lock);
	for (int i = 0; i < n_live_tab; i++)
		if (streq(live_tab[i].pod_uid, pod_uid)) {
			live_total--;
			if (--live_tab[i].n == 0)
				live_tab[i] = live_tab[--n_live_tab];
			break;
		}
	pthread_mutex_unlock(&budget_lock);
}

int bk_session_exec(struct bk_agent *a, const struct bk_pod *pod, const struct bk_exec_args *ea,
		    struct bk_exec_result *res, struct bk_refusal *ref)
{
	memset(ref, 0, sizeof(*ref));
	memset(res, 0, sizeof(*res));
	if (!a->node_safe) {
		__atomic_add_fetch(&a->execs_refused_unsafe, 1, __ATOMIC_RELAXED);
		count_pod(a, pod, OUT_UNSAFE, -1, 0, NULL);
		ref->code = "node_unsafe";
		bk_fail(&ref->err, -EPERM, "",
			"this node failed its isolation self-test and refuses execs until it passes again: %s",
			a->selftest_error[0] ? a->selftest_error : "the self-test has not passed yet");
		return -1;
	}
	char perr[256] = "";
	/* the pod's profile as it is now (livepolicy.c): a change applies from this exec on */
	const struct bk_profile *prof = bk_session_profile(a, pod, NULL, perr, sizeof(perr));
	if (!prof) {
		ref->code = "unknown_profile";
		bk_fail(&ref->err, -ENOENT, "", "%s; the command did not run", perr);
		return -1;
	}
	if (budget_take(a, pod->pod_uid, ref) < 0) {
		log_warn("exec_refused", LS("pod", pod->pod_name), LS("namespace", pod->pod_namespace),
			 LS("code", ref->code), LS("why", ref->err.msg));
		return -1;
	}
	/* from here until its process is in its cgroup, a /configure of this
	 * pod waits for this exec (and one already running makes this wait) */
	if (bk_session_exec_begin(a, pod->pod_uid) < 0) {
		budget_give(pod->pod_uid);
		ref->code = "out_of_memory";
		bk_fail(&ref->err, -ENOMEM, "", "no room to track this exec's session");
		return -1;
	}
	struct env env;
	env_build(&env, ea);
	struct bk_allowlist al;
	if (bk_allowlist_check(a, pod, ea, env.v[0] + 5, &al, ref) < 0) {
		budget_give(pod->pod_uid);
		bk_session_exec_spawned(a, pod->pod_uid);
		env_free(&env);
		return -1;
	}
	struct spawn_ctx sc = { .a = a, .pod_uid = pod->pod_uid };
	struct bk_exec_req req = {
		.command = ea->command, .timeout_s = ea->timeout, .cwd = ea->cwd, .env = env.v,
		.out_cap = ea->uncapped ? UINT64_MAX : a->cfg.output_cap,
		.err_cap = ea->uncapped ? UINT64_MAX : a->cfg.output_cap < BK_STDERR_CAP ? a->cfg.output_cap : BK_STDERR_CAP,
		.profile = prof, .client_fd = ea->client_fd, .stdin_fd = ea->stdin_fd, .term_fd = ea->term_fd,
		.landlock = al.active, .landlock_paths = al.paths, .landlock_n = al.n,
		.spawned = exec_spawned, .spawned_ud = &sc, .sink = ea->sink,
		.pty = ea->pty, .pty_rows = ea->pty_rows, .pty_cols = ea->pty_cols, .idle_s = ea->idle_s,
		.timeout_ms = ea->timeout_ms,
	};
	if (ea->pty) /* a terminal's sink keeps nothing: no cap ends it */
		req.out_cap = req.err_cap = UINT64_MAX;
	count_pod(a, pod, -1, -1, +1, NULL);
	int r = bk_exec_run(&a->engine, pod, &req, res);
	budget_give(pod->pod_uid);
	bk_allowlist_free(&al);
	env_free(&env);
	count_outcome(a, pod, res, r);
	audit(pod, res, r);
	if (r < 0) {
		ref->code = "isolation_failed";
		bk_fail(&ref->err, r, res->layer,
			"isolation could not be established (layer %s): %s; %s", res->layer, res->error,
			res->killed_after_start ? "the command was killed, its output discarded"
						: "the command did not run");
		bk_exec_result_free(res);
		return -1;
	}
	return 0;
}
