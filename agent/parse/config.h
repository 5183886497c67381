/* SPDX-License-Identifier: Apache-2.0 */
/* Node configuration: operator-owned, read from --config (JSON) and flags.
 * Nothing here is settable through the shim API. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/parse/policy.h"

#define BK_MAX_ROOTS 4
#define BK_MAX_MASKED 16

struct bk_config {
	char socket[108];
	char admin_socket[108];
	char state_dir[256];
	char bpffs[256];
	char metrics[64];
	char runtime_roots[BK_MAX_ROOTS][256];
	int n_roots;
	char sandbox_container[64];
	char shim_container[64];
	uint64_t pids_max;
	uint64_t memory_max;
	uint64_t warm_slots;     /* exec.warm_slots: execs made ahead per pod (0: none) */
	uint64_t warm_idle_s;    /* exec.warm_idle_s: an unused slot goes after this */
	uint32_t timeout_default; /* seconds */
	uint32_t timeout_max;
	uint64_t output_cap;      /* bytes, each of stdout and stderr */
	/* terminals (issue 18): "pty" {max_per_pod, idle_timeout_s, max_seconds, exec_enabled} */
	uint64_t pty_max;         /* pty.max_per_pod: live terminals (/pty, exec -it, /pty-exec) per pod */
	uint64_t pty_idle_s;      /* pty.idle_timeout_s: a terminal with no input or output ends */
	uint64_t pty_max_s;       /* pty.max_seconds: a terminal's longest life */
	bool pty_exec;            /* pty.exec_enabled: POST /pty-exec (404 when off, as the reference) */
	/* background processes (the /process routes, session/procs.c) */
	uint64_t process_max;        /* exec.process_max: running at once per pod (the reference's 429) */
	uint64_t process_output_cap; /* exec.process_output_cap: bytes kept per process (oldest dropped) */
	uint64_t process_runtime_max; /* exec.process_runtime_max: max_runtime_seconds ceiling */
	bool layer_netns;         /* fresh netns per exec */
	bool layer_bpf;           /* BPF egress filters; false only with testing.allow_unsafe */
	bool layer_landlock;      /* kernel execute allowlist for sessions with allowed_commands */
	bool layer_seccomp;       /* per-exec seccomp filter; false only with testing.allow_unsafe */
	bool allow_unsafe;        /* testing switch: permits turning the BPF or seccomp layer off */
	char fault[32];           /* testing: inject a failure at "cgroup", "bpf", "netns", "setns", "seccomp", ... */
	/* testing: kernel features to treat as missing after the start's probe
	 * (agent/isolate/features.h names them; an unknown name stops the
	 * start), e.g. "so_peerpidfd" to identify callers by the SO_PEERCRED
	 * fallback on a kernel that has SO_PEERPIDFD */
	char mask_features[BK_MAX_MASKED][32];
	int n_mask_features;
	/* testing: how often the agent looks for pods that are gone, to drop
	 * their policy overrides (agent/session/livepolicy.c; default 60 s) */
	uint64_t policy_sweep_s;
	struct bk_policy_set policy; /* egress profiles */
	/* probe targets of verify and the self-test: metadata, kubernetes_api,
	 * pod, public ("addr:port", "[v6]:port") */
	char targets[4][64];
	uint32_t selftest_interval; /* seconds; 0 = at start only */
};

extern const char *const bk_target_names[4];

void bk_config_defaults(struct bk_config *c);
/* Whether testing.mask_features names feature. */
bool bk_config_masks(const struct bk_config *c, const char *feature);
/* Merge a JSON config text into c. err gets a sentence on failure. */
int bk_config_parse(struct bk_config *c, const char *json, size_t len, char *err, size_t errlen);
int bk_config_load(struct bk_config *c, const char *path, char *err, size_t errlen);
