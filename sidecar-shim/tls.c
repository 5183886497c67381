/* SPDX-License-Identifier: Apache-2.0 */
/* TLS termination for boxkite-shim: OpenSSL in front of libmicrohttpd.
 *
 * Why this shape. Debian's libmicrohttpd 0.9.75 does its own HTTPS only
 * through GnuTLS; the project's TLS stack is OpenSSL (TLS 1.3 only, one
 * library to audit, the same SPKI pin tooling as boxkitectl). libmicrohttpd
 * has no hook to plug another TLS library into a connection, but it can be
 * handed an already-connected socket (MHD_add_connection) and told not to
 * listen itself (MHD_USE_NO_LISTEN_SOCKET). So:
 *
 *   acceptor thread: accept4() on our TCP socket; at most max_connections
 *     connection threads exist (over that, the connection is closed at
 *     once).
 *   connection thread: SSL_accept() with a handshake deadline (a client
 *     that connects and says nothing, or sends plaintext HTTP, is closed
 *     without any HTTP byte); then a socketpair(AF_UNIX, SOCK_STREAM), one
 *     end given to MHD with MHD_add_connection(), and the thread pumps
 *     plaintext between SSL_read/SSL_write and the other end.
 *
 * Alternatives rejected: (a) MHD's GnuTLS HTTPS — second TLS stack, not
 * OpenSSL; (b) an external-select MHD loop driving memory BIOs — MHD 0.9.x
 * has no API to feed it bytes, only sockets; (c) a hand-written HTTP parser
 * on top of OpenSSL — exactly what STYLE.md tells us not to do. The cost of
 * the chosen shape is one extra thread and one socketpair per connection,
 * both bounded by max_connections; HTTP timeouts stay with MHD (its
 * connection timeout sees the socketpair go idle exactly as it would see
 * the TCP socket), and the pump adds its own timeout only where MHD cannot
 * see: the handshake, and a client that stops reading its response.
 *
 * The pump never parses anything: bytes in, bytes out; it only notes a NUL
 * byte in what the client sends (see pump()). The acceptor enforces the
 * per-peer limits (see peer_admit()). */
#include "shim.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/un.h>

#define PUMP_BUF (16u * 1024u)

struct conn {
	struct shim *s;
	int fd;
	struct sockaddr_storage peer;
	socklen_t peer_len;
	struct peer_entry *entry; /* in s->peers, held until the thread ends */
	char addr[SHIM_ADDR_MAX];
};

static int no_passphrase(char *buf, int size, int rwflag, void *u) { return 0; }

/* Offer only HTTP/1.1 (libmicrohttpd speaks nothing else); a client that
 * does not offer it gets no ALPN answer and falls back to HTTP/1.1. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";
	unsigned char *o = NULL;
	if (SSL_select_next_proto(&o, outlen, h11, sizeof(h11) - 1, in, inlen) == OPENSSL_NPN_NEGOTIATED) {
		*out = o;
		return SSL_TLSEXT_ERR_OK;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

static const char *ssl_reason(void)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	return r ? r : "unknown";
}

int tls_init(struct shim *s, const char *cert_path, const char *key_path)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx) {
		log_error("cannot create TLS context", LS("reason", ssl_reason()));
		return -ENOMEM;
	}
	/* TLS 1.3 only; no tickets, no session cache (clients pin the key and
	 * reconnect rarely; resumption state would be one more secret). */
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) || !SSL_CTX_set_num_tickets(ctx, 0)) {
		log_error("cannot restrict TLS to version 1.3", LS("reason", ssl_reason()));
		SSL_CTX_free(ctx);
		return -EINVAL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
				      SSL_MODE_RELEASE_BUFFERS);
	/* a record's header and body in one read, not two (the pump asks
	 * SSL_has_pending for what is read ahead) */
	SSL_CTX_set_read_ahead(ctx, 1);
	/* An encrypted key must fail at start-up, never prompt on a tty. */
	SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
	/* Paths are deliberately not logged (they name the pod's secret). */
	if (SSL_CTX_use_certificate_chain_file(ctx, cert_path) != 1) {
		log_error("cannot load the TLS certificate named by SIDECAR_TLS_CERT (neither it nor SIDECAR_TLS_KEY set: " SHIM_DEFAULT_TLS_DIR "/tls.crt)", LS("reason", ssl_reason()));
		SSL_CTX_free(ctx);
		return -EINVAL;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key_path, SSL_FILETYPE_PEM) != 1) {
		/* OpenSSL checks the key against the certificate while loading. */
		if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
			log_error("TLS key (SIDECAR_TLS_KEY) does not match the certificate (SIDECAR_TLS_CERT)");
		else
			log_error("cannot load the TLS key named by SIDECAR_TLS_KEY (neither it nor SIDECAR_TLS_CERT set: " SHIM_DEFAULT_TLS_DIR "/tls.key)", LS("reason", ssl_reason()));
		SSL_CTX_free(ctx);
		return -EINVAL;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		log_error("TLS key does not match the certificate", LS("reason", ssl_reason()));
		SSL_CTX_free(ctx);
		return -EINVAL;
	}
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	ERR_clear_error();
	s->peers = calloc(s->max_connections, sizeof(*s->peers));
	if (!s->peers) {
		SSL_CTX_free(ctx);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < s->max_connections; i++)
		s->peers[i].fd = -1;
	s->ssl_ctx = ctx;
	s->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->stop_efd < 0)
		return -errno;
	return 0;
}

/* ---- the connection table: per-peer limits and MHD fd -> peer ------------
 *
 * Each connection holds one entry from accept to the end of its thread.
 * At accept, the entries of the same peer are counted: over
 * max_per_peer open ones, or max_pending_per_peer half-open ones (still in
 * the TLS handshake or before their first request's headers), the new
 * connection is closed at once, before it costs a thread. A peer is an IPv4
 * address or an IPv6 /64 (one host commonly owns a whole /64).
 *
 * fd numbers are reused: MHD closes its end of a socketpair before our
 * thread notices and releases its entry, and the number may already belong
 * to a newer connection. So setting an fd clears it from any other entry,
 * and lookups by fd only ever find the newest owner. */
static void peer_key(const struct sockaddr_storage *ss, unsigned char key[16])
{
	memset(key, 0, 16);
	if (ss->ss_family == AF_INET) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a))
			memcpy(key, a, 16); /* the IPv4 peer, as above */
		else
			memcpy(key, a, 8); /* its /64 */
	}
}

/* Take an entry for a new connection; NULL when the peer is over a limit
 * (*why says which). */
static struct peer_entry *peer_admit(struct shim *s, const struct conn *cn, const char *addr, const char **why)
{
	unsigned char key[16];
	peer_key(&cn->peer, key);
	unsigned open = 0, pending = 0;
	struct peer_entry *slot = NULL;
	pthread_mutex_lock(&s->peers_lock);
	for (unsigned i = 0; i < s->max_connections; i++) {
		struct peer_entry *p = &s->peers[i];
		if (!p->owner) {
			if (!slot)
				slot = p;
			continue;
		}
		if (memcmp(p->key, key, sizeof(key)) == 0) {
			open++;
			pending += p->pending;
		}
	}
	*why = open >= s->max_per_peer		 ? "connections"
	       : pending >= s->max_pending_per_peer ? "half_open"
	       : !slot				 ? "table_full"
						 : NULL;
	if (!*why) {
		slot->owner = cn;
		slot->fd = -1;
		memcpy(slot->key, key, sizeof(key));
		slot->pending = true;
		slot->nul_seen = false;
		slot->accepted = now_ns();
		snprintf(slot->addr, sizeof(slot->addr), "%s", addr);
	}
	pthread_mutex_unlock(&s->peers_lock);
	return *why ? NULL : slot;
}

static void peer_set_fd(struct shim *s, struct peer_entry *e, int fd)
{
	pthread_mutex_lock(&s->peers_lock);
	for (unsigned i = 0; i < s->max_connections; i++)
		if (s->peers[i].fd == fd)
			s->peers[i].fd = -1;
	e->fd = fd;
	pthread_mutex_unlock(&s->peers_lock);
}

static void peer_release(struct shim *s, struct peer_entry *e)
{
	pthread_mutex_lock(&s->peers_lock);
	e->owner = NULL;
	e->fd = -1;
	e->pending = false;
	pthread_mutex_unlock(&s->peers_lock);
}

static void peer_saw_nul(struct shim *s, struct peer_entry *e)
{
	pthread_mutex_lock(&s->peers_lock);
	e->nul_seen = true;
	pthread_mutex_unlock(&s->peers_lock);
}

static struct peer_entry *peer_by_fd(struct shim *s, int fd)
{
	for (unsigned i = 0; fd >= 0 && i < s->max_connections; i++)
		if (s->peers[i].owner && s->peers[i].fd == fd)
			return &s->peers[i];
	return NULL;
}

void tls_peer_lookup(struct shim *s, int fd, char *buf, size_t size)
{
	snprintf(buf, size, "unknown");
	if (!s->peers)
		return;
	pthread_mutex_lock(&s->peers_lock);
	struct peer_entry *e = peer_by_fd(s, fd);
	if (e)
		snprintf(buf, size, "%s", e->addr);
	pthread_mutex_unlock(&s->peers_lock);
}

uint64_t tls_conn_accepted(struct shim *s, int fd)
{
	if (!s->peers)
		return 0;
	pthread_mutex_lock(&s->peers_lock);
	struct peer_entry *e = peer_by_fd(s, fd);
	uint64_t t = e ? e->accepted : 0;
	pthread_mutex_unlock(&s->peers_lock);
	return t;
}

bool tls_conn_request(struct shim *s, int fd)
{
	if (!s->peers)
		return true;
	pthread_mutex_lock(&s->peers_lock);
	struct peer_entry *e = peer_by_fd(s, fd);
	bool nul = !e || e->nul_seen;
	if (e)
		e->pending = false;
	pthread_mutex_unlock(&s->peers_lock);
	return nul;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int poll_one(int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int r = poll(&p, 1, timeout_ms);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	return r;
}

/* The handshake is part of the header deadline: both are counted from
 * accept (http.c goes on with what is left of it). */
static int handshake(struct shim *s, SSL *ssl, int fd, uint64_t accepted)
{
	uint64_t deadline = accepted + (uint64_t)s->header_timeout * 1000000000ull;
	for (;;) {
		ERR_clear_error();
		int r = SSL_accept(ssl);
		if (r == 1)
			return 0;
		short ev;
		switch (SSL_get_error(ssl, r)) {
		case SSL_ERROR_WANT_READ:
			ev = POLLIN;
			break;
		case SSL_ERROR_WANT_WRITE:
			ev = POLLOUT;
			break;
		default:
			return -EPROTO;
		}
		uint64_t now = now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		int p = poll_one(fd, ev, (int)((deadline - now) / 1000000ull) + 1);
		if (p < 0)
			return p;
	}
}

/* Lingering close. MHD closes right after an early answer (401, 413, 431)
 * while the client may still be sending the body or a huge header; closing
 * a TCP socket with unread input sends RST, and the RST can destroy the
 * answer before the client read it. So: FIN first, then read and discard
 * for a short, bounded while (as Apache and nginx do). */
#define LINGER_MS 2000
#define LINGER_BYTES (4u * 1024u * 1024u)
static void linger(int tcp, bool client_eof)
{
	if (shutdown(tcp, SHUT_WR) < 0 || client_eof)
		return;
	char buf[4096];
	uint64_t deadline = now_ns() + LINGER_MS * 1000000ull;
	size_t total = 0;
	for (;;) {
		uint64_t now = now_ns();
		if (now >= deadline || total > LINGER_BYTES)
			return;
		if (poll_one(tcp, POLLIN, (int)((deadline - now) / 1000000ull) + 1) < 0)
			return;
		ssize_t n = recv(tcp, buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return;
		if (n > 0)
			total += (size_t)n;
	}
}

/* Move bytes between the TLS connection and MHD's end of the socketpair
 * until MHD closes its end (and what it wrote reached the client), the
 * client goes away, or the client stops reading for conn_timeout. */
static void pump(struct shim *s, struct peer_entry *pe, SSL *ssl, int tcp, int app)
{
	bool nul = false, answered = false;
	_cleanup_free_ char *c2s = malloc(PUMP_BUF);
	_cleanup_free_ char *s2c = malloc(PUMP_BUF);
	if (!c2s || !s2c)
		return;
	size_t c2s_len = 0, c2s_off = 0, s2c_len = 0, s2c_off = 0;
	bool client_eof = false, app_eof = false;
	const uint64_t out_timeout = (uint64_t)s->conn_timeout * 1000000000ull;
	uint64_t out_since = now_ns();
	/* a side read dry (a read found nothing, or took all there was): not
	 * read again until poll says it is readable (poll is level-triggered:
	 * bytes that came since wake it at once). OpenSSL holds no whole
	 * record back when it wants to read; what it holds besides, read
	 * ahead, SSL_has_pending tells. */
	bool tcp_dry = false, app_dry = false;

	for (;;) {
		short tcp_ev = 0, app_ev = 0;
		bool progress = false;

		/* client -> MHD */
		if (!client_eof && c2s_len == 0 && tcp_dry) {
			tcp_ev |= POLLIN;
		} else if (!client_eof && c2s_len == 0) {
			ERR_clear_error();
			int n = SSL_read(ssl, c2s, PUMP_BUF);
			if (n > 0) {
				c2s_len = (size_t)n;
				c2s_off = 0;
				progress = true;
				/* read on without poll only while OpenSSL holds more */
				tcp_dry = !SSL_has_pending(ssl);
				/* The one look at the bytes: no request the shim serves
				 * holds a NUL (not a header, not a JSON body, not chunk
				 * framing), and MHD would silently cut a header value
				 * at one. Flagged before MHD can see the byte; the
				 * handler refuses the request (400). */
				if (!nul && memchr(c2s, 0, c2s_len)) {
					nul = true;
					peer_saw_nul(s, pe);
				}
			} else {
				switch (SSL_get_error(ssl, n)) {
				case SSL_ERROR_WANT_READ:
					tcp_ev |= POLLIN;
					tcp_dry = true;
					break;
				case SSL_ERROR_WANT_WRITE:
					tcp_ev |= POLLOUT;
					break;
				case SSL_ERROR_ZERO_RETURN:
					/* close_notify: the client may still read. */
					client_eof = true;
					progress = true;
					shutdown(app, SHUT_WR);
					break;
				default:
					return; /* reset, unexpected EOF, TLS error */
				}
			}
		}
		if (c2s_len > 0) {
			ssize_t w = send(app, c2s + c2s_off, c2s_len - c2s_off, MSG_NOSIGNAL);
			if (w > 0) {
				c2s_off += (size_t)w;
				if (c2s_off == c2s_len)
					c2s_len = c2s_off = 0;
				progress = true;
			} else if (w < 0 && errno == EAGAIN) {
				app_ev |= POLLOUT;
			} else if (!(w < 0 && errno == EINTR)) {
				/* MHD stopped reading: drop the rest of the input. */
				c2s_len = c2s_off = 0;
				client_eof = true;
				progress = true;
			} else {
				progress = true;
			}
		}

		/* MHD -> client */
		if (!app_eof && s2c_len == 0 && app_dry) {
			app_ev |= POLLIN;
		} else if (!app_eof && s2c_len == 0) {
			ssize_t n = recv(app, s2c, PUMP_BUF, 0);
			if (n > 0) {
				s2c_len = (size_t)n;
				s2c_off = 0;
				progress = true;
				app_dry = n < (ssize_t)PUMP_BUF; /* a short read emptied the socket */
			} else if (n < 0 && errno == EAGAIN) {
				app_ev |= POLLIN;
				app_dry = true;
			} else if (!(n < 0 && errno == EINTR)) {
				app_eof = true;
				progress = true;
			}
		}
		if (s2c_len > 0) {
			ERR_clear_error();
			int w = SSL_write(ssl, s2c + s2c_off, (int)(s2c_len - s2c_off));
			if (w > 0) {
				s2c_off += (size_t)w;
				if (s2c_off == s2c_len)
					s2c_len = s2c_off = 0;
				progress = true;
				answered = true;
			} else {
				switch (SSL_get_error(ssl, w)) {
				case SSL_ERROR_WANT_WRITE:
					tcp_ev |= POLLOUT;
					break;
				case SSL_ERROR_WANT_READ:
					tcp_ev |= POLLIN;
					break;
				default:
					return; /* client gone */
				}
			}
		}

		if (app_eof && s2c_len == 0) {
			ERR_clear_error();
			SSL_shutdown(ssl); /* best effort close_notify, never waits */
			/* No answer to protect (a header deadline, say): close now,
			 * the connection's slot is free at once. */
			linger(tcp, client_eof || !answered);
			return;
		}
		uint64_t now = now_ns();
		if (s2c_len == 0 || progress)
			out_since = now;
		if (progress)
			continue;

		/* Blocked. MHD times out idle and slow request senders itself (it
		 * sees the socketpair go quiet); only a client that does not read
		 * its answer is ours to time out. Waiting for the agent (MHD busy
		 * in the handler, nothing pending) has no timeout here. */
		int timeout_ms = -1;
		if (s2c_len > 0) {
			if (now - out_since >= out_timeout)
				return;
			timeout_ms = (int)((out_since + out_timeout - now) / 1000000ull) + 1;
		}
		/* fd -1: poll ignores it, so a hung-up socket we are not waiting
		 * on cannot make poll return at once forever. */
		struct pollfd p[2] = {
			{ .fd = tcp_ev ? tcp : -1, .events = tcp_ev },
			{ .fd = app_ev ? app : -1, .events = app_ev },
		};
		if (poll(p, 2, timeout_ms) < 0 && errno != EINTR)
			return;
		/* any event (data, a hang-up, an error): the next read says which */
		if (p[0].revents)
			tcp_dry = false;
		if (p[1].revents)
			app_dry = false;
	}
}

static void *conn_main(void *arg)
{
	_cleanup_free_ struct conn *cn = arg;
	struct shim *s = cn->s;
	_cleanup_close_ int fd = cn->fd;
	_cleanup_close_ int app = -1;
	const char *peer = cn->addr;

	SSL *ssl = SSL_new(s->ssl_ctx);
	if (!ssl || SSL_set_fd(ssl, fd) != 1) {
		log_warn("cannot set up TLS for a connection", LS("peer", peer), LS("reason", ssl_reason()));
		goto out;
	}
	int e = handshake(s, ssl, fd, cn->entry->accepted);
	if (e < 0) {
		/* Plaintext HTTP, wrong version, scanners, slow clients: the
		 * connection is closed without a single HTTP byte. */
		static struct ratelimit rl = RATELIMIT_INIT(10);
		unsigned dropped;
		if (ratelimit_ok(&rl, &dropped))
			log_info("tls handshake failed", LS("peer", peer),
				 LS("reason", e == -ETIMEDOUT ? "timeout"
					      : e == -EPROTO ? ssl_reason()
							     : strerror(-e)),
				 LI("suppressed", dropped));
		goto out;
	}
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		log_warn("socketpair failed", LS("error", strerror(errno)));
		goto out;
	}
	app = sp[0];
	if (set_nonblock(app) < 0) {
		close(sp[1]);
		goto out;
	}
	pthread_mutex_lock(&s->mhd_lock);
	/* MHD owns (and closes) sp[1] from here, also on failure. It is told
	 * the truth, an AF_UNIX socket, and the peer's address is logged here
	 * instead. (libmicrohttpd 0.9.75 ignores the address family: it still
	 * tries TCP_NODELAY and TCP_CORK before every response, two failed
	 * setsockopt calls, EOPNOTSUPP, which log.c keeps at debug level.) */
	static const struct sockaddr_un unix_peer = { .sun_family = AF_UNIX };
	enum MHD_Result ok = MHD_NO;
	if (!s->mhd_stopping) {
		peer_set_fd(s, cn->entry, sp[1]);
		ok = MHD_add_connection(s->mhd, sp[1], (const struct sockaddr *)&unix_peer,
					(socklen_t)sizeof(sa_family_t));
	} else {
		close(sp[1]);
	}
	pthread_mutex_unlock(&s->mhd_lock);
	if (ok != MHD_YES) {
		log_warn("connection refused by the HTTP layer", LS("peer", peer));
		goto out;
	}
	uint64_t t0 = now_ns();
	pump(s, cn->entry, ssl, fd, app);
	log_debug("tls connection closed", LS("peer", peer), LI("duration_ms", (now_ns() - t0) / 1000000ull));
out:
	peer_release(s, cn->entry);
	ERR_clear_error();
	if (ssl)
		SSL_free(ssl);
	OPENSSL_thread_stop();
	atomic_fetch_sub(&s->tls_threads, 1);
	return NULL;
}

static void *acceptor_main(void *arg)
{
	struct shim *s = arg;
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = s->listen_fd, .events = POLLIN },
			{ .fd = s->stop_efd, .events = POLLIN },
		};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error("poll on the listening socket failed", LS("error", strerror(errno)));
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		if (!(p[0].revents & POLLIN))
			continue;
		struct conn *cn = calloc(1, sizeof(*cn));
		if (!cn) {
			usleep(100000);
			continue;
		}
		cn->s = s;
		cn->peer_len = sizeof(cn->peer);
		cn->fd = accept4(s->listen_fd, (struct sockaddr *)&cn->peer, &cn->peer_len, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (cn->fd < 0) {
			int err = errno;
			free(cn);
			if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
				static struct ratelimit rl = RATELIMIT_INIT(1);
				unsigned dropped;
				if (ratelimit_ok(&rl, &dropped))
					log_warn("accept failed; backing off", LS("error", strerror(err)),
						 LI("suppressed", dropped));
				usleep(100000);
			}
			continue;
		}
		if (atomic_fetch_add(&s->tls_threads, 1) >= s->max_connections) {
			atomic_fetch_sub(&s->tls_threads, 1);
			static struct ratelimit rl = RATELIMIT_INIT(1);
			unsigned dropped;
			if (ratelimit_ok(&rl, &dropped))
				log_warn("connection limit reached; closing new connections", LI("limit", s->max_connections),
					 LI("suppressed", dropped));
			close(cn->fd);
			free(cn);
			continue;
		}
		sockaddr_str((struct sockaddr *)&cn->peer, cn->peer_len, cn->addr, sizeof(cn->addr));
		const char *why;
		cn->entry = peer_admit(s, cn, cn->addr, &why);
		if (!cn->entry) {
			atomic_fetch_sub(&s->tls_threads, 1);
			static struct ratelimit rl = RATELIMIT_INIT(1);
			unsigned dropped;
			if (ratelimit_ok(&rl, &dropped))
				log_warn("per-peer connection limit reached; closing the new connection",
					 LS("peer", cn->addr), LS("limit", why), LI("max_per_peer", s->max_per_peer),
					 LI("max_pending_per_peer", s->max_pending_per_peer), LI("suppressed", dropped));
			close(cn->fd);
			free(cn);
			continue;
		}
		int one = 1;
		(void)setsockopt(cn->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		int e = thread_start_detached(conn_main, cn, SHIM_THREAD_STACK);
		if (e != 0) {
			log_warn("cannot start a connection thread", LS("error", strerror(e)));
			peer_release(s, cn->entry);
			atomic_fetch_sub(&s->tls_threads, 1);
			close(cn->fd);
			free(cn);
		}
	}
}

int tls_start(struct shim *s)
{
	int e = pthread_create(&s->acceptor, NULL, acceptor_main, s);
	if (e != 0)
		return -e;
	s->acceptor_started = true;
	return 0;
}

void tls_stop_accepting(struct shim *s)
{
	if (s->acceptor_started) {
		uint64_t one = 1;
		if (write(s->stop_efd, &one, sizeof(one)) < 0) {
			/* eventfd write cannot fail here short of a bug; the join
			 * below would hang, so do not join. */
			log_error("cannot wake the acceptor", LS("error", strerror(errno)));
		} else {
			pthread_join(s->acceptor, NULL);
		}
		s->acceptor_started = false;
	}
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		s->listen_fd = -1;
	}
}

void tls_wait(struct shim *s, unsigned timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	while (atomic_load(&s->tls_threads) > 0 && now_ns() < deadline)
		usleep(10000);
}

void tls_done(struct shim *s)
{
	if (!s->ssl_ctx)
		return;
	/* Connection threads still alive use the context: leave it to exit. */
	if (atomic_load(&s->tls_threads) == 0) {
		SSL_CTX_free(s->ssl_ctx);
		s->ssl_ctx = NULL;
	}
	if (s->stop_efd >= 0) {
		close(s->stop_efd);
		s->stop_efd = -1;
	}
	if (s->peers && atomic_load(&s->tls_threads) == 0) {
		free(s->peers);
		s->peers = NULL;
	}
}
