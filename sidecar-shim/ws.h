/* SPDX-License-Identifier: Apache-2.0 */
/* WebSocket (RFC 6455) frames for the /pty route: the handshake's accept
 * value, the client frame parser (pure; fuzzed: tests/fuzz/fuzz-wsframe.c),
 * server frames. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WS_OP_CONT 0x0
#define WS_OP_TEXT 0x1
#define WS_OP_BINARY 0x2
#define WS_OP_CLOSE 0x8
#define WS_OP_PING 0x9
#define WS_OP_PONG 0xA
#define WS_MAX_PAYLOAD (1u << 20) /* a client frame's payload, at most */

struct ws_frame {
	bool fin;
	uint8_t opcode;
	uint8_t *payload; /* inside the parsed buffer, unmasked in place */
	size_t len;
};

/* One client frame at the start of buf (len bytes). Returns the bytes it
 * takes (> 0) with *f set and its payload unmasked in place, 0 when more
 * bytes are needed, or -EPROTO (reserved bits, an unknown opcode, an
 * unmasked frame, a fragmented or long control frame, a 64-bit length with
 * its top bit) or -EMSGSIZE (payload over WS_MAX_PAYLOAD). */
int ws_parse(uint8_t *buf, size_t len, struct ws_frame *f);

/* A server frame's header for a payload of n bytes (fin, unmasked) into
 * hdr (at least 10 bytes); returns its length. */
size_t ws_header(uint8_t opcode, size_t n, uint8_t *hdr);

/* Sec-WebSocket-Accept for a client's Sec-WebSocket-Key: base64(SHA-1(key
 * + the RFC's GUID)) into out (at least 29 bytes). false for a key that is
 * not 24 base64 characters (16 bytes). */
bool ws_accept_key(const char *key, char *out, size_t outlen);

/* A resize message of ours (docs/api.md, /pty): a text frame whose whole
 * payload is {"type":"resize","rows":R,"cols":C}, R and C from 1 to 4096.
 * Anything else is terminal input, as in the reference sidecar. */
bool ws_resize_msg(const uint8_t *p, size_t n, unsigned *rows, unsigned *cols);

/* Whether p[0..n) is valid UTF-8 (RFC 3629: no overlong form, surrogate
 * or code point past U+10FFFF; NUL is valid), what a text message must be
 * (RFC 6455 8.1: else the connection fails with 1007). */
bool ws_utf8_valid(const uint8_t *p, size_t n);
