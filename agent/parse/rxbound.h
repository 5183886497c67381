/* SPDX-License-Identifier: Apache-2.0 */
/* The cost of a /grep pattern (Python's re syntax, compiled by PCRE2 in
 * the file helper), bounded before anything compiles it: a pure parser.
 * A compiler copies a bounded repetition X{m,n} out into max(m,n) copies
 * of X (X+ into two), so nested intervals such as
 * (((a{1,255}){1,255}){1,255}) compile into 255^3 nodes; nested
 * repetitions ((a+)+) backtrack exponentially. Refused, each with its own
 * sentence:
 *   - more than BK_RX_LEN_MAX bytes
 *   - an expanded size (positions after every repetition is copied out)
 *     above BK_RX_SIZE_MAX: this bounds the product of nested bounded
 *     repetitions, and the compiled program's size
 *   - repetitions nested deeper than BK_RX_NEST_MAX ((a+)+ is 2)
 *   - groups nested deeper than BK_RX_GROUP_MAX
 * What passes still runs in the file helper under PCRE2's match, depth
 * and heap limits and the helper's CPU and memory limits (agent/files/):
 * a pattern can be slow without being large (backreferences, counted in
 * backrefs, are bounded that way). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define BK_RX_LEN_MAX 1024
#define BK_RX_SIZE_MAX 2000
#define BK_RX_NEST_MAX 3
#define BK_RX_GROUP_MAX 32

struct bk_rx_cost {
	uint64_t size;  /* positions after expansion (saturates) */
	int nest;       /* deepest nesting of repetitions */
	int groups;     /* deepest nesting of groups */
	int backrefs;
	size_t len;
};

/* The cost of pattern (never fails: an invalid pattern is measured as far
 * as it reads, regcomp refuses it later). */
void bk_rx_measure(const char *pattern, struct bk_rx_cost *c);
/* 0 when pattern is within every bound, else -E2BIG with a sentence in
 * err naming the bound. */
int bk_rx_check(const char *pattern, char *err, size_t errlen);

/* Python's re syntax in PCRE2's words, into out: \Z -> \z, {,n} -> {0,n},
 * \uXXXX and \UXXXXXXXX -> \x{...}; the rest is the same in both.
 * -E2BIG when out (3 x the pattern's length suffices) is too small. */
int bk_rx_translate(const char *py, char *out, size_t outlen);
