/* SPDX-License-Identifier: Apache-2.0 */
/* The exec bracket: the one typed entry point every exec goes through —
 * /exec, /tool-call's exec tool, boxkitectl exec and verify alike.
 *
 *   node safe? → egress profile → session bracket (a /configure of the pod
 *   waits while this exec sets up) → command allowlist (strict parser here,
 *   Landlock paths for the kernel) → isolate (every layer, fail closed) →
 *   counters, audit line, denial counters.
 *
 * No JSON here: the API edge validates the request into bk_exec_args and
 * turns the result (or the refusal) into a response. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "lib/err.h"

#define BK_SECRETS_MAX 64

/* A validated exec request (plain data; strings owned by the caller). */
struct bk_exec_args {
	const char *command;
	uint32_t timeout;   /* seconds */
	const char *cwd;    /* NULL: /workspace */
	const char *secret_names[BK_SECRETS_MAX];
	const char *secret_values[BK_SECRETS_MAX];
	size_t nsecrets;
	int client_fd;      /* the requester's connection (-1: none): its hang-up kills the exec */
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

/* 0: the command ran (whatever its exit code); res holds output and
 * receipt (free with bk_exec_result_free). -1: it did not run; ref says
 * why (res then holds nothing to free). */
int bk_session_exec(struct bk_agent *a, const struct bk_pod *pod, const struct bk_exec_args *ea,
		    struct bk_exec_result *res, struct bk_refusal *ref);
