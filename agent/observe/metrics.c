/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/observe/metrics.h"
#include "agent/observe/observe.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdarg.h>

struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (b->p && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t nc = (b->cap ? b->cap * 2 : 8192) + (size_t)n;
		char *np = realloc(b->p, nc);
		if (!np)
			return;
		b->p = np;
		b->cap = nc;
	}
}

/* label values: \ " and newline escaped */
static void esc(const char *in, char *out, size_t len)
{
	size_t o = 0;
	for (; *in && o + 2 < len; in++) {
		if (*in == '\\' || *in == '"') {
			out[o++] = '\\';
			out[o++] = *in;
		} else if (*in == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else
			out[o++] = *in;
	}
	out[o] = '\0';
}

static int count_sandbox(const struct bk_container_info *ci, void *ud)
{
	struct bk_agent *a = ((void **)ud)[0];
	int *n = ((void **)ud)[1];
	if (streq(ci->name, a->cfg.sandbox_container))
		(*n)++;
	return 0;
}

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

static int64_t started_at; /* unix seconds, set once at start (bk_metrics_start) */

/* The counters one view shows: the node's (--metrics) or one pod's. */
struct counts {
	uint64_t execs[4]; /* completed, timeout, isolation_failed, refused_node_unsafe */
	uint64_t layer_failures[6];
	uint64_t hist[BK_HIST_BUCKETS + 1];
	double hist_sum;
	uint64_t live, denied;
};

/* A pod sees its own series only: its execs, durations, failures, live
 * execs and denials, and whether the node serves execs at all (which each
 * refused exec tells it anyway). Nothing node-wide: not the sandboxes on
 * the node, other pods' execs or denials, refused callers, lost events. */
char *bk_metrics_text(struct bk_agent *a, const struct bk_pod *only)
{
	struct buf b = { 0 };
	struct counts c = { 0 };
	pthread_mutex_lock(&a->stats_lock);
	if (only) {
		for (int i = 0; i < a->n_pods; i++) {
			const struct bk_pod_stats *ps = &a->pods[i];
			if (!streq(ps->pod, only->pod_name) || !streq(ps->ns, only->pod_namespace))
				continue;
			memcpy(c.execs, ps->execs, sizeof(c.execs));
			memcpy(c.layer_failures, ps->layer_failures, sizeof(c.layer_failures));
			memcpy(c.hist, ps->hist, sizeof(c.hist));
			c.hist_sum = ps->hist_sum;
			c.live = ps->live;
			c.denied = ps->denied;
		}
	} else {
		c.execs[0] = LOAD(a->execs_ok);
		c.execs[1] = LOAD(a->execs_timeout);
		c.execs[2] = LOAD(a->execs_failed);
		c.execs[3] = LOAD(a->execs_refused_unsafe);
		for (int i = 0; i < 6; i++)
			c.layer_failures[i] = LOAD(a->layer_failures[i]);
		memcpy(c.hist, a->hist, sizeof(c.hist));
		c.hist_sum = a->hist_sum;
		c.live = LOAD(a->engine.live);
		c.denied = a->engine.filter ? bk_filter_stat(a->engine.filter, BK_S_DENIED) : 0;
	}
	pthread_mutex_unlock(&a->stats_lock);

	char v[128];
	esc(BK_VERSION, v, sizeof(v));
	put(&b, "# HELP boxkite_build_info Build of the running agent.\n# TYPE boxkite_build_info gauge\n");
	put(&b, "boxkite_build_info{version=\"%s\"} 1\n", v);
	put(&b, "# HELP boxkite_execs_total Execs by outcome.\n# TYPE boxkite_execs_total counter\n");
	static const char *const outcome[] = { "completed", "timeout", "isolation_failed", "refused_node_unsafe" };
	for (int i = 0; i < 4; i++)
		put(&b, "boxkite_execs_total{outcome=\"%s\"} %llu\n", outcome[i], (unsigned long long)c.execs[i]);
	put(&b, "# HELP boxkite_layer_failures_total Execs refused because a layer could not be built.\n"
		"# TYPE boxkite_layer_failures_total counter\n");
	static const char *const lay[] = { "cgroup", "bpf", "netns", "container", "exec", "other" };
	for (int i = 0; i < 6; i++)
		put(&b, "boxkite_layer_failures_total{layer=\"%s\"} %llu\n", lay[i], (unsigned long long)c.layer_failures[i]);
	put(&b, "# HELP boxkite_exec_duration_seconds Exec duration, setup to teardown.\n"
		"# TYPE boxkite_exec_duration_seconds histogram\n");
	uint64_t cum = 0;
	for (int i = 0; i < BK_HIST_BUCKETS; i++) {
		cum += c.hist[i];
		put(&b, "boxkite_exec_duration_seconds_bucket{le=\"%g\"} %llu\n", bk_hist_bounds[i], (unsigned long long)cum);
	}
	cum += c.hist[BK_HIST_BUCKETS];
	put(&b, "boxkite_exec_duration_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
	put(&b, "boxkite_exec_duration_seconds_sum %.6f\n", c.hist_sum);
	put(&b, "boxkite_exec_duration_seconds_count %llu\n", (unsigned long long)cum);
	put(&b, "# HELP boxkite_denials_total Connection attempts the BPF layer refused, by sandbox and reason.\n"
		"# TYPE boxkite_denials_total counter\n");
	pthread_mutex_lock(&a->stats_lock);
	for (int i = 0; i < a->n_deny; i++) {
		if (only && (!streq(a->deny[i].pod, only->pod_name) || !streq(a->deny[i].ns, only->pod_namespace)))
			continue;
		char pod[256], ns[256];
		esc(a->deny[i].pod, pod, sizeof(pod));
		esc(a->deny[i].ns, ns, sizeof(ns));
		put(&b, "boxkite_denials_total{namespace=\"%s\",pod=\"%s\",reason=\"%s\"} %llu\n", ns, pod, a->deny[i].reason,
		    (unsigned long long)a->deny[i].count);
	}
	pthread_mutex_unlock(&a->stats_lock);
	put(&b, "# HELP boxkite_live_execs Execs running now.\n# TYPE boxkite_live_execs gauge\n");
	put(&b, "boxkite_live_execs %llu\n", (unsigned long long)c.live);
	if (a->engine.filter) {
		put(&b, "# HELP boxkite_bpf_denied_total Denials counted in BPF (every hook).\n"
			"# TYPE boxkite_bpf_denied_total counter\n");
		put(&b, "boxkite_bpf_denied_total %llu\n", (unsigned long long)c.denied);
	}
	put(&b, "# HELP boxkite_selftest_ok 1 when the last node self-test passed (execs are served).\n"
		"# TYPE boxkite_selftest_ok gauge\n");
	put(&b, "boxkite_selftest_ok %d\n", a->node_safe ? 1 : 0);
	if (only)
		return b.p;

	/* node-wide only (the admin endpoint) */
	int nsb = 0;
	void *ud[2] = { a, &nsb };
	bk_runtime_each(&a->cfg, count_sandbox, ud);
	put(&b, "# HELP boxkite_sandboxes Sandbox containers on this node.\n# TYPE boxkite_sandboxes gauge\n");
	put(&b, "boxkite_sandboxes %d\n", nsb);
	if (a->engine.filter) {
		put(&b, "# HELP boxkite_ringbuf_lost_total Denial events lost because the ring buffer was full.\n"
			"# TYPE boxkite_ringbuf_lost_total counter\n");
		put(&b, "boxkite_ringbuf_lost_total %llu\n",
		    (unsigned long long)bk_filter_stat(a->engine.filter, BK_S_EVENTS_LOST));
		put(&b, "# HELP boxkite_events_suppressed_total Denial events not sent (per-exec rate limit); still counted.\n"
			"# TYPE boxkite_events_suppressed_total counter\n");
		put(&b, "boxkite_events_suppressed_total %llu\n",
		    (unsigned long long)bk_filter_stat(a->engine.filter, BK_S_EVENTS_SUPPRESSED));
	}
	put(&b, "# HELP boxkite_refused_callers_total Connections refused: not the shim container of a sandbox pod.\n"
		"# TYPE boxkite_refused_callers_total counter\n");
	put(&b, "boxkite_refused_callers_total %llu\n", (unsigned long long)LOAD(a->refused_callers));
	put(&b, "# HELP boxkite_selftest_last_success_timestamp_seconds Unix time of the last passing self-test.\n"
		"# TYPE boxkite_selftest_last_success_timestamp_seconds gauge\n");
	put(&b, "boxkite_selftest_last_success_timestamp_seconds %lld\n", (long long)a->selftest_last_ok);
	put(&b, "# HELP boxkite_selftest_runs_total Self-test runs.\n# TYPE boxkite_selftest_runs_total counter\n");
	put(&b, "boxkite_selftest_runs_total %llu\n", (unsigned long long)LOAD(a->selftest_runs));
	put(&b, "# HELP boxkite_selftest_failures_total Self-test runs that failed.\n"
		"# TYPE boxkite_selftest_failures_total counter\n");
	put(&b, "boxkite_selftest_failures_total %llu\n", (unsigned long long)LOAD(a->selftest_failures));
	put(&b, "# HELP boxkite_start_time_seconds Unix time the agent started (a change is a restart).\n"
		"# TYPE boxkite_start_time_seconds gauge\n");
	put(&b, "boxkite_start_time_seconds %lld\n", (long long)started_at);
	return b.p;
}

static struct MHD_Daemon *mhd;

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct bk_agent *a = cls;
	if (!streq(method, "GET"))
		return MHD_NO;
	int status = 200;
	char *body;
	const char *ctype = "text/plain; charset=utf-8";
	if (streq(url, "/metrics")) {
		body = bk_metrics_text(a, NULL);
		ctype = "text/plain; version=0.0.4; charset=utf-8";
	} else if (streq(url, "/readyz")) {
		status = a->node_safe ? 200 : 503;
		body = strdup(a->node_safe ? "ready\n" : "not ready: node self-test failed\n");
	} else if (streq(url, "/healthz")) {
		body = strdup("ok\n");
	} else {
		status = 404;
		body = strdup("not found\n");
	}
	if (!body)
		return MHD_NO;
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", ctype);
	enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

int bk_metrics_start(struct bk_agent *a, const char *addr, char *err, size_t errlen)
{
	started_at = (int64_t)time(NULL);
	if (!addr[0] || streq(addr, "off"))
		return 0;
	char host[64];
	const char *colon = strrchr(addr, ':');
	uint64_t port;
	if (!colon || (size_t)(colon - addr) >= sizeof(host) || parse_u64(colon + 1, &port) < 0 || port > 65535) {
		return bk_fail_buf(err, errlen, -EINVAL, "--metrics takes ADDR:PORT (IPv4), or off");
	}
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		return bk_fail_buf(err, errlen, -EINVAL, "--metrics: %s is not an IPv4 address", host);
	}
	mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler, a,
			       MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, 16u,
			       MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
	if (!mhd) {
		return bk_fail_buf(err, errlen, -EADDRINUSE, "cannot serve metrics on %s", addr);
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_BIND_PORT);
	log_infof("metrics", "metrics and readiness on http://%s:%u/metrics and /readyz", host,
		 di ? di->port : (unsigned)port);
	return 0;
}

void bk_metrics_stop(void)
{
	if (mhd)
		MHD_stop_daemon(mhd);
	mhd = NULL;
}
