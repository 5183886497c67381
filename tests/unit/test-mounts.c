/* SPDX-License-Identifier: Apache-2.0 */
/* Lines of /proc/PID/mountinfo (agent/parse/mounts.c): the fields the wipe
 * and the exec's /proc masks use, escapes, optional fields, bad lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
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

static void reads_the_table(void **state)
{
	(void)state;
	struct bk_mount_line m;
	size_t pos = 0;
	assert_int_equal(bk_mountinfo_next(table, &pos, &m), 1);
	assert_string_equal(m.point, "/");
	assert_string_equal(m.fstype, "overlay");
	assert_true(m.ro);
	assert_int_equal(bk_mountinfo_next(table, &pos, &m), 1);
	assert_string_equal(m.point, "/proc");
	assert_false(m.ro);
	assert_int_equal(bk_mountinfo_next(table, &pos, &m), 1);
	assert_string_equal(m.point, "/proc/kcore");
	assert_string_equal(m.fstype, "devtmpfs");
	assert_int_equal(bk_mountinfo_next(table, &pos, &m), 1);
	assert_string_equal(m.point, "/proc/acpi");
	assert_true(m.ro);
	assert_int_equal(bk_mountinfo_next(table, &pos, &m), 1);
	assert_string_equal(m.point, "/proc/sys");
	assert_string_equal(m.fstype, "proc");
	assert_true(m.ro);
	assert_int_equal(bk_mountinfo_next(table, &pos, &m), 1);
	assert_string_equal(m.point, "/with space");
	assert_string_equal(m.fstype, "tmpfs");
	assert_false(m.ro);
	assert_int_equal(bk_mountinfo_next(table, &pos, &m), -EINVAL);
	assert_int_equal(bk_mountinfo_next(table, &pos, &m), 1);
	assert_string_equal(m.point, "/mnt/x");
	assert_false(m.ro); /* "rootcontext=ro" is not "ro" */
	assert_int_equal(bk_mountinfo_next(table, &pos, &m), 0);
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
