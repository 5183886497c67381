/* SPDX-License-Identifier: Apache-2.0 */
/* What the running kernel offers, probed once at agent start — by trying
 * each facility (libbpf's probes and real loads, syscalls on throw-away
 * objects), never by its version number. A required facility that is
 * missing ends the start with one line naming it; an optional one degrades
 * what it serves (the event, the fallback path), never the enforcement,
 * and is logged. The set is reported in `boxkitectl status` and in every
 * exec receipt (isolation.kernel, isolation.features); docs/install.md has
 * the table of minimum kernels and fallbacks.
 *
 * testing.mask_features (with testing.allow_unsafe) names features to
 * treat as missing after the probe: the tests' way to run a fallback, or
 * the refusal, on a kernel that has the feature. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "agent/parse/config.h"

enum bk_feature {
	BK_F_BPF_PROGS,       /* cgroup_skb, cgroup_sock, cgroup_sock_addr + every helper our programs need */
	BK_F_BPF_LINK,        /* BPF_LINK_CREATE on a cgroup, for each of our attach types */
	BK_F_BPF_RINGBUF,     /* BPF_MAP_TYPE_RINGBUF */
	BK_F_BPF_TASK_INFO,   /* pid/comm helpers in the socket hooks (optional: events degrade) */
	BK_F_CLONE_INTO_CGROUP,
	BK_F_CGROUP_KILL,
	BK_F_SO_PEERPIDFD,
	BK_F_UNIX_DIAG,       /* sock_diag of unix sockets: the SO_PEERCRED fallback's re-check */
	BK_F_PIDFD_OPEN,
	BK_F_OPENAT2,
	BK_F_LANDLOCK,
	BK_F_SECCOMP,
	BK_F_N
};

/* When a feature is required. */
enum bk_need {
	BK_NEED_ALWAYS,
	BK_NEED_BPF,          /* with the BPF layer on */
	BK_NEED_SECCOMP,      /* with the seccomp layer on */
	BK_NEED_FALLBACK,     /* when callers are identified without SO_PEERPIDFD */
	BK_NEED_OPTIONAL,
};

struct bk_feature_desc {
	const char *name;     /* the key in "features" and in testing.mask_features */
	enum bk_need need;
	const char *what;     /* the facility, with the kernel that brought it */
	const char *without;  /* optional: what changes without it */
};

extern const struct bk_feature_desc bk_feature_desc[BK_F_N];

struct bk_features {
	char kernel[65];      /* uname release */
	bool have[BK_F_N];    /* after testing.mask_features */
	bool masked[BK_F_N];
	int landlock_abi;     /* 0: none */
	bool peerpidfd;       /* callers are identified by SO_PEERPIDFD (else SO_PEERCRED + pidfd_open) */
	char detail[BK_F_N][160]; /* why a feature is missing (the probe's own words) */
};

/* The identification path in use, for reports: "so_peerpidfd" or "so_peercred". */
const char *bk_features_identity(const struct bk_features *f);

/* Probe the kernel. probe_cg: a cgroup v2 directory to create, attach
 * trivial programs to and remove again. Returns 0, or -errno with one
 * sentence in err when a feature the configuration needs is missing
 * (or testing.mask_features names an unknown feature). Logs the set, and
 * each optional feature that is missing with what changes. */
int bk_features_probe(struct bk_features *f, const struct bk_config *cfg, const char *probe_cg, char *err,
		      size_t errlen);
