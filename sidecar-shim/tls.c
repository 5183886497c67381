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
 *     end given to the connection's own MHD daemon with
 *     MHD_add_connection(), and the thread pumps plaintext between
 *     SSL_read/SSL_write and the other end, and runs that daemon itself
 *     (external polling, see pump()): TLS and HTTP on one thread, no
 *     wake-up of another between them.
 *
 * Alternatives rejected: (a) MHD's GnuTLS HTTPS — second TLS stack, not
 * OpenSSL; (b) an external-select MHD loop driving memory BIOs — MHD 0.9.x
 * has no API to feed it bytes, only sockets; (c) a hand-written HTTP parser
 * on top of OpenSSL — exactly what STYLE.md tells us not to do. The cost of
 * the chosen shape is one socketpair and one small daemon (its epoll fd and
 * its eventfd) per connection, bounded by max_connections; HTTP timeouts
 * stay with MHD (its connection timeout sees the socketpair go idle exactly
 * as it would see the TCP socket), and the pump adds its own timeout only
 * where MHD cannot see: the handshake, and a client that stops reading its
 * response.
 *
 * The pump never parses anything: bytes in, bytes out; it only notes a NUL
 * byte in what the client sends (see step_in()). The acceptor enforces the
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
	s->conns_stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->conns_stop_efd < 0)
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

/* ---- the pump ------------------------------------------------------------
 *
 * One thread per connection moves bytes between the TLS connection and
 * MHD's end of the socketpair, and runs that connection's own MHD daemon
 * (external polling: MHD_run, its epoll fd, its timeout) on the same
 * thread. A request so costs no wake-up of another thread between TLS and
 * HTTP: the bytes the pump writes are read by MHD_run on this thread, and
 * the answer MHD writes is read back by the pump right after.
 *
 * A handler runs inside MHD_run and may wait (for the agent): while it
 * does, the pump does not run. So before a wait, http.c calls
 * tls_wait_fd(): what MHD wrote so far goes to the client first (a
 * streamed line must not wait for the next one), and the client's hang-up
 * is watched on its TCP socket, the one place it shows while the pump is
 * not reading. */
struct pump {
	struct shim *s;
	struct peer_entry *pe;
	SSL *ssl;
	int tcp, app;
	struct MHD_Daemon *d;
	int mhd_fd; /* the daemon's epoll fd */
	char *c2s, *s2c;
	size_t c2s_len, c2s_off, s2c_len, s2c_off;
	bool client_eof, app_eof, nul, answered;
	/* a side read dry (a read found nothing, or took all there was): not
	 * read again until poll says it is readable (poll is level-triggered:
	 * bytes that came since wake it at once). OpenSSL holds no whole
	 * record back when it wants to read; what it holds besides, read
	 * ahead, SSL_has_pending tells. */
	bool tcp_dry, app_dry;
	bool mhd_due; /* MHD_run before the next poll: bytes for it, or its poll's turn */
	uint64_t out_since, out_timeout;
};

static __thread struct pump *current_pump;

enum { STEP_IDLE = 0, STEP_PROGRESS = 1, STEP_END = -1 };

/* client -> MHD */
static int step_in(struct pump *p, short *tcp_ev, short *app_ev)
{
	int progress = STEP_IDLE;
	if (!p->client_eof && p->c2s_len == 0 && p->tcp_dry) {
		*tcp_ev |= POLLIN;
	} else if (!p->client_eof && p->c2s_len == 0) {
		ERR_clear_error();
		int n = SSL_read(p->ssl, p->c2s, PUMP_BUF);
		if (n > 0) {
			p->c2s_len = (size_t)n;
			p->c2s_off = 0;
			progress = STEP_PROGRESS;
			/* read on without poll only while OpenSSL holds more */
			p->tcp_dry = !SSL_has_pending(p->ssl);
			/* The one look at the bytes: no request the shim serves
			 * holds a NUL (not a header, not a JSON body, not chunk
			 * framing), and MHD would silently cut a header value
			 * at one. Flagged before MHD can see the byte; the
			 * handler refuses the request (400). */
			if (!p->nul && memchr(p->c2s, 0, p->c2s_len)) {
				p->nul = true;
				peer_saw_nul(p->s, p->pe);
			}
		} else {
			switch (SSL_get_error(p->ssl, n)) {
			case SSL_ERROR_WANT_READ:
				*tcp_ev |= POLLIN;
				p->tcp_dry = true;
				break;
			case SSL_ERROR_WANT_WRITE:
				*tcp_ev |= POLLOUT;
				break;
			case SSL_ERROR_ZERO_RETURN:
				/* close_notify: the client may still read. */
				p->client_eof = true;
				progress = STEP_PROGRESS;
				shutdown(p->app, SHUT_WR);
				p->mhd_due = true;
				break;
			default:
				return STEP_END; /* reset, unexpected EOF, TLS error */
			}
		}
	}
	if (p->c2s_len > 0) {
		ssize_t w = send(p->app, p->c2s + p->c2s_off, p->c2s_len - p->c2s_off, MSG_NOSIGNAL);
		if (w > 0) {
			p->c2s_off += (size_t)w;
			if (p->c2s_off == p->c2s_len)
				p->c2s_len = p->c2s_off = 0;
			progress = STEP_PROGRESS;
			p->mhd_due = true;
		} else if (w < 0 && errno == EAGAIN) {
			*app_ev |= POLLOUT;
		} else if (!(w < 0 && errno == EINTR)) {
			/* MHD stopped reading: drop the rest of the input. */
			p->c2s_len = p->c2s_off = 0;
			p->client_eof = true;
			progress = STEP_PROGRESS;
		} else {
			progress = STEP_PROGRESS;
		}
	}
	return progress;
}

/* MHD -> client */
static int step_out(struct pump *p, short *tcp_ev, short *app_ev)
{
	int progress = STEP_IDLE;
	if (!p->app_eof && p->s2c_len == 0 && p->app_dry) {
		*app_ev |= POLLIN;
	} else if (!p->app_eof && p->s2c_len == 0) {
		ssize_t n = recv(p->app, p->s2c, PUMP_BUF, 0);
		if (n > 0) {
			p->s2c_len = (size_t)n;
			p->s2c_off = 0;
			progress = STEP_PROGRESS;
			p->app_dry = n < (ssize_t)PUMP_BUF; /* a short read emptied the socket */
		} else if (n < 0 && errno == EAGAIN) {
			*app_ev |= POLLIN;
			p->app_dry = true;
		} else if (!(n < 0 && errno == EINTR)) {
			p->app_eof = true;
			progress = STEP_PROGRESS;
		}
	}
	if (p->s2c_len > 0) {
		ERR_clear_error();
		int w = SSL_write(p->ssl, p->s2c + p->s2c_off, (int)(p->s2c_len - p->s2c_off));
		if (w > 0) {
			p->s2c_off += (size_t)w;
			if (p->s2c_off == p->s2c_len)
				p->s2c_len = p->s2c_off = 0;
			progress = STEP_PROGRESS;
			p->answered = true;
		} else {
			switch (SSL_get_error(p->ssl, w)) {
			case SSL_ERROR_WANT_WRITE:
				*tcp_ev |= POLLOUT;
				break;
			case SSL_ERROR_WANT_READ:
				*tcp_ev |= POLLIN;
				break;
			default:
				return STEP_END; /* client gone */
			}
		}
	}
	return progress;
}

/* What MHD wrote so far, sent on to the client (a handler about to wait):
 * false when the client is gone, or did not read it within conn_timeout. */
static bool pump_flush(struct pump *p)
{
	p->app_dry = false; /* MHD wrote on this thread, no poll saw it */
	uint64_t since = now_ns();
	for (;;) {
		short tcp_ev = 0, app_ev = 0;
		int r = step_out(p, &tcp_ev, &app_ev);
		if (r == STEP_END)
			return false;
		if (r == STEP_PROGRESS) {
			since = now_ns();
			continue;
		}
		if (p->s2c_len == 0)
			return true; /* nothing left to send: MHD's end read dry, or closed */
		uint64_t now = now_ns();
		if (now - since >= p->out_timeout)
			return false;
		if (poll_one(p->tcp, tcp_ev, (int)((since + p->out_timeout - now) / 1000000ull) + 1) < 0)
			return false;
	}
}

int tls_wait_fd(void)
{
	struct pump *p = current_pump;
	if (!p)
		return -1;
	return pump_flush(p) ? p->tcp : -2;
}

/* Move bytes between the TLS connection and MHD's end of the socketpair,
 * and run MHD, until MHD closes its end (and what it wrote reached the
 * client), the client goes away, the client stops reading for
 * conn_timeout, or the shim stops. */
static void pump(struct pump *p)
{
	struct shim *s = p->s;
	p->out_since = now_ns();
	for (;;) {
		short tcp_ev = 0, app_ev = 0;
		int r = step_in(p, &tcp_ev, &app_ev);
		if (r == STEP_END)
			return;
		bool progress = r == STEP_PROGRESS;
		if (p->mhd_due) {
			/* the handlers run here */
			p->mhd_due = false;
			MHD_run(p->d);
			p->app_dry = false;
		}
		r = step_out(p, &tcp_ev, &app_ev);
		if (r == STEP_END)
			return;
		progress = progress || r == STEP_PROGRESS;

		if (p->app_eof && p->s2c_len == 0) {
			ERR_clear_error();
			SSL_shutdown(p->ssl); /* best effort close_notify, never waits */
			/* No answer to protect (a header deadline, say): close now,
			 * the connection's slot is free at once. */
			linger(p->tcp, p->client_eof || !p->answered);
			return;
		}
		uint64_t now = now_ns();
		if (p->s2c_len == 0 || progress)
			p->out_since = now;
		if (progress)
			continue;

		/* Blocked. MHD times out idle and slow request senders itself (it
		 * sees the socketpair go quiet; its timeout bounds the wait);
		 * only a client that does not read its answer is ours to time
		 * out. */
		int timeout_ms = -1;
		if (p->s2c_len > 0) {
			if (now - p->out_since >= p->out_timeout)
				return;
			timeout_ms = (int)((p->out_since + p->out_timeout - now) / 1000000ull) + 1;
		}
		MHD_UNSIGNED_LONG_LONG mt;
		if (MHD_get_timeout(p->d, &mt) == MHD_YES && (timeout_ms < 0 || mt < (MHD_UNSIGNED_LONG_LONG)timeout_ms))
			timeout_ms = mt > INT_MAX ? INT_MAX : (int)mt;
		/* fd -1: poll ignores it, so a hung-up socket we are not waiting
		 * on cannot make poll return at once forever. */
		struct pollfd pf[4] = {
			{ .fd = tcp_ev ? p->tcp : -1, .events = tcp_ev },
			{ .fd = app_ev ? p->app : -1, .events = app_ev },
			{ .fd = p->mhd_fd, .events = POLLIN },
			{ .fd = s->conns_stop_efd, .events = POLLIN },
		};
		if (poll(pf, 4, timeout_ms) < 0 && errno != EINTR)
			return;
		if (pf[3].revents)
			return; /* the shim stops: no request is in flight */
		/* any event (data, a hang-up, an error): the next read says which */
		if (pf[0].revents)
			p->tcp_dry = false;
		if (pf[1].revents)
			p->app_dry = false;
		/* MHD_run after every poll: its socket's events, its timeouts */
		p->mhd_due = true;
	}
}

/* The connection's daemon goes once it holds no connection: MHD's end sees
 * ours closed (a request's end is logged as MHD saw it), and an upgraded
 * connection's relay thread (wspty.c) sees the same, ends, and hands the
 * connection back (MHD_upgrade_action, which wakes the daemon's epoll fd).
 * Stopping the daemon under a relay still using it would free what that
 * thread holds. */
static void daemon_end(struct pump *p)
{
	for (;;) {
		MHD_run(p->d);
		const union MHD_DaemonInfo *di = MHD_get_daemon_info(p->d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
		if (!di || di->num_connections == 0)
			break;
		MHD_UNSIGNED_LONG_LONG mt = 100;
		if (MHD_get_timeout(p->d, &mt) != MHD_YES || mt > 100)
			mt = 100;
		poll_one(p->mhd_fd, POLLIN, (int)mt);
	}
	MHD_stop_daemon(p->d);
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
	/* This connection's own MHD (pump() runs it). It owns (and closes)
	 * sp[1] from MHD_add_connection on, also on failure. It is told the
	 * truth, an AF_UNIX socket, and the peer's address is logged here
	 * instead. (libmicrohttpd 0.9.75 ignores the address family: it still
	 * tries TCP_NODELAY and TCP_CORK before every response, two failed
	 * setsockopt calls, EOPNOTSUPP, which log.c keeps at debug level.) */
	static const struct sockaddr_un unix_peer = { .sun_family = AF_UNIX };
	struct pump p = { .s = s, .pe = cn->entry, .ssl = ssl, .tcp = fd, .app = app, .mhd_fd = -1,
			  .out_timeout = (uint64_t)s->conn_timeout * 1000000000ull };
	pthread_mutex_lock(&s->mhd_lock);
	p.d = s->mhd_stopping || !s->conn_daemon ? NULL : s->conn_daemon(s);
	pthread_mutex_unlock(&s->mhd_lock);
	const union MHD_DaemonInfo *di = p.d ? MHD_get_daemon_info(p.d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
	p.c2s = malloc(PUMP_BUF);
	p.s2c = malloc(PUMP_BUF);
	enum MHD_Result ok = MHD_NO;
	if (di && p.c2s && p.s2c) {
		p.mhd_fd = di->epoll_fd;
		peer_set_fd(s, cn->entry, sp[1]);
		ok = MHD_add_connection(p.d, sp[1], (const struct sockaddr *)&unix_peer, (socklen_t)sizeof(sa_family_t));
	} else {
		close(sp[1]);
	}
	if (ok != MHD_YES) {
		log_warn("connection refused by the HTTP layer", LS("peer", peer));
		goto done;
	}
	uint64_t t0 = now_ns();
	current_pump = &p;
	pump(&p);
	current_pump = NULL;
	log_debug("tls connection closed", LS("peer", peer), LI("duration_ms", (now_ns() - t0) / 1000000ull));
done:
	closep(&app);
	if (p.d)
		daemon_end(&p);
	free(p.c2s);
	free(p.s2c);
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
	/* (conns_stop_efd stays: a pump still running polls it) */
	if (s->peers && atomic_load(&s->tls_threads) == 0) {
		free(s->peers);
		s->peers = NULL;
	}
}
