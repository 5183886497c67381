/* SPDX-License-Identifier: Apache-2.0 */
/* Exec records on disk (see records.h). */
#include "agent/isolate/records.h"
#include "agent/isolate/step.h"
#include "agent/parse/records.h"
#include "lib/err.h"
#include "lib/util.h"

#include <fcntl.h>
#include <sys/stat.h>

static void record_path(const struct bk_config *c, const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/execs/%s.json", c->state_dir, id);
}

static int record_write(const struct bk_config *c, const struct bk_exec_record *rec)
{
	_cleanup_free_ char *txt = bk_exec_record_format(rec);
	if (!txt)
		return -ENOMEM;
	char p[512];
	record_path(c, rec->exec_id, p, sizeof(p));
	_cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == ENOENT) {
		char d[400];
		snprintf(d, sizeof(d), "%s/execs", c->state_dir);
		mkdir_p(d, 0700);
		fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		return -errno;
	size_t n = strlen(txt);
	if (write(fd, txt, n) != (ssize_t)n)
		return -EIO;
	return 0;
}

int bk_step_record(struct exec_ctx *x)
{
	/* recorded before anything can run in it: a new agent finds it */
	_cleanup_free_ struct bk_exec_record *rec = calloc(1, sizeof(*rec));
	if (!rec)
		return bk_fail(&x->err, -ENOMEM, NULL, "cannot record the exec in the state directory %s: %s",
			       x->cfg->state_dir, strerror(ENOMEM));
	snprintf(rec->exec_id, sizeof(rec->exec_id), "%s", x->res->exec_id);
	snprintf(rec->cgroup, sizeof(rec->cgroup), "%s", x->cg.v2);
	snprintf(rec->cgroup_pids_v1, sizeof(rec->cgroup_pids_v1), "%s", x->cg.pids);
	snprintf(rec->cgroup_memory_v1, sizeof(rec->cgroup_memory_v1), "%s", x->cg.memory);
	/* the exec's own v1 cgroups only: a shared one is the container's */
	for (int i = 0; i < x->cg.n_v1 && rec->n_v1 < BK_RECORD_V1_MAX; i++)
		if (!x->cg.v1[i].shared)
			snprintf(rec->v1[rec->n_v1++], sizeof(rec->v1[0]), "%s", x->cg.v1[i].path);
	snprintf(rec->pod, sizeof(rec->pod), "%s", x->pod->pod_name);
	snprintf(rec->namespace, sizeof(rec->namespace), "%s", x->pod->pod_namespace);
	snprintf(rec->pod_uid, sizeof(rec->pod_uid), "%s", x->pod->pod_uid);
	int r = record_write(x->cfg, rec);
	if (r < 0)
		return bk_fail(&x->err, r, NULL, "cannot record the exec in the state directory %s: %s",
			       x->cfg->state_dir, strerror(-r));
	x->recorded = true;
	return 0;
}

void bk_exec_record_remove(const struct bk_config *c, const char *exec_id)
{
	char p[512];
	record_path(c, exec_id, p, sizeof(p));
	unlink(p);
}
