/* SPDX-License-Identifier: Apache-2.0 */
/* Sessions: /configure and /tool-call.
 *
 * One session per pod, keyed by the pod UID the kernel-derived identity
 * gave (never by anything in a request). /configure starts a new one: every
 * exec cgroup of the pod is killed (cgroup.kill), the session data
 * (/workspace, /tmp, /mnt/user-data/outputs contents) is wiped, and the new
 * session's allowed_commands are recorded, in agent memory and in
 * <state_dir>/sessions/<pod_uid>.json so they survive an agent restart.
 * A session_id in /tool-call is ignored: the pod's current session is the
 * only one there is. */
#pragma once
#include <stdbool.h>
#include "agent/api/api.h"

#define BK_SESSION_ID_MAX 256
#define BK_ALLOWED_MAX 256     /* allowed_commands entries */
#define BK_ALLOWED_LEN_MAX 256 /* bytes of one entry */

char *bk_session_configure(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args);
char *bk_tool_call(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args);

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
