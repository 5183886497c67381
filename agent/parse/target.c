/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/parse/target.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <sys/socket.h>

int bk_parse_target(const char *s, int *family, unsigned char addr[16], uint16_t *port)
{
	char host[64];
	const char *p;
	if (s[0] == '[') {
		const char *e = strchr(s, ']');
		if (!e || e[1] != ':' || (size_t)(e - s - 1) >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, (size_t)(e - s - 1));
		host[e - s - 1] = '\0';
		p = e + 2;
	} else {
		const char *c = strrchr(s, ':');
		if (!c || (size_t)(c - s) >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, (size_t)(c - s));
		host[c - s] = '\0';
		p = c + 1;
	}
	uint64_t v;
	if (parse_u64(p, &v) < 0 || v == 0 || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	memset(addr, 0, 16);
	if (inet_pton(AF_INET, host, addr) == 1)
		*family = AF_INET;
	else if (inet_pton(AF_INET6, host, addr) == 1)
		*family = AF_INET6;
	else
		return -EINVAL;
	return 0;
}
