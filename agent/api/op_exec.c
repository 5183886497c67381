/* SPDX-License-Identifier: Apache-2.0 */
/* /exec (and the exec tool of /tool-call): JSON arguments validated into
 * struct bk_exec_args, the exec bracket (session/run.c) runs it, and its
 * typed result becomes the response: output redacted and made valid UTF-8,
 * the isolation receipt, the denied connections. */
#include "agent/api/op_exec.h"
#include "agent/api/op_observe.h"
#include "agent/api/reply.h"
#include "agent/parse/text.h"
#include "agent/session/run.h"
#include "agent/isolate/exec.h"
#include "lib/proto.h"
#include "lib/sign.h"
#include "lib/util.h"
#include "lib/log.h"

#include <openssl/evp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include <limits.h>

#define MAX_COMMAND (256u * 1024u)
#define MAX_SECRET_BYTES (64u * 1024u)

/* The reference sidecar's rule for a secret_env name: a POSIX identifier,
 * not one of the loader/interpreter hooks (compared upper-cased); ours adds
 * the clean environment's own names and every LD_/DYLD_ variable. A name
 * that fails is dropped silently (as the reference), never a 400. */
static bool env_name_ok(const char *n)
{
	if (!n[0] || strlen(n) > 128 || !((n[0] >= 'A' && n[0] <= 'Z') || (n[0] >= 'a' && n[0] <= 'z') || n[0] == '_'))
		return false;
	char up[129];
	size_t i = 0;
	for (const char *p = n; *p; p++) {
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
			return false;
		up[i++] = (*p >= 'a' && *p <= 'z') ? (char)(*p - 'a' + 'A') : *p;
	}
	up[i] = '\0';
	static const char *const reserved[] = { "PATH", "IFS", "ENV", "BASH_ENV", "BASH_FUNC", "PYTHONSTARTUP",
						"PYTHONPATH", "PERL5OPT", "NODE_OPTIONS", "NODE_PATH", "HOME", "LANG",
						"TERM", "SHELL", NULL };
	for (int k = 0; reserved[k]; k++)
		if (streq(up, reserved[k]))
			return false;
	return !startswith(up, "LD_") && !startswith(up, "DYLD_");
}

char *bk_api_command_arg(const cJSON *args, const char **command)
{
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(args, "command");
	if (!cmd)
		return bk_api_invalid("command", "missing", "Field required");
	if (!cJSON_IsString(cmd))
		return bk_api_invalid("command", "string_type", "Input should be a valid string");
	if (!cmd->valuestring[0])
		return bk_api_invalid("command", "value_error", "command must not be empty");
	if (strlen(cmd->valuestring) > MAX_COMMAND)
		return bk_api_invalid("command", "string_too_long", "command is longer than %u bytes", MAX_COMMAND);
	*command = cmd->valuestring;
	return NULL;
}

/* Validate the exec arguments. Returns NULL and fills ea, or an error
 * response (422 with a list "detail", as the reference's framework). */
static char *parse_exec(const struct bk_config *c, const cJSON *args, struct bk_exec_args *ea)
{
	memset(ea, 0, sizeof(*ea));
	ea->client_fd = -1;
	char *bad = bk_api_command_arg(args, &ea->command);
	if (bad)
		return bad;
	ea->timeout = c->timeout_default;
	const cJSON *to = cJSON_GetObjectItemCaseSensitive(args, "timeout");
	if (to && !cJSON_IsNull(to)) {
		/* (the range first: converting a double beyond int64 is undefined) */
		if (!cJSON_IsNumber(to) || !(to->valuedouble > -1e18 && to->valuedouble < 1e18) ||
		    to->valuedouble != (double)(int64_t)to->valuedouble)
			return bk_api_invalid("timeout", "int_type", "Input should be a valid integer");
		if (to->valuedouble < 1 || to->valuedouble > c->timeout_max)
			return bk_api_invalid("timeout", "value_error", "timeout must be from 1 to %u seconds",
					      c->timeout_max);
		ea->timeout = (uint32_t)to->valuedouble;
	}
	const cJSON *stream = cJSON_GetObjectItemCaseSensitive(args, "stream");
	if (stream && !cJSON_IsNull(stream)) {
		if (!cJSON_IsBool(stream))
			return bk_api_invalid("stream", "bool_type", "Input should be a valid boolean");
		ea->stream = cJSON_IsTrue(stream);
	}
	const cJSON *cwd = cJSON_GetObjectItemCaseSensitive(args, "cwd");
	if (cwd && !cJSON_IsNull(cwd)) {
		if (!cJSON_IsString(cwd) || cwd->valuestring[0] != '/' || strlen(cwd->valuestring) > 4096)
			return bk_api_invalid("cwd", "value_error", "cwd must be an absolute path");
		ea->cwd = cwd->valuestring;
	}
	/* "secrets": [{env, name, value}], made by the shim from the request's
	 * secret_env (ENV -> granted secret name) and its granted secrets; the
	 * client's own secret_env never reaches here (the shim removes it). */
	const cJSON *se = cJSON_GetObjectItemCaseSensitive(args, "secrets");
	if (se && !cJSON_IsNull(se)) {
		if (!cJSON_IsArray(se))
			return bk_api_invalid("secrets", "list_type", "Input should be a valid list");
		size_t total = 0;
		const cJSON *it;
		cJSON_ArrayForEach(it, se)
		{
			const cJSON *env = cJSON_GetObjectItemCaseSensitive(it, "env");
			const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
			const cJSON *val = cJSON_GetObjectItemCaseSensitive(it, "value");
			if (!cJSON_IsString(env) || !cJSON_IsString(name) || !cJSON_IsString(val) ||
			    strlen(name->valuestring) > BK_SECRET_NAME_MAX)
				return bk_api_invalid("secrets", "value_error", "secrets entries are {env, name, value} strings");
			if (!env_name_ok(env->valuestring))
				continue; /* dropped silently, as the reference */
			if (ea->nsecrets == BK_SECRETS_MAX)
				return bk_api_invalid("secret_env", "too_long", "at most %d secret_env entries", BK_SECRETS_MAX);
			total += strlen(env->valuestring) + strlen(val->valuestring);
			if (total > MAX_SECRET_BYTES)
				return bk_api_invalid("secret_env", "too_long", "secret_env values are larger than %u bytes",
						      MAX_SECRET_BYTES);
			ea->secret_names[ea->nsecrets] = env->valuestring;
			ea->secret_labels[ea->nsecrets] = name->valuestring;
			ea->secret_values[ea->nsecrets] = val->valuestring;
			ea->nsecrets++;
		}
	}
	return NULL;
}

char *bk_api_check_exec_args(const struct bk_config *c, const cJSON *args)
{
	struct bk_exec_args ea;
	return parse_exec(c, args, &ea);
}

/* A cap read from the cgroup: a number, "max", or null when unread. */
static cJSON *cap_json(bool read, uint64_t v)
{
	if (!read)
		return cJSON_CreateNull();
	return v == BK_CG_UNLIMITED ? cJSON_CreateString("max") : cJSON_CreateNumber((double)v);
}

static cJSON *ids_json(const int64_t *v, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
	return a;
}

/* The command's /proc/<pid>/status, as read after its execve. */
static cJSON *process_json(const struct bk_exec_result *r)
{
	const struct bk_proc_status *ps = &r->proc;
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "source", r->proc_source);
	cJSON_AddItemToObject(p, "uid", ids_json(ps->uid, 4));
	cJSON_AddItemToObject(p, "gid", ids_json(ps->gid, 4));
	cJSON_AddItemToObject(p, "groups", ids_json(ps->groups, ps->n_groups < BK_STATUS_GROUPS_MAX ? ps->n_groups
												   : BK_STATUS_GROUPS_MAX));
	static const char *const names[] = { "cap_inh", "cap_prm", "cap_eff", "cap_bnd", "cap_amb" };
	const uint64_t caps[] = { ps->cap_inh, ps->cap_prm, ps->cap_eff, ps->cap_bnd, ps->cap_amb };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		char hex[17];
		snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)caps[i]);
		cJSON_AddStringToObject(p, names[i], hex);
	}
	cJSON_AddNumberToObject(p, "no_new_privs", ps->no_new_privs);
	cJSON_AddNumberToObject(p, "seccomp", ps->seccomp);
	cJSON_AddNumberToObject(p, "seccomp_filters", ps->seccomp_filters);
	return p;
}

static cJSON *isolation_json(const struct bk_agent *a, const struct bk_exec_result *r)
{
	cJSON *iso = cJSON_CreateObject();
	cJSON_AddStringToObject(iso, "netns", r->fresh_netns ? "fresh" : "pod");
	cJSON_AddNumberToObject(iso, "netns_inode", (double)r->netns_inode);
	cJSON *ifs = cJSON_AddArrayToObject(iso, "interfaces");
	for (int i = 0; i < r->n_ifaces; i++)
		cJSON_AddItemToArray(ifs, cJSON_CreateString(r->ifaces[i]));
	/* "ahead": a warm slot, made before the request (every layer of it
	 * read back for this exec all the same); "on_request" */
	cJSON_AddStringToObject(iso, "made", r->warm ? "ahead" : "on_request");
	cJSON_AddStringToObject(iso, "cgroup", r->cgroup);
	cJSON_AddNumberToObject(iso, "cgroup_id", (double)r->cgroup_id);
	if (r->cgroup_pids[0])
		cJSON_AddStringToObject(iso, "cgroup_pids_v1", r->cgroup_pids);
	if (r->cgroup_memory[0])
		cJSON_AddStringToObject(iso, "cgroup_memory_v1", r->cgroup_memory);
	if (r->n_cgroups_v1) {
		cJSON *v1 = cJSON_AddObjectToObject(iso, "cgroups_v1");
		for (int i = 0; v1 && i < r->n_cgroups_v1; i++)
			cJSON_AddStringToObject(v1, r->cgroups_v1[i].ctrls, r->cgroups_v1[i].path);
	}
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
	cJSON_AddItemToObject(iso, "pids_max", cap_json(r->limits_read, r->pids_max));
	cJSON_AddItemToObject(iso, "memory_max", cap_json(r->limits_read, r->memory_max));
	cJSON_AddBoolToObject(iso, "landlock", r->landlock);
	cJSON_AddNumberToObject(iso, "landlock_abi", a->engine.features.landlock_abi);
	cJSON *sc = cJSON_AddObjectToObject(iso, "seccomp");
	cJSON_AddNumberToObject(sc, "mode", r->seccomp_mode);
	cJSON_AddNumberToObject(sc, "filters", r->seccomp_filters);
	const struct bk_proc_status *ps = &r->proc;
	cJSON_AddNumberToObject(iso, "uid", r->uid);
	cJSON_AddNumberToObject(iso, "gid", r->gid);
	cJSON_AddBoolToObject(iso, "no_new_privs", ps->no_new_privs == 1);
	/* how many capabilities the command holds in any set (0: none) */
	cJSON_AddNumberToObject(iso, "capabilities",
				__builtin_popcountll(ps->cap_inh | ps->cap_prm | ps->cap_eff | ps->cap_bnd | ps->cap_amb));
	cJSON_AddItemToObject(iso, "process", process_json(r));
	cJSON_AddStringToObject(iso, "kernel", a->engine.features.kernel);
	cJSON_AddItemToObject(iso, "features", bk_api_features_json(&a->engine.features));
	return iso;
}

static cJSON *out_string(char *raw, size_t len, const struct bk_exec_args *ea, bool truncated)
{
	size_t l = len;
	char *red = bk_redact_named(raw, &l, ea->secret_values, ea->secret_labels, ea->nsecrets, truncated);
	if (!red)
		return cJSON_CreateString("");
	size_t sl;
	char *clean = bk_utf8_sanitize(red, l, &sl);
	free(red);
	cJSON *s = cJSON_CreateString(clean ? clean : "");
	free(clean);
	return s;
}

/* One denial ({"type": type, ...} when type is set: a stream's event). */
static cJSON *denial_json(const struct bk_denial *d, const char *type)
{
	cJSON *o = cJSON_CreateObject();
	if (type)
		cJSON_AddStringToObject(o, "type", type);
	cJSON_AddStringToObject(o, "dst", d->dst);
	cJSON_AddNumberToObject(o, "port", d->port);
	cJSON_AddStringToObject(o, "proto", d->proto);
	cJSON_AddStringToObject(o, "layer", d->hook && streq(d->hook, "dns_proxy") ? "dns_proxy" : "bpf");
	cJSON_AddStringToObject(o, "reason", d->reason);
	cJSON_AddNumberToObject(o, "pid", d->pid);
	size_t cl;
	char *comm = bk_utf8_sanitize(d->comm, strnlen(d->comm, sizeof(d->comm)), &cl);
	cJSON_AddStringToObject(o, "comm", comm ? comm : "");
	free(comm);
	if (d->hook)
		cJSON_AddStringToObject(o, "hook", d->hook);
	if (d->attributed_to)
		cJSON_AddStringToObject(o, "attributed_to", d->attributed_to);
	if (d->name[0])
		cJSON_AddStringToObject(o, "name", d->name);
	return o;
}

static cJSON *denied_json(const struct bk_exec_result *r)
{
	cJSON *den = cJSON_CreateArray();
	for (int i = 0; i < r->n_denied; i++)
		cJSON_AddItemToArray(den, denial_json(&r->denied[i], NULL));
	return den;
}

/* ---- the signed receipt ------------------------------------------------------------------- */

static void sha256_hex(const char *s, char *out)
{
	unsigned char md[32];
	unsigned int ml = 0;
	out[0] = '\0';
	if (EVP_Digest(s, strlen(s), md, &ml, EVP_sha256(), NULL) && ml == 32)
		for (int i = 0; i < 32; i++)
			snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static void rfc3339(uint64_t unix_ns, char *out, size_t n)
{
	time_t t = (time_t)(unix_ns / 1000000000ull);
	struct tm tm;
	gmtime_r(&t, &tm);
	char d[32];
	strftime(d, sizeof(d), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, n, "%s.%06uZ", d, (unsigned)(unix_ns % 1000000000ull / 1000));
}

/* The receipt: a JSON document (these exact bytes are signed), its
 * detached Ed25519 signature (base64) and the node key's id. NULL if the
 * signature cannot be made (logged). */
static cJSON *receipt_json(const struct bk_agent *a, const struct bk_pod *pod, const struct bk_exec_args *ea,
			   const struct bk_exec_result *r, const char *iso)
{
	if (!iso) {
		log_error("receipt_unsigned", LS("exec_id", r->exec_id), LS("error", "out of memory"));
		return cJSON_CreateNull();
	}
	char cmd_h[65], cwd_h[65], t0[48], t1[48];
	sha256_hex(ea->command, cmd_h);
	sha256_hex(ea->cwd ? ea->cwd : "/workspace", cwd_h);
	rfc3339(r->started_unix_ns, t0, sizeof(t0));
	rfc3339(r->ended_unix_ns, t1, sizeof(t1));
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "type", "boxkite.exec_receipt.v1");
	cJSON_AddStringToObject(d, "exec_id", r->exec_id);
	cJSON_AddStringToObject(d, "node", a->node_name);
	cJSON *p = cJSON_AddObjectToObject(d, "pod");
	cJSON_AddStringToObject(p, "namespace", pod->pod_namespace);
	cJSON_AddStringToObject(p, "name", pod->pod_name);
	cJSON_AddStringToObject(p, "uid", pod->pod_uid);
	cJSON_AddStringToObject(d, "container_id", pod->sandbox.id);
	cJSON_AddStringToObject(d, "command_sha256", cmd_h);
	cJSON_AddStringToObject(d, "cwd_sha256", cwd_h);
	cJSON_AddStringToObject(d, "started_at", t0);
	cJSON_AddStringToObject(d, "ended_at", t1);
	cJSON_AddNumberToObject(d, "exit_code", r->exit_code);
	cJSON_AddBoolToObject(d, "timed_out", r->timed_out);
	cJSON_AddNumberToObject(d, "denied_total", (double)r->denied_total);
	cJSON_AddStringToObject(d, "policy_digest", r->policy_digest);
	cJSON_AddItemToObject(d, "isolation", cJSON_CreateRaw(iso));
	cJSON_AddItemToObject(d, "denied", denied_json(r));
	cJSON_AddStringToObject(d, "agent_version", BK_VERSION);
	cJSON_AddStringToObject(d, "kernel", a->engine.features.kernel);
	cJSON_AddStringToObject(d, "key_id", bk_signer_key_id(a->signer));
	char *doc = cJSON_PrintUnformatted(d);
	cJSON_Delete(d);
	char sig[96];
	if (!doc || bk_signer_sign(a->signer, doc, strlen(doc), sig, sizeof(sig)) < 0) {
		log_error("receipt_unsigned", LS("exec_id", r->exec_id), LS("error", "cannot sign the receipt"));
		free(doc);
		return cJSON_CreateNull();
	}
	cJSON *rc = cJSON_CreateObject();
	cJSON_AddStringToObject(rc, "document", doc);
	cJSON_AddStringToObject(rc, "signature", sig);
	cJSON_AddStringToObject(rc, "key_id", bk_signer_key_id(a->signer));
	free(doc);
	return rc;
}

/* ---- "stream": true -------------------------------------------------------------------------
 * Events, one frame each, {"status":200,"more":true,"body":{"type":...}} on
 * the requester's connection as the command runs; the last one (the
 * handler's answer, without "more") is {"type":"exit", ...}: the
 * non-streamed answer without stdout/stderr. Each output stream keeps back
 * what redaction needs to see whole (bk_redact_safe_cut) and an incomplete
 * UTF-8 sequence at its end; bytes that are not UTF-8 (or NUL) travel as
 * base64 in "data_base64". */

#define TEXT_RUN_MIN 16 /* a shorter valid run between invalid bytes goes with them in base64 */

struct out_stream {
	char *raw;          /* kept back for redaction */
	size_t rawlen, rawcap;
	char u8[4];         /* an incomplete UTF-8 sequence kept back */
	size_t u8len;
};

struct exec_stream {
	int fd;
	const struct bk_exec_args *ea;
	uint32_t timeout_s;
	uint64_t deadline_ns; /* now_ns(): a send waits at most until then (+1 s) */
	struct out_stream o[2];
	int denied_sent;
	bool started, broken;
};

static int stream_send(struct exec_stream *s, cJSON *ev)
{
	if (s->broken) {
		cJSON_Delete(ev);
		return -EPIPE;
	}
	char *txt = bk_api_event(ev);
	if (!txt) {
		s->broken = true;
		return -ENOMEM;
	}
	/* a requester that stops reading holds the exec at most to its
	 * deadline + 1 s, in all: each send waits only for what is left of
	 * that (a reader taking a little now and then must not renew it) */
	int r = bk_send_msg_until(s->fd, txt, strlen(txt), s->deadline_ns + 1000000000ull);
	free(txt);
	if (r < 0)
		s->broken = true;
	return r;
}

static int send_segment(struct exec_stream *s, int k, const char *p, size_t n, bool text)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", k ? "stderr" : "stdout");
	char *t = malloc(text ? n + 1 : 4 * ((n + 2) / 3) + 1);
	if (!t) {
		cJSON_Delete(ev);
		return -ENOMEM;
	}
	if (text) {
		memcpy(t, p, n);
		t[n] = '\0';
	} else {
		EVP_EncodeBlock((unsigned char *)t, (const unsigned char *)p, (int)n);
	}
	cJSON_AddStringToObject(ev, text ? "data" : "data_base64", t);
	free(t);
	return stream_send(s, ev);
}

/* Bytes in order: runs of valid UTF-8 as "data", the rest as "data_base64". */
static int emit_bytes(struct exec_stream *s, int k, const char *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		bool v;
		size_t l = bk_utf8_run(p + i, n - i, &v);
		if (v && (l >= TEXT_RUN_MIN || i + l == n)) {
			if (send_segment(s, k, p + i, l, true) < 0)
				return -EPIPE;
			i += l;
			continue;
		}
		size_t j = i + l;
		while (j < n) {
			l = bk_utf8_run(p + j, n - j, &v);
			if (v && (l >= TEXT_RUN_MIN || j + l == n))
				break;
			j += l;
		}
		if (send_segment(s, k, p + i, j - i, false) < 0)
			return -EPIPE;
		i = j;
	}
	return 0;
}

/* Send the first c bytes kept back for stream k, redacted (final: all of
 * it, the UTF-8 tail too, and tail_partial as the non-streamed answer). */
static int flush_out(struct exec_stream *s, int k, size_t c, bool final, bool tail_partial)
{
	struct out_stream *o = &s->o[k];
	const struct bk_exec_args *ea = s->ea;
	char *piece = malloc(c + 1);
	if (!piece)
		return -ENOMEM;
	/* (a stream with nothing kept back has no buffer yet) */
	if (c)
		memcpy(piece, o->raw, c);
	if (o->rawlen > c)
		memmove(o->raw, o->raw + c, o->rawlen - c);
	o->rawlen -= c;
	size_t pl = c;
	piece = bk_redact_named(piece, &pl, ea->secret_values, ea->secret_labels, ea->nsecrets, tail_partial);
	if (!piece)
		return -ENOMEM;
	char *all = malloc(o->u8len + pl + 1);
	if (!all) {
		free(piece);
		return -ENOMEM;
	}
	memcpy(all, o->u8, o->u8len);
	memcpy(all + o->u8len, piece, pl);
	free(piece);
	size_t al = o->u8len + pl;
	size_t w = final ? al : bk_utf8_whole_prefix(all, al);
	o->u8len = al - w;
	memcpy(o->u8, all + w, o->u8len);
	int r = w ? emit_bytes(s, k, all, w) : 0;
	free(all);
	return r;
}

static int sink_output(void *ud, int k, const char *buf, size_t n)
{
	struct exec_stream *s = ud;
	struct out_stream *o = &s->o[k];
	if (o->rawlen + n + 1 > o->rawcap) {
		size_t nc = o->rawcap ? o->rawcap : 4096;
		while (nc < o->rawlen + n + 1)
			nc *= 2;
		char *nb = realloc(o->raw, nc);
		if (!nb)
			return -ENOMEM;
		o->raw = nb;
		o->rawcap = nc;
	}
	memcpy(o->raw + o->rawlen, buf, n);
	o->rawlen += n;
	size_t c = bk_redact_safe_cut(o->raw, o->rawlen, s->ea->secret_values, s->ea->nsecrets);
	return flush_out(s, k, c, false, false);
}

static int sink_started(void *ud, const struct bk_exec_result *res)
{
	struct exec_stream *s = ud;
	s->started = true;
	s->deadline_ns = now_ns() + (uint64_t)s->timeout_s * 1000000000ull;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "start");
	cJSON_AddStringToObject(ev, "exec_id", res->exec_id);
	return stream_send(s, ev);
}

static int sink_denied(void *ud, const struct bk_denial *d)
{
	struct exec_stream *s = ud;
	s->denied_sent++;
	return stream_send(s, denial_json(d, "denied"));
}

/* The answer's fields after stdout/stderr (the exit event's too). */
static void add_result(struct bk_agent *a, const struct bk_pod *pod, const struct bk_exec_args *ea,
		       struct bk_exec_result *res, cJSON *b)
{
	cJSON_AddBoolToObject(b, "timed_out", res->timed_out);
	cJSON_AddBoolToObject(b, "truncated", res->truncated);
	cJSON_AddNumberToObject(b, "duration_ms", res->duration_ms);
	cJSON_AddStringToObject(b, "exec_id", res->exec_id);
	/* rendered once: these bytes in the answer and in the signed document */
	cJSON *iso = isolation_json(a, res);
	char *iso_txt = cJSON_PrintUnformatted(iso);
	cJSON_Delete(iso);
	cJSON_AddItemToObject(b, "isolation", iso_txt ? cJSON_CreateRaw(iso_txt) : cJSON_CreateNull());
	cJSON_AddItemToObject(b, "denied", denied_json(res));
	cJSON_AddNumberToObject(b, "denied_total", (double)res->denied_total);
	cJSON_AddItemToObject(b, "receipt", receipt_json(a, pod, ea, res, iso_txt));
	free(iso_txt);
}

char *bk_api_exit_answer(struct bk_agent *a, const struct bk_pod *pod, const struct bk_exec_args *ea,
			 struct bk_exec_result *res)
{
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "type", "exit");
	cJSON_AddNumberToObject(b, "exit_code", res->exit_code);
	add_result(a, pod, ea, res, b);
	return bk_api_respond(200, b);
}

void bk_api_exec_result_fields(struct bk_agent *a, const struct bk_pod *pod, const struct bk_exec_args *ea,
			       struct bk_exec_result *res, cJSON *b)
{
	add_result(a, pod, ea, res, b);
}

static char *exec_streamed(struct bk_agent *a, const struct bk_pod *pod, struct bk_exec_args *ea,
			   struct bk_exec_result *res)
{
	struct exec_stream s = { .fd = ea->client_fd, .ea = ea, .timeout_s = ea->timeout };
	const struct bk_exec_sink sink = { .ud = &s, .started = sink_started, .output = sink_output,
					   .denied = sink_denied };
	ea->sink = &sink;
	struct bk_refusal ref;
	char *out = NULL;
	if (bk_session_exec(a, pod, ea, res, &ref) < 0) {
		/* before "start": an ordinary error answer; after it, the shim
		 * relays it as the stream's last event */
		out = bk_api_refusal(&ref);
		goto done;
	}
	/* the exec has ended (nothing of it is held any more): what is left
	 * to send, and the exit event, get 1 s more */
	s.deadline_ns = now_ns();
	for (int k = 0; k < 2; k++)
		if (flush_out(&s, k, s.o[k].rawlen, true, res->truncated) < 0)
			s.broken = true;
	for (int i = s.denied_sent; i < res->n_denied && !s.broken; i++)
		sink_denied(&s, &res->denied[i]);
	free(res->out);
	free(res->err);
	res->out = res->err = NULL;
	if (!s.broken)
		out = bk_api_exit_answer(a, pod, ea, res);
	bk_exec_result_free(res);
done:
	if (s.started) {
		struct timeval tv = { 0 };
		setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	for (int k = 0; k < 2; k++)
		free(s.o[k].raw);
	return out; /* NULL (the requester is gone): the connection closes */
}

char *bk_api_exec(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args, int client_fd, bool may_stream)
{
	struct bk_exec_args ea;
	char *err = parse_exec(&a->cfg, args, &ea);
	if (err)
		return err;
	ea.client_fd = client_fd;
	_cleanup_free_ struct bk_exec_result *res = calloc(1, sizeof(*res));
	if (!res)
		return bk_api_error(503, "out_of_memory", "out of memory");
	if (ea.stream && may_stream && client_fd >= 0)
		return exec_streamed(a, pod, &ea, res);
	struct bk_refusal ref;
	if (bk_session_exec(a, pod, &ea, res, &ref) < 0)
		return bk_api_refusal(&ref);
	cJSON *b = cJSON_CreateObject();
	if (res->timed_out) {
		/* the reference's timeout answer: exit 124, no stdout, one line on
		 * stderr (the receipt keeps the status the kernel reported) */
		char line[64];
		snprintf(line, sizeof(line), "Command timed out after %us", ea.timeout);
		cJSON_AddNumberToObject(b, "exit_code", 124);
		cJSON_AddStringToObject(b, "stdout", "");
		cJSON_AddStringToObject(b, "stderr", line);
		free(res->out);
		free(res->err);
	} else {
		cJSON_AddNumberToObject(b, "exit_code", res->exit_code);
		cJSON_AddItemToObject(b, "stdout", out_string(res->out, res->outlen, &ea, res->truncated));
		cJSON_AddItemToObject(b, "stderr", out_string(res->err, res->errlen, &ea, res->truncated));
	}
	res->out = res->err = NULL; /* freed above */
	add_result(a, pod, &ea, res, b);
	bk_exec_result_free(res);
	return bk_api_respond(200, b);
}

