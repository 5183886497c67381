/* SPDX-License-Identifier: Apache-2.0 */
/* Request handling: one table of operations — its name, who may call it,
 * whether it acts on a sandbox pod, whether /tool-call may name it — and
 * one dispatcher. Anything not in the table is refused (bubblewrap's
 * privileged-op rule: `default: die("Unexpected privileged op")`). */
#include "agent/api/api.h"
#include "agent/api/op_observe.h"
#include "agent/api/op_session.h"
#include "agent/api/op_policy.h"
#include "agent/api/op_files.h"
#include "agent/api/op_pty.h"
#include "agent/api/op_process.h"
#include "agent/session/session.h"
#include "agent/observe/metrics.h"
#include "lib/util.h"

__thread int bk_api_client_fd = -1;

enum {
	BY_SHIM = 1 << 0,  /* the shim of a sandbox pod (identity from the kernel) */
	BY_ADMIN = 1 << 1, /* boxkitectl on the admin socket (root) */
	ON_POD = 1 << 2,   /* acts on one sandbox pod: the caller's, or "sandbox" for admin */
	TOOL = 1 << 3,     /* /tool-call may name it */
};

typedef char *(*op_fn)(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args);

struct op {
	const char *name;
	unsigned flags;
	op_fn run;
};

static char *op_ping(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "status", "ok");
	if (p) { /* the shim's ping: its pod's session, for /health */
		char sid[BK_SESSION_ID_MAX + 1];
		bk_session_current(a, p->pod_uid, sid, sizeof(sid), NULL);
		cJSON_AddItemToObject(b, "session_id", sid[0] ? cJSON_CreateString(sid) : cJSON_CreateNull());
	}
	return bk_api_respond(200, b);
}

/* set while /tool-call runs a tool: its exec never streams */
static __thread bool in_tool_call;

static char *op_exec(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	return bk_api_exec(a, p, args, bk_api_client_fd, !in_tool_call);
}

static char *op_identity(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "pod_uid", p->pod_uid);
	cJSON_AddStringToObject(b, "pod_name", p->pod_name);
	cJSON_AddStringToObject(b, "namespace", p->pod_namespace);
	if (p->caller_container[0])
		cJSON_AddStringToObject(b, "caller_container_id", p->caller_container);
	cJSON_AddStringToObject(b, "sandbox_container_id", p->sandbox.id);
	cJSON_AddNumberToObject(b, "sandbox_uid", p->uid);
	return bk_api_respond(200, b);
}

static char *op_report(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	return bk_api_inspect(a, p);
}

static char *op_verify(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	return bk_api_verify(a, p, args, bk_api_client_fd);
}

static char *op_metrics(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	char *txt = bk_metrics_text(a, p);
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "text", txt ? txt : "");
	free(txt);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "status", 200);
	cJSON_AddStringToObject(o, "content_type", "text/plain; version=0.0.4");
	cJSON_AddItemToObject(o, "body", b);
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

static char *op_configure(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	return bk_api_configure(a, p, args);
}

static char *op_file(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	return bk_files_op(a, p, op, args);
}

static char *op_status(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	return bk_api_status(a);
}

static char *op_events(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	return bk_api_events(a, args, bk_api_client_fd);
}

static char *op_policy_set(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	return bk_api_policy_set(a, p, args);
}

static char *op_pty(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	return streq(op, "pty") ? bk_api_pty(a, p, args, bk_api_client_fd) : bk_api_pty_exec(a, p, args, bk_api_client_fd);
}

static char *op_process(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	return bk_api_process(a, p, op, args);
}

static char *op_tool_call(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args);

#define POD_OP (BY_SHIM | BY_ADMIN | ON_POD)
static const struct op ops[] = {
	{ "ping", BY_SHIM | BY_ADMIN, op_ping },
	{ "exec", POD_OP, op_exec }, /* as a tool: bash_tool, bash */
	{ "identity", POD_OP, op_identity },
	{ "isolation", POD_OP, op_report },
	{ "inspect", POD_OP, op_report },
	{ "verify", POD_OP, op_verify },
	{ "metrics", POD_OP, op_metrics },
	{ "configure", POD_OP, op_configure },
	{ "tool_call", POD_OP, op_tool_call },
	{ "file_create", POD_OP | TOOL, op_file },
	{ "view", POD_OP | TOOL, op_file },
	{ "str_replace", POD_OP | TOOL, op_file },
	{ "ls", POD_OP | TOOL, op_file },
	{ "glob", POD_OP | TOOL, op_file },
	{ "grep", POD_OP | TOOL, op_file },
	{ "present_files", POD_OP | TOOL, op_file },
	{ "read_image", POD_OP, op_file },
	{ "pty", POD_OP, op_pty },      /* the /pty WebSocket, boxkitectl exec -it */
	{ "pty_exec", POD_OP, op_pty }, /* POST /pty-exec */
	{ "process_start", POD_OP, op_process },
	{ "process_output", POD_OP, op_process },
	{ "process_input", POD_OP, op_process },
	{ "process_stop", POD_OP, op_process },
	{ "process_list", POD_OP, op_process },
	{ "process_kill_all", POD_OP, op_process },
	{ "status", BY_ADMIN, op_status },
	{ "events", BY_ADMIN, op_events },
	{ "policy_set", BY_ADMIN | ON_POD, op_policy_set }, /* boxkitectl policy set NAME PROFILE */
};

/* Tool names of the reference sidecar's /tool-call that are not op names. */
static const struct {
	const char *tool, *op;
} tool_alias[] = { { "bash_tool", "exec" }, { "bash", "exec" } };

static const struct op *op_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
		if (streq(ops[i].name, name))
			return &ops[i];
	return NULL;
}

static char *op_tool_call(struct bk_agent *a, const struct bk_pod *p, const char *op, const cJSON *args)
{
	/* "session_id" is deliberately never read: the pod's current session
	 * is the only one a request can act in (SECURITY: a foreign session id
	 * must have no effect at all). */
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(args, "tool_name");
	if (!cJSON_IsString(name) || !name->valuestring[0])
		return bk_api_error(400, "bad_request", "\"tool_name\" must be a non-empty string");
	const cJSON *targs = cJSON_GetObjectItemCaseSensitive(args, "arguments");
	cJSON *empty = NULL;
	if (!targs || cJSON_IsNull(targs))
		targs = empty = cJSON_CreateObject();
	else if (!cJSON_IsObject(targs))
		return bk_api_error(400, "bad_request", "\"arguments\" must be an object");
	const char *t = name->valuestring;
	const struct op *o = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(tool_alias); i++)
		if (streq(t, tool_alias[i].tool))
			o = op_find(tool_alias[i].op);
	if (!o && (o = op_find(t)) && !(o->flags & TOOL))
		o = NULL;
	in_tool_call = true;
	char *out = o ? o->run(a, p, o->name, targs) : bk_api_error(400, "unknown_tool", "unknown tool \"%.64s\"", t);
	in_tool_call = false;
	cJSON_Delete(empty);
	return out;
}

/* Run a pod operation on the pod it names: the shim's own (the sandbox is
 * re-resolved for every request: containers restart), or for admin the
 * one named by "sandbox". */
static char *run_on_pod(struct bk_agent *a, enum bk_caller_kind kind, const struct bk_pod *caller,
			const struct op *o, const cJSON *args)
{
	struct bk_pod p;
	char err[512] = "";
	char *out;
	if (kind == BK_CALLER_SHIM) {
		p = *caller;
		p.sandbox_pidfd = -1;
		if (bk_pod_open_sandbox(&a->cfg, &p, err, sizeof(err)) < 0)
			out = bk_api_error(503, "sandbox_unavailable", "%s", err);
		else
			out = o->run(a, &p, o->name, args);
	} else {
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(args, "sandbox");
		if (!cJSON_IsString(name))
			return bk_api_error(400, "bad_request", "\"sandbox\" must name a sandbox pod");
		if (bk_pod_by_name(&a->cfg, name->valuestring, &p, err, sizeof(err)) < 0)
			out = bk_api_error(404, "no_such_sandbox", "%s", err);
		else
			out = o->run(a, &p, o->name, args);
	}
	bk_pod_release(&p);
	return out;
}

char *bk_api_handle(struct bk_agent *a, enum bk_caller_kind kind, const struct bk_pod *caller, const char *req,
		    size_t len)
{
	__atomic_add_fetch(&a->requests, 1, __ATOMIC_RELAXED);
	/* "\u0000" would silently cut a cJSON string short: refuse it. */
	if (memmem(req, len, "\\u0000", 6))
		return bk_api_error(400, "bad_request", "NUL characters are not allowed");
	cJSON *root = cJSON_ParseWithLength(req, len);
	if (!root || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return bk_api_error(400, "bad_json", "the request is not a JSON object");
	}
	char *out = NULL;
	const cJSON *op = cJSON_GetObjectItemCaseSensitive(root, "op");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(root, "args");
	cJSON *empty = NULL;
	if (!cJSON_IsString(op)) {
		out = bk_api_error(400, "bad_request", "\"op\" must be a string");
	} else if (args && !cJSON_IsObject(args)) {
		out = bk_api_error(400, "bad_request", "\"args\" must be an object");
	} else {
		if (!args)
			args = empty = cJSON_CreateObject();
		const struct op *o = op_find(op->valuestring);
		unsigned who = kind == BK_CALLER_SHIM ? BY_SHIM : BY_ADMIN;
		if (!o || !(o->flags & who))
			out = bk_api_error(404, "unknown_op", "unknown operation \"%.64s\"", op->valuestring);
		else if (o->flags & ON_POD)
			out = run_on_pod(a, kind, caller, o, args);
		else /* ping from the shim: its pod (the session id for /health) */
			out = o->run(a, kind == BK_CALLER_SHIM ? caller : NULL, o->name, args);
	}
	cJSON_Delete(empty);
	cJSON_Delete(root);
	return out ? out : bk_api_error(503, "out_of_memory", "out of memory");
}
