/* SPDX-License-Identifier: Apache-2.0 */
#include "text.h"
#include "util.h"

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

char *bk_redact(char *buf, size_t *len, const char *const *secrets, size_t nsecrets, int tail_partial)
{
	for (size_t s = 0; s < nsecrets; s++) {
		const char *sec = secrets[s];
		size_t sl = sec ? strlen(sec) : 0;
		if (sl == 0)
			continue;
		/* count to size the new buffer */
		size_t count = 0;
		for (char *p = memmem(buf, *len, sec, sl); p; p = memmem(p + sl, *len - (size_t)(p + sl - buf), sec, sl))
			count++;
		if (count) {
			size_t nl = *len - count * sl + count * (sizeof(RED) - 1);
			char *nb = malloc(nl + 1);
			if (!nb) {
				free(buf);
				return NULL;
			}
			size_t i = 0, o = 0;
			while (i < *len) {
				if (*len - i >= sl && memcmp(buf + i, sec, sl) == 0) {
					memcpy(nb + o, RED, sizeof(RED) - 1);
					o += sizeof(RED) - 1;
					i += sl;
				} else
					nb[o++] = buf[i++];
			}
			nb[o] = '\0';
			free(buf);
			buf = nb;
			*len = o;
		}
		if (tail_partial) {
			/* the longest proper prefix of the secret that ends the buffer */
			for (size_t k = sl - 1; k > 0; k--) {
				if (k <= *len && memcmp(buf + *len - k, sec, k) == 0) {
					*len -= k;
					char *nb = realloc(buf, *len + sizeof(RED));
					if (!nb) {
						free(buf);
						return NULL;
					}
					buf = nb;
					memcpy(buf + *len, RED, sizeof(RED));
					*len += sizeof(RED) - 1;
					break;
				}
			}
		}
	}
	return buf;
}
