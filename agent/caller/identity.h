/* SPDX-License-Identifier: Apache-2.0 */
/* Parsers that turn kernel- and runtime-owned data into a caller identity:
 * /proc/PID/cgroup text -> pod UID + container ID, and an OCI runtime's
 * state.json -> container name and pod metadata. Pure functions over bytes,
 * unit-tested and fuzzed; nothing here trusts the shim. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define BK_UID_LEN 36 /* 8-4-4-4-12 */
#define BK_ID_MAX 128

enum bk_cg_layout {
	BK_LAYOUT_NONE = 0,
	BK_LAYOUT_CGROUPFS, /* kubepods/<qos>/pod<uid>/<id> */
	BK_LAYOUT_SYSTEMD,  /* kubepods-<qos>-pod<uid_>.slice/cri-containerd-<id>.scope */
};

struct bk_pod_ref {
	enum bk_cg_layout layout;
	char pod_uid[BK_UID_LEN + 1];   /* canonical, with dashes, lower case */
	char container_id[BK_ID_MAX + 1];
	char qos[16];                   /* "besteffort", "burstable" or "" (guaranteed) */
	char pod_path[4096];            /* cgroup path of the pod level, as in the input */
};

/* Parse one cgroup path (the part after "N:ctrl:"). Not anchored: the agent
 * may live in its own cgroup namespace, so the kubepods component may sit
 * anywhere. Returns 0, -ENOENT (not a pod container path) or -EINVAL
 * (looks like a pod path but is malformed). */
int bk_cgroup_path_parse(const char *path, struct bk_pod_ref *out);

/* Parse the whole text of /proc/PID/cgroup. Uses the v2 "0::" line when it
 * names a pod container, else the v1 lines (hybrid hosts); all lines that
 * name a pod must agree. */
int bk_proc_cgroup_parse(const char *text, struct bk_pod_ref *out);

/* The v2 ("0::") path and the path of a named v1 controller line from
 * /proc/PID/cgroup text. Returns 0 or -ENOENT. */
int bk_proc_cgroup_v2_path(const char *text, char *buf, size_t len);
int bk_proc_cgroup_v1_path(const char *text, const char *ctrl, char *buf, size_t len);
/* Every line of /proc/PID/cgroup text in order: fn(controllers, path, ud)
 * ("" controllers for the v2 line, "cpu,cpuacct" or "name=systemd" for v1
 * ones). A non-zero return of fn stops the walk and is returned; -EINVAL
 * for a malformed line. */
int bk_proc_cgroup_each(const char *text, int (*fn)(const char *ctrls, const char *path, void *ud), void *ud);

/* A container ID as runtimes write it: [A-Za-z0-9_.-]{1,128}, not starting
 * with '.' — safe as one path component. */
bool bk_container_id_valid(const char *id);
/* Canonicalise a pod UID (dashes or underscores) into out. -EINVAL if it is
 * not 32 hex digits in 8-4-4-4-12 groups. */
int bk_pod_uid_canon(const char *in, size_t n, char out[BK_UID_LEN + 1]);

struct bk_container_info {
	char id[BK_ID_MAX + 1];
	pid_t init_pid;
	uint64_t init_start;          /* /proc/PID/stat starttime, clock ticks */
	char name[256];               /* container name in the pod */
	char type[32];                /* "container", "sandbox" (pause) or "" */
	char pod_uid[BK_UID_LEN + 1];
	char pod_name[256];
	char pod_namespace[256];
	char egress_policy[64];       /* boxkite.dev/egress-policy annotation */
	char rootfs[4096];
};

/* Parse a runc state.json (as containerd+runc and CRI-O+runc leave it).
 * Returns 0, -EINVAL (malformed / missing fields) or -ENOENT (not a
 * Kubernetes container: no pod UID or container name). */
int bk_state_parse(const char *json, size_t len, struct bk_container_info *out);
