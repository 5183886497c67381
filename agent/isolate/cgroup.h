/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup discovery (v2, and every v1 hierarchy on hybrid hosts) and
 * per-exec cgroups. The v2 cgroup carries the BPF programs and cgroup.kill;
 * pids and memory caps go to v2 controllers where the node has them, else
 * to the v1 hierarchies. On a hybrid host the exec also gets a child of the
 * pod's cgroup in every v1 hierarchy the pod is in (cpu, cpuacct, cpuset,
 * blkio, devices, freezer, ...), so every limit the pod has holds for it:
 * clone3(CLONE_INTO_CGROUP) places the child in the v2 one, the child joins
 * the v1 ones (writing "0" to their cgroup.procs) before anything else. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/caller/pod.h"
#include "lib/err.h"

#define BK_CG_V1_MAX 16

struct bk_instance; /* instances.h */

/* A v1 hierarchy: its mount point and its superblock options
 * ("rw,cpu,cpuacct", "rw,name=systemd"), which name its controllers. */
struct bk_cg_v1_mount {
	char mount[512];
	char opts[256];
};

struct bk_cgroup_mounts {
	char v2[512];     /* cgroup2 mount point */
	char pids[512];   /* v1 pids mount point, "" if none */
	char memory[512]; /* v1 memory mount point, "" if none */
	bool v2_pids;     /* pids controller available in v2 */
	bool v2_memory;
	int n_v1;         /* every v1 hierarchy mounted */
	struct bk_cg_v1_mount v1[BK_CG_V1_MAX];
};

/* Parse /proc/self/mountinfo text (pure; unit-tested). */
int bk_mountinfo_parse(const char *text, struct bk_cgroup_mounts *m);
int bk_cgroup_discover(struct bk_cgroup_mounts *m);

/* The exec's cgroup in one v1 hierarchy. */
struct bk_exec_cg_v1 {
	char ctrls[128];    /* the hierarchy, as /proc/PID/cgroup names it */
	char path[1280];
	int procs_fd;       /* its cgroup.procs, written by the child ("0") */
	bool shared;        /* the sandbox container's own cgroup (no per-exec cap
			     * in this hierarchy): joined, never killed or removed */
	bool borrowed;      /* procs_fd is the container's kept one (not closed here) */
	char join_err[192]; /* the child's sentence if that write fails */
};

struct bk_exec_cg {
	char v2[4096];
	char pids[4096];   /* v1 path or "" (also in v1[]) */
	char memory[4096]; /* v1 path or "" (also in v1[]) */
	int v2_fd;         /* O_DIRECTORY fd for CLONE_INTO_CGROUP */
	int n_v1;          /* hybrid hosts: every v1 hierarchy the pod is in */
	struct bk_exec_cg_v1 v1[BK_CG_V1_MAX];
	uint64_t id;       /* v2 cgroup id (what BPF sees) */
	uint64_t pids_max, memory_max;
	bool pids_v1, memory_v1;
	struct bk_instance *kept; /* the container's kept descriptors this exec uses (instances.h) */
};

void bk_exec_cg_init(struct bk_exec_cg *cg);
/* pod->pod_v2 is the pod's path relative to the v2 root ("/kubepods/...");
 * pod->v1[0..n_v1) the pod in each v1 hierarchy it is in (none on a pure
 * v2 node). A child named `name` is made below the pod in v2 and in the v1
 * hierarchies that hold the pids or memory cap (hybrid hosts); in every
 * other v1 hierarchy the exec joins the sandbox container's own cgroup, as
 * `runc exec` does (its CPU quota, cpuset, device rules, blkio weights
 * apply). A hierarchy with controllers the pod is in but that is not
 * mounted here is an error (the exec would escape it); pids and memory
 * caps must land somewhere. */
int bk_exec_cg_create(const struct bk_cgroup_mounts *m, const struct bk_pod *pod, const char *name,
		      uint64_t pids_max, uint64_t memory_max, struct bk_exec_cg *cg, struct bk_error *err);
/* A spawn (or a file helper's join) that used cg's kept v1 cgroup.procs
 * (hybrid hosts: the sandbox container's own, kept between its execs,
 * instances.h) failed: the container's next exec opens them afresh. */
void bk_exec_cg_kept_drop(const struct bk_exec_cg *cg);
/* The v1 hierarchy (index into m->v1) whose options name every controller
 * of ctrls ("cpu,cpuacct"), or -1. */
int bk_cg_v1_find(const struct bk_cgroup_mounts *m, const char *ctrls);
/* Kill every process in the exec cgroup (cgroup.kill, plus v1 fallback) and
 * wait up to timeout_ms until the cgroup is empty. */
int bk_exec_cg_kill(struct bk_exec_cg *cg, int timeout_ms);
/* A graceful stop (cgterm.c): SIGTERM to every process of the exec's v2
 * cgroup, each pinned by its pidfd and checked to be in it. The command,
 * init of the exec's own pid namespace, gets the default action of a TERM
 * it has no handler for (the kernel would drop it there): SIGKILL, last,
 * and *init_killed (set also when it exits first: it ended by the stop).
 * How many were signalled, or -errno. */
int bk_exec_cg_term(const struct bk_exec_cg *cg, bool *init_killed);
/* The exec's process is in its cgroups: close the fds only its spawn used
 * (the cgroups are known by their paths from here). */
void bk_exec_cg_setup_done(struct bk_exec_cg *cg);
/* Remove the cgroup directories (after kill). Closes fds. */
int bk_exec_cg_destroy(struct bk_exec_cg *cg);
/* The directories bk_exec_cg_destroy would remove, moved out of cg (left
 * as destroy leaves it, its fds closed) to be removed later, elsewhere, by
 * bk_exec_cg_dirs_remove (which frees them; same result as destroy's).
 * NULL: out of memory, cg untouched. */
struct bk_exec_cg_dirs;
struct bk_exec_cg_dirs *bk_exec_cg_take_dirs(struct bk_exec_cg *cg);
int bk_exec_cg_dirs_remove(struct bk_exec_cg_dirs *d);
/* The v2 cgroup among them (NULL: none). */
const char *bk_exec_cg_dirs_v2(const struct bk_exec_cg_dirs *d);
/* The v1 cgroup.procs descriptors of cg (hybrid hosts: one per v1
 * hierarchy the exec path uses), for a process that must join them itself
 * by writing "0" (the exec child; the file helper, across its exec). At
 * most max into fds; returns how many. */
int bk_exec_cg_v1_fds(const struct bk_exec_cg *cg, int *fds, int max);
/* Whether the memory controller of cg (v2 memory.events, else v1
 * memory.oom_control) counted an OOM kill in it. */
bool bk_exec_cg_oom_killed(const struct bk_exec_cg *cg);
/* The exec's caps as the kernel holds them now: pids.max and memory.max
 * of its v2 cgroup, else v1 pids.max and memory.limit_in_bytes.
 * BK_CG_UNLIMITED for "max" (or v1's page-rounded LONG_MAX). 0, or -errno
 * with the cap that could not be read left at 0. */
#define BK_CG_UNLIMITED UINT64_MAX
int bk_exec_cg_read_limits(const struct bk_cgroup_mounts *m, const struct bk_exec_cg *cg, uint64_t *pids,
			   uint64_t *memory);
/* cgroup id of a v2 directory. */
int bk_cgroup_id(const char *path, uint64_t *id);
/* Whether a v2 cgroup directory currently has processes. */
bool bk_cgroup_populated(const char *path);

struct exec_ctx;
/* Step "cgroup" of an exec: its own cgroup below the pod's, with its pids
 * and memory caps (x->cg; the receipt in x->res). */
int bk_step_cgroup(struct exec_ctx *x);
