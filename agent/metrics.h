/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text metrics and the readiness endpoint (libmicrohttpd), on
 * --metrics ADDR (default 127.0.0.1:9464; "off" disables it). */
#pragma once
#include "api.h"

int bk_metrics_start(struct bk_agent *a, const char *addr, char *err, size_t errlen);
void bk_metrics_stop(void);
/* The metrics text (caller frees). */
char *bk_metrics_text(struct bk_agent *a);
