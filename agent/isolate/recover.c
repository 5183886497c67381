/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/isolate/recover.h"
#include "agent/isolate/records.h"
#include "agent/parse/records.h"
#include "lib/log.h"
#include "lib/util.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <endian.h>
#include <fcntl.h>
#include <sys/stat.h>

/* Kill what runs in an exec's cgroups and remove them: v2, and v1[0..n_v1). */
static int kill_and_remove(const char *v2, char (*v1)[BK_RECORD_PATH_MAX], int n_v1)
{
	_cleanup_free_ struct bk_exec_cg *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return -ENOMEM;
	bk_exec_cg_init(cg);
	snprintf(cg->v2, sizeof(cg->v2), "%s", v2);
	for (int i = 0; i < n_v1 && cg->n_v1 < BK_CG_V1_MAX; i++) {
		if (!v1[i][0] || strlen(v1[i]) >= sizeof(cg->v1[0].path))
			continue;
		strcpy(cg->v1[cg->n_v1++].path, v1[i]);
	}
	int r = bk_exec_cg_kill(cg, 5000);
	int d = bk_exec_cg_destroy(cg);
	return r < 0 ? r : d;
}

static bool safe_exec_id(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > 32)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* A recorded path must be an exec cgroup inside a hierarchy we know. */
static bool cg_path_ok(const char *path, const char *mount)
{
	if (!path[0])
		return true;
	if (!mount[0] || !startswith(path, mount) || strstr(path, "/../") || strstr(path, "/./"))
		return false;
	const char *base = strrchr(path, '/');
	return base && startswith(base + 1, "boxkite-exec-");
}

/* A recorded v1 path: an exec cgroup in one of this node's v1 hierarchies. */
static bool v1_path_ok(const struct bk_engine *e, const char *path)
{
	for (int i = 0; i < e->mounts.n_v1; i++) {
		size_t l = strlen(e->mounts.v1[i].mount);
		if (startswith(path, e->mounts.v1[i].mount) && path[l] == '/' && cg_path_ok(path, e->mounts.v1[i].mount))
			return true;
	}
	return false;
}

/* Add a path to a list of v1 paths unless it is there already. */
static void v1_add(char (*v1)[BK_RECORD_PATH_MAX], int *n, const char *path)
{
	if (!path[0] || *n >= BK_RECORD_V1_MAX)
		return;
	for (int i = 0; i < *n; i++)
		if (streq(v1[i], path))
			return;
	snprintf(v1[(*n)++], BK_RECORD_PATH_MAX, "%s", path);
}

/* The exec's entry in the policy map the old program itself reads (the old
 * agent's, kept alive by its programs): removed, its sockets are refused
 * as stale from now on. False when the program reads no bk_policy (the
 * recvmsg hooks): another program of the exec must do it. */
static bool old_policy_forget(uint32_t prog_id, uint64_t cgid)
{
	bool found = false;
	int pfd = bpf_prog_get_fd_by_id(prog_id);
	if (pfd < 0)
		return false;
	__u32 ids[32];
	struct bpf_prog_info pi = { 0 };
	__u32 pl = sizeof(pi);
	pi.nr_map_ids = ARRAY_SIZE(ids);
	pi.map_ids = (__u64)(uintptr_t)ids;
	if (bpf_obj_get_info_by_fd(pfd, &pi, &pl) == 0) {
		for (__u32 i = 0; i < pi.nr_map_ids && i < ARRAY_SIZE(ids); i++) {
			int mfd = bpf_map_get_fd_by_id(ids[i]);
			if (mfd < 0)
				continue;
			struct bpf_map_info mi = { 0 };
			__u32 ml = sizeof(mi);
			if (bpf_obj_get_info_by_fd(mfd, &mi, &ml) == 0 && streq(mi.name, "bk_policy")) {
				bpf_map_delete_elem(mfd, &cgid);
				found = true;
			}
			close(mfd);
		}
	}
	close(pfd);
	return found;
}

/* The programs attached to an exec cgroup (path): the old agent's, when
 * it carries any of ids[0..n) (n 0: any program). Their exec's entry is
 * removed from the policy map they read. Returns whether it carries one. */
static bool forget_attached(const char *path, const uint32_t *ids, int n)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	uint64_t cgid;
	if (fd < 0 || bk_cgroup_id(path, &cgid) < 0)
		return false;
	/* the hooks whose programs read bk_policy */
	static const enum bpf_attach_type types[] = { BPF_CGROUP_INET_SOCK_CREATE, BPF_CGROUP_INET4_CONNECT };
	bool ours = false, forgot = false;
	for (size_t t = 0; t < ARRAY_SIZE(types); t++) {
		__u32 got[16], cnt = ARRAY_SIZE(got), flags = 0;
		if (bpf_prog_query(fd, types[t], 0, &flags, got, &cnt) < 0)
			continue;
		for (__u32 k = 0; k < cnt; k++) {
			bool match = n == 0;
			for (int i = 0; i < n && !match; i++)
				match = got[k] == ids[i];
			if (!match)
				continue;
			ours = true;
			if (!forgot)
				forgot = old_policy_forget(got[k], cgid);
		}
	}
	return ours;
}

/* One record (txt[0..len)): kill and remove what it names, if it names
 * exec cgroups of this node's hierarchies. id: its file's exec id, NULL
 * (a table slot) for the record's own. */
static bool recover_record(struct bk_engine *e, const char *id, const char *txt, size_t len)
{
	_cleanup_free_ struct bk_exec_record *rec = calloc(1, sizeof(*rec));
	if (!rec || bk_exec_record_parse(txt, len, rec) < 0)
		return false;
	if (!id)
		id = rec->exec_id;
	if (!safe_exec_id(id))
		return false;
	if (!cg_path_ok(rec->cgroup, e->mounts.v2) || !cg_path_ok(rec->cgroup_pids_v1, e->mounts.pids) ||
	    !cg_path_ok(rec->cgroup_memory_v1, e->mounts.memory))
		return false;
	for (int i = 0; i < rec->n_v1; i++)
		if (!v1_path_ok(e, rec->v1[i]))
			return false;
	/* every v1 cgroup of the exec (older records name pids and memory only) */
	v1_add(rec->v1, &rec->n_v1, rec->cgroup_pids_v1);
	v1_add(rec->v1, &rec->n_v1, rec->cgroup_memory_v1);
	bool live = bk_cgroup_populated(rec->cgroup);
	if (rec->cgroup[0])
		forget_attached(rec->cgroup, NULL, 0);
	int r = kill_and_remove(rec->cgroup, rec->v1, rec->n_v1);
	struct log_field f[6];
	size_t n = 0;
	f[n++] = LS("exec_id", id);
	f[n++] = LS("cgroup", rec->cgroup);
	if (rec->has_pod)
		f[n++] = LS("pod", rec->pod);
	f[n++] = LS("action", live ? "killed" : "removed");
	if (r < 0)
		f[n++] = LS("error", strerror(-r));
	f[n] = LEND;
	log_emit(r < 0 ? LOG_ERROR : LOG_WARN, "recovered_exec", f);
	return true;
}

static int recover_state_files(struct bk_engine *e)
{
	char dir[400];
	snprintf(dir, sizeof(dir), "%s/execs", e->cfg->state_dir);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char id[64];
		size_t l = strlen(de->d_name);
		if (l < 6 || l - 5 >= sizeof(id) || strcmp(de->d_name + l - 5, ".json"))
			continue;
		memcpy(id, de->d_name, l - 5);
		id[l - 5] = '\0';
		char p[700];
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		_cleanup_free_ char *txt = NULL;
		size_t len = 0;
		if (safe_exec_id(id) && read_file_at(AT_FDCWD, p, 65536, &txt, &len) == 0 && recover_record(e, id, txt, len))
			n++;
		else
			log_errorf("recovered_exec", "ignoring malformed state record %s", de->d_name);
		unlink(p);
	}
	closedir(d);
	return n;
}

/* The previous agent's record table (records.h): every slot in use is
 * recovered, then the table goes (bk_records_open makes the next). */
static int recover_table(struct bk_engine *e)
{
	char path[sizeof(e->cfg->state_dir) + 16];
	snprintf(path, sizeof(path), "%s/execs.table", e->cfg->state_dir);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char h[16];
	uint32_t size, slots;
	if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) || memcmp(h, BK_RECORD_TABLE_MAGIC, 8)) {
		log_errorf("recovered_exec", "ignoring %s: not a record table", path);
		unlink(path);
		return 0;
	}
	memcpy(&size, h + 8, 4);
	memcpy(&slots, h + 12, 4);
	size = le32toh(size);
	slots = le32toh(slots);
	_cleanup_free_ char *buf = size >= 16 && size <= (1u << 20) && slots <= (1u << 16) ? malloc(size) : NULL;
	if (!buf) {
		log_errorf("recovered_exec", "ignoring %s: slots of %u bytes, %u of them", path, size, slots);
		unlink(path);
		return 0;
	}
	int n = 0;
	for (uint32_t i = 0; i < slots; i++) {
		ssize_t got = pread(fd, buf, size, (off_t)size * (i + 1));
		if (got < 8)
			break;
		uint32_t st, len;
		memcpy(&st, buf, 4);
		memcpy(&len, buf + 4, 4);
		if (le32toh(st) != BK_RECORD_SLOT_USED)
			continue;
		len = le32toh(len);
		if (len <= (size_t)got - 8 && recover_record(e, NULL, buf + 8, len))
			n++;
		else
			log_errorf("recovered_exec", "ignoring malformed record in slot %u of %s", i, path);
	}
	unlink(path);
	return n;
}

/* Kill what runs in an exec cgroup that has no record (path: its v2
 * cgroup) and remove it, with its v1 twins: the exec was put in each v1
 * hierarchy at the same place below the pod. */
static bool kill_unrecorded(struct bk_engine *e, const char *path)
{
	if (!cg_path_ok(path, e->mounts.v2))
		return false;
	_cleanup_free_ char(*v1)[BK_RECORD_PATH_MAX] = calloc(BK_RECORD_V1_MAX, BK_RECORD_PATH_MAX);
	int n = 0;
	const char *rel = path + strlen(e->mounts.v2);
	for (int i = 0; v1 && i < e->mounts.n_v1; i++) {
		char p[BK_RECORD_PATH_MAX];
		struct stat st;
		if (snprintf(p, sizeof(p), "%s%s", e->mounts.v1[i].mount, rel) < (int)sizeof(p) &&
		    stat(p, &st) == 0 && S_ISDIR(st.st_mode))
			v1_add(v1, &n, p);
	}
	kill_and_remove(path, v1, n);
	log_warnf("recovered_exec", "killed unrecorded exec in %s", path);
	return true;
}

/* Kill what runs in the cgroup of a link (an exec whose record is missing). */
static bool kill_link_cgroup(struct bk_engine *e, int mnt, uint64_t cgid)
{
	struct {
		struct file_handle fh;
		uint64_t id;
	} h = { .fh = { .handle_bytes = 8, .handle_type = 1 }, .id = cgid };
	int cfd = open_by_handle_at(mnt, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cfd < 0)
		return false; /* removed already (by its record) */
	bool killed = false;
	char fdp[64], path[4096];
	snprintf(fdp, sizeof(fdp), "/proc/self/fd/%d", cfd);
	ssize_t pl = readlink(fdp, path, sizeof(path) - 1);
	if (pl > 0) {
		path[pl] = '\0';
		killed = kill_unrecorded(e, path);
	}
	close(cfd);
	return killed;
}

/* Link pins an earlier build left (until December 2026 the agent pinned
 * each exec's links under exec-<id>/): what runs in a cgroup that still
 * carries them is killed (an exec whose record is missing), the exec's
 * policy entry leaves the maps its programs read, and the pins stay while
 * the kernel has not released the cgroup (a socket of the exec may still
 * be held: unpinned, its links would be detached); those it has released
 * are unpinned. An agent started later unpins the rest. */
static void recover_pins(struct bk_engine *e)
{
	DIR *d = opendir(e->cfg->bpffs);
	if (!d)
		return;
	_cleanup_close_ int mnt = open(e->mounts.v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!startswith(de->d_name, "exec-") || !safe_exec_id(de->d_name + 5))
			continue;
		char dir[600];
		snprintf(dir, sizeof(dir), "%s/%s", e->cfg->bpffs, de->d_name);
		DIR *ld = opendir(dir);
		if (!ld)
			continue;
		struct dirent *le;
		bool killed = false, forgot = false;
		int attached = 0;
		while ((le = readdir(ld))) {
			if (le->d_name[0] == '.')
				continue;
			char lp[900];
			snprintf(lp, sizeof(lp), "%s/%s", dir, le->d_name);
			int lfd = bpf_obj_get(lp);
			if (lfd < 0)
				continue;
			struct bpf_link_info info = { 0 };
			__u32 il = sizeof(info);
			if (bpf_obj_get_info_by_fd(lfd, &info, &il) == 0 && info.type == BPF_LINK_TYPE_CGROUP &&
			    info.cgroup.cgroup_id) {
				attached++;
				if (!killed && mnt >= 0)
					killed = kill_link_cgroup(e, mnt, info.cgroup.cgroup_id);
				if (!forgot)
					forgot = old_policy_forget(info.prog_id, info.cgroup.cgroup_id);
			}
			close(lfd);
		}
		closedir(ld);
		if (attached)
			continue;
		ld = opendir(dir);
		while (ld && (le = readdir(ld))) {
			if (le->d_name[0] == '.')
				continue;
			char lp[900];
			snprintf(lp, sizeof(lp), "%s/%s", dir, le->d_name);
			unlink(lp);
		}
		if (ld)
			closedir(ld);
		rmdir(dir);
	}
	closedir(d);
}

/* Exec cgroups that carry the previous agent's programs (ids) and have no
 * record (a record removed by hand: recorded ones are gone by now), found
 * by walking the v2 hierarchy: killed and removed, their policy entries
 * removed from the maps the old programs read. Another agent's execs (its
 * own bpffs directory, other programs) are left alone. */
static void recover_walk(struct bk_engine *e, const char *dir, int depth, const uint32_t *ids, int n)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		char p[BK_RECORD_PATH_MAX];
		if (snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) >= (int)sizeof(p))
			continue;
		if (startswith(de->d_name, "boxkite-exec-") && safe_exec_id(de->d_name + 13)) {
			if (forget_attached(p, ids, n))
				kill_unrecorded(e, p);
		} else if (depth < 16) {
			recover_walk(e, p, depth + 1, ids, n);
		}
	}
	closedir(d);
}

int bk_recover(struct bk_engine *e)
{
	int n = recover_table(e) + recover_state_files(e);
	recover_pins(e);
	uint32_t ids[BK_NPROGS];
	int ni = e->filter ? bk_filter_prev_ids(e->filter, ids) : 0;
	if (ni > 0 && e->mounts.v2[0])
		recover_walk(e, e->mounts.v2, 0, ids, ni);
	return n;
}
