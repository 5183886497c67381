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
#include <pthread.h>
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

/* bk_later: work for after a request's answer (an exec's cgroups'
 * removal, agent/isolate/exec.c) runs when the window closes, in order;
 * outside a window, on another thread, or past BK_LATER_MAX, the caller is
 * told to do it at once (-1), so that nothing given to it is ever lost. */
static char order[BK_LATER_MAX + 8];
static int n_order;
static void note(void *arg) { order[n_order++] = (char)(intptr_t)arg; }

static void *other_thread(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)bk_later(note, (void *)'x');
}

static void test_later(void **state)
{
	(void)state;
	n_order = 0;
	assert_int_equal(bk_later(note, (void *)'a'), -1); /* no window */
	bk_later_open();
	assert_int_equal(bk_later(note, (void *)'b'), 0);
	assert_int_equal(bk_later(note, (void *)'c'), 0);
	pthread_t t;
	void *r;
	assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
	assert_int_equal(pthread_join(t, &r), 0);
	assert_int_equal((intptr_t)r, -1); /* the window is this thread's */
	assert_int_equal(n_order, 0);      /* nothing ran yet */
	bk_later_close();
	assert_int_equal(n_order, 2);
	assert_memory_equal(order, "bc", 2);
	assert_int_equal(bk_later(note, (void *)'d'), -1); /* closed again */
	/* full: the one past BK_LATER_MAX is refused, the others all run */
	n_order = 0;
	bk_later_open();
	for (int i = 0; i < BK_LATER_MAX; i++)
		assert_int_equal(bk_later(note, (void *)'e'), 0);
	assert_int_equal(bk_later(note, (void *)'f'), -1);
	bk_later_close();
	assert_int_equal(n_order, BK_LATER_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_closep_forgets),
		cmocka_unit_test(test_cleanup_close),
		cmocka_unit_test(test_later),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
