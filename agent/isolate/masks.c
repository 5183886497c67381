/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox containers' /proc masks, kept per container instance (see
 * masks.h).
 *
 * An entry is a container instance (its init's pid and start time, which
 * the request's identification has just checked with the sandbox pidfd),
 * its init's /proc/PID/mountinfo kept open, the inode of the mount
 * namespace that file shows, and the masks parsed from it. An exec takes
 * the entry's masks when:
 *   - a poll of the kept file shows no event: the kernel marks the file
 *     (POLLPRI) at every change of that namespace's mount table, a
 *     mount, an unmount, a remount or a propagated one (the file is read
 *     after it is opened, so a change after the open is seen by the next
 *     poll);
 *   - the init's /proc/PID/ns/mnt is still that namespace (an init that
 *     moved to another one has another table);
 *   - and the sandbox pidfd says the init is alive after that stat (the
 *     pid was its own).
 * Else the table is read again, into a new entry. The kept file pins the
 * container's mount namespace (and its mounts), so an entry goes as soon
 * as its init has exited (its pidfd readable: the agent's loop sweeps
 * every 100 ms, and a new entry sweeps first), and when the table is full
 * (the least recently used). The lock is held while an entry is read or
 * filled: a fill is one table's read, once per container. */
#include "agent/isolate/masks.h"
#include "agent/parse/mounts.h"
#include "lib/missing.h"
#include "lib/util.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>

struct masks_kept {
	pid_t pid; /* 0: a free entry */
	uint64_t start;
	int pidfd;  /* the init's, to notice its exit */
	int mi_fd;  /* its /proc/PID/mountinfo */
	ino_t mntns;
	uint64_t used;
	struct proc_masks masks;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct masks_kept kept[BK_MASKS_KEPT];
static uint64_t clock_;
static int n_fds;

static void close_locked(struct masks_kept *k)
{
	close(k->mi_fd);
	close(k->pidfd);
	n_fds -= 2;
	memset(k, 0, sizeof(*k));
}

static void sweep_locked(void)
{
	struct pollfd pf[BK_MASKS_KEPT];
	int at[BK_MASKS_KEPT], n = 0;
	for (int i = 0; i < BK_MASKS_KEPT; i++)
		if (kept[i].pid) {
			pf[n] = (struct pollfd){ .fd = kept[i].pidfd, .events = POLLIN };
			at[n++] = i;
		}
	if (n && poll(pf, (nfds_t)n, 0) > 0)
		for (int j = 0; j < n; j++)
			if (pf[j].revents)
				close_locked(&kept[at[j]]);
}

void bk_proc_masks_sweep(void)
{
	pthread_mutex_lock(&lock);
	if (n_fds)
		sweep_locked();
	pthread_mutex_unlock(&lock);
}

int bk_proc_masks_count(void)
{
	pthread_mutex_lock(&lock);
	int n = n_fds;
	pthread_mutex_unlock(&lock);
	return n;
}

/* The masks in a mount table's text: under /proc, a mount of another
 * filesystem masks the path, a read-only proc mount makes it read-only. */
static int parse_masks(const char *text, struct proc_masks *pm, struct bk_error *err)
{
	_cleanup_free_ struct bk_mount_line *m = malloc(sizeof(*m));
	if (!m)
		return bk_fail(err, -ENOMEM, "container", "no memory for the container's /proc masks");
	pm->n = 0;
	size_t pos = 0;
	int k;
	while ((k = bk_mountinfo_next(text, &pos, m)) != 0) {
		if (k < 0 || !startswith(m->point, "/proc/"))
			continue;
		bool proc = streq(m->fstype, "proc");
		if (proc && !m->ro)
			continue;
		if (pm->n == PROC_MASKS_MAX || strlen(m->point) >= sizeof(pm->m[0].path))
			return bk_fail(err, -E2BIG, "container", "the container's /proc has more masks than an exec can take");
		snprintf(pm->m[pm->n].path, sizeof(pm->m[0].path), "%s", m->point);
		pm->m[pm->n++].masked = !proc;
	}
	return 0;
}

static int mntns_of(pid_t pid, ino_t *ino)
{
	char p[48];
	struct stat st;
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)pid);
	if (stat(p, &st) < 0)
		return -errno;
	*ino = st.st_ino;
	return 0;
}

static bool alive(const struct bk_pod *pod)
{
	return syscall(SYS_pidfd_send_signal, pod->sandbox_pidfd, 0, NULL, 0) == 0;
}

static int fail_read(struct bk_error *err, int r)
{
	return bk_fail(err, r, "container", "cannot read the sandbox container's mount table (its /proc masks): %s",
		       strerror(-r));
}

/* The init's table read now: into pm; with mi_fd, also the open file
 * (*mi_fd) and its mount namespace (*ino), for an entry. */
static int read_now(const struct bk_pod *pod, struct proc_masks *pm, int *mi_fd, ino_t *ino, struct bk_error *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pod->sandbox.init_pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail_read(err, -errno);
	_cleanup_free_ char *text = NULL;
	int r = read_fd_all(fd, 1u << 20, &text, NULL);
	if (r == 0 && mi_fd)
		r = mntns_of(pod->sandbox.init_pid, ino);
	/* the pidfd pins the process: alive now, the table was its own */
	if (r == 0 && !alive(pod))
		r = -errno;
	if (r < 0)
		return fail_read(err, r);
	r = parse_masks(text, pm, err);
	if (r == 0 && mi_fd)
		*mi_fd = steal_fd(&fd);
	return r;
}

/* The entry still shows the init's table: no change marked on its file,
 * the init in the same mount namespace. */
static bool current(const struct masks_kept *k)
{
	struct pollfd p = { .fd = k->mi_fd, .events = POLLPRI };
	ino_t ino;
	return poll(&p, 1, 0) == 0 && mntns_of(k->pid, &ino) == 0 && ino == k->mntns;
}

int bk_proc_masks_get(const struct bk_pod *pod, struct proc_masks *pm, struct bk_error *err)
{
	if (pod->sandbox_pidfd < 0 || pod->sandbox.init_pid <= 0)
		return read_now(pod, pm, NULL, NULL, err);
	pthread_mutex_lock(&lock);
	struct masks_kept *k = NULL;
	for (int i = 0; i < BK_MASKS_KEPT && !k; i++)
		if (kept[i].pid == pod->sandbox.init_pid && kept[i].start == pod->sandbox.init_start)
			k = &kept[i];
	if (k && current(k) && alive(pod)) {
		*pm = k->masks;
		k->used = ++clock_;
		pthread_mutex_unlock(&lock);
		return 0;
	}
	if (k)
		close_locked(k);
	/* a new entry: a free one, or the least recently used */
	sweep_locked();
	for (int i = 0; i < BK_MASKS_KEPT && (!k || k->pid); i++)
		if (!kept[i].pid || !k || kept[i].used < k->used)
			k = &kept[i];
	if (k->pid)
		close_locked(k);
	int mi_fd = -1;
	ino_t ino = 0;
	int r = read_now(pod, pm, &mi_fd, &ino, err);
	int pfd = r == 0 ? fcntl(pod->sandbox_pidfd, F_DUPFD_CLOEXEC, 3) : -1;
	if (pfd >= 0) {
		*k = (struct masks_kept){ .pid = pod->sandbox.init_pid, .start = pod->sandbox.init_start, .pidfd = pfd,
					  .mi_fd = mi_fd, .mntns = ino, .used = ++clock_, .masks = *pm };
		n_fds += 2;
	} else if (mi_fd >= 0) {
		close(mi_fd); /* no descriptor for the pidfd: not kept */
	}
	pthread_mutex_unlock(&lock);
	return r;
}
