/* SPDX-License-Identifier: Apache-2.0 */
/* the /process routes at the API edge: the reference sidecar's request and response
 * shapes; the processes themselves are agent/session/procs.c. */
#pragma once
#include <cJSON.h>

#include "agent/agent.h"

/* op: process_start, process_output, process_input, process_stop,
 * process_list, process_kill_all; args as the shim forwards them (the
 * client's body, plus "process_id" from the path and "since_offset" from
 * the query as the client wrote it). */
char *bk_api_process(struct bk_agent *a, const struct bk_pod *pod, const char *op, const cJSON *args);
/* The argument checks alone (NULL: valid; else the 4xx answer), for the
 * fuzzer: a live request reaches them only once its sandbox resolved. */
char *bk_api_check_process_args(const struct bk_config *c, const char *op, const cJSON *args);
