/* SPDX-License-Identifier: Apache-2.0 */
/* /configure and /tool-call at the API edge: request parsing and
 * responses; the sessions themselves are agent/session/. */
#pragma once
#include "agent/api/api.h"

/* /configure: {"session_id", "allowed_commands"} -> the response text. */
char *bk_api_configure(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args);
/* /tool-call: {"tool_name", "arguments"} -> the named tool's response. */
char *bk_tool_call(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args);
