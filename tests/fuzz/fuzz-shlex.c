/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz /pty-exec's command splitter (agent/parse/shlex.c): whatever the
 * command, the `sh -c` text it makes is "exec" and single-quoted words
 * only — read back as sh reads single quotes, nothing is ever outside
 * them but the separating spaces and the '\'' of a quote inside a word —
 * and the words are as many as it said. */
#include "fuzz.h"
#include "agent/parse/shlex.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 64 * 1024)
		return 0;
	char *in = malloc(size + 1);
	memcpy(in, data, size);
	in[size] = '\0';
	char err[128], *out = NULL;
	int n = bk_shlex_sh(in, &out, err, sizeof(err));
	CHECK(n >= 0 || n == -EINVAL, "bk_shlex_sh returned %d", n);
	if (n == -EINVAL)
		CHECK(!strcmp(err, "No closing quotation") || !strcmp(err, "No escaped character"), "error %s", err);
	if (n > 0) {
		CHECK(!strncmp(out, "exec", 4), "does not start with exec: %.100s", out);
		int words = 0;
		const char *p = out + 4;
		while (*p) {
			CHECK(*p == ' ' && p[1] == '\'', "unquoted text at %zu: %.40s", (size_t)(p - out), p);
			p += 2;
			words++;
			for (;;) {
				const char *q = strchr(p, '\'');
				CHECK(q, "a quote left open");
				p = q + 1;
				if (!strncmp(p, "\\''", 3)) { /* '\'' : a quote inside the word */
					p += 3;
					continue;
				}
				break;
			}
		}
		CHECK(words == n, "%d words said, %d made", n, words);
	} else {
		CHECK(!out, "output without words");
	}
	free(out);
	free(in);
	return 0;
}
