/* SPDX-License-Identifier: Apache-2.0 */
/* Egress profiles: operator-owned (node config only), compiled into the BPF
 * LPM maps at start. A deny set (metadata endpoints, link-local, private
 * ranges, the operator's node/cluster/service CIDRs) overrides every allow
 * rule unless a profile overrides one entry explicitly (logged). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


#define BK_MAX_PROFILES 16
#define BK_MAX_ALLOW 64
#define BK_MAX_OVERRIDES 16
#define BK_MAX_EXTRA_DENY 32
#define BK_MAX_SELECTORS 32
#define BK_MAX_DOMAINS 32
#define BK_DOMAIN_MAX 253 /* bytes of a name, without a trailing dot (RFC 1035) */
#define BK_DOMAIN_PORTS 8

struct bk_cidr {
	uint8_t family; /* 4 or 6 */
	uint8_t plen;
	uint8_t addr[16]; /* v4 in the first 4 bytes, host bits cleared */
};

struct bk_allow_rule {
	struct bk_cidr c;
	uint16_t lo, hi;
	uint8_t protos; /* BK_PROTO_* */
};

/* One allow_domains entry: an exact name ("pypi.org") or a wildcard
 * ("*.pythonhosted.org": any name with at least one more label below the
 * suffix, never the suffix itself), lowercase LDH labels / IDNA A-labels,
 * with the ports (and tcp/udp) its resolved addresses may be reached on. */
struct bk_domain_rule {
	char name[BK_DOMAIN_MAX + 1]; /* as written, "*." included */
	bool wildcard;
	uint8_t protos; /* BK_PROTO_TCP and/or BK_PROTO_UDP */
	uint16_t ports[BK_DOMAIN_PORTS][2];
	int n_ports;
};

struct bk_profile {
	char name[64];
	uint32_t id;
	bool fresh_netns; /* deny-all profiles run in their own netns */
	bool dns;     /* UDP 53 to the pod's resolvers, well-formed queries only */
	bool dns_tcp; /* and TCP 53 to them (unchecked) */
	bool icmp;
	struct bk_allow_rule allow[BK_MAX_ALLOW];
	int n_allow;
	struct bk_cidr overrides[BK_MAX_OVERRIDES];
	int n_over;
	/* names whose answers (through the agent's DNS proxy) open the
	 * returned addresses on the entry's ports; such a profile runs in the
	 * pod's network and its execs reach no resolver but the proxy */
	struct bk_domain_rule domains[BK_MAX_DOMAINS];
	int n_domains;
};

struct bk_selector {
	char ns[128];
	char pod[128]; /* fnmatch pattern */
	char profile[64];
};

struct bk_policy_set {
	struct bk_profile prof[BK_MAX_PROFILES];
	int n;
	struct bk_cidr extra_deny[BK_MAX_EXTRA_DENY]; /* node/cluster/service CIDRs */
	int n_extra;
	char default_profile[64];
	struct bk_selector sel[BK_MAX_SELECTORS];
	int n_sel;
};

struct bk_deny_entry {
	struct bk_cidr c;
	uint32_t reason;
};

int bk_cidr_parse(const char *s, struct bk_cidr *out);
void bk_cidr_format(const struct bk_cidr *c, char *buf, size_t len);
bool bk_cidr_contains(const struct bk_cidr *outer, const struct bk_cidr *inner);
/* "80", "80,443", "8000-8100", "*" -> ranges; returns count or -EINVAL */
int bk_ports_parse(const char *s, uint16_t (*ranges)[2], int max);
/* An allow_domains name: lowercase LDH labels of 1..63 bytes (no leading
 * or trailing '-', "??--" only as the IDNA "xn--"), at least two labels,
 * at most 253 bytes, no trailing dot, a last label that is not all digits
 * (an address is no name), "*." only as the whole first label. 0, or
 * -EINVAL with *why a phrase saying what is wrong. */
int bk_domain_check(const char *name, const char **why);
/* Whether a query name (any case, an optional trailing dot) is one rule
 * admits: exact, or strictly below a wildcard's suffix. */
bool bk_domain_rule_matches(const struct bk_domain_rule *r, const char *qname);
/* The first of p's allow_domains entries admitting qname, or NULL. */
const struct bk_domain_rule *bk_policy_domain(const struct bk_profile *p, const char *qname);

/* Built-in profiles ("isolated", "internet"). */
void bk_policy_defaults(struct bk_policy_set *ps);
/* Parse "profiles", "deny_cidrs", "default_profile", "profile_selectors"
 * from the config root (only the keys present). */
struct cJSON; /* only config.c hands one in: no JSON type reaches the rooms that include this */
int bk_policy_parse(struct bk_policy_set *ps, const struct cJSON *root, char *err, size_t errlen);
/* The deny set of a profile (built-in + extra, minus its overrides). */
int bk_policy_deny_set(const struct bk_policy_set *ps, const struct bk_profile *p, struct bk_deny_entry *out, int max);
const struct bk_profile *bk_policy_find(const struct bk_policy_set *ps, const char *name);
/* Selection: the annotation (if any) picks an existing profile; else the
 * first selector matching namespace and pod name; else the default. NULL
 * and err when the named profile does not exist. */
const struct bk_profile *bk_policy_select(const struct bk_policy_set *ps, const char *ns, const char *pod,
					  const char *annotation, char *err, size_t errlen);
/* What profile p decides for a TCP connect to host:port (host: a /32 or
 * /128), as the BPF programs decide it from the maps compiled from the
 * same profile (bpf/egress.bpf.c decide4/decide6, without the per-exec
 * loopback, pod-self and resolver entries): true when an allow rule admits
 * it and no entry of the deny set holds it; false otherwise, with *reason
 * the BK_R_* it is expected to be denied with (the deny entry's, or
 * not_allowed). verify and the self-test take their
 * expectations from here. */
bool bk_policy_admits_tcp(const struct bk_policy_set *ps, const struct bk_profile *p, const struct bk_cidr *host,
			  uint16_t port, uint32_t *reason);
/* Canonical text of the rules in force (one rule per line). */
int bk_policy_canon(const struct bk_policy_set *ps, const struct bk_profile *p, char *buf, size_t len);
