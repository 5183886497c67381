/* SPDX-License-Identifier: Apache-2.0 */
/* The reference sidecar's /process routes: path -> route, and the agent's
 * arguments (pure; fuzzed by tests/fuzz/fuzz-shimproc.c). */
#pragma once
#include <stddef.h>

enum shim_proc_route {
	PROC_NONE,     /* no such path: 404 */
	PROC_START,    /* POST /process/start */
	PROC_LIST,     /* GET /process */
	PROC_KILL_ALL, /* POST /process/kill-all */
	PROC_OUTPUT,   /* GET /process/{id}/output */
	PROC_INPUT,    /* POST /process/{id}/input */
	PROC_STOP,     /* POST /process/{id}/stop */
	PROC_N
};

#define SHIM_PROC_ID_MAX 128 /* a longer {id} names no process: 404 */

/* The route of a request path (no query); the {id} into id (idlen >
 * SHIM_PROC_ID_MAX), "" for routes without one. */
enum shim_proc_route shim_process_route(const char *path, char *id, size_t idlen);

/* The agent's arguments: the client's body (a JSON object text, validated;
 * NULL for a GET: {}) with "process_id" (the path's, replacing any in the
 * body) when id is not "", and "since_offset" (the query's text as
 * written) when since is not NULL. 0 and a malloc'd NUL-terminated text
 * of *n bytes; -EINVAL (body not an object), -ENOMEM. */
int shim_process_args(const char *body, size_t len, const char *id, const char *since, char **out, size_t *n);
