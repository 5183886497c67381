/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded directory walks of the helper, for glob and grep: every
 * directory is entered by one name below its parent with RESOLVE_BENEATH
 * and no symlinks (fs.c), so a walk never follows a link nor crosses a
 * mount; it stops, marking the result truncated, after WALK_VISIT_MAX
 * entries, WALK_DEPTH_MAX levels, the result's bound or the work budget. */
#include "agent/files/internal.h"

#include <fcntl.h>
#include <fnmatch.h>

struct walk {
	struct hctx *h;
	int maxdepth;
	size_t visited;
	bool truncated; /* a bound was hit */
	bool stop;
	/* called for every entry; rel is relative to the walk's start */
	void (*visit)(struct walk *w, int dfd, const char *name, const char *rel, const struct stat *st);
	void *ud;
};

static void walk_dir(struct walk *w, int dfd, const char *rel, int depth)
{
	struct dent *v = NULL;
	size_t n = 0;
	bool more = false;
	if (bkf_read_dir(dfd, WALK_VISIT_MAX, &v, &n, &more) < 0)
		return;
	if (more)
		w->truncated = true;
	for (size_t i = 0; i < n && !w->stop; i++) {
		if (++w->visited > WALK_VISIT_MAX || bkf_over_budget(w->h)) {
			w->truncated = w->stop = true;
			break;
		}
		if (!v[i].stat_ok)
			continue;
		char child[BK_VPATH_MAX + 1];
		int cw = rel[0] ? snprintf(child, sizeof(child), "%s/%s", rel, v[i].name)
				: snprintf(child, sizeof(child), "%s", v[i].name);
		if (cw < 0 || (size_t)cw >= sizeof(child))
			continue;
		w->visit(w, dfd, v[i].name, child, &v[i].st);
		if (S_ISDIR(v[i].st.st_mode) && !w->stop) {
			if (depth + 1 >= w->maxdepth) {
				if (depth + 1 >= WALK_DEPTH_MAX)
					w->truncated = true;
				continue;
			}
			int cfd = bkf_beneath(dfd, v[i].name, O_RDONLY | O_DIRECTORY);
			if (cfd >= 0) {
				walk_dir(w, cfd, child, depth + 1);
				close(cfd);
			}
		}
	}
	bkf_dents_free(v, n);
}

/* ---- glob ---------------------------------------------------------------------------------- */

struct glob_ud {
	const char *pattern;
	const char *base; /* virtual path of the start */
	char **matches;
	size_t n;
};

static void glob_visit(struct walk *w, int dfd, const char *name, const char *rel, const struct stat *st)
{
	struct glob_ud *g = w->ud;
	if (!bk_glob_match(g->pattern, rel))
		return;
	if (g->n == GLOB_MATCH_MAX) {
		w->truncated = w->stop = true;
		return;
	}
	char full[BK_VPATH_MAX + 64];
	if (bk_vpath_join(g->base, rel, full, sizeof(full)) < 0)
		return;
	char *s = strdup(full);
	if (s)
		g->matches[g->n++] = s;
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void bkf_glob_walk(struct hctx *h, int fd, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	struct glob_ud g = { .pattern = q->pattern, .base = q->vp.abs };
	g.matches = calloc(GLOB_MATCH_MAX, sizeof(char *));
	if (!g.matches)
		bkf_errno(h, ENOMEM, q->vp.abs);
	struct walk w = { .h = h, .visit = glob_visit, .ud = &g };
	/* no "**": no need to go deeper than the pattern has segments */
	w.maxdepth = WALK_DEPTH_MAX;
	for (int d = 1; d < WALK_DEPTH_MAX; d++)
		if (!bk_glob_deeper(q->pattern, d)) {
			w.maxdepth = d;
			break;
		}
	walk_dir(&w, fd, "", 0);
	qsort(g.matches, g.n, sizeof(char *), str_cmp);
	r->matches = bkf_calloc(h, g.n, sizeof(*r->matches));
	for (size_t i = 0; i < g.n; i++)
		r->matches[i] = bkf_sanitized(h, g.matches[i], strlen(g.matches[i]));
	r->nmatches = g.n;
	r->truncated = w.truncated;
}

/* ---- grep ---------------------------------------------------------------------------------- */

struct grep_ud {
	const regex_t *re;
	const char *glob;
	const char *base; /* virtual path of the start */
	struct bk_file_result *r;
	size_t max;
	size_t bytes;
	bool truncated;
};

/* Returns whether the search is to stop (a bound was hit). */
static bool grep_file(struct hctx *h, struct grep_ud *g, int fd, const char *vpath)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > VIEW_MAX)
		return false;
	if (g->bytes + (size_t)st.st_size > GREP_BYTES_MAX) {
		g->truncated = true;
		return true;
	}
	char *buf;
	size_t len;
	bkf_blocking(fd);
	if (bkf_read_all(fd, VIEW_MAX, &buf, &len) < 0)
		return false;
	g->bytes += len;
	if (bkf_is_binary(buf, len)) {
		free(buf);
		return false;
	}
	struct bk_file_result *r = g->r;
	size_t line = 0;
	bool stop = false;
	for (char *p = buf, *end = buf + len; p < end && !stop; line++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *le = nl ? nl : end;
		*le = '\0';
		if ((line & 4095) == 4095 && bkf_over_budget(h)) {
			g->truncated = stop = true;
			break;
		}
		int rc = regexec(g->re, p, 0, NULL, 0);
		if (rc == REG_ESPACE)
			bkf_out_of_memory(h);
		if (rc == 0) {
			if (r->ngrep == g->max) {
				g->truncated = stop = true;
				break;
			}
			struct bk_file_match *m = &r->grep[r->ngrep++];
			m->path = bkf_sanitized(h, vpath, strlen(vpath));
			m->line = line + 1;
			size_t tl = (size_t)(le - p);
			m->text = bkf_sanitized(h, p, tl > GREP_TEXT_MAX ? GREP_TEXT_MAX : tl);
		}
		p = le + 1;
	}
	free(buf);
	return stop;
}

static void grep_visit(struct walk *w, int dfd, const char *name, const char *rel, const struct stat *st)
{
	struct grep_ud *g = w->ud;
	if (!S_ISREG(st->st_mode) || (uint64_t)st->st_size > VIEW_MAX)
		return;
	if (g->glob) {
		bool m = strchr(g->glob, '/') ? bk_glob_match(g->glob, rel) : fnmatch(g->glob, name, FNM_PERIOD) == 0;
		if (!m)
			return;
	}
	int fd = bkf_beneath(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return;
	char full[BK_VPATH_MAX + 64];
	if (bk_vpath_join(g->base, rel, full, sizeof(full)) == 0 && grep_file(w->h, g, fd, full))
		w->stop = true;
	close(fd);
}

void bkf_grep_walk(struct hctx *h, const regex_t *re, int fd, bool is_dir, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	struct grep_ud g = { .re = re, .glob = q->glob, .base = q->vp.abs, .r = r, .max = (size_t)q->max_matches };
	r->grep = bkf_calloc(h, g.max, sizeof(*r->grep));
	struct walk w = { .h = h, .visit = grep_visit, .ud = &g, .maxdepth = WALK_DEPTH_MAX };
	if (is_dir)
		walk_dir(&w, fd, "", 0);
	else
		grep_file(h, &g, fd, q->vp.abs);
	r->truncated = g.truncated || w.truncated;
}
