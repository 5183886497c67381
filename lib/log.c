/* SPDX-License-Identifier: Apache-2.0 */
#include "lib/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <time.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void ts_now(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

void bk_log_obj(const char *level, const char *event, cJSON *fields)
{
	cJSON *o = cJSON_CreateObject();
	char ts[40];
	ts_now(ts, sizeof(ts));
	cJSON_AddStringToObject(o, "ts", ts);
	cJSON_AddStringToObject(o, "level", level);
	cJSON_AddStringToObject(o, "event", event);
	if (fields) {
		cJSON *it = fields->child;
		while (it) {
			cJSON *next = it->next;
			cJSON_DetachItemViaPointer(fields, it);
			cJSON_AddItemToObject(o, it->string, it);
			it = next;
		}
		cJSON_Delete(fields);
	}
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s)
		return;
	pthread_mutex_lock(&log_lock);
	fputs(s, stdout);
	fputc('\n', stdout);
	fflush(stdout);
	pthread_mutex_unlock(&log_lock);
	free(s);
}

void bk_log(const char *level, const char *event, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON *f = cJSON_CreateObject();
	cJSON_AddStringToObject(f, "msg", msg);
	bk_log_obj(level, event, f);
}
