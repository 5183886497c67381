/* SPDX-License-Identifier: Apache-2.0 */
/* Terminals (op_pty.c): op "pty" (the /pty WebSocket, boxkitectl exec -it)
 * and op "pty_exec" (POST /pty-exec). */
#pragma once
#include <cJSON.h>
#include <sys/types.h>

#include "agent/agent.h"

/* A live terminal on client_fd (the protocol: op_pty.c). Returns the last
 * answer (the exit event, or a refusal), NULL when the requester is gone. */
char *bk_api_pty(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args, int client_fd);
/* POST /pty-exec. */
char *bk_api_pty_exec(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args, int client_fd);
/* Strict base64 (Python's b64decode(validate=True)): the decoded length
 * (out holds 3*len/4 bytes), or -1. For tests and fuzzing too. */
ssize_t bk_pty_b64_decode(const char *in, size_t len, unsigned char *out);
