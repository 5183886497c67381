/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox container's masks of its /proc (the runtime's OCI
 * maskedPaths and readonlyPaths), read from its init's mount table before
 * an exec's clone: the exec's own /proc gets them again (child.c).
 *
 * Kept per container instance between its execs (masks.c explains when
 * they are read again, instances.h when they go): an exec then checks them
 * with a poll and a stat instead of reading and parsing the table (about
 * 100 us of an exec's round trip here). */
#pragma once
#include "agent/caller/pod.h"
#include "lib/err.h"

#include <stdbool.h>

#define PROC_MASKS_MAX 64
struct proc_mask {
	char path[128];
	bool masked; /* another filesystem over it: /dev/null or an empty tmpfs; else read-only */
};
struct proc_masks {
	int n;
	struct proc_mask m[PROC_MASKS_MAX];
};

/* The masks for an exec in pod's sandbox container, the container alive
 * now. Fails closed (layer container): the exec does not run without
 * them. */
int bk_proc_masks_get(const struct bk_pod *pod, struct proc_masks *pm, struct bk_error *err);
