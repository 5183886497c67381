/* SPDX-License-Identifier: Apache-2.0 */
/* The seven file operations, helper side: each runs as the sandbox user in
 * the container's mount namespace (helper.c), resolves its paths with the
 * primitives of fs.c and either fills the result or refuses (bkf_fail,
 * bkf_errno: the helper answers and exits). */
#include "agent/files/internal.h"
#include "agent/parse/rxbound.h"

#include <fcntl.h>
#include <regex.h>

/* The request's root (O_PATH), or the helper answers with the error. */
static int root_or_fail(struct hctx *h)
{
	int fd = bkf_open_root(h->rq->vp.root, O_PATH);
	if (fd < 0)
		bkf_errno(h, -fd, bk_vroots[h->rq->vp.root].path);
	return fd;
}

/* The directory holding the request's final component (created when
 * mkdirs), or the helper answers with the error. */
static void final_or_fail(struct hctx *h, int rootfd, bool mkdirs, int *dirfd, char base[BK_NAME_MAX + 1])
{
	int r = bkf_resolve_final(rootfd, h->rq->vp.rel, mkdirs, dirfd, base);
	if (r < 0)
		bkf_errno(h, -r, h->rq->vp.abs);
}

/* The entries of the directory dfd (at most LS_MAX, sorted) into r. */
static void entries_or_fail(struct hctx *h, int dfd, const char *path, struct bk_file_result *r)
{
	struct dent *v = NULL;
	size_t n = 0;
	int e = bkf_read_dir(dfd, LS_MAX, &v, &n, &r->truncated);
	if (e < 0)
		bkf_errno(h, -e, path);
	r->entries = bkf_calloc(h, n, sizeof(*r->entries));
	for (size_t i = 0; i < n; i++) {
		r->entries[i].name = bkf_sanitized(h, v[i].name, strlen(v[i].name));
		r->entries[i].type = bkf_dent_type(&v[i]);
		r->entries[i].size = v[i].stat_ok ? (uint64_t)v[i].st.st_size : 0;
	}
	r->nentries = n;
	bkf_dents_free(v, n);
}

/* The whole regular file fd (opened O_NONBLOCK) as text, or the helper
 * refuses it as unviewable. */
static void text_or_fail(struct hctx *h, int fd, const char *path, char **buf, size_t *len)
{
	bkf_blocking(fd);
	int r = bkf_read_all(fd, VIEW_MAX, buf, len);
	if (r == -EFBIG)
		bkf_fail(h, 422, "unviewable", "%s is larger than %u bytes", path, VIEW_MAX);
	if (r < 0)
		bkf_errno(h, -r, path);
	if (bkf_is_binary(*buf, *len))
		bkf_fail(h, 422, "unviewable", "%s looks like a binary file (NUL bytes)", path);
}

/* ---- file_create ------------------------------------------------------------------------ */

void bkf_op_create(struct hctx *h, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	const char *path = q->vp.abs;
	_cleanup_close_ int rootfd = root_or_fail(h);
	_cleanup_close_ int dirfd = -1;
	char base[BK_NAME_MAX + 1];
	final_or_fail(h, rootfd, true, &dirfd, base);
	struct stat st;
	bool exists = fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (exists && S_ISDIR(st.st_mode))
		bkf_errno(h, EISDIR, path);
	if (exists && !S_ISREG(st.st_mode))
		bkf_fail(h, 400, "not_a_regular_file", "%s exists and is not a regular file", path);
	int e = bkf_atomic_write(dirfd, base, q->content, q->content_len, exists ? &st : NULL);
	if (e < 0)
		bkf_errno(h, -e, path);
	r->size = q->content_len;
	r->created = !exists;
}

/* ---- view ---------------------------------------------------------------------------------- */

static size_t count_lines(const char *s, size_t n)
{
	size_t l = 0;
	for (const char *p = s; (p = memchr(p, '\n', n - (size_t)(p - s))); p++)
		l++;
	if (n && s[n - 1] != '\n')
		l++;
	return l;
}

/* Byte offset where line k (1-based) starts; n when past the end. */
static size_t line_offset(const char *s, size_t n, size_t k)
{
	size_t off = 0;
	for (size_t line = 1; line < k && off < n; line++) {
		const char *nl = memchr(s + off, '\n', n - off);
		if (!nl)
			return n;
		off = (size_t)(nl - s) + 1;
	}
	return off;
}

void bkf_op_view(struct hctx *h, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	const char *path = q->vp.abs;
	_cleanup_close_ int rootfd = root_or_fail(h);
	/* O_NONBLOCK: a FIFO must not hang the helper */
	_cleanup_close_ int fd =
		bkf_in_root(rootfd, q->vp.rel, O_RDONLY | O_NONBLOCK | O_NOCTTY | (q->vp.trailing_slash ? O_DIRECTORY : 0), 0);
	if (fd < 0)
		bkf_errno(h, -fd, path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		bkf_errno(h, errno, path);
	if (S_ISDIR(st.st_mode)) {
		r->is_directory = true;
		entries_or_fail(h, fd, path, r);
		return;
	}
	if (!S_ISREG(st.st_mode))
		bkf_fail(h, 422, "unviewable", "%s is not a regular file", path);
	if ((uint64_t)st.st_size > VIEW_MAX)
		bkf_fail(h, 422, "unviewable", "%s is larger than %u bytes", path, VIEW_MAX);
	_cleanup_free_ char *buf = NULL;
	size_t len;
	text_or_fail(h, fd, path, &buf, &len);
	size_t total = count_lines(buf, len);
	size_t from = 0, to = len, nlines = total;
	if (q->has_range) {
		size_t start = (size_t)q->range_start;
		size_t end = q->range_end < 0 || (size_t)q->range_end > total ? total : (size_t)q->range_end;
		if (start > total && !(total == 0 && start == 1))
			bkf_fail(h, 400, "invalid_range", "view_range starts at line %zu but %s has %zu lines", start, path,
				 total);
		from = line_offset(buf, len, start);
		to = line_offset(buf, len, end + 1);
		nlines = end >= start ? end - start + 1 : 0;
	}
	r->content = bkf_sanitized(h, buf + from, to - from);
	r->content_len = strlen(r->content);
	r->lines = nlines;
	r->total_lines = total;
	r->size = len;
}

/* ---- str_replace --------------------------------------------------------------------------- */

static size_t count_occurrences(const char *s, size_t n, const char *pat, size_t pl)
{
	size_t c = 0;
	const char *p = s, *end = s + n;
	while ((size_t)(end - p) >= pl && (p = memmem(p, (size_t)(end - p), pat, pl))) {
		c++;
		p += pl;
	}
	return c;
}

/* buf with each of the n occurrences of old_str replaced, into *out. */
static void replace_or_fail(struct hctx *h, const char *buf, size_t len, size_t n, char **out, size_t *outlen)
{
	const struct bk_file_req *q = h->rq;
	/* new length, without overflow */
	size_t newlen;
	if (q->new_len >= q->old_len) {
		size_t grow = q->new_len - q->old_len;
		if (grow && n > (EDIT_RESULT_MAX - len) / grow)
			bkf_fail(h, 413, "too_large", "the edited file would be larger than %u bytes", EDIT_RESULT_MAX);
		newlen = len + n * grow;
	} else {
		newlen = len - n * (q->old_len - q->new_len);
	}
	char *o = *out = malloc(newlen + 1);
	if (!o)
		bkf_errno(h, ENOMEM, q->vp.abs);
	const char *p = buf, *end = buf + len;
	for (size_t k = 0; k < n; k++) {
		const char *m = memmem(p, (size_t)(end - p), q->old_str, q->old_len);
		memcpy(o, p, (size_t)(m - p));
		o += m - p;
		memcpy(o, q->new_str, q->new_len);
		o += q->new_len;
		p = m + q->old_len;
	}
	memcpy(o, p, (size_t)(end - p));
	*outlen = newlen;
}

void bkf_op_str_replace(struct hctx *h, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	const char *path = q->vp.abs;
	_cleanup_close_ int rootfd = root_or_fail(h);
	_cleanup_close_ int dirfd = -1;
	char base[BK_NAME_MAX + 1];
	final_or_fail(h, rootfd, false, &dirfd, base);
	_cleanup_close_ int fd = bkf_beneath(dirfd, base, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		bkf_errno(h, -fd, path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		bkf_errno(h, errno, path);
	if (S_ISDIR(st.st_mode))
		bkf_errno(h, EISDIR, path);
	if (!S_ISREG(st.st_mode))
		bkf_fail(h, 400, "not_a_regular_file", "%s is not a regular file", path);
	if ((uint64_t)st.st_size > VIEW_MAX)
		bkf_fail(h, 422, "unviewable", "%s is larger than %u bytes", path, VIEW_MAX);
	_cleanup_free_ char *buf = NULL;
	size_t len;
	text_or_fail(h, fd, path, &buf, &len);
	close(steal_fd(&fd));
	size_t n = count_occurrences(buf, len, q->old_str, q->old_len);
	if (n == 0)
		bkf_fail(h, 400, "old_str_not_found", "old_str does not occur in %s", path);
	if (n > 1 && !q->replace_all)
		bkf_fail(h, 409, "not_unique", "old_str occurs %zu times in %s; make it unique or set replace_all", n,
			 path);
	_cleanup_free_ char *out = NULL;
	size_t newlen;
	replace_or_fail(h, buf, len, n, &out, &newlen);
	int e = bkf_atomic_write(dirfd, base, out, newlen, &st);
	if (e < 0)
		bkf_errno(h, -e, path);
	r->occurrences = n;
}

/* ---- ls, glob, grep -------------------------------------------------------------------------- */

void bkf_op_ls(struct hctx *h, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	_cleanup_close_ int rootfd = root_or_fail(h);
	_cleanup_close_ int fd = bkf_in_root(rootfd, q->vp.rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		bkf_errno(h, -fd, q->vp.abs);
	entries_or_fail(h, fd, q->vp.abs, r);
}

void bkf_op_glob(struct hctx *h, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	_cleanup_close_ int rootfd = root_or_fail(h);
	_cleanup_close_ int fd = bkf_in_root(rootfd, q->vp.rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		bkf_errno(h, -fd, q->vp.abs);
	bkf_glob_walk(h, fd, r);
}

void bkf_op_grep(struct hctx *h, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	const char *path = q->vp.abs;
	regex_t re;
	/* bounded again here (the API edge checked it): what glibc would
	 * expand into gigabytes never compiles */
	char why[256];
	if (bk_rx_check(q->pattern, why, sizeof(why)) < 0)
		bkf_fail(h, 422, "pattern_too_complex", "%s", why);
	/* compiled here, in the helper: whatever a pattern within the bounds
	 * still costs is the helper's time and memory (its own cgroup under
	 * the pod, RLIMIT_AS, RLIMIT_CPU), never the agent's */
	int rc = regcomp(&re, q->pattern, REG_EXTENDED | REG_NOSUB);
	if (rc == REG_ESPACE)
		bkf_fail(h, 422, "pattern_too_complex",
			 "the pattern needs more memory to compile than the file helper's limit (%llu MiB)",
			 HELPER_MEMORY_MAX >> 20);
	if (rc != 0) {
		char msg[256];
		regerror(rc, &re, msg, sizeof(msg));
		char e[300];
		snprintf(e, sizeof(e), "invalid regular expression: %s", msg);
		r->grep_error = bkf_strdup(h, e);
		return;
	}
	_cleanup_close_ int rootfd = root_or_fail(h);
	_cleanup_close_ int fd = bkf_in_root(rootfd, q->vp.rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0)
		bkf_errno(h, -fd, path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		bkf_errno(h, errno, path);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		bkf_fail(h, 400, "not_a_regular_file", "%s is neither a file nor a directory", path);
	bkf_grep_walk(h, &re, fd, S_ISDIR(st.st_mode), r);
}

/* ---- present_files ------------------------------------------------------------------------- */

/* Stream the rest of fd to the agent (which hashes it) and, when t is set,
 * into the temp file. Returns bytes or -errno. */
static long long pump(struct hctx *h, uint32_t idx, int fd, struct tmpfile *t, uint64_t budget)
{
	static char buf[REC_MAX - 8];
	long long total = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return total;
		total += n;
		if ((uint64_t)total > budget)
			return -EFBIG;
		if (t) {
			int r = bkf_tmp_write(t, buf, (size_t)n);
			if (r < 0)
				return r;
		}
		if (bkf_rec_write(h->chan, REC_HDATA, &idx, sizeof(idx), buf, (size_t)n) < 0)
			_exit(4);
	}
}

/* Copy the open file fd (vp) into the outputs directory outdir under its
 * own name, streaming it to the agent; its new virtual path into dest. */
static long long copy_to_outputs(struct hctx *h, uint32_t idx, int fd, const struct bk_vpath *vp, int outdir,
				 uint64_t budget, char *dest, size_t destlen)
{
	const char *slash = strrchr(vp->rel, '/');
	const char *name = slash ? slash + 1 : vp->rel;
	snprintf(dest, destlen, "%s/%s", bk_vroots[BK_VROOT_OUTPUTS].path, name);
	struct stat old;
	bool exists = fstatat(outdir, name, &old, AT_SYMLINK_NOFOLLOW) == 0;
	if (exists && S_ISDIR(old.st_mode))
		bkf_errno(h, EISDIR, dest);
	struct tmpfile t;
	int r = bkf_tmp_open(&t, outdir, 0644);
	if (r < 0)
		bkf_errno(h, -r, dest);
	long long size = pump(h, idx, fd, &t, budget);
	if (size < 0) {
		bkf_tmp_abort(&t);
		bkf_errno(h, (int)-size, dest);
	}
	r = bkf_tmp_commit(&t, name, NULL);
	if (r < 0)
		bkf_errno(h, -r, dest);
	return size;
}

/* One presented file: streamed for its hash, copied into outputs when it
 * is elsewhere. */
static void present_one(struct hctx *h, size_t i, int outdir, uint64_t *used, struct bk_file_result *r)
{
	const struct bk_vpath *vp = &h->rq->paths[i];
	_cleanup_close_ int rootfd = bkf_open_root(vp->root, O_PATH);
	if (rootfd < 0)
		bkf_errno(h, -rootfd, bk_vroots[vp->root].path);
	_cleanup_close_ int fd = bkf_in_root(rootfd, vp->rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0)
		bkf_errno(h, -fd, vp->abs);
	struct stat st;
	if (fstat(fd, &st) < 0)
		bkf_errno(h, errno, vp->abs);
	if (S_ISDIR(st.st_mode))
		bkf_errno(h, EISDIR, vp->abs);
	if (!S_ISREG(st.st_mode))
		bkf_fail(h, 400, "not_a_regular_file", "%s is not a regular file", vp->abs);
	if ((uint64_t)st.st_size > PRESENT_BYTES_MAX - *used)
		bkf_fail(h, 413, "too_large", "the presented files are larger than %u bytes in total", PRESENT_BYTES_MAX);
	bkf_blocking(fd);
	uint32_t idx = (uint32_t)i;
	if (bkf_rec_write(h->chan, REC_HBEGIN, &idx, sizeof(idx), NULL, 0) < 0)
		_exit(4);
	char dest[BK_VPATH_MAX + 64];
	long long size;
	if (vp->root == BK_VROOT_OUTPUTS) {
		size = pump(h, idx, fd, NULL, PRESENT_BYTES_MAX - *used);
		if (size < 0)
			bkf_errno(h, (int)-size, vp->abs);
		snprintf(dest, sizeof(dest), "%s", vp->abs);
	} else {
		size = copy_to_outputs(h, idx, fd, vp, outdir, PRESENT_BYTES_MAX - *used, dest, sizeof(dest));
		struct bk_file_copy *c = &r->copies[r->ncopies++];
		c->source = bkf_strdup(h, vp->abs);
		c->destination = bkf_strdup(h, dest);
	}
	*used += (uint64_t)size;
	struct bk_file_presented *f = &r->files[r->nfiles++];
	f->path = bkf_strdup(h, dest);
	f->size = (uint64_t)size;
}

void bkf_op_present(struct hctx *h, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	_cleanup_close_ int outroot = bkf_open_root(BK_VROOT_OUTPUTS, O_PATH);
	if (outroot < 0)
		bkf_errno(h, -outroot, bk_vroots[BK_VROOT_OUTPUTS].path);
	_cleanup_close_ int outdir = bkf_in_root(outroot, ".", O_RDONLY | O_DIRECTORY, 0);
	if (outdir < 0)
		bkf_errno(h, -outdir, bk_vroots[BK_VROOT_OUTPUTS].path);
	r->files = bkf_calloc(h, q->npaths, sizeof(*r->files));
	r->copies = bkf_calloc(h, q->npaths, sizeof(*r->copies));
	uint64_t used = 0;
	for (size_t i = 0; i < q->npaths; i++)
		present_one(h, i, outdir, &used, r);
}
