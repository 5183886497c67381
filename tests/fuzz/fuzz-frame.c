/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the wire framing: bk_frame_parse on the raw input, and reassembly
 * (bk_reasm_feed) of records cut from the input two ways:
 *
 *   byte 0: bit 0 selects the mode, bits 1-7 the reassembly max (0..127)
 *   byte 1: raw mode: every record is 16 + (byte1 & 63) bytes (the last one
 *           what is left); structured mode: unused
 *   rest:   raw mode: the records, headers included, as bytes on the wire;
 *           structured mode: a list of [ctl][len][len payload bytes], the
 *           harness writes a correct header and ctl bits corrupt it.
 *
 * The raw mode finds header bugs, the structured one reaches deep
 * reassembly states quickly and checks the result against a model. */
#include "fuzz.h"
#include "lib/proto.h"

#include <errno.h>

#define HDR sizeof(struct bk_frame_hdr)

static bool known_err(int e)
{
	return e == -EPROTO || e == -EPROTONOSUPPORT || e == -EMSGSIZE || e == -EILSEQ || e == -ENOMEM;
}

/* Checks common to every feed result. */
static void check_feed(const struct bk_reasm *r, int e, size_t max)
{
	CHECK(e == 0 || e == 1 || known_err(e), "bk_reasm_feed returned %d", e);
	CHECK(r->len <= max, "reassembled %zu bytes over max %zu", r->len, max);
	if (e == 1) {
		CHECK(r->buf != NULL, "complete message without a buffer");
		CHECK(r->len > 0, "complete message of zero bytes");
		CHECK(r->buf[r->len] == '\0', "message not NUL-terminated at len %zu", r->len);
		CHECK(strlen(r->buf) == r->len, "strlen %zu != len %zu", strlen(r->buf), r->len);
		CHECK(r->done, "done not set after a complete message");
	}
}

static void check_parse_raw(const uint8_t *data, size_t size)
{
	struct bk_frame_hdr h;
	const uint8_t *p = NULL;
	int e = bk_frame_parse(data, size, &h, &p);
	CHECK(e == 0 || e == -EPROTO || e == -EPROTONOSUPPORT, "bk_frame_parse returned %d", e);
	if (e == 0) {
		struct bk_frame_hdr raw;
		CHECK(size >= HDR, "accepted a %zu-byte record", size);
		memcpy(&raw, data, HDR);
		CHECK(raw.magic == BK_FRAME_MAGIC && raw.version == BK_PROTO_VERSION && raw.reserved == 0 &&
			      !(raw.flags & ~BK_FRAME_FLAGS_KNOWN),
		      "accepted a bad header");
		CHECK(h.len == size - HDR && h.len <= BK_CHUNK_MAX, "len %u for a %zu-byte record", h.len, size);
		CHECK(memcmp(&h, &raw, HDR) == 0, "hdr differs from the record");
		CHECK(p == data + HDR, "payload does not follow the header");
	}
}

static void raw_mode(const uint8_t *data, size_t size, size_t max)
{
	size_t reclen = HDR + (data[1] & 63);
	data += 2;
	size -= 2;
	struct bk_reasm r;
	bk_reasm_init(&r, max);
	int e = 0;
	size_t off = 0;
	while (off < size) {
		size_t n = size - off < reclen ? size - off : reclen;
		/* a private copy so ASan sees reads past the record */
		uint8_t *rec = malloc(n ? n : 1);
		memcpy(rec, data + off, n);
		int prev_done = r.done;
		e = bk_reasm_feed(&r, rec, n);
		free(rec);
		check_feed(&r, e, max);
		if (prev_done)
			CHECK(e == -EPROTO, "a record after a complete message gave %d", e);
		off += n;
		if (e < 0)
			break;
	}
	bk_reasm_free(&r);
}

/* ctl bits of one structured record */
#define C_LAST 0x01   /* clear BK_FRAME_MORE */
#define C_MAGIC 0x02  /* corrupt the magic */
#define C_VER 0x04    /* wrong version */
#define C_FLAGS 0x08  /* unknown flag bit */
#define C_RSVD 0x10   /* reserved != 0 */
#define C_LEN 0x20    /* header len disagrees with the record */
#define C_TRUNC 0x40  /* record shorter than a header */
#define C_HUGE 0x80   /* payload of BK_CHUNK_MAX (+1 with C_LEN) 'x' bytes */

static void structured_mode(const uint8_t *data, size_t size, size_t max)
{
	data += 2;
	size -= 2;
	struct bk_reasm r;
	bk_reasm_init(&r, max);
	/* the model: what the message must be */
	char *want = malloc(1);
	size_t wlen = 0;
	bool done = false;
	size_t off = 0;
	while (off + 2 <= size) {
		uint8_t ctl = data[off], plen = data[off + 1];
		off += 2;
		size_t pl = plen <= size - off ? plen : size - off;
		const uint8_t *pay = data + off;
		off += pl;
		uint8_t *huge = NULL;
		if (ctl & C_HUGE) {
			pl = BK_CHUNK_MAX + ((ctl & C_LEN) ? 1 : 0);
			huge = malloc(pl);
			memset(huge, 'x', pl);
			pay = huge;
		}
		struct bk_frame_hdr h = {
			.magic = BK_FRAME_MAGIC,
			.version = BK_PROTO_VERSION,
			.flags = (ctl & C_LAST) ? 0 : BK_FRAME_MORE,
			.len = (uint32_t)pl,
		};
		if (ctl & C_MAGIC)
			h.magic ^= 1u << (plen & 31);
		if (ctl & C_VER)
			h.version = (uint16_t)(2 + plen);
		if (ctl & C_FLAGS)
			h.flags |= (uint16_t)(2u << (plen & 7));
		if (ctl & C_RSVD)
			h.reserved = 1u + plen;
		if ((ctl & C_LEN) && !(ctl & C_HUGE))
			h.len += (plen & 1) ? 1 : (uint32_t)-1;
		size_t n = (ctl & C_TRUNC) ? plen % HDR : HDR + pl;
		uint8_t *full = malloc(HDR + pl);
		memcpy(full, &h, HDR);
		memcpy(full + HDR, pay, pl);
		free(huge);
		/* the record handed over is exactly n bytes, so ASan sees over-reads */
		uint8_t *rec = malloc(n ? n : 1);
		memcpy(rec, full, n);

		/* Acceptable outcomes, computed without the code under test. When
		 * several faults apply, any of their errors is accepted. */
		unsigned ok = 0; /* bits: 1 EPROTO, 2 EPROTONOSUPPORT, 4 EILSEQ, 8 EMSGSIZE, 16 0, 32 1 */
		if (done) {
			ok = 1;
		} else if (ctl & (C_TRUNC | C_MAGIC)) {
			ok = 1 | ((ctl & C_VER) && !(ctl & C_TRUNC) ? 2 : 0);
		} else if ((ctl & (C_VER | C_FLAGS | C_RSVD | C_LEN)) || pl > BK_CHUNK_MAX) {
			ok = ((ctl & C_VER) ? 2 : 0) | ((ctl & (C_FLAGS | C_RSVD | C_LEN)) || pl > BK_CHUNK_MAX ? 1 : 0);
		} else {
			if (memchr(full + HDR, '\0', pl))
				ok |= 4;
			if (pl > max || wlen + pl > max)
				ok |= 8;
			if (!ok) {
				want = realloc(want, wlen + pl + 1);
				memcpy(want + wlen, full + HDR, pl);
				wlen += pl;
				if (!(ctl & C_LAST))
					ok = 16;
				else
					ok = wlen == 0 ? 1 : 32;
			}
		}
		free(full);

		int e = bk_reasm_feed(&r, rec, n);
		free(rec);
		check_feed(&r, e, max);
		unsigned got = e == -EPROTO ? 1 : e == -EPROTONOSUPPORT ? 2 : e == -EILSEQ ? 4 : e == -EMSGSIZE ? 8 : e == 0 ? 16 : e == 1 ? 32 : 64;
		CHECK(got & ok, "record ctl 0x%02x len %zu: got %d, the model allows mask 0x%x", ctl, pl, e, ok);
		if (e >= 0) {
			CHECK(r.len == wlen, "reassembled %zu bytes, the model %zu", r.len, wlen);
			CHECK(wlen == 0 || memcmp(r.buf, want, wlen) == 0, "reassembled bytes differ from the model");
		}
		if (e == 1)
			done = true;
		if (e < 0)
			break;
	}
	free(want);
	bk_reasm_free(&r);
	CHECK(r.buf == NULL && r.len == 0 && r.done == 0, "bk_reasm_free left state behind");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_parse_raw(data, size);
	if (size < 2)
		return 0;
	size_t max = data[0] >> 1;
	if (data[0] & 1)
		structured_mode(data, size, max);
	else
		raw_mode(data, size, max);
	return 0;
}
