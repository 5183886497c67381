/* SPDX-License-Identifier: Apache-2.0 */
/* JSON-lines logs on stdout: one object per line, written atomically.
 * Never pass a secret value (token, key, secret_env value) to these. */
#pragma once
#include <cJSON.h>
#include "lib/util.h"

void bk_log(const char *level, const char *event, const char *fmt, ...) _printf_(3, 4);
/* Adds "ts", "level" and "event" to fields (taken over and freed). */
void bk_log_obj(const char *level, const char *event, cJSON *fields);

#define log_info(ev, ...) bk_log("info", ev, __VA_ARGS__)
#define log_warn(ev, ...) bk_log("warn", ev, __VA_ARGS__)
#define log_error(ev, ...) bk_log("error", ev, __VA_ARGS__)
/* Log and return a negative errno in one line (systemd's log_error_errno). */
#define log_error_errno(err, ev, fmt, ...)                                                 \
	({                                                                                 \
		int _e = (err) < 0 ? -(err) : (err);                                       \
		bk_log("error", ev, fmt ": %s", ##__VA_ARGS__, strerror(_e));              \
		-_e;                                                                       \
	})
