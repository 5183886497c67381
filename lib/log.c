/* SPDX-License-Identifier: Apache-2.0 */
/* Each line is built with cJSON (no hand-written escaping) and written with
 * one write(2), so lines from concurrent threads never interleave (a pipe
 * in a pod: writes up to PIPE_BUF are atomic; longer lines are still one
 * call, and the lock keeps them whole on a file or terminal). */
#include <ctype.h>
#include "lib/log.h"

#include <cJSON.h>
#include <pthread.h>
#include <time.h>

static int out_fd = STDOUT_FILENO;
static const char *component;
static const char *name_key = "event";
static enum log_level min_level = LOG_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void log_setup(int fd, const char *comp, const char *key)
{
	out_fd = fd;
	component = comp;
	name_key = key ? key : "event";
}

void log_set_level(enum log_level min) { min_level = min; }

static bool (*tap_wants)(const char *name);
static void (*tap_fn)(const char *line, size_t len);

void log_set_tap(bool (*wants)(const char *name), void (*fn)(const char *line, size_t len))
{
	tap_wants = wants;
	tap_fn = fn;
}

const char *log_level_name(enum log_level l)
{
	switch (l) {
	case LOG_DEBUG:
		return "debug";
	case LOG_INFO:
		return "info";
	case LOG_WARN:
		return "warn";
	default:
		return "error";
	}
}

static void add_fields(cJSON *o, const struct log_field *f)
{
	for (; f && f->type != LF_END; f++) {
		switch (f->type) {
		case LF_STR:
			if (f->s)
				cJSON_AddStringToObject(o, f->key, f->s);
			else
				cJSON_AddNullToObject(o, f->key);
			break;
		case LF_INT:
			cJSON_AddNumberToObject(o, f->key, (double)f->i);
			break;
		case LF_NUM:
			cJSON_AddNumberToObject(o, f->key, f->d);
			break;
		case LF_BOOL:
			cJSON_AddBoolToObject(o, f->key, f->i != 0);
			break;
		case LF_OBJ:
			add_fields(cJSON_AddObjectToObject(o, f->key), f->o);
			break;
		default:
			break;
		}
	}
}

static void write_line(char *line)
{
	size_t n = strlen(line);
	line[n] = '\n'; /* replaces the NUL; n+1 bytes are written, never read as a string */
	const char *p = line;
	size_t left = n + 1;
	pthread_mutex_lock(&log_lock);
	while (left > 0) {
		ssize_t w = write(out_fd, p, left);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		p += w;
		left -= (size_t)w;
	}
	pthread_mutex_unlock(&log_lock);
}

void log_emit(enum log_level level, const char *name, const struct log_field *fields)
{
	bool tap = tap_fn && tap_wants && tap_wants(name);
	if (level < min_level && !tap)
		return;
	int saved_errno = errno;
	struct timespec ts;
	struct tm tm;
	char tbuf[40];
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t tl = strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(tbuf + tl, sizeof(tbuf) - tl, ".%03ldZ", ts.tv_nsec / 1000000L);

	cJSON *o = cJSON_CreateObject();
	if (o) {
		cJSON_AddStringToObject(o, "ts", tbuf);
		cJSON_AddStringToObject(o, "level", log_level_name(level));
		if (component)
			cJSON_AddStringToObject(o, "component", component);
		/* every line has both "event" (a name scripts match) and "msg"
		 * (a sentence people read), whichever the caller named its line by */
		bool by_event = streq(name_key, "event");
		if (!by_event) {
			char slug[48];
			size_t n = 0;
			/* the name's words up to its first clause ("cannot listen",
			 * "agent unavailable", "invalid SIDECAR_LISTEN (...)") */
			for (const char *c = name; *c && !strchr("(;:,", *c) && n < sizeof(slug) - 1; c++) {
				if (isalnum((unsigned char)*c))
					slug[n++] = (char)tolower((unsigned char)*c);
				else if (n && slug[n - 1] != '_')
					slug[n++] = '_';
				if (c - name > 40 && slug[n - 1] == '_')
					break;
			}
			while (n && slug[n - 1] == '_')
				n--;
			slug[n] = '\0';
			cJSON_AddStringToObject(o, "event", slug);
		}
		cJSON_AddStringToObject(o, name_key, name);
		add_fields(o, fields);
		if (by_event && !cJSON_GetObjectItemCaseSensitive(o, "msg")) {
			char msg[128];
			snprintf(msg, sizeof(msg), "%s", name);
			for (char *c = msg; *c; c++)
				if (*c == '_')
					*c = ' ';
			cJSON_AddStringToObject(o, "msg", msg);
		}
		char *line = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		if (line) {
			if (tap)
				tap_fn(line, strlen(line));
			if (level >= min_level)
				write_line(line);
			free(line);
		}
	}
	errno = saved_errno;
}

void log_emitf(enum log_level level, const char *name, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_at(level, name, LS("msg", msg));
}
