/* SPDX-License-Identifier: Apache-2.0 */
/* boxkitectl events: execs starting and ending, connections the BPF layer
 * refused and self-test results, as the agent logs them (its "events"
 * admin operation). Human-readable lines by default, the agent's own JSON
 * lines with --json; --follow streams until interrupted, like
 * `kubectl get events -w`. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "agent/ctl/ctl.h"
#include "lib/proto.h"
#include "lib/util.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: boxkitectl events [--follow] [--pod NAME] [--json] [--last N]\n"
		   "  the node's execs (start, end: exit, duration, layers), denials (destination, reason,\n"
		   "  process, exec) and self-test results; --follow streams new ones until interrupted;\n"
		   "  --last N: the N most recent first (default 50, with --follow 0)\n");
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "-";
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* One event as a line a person reads. */
static void print_human(const cJSON *ev)
{
	const char *kind = str(ev, "event");
	const char *ts = str(ev, "ts");
	char who[600];
	snprintf(who, sizeof(who), "%s/%s", str(ev, "namespace"), str(ev, "pod"));
	if (streq(kind, "exec_start")) {
		printf("%s  exec started  %-32s exec=%s policy=%s netns=%s\n", ts, who, str(ev, "exec_id"),
		       str(ev, "policy"), str(ev, "netns"));
	} else if (streq(kind, "exec")) {
		const cJSON *bpf = cJSON_GetObjectItemCaseSensitive(ev, "bpf");
		if (streq(str(ev, "outcome"), "isolation_failed"))
			printf("%s  exec FAILED   %-32s exec=%s layer=%s: %s\n", ts, who, str(ev, "exec_id"),
			       str(ev, "layer"), str(ev, "error"));
		else
			printf("%s  exec ended    %-32s exec=%s exit=%d %.1fms %s netns=%s bpf=%s policy=%s denied=%.0f\n",
			       ts, who, str(ev, "exec_id"), (int)num(ev, "exit_code"), num(ev, "duration_ms"),
			       str(ev, "outcome"), str(ev, "netns"), cJSON_IsTrue(bpf) ? "on" : "off", str(ev, "policy"),
			       num(ev, "denied"));
	} else if (streq(kind, "denied")) {
		printf("%s  DENIED        %-32s exec=%s %s:%.0f/%s reason=%s comm=%s\n", ts, who, str(ev, "exec_id"),
		       str(ev, "dst"), num(ev, "port"), str(ev, "proto"), str(ev, "reason"), str(ev, "comm"));
	} else if (streq(kind, "selftest")) {
		printf("%s  self-test     %s: %s\n", ts, str(ev, "level"), str(ev, "msg"));
	} else if (streq(kind, "events_lost")) {
		printf("%s  (%.0f events lost: this reader was too slow)\n", ts, num(ev, "lost"));
	} else if (streq(kind, "end")) {
		printf("-- %s\n", str(ev, "msg"));
	} else {
		char *t = cJSON_PrintUnformatted(ev);
		printf("%s\n", t ? t : "?");
		free(t);
	}
}

static void print_event(const cJSON *ev, bool json)
{
	if (json) {
		char *t = cJSON_PrintUnformatted(ev);
		if (t)
			printf("%s\n", t);
		free(t);
	} else {
		print_human(ev);
	}
	fflush(stdout);
}

/* The answer's body, or NULL after saying why. */
static cJSON *body_of(const char *resp, size_t len, cJSON **whole)
{
	*whole = cJSON_ParseWithLength(resp, len);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(*whole, "status");
	cJSON *b = cJSON_GetObjectItemCaseSensitive(*whole, "body");
	if (!cJSON_IsNumber(st) || !b) {
		fprintf(stderr, "boxkitectl: malformed answer from the agent\n");
		return NULL;
	}
	if (st->valueint != 200) {
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(b, "detail");
		fprintf(stderr, "boxkitectl: events: %s\n", cJSON_IsString(d) ? d->valuestring : "request refused");
		return NULL;
	}
	return b;
}

int ctl_events(int argc, char **argv, const char *admin_socket)
{
	bool follow = false, json = false;
	const char *pod = NULL;
	long last = -1;
	for (int i = 1; i < argc; i++) {
		if (streq(argv[i], "--follow") || streq(argv[i], "-f"))
			follow = true;
		else if (streq(argv[i], "--json"))
			json = true;
		else if (streq(argv[i], "--pod") && i + 1 < argc)
			pod = argv[++i];
		else if (streq(argv[i], "--last") && i + 1 < argc) {
			char *end;
			last = strtol(argv[++i], &end, 10);
			if (*end || last < 0 || last > 1024) {
				fprintf(stderr, "boxkitectl: --last: a number of events, 0 to 1024\n");
				return 2;
			}
		} else if (streq(argv[i], "--help") || streq(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "boxkitectl: %s: unknown argument %s; boxkitectl %s --help lists them\n", "events",
				argv[i], "events");
			return 2;
		}
	}
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "op", "events");
	cJSON *args = cJSON_AddObjectToObject(req, "args");
	cJSON_AddBoolToObject(args, "follow", follow);
	if (pod)
		cJSON_AddStringToObject(args, "pod", pod);
	if (last >= 0)
		cJSON_AddNumberToObject(args, "last", (double)last);
	char *txt = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	int fd = bk_connect(admin_socket);
	if (fd < 0) {
		fprintf(stderr, "boxkitectl: cannot reach the agent at %s: %s (is boxkite-agent running? as root?)\n",
			admin_socket, strerror(-fd));
		free(txt);
		return 1;
	}
	int r = bk_send_msg(fd, txt, strlen(txt));
	free(txt);
	if (r < 0) {
		fprintf(stderr, "boxkitectl: events: cannot send the request: %s\n", strerror(-r));
		close(fd);
		return 1;
	}
	int rc = 0;
	for (;;) {
		char *resp = NULL;
		size_t len = 0;
		r = bk_recv_msg(fd, BK_REQ_MAX, &resp, &len);
		if (r < 0) {
			if (!follow || r != -ECONNRESET) {
				fprintf(stderr, "boxkitectl: events: %s\n",
					r == -ECONNRESET ? "the agent closed the connection" : bk_proto_strerror(r));
				rc = 1;
			}
			break;
		}
		cJSON *whole = NULL;
		cJSON *b = body_of(resp, len, &whole);
		free(resp);
		if (!b) {
			cJSON_Delete(whole);
			rc = 1;
			break;
		}
		if (!follow) {
			const cJSON *ev;
			cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(b, "events"))
				print_event(ev, json);
			if (num(b, "lost") > 0 && !json)
				printf("(%.0f older events were overwritten while reading)\n", num(b, "lost"));
			cJSON_Delete(whole);
			break;
		}
		bool hello = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "following"));
		bool end = streq(str(b, "event"), "end");
		if (!hello)
			print_event(b, json);
		cJSON_Delete(whole);
		if (end)
			break;
	}
	close(fd);
	return rc;
}
