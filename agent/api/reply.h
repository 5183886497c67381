/* SPDX-License-Identifier: Apache-2.0 */
/* Reply builders (reply.c): the response envelope and error bodies. Every
 * api/ file builds its responses with these and nothing else. */
#pragma once
#include <cJSON.h>
#include <stdarg.h>

/* {"status": status, "body": body} (body taken over). */
char *bk_api_respond(int status, cJSON *body);
/* {"status": 200, "more": true, "body": body} (body taken over): one event
 * of a streamed answer (a streamed /exec, a terminal), more to follow. */
char *bk_api_event(cJSON *body);
/* {"status": status, "body": {"detail": <formatted>, "code": code}} */
char *bk_api_error(int status, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* 422 with the reference framework's list "detail": [{type, loc: ["body",
 * field], msg}] and "code": "validation_error". */
char *bk_api_invalid(const char *field, const char *type, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
struct bk_refusal;
/* The response to a refused exec (agent/session/exec_args.h). */
char *bk_api_refusal(const struct bk_refusal *ref);
