/* SPDX-License-Identifier: Apache-2.0 */
/* An exec's terminal (issue 18): a pseudo-terminal allocated inside the
 * exec's OWN devpts — a new devpts instance mounted on /dev/pts of the
 * exec's private mount namespace (child.c's own_proc made it), never the
 * host's or the container's /dev/pts. The exec child makes it its
 * controlling terminal and its stdio, and hands the master to the agent
 * over a socket (SCM_RIGHTS); the agent relays it (exec.h: req->pty and
 * the sink's pty_io). */
#pragma once
#include <stdint.h>
#include <sys/types.h>

/* In the exec child, as root in its own mount namespace, before the
 * privilege drop: mount the devpts instance, open its ptmx, unlock, open
 * the peer, own it to uid/gid, set the window size, setsid + TIOCSCTTY,
 * dup the peer to 0/1/2, send the master on sock and close it. Only
 * async-signal-safe calls. 0, or -errno and *what says which. */
int bk_pty_child(int sock, uint16_t rows, uint16_t cols, uid_t uid, gid_t gid, const char **what);

/* In the agent: the master the child sent on sock (O_CLOEXEC), or -errno. */
int bk_pty_recv_master(int sock);
