/* SPDX-License-Identifier: Apache-2.0 */
/* Responses of the observability operations (inspect and /isolation,
 * status, verify), built from agent/observe/'s typed reports. */
#pragma once
#include <cJSON.h>

#include "agent/agent.h"

/* inspect, /isolation: the pod's isolation read back from the kernel. */
char *bk_api_inspect(struct bk_agent *a, const struct bk_pod *p);
/* status (admin): the node and every sandbox pod on it. */
char *bk_api_status(struct bk_agent *a);
/* The probed kernel features (status "features", receipt
 * isolation.features): each feature's name -> present, landlock_abi,
 * identity (the path callers are identified by). */
cJSON *bk_api_features_json(const struct bk_features *f);
/* verify: {"hold": seconds (0..60)} -> the probes' verdicts; client_fd is
 * the requester's connection (its hang-up ends the probe exec). */
char *bk_api_verify(struct bk_agent *a, const struct bk_pod *p, const cJSON *args, int client_fd);
/* events (admin): {"follow": bool, "pod": name, "last": n (0..1024, default
 * 50; with follow, default 0)}. Without follow: {"events": [the last n
 * event lines as objects], "lost": 0}. With follow: on client_fd, one frame
 * {"status":200,"body":{"following":true}}, then each event as a frame
 * {"status":200,"body":<event>} as it is published (a reader too slow for
 * the ring gets {"event":"events_lost","lost":n}), until the client hangs
 * up (NULL returned: nothing more to send) or the agent stops (the last
 * frame {"event":"end","msg":"agent stopping"}). */
char *bk_api_events(struct bk_agent *a, const cJSON *args, int client_fd);
