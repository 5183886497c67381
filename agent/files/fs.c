/* SPDX-License-Identifier: Apache-2.0 */
/* Filesystem primitives of the file helper (files.h: the confinement).
 * Every path below a root is resolved by openat2() from a descriptor of
 * the root, so no symlink (also one swapped in during the call) leads out
 * of it; single names are opened with RESOLVE_BENEATH and no symlinks.
 * Runs in the helper only, as the sandbox user. */
#include "agent/files/internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/syscall.h>

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
int bkf_open_root(enum bk_vroot r, int flags)
{
	return openat2_(AT_FDCWD, bk_vroots[r].path, flags | O_DIRECTORY, 0,
			RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

int bkf_open_mount_root(const char *path, int flags)
{
	return openat2_(AT_FDCWD, path, flags | O_NOFOLLOW, 0, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
}

/* rel below rootfd; whatever symlinks say, resolution stays in the root. */
int bkf_in_root(int rootfd, const char *rel, int flags, mode_t mode)
{
	return openat2_(rootfd, rel, flags, mode, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
}

/* One name in a directory, which must not be a symlink nor a mount. */
int bkf_beneath(int dirfd, const char *name, int flags)
{
	return openat2_(dirfd, name, flags | O_NOFOLLOW, 0, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
}

int bkf_read_all(int fd, size_t max, char **out, size_t *outlen)
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

bool bkf_is_binary(const char *buf, size_t len)
{
	return memchr(buf, '\0', len < BINARY_PROBE ? len : BINARY_PROBE) != NULL;
}

static int dent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dent *)a)->name, ((const struct dent *)b)->name);
}

void bkf_dents_free(struct dent *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(d[i].name);
	free(d);
}

/* Read up to max entries of the directory dfd (not consumed), sorted by
 * name, with lstat data. *more is set when entries were left out. */
int bkf_read_dir(int dfd, size_t max, struct dent **out, size_t *nout, bool *more)
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
				bkf_dents_free(v, n);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
			cap = nc;
		}
		v[n].name = strdup(de->d_name);
		if (!v[n].name) {
			bkf_dents_free(v, n);
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

void bkf_blocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

enum bk_file_type bkf_dent_type(const struct dent *d)
{
	if (!d->stat_ok)
		return BK_FILE_T_UNKNOWN;
	if (S_ISREG(d->st.st_mode))
		return BK_FILE_T_FILE;
	if (S_ISDIR(d->st.st_mode))
		return BK_FILE_T_DIRECTORY;
	if (S_ISLNK(d->st.st_mode))
		return BK_FILE_T_SYMLINK;
	return BK_FILE_T_OTHER;
}

/* Open (as O_RDONLY|O_DIRECTORY) the directory dir below rootfd, creating
 * missing components (mkdir -p). Every step is resolved from the root with
 * RESOLVE_IN_ROOT; mkdirat() only ever gets one name and never follows. */
static int mkdirs_in_root(int rootfd, const char *dir)
{
	if (streq(dir, "."))
		return bkf_in_root(rootfd, ".", O_RDONLY | O_DIRECTORY, 0);
	char prefix[BK_VPATH_MAX + 1];
	size_t len = strlen(dir);
	if (len >= sizeof(prefix))
		return -ENAMETOOLONG;
	_cleanup_close_ int parent = bkf_in_root(rootfd, ".", O_PATH | O_DIRECTORY, 0);
	if (parent < 0)
		return parent;
	size_t i = 0;
	while (i < len) {
		size_t s = i;
		while (i < len && dir[i] != '/')
			i++;
		memcpy(prefix, dir, i);
		prefix[i] = '\0';
		int fd = bkf_in_root(rootfd, prefix, O_PATH | O_DIRECTORY, 0);
		if (fd == -ENOENT) {
			char comp[BK_NAME_MAX + 1];
			size_t cl = i - s;
			if (cl > BK_NAME_MAX)
				return -ENAMETOOLONG;
			memcpy(comp, dir + s, cl);
			comp[cl] = '\0';
			if (mkdirat(parent, comp, 0755) < 0 && errno != EEXIST)
				return -errno;
			fd = bkf_in_root(rootfd, prefix, O_PATH | O_DIRECTORY, 0);
		}
		if (fd < 0)
			return fd;
		close(parent);
		parent = fd;
		while (i < len && dir[i] == '/')
			i++;
	}
	return bkf_in_root(rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
}

/* Where a write to rel lands: the directory (fd) and the name in it. A
 * final symlink is followed (within the root: its target is resolved from
 * the root again), so writing through a link updates its target like
 * open(2) would. With mkdirs, missing directories of rel are created. */
int bkf_resolve_final(int rootfd, const char *rel, bool mkdirs, int *dirfd, char base[BK_NAME_MAX + 1])
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
		int dfd = mkdirs && hop == 0 ? mkdirs_in_root(rootfd, dir) : bkf_in_root(rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
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

int bkf_tmp_open(struct tmpfile *t, int dirfd, mode_t mode)
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

void bkf_tmp_abort(struct tmpfile *t)
{
	if (t->fd >= 0) {
		close(t->fd);
		t->fd = -1;
		unlinkat(t->dirfd, t->name, 0);
	}
}

int bkf_tmp_write(struct tmpfile *t, const char *p, size_t n)
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
int bkf_tmp_commit(struct tmpfile *t, const char *base, const struct stat *old)
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

int bkf_atomic_write(int dirfd, const char *base, const char *data, size_t len, const struct stat *old)
{
	struct tmpfile t;
	int r = bkf_tmp_open(&t, dirfd, 0644);
	if (r < 0)
		return r;
	r = bkf_tmp_write(&t, data, len);
	if (r < 0) {
		bkf_tmp_abort(&t);
		return r;
	}
	return bkf_tmp_commit(&t, base, old);
}

/* Python's universal newlines, in place: "\r\n" and a lone "\r" read as
 * "\n". Returns the new length. */
size_t bkf_universal_newlines(char *s, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\r') {
			s[o++] = '\n';
			if (i + 1 < n && s[i + 1] == '\n')
				i++;
		} else {
			s[o++] = s[i];
		}
	}
	s[o] = '\0';
	return o;
}
