/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/observe/observe.h"
#include "agent/isolate/warm.h"
#include "agent/parse/dns.h"
#include "agent/parse/target.h"
#include "agent/session/livepolicy.h"
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
		if (bk_warm_has(&a->engine, de->d_name + strlen("boxkite-exec-")))
			continue; /* a warm slot: nothing runs in it yet */
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

/* The cgroup layer of a pod: its v2 cgroup opens and has an id, and the
 * pids and memory caps of an exec have a controller: in the pod's v2
 * cgroup.controllers, or the pod's directory in the v1 hierarchy. */
static void read_cgroup_layer(struct bk_agent *a, const struct bk_pod *p, struct bk_pod_report *o)
{
	const struct bk_cgroup_mounts *m = &a->engine.mounts;
	snprintf(o->cg.path, sizeof(o->cg.path), "%s%s", m->v2, p->pod_v2);
	_cleanup_close_ int fd = open(o->cg.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	uint64_t id = 0;
	o->cg.opened = fd >= 0 && bk_cgroup_id(o->cg.path, &id) == 0;
	o->cg.cgroup_id = id;
	_cleanup_free_ char *ctl = NULL;
	if (fd >= 0 && read_file_at(fd, "cgroup.controllers", sizeof(o->cg.controllers) - 1, &ctl, NULL) >= 0) {
		ctl[strcspn(ctl, "\n")] = '\0';
		snprintf(o->cg.controllers, sizeof(o->cg.controllers), "%s", ctl);
	}
	char words[260];
	snprintf(words, sizeof(words), " %s ", o->cg.controllers);
	struct stat st;
	char d[4700];
	if (m->v2_pids && strstr(words, " pids "))
		o->cg.pids = "v2";
	else if (!m->v2_pids && m->pids[0] && snprintf(d, sizeof(d), "%s%s", m->pids, p->pod_v2) > 0 &&
		 stat(d, &st) == 0 && S_ISDIR(st.st_mode))
		o->cg.pids = "v1";
	if (m->v2_memory && strstr(words, " memory "))
		o->cg.memory = "v2";
	else if (!m->v2_memory && m->memory[0] && snprintf(d, sizeof(d), "%s%s", m->memory, p->pod_v2) > 0 &&
		 stat(d, &st) == 0 && S_ISDIR(st.st_mode))
		o->cg.memory = "v1";
	o->layer_cgroup = o->cg.opened && o->cg.pids && o->cg.memory;
	/* what the pod uses now, against its caps (boxkitectl top) */
	if (o->cg.pids && streq(o->cg.pids, "v2")) {
		read_value(&o->pod_pids_current, o->cg.path, "pids.current");
		read_value(&o->pod_pids_max, o->cg.path, "pids.max");
	} else if (o->cg.pids) {
		snprintf(d, sizeof(d), "%s%s", m->pids, p->pod_v2);
		read_value(&o->pod_pids_current, d, "pids.current");
		read_value(&o->pod_pids_max, d, "pids.max");
	}
	if (o->cg.memory && streq(o->cg.memory, "v2")) {
		read_value(&o->pod_memory_current, o->cg.path, "memory.current");
		read_value(&o->pod_memory_max, o->cg.path, "memory.max");
	} else if (o->cg.memory) {
		snprintf(d, sizeof(d), "%s%s", m->memory, p->pod_v2);
		read_value(&o->pod_memory_current, d, "memory.usage_in_bytes");
		read_value(&o->pod_memory_max, d, "memory.limit_in_bytes");
	}
	pthread_mutex_lock(&a->stats_lock);
	for (int i = 0; i < a->n_pods; i++) {
		const struct bk_pod_stats *ps = &a->pods[i];
		if (streq(ps->pod, p->pod_name) && streq(ps->ns, p->pod_namespace)) {
			o->have_counts = true;
			o->execs_total = ps->execs[0] + ps->execs[1] + ps->execs[2] + ps->execs[3];
			o->execs_live = ps->live;
			o->denied_total = ps->denied;
		}
	}
	pthread_mutex_unlock(&a->stats_lock);
}

/* The BPF layer: each of the eight pins holds the program the agent loaded,
 * the policy map opens, and every live exec cgroup of the pod carries all
 * eight (bpf_prog_query in read_exec). */
static void read_bpf_layer(struct bk_agent *a, struct bk_pod_report *o)
{
	struct bk_filter *f = a->engine.filter;
	o->bpfck.loaded = f != NULL;
	if (!f)
		return;
	const struct bk_prog_desc *pd = bk_filter_progs(f);
	for (int i = 0; i < BK_NPROGS; i++) {
		char path[600];
		snprintf(path, sizeof(path), "%s/%s", a->cfg.bpffs, pd[i].name);
		int fd = bpf_obj_get(path);
		if (fd < 0)
			continue;
		struct bpf_prog_info info = { 0 };
		__u32 l = sizeof(info);
		if (bpf_obj_get_info_by_fd(fd, &info, &l) == 0 && info.id == pd[i].id)
			o->bpfck.programs_pinned++;
		close(fd);
	}
	char pp[600];
	snprintf(pp, sizeof(pp), "%s/bk_policy", a->cfg.bpffs);
	int pfd = bpf_obj_get(pp);
	o->bpfck.policy_map = pfd >= 0;
	if (pfd >= 0)
		close(pfd);
	for (size_t i = 0; i < o->n_execs; i++) {
		o->bpfck.live_execs++;
		o->bpfck.live_execs_complete += o->execs[i].have_bpf && o->execs[i].bpf_complete;
	}
	o->layer_bpf = o->bpfck.programs_pinned == BK_NPROGS && o->bpfck.policy_map &&
		       o->bpfck.live_execs_complete == o->bpfck.live_execs;
}

/* The netns layer: the self-test's last fresh namespace held only lo, and
 * so does the namespace of each live exec of a fresh profile. */
static void read_netns_layer(struct bk_agent *a, struct bk_pod_report *o)
{
	pthread_mutex_lock(&a->stats_lock);
	o->nsck.checked_at = a->netns_checked_at;
	snprintf(o->nsck.fresh_interfaces, sizeof(o->nsck.fresh_interfaces), "%s", a->netns_fresh_ifaces);
	pthread_mutex_unlock(&a->stats_lock);
	if (!o->netns_fresh)
		return;
	for (size_t i = 0; i < o->n_execs; i++) {
		const struct bk_obs_exec *x = &o->execs[i];
		if (!x->have_ifaces)
			continue;
		o->nsck.live_execs++;
		o->nsck.live_execs_lo_only += x->n_ifaces == 1 && streq(x->ifaces[0], "lo");
	}
	o->layer_netns_held = o->nsck.checked_at > 0 && streq(o->nsck.fresh_interfaces, "lo") &&
			      o->nsck.live_execs_lo_only == o->nsck.live_execs;
}

static void read_layers(struct bk_agent *a, const struct bk_pod *p, struct bk_pod_report *o)
{
	read_cgroup_layer(a, p, o);
	read_bpf_layer(a, o);
	read_netns_layer(a, o);
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
	enum bk_profile_source src;
	const struct bk_profile *prof = bk_session_profile(a, p, &src, o->policy_error, sizeof(o->policy_error));
	o->policy_source = bk_profile_source_names[src];
	o->policy_changed = bk_session_policy_change(p->pod_uid, &o->policy_change);
	if (prof) {
		o->have_policy = true;
		snprintf(o->policy, sizeof(o->policy), "%s", prof->name);
		char txt[16384];
		int n = bk_policy_canon(&a->cfg.policy, prof, txt, sizeof(txt));
		sha256_hex(txt, n > 0 ? (size_t)n : 0, o->profile_digest);
		o->netns_fresh = a->cfg.layer_netns && prof->fresh_netns;
		o->layer_seccomp = a->cfg.layer_seccomp;
	}
	if (a->engine.filter && with_node_objects)
		read_node_objects(a, o);
	int r = read_execs(a, p, o);
	read_layers(a, p, o);
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
	o->layer_seccomp = a->cfg.layer_seccomp;
	o->live_execs = a->engine.live;
	o->execs_ok = a->execs_ok;
	o->execs_failed = a->execs_failed;
	o->refused_callers = a->refused_callers;
	o->requests = a->requests;
	o->features = a->engine.features;
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

/* ---- verify ---------------------------------------------------------------------------- */

static const char VERIFY_PY[] =
	"import errno, socket, struct, sys, time\n"
	"time.sleep(float(sys.argv[1]))\n"
	"print('IFACES ' + ','.join(n for _, n in socket.if_nameindex()), flush=True)\n"
	"def dns(qname):\n"
	"    # one A query over UDP to the pod's resolver (BPF sends it to the proxy): rcode, addresses\n"
	"    ns = ([l.split()[1] for l in open('/etc/resolv.conf') if l.split()[:1] == ['nameserver'] and\n"
	"           '.' in l.split()[1]] + ['192.0.2.53'])[0]\n"
	"    q = struct.pack('>6H', 0x4b4b, 256, 1, 0, 0, 0) + b''.join(bytes([len(x)]) + x.encode()\n"
	"        for x in qname.split('.')) + b'\\0\\0\\1\\0\\1'\n"
	"    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"    s.settimeout(3)\n"
	"    s.sendto(q, (ns, 53))\n"
	"    m = s.recv(4096)\n"
	"    i, a = 12, []\n"
	"    while m[i]: i += m[i] + 1\n"
	"    i += 5\n"
	"    for _ in range(struct.unpack('>H', m[6:8])[0]):\n"
	"        if m[i] & 192 == 192: i += 2\n"
	"        else:\n"
	"            while m[i]: i += m[i] + 1\n"
	"            i += 1\n"
	"        t, l = struct.unpack('>H', m[i:i + 2])[0], struct.unpack('>H', m[i + 8:i + 10])[0]\n"
	"        i += 10\n"
	"        if t == 1 and l == 4: a.append(socket.inet_ntoa(m[i:i + 4]))\n"
	"        i += l\n"
	"    return m[3] & 15, ','.join(a) or '-'\n"
	"for spec in sys.argv[2:]:\n"
	"    name, fam, addr, port = spec.split(',')\n"
	"    if fam == 'dns':\n"
	"        t0 = time.monotonic()\n"
	"        try:\n"
	"            rc, a = dns(addr)\n"
	"        except socket.timeout:\n"
	"            rc, a = -1, 'timeout'\n"
	"        except OSError as e:\n"
	"            rc, a = -1, errno.errorcode.get(e.errno, str(e.errno))\n"
	"        except Exception:\n"
	"            rc, a = -1, 'malformed'\n"
	"        print('DNS %s %d %s %.2f' % (name, rc, a, (time.monotonic() - t0) * 1000), flush=True)\n"
	"        continue\n"
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

const char *bk_probe_outcome_name(enum bk_probe_outcome o)
{
	switch (o) {
	case BK_PROBE_STOPPED: return "stopped";
	case BK_PROBE_ALLOWED: return "allowed";
	case BK_PROBE_REACHED: return "reached";
	default: return "skipped";
	}
}

void bk_probe_judge(struct bk_verify_probe *pr, const char *denial, const char *eperm_layer, bool fresh_netns)
{
	const char *r = pr->result;
	pr->layer = NULL;
	if (!r[0]) {
		pr->outcome = BK_PROBE_SKIPPED;
		snprintf(pr->reason, sizeof(pr->reason), "no_result");
	} else if (streq(r, "EPERM") || streq(r, "EACCES")) {
		/* refused at once by the kernel: BPF when it reported the denial */
		pr->outcome = BK_PROBE_STOPPED;
		if (denial) {
			pr->layer = "bpf";
			snprintf(pr->reason, sizeof(pr->reason), "%s", denial);
		} else {
			pr->layer = eperm_layer ? eperm_layer : "unattributed";
			snprintf(pr->reason, sizeof(pr->reason), "%s", r);
		}
	} else if (streq(r, "ENETUNREACH") || streq(r, "EHOSTUNREACH")) {
		/* no route: the netns layer when the probe had a namespace of its
		 * own; in the pod's namespace a routing failure proves nothing */
		if (fresh_netns) {
			pr->outcome = BK_PROBE_STOPPED;
			pr->layer = "netns";
			snprintf(pr->reason, sizeof(pr->reason), "%s", r);
		} else {
			pr->outcome = BK_PROBE_SKIPPED;
			snprintf(pr->reason, sizeof(pr->reason), "no_route");
		}
	} else if (streq(r, "connected") || streq(r, "ECONNREFUSED")) {
		/* past every layer: a host answered (or refused) */
		pr->outcome = pr->expect_allowed ? BK_PROBE_ALLOWED : BK_PROBE_REACHED;
		snprintf(pr->reason, sizeof(pr->reason), "%s", r);
	} else if (streq(r, "timeout")) {
		/* it left and nothing answered: not stopped; for an admitted
		 * target nothing shows it got anywhere */
		pr->outcome = pr->expect_allowed ? BK_PROBE_SKIPPED : BK_PROBE_REACHED;
		snprintf(pr->reason, sizeof(pr->reason), "timeout");
	} else {
		pr->outcome = BK_PROBE_SKIPPED;
		snprintf(pr->reason, sizeof(pr->reason), "%s", r);
	}
	pr->pass = pr->expect_allowed ? pr->outcome == BK_PROBE_ALLOWED : pr->outcome == BK_PROBE_STOPPED;
}

/* A probe's expectation from the profile, for a target parsed as family,
 * address, port. */
static void expect_probe(const struct bk_agent *a, const struct bk_profile *prof, int fam, const unsigned char *ad,
			 uint16_t port, struct bk_verify_probe *pr)
{
	struct bk_cidr host = { .family = fam == AF_INET ? 4 : 6, .plen = fam == AF_INET ? 32 : 128 };
	memcpy(host.addr, ad, fam == AF_INET ? 4 : 16);
	uint32_t why;
	pr->expect_allowed = prof && bk_policy_admits_tcp(&a->cfg.policy, prof, &host, port, &why);
}

/* An address:port an allow rule of the profile admits (for a profile that
 * admits none of the configured targets): the rule's own address when it
 * is one host, else its first address after the network's; 443 or 80 when
 * the rule's ports hold them, else its lowest port. 0, or -ENOENT when no
 * TCP rule admits such an address (the deny set holds them all). */
static int allow_rule_target(const struct bk_agent *a, const struct bk_profile *prof, int *fam, unsigned char ad[16],
			     uint16_t *port)
{
	for (int i = 0; i < prof->n_allow; i++) {
		const struct bk_allow_rule *r = &prof->allow[i];
		if (!(r->protos & BK_PROTO_TCP))
			continue;
		struct bk_cidr host = r->c;
		int full = host.family == 4 ? 32 : 128;
		if (host.plen < full)
			host.addr[full / 8 - 1] |= 1;
		host.plen = (uint8_t)full;
		uint16_t pt = r->lo <= 443 && 443 <= r->hi ? 443 : r->lo <= 80 && 80 <= r->hi ? 80 : r->lo ? r->lo : 1;
		uint32_t why;
		if (!bk_policy_admits_tcp(&a->cfg.policy, prof, &host, pt, &why))
			continue;
		*fam = host.family == 4 ? AF_INET : AF_INET6;
		memset(ad, 0, 16);
		memcpy(ad, host.addr, host.family == 4 ? 4 : 16);
		*port = pt;
		return 0;
	}
	return -ENOENT;
}

static void format_target(int fam, const unsigned char *ad, uint16_t port, char *buf, size_t len)
{
	char as[INET6_ADDRSTRLEN] = "";
	inet_ntop(fam, ad, as, sizeof(as));
	snprintf(buf, len, fam == AF_INET6 ? "[%s]:%u" : "%s:%u", as, port);
}

/* What one probe's line says, and the BPF denial of its address and port
 * the receipt lists. */
static void judge_probe(const char *so, const struct bk_exec_result *res, int fam, const unsigned char *ad,
			uint16_t port, struct bk_verify_probe *pr)
{
	char key[64];
	pr->result[0] = '\0';
	pr->ms = 0;
	snprintf(key, sizeof(key), "PROBE %s ", pr->name);
	const char *pl = strstr(so, key);
	if (pl && sscanf(pl + strlen(key), "%31s %lf", pr->result, &pr->ms) < 1)
		pr->result[0] = '\0';
	char as[INET6_ADDRSTRLEN] = "";
	inet_ntop(fam, ad, as, sizeof(as));
	const char *denial = NULL;
	for (int k = 0; k < res->n_denied && !denial; k++)
		if (streq(res->denied[k].dst, as) && res->denied[k].port == port)
			denial = res->denied[k].reason;
	bk_probe_judge(pr, denial, NULL, res->fresh_netns);
}

struct probe_target {
	int fam;
	unsigned char ad[16];
	uint16_t port;
	const char *dns_name; /* a DNS probe: the name asked (its probe's address) */
	bool dns_allowed;     /* ... one the profile allows */
};

/* Whether the receipt's rules (read back from bk_resolved at the exec's
 * end, filter.c rb_names) hold a live entry for name and address. */
static bool in_resolved(const char *rules, const char *name, const char *addr)
{
	char key[BK_DNS_NAME_MAX + 80];
	snprintf(key, sizeof(key), "resolved %s %s ", name, addr);
	size_t kl = strlen(key);
	for (const char *l = rules; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, kl) && strncmp(l + kl, "expired", 7))
			return true;
	return false;
}

/* A DNS probe's line ("DNS name rcode addrs ms"), judged by what the
 * kernel and the proxy recorded for the exec: an allowed name passes when
 * an address of its answer is the exec's in bk_resolved; a name the
 * profile does not allow when it got NXDOMAIN/REFUSED and the proxy filed
 * a dns_name denial naming it. */
static void judge_dns(const char *so, const struct bk_exec_result *res, const struct probe_target *pt,
		      struct bk_verify_probe *pr)
{
	char key[64], addrs[256] = "";
	int rcode = -2;
	pr->result[0] = '\0';
	pr->ms = 0;
	pr->layer = NULL;
	pr->reason[0] = '\0';
	snprintf(key, sizeof(key), "DNS %s ", pr->name);
	const char *pl = strstr(so, key);
	if (!pl || sscanf(pl + strlen(key), "%d %255s %lf", &rcode, addrs, &pr->ms) < 2) {
		pr->outcome = BK_PROBE_SKIPPED;
		snprintf(pr->reason, sizeof(pr->reason), "no_result");
	} else if (rcode < 0) {
		snprintf(pr->result, sizeof(pr->result), "%s", addrs);
		pr->outcome = BK_PROBE_SKIPPED; /* the proxy answers every query: no answer shows nothing */
		snprintf(pr->reason, sizeof(pr->reason), "%s", addrs);
	} else if (pt->dns_allowed) {
		snprintf(pr->result, sizeof(pr->result), "rcode=%d", rcode);
		char *save = NULL, *found = NULL;
		for (char *a = strtok_r(addrs, ",", &save); a && !found; a = strtok_r(NULL, ",", &save))
			if (res->policy_rules && in_resolved(res->policy_rules, pt->dns_name, a))
				found = a;
		if (found) {
			pr->outcome = BK_PROBE_ALLOWED;
			snprintf(pr->reason, sizeof(pr->reason), "bk_resolved %s", found);
		} else {
			/* an answer none of whose addresses the exec holds did not come through its proxy */
			pr->outcome = rcode == 0 && strcmp(addrs, "-") ? BK_PROBE_REACHED : BK_PROBE_SKIPPED;
			snprintf(pr->reason, sizeof(pr->reason), rcode == 0 ? "not_in_bk_resolved" : "rcode=%d", rcode);
		}
	} else {
		snprintf(pr->result, sizeof(pr->result), "rcode=%d", rcode);
		bool denial = false;
		for (int k = 0; k < res->n_denied && !denial; k++)
			denial = streq(res->denied[k].name, pt->dns_name) && streq(res->denied[k].reason, "dns_name") &&
				 res->denied[k].hook && streq(res->denied[k].hook, "dns_proxy");
		if ((rcode == BK_DNS_NXDOMAIN || rcode == BK_DNS_REFUSED) && denial) {
			pr->outcome = BK_PROBE_STOPPED;
			pr->layer = "dns_proxy";
			snprintf(pr->reason, sizeof(pr->reason), "dns_name");
		} else if (rcode == BK_DNS_NOERROR) {
			pr->outcome = BK_PROBE_REACHED; /* it was answered */
			snprintf(pr->reason, sizeof(pr->reason), "answered");
		} else {
			pr->outcome = BK_PROBE_SKIPPED; /* refused, but nothing shows the proxy did it */
			snprintf(pr->reason, sizeof(pr->reason), denial ? "rcode=%d" : "no_denial", rcode);
		}
	}
	pr->pass = pt->dns_allowed ? pr->outcome == BK_PROBE_ALLOWED : pr->outcome == BK_PROBE_STOPPED;
}

/* The verdict from what the command saw and the exec's receipt. */
static void judge(int nprobe, const struct probe_target *pt, const struct bk_exec_result *res,
		  struct bk_verify_result *v)
{
	_cleanup_free_ char *so = strndup(res->out ? res->out : "", res->out ? res->outlen : 0);
	if (!so) {
		snprintf(v->error, sizeof(v->error), "out of memory");
		return;
	}
	v->ran = true;
	snprintf(v->exec_id, sizeof(v->exec_id), "%s", res->exec_id);
	snprintf(v->policy, sizeof(v->policy), "%s", res->policy);
	v->passed = true;
	/* netns: what the command itself saw */
	const char *il = strstr(so, "IFACES ");
	if (il)
		sscanf(il + 7, "%255s", v->netns.interfaces);
	v->netns.fresh = res->fresh_netns;
	v->netns.held = !res->fresh_netns || streq(v->netns.interfaces, "lo");
	if (!v->netns.held)
		v->passed = false;
	v->bpf.programs_attached = res->n_progs;
	v->bpf.held_to_end = res->bpf_held;
	v->bpf.held = res->n_progs == BK_NPROGS && res->bpf_held;
	if (!v->bpf.held)
		v->passed = false;
	v->seccomp.mode = res->seccomp_mode;
	v->seccomp.filters = res->seccomp_filters;
	v->seccomp.held = res->seccomp_mode == 2 && res->seccomp_filters >= 1;
	if (!v->seccomp.held)
		v->passed = false;
	v->n_probes = nprobe;
	for (int i = 0; i < nprobe; i++) {
		struct bk_verify_probe *pr = &v->probes[i];
		if (pt[i].dns_name)
			judge_dns(so, res, &pt[i], pr);
		else
			judge_probe(so, res, pt[i].fam, pt[i].ad, pt[i].port, pr);
		switch (pr->outcome) {
		case BK_PROBE_STOPPED: v->n_stopped++; break;
		case BK_PROBE_ALLOWED: v->n_allowed++; break;
		case BK_PROBE_REACHED: v->n_reached++; break;
		case BK_PROBE_SKIPPED: v->n_skipped++; break;
		}
		if (!pr->pass) {
			v->n_failed++;
			v->passed = false;
		}
	}
}

/* The verify line: the verdict's fields, each probe an object under its
 * target's name (the logger has no arrays). */
static void log_verify(const struct bk_pod *p, const struct bk_verify_result *v)
{
	struct log_field pf[BK_VERIFY_PROBES][8];
	struct log_field probes[BK_VERIFY_PROBES + 1];
	for (int i = 0; i < v->n_probes; i++) {
		const struct bk_verify_probe *pr = &v->probes[i];
		pf[i][0] = LS("address", pr->address);
		pf[i][1] = LS("result", pr->result);
		pf[i][2] = LD("ms", pr->ms);
		pf[i][3] = LS("outcome", bk_probe_outcome_name(pr->outcome));
		pf[i][4] = LS("layer", pr->layer ? pr->layer : "");
		pf[i][5] = LS("reason", pr->reason);
		pf[i][6] = LB("expected_allowed", pr->expect_allowed);
		pf[i][7] = LEND;
		probes[i] = (struct log_field){ .key = pr->name, .type = LF_OBJ, .o = pf[i] };
	}
	probes[v->n_probes] = LEND;
	log_at(v->passed ? LOG_INFO : LOG_ERROR, "verify", LS("pod", p->pod_name), LS("namespace", p->pod_namespace),
	       LS("exec_id", v->exec_id), LS("policy", v->policy),
	       LO("layers",
		  LO("netns", LS("mode", v->netns.fresh ? "fresh" : "pod"), LS("interfaces", v->netns.interfaces),
		     LB("held", v->netns.held)),
		  LO("bpf", LI("programs_attached", v->bpf.programs_attached), LB("held_to_end", v->bpf.held_to_end),
		     LB("held", v->bpf.held)),
		  LO("seccomp", LI("mode", v->seccomp.mode), LI("filters", v->seccomp.filters),
		     LB("held", v->seccomp.held))),
	       ((struct log_field){ .key = "probes", .type = LF_OBJ, .o = probes }), LB("passed", v->passed));
}

int bk_obs_verify(struct bk_agent *a, const struct bk_pod *p, double hold, int client_fd,
		  struct bk_verify_result *out, struct bk_error *err)
{
	memset(out, 0, sizeof(*out));
	/* python3 -c SCRIPT HOLD name,fam,addr,port... through the normal exec path */
	char cmd[8192];
	size_t off = (size_t)snprintf(cmd, sizeof(cmd), "exec python3 -c \"$BK_VERIFY\" %.1f", hold);
	/* every target is probed under every profile, each with what the
	 * profile expects of it */
	char perr[256];
	const struct bk_profile *prof = bk_session_profile(a, p, NULL, perr, sizeof(perr));
	struct probe_target pt[BK_VERIFY_PROBES] = { 0 };
	int nprobe = 0;
	bool any_allowed = false;
	for (int i = 0; i < 4; i++) {
		struct bk_verify_probe *pr = &out->probes[nprobe];
		if (bk_parse_target(a->cfg.targets[i], &pt[nprobe].fam, pt[nprobe].ad, &pt[nprobe].port) < 0)
			return bk_fail(err, -EINVAL, "config", "verify target %s is not addr:port", bk_target_names[i]);
		snprintf(pr->name, sizeof(pr->name), "%s", bk_target_names[i]);
		snprintf(pr->address, sizeof(pr->address), "%s", a->cfg.targets[i]);
		expect_probe(a, prof, pt[nprobe].fam, pt[nprobe].ad, pt[nprobe].port, pr);
		any_allowed |= pr->expect_allowed;
		nprobe++;
	}
	/* the allowed class: a profile with allow rules admitting none of the
	 * targets gets one address its rules admit */
	if (prof && prof->n_allow > 0 && !any_allowed &&
	    allow_rule_target(a, prof, &pt[nprobe].fam, pt[nprobe].ad, &pt[nprobe].port) == 0) {
		struct bk_verify_probe *pr = &out->probes[nprobe];
		snprintf(pr->name, sizeof(pr->name), "allow_rule");
		format_target(pt[nprobe].fam, pt[nprobe].ad, pt[nprobe].port, pr->address, sizeof(pr->address));
		pr->expect_allowed = true;
		nprobe++;
	}
	/* names in policy: after the connect probes (an address the allowed
	 * name resolves to would open for them), one name the profile allows
	 * (its first exact name) and one it does not, each asked of the pod's
	 * resolver — which BPF hands to the exec's proxy */
	if (prof && prof->n_domains > 0) {
		static const char *const denied_names[] = { "boxkite-verify.invalid", "boxkite-verify-denied.invalid" };
		const char *deny = NULL;
		for (size_t k = 0; k < ARRAY_SIZE(denied_names) && !deny; k++)
			if (!bk_policy_domain(prof, denied_names[k]))
				deny = denied_names[k];
		const char *allow = NULL;
		for (int k = 0; k < prof->n_domains && !allow; k++)
			if (!prof->domains[k].wildcard)
				allow = prof->domains[k].name;
		const char *names[2] = { allow, deny };
		for (int k = 0; k < 2; k++) {
			if (!names[k])
				continue; /* a profile of wildcards only: no name it allows is known to exist */
			struct bk_verify_probe *pr = &out->probes[nprobe];
			snprintf(pr->name, sizeof(pr->name), k == 0 ? "dns_allowed" : "dns_denied");
			snprintf(pr->address, sizeof(pr->address), "%s", names[k]);
			pr->expect_allowed = k == 0;
			memset(&pt[nprobe], 0, sizeof(pt[nprobe]));
			pt[nprobe].dns_name = names[k];
			pt[nprobe].dns_allowed = k == 0;
			nprobe++;
		}
	}
	for (int i = 0; i < nprobe; i++) {
		if (pt[i].dns_name) {
			off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, " %s,dns,%s,53", out->probes[i].name,
						pt[i].dns_name);
			continue;
		}
		char as[INET6_ADDRSTRLEN];
		inet_ntop(pt[i].fam, pt[i].ad, as, sizeof(as));
		off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, " %s,%c,%s,%u", out->probes[i].name,
					pt[i].fam == AF_INET ? '4' : '6', as, pt[i].port);
	}
	/* the script travels in the environment of this one exec (not a secret) */
	struct bk_exec_args ea = {
		.command = cmd,
		.timeout = 30 + (uint32_t)hold,
		.secret_names = { "BK_VERIFY" },
		.secret_values = { VERIFY_PY },
		.nsecrets = 1,
		.client_fd = client_fd,
	};
	/* the limit /exec would have applied to these arguments */
	if (ea.timeout > a->cfg.timeout_max) {
		snprintf(out->error, sizeof(out->error), "\"timeout\" must be an integer from 1 to %u seconds",
			 a->cfg.timeout_max);
		return 0;
	}
	struct bk_exec_result *res = calloc(1, sizeof(*res));
	if (!res) {
		snprintf(out->error, sizeof(out->error), "exec failed");
		return 0;
	}
	struct bk_refusal ref;
	memset(&ref, 0, sizeof(ref));
	if (bk_session_exec(a, p, &ea, res, &ref) < 0) {
		/* the context itself could not be built: that is a failed verify */
		snprintf(out->error, sizeof(out->error), "%s", ref.err.msg[0] ? ref.err.msg : "exec failed");
		free(res);
		return 0;
	}
	judge(nprobe, pt, res, out);
	bk_exec_result_free(res);
	free(res);
	if (out->ran)
		log_verify(p, out);
	return 0;
}
