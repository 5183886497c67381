/* SPDX-License-Identifier: Apache-2.0 */
/* Restart recovery. Each exec leaves a record in <state>/execs/<id>.json
 * from the moment its cgroup exists until it is gone (records.h), and its
 * BPF links pinned in <bpffs>/exec-<id>/ — so an exec never runs
 * unfiltered when the agent dies. A new agent kills every exec the old one
 * left (the request that started it is gone with the old agent's socket)
 * and removes its cgroups in every hierarchy. Its links are unpinned only
 * once the kernel has released the cgroup: until then a socket it created
 * may still live (held by another process), and the old programs keep
 * judging it with the old maps, from which recovery removes the exec's
 * policy entry (stale_socket from then on); the new agent's reaper unpins
 * them later (filter.h, bk_filter_adopt). */
#pragma once
#include "agent/isolate/exec.h"

/* Returns the number of execs killed and cleaned up, or -errno. */
int bk_recover(struct bk_engine *e);
