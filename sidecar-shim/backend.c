/* SPDX-License-Identifier: Apache-2.0 */
/* /tool-call, as the reference sidecar serves it: the request's tool_name
 * and arguments, with the pod's own session id (never the caller's), POSTed
 * to $BACKEND_URL/api/v1/internal/tool-call; the answer is always 200:
 * the backend's JSON, or {"error": "..."}.
 *
 * BACKEND_URL is http://host[:port][/prefix] (default the reference's
 * http://host.docker.internal:8000); the host is resolved per call. A
 * minimal HTTP/1.1 client: one request, "Connection: close", the answer
 * read to its Content-Length (or to EOF; chunked decoded), bounded in
 * size (1 MiB) and time (120 s, the reference's). https:// is not served
 * (answered {"error": ...}). */
#include "shim.h"

#include <cjson/cJSON.h>
#include <netdb.h>
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

char *backend_tool_call(const char *tool_name, const cJSON *arguments, const char *session_id)
{
	const char *url = getenv("BACKEND_URL");
	if (!url || !*url)
		url = BACKEND_DEFAULT;
	if (strncmp(url, "http://", 7) != 0)
		return error_json("BACKEND_URL must be an http:// URL (%s)%.0d", "https is not served by boxkite-shim", 0);
	char host[256], port[8] = "80";
	const char *h = url + 7, *slash = strchr(h, '/');
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
	_cleanup_close_ int fd = dial(hostname, port, deadline);
	if (fd < 0)
		return error_json("cannot reach the backend: %s%.0d", strerror(-fd), 0);
	_cleanup_free_ char *head = NULL;
	if (asprintf(&head,
		     "POST %.*s/api/v1/internal/tool-call HTTP/1.1\r\nHost: %.*s\r\nContent-Type: application/json\r\n"
		     "Accept: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		     (int)pl, prefix, (int)hl, h, strlen(body)) < 0)
		return NULL;
	const char *parts[2] = { head, body };
	for (int k = 0; k < 2; k++) {
		size_t off = 0, n = strlen(parts[k]);
		while (off < n) {
			ssize_t w = send(fd, parts[k] + off, n - off, MSG_NOSIGNAL);
			if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
				if (io_wait(fd, POLLOUT, deadline) < 0)
					return error_json("Tool call timed out after 120s: %s%.0d", tool_name, 0);
				continue;
			}
			if (w <= 0)
				return error_json("cannot send to the backend: %s%.0d", strerror(errno), 0);
			off += (size_t)w;
		}
	}
	_cleanup_free_ char *resp = malloc(BACKEND_RESP_MAX + 1);
	if (!resp)
		return NULL;
	size_t got = 0;
	for (;;) {
		ssize_t r = recv(fd, resp + got, BACKEND_RESP_MAX - got, 0);
		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (io_wait(fd, POLLIN, deadline) < 0)
				return error_json("Tool call timed out after 120s: %s%.0d", tool_name, 0);
			continue;
		}
		if (r < 0)
			return error_json("backend connection failed: %s%.0d", strerror(errno), 0);
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
