/* SPDX-License-Identifier: Apache-2.0 */
/* boxkitectl exec -it NAME [-- CMD...]: the sandbox's terminal (op "pty",
 * agent/api/op_pty.c) on the admin socket. The local terminal goes raw
 * while it runs (restored on every way out), its size follows SIGWINCH,
 * stdin's bytes go to the exec's terminal as they come (EOF on a stdin
 * that is not a terminal stops the input, not the session), the exit
 * code is the shell's. */
#include "agent/ctl/ctl.h"
#include "lib/b64.h"
#include "lib/proto.h"
#include "lib/util.h"

#include <cJSON.h>
#include <errno.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

static struct termios saved;
static bool raw_on;

static void restore(void)
{
	if (raw_on) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
		raw_on = false;
	}
}

static int send_json(int fd, cJSON *o)
{
	char *t = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	int r = t ? bk_send_msg(fd, t, strlen(t)) : -ENOMEM;
	free(t);
	return r;
}

static int send_resize(int fd)
{
	struct winsize ws;
	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
		return 0;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", "resize");
	cJSON_AddNumberToObject(o, "rows", ws.ws_row);
	cJSON_AddNumberToObject(o, "cols", ws.ws_col);
	return send_json(fd, o);
}

static int send_input(int fd, const char *buf, size_t n)
{
	char *t = malloc(4 * ((n + 2) / 3) + 1);
	if (!t)
		return -ENOMEM;
	EVP_EncodeBlock((unsigned char *)t, (const unsigned char *)buf, (int)n);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", "input");
	cJSON_AddStringToObject(o, "data_base64", t);
	free(t);
	return send_json(fd, o);
}

static void write_all(int fd, const unsigned char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* One answer of the agent: output to stdout; 1 when it was the last
 * (*rc set), 0 to go on, < 0 on a broken stream. */
static int agent_message(int fd, int *rc)
{
	char *resp = NULL;
	size_t rl = 0;
	if (bk_recv_msg(fd, BK_RESP_MAX, &resp, &rl) != 0)
		return -EPIPE;
	cJSON *o = cJSON_ParseWithLength(resp, rl);
	free(resp);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "body");
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
	int r = 0;
	if (!cJSON_IsNumber(st) || !cJSON_IsObject(b)) {
		r = -EPROTO;
	} else if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "more"))) {
		restore();
		const cJSON *ec = cJSON_GetObjectItemCaseSensitive(b, "exit_code");
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(b, "detail");
		if (st->valueint != 200)
			fprintf(stderr, "boxkitectl: %s\n", cJSON_IsString(d) ? d->valuestring : "the agent refused the terminal");
		else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "timed_out")))
			fprintf(stderr, "boxkitectl: the terminal ended (idle or at its longest life)\n");
		*rc = st->valueint == 200 && cJSON_IsNumber(ec) ? ec->valueint : 125;
		r = 1;
	} else if (cJSON_IsString(type) && streq(type->valuestring, "output")) {
		const cJSON *d64 = cJSON_GetObjectItemCaseSensitive(b, "data_base64");
		size_t dl = 0;
		unsigned char *raw = cJSON_IsString(d64) ? bk_b64_decode(d64->valuestring, &dl) : NULL;
		if (raw && dl)
			write_all(STDOUT_FILENO, raw, dl);
		free(raw);
	}
	cJSON_Delete(o);
	return r;
}

int ctl_exec_tty(const char *admin_socket, const char *name, const char *cmd)
{
	int fd = bk_connect(admin_socket);
	if (fd < 0) {
		fprintf(stderr, "boxkitectl: cannot reach the agent at %s: %s\n", admin_socket, strerror(-fd));
		return 125;
	}
	bool tty = isatty(STDIN_FILENO);
	cJSON *args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "sandbox", name);
	if (cmd)
		cJSON_AddStringToObject(args, "command", cmd);
	struct winsize ws;
	if (tty && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
		cJSON_AddNumberToObject(args, "rows", ws.ws_row);
		cJSON_AddNumberToObject(args, "cols", ws.ws_col);
	}
	const char *term = getenv("TERM");
	if (term && term[0] && strlen(term) < 64 && strspn(term, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._+") == strlen(term))
		cJSON_AddStringToObject(args, "term", term);
	cJSON *req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "op", "pty");
	cJSON_AddItemToObject(req, "args", args);
	if (send_json(fd, req) < 0) {
		fprintf(stderr, "boxkitectl: cannot send the request to the agent\n");
		close(fd);
		return 125;
	}
	sigset_t winch;
	sigemptyset(&winch);
	sigaddset(&winch, SIGWINCH);
	sigprocmask(SIG_BLOCK, &winch, NULL);
	int sfd = signalfd(-1, &winch, SFD_CLOEXEC);
	if (tty && tcgetattr(STDIN_FILENO, &saved) == 0) {
		struct termios raw = saved;
		cfmakeraw(&raw);
		if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0) {
			raw_on = true;
			atexit(restore);
		}
	}
	int rc = 125;
	bool in_open = true;
	for (;;) {
		struct pollfd pf[3] = { { .fd = fd, .events = POLLIN },
					{ .fd = in_open ? STDIN_FILENO : -1, .events = POLLIN },
					{ .fd = sfd, .events = POLLIN } };
		if (poll(pf, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[0].revents) {
			int r = agent_message(fd, &rc);
			if (r < 0) {
				restore();
				fprintf(stderr, "boxkitectl: the terminal's stream ended without an exit event: see the agent's log\n");
			}
			if (r != 0)
				break;
		}
		if (pf[1].revents) {
			char buf[4096];
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				in_open = false; /* the shell goes on; its exit ends this */
			else if (send_input(fd, buf, (size_t)n) < 0)
				break;
		}
		if (pf[2].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				send_resize(fd);
		}
	}
	restore();
	if (sfd >= 0)
		close(sfd);
	close(fd);
	return rc;
}
