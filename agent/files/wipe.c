/* SPDX-License-Identifier: Apache-2.0 */
/* The session wipe: a new session (/configure) starts with nothing of the
 * previous one left anywhere it could write.
 *
 * What it wipes, read from the sandbox container's own mount table
 * (/proc/PID/mountinfo of its init, before the helper enters it):
 *   - the session roots /workspace, /tmp, /mnt/user-data/outputs and
 *     /dev/shm: emptied whole;
 *   - every other writable mount (not a kernel pseudo filesystem): what
 *     the sandbox user owns there is removed (whatever a session wrote is
 *     its own), anything else is left; a writable regular file mounted on
 *     its own (/dev/termination-log) is truncated when the user can write
 *     it;
 *   - a writable root filesystem cannot be wiped (the session's files
 *     cannot be told from the image's): the wipe fails;
 *   - the container's IPC namespace: every SysV shared memory segment,
 *     semaphore set and message queue and every POSIX message queue
 *     (execs have IPC namespaces of their own, isolate/child.c, so these
 *     only come from processes the container ran itself).
 * The filesystem part runs as the sandbox user, entering each directory
 * by one name with no symlink and no mount crossing (fs.c: bkf_beneath),
 * so it can remove nothing the sandbox user could not remove itself. The
 * walk has no depth limit: it is iterative, holds one directory open, and
 * climbs back by ".." checked against the device and inode it came from
 * (a directory moved meanwhile stops the wipe). Anything that cannot be
 * removed is counted in kept; the agent treats kept > 0 as a failed
 * reset. Bounded in operations (WIPE_OPS_MAX) and time (WIPE_TIMEOUT_MS). */
#include "agent/files/internal.h"
#include "agent/parse/mounts.h"
#include "lib/missing.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/ipc.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/syscall.h>

/* ---- helper side -------------------------------------------------------------------------- */

#define WIPE_MOUNTS_MAX 256

static const char *const session_roots[] = { "/workspace", "/tmp", "/mnt/user-data/outputs", "/dev/shm" };

/* Filesystems no session writes to as files (or wiped otherwise: mqueue). */
static const char *const pseudo_fs[] = { "proc",     "sysfs",      "cgroup",    "cgroup2",   "devpts",
					 "mqueue",   "debugfs",    "tracefs",   "securityfs", "bpf",
					 "fusectl",  "configfs",   "pstore",    "binfmt_misc", "autofs",
					 "nsfs",     "efivarfs",   "selinuxfs", "hugetlbfs", "rpc_pipefs" };

/* What bkf_wipe_prepare found, for bkf_op_wipe (one helper, one wipe). */
static struct {
	bool prepared;
	char *roots[WIPE_MOUNTS_MAX]; /* the writable mounts other than the session roots */
	size_t nroots;
	char *unavailable[WIPE_UNAVAILABLE_MAX];
	size_t nunavailable;
	uint64_t removed, kept; /* IPC objects */
} prep;

static void unavailable(const char *what)
{
	if (prep.nunavailable < WIPE_UNAVAILABLE_MAX)
		prep.unavailable[prep.nunavailable++] = strdup(what);
}

static bool is_session_root(const char *p)
{
	for (size_t i = 0; i < ARRAY_SIZE(session_roots); i++)
		if (streq(p, session_roots[i]))
			return true;
	return false;
}

static bool is_pseudo(const char *fstype)
{
	for (size_t i = 0; i < ARRAY_SIZE(pseudo_fs); i++)
		if (streq(fstype, pseudo_fs[i]))
			return true;
	return false;
}

/* The writable mounts of the container, from its init's mount table. */
static void read_mounts(int pidfd)
{
	char path[64], *fdinfo = NULL, *text = NULL;
	size_t len = 0;
	long pid = -1;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	if (read_file_at(AT_FDCWD, path, 65536, &fdinfo, &len) == 0) {
		const char *p = strstr(fdinfo, "\nPid:");
		if (p)
			pid = strtol(p + 5, NULL, 10);
	}
	free(fdinfo);
	snprintf(path, sizeof(path), "/proc/%ld/mountinfo", pid);
	if (pid <= 0 || read_file_at(AT_FDCWD, path, 4u << 20, &text, &len) < 0 ||
	    syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
		free(text);
		unavailable("the container's mount table");
		return;
	}
	struct bk_mount_line *m = malloc(sizeof(*m));
	size_t pos = 0;
	int k;
	while (m && (k = bk_mountinfo_next(text, &pos, m)) != 0) {
		if (k < 0) {
			unavailable("a line of the container's mount table");
			continue;
		}
		if (m->ro || is_pseudo(m->fstype) || is_session_root(m->point) || startswith(m->point, "/proc/") ||
		    startswith(m->point, "/sys/") || streq(m->point, "/proc") || streq(m->point, "/sys"))
			continue;
		if (streq(m->point, "/")) {
			unavailable("/ (the root filesystem is writable: a session's files there cannot be told from the image's)");
			continue;
		}
		bool dup = false;
		for (size_t i = 0; i < prep.nroots && !dup; i++)
			dup = streq(prep.roots[i], m->point);
		if (dup)
			continue;
		if (prep.nroots == WIPE_MOUNTS_MAX) {
			unavailable("more writable mounts than the wipe takes");
			break;
		}
		prep.roots[prep.nroots++] = strdup(m->point);
	}
	if (!m)
		unavailable("the container's mount table (no memory)");
	free(m);
	free(text);
}

/* Every SysV object of the current IPC namespace: *_STAT walks the kernel's
 * index up to the highest in use. */
static void wipe_sysv(void)
{
	struct shm_info si;
	int max = shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&si);
	for (int i = 0; i <= max; i++) {
		struct shmid_ds ds;
		int id = shmctl(i, SHM_STAT, &ds);
		if (id >= 0)
			shmctl(id, IPC_RMID, NULL) == 0 ? prep.removed++ : prep.kept++;
	}
	struct seminfo sinfo;
	max = semctl(0, 0, SEM_INFO, &sinfo);
	for (int i = 0; i <= max; i++) {
		struct semid_ds ds;
		int id = semctl(i, 0, SEM_STAT, &ds);
		if (id >= 0)
			semctl(id, 0, IPC_RMID) == 0 ? prep.removed++ : prep.kept++;
	}
	struct msginfo mi;
	max = msgctl(0, MSG_INFO, (struct msqid_ds *)(void *)&mi);
	for (int i = 0; i <= max; i++) {
		struct msqid_ds ds;
		int id = msgctl(i, MSG_STAT, &ds);
		if (id >= 0)
			msgctl(id, IPC_RMID, NULL) == 0 ? prep.removed++ : prep.kept++;
	}
}

/* Every POSIX message queue of the current IPC namespace: its queue
 * filesystem, mounted detached (nowhere in any tree). */
static void wipe_mqueues(void)
{
	int fs = fsopen("mqueue", FSOPEN_CLOEXEC);
	if (fs < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		if (fs >= 0)
			close(fs);
		unavailable("the container's POSIX message queues");
		return;
	}
	int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	close(fs);
	struct dent *v = NULL;
	size_t n = 0;
	bool more = false;
	if (mnt < 0 || bkf_read_dir(mnt, 100000, &v, &n, &more) < 0) {
		if (mnt >= 0)
			close(mnt);
		unavailable("the container's POSIX message queues");
		return;
	}
	for (size_t i = 0; i < n; i++)
		unlinkat(mnt, v[i].name, 0) == 0 ? prep.removed++ : prep.kept++;
	if (more)
		prep.kept++;
	bkf_dents_free(v, n);
	close(mnt);
}

void bkf_wipe_prepare(int pidfd)
{
	prep.prepared = true;
	read_mounts(pidfd);
	if (setns(pidfd, CLONE_NEWIPC) < 0) {
		unavailable("the container's IPC namespace");
		return;
	}
	wipe_sysv();
	wipe_mqueues();
}

struct wipe {
	uid_t uid;
	uint64_t removed, kept, ops;
};

/* One directory level of the walk: its entries, the next one, and who it
 * is (to check the climb back). */
struct lvl {
	struct dent *v;
	size_t n, i;
	bool more;
	int pass;
	uint64_t removed0;
	dev_t dev;
	ino_t ino;
};

/* chmod 0700 of the directory dfd/name without following a link:
 * fchmodat2(AT_SYMLINK_NOFOLLOW) from 6.6; before that fchmodat, which
 * follows a link, after a check that name is still our directory. A link
 * swapped in between can only lead to a file the sandbox user owns (the
 * helper runs as that user, without capabilities), whose mode the user
 * could change itself; nothing else is written. */
static void give_back(int dfd, const char *name)
{
	if (syscall(SYS_fchmodat2, dfd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOSYS)
		return;
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		if (fchmodat(dfd, name, 0700, 0) < 0)
			return; /* the unlink below reports it as kept */
}

/* full: everything goes; else only the sandbox user's own entries. */
static bool ours(const struct wipe *w, const struct stat *st, bool full)
{
	return full || st->st_uid == w->uid;
}

static void rm_dir(struct wipe *w, int dfd, const struct dent *d, bool full)
{
	if (!ours(w, &d->st, full))
		return;
	if (unlinkat(dfd, d->name, AT_REMOVEDIR) == 0)
		w->removed++;
	else
		w->kept++;
}

/* Enter the directory fd as a new level (takes fd). */
static bool push(struct lvl **st, size_t *depth, size_t *cap, int fd, uint64_t removed)
{
	struct stat s;
	if (*depth == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct lvl *ns = realloc(*st, nc * sizeof(**st));
		if (!ns)
			return false;
		*st = ns;
		*cap = nc;
	}
	struct lvl *L = &(*st)[*depth];
	memset(L, 0, sizeof(*L));
	if (fstat(fd, &s) < 0 || bkf_read_dir(fd, 10000, &L->v, &L->n, &L->more) < 0)
		return false;
	L->dev = s.st_dev;
	L->ino = s.st_ino;
	L->removed0 = removed;
	(*depth)++;
	return true;
}

/* Empty the tree below rootfd (takes it): iteratively, one directory open
 * at a time, without a depth limit. */
static void wipe_tree(struct wipe *w, int rootfd, bool full)
{
	struct lvl *st = NULL;
	size_t depth = 0, cap = 0;
	int cur = rootfd;
	if (!push(&st, &depth, &cap, cur, w->removed)) {
		w->kept++;
		close(cur);
		free(st);
		return;
	}
	while (depth > 0) {
		struct lvl *L = &st[depth - 1];
		if (w->ops >= WIPE_OPS_MAX) {
			w->kept++; /* what is left is not known: the wipe failed */
			break;
		}
		if (L->i == L->n) {
			/* a large directory is read in batches until nothing moves */
			if (L->more && w->removed != L->removed0 && ++L->pass < 64) {
				bkf_dents_free(L->v, L->n);
				L->v = NULL;
				L->n = L->i = 0;
				L->removed0 = w->removed;
				if (bkf_read_dir(cur, 10000, &L->v, &L->n, &L->more) < 0) {
					w->kept++;
					break;
				}
				continue;
			}
			bkf_dents_free(L->v, L->n);
			L->v = NULL;
			L->n = 0;
			if (depth == 1) {
				depth = 0;
				break;
			}
			/* climb back to the parent it was entered from */
			int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			struct stat us;
			if (up < 0 || fstat(up, &us) < 0 || us.st_dev != st[depth - 2].dev ||
			    us.st_ino != st[depth - 2].ino) {
				if (up >= 0)
					close(up);
				w->kept++; /* moved during the wipe */
				depth--;
				break;
			}
			close(cur);
			cur = up;
			depth--;
			L = &st[depth - 1];
			rm_dir(w, cur, &L->v[L->i], full);
			L->i++;
			continue;
		}
		struct dent *d = &L->v[L->i];
		w->ops++;
		if (!d->stat_ok) {
			L->i++; /* counted by the check of what is left */
			continue;
		}
		if (!S_ISDIR(d->st.st_mode)) {
			if (ours(w, &d->st, full))
				unlinkat(cur, d->name, 0) == 0 ? w->removed++ : w->kept++;
			L->i++;
			continue;
		}
		/* a directory the user made unreadable or unwritable: its
		 * owner (us) may give the permission back (give_back) */
		if (d->st.st_uid == w->uid && (d->st.st_mode & 0700) != 0700)
			give_back(cur, d->name);
		int cfd = bkf_beneath(cur, d->name, O_RDONLY | O_DIRECTORY);
		if (cfd < 0) {
			rm_dir(w, cur, d, full);
			L->i++;
			continue;
		}
		int parent = cur;
		if (!push(&st, &depth, &cap, cfd, w->removed)) {
			close(cfd);
			rm_dir(w, cur, &st[depth - 1].v[st[depth - 1].i], full);
			st[depth - 1].i++;
			continue;
		}
		close(parent);
		cur = cfd;
	}
	for (size_t i = 0; i < depth; i++)
		bkf_dents_free(st[i].v, st[i].n);
	free(st);
	close(cur);
}

/* Entries left in a session root after its wipe. */
static size_t left_in(int fd)
{
	struct dent *v = NULL;
	size_t n = 0;
	bool more = false;
	if (bkf_read_dir(fd, 10000, &v, &n, &more) < 0)
		return 1;
	bkf_dents_free(v, n);
	return n;
}

void bkf_op_wipe(struct hctx *h, struct bk_file_result *r)
{
	struct wipe w = { .uid = h->uid };
	r->unavailable = bkf_calloc(h, WIPE_UNAVAILABLE_MAX, sizeof(*r->unavailable));
	if (!prep.prepared)
		unavailable("the wipe was not prepared");
	for (size_t i = 0; i < ARRAY_SIZE(session_roots); i++) {
		int fd = bkf_open_mount_root(session_roots[i], O_RDONLY | O_DIRECTORY);
		if (fd < 0) {
			/* a pod without a /dev/shm mount has nothing there */
			if (!(fd == -ENOENT && streq(session_roots[i], "/dev/shm")))
				unavailable(session_roots[i]);
			continue;
		}
		uint64_t kept0 = w.kept;
		int keep = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		wipe_tree(&w, fd, true);
		if (keep >= 0) {
			size_t left = left_in(keep);
			if (left && w.kept == kept0)
				w.kept += left;
			close(keep);
		} else {
			w.kept++;
		}
	}
	for (size_t i = 0; i < prep.nroots; i++) {
		int fd = bkf_open_mount_root(prep.roots[i], O_RDONLY | O_NONBLOCK | O_NOCTTY);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			/* gone, or not the user's to see: nothing of it is the session's */
			if (fd >= 0)
				close(fd);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			wipe_tree(&w, fd, false);
		} else {
			/* a file mounted on its own: truncated when the user could
			 * have written it */
			int wfd = S_ISREG(st.st_mode) && st.st_size > 0
					  ? bkf_open_mount_root(prep.roots[i], O_WRONLY | O_NONBLOCK | O_NOCTTY)
					  : -EACCES;
			if (wfd >= 0) {
				ftruncate(wfd, 0) == 0 ? w.removed++ : w.kept++;
				close(wfd);
			} else if (wfd != -EACCES && wfd != -EPERM && wfd != -EROFS) {
				w.kept++;
			}
			close(fd);
		}
	}
	for (size_t i = 0; i < prep.nunavailable; i++)
		r->unavailable[r->nunavailable++] = bkf_strdup(h, prep.unavailable[i] ? prep.unavailable[i] : "?");
	r->removed = w.removed + prep.removed;
	r->kept = w.kept + prep.kept;
}

/* ---- agent side --------------------------------------------------------------------------- */
