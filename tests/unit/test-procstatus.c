/* SPDX-License-Identifier: Apache-2.0 */
/* /proc/PID/status fields of the exec receipt (agent/parse/procstatus.c):
 * a real file of this process, a crafted one, missing and malformed fields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/parse/procstatus.h"

static const char sample[] =
	"Name:\tsh\nUmask:\t0022\nState:\tS (sleeping)\nPid:\t12\n"
	"Uid:\t1000\t1000\t1000\t1001\nGid:\t1000\t1000\t1000\t1000\n"
	"FDSize:\t64\nGroups:\t4 27 \nNSpid:\t12\t1\n"
	"CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
	"CapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n"
	"NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\nSpeculation_Store_Bypass:\tthread vulnerable\n";

static void reads_a_sample(void **state)
{
	(void)state;
	struct bk_proc_status s;
	assert_int_equal(bk_proc_status_parse(sample, strlen(sample), &s), 0);
	assert_int_equal(s.uid[0], 1000);
	assert_int_equal(s.uid[3], 1001);
	assert_int_equal(s.gid[2], 1000);
	assert_int_equal(s.n_groups, 2);
	assert_int_equal(s.groups[0], 4);
	assert_int_equal(s.groups[1], 27);
	assert_true(s.cap_eff == 0 && s.cap_prm == 0 && s.cap_inh == 0 && s.cap_amb == 0);
	assert_true(s.cap_bnd == 0x1ffffffffffull);
	assert_int_equal(s.no_new_privs, 1);
	assert_int_equal(s.seccomp, 2);
	assert_int_equal(s.seccomp_filters, 1);
}

static void reads_this_process(void **state)
{
	(void)state;
	char buf[8192];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	assert_true(n > 0);
	struct bk_proc_status s;
	assert_int_equal(bk_proc_status_parse(buf, (size_t)n, &s), 0);
	assert_int_equal(s.uid[0], (int64_t)getuid());
	assert_int_equal(s.gid[1], (int64_t)getegid());
}

static void empty_groups_and_missing_fields(void **state)
{
	(void)state;
	struct bk_proc_status s;
	const char *t = "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\t\n";
	assert_int_equal(bk_proc_status_parse(t, strlen(t), &s), -ENOENT);
	assert_int_equal(s.seen, BK_PS_UID | BK_PS_GID | BK_PS_GROUPS);
	assert_int_equal(s.n_groups, 0);
	/* a Seccomp line without Seccomp_filters is not the pair */
	char cut[sizeof(sample)];
	strcpy(cut, sample);
	*strstr(cut, "Seccomp_filters") = '\0';
	assert_int_equal(bk_proc_status_parse(cut, strlen(cut), &s), -ENOENT);
	assert_false(s.seen & BK_PS_SECCOMP);
}

static void refuses_malformed_fields(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"Uid:\t1000\t1000\t1000\n",             /* three ids */
		"Uid:\t1000\t1000\t1000\t1000\t5\n",    /* five */
		"Gid:\t-1\t0\t0\t0\n",
		"CapEff:\t00000000000000000\n",         /* 17 digits */
		"CapEff:\tzz\n",
		"NoNewPrivs:\tyes\n",
		"Seccomp:\t2 2\n",
		"Groups:\t4,27\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct bk_proc_status s;
		if (bk_proc_status_parse(bad[i], strlen(bad[i]), &s) != -EINVAL)
			fail_msg("accepted: %s", bad[i]);
	}
}

static void counts_groups_beyond_the_kept(void **state)
{
	(void)state;
	char t[1024] = "Groups:";
	for (int i = 0; i < BK_STATUS_GROUPS_MAX + 5; i++)
		snprintf(t + strlen(t), sizeof(t) - strlen(t), " %d", i + 100);
	strcat(t, "\n");
	struct bk_proc_status s;
	bk_proc_status_parse(t, strlen(t), &s);
	assert_int_equal(s.n_groups, BK_STATUS_GROUPS_MAX + 5);
	assert_int_equal(s.groups[BK_STATUS_GROUPS_MAX - 1], 100 + BK_STATUS_GROUPS_MAX - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_a_sample),
		cmocka_unit_test(reads_this_process),
		cmocka_unit_test(empty_groups_and_missing_fields),
		cmocka_unit_test(refuses_malformed_fields),
		cmocka_unit_test(counts_groups_beyond_the_kept),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
