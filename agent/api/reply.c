/* SPDX-License-Identifier: Apache-2.0 */
/* Reply builders: the only place a response envelope is made. */
#include "agent/api/reply.h"

#include <stdarg.h>

#include "agent/session/run.h"
#include "lib/util.h"

char *bk_api_respond(int status, cJSON *body)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "status", status);
	cJSON_AddItemToObject(o, "body", body ? body : cJSON_CreateObject());
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

char *bk_api_event(cJSON *body)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "status", 200);
	cJSON_AddBoolToObject(o, "more", true);
	cJSON_AddItemToObject(o, "body", body ? body : cJSON_CreateObject());
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

static cJSON *error_body(const char *code, const char *fmt, va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "detail", msg);
	cJSON_AddStringToObject(b, "code", code);
	return b;
}

char *bk_api_error(int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cJSON *b = error_body(code, fmt, ap);
	va_end(ap);
	return bk_api_respond(status, b);
}

/* A validation failure as the reference sidecar's framework (FastAPI)
 * reports one: 422, "detail" a list of {type, loc, msg}; "code" is ours. */
char *bk_api_invalid(const char *field, const char *type, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON *b = cJSON_CreateObject();
	cJSON *d = cJSON_AddArrayToObject(b, "detail");
	cJSON *e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "type", type);
	cJSON *loc = cJSON_AddArrayToObject(e, "loc");
	cJSON_AddItemToArray(loc, cJSON_CreateString("body"));
	if (field)
		cJSON_AddItemToArray(loc, cJSON_CreateString(field));
	cJSON_AddStringToObject(e, "msg", msg);
	cJSON_AddItemToArray(d, e);
	cJSON_AddStringToObject(b, "code", "validation_error");
	return bk_api_respond(422, b);
}

/* A refused exec: the status its code stands for, the sentence, and the
 * reason (allowlist) or layer (isolation) when there is one. */
char *bk_api_refusal(const struct bk_refusal *ref)
{
	static const struct {
		const char *code;
		int status;
	} map[] = {
		{ "node_unsafe", 503 },	     { "unknown_profile", 403 }, { "command_not_allowed", 403 },
		{ "isolation_failed", 503 }, { "out_of_memory", 503 },   { "pod_exec_limit", 429 },
		{ "node_exec_budget", 503 },
	};
	int status = 503;
	for (size_t i = 0; i < ARRAY_SIZE(map); i++)
		if (ref->code && streq(ref->code, map[i].code))
			status = map[i].status;
	/* an allowlist refusal is 403; a command the parser could not read, 400 */
	if (ref->code && streq(ref->code, "command_not_allowed") && ref->err.r != -EPERM)
		status = 400;
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "detail", ref->err.msg);
	cJSON_AddStringToObject(b, "code", ref->code ? ref->code : "isolation_failed");
	if (ref->reason[0])
		cJSON_AddStringToObject(b, "reason", ref->reason);
	else if (ref->err.layer[0])
		cJSON_AddStringToObject(b, "layer", ref->err.layer);
	return bk_api_respond(status, b);
}
