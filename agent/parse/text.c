/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/parse/text.h"
#include "lib/util.h"

static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len;
	uint32_t cp;
	if (c < 0x80)
		return c ? 1 : 0;
	if ((c & 0xe0) == 0xc0) {
		len = 2;
		cp = c & 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		len = 3;
		cp = c & 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		len = 4;
		cp = c & 0x07;
	} else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates, beyond U+10FFFF */
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

char *bk_utf8_sanitize(const char *in, size_t n, size_t *outlen)
{
	/* worst case every byte becomes 3 bytes */
	if (n > (SIZE_MAX - 1) / 3)
		return NULL;
	char *out = malloc(n * 3 + 1);
	if (!out)
		return NULL;
	const unsigned char *s = (const unsigned char *)in;
	size_t i = 0, o = 0;
	while (i < n) {
		size_t l = utf8_seq_len(s + i, n - i);
		if (l == 0) {
			out[o++] = (char)0xef;
			out[o++] = (char)0xbf;
			out[o++] = (char)0xbd;
			i++;
			continue;
		}
		memcpy(out + o, s + i, l);
		o += l;
		i += l;
	}
	out[o] = '\0';
	*outlen = o;
	return out;
}

static const char RED[] = "[REDACTED]";

/* The marker of a run hidden by secret s: "[REDACTED_SECRET:<name>]"
 * (the reference sidecar's scrub), or "[REDACTED]" without names. */
static size_t marker(const char *const *names, size_t s, char *out)
{
	const char *n = names ? names[s] : NULL;
	if (!n)
		return (size_t)snprintf(out, BK_REDACT_MARKER_MAX, "%s", RED);
	return (size_t)snprintf(out, BK_REDACT_MARKER_MAX, "[REDACTED_SECRET:%.*s]", BK_SECRET_NAME_MAX, n);
}

/* Hide every byte that lies in any occurrence of any secret, overlapping
 * occurrences and overlaps between secrets included, then replace each
 * maximal run of hidden bytes with one marker (named after the secret that
 * hid the run's first byte). Replacing secret by secret instead leaked
 * bytes: with "hunter" and "hunter2password" as secrets,
 * "hunter2password" became "[REDACTED]2password", and the tail check no
 * longer saw a secret whose prefix an earlier secret had replaced. */
char *bk_redact_named(char *buf, size_t *len, const char *const *secrets, const char *const *names, size_t nsecrets,
		      int tail_partial)
{
	size_t n = *len;
	if (n == 0)
		return buf;
	/* hide[i]: 0, or 1 + the secret that hid byte i first */
	uint32_t *hide = calloc(n, sizeof(*hide));
	if (!hide) {
		free(buf);
		return NULL;
	}
	bool any = false;
	for (size_t s = 0; s < nsecrets; s++) {
		const char *sec = secrets[s];
		size_t sl = sec ? strlen(sec) : 0;
		if (sl == 0)
			continue;
		size_t upto = 0; /* this secret's occurrences are marked below this offset */
		for (char *p = memmem(buf, n, sec, sl); p; p = memmem(p + 1, n - (size_t)(p + 1 - buf), sec, sl)) {
			size_t at = (size_t)(p - buf);
			for (size_t i = at > upto ? at : upto; i < at + sl; i++)
				if (!hide[i])
					hide[i] = (uint32_t)s + 1;
			upto = at + sl;
			any = true;
			if (upto == n)
				break;
		}
		if (tail_partial) {
			/* the longest proper prefix of the secret that ends the buffer */
			for (size_t k = (sl - 1 < n ? sl - 1 : n); k > 0; k--) {
				if (memcmp(buf + n - k, sec, k) == 0) {
					for (size_t i = n - k; i < n; i++)
						if (!hide[i])
							hide[i] = (uint32_t)s + 1;
					any = true;
					break;
				}
			}
		}
	}
	if (!any) {
		free(hide);
		return buf;
	}
	char mk[BK_REDACT_MARKER_MAX];
	size_t nl = 0;
	for (size_t i = 0; i < n; i++)
		nl += !hide[i] ? 1 : (i == 0 || !hide[i - 1]) ? marker(names, hide[i] - 1, mk) : 0;
	char *nb = malloc(nl + 1);
	if (!nb) {
		free(hide);
		free(buf);
		return NULL;
	}
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (!hide[i])
			nb[o++] = buf[i];
		else if (i == 0 || !hide[i - 1]) {
			size_t ml = marker(names, hide[i] - 1, mk);
			memcpy(nb + o, mk, ml);
			o += ml;
		}
	}
	nb[o] = '\0';
	free(hide);
	free(buf);
	*len = o;
	return nb;
}

char *bk_redact(char *buf, size_t *len, const char *const *secrets, size_t nsecrets, int tail_partial)
{
	return bk_redact_named(buf, len, secrets, NULL, nsecrets, tail_partial);
}

bool bk_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq_len(p + i, n - i);
		if (!l)
			return false;
		i += l;
	}
	return true;
}

size_t bk_utf8_chars_prefix(const char *s, size_t n, size_t chars, size_t *count)
{
	size_t i = 0, c = 0;
	for (; i < n && c < chars; c++) {
		i++;
		while (i < n && ((unsigned char)s[i] & 0xc0) == 0x80)
			i++;
	}
	if (count)
		*count = c;
	return i;
}

/* ---- streamed output ------------------------------------------------------------------------ */

size_t bk_redact_safe_cut(const char *buf, size_t n, const char *const *secrets, size_t nsecrets)
{
	size_t L = 0;
	for (size_t s = 0; s < nsecrets; s++) {
		size_t sl = secrets[s] ? strlen(secrets[s]) : 0;
		if (sl > L)
			L = sl;
	}
	if (L == 0)
		return n;
	/* an occurrence that starts before c lies wholly in buf */
	size_t c = n >= L - 1 ? n - (L - 1) : 0;
	for (bool moved = true; moved && c > 0;) {
		moved = false;
		for (size_t s = 0; s < nsecrets && !moved; s++) {
			size_t sl = secrets[s] ? strlen(secrets[s]) : 0;
			if (sl == 0)
				continue;
			/* an occurrence at p < c that reaches c (or ends there: its
			 * run could join the next one's) stays back whole */
			for (size_t p = c >= sl ? c - sl : 0; p < c; p++)
				if (p + sl <= n && memcmp(buf + p, secrets[s], sl) == 0) {
					c = p;
					moved = true;
					break;
				}
		}
	}
	return c;
}

size_t bk_utf8_whole_prefix(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	for (size_t k = 1; k <= 3 && k <= n; k++) {
		unsigned char c = u[n - k];
		if ((c & 0xc0) == 0x80)
			continue; /* a continuation byte: look further back */
		size_t need = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
		if (need <= k)
			return n; /* ASCII, an invalid byte, or a sequence with all its bytes */
		/* incomplete: could the bytes still to come make it valid? */
		unsigned char t[4];
		memcpy(t, u + n - k, k);
		for (int pad = 0; pad < 2; pad++) {
			for (size_t i = k; i < need; i++)
				t[i] = pad ? 0xbf : 0x80;
			if (utf8_seq_len(t, need) == need)
				return n - k;
		}
		return n;
	}
	return n;
}

size_t bk_utf8_run(const char *s, size_t n, bool *valid)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;
	*valid = n > 0 && utf8_seq_len(u, n) > 0;
	while (i < n) {
		size_t l = utf8_seq_len(u + i, n - i);
		if ((l > 0) != *valid)
			break;
		i += l ? l : 1;
	}
	return i;
}
