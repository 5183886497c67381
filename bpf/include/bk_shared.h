/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/* One header shared by the BPF object and the agent: map value layouts,
 * event records, policy flags and the stable denial reason codes. */
#ifndef BK_SHARED_H
#define BK_SHARED_H

#ifdef __BPF__
#include <linux/types.h>
#else
#include <linux/types.h>
#endif

#define BK_MAX_EXECS 16384

/* bk_policy value flags */
#define BK_POL_ALLOW_LOOPBACK (1u << 0) /* only set when the exec has its own netns */
#define BK_POL_ALLOW_ICMP     (1u << 1)
#define BK_POL_AUDIT_ONLY     (1u << 31) /* never set by the agent; reserved */

struct bk_policy {
	__u32 flags;
	__u32 profile; /* index of the egress profile (0 = deny-all) */
};

/* Stable reason codes, shared with user space (JSON "reason"). */
enum bk_reason {
	BK_R_NONE = 0,
	BK_R_NO_POLICY = 1,   /* cgroup has no policy entry: fail closed */
	BK_R_DENY_ALL = 2,    /* profile allows nothing here */
	BK_R_RAW_SOCKET = 3,
	BK_R_ICMP = 4,
	BK_R_LOOPBACK = 5,
	BK_R_EGRESS = 6,      /* backstop: a packet that bypassed the socket hooks */
};

enum bk_hook {
	BK_H_SOCK_CREATE = 1,
	BK_H_CONNECT4 = 2,
	BK_H_CONNECT6 = 3,
	BK_H_SENDMSG4 = 4,
	BK_H_SENDMSG6 = 5,
	BK_H_EGRESS = 6,
};

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
	BK_S_EVENTS_LOST = 1,
	BK_S_MAX = 4,
};

#endif
