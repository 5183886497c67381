/* SPDX-License-Identifier: Apache-2.0 */
/* The one error constructor (crun's crun_make_error, systemd's
 * log_error_errno): a failure carries a negative errno, the isolation layer
 * it belongs to (or none) and one human sentence, up the stack to the API
 * edge, which alone turns it into a response. */
#pragma once
#include <stddef.h>

#include "lib/util.h"

#define BK_LAYER_MAX 24
#define BK_ERRMSG_MAX 1024

struct bk_error {
	int r;                     /* negative errno, 0 = no error */
	char layer[BK_LAYER_MAX];  /* "cgroup", "bpf", "netns", ... or "" */
	char msg[BK_ERRMSG_MAX];
};

/* Record a failure in e (may be NULL) and return r as a negative errno:
 * `return bk_fail(err, -errno, "cgroup", "cannot create %s", path);` */
int bk_fail(struct bk_error *e, int r, const char *layer, const char *fmt, ...) _printf_(4, 5);
/* The same, for the parsers whose callers hand a plain (buf, len). */
int bk_fail_buf(char *buf, size_t len, int r, const char *fmt, ...) _printf_(4, 5);
