/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the DNS messages of the proxy (agent/parse/dns.c), which sees what
 * an exec sends and what an upstream answers:
 *  - the input as an exec's query: parsed, the name is lowercase LDH text
 *    of at most 253 bytes; the refusal built for it parses back as a
 *    REFUSED reply to the same question with no records;
 *  - the input as an upstream's answer to a fixed A query (its id and
 *    question written over the input's first bytes when long enough, so
 *    the record walk is reached): parsed, the chain starts at the
 *    question, holds no name twice, the addresses are A records; the
 *    reply the proxy builds from it parses back to the same chain and
 *    addresses with TTLs bounded. */
#include "fuzz.h"
#include "agent/parse/dns.h"

#include <errno.h>

static void name_ok(const char *n)
{
	size_t l = strnlen(n, BK_DNS_NAME_MAX + 1);
	CHECK(l <= BK_DNS_NAME_MAX, "a name of %zu bytes", l);
	for (size_t i = 0; i < l; i++)
		CHECK((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= '0' && n[i] <= '9') || n[i] == '-' || n[i] == '_' ||
			      n[i] == '.',
		      "byte 0x%02x in name", (unsigned char)n[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[BK_DNS_MSG_MAX * 2];
	struct bk_dns_query q;
	const char *why = NULL;
	if (bk_dns_query_parse(data, size, &q, &why) == 0) {
		name_ok(q.name);
		CHECK(q.qend <= size, "qend %zu > %zu", q.qend, size);
		int n = bk_dns_reply_empty(data, &q, BK_DNS_REFUSED, out, sizeof(out));
		CHECK(n > 0, "no refusal built: %d", n);
		struct bk_dns_answer a;
		CHECK(bk_dns_answer_parse(out, (size_t)n, &q, &a, &why) == 0, "the refusal does not parse: %s", why);
		CHECK(a.rcode == BK_DNS_REFUSED && a.n_addrs == 0 && a.n_chain == 1, "refusal read back wrong");
	} else {
		CHECK(why && why[0], "refused without a reason");
	}

	/* as an answer to "fuzz.example.org" A, id 0x4242 */
	static uint8_t qm[64];
	static struct bk_dns_query fq;
	static int qn;
	if (!qn) {
		qn = bk_dns_query_build(0x4242, "fuzz.example.org", BK_DNS_T_A, qm, sizeof(qm));
		CHECK(qn > 0 && bk_dns_query_parse(qm, (size_t)qn, &fq, &why) == 0, "the fixed query");
	}
	uint8_t *m = malloc(size + (size_t)qn);
	size_t mn = size;
	memcpy(m, data, size);
	if (size >= (size_t)qn && size > 0 && (data[0] & 1)) {
		memcpy(m, qm, (size_t)qn); /* header and question, then the input's records */
		m[2] |= 0x80;
		m[2] &= (uint8_t)~0x02;
		m[6] = data[6]; /* the input's ANCOUNT */
		m[7] = data[7];
	}
	struct bk_dns_answer a;
	if (bk_dns_answer_parse(m, mn, &fq, &a, &why) == 0) {
		CHECK(a.n_chain >= 1 && a.n_chain <= BK_DNS_MAX_CHAIN, "n_chain %d", a.n_chain);
		CHECK(!strcmp(a.chain[0], fq.name), "the chain starts at %s", a.chain[0]);
		for (int i = 0; i < a.n_chain; i++) {
			name_ok(a.chain[i]);
			for (int k = 0; k < i; k++)
				CHECK(strcasecmp(a.chain[i], a.chain[k]), "%s twice in the chain", a.chain[i]);
		}
		CHECK(a.n_addrs >= 0 && a.n_addrs <= BK_DNS_MAX_ADDRS, "n_addrs %d", a.n_addrs);
		for (int i = 0; i < a.n_addrs; i++)
			CHECK(a.addrs[i].family == 4, "an AAAA for an A query");
		int n = bk_dns_reply_answer(qm, &fq, &a, 300, out, sizeof(out));
		if (n > 0) {
			struct bk_dns_answer b;
			CHECK(bk_dns_answer_parse(out, (size_t)n, &fq, &b, &why) == 0, "our own reply does not parse: %s",
			      why);
			CHECK(b.n_chain == a.n_chain && b.n_addrs == a.n_addrs, "read back: chain %d/%d addrs %d/%d",
			      b.n_chain, a.n_chain, b.n_addrs, a.n_addrs);
			for (int i = 0; i < b.n_addrs; i++)
				CHECK(b.addrs[i].ttl <= 300 && !memcmp(b.addrs[i].addr, a.addrs[i].addr, 4), "addr %d", i);
			for (int i = 0; i + 1 < b.n_chain; i++)
				CHECK(b.chain_ttl[i] <= 300 && !strcmp(b.chain[i + 1], a.chain[i + 1]), "chain %d", i);
		} else {
			CHECK(n == -ENOSPC, "reply: %d", n);
		}
	} else {
		CHECK(why && why[0], "an answer refused without a reason");
	}
	free(m);
	return 0;
}
