/* SPDX-License-Identifier: Apache-2.0 */
/* JSON-lines logs, one object per line written with a single write(2), for
 * the agent (stdout) and the shim (stderr) alike.
 *
 *   agent: {"ts":…,"level":…,"event":NAME, fields…}
 *   shim:  {"ts":…,"level":…,"component":"boxkite-shim","msg":NAME, fields…}
 *
 * Fields are typed values (LS/LI/LD/LB/LO), not JSON objects: code below the
 * API edge never builds JSON to log. Never pass a secret (token, key,
 * secret_env value, header value, body) to these. */
#pragma once
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/util.h"

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_field_type { LF_END, LF_STR, LF_INT, LF_NUM, LF_BOOL, LF_OBJ };
struct log_field {
	const char *key;
	enum log_field_type type;
	const char *s;                 /* LF_STR (NULL logs null) */
	long long i;                   /* LF_INT, LF_BOOL */
	double d;                      /* LF_NUM */
	const struct log_field *o;     /* LF_OBJ: a nested object, LF_END-terminated */
};
#define LS(k, v) ((struct log_field){ .key = (k), .type = LF_STR, .s = (v) })
#define LI(k, v) ((struct log_field){ .key = (k), .type = LF_INT, .i = (long long)(v) })
#define LD(k, v) ((struct log_field){ .key = (k), .type = LF_NUM, .d = (double)(v) })
#define LB(k, v) ((struct log_field){ .key = (k), .type = LF_BOOL, .i = !!(v) })
#define LO(k, ...) \
	((struct log_field){ .key = (k), .type = LF_OBJ, .o = (const struct log_field[]){ __VA_ARGS__, { .type = LF_END } } })
#define LEND ((struct log_field){ .type = LF_END })

/* Where lines go and how they are named: fd, "component" value (NULL: no
 * such field), the key of the line's name ("event" or "msg"). Defaults:
 * stdout, no component, "event" (the agent's). */
void log_setup(int fd, const char *component, const char *name_key);
void log_set_level(enum log_level min);
const char *log_level_name(enum log_level l);
void log_emit(enum log_level level, const char *name, const struct log_field *fields);
/* A second destination for some lines, whatever the level filter: every
 * line whose name wants() accepts is also passed, complete (no newline),
 * to fn (the agent's event stream, agent/observe/events.c). */
void log_set_tap(bool (*wants)(const char *name), void (*fn)(const char *line, size_t len));
/* NAME with a printf-formatted "msg" field. */
void log_emitf(enum log_level level, const char *name, const char *fmt, ...) _printf_(3, 4);

#define log_at(lvl, name, ...) \
	log_emit((lvl), (name), (const struct log_field[]){ __VA_ARGS__ __VA_OPT__(, ) { .type = LF_END } })
#define log_debug(name, ...) log_at(LOG_DEBUG, name, __VA_ARGS__)
#define log_info(name, ...) log_at(LOG_INFO, name, __VA_ARGS__)
#define log_warn(name, ...) log_at(LOG_WARN, name, __VA_ARGS__)
#define log_error(name, ...) log_at(LOG_ERROR, name, __VA_ARGS__)
#define log_infof(name, ...) log_emitf(LOG_INFO, name, __VA_ARGS__)
#define log_warnf(name, ...) log_emitf(LOG_WARN, name, __VA_ARGS__)
#define log_errorf(name, ...) log_emitf(LOG_ERROR, name, __VA_ARGS__)
/* Log and return a negative errno in one line (systemd's log_error_errno). */
#define log_error_errno(err, name, fmt, ...)                                         \
	({                                                                           \
		int _e = (err) < 0 ? -(err) : (err);                                 \
		log_emitf(LOG_ERROR, name, fmt ": %s", ##__VA_ARGS__, strerror(_e)); \
		-_e;                                                                 \
	})
