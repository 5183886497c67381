/* SPDX-License-Identifier: Apache-2.0 */
/* File operations of API.md (/file-create, /view, /str-replace, /ls, /glob,
 * /grep, /present-files) on the sandbox container's files, each in a
 * short-lived de-privileged helper in the container's mount namespace
 * (files.c explains the confinement). */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include "agent/api/api.h"

bool bk_files_is_op(const char *op);
/* op is one for which bk_files_is_op() holds; returns the response text. */
char *bk_files_op(struct bk_agent *a, const struct bk_pod *pod, const char *op, const cJSON *args);

/* Remove the contents of /workspace, /tmp and /mnt/user-data/outputs in the
 * pod's sandbox container (never following a link, never crossing a mount).
 * Entries the sandbox user cannot remove are counted in *kept. Returns 0,
 * or -errno with a sentence in err when the wipe could not run. */
int bk_files_wipe(struct bk_agent *a, const struct bk_pod *pod, uint64_t *removed, uint64_t *kept, char *err,
		  size_t errlen);

/* MIME type from a file name's extension (application/octet-stream when
 * unknown). */
const char *bk_mime_type(const char *name);
