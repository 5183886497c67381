/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox containers' /proc masks, kept per container instance (see
 * masks.h).
 *
 * The container instance's entry (instances.h: its init's pid and start
 * time, which the request's identification has just checked with the
 * sandbox pidfd, and when the entry goes) keeps its init's
 * /proc/PID/mountinfo open, the inode of the mount namespace that file
 * shows, and the masks parsed from it. An exec takes the kept masks when:
 *   - a poll of the kept file shows no event: the kernel marks the file
 *     (POLLPRI) at every change of that namespace's mount table, a
 *     mount, an unmount or a remount or a propagated one (the file is read
 *     after it is opened, so a change after the open is seen by the next
 *     poll);
 *   - the init's /proc/PID/ns/mnt is still that namespace (an init that
 *     moved to another one has another table);
 *   - and the sandbox pidfd says the init is alive after that stat (the
 *     pid was its own).
 * Else the table is read again into the entry. The kept file pins the
 * container's mount namespace (and its mounts): the entry goes as soon as
 * the init has exited. The table's lock is held while an entry is read or
 * filled: a fill is one table's read, once per container. */
#include "agent/isolate/instances.h"
#include "agent/isolate/masks.h"
#include "agent/parse/mounts.h"
#include "lib/missing.h"
#include "lib/util.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>

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
static bool current(const struct bk_instance *in)
{
	struct pollfd p = { .fd = in->mi_fd, .events = POLLPRI };
	ino_t ino;
	return in->masks_kept && poll(&p, 1, 0) == 0 && mntns_of(in->pid, &ino) == 0 && ino == in->mntns;
}

int bk_proc_masks_get(const struct bk_pod *pod, struct proc_masks *pm, struct bk_error *err)
{
	bk_instances_lock();
	struct bk_instance *in = bk_instance_locked(pod);
	if (!in) {
		bk_instances_unlock();
		return read_now(pod, pm, NULL, NULL, err);
	}
	if (current(in) && alive(pod)) {
		*pm = in->masks;
		bk_instances_unlock();
		return 0;
	}
	if (in->masks_kept) {
		close(in->mi_fd);
		in->masks_kept = false;
	}
	int mi_fd = -1;
	ino_t ino = 0;
	int r = read_now(pod, pm, &mi_fd, &ino, err);
	if (r == 0) {
		in->masks_kept = true;
		in->mi_fd = mi_fd;
		in->mntns = ino;
		in->masks = *pm;
	}
	bk_instances_unlock();
	return r;
}
