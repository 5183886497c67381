/* SPDX-License-Identifier: Apache-2.0 */
/* The BPF layer: one object loaded once at agent start, programs and maps
 * pinned under the bpffs directory with bk_ names, a long-lived keepalive
 * cgroup that holds one attachment of each program type (so per-exec
 * attaches stay cheap), and the programs attached to each exec's cgroup
 * itself (BPF_PROG_ATTACH, multi), which holds them until the kernel
 * releases it: an exec stays filtered when the agent dies, and its sockets
 * after it ended (bk_filter_retire; the why is in filter.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bpf/egress.h"
#include "agent/parse/policy.h"

#include <linux/bpf.h>
#include <sys/types.h>

#define BK_NPROGS 8

struct bk_prog_desc {
	const char *name; /* bk_connect4 ... */
	uint32_t id;
	char tag[17];
};

struct bk_filter;
struct bk_dnsx;

#define BK_MAX_LOCALS 16

struct bk_local_addr {
	uint8_t addr[16]; /* IPv4 as ::ffff:a.b.c.d */
	uint32_t kind;    /* BK_LOCAL_SELF / BK_LOCAL_RESOLVER */
};

struct bk_filter_att {
	uint64_t cgid;
	int n_locals;
	struct bk_local_addr locals[BK_MAX_LOCALS];
	bool has_dns; /* names in policy: the exec's DNS proxy (bk_dnsproxy) */
	struct bk_dns_target dns;
	struct bk_dnsx *dnsx; /* its endpoint (dnsproxy.c), closed by retire/detach */
	int n_attached; /* programs attached so far (bk_filter_attach) */
	bool attached;  /* its map entries written */
};

/* Load, pin and attach to the keepalive cgroup (created at keepalive_cg).
 * task_info: the socket hooks name the process of a denial (the kernel
 * gives them bpf_get_current_pid_tgid/comm; features.h). err receives a
 * sentence on failure. */
int bk_filter_open(const char *bpffs, const char *keepalive_cg, bool task_info, struct bk_filter **out, char *err,
		   size_t errlen);

/* The helpers each program of the object calls, read from its instructions
 * (for the feature probe: which helpers this kernel must offer to which
 * program type). */
#define BK_MAX_HELPER_USES 32
struct bk_prog_helpers {
	char prog[32];
	enum bpf_prog_type type;
	enum bpf_attach_type attach;
	int helpers[BK_MAX_HELPER_USES];
	int n;
};
int bk_filter_helper_uses(struct bk_prog_helpers out[BK_NPROGS]);

/* From what libbpf printed for a failed load: the program and the
 * verifier's first error line (its verdict, e.g. "unknown func
 * bpf_get_current_pid_tgid#14"). */
void bk_bpf_load_verdict(const char *log, char *prog, size_t plen, char *line, size_t llen);
void bk_filter_close(struct bk_filter *f);
/* Write every profile's allow and deny rules into the LPM maps. */
int bk_filter_load_policy(struct bk_filter *f, const struct bk_policy_set *ps, char *err, size_t errlen);
/* Policy entry first, then the programs: no instant where an attached
 * program finds no policy is possible, and a missing entry denies anyway.
 * att->locals/n_locals (and att->dns when has_dns) must be filled by the
 * caller before. */
int bk_filter_attach(struct bk_filter *f, int cg_fd, uint64_t cgid, struct bk_policy pol, struct bk_filter_att *att,
		     char *err, size_t errlen);
/* Denials of one exec cgroup so far (also those not sent as events). */
uint64_t bk_filter_denied(struct bk_filter *f, uint64_t cgid);
/* Detach at once: programs taken off the cgroup, policy entry removed.
 * Only for a cgroup none of whose sockets can outlive this call (the
 * self-test's probe, whose process closed its sockets and was reaped). */
void bk_filter_detach(struct bk_filter *f, int cg_fd, struct bk_filter_att *att);
/* The end of an exec: its policy entries go (its sockets are refused as
 * stale_socket from now on); its programs stay on its cgroup until the
 * kernel releases it — the last socket created in it is freed. */
void bk_filter_retire(struct bk_filter *f, struct bk_filter_att *att);
/* Just before an ended exec's cgroup is removed (cg_fd: the cgroup): every
 * program must still be on it, else a hole is counted and logged
 * (bpf_hole): a socket of the exec could have been used unfiltered. */
void bk_filter_removing(struct bk_filter *f, int cg_fd, const char *exec_id);
/* Holes so far (bk_filter_removing). */
uint64_t bk_filter_holes(struct bk_filter *f);
const struct bk_prog_desc *bk_filter_progs(const struct bk_filter *f);
/* The ids of the programs a previous agent had pinned in this bpffs
 * directory when this one started (none: 0). */
int bk_filter_prev_ids(const struct bk_filter *f, uint32_t ids[BK_NPROGS]);
/* The hook of program i (the order of bk_filter_progs). */
enum bpf_attach_type bk_filter_attach_type(const struct bk_filter *f, int i);
/* How many of our programs the kernel reports attached to a cgroup. */
int bk_filter_attached(struct bk_filter *f, int cg_fd);
/* Ring buffer of denials: poll fd and consume. */
typedef void (*bk_event_fn)(const struct bk_event *e, void *ud);
int bk_filter_events_poll(struct bk_filter *f, int timeout_ms, bk_event_fn fn, void *ud);
uint64_t bk_filter_stat(struct bk_filter *f, int idx);
const char *bk_reason_name(uint32_t reason);
struct bk_policy_set;
struct bk_exec_result;
/* The receipt's policy as the kernel holds it now: the exec's entry in
 * bk_policy, every allow/deny entry of its profile in the LPM maps, its
 * address entries in bk_local; res->policy_rules rendered from what was
 * read, res->policy_digest the SHA-256 of the bytes read (key and value
 * of each entry, in the maps' own order; the exec's cgroup id, part of
 * the bk_policy and bk_local keys, left out: one policy, one digest). */
void bk_filter_readback(struct bk_filter *f, const struct bk_policy_set *ps, const struct bk_filter_att *att,
			uint64_t cgid, struct bk_exec_result *res);

struct exec_ctx;
/* Step "bpf" of an exec: its policy entry (the profile; the pod's own
 * addresses when it shares the pod's network namespace, the pod's
 * resolvers when the profile allows DNS) and its programs attached to the
 * exec cgroup, then read back from the kernel: every one must be there.
 * From here on its denial events are filed with its result. */
int bk_step_bpf(struct exec_ctx *x);
/* A warm slot's take (warm.h): its denial events go to the request's
 * result, and holes count from now. */
int bk_step_bpf_take(struct exec_ctx *x);

/* Denial events of live execs: a thread polls the ring buffer and files
 * each event with the exec whose cgroup it came from. */
struct bk_engine;
struct bk_exec_result;
int bk_filter_events_start(struct bk_engine *e, char *err, size_t errlen);
void bk_filter_events_stop(struct bk_engine *e);
/* One pass over what is queued (when an exec ended: its own are all there). */
void bk_filter_events_drain(struct bk_engine *e);
/* The exec's first process (host pid), which names the exec in events
 * that cannot name their process. */
void bk_filter_watch_pid(struct bk_engine *e, struct bk_exec_result *res, pid_t pid);
/* An eventfd written (1) under the engine lock each time a denial is
 * added to res (-1: none); a streamed exec waits on it. */
void bk_filter_watch_wake(struct bk_engine *e, struct bk_exec_result *res, int efd);
/* No more events for res (it is about to go). */
void bk_filter_unwatch(struct bk_engine *e, struct bk_exec_result *res);
