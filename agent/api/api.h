/* SPDX-License-Identifier: Apache-2.0 */
/* agent/api/ — the API edge: the only code of the agent that touches JSON.
 * Requests are validated into plain structs here and handed down; typed
 * results come back up and become responses here.
 *   api.c      the operation table (name, who may call it, pod op, tool)
 *              and the dispatcher; /tool-call
 *   reply.c    response envelopes and error bodies (one builder each)
 *   op_exec.c     /exec: argument validation, the exec response and receipt
 *   op_files.c    the file operations' arguments and responses
 *   op_observe.c  /isolation, inspect, status and verify responses
 *   op_session.c  /configure's arguments and response
 *   op_policy.c   policy_set (boxkitectl policy set): arguments and response
 *   op_pty.c      terminals: the /pty WebSocket's op and /pty-exec
 *   op_process.c  the /process routes: arguments and responses (session/procs.c runs them) */
#pragma once
#include <cJSON.h>
#include <stdarg.h>
#include "agent/agent.h"
#include "agent/api/reply.h"

enum bk_caller_kind { BK_CALLER_SHIM, BK_CALLER_ADMIN };

/* Handle one request text; returns the response text (malloc'd). pod is
 * the kernel-derived identity for shim callers (NULL for admin). */
char *bk_api_handle(struct bk_agent *a, enum bk_caller_kind kind, const struct bk_pod *caller, const char *req,
		    size_t len);
/* The connection of the request being handled on this thread (-1: none). */
extern __thread int bk_api_client_fd;

/* /exec's argument check, for tests and fuzzing (agent/api/op_exec.h). */
#include "agent/api/op_exec.h"
