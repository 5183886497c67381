/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/parse/session_record.h"
#include "lib/util.h"

#include <cJSON.h>

static void strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

/* ---- validation (requests and state files alike) ------------------------------------ */

bool bk_session_text_ok(const char *s, size_t max, bool allow_space)
{
	size_t l = strlen(s);
	if (l == 0 || l > max)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f || (!allow_space && *p == ' '))
			return false;
	return true;
}

const char *bk_session_allowed_parse(const cJSON *v, char ***allowed)
{
	*allowed = NULL;
	if (!v || cJSON_IsNull(v))
		return NULL;
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > BK_ALLOWED_MAX)
		return "\"allowed_commands\" must be an array of at most 256 command names";
	size_t n = (size_t)cJSON_GetArraySize(v), i = 0;
	char **out = calloc(n + 1, sizeof(char *));
	if (!out)
		return "out of memory";
	const cJSON *it;
	cJSON_ArrayForEach(it, v)
	{
		/* command names, not paths: the enforcement matches names */
		if (!cJSON_IsString(it) || !bk_session_text_ok(it->valuestring, BK_ALLOWED_LEN_MAX, false) ||
		    strchr(it->valuestring, '/')) {
			strv_free(out);
			return "\"allowed_commands\" entries must be command names of 1 to 256 bytes, without '/', "
			       "spaces or control characters";
		}
		if (!(out[i++] = strdup(it->valuestring))) {
			strv_free(out);
			return "out of memory";
		}
	}
	*allowed = out;
	return NULL;
}

/* ---- the file format ------------------------------------------------------------------------ */

char *bk_session_record_encode(const char *pod_uid, const struct bk_session_record *r)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "pod_uid", pod_uid);
	cJSON_AddStringToObject(o, "session_id", r->session_id);
	if (r->allowed) {
		cJSON *arr = cJSON_AddArrayToObject(o, "allowed_commands");
		for (char **p = r->allowed; *p; p++)
			cJSON_AddItemToArray(arr, cJSON_CreateString(*p));
	} else {
		cJSON_AddNullToObject(o, "allowed_commands");
	}
	cJSON_AddNumberToObject(o, "generation", (double)r->generation);
	cJSON_AddNumberToObject(o, "configured_at", (double)r->configured_at);
	char *txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return txt;
}

int bk_session_record_parse(const char *txt, size_t len, const char *pod_uid, struct bk_session_record *out)
{
	cJSON *o = cJSON_ParseWithLength(txt, len);
	const cJSON *uid = cJSON_GetObjectItemCaseSensitive(o, "pod_uid");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "session_id");
	const cJSON *gen = cJSON_GetObjectItemCaseSensitive(o, "generation");
	const cJSON *at = cJSON_GetObjectItemCaseSensitive(o, "configured_at");
	char **allowed = NULL;
	if (!cJSON_IsString(uid) || !streq(uid->valuestring, pod_uid) || !cJSON_IsString(id) ||
	    /* "": reset to no session (/configure with session_id null) */
	    (id->valuestring[0] && !bk_session_text_ok(id->valuestring, BK_SESSION_ID_MAX, true)) ||
	    !cJSON_IsNumber(gen) ||
	    bk_session_allowed_parse(cJSON_GetObjectItemCaseSensitive(o, "allowed_commands"), &allowed)) {
		cJSON_Delete(o);
		return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	snprintf(out->session_id, sizeof(out->session_id), "%s", id->valuestring);
	out->allowed = allowed;
	out->generation = gen->valuedouble > 0 ? (uint64_t)gen->valuedouble : 0;
	out->configured_at = cJSON_IsNumber(at) && at->valuedouble > -1e18 && at->valuedouble < 1e18
				     ? (int64_t)at->valuedouble
				     : 0;
	cJSON_Delete(o);
	return 0;
}

void bk_session_record_clear(struct bk_session_record *r)
{
	strv_free(r->allowed);
	r->allowed = NULL;
}
