/* SPDX-License-Identifier: Apache-2.0 */
/* WebSocket frames (ws.h). */
#include "ws.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

int ws_parse(uint8_t *buf, size_t len, struct ws_frame *f)
{
	if (len < 2)
		return 0;
	uint8_t b0 = buf[0], b1 = buf[1];
	if (b0 & 0x70)
		return -EPROTO; /* no extension was negotiated */
	uint8_t op = b0 & 0x0f;
	bool fin = b0 & 0x80;
	bool control = op & 0x8;
	if (op != WS_OP_CONT && op != WS_OP_TEXT && op != WS_OP_BINARY && op != WS_OP_CLOSE && op != WS_OP_PING &&
	    op != WS_OP_PONG)
		return -EPROTO;
	if (!(b1 & 0x80))
		return -EPROTO; /* a client's frames are masked */
	uint64_t plen = b1 & 0x7f;
	size_t hl = 2;
	if (plen == 126) {
		if (len < 4)
			return 0;
		plen = (uint64_t)buf[2] << 8 | buf[3];
		hl = 4;
	} else if (plen == 127) {
		if (len < 10)
			return 0;
		plen = 0;
		for (int i = 0; i < 8; i++)
			plen = plen << 8 | buf[2 + i];
		if (plen >> 63)
			return -EPROTO;
		hl = 10;
	}
	if (control && (!fin || plen > 125))
		return -EPROTO;
	if (plen > WS_MAX_PAYLOAD)
		return -EMSGSIZE;
	if (len < hl + 4)
		return 0;
	const uint8_t *mask = buf + hl;
	hl += 4;
	if (len - hl < plen)
		return 0;
	uint8_t *p = buf + hl;
	for (size_t i = 0; i < plen; i++)
		p[i] ^= mask[i & 3];
	f->fin = fin;
	f->opcode = op;
	f->payload = p;
	f->len = (size_t)plen;
	return (int)(hl + plen);
}

size_t ws_header(uint8_t opcode, size_t n, uint8_t *hdr)
{
	hdr[0] = (uint8_t)(0x80 | (opcode & 0x0f));
	if (n < 126) {
		hdr[1] = (uint8_t)n;
		return 2;
	}
	if (n <= 0xffff) {
		hdr[1] = 126;
		hdr[2] = (uint8_t)(n >> 8);
		hdr[3] = (uint8_t)n;
		return 4;
	}
	hdr[1] = 127;
	for (int i = 0; i < 8; i++)
		hdr[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
	return 10;
}

bool ws_accept_key(const char *key, char *out, size_t outlen)
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	if (!key || strlen(key) != 24 || outlen < 29)
		return false;
	unsigned char raw[18];
	if (EVP_DecodeBlock(raw, (const unsigned char *)key, 24) != 18 || key[22] != '=' || key[23] != '=')
		return false;
	char cat[24 + sizeof(guid)];
	memcpy(cat, key, 24);
	memcpy(cat + 24, guid, sizeof(guid));
	unsigned char d[SHA_DIGEST_LENGTH];
	SHA1((const unsigned char *)cat, 24 + sizeof(guid) - 1, d);
	EVP_EncodeBlock((unsigned char *)out, d, SHA_DIGEST_LENGTH);
	return true;
}

bool ws_resize_msg(const uint8_t *p, size_t n, unsigned *rows, unsigned *cols)
{
	/* cheap test first: terminal input rarely starts with '{' */
	if (n < 2 || n > 256 || p[0] != '{' || memchr(p, 0, n))
		return false;
	cJSON *o = cJSON_ParseWithLength((const char *)p, n);
	bool ok = false;
	if (cJSON_IsObject(o) && cJSON_GetArraySize(o) == 3) {
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "rows");
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "cols");
		if (cJSON_IsString(t) && strcmp(t->valuestring, "resize") == 0 && cJSON_IsNumber(r) &&
		    cJSON_IsNumber(c) && r->valuedouble >= 1 && r->valuedouble <= 4096 && c->valuedouble >= 1 &&
		    c->valuedouble <= 4096 && r->valuedouble == (double)(int)r->valuedouble &&
		    c->valuedouble == (double)(int)c->valuedouble) {
			*rows = (unsigned)r->valuedouble;
			*cols = (unsigned)c->valuedouble;
			ok = true;
		}
	}
	cJSON_Delete(o);
	return ok;
}

bool ws_utf8_valid(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t c = p[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t l;
		uint8_t lo = 0x80, hi = 0xbf; /* the second byte's range */
		if (c >= 0xc2 && c <= 0xdf) {
			l = 2;
		} else if (c >= 0xe0 && c <= 0xef) {
			l = 3;
			if (c == 0xe0)
				lo = 0xa0; /* not overlong */
			else if (c == 0xed)
				hi = 0x9f; /* no surrogate */
		} else if (c >= 0xf0 && c <= 0xf4) {
			l = 4;
			if (c == 0xf0)
				lo = 0x90; /* not overlong */
			else if (c == 0xf4)
				hi = 0x8f; /* at most U+10FFFF */
		} else {
			return false; /* a continuation byte, an overlong lead (c0, c1), f5.. */
		}
		if (n - i < l || p[i + 1] < lo || p[i + 1] > hi)
			return false;
		for (size_t k = 2; k < l; k++)
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
		i += l;
	}
	return true;
}
