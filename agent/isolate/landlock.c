/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel layer of the command allowlist (see landlock.h). */
#include "agent/isolate/landlock.h"
#include "agent/isolate/step.h"
#include "lib/err.h"
#include "lib/missing.h"
#include "lib/util.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* Landlock's UAPI values, under our own names: the build does not depend
 * on the host's <linux/landlock.h> (the syscall numbers: lib/missing.h). */
#define BK_LL_CREATE_RULESET_VERSION (1U << 0)
#define BK_LL_RULE_PATH_BENEATH 1
#define BK_LL_ACCESS_FS_EXECUTE (1ULL << 0)

struct bk_ll_ruleset_attr {
	uint64_t handled_access_fs;
};

struct bk_ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

int bk_landlock_abi(void)
{
	long v = syscall(__NR_landlock_create_ruleset, NULL, 0, BK_LL_CREATE_RULESET_VERSION);
	return v < 0 ? 0 : (int)v;
}

int bk_landlock_ruleset_fds(const int *fds, size_t n, int *ruleset_fd)
{
	*ruleset_fd = -1;
	if (n > BK_LANDLOCK_MAX_FILES)
		return -E2BIG;
	if (bk_landlock_abi() < 1)
		return -EOPNOTSUPP;
	/* EXECUTE only: reads and writes of the sandbox stay as they are */
	struct bk_ll_ruleset_attr attr = { .handled_access_fs = BK_LL_ACCESS_FS_EXECUTE };
	_cleanup_close_ int rs = (int)syscall(__NR_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (rs < 0)
		return -errno;
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (fstat(fds[i], &st) < 0)
			return -errno;
		/* a rule on a directory would allow everything beneath it */
		if (!S_ISREG(st.st_mode))
			return -EINVAL;
		struct bk_ll_path_beneath_attr pb = { .allowed_access = BK_LL_ACCESS_FS_EXECUTE, .parent_fd = fds[i] };
		if (syscall(__NR_landlock_add_rule, rs, BK_LL_RULE_PATH_BENEATH, &pb, 0) < 0)
			return -errno;
	}
	*ruleset_fd = steal_fd(&rs); /* the kernel made it O_CLOEXEC */
	return 0;
}

int bk_landlock_apply(int ruleset_fd)
{
	if (ruleset_fd < 0)
		return -EBADF;
	if (syscall(__NR_landlock_restrict_self, ruleset_fd, 0) < 0)
		return -errno;
	return 0;
}

/* ---- paths beneath a root ------------------------------------------------ */

/* rootfd, or "/" for AT_FDCWD (RESOLVE_IN_ROOT would take the cwd). */
static int root_fd(int rootfd, int *owned)
{
	*owned = -1;
	if (rootfd >= 0)
		return rootfd;
	*owned = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	return *owned < 0 ? -errno : *owned;
}

static int open_in_root(int rootfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | resolve,
	};
	/* openat2 takes "" for nothing: the root itself is "." */
	int fd = (int)syscall(SYS_openat2, rootfd, path[0] ? path : ".", &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

#define MAX_LINKS 40

/* Canonical path walk: res holds only components that are no symlink; a
 * symlink's target is spliced in front of what is left of the path. Each
 * step opens res/comp beneath the root with symlinks forbidden on the way
 * (a component swapped for a symlink meanwhile fails instead of
 * redirecting) and O_NOFOLLOW on the last. On success *fdp (when not NULL)
 * is an O_PATH descriptor of the file named by out. */
static int realpath_fd(int rootfd, const char *path, char *out, size_t outlen, int *fdp)
{
	char rem[2 * PATH_MAX + 2], res[PATH_MAX], cand[PATH_MAX];
	size_t rl = strlen(path);
	if (rl >= sizeof(rem) / 2)
		return -ENAMETOOLONG;
	memcpy(rem, path, rl + 1);
	size_t resl = 0, pos = 0;
	int links = 0;
	_cleanup_close_ int cur = -1;
	res[0] = '\0';
	for (;;) {
		while (rem[pos] == '/')
			pos++;
		if (!rem[pos])
			break;
		size_t s = pos;
		while (rem[pos] && rem[pos] != '/')
			pos++;
		size_t cl = pos - s;
		if (cl == 1 && rem[s] == '.')
			continue;
		if (cl == 2 && rem[s] == '.' && rem[s + 1] == '.') {
			/* never above the root, as RESOLVE_IN_ROOT */
			while (resl > 0 && res[resl - 1] != '/')
				resl--;
			if (resl > 0)
				resl--;
			res[resl] = '\0';
			closep(&cur);
			continue;
		}
		if (cl > NAME_MAX)
			return -ENAMETOOLONG;
		if (resl + 1 + cl + 1 > sizeof(cand))
			return -ENAMETOOLONG;
		memcpy(cand, res, resl);
		cand[resl] = '/';
		memcpy(cand + resl + 1, rem + s, cl);
		cand[resl + 1 + cl] = '\0';
		closep(&cur);
		cur = open_in_root(rootfd, cand, O_PATH | O_NOFOLLOW, RESOLVE_NO_SYMLINKS);
		if (cur < 0)
			return cur;
		struct stat st;
		if (fstat(cur, &st) < 0)
			return -errno;
		if (S_ISLNK(st.st_mode)) {
			if (++links > MAX_LINKS)
				return -ELOOP;
			char tgt[PATH_MAX];
			ssize_t tl = readlinkat(cur, "", tgt, sizeof(tgt));
			if (tl < 0)
				return -errno;
			if ((size_t)tl >= sizeof(tgt))
				return -ENAMETOOLONG;
			if (tl == 0)
				return -ENOENT; /* as the kernel */
			closep(&cur);
			/* rem := target + "/" + rest */
			size_t restl = strlen(rem + pos);
			if ((size_t)tl + 1 + restl + 1 > sizeof(rem))
				return -ENAMETOOLONG;
			memmove(rem + tl + 1, rem + pos, restl + 1);
			memcpy(rem, tgt, (size_t)tl);
			rem[tl] = '/';
			pos = 0;
			if (tl > 0 && tgt[0] == '/') {
				resl = 0;
				res[0] = '\0';
			}
			continue;
		}
		/* a non-directory can only be the last component */
		size_t p2 = pos;
		while (rem[p2] == '/')
			p2++;
		if (rem[p2] && !S_ISDIR(st.st_mode))
			return -ENOTDIR;
		memcpy(res, cand, resl + 1 + cl + 1);
		resl += 1 + cl;
	}
	if (resl == 0) {
		res[0] = '/';
		res[1] = '\0';
		resl = 1;
	}
	if (resl + 1 > outlen)
		return -ENAMETOOLONG;
	memcpy(out, res, resl + 1);
	if (fdp) {
		if (cur < 0) {
			cur = open_in_root(rootfd, res, O_PATH | O_NOFOLLOW, RESOLVE_NO_SYMLINKS);
			if (cur < 0)
				return cur;
		}
		*fdp = steal_fd(&cur);
	}
	return 0;
}

int bk_landlock_realpath_at(int rootfd, const char *path, char *out, size_t outlen)
{
	_cleanup_close_ int owned = -1;
	int root = root_fd(rootfd, &owned);
	if (root < 0)
		return root;
	return realpath_fd(root, path, out, outlen, NULL);
}

/* A regular file with an execute bit (for somebody), as found by name. */
static int exec_candidate(int root, const char *path, char *out, size_t outlen)
{
	_cleanup_close_ int fd = -1;
	int r = realpath_fd(root, path, out, outlen, &fd);
	if (r < 0)
		return r;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111))
		return -EACCES;
	return 0;
}

int bk_landlock_which_at(int rootfd, const char *cwd, const char *path_env, const char *word, char *out,
			 size_t outlen)
{
	if (!word || !word[0])
		return -ENOENT;
	if (!cwd || cwd[0] != '/')
		cwd = "/";
	_cleanup_close_ int owned = -1;
	int root = root_fd(rootfd, &owned);
	if (root < 0)
		return root;
	char p[PATH_MAX];
	int n;
	if (strchr(word, '/')) {
		n = word[0] == '/' ? snprintf(p, sizeof(p), "%s", word) : snprintf(p, sizeof(p), "%s/%s", cwd, word);
		if (n < 0 || (size_t)n >= sizeof(p))
			return -ENAMETOOLONG;
		return exec_candidate(root, p, out, outlen);
	}
	if (!path_env)
		return -ENOENT;
	int last = -ENOENT;
	for (const char *d = path_env;;) {
		const char *e = strchr(d, ':');
		size_t dl = e ? (size_t)(e - d) : strlen(d);
		/* an empty entry is the current directory; a relative one is
		 * relative to it */
		if (dl == 0)
			n = snprintf(p, sizeof(p), "%s/%s", cwd, word);
		else if (d[0] == '/')
			n = snprintf(p, sizeof(p), "%.*s/%s", (int)dl, d, word);
		else
			n = snprintf(p, sizeof(p), "%s/%.*s/%s", cwd, (int)dl, d, word);
		if (n > 0 && (size_t)n < sizeof(p)) {
			int r = exec_candidate(root, p, out, outlen);
			if (r == 0)
				return 0;
			/* sh goes on past missing and non-executable entries */
			if (r != -ENOENT && r != -ENOTDIR && r != -EACCES && r != -ELOOP && r != -ENAMETOOLONG)
				return r;
			if (r == -EACCES)
				last = r;
		}
		if (!e)
			break;
		d = e + 1;
	}
	return last;
}

int bk_landlock_resolve(void *ud, const char *word, char *out, size_t outlen)
{
	const struct bk_landlock_resolver *r = ud;
	int e = bk_landlock_which_at(r->rootfd, r->cwd, r->path_env, word, out, outlen);
	return e == -EACCES ? -ENOENT : e;
}

/* ---- interpreters ----------------------------------------------------------- */

/* The interpreter a file names: "#!" line or ELF PT_INTERP. 0 with out ""
 * when it has none. fd is an O_PATH descriptor of a regular file; it is
 * reopened for reading through /proc (never a FIFO or device: checked). */
static int interp_of(int fd, char *out, size_t outlen)
{
	out[0] = '\0';
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	_cleanup_close_ int rd = open(proc, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (rd < 0)
		return -errno;
	struct stat st;
	if (fstat(rd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	unsigned char hdr[256]; /* the kernel reads BINPRM_BUF_SIZE = 256 */
	ssize_t n = pread(rd, hdr, sizeof(hdr), 0);
	if (n < 0)
		return -errno;
	if (n >= 2 && hdr[0] == '#' && hdr[1] == '!') {
		size_t i = 2, len = (size_t)n;
		while (i < len && (hdr[i] == ' ' || hdr[i] == '\t'))
			i++;
		size_t s = i;
		while (i < len && hdr[i] != ' ' && hdr[i] != '\t' && hdr[i] != '\n' && hdr[i] != '\0')
			i++;
		if (i - s + 1 > outlen)
			return -ENAMETOOLONG;
		memcpy(out, hdr + s, i - s);
		out[i - s] = '\0';
		return 0;
	}
	if (n < EI_NIDENT || memcmp(hdr, ELFMAG, SELFMAG))
		return 0; /* not something the kernel runs with an interpreter */
	uint64_t phoff, phnum, phentsize;
	bool is64 = hdr[EI_CLASS] == ELFCLASS64;
	if (is64 && (size_t)n >= sizeof(Elf64_Ehdr)) {
		Elf64_Ehdr eh;
		memcpy(&eh, hdr, sizeof(eh));
		phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize;
		if (phentsize != sizeof(Elf64_Phdr))
			return -ENOEXEC;
	} else if (hdr[EI_CLASS] == ELFCLASS32 && (size_t)n >= sizeof(Elf32_Ehdr)) {
		Elf32_Ehdr eh;
		memcpy(&eh, hdr, sizeof(eh));
		phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize;
		if (phentsize != sizeof(Elf32_Phdr))
			return -ENOEXEC;
	} else {
		return -ENOEXEC;
	}
	if (phnum > 256)
		return -ENOEXEC;
	for (uint64_t k = 0; k < phnum; k++) {
		uint64_t type, off, sz;
		if (is64) {
			Elf64_Phdr ph;
			if (pread(rd, &ph, sizeof(ph), (off_t)(phoff + k * phentsize)) != (ssize_t)sizeof(ph))
				return -ENOEXEC;
			type = ph.p_type, off = ph.p_offset, sz = ph.p_filesz;
		} else {
			Elf32_Phdr ph;
			if (pread(rd, &ph, sizeof(ph), (off_t)(phoff + k * phentsize)) != (ssize_t)sizeof(ph))
				return -ENOEXEC;
			type = ph.p_type, off = ph.p_offset, sz = ph.p_filesz;
		}
		if (type != PT_INTERP)
			continue;
		/* as the kernel: NUL-terminated, at most PATH_MAX */
		if (sz < 2 || sz > PATH_MAX || sz > outlen)
			return -ENOEXEC;
		if (pread(rd, out, sz, (off_t)off) != (ssize_t)sz || out[sz - 1] != '\0' || strlen(out) != sz - 1) {
			out[0] = '\0';
			return -ENOEXEC;
		}
		return 0;
	}
	return 0;
}

struct pending {
	char path[PATH_MAX];
	int depth;
	bool must_exist;
};

int bk_landlock_collect_at(int rootfd, const char *const *paths, size_t n, int *fds, size_t maxfds)
{
	if (n + 1 > BK_LANDLOCK_MAX_FILES)
		return -E2BIG;
	_cleanup_close_ int owned = -1;
	int root = root_fd(rootfd, &owned);
	if (root < 0)
		return root;
	/* work list: /bin/sh and the paths, then interpreters as found */
	size_t cap = BK_LANDLOCK_MAX_FILES;
	_cleanup_free_ struct pending *work = calloc(cap, sizeof(*work));
	_cleanup_free_ dev_t *devs = calloc(maxfds ? maxfds : 1, sizeof(*devs));
	_cleanup_free_ ino_t *inos = calloc(maxfds ? maxfds : 1, sizeof(*inos));
	if (!work || !devs || !inos)
		return -ENOMEM;
	size_t nw = 0, nf = 0;
	snprintf(work[nw].path, PATH_MAX, "/bin/sh");
	work[nw++].must_exist = true;
	for (size_t i = 0; i < n; i++) {
		if (!paths[i] || snprintf(work[nw].path, PATH_MAX, "%s", paths[i]) >= PATH_MAX)
			return -EINVAL;
		work[nw++].must_exist = true;
	}
	int r = 0;
	for (size_t w = 0; w < nw; w++) {
		char real[PATH_MAX], interp[PATH_MAX];
		int fd = -1;
		r = realpath_fd(root, work[w].path, real, sizeof(real), &fd);
		if (r < 0) {
			if (!work[w].must_exist && (r == -ENOENT || r == -ENOTDIR))
				continue;
			goto fail;
		}
		struct stat st;
		if (fstat(fd, &st) < 0) {
			r = -errno;
			close(fd);
			goto fail;
		}
		if (!S_ISREG(st.st_mode)) {
			close(fd);
			r = -EINVAL;
			goto fail;
		}
		bool dup = false;
		for (size_t k = 0; k < nf; k++)
			dup |= devs[k] == st.st_dev && inos[k] == st.st_ino;
		if (dup) {
			close(fd);
			continue;
		}
		if (nf == maxfds) {
			close(fd);
			r = -E2BIG;
			goto fail;
		}
		devs[nf] = st.st_dev;
		inos[nf] = st.st_ino;
		fds[nf++] = fd;
		r = interp_of(fd, interp, sizeof(interp));
		if (r < 0 && r != -ENOEXEC)
			goto fail;
		r = 0;
		/* a relative "#!" interpreter resolves against the exec's cwd:
		 * not allowed for it (the kernel layer then refuses the script) */
		if (!interp[0] || interp[0] != '/' || work[w].depth >= BK_LANDLOCK_INTERP_DEPTH)
			continue;
		if (nw == cap) {
			r = -E2BIG;
			goto fail;
		}
		snprintf(work[nw].path, PATH_MAX, "%s", interp);
		work[nw].depth = work[w].depth + 1;
		work[nw++].must_exist = false;
	}
	return (int)nf;
fail:
	for (size_t k = 0; k < nf; k++)
		close(fds[k]);
	return r;
}

int bk_landlock_ruleset_at(int rootfd, const char *const *paths, size_t n, int *ruleset_fd)
{
	*ruleset_fd = -1;
	_cleanup_free_ int *fds = calloc(BK_LANDLOCK_MAX_FILES, sizeof(int));
	if (!fds)
		return -ENOMEM;
	int nf = bk_landlock_collect_at(rootfd, paths, n, fds, BK_LANDLOCK_MAX_FILES);
	if (nf < 0)
		return nf;
	int r = bk_landlock_ruleset_fds(fds, (size_t)nf, ruleset_fd);
	for (int k = 0; k < nf; k++)
		close(fds[k]);
	return r;
}

int bk_landlock_ruleset(const char *const *exec_paths, size_t n, int *ruleset_fd)
{
	return bk_landlock_ruleset_at(-1, exec_paths, n, ruleset_fd);
}

/* ---- the exec's step -------------------------------------------------------- */

int bk_step_landlock(struct exec_ctx *x)
{
	char root[64];
	snprintf(root, sizeof(root), "/proc/%d/root", (int)x->pod->sandbox.init_pid);
	_cleanup_close_ int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return bk_fail(&x->err, -errno, NULL, "cannot open the sandbox container's root");
	if (bk_landlock_abi() <= 0)
		return bk_fail(&x->err, -EOPNOTSUPP, NULL, "the kernel has no Landlock");
	int r = bk_landlock_ruleset_at(rootfd, x->req->landlock_paths, x->req->landlock_n, &x->landlock_fd);
	if (r < 0) {
		x->landlock_fd = -1;
		return bk_fail(&x->err, r, NULL, "%s", strerror(-r));
	}
	return 0;
}
