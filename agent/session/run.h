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
#include "agent/session/exec_args.h"

/* 0: the command ran (whatever its exit code); res holds output and
 * receipt (free with bk_exec_result_free). -1: it did not run; ref says
 * why (res then holds nothing to free). */
int bk_session_exec(struct bk_agent *a, const struct bk_pod *pod, const struct bk_exec_args *ea,
		    struct bk_exec_result *res, struct bk_refusal *ref);
