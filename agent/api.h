/* SPDX-License-Identifier: Apache-2.0 */
/* Request handling: validated structs at the boundary, cJSON stays here. */
#pragma once
#include <cJSON.h>
#include "exec.h"

struct bk_agent {
	struct bk_config cfg;
	struct bk_engine engine;
	uint64_t start_ns;
	/* counters (atomic) */
	uint64_t requests, refused_callers, execs_ok, execs_failed;
};

enum bk_caller_kind { BK_CALLER_SHIM, BK_CALLER_ADMIN };

/* Handle one request text; returns the response text (malloc'd). pod is
 * the kernel-derived identity for shim callers (NULL for admin). */
char *bk_api_handle(struct bk_agent *a, enum bk_caller_kind kind, const struct bk_pod *caller, const char *req,
		    size_t len);
/* {"status": status, "body": body} (body taken over). */
char *bk_api_respond(int status, cJSON *body);
/* The exec operation (API.md /exec) on a resolved pod. */
char *bk_api_exec(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args);
char *bk_api_error(int status, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
