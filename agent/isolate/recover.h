/* SPDX-License-Identifier: Apache-2.0 */
/* Restart recovery. Each exec leaves a record in <state>/execs/<id>.json
 * from the moment its cgroup exists until it is gone (records.h), and its
 * BPF programs are attached to its cgroup itself, which holds them without
 * the agent — so an exec never runs unfiltered when the agent dies. A new
 * agent kills every exec the old one left (the request that started it is
 * gone with the old agent's socket), also one whose record is missing
 * (found by the old agent's programs on its cgroup), and removes its
 * cgroups in every hierarchy. Its programs stay until the kernel releases
 * the cgroup: until then a socket it created may still live (held by
 * another process), and the old programs keep judging it with the old
 * maps, from which recovery removes the exec's policy entry (stale_socket
 * from then on). */
#pragma once
#include "agent/isolate/exec.h"

/* Returns the number of execs killed and cleaned up, or -errno. */
int bk_recover(struct bk_engine *e);
