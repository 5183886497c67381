/* SPDX-License-Identifier: Apache-2.0 */
/* Lines of /proc/PID/mountinfo (mounts.h). The format (proc(5)):
 *   ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
 * with space, tab, newline and backslash escaped as \ooo. */
#include "agent/parse/mounts.h"

#include <errno.h>
#include <string.h>

/* The field at *p (up to a space or the line's end), decoded into out. */
static bool field(const char **p, const char *end, char *out, size_t cap)
{
	const char *s = *p;
	size_t n = 0;
	while (s < end && *s == ' ')
		s++;
	if (s >= end)
		return false;
	while (s < end && *s != ' ') {
		char c = *s++;
		if (c == '\\' && end - s >= 3 && s[0] >= '0' && s[0] <= '3' && s[1] >= '0' && s[1] <= '7' &&
		    s[2] >= '0' && s[2] <= '7') {
			c = (char)((s[0] - '0') * 64 + (s[1] - '0') * 8 + (s[2] - '0'));
			s += 3;
		}
		if (c == '\0' || n + 1 >= cap)
			return false;
		out[n++] = c;
	}
	out[n] = '\0';
	*p = s;
	return true;
}

int bk_mountinfo_next(const char *text, size_t *pos, struct bk_mount_line *m)
{
	const char *line = text + *pos;
	if (!*line)
		return 0;
	const char *nl = strchr(line, '\n');
	const char *end = nl ? nl : line + strlen(line);
	*pos = (size_t)(end - text) + (nl ? 1 : 0);
	memset(m, 0, sizeof(*m));
	const char *p = line;
	char skip[4096], opts[4096];
	/* ID PARENT MAJ:MIN ROOT */
	for (int i = 0; i < 4; i++)
		if (!field(&p, end, skip, sizeof(skip)))
			return -EINVAL;
	if (!field(&p, end, m->point, sizeof(m->point)) || m->point[0] != '/' ||
	    !field(&p, end, opts, sizeof(opts)))
		return -EINVAL;
	/* optional fields up to "-" */
	for (;;) {
		if (!field(&p, end, skip, sizeof(skip)))
			return -EINVAL;
		if (strcmp(skip, "-") == 0)
			break;
	}
	if (!field(&p, end, m->fstype, sizeof(m->fstype)))
		return -EINVAL;
	m->ro = strncmp(opts, "ro", 2) == 0 && (opts[2] == ',' || opts[2] == '\0');
	for (const char *o = strstr(opts, ",ro"); o && !m->ro; o = strstr(o + 1, ",ro"))
		m->ro = o[3] == ',' || o[3] == '\0';
	return 1;
}
