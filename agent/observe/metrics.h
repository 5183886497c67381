/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text metrics and the readiness endpoint (libmicrohttpd), on
 * --metrics ADDR (default 127.0.0.1:9464; "off" disables it). */
#pragma once
#include <stddef.h>

#include "agent/agent.h"

int bk_metrics_start(struct bk_agent *a, const char *addr, char *err, size_t errlen);
void bk_metrics_stop(void);
/* The metrics text (caller frees). With a pod, only that pod's own series
 * (what its shim may show on GET /metrics): its execs, durations, layer
 * failures, live execs and denials, plus boxkite_selftest_ok; no
 * node-wide series. Without (the --metrics endpoint): the whole node. */
char *bk_metrics_text(struct bk_agent *a, const struct bk_pod *only);
