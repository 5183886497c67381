/* SPDX-License-Identifier: Apache-2.0 */
/* /tool-call, as the reference sidecar serves it: the request's tool_name
 * and arguments, with the pod's own session id (never the caller's), POSTed
 * to $BACKEND_URL/api/v1/internal/tool-call; the answer is always 200:
 * the backend's JSON, or {"error": "..."}.
 *
 * BACKEND_URL is http[s]://host[:port][/prefix] (default the reference's
 * http://host.docker.internal:8000); the host is resolved per call. A
 * minimal HTTP/1.1 client: one request, "Connection: close", the answer
 * read to its Content-Length (or to EOF; chunked decoded), bounded in
 * size (1 MiB) and time (120 s, the reference's). https:// is verified as
 * the reference's httpx does: the system's CA store (OpenSSL's default
 * paths, so SSL_CERT_FILE / SSL_CERT_DIR override it), the URL's host
 * name or IP address checked against the certificate, TLS 1.2 or newer.
 * A backend that fails verification gets no byte of the request. */
#include "shim.h"

#include <cjson/cJSON.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <strings.h>

#define BACKEND_TIMEOUT_MS 120000
#define BACKEND_RESP_MAX (1u << 20)
#define BACKEND_DEFAULT "http://host.docker.internal:8000"

static char *error_json(const char *fmt, const char *a, int b)
{
	char msg[600];
	snprintf(msg, sizeof(msg), fmt, a, b);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "error", msg);
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

static int dial(const char *host, const char *port, uint64_t deadline)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -EHOSTUNREACH;
	int fd = -ECONNREFUSED;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int s = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (s < 0)
			continue;
		if (connect(s, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
			struct pollfd p = { .fd = s, .events = POLLOUT };
			uint64_t now = now_ns();
			int ms = now < deadline ? (int)((deadline - now) / 1000000ull) : 0;
			int e = 0;
			socklen_t el = sizeof(e);
			if (poll(&p, 1, ms) == 1 && getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0) {
				fd = s;
				break;
			}
		}
		close(s);
	}
	freeaddrinfo(res);
	return fd;
}

static int io_wait(int fd, short ev, uint64_t deadline)
{
	uint64_t now = now_ns();
	if (now >= deadline)
		return -ETIMEDOUT;
	struct pollfd p = { .fd = fd, .events = ev };
	int n = poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
	return n == 1 ? 0 : n == 0 ? -ETIMEDOUT : -errno;
}

/* Decode a chunked body in place; -EBADMSG if malformed. */
static int dechunk(char *b, size_t *len)
{
	size_t i = 0, o = 0, n = *len;
	for (;;) {
		char *end;
		unsigned long sz = strtoul(b + i, &end, 16);
		char *crlf = memmem(b + i, n - i, "\r\n", 2);
		if (!crlf || end == b + i)
			return -EBADMSG;
		i = (size_t)(crlf - b) + 2;
		if (sz == 0)
			break;
		if (sz > n - i)
			return -EBADMSG;
		memmove(b + o, b + i, sz);
		o += sz;
		i += sz + 2;
		if (i > n)
			return -EBADMSG;
	}
	*len = o;
	return 0;
}

/* One backend connection: plain, or TLS over the same non-blocking socket. */
struct bconn {
	int fd;
	SSL_CTX *ctx;
	SSL *ssl;
	uint64_t deadline;
};

static void bconn_close(struct bconn *c)
{
	if (c->ssl)
		SSL_free(c->ssl);
	if (c->ctx)
		SSL_CTX_free(c->ctx);
	if (c->fd >= 0)
		close(c->fd);
}

/* Wait as OpenSSL asks after a call that returned r; 0: retry, <0: -errno
 * (-ETIMEDOUT, -EPROTO for a TLS failure, -ECONNRESET). */
static int bconn_tls_wait(struct bconn *c, int r)
{
	switch (SSL_get_error(c->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		return io_wait(c->fd, POLLIN, c->deadline);
	case SSL_ERROR_WANT_WRITE:
		return io_wait(c->fd, POLLOUT, c->deadline);
	case SSL_ERROR_ZERO_RETURN:
		return -ECONNRESET;
	case SSL_ERROR_SYSCALL:
		return errno ? -errno : -ECONNRESET;
	default:
		return -EPROTO;
	}
}

static int bconn_tls_start(struct bconn *c, const char *hostname, char *why, size_t whylen)
{
	c->ctx = SSL_CTX_new(TLS_client_method());
	if (!c->ctx || SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_set_default_verify_paths(c->ctx) != 1)
		return snprintf(why, whylen, "TLS set-up failed"), -EPROTO;
	SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(c->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	c->ssl = SSL_new(c->ctx);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1)
		return snprintf(why, whylen, "TLS set-up failed"), -EPROTO;
	/* an IP literal is checked against the certificate's IP addresses and
	 * sent without SNI; a name against its DNS names, and sent as SNI */
	X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
	if (X509_VERIFY_PARAM_set1_ip_asc(vp, hostname) != 1) {
		if (SSL_set1_host(c->ssl, hostname) != 1 || SSL_set_tlsext_host_name(c->ssl, hostname) != 1)
			return snprintf(why, whylen, "TLS set-up failed"), -EPROTO;
	}
	for (;;) {
		ERR_clear_error();
		int r = SSL_connect(c->ssl);
		if (r == 1)
			return 0;
		int e = bconn_tls_wait(c, r);
		if (e == 0)
			continue;
		long v = SSL_get_verify_result(c->ssl);
		if (v != X509_V_OK)
			snprintf(why, whylen, "TLS: certificate verify failed: %s", X509_verify_cert_error_string(v));
		else if (e == -ETIMEDOUT)
			snprintf(why, whylen, "TLS handshake timed out");
		else {
			unsigned long err = ERR_peek_error();
			snprintf(why, whylen, "TLS handshake failed: %s",
				 err ? ERR_reason_error_string(err) ? ERR_reason_error_string(err) : "error" : strerror(-e));
		}
		return e < 0 && e != -EPROTO ? e : -EPROTO;
	}
}

/* Everything of buf, or -errno. */
static int bconn_write(struct bconn *c, const char *buf, size_t n)
{
	size_t off = 0;
	while (off < n) {
		if (c->ssl) {
			ERR_clear_error();
			int w = SSL_write(c->ssl, buf + off, (int)(n - off > INT32_MAX ? INT32_MAX : n - off));
			if (w > 0) {
				off += (size_t)w;
				continue;
			}
			int e = bconn_tls_wait(c, w);
			if (e < 0)
				return e;
			continue;
		}
		ssize_t w = send(c->fd, buf + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			int e = io_wait(c->fd, POLLOUT, c->deadline);
			if (e < 0)
				return e;
			continue;
		}
		if (w <= 0)
			return w < 0 ? -errno : -ECONNRESET;
		off += (size_t)w;
	}
	return 0;
}

/* Up to n bytes; 0 at the end of the answer; -errno. */
static ssize_t bconn_read(struct bconn *c, char *buf, size_t n)
{
	for (;;) {
		if (c->ssl) {
			ERR_clear_error();
			int r = SSL_read(c->ssl, buf, (int)(n > INT32_MAX ? INT32_MAX : n));
			if (r > 0)
				return r;
			int kind = SSL_get_error(c->ssl, r);
			if (kind == SSL_ERROR_ZERO_RETURN || (kind == SSL_ERROR_SYSCALL && errno == 0))
				return 0;
			int e = bconn_tls_wait(c, r);
			if (e < 0)
				return e;
			continue;
		}
		ssize_t r = recv(c->fd, buf, n, 0);
		if (r >= 0)
			return r;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		int e = io_wait(c->fd, POLLIN, c->deadline);
		if (e < 0)
			return e;
	}
}

char *backend_tool_call(const char *tool_name, const cJSON *arguments, const char *session_id)
{
	const char *url = getenv("BACKEND_URL");
	if (!url || !*url)
		url = BACKEND_DEFAULT;
	bool tls = strncmp(url, "https://", 8) == 0;
	if (!tls && strncmp(url, "http://", 7) != 0)
		return error_json("BACKEND_URL must be an http:// or https:// URL%s%.0d", "", 0);
	char host[256], port[8];
	snprintf(port, sizeof(port), "%s", tls ? "443" : "80");
	const char *h = url + (tls ? 8 : 7), *slash = strchr(h, '/');
	size_t hl = slash ? (size_t)(slash - h) : strlen(h);
	const char *prefix = slash ? slash : "";
	if (hl == 0 || hl >= sizeof(host))
		return error_json("BACKEND_URL has no usable host%s%.0d", "", 0);
	memcpy(host, h, hl);
	host[hl] = '\0';
	char *colon = host[0] == '[' ? strstr(host, "]:") : strrchr(host, ':');
	if (colon) {
		if (host[0] == '[')
			colon++;
		snprintf(port, sizeof(port), "%s", colon + 1);
		*colon = '\0';
	}
	char *hostname = host;
	if (hostname[0] == '[') {
		hostname++;
		char *rb = strchr(hostname, ']');
		if (rb)
			*rb = '\0';
	}
	size_t pl = strlen(prefix);
	while (pl > 0 && prefix[pl - 1] == '/')
		pl--;

	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "tool_name", tool_name);
	cJSON_AddItemToObject(req, "arguments", arguments ? cJSON_Duplicate(arguments, true) : cJSON_CreateObject());
	cJSON_AddItemToObject(req, "session_id", session_id ? cJSON_CreateString(session_id) : cJSON_CreateNull());
	_cleanup_free_ char *body = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	if (!body)
		return NULL;

	uint64_t deadline = now_ns() + (uint64_t)BACKEND_TIMEOUT_MS * 1000000ull;
	_cleanup_(bconn_close) struct bconn c = { .fd = dial(hostname, port, deadline), .deadline = deadline };
	if (c.fd < 0)
		return error_json("cannot reach the backend: %s%.0d", strerror(-c.fd), 0);
	if (tls) {
		char why[300];
		if (bconn_tls_start(&c, hostname, why, sizeof(why)) < 0)
			return error_json("cannot reach the backend: %s%.0d", why, 0);
	}
	_cleanup_free_ char *head = NULL;
	if (asprintf(&head,
		     "POST %.*s/api/v1/internal/tool-call HTTP/1.1\r\nHost: %.*s\r\nContent-Type: application/json\r\n"
		     "Accept: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		     (int)pl, prefix, (int)hl, h, strlen(body)) < 0)
		return NULL;
	int e = bconn_write(&c, head, strlen(head));
	if (e == 0)
		e = bconn_write(&c, body, strlen(body));
	if (e == -ETIMEDOUT)
		return error_json("Tool call timed out after 120s: %s%.0d", tool_name, 0);
	if (e < 0)
		return error_json("cannot send to the backend: %s%.0d", strerror(-e), 0);
	_cleanup_free_ char *resp = malloc(BACKEND_RESP_MAX + 1);
	if (!resp)
		return NULL;
	size_t got = 0;
	for (;;) {
		ssize_t r = bconn_read(&c, resp + got, BACKEND_RESP_MAX - got);
		if (r == -ETIMEDOUT)
			return error_json("Tool call timed out after 120s: %s%.0d", tool_name, 0);
		if (r < 0)
			return error_json("backend connection failed: %s%.0d", strerror((int)-r), 0);
		if (r == 0 || (got += (size_t)r) == BACKEND_RESP_MAX)
			break;
	}
	resp[got] = '\0';
	int status = 0;
	char *hend = strstr(resp, "\r\n\r\n");
	if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1 || !hend)
		return error_json("malformed answer from the backend%s%.0d", "", 0);
	*hend = '\0';
	char *b = hend + 4;
	size_t blen = got - (size_t)(b - resp);
	bool chunked = false;
	for (char *l = strstr(resp, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
		if (strncasecmp(l + 2, "Content-Length:", 15) == 0) {
			unsigned long cl = strtoul(l + 17, NULL, 10);
			if (cl < blen)
				blen = cl;
		} else if (strncasecmp(l + 2, "Transfer-Encoding:", 18) == 0 && strcasestr(l + 20, "chunked")) {
			chunked = true;
		}
	}
	if (chunked && dechunk(b, &blen) < 0)
		return error_json("malformed answer from the backend%s%.0d", "", 0);
	b[blen] = '\0';
	if (status != 200) {
		/* the reference: "Backend error (<status>): <first 500 characters>" */
		char msg[700];
		snprintf(msg, sizeof(msg), "Backend error (%d): %.500s", status, b);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "error", msg);
		char *s = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		return s;
	}
	cJSON *j = cJSON_ParseWithLength(b, blen);
	if (!j)
		return error_json("the backend's answer is not JSON%s%.0d", "", 0);
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}
