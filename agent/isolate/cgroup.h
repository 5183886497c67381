/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup discovery (v2, v1 pids/memory on hybrid hosts) and per-exec
 * cgroups. The v2 cgroup carries the BPF links and cgroup.kill; pids and
 * memory caps go to v2 controllers where the node has them, else to the v1
 * hierarchies. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

struct bk_cgroup_mounts {
	char v2[512];     /* cgroup2 mount point */
	char pids[512];   /* v1 pids mount point, "" if none */
	char memory[512]; /* v1 memory mount point, "" if none */
	bool v2_pids;     /* pids controller available in v2 */
	bool v2_memory;
};

/* Parse /proc/self/mountinfo text (pure; unit-tested). */
int bk_mountinfo_parse(const char *text, struct bk_cgroup_mounts *m);
int bk_cgroup_discover(struct bk_cgroup_mounts *m);

struct bk_exec_cg {
	char v2[4096];
	char pids[4096];   /* v1 path or "" */
	char memory[4096]; /* v1 path or "" */
	int v2_fd;         /* O_DIRECTORY fd for CLONE_INTO_CGROUP */
	int pids_procs_fd; /* v1 cgroup.procs, written by the child ("0") */
	int mem_procs_fd;
	uint64_t id;       /* v2 cgroup id (what BPF sees) */
	uint64_t pids_max, memory_max;
	bool pids_v1, memory_v1;
};

void bk_exec_cg_init(struct bk_exec_cg *cg);
/* pod_* are cgroup paths relative to each hierarchy's root ("/kubepods/...");
 * pod_pids/pod_mem may be NULL where the v1 hierarchy is absent. */
int bk_exec_cg_create(const struct bk_cgroup_mounts *m, const char *pod_v2, const char *pod_pids,
		      const char *pod_mem, const char *name, uint64_t pids_max, uint64_t memory_max,
		      struct bk_exec_cg *cg, struct bk_error *err);
/* Kill every process in the exec cgroup (cgroup.kill, plus v1 fallback) and
 * wait up to timeout_ms until the cgroup is empty. */
int bk_exec_cg_kill(struct bk_exec_cg *cg, int timeout_ms);
/* Remove the cgroup directories (after kill). Closes fds. */
int bk_exec_cg_destroy(struct bk_exec_cg *cg);
/* The v1 cgroup.procs descriptors of cg (hybrid hosts: one per v1
 * hierarchy the exec path uses), for a process that must join them itself
 * by writing "0" (the exec child; the file helper, across its exec). At
 * most max into fds; returns how many. */
int bk_exec_cg_v1_fds(const struct bk_exec_cg *cg, int *fds, int max);
/* Whether the memory controller of cg (v2 memory.events, else v1
 * memory.oom_control) counted an OOM kill in it. */
bool bk_exec_cg_oom_killed(const struct bk_exec_cg *cg);
/* cgroup id of a v2 directory. */
int bk_cgroup_id(const char *path, uint64_t *id);
/* Whether a v2 cgroup directory currently has processes. */
bool bk_cgroup_populated(const char *path);

struct exec_ctx;
/* Step "cgroup" of an exec: its own cgroup below the pod's, with its pids
 * and memory caps (x->cg; the receipt in x->res). */
int bk_step_cgroup(struct exec_ctx *x);
