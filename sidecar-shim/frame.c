/* SPDX-License-Identifier: Apache-2.0 */
#include "frame.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/proto.h"

static bool parses(const char *b, size_t len, bool object)
{
	if (len == 0 || memchr(b, '\0', len))
		return false;
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(b, len, &end, 0);
	bool ok = j && (!object || cJSON_IsObject(j));
	cJSON_Delete(j);
	if (!ok || !end)
		return false;
	for (; end < b + len; end++)
		if (*end != ' ' && *end != '\t' && *end != '\r' && *end != '\n')
			return false;
	return true;
}

bool body_is_json_object(const char *b, size_t len)
{
	return parses(b, len, true);
}

bool body_is_json(const char *b, size_t len)
{
	return parses(b, len, false);
}

int shim_build_frame(const char *op, const char *args, size_t args_len, char **frame, size_t *n)
{
	static const char p1[] = "{\"op\":\"", p2[] = "\",\"args\":", p3[] = "}";
	size_t oplen = strlen(op);
	size_t len = sizeof(p1) - 1 + oplen + sizeof(p2) - 1 + args_len + sizeof(p3) - 1;
	if (len > BK_REQ_MAX)
		return -EMSGSIZE;
	char *f = malloc(len + 1);
	if (!f)
		return -ENOMEM;
	char *p = f;
	p = mempcpy(p, p1, sizeof(p1) - 1);
	p = mempcpy(p, op, oplen);
	p = mempcpy(p, p2, sizeof(p2) - 1);
	p = mempcpy(p, args, args_len);
	p = mempcpy(p, p3, sizeof(p3) - 1);
	*p = '\0';
	*frame = f;
	*n = len;
	return 0;
}
