/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz bk_state_parse (agent/identity.c): a runc state.json as the
 * container runtime leaves it. The agent reads it from the runtime's state
 * directory; a container can influence labels and annotations. */
#include "fuzz.h"
#include "agent/caller/identity.h"

#include <errno.h>

static void check_str(const char *s, size_t cap, const char *what)
{
	CHECK(fuzz_terminated(s, cap), "%s not NUL-terminated within %zu bytes", what, cap);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 256 * 1024)
		return 0;
	/* exactly size bytes, not NUL-terminated: the parser takes a length */
	char *json = malloc(size ? size : 1);
	if (size)
		memcpy(json, data, size);
	struct bk_container_info ci;
	memset(&ci, 0xa5, sizeof(ci));
	int e = bk_state_parse(json, size, &ci);
	CHECK(e == 0 || e == -EINVAL || e == -ENOENT, "bk_state_parse returned %d", e);
	if (e < 0) {
		static const struct bk_container_info zero;
		CHECK(memcmp(&ci, &zero, sizeof(zero)) == 0, "failed parse (%d) left data in the result", e);
	} else {
		CHECK(!memchr(json, '\0', size), "accepted a text with a NUL byte");
		check_str(ci.id, sizeof(ci.id), "id");
		CHECK(fuzz_id_ok(ci.id) && bk_container_id_valid(ci.id), "bad container id \"%s\"", ci.id);
		CHECK(ci.init_pid > 0 && ci.init_pid <= 4194304, "init_pid %d", (int)ci.init_pid);
		check_str(ci.pod_uid, sizeof(ci.pod_uid), "pod_uid");
		CHECK(fuzz_uid_canonical(ci.pod_uid), "pod_uid \"%s\" not canonical", ci.pod_uid);
		check_str(ci.name, sizeof(ci.name), "name");
		CHECK(ci.name[0], "accepted a container without a name");
		check_str(ci.type, sizeof(ci.type), "type");
		check_str(ci.pod_name, sizeof(ci.pod_name), "pod_name");
		check_str(ci.pod_namespace, sizeof(ci.pod_namespace), "pod_namespace");
		check_str(ci.egress_policy, sizeof(ci.egress_policy), "egress_policy");
		check_str(ci.rootfs, sizeof(ci.rootfs), "rootfs");
		/* the id is a JSON string of the input: its bytes (no escapes
		 * are needed for [A-Za-z0-9_.-]) appear quoted in the text,
		 * unless written with \u escapes */
		char q[BK_ID_MAX + 3];
		snprintf(q, sizeof(q), "\"%s\"", ci.id);
		CHECK(memmem(json, size, q, strlen(q)) || memmem(json, size, "\\u", 2),
		      "id \"%s\" does not appear in the text", ci.id);
	}
	free(json);
	return 0;
}
