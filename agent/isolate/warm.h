/* SPDX-License-Identifier: Apache-2.0 */
/* Warm exec slots: execs made ahead of their requests.
 *
 * A slot is an exec with every step taken that does not depend on its
 * request: its own cgroups (limits set, recorded for recovery), the BPF
 * programs and the profile's policy entry, a fresh network namespace. A
 * request of the same pod and profile takes one: its child is spawned
 * into them as for an exec made on the spot (child.h: born as the
 * command, its own IPC, pid and mount namespaces and /proc, interfaces
 * checked, the privilege drop, Landlock, seccomp, execve), and the receipt
 * is read back exactly as for one. Where the child cannot be born as the
 * command (BK_SPAWN_DIRECT false: not x86-64), a slot also holds its child,
 * a copy of the agent inside the container, parked before the command
 * (child.c, wait_go), which the request gives the command. No child is
 * parked where it can be avoided: a copy of the agent shares its pages
 * copy-on-write, and while it waits every page the agent writes faults and
 * is copied (~200 faults per exec, paced execs 1.6x slower than made on
 * request). A slot serves one exec: never reused, never refilled in place;
 * its cgroup, namespaces and processes are its exec's alone.
 *
 * A background thread (nice 10) makes them: after an exec of a pod, up to
 * exec.warm_slots for that pod and profile. A slot unused for
 * exec.warm_idle_s, or whose child or pod's sandbox container is gone, is torn
 * down; so are all at the agent's stop. A slot that cannot be made is
 * dropped: its request makes the exec on the spot, whose failure names the
 * layer. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bk_engine;
struct bk_pod;
struct bk_exec_req;
struct bk_warm_slot;

/* park: make a slot (its exec's steps up to the parked child; exec.c);
 * discard: tear one down unused */
struct bk_warm_ops {
	int (*park)(struct bk_engine *e, struct bk_warm_slot *w);
	void (*discard)(struct bk_warm_slot *w);
};
int bk_warm_start(struct bk_engine *e, const struct bk_warm_ops *ops, char *err, size_t errlen);
void bk_warm_stop(struct bk_engine *e);

/* A ready slot for this pod (same sandbox container, same cgroups, same
 * user) and this request's profile, removed from the list; NULL if none. */
struct bk_warm_slot *bk_warm_take(struct bk_engine *e, const struct bk_pod *pod, const struct bk_exec_req *req);

/* An exec begins (bk_warm_busy) and ends (bk_warm_want): at its end, ask
 * for its pod's slots to be made up to exec.warm_slots. Slots are made only
 * when no exec has run on the node for a moment (QUIET_MS): made beside a
 * running exec they would contend with it for the same kernel locks and
 * CPUs, and under back-to-back load they would only move work around. */
void bk_warm_busy(struct bk_engine *e);
void bk_warm_want(struct bk_engine *e, const struct bk_pod *pod, const struct bk_exec_req *req);

/* Is this exec id a slot's (waiting, or being made)? Its cgroup is named
 * boxkite-exec-<id> like every exec's; it runs nothing yet. */
bool bk_warm_has(struct bk_engine *e, const char *exec_id);

/* fn(id, ud) for each slot's exec id (waiting, or being made), under the
 * slots' lock: fn must not call back into warm.c. */
void bk_warm_each_id(struct bk_engine *e, void (*fn)(const char *exec_id, void *ud), void *ud);

struct bk_warm_stats {
	unsigned ready;                                   /* slots waiting now */
	uint64_t made, taken, expired, gone, failed;      /* since the start */
};
void bk_warm_stats(struct bk_engine *e, struct bk_warm_stats *st);
