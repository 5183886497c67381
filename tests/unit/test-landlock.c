/* SPDX-License-Identifier: Apache-2.0 */
/* The command allowlist's kernel layer (agent/landlock.c), against the
 * real kernel: these tests skip the parser on purpose. Each restricted run
 * forks a child that sets no_new_privs, applies a ruleset built by the
 * parent and executes; every denial has a control run without the ruleset
 * so that a noexec /tmp or a missing binary cannot make it pass. Needs
 * Landlock (ABI >= 1): the CI machine has it (FACTS.md), so its absence
 * fails the test instead of skipping it.
 *
 * Path resolution beneath a root (realpath/which) runs on a scratch tree
 * that plays a container's root file system. Everything lives in one
 * temporary directory, removed at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/isolate/landlock.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char tmp[PATH_MAX];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p);
}

static int setup(void **st)
{
	snprintf(tmp, sizeof(tmp), "/tmp/bk-test-landlock-XXXXXX");
	return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **st)
{
	return nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void path_in_tmp(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", tmp, name);
}

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	char *buf = NULL;
	size_t len = 0;
	assert_int_equal(read_file_at(AT_FDCWD, from, 64 << 20, &buf, &len), 0);
	int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
	free(buf);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* ---- running restricted ------------------------------------------------------ */

/* Fork; the child sets no_new_privs, applies ruleset_fd (unless -1: the
 * control run) and execve()s argv. Returns the exit status; a failed
 * execve exits 100 + errno, a failed apply 90. */
static int run(int ruleset_fd, const char *const *argv)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			_exit(91);
		if (ruleset_fd >= 0 && bk_landlock_apply(ruleset_fd) < 0)
			_exit(90);
		char *const envp[] = { "PATH=/usr/bin:/bin", NULL };
		execve(argv[0], (char *const *)argv, envp);
		_exit(100 + (errno < 100 ? errno : 99));
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static int sh(int ruleset_fd, const char *cmd)
{
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	return run(ruleset_fd, argv);
}

static int ruleset(const char *const *paths, size_t n)
{
	int rs = -1;
	int r = bk_landlock_ruleset(paths, n, &rs);
	if (r < 0)
		fail_msg("bk_landlock_ruleset: %s", strerror(-r));
	return rs;
}

static void abi(void **st)
{
	int v = bk_landlock_abi();
	if (v < 1)
		fail_msg("Landlock is not available (ABI %d): the CI machine must have it", v);
}

/* The scenario: ls allowed, cat not; sh itself is allowed. */
static void only_allowed_binaries_run(void **st)
{
	const char *allow[] = { "/usr/bin/ls" };
	int rs = ruleset(allow, 1);
	assert_int_equal(sh(-1, "ls / >/dev/null && cat /etc/hostname"), 0);
	assert_int_equal(sh(rs, "ls / >/dev/null"), 0);
	/* dash: 126 when the command is found but cannot be executed */
	assert_int_equal(sh(rs, "ls / >/dev/null && cat /etc/hostname"), 126);
	/* the same, without the shell in between */
	const char *cat[] = { "/usr/bin/cat", "/etc/hostname", NULL };
	assert_int_equal(run(-1, cat), 0);
	assert_int_equal(run(rs, cat), 100 + EACCES);
	/* python3 is not allowed (resolves to python3.11) */
	const char *py[] = { "/usr/bin/python3", "-c", "pass", NULL };
	if (access(py[0], X_OK) == 0) {
		assert_int_equal(run(-1, py), 0);
		assert_int_equal(run(rs, py), 100 + EACCES);
	}
	/* reads and writes are not Landlock's business here: only EXECUTE is
	 * handled */
	char f[PATH_MAX], cmd[PATH_MAX * 2];
	path_in_tmp(f, sizeof(f), "written");
	snprintf(cmd, sizeof(cmd), "echo hi > %s && read l < %s && ls %s >/dev/null", f, f, f);
	assert_int_equal(sh(rs, cmd), 0);
	close(rs);
}

/* Rules hold inodes: a copy of an allowed binary is another file. */
static void copy_is_refused(void **st)
{
	char copy[PATH_MAX];
	path_in_tmp(copy, sizeof(copy), "ls-copy");
	copy_file("/usr/bin/ls", copy, 0755);
	const char *allow[] = { "/usr/bin/ls" };
	int rs = ruleset(allow, 1);
	const char *argv[] = { copy, "/", NULL };
	assert_int_equal(run(-1, argv), 0); /* control: /tmp is not noexec */
	assert_int_equal(run(rs, argv), 100 + EACCES);
	/* and a copy of sh named like an allowed command */
	char fake[PATH_MAX];
	path_in_tmp(fake, sizeof(fake), "ls");
	copy_file("/bin/sh", fake, 0755);
	const char *argv2[] = { fake, "-c", "true", NULL };
	assert_int_equal(run(-1, argv2), 0);
	assert_int_equal(run(rs, argv2), 100 + EACCES);
	close(rs);
}

/* A symlink named ls pointing to cat runs cat's inode: refused. */
static void symlink_named_like_allowed(void **st)
{
	char dir[PATH_MAX], link[PATH_MAX];
	path_in_tmp(dir, sizeof(dir), "bin");
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(link, sizeof(link), "%s/ls", dir);
	assert_int_equal(symlink("/usr/bin/cat", link), 0);
	const char *allow[] = { "/usr/bin/ls" };
	int rs = ruleset(allow, 1);
	const char *argv[] = { link, "/etc/hostname", NULL };
	assert_int_equal(run(-1, argv), 0);
	assert_int_equal(run(rs, argv), 100 + EACCES);
	/* through PATH, as the shell would find it */
	char cmd[PATH_MAX + 64];
	snprintf(cmd, sizeof(cmd), "PATH=%s; ls /etc/hostname", dir);
	assert_int_equal(sh(rs, cmd), 126);
	close(rs);
}

/* /bin/sh is always executable (it runs the command line): a pipeline into
 * sh gets a shell, but the shell can execute only what is allowed. The
 * parser layer refuses "| sh" unless sh itself is in allowed_commands. */
static void shell_is_allowed_but_bound(void **st)
{
	const char *allow[] = { "/usr/bin/ls" };
	int rs = ruleset(allow, 1);
	assert_int_equal(sh(rs, "ls / | sh -c id"), 126);
	assert_int_equal(sh(rs, "ls / | sh -c 'ls /'"), 0);
	assert_int_equal(sh(rs, "sh -c 'echo builtins run'"), 0);
	close(rs);
}

/* Interpreters of allowed files are allowed: the loader of every ELF,
 * the "#!" interpreter of a script. */
static void interpreters_followed(void **st)
{
	char script[PATH_MAX];
	path_in_tmp(script, sizeof(script), "show");
	write_text(script, "#!/usr/bin/cat\nhello\n", 0755);
	const char *allow[] = { script };
	int rs = ruleset(allow, 1);
	const char *argv[] = { script, NULL };
	assert_int_equal(run(rs, argv), 0);
	/* which makes cat itself executable: documented trade-off */
	const char *cat[] = { "/usr/bin/cat", "/etc/hostname", NULL };
	assert_int_equal(run(rs, cat), 0);
	const char *ls[] = { "/usr/bin/ls", NULL };
	assert_int_equal(run(rs, ls), 100 + EACCES);
	close(rs);

	/* what is collected: sh (dash), ls, then the loader — once each */
	int fds[16];
	const char *paths[] = { "/usr/bin/ls", "/bin/ls", "/usr/bin/ls" };
	int n = bk_landlock_collect_at(-1, paths, 3, fds, 16);
	assert_int_equal(n, 3);
	struct stat want[3], got;
	assert_int_equal(stat("/bin/sh", &want[0]), 0);
	assert_int_equal(stat("/usr/bin/ls", &want[1]), 0);
	assert_int_equal(stat("/lib64/ld-linux-x86-64.so.2", &want[2]), 0);
	for (int i = 0; i < n; i++) {
		assert_int_equal(fstat(fds[i], &got), 0);
		assert_true(S_ISREG(got.st_mode));
		assert_true(got.st_ino == want[i].st_ino && got.st_dev == want[i].st_dev);
		close(fds[i]);
	}
	/* too small an array */
	assert_int_equal(bk_landlock_collect_at(-1, paths, 3, fds, 2), -E2BIG);
}

/* Fail closed: errors apply nothing and leak nothing. */
static void failures(void **st)
{
	int before = count_fds();
	int rs = 123, fds[8];
	const char *missing[] = { "/usr/bin/ls", "/nonexistent/bk-cmd" };
	assert_int_equal(bk_landlock_ruleset(missing, 2, &rs), -ENOENT);
	assert_int_equal(rs, -1);
	const char *dir[] = { "/usr/bin" };
	assert_int_equal(bk_landlock_ruleset(dir, 1, &rs), -EINVAL);
	assert_int_equal(bk_landlock_collect_at(-1, dir, 1, fds, 8), -EINVAL);
	int d = open("/usr/bin", O_PATH | O_CLOEXEC);
	assert_int_equal(bk_landlock_ruleset_fds(&d, 1, &rs), -EINVAL);
	close(d);
	assert_int_equal(count_fds(), before);
	/* a failed apply leaves the child unrestricted, and says so */
	assert_int_equal(bk_landlock_apply(-1), -EBADF);
	int notrs = open("/dev/null", O_RDONLY | O_CLOEXEC);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		int r = bk_landlock_apply(notrs);
		if (r != -EBADFD)
			_exit(1);
		const char *cat[] = { "/usr/bin/cat", "/dev/null", NULL };
		execv(cat[0], (char *const *)cat);
		_exit(2);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(notrs);
	/* an empty ruleset allows nothing, not even sh */
	assert_int_equal(bk_landlock_ruleset_fds(NULL, 0, &rs), 0);
	assert_int_equal(sh(rs, "true"), 100 + EACCES);
	close(rs);
}

/* KNOWN LIMIT (SECURITY.md): Landlock checks execve and the kernel's open
 * of PT_INTERP, not mmap. The loader must be executable, and run as a
 * program it maps any readable ELF. This test pins the documented
 * behaviour: if a kernel ever closes the gap, update SECURITY.md. */
static void known_limit_loader_runs_any_elf(void **st)
{
	const char *allow[] = { "/usr/bin/ls" };
	int rs = ruleset(allow, 1);
	const char *direct[] = { "/usr/bin/id", NULL };
	assert_int_equal(run(rs, direct), 100 + EACCES);
	const char *via_loader[] = { "/lib64/ld-linux-x86-64.so.2", "/usr/bin/id", NULL };
	assert_int_equal(run(rs, via_loader), 0);
	close(rs);
}

/* ---- resolution beneath a root ---------------------------------------------------- */

static void mk(const char *rel, mode_t mode)
{
	char p[PATH_MAX];
	path_in_tmp(p, sizeof(p), rel);
	if (S_ISDIR(mode))
		assert_int_equal(mkdir(p, mode & 07777), 0);
	else
		write_text(p, "#!/bin/sh\n", mode & 07777);
}

static void ln(const char *target, const char *rel)
{
	char p[PATH_MAX];
	path_in_tmp(p, sizeof(p), rel);
	assert_int_equal(symlink(target, p), 0);
}

static void resolution_in_root(void **st)
{
	/* a container root: /bin -> usr/bin, /usr/bin/sh -> dash, absolute
	 * links, links that try to leave, a loop */
	mk("root", S_IFDIR | 0755);
	mk("root/usr", S_IFDIR | 0755);
	mk("root/usr/bin", S_IFDIR | 0755);
	mk("root/usr/bin/dash", S_IFREG | 0755);
	mk("root/usr/bin/ls", S_IFREG | 0755);
	mk("root/usr/bin/cat", S_IFREG | 0755);
	mk("root/usr/bin/noexec", S_IFREG | 0644);
	mk("root/workspace", S_IFDIR | 0755);
	mk("root/workspace/empty", S_IFDIR | 0755);
	ln("usr/bin", "root/bin");
	ln("dash", "root/usr/bin/sh");
	ln("/usr/bin/cat", "root/workspace/tool");
	ln("../../../../../../../../etc/passwd", "root/escape");
	ln("/etc/shadow", "root/escape2");
	ln("loop2", "root/loop1");
	ln("loop1", "root/loop2");
	char rootp[PATH_MAX], out[PATH_MAX];
	path_in_tmp(rootp, sizeof(rootp), "root");
	int root = open(rootp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(root >= 0);

	assert_int_equal(bk_landlock_realpath_at(root, "/bin/sh", out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/bin/dash");
	assert_int_equal(bk_landlock_realpath_at(root, "/../../bin/../bin/./ls", out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/bin/ls");
	assert_int_equal(bk_landlock_realpath_at(root, "/", out, sizeof(out)), 0);
	assert_string_equal(out, "/");
	/* the host's /etc/passwd exists; the root's does not */
	assert_int_equal(bk_landlock_realpath_at(root, "/escape", out, sizeof(out)), -ENOENT);
	assert_int_equal(bk_landlock_realpath_at(root, "/escape2", out, sizeof(out)), -ENOENT);
	mk("root/etc", S_IFDIR | 0755);
	mk("root/etc/passwd", S_IFREG | 0644);
	assert_int_equal(bk_landlock_realpath_at(root, "/escape", out, sizeof(out)), 0);
	assert_string_equal(out, "/etc/passwd");
	assert_int_equal(bk_landlock_realpath_at(root, "/loop1", out, sizeof(out)), -ELOOP);
	assert_int_equal(bk_landlock_realpath_at(root, "/usr/bin/ls/x", out, sizeof(out)), -ENOTDIR);
	assert_int_equal(bk_landlock_realpath_at(root, "/usr/bin/ls", out, 5), -ENAMETOOLONG);

	const char *path = "/nonexistent:/workspace/empty:/bin:/usr/bin";
	assert_int_equal(bk_landlock_which_at(root, "/workspace", path, "sh", out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/bin/dash");
	assert_int_equal(bk_landlock_which_at(root, "/workspace", path, "ls", out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/bin/ls");
	assert_int_equal(bk_landlock_which_at(root, "/workspace", path, "./tool", out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/bin/cat");
	assert_int_equal(bk_landlock_which_at(root, "/workspace", path, "/bin/ls", out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/bin/ls");
	assert_int_equal(bk_landlock_which_at(root, "/workspace", path, "missing", out, sizeof(out)), -ENOENT);
	assert_int_equal(bk_landlock_which_at(root, "/workspace", path, "noexec", out, sizeof(out)), -EACCES);
	assert_int_equal(bk_landlock_which_at(root, "/workspace", path, "empty", out, sizeof(out)), -ENOENT);
	/* an empty PATH entry is the cwd */
	assert_int_equal(bk_landlock_which_at(root, "/workspace", ":/usr/bin", "tool", out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/bin/cat");

	struct bk_landlock_resolver rv = { .rootfd = root, .cwd = "/workspace", .path_env = path };
	assert_int_equal(bk_landlock_resolve(&rv, "sh", out, sizeof(out)), 0);
	assert_string_equal(out, "/usr/bin/dash");
	assert_int_equal(bk_landlock_resolve(&rv, "noexec", out, sizeof(out)), -ENOENT);

	/* collecting beneath the root: its /bin/sh, its files; "#!/bin/sh"
	 * scripts bring the root's dash (already in) */
	int fds[8];
	const char *paths[] = { "/usr/bin/ls", "/bin/cat" };
	int n = bk_landlock_collect_at(root, paths, 2, fds, 8);
	assert_int_equal(n, 3);
	char dash[PATH_MAX];
	path_in_tmp(dash, sizeof(dash), "root/usr/bin/dash");
	struct stat a, b;
	assert_int_equal(stat(dash, &a), 0);
	assert_int_equal(fstat(fds[0], &b), 0);
	assert_true(a.st_ino == b.st_ino);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	const char *outside[] = { "/escape2" };
	assert_int_equal(bk_landlock_collect_at(root, outside, 1, fds, 8), -ENOENT);
	close(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(abi),
		cmocka_unit_test(only_allowed_binaries_run),
		cmocka_unit_test(copy_is_refused),
		cmocka_unit_test(symlink_named_like_allowed),
		cmocka_unit_test(shell_is_allowed_but_bound),
		cmocka_unit_test(interpreters_followed),
		cmocka_unit_test(failures),
		cmocka_unit_test(known_limit_loader_runs_any_elf),
		cmocka_unit_test(resolution_in_root),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
