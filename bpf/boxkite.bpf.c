// SPDX-License-Identifier: GPL-2.0-only
/* boxkite egress filters: attached to every exec cgroup as links.
 * Policy is looked up by the cgroup id; a cgroup without an entry is denied
 * (fail closed). Socket hooks return 0, which the caller sees at once as
 * EPERM; cgroup_skb/egress is the backstop for anything that bypassed them
 * (a silent drop there would look like a hang, so it is the last resort). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/socket.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "bk_shared.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif
#define SOCK_RAW_ 3

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BK_MAX_EXECS);
	__type(key, __u64);
	__type(value, struct bk_policy);
} bk_policy SEC(".maps");

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

static __always_inline void emit(__u64 cgid, __u32 reason, __u8 hook, __u16 family, __u8 proto, __u16 port,
				 const __u32 *addr, int addr_words)
{
	stat_inc(BK_S_DENIED);
	struct bk_event *e = bpf_ringbuf_reserve(&bk_events, sizeof(*e), 0);
	if (!e) {
		stat_inc(BK_S_EVENTS_LOST);
		return;
	}
	e->cgroup_id = cgid;
	e->ts_ns = bpf_ktime_get_ns();
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->reason = reason;
	e->family = family;
	e->port = port;
	e->proto = proto;
	e->hook = hook;
	e->pad[0] = e->pad[1] = 0;
	__builtin_memset(e->addr, 0, sizeof(e->addr));
	if (addr_words >= 1)
		__builtin_memcpy(e->addr, &addr[0], 4);
	if (addr_words == 4)
		__builtin_memcpy(e->addr + 4, &addr[1], 12);
	__builtin_memset(e->comm, 0, sizeof(e->comm));
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int is_loopback4(__u32 addr_be)
{
	return (bpf_ntohl(addr_be) >> 24) == 127;
}

static __always_inline int is_loopback6(const __u32 *a)
{
	return a[0] == 0 && a[1] == 0 && a[2] == 0 && a[3] == bpf_htonl(1);
}

/* Returns 0 to allow, else a reason. */
static __always_inline __u32 decide4(const struct bk_policy *p, __u32 dst_be)
{
	if (!p)
		return BK_R_NO_POLICY;
	if (is_loopback4(dst_be))
		return (p->flags & BK_POL_ALLOW_LOOPBACK) ? BK_R_NONE : BK_R_LOOPBACK;
	return BK_R_DENY_ALL;
}

static __always_inline __u32 decide6(const struct bk_policy *p, const __u32 *dst)
{
	if (!p)
		return BK_R_NO_POLICY;
	if (is_loopback6(dst))
		return (p->flags & BK_POL_ALLOW_LOOPBACK) ? BK_R_NONE : BK_R_LOOPBACK;
	/* ::ffff:a.b.c.d is IPv4 in disguise: same decision as the v4 address */
	if (dst[0] == 0 && dst[1] == 0 && dst[2] == bpf_htonl(0xffff))
		return decide4(p, dst[3]);
	return BK_R_DENY_ALL;
}

SEC("cgroup/sock_create")
int bk_sock_create(struct bpf_sock *sk)
{
	__u64 cgid = bpf_get_current_cgroup_id();
	struct bk_policy *p = bpf_map_lookup_elem(&bk_policy, &cgid);
	__u32 none[4] = {};
	if (!p) {
		emit(cgid, BK_R_NO_POLICY, BK_H_SOCK_CREATE, sk->family, sk->protocol, 0, none, 0);
		return 0;
	}
	if (sk->type == SOCK_RAW_) {
		emit(cgid, BK_R_RAW_SOCKET, BK_H_SOCK_CREATE, sk->family, sk->protocol, 0, none, 0);
		return 0;
	}
	if ((sk->protocol == IPPROTO_ICMP || sk->protocol == IPPROTO_ICMPV6) && !(p->flags & BK_POL_ALLOW_ICMP)) {
		emit(cgid, BK_R_ICMP, BK_H_SOCK_CREATE, sk->family, sk->protocol, 0, none, 0);
		return 0;
	}
	return 1;
}

static __always_inline int sock_addr4(struct bpf_sock_addr *ctx, __u8 hook)
{
	__u64 cgid = bpf_get_current_cgroup_id();
	struct bk_policy *p = bpf_map_lookup_elem(&bk_policy, &cgid);
	__u32 dst = ctx->user_ip4;
	__u32 r = decide4(p, dst);
	if (r == BK_R_NONE)
		return 1;
	emit(cgid, r, hook, AF_INET, ctx->protocol, bpf_ntohs(ctx->user_port), &dst, 1);
	return 0;
}

static __always_inline int sock_addr6(struct bpf_sock_addr *ctx, __u8 hook)
{
	__u64 cgid = bpf_get_current_cgroup_id();
	struct bk_policy *p = bpf_map_lookup_elem(&bk_policy, &cgid);
	__u32 dst[4];
	dst[0] = ctx->user_ip6[0];
	dst[1] = ctx->user_ip6[1];
	dst[2] = ctx->user_ip6[2];
	dst[3] = ctx->user_ip6[3];
	__u32 r = decide6(p, dst);
	if (r == BK_R_NONE)
		return 1;
	emit(cgid, r, hook, AF_INET6, ctx->protocol, bpf_ntohs(ctx->user_port), dst, 4);
	return 0;
}

SEC("cgroup/connect4")
int bk_connect4(struct bpf_sock_addr *ctx) { return sock_addr4(ctx, BK_H_CONNECT4); }

SEC("cgroup/connect6")
int bk_connect6(struct bpf_sock_addr *ctx) { return sock_addr6(ctx, BK_H_CONNECT6); }

SEC("cgroup/sendmsg4")
int bk_sendmsg4(struct bpf_sock_addr *ctx) { return sock_addr4(ctx, BK_H_SENDMSG4); }

SEC("cgroup/sendmsg6")
int bk_sendmsg6(struct bpf_sock_addr *ctx) { return sock_addr6(ctx, BK_H_SENDMSG6); }

SEC("cgroup_skb/egress")
int bk_egress(struct __sk_buff *skb)
{
	__u64 cgid = bpf_skb_cgroup_id(skb);
	struct bk_policy *p = bpf_map_lookup_elem(&bk_policy, &cgid);
	__u32 r;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;
		if (bpf_skb_load_bytes(skb, 0, &ip, sizeof(ip)) < 0)
			return 0;
		r = decide4(p, ip.daddr);
		if (r == BK_R_NONE)
			return 1;
		__u32 d = ip.daddr;
		emit(cgid, BK_R_EGRESS, BK_H_EGRESS, AF_INET, ip.protocol, 0, &d, 1);
		return 0;
	}
	if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;
		if (bpf_skb_load_bytes(skb, 0, &ip6, sizeof(ip6)) < 0)
			return 0;
		__u32 d[4];
		__builtin_memcpy(d, &ip6.daddr, 16);
		r = decide6(p, d);
		if (r == BK_R_NONE)
			return 1;
		emit(cgid, BK_R_EGRESS, BK_H_EGRESS, AF_INET6, ip6.nexthdr, 0, d, 4);
		return 0;
	}
	/* Neither IPv4 nor IPv6 from an exec cgroup: nothing an exec needs. */
	return p && (p->flags & BK_POL_ALLOW_LOOPBACK) ? 1 : 0;
}
