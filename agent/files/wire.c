/* SPDX-License-Identifier: Apache-2.0 */
/* The binary encodings that cross exec between the agent and its file
 * helper: plain little-endian integers and length-prefixed strings.
 *
 *   request (agent -> helper, a sealed memfd on fd 3):
 *     u32 magic, u32 op, u32 uid, u32 gid, i32 cap_last, i32 parent, u32 n_cg,
 *     u8 has_range, u8 replace_all, u8 trailing slash,
 *     i64 range_start, i64 range_end, i64 max_matches,
 *     str path, str content, str old_str, str new_str, str pattern, str glob,
 *     u32 npaths, npaths x (u8 trailing slash, str path)
 *   records (helper -> agent, the pipe on fd 4): struct rec_hdr, then
 *     REC_ENTRY   u32 kind, the element's fields (see apply_entry)
 *     REC_CONTENT the next bytes of a view's content (read_image: base64)
 *     REC_END     u8 flags, u64 size, lines, occurrences,
 *                 removed, kept, str grep error, str image MIME type
 *     REC_ERROR   i32 status, str code, str detail
 *   str: u32 length (UINT32_MAX: absent), the bytes, a NUL byte.
 *
 * Neither side trusts the other: the helper decodes the request with every
 * length bounded by the buffer and every field checked again as the API
 * edge checked it (paths are parsed again: the lexical rule holds on both
 * sides); the agent bounds every record, count and byte total of a result,
 * and takes only the records that belong to the operation it asked for. */
#include "agent/files/internal.h"

#include <sys/uio.h>

#define REQ_MAGIC 0x31464b42u /* "BKF1" */
#define STR_ABSENT UINT32_MAX

enum { ENT_DIRENT = 1, ENT_GREP = 3, ENT_FILE, ENT_COPY, ENT_UNAVAILABLE };
enum { END_CREATED = 1, END_IS_DIRECTORY = 2, END_TRUNCATED = 4 };

/* ---- the codec ---------------------------------------------------------------------- */

struct wbuf {
	char *p;
	size_t len, cap, max;
	int err;
};

static void wb_put(struct wbuf *w, const void *d, size_t n)
{
	if (w->err)
		return;
	if (n > w->max - w->len) {
		w->err = -E2BIG;
		return;
	}
	if (w->len + n > w->cap) {
		size_t nc = w->cap ? w->cap : 4096;
		while (nc < w->len + n)
			nc *= 2;
		char *np = realloc(w->p, nc);
		if (!np) {
			w->err = -ENOMEM;
			return;
		}
		w->p = np;
		w->cap = nc;
	}
	memcpy(w->p + w->len, d, n);
	w->len += n;
}

static void wb_u8(struct wbuf *w, uint8_t v) { wb_put(w, &v, sizeof(v)); }
static void wb_u32(struct wbuf *w, uint32_t v) { wb_put(w, &v, sizeof(v)); }
static void wb_u64(struct wbuf *w, uint64_t v) { wb_put(w, &v, sizeof(v)); }
static void wb_i64(struct wbuf *w, int64_t v) { wb_put(w, &v, sizeof(v)); }

static void wb_strn(struct wbuf *w, const char *s, size_t n)
{
	if (!s) {
		wb_u32(w, STR_ABSENT);
		return;
	}
	if (n >= STR_ABSENT) {
		w->err = w->err ? w->err : -E2BIG;
		return;
	}
	wb_u32(w, (uint32_t)n);
	wb_put(w, s, n);
	wb_u8(w, 0);
}

static void wb_str(struct wbuf *w, const char *s) { wb_strn(w, s, s ? strlen(s) : 0); }

struct rbuf {
	const char *p;
	size_t len, off;
	bool bad;
};

static void rb_get(struct rbuf *r, void *d, size_t n)
{
	if (r->bad || n > r->len - r->off) {
		r->bad = true;
		memset(d, 0, n);
		return;
	}
	memcpy(d, r->p + r->off, n);
	r->off += n;
}

static uint8_t rb_u8(struct rbuf *r)
{
	uint8_t v;
	rb_get(r, &v, sizeof(v));
	return v;
}

static uint32_t rb_u32(struct rbuf *r)
{
	uint32_t v;
	rb_get(r, &v, sizeof(v));
	return v;
}

static uint64_t rb_u64(struct rbuf *r)
{
	uint64_t v;
	rb_get(r, &v, sizeof(v));
	return v;
}

static int64_t rb_i64(struct rbuf *r)
{
	int64_t v;
	rb_get(r, &v, sizeof(v));
	return v;
}

/* A string in place (NUL-terminated in the buffer, none inside), or NULL
 * when absent; sets r->bad when malformed or absent and !optional. */
static const char *rb_str(struct rbuf *r, bool optional, size_t *lenp)
{
	uint32_t n = rb_u32(r);
	if (lenp)
		*lenp = 0;
	if (r->bad)
		return NULL;
	if (n == STR_ABSENT) {
		r->bad = !optional;
		return NULL;
	}
	if ((size_t)n >= r->len - r->off || r->p[r->off + n] != '\0' || memchr(r->p + r->off, '\0', n)) {
		r->bad = true;
		return NULL;
	}
	const char *s = r->p + r->off;
	r->off += (size_t)n + 1;
	if (lenp)
		*lenp = n;
	return s;
}

/* ---- the request ------------------------------------------------------------------------ */

int bkf_req_encode(const struct freq *q, char **out, size_t *outlen)
{
	const struct bk_file_req *rq = &q->rq;
	struct wbuf w = { .max = REQ_MAX };
	wb_u32(&w, REQ_MAGIC);
	wb_u32(&w, (uint32_t)rq->op);
	wb_u32(&w, (uint32_t)q->uid);
	wb_u32(&w, (uint32_t)q->gid);
	wb_u32(&w, (uint32_t)q->cap_last);
	wb_u32(&w, (uint32_t)q->parent);
	wb_u32(&w, q->n_cg);
	wb_u8(&w, rq->has_range);
	wb_u8(&w, rq->replace_all);
	wb_u8(&w, rq->vp.trailing_slash);
	wb_i64(&w, rq->range_start);
	wb_i64(&w, rq->range_end);
	wb_i64(&w, rq->max_matches);
	wb_str(&w, rq->vp.abs);
	wb_strn(&w, rq->content, rq->content_len);
	wb_strn(&w, rq->old_str, rq->old_len);
	wb_strn(&w, rq->new_str, rq->new_len);
	wb_str(&w, rq->pattern);
	wb_str(&w, rq->glob);
	wb_u32(&w, (uint32_t)rq->npaths);
	for (size_t i = 0; i < rq->npaths; i++) {
		wb_u8(&w, rq->paths[i].trailing_slash);
		wb_str(&w, rq->paths[i].abs);
	}
	if (w.err) {
		free(w.p);
		return w.err;
	}
	*out = w.p;
	*outlen = w.len;
	return 0;
}

/* The helper parses the path again: the lexical rule holds on both sides. */
static bool vpath_from(const char *abs, bool dir, bool mnt, struct bk_vpath *vp)
{
	if (!abs || bk_vpath_parse_abs(abs, strlen(abs), mnt, vp) < 0)
		return false;
	vp->trailing_slash = dir;
	return true;
}

static bool in_range(long long v, long long lo, long long hi) { return v >= lo && v <= hi; }

/* What each operation cannot do without. */
static int req_complete(const struct bk_file_req *q)
{
	switch (q->op) {
	case BK_FILE_CREATE:
		if (!q->content || !q->vp.writable)
			return -EPROTO;
		break;
	case BK_FILE_STR_REPLACE:
		if (!q->old_str || !q->old_len || !q->new_str || !q->vp.writable)
			return -EPROTO;
		break;
	case BK_FILE_GLOB:
		if (!q->pattern || bk_glob_check(q->pattern) < 0)
			return -EPROTO;
		break;
	case BK_FILE_GREP:
		if (!q->pattern || q->max_matches < 1 || (q->glob && (!q->glob[0] || strlen(q->glob) > BK_GLOB_MAX)))
			return -EPROTO;
		break;
	default:
		break;
	}
	return 0;
}

int bkf_req_decode(char *buf, size_t len, struct freq *q)
{
	struct rbuf r = { .p = buf, .len = len };
	struct bk_file_req *rq = &q->rq;
	memset(q, 0, sizeof(*q));
	uint32_t magic = rb_u32(&r), op = rb_u32(&r), uid = rb_u32(&r), gid = rb_u32(&r);
	int32_t cap_last = (int32_t)rb_u32(&r), parent = (int32_t)rb_u32(&r);
	uint32_t n_cg = rb_u32(&r);
	uint8_t has_range = rb_u8(&r), replace_all = rb_u8(&r), dir = rb_u8(&r);
	int64_t start = rb_i64(&r), end = rb_i64(&r), max = rb_i64(&r);
	if (r.bad || magic != REQ_MAGIC || op > BK_FILE_WIPE || !in_range(uid, 1, 4294967294LL) ||
	    gid == UINT32_MAX || !in_range(cap_last, 0, 63) || !in_range(parent, 1, 4194304) ||
	    n_cg > FD_CG_MAX ||
	    !in_range(max, 0, BK_FILE_GREP_MATCH_MAX) || has_range > 1 || replace_all > 1 || dir > 1)
		return -EPROTO;
	rq->op = (enum bk_file_op)op;
	q->uid = (uid_t)uid;
	q->gid = (gid_t)gid;
	q->cap_last = cap_last;
	q->parent = (pid_t)parent;
	q->n_cg = n_cg;
	rq->max_matches = (long)max;
	rq->replace_all = replace_all;
	if (has_range) {
		if (!in_range(start, -(1LL << 40), 1LL << 40) || !in_range(end, -(1LL << 40), 1LL << 40))
			return -EPROTO;
		rq->has_range = true;
		rq->range_start = start;
		rq->range_end = end;
	}
	const char *abs = rb_str(&r, false, NULL);
	rq->content = rb_str(&r, true, &rq->content_len);
	rq->old_str = rb_str(&r, true, &rq->old_len);
	rq->new_str = rb_str(&r, true, &rq->new_len);
	rq->pattern = rb_str(&r, true, NULL);
	rq->glob = rb_str(&r, true, NULL);
	uint32_t np = rb_u32(&r);
	if (r.bad || np > BK_FILE_PRESENT_MAX)
		return -EPROTO;
	if (rq->op != BK_FILE_WIPE && rq->op != BK_FILE_PRESENT && !vpath_from(abs, dir, rq->op == BK_FILE_LS, &rq->vp))
		return -EPROTO;
	if (np) {
		rq->paths = calloc(np, sizeof(*rq->paths));
		if (!rq->paths)
			return -ENOMEM;
		for (; rq->npaths < np; rq->npaths++) {
			struct bk_vpath *vp = &rq->paths[rq->npaths];
			bool pdir = rb_u8(&r);
			if (!vpath_from(rb_str(&r, false, NULL), pdir, false, vp) || bk_vpath_is_root(vp))
				return -EPROTO;
		}
	}
	if (r.bad || r.off != r.len)
		return -EPROTO;
	return req_complete(rq);
}

/* ---- result records: the helper's side ------------------------------------------------- */

int bkf_rec_write(int fd, uint32_t type, const void *p1, size_t n1, const void *p2, size_t n2)
{
	struct rec_hdr hd = { type, (uint32_t)(n1 + n2) };
	struct iovec iov[3] = { { &hd, sizeof(hd) }, { (void *)p1, n1 }, { (void *)p2, n2 } };
	struct iovec *v = iov;
	int n = 3;
	while (n > 0) {
		ssize_t w = writev(fd, v, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		size_t left = (size_t)w;
		while (n > 0 && left >= v->iov_len) {
			left -= v->iov_len;
			v++;
			n--;
		}
		if (n > 0) {
			v->iov_base = (char *)v->iov_base + left;
			v->iov_len -= left;
		}
	}
	return 0;
}

/* Send the record built in w (then emptied for the next one). */
static int send_rec(int fd, uint32_t type, struct wbuf *w)
{
	int r = w->err ? w->err : bkf_rec_write(fd, type, w->p, w->len, NULL, 0);
	w->len = 0;
	return r;
}

static int send_entries(int fd, const struct bk_file_result *r, struct wbuf *w)
{
	int e = 0;
	for (size_t i = 0; i < r->nentries && !e; i++) {
		wb_u32(w, ENT_DIRENT);
		wb_str(w, r->entries[i].name);
		wb_u32(w, r->entries[i].type);
		wb_u64(w, r->entries[i].size);
		wb_i64(w, r->entries[i].mtime_sec);
		wb_u32(w, r->entries[i].mtime_nsec);
		e = send_rec(fd, REC_ENTRY, w);
	}
	for (size_t i = 0; i < r->ngrep && !e; i++) {
		wb_u32(w, ENT_GREP);
		wb_str(w, r->grep[i].path);
		wb_u64(w, r->grep[i].line);
		wb_str(w, r->grep[i].text);
		e = send_rec(fd, REC_ENTRY, w);
	}
	for (size_t i = 0; i < r->nfiles && !e; i++) {
		wb_u32(w, ENT_FILE);
		wb_str(w, r->files[i].path);
		wb_u64(w, r->files[i].size);
		wb_u8(w, r->files[i].text);
		e = send_rec(fd, REC_ENTRY, w);
	}
	for (size_t i = 0; i < r->ncopies && !e; i++) {
		wb_u32(w, ENT_COPY);
		wb_str(w, r->copies[i].source);
		wb_str(w, r->copies[i].destination);
		e = send_rec(fd, REC_ENTRY, w);
	}
	for (size_t i = 0; i < r->nunavailable && !e; i++) {
		wb_u32(w, ENT_UNAVAILABLE);
		wb_str(w, r->unavailable[i]);
		e = send_rec(fd, REC_ENTRY, w);
	}
	return e;
}

int bkf_send_result(int fd, const struct bk_file_result *r)
{
	struct wbuf w = { .max = REC_MAX };
	int e = send_entries(fd, r, &w);
	for (size_t off = 0; !e && off < r->content_len;) {
		size_t n = r->content_len - off < REC_MAX ? r->content_len - off : REC_MAX;
		e = bkf_rec_write(fd, REC_CONTENT, r->content + off, n, NULL, 0);
		off += n;
	}
	if (!e) {
		wb_u8(&w, (uint8_t)((r->created ? END_CREATED : 0) | (r->is_directory ? END_IS_DIRECTORY : 0) |
				    (r->truncated ? END_TRUNCATED : 0)));
		wb_u64(&w, r->size);
		wb_u64(&w, r->lines);
		wb_u64(&w, r->occurrences);
		wb_u64(&w, r->removed);
		wb_u64(&w, r->kept);
		wb_str(&w, r->grep_error);
		wb_str(&w, r->mime);
		e = send_rec(fd, REC_END, &w);
	}
	free(w.p);
	return e;
}

int bkf_send_error(int fd, int status, const char *code, const char *detail)
{
	struct wbuf w = { .max = REC_MAX };
	wb_u32(&w, (uint32_t)status);
	wb_str(&w, code);
	wb_str(&w, detail);
	int e = send_rec(fd, REC_ERROR, &w);
	free(w.p);
	return e;
}

size_t bkf_result_bytes(const struct bk_file_result *r)
{
	size_t n = r->content_len + (r->grep_error ? strlen(r->grep_error) : 0) + (r->mime ? strlen(r->mime) : 0);
	for (size_t i = 0; i < r->nentries; i++)
		n += strlen(r->entries[i].name);
	for (size_t i = 0; i < r->ngrep; i++)
		n += strlen(r->grep[i].path) + strlen(r->grep[i].text);
	for (size_t i = 0; i < r->nfiles; i++)
		n += strlen(r->files[i].path);
	for (size_t i = 0; i < r->ncopies; i++)
		n += strlen(r->copies[i].source) + strlen(r->copies[i].destination);
	for (size_t i = 0; i < r->nunavailable; i++)
		n += strlen(r->unavailable[i]);
	return n;
}

/* ---- result records: the agent's side ---------------------------------------------------- */

/* Room for one more element in *v (n used, at most max; -EMSGSIZE past
 * the bound the helper keeps to). Capacity doubles from 16: a realloc
 * when n is 0 or reaches a power of two. */
static int grow(void **v, size_t n, size_t max, size_t sz)
{
	if (n >= max)
		return -EMSGSIZE;
	if (n != 0 && (n < 16 || (n & (n - 1)) != 0))
		return 0;
	void *nv = realloc(*v, (n ? n * 2 : 16) * sz);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	return 0;
}

/* A copy of a received string, its bytes counted against the result's. */
static char *take(struct rbuf *rb, size_t *bytes)
{
	size_t n;
	const char *s = rb_str(rb, false, &n);
	if (!s)
		return NULL;
	*bytes += n;
	return strdup(s);
}

static bool ent_allowed(enum bk_file_op op, uint32_t kind)
{
	switch (kind) {
	case ENT_DIRENT:
		return op == BK_FILE_VIEW || op == BK_FILE_LS || op == BK_FILE_GLOB;
	case ENT_GREP:
		return op == BK_FILE_GREP;
	case ENT_FILE:
	case ENT_COPY:
		return op == BK_FILE_PRESENT;
	case ENT_UNAVAILABLE:
		return op == BK_FILE_WIPE;
	default:
		return false;
	}
}

static int apply_entry(struct bk_file_result *r, enum bk_file_op op, struct rbuf *rb, size_t *bytes)
{
	uint32_t kind = rb_u32(rb);
	if (rb->bad || !ent_allowed(op, kind))
		return -EPROTO;
	int e;
	switch (kind) {
	case ENT_DIRENT: {
		if ((e = grow((void **)&r->entries, r->nentries, LS_MAX, sizeof(*r->entries))) < 0)
			return e;
		/* counted only when whole: a result never holds half an entry */
		struct bk_file_entry *d = &r->entries[r->nentries];
		*d = (struct bk_file_entry){ 0 };
		d->name = take(rb, bytes);
		if (!d->name)
			return rb->bad ? -EPROTO : -ENOMEM;
		uint32_t t = rb_u32(rb);
		d->type = t < BK_FILE_T_N ? (enum bk_file_type)t : BK_FILE_T_UNKNOWN;
		d->size = rb_u64(rb);
		d->mtime_sec = rb_i64(rb);
		d->mtime_nsec = rb_u32(rb);
		if (rb->bad || t >= BK_FILE_T_N || d->mtime_nsec >= 1000000000u) {
			free(d->name);
			*d = (struct bk_file_entry){ 0 };
			return -EPROTO;
		}
		r->nentries++;
		return 0;
	}
	case ENT_GREP: {
		if ((e = grow((void **)&r->grep, r->ngrep, BK_FILE_GREP_MATCH_MAX, sizeof(*r->grep))) < 0)
			return e;
		/* counted only when whole: a result never holds half an entry */
		struct bk_file_match *m = &r->grep[r->ngrep];
		*m = (struct bk_file_match){ 0 };
		m->path = take(rb, bytes);
		m->line = rb_u64(rb);
		m->text = m->path ? take(rb, bytes) : NULL;
		if (!m->path || !m->text) {
			free(m->path);
			*m = (struct bk_file_match){ 0 };
			return rb->bad ? -EPROTO : -ENOMEM;
		}
		r->ngrep++;
		return 0;
	}
	case ENT_FILE: {
		if ((e = grow((void **)&r->files, r->nfiles, BK_FILE_PRESENT_MAX, sizeof(*r->files))) < 0)
			return e;
		struct bk_file_presented *f = &r->files[r->nfiles];
		*f = (struct bk_file_presented){ 0 };
		if (!(f->path = take(rb, bytes)))
			return rb->bad ? -EPROTO : -ENOMEM;
		r->nfiles++;
		f->size = rb_u64(rb);
		uint8_t text = rb_u8(rb);
		f->text = text == 1;
		f->mime = bk_mime_type(f->path);
		if (streq(f->mime, "application/octet-stream") && f->text)
			f->mime = "text/plain"; /* as the reference: unknown, but UTF-8 text */
		return rb->bad || text > 1 ? -EPROTO : 0;
	}
	case ENT_COPY: {
		if ((e = grow((void **)&r->copies, r->ncopies, BK_FILE_PRESENT_MAX, sizeof(*r->copies))) < 0)
			return e;
		struct bk_file_copy *c = &r->copies[r->ncopies];
		*c = (struct bk_file_copy){ 0 };
		c->source = take(rb, bytes);
		c->destination = c->source ? take(rb, bytes) : NULL;
		if (!c->source || !c->destination) {
			free(c->source);
			*c = (struct bk_file_copy){ 0 };
			return rb->bad ? -EPROTO : -ENOMEM;
		}
		r->ncopies++;
		return 0;
	}
	default: /* ENT_UNAVAILABLE */
		if ((e = grow((void **)&r->unavailable, r->nunavailable, WIPE_UNAVAILABLE_MAX, sizeof(*r->unavailable))) < 0)
			return e;
		if (!(r->unavailable[r->nunavailable] = take(rb, bytes)))
			return rb->bad ? -EPROTO : -ENOMEM;
		r->nunavailable++;
		return 0;
	}
}

/* Capacity of a content of n bytes: powers of two from 64 KiB, so that a
 * content arriving in REC_MAX pieces is copied O(log n) times. */
static size_t content_cap(size_t n)
{
	size_t c = 65536;
	while (c < n)
		c *= 2;
	return c;
}

static int apply_content(struct bk_file_result *r, const char *p, size_t n)
{
	if (memchr(p, '\0', n))
		return -EPROTO;
	size_t need = r->content_len + n + 1;
	if (!r->content || content_cap(r->content_len + 1) < need) {
		char *nc = realloc(r->content, content_cap(need));
		if (!nc)
			return -ENOMEM;
		r->content = nc;
	}
	memcpy(r->content + r->content_len, p, n);
	r->content_len += n;
	r->content[r->content_len] = '\0';
	return 0;
}

static int apply_end(struct bk_file_result *r, enum bk_file_op op, struct rbuf *rb, size_t *bytes)
{
	uint8_t fl = rb_u8(rb);
	r->size = rb_u64(rb);
	r->lines = rb_u64(rb);
	r->occurrences = rb_u64(rb);
	r->removed = rb_u64(rb);
	r->kept = rb_u64(rb);
	size_t n, mn;
	const char *ge = rb_str(rb, true, &n);
	const char *mime = rb_str(rb, true, &mn);
	if (rb->bad || fl > 7 || (ge && op != BK_FILE_GREP) || (op == BK_FILE_READ_IMAGE) != (mime != NULL) ||
	    mn > 127 || (mime && strncmp(mime, "image/", 6) != 0))
		return -EPROTO;
	if (mime && !(r->mime = strdup(mime)))
		return -ENOMEM;
	*bytes += mn;
	r->created = fl & END_CREATED;
	r->is_directory = fl & END_IS_DIRECTORY;
	r->truncated = fl & END_TRUNCATED;
	if (ge && !(r->grep_error = strdup(ge)))
		return -ENOMEM;
	*bytes += n;
	/* a view is a directory's entries or a file's content, never both */
	if (op == BK_FILE_VIEW && (r->is_directory ? r->content != NULL : r->nentries > 0))
		return -EPROTO;
	if ((op == BK_FILE_VIEW || op == BK_FILE_READ_IMAGE) && !r->is_directory && !r->content &&
	    !(r->content = strdup("")))
		return -ENOMEM;
	r->status = 200;
	return 0;
}

static bool code_ok(const char *c)
{
	if (!c || !c[0] || strlen(c) >= BK_FILE_CODE_MAX)
		return false;
	for (; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || *c == '_'))
			return false;
	return true;
}

static int apply_error(struct bk_file_result *r, struct rbuf *rb)
{
	int32_t status = (int32_t)rb_u32(rb);
	const char *code = rb_str(rb, false, NULL);
	const char *detail = rb_str(rb, false, NULL);
	if (rb->bad || status < 400 || status > 599 || !code_ok(code) || strlen(detail) >= BK_FILE_DETAIL_MAX)
		return -EPROTO;
	/* a refusal replaces whatever the helper had sent before it */
	bk_file_result_free(r);
	r->status = status;
	snprintf(r->code, sizeof(r->code), "%s", code);
	snprintf(r->detail, sizeof(r->detail), "%s", detail);
	return 0;
}

int bkf_rec_apply(struct bk_file_result *r, enum bk_file_op op, uint32_t type, const char *p, size_t n,
		  size_t *bytes, bool *done)
{
	struct rbuf rb = { .p = p, .len = n };
	int e;
	switch (type) {
	case REC_ENTRY:
		e = apply_entry(r, op, &rb, bytes);
		break;
	case REC_CONTENT:
		if (op != BK_FILE_VIEW && op != BK_FILE_READ_IMAGE)
			return -EPROTO;
		*bytes += n;
		e = *bytes > RESULT_MAX ? -EMSGSIZE : apply_content(r, p, n);
		break;
	case REC_END:
		e = apply_end(r, op, &rb, bytes);
		*done = true;
		break;
	case REC_ERROR:
		e = apply_error(r, &rb);
		*done = true;
		break;
	default:
		return -EPROTO;
	}
	if (e == 0 && (rb.bad || (type != REC_CONTENT && rb.off != rb.len)))
		e = -EPROTO;
	if (e == 0 && *bytes > RESULT_MAX)
		e = -EMSGSIZE;
	return e;
}

/* ---- the typed result ---------------------------------------------------------------- */

const char *bk_mime_type(const char *name)
{
	static const char *const tab[][2] = {
		{ "txt", "text/plain" },	{ "log", "text/plain" },	{ "md", "text/markdown" },
		{ "html", "text/html" },	{ "htm", "text/html" },		{ "css", "text/css" },
		{ "csv", "text/csv" },		{ "tsv", "text/tab-separated-values" },
		{ "js", "text/javascript" },	{ "mjs", "text/javascript" },	{ "json", "application/json" },
		{ "xml", "application/xml" },	{ "yaml", "application/yaml" }, { "yml", "application/yaml" },
		{ "py", "text/x-python" },	{ "c", "text/x-c" },		{ "h", "text/x-c" },
		{ "sh", "application/x-sh" },	{ "ipynb", "application/x-ipynb+json" },
		{ "pdf", "application/pdf" },	{ "png", "image/png" },		{ "jpg", "image/jpeg" },
		{ "jpeg", "image/jpeg" },	{ "gif", "image/gif" },		{ "svg", "image/svg+xml" },
		{ "webp", "image/webp" },	{ "bmp", "image/bmp" },		{ "ico", "image/vnd.microsoft.icon" },
		{ "zip", "application/zip" },	{ "gz", "application/gzip" },	{ "tar", "application/x-tar" },
		{ "doc", "application/msword" },
		{ "docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document" },
		{ "xls", "application/vnd.ms-excel" },
		{ "xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" },
		{ "ppt", "application/vnd.ms-powerpoint" },
		{ "pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation" },
		{ "mp3", "audio/mpeg" },	{ "wav", "audio/wav" },		{ "mp4", "video/mp4" },
		{ "webm", "video/webm" },
	};
	const char *slash = strrchr(name, '/');
	const char *base = slash ? slash + 1 : name;
	const char *dot = strrchr(base, '.');
	if (!dot || dot == base || !dot[1])
		return "application/octet-stream";
	for (size_t i = 0; i < ARRAY_SIZE(tab); i++)
		if (strcasecmp(dot + 1, tab[i][0]) == 0)
			return tab[i][1];
	return "application/octet-stream";
}

void bk_file_result_free(struct bk_file_result *r)
{
	for (size_t i = 0; i < r->nentries; i++)
		free(r->entries[i].name);
	for (size_t i = 0; i < r->ngrep; i++) {
		free(r->grep[i].path);
		free(r->grep[i].text);
	}
	for (size_t i = 0; i < r->nfiles; i++)
		free(r->files[i].path);
	for (size_t i = 0; i < r->ncopies; i++) {
		free(r->copies[i].source);
		free(r->copies[i].destination);
	}
	for (size_t i = 0; i < r->nunavailable; i++)
		free(r->unavailable[i]);
	free(r->content);
	free(r->entries);
	free(r->mime);
	free(r->grep);
	free(r->grep_error);
	free(r->files);
	free(r->copies);
	free(r->unavailable);
	memset(r, 0, sizeof(*r));
}
