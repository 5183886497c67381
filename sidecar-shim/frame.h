/* SPDX-License-Identifier: Apache-2.0 */
/* Request body -> agent frame payload: the only transformation the shim
 * applies to what a client sends (pure; fuzzed). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* The body must be exactly one JSON object (whitespace around it allowed),
 * with no NUL byte. */
bool body_is_json_object(const char *b, size_t len);
/* Any one JSON value (whitespace around it allowed), no NUL byte. */
bool body_is_json(const char *b, size_t len);
/* {"op":"<op>","args":<args>} with args (a validated JSON object text)
 * spliced as received: no re-serialisation, nothing added. The client's
 * object can only ever be the value of "args". Returns 0 and a malloc'd,
 * NUL-terminated frame of *n bytes; -EMSGSIZE over BK_REQ_MAX; -ENOMEM. */
int shim_build_frame(const char *op, const char *args, size_t args_len, char **frame, size_t *n);
