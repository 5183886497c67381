/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/api/op_session.h"
#include "agent/api/reply.h"
#include "agent/parse/session_record.h"
#include "agent/session/procs.h"
#include "agent/session/session.h"
#include "lib/util.h"

char *bk_api_configure(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args)
{
	/* session_id absent or null: the manager's pod-recycle call, a reset
	 * to no session (every exec killed, the data wiped), as the reference */
	const cJSON *sid = cJSON_GetObjectItemCaseSensitive(args, "session_id");
	const char *id = NULL;
	if (sid && !cJSON_IsNull(sid)) {
		if (!cJSON_IsString(sid))
			return bk_api_invalid("session_id", "string_type", "Input should be a valid string");
		if (!bk_session_text_ok(sid->valuestring, BK_SESSION_ID_MAX, true))
			return bk_api_invalid("session_id", "value_error",
					      "session_id must be 1 to %d bytes without control characters",
					      BK_SESSION_ID_MAX);
		id = sid->valuestring;
	}
	char **allowed = NULL;
	const char *bad =
		bk_session_allowed_parse(cJSON_GetObjectItemCaseSensitive(args, "allowed_commands"), &allowed);
	if (bad)
		return bk_api_invalid("allowed_commands", "value_error", "%s", bad);
	struct bk_configure_result res;
	/* the previous session's background processes and their output go
	 * first (their cgroups would be killed below anyway; this forgets
	 * them, so that the next session cannot read them) */
	bk_proc_kill_all(a, pod->pod_uid);
	if (bk_session_configure(a, pod, id, allowed, &res) < 0) {
		static const struct {
			int status;
			const char *code;
		} map[] = {
			[BK_CONFIGURE_OK] = { 503, "session_reset_failed" }, /* not reached */
			[BK_CONFIGURE_BAD_REQUEST] = { 400, "bad_request" },
			[BK_CONFIGURE_SANDBOX_UNAVAILABLE] = { 503, "sandbox_unavailable" },
			[BK_CONFIGURE_OUT_OF_MEMORY] = { 503, "out_of_memory" },
			[BK_CONFIGURE_RESET_FAILED] = { 503, "session_reset_failed" },
		};
		size_t e = (size_t)res.error < ARRAY_SIZE(map) ? (size_t)res.error : BK_CONFIGURE_OK;
		return bk_api_error(map[e].status, map[e].code, "%s", res.err.msg);
	}
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "status", "configured");
	cJSON_AddItemToObject(b, "session_id", id ? cJSON_CreateString(id) : cJSON_CreateNull());
	cJSON_AddItemToObject(b, "prefetched_files", cJSON_CreateArray());
	cJSON_AddNumberToObject(b, "generation", (double)res.generation);
	cJSON_AddNumberToObject(b, "killed_execs", res.killed_execs);
	cJSON *wp = cJSON_AddObjectToObject(b, "wiped");
	cJSON_AddNumberToObject(wp, "removed", (double)res.removed);
	cJSON_AddNumberToObject(wp, "kept", (double)res.kept);
	return bk_api_respond(200, b);
}
