/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the grep pattern bound (agent/parse/rxbound.c): every /grep pattern
 * reaches it from the shim's request body, before regcomp. */
#include "fuzz.h"
#include "agent/parse/rxbound.h"

#include <errno.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 8192)
		return 0;
	char *p = malloc(size + 1);
	if (!p)
		return 0;
	memcpy(p, data, size);
	p[size] = '\0';
	struct bk_rx_cost c;
	bk_rx_measure(p, &c);
	CHECK(c.len == strlen(p), "len %zu", c.len);
	CHECK(c.nest >= 0 && c.groups >= 0 && c.backrefs >= 0, "negative counts");
	char err[256];
	int r = bk_rx_check(p, err, sizeof(err));
	CHECK(r == 0 || r == -E2BIG, "bk_rx_check returned %d", r);
	if (r == 0)
		CHECK(c.size <= BK_RX_SIZE_MAX && c.nest <= BK_RX_NEST_MAX && c.groups <= BK_RX_GROUP_MAX &&
			      c.len <= BK_RX_LEN_MAX,
		      "accepted a pattern over a bound");
	/* the translation to PCRE2 fits in 3 x the pattern and never grows
	 * by more than half */
	if (size <= BK_RX_LEN_MAX) {
		char out[BK_RX_LEN_MAX * 3 + 16];
		CHECK(bk_rx_translate(p, out, sizeof(out)) == 0, "translation did not fit");
		CHECK(strlen(out) <= strlen(p) + strlen(p) / 2 + 1, "translation grew from %zu to %zu", strlen(p), strlen(out));
	}
	free(p);
	return 0;
}
