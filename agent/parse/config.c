/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/parse/config.h"
#include "lib/err.h"
#include "lib/util.h"

#include <cJSON.h>
#include <fcntl.h>

void bk_config_defaults(struct bk_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->socket, "/run/boxkite/pods/agent.sock");
	strcpy(c->admin_socket, "/run/boxkite/admin.sock");
	strcpy(c->state_dir, "/run/boxkite/state");
	strcpy(c->bpffs, "/sys/fs/bpf/boxkite");
	strcpy(c->metrics, "127.0.0.1:9464");
	strcpy(c->sandbox_container, "sandbox");
	strcpy(c->shim_container, "shim");
	c->pids_max = 256;
	c->warm_slots = 0; /* opt-in: slots hold a namespace and cgroups per pod and profile while they wait */
	c->warm_idle_s = 30;
	c->policy_sweep_s = 60;
	c->memory_max = 512ull << 20;
	c->timeout_default = 30;
	c->timeout_max = 3600;
	c->output_cap = 1u << 20;
	c->pty_max = 4;
	c->pty_idle_s = 900;
	c->pty_max_s = 28800;
	c->process_max = 4;                  /* the reference's defaults */
	c->process_output_cap = 256u * 1024u;
	c->process_runtime_max = 4 * 3600;
	c->layer_netns = true;
	c->layer_bpf = true;
	c->layer_landlock = true;
	c->layer_seccomp = true;
	bk_policy_defaults(&c->policy);
	strcpy(c->targets[0], "169.254.169.254:80");
	strcpy(c->targets[1], "10.96.0.1:443");
	strcpy(c->targets[2], "10.244.0.10:80");
	strcpy(c->targets[3], "1.1.1.1:443");
	c->selftest_interval = 60;
}

const char *const bk_target_names[4] = { "metadata", "kubernetes_api", "pod", "public" };

static int get_str(const cJSON *o, const char *key, char *dst, size_t dstlen, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v)
		return 0;
	if (!cJSON_IsString(v) || strlen(v->valuestring) >= dstlen || !v->valuestring[0])
		return bk_fail_buf(err, errlen, -EINVAL,
				   "config: \"%s\" must be a non-empty string shorter than %zu bytes", key, dstlen);
	strcpy(dst, v->valuestring);
	return 0;
}

static int get_u64(const cJSON *o, const char *key, uint64_t min, uint64_t max, uint64_t *dst, char *err,
		   size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || v->valuedouble < (double)min || v->valuedouble > (double)max ||
	    v->valuedouble != (double)(uint64_t)v->valuedouble)
		return bk_fail_buf(err, errlen, -EINVAL,
				   "config: \"%s\" must be an integer in [%llu, %llu]",
				   key, (unsigned long long)min, (unsigned long long)max);
	*dst = (uint64_t)v->valuedouble;
	return 0;
}

static int get_bool(const cJSON *o, const char *key, bool *dst, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v)
		return 0;
	if (!cJSON_IsBool(v))
		return bk_fail_buf(err, errlen, -EINVAL, "config: \"%s\" must be true or false", key);
	*dst = cJSON_IsTrue(v);
	return 0;
}

/* An array of at most BK_MAX_MASKED names ([a-z0-9_], 1..31 bytes). */
static int get_names(const cJSON *o, const char *key, char (*dst)[32], int *n, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v)
		return 0;
	if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > BK_MAX_MASKED)
		return bk_fail_buf(err, errlen, -EINVAL, "config: \"%s\" must be an array of at most %d names", key,
				   BK_MAX_MASKED);
	*n = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, v)
	{
		bool ok = cJSON_IsString(it) && it->valuestring[0] && strlen(it->valuestring) < 32;
		for (const char *p = ok ? it->valuestring : ""; *p; p++)
			ok &= (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_';
		if (!ok)
			return bk_fail_buf(err, errlen, -EINVAL,
					   "config: \"%s\" entries must be names of [a-z0-9_], shorter than 32 bytes", key);
		strcpy(dst[(*n)++], it->valuestring);
	}
	return 0;
}

bool bk_config_masks(const struct bk_config *c, const char *feature)
{
	for (int i = 0; i < c->n_mask_features; i++)
		if (streq(c->mask_features[i], feature))
			return true;
	return false;
}

static int check_keys(const cJSON *o, const char *where, const char *const *known, char *err, size_t errlen)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, o)
	{
		bool ok = false;
		for (size_t i = 0; known[i]; i++)
			if (streq(it->string, known[i]))
				ok = true;
		if (!ok)
			return bk_fail_buf(err, errlen, -EINVAL, "config: unknown key \"%s\" in %s", it->string, where);
	}
	return 0;
}

int bk_config_parse(struct bk_config *c, const char *json, size_t len, char *err, size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
	/* one object and nothing after it but white space: cJSON alone
	 * ignores trailing text, which would drop settings silently */
	while (root && end < json + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
		end++;
	if (!root || !cJSON_IsObject(root) || end != json + len) {
		cJSON_Delete(root);
		return bk_fail_buf(err, errlen, -EINVAL, "config: not a JSON object");
	}
	int r;
	static const char *const top[] = { "socket", "admin_socket", "state_dir", "bpffs", "metrics",
					   "runtime_roots", "sandbox_container", "shim_container", "exec",
					   "layers", "testing", "profiles", "deny_cidrs", "default_profile",
					   "profile_selectors", "verify_targets", "selftest_interval", "pty", NULL };
	static const char *const exec_keys[] = { "pids_max", "memory_max", "timeout_default", "timeout_max",
						 "output_cap", "warm_slots", "warm_idle_s", "process_max",
						 "process_output_cap", "process_runtime_max", NULL };
	static const char *const layer_keys[] = { "netns", "bpf", "landlock", "seccomp", NULL };
	static const char *const test_keys[] = { "allow_unsafe", "fault", "mask_features", "policy_sweep_s", NULL };
	if ((r = check_keys(root, "the top level", top, err, errlen)) < 0)
		goto out;
	if ((r = get_str(root, "socket", c->socket, sizeof(c->socket), err, errlen)) < 0 ||
	    (r = get_str(root, "admin_socket", c->admin_socket, sizeof(c->admin_socket), err, errlen)) < 0 ||
	    (r = get_str(root, "state_dir", c->state_dir, sizeof(c->state_dir), err, errlen)) < 0 ||
	    (r = get_str(root, "bpffs", c->bpffs, sizeof(c->bpffs), err, errlen)) < 0 ||
	    (r = get_str(root, "metrics", c->metrics, sizeof(c->metrics), err, errlen)) < 0 ||
	    (r = get_str(root, "sandbox_container", c->sandbox_container, sizeof(c->sandbox_container), err,
			 errlen)) < 0 ||
	    (r = get_str(root, "shim_container", c->shim_container, sizeof(c->shim_container), err, errlen)) < 0)
		goto out;
	const cJSON *roots = cJSON_GetObjectItemCaseSensitive(root, "runtime_roots");
	if (roots) {
		if (!cJSON_IsArray(roots) || cJSON_GetArraySize(roots) > BK_MAX_ROOTS) {
			r = bk_fail_buf(err, errlen, -EINVAL,
					"config: \"runtime_roots\" must be an array of at most %d paths", BK_MAX_ROOTS);
			goto out;
		}
		c->n_roots = 0;
		const cJSON *it;
		cJSON_ArrayForEach(it, roots)
		{
			if (!cJSON_IsString(it) || it->valuestring[0] != '/' ||
			    strlen(it->valuestring) >= sizeof(c->runtime_roots[0])) {
				r = bk_fail_buf(err, errlen, -EINVAL,
						"config: runtime_roots entries must be absolute paths");
				goto out;
			}
			strcpy(c->runtime_roots[c->n_roots++], it->valuestring);
		}
	}
	const cJSON *ex = cJSON_GetObjectItemCaseSensitive(root, "exec");
	if (ex) {
		uint64_t td = c->timeout_default, tm = c->timeout_max;
		if (!cJSON_IsObject(ex)) {
			r = bk_fail_buf(err, errlen, -EINVAL, "config: \"exec\" must be an object");
			goto out;
		}
		if ((r = check_keys(ex, "\"exec\"", exec_keys, err, errlen)) < 0 ||
		    (r = get_u64(ex, "pids_max", 8, 1u << 22, &c->pids_max, err, errlen)) < 0 ||
		    (r = get_u64(ex, "memory_max", 16u << 20, 1ull << 40, &c->memory_max, err, errlen)) < 0 ||
		    (r = get_u64(ex, "timeout_default", 1, 86400, &td, err, errlen)) < 0 ||
		    (r = get_u64(ex, "timeout_max", 1, 86400, &tm, err, errlen)) < 0 ||
		    (r = get_u64(ex, "output_cap", 1024, 64u << 20, &c->output_cap, err, errlen)) < 0 ||
		    (r = get_u64(ex, "warm_slots", 0, 8, &c->warm_slots, err, errlen)) < 0 ||
		    (r = get_u64(ex, "warm_idle_s", 1, 3600, &c->warm_idle_s, err, errlen)) < 0 ||
		    (r = get_u64(ex, "process_max", 1, 64, &c->process_max, err, errlen)) < 0 ||
		    (r = get_u64(ex, "process_output_cap", 4096, 64u << 20, &c->process_output_cap, err, errlen)) < 0 ||
		    (r = get_u64(ex, "process_runtime_max", 1, 86400, &c->process_runtime_max, err, errlen)) < 0)
			goto out;
		c->timeout_default = (uint32_t)td;
		c->timeout_max = (uint32_t)tm;
	}
	const cJSON *pty = cJSON_GetObjectItemCaseSensitive(root, "pty");
	if (pty) {
		static const char *const pty_keys[] = { "max_per_pod", "idle_timeout_s", "max_seconds", "exec_enabled",
							NULL };
		if (!cJSON_IsObject(pty)) {
			r = bk_fail_buf(err, errlen, -EINVAL, "config: \"pty\" must be an object");
			goto out;
		}
		if ((r = check_keys(pty, "\"pty\"", pty_keys, err, errlen)) < 0 ||
		    (r = get_u64(pty, "max_per_pod", 0, 64, &c->pty_max, err, errlen)) < 0 ||
		    (r = get_u64(pty, "idle_timeout_s", 1, 86400, &c->pty_idle_s, err, errlen)) < 0 ||
		    (r = get_u64(pty, "max_seconds", 1, 604800, &c->pty_max_s, err, errlen)) < 0 ||
		    (r = get_bool(pty, "exec_enabled", &c->pty_exec, err, errlen)) < 0)
			goto out;
	}
	const cJSON *lay = cJSON_GetObjectItemCaseSensitive(root, "layers");
	if (lay) {
		if (!cJSON_IsObject(lay) || (r = check_keys(lay, "\"layers\"", layer_keys, err, errlen)) < 0 ||
		    (r = get_bool(lay, "netns", &c->layer_netns, err, errlen)) < 0 ||
		    (r = get_bool(lay, "bpf", &c->layer_bpf, err, errlen)) < 0 ||
		    (r = get_bool(lay, "landlock", &c->layer_landlock, err, errlen)) < 0 ||
		    (r = get_bool(lay, "seccomp", &c->layer_seccomp, err, errlen)) < 0) {
			if (!err[0])
				snprintf(err, errlen, "config: \"layers\" must be an object");
			r = -EINVAL;
			goto out;
		}
	}
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "testing");
	if (t) {
		if (!cJSON_IsObject(t) || (r = check_keys(t, "\"testing\"", test_keys, err, errlen)) < 0 ||
		    (r = get_bool(t, "allow_unsafe", &c->allow_unsafe, err, errlen)) < 0 ||
		    (r = get_str(t, "fault", c->fault, sizeof(c->fault), err, errlen)) < 0 ||
		    (r = get_names(t, "mask_features", c->mask_features, &c->n_mask_features, err, errlen)) < 0 ||
		    (r = get_u64(t, "policy_sweep_s", 1, 86400, &c->policy_sweep_s, err, errlen)) < 0) {
			if (!err[0])
				snprintf(err, errlen, "config: \"testing\" must be an object");
			r = -EINVAL;
			goto out;
		}
	}
	if ((r = bk_policy_parse(&c->policy, root, err, errlen)) < 0)
		goto out;
	const cJSON *vt = cJSON_GetObjectItemCaseSensitive(root, "verify_targets");
	if (vt) {
		if (!cJSON_IsObject(vt)) {
			r = bk_fail_buf(err, errlen, -EINVAL, "config: verify_targets must be an object");
			goto out;
		}
		for (int i = 0; i < 4; i++)
			if ((r = get_str(vt, bk_target_names[i], c->targets[i], sizeof(c->targets[i]), err, errlen)) < 0)
				goto out;
	}
	uint64_t sti = c->selftest_interval;
	if ((r = get_u64(root, "selftest_interval", 0, 86400, &sti, err, errlen)) < 0)
		goto out;
	c->selftest_interval = (uint32_t)sti;
	if (!c->layer_bpf && !c->allow_unsafe) {
		r = bk_fail_buf(err, errlen, -EINVAL,
				"config: the BPF layer can only be turned off together with testing.allow_unsafe");
		goto out;
	}
	if (!c->layer_seccomp && !c->allow_unsafe) {
		r = bk_fail_buf(err, errlen, -EINVAL,
				"config: the seccomp layer can only be turned off together with testing.allow_unsafe");
		goto out;
	}
	if (c->fault[0] && !c->allow_unsafe) {
		r = bk_fail_buf(err, errlen, -EINVAL, "config: testing.fault needs testing.allow_unsafe");
		goto out;
	}
	if (c->n_mask_features && !c->allow_unsafe) {
		r = bk_fail_buf(err, errlen, -EINVAL, "config: testing.mask_features needs testing.allow_unsafe");
		goto out;
	}
	if (c->timeout_default > c->timeout_max) {
		r = bk_fail_buf(err, errlen, -EINVAL, "config: exec.timeout_default exceeds exec.timeout_max");
		goto out;
	}
	r = 0;
out:
	cJSON_Delete(root);
	return r;
}

int bk_config_load(struct bk_config *c, const char *path, char *err, size_t errlen)
{
	_cleanup_free_ char *txt = NULL;
	size_t len;
	int r = read_file_at(AT_FDCWD, path, 1 << 20, &txt, &len);
	if (r < 0)
		return bk_fail_buf(err, errlen, r, "cannot read config %s: %s", path, strerror(-r));
	return bk_config_parse(c, txt, len, err, errlen);
}
