/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/caller/identity.h"
#include "lib/util.h"

#include <cJSON.h>
#include <ctype.h>

static bool is_hex(char c) { return isxdigit((unsigned char)c); }

bool bk_container_id_valid(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > BK_ID_MAX || id[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!(isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

int bk_pod_uid_canon(const char *in, size_t n, char out[BK_UID_LEN + 1])
{
	static const int groups[] = { 8, 4, 4, 4, 12 };
	if (n != BK_UID_LEN)
		return -EINVAL;
	size_t k = 0;
	for (size_t g = 0; g < ARRAY_SIZE(groups); g++) {
		for (int i = 0; i < groups[g]; i++, k++) {
			if (!is_hex(in[k]))
				return -EINVAL;
			out[k] = (char)tolower((unsigned char)in[k]);
		}
		if (g + 1 < ARRAY_SIZE(groups)) {
			if (in[k] != '-' && in[k] != '_')
				return -EINVAL;
			out[k++] = '-';
		}
	}
	out[BK_UID_LEN] = '\0';
	return 0;
}

/* Split path into components in place; returns count (bounded). */
static int split_path(char *p, char **comp, int max)
{
	int n = 0;
	for (char *sv = NULL, *s = strtok_r(p, "/", &sv); s; s = strtok_r(NULL, "/", &sv)) {
		if (n == max)
			return -E2BIG;
		comp[n++] = s;
	}
	return n;
}

static int copy_str(char *dst, size_t dstlen, const char *src)
{
	size_t n = strlen(src);
	if (n >= dstlen)
		return -ENAMETOOLONG;
	memcpy(dst, src, n + 1);
	return 0;
}

/* Join comp[0..upto] into out as "/a/b/c" (the path relative to the same
 * root as the input). */
static int join_path(char **comp, int upto, bool absolute, char *out, size_t len)
{
	size_t off = 0;
	for (int i = 0; i <= upto; i++) {
		int w = snprintf(out + off, len - off, "%s%s", (i == 0 && !absolute) ? "" : "/", comp[i]);
		if (w < 0 || (size_t)w >= len - off)
			return -ENAMETOOLONG;
		off += (size_t)w;
	}
	return 0;
}

static int parse_cgroupfs(char **comp, int n, int k, bool absolute, struct bk_pod_ref *out)
{
	/* comp[k] == "kubepods"; then [qos]/pod<uid>/<id>, id last. */
	int i = k + 1;
	if (i < n && (streq(comp[i], "besteffort") || streq(comp[i], "burstable"))) {
		if (copy_str(out->qos, sizeof(out->qos), comp[i]) < 0)
			return -EINVAL;
		i++;
	}
	if (i >= n || !startswith(comp[i], "pod"))
		return -ENOENT;
	if (bk_pod_uid_canon(comp[i] + 3, strlen(comp[i] + 3), out->pod_uid) < 0)
		return -EINVAL;
	if (join_path(comp, i, absolute, out->pod_path, sizeof(out->pod_path)) < 0)
		return -EINVAL;
	if (i + 1 >= n)
		return -ENOENT; /* the pod level itself, not a container */
	if (i + 2 != n)
		return -EINVAL; /* anything below a container is not a container */
	if (!bk_container_id_valid(comp[i + 1]))
		return -EINVAL;
	if (copy_str(out->container_id, sizeof(out->container_id), comp[i + 1]) < 0)
		return -EINVAL;
	out->layout = BK_LAYOUT_CGROUPFS;
	return 0;
}

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && memcmp(s + a - b, suf, b) == 0;
}

static int parse_systemd(char **comp, int n, int k, bool absolute, struct bk_pod_ref *out)
{
	/* comp[k] == "kubepods.slice"; then optionally kubepods-<qos>.slice,
	 * then kubepods[-<qos>]-pod<uid_>.slice, then <prefix>-<id>.scope. */
	int i = k + 1;
	if (i < n && (streq(comp[i], "kubepods-besteffort.slice") || streq(comp[i], "kubepods-burstable.slice"))) {
		const char *q = comp[i] + strlen("kubepods-");
		size_t ql = strlen(q) - strlen(".slice");
		if (ql >= sizeof(out->qos))
			return -EINVAL;
		memcpy(out->qos, q, ql);
		out->qos[ql] = '\0';
		i++;
	}
	if (i >= n)
		return -ENOENT;
	const char *pod = comp[i];
	char want[64];
	snprintf(want, sizeof(want), "kubepods-%s%spod", out->qos, out->qos[0] ? "-" : "");
	if (!startswith(pod, want) || !ends_with(pod, ".slice"))
		return -ENOENT;
	const char *u = pod + strlen(want);
	size_t ul = strlen(u) - strlen(".slice");
	if (bk_pod_uid_canon(u, ul, out->pod_uid) < 0)
		return -EINVAL;
	if (join_path(comp, i, absolute, out->pod_path, sizeof(out->pod_path)) < 0)
		return -EINVAL;
	if (i + 1 >= n)
		return -ENOENT;
	if (i + 2 != n)
		return -EINVAL;
	const char *scope = comp[i + 1];
	static const char *const prefixes[] = { "cri-containerd-", "crio-", "docker-" };
	const char *id = NULL;
	for (size_t p = 0; p < ARRAY_SIZE(prefixes); p++)
		if (startswith(scope, prefixes[p])) {
			id = scope + strlen(prefixes[p]);
			break;
		}
	/* crio-conmon-<id>.scope is CRI-O's monitor process, not a container. */
	if (!id || startswith(scope, "crio-conmon-") || !ends_with(scope, ".scope"))
		return -EINVAL;
	size_t il = strlen(id) - strlen(".scope");
	if (il == 0 || il > BK_ID_MAX)
		return -EINVAL;
	memcpy(out->container_id, id, il);
	out->container_id[il] = '\0';
	if (!bk_container_id_valid(out->container_id))
		return -EINVAL;
	out->layout = BK_LAYOUT_SYSTEMD;
	return 0;
}

int bk_cgroup_path_parse(const char *path, struct bk_pod_ref *out)
{
	memset(out, 0, sizeof(*out));
	size_t len = strlen(path);
	if (len == 0 || len >= 4096)
		return len ? -EINVAL : -ENOENT;
	char buf[4096];
	memcpy(buf, path, len + 1);
	char *comp[128];
	int n = split_path(buf, comp, (int)ARRAY_SIZE(comp));
	if (n < 0)
		return -EINVAL;
	bool absolute = path[0] == '/';
	int found = -ENOENT;
	for (int k = 0; k < n; k++) {
		if (streq(comp[k], "kubepods")) {
			found = parse_cgroupfs(comp, n, k, absolute, out);
			break;
		}
		if (streq(comp[k], "kubepods.slice")) {
			found = parse_systemd(comp, n, k, absolute, out);
			break;
		}
	}
	if (found < 0)
		memset(out, 0, sizeof(*out));
	return found;
}

/* Iterate lines "N:ctrls:path". Calls fn for each well-formed line. */
static int each_line(const char *text, int (*fn)(const char *ctrls, const char *path, void *ud), void *ud)
{
	const char *p = text;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);
		if (ll > 0 && ll < 4200) {
			char line[4200];
			memcpy(line, p, ll);
			line[ll] = '\0';
			char *c1 = strchr(line, ':');
			char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
			if (!c1 || !c2)
				return -EINVAL;
			*c1 = '\0';
			*c2 = '\0';
			uint64_t hid;
			if (parse_u64(line, &hid) < 0)
				return -EINVAL;
			int r = fn(c1 + 1, c2 + 1, ud);
			if (r)
				return r;
		} else if (ll >= 4200) {
			return -EINVAL;
		}
		p += ll + (nl ? 1 : 0);
	}
	return 0;
}

struct find_ctx {
	const char *ctrl; /* "" for v2 */
	char *buf;
	size_t len;
	bool found;
};


static int find_cb(const char *ctrls, const char *path, void *ud)
{
	struct find_ctx *f = ud;
	bool match = f->ctrl[0] ? csv_has(ctrls, f->ctrl) : ctrls[0] == '\0';
	if (!match)
		return 0;
	if (copy_str(f->buf, f->len, path) < 0)
		return -ENAMETOOLONG;
	f->found = true;
	return 1;
}

int bk_proc_cgroup_v2_path(const char *text, char *buf, size_t len)
{
	struct find_ctx f = { .ctrl = "", .buf = buf, .len = len };
	int r = each_line(text, find_cb, &f);
	if (r < 0)
		return r;
	return f.found ? 0 : -ENOENT;
}

int bk_proc_cgroup_each(const char *text, int (*fn)(const char *ctrls, const char *path, void *ud), void *ud)
{
	return each_line(text, fn, ud);
}

int bk_proc_cgroup_v1_path(const char *text, const char *ctrl, char *buf, size_t len)
{
	struct find_ctx f = { .ctrl = ctrl, .buf = buf, .len = len };
	int r = each_line(text, find_cb, &f);
	if (r < 0)
		return r;
	return f.found ? 0 : -ENOENT;
}

struct agree_ctx {
	struct bk_pod_ref first;
	bool have;
	int err;
};

static int agree_cb(const char *ctrls, const char *path, void *ud)
{
	struct agree_ctx *a = ud;
	struct bk_pod_ref r;
	int e = bk_cgroup_path_parse(path, &r);
	if (e == -ENOENT)
		return 0;
	if (e < 0) {
		a->err = e;
		return e;
	}
	if (!a->have) {
		a->first = r;
		a->have = true;
		return 0;
	}
	if (!streq(a->first.pod_uid, r.pod_uid) || !streq(a->first.container_id, r.container_id)) {
		a->err = -EINVAL;
		return -EINVAL;
	}
	return 0;
}

int bk_proc_cgroup_parse(const char *text, struct bk_pod_ref *out)
{
	memset(out, 0, sizeof(*out));
	/* Prefer the v2 line: it is what the BPF layer and cgroup.kill see. */
	char v2[4096];
	int e = bk_proc_cgroup_v2_path(text, v2, sizeof(v2));
	if (e < 0 && e != -ENOENT)
		return e;
	struct agree_ctx a = { 0 };
	e = each_line(text, agree_cb, &a);
	if (e < 0)
		return a.err ? a.err : e;
	if (!a.have)
		return -ENOENT;
	if (bk_proc_cgroup_v2_path(text, v2, sizeof(v2)) == 0) {
		struct bk_pod_ref r;
		if (bk_cgroup_path_parse(v2, &r) == 0) {
			*out = r;
			return 0;
		}
	}
	*out = a.first;
	return 0;
}

/* ---- state.json ---------------------------------------------------------- */

static int label_copy(char *dst, size_t dstlen, const char *v)
{
	if (strlen(v) >= dstlen)
		return -EINVAL;
	strcpy(dst, v);
	return 0;
}

int bk_state_parse(const char *json, size_t len, struct bk_container_info *out)
{
	memset(out, 0, sizeof(*out));
	if (memchr(json, '\0', len))
		return -EINVAL;
	cJSON *root = cJSON_ParseWithLength(json, len);
	if (!root)
		return -EINVAL;
	int r = -EINVAL;
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(root, "init_process_pid");
	const cJSON *start = cJSON_GetObjectItemCaseSensitive(root, "init_process_start");
	const cJSON *config = cJSON_GetObjectItemCaseSensitive(root, "config");
	if (!cJSON_IsString(id) || !bk_container_id_valid(id->valuestring) || !cJSON_IsNumber(pid) ||
	    !cJSON_IsObject(config))
		goto out;
	if (pid->valuedouble < 1 || pid->valuedouble > 4194304 || pid->valuedouble != (double)(int)pid->valuedouble)
		goto out;
	strcpy(out->id, id->valuestring);
	out->init_pid = (pid_t)pid->valueint;
	if (cJSON_IsNumber(start) && start->valuedouble >= 0 && start->valuedouble < 1.8e19)
		out->init_start = (uint64_t)start->valuedouble;
	const cJSON *rootfs = cJSON_GetObjectItemCaseSensitive(config, "rootfs");
	if (cJSON_IsString(rootfs) && label_copy(out->rootfs, sizeof(out->rootfs), rootfs->valuestring) < 0)
		goto out;
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(config, "labels");
	if (labels && !cJSON_IsArray(labels))
		goto out;
	char uid_raw[64] = "";
	const cJSON *l;
	cJSON_ArrayForEach(l, labels)
	{
		if (!cJSON_IsString(l))
			goto out;
		const char *s = l->valuestring;
		const char *eq = strchr(s, '=');
		if (!eq)
			continue;
		size_t kl = (size_t)(eq - s);
		const char *v = eq + 1;
		char key[128];
		if (kl >= sizeof(key))
			continue;
		memcpy(key, s, kl);
		key[kl] = '\0';
		int e = 0;
		if (streq(key, "io.kubernetes.cri.container-name") || streq(key, "io.kubernetes.container.name"))
			e = label_copy(out->name, sizeof(out->name), v);
		else if (streq(key, "io.kubernetes.cri.container-type"))
			e = label_copy(out->type, sizeof(out->type), v);
		else if (streq(key, "io.kubernetes.pod.uid") || streq(key, "io.kubernetes.cri.sandbox-uid"))
			e = label_copy(uid_raw, sizeof(uid_raw), v);
		else if (streq(key, "io.kubernetes.pod.name") || streq(key, "io.kubernetes.cri.sandbox-name"))
			e = label_copy(out->pod_name, sizeof(out->pod_name), v);
		else if (streq(key, "io.kubernetes.pod.namespace") || streq(key, "io.kubernetes.cri.sandbox-namespace"))
			e = label_copy(out->pod_namespace, sizeof(out->pod_namespace), v);
		else if (streq(key, "boxkite.dev/egress-policy"))
			e = label_copy(out->egress_policy, sizeof(out->egress_policy), v);
		if (e < 0)
			goto out;
	}
	if (!uid_raw[0] || !out->name[0]) {
		r = -ENOENT;
		goto out;
	}
	if (bk_pod_uid_canon(uid_raw, strlen(uid_raw), out->pod_uid) < 0)
		goto out;
	r = 0;
out:
	cJSON_Delete(root);
	if (r < 0) {
		struct bk_container_info z = { 0 };
		*out = z;
	}
	return r;
}
