/* SPDX-License-Identifier: Apache-2.0 */
/* /configure at the API edge: request parsing and the response; the
 * sessions themselves are agent/session/. */
#pragma once
#include <cJSON.h>

#include "agent/agent.h"

/* {"session_id", "allowed_commands"} -> the response text. */
char *bk_api_configure(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args);
