/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the shim's /process routes (sidecar-shim/procroute.c): any path
 * resolves to one route or none, an {id} is a whole path segment of at
 * most SHIM_PROC_ID_MAX bytes, and the agent's arguments are one JSON
 * object whose "process_id" and "since_offset" are the path's and the
 * query's (the first of duplicate names: what the agent's cJSON reads),
 * with every member of the client's object after them. Input: a flags
 * byte, then path NUL since NUL body. */
#include "fuzz.h"
#include "procroute.h"
#include "frame.h"

#include <cjson/cJSON.h>
#include <errno.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2 || size > 64 * 1024)
		return 0;
	const char *in = (const char *)data + 1;
	size_t n = size - 1;
	const char *z1 = memchr(in, '\0', n);
	if (!z1)
		return 0;
	const char *since = z1 + 1;
	const char *z2 = memchr(since, '\0', n - (size_t)(since - in));
	if (!z2)
		return 0;
	const char *body = z2 + 1;
	size_t blen = n - (size_t)(body - in);
	char id[SHIM_PROC_ID_MAX + 1];
	enum shim_proc_route r = shim_process_route(in, id, sizeof(id));
	CHECK(r >= PROC_NONE && r < PROC_N, "route %d", r);
	bool with_id = r == PROC_OUTPUT || r == PROC_INPUT || r == PROC_STOP;
	CHECK(with_id ? (id[0] && strlen(id) <= SHIM_PROC_ID_MAX && !strchr(id, '/')) : !id[0],
	      "id \"%.40s\" for route %d of %.80s", id, r, in);
	if (with_id)
		CHECK(strncmp(in, "/process/", 9) == 0 && strncmp(in + 9, id, strlen(id)) == 0 && in[9 + strlen(id)] == '/',
		      "id is not the path's segment");
	const char *b = (data[0] & 1) ? NULL : body;
	if (b && !body_is_json_object(body, blen))
		return 0;
	const char *sv = (data[0] & 2) ? since : NULL;
	char *args = NULL;
	size_t alen = 0;
	int e = shim_process_args(b, blen, with_id ? id : "", sv, &args, &alen);
	CHECK(e == 0 || e == -ENOMEM, "shim_process_args: %d", e);
	if (e)
		return 0;
	CHECK(strlen(args) == alen, "length %zu", alen);
	cJSON *o = cJSON_ParseWithLength(args, alen);
	CHECK(cJSON_IsObject(o), "not a JSON object: %.200s", args);
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "process_id");
	if (with_id)
		CHECK(cJSON_IsString(pid) && strcmp(pid->valuestring, id) == 0, "process_id is not the path's: %.200s", args);
	const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "since_offset");
	if (sv)
		CHECK(cJSON_IsString(so) && strcmp(so->valuestring, sv) == 0, "since_offset is not the query's: %.200s", args);
	if (b) { /* every member of the body is there */
		cJSON *bo = cJSON_ParseWithLength(body, blen);
		const cJSON *it;
		cJSON_ArrayForEach(it, bo)
		{
			bool found = false;
			const cJSON *x;
			cJSON_ArrayForEach(x, o)
				if (x->string && it->string && strcmp(x->string, it->string) == 0 && cJSON_Compare(x, it, true))
					found = true;
			CHECK(found, "a body member is lost: %.80s", it->string ? it->string : "?");
		}
		cJSON_Delete(bo);
	}
	cJSON_Delete(o);
	free(args);
	return 0;
}
