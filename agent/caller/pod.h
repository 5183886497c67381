/* SPDX-License-Identifier: Apache-2.0 */
/* Caller identity from the kernel, and the sandbox container it may act on.
 *
 *   peer pidfd (SO_PEERPIDFD; fallback SO_PEERCRED + pidfd_open + re-check)
 *   -> /proc/PID/cgroup -> pod UID + container ID
 *   -> <runtime-root>/<id>/state.json -> container name, pod name/namespace
 *   -> the pod's sandbox container: its init pid (pidfd), verified against
 *      its own /proc entries while the pidfd proves the pid was not reused.
 *
 * Nothing a request carries takes part in this. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/parse/config.h"
#include "agent/caller/identity.h"

/* The pod in one v1 hierarchy (hybrid hosts): the hierarchy as
 * /proc/PID/cgroup names it ("cpu,cpuacct", "cpuset", "name=systemd"), the
 * pod-level path and the sandbox container's path in it. */
#define BK_POD_V1_MAX 16
struct bk_pod_v1 {
	char ctrls[128];
	char pod[1024];
	char container[1024];
};

struct bk_pod {
	char pod_uid[BK_UID_LEN + 1];
	char pod_name[256];
	char pod_namespace[256];
	char policy_annotation[64];
	char caller_container[BK_ID_MAX + 1]; /* "" for admin callers */
	pid_t caller_pid;
	const char *identified_via;   /* bk_peer_via_names[]: how the kernel named the caller */
	struct bk_container_info sandbox;
	int sandbox_pidfd;
	char pod_v2[4096];   /* pod-level cgroup path (v2 hierarchy) */
	int n_v1;            /* every v1 hierarchy the sandbox container is in under its pod */
	struct bk_pod_v1 v1[BK_POD_V1_MAX];
	uid_t uid;           /* the sandbox user */
	gid_t gid;
};

void bk_pod_init(struct bk_pod *p);
void bk_pod_release(struct bk_pod *p);

/* How the peer was identified: by the kernel's pidfd of it (SO_PEERPIDFD,
 * 6.5), or by SO_PEERCRED + pidfd_open, re-checked by who holds the peer
 * socket (sock_diag). */
enum bk_peer_via { BK_PEER_VIA_PIDFD, BK_PEER_VIA_PEERCRED };
extern const char *const bk_peer_via_names[]; /* "so_peerpidfd", "so_peercred" */

/* Peer of a unix socket connection: pid and a pidfd that pins it.
 * use_peerpidfd false: the fallback even where the kernel has SO_PEERPIDFD
 * (testing.mask_features "so_peerpidfd"). */
int bk_peer_pidfd(int connfd, bool use_peerpidfd, pid_t *pid, int *pidfd, enum bk_peer_via *via);

/* The inode of the peer end of a connected unix socket, from the kernel's
 * sock_diag (UNIX_DIAG_PEER; CONFIG_UNIX_DIAG), asked in the network
 * namespace of the process of netns_pidfd (-1: our own) — sock_diag sees
 * the sockets of its own namespace only. */
int bk_unix_peer_ino(int fd, int netns_pidfd, uint64_t *peer);

/* The key a connection counts under in the agent's connection budget
 * (main.c), from the kernel at accept: "pod:<uid>" for a process of a
 * Kubernetes pod (whichever of its containers), "uid:<n>" for anything
 * else. Cheap (the peer's pidfd and /proc/PID/cgroup); the full
 * identification comes with the first frame. */
int bk_peer_key(const struct bk_config *c, int connfd, char *key, size_t keylen);

/* Identify the peer of connfd: it must be the shim container of a sandbox
 * pod. On refusal returns -EPERM (or another -errno) with a sentence in err. */
int bk_pod_from_peer(const struct bk_config *c, int connfd, struct bk_pod *out, char *err, size_t errlen);
/* Admin path: the sandbox pod named `name` (pod name; "ns/name" also). */
int bk_pod_by_name(const struct bk_config *c, const char *name, struct bk_pod *out, char *err, size_t errlen);

/* Visit every Kubernetes container found under the runtime roots. */
typedef int (*bk_container_fn)(const struct bk_container_info *ci, void *ud);
int bk_runtime_each(const struct bk_config *c, bk_container_fn fn, void *ud);

/* Read /proc/PID/stat starttime. */
int bk_proc_starttime(pid_t pid, unsigned long long *st);
int bk_pod_open_sandbox(const struct bk_config *c, struct bk_pod *p, char *err, size_t errlen);
