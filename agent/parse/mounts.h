/* SPDX-License-Identifier: Apache-2.0 */
/* A process's mount table (/proc/PID/mountinfo), one line at a time: the
 * mount point (as the process sees it, escapes decoded), the filesystem
 * type and whether the mount itself is read-only. Used for the session
 * wipe's roots (files/wipe.c) and the masks of an exec's /proc
 * (isolate/child.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct bk_mount_line {
	char point[4096];
	char fstype[64];
	bool ro; /* the mount's own options say "ro" */
};

/* The next line of text at *pos into m: 1, or 0 at the end; a malformed
 * line (too few fields, a field too long) answers -EINVAL and *pos moves
 * past it. */
int bk_mountinfo_next(const char *text, size_t *pos, struct bk_mount_line *m);
