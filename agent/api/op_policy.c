/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/api/op_policy.h"
#include "agent/api/reply.h"
#include "agent/session/livepolicy.h"
#include "lib/util.h"

char *bk_api_policy_set(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args)
{
	const cJSON *pj = cJSON_GetObjectItemCaseSensitive(args, "profile");
	const char *profile = NULL;
	if (pj && !cJSON_IsNull(pj)) {
		if (!cJSON_IsString(pj) || strlen(pj->valuestring) > 63)
			return bk_api_error(400, "bad_request", "\"profile\" must name a profile, or be null");
		profile = pj->valuestring;
	}
	char old[64] = "", now[64] = "";
	struct bk_error err = { 0 };
	int r = bk_session_policy_set(a, pod, profile, old, sizeof(old), now, sizeof(now), &err);
	if (r == -ENOENT)
		return bk_api_error(400, "unknown_profile", "%s", err.msg);
	if (r < 0)
		return bk_api_error(503, "policy_not_recorded", "%s", err.msg);
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "pod", pod->pod_name);
	cJSON_AddStringToObject(b, "namespace", pod->pod_namespace);
	cJSON_AddStringToObject(b, "pod_uid", pod->pod_uid);
	cJSON_AddStringToObject(b, "old", old);
	cJSON_AddStringToObject(b, "new", now);
	cJSON_AddStringToObject(b, "running_execs", "keep the profile they started with");
	return bk_api_respond(200, b);
}
