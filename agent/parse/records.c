/* SPDX-License-Identifier: Apache-2.0 */
/* Exec records to and from their JSON text (see records.h). */
#include "agent/parse/records.h"
#include "lib/util.h"

#include <cJSON.h>

char *bk_exec_record_format(const struct bk_exec_record *r)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	/* key order as written by every earlier version */
	cJSON_AddStringToObject(o, "exec_id", r->exec_id);
	cJSON_AddStringToObject(o, "cgroup", r->cgroup);
	cJSON_AddStringToObject(o, "cgroup_pids_v1", r->cgroup_pids_v1);
	cJSON_AddStringToObject(o, "cgroup_memory_v1", r->cgroup_memory_v1);
	cJSON_AddStringToObject(o, "pod", r->pod);
	cJSON_AddStringToObject(o, "namespace", r->namespace);
	cJSON_AddStringToObject(o, "pod_uid", r->pod_uid);
	cJSON *a = cJSON_AddArrayToObject(o, "cgroups_v1");
	for (int i = 0; a && i < r->n_v1 && i < BK_RECORD_V1_MAX; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(r->v1[i]));
	char *txt = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return txt;
}

/* A string member copied to dst: 0, -ENOENT (absent or not a string),
 * -E2BIG (does not fit). */
static int get(const cJSON *o, const char *key, char *dst, size_t dstlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	dst[0] = '\0';
	if (!cJSON_IsString(v))
		return -ENOENT;
	size_t n = strlen(v->valuestring);
	if (n >= dstlen)
		return -E2BIG;
	memcpy(dst, v->valuestring, n + 1);
	return 0;
}

int bk_exec_record_parse(const char *text, size_t len, struct bk_exec_record *r)
{
	memset(r, 0, sizeof(*r));
	cJSON *o = cJSON_ParseWithLength(text, len);
	int ret = -EINVAL;
	if (!cJSON_IsObject(o))
		goto out;
	if (get(o, "cgroup", r->cgroup, sizeof(r->cgroup)) < 0 ||
	    get(o, "cgroup_pids_v1", r->cgroup_pids_v1, sizeof(r->cgroup_pids_v1)) < 0 ||
	    get(o, "cgroup_memory_v1", r->cgroup_memory_v1, sizeof(r->cgroup_memory_v1)) < 0)
		goto out;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "cgroups_v1");
	if (a) {
		if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > BK_RECORD_V1_MAX)
			goto out;
		const cJSON *v;
		cJSON_ArrayForEach(v, a) {
			if (!cJSON_IsString(v) || strlen(v->valuestring) >= BK_RECORD_PATH_MAX)
				goto out;
			strcpy(r->v1[r->n_v1++], v->valuestring);
		}
	}
	/* optional: only ever logged */
	(void)get(o, "exec_id", r->exec_id, sizeof(r->exec_id));
	r->has_pod = get(o, "pod", r->pod, sizeof(r->pod)) == 0;
	(void)get(o, "namespace", r->namespace, sizeof(r->namespace));
	(void)get(o, "pod_uid", r->pod_uid, sizeof(r->pod_uid));
	ret = 0;
out:
	cJSON_Delete(o);
	if (ret < 0)
		memset(r, 0, sizeof(*r));
	return ret;
}
