/* SPDX-License-Identifier: Apache-2.0 */
/* boxkitectl top: per sandbox, live execs, execs/s, denials/s, and the
 * pod cgroup's memory and pids used against its caps — each figure from
 * the agent's status, whose usage the agent reads from the pod's cgroup
 * files when asked; rates are differences between two status reads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "agent/ctl/ctl.h"
#include "lib/proto.h"
#include "lib/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: boxkitectl top [--interval S] [-n N] [--json]\n");
}

/* The agent's status (the body), or NULL after saying why. */
static cJSON *status(const char *sock)
{
	int fd = bk_connect(sock);
	if (fd < 0) {
		fprintf(stderr, "boxkitectl: cannot reach the agent at %s: %s (is boxkite-agent running? as root?)\n", sock,
			strerror(-fd));
		return NULL;
	}
	static const char req[] = "{\"op\":\"status\",\"args\":{}}";
	char *resp = NULL;
	size_t rl = 0;
	int r = bk_call(fd, req, strlen(req), &resp, &rl);
	close(fd);
	if (r < 0) {
		fprintf(stderr, "boxkitectl: top: agent request failed: %s\n", strerror(-r));
		return NULL;
	}
	cJSON *o = cJSON_ParseWithLength(resp, rl);
	free(resp);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
	cJSON *b = cJSON_DetachItemFromObjectCaseSensitive(o, "body");
	cJSON_Delete(o);
	if (!cJSON_IsNumber(st) || !b) {
		fprintf(stderr, "boxkitectl: top: malformed answer from the agent\n");
		cJSON_Delete(b);
		return NULL;
	}
	return b;
}

static const cJSON *sandbox_of(const cJSON *st, const char *ns, const char *pod)
{
	const cJSON *s;
	cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(st, "sandboxes"))
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "namespace");
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(s, "pod");
		if (cJSON_IsString(n) && cJSON_IsString(p) && streq(n->valuestring, ns) && streq(p->valuestring, pod))
			return s;
	}
	return NULL;
}

/* usage.KEY as a number; -1 when absent; -2 when "max" (no cap). */
static double use(const cJSON *s, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "usage"), k);
	if (cJSON_IsNumber(v))
		return v->valuedouble >= 4e18 ? -2 : v->valuedouble; /* v1's "unlimited" is near 2^63 */
	if (cJSON_IsString(v) && streq(v->valuestring, "max"))
		return -2;
	return -1;
}

static void human_bytes(char *b, size_t n, double v)
{
	if (v == -2)
		snprintf(b, n, "max");
	else if (v < 0)
		snprintf(b, n, "-");
	else if (v >= 1 << 30)
		snprintf(b, n, "%.1fG", v / (1 << 30));
	else if (v >= 1 << 20)
		snprintf(b, n, "%.1fM", v / (1 << 20));
	else
		snprintf(b, n, "%.0fK", v / 1024);
}

static void human_count(char *b, size_t n, double v)
{
	if (v == -2)
		snprintf(b, n, "max");
	else if (v < 0)
		snprintf(b, n, "-");
	else
		snprintf(b, n, "%.0f", v);
}

static double rate(const cJSON *now, const cJSON *before, const char *k, double dt)
{
	double a = use(now, k), b = before ? use(before, k) : -1;
	if (a < 0 || b < 0 || dt <= 0)
		return 0;
	return a >= b ? (a - b) / dt : 0;
}

static void show(const cJSON *now, const cJSON *before, double dt, bool json)
{
	cJSON *out = json ? cJSON_CreateObject() : NULL;
	cJSON *rows = out ? cJSON_AddArrayToObject(out, "sandboxes") : NULL;
	time_t t = time(NULL);
	struct tm tm;
	char ts[32];
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	if (out) {
		cJSON_AddStringToObject(out, "ts", ts);
		cJSON_AddNumberToObject(out, "interval_s", dt);
		cJSON_AddBoolToObject(out, "node_safe", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(now, "node_safe")));
	} else {
		printf("boxkite top  %s  node %s  every %.1fs\n", ts,
		       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(now, "node_safe")) ? "safe" : "UNSAFE", dt);
		printf("%-40s %5s %8s %9s %17s %13s\n", "NAMESPACE/POD", "LIVE", "EXECS/S", "DENIALS/S", "MEMORY", "PIDS");
	}
	const cJSON *s;
	cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(now, "sandboxes"))
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "namespace");
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(s, "pod");
		if (!cJSON_IsString(n) || !cJSON_IsString(p))
			continue;
		const cJSON *b = before ? sandbox_of(before, n->valuestring, p->valuestring) : NULL;
		double live = use(s, "execs_live"), ex = rate(s, b, "execs_total", dt), dn = rate(s, b, "denied_total", dt);
		double mc = use(s, "memory_current"), mm = use(s, "memory_max"), pc = use(s, "pids_current"),
		       pm = use(s, "pids_max");
		if (rows) {
			cJSON *r = cJSON_CreateObject();
			cJSON_AddStringToObject(r, "namespace", n->valuestring);
			cJSON_AddStringToObject(r, "pod", p->valuestring);
			cJSON_AddNumberToObject(r, "live_execs", live < 0 ? 0 : live);
			cJSON_AddNumberToObject(r, "execs_per_s", (double)(long long)(ex * 100 + 0.5) / 100);
			cJSON_AddNumberToObject(r, "denials_per_s", (double)(long long)(dn * 100 + 0.5) / 100);
			const struct {
				const char *k;
				double v;
			} f[] = { { "memory_current", mc }, { "memory_max", mm }, { "pids_current", pc }, { "pids_max", pm } };
			for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
				if (f[i].v == -2)
					cJSON_AddStringToObject(r, f[i].k, "max");
				else if (f[i].v < 0)
					cJSON_AddNullToObject(r, f[i].k);
				else
					cJSON_AddNumberToObject(r, f[i].k, f[i].v);
			}
			cJSON_AddItemToArray(rows, r);
		} else {
			char who[520], m1[16], m2[16], p1[16], p2[16], mem[40], pids[40];
			snprintf(who, sizeof(who), "%s/%s", n->valuestring, p->valuestring);
			human_bytes(m1, sizeof(m1), mc);
			human_bytes(m2, sizeof(m2), mm);
			human_count(p1, sizeof(p1), pc);
			human_count(p2, sizeof(p2), pm);
			snprintf(mem, sizeof(mem), "%s / %s", m1, m2);
			snprintf(pids, sizeof(pids), "%s / %s", p1, p2);
			printf("%-40s %5.0f %8.1f %9.1f %17s %13s\n", who, live < 0 ? 0 : live, ex, dn, mem, pids);
		}
	}
	if (out) {
		char *txt = cJSON_PrintUnformatted(out);
		printf("%s\n", txt ? txt : "{}");
		free(txt);
		cJSON_Delete(out);
	}
	fflush(stdout);
}

int ctl_top(int argc, char **argv, const char *admin_socket)
{
	double interval = 2;
	long count = -1;
	bool json = false;
	for (int i = 1; i < argc; i++) {
		char *end;
		if (streq(argv[i], "--json")) {
			json = true;
		} else if (streq(argv[i], "--interval") && i + 1 < argc) {
			interval = strtod(argv[++i], &end);
			if (*end || !(interval >= 0.1 && interval <= 3600)) {
				fprintf(stderr, "boxkitectl: --interval: seconds, 0.1 to 3600\n");
				return 2;
			}
		} else if (streq(argv[i], "-n") && i + 1 < argc) {
			count = strtol(argv[++i], &end, 10);
			if (*end || count < 1) {
				fprintf(stderr, "boxkitectl: -n: the number of screens, at least 1\n");
				return 2;
			}
		} else if (streq(argv[i], "--help") || streq(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "boxkitectl: %s: unknown argument %s; boxkitectl %s --help lists them\n", "top",
				argv[i], "top");
			return 2;
		}
	}
	bool tty = isatty(STDOUT_FILENO) && !json;
	cJSON *before = status(admin_socket);
	if (!before)
		return 1;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long k = 0; count < 0 || k < count; k++) {
		struct timespec d = { (time_t)interval, (long)((interval - (double)(time_t)interval) * 1e9) };
		while (nanosleep(&d, &d) < 0 && errno == EINTR)
			;
		cJSON *now = status(admin_socket);
		if (!now) {
			cJSON_Delete(before);
			return 1;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (tty)
			printf("\033[H\033[2J");
		else if (k > 0 && !json)
			printf("\n");
		show(now, before, dt, json);
		cJSON_Delete(before);
		before = now;
		t0 = t1;
	}
	cJSON_Delete(before);
	return 0;
}
