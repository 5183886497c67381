/* SPDX-License-Identifier: Apache-2.0 */
/* The /pty WebSocket after its upgrade (http.c answers the handshake): one
 * thread per terminal relays between the client's WebSocket and its own
 * agent connection (op "pty", agent/api/op_pty.c):
 *
 *   client binary or text frame -> {"type":"input","data_base64":...}
 *   client text message not UTF-8 -> close 1007 (RFC 6455 8.1)
 *   client text frame that is exactly {"type":"resize","rows":R,"cols":C}
 *                               -> {"type":"resize","rows":R,"cols":C}
 *   agent output event          -> a binary frame of the terminal's bytes
 *   agent exit event            -> close 1000 (the shell ended)
 *   agent refusal before start  -> close 1011 with its detail (1013 for
 *                                  too many terminals: try again later)
 *   client close / hang-up      -> the agent connection closes: the agent
 *                                  kills the shell's whole cgroup
 * as the reference sidecar's WS /pty: output as binary frames, input from
 * binary or text frames, a close after the shell ends. Ping gets pong. */
#include "shim.h"
#include "frame.h"
#include "ws.h"
#include "lib/b64.h"
#include "lib/proto.h"

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <poll.h>

struct wspty {
	struct shim *s;
	struct MHD_UpgradeResponseHandle *urh;
	int sock;        /* the client's (plain: MHD's end of the TLS pump, or TCP) */
	int agent;       /* our own agent connection */
	unsigned rows, cols;
	uint8_t *in;     /* client bytes not yet a whole frame */
	size_t inlen;
	uint8_t *msg;    /* a fragmented message's payload so far */
	size_t msglen;
	uint8_t msgop;
	bool closing;
};

static int write_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EPIPE;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int ws_send(struct wspty *w, uint8_t op, const void *p, size_t n)
{
	uint8_t hdr[10];
	size_t hl = ws_header(op, n, hdr);
	if (write_all(w->sock, hdr, hl) < 0)
		return -EPIPE;
	return n ? write_all(w->sock, p, n) : 0;
}

static void ws_close(struct wspty *w, unsigned code, const char *reason)
{
	if (w->closing)
		return;
	w->closing = true;
	uint8_t b[125];
	size_t rl = reason ? strlen(reason) : 0;
	if (rl > sizeof(b) - 2)
		rl = sizeof(b) - 2;
	/* (a reason cut inside a UTF-8 sequence: cut back to its start) */
	while (rl > 0 && rl < (reason ? strlen(reason) : 0) && ((uint8_t)reason[rl] & 0xc0) == 0x80)
		rl--;
	b[0] = (uint8_t)(code >> 8);
	b[1] = (uint8_t)code;
	if (rl)
		memcpy(b + 2, reason, rl);
	ws_send(w, WS_OP_CLOSE, b, 2 + rl);
}

static int agent_send(struct wspty *w, cJSON *o)
{
	char *t = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	int r = t ? bk_send_msg(w->agent, t, strlen(t)) : -ENOMEM;
	free(t);
	return r;
}

static int send_input(struct wspty *w, const uint8_t *p, size_t n)
{
	if (!n)
		return 0;
	char *t = malloc(4 * ((n + 2) / 3) + 1);
	if (!t)
		return -ENOMEM;
	EVP_EncodeBlock((unsigned char *)t, p, (int)n);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", "input");
	cJSON_AddStringToObject(o, "data_base64", t);
	free(t);
	return agent_send(w, o);
}

static int send_resize(struct wspty *w, unsigned rows, unsigned cols)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", "resize");
	cJSON_AddNumberToObject(o, "rows", rows);
	cJSON_AddNumberToObject(o, "cols", cols);
	return agent_send(w, o);
}

/* A whole data message from the client. */
static int client_message(struct wspty *w, uint8_t op, const uint8_t *p, size_t n)
{
	unsigned rows, cols;
	/* RFC 6455 8.1: a text message that is not UTF-8 fails the connection */
	if (op == WS_OP_TEXT && !ws_utf8_valid(p, n)) {
		ws_close(w, 1007, "text frame not UTF-8");
		return -EPROTO;
	}
	if (op == WS_OP_TEXT && ws_resize_msg(p, n, &rows, &cols))
		return send_resize(w, rows, cols);
	return send_input(w, p, n);
}

/* Client bytes: every whole frame in them. < 0: the session ends. */
static int client_bytes(struct wspty *w)
{
	size_t off = 0;
	int r = 0;
	while (r == 0 && off < w->inlen) {
		struct ws_frame f;
		int k = ws_parse(w->in + off, w->inlen - off, &f);
		if (k == 0)
			break;
		if (k < 0) {
			ws_close(w, k == -EMSGSIZE ? 1009 : 1002, k == -EMSGSIZE ? "frame too large" : "protocol error");
			return -EPROTO;
		}
		off += (size_t)k;
		switch (f.opcode) {
		case WS_OP_PING:
			r = ws_send(w, WS_OP_PONG, f.payload, f.len);
			break;
		case WS_OP_PONG:
			break;
		case WS_OP_CLOSE: {
			unsigned code = f.len >= 2 ? (unsigned)f.payload[0] << 8 | f.payload[1] : 1000;
			ws_close(w, code == 1005 || code == 1006 || code == 1015 ? 1000 : code, NULL);
			return -ECONNRESET;
		}
		case WS_OP_CONT:
			if (!w->msgop) {
				ws_close(w, 1002, "continuation without a message");
				return -EPROTO;
			}
			/* fall through */
		default:
			if (f.opcode != WS_OP_CONT && w->msgop) {
				ws_close(w, 1002, "a new message inside a fragmented one");
				return -EPROTO;
			}
			if (f.fin && f.opcode != WS_OP_CONT) {
				r = client_message(w, f.opcode, f.payload, f.len);
				break;
			}
			if (w->msglen + f.len > WS_MAX_PAYLOAD) {
				ws_close(w, 1009, "message too large");
				return -EMSGSIZE;
			}
			uint8_t *nb = realloc(w->msg, w->msglen + f.len + 1);
			if (!nb)
				return -ENOMEM;
			w->msg = nb;
			memcpy(w->msg + w->msglen, f.payload, f.len);
			w->msglen += f.len;
			if (f.opcode != WS_OP_CONT)
				w->msgop = f.opcode;
			if (f.fin) {
				r = client_message(w, w->msgop, w->msg, w->msglen);
				w->msglen = 0;
				w->msgop = 0;
			}
		}
	}
	memmove(w->in, w->in + off, w->inlen - off);
	w->inlen -= off;
	return r;
}

/* One answer of the agent. 1: the last; 0: go on; < 0: broken. */
static int agent_message(struct wspty *w)
{
	char *resp = NULL;
	size_t rl = 0;
	if (bk_recv_msg(w->agent, BK_RESP_MAX, &resp, &rl) != 0) {
		ws_close(w, 1011, "the boxkite agent ended the terminal");
		return -EPIPE;
	}
	cJSON *o = cJSON_ParseWithLength(resp, rl);
	free(resp);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "body");
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
	int r = 0;
	if (!cJSON_IsNumber(st) || !cJSON_IsObject(b)) {
		ws_close(w, 1011, "malformed response from the boxkite agent");
		r = -EBADMSG;
	} else if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "more"))) {
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(b, "detail");
		if (st->valueint == 200)
			ws_close(w, 1000, NULL); /* the shell ended (the reference's close after EOF) */
		else
			ws_close(w, st->valueint == 429 ? 1013 : 1011,
				 cJSON_IsString(d) ? d->valuestring : "the boxkite agent refused the terminal");
		log_info("pty closed", LI("agent_status", st->valueint),
			 LI("exit_code", cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(b, "exit_code"))
						 ? cJSON_GetObjectItemCaseSensitive(b, "exit_code")->valueint
						 : -1));
		r = 1;
	} else if (cJSON_IsString(type) && streq(type->valuestring, "output")) {
		const cJSON *d64 = cJSON_GetObjectItemCaseSensitive(b, "data_base64");
		size_t dl = 0;
		unsigned char *raw = cJSON_IsString(d64) ? bk_b64_decode(d64->valuestring, &dl) : NULL;
		if (raw && dl && ws_send(w, WS_OP_BINARY, raw, dl) < 0)
			r = -EPIPE;
		free(raw);
	}
	cJSON_Delete(o);
	return r;
}

static void *relay(void *arg)
{
	struct wspty *w = arg;
	struct shim *s = w->s;
	w->agent = bk_connect(s->upstream.path);
	if (w->agent < 0) {
		log_warn("agent unavailable", LS("route", "/pty"), LS("error", strerror(-w->agent)));
		ws_close(w, 1011, "boxkite agent unavailable");
		goto out;
	}
	char args[96];
	snprintf(args, sizeof(args), "{\"rows\":%u,\"cols\":%u}", w->rows, w->cols);
	char *frame = NULL;
	size_t n = 0;
	if (shim_build_frame("pty", args, strlen(args), &frame, &n) < 0 || bk_send_msg(w->agent, frame, n) < 0) {
		free(frame);
		ws_close(w, 1011, "boxkite agent unavailable");
		goto out;
	}
	free(frame);
	if (!w->in && !(w->in = malloc(WS_MAX_PAYLOAD + 16)))
		goto out;
	if (w->inlen && client_bytes(w) < 0)
		goto out;
	for (;;) {
		struct pollfd pf[2] = { { .fd = w->agent, .events = POLLIN }, { .fd = w->sock, .events = POLLIN } };
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[0].revents && agent_message(w) != 0)
			break;
		if (pf[1].revents) {
			ssize_t k = recv(w->sock, w->in + w->inlen, WS_MAX_PAYLOAD + 16 - w->inlen, 0);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				break; /* the client is gone: closing the agent connection kills the shell */
			w->inlen += (size_t)k;
			if (client_bytes(w) < 0)
				break;
		}
	}
out:
	if (w->agent >= 0)
		close(w->agent);
	MHD_upgrade_action(w->urh, MHD_UPGRADE_ACTION_CLOSE);
	free(w->in);
	free(w->msg);
	free(w);
	return NULL;
}

void *wspty_prepare(struct shim *s, unsigned rows, unsigned cols)
{
	struct wspty *w = calloc(1, sizeof(*w));
	if (w) {
		w->s = s;
		w->rows = rows;
		w->cols = cols;
		w->sock = w->agent = -1;
	}
	return w;
}

void wspty_discard(void *w)
{
	free(w);
}

void wspty_upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in, size_t extra_in_size,
		    MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	(void)c;
	(void)con_cls;
	struct wspty *w = cls;
	w->urh = urh;
	w->sock = sock;
	w->agent = -1;
	/* bytes the client sent after its handshake: the first frames */
	if (extra_in_size) {
		w->in = malloc(WS_MAX_PAYLOAD + 16);
		if (w->in && extra_in_size <= WS_MAX_PAYLOAD + 16) { /* (MHD's read buffer is smaller) */
			memcpy(w->in, extra_in, extra_in_size);
			w->inlen = extra_in_size;
		}
		/* (handled once the agent connection is up: relay() keeps w->in) */
	}
	if (thread_start_detached(relay, w, SHIM_THREAD_STACK) != 0) {
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		free(w->in);
		free(w);
	}
}
