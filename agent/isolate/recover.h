/* SPDX-License-Identifier: Apache-2.0 */
/* Restart recovery. Each exec leaves a record in <state>/execs/<id>.json
 * from the moment its cgroup exists until it is gone (records.h), and its
 * BPF links pinned in <bpffs>/exec-<id>/ — so an exec never runs
 * unfiltered when the agent dies. A new agent kills every exec the old one
 * left (the request that started it is gone with the old agent's socket),
 * removes its cgroups in every hierarchy, and unpins its links. */
#pragma once
#include "agent/isolate/exec.h"

/* Returns the number of execs killed and cleaned up, or -errno. */
int bk_recover(struct bk_engine *e);
