/* SPDX-License-Identifier: Apache-2.0 */
/* The exec child. Born by clone3(CLONE_INTO_CGROUP) in the exec cgroup.
 * Made on request (spawn_direct) it is the command itself: born sharing
 * the agent's memory (CLONE_VM, as posix_spawn: no copy of it is made;
 * beside the agent's thread on a parked thread's thread-local storage,
 * or holding that thread, CLONE_VFORK) as the init of a pid namespace of
 * its own, below the agent's (a pid namespace can be made only below the
 * maker's own), with the agent as its parent, which ends it when the
 * pod's sandbox goes. A
 * warm slot's child parks for seconds and cannot share the agent's memory:
 * it is a copy of the agent, born in the sandbox container's pid
 * namespace, which makes the command's below the container's and stays as
 * its monitor. It takes its own table of steps between clone3 and execve
 * (child.c), in order:
 *
 *   cgroup     join the v1 pids/memory cgroups (hybrid hosts)
 *   netns      enter the fresh namespace (which must hold nothing but lo)
 *              or the pod's
 *   container  enter the sandbox container (mnt, uts, ipc, cgroup), then an
 *              IPC namespace of its own; a pid namespace of its own (born
 *              in it, or a slot's below the container's), with its own /proc carrying the container's OCI masks (read
 *              by the agent from the container's mount table before the
 *              clone); stdio, rlimits
 *   container  the one privilege drop (privs.h)
 *   landlock   the execute allowlist (landlock.h)
 *   container  the working directory, no inherited descriptors
 *   seccomp    the exec filter (seccomp.h), then the mode checked with
 *              PR_GET_SECCOMP (the agent reads the receipt's
 *              Seccomp/Seccomp_filters from /proc/<pid>/status after execve)
 *   exec       execve("/bin/sh", "-c", COMMAND) with the clean environment
 *
 * It reports over a pipe: "ready" just before execve (the pipe then closes,
 * O_CLOEXEC), or the layer and sentence of the step that failed (then it
 * exits and the agent kills its cgroup). Only async-signal-safe work there:
 * it shares the memory of a multi-threaded process, or is a copy of one
 * (no malloc, no stdio, no locks), and it never returns into the agent's
 * code. */
#pragma once
#include <stdbool.h>

/* spawn_direct: the child is born as the command, sharing the agent's
 * memory (x86-64: glibc has no clone3 that runs a function on a new stack,
 * lib/clone3.h has one for x86-64) */
#if defined(__x86_64__)
#define BK_SPAWN_DIRECT true
#else
#define BK_SPAWN_DIRECT false
#endif

struct exec_ctx;
/* Step "container" (the last of the agent's): clone3 the exec child and
 * wait for its report. Leaves x->pidfd, x->out_fd, x->err_fd and the
 * network receipt in x->res. Calls req->spawned as soon as the child
 * exists (or clone3 failed). */
int bk_step_spawn(struct exec_ctx *x);
/* A warm slot's last step ahead of its request (warm.h): the child, made
 * as above, parks before the command (wait_go in child.c); leaves
 * x->go_fd, x->info_fd, x->park_pid. */
int bk_step_park(struct exec_ctx *x);
/* The request's step on a warm slot: the command, working directory,
 * environment and Landlock ruleset to the parked child, then its report as
 * bk_step_spawn waits for it. x->slot_gone: the child was gone before it
 * got the command (nothing ran). */
int bk_step_go(struct exec_ctx *x);
