/* SPDX-License-Identifier: Apache-2.0 */
/* agent/isolate/: the kernel layers of one exec, and nothing else — no
 * JSON, no HTTP, no sessions. bk_exec_run (exec.h) takes an exec through a
 * table of named steps, each a function in the file of its kernel facility,
 * and returns a typed bk_exec_result: the receipt read back from the
 * kernel, or the layer that failed and why (the command then never ran).
 * Only the API edge turns it into a response.
 *
 * Files, one concern each:
 *   features.c  what the kernel offers, probed at start (libbpf probes and
 *               real loads, syscalls on throw-away objects): refuse to
 *               start without a required facility, degrade without an
 *               optional one; the set the reports show
 *   exec.c      the engine: its lifetime, the step table and its one
 *               failure path, the run of the command (output caps, timeout,
 *               requester hang-up), the teardown
 *   step.h      the state one exec's steps share (internal to this folder)
 *   privs.c     the one privilege drop (exec child, its monitor, the file
 *               helper); the "sandbox user is not root" step
 *   cgroup.c    cgroup discovery, per-exec cgroups (v2 + v1 pids/memory),
 *               kill and removal; the cgroup step
 *   cgterm.c    a graceful stop: SIGTERM to an exec cgroup's processes
 *               (a background process's /process/{id}/stop)
 *   records.c   exec records on disk: written by the record step, removed
 *               by the teardown (their text: agent/parse/records.h)
 *   recover.c   restart recovery: kill and clean up what an old agent left
 *               (its records, its programs on exec cgroups)
 *   filter.c    the BPF layer: load, pin, policy maps; the bpf step (the
 *               exec's policy inputs, attach, read-back); denial events
 *   dnsproxy.c  names in policy: the DNS proxy endpoint of each exec whose
 *               profile lists allow_domains (in the pod's namespace), one
 *               thread answering them (agent/parse/dns.c for the messages)
 *   netns.c     network namespaces: the pool of fresh ones (the netns
 *               step), the pod's own addresses
 *   netlink.c   rtnetlink without allocation (lo up, interfaces, addresses)
 *   landlock.c  the execute allowlist: paths and interpreters beneath the
 *               sandbox's root, the ruleset (the landlock step), applying it
 *   seccomp.c   the exec's seccomp filter: built at start (classic BPF),
 *               installed by the exec child just before execve, read back
 *   pty.c       an exec's terminal: a pseudo-terminal of a devpts instance
 *               of the exec's own (in the child), its master to the agent
 *   child.c     the exec child: its spawn (clone3, the spawn step) and its
 *               own steps up to execve (netns, container, privileges,
 *               Landlock, seccomp)
 */
#pragma once
