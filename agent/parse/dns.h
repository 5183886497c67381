/* SPDX-License-Identifier: Apache-2.0 */
/* DNS messages for the agent's DNS proxy (issue 17): an exec's query
 * parsed into a name and type, the reply the proxy sends built from
 * scratch (a refusal, or the validated CNAME chain and addresses of an
 * upstream answer — never the upstream's bytes), the upstream's answer
 * parsed into its CNAME chain and A/AAAA addresses with their TTLs. Pure:
 * no system call; unit-tested and fuzzed. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BK_DNS_T_A 1
#define BK_DNS_T_CNAME 5
#define BK_DNS_T_OPT 41
#define BK_DNS_T_AAAA 28
#define BK_DNS_C_IN 1

#define BK_DNS_NOERROR 0
#define BK_DNS_FORMERR 1
#define BK_DNS_SERVFAIL 2
#define BK_DNS_NXDOMAIN 3
#define BK_DNS_REFUSED 5

#define BK_DNS_NAME_MAX 253 /* text, without the trailing dot */
#define BK_DNS_MAX_CHAIN 8  /* the query's name and up to 7 CNAME targets */
#define BK_DNS_MAX_ADDRS 32
#define BK_DNS_MSG_MAX 4096 /* the largest message the proxy takes or makes */

/* One question, as an exec asked it. */
struct bk_dns_query {
	uint16_t id;
	uint16_t qtype, qclass;
	bool rd;
	char name[BK_DNS_NAME_MAX + 1]; /* lowercase, dotted, no trailing dot ("" = the root) */
	size_t qend;                   /* the offset after the question in the message */
};

struct bk_dns_addr {
	uint8_t family; /* 4 or 6 */
	uint8_t addr[16];
	uint32_t ttl; /* as the upstream said */
};

/* An upstream's answer to one query, as far as the proxy uses it: rcode,
 * the CNAME chain that starts at the question's name (chain[0]) and the
 * addresses of the chain's last name, of the question's type. Records
 * that are not on that chain are dropped. */
struct bk_dns_answer {
	int rcode;
	char chain[BK_DNS_MAX_CHAIN][BK_DNS_NAME_MAX + 1];
	uint32_t chain_ttl[BK_DNS_MAX_CHAIN]; /* TTL of the CNAME record leaving chain[i] */
	int n_chain;
	struct bk_dns_addr addrs[BK_DNS_MAX_ADDRS];
	int n_addrs;
};

/* A query an exec sent: one question, QR=0, opcode QUERY, no answer or
 * authority records, at most one additional (an EDNS0 OPT), names without
 * compression, labels of [a-z0-9_-] (any case). 0, or -EINVAL with *why. */
int bk_dns_query_parse(const uint8_t *m, size_t n, struct bk_dns_query *q, const char **why);
/* A reply to q with rcode and no records (the question copied from the
 * query). Returns its length, or -ENOSPC. */
int bk_dns_reply_empty(const uint8_t *query, const struct bk_dns_query *q, int rcode, uint8_t *out, size_t cap);
/* Parse an upstream's reply to q (same id, same question). 0, or -EINVAL
 * with *why (the proxy answers SERVFAIL). */
int bk_dns_answer_parse(const uint8_t *m, size_t n, const struct bk_dns_query *q, struct bk_dns_answer *a,
			const char **why);
/* The reply the exec gets for an allowed answer: the question, the CNAME
 * chain and the addresses, every TTL bounded by ttl_max. Length or -ENOSPC. */
int bk_dns_reply_answer(const uint8_t *query, const struct bk_dns_query *q, const struct bk_dns_answer *a,
			uint32_t ttl_max, uint8_t *out, size_t cap);
/* A query for name and qtype (the proxy's own, upstream). Length or -EINVAL/-ENOSPC. */
int bk_dns_query_build(uint16_t id, const char *name, uint16_t qtype, uint8_t *out, size_t cap);
