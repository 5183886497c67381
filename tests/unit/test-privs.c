/* SPDX-License-Identifier: Apache-2.0 */
/* The one privilege drop (agent/isolate/privs.c), against the real kernel:
 * a forked child (the unit tests run as root with every capability this
 * machine grants) drops to an unprivileged uid/gid, and what the kernel
 * then says about it — /proc/self/status, prctl, capget — is checked from
 * the child itself and reported to the test as one status byte per rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "agent/isolate/privs.h"
#include "lib/util.h"

enum { P_OK, R_DROP, R_UID, R_GID, R_GROUPS, R_CAPS, R_BND, R_AMB, R_NNP, R_DUMP, R_SETUID };

static int cap_last(void)
{
	char *s = NULL;
	size_t n;
	uint64_t v = 40;
	if (read_file_at(AT_FDCWD, "/proc/sys/kernel/cap_last_cap", 64, &s, &n) == 0) {
		s[strcspn(s, "\n")] = '\0';
		parse_u64(s, &v);
	}
	free(s);
	return (int)v;
}

/* The value after "Key:\t" in /proc/self/status, first word only. */
static bool status_field(const char *key, char *out, size_t len)
{
	char *s = NULL;
	size_t n;
	if (read_file_at(AT_FDCWD, "/proc/self/status", 1 << 16, &s, &n) < 0)
		return false;
	bool found = false;
	char want[64];
	snprintf(want, sizeof(want), "\n%s:", key);
	char *p = strstr(s, want);
	if (p) {
		p += strlen(want);
		while (*p == '\t' || *p == ' ')
			p++;
		size_t l = strcspn(p, "\n");
		snprintf(out, len, "%.*s", (int)l, p);
		found = true;
	}
	free(s);
	return found;
}

static int child_checks(uid_t uid, gid_t gid)
{
	int last = cap_last();
	if (bk_privs_drop(uid, gid, last) < 0)
		return R_DROP;
	char v[256], want[128];
	snprintf(want, sizeof(want), "%u\t%u\t%u\t%u", uid, uid, uid, uid);
	if (!status_field("Uid", v, sizeof(v)) || !streq(v, want))
		return R_UID;
	snprintf(want, sizeof(want), "%u\t%u\t%u\t%u", gid, gid, gid, gid);
	if (!status_field("Gid", v, sizeof(v)) || !streq(v, want))
		return R_GID;
	if (!status_field("Groups", v, sizeof(v)) || v[0])
		return R_GROUPS;
	static const char *const caps[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
	for (size_t i = 0; i < ARRAY_SIZE(caps); i++)
		if (!status_field(caps[i], v, sizeof(v)) || !streq(v, "0000000000000000"))
			return i == 3 ? R_BND : i == 4 ? R_AMB : R_CAPS;
	if (!status_field("NoNewPrivs", v, sizeof(v)) || !streq(v, "1"))
		return R_NNP;
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
		return R_DUMP;
	/* and the drop cannot be undone */
	if (syscall(SYS_setresuid, 0, 0, 0) == 0 || errno != EPERM)
		return R_SETUID;
	return P_OK;
}

static int run_child(uid_t uid, gid_t gid)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(child_checks(uid, gid));
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

static void drops_everything(void **state)
{
	assert_int_equal(getuid(), 0);
	assert_int_equal(run_child(65534, 65534), P_OK);
	assert_int_equal(run_child(1000, 1000), P_OK);
}

static void refuses_root(void **state)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(bk_privs_drop(0, 1000, cap_last()) == -EPERM && bk_privs_drop(1000, 0, cap_last()) == -EPERM &&
			      getuid() == 0 ? 0 : 1);
	int st = 0;
	waitpid(pid, &st, 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* The one-read check (bk_privs_readback) sees what is left: a process that
 * changed its ids and set no_new_privs but kept its bounding set, or
 * kept a group, is refused; the full drop is accepted. */
static int readback_child(void)
{
	if (bk_privs_readback(1000, 1000) != -EPERM) /* root, everything held */
		return 1;
	gid_t g = 4242;
	if (syscall(SYS_setgroups, 1, &g) < 0 || syscall(SYS_setresgid, 1000, 1000, 1000) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return 2;
	if (bk_privs_readback(1000, 1000) != -EPERM) /* a group left (and uid 0) */
		return 3;
	if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresuid, 1000, 1000, 1000) < 0)
		return 4;
	if (prctl(PR_CAPBSET_READ, 0, 0, 0, 0) != 1)
		return 5; /* (the bounding set is still full: the case to see) */
	if (bk_privs_readback(1000, 1000) != -EPERM) /* the bounding set left */
		return 6;
	if (bk_privs_readback(1001, 1000) != -EPERM)
		return 7;
	return 0;
}

static int dropped_child(void)
{
	return bk_privs_drop(1000, 1000, cap_last()) == 0 && bk_privs_readback(1000, 1000) == 1 ? 0 : 1;
}

/* fn in a forked child, which must exit 0 (else the step it failed at) */
static void in_child(int (*fn)(void))
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(fn());
	int st = 0;
	waitpid(pid, &st, 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void readback_sees_what_is_left(void **state)
{
	in_child(readback_child);
	in_child(dropped_child);
}

/* Where /proc is not a procfs (a tmpfs over it, with a status file that
 * says everything is dropped), the status is not taken for the kernel's
 * word: the drop asks the kernel call by call, and still drops everything. */
static int noproc_child(void)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", "/proc", "tmpfs", 0, "size=64k") < 0)
		return 1;
	/* a status that says everything is dropped, on the tmpfs */
	static const char fake[] = "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t\n"
				   "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n"
				   "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
				   "CapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t0\nSeccomp_filters:\t0\n";
	if (mkdir("/proc/thread-self", 0755) < 0)
		return 2;
	int fd = open("/proc/thread-self/status", O_CREAT | O_WRONLY, 0644);
	if (fd < 0 || write(fd, fake, sizeof(fake) - 1) != (ssize_t)sizeof(fake) - 1)
		return 3;
	close(fd);
	char buf[1024];
	size_t len;
	if (bk_self_status(buf, sizeof(buf), &len) != -EXDEV)
		return 8;
	if (bk_privs_readback(1000, 1000) != 0)
		return 4;
	if (bk_privs_drop(1000, 1000, cap_last()) != 0)
		return 5;
	uid_t r, e, s;
	if (syscall(SYS_getresuid, &r, &e, &s) < 0 || r != 1000 || e != 1000 || s != 1000)
		return 6;
	for (int cap = 0; cap <= cap_last(); cap++)
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 0)
			return 7;
	return 0;
}

static void drop_without_procfs(void **state) { in_child(noproc_child); }

/* The agent's start (bk_privs_hand_over): its bounding set emptied and its
 * capabilities kept as inheritable. A process cloned after it still drops
 * to nothing, the inheritable set included (bk_privs_drop's capset); a
 * root execve (the file helper's) still gets its capabilities back. */
static uint64_t status_hex(const char *key)
{
	char v[64];
	uint64_t x = ~0ull;
	if (status_field(key, v, sizeof(v)))
		x = strtoull(v, NULL, 16);
	return x;
}

static int root_exec_caps(uint64_t want)
{
	int p[2];
	if (pipe(p) < 0)
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		execl("/bin/grep", "grep", "^CapEff:", "/proc/self/status", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char buf[256] = "";
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 2;
	buf[n] = '\0';
	char *t = strchr(buf, '\t');
	return t && strtoull(t + 1, NULL, 16) == want ? 0 : 3;
}

static int hand_over_child(void)
{
	uint64_t prm = status_hex("CapPrm");
	if (prm == 0 || status_hex("CapBnd") == 0)
		return 1; /* (root with its capabilities: the case to see) */
	if (bk_privs_hand_over() != 0 || !bk_privs_bset_empty)
		return 2;
	if (status_hex("CapBnd") != 0 || status_hex("CapInh") != prm || status_hex("CapPrm") != prm)
		return 3;
	if (run_child(1000, 1000) != P_OK)
		return 4;
	if (root_exec_caps(prm) != 0)
		return 5;
	return 0;
}

static void *sleeper(void *arg)
{
	(void)arg;
	pause();
	return NULL;
}

static int hand_over_threaded_child(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, sleeper, NULL) != 0)
		return 1;
	uint64_t bnd = status_hex("CapBnd");
	if (bk_privs_hand_over() != -EBUSY || bk_privs_bset_empty)
		return 2;
	return status_hex("CapBnd") == bnd && status_hex("CapInh") == 0 ? 0 : 3;
}

static void hand_over(void **state)
{
	in_child(hand_over_child);
	in_child(hand_over_threaded_child);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(drops_everything),
		cmocka_unit_test(refuses_root),
		cmocka_unit_test(readback_sees_what_is_left),
		cmocka_unit_test(drop_without_procfs),
		cmocka_unit_test(hand_over),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
