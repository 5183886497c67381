/* SPDX-License-Identifier: Apache-2.0 */
/* agent/session/: sessions and the exec bracket. No JSON here: the API
 * edge (agent/api/op_session.c) parses requests and builds responses; the
 * session files' format is agent/parse/session_record.c.
 *
 *   session.c    one session per pod: /configure (kill the previous
 *                session's execs, wipe its data, record the new one), the
 *                session table and its state files, the exec bracket's
 *                session side (begin/spawned)
 *   run.c        the exec bracket: the one typed entry point every exec
 *                goes through (run.h; its request and refusal types in
 *                exec_args.h)
 *   allowlist.c  the session's command allowlist, enforced by the strict
 *                parser and by Landlock's execute allowlist
 *   livepolicy.c the egress profile of a pod's new execs: the operator's
 *                override (policy set), annotation, selectors, default;
 *                changes logged and kept for inspect (livepolicy.h)
 *   procs.c      background processes (the /process routes): each an exec of run.c
 *                on a thread of its own, its output in a ring buffer
 *
 * One session per pod, keyed by the pod UID the kernel-derived identity
 * gave (never by anything in a request). /configure starts a new one: every
 * exec cgroup of the pod is killed (cgroup.kill), the session data
 * (files/wipe.c: the session roots, /dev/shm, the user's files on other
 * writable mounts, the container's IPC objects) is wiped — anything kept
 * fails the reset and nothing is recorded — and the new
 * session's allowed_commands are recorded, in agent memory and in
 * <state_dir>/sessions/<pod_uid>.json so they survive an agent restart.
 * A session_id in /tool-call is ignored: the pod's current session is the
 * only one there is. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "agent/parse/session_record.h"
#include "lib/err.h"

/* Why a /configure did not take effect (the API maps each to its status
 * and code; err.msg is the whole sentence). */
enum bk_configure_error {
	BK_CONFIGURE_OK = 0,
	BK_CONFIGURE_BAD_REQUEST,         /* 400 bad_request */
	BK_CONFIGURE_SANDBOX_UNAVAILABLE, /* 503 sandbox_unavailable */
	BK_CONFIGURE_OUT_OF_MEMORY,       /* 503 out_of_memory */
	BK_CONFIGURE_RESET_FAILED,        /* 503 session_reset_failed */
};

struct bk_configure_result {
	enum bk_configure_error error;
	struct bk_error err;   /* err.msg: the sentence, when error != BK_CONFIGURE_OK */
	uint64_t generation;   /* the new session's (1 for a pod's first) */
	int killed_execs;      /* exec cgroups of the previous session killed */
	uint64_t removed, kept; /* wiped entries; entries kept (0 on success) */
};

/* Start a new session for the pod: kill every exec of the previous one,
 * wipe its data, record session_id (NULL: reset to no session, the
 * manager's pod-recycle call) and allowed (NULL: unrestricted; taken
 * over in every case). Logs the "session_configured" audit line. 0, or
 * -errno with res->error and res->err saying why. */
int bk_session_configure(struct bk_agent *a, const struct bk_pod *pod, const char *session_id, char **allowed,
			 struct bk_configure_result *res);

/* allowed_commands of the pod's current session, for the exec path.
 * Returns 0 and *out = NULL when nothing restricts commands (no session,
 * or a session configured without allowed_commands), or *out = a
 * NULL-terminated copy (possibly empty: nothing is allowed) to free with
 * bk_strv_free(). Returns -ENOMEM (then refuse the exec: fail closed). */
int bk_session_allowed(struct bk_agent *a, const char *pod_uid, char ***out);
/* The pod's current session id into out ("" when none); its generation
 * (0 when none, +1 per /configure) when gen is not NULL. */
void bk_session_current(struct bk_agent *a, const char *pod_uid, char *out, size_t outlen, uint64_t *gen);
void bk_strv_free(char **v);
/* Bracket an exec's setup: begin waits while a /configure runs for the
 * pod; spawned (exactly once, when the exec's process is in its cgroup or
 * the exec failed) lets a waiting /configure kill it. */
int bk_session_exec_begin(struct bk_agent *a, const char *pod_uid);
void bk_session_exec_spawned(struct bk_agent *a, const char *pod_uid);
