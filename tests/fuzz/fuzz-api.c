/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the agent's request handling (agent/api.c): JSON parsing, operation
 * dispatch and argument validation of every operation, for shim and admin
 * callers, exactly as a frame's payload reaches it. No runtime root is
 * configured, so no request can resolve a sandbox and nothing ever runs:
 * what is fuzzed is everything before that. */
#include "fuzz.h"
#include "agent/api/api.h"
#include "agent/api/op_process.h"

#include <cJSON.h>
#include <unistd.h>

#include "agent/agent.h"

static struct bk_agent agent;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	bk_config_defaults(&agent.cfg);
	agent.cfg.n_roots = 0;
	agent.node_safe = 1;
	pthread_mutex_init(&agent.stats_lock, NULL);
	pthread_mutex_init(&agent.engine.lock, NULL);
	agent.engine.self_netns = agent.engine.self_pidns = agent.engine.devnull = -1;
	/* a real node key (status and the pod report publish it) */
	char dir[] = "/tmp/bk-fuzz-api-XXXXXX", path[64], err[256];
	bool created;
	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof(path), "%s/node.key", dir);
	if (bk_signer_open(path, &agent.signer, &created, err, sizeof(err)) < 0) {
		fprintf(stderr, "fuzz-api: %s\n", err);
		abort();
	}
	unlink(path);
	rmdir(dir);
	snprintf(agent.node_name, sizeof(agent.node_name), "fuzz");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 256 * 1024)
		return 0;
	enum bk_caller_kind kind = (data[0] & 1) ? BK_CALLER_ADMIN : BK_CALLER_SHIM;
	/* a frame's payload: NUL-terminated, no NUL inside (the reassembler
	 * refuses those before this point) */
	if (memchr(data + 1, '\0', size - 1))
		return 0;
	char *req = malloc(size);
	memcpy(req, data + 1, size - 1);
	req[size - 1] = '\0';
	struct bk_pod pod;
	bk_pod_init(&pod);
	snprintf(pod.pod_name, sizeof(pod.pod_name), "fuzz");
	snprintf(pod.pod_namespace, sizeof(pod.pod_namespace), "fuzz");
	char *out = bk_api_handle(&agent, kind, kind == BK_CALLER_SHIM ? &pod : NULL, req, size - 1);
	CHECK(out, "no response");
	cJSON *o = cJSON_Parse(out);
	CHECK(o && cJSON_IsObject(o), "response is not a JSON object: %.200s", out);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
	CHECK(cJSON_IsNumber(st) && st->valueint >= 200 && st->valueint <= 599, "bad status in %.200s", out);
	CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "body")), "no body object in %.200s", out);
	/* nothing can have run: every exec needs a sandbox, and none resolves */
	CHECK(!cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "body"), "exit_code"),
	      "an exec ran: %.200s", out);
	cJSON_Delete(o);
	free(out);
	/* the exec arguments' validation, which a live request reaches only
	 * after its sandbox resolved */
	cJSON *r = cJSON_Parse(req);
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(r, "args");
	if (cJSON_IsObject(args)) {
		char *e = bk_api_check_exec_args(&agent.cfg, args);
		if (e) {
			cJSON *ej = cJSON_Parse(e);
			/* 422 as the reference's framework answers a bad body */
			const cJSON *st = ej ? cJSON_GetObjectItemCaseSensitive(ej, "status") : NULL;
			CHECK(cJSON_IsNumber(st) && st->valueint == 422, "validation: %.200s", e);
			cJSON_Delete(ej);
			free(e);
		} else {
			const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(args, "command");
			CHECK(cJSON_IsString(cmd) && cmd->valuestring[0], "accepted an exec without a command");
		}
	}
	/* ... and the /process routes' (start, input, output) */
	const cJSON *op = cJSON_GetObjectItemCaseSensitive(r, "op");
	if (cJSON_IsObject(args) && cJSON_IsString(op)) {
		char *e = bk_api_check_process_args(&agent.cfg, op->valuestring, args);
		if (e) {
			cJSON *ej = cJSON_Parse(e);
			const cJSON *st = ej ? cJSON_GetObjectItemCaseSensitive(ej, "status") : NULL;
			CHECK(cJSON_IsNumber(st) && (st->valueint == 422 || st->valueint == 400), "process args: %.200s", e);
			CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(ej, "body")), "process args: no body: %.200s", e);
			cJSON_Delete(ej);
			free(e);
		} else if (strcmp(op->valuestring, "process_start") == 0) {
			const cJSON *mr = cJSON_GetObjectItemCaseSensitive(args, "max_runtime_seconds");
			CHECK(cJSON_IsNumber(mr) && mr->valuedouble >= 1 && mr->valuedouble <= agent.cfg.process_runtime_max,
			      "accepted max_runtime_seconds out of range");
		}
	}
	cJSON_Delete(r);
	free(req);
	return 0;
}
