/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/parse/vpath.h"
#include "lib/util.h"

#include <fnmatch.h>

const struct bk_vroot_info bk_vroots[BK_VROOT_N] = {
	[BK_VROOT_WORKSPACE] = { "/workspace", true },
	[BK_VROOT_OUTPUTS] = { "/mnt/user-data/outputs", true },
	[BK_VROOT_UPLOADS] = { "/mnt/user-data/uploads", false },
	[BK_VROOT_SKILLS] = { "/mnt/skills", false },
	[BK_VROOT_TMP] = { "/tmp", true },
	[BK_VROOT_MNT] = { "/mnt", false },
};

/* The roots as component lists (no overlap between roots: none is a prefix
 * of another, so the first full match decides). */
static const char *const root_comps[BK_VROOT_N][4] = {
	[BK_VROOT_WORKSPACE] = { "workspace", NULL },
	[BK_VROOT_OUTPUTS] = { "mnt", "user-data", "outputs", NULL },
	[BK_VROOT_UPLOADS] = { "mnt", "user-data", "uploads", NULL },
	[BK_VROOT_SKILLS] = { "mnt", "skills", NULL },
	[BK_VROOT_TMP] = { "tmp", NULL },
	[BK_VROOT_MNT] = { "mnt", NULL },
};

struct comp {
	const char *p;
	size_t n;
};

static bool comp_is(const struct comp *c, const char *s) { return c->n == strlen(s) && memcmp(c->p, s, c->n) == 0; }

/* Which roots still agree with the first depth components of the stack. */
static int match_roots(const struct comp *stack, size_t depth, unsigned allowed, bool alive[BK_VROOT_N])
{
	int full = -1;
	for (int r = 0; r < BK_VROOT_N; r++) {
		alive[r] = allowed & (1u << r);
		if (!alive[r])
			continue;
		size_t k = 0;
		for (; k < depth; k++)
			if (!root_comps[r][k] || !comp_is(&stack[k], root_comps[r][k])) {
				alive[r] = false;
				break;
			}
		if (alive[r] && !root_comps[r][depth])
			full = r;
	}
	return full;
}

/* A request path after the reference's mapping: at most this long. */
#define NORM_MAX (BK_VPATH_MAX + 32)

/* The component parse of a normalised absolute path against the roots in
 * allowed (a bit per enum bk_vroot). */
static int parse_abs(const char *in, size_t len, unsigned allowed, struct bk_vpath *out)
{
	memset(out, 0, sizeof(*out));
	/* at most one component per two bytes */
	struct comp stack[NORM_MAX / 2 + 2];
	size_t depth = 0;
	int root = -1;
	size_t root_depth = 0;
	size_t i = 0;
	while (i < len) {
		while (i < len && in[i] == '/')
			i++;
		if (i == len)
			break;
		size_t s = i;
		while (i < len && in[i] != '/')
			i++;
		struct comp c = { in + s, i - s };
		if (c.n > BK_NAME_MAX)
			return -ENAMETOOLONG;
		if (comp_is(&c, "."))
			continue;
		if (comp_is(&c, "..")) {
			/* never above the root, not even on the way back in */
			if (root < 0 || depth <= root_depth)
				return -EPERM;
			depth--;
			continue;
		}
		stack[depth++] = c;
		if (root < 0) {
			bool alive[BK_VROOT_N];
			int full = match_roots(stack, depth, allowed, alive);
			if (full >= 0) {
				root = full;
				root_depth = depth;
			} else {
				bool any = false;
				for (int r = 0; r < BK_VROOT_N; r++)
					any |= alive[r];
				if (!any)
					return -EPERM;
			}
		}
	}
	if (root < 0)
		return -EPERM;
	out->root = (enum bk_vroot)root;
	out->writable = bk_vroots[root].writable;
	out->trailing_slash = in[len - 1] == '/' || (len >= 2 && in[len - 1] == '.' && in[len - 2] == '/');
	size_t o = 0;
	for (size_t k = root_depth; k < depth; k++) {
		if (o + stack[k].n + 2 > sizeof(out->rel))
			return -ENAMETOOLONG;
		if (o)
			out->rel[o++] = '/';
		memcpy(out->rel + o, stack[k].p, stack[k].n);
		o += stack[k].n;
	}
	if (o == 0)
		out->rel[o++] = '.';
	out->rel[o] = '\0';
	int w;
	if (bk_vpath_is_root(out))
		w = snprintf(out->abs, sizeof(out->abs), "%s", bk_vroots[root].path);
	else
		w = snprintf(out->abs, sizeof(out->abs), "%s/%s", bk_vroots[root].path, out->rel);
	if (w < 0 || (size_t)w >= sizeof(out->abs))
		return -ENAMETOOLONG;
	return 0;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* "/uploads", "/uploads/x" (alias of root r): the suffix after it ("" or
 * "x..."), or NULL. */
static const char *alias(const char *s, size_t n, const char *name, size_t *sfx)
{
	size_t l = strlen(name);
	if (n < l || memcmp(s, name, l) != 0 || (n > l && s[l] != '/'))
		return NULL;
	const char *p = s + l;
	while (p < s + n && *p == '/')
		p++;
	*sfx = n - (size_t)(p - s);
	return p;
}

/* The reference's mapping of a request path (sidecar_paths.py
 * _normalize_input_path) into out: surrounding white space dropped, '\\'
 * read as '/', "/" and the relative "", ".", "workspace" are /workspace,
 * other relative paths are below /workspace (one leading "workspace/" and
 * any "./" dropped), /uploads, /outputs, /skills are aliases of their
 * /mnt roots. */
static int normalize(const char *in, size_t len, char out[NORM_MAX + 1], size_t *outlen)
{
	if (!in)
		return -EINVAL;
	if (len > BK_VPATH_MAX)
		return -ENAMETOOLONG;
	if (memchr(in, '\0', len))
		return -EILSEQ;
	while (len && is_space(in[0]))
		in++, len--;
	while (len && is_space(in[len - 1]))
		len--;
	if (len == 0)
		return -EINVAL;
	char raw[BK_VPATH_MAX + 1];
	for (size_t i = 0; i < len; i++)
		raw[i] = in[i] == '\\' ? '/' : in[i];
	raw[len] = '\0';
	const char *pre = "", *sep = "", *rest = raw;
	size_t rl = len;
	if (streq(raw, "/")) {
		pre = "/workspace", rl = 0;
	} else if (raw[0] != '/') {
		pre = "/workspace/";
		if (streq(raw, "workspace") || streq(raw, ".")) {
			rl = 0;
		} else {
			if (strncmp(rest, "workspace/", 10) == 0)
				rest += 10, rl -= 10;
			while (strncmp(rest, "./", 2) == 0)
				rest += 2, rl -= 2;
		}
	} else {
		static const char *const al[][2] = { { "/uploads", "/mnt/user-data/uploads" },
						      { "/outputs", "/mnt/user-data/outputs" },
						      { "/skills", "/mnt/skills" } };
		for (size_t k = 0; k < ARRAY_SIZE(al); k++) {
			size_t sl;
			const char *sfx = alias(raw, len, al[k][0], &sl);
			if (sfx) {
				pre = al[k][1];
				sep = sl ? "/" : "";
				rest = sfx;
				rl = sl;
				break;
			}
		}
	}
	int w = snprintf(out, NORM_MAX + 1, "%s%s%.*s", pre, sep, (int)rl, rest);
	if (w < 0 || w > NORM_MAX)
		return -ENAMETOOLONG;
	*outlen = (size_t)w;
	return 0;
}

#define TYPED_ROOTS ((1u << BK_VROOT_WORKSPACE) | (1u << BK_VROOT_OUTPUTS) | (1u << BK_VROOT_UPLOADS) | \
		     (1u << BK_VROOT_SKILLS) | (1u << BK_VROOT_TMP))

/* The /mnt hierarchy, for what no typed root took: "/mnt/x/../skills"
 * still lands in the skills root (its own mount, which a walk from /mnt
 * would not cross). */
static int parse_mnt(const char *in, size_t len, struct bk_vpath *out)
{
	int r = parse_abs(in, len, 1u << BK_VROOT_MNT, out);
	if (r < 0)
		return r;
	struct bk_vpath t;
	if (parse_abs(out->abs, strlen(out->abs), TYPED_ROOTS, &t) == 0) {
		t.trailing_slash = out->trailing_slash;
		*out = t;
	}
	return 0;
}

int bk_vpath_parse(const char *in, size_t len, struct bk_vpath *out)
{
	char buf[NORM_MAX + 1];
	size_t n;
	memset(out, 0, sizeof(*out));
	int r = normalize(in, len, buf, &n);
	return r < 0 ? r : parse_abs(buf, n, TYPED_ROOTS, out);
}

int bk_vpath_parse_abs(const char *in, size_t len, bool mnt, struct bk_vpath *out)
{
	memset(out, 0, sizeof(*out));
	if (!in || len == 0)
		return -EINVAL;
	if (len > BK_VPATH_MAX)
		return -ENAMETOOLONG;
	if (memchr(in, '\0', len))
		return -EILSEQ;
	if (in[0] != '/')
		return -EPERM;
	int r = parse_abs(in, len, TYPED_ROOTS, out);
	if (r == -EPERM && mnt)
		r = parse_mnt(in, len, out);
	return r;
}

int bk_vpath_parse_ls(const char *in, size_t len, struct bk_vpath *out)
{
	char buf[NORM_MAX + 1];
	size_t n;
	memset(out, 0, sizeof(*out));
	int r = normalize(in, len, buf, &n);
	if (r < 0)
		return r;
	r = parse_abs(buf, n, TYPED_ROOTS, out);
	if (r == -EPERM) /* not in a typed root: the /mnt hierarchy itself */
		r = parse_mnt(buf, n, out);
	return r;
}


int bk_vpath_split(const char *rel, char *dir, size_t dirlen, const char **base)
{
	const char *slash = strrchr(rel, '/');
	if (!slash) {
		if (dirlen < 2)
			return -ENAMETOOLONG;
		strcpy(dir, ".");
		*base = rel;
		return 0;
	}
	size_t n = (size_t)(slash - rel);
	if (n + 1 > dirlen)
		return -ENAMETOOLONG;
	memcpy(dir, rel, n);
	dir[n] = '\0';
	*base = slash + 1;
	return 0;
}

int bk_vpath_join(const char *dir, const char *suffix, char *out, size_t outlen)
{
	int w;
	if (!suffix[0] || streq(suffix, "."))
		w = snprintf(out, outlen, "%s", dir);
	else
		w = snprintf(out, outlen, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", suffix);
	return w < 0 || (size_t)w >= outlen ? -ENAMETOOLONG : 0;
}

/* ---- glob ------------------------------------------------------------------ */

static bool has_magic(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '*' || s[i] == '?' || s[i] == '[' || s[i] == '\\')
			return true;
	return false;
}

/* Split s into at most max segments (copies into buf, NUL-separated),
 * dropping empty and "." segments. Returns the count or -1. */
static int split_segs(const char *s, char *buf, size_t buflen, const char **segs, int max)
{
	size_t l = strlen(s);
	if (l + 1 > buflen)
		return -1;
	memcpy(buf, s, l + 1);
	int n = 0;
	for (char *save = NULL, *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		if (streq(t, "."))
			continue;
		if (n == max)
			return -1;
		segs[n++] = t;
	}
	return n;
}

int bk_glob_check(const char *pattern)
{
	size_t l = strlen(pattern);
	if (l == 0)
		return -EINVAL;
	if (l > BK_GLOB_MAX)
		return -ENAMETOOLONG;
	if (pattern[0] == '/')
		return -EINVAL;
	char buf[BK_GLOB_MAX + 1];
	const char *segs[BK_GLOB_SEGS];
	int n = split_segs(pattern, buf, sizeof(buf), segs, BK_GLOB_SEGS);
	if (n < 0)
		return -ENAMETOOLONG;
	if (n == 0)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if (streq(segs[i], ".."))
			return -EPERM;
		if (strlen(segs[i]) > BK_NAME_MAX)
			return -ENAMETOOLONG;
	}
	return 0;
}

#define GLOB_PATH_SEGS 128

/* py: pathlib's rules (a leading '.' is matched by wildcards, "**" enters
 * hidden directories, '\\' is a plain character); else fnmatch(3) with
 * FNM_PERIOD and "**" not entering hidden directories. */
static bool glob_match(const char *pattern, const char *path, bool py)
{
	char pbuf[BK_GLOB_MAX + 4], sbuf[BK_VPATH_MAX + 1];
	const char *ps[BK_GLOB_SEGS + 1], *ss[GLOB_PATH_SEGS];
	int np = split_segs(pattern, pbuf, sizeof(pbuf), ps, BK_GLOB_SEGS + 1);
	int ns = split_segs(path, sbuf, sizeof(sbuf), ss, GLOB_PATH_SEGS);
	if (np <= 0 || ns < 0)
		return false;
	/* dp[i][j]: pattern segments i.. match path segments j.. ; filled
	 * backwards, O(np * ns) fnmatch calls, no exponential backtracking
	 * over "**" */
	static _Thread_local bool dp[BK_GLOB_SEGS + 2][GLOB_PATH_SEGS + 1];
	for (int i = np; i >= 0; i--)
		for (int j = ns; j >= 0; j--) {
			bool m;
			if (i == np)
				m = j == ns;
			else if (streq(ps[i], "**"))
				/* zero directories, or one more (not a hidden one) */
				m = dp[i + 1][j] || (j < ns && (py || ss[j][0] != '.') && dp[i][j + 1]);
			else
				m = j < ns && dp[i + 1][j + 1] &&
				    fnmatch(ps[i], ss[j], py ? FNM_NOESCAPE : FNM_PERIOD) == 0;
			dp[i][j] = m;
		}
	return dp[0][0];
}

bool bk_glob_match(const char *pattern, const char *path) { return glob_match(pattern, path, false); }

bool bk_glob_match_rglob(const char *pattern, const char *path)
{
	/* rglob(p) is glob("** / p"): the pattern matches the path's last
	 * segments; a pattern ending in "**" names directories only */
	size_t l = strlen(pattern);
	while (l && pattern[l - 1] == '/')
		l--;
	if (l >= 2 && pattern[l - 1] == '*' && pattern[l - 2] == '*' && (l == 2 || pattern[l - 3] == '/'))
		return false;
	char full[BK_GLOB_MAX + 4];
	int w = snprintf(full, sizeof(full), "**/%s", pattern);
	if (w < 0 || (size_t)w >= sizeof(full))
		return false;
	return glob_match(full, path, true);
}

bool bk_glob_deeper(const char *pattern, int depth)
{
	char buf[BK_GLOB_MAX + 1];
	const char *segs[BK_GLOB_SEGS];
	int n = split_segs(pattern, buf, sizeof(buf), segs, BK_GLOB_SEGS);
	if (n < 0)
		return false;
	for (int i = 0; i < n; i++)
		if (streq(segs[i], "**"))
			return true;
	return n > depth;
}

const char *bk_glob_split_abs(const char *pattern, char *base, size_t baselen)
{
	/* the end of the longest magic-free prefix of whole segments */
	const char *cut = pattern, *p = pattern, *last_seg = pattern;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *s = p;
		while (*p && *p != '/')
			p++;
		if (has_magic(s, (size_t)(p - s)))
			break;
		last_seg = s;
		cut = p;
	}
	while (*cut == '/')
		cut++;
	if (!*cut) {
		/* no magic at all: the last segment is the pattern */
		cut = last_seg;
	}
	size_t n = (size_t)(cut - pattern);
	while (n > 1 && pattern[n - 1] == '/')
		n--;
	if (n == 0) {
		if (baselen < 2)
			return NULL;
		strcpy(base, "/");
		return cut;
	}
	if (n + 1 > baselen)
		return NULL;
	memcpy(base, pattern, n);
	base[n] = '\0';
	return cut;
}
