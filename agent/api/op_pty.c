/* SPDX-License-Identifier: Apache-2.0 */
/* Terminals (issue 18): op "pty" (the shim's /pty WebSocket, boxkitectl
 * exec -it) and op "pty_exec" (POST /pty-exec). Each is an exec with all
 * its layers (session/run.c, isolate/exec.c) whose stdio is a terminal of
 * the exec's own devpts (isolate/pty.h).
 *
 * "pty", on the requester's connection after the request:
 *   agent  -> {"status":200,"more":true,"body":{"type":"start","exec_id":..}}
 *   agent  -> {"status":200,"more":true,"body":{"type":"output","data_base64":..}}
 *   client -> {"type":"input","data_base64":..}
 *   client -> {"type":"resize","rows":R,"cols":C}
 *   agent  -> {"status":200,"body":{"type":"exit","exit_code":..,"timed_out":..,"isolation":..}}
 * A refusal before "start" is an ordinary error answer. The requester
 * hanging up kills the shell (its whole cgroup). pty.max_per_pod live
 * terminals per pod (429 beyond), pty.idle_timeout_s without input or
 * output ends one, pty.max_seconds is its longest life.
 *
 * "pty_exec": the reference sidecar's POST /pty-exec, {command,
 * input_bytes (base64), timeout_seconds} -> {output, exit_code,
 * timed_out}: the command split as shlex.split and never interpreted by a
 * shell, input_bytes written to the terminal, output kept up to 256 KiB
 * (the rest read and dropped), the timeout clamped to [0.1, 120] s. 404
 * unless pty.exec_enabled, as the reference's BOXKITE_AGENT_PTY_ENABLED. */
#include "agent/api/op_pty.h"
#include "agent/api/op_exec.h"
#include "agent/api/reply.h"
#include "agent/isolate/exec.h"
#include "agent/parse/shlex.h"
#include "agent/parse/text.h"
#include "agent/session/run.h"
#include "lib/log.h"
#include "lib/proto.h"
#include "lib/util.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <termios.h>

#define PTY_EXEC_MAX_OUTPUT (256u * 1024u) /* the reference's PTY_EXEC_MAX_OUTPUT_BYTES */
#define PTY_EXEC_MAX_TIMEOUT 120.0         /* ... PTY_EXEC_MAX_TIMEOUT_SECONDS */
#define PTY_INPUT_MAX (1u << 20)           /* one input message, and input waiting for the terminal */
#define PTY_SIZE_MAX 4096                  /* rows, cols */
#define PTY_SEND_TIMEOUT_S 30              /* output the requester does not take for this long ends it */

/* The shell of an interactive terminal (the reference's /bin/bash when
 * the image has it). */
static const char default_shell[] =
	"TERM=%s; export TERM; if command -v bash >/dev/null 2>&1; then exec bash -i; fi; exec sh -i";

/* ---- live terminals per pod ----------------------------------------------------------- */

#define PTY_PODS 256
static pthread_mutex_t pods_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char uid[BK_UID_LEN + 1];
	unsigned n;
} pods[PTY_PODS];

static bool pty_take(const char *uid, uint64_t max)
{
	bool ok = false;
	int free_i = -1;
	pthread_mutex_lock(&pods_lock);
	for (int i = 0; i < PTY_PODS; i++) {
		if (pods[i].n && streq(pods[i].uid, uid)) {
			if (pods[i].n < max) {
				pods[i].n++;
				ok = true;
			}
			goto out;
		}
		if (!pods[i].n && free_i < 0)
			free_i = i;
	}
	if (max > 0 && free_i >= 0) {
		snprintf(pods[free_i].uid, sizeof(pods[free_i].uid), "%s", uid);
		pods[free_i].n = 1;
		ok = true;
	}
out:
	pthread_mutex_unlock(&pods_lock);
	return ok;
}

static void pty_give(const char *uid)
{
	pthread_mutex_lock(&pods_lock);
	for (int i = 0; i < PTY_PODS; i++)
		if (pods[i].n && streq(pods[i].uid, uid)) {
			pods[i].n--;
			break;
		}
	pthread_mutex_unlock(&pods_lock);
}

/* ---- strict base64 (Python's b64decode(validate=True)) -------------------------------- */

static int b64val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Returns the decoded length (out holds at least 3*len/4 bytes), or -1. */
ssize_t bk_pty_b64_decode(const char *in, size_t len, unsigned char *out)
{
	if (len % 4)
		return -1;
	size_t o = 0;
	for (size_t i = 0; i < len; i += 4) {
		int v[4], pad = 0;
		for (int k = 0; k < 4; k++) {
			char c = in[i + k];
			if (c == '=' && i + 4 == len && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			if (pad || (v[k] = b64val(c)) < 0)
				return -1;
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
		out[o++] = (unsigned char)(w >> 16);
		if (pad < 2)
			out[o++] = (unsigned char)(w >> 8);
		if (pad < 1)
			out[o++] = (unsigned char)w;
	}
	return (ssize_t)o;
}

static char *b64_encode(const char *p, size_t n)
{
	char *t = malloc(4 * ((n + 2) / 3) + 1);
	if (t)
		EVP_EncodeBlock((unsigned char *)t, (const unsigned char *)p, (int)n);
	return t;
}

/* ---- the sink of a terminal -------------------------------------------------------------- */

struct pty_sess {
	int fd;                 /* the requester's connection */
	bool live;              /* op "pty": events out, input in; else pty_exec: output kept */
	char *in;               /* input waiting for the terminal */
	size_t inlen;
	char *out;              /* pty_exec: the output kept */
	size_t outlen;
	bool broken;
};

static int send_event(struct pty_sess *s, cJSON *ev)
{
	if (s->broken) {
		cJSON_Delete(ev);
		return -EPIPE;
	}
	char *txt = bk_api_event(ev);
	/* output the requester does not take within PTY_SEND_TIMEOUT_S ends
	 * the terminal (the whole event, however many chunks it takes) */
	int r = txt ? bk_send_msg_until(s->fd, txt, strlen(txt), now_ns() + PTY_SEND_TIMEOUT_S * 1000000000ull)
		    : -ENOMEM;
	free(txt);
	if (r < 0)
		s->broken = true;
	return r;
}

static int sink_started(void *ud, const struct bk_exec_result *res)
{
	struct pty_sess *s = ud;
	if (!s->live)
		return 0;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "start");
	cJSON_AddStringToObject(ev, "exec_id", res->exec_id);
	return send_event(s, ev);
}

static int sink_output(void *ud, int k, const char *buf, size_t n)
{
	struct pty_sess *s = ud;
	if (!s->live) {
		/* the reference keeps the first 256 KiB and reads on */
		size_t room = PTY_EXEC_MAX_OUTPUT - s->outlen, take = n < room ? n : room;
		memcpy(s->out + s->outlen, buf, take);
		s->outlen += take;
		return 0;
	}
	_cleanup_free_ char *t = b64_encode(buf, n);
	if (!t)
		return -ENOMEM;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "type", "output");
	cJSON_AddStringToObject(ev, "data_base64", t);
	return send_event(s, ev);
}

static int sink_denied(void *ud, const struct bk_denial *d)
{
	(void)ud;
	(void)d; /* in the exit event's "denied" */
	return 0;
}

/* One message from the requester: input or a resize. < 0: gone. */
static int client_message(struct pty_sess *s, int pty_fd)
{
	_cleanup_free_ char *msg = NULL;
	size_t len = 0;
	int r = bk_recv_msg(s->fd, 2 * PTY_INPUT_MAX, &msg, &len);
	if (r != 0)
		return -EPIPE; /* EOF or a broken frame: the requester is gone */
	if (!s->live)
		return 0;
	cJSON *m = cJSON_ParseWithLength(msg, len);
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(m, "type");
	if (cJSON_IsString(type) && streq(type->valuestring, "input")) {
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "data_base64");
		size_t dl = cJSON_IsString(d) ? strlen(d->valuestring) : 0;
		if (dl && s->inlen + dl / 4 * 3 <= PTY_INPUT_MAX) {
			char *nb = realloc(s->in, s->inlen + dl / 4 * 3 + 1);
			ssize_t n = nb ? bk_pty_b64_decode(d->valuestring, dl, (unsigned char *)nb + s->inlen) : -1;
			if (nb)
				s->in = nb;
			if (n > 0)
				s->inlen += (size_t)n;
		}
	} else if (cJSON_IsString(type) && streq(type->valuestring, "resize")) {
		const cJSON *rw = cJSON_GetObjectItemCaseSensitive(m, "rows");
		const cJSON *cl = cJSON_GetObjectItemCaseSensitive(m, "cols");
		if (cJSON_IsNumber(rw) && cJSON_IsNumber(cl) && rw->valuedouble >= 1 && rw->valuedouble <= PTY_SIZE_MAX &&
		    cl->valuedouble >= 1 && cl->valuedouble <= PTY_SIZE_MAX) {
			struct winsize ws = { .ws_row = (unsigned short)rw->valuedouble,
					      .ws_col = (unsigned short)cl->valuedouble };
			/* the kernel sends SIGWINCH to the terminal's foreground group */
			ioctl(pty_fd, TIOCSWINSZ, &ws);
		}
	}
	cJSON_Delete(m);
	return 0;
}

static int sink_pty_io(void *ud, int pty_fd, bool client_readable)
{
	struct pty_sess *s = ud;
	if (client_readable && client_message(s, pty_fd) < 0)
		return -EPIPE;
	while (s->inlen) {
		ssize_t n = write(pty_fd, s->in, s->inlen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 1;
		if (n <= 0) { /* the terminal is gone: its output's end comes next */
			s->inlen = 0;
			break;
		}
		memmove(s->in, s->in + n, s->inlen - (size_t)n);
		s->inlen -= (size_t)n;
	}
	return 0;
}

static const struct bk_exec_sink pty_sink = { .started = sink_started, .output = sink_output,
					      .denied = sink_denied, .pty_io = sink_pty_io };

/* ---- op "pty" ------------------------------------------------------------------------- */

static char *get_size(const cJSON *args, const char *k, uint16_t def, uint16_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, k);
	*out = def;
	if (!v || cJSON_IsNull(v))
		return NULL;
	if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > PTY_SIZE_MAX ||
	    v->valuedouble != (double)(int)v->valuedouble)
		return bk_api_invalid(k, "int_type", "%s must be an integer from 1 to %d", k, PTY_SIZE_MAX);
	*out = (uint16_t)v->valuedouble;
	return NULL;
}

char *bk_api_pty(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args, int client_fd)
{
	if (client_fd < 0)
		return bk_api_error(400, "bad_request", "a terminal needs a connection of its own");
	struct bk_exec_args ea = { .client_fd = client_fd, .pty = true };
	char *e;
	if ((e = get_size(args, "rows", 24, &ea.pty_rows)) || (e = get_size(args, "cols", 80, &ea.pty_cols)))
		return e;
	const cJSON *term = cJSON_GetObjectItemCaseSensitive(args, "term");
	const char *t = "xterm-256color";
	if (term && !cJSON_IsNull(term)) {
		bool ok = cJSON_IsString(term) && term->valuestring[0] && strlen(term->valuestring) <= 64;
		for (const char *p = ok ? term->valuestring : ""; *p; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			      *p == '-' || *p == '.' || *p == '_' || *p == '+'))
				ok = false;
		if (!ok)
			return bk_api_invalid("term", "value_error", "term must be a terminal type name");
		t = term->valuestring;
	}
	char shell[256];
	snprintf(shell, sizeof(shell), default_shell, t);
	ea.command = shell;
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(args, "command");
	if (cmd && !cJSON_IsNull(cmd)) {
		if (!cJSON_IsString(cmd) || !cmd->valuestring[0] || strlen(cmd->valuestring) > 256u * 1024u)
			return bk_api_invalid("command", "string_type", "command must be a non-empty string");
		ea.command = cmd->valuestring;
	}
	ea.timeout = (uint32_t)a->cfg.pty_max_s;
	ea.idle_s = (uint32_t)a->cfg.pty_idle_s;
	if (!pty_take(pod->pod_uid, a->cfg.pty_max))
		return bk_api_error(429, "too_many_terminals", "this sandbox already has %llu terminals open (pty.max_per_pod)",
				    (unsigned long long)a->cfg.pty_max);
	struct pty_sess s = { .fd = client_fd, .live = true };
	struct bk_exec_sink sink = pty_sink;
	sink.ud = &s;
	ea.sink = &sink;
	_cleanup_free_ struct bk_exec_result *res = calloc(1, sizeof(*res));
	struct bk_refusal ref;
	char *out = NULL;
	log_info("pty_open", LS("pod", pod->pod_name), LS("namespace", pod->pod_namespace), LI("rows", ea.pty_rows),
		 LI("cols", ea.pty_cols));
	if (!res) {
		out = bk_api_error(503, "out_of_memory", "out of memory");
	} else if (bk_session_exec(a, pod, &ea, res, &ref) < 0) {
		out = bk_api_refusal(&ref);
	} else {
		free(res->out);
		free(res->err);
		res->out = res->err = NULL;
		if (!s.broken)
			out = bk_api_exit_answer(a, pod, &ea, res);
		log_info("pty_close", LS("pod", pod->pod_name), LS("exec_id", res->exec_id),
			 LS("why", res->requester_gone ? "requester_gone" : res->timed_out ? "idle_or_max" : "exited"),
			 LI("exit_code", res->exit_code));
		bk_exec_result_free(res);
	}
	pty_give(pod->pod_uid);
	free(s.in);
	/* (the events' send timeout is not the answer's) */
	struct timeval tv = { 0 };
	setsockopt(client_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return out; /* NULL: the requester is gone, the connection closes */
}

/* ---- op "pty_exec" ------------------------------------------------------------------ */

char *bk_api_pty_exec(struct bk_agent *a, const struct bk_pod *pod, const cJSON *args, int client_fd)
{
	if (!a->cfg.pty_exec)
		return bk_api_error(404, "not_enabled", "Agent-callable PTY is not enabled on this deployment.");
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(args, "command");
	if (!cmd)
		return bk_api_invalid("command", "missing", "Field required");
	if (!cJSON_IsString(cmd))
		return bk_api_invalid("command", "string_type", "Input should be a valid string");
	const cJSON *ib = cJSON_GetObjectItemCaseSensitive(args, "input_bytes");
	if (ib && !cJSON_IsString(ib))
		return bk_api_invalid("input_bytes", "string_type", "Input should be a valid string");
	const cJSON *to = cJSON_GetObjectItemCaseSensitive(args, "timeout_seconds");
	double timeout = 30.0;
	if (to) {
		if (!cJSON_IsNumber(to) || to->valuedouble != to->valuedouble)
			return bk_api_invalid("timeout_seconds", "float_type", "Input should be a valid number");
		timeout = to->valuedouble;
	}
	if (strlen(cmd->valuestring) > 256u * 1024u)
		return bk_api_error(400, "bad_request", "command is too long");
	char perr[128];
	_cleanup_free_ char *sh = NULL;
	int words = bk_shlex_sh(cmd->valuestring, &sh, perr, sizeof(perr));
	if (words == -EINVAL)
		return bk_api_error(400, "bad_request", "Could not parse command: %s", perr);
	if (words < 0)
		return bk_api_error(503, "out_of_memory", "out of memory");
	if (words == 0)
		return bk_api_error(400, "bad_request", "command is required");
	struct pty_sess s = { .fd = client_fd };
	const char *b64 = ib ? ib->valuestring : "";
	size_t bl = strlen(b64);
	if (bl) {
		if (bl > 4 * (PTY_INPUT_MAX / 3) || !(s.in = malloc(bl / 4 * 3 + 1)))
			return bk_api_error(400, "bad_request", "input_bytes must be valid base64");
		ssize_t n = bk_pty_b64_decode(b64, bl, (unsigned char *)s.in);
		if (n < 0) {
			free(s.in);
			return bk_api_error(400, "bad_request", "input_bytes must be valid base64");
		}
		s.inlen = (size_t)n;
	}
	if (timeout < 0.1)
		timeout = 0.1;
	if (timeout > PTY_EXEC_MAX_TIMEOUT)
		timeout = PTY_EXEC_MAX_TIMEOUT;
	struct bk_exec_args ea = { .client_fd = client_fd, .pty = true, .pty_rows = 24, .pty_cols = 80,
				   .command = sh, .timeout_ms = (uint32_t)(timeout * 1000 + 0.5) };
	ea.timeout = (ea.timeout_ms + 999) / 1000;
	s.out = malloc(PTY_EXEC_MAX_OUTPUT);
	_cleanup_free_ struct bk_exec_result *res = calloc(1, sizeof(*res));
	if (!s.out || !res) {
		free(s.in);
		free(s.out);
		return bk_api_error(503, "out_of_memory", "out of memory");
	}
	if (!pty_take(pod->pod_uid, a->cfg.pty_max)) {
		free(s.in);
		free(s.out);
		return bk_api_error(429, "too_many_terminals",
				    "this sandbox already has %llu terminals open (pty.max_per_pod)",
				    (unsigned long long)a->cfg.pty_max);
	}
	struct bk_exec_sink sink = pty_sink;
	sink.ud = &s;
	ea.sink = &sink;
	struct bk_refusal ref;
	char *out;
	if (bk_session_exec(a, pod, &ea, res, &ref) < 0) {
		out = bk_api_refusal(&ref);
	} else {
		/* the reference decodes with errors="replace" */
		size_t tl = 0;
		char *txt = bk_utf8_sanitize(s.out, s.outlen, &tl);
		cJSON *b = cJSON_CreateObject();
		cJSON_AddStringToObject(b, "output", txt ? txt : "");
		free(txt);
		/* a command the timeout killed has no exit status of its own */
		if (res->timed_out)
			cJSON_AddNullToObject(b, "exit_code");
		else
			cJSON_AddNumberToObject(b, "exit_code", res->exit_code);
		cJSON_AddBoolToObject(b, "timed_out", res->timed_out);
		/* exactly the reference's fields: the exec's id is in the
		 * agent's exec audit line and pty logs */
		bk_exec_result_free(res);
		out = bk_api_respond(200, b);
	}
	pty_give(pod->pod_uid);
	free(s.in);
	free(s.out);
	return out;
}
