/* SPDX-License-Identifier: Apache-2.0 */
/* DNS messages of the proxy (agent/parse/dns.c): which queries it takes,
 * what it reads out of an upstream's answer, and that the replies it builds
 * say exactly what it validated (read back with the same parser). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>

#include "agent/parse/dns.h"
#include "lib/util.h"

/* a tiny message writer */
struct msg {
	uint8_t b[2048];
	size_t n;
};
static void u8(struct msg *m, unsigned v) { m->b[m->n++] = (uint8_t)v; }
static void u16(struct msg *m, unsigned v) { u8(m, v >> 8); u8(m, v & 0xff); }
static void u32(struct msg *m, uint32_t v) { u16(m, v >> 16); u16(m, v & 0xffff); }
static void name(struct msg *m, const char *s)
{
	while (*s) {
		const char *d = strchr(s, '.');
		size_t l = d ? (size_t)(d - s) : strlen(s);
		u8(m, (unsigned)l);
		memcpy(m->b + m->n, s, l);
		m->n += l;
		s += l + (d ? 1 : 0);
	}
	u8(m, 0);
}
static void hdr(struct msg *m, unsigned id, unsigned f, unsigned qd, unsigned an, unsigned ns, unsigned ar)
{
	m->n = 0;
	u16(m, id); u16(m, f); u16(m, qd); u16(m, an); u16(m, ns); u16(m, ar);
}
static void query(struct msg *m, const char *n, unsigned type)
{
	hdr(m, 0x1234, 0x0100, 1, 0, 0, 0);
	name(m, n);
	u16(m, type);
	u16(m, 1);
}
static void rr_a(struct msg *m, unsigned ptr_or_0, const char *owner, uint32_t ttl, const char *ip)
{
	if (ptr_or_0)
		u16(m, 0xc000 | ptr_or_0);
	else
		name(m, owner);
	uint8_t a[16];
	bool v4 = inet_pton(AF_INET, ip, a) == 1;
	if (!v4)
		inet_pton(AF_INET6, ip, a);
	u16(m, v4 ? 1 : 28); u16(m, 1); u32(m, ttl); u16(m, v4 ? 4 : 16);
	memcpy(m->b + m->n, a, v4 ? 4 : 16);
	m->n += v4 ? 4 : 16;
}
static void rr_cname(struct msg *m, const char *owner, uint32_t ttl, const char *target)
{
	name(m, owner);
	u16(m, 5); u16(m, 1); u32(m, ttl);
	size_t at = m->n;
	u16(m, 0);
	size_t s = m->n;
	name(m, target);
	m->b[at] = (uint8_t)((m->n - s) >> 8);
	m->b[at + 1] = (uint8_t)(m->n - s);
}

static void queries(void **st)
{
	struct msg m;
	struct bk_dns_query q;
	const char *why = NULL;
	query(&m, "PyPI.org", 1);
	assert_int_equal(bk_dns_query_parse(m.b, m.n, &q, &why), 0);
	assert_string_equal(q.name, "pypi.org"); /* lowercased */
	assert_int_equal(q.qtype, BK_DNS_T_A);
	assert_int_equal(q.id, 0x1234);
	assert_true(q.rd);
	assert_int_equal(q.qend, m.n);
	query(&m, "a.b", 16); /* TXT parses: the proxy refuses it by type */
	assert_int_equal(bk_dns_query_parse(m.b, m.n, &q, &why), 0);
	assert_int_equal(q.qtype, 16);
	/* with an EDNS0 OPT */
	query(&m, "pypi.org", 28);
	m.b[11] = 1;
	u8(&m, 0); u16(&m, 41); u16(&m, 1232); u32(&m, 0); u16(&m, 0);
	assert_int_equal(bk_dns_query_parse(m.b, m.n, &q, &why), 0);
	assert_int_equal(q.qtype, BK_DNS_T_AAAA);

	static const struct {
		const char *what, *why;
		unsigned flags, qd, an, ar;
		const char *name;
		int extra; /* 1: a trailing byte, 2: a compression pointer as the name, 3: a non-OPT additional */
	} bad[] = {
		{ "a response", "a response", 0x8100, 1, 0, 0, "a.org", 0 },
		{ "opcode", "opcode", 0x1100, 1, 0, 0, "a.org", 0 },
		{ "two questions", "one question", 0x0100, 2, 0, 0, "a.org", 0 },
		{ "an answer", "one question", 0x0100, 1, 1, 0, "a.org", 0 },
		{ "trailing bytes", "after the query", 0x0100, 1, 0, 0, "a.org", 1 },
		{ "compression", "compressed", 0x0100, 1, 0, 0, NULL, 2 },
		{ "a non-OPT additional", "EDNS0", 0x0100, 1, 0, 1, "a.org", 3 },
		{ "a byte outside LDH", "outside", 0x0100, 1, 0, 0, "a.o!rg", 0 },
		{ "Z set", "Z or RCODE", 0x0140, 1, 0, 0, "a.org", 0 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		hdr(&m, 1, bad[i].flags, bad[i].qd, bad[i].an, 0, bad[i].ar);
		if (bad[i].extra == 2)
			u16(&m, 0xc000 | 12);
		else
			name(&m, bad[i].name);
		u16(&m, 1);
		u16(&m, 1);
		if (bad[i].extra == 1)
			u8(&m, 0);
		if (bad[i].extra == 3) {
			name(&m, "x.org"); u16(&m, 16); u16(&m, 1); u32(&m, 0); u16(&m, 0);
		}
		why = "";
		if (bk_dns_query_parse(m.b, m.n, &q, &why) != -EINVAL || !strstr(why, bad[i].why))
			fail_msg("%s: accepted or wrong reason \"%s\"", bad[i].what, why);
	}
	/* the longest name: 253 bytes of text pass, 254 do not */
	char n[300];
	memset(n, 'a', sizeof(n));
	for (int i = 63; i < 300; i += 64)
		n[i] = '.';
	n[253] = '\0';
	query(&m, n, 1);
	assert_int_equal(bk_dns_query_parse(m.b, m.n, &q, &why), 0);
	assert_int_equal(strlen(q.name), 253);
	n[253] = 'a';
	n[254] = '\0';
	query(&m, n, 1);
	assert_int_equal(bk_dns_query_parse(m.b, m.n, &q, &why), -EINVAL);
	assert_non_null(strstr(why, "253"));
	/* short */
	assert_int_equal(bk_dns_query_parse(m.b, 11, &q, &why), -EINVAL);
}

static void answers(void **st)
{
	struct msg qm, m;
	struct bk_dns_query q;
	struct bk_dns_answer a;
	const char *why = NULL;
	query(&qm, "www.example.org", 1);
	assert_int_equal(bk_dns_query_parse(qm.b, qm.n, &q, &why), 0);

	/* a chain out of order, a record off the chain, an AAAA for an A query, compression */
	hdr(&m, 0x1234, 0x8180, 1, 5, 0, 0);
	name(&m, "www.example.org"); u16(&m, 1); u16(&m, 1);
	rr_a(&m, 0, "cdn.example.net", 30, "203.0.113.7");
	rr_cname(&m, "www.example.org", 600, "edge.example.com");
	rr_cname(&m, "edge.example.com", 60, "cdn.example.net");
	rr_a(&m, 0, "other.example.org", 30, "198.51.100.1"); /* not on the chain */
	rr_a(&m, 0, "cdn.example.net", 30, "2001:db8::7");    /* AAAA for an A query */
	assert_int_equal(bk_dns_answer_parse(m.b, m.n, &q, &a, &why), 0);
	assert_int_equal(a.rcode, 0);
	assert_int_equal(a.n_chain, 3);
	assert_string_equal(a.chain[1], "edge.example.com");
	assert_string_equal(a.chain[2], "cdn.example.net");
	assert_int_equal(a.chain_ttl[0], 600);
	assert_int_equal(a.n_addrs, 1);
	assert_int_equal(a.addrs[0].family, 4);
	assert_int_equal(a.addrs[0].ttl, 30);
	assert_memory_equal(a.addrs[0].addr, "\xcb\x00\x71\x07", 4);

	/* compression pointer to the question's name */
	hdr(&m, 0x1234, 0x8180, 1, 1, 0, 0);
	name(&m, "www.example.org"); u16(&m, 1); u16(&m, 1);
	rr_a(&m, 12, NULL, 5, "192.0.2.1");
	assert_int_equal(bk_dns_answer_parse(m.b, m.n, &q, &a, &why), 0);
	assert_int_equal(a.n_addrs, 1);

	/* the reply the proxy builds: the chain and addresses, TTLs bounded; read back */
	hdr(&m, 0x1234, 0x8180, 1, 2, 0, 0);
	name(&m, "www.example.org"); u16(&m, 1); u16(&m, 1);
	rr_cname(&m, "www.example.org", 9999, "cdn.example.net");
	rr_a(&m, 0, "cdn.example.net", 86400, "203.0.113.9");
	assert_int_equal(bk_dns_answer_parse(m.b, m.n, &q, &a, &why), 0);
	uint8_t out[1024];
	int ol = bk_dns_reply_answer(qm.b, &q, &a, 300, out, sizeof(out));
	assert_true(ol > 0);
	struct bk_dns_answer b;
	assert_int_equal(bk_dns_answer_parse(out, (size_t)ol, &q, &b, &why), 0);
	assert_int_equal(b.n_chain, 2);
	assert_string_equal(b.chain[1], "cdn.example.net");
	assert_int_equal(b.chain_ttl[0], 300);
	assert_int_equal(b.n_addrs, 1);
	assert_int_equal(b.addrs[0].ttl, 300);
	assert_memory_equal(b.addrs[0].addr, a.addrs[0].addr, 4);
	assert_int_equal(out[2] & 0x80, 0x80); /* a response */

	/* a refusal: the question, REFUSED, no records */
	ol = bk_dns_reply_empty(qm.b, &q, BK_DNS_REFUSED, out, sizeof(out));
	assert_int_equal(ol, (int)qm.n);
	assert_int_equal(bk_dns_answer_parse(out, (size_t)ol, &q, &b, &why), 0);
	assert_int_equal(b.rcode, BK_DNS_REFUSED);
	assert_int_equal(b.n_addrs, 0);

	/* what the proxy sends upstream */
	ol = bk_dns_query_build(0x77, "www.example.org", BK_DNS_T_AAAA, out, sizeof(out));
	struct bk_dns_query q2;
	assert_int_equal(bk_dns_query_parse(out, (size_t)ol, &q2, &why), 0);
	assert_string_equal(q2.name, "www.example.org");
	assert_int_equal(q2.qtype, BK_DNS_T_AAAA);
	assert_int_equal(q2.id, 0x77);

	static const struct {
		const char *what, *why;
		int kind;
	} bad[] = {
		{ "another id", "query id", 0 },       { "truncated", "truncated", 1 },
		{ "another question", "another question", 2 }, { "a CNAME loop", "loop", 3 },
		{ "a forward pointer", "point back", 4 }, { "an A of 5 bytes", "wrong length", 5 },
		{ "a record past the end", "past", 6 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		int k = bad[i].kind;
		hdr(&m, k == 0 ? 0x4321 : 0x1234, k == 1 ? 0x8380 : 0x8180, 1, k == 3 ? 2 : 1, 0, 0);
		name(&m, k == 2 ? "www.example.com" : "www.example.org"); u16(&m, 1); u16(&m, 1);
		if (k == 3) {
			rr_cname(&m, "www.example.org", 5, "b.example.org");
			rr_cname(&m, "b.example.org", 5, "www.example.org");
		} else if (k == 4) {
			u16(&m, 0xc000 | 200);
			u16(&m, 1); u16(&m, 1); u32(&m, 5); u16(&m, 4); u32(&m, 0x01020304);
		} else if (k == 5) {
			name(&m, "www.example.org");
			u16(&m, 1); u16(&m, 1); u32(&m, 5); u16(&m, 5); u32(&m, 0x01020304); u8(&m, 0);
		} else {
			rr_a(&m, 0, "www.example.org", 5, "192.0.2.1");
		}
		size_t len = k == 6 ? m.n - 2 : m.n;
		why = "";
		if (bk_dns_answer_parse(m.b, len, &q, &a, &why) != -EINVAL || !strstr(why, bad[i].why))
			fail_msg("%s: accepted or wrong reason \"%s\"", bad[i].what, why);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(queries),
		cmocka_unit_test(answers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
