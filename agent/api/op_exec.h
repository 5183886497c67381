/* SPDX-License-Identifier: Apache-2.0 */
/* /exec (op_exec.c). */
#pragma once
#include <cJSON.h>
#include <stdbool.h>

#include "agent/agent.h"

/* The exec operation (API.md /exec) on a resolved pod; client_fd is the
 * requester's connection (-1: none): its hang-up kills the exec. With
 * "stream": true (and may_stream, and a connection) its events go out on
 * client_fd as frames with "more" while it runs; the answer returned is
 * the last one (NULL when the requester went away meanwhile). */
char *bk_api_exec(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args, int client_fd, bool may_stream);
/* The "command" argument of /exec and /process/start: a non-empty string
 * of at most 256 KiB into *command; NULL, or the 422 answer. */
char *bk_api_command_arg(const cJSON *args, const char **command);
/* Validation of /exec arguments alone (NULL when valid, else the error
 * response); for tests and fuzzing. */
char *bk_api_check_exec_args(const struct bk_config *c, const cJSON *args);
struct bk_exec_args;
struct bk_exec_result;
/* The exec answer's fields after stdout/stderr (timed_out, truncated,
 * duration_ms, exec_id, isolation, denied, denied_total, receipt) into b:
 * a background process's once it ended (op_process.c). */
void bk_api_exec_result_fields(struct bk_agent *a, const struct bk_pod *pod, const struct bk_exec_args *ea,
			       struct bk_exec_result *res, cJSON *b);
/* The last answer of a streamed exec or a terminal: {"type": "exit",
 * "exit_code", ...bk_api_exec_result_fields's}. */
char *bk_api_exit_answer(struct bk_agent *a, const struct bk_pod *pod, const struct bk_exec_args *ea,
			 struct bk_exec_result *res);
