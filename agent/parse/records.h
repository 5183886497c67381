/* SPDX-License-Identifier: Apache-2.0 */
/* Exec records: the text of <state>/execs/<exec id>.json, which the agent
 * writes for each exec from the moment its cgroup exists until it is gone
 * (agent/isolate/records.c), and which a new agent reads back to kill and
 * clean up what an old one left (agent/isolate/recover.c). One JSON object
 * of strings, unchanged across versions so that a new agent recovers the
 * execs of an old one:
 *
 *   {"exec_id":…,"cgroup":…,"cgroup_pids_v1":…,"cgroup_memory_v1":…,
 *    "pod":…,"namespace":…,"pod_uid":…,"cgroups_v1":[…]}
 *
 * "cgroup" is the v2 path, the v1 paths are "" where the node has no such
 * hierarchy; "cgroups_v1" (optional: older records lack it) lists the
 * exec's cgroup in every v1 hierarchy (pids and memory among them). A record is untrusted input to the parser (the state directory
 * survives agent versions): every field is checked for type and size here;
 * the paths are checked against the node's hierarchies by the caller. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define BK_RECORD_PATH_MAX 4096
#define BK_RECORD_V1_MAX 16

struct bk_exec_record {
	char exec_id[64];
	char cgroup[BK_RECORD_PATH_MAX];           /* v2 */
	char cgroup_pids_v1[BK_RECORD_PATH_MAX];   /* "" if none */
	char cgroup_memory_v1[BK_RECORD_PATH_MAX]; /* "" if none */
	char pod[256];
	bool has_pod;                              /* "pod" was there (parse) */
	char namespace[256];
	char pod_uid[128];
	int n_v1;
	char v1[BK_RECORD_V1_MAX][BK_RECORD_PATH_MAX];
};

/* The record's text (malloc'd, NUL-terminated), or NULL when out of memory. */
char *bk_exec_record_format(const struct bk_exec_record *r);

/* Parse text[0..len): 0, or -EINVAL when it is no record (not one JSON
 * object; "cgroup", "cgroup_pids_v1" or "cgroup_memory_v1" missing, not a
 * string or too long; "cgroups_v1" present but not an array of at most
 * BK_RECORD_V1_MAX such strings). The other fields are optional ("" when absent, not
 * strings or too long). */
int bk_exec_record_parse(const char *text, size_t len, struct bk_exec_record *r);
