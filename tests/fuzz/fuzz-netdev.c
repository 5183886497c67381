/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz bk_netdev_parse (agent/parse/netdev.c) on /proc/PID/net/dev text,
 * the exec receipt's interface list. A success must count what it kept,
 * and every name kept must be a non-empty, terminated interface name that
 * occurs in the text, at the start of a line but for blanks, before a ':'. */
#include "fuzz.h"
#include "agent/parse/netdev.h"

#include <errno.h>

#define MAX 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 64 * 1024)
		return 0;
	/* the parser takes a length: the text is not NUL-terminated here */
	char *text = malloc(size ? size : 1);
	memcpy(text, data, size);
	char names[MAX + 1][IFNAMSIZ];
	memset(names, 0xa5, sizeof(names));
	int n = bk_netdev_parse(text, size, names, MAX);
	CHECK(n == -EINVAL || n >= 0, "bk_netdev_parse returned %d", n);
	for (int i = 0; i < n && i < MAX; i++) {
		CHECK(fuzz_terminated(names[i], IFNAMSIZ), "name %d not NUL-terminated", i);
		size_t l = strlen(names[i]);
		CHECK(l > 0 && !strpbrk(names[i], " \t/:\n"), "name %d \"%s\" is not an interface name", i, names[i]);
		/* "<blanks><name>:" starts a line of the text */
		bool found = false;
		for (const char *p = text; p && p < text + size && !found;) {
			const char *q = p;
			while (q < text + size && *q == ' ')
				q++;
			found = (size_t)(text + size - q) > l && memcmp(q, names[i], l) == 0 && q[l] == ':';
			p = memchr(p, '\n', (size_t)(text + size - p));
			if (p)
				p++;
		}
		CHECK(found, "name %d \"%s\" does not start a line of the text", i, names[i]);
	}
	/* names past max are never written */
	unsigned char fill[IFNAMSIZ];
	memset(fill, 0xa5, sizeof(fill));
	CHECK(memcmp(names[MAX], fill, sizeof(fill)) == 0, "a name past max was written");
	free(text);
	return 0;
}
