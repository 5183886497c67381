/* SPDX-License-Identifier: Apache-2.0 */
/* Byte-level text helpers for untrusted output (fuzzed). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* Copy n bytes into a new NUL-terminated buffer, replacing every invalid
 * UTF-8 sequence (and NUL bytes) with U+FFFD, so the result is safe to put
 * in a JSON string. *outlen gets the new length. NULL on ENOMEM. */
char *bk_utf8_sanitize(const char *in, size_t n, size_t *outlen);

/* Replace every occurrence of each non-empty secret with "[REDACTED]",
 * in place semantics via reallocation: returns a new buffer (the input is
 * freed) or NULL on ENOMEM. If tail_partial is set, a trailing prefix of a
 * secret (output cut at a cap) is redacted too. */
char *bk_redact(char *buf, size_t *len, const char *const *secrets, size_t nsecrets, int tail_partial);

#define BK_SECRET_NAME_MAX 253                      /* a secret's name (a Kubernetes key) */
#define BK_REDACT_MARKER_MAX (BK_SECRET_NAME_MAX + 20) /* "[REDACTED_SECRET:" name "]" NUL */
/* The same; each run hidden by secret i reads "[REDACTED_SECRET:<names[i]>]"
 * (the reference sidecar's scrub), or "[REDACTED]" when names is NULL. */
char *bk_redact_named(char *buf, size_t *len, const char *const *secrets, const char *const *names, size_t nsecrets,
		      int tail_partial);

/* Whether s[0..n) is valid UTF-8 (no overlong forms, surrogates or code
 * points beyond U+10FFFF) without NUL bytes: what Python's strict UTF-8
 * decoding accepts, NUL aside. */
bool bk_utf8_valid(const char *s, size_t n);

/* The bytes of the first `chars` characters of the UTF-8 text s[0..n)
 * (continuation bytes belong to their lead byte); *count, when set, gets
 * the characters counted (fewer than chars when s is shorter). */
size_t bk_utf8_chars_prefix(const char *s, size_t n, size_t chars, size_t *count);

/* Streamed output (a streamed /exec), in pieces as the command writes it.
 * How much of buf[0..n) can be redacted and sent now: every occurrence of a
 * secret that starts before the cut lies wholly before it (so the rest,
 * kept back and completed by the next read, cannot hide a secret split
 * between two reads), and no occurrence ends at the cut (its marker run
 * could join the next one's). Redacting each piece cut here gives the
 * same text as redacting the whole output at once. */
size_t bk_redact_safe_cut(const char *buf, size_t n, const char *const *secrets, size_t nsecrets);
/* n minus the bytes of an incomplete UTF-8 sequence that ends s[0..n) and
 * that more bytes could still make valid (0 to 3 bytes kept back). */
size_t bk_utf8_whole_prefix(const char *s, size_t n);
/* The length of the first run of s[0..n): valid UTF-8 without NUL
 * (*valid true), or bytes that are not (*valid false). 0 only for n 0. */
size_t bk_utf8_run(const char *s, size_t n, bool *valid);
