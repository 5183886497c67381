/* SPDX-License-Identifier: Apache-2.0 */
/* rtnetlink through libmnl, without heap allocation (stack buffers only),
 * from a thread in the namespace it works on: the namespace pool's, the
 * self-test's, an observed exec's. The exec child, where malloc is off
 * limits, lists its interfaces from /proc instead (agent/parse/netdev.h):
 * a dump waits for the rtnl lock. */
#pragma once
#include <net/if.h>

#define BK_MAX_IFACES 8

/* Bring "lo" up in the calling thread's network namespace. 0 or -errno. */
int bk_netns_lo_up(void);
/* List interface names of the current netns (at most max). Returns the
 * number of interfaces (which may exceed max) or -errno. */
int bk_netns_list(char names[][IFNAMSIZ], int max);

/* Every address configured in the current netns, IPv4 as ::ffff:a.b.c.d.
 * Returns the count (at most max) or -errno. */
int bk_netns_addrs(unsigned char (*addrs)[16], int max);

/* Add a host address (/32 or /128) to lo of the current netns. */
int bk_netns_lo_addr_add(int family, const unsigned char *addr);
