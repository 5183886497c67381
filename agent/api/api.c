/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/api/api.h"
#include "agent/parse/cmdparse.h"
#include "agent/isolate/landlock.h"
#include "agent/observe/metrics.h"
#include "agent/observe/observe.h"
#include "agent/api/files.h"
#include "agent/session/session.h"
#include "lib/log.h"
#include "agent/parse/text.h"
#include "lib/util.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>

#define MAX_COMMAND (256u * 1024u)
#define MAX_SECRETS 64
#define MAX_SECRET_BYTES (64u * 1024u)

__thread int bk_api_client_fd = -1;

const double bk_hist_bounds[BK_HIST_BUCKETS] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
						  0.1,   0.25,   0.5,   1,    5,     30 };

char *bk_api_respond(int status, cJSON *body)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "status", status);
	cJSON_AddItemToObject(o, "body", body ? body : cJSON_CreateObject());
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

cJSON *bk_api_error_body(const char *code, const char *fmt, va_list ap)
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
	cJSON *b = bk_api_error_body(code, fmt, ap);
	va_end(ap);
	return bk_api_respond(status, b);
}

/* ---- exec ----------------------------------------------------------------- */

struct exec_args {
	const char *command;
	uint32_t timeout;
	const char *cwd;
	const char *names[MAX_SECRETS];
	const char *values[MAX_SECRETS];
	size_t nsecrets;
};

static bool env_name_ok(const char *n)
{
	if (!n[0] || strlen(n) > 128 || !((n[0] >= 'A' && n[0] <= 'Z') || (n[0] >= 'a' && n[0] <= 'z') || n[0] == '_'))
		return false;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
			return false;
	/* the clean environment's own names and loader/shell hooks are not
	 * for secret_env to set */
	static const char *const reserved[] = { "PATH", "HOME", "LANG", "TERM", "ENV", "BASH_ENV", "IFS", "SHELL", NULL };
	for (int i = 0; reserved[i]; i++)
		if (streq(n, reserved[i]))
			return false;
	return !startswith(n, "LD_");
}

/* Validate the exec arguments. Returns NULL and fills ea, or an error
 * response. */
static char *parse_exec(const struct bk_config *c, const cJSON *args, struct exec_args *ea)
{
	memset(ea, 0, sizeof(*ea));
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(args, "command");
	if (!cJSON_IsString(cmd) || !cmd->valuestring[0])
		return bk_api_error(400, "bad_request", "\"command\" must be a non-empty string");
	if (strlen(cmd->valuestring) > MAX_COMMAND)
		return bk_api_error(400, "bad_request", "\"command\" is longer than %u bytes", MAX_COMMAND);
	ea->command = cmd->valuestring;
	ea->timeout = c->timeout_default;
	const cJSON *to = cJSON_GetObjectItemCaseSensitive(args, "timeout");
	if (to && !cJSON_IsNull(to)) {
		if (!cJSON_IsNumber(to) || to->valuedouble < 1 || to->valuedouble > c->timeout_max ||
		    to->valuedouble != (double)(uint32_t)to->valuedouble)
			return bk_api_error(400, "bad_request", "\"timeout\" must be an integer from 1 to %u seconds",
					    c->timeout_max);
		ea->timeout = (uint32_t)to->valuedouble;
	}
	const cJSON *cwd = cJSON_GetObjectItemCaseSensitive(args, "cwd");
	if (cwd && !cJSON_IsNull(cwd)) {
		if (!cJSON_IsString(cwd) || cwd->valuestring[0] != '/' || strlen(cwd->valuestring) > 4096)
			return bk_api_error(400, "bad_request", "\"cwd\" must be an absolute path");
		ea->cwd = cwd->valuestring;
	}
	const cJSON *se = cJSON_GetObjectItemCaseSensitive(args, "secret_env");
	if (se && !cJSON_IsNull(se)) {
		if (!cJSON_IsObject(se))
			return bk_api_error(400, "bad_request", "\"secret_env\" must be an object of strings");
		size_t total = 0;
		const cJSON *it;
		cJSON_ArrayForEach(it, se)
		{
			if (ea->nsecrets == MAX_SECRETS)
				return bk_api_error(400, "bad_request", "at most %d secret_env entries", MAX_SECRETS);
			if (!cJSON_IsString(it))
				return bk_api_error(400, "bad_request", "secret_env values must be strings");
			if (!env_name_ok(it->string))
				return bk_api_error(400, "bad_request", "secret_env name \"%.64s\" is not allowed",
						    it->string);
			total += strlen(it->string) + strlen(it->valuestring);
			if (total > MAX_SECRET_BYTES)
				return bk_api_error(400, "bad_request", "secret_env is larger than %u bytes",
						    MAX_SECRET_BYTES);
			ea->names[ea->nsecrets] = it->string;
			ea->values[ea->nsecrets] = it->valuestring;
			ea->nsecrets++;
		}
	}
	return NULL;
}

char *bk_api_check_exec_args(const struct bk_config *c, const cJSON *args)
{
	struct exec_args ea;
	return parse_exec(c, args, &ea);
}

static cJSON *isolation_json(const struct bk_agent *a, const struct bk_exec_result *r)
{
	cJSON *iso = cJSON_CreateObject();
	cJSON_AddStringToObject(iso, "netns", r->fresh_netns ? "fresh" : "pod");
	cJSON_AddNumberToObject(iso, "netns_inode", (double)r->netns_inode);
	cJSON *ifs = cJSON_AddArrayToObject(iso, "interfaces");
	for (int i = 0; i < r->n_ifaces; i++)
		cJSON_AddItemToArray(ifs, cJSON_CreateString(r->ifaces[i]));
	cJSON_AddStringToObject(iso, "cgroup", r->cgroup);
	cJSON_AddNumberToObject(iso, "cgroup_id", (double)r->cgroup_id);
	if (r->cgroup_pids[0])
		cJSON_AddStringToObject(iso, "cgroup_pids_v1", r->cgroup_pids);
	if (r->cgroup_memory[0])
		cJSON_AddStringToObject(iso, "cgroup_memory_v1", r->cgroup_memory);
	cJSON *bpf = cJSON_AddArrayToObject(iso, "bpf");
	for (int i = 0; i < r->n_progs; i++) {
		cJSON *p = cJSON_CreateObject();
		cJSON_AddStringToObject(p, "prog", r->progs[i].name);
		cJSON_AddNumberToObject(p, "id", r->progs[i].id);
		cJSON_AddStringToObject(p, "tag", r->progs[i].tag);
		cJSON_AddItemToArray(bpf, p);
	}
	cJSON_AddBoolToObject(iso, "bpf_held_to_end", r->bpf_held);
	cJSON_AddStringToObject(iso, "policy", r->policy);
	cJSON_AddStringToObject(iso, "policy_digest", r->policy_digest);
	cJSON *rules = cJSON_AddArrayToObject(iso, "policy_rules");
	if (r->policy_rules) {
		char *save = NULL, *txt = strdup(r->policy_rules);
		for (char *l = txt ? strtok_r(txt, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save))
			cJSON_AddItemToArray(rules, cJSON_CreateString(l));
		free(txt);
	}
	cJSON_AddNumberToObject(iso, "pids_max", (double)r->pids_max);
	cJSON_AddNumberToObject(iso, "memory_max", (double)r->memory_max);
	cJSON_AddBoolToObject(iso, "landlock", r->landlock);
	cJSON_AddNumberToObject(iso, "uid", r->uid);
	cJSON_AddNumberToObject(iso, "gid", r->gid);
	cJSON_AddBoolToObject(iso, "no_new_privs", true);
	cJSON_AddNumberToObject(iso, "capabilities", 0);
	(void)a;
	return iso;
}

static cJSON *out_string(char *raw, size_t len, const struct exec_args *ea, bool truncated)
{
	size_t l = len;
	char *red = bk_redact(raw, &l, ea->values, ea->nsecrets, truncated);
	if (!red)
		return cJSON_CreateString("");
	size_t sl;
	char *clean = bk_utf8_sanitize(red, l, &sl);
	free(red);
	cJSON *s = cJSON_CreateString(clean ? clean : "");
	free(clean);
	return s;
}

static char *landlock_error(const char *why)
{
	cJSON *b = cJSON_CreateObject();
	char d[600];
	snprintf(d, sizeof(d), "isolation could not be established (layer landlock): %s; the command did not run", why);
	cJSON_AddStringToObject(b, "detail", d);
	cJSON_AddStringToObject(b, "code", "isolation_failed");
	cJSON_AddStringToObject(b, "layer", "landlock");
	return bk_api_respond(503, b);
}

/* NULL when the command may run (then *landlock_fd is the ruleset, or -1
 * when the session has no allowlist), else the refusal response. */
static char *check_allowlist(struct bk_agent *a, const struct bk_pod *pod, const struct exec_args *ea,
			     const char *path_env, int *landlock_fd)
{
	*landlock_fd = -1;
	char **allowed = NULL;
	if (bk_session_allowed(a, pod->pod_uid, &allowed) < 0)
		return bk_api_error(503, "isolation_failed", "cannot read the session's allowed commands; the command did not run");
	if (!allowed)
		return NULL;
	size_t n = 0;
	while (allowed[n])
		n++;
	char *out = NULL;
	char root[64];
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pod->sandbox.init_pid);
	int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	char (*real)[PATH_MAX] = calloc(n ? n : 1, PATH_MAX);
	const char **realp = calloc(n + 1, sizeof(*realp));
	const char **okp = calloc(n + 1, sizeof(*okp));
	size_t k = 0;
	if (rootfd < 0 || !real || !realp || !okp) {
		out = landlock_error("cannot open the sandbox container's root");
		goto done;
	}
	struct bk_landlock_resolver rv = { .rootfd = rootfd, .cwd = ea->cwd ? ea->cwd : "/workspace", .path_env = path_env };
	for (size_t i = 0; i < n; i++) {
		realp[i] = bk_landlock_resolve(&rv, allowed[i], real[i], PATH_MAX) == 0 ? real[i] : NULL;
		if (realp[i])
			okp[k++] = realp[i];
	}
	struct bk_cmd_policy pol = { .names = (const char *const *)allowed, .real = realp, .n = n,
				     .resolve = bk_landlock_resolve, .ud = &rv, .cwd = rv.cwd };
	struct bk_cmd_result cr;
	memset(&cr, 0, sizeof(cr));
	int r = bk_cmd_check(ea->command, &pol, &cr);
	if (r < 0) {
		cJSON *lf = cJSON_CreateObject();
		cJSON_AddStringToObject(lf, "pod", pod->pod_name);
		cJSON_AddStringToObject(lf, "namespace", pod->pod_namespace);
		cJSON_AddStringToObject(lf, "reason", cr.code ? cr.code : "refused");
		bk_log_obj("warn", "exec_refused", lf);
		cJSON *b = cJSON_CreateObject();
		char d[400];
		snprintf(d, sizeof(d), "command refused by the session's allowlist: %s", cr.reason[0] ? cr.reason : strerror(-r));
		cJSON_AddStringToObject(b, "detail", d);
		cJSON_AddStringToObject(b, "code", "command_not_allowed");
		cJSON_AddStringToObject(b, "reason", cr.code ? cr.code : "refused");
		out = bk_api_respond(r == -EPERM ? 403 : 400, b);
		goto done;
	}
	if (!a->cfg.layer_landlock)
		goto done; /* turned off by the operator (logged at start): parser only */
	if (streq(a->cfg.fault, "landlock")) {
		out = landlock_error("injected fault");
		goto done;
	}
	if (bk_landlock_abi() <= 0) {
		out = landlock_error("the kernel has no Landlock");
		goto done;
	}
	r = bk_landlock_ruleset_at(rootfd, okp, k, landlock_fd);
	if (r < 0) {
		*landlock_fd = -1;
		out = landlock_error(strerror(-r));
	}
done:
	if (rootfd >= 0)
		close(rootfd);
	free(real);
	free(realp);
	free(okp);
	bk_strv_free(allowed);
	return out;
}

struct spawn_ctx {
	struct bk_agent *a;
	const char *pod_uid;
};

static void exec_spawned(void *ud)
{
	struct spawn_ctx *sc = ud;
	bk_session_exec_spawned(sc->a, sc->pod_uid);
}

char *bk_api_exec(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args)
{
	struct exec_args ea;
	char *err = parse_exec(&a->cfg, args, &ea);
	if (err)
		return err;
	if (!a->node_safe) {
		__atomic_add_fetch(&a->execs_refused_unsafe, 1, __ATOMIC_RELAXED);
		return bk_api_error(503, "node_unsafe",
				    "this node failed its isolation self-test and refuses execs until it passes again: %s",
				    a->selftest_error[0] ? a->selftest_error : "the self-test has not passed yet");
	}
	/* clean environment: only what API.md lists, plus secret_env */
	char *envp[MAX_SECRETS + 5];
	size_t ne = 0;
	envp[ne++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	envp[ne++] = "HOME=/workspace";
	envp[ne++] = "LANG=C.UTF-8";
	envp[ne++] = "TERM=dumb";
	char *owned[MAX_SECRETS] = { 0 };
	for (size_t i = 0; i < ea.nsecrets; i++) {
		if (asprintf(&owned[i], "%s=%s", ea.names[i], ea.values[i]) < 0)
			owned[i] = NULL;
		if (owned[i])
			envp[ne++] = owned[i];
	}
	envp[ne] = NULL;
	char perr[256] = "";
	const struct bk_profile *prof = bk_policy_select(&a->cfg.policy, pod->pod_namespace, pod->pod_name,
							 pod->policy_annotation, perr, sizeof(perr));
	if (!prof) {
		for (size_t i = 0; i < ea.nsecrets; i++)
			free(owned[i]);
		return bk_api_error(403, "unknown_profile", "%s; the command did not run", perr);
	}
	/* The session's command allowlist, enforced twice: a strict parser
	 * here, and a Landlock execute allowlist in the kernel. */
	int landlock_fd = -1;
	/* from here until its process is in its cgroup, a /configure of this
	 * pod waits for this exec (and one already running makes this wait) */
	if (bk_session_exec_begin(a, pod->pod_uid) < 0) {
		for (size_t i = 0; i < ea.nsecrets; i++)
			free(owned[i]);
		return bk_api_error(503, "out_of_memory", "no room to track this exec's session");
	}
	char *refusal = check_allowlist(a, pod, &ea, envp[0] + 5, &landlock_fd);
	if (refusal) {
		bk_session_exec_spawned(a, pod->pod_uid);
		for (size_t i = 0; i < ea.nsecrets; i++)
			free(owned[i]);
		return refusal;
	}
	struct spawn_ctx sc = { .a = a, .pod_uid = pod->pod_uid };
	struct bk_exec_req req = {
		.command = ea.command, .timeout_s = ea.timeout, .cwd = ea.cwd, .env = envp, .out_cap = a->cfg.output_cap,
		.profile = prof, .client_fd = bk_api_client_fd, .landlock_fd = landlock_fd,
		.spawned = exec_spawned, .spawned_ud = &sc,
	};

	struct bk_exec_result *res = calloc(1, sizeof(*res));
	if (!res) {
		exec_spawned(&sc);
		closep(&landlock_fd);
		return bk_api_error(503, "out_of_memory", "out of memory");
	}
	int r = bk_exec_run(&a->engine, pod, &req, res);
	closep(&landlock_fd);
	for (size_t i = 0; i < ea.nsecrets; i++)
		free(owned[i]);
	cJSON *audit = cJSON_CreateObject();
	cJSON_AddStringToObject(audit, "exec_id", res->exec_id);
	cJSON_AddStringToObject(audit, "pod", pod->pod_name);
	cJSON_AddStringToObject(audit, "namespace", pod->pod_namespace);
	cJSON_AddStringToObject(audit, "pod_uid", pod->pod_uid);
	cJSON_AddNumberToObject(audit, "duration_ms", res->duration_ms);
	cJSON *tm = cJSON_AddObjectToObject(audit, "phases_us");
	static const char *const phase[] = { "cgroup", "bpf", "spawn", "run", "teardown" };
	for (int i = 0; i < 5; i++)
		cJSON_AddNumberToObject(tm, phase[i], res->t_us[i]);
	char *out;
	if (r < 0) {
		__atomic_add_fetch(&a->execs_failed, 1, __ATOMIC_RELAXED);
		static const char *const lay[] = { "cgroup", "bpf", "netns", "container", "exec" };
		int li = 5;
		for (int i = 0; i < 5; i++)
			if (streq(res->layer, lay[i]))
				li = i;
		__atomic_add_fetch(&a->layer_failures[li], 1, __ATOMIC_RELAXED);
		cJSON_AddStringToObject(audit, "outcome", "isolation_failed");
		cJSON_AddStringToObject(audit, "layer", res->layer);
		cJSON_AddStringToObject(audit, "error", res->error);
		bk_log_obj("warn", "exec", audit);
		cJSON *b = cJSON_CreateObject();
		char d[700];
		snprintf(d, sizeof(d), "isolation could not be established (layer %s): %s; the command did not run",
			 res->layer, res->error);
		cJSON_AddStringToObject(b, "detail", d);
		cJSON_AddStringToObject(b, "code", "isolation_failed");
		cJSON_AddStringToObject(b, "layer", res->layer);
		out = bk_api_respond(503, b);
	} else {
		__atomic_add_fetch(res->timed_out ? &a->execs_timeout : &a->execs_ok, 1, __ATOMIC_RELAXED);
		bk_obs_count_denials(a, pod, res);
		pthread_mutex_lock(&a->stats_lock);
		int bi = 0;
		while (bi < BK_HIST_BUCKETS && res->duration_ms / 1000.0 > bk_hist_bounds[bi])
			bi++;
		a->hist[bi]++;
		a->hist_sum += res->duration_ms / 1000.0;
		pthread_mutex_unlock(&a->stats_lock);
		cJSON_AddStringToObject(audit, "outcome", res->requester_gone ? "requester_gone" :
							  res->timed_out ? "timeout" : "completed");
		cJSON_AddNumberToObject(audit, "exit_code", res->exit_code);
		cJSON_AddStringToObject(audit, "netns", res->fresh_netns ? "fresh" : "pod");
		cJSON_AddStringToObject(audit, "policy", res->policy);
		cJSON_AddBoolToObject(audit, "bpf", res->n_progs == BK_NPROGS);
		cJSON_AddNumberToObject(audit, "denied", (double)res->denied_total);
		bk_log_obj("info", "exec", audit);
		cJSON *b = cJSON_CreateObject();
		cJSON_AddNumberToObject(b, "exit_code", res->exit_code);
		cJSON_AddItemToObject(b, "stdout", out_string(res->out, res->outlen, &ea, res->truncated));
		cJSON_AddItemToObject(b, "stderr", out_string(res->err, res->errlen, &ea, res->truncated));
		res->out = res->err = NULL; /* freed by out_string */
		cJSON_AddBoolToObject(b, "timed_out", res->timed_out);
		cJSON_AddBoolToObject(b, "truncated", res->truncated);
		cJSON_AddNumberToObject(b, "duration_ms", res->duration_ms);
		cJSON_AddStringToObject(b, "exec_id", res->exec_id);
		cJSON_AddItemToObject(b, "isolation", isolation_json(a, res));
		cJSON *den = cJSON_AddArrayToObject(b, "denied");
		for (int i = 0; i < res->n_denied; i++) {
			const struct bk_denial *d = &res->denied[i];
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "dst", d->dst);
			cJSON_AddNumberToObject(o, "port", d->port);
			cJSON_AddStringToObject(o, "proto", d->proto);
			cJSON_AddStringToObject(o, "layer", "bpf");
			cJSON_AddStringToObject(o, "reason", d->reason);
			cJSON_AddNumberToObject(o, "pid", d->pid);
			size_t cl;
			char *comm = bk_utf8_sanitize(d->comm, strnlen(d->comm, sizeof(d->comm)), &cl);
			cJSON_AddStringToObject(o, "comm", comm ? comm : "");
			free(comm);
			cJSON_AddItemToArray(den, o);
			cJSON *al = cJSON_CreateObject();
			cJSON_AddStringToObject(al, "exec_id", res->exec_id);
			cJSON_AddStringToObject(al, "pod", pod->pod_name);
			cJSON_AddStringToObject(al, "namespace", pod->pod_namespace);
			cJSON_AddStringToObject(al, "dst", d->dst);
			cJSON_AddNumberToObject(al, "port", d->port);
			cJSON_AddStringToObject(al, "proto", d->proto);
			cJSON_AddStringToObject(al, "reason", d->reason);
			bk_log_obj("info", "denied", al);
		}
		cJSON_AddNumberToObject(b, "denied_total", (double)res->denied_total);
		out = bk_api_respond(200, b);
	}
	bk_exec_result_free(res);
	free(res);
	return out;
}

static cJSON *identity_json(const struct bk_pod *p)
{
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "pod_uid", p->pod_uid);
	cJSON_AddStringToObject(b, "pod_name", p->pod_name);
	cJSON_AddStringToObject(b, "namespace", p->pod_namespace);
	if (p->caller_container[0])
		cJSON_AddStringToObject(b, "caller_container_id", p->caller_container);
	cJSON_AddStringToObject(b, "sandbox_container_id", p->sandbox.id);
	cJSON_AddNumberToObject(b, "sandbox_uid", p->uid);
	return b;
}

/* Operations on one sandbox pod: the shim's own (identity from the kernel)
 * or, on the admin socket, the one named by "sandbox". */
static bool is_pod_op(const char *o)
{
	return streq(o, "exec") || streq(o, "identity") || streq(o, "configure") || streq(o, "tool_call") ||
	       streq(o, "isolation") || streq(o, "inspect") || streq(o, "verify") || streq(o, "metrics") ||
	       bk_files_is_op(o);
}

static char *pod_op(struct bk_agent *a, const struct bk_pod *p, const char *o, const cJSON *args)
{
	if (streq(o, "exec"))
		return bk_api_exec(a, p, args);
	if (streq(o, "identity"))
		return bk_api_respond(200, identity_json(p));
	if (streq(o, "isolation") || streq(o, "inspect"))
		return bk_api_respond(200, bk_obs_pod_report(a, p));
	if (streq(o, "verify"))
		return bk_obs_verify(a, p, args);
	if (streq(o, "metrics")) {
		char *txt = bk_metrics_text(a, p);
		cJSON *b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "text", txt ? txt : "");
		free(txt);
		cJSON *o2 = cJSON_CreateObject();
		cJSON_AddNumberToObject(o2, "status", 200);
		cJSON_AddStringToObject(o2, "content_type", "text/plain; version=0.0.4");
		cJSON_AddItemToObject(o2, "body", b);
		char *s2 = cJSON_PrintUnformatted(o2);
		cJSON_Delete(o2);
		return s2;
	}
	if (streq(o, "configure"))
		return bk_session_configure(a, p, args);
	if (streq(o, "tool_call"))
		return bk_tool_call(a, p, args);
	if (bk_files_is_op(o))
		return bk_files_op(a, p, o, args);
	return bk_api_error(404, "unknown_op", "unknown operation");
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
	if (!cJSON_IsString(op)) {
		out = bk_api_error(400, "bad_request", "\"op\" must be a string");
		goto done;
	}
	if (args && !cJSON_IsObject(args)) {
		out = bk_api_error(400, "bad_request", "\"args\" must be an object");
		goto done;
	}
	cJSON *empty = NULL;
	if (!args)
		args = empty = cJSON_CreateObject();
	const char *o = op->valuestring;
	if (streq(o, "ping")) {
		cJSON *b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "status", "ok");
		out = bk_api_respond(200, b);
	} else if (kind == BK_CALLER_SHIM && is_pod_op(o)) {
		/* the sandbox is re-resolved for every exec: containers restart */
		struct bk_pod p = *caller;
		p.sandbox_pidfd = -1;
		char err[512] = "";
		if (bk_pod_open_sandbox(&a->cfg, &p, err, sizeof(err)) < 0)
			out = bk_api_error(503, "sandbox_unavailable", "%s", err);
		else
			out = pod_op(a, &p, o, args);
		bk_pod_release(&p);
	} else if (kind == BK_CALLER_ADMIN && is_pod_op(o)) {
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(args, "sandbox");
		if (!cJSON_IsString(name)) {
			out = bk_api_error(400, "bad_request", "\"sandbox\" must name a sandbox pod");
		} else {
			struct bk_pod p;
			char err[512] = "";
			if (bk_pod_by_name(&a->cfg, name->valuestring, &p, err, sizeof(err)) < 0)
				out = bk_api_error(404, "no_such_sandbox", "%s", err);
			else
				out = pod_op(a, &p, o, args);
			bk_pod_release(&p);
		}
	} else if (kind == BK_CALLER_ADMIN && streq(o, "status")) {
		out = bk_api_respond(200, bk_obs_status(a));
	} else {
		/* default: reject anything unknown (bubblewrap's privileged-op rule) */
		out = bk_api_error(404, "unknown_op", "unknown operation \"%.64s\"", o);
	}
	cJSON_Delete(empty);
done:
	cJSON_Delete(root);
	return out ? out : bk_api_error(503, "out_of_memory", "out of memory");
}
