/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/parse/netdev.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* The header the kernel prints (net/core/net-procfs.c, dev_seq_show). */
static const char head1[] = "Inter-|";
static const char head2[] = " face |";

static bool line_starts(const char *l, const char *e, const char *s)
{
	size_t n = strlen(s);
	return (size_t)(e - l) >= n && memcmp(l, s, n) == 0;
}

int bk_netdev_parse(const char *text, size_t len, char names[][IFNAMSIZ], int max)
{
	const char *p = text, *end = text + len;
	int count = 0, line = 0;
	for (; p < end; line++) {
		const char *e = memchr(p, '\n', (size_t)(end - p));
		if (!e)
			return -EINVAL; /* the kernel ends every line */
		if (line == 0 || line == 1) {
			if (!line_starts(p, e, line == 0 ? head1 : head2))
				return -EINVAL;
			p = e + 1;
			continue;
		}
		while (p < e && *p == ' ')
			p++;
		const char *c = memchr(p, ':', (size_t)(e - p));
		if (!c || c == p || c - p >= IFNAMSIZ)
			return -EINVAL;
		for (const char *q = p; q < c; q++)
			if (*q == ' ' || *q == '\t' || *q == '/' || *q == '\0')
				return -EINVAL; /* no interface name holds one */
		if (count < max) {
			memcpy(names[count], p, (size_t)(c - p));
			names[count][c - p] = '\0';
		}
		count++;
		p = e + 1;
	}
	return line < 2 ? -EINVAL : count; /* both header lines, at least */
}
