/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP side of boxkite-shim, on libmicrohttpd (MHD).
 *
 * Thread model: MHD_USE_THREAD_PER_CONNECTION. The access handler blocks on
 * the agent round trip (an /exec lasts as long as its command), which is
 * exactly what a thread per connection allows without suspend/resume
 * bookkeeping; connections are bounded (MHD_OPTION_CONNECTION_LIMIT), so are
 * the threads. MHD's connection timeout only runs while MHD itself waits on
 * the socket, so it bounds idle and slow clients (slowloris) but never the
 * wait for the agent's answer, which happens inside the handler.
 *
 * Order of checks for a request (first handler call, headers complete):
 *   framing (400: Content-Length with Transfer-Encoding, differing
 *   Content-Lengths, a Transfer-Encoding other than "chunked", a NUL byte
 *   anywhere in the client's bytes) -> route (404) -> method (405) -> /health answered here, no token
 *   -> token configured (503) -> X-Sidecar-Auth-Token (401)
 *   -> Content-Length over the limit (413) -> concurrency slot (waits its turn;
 *   429 past the queue's depth or time, answered after the body)
 *   -> body streamed with a running size check (413) -> JSON object (400)
 *   -> agent round trip (503 unavailable / 502 malformed / relayed verbatim)
 * A request rejected before the agent round trip never reaches the agent. */
#include "shim.h"
#include "frame.h"
#include "ws.h"
#include "procroute.h"
#include "lib/proto.h"

#include <cjson/cJSON.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <strings.h>
#include <time.h>

enum route_kind {
	R_AGENT,     /* forwarded to the agent as op */
	R_HEALTH,    /* answered here, no token */
	R_EXEC,      /* forwarded, secret_env resolved first (secrets.c) */
	R_CONFIGURE, /* forwarded; its secret_names kept, /health refreshed */
	R_METRICS,   /* the shim's boxkite_sidecar_* series, then the agent's */
	R_TOOL_CALL, /* to the backend (backend.c), or the agent's local tools (opt-in) */
	R_FLUSH,     /* no storage backend: nothing pending */
	R_FLUSH_CONFIRMED,
	R_PTY,       /* the /pty WebSocket: upgraded, then relayed (wspty.c) */
	R_PROCESS,   /* /process routes (procroute.c): forwarded with the path's id */
	R_NOT_IMPL,  /* the reference serves it, boxkite does not (501) */
};

struct route {
	const char *path;
	const char *method;
	const char *op; /* agent operation (R_AGENT, R_EXEC, R_CONFIGURE, R_METRICS) */
	bool body;      /* POST with a JSON object body */
	enum route_kind kind;
	bool prefix;    /* path is a prefix (R_NOT_IMPL only) */
};

static const struct route routes[] = {
	{ "/health", "GET", NULL, false, R_HEALTH, false },
	{ "/exec", "POST", "exec", true, R_EXEC, false },
	{ "/file-create", "POST", "file_create", true, R_AGENT, false },
	{ "/view", "POST", "view", true, R_AGENT, false },
	{ "/str-replace", "POST", "str_replace", true, R_AGENT, false },
	{ "/ls", "POST", "ls", true, R_AGENT, false },
	{ "/glob", "POST", "glob", true, R_AGENT, false },
	{ "/grep", "POST", "grep", true, R_AGENT, false },
	{ "/present-files", "POST", "present_files", true, R_AGENT, false },
	{ "/read-image", "POST", "read_image", true, R_AGENT, false },
	{ "/configure", "POST", "configure", true, R_CONFIGURE, false },
	{ "/tool-call", "POST", "tool_call", true, R_TOOL_CALL, false },
	{ "/isolation", "GET", "isolation", false, R_AGENT, false },
	{ "/metrics", "GET", "metrics", false, R_METRICS, false },
	{ "/flush", "POST", NULL, false, R_FLUSH, false },
	{ "/flush/confirmed", "POST", NULL, false, R_FLUSH_CONFIRMED, false },
	/* served by the reference, not by boxkite: 501 not_implemented (after
	 * authentication, whatever the method) */
	{ "/interpreter/", NULL, NULL, false, R_NOT_IMPL, true },
	{ "/node-interpreter/", NULL, NULL, false, R_NOT_IMPL, true },
	{ "/lsp/", NULL, NULL, false, R_NOT_IMPL, true },
	{ "/browser/", NULL, NULL, false, R_NOT_IMPL, true },
	{ "/preview/", NULL, NULL, false, R_NOT_IMPL, true },
	{ "/process/", NULL, NULL, false, R_PROCESS, true },
	{ "/process", NULL, NULL, false, R_PROCESS, false },
	{ "/pty-exec", "POST", "pty_exec", true, R_AGENT, false },
	{ "/pty", "GET", "pty", false, R_PTY, false },
	{ "/desktop", NULL, NULL, false, R_NOT_IMPL, false },
	{ "/http-request", NULL, NULL, false, R_NOT_IMPL, false },
	{ "/watch", NULL, NULL, false, R_NOT_IMPL, false },
	{ "/mount-bucket", NULL, NULL, false, R_NOT_IMPL, false },
	{ "/ensure-skills", NULL, NULL, false, R_NOT_IMPL, false },
	{ "/inject-skills", NULL, NULL, false, R_NOT_IMPL, false },
	{ "/prefetch-uploads", NULL, NULL, false, R_NOT_IMPL, false },
};

/* ... each resolved by shim_process_route to one of these */
static const struct route process_routes[PROC_N] = {
	[PROC_START] = { "/process/start", "POST", "process_start", true, R_PROCESS, false },
	[PROC_LIST] = { "/process", "GET", "process_list", false, R_PROCESS, false },
	[PROC_KILL_ALL] = { "/process/kill-all", "POST", "process_kill_all", false, R_PROCESS, false },
	[PROC_OUTPUT] = { "/process/{id}/output", "GET", "process_output", false, R_PROCESS, false },
	[PROC_INPUT] = { "/process/{id}/input", "POST", "process_input", true, R_PROCESS, false },
	[PROC_STOP] = { "/process/{id}/stop", "POST", "process_stop", false, R_PROCESS, false },
};

#define AUTH_HEADER "X-Sidecar-Auth-Token"

/* Fixed error bodies: {"detail": sentence, "code": stable code}. */
#define ERR_BODY(detail, code) "{\"detail\":\"" detail "\",\"code\":\"" code "\"}"
static const char body_not_found[] = ERR_BODY("Not Found", "not_found");
static const char body_bad_method[] = ERR_BODY("Method Not Allowed", "method_not_allowed");
/* the reference's tests look for "missing" or "invalid" in the detail */
static const char body_auth_missing[] = ERR_BODY("Missing sidecar auth token (X-Sidecar-Auth-Token)", "auth_missing");
static const char body_auth_invalid[] = ERR_BODY("Invalid sidecar auth token", "auth_invalid");
static const char body_no_token[] =
	ERR_BODY("Sidecar auth is not configured (no token); refusing every request", "no_token_configured");
static const char body_not_impl[] =
	ERR_BODY("not implemented by boxkite: this route of the reference sidecar is not served (docs/api.md)",
		 "not_implemented");
static const char body_too_large[] = ERR_BODY("request body too large", "body_too_large");
static const char body_busy[] = ERR_BODY("too many concurrent requests", "too_many_requests");
static const char body_bad_framing[] =
	ERR_BODY("ambiguous request framing: Content-Length with Transfer-Encoding, Content-Length headers that "
		 "differ, a Transfer-Encoding other than chunked, or a NUL byte",
		 "bad_request_framing");
/* a body that is not JSON / not an object: 422, as the reference's framework */
static const char body_bad_json[] =
	"{\"detail\":[{\"type\":\"json_invalid\",\"loc\":[\"body\"],\"msg\":\"JSON decode error\"}],"
	"\"code\":\"validation_error\"}";
static const char body_not_object[] =
	"{\"detail\":[{\"type\":\"model_attributes_type\",\"loc\":[\"body\"],\"msg\":\"Input should be a valid "
	"dictionary or object to extract fields from\"}],\"code\":\"validation_error\"}";
static const char body_bad_secret_env[] =
	"{\"detail\":[{\"type\":\"dict_type\",\"loc\":[\"body\",\"secret_env\"],\"msg\":\"Input should be a valid "
	"dictionary of strings\"}],\"code\":\"validation_error\"}";
static const char body_bad_tool_call[] =
	"{\"detail\":[{\"type\":\"missing\",\"loc\":[\"body\",\"tool_name\"],\"msg\":\"tool_name must be a string and "
	"arguments an object\"}],\"code\":\"validation_error\"}";
static const char body_unavailable[] = ERR_BODY("boxkite agent unavailable", "agent_unavailable");
static const char body_bad_reply[] = ERR_BODY("malformed response from the boxkite agent", "bad_agent_response");
static const char body_internal[] = ERR_BODY("internal error", "internal");
static const char body_bad_ws[] =
	ERR_BODY("/pty is a WebSocket: GET with Upgrade: websocket, Connection: Upgrade, Sec-WebSocket-Version: 13 "
		 "and a Sec-WebSocket-Key",
		 "bad_websocket_handshake");
static const char body_flush[] = "{\"status\":\"flushed\",\"files\":[]}";
static const char body_flush_confirmed[] = "{\"status\":\"flushed\",\"storage_prefix\":null,\"storage_keys\":[]}";

#define METRIC_LABEL_MAX 96

struct req {
	const struct route *route;
	const char *method; /* static label for logs */
	uint64_t start;
	unsigned status;
	bool slot;      /* holds one of max_concurrent */
	bool too_large; /* body went over the limit while streaming */
	bool busy;      /* no concurrency slot: 429 once the body is read and discarded */
	bool upgraded;  /* /pty: the connection is a WebSocket now (wspty.c) */
	uint64_t discarded; /* bytes thrown away after too_large */
	char *body;
	size_t len, cap;
	char peer[SHIM_ADDR_MAX];
	char label[METRIC_LABEL_MAX]; /* boxkite_sidecar_* route label */
	char proc_id[SHIM_PROC_ID_MAX + 1]; /* a /process route's {id} */
};

static const char *method_label(const char *m)
{
	static const char *const known[] = { "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH" };
	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (streq(m, known[i]))
			return known[i];
	return "other";
}

static const struct route *find_route(const char *url)
{
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++)
		if (routes[i].prefix ? startswith(url, routes[i].path) : streq(url, routes[i].path))
			return &routes[i];
	return NULL;
}

/* ---- the reference's boxkite_sidecar_* series ---------------------------
 * Requests and 4xx/5xx answers by route label, exactly the reference's
 * labels (path segments it does not know become "{id}"), bounded: at most
 * METRIC_LABELS labels, more segments or labels count as "/{other}". */
#define METRIC_LABELS 64
static const char *const known_segments[] = {
	"health", "exec", "http-request", "process", "start", "output", "input", "stop", "kill-all", "interpreter",
	"reset", "status", "ensure-skills", "inject-skills", "file-create", "view", "read-image", "str-replace",
	"present-files", "ls", "glob", "grep", "configure", "prefetch-uploads", "flush", "confirmed", "tool-call",
	"metrics", "pty",
};
static struct {
	pthread_mutex_t lock;
	unsigned n;
	struct {
		char label[METRIC_LABEL_MAX];
		uint64_t requests, errors;
	} l[METRIC_LABELS];
	uint64_t exec_total, exec_errors;
	uint64_t start;
} metrics = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void route_label(const char *url, char *out, size_t size)
{
	size_t o = 0;
	unsigned segs = 0;
	const char *p = url;
	while (*p == '/')
		p++;
	if (!*p) {
		snprintf(out, size, "/");
		return;
	}
	while (*p) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		const char *seg = "{id}";
		size_t sl = 4;
		for (size_t i = 0; i < ARRAY_SIZE(known_segments); i++)
			if (l == strlen(known_segments[i]) && memcmp(p, known_segments[i], l) == 0)
				seg = known_segments[i], sl = l;
		if (l == 0) /* "a//b" */
			seg = "", sl = 0;
		if (++segs > 4 || o + 1 + sl >= size) {
			snprintf(out, size, "/{other}");
			return;
		}
		out[o++] = '/';
		memcpy(out + o, seg, sl);
		o += sl;
		if (!e)
			break;
		p = e + 1;
		if (!*p) /* trailing slash */
			out[o++] = '/';
	}
	out[o] = '\0';
}

static void metrics_count(const char *route_lbl, unsigned status)
{
	char label[METRIC_LABEL_MAX];
	snprintf(label, sizeof(label), "%s", route_lbl[0] ? route_lbl : "/{other}");
	pthread_mutex_lock(&metrics.lock);
	unsigned i;
	for (i = 0; i < metrics.n; i++)
		if (streq(metrics.l[i].label, label))
			break;
	if (i == metrics.n) {
		if (metrics.n == METRIC_LABELS - 1 && !streq(label, "/{other}")) {
			snprintf(label, sizeof(label), "/{other}");
			for (i = 0; i < metrics.n; i++)
				if (streq(metrics.l[i].label, label))
					break;
		}
		if (i == metrics.n && metrics.n < METRIC_LABELS)
			snprintf(metrics.l[metrics.n++].label, METRIC_LABEL_MAX, "%s", label);
	}
	if (i < metrics.n) {
		metrics.l[i].requests++;
		if (status >= 400 || status == 0)
			metrics.l[i].errors++;
	}
	pthread_mutex_unlock(&metrics.lock);
}

static int cmp_label(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The reference's lines, sorted by label as it prints them. */
static char *metrics_text(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	pthread_mutex_lock(&metrics.lock);
	const char *labels[METRIC_LABELS];
	unsigned n = metrics.n;
	for (unsigned i = 0; i < n; i++)
		labels[i] = metrics.l[i].label;
	qsort(labels, n, sizeof(labels[0]), cmp_label);
	fprintf(f, "# HELP boxkite_sidecar_uptime_seconds Seconds since this sidecar process started.\n"
		   "# TYPE boxkite_sidecar_uptime_seconds gauge\n"
		   "boxkite_sidecar_uptime_seconds %.3f\n",
		(double)(now_ns() - metrics.start) / 1e9);
	for (int pass = 0; pass < 2; pass++) {
		fprintf(f, pass == 0 ? "# HELP boxkite_sidecar_requests_total Requests handled, by route.\n"
				       "# TYPE boxkite_sidecar_requests_total counter\n"
				     : "# HELP boxkite_sidecar_request_errors_total Requests with a 4xx/5xx response, by route.\n"
				       "# TYPE boxkite_sidecar_request_errors_total counter\n");
		for (unsigned k = 0; k < n; k++) {
			for (unsigned i = 0; i < n; i++) {
				if (metrics.l[i].label != labels[k])
					continue;
				uint64_t v = pass == 0 ? metrics.l[i].requests : metrics.l[i].errors;
				if (pass == 0 || v)
					fprintf(f, "boxkite_sidecar_%s{route=\"%s\"} %llu\n",
						pass == 0 ? "requests_total" : "request_errors_total", labels[k],
						(unsigned long long)v);
			}
		}
	}
	fprintf(f, "# HELP boxkite_sidecar_exec_total Commands executed via /exec.\n"
		   "# TYPE boxkite_sidecar_exec_total counter\n"
		   "boxkite_sidecar_exec_total %llu\n"
		   "# HELP boxkite_sidecar_exec_errors_total /exec calls that returned a non-zero exit code.\n"
		   "# TYPE boxkite_sidecar_exec_errors_total counter\n"
		   "boxkite_sidecar_exec_errors_total %llu\n",
		(unsigned long long)metrics.exec_total, (unsigned long long)metrics.exec_errors);
	pthread_mutex_unlock(&metrics.lock);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* Queue a response. body is either static (owned=false) or malloc'd and
 * handed to MHD (owned=true, freed by MHD or here on failure). */
static enum MHD_Result respond(struct shim *s, struct MHD_Connection *c, struct req *r, unsigned status,
			       const char *ctype, const char *body, size_t len, bool owned)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		len, (void *)body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!resp) {
		if (owned)
			free((void *)body);
		return MHD_NO;
	}
	enum MHD_Result ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (ok == MHD_YES)
		ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (ok == MHD_YES)
		ok = MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	if (ok == MHD_YES && status == MHD_HTTP_METHOD_NOT_ALLOWED && r->route)
		ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->route->method);
	if (ok == MHD_YES && (atomic_load(&s->draining) || body == body_bad_framing))
		ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	if (ok == MHD_YES)
		ok = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	if (ok == MHD_YES)
		r->status = status;
	return ok;
}

static enum MHD_Result respond_static(struct shim *s, struct MHD_Connection *c, struct req *r, unsigned status,
				      const char *body)
{
	return respond(s, c, r, status, "application/json", body, strlen(body), false);
}

/* ---- authentication ---------------------------------------------------- */

struct auth_scan {
	unsigned count;
	const char *value;
	size_t len;
};

static enum MHD_Result scan_auth_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
					const char *value, size_t value_size)
{
	struct auth_scan *a = cls;
	if (key_size == strlen(AUTH_HEADER) && strncasecmp(key, AUTH_HEADER, key_size) == 0) {
		a->count++;
		a->value = value;
		a->len = value ? value_size : 0;
	}
	return MHD_YES;
}

/* Exactly one X-Sidecar-Auth-Token header whose value equals the token,
 * byte for byte. Both sides are hashed with SHA-256 first so the comparison
 * is CRYPTO_memcmp over two equal-length buffers: neither the content nor
 * the length of the token leaks through timing. The query string is never
 * looked at. */
enum auth { AUTH_OK, AUTH_MISSING, AUTH_INVALID };

static enum auth auth_check(struct shim *s, struct MHD_Connection *c)
{
	struct auth_scan a = { 0 };
	MHD_get_connection_values_n(c, MHD_HEADER_KIND, scan_auth_header, &a);
	if (a.count == 0 || (a.count == 1 && (a.len == 0 || !a.value)))
		return AUTH_MISSING;
	if (a.count != 1)
		return AUTH_INVALID;
	unsigned char h[SHA256_DIGEST_LENGTH];
	if (!SHA256((const unsigned char *)a.value, a.len, h))
		return AUTH_INVALID;
	bool ok = CRYPTO_memcmp(h, s->token_hash, sizeof(h)) == 0;
	OPENSSL_cleanse(h, sizeof(h));
	return ok ? AUTH_OK : AUTH_INVALID;
}

/* ---- request framing ----------------------------------------------------
 *
 * A proxy in front of the shim must never see a different request than the
 * shim does. libmicrohttpd takes the first of several Content-Length
 * headers, lets Transfer-Encoding win over Content-Length, and cuts a
 * header value at a NUL byte; another HTTP implementation may do otherwise,
 * and the rest of the bytes would then be a second request to one and part
 * of a body to the other. So these are refused (400, connection closed)
 * before anything else looks at the request: at the handler's first call,
 * the earliest point where MHD exposes the header list (it does not read
 * the body before we accept the request, and a response queued from this
 * call closes the connection, so nothing after the headers is ever parsed
 * as a next request). A NUL byte is not visible in MHD's header list (it
 * stores C strings): in TLS mode the pump flags any NUL in the client's
 * plaintext before MHD gets the byte (tls_conn_request()); in plaintext
 * mode (testing only) MHD reads the socket itself and this check is
 * absent. */
struct framing_scan {
	unsigned n_cl, n_te;
	bool cl_differ, cl_bad, te_bad;
	const char *cl;
	size_t cl_len;
};

static enum MHD_Result scan_framing(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
				    const char *value, size_t value_size)
{
	struct framing_scan *f = cls;
	if (!value)
		value = "", value_size = 0;
	if (key_size == strlen(MHD_HTTP_HEADER_CONTENT_LENGTH) &&
	    strncasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH, key_size) == 0) {
		if (f->n_cl++ && (value_size != f->cl_len || memcmp(value, f->cl, value_size) != 0))
			f->cl_differ = true;
		f->cl = value;
		f->cl_len = value_size;
		if (value_size == 0)
			f->cl_bad = true;
		for (size_t i = 0; i < value_size; i++)
			if (value[i] < '0' || value[i] > '9')
				f->cl_bad = true; /* lists ("2, 2"), signs, spaces */
	} else if (key_size == strlen(MHD_HTTP_HEADER_TRANSFER_ENCODING) &&
		   strncasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING, key_size) == 0) {
		f->n_te++;
		if (value_size != strlen("chunked") || strncasecmp(value, "chunked", value_size) != 0)
			f->te_bad = true;
	}
	return MHD_YES;
}

static bool framing_ok(struct shim *s, struct MHD_Connection *c, bool headers)
{
	if (s->tls) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci || tls_conn_request(s, ci->connect_fd))
			return false;
	}
	if (!headers)
		return true;
	struct framing_scan f = { 0 };
	MHD_get_connection_values_n(c, MHD_HEADER_KIND, scan_framing, &f);
	return !(f.cl_differ || f.cl_bad || f.te_bad || f.n_te > 1 || (f.n_cl && f.n_te));
}

/* ---- forwarding -------------------------------------------------------- */

/* Where the client's hang-up shows while a handler waits for the agent:
 * in TLS mode its TCP socket, after what MHD wrote so far was sent on
 * (tls_wait_fd: -2, the client is gone or does not read); else the
 * connection's own socket (-1: none to watch). */
static int client_watch_fd(struct MHD_Connection *c)
{
	int fd = tls_wait_fd();
	if (fd != -1)
		return fd;
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

static bool is_transport_malformed(int e)
{
	return e == -EPROTO || e == -EPROTONOSUPPORT || e == -EMSGSIZE || e == -EILSEQ;
}

/* An /exec answer (or a stream's exit event) in the metrics. */
static void count_exec(const struct upstream_reply *ar)
{
	pthread_mutex_lock(&metrics.lock);
	metrics.exec_total++;
	if (!ar->exit_zero)
		metrics.exec_errors++;
	pthread_mutex_unlock(&metrics.lock);
}

static enum MHD_Result forward_stream(struct shim *s, struct MHD_Connection *c, struct req *r, const char *frame,
				      size_t n, unsigned exec_timeout);
static bool wants_stream(const char *args, size_t len, unsigned *timeout_s);

static enum MHD_Result forward(struct shim *s, struct MHD_Connection *c, struct req *r, const char *args,
			       size_t args_len)
{
	size_t n = 0;
	_cleanup_free_ char *frame = NULL;
	int fe = shim_build_frame(r->route->op, args, args_len, &frame, &n);
	if (fe == -EMSGSIZE)
		return respond_static(s, c, r, MHD_HTTP_CONTENT_TOO_LARGE, body_too_large);
	if (fe < 0)
		return respond_static(s, c, r, MHD_HTTP_INTERNAL_SERVER_ERROR, body_internal);

	unsigned exec_timeout = 0;
	if (r->route->kind == R_EXEC && wants_stream(args, args_len, &exec_timeout))
		return forward_stream(s, c, r, frame, n, exec_timeout);
	_cleanup_free_ char *resp = NULL;
	size_t rlen = 0;
	int watch = client_watch_fd(c);
	int e = watch == -2 ? -ECONNABORTED : upstream_call_watch(&s->upstream, frame, n, 0, watch, &resp, &rlen);
	if (e == -ECONNABORTED) {
		log_info("client gone", LS("route", r->route->path));
		return MHD_NO; /* nobody to answer; the agent stopped the work */
	}
	if (e < 0) {
		if (is_transport_malformed(e)) {
			log_warn("malformed agent response", LS("route", r->route->path),
				 LS("error", bk_proto_strerror(e)));
			return respond_static(s, c, r, MHD_HTTP_BAD_GATEWAY, body_bad_reply);
		}
		log_warn("agent unavailable", LS("route", r->route->path), LS("error", strerror(-e)));
		return respond_static(s, c, r, MHD_HTTP_SERVICE_UNAVAILABLE, body_unavailable);
	}
	struct upstream_reply ar;
	e = upstream_parse_reply(resp, rlen, &ar);
	if (e == -ENOMEM)
		return respond_static(s, c, r, MHD_HTTP_INTERNAL_SERVER_ERROR, body_internal);
	if (e < 0) {
		log_warn("malformed agent response", LS("route", r->route->path), LS("error", "bad reply shape"));
		return respond_static(s, c, r, MHD_HTTP_BAD_GATEWAY, body_bad_reply);
	}
	if (r->route->kind == R_CONFIGURE && ar.status == 200) {
		secrets_configured(args, args_len);      /* the new session's secret_names */
		upstream_health_invalidate(&s->upstream); /* /health: the new session id */
	}
	if (r->route->kind == R_EXEC && ar.status == 200)
		count_exec(&ar);
	return respond(s, c, r, ar.status, ar.content_type, ar.body, ar.len, true);
}

/* ---- /exec with "stream": true -------------------------------------------
 *
 * The agent answers with frames marked "more" while the command runs and a
 * last one without it (the exit event). The first frame decides: not a
 * 200 with "more" (a refusal, a 422) is relayed as an ordinary answer;
 * else the answer is 200, chunked (MHD_SIZE_UNKNOWN on HTTP/1.1), one
 * JSON line per frame's body, read from the agent only as fast as the
 * client takes them (the agent bounds that wait by the exec's deadline).
 * A client that hangs up closes the agent connection: the exec is killed. */

struct stream {
	struct shim *s;
	struct MHD_Connection *c;
	int up;      /* the agent connection */
	char *line;  /* the line being sent */
	size_t len, off;
	bool done;   /* the last line is in line */
};

static void stream_set_line(struct stream *st, char *body, size_t len)
{
	free(st->line);
	st->line = body;
	st->len = len;
	st->off = 0;
	if (len && body[len - 1] == '\0')
		st->len--;
}


/* A frame's body as one line (the body text plus "\n"); a last frame that
 * is not a 200 (the exec failed after it started) becomes
 * {"type":"error","status":N,...its body}. NULL on a malformed frame. */
static char *stream_line(const char *resp, size_t rlen, bool *more, size_t *len)
{
	struct upstream_reply ar;
	if (upstream_parse_reply(resp, rlen, &ar) < 0)
		return NULL;
	*more = ar.more;
	if (!ar.more && ar.status != 200) {
		cJSON *b = cJSON_ParseWithLength(ar.body, ar.len);
		free(ar.body);
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "type", "error");
		cJSON_AddNumberToObject(e, "status", ar.status);
		for (cJSON *it = b ? b->child : NULL; it; it = it->next)
			if (!streq(it->string, "type") && !streq(it->string, "status"))
				cJSON_AddItemToObject(e, it->string, cJSON_Duplicate(it, true));
		cJSON_Delete(b);
		ar.body = cJSON_PrintUnformatted(e);
		cJSON_Delete(e);
		if (!ar.body)
			return NULL;
		ar.len = strlen(ar.body);
	} else if (!ar.more) {
		count_exec(&ar);
	}
	char *l = realloc(ar.body, ar.len + 2);
	if (!l) {
		free(ar.body);
		return NULL;
	}
	l[ar.len] = '\n';
	l[ar.len + 1] = '\0';
	*len = ar.len + 1;
	return l;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct stream *st = cls;
	while (st->off == st->len) {
		if (st->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		_cleanup_free_ char *resp = NULL;
		size_t rlen = 0;
		/* (what MHD wrote so far goes out before the wait) */
		int client = client_watch_fd(st->c);
		int e = client == -2 ? -ECONNABORTED : upstream_stream_next(st->up, client, &resp, &rlen);
		if (e == -ECONNABORTED) {
			log_info("client gone", LS("route", "/exec"), LS("stream", "yes"));
			return MHD_CONTENT_READER_END_WITH_ERROR; /* the agent kills the exec */
		}
		bool more = false;
		size_t l = 0;
		char *line = e < 0 ? NULL : stream_line(resp, rlen, &more, &l);
		if (!line) {
			log_warn("stream broken", LS("route", "/exec"),
				 LS("error", e < 0 ? bk_proto_strerror(e) : "malformed frame"));
			return MHD_CONTENT_READER_END_WITH_ERROR; /* the client sees no exit event */
		}
		stream_set_line(st, line, l);
		if (!more) {
			st->done = true;
			/* the stream's end: slow clients are bounded again */
			MHD_set_connection_option(st->c, MHD_CONNECTION_OPTION_TIMEOUT, st->s->conn_timeout);
		}
	}
	size_t n = st->len - st->off < max ? st->len - st->off : max;
	memcpy(buf, st->line + st->off, n);
	st->off += n;
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct stream *st = cls;
	if (st->up >= 0)
		close(st->up); /* an exec still running is killed by the agent */
	free(st->line);
	free(st);
}

static enum MHD_Result forward_stream(struct shim *s, struct MHD_Connection *c, struct req *r, const char *frame,
				      size_t n, unsigned exec_timeout)
{
	_cleanup_free_ char *resp = NULL;
	size_t rlen = 0;
	int client = client_watch_fd(c);
	int up = -1;
	int e = client == -2 ? -ECONNABORTED : upstream_stream_open(&s->upstream, frame, n, client, &up, &resp, &rlen);
	if (e == -ECONNABORTED) {
		log_info("client gone", LS("route", r->route->path));
		return MHD_NO;
	}
	if (e < 0) {
		log_warn("agent unavailable", LS("route", r->route->path), LS("error", strerror(-e)));
		return respond_static(s, c, r,
				      is_transport_malformed(e) ? MHD_HTTP_BAD_GATEWAY : MHD_HTTP_SERVICE_UNAVAILABLE,
				      is_transport_malformed(e) ? body_bad_reply : body_unavailable);
	}
	struct upstream_reply ar;
	e = upstream_parse_reply(resp, rlen, &ar);
	if (e < 0) {
		close(up);
		log_warn("malformed agent response", LS("route", r->route->path), LS("error", "bad reply shape"));
		return respond_static(s, c, r, MHD_HTTP_BAD_GATEWAY, body_bad_reply);
	}
	if (!ar.more || ar.status != 200) {
		/* not a stream (refused, invalid): the ordinary answer */
		close(up);
		return respond(s, c, r, ar.status, ar.content_type, ar.body, ar.len, true);
	}
	free(ar.body);
	struct stream *st = calloc(1, sizeof(*st));
	if (!st) {
		close(up);
		return MHD_NO;
	}
	*st = (struct stream){ .s = s, .c = c, .up = up };
	bool more = true;
	size_t l = 0;
	char *line = stream_line(resp, rlen, &more, &l);
	if (!line) {
		stream_free(st);
		return MHD_NO;
	}
	stream_set_line(st, line, l);
	struct MHD_Response *mr = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, st,
								     stream_free);
	if (!mr) {
		stream_free(st);
		return MHD_NO;
	}
	/* a silent command is not cut off: until the last line the
	 * inactivity timeout covers the exec's own */
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, exec_timeout + s->conn_timeout);
	enum MHD_Result ok = MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
	if (ok == MHD_YES)
		ok = MHD_add_response_header(mr, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (ok == MHD_YES)
		ok = MHD_add_response_header(mr, "X-Content-Type-Options", "nosniff");
	if (ok == MHD_YES && atomic_load(&s->draining))
		ok = MHD_add_response_header(mr, MHD_HTTP_HEADER_CONNECTION, "close");
	if (ok == MHD_YES)
		ok = MHD_queue_response(c, MHD_HTTP_OK, mr);
	MHD_destroy_response(mr);
	if (ok == MHD_YES)
		r->status = MHD_HTTP_OK;
	return ok;
}

/* "stream": true, and the inactivity timeout for the stream: the exec's
 * own timeout (the agent's largest when unsaid) plus the usual one, so a
 * silent command is not cut off and a client that stops reading is still
 * let go. */
static bool wants_stream(const char *args, size_t len, unsigned *timeout_s)
{
	cJSON *j = cJSON_ParseWithLength(args, len);
	bool on = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "stream"));
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "timeout");
	*timeout_s = cJSON_IsNumber(t) && t->valuedouble >= 1 && t->valuedouble <= 86400 ? (unsigned)t->valuedouble
											 : SHIM_STREAM_TIMEOUT_MAX;
	cJSON_Delete(j);
	return on;
}

/* ---- header deadline -----------------------------------------------------
 *
 * MHD_OPTION_CONNECTION_TIMEOUT is an inactivity timeout: a client that
 * trickles one header byte every few seconds never trips it and holds a
 * connection (and, at max_connections such clients, the whole shim) for as
 * long as it likes, without ever authenticating. So every connection also
 * gets a deadline: the headers of its first request must be complete within
 * header_timeout of accept (in TLS mode the handshake spends from the same
 * budget, tls.c), those of a later request within conn_timeout of the
 * previous request's end (that wait includes an idle keep-alive).
 * The deadline is cleared when MHD hands us the headers (first handler
 * call), so a long /exec or a body upload is not affected. A watchdog
 * thread shuts down (shutdown(2), MHD then sees EOF and cleans up) the
 * sockets whose deadline passed. MHD calls NOTIFY_CLOSED before it closes
 * the socket and we unlink the entry there under conns_lock, so the
 * watchdog never touches a closed or reused descriptor. */
struct conn_state {
	int fd;
	uint64_t deadline; /* ns; 0 = a request is being handled */
	struct conn_state *prev, *next;
};

/* Under conns_lock: a connection's deadline is now `deadline`. The
 * watchdog is woken only when it would otherwise sleep past it; a later
 * deadline (a request's end, nearly always) it finds when it next wakes. */
static void wake_watchdog(struct shim *s, uint64_t deadline)
{
	if (deadline && (s->watchdog_wake == 0 || deadline < s->watchdog_wake))
		pthread_cond_signal(&s->conns_cond);
}

static void notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			      enum MHD_ConnectionNotificationCode toe)
{
	struct shim *s = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		struct conn_state *cs = ci ? calloc(1, sizeof(*cs)) : NULL;
		if (!cs)
			return; /* no deadline; MHD's inactivity timeout still applies */
		cs->fd = ci->connect_fd;
		uint64_t start = s->tls ? tls_conn_accepted(s, cs->fd) : 0;
		cs->deadline = (start ? start : now_ns()) + (uint64_t)s->header_timeout * 1000000000ull;
		pthread_mutex_lock(&s->conns_lock);
		cs->next = s->conns;
		if (s->conns)
			s->conns->prev = cs;
		s->conns = cs;
		wake_watchdog(s, cs->deadline);
		pthread_mutex_unlock(&s->conns_lock);
		*socket_context = cs;
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
		struct conn_state *cs = *socket_context;
		pthread_mutex_lock(&s->conns_lock);
		if (cs->prev)
			cs->prev->next = cs->next;
		else
			s->conns = cs->next;
		if (cs->next)
			cs->next->prev = cs->prev;
		pthread_mutex_unlock(&s->conns_lock);
		free(cs);
		*socket_context = NULL;
	}
}

static void set_deadline(struct shim *s, struct MHD_Connection *c, bool in_request)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn_state *cs = ci ? ci->socket_context : NULL;
	if (!cs)
		return;
	pthread_mutex_lock(&s->conns_lock);
	cs->deadline = in_request ? 0 : now_ns() + (uint64_t)s->conn_timeout * 1000000000ull;
	wake_watchdog(s, cs->deadline);
	pthread_mutex_unlock(&s->conns_lock);
}

static void *conn_watchdog(void *arg)
{
	struct shim *s = arg;
	static struct ratelimit rl = RATELIMIT_INIT(1);
	pthread_mutex_lock(&s->conns_lock);
	while (!s->watchdog_stop) {
		uint64_t now = now_ns(), next = 0;
		unsigned n = 0;
		for (struct conn_state *cs = s->conns; cs; cs = cs->next) {
			if (cs->deadline && now >= cs->deadline) {
				shutdown(cs->fd, SHUT_RDWR);
				cs->deadline = 0;
				n++;
			} else if (cs->deadline && (next == 0 || cs->deadline < next)) {
				next = cs->deadline;
			}
		}
		unsigned dropped;
		if (n > 0 && ratelimit_ok(&rl, &dropped))
			log_info("closed connections that did not send their request headers in time", LI("count", n),
				 LI("timeout_s", s->conn_timeout), LI("suppressed", dropped));
		/* Sleep until the earliest deadline; no wake-ups while idle. */
		s->watchdog_wake = next;
		if (next == 0) {
			pthread_cond_wait(&s->conns_cond, &s->conns_lock);
		} else {
			struct timespec ts = { .tv_sec = (time_t)(next / 1000000000ull),
					       .tv_nsec = (long)(next % 1000000000ull) };
			pthread_cond_timedwait(&s->conns_cond, &s->conns_lock, &ts);
		}
	}
	pthread_mutex_unlock(&s->conns_lock);
	return NULL;
}

/* ---- the access handler ------------------------------------------------ */

/* ---- answered by the shim ---------------------------------------------- */

/* The reference's /health, plus "agent". idle_seconds: since the last
 * request other than /health (any route, authenticated or not, as the
 * reference's middleware counts it); session_id: the agent's, for this pod. */
static enum MHD_Result respond_health(struct shim *s, struct MHD_Connection *c, struct req *r)
{
	char sid[264];
	bool has_sid = false;
	bool ok = upstream_health(&s->upstream, sid, sizeof(sid), &has_sid);
	double idle = (double)(now_ns() - atomic_load(&s->last_activity)) / 1e9;
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "status", "healthy");
	cJSON_AddItemToObject(b, "session_id", has_sid ? cJSON_CreateString(sid) : cJSON_CreateNull());
	cJSON_AddNullToObject(b, "skills_rev");
	cJSON_AddStringToObject(b, "runtime_mode", s->runtime_mode);
	cJSON_AddStringToObject(b, "storage_backend", "none");
	cJSON_AddNumberToObject(b, "idle_seconds", (double)(int64_t)(idle * 10.0 + 0.5) / 10.0);
	cJSON_AddStringToObject(b, "agent", ok ? "connected" : "unavailable");
	char *txt = cJSON_PrintUnformatted(b);
	cJSON_Delete(b);
	if (!txt)
		return respond_static(s, c, r, MHD_HTTP_INTERNAL_SERVER_ERROR, body_internal);
	return respond(s, c, r, MHD_HTTP_OK, "application/json", txt, strlen(txt), true);
}

/* The reference's boxkite_sidecar_* series, then the agent's own. */
static enum MHD_Result respond_metrics(struct shim *s, struct MHD_Connection *c, struct req *r)
{
	_cleanup_free_ char *mine = metrics_text();
	if (!mine)
		return respond_static(s, c, r, MHD_HTTP_INTERNAL_SERVER_ERROR, body_internal);
	_cleanup_free_ char *frame = NULL, *resp = NULL;
	size_t n = 0, rlen = 0;
	struct upstream_reply ar = { 0 };
	const char *theirs = "";
	if (shim_build_frame("metrics", "{}", 2, &frame, &n) == 0 &&
	    upstream_call(&s->upstream, frame, n, SHIM_HEALTH_PING_TIMEOUT_MS, &resp, &rlen) == 0 &&
	    upstream_parse_reply(resp, rlen, &ar) == 0 && ar.status == 200 && startswith(ar.content_type, "text/plain"))
		theirs = ar.body;
	char *txt = NULL;
	int e = asprintf(&txt, "%s%s", mine, theirs);
	free(ar.body);
	if (e < 0)
		return respond_static(s, c, r, MHD_HTTP_INTERNAL_SERVER_ERROR, body_internal);
	return respond(s, c, r, MHD_HTTP_OK, "text/plain; version=0.0.4", txt, strlen(txt), true);
}

/* /tool-call to the backend: always 200 (backend.c). */
static enum MHD_Result tool_call_backend(struct shim *s, struct MHD_Connection *c, struct req *r)
{
	cJSON *j = cJSON_ParseWithLength(r->body, r->len);
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "tool_name");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(j, "arguments");
	if (!cJSON_IsString(name) || (args && !cJSON_IsObject(args))) {
		cJSON_Delete(j);
		return respond_static(s, c, r, MHD_HTTP_UNPROCESSABLE_CONTENT, body_bad_tool_call);
	}
	/* the pod's own session, never the request's session_id */
	char sid[264];
	bool has_sid = false;
	upstream_health_invalidate(&s->upstream);
	upstream_health(&s->upstream, sid, sizeof(sid), &has_sid);
	log_info("tool_call", LS("tool", name->valuestring), LS("route", "/tool-call"));
	char *out = backend_tool_call(name->valuestring, args, has_sid ? sid : NULL);
	cJSON_Delete(j);
	if (!out)
		return respond_static(s, c, r, MHD_HTTP_INTERNAL_SERVER_ERROR, body_internal);
	return respond(s, c, r, MHD_HTTP_OK, "application/json", out, strlen(out), true);
}

static bool expects_continue(struct MHD_Connection *c)
{
	const char *e = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
	return e && strcasecmp(e, "100-continue") == 0;
}

/* ---- concurrency slots ------------------------------------------------------
 * max_concurrent requests go to the agent at once; the next ones wait in
 * arrival order (a slot freed is handed to the oldest waiter, never taken
 * by a newcomer first), at most max_queue of them and each at most
 * queue_timeout_ms; beyond either, 429. */
struct slot_waiter {
	struct slot_waiter *next;
	pthread_cond_t cond;
	bool granted;
};

static int slot_acquire(struct shim *s)
{
	pthread_mutex_lock(&s->slot_lock);
	if (!s->slot_head && atomic_load(&s->inflight) < s->max_concurrent) {
		atomic_fetch_add(&s->inflight, 1);
		pthread_mutex_unlock(&s->slot_lock);
		return 0;
	}
	if (s->queued >= s->max_queue) {
		pthread_mutex_unlock(&s->slot_lock);
		return -EBUSY;
	}
	struct slot_waiter w = { 0 };
	mono_cond_init(&w.cond);
	if (s->slot_tail)
		s->slot_tail->next = &w;
	else
		s->slot_head = &w;
	s->slot_tail = &w;
	s->queued++;
	struct timespec until = mono_after_ms(s->queue_timeout_ms);
	while (!w.granted)
		if (pthread_cond_timedwait(&w.cond, &s->slot_lock, &until) == ETIMEDOUT)
			break;
	if (!w.granted) {
		/* still queued: take ourselves out */
		struct slot_waiter **pp = &s->slot_head, *prev = NULL;
		while (*pp && *pp != &w) {
			prev = *pp;
			pp = &(*pp)->next;
		}
		if (*pp)
			*pp = w.next;
		if (s->slot_tail == &w)
			s->slot_tail = prev;
		s->queued--;
	}
	pthread_mutex_unlock(&s->slot_lock);
	pthread_cond_destroy(&w.cond);
	return w.granted ? 0 : -ETIMEDOUT;
}

/* The slot goes to the oldest waiter (inflight unchanged), or back. */
static void slot_release(struct shim *s)
{
	pthread_mutex_lock(&s->slot_lock);
	struct slot_waiter *w = s->slot_head;
	if (w) {
		s->slot_head = w->next;
		if (!s->slot_head)
			s->slot_tail = NULL;
		s->queued--;
		w->granted = true;
		pthread_cond_signal(&w->cond);
	} else {
		atomic_fetch_sub(&s->inflight, 1);
	}
	pthread_mutex_unlock(&s->slot_lock);
}

static enum MHD_Result first_call(struct shim *s, struct MHD_Connection *c, struct req *r, const char *url,
				  const char *method)
{
	if (!framing_ok(s, c, true)) {
		static struct ratelimit rl = RATELIMIT_INIT(5);
		unsigned dropped;
		if (ratelimit_ok(&rl, &dropped))
			log_info("refused an ambiguous request framing", LS("peer", r->peer), LI("suppressed", dropped));
		return respond_static(s, c, r, MHD_HTTP_BAD_REQUEST, body_bad_framing);
	}
	route_label(url, r->label, sizeof(r->label));
	r->route = find_route(url);
	/* Authentication comes before routing, as in the reference (an
	 * unknown route without a token is 401, not 404); /health alone is
	 * exempt. The reference's last activity is every request but /health. */
	bool health = r->route && r->route->kind == R_HEALTH;
	if (!health) {
		atomic_store(&s->last_activity, now_ns());
		if (!s->token_set)
			return respond_static(s, c, r, MHD_HTTP_SERVICE_UNAVAILABLE, body_no_token);
		enum auth au = auth_check(s, c);
		if (au != AUTH_OK)
			return respond_static(s, c, r, MHD_HTTP_UNAUTHORIZED,
					      au == AUTH_MISSING ? body_auth_missing : body_auth_invalid);
	}
	if (!r->route)
		return respond_static(s, c, r, MHD_HTTP_NOT_FOUND, body_not_found);
	if (r->route->kind == R_NOT_IMPL)
		return respond_static(s, c, r, MHD_HTTP_NOT_IMPLEMENTED, body_not_impl);
	if (r->route->kind == R_PROCESS) {
		enum shim_proc_route pr = shim_process_route(url, r->proc_id, sizeof(r->proc_id));
		if (pr == PROC_NONE) {
			r->route = NULL;
			return respond_static(s, c, r, MHD_HTTP_NOT_FOUND, body_not_found);
		}
		r->route = &process_routes[pr];
	}
	if (!streq(method, r->route->method))
		return respond_static(s, c, r, MHD_HTTP_METHOD_NOT_ALLOWED, body_bad_method);
	if (health)
		return MHD_YES; /* answered on the final call */

	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	uint64_t clen;
	if (cl && parse_u64(cl, &clen) == 0 && clen > s->max_body) {
		/* Over the limit. A client that waits for 100-continue gets the
		 * 413 now; one that sends its body anyway (most do) gets it after
		 * the body, read and discarded, so the answer is not lost in a
		 * connection reset. Far over (more than another max_body): now. */
		if (expects_continue(c) || clen - s->max_body > s->max_body)
			return respond_static(s, c, r, MHD_HTTP_CONTENT_TOO_LARGE, body_too_large);
		r->too_large = true;
		r->discarded = 0;
		return MHD_YES;
	}

	if (slot_acquire(s) < 0) {
		/* 429 after the body (read and discarded), so that the
		 * connection stays open for the client's next request */
		r->busy = true;
		r->discarded = 0;
		return MHD_YES;
	}
	r->slot = true;
	/* Accepted: MHD sends 100-continue if asked and streams the body. Even
	 * GET routes are answered on the final call: libmicrohttpd closes the
	 * connection after any response queued from the first call (fine for a
	 * rejection, whose body we do not want to read; wasteful otherwise). */
	return MHD_YES;
}

/* Returns false when the client keeps sending far past the limit: then the
 * connection is dropped instead of reading a body we will never use. */
static bool consume(struct shim *s, struct req *r, const char *data, size_t n)
{
	if (r->busy) {
		r->discarded += n;
		return r->discarded <= s->max_body;
	}
	if (r->too_large) {
		/* a Content-Length body over the limit is discarded whole (at
		 * most 2 x max_body, first_call); a chunked one past the limit */
		r->discarded += n;
		return r->discarded <= 2 * s->max_body;
	}
	if (n > s->max_body - r->len) {
		/* Over the limit: answer 413 at the end of the body, reading and
		 * discarding up to another max_body bytes to get there. */
		r->too_large = true;
		r->discarded = 0;
		free(r->body);
		r->body = NULL;
		r->len = r->cap = 0;
		return true;
	}
	if (r->len + n > r->cap) {
		size_t cap = r->cap ? r->cap : 4096;
		while (cap < r->len + n)
			cap *= 2;
		if (cap > s->max_body)
			cap = s->max_body;
		char *nb = realloc(r->body, cap);
		if (!nb)
			return false;
		r->body = nb;
		r->cap = cap;
	}
	memcpy(r->body + r->len, data, n);
	r->len += n;
	return true;
}

static void client_peer(struct shim *s, struct MHD_Connection *c, char *buf, size_t size)
{
	if (s->tls) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (ci)
			tls_peer_lookup(s, ci->connect_fd, buf, size);
		else
			snprintf(buf, size, "unknown");
		return;
	}
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	sockaddr_str(ci ? ci->client_addr : NULL, sizeof(struct sockaddr_storage), buf, size);
}

/* ---- /pty: the WebSocket handshake (RFC 6455 4.2); the relay: wspty.c ---- */

/* Whether header h holds token tok in its comma-separated list (any case). */
static bool header_has(struct MHD_Connection *c, const char *h, const char *tok)
{
	const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, h);
	size_t tl = strlen(tok);
	while (v && *v) {
		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		size_t l = strcspn(v, ",");
		size_t e = l;
		while (e > 0 && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e == tl && strncasecmp(v, tok, tl) == 0)
			return true;
		v += l;
	}
	return false;
}

static unsigned query_size(struct MHD_Connection *c, const char *k, unsigned def)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, k);
	uint64_t n;
	return v && parse_u64(v, &n) == 0 && n >= 1 && n <= 4096 ? (unsigned)n : def;
}

static enum MHD_Result respond_pty(struct shim *s, struct MHD_Connection *c, struct req *r)
{
	const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-WebSocket-Key");
	const char *ver = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-WebSocket-Version");
	char accept[32];
	if (!header_has(c, MHD_HTTP_HEADER_UPGRADE, "websocket") || !header_has(c, MHD_HTTP_HEADER_CONNECTION, "upgrade") ||
	    !ver || !streq(ver, "13") || !ws_accept_key(key, accept, sizeof(accept)))
		return respond_static(s, c, r, MHD_HTTP_BAD_REQUEST, body_bad_ws);
	void *w = wspty_prepare(s, query_size(c, "rows", 24), query_size(c, "cols", 80));
	struct MHD_Response *resp = w ? MHD_create_response_for_upgrade(wspty_upgraded, w) : NULL;
	if (!resp) {
		wspty_discard(w);
		return respond_static(s, c, r, MHD_HTTP_INTERNAL_SERVER_ERROR, body_internal);
	}
	enum MHD_Result ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
	if (ok == MHD_YES)
		ok = MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
	r->upgraded = true;
	r->status = MHD_HTTP_SWITCHING_PROTOCOLS;
	if (ok == MHD_YES)
		ok = MHD_queue_response(c, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	MHD_destroy_response(resp);
	if (ok != MHD_YES) {
		r->upgraded = false;
		wspty_discard(w);
		return MHD_NO;
	}
	/* a terminal lives for hours: it holds no concurrency slot */
	if (r->slot) {
		slot_release(s);
		r->slot = false;
	}
	log_info("pty upgraded", LS("peer", r->peer));
	return MHD_YES;
}

/* A /process route: the body (POST; a body sent otherwise is ignored),
 * the path's id and the query's since_offset, to the agent. */
static enum MHD_Result forward_process(struct shim *s, struct MHD_Connection *c, struct req *r)
{
	if (r->route->body && !body_is_json_object(r->body, r->len))
		return respond_static(s, c, r, MHD_HTTP_UNPROCESSABLE_CONTENT,
				      body_is_json(r->body, r->len) ? body_not_object : body_bad_json);
	const char *since = r->route == &process_routes[PROC_OUTPUT]
				    ? MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "since_offset")
				    : NULL;
	_cleanup_free_ char *args = NULL;
	size_t alen = 0;
	int e = shim_process_args(r->route->body ? r->body : NULL, r->len, r->proc_id, since, &args, &alen);
	free(r->body);
	r->body = NULL;
	if (e < 0)
		return respond_static(s, c, r, MHD_HTTP_INTERNAL_SERVER_ERROR, body_internal);
	return forward(s, c, r, args, alen);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload_data, size_t *upload_data_size,
			      void **con_cls)
{
	struct shim *s = cls;
	struct req *r = *con_cls;
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		r->start = now_ns();
		r->method = method_label(method);
		client_peer(s, c, r->peer, sizeof(r->peer));
		set_deadline(s, c, true);
		*con_cls = r;
		atomic_fetch_add(&s->active, 1);
		return first_call(s, c, r, url, method);
	}
	if (*upload_data_size > 0) {
		bool ok = consume(s, r, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return ok ? MHD_YES : MHD_NO;
	}
	if (r->busy)
		return respond_static(s, c, r, MHD_HTTP_TOO_MANY_REQUESTS, body_busy);
	if (r->too_large)
		return respond_static(s, c, r, MHD_HTTP_CONTENT_TOO_LARGE, body_too_large);
	if (!framing_ok(s, c, false)) /* a NUL in the body, seen after the headers */
		return respond_static(s, c, r, MHD_HTTP_BAD_REQUEST, body_bad_framing);
	switch (r->route->kind) {
	case R_HEALTH:
		return respond_health(s, c, r);
	case R_FLUSH:
		return respond_static(s, c, r, MHD_HTTP_OK, body_flush);
	case R_FLUSH_CONFIRMED:
		return respond_static(s, c, r, MHD_HTTP_OK, body_flush_confirmed);
	case R_METRICS:
		return respond_metrics(s, c, r);
	case R_PTY:
		return respond_pty(s, c, r);
	default:
		break;
	}
	if (r->route->kind == R_PROCESS)
		return forward_process(s, c, r);
	if (!r->route->body)
		return forward(s, c, r, "{}", 2); /* a body sent with a GET is ignored */
	if (!body_is_json_object(r->body, r->len))
		return respond_static(s, c, r, MHD_HTTP_UNPROCESSABLE_CONTENT,
				      body_is_json(r->body, r->len) ? body_not_object : body_bad_json);
	enum MHD_Result ret;
	if (r->route->kind == R_EXEC) {
		_cleanup_free_ char *args = NULL;
		size_t alen = 0;
		const char *bad = NULL;
		int e = secrets_rewrite_exec(s->secrets_dir, r->body, r->len, &args, &alen, &bad);
		if (e == -EINVAL)
			ret = respond_static(s, c, r, MHD_HTTP_UNPROCESSABLE_CONTENT, body_bad_secret_env);
		else if (e < 0)
			ret = respond_static(s, c, r, MHD_HTTP_INTERNAL_SERVER_ERROR, body_internal);
		else
			ret = forward(s, c, r, args, alen);
		if (args)
			OPENSSL_cleanse(args, alen); /* resolved secret values */
	} else if (r->route->kind == R_TOOL_CALL && !s->tool_call_local) {
		ret = tool_call_backend(s, c, r);
	} else {
		ret = forward(s, c, r, r->body, r->len);
	}
	free(r->body);
	r->body = NULL;
	return ret;
}

static const char *termination_name(enum MHD_RequestTerminationCode t)
{
	switch (t) {
	case MHD_REQUEST_TERMINATED_COMPLETED_OK:
		return "ok";
	case MHD_REQUEST_TERMINATED_WITH_ERROR:
		return "error";
	case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
		return "timeout";
	case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN:
		return "shutdown";
	case MHD_REQUEST_TERMINATED_READ_ERROR:
		return "read_error";
	case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
		return "client_abort";
	default:
		return "other";
	}
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct shim *s = cls;
	struct req *r = *con_cls;
	if (!r)
		return;
	*con_cls = NULL;
	if (r->slot)
		slot_release(s);
	metrics_count(r->label, r->status);
	/* Only the fixed route name is logged: the URL is client-controlled. */
	log_info("request", LS("peer", r->peer), LS("method", r->method),
		 LS("route", r->route ? r->route->path : "unknown"),
		 LI("status", r->status), LI("duration_ms", (now_ns() - r->start) / 1000000ull),
		 LS("end", termination_name(toe)));
	bool upgraded = r->upgraded;
	free(r->body);
	free(r);
	if (!upgraded)
		set_deadline(s, c, false); /* the next request's headers are due */
	atomic_fetch_sub(&s->active, 1);
}

/* The daemon's options, for the shim's (plaintext mode: it listens) or a
 * TLS connection's own (no listening socket). */
static struct MHD_Daemon *daemon_start(struct shim *s, unsigned flags)
{
	struct MHD_OptionItem opts[] = {
		{ MHD_OPTION_CONNECTION_LIMIT, s->max_connections, NULL },
		/* plaintext mode: MHD sees the peers (TLS mode: tls.c counts them; 0 = off) */
		{ MHD_OPTION_PER_IP_CONNECTION_LIMIT, s->tls ? 0 : s->max_per_peer, NULL },
		{ MHD_OPTION_CONNECTION_TIMEOUT, s->conn_timeout, NULL },
		{ MHD_OPTION_CONNECTION_MEMORY_LIMIT, SHIM_CONN_MEMORY_LIMIT, NULL },
		{ MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL },
		{ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, s },
		{ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify_connection, s },
		{ s->tls ? MHD_OPTION_END : MHD_OPTION_THREAD_STACK_SIZE, SHIM_THREAD_STACK, NULL },
		{ s->tls ? MHD_OPTION_END : MHD_OPTION_LISTEN_SOCKET, s->listen_fd, NULL },
		{ MHD_OPTION_END, 0, NULL },
	};
	/* The logger must come first, or MHD reports option errors its own way. */
	return MHD_start_daemon(flags | MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE, 0, NULL, NULL, handle, s,
				MHD_OPTION_EXTERNAL_LOGGER, log_mhd, s, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
}

static struct MHD_Daemon *conn_daemon(struct shim *s)
{
	/* ITC: an upgraded connection's relay thread closing it wakes the
	 * connection's pump (its epoll fd) */
	return daemon_start(s, MHD_USE_NO_LISTEN_SOCKET | MHD_USE_EPOLL | MHD_USE_ITC);
}

int http_start(struct shim *s)
{
	metrics.start = now_ns();
	atomic_store(&s->last_activity, now_ns());
	pthread_mutex_init(&s->conns_lock, NULL);
	pthread_mutex_init(&s->slot_lock, NULL);
	mono_cond_init(&s->conns_cond);

	/* TLS mode: each connection has its own daemon (tls.c) */
	s->conn_daemon = conn_daemon;
	if (!s->tls) {
		s->mhd = daemon_start(s, MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
						 MHD_USE_POLL | MHD_USE_ITC);
		if (!s->mhd)
			return -EIO;
	}
	int e = pthread_create(&s->watchdog, NULL, conn_watchdog, s);
	if (e != 0)
		return -e;
	s->watchdog_started = true;
	return 0;
}

void http_quiesce(struct shim *s)
{
	if (s->tls || !s->mhd)
		return;
	MHD_socket fd = MHD_quiesce_daemon(s->mhd);
	if (fd != MHD_INVALID_SOCKET) {
		close(fd);
		s->listen_fd = -1;
	}
}

void http_stop(struct shim *s)
{
	if (s->watchdog_started) {
		pthread_mutex_lock(&s->conns_lock);
		s->watchdog_stop = true;
		pthread_cond_signal(&s->conns_cond);
		pthread_mutex_unlock(&s->conns_lock);
		pthread_join(s->watchdog, NULL);
		s->watchdog_started = false;
	}
	pthread_mutex_lock(&s->mhd_lock);
	s->mhd_stopping = true;
	pthread_mutex_unlock(&s->mhd_lock);
	uint64_t one = 1;
	if (s->conns_stop_efd >= 0 && write(s->conns_stop_efd, &one, sizeof(one)) < 0)
		log_error("cannot stop the connections", LS("error", strerror(errno)));
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	s->mhd = NULL;
}
