/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/session/allowlist.h"
#include "agent/isolate/landlock.h"
#include "agent/parse/cmdparse.h"
#include "agent/session/session.h"
#include "lib/log.h"

#include <fcntl.h>

void bk_allowlist_free(struct bk_allowlist *al)
{
	free(al->real);
	free(al->paths);
	memset(al, 0, sizeof(*al));
}

int bk_allowlist_check(struct bk_agent *a, const struct bk_pod *pod, const struct bk_exec_args *ea,
		       const char *path_env, struct bk_allowlist *al, struct bk_refusal *ref)
{
	memset(al, 0, sizeof(*al));
	char **allowed = NULL;
	if (bk_session_allowed(a, pod->pod_uid, &allowed) < 0) {
		ref->code = "isolation_failed";
		bk_fail(&ref->err, -ENOMEM, "",
			"cannot read the session's allowed commands; the command did not run");
		return -1;
	}
	if (!allowed)
		return 0;
	al->active = true;
	size_t n = 0;
	while (allowed[n])
		n++;
	int ret = 0;
	char root[64];
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pod->sandbox.init_pid);
	_cleanup_close_ int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	al->real = calloc(n ? n : 1, PATH_MAX);
	_cleanup_free_ const char **realp = calloc(n + 1, sizeof(*realp));
	al->paths = calloc(n + 1, sizeof(*al->paths));
	if (rootfd < 0 || !al->real || !realp || !al->paths) {
		/* the root is opened again by the landlock step: same words */
		ref->code = "isolation_failed";
		bk_fail(&ref->err, -ENOENT, "landlock",
			"isolation could not be established (layer landlock): %s; the command did not run",
			"cannot open the sandbox container's root");
		ret = -1;
		goto done;
	}
	struct bk_landlock_resolver rv = { .rootfd = rootfd, .cwd = ea->cwd ? ea->cwd : "/workspace",
					   .path_env = path_env };
	for (size_t i = 0; i < n; i++) {
		realp[i] = bk_landlock_resolve(&rv, allowed[i], al->real[i], PATH_MAX) == 0 ? al->real[i] : NULL;
		if (realp[i])
			al->paths[al->n++] = realp[i];
	}
	struct bk_cmd_policy pol = { .names = (const char *const *)allowed, .real = realp, .n = n,
				     .resolve = bk_landlock_resolve, .ud = &rv, .cwd = rv.cwd };
	struct bk_cmd_result cr;
	memset(&cr, 0, sizeof(cr));
	int r = bk_cmd_check(ea->command, &pol, &cr);
	if (r < 0) {
		const char *reason = cr.code ? cr.code : "refused";
		log_warn("exec_refused", LS("pod", pod->pod_name), LS("namespace", pod->pod_namespace),
			 LS("reason", reason));
		ref->code = "command_not_allowed";
		snprintf(ref->reason, sizeof(ref->reason), "%s", reason);
		bk_fail(&ref->err, r == -EPERM ? -EPERM : -EINVAL, "", "command refused by the session's allowlist: %s",
			cr.reason[0] ? cr.reason : strerror(-r));
		ret = -1;
		goto done;
	}
done:
	bk_strv_free(allowed);
	if (ret < 0)
		bk_allowlist_free(al);
	return ret;
}
