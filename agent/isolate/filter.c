/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/isolate/filter.h"
#include "agent/isolate/dnsproxy.h"
#include "agent/isolate/netns.h"
#include "agent/isolate/step.h"
#include "lib/err.h"
#include "lib/missing.h"
#include "lib/log.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>

#include "boxkite.skel.h"

struct bk_filter {
	struct boxkite *skel;
	pthread_mutex_t holes_lock;
	uint64_t holes;
	uint32_t prev_ids[BK_NPROGS]; /* the programs a previous agent had pinned here */
	int n_prev;
	char bpffs[256];
	char keepalive[512];
	struct bpf_link *keep_links[BK_NPROGS];
	struct bk_prog_desc progs[BK_NPROGS];
	struct ring_buffer *rb;
	bk_event_fn fn;
	void *ud;
	struct bk_dnsproxy *dnsproxy; /* names in policy: started with the events when a profile lists allow_domains */
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
	case 6: return s->progs.bk_recvmsg4;
	case 7: return s->progs.bk_recvmsg6;
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
	case BK_R_STALE_SOCKET: return "stale_socket";
	case BK_R_UNMARKED: return "unmarked";
	case BK_R_TUNNEL: return "ipv6_tunnel";
	case BK_R_DNS_MALFORMED: return "dns_malformed";
	case BK_R_DNS_TCP: return "dns_tcp";
	case BK_R_DNS_NAME: return "dns_name";
	case BK_R_NOT_RESOLVED: return "not_resolved";
	case BK_R_DNS_RATE: return "dns_rate";
	default: return "unknown";
	}
}

/* libbpf's warnings while the object loads (at start, one thread): the
 * verifier's log of a program that fails, for the one line the agent says. */
static char *load_log;
static size_t load_log_len;
static bool load_logging;

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level != LIBBPF_WARN)
		return 0;
	if (load_logging) {
		va_list cp;
		va_copy(cp, ap);
		int n = vsnprintf(NULL, 0, fmt, cp);
		va_end(cp);
		char *nl = n > 0 && load_log_len + (size_t)n < (64u << 20) ? realloc(load_log, load_log_len + (size_t)n + 1)
									    : NULL;
		if (nl) {
			load_log = nl;
			va_copy(cp, ap);
			vsnprintf(load_log + load_log_len, (size_t)n + 1, fmt, cp);
			va_end(cp);
			load_log_len += (size_t)n;
		}
	}
	if (getenv("BOXKITE_BPF_DEBUG"))
		return vfprintf(stderr, fmt, ap);
	return 0;
}

void bk_bpf_load_verdict(const char *log, char *prog, size_t plen, char *line, size_t llen)
{
	snprintf(prog, plen, "?");
	snprintf(line, llen, "no verifier log");
	if (!log || !log[0])
		return;
	/* without a verifier log: libbpf's own first complaint */
	snprintf(line, llen, "%.*s", (int)strcspn(log, "\n"), log);
	const char *beg = strstr(log, "-- BEGIN PROG LOAD LOG --");
	if (!beg)
		return;
	/* "libbpf: prog 'NAME': -- BEGIN PROG LOAD LOG --" */
	const char *ls = beg;
	while (ls > log && ls[-1] != '\n')
		ls--;
	const char *q = strstr(ls, "prog '");
	if (q && q < beg) {
		q += 6;
		size_t n = strcspn(q, "'");
		snprintf(prog, plen, "%.*s", (int)n, q);
	}
	beg = strchr(beg, '\n');
	const char *end = beg ? strstr(beg, "-- END PROG LOAD LOG --") : NULL;
	if (!beg || !end)
		return;
	/* the last line before "processed N insns" (or the log's end) that is
	 * not an instruction, a source line or register state */
	const char *best = NULL;
	size_t bl = 0;
	for (const char *l = beg + 1; l < end;) {
		const char *nl = memchr(l, '\n', (size_t)(end - l));
		size_t n = nl ? (size_t)(nl - l) : (size_t)(end - l);
		if (n >= 10 && !strncmp(l, "processed ", 10))
			break;
		bool insn = n && l[0] >= '0' && l[0] <= '9';
		/* register state "R1=ctx() R10=fp0" (an error like "R1 type=ctx
		 * expected=fp" is kept) */
		size_t d = 1;
		while (d < n && l[d] >= '0' && l[d] <= '9')
			d++;
		bool state = n > 1 && l[0] == 'R' && d > 1 && d < n && (l[d] == '=' || l[d] == '_');
		if (n && !insn && !state && l[0] != ';' && l[0] != ' ' && l[0] != '\t' && strncmp(l, "func#", 5) &&
		    strncmp(l, "last_idx", 8) && strncmp(l, "regs=", 5) && strncmp(l, "parent", 6) &&
		    strncmp(l, "from ", 5) && strncmp(l, "libbpf:", 7)) {
			best = l;
			bl = n;
		}
		if (!nl)
			break;
		l = nl + 1;
	}
	if (best)
		snprintf(line, llen, "%.*s", (int)bl, best);
}

static int rb_cb(void *ctx, void *data, size_t size)
{
	struct bk_filter *f = ctx;
	if (size < sizeof(struct bk_event) || !f->fn)
		return 0;
	f->fn(data, f->ud);
	return 0;
}

static void unpin_all(const char *bpffs)
{
	char p[600];
	static const char *const names[] = { "bk_sock_create", "bk_connect4", "bk_connect6", "bk_sendmsg4",
					     "bk_sendmsg6",    "bk_egress",   "bk_policy",   "bk_events",
					     "bk_stats",       "bk_allow4",   "bk_allow6",   "bk_deny4",
					     "bk_deny6",       "bk_local",    "bk_rate",     "bk_sk_owner",
					     "bk_recvmsg4",    "bk_recvmsg6", "bk_dnsproxy", "bk_resolved" };
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

int bk_filter_helper_uses(struct bk_prog_helpers out[BK_NPROGS])
{
	libbpf_set_print(libbpf_quiet);
	struct boxkite *s = boxkite__open();
	if (!s)
		return -errno;
	memset(out, 0, sizeof(struct bk_prog_helpers) * BK_NPROGS);
	for (int i = 0; i < BK_NPROGS; i++) {
		struct bpf_program *p = prog_at(s, i);
		struct bk_prog_helpers *h = &out[i];
		snprintf(h->prog, sizeof(h->prog), "%s", bpf_program__name(p));
		h->type = bpf_program__type(p);
		h->attach = bpf_program__expected_attach_type(p);
		const struct bpf_insn *in = bpf_program__insns(p);
		size_t n = bpf_program__insn_cnt(p);
		for (size_t k = 0; k < n; k++) {
			/* a helper call: BPF-to-BPF and kfunc calls set src_reg */
			if (in[k].code != (BPF_JMP | BPF_CALL) || in[k].src_reg != 0)
				continue;
			bool seen = false;
			for (int q = 0; q < h->n; q++)
				seen |= h->helpers[q] == in[k].imm;
			if (!seen && h->n < BK_MAX_HELPER_USES)
				h->helpers[h->n++] = in[k].imm;
		}
	}
	boxkite__destroy(s);
	return 0;
}

int bk_filter_open(const char *bpffs, const char *keepalive_cg, bool task_info, struct bk_filter **out, char *err,
		   size_t errlen)
{
	libbpf_set_print(libbpf_quiet);
	struct bk_filter *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->holes_lock, NULL);
	snprintf(f->bpffs, sizeof(f->bpffs), "%s", bpffs);
	snprintf(f->keepalive, sizeof(f->keepalive), "%s", keepalive_cg);
	int r;
	_cleanup_close_ int kfd = -1;
	f->skel = boxkite__open();
	if (!f->skel) {
		r = -errno;
		bk_fail_buf(err, errlen, r, "cannot open the BPF object: %s", strerror(-r));
		goto fail;
	}
	f->skel->rodata->bk_task_info = task_info;
	load_logging = true;
	r = boxkite__load(f->skel);
	load_logging = false;
	if (r) {
		r = r < 0 ? r : -EINVAL;
		char prog[64], line[300];
		bk_bpf_load_verdict(load_log, prog, sizeof(prog), line, sizeof(line));
		bk_fail_buf(err, errlen, r, "the kernel refuses the BPF program %s: %s", prog, line);
	}
	free(load_log);
	load_log = NULL;
	load_log_len = 0;
	if (r)
		goto fail;
	r = ensure_bpffs(bpffs);
	if (r < 0) {
		bk_fail_buf(err, errlen, r, "no bpffs for the pins and none could be mounted at the parent of %s: %s",
			    bpffs, strerror(-r));
		goto fail;
	}
	char p[600];
	r = mkdir_p(bpffs, 0700);
	if (r < 0) {
		bk_fail_buf(err, errlen, r, "cannot create %s (is bpffs mounted at /sys/fs/bpf?): %s",
			    bpffs, strerror(-r));
		goto fail;
	}
	/* Pins of a previous agent are replaced: maps and programs are
	 * reloaded; the cgroups of its execs keep its programs alive. Its
	 * programs' ids first: recovery finds the exec cgroups they are
	 * attached to (bk_filter_prev_ids). */
	for (int i = 0; i < BK_NPROGS; i++) {
		snprintf(p, sizeof(p), "%s/%s", bpffs, bpf_program__name(prog_at(f->skel, i)));
		int pfd = bpf_obj_get(p);
		struct bpf_prog_info info = { 0 };
		__u32 len = sizeof(info);
		if (pfd >= 0 && bpf_obj_get_info_by_fd(pfd, &info, &len) == 0 && info.id)
			f->prev_ids[f->n_prev++] = info.id;
		if (pfd >= 0)
			close(pfd);
	}
	unpin_all(bpffs);
	for (int i = 0; i < BK_NPROGS; i++) {
		struct bpf_program *prog = prog_at(f->skel, i);
		const char *name = bpf_program__name(prog);
		snprintf(p, sizeof(p), "%s/%s", bpffs, name);
		r = bpf_program__pin(prog, p);
		if (r) {
			bk_fail_buf(err, errlen, r, "cannot pin %s: %s", p, strerror(-r));
			goto fail;
		}
		struct bpf_prog_info info = { 0 };
		__u32 len = sizeof(info);
		r = bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len);
		if (r) {
			r = -errno;
			bk_fail_buf(err, errlen, r, "cannot read program info of %s: %s", name, strerror(-r));
			goto fail;
		}
		f->progs[i].name = name;
		f->progs[i].id = info.id;
		for (int k = 0; k < 8; k++)
			snprintf(f->progs[i].tag + 2 * k, 3, "%02x", info.tag[k]);
	}
	struct bpf_map *maps[] = { f->skel->maps.bk_policy, f->skel->maps.bk_events, f->skel->maps.bk_stats,
				   f->skel->maps.bk_allow4, f->skel->maps.bk_allow6, f->skel->maps.bk_deny4,
				   f->skel->maps.bk_deny6,  f->skel->maps.bk_local,  f->skel->maps.bk_rate,
				   f->skel->maps.bk_sk_owner, f->skel->maps.bk_dnsproxy,
				   f->skel->maps.bk_resolved };
	for (size_t i = 0; i < ARRAY_SIZE(maps); i++) {
		snprintf(p, sizeof(p), "%s/%s", bpffs, bpf_map__name(maps[i]));
		r = bpf_map__pin(maps[i], p);
		if (r) {
			bk_fail_buf(err, errlen, r, "cannot pin %s: %s", p, strerror(-r));
			goto fail;
		}
	}
	/* Keepalive cgroup: one attachment of every type, so that attaching to
	 * an exec cgroup does not flip the kernel's static keys each time. */
	if (mkdir(keepalive_cg, 0755) < 0 && errno != EEXIST) {
		r = -errno;
		bk_fail_buf(err, errlen, r, "cannot create the keepalive cgroup %s: %s", keepalive_cg, strerror(-r));
		goto fail;
	}
	kfd = open(keepalive_cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (kfd < 0) {
		r = -errno;
		bk_fail_buf(err, errlen, r, "cannot open %s: %s", keepalive_cg, strerror(-r));
		goto fail;
	}
	for (int i = 0; i < BK_NPROGS; i++) {
		f->keep_links[i] = bpf_program__attach_cgroup(prog_at(f->skel, i), kfd);
		if (!f->keep_links[i]) {
			r = -errno;
			bk_fail_buf(err, errlen, r, "cannot attach %s to %s: %s",
				    f->progs[i].name, keepalive_cg, strerror(-r));
			goto fail;
		}
	}
	f->rb = ring_buffer__new(bpf_map__fd(f->skel->maps.bk_events), rb_cb, f, NULL);
	if (!f->rb) {
		r = -errno;
		bk_fail_buf(err, errlen, r, "cannot open the denial ring buffer: %s", strerror(-r));
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
	rmdir(f->bpffs); /* fails, rightly, while an earlier agent's exec link pins remain */
	boxkite__destroy(f->skel);
	pthread_mutex_destroy(&f->holes_lock);
	free(f);
}

const struct bk_prog_desc *bk_filter_progs(const struct bk_filter *f) { return f->progs; }

int bk_filter_prev_ids(const struct bk_filter *f, uint32_t ids[BK_NPROGS])
{
	memcpy(ids, f->prev_ids, sizeof(f->prev_ids));
	return f->n_prev;
}

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
			return bk_fail_buf(err, errlen, n, "profile %s: deny set too large", p->name);
		}
		for (int k = 0; k < n; k++) {
			struct bk_lpm6 key; /* large enough for both */
			struct bk_deny v = { .reason = d[k].reason };
			lpm_key(&d[k].c, p->id, &key);
			int fd = bpf_map__fd(d[k].c.family == 4 ? f->skel->maps.bk_deny4 : f->skel->maps.bk_deny6);
			if (bpf_map_update_elem(fd, &key, &v, BPF_ANY)) {
				return bk_fail_buf(err, errlen, -errno, "profile %s: cannot write a deny rule: %s",
						   p->name, strerror(errno));
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
					return bk_fail_buf(err, errlen, -E2BIG,
							   "profile %s: more than %d port ranges apply to one prefix",
							   p->name,
					      BK_PORT_RANGES);
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
				return bk_fail_buf(err, errlen, -errno, "profile %s: cannot write an allow rule: %s",
						   p->name, strerror(errno));
			}
		}
	}
	return 0;
}

int bk_filter_attach(struct bk_filter *f, int cg_fd, uint64_t cgid, struct bk_policy pol, struct bk_filter_att *att,
		     char *err, size_t errlen)
{
	att->cgid = cgid;
	att->n_attached = 0;
	int r;
	/* a previous cgroup with this id (ids are not reused, but be exact) */
	bpf_map_delete_elem(bpf_map__fd(f->skel->maps.bk_rate), &cgid);
	for (int i = 0; i < att->n_locals; i++) {
		struct bk_local_key k = { .cgroup_id = cgid };
		memcpy(k.addr, att->locals[i].addr, 16);
		if (bpf_map_update_elem(bpf_map__fd(f->skel->maps.bk_local), &k, &att->locals[i].kind, BPF_ANY)) {
			r = -errno;
			return bk_fail_buf(err, errlen, r, "cannot write the exec's address entries: %s", strerror(-r));
		}
	}
	if (att->has_dns && bpf_map_update_elem(bpf_map__fd(f->skel->maps.bk_dnsproxy), &cgid, &att->dns, BPF_ANY)) {
		r = -errno;
		return bk_fail_buf(err, errlen, r, "cannot write the exec's DNS proxy entry: %s", strerror(-r));
	}
	r = bpf_map_update_elem(bpf_map__fd(f->skel->maps.bk_policy), &cgid, &pol, BPF_ANY);
	if (r) {
		r = -errno;
		return bk_fail_buf(err, errlen, r, "cannot write the policy entry for cgroup %llu: %s",
				   (unsigned long long)cgid, strerror(-r));
	}
	att->attached = true;
	/* Attached to the cgroup itself (BPF_PROG_ATTACH, multi), not as
	 * links: the cgroup holds them until the kernel releases it, with no
	 * descriptor or pin of ours, so the exec stays filtered when the
	 * agent dies, and its sockets after it ended (see below). */
	for (int i = 0; i < BK_NPROGS; i++) {
		struct bpf_program *prog = prog_at(f->skel, i);
		if (bpf_prog_attach(bpf_program__fd(prog), cg_fd, bpf_program__expected_attach_type(prog),
				    BPF_F_ALLOW_MULTI)) {
			r = -errno;
			return bk_fail_buf(err, errlen, r, "cannot attach %s to the exec cgroup: %s",
					   f->progs[i].name, strerror(-r));
		}
		att->n_attached++;
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

/* The exec's entries in the maps: its policy, its rate, its addresses. */
static void policy_forget(struct bk_filter *f, struct bk_filter_att *att)
{
	bpf_map_delete_elem(bpf_map__fd(f->skel->maps.bk_policy), &att->cgid);
	bpf_map_delete_elem(bpf_map__fd(f->skel->maps.bk_rate), &att->cgid);
	for (int i = 0; i < att->n_locals; i++) {
		struct bk_local_key k = { .cgroup_id = att->cgid };
		memcpy(k.addr, att->locals[i].addr, 16);
		bpf_map_delete_elem(bpf_map__fd(f->skel->maps.bk_local), &k);
	}
}

static void dns_forget(struct bk_filter *f, struct bk_filter_att *att)
{
	if (att->dnsx)
		bk_dnsx_close(f->dnsproxy, att->dnsx);
	att->dnsx = NULL;
	if (att->has_dns)
		bpf_map_delete_elem(bpf_map__fd(f->skel->maps.bk_dnsproxy), &att->cgid);
	att->has_dns = false;
}

void bk_filter_detach(struct bk_filter *f, int cg_fd, struct bk_filter_att *att)
{
	dns_forget(f, att);
	for (int i = 0; i < att->n_attached; i++) {
		struct bpf_program *prog = prog_at(f->skel, i);
		bpf_prog_detach2(bpf_program__fd(prog), cg_fd, bpf_program__expected_attach_type(prog));
	}
	att->n_attached = 0;
	if (att->attached)
		policy_forget(f, att);
	att->attached = false;
}

/* ---- ended execs: programs kept until the kernel releases the cgroup -------
 *
 * A socket keeps the cgroup it was created in, and with it that cgroup's
 * BPF state: cgroup_sk_alloc/cgroup_sk_clone take a cgroup_bpf_get on it,
 * and the programs attached there keep running for the socket after the
 * exec ended and its cgroup was removed (rmdir only kills the refcount;
 * cgroup_bpf_release runs when the last socket is freed, and only then
 * detaches the programs). Detaching them by hand at the end of an exec
 * would leave every socket the exec handed out (SCM_RIGHTS, pidfd_getfd)
 * unfiltered. So an ended exec is retired instead: its policy entry goes
 * (its sockets are then refused as stale_socket by its own programs,
 * bk_sk_owner), and its programs stay on the cgroup.
 *
 * Once the cgroup is removed nobody can take them off: BPF_PROG_DETACH
 * (and BPF_PROG_QUERY) need a descriptor of the cgroup, and one of a
 * removed cgroup is refused (cgroup_get_from_fd: css_tryget_online).
 * Before that, a privileged process could detach them through the
 * cgroup's path; the exec's own receipt reads them back at its end, and
 * the removal after it reads them back again (bk_filter_removing): one
 * missing there is a hole, and no exec running across it claims
 * bpf_held_to_end. */

void bk_filter_retire(struct bk_filter *f, struct bk_filter_att *att)
{
	dns_forget(f, att);
	if (att->attached)
		policy_forget(f, att);
	att->attached = false;
}

void bk_filter_removing(struct bk_filter *f, int cg_fd, const char *exec_id)
{
	int n = bk_filter_attached(f, cg_fd);
	if (n == BK_NPROGS)
		return;
	pthread_mutex_lock(&f->holes_lock);
	f->holes++;
	pthread_mutex_unlock(&f->holes_lock);
	log_errorf("bpf_hole", "%d of the %d programs of ended exec %s were taken off its cgroup before its removal: "
		   "its sockets may have been unfiltered", BK_NPROGS - n, BK_NPROGS, exec_id);
}

uint64_t bk_filter_holes(struct bk_filter *f)
{
	pthread_mutex_lock(&f->holes_lock);
	uint64_t h = f->holes;
	pthread_mutex_unlock(&f->holes_lock);
	return h;
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

/* ---- one exec: its policy inputs, the attach, the read-back ----------------- */

static int add_local(struct bk_filter_att *att, const unsigned char *a16, uint32_t kind)
{
	for (int i = 0; i < att->n_locals; i++)
		if (!memcmp(att->locals[i].addr, a16, 16))
			return 0;
	if (att->n_locals == BK_MAX_LOCALS)
		return -E2BIG;
	memcpy(att->locals[att->n_locals].addr, a16, 16);
	att->locals[att->n_locals].kind = kind;
	att->n_locals++;
	return 0;
}

/* The pod's own addresses (denied to an exec that shares its netns). */
static int pod_addrs(struct exec_ctx *x, struct bk_filter_att *att)
{
	unsigned char a[BK_MAX_LOCALS][16];
	int n = bk_netns_addrs_of(x->e->self_netns, x->pod->sandbox_pidfd, a, BK_MAX_LOCALS);
	for (int i = 0; i < n; i++)
		add_local(att, a[i], BK_LOCAL_SELF);
	return n < 0 ? n : 0;
}

/* The pod's resolvers, from the sandbox container's own resolv.conf,
 * resolved beneath its root (a symlink there cannot point us elsewhere). */
static int pod_resolvers(const struct bk_pod *pod, struct bk_filter_att *att, char (*search)[BK_DNS_NAME_MAX + 1],
			 int *n_search);

/* Names in policy: the exec's own DNS proxy endpoint in the pod's network
 * namespace, forwarding to the pod's resolvers. */
static int dns_proxy_open(struct exec_ctx *x)
{
	struct bk_filter *f = x->e->filter;
	if (!f->dnsproxy)
		return bk_fail(&x->err, -ENOTSUP, NULL, "profile %s lists allow_domains and the DNS proxy is not running",
			       x->req->profile->name);
	struct bk_filter_att tmp = { 0 };
	char search[BK_DNSX_SEARCH][BK_DNS_NAME_MAX + 1];
	int n_search = 0;
	int r = pod_resolvers(x->pod, &tmp, search, &n_search);
	if (r < 0)
		return bk_fail(&x->err, r, NULL, "cannot read the pod's resolvers: %s", strerror(-r));
	uint8_t ups[BK_DNSX_UPSTREAMS][16];
	int n = 0;
	for (int i = 0; i < tmp.n_locals && n < BK_DNSX_UPSTREAMS; i++)
		memcpy(ups[n++], tmp.locals[i].addr, 16);
	char ferr[BK_ERRMSG_MAX] = "";
	r = bk_dnsx_open(f->dnsproxy, x->e->self_netns, x->pod->sandbox_pidfd, x->cg.id, x->req->profile,
			 (const uint8_t(*)[16])ups, n, (const char(*)[BK_DNS_NAME_MAX + 1])search, n_search, &x->att.dns,
			 &x->att.dnsx, ferr, sizeof(ferr));
	if (r < 0)
		return bk_fail(&x->err, r, NULL, "%s", ferr);
	x->att.has_dns = true;
	return 0;
}

static int pod_resolvers(const struct bk_pod *pod, struct bk_filter_att *att, char (*search)[BK_DNS_NAME_MAX + 1],
			 int *n_search)
{
	char root[64];
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pod->sandbox.init_pid);
	_cleanup_close_ int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return -errno;
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	_cleanup_close_ int fd = (int)syscall(SYS_openat2, rfd, "etc/resolv.conf", &how, sizeof(how));
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	char buf[8192];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	char *save = NULL;
	for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char addr[64];
		if (search && (!strncmp(l, "search", 6) || !strncmp(l, "domain", 6)) && (l[6] == ' ' || l[6] == '\t')) {
			/* the last search (or domain) line is the one in force */
			*n_search = 0;
			char *s2 = NULL;
			for (char *d = strtok_r(l + 6, " \t", &s2); d && *n_search < BK_DNSX_SEARCH; d = strtok_r(NULL, " \t", &s2))
				if (strlen(d) <= BK_DNS_NAME_MAX)
					snprintf(search[(*n_search)++], BK_DNS_NAME_MAX + 1, "%s", d);
			continue;
		}
		if (sscanf(l, " nameserver %63s", addr) != 1)
			continue;
		unsigned char a16[16] = { 0 };
		if (inet_pton(AF_INET, addr, a16 + 12) == 1) {
			a16[10] = a16[11] = 0xff;
		} else if (inet_pton(AF_INET6, addr, a16) != 1)
			continue;
		add_local(att, a16, BK_LOCAL_RESOLVER);
	}
	return 0;
}

/* ---- the receipt's policy, read back from the maps ----------------------------------------- */

struct rb_text {
	char *buf;
	size_t off, cap;
	EVP_MD_CTX *md;
};

_printf_(2, 3) static void rb_put(struct rb_text *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int w = t->buf ? vsnprintf(t->buf + t->off, t->cap - t->off, fmt, ap) : -1;
	va_end(ap);
	if (w > 0 && (size_t)w < t->cap - t->off)
		t->off += (size_t)w;
}

static void rb_hash(struct rb_text *t, const void *key, size_t kl, const void *val, size_t vl)
{
	if (t->md) {
		if (kl)
			EVP_DigestUpdate(t->md, key, kl);
		EVP_DigestUpdate(t->md, val, vl);
	}
}

static void protos_str(uint8_t p, char *out, size_t n)
{
	snprintf(out, n, "%s%s%s%s", p & BK_PROTO_TCP ? "tcp+" : "", p & BK_PROTO_UDP ? "udp+" : "",
		 p & BK_PROTO_ICMP ? "icmp+" : "", p ? "" : "none+");
	out[strlen(out) - 1] = '\0';
}

/* One entry of an LPM map (allow or deny), if it belongs to profile id. */
static void rb_lpm_entry(struct rb_text *t, const void *kp, const void *vp, bool v6, bool allow, uint32_t id)
{
	struct bk_lpm6 key;
	size_t kl = v6 ? sizeof(struct bk_lpm6) : sizeof(struct bk_lpm4);
	memcpy(&key, kp, kl);
	if (key.profile != id)
		return;
	struct bk_cidr c = { .family = v6 ? 6 : 4, .plen = (uint8_t)(key.prefixlen - 32) };
	memcpy(c.addr, key.addr, v6 ? 16 : 4);
	char cs[64];
	bk_cidr_format(&c, cs, sizeof(cs));
	if (allow) {
		struct bk_ports v;
		memcpy(&v, vp, sizeof(v));
		if (v.n > BK_PORT_RANGES)
			return;
		rb_hash(t, &key, kl, &v, sizeof(v));
		rb_put(t, "allow %s", cs);
		for (uint32_t i = 0; i < v.n; i++) {
			char ps[24];
			protos_str(v.r[i].protos, ps, sizeof(ps));
			rb_put(t, "%s %s %u-%u", i ? "," : "", ps, v.r[i].lo, v.r[i].hi);
		}
		rb_put(t, "\n");
	} else {
		struct bk_deny v;
		memcpy(&v, vp, sizeof(v));
		rb_hash(t, &key, kl, &v, sizeof(v));
		rb_put(t, "deny %s %u\n", cs, v.reason);
	}
}

/* Every entry of one LPM map (allow or deny, v4 or v6) that belongs to
 * profile id, as the kernel holds it, in the map's own order: read in
 * batches (BPF_MAP_LOOKUP_BATCH, LPM tries since 5.18: the kernel walks the
 * keys as BPF_MAP_GET_NEXT_KEY does, a few syscalls instead of two per
 * entry on every exec), or key by key where the kernel has no batch for
 * the map. */
static void rb_lpm(struct rb_text *t, int fd, bool v6, bool allow, uint32_t id)
{
	enum { BATCH = 64 };
	size_t kl = v6 ? sizeof(struct bk_lpm6) : sizeof(struct bk_lpm4);
	size_t vl = allow ? sizeof(struct bk_ports) : sizeof(struct bk_deny);
	_cleanup_free_ uint8_t *keys = malloc(BATCH * kl);
	_cleanup_free_ uint8_t *vals = malloc(BATCH * vl);
	if (!keys || !vals) {
		rb_put(t, "cannot read the %s%s map: out of memory\n", allow ? "allow" : "deny", v6 ? "6" : "4");
		return;
	}
	struct bk_lpm6 in, out;
	bool first = true;
	for (;;) {
		__u32 n = BATCH;
		int r = bpf_map_lookup_batch(fd, first ? NULL : &in, &out, keys, vals, &n, NULL);
		if (r < 0 && r != -ENOENT) {
			if (first && (r == -EINVAL || r == -ENOTSUPP || r == -EOPNOTSUPP))
				break; /* no batch for this map: key by key, below */
			rb_put(t, "cannot read the %s%s map: %s\n", allow ? "allow" : "deny", v6 ? "6" : "4", strerror(-r));
			return;
		}
		for (__u32 i = 0; i < n; i++)
			rb_lpm_entry(t, keys + i * kl, vals + i * vl, v6, allow, id);
		if (r == -ENOENT)
			return; /* the end of the map */
		memcpy(&in, &out, kl);
		first = false;
	}
	struct bk_lpm6 key, next;
	first = true;
	while (bpf_map_get_next_key(fd, first ? NULL : &key, &next) == 0) {
		first = false;
		memcpy(&key, &next, kl);
		if (bpf_map_lookup_elem(fd, &key, vals) == 0)
			rb_lpm_entry(t, &key, vals, v6, allow, id);
	}
}

/* Names in policy, for the receipt: the allow_domains the exec's proxy
 * enforces, and each name it resolved with each address, as bk_resolved
 * holds it now (its ports and the seconds left), or "expired" (swept, or
 * past its TTL). Per exec: shown, not part of the digest. */
static void rb_names(struct bk_filter *f, const struct bk_policy_set *ps, const struct bk_filter_att *att,
		     struct rb_text *t, uint32_t profile, uint64_t cgid)
{
	for (int i = 0; i < ps->n; i++) {
		if (ps->prof[i].id != profile)
			continue;
		for (int d = 0; d < ps->prof[i].n_domains; d++) {
			const struct bk_domain_rule *r = &ps->prof[i].domains[d];
			char pr[16];
			protos_str(r->protos, pr, sizeof(pr));
			rb_put(t, "domain %s %s", r->name, pr);
			for (int k = 0; k < r->n_ports; k++)
				rb_put(t, "%s%u-%u", k ? "," : " ", r->ports[k][0], r->ports[k][1]);
			rb_put(t, "\n");
		}
	}
	struct bk_dnsx_seen *seen = calloc(BK_DNSX_SEEN, sizeof(*seen));
	if (!seen)
		return;
	int n = bk_dnsx_seen(f->dnsproxy, att->dnsx, seen, BK_DNSX_SEEN);
	uint64_t now = now_ns();
	for (int i = 0; i < n; i++)
		for (int k = 0; k < seen[i].n; k++) {
			struct bk_local_key key = { .cgroup_id = cgid };
			memcpy(key.addr, seen[i].addr[k], 16);
			char a[INET6_ADDRSTRLEN];
			bool v4 = !memcmp(key.addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);
			inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? key.addr + 12 : key.addr, a, sizeof(a));
			struct bk_resolved v;
			if (bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.bk_resolved), &key, &v) || v.expires_ns <= now) {
				rb_put(t, "resolved %s %s expired\n", seen[i].name, a);
				continue;
			}
			rb_put(t, "resolved %s %s", seen[i].name, a);
			for (uint32_t r = 0; r < v.ports.n && r < BK_PORT_RANGES; r++) {
				char pr[16];
				protos_str(v.ports.r[r].protos, pr, sizeof(pr));
				rb_put(t, " %s %u-%u", pr, v.ports.r[r].lo, v.ports.r[r].hi);
			}
			rb_put(t, " ttl %llus\n", (unsigned long long)((v.expires_ns - now) / 1000000000ull));
		}
	free(seen);
}

void bk_filter_readback(struct bk_filter *f, const struct bk_policy_set *ps, const struct bk_filter_att *att,
			uint64_t cgid, struct bk_exec_result *res)
{
	struct rb_text t = { .cap = 32768 };
	t.buf = malloc(t.cap);
	t.md = EVP_MD_CTX_new();
	if (!t.buf || !t.md || !EVP_DigestInit_ex(t.md, EVP_sha256(), NULL))
		goto out;
	t.buf[0] = '\0';
	struct bk_policy pol;
	if (bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.bk_policy), &cgid, &pol)) {
		/* no entry: every socket of the exec is refused (no_policy) */
		rb_put(&t, "no policy entry for cgroup %llu\n", (unsigned long long)cgid);
		snprintf(res->policy, sizeof(res->policy), "%s", "none");
	} else {
		rb_hash(&t, NULL, 0, &pol, sizeof(pol));
		const char *name = NULL;
		for (int i = 0; i < ps->n; i++)
			if (ps->prof[i].id == pol.profile)
				name = ps->prof[i].name;
		if (name)
			snprintf(res->policy, sizeof(res->policy), "%s", name);
		else
			snprintf(res->policy, sizeof(res->policy), "#%u", pol.profile);
		rb_put(&t, "profile %s\nloopback %s\ndns %s\ndns_tcp %s\nicmp %s\n", res->policy,
		       pol.flags & BK_POL_ALLOW_LOOPBACK ? "on" : "off", pol.flags & BK_POL_ALLOW_DNS ? "on" : "off",
		       pol.flags & BK_POL_ALLOW_DNS_TCP ? "on" : "off", pol.flags & BK_POL_ALLOW_ICMP ? "on" : "off");
		struct bk_dns_target dt;
		if ((pol.flags & BK_POL_DNS_PROXY) &&
		    !bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.bk_dnsproxy), &cgid, &dt)) {
			/* per exec (its port): shown, not part of the digest */
			char a[INET_ADDRSTRLEN];
			inet_ntop(AF_INET, &dt.ip4, a, sizeof(a));
			rb_put(&t, "dns_proxy %s:%u%s\n", a, dt.port, dt.has6 ? " [::1]" : "");
		} else if (pol.flags & BK_POL_DNS_PROXY) {
			rb_put(&t, "dns_proxy missing\n");
		}
		if (att->dnsx && f->dnsproxy)
			rb_names(f, ps, att, &t, pol.profile, cgid);
		rb_lpm(&t, bpf_map__fd(f->skel->maps.bk_allow4), false, true, pol.profile);
		rb_lpm(&t, bpf_map__fd(f->skel->maps.bk_allow6), true, true, pol.profile);
		rb_lpm(&t, bpf_map__fd(f->skel->maps.bk_deny4), false, false, pol.profile);
		rb_lpm(&t, bpf_map__fd(f->skel->maps.bk_deny6), true, false, pol.profile);
	}
	for (int i = 0; i < att->n_locals; i++) {
		struct bk_local_key k = { .cgroup_id = cgid };
		memcpy(k.addr, att->locals[i].addr, 16);
		__u32 kind;
		if (bpf_map_lookup_elem(bpf_map__fd(f->skel->maps.bk_local), &k, &kind))
			continue;
		rb_hash(&t, k.addr, sizeof(k.addr), &kind, sizeof(kind));
		char a[INET6_ADDRSTRLEN];
		bool v4 = !memcmp(k.addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);
		inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? k.addr + 12 : k.addr, a, sizeof(a));
		rb_put(&t, "%s %s\n", kind == BK_LOCAL_SELF ? "self" : kind == BK_LOCAL_RESOLVER ? "resolver" : "local", a);
	}
	unsigned char md[32];
	unsigned int ml = 0;
	if (EVP_DigestFinal_ex(t.md, md, &ml) && ml == 32)
		for (int i = 0; i < 32; i++)
			snprintf(res->policy_digest + 2 * i, 3, "%02x", md[i]);
	free(res->policy_rules);
	res->policy_rules = t.buf;
	t.buf = NULL;
out:
	free(t.buf);
	EVP_MD_CTX_free(t.md);
}

static int watch(struct bk_engine *e, uint64_t cgid, struct bk_exec_result *res, const struct bk_pod *pod);

int bk_step_bpf(struct exec_ctx *x)
{
	struct bk_filter *f = x->e->filter;
	const struct bk_profile *prof = x->req->profile;
	struct bk_exec_result *res = x->res;
	struct bk_policy pol = {
		.flags = (x->fresh_netns ? BK_POL_ALLOW_LOOPBACK : 0) | (prof->icmp ? BK_POL_ALLOW_ICMP : 0) |
			 (prof->dns ? BK_POL_ALLOW_DNS : 0) | (prof->dns_tcp ? BK_POL_ALLOW_DNS_TCP : 0),
		.profile = prof->id,
	};
	int r;
	if (!x->fresh_netns && (r = pod_addrs(x, &x->att)) < 0)
		return bk_fail(&x->err, r, NULL, "cannot read the pod's own addresses: %s", strerror(-r));
	if (prof->dns && (r = pod_resolvers(x->pod, &x->att, NULL, NULL)) < 0)
		return bk_fail(&x->err, r, NULL, "cannot read the pod's resolvers: %s", strerror(-r));
	if (prof->n_domains) {
		if ((r = dns_proxy_open(x)) < 0)
			return r;
		pol.flags |= BK_POL_DNS_PROXY;
	}
	snprintf(res->policy, sizeof(res->policy), "%s", prof->name); /* read back at the end */
	x->holes0 = bk_filter_holes(f);
	char ferr[BK_ERRMSG_MAX] = "";
	r = bk_filter_attach(f, x->cg.v2_fd, x->cg.id, pol, &x->att, ferr, sizeof(ferr));
	if (r < 0)
		return bk_fail(&x->err, r, NULL, "%s", ferr);
	/* read back, from the kernel, which programs are attached to the exec
	 * cgroup: every one of ours must be there */
	if (bk_filter_attached(f, x->cg.v2_fd) != BK_NPROGS)
		return bk_fail(&x->err, -ENOENT, NULL, "the exec cgroup does not carry every boxkite program after attach");
	memcpy(res->progs, bk_filter_progs(f), sizeof(res->progs));
	res->n_progs = BK_NPROGS;
	/* a warm slot (warm.h) is watched from its take, for its request */
	x->watched = !x->warm_prep && watch(x->e, x->cg.id, res, x->pod) == 0;
	return 0;
}

int bk_step_bpf_take(struct exec_ctx *x)
{
	/* the slot's address entries were made from the pod's addresses and
	 * resolvers of then: they must still be those of now (else the exec
	 * is made on request, from what holds now) */
	if (!x->fresh_netns || x->req->profile->dns) {
		struct bk_filter_att now;
		now.n_locals = 0;
		int r = x->fresh_netns ? 0 : pod_addrs(x, &now);
		if (r == 0 && x->req->profile->dns)
			r = pod_resolvers(x->pod, &now, NULL, NULL);
		if (r < 0 || now.n_locals != x->att.n_locals ||
		    memcmp(now.locals, x->att.locals, sizeof(now.locals[0]) * (size_t)now.n_locals)) {
			x->slot_gone = true;
			return bk_fail(&x->err, r < 0 ? r : -ESTALE, NULL,
				       "the warm slot's pod addresses or resolvers changed");
		}
	}
	x->holes0 = bk_filter_holes(x->e->filter);
	x->watched = watch(x->e, x->cg.id, x->res, x->pod) == 0;
	return 0;
}

/* ---- denial events of live execs ----------------------------------------- */

/* A live exec whose denial events go to its result. */
struct bk_exec_slot {
	uint64_t cgid;
	struct bk_exec_result *res;
	const struct bk_pod *pod; /* whose exec (for the denial's log line) */
	pid_t pid; /* the exec's first process (host pid), 0 until spawned */
	int wake_fd; /* eventfd of a streamed exec, written per denial (-1: none) */
};

static const char *hook_name(uint8_t h)
{
	switch (h) {
	case BK_H_SOCK_CREATE: return "sock_create";
	case BK_H_CONNECT4: return "connect4";
	case BK_H_CONNECT6: return "connect6";
	case BK_H_SENDMSG4: return "sendmsg4";
	case BK_H_SENDMSG6: return "sendmsg6";
	case BK_H_EGRESS: return "egress";
	case BK_H_DNS_PROXY: return "dns_proxy";
	default: return "unknown";
	}
}

/* Who a denial names: the process, when the hook ran in its context;
 * else (pid 0: cgroup_skb/egress, or a kernel without the helpers in the
 * socket hooks) the exec, by its first process and that one's name now. */
static void attribute(struct bk_denial *d, const struct bk_event *ev, pid_t exec_pid)
{
	d->hook = hook_name(ev->hook);
	if (ev->pid) {
		d->pid = ev->pid;
		memcpy(d->comm, ev->comm, sizeof(d->comm) - 1);
		d->attributed_to = "process";
		return;
	}
	d->attributed_to = "exec";
	d->pid = (uint32_t)exec_pid;
	if (exec_pid <= 0)
		return;
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/comm", (int)exec_pid);
	_cleanup_free_ char *c = NULL;
	if (read_file_at(AT_FDCWD, p, 64, &c, NULL) == 0)
		snprintf(d->comm, sizeof(d->comm), "%.*s", (int)strcspn(c, "\n"), c);
}

#define MAX_SLOTS 1024

static void file_event(struct bk_engine *e, const struct bk_event *ev, const char *dns_name);

static void on_event(const struct bk_event *ev, void *ud)
{
	file_event(ud, ev, NULL);
}

/* A denial of the DNS proxy (its thread), filed like the kernel's. */
static void dnsx_deny(void *ud, uint64_t cgid, uint32_t reason, const char *name, uint8_t proto)
{
	struct bk_event ev = { .cgroup_id = cgid, .reason = reason, .port = 53, .proto = proto,
			       .hook = BK_H_DNS_PROXY };
	file_event(ud, &ev, name);
}

/* An allowed answer (its addresses already in bk_resolved): logged; the
 * receipt reads the map back. */
static int dnsx_resolved(void *ud, uint64_t cgid, const struct bk_dns_answer *a, const struct bk_domain_rule *rule)
{
	(void)ud;
	char addrs[256] = "";
	size_t off = 0;
	for (int i = 0; i < a->n_addrs && off < sizeof(addrs) - 48; i++) {
		char t[INET6_ADDRSTRLEN];
		inet_ntop(a->addrs[i].family == 4 ? AF_INET : AF_INET6, a->addrs[i].addr, t, sizeof(t));
		off += (size_t)snprintf(addrs + off, sizeof(addrs) - off, "%s%s", i ? "," : "", t);
	}
	log_info("dns_resolved", LI("cgroup_id", cgid), LS("name", a->chain[0]), LS("rule", rule->name),
		 LS("addrs", addrs));
	return 0;
}

static void file_event(struct bk_engine *e, const struct bk_event *ev, const char *dns_name)
{
	pthread_mutex_lock(&e->lock);
	struct bk_exec_result *res = NULL;
	const struct bk_pod *pod = NULL;
	pid_t exec_pid = 0;
	int wake_fd = -1;
	for (int i = 0; i < e->nslots; i++)
		if (e->slots[i].cgid == ev->cgroup_id && e->slots[i].res) {
			res = e->slots[i].res;
			pod = e->slots[i].pod;
			exec_pid = e->slots[i].pid;
			wake_fd = e->slots[i].wake_fd;
			break;
		}
	if (!res) {
		e->events_unmatched++;
		pthread_mutex_unlock(&e->lock);
		return;
	}
	res->denied_total++;
	int n0 = res->n_denied;
	if (res->n_denied < BK_DENIED_MAX && ev->hook != BK_H_SOCK_CREATE) {
		struct bk_denial *d = &res->denied[res->n_denied++];
		memset(d, 0, sizeof(*d));
		if (dns_name)
			snprintf(d->dst, sizeof(d->dst), "dns_proxy");
		else if (ev->family == AF_INET6)
			inet_ntop(AF_INET6, ev->addr, d->dst, sizeof(d->dst));
		else
			inet_ntop(AF_INET, ev->addr, d->dst, sizeof(d->dst));
		if (dns_name)
			snprintf(d->name, sizeof(d->name), "%s", dns_name);
		d->port = ev->port;
		snprintf(d->proto, sizeof(d->proto), "%s",
			 ev->proto == IPPROTO_TCP ? "tcp" : ev->proto == IPPROTO_UDP ? "udp" :
			 (ev->proto == IPPROTO_ICMP || ev->proto == IPPROTO_ICMPV6) ? "icmp" : "ip");
		attribute(d, ev, exec_pid);
		snprintf(d->reason, sizeof(d->reason), "%s", bk_reason_name(ev->reason));
	} else if (res->n_denied < BK_DENIED_MAX) {
		struct bk_denial *d = &res->denied[res->n_denied++];
		memset(d, 0, sizeof(*d));
		snprintf(d->dst, sizeof(d->dst), "socket");
		snprintf(d->proto, sizeof(d->proto), "%s", ev->proto == IPPROTO_ICMP || ev->proto == IPPROTO_ICMPV6 ? "icmp" : "raw");
		attribute(d, ev, exec_pid);
		snprintf(d->reason, sizeof(d->reason), "%s", bk_reason_name(ev->reason));
	}
	/* logged as it happens (`boxkitectl events`), for the ones the receipt
	 * lists; copied here, logged after the engine lock (every exec's
	 * watch and unwatch take it) */
	bool logit = res->n_denied > n0;
	if (logit && wake_fd >= 0) {
		/* under the lock: the fd is closed only after bk_filter_watch_wake(-1) */
		uint64_t one = 1;
		if (write(wake_fd, &one, sizeof(one)) < 0) {
			/* EAGAIN: the counter is already non-zero, the reader wakes anyway */
		}
	}
	struct bk_denial d;
	char exec_id[sizeof(res->exec_id)], name[256] = "", ns[256] = "";
	if (logit) {
		d = res->denied[res->n_denied - 1];
		memcpy(exec_id, res->exec_id, sizeof(exec_id));
		if (pod) {
			snprintf(name, sizeof(name), "%s", pod->pod_name);
			snprintf(ns, sizeof(ns), "%s", pod->pod_namespace);
		}
	}
	pthread_mutex_unlock(&e->lock);
	if (logit)
		log_info("denied", LS("exec_id", exec_id), LS("pod", pod ? name : NULL), LS("namespace", pod ? ns : NULL),
			 LS("dst", d.dst), LI("port", d.port), LS("proto", d.proto), LS("reason", d.reason),
			 LS("comm", d.comm), LS("name", d.name[0] ? d.name : NULL));
}

/* The denials' thread: it wakes for an event, else every 100 ms to see
 * whether the agent stops. */
static void *events_main(void *arg)
{
	struct bk_engine *e = arg;
	while (!e->stop)
		bk_filter_events_poll(e->filter, 100, on_event, e);
	return NULL;
}

int bk_filter_events_start(struct bk_engine *e, char *err, size_t errlen)
{
	e->slots = calloc(MAX_SLOTS, sizeof(*e->slots));
	if (!e->slots)
		return -ENOMEM;
	e->nslots = MAX_SLOTS;
	bool names = false;
	for (int i = 0; i < e->cfg->policy.n; i++)
		names |= e->cfg->policy.prof[i].n_domains > 0;
	if (names && e->filter) {
		int pr = bk_dnsproxy_start(bpf_map__fd(e->filter->skel->maps.bk_resolved), dnsx_deny, dnsx_resolved, e,
					   &e->filter->dnsproxy, err, errlen);
		if (pr < 0)
			return pr;
	}
	int r = pthread_create(&e->rb_thread, NULL, events_main, e);
	if (r)
		return bk_fail_buf(err, errlen, -r, "cannot start the ring buffer thread: %s", strerror(r));
	e->rb_started = true;
	return 0;
}

void bk_filter_events_stop(struct bk_engine *e)
{
	if (e->filter) {
		bk_dnsproxy_stop(e->filter->dnsproxy);
		e->filter->dnsproxy = NULL;
	}
	e->stop = 1;
	if (e->rb_started)
		pthread_join(e->rb_thread, NULL);
	e->rb_started = false;
	free(e->slots);
	e->slots = NULL;
	e->nslots = 0;
}

void bk_filter_events_drain(struct bk_engine *e)
{
	/* Events are submitted before the denied syscall returns, so one
	 * non-blocking pass after the exec finished sees all of its own. */
	if (e->filter)
		bk_filter_events_poll(e->filter, 0, on_event, e);
}

static int watch(struct bk_engine *e, uint64_t cgid, struct bk_exec_result *res, const struct bk_pod *pod)
{
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < e->nslots; i++)
		if (!e->slots[i].res) {
			e->slots[i].cgid = cgid;
			e->slots[i].res = res;
			e->slots[i].pod = pod;
			e->slots[i].pid = 0;
			e->slots[i].wake_fd = -1;
			e->live++;
			pthread_mutex_unlock(&e->lock);
			return 0;
		}
	pthread_mutex_unlock(&e->lock);
	return -EBUSY;
}

void bk_filter_watch_pid(struct bk_engine *e, struct bk_exec_result *res, pid_t pid)
{
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < e->nslots; i++)
		if (e->slots[i].res == res)
			e->slots[i].pid = pid;
	pthread_mutex_unlock(&e->lock);
}

void bk_filter_watch_wake(struct bk_engine *e, struct bk_exec_result *res, int efd)
{
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < e->nslots; i++)
		if (e->slots[i].res == res)
			e->slots[i].wake_fd = efd;
	pthread_mutex_unlock(&e->lock);
}

void bk_filter_unwatch(struct bk_engine *e, struct bk_exec_result *res)
{
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < e->nslots; i++)
		if (e->slots[i].res == res) {
			e->slots[i].res = NULL;
			e->slots[i].cgid = 0;
			e->slots[i].pid = 0;
			e->slots[i].wake_fd = -1;
			e->live--;
		}
	pthread_mutex_unlock(&e->lock);
}
