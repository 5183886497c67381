/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox container instances the agent keeps descriptors for between
 * their execs: one table, one lifetime, two users.
 *
 * An entry is a container instance: its init's pid and start time (the
 * sandbox pidfd, which the identification of every request has just
 * checked alive) and a duplicate of that pidfd, to notice the init's exit.
 * What it keeps:
 *   - cgroup.c: the container's own v1 cgroup.procs (hybrid hosts), which
 *     each exec joins;
 *   - masks.c: the init's /proc/PID/mountinfo and the /proc masks parsed
 *     from it.
 * Each user says when its own part is stale and closes that part only.
 *
 * An entry goes, all of it:
 *   - when its init has exited (its pidfd readable): the agent's loop
 *     sweeps every 100 ms, and a new entry sweeps first. What it keeps
 *     pins the container's cgroups and mount namespace, so it must not
 *     outlive the container;
 *   - when it was dropped (a spawn or a file helper failed to join its
 *     cgroups) and no exec holds it;
 *   - when the table is full and it is the least recently used entry no
 *     exec holds.
 * An exec holds its container's entry from its cgroup's creation until its
 * spawn is done (cgroup.c): its child writes to the kept descriptors, so
 * no other thread closes them meanwhile. An entry no exec holds is used
 * only under the lock. */
#pragma once
#include "agent/caller/pod.h"
#include "agent/isolate/cgroup.h"
#include "agent/isolate/masks.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define BK_INSTANCES 8

struct bk_instance {
	pid_t pid; /* 0: a free entry */
	uint64_t start;
	int pidfd;
	uint64_t used;
	int users;    /* execs between their cgroup's creation and their spawn */
	bool dropped; /* closed when no exec holds it; never found again */
	/* cgroup.c: the container's own v1 cgroup.procs */
	int n_v1;
	struct {
		char path[1280];
		int fd;
	} v1[BK_CG_V1_MAX];
	/* masks.c: the init's mount table, open, and its masks */
	bool masks_kept;
	int mi_fd;
	ino_t mntns;
	struct proc_masks masks;
};

/* The descriptors the table may keep: the pidfds and mount tables on every
 * node, the v1 cgroup.procs on hybrid ones (the exec budget reserves them). */
#define BK_INSTANCES_FDS(hybrid) (BK_INSTANCES * (2 + ((hybrid) ? BK_CG_V1_MAX : 0)))

void bk_instances_lock(void);
void bk_instances_unlock(void);
/* Locked: pod's sandbox container's entry, made if there is none (a free
 * one, else the least recently used one no exec holds, after a sweep), its
 * use noted; NULL when there is none to be had (no sandbox pidfd, every
 * entry held, no descriptor left). */
struct bk_instance *bk_instance_locked(const struct bk_pod *pod);
/* Locked: in's descriptors closed, the entry free. */
void bk_instance_close_locked(struct bk_instance *in);
/* Entries whose init has exited, or dropped, that no exec holds: closed
 * (the agent's loop, every 100 ms). */
void bk_instances_sweep(void);

struct bk_instances_count {
	int entries;    /* container instances kept (a pidfd each) */
	int cgroup_fds; /* their v1 cgroup.procs */
	int mask_fds;   /* their mount tables */
};
void bk_instances_count(struct bk_instances_count *c);
