/* SPDX-License-Identifier: Apache-2.0 */
/* boxkite-shim: configuration, start-up, signals, drain.
 *
 * Configuration comes from the environment only (CLI.md):
 *   SIDECAR_AUTH_TOKEN_FILE  file holding the token (trailing newline stripped)
 *   SIDECAR_AUTH_TOKEN       the token itself (the reference's way; used
 *                            when no file is named; wiped after reading)
 *   SIDECAR_SECRETS_DIR      granted secrets, one file each (default
 *                            /etc/boxkite/secrets; secrets.c)
 *   BACKEND_URL              /tool-call's backend (backend.c)
 *   SIDECAR_TOOL_CALL_LOCAL  "true": /tool-call runs the agent's local tools
 *   RUNTIME_MODE             /health's runtime_mode (default k8s)
 *   SIDECAR_TLS_CERT, SIDECAR_TLS_KEY  PEM files (TLS 1.3, OpenSSL; see tls.c);
 *                            neither set: /etc/boxkite/tls/tls.{crt,key}
 *   SIDECAR_TLS_DISABLED     "true" -> plain HTTP; anything else -> TLS required
 *   SIDECAR_LISTEN           host:port, IPv4 or [IPv6] (default 0.0.0.0:8080)
 *   BOXKITE_AGENT_SOCKET     agent socket (default /run/boxkite/pods/agent.sock)
 *   SIDECAR_MAX_BODY         bytes (default 32 MiB; at most one agent frame less
 *                            SHIM_FRAME_RESERVE, see the clamp below)
 *   SIDECAR_MAX_CONCURRENT   requests in flight at once (default 32); more
 *                            wait their turn, first come first served
 *   SIDECAR_MAX_QUEUE        requests that may wait (default 4*concurrent);
 *                            beyond it 429
 *   SIDECAR_QUEUE_TIMEOUT    seconds one may wait (default 60), then 429
 *   SIDECAR_MAX_CONNECTIONS  open connections (default concurrent+108)
 *   SIDECAR_CONN_TIMEOUT     seconds an idle/slow client may hold a
 *                            connection (default 30); never applies to the
 *                            wait for the agent's answer
 *   SIDECAR_HEADER_TIMEOUT   seconds from accept to the first request's
 *                            complete headers, TLS handshake included
 *                            (default 10, at most SIDECAR_CONN_TIMEOUT)
 *   SIDECAR_MAX_CONNECTIONS_PER_PEER  open connections of one peer address
 *                            (IPv6: one /64) (default max_connections -
 *                            max_concurrent)
 *   SIDECAR_MAX_PENDING_PER_PEER  of those, half-open ones: before their
 *                            first request's headers (default: the same;
 *                            TLS mode)
 *   SIDECAR_DRAIN_TIMEOUT    seconds to let in-flight requests finish on
 *                            SIGTERM (default 30)
 *   SIDECAR_LOG_LEVEL        debug|info|warn|error (default info)
 *
 * Start-up errors print one JSON line on stderr and exit 1. After start-up
 * nothing calls exit(): errors become HTTP answers. SIGTERM/SIGINT stop
 * accepting, let in-flight requests finish, and return 0 from main. */
#include "shim.h"
#include "lib/proto.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <signal.h>
#include <sys/resource.h>

#ifndef BK_VERSION
#define BK_VERSION "unknown"
#endif

/* "1.2.3.4:8443", "[::1]:8443"; a bare IPv6 address without brackets is
 * ambiguous and refused. Numeric hosts only: no resolver at start-up. */
static int parse_listen(const char *v, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[INET6_ADDRSTRLEN];
	const char *port;
	size_t hl;
	if (v[0] == '[') {
		const char *close = strchr(v, ']');
		if (!close || close[1] != ':')
			return -EINVAL;
		hl = (size_t)(close - (v + 1));
		if (hl == 0 || hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, v + 1, hl);
		port = close + 2;
	} else {
		const char *colon = strrchr(v, ':');
		if (!colon || memchr(v, ':', (size_t)(colon - v)))
			return -EINVAL;
		hl = (size_t)(colon - v);
		if (hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, v, hl);
		port = colon + 1;
	}
	host[hl] = '\0';
	uint64_t p;
	if (parse_u64(port, &p) < 0 || p == 0 || p > 65535)
		return -EINVAL;
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (v[0] != '[') {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)p);
		if (hl == 0)
			in->sin_addr.s_addr = htonl(INADDR_ANY);
		else if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
			return -EINVAL;
		*len = sizeof(*in);
	} else {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)p);
		if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
			return -EINVAL;
		*len = sizeof(*in6);
	}
	return 0;
}

/* Optional unsigned setting within [min, max]; absent -> def. */
static int env_uint(const char *name, uint64_t def, uint64_t min, uint64_t max, uint64_t *out)
{
	const char *v = getenv(name);
	if (!v || !*v) {
		*out = def;
		return 0;
	}
	uint64_t x;
	if (parse_u64(v, &x) < 0 || x < min || x > max) {
		log_error("invalid setting", LS("variable", name), LI("min", min), LI("max", max));
		return -EINVAL;
	}
	*out = x;
	return 0;
}

/* Read the token, keep only its SHA-256, wipe the plaintext. A missing,
 * empty, oversized or unusable token file leaves the shim running but
 * answering 503 to every route except /health (fail closed). */
static void token_from_env(struct shim *s, char *v)
{
	/* the reference: SIDECAR_AUTH_TOKEN, surrounding whitespace stripped,
	 * its pod template's placeholder the same as no token */
	size_t len = strlen(v), n = len;
	const char *p = v;
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++, n--;
	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r' || p[n - 1] == '\n'))
		n--;
	bool bad = n == 0 || (n == strlen(SHIM_TOKEN_PLACEHOLDER) && memcmp(p, SHIM_TOKEN_PLACEHOLDER, n) == 0);
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f)
			bad = true;
	if (bad)
		log_warn("SIDECAR_AUTH_TOKEN is empty, the template placeholder or unusable; every authenticated route "
			 "answers 503");
	else {
		SHA256((const unsigned char *)p, n, s->token_hash);
		s->token_set = true;
	}
	OPENSSL_cleanse(v, len);
}

static void load_token(struct shim *s)
{
	const char *path = getenv("SIDECAR_AUTH_TOKEN_FILE");
	s->token_set = false;
	char *env = getenv("SIDECAR_AUTH_TOKEN");
	if ((!path || !*path) && env) {
		token_from_env(s, env);
		return;
	}
	if (!path || !*path) {
		log_warn("neither SIDECAR_AUTH_TOKEN_FILE nor SIDECAR_AUTH_TOKEN is set; every authenticated route "
			 "answers 503");
		return;
	}
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int e = read_file_at(AT_FDCWD, path, SHIM_TOKEN_MAX, &buf, &len);
	if (e < 0) {
		log_warn("cannot read the token file named by SIDECAR_AUTH_TOKEN_FILE; every authenticated route "
			 "answers 503",
			 LS("error", e == -EFBIG ? "file too large" : strerror(-e)));
		return;
	}
	size_t n = len;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	bool bad = false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)buf[i];
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			bad = true; /* could never arrive in a header value */
	}
	if (n == 0 || bad) {
		log_warn(n == 0 ? "the token file is empty; every authenticated route answers 503"
				: "the token contains control characters; every authenticated route answers 503");
	} else {
		SHA256((const unsigned char *)buf, n, s->token_hash);
		s->token_set = true;
	}
	OPENSSL_cleanse(buf, len);
}

static enum log_level parse_level(const char *v)
{
	if (!v)
		return LOG_INFO;
	if (streq(v, "debug"))
		return LOG_DEBUG;
	if (streq(v, "warn"))
		return LOG_WARN;
	if (streq(v, "error"))
		return LOG_ERROR;
	return LOG_INFO;
}

static int load_config(struct shim *s, const char **cert, const char **key)
{
	log_set_level(parse_level(getenv("SIDECAR_LOG_LEVEL")));

	const char *listen = getenv("SIDECAR_LISTEN");
	if (!listen || !*listen)
		listen = SHIM_DEFAULT_LISTEN;
	if (parse_listen(listen, &s->listen_addr, &s->listen_len) < 0) {
		log_error("invalid SIDECAR_LISTEN (want host:port with a numeric IPv4 address or [IPv6])");
		return -EINVAL;
	}

	const char *dis = getenv("SIDECAR_TLS_DISABLED");
	s->tls = !(dis && streq(dis, "true"));
	if (s->tls) {
		*cert = getenv("SIDECAR_TLS_CERT");
		*key = getenv("SIDECAR_TLS_KEY");
		/* neither set: the reference's mount, /etc/boxkite/tls/tls.{crt,key} */
		if ((!*cert || !**cert) && (!*key || !**key)) {
			*cert = SHIM_DEFAULT_TLS_DIR "/tls.crt";
			*key = SHIM_DEFAULT_TLS_DIR "/tls.key";
		}
		if (!*cert || !**cert || !*key || !**key) {
			log_error("TLS is required but only one of SIDECAR_TLS_CERT and SIDECAR_TLS_KEY is set "
				  "(SIDECAR_TLS_DISABLED=true for plain HTTP)");
			return -EINVAL;
		}
	}

	uint64_t v;
	if (env_uint("SIDECAR_MAX_BODY", SHIM_DEFAULT_MAX_BODY, 1, 1ull << 30, &v) < 0)
		return -EINVAL;
	s->max_body = v;
	/* The agent refuses request frames over BK_REQ_MAX; a larger body
	 * could never be forwarded, so answer 413 for it up front rather than
	 * buffer it and fail later. */
	const uint64_t frame_overhead = SHIM_FRAME_RESERVE;
	s->max_body_configured = s->max_body;
	if (s->max_body > BK_REQ_MAX - frame_overhead)
		s->max_body = BK_REQ_MAX - frame_overhead;
	if (env_uint("SIDECAR_MAX_CONCURRENT", SHIM_DEFAULT_MAX_CONCURRENT, 1, 1024, &v) < 0)
		return -EINVAL;
	s->max_concurrent = (unsigned)v;
	if (env_uint("SIDECAR_MAX_QUEUE", 4ull * s->max_concurrent, 0, 65536, &v) < 0)
		return -EINVAL;
	s->max_queue = (unsigned)v;
	if (env_uint("SIDECAR_QUEUE_TIMEOUT", 60, 1, 3600, &v) < 0)
		return -EINVAL;
	s->queue_timeout_ms = (unsigned)v * 1000u;
	if (env_uint("SIDECAR_MAX_CONNECTIONS", s->max_concurrent + SHIM_DEFAULT_PEER_CONNECTIONS, s->max_concurrent + 1,
		     4096, &v) < 0)
		return -EINVAL;
	s->max_connections = (unsigned)v;
	if (env_uint("SIDECAR_CONN_TIMEOUT", SHIM_DEFAULT_CONN_TIMEOUT, 1, 3600, &v) < 0)
		return -EINVAL;
	s->conn_timeout = (unsigned)v;
	uint64_t hdef = s->conn_timeout < SHIM_HEADER_TIMEOUT_DEFAULT ? s->conn_timeout : SHIM_HEADER_TIMEOUT_DEFAULT;
	if (env_uint("SIDECAR_HEADER_TIMEOUT", hdef, 1, s->conn_timeout, &v) < 0)
		return -EINVAL;
	s->header_timeout = (unsigned)v;
	/* One peer never takes the last max_concurrent connections: another
	 * client can always open enough for a full concurrency's worth; by
	 * default one peer (the manager) may hold SHIM_DEFAULT_PEER_CONNECTIONS. */
	if (env_uint("SIDECAR_MAX_CONNECTIONS_PER_PEER", s->max_connections - s->max_concurrent, 1, s->max_connections,
		     &v) < 0)
		return -EINVAL;
	s->max_per_peer = (unsigned)v;
	if (env_uint("SIDECAR_MAX_PENDING_PER_PEER", s->max_per_peer, 1, s->max_per_peer, &v) < 0)
		return -EINVAL;
	s->max_pending_per_peer = (unsigned)v;
	if (env_uint("SIDECAR_DRAIN_TIMEOUT", SHIM_DEFAULT_DRAIN_TIMEOUT, 0, 3600, &v) < 0)
		return -EINVAL;
	s->drain_timeout = (unsigned)v;

	s->secrets_dir = getenv("SIDECAR_SECRETS_DIR");
	if (!s->secrets_dir || !*s->secrets_dir)
		s->secrets_dir = SHIM_DEFAULT_SECRETS_DIR;
	s->runtime_mode = getenv("RUNTIME_MODE");
	if (!s->runtime_mode || !*s->runtime_mode || strlen(s->runtime_mode) > 32)
		s->runtime_mode = "k8s";
	const char *tl = getenv("SIDECAR_TOOL_CALL_LOCAL");
	s->tool_call_local = tl && streq(tl, "true");

	const char *sock = getenv("BOXKITE_AGENT_SOCKET");
	if (!sock || !*sock)
		sock = SHIM_DEFAULT_AGENT_SOCKET;
	if (upstream_init(&s->upstream, sock) < 0) {
		log_error("out of memory");
		return -ENOMEM;
	}

	load_token(s);
	return 0;
}

static int open_listener(struct shim *s)
{
	_cleanup_close_ int fd = socket(s->listen_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&s->listen_addr, s->listen_len) < 0)
		return -errno;
	if (listen(fd, 128) < 0)
		return -errno;
	/* Non-blocking for our acceptor and for MHD alike: a connection that
	 * vanishes between poll() and accept() must not block the loop. */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	s->listen_fd = steal_fd(&fd);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: boxkite-shim\n"
		"       boxkite-shim --help | --version\n"
		"The in-pod HTTPS front of boxkite-agent; configured by the environment only:\n"
		"  SIDECAR_AUTH_TOKEN_FILE    file holding the token (trailing newline stripped)\n"
		"  SIDECAR_AUTH_TOKEN         the token itself, used when no file is named\n"
		"  SIDECAR_TLS_CERT           PEM certificate (default %s/tls.crt)\n"
		"  SIDECAR_TLS_KEY            PEM key (default %s/tls.key)\n"
		"  SIDECAR_TLS_DISABLED       true: plain HTTP; anything else: TLS 1.3 required\n"
		"  SIDECAR_LISTEN             IPv4:port or [IPv6]:port (default %s)\n"
		"  BOXKITE_AGENT_SOCKET       the agent's socket (default %s)\n"
		"  SIDECAR_SECRETS_DIR        granted secrets, one file each (default %s)\n"
		"  SIDECAR_MAX_BODY           request body limit in bytes (default %u)\n"
		"  SIDECAR_MAX_CONCURRENT     requests in flight at once; more wait their turn (default %u)\n"
		"  SIDECAR_MAX_QUEUE          requests that may wait, then 429 (default 4 * concurrent)\n"
		"  SIDECAR_QUEUE_TIMEOUT      seconds one may wait, then 429 (default 60)\n"
		"  SIDECAR_MAX_CONNECTIONS    open connections (default concurrent + 108)\n"
		"  SIDECAR_CONN_TIMEOUT       idle seconds per connection (default %u)\n"
		"  SIDECAR_HEADER_TIMEOUT     seconds from accept to complete headers (default %u)\n"
		"  SIDECAR_MAX_CONNECTIONS_PER_PEER  open connections of one peer (default connections - concurrent)\n"
		"  SIDECAR_MAX_PENDING_PER_PEER      of those, half-open ones (default: the same)\n"
		"  SIDECAR_DRAIN_TIMEOUT      seconds SIGTERM waits for requests in flight (default %u)\n"
		"  SIDECAR_LOG_LEVEL          debug, info, warn or error (default info)\n"
		"  SIDECAR_TOOL_CALL_LOCAL    true: /tool-call runs the agent's local tools\n"
		"  BACKEND_URL                /tool-call's backend, http[s]://host[:port][/prefix]\n"
		"                             (default http://host.docker.internal:8000)\n"
		"  RUNTIME_MODE               /health's runtime_mode (default k8s)\n",
		SHIM_DEFAULT_TLS_DIR, SHIM_DEFAULT_TLS_DIR, SHIM_DEFAULT_LISTEN, SHIM_DEFAULT_AGENT_SOCKET,
		SHIM_DEFAULT_SECRETS_DIR, SHIM_DEFAULT_MAX_BODY, SHIM_DEFAULT_MAX_CONCURRENT, SHIM_DEFAULT_CONN_TIMEOUT,
		SHIM_HEADER_TIMEOUT_DEFAULT, SHIM_DEFAULT_DRAIN_TIMEOUT);
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		if (argc == 2 && streq(argv[1], "--version")) {
			printf("boxkite-shim %s\n", BK_VERSION);
			return 0;
		}
		if (argc == 2 && (streq(argv[1], "--help") || streq(argv[1], "-h"))) {
			usage(stdout);
			return 0;
		}
		fprintf(stderr, "boxkite-shim: takes no arguments (configured by the environment); "
				"boxkite-shim --help lists the variables\n");
		return 2;
	}

	log_setup(STDERR_FILENO, "boxkite-shim", "msg");
	/* SIGPIPE: a client or the agent going away is an error return, never
	 * a death. SIGTERM/SIGINT are blocked in every thread (threads inherit
	 * the mask) and taken synchronously by main. */
	signal(SIGPIPE, SIG_IGN);
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	static struct shim s = { .listen_fd = -1, .stop_efd = -1, .conns_stop_efd = -1 };
	pthread_mutex_init(&s.mhd_lock, NULL);
	pthread_mutex_init(&s.peers_lock, NULL);
	const char *cert = NULL, *key = NULL;
	if (load_config(&s, &cert, &key) < 0)
		return 1;

	/* A TLS connection holds 5 descriptors (its socket, a socketpair, its
	 * daemon's epoll fd and eventfd), a streaming or terminal request one
	 * more: the soft limit goes up to the hard one (the shim uses poll and
	 * epoll only, never select). */
	struct rlimit rl = { 0 };
	if (nofile_raise(&rl) < 0)
		rl.rlim_cur = rl.rlim_max = RLIM_INFINITY; /* unknown: nothing to say about it */

	int e = open_listener(&s);
	char addr[SHIM_ADDR_MAX];
	sockaddr_str((struct sockaddr *)&s.listen_addr, s.listen_len, addr, sizeof(addr));
	if (e < 0) {
		log_error("cannot listen", LS("listen", addr), LS("error", strerror(-e)));
		return 1;
	}
	if (s.tls && tls_init(&s, cert, key) < 0)
		return 1;
	/* Secrets' paths are not needed any more; drop them from our env. */
	unsetenv("SIDECAR_AUTH_TOKEN_FILE");
	unsetenv("SIDECAR_AUTH_TOKEN"); /* wiped in place already; now gone from our env */
	unsetenv("SIDECAR_TLS_KEY");

	if (http_start(&s) < 0) {
		log_error("cannot start the HTTP daemon");
		return 1;
	}
	if (s.tls && (e = tls_start(&s)) < 0) {
		log_error("cannot start the TLS acceptor", LS("error", strerror(-e)));
		return 1;
	}
	log_info("listening", LS("version", BK_VERSION), LS("listen", addr), LB("tls", s.tls),
		 LS("agent_socket", s.upstream.path), LB("token_configured", s.token_set), LI("max_body", s.max_body),
		 LI("max_body_configured", s.max_body_configured),
		 LI("max_concurrent", s.max_concurrent), LI("max_queue", s.max_queue), LI("max_connections", s.max_connections),
		 LI("conn_timeout_s", s.conn_timeout),
		 LI("nofile", rl.rlim_cur == RLIM_INFINITY ? -1 : (long long)rl.rlim_cur));
	/* every connection open and every request streaming, plus 64 */
	uint64_t need = 5ull * s.max_connections + 2ull * s.max_concurrent + 64;
	if (s.tls && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
		log_warn("RLIMIT_NOFILE is below what SIDECAR_MAX_CONNECTIONS may use: new connections fail once descriptors run out",
			 LI("nofile", (long long)rl.rlim_cur), LI("needed", (long long)need),
			 LI("max_connections", s.max_connections));

	siginfo_t si;
	int sig;
	do
		sig = sigwaitinfo(&sigs, &si);
	while (sig < 0 && errno == EINTR);
	log_info("shutting down: no new connections; waiting for requests in flight",
		 LS("signal", sig == SIGINT ? "SIGINT" : "SIGTERM"), LI("active", atomic_load(&s.active)));

	atomic_store(&s.draining, true);
	if (s.tls)
		tls_stop_accepting(&s);
	else
		http_quiesce(&s);

	uint64_t deadline = now_ns() + (uint64_t)s.drain_timeout * 1000000000ull;
	bool again = false;
	while (atomic_load(&s.active) > 0 && now_ns() < deadline) {
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 50 * 1000000L };
		if (sigtimedwait(&sigs, NULL, &ts) > 0) {
			again = true; /* second signal: stop waiting */
			break;
		}
	}
	if (atomic_load(&s.active) > 0) {
		/* MHD_stop_daemon would join handler threads still waiting on the
		 * agent; leave them and let the process exit take them. */
		log_warn("exiting with requests still in flight", LI("active", atomic_load(&s.active)),
			 LB("second_signal", again));
		return 0;
	}
	http_stop(&s);
	if (s.tls) {
		tls_wait(&s, 2000);
		tls_done(&s);
	}
	upstream_done(&s.upstream);
	if (s.listen_fd >= 0)
		close(s.listen_fd);
	log_info("stopped");
	return 0;
}
