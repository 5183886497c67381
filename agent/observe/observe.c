/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/observe/observe.h"
#include "agent/parse/target.h"
#include "agent/session/run.h"
#include "lib/log.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>

/* ---- kernel read-back -------------------------------------------------------- */

static void read_prog(uint32_t id, struct bk_obs_prog *o)
{
	memset(o, 0, sizeof(*o));
	o->id = id;
	int fd = bpf_prog_get_fd_by_id(id);
	if (fd >= 0) {
		struct bpf_prog_info info = { 0 };
		__u32 l = sizeof(info);
		if (bpf_obj_get_info_by_fd(fd, &info, &l) == 0) {
			for (int k = 0; k < 8; k++)
				snprintf(o->tag + 2 * k, 3, "%02x", info.tag[k]);
			snprintf(o->name, sizeof(o->name), "%.*s", (int)sizeof(info.name), info.name);
			o->known = true;
		}
		close(fd);
	}
}

/* Programs attached to a cgroup, per hook, as the kernel reports them. */
static void read_attached(struct bk_filter *f, int cg_fd, struct bk_obs_exec *x)
{
	const struct bk_prog_desc *pd = bk_filter_progs(f);
	int ours = 0;
	x->n_bpf = 0;
	for (int i = 0; i < BK_NPROGS; i++) {
		__u32 ids[16], cnt = 16, flags = 0;
		if (bpf_prog_query(cg_fd, bk_filter_attach_type(f, i), 0, &flags, ids, &cnt) < 0)
			continue;
		for (__u32 k = 0; k < cnt && x->n_bpf < (int)ARRAY_SIZE(x->bpf); k++) {
			read_prog(ids[k], &x->bpf[x->n_bpf++]);
			if (ids[k] == pd[i].id)
				ours++;
		}
	}
	x->have_bpf = true;
	x->bpf_complete = ours == BK_NPROGS;
}

static int cmp_entries(const void *a, const void *b, void *sz)
{
	return memcmp(a, b, *(size_t *)sz);
}

static void sha256_hex(const void *data, size_t n, char hex[65])
{
	unsigned char md[32];
	unsigned int ml;
	EVP_Digest(data, n, md, &ml, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* sha256 over the sorted key||value entries of a pinned map. */
static void read_map(const char *bpffs, const char *name, struct bk_obs_map *o)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "%s", name);
	snprintf(o->pinned, sizeof(o->pinned), "%s/%s", bpffs, name);
	int fd = bpf_obj_get(o->pinned);
	if (fd < 0) {
		o->open_failed = true;
		o->open_errno = errno;
		return;
	}
	struct bpf_map_info info = { 0 };
	__u32 l = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &l) < 0) {
		close(fd);
		return;
	}
	o->have_id = true;
	o->id = info.id;
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
		sha256_hex(ents, n * esz, o->digest);
		o->entries = n;
		o->digested = true;
	}
	free(ents);
	close(fd);
}

static void read_value(struct bk_obs_value *o, const char *dir, const char *file)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	_cleanup_free_ char *v = NULL;
	if (read_file_at(AT_FDCWD, p, 64, &v, NULL) < 0)
		return;
	v[strcspn(v, "\n")] = '\0';
	o->present = true;
	o->is_num = parse_u64(v, &o->num) == 0;
	snprintf(o->text, sizeof(o->text), "%s", v);
}

static void read_policy_entry(struct bk_agent *a, uint64_t id, struct bk_obs_exec *x)
{
	char pp[600];
	snprintf(pp, sizeof(pp), "%s/bk_policy", a->cfg.bpffs);
	int pfd = bpf_obj_get(pp);
	struct bk_policy pol;
	x->have_policy = true;
	if (pfd >= 0 && bpf_map_lookup_elem(pfd, &id, &pol) == 0) {
		struct bk_obs_policy_entry *pe = &x->policy;
		x->policy_found = true;
		pe->profile_id = pol.profile;
		/* profile ids are unique (parse/policy.c numbers them) */
		for (int i = 0; i < a->cfg.policy.n && !pe->named; i++)
			if (a->cfg.policy.prof[i].id == pol.profile) {
				snprintf(pe->profile, sizeof(pe->profile), "%s", a->cfg.policy.prof[i].name);
				pe->named = true;
			}
		pe->loopback = pol.flags & BK_POL_ALLOW_LOOPBACK;
		pe->dns = pol.flags & BK_POL_ALLOW_DNS;
		pe->icmp = pol.flags & BK_POL_ALLOW_ICMP;
	}
	if (pfd >= 0)
		close(pfd);
}

/* The processes of an exec cgroup and the network namespace of its first
 * process, listed via netlink. */
static void read_netns(struct bk_engine *e, const char *v2dir, struct bk_obs_exec *x)
{
	char pp[4200];
	snprintf(pp, sizeof(pp), "%s/cgroup.procs", v2dir);
	_cleanup_free_ char *procs = NULL;
	if (read_file_at(AT_FDCWD, pp, 1 << 20, &procs, NULL) < 0)
		return;
	x->have_procs = true;
	for (char *c = procs; *c; c++)
		x->processes += *c == '\n';
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
	if (nfd < 0) {
		x->setting_up = true;
		return;
	}
	x->netns_inode = (uint64_t)st.st_ino;
	if (setns(nfd, CLONE_NEWNET) == 0) {
		int n = bk_netns_list(x->ifaces, BK_MAX_IFACES);
		if (setns(e->self_netns, CLONE_NEWNET) < 0)
			abort();
		x->have_ifaces = true;
		x->n_ifaces = n < 0 ? 0 : n < BK_MAX_IFACES ? n : BK_MAX_IFACES;
	}
	close(nfd);
}

/* One live exec cgroup of a pod, read back from the kernel. */
static void read_exec(struct bk_agent *a, const char *v2dir, const char *rel, struct bk_obs_exec *x)
{
	struct bk_engine *e = &a->engine;
	memset(x, 0, sizeof(*x));
	snprintf(x->cgroup, sizeof(x->cgroup), "%s", v2dir);
	uint64_t id = 0;
	if (bk_cgroup_id(v2dir, &id) == 0) {
		x->have_cgroup_id = true;
		x->cgroup_id = id;
	}
	_cleanup_close_ int cfd = open(v2dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cfd >= 0 && e->filter)
		read_attached(e->filter, cfd, x);
	if (e->filter)
		read_policy_entry(a, id, x);
	/* limits, v2 or v1 */
	if (e->mounts.v2_pids) {
		read_value(&x->pids_max, v2dir, "pids.max");
		read_value(&x->pids_current, v2dir, "pids.current");
	} else if (e->mounts.pids[0]) {
		char d[4200];
		snprintf(d, sizeof(d), "%s%s", e->mounts.pids, rel);
		read_value(&x->pids_max, d, "pids.max");
		read_value(&x->pids_current, d, "pids.current");
	}
	if (e->mounts.v2_memory)
		read_value(&x->memory_max, v2dir, "memory.max");
	else if (e->mounts.memory[0]) {
		char d[4200];
		snprintf(d, sizeof(d), "%s%s", e->mounts.memory, rel);
		read_value(&x->memory_max, d, "memory.limit_in_bytes");
	}
	read_netns(e, v2dir, x);
}

/* The node's pinned programs and maps. */
static void read_node_objects(struct bk_agent *a, struct bk_pod_report *o)
{
	const struct bk_prog_desc *pd = bk_filter_progs(a->engine.filter);
	for (int i = 0; i < BK_NPROGS; i++) {
		struct bk_obs_pinned_prog *pp = &o->progs[i];
		snprintf(pp->path, sizeof(pp->path), "%s/%s", a->cfg.bpffs, pd[i].name);
		snprintf(pp->expected, sizeof(pp->expected), "%s", pd[i].name);
		int fd = bpf_obj_get(pp->path);
		if (fd >= 0) {
			struct bpf_prog_info info = { 0 };
			__u32 l = sizeof(info);
			bpf_obj_get_info_by_fd(fd, &info, &l);
			close(fd);
			pp->pinned = true;
			read_prog(info.id, &pp->prog);
		}
	}
	static const char *const names[BK_OBS_MAPS] = { "bk_policy", "bk_allow4", "bk_allow6",
							"bk_deny4",  "bk_deny6",  "bk_local" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		read_map(a->cfg.bpffs, names[i], &o->maps[i]);
	o->node_objects = true;
}

/* The live exec cgroups under the pod's cgroup. */
static int read_execs(struct bk_agent *a, const struct bk_pod *p, struct bk_pod_report *o)
{
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s%s", a->engine.mounts.v2, p->pod_v2);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	size_t cap = 0;
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!startswith(de->d_name, "boxkite-exec-"))
			continue;
		if (o->n_execs == cap) {
			size_t nc = cap ? cap * 2 : 4;
			struct bk_obs_exec *nx = realloc(o->execs, nc * sizeof(*nx));
			if (!nx) {
				r = -ENOMEM;
				break;
			}
			o->execs = nx;
			cap = nc;
		}
		char v2[4400], rel[4400];
		snprintf(v2, sizeof(v2), "%s/%s", dir, de->d_name);
		snprintf(rel, sizeof(rel), "%s/%s", p->pod_v2, de->d_name);
		read_exec(a, v2, rel, &o->execs[o->n_execs++]);
	}
	closedir(d);
	return r;
}

int bk_obs_pod_report(struct bk_agent *a, const struct bk_pod *p, bool with_node_objects, struct bk_pod_report *o)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->pod, sizeof(o->pod), "%s", p->pod_name);
	snprintf(o->ns, sizeof(o->ns), "%s", p->pod_namespace);
	snprintf(o->pod_uid, sizeof(o->pod_uid), "%s", p->pod_uid);
	snprintf(o->sandbox_id, sizeof(o->sandbox_id), "%s", p->sandbox.id);
	o->uid = p->uid;
	o->node_safe = a->node_safe;
	const struct bk_profile *prof = bk_policy_select(&a->cfg.policy, p->pod_namespace, p->pod_name,
							 p->policy_annotation, o->policy_error, sizeof(o->policy_error));
	if (prof) {
		o->have_policy = true;
		snprintf(o->policy, sizeof(o->policy), "%s", prof->name);
		char txt[16384];
		int n = bk_policy_canon(&a->cfg.policy, prof, txt, sizeof(txt));
		sha256_hex(txt, n > 0 ? (size_t)n : 0, o->profile_digest);
		o->netns_fresh = a->cfg.layer_netns && prof->fresh_netns;
		o->layer_bpf = a->engine.filter != NULL;
	}
	if (a->engine.filter && with_node_objects)
		read_node_objects(a, o);
	int r = read_execs(a, p, o);
	pthread_mutex_lock(&a->stats_lock);
	for (int i = 0; i < a->n_deny && o->n_denials < BK_MAX_DENY_SERIES; i++)
		if (streq(a->deny[i].pod, p->pod_name) && streq(a->deny[i].ns, p->pod_namespace)) {
			struct bk_obs_denials *dn = &o->denials[o->n_denials++];
			snprintf(dn->reason, sizeof(dn->reason), "%s", a->deny[i].reason);
			dn->count = a->deny[i].count;
		}
	pthread_mutex_unlock(&a->stats_lock);
	return r;
}

void bk_pod_report_free(struct bk_pod_report *r)
{
	free(r->execs);
	r->execs = NULL;
	r->n_execs = 0;
}

/* ---- status ---------------------------------------------------------------------------- */

struct status_ctx {
	struct bk_agent *a;
	struct bk_node_status *st;
	size_t cap;
	int r;
};

static int status_cb(const struct bk_container_info *ci, void *ud)
{
	struct status_ctx *s = ud;
	if (!streq(ci->name, s->a->cfg.sandbox_container))
		return 0;
	struct bk_node_status *st = s->st;
	if (st->n_sandboxes == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 4;
		struct bk_status_sandbox *ns = realloc(st->sandboxes, nc * sizeof(*ns));
		if (!ns) {
			s->r = -ENOMEM;
			return 0;
		}
		st->sandboxes = ns;
		s->cap = nc;
	}
	struct bk_status_sandbox *sb = &st->sandboxes[st->n_sandboxes];
	memset(sb, 0, sizeof(*sb));
	struct bk_pod p;
	char name[600];
	snprintf(name, sizeof(name), "%s/%s", ci->pod_namespace, ci->pod_name);
	if (bk_pod_by_name(&s->a->cfg, name, &p, sb->error, sizeof(sb->error)) < 0) {
		snprintf(sb->pod, sizeof(sb->pod), "%s", ci->pod_name);
		st->n_sandboxes++;
		return 0;
	}
	/* the summary an operator scans: without the node-wide BPF object lists */
	int r = bk_obs_pod_report(s->a, &p, false, &sb->report);
	sb->resolved = true;
	st->n_sandboxes++;
	if (r < 0)
		s->r = r;
	bk_pod_release(&p);
	return 0;
}

int bk_obs_status(struct bk_agent *a, struct bk_node_status *o)
{
	memset(o, 0, sizeof(*o));
	o->node_safe = a->node_safe;
	o->selftest_runs = a->selftest_runs;
	o->selftest_failures = a->selftest_failures;
	o->selftest_last_ok = a->selftest_last_ok;
	snprintf(o->selftest_error, sizeof(o->selftest_error), "%s", a->selftest_error);
	o->layer_netns = a->cfg.layer_netns;
	o->layer_bpf = a->engine.filter != NULL;
	o->live_execs = a->engine.live;
	o->execs_ok = a->execs_ok;
	o->execs_failed = a->execs_failed;
	o->refused_callers = a->refused_callers;
	o->requests = a->requests;
	if (a->engine.filter) {
		o->have_bpf = true;
		o->denied_total = bk_filter_stat(a->engine.filter, BK_S_DENIED);
		o->events_lost = bk_filter_stat(a->engine.filter, BK_S_EVENTS_LOST);
		o->events_suppressed = bk_filter_stat(a->engine.filter, BK_S_EVENTS_SUPPRESSED);
	}
	struct status_ctx s = { .a = a, .st = o };
	bk_runtime_each(&a->cfg, status_cb, &s);
	return s.r;
}

void bk_node_status_free(struct bk_node_status *s)
{
	for (size_t i = 0; i < s->n_sandboxes; i++)
		bk_pod_report_free(&s->sandboxes[i].report);
	free(s->sandboxes);
	s->sandboxes = NULL;
	s->n_sandboxes = 0;
}

/* ---- denial counters -------------------------------------------------------------------- */

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
