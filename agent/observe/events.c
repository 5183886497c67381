/* SPDX-License-Identifier: Apache-2.0 */
/* The node's event stream: a ring of log lines and a condition variable
 * (events.h). */
#include "agent/observe/events.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/util.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;
static pthread_once_t cond_once = PTHREAD_ONCE_INIT;
static char *ring[BK_EVENTS_RING];
static uint64_t head; /* seq of the newest event; event s is ring[s % RING] */
static bool stopping;

static void cond_init(void)
{
	mono_cond_init(&cond);
}

bool bk_events_wants(const char *name)
{
	return streq(name, "exec") || streq(name, "exec_start") || streq(name, "denied") || streq(name, "selftest");
}

void bk_events_publish(const char *line, size_t len)
{
	pthread_once(&cond_once, cond_init);
	char *copy = strndup(line, len);
	if (!copy)
		return;
	pthread_mutex_lock(&lock);
	head++;
	free(ring[head % BK_EVENTS_RING]);
	ring[head % BK_EVENTS_RING] = copy;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

uint64_t bk_events_head(void)
{
	pthread_mutex_lock(&lock);
	uint64_t h = head;
	pthread_mutex_unlock(&lock);
	return h;
}

int bk_events_next(uint64_t *cursor, char **out, uint64_t *lost, int timeout_ms)
{
	pthread_once(&cond_once, cond_init);
	struct timespec until = mono_after_ms(timeout_ms > 0 ? (unsigned)timeout_ms : 0);
	*out = NULL;
	*lost = 0;
	pthread_mutex_lock(&lock);
	while (head <= *cursor && !stopping)
		if (pthread_cond_timedwait(&cond, &lock, &until) == ETIMEDOUT)
			break;
	int r = 0;
	if (head > *cursor) {
		uint64_t oldest = head >= BK_EVENTS_RING ? head - BK_EVENTS_RING + 1 : 1;
		if (*cursor + 1 < oldest) {
			*lost = oldest - (*cursor + 1);
			*cursor = oldest - 1;
		}
		*cursor += 1;
		*out = strdup(ring[*cursor % BK_EVENTS_RING]);
		r = *out ? 1 : -ENOMEM;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

void bk_events_shutdown(void)
{
	pthread_once(&cond_once, cond_init);
	pthread_mutex_lock(&lock);
	stopping = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

bool bk_events_stopping(void)
{
	pthread_mutex_lock(&lock);
	bool s = stopping;
	pthread_mutex_unlock(&lock);
	return s;
}
