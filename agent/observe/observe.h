/* SPDX-License-Identifier: Apache-2.0 */
/* agent/observe/: observable isolation. Nothing here builds JSON: each
 * report is a typed snapshot that agent/api/op_observe.c turns into a
 * response.
 *
 *   observe.c   reports read back from the kernel at the moment they are
 *               asked for (inspect and /isolation: struct bk_pod_report;
 *               status: struct bk_node_status) and verify (probes from a
 *               real exec context of a sandbox, through the exec bracket:
 *               struct bk_verify_result)
 *   selftest.c  the node self-test that marks the node unsafe when a layer
 *               does not hold (at start and periodically)
 *   metrics.c   Prometheus text metrics and the readiness endpoint
 *               (metrics.h)
 *   events.c    the node's event stream: exec start/end, denials,
 *               self-test results, as logged (events.h)
 *
 * A report says what the kernel holds now (attached programs, the policy
 * map entry, cgroup limit files, the interfaces of an exec's namespace),
 * never what the agent believes it set up. */
#pragma once
#include <linux/bpf.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent.h"
#include "agent/session/livepolicy.h"
#include "lib/err.h"

/* ---- inspect / isolation ------------------------------------------------------------ */

/* A BPF program as the kernel describes it. */
struct bk_obs_prog {
	uint32_t id;
	bool known;                        /* the kernel still has it: name and tag were read */
	char name[BPF_OBJ_NAME_LEN + 1];
	char tag[17];
};

/* One of the node's pinned programs. */
struct bk_obs_pinned_prog {
	char path[600];
	bool pinned;                       /* false: nothing pinned at path */
	char expected[64];                 /* the program that should be there */
	struct bk_obs_prog prog;           /* when pinned */
};

#define BK_OBS_MAPS 6

/* One pinned map: sha256 over its sorted key||value entries. */
struct bk_obs_map {
	char name[16];
	char pinned[600];
	bool open_failed;                  /* the map could not be opened: */
	int open_errno;                    /* ... errno */
	bool have_id;                      /* its info was read */
	uint32_t id;
	bool digested;
	uint64_t entries;
	char digest[65];
};

/* A value of a cgroup limit file: a number, or its text ("max"). */
struct bk_obs_value {
	bool present;                      /* the file was read */
	bool is_num;
	uint64_t num;
	char text[65];
};

/* The exec's entry in the policy map. */
struct bk_obs_policy_entry {
	uint32_t profile_id;
	bool named;                        /* a configured profile has that id */
	char profile[64];
	bool loopback, dns, icmp;
};

/* One live exec cgroup of a pod, read back from the kernel. */
struct bk_obs_exec {
	char cgroup[4400];
	bool have_cgroup_id;
	uint64_t cgroup_id;
	bool have_bpf;                     /* the attached programs were queried */
	struct bk_obs_prog bpf[BK_NPROGS * 16];
	int n_bpf;
	bool bpf_complete;                 /* each of our programs is attached */
	bool have_policy;                  /* the BPF layer is on: policy_entry is reported */
	bool policy_found;                 /* ... and the map holds one (else null) */
	struct bk_obs_policy_entry policy;
	struct bk_obs_value pids_max, pids_current, memory_max;
	bool have_procs;                   /* cgroup.procs was read */
	int processes;
	bool setting_up;                   /* no process has left the agent's netns yet */
	uint64_t netns_inode;
	bool have_ifaces;                  /* the namespace was entered and listed */
	char ifaces[BK_MAX_IFACES][IFNAMSIZ];
	int n_ifaces;
};

struct bk_obs_denials {
	char reason[24];
	uint64_t count;
};

struct bk_pod_report {
	char pod[256], ns[256], pod_uid[BK_UID_LEN + 1], sandbox_id[BK_ID_MAX + 1];
	uint32_t uid;
	bool node_safe;
	bool have_policy;                  /* else policy_error */
	char policy[64];
	const char *policy_source;         /* where the profile of new execs comes from: bk_profile_source_names[] */
	bool policy_changed;               /* the agent saw it change (livepolicy.h): */
	struct bk_profile_change policy_change;
	char policy_error[256];
	char profile_digest[65];
	/* layers, each read back from the kernel (docs/api.md) */
	bool netns_fresh;                  /* the profile runs execs in a namespace of their own (and the layer is on) */
	bool layer_netns_held;             /* ... and the self-test's fresh namespace held only lo, as does each live exec's */
	bool layer_bpf;                    /* the checks below held */
	bool layer_seccomp;
	bool layer_cgroup;                 /* the checks below held */
	struct {
		bool opened;                   /* the pod's v2 cgroup directory */
		char path[4200];
		uint64_t cgroup_id;
		char controllers[256];         /* its cgroup.controllers */
		const char *pids, *memory;     /* where the exec caps live: "v2", "v1", or NULL (not available) */
	} cg;
	struct {
		bool loaded;                   /* the agent holds its programs (the layer is on) */
		int programs_pinned;           /* pins holding the very program the agent loaded */
		bool policy_map;               /* the pinned policy map opens */
		int live_execs, live_execs_complete; /* exec cgroups with all eight attached (prog query) */
	} bpfck;
	struct {
		int64_t checked_at;            /* the self-test's last fresh namespace, 0: never */
		char fresh_interfaces[256];    /* what netlink listed there */
		int live_execs, live_execs_lo_only; /* fresh profile: live execs whose namespace holds only lo */
	} nsck;
	bool node_objects;                 /* progs and maps were read (the BPF layer is on) */
	struct bk_obs_pinned_prog progs[BK_NPROGS];
	struct bk_obs_map maps[BK_OBS_MAPS];
	struct bk_obs_exec *execs;
	size_t n_execs;
	struct bk_obs_denials denials[BK_MAX_DENY_SERIES];
	int n_denials;
	/* the pod's own cgroup now (v2 files, or the v1 hierarchy holding the
	 * controller): pids.current/pids.max, memory.current/memory.max (v1:
	 * memory.usage_in_bytes/memory.limit_in_bytes) */
	struct bk_obs_value pod_pids_current, pod_pids_max, pod_memory_current, pod_memory_max;
	/* the agent's counters of this pod's execs (since it started) */
	bool have_counts;
	uint64_t execs_total, execs_live, denied_total;
};

/* The isolation of one sandbox pod, from the kernel. with_node_objects:
 * also the node's pinned programs and map digests. 0 or -ENOMEM; free
 * with bk_pod_report_free() either way. */
int bk_obs_pod_report(struct bk_agent *a, const struct bk_pod *p, bool with_node_objects, struct bk_pod_report *out);
void bk_pod_report_free(struct bk_pod_report *r);

/* ---- status ----------------------------------------------------------------------------- */

struct bk_status_sandbox {
	bool resolved;                     /* else pod and error */
	char pod[256];
	char error[512];
	struct bk_pod_report report;       /* without the node's BPF objects */
};

struct bk_node_status {
	bool node_safe;
	uint64_t selftest_runs, selftest_failures;
	int64_t selftest_last_ok;
	char selftest_error[512];
	bool layer_netns, layer_bpf, layer_seccomp;
	uint64_t live_execs, execs_ok, execs_failed, refused_callers, requests;
	bool have_bpf;                     /* the BPF layer's counters below */
	uint64_t denied_total, events_lost, events_suppressed;
	struct bk_features features;       /* the kernel (release) and what it offers, probed at start */
	struct bk_status_sandbox *sandboxes;
	size_t n_sandboxes;
};

/* The node and every sandbox pod on it. 0 or -ENOMEM; free with
 * bk_node_status_free() either way. */
int bk_obs_status(struct bk_agent *a, struct bk_node_status *out);
void bk_node_status_free(struct bk_node_status *s);

/* ---- verify ------------------------------------------------------------------------------ */

/* The four targets of the config, and for a profile with allow rules none
 * of whose targets it admits, one address its first admitting TCP rule
 * holds ("allow_rule"); under a profile with allow_domains two DNS probes
 * (their address is the name asked): "dns_allowed", the profile's first
 * exact name, allowed when an address of the answer is the probe's in
 * bk_resolved (read back at its end), and "dns_denied", a name it does not
 * allow, stopped (layer dns_proxy, reason dns_name) when it got
 * NXDOMAIN/REFUSED and the proxy filed a dns_name denial naming it. */
#define BK_VERIFY_PROBES 7

/* How a probe ended. Only stopped (when the profile denies the target) and
 * allowed count as passing. */
enum bk_probe_outcome {
	BK_PROBE_STOPPED,                  /* a layer refused it at once: layer and reason say which and why */
	BK_PROBE_ALLOWED,                  /* it got through, and the profile admits the target */
	BK_PROBE_REACHED,                  /* it got past every layer although the profile denies the target */
	BK_PROBE_SKIPPED,                  /* nothing can be concluded (no route, no answer, no result): reason */
};
const char *bk_probe_outcome_name(enum bk_probe_outcome o);

struct bk_verify_probe {
	char name[24];                     /* bk_target_names[i], "allow_rule", "dns_allowed", "dns_denied" */
	char address[64];                  /* addr:port */
	bool expect_allowed;               /* the profile admits it (bk_policy_admits_tcp) */
	char result[32];                   /* what the connect returned: connected, timeout, EPERM, ...; "" none */
	double ms;                         /* how long it took; 0 when no result came */
	enum bk_probe_outcome outcome;
	const char *layer;                 /* stopped: "bpf", "netns", "dns_proxy" or "unattributed"; else NULL */
	char reason[32];                   /* the BPF denial's reason, the errno, no_route, ... */
	bool pass;
};

/* The outcome of one probe from what the connect returned (result:
 * "connected", "timeout", an errno name, "" for no result). denial: the
 * reason of a BPF denial the kernel reported for this address and port,
 * or NULL; eperm_layer: the layer an EPERM without a reported denial is
 * put down to (NULL: "unattributed"); fresh_netns: the probe ran in a
 * namespace of its own (no route there is the netns layer holding; in the
 * pod's namespace it is only a routing failure: skipped, no_route). Fills
 * outcome, layer, reason and pass of pr (expect_allowed and result set). */
void bk_probe_judge(struct bk_verify_probe *pr, const char *denial, const char *eperm_layer, bool fresh_netns);

struct bk_verify_result {
	bool ran;                          /* false: the exec context could not be built (error) */
	char error[BK_ERRMSG_MAX];
	char exec_id[24];
	char policy[64];
	struct {
		bool fresh;
		char interfaces[256];          /* what the command itself saw */
		bool held;
	} netns;
	struct {
		int programs_attached;
		bool held_to_end;
		bool held;
	} bpf;
	struct {
		int mode, filters;             /* the receipt's read-back from /proc */
		bool held;                     /* mode 2 (filter) */
	} seccomp;
	struct bk_verify_probe probes[BK_VERIFY_PROBES];
	int n_probes;
	int n_stopped, n_allowed, n_reached, n_skipped, n_failed;  /* n_failed: probes that did not pass */
	bool passed;                       /* every layer held and every probe passed */
};

/* Probe the verify targets from a real exec context of the pod (through
 * the exec bracket, like any exec), holding it hold seconds (0..60) first;
 * client_fd is the requester's connection (its hang-up kills the exec).
 * 0 when out describes the verify (passed or not; logged as "verify"),
 * -EINVAL when a configured target is not addr:port (err says which). */
int bk_obs_verify(struct bk_agent *a, const struct bk_pod *p, double hold, int client_fd,
		  struct bk_verify_result *out, struct bk_error *err);

/* ---- the self-test ------------------------------------------------------------------------- */

/* One self-test now (updates a->node_safe); 0 when it passed. */
int bk_selftest_run(struct bk_agent *a);
/* Start the periodic self-test thread. */
int bk_selftest_start(struct bk_agent *a);
void bk_selftest_stop(void);
