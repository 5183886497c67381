/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/isolate/dnsproxy.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <fcntl.h>
#include <sys/socket.h>

#define BK_DNSX_PENDING 16
#define BK_DNSX_CONNS 4

enum ep_kind { EP_STOP, EP_UDP, EP_TCPL, EP_UP, EP_CONN, EP_UPTCP };

struct bk_dnsx;

struct ep {
	enum ep_kind kind;
	struct bk_dnsx *x;
	int fd;
};

struct conn {
	struct ep ep; /* first: the epoll pointer */
	uint8_t buf[2 + BK_DNS_MSG_MAX];
	size_t have;
	bool busy; /* a query of this connection is upstream */
	bool used;
};

struct pending {
	bool used;
	uint16_t up_id;
	int try_idx;
	uint64_t deadline_ms;
	struct bk_dns_query q;
	uint8_t query[BK_DNS_MSG_MAX];
	const struct bk_domain_rule *rule;
	/* where the reply goes: a UDP socket and the asker's address, or a connection */
	int reply_fd;
	struct sockaddr_storage from;
	socklen_t fromlen;
	struct conn *conn;
	/* the upstream's UDP answer was truncated: the query again over TCP
	 * to the same upstream (its socket made in the pod's namespace) */
	struct ep tcp;    /* kind EP_UPTCP; fd -1: none */
	uint8_t *tbuf;    /* what goes out (2 + query), then what came back */
	size_t tlen, tdone;
	bool tsent;
};

struct bk_dnsx {
	struct bk_dnsproxy *px;
	uint64_t cgid;
	const struct bk_profile *prof;
	uint8_t up[BK_DNSX_UPSTREAMS][16];
	int n_up;
	char search[BK_DNSX_SEARCH][BK_DNS_NAME_MAX + 1];
	int n_search;
	struct ep udp4, udp6, tcp4, tcp6, up4, up6; /* fd -1: absent */
	struct conn conns[BK_DNSX_CONNS];
	struct pending pend[BK_DNSX_PENDING];
	double tokens;
	uint64_t last_ms;
	struct {
		uint8_t a[16];
		uint64_t exp_ns;
	} res[BK_DNSX_RESOLVED]; /* its entries in bk_resolved */
	int n_res;
	struct bk_dnsx_seen seen[BK_DNSX_SEEN];
	int n_seen;
	int netns_fd; /* the pod's network namespace (TCP to the upstream) */
	bool dead;
	struct bk_dnsx *next;
};

struct bk_dnsproxy {
	int epfd;
	int self_netns; /* the proxy thread's own, to return to after a socket in a pod's */
	int resolved_fd;
	struct ep stop_ep;
	pthread_t th;
	bool started;
	pthread_mutex_t lock;
	struct bk_dnsx *live, *grave;
	bk_dnsx_deny_fn deny;
	bk_dnsx_resolved_fn resolved;
	void *ud;
	volatile int stop;
};

static uint64_t mono_ms(void) { return now_ns() / 1000000ull; }

static void ep_close(struct bk_dnsproxy *px, struct ep *e)
{
	if (e->fd >= 0) {
		epoll_ctl(px->epfd, EPOLL_CTL_DEL, e->fd, NULL);
		close(e->fd);
		e->fd = -1;
	}
}

/* A pending query is done: its upstream TCP connection (if any) goes. */
static void pend_drop(struct bk_dnsproxy *px, struct pending *p)
{
	p->used = false;
	if (p->tcp.fd >= 0)
		ep_close(px, &p->tcp);
	free(p->tbuf);
	p->tbuf = NULL;
}

static void conn_close(struct bk_dnsproxy *px, struct conn *c)
{
	ep_close(px, &c->ep);
	c->used = false;
	c->busy = false;
	c->have = 0;
	for (int i = 0; i < BK_DNSX_PENDING; i++)
		if (c->ep.x->pend[i].used && c->ep.x->pend[i].conn == c)
			pend_drop(px, &c->ep.x->pend[i]);
}

/* ---- replies ------------------------------------------------------------ */

static void send_reply(struct bk_dnsx *x, int fd, const struct sockaddr_storage *to, socklen_t tolen,
		       struct conn *c, const uint8_t *msg, int n)
{
	if (n <= 0)
		return;
	if (!c) {
		(void)sendto(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)to, tolen);
		return;
	}
	uint8_t b[2 + BK_DNS_MSG_MAX * 2];
	if ((size_t)n > sizeof(b) - 2)
		return;
	b[0] = (uint8_t)(n >> 8);
	b[1] = (uint8_t)n;
	memcpy(b + 2, msg, (size_t)n);
	if (send(c->ep.fd, b, (size_t)n + 2, MSG_DONTWAIT | MSG_NOSIGNAL) != n + 2)
		conn_close(x->px, c);
	else if (c->busy) {
		c->busy = false;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &c->ep };
		epoll_ctl(x->px->epfd, EPOLL_CTL_MOD, c->ep.fd, &ev);
	}
}

/* A reply with rcode and no records; for a message that did not parse,
 * the header alone (its id). */
static void reply_rcode(struct bk_dnsx *x, const uint8_t *m, size_t n, const struct bk_dns_query *q, int rcode,
			int fd, const struct sockaddr_storage *to, socklen_t tolen, struct conn *c)
{
	uint8_t out[BK_DNS_MSG_MAX];
	int len;
	if (q && q->qend) {
		len = bk_dns_reply_empty(m, q, rcode, out, sizeof(out));
	} else {
		if (n < 2)
			return;
		memset(out, 0, 12);
		out[0] = m[0];
		out[1] = m[1];
		out[2] = 0x80;
		out[3] = (uint8_t)(0x80 | rcode);
		len = 12;
	}
	send_reply(x, fd, to, tolen, c, out, len);
}

/* ---- queries from the exec ------------------------------------------------ */

static bool rate_ok(struct bk_dnsx *x)
{
	uint64_t now = mono_ms();
	x->tokens += (double)(now - x->last_ms) * BK_DNSX_RATE / 1000.0;
	if (x->tokens > BK_DNSX_BURST)
		x->tokens = BK_DNSX_BURST;
	x->last_ms = now;
	if (x->tokens < 1.0)
		return false;
	x->tokens -= 1.0;
	return true;
}

static int up_send(struct bk_dnsx *x, struct pending *p)
{
	uint8_t out[BK_DNS_MSG_MAX];
	int n = bk_dns_query_build(p->up_id, p->q.name, p->q.qtype, out, sizeof(out));
	if (n < 0)
		return n;
	const uint8_t *a = x->up[p->try_idx];
	bool v4 = !memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	int fd;
	if (v4) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(53);
		memcpy(&s4->sin_addr, a + 12, 4);
		sl = sizeof(*s4);
		fd = x->up4.fd;
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(53);
		memcpy(&s6->sin6_addr, a, 16);
		sl = sizeof(*s6);
		fd = x->up6.fd;
	}
	if (fd < 0)
		return -EAFNOSUPPORT;
	if (sendto(fd, out, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&ss, sl) != n)
		return -errno;
	p->deadline_ms = mono_ms() + BK_DNSX_TIMEOUT_MS;
	return 0;
}

/* Whether name is NAME.SEARCH for a search domain of the pod and an
 * allowed NAME. */
static bool search_expansion(const struct bk_dnsx *x, const char *name)
{
	size_t nl = strlen(name);
	for (int i = 0; i < x->n_search; i++) {
		size_t sl = strlen(x->search[i]);
		if (nl <= sl + 1 || name[nl - sl - 1] != '.' || strcmp(name + nl - sl, x->search[i]))
			continue;
		char base[BK_DNS_NAME_MAX + 1];
		snprintf(base, sizeof(base), "%.*s", (int)(nl - sl - 1), name);
		if (bk_policy_domain(x->prof, base))
			return true;
	}
	return false;
}

static void on_query(struct bk_dnsx *x, const uint8_t *m, size_t n, int fd, const struct sockaddr_storage *from,
		     socklen_t fromlen, struct conn *c)
{
	struct bk_dnsproxy *px = x->px;
	uint8_t proto = c ? IPPROTO_TCP : IPPROTO_UDP;
	struct bk_dns_query q;
	const char *why = NULL;
	int pr = bk_dns_query_parse(m, n, &q, &why);
	if (!rate_ok(x)) {
		reply_rcode(x, m, n, pr == 0 ? &q : NULL, BK_DNS_REFUSED, fd, from, fromlen, c);
		px->deny(px->ud, x->cgid, BK_R_DNS_RATE, pr == 0 ? q.name : "", proto);
		return;
	}
	if (pr < 0) {
		reply_rcode(x, m, n, NULL, BK_DNS_FORMERR, fd, from, fromlen, c);
		px->deny(px->ud, x->cgid, BK_R_DNS_MALFORMED, "", proto);
		return;
	}
	const struct bk_domain_rule *rule = NULL;
	bool type_ok = q.qclass == BK_DNS_C_IN &&
		       (q.qtype == BK_DNS_T_A || q.qtype == BK_DNS_T_AAAA || q.qtype == BK_DNS_T_CNAME);
	if (type_ok && strlen(q.name) <= BK_DNSX_NAME_MAX)
		rule = bk_policy_domain(x->prof, q.name);
	if (!rule && type_ok && search_expansion(x, q.name)) {
		/* an allowed name with a search domain appended: no such name, no denial */
		reply_rcode(x, m, n, &q, BK_DNS_NXDOMAIN, fd, from, fromlen, c);
		return;
	}
	if (!rule) {
		/* a name (or type) the profile does not allow: never forwarded */
		reply_rcode(x, m, n, &q, type_ok ? BK_DNS_NXDOMAIN : BK_DNS_REFUSED, fd, from, fromlen, c);
		px->deny(px->ud, x->cgid, BK_R_DNS_NAME, q.name, proto);
		return;
	}
	struct pending *p = NULL;
	for (int i = 0; i < BK_DNSX_PENDING && !p; i++)
		if (!x->pend[i].used)
			p = &x->pend[i];
	if (!p || x->n_up == 0) {
		reply_rcode(x, m, n, &q, BK_DNS_SERVFAIL, fd, from, fromlen, c);
		return;
	}
	memset(p, 0, offsetof(struct pending, query));
	p->tcp = (struct ep){ .kind = EP_UPTCP, .x = x, .fd = -1 };
	p->tbuf = NULL;
	p->used = true;
	p->q = q;
	memcpy(p->query, m, q.qend);
	p->rule = rule;
	p->reply_fd = fd;
	if (from)
		memcpy(&p->from, from, sizeof(p->from));
	p->fromlen = fromlen;
	p->conn = c;
	uint16_t id = 0;
	if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
		id = (uint16_t)now_ns();
	p->up_id = id;
	p->try_idx = 0;
	while (up_send(x, p) < 0) {
		if (++p->try_idx >= x->n_up) {
			pend_drop(px, p);
			reply_rcode(x, m, n, &q, BK_DNS_SERVFAIL, fd, from, fromlen, c);
			return;
		}
	}
	if (c) {
		c->busy = true; /* one query at a time per connection */
		struct epoll_event ev = { .events = 0, .data.ptr = &c->ep };
		epoll_ctl(px->epfd, EPOLL_CTL_MOD, c->ep.fd, &ev);
	}
}

/* ---- the exec's allow map ------------------------------------------------- */

static void ranges_add(struct bk_ports *v, const struct bk_domain_rule *rule)
{
	for (int i = 0; i < rule->n_ports; i++) {
		bool have = false;
		for (uint32_t k = 0; k < v->n; k++)
			have |= v->r[k].lo == rule->ports[i][0] && v->r[k].hi == rule->ports[i][1] &&
				v->r[k].protos == rule->protos;
		if (have || v->n >= BK_PORT_RANGES)
			continue;
		v->r[v->n].lo = rule->ports[i][0];
		v->r[v->n].hi = rule->ports[i][1];
		v->r[v->n].protos = rule->protos;
		v->n++;
	}
}

/* The answer's addresses into bk_resolved for this exec: the rule's ports
 * (merged with an entry another rule made), open until the bounded TTL. */
static int resolved_insert(struct bk_dnsx *x, const struct bk_dns_answer *a, const struct bk_domain_rule *rule)
{
	uint64_t now = now_ns();
	for (int i = 0; i < a->n_addrs; i++) {
		const struct bk_dns_addr *ad = &a->addrs[i];
		struct bk_local_key k = { .cgroup_id = x->cgid };
		if (ad->family == 4) {
			k.addr[10] = k.addr[11] = 0xff;
			memcpy(k.addr + 12, ad->addr, 4);
		} else {
			memcpy(k.addr, ad->addr, 16);
		}
		uint32_t ttl = ad->ttl < BK_DNSX_TTL_MIN ? BK_DNSX_TTL_MIN : ad->ttl > BK_DNSX_TTL_MAX ? BK_DNSX_TTL_MAX : ad->ttl;
		uint64_t exp = now + (uint64_t)ttl * 1000000000ull;
		int slot = -1;
		for (int s = 0; s < x->n_res && slot < 0; s++)
			if (!memcmp(x->res[s].a, k.addr, 16))
				slot = s;
		if (slot < 0 && x->n_res == BK_DNSX_RESOLVED)
			return -ENOSPC;
		struct bk_resolved v = { 0 };
		if (slot >= 0 && bpf_map_lookup_elem(x->px->resolved_fd, &k, &v) == 0 && v.expires_ns > exp)
			exp = v.expires_ns;
		if (slot < 0)
			memset(&v, 0, sizeof(v));
		v.expires_ns = exp;
		ranges_add(&v.ports, rule);
		if (bpf_map_update_elem(x->px->resolved_fd, &k, &v, BPF_ANY) < 0)
			return -errno;
		if (slot < 0) {
			slot = x->n_res++;
			memcpy(x->res[slot].a, k.addr, 16);
		}
		x->res[slot].exp_ns = exp;
	}
	/* the receipt's record: the name asked and what it resolved to */
	struct bk_dnsx_seen *sn = NULL;
	for (int i = 0; i < x->n_seen && !sn; i++)
		if (!strcmp(x->seen[i].name, a->chain[0]))
			sn = &x->seen[i];
	if (!sn && x->n_seen < BK_DNSX_SEEN) {
		sn = &x->seen[x->n_seen++];
		memset(sn, 0, sizeof(*sn));
		snprintf(sn->name, sizeof(sn->name), "%s", a->chain[0]);
	}
	for (int i = 0; sn && i < a->n_addrs; i++) {
		uint8_t k[16] = { 0 };
		if (a->addrs[i].family == 4) {
			k[10] = k[11] = 0xff;
			memcpy(k + 12, a->addrs[i].addr, 4);
		} else {
			memcpy(k, a->addrs[i].addr, 16);
		}
		bool have = false;
		for (int j = 0; j < sn->n; j++)
			have |= !memcmp(sn->addr[j], k, 16);
		if (!have && sn->n < BK_DNSX_SEEN_ADDRS)
			memcpy(sn->addr[sn->n++], k, 16);
	}
	return 0;
}

int bk_dnsx_seen(struct bk_dnsproxy *px, struct bk_dnsx *x, struct bk_dnsx_seen *out, int max)
{
	pthread_mutex_lock(&px->lock);
	int n = x->n_seen < max ? x->n_seen : max;
	memcpy(out, x->seen, sizeof(*out) * (size_t)n);
	pthread_mutex_unlock(&px->lock);
	return n;
}

/* Expired entries go (BPF already refuses them); all of them at the end. */
static void resolved_sweep(struct bk_dnsx *x, bool all)
{
	uint64_t now = now_ns();
	for (int s = 0; s < x->n_res;) {
		if (!all && x->res[s].exp_ns > now) {
			s++;
			continue;
		}
		struct bk_local_key k = { .cgroup_id = x->cgid };
		memcpy(k.addr, x->res[s].a, 16);
		bpf_map_delete_elem(x->px->resolved_fd, &k);
		x->res[s] = x->res[--x->n_res];
	}
}

static void pending_reply(struct bk_dnsx *x, struct pending *p, const uint8_t *msg, int n)
{
	pend_drop(x->px, p);
	send_reply(x, p->reply_fd, &p->from, p->fromlen, p->conn, msg, n);
}

static void pending_rcode(struct bk_dnsx *x, struct pending *p, int rcode)
{
	uint8_t out[BK_DNS_MSG_MAX];
	int n = bk_dns_reply_empty(p->query, &p->q, rcode, out, sizeof(out));
	pending_reply(x, p, out, n);
}

/* ---- answers from upstream ------------------------------------------------ */

static void answer_process(struct bk_dnsx *x, struct pending *p, const uint8_t *m, size_t n);

/* A TCP socket to p's upstream, made in the pod's network namespace (this
 * thread enters it for the socket() alone), connecting; the query goes
 * when it is connected (up_tcp_io). */
static int up_tcp_start(struct bk_dnsx *x, struct pending *p)
{
	struct bk_dnsproxy *px = x->px;
	if (x->netns_fd < 0 || px->self_netns < 0)
		return -EOPNOTSUPP;
	const uint8_t *a = x->up[p->try_idx];
	bool v4 = !memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	if (v4) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(53);
		memcpy(&s4->sin_addr, a + 12, 4);
		sl = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(53);
		memcpy(&s6->sin6_addr, a, 16);
		sl = sizeof(*s6);
	}
	uint8_t q[BK_DNS_MSG_MAX];
	int qn = bk_dns_query_build(p->up_id, p->q.name, p->q.qtype, q, sizeof(q));
	if (qn < 0)
		return qn;
	p->tbuf = malloc(2 + BK_DNS_MSG_MAX);
	if (!p->tbuf)
		return -ENOMEM;
	p->tbuf[0] = (uint8_t)(qn >> 8);
	p->tbuf[1] = (uint8_t)qn;
	memcpy(p->tbuf + 2, q, (size_t)qn);
	p->tlen = (size_t)qn + 2;
	p->tdone = 0;
	p->tsent = false;
	if (setns(x->netns_fd, CLONE_NEWNET) < 0)
		return -errno;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int se = errno;
	if (setns(px->self_netns, CLONE_NEWNET) < 0) {
		/* the thread is in the pod's namespace and cannot return: nothing may go on here */
		log_errorf("dnsproxy", "cannot return to the agent's network namespace: %s", strerror(errno));
		abort();
	}
	if (fd < 0)
		return -se;
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
		int r = -errno;
		close(fd);
		return r;
	}
	p->tcp.fd = fd;
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = &p->tcp };
	if (epoll_ctl(px->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int r = -errno;
		close(fd);
		p->tcp.fd = -1;
		return r;
	}
	p->deadline_ms = mono_ms() + BK_DNSX_TIMEOUT_MS;
	log_info("dns_upstream_tcp", LI("cgroup_id", x->cgid), LS("name", p->q.name),
		 LS("why", "the upstream's UDP answer was truncated"));
	return 0;
}

/* The TCP exchange with the upstream: the query out, then one
 * length-prefixed answer in. */
static void up_tcp_io(struct bk_dnsx *x, struct pending *p, uint32_t events)
{
	struct bk_dnsproxy *px = x->px;
	if (!p->tsent) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if ((events & (EPOLLERR | EPOLLHUP)) || getsockopt(p->tcp.fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 ||
		    soerr) {
			pending_rcode(x, p, BK_DNS_SERVFAIL);
			return;
		}
		ssize_t w = send(p->tcp.fd, p->tbuf + p->tdone, p->tlen - p->tdone, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0) {
			if (errno != EAGAIN && errno != EINTR)
				pending_rcode(x, p, BK_DNS_SERVFAIL);
			return;
		}
		p->tdone += (size_t)w;
		if (p->tdone < p->tlen)
			return;
		p->tsent = true;
		p->tdone = 0;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &p->tcp };
		epoll_ctl(px->epfd, EPOLL_CTL_MOD, p->tcp.fd, &ev);
		return;
	}
	ssize_t r = recv(p->tcp.fd, p->tbuf + p->tdone, 2 + BK_DNS_MSG_MAX - p->tdone, MSG_DONTWAIT);
	if (r <= 0) {
		if (r == 0 || (errno != EAGAIN && errno != EINTR))
			pending_rcode(x, p, BK_DNS_SERVFAIL);
		return;
	}
	p->tdone += (size_t)r;
	if (p->tdone < 2)
		return;
	size_t len = ((size_t)p->tbuf[0] << 8) | p->tbuf[1];
	if (len < 12 || len > BK_DNS_MSG_MAX) {
		pending_rcode(x, p, BK_DNS_SERVFAIL);
		return;
	}
	if (p->tdone < 2 + len)
		return;
	uint8_t msg[BK_DNS_MSG_MAX];
	memcpy(msg, p->tbuf + 2, len);
	answer_process(x, p, msg, len);
}

static void on_answer(struct bk_dnsx *x, const uint8_t *m, size_t n, const struct sockaddr_storage *from)
{
	if (n < 2)
		return;
	uint16_t id = (uint16_t)((m[0] << 8) | m[1]);
	struct pending *p = NULL;
	for (int i = 0; i < BK_DNSX_PENDING && !p; i++)
		if (x->pend[i].used && x->pend[i].up_id == id)
			p = &x->pend[i];
	if (!p)
		return;
	/* from the upstream it was sent to, port 53 */
	const uint8_t *a = x->up[p->try_idx];
	bool match = false;
	if (from->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)from;
		match = s4->sin_port == htons(53) && !memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) &&
			!memcmp(a + 12, &s4->sin_addr, 4);
	} else if (from->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)from;
		match = s6->sin6_port == htons(53) && !memcmp(a, &s6->sin6_addr, 16);
	}
	if (!match)
		return;
	if (p->tcp.fd >= 0)
		return; /* it is being asked over TCP: a late UDP copy changes nothing */
	if (n >= 3 && (m[2] & 0x02)) {
		/* truncated: ask the same upstream over TCP */
		if (up_tcp_start(x, p) < 0)
			pending_rcode(x, p, BK_DNS_SERVFAIL);
		return;
	}
	answer_process(x, p, m, n);
}

/* An upstream's answer to p (UDP, or TCP after a truncated one). */
static void answer_process(struct bk_dnsx *x, struct pending *p, const uint8_t *m, size_t n)
{
	struct bk_dnsproxy *px = x->px;
	struct bk_dns_query uq = p->q;
	uq.id = p->up_id;
	struct bk_dns_answer ans;
	const char *why = NULL;
	if (bk_dns_answer_parse(m, n, &uq, &ans, &why) < 0) {
		log_warnf("dns_upstream", "an upstream answer for %s that does not parse: %s", p->q.name, why);
		pending_rcode(x, p, BK_DNS_SERVFAIL);
		return;
	}
	if (ans.rcode != BK_DNS_NOERROR) {
		pending_rcode(x, p, ans.rcode == BK_DNS_NXDOMAIN ? BK_DNS_NXDOMAIN : BK_DNS_SERVFAIL);
		return;
	}
	/* every name of the chain must be one the profile allows */
	for (int i = 1; i < ans.n_chain; i++)
		if (!bk_policy_domain(x->prof, ans.chain[i])) {
			px->deny(px->ud, x->cgid, BK_R_DNS_NAME, ans.chain[i], p->conn ? IPPROTO_TCP : IPPROTO_UDP);
			pending_rcode(x, p, BK_DNS_REFUSED);
			return;
		}
	snprintf(ans.chain[0], sizeof(ans.chain[0]), "%s", p->q.name);
	/* the addresses are open before the exec learns them (the resolved
	 * record before the reply too: an exec's ending read-back sees it) */
	int ir = resolved_insert(x, &ans, p->rule);
	if (ir < 0) {
		log_warnf("dns_resolved", "cannot open the addresses of %s for the exec: %s", p->q.name, strerror(-ir));
		pending_rcode(x, p, BK_DNS_SERVFAIL);
		return;
	}
	px->resolved(px->ud, x->cgid, &ans, p->rule);
	uint8_t out[BK_DNS_MSG_MAX];
	int on = bk_dns_reply_answer(p->query, &p->q, &ans, BK_DNSX_TTL_MAX, out, sizeof(out));
	if (on < 0) {
		pending_rcode(x, p, BK_DNS_SERVFAIL);
		return;
	}
	pending_reply(x, p, out, on);
}

static void timeouts(struct bk_dnsx *x)
{
	uint64_t now = mono_ms();
	for (int i = 0; i < BK_DNSX_PENDING; i++) {
		struct pending *p = &x->pend[i];
		if (!p->used || p->deadline_ms > now)
			continue;
		bool sent = false;
		if (p->tcp.fd >= 0) { /* the TCP try timed out: the next upstream, over UDP */
			ep_close(x->px, &p->tcp);
			free(p->tbuf);
			p->tbuf = NULL;
		}
		while (!sent && ++p->try_idx < x->n_up)
			sent = up_send(x, p) == 0;
		if (!sent)
			pending_rcode(x, p, BK_DNS_SERVFAIL);
	}
}

/* ---- the thread ------------------------------------------------------------ */

static void on_ep(struct bk_dnsproxy *px, struct ep *e, uint32_t events)
{
	struct bk_dnsx *x = e->x;
	uint8_t buf[BK_DNS_MSG_MAX + 1];
	switch (e->kind) {
	case EP_UDP:
	case EP_UP:
		for (int k = 0; k < 16; k++) {
			struct sockaddr_storage from;
			socklen_t fl = sizeof(from);
			ssize_t n = recvfrom(e->fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
			if (n < 0)
				break;
			if ((size_t)n > BK_DNS_MSG_MAX)
				continue;
			if (e->kind == EP_UDP)
				on_query(x, buf, (size_t)n, e->fd, &from, fl, NULL);
			else
				on_answer(x, buf, (size_t)n, &from);
		}
		break;
	case EP_TCPL: {
		int cfd = accept4(e->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0)
			break;
		struct conn *c = NULL;
		for (int i = 0; i < BK_DNSX_CONNS && !c; i++)
			if (!x->conns[i].used)
				c = &x->conns[i];
		if (!c) {
			close(cfd);
			break;
		}
		c->used = true;
		c->have = 0;
		c->busy = false;
		c->ep = (struct ep){ .kind = EP_CONN, .x = x, .fd = cfd };
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &c->ep };
		if (epoll_ctl(px->epfd, EPOLL_CTL_ADD, cfd, &ev) < 0) {
			close(cfd);
			c->used = false;
		}
		break;
	}
	case EP_CONN: {
		struct conn *c = (struct conn *)e;
		if (c->busy)
			break;
		ssize_t n = recv(c->ep.fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);
		if (n <= 0) {
			if (n == 0 || (errno != EAGAIN && errno != EINTR) || (events & (EPOLLHUP | EPOLLERR)))
				conn_close(px, c);
			break;
		}
		c->have += (size_t)n;
		if (c->have < 2)
			break;
		size_t len = ((size_t)c->buf[0] << 8) | c->buf[1];
		if (len > BK_DNS_MSG_MAX || len < 12) {
			conn_close(px, c);
			break;
		}
		if (c->have < 2 + len)
			break;
		uint8_t msg[BK_DNS_MSG_MAX];
		memcpy(msg, c->buf + 2, len);
		memmove(c->buf, c->buf + 2 + len, c->have - 2 - len);
		c->have -= 2 + len;
		on_query(x, msg, len, -1, NULL, 0, c);
		break;
	}
	case EP_UPTCP: {
		struct pending *p = (struct pending *)((char *)e - offsetof(struct pending, tcp));
		if (p->used)
			up_tcp_io(x, p, events);
		break;
	}
	case EP_STOP: break;
	}
}

static void *px_main(void *arg)
{
	struct bk_dnsproxy *px = arg;
	struct epoll_event evs[32];
	while (!px->stop) {
		int n = epoll_wait(px->epfd, evs, 32, 100);
		pthread_mutex_lock(&px->lock);
		for (int i = 0; i < n; i++) {
			struct ep *e = evs[i].data.ptr;
			if (e->kind == EP_STOP || !e->x || e->x->dead || e->fd < 0)
				continue;
			on_ep(px, e, evs[i].events);
		}
		for (struct bk_dnsx *x = px->live; x; x = x->next) {
			timeouts(x);
			resolved_sweep(x, false);
		}
		/* endpoints closed meanwhile: no event of this batch points at them any more */
		while (px->grave) {
			struct bk_dnsx *g = px->grave;
			px->grave = g->next;
			free(g);
		}
		pthread_mutex_unlock(&px->lock);
	}
	return NULL;
}

int bk_dnsproxy_start(int resolved_fd, bk_dnsx_deny_fn deny, bk_dnsx_resolved_fn resolved, void *ud,
		      struct bk_dnsproxy **out, char *err, size_t errlen)
{
	struct bk_dnsproxy *px = calloc(1, sizeof(*px));
	if (!px)
		return -ENOMEM;
	px->resolved_fd = resolved_fd;
	px->deny = deny;
	px->resolved = resolved;
	px->ud = ud;
	pthread_mutex_init(&px->lock, NULL);
	px->self_netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	px->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (px->epfd < 0) {
		int r = -errno;
		if (px->self_netns >= 0)
			close(px->self_netns);
		free(px);
		return bk_fail_buf(err, errlen, r, "DNS proxy: epoll: %s", strerror(-r));
	}
	int r = pthread_create(&px->th, NULL, px_main, px);
	if (r) {
		if (px->self_netns >= 0)
			close(px->self_netns);
		close(px->epfd);
		free(px);
		return bk_fail_buf(err, errlen, -r, "DNS proxy: thread: %s", strerror(r));
	}
	px->started = true;
	*out = px;
	return 0;
}

static void dnsx_free_fds(struct bk_dnsproxy *px, struct bk_dnsx *x)
{
	struct ep *eps[] = { &x->udp4, &x->udp6, &x->tcp4, &x->tcp6, &x->up4, &x->up6 };
	for (size_t i = 0; i < ARRAY_SIZE(eps); i++)
		ep_close(px, eps[i]);
	for (int i = 0; i < BK_DNSX_CONNS; i++)
		if (x->conns[i].used)
			conn_close(px, &x->conns[i]);
	for (int i = 0; i < BK_DNSX_PENDING; i++)
		if (x->pend[i].used)
			pend_drop(px, &x->pend[i]);
	if (x->netns_fd >= 0) {
		close(x->netns_fd);
		x->netns_fd = -1;
	}
}

void bk_dnsproxy_stop(struct bk_dnsproxy *px)
{
	if (!px)
		return;
	px->stop = 1;
	if (px->started)
		pthread_join(px->th, NULL);
	while (px->live) {
		struct bk_dnsx *x = px->live;
		px->live = x->next;
		dnsx_free_fds(px, x);
		resolved_sweep(x, true);
		free(x);
	}
	while (px->grave) {
		struct bk_dnsx *g = px->grave;
		px->grave = g->next;
		free(g);
	}
	close(px->epfd);
	if (px->self_netns >= 0)
		close(px->self_netns);
	free(px);
}

/* A socket of the endpoint, in the current network namespace. */
static int mk_sock(int family, int type, const void *addr, uint16_t port, bool listen_, uint16_t *bound)
{
	int fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1;
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (!addr)
		return fd; /* an upstream socket: the kernel binds it at the first send */
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	if (family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, addr, 4);
		sl = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, addr, 16);
		sl = sizeof(*s6);
	}
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	if (listen_ && listen(fd, 8) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	if (bound) {
		sl = sizeof(ss);
		getsockname(fd, (struct sockaddr *)&ss, &sl);
		*bound = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
						 : ((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	return fd;
}

/* The endpoint's sockets, made in the pod's namespace: UDP 127.0.0.1:P
 * (the kernel picks P) and TCP on the same port; [::1]:P for both when the
 * pod has IPv6 loopback; unbound UDP sockets for the upstreams. */
static int make_socks(struct bk_dnsx *x, struct bk_dns_target *t)
{
	static const uint8_t lo4[4] = { 127, 0, 0, 1 };
	for (int attempt = 0; attempt < 8; attempt++) {
		uint16_t port = 0;
		int u = mk_sock(AF_INET, SOCK_DGRAM, lo4, 0, false, &port);
		if (u < 0)
			return u;
		int tc = mk_sock(AF_INET, SOCK_STREAM, lo4, port, true, NULL);
		if (tc < 0) {
			close(u);
			if (tc == -EADDRINUSE)
				continue;
			return tc;
		}
		x->udp4.fd = u;
		x->tcp4.fd = tc;
		t->ip4 = htonl(INADDR_LOOPBACK);
		t->port = port;
		t->has6 = 0;
		int u6 = mk_sock(AF_INET6, SOCK_DGRAM, &in6addr_loopback, port, false, NULL);
		int t6 = u6 >= 0 ? mk_sock(AF_INET6, SOCK_STREAM, &in6addr_loopback, port, true, NULL) : -1;
		if (u6 >= 0 && t6 >= 0) {
			x->udp6.fd = u6;
			x->tcp6.fd = t6;
			t->has6 = 1;
		} else if (u6 >= 0) {
			close(u6);
		}
		break;
	}
	if (x->udp4.fd < 0)
		return -EADDRINUSE;
	x->up4.fd = mk_sock(AF_INET, SOCK_DGRAM, NULL, 0, false, NULL);
	x->up6.fd = mk_sock(AF_INET6, SOCK_DGRAM, NULL, 0, false, NULL);
	if (x->up4.fd < 0 && x->up6.fd < 0)
		return x->up4.fd;
	return 0;
}

int bk_dnsx_open(struct bk_dnsproxy *px, int self_netns, int pidfd, uint64_t cgid, const struct bk_profile *prof,
		 const uint8_t (*upstreams)[16], int n_up, const char (*search)[BK_DNS_NAME_MAX + 1], int n_search,
		 struct bk_dns_target *target, struct bk_dnsx **out, char *err, size_t errlen)
{
	struct bk_dnsx *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->px = px;
	x->cgid = cgid;
	x->prof = prof;
	x->tokens = BK_DNSX_BURST;
	x->netns_fd = -1;
	x->last_ms = mono_ms();
	for (int i = 0; i < n_up && x->n_up < BK_DNSX_UPSTREAMS; i++)
		memcpy(x->up[x->n_up++], upstreams[i], 16);
	for (int i = 0; i < n_search && x->n_search < BK_DNSX_SEARCH; i++) {
		snprintf(x->search[x->n_search], sizeof(x->search[0]), "%s", search[i]);
		/* lowercase, no trailing dot: as query names are compared */
		for (char *c = x->search[x->n_search]; *c; c++)
			if (*c >= 'A' && *c <= 'Z')
				*c = (char)(*c - 'A' + 'a');
		size_t l = strlen(x->search[x->n_search]);
		if (l && x->search[x->n_search][l - 1] == '.')
			x->search[x->n_search][l - 1] = '\0';
		if (x->search[x->n_search][0])
			x->n_search++;
	}
	struct ep *eps[] = { &x->udp4, &x->udp6, &x->tcp4, &x->tcp6, &x->up4, &x->up6 };
	static const enum ep_kind kinds[] = { EP_UDP, EP_UDP, EP_TCPL, EP_TCPL, EP_UP, EP_UP };
	for (size_t i = 0; i < ARRAY_SIZE(eps); i++)
		*eps[i] = (struct ep){ .kind = kinds[i], .x = x, .fd = -1 };
	memset(target, 0, sizeof(*target));
	int r;
	if (setns(pidfd, CLONE_NEWNET) < 0) {
		r = -errno;
		free(x);
		return bk_fail_buf(err, errlen, r, "DNS proxy: cannot enter the pod's network namespace: %s",
				   strerror(-r));
	}
	r = make_socks(x, target);
	if (r == 0) /* for a TCP retry of a truncated answer, later */
		x->netns_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (setns(self_netns, CLONE_NEWNET) < 0) {
		/* the thread is in the pod's namespace and cannot return: nothing may go on here */
		log_errorf("dnsproxy", "cannot return to the agent's network namespace: %s", strerror(errno));
		abort();
	}
	if (r < 0) {
		for (size_t i = 0; i < ARRAY_SIZE(eps); i++)
			if (eps[i]->fd >= 0)
				close(eps[i]->fd);
		if (x->netns_fd >= 0)
			close(x->netns_fd);
		free(x);
		return bk_fail_buf(err, errlen, r, "DNS proxy: cannot open its sockets in the pod's network namespace: %s",
				   strerror(-r));
	}
	pthread_mutex_lock(&px->lock);
	for (size_t i = 0; i < ARRAY_SIZE(eps); i++) {
		if (eps[i]->fd < 0)
			continue;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = eps[i] };
		if (epoll_ctl(px->epfd, EPOLL_CTL_ADD, eps[i]->fd, &ev) < 0) {
			r = -errno;
			dnsx_free_fds(px, x);
			pthread_mutex_unlock(&px->lock);
			free(x);
			return bk_fail_buf(err, errlen, r, "DNS proxy: epoll: %s", strerror(-r));
		}
	}
	x->next = px->live;
	px->live = x;
	pthread_mutex_unlock(&px->lock);
	*out = x;
	return 0;
}

void bk_dnsx_close(struct bk_dnsproxy *px, struct bk_dnsx *x)
{
	if (!px || !x)
		return;
	pthread_mutex_lock(&px->lock);
	for (struct bk_dnsx **pp = &px->live; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	x->dead = true;
	dnsx_free_fds(px, x);
	resolved_sweep(x, true);
	x->next = px->grave;
	px->grave = x;
	pthread_mutex_unlock(&px->lock);
}
