/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the shim's reading of an agent answer (sidecar-shim/upstream.c
 * upstream_parse_reply), which a streamed /exec applies to every event
 * frame ({"status":200,"more":true,"body":{...}}): whatever the agent
 * sends, an accepted answer has a status the HTTP layer can send
 * (200-599), a known content type, a body whose length is its string's,
 * a JSON object body for JSON, and "more" only when the frame said true. */
#include "fuzz.h"
#include "shim.h"

#include <cjson/cJSON.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 256 * 1024)
		return 0;
	struct upstream_reply r;
	int e = upstream_parse_reply((const char *)data, size, &r);
	CHECK(e == 0 || e == -EBADMSG || e == -ENOMEM, "upstream_parse_reply returned %d", e);
	if (e < 0)
		return 0;
	CHECK(r.status >= 200 && r.status <= 599, "status %u accepted", r.status);
	CHECK(r.body && strlen(r.body) == r.len, "body length %zu", r.len);
	CHECK(r.content_type != NULL, "no content type");
	if (streq(r.content_type, "application/json")) {
		cJSON *b = cJSON_ParseWithLength(r.body, r.len);
		CHECK(cJSON_IsObject(b), "a JSON answer whose body is not an object: %.100s", r.body);
		cJSON_Delete(b);
	}
	if (r.more) {
		cJSON *o = cJSON_ParseWithLength((const char *)data, size);
		CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "more")), "more without \"more\": true");
		cJSON_Delete(o);
	}
	free(r.body);
	return 0;
}
