/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz bk_config_parse (agent/config.c) on a defaults struct. Operator
 * input, but it decides the safety switches, so the documented ranges and
 * the BPF/allow_unsafe rule must hold after every successful parse, and a
 * failed parse must say why. */
#include "fuzz.h"
#include "agent/parse/config.h"

#include <cJSON.h>
#include <errno.h>

static void check_str(const char *s, size_t cap, const char *what, bool nonempty)
{
	CHECK(fuzz_terminated(s, cap), "%s not NUL-terminated within %zu bytes", what, cap);
	if (nonempty)
		CHECK(s[0], "%s is empty", what);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 256 * 1024)
		return 0;
	char *json = malloc(size ? size : 1); /* exactly size bytes */
	if (size)
		memcpy(json, data, size);
	struct bk_config c;
	bk_config_defaults(&c);
	char err[512];
	memset(err, 0, sizeof(err));
	int e = bk_config_parse(&c, json, size, err, sizeof(err));
	CHECK(e == 0 || e == -EINVAL, "bk_config_parse returned %d", e);
	CHECK(fuzz_terminated(err, sizeof(err)), "err not NUL-terminated");
	if (e < 0) {
		CHECK(err[0], "failed without an error message");
	} else {
		/* the whole text is one JSON value: nothing the parser ignored */
		const char *end = NULL;
		cJSON *v = cJSON_ParseWithLengthOpts(json, size, &end, false);
		CHECK(v && cJSON_IsObject(v), "accepted a text that is not a JSON object");
		cJSON_Delete(v);
		while (end < json + size && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
			end++;
		CHECK(end == json + size, "accepted %zu bytes of trailing text", (size_t)(json + size - end));
		check_str(c.socket, sizeof(c.socket), "socket", true);
		check_str(c.admin_socket, sizeof(c.admin_socket), "admin_socket", true);
		check_str(c.state_dir, sizeof(c.state_dir), "state_dir", true);
		check_str(c.bpffs, sizeof(c.bpffs), "bpffs", true);
		check_str(c.metrics, sizeof(c.metrics), "metrics", true);
		check_str(c.sandbox_container, sizeof(c.sandbox_container), "sandbox_container", true);
		check_str(c.shim_container, sizeof(c.shim_container), "shim_container", true);
		check_str(c.fault, sizeof(c.fault), "fault", false);
		CHECK(c.n_roots >= 0 && c.n_roots <= BK_MAX_ROOTS, "n_roots %d", c.n_roots);
		for (int i = 0; i < c.n_roots; i++) {
			check_str(c.runtime_roots[i], sizeof(c.runtime_roots[i]), "runtime root", true);
			CHECK(c.runtime_roots[i][0] == '/', "runtime root \"%s\" not absolute", c.runtime_roots[i]);
		}
		CHECK(c.pids_max >= 8 && c.pids_max <= (1u << 22), "pids_max %llu", (unsigned long long)c.pids_max);
		CHECK(c.memory_max >= (16u << 20) && c.memory_max <= (1ull << 40), "memory_max %llu",
		      (unsigned long long)c.memory_max);
		CHECK(c.timeout_default >= 1 && c.timeout_default <= 86400, "timeout_default %u", c.timeout_default);
		CHECK(c.timeout_max >= 1 && c.timeout_max <= 86400, "timeout_max %u", c.timeout_max);
		CHECK(c.timeout_default <= c.timeout_max, "timeout_default %u > timeout_max %u", c.timeout_default,
		      c.timeout_max);
		CHECK(c.output_cap >= 1024 && c.output_cap <= (64u << 20), "output_cap %llu",
		      (unsigned long long)c.output_cap);
		CHECK(c.layer_bpf || c.allow_unsafe, "the BPF layer is off without testing.allow_unsafe");
		CHECK(c.layer_seccomp || c.allow_unsafe, "the seccomp layer is off without testing.allow_unsafe");
		CHECK(c.n_mask_features >= 0 && c.n_mask_features <= BK_MAX_MASKED, "n_mask_features %d",
		      c.n_mask_features);
		CHECK(c.n_mask_features == 0 || c.allow_unsafe, "testing.mask_features without testing.allow_unsafe");
		/* every allow_domains name accepted is a valid one, of a
		 * pod-network profile without raw DNS */
		for (int i = 0; i < c.policy.n; i++) {
			const struct bk_profile *p = &c.policy.prof[i];
			CHECK(p->n_domains >= 0 && p->n_domains <= BK_MAX_DOMAINS, "n_domains %d", p->n_domains);
			CHECK(!p->n_domains || (!p->fresh_netns && !p->dns && !p->dns_tcp),
			      "profile %s: allow_domains with a fresh netns or raw DNS", p->name);
			for (int k = 0; k < p->n_domains; k++) {
				const char *why = NULL;
				check_str(p->domains[k].name, sizeof(p->domains[k].name), "domain", true);
				CHECK(bk_domain_check(p->domains[k].name, &why) == 0, "accepted domain \"%s\": %s",
				      p->domains[k].name, why);
				CHECK(p->domains[k].n_ports >= 1 && p->domains[k].n_ports <= BK_DOMAIN_PORTS, "n_ports %d",
				      p->domains[k].n_ports);
			}
		}
		for (int i = 0; i < c.n_mask_features; i++) {
			check_str(c.mask_features[i], sizeof(c.mask_features[i]), "mask_features entry", true);
			for (const char *q = c.mask_features[i]; *q; q++)
				CHECK((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '_',
				      "mask_features entry \"%s\" holds a byte outside [a-z0-9_]", c.mask_features[i]);
		}
	}

	/* the same text over a config already changed by the first parse:
	 * merging must keep the rules too */
	if (e == 0) {
		memset(err, 0, sizeof(err));
		e = bk_config_parse(&c, json, size, err, sizeof(err));
		CHECK(e == 0, "a config that parsed once fails the second time: %s", err);
		CHECK(c.layer_bpf || c.allow_unsafe, "merge: BPF off without allow_unsafe");
		CHECK(c.layer_seccomp || c.allow_unsafe, "merge: seccomp off without allow_unsafe");
		CHECK(c.n_mask_features == 0 || c.allow_unsafe, "merge: mask_features without allow_unsafe");
		CHECK(c.timeout_default <= c.timeout_max, "merge: timeout_default > timeout_max");
	}
	free(json);
	return 0;
}
