/* SPDX-License-Identifier: Apache-2.0 */
/* Probe targets of verify and the self-test ("addr:port", "[v6]:port",
 * from the operator's config): a pure parser. */
#pragma once
#include <stdint.h>

/* Fills family (AF_INET/AF_INET6), addr (16 bytes, zero-padded) and port
 * (1..65535). 0, or -EINVAL. */
int bk_parse_target(const char *s, int *family, unsigned char addr[16], uint16_t *port);
