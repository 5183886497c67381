/* SPDX-License-Identifier: Apache-2.0 */
/* The exec bracket's request and refusal types (run.h, allowlist.h). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

struct bk_exec_sink;

#define BK_SECRETS_MAX 64
#define BK_STDERR_CAP (256u * 1024u) /* the reference sidecar's stderr cap */

/* A validated exec request (plain data; strings owned by the caller). */
struct bk_exec_args {
	const char *command;
	uint32_t timeout;   /* seconds */
	const char *cwd;    /* NULL: /workspace */
	const char *secret_names[BK_SECRETS_MAX];  /* environment variable names */
	const char *secret_labels[BK_SECRETS_MAX]; /* the granted secrets' names (redaction marker) */
	const char *secret_values[BK_SECRETS_MAX];
	size_t nsecrets;
	int client_fd;      /* the requester's connection (-1: none): its hang-up kills the exec */
	bool stream;        /* "stream": true (the API edge answers with events) */
	const struct bk_exec_sink *sink; /* NULL, or where output goes as it arrives (isolate/exec.h) */
	/* a terminal (issue 18, isolate/pty.h): the sink takes its output
	 * uncapped and relays its input (sink->pty_io) */
	bool pty;
	uint16_t pty_rows, pty_cols;
	uint32_t idle_s;     /* > 0: ends after this long without input or output */
	uint32_t timeout_ms; /* > 0: the timeout in ms, instead of timeout */
	/* a background process (session/procs.c): its output to the sink
	 * without the exec caps (its own ring buffer bounds it), its stdin
	 * from this pipe (> 0; 0: /dev/null) */
	bool uncapped;
	int stdin_fd;
	int term_fd;         /* > 0: its readiness TERMs the exec (isolate/exec.h) */
};

/* Why an exec did not run. code is stable (node_unsafe, unknown_profile,
 * command_not_allowed, isolation_failed, out_of_memory); err.msg is the
 * whole human sentence; err.layer names the layer for isolation_failed;
 * reason is the allowlist parser's code for command_not_allowed (and
 * err.r is -EPERM for a refused command, -EINVAL for one that could not
 * be parsed). */
struct bk_refusal {
	const char *code;
	char reason[32];
	struct bk_error err;
};
