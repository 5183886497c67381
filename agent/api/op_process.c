/* SPDX-License-Identifier: Apache-2.0 */
/* the /process routes: the reference sidecar's ProcessStart/Output/Input/Stop/List/
 * KillAll models, its status codes (201 start, 404 unknown id, 400
 * max_runtime_seconds out of range, 429 at the pod's maximum, 409 input to
 * a process that is not running) and error sentences; 422 for a body its
 * framework would refuse. Output is returned as the reference decodes it
 * (UTF-8, invalid bytes replaced by U+FFFD). */
#include "agent/api/op_process.h"
#include "agent/api/op_exec.h"
#include "agent/api/reply.h"
#include "agent/parse/text.h"
#include "agent/session/exec_args.h"
#include "agent/session/procs.h"
#include "lib/util.h"

#include <limits.h>
#include <time.h>

#define MAX_DESCRIPTION (64u * 1024u)
#define MAX_PROC_INPUT (10u * 1024u * 1024u) /* the reference's FILE_CONTENT_MAX_LENGTH */

/* Python's datetime.isoformat() of the start (UTC, no zone suffix). */
static cJSON *iso_time(uint64_t unix_ns)
{
	time_t t = (time_t)(unix_ns / 1000000000ull);
	struct tm tm;
	gmtime_r(&t, &tm);
	char d[32], out[48];
	strftime(d, sizeof(d), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, sizeof(out), "%s.%06u", d, (unsigned)(unix_ns % 1000000000ull / 1000));
	return cJSON_CreateString(out);
}

static cJSON *exit_json(bool has, int code)
{
	return has ? cJSON_CreateNumber(code) : cJSON_CreateNull();
}

/* A text for a JSON string (the id comes from the client's URL). */
static cJSON *safe_string(const char *s, size_t max)
{
	size_t n = strnlen(s, max), l;
	char *c = bk_utf8_sanitize(s, n, &l);
	cJSON *j = cJSON_CreateString(c ? c : "");
	free(c);
	return j;
}

static char *not_found(const char *id)
{
	size_t l;
	char *c = bk_utf8_sanitize(id, strnlen(id, 128), &l);
	char *r = bk_api_error(404, "process_not_found", "Process %s not found", c ? c : "");
	free(c);
	return r;
}

/* "process_id": set by the shim from the path (always a string). */
static const char *process_id(const cJSON *args)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(args, "process_id");
	return cJSON_IsString(id) ? id->valuestring : "";
}

/* An integer as pydantic takes one from JSON: a number without a fraction. */
static bool json_int(const cJSON *v, int64_t *out)
{
	if (!cJSON_IsNumber(v) || !(v->valuedouble > -9e15 && v->valuedouble < 9e15) ||
	    v->valuedouble != (double)(int64_t)v->valuedouble)
		return false;
	*out = (int64_t)v->valuedouble;
	return true;
}

struct start_args {
	const char *command, *description;
	uint32_t runtime;
};

static char *parse_start(const struct bk_config *c, const cJSON *args, struct start_args *sa)
{
	memset(sa, 0, sizeof(*sa));
	char *bad = bk_api_command_arg(args, &sa->command);
	if (bad)
		return bad;
	const cJSON *desc = cJSON_GetObjectItemCaseSensitive(args, "description");
	if (desc && !cJSON_IsNull(desc)) {
		if (!cJSON_IsString(desc))
			return bk_api_invalid("description", "string_type", "Input should be a valid string");
		if (strlen(desc->valuestring) > MAX_DESCRIPTION)
			return bk_api_invalid("description", "string_too_long", "description is longer than %u bytes",
					      MAX_DESCRIPTION);
		sa->description = desc->valuestring;
	}
	const cJSON *mr = cJSON_GetObjectItemCaseSensitive(args, "max_runtime_seconds");
	int64_t runtime;
	if (!mr)
		return bk_api_invalid("max_runtime_seconds", "missing", "Field required");
	if (!json_int(mr, &runtime))
		return bk_api_invalid("max_runtime_seconds", "int_type", "Input should be a valid integer");
	const cJSON *port = cJSON_GetObjectItemCaseSensitive(args, "expose_port");
	int64_t pv;
	if (port && !cJSON_IsNull(port) && !json_int(port, &pv))
		return bk_api_invalid("expose_port", "int_type", "Input should be a valid integer");
	uint64_t ceiling = c->process_runtime_max;
	if (runtime <= 0 || (uint64_t)runtime > ceiling)
		return bk_api_error(400, "bad_request", "max_runtime_seconds must be between 1 and %llu",
				    (unsigned long long)ceiling);
	/* the reference runs such a process in the pod's own network
	 * namespace for /preview; boxkite never drops a process's own */
	if (port && !cJSON_IsNull(port))
		return bk_api_error(400, "expose_port_unsupported",
				    "expose_port is not supported by boxkite: every process keeps its own network "
				    "namespace (/preview is not served)");
	sa->runtime = (uint32_t)runtime;
	return NULL;
}

static char *start(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args)
{
	struct start_args sa;
	char *bad = parse_start(&a->cfg, args, &sa);
	if (bad)
		return bad;
	struct bk_proc_info info;
	struct bk_refusal ref;
	int running = 0;
	int r = bk_proc_start(a, pod, sa.command, sa.description, sa.runtime, &info, &running, &ref);
	if (r == -EBUSY)
		return bk_api_error(429, "process_limit",
				    "Session already has %d background process(es) running (max %llu). Stop one before "
				    "starting another.",
				    running, (unsigned long long)a->cfg.process_max);
	if (r < 0)
		return bk_api_refusal(&ref);
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "process_id", info.id);
	cJSON_AddStringToObject(b, "status", bk_proc_status_names[info.status]);
	cJSON_AddItemToObject(b, "started_at", iso_time(info.started_unix_ns));
	cJSON_AddStringToObject(b, "exec_id", info.exec_id);
	bk_proc_info_free(&info);
	return bk_api_respond(201, b);
}

/* since_offset as the client wrote it in the query ("" or absent: 0). */
static char *since_arg(const cJSON *args, int64_t *since)
{
	*since = 0;
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(args, "since_offset");
	if (!s || cJSON_IsNull(s))
		return NULL;
	const char *t = cJSON_IsString(s) ? s->valuestring : "";
	const char *p = t;
	bool neg = false;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	const char *digits = p;
	int64_t v = 0;
	bool big = false;
	while (*p >= '0' && *p <= '9') {
		if (v > (INT64_MAX - 9) / 10)
			big = true;
		else
			v = v * 10 + (*p - '0');
		p++;
	}
	const char *end = p;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!cJSON_IsString(s) || end == digits || *p) {
		cJSON *b = cJSON_CreateObject();
		cJSON *d = cJSON_AddArrayToObject(b, "detail");
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "type", "int_parsing");
		cJSON *loc = cJSON_AddArrayToObject(e, "loc");
		cJSON_AddItemToArray(loc, cJSON_CreateString("query"));
		cJSON_AddItemToArray(loc, cJSON_CreateString("since_offset"));
		cJSON_AddStringToObject(e, "msg", "Input should be a valid integer, unable to parse string as an integer");
		cJSON_AddItemToObject(e, "input", safe_string(t, 64));
		cJSON_AddItemToArray(d, e);
		cJSON_AddStringToObject(b, "code", "validation_error");
		return bk_api_respond(422, b);
	}
	*since = big ? (neg ? INT64_MIN : INT64_MAX) : neg ? -v : v;
	return NULL;
}

struct result_ctx {
	struct bk_agent *a;
	const struct bk_pod *pod;
	cJSON *b;
};

static void add_receipt(void *ud, struct bk_exec_result *res, const char *command)
{
	struct result_ctx *rc = ud;
	struct bk_exec_args ea = { .command = command, .client_fd = -1 };
	cJSON *t = cJSON_CreateObject();
	if (!t)
		return;
	bk_api_exec_result_fields(rc->a, rc->pod, &ea, res, t);
	/* "truncated" is the reference's here (the offset asked was dropped):
	 * the exec's own (always false: no exec cap) is left out */
	cJSON *it;
	while ((it = t->child)) {
		cJSON_DetachItemViaPointer(t, it);
		if (it->string && streq(it->string, "truncated"))
			cJSON_Delete(it);
		else
			cJSON_AddItemToObject(rc->b, it->string, it); /* (a copy of the name) */
	}
	cJSON_Delete(t);
}

static char *output(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args)
{
	const char *id = process_id(args);
	int64_t since;
	/* the query first, as the reference's framework (422 before 404) */
	char *bad = since_arg(args, &since);
	if (bad)
		return bad;
	struct bk_proc_output o;
	int r = bk_proc_output(a, pod->pod_uid, id, since, &o);
	if (r == -ENOENT)
		return not_found(id);
	if (r < 0)
		return bk_api_error(503, "out_of_memory", "out of memory");
	size_t l;
	char *text = bk_utf8_sanitize(o.chunk, o.len, &l);
	free(o.chunk);
	if (!text)
		return bk_api_error(503, "out_of_memory", "out of memory");
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "status", bk_proc_status_names[o.status]);
	cJSON_AddStringToObject(b, "stdout_chunk", text);
	free(text);
	cJSON_AddNumberToObject(b, "next_offset", (double)o.next_offset);
	cJSON_AddBoolToObject(b, "truncated", o.truncated);
	cJSON_AddItemToObject(b, "exit_code", exit_json(o.has_exit, o.exit_code));
	cJSON_AddNumberToObject(b, "dropped_bytes", (double)o.dropped_bytes);
	/* ended: its exec's receipt (isolation, denied, the signed receipt) */
	if (o.status != BK_PROC_RUNNING) {
		struct result_ctx rc = { .a = a, .pod = pod, .b = b };
		bk_proc_with_result(a, pod->pod_uid, id, add_receipt, &rc);
	}
	return bk_api_respond(200, b);
}

static char *parse_input(const cJSON *args, const char **out)
{
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(args, "data");
	if (!data)
		return bk_api_invalid("data", "missing", "Field required");
	if (!cJSON_IsString(data))
		return bk_api_invalid("data", "string_type", "Input should be a valid string");
	if (strlen(data->valuestring) > MAX_PROC_INPUT)
		return bk_api_invalid("data", "string_too_long", "String should have at most %u characters", MAX_PROC_INPUT);
	*out = data->valuestring;
	return NULL;
}

static char *input(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args)
{
	const char *id = process_id(args);
	/* the reference's framework validates the body before the handler
	 * looks the id up */
	const char *data;
	char *bad = parse_input(args, &data);
	if (bad)
		return bad;
	size_t n = strlen(data);
	int r = bk_proc_input(a, pod->pod_uid, id, data, n);
	if (r == -ENOENT)
		return not_found(id);
	if (r == -ESRCH)
		return bk_api_error(409, "process_not_running", "Process %s is not running", id);
	if (r < 0)
		return bk_api_error(500, "stdin_write_failed", "Failed to write to process stdin: %s", strerror(-r));
	cJSON *b = cJSON_CreateObject();
	cJSON_AddNumberToObject(b, "bytes_written", (double)n);
	return bk_api_respond(200, b);
}

static char *stop(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args)
{
	const char *id = process_id(args);
	struct bk_proc_info info;
	if (bk_proc_stop(a, pod->pod_uid, id, &info) == -ENOENT)
		return not_found(id);
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "status", bk_proc_status_names[info.status]);
	cJSON_AddItemToObject(b, "exit_code", exit_json(info.has_exit, info.exit_code));
	bk_proc_info_free(&info);
	return bk_api_respond(200, b);
}

static char *list(struct bk_agent *a, const struct bk_pod *pod)
{
	struct bk_proc_info *v;
	size_t n;
	if (bk_proc_list(a, pod->pod_uid, &v, &n) < 0)
		return bk_api_error(503, "out_of_memory", "out of memory");
	cJSON *b = cJSON_CreateObject();
	cJSON *arr = cJSON_AddArrayToObject(b, "processes");
	for (size_t i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "process_id", v[i].id);
		cJSON_AddStringToObject(o, "command", v[i].command ? v[i].command : "");
		cJSON_AddItemToObject(o, "description",
				      v[i].description ? cJSON_CreateString(v[i].description) : cJSON_CreateNull());
		cJSON_AddStringToObject(o, "status", bk_proc_status_names[v[i].status]);
		cJSON_AddItemToObject(o, "started_at", iso_time(v[i].started_unix_ns));
		cJSON_AddItemToObject(o, "exit_code", exit_json(v[i].has_exit, v[i].exit_code));
		cJSON_AddNullToObject(o, "expose_port");
		cJSON_AddStringToObject(o, "exec_id", v[i].exec_id);
		cJSON_AddItemToArray(arr, o);
		bk_proc_info_free(&v[i]);
	}
	free(v);
	return bk_api_respond(200, b);
}

char *bk_api_check_process_args(const struct bk_config *c, const char *op, const cJSON *args)
{
	struct start_args sa;
	const char *data;
	int64_t since;
	if (streq(op, "process_start"))
		return parse_start(c, args, &sa);
	if (streq(op, "process_input"))
		return parse_input(args, &data);
	if (streq(op, "process_output"))
		return since_arg(args, &since);
	return NULL;
}

char *bk_api_process(struct bk_agent *a, const struct bk_pod *pod, const char *op, const cJSON *args)
{
	if (streq(op, "process_start"))
		return start(a, pod, args);
	if (streq(op, "process_output"))
		return output(a, pod, args);
	if (streq(op, "process_input"))
		return input(a, pod, args);
	if (streq(op, "process_stop"))
		return stop(a, pod, args);
	if (streq(op, "process_list"))
		return list(a, pod);
	cJSON *b = cJSON_CreateObject();
	cJSON_AddNumberToObject(b, "killed", bk_proc_kill_all(a, pod->pod_uid));
	return bk_api_respond(200, b);
}
