/* SPDX-License-Identifier: Apache-2.0 */
/* Base64 of the frames' "data_base64" fields (OpenSSL's decoder). */
#pragma once
#include <stddef.h>

/* The bytes of base64 text s, malloc'd (*len of them; a NUL after them
 * for convenience), or NULL: not base64, or no memory. */
unsigned char *bk_b64_decode(const char *s, size_t *len);
