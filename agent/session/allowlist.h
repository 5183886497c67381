/* SPDX-License-Identifier: Apache-2.0 */
/* The session's command allowlist for one exec, enforced twice: a strict
 * parser here (a refused command never reaches the kernel), and Landlock in
 * the kernel (isolate/landlock.c builds the execute allowlist from the real
 * paths resolved here, as a step of the exec). Command words are resolved through the exec's PATH
 * inside the sandbox container's root and compared by real path. */
#pragma once
#include <limits.h>

#include "agent/agent.h"
#include "agent/session/exec_args.h"

struct bk_allowlist {
	bool active;          /* the session restricts commands */
	char (*real)[PATH_MAX];
	const char **paths;   /* the allowed binaries that resolved: Landlock's list */
	size_t n;
};

/* 0: the command may run (al says what Landlock must allow: the isolate
 * room's landlock step builds the ruleset from it); -1: refused (ref
 * filled). path_env is the exec's PATH. */
int bk_allowlist_check(struct bk_agent *a, const struct bk_pod *pod, const struct bk_exec_args *ea,
		       const char *path_env, struct bk_allowlist *al, struct bk_refusal *ref);
void bk_allowlist_free(struct bk_allowlist *al);
