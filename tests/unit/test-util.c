/* SPDX-License-Identifier: Apache-2.0 */
/* lib/util.h's descriptor cleanup: closep forgets what it closed, so that
 * a struct's descriptor closed early (a background process's pipes,
 * agent/session/procs.c) is not closed again at the struct's end, when its
 * number may already be another thread's descriptor (once: the sandbox
 * pidfd of a /configure, whose wipe then failed with EINVAL). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "lib/util.h"

#include <fcntl.h>
#include <unistd.h>

static void test_closep_forgets(void **state)
{
	(void)state;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	int n = fd;
	closep(&fd);
	assert_int_equal(fd, -1);
	assert_int_equal(fcntl(n, F_GETFD), -1);
	/* the number is taken again by somebody else's open ... */
	int other = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_int_equal(other, n);
	/* ... and a second closep of the first must leave it alone */
	closep(&fd);
	assert_true(fcntl(other, F_GETFD) >= 0);
	close(other);
}

static void test_cleanup_close(void **state)
{
	(void)state;
	int n;
	{
		_cleanup_close_ int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		n = fd;
	}
	assert_int_equal(fcntl(n, F_GETFD), -1);
	_cleanup_close_ int none = -1; /* nothing to close: no error, no effect */
	(void)none;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_closep_forgets),
		cmocka_unit_test(test_cleanup_close),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
