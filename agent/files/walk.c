/* SPDX-License-Identifier: Apache-2.0 */
/* Bounded directory walks of the helper, for glob and grep: every
 * directory is entered by one name below its parent with RESOLVE_BENEATH
 * and no symlinks (fs.c), so a walk never follows a link nor crosses a
 * mount; it stops, marking the result truncated, after WALK_VISIT_MAX
 * entries, WALK_DEPTH_MAX levels, the result's bound or the work budget. */
#include "agent/files/internal.h"

#include <fcntl.h>
#include <fnmatch.h>

#include "agent/parse/text.h"

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
	struct bk_file_entry *m;
	size_t n;
};

static void glob_visit(struct walk *w, int dfd, const char *name, const char *rel, const struct stat *st)
{
	struct glob_ud *g = w->ud;
	/* rglob yields directories too; the reference keeps files only */
	if (!S_ISREG(st->st_mode) || !bk_glob_match_rglob(g->pattern, rel))
		return;
	if (g->n == GLOB_MATCH_MAX) {
		w->truncated = w->stop = true;
		return;
	}
	char full[BK_VPATH_MAX + 64];
	if (bk_vpath_join(g->base, rel, full, sizeof(full)) < 0)
		return;
	char *s = strdup(full);
	if (!s)
		bkf_out_of_memory(w->h);
	g->m[g->n++] = (struct bk_file_entry){ .name = s,
					       .type = BK_FILE_T_FILE,
					       .size = (uint64_t)st->st_size,
					       .mtime_sec = (int64_t)st->st_mtim.tv_sec,
					       .mtime_nsec = (uint32_t)st->st_mtim.tv_nsec };
}

static int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct bk_file_entry *)a)->name, ((const struct bk_file_entry *)b)->name);
}

void bkf_glob_walk(struct hctx *h, int fd, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	struct glob_ud g = { .pattern = q->pattern, .base = q->vp.abs };
	g.m = bkf_calloc(h, GLOB_MATCH_MAX, sizeof(*g.m));
	/* rglob: every depth */
	struct walk w = { .h = h, .visit = glob_visit, .ud = &g, .maxdepth = WALK_DEPTH_MAX };
	walk_dir(&w, fd, "", 0);
	qsort(g.m, g.n, sizeof(*g.m), ent_cmp);
	for (size_t i = 0; i < g.n; i++) {
		char *c = bkf_sanitized(h, g.m[i].name, strlen(g.m[i].name));
		free(g.m[i].name);
		g.m[i].name = c;
	}
	r->entries = g.m;
	r->nentries = g.n;
	r->truncated = w.truncated;
}

/* ---- grep ---------------------------------------------------------------------------------- */

struct grep_ud {
	const pcre2_code *re;
	pcre2_match_data *md;
	pcre2_match_context *mc;
	const char *glob;
	const char *base;     /* virtual path of the start */
	struct bk_file_result *r;
	size_t max;
	size_t bytes;
	bool truncated;
};

/* The reference's filter: fnmatch (a '*' also matches '/', a leading '.'
 * and a '\\' are plain) of the path relative to the search's start, of the
 * virtual path without its leading '/', or of the name. */
static bool glob_ok(const struct grep_ud *g, const char *rel, const char *vpath, const char *name)
{
	if (!g->glob)
		return true;
	return fnmatch(g->glob, rel, FNM_NOESCAPE) == 0 || fnmatch(g->glob, vpath + 1, FNM_NOESCAPE) == 0 ||
	       fnmatch(g->glob, name, FNM_NOESCAPE) == 0;
}

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
	/* as the reference, a file that is not UTF-8 text is skipped (NUL
	 * bytes too: they cannot be in a JSON string here) */
	if (!bk_utf8_valid(buf, len)) {
		free(buf);
		return false;
	}
	len = bkf_universal_newlines(buf, len);
	struct bk_file_result *r = g->r;
	size_t line = 0;
	bool stop = false;
	for (char *p = buf, *end = buf + len; p < end && !stop; line++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *le = nl ? nl : end;
		if ((line & 15) == 15 && bkf_over_budget(h)) { /* a line can cost a match limit */
			g->truncated = stop = true;
			break;
		}
		/* the line with its '\n', as Python iterates a file: '$'
		 * matches before it */
		int rc = pcre2_match(g->re, (PCRE2_SPTR)p, (size_t)(nl ? nl + 1 - p : le - p), 0, 0, g->md, g->mc);
		if (rc == PCRE2_ERROR_NOMEMORY || rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_MATCHLIMIT ||
		    rc == PCRE2_ERROR_DEPTHLIMIT) {
			char e[BK_VPATH_MAX + 200];
			snprintf(e, sizeof(e),
				 "Search stopped: the pattern exceeded the regex engine's match limit at %s line %zu "
				 "-- simplify the pattern and retry.",
				 vpath, line + 1);
			free(r->grep_error);
			r->grep_error = bkf_sanitized(h, e, strlen(e));
			g->truncated = stop = true;
			break;
		}
		if (rc >= 0) {
			struct bk_file_match *m = &r->grep[r->ngrep++];
			m->path = bkf_sanitized(h, vpath, strlen(vpath));
			m->line = line + 1;
			size_t tl = (size_t)(le - p);
			if (tl > GREP_TEXT_MAX) {
				tl = GREP_TEXT_MAX;
				while (tl && ((unsigned char)p[tl] & 0xc0) == 0x80)
					tl--; /* on a character */
			}
			m->text = bkf_sanitized(h, p, tl);
			if (r->ngrep >= g->max) {
				/* the reference: truncated once max_matches are found */
				g->truncated = stop = true;
				break;
			}
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
	char full[BK_VPATH_MAX + 64];
	if (bk_vpath_join(g->base, rel, full, sizeof(full)) < 0 || !glob_ok(g, rel, full, name))
		return;
	int fd = bkf_beneath(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return;
	if (grep_file(w->h, g, fd, full))
		w->stop = true;
	close(fd);
}

void bkf_grep_walk(struct hctx *h, const pcre2_code *re, int fd, bool is_dir, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	struct grep_ud g = { .re = re, .glob = q->glob, .base = q->vp.abs, .r = r, .max = (size_t)q->max_matches };
	g.md = pcre2_match_data_create_from_pattern(re, NULL);
	g.mc = pcre2_match_context_create(NULL);
	if (!g.md || !g.mc)
		bkf_out_of_memory(h);
	pcre2_set_match_limit(g.mc, GREP_MATCH_LIMIT);
	pcre2_set_depth_limit(g.mc, GREP_DEPTH_LIMIT);
	pcre2_set_heap_limit(g.mc, GREP_HEAP_KIB);
	r->grep = bkf_calloc(h, g.max, sizeof(*r->grep));
	struct walk w = { .h = h, .visit = grep_visit, .ud = &g, .maxdepth = WALK_DEPTH_MAX };
	if (is_dir) {
		walk_dir(&w, fd, "", 0);
	} else {
		const char *slash = strrchr(q->vp.abs, '/');
		const char *name = slash ? slash + 1 : q->vp.abs;
		/* a file: relative to its directory, that is its name */
		if (glob_ok(&g, name, q->vp.abs, name))
			grep_file(h, &g, fd, q->vp.abs);
	}
	pcre2_match_data_free(g.md);
	pcre2_match_context_free(g.mc);
	r->truncated = g.truncated || w.truncated;
}
