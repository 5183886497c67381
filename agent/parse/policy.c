/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/parse/policy.h"

#include <cJSON.h>
#include "bpf/egress.h"
#include "lib/err.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <fnmatch.h>
#include <strings.h>

static const struct {
	const char *cidr;
	uint32_t reason;
} builtin_deny[] = {
	{ "169.254.169.254/32", BK_R_METADATA }, { "169.254.170.2/32", BK_R_METADATA },
	{ "100.100.100.200/32", BK_R_METADATA }, { "fd00:ec2::254/128", BK_R_METADATA },
	{ "169.254.0.0/16", BK_R_LINK_LOCAL },   { "fe80::/10", BK_R_LINK_LOCAL },
	{ "10.0.0.0/8", BK_R_PRIVATE },          { "172.16.0.0/12", BK_R_PRIVATE },
	{ "192.168.0.0/16", BK_R_PRIVATE },      { "100.64.0.0/10", BK_R_PRIVATE },
	{ "fc00::/7", BK_R_PRIVATE },            { "0.0.0.0/8", BK_R_LOOPBACK },
	{ "224.0.0.0/4", BK_R_SPECIAL },         { "240.0.0.0/4", BK_R_SPECIAL },
	{ "ff00::/8", BK_R_SPECIAL },
	/* 6to4 and Teredo: tunnels to an IPv4 address the packet does not
	 * name as its destination (its relay decides). Their embedded IPv4
	 * addresses are checked in BPF either way (embedded_reason); a profile
	 * that needs them lifts these with deny_overrides. */
	{ "2002::/16", BK_R_TUNNEL },            { "2001::/32", BK_R_TUNNEL },
};

int bk_cidr_parse(const char *s, struct bk_cidr *out)
{
	memset(out, 0, sizeof(*out));
	char buf[64];
	size_t n = strlen(s);
	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n + 1);
	char *slash = strchr(buf, '/');
	int plen = -1;
	if (slash) {
		*slash = '\0';
		uint64_t v;
		if (parse_u64(slash + 1, &v) < 0 || v > 128)
			return -EINVAL;
		plen = (int)v;
	}
	if (inet_pton(AF_INET, buf, out->addr) == 1) {
		out->family = 4;
		if (plen < 0)
			plen = 32;
		if (plen > 32)
			return -EINVAL;
	} else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
		out->family = 6;
		if (plen < 0)
			plen = 128;
	} else
		return -EINVAL;
	out->plen = (uint8_t)plen;
	int bytes = out->family == 4 ? 4 : 16;
	for (int i = 0; i < bytes; i++) {
		int bits = plen - i * 8;
		if (bits >= 8)
			continue;
		out->addr[i] &= bits <= 0 ? 0 : (uint8_t)(0xff << (8 - bits));
	}
	return 0;
}

void bk_cidr_format(const struct bk_cidr *c, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";
	inet_ntop(c->family == 4 ? AF_INET : AF_INET6, c->addr, a, sizeof(a));
	snprintf(buf, len, "%s/%u", a, c->plen);
}

bool bk_cidr_contains(const struct bk_cidr *o, const struct bk_cidr *in)
{
	if (o->family != in->family || o->plen > in->plen)
		return false;
	for (int i = 0; i < o->plen; i++) {
		int b = i / 8, m = 0x80 >> (i % 8);
		if ((o->addr[b] & m) != (in->addr[b] & m))
			return false;
	}
	return true;
}

int bk_ports_parse(const char *s, uint16_t (*ranges)[2], int max)
{
	if (streq(s, "*")) {
		if (max < 1)
			return -EINVAL;
		ranges[0][0] = 1;
		ranges[0][1] = 65535;
		return 1;
	}
	char buf[256];
	size_t sl = strlen(s);
	if (sl >= sizeof(buf) || !s[0] || s[0] == ',' || s[sl - 1] == ',' || strstr(s, ",,"))
		return -EINVAL;
	strcpy(buf, s);
	int n = 0;
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (n == max)
			return -EINVAL;
		char *dash = strchr(t, '-');
		uint64_t lo, hi;
		if (dash) {
			*dash = '\0';
			if (parse_u64(t, &lo) < 0 || parse_u64(dash + 1, &hi) < 0)
				return -EINVAL;
		} else {
			if (parse_u64(t, &lo) < 0)
				return -EINVAL;
			hi = lo;
		}
		if (lo < 1 || hi > 65535 || lo > hi)
			return -EINVAL;
		ranges[n][0] = (uint16_t)lo;
		ranges[n][1] = (uint16_t)hi;
		n++;
	}
	return n;
}

int bk_domain_check(const char *name, const char **why)
{
	size_t n = strlen(name);
	const char *s = name;
	if (n == 0)
		return *why = "an empty name", -EINVAL;
	if (n > BK_DOMAIN_MAX)
		return *why = "longer than 253 bytes", -EINVAL;
	if (name[n - 1] == '.')
		return *why = "no trailing dot", -EINVAL;
	if (s[0] == '*') {
		if (s[1] != '.')
			return *why = "a wildcard is the whole first label (\"*.example.com\")", -EINVAL;
		s += 2;
	}
	int labels = 0;
	bool last_numeric = false;
	while (*s) {
		const char *dot = strchr(s, '.');
		size_t l = dot ? (size_t)(dot - s) : strlen(s);
		if (l == 0)
			return *why = "an empty label", -EINVAL;
		if (l > 63)
			return *why = "a label longer than 63 bytes", -EINVAL;
		last_numeric = true;
		for (size_t i = 0; i < l; i++) {
			char c = s[i];
			if (c == '*')
				return *why = "a wildcard only as the whole first label", -EINVAL;
			if (c >= 'A' && c <= 'Z')
				return *why = "names are lowercase", -EINVAL;
			if ((unsigned char)c >= 0x80)
				return *why = "not ASCII: write the IDNA A-label (xn--...)", -EINVAL;
			if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
				return *why = "a label holds only a-z, 0-9 and '-'", -EINVAL;
			if (!(c >= '0' && c <= '9'))
				last_numeric = false;
		}
		if (s[0] == '-' || s[l - 1] == '-')
			return *why = "a label neither starts nor ends with '-'", -EINVAL;
		if (l >= 4 && s[2] == '-' && s[3] == '-' && !(s[0] == 'x' && s[1] == 'n'))
			return *why = "'--' in the third and fourth places only as the IDNA \"xn--\"", -EINVAL;
		labels++;
		s += l;
		if (*s == '.')
			s++;
	}
	if (labels < 2)
		return *why = name[0] == '*' ? "a wildcard under a single label is too broad"
					     : "a single label is no fully qualified name", -EINVAL;
	if (last_numeric)
		return *why = "an address is no name (allow it with a cidr)", -EINVAL;
	return 0;
}

bool bk_domain_rule_matches(const struct bk_domain_rule *r, const char *qname)
{
	size_t ql = strlen(qname);
	if (ql && qname[ql - 1] == '.')
		ql--;
	const char *rn = r->wildcard ? r->name + 2 : r->name;
	size_t rl = strlen(rn);
	if (r->wildcard) {
		/* at least one label, then ".suffix" */
		if (ql < rl + 2 || qname[ql - rl - 1] != '.')
			return false;
		return strncasecmp(qname + ql - rl, rn, rl) == 0;
	}
	return ql == rl && strncasecmp(qname, rn, rl) == 0;
}

const struct bk_domain_rule *bk_policy_domain(const struct bk_profile *p, const char *qname)
{
	for (int i = 0; i < p->n_domains; i++)
		if (bk_domain_rule_matches(&p->domains[i], qname))
			return &p->domains[i];
	return NULL;
}

static struct bk_profile *add_profile(struct bk_policy_set *ps, const char *name)
{
	for (int i = 0; i < ps->n; i++)
		if (streq(ps->prof[i].name, name)) {
			uint32_t id = ps->prof[i].id;
			memset(&ps->prof[i], 0, sizeof(ps->prof[i]));
			snprintf(ps->prof[i].name, sizeof(ps->prof[i].name), "%s", name);
			ps->prof[i].id = id;
			return &ps->prof[i];
		}
	if (ps->n == BK_MAX_PROFILES)
		return NULL;
	struct bk_profile *p = &ps->prof[ps->n];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->id = (uint32_t)ps->n + 1;
	ps->n++;
	return p;
}

static void add_allow(struct bk_profile *p, const char *cidr, uint16_t lo, uint16_t hi, uint8_t protos)
{
	struct bk_allow_rule *r = &p->allow[p->n_allow++];
	bk_cidr_parse(cidr, &r->c);
	r->lo = lo;
	r->hi = hi;
	r->protos = protos;
}

void bk_policy_defaults(struct bk_policy_set *ps)
{
	memset(ps, 0, sizeof(*ps));
	struct bk_profile *iso = add_profile(ps, "isolated");
	iso->fresh_netns = true;
	struct bk_profile *inet = add_profile(ps, "internet");
	inet->dns = true;
	add_allow(inet, "0.0.0.0/0", 80, 80, BK_PROTO_TCP);
	add_allow(inet, "0.0.0.0/0", 443, 443, BK_PROTO_TCP);
	add_allow(inet, "::/0", 80, 80, BK_PROTO_TCP);
	add_allow(inet, "::/0", 443, 443, BK_PROTO_TCP);
	strcpy(ps->default_profile, "isolated");
}

static bool name_ok(const char *n)
{
	size_t l = strlen(n);
	if (l == 0 || l >= 64)
		return false;
	for (const char *p = n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
			return false;
	return true;
}

static bool in_builtin_deny(const struct bk_policy_set *ps, const struct bk_cidr *c)
{
	for (size_t i = 0; i < ARRAY_SIZE(builtin_deny); i++) {
		struct bk_cidr d;
		bk_cidr_parse(builtin_deny[i].cidr, &d);
		if (d.family == c->family && d.plen == c->plen && !memcmp(d.addr, c->addr, 16))
			return true;
	}
	for (int i = 0; i < ps->n_extra; i++) {
		const struct bk_cidr *d = &ps->extra_deny[i];
		if (d->family == c->family && d->plen == c->plen && !memcmp(d->addr, c->addr, 16))
			return true;
	}
	return false;
}

/* "allow_domains": [ {"name": N, "ports": P, "proto": "tcp"|"udp"|"any"}, ... ] */
static int parse_domains(struct bk_profile *p, const cJSON *doms, char *err, size_t errlen)
{
	if (!cJSON_IsArray(doms) || cJSON_GetArraySize(doms) == 0)
		return bk_fail_buf(err, errlen, -EINVAL,
				   "config: profile %s: allow_domains is a non-empty array of {\"name\", \"ports\"}", p->name);
	const cJSON *it;
	int idx = 0;
	cJSON_ArrayForEach(it, doms)
	{
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
		if (!cJSON_IsObject(it) || !cJSON_IsString(nm))
			return bk_fail_buf(err, errlen, -EINVAL,
					   "config: profile %s: allow_domains entry %d: an object with a string \"name\"",
					   p->name, idx);
		const char *name = nm->valuestring;
		const cJSON *k;
		cJSON_ArrayForEach(k, it)
		{
			if (!streq(k->string, "name") && !streq(k->string, "ports") && !streq(k->string, "proto"))
				return bk_fail_buf(err, errlen, -EINVAL,
						   "config: profile %s: allow_domains entry \"%.80s\": unknown key \"%.40s\"",
						   p->name, name, k->string);
		}
		const char *why = NULL;
		if (bk_domain_check(name, &why) < 0)
			return bk_fail_buf(err, errlen, -EINVAL, "config: profile %s: allow_domains entry \"%.80s%s\": %s",
					   p->name, name, strlen(name) > 80 ? "..." : "", why);
		for (int i = 0; i < p->n_domains; i++)
			if (streq(p->domains[i].name, name))
				return bk_fail_buf(err, errlen, -EINVAL,
						   "config: profile %s: allow_domains entry \"%s\" is listed twice", p->name,
						   name);
		if (p->n_domains == BK_MAX_DOMAINS)
			return bk_fail_buf(err, errlen, -EINVAL,
					   "config: profile %s: allow_domains entry \"%s\": more than %d entries", p->name,
					   name, BK_MAX_DOMAINS);
		struct bk_domain_rule *r = &p->domains[p->n_domains];
		memset(r, 0, sizeof(*r));
		snprintf(r->name, sizeof(r->name), "%s", name);
		r->wildcard = name[0] == '*';
		const cJSON *pr = cJSON_GetObjectItemCaseSensitive(it, "proto");
		const char *prs = cJSON_IsString(pr) ? pr->valuestring : pr ? "" : "tcp";
		if (streq(prs, "tcp"))
			r->protos = BK_PROTO_TCP;
		else if (streq(prs, "udp"))
			r->protos = BK_PROTO_UDP;
		else if (streq(prs, "any"))
			r->protos = BK_PROTO_TCP | BK_PROTO_UDP;
		else
			return bk_fail_buf(err, errlen, -EINVAL,
					   "config: profile %s: allow_domains entry \"%s\": proto is tcp, udp or any", p->name,
					   name);
		const cJSON *po = cJSON_GetObjectItemCaseSensitive(it, "ports");
		r->n_ports = cJSON_IsString(po) ? bk_ports_parse(po->valuestring, r->ports, BK_DOMAIN_PORTS) : -EINVAL;
		if (r->n_ports <= 0)
			return bk_fail_buf(err, errlen, -EINVAL,
					   "config: profile %s: allow_domains entry \"%s\": ports like \"443\", \"80,443\", "
					   "\"8000-8100\" or \"*\" (at most %d ranges)", p->name, name, BK_DOMAIN_PORTS);
		p->n_domains++;
		idx++;
	}
	return 0;
}

static int parse_profile(struct bk_policy_set *ps, const cJSON *pj, struct bk_profile *p, char *err, size_t errlen)
{
	static const char *const keys[] = { "netns", "allow", "dns", "dns_tcp", "icmp", "deny_overrides",
					    "allow_domains", NULL };
	const cJSON *it;
	cJSON_ArrayForEach(it, pj)
	{
		bool ok = false;
		for (int k = 0; keys[k]; k++)
			ok |= streq(it->string, keys[k]);
		if (!ok)
			return bk_fail_buf(err, errlen, -EINVAL,
					   "config: profile %s: unknown key \"%s\"", p->name, it->string);
	}
	const cJSON *netns = cJSON_GetObjectItemCaseSensitive(pj, "netns");
	const cJSON *allow = cJSON_GetObjectItemCaseSensitive(pj, "allow");
	const cJSON *dns = cJSON_GetObjectItemCaseSensitive(pj, "dns");
	const cJSON *icmp = cJSON_GetObjectItemCaseSensitive(pj, "icmp");
	const cJSON *dns_tcp = cJSON_GetObjectItemCaseSensitive(pj, "dns_tcp");
	const cJSON *ovr = cJSON_GetObjectItemCaseSensitive(pj, "deny_overrides");
	if ((dns && !cJSON_IsBool(dns)) || (icmp && !cJSON_IsBool(icmp)))
		return bk_fail_buf(err, errlen, -EINVAL, "config: profile %s: dns and icmp are booleans", p->name);
	p->dns = cJSON_IsTrue(dns);
	p->icmp = cJSON_IsTrue(icmp);
	if (dns_tcp && (!cJSON_IsBool(dns_tcp) || (cJSON_IsTrue(dns_tcp) && !p->dns)))
		return bk_fail_buf(err, errlen, -EINVAL, "config: profile %s: dns_tcp is a boolean and needs \"dns\": true",
				   p->name);
	p->dns_tcp = cJSON_IsTrue(dns_tcp);
	if (allow) {
		if (!cJSON_IsArray(allow))
			return bk_fail_buf(err, errlen, -EINVAL, "config: profile %s: allow must be an array", p->name);
		cJSON_ArrayForEach(it, allow)
		{
			const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "cidr");
			const cJSON *po = cJSON_GetObjectItemCaseSensitive(it, "ports");
			const cJSON *pr = cJSON_GetObjectItemCaseSensitive(it, "proto");
			struct bk_cidr cidr;
			if (!cJSON_IsString(c) || bk_cidr_parse(c->valuestring, &cidr) < 0)
				return bk_fail_buf(err, errlen, -EINVAL,
						   "config: profile %s: bad cidr in allow", p->name);
			uint8_t protos = 0;
			const char *ps_ = cJSON_IsString(pr) ? pr->valuestring : "tcp";
			if (streq(ps_, "tcp"))
				protos = BK_PROTO_TCP;
			else if (streq(ps_, "udp"))
				protos = BK_PROTO_UDP;
			else if (streq(ps_, "icmp"))
				protos = BK_PROTO_ICMP;
			else if (streq(ps_, "any"))
				protos = BK_PROTO_TCP | BK_PROTO_UDP | BK_PROTO_ICMP;
			else
				return bk_fail_buf(err, errlen, -EINVAL,
						   "config: profile %s: proto is tcp, udp, icmp or any", p->name);
			uint16_t rg[16][2];
			int nr = 1;
			rg[0][0] = 0;
			rg[0][1] = 0;
			if (protos != BK_PROTO_ICMP) {
				nr = bk_ports_parse(cJSON_IsString(po) ? po->valuestring : "", rg, 16);
				if (nr <= 0)
					return bk_fail_buf(err, errlen, -EINVAL,
							   "config: profile %s: ports like \"80,443\", \"8000-8100\" or \"*\"",
							   p->name);
			}
			for (int k = 0; k < nr; k++) {
				if (p->n_allow == BK_MAX_ALLOW)
					return bk_fail_buf(err, errlen, -EINVAL,
							   "config: profile %s: more than %d allow rules",
							   p->name, BK_MAX_ALLOW);
				struct bk_allow_rule *r = &p->allow[p->n_allow++];
				r->c = cidr;
				r->lo = rg[k][0];
				r->hi = rg[k][1];
				r->protos = protos;
			}
		}
	}
	if (ovr) {
		if (!cJSON_IsArray(ovr))
			return bk_fail_buf(err, errlen, -EINVAL,
					   "config: profile %s: deny_overrides must be an array", p->name);
		cJSON_ArrayForEach(it, ovr)
		{
			struct bk_cidr c;
			if (!cJSON_IsString(it) || bk_cidr_parse(it->valuestring, &c) < 0)
				return bk_fail_buf(err, errlen, -EINVAL,
						   "config: profile %s: bad cidr in deny_overrides", p->name);
			if (!in_builtin_deny(ps, &c))
				return bk_fail_buf(err, errlen, -EINVAL,
						   "config: profile %s: deny_overrides entry %s is not an entry of the deny set",
						   p->name, it->valuestring);
			if (p->n_over == BK_MAX_OVERRIDES)
				return bk_fail_buf(err, errlen, -EINVAL,
						   "config: profile %s: too many deny_overrides", p->name);
			p->overrides[p->n_over++] = c;
		}
	}
	const cJSON *doms = cJSON_GetObjectItemCaseSensitive(pj, "allow_domains");
	if (doms) {
		int r = parse_domains(p, doms, err, errlen);
		if (r < 0)
			return r;
		if (p->dns || p->dns_tcp)
			return bk_fail_buf(err, errlen, -EINVAL,
					   "config: profile %s: with allow_domains, DNS goes only through the agent's proxy: "
					   "leave out \"dns\" and \"dns_tcp\"", p->name);
		if (netns && cJSON_IsString(netns) && streq(netns->valuestring, "fresh"))
			return bk_fail_buf(err, errlen, -EINVAL,
					   "config: profile %s: allow_domains needs the pod's network (\"netns\": \"pod\")",
					   p->name);
	}
	if (netns) {
		if (!cJSON_IsString(netns) || (!streq(netns->valuestring, "fresh") && !streq(netns->valuestring, "pod")))
			return bk_fail_buf(err, errlen, -EINVAL,
					   "config: profile %s: netns is \"fresh\" or \"pod\"", p->name);
		p->fresh_netns = streq(netns->valuestring, "fresh");
	} else {
		p->fresh_netns = p->n_allow == 0 && !p->dns && p->n_domains == 0;
	}
	return 0;
}

int bk_policy_parse(struct bk_policy_set *ps, const cJSON *root, char *err, size_t errlen)
{
	const cJSON *extra = cJSON_GetObjectItemCaseSensitive(root, "deny_cidrs");
	const cJSON *it;
	if (extra) {
		if (!cJSON_IsArray(extra))
			return bk_fail_buf(err, errlen, -EINVAL, "config: deny_cidrs must be an array of CIDRs");
		cJSON_ArrayForEach(it, extra)
		{
			if (ps->n_extra == BK_MAX_EXTRA_DENY)
				return bk_fail_buf(err, errlen, -EINVAL,
						   "config: at most %d deny_cidrs", BK_MAX_EXTRA_DENY);
			if (!cJSON_IsString(it) || bk_cidr_parse(it->valuestring, &ps->extra_deny[ps->n_extra]) < 0)
				return bk_fail_buf(err, errlen, -EINVAL, "config: bad CIDR in deny_cidrs");
			ps->n_extra++;
		}
	}
	const cJSON *profs = cJSON_GetObjectItemCaseSensitive(root, "profiles");
	if (profs) {
		if (!cJSON_IsObject(profs))
			return bk_fail_buf(err, errlen, -EINVAL,
					   "config: profiles must be an object of name -> profile");
		cJSON_ArrayForEach(it, profs)
		{
			if (!name_ok(it->string) || !cJSON_IsObject(it))
				return bk_fail_buf(err, errlen, -EINVAL,
						   "config: profile names are [a-z0-9_-]{1,63} and profiles are objects");
			struct bk_profile *p = add_profile(ps, it->string);
			if (!p)
				return bk_fail_buf(err, errlen, -EINVAL,
						   "config: at most %d profiles", BK_MAX_PROFILES);
			int r = parse_profile(ps, it, p, err, errlen);
			if (r < 0)
				return r;
		}
	}
	const cJSON *def = cJSON_GetObjectItemCaseSensitive(root, "default_profile");
	if (def) {
		if (!cJSON_IsString(def) || !bk_policy_find(ps, def->valuestring))
			return bk_fail_buf(err, errlen, -EINVAL, "config: default_profile must name a profile");
		snprintf(ps->default_profile, sizeof(ps->default_profile), "%s", def->valuestring);
	}
	const cJSON *sels = cJSON_GetObjectItemCaseSensitive(root, "profile_selectors");
	if (sels) {
		if (!cJSON_IsArray(sels))
			return bk_fail_buf(err, errlen, -EINVAL, "config: profile_selectors must be an array");
		cJSON_ArrayForEach(it, sels)
		{
			const cJSON *ns = cJSON_GetObjectItemCaseSensitive(it, "namespace");
			const cJSON *pod = cJSON_GetObjectItemCaseSensitive(it, "pod");
			const cJSON *prof = cJSON_GetObjectItemCaseSensitive(it, "profile");
			if (ps->n_sel == BK_MAX_SELECTORS)
				return bk_fail_buf(err, errlen, -EINVAL,
						   "config: at most %d profile_selectors", BK_MAX_SELECTORS);
			if (!cJSON_IsString(prof) || !bk_policy_find(ps, prof->valuestring) || (ns && !cJSON_IsString(ns)) ||
			    (pod && !cJSON_IsString(pod)))
				return bk_fail_buf(err, errlen, -EINVAL,
						   "config: a profile selector has \"namespace\", \"pod\" (a pattern) and an existing \"profile\"");
			struct bk_selector *s = &ps->sel[ps->n_sel++];
			snprintf(s->ns, sizeof(s->ns), "%s", ns ? ns->valuestring : "*");
			snprintf(s->pod, sizeof(s->pod), "%s", pod ? pod->valuestring : "*");
			snprintf(s->profile, sizeof(s->profile), "%s", prof->valuestring);
		}
	}
	return 0;
}

const struct bk_profile *bk_policy_find(const struct bk_policy_set *ps, const char *name)
{
	for (int i = 0; i < ps->n; i++)
		if (streq(ps->prof[i].name, name))
			return &ps->prof[i];
	return NULL;
}

const struct bk_profile *bk_policy_select(const struct bk_policy_set *ps, const char *ns, const char *pod,
					  const char *annotation, char *err, size_t errlen)
{
	if (annotation && annotation[0]) {
		const struct bk_profile *p = bk_policy_find(ps, annotation);
		if (!p)
			snprintf(err, errlen, "the pod's boxkite.dev/egress-policy names \"%.64s\", which is no profile of this node",
				 annotation);
		return p;
	}
	for (int i = 0; i < ps->n_sel; i++)
		if (fnmatch(ps->sel[i].ns, ns, 0) == 0 && fnmatch(ps->sel[i].pod, pod, 0) == 0)
			return bk_policy_find(ps, ps->sel[i].profile);
	const struct bk_profile *p = bk_policy_find(ps, ps->default_profile);
	if (!p)
		snprintf(err, errlen, "the default profile does not exist");
	return p;
}

int bk_policy_deny_set(const struct bk_policy_set *ps, const struct bk_profile *p, struct bk_deny_entry *out, int max)
{
	int n = 0;
	for (size_t i = 0; i < ARRAY_SIZE(builtin_deny) + (size_t)ps->n_extra; i++) {
		struct bk_deny_entry e;
		if (i < ARRAY_SIZE(builtin_deny)) {
			bk_cidr_parse(builtin_deny[i].cidr, &e.c);
			e.reason = builtin_deny[i].reason;
		} else {
			e.c = ps->extra_deny[i - ARRAY_SIZE(builtin_deny)];
			e.reason = BK_R_CLUSTER;
		}
		bool overridden = false;
		for (int k = 0; k < p->n_over; k++)
			if (p->overrides[k].family == e.c.family && p->overrides[k].plen == e.c.plen &&
			    !memcmp(p->overrides[k].addr, e.c.addr, 16))
				overridden = true;
		if (overridden)
			continue;
		if (n == max)
			return -E2BIG;
		out[n++] = e;
	}
	return n;
}

bool bk_policy_admits_tcp(const struct bk_policy_set *ps, const struct bk_profile *p, const struct bk_cidr *host,
			  uint16_t port, uint32_t *reason)
{
	struct bk_deny_entry d[64];
	int n = bk_policy_deny_set(ps, p, d, (int)ARRAY_SIZE(d));
	/* the deny maps are LPM: the longest entry holding host names the reason */
	int best = -1;
	for (int i = 0; i < n; i++)
		if (bk_cidr_contains(&d[i].c, host) && (best < 0 || d[i].c.plen > d[best].c.plen))
			best = i;
	if (best >= 0) {
		*reason = d[best].reason;
		return false;
	}
	if (host->family == 4 && host->addr[0] == 127) {
		*reason = BK_R_LOOPBACK;
		return false;
	}
	/* a more specific allow prefix carries the ports of every rule that
	 * contains it (filter.c): any rule holding host admits */
	for (int i = 0; i < p->n_allow; i++) {
		const struct bk_allow_rule *r = &p->allow[i];
		if ((r->protos & BK_PROTO_TCP) && bk_cidr_contains(&r->c, host) && port >= r->lo && port <= r->hi)
			return true;
	}
	*reason = p->id ? BK_R_NOT_ALLOWED : BK_R_DENY_ALL; /* as decide4: ids start at 1 */
	return false;
}

static const char *protos_name(uint8_t p)
{
	switch (p) {
	case BK_PROTO_TCP: return "tcp";
	case BK_PROTO_UDP: return "udp";
	case BK_PROTO_ICMP: return "icmp";
	default: return "any";
	}
}

int bk_policy_canon(const struct bk_policy_set *ps, const struct bk_profile *p, char *buf, size_t len)
{
	size_t off = 0;
#define PUT(...)                                                                    \
	do {                                                                        \
		int w_ = snprintf(buf + off, len - off, __VA_ARGS__);               \
		if (w_ < 0 || (size_t)w_ >= len - off)                              \
			return -ENOSPC;                                             \
		off += (size_t)w_;                                                  \
	} while (0)
	PUT("profile %s\nnetns %s\ndns %s\ndns_tcp %s\nicmp %s\n", p->name, p->fresh_netns ? "fresh" : "pod",
	    p->dns ? "on" : "off", p->dns_tcp ? "on" : "off", p->icmp ? "on" : "off");
	char c[64];
	for (int i = 0; i < p->n_allow; i++) {
		bk_cidr_format(&p->allow[i].c, c, sizeof(c));
		PUT("allow %s %s %u-%u\n", c, protos_name(p->allow[i].protos), p->allow[i].lo, p->allow[i].hi);
	}
	struct bk_deny_entry d[64];
	int n = bk_policy_deny_set(ps, p, d, 64);
	for (int i = 0; i < n; i++) {
		bk_cidr_format(&d[i].c, c, sizeof(c));
		PUT("deny %s %u\n", c, d[i].reason);
	}
	for (int i = 0; i < p->n_over; i++) {
		bk_cidr_format(&p->overrides[i], c, sizeof(c));
		PUT("override %s\n", c);
	}
	for (int i = 0; i < p->n_domains; i++) {
		const struct bk_domain_rule *r = &p->domains[i];
		PUT("domain %s %s", r->name, protos_name(r->protos));
		for (int k = 0; k < r->n_ports; k++)
			PUT("%s%u-%u", k ? "," : " ", r->ports[k][0], r->ports[k][1]);
		PUT("\n");
	}
#undef PUT
	return (int)off;
}
