/* SPDX-License-Identifier: Apache-2.0 */
/* The shim's logging on stderr: lines are written by lib/log.c (set up in
 * main.c as component "boxkite-shim"); here the rate limit for lines a
 * client can trigger at will, and libmicrohttpd's messages.
 *
 * What is never logged: header values, bodies, the token (only its hash is
 * kept at all), the key, and the paths of secret files. */
#include "shim.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/un.h>
#include <time.h>

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
