/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's state: configuration, the isolation engine, counters. One
 * struct, owned by main.c; the rooms below read and count into it. This
 * header holds the struct only (no functions), so including it never ties a
 * room to the code above it. */
#pragma once
#include "lib/sign.h"
#include <pthread.h>
#include <stdint.h>

#include "agent/isolate/exec.h"

#define BK_HIST_BUCKETS 12
#define BK_MAX_DENY_SERIES 256
#define BK_MAX_POD_SERIES 256

struct bk_deny_series {
	char pod[128];
	char ns[128];
	char reason[24];
	uint64_t count;
};

/* What the agent's own resources allow, set once at start from
 * RLIMIT_NOFILE (main.c, agent_limits); 0 in a field means no limit. */
struct bk_limits {
	uint64_t nofile;         /* RLIMIT_NOFILE soft limit, raised to the hard limit */
	int conns_max;           /* agent socket: open connections */
	int conns_per_peer;      /* ... of one peer (a pod; a uid outside pods) */
	int admin_max;           /* admin socket: its own budget */
	int first_frame_ms;      /* a connection that sends no frame by then is dropped */
	int idle_ms;             /* ... and one idle between requests */
	int exec_budget;         /* live execs on the node (fds per exec: BK_EXEC_FDS) */
	int exec_per_pod;        /* live execs of one pod: its share of exec_budget */
};

/* One pod's share of the counters: all its GET /metrics may show. */
struct bk_pod_stats {
	char pod[256]; /* as long as struct bk_pod's */
	char ns[256];
	uint64_t execs[4];          /* completed, timeout, isolation_failed, refused_node_unsafe */
	uint64_t layer_failures[6]; /* as in struct bk_agent */
	uint64_t hist[BK_HIST_BUCKETS + 1];
	double hist_sum;
	uint64_t live;     /* execs of this pod running now */
	uint64_t denied;   /* connection attempts its execs had refused by BPF (exact totals) */
	uint64_t last_ns;  /* last update: the least recent row without live execs makes room */
};

struct bk_agent {
	struct bk_config cfg;
	struct bk_limits limits;
	struct bk_engine engine;
	struct bk_signer *signer; /* the node key: every exec receipt is signed with it */
	char node_name[256];      /* $NODE_NAME (the DaemonSet's spec.nodeName), else the host name */
	uint64_t start_ns;
	/* counters (atomic) */
	int req_serving, req_waiting; /* request threads (main.c): serving one, waiting for the next */
	uint64_t requests, refused_callers, refused_conns, dropped_conns, refused_execs_budget, execs_ok, execs_failed, execs_timeout, execs_refused_unsafe;
	uint64_t layer_failures[6]; /* cgroup, bpf, netns, container, exec, other */
	/* exec duration histogram (seconds) */
	uint64_t hist[BK_HIST_BUCKETS + 1];
	double hist_sum;
	/* node self-test */
	volatile int node_safe;
	uint64_t selftest_runs, selftest_failures;
	int64_t selftest_last_ok; /* unix seconds, 0 = never */
	char selftest_error[512];
	/* its netns read-back (under stats_lock): when it last made a fresh
	 * namespace and what netlink listed there, comma-separated */
	int64_t netns_checked_at; /* unix seconds, 0 = never */
	char netns_fresh_ifaces[256];
	/* denials by sandbox and reason; per-pod counters (under stats_lock) */
	pthread_mutex_t stats_lock;
	struct bk_deny_series deny[BK_MAX_DENY_SERIES];
	int n_deny;
	struct bk_pod_stats pods[BK_MAX_POD_SERIES];
	int n_pods;
};

extern const double bk_hist_bounds[BK_HIST_BUCKETS];

