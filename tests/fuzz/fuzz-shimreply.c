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
	cJSON *o = cJSON_ParseWithLength((const char *)data, size);
	const cJSON *ob = cJSON_GetObjectItemCaseSensitive(o, "body");
	if (streq(r.content_type, "application/json")) {
		/* the body relayed (the agent's text, or the parsed body printed
		 * again) is the reply's body, member for member and in order
		 * (printed alike; cJSON_Compare matches duplicate keys to the
		 * first one) */
		cJSON *b = cJSON_ParseWithLength(r.body, r.len);
		CHECK(cJSON_IsObject(b), "a JSON answer whose body is not an object: %.100s", r.body);
		char *pb = cJSON_PrintUnformatted(b), *po = cJSON_PrintUnformatted(ob);
		CHECK(pb && po && streq(pb, po), "the body relayed is not the reply's: %.100s", r.body);
		free(pb);
		free(po);
		cJSON_Delete(b);
	}
	const cJSON *ec = cJSON_GetObjectItemCaseSensitive(ob, "exit_code");
	CHECK(r.exit_zero == (cJSON_IsNumber(ec) && ec->valuedouble == 0), "exit_zero %d", r.exit_zero);
	cJSON_Delete(o);
	if (r.more) {
		cJSON *o = cJSON_ParseWithLength((const char *)data, size);
		CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "more")), "more without \"more\": true");
		cJSON_Delete(o);
	}
	free(r.body);
	return 0;
}
