/* SPDX-License-Identifier: Apache-2.0 */
/* The per-exec isolation engine. bk_exec_run takes the steps of one table
 * (exec.c), in order; the first that fails ends the exec before its command
 * starts (fail closed) and the result names the layer. Each step is a
 * function in the file of its kernel facility:
 *
 *   layer      step                 file
 *   container  sandbox user         privs.c    never as root
 *   cgroup     per-exec cgroup      cgroup.c   v2 (+ v1 pids/memory) caps
 *   cgroup     exec record          records.c  in the record table before
 *                                              anything runs in it, for a
 *                                              new agent
 *   bpf        egress filter        filter.c   policy entry + programs on the
 *                                              cgroup, read back (prog query)
 *   netns      fresh namespace      netns.c    from the pool, lo up
 *   landlock   execute allowlist    landlock.c the ruleset (sessions with
 *                                              allowed commands)
 *   container  spawn                child.c    clone3(CLONE_INTO_CGROUP) in
 *                                              the container's pid namespace,
 *                                              with its /proc masks (masks.c)
 *
 * and the exec child (child.c) takes its own steps, each reported back
 * with its layer when it fails: v1 cgroups (cgroup), enter the netns
 * (netns), enter the sandbox container's mnt/uts/ipc/cgroup namespaces, an
 * IPC namespace of its own, a nested pid namespace and its own /proc with
 * the container's masks, stdio and rlimits (container),
 * the one privilege drop bk_privs_drop (container), Landlock
 * (landlock), the seccomp filter and its read-back (seccomp, seccomp.h),
 * then execve /bin/sh -c COMMAND (exec). The agent then
 * collects output under caps; the timeout or the requester's hang-up kills
 * the whole cgroup; the teardown releases what the steps made.
 *
 * testing.fault (with testing.allow_unsafe) names a step that then fails
 * instead of running; the faults are a column of the two step tables. */
#pragma once
#include "agent/parse/procstatus.h"
#include <net/if.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/isolate/cgroup.h"
#include "agent/isolate/features.h"
#include "agent/parse/config.h"
#include "agent/isolate/filter.h"
#include "agent/isolate/netlink.h"
#include "agent/isolate/netns.h"
#include "agent/isolate/seccomp.h"
#include "agent/caller/pod.h"

#define BK_DENIED_MAX 64

struct bk_denial {
	char dst[48];
	char name[254];           /* a DNS name the agent's DNS proxy refused ("" otherwise) */
	uint16_t port;
	char proto[8];
	uint32_t pid;
	char comm[16];
	char reason[24];
	const char *hook;         /* sock_create, connect4, ..., egress */
	/* who pid/comm name: "process" (the hook ran in the context of the
	 * process that asked), "exec" (the hook could not name it —
	 * cgroup_skb/egress, or a kernel without bpf_task_info — and the agent
	 * named the exec's first process) */
	const char *attributed_to;
};

struct bk_engine {
	struct bk_config *cfg;
	struct bk_cgroup_mounts mounts;
	struct bk_filter *filter; /* NULL only when the BPF layer is off (testing) */
	int self_pidns;           /* to return from the sandbox's pid namespace */
	int devnull;
	pthread_t rb_thread;
	bool rb_started;
	volatile int stop;
	pthread_mutex_t lock;
	struct bk_exec_slot *slots; /* live execs, for denial events */
	int nslots;
	uint64_t events_unmatched;
	uint64_t live;
	char keepalive[512];
	int self_netns;
	struct bk_netns_pool netns; /* fresh network namespaces made ahead of time */
	int cap_last;
	struct bk_features features; /* what the kernel offers, probed at start */
	struct bk_seccomp seccomp;   /* the exec filter, built at start (layers.seccomp) */
	struct bk_warm *warm;        /* execs made ahead (warm.h) */
	struct bk_records *records;  /* the record table (records.h; NULL: a file per exec) */
};

struct bk_exec_req {
	const char *command;
	uint32_t timeout_s;
	const char *cwd;
	char *const *env;             /* "K=V", NULL-terminated */
	uint64_t out_cap;
	uint64_t err_cap; /* stderr's own cap (0: out_cap) */
	const struct bk_profile *profile; /* egress profile (selected by the caller) */
	int client_fd;                /* the requester's connection (-1: none): its hang-up kills the exec */
	/* the session's command allowlist, for the kernel: when landlock is
	 * set, only /bin/sh, these files (their real paths inside the sandbox
	 * container's root) and their interpreters may be executed */
	bool landlock;
	const char *const *landlock_paths;
	size_t landlock_n;
	/* called exactly once: when the child is in its cgroup, or on failure */
	void (*spawned)(void *ud);
	void *spawned_ud;
	/* NULL: output is kept in the result (up to the caps). Else it goes
	 * to the sink as it arrives and is not kept (the caps still count). */
	const struct bk_exec_sink *sink;
	/* a terminal (pty.h): the command's stdio is a pseudo-terminal of the
	 * exec's own devpts, its master goes to sink->pty_io (sink required);
	 * stdout is what the terminal shows, there is no stderr */
	bool pty;
	uint16_t pty_rows, pty_cols;
	uint32_t idle_s;              /* > 0: no input or output for this long ends it (timed_out) */
	uint32_t timeout_ms;          /* > 0: the timeout in ms (instead of timeout_s) */
	/* > 0: the command's stdin (a pipe's read end, a background process:
	 * session/procs.c); such an exec never takes a warm slot (their stdin
	 * is set before the request). 0: /dev/null. */
	int stdin_fd;
	/* > 0: readable or hung up (a background process's stop): SIGTERM to
	 * every process of the exec (bk_exec_cg_term), once; the kill stays
	 * client_fd's. 0: none. */
	int term_fd;
};

/* Where a streamed exec's output goes, on the exec's own thread, as it
 * happens. A negative return from any call ends the exec as a hang-up
 * does (its cgroup killed, requester_gone). */
struct bk_exec_sink {
	void *ud;
	/* the command is running (its cgroup, filters and process are set) */
	int (*started)(void *ud, const struct bk_exec_result *res);
	/* k 0: stdout, 1: stderr; n > 0 bytes as read (already within the cap) */
	int (*output)(void *ud, int k, const char *buf, size_t n);
	/* a denial the BPF ring buffer matched to this exec (a copy) */
	int (*denied)(void *ud, const struct bk_denial *d);
	/* req->pty: the requester's connection is readable (client_readable),
	 * or the terminal can take input again. Returns < 0 when the
	 * requester is gone, 1 while input is waiting for the terminal (the
	 * connection is then not read until it can take more), else 0. Also
	 * called once when the terminal can first take input. */
	int (*pty_io)(void *ud, int pty_fd, bool client_readable);
};

/* Buckets of bk_exec_result.t_us (µs), logged as the exec audit line's
 * phases_us: where an exec's time goes. The first five are the agent's
 * (cgroup, bpf, spawn until the child's setup report, run, teardown);
 * netns is the pool take and the child's entry and check; the rest are
 * parts of spawn, timed where they happen (the child's own clock is the
 * agent's CLOCK_MONOTONIC). */
enum bk_phase {
	BK_PH_CGROUP, BK_PH_BPF, BK_PH_SPAWN, BK_PH_RUN, BK_PH_TEARDOWN,
	BK_PH_SECCOMP,       /* in the child: the filter's install and PR_GET_SECCOMP */
	BK_PH_SECCOMP_READ,  /* the agent's read of the command's /proc/<pid>/status */
	BK_PH_NETNS,         /* the pool take (agent) and the child's setns and interface check */
	BK_PH_CLONE,         /* clone3 called until the child's first step */
	BK_PH_V1_JOIN,       /* the child's writes to v1 cgroup.procs (hybrid hosts) */
	BK_PH_CONTAINER,     /* the child's entry into the container, pid namespace, own /proc */
	BK_PH_PRIVS,         /* stdio, rlimits, the privilege drop, cwd */
	BK_PH_LANDLOCK,      /* the ruleset (agent) and restrict_self (child) */
	BK_PH_REPORT,        /* the child's ready report written until the agent has it */
	BK_PH_RECEIPT,       /* after the run: programs, holes, caps, cgroup id, policy read back */
	BK_PH_N
};

struct bk_exec_result {
	char exec_id[24];
	int exit_code;
	int signal;     /* the signal that ended the command (0: it exited); exit_code is then 128 + it */
	bool timed_out;
	bool truncated;
	char *out, *err;
	size_t outlen, errlen;
	double duration_ms;
	uint64_t started_unix_ns, ended_unix_ns; /* wall clock, for the signed receipt */
	/* receipt, read back from the kernel */
	bool fresh_netns;
	uint64_t netns_inode;
	char ifaces[BK_MAX_IFACES][IFNAMSIZ];
	int n_ifaces;
	char cgroup[4096];
	uint64_t cgroup_id;
	char cgroup_pids[4096];
	char cgroup_memory[4096];
	int n_cgroups_v1;             /* hybrid hosts: the exec's cgroup in every v1 hierarchy */
	struct {
		char ctrls[128];
		char path[1280];
	} cgroups_v1[BK_CG_V1_MAX];
	uint64_t pids_max, memory_max; /* read from its cgroup files at the end of the run;
					* BK_CG_UNLIMITED: "max" */
	bool limits_read;               /* both were read */
	int n_progs;
	struct bk_prog_desc progs[BK_NPROGS];
	bool bpf_held;                /* all programs still attached when the command ended, and
				       * no ended exec's cgroup lost one meanwhile (bk_filter_holes) */
	bool requester_gone;          /* killed because the requester hung up */
	bool landlock;                /* the execute allowlist was applied */
	int seccomp_mode;             /* /proc/<pid>/status of the command: Seccomp (2: filter) */
	int seccomp_filters;          /* ... and Seccomp_filters */
	uint32_t uid, gid;            /* ... its real uid and gid */
	struct bk_proc_status proc;   /* ... every field the receipt shows */
	char proc_source[32];         /* where they were read ("proc_status_after_execve") */
	char policy[64];
	char policy_digest[65];
	char *policy_rules;           /* canonical text of every rule in force */
	/* denials seen during the exec */
	struct bk_denial denied[BK_DENIED_MAX];
	int n_denied;
	uint64_t denied_total;
	uint32_t t_us[BK_PH_N]; /* phase timings (enum bk_phase) */
	/* failure: layer != "" means the command did not run, or (a read-back
	 * after its execve failed) was killed at once: killed_after_start */
	bool killed_after_start;
	bool warm;                    /* it took a slot made ahead (warm.h) */
	char layer[24];
	char error[512];
};

int bk_engine_init(struct bk_engine *e, struct bk_config *cfg, char *err, size_t errlen);
void bk_engine_fini(struct bk_engine *e);

void bk_exec_result_free(struct bk_exec_result *r);
/* Returns 0 when the command ran (whatever its exit code), -errno when a
 * layer failed (res->layer/res->error say which and why). */
int bk_exec_run(struct bk_engine *e, const struct bk_pod *pod, const struct bk_exec_req *req,
		struct bk_exec_result *res);
