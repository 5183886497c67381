/* SPDX-License-Identifier: Apache-2.0 */
/* Lines of /proc/PID/mountinfo (agent/parse/mounts.c): the fields the wipe
 * and the exec's /proc masks use, escapes, optional fields, bad lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "agent/parse/mounts.h"

static const char table[] =
	"22 1 0:20 / / ro,relatime master:1 - overlay overlay rw,lowerdir=/a\n"
	"23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
	"24 23 0:5 /null /proc/kcore rw,nosuid - devtmpfs udev rw,size=10k\n"
	"25 23 0:22 / /proc/acpi ro,relatime - tmpfs tmpfs ro,size=0k\n"
	"26 23 0:21 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
	"27 22 0:23 / /with\\040space rw shared:4 master:2 - tmpfs tmpfs rw\n"
	"garbage line\n"
	"28 22 0:24 / /mnt/x rw,nosuid,rootcontext=ro - ext4 /dev/sda rw";

/* What each line of the table reads as: rc 1 with the fields, or the
 * error of a bad line (then the next line is read). */
static const struct {
	int rc;
	const char *point, *fstype; /* fstype NULL: not looked at */
	bool ro;
} want[] = {
	{ 1, "/", "overlay", true },
	{ 1, "/proc", "proc", false },
	{ 1, "/proc/kcore", "devtmpfs", false },
	{ 1, "/proc/acpi", "tmpfs", true },
	{ 1, "/proc/sys", "proc", true },
	{ 1, "/with space", "tmpfs", false },
	{ -EINVAL, NULL, NULL, false },
	{ 1, "/mnt/x", "ext4", false }, /* "rootcontext=ro" is not "ro" */
	{ 0, NULL, NULL, false },
};

static void reads_the_table(void **state)
{
	(void)state;
	struct bk_mount_line m;
	size_t pos = 0;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		assert_int_equal(bk_mountinfo_next(table, &pos, &m), want[i].rc);
		if (want[i].rc != 1)
			continue;
		assert_string_equal(m.point, want[i].point);
		assert_string_equal(m.fstype, want[i].fstype);
		assert_int_equal(m.ro, want[i].ro);
	}
}

static void refuses_nul_and_missing_fstype(void **state)
{
	(void)state;
	struct bk_mount_line m;
	size_t pos = 0;
	assert_int_equal(bk_mountinfo_next("1 2 0:1 / /a\\000b rw - tmpfs x rw\n", &pos, &m), -EINVAL);
	pos = 0;
	assert_int_equal(bk_mountinfo_next("1 2 0:1 / /a rw shared:1\n", &pos, &m), -EINVAL);
	pos = 0;
	assert_int_equal(bk_mountinfo_next("", &pos, &m), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_the_table),
		cmocka_unit_test(refuses_nul_and_missing_fstype),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
