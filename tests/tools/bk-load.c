/* SPDX-License-Identifier: Apache-2.0 */
/* HTTPS load client for `make load` (scripts/load.sh).
 *
 *   bk-load URL PIN TOKEN_FILE N CONC [COMMAND] [LATENCY_FILE]
 *
 * CONC threads, each with one keep-alive TLS 1.3 connection to the shim,
 * send N POST /exec requests in total ({"command": COMMAND}, default "true").
 * The server's public key is pinned (PIN is curl's form,
 * "sha256//<base64 of the SPKI's SHA-256>"); nothing else about the
 * certificate is checked, as with the shim's other clients.
 *
 * A 429 (the shim's concurrency limit: a deliberate answer, not an error) is
 * counted and the same request retried after a short back-off, so N execs
 * are attempted in the end. Anything else is final: an exec is not
 * idempotent, so a transport error is counted and never retried.
 *
 * Prints one JSON object: n, ok (200 and exit_code 0), status counts,
 * transport errors, the latency of the final attempt (p50/p90/p99/max,
 * microseconds) and execs per second. The threads open their connections
 * first; the clock starts once all have (connect_s is that set-up, and
 * per_sec_with_connect the rate counting it) and stops when the last
 * request ends. With LATENCY_FILE, every final
 * latency in microseconds, one a line (for merging runs).
 *
 * Paired (BK_LOAD_ADMIN=ADMIN_SOCK and BK_LOAD_SANDBOX=NAME): after each
 * request, the same exec over the agent's admin socket, from the same
 * thread, so that the two ways are measured within milliseconds of each
 * other and the machine's drift falls on both alike (`make bench`'s shim
 * overhead). The JSON then also holds "admin" (n, errors, p50_us, p99_us,
 * mean_us, per_sec of those execs alone) and "pair_diff_p50_us" (the median
 * of each pair's HTTPS minus admin latency, over the pairs where both
 * succeeded); BK_LOAD_ADMIN_SAMPLES=FILE: the admin latencies in
 * microseconds, one a line. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "lib/proto.h"
#include "lib/util.h"

static struct {
	struct sockaddr_in addr;
	char host[64];
	char pin[128];
	char token[4096];
	char body[8192];
	char route[128]; /* BK_LOAD_ROUTE, default /exec */
	size_t body_len;
	const char *admin;     /* BK_LOAD_ADMIN: paired admin execs (NULL: none) */
	char admin_req[1024];
	int n;
	SSL_CTX *ctx;
} G;

static int next_req; /* atomically claimed request indexes */
static uint64_t *lat; /* final latency per request, ns (0: transport error) */
static int *status;   /* final status per request (0: transport error) */
static uint64_t *alat; /* paired: the admin exec's latency per request, ns (0: failed) */

struct stats {
	int s429, ok, exit_nonzero, transport, reconnects;
	int admin_errors;
	uint64_t t_last; /* when this thread's last request ended, ns */
	char first_error[512];
};

/* Every thread opens its connection before the clock starts: the rate is
 * of execs over open keep-alive connections, as a manager holds them; the
 * connections' set-up is timed apart (connect_s, per_sec_with_connect). */
static pthread_barrier_t opened;

static void note_error(struct stats *st, const char *fmt, const char *detail)
{
	if (!st->first_error[0])
		snprintf(st->first_error, sizeof(st->first_error), "%s: %.400s", fmt, detail);
}

/* curl's --pinnedpubkey: base64(sha256(DER SubjectPublicKeyInfo)) */
static bool pin_ok(SSL *ssl)
{
	X509 *cert = SSL_get1_peer_certificate(ssl);
	if (!cert)
		return false;
	unsigned char *der = NULL;
	int dl = i2d_PUBKEY(X509_get0_pubkey(cert), &der);
	X509_free(cert);
	if (dl <= 0)
		return false;
	unsigned char md[32];
	unsigned int ml = 0;
	bool ok = EVP_Digest(der, (size_t)dl, md, &ml, EVP_sha256(), NULL) == 1 && ml == 32;
	OPENSSL_free(der);
	if (!ok)
		return false;
	char b64[64];
	EVP_EncodeBlock((unsigned char *)b64, md, 32);
	return strcmp(G.pin + strlen("sha256//"), b64) == 0;
}

struct conn {
	int fd;
	SSL *ssl;
	char buf[1 << 20]; /* a /view answer of a 100 KB file fits */
	size_t have;
};

static void conn_close(struct conn *c)
{
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->have = 0;
}

static int conn_open(struct conn *c, struct stats *st)
{
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -1;
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct timeval tv = { .tv_sec = 60 };
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(c->fd, (struct sockaddr *)&G.addr, sizeof(G.addr)) < 0) {
		note_error(st, "connect", strerror(errno));
		conn_close(c);
		return -1;
	}
	c->ssl = SSL_new(G.ctx);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1 || SSL_connect(c->ssl) != 1) {
		note_error(st, "TLS handshake", ERR_reason_error_string(ERR_get_error()) ?: "failed");
		conn_close(c);
		return -1;
	}
	if (!pin_ok(c->ssl)) {
		note_error(st, "TLS", "the server's public key does not match the pin");
		conn_close(c);
		return -1;
	}
	return 0;
}

static int write_all(struct conn *c, const char *p, size_t n)
{
	while (n > 0) {
		int w = SSL_write(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int fill(struct conn *c)
{
	if (c->have == sizeof(c->buf))
		return -1;
	int r = SSL_read(c->ssl, c->buf + c->have, (int)(sizeof(c->buf) - c->have));
	if (r <= 0)
		return -1;
	c->have += (size_t)r;
	return 0;
}

/* One request/response on the connection. Returns the HTTP status (the
 * body's first bytes in bodyout) or -1 on a transport error; *keep is false
 * when the server closes the connection after this answer. */
static int round_trip(struct conn *c, const char *req, size_t reqlen, char *bodyout, size_t bodymax, bool *keep)
{
	if (write_all(c, req, reqlen) < 0)
		return -1;
	char *end;
	for (;;) {
		end = memmem(c->buf, c->have, "\r\n\r\n", 4);
		if (end)
			break;
		if (fill(c) < 0)
			return -1;
	}
	size_t hlen = (size_t)(end - c->buf) + 4;
	int code = 0;
	if (sscanf(c->buf, "HTTP/1.%*d %d", &code) != 1)
		return -1;
	long clen = -1;
	*keep = true;
	for (char *l = c->buf; l < end;) {
		char *nl = memmem(l, (size_t)(end - l) + 2, "\r\n", 2);
		if (!nl)
			break;
		if (strncasecmp(l, "Content-Length:", 15) == 0)
			clen = strtol(l + 15, NULL, 10);
		else if (strncasecmp(l, "Connection:", 11) == 0 && strcasestr(l, "close") && strcasestr(l, "close") < nl)
			*keep = false;
		l = nl + 2;
	}
	if (clen < 0 || (size_t)clen > sizeof(c->buf) - hlen)
		return -1; /* the answers to "true" are small */
	while (c->have < hlen + (size_t)clen)
		if (fill(c) < 0)
			return -1;
	size_t bl = (size_t)clen < bodymax - 1 ? (size_t)clen : bodymax - 1;
	memcpy(bodyout, c->buf + hlen, bl);
	bodyout[bl] = '\0';
	size_t used = hlen + (size_t)clen;
	memmove(c->buf, c->buf + used, c->have - used);
	c->have -= used;
	return code;
}

/* Paired: request i's exec again, over the admin socket (one connection
 * per thread, kept). A failure is counted, and its latency left 0. */
static void admin_exec(struct stats *st, int *afd, int i)
{
	if (*afd < 0 && (*afd = bk_connect(G.admin)) < 0) {
		st->admin_errors++;
		note_error(st, "admin socket", strerror(-*afd));
		*afd = -1;
		return;
	}
	char *resp = NULL;
	uint64_t t0 = now_ns();
	int r = bk_call(*afd, G.admin_req, strlen(G.admin_req), &resp, NULL);
	uint64_t dt = now_ns() - t0;
	if (r < 0 || !strstr(resp, "\"status\":200") || !strstr(resp, "\"exit_code\":0")) {
		st->admin_errors++;
		note_error(st, "admin exec", r < 0 ? strerror(-r) : resp);
		if (r < 0) {
			close(*afd);
			*afd = -1;
		}
	} else {
		alat[i] = dt;
	}
	free(resp);
}

static void *worker(void *arg)
{
	struct stats *st = arg;
	struct conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->fd = -1;
	char hdr[8192 + 512];
	int hl = snprintf(hdr, sizeof(hdr),
			  "POST %s HTTP/1.1\r\nHost: %s\r\nX-Sidecar-Auth-Token: %s\r\n"
			  "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
			  G.route, G.host, G.token, G.body_len, G.body);
	char body[1024];
	int afd = -1;
	(void)conn_open(c, st); /* on failure the first request tries again, and counts it */
	pthread_barrier_wait(&opened);
	for (;;) {
		int i = __atomic_fetch_add(&next_req, 1, __ATOMIC_RELAXED);
		if (i >= G.n)
			break;
		/* a 429: back off with jitter and retry (the shim reads the
		 * body first and keeps the connection; one it closes anyway is
		 * opened again) */
		unsigned seed = (unsigned)(i * 2654435761u);
		int backoff_us = 2000;
		for (;;) {
			if (c->fd < 0 && conn_open(c, st) < 0) {
				st->transport++;
				usleep(10000);
				break; /* this request failed; never retried */
			}
			uint64_t t0 = now_ns();
			bool keep = false;
			int code = round_trip(c, hdr, (size_t)hl, body, sizeof(body), &keep);
			uint64_t dt = now_ns() - t0;
			if (code < 0) {
				note_error(st, "transport", "connection closed or timed out mid-request");
				st->transport++;
				conn_close(c);
				st->reconnects++;
				break;
			}
			if (!keep) {
				conn_close(c);
				st->reconnects++;
			}
			if (code == 429) {
				st->s429++;
				usleep((useconds_t)(backoff_us + rand_r(&seed) % backoff_us));
				if (backoff_us < 50000)
					backoff_us *= 2;
				continue;
			}
			lat[i] = dt;
			status[i] = code;
			if (code == 200 && (strcmp(G.route, "/exec") || strstr(body, "\"exit_code\":0,")))
				st->ok++;
			else if (code == 200) {
				st->exit_nonzero++;
				note_error(st, "exit code", body);
			} else
				note_error(st, "HTTP error", body);
			break;
		}
		if (G.admin)
			admin_exec(st, &afd, i);
		st->t_last = now_ns();
	}
	if (afd >= 0)
		close(afd);
	conn_close(c);
	free(c);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

/* Paired: the admin execs' figures and the pairs' median difference, as
 * more fields of the JSON object being printed. False: out of memory or
 * the samples file not written. */
static bool admin_json(int errors)
{
	uint64_t *a = calloc((size_t)G.n, sizeof(*a));
	int64_t *d = calloc((size_t)G.n, sizeof(*d));
	if (!a || !d) {
		free(a);
		free(d);
		return false;
	}
	const char *sf = getenv("BK_LOAD_ADMIN_SAMPLES");
	FILE *f = sf && sf[0] ? fopen(sf, "w") : NULL;
	if (sf && sf[0] && !f) {
		fprintf(stderr, "bk-load: cannot write %s: %s\n", sf, strerror(errno));
		free(a);
		free(d);
		return false;
	}
	int na = 0, nd = 0;
	double sum = 0;
	for (int i = 0; i < G.n; i++) {
		if (!alat[i])
			continue;
		if (f)
			fprintf(f, "%.1f\n", alat[i] / 1e3);
		sum += (double)alat[i];
		a[na++] = alat[i];
		if (status[i] == 200)
			d[nd++] = (int64_t)lat[i] - (int64_t)alat[i];
	}
	bool ok = !f || fclose(f) == 0;
	qsort(a, (size_t)na, sizeof(*a), cmp_u64);
	qsort(d, (size_t)nd, sizeof(*d), cmp_i64);
	printf(",\"admin\":{\"n\":%d,\"errors\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f,\"per_sec\":%.1f}"
	       ",\"pair_diff_p50_us\":%.1f",
	       na, errors, na ? a[(na - 1) / 2] / 1e3 : 0.0, na ? a[(int)((na - 1) * 0.99)] / 1e3 : 0.0,
	       na ? sum / na / 1e3 : 0.0, sum > 0 ? na * 1e9 / sum : 0.0, nd ? d[(nd - 1) / 2] / 1e3 : 0.0);
	free(a);
	free(d);
	if (!ok)
		fprintf(stderr, "bk-load: cannot write %s\n", sf);
	return ok;
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: bk-load URL PIN TOKEN_FILE N CONC [COMMAND] [LATENCY_FILE]\n");
		return 2;
	}
	/* a connection the shim closes (at accept, over its per-peer limit) is
	 * a transport error to count, not a reason to die */
	signal(SIGPIPE, SIG_IGN);
	unsigned a, b, cc, d, port;
	if (sscanf(argv[1], "https://%u.%u.%u.%u:%u", &a, &b, &cc, &d, &port) != 5 || a > 255 || b > 255 ||
	    cc > 255 || d > 255 || port == 0 || port > 65535) {
		fprintf(stderr, "bk-load: URL must be https://A.B.C.D:PORT\n");
		return 2;
	}
	snprintf(G.host, sizeof(G.host), "%u.%u.%u.%u", a, b, cc, d);
	G.addr.sin_family = AF_INET;
	G.addr.sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, G.host, &G.addr.sin_addr);
	if (!startswith(argv[2], "sha256//") || strlen(argv[2]) >= sizeof(G.pin)) {
		fprintf(stderr, "bk-load: PIN must be sha256//BASE64\n");
		return 2;
	}
	snprintf(G.pin, sizeof(G.pin), "%s", argv[2]);
	FILE *tf = fopen(argv[3], "r");
	if (!tf || !fgets(G.token, sizeof(G.token), tf)) {
		fprintf(stderr, "bk-load: cannot read the token file\n");
		return 2;
	}
	fclose(tf);
	G.token[strcspn(G.token, "\r\n")] = '\0';
	G.n = atoi(argv[4]);
	int conc = atoi(argv[5]);
	if (G.n <= 0 || conc <= 0 || conc > 1024) {
		fprintf(stderr, "bk-load: bad N or CONC\n");
		return 2;
	}
	const char *cmd = argc > 6 ? argv[6] : "true";
	if (strpbrk(cmd, "\"\\") || strlen(cmd) > 4096) {
		fprintf(stderr, "bk-load: COMMAND must not hold quotes or backslashes\n");
		return 2;
	}
	G.body_len = (size_t)snprintf(G.body, sizeof(G.body), "{\"command\":\"%s\"}", cmd);
	/* another route and raw body, for benchmarks of the file routes */
	const char *route = getenv("BK_LOAD_ROUTE"), *rawbody = getenv("BK_LOAD_BODY");
	snprintf(G.route, sizeof(G.route), "%s", route && route[0] == '/' ? route : "/exec");
	if (rawbody && strlen(rawbody) < sizeof(G.body))
		G.body_len = (size_t)snprintf(G.body, sizeof(G.body), "%s", rawbody);

	const char *adm = getenv("BK_LOAD_ADMIN"), *sbx = getenv("BK_LOAD_SANDBOX");
	if (adm && adm[0]) {
		if (!sbx || !sbx[0] || strpbrk(sbx, "\"\\") || strlen(sbx) > 200 || strcmp(G.route, "/exec") || rawbody) {
			fprintf(stderr, "bk-load: BK_LOAD_ADMIN needs BK_LOAD_SANDBOX, and the /exec route's own body\n");
			return 2;
		}
		G.admin = adm;
		snprintf(G.admin_req, sizeof(G.admin_req),
			 "{\"op\":\"exec\",\"args\":{\"sandbox\":\"%s\",\"command\":\"%.600s\"}}", sbx, cmd);
	}

	G.ctx = SSL_CTX_new(TLS_client_method());
	if (!G.ctx || SSL_CTX_set_min_proto_version(G.ctx, TLS1_3_VERSION) != 1)
		return 1;
	SSL_CTX_set_verify(G.ctx, SSL_VERIFY_NONE, NULL); /* the pin is the check */

	lat = calloc((size_t)G.n, sizeof(*lat));
	status = calloc((size_t)G.n, sizeof(*status));
	alat = calloc((size_t)G.n, sizeof(*alat));
	struct stats *st = calloc((size_t)conc, sizeof(*st));
	pthread_t *th = calloc((size_t)conc, sizeof(*th));
	if (!lat || !status || !alat || !st || !th)
		return 1;
	if (pthread_barrier_init(&opened, NULL, (unsigned)conc + 1) != 0)
		return 1;
	uint64_t t_created = now_ns();
	int started = 0;
	for (int i = 0; i < conc; i++) {
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setstacksize(&at, 256 * 1024);
		if (pthread_create(&th[i], &at, worker, &st[i]) == 0)
			started++;
		else
			th[i] = 0;
		pthread_attr_destroy(&at);
	}
	if (started < conc) {
		fprintf(stderr, "bk-load: could start only %d of %d threads\n", started, conc);
		return 1; /* the barrier would wait for ever */
	}
	pthread_barrier_wait(&opened);
	uint64_t t0 = now_ns();
	for (int i = 0; i < conc; i++)
		pthread_join(th[i], NULL);
	uint64_t t_end = t0;
	for (int i = 0; i < conc; i++)
		if (st[i].t_last > t_end)
			t_end = st[i].t_last;
	uint64_t wall = t_end - t0;

	struct stats tot = { 0 };
	const char *first = "";
	for (int i = 0; i < conc; i++) {
		tot.s429 += st[i].s429;
		tot.ok += st[i].ok;
		tot.exit_nonzero += st[i].exit_nonzero;
		tot.transport += st[i].transport;
		tot.reconnects += st[i].reconnects;
		tot.admin_errors += st[i].admin_errors;
		if (!first[0] && st[i].first_error[0])
			first = st[i].first_error;
	}
	int s200 = 0, s503 = 0, sother = 0, nl = 0;
	uint64_t *ok_lat = calloc((size_t)G.n, sizeof(*ok_lat));
	FILE *lf = argc > 7 ? fopen(argv[7], "w") : NULL;
	for (int i = 0; i < G.n; i++) {
		if (status[i] == 200)
			s200++;
		else if (status[i] == 503)
			s503++;
		else if (status[i] != 0)
			sother++;
		if (status[i] == 200 && ok_lat) {
			ok_lat[nl++] = lat[i];
			if (lf)
				fprintf(lf, "%.1f\n", lat[i] / 1e3);
		}
	}
	if (lf)
		fclose(lf);
	if (ok_lat)
		qsort(ok_lat, (size_t)nl, sizeof(*ok_lat), cmp_u64);
#define PCT(p) (nl ? ok_lat[(size_t)((nl - 1) * (p))] / 1e3 : 0.0)
	printf("{\"n\":%d,\"threads\":%d,\"ok\":%d,\"status_200\":%d,\"status_429\":%d,\"status_503\":%d,"
	       "\"status_other\":%d,\"exit_nonzero\":%d,\"transport_errors\":%d,\"reconnects\":%d,"
	       "\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,\"wall_s\":%.3f,\"per_sec\":%.1f,"
	       "\"connect_s\":%.3f,\"per_sec_with_connect\":%.1f,\"first_error\":",
	       G.n, started, tot.ok, s200, tot.s429, s503, sother, tot.exit_nonzero, tot.transport, tot.reconnects,
	       PCT(0.5), PCT(0.9), PCT(0.99), nl ? ok_lat[nl - 1] / 1e3 : 0.0, wall / 1e9,
	       wall ? s200 * 1e9 / (double)wall : 0.0, (t0 - t_created) / 1e9,
	       t_end > t_created ? s200 * 1e9 / (double)(t_end - t_created) : 0.0);
	json_str(first);
	if (G.admin && !admin_json(tot.admin_errors))
		return 1;
	printf("}\n");
	free(ok_lat);
	free(lat);
	free(status);
	free(alat);
	free(st);
	free(th);
	SSL_CTX_free(G.ctx);
	return 0;
}
