/* SPDX-License-Identifier: Apache-2.0 */
/* Connections to boxkite-agent.
 *
 * A small pool of connected SOCK_SEQPACKET sockets, one request at a time per
 * socket. Any transport error discards the socket; the next request simply
 * connects again, so an agent restart needs no shim restart. A pooled socket
 * can be stale (the agent restarted while it sat idle): that shows as an
 * error on send, before the agent can have seen a whole request, and only
 * then is the request retried once on a fresh connection. A failure after
 * the request was sent is never retried: the agent may have acted on it
 * (an exec is not idempotent).
 *
 * The shim adds nothing to a request: the agent identifies the caller from
 * the kernel (SO_PEERPIDFD / the peer's cgroup). */
#include "shim.h"
#include "lib/proto.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <poll.h>
#include <sys/time.h>

int upstream_init(struct upstream_pool *a, const char *path)
{
	memset(a, 0, sizeof(*a));
	a->path = strdup(path);
	if (!a->path)
		return -ENOMEM;
	pthread_mutex_init(&a->lock, NULL);
	pthread_mutex_init(&a->health_lock, NULL);
	return 0;
}

void upstream_done(struct upstream_pool *a)
{
	for (unsigned i = 0; i < a->n_idle; i++)
		close(a->idle[i]);
	a->n_idle = 0;
	free(a->path);
	a->path = NULL;
	pthread_mutex_destroy(&a->lock);
	pthread_mutex_destroy(&a->health_lock);
}

/* An idle connection must have nothing to read: readable means EOF (agent
 * gone) or a stray message, both reasons to drop it. */
static bool idle_fd_usable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r;
	do
		r = poll(&p, 1, 0);
	while (r < 0 && errno == EINTR);
	return r == 0;
}

static int pool_get(struct upstream_pool *a, bool *pooled)
{
	pthread_mutex_lock(&a->lock);
	while (a->n_idle > 0) {
		int fd = a->idle[--a->n_idle];
		if (idle_fd_usable(fd)) {
			pthread_mutex_unlock(&a->lock);
			*pooled = true;
			return fd;
		}
		close(fd);
	}
	pthread_mutex_unlock(&a->lock);
	*pooled = false;
	return bk_connect(a->path);
}

static void pool_put(struct upstream_pool *a, int fd)
{
	pthread_mutex_lock(&a->lock);
	if (a->n_idle < SHIM_AGENT_POOL_MAX) {
		a->idle[a->n_idle++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&a->lock);
	if (fd >= 0)
		close(fd);
}

static int set_timeouts(int fd, int timeout_ms)
{
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	return 0;
}

/* Wait until the agent's answer is there, or the HTTP client hung up
 * (watch_fd < 0: no client to watch). */
static int wait_answer(int fd, int watch_fd)
{
	if (watch_fd < 0)
		return 0;
	for (;;) {
		struct pollfd pf[2] = { { .fd = fd, .events = POLLIN }, { .fd = watch_fd, .events = POLLRDHUP } };
		int n = poll(pf, 2, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (pf[0].revents)
			return 0;
		if (pf[1].revents & (POLLRDHUP | POLLHUP | POLLERR))
			return -ECONNABORTED;
	}
}

static int call(struct upstream_pool *a, const char *req, size_t len, int timeout_ms, int watch_fd, char **resp,
		size_t *resplen, int *keep_fd);

int upstream_call(struct upstream_pool *a, const char *req, size_t len, int timeout_ms, char **resp, size_t *resplen)
{
	return call(a, req, len, timeout_ms, -1, resp, resplen, NULL);
}

/* As agent_call; when the HTTP client behind watch_fd hangs up while the
 * agent works, the agent connection is closed — the agent then stops what
 * it was doing for that request (an exec is killed, not left running for
 * nobody). */
int upstream_call_watch(struct upstream_pool *a, const char *req, size_t len, int timeout_ms, int watch_fd, char **resp,
		     size_t *resplen)
{
	return call(a, req, len, timeout_ms, watch_fd, resp, resplen, NULL);
}

int upstream_stream_open(struct upstream_pool *a, const char *req, size_t len, int watch_fd, int *fd, char **resp,
			 size_t *resplen)
{
	return call(a, req, len, 0, watch_fd, resp, resplen, fd);
}

int upstream_stream_next(int fd, int watch_fd, char **resp, size_t *resplen)
{
	int e = wait_answer(fd, watch_fd);
	if (e < 0)
		return e;
	e = bk_recv_msg(fd, BK_RESP_MAX, resp, resplen);
	return e == 1 ? -ECONNRESET : e;
}

/* keep_fd: the connection is not pooled but handed over (a stream's next
 * answers follow on it). */
static int call(struct upstream_pool *a, const char *req, size_t len, int timeout_ms, int watch_fd, char **resp,
		size_t *resplen, int *keep_fd)
{
	for (int attempt = 0;; attempt++) {
		bool pooled;
		_cleanup_close_ int fd = pool_get(a, &pooled);
		if (fd < 0)
			return fd;
		if (timeout_ms > 0) {
			int e = set_timeouts(fd, timeout_ms);
			if (e < 0)
				return e;
		}
		int e = bk_send_msg(fd, req, len);
		if (e < 0) {
			/* Stale pooled socket: the agent cannot have a whole request. */
			if (pooled && attempt == 0 && e != -EAGAIN)
				continue;
			return e;
		}
		e = wait_answer(fd, watch_fd);
		if (e < 0)
			return e; /* fd closes here: the agent sees the hang-up */
		e = bk_recv_msg(fd, BK_RESP_MAX, resp, resplen);
		if (e == 1)
			return -ECONNRESET; /* agent closed without answering */
		if (e < 0)
			return e;
		if (keep_fd) {
			*keep_fd = steal_fd(&fd);
			return 0;
		}
		if (timeout_ms > 0 && set_timeouts(fd, 0) < 0)
			return 0; /* answer is good; just do not pool this socket */
		pool_put(a, steal_fd(&fd));
		return 0;
	}
}

static void cjson_deletep(cJSON **j)
{
	if (*j)
		cJSON_Delete(*j);
}

/* Content types the shim relays; anything else from the agent is malformed. */
static const char *known_content_type(const char *ct)
{
	static const char *const known[] = {
		"application/json",
		"text/plain; version=0.0.4",
		"text/plain; charset=utf-8",
		"text/plain",
	};
	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (streq(ct, known[i]))
			return known[i];
	return NULL;
}

/* The text of the reply's "body" as the agent wrote it, when the reply has
 * the agent's shape: its members among status, more and content_type (each
 * once; none of their keys or values is the string "body"), then "body"
 * last, and no escape or control byte before it. The first "body" token
 * in the text is then that key (in JSON text a quote inside a string is
 * escaped, so the six bytes "body" are a whole string token). The parse
 * before this one checked that the whole reply is JSON, so the text up to
 * the reply's own closing brace is the body's JSON. It saves printing the
 * parsed body again (a receipt is about 9 KB). NULL when the shape is
 * another: the caller prints. */
static const char *body_span(const char *resp, const char *end, const cJSON *root, const cJSON *body, size_t *n)
{
	unsigned seen = 0;
	for (const cJSON *it = root->child; it; it = it->next) {
		static const char *const keys[] = { "status", "more", "content_type" };
		unsigned k = 0;
		if (it == body)
			break;
		while (k < ARRAY_SIZE(keys) && !streq(it->string, keys[k]))
			k++;
		if (k == ARRAY_SIZE(keys) || (seen & (1u << k)))
			return NULL;
		seen |= 1u << k;
	}
	if (body->next || !end || end <= resp)
		return NULL;
	const char *b = memmem(resp, (size_t)(end - resp), "\"body\"", 6);
	if (!b)
		return NULL;
	for (const char *c = resp; c < b; c++)
		if (*c == '\\' || ((unsigned char)*c < 0x20 && *c != '\t' && *c != '\n' && *c != '\r'))
			return NULL; /* an escape or a NUL: a key can read "body" without those bytes */
	for (b += 6; b < end && isspace((unsigned char)*b); b++)
		;
	if (b == end || *b != ':')
		return NULL;
	for (b++; b < end && isspace((unsigned char)*b); b++)
		;
	const char *e = end - 1; /* the reply's own closing brace */
	while (e > b && isspace((unsigned char)*e))
		e--;
	if (*e != '}')
		return NULL;
	for (e--; e > b && isspace((unsigned char)*e); e--)
		;
	if (e <= b || *b != '{' || *e != '}' || memchr(b, '\0', (size_t)(e - b)))
		return NULL;
	*n = (size_t)(e - b) + 1;
	return b;
}

int upstream_parse_reply(const char *resp, size_t len, struct upstream_reply *out)
{
	memset(out, 0, sizeof(*out));
	const char *end = NULL;
	_cleanup_(cjson_deletep) cJSON *root = cJSON_ParseWithLengthOpts(resp, len, &end, 0);
	if (!cJSON_IsObject(root))
		return -EBADMSG;

	const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "status");
	if (!cJSON_IsNumber(st))
		return -EBADMSG;
	double d = st->valuedouble;
	/* 1xx cannot be a final answer; libmicrohttpd refuses them anyway. */
	if (!(d >= 200 && d <= 599) || d != (double)(unsigned)d)
		return -EBADMSG;

	const cJSON *body = cJSON_GetObjectItemCaseSensitive(root, "body");
	if (!cJSON_IsObject(body))
		return -EBADMSG;

	const cJSON *more = cJSON_GetObjectItemCaseSensitive(root, "more");
	if (more && !cJSON_IsBool(more))
		return -EBADMSG;
	out->more = cJSON_IsTrue(more);

	const char *ct = "application/json";
	const cJSON *ctj = cJSON_GetObjectItemCaseSensitive(root, "content_type");
	if (ctj) {
		if (!cJSON_IsString(ctj) || !(ct = known_content_type(ctj->valuestring)))
			return -EBADMSG;
	}

	size_t n = 0;
	const char *span = NULL;
	if (startswith(ct, "text/plain")) {
		const cJSON *text = cJSON_GetObjectItemCaseSensitive(body, "text");
		if (!cJSON_IsString(text))
			return -EBADMSG;
		out->body = strdup(text->valuestring);
	} else {
		span = body_span(resp, end, root, body, &n);
		out->body = span ? strndup(span, n) : cJSON_PrintUnformatted(body);
	}
	if (!out->body)
		return -ENOMEM;
	out->len = span ? n : strlen(out->body);
	const cJSON *ec = cJSON_GetObjectItemCaseSensitive(body, "exit_code");
	out->exit_zero = cJSON_IsNumber(ec) && ec->valuedouble == 0;
	out->status = (unsigned)d;
	out->content_type = ct;
	return 0;
}

void upstream_health_invalidate(struct upstream_pool *a)
{
	pthread_mutex_lock(&a->health_lock);
	a->health_at = 0;
	pthread_mutex_unlock(&a->health_lock);
}

bool upstream_health(struct upstream_pool *a, char *sid, size_t sidlen, bool *has_sid)
{
	static const char ping[] = "{\"op\":\"ping\",\"args\":{}}";
	pthread_mutex_lock(&a->health_lock);
	uint64_t now = now_ns();
	if (a->health_at == 0 || now - a->health_at >= SHIM_HEALTH_CACHE_NS) {
		_cleanup_free_ char *resp = NULL;
		size_t rlen = 0;
		bool ok = false;
		a->health_sid[0] = '\0';
		a->health_has_sid = false;
		int e = upstream_call(a, ping, sizeof(ping) - 1, SHIM_HEALTH_PING_TIMEOUT_MS, &resp, &rlen);
		if (e == 0) {
			struct upstream_reply r;
			if (upstream_parse_reply(resp, rlen, &r) == 0) {
				ok = r.status == 200;
				/* the pod's session, as the agent knows it (null: none) */
				cJSON *b = ok ? cJSON_ParseWithLength(r.body, r.len) : NULL;
				const cJSON *s = cJSON_GetObjectItemCaseSensitive(b, "session_id");
				if (cJSON_IsString(s) && strlen(s->valuestring) < sizeof(a->health_sid)) {
					snprintf(a->health_sid, sizeof(a->health_sid), "%s", s->valuestring);
					a->health_has_sid = true;
				}
				cJSON_Delete(b);
				free(r.body);
			}
		}
		a->health_at = now_ns();
		a->health_ok = ok;
	}
	bool ok = a->health_ok;
	if (sid)
		snprintf(sid, sidlen, "%s", a->health_sid);
	if (has_sid)
		*has_sid = a->health_has_sid;
	pthread_mutex_unlock(&a->health_lock);
	return ok;
}

bool upstream_healthy(struct upstream_pool *a)
{
	return upstream_health(a, NULL, 0, NULL);
}
