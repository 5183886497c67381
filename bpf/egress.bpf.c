// SPDX-License-Identifier: GPL-2.0-only
/* boxkite egress filters, attached to every exec cgroup as links.
 *
 * Policy is looked up by the id of the exec cgroup that created the socket
 * (bk_sk_owner, written at sock_create: a socket is judged by its creator's
 * policy whoever holds it later); a cgroup without an entry is denied (fail
 * closed), and a socket whose creating exec has ended (its entry removed by
 * the agent) is denied as stale_socket. Its programs keep running for it
 * after the exec ends because the agent leaves the exec's links attached
 * until the kernel releases the cgroup (see filter.c, bk_filter_retire).
 * The decision, in order:
 *   loopback (allowed only with the exec's own netns) -> the pod's own
 *   addresses (denied) -> port 53 (only to the pod's resolvers, only if the
 *   profile allows DNS) -> the deny set (metadata, link-local, private,
 *   cluster; per profile, minus the operator's explicit overrides) -> the
 *   profile's allow rules (prefix + port range + protocol) -> denied.
 * IPv4-mapped IPv6 is decided as the IPv4 address; an IPv6 address that
 * embeds an IPv4 one (NAT64 64:ff9b::/96 and 64:ff9b:1::/48, IPv4-compatible
 * ::a.b.c.d, 6to4, Teredo: embedded_reason) is denied when the embedded
 * IPv4 is in the deny set. Port 53 over UDP passes only as one well-formed
 * DNS query (checked per packet in cgroup_skb/egress, dns_query_check);
 * over TCP only when the profile opts in ("dns_tcp").
 * Names in policy (BK_POL_DNS_PROXY, a profile with allow_domains): before
 * any of that, connect/sendmsg to port 53 (UDP or TCP, any address) is
 * rewritten to the exec's own DNS proxy (bk_dnsproxy) and recvmsg shows
 * the answer as from the address asked; after the deny set and the allow
 * rules, an address is admitted only from the exec's bk_resolved entries
 * (an allowed name's answer, until its TTL), else not_resolved.
 * Socket hooks return 0, which the caller sees at once as EPERM;
 * cgroup_skb/egress applies the same decision to every packet as the
 * backstop (ICMP, and anything that bypassed the socket hooks).
 *
 * Helpers: each program uses only helpers that its program type has on
 * every kernel from 5.15 on (the table in docs/install.md; the unit test
 * tests/unit/test-bpfload.c checks the object against it, the kernel's
 * verifier against itself). The process of a denial (pid, comm) is taken
 * only in the socket hooks, which run in the calling process's context
 * (cgroup_current_func_proto since 6.1, sock_filter/sock_addr_func_proto
 * since 5.7); cgroup_skb/egress runs wherever the packet is sent from and
 * may not ask (6.1 and 6.12 refuse bpf_get_current_pid_tgid and
 * bpf_get_current_comm there), so its events carry pid 0 and no comm and
 * the agent names the exec instead. The creator's mark lives in socket
 * local storage: bpf_sk_storage_get is offered to cgroup/sock_create
 * (sock_filter_func_proto, taking the ctx), to the sock_addr hooks and to
 * cgroup_skb (with bpf_sk_fullsock) on 5.15 and 6.1 alike. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "egress.h"

#define AF_INET_ 2
#define AF_INET6_ 10
#define SOCK_RAW_ 3

char LICENSE[] SEC("license") = "GPL";

/* Set by the agent before load from its probe of this kernel: whether the
 * socket hooks may call bpf_get_current_pid_tgid/bpf_get_current_comm. A
 * read-only constant: when 0 the verifier never sees those calls (dead
 * code), and the events degrade to pid 0 — the decisions do not change. */
const volatile __u32 bk_task_info = 1;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BK_MAX_EXECS);
	__type(key, __u64);
	__type(value, struct bk_policy);
} bk_policy SEC(".maps");

/* The exec cgroup that created each socket. BPF_F_CLONE: a socket accepted
 * from a marked listener carries the listener's mark. Freed with the
 * socket. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
	__type(key, int);
	__type(value, struct bk_sk_owner);
} bk_sk_owner SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, BK_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct bk_lpm4);
	__type(value, struct bk_ports);
} bk_allow4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, BK_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct bk_lpm6);
	__type(value, struct bk_ports);
} bk_allow6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, BK_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct bk_lpm4);
	__type(value, struct bk_deny);
} bk_deny4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, BK_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct bk_lpm6);
	__type(value, struct bk_deny);
} bk_deny6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BK_MAX_EXECS * 4);
	__type(key, struct bk_local_key);
	__type(value, __u32);
} bk_local SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, BK_MAX_EXECS);
	__type(key, __u64);
	__type(value, struct bk_rate);
} bk_rate SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BK_MAX_EXECS);
	__type(key, __u64);
	__type(value, struct bk_dns_target);
} bk_dnsproxy SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BK_MAX_RESOLVED);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct bk_local_key);
	__type(value, struct bk_resolved);
} bk_resolved SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} bk_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, BK_S_MAX);
	__type(key, __u32);
	__type(value, __u64);
} bk_stats SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&bk_stats, &idx);
	if (v)
		*v += 1;
}

/* Count every denial per cgroup; send at most BK_EVENTS_PER_SEC events per
 * cgroup and second, so a flood cannot swamp the agent. */
static __always_inline int rate_ok(__u64 cgid)
{
	__u64 now = bpf_ktime_get_ns();
	struct bk_rate *r = bpf_map_lookup_elem(&bk_rate, &cgid);
	if (!r) {
		struct bk_rate n = { .window_ns = now, .in_window = 1, .total = 1 };
		bpf_map_update_elem(&bk_rate, &cgid, &n, BPF_ANY);
		return 1;
	}
	__sync_fetch_and_add(&r->total, 1);
	if (now - r->window_ns > 1000000000ull) {
		r->window_ns = now;
		r->in_window = 1;
		return 1;
	}
	if (r->in_window >= BK_EVENTS_PER_SEC) {
		stat_inc(BK_S_EVENTS_SUPPRESSED);
		return 0;
	}
	r->in_window++;
	return 1;
}

/* One denial: counted, and sent as an event within the rate. in_task: the
 * hook runs in the context of the process that asked (the socket hooks);
 * only then may the event name it. */
static __always_inline void emit(__u64 cgid, __u32 reason, __u8 hook, __u16 family, __u8 proto, __u16 port,
				 const __u8 *addr, int alen, const int in_task)
{
	stat_inc(BK_S_DENIED);
	if (!rate_ok(cgid))
		return;
	struct bk_event *e = bpf_ringbuf_reserve(&bk_events, sizeof(*e), 0);
	if (!e) {
		stat_inc(BK_S_EVENTS_LOST);
		return;
	}
	e->cgroup_id = cgid;
	e->ts_ns = bpf_ktime_get_ns();
	e->pid = 0;
	e->reason = reason;
	e->family = family;
	e->port = port;
	e->proto = proto;
	e->hook = hook;
	e->pad[0] = e->pad[1] = 0;
	__builtin_memset(e->addr, 0, sizeof(e->addr));
	if (alen == 4)
		__builtin_memcpy(e->addr, addr, 4);
	else if (alen == 16)
		__builtin_memcpy(e->addr, addr, 16);
	__builtin_memset(e->comm, 0, sizeof(e->comm));
	if (in_task && bk_task_info) {
		e->pid = bpf_get_current_pid_tgid() >> 32;
		bpf_get_current_comm(e->comm, sizeof(e->comm));
	}
	bpf_ringbuf_submit(e, 0);
}

static __always_inline __u8 proto_bit(__u8 proto)
{
	if (proto == IPPROTO_TCP)
		return BK_PROTO_TCP;
	if (proto == IPPROTO_UDP)
		return BK_PROTO_UDP;
	if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6)
		return BK_PROTO_ICMP;
	return 0;
}

static __always_inline int ports_allow(const struct bk_ports *v, __u8 proto, __u16 port)
{
	__u8 bit = proto_bit(proto);
	if (!bit)
		return 0;
#pragma unroll
	for (int i = 0; i < BK_PORT_RANGES; i++) {
		if (i >= v->n)
			break;
		if (!(v->r[i].protos & bit))
			continue;
		if (bit == BK_PROTO_ICMP || (port >= v->r[i].lo && port <= v->r[i].hi))
			return 1;
	}
	return 0;
}

static __always_inline __u32 local_kind(__u64 cgid, const __u8 *a16)
{
	struct bk_local_key k = { .cgroup_id = cgid };
	__builtin_memcpy(k.addr, a16, 16);
	__u32 *v = bpf_map_lookup_elem(&bk_local, &k);
	return v ? *v : 0;
}

static __always_inline __u32 deny4_reason(__u32 profile, __u32 dst_be)
{
	struct bk_lpm4 k = { .prefixlen = 64, .profile = profile };
	__builtin_memcpy(k.addr, &dst_be, 4);
	struct bk_deny *d = bpf_map_lookup_elem(&bk_deny4, &k);
	return d ? d->reason : BK_R_NONE;
}

/* Port 53: only to the pod's resolvers, only when the profile allows DNS;
 * over TCP only when it also says "dns_tcp" (a stream cannot be checked per
 * packet; UDP is, in bk_egress: dns_query_check). */
static __always_inline __u32 dns_reason(const struct bk_policy *p, __u32 lk, __u8 proto)
{
	if (!(p->flags & BK_POL_ALLOW_DNS) || lk != BK_LOCAL_RESOLVER)
		return BK_R_DNS;
	if (proto == IPPROTO_TCP && !(p->flags & BK_POL_ALLOW_DNS_TCP))
		return BK_R_DNS_TCP;
	return BK_R_NONE;
}

/* Names in policy: an address an allowed name resolved to for this exec
 * (not expired) is open on that name's ports; one never resolved (or
 * expired) is not_resolved, another port of a resolved one not_allowed. */
static __always_inline __u32 resolved_reason(__u64 cgid, const __u8 *a16, __u8 proto, __u16 port)
{
	struct bk_local_key k = { .cgroup_id = cgid };
	__builtin_memcpy(k.addr, a16, 16);
	struct bk_resolved *r = bpf_map_lookup_elem(&bk_resolved, &k);
	if (!r || bpf_ktime_get_ns() >= r->expires_ns)
		return BK_R_NOT_RESOLVED;
	return ports_allow(&r->ports, proto, port) ? BK_R_NONE : BK_R_NOT_ALLOWED;
}

/* The exec's DNS proxy (names in policy): its address and port only. */
static __always_inline int to_proxy4(const struct bk_policy *p, __u64 cgid, __u32 dst_be, __u8 proto, __u16 port)
{
	if (!(p->flags & BK_POL_DNS_PROXY) || (proto != IPPROTO_UDP && proto != IPPROTO_TCP))
		return 0;
	struct bk_dns_target *t = bpf_map_lookup_elem(&bk_dnsproxy, &cgid);
	return t && t->ip4 == dst_be && t->port == port;
}

static __always_inline __u32 decide4(const struct bk_policy *p, __u64 cgid, __u32 dst_be, __u8 proto, __u16 port)
{
	if (!p)
		return BK_R_NO_POLICY;
	if (to_proxy4(p, cgid, dst_be, proto, port))
		return BK_R_NONE;
	if ((bpf_ntohl(dst_be) >> 24) == 127)
		return (p->flags & BK_POL_ALLOW_LOOPBACK) ? BK_R_NONE : BK_R_LOOPBACK;
	__u8 m[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	__builtin_memcpy(m + 12, &dst_be, 4);
	__u32 lk = local_kind(cgid, m);
	if (lk == BK_LOCAL_SELF)
		return BK_R_POD_SELF;
	if (port == 53 && (proto == IPPROTO_UDP || proto == IPPROTO_TCP))
		return dns_reason(p, lk, proto);
	__u32 dr = deny4_reason(p->profile, dst_be);
	if (dr)
		return dr;
	struct bk_lpm4 k = { .prefixlen = 64, .profile = p->profile };
	__builtin_memcpy(k.addr, &dst_be, 4);
	struct bk_ports *v = bpf_map_lookup_elem(&bk_allow4, &k);
	if (v && ports_allow(v, proto, port))
		return BK_R_NONE;
	if (p->flags & BK_POL_DNS_PROXY)
		return resolved_reason(cgid, m, proto, port);
	return p->profile ? BK_R_NOT_ALLOWED : BK_R_DENY_ALL;
}

/* An IPv4 address that an IPv6 destination embeds (network order): denied
 * when it is in the deny set, in 127/8 (the translator's or relay's own
 * loopback) or one of the pod's own addresses. */
static __always_inline __u32 embedded4_reason(const struct bk_policy *p, __u64 cgid, __u32 v4)
{
	__u32 dr = deny4_reason(p->profile, v4);
	if (dr)
		return dr;
	if ((bpf_ntohl(v4) >> 24) == 127)
		return BK_R_LOOPBACK;
	__u8 m[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	__builtin_memcpy(m + 12, &v4, 4);
	return local_kind(cgid, m) == BK_LOCAL_SELF ? BK_R_POD_SELF : BK_R_NONE;
}

static __always_inline __u32 be4(__u8 a, __u8 b, __u8 c, __u8 d)
{
	__u32 v;
	__u8 *x = (__u8 *)&v;
	x[0] = a;
	x[1] = b;
	x[2] = c;
	x[3] = d;
	return v;
}

/* The IPv6 forms that carry an IPv4 address a packet may end up at, and the
 * reason that address is denied (BK_R_NONE: none is):
 *   64:ff9b::/96       well-known NAT64 (RFC 6052): the last 32 bits
 *   ::/96              IPv4-compatible ::a.b.c.d (:: and ::1 are decided as
 *                      loopback before): the last 32 bits
 *   64:ff9b:1::/48     local-use NAT64 (RFC 8215): the translator's prefix
 *                      length is not known here, so every RFC 6052 reading
 *                      counts — /96 (the last 32 bits, when not zero), and
 *                      /48, /56, /64 where the u octet (bits 64..71) and
 *                      the suffix after the address are zero
 *   2002::/16          6to4: bits 16..47
 *   2001::/32          Teredo: the server (bits 32..63) and the client (the
 *                      last 32 bits XOR 0xffffffff)
 * 6to4 and Teredo as such are in the deny set (ipv6_tunnel, policy.c): a
 * profile that lifts them still gets this check. */
static __always_inline __u32 embedded_reason(const struct bk_policy *p, __u64 cgid, const __u32 *dst)
{
	const __u8 *b = (const __u8 *)dst;
	__u32 r;
	if (dst[0] == bpf_htonl(0x0064ff9b) && dst[1] == 0 && dst[2] == 0)
		return embedded4_reason(p, cgid, dst[3]);
	if (dst[0] == 0 && dst[1] == 0 && dst[2] == 0)
		return embedded4_reason(p, cgid, dst[3]);
	if (dst[0] == bpf_htonl(0x0064ff9b) && (bpf_ntohl(dst[1]) >> 16) == 1) {
		if (dst[3] && (r = embedded4_reason(p, cgid, dst[3])))
			return r;
		if (b[8])
			return BK_R_NONE;
		if (b[11] == 0 && dst[3] == 0 && (r = embedded4_reason(p, cgid, be4(b[6], b[7], b[9], b[10]))))
			return r;
		if (dst[3] == 0 && (r = embedded4_reason(p, cgid, be4(b[7], b[9], b[10], b[11]))))
			return r;
		if (b[13] == 0 && b[14] == 0 && b[15] == 0)
			return embedded4_reason(p, cgid, be4(b[9], b[10], b[11], b[12]));
		return BK_R_NONE;
	}
	if ((bpf_ntohl(dst[0]) >> 16) == 0x2002)
		return embedded4_reason(p, cgid, be4(b[2], b[3], b[4], b[5]));
	if (dst[0] == bpf_htonl(0x20010000)) {
		r = embedded4_reason(p, cgid, dst[1]);
		return r ? r : embedded4_reason(p, cgid, ~dst[3]);
	}
	return BK_R_NONE;
}

static __always_inline __u32 decide6(const struct bk_policy *p, __u64 cgid, const __u32 *dst, __u8 proto, __u16 port)
{
	if (!p)
		return BK_R_NO_POLICY;
	/* ::ffff:a.b.c.d is IPv4 in disguise */
	if (dst[0] == 0 && dst[1] == 0 && dst[2] == bpf_htonl(0xffff))
		return decide4(p, cgid, dst[3], proto, port);
	if (dst[0] == 0 && dst[1] == 0 && dst[2] == 0 && dst[3] == bpf_htonl(1) && (p->flags & BK_POL_DNS_PROXY) &&
	    (proto == IPPROTO_UDP || proto == IPPROTO_TCP)) {
		struct bk_dns_target *t = bpf_map_lookup_elem(&bk_dnsproxy, &cgid);
		if (t && t->has6 && t->port == port)
			return BK_R_NONE;
	}
	if (dst[0] == 0 && dst[1] == 0 && dst[2] == 0 && (dst[3] == bpf_htonl(1) || dst[3] == 0))
		return (p->flags & BK_POL_ALLOW_LOOPBACK) && dst[3] ? BK_R_NONE : BK_R_LOOPBACK;
	/* an IPv4 address inside (NAT64, IPv4-compatible, 6to4, Teredo) */
	__u32 er = embedded_reason(p, cgid, dst);
	if (er)
		return er;
	__u32 lk = local_kind(cgid, (const __u8 *)dst);
	if (lk == BK_LOCAL_SELF)
		return BK_R_POD_SELF;
	if (port == 53 && (proto == IPPROTO_UDP || proto == IPPROTO_TCP))
		return dns_reason(p, lk, proto);
	struct bk_lpm6 k = { .prefixlen = 160, .profile = p->profile };
	__builtin_memcpy(k.addr, dst, 16);
	struct bk_deny *d = bpf_map_lookup_elem(&bk_deny6, &k);
	if (d)
		return d->reason;
	struct bk_ports *v = bpf_map_lookup_elem(&bk_allow6, &k);
	if (v && ports_allow(v, proto, port))
		return BK_R_NONE;
	if (p->flags & BK_POL_DNS_PROXY)
		return resolved_reason(cgid, (const __u8 *)dst, proto, port);
	return p->profile ? BK_R_NOT_ALLOWED : BK_R_DENY_ALL;
}

/* A new socket is marked with the exec cgroup that creates it (the cgroup
 * the kernel gives it: the current task's). Unmarkable (no memory for the
 * storage): refused, so no socket of an exec escapes its creator's policy. */
SEC("cgroup/sock_create")
int bk_sock_create(struct bpf_sock *sk)
{
	__u64 cgid = bpf_get_current_cgroup_id();
	struct bk_policy *p = bpf_map_lookup_elem(&bk_policy, &cgid);
	__u32 r = BK_R_NONE;
	if (!p)
		r = BK_R_NO_POLICY;
	else if (sk->type == SOCK_RAW_)
		r = BK_R_RAW_SOCKET;
	else if ((sk->protocol == IPPROTO_ICMP || sk->protocol == IPPROTO_ICMPV6) && !(p->flags & BK_POL_ALLOW_ICMP))
		r = BK_R_ICMP;
	if (r == BK_R_NONE) {
		struct bk_sk_owner *o = bpf_sk_storage_get(&bk_sk_owner, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (o) {
			o->cgroup_id = cgid;
			return BK_VERDICT_PASS;
		}
		r = BK_R_UNMARKED;
	}
	emit(cgid, r, BK_H_SOCK_CREATE, sk->family, sk->protocol, 0, 0, 0, 1);
	return BK_VERDICT_REJECT;
}

/* Whose policy decides for this socket: its creator's (the mark), else —
 * a socket these programs never saw created (none of an exec's: links are
 * attached before its first process starts) — the caller's. *marked says
 * which: a marked socket without a policy entry is a stale one. */
static __always_inline __u64 sock_owner(struct bpf_sock_addr *ctx, __u64 cur, int *marked)
{
	struct bk_sk_owner *o = bpf_sk_storage_get(&bk_sk_owner, ctx->sk, 0, 0);
	*marked = o != 0;
	return o ? o->cgroup_id : cur;
}

static __always_inline __u32 no_policy(int marked)
{
	return marked ? BK_R_STALE_SOCKET : BK_R_NO_POLICY;
}

/* Names in policy: DNS (UDP or TCP, port 53, to any address) of an exec
 * whose policy has BK_POL_DNS_PROXY goes to its proxy. Returns the proxy
 * (the original destination noted in the socket's storage for recvmsg),
 * or NULL: no proxy entry or no storage, and the query is denied. */
static __always_inline struct bk_dns_target *dns_redirect(struct bpf_sock_addr *ctx, __u64 cgid,
							  const struct bk_policy *p, __u8 proto, __u16 port,
							  int *is_dns)
{
	*is_dns = p && (p->flags & BK_POL_DNS_PROXY) && port == 53 &&
		  (proto == IPPROTO_UDP || proto == IPPROTO_TCP);
	if (!*is_dns)
		return 0;
	return bpf_map_lookup_elem(&bk_dnsproxy, &cgid);
}

/* Socket hooks: decided with the owner's policy; the event, its rate and
 * count go to the caller's cgroup (the exec that tried, whose receipt
 * reports it). */
static __always_inline int sock_addr4(struct bpf_sock_addr *ctx, __u8 hook)
{
	__u64 cur = bpf_get_current_cgroup_id();
	int marked;
	__u64 cgid = sock_owner(ctx, cur, &marked);
	struct bk_policy *p = bpf_map_lookup_elem(&bk_policy, &cgid);
	__u32 dst = ctx->user_ip4;
	__u16 port = bpf_ntohs(ctx->user_port);
	__u8 proto = ctx->protocol;
	int is_dns;
	struct bk_dns_target *t = dns_redirect(ctx, cgid, p, proto, port, &is_dns);
	if (is_dns) {
		struct bk_sk_owner *o = bpf_sk_storage_get(&bk_sk_owner, ctx->sk, 0, 0);
		if (t && o) {
			__builtin_memset(o->dns_orig, 0, sizeof(o->dns_orig));
			__builtin_memcpy(o->dns_orig, &dst, 4);
			o->dns_family = 4;
			ctx->user_ip4 = t->ip4;
			ctx->user_port = bpf_htons(t->port);
			return BK_VERDICT_PASS;
		}
		emit(cur, BK_R_DNS, hook, AF_INET_, proto, port, (const __u8 *)&dst, 4, 1);
		return BK_VERDICT_REJECT;
	}
	__u32 r = p ? decide4(p, cgid, dst, proto, port) : no_policy(marked);
	if (r == BK_R_NONE)
		return BK_VERDICT_PASS;
	emit(cur, r, hook, AF_INET_, proto, port, (const __u8 *)&dst, 4, 1);
	return BK_VERDICT_REJECT;
}

static __always_inline int sock_addr6(struct bpf_sock_addr *ctx, __u8 hook)
{
	__u64 cur = bpf_get_current_cgroup_id();
	int marked;
	__u64 cgid = sock_owner(ctx, cur, &marked);
	struct bk_policy *p = bpf_map_lookup_elem(&bk_policy, &cgid);
	__u32 dst[4];
	dst[0] = ctx->user_ip6[0];
	dst[1] = ctx->user_ip6[1];
	dst[2] = ctx->user_ip6[2];
	dst[3] = ctx->user_ip6[3];
	__u16 port = bpf_ntohs(ctx->user_port);
	__u8 proto = ctx->protocol;
	int is_dns;
	struct bk_dns_target *t = dns_redirect(ctx, cgid, p, proto, port, &is_dns);
	if (is_dns) {
		struct bk_sk_owner *o = bpf_sk_storage_get(&bk_sk_owner, ctx->sk, 0, 0);
		int mapped = dst[0] == 0 && dst[1] == 0 && dst[2] == bpf_htonl(0xffff);
		if (t && o && (mapped || t->has6)) {
			__builtin_memset(o->dns_orig, 0, sizeof(o->dns_orig));
			if (mapped) {
				/* IPv4 through a dual-stack socket: the proxy's IPv4 address, mapped */
				__builtin_memcpy(o->dns_orig, &dst[3], 4);
				o->dns_family = 4;
				ctx->user_ip6[3] = t->ip4;
			} else {
				__builtin_memcpy(o->dns_orig, dst, 16);
				o->dns_family = 6;
				ctx->user_ip6[0] = 0;
				ctx->user_ip6[1] = 0;
				ctx->user_ip6[2] = 0;
				ctx->user_ip6[3] = bpf_htonl(1);
			}
			ctx->user_port = bpf_htons(t->port);
			return BK_VERDICT_PASS;
		}
		emit(cur, BK_R_DNS, hook, AF_INET6_, proto, port, (const __u8 *)dst, 16, 1);
		return BK_VERDICT_REJECT;
	}
	__u32 r = p ? decide6(p, cgid, dst, proto, port) : no_policy(marked);
	if (r == BK_R_NONE)
		return BK_VERDICT_PASS;
	emit(cur, r, hook, AF_INET6_, proto, port, (const __u8 *)dst, 16, 1);
	return BK_VERDICT_REJECT;
}

SEC("cgroup/connect4")
int bk_connect4(struct bpf_sock_addr *ctx) { return sock_addr4(ctx, BK_H_CONNECT4); }

SEC("cgroup/connect6")
int bk_connect6(struct bpf_sock_addr *ctx) { return sock_addr6(ctx, BK_H_CONNECT6); }

SEC("cgroup/sendmsg4")
int bk_sendmsg4(struct bpf_sock_addr *ctx) { return sock_addr4(ctx, BK_H_SENDMSG4); }

SEC("cgroup/sendmsg6")
int bk_sendmsg6(struct bpf_sock_addr *ctx) { return sock_addr6(ctx, BK_H_SENDMSG6); }

/* recvmsg: an answer from the exec's DNS proxy shows as from the resolver
 * the exec asked (resolvers check the source of an answer). Only for a
 * socket whose query was redirected, only for the proxy's own address and
 * port. These hooks must return 1. */
SEC("cgroup/recvmsg4")
int bk_recvmsg4(struct bpf_sock_addr *ctx)
{
	struct bk_sk_owner *o = bpf_sk_storage_get(&bk_sk_owner, ctx->sk, 0, 0);
	if (!o || o->dns_family != 4)
		return 1;
	__u64 cgid = o->cgroup_id;
	struct bk_dns_target *t = bpf_map_lookup_elem(&bk_dnsproxy, &cgid);
	if (!t || ctx->user_ip4 != t->ip4 || ctx->user_port != bpf_htons(t->port))
		return 1;
	__u32 a;
	__builtin_memcpy(&a, o->dns_orig, 4);
	ctx->user_ip4 = a;
	ctx->user_port = bpf_htons(53);
	return 1;
}

SEC("cgroup/recvmsg6")
int bk_recvmsg6(struct bpf_sock_addr *ctx)
{
	struct bk_sk_owner *o = bpf_sk_storage_get(&bk_sk_owner, ctx->sk, 0, 0);
	if (!o || !o->dns_family)
		return 1;
	__u64 cgid = o->cgroup_id;
	struct bk_dns_target *t = bpf_map_lookup_elem(&bk_dnsproxy, &cgid);
	if (!t || ctx->user_port != bpf_htons(t->port))
		return 1;
	__u32 s0 = ctx->user_ip6[0], s1 = ctx->user_ip6[1], s2 = ctx->user_ip6[2], s3 = ctx->user_ip6[3];
	if (s0 || s1)
		return 1;
	if (o->dns_family == 4 && s2 == bpf_htonl(0xffff) && s3 == t->ip4) {
		__u32 a;
		__builtin_memcpy(&a, o->dns_orig, 4);
		ctx->user_ip6[3] = a;
	} else if (o->dns_family == 6 && s2 == 0 && s3 == bpf_htonl(1)) {
		__u32 a[4];
		__builtin_memcpy(a, o->dns_orig, 16);
		ctx->user_ip6[0] = a[0];
		ctx->user_ip6[1] = a[1];
		ctx->user_ip6[2] = a[2];
		ctx->user_ip6[3] = a[3];
	} else {
		return 1;
	}
	ctx->user_port = bpf_htons(53);
	return 1;
}

static __always_inline __u16 l4_dport(struct __sk_buff *skb, __u32 off, __u8 proto)
{
	__u16 port = 0;
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
		/* the destination port is the second 16-bit word of both headers */
		if (bpf_skb_load_bytes(skb, off + 2, &port, 2) < 0)
			return 0;
		port = bpf_ntohs(port);
	}
	return port;
}

/* A UDP datagram to a resolver on port 53 (off: its UDP header) must be
 * one well-formed DNS query and nothing else: QR=0, opcode QUERY, Z and
 * RCODE zero, QDCOUNT=1, ANCOUNT=NSCOUNT=0, ARCOUNT<=1; a QNAME of labels of
 * at most 63 bytes (no compression pointer), at most 255 bytes on the wire;
 * QTYPE and QCLASS; with ARCOUNT=1 an EDNS0 OPT record (root name, type 41)
 * with at most BK_DNS_OPT_MAX bytes of options; then the datagram ends.
 * The skb is the whole datagram here (before fragmentation and
 * segmentation): a datagram that holds more (UDP GSO, trailing bytes) does
 * not end where the query does. The question's bytes themselves are not
 * judged (a name can still carry data to the resolver: the DNS proxy of
 * the DNS issue closes that). Bounded loop: BK_DNS_MAX_LABELS labels. */
static __always_inline __u32 dns_query_check(struct __sk_buff *skb, __u32 off)
{
	struct udphdr uh;
	__u8 h[12];
	__u32 end = skb->len;
	if (off > 60 + 40 || bpf_skb_load_bytes(skb, off, &uh, sizeof(uh)) < 0 || bpf_ntohs(uh.len) != end - off)
		return BK_R_DNS_MALFORMED;
	__u32 pos = off + sizeof(uh);
	if (bpf_skb_load_bytes(skb, pos, h, sizeof(h)) < 0)
		return BK_R_DNS_MALFORMED;
	if ((h[2] & 0xf8) || (h[3] & 0x4f) || h[4] || h[5] != 1 || h[6] || h[7] || h[8] || h[9] || h[10] || h[11] > 1)
		return BK_R_DNS_MALFORMED;
	__u8 ar = h[11];
	pos += sizeof(h);
	__u32 name = 0;
	int done = 0;
	for (int i = 0; i < BK_DNS_MAX_LABELS; i++) {
		__u8 l;
		if (bpf_skb_load_bytes(skb, pos, &l, 1) < 0)
			return BK_R_DNS_MALFORMED;
		pos += 1;
		if (l == 0) {
			done = 1;
			break;
		}
		if (l > 63)
			return BK_R_DNS_MALFORMED;
		name += l + 1;
		if (name > 254)
			return BK_R_DNS_MALFORMED;
		pos += l;
	}
	if (!done)
		return BK_R_DNS_MALFORMED;
	pos += 4; /* QTYPE, QCLASS */
	if (ar) {
		__u8 o[11]; /* name (root), type, class, ttl, rdlength */
		if (bpf_skb_load_bytes(skb, pos, o, sizeof(o)) < 0)
			return BK_R_DNS_MALFORMED;
		__u32 rdlen = ((__u32)o[9] << 8) | o[10];
		if (o[0] || o[1] || o[2] != 41 || rdlen > BK_DNS_OPT_MAX)
			return BK_R_DNS_MALFORMED;
		pos += sizeof(o) + rdlen;
	}
	return pos == end ? BK_R_NONE : BK_R_DNS_MALFORMED;
}

/* Whether the packet's socket carries an exec's mark (a stale socket when
 * its cgroup's policy entry is gone). */
static __always_inline int skb_marked(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	if (!sk)
		return 0;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return 0;
	return bpf_sk_storage_get(&bk_sk_owner, sk, 0, 0) != 0;
}

/* Helpers here: map lookup/update, ktime, ring buffer, skb_load_bytes,
 * skb_cgroup_id, sk_fullsock, sk_storage_get: what cg_skb_func_proto offers
 * on 5.15 and 6.1. The socket's cgroup (skb_cgroup_id) is its creator's. */
SEC("cgroup_skb/egress")
int bk_egress(struct __sk_buff *skb)
{
	__u64 cgid = bpf_skb_cgroup_id(skb);
	struct bk_policy *p = bpf_map_lookup_elem(&bk_policy, &cgid);
	__u32 r;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;
		if (bpf_skb_load_bytes(skb, 0, &ip, sizeof(ip)) < 0)
			return BK_VERDICT_REJECT;
		__u16 port = l4_dport(skb, ip.ihl * 4, ip.protocol);
		r = decide4(p, cgid, ip.daddr, ip.protocol, port);
		if (r == BK_R_NONE && ip.protocol == IPPROTO_UDP && port == 53)
			r = dns_query_check(skb, ip.ihl * 4);
		if (r == BK_R_NONE)
			return BK_VERDICT_PASS;
		if (r == BK_R_NO_POLICY && skb_marked(skb))
			r = BK_R_STALE_SOCKET;
		__u32 d = ip.daddr;
		emit(cgid, r, BK_H_EGRESS, AF_INET_, ip.protocol, port, (const __u8 *)&d, 4, 0);
		return BK_VERDICT_REJECT;
	}
	if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;
		if (bpf_skb_load_bytes(skb, 0, &ip6, sizeof(ip6)) < 0)
			return BK_VERDICT_REJECT;
		__u32 d[4];
		__builtin_memcpy(d, &ip6.daddr, 16);
		__u16 port = l4_dport(skb, sizeof(ip6), ip6.nexthdr);
		r = decide6(p, cgid, d, ip6.nexthdr, port);
		if (r == BK_R_NONE && ip6.nexthdr == IPPROTO_UDP && port == 53)
			r = dns_query_check(skb, sizeof(ip6));
		if (r == BK_R_NONE)
			return BK_VERDICT_PASS;
		if (r == BK_R_NO_POLICY && skb_marked(skb))
			r = BK_R_STALE_SOCKET;
		emit(cgid, r, BK_H_EGRESS, AF_INET6_, ip6.nexthdr, port, (const __u8 *)d, 16, 0);
		return BK_VERDICT_REJECT;
	}
	/* Neither IPv4 nor IPv6 from an exec cgroup: nothing an exec needs. */
	return p && (p->flags & BK_POL_ALLOW_LOOPBACK) ? BK_VERDICT_PASS : BK_VERDICT_REJECT;
}
