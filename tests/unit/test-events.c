/* SPDX-License-Identifier: Apache-2.0 */
/* The node's event ring (agent/observe/events.c): cursors, a reader that
 * fell more than the ring behind (told how many it lost, given the oldest
 * kept), waiting with a timeout, a publisher never blocked, shutdown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/observe/events.h"
#include "lib/util.h"

static double ms_since(const struct timespec *a)
{
	struct timespec b;
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

static void publish(int i)
{
	char l[64];
	int n = snprintf(l, sizeof(l), "{\"event\":\"exec\",\"n\":%d}", i);
	bk_events_publish(l, (size_t)n);
}

static int number(const char *line)
{
	const char *p = strstr(line, "\"n\":");
	return p ? atoi(p + 4) : -1;
}

static void kinds(void **st)
{
	assert_true(bk_events_wants("exec"));
	assert_true(bk_events_wants("exec_start"));
	assert_true(bk_events_wants("denied"));
	assert_true(bk_events_wants("selftest"));
	assert_false(bk_events_wants("request"));
	assert_false(bk_events_wants("started"));
}

/* runs first: the ring starts empty */
static void in_order_then_timeout(void **st)
{
	uint64_t cur = bk_events_head();
	assert_int_equal(cur, 0);
	for (int i = 1; i <= 3; i++)
		publish(i);
	assert_int_equal(bk_events_head(), 3);
	for (int i = 1; i <= 3; i++) {
		char *l;
		uint64_t lost;
		assert_int_equal(bk_events_next(&cur, &l, &lost, 0), 1);
		assert_int_equal(number(l), i);
		assert_int_equal(lost, 0);
		free(l);
	}
	char *l;
	uint64_t lost;
	struct timespec a;
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(bk_events_next(&cur, &l, &lost, 120), 0);
	double ms = ms_since(&a);
	assert_null(l);
	assert_true(ms >= 100 && ms < 1000);
}

/* a reader more than the ring behind: told how many it lost, then given
 * the oldest line still kept, and every later one in order */
static void overrun(void **st)
{
	uint64_t cur = bk_events_head();
	int first = (int)cur + 1;
	int extra = 100;
	for (int i = 0; i < BK_EVENTS_RING + extra; i++)
		publish(first + i);
	char *l;
	uint64_t lost;
	assert_int_equal(bk_events_next(&cur, &l, &lost, 0), 1);
	assert_int_equal(lost, extra);
	assert_int_equal(number(l), first + extra);
	free(l);
	int n = 1;
	while (bk_events_next(&cur, &l, &lost, 0) == 1) {
		assert_int_equal(lost, 0);
		assert_int_equal(number(l), first + extra + n);
		free(l);
		n++;
	}
	assert_int_equal(n, BK_EVENTS_RING);
}

static void *late_publisher(void *arg)
{
	struct timespec d = { 0, 50 * 1000000L };
	nanosleep(&d, NULL);
	publish(424242);
	return NULL;
}

/* a waiting reader wakes when a line is published, not at its timeout */
static void wakes_on_publish(void **st)
{
	uint64_t cur = bk_events_head();
	pthread_t th;
	pthread_create(&th, NULL, late_publisher, NULL);
	struct timespec a;
	clock_gettime(CLOCK_MONOTONIC, &a);
	char *l;
	uint64_t lost;
	assert_int_equal(bk_events_next(&cur, &l, &lost, 5000), 1);
	double ms = ms_since(&a);
	pthread_join(th, NULL);
	assert_int_equal(number(l), 424242);
	free(l);
	assert_true(ms < 1000);
}

/* runs last: shutdown wakes a waiting reader at once */
static void shutdown_wakes(void **st)
{
	uint64_t cur = bk_events_head();
	assert_false(bk_events_stopping());
	bk_events_shutdown();
	assert_true(bk_events_stopping());
	struct timespec a;
	clock_gettime(CLOCK_MONOTONIC, &a);
	char *l;
	uint64_t lost;
	assert_int_equal(bk_events_next(&cur, &l, &lost, 5000), 0);
	assert_true(ms_since(&a) < 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kinds),
		cmocka_unit_test(in_order_then_timeout),
		cmocka_unit_test(overrun),
		cmocka_unit_test(wakes_on_publish),
		cmocka_unit_test(shutdown_wakes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
