/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bpf/egress.h"
#include "agent/parse/config.h"
#include "agent/parse/policy.h"
#include "lib/util.h"

static void cidrs(void **st)
{
	struct bk_cidr c, d;
	char buf[64];
	assert_int_equal(bk_cidr_parse("10.1.2.3/8", &c), 0);
	bk_cidr_format(&c, buf, sizeof(buf));
	assert_string_equal(buf, "10.0.0.0/8"); /* host bits cleared */
	assert_int_equal(bk_cidr_parse("169.254.169.254", &c), 0);
	assert_int_equal(c.plen, 32);
	assert_int_equal(bk_cidr_parse("fd00:ec2::254/128", &c), 0);
	assert_int_equal(c.family, 6);
	assert_int_equal(bk_cidr_parse("::/0", &c), 0);
	assert_int_equal(c.plen, 0);
	static const char *bad[] = { "", "10.0.0.0/33", "1.2.3", "::/129", "x/8", "10.0.0.0/", "10.0.0.0/-1",
				     "10.0.0.0/8/8", "300.1.1.1" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(bk_cidr_parse(bad[i], &c), -EINVAL);
	bk_cidr_parse("10.0.0.0/8", &c);
	bk_cidr_parse("10.96.0.1/32", &d);
	assert_true(bk_cidr_contains(&c, &d));
	assert_false(bk_cidr_contains(&d, &c));
	bk_cidr_parse("11.0.0.0/8", &d);
	assert_false(bk_cidr_contains(&c, &d));
	bk_cidr_parse("::/0", &d);
	assert_false(bk_cidr_contains(&d, &c)); /* families never mix */
}

static void ports(void **st)
{
	uint16_t r[4][2];
	assert_int_equal(bk_ports_parse("80", r, 4), 1);
	assert_int_equal(bk_ports_parse("80,443,8000-8100", r, 4), 3);
	assert_int_equal(r[2][0], 8000);
	assert_int_equal(r[2][1], 8100);
	assert_int_equal(bk_ports_parse("*", r, 4), 1);
	assert_int_equal(r[0][1], 65535);
	static const char *bad[] = { "", "0", "65536", "90-80", "a", "1,2,3,4,5", "80-", "-80", "80,,81" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_true(bk_ports_parse(bad[i], r, 4) < 0);
}

static int parse(struct bk_config *c, const char *json)
{
	char err[256] = "";
	bk_config_defaults(c);
	return bk_config_parse(c, json, strlen(json), err, sizeof(err));
}

static void profiles_and_selection(void **st)
{
	struct bk_config *c = calloc(1, sizeof(*c));
	char err[256];
	assert_int_equal(parse(c, "{\"deny_cidrs\":[\"10.96.0.0/12\"],\"profiles\":{\"web\":{\"allow\":[{\"cidr\":\"203.0.113.0/24\","
				  "\"ports\":\"80,443\"}],\"deny_overrides\":[\"100.64.0.0/10\"]}},"
				  "\"profile_selectors\":[{\"namespace\":\"team-*\",\"pod\":\"web-*\",\"profile\":\"web\"}]}"),
			 0);
	const struct bk_profile *p = bk_policy_select(&c->policy, "team-a", "web-1", "", err, sizeof(err));
	assert_non_null(p);
	assert_string_equal(p->name, "web");
	assert_false(p->fresh_netns); /* it allows something: pod network */
	assert_int_equal(p->n_allow, 2);
	p = bk_policy_select(&c->policy, "other", "web-1", "", err, sizeof(err));
	assert_string_equal(p->name, "isolated");
	assert_true(p->fresh_netns);
	/* the annotation picks an existing profile, never an unknown one */
	p = bk_policy_select(&c->policy, "other", "x", "internet", err, sizeof(err));
	assert_string_equal(p->name, "internet");
	assert_null(bk_policy_select(&c->policy, "other", "x", "everything", err, sizeof(err)));
	/* deny set: the override removes exactly that entry; the extra CIDR is in */
	struct bk_deny_entry d[64];
	const struct bk_profile *web = bk_policy_find(&c->policy, "web");
	int n = bk_policy_deny_set(&c->policy, web, d, 64);
	bool cgnat = false, cluster = false, metadata = false, sixtofour = false, teredo = false;
	for (int i = 0; i < n; i++) {
		char b[64];
		bk_cidr_format(&d[i].c, b, sizeof(b));
		sixtofour |= streq(b, "2002::/16") && d[i].reason == BK_R_TUNNEL;
		teredo |= streq(b, "2001::/32") && d[i].reason == BK_R_TUNNEL;
		cgnat |= streq(b, "100.64.0.0/10");
		cluster |= streq(b, "10.96.0.0/12") && d[i].reason == BK_R_CLUSTER;
		metadata |= streq(b, "169.254.169.254/32") && d[i].reason == BK_R_METADATA;
	}
	assert_false(cgnat);
	assert_true(sixtofour); /* tunnels: denied unless a profile lifts them */
	assert_true(teredo);
	assert_true(cluster);
	assert_true(metadata);
	/* canonical text: stable, and different per profile */
	char a[8192], b2[8192];
	assert_true(bk_policy_canon(&c->policy, web, a, sizeof(a)) > 0);
	assert_true(bk_policy_canon(&c->policy, bk_policy_find(&c->policy, "internet"), b2, sizeof(b2)) > 0);
	assert_string_not_equal(a, b2);
	assert_non_null(strstr(a, "override 100.64.0.0/10"));
	assert_non_null(strstr(a, "dns_tcp off"));
	free(c);
}

/* What verify and the self-test expect of a TCP probe, as BPF decides it. */
static void admits(void **st)
{
	struct bk_config *c = calloc(1, sizeof(*c));
	assert_int_equal(parse(c, "{\"deny_cidrs\":[\"10.96.0.0/12\"],\"profiles\":{\"podweb\":{\"allow\":["
				  "{\"cidr\":\"10.244.1.5/32\",\"proto\":\"tcp\",\"ports\":\"8080\"},"
				  "{\"cidr\":\"203.0.113.0/24\",\"proto\":\"udp\",\"ports\":\"443\"}],"
				  "\"deny_overrides\":[\"10.0.0.0/8\"]}}}"),
			 0);
	static const struct {
		const char *profile, *host;
		uint16_t port;
		bool allowed;
		uint32_t reason;
	} cases[] = {
		{ "isolated", "203.0.113.10", 443, false, BK_R_NOT_ALLOWED },
		{ "isolated", "169.254.169.254", 80, false, BK_R_METADATA },
		{ "internet", "203.0.113.10", 443, true, 0 },
		{ "internet", "203.0.113.10", 8080, false, BK_R_NOT_ALLOWED },
		{ "internet", "2001:db8::10", 80, true, 0 },
		{ "internet", "169.254.169.254", 80, false, BK_R_METADATA },  /* longest deny entry: not link_local */
		{ "internet", "169.254.1.1", 80, false, BK_R_LINK_LOCAL },
		{ "internet", "10.96.0.1", 443, false, BK_R_CLUSTER },
		{ "internet", "10.244.1.5", 80, false, BK_R_PRIVATE },
		{ "internet", "127.0.0.1", 80, false, BK_R_LOOPBACK },
		{ "podweb", "10.244.1.5", 8080, true, 0 },                      /* 10/8 overridden */
		{ "podweb", "10.244.1.5", 80, false, BK_R_NOT_ALLOWED },
		{ "podweb", "10.96.0.1", 443, false, BK_R_CLUSTER },            /* the cluster CIDR stays */
		{ "podweb", "203.0.113.10", 443, false, BK_R_NOT_ALLOWED },     /* a UDP rule admits no TCP */
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct bk_cidr h;
		assert_int_equal(bk_cidr_parse(cases[i].host, &h), 0);
		uint32_t why = 0;
		bool a = bk_policy_admits_tcp(&c->policy, bk_policy_find(&c->policy, cases[i].profile), &h, cases[i].port, &why);
		if (a != cases[i].allowed || (!a && why != cases[i].reason))
			fail_msg("%s %s:%u: allowed %d reason %u", cases[i].profile, cases[i].host, cases[i].port, a, why);
	}
	free(c);
}

static void profiles_refused(void **st)
{
	struct bk_config *c = calloc(1, sizeof(*c));
	static const char *bad[] = {
		"{\"profiles\":{\"x\":{\"allow\":[{\"cidr\":\"nope\",\"ports\":\"80\"}]}}}",
		"{\"profiles\":{\"x\":{\"dns_tcp\":true}}}", /* TCP DNS without DNS */
		"{\"profiles\":{\"x\":{\"dns\":true,\"dns_tcp\":1}}}",
		"{\"profiles\":{\"x\":{\"allow\":[{\"cidr\":\"1.2.3.0/24\",\"ports\":\"0\"}]}}}",
		"{\"profiles\":{\"x\":{\"allow\":[{\"cidr\":\"1.2.3.0/24\",\"ports\":\"80\",\"proto\":\"sctp\"}]}}}",
		/* an override must be an entry of the deny set, not a wildcard */
		"{\"profiles\":{\"x\":{\"deny_overrides\":[\"0.0.0.0/0\"]}}}",
		"{\"profiles\":{\"x\":{\"surprise\":1}}}",
		"{\"profiles\":{\"Bad Name\":{}}}",
		"{\"default_profile\":\"missing\"}",
		"{\"profile_selectors\":[{\"namespace\":\"a\",\"profile\":\"missing\"}]}",
		"{\"deny_cidrs\":[\"x\"]}",
		"{\"profiles\":{\"x\":{\"netns\":\"host\"}}}",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(parse(c, bad[i]), -EINVAL);
	free(c);
}

/* allow_domains names: what is accepted, and why each refusal is one */
static void domain_names(void **st)
{
	static const char *good[] = {
		"pypi.org", "*.pythonhosted.org", "files.pythonhosted.org", "xn--bcher-kva.example", "a.b.c.d.e.f",
		"x1.io", "123.example.com", "a-b.example", "*.a.b",
		/* 63-byte label */
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example",
	};
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		const char *why = NULL;
		if (bk_domain_check(good[i], &why) != 0)
			fail_msg("refused \"%s\": %s", good[i], why);
	}
	static const struct {
		const char *name, *why; /* a word of the reason */
	} bad[] = {
		{ "", "empty" },
		{ "PyPI.org", "lowercase" },
		{ "pypi.org.", "trailing dot" },
		{ "a..b", "empty label" },
		{ ".pypi.org", "empty label" },
		{ "*.", "trailing dot" },
		{ "*..a.org", "empty label" },
		{ "*", "whole first label" },
		{ "*pypi.org", "whole first label" },
		{ "a.*.org", "first label" },
		{ "*.*.org", "first label" },
		{ "files.*", "first label" },
		{ "*.org", "too broad" },
		{ "localhost", "single label" },
		{ "bücher.example", "A-label" },
		{ "under_score.example", "a-z, 0-9" },
		{ "sp ace.example", "a-z, 0-9" },
		{ "-lead.example", "starts nor ends" },
		{ "trail-.example", "starts nor ends" },
		{ "ab--cd.example", "xn--" },
		{ "1.2.3.4", "address" },
		{ "*.10.0.0", "address" },
		{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example", "63" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		const char *why = NULL;
		if (bk_domain_check(bad[i].name, &why) != -EINVAL)
			fail_msg("accepted \"%s\"", bad[i].name);
		if (!strstr(why, bad[i].why))
			fail_msg("\"%s\": reason \"%s\" lacks \"%s\"", bad[i].name, why, bad[i].why);
	}
	/* 253 bytes pass, 254 do not */
	char n[300];
	memset(n, 0, sizeof(n));
	for (int i = 0; i < 4; i++)
		memset(n + i * 64, 'a', 63), n[i * 64 + 63] = '.';
	n[253] = '\0'; /* 4 labels: 63+1+63+1+63+1+61 */
	n[252] = 'z';
	const char *why = NULL;
	assert_int_equal(strlen(n), 253);
	assert_int_equal(bk_domain_check(n, &why), 0);
	n[253] = 'z';
	n[254] = '\0';
	assert_int_equal(bk_domain_check(n, &why), -EINVAL);
	assert_non_null(strstr(why, "253"));
}

/* which query names an allow_domains entry admits */
static void domain_matching(void **st)
{
	struct bk_config *c = calloc(1, sizeof(*c));
	assert_int_equal(parse(c, "{\"profiles\":{\"pkgs\":{\"allow_domains\":["
				  "{\"name\":\"pypi.org\",\"ports\":\"443\"},"
				  "{\"name\":\"*.pythonhosted.org\",\"ports\":\"443,8000-8100\",\"proto\":\"any\"}]}}}"),
			 0);
	const struct bk_profile *p = bk_policy_find(&c->policy, "pkgs");
	assert_non_null(p);
	assert_int_equal(p->n_domains, 2);
	assert_false(p->fresh_netns); /* names: the pod's network */
	assert_false(p->dns);         /* no raw DNS to the pod's resolvers */
	assert_int_equal(p->domains[1].n_ports, 2);
	assert_int_equal(p->domains[1].protos, BK_PROTO_TCP | BK_PROTO_UDP);
	assert_int_equal(p->domains[0].protos, BK_PROTO_TCP);
	static const struct {
		const char *q;
		int rule; /* -1: none */
	} cases[] = {
		{ "pypi.org", 0 },          { "PyPI.Org.", 0 },           { "pypi.org.", 0 },
		{ "www.pypi.org", -1 },     { "pypi.org.evil.com", -1 },  { "xpypi.org", -1 },
		{ "pythonhosted.org", -1 }, /* a wildcard never admits its suffix itself */
		{ "files.pythonhosted.org", 1 }, { "a.b.pythonhosted.org", 1 }, { "FILES.pythonhosted.org.", 1 },
		{ "filespythonhosted.org", -1 }, { ".pythonhosted.org", -1 }, { "pythonhosted.org.evil", -1 },
		{ "", -1 },                 { ".", -1 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct bk_domain_rule *r = bk_policy_domain(p, cases[i].q);
		int got = r ? (int)(r - p->domains) : -1;
		if (got != cases[i].rule)
			fail_msg("\"%s\": rule %d, expected %d", cases[i].q, got, cases[i].rule);
	}
	char txt[8192];
	assert_true(bk_policy_canon(&c->policy, p, txt, sizeof(txt)) > 0);
	assert_non_null(strstr(txt, "domain pypi.org tcp 443-443\n"));
	assert_non_null(strstr(txt, "domain *.pythonhosted.org any 443-443,8000-8100\n"));
	free(c);
}

/* a refused allow_domains config names the profile and the offending entry */
static void domains_refused(void **st)
{
	struct bk_config *c = calloc(1, sizeof(*c));
	static const struct {
		const char *json, *says;
	} bad[] = {
		{ "{\"profiles\":{\"p\":{\"allow_domains\":[{\"name\":\"a.*.org\",\"ports\":\"443\"}]}}}",
		  "profile p: allow_domains entry \"a.*.org\": a wildcard only as the whole first label" },
		{ "{\"profiles\":{\"p\":{\"allow_domains\":[{\"name\":\"a..org\",\"ports\":\"443\"}]}}}",
		  "entry \"a..org\": an empty label" },
		{ "{\"profiles\":{\"p\":{\"allow_domains\":[{\"name\":\"Pypi.org\",\"ports\":\"443\"}]}}}",
		  "entry \"Pypi.org\": names are lowercase" },
		{ "{\"profiles\":{\"p\":{\"allow_domains\":[{\"name\":\"pypi.org\"}]}}}", "entry \"pypi.org\": ports" },
		{ "{\"profiles\":{\"p\":{\"allow_domains\":[{\"name\":\"pypi.org\",\"ports\":\"0\"}]}}}",
		  "entry \"pypi.org\": ports" },
		{ "{\"profiles\":{\"p\":{\"allow_domains\":[{\"name\":\"pypi.org\",\"ports\":\"1,2,3,4,5,6,7,8,9\"}]}}}",
		  "at most 8 ranges" },
		{ "{\"profiles\":{\"p\":{\"allow_domains\":[{\"name\":\"pypi.org\",\"ports\":\"443\",\"proto\":\"icmp\"}]}}}",
		  "entry \"pypi.org\": proto is tcp, udp or any" },
		{ "{\"profiles\":{\"p\":{\"allow_domains\":[{\"name\":\"pypi.org\",\"ports\":\"443\",\"ttl\":5}]}}}",
		  "entry \"pypi.org\": unknown key \"ttl\"" },
		{ "{\"profiles\":{\"p\":{\"allow_domains\":[{\"name\":\"pypi.org\",\"ports\":\"443\"},"
		  "{\"name\":\"pypi.org\",\"ports\":\"80\"}]}}}",
		  "entry \"pypi.org\" is listed twice" },
		{ "{\"profiles\":{\"p\":{\"allow_domains\":[\"pypi.org\"]}}}", "allow_domains entry 0: an object" },
		{ "{\"profiles\":{\"p\":{\"allow_domains\":[{\"name\":\"a.org\",\"ports\":\"1\"},{\"name\":7}]}}}",
		  "allow_domains entry 1: an object" },
		{ "{\"profiles\":{\"p\":{\"allow_domains\":[]}}}", "non-empty array" },
		{ "{\"profiles\":{\"p\":{\"allow_domains\":{\"name\":\"pypi.org\"}}}}", "non-empty array" },
		{ "{\"profiles\":{\"p\":{\"dns\":true,\"allow_domains\":[{\"name\":\"pypi.org\",\"ports\":\"443\"}]}}}",
		  "leave out \"dns\"" },
		{ "{\"profiles\":{\"p\":{\"netns\":\"fresh\",\"allow_domains\":[{\"name\":\"pypi.org\",\"ports\":\"443\"}]}}}",
		  "the pod's network" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char err[512] = "";
		bk_config_defaults(c);
		int r = bk_config_parse(c, bad[i].json, strlen(bad[i].json), err, sizeof(err));
		if (r != -EINVAL || !strstr(err, bad[i].says))
			fail_msg("%s: %d \"%s\", expected \"%s\"", bad[i].json, r, err, bad[i].says);
	}
	/* more than BK_MAX_DOMAINS entries */
	char big[8192] = "{\"profiles\":{\"p\":{\"allow_domains\":[";
	for (int i = 0; i <= BK_MAX_DOMAINS; i++)
		snprintf(big + strlen(big), sizeof(big) - strlen(big), "%s{\"name\":\"n%d.example\",\"ports\":\"443\"}",
			 i ? "," : "", i);
	strcat(big, "]}}}");
	char err[512] = "";
	bk_config_defaults(c);
	assert_int_equal(bk_config_parse(c, big, strlen(big), err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "entry \"n32.example\": more than 32 entries"));
	free(c);
}

/* exec.process_*: the /process routes' limits (defaults: the reference's) */
static void process_keys(void **st)
{
	struct bk_config *c = calloc(1, sizeof(*c));
	assert_non_null(c);
	assert_int_equal(parse(c, "{}"), 0);
	assert_int_equal(c->process_max, 4);
	assert_int_equal(c->process_output_cap, 262144);
	assert_int_equal(c->process_runtime_max, 14400);
	assert_int_equal(parse(c, "{\"exec\":{\"process_max\":2,\"process_output_cap\":4096,\"process_runtime_max\":60}}"), 0);
	assert_int_equal(c->process_max, 2);
	assert_int_equal(c->process_output_cap, 4096);
	assert_int_equal(c->process_runtime_max, 60);
	static const char *const bad[] = { "{\"exec\":{\"process_max\":0}}", "{\"exec\":{\"process_output_cap\":4095}}",
					   "{\"exec\":{\"process_runtime_max\":0}}", "{\"exec\":{\"process_runtime_max\":86401}}",
					   "{\"exec\":{\"process_maximum\":3}}" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (parse(c, bad[i]) != -EINVAL)
			fail_msg("accepted %s", bad[i]);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cidrs),
		cmocka_unit_test(ports),
		cmocka_unit_test(profiles_and_selection),
		cmocka_unit_test(profiles_refused),
		cmocka_unit_test(admits),
		cmocka_unit_test(domain_names),
		cmocka_unit_test(domain_matching),
		cmocka_unit_test(domains_refused),
		cmocka_unit_test(process_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
