/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the shim's request body -> agent frame step (sidecar-shim/frame.c):
 * whatever a client sends, an accepted body becomes the "args" object of a
 * frame whose "op" is the route's, and the agent reads the same thing. */
#include "fuzz.h"
#include "frame.h"
#include "lib/proto.h"

#include <cjson/cJSON.h>
#include <errno.h>

static const char *const ops[] = { "exec", "view", "file_create", "tool_call", "configure", "grep" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 512 * 1024)
		return 0;
	const char *op = ops[data[0] % (sizeof(ops) / sizeof(ops[0]))];
	const char *body = (const char *)data + 1;
	size_t len = size - 1;
	if (!body_is_json_object(body, len))
		return 0;
	CHECK(!memchr(body, '\0', len), "accepted a body with a NUL byte");
	char *frame = NULL;
	size_t n = 0;
	int e = shim_build_frame(op, body, len, &frame, &n);
	CHECK(e == 0 || e == -EMSGSIZE, "shim_build_frame returned %d", e);
	if (e < 0)
		return 0;
	CHECK(strlen(frame) == n && n <= BK_REQ_MAX, "frame length %zu", n);
	/* the agent's view of it */
	cJSON *f = cJSON_ParseWithLength(frame, n);
	CHECK(cJSON_IsObject(f), "frame is not a JSON object: %.200s", frame);
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(f, "op");
	CHECK(cJSON_IsString(o) && strcmp(o->valuestring, op) == 0, "op changed: %.200s", frame);
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(f, "args");
	CHECK(cJSON_IsObject(a), "args is not the body object: %.200s", frame);
	/* exactly two members: the body cannot add a sibling of "op" */
	CHECK(cJSON_GetArraySize(f) == 2, "frame has %d members", cJSON_GetArraySize(f));
	cJSON *b = cJSON_ParseWithLength(body, len);
	CHECK(cJSON_Compare(a, b, true), "args differ from the body");
	cJSON_Delete(b);
	cJSON_Delete(f);
	free(frame);
	return 0;
}
