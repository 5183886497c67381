/* SPDX-License-Identifier: Apache-2.0 */
/* The /process routes of the reference sidecar (procroute.h). */
#include "procroute.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum shim_proc_route shim_process_route(const char *path, char *id, size_t idlen)
{
	id[0] = '\0';
	if (strcmp(path, "/process") == 0)
		return PROC_LIST;
	if (strncmp(path, "/process/", 9) != 0)
		return PROC_NONE;
	const char *p = path + 9;
	if (strcmp(p, "start") == 0)
		return PROC_START;
	if (strcmp(p, "kill-all") == 0)
		return PROC_KILL_ALL;
	const char *slash = strchr(p, '/');
	if (!slash || slash == p)
		return PROC_NONE;
	size_t l = (size_t)(slash - p);
	if (l > SHIM_PROC_ID_MAX || l >= idlen)
		return PROC_NONE;
	static const struct {
		const char *tail;
		enum shim_proc_route r;
	} tails[] = { { "output", PROC_OUTPUT }, { "input", PROC_INPUT }, { "stop", PROC_STOP } };
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++)
		if (strcmp(slash + 1, tails[i].tail) == 0) {
			memcpy(id, p, l);
			id[l] = '\0';
			return tails[i].r;
		}
	return PROC_NONE;
}

/* A JSON string literal of s (malloc'd). */
static char *json_str(const char *s)
{
	cJSON *j = cJSON_CreateString(s);
	char *t = j ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	return t;
}

/* Ours first, then the client's members verbatim: cJSON (the agent) takes
 * the first of duplicate names, so the path's id always wins, and the
 * body's bytes reach the agent unchanged (its own checks see them). */
int shim_process_args(const char *body, size_t len, const char *id, const char *since, char **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	const char *rest = "}";
	size_t rl = 1;
	if (body) {
		size_t i = 0;
		while (i < len && (unsigned char)body[i] <= 32) /* what cJSON skips (body_is_json_object) */
			i++;
		if (i == len || body[i] != '{' || memchr(body, '\0', len))
			return -EINVAL;
		rest = body + i + 1;
		rl = len - i - 1;
	}
	size_t j = 0;
	while (j < rl && (unsigned char)rest[j] <= 32)
		j++;
	bool empty = j < rl && rest[j] == '}';
	char *ij = id[0] ? json_str(id) : NULL, *sj = since ? json_str(since) : NULL;
	if ((id[0] && !ij) || (since && !sj)) {
		free(ij);
		free(sj);
		return -ENOMEM;
	}
	size_t cap = rl + (ij ? strlen(ij) : 0) + (sj ? strlen(sj) : 0) + 64;
	char *t = malloc(cap);
	if (!t) {
		free(ij);
		free(sj);
		return -ENOMEM;
	}
	size_t o = 0;
	t[o++] = '{';
	bool first = true;
	if (ij) {
		o += (size_t)snprintf(t + o, cap - o, "\"process_id\":%s", ij);
		first = false;
	}
	if (sj) {
		o += (size_t)snprintf(t + o, cap - o, "%s\"since_offset\":%s", first ? "" : ",", sj);
		first = false;
	}
	if (!first && !empty)
		t[o++] = ',';
	memcpy(t + o, rest, rl);
	o += rl;
	t[o] = '\0';
	free(ij);
	free(sj);
	*out = t;
	*n = o;
	return 0;
}
