/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's DNS proxy (names in policy, issue 17). Every exec whose
 * profile lists allow_domains gets its own proxy endpoint in the pod's
 * network namespace — UDP and TCP on 127.0.0.1:P (and [::1]:P where the
 * pod has IPv6 loopback) — and the BPF socket hooks send all of its DNS
 * (port 53, any address, UDP and TCP) there (bpf/egress.bpf.c,
 * bk_dnsproxy). One thread serves every endpoint:
 *   - an exec's query is taken only when well-formed (agent/parse/dns.c),
 *     of class IN and type A, AAAA or CNAME, its name at most
 *     BK_DNSX_NAME_MAX bytes, within the exec's query rate, for a name the
 *     profile allows; anything else is answered REFUSED (FORMERR when
 *     malformed) and filed as a denial (dns_name, dns_rate, dns_malformed);
 *   - an allowed query goes, as a query the proxy builds itself, to the
 *     pod's own resolvers (its resolv.conf), from the pod's namespace;
 *   - the answer's CNAME chain must stay on allowed names (else REFUSED and
 *     a dns_name denial naming the target); its addresses go into the
 *     exec's entries of bk_resolved (the rule's ports, the answer's TTL
 *     bounded to [BK_DNSX_TTL_MIN, BK_DNSX_TTL_MAX]) before the exec gets a
 *     reply built from them alone; the proxy removes each entry when it
 *     expires (BPF already ignores it then) and all of them at the exec's
 *     end. The deny set still wins over them in BPF.
 * An allowed name with one of the pod's search domains appended (what a
 * resolver tries first under ndots) gets NXDOMAIN without a denial: not
 * forwarded either. An upstream answer truncated over UDP (TC) is asked
 * again over TCP of the same upstream (a socket the thread makes in the
 * pod's namespace, entering it for the socket() alone); the TCP answer is
 * taken as a UDP one would be. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "agent/parse/dns.h"
#include "agent/parse/policy.h"
#include "bpf/egress.h"

#define BK_DNSX_NAME_MAX 128  /* bytes of a query's name: longer ones are refused */
#define BK_DNSX_RATE 20       /* queries per second per exec, */
#define BK_DNSX_BURST 40      /* with this burst */
#define BK_DNSX_TTL_MIN 1     /* seconds an allowed address stays at least */
#define BK_DNSX_TTL_MAX 300   /* and at most (and the TTL the exec is told) */
#define BK_DNSX_UPSTREAMS 3
#define BK_DNSX_TIMEOUT_MS 2000 /* per upstream try */
#define BK_DNSX_RESOLVED 256    /* addresses per exec at a time */
#define BK_DNSX_SEARCH 6        /* search domains of the pod's resolv.conf */

struct bk_dnsproxy;
struct bk_dnsx; /* one exec's endpoint */

/* A denial for the exec of cgid: reason BK_R_*, the name (may be ""), the
 * protocol the query came over (IPPROTO_UDP/TCP). */
typedef void (*bk_dnsx_deny_fn)(void *ud, uint64_t cgid, uint32_t reason, const char *name, uint8_t proto);
/* An allowed answer, after its addresses went into bk_resolved: the name
 * asked, its chain, addresses and TTLs, and the rule that allowed it (for
 * the receipt). Called before the exec gets the reply. */
typedef int (*bk_dnsx_resolved_fn)(void *ud, uint64_t cgid, const struct bk_dns_answer *a,
				   const struct bk_domain_rule *rule);

/* resolved_fd: the bk_resolved map. */
int bk_dnsproxy_start(int resolved_fd, bk_dnsx_deny_fn deny, bk_dnsx_resolved_fn resolved, void *ud,
		      struct bk_dnsproxy **out, char *err, size_t errlen);
void bk_dnsproxy_stop(struct bk_dnsproxy *px);

/* An endpoint for one exec: its sockets made in the network namespace of
 * pidfd (then back to self_netns), upstreams and search domains from the
 * pod's resolv.conf (IPv4 as ::ffff:a.b.c.d). *target is what bk_dnsproxy
 * needs. */
int bk_dnsx_open(struct bk_dnsproxy *px, int self_netns, int pidfd, uint64_t cgid, const struct bk_profile *prof,
		 const uint8_t (*upstreams)[16], int n_up, const char (*search)[BK_DNS_NAME_MAX + 1], int n_search,
		 struct bk_dns_target *target, struct bk_dnsx **out, char *err, size_t errlen);
/* The names an exec resolved through its endpoint (for the receipt), each
 * with the addresses its answers gave (IPv4 as ::ffff:a.b.c.d): the first
 * BK_DNSX_SEEN names, BK_DNSX_SEEN_ADDRS addresses each. */
#define BK_DNSX_SEEN 32
#define BK_DNSX_SEEN_ADDRS 8
struct bk_dnsx_seen {
	char name[BK_DNS_NAME_MAX + 1];
	uint8_t addr[BK_DNSX_SEEN_ADDRS][16];
	int n;
};
int bk_dnsx_seen(struct bk_dnsproxy *px, struct bk_dnsx *x, struct bk_dnsx_seen *out, int max);
/* The exec ended: its sockets close, its pending queries go unanswered. */
void bk_dnsx_close(struct bk_dnsproxy *px, struct bk_dnsx *x);
