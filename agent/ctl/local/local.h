/* SPDX-License-Identifier: Apache-2.0 */
/* Local mode: a sandbox pod run by runc on a plain host — a pod network
 * namespace, a "sandbox" container and a "shim" container, cgroups in
 * kubelet's cgroupfs layout and CRI-style annotations, so the agent resolves
 * it exactly as it resolves containerd+runc pods on a Kubernetes node. */
#pragma once
#include <stdint.h>

struct local_opts {
	const char *policy;
	const char *agent_socket; /* host path of the agent socket */
	const char *shim_bin;     /* host path of boxkite-shim */
	const char *runc_root;    /* runc --root, default /run/runc */
	const char *dns;          /* nameserver for the pod's resolv.conf (default 10.96.0.10) */
	/* the pod's own cgroup, as kubelet would set it: memory and pids caps,
	 * and a CPU quota (in thousandths of a CPU; 0: none) */
	uint64_t memory;
	uint64_t pids;
	uint64_t cpus_milli;
	/* extra NAME=VALUE settings for the shim container (--shim-env), e.g.
	 * BACKEND_URL for /tool-call; at most LOCAL_SHIM_ENV_MAX */
	const char *shim_env[8];
	unsigned n_shim_env;
	/* seconds create waits for the shim's /health to say the agent is
	 * connected (0: return as soon as runc started the containers) */
	unsigned wait_s;
};
#define LOCAL_SHIM_ENV_MAX 8

int local_create(const char *name, const struct local_opts *o);
int local_delete(const char *name, const struct local_opts *o);
int local_list(void);
