/* SPDX-License-Identifier: Apache-2.0 */
/* Exec records on disk: <state>/execs/<exec id>.json (the format:
 * agent/parse/records.h), written before anything can run in an exec's
 * cgroup and removed once its cgroups are gone, so that a new agent finds
 * every exec an old one left (recover.h). */
#pragma once
#include "agent/parse/config.h"

struct exec_ctx;
/* Step "cgroup" (second half) of an exec: its record, naming its cgroups
 * and its pod. */
int bk_step_record(struct exec_ctx *x);
/* The record of exec_id is gone (its cgroups are). */
void bk_exec_record_remove(const struct bk_config *c, const char *exec_id);
