/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the /proc/PID/cgroup parsers (agent/identity.c): the input, made a
 * C string, is parsed as a whole /proc/PID/cgroup text and as one cgroup
 * path, and the v1/v2 path getters run on it with a buffer whose size the
 * first byte chooses. Results are checked against invariants and against a
 * line splitter written here, independent of the code under test. */
#include "fuzz.h"
#include "agent/caller/identity.h"

#include <errno.h>

/* Copy of s with runs of '/' collapsed to one: cgroup paths from the
 * kernel never have them, and the parser treats "a//b" as "a/b". */
static char *collapse_slashes(const char *s)
{
	char *o = malloc(strlen(s) + 1), *q = o;
	for (const char *p = s; *p; p++)
		if (!(*p == '/' && q > o && q[-1] == '/'))
			*q++ = *p;
	*q = '\0';
	return o;
}

static void check_ref(const struct bk_pod_ref *r, const char *what)
{
	CHECK(r->layout == BK_LAYOUT_CGROUPFS || r->layout == BK_LAYOUT_SYSTEMD, "%s: layout %d", what, r->layout);
	CHECK(fuzz_terminated(r->pod_uid, sizeof(r->pod_uid)) && fuzz_uid_canonical(r->pod_uid),
	      "%s: pod_uid \"%.*s\" not canonical", what, (int)sizeof(r->pod_uid), r->pod_uid);
	CHECK(fuzz_terminated(r->container_id, sizeof(r->container_id)) && fuzz_id_ok(r->container_id) &&
		      bk_container_id_valid(r->container_id),
	      "%s: bad container id \"%.*s\"", what, (int)sizeof(r->container_id), r->container_id);
	CHECK(strcmp(r->container_id, ".") && strcmp(r->container_id, ".."), "%s: id is a dot path", what);
	CHECK(fuzz_terminated(r->qos, sizeof(r->qos)) &&
		      (!strcmp(r->qos, "") || !strcmp(r->qos, "besteffort") || !strcmp(r->qos, "burstable")),
	      "%s: qos \"%.*s\"", what, (int)sizeof(r->qos), r->qos);
	CHECK(fuzz_terminated(r->pod_path, sizeof(r->pod_path)) && r->pod_path[0], "%s: empty pod_path", what);
}

/* bk_cgroup_path_parse on one path, with the checks that need the path. */
static int parse_path(const char *path, struct bk_pod_ref *r)
{
	int e = bk_cgroup_path_parse(path, r);
	CHECK(e == 0 || e == -ENOENT || e == -EINVAL, "bk_cgroup_path_parse returned %d", e);
	if (e < 0) {
		static const struct bk_pod_ref zero;
		CHECK(memcmp(r, &zero, sizeof(zero)) == 0, "failed parse (%d) left data in the result", e);
		return e;
	}
	check_ref(r, "path");
	/* pod_path is the input up to the pod level (slashes collapsed), and
	 * exactly one component, the container, follows it */
	char *norm = collapse_slashes(path);
	size_t pl = strlen(r->pod_path);
	CHECK(strncmp(norm, r->pod_path, pl) == 0 && norm[pl] == '/',
	      "pod_path \"%s\" is not a component prefix of \"%s\"", r->pod_path, norm);
	const char *rest = norm + pl + 1;
	size_t rl = strcspn(rest, "/");
	CHECK(rest[rl] == '\0' || (rest[rl] == '/' && rest[rl + 1] == '\0'),
	      "more than one component below the pod: \"%s\"", rest);
	CHECK(rl >= strlen(r->container_id) && memmem(rest, rl, r->container_id, strlen(r->container_id)),
	      "container id \"%s\" not in the last component \"%s\"", r->container_id, rest);
	if (r->layout == BK_LAYOUT_CGROUPFS)
		CHECK(rl == strlen(r->container_id), "cgroupfs: last component \"%s\" is not the id \"%s\"", rest,
		      r->container_id);
	/* the pod level names the same pod (each separator '-' or '_') */
	const char *podc = strrchr(r->pod_path, '/');
	podc = podc ? podc + 1 : r->pod_path;
	bool named = false;
	for (const char *w = podc; strlen(w) >= BK_UID_LEN && !named; w++) {
		named = true;
		for (size_t i = 0; i < BK_UID_LEN && named; i++) {
			char a = w[i], b = r->pod_uid[i];
			if (b == '-')
				named = a == '-' || a == '_';
			else
				named = a == b || (a >= 'A' && a <= 'F' && a - 'A' + 'a' == b);
		}
	}
	CHECK(named, "pod level \"%s\" does not name pod %s", podc, r->pod_uid);
	/* the kubepods root sits right above the qos/pod levels */
	CHECK(strstr(r->pod_path, "kubepods"), "pod_path \"%s\" without kubepods", r->pod_path);
	free(norm);
	return 0;
}

/* Independent line splitter: the path of line i ("N:ctrls:path"), or NULL
 * past the end. Returns -1 for a line the kernel would never write (the
 * parser must then refuse the text). */
struct line {
	char ctrls[4200];
	char path[4200];
};

static int nth_line(const char *text, int want, struct line *out)
{
	const char *p = text;
	int i = 0;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);
		if (ll) {
			if (ll >= 4200)
				return -1;
			const char *c1 = memchr(p, ':', ll);
			const char *c2 = c1 ? memchr(c1 + 1, ':', ll - (size_t)(c1 + 1 - p)) : NULL;
			if (!c1 || !c2 || c1 == p)
				return -1;
			/* the hierarchy ID: a decimal number that fits 64 bits */
			unsigned __int128 v = 0;
			for (const char *d = p; d < c1; d++) {
				if (*d < '0' || *d > '9')
					return -1;
				v = v * 10 + (unsigned)(*d - '0');
				if (v > UINT64_MAX)
					return -1;
			}
			if (i == want) {
				memcpy(out->ctrls, c1 + 1, (size_t)(c2 - c1 - 1));
				out->ctrls[c2 - c1 - 1] = '\0';
				memcpy(out->path, c2 + 1, ll - (size_t)(c2 + 1 - p));
				out->path[ll - (size_t)(c2 + 1 - p)] = '\0';
				return 1;
			}
			i++;
		}
		p += ll + (nl ? 1 : 0);
	}
	return 0;
}

static bool ctrl_has(const char *ctrls, const char *want)
{
	char tmp[4200];
	strcpy(tmp, ctrls);
	char *save = NULL;
	/* strtok drops empty items, which never equal a non-empty want */
	for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (!strcmp(t, want))
			return true;
	return false;
}

static bool text_well_formed(const char *text, int *nlines)
{
	struct line l;
	int i = 0, e;
	while ((e = nth_line(text, i, &l)) == 1)
		i++;
	*nlines = i;
	return e == 0;
}

/* The first line matching ctrl ("" = the v2 line), -ENOENT, or -EINVAL
 * for a malformed line before the first match (the getters stop there). */
static int model_find(const char *text, const char *ctrl, struct line *out)
{
	int e;
	for (int i = 0; (e = nth_line(text, i, out)) == 1; i++)
		if (ctrl[0] ? ctrl_has(out->ctrls, ctrl) : out->ctrls[0] == '\0')
			return 0;
	return e < 0 ? -EINVAL : -ENOENT;
}

static bool ref_eq(const struct bk_pod_ref *a, const struct bk_pod_ref *b)
{
	return a->layout == b->layout && !strcmp(a->pod_uid, b->pod_uid) && !strcmp(a->container_id, b->container_id) &&
	       !strcmp(a->qos, b->qos) && !strcmp(a->pod_path, b->pod_path);
}

static void check_getter(const char *text, const char *ctrl, size_t cap)
{
	char *buf = malloc(cap); /* exactly cap bytes: ASan sees overflows */
	int e = ctrl[0] ? bk_proc_cgroup_v1_path(text, ctrl, buf, cap) : bk_proc_cgroup_v2_path(text, buf, cap);
	CHECK(e == 0 || e == -ENOENT || e == -EINVAL || e == -ENAMETOOLONG, "getter(%s) returned %d", ctrl, e);
	static struct line l;
	int m = model_find(text, ctrl, &l);
	if (e == 0) {
		CHECK(m == 0, "getter(%s) found a path the model does not", ctrl);
		CHECK(fuzz_terminated(buf, cap) && !strcmp(buf, l.path), "getter(%s) gave \"%.*s\", model \"%s\"", ctrl,
		      (int)cap, buf, l.path);
	} else if (e == -ENOENT) {
		CHECK(m == -ENOENT, "getter(%s) gave ENOENT, the model %d", ctrl, m);
	} else if (e == -ENAMETOOLONG) {
		CHECK(m == 0 && strlen(l.path) >= cap, "getter(%s): ENAMETOOLONG for \"%s\" in %zu", ctrl, l.path, cap);
	} else {
		CHECK(m == -EINVAL, "getter(%s): EINVAL, the model %d", ctrl, m);
	}
	free(buf);
}

static void check_proc(const char *text, bool well_formed, int nlines)
{
	struct bk_pod_ref r;
	int e = bk_proc_cgroup_parse(text, &r);
	CHECK(e == 0 || e == -ENOENT || e == -EINVAL || e == -ENAMETOOLONG, "bk_proc_cgroup_parse returned %d", e);
	if (e < 0)
		return;
	CHECK(well_formed, "accepted a malformed /proc/PID/cgroup text");
	check_ref(&r, "proc");
	/* every line that names a pod container agrees with the result, none
	 * names a malformed pod path, and at least one line gave it */
	static struct line l;
	bool seen = false;
	for (int i = 0; i < nlines; i++) {
		CHECK(nth_line(text, i, &l) == 1, "line %d vanished", i);
		struct bk_pod_ref lr;
		int le = parse_path(l.path, &lr);
		CHECK(le != -EINVAL, "accepted a text whose line %d has a malformed pod path \"%s\"", i, l.path);
		if (le == 0) {
			CHECK(!strcmp(lr.pod_uid, r.pod_uid) && !strcmp(lr.container_id, r.container_id),
			      "line %d names %s/%s, the result %s/%s", i, lr.pod_uid, lr.container_id, r.pod_uid,
			      r.container_id);
			if (ref_eq(&lr, &r))
				seen = true;
		}
	}
	CHECK(seen, "the result is no line's parse");
	/* the v2 line wins when it names the container */
	if (model_find(text, "", &l) == 0) {
		struct bk_pod_ref v2;
		if (bk_cgroup_path_parse(l.path, &v2) == 0)
			CHECK(ref_eq(&v2, &r), "the result is not the v2 line's parse");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 64 * 1024)
		return 0;
	char *text = fuzz_strdup(data, size);
	struct bk_pod_ref r;
	parse_path(text, &r);
	int nlines = 0;
	bool wf = text_well_formed(text, &nlines);
	check_proc(text, wf, nlines);
	size_t cap = size ? 1 + (size_t)data[0] * 17 : 1; /* 1 .. 4336 */
	check_getter(text, "", cap);
	check_getter(text, "", 4096);
	check_getter(text, "pids", cap);
	check_getter(text, "memory", 4096);
	check_getter(text, "name=systemd", cap);
	free(text);
	return 0;
}
