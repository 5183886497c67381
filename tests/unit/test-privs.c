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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(drops_everything),
		cmocka_unit_test(refuses_root),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
