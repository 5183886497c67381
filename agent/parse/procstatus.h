/* SPDX-License-Identifier: Apache-2.0 */
/* The fields of /proc/PID/status an exec receipt reports: the process's
 * credentials, capability sets, no_new_privs and seccomp state, as the
 * kernel printed them. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BK_STATUS_GROUPS_MAX 32

struct bk_proc_status {
	int64_t uid[4], gid[4];  /* real, effective, saved, filesystem */
	int n_groups;            /* supplementary groups (at most BK_STATUS_GROUPS_MAX kept) */
	int64_t groups[BK_STATUS_GROUPS_MAX];
	uint64_t cap_inh, cap_prm, cap_eff, cap_bnd, cap_amb;
	int no_new_privs;        /* NoNewPrivs */
	int seccomp;             /* Seccomp: 0 off, 1 strict, 2 filter */
	int seccomp_filters;     /* Seccomp_filters */
	uint64_t sig_ign, sig_cgt; /* SigIgn, SigCgt (BK_PS_SIGNALS: both seen) */
	unsigned seen;           /* BK_PS_* of the fields found */
};

#define BK_PS_UID (1u << 0)
#define BK_PS_GID (1u << 1)
#define BK_PS_GROUPS (1u << 2)
#define BK_PS_CAPS (1u << 3) /* all five sets */
#define BK_PS_NNP (1u << 4)
#define BK_PS_SECCOMP (1u << 5) /* Seccomp and Seccomp_filters */
#define BK_PS_SIGNALS (1u << 6) /* SigIgn and SigCgt (not in BK_PS_ALL) */
#define BK_PS_ALL 0x3fu

/* Parse the text of a status file (len bytes, need not end in NUL) into s.
 * Returns 0 when every field above was found, else -ENOENT (s->seen says
 * which were); a field present but malformed is -EINVAL. Async-signal-safe
 * (no allocation, no locale). */
int bk_proc_status_parse(const char *text, size_t len, struct bk_proc_status *s);
