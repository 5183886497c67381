/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers of the libFuzzer targets in tests/fuzz/. A violated
 * invariant prints what was expected and aborts, which libFuzzer reports as
 * a crash and saves the input under build/fuzz/artifacts/. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                                     \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "INVARIANT VIOLATED at %s:%d: %s\n  ", __FILE__, __LINE__, \
				#cond);                                                      \
			fprintf(stderr, __VA_ARGS__);                                        \
			fputc('\n', stderr);                                                 \
			abort();                                                             \
		}                                                                            \
	} while (0)

/* A NUL-terminated heap copy of the fuzz input (embedded NULs kept; C
 * string functions see the text up to the first one). */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* Whether s (within a buffer of cap bytes) is NUL-terminated. */
static inline bool fuzz_terminated(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }

/* Canonical pod UID: 36 chars, lower-case hex in 8-4-4-4-12 groups. */
static inline bool fuzz_uid_canonical(const char *u)
{
	if (strlen(u) != 36)
		return false;
	for (size_t i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (u[i] != '-')
				return false;
		} else if (!((u[i] >= '0' && u[i] <= '9') || (u[i] >= 'a' && u[i] <= 'f'))) {
			return false;
		}
	}
	return true;
}

/* A container ID as the runtimes write it, checked without the code under
 * test: [A-Za-z0-9_.-]{1,128}, no leading '.'. */
static inline bool fuzz_id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > 128 || id[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '-' || c == '.'))
			return false;
	}
	return true;
}
