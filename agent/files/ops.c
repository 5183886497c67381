/* SPDX-License-Identifier: Apache-2.0 */
/* The file operations, helper side: each runs as the sandbox user in
 * the container's mount namespace (helper.c), resolves its paths with the
 * primitives of fs.c and either fills the result or refuses (bkf_fail,
 * bkf_errno: the helper answers and exits). */
#include "agent/files/internal.h"
#include "agent/parse/rxbound.h"
#include "agent/parse/text.h"

#include <fcntl.h>

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
		if (v[i].stat_ok) {
			r->entries[i].mtime_sec = (int64_t)v[i].st.st_mtim.tv_sec;
			r->entries[i].mtime_nsec = (uint32_t)v[i].st.st_mtim.tv_nsec;
		}
	}
	r->nentries = n;
	bkf_dents_free(v, n);
}

/* The request's path as the reference names it in its sentences. */
#define QP(h) ((h)->rq->vp.abs)

/* The whole regular file fd (opened O_NONBLOCK, at most max bytes) as
 * text, or the helper refuses it (422, the reference's sentences). */
static void text_or_fail(struct hctx *h, int fd, const char *path, size_t max, const char *route, char **buf,
			 size_t *len)
{
	bkf_blocking(fd);
	int r = bkf_read_all(fd, max, buf, len);
	if (r == -EFBIG)
		bkf_fail(h, 422, "unviewable", "'%s' is over the %zu byte limit for %s. Use the exec tool to inspect part of it.",
			 path, max, route);
	if (r < 0)
		bkf_errno(h, -r, path);
	if (!bk_utf8_valid(*buf, *len))
		bkf_fail(h, 422, "unviewable",
			 "'%s' appears to be a binary file and cannot be viewed as text. Use the exec tool with an "
			 "appropriate Python library to read it (e.g. pypdf for PDFs, openpyxl for Excel, python-docx "
			 "for Word docs).",
			 path);
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

/* Byte offset where line k (0-based, '\n'-separated) starts; n past the end. */
static size_t line_offset(const char *s, size_t n, size_t k)
{
	size_t off = 0;
	for (size_t line = 0; line < k && off <= n; line++) {
		const char *nl = off < n ? memchr(s + off, '\n', n - off) : NULL;
		if (!nl)
			return n + 1;
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
	if (fd == -ENOENT || fd == -ENOTDIR)
		bkf_fail(h, 404, "not_found", "File not found: %s", path);
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
		bkf_fail(h, 422, "unviewable", "'%s' is not a regular file", path);
	if ((uint64_t)st.st_size > VIEW_MAX)
		bkf_fail(h, 422, "unviewable",
			 "'%s' is %llu bytes, over the %u byte limit for /view. Use the exec tool (e.g. head/tail/sed, "
			 "or a streaming reader) to inspect part of it instead of viewing the whole file.",
			 path, (unsigned long long)st.st_size, VIEW_MAX);
	_cleanup_free_ char *buf = NULL;
	size_t len;
	text_or_fail(h, fd, path, VIEW_MAX, "/view", &buf, &len);
	r->size = len;
	len = bkf_universal_newlines(buf, len);
	/* split('\n'): one line more than there are newlines */
	size_t total = 1;
	for (const char *p = buf; (p = memchr(p, '\n', len - (size_t)(p - buf))); p++)
		total++;
	size_t from = 0, to = len;
	if (q->has_range) {
		/* lines[max(0, start - 1) : min(total, end)], Python slice rules */
		long long a = q->range_start - 1 < 0 ? 0 : q->range_start - 1;
		long long b = q->range_end < (long long)total ? q->range_end : (long long)total;
		if (b < 0)
			b = b + (long long)total < 0 ? 0 : b + (long long)total;
		if (a > (long long)total)
			a = (long long)total;
		if (b <= a) {
			from = to = 0;
		} else {
			from = line_offset(buf, len, (size_t)a);
			size_t e = line_offset(buf, len, (size_t)b); /* the start of the first line not shown */
			to = e > len ? len : e - 1;                  /* ... without the '\n' before it */
		}
	}
	size_t chars, cut = bk_utf8_chars_prefix(buf + from, to - from, BK_FILE_VIEW_CHARS + 1, &chars);
	static const char mark[] = "\n... (truncated)";
	if (chars > BK_FILE_VIEW_CHARS) {
		cut = bk_utf8_chars_prefix(buf + from, to - from, BK_FILE_VIEW_CHARS, NULL);
		r->content = bkf_calloc(h, cut + sizeof(mark), 1);
		memcpy(r->content, buf + from, cut);
		memcpy(r->content + cut, mark, sizeof(mark));
		r->content_len = cut + sizeof(mark) - 1;
	} else {
		r->content = bkf_calloc(h, to - from + 1, 1);
		memcpy(r->content, buf + from, to - from);
		r->content_len = to - from;
	}
	(void)cut;
	r->lines = total;
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

/* The file opened as fd for path (a negative fd: the open's error): its
 * stat, or the op fails — not found 404; a directory 400 "is_directory"
 * (dir_400, /read-image's wording) or EISDIR's own answer; anything but a
 * regular file 400. */
static void regular_or_fail(struct hctx *h, int fd, const char *path, bool dir_400, struct stat *st)
{
	if (fd == -ENOENT || fd == -ENOTDIR)
		bkf_fail(h, 404, "not_found", "File not found: %s", path);
	if (fd < 0)
		bkf_errno(h, -fd, path);
	if (fstat(fd, st) < 0)
		bkf_errno(h, errno, path);
	if (S_ISDIR(st->st_mode)) {
		if (dir_400)
			bkf_fail(h, 400, "is_directory", "Path is a directory: %s", path);
		bkf_errno(h, EISDIR, path);
	}
	if (!S_ISREG(st->st_mode))
		bkf_fail(h, 400, "not_a_regular_file", "%s is not a regular file", path);
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
	struct stat st;
	regular_or_fail(h, fd, path, false, &st);
	if ((uint64_t)st.st_size > BK_FILE_EDIT_MAX)
		bkf_fail(h, 422, "unviewable",
			 "'%s' is %llu bytes, over the %u byte limit for /str-replace. Use the exec tool (e.g. sed) to "
			 "edit part of it instead.",
			 path, (unsigned long long)st.st_size, BK_FILE_EDIT_MAX);
	_cleanup_free_ char *buf = NULL;
	size_t len;
	text_or_fail(h, fd, path, BK_FILE_EDIT_MAX, "/str-replace", &buf, &len);
	close(steal_fd(&fd));
	size_t n = count_occurrences(buf, len, q->old_str, q->old_len);
	if (n == 0) {
		/* the reference: 200, replaced false, nothing written */
		r->occurrences = 0;
		return;
	}
	if (n > 1 && !q->replace_all)
		bkf_fail(h, 400, "not_unique", "old_str appears %zu times. Must appear exactly once.", n);
	_cleanup_free_ char *out = NULL;
	size_t newlen;
	replace_or_fail(h, buf, len, n, &out, &newlen);
	int e = bkf_atomic_write(dirfd, base, out, newlen, &st);
	if (e < 0)
		bkf_errno(h, -e, path);
	r->occurrences = n;
}

/* ---- ls, glob, grep -------------------------------------------------------------------------- */

/* An absent path (or a root that is not there) is an empty answer for the
 * searches, as in the reference: true when err is such an absence. */
static bool absent(int err) { return err == ENOENT || err == ENOTDIR; }

/* The root of the request, or -1 when it is absent (an empty answer). */
static int root_or_absent(struct hctx *h)
{
	int fd = bkf_open_root(h->rq->vp.root, O_PATH);
	if (fd < 0 && !absent(-fd))
		bkf_errno(h, -fd, bk_vroots[h->rq->vp.root].path);
	return fd < 0 ? -1 : fd;
}

void bkf_op_ls(struct hctx *h, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	_cleanup_close_ int rootfd = root_or_absent(h);
	if (rootfd < 0)
		return;
	_cleanup_close_ int fd = bkf_in_root(rootfd, q->vp.rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 && absent(-fd))
		return;
	if (fd < 0)
		bkf_errno(h, -fd, q->vp.abs);
	entries_or_fail(h, fd, q->vp.abs, r);
}

void bkf_op_glob(struct hctx *h, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	_cleanup_close_ int rootfd = root_or_absent(h);
	if (rootfd < 0)
		return;
	_cleanup_close_ int fd = bkf_in_root(rootfd, q->vp.rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0 && absent(-fd))
		return;
	if (fd < 0)
		bkf_errno(h, -fd, q->vp.abs);
	bkf_glob_walk(h, fd, r);
}

void bkf_op_grep(struct hctx *h, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	const char *path = q->vp.abs;
	/* bounded again here (the API edge checked it): what would compile
	 * into a huge program never compiles */
	char why[256];
	if (bk_rx_check(q->pattern, why, sizeof(why)) < 0)
		bkf_fail(h, 422, "pattern_too_complex", "%s", why);
	/* Python's re syntax, in PCRE2's words */
	char pat[BK_RX_LEN_MAX * 3 + 16];
	if (bk_rx_translate(q->pattern, pat, sizeof(pat)) < 0)
		bkf_fail(h, 422, "pattern_too_complex", "the pattern is longer than %d bytes", BK_RX_LEN_MAX);
	/* compiled here, in the helper: whatever a pattern within the bounds
	 * still costs is the helper's time and memory (its own cgroup under
	 * the pod, RLIMIT_AS, RLIMIT_CPU), never the agent's */
	int ec;
	PCRE2_SIZE eo;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
	if (!re) {
		if (ec == PCRE2_ERROR_NOMEMORY || ec == PCRE2_ERROR_HEAP_FAILED)
			bkf_out_of_memory(h);
		PCRE2_UCHAR msg[256];
		pcre2_get_error_message(ec, msg, sizeof(msg));
		char e[400];
		snprintf(e, sizeof(e), "Invalid regex pattern: %s at position %zu", (const char *)msg, (size_t)eo);
		r->grep_error = bkf_sanitized(h, e, strlen(e));
		return;
	}
	_cleanup_close_ int rootfd = root_or_absent(h);
	if (rootfd < 0)
		return;
	_cleanup_close_ int fd = bkf_in_root(rootfd, q->vp.rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0 && absent(-fd))
		return;
	if (fd < 0)
		bkf_errno(h, -fd, path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		bkf_errno(h, errno, path);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return; /* nothing to read: no matches */
	bkf_grep_walk(h, re, fd, S_ISDIR(st.st_mode), r);
	pcre2_code_free(re);
}

/* ---- present_files ------------------------------------------------------------------------- */

/* Stream the rest of fd to the agent (which hashes it) and, when t is set,
 * into the temp file; *text: whether its first 8 KiB are UTF-8 text
 * (Python's sniff in the reference's _detect_content_type). Returns bytes
 * or -errno. */
static long long pump(struct hctx *h, uint32_t idx, int fd, struct tmpfile *t, uint64_t budget, bool *text)
{
	static char buf[REC_MAX - 8];
	long long total = 0;
	*text = true;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return total;
		if (total < 8192) {
			/* the sample is the first 8192 bytes: the rest of
			 * them may come in the next read */
			size_t k = (size_t)n < 8192 - (size_t)total ? (size_t)n : 8192 - (size_t)total;
			if (total == 0 && !bk_utf8_valid(buf, k))
				*text = false;
			else if (total > 0 && memchr(buf, '\0', k))
				*text = false;
		}
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
				 uint64_t budget, char *dest, size_t destlen, bool *text)
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
	long long size = pump(h, idx, fd, &t, budget, text);
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
 * is elsewhere. As the reference, a path that is not there, a directory
 * or anything but a regular file is skipped. */
static void present_one(struct hctx *h, size_t i, int outdir, uint64_t *used, struct bk_file_result *r)
{
	const struct bk_vpath *vp = &h->rq->paths[i];
	_cleanup_close_ int rootfd = bkf_open_root(vp->root, O_PATH);
	if (rootfd < 0 && absent(-rootfd))
		return;
	if (rootfd < 0)
		bkf_errno(h, -rootfd, bk_vroots[vp->root].path);
	_cleanup_close_ int fd = bkf_in_root(rootfd, vp->rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0 && absent(-fd))
		return;
	if (fd < 0)
		bkf_errno(h, -fd, vp->abs);
	struct stat st;
	if (fstat(fd, &st) < 0)
		bkf_errno(h, errno, vp->abs);
	if (!S_ISREG(st.st_mode))
		return;
	if ((uint64_t)st.st_size > PRESENT_BYTES_MAX - *used)
		bkf_fail(h, 413, "too_large", "the presented files are larger than %u bytes in total", PRESENT_BYTES_MAX);
	bkf_blocking(fd);
	/* the agent hashes the bytes of the idx-th file of the result */
	uint32_t idx = (uint32_t)r->nfiles;
	bool text = true;
	if (bkf_rec_write(h->chan, REC_HBEGIN, &idx, sizeof(idx), NULL, 0) < 0)
		_exit(4);
	char dest[BK_VPATH_MAX + 64];
	long long size;
	if (vp->root == BK_VROOT_OUTPUTS) {
		size = pump(h, idx, fd, NULL, PRESENT_BYTES_MAX - *used, &text);
		if (size < 0)
			bkf_errno(h, (int)-size, vp->abs);
		snprintf(dest, sizeof(dest), "%s", vp->abs);
	} else {
		size = copy_to_outputs(h, idx, fd, vp, outdir, PRESENT_BYTES_MAX - *used, dest, sizeof(dest), &text);
		struct bk_file_copy *c = &r->copies[r->ncopies++];
		c->source = bkf_strdup(h, vp->abs);
		c->destination = bkf_strdup(h, dest);
	}
	*used += (uint64_t)size;
	struct bk_file_presented *f = &r->files[r->nfiles++];
	f->path = bkf_strdup(h, dest);
	f->size = (uint64_t)size;
	f->text = text;
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

/* ---- read_image ---------------------------------------------------------------------------- */

static const char *image_magic(const unsigned char *b, size_t n)
{
	if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0)
		return "image/png";
	if (n >= 3 && memcmp(b, "\xff\xd8\xff", 3) == 0)
		return "image/jpeg";
	if (n >= 6 && (memcmp(b, "GIF87a", 6) == 0 || memcmp(b, "GIF89a", 6) == 0))
		return "image/gif";
	if (n >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WEBP", 4) == 0)
		return "image/webp";
	return NULL;
}

void bkf_op_read_image(struct hctx *h, struct bk_file_result *r)
{
	const struct bk_file_req *q = h->rq;
	const char *path = q->vp.abs;
	_cleanup_close_ int rootfd = root_or_fail(h);
	_cleanup_close_ int fd = bkf_in_root(rootfd, q->vp.rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	struct stat st;
	regular_or_fail(h, fd, path, true, &st);
	if ((uint64_t)st.st_size > BK_FILE_IMAGE_MAX)
		bkf_fail(h, 400, "too_large", "Image too large: %llu bytes (max %u bytes)", (unsigned long long)st.st_size,
			 BK_FILE_IMAGE_MAX);
	bkf_blocking(fd);
	_cleanup_free_ char *buf = NULL;
	size_t len;
	int e = bkf_read_all(fd, BK_FILE_IMAGE_MAX, &buf, &len);
	if (e == -EFBIG)
		bkf_fail(h, 400, "too_large", "Image too large: more than %u bytes", BK_FILE_IMAGE_MAX);
	if (e < 0)
		bkf_errno(h, -e, path);
	if (len == 0)
		bkf_fail(h, 400, "empty_image", "Image is empty: %s", path);
	const char *mime = bk_mime_type(path);
	if (strncmp(mime, "image/", 6) != 0) {
		const char *m = image_magic((const unsigned char *)buf, len);
		if (!m)
			bkf_fail(h, 400, "not_an_image", "File is not an image: %s", mime);
		mime = m;
	}
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t on = 4 * ((len + 2) / 3);
	char *o = r->content = bkf_calloc(h, on + 1, 1);
	const unsigned char *in = (const unsigned char *)buf;
	for (size_t k = 0; k < len; k += 3) {
		uint32_t v = (uint32_t)in[k] << 16 | (k + 1 < len ? (uint32_t)in[k + 1] << 8 : 0) |
			     (k + 2 < len ? in[k + 2] : 0);
		*o++ = b64[v >> 18 & 63];
		*o++ = b64[v >> 12 & 63];
		*o++ = k + 1 < len ? b64[v >> 6 & 63] : '=';
		*o++ = k + 2 < len ? b64[v & 63] : '=';
	}
	r->content_len = on;
	r->size = len;
	r->mime = bkf_strdup(h, mime);
}
