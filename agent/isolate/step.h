/* SPDX-License-Identifier: Apache-2.0 */
/* One exec on its way through the steps of bk_exec_run (exec.c): what the
 * steps read (engine, pod, request, result) and what each leaves for the
 * later steps and for the teardown. Internal to agent/isolate/: each step
 * is a function `int bk_step_X(struct exec_ctx *)` in the file of its
 * kernel facility, declared in that file's header; it returns 0 or a
 * negative errno with x->err filled by bk_fail (its layer left "" when the
 * failure belongs to the step's own layer). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "agent/isolate/exec.h"
#include "lib/err.h"
#include "lib/util.h"

/* A testing.fault (config testing.fault, only with testing.allow_unsafe):
 * the step that carries it in its table fails with err and msg instead of
 * running — the tests' way to see every layer fail closed. */
struct bk_fault {
	const char *name;
	int err;
	const char *msg;
};

static inline bool bk_fault_hit(const struct bk_fault *f, const char *configured)
{
	return f->name && configured && streq(f->name, configured);
}

struct exec_ctx {
	struct bk_engine *e;
	const struct bk_config *cfg;
	const struct bk_pod *pod;
	const struct bk_exec_req *req;
	struct bk_exec_result *res;
	bool fresh_netns;          /* a fresh network namespace (profile, and the layer is on) */
	uint64_t t0;               /* start (ns, monotonic); the timeout counts from here */
	struct bk_error err;       /* why the failing step failed */

	/* what the steps made, released by the teardown (exec.c) */
	struct bk_exec_cg cg;      /* cgroup: the exec's cgroups and their fds */
	bool recorded;             /* cgroup: its record is in the state directory */
	int record_slot;           /* cgroup: in the record table's slot (-1: its own file) */
	struct bk_filter_att att;  /* bpf: policy entry and programs attached */
	uint64_t holes0;           /* bpf: bk_filter_holes when the exec's filter went on */
	bool watched;              /* bpf: denial events are matched to res */
	int netns_fd;              /* netns: the fresh namespace (-1: none) */
	int landlock_fd;           /* landlock: the ruleset (-1: none) */
	int pidfd;                 /* spawn: the exec child */
	bool direct;               /* spawn: that child is the command (no monitor: child.c) */
	uint64_t t_clone;          /* spawn: CLOCK_MONOTONIC when clone3 was called */
	uint32_t ran_before_us;    /* spawn: the command's time since its execve before the agent
				    * read its report (a deferred read, child.c): the run's */
	int out_fd, err_fd;        /* spawn: read ends of its stdout and stderr (a terminal: its
				    * master, and -1) */
	int pty_sock;              /* spawn: where the child sends its terminal's master (-1) */
	bool spawned_called;       /* req->spawned was called */
	bool emptied;              /* run: its cgroups were seen empty after the command ended
				    * (nothing enters them after that): no second kill */
	/* a warm slot (warm.h) */
	bool warm_prep;            /* made ahead of its request (not watched, not spawned) */
	bool warm;                 /* this exec took a slot */
	bool slot_gone;            /* unusable before the command was given: its child gone, or
				    * what its policy entries were made from changed (nothing ran) */
	int go_fd;                 /* park: the slot's go socket (the command goes here) */
	int info_fd;               /* park: the child's report pipe */
	pid_t park_pid;            /* park: the slot's child (host pid) */
};

/* A warm slot: an exec made ahead of its request, every step taken up to
 * the command (its child parked, wait_go in child.c). Owned by warm.c's
 * list; its exec_ctx points at its own req/res/pod until a request takes
 * it (bk_exec_run adopts it). */
struct bk_warm_slot {
	struct exec_ctx x;
	struct bk_exec_result res;
	struct bk_exec_req req;
	struct bk_pod pod;         /* its own copy (sandbox_pidfd its own) */
	uint64_t made_ns;
	struct bk_warm_slot *next;
};
