/* SPDX-License-Identifier: Apache-2.0 */
/* agent/caller/: who is calling, taken from the kernel, and the sandbox
 * container it may act on. Nothing a request carries takes part in this.
 *
 * Files, one concern each:
 *   identity.c  pure, fuzzed parsers of what the kernel and the container
 *               runtime own: /proc/PID/cgroup -> pod UID + container ID,
 *               an OCI runtime's state.json -> container name and pod
 *               metadata (the only JSON read here)
 *   pod.c       peer credentials (SO_PEERPIDFD; without it SO_PEERCRED +
 *               pidfd_open, re-checked by who holds the peer socket, from
 *               sock_diag) -> cgroup -> runtime state
 *               -> the calling pod; its sandbox container (pidfd, cgroup
 *               paths, user), checked against its own /proc entries; the
 *               walk of the runtime roots and its lookup cache
 */
#pragma once
