/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the /pty WebSocket's client frame parser (sidecar-shim/ws.c) the
 * way the relay (wspty.c) feeds it: whatever bytes a client sends, every
 * frame taken lies inside them, control frames are whole and short, no
 * payload is over the limit, a frame split anywhere parses the same, and
 * a resize message is always in range, and the text messages' UTF-8 check
 * (close 1007) agrees with the agent's strict decoder. A frame built from the input
 * (masked as a client masks) parses back to its payload. */
#include "fuzz.h"
#include "ws.h"
#include "agent/parse/text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void check_frames(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(size ? size : 1);
	memcpy(buf, data, size);
	size_t off = 0;
	while (off < size) {
		struct ws_frame f;
		int k = ws_parse(buf + off, size - off, &f);
		CHECK(k == 0 || k == -EPROTO || k == -EMSGSIZE || k > 0, "ws_parse returned %d", k);
		if (k <= 0)
			break;
		CHECK((size_t)k <= size - off, "frame of %d bytes past the %zu left", k, size - off);
		CHECK(f.payload >= buf + off && f.payload + f.len == buf + off + (size_t)k, "payload outside its frame");
		CHECK(f.len <= WS_MAX_PAYLOAD, "payload of %zu bytes", f.len);
		if (f.opcode & 0x8)
			CHECK(f.fin && f.len <= 125, "control frame fin=%d len=%zu", f.fin, f.len);
		/* the same frame given a byte at a time: 0 until whole */
		uint8_t *again = malloc((size_t)k);
		memcpy(again, data + off, (size_t)k);
		for (size_t cut = 0; cut < (size_t)k && cut < 32; cut++) {
			struct ws_frame g;
			CHECK(ws_parse(again, cut, &g) == 0, "a frame cut at %zu parsed", cut);
		}
		struct ws_frame g;
		CHECK(ws_parse(again, (size_t)k, &g) == k && g.len == f.len && memcmp(g.payload, f.payload, f.len) == 0,
		      "the frame did not parse the same twice");
		free(again);
		/* a text message must be UTF-8 (else close 1007): the shim's
		 * check agrees with the agent's strict decoder (NUL aside) */
		if (!memchr(f.payload, 0, f.len))
			CHECK(ws_utf8_valid(f.payload, f.len) == bk_utf8_valid((const char *)f.payload, f.len),
			      "ws_utf8_valid says %d for %zu bytes", ws_utf8_valid(f.payload, f.len), f.len);
		unsigned rows, cols;
		if (ws_resize_msg(f.payload, f.len, &rows, &cols))
			CHECK(rows >= 1 && rows <= 4096 && cols >= 1 && cols <= 4096, "resize %u x %u", rows, cols);
		off += (size_t)k;
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 256 * 1024)
		return 0;
	check_frames(data, size);
	/* round trip: the input as one client frame's payload */
	if (size >= 1) {
		uint8_t op = (uint8_t)(data[0] & 1 ? WS_OP_TEXT : WS_OP_BINARY);
		size_t n = size - 1;
		uint8_t *fr = malloc(n + 14);
		size_t hl = ws_header(op, n, fr);
		fr[1] |= 0x80;
		const uint8_t mask[4] = { 0x12, 0x34, 0x56, data[0] };
		memcpy(fr + hl, mask, 4);
		for (size_t i = 0; i < n; i++)
			fr[hl + 4 + i] = data[1 + i] ^ mask[i & 3];
		struct ws_frame f;
		int k = ws_parse(fr, hl + 4 + n, &f);
		CHECK(k == (int)(hl + 4 + n) && f.fin && f.opcode == op && f.len == n && memcmp(f.payload, data + 1, n) == 0,
		      "a frame of %zu bytes did not round-trip (%d)", n, k);
		free(fr);
	}
	return 0;
}
