/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text metrics and the readiness endpoint (libmicrohttpd), on
 * --metrics ADDR (default 127.0.0.1:9464; "off" disables it). */
#pragma once
#include <stddef.h>

#include "agent/agent.h"

int bk_metrics_start(struct bk_agent *a, const char *addr, char *err, size_t errlen);
void bk_metrics_stop(void);
/* The metrics text (caller frees). With a pod, the per-sandbox series are
 * limited to that pod (what its shim may show on GET /metrics). */
char *bk_metrics_text(struct bk_agent *a, const struct bk_pod *only);
