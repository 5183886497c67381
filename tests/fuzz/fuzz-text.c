/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the output helpers of agent/text.c, which see whatever a sandboxed
 * command prints:
 *
 *  - bk_utf8_valid (the strict check of /view) against the table below,
 *    and bk_utf8_chars_prefix (its cut) on the sanitized text;
 *  - bk_utf8_sanitize on the whole input: the result must be valid UTF-8
 *    (checked by a validator written here from the Unicode well-formed
 *    byte-sequence table, not by decoding), without NUL, and equal to the
 *    input when the input already was valid and NUL-free.
 *  - bk_redact with secrets cut from the input:
 *        byte 0: bits 0-2 number of secrets (0..7), bit 3 tail_partial,
 *                bit 4: a NULL entry in the secret list
 *        then per secret: a length byte (len % 16, so short secrets that
 *                overlap each other are common) and that many bytes
 *        the rest is the output text.
 *    The result must equal a naive reference: every byte that lies in an
 *    occurrence of some secret (and, with tail_partial, in a proper prefix
 *    of a secret that ends the text) is hidden, and each maximal run of
 *    hidden bytes becomes one "[REDACTED]". Independently of that model: no
 *    secret occurs in the result and, with tail_partial, the result ends
 *    with no proper prefix of a secret — for secrets that share no byte
 *    with "[REDACTED]" (for the others the marker itself can spell them).
 *  - a streamed exec's output, the same input cut in pieces (check_stream):
 *    redacted piece by piece it equals the whole redacted at once; its
 *    UTF-8 cut gives back every byte and never splits a valid sequence.
 */
#include "fuzz.h"
#include "agent/parse/text.h"

static const char RED[] = "[REDACTED]";
#define REDLEN (sizeof(RED) - 1)

/* Unicode 15, table 3-7 (well-formed UTF-8 byte sequences). */
static bool utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned char b = s[i];
		size_t need;
		unsigned char lo = 0x80, hi = 0xbf;
		if (b <= 0x7f) {
			i++;
			continue;
		} else if (b >= 0xc2 && b <= 0xdf) {
			need = 1;
		} else if (b == 0xe0) {
			need = 2;
			lo = 0xa0;
		} else if ((b >= 0xe1 && b <= 0xec) || b == 0xee || b == 0xef) {
			need = 2;
		} else if (b == 0xed) {
			need = 2;
			hi = 0x9f;
		} else if (b == 0xf0) {
			need = 3;
			lo = 0x90;
		} else if (b >= 0xf1 && b <= 0xf3) {
			need = 3;
		} else if (b == 0xf4) {
			need = 3;
			hi = 0x8f;
		} else {
			return false;
		}
		if (n - i - 1 < need)
			return false;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return false;
		for (size_t k = 2; k <= need; k++)
			if (s[i + k] < 0x80 || s[i + k] > 0xbf)
				return false;
		i += need + 1;
	}
	return true;
}

static void check_sanitize(const uint8_t *data, size_t size)
{
	size_t ol = (size_t)-1;
	char *out = bk_utf8_sanitize((const char *)data, size, &ol);
	CHECK(out != NULL, "bk_utf8_sanitize returned NULL for %zu bytes", size);
	CHECK(ol <= size * 3, "grew %zu bytes to %zu", size, ol);
	CHECK(out[ol] == '\0', "result not NUL-terminated");
	CHECK(!memchr(out, '\0', ol), "result has a NUL byte");
	CHECK(utf8_valid((const unsigned char *)out, ol), "result is not valid UTF-8");
	if (!memchr(data, '\0', size) && utf8_valid(data, size))
		CHECK(ol == size && !memcmp(out, data, size), "valid UTF-8 input was changed");
	/* /view's strict check agrees with the table (NUL refused) */
	CHECK(bk_utf8_valid((const char *)data, size) == (!memchr(data, '\0', size) && utf8_valid(data, size)),
	      "bk_utf8_valid disagrees with the table");
	/* /view's cut: a prefix on a character boundary of the sanitized text */
	size_t nch, cut = bk_utf8_chars_prefix(out, ol, size % 97, &nch);
	CHECK(cut <= ol && nch <= size % 97 && (cut == ol || nch == size % 97), "cut %zu of %zu, %zu chars", cut, ol, nch);
	CHECK(utf8_valid((const unsigned char *)out, cut), "the cut splits a character");
	/* a second pass changes nothing */
	size_t ol2;
	char *out2 = bk_utf8_sanitize(out, ol, &ol2);
	CHECK(out2 && ol2 == ol && !memcmp(out, out2, ol), "sanitizing is not idempotent");
	free(out2);
	free(out);
}

/* The reference redaction, written for clarity not speed. */
static char *ref_redact(const char *text, size_t n, char **sec, size_t ns, bool tail, size_t *outlen)
{
	bool *hide = calloc(n + 1, 1);
	for (size_t s = 0; s < ns; s++) {
		size_t sl = sec[s] ? strlen(sec[s]) : 0;
		if (!sl)
			continue;
		for (size_t i = 0; i < n; i++) {
			size_t rem = n - i;
			if (rem >= sl) {
				if (!memcmp(text + i, sec[s], sl))
					memset(hide + i, 1, sl);
			} else if (tail && !memcmp(text + i, sec[s], rem)) {
				memset(hide + i, 1, rem);
			}
		}
	}
	char *out = malloc(n * REDLEN + 1);
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		if (hide[i]) {
			memcpy(out + o, RED, REDLEN);
			o += REDLEN;
			while (i < n && hide[i])
				i++;
		} else {
			out[o++] = text[i++];
		}
	}
	free(hide);
	*outlen = o;
	return out;
}

static bool shares_red_byte(const char *s)
{
	return strpbrk(s, RED) != NULL;
}

static void check_redact(const uint8_t *data, size_t size)
{
	if (size < 1)
		return;
	unsigned ctl = data[0];
	size_t ns = ctl & 7;
	bool tail = ctl & 8;
	bool null_entry = ctl & 16;
	size_t off = 1;
	char *sec[9] = { 0 };
	size_t k = 0;
	for (size_t s = 0; s < ns && off < size; s++) {
		size_t sl = data[off++] % 16;
		if (sl > size - off)
			sl = size - off;
		sec[k++] = fuzz_strdup(data + off, sl); /* C strings: a NUL cuts the secret */
		off += sl;
	}
	if (null_entry)
		sec[k++] = NULL;
	const char *text = (const char *)data + off;
	size_t n = size - off;

	char *buf = malloc(n ? n : 1); /* bk_redact takes ownership */
	if (n)
		memcpy(buf, text, n);
	size_t len = n;
	char *out = bk_redact(buf, &len, (const char *const *)sec, k, tail);
	CHECK(out != NULL, "bk_redact returned NULL");

	size_t rl;
	char *ref = ref_redact(text, n, sec, k, tail, &rl);
	CHECK(len == rl && !memcmp(out, ref, rl), "result (%zu bytes) differs from the reference (%zu bytes):\n"
						   "  got  \"%.*s\"\n  want \"%.*s\"",
	      len, rl, (int)len, out, (int)rl, ref);
	free(ref);

	for (size_t s = 0; s < k; s++) {
		if (!sec[s] || !sec[s][0] || shares_red_byte(sec[s]))
			continue;
		size_t sl = strlen(sec[s]);
		CHECK(!memmem(out, len, sec[s], sl), "secret %zu (\"%s\") still in the result", s, sec[s]);
		if (tail)
			for (size_t p = 1; p < sl && p <= len; p++)
				CHECK(memcmp(out + len - p, sec[s], p), "result ends with %zu bytes of secret %zu", p, s);
	}
	free(out);
	for (size_t s = 0; s < k; s++)
		free(sec[s]);
}

/* The next piece's length (1..16) for the streamed checks. */
static size_t piece_len(uint32_t *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return 1 + (*seed >> 16) % 16;
}

/* A streamed /exec's output (agent/api/op_exec.c): the text arrives in
 * pieces; each time, what bk_redact_safe_cut allows is redacted and sent,
 * the rest kept; at the end the rest goes. The result must be byte for
 * byte the whole text redacted at once. Then the UTF-8 cut of the same
 * pieces: an incomplete sequence kept back (bk_utf8_whole_prefix), the
 * rest in runs (bk_utf8_run): every byte comes back in order, text runs
 * are valid, and a text that is valid UTF-8 as a whole never yields an
 * invalid run however it was split. Input layout as check_redact. */
static void check_stream(const uint8_t *data, size_t size)
{
	if (size < 1)
		return;
	unsigned ctl = data[0];
	size_t ns = ctl & 7;
	bool tail = ctl & 8;
	size_t off = 1;
	char *sec[8] = { 0 };
	size_t k = 0;
	for (size_t s = 0; s < ns && off < size; s++) {
		size_t sl = data[off++] % 16;
		if (sl > size - off)
			sl = size - off;
		sec[k++] = fuzz_strdup(data + off, sl);
		off += sl;
	}
	const char *text = (const char *)data + off;
	size_t n = size - off;
	const char *const *cs = (const char *const *)sec;

	char *whole = malloc(n ? n : 1);
	if (n)
		memcpy(whole, text, n);
	size_t wl = n;
	whole = bk_redact(whole, &wl, cs, k, tail);
	CHECK(whole != NULL, "bk_redact returned NULL");

	char *out = NULL, *carry = malloc(n + 1);
	size_t ol = 0, cl = 0;
	uint32_t seed = ctl;
	for (size_t i = 0; i <= n;) {
		bool last = i == n;
		size_t pl = last ? 0 : piece_len(&seed);
		if (pl > n - i)
			pl = n - i;
		memcpy(carry + cl, text + i, pl);
		cl += pl;
		i += pl;
		size_t c = last ? cl : bk_redact_safe_cut(carry, cl, cs, k);
		CHECK(c <= cl, "cut %zu past the %zu bytes kept", c, cl);
		char *piece = malloc(c ? c : 1);
		memcpy(piece, carry, c);
		memmove(carry, carry + c, cl - c);
		cl -= c;
		size_t rl = c;
		piece = bk_redact(piece, &rl, cs, k, last && tail);
		CHECK(piece != NULL, "bk_redact returned NULL");
		out = realloc(out, ol + rl + 1);
		memcpy(out + ol, piece, rl);
		ol += rl;
		free(piece);
		if (last)
			break;
	}
	CHECK(ol == wl && (!ol || !memcmp(out, whole, ol)),
	      "streamed redaction differs from the whole:\n  got  \"%.*s\"\n  want \"%.*s\"", (int)ol, out, (int)wl,
	      whole);
	free(out);
	free(whole);

	/* the UTF-8 cut of the same text, in pieces */
	bool all_valid = bk_utf8_valid(text, n);
	char *back = malloc(n + 1), *buf = malloc(n + 4);
	size_t bl = 0, ul = 0;
	seed = ctl;
	for (size_t i = 0; i <= n;) {
		bool last = i == n;
		size_t pl = last ? 0 : piece_len(&seed);
		if (pl > n - i)
			pl = n - i;
		memcpy(buf + ul, text + i, pl);
		size_t al = ul + pl;
		i += pl;
		size_t w = last ? al : bk_utf8_whole_prefix(buf, al);
		CHECK(w <= al && al - w <= 3, "kept back %zu bytes of %zu", al - w, al);
		for (size_t j = 0; j < w;) {
			bool v;
			size_t r = bk_utf8_run(buf + j, w - j, &v);
			CHECK(r > 0 && r <= w - j, "run of %zu bytes at %zu of %zu", r, j, w);
			CHECK(!v || bk_utf8_valid(buf + j, r), "a text run that is not valid UTF-8");
			CHECK(v || !all_valid, "an invalid run from a text that is valid UTF-8 as a whole");
			memcpy(back + bl, buf + j, r);
			bl += r;
			j += r;
		}
		memmove(buf, buf + w, al - w);
		ul = al - w;
		if (last)
			break;
	}
	CHECK(bl == n && (!n || !memcmp(back, text, n)), "the runs do not give back the text (%zu of %zu bytes)", bl, n);
	free(back);
	free(buf);
	free(carry);
	for (size_t s = 0; s < k; s++)
		free(sec[s]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 64 * 1024)
		return 0;
	check_sanitize(data, size);
	check_redact(data, size);
	check_stream(data, size);
	return 0;
}
