/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the file helper's wire (agent/files/wire.c), both directions:
 *  - the records the agent reads from the helper's pipe (bkf_rec_apply):
 *    the helper runs as the sandbox user, so the agent treats what it sends
 *    as untrusted bytes — any stream must end in 0, -EPROTO or -EMSGSIZE,
 *    with the result's strings NUL-terminated and within bounds;
 *  - the request the helper decodes from its memfd (bkf_req_decode): every
 *    accepted request re-encodes (bkf_req_encode) into one that decodes to
 *    the same request.
 * First input byte: direction and operation; then the stream. */
#include "fuzz.h"
#include "agent/files/internal.h"

#include <errno.h>

static void records(const uint8_t *d, size_t n)
{
	enum bk_file_op op = (enum bk_file_op)(d[0] % BK_FILE_OP_N);
	struct bk_file_result r;
	memset(&r, 0, sizeof(r));
	size_t off = 1, bytes = 0;
	bool done = false;
	int e = 0;
	/* records: type (1 byte), length (2 bytes, little endian), payload */
	while (!done && e == 0 && n - off >= 3) {
		uint32_t type = d[off];
		size_t len = (size_t)d[off + 1] | (size_t)d[off + 2] << 8;
		off += 3;
		if (len > n - off)
			len = n - off;
		char *p = malloc(len ? len : 1); /* exactly len bytes: ASan sees an over-read */
		memcpy(p, d + off, len);
		e = bkf_rec_apply(&r, op, type, p, len, &bytes, &done);
		free(p);
		off += len;
	}
	CHECK(e == 0 || e == -EPROTO || e == -EMSGSIZE || e == -ENOMEM, "bkf_rec_apply returned %d", e);
	CHECK(bytes <= RESULT_MAX || e == -EMSGSIZE, "%zu string bytes accepted", bytes);
	CHECK(fuzz_terminated(r.code, sizeof(r.code)) && fuzz_terminated(r.detail, sizeof(r.detail)),
	      "code/detail not terminated");
	for (size_t i = 0; i < r.nentries; i++)
		CHECK(r.entries[i].name && r.entries[i].type < BK_FILE_T_N && r.entries[i].mtime_nsec < 1000000000u,
		      "entry %zu", i);
	CHECK(!r.mime || !strncmp(r.mime, "image/", 6), "image MIME type %s", r.mime);
	for (size_t i = 0; i < r.ngrep; i++)
		CHECK(r.grep[i].path && r.grep[i].text, "grep match %zu", i);
	for (size_t i = 0; i < r.nfiles; i++)
		CHECK(r.files[i].path && r.files[i].mime, "presented file %zu", i);
	bk_file_result_free(&r);
}

static bool same(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

static void request(const uint8_t *d, size_t n)
{
	char *buf = malloc(n ? n : 1);
	memcpy(buf, d, n);
	struct freq q;
	int e = bkf_req_decode(buf, n, &q);
	CHECK(e == 0 || e == -EPROTO || e == -ENOMEM, "bkf_req_decode returned %d", e);
	if (e == 0) {
		CHECK(q.uid != 0 && q.rq.npaths <= BK_FILE_PRESENT_MAX, "uid %u, %zu paths", q.uid, q.rq.npaths);
		char *enc = NULL;
		size_t elen = 0;
		CHECK(bkf_req_encode(&q, &enc, &elen) == 0, "an accepted request does not encode");
		struct freq q2;
		CHECK(bkf_req_decode(enc, elen, &q2) == 0, "the encoding of an accepted request is refused");
		CHECK(q2.rq.op == q.rq.op && q2.uid == q.uid && q2.gid == q.gid && q2.rq.npaths == q.rq.npaths &&
			      streq(q2.rq.vp.abs, q.rq.vp.abs) && same(q2.rq.pattern, q.rq.pattern) &&
			      same(q2.rq.glob, q.rq.glob) && q2.rq.content_len == q.rq.content_len &&
			      q2.rq.max_matches == q.rq.max_matches,
		      "the round trip changed the request");
		free(q2.rq.paths);
		free(enc);
	}
	free(q.rq.paths);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 1 << 20)
		return 0;
	if (data[0] & 0x80)
		request(data + 1, size - 1);
	else
		records(data, size);
	return 0;
}
