/* SPDX-License-Identifier: Apache-2.0 */
/* Background processes (the /process routes): each one is an exec through the one
 * exec bracket (run.c: session, allowlist, every isolation layer, receipt,
 * denials), run on a thread of its own instead of the request's. Its
 * stdout and stderr go, merged, into a ring buffer (exec.process_output_cap
 * bytes; the oldest dropped and counted); its stdin is a pipe; it ends at
 * its max_runtime_seconds (the exec's timeout), on stop, on kill-all, on a
 * /configure of its pod, when its pod's sandbox goes (the pid namespace
 * dies with it), at the agent's stop; an agent killed outright leaves its
 * exec record, and the next agent's recovery sweep (isolate/recover.c)
 * kills its cgroup like any other exec's.
 *
 * Keyed by the pod UID the kernel gave (never by anything in a request):
 * one pod never sees, reads, writes or stops another pod's process. No
 * JSON here (api/op_process.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "agent/session/exec_args.h"

#define BK_PROC_ID_MAX 40 /* "proc_" + 32 hex */
/* finished processes kept per pod for their output (the oldest finished
 * one goes past this; /process/kill-all and /configure drop them all) */
#define BK_PROC_KEEP_DONE 16
/* /process/{id}/stop: SIGTERM, then SIGKILL past this (the reference's
 * PROCESS_STOP_GRACE_PERIOD_SECONDS default) */
#define BK_PROC_STOP_GRACE_MS 5000

enum bk_proc_state { BK_PROC_RUNNING, BK_PROC_EXITED, BK_PROC_STOPPED, BK_PROC_KILLED };
extern const char *const bk_proc_status_names[]; /* the reference's: running, exited, stopped, killed */

struct bk_proc_info {
	char id[BK_PROC_ID_MAX + 1];
	char exec_id[24];
	char *command;     /* copies: bk_proc_info_free */
	char *description; /* NULL: none */
	enum bk_proc_state status;
	bool has_exit;
	int exit_code;
	uint64_t started_unix_ns;
	uint64_t total_bytes, dropped_bytes; /* output written; no longer kept */
};
void bk_proc_info_free(struct bk_proc_info *i);

/* Start one. 0: it runs (out filled); -EBUSY: the pod already runs
 * *running of exec.process_max; -1: the exec did not run (ref says why). */
int bk_proc_start(struct bk_agent *a, const struct bk_pod *pod, const char *command, const char *description,
		  uint32_t max_runtime_s, struct bk_proc_info *out, int *running, struct bk_refusal *ref);

struct bk_proc_output {
	enum bk_proc_state status;
	bool has_exit;
	int exit_code;
	char *chunk; /* malloc'd bytes since the offset asked (all kept if older ones were dropped) */
	size_t len;
	uint64_t next_offset;   /* every byte written so far */
	bool truncated;         /* the offset asked was dropped already */
	uint64_t dropped_bytes; /* bytes no longer kept (the oldest) */
};
/* -ENOENT: no such process of this pod. */
int bk_proc_output(struct bk_agent *a, const char *pod_uid, const char *id, int64_t since,
		   struct bk_proc_output *out);
/* Write n bytes to its stdin (waits at most 10 s for room). -ENOENT, -ESRCH
 * (not running), or -errno of the write. */
int bk_proc_input(struct bk_agent *a, const char *pod_uid, const char *id, const char *data, size_t n);
/* Stop it (SIGTERM to its cgroup's processes, SIGKILL to the cgroup
 * BK_PROC_STOP_GRACE_MS later) and wait for its end. -ENOENT. */
int bk_proc_stop(struct bk_agent *a, const char *pod_uid, const char *id, struct bk_proc_info *out);
/* Every process of the pod (free each with bk_proc_info_free, then the array). */
int bk_proc_list(struct bk_agent *a, const char *pod_uid, struct bk_proc_info **out, size_t *n);
/* Kill every process of the pod and forget them all (their output too);
 * waits for their ends. Returns how many were still running. */
int bk_proc_kill_all(struct bk_agent *a, const char *pod_uid);
/* fn(ud, its exec's result, its command) under the registry's lock, if
 * the process ran and ended: 0; -EAGAIN (running, or it never ran);
 * -ENOENT. */
struct bk_exec_result;
int bk_proc_with_result(struct bk_agent *a, const char *pod_uid, const char *id,
			void (*fn)(void *ud, struct bk_exec_result *res, const char *command), void *ud);
/* The agent stops: every process of every pod. */
void bk_procs_shutdown(struct bk_agent *a);
