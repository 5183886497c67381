/* SPDX-License-Identifier: Apache-2.0 */
/* boxkitectl: the operator's tool. Talks to the agent's admin socket (root
 * only), and runs local-mode sandbox pods with runc. */
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sys/stat.h>

#include "agent/ctl/local/local.h"
#include "agent/ctl/ctl.h"
#include "lib/b64.h"
#include "lib/proto.h"
#include "lib/sign.h"
#include "lib/util.h"

static const char *admin_socket = "/run/boxkite/admin.sock";

/* The synopsis of every command: `--help`, `help CMD` and the man page's
 * test (tests/ops/) read their lines from here. A line "  WORD [word] ..."
 * starts a command; deeper-indented lines continue it. */
static const char synopsis[] =
	"  sandbox create NAME [--policy P] [--dns ADDR] [--agent-socket PATH] [--shim-bin PATH]\n"
	"                 [--shim-env NAME=VALUE]... [--memory BYTES] [--pids N] [--cpus X]\n"
	"                 [--wait S | --no-wait]\n"
	"  sandbox delete NAME\n"
	"  sandbox list\n"
	"  exec NAME [--timeout S] [--json] [--stream] [--] CMD [ARG...]\n"
	"  exec -it NAME [-- CMD [ARG...]]\n"
	"  status\n"
	"  inspect NAME\n"
	"  verify NAME [--hold S] [--json]\n"
	"  policy set NAME PROFILE\n"
	"  policy unset NAME\n"
	"  ready\n"
	"  events [--follow] [--pod NAME] [--json] [--last N]\n"
	"  top [--interval S] [-n N] [--json]\n"
	"  receipt pubkey\n"
	"  receipt verify FILE [--pubkey PEM-FILE]\n"
	"  call --socket PATH OP [ARGS-JSON]\n"
	"  help [COMMAND]\n";

/* What each command does, for `COMMAND --help` (the synopsis lines come
 * from above). */
static const struct {
	const char *cmd, *about;
} helps[] = {
	{ "sandbox",
	  "Local-mode sandbox pods, run by runc under /run/runc (root only).\n"
	  "  create NAME   a pod network namespace, a sandbox container and a shim container;\n"
	  "                prints one JSON object {\"name\",\"pod_uid\",\"url\",\"token_file\",\"pin\"}\n"
	  "                (pin: sha256//<base64 SPKI hash>, for curl --pinnedpubkey)\n"
	  "  delete NAME   removes everything create made\n"
	  "  list          one line per local sandbox: NAME, pod_uid=..., url=...\n"
	  "options of create:\n"
	  "  --policy P            egress profile of the pod (boxkite.dev/egress-policy); default:\n"
	  "                        the agent's default profile\n"
	  "  --dns ADDR            nameserver of the pod's resolv.conf (default 10.96.0.10)\n"
	  "  --agent-socket PATH   the agent's socket mounted into the pod (default\n"
	  "                        /run/boxkite/pods/agent.sock)\n"
	  "  --shim-bin PATH       the boxkite-shim binary run in the pod (default: next to boxkitectl)\n"
	  "  --shim-env NAME=VALUE a setting for the shim container, e.g. BACKEND_URL for /tool-call\n"
	  "                        (repeatable, at most 8; overrides the defaults)\n"
	  "  --memory BYTES        the pod's memory cap, K/M/G suffixes, at least 16M (default 4G)\n"
	  "  --pids N              the pod's pids cap, at least 16 (default 4096)\n"
	  "  --cpus X              the pod's CPU quota, 0.01 to 1024 (default: none)\n"
	  "  --wait S              seconds to wait for the shim to report the agent connected\n"
	  "                        (default 10); on timeout exit 1, the sandbox kept for its logs\n"
	  "  --no-wait             return as soon as the containers started\n" },
	{ "exec",
	  "Runs CMD in sandbox NAME with exactly the isolation a shim request gets.\n"
	  "Prints the command's stdout and stderr; exits with its exit code (125: the\n"
	  "agent refused or could not run it).\n"
	  "  --timeout S   seconds, 1 to 86400 (default: the agent's)\n"
	  "  --json        print the whole exec response (with its signed receipt) instead\n"
	  "  --stream      print stdout and stderr as the command writes them (with --json:\n"
	  "                the stream's events, one JSON line each)\n"
	  "  -it, --tty    a terminal (exec -it NAME [-- CMD]): the sandbox's shell, or CMD,\n"
	  "                on a pseudo-terminal of the exec's own devpts; the local terminal\n"
	  "                is raw meanwhile and its size follows (SIGWINCH); exit code: the\n"
	  "                shell's\n" },
	{ "status", "The agent's status as JSON: sandboxes, live execs, layers in force, self-test,\n"
		    "denial counters, the node's receipt key.\n" },
	{ "inspect", "Sandbox NAME's isolation report as JSON, read back from the kernel: BPF program\n"
		     "ids and tags, pinned paths (usable with bpftool), namespaces, cgroups.\n" },
	{ "verify",
	  "Runs the isolation probes from inside NAME's isolation context (metadata endpoint,\n"
	  "Kubernetes API, a pod address, a public address) and prints, per probe, the\n"
	  "outcome, how fast it failed and which layer stopped it. Exit 0 only when every\n"
	  "probe ended as the profile expects.\n"
	  "  --hold S   keep the context this many seconds before tearing it down\n"
	  "  --json     print the agent's answer as one JSON object\n" },
	{ "policy",
	  "The egress profile of sandbox NAME's new execs, changed while it runs (an operator's\n"
	  "override on this node; it wins over the pod's boxkite.dev/egress-policy annotation\n"
	  "and survives an agent restart). Execs already running keep the profile they started\n"
	  "with. Prints {\"pod\",\"namespace\",\"pod_uid\",\"old\",\"new\",\"running_execs\"}.\n"
	  "  set NAME PROFILE   new execs of NAME get PROFILE (one of the node config's)\n"
	  "  unset NAME         remove the override: annotation, selectors, default apply again\n" },
	{ "ready", "Prints \"ready\" and exits 0 when the agent answers and its node self-test passed;\n"
		   "\"not ready\" and exit 1 otherwise.\n" },
	{ "events",
	  "The node's event stream, as the agent logs it: execs starting and ending (exit,\n"
	  "duration, layers), connections the BPF layer refused (destination, reason, process,\n"
	  "exec), self-test results. Human-readable lines by default.\n"
	  "  --follow, -f   stream new events until interrupted (or the agent stops)\n"
	  "  --pod NAME     only that sandbox's events\n"
	  "  --json         the agent's own JSON log lines\n"
	  "  --last N       the N most recent first, 0 to 1024 (default 50; with --follow 0)\n" },
	{ "top",
	  "Per sandbox: live execs, execs/s and denials/s (between two reads of the agent's\n"
	  "status) and the pod cgroup's memory and pids in use against its caps (read from\n"
	  "the cgroup files by the agent). Refreshes until interrupted.\n"
	  "  --interval S   seconds between screens, 0.1 to 3600 (default 2)\n"
	  "  -n N           stop after N screens\n"
	  "  --json         one JSON object per screen instead of the table\n" },
	{ "receipt",
	  "  pubkey        print the node key that signs exec receipts (PEM)\n"
	  "  verify FILE   check a saved receipt (or a whole exec response): exit 0 valid,\n"
	  "                1 invalid, 2 unreadable or no key to check with\n"
	  "  --pubkey PEM-FILE   verify against this key instead of asking the agent\n" },
	{ "call", "Sends one raw request {\"op\":OP,\"args\":ARGS-JSON} on the socket at PATH and prints\n"
		  "the answer (for debugging).\n"
		  "  --socket PATH   the agent socket to use (admin or pod-facing)\n" },
	{ "help", "Prints the usage, or COMMAND's help.\n" },
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: boxkitectl [--admin-socket PATH] COMMAND [ARGS...]\n"
		"       boxkitectl --version | --help | COMMAND --help\n"
		"commands:\n%s"
		"options:\n"
		"  --admin-socket PATH   the agent's admin socket (default $BOXKITE_ADMIN_SOCKET,\n"
		"                        else /run/boxkite/admin.sock)\n"
		"  --help, -h            this text (COMMAND --help: that command's help)\n"
		"  --version             the version\n",
		synopsis);
}

/* A command's arguments are wrong: one line saying what and where to look. */
static int bad_usage(const char *cmd, const char *what, const char *arg)
{
	fprintf(stderr, "boxkitectl %s: %s%s%s; boxkitectl %s --help says more\n", cmd, what, arg ? ": " : "",
		arg ? arg : "", cmd);
	return 2;
}

/* `COMMAND --help`: its synopsis lines, then what it does. 0, or 2 for an
 * unknown command. */
static int command_help(const char *cmd, FILE *f)
{
	size_t cl = strlen(cmd);
	bool any = false, in = false;
	for (const char *l = synopsis; *l;) {
		const char *e = strchrnul(l, '\n');
		if (e - l > 3 && l[2] != ' ')
			in = (size_t)(e - l) >= cl + 2 && memcmp(l + 2, cmd, cl) == 0 && (l + 2 + cl == e || l[2 + cl] == ' ');
		if (in) {
			fprintf(f, "%s%.*s\n", any ? "" : "usage: boxkitectl [--admin-socket PATH]\n", (int)(e - l), l);
			any = true;
		}
		l = *e ? e + 1 : e;
	}
	if (!any) {
		fprintf(stderr, "boxkitectl: no command \"%s\"; boxkitectl --help lists them\n", cmd);
		return 2;
	}
	for (size_t i = 0; i < ARRAY_SIZE(helps); i++)
		if (streq(helps[i].cmd, cmd))
			fprintf(f, "\n%s", helps[i].about);
	return 0;
}

/* Whether COMMAND's arguments ask for help: --help or -h before "--", and
 * for exec only among its own options (after NAME, the command may have a
 * --help of its own). */
static bool wants_help(const char *cmd, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (streq(argv[i], "--"))
			return false;
		if (streq(argv[i], "--help") || streq(argv[i], "-h"))
			return true;
		if (streq(cmd, "exec") && i >= 2) {
			if (streq(argv[i], "--timeout"))
				i++;
			else if (!streq(argv[i], "--json") && !streq(argv[i], "--stream") && argv[i][0] != '-')
				return false;
		}
		if (streq(cmd, "call") && i >= 3)
			return false;
	}
	return false;
}

/* One request on the admin socket; returns the parsed response or NULL. */
static cJSON *admin_call(const char *sock, const char *op, cJSON *args, int *status)
{
	int fd = bk_connect(sock);
	if (fd < 0) {
		fprintf(stderr, "boxkitectl: cannot reach the agent at %s: %s: %s\n", sock, strerror(-fd),
			fd == -EACCES || fd == -EPERM ? "the admin socket is root's, run boxkitectl as root"
						      : "is boxkite-agent running? (another agent: --admin-socket PATH)");
		cJSON_Delete(args);
		return NULL;
	}
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "op", op);
	cJSON_AddItemToObject(req, "args", args ? args : cJSON_CreateObject());
	char *txt = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	char *resp = NULL;
	size_t rl = 0;
	int r = bk_call(fd, txt, strlen(txt), &resp, &rl);
	free(txt);
	close(fd);
	if (r < 0) {
		fprintf(stderr, "boxkitectl: agent request failed: %s: see the agent's log\n",
			r == -ECONNRESET ? "connection closed" : strerror(-r));
		return NULL;
	}
	cJSON *o = cJSON_ParseWithLength(resp, rl);
	free(resp);
	const cJSON *st = o ? cJSON_GetObjectItemCaseSensitive(o, "status") : NULL;
	if (!cJSON_IsNumber(st)) {
		fprintf(stderr, "boxkitectl: malformed answer from %s: is it a boxkite-agent's admin socket?\n", sock);
		cJSON_Delete(o);
		return NULL;
	}
	*status = st->valueint;
	return o;
}

static void print_error(const cJSON *resp)
{
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(resp, "body");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(b, "detail");
	fprintf(stderr, "boxkitectl: %s\n", cJSON_IsString(d) ? d->valuestring : "request failed");
}

/* POSIX shell single-quoting */
static int shell_join(char **argv, int argc, char **out)
{
	size_t cap = 1, len = 0;
	for (int i = 0; i < argc; i++)
		cap += strlen(argv[i]) * 4 + 3;
	char *s = malloc(cap);
	if (!s)
		return -ENOMEM;
	for (int i = 0; i < argc; i++) {
		if (i)
			s[len++] = ' ';
		bool plain = argv[i][0] != '\0';
		for (const char *p = argv[i]; *p; p++)
			if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%", *p))
				plain = false;
		if (plain) {
			memcpy(s + len, argv[i], strlen(argv[i]));
			len += strlen(argv[i]);
			continue;
		}
		s[len++] = '\'';
		for (const char *p = argv[i]; *p; p++) {
			if (*p == '\'') {
				memcpy(s + len, "'\\''", 4);
				len += 4;
			} else
				s[len++] = *p;
		}
		s[len++] = '\'';
	}
	s[len] = '\0';
	*out = s;
	return 0;
}

/* exec --stream: the agent's events as they come (docs/api.md, "stream": true):
 * output to our stdout/stderr (or each event as a JSON line); the exit code
 * of the exit event, 125 when the agent refused or the stream broke. */
static int exec_stream(cJSON *args, bool json)
{
	cJSON_AddBoolToObject(args, "stream", true);
	int fd = bk_connect(admin_socket);
	if (fd < 0) {
		fprintf(stderr, "boxkitectl: cannot reach the agent at %s: %s\n", admin_socket, strerror(-fd));
		cJSON_Delete(args);
		return 125;
	}
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "op", "exec");
	cJSON_AddItemToObject(req, "args", args);
	char *txt = cJSON_PrintUnformatted(req);
	cJSON_Delete(req);
	int r = txt ? bk_send_msg(fd, txt, strlen(txt)) : -ENOMEM;
	free(txt);
	int rc = 125;
	while (r == 0) {
		char *resp = NULL;
		size_t rl = 0;
		if (bk_recv_msg(fd, BK_RESP_MAX, &resp, &rl) != 0) {
			fprintf(stderr, "boxkitectl: the stream ended without an exit event: see the agent's log\n");
			break;
		}
		cJSON *o = cJSON_ParseWithLength(resp, rl);
		free(resp);
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "body");
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
		bool more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "more"));
		if (!cJSON_IsNumber(st) || !cJSON_IsObject(b)) {
			fprintf(stderr, "boxkitectl: malformed answer from the agent\n");
			cJSON_Delete(o);
			break;
		}
		if (json) {
			char *t = cJSON_PrintUnformatted(b);
			puts(t ? t : "{}");
			fflush(stdout);
			free(t);
		} else if (st->valueint != 200) {
			print_error(o);
		} else if (cJSON_IsString(type) && (streq(type->valuestring, "stdout") || streq(type->valuestring, "stderr"))) {
			FILE *f = streq(type->valuestring, "stdout") ? stdout : stderr;
			const cJSON *d = cJSON_GetObjectItemCaseSensitive(b, "data");
			const cJSON *d64 = cJSON_GetObjectItemCaseSensitive(b, "data_base64");
			if (cJSON_IsString(d))
				fputs(d->valuestring, f);
			if (cJSON_IsString(d64)) {
				size_t dl;
				unsigned char *raw = bk_b64_decode(d64->valuestring, &dl);
				if (raw && dl)
					fwrite(raw, 1, dl, f);
				free(raw);
			}
			fflush(f);
		}
		if (!more) {
			const cJSON *ec = cJSON_GetObjectItemCaseSensitive(b, "exit_code");
			rc = st->valueint == 200 && cJSON_IsNumber(ec) ? ec->valueint : 125;
			cJSON_Delete(o);
			break;
		}
		cJSON_Delete(o);
	}
	close(fd);
	return rc;
}

static int cmd_exec(int argc, char **argv)
{
	/* exec [-it] NAME [--timeout S] [--json] -- CMD... */
	bool tty = false;
	while (argc >= 2 && (streq(argv[1], "-it") || streq(argv[1], "-ti") || streq(argv[1], "-t") ||
			     streq(argv[1], "-i") || streq(argv[1], "--tty"))) {
		tty = true;
		argv++;
		argc--;
	}
	if (argc < 2) {
		return bad_usage("exec", "a sandbox name and a command are needed (exec NAME -- CMD)", NULL);
	}
	const char *name = argv[1];
	long timeout = 0;
	bool json = false, stream = false;
	int i = 2;
	for (; i < argc; i++) {
		if (streq(argv[i], "--")) {
			i++;
			break;
		} else if (streq(argv[i], "-it") || streq(argv[i], "-ti") || streq(argv[i], "-t") ||
			   streq(argv[i], "-i") || streq(argv[i], "--tty"))
			tty = true;
		else if (streq(argv[i], "--json"))
			json = true;
		else if (streq(argv[i], "--stream"))
			stream = true;
		else if (streq(argv[i], "--timeout") && i + 1 < argc) {
			uint64_t v;
			if (parse_u64(argv[++i], &v) < 0 || v == 0 || v > 86400) {
				fprintf(stderr, "boxkitectl: --timeout takes seconds (1-86400)\n");
				return 2;
			}
			timeout = (long)v;
		} else
			break;
	}
	if (tty) {
		/* the terminal: the sandbox's shell, or CMD in it */
		char *tcmd = NULL;
		if (i < argc && shell_join(argv + i, argc - i, &tcmd) < 0)
			return 1;
		int rc = ctl_exec_tty(admin_socket, name, tcmd);
		free(tcmd);
		return rc;
	}
	if (i >= argc) {
		return bad_usage("exec", "no command after the options (exec NAME [--timeout S] [--json] -- CMD)", NULL);
	}
	char *cmd;
	if (shell_join(argv + i, argc - i, &cmd) < 0)
		return 1;
	cJSON *args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "sandbox", name);
	cJSON_AddStringToObject(args, "command", cmd);
	free(cmd);
	if (timeout)
		cJSON_AddNumberToObject(args, "timeout", (double)timeout);
	if (stream)
		return exec_stream(args, json);
	int status;
	cJSON *resp = admin_call(admin_socket, "exec", args, &status);
	if (!resp)
		return 125;
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(resp, "body");
	int rc;
	if (json) {
		char *t = cJSON_PrintUnformatted(b);
		puts(t);
		free(t);
		rc = status == 200 ? cJSON_GetObjectItemCaseSensitive(b, "exit_code")->valueint : 125;
	} else if (status != 200) {
		print_error(resp);
		rc = 125;
	} else {
		const cJSON *o = cJSON_GetObjectItemCaseSensitive(b, "stdout");
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(b, "stderr");
		fputs(cJSON_IsString(o) ? o->valuestring : "", stdout);
		fputs(cJSON_IsString(e) ? e->valuestring : "", stderr);
		rc = cJSON_GetObjectItemCaseSensitive(b, "exit_code")->valueint;
	}
	cJSON_Delete(resp);
	return rc;
}

static int cmd_simple(const char *op, bool ready)
{
	int status;
	cJSON *resp = admin_call(admin_socket, op, NULL, &status);
	if (!resp)
		return 1;
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(resp, "body");
	int rc = status == 200 ? 0 : 1;
	if (ready) {
		rc = status == 200 && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "node_safe")) ? 0 : 1;
		printf("%s\n", rc == 0 ? "ready" : "not ready");
	} else {
		char *t = cJSON_Print(b);
		puts(t);
		free(t);
	}
	cJSON_Delete(resp);
	return rc;
}

/* admin_call that only returns a 200 answer; otherwise says why. */
static cJSON *admin_call_ok(const char *op, cJSON *args)
{
	int status;
	cJSON *resp = admin_call(admin_socket, op, args, &status);
	if (resp && status != 200) {
		print_error(resp);
		cJSON_Delete(resp);
		return NULL;
	}
	return resp;
}

static int cmd_policy(int argc, char **argv)
{
	bool set = argc == 4 && streq(argv[1], "set");
	bool unset = argc == 3 && streq(argv[1], "unset");
	if (!set && !unset)
		return bad_usage("policy", "policy set NAME PROFILE, or policy unset NAME", NULL);
	cJSON *args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "sandbox", argv[2]);
	if (set)
		cJSON_AddStringToObject(args, "profile", argv[3]);
	else
		cJSON_AddNullToObject(args, "profile");
	cJSON *resp = admin_call_ok("policy_set", args);
	if (!resp)
		return 1;
	char *t = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(resp, "body"));
	puts(t);
	free(t);
	cJSON_Delete(resp);
	return 0;
}

static int cmd_inspect(int argc, char **argv)
{
	if (argc < 2) {
		return bad_usage("inspect", "a sandbox name is needed", NULL);
	}
	cJSON *args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "sandbox", argv[1]);
	cJSON *resp = admin_call_ok("inspect", args);
	if (!resp)
		return 1;
	char *t = cJSON_Print(cJSON_GetObjectItemCaseSensitive(resp, "body"));
	puts(t);
	free(t);
	cJSON_Delete(resp);
	return 0;
}

static int cmd_verify(int argc, char **argv)
{
	if (argc < 2) {
		return bad_usage("verify", "a sandbox name is needed", NULL);
	}
	bool json = false;
	double hold = 0;
	for (int i = 2; i < argc; i++) {
		if (streq(argv[i], "--json"))
			json = true;
		else if (streq(argv[i], "--hold") && i + 1 < argc)
			hold = strtod(argv[++i], NULL);
		else {
			return bad_usage("verify", "unknown argument", argv[i]);
		}
	}
	cJSON *args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "sandbox", argv[1]);
	cJSON_AddNumberToObject(args, "hold", hold);
	cJSON *resp = admin_call_ok("verify", args);
	if (!resp)
		return 1;
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(resp, "body");
	bool passed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "passed"));
	const cJSON *pq;
	cJSON_ArrayForEach(pq, cJSON_GetObjectItemCaseSensitive(b, "probes"))
	{
		const char *oc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pq, "outcome"));
		if (!oc || !(streq(oc, "stopped") || streq(oc, "allowed")))
			passed = false;
	}
	if (json) {
		char *t = cJSON_PrintUnformatted(b);
		puts(t);
		free(t);
	} else {
		const cJSON *err = cJSON_GetObjectItemCaseSensitive(b, "error");
		if (cJSON_IsString(err))
			printf("the isolation context could not be built: %s\n", err->valuestring);
		const cJSON *layers = cJSON_GetObjectItemCaseSensitive(b, "layers");
		const cJSON *ln = cJSON_GetObjectItemCaseSensitive(layers, "netns");
		const cJSON *lb = cJSON_GetObjectItemCaseSensitive(layers, "bpf");
		const cJSON *ls = cJSON_GetObjectItemCaseSensitive(layers, "seccomp");
		if (ln && lb)
			printf("layers: netns %s (%s) %s, bpf %d programs %s",
			       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ln, "mode")),
			       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ln, "interfaces")),
			       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ln, "held")) ? "held" : "DID NOT HOLD",
			       cJSON_GetObjectItemCaseSensitive(lb, "programs_attached")->valueint,
			       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lb, "held")) ? "held" : "DID NOT HOLD");
		if (ln && lb && ls)
			printf(", seccomp mode %d %s",
			       (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(ls, "mode")),
			       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ls, "held")) ? "held" : "DID NOT HOLD");
		if (ln && lb)
			printf("\n");
		/* one line per probe with its outcome */
		int n[4] = { 0 }, bad = 0;
		static const char *const outcomes[4] = { "stopped", "allowed", "reached", "skipped" };
		printf("%-16s %-30s %-8s %9s  %s\n", "probe", "address", "outcome", "ms", "by / why");
		const cJSON *pj;
		cJSON_ArrayForEach(pj, cJSON_GetObjectItemCaseSensitive(b, "probes"))
		{
			const char *oc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pj, "outcome"));
			const char *layer = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pj, "layer"));
			const char *why = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pj, "reason"));
			const cJSON *ms = cJSON_GetObjectItemCaseSensitive(pj, "ms");
			int k = 0;
			while (k < 4 && !(oc && streq(oc, outcomes[k])))
				k++;
			if (k < 4)
				n[k]++;
			if (k >= 2)
				bad++;
			char detail[160];
			if (layer)
				snprintf(detail, sizeof(detail), "%s (%s)", layer, why ? why : "");
			else
				snprintf(detail, sizeof(detail), "%s", why ? why : "");
			printf("%-16s %-30s %-8s %9.2f  %s\n", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pj, "name")),
			       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pj, "address")), oc ? oc : "?",
			       cJSON_IsNumber(ms) ? ms->valuedouble : 0.0, detail);
		}
		/* never PASSED when a probe was skipped or reached, whatever the agent said */
		if (bad)
			passed = false;
		if (passed)
			printf("PASSED: %d stopped, %d allowed as the profile expects\n", n[0], n[1]);
		else
			printf("FAILED: %d stopped, %d allowed, %d reached, %d skipped%s\n", n[0], n[1], n[2], n[3],
			       bad ? "" : " (a layer did not hold, or a probe did not end as the profile expects)");
	}
	cJSON_Delete(resp);
	return passed ? 0 : 1;
}

static int cmd_call(int argc, char **argv)
{
	/* call --socket PATH OP [ARGS] */
	if (argc < 4 || !streq(argv[1], "--socket")) {
		return bad_usage("call", "call --socket PATH OP [ARGS-JSON]", NULL);
	}
	int fd = bk_connect(argv[2]);
	if (fd < 0) {
		fprintf(stderr, "boxkitectl: %s: %s\n", argv[2], strerror(-fd));
		return 1;
	}
	char *req;
	if (asprintf(&req, "{\"op\":\"%s\",\"args\":%s}", argv[3], argc > 4 ? argv[4] : "{}") < 0)
		return 1;
	char *resp = NULL;
	int r = bk_call(fd, req, strlen(req), &resp, NULL);
	free(req);
	close(fd);
	if (r < 0) {
		fprintf(stderr, "boxkitectl: %s\n", r == -ECONNRESET ? "connection closed by the agent" : strerror(-r));
		return 1;
	}
	puts(resp);
	free(resp);
	return 0;
}

static void default_shim_bin(char *buf, size_t len)
{
	/* next to this binary */
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			snprintf(buf, len, "%s/boxkite-shim", self);
			return;
		}
	}
	snprintf(buf, len, "/usr/local/bin/boxkite-shim");
}

/* path made absolute against the working directory (it need not exist). */
static int abs_path(const char *path, char *out, size_t len)
{
	char cwd[PATH_MAX];
	if (path[0] == '/')
		return snprintf(out, len, "%s", path) < (int)len ? 0 : -ENAMETOOLONG;
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	return snprintf(out, len, "%s/%s", cwd, path) < (int)len ? 0 : -ENAMETOOLONG;
}

/* A size in bytes with an optional K, M or G suffix (powers of 1024). */
static int parse_size(const char *s, uint64_t *out)
{
	char num[32];
	size_t n = strlen(s);
	uint64_t mul = 1;
	if (n && strchr("KkMmGg", s[n - 1])) {
		mul = (s[n - 1] == 'K' || s[n - 1] == 'k') ? 1ull << 10 : (s[n - 1] == 'M' || s[n - 1] == 'm') ? 1ull << 20 : 1ull << 30;
		n--;
	}
	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, n);
	num[n] = '\0';
	uint64_t v;
	if (parse_u64(num, &v) < 0 || v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

static int cmd_sandbox(int argc, char **argv)
{
	if (argc < 2) {
		return bad_usage("sandbox", "create, delete or list", NULL);
	}
	char shim[PATH_MAX];
	default_shim_bin(shim, sizeof(shim));
	struct local_opts o = { .agent_socket = "/run/boxkite/pods/agent.sock", .shim_bin = shim, .runc_root = "/run/runc",
				.memory = 4ull << 30, .pids = 4096, .wait_s = 10 };
	const char *name = NULL;
	for (int i = 2; i < argc; i++) {
		if (streq(argv[i], "--no-wait"))
			o.wait_s = 0;
		else if (streq(argv[i], "--wait") && i + 1 < argc) {
			uint64_t v;
			if (parse_u64(argv[++i], &v) < 0 || v == 0 || v > 3600) {
				fprintf(stderr, "boxkitectl: --wait takes seconds (1-3600); --no-wait does not wait\n");
				return 2;
			}
			o.wait_s = (unsigned)v;
		} else if (streq(argv[i], "--policy") && i + 1 < argc)
			o.policy = argv[++i];
		else if (streq(argv[i], "--dns") && i + 1 < argc)
			o.dns = argv[++i];
		else if (streq(argv[i], "--agent-socket") && i + 1 < argc)
			o.agent_socket = argv[++i];
		else if (streq(argv[i], "--shim-bin") && i + 1 < argc)
			o.shim_bin = argv[++i];
		else if (streq(argv[i], "--shim-env") && i + 1 < argc) {
			const char *kv = argv[++i], *eq = strchr(kv, '=');
			if (!eq || eq == kv || strspn(kv, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") !=
						       (size_t)(eq - kv) || o.n_shim_env == LOCAL_SHIM_ENV_MAX) {
				fprintf(stderr, "boxkitectl: --shim-env: NAME=VALUE (a variable name, at most %d of them)\n",
					LOCAL_SHIM_ENV_MAX);
				return 2;
			}
			o.shim_env[o.n_shim_env++] = kv;
		}
		else if (streq(argv[i], "--memory") && i + 1 < argc) {
			if (parse_size(argv[++i], &o.memory) < 0 || o.memory < (16u << 20)) {
				fprintf(stderr, "boxkitectl: --memory: bytes (K, M, G suffixes), at least 16M\n");
				return 2;
			}
		} else if (streq(argv[i], "--pids") && i + 1 < argc) {
			if (parse_u64(argv[++i], &o.pids) < 0 || o.pids < 16) {
				fprintf(stderr, "boxkitectl: --pids: a number, at least 16\n");
				return 2;
			}
		} else if (streq(argv[i], "--cpus") && i + 1 < argc) {
			char *end;
			double c = strtod(argv[++i], &end);
			if (*end || !(c >= 0.01 && c <= 1024)) {
				fprintf(stderr, "boxkitectl: --cpus: CPUs as a decimal (0.01 to 1024)\n");
				return 2;
			}
			o.cpus_milli = (uint64_t)(c * 1000 + 0.5);
		}
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else {
			static const char *const valued[] = { "--policy", "--dns", "--agent-socket", "--shim-bin", "--memory",
							      "--pids", "--cpus", "--wait", NULL };
			bool needs_value = false;
			for (int k = 0; valued[k]; k++)
				needs_value |= streq(argv[i], valued[k]);
			fprintf(stderr, "boxkitectl: sandbox %s: %s %s: see boxkitectl --help\n", argv[1],
				needs_value ? "missing the value of" : "unexpected", argv[i]);
			return 2;
		}
	}
	if (!streq(argv[1], "create") && !streq(argv[1], "delete") && !streq(argv[1], "list")) {
		fprintf(stderr, "boxkitectl: no sandbox command %s: use sandbox create, delete or list\n", argv[1]);
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "boxkitectl: local sandboxes need root: run boxkitectl sandbox %s as root\n", argv[1]);
		return 1;
	}
	if (streq(argv[1], "list"))
		return local_list() < 0;
	if (!name) {
		fprintf(stderr, "boxkitectl: sandbox %s needs a NAME: boxkitectl sandbox %s NAME\n", argv[1], argv[1]);
		return 2;
	}
	/* runc runs elsewhere (its own working directory, the container's
	 * mount namespace): every host path it is given is absolute */
	char shim_abs[PATH_MAX], sock_abs[PATH_MAX];
	if (streq(argv[1], "create")) {
		if (!realpath(o.shim_bin, shim_abs)) {
			fprintf(stderr, "boxkitectl: shim binary %s: %s: pass --shim-bin PATH (make builds build/boxkite-shim)\n",
				o.shim_bin, strerror(errno));
			return 1;
		}
		o.shim_bin = shim_abs;
		if (abs_path(o.agent_socket, sock_abs, sizeof(sock_abs)) < 0) {
			fprintf(stderr, "boxkitectl: --agent-socket %s: path too long or no working directory\n", o.agent_socket);
			return 2;
		}
		o.agent_socket = sock_abs;
		struct stat st;
		if (o.wait_s && (stat(o.agent_socket, &st) < 0 || !S_ISSOCK(st.st_mode))) {
			fprintf(stderr, "boxkitectl: no agent socket at %s: start boxkite-agent first (or pass --agent-socket "
				"PATH, or --no-wait to create the sandbox anyway)\n", o.agent_socket);
			return 1;
		}
	}
	if (streq(argv[1], "create"))
		return local_create(name, &o) < 0;
	if (streq(argv[1], "delete"))
		return local_delete(name, &o) < 0;
	return bad_usage("sandbox", "unknown subcommand (create, delete or list)", argv[1]);
}

/* ---- receipts --------------------------------------------------------------------------- */

/* The node key's PEM, from the agent (status). NULL: said why. */
static char *agent_pubkey(void)
{
	cJSON *resp = admin_call_ok("status", NULL);
	if (!resp)
		return NULL;
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(resp, "body");
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "receipt_key"),
							  "public_key");
	char *pem = cJSON_IsString(k) ? strdup(k->valuestring) : NULL;
	if (!pem)
		fprintf(stderr, "boxkitectl: the agent's status has no receipt_key (an older agent?)\n");
	cJSON_Delete(resp);
	return pem;
}

static int receipt_verify(const char *file, const char *pubfile)
{
	_cleanup_free_ char *txt = NULL, *pem = NULL;
	if (read_file_at(AT_FDCWD, file, 64 << 20, &txt, NULL) < 0) {
		fprintf(stderr, "boxkitectl: cannot read %s: %s\n", file, strerror(errno));
		return 2;
	}
	cJSON *j = cJSON_Parse(txt);
	const cJSON *rc = cJSON_GetObjectItemCaseSensitive(j, "receipt");
	if (!rc)
		rc = j;
	const cJSON *doc = cJSON_GetObjectItemCaseSensitive(rc, "document");
	const cJSON *sig = cJSON_GetObjectItemCaseSensitive(rc, "signature");
	const cJSON *kid = cJSON_GetObjectItemCaseSensitive(rc, "key_id");
	if (!cJSON_IsString(doc) || !cJSON_IsString(sig) || !cJSON_IsString(kid)) {
		fprintf(stderr, "boxkitectl: %s holds no receipt {document, signature, key_id}\n", file);
		cJSON_Delete(j);
		return 2;
	}
	if (pubfile) {
		if (read_file_at(AT_FDCWD, pubfile, 65536, &pem, NULL) < 0)
			fprintf(stderr, "boxkitectl: cannot read %s: %s\n", pubfile, strerror(errno));
	} else {
		pem = agent_pubkey();
	}
	char id[65];
	int rc_ = 2;
	if (!pem) {
		/* said why */
	} else if (bk_pubkey_id(pem, id) < 0) {
		fprintf(stderr, "boxkitectl: not an Ed25519 public key (PEM)\n");
	} else if (!streq(id, kid->valuestring)) {
		printf("INVALID: signed by key %s, not by this node's key %s\n", kid->valuestring, id);
		rc_ = 1;
	} else {
		int v = bk_sig_verify(pem, doc->valuestring, strlen(doc->valuestring), sig->valuestring);
		cJSON *d = cJSON_Parse(doc->valuestring);
		const cJSON *eid = cJSON_GetObjectItemCaseSensitive(d, "exec_id");
		const cJSON *node = cJSON_GetObjectItemCaseSensitive(d, "node");
		if (v == 1)
			printf("valid: exec %s on node %s, signed by key %s\n", cJSON_IsString(eid) ? eid->valuestring : "?",
			       cJSON_IsString(node) ? node->valuestring : "?", id);
		else
			printf("INVALID: the signature does not match the document (altered, or not signed by key %s)\n",
			       id);
		cJSON_Delete(d);
		rc_ = v == 1 ? 0 : 1;
	}
	cJSON_Delete(j);
	return rc_;
}

static int cmd_receipt(int argc, char **argv)
{
	if (argc >= 2 && streq(argv[1], "pubkey") && argc == 2) {
		_cleanup_free_ char *pem = agent_pubkey();
		if (!pem)
			return 1;
		fputs(pem, stdout);
		return 0;
	}
	if (argc >= 3 && streq(argv[1], "verify")) {
		const char *pub = NULL;
		if (argc == 5 && streq(argv[3], "--pubkey"))
			pub = argv[4];
		else if (argc != 3) {
			return bad_usage("receipt", "receipt verify FILE [--pubkey PEM-FILE]", NULL);
		}
		return receipt_verify(argv[2], pub);
	}
	return bad_usage("receipt", "pubkey or verify FILE", NULL);
}

int main(int argc, char **argv)
{
	const char *env = getenv("BOXKITE_ADMIN_SOCKET");
	if (env && env[0])
		admin_socket = env;
	int i = 1;
	while (i < argc && startswith(argv[i], "-")) {
		if (streq(argv[i], "--admin-socket") && i + 1 < argc) {
			admin_socket = argv[i + 1];
			i += 2;
		} else if (streq(argv[i], "--help") || streq(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (streq(argv[i], "--version")) {
			printf("boxkitectl %s\n", BK_VERSION);
			return 0;
		} else {
			fprintf(stderr, "boxkitectl: unknown option %s; boxkitectl --help lists them\n", argv[i]);
			return 2;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "boxkitectl: no command; boxkitectl --help lists them\n");
		return 2;
	}
	const char *cmd = argv[i];
	argc -= i;
	argv += i;
	if (streq(cmd, "help")) {
		if (argc < 2 || streq(argv[1], "--help") || streq(argv[1], "-h")) {
			usage(stdout);
			return 0;
		}
		return command_help(argv[1], stdout);
	}
	if (wants_help(cmd, argc, argv))
		return command_help(cmd, stdout);
	if (streq(cmd, "sandbox"))
		return cmd_sandbox(argc, argv);
	if (streq(cmd, "exec"))
		return cmd_exec(argc, argv);
	if (streq(cmd, "status"))
		return cmd_simple("status", false);
	if (streq(cmd, "ready"))
		return cmd_simple("status", true);
	if (streq(cmd, "inspect"))
		return cmd_inspect(argc, argv);
	if (streq(cmd, "verify"))
		return cmd_verify(argc, argv);
	if (streq(cmd, "policy"))
		return cmd_policy(argc, argv);
	if (streq(cmd, "call"))
		return cmd_call(argc, argv);
	if (streq(cmd, "receipt"))
		return cmd_receipt(argc, argv);
	if (streq(cmd, "events"))
		return ctl_events(argc, argv, admin_socket);
	if (streq(cmd, "top"))
		return ctl_top(argc, argv, admin_socket);
	fprintf(stderr, "boxkitectl: no command \"%s\"; boxkitectl --help lists them\n", cmd);
	return 2;
}
