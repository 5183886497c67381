/* SPDX-License-Identifier: Apache-2.0 */
#include "lib/b64.h"

#include <openssl/evp.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

unsigned char *bk_b64_decode(const char *s, size_t *len)
{
	size_t n = strlen(s);
	*len = 0;
	if (n > INT_MAX)
		return NULL;
	unsigned char *raw = malloc(n / 4 * 3 + 4);
	if (!raw)
		return NULL;
	int dl = n ? EVP_DecodeBlock(raw, (const unsigned char *)s, (int)n) : 0;
	if (dl < 0) {
		free(raw);
		return NULL;
	}
	/* EVP_DecodeBlock counts the padding's zero bytes too */
	for (size_t p = n; dl > 0 && p > 0 && s[p - 1] == '='; p--)
		dl--;
	raw[dl] = '\0';
	*len = (size_t)dl;
	return raw;
}
