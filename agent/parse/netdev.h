/* SPDX-License-Identifier: Apache-2.0 */
/* /proc/PID/net/dev: the interfaces of a network namespace, as the kernel
 * lists them. The exec child reads its namespace's interfaces there for the
 * receipt: the kernel prints that file under RCU, where an RTM_GETLINK dump
 * waits for the rtnl lock, which every namespace's creation and cleanup on
 * the node holds (the agent's own pool and teardown included). */
#pragma once
#include <net/if.h>
#include <stddef.h>

/* The interface names of the text of a net/dev file (len bytes, need not
 * end in NUL): its two header lines, then one line per interface, the name
 * right-aligned before a ':'. At most max names are kept in names; returns
 * how many interfaces the text lists (which may exceed max), or -EINVAL
 * when the text is not such a file (a header missing, a name empty, too
 * long or holding a blank, a line not ended). Async-signal-safe (no
 * allocation, no locale). */
int bk_netdev_parse(const char *text, size_t len, char names[][IFNAMSIZ], int max);
