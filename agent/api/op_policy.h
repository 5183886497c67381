/* SPDX-License-Identifier: Apache-2.0 */
/* policy_set at the API edge (admin only): {"sandbox", "profile"} — the
 * live policy itself is agent/session/livepolicy.c. */
#pragma once
#include <cJSON.h>

#include "agent/agent.h"

/* {"profile": NAME, or null/"" to remove the override} -> {"pod",
 * "namespace", "pod_uid", "old", "new", "running_execs"}. */
char *bk_api_policy_set(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args);
