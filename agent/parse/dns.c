/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/parse/dns.h"
#include "lib/util.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

static uint16_t get16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static uint32_t get32(const uint8_t *p) { return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]; }
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

#define FAIL(msg) (*why = (msg), -EINVAL)

/* A name at *pos into out (lowercase, dotted). Compression pointers only
 * when ptr_ok, and only backwards (no loops); *pos ends after the name as
 * it sits at *pos. Labels of [a-z0-9_-] (any case). */
static int read_name(const uint8_t *m, size_t n, size_t *pos, bool ptr_ok, char *out, const char **why)
{
	size_t p = *pos, o = 0, end = 0;
	bool jumped = false;
	int hops = 0;
	size_t limit = p; /* a pointer goes strictly before the name's start */
	for (;;) {
		if (p >= n)
			return FAIL("a name runs past the message");
		uint8_t l = m[p];
		if ((l & 0xc0) == 0xc0) {
			if (!ptr_ok)
				return FAIL("a compressed name in a query");
			if (p + 1 >= n)
				return FAIL("a name runs past the message");
			size_t to = ((size_t)(l & 0x3f) << 8) | m[p + 1];
			if (to >= limit || ++hops > 16)
				return FAIL("a compression pointer that does not point back");
			if (!jumped)
				end = p + 2;
			jumped = true;
			limit = to;
			p = to;
			continue;
		}
		if (l & 0xc0)
			return FAIL("a label type other than a plain label");
		p++;
		if (l == 0)
			break;
		if (p + l > n)
			return FAIL("a name runs past the message");
		if (o + (o ? 1 : 0) + l > BK_DNS_NAME_MAX)
			return FAIL("a name longer than 253 bytes");
		if (o)
			out[o++] = '.';
		for (int i = 0; i < l; i++) {
			char c = (char)m[p + i];
			if (c >= 'A' && c <= 'Z')
				c = (char)(c - 'A' + 'a');
			if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
				return FAIL("a name with a byte outside a-z, 0-9, '-' and '_'");
			out[o++] = c;
		}
		p += l;
	}
	out[o] = '\0';
	*pos = jumped ? end : p;
	return 0;
}

int bk_dns_query_parse(const uint8_t *m, size_t n, struct bk_dns_query *q, const char **why)
{
	memset(q, 0, sizeof(*q));
	if (n < 12)
		return FAIL("shorter than a DNS header");
	if (n > BK_DNS_MSG_MAX)
		return FAIL("longer than the proxy takes");
	q->id = get16(m);
	uint8_t f1 = m[2], f2 = m[3];
	if (f1 & 0x80)
		return FAIL("a response, not a query");
	if ((f1 >> 3) & 0x0f)
		return FAIL("an opcode other than QUERY");
	if (f1 & 0x06)
		return FAIL("AA or TC set in a query");
	if (f2 & 0x4f)
		return FAIL("Z or RCODE set in a query");
	q->rd = f1 & 0x01;
	if (get16(m + 4) != 1 || get16(m + 6) || get16(m + 8) || get16(m + 10) > 1)
		return FAIL("not one question without records");
	size_t pos = 12;
	int r = read_name(m, n, &pos, false, q->name, why);
	if (r < 0)
		return r;
	if (pos + 4 > n)
		return FAIL("no QTYPE and QCLASS");
	q->qtype = get16(m + pos);
	q->qclass = get16(m + pos + 2);
	pos += 4;
	q->qend = pos;
	if (get16(m + 10)) {
		/* EDNS0 OPT: root name, type 41, class (payload size), TTL, RDLENGTH, options */
		if (pos + 11 > n || m[pos] || get16(m + pos + 1) != BK_DNS_T_OPT)
			return FAIL("an additional record that is not an EDNS0 OPT");
		size_t rdl = get16(m + pos + 9);
		pos += 11 + rdl;
	}
	if (pos != n)
		return FAIL("bytes after the query");
	return 0;
}

static int put_header(uint8_t *out, size_t cap, const uint8_t *query, const struct bk_dns_query *q, int rcode,
		      uint16_t an)
{
	if (cap < q->qend)
		return -ENOSPC;
	memcpy(out, query, q->qend); /* header and question */
	out[2] = (uint8_t)(0x80 | (q->rd ? 0x01 : 0)); /* QR, opcode 0, RD as asked */
	out[3] = (uint8_t)(0x80 | (rcode & 0x0f));     /* RA */
	put16(out + 4, 1);
	put16(out + 6, an);
	put16(out + 8, 0);
	put16(out + 10, 0);
	return (int)q->qend;
}

int bk_dns_reply_empty(const uint8_t *query, const struct bk_dns_query *q, int rcode, uint8_t *out, size_t cap)
{
	return put_header(out, cap, query, q, rcode, 0);
}

/* A name in wire form (no compression) at out; length or -1. */
static int put_name(uint8_t *out, size_t cap, const char *name)
{
	size_t o = 0;
	const char *s = name;
	while (*s) {
		const char *dot = strchr(s, '.');
		size_t l = dot ? (size_t)(dot - s) : strlen(s);
		if (l == 0 || l > 63 || o + 1 + l > cap)
			return -1;
		out[o++] = (uint8_t)l;
		memcpy(out + o, s, l);
		o += l;
		s += l;
		if (*s == '.')
			s++;
	}
	if (o + 1 > cap)
		return -1;
	out[o++] = 0;
	return (int)o;
}

static int put_rr(uint8_t *out, size_t cap, size_t off, const char *owner, uint16_t type, uint32_t ttl,
		  const uint8_t *rdata, size_t rdlen)
{
	int nl = put_name(out + off, cap - off, owner);
	if (nl < 0 || off + (size_t)nl + 10 + rdlen > cap)
		return -ENOSPC;
	size_t p = off + (size_t)nl;
	put16(out + p, type);
	put16(out + p + 2, BK_DNS_C_IN);
	put32(out + p + 4, ttl);
	put16(out + p + 8, (uint16_t)rdlen);
	memcpy(out + p + 10, rdata, rdlen);
	return (int)(p + 10 + rdlen);
}

int bk_dns_reply_answer(const uint8_t *query, const struct bk_dns_query *q, const struct bk_dns_answer *a,
			uint32_t ttl_max, uint8_t *out, size_t cap)
{
	int an = (a->n_chain > 0 ? a->n_chain - 1 : 0) + a->n_addrs;
	int off = put_header(out, cap, query, q, a->rcode, (uint16_t)an);
	if (off < 0)
		return off;
	for (int i = 0; i + 1 < a->n_chain; i++) {
		uint8_t rd[BK_DNS_NAME_MAX + 2];
		int rl = put_name(rd, sizeof(rd), a->chain[i + 1]);
		if (rl < 0)
			return -ENOSPC;
		uint32_t ttl = a->chain_ttl[i] < ttl_max ? a->chain_ttl[i] : ttl_max;
		/* the owner is spelled as the exec asked it (chain[0] is q->name) */
		off = put_rr(out, cap, (size_t)off, a->chain[i], BK_DNS_T_CNAME, ttl, rd, (size_t)rl);
		if (off < 0)
			return off;
	}
	const char *last = a->n_chain ? a->chain[a->n_chain - 1] : q->name;
	for (int i = 0; i < a->n_addrs; i++) {
		const struct bk_dns_addr *x = &a->addrs[i];
		uint32_t ttl = x->ttl < ttl_max ? x->ttl : ttl_max;
		off = put_rr(out, cap, (size_t)off, last, x->family == 4 ? BK_DNS_T_A : BK_DNS_T_AAAA, ttl, x->addr,
			     x->family == 4 ? 4 : 16);
		if (off < 0)
			return off;
	}
	return off;
}

int bk_dns_answer_parse(const uint8_t *m, size_t n, const struct bk_dns_query *q, struct bk_dns_answer *a,
			const char **why)
{
	memset(a, 0, sizeof(*a));
	if (n < 12)
		return FAIL("shorter than a DNS header");
	if (get16(m) != q->id)
		return FAIL("an answer to another query id");
	if (!(m[2] & 0x80) || ((m[2] >> 3) & 0x0f))
		return FAIL("not a response to a QUERY");
	if (m[2] & 0x02)
		return FAIL("a truncated answer");
	a->rcode = m[3] & 0x0f;
	if (get16(m + 4) != 1)
		return FAIL("not one question");
	size_t pos = 12;
	char name[BK_DNS_NAME_MAX + 1];
	int r = read_name(m, n, &pos, true, name, why);
	if (r < 0)
		return r;
	if (pos + 4 > n || strcasecmp(name, q->name) || get16(m + pos) != q->qtype || get16(m + pos + 2) != q->qclass)
		return FAIL("an answer to another question");
	pos += 4;
	snprintf(a->chain[0], sizeof(a->chain[0]), "%s", q->name);
	a->n_chain = 1;
	unsigned ancount = get16(m + 6);
	/* the records in any order: a CNAME extends the chain when its owner
	 * is the chain's last name; addresses are taken in a second pass */
	size_t start = pos;
	for (int pass = 0; pass < 2; pass++) {
		pos = start;
		bool grew = true;
		/* pass 0 repeats until the chain stops growing (records out of order) */
		for (int round = 0; grew && round < BK_DNS_MAX_CHAIN; round++) {
			grew = false;
			pos = start;
			for (unsigned i = 0; i < ancount; i++) {
				char owner[BK_DNS_NAME_MAX + 1];
				if ((r = read_name(m, n, &pos, true, owner, why)) < 0)
					return r;
				if (pos + 10 > n)
					return FAIL("a record runs past the message");
				uint16_t type = get16(m + pos), cls = get16(m + pos + 2);
				uint32_t ttl = get32(m + pos + 4);
				size_t rdl = get16(m + pos + 8);
				pos += 10;
				if (pos + rdl > n)
					return FAIL("a record runs past the message");
				size_t rdpos = pos;
				pos += rdl;
				if (cls != BK_DNS_C_IN || strcasecmp(owner, a->chain[a->n_chain - 1]))
					continue;
				if (pass == 0 && type == BK_DNS_T_CNAME) {
					char target[BK_DNS_NAME_MAX + 1];
					size_t tp = rdpos;
					if ((r = read_name(m, n, &tp, true, target, why)) < 0)
						return r;
					if (tp != rdpos + rdl)
						return FAIL("a CNAME with bytes after its name");
					for (int k = 0; k < a->n_chain; k++)
						if (!strcasecmp(a->chain[k], target))
							return FAIL("a CNAME loop");
					if (a->n_chain == BK_DNS_MAX_CHAIN)
						return FAIL("a CNAME chain longer than 8 names");
					a->chain_ttl[a->n_chain - 1] = ttl;
					snprintf(a->chain[a->n_chain++], sizeof(a->chain[0]), "%s", target);
					grew = true;
				} else if (pass == 1 && (type == BK_DNS_T_A || type == BK_DNS_T_AAAA) && type == q->qtype) {
					size_t al = type == BK_DNS_T_A ? 4 : 16;
					if (rdl != al)
						return FAIL("an address record of the wrong length");
					if (a->n_addrs == BK_DNS_MAX_ADDRS)
						continue; /* the rest are dropped, not an error */
					struct bk_dns_addr *x = &a->addrs[a->n_addrs++];
					x->family = type == BK_DNS_T_A ? 4 : 6;
					memcpy(x->addr, m + rdpos, al);
					x->ttl = ttl;
				}
			}
			if (pass == 1)
				break;
		}
	}
	return 0;
}

int bk_dns_query_build(uint16_t id, const char *name, uint16_t qtype, uint8_t *out, size_t cap)
{
	if (cap < 12)
		return -ENOSPC;
	memset(out, 0, 12);
	put16(out, id);
	out[2] = 0x01; /* RD */
	put16(out + 4, 1);
	int nl = put_name(out + 12, cap - 12, name);
	if (nl < 0)
		return strlen(name) > BK_DNS_NAME_MAX ? -EINVAL : -ENOSPC;
	size_t p = 12 + (size_t)nl;
	if (p + 4 > cap)
		return -ENOSPC;
	put16(out + p, qtype);
	put16(out + p + 2, BK_DNS_C_IN);
	return (int)(p + 4);
}
