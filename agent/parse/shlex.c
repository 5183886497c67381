/* SPDX-License-Identifier: Apache-2.0 */
/* shlex.split, POSIX mode, into a quoted `sh -c` text (shlex.h). */
#include "agent/parse/shlex.h"
#include "lib/err.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void put(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t nc = b->cap ? b->cap : 64;
		while (nc < b->len + n + 1)
			nc *= 2;
		char *np = realloc(b->p, nc);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* one character of a word, inside the single quotes of the output */
static void putc_q(struct sbuf *b, char c)
{
	if (c == '\'')
		put(b, "'\\''", 4);
	else
		put(b, &c, 1);
}

static bool ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

int bk_shlex_sh(const char *in, char **out, char *err, size_t errlen)
{
	struct sbuf b = { 0 };
	int words = 0;
	*out = NULL;
	put(&b, "exec", 4);
	const char *s = in;
	for (;;) {
		while (*s && ws(*s))
			s++;
		if (!*s)
			break;
		put(&b, " '", 2);
		words++;
		while (*s && !ws(*s)) {
			char c = *s++;
			if (c == '\\') {
				if (!*s) {
					free(b.p);
					return bk_fail_buf(err, errlen, -EINVAL, "No escaped character");
				}
				putc_q(&b, *s++);
			} else if (c == '\'') {
				while (*s && *s != '\'')
					putc_q(&b, *s++);
				if (!*s) {
					free(b.p);
					return bk_fail_buf(err, errlen, -EINVAL, "No closing quotation");
				}
				s++;
			} else if (c == '"') {
				while (*s && *s != '"') {
					/* \" and \\ escape; any other backslash stays */
					if (*s == '\\' && !s[1]) {
						free(b.p);
						return bk_fail_buf(err, errlen, -EINVAL, "No escaped character");
					}
					if (*s == '\\' && (s[1] == '"' || s[1] == '\\'))
						s++;
					putc_q(&b, *s++);
				}
				if (!*s) {
					free(b.p);
					return bk_fail_buf(err, errlen, -EINVAL, "No closing quotation");
				}
				s++;
			} else {
				putc_q(&b, c);
			}
		}
		put(&b, "'", 1);
	}
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	if (!words) {
		free(b.p);
		return 0;
	}
	*out = b.p;
	return words;
}
