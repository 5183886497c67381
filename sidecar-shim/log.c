/* SPDX-License-Identifier: Apache-2.0 */
/* JSON-lines logging on stderr.
 *
 * Each line is built with cJSON (no hand-written escaping) and written with
 * one write(2), so lines from concurrent threads never interleave (stderr
 * is a pipe in a pod; writes up to PIPE_BUF are atomic and our lines are
 * far below that after truncation of the only free-form field, MHD's own
 * messages).
 *
 * What is never logged: header values, bodies, the token (only its hash is
 * kept at all), the key, and the paths of secret files. */
#include "shim.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/un.h>
#include <time.h>

static enum log_level min_level = LOG_INFO;

void log_set_level(enum log_level min) { min_level = min; }

static const char *level_name(enum log_level l)
{
	switch (l) {
	case LOG_DEBUG:
		return "debug";
	case LOG_INFO:
		return "info";
	case LOG_WARN:
		return "warn";
	default:
		return "error";
	}
}

static void cjson_deletep(cJSON **j)
{
	if (*j)
		cJSON_Delete(*j);
}

void log_emit(enum log_level level, const char *msg, const struct log_field *fields)
{
	if (level < min_level)
		return;
	int saved_errno = errno;

	struct timespec ts;
	struct tm tm;
	char tbuf[40];
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t tl = strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(tbuf + tl, sizeof(tbuf) - tl, ".%03ldZ", ts.tv_nsec / 1000000L);

	_cleanup_(cjson_deletep) cJSON *o = cJSON_CreateObject();
	_cleanup_free_ char *line = NULL;
	if (o) {
		cJSON_AddStringToObject(o, "ts", tbuf);
		cJSON_AddStringToObject(o, "level", level_name(level));
		cJSON_AddStringToObject(o, "component", "boxkite-shim");
		cJSON_AddStringToObject(o, "msg", msg);
		for (const struct log_field *f = fields; f && f->type != LF_END; f++) {
			switch (f->type) {
			case LF_STR:
				if (f->s)
					cJSON_AddStringToObject(o, f->key, f->s);
				else
					cJSON_AddNullToObject(o, f->key);
				break;
			case LF_INT:
				cJSON_AddNumberToObject(o, f->key, (double)f->i);
				break;
			case LF_BOOL:
				cJSON_AddBoolToObject(o, f->key, f->i != 0);
				break;
			default:
				break;
			}
		}
		line = cJSON_PrintUnformatted(o);
	}
	if (line) {
		size_t n = strlen(line);
		line[n] = '\n'; /* replaces the NUL; n+1 bytes are written, never read as a string */
		const char *p = line;
		size_t left = n + 1;
		while (left > 0) {
			ssize_t w = write(STDERR_FILENO, p, left);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				break;
			}
			p += w;
			left -= (size_t)w;
		}
	}
	errno = saved_errno;
}

/* libmicrohttpd's messages. Some quote the request URL (`...'); we drop the
 * quoted part: a URL path is client-controlled and could carry anything. */
bool ratelimit_ok(struct ratelimit *rl, unsigned *suppressed)
{
	uint64_t sec = now_ns() / 1000000000ull;
	bool ok;
	pthread_mutex_lock(&rl->lock);
	if (sec != rl->window) {
		rl->window = sec;
		rl->used = 0;
	}
	ok = rl->used < rl->burst;
	if (ok) {
		rl->used++;
		*suppressed = rl->suppressed;
		rl->suppressed = 0;
	} else {
		rl->suppressed++;
	}
	pthread_mutex_unlock(&rl->lock);
	return ok;
}

/* In TLS mode MHD's sockets are AF_UNIX socketpairs, on which libmicrohttpd
 * 0.9.75 still tries TCP_NODELAY/TCP_CORK for every response and logs the
 * failure (EOPNOTSUPP). Harmless there (no Nagle on AF_UNIX): debug level. */
static bool mhd_socketpair_noise(const char *m)
{
	return startswith(m, "Setting TCP_NODELAY option") || startswith(m, "Setting TCP_CORK option") ||
	       startswith(m, "Failed to push the data from buffers to the network");
}

void log_mhd(void *cls, const char *fmt, va_list ap)
{
	const struct shim *s = cls;
	char buf[512];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	char *q = strchr(buf, '`');
	if (q) {
		char *e = strchr(q + 1, '\'');
		if (e)
			memmove(q + 1, e, strlen(e) + 1);
	}
	size_t n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	if (s && s->tls && mhd_socketpair_noise(buf)) {
		log_debug("libmicrohttpd", LS("detail", buf));
		return;
	}
	static struct ratelimit rl = RATELIMIT_INIT(10);
	unsigned dropped;
	if (ratelimit_ok(&rl, &dropped))
		log_warn("libmicrohttpd", LS("detail", buf), LI("suppressed", dropped));
}

const char *sockaddr_str(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
	char a[INET6_ADDRSTRLEN];
	if (sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a));
		snprintf(buf, size, "%s:%u", a, ntohs(in->sin_port));
	} else if (sa && sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof(a));
		snprintf(buf, size, "[%s]:%u", a, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, size, "unknown");
	}
	return buf;
}
