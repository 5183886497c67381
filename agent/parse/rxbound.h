/* SPDX-License-Identifier: Apache-2.0 */
/* The cost of a /grep pattern (a POSIX extended regular expression, as
 * glibc's regcomp reads it), bounded before anything compiles it: a pure
 * parser. glibc expands every bounded repetition X{m,n} into max(m,n)
 * copies of X (X+ into two), so nested intervals such as
 * (((a{1,255}){1,255}){1,255}) compile into 255^3 nodes and gigabytes; its
 * backreference matcher backtracks, exponential in the line. Refused, each
 * with its own sentence:
 *   - more than BK_RX_LEN_MAX bytes
 *   - an expanded size (positions after every repetition is copied out)
 *     above BK_RX_SIZE_MAX: this bounds the product of nested bounded
 *     repetitions, and glibc's memory, which grows with the square of it
 *   - repetitions nested deeper than BK_RX_NEST_MAX ((a+)+ is 2)
 *   - groups nested deeper than BK_RX_GROUP_MAX
 *   - backreferences (\1 .. \9)
 * What passes still runs in the file helper under its CPU and memory
 * limits (agent/files/): a pattern can be slow without being large. */
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
