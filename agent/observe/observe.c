/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/observe/observe.h"
#include "lib/log.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

int bk_parse_target(const char *s, int *family, unsigned char addr[16], uint16_t *port)
{
	char host[64];
	const char *p;
	if (s[0] == '[') {
		const char *e = strchr(s, ']');
		if (!e || e[1] != ':' || (size_t)(e - s - 1) >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, (size_t)(e - s - 1));
		host[e - s - 1] = '\0';
		p = e + 2;
	} else {
		const char *c = strrchr(s, ':');
		if (!c || (size_t)(c - s) >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, (size_t)(c - s));
		host[c - s] = '\0';
		p = c + 1;
	}
	uint64_t v;
	if (parse_u64(p, &v) < 0 || v == 0 || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	memset(addr, 0, 16);
	if (inet_pton(AF_INET, host, addr) == 1)
		*family = AF_INET;
	else if (inet_pton(AF_INET6, host, addr) == 1)
		*family = AF_INET6;
	else
		return -EINVAL;
	return 0;
}

/* ---- kernel read-back -------------------------------------------------------- */


static cJSON *prog_json(uint32_t id)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "id", id);
	int fd = bpf_prog_get_fd_by_id(id);
	if (fd >= 0) {
		struct bpf_prog_info info = { 0 };
		__u32 l = sizeof(info);
		if (bpf_obj_get_info_by_fd(fd, &info, &l) == 0) {
			char tag[17];
			for (int k = 0; k < 8; k++)
				snprintf(tag + 2 * k, 3, "%02x", info.tag[k]);
			cJSON_AddStringToObject(o, "prog", info.name);
			cJSON_AddStringToObject(o, "tag", tag);
		}
		close(fd);
	}
	return o;
}

/* Programs attached to a cgroup, per hook, as the kernel reports them. */
static cJSON *attached_json(struct bk_filter *f, int cg_fd, int *ours)
{
	cJSON *arr = cJSON_CreateArray();
	const struct bk_prog_desc *pd = bk_filter_progs(f);
	*ours = 0;
	for (int i = 0; i < BK_NPROGS; i++) {
		__u32 ids[16], cnt = 16, flags = 0;
		if (bpf_prog_query(cg_fd, bk_filter_attach_type(f, i), 0, &flags, ids, &cnt) < 0)
			continue;
		for (__u32 k = 0; k < cnt; k++) {
			cJSON_AddItemToArray(arr, prog_json(ids[k]));
			if (ids[k] == pd[i].id)
				(*ours)++;
		}
	}
	return arr;
}

static int cmp_entries(const void *a, const void *b, void *sz)
{
	return memcmp(a, b, *(size_t *)sz);
}

/* sha256 over the sorted key||value entries of a pinned map. */
static cJSON *map_json(const char *bpffs, const char *name)
{
	cJSON *o = cJSON_CreateObject();
	char p[600];
	snprintf(p, sizeof(p), "%s/%s", bpffs, name);
	cJSON_AddStringToObject(o, "map", name);
	cJSON_AddStringToObject(o, "pinned", p);
	int fd = bpf_obj_get(p);
	if (fd < 0) {
		cJSON_AddStringToObject(o, "error", strerror(errno));
		return o;
	}
	struct bpf_map_info info = { 0 };
	__u32 l = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &l) < 0) {
		close(fd);
		return o;
	}
	cJSON_AddNumberToObject(o, "id", info.id);
	size_t esz = info.key_size + info.value_size;
	size_t cap = 64, n = 0;
	uint8_t *ents = malloc(cap * esz);
	uint8_t key[256], next[256];
	void *prev = NULL;
	while (ents && info.key_size <= sizeof(key) && bpf_map_get_next_key(fd, prev, next) == 0 && n < 100000) {
		if (n == cap) {
			uint8_t *ne = realloc(ents, 2 * cap * esz);
			if (!ne)
				break;
			ents = ne;
			cap *= 2;
		}
		memcpy(ents + n * esz, next, info.key_size);
		if (bpf_map_lookup_elem(fd, next, ents + n * esz + info.key_size) == 0)
			n++;
		memcpy(key, next, info.key_size);
		prev = key;
	}
	if (ents) {
		qsort_r(ents, n, esz, cmp_entries, &esz);
		unsigned char md[32];
		unsigned int ml;
		EVP_Digest(ents, n * esz, md, &ml, EVP_sha256(), NULL);
		char hex[65];
		for (int i = 0; i < 32; i++)
			snprintf(hex + 2 * i, 3, "%02x", md[i]);
		cJSON_AddNumberToObject(o, "entries", (double)n);
		cJSON_AddStringToObject(o, "digest", hex);
	}
	free(ents);
	close(fd);
	return o;
}

static void add_file_num(cJSON *o, const char *key, const char *dir, const char *file)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	_cleanup_free_ char *v = NULL;
	if (read_file_at(AT_FDCWD, p, 64, &v, NULL) < 0)
		return;
	v[strcspn(v, "\n")] = '\0';
	uint64_t n;
	if (parse_u64(v, &n) == 0)
		cJSON_AddNumberToObject(o, key, (double)n);
	else
		cJSON_AddStringToObject(o, key, v);
}

/* One live exec cgroup of a pod, read back from the kernel. */
static cJSON *exec_json(struct bk_agent *a, const char *v2dir, const char *rel)
{
	struct bk_engine *e = &a->engine;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "cgroup", v2dir);
	uint64_t id = 0;
	if (bk_cgroup_id(v2dir, &id) == 0)
		cJSON_AddNumberToObject(o, "cgroup_id", (double)id);
	_cleanup_close_ int cfd = open(v2dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ours = 0;
	if (cfd >= 0 && e->filter) {
		cJSON_AddItemToObject(o, "bpf", attached_json(e->filter, cfd, &ours));
		cJSON_AddBoolToObject(o, "bpf_complete", ours == BK_NPROGS);
	}
	if (e->filter) {
		char pp[600];
		snprintf(pp, sizeof(pp), "%s/bk_policy", a->cfg.bpffs);
		int pfd = bpf_obj_get(pp);
		struct bk_policy pol;
		if (pfd >= 0 && bpf_map_lookup_elem(pfd, &id, &pol) == 0) {
			cJSON *pj = cJSON_AddObjectToObject(o, "policy_entry");
			cJSON_AddNumberToObject(pj, "profile_id", pol.profile);
			for (int i = 0; i < a->cfg.policy.n; i++)
				if (a->cfg.policy.prof[i].id == pol.profile)
					cJSON_AddStringToObject(pj, "profile", a->cfg.policy.prof[i].name);
			cJSON_AddBoolToObject(pj, "loopback", pol.flags & BK_POL_ALLOW_LOOPBACK);
			cJSON_AddBoolToObject(pj, "dns", pol.flags & BK_POL_ALLOW_DNS);
			cJSON_AddBoolToObject(pj, "icmp", pol.flags & BK_POL_ALLOW_ICMP);
		} else
			cJSON_AddNullToObject(o, "policy_entry");
		if (pfd >= 0)
			close(pfd);
	}
	/* limits, v2 or v1 */
	if (e->mounts.v2_pids)
		add_file_num(o, "pids_max", v2dir, "pids.max"), add_file_num(o, "pids_current", v2dir, "pids.current");
	else if (e->mounts.pids[0]) {
		char d[4200];
		snprintf(d, sizeof(d), "%s%s", e->mounts.pids, rel);
		add_file_num(o, "pids_max", d, "pids.max");
		add_file_num(o, "pids_current", d, "pids.current");
	}
	if (e->mounts.v2_memory)
		add_file_num(o, "memory_max", v2dir, "memory.max");
	else if (e->mounts.memory[0]) {
		char d[4200];
		snprintf(d, sizeof(d), "%s%s", e->mounts.memory, rel);
		add_file_num(o, "memory_max", d, "memory.limit_in_bytes");
	}
	/* the network namespace of its first process, listed via netlink */
	char pp[4200];
	snprintf(pp, sizeof(pp), "%s/cgroup.procs", v2dir);
	_cleanup_free_ char *procs = NULL;
	if (read_file_at(AT_FDCWD, pp, 1 << 20, &procs, NULL) == 0) {
		int np = 0;
		for (char *c = procs; *c; c++)
			np += *c == '\n';
		cJSON_AddNumberToObject(o, "processes", np);
		/* the netns of the first process that finished its setup: a
		 * child is born in the agent's own namespace and switches
		 * before anything of the command runs */
		struct stat self_st;
		fstat(e->self_netns, &self_st);
		int nfd = -1;
		struct stat st;
		for (char *sv = NULL, *t = strtok_r(procs, "\n", &sv); t && nfd < 0; t = strtok_r(NULL, "\n", &sv)) {
			uint64_t pid;
			char nsp[64];
			if (parse_u64(t, &pid) < 0)
				continue;
			snprintf(nsp, sizeof(nsp), "/proc/%llu/ns/net", (unsigned long long)pid);
			nfd = open(nsp, O_RDONLY | O_CLOEXEC);
			if (nfd >= 0 && (fstat(nfd, &st) < 0 || st.st_ino == self_st.st_ino)) {
				close(nfd);
				nfd = -1;
			}
		}
		if (nfd < 0)
			cJSON_AddStringToObject(o, "state", "setting_up");
		else {
			cJSON_AddNumberToObject(o, "netns_inode", (double)st.st_ino);
			if (setns(nfd, CLONE_NEWNET) == 0) {
				char names[BK_MAX_IFACES][IFNAMSIZ];
				int n = bk_netns_list(names, BK_MAX_IFACES);
				if (setns(e->self_netns, CLONE_NEWNET) < 0)
					abort();
				cJSON *ifs = cJSON_AddArrayToObject(o, "interfaces");
				for (int i = 0; i < n && i < BK_MAX_IFACES; i++)
					cJSON_AddItemToArray(ifs, cJSON_CreateString(names[i]));
			}
			close(nfd);
		}
	}
	return o;
}

cJSON *bk_obs_pod_report(struct bk_agent *a, const struct bk_pod *p)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "pod", p->pod_name);
	cJSON_AddStringToObject(o, "namespace", p->pod_namespace);
	cJSON_AddStringToObject(o, "pod_uid", p->pod_uid);
	cJSON_AddStringToObject(o, "sandbox_container_id", p->sandbox.id);
	cJSON_AddNumberToObject(o, "uid", p->uid);
	cJSON_AddBoolToObject(o, "node_safe", a->node_safe);
	char err[256] = "";
	const struct bk_profile *prof =
		bk_policy_select(&a->cfg.policy, p->pod_namespace, p->pod_name, p->policy_annotation, err, sizeof(err));
	if (prof) {
		cJSON_AddStringToObject(o, "policy", prof->name);
		char txt[16384];
		int n = bk_policy_canon(&a->cfg.policy, prof, txt, sizeof(txt));
		unsigned char md[32];
		unsigned int ml;
		EVP_Digest(txt, n > 0 ? (size_t)n : 0, md, &ml, EVP_sha256(), NULL);
		char hex[65];
		for (int i = 0; i < 32; i++)
			snprintf(hex + 2 * i, 3, "%02x", md[i]);
		cJSON_AddStringToObject(o, "profile_digest", hex);
		cJSON *layers = cJSON_AddObjectToObject(o, "layers");
		cJSON_AddStringToObject(layers, "netns", a->cfg.layer_netns && prof->fresh_netns ? "fresh" : "pod");
		cJSON_AddBoolToObject(layers, "bpf", a->engine.filter != NULL);
		cJSON_AddBoolToObject(layers, "cgroup", true);
	} else
		cJSON_AddStringToObject(o, "policy_error", err);
	if (a->engine.filter) {
		cJSON *progs = cJSON_AddArrayToObject(o, "bpf_programs");
		const struct bk_prog_desc *pd = bk_filter_progs(a->engine.filter);
		for (int i = 0; i < BK_NPROGS; i++) {
			char path[600];
			snprintf(path, sizeof(path), "%s/%s", a->cfg.bpffs, pd[i].name);
			int fd = bpf_obj_get(path);
			cJSON *pj;
			if (fd >= 0) {
				struct bpf_prog_info info = { 0 };
				__u32 l = sizeof(info);
				bpf_obj_get_info_by_fd(fd, &info, &l);
				close(fd);
				pj = prog_json(info.id);
			} else {
				pj = cJSON_CreateObject();
				cJSON_AddStringToObject(pj, "prog", pd[i].name);
				cJSON_AddStringToObject(pj, "error", "not pinned");
			}
			cJSON_AddStringToObject(pj, "pinned", path);
			cJSON_AddItemToArray(progs, pj);
		}
		cJSON *maps = cJSON_AddArrayToObject(o, "bpf_maps");
		static const char *const names[] = { "bk_policy", "bk_allow4", "bk_allow6", "bk_deny4", "bk_deny6", "bk_local" };
		for (size_t i = 0; i < ARRAY_SIZE(names); i++)
			cJSON_AddItemToArray(maps, map_json(a->cfg.bpffs, names[i]));
	}
	cJSON *execs = cJSON_AddArrayToObject(o, "live_execs");
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s%s", a->engine.mounts.v2, p->pod_v2);
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (!startswith(de->d_name, "boxkite-exec-"))
				continue;
			char v2[4400], rel[4400];
			snprintf(v2, sizeof(v2), "%s/%s", dir, de->d_name);
			snprintf(rel, sizeof(rel), "%s/%s", p->pod_v2, de->d_name);
			cJSON_AddItemToArray(execs, exec_json(a, v2, rel));
		}
		closedir(d);
	}
	pthread_mutex_lock(&a->stats_lock);
	cJSON *den = cJSON_AddObjectToObject(o, "denials");
	for (int i = 0; i < a->n_deny; i++)
		if (streq(a->deny[i].pod, p->pod_name) && streq(a->deny[i].ns, p->pod_namespace))
			cJSON_AddNumberToObject(den, a->deny[i].reason, (double)a->deny[i].count);
	pthread_mutex_unlock(&a->stats_lock);
	return o;
}

struct status_ctx {
	struct bk_agent *a;
	cJSON *arr;
};

static int status_cb(const struct bk_container_info *ci, void *ud)
{
	struct status_ctx *s = ud;
	if (!streq(ci->name, s->a->cfg.sandbox_container))
		return 0;
	struct bk_pod p;
	char err[512];
	char name[600];
	snprintf(name, sizeof(name), "%s/%s", ci->pod_namespace, ci->pod_name);
	if (bk_pod_by_name(&s->a->cfg, name, &p, err, sizeof(err)) < 0) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "pod", ci->pod_name);
		cJSON_AddStringToObject(o, "error", err);
		cJSON_AddItemToArray(s->arr, o);
		return 0;
	}
	cJSON *full = bk_obs_pod_report(s->a, &p);
	/* the summary an operator scans: drop the node-wide BPF object lists */
	cJSON_DeleteItemFromObject(full, "bpf_programs");
	cJSON_DeleteItemFromObject(full, "bpf_maps");
	cJSON_AddItemToArray(s->arr, full);
	bk_pod_release(&p);
	return 0;
}

cJSON *bk_obs_status(struct bk_agent *a)
{
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "version", BK_VERSION);
	cJSON_AddBoolToObject(b, "node_safe", a->node_safe);
	cJSON *st = cJSON_AddObjectToObject(b, "selftest");
	cJSON_AddNumberToObject(st, "runs", (double)a->selftest_runs);
	cJSON_AddNumberToObject(st, "failures", (double)a->selftest_failures);
	cJSON_AddNumberToObject(st, "last_success_unix", (double)a->selftest_last_ok);
	if (!a->node_safe)
		cJSON_AddStringToObject(st, "error", a->selftest_error);
	cJSON *layers = cJSON_AddObjectToObject(b, "layers");
	cJSON_AddBoolToObject(layers, "netns", a->cfg.layer_netns);
	cJSON_AddBoolToObject(layers, "bpf", a->engine.filter != NULL);
	cJSON_AddNumberToObject(b, "live_execs", (double)a->engine.live);
	cJSON_AddNumberToObject(b, "execs_ok", (double)a->execs_ok);
	cJSON_AddNumberToObject(b, "execs_failed", (double)a->execs_failed);
	cJSON_AddNumberToObject(b, "refused_callers", (double)a->refused_callers);
	cJSON_AddNumberToObject(b, "requests", (double)a->requests);
	if (a->engine.filter) {
		cJSON_AddNumberToObject(b, "denied_total", (double)bk_filter_stat(a->engine.filter, BK_S_DENIED));
		cJSON_AddNumberToObject(b, "events_lost", (double)bk_filter_stat(a->engine.filter, BK_S_EVENTS_LOST));
		cJSON_AddNumberToObject(b, "events_suppressed",
					(double)bk_filter_stat(a->engine.filter, BK_S_EVENTS_SUPPRESSED));
	}
	struct status_ctx s = { .a = a, .arr = cJSON_AddArrayToObject(b, "sandboxes") };
	bk_runtime_each(&a->cfg, status_cb, &s);
	return b;
}

void bk_obs_count_denials(struct bk_agent *a, const struct bk_pod *p, const struct bk_exec_result *r)
{
	if (!r->denied_total)
		return;
	pthread_mutex_lock(&a->stats_lock);
	uint64_t listed = 0;
	for (int i = 0; i <= r->n_denied; i++) {
		const char *reason = i < r->n_denied ? r->denied[i].reason : "unsampled";
		uint64_t add = 1;
		if (i == r->n_denied) {
			add = r->denied_total > listed ? r->denied_total - listed : 0;
			if (!add)
				break;
		}
		listed += i < r->n_denied ? 1 : 0;
		int k;
		for (k = 0; k < a->n_deny; k++)
			if (streq(a->deny[k].pod, p->pod_name) && streq(a->deny[k].ns, p->pod_namespace) &&
			    streq(a->deny[k].reason, reason))
				break;
		if (k == a->n_deny) {
			if (a->n_deny == BK_MAX_DENY_SERIES)
				continue;
			struct bk_deny_series *s = &a->deny[a->n_deny++];
			snprintf(s->pod, sizeof(s->pod), "%s", p->pod_name);
			snprintf(s->ns, sizeof(s->ns), "%s", p->pod_namespace);
			snprintf(s->reason, sizeof(s->reason), "%s", reason);
			s->count = 0;
		}
		a->deny[k].count += add;
	}
	pthread_mutex_unlock(&a->stats_lock);
}

/* ---- verify ---------------------------------------------------------------------- */

static const char VERIFY_PY[] =
	"import errno, socket, sys, time\n"
	"time.sleep(float(sys.argv[1]))\n"
	"print('IFACES ' + ','.join(n for _, n in socket.if_nameindex()), flush=True)\n"
	"for spec in sys.argv[2:]:\n"
	"    name, fam, addr, port = spec.split(',')\n"
	"    s = socket.socket(socket.AF_INET6 if fam == '6' else socket.AF_INET)\n"
	"    s.settimeout(3)\n"
	"    t0 = time.monotonic()\n"
	"    try:\n"
	"        s.connect((addr, int(port))); r = 'connected'\n"
	"    except socket.timeout:\n"
	"        r = 'timeout'\n"
	"    except OSError as e:\n"
	"        r = errno.errorcode.get(e.errno, str(e.errno))\n"
	"    print('PROBE %s %s %.2f' % (name, r, (time.monotonic() - t0) * 1000), flush=True)\n";

char *bk_obs_verify(struct bk_agent *a, const struct bk_pod *p, const cJSON *args)
{
	double hold = 0;
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(args, "hold");
	if (cJSON_IsNumber(h) && h->valuedouble >= 0 && h->valuedouble <= 60)
		hold = h->valuedouble;
	/* python3 -c SCRIPT HOLD name,fam,addr,port... through the normal exec path */
	char cmd[8192];
	size_t off = (size_t)snprintf(cmd, sizeof(cmd), "exec python3 -c \"$BK_VERIFY\" %.1f", hold);
	/* a profile that allows egress is expected to reach public addresses:
	 * the public probe is only meaningful (and only sent) under deny-all */
	char perr[256];
	const struct bk_profile *prof =
		bk_policy_select(&a->cfg.policy, p->pod_namespace, p->pod_name, p->policy_annotation, perr, sizeof(perr));
	int nprobe = prof && prof->n_allow > 0 ? 3 : 4;
	for (int i = 0; i < nprobe; i++) {
		int fam;
		unsigned char ad[16];
		uint16_t port;
		char as[INET6_ADDRSTRLEN];
		if (bk_parse_target(a->cfg.targets[i], &fam, ad, &port) < 0)
			return bk_api_error(500, "bad_config", "verify target %s is not addr:port", bk_target_names[i]);
		inet_ntop(fam, ad, as, sizeof(as));
		off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, " %s,%c,%s,%u", bk_target_names[i],
					fam == AF_INET ? '4' : '6', as, port);
	}
	/* the script travels in the environment of this one exec (not a secret) */
	cJSON *ea = cJSON_CreateObject();
	cJSON_AddStringToObject(ea, "command", cmd);
	cJSON_AddNumberToObject(ea, "timeout", 30 + (int)hold);
	cJSON *env = cJSON_AddObjectToObject(ea, "secret_env");
	cJSON_AddStringToObject(env, "BK_VERIFY", VERIFY_PY);
	char *resp = bk_api_exec(a, p, ea);
	cJSON_Delete(ea);
	cJSON *r = resp ? cJSON_Parse(resp) : NULL;
	free(resp);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "status");
	cJSON *body = cJSON_GetObjectItemCaseSensitive(r, "body");
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "pod", p->pod_name);
	cJSON_AddStringToObject(out, "namespace", p->pod_namespace);
	if (!cJSON_IsNumber(st) || st->valueint != 200) {
		/* the context itself could not be built: that is a failed verify */
		cJSON_AddBoolToObject(out, "passed", false);
		cJSON *det = cJSON_GetObjectItemCaseSensitive(body, "detail");
		cJSON_AddStringToObject(out, "error", cJSON_IsString(det) ? det->valuestring : "exec failed");
		cJSON_Delete(r);
		return bk_api_respond(200, out);
	}
	const cJSON *iso = cJSON_GetObjectItemCaseSensitive(body, "isolation");
	const cJSON *stdout_ = cJSON_GetObjectItemCaseSensitive(body, "stdout");
	const cJSON *denied = cJSON_GetObjectItemCaseSensitive(body, "denied");
	bool fresh = streq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(iso, "netns")) ?: "", "fresh");
	bool held = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(iso, "bpf_held_to_end"));
	int nprogs = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(iso, "bpf"));
	cJSON_AddStringToObject(out, "exec_id", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "exec_id")) ?: "");
	cJSON_AddStringToObject(out, "policy", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(iso, "policy")) ?: "");
	bool passed = true;
	cJSON *layers = cJSON_AddObjectToObject(out, "layers");
	/* netns: what the command itself saw */
	char ifaces[256] = "";
	const char *so = cJSON_GetStringValue(stdout_) ?: "";
	const char *il = strstr(so, "IFACES ");
	if (il)
		sscanf(il + 7, "%255s", ifaces);
	cJSON *ln = cJSON_AddObjectToObject(layers, "netns");
	cJSON_AddStringToObject(ln, "mode", fresh ? "fresh" : "pod");
	cJSON_AddStringToObject(ln, "interfaces", ifaces);
	bool netns_ok = !fresh || streq(ifaces, "lo");
	cJSON_AddBoolToObject(ln, "held", netns_ok);
	if (!netns_ok)
		passed = false;
	cJSON *lb = cJSON_AddObjectToObject(layers, "bpf");
	cJSON_AddNumberToObject(lb, "programs_attached", nprogs);
	cJSON_AddBoolToObject(lb, "held_to_end", held);
	bool bpf_ok = nprogs == BK_NPROGS && held;
	cJSON_AddBoolToObject(lb, "held", bpf_ok);
	if (!bpf_ok)
		passed = false;
	cJSON *probes = cJSON_AddArrayToObject(out, "probes");
	for (int i = 0; i < 4; i++) {
		char key[64], res[32] = "missing";
		if (i >= nprobe) {
			cJSON *pj = cJSON_CreateObject();
			cJSON_AddStringToObject(pj, "target", bk_target_names[i]);
			cJSON_AddStringToObject(pj, "address", a->cfg.targets[i]);
			cJSON_AddStringToObject(pj, "result", "skipped");
			cJSON_AddNumberToObject(pj, "ms", 0);
			cJSON_AddStringToObject(pj, "layer", "profile allows public egress");
			cJSON_AddBoolToObject(pj, "stopped", true);
			cJSON_AddItemToArray(probes, pj);
			continue;
		}
		double ms = -1;
		snprintf(key, sizeof(key), "PROBE %s ", bk_target_names[i]);
		const char *pl = strstr(so, key);
		if (pl)
			sscanf(pl + strlen(key), "%31s %lf", res, &ms);
		cJSON *pj = cJSON_CreateObject();
		cJSON_AddStringToObject(pj, "target", bk_target_names[i]);
		cJSON_AddStringToObject(pj, "address", a->cfg.targets[i]);
		cJSON_AddStringToObject(pj, "result", res);
		cJSON_AddNumberToObject(pj, "ms", ms);
		/* which layer stopped it: a BPF denial of that address, or no route */
		int fam;
		unsigned char ad[16];
		uint16_t port;
		char as[INET6_ADDRSTRLEN] = "";
		if (bk_parse_target(a->cfg.targets[i], &fam, ad, &port) == 0)
			inet_ntop(fam, ad, as, sizeof(as));
		bool bpf_denied = false;
		const cJSON *dj;
		cJSON_ArrayForEach(dj, denied)
		{
			const char *dst = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(dj, "dst"));
			if (dst && streq(dst, as))
				bpf_denied = true;
		}
		const char *layer = "none";
		bool stopped = false;
		if (streq(res, "EPERM") && bpf_denied)
			layer = "bpf", stopped = true;
		else if (streq(res, "ENETUNREACH") || streq(res, "EHOSTUNREACH"))
			layer = fresh ? "netns" : "routing", stopped = true;
		else if (streq(res, "EPERM") || streq(res, "EACCES"))
			layer = "bpf", stopped = true;
		if (stopped && ms > 1000)
			stopped = false; /* a slow failure looks like a hang to a caller */
		cJSON_AddStringToObject(pj, "layer", layer);
		cJSON_AddBoolToObject(pj, "stopped", stopped);
		if (!stopped)
			passed = false;
		cJSON_AddItemToArray(probes, pj);
	}
	cJSON_AddBoolToObject(out, "passed", passed);
	cJSON_Delete(r);
	bk_log_obj(passed ? "info" : "error", "verify", cJSON_Duplicate(out, true));
	return bk_api_respond(200, out);
}
