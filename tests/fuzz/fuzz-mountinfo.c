/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz bk_mountinfo_parse (agent/isolate/cgroup.c) on /proc/self/mountinfo text.
 * The result must name mount points that occur in the text, fit their
 * buffers, and success must mean a cgroup2 mount was found. */
#include "fuzz.h"
#include "agent/isolate/cgroup.h"

#include <errno.h>

static void check_mp(const char *text, const char *mp, size_t cap, const char *what)
{
	CHECK(fuzz_terminated(mp, cap), "%s not NUL-terminated", what);
	if (!mp[0])
		return;
	CHECK(!strchr(mp, ' ') && !strchr(mp, '\n'), "%s \"%s\" holds a separator", what, mp);
	/* " <mp> " appears in the text: it is the fifth field of a line */
	size_t l = strlen(mp);
	char *pat = malloc(l + 3);
	pat[0] = ' ';
	memcpy(pat + 1, mp, l);
	pat[l + 1] = ' ';
	pat[l + 2] = '\0';
	CHECK(strstr(text, pat), "%s \"%s\" is not a field of the text", what, mp);
	free(pat);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 256 * 1024)
		return 0;
	char *text = fuzz_strdup(data, size);
	struct bk_cgroup_mounts m;
	memset(&m, 0xa5, sizeof(m));
	int e = bk_mountinfo_parse(text, &m);
	CHECK(e == 0 || e == -ENOENT, "bk_mountinfo_parse returned %d", e);
	CHECK((e == 0) == (m.v2[0] != '\0'), "returned %d with v2 \"%.*s\"", e, (int)sizeof(m.v2), m.v2);
	check_mp(text, m.v2, sizeof(m.v2), "v2");
	check_mp(text, m.pids, sizeof(m.pids), "pids");
	check_mp(text, m.memory, sizeof(m.memory), "memory");
	CHECK(m.n_v1 >= 0 && m.n_v1 <= BK_CG_V1_MAX, "n_v1 %d", m.n_v1);
	for (int i = 0; i < m.n_v1 && i < BK_CG_V1_MAX; i++) {
		check_mp(text, m.v1[i].mount, sizeof(m.v1[i].mount), "v1 mount");
		CHECK(m.v1[i].mount[0], "an empty v1 mount point");
		CHECK(fuzz_terminated(m.v1[i].opts, sizeof(m.v1[i].opts)), "v1 options not NUL-terminated");
	}
	CHECK(!m.v2_pids && !m.v2_memory, "the text parser set controller flags");
	if (m.v2[0])
		CHECK(strstr(text, "cgroup2"), "a cgroup2 mount point without a cgroup2 line");
	if (m.pids[0] || m.memory[0])
		CHECK(strstr(text, "cgroup"), "a v1 mount point without a cgroup line");
	free(text);
	return 0;
}
