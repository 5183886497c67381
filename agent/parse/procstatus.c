/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/parse/procstatus.h"

#include <errno.h>
#include <string.h>

/* The value part of line [l, e) if it is "KEY:\t...", else NULL. */
static const char *value_of(const char *l, const char *e, const char *key)
{
	size_t kl = strlen(key);
	if ((size_t)(e - l) <= kl || memcmp(l, key, kl) != 0 || l[kl] != ':')
		return NULL;
	const char *v = l + kl + 1;
	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	return v;
}

/* Decimal numbers separated by blanks, up to max of them: how many, or -1. */
static int decimals(const char *v, const char *e, int64_t *out, int max, int *total)
{
	int n = 0;
	*total = 0;
	while (v < e) {
		while (v < e && (*v == ' ' || *v == '\t'))
			v++;
		if (v >= e)
			break;
		if (*v < '0' || *v > '9')
			return -1;
		int64_t x = 0;
		while (v < e && *v >= '0' && *v <= '9') {
			if (x > (INT64_MAX - 9) / 10)
				return -1;
			x = x * 10 + (*v++ - '0');
		}
		if (v < e && *v != ' ' && *v != '\t')
			return -1;
		if (n < max)
			out[n++] = x;
		(*total)++;
	}
	return n;
}

static int hex64(const char *v, const char *e, uint64_t *out)
{
	uint64_t x = 0;
	int d = 0;
	for (; v < e && *v != ' ' && *v != '\t'; v++, d++) {
		int h = *v >= '0' && *v <= '9' ? *v - '0' : *v >= 'a' && *v <= 'f' ? *v - 'a' + 10 : -1;
		if (h < 0 || d >= 16)
			return -1;
		x = x << 4 | (uint64_t)h;
	}
	if (d == 0)
		return -1;
	*out = x;
	return 0;
}

static int one_int(const char *v, const char *e, int *out)
{
	int64_t x[1];
	int total;
	if (decimals(v, e, x, 1, &total) != 1 || total != 1 || x[0] > 1000000)
		return -1;
	*out = (int)x[0];
	return 0;
}

int bk_proc_status_parse(const char *text, size_t len, struct bk_proc_status *s)
{
	memset(s, 0, sizeof(*s));
	unsigned hexseen = 0, sc = 0;
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *e = memchr(p, '\n', (size_t)(end - p));
		if (!e)
			e = end;
		const char *v;
		int total, bad = 0;
		/* the hexadecimal fields: bits 0-4 the capability sets, 5-6 the signals */
		struct { const char *key; uint64_t *dst; } hexf[] = {
			{ "CapInh", &s->cap_inh }, { "CapPrm", &s->cap_prm }, { "CapEff", &s->cap_eff },
			{ "CapBnd", &s->cap_bnd }, { "CapAmb", &s->cap_amb },
			{ "SigIgn", &s->sig_ign }, { "SigCgt", &s->sig_cgt },
		};
		if ((v = value_of(p, e, "Uid"))) {
			bad = decimals(v, e, s->uid, 4, &total) != 4 || total != 4;
			s->seen |= BK_PS_UID;
		} else if ((v = value_of(p, e, "Gid"))) {
			bad = decimals(v, e, s->gid, 4, &total) != 4 || total != 4;
			s->seen |= BK_PS_GID;
		} else if ((v = value_of(p, e, "Groups"))) {
			int n = decimals(v, e, s->groups, BK_STATUS_GROUPS_MAX, &total);
			bad = n < 0;
			s->n_groups = total;
			s->seen |= BK_PS_GROUPS;
		} else if ((v = value_of(p, e, "NoNewPrivs"))) {
			bad = one_int(v, e, &s->no_new_privs) < 0;
			s->seen |= BK_PS_NNP;
		} else if ((v = value_of(p, e, "Seccomp_filters"))) {
			bad = one_int(v, e, &s->seccomp_filters) < 0;
			sc |= 2;
		} else if ((v = value_of(p, e, "Seccomp"))) {
			bad = one_int(v, e, &s->seccomp) < 0;
			sc |= 1;
		} else {
			for (size_t i = 0; i < sizeof(hexf) / sizeof(hexf[0]); i++)
				if ((v = value_of(p, e, hexf[i].key))) {
					bad = hex64(v, e, hexf[i].dst) < 0;
					hexseen |= 1u << i;
					break;
				}
		}
		if (bad)
			return -EINVAL;
		p = e + 1;
	}
	if ((hexseen & 0x1f) == 0x1f)
		s->seen |= BK_PS_CAPS;
	if (sc == 3)
		s->seen |= BK_PS_SECCOMP;
	if ((hexseen & 0x60) == 0x60)
		s->seen |= BK_PS_SIGNALS;
	return (s->seen & BK_PS_ALL) == BK_PS_ALL ? 0 : -ENOENT;
}
