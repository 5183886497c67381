/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/isolate/filter.h"
#include "lib/util.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "boxkite.skel.h"

struct bk_filter {
	struct boxkite *skel;
	char bpffs[256];
	char keepalive[512];
	struct bpf_link *keep_links[BK_NPROGS];
	struct bk_prog_desc progs[BK_NPROGS];
	struct ring_buffer *rb;
	bk_event_fn fn;
	void *ud;
};

static struct bpf_program *prog_at(struct boxkite *s, int i)
{
	switch (i) {
	case 0: return s->progs.bk_sock_create;
	case 1: return s->progs.bk_connect4;
	case 2: return s->progs.bk_connect6;
	case 3: return s->progs.bk_sendmsg4;
	case 4: return s->progs.bk_sendmsg6;
	case 5: return s->progs.bk_egress;
	default: return NULL;
	}
}

const char *bk_reason_name(uint32_t reason)
{
	switch (reason) {
	case BK_R_NO_POLICY: return "no_policy";
	case BK_R_DENY_ALL: return "deny_all";
	case BK_R_RAW_SOCKET: return "raw_socket";
	case BK_R_ICMP: return "icmp";
	case BK_R_LOOPBACK: return "loopback";
	case BK_R_EGRESS: return "egress_backstop";
	case BK_R_METADATA: return "metadata";
	case BK_R_LINK_LOCAL: return "link_local";
	case BK_R_PRIVATE: return "private";
	case BK_R_CLUSTER: return "cluster";
	case BK_R_POD_SELF: return "pod_self";
	case BK_R_DNS: return "dns";
	case BK_R_NOT_ALLOWED: return "not_allowed";
	case BK_R_SPECIAL: return "special";
	default: return "unknown";
	}
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_WARN && getenv("BOXKITE_BPF_DEBUG"))
		return vfprintf(stderr, fmt, ap);
	return 0;
}

static int rb_cb(void *ctx, void *data, size_t size)
{
	struct bk_filter *f = ctx;
	if (size < sizeof(struct bk_event) || !f->fn)
		return 0;
	f->fn(data, f->ud);
	return 0;
}

#define F_ERR(...) snprintf(err, errlen, __VA_ARGS__)

static void unpin_all(const char *bpffs)
{
	char p[600];
	static const char *const names[] = { "bk_sock_create", "bk_connect4", "bk_connect6", "bk_sendmsg4",
					     "bk_sendmsg6",    "bk_egress",   "bk_policy",   "bk_events",
					     "bk_stats",       "bk_allow4",   "bk_allow6",   "bk_deny4",
					     "bk_deny6",       "bk_local",    "bk_rate" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		snprintf(p, sizeof(p), "%s/%s", bpffs, names[i]);
		unlink(p);
	}
}

/* Pins need a bpffs. Nodes normally mount one at /sys/fs/bpf; where the
 * parent of our pin directory is not one, mount it (as Cilium does). */
static int ensure_bpffs(const char *dir)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", dir);
	const char *parent = dirname(buf);
	struct statfs sf;
	if (statfs(parent, &sf) < 0)
		return -errno;
	if (sf.f_type == BPF_FS_MAGIC)
		return 0;
	if (mount("bpffs", parent, "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700") < 0)
		return -errno;
	return 0;
}

int bk_filter_open(const char *bpffs, const char *keepalive_cg, struct bk_filter **out, char *err, size_t errlen)
{
	libbpf_set_print(libbpf_quiet);
	struct bk_filter *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	snprintf(f->bpffs, sizeof(f->bpffs), "%s", bpffs);
	snprintf(f->keepalive, sizeof(f->keepalive), "%s", keepalive_cg);
	int r;
	_cleanup_close_ int kfd = -1;
	f->skel = boxkite__open();
	if (!f->skel) {
		r = -errno;
		F_ERR("cannot open the BPF object: %s", strerror(-r));
		goto fail;
	}
	r = boxkite__load(f->skel);
	if (r) {
		r = r < 0 ? r : -EINVAL;
		F_ERR("cannot load the BPF programs (is this kernel built with cgroup BPF?): %s", strerror(-r));
		goto fail;
	}
	r = ensure_bpffs(bpffs);
	if (r < 0) {
		F_ERR("no bpffs for the pins and none could be mounted at the parent of %s: %s", bpffs, strerror(-r));
		goto fail;
	}
	r = mkdir_p(bpffs, 0700);
	if (r < 0) {
		F_ERR("cannot create %s (is bpffs mounted at /sys/fs/bpf?): %s", bpffs, strerror(-r));
		goto fail;
	}
	/* Pins of a previous agent are replaced: maps and programs are
	 * reloaded, live exec links keep the old programs alive until the
	 * recovery pass reaps their execs. */
	unpin_all(bpffs);
	char p[600];
	for (int i = 0; i < BK_NPROGS; i++) {
		struct bpf_program *prog = prog_at(f->skel, i);
		const char *name = bpf_program__name(prog);
		snprintf(p, sizeof(p), "%s/%s", bpffs, name);
		r = bpf_program__pin(prog, p);
		if (r) {
			F_ERR("cannot pin %s: %s", p, strerror(-r));
			goto fail;
		}
		struct bpf_prog_info info = { 0 };
		__u32 len = sizeof(info);
		r = bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len);
		if (r) {
			r = -errno;
			F_ERR("cannot read program info of %s: %s", name, strerror(-r));
			goto fail;
		}
		f->progs[i].name = name;
		f->progs[i].id = info.id;
		for (int k = 0; k < 8; k++)
			snprintf(f->progs[i].tag + 2 * k, 3, "%02x", info.tag[k]);
	}
	struct bpf_map *maps[] = { f->skel->maps.bk_policy, f->skel->maps.bk_events, f->skel->maps.bk_stats,
				   f->skel->maps.bk_allow4, f->skel->maps.bk_allow6, f->skel->maps.bk_deny4,
				   f->skel->maps.bk_deny6,  f->skel->maps.bk_local,  f->skel->maps.bk_rate };
	for (size_t i = 0; i < ARRAY_SIZE(maps); i++) {
		snprintf(p, sizeof(p), "%s/%s", bpffs, bpf_map__name(maps[i]));
		r = bpf_map__pin(maps[i], p);
		if (r) {
			F_ERR("cannot pin %s: %s", p, strerror(-r));
			goto fail;
		}
	}
	/* Keepalive cgroup: one attachment of every type, so that attaching to
	 * an exec cgroup does not flip the kernel's static keys each time. */
	if (mkdir(keepalive_cg, 0755) < 0 && errno != EEXIST) {
		r = -errno;
		F_ERR("cannot create the keepalive cgroup %s: %s", keepalive_cg, strerror(-r));
		goto fail;
	}
	kfd = open(keepalive_cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (kfd < 0) {
		r = -errno;
		F_ERR("cannot open %s: %s", keepalive_cg, strerror(-r));
		goto fail;
	}
	for (int i = 0; i < BK_NPROGS; i++) {
		f->keep_links[i] = bpf_program__attach_cgroup(prog_at(f->skel, i), kfd);
		if (!f->keep_links[i]) {
			r = -errno;
			F_ERR("cannot attach %s to %s: %s", f->progs[i].name, keepalive_cg, strerror(-r));
			goto fail;
		}
	}
	f->rb = ring_buffer__new(bpf_map__fd(f->skel->maps.bk_events), rb_cb, f, NULL);
	if (!f->rb) {
		r = -errno;
		F_ERR("cannot open the denial ring buffer: %s", strerror(-r));
		goto fail;
	}
	*out = f;
	return 0;
fail:
	bk_filter_close(f);
	return r < 0 ? r : -EINVAL;
}

void bk_filter_close(struct bk_filter *f)
{
	if (!f)
		return;
	ring_buffer__free(f->rb);
	for (int i = 0; i < BK_NPROGS; i++)
		bpf_link__destroy(f->keep_links[i]);
	if (f->keepalive[0])
		rmdir(f->keepalive);
	unpin_all(f->bpffs);
	rmdir(f->bpffs); /* fails, rightly, while exec link pins remain */
	boxkite__destroy(f->skel);
	free(f);
}

const struct bk_prog_desc *bk_filter_progs(const struct bk_filter *f) { return f->progs; }

static void lpm_key(const struct bk_cidr *c, uint32_t profile, void *key)
{
	if (c->family == 4) {
		struct bk_lpm4 *k = key;
		memset(k, 0, sizeof(*k));
		k->prefixlen = 32u + c->plen;
		k->profile = profile;
		memcpy(k->addr, c->addr, 4);
	} else {
		struct bk_lpm6 *k = key;
		memset(k, 0, sizeof(*k));
		k->prefixlen = 32u + c->plen;
		k->profile = profile;
		memcpy(k->addr, c->addr, 16);
	}
}

int bk_filter_load_policy(struct bk_filter *f, const struct bk_policy_set *ps, char *err, size_t errlen)
{
	for (int i = 0; i < ps->n; i++) {
		const struct bk_profile *p = &ps->prof[i];
		struct bk_deny_entry d[64];
		int n = bk_policy_deny_set(ps, p, d, 64);
		if (n < 0) {
			F_ERR("profile %s: deny set too large", p->name);
			return n;
		}
		for (int k = 0; k < n; k++) {
			struct bk_lpm6 key; /* large enough for both */
			struct bk_deny v = { .reason = d[k].reason };
			lpm_key(&d[k].c, p->id, &key);
			int fd = bpf_map__fd(d[k].c.family == 4 ? f->skel->maps.bk_deny4 : f->skel->maps.bk_deny6);
			if (bpf_map_update_elem(fd, &key, &v, BPF_ANY)) {
				F_ERR("profile %s: cannot write a deny rule: %s", p->name, strerror(errno));
				return -errno;
			}
		}
		/* A more specific allow prefix also carries the ports of every
		 * allow rule that contains it: LPM returns one entry only. */
		for (int k = 0; k < p->n_allow; k++) {
			const struct bk_allow_rule *r = &p->allow[k];
			struct bk_ports v;
			memset(&v, 0, sizeof(v));
			for (int q = 0; q < p->n_allow; q++) {
				if (!bk_cidr_contains(&p->allow[q].c, &r->c))
					continue;
				if (v.n == BK_PORT_RANGES) {
					F_ERR("profile %s: more than %d port ranges apply to one prefix", p->name,
					      BK_PORT_RANGES);
					return -E2BIG;
				}
				v.r[v.n].lo = p->allow[q].lo;
				v.r[v.n].hi = p->allow[q].hi;
				v.r[v.n].protos = p->allow[q].protos;
				v.n++;
			}
			struct bk_lpm6 key;
			lpm_key(&r->c, p->id, &key);
			int fd = bpf_map__fd(r->c.family == 4 ? f->skel->maps.bk_allow4 : f->skel->maps.bk_allow6);
			if (bpf_map_update_elem(fd, &key, &v, BPF_ANY)) {
				F_ERR("profile %s: cannot write an allow rule: %s", p->name, strerror(errno));
				return -errno;
			}
		}
	}
	return 0;
}

int bk_filter_attach(struct bk_filter *f, int cg_fd, uint64_t cgid, const char *exec_id, struct bk_policy pol,
		     struct bk_filter_att *att, char *err, size_t errlen)
{
	for (int i = 0; i < BK_NPROGS; i++)
		att->link_fd[i] = -1;
	att->cgid = cgid;
	att->pin_dir[0] = '\0';
	int r;
	/* a previous cgroup with this id (ids are not reused, but be exact) */
	bpf_map_delete_elem(bpf_map__fd(f->skel->maps.bk_rate), &cgid);
	for (int i = 0; i < att->n_locals; i++) {
		struct bk_local_key k = { .cgroup_id = cgid };
		memcpy(k.addr, att->locals[i].addr, 16);
		if (bpf_map_update_elem(bpf_map__fd(f->skel->maps.bk_local), &k, &att->locals[i].kind, BPF_ANY)) {
			r = -errno;
			F_ERR("cannot write the exec's address entries: %s", strerror(-r));
			return r;
		}
	}
	r = bpf_map_update_elem(bpf_map__fd(f->skel->maps.bk_policy), &cgid, &pol, BPF_ANY);
	if (r) {
		r = -errno;
		F_ERR("cannot write the policy entry for cgroup %llu: %s", (unsigned long long)cgid, strerror(-r));
		return r;
	}
	att->attached = true;
	snprintf(att->pin_dir, sizeof(att->pin_dir), "%s/exec-%s", f->bpffs, exec_id);
	if (mkdir(att->pin_dir, 0700) < 0) {
		r = -errno;
		att->pin_dir[0] = '\0';
		F_ERR("cannot create %s: %s", att->pin_dir, strerror(-r));
		return r;
	}
	for (int i = 0; i < BK_NPROGS; i++) {
		struct bpf_program *prog = prog_at(f->skel, i);
		LIBBPF_OPTS(bpf_link_create_opts, o);
		int fd = bpf_link_create(bpf_program__fd(prog), cg_fd, bpf_program__expected_attach_type(prog), &o);
		if (fd < 0) {
			r = -errno;
			F_ERR("cannot attach %s to the exec cgroup: %s", f->progs[i].name, strerror(-r));
			return r;
		}
		att->link_fd[i] = fd;
		char p[700];
		snprintf(p, sizeof(p), "%s/%s", att->pin_dir, f->progs[i].name);
		if (bpf_obj_pin(fd, p)) {
			r = -errno;
			F_ERR("cannot pin the link %s: %s", p, strerror(-r));
			return r;
		}
	}
	return 0;
}

uint64_t bk_filter_denied(struct bk_filter *f, uint64_t cgid)
{
	struct bk_rate r;
	if (bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.bk_rate), &cgid, &r))
		return 0;
	return r.total;
}

void bk_filter_detach(struct bk_filter *f, struct bk_filter_att *att)
{
	for (int i = 0; i < BK_NPROGS; i++) {
		if (att->pin_dir[0]) {
			char p[700];
			snprintf(p, sizeof(p), "%s/%s", att->pin_dir, f->progs[i].name);
			unlink(p);
		}
		if (att->link_fd[i] >= 0)
			close(att->link_fd[i]);
		att->link_fd[i] = -1;
	}
	if (att->pin_dir[0])
		rmdir(att->pin_dir);
	att->pin_dir[0] = '\0';
	if (att->attached) {
		bpf_map_delete_elem(bpf_map__fd(f->skel->maps.bk_policy), &att->cgid);
		bpf_map_delete_elem(bpf_map__fd(f->skel->maps.bk_rate), &att->cgid);
		for (int i = 0; i < att->n_locals; i++) {
			struct bk_local_key k = { .cgroup_id = att->cgid };
			memcpy(k.addr, att->locals[i].addr, 16);
			bpf_map_delete_elem(bpf_map__fd(f->skel->maps.bk_local), &k);
		}
	}
	att->attached = false;
}

int bk_filter_events_poll(struct bk_filter *f, int timeout_ms, bk_event_fn fn, void *ud)
{
	f->fn = fn;
	f->ud = ud;
	int r = ring_buffer__poll(f->rb, timeout_ms);
	return r < 0 ? r : 0;
}

uint64_t bk_filter_stat(struct bk_filter *f, int idx)
{
	int ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0 || ncpu > 4096)
		return 0;
	uint64_t vals[ncpu];
	__u32 key = (__u32)idx;
	if (bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.bk_stats), &key, vals))
		return 0;
	uint64_t sum = 0;
	for (int i = 0; i < ncpu; i++)
		sum += vals[i];
	return sum;
}

enum bpf_attach_type bk_filter_attach_type(const struct bk_filter *f, int i)
{
	return bpf_program__expected_attach_type(prog_at(f->skel, i));
}

int bk_filter_attached(struct bk_filter *f, int cg_fd)
{
	int n = 0;
	for (int i = 0; i < BK_NPROGS; i++) {
		__u32 ids[16], cnt = 16, flags = 0;
		if (bpf_prog_query(cg_fd, bk_filter_attach_type(f, i), 0, &flags, ids, &cnt) < 0)
			continue;
		for (__u32 k = 0; k < cnt; k++)
			if (ids[k] == f->progs[i].id) {
				n++;
				break;
			}
	}
	return n;
}
