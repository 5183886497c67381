/* SPDX-License-Identifier: Apache-2.0 */
/* Sessions: /configure and /tool-call. */
#pragma once
#include "api.h"

char *bk_session_configure(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args);
char *bk_tool_call(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args);
