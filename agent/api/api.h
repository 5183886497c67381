/* SPDX-License-Identifier: Apache-2.0 */
/* Request handling: validated structs at the boundary, cJSON stays here. */
#pragma once
#include <cJSON.h>
#include <stdarg.h>
#include "agent/agent.h"

enum bk_caller_kind { BK_CALLER_SHIM, BK_CALLER_ADMIN };

/* Handle one request text; returns the response text (malloc'd). pod is
 * the kernel-derived identity for shim callers (NULL for admin). */
char *bk_api_handle(struct bk_agent *a, enum bk_caller_kind kind, const struct bk_pod *caller, const char *req,
		    size_t len);
/* The connection of the request being handled on this thread (-1: none). */
extern __thread int bk_api_client_fd;

/* {"status": status, "body": body} (body taken over). */
char *bk_api_respond(int status, cJSON *body);
/* The exec operation (API.md /exec) on a resolved pod. */
char *bk_api_exec(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args);
/* Validation of /exec arguments alone (NULL when valid, else the error
 * response); for tests and fuzzing. */
char *bk_api_check_exec_args(const struct bk_config *c, const cJSON *args);
struct bk_refusal;
/* The response to a refused exec (session/run.h). */
char *bk_api_refusal(const struct bk_refusal *ref);
/* {"detail": <formatted>, "code": code} */
cJSON *bk_api_error_body(const char *code, const char *fmt, va_list ap);
char *bk_api_error(int status, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
