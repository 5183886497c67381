/* SPDX-License-Identifier: Apache-2.0 */
/* File operations (API.md /file-create, /view, /str-replace, /ls, /glob,
 * /grep, /present-files) and the session wipe.
 *
 * Every operation runs in a short-lived helper process:
 *
 *   agent thread --posix_spawn(/proc/self/exe, argv[0] "boxkite-file-helper")
 *                  fd 3: the validated request (sealed memfd)
 *                  fd 4: the result pipe      fd 5: the sandbox's pidfd
 *   helper (a constructor, before main):
 *                  setns(pidfd, CLONE_NEWNS)   (the mount namespace only)
 *                  drop to the sandbox user: no groups, no caps,
 *                  no_new_privs, not dumpable, dies with its parent
 *                  open the allowed root (no symlink on the way),
 *                  resolve the rest with openat2(rootfd, rel,
 *                  RESOLVE_IN_ROOT | NO_MAGICLINKS | NO_XDEV)
 *                  do the work, write records on the pipe, _exit
 *   agent thread <- records (result JSON; file bytes to hash)
 *
 * The helper can therefore never do more than the sandbox user could do in
 * its own container, and a symlink (also one swapped in during the call)
 * never leads out of the root: RESOLVE_IN_ROOT makes "/" and ".." of every
 * link stop at the root, NO_MAGICLINKS refuses /proc/<pid>/root-style links,
 * NO_XDEV refuses mount crossings. The lexical check in vpath.c only gives
 * early, readable refusals (and is repeated in the helper).
 *
 * Why exec and not a bare fork(): a fork of the multi-threaded agent would
 * carry a copy of its whole heap (other pods' requests, secret_env values)
 * into a process that runs as the sandbox user, and inherit any lock another
 * thread held at that instant (libasan's allocator does deadlock there; so
 * could any library's). The exec'd helper starts from a clean image.
 * It uses no OpenSSL (file bytes are streamed to the agent, which hashes
 * them), no NSS, no locale, no dlopen: nothing the container's files could
 * configure. */
#include "agent/files/files.h"
#include "agent/isolate/privs.h"
#include "lib/log.h"
#include "agent/parse/text.h"
#include "lib/util.h"
#include "agent/parse/vpath.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#define HELPER_ARGV0 "boxkite-file-helper"
#define REQ_MAX (64u << 20) /* serialized request (content is at most BK_REQ_MAX) */
#define FD_REQ 3
#define FD_CHAN 4
#define FD_PIDFD 5

#ifndef F_SETPIPE_SZ
#define F_SETPIPE_SZ 1031
#endif

/* ---- limits ----------------------------------------------------------------------- */
#define HELPER_TIMEOUT_MS 10000          /* the agent kills the helper after this */
#define WIPE_TIMEOUT_MS 60000            /* ... or this, for the session wipe */
#define WORK_BUDGET_MS 8000              /* walks stop (truncated) after this */
#define VIEW_MAX (10u << 20)             /* larger files are unviewable */
#define BINARY_PROBE 8192                /* a NUL byte in here: binary */
#define EDIT_RESULT_MAX (64u << 20)      /* str_replace result */
#define RESULT_MAX (30u << 20)           /* JSON body from the helper (< BK_RESP_MAX) */
#define REC_MAX (128u * 1024u)           /* one record on the helper pipe */
#define LS_MAX 10000
#define GLOB_MATCH_MAX 10000
#define WALK_VISIT_MAX 100000
#define WALK_DEPTH_MAX 32
#define GREP_PATTERN_MAX 4096
#define GREP_MATCH_MAX 10000
#define GREP_MATCH_DEFAULT 500
#define GREP_TEXT_MAX 1000
#define GREP_BYTES_MAX (256u << 20)
#define PRESENT_MAX 100
#define PRESENT_BYTES_MAX (256u << 20)
#define WIPE_DEPTH_MAX 256
#define WIPE_OPS_MAX 2000000
#define SYMLINK_HOPS_MAX 16

enum fop { F_CREATE, F_VIEW, F_STR_REPLACE, F_LS, F_GLOB, F_GREP, F_PRESENT, F_WIPE };

static const char *const op_names[] = {
	[F_CREATE] = "file_create", [F_VIEW] = "view",	   [F_STR_REPLACE] = "str_replace", [F_LS] = "ls",
	[F_GLOB] = "glob",	    [F_GREP] = "grep",	   [F_PRESENT] = "present_files",   [F_WIPE] = "wipe",
};

/* The validated request: plain data, built from the JSON at the boundary. */
struct freq {
	enum fop op;
	struct bk_vpath vp;
	const char *content;
	size_t content_len;
	bool has_range;
	long long range_start, range_end; /* end -1: to the end */
	const char *old_str, *new_str;
	size_t old_len, new_len;
	bool replace_all;
	const char *pattern; /* glob: relative pattern; grep: regex */
	const char *glob;    /* grep: file filter or NULL */
	long max_matches;
	struct bk_vpath *paths; /* present_files */
	size_t npaths;
	/* who the helper becomes */
	uid_t uid;
	gid_t gid;
	int cap_last;
	pid_t parent; /* the agent, for the helper's parent-death check */
};

static void freq_free(struct freq *q) { free(q->paths); }

/* ---- the helper pipe ------------------------------------------------------------------ */

enum { REC_BODY = 1, REC_END = 2, REC_HBEGIN = 3, REC_HDATA = 4 };

struct rec_hdr {
	uint32_t type;
	uint32_t len;
};

bool bk_files_is_op(const char *op)
{
	for (int i = F_CREATE; i <= F_PRESENT; i++)
		if (streq(op, op_names[i]))
			return true;
	return false;
}

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

/* ======================================================================================
 * The helper (child side). Runs as the sandbox user in the container's mount
 * namespace; reports through h->chan and ends with _exit.
 * ====================================================================================== */

struct hctx {
	int chan;
	const struct freq *rq;
	uint64_t budget_end; /* monotonic ns */
};

static int write_all_v(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = writev(fd, iov, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		size_t left = (size_t)w;
		while (n > 0 && left >= iov->iov_len) {
			left -= iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + left;
			iov->iov_len -= left;
		}
	}
	return 0;
}

static int ch_write(int fd, uint32_t type, const void *p1, size_t n1, const void *p2, size_t n2)
{
	struct rec_hdr hd = { type, (uint32_t)(n1 + n2) };
	struct iovec iov[3] = { { &hd, sizeof(hd) }, { (void *)p1, n1 }, { (void *)p2, n2 } };
	return write_all_v(fd, iov, 3);
}

static _Noreturn void h_reply(struct hctx *h, int status, cJSON *body)
{
	char *txt = body ? cJSON_PrintUnformatted(body) : NULL;
	if (!txt) {
		status = 503;
		txt = strdup("{\"detail\":\"out of memory in the file helper\",\"code\":\"out_of_memory\"}");
		if (!txt)
			_exit(3);
	}
	size_t len = strlen(txt);
	if (len > RESULT_MAX) {
		free(txt);
		status = 422;
		if (asprintf(&txt, "{\"detail\":\"the response would be larger than %u bytes\",\"code\":\"unviewable\"}",
			     RESULT_MAX) < 0)
			_exit(3);
		len = strlen(txt);
	}
	for (size_t off = 0; off < len;) {
		size_t n = len - off < REC_MAX ? len - off : REC_MAX;
		if (ch_write(h->chan, REC_BODY, txt + off, n, NULL, 0) < 0)
			_exit(4);
		off += n;
	}
	int32_t st = status;
	if (ch_write(h->chan, REC_END, &st, sizeof(st), NULL, 0) < 0)
		_exit(4);
	_exit(0);
}

static _Noreturn _printf_(4, 5) void h_fail(struct hctx *h, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cJSON *b = bk_api_error_body(code, fmt, ap);
	va_end(ap);
	h_reply(h, status, b);
}

/* err is a positive errno; path the virtual path it concerns. */
static _Noreturn void h_errno(struct hctx *h, int err, const char *path)
{
	switch (err) {
	case ENOENT:
		h_fail(h, 404, "not_found", "%s: no such file or directory", path);
	case ENOTDIR:
		h_fail(h, 400, "not_a_directory", "%s: a component of the path is not a directory", path);
	case EISDIR:
		h_fail(h, 400, "is_directory", "%s is a directory", path);
	case EXDEV:
		h_fail(h, 403, "path_outside_roots", "%s resolves outside its allowed root", path);
	case ELOOP:
		h_fail(h, 403, "path_outside_roots",
		       "%s: a symbolic link on the way is refused (a /proc magic link, or too many levels)", path);
	case EACCES:
	case EPERM:
		h_fail(h, 403, "permission_denied", "%s: permission denied for the sandbox user", path);
	case EROFS:
		h_fail(h, 403, "read_only_root", "%s is on a read-only file system", path);
	case ENOSPC:
	case EDQUOT:
		h_fail(h, 507, "no_space", "%s: no space left on the device; nothing was changed", path);
	case ENAMETOOLONG:
		h_fail(h, 400, "name_too_long", "%s: a name is too long", path);
	case EFBIG:
		h_fail(h, 413, "too_large", "%s: the file is too large", path);
	case EAGAIN:
		h_fail(h, 503, "retry", "%s: the path changed during resolution; try again", path);
	case ENOMEM:
		h_fail(h, 503, "out_of_memory", "out of memory");
	default:
		h_fail(h, 500, "io_error", "%s: %s", path, strerror(err));
	}
}

static bool h_over_budget(const struct hctx *h) { return now_ns() > h->budget_end; }

static int openat2_(int dirfd, const char *path, int flags, mode_t mode, uint64_t resolve)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .mode = mode, .resolve = resolve };
	for (int tries = 0;; tries++) {
		long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		/* RESOLVE_IN_ROOT answers EAGAIN when a rename raced a ".." */
		if (errno != EAGAIN || tries == 8)
			return -errno;
	}
}

/* The root directory itself: no symlink anywhere on its path. */
static int open_root(enum bk_vroot r, int flags)
{
	return openat2_(AT_FDCWD, bk_vroots[r].path, flags | O_DIRECTORY, 0,
			RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

/* rel below rootfd; whatever symlinks say, resolution stays in the root. */
static int in_root(int rootfd, const char *rel, int flags, mode_t mode)
{
	return openat2_(rootfd, rel, flags, mode, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
}

/* One name in a directory, which must not be a symlink nor a mount. */
static int beneath(int dirfd, const char *name, int flags)
{
	return openat2_(dirfd, name, flags | O_NOFOLLOW, 0, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
}

static int read_all(int fd, size_t max, char **out, size_t *outlen)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			if (cap > max) {
				free(buf);
				return -EFBIG;
			}
			size_t nc = cap * 2 > max + 1 ? max + 1 : cap * 2;
			char *nb = realloc(buf, nc + 1);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap = nc;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			free(buf);
			return e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		free(buf);
		return -EFBIG;
	}
	buf[n] = '\0';
	*out = buf;
	*outlen = n;
	return 0;
}

static bool is_binary(const char *buf, size_t len)
{
	return memchr(buf, '\0', len < BINARY_PROBE ? len : BINARY_PROBE) != NULL;
}

static cJSON *sanitized_string(const char *s, size_t n)
{
	size_t l;
	char *c = bk_utf8_sanitize(s, n, &l);
	cJSON *j = cJSON_CreateString(c ? c : "");
	free(c);
	return j;
}

/* ---- directory listing -------------------------------------------------------------- */

struct dent {
	char *name;
	struct stat st;
	bool stat_ok;
};

static int dent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dent *)a)->name, ((const struct dent *)b)->name);
}

static void dents_free(struct dent *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(d[i].name);
	free(d);
}

/* Read up to max entries of the directory dfd (not consumed), sorted by
 * name, with lstat data. *more is set when entries were left out. */
static int read_dir(int dfd, size_t max, struct dent **out, size_t *nout, bool *more)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = -errno;
		close(fd);
		return e;
	}
	size_t n = 0, cap = 0;
	struct dent *v = NULL;
	*more = false;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (n == max) {
			*more = true;
			break;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct dent *nv = realloc(v, nc * sizeof(*v));
			if (!nv) {
				dents_free(v, n);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
			cap = nc;
		}
		v[n].name = strdup(de->d_name);
		if (!v[n].name) {
			dents_free(v, n);
			closedir(d);
			return -ENOMEM;
		}
		v[n].stat_ok = fstatat(dfd, de->d_name, &v[n].st, AT_SYMLINK_NOFOLLOW) == 0;
		n++;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), dent_cmp);
	*out = v;
	*nout = n;
	return 0;
}

static const char *type_name(const struct dent *d)
{
	if (!d->stat_ok)
		return "unknown";
	if (S_ISREG(d->st.st_mode))
		return "file";
	if (S_ISDIR(d->st.st_mode))
		return "directory";
	if (S_ISLNK(d->st.st_mode))
		return "symlink";
	return "other";
}

static cJSON *entries_json(int dfd, bool *truncated, int *err)
{
	struct dent *v = NULL;
	size_t n = 0;
	int r = read_dir(dfd, LS_MAX, &v, &n, truncated);
	if (r < 0) {
		*err = -r;
		return NULL;
	}
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddItemToObject(e, "name", sanitized_string(v[i].name, strlen(v[i].name)));
		cJSON_AddStringToObject(e, "type", type_name(&v[i]));
		cJSON_AddNumberToObject(e, "size", v[i].stat_ok ? (double)v[i].st.st_size : 0);
		cJSON_AddItemToArray(arr, e);
	}
	dents_free(v, n);
	return arr;
}

/* ---- writes ------------------------------------------------------------------------ */

/* Open (as O_RDONLY|O_DIRECTORY) the directory dir below rootfd, creating
 * missing components (mkdir -p). Every step is resolved from the root with
 * RESOLVE_IN_ROOT; mkdirat() only ever gets one name and never follows. */
static int mkdirs_in_root(int rootfd, const char *dir)
{
	if (streq(dir, "."))
		return in_root(rootfd, ".", O_RDONLY | O_DIRECTORY, 0);
	char prefix[BK_VPATH_MAX + 1];
	size_t len = strlen(dir);
	if (len >= sizeof(prefix))
		return -ENAMETOOLONG;
	_cleanup_close_ int parent = in_root(rootfd, ".", O_PATH | O_DIRECTORY, 0);
	if (parent < 0)
		return parent;
	size_t i = 0;
	while (i < len) {
		size_t s = i;
		while (i < len && dir[i] != '/')
			i++;
		memcpy(prefix, dir, i);
		prefix[i] = '\0';
		int fd = in_root(rootfd, prefix, O_PATH | O_DIRECTORY, 0);
		if (fd == -ENOENT) {
			char comp[BK_NAME_MAX + 1];
			size_t cl = i - s;
			if (cl > BK_NAME_MAX)
				return -ENAMETOOLONG;
			memcpy(comp, dir + s, cl);
			comp[cl] = '\0';
			if (mkdirat(parent, comp, 0755) < 0 && errno != EEXIST)
				return -errno;
			fd = in_root(rootfd, prefix, O_PATH | O_DIRECTORY, 0);
		}
		if (fd < 0)
			return fd;
		close(parent);
		parent = fd;
		while (i < len && dir[i] == '/')
			i++;
	}
	return in_root(rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
}

/* Where a write to rel lands: the directory (fd) and the name in it. A
 * final symlink is followed (within the root: its target is resolved from
 * the root again), so writing through a link updates its target like
 * open(2) would. With mkdirs, missing directories of rel are created. */
static int resolve_final(int rootfd, const char *rel, bool mkdirs, int *dirfd, char base[BK_NAME_MAX + 1])
{
	char cur[BK_VPATH_MAX + 1];
	if (strlen(rel) >= sizeof(cur))
		return -ENAMETOOLONG;
	strcpy(cur, rel);
	for (int hop = 0; hop < SYMLINK_HOPS_MAX; hop++) {
		char dir[BK_VPATH_MAX + 1];
		const char *b;
		if (bk_vpath_split(cur, dir, sizeof(dir), &b) < 0)
			return -ENAMETOOLONG;
		if (!b[0] || streq(b, ".") || streq(b, ".."))
			return -EISDIR;
		if (strlen(b) > BK_NAME_MAX)
			return -ENAMETOOLONG;
		int dfd = mkdirs && hop == 0 ? mkdirs_in_root(rootfd, dir) : in_root(rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
		if (dfd < 0)
			return dfd;
		struct stat st;
		if (fstatat(dfd, b, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode)) {
			strcpy(base, b);
			*dirfd = dfd;
			return 0;
		}
		char target[BK_VPATH_MAX + 1];
		ssize_t tl = readlinkat(dfd, b, target, sizeof(target) - 1);
		close(dfd);
		if (tl < 0)
			return -errno;
		if (tl == 0)
			return -ENOENT;
		target[tl] = '\0';
		char next[BK_VPATH_MAX + 1];
		int w;
		if (target[0] == '/') {
			const char *t = target;
			while (*t == '/')
				t++;
			w = snprintf(next, sizeof(next), "%s", t[0] ? t : ".");
		} else if (streq(dir, ".")) {
			w = snprintf(next, sizeof(next), "%s", target);
		} else {
			w = snprintf(next, sizeof(next), "%s/%s", dir, target);
		}
		if (w < 0 || (size_t)w >= sizeof(next))
			return -ENAMETOOLONG;
		/* a target ending in "/" names a directory */
		size_t nl = strlen(next);
		if (nl && next[nl - 1] == '/')
			return -EISDIR;
		strcpy(cur, next);
	}
	return -ELOOP;
}

struct tmpfile {
	int dirfd; /* borrowed */
	int fd;
	char name[64];
};

static int tmp_open(struct tmpfile *t, int dirfd, mode_t mode)
{
	t->dirfd = dirfd;
	t->fd = -1;
	for (int tries = 0; tries < 16; tries++) {
		uint64_t rnd;
		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			return -EIO;
		snprintf(t->name, sizeof(t->name), ".bk-tmp-%016llx", (unsigned long long)rnd);
		int fd = openat(dirfd, t->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd >= 0) {
			t->fd = fd;
			return 0;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

static void tmp_abort(struct tmpfile *t)
{
	if (t->fd >= 0) {
		close(t->fd);
		t->fd = -1;
		unlinkat(t->dirfd, t->name, 0);
	}
}

static int tmp_write(struct tmpfile *t, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(t->fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* fsync, then rename over base in the same directory: readers see the old
 * or the new content, never a mix; on failure the temp file is removed. */
static int tmp_commit(struct tmpfile *t, const char *base, const struct stat *old)
{
	int r = 0;
	if (old && S_ISREG(old->st_mode) && fchmod(t->fd, old->st_mode & 0777) < 0)
		r = -errno;
	if (r == 0 && fsync(t->fd) < 0)
		r = -errno;
	if (r == 0 && close(t->fd) < 0)
		r = -errno;
	else if (r < 0)
		close(t->fd);
	t->fd = -1;
	if (r == 0 && renameat(t->dirfd, t->name, t->dirfd, base) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(t->dirfd, t->name, 0);
		return r;
	}
	(void)fsync(t->dirfd);
	return 0;
}

static int atomic_write(int dirfd, const char *base, const char *data, size_t len, const struct stat *old)
{
	struct tmpfile t;
	int r = tmp_open(&t, dirfd, 0644);
	if (r < 0)
		return r;
	r = tmp_write(&t, data, len);
	if (r < 0) {
		tmp_abort(&t);
		return r;
	}
	return tmp_commit(&t, base, old);
}

/* The request's root (O_PATH), or the helper answers with the error. */
static int root_or_fail(struct hctx *h)
{
	int fd = open_root(h->rq->vp.root, O_PATH);
	if (fd < 0)
		h_errno(h, -fd, bk_vroots[h->rq->vp.root].path);
	return fd;
}

/* The directory holding the request's final component (created when
 * mkdirs), or the helper answers with the error. */
static void final_or_fail(struct hctx *h, int rootfd, bool mkdirs, int *dirfd, char base[BK_NAME_MAX + 1])
{
	int r = resolve_final(rootfd, h->rq->vp.rel, mkdirs, dirfd, base);
	if (r < 0)
		h_errno(h, -r, h->rq->vp.abs);
}

/* ---- operations ------------------------------------------------------------------------ */

static _Noreturn void op_create(struct hctx *h)
{
	const struct freq *q = h->rq;
	const char *path = q->vp.abs;
	_cleanup_close_ int rootfd = root_or_fail(h);
	_cleanup_close_ int dirfd = -1;
	char base[BK_NAME_MAX + 1];
	final_or_fail(h, rootfd, true, &dirfd, base);
	struct stat st;
	bool exists = fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (exists && S_ISDIR(st.st_mode))
		h_errno(h, EISDIR, path);
	if (exists && !S_ISREG(st.st_mode))
		h_fail(h, 400, "not_a_regular_file", "%s exists and is not a regular file", path);
	int r = atomic_write(dirfd, base, q->content, q->content_len, exists ? &st : NULL);
	if (r < 0)
		h_errno(h, -r, path);
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "path", path);
	cJSON_AddNumberToObject(b, "size", (double)q->content_len);
	cJSON_AddBoolToObject(b, "created", !exists);
	h_reply(h, 200, b);
}

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

static _Noreturn void op_view(struct hctx *h)
{
	const struct freq *q = h->rq;
	const char *path = q->vp.abs;
	_cleanup_close_ int rootfd = root_or_fail(h);
	/* O_NONBLOCK: a FIFO must not hang the helper */
	int fd = in_root(rootfd, q->vp.rel, O_RDONLY | O_NONBLOCK | O_NOCTTY | (q->vp.trailing_slash ? O_DIRECTORY : 0), 0);
	if (fd < 0)
		h_errno(h, -fd, path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		h_errno(h, errno, path);
	if (S_ISDIR(st.st_mode)) {
		bool trunc = false;
		int err = 0;
		cJSON *ents = entries_json(fd, &trunc, &err);
		if (!ents)
			h_errno(h, err, path);
		cJSON *b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "path", path);
		cJSON_AddStringToObject(b, "content", "");
		cJSON_AddNumberToObject(b, "lines", 0);
		cJSON_AddBoolToObject(b, "is_directory", true);
		cJSON_AddItemToObject(b, "entries", ents);
		cJSON_AddBoolToObject(b, "truncated", trunc);
		h_reply(h, 200, b);
	}
	if (!S_ISREG(st.st_mode))
		h_fail(h, 422, "unviewable", "%s is not a regular file", path);
	if ((uint64_t)st.st_size > VIEW_MAX)
		h_fail(h, 422, "unviewable", "%s is larger than %u bytes", path, VIEW_MAX);
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	char *buf;
	size_t len;
	int r = read_all(fd, VIEW_MAX, &buf, &len);
	if (r == -EFBIG)
		h_fail(h, 422, "unviewable", "%s is larger than %u bytes", path, VIEW_MAX);
	if (r < 0)
		h_errno(h, -r, path);
	if (is_binary(buf, len))
		h_fail(h, 422, "unviewable", "%s looks like a binary file (NUL bytes)", path);
	size_t total = count_lines(buf, len);
	size_t from = 0, to = len, nlines = total;
	if (q->has_range) {
		size_t start = (size_t)q->range_start;
		size_t end = q->range_end < 0 || (size_t)q->range_end > total ? total : (size_t)q->range_end;
		if (start > total && !(total == 0 && start == 1))
			h_fail(h, 400, "invalid_range", "view_range starts at line %zu but %s has %zu lines", start, path,
			       total);
		from = line_offset(buf, len, start);
		to = line_offset(buf, len, end + 1);
		nlines = end >= start ? end - start + 1 : 0;
	}
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "path", path);
	cJSON_AddItemToObject(b, "content", sanitized_string(buf + from, to - from));
	cJSON_AddNumberToObject(b, "lines", (double)nlines);
	cJSON_AddNumberToObject(b, "total_lines", (double)total);
	cJSON_AddNumberToObject(b, "size", (double)len);
	free(buf);
	h_reply(h, 200, b);
}

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

static _Noreturn void op_str_replace(struct hctx *h)
{
	const struct freq *q = h->rq;
	const char *path = q->vp.abs;
	_cleanup_close_ int rootfd = root_or_fail(h);
	_cleanup_close_ int dirfd = -1;
	char base[BK_NAME_MAX + 1];
	final_or_fail(h, rootfd, false, &dirfd, base);
	int fd = beneath(dirfd, base, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		h_errno(h, -fd, path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		h_errno(h, errno, path);
	if (S_ISDIR(st.st_mode))
		h_errno(h, EISDIR, path);
	if (!S_ISREG(st.st_mode))
		h_fail(h, 400, "not_a_regular_file", "%s is not a regular file", path);
	if ((uint64_t)st.st_size > VIEW_MAX)
		h_fail(h, 422, "unviewable", "%s is larger than %u bytes", path, VIEW_MAX);
	char *buf;
	size_t len;
	int r = read_all(fd, VIEW_MAX, &buf, &len);
	close(fd);
	if (r == -EFBIG)
		h_fail(h, 422, "unviewable", "%s is larger than %u bytes", path, VIEW_MAX);
	if (r < 0)
		h_errno(h, -r, path);
	if (is_binary(buf, len))
		h_fail(h, 422, "unviewable", "%s looks like a binary file (NUL bytes)", path);
	size_t n = count_occurrences(buf, len, q->old_str, q->old_len);
	if (n == 0)
		h_fail(h, 400, "old_str_not_found", "old_str does not occur in %s", path);
	if (n > 1 && !q->replace_all)
		h_fail(h, 409, "not_unique",
		       "old_str occurs %zu times in %s; make it unique or set replace_all", n, path);
	/* new length, without overflow */
	size_t newlen;
	if (q->new_len >= q->old_len) {
		size_t grow = q->new_len - q->old_len;
		if (grow && n > (EDIT_RESULT_MAX - len) / grow)
			h_fail(h, 413, "too_large", "the edited file would be larger than %u bytes", EDIT_RESULT_MAX);
		newlen = len + n * grow;
	} else {
		newlen = len - n * (q->old_len - q->new_len);
	}
	char *out = malloc(newlen + 1);
	if (!out)
		h_errno(h, ENOMEM, path);
	const char *p = buf, *end = buf + len;
	char *o = out;
	for (size_t k = 0; k < n; k++) {
		const char *m = memmem(p, (size_t)(end - p), q->old_str, q->old_len);
		memcpy(o, p, (size_t)(m - p));
		o += m - p;
		memcpy(o, q->new_str, q->new_len);
		o += q->new_len;
		p = m + q->old_len;
	}
	memcpy(o, p, (size_t)(end - p));
	free(buf);
	r = atomic_write(dirfd, base, out, newlen, &st);
	free(out);
	if (r < 0)
		h_errno(h, -r, path);
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "path", path);
	cJSON_AddBoolToObject(b, "replaced", true);
	cJSON_AddNumberToObject(b, "occurrences", (double)n);
	h_reply(h, 200, b);
}

static _Noreturn void op_ls(struct hctx *h)
{
	const struct freq *q = h->rq;
	const char *path = q->vp.abs;
	_cleanup_close_ int rootfd = root_or_fail(h);
	int fd = in_root(rootfd, q->vp.rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		h_errno(h, -fd, path);
	bool trunc = false;
	int err = 0;
	cJSON *ents = entries_json(fd, &trunc, &err);
	if (!ents)
		h_errno(h, err, path);
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "path", path);
	cJSON_AddItemToObject(b, "entries", ents);
	cJSON_AddBoolToObject(b, "truncated", trunc);
	h_reply(h, 200, b);
}

/* ---- walks (glob, grep) ------------------------------------------------------------------ */

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
	if (read_dir(dfd, WALK_VISIT_MAX, &v, &n, &more) < 0)
		return;
	if (more)
		w->truncated = true;
	for (size_t i = 0; i < n && !w->stop; i++) {
		if (++w->visited > WALK_VISIT_MAX || h_over_budget(w->h)) {
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
			int cfd = beneath(dfd, v[i].name, O_RDONLY | O_DIRECTORY);
			if (cfd >= 0) {
				walk_dir(w, cfd, child, depth + 1);
				close(cfd);
			}
		}
	}
	dents_free(v, n);
}

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

static _Noreturn void op_glob(struct hctx *h)
{
	const struct freq *q = h->rq;
	const char *path = q->vp.abs;
	_cleanup_close_ int rootfd = root_or_fail(h);
	int fd = in_root(rootfd, q->vp.rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		h_errno(h, -fd, path);
	struct glob_ud g = { .pattern = q->pattern, .base = path, .matches = calloc(GLOB_MATCH_MAX, sizeof(char *)) };
	if (!g.matches)
		h_errno(h, ENOMEM, path);
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
	cJSON *b = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(b, "matches");
	for (size_t i = 0; i < g.n; i++)
		cJSON_AddItemToArray(arr, sanitized_string(g.matches[i], strlen(g.matches[i])));
	cJSON_AddBoolToObject(b, "truncated", w.truncated);
	h_reply(h, 200, b);
}

struct grep_ud {
	regex_t re;
	const char *glob;
	const char *base; /* virtual path of the start */
	cJSON *matches;
	long n, max;
	size_t bytes;
	bool truncated;
};

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
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	if (read_all(fd, VIEW_MAX, &buf, &len) < 0)
		return false;
	g->bytes += len;
	if (is_binary(buf, len)) {
		free(buf);
		return false;
	}
	size_t line = 0;
	bool stop = false;
	for (char *p = buf, *end = buf + len; p < end && !stop; line++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *le = nl ? nl : end;
		*le = '\0';
		if ((line & 4095) == 4095 && h_over_budget(h)) {
			g->truncated = stop = true;
			break;
		}
		if (regexec(&g->re, p, 0, NULL, 0) == 0) {
			if (g->n == g->max) {
				g->truncated = stop = true;
				break;
			}
			cJSON *m = cJSON_CreateObject();
			cJSON_AddItemToObject(m, "path", sanitized_string(vpath, strlen(vpath)));
			cJSON_AddNumberToObject(m, "line", (double)(line + 1));
			size_t tl = (size_t)(le - p);
			cJSON_AddItemToObject(m, "text", sanitized_string(p, tl > GREP_TEXT_MAX ? GREP_TEXT_MAX : tl));
			cJSON_AddItemToArray(g->matches, m);
			g->n++;
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
	int fd = beneath(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return;
	char full[BK_VPATH_MAX + 64];
	if (bk_vpath_join(g->base, rel, full, sizeof(full)) == 0 && grep_file(w->h, g, fd, full))
		w->stop = true;
	close(fd);
}

static _Noreturn void op_grep(struct hctx *h)
{
	const struct freq *q = h->rq;
	const char *path = q->vp.abs;
	struct grep_ud g = { .glob = q->glob, .base = path, .max = q->max_matches };
	/* compiled here, in the helper: a pathological pattern costs the
	 * helper's time and memory (killed at the deadline), not the agent's */
	int rc = regcomp(&g.re, q->pattern, REG_EXTENDED | REG_NOSUB);
	if (rc != 0) {
		char msg[256];
		regerror(rc, &g.re, msg, sizeof(msg));
		cJSON *b = cJSON_CreateObject();
		cJSON_AddItemToObject(b, "matches", cJSON_CreateArray());
		cJSON_AddBoolToObject(b, "truncated", false);
		char e[300];
		snprintf(e, sizeof(e), "invalid regular expression: %s", msg);
		cJSON_AddStringToObject(b, "error", e);
		h_reply(h, 200, b);
	}
	_cleanup_close_ int rootfd = root_or_fail(h);
	int fd = in_root(rootfd, q->vp.rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0)
		h_errno(h, -fd, path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		h_errno(h, errno, path);
	g.matches = cJSON_CreateArray();
	struct walk w = { .h = h, .visit = grep_visit, .ud = &g, .maxdepth = WALK_DEPTH_MAX };
	if (S_ISDIR(st.st_mode))
		walk_dir(&w, fd, "", 0);
	else if (S_ISREG(st.st_mode))
		grep_file(h, &g, fd, path);
	else
		h_fail(h, 400, "not_a_regular_file", "%s is neither a file nor a directory", path);
	cJSON *b = cJSON_CreateObject();
	cJSON_AddItemToObject(b, "matches", g.matches);
	cJSON_AddBoolToObject(b, "truncated", g.truncated || w.truncated);
	h_reply(h, 200, b);
}

/* ---- present_files ------------------------------------------------------------------------ */

/* Stream the rest of fd to the agent (for the hash) and, when t is set,
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
			int r = tmp_write(t, buf, (size_t)n);
			if (r < 0)
				return r;
		}
		if (ch_write(h->chan, REC_HDATA, &idx, sizeof(idx), buf, (size_t)n) < 0)
			_exit(4);
	}
}

static _Noreturn void op_present(struct hctx *h)
{
	const struct freq *q = h->rq;
	_cleanup_close_ int outroot = open_root(BK_VROOT_OUTPUTS, O_PATH);
	if (outroot < 0)
		h_errno(h, -outroot, bk_vroots[BK_VROOT_OUTPUTS].path);
	_cleanup_close_ int outdir = in_root(outroot, ".", O_RDONLY | O_DIRECTORY, 0);
	if (outdir < 0)
		h_errno(h, -outdir, bk_vroots[BK_VROOT_OUTPUTS].path);
	cJSON *b = cJSON_CreateObject();
	cJSON *files = cJSON_AddArrayToObject(b, "files");
	cJSON *copies = cJSON_AddArrayToObject(b, "copy_operations");
	uint64_t used = 0;
	for (size_t i = 0; i < q->npaths; i++) {
		const struct bk_vpath *vp = &q->paths[i];
		_cleanup_close_ int rootfd = open_root(vp->root, O_PATH);
		if (rootfd < 0)
			h_errno(h, -rootfd, bk_vroots[vp->root].path);
		_cleanup_close_ int fd = in_root(rootfd, vp->rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
		if (fd < 0)
			h_errno(h, -fd, vp->abs);
		struct stat st;
		if (fstat(fd, &st) < 0)
			h_errno(h, errno, vp->abs);
		if (S_ISDIR(st.st_mode))
			h_errno(h, EISDIR, vp->abs);
		if (!S_ISREG(st.st_mode))
			h_fail(h, 400, "not_a_regular_file", "%s is not a regular file", vp->abs);
		if ((uint64_t)st.st_size > PRESENT_BYTES_MAX - used)
			h_fail(h, 413, "too_large", "the presented files are larger than %u bytes in total",
			       PRESENT_BYTES_MAX);
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0)
			fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
		uint32_t idx = (uint32_t)i;
		if (ch_write(h->chan, REC_HBEGIN, &idx, sizeof(idx), NULL, 0) < 0)
			_exit(4);
		char dest[BK_VPATH_MAX + 64];
		long long size;
		if (vp->root == BK_VROOT_OUTPUTS) {
			size = pump(h, idx, fd, NULL, PRESENT_BYTES_MAX - used);
			if (size < 0)
				h_errno(h, (int)-size, vp->abs);
			snprintf(dest, sizeof(dest), "%s", vp->abs);
		} else {
			const char *slash = strrchr(vp->rel, '/');
			const char *name = slash ? slash + 1 : vp->rel;
			snprintf(dest, sizeof(dest), "%s/%s", bk_vroots[BK_VROOT_OUTPUTS].path, name);
			struct stat old;
			bool exists = fstatat(outdir, name, &old, AT_SYMLINK_NOFOLLOW) == 0;
			if (exists && S_ISDIR(old.st_mode))
				h_errno(h, EISDIR, dest);
			struct tmpfile t;
			int r = tmp_open(&t, outdir, 0644);
			if (r < 0)
				h_errno(h, -r, dest);
			size = pump(h, idx, fd, &t, PRESENT_BYTES_MAX - used);
			if (size < 0) {
				tmp_abort(&t);
				h_errno(h, (int)-size, dest);
			}
			r = tmp_commit(&t, name, NULL);
			if (r < 0)
				h_errno(h, -r, dest);
			cJSON *c = cJSON_CreateObject();
			cJSON_AddStringToObject(c, "source", vp->abs);
			cJSON_AddStringToObject(c, "destination", dest);
			cJSON_AddItemToArray(copies, c);
		}
		used += (uint64_t)size;
		cJSON *f = cJSON_CreateObject();
		cJSON_AddStringToObject(f, "path", dest);
		cJSON_AddNumberToObject(f, "size", (double)size);
		cJSON_AddStringToObject(f, "mime", bk_mime_type(dest));
		cJSON_AddItemToArray(files, f);
	}
	h_reply(h, 200, b);
}

/* ---- session wipe -------------------------------------------------------------------------- */

struct wipe {
	uid_t uid;
	uint64_t removed, kept, ops;
};

static void wipe_dir(struct wipe *w, int dfd, int depth);

static void wipe_entry(struct wipe *w, int dfd, const char *name, const struct stat *st, int depth)
{
	w->ops++;
	if (S_ISDIR(st->st_mode)) {
		if (depth >= WIPE_DEPTH_MAX) {
			w->kept++;
			return;
		}
		/* a directory the user made unreadable or unwritable: its
		 * owner (us) may give the permission back; fchmodat2 with
		 * AT_SYMLINK_NOFOLLOW never acts through a link */
		if (st->st_uid == w->uid && (st->st_mode & 0700) != 0700)
			syscall(SYS_fchmodat2, dfd, name, 0700, AT_SYMLINK_NOFOLLOW);
		int cfd = beneath(dfd, name, O_RDONLY | O_DIRECTORY);
		if (cfd >= 0) {
			wipe_dir(w, cfd, depth + 1);
			close(cfd);
		}
		if (unlinkat(dfd, name, AT_REMOVEDIR) == 0)
			w->removed++;
		else
			w->kept++;
		return;
	}
	if (unlinkat(dfd, name, 0) == 0)
		w->removed++;
	else
		w->kept++;
}

static void wipe_dir(struct wipe *w, int dfd, int depth)
{
	/* delete in batches until the directory is empty or nothing moves */
	for (int pass = 0; pass < 64 && w->ops < WIPE_OPS_MAX; pass++) {
		struct dent *v = NULL;
		size_t n = 0;
		bool more = false;
		if (read_dir(dfd, 10000, &v, &n, &more) < 0 || n == 0) {
			dents_free(v, n);
			return;
		}
		uint64_t before = w->removed;
		for (size_t i = 0; i < n && w->ops < WIPE_OPS_MAX; i++)
			if (v[i].stat_ok)
				wipe_entry(w, dfd, v[i].name, &v[i].st, depth);
		dents_free(v, n);
		if (!more || w->removed == before)
			return;
	}
}

static _Noreturn void op_wipe(struct hctx *h)
{
	static const enum bk_vroot roots[] = { BK_VROOT_WORKSPACE, BK_VROOT_TMP, BK_VROOT_OUTPUTS };
	struct wipe w = { .uid = h->rq->uid };
	cJSON *b = cJSON_CreateObject();
	cJSON *failed = cJSON_AddArrayToObject(b, "unavailable_roots");
	for (size_t i = 0; i < ARRAY_SIZE(roots); i++) {
		int fd = open_root(roots[i], O_RDONLY);
		if (fd < 0) {
			cJSON_AddItemToArray(failed, cJSON_CreateString(bk_vroots[roots[i]].path));
			continue;
		}
		wipe_dir(&w, fd, 0);
		close(fd);
	}
	cJSON_AddNumberToObject(b, "removed", (double)w.removed);
	cJSON_AddNumberToObject(b, "kept", (double)w.kept);
	h_reply(h, 200, b);
}

/* ---- helper setup -------------------------------------------------------------------------- */

static void close_all_but(int a, int b)
{
	int lo = a < b ? a : b, hi = a < b ? b : a;
	if (lo > 3)
		syscall(SYS_close_range, 3, lo - 1, 0);
	if (hi > lo + 1)
		syscall(SYS_close_range, lo + 1, hi - 1, 0);
	syscall(SYS_close_range, hi + 1, ~0U, 0);
}

static _Noreturn void helper_main(const struct freq *q, int chan, int pidfd)
{
	struct hctx h = { .chan = chan, .rq = q, .budget_end = now_ns() + (uint64_t)WORK_BUDGET_MS * 1000000ull };
	/* nothing of the agent's (sockets, BPF objects, other helpers' pipes)
	 * stays in this process */
	close_all_but(chan, pidfd);
	if (setns(pidfd, CLONE_NEWNS) < 0)
		h_fail(&h, 503, "isolation_failed", "cannot enter the sandbox container's mount namespace: %s",
		       strerror(errno));
	close(pidfd);
	if (chdir("/") < 0)
		h_fail(&h, 503, "isolation_failed", "cannot change to the container's root: %s", strerror(errno));
	umask(022);
	struct rlimit core = { 0, 0 };
	setrlimit(RLIMIT_CORE, &core);
	int r = bk_privs_drop(q->uid, q->gid, q->cap_last);
	if (r < 0)
		h_fail(&h, 503, "isolation_failed", "cannot drop privileges to the sandbox user: %s", strerror(-r));
	/* after the uid change (which clears it): die with the agent thread */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != q->parent)
		_exit(5);
	switch (q->op) {
	case F_CREATE: op_create(&h);
	case F_VIEW: op_view(&h);
	case F_STR_REPLACE: op_str_replace(&h);
	case F_LS: op_ls(&h);
	case F_GLOB: op_glob(&h);
	case F_GREP: op_grep(&h);
	case F_PRESENT: op_present(&h);
	case F_WIPE: op_wipe(&h);
	}
	h_fail(&h, 400, "unknown_op", "unknown file operation");
}

/* ---- the request across exec: our own JSON in a sealed memfd ----------------------------- */

static cJSON *vpath_json(const struct bk_vpath *vp)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "abs", vp->abs);
	cJSON_AddBoolToObject(o, "dir", vp->trailing_slash);
	return o;
}

/* The helper parses the path again: the lexical rule holds on both sides. */
static bool vpath_from(const cJSON *o, struct bk_vpath *vp)
{
	const cJSON *abs = cJSON_GetObjectItemCaseSensitive(o, "abs");
	if (!cJSON_IsString(abs) || bk_vpath_parse(abs->valuestring, strlen(abs->valuestring), vp) < 0)
		return false;
	vp->trailing_slash = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "dir"));
	return true;
}

static int req_to_memfd(const struct freq *q)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "op", q->op);
	cJSON_AddItemToObject(o, "vp", vpath_json(&q->vp));
	if (q->content)
		cJSON_AddStringToObject(o, "content", q->content);
	if (q->has_range) {
		cJSON *r = cJSON_AddArrayToObject(o, "range");
		cJSON_AddItemToArray(r, cJSON_CreateNumber((double)q->range_start));
		cJSON_AddItemToArray(r, cJSON_CreateNumber((double)q->range_end));
	}
	if (q->old_str)
		cJSON_AddStringToObject(o, "old", q->old_str);
	if (q->new_str)
		cJSON_AddStringToObject(o, "new", q->new_str);
	cJSON_AddBoolToObject(o, "all", q->replace_all);
	if (q->pattern)
		cJSON_AddStringToObject(o, "pattern", q->pattern);
	if (q->glob)
		cJSON_AddStringToObject(o, "glob", q->glob);
	cJSON_AddNumberToObject(o, "max", (double)q->max_matches);
	cJSON *paths = cJSON_AddArrayToObject(o, "paths");
	for (size_t i = 0; i < q->npaths; i++)
		cJSON_AddItemToArray(paths, vpath_json(&q->paths[i]));
	cJSON_AddNumberToObject(o, "uid", q->uid);
	cJSON_AddNumberToObject(o, "gid", q->gid);
	cJSON_AddNumberToObject(o, "cap_last", q->cap_last);
	cJSON_AddNumberToObject(o, "parent", q->parent);
	_cleanup_free_ char *txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!txt)
		return -ENOMEM;
	size_t len = strlen(txt);
	if (len > REQ_MAX)
		return -E2BIG;
	_cleanup_close_ int fd = memfd_create("bk-file-request", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, txt + off, len - off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (size_t)w;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
	    lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	return steal_fd(&fd);
}

static bool num_in(const cJSON *v, double lo, double hi)
{
	return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi;
}

/* Rebuild the request in the helper; its strings point into *keep. */
static int req_from_fd(int fd, struct freq *q, cJSON **keep)
{
	char *txt;
	size_t len;
	int r = read_all(fd, REQ_MAX, &txt, &len);
	if (r < 0)
		return r;
	cJSON *o = cJSON_ParseWithLength(txt, len);
	free(txt);
	if (!cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return -EPROTO;
	}
	*keep = o;
	memset(q, 0, sizeof(*q));
#define F(k) cJSON_GetObjectItemCaseSensitive(o, k)
	if (!num_in(F("op"), F_CREATE, F_WIPE) || !num_in(F("uid"), 1, 4294967294.0) ||
	    !num_in(F("gid"), 0, 4294967294.0) || !num_in(F("cap_last"), 0, 63) || !num_in(F("parent"), 1, 4194304) ||
	    !num_in(F("max"), 0, GREP_MATCH_MAX))
		return -EPROTO;
	q->op = (enum fop)F("op")->valueint;
	q->uid = (uid_t)F("uid")->valuedouble;
	q->gid = (gid_t)F("gid")->valuedouble;
	q->cap_last = F("cap_last")->valueint;
	q->parent = (pid_t)F("parent")->valueint;
	q->max_matches = F("max")->valueint;
	if (q->op != F_WIPE && q->op != F_PRESENT && !vpath_from(F("vp"), &q->vp))
		return -EPROTO;
	const cJSON *v;
	if ((v = F("content")) && cJSON_IsString(v)) {
		q->content = v->valuestring;
		q->content_len = strlen(v->valuestring);
	}
	if ((v = F("range"))) {
		if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2 || !num_in(cJSON_GetArrayItem(v, 0), 1, 1LL << 40) ||
		    !num_in(cJSON_GetArrayItem(v, 1), -1, 1LL << 40))
			return -EPROTO;
		q->has_range = true;
		q->range_start = (long long)cJSON_GetArrayItem(v, 0)->valuedouble;
		q->range_end = (long long)cJSON_GetArrayItem(v, 1)->valuedouble;
	}
	if ((v = F("old")) && cJSON_IsString(v)) {
		q->old_str = v->valuestring;
		q->old_len = strlen(v->valuestring);
	}
	if ((v = F("new")) && cJSON_IsString(v)) {
		q->new_str = v->valuestring;
		q->new_len = strlen(v->valuestring);
	}
	q->replace_all = cJSON_IsTrue(F("all"));
	if ((v = F("pattern")) && cJSON_IsString(v))
		q->pattern = v->valuestring;
	if ((v = F("glob")) && cJSON_IsString(v))
		q->glob = v->valuestring;
	const cJSON *paths = F("paths");
	int np = cJSON_GetArraySize(paths);
	if (np < 0 || np > PRESENT_MAX)
		return -EPROTO;
	if (np) {
		q->paths = calloc((size_t)np, sizeof(*q->paths));
		if (!q->paths)
			return -ENOMEM;
		cJSON_ArrayForEach(v, paths)
		{
			if (!vpath_from(v, &q->paths[q->npaths]) || bk_vpath_is_root(&q->paths[q->npaths]))
				return -EPROTO;
			q->npaths++;
		}
	}
#undef F
	/* what each operation cannot do without */
	switch (q->op) {
	case F_CREATE:
		if (!q->content || !q->vp.writable)
			return -EPROTO;
		break;
	case F_STR_REPLACE:
		if (!q->old_str || !q->old_len || !q->new_str || !q->vp.writable)
			return -EPROTO;
		break;
	case F_GLOB:
		if (!q->pattern || bk_glob_check(q->pattern) < 0)
			return -EPROTO;
		break;
	case F_GREP:
		if (!q->pattern || q->max_matches < 1 || (q->glob && bk_glob_check(q->glob) < 0))
			return -EPROTO;
		break;
	case F_PRESENT:
		if (!q->npaths)
			return -EPROTO;
		break;
	default:
		break;
	}
	return 0;
}

/* The helper's entry: runs before main() when the agent binary is exec'd
 * as HELPER_ARGV0 (glibc passes argc/argv to ELF constructors). Anyone may
 * start the binary so; without CAP_SYS_ADMIN over the pidfd on fd 5 the
 * helper only reports that it could not enter the container. */
__attribute__((constructor)) static void file_helper_entry(int argc, char **argv, char **envp)
{
	(void)envp;
	if (argc != 1 || !argv || !argv[0] || !streq(argv[0], HELPER_ARGV0))
		return;
	syscall(SYS_close_range, FD_PIDFD + 1, ~0U, 0);
	struct freq *q = calloc(1, sizeof(*q));
	cJSON *keep = NULL;
	struct hctx h = { .chan = FD_CHAN, .rq = q };
	if (!q)
		_exit(3);
	int r = req_from_fd(FD_REQ, q, &keep);
	close(FD_REQ);
	if (r < 0)
		h_fail(&h, 500, "helper_failed", "the file helper got a malformed request: %s", strerror(-r));
	helper_main(q, FD_CHAN, FD_PIDFD);
}

/* ======================================================================================
 * The agent side: spawn, collect, time out.
 * ====================================================================================== */

struct hashes {
	EVP_MD_CTX *ctx[PRESENT_MAX];
};

static void hashes_free(struct hashes *hs)
{
	for (size_t i = 0; i < PRESENT_MAX; i++)
		EVP_MD_CTX_free(hs->ctx[i]);
}

struct hres {
	int status;
	cJSON *body;
	char err[256];
};

static int handle_rec(uint32_t type, const char *p, size_t n, char **body, size_t *blen, size_t *bcap,
		      struct hashes *hs, struct hres *res, bool *done)
{
	switch (type) {
	case REC_BODY:
		if (*blen + n > RESULT_MAX)
			return -EMSGSIZE;
		if (*blen + n + 1 > *bcap) {
			size_t nc = *bcap ? *bcap : 65536;
			while (nc < *blen + n + 1)
				nc *= 2;
			char *nb = realloc(*body, nc);
			if (!nb)
				return -ENOMEM;
			*body = nb;
			*bcap = nc;
		}
		memcpy(*body + *blen, p, n);
		*blen += n;
		(*body)[*blen] = '\0';
		return 0;
	case REC_END:
		if (n != sizeof(int32_t))
			return -EPROTO;
		int32_t st;
		memcpy(&st, p, sizeof(st));
		res->status = st;
		*done = true;
		return 0;
	case REC_HBEGIN:
	case REC_HDATA: {
		uint32_t idx;
		if (!hs || n < sizeof(idx))
			return -EPROTO;
		memcpy(&idx, p, sizeof(idx));
		if (idx >= PRESENT_MAX)
			return -EPROTO;
		if (type == REC_HBEGIN) {
			if (hs->ctx[idx])
				return -EPROTO;
			hs->ctx[idx] = EVP_MD_CTX_new();
			if (!hs->ctx[idx] || !EVP_DigestInit_ex(hs->ctx[idx], EVP_sha256(), NULL))
				return -ENOMEM;
			return 0;
		}
		if (!hs->ctx[idx] || !EVP_DigestUpdate(hs->ctx[idx], p + sizeof(idx), n - sizeof(idx)))
			return -EPROTO;
		return 0;
	}
	default:
		return -EPROTO;
	}
}

/* Run q in a helper for pod. Returns 0 with res->status/body, or -errno with
 * res->err (spawn failure, -ETIMEDOUT, a helper that died or misbehaved). */
static int run_helper(const struct bk_pod *pod, const struct freq *q, struct hashes *hs, struct hres *res)
{
	memset(res, 0, sizeof(*res));
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		int pe = errno;
		snprintf(res->err, sizeof(res->err), "cannot create a pipe: %s", strerror(pe));
		return -pe;
	}
	_cleanup_close_ int rd = p[0];
	(void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	_cleanup_close_ int reqfd = req_to_memfd(q);
	if (reqfd < 0) {
		int e = -reqfd;
		close(p[1]);
		snprintf(res->err, sizeof(res->err), "cannot pass the request to the file helper: %s", strerror(e));
		return -e;
	}
	/* move the three descriptors out of the way of fds 3..5 first, so
	 * the dup2 actions cannot clobber one another */
	_cleanup_close_ int a_req = fcntl(reqfd, F_DUPFD_CLOEXEC, 100);
	_cleanup_close_ int a_chan = fcntl(p[1], F_DUPFD_CLOEXEC, 100);
	_cleanup_close_ int a_pid = fcntl(pod->sandbox_pidfd, F_DUPFD_CLOEXEC, 100);
	close(p[1]);
	pid_t pid = -1;
	int e = 0;
	if (a_req < 0 || a_chan < 0 || a_pid < 0) {
		e = errno;
	} else {
		posix_spawn_file_actions_t fa;
		posix_spawnattr_t at;
		sigset_t none, dfl;
		sigemptyset(&none);
		sigemptyset(&dfl);
		sigaddset(&dfl, SIGPIPE);
		posix_spawn_file_actions_init(&fa);
		posix_spawnattr_init(&at);
		posix_spawn_file_actions_adddup2(&fa, a_req, FD_REQ);
		posix_spawn_file_actions_adddup2(&fa, a_chan, FD_CHAN);
		posix_spawn_file_actions_adddup2(&fa, a_pid, FD_PIDFD);
		posix_spawn_file_actions_addclosefrom_np(&fa, FD_PIDFD + 1);
		posix_spawnattr_setsigmask(&at, &none);
		posix_spawnattr_setsigdefault(&at, &dfl);
		posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
		char *argv[] = { HELPER_ARGV0, NULL };
		char *envp[] = { NULL };
		/* /proc/self/exe: the running agent's own image, even when the
		 * file on disk was replaced by an upgrade */
		e = posix_spawn(&pid, "/proc/self/exe", &fa, &at, argv, envp);
		posix_spawn_file_actions_destroy(&fa);
		posix_spawnattr_destroy(&at);
	}
	closep(&a_chan);
	a_chan = -1;
	if (e) {
		snprintf(res->err, sizeof(res->err), "cannot start the file helper: %s", strerror(e));
		return -e;
	}
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		e = errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		snprintf(res->err, sizeof(res->err), "cannot open a pidfd for the file helper: %s", strerror(e));
		return -e;
	}
	int timeout_ms = q->op == F_WIPE ? WIPE_TIMEOUT_MS : HELPER_TIMEOUT_MS;
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	_cleanup_free_ char *in = malloc(2 * REC_MAX + 64);
	_cleanup_free_ char *body = NULL;
	size_t inlen = 0, blen = 0, bcap = 0;
	bool done = false, eof = false, exited = false;
	int r = in ? 0 : -ENOMEM;
	while (r == 0 && !done && !eof) {
		uint64_t now = now_ns();
		if (now >= deadline) {
			r = -ETIMEDOUT;
			break;
		}
		struct pollfd pf = { .fd = rd, .events = POLLIN };
		int pr = poll(&pf, 1, (int)((deadline - now) / 1000000) + 1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0) {
			r = -errno;
			break;
		}
		if (pr == 0)
			continue;
		ssize_t n = read(rd, in + inlen, 2 * REC_MAX + 64 - inlen);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (n == 0) {
			/* the helper closed its end without an end record */
			eof = true;
			break;
		}
		inlen += (size_t)n;
		size_t off = 0;
		while (r == 0 && !done && inlen - off >= sizeof(struct rec_hdr)) {
			struct rec_hdr hd;
			memcpy(&hd, in + off, sizeof(hd));
			if (hd.len > REC_MAX) {
				r = -EPROTO;
				break;
			}
			if (inlen - off < sizeof(hd) + hd.len)
				break;
			r = handle_rec(hd.type, in + off + sizeof(hd), hd.len, &body, &blen, &bcap, hs, res, &done);
			off += sizeof(hd) + hd.len;
		}
		memmove(in, in + off, inlen - off);
		inlen -= off;
	}
	/* reap: the helper exits right after its end record */
	siginfo_t si = { 0 };
	if (r == 0 && done) {
		struct pollfd pf = { .fd = pidfd, .events = POLLIN };
		uint64_t now = now_ns();
		int left = now < deadline ? (int)((deadline - now) / 1000000) + 1 : 0;
		if (poll(&pf, 1, left) > 0 && waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) == 0)
			exited = true;
	}
	if (!exited) {
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		while (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0 && errno == EINTR)
			;
	}
	if (r == -ETIMEDOUT) {
		snprintf(res->err, sizeof(res->err), "the file operation did not finish within %d s",
			 timeout_ms / 1000);
		return r;
	}
	if (r < 0) {
		snprintf(res->err, sizeof(res->err), "the file helper misbehaved: %s", strerror(-r));
		return r;
	}
	if (!done) {
		if (si.si_code == CLD_EXITED)
			snprintf(res->err, sizeof(res->err), "the file helper exited with status %d", si.si_status);
		else
			snprintf(res->err, sizeof(res->err), "the file helper died (signal %d)", si.si_status);
		return -ECHILD;
	}
	res->body = cJSON_ParseWithLength(body ? body : "", blen);
	if (!cJSON_IsObject(res->body) || res->status < 200 || res->status > 599) {
		cJSON_Delete(res->body);
		res->body = NULL;
		snprintf(res->err, sizeof(res->err), "the file helper sent a malformed result");
		return -EPROTO;
	}
	return 0;
}

/* ---- request parsing (the boundary: cJSON stays here) ---------------------------------------- */

static char *path_error(int r, const char *field)
{
	switch (r) {
	case -EILSEQ:
		return bk_api_error(400, "bad_request", "\"%s\" contains a NUL byte", field);
	case -ENAMETOOLONG:
		return bk_api_error(400, "name_too_long", "\"%s\" is longer than %d bytes or has a name over %d bytes",
				    field, BK_VPATH_MAX, BK_NAME_MAX);
	case -EPERM:
		return bk_api_error(403, "path_outside_roots",
				    "\"%s\" is outside the allowed roots (/workspace, /mnt/user-data/outputs, "
				    "/mnt/user-data/uploads, /mnt/skills, /tmp)",
				    field);
	default:
		return bk_api_error(400, "bad_request", "\"%s\" must be a non-empty path", field);
	}
}

/* A path field: required, or the default (workspace) when absent. */
static char *get_path(const cJSON *args, const char *field, bool required, struct bk_vpath *vp)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, field);
	if (!v || cJSON_IsNull(v)) {
		if (required)
			return bk_api_error(400, "bad_request", "\"%s\" is required", field);
		bk_vpath_parse("/workspace", 10, vp);
		return NULL;
	}
	if (!cJSON_IsString(v))
		return bk_api_error(400, "bad_request", "\"%s\" must be a string", field);
	int r = bk_vpath_parse(v->valuestring, strlen(v->valuestring), vp);
	return r < 0 ? path_error(r, field) : NULL;
}

static const char *get_str(const cJSON *args, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, field);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool absent(const cJSON *args, const char *field)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, field);
	return !v || cJSON_IsNull(v);
}

static bool get_int(const cJSON *v, long long lo, long long hi, long long *out)
{
	if (!cJSON_IsNumber(v) || v->valuedouble < (double)lo || v->valuedouble > (double)hi ||
	    v->valuedouble != (double)(long long)v->valuedouble)
		return false;
	*out = (long long)v->valuedouble;
	return true;
}

static char *writable(const struct bk_vpath *vp)
{
	if (!vp->writable)
		return bk_api_error(403, "read_only_root", "%s is read-only", bk_vroots[vp->root].path);
	return NULL;
}

static char *parse_req(enum fop op, const cJSON *args, struct freq *q)
{
	char *e;
	q->op = op;
	switch (op) {
	case F_CREATE: {
		if ((e = get_path(args, "path", true, &q->vp)))
			return e;
		if ((e = writable(&q->vp)))
			return e;
		if (bk_vpath_is_root(&q->vp) || q->vp.trailing_slash)
			return bk_api_error(400, "is_directory", "%s is a directory", q->vp.abs);
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(args, "content");
		if (!cJSON_IsString(c))
			return bk_api_error(400, "bad_request", "\"content\" must be a string");
		q->content = c->valuestring;
		q->content_len = strlen(c->valuestring);
		return NULL;
	}
	case F_VIEW: {
		if ((e = get_path(args, "path", true, &q->vp)))
			return e;
		const cJSON *vr = cJSON_GetObjectItemCaseSensitive(args, "view_range");
		if (vr && !cJSON_IsNull(vr)) {
			long long s, en;
			if (!cJSON_IsArray(vr) || cJSON_GetArraySize(vr) != 2 ||
			    !get_int(cJSON_GetArrayItem(vr, 0), 1, 1LL << 40, &s) ||
			    !get_int(cJSON_GetArrayItem(vr, 1), -1, 1LL << 40, &en) || en == 0 || (en != -1 && en < s))
				return bk_api_error(400, "invalid_range",
						    "\"view_range\" must be [start, end]: 1-based, inclusive, end >= start "
						    "or -1 for the end of the file");
			q->has_range = true;
			q->range_start = s;
			q->range_end = en;
		}
		return NULL;
	}
	case F_STR_REPLACE: {
		if ((e = get_path(args, "path", true, &q->vp)))
			return e;
		if ((e = writable(&q->vp)))
			return e;
		if (bk_vpath_is_root(&q->vp))
			return bk_api_error(400, "is_directory", "%s is a directory", q->vp.abs);
		q->old_str = get_str(args, "old_str");
		if (!q->old_str || !q->old_str[0])
			return bk_api_error(400, "bad_request", "\"old_str\" must be a non-empty string");
		q->new_str = get_str(args, "new_str");
		if (!q->new_str) {
			if (!absent(args, "new_str"))
				return bk_api_error(400, "bad_request", "\"new_str\" must be a string");
			q->new_str = "";
		}
		q->old_len = strlen(q->old_str);
		q->new_len = strlen(q->new_str);
		const cJSON *ra = cJSON_GetObjectItemCaseSensitive(args, "replace_all");
		if (ra && !cJSON_IsNull(ra) && !cJSON_IsBool(ra))
			return bk_api_error(400, "bad_request", "\"replace_all\" must be a boolean");
		q->replace_all = cJSON_IsTrue(ra);
		return NULL;
	}
	case F_LS:
		return get_path(args, "path", false, &q->vp);
	case F_GLOB: {
		const char *pat = get_str(args, "pattern");
		if (!pat || !pat[0])
			return bk_api_error(400, "bad_request", "\"pattern\" must be a non-empty string");
		if (pat[0] == '/') {
			/* "/workspace/src/x*.c": the literal prefix is the base */
			char base[BK_GLOB_MAX + 1];
			const char *rest = bk_glob_split_abs(pat, base, sizeof(base));
			if (!rest)
				return bk_api_error(400, "bad_request", "\"pattern\" is too long");
			int r = bk_vpath_parse(base, strlen(base), &q->vp);
			if (r < 0)
				return path_error(r, "pattern");
			pat = rest;
		} else if ((e = get_path(args, "path", false, &q->vp))) {
			return e;
		}
		int r = bk_glob_check(pat);
		if (r == -EPERM)
			return bk_api_error(400, "bad_request", "\"pattern\" may not contain \"..\"");
		if (r < 0)
			return bk_api_error(400, "bad_request", "\"pattern\" must be a glob pattern of at most %d bytes",
					    BK_GLOB_MAX);
		q->pattern = pat;
		return NULL;
	}
	case F_GREP: {
		q->pattern = get_str(args, "pattern");
		if (!q->pattern || !q->pattern[0] || strlen(q->pattern) > GREP_PATTERN_MAX)
			return bk_api_error(400, "bad_request", "\"pattern\" must be a non-empty string of at most %d bytes",
					    GREP_PATTERN_MAX);
		if ((e = get_path(args, "path", false, &q->vp)))
			return e;
		q->glob = get_str(args, "glob");
		if (!q->glob && !absent(args, "glob"))
			return bk_api_error(400, "bad_request", "\"glob\" must be a string");
		if (q->glob && bk_glob_check(q->glob) < 0)
			return bk_api_error(400, "bad_request", "\"glob\" must be a relative glob pattern of at most %d bytes, without \"..\"",
					    BK_GLOB_MAX);
		q->max_matches = GREP_MATCH_DEFAULT;
		const cJSON *mm = cJSON_GetObjectItemCaseSensitive(args, "max_matches");
		if (mm && !cJSON_IsNull(mm)) {
			long long v;
			if (!get_int(mm, 1, GREP_MATCH_MAX, &v))
				return bk_api_error(400, "bad_request", "\"max_matches\" must be an integer from 1 to %d",
						    GREP_MATCH_MAX);
			q->max_matches = (long)v;
		}
		return NULL;
	}
	case F_PRESENT: {
		const cJSON *fp = cJSON_GetObjectItemCaseSensitive(args, "filepaths");
		if (!cJSON_IsArray(fp) || cJSON_GetArraySize(fp) < 1 || cJSON_GetArraySize(fp) > PRESENT_MAX)
			return bk_api_error(400, "bad_request", "\"filepaths\" must be an array of 1 to %d paths", PRESENT_MAX);
		q->paths = calloc((size_t)cJSON_GetArraySize(fp), sizeof(*q->paths));
		if (!q->paths)
			return bk_api_error(503, "out_of_memory", "out of memory");
		const cJSON *it;
		cJSON_ArrayForEach(it, fp)
		{
			if (!cJSON_IsString(it))
				return bk_api_error(400, "bad_request", "\"filepaths\" must hold strings");
			struct bk_vpath *vp = &q->paths[q->npaths];
			int r = bk_vpath_parse(it->valuestring, strlen(it->valuestring), vp);
			if (r < 0)
				return path_error(r, "filepaths");
			if (bk_vpath_is_root(vp))
				return bk_api_error(400, "is_directory", "%s is a directory", vp->abs);
			q->npaths++;
		}
		return NULL;
	}
	case F_WIPE:
		return NULL;
	}
	return bk_api_error(404, "unknown_op", "unknown operation");
}

static void audit(const struct bk_pod *pod, enum fop op, const struct freq *q, int status, uint64_t t0)
{
	cJSON *f = cJSON_CreateObject();
	cJSON_AddStringToObject(f, "op", op_names[op]);
	cJSON_AddStringToObject(f, "pod", pod->pod_name);
	cJSON_AddStringToObject(f, "namespace", pod->pod_namespace);
	cJSON_AddStringToObject(f, "pod_uid", pod->pod_uid);
	/* paths only, never contents or patterns */
	if (op != F_PRESENT && op != F_WIPE && q->vp.abs[0])
		cJSON_AddStringToObject(f, "path", q->vp.abs);
	cJSON_AddNumberToObject(f, "status", status);
	cJSON_AddNumberToObject(f, "duration_ms", (double)(now_ns() - t0) / 1e6);
	bk_log_obj(status < 500 ? "info" : "warn", "file_op", f);
}

static char *run_op(struct bk_agent *a, const struct bk_pod *pod, enum fop op, const cJSON *args, cJSON **body_out,
		    int *status_out)
{
	uint64_t t0 = now_ns();
	struct freq *q = calloc(1, sizeof(*q));
	if (!q)
		return bk_api_error(503, "out_of_memory", "out of memory");
	char *out = parse_req(op, args, q);
	int status = 0;
	if (!out && pod->uid == 0)
		out = bk_api_error(503, "isolation_failed",
				   "the sandbox container runs as root; boxkite only acts as a non-root sandbox user");
	if (!out && pod->sandbox_pidfd < 0)
		out = bk_api_error(503, "sandbox_unavailable", "the sandbox container is not available");
	if (!out) {
		q->uid = pod->uid;
		q->gid = pod->gid;
		q->cap_last = a->engine.cap_last > 0 ? a->engine.cap_last : 63;
		q->parent = getpid();
		struct hashes hs = { 0 };
		struct hres res;
		int r = run_helper(pod, q, op == F_PRESENT ? &hs : NULL, &res);
		if (r == -ETIMEDOUT) {
			out = bk_api_error(504, "timeout", "%s", res.err);
		} else if (r < 0) {
			log_errorf("file_helper", "%s for pod %s/%s: %s", op_names[op], pod->pod_namespace, pod->pod_name,
				  res.err);
			out = bk_api_error(500, "helper_failed", "%s", res.err);
		} else {
			status = res.status;
			if (op == F_PRESENT && status == 200) {
				/* the helper streamed each file; the agent hashed it */
				cJSON *files = cJSON_GetObjectItemCaseSensitive(res.body, "files");
				int i = 0;
				const cJSON *f;
				cJSON_ArrayForEach(f, files)
				{
					unsigned char md[EVP_MAX_MD_SIZE];
					unsigned int ml = 0;
					char hex[2 * EVP_MAX_MD_SIZE + 1] = "";
					if (i < PRESENT_MAX && hs.ctx[i] && EVP_DigestFinal_ex(hs.ctx[i], md, &ml))
						for (unsigned int k = 0; k < ml; k++)
							snprintf(hex + 2 * k, 3, "%02x", md[k]);
					cJSON_AddStringToObject((cJSON *)f, "sha256", hex);
					i++;
				}
			}
			if (body_out && status == 200) {
				*body_out = res.body;
				res.body = NULL;
			} else {
				out = bk_api_respond(status, res.body);
				res.body = NULL;
			}
			cJSON_Delete(res.body);
		}
		hashes_free(&hs);
	}
	if (status_out)
		*status_out = status;
	int logged = status;
	if (out && sscanf(out, "{\"status\":%d", &logged) != 1)
		logged = 500;
	audit(pod, op, q, logged, t0);
	freq_free(q);
	free(q);
	return out;
}

char *bk_files_op(struct bk_agent *a, const struct bk_pod *pod, const char *op, const cJSON *args)
{
	for (int i = F_CREATE; i <= F_PRESENT; i++)
		if (streq(op, op_names[i]))
			return run_op(a, pod, (enum fop)i, args, NULL, NULL);
	return bk_api_error(404, "unknown_op", "unknown operation");
}

int bk_files_wipe(struct bk_agent *a, const struct bk_pod *pod, uint64_t *removed, uint64_t *kept, char *err,
		  size_t errlen)
{
	cJSON *body = NULL;
	int status = 0;
	cJSON *empty = cJSON_CreateObject();
	char *out = run_op(a, pod, F_WIPE, empty, &body, &status);
	cJSON_Delete(empty);
	if (out) {
		/* the error response says why */
		cJSON *o = cJSON_Parse(out);
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "body"), "detail");
		snprintf(err, errlen, "%s", cJSON_IsString(d) ? d->valuestring : "the wipe failed");
		cJSON_Delete(o);
		free(out);
		cJSON_Delete(body);
		return -EIO;
	}
	const cJSON *rm = cJSON_GetObjectItemCaseSensitive(body, "removed");
	const cJSON *kp = cJSON_GetObjectItemCaseSensitive(body, "kept");
	const cJSON *un = cJSON_GetObjectItemCaseSensitive(body, "unavailable_roots");
	*removed = cJSON_IsNumber(rm) ? (uint64_t)rm->valuedouble : 0;
	*kept = cJSON_IsNumber(kp) ? (uint64_t)kp->valuedouble : 0;
	int r = 0;
	if (cJSON_GetArraySize(un) > 0) {
		snprintf(err, errlen, "some session roots could not be opened for the wipe");
		r = -ENOENT;
	}
	cJSON_Delete(body);
	return r;
}
