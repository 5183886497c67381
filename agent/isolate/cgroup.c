/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/isolate/cgroup.h"
#include "agent/isolate/instances.h"
#include "agent/isolate/step.h"
#include "lib/err.h"
#include "lib/util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>


int bk_mountinfo_parse(const char *text, struct bk_cgroup_mounts *m)
{
	memset(m, 0, sizeof(*m));
	const char *p = text;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);
		char line[4096];
		if (ll < sizeof(line)) {
			memcpy(line, p, ll);
			line[ll] = '\0';
			/* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
			char *f[6] = { 0 };
			char *save = NULL, *s = line;
			int n = 0;
			for (char *t = strtok_r(s, " ", &save); t; t = n < 6 ? strtok_r(NULL, " ", &save) : NULL)
				f[n++] = t;
			char *dash = save ? strstr(save, "- ") : NULL;
			if (dash && dash != save && dash[-1] != ' ')
				dash = NULL;
			if (n == 6 && dash) {
				char *rest = dash + 2;
				char *fstype = strtok_r(rest, " ", &save);
				char *src = fstype ? strtok_r(NULL, " ", &save) : NULL;
				char *super = src ? strtok_r(NULL, " ", &save) : NULL;
				const char *mp = f[4];
				if (fstype && streq(fstype, "cgroup2") && !m->v2[0] && strlen(mp) < sizeof(m->v2))
					strcpy(m->v2, mp);
				else if (fstype && streq(fstype, "cgroup") && super) {
					if (m->n_v1 < BK_CG_V1_MAX && strlen(mp) < sizeof(m->v1[0].mount) &&
					    strlen(super) < sizeof(m->v1[0].opts)) {
						strcpy(m->v1[m->n_v1].mount, mp);
						strcpy(m->v1[m->n_v1].opts, super);
						m->n_v1++;
					}
					if (csv_has(super, "pids") && !m->pids[0] && strlen(mp) < sizeof(m->pids))
						strcpy(m->pids, mp);
					if (csv_has(super, "memory") && !m->memory[0] && strlen(mp) < sizeof(m->memory))
						strcpy(m->memory, mp);
				}
			}
		}
		p += ll + (nl ? 1 : 0);
	}
	return m->v2[0] ? 0 : -ENOENT;
}

int bk_cgroup_discover(struct bk_cgroup_mounts *m)
{
	_cleanup_free_ char *text = NULL;
	int r = read_file_at(AT_FDCWD, "/proc/self/mountinfo", 4 << 20, &text, NULL);
	if (r < 0)
		return r;
	r = bk_mountinfo_parse(text, m);
	if (r < 0)
		return r;
	char path[600];
	_cleanup_free_ char *ctrls = NULL;
	snprintf(path, sizeof(path), "%s/cgroup.controllers", m->v2);
	if (read_file_at(AT_FDCWD, path, 4096, &ctrls, NULL) == 0) {
		/* controllers are space separated */
		for (char *sv = NULL, *t = strtok_r(ctrls, " \n", &sv); t; t = strtok_r(NULL, " \n", &sv)) {
			if (streq(t, "pids"))
				m->v2_pids = true;
			if (streq(t, "memory"))
				m->v2_memory = true;
		}
	}
	return 0;
}

void bk_exec_cg_init(struct bk_exec_cg *cg)
{
	memset(cg, 0, sizeof(*cg));
	cg->v2_fd = -1;
	for (int i = 0; i < BK_CG_V1_MAX; i++)
		cg->v1[i].procs_fd = -1;
}

int bk_cg_v1_find(const struct bk_cgroup_mounts *m, const char *ctrls)
{
	if (!ctrls[0])
		return -1;
	for (int i = 0; i < m->n_v1; i++) {
		char c[128];
		if (strlen(ctrls) >= sizeof(c))
			return -1;
		strcpy(c, ctrls);
		bool all = true;
		for (char *sv = NULL, *t = strtok_r(c, ",", &sv); t && all; t = strtok_r(NULL, ",", &sv))
			all = csv_has(m->v1[i].opts, t);
		if (all)
			return i;
	}
	return -1;
}

int bk_cgroup_id(const char *path, uint64_t *id)
{
	struct {
		struct file_handle fh;
		uint64_t id;
	} h = { .fh.handle_bytes = sizeof(uint64_t) };
	int mnt;
	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mnt, 0) < 0)
		return -errno;
	memcpy(id, h.fh.f_handle, sizeof(*id));
	return 0;
}

static int mk(const char *root, const char *rel, const char *name, char *out, size_t outlen)
{
	int w = snprintf(out, outlen, "%s%s%s/%s", root, rel[0] == '/' ? "" : "/", streq(rel, "/") ? "" : rel, name);
	if (w < 0 || (size_t)w >= outlen)
		return -ENAMETOOLONG;
	/* the parent must exist: it is the pod's own cgroup */
	if (mkdir(out, 0755) < 0)
		return -errno;
	return 0;
}

static int knob(const char *dir, const char *file, uint64_t v)
{
	char p[4200], s[32];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
	return write_file_at(AT_FDCWD, p, s);
}

static int open_procs(const char *dir)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* A v1 cpuset child starts with empty cpus/mems, which no process may
 * join: it gets those of the container the exec enters (a subset of the
 * pod's), or the pod's. */
static int cpuset_copy(const char *mount, const struct bk_pod_v1 *pv, const char *dir)
{
	static const char *const files[] = { "cpuset.mems", "cpuset.cpus" };
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		_cleanup_free_ char *val = NULL;
		char src[2200];
		snprintf(src, sizeof(src), "%s%s/%s", mount, pv->container, files[i]);
		if (read_file_at(AT_FDCWD, src, 65536, &val, NULL) < 0 || !val[strspn(val, " \n")]) {
			free(val);
			val = NULL;
			snprintf(src, sizeof(src), "%s%s/%s", mount, pv->pod, files[i]);
			int r = read_file_at(AT_FDCWD, src, 65536, &val, NULL);
			if (r < 0)
				return r;
		}
		char dst[1400];
		snprintf(dst, sizeof(dst), "%s/%s", dir, files[i]);
		int r = write_file_at(AT_FDCWD, dst, val);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- the sandbox containers' own v1 cgroup.procs, kept open ---------------------------
 * On a hybrid host every exec joins the sandbox container's own cgroup in
 * each v1 hierarchy where it has no cap of its own (cpu, cpuacct, cpuset,
 * devices, freezer, blkio, name=systemd): opened by path, each is a walk
 * of a 6-7 components deep cgroupfs path, and its close a release (about
 * 5 us each here, 7-8 an exec). They are kept open instead, in the
 * container instance's entry (instances.h: its init's pid and start time,
 * and when the entry goes), by path, read from that init's /proc/PID/cgroup
 * for this request. While the init lives in the cgroup, the directory
 * cannot be removed (v1 refuses to remove a populated cgroup), so the kept
 * descriptor is the directory the path names now. After a failed spawn of
 * an exec, or a file helper that could not join, that used them, the
 * entry is dropped. An exec holds its container's entry from its cgroup's
 * creation until its spawn is done (bk_exec_cg_setup_done). */

/* The entry of pod's sandbox container, held for an exec; NULL when there
 * is none to be had: the exec then opens its own. */
static struct bk_instance *kept_hold(const struct bk_pod *pod)
{
	bk_instances_lock();
	struct bk_instance *in = bk_instance_locked(pod);
	if (in)
		in->users++;
	bk_instances_unlock();
	return in;
}

/* The kept cgroup.procs of path in in (opened now if it is not yet), or
 * -errno. */
static int kept_procs(struct bk_instance *in, const char *path)
{
	int fd = -ENOSPC;
	bk_instances_lock();
	for (int i = 0; i < in->n_v1; i++)
		if (streq(in->v1[i].path, path)) {
			fd = in->v1[i].fd;
			goto out;
		}
	if (in->n_v1 < BK_CG_V1_MAX && strlen(path) < sizeof(in->v1[0].path)) {
		fd = open_procs(path);
		if (fd >= 0) {
			snprintf(in->v1[in->n_v1].path, sizeof(in->v1[0].path), "%s", path);
			in->v1[in->n_v1++].fd = fd;
		}
	}
out:
	bk_instances_unlock();
	return fd;
}

static void kept_release(struct bk_exec_cg *cg)
{
	struct bk_instance *in = cg->kept;
	if (!in)
		return;
	cg->kept = NULL;
	for (int i = 0; i < cg->n_v1; i++)
		if (cg->v1[i].borrowed) {
			cg->v1[i].procs_fd = -1;
			cg->v1[i].borrowed = false;
		}
	bk_instances_lock();
	if (--in->users == 0 && in->dropped)
		bk_instance_close_locked(in);
	bk_instances_unlock();
}

void bk_exec_cg_kept_drop(const struct bk_exec_cg *cg)
{
	if (!cg->kept)
		return;
	bk_instances_lock();
	cg->kept->dropped = true;
	bk_instances_unlock();
}

/* The exec's cgroup in the v1 hierarchy of pv, with what that hierarchy
 * needs before a process may join. */
static int v1_create(const struct bk_cgroup_mounts *m, const struct bk_pod *pod, const struct bk_pod_v1 *pv,
		     const char *name, uint64_t pids_max, uint64_t memory_max, struct bk_exec_cg *cg,
		     struct bk_error *err)
{
	int h = bk_cg_v1_find(m, pv->ctrls);
	if (h < 0) {
		/* a named hierarchy (name=systemd) holds no controller */
		if (startswith(pv->ctrls, "name="))
			return 0;
		return bk_fail(err, -ENOENT, NULL,
			       "the pod is in the v1 %s hierarchy, which is not mounted here: the exec would escape it",
			       pv->ctrls);
	}
	const char *mount = m->v1[h].mount;
	struct bk_exec_cg_v1 *v = &cg->v1[cg->n_v1];
	bool caps = (csv_has(pv->ctrls, "pids") && !m->v2_pids) || (csv_has(pv->ctrls, "memory") && !m->v2_memory);
	int r;
	if (!caps && pv->container[0]) {
		int w = snprintf(v->path, sizeof(v->path), "%s%s", mount, pv->container);
		if (w < 0 || (size_t)w >= sizeof(v->path)) {
			v->path[0] = '\0';
			return bk_fail(err, -ENAMETOOLONG, NULL, "the v1 %s cgroup path of the sandbox container is too long",
				       pv->ctrls);
		}
		v->shared = true;
		cg->n_v1++;
		snprintf(v->ctrls, sizeof(v->ctrls), "%s", pv->ctrls);
		snprintf(v->join_err, sizeof(v->join_err), "cannot join the sandbox container's v1 %s cgroup", pv->ctrls);
		if (!cg->kept)
			cg->kept = kept_hold(pod);
		if (cg->kept && (r = kept_procs(cg->kept, v->path)) >= 0) {
			v->procs_fd = r;
			v->borrowed = true;
			return 0;
		}
		if ((r = v->procs_fd = open_procs(v->path)) < 0)
			return bk_fail(err, r, NULL, "cannot open %s/cgroup.procs: %s", v->path, strerror(-r));
		return 0;
	}
	r = mk(mount, pv->pod, name, v->path, sizeof(v->path));
	if (r < 0) {
		v->path[0] = '\0';
		return bk_fail(err, r, NULL, "cannot create the v1 %s cgroup under %s%s: %s", pv->ctrls, mount,
			       pv->pod, strerror(-r));
	}
	cg->n_v1++;
	snprintf(v->ctrls, sizeof(v->ctrls), "%s", pv->ctrls);
	snprintf(v->join_err, sizeof(v->join_err), "cannot join the v1 %s cgroup", pv->ctrls);
	if (csv_has(pv->ctrls, "cpuset") && (r = cpuset_copy(mount, pv, v->path)) < 0)
		return bk_fail(err, r, NULL, "cannot give the v1 cpuset cgroup %s its cpus and mems: %s", v->path,
			       strerror(-r));
	if (csv_has(pv->ctrls, "pids") && !m->v2_pids) {
		if ((r = knob(v->path, "pids.max", pids_max)) < 0)
			return bk_fail(err, r, NULL, "cannot configure the v1 pids cgroup %s: %s", v->path,
				       strerror(-r));
		snprintf(cg->pids, sizeof(cg->pids), "%s", v->path);
		cg->pids_v1 = true;
	}
	if (csv_has(pv->ctrls, "memory") && !m->v2_memory) {
		if ((r = knob(v->path, "memory.limit_in_bytes", memory_max)) < 0)
			return bk_fail(err, r, NULL, "cannot configure the v1 memory cgroup %s: %s", v->path,
				       strerror(-r));
		/* memsw exists only with swap accounting; cap it where it does so
		 * the limit cannot be escaped into swap. */
		(void)knob(v->path, "memory.memsw.limit_in_bytes", memory_max);
		snprintf(cg->memory, sizeof(cg->memory), "%s", v->path);
		cg->memory_v1 = true;
	}
	if ((r = v->procs_fd = open_procs(v->path)) < 0)
		return bk_fail(err, r, NULL, "cannot open %s/cgroup.procs: %s", v->path, strerror(-r));
	return 0;
}

int bk_exec_cg_create(const struct bk_cgroup_mounts *m, const struct bk_pod *pod, const char *name,
		      uint64_t pids_max, uint64_t memory_max, struct bk_exec_cg *cg, struct bk_error *err)
{
	const char *pod_v2 = pod->pod_v2;
	int r;
	cg->pids_max = pids_max;
	cg->memory_max = memory_max;
	r = mk(m->v2, pod_v2, name, cg->v2, sizeof(cg->v2));
	if (r < 0) {
		cg->v2[0] = '\0';
		return bk_fail(err, r, NULL, "cannot create the exec cgroup under %s%s: %s", m->v2, pod_v2, strerror(-r));
	}
	cg->v2_fd = open(cg->v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg->v2_fd < 0)
		return bk_fail(err, -errno, NULL, "cannot open %s: %s", cg->v2, strerror(errno));
	r = bk_cgroup_id(cg->v2, &cg->id);
	if (r < 0)
		return bk_fail(err, r, NULL, "cannot read the cgroup id of %s: %s", cg->v2, strerror(-r));
	if (m->v2_pids && (r = knob(cg->v2, "pids.max", pids_max)) < 0)
		return bk_fail(err, r, NULL, "cannot set pids.max in %s: %s", cg->v2, strerror(-r));
	if (m->v2_memory && ((r = knob(cg->v2, "memory.max", memory_max)) < 0 ||
			     (r = knob(cg->v2, "memory.swap.max", 0)) < 0))
		return bk_fail(err, r, NULL, "cannot set memory.max in %s: %s", cg->v2, strerror(-r));
	/* every v1 hierarchy the pod is in */
	for (int i = 0; i < pod->n_v1 && i < BK_CG_V1_MAX; i++)
		if ((r = v1_create(m, pod, &pod->v1[i], name, pids_max, memory_max, cg, err)) < 0)
			return r;
	if (!m->v2_pids && !cg->pids_v1)
		return bk_fail(err, -EOPNOTSUPP, NULL,
			       "no pids controller: neither cgroup v2 pids nor a v1 pids hierarchy for this pod");
	if (!m->v2_memory && !cg->memory_v1)
		return bk_fail(err, -EOPNOTSUPP, NULL,
			       "no memory controller: neither cgroup v2 memory nor a v1 memory hierarchy for this pod");
	return 0;
}

int bk_exec_cg_v1_fds(const struct bk_exec_cg *cg, int *fds, int max)
{
	int n = 0;
	for (int i = 0; i < cg->n_v1 && n < max; i++)
		if (cg->v1[i].procs_fd >= 0)
			fds[n++] = cg->v1[i].procs_fd;
	return n;
}

/* A cap file: a number, or "max" (v1 memory: a huge number) = unlimited. */
static int read_cap(const char *dir, const char *file, uint64_t *out)
{
	char p[4200];
	if (!dir[0])
		return -ENOENT;
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	_cleanup_free_ char *txt = NULL;
	int r = read_file_at(AT_FDCWD, p, 64, &txt, NULL);
	if (r < 0)
		return r;
	txt[strcspn(txt, "\n")] = '\0';
	if (streq(txt, "max")) {
		*out = BK_CG_UNLIMITED;
		return 0;
	}
	if (parse_u64(txt, out) < 0)
		return -EINVAL;
	if (*out >= (1ull << 62))
		*out = BK_CG_UNLIMITED;
	return 0;
}

int bk_exec_cg_read_limits(const struct bk_cgroup_mounts *m, const struct bk_exec_cg *cg, uint64_t *pids,
			   uint64_t *memory)
{
	*pids = *memory = 0;
	int r1 = m->v2_pids ? read_cap(cg->v2, "pids.max", pids) : read_cap(cg->pids, "pids.max", pids);
	int r2 = m->v2_memory ? read_cap(cg->v2, "memory.max", memory)
			      : read_cap(cg->memory, "memory.limit_in_bytes", memory);
	return r1 < 0 ? r1 : r2 < 0 ? r2 : 0;
}

/* The value of "key N" in a flat keyed file, or 0. */
static uint64_t keyed(const char *dir, const char *file, const char *key)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	_cleanup_free_ char *txt = NULL;
	if (read_file_at(AT_FDCWD, p, 65536, &txt, NULL) < 0)
		return 0;
	size_t kl = strlen(key);
	for (char *sv = NULL, *t = strtok_r(txt, "\n", &sv); t; t = strtok_r(NULL, "\n", &sv)) {
		uint64_t v;
		if (strncmp(t, key, kl) == 0 && t[kl] == ' ' && parse_u64(t + kl + 1, &v) == 0)
			return v;
	}
	return 0;
}

bool bk_exec_cg_oom_killed(const struct bk_exec_cg *cg)
{
	if (cg->memory[0])
		return keyed(cg->memory, "memory.oom_control", "oom_kill") > 0;
	return cg->v2[0] && keyed(cg->v2, "memory.events", "oom_kill") > 0;
}

static bool procs_empty(const char *dir)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	char c;
	return read(fd, &c, 1) <= 0;
}

bool bk_cgroup_populated(const char *path)
{
	return !procs_empty(path);
}

static void kill_v1(const char *dir)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	_cleanup_free_ char *txt = NULL;
	if (read_file_at(AT_FDCWD, p, 1 << 20, &txt, NULL) < 0)
		return;
	for (char *sv = NULL, *t = strtok_r(txt, "\n", &sv); t; t = strtok_r(NULL, "\n", &sv)) {
		uint64_t pid;
		if (parse_u64(t, &pid) == 0 && pid > 1)
			kill((pid_t)pid, SIGKILL);
	}
}

static bool v1_empty(const struct bk_exec_cg *cg)
{
	for (int i = 0; i < cg->n_v1; i++)
		if (cg->v1[i].path[0] && !cg->v1[i].shared && !procs_empty(cg->v1[i].path))
			return false;
	return true;
}

int bk_exec_cg_kill(struct bk_exec_cg *cg, int timeout_ms)
{
	if (!cg->v2[0])
		return 0;
	/* Nothing of the exec left (its command ended with no process behind
	 * it): every process of an exec is in its v2 cgroup (put there at its
	 * clone, inherited, and it cannot move), so its own v1 cgroups hold
	 * none either, and there is nothing to kill. A process another one
	 * put there by hand would keep the removal from removing them (logged
	 * exec_cleanup; recover.c removes them at the next start). */
	if (procs_empty(cg->v2))
		return 0;
	char p[4200];
	snprintf(p, sizeof(p), "%s/cgroup.kill", cg->v2);
	int r = write_file_at(AT_FDCWD, p, "1");
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		if (procs_empty(cg->v2) && v1_empty(cg))
			return 0;
		if (r < 0) {
			/* no cgroup.kill (kernel < 5.14): signal each member */
			kill_v1(cg->v2);
		}
		/* what sits in an exec's own v1 cgroup is the exec's (a shared
		 * one is the container's: its exec processes are in the v2
		 * cgroup, killed above) */
		for (int i = 0; i < cg->n_v1; i++)
			if (cg->v1[i].path[0] && !cg->v1[i].shared)
				kill_v1(cg->v1[i].path);
		if (now_ns() > deadline)
			return -ETIMEDOUT;
		struct timespec ts = { 0, 500000 };
		nanosleep(&ts, NULL);
	}
}

static int rmdir_retry(const char *d)
{
	if (!d[0])
		return 0;
	for (int i = 0; i < 200; i++) {
		if (rmdir(d) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			return -errno;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return -EBUSY;
}

void bk_exec_cg_setup_done(struct bk_exec_cg *cg)
{
	kept_release(cg);
	closep(&cg->v2_fd);
	for (int i = 0; i < cg->n_v1; i++)
		closep(&cg->v1[i].procs_fd);
}

/* The exec's own directories: v2 first, then each v1 one that is not the
 * container's (shared). */
static int own_dirs(const struct bk_exec_cg *cg, const char **out)
{
	int n = 0;
	if (cg->v2[0])
		out[n++] = cg->v2;
	for (int i = 0; i < cg->n_v1; i++)
		if (!cg->v1[i].shared && cg->v1[i].path[0])
			out[n++] = cg->v1[i].path;
	return n;
}

/* cg as destroy leaves it: no directory (its fds closed before) */
static void forget(struct bk_exec_cg *cg)
{
	for (int i = 0; i < cg->n_v1; i++) {
		cg->v1[i].shared = false;
		cg->v1[i].path[0] = '\0';
	}
	cg->n_v1 = 0;
	cg->v2[0] = cg->pids[0] = cg->memory[0] = '\0';
}

static int remove_dirs(const char *const *d, int n)
{
	int r = 0, e;
	for (int i = 0; i < n; i++)
		if ((e = rmdir_retry(d[i])) < 0)
			r = e;
	return r;
}

int bk_exec_cg_destroy(struct bk_exec_cg *cg)
{
	const char *d[1 + BK_CG_V1_MAX];
	bk_exec_cg_setup_done(cg);
	int r = remove_dirs(d, own_dirs(cg, d));
	forget(cg);
	return r;
}

struct bk_exec_cg_dirs {
	int n;
	bool v2; /* d[0] is the v2 cgroup */
	char *d[1 + BK_CG_V1_MAX];
	char text[]; /* the paths, one after the other */
};

struct bk_exec_cg_dirs *bk_exec_cg_take_dirs(struct bk_exec_cg *cg)
{
	const char *d[1 + BK_CG_V1_MAX];
	int n = own_dirs(cg, d);
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += strlen(d[i]) + 1;
	struct bk_exec_cg_dirs *t = malloc(sizeof(*t) + len);
	if (!t)
		return NULL;
	char *p = t->text;
	for (int i = 0; i < n; i++) {
		t->d[i] = p;
		p = stpcpy(p, d[i]) + 1;
	}
	t->n = n;
	t->v2 = cg->v2[0] != '\0';
	bk_exec_cg_setup_done(cg);
	forget(cg);
	return t;
}

const char *bk_exec_cg_dirs_v2(const struct bk_exec_cg_dirs *t)
{
	return t->v2 ? t->d[0] : NULL;
}

int bk_exec_cg_dirs_remove(struct bk_exec_cg_dirs *t)
{
	int r = remove_dirs((const char *const *)t->d, t->n);
	free(t);
	return r;
}

int bk_step_cgroup(struct exec_ctx *x)
{
	const struct bk_pod *pod = x->pod;
	struct bk_exec_result *res = x->res;
	char name[64];
	snprintf(name, sizeof(name), "boxkite-exec-%s", res->exec_id);
	int r = bk_exec_cg_create(&x->e->mounts, pod, name, x->cfg->pids_max, x->cfg->memory_max, &x->cg,
				  &x->err);
	if (r < 0)
		return r;
	snprintf(res->cgroup, sizeof(res->cgroup), "%s", x->cg.v2);
	snprintf(res->cgroup_pids, sizeof(res->cgroup_pids), "%s", x->cg.pids);
	snprintf(res->cgroup_memory, sizeof(res->cgroup_memory), "%s", x->cg.memory);
	res->n_cgroups_v1 = 0;
	for (int i = 0; i < x->cg.n_v1; i++) {
		snprintf(res->cgroups_v1[i].ctrls, sizeof(res->cgroups_v1[i].ctrls), "%s", x->cg.v1[i].ctrls);
		snprintf(res->cgroups_v1[i].path, sizeof(res->cgroups_v1[i].path), "%s", x->cg.v1[i].path);
		res->n_cgroups_v1++;
	}
	res->cgroup_id = x->cg.id;
	return 0;
}
