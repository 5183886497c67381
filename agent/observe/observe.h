/* SPDX-License-Identifier: Apache-2.0 */
/* Observable isolation: reports read back from the kernel at the moment
 * they are asked for (inspect, status, /isolation), verify (probes from a
 * real exec context of a sandbox), and the node self-test that marks the
 * node unsafe when a layer does not hold. */
#pragma once
#include "agent/api/api.h"

cJSON *bk_obs_pod_report(struct bk_agent *a, const struct bk_pod *p);
cJSON *bk_obs_status(struct bk_agent *a);
char *bk_obs_verify(struct bk_agent *a, const struct bk_pod *p, const cJSON *args);
/* One self-test now (updates a->node_safe); 0 when it passed. */
int bk_selftest_run(struct bk_agent *a);
/* Start the periodic self-test thread. */
int bk_selftest_start(struct bk_agent *a);
void bk_selftest_stop(void);
/* Record an exec's denials in the per-sandbox/per-reason counters. */
void bk_obs_count_denials(struct bk_agent *a, const struct bk_pod *p, const struct bk_exec_result *r);
int bk_parse_target(const char *s, int *family, unsigned char addr[16], uint16_t *port);
