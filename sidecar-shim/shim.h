/* SPDX-License-Identifier: Apache-2.0 */
/* boxkite-shim: the unprivileged in-pod half of boxkite.
 *
 * It authenticates HTTP requests (X-Sidecar-Auth-Token, constant time),
 * bounds them (body size, concurrency, slow clients) and forwards them to
 * boxkite-agent over AF_UNIX SOCK_SEQPACKET (lib/proto.h). It has no
 * policy: beyond checking that a POST body is a JSON object it never looks
 * at what a request means, and it adds no identity fields (the agent takes
 * the caller's identity from the kernel, never from the request).
 *
 * Files, one concern each:
 *   main.c      configuration (environment only), start-up, signals, drain
 *   log.c       the rate limit and libmicrohttpd's messages (lines: lib/log.h)
 *   tls.c       OpenSSL TLS 1.3 termination in front of libmicrohttpd
 *   http.c      libmicrohttpd daemon: routes, auth, limits, relaying
 *   procroute.c the /process routes: path -> route and id, the agent's args
 *   upstream.c  the upstream connection pool: connections to the agent,
 *               round trips, reply validation
 *   ws.c        WebSocket frames (RFC 6455): handshake key, the client
 *               frame parser (fuzzed), server frames, our resize message
 *   wspty.c     the /pty WebSocket after its upgrade: the relay to the
 *               agent's op "pty", one thread per terminal
 */
#pragma once

#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lib/log.h"
#include "lib/util.h"

#define SHIM_DEFAULT_LISTEN "0.0.0.0:8080" /* the reference sidecar's port, which the manager dials */
#define SHIM_DEFAULT_AGENT_SOCKET "/run/boxkite/pods/agent.sock"
#define SHIM_DEFAULT_MAX_BODY (32u * 1024u * 1024u) /* 10 MiB of file content, JSON-escaped */
#define SHIM_FRAME_RESERVE (512u * 1024u) /* frame envelope + resolved secrets (secrets.c) */
#define SHIM_DEFAULT_SECRETS_DIR "/etc/boxkite/secrets"
#define SHIM_DEFAULT_TLS_DIR "/etc/boxkite/tls" /* the reference's mount: tls.crt, tls.key */
/* deploy/pod-template.yaml's placeholder in the reference: treated as no token */
#define SHIM_TOKEN_PLACEHOLDER "CHANGEME-generate-a-random-per-pod-secret-see-comment-above"
#define SHIM_DEFAULT_MAX_CONCURRENT 32u
/* connections one client may hold by default: the reference manager's
 * httpx pool opens up to 100 per pod (httpx's default max_connections),
 * and a connection closed at accept is a transport error it answers by
 * recovering (recreating) the session */
#define SHIM_DEFAULT_PEER_CONNECTIONS 108u
#define SHIM_DEFAULT_CONN_TIMEOUT 30u
#define SHIM_DEFAULT_DRAIN_TIMEOUT 30u
#define SHIM_TOKEN_MAX 4096u              /* bytes in the token file */
#define SHIM_HEADER_TIMEOUT_DEFAULT 10u /* seconds, capped by conn timeout */
#define SHIM_HEALTH_PING_TIMEOUT_MS 2000
#define SHIM_HEALTH_CACHE_NS (1000ull * 1000ull * 1000ull)
#define SHIM_AGENT_POOL_MAX 8u
#define SHIM_STREAM_TIMEOUT_MAX 3600u /* a streamed /exec without "timeout": the agent's largest default */
/* Per-connection memory for libmicrohttpd: request line + headers must fit.
 * A 1 MB header is refused by MHD (431) instead of being buffered. */
#define SHIM_CONN_MEMORY_LIMIT (64u * 1024u)
#define SHIM_THREAD_STACK (1024u * 1024u)
#define SHIM_ADDR_MAX 64 /* "[IPv6]:port" with room to spare */

/* ---- log.c ----------------------------------------------------------- */
/* Logging itself is lib/log.h (shared with the agent); this file adds the
 * shim's rate limit and libmicrohttpd's logger. */
/* At most `burst` lines per second from one call site; the next line
 * allowed carries the number suppressed. For lines a client can trigger at
 * will (failed handshakes, connection floods, MHD's protocol errors). */
struct ratelimit {
	pthread_mutex_t lock;
	uint64_t window;
	unsigned burst, used, suppressed;
};
#define RATELIMIT_INIT(b) { .lock = PTHREAD_MUTEX_INITIALIZER, .burst = (b) }
/* True if a line may be written now; *suppressed gets the count dropped
 * since the last line written. */
bool ratelimit_ok(struct ratelimit *rl, unsigned *suppressed);
/* libmicrohttpd's external logger. */
_printf_(2, 0) void log_mhd(void *cls, const char *fmt, va_list ap);
/* "1.2.3.4:80" / "[::1]:80" into buf (SHIM_ADDR_MAX bytes is enough). */
const char *sockaddr_str(const struct sockaddr *sa, socklen_t len, char *buf, size_t size);

/* ---- upstream.c: the pool of connections to the agent ----------------------------------------------------- */
struct upstream_pool {
	char *path;
	pthread_mutex_t lock;
	int idle[SHIM_AGENT_POOL_MAX];
	unsigned n_idle;
	/* /health: at most one ping per SHIM_HEALTH_CACHE_NS, whoever asks. */
	pthread_mutex_t health_lock;
	uint64_t health_at;
	bool health_ok;
	bool health_has_sid;
	char health_sid[264]; /* the pod's session id (agent's ping) */
};
struct upstream_reply {
	unsigned status;
	const char *content_type; /* static string */
	char *body;               /* owned, malloc'd */
	size_t len;
	bool more;                /* a streamed answer: more frames follow ("more": true) */
	bool exit_zero;           /* the body's "exit_code" is 0 */
};
int upstream_init(struct upstream_pool *a, const char *path);
void upstream_done(struct upstream_pool *a);
/* One request/response round trip on a pooled connection. timeout_ms 0 =
 * wait as long as the agent takes (an exec runs for its own timeout).
 * -errno on transport failure (the connection is discarded). */
int upstream_call(struct upstream_pool *a, const char *req, size_t len, int timeout_ms, char **resp, size_t *resplen);
int upstream_call_watch(struct upstream_pool *a, const char *req, size_t len, int timeout_ms, int watch_fd, char **resp,
		     size_t *resplen);
/* A streamed answer (/exec with "stream": true): the request's first
 * answer as upstream_call_watch, and the agent connection in *fd (not
 * pooled; the caller closes it) for the next ones. */
int upstream_stream_open(struct upstream_pool *a, const char *req, size_t len, int watch_fd, int *fd, char **resp,
			 size_t *resplen);
/* The next answer on a stream's connection, or -ECONNABORTED when the
 * client behind watch_fd hung up first. */
int upstream_stream_next(int fd, int watch_fd, char **resp, size_t *resplen);
/* Validate an agent response frame and turn it into an HTTP reply.
 * -EBADMSG when malformed. */
int upstream_parse_reply(const char *resp, size_t len, struct upstream_reply *out);
/* True when a ping round trip returns status 200 (cached for 1 s). */
bool upstream_healthy(struct upstream_pool *a);
/* The same, and the pod's session id as the agent's ping names it
 * (*has_sid false: no session). */
bool upstream_health(struct upstream_pool *a, char *sid, size_t sidlen, bool *has_sid);
/* The next /health asks the agent again (after a /configure). */
void upstream_health_invalidate(struct upstream_pool *a);

/* ---- http.c / tls.c / main.c ------------------------------------------ */
struct shim {
	/* configuration */
	struct sockaddr_storage listen_addr;
	socklen_t listen_len;
	bool tls;
	uint64_t max_body; /* effective: min(configured, what a BK_REQ_MAX frame carries) */
	uint64_t max_body_configured;
	unsigned max_concurrent;
	unsigned max_connections;
	unsigned conn_timeout;
	unsigned header_timeout; /* accept -> first request's headers, TLS handshake included */
	unsigned max_per_peer;   /* open connections of one peer (IPv4 address, IPv6 /64) */
	unsigned max_pending_per_peer; /* of those, not yet past their first request's headers */
	unsigned drain_timeout;
	bool token_set;
	bool tool_call_local;        /* SIDECAR_TOOL_CALL_LOCAL=true: /tool-call runs the agent's tools */
	const char *secrets_dir;     /* granted secrets (secrets.c) */
	const char *runtime_mode;    /* /health's runtime_mode (RUNTIME_MODE, default k8s) */
	unsigned char token_hash[32]; /* SHA-256 of the token; the token itself is wiped */

	/* runtime */
	int listen_fd;
	struct MHD_Daemon *mhd;
	struct upstream_pool upstream; /* connections to the agent */
	atomic_uint inflight; /* requests holding a concurrency slot */
	/* requests waiting for a slot, first come first served (http.c
	 * slot_acquire): at most max_queue, each at most queue_timeout_ms,
	 * then 429 */
	pthread_mutex_t slot_lock;
	struct slot_waiter *slot_head, *slot_tail;
	unsigned queued, max_queue, queue_timeout_ms;
	atomic_uint active;   /* every request from headers to completion (drain) */
	atomic_bool draining;
	_Atomic uint64_t last_activity; /* now_ns() of the last request other than /health */

	/* http.c: header deadline (see conn_watchdog) */
	pthread_mutex_t conns_lock;
	pthread_cond_t conns_cond;
	struct conn_state *conns;
	pthread_t watchdog;
	bool watchdog_started, watchdog_stop;
	uint64_t watchdog_wake; /* the watchdog's next wake-up (ns; 0: none, it waits to be told) */

	/* tls.c */
	void *ssl_ctx; /* SSL_CTX * */
	pthread_t acceptor;
	bool acceptor_started;
	int stop_efd;       /* eventfd: wakes the acceptor at shutdown */
	int conns_stop_efd; /* eventfd: ends the connections' pumps (http_stop) */
	atomic_uint tls_threads;
	pthread_mutex_t mhd_lock; /* a connection's daemon vs. http_stop */
	/* set by http_start (TLS mode): a connection's own HTTP layer, with
	 * the handler and options of the shim's; tls.c runs it on the
	 * connection's thread (MHD_run, its epoll fd, its timeout). NULL on
	 * failure. (http.c calls into tls.c, never the other way.) */
	struct MHD_Daemon *(*conn_daemon)(struct shim *s);
	bool mhd_stopping;
	/* One entry per TLS connection, from accept to the end of its thread:
	 * the per-peer limits count them, and, as MHD only sees a socketpair
	 * in TLS mode, they map MHD's end of it to the TCP peer (log line,
	 * accept time for the header deadline, what the pump saw). */
	pthread_mutex_t peers_lock;
	struct peer_entry *peers; /* max_connections entries */
};

struct peer_entry {
	const void *owner; /* the connection; NULL = free */
	int fd;            /* MHD's end of the socketpair; -1 = not (or no longer) MHD's */
	unsigned char key[16]; /* the peer for the limits: IPv4 as ::ffff:a.b.c.d, IPv6 its /64 */
	bool pending;      /* its first request's headers have not reached the handler yet */
	bool nul_seen;     /* the pump saw a NUL byte in the client's plaintext */
	uint64_t accepted; /* now_ns() at accept */
	char addr[SHIM_ADDR_MAX];
};

/* ---- secrets.c: /exec's secret_env ---------------------------------------- */
/* A /configure succeeded: its secret_names are the grants from now on. */
void secrets_configured(const char *body, size_t len);
/* The /exec body with secret_env resolved into "secrets" (malloc'd);
 * -EINVAL (*bad_field set) when secret_env is not an object of strings. */
int secrets_rewrite_exec(const char *dir, const char *body, size_t len, char **out, size_t *outlen,
			 const char **bad_field);

/* ---- backend.c: /tool-call to $BACKEND_URL -------------------------------- */
struct cJSON;
/* Always a JSON text (malloc'd): the backend's answer or {"error": ...};
 * NULL only when out of memory. */
char *backend_tool_call(const char *tool_name, const struct cJSON *arguments, const char *session_id);

/* ---- wspty.c: the /pty WebSocket ------------------------------------------- */
/* The state of one terminal (rows, cols: its first size), for
 * MHD_create_response_for_upgrade's callback wspty_upgraded; discarded
 * with wspty_discard when the upgrade response could not be queued. */
void *wspty_prepare(struct shim *s, unsigned rows, unsigned cols);
void wspty_discard(void *w);
void wspty_upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in, size_t extra_in_size,
		    MHD_socket sock, struct MHD_UpgradeResponseHandle *urh);

int http_start(struct shim *s);
/* Stop accepting; returns once no new connection can arrive. */
void http_quiesce(struct shim *s);
void http_stop(struct shim *s);

int tls_init(struct shim *s, const char *cert_path, const char *key_path);
int tls_start(struct shim *s);
void tls_stop_accepting(struct shim *s);
/* Wait (bounded) for the TLS connection threads to finish. */
void tls_wait(struct shim *s, unsigned timeout_ms);
void tls_done(struct shim *s);
/* TLS mode, on a connection's thread, a handler about to wait: what MHD
 * wrote so far is sent on to the client, and the client's TCP socket is
 * returned (its hang-up shows there, as the pump is not running); -2 when
 * the client is gone or does not read; -1 on any other thread. */
int tls_wait_fd(void);
/* Peer address of the connection whose MHD-side socket is fd ("unknown"). */
void tls_peer_lookup(struct shim *s, int fd, char *buf, size_t size);
/* When the connection whose MHD-side socket is fd was accepted (0: unknown). */
uint64_t tls_conn_accepted(struct shim *s, int fd);
/* A request's headers reached the handler: the connection is no longer
 * half-open. Returns true if the pump saw a NUL byte in what the client
 * sent on this connection (also unknown fds: fail closed). */
bool tls_conn_request(struct shim *s, int fd);
