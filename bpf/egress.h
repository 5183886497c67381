/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/* bpf/ — the egress filter, one object:
 *   egress.bpf.c  the programs (sock_create, connect4/6, sendmsg4/6,
 *                 cgroup_skb/egress) and their maps
 *   egress.h      this header, shared by the BPF object and the agent: map
 *                 key/value layouts, event records, policy flags, the named
 *                 verdicts and the stable denial reason codes
 * The agent embeds the object as a skeleton (build/boxkite.skel.h). */
#ifndef BK_SHARED_H
#define BK_SHARED_H

#include <linux/types.h>

#define BK_MAX_EXECS 16384
#define BK_MAX_RULES 4096
#define BK_PORT_RANGES 16
#define BK_EVENTS_PER_SEC 64 /* per exec cgroup; the rest are counted, not sent */

/* Verdicts of the cgroup hooks (Cilium's SYS_PROCEED / SYS_REJECT): the
 * socket hooks' REJECT is EPERM at once for the caller; the egress hook's
 * drops the packet (the backstop for what bypassed the socket hooks). */
#define BK_VERDICT_PASS 1
#define BK_VERDICT_REJECT 0

/* bk_policy value flags */
#define BK_POL_ALLOW_LOOPBACK (1u << 0) /* only set when the exec has its own netns */
#define BK_POL_ALLOW_ICMP     (1u << 1)
#define BK_POL_ALLOW_DNS      (1u << 2) /* UDP 53 to the pod's resolvers (bk_local): well-formed queries only */
#define BK_POL_ALLOW_DNS_TCP  (1u << 3) /* TCP 53 to them too (unchecked: a stream; the profile's "dns_tcp") */
#define BK_POL_DNS_PROXY      (1u << 4) /* names in policy: every port-53 destination becomes the exec's
					 * DNS proxy (bk_dnsproxy), over UDP and TCP */

struct bk_policy {
	__u32 flags;
	__u32 profile; /* profile id: selects rules in the LPM maps (0 = none) */
};

/* LPM keys: the profile id is always matched whole (prefixlen counts its
 * 32 bits plus the CIDR's bits). */
struct bk_lpm4 {
	__u32 prefixlen;
	__u32 profile;
	__u8 addr[4];
};
struct bk_lpm6 {
	__u32 prefixlen;
	__u32 profile;
	__u8 addr[16];
};

#define BK_PROTO_TCP  1
#define BK_PROTO_UDP  2
#define BK_PROTO_ICMP 4

struct bk_port_range {
	__u16 lo, hi;
	__u8 protos; /* BK_PROTO_* mask */
	__u8 pad[3];
};

/* allow map value: the ports open on this prefix (a more specific prefix
 * carries the ranges of every allow rule that contains it) */
struct bk_ports {
	__u32 n;
	struct bk_port_range r[BK_PORT_RANGES];
};

/* deny map value */
struct bk_deny {
	__u32 reason;
};

/* per-exec addresses: the pod's own (denied) and its resolvers (DNS) */
struct bk_local_key {
	__u64 cgroup_id;
	__u8 addr[16]; /* IPv4 as ::ffff:a.b.c.d */
};
#define BK_LOCAL_SELF     1
#define BK_LOCAL_RESOLVER 2

/* bk_dnsproxy value (key: the exec's cgroup id): where the agent's DNS
 * proxy for this exec listens in the pod's network namespace. connect and
 * sendmsg to port 53 of any address are rewritten to it; recvmsg gives the
 * exec the address it asked back as the source of the answers. */
struct bk_dns_target {
	__u32 ip4;  /* network order (127.0.0.1) */
	__u16 port; /* host order; the same port on ::1 when has6 */
	__u8 has6;
	__u8 pad;
};

/* bk_resolved (key: struct bk_local_key, the exec's cgroup id and an
 * address, IPv4 as ::ffff:a.b.c.d): an address an allowed name resolved to
 * for this exec, through its DNS proxy — open on the name's ports until
 * expires_ns (bpf_ktime_get_ns, CLOCK_MONOTONIC: the answer's TTL,
 * bounded). The deny set still wins. */
struct bk_resolved {
	__u64 expires_ns;
	struct bk_ports ports;
};
#define BK_MAX_RESOLVED 65536

struct bk_rate {
	__u64 window_ns;
	__u32 in_window;
	__u32 pad;
	__u64 total; /* every denial of this cgroup, sent or not */
};

/* Stable reason codes, shared with user space (JSON "reason"). */
enum bk_reason {
	BK_R_NONE = 0,
	BK_R_NO_POLICY = 1,   /* cgroup has no policy entry: fail closed */
	BK_R_DENY_ALL = 2,    /* the profile allows nothing */
	BK_R_RAW_SOCKET = 3,
	BK_R_ICMP = 4,
	BK_R_LOOPBACK = 5,
	BK_R_EGRESS = 6,      /* backstop: a packet that bypassed the socket hooks */
	BK_R_METADATA = 7,
	BK_R_LINK_LOCAL = 8,
	BK_R_PRIVATE = 9,
	BK_R_CLUSTER = 10,    /* operator-configured node/cluster/service CIDRs */
	BK_R_POD_SELF = 11,
	BK_R_DNS = 12,        /* port 53 anywhere but the pod's resolvers */
	BK_R_NOT_ALLOWED = 13,
	BK_R_SPECIAL = 14,    /* multicast, broadcast, reserved */
	BK_R_STALE_SOCKET = 15, /* a socket of an exec that has ended (its policy entry is gone) */
	BK_R_UNMARKED = 16,   /* a new socket could not be marked with its exec: refused */
	BK_R_TUNNEL = 17,     /* 6to4 (2002::/16) or Teredo (2001::/32): denied unless a profile overrides it */
	BK_R_DNS_MALFORMED = 18, /* UDP 53 to a resolver that is not one well-formed DNS query */
	BK_R_DNS_TCP = 19,    /* TCP 53 to a resolver, the profile has no "dns_tcp" */
	/* from the agent's DNS proxy (user space, names in policy) */
	BK_R_DNS_NAME = 20,   /* a query for a name (or type) the profile does not allow */
	BK_R_NOT_RESOLVED = 21, /* an address no allowed name resolved to (for this exec) */
	BK_R_DNS_RATE = 22,   /* over the exec's query rate */
};

/* The limits of the DNS query check (cgroup_skb/egress, UDP 53): a QNAME
 * of at most 255 bytes on the wire (so at most 127 labels), an EDNS0 OPT
 * record with at most BK_DNS_OPT_MAX bytes of options. */
#define BK_DNS_MAX_LABELS 128
#define BK_DNS_OPT_MAX 64

/* bk_sk_owner (socket local storage): the exec cgroup that created the
 * socket, written by bk_sock_create. A socket's decisions are its creator's,
 * whoever holds it later (SCM_RIGHTS, pidfd_getfd, inheritance); once that
 * exec's policy entry is gone every use is refused as stale_socket. */
struct bk_sk_owner {
	__u64 cgroup_id;
	/* the resolver a DNS query was sent to before the proxy redirect
	 * (dns_family 0: none): what recvmsg names as the answer's source */
	__u8 dns_orig[16]; /* IPv4 in the first 4 bytes */
	__u8 dns_family;   /* 4 or 6 */
	__u8 pad[7];
};

enum bk_hook {
	BK_H_SOCK_CREATE = 1,
	BK_H_CONNECT4 = 2,
	BK_H_CONNECT6 = 3,
	BK_H_SENDMSG4 = 4,
	BK_H_SENDMSG6 = 5,
	BK_H_EGRESS = 6,
	BK_H_DNS_PROXY = 7, /* a denial by the agent's DNS proxy */
};

/* pid and comm name the process only where the hook runs in its context
 * (the socket hooks, on a kernel that gives them the helpers: see
 * bk_task_info in egress.bpf.c); an event of cgroup_skb/egress carries pid
 * 0 and an empty comm, and the agent names the exec by cgroup_id. */
struct bk_event {
	__u64 cgroup_id;
	__u64 ts_ns;
	__u32 pid;
	__u32 reason;
	__u16 family; /* AF_INET / AF_INET6 */
	__u16 port;   /* host byte order */
	__u8 proto;   /* IPPROTO_* */
	__u8 hook;
	__u8 pad[2];
	__u8 addr[16]; /* v4 in the first 4 bytes, network order */
	char comm[16];
};

/* bk_stats indices (per-CPU array) */
enum bk_stat {
	BK_S_DENIED = 0,
	BK_S_EVENTS_LOST = 1,      /* ring buffer full */
	BK_S_EVENTS_SUPPRESSED = 2, /* over the per-cgroup rate */
	BK_S_MAX = 4,
};

#endif
