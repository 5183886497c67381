/* SPDX-License-Identifier: Apache-2.0 */
/* A graceful stop: SIGTERM to every process of an exec cgroup (cgroup.h,
 * bk_exec_cg_term). */
#include "agent/isolate/cgroup.h"
#include "lib/util.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* "Name:\tvalue" of a /proc/<pid>/status text: its value, or NULL. */
static const char *status_field(const char *txt, const char *name)
{
	size_t n = strlen(name);
	for (const char *l = txt; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (strncmp(l, name, n) == 0 && l[n] == ':')
			return l + n + 1;
	return NULL;
}

/* Whether bit sig of the hex mask at v is set. */
static bool mask_has(const char *v, int sig)
{
	if (!v)
		return false;
	unsigned long long m = strtoull(v, NULL, 16);
	return sig >= 1 && sig <= 64 && (m >> (sig - 1)) & 1ull;
}

/* The innermost pid of NSpid (1: the init of its pid namespace). */
static long nspid_last(const char *v)
{
	long last = 0;
	if (!v)
		return 0;
	for (char *e; *v && *v != '\n';) {
		long x = strtol(v, &e, 10);
		if (e == v)
			break;
		last = x;
		v = e;
		while (*v == ' ' || *v == '\t')
			v++;
	}
	return last;
}

/* pid is (still) in the v2 cgroup whose path ends the absolute dir: its
 * /proc/<pid>/cgroup "0::" line, read after its pidfd pinned it. */
static bool in_cgroup(pid_t pid, const char *dir)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
	_cleanup_free_ char *txt = NULL;
	if (read_file_at(AT_FDCWD, p, 65536, &txt, NULL) < 0)
		return false;
	for (char *sv = NULL, *l = strtok_r(txt, "\n", &sv); l; l = strtok_r(NULL, "\n", &sv)) {
		if (strncmp(l, "0::", 3) != 0)
			continue;
		const char *rel = l + 3;
		size_t rn = strlen(rel), dn = strlen(dir);
		return rn > 1 && rn <= dn && streq(dir + dn - rn, rel); /* rel starts with '/' */
	}
	return false;
}

int bk_exec_cg_term(const struct bk_exec_cg *cg, bool *init_killed)
{
	*init_killed = false;
	if (!cg->v2[0])
		return -ENOENT;
	char p[4200];
	snprintf(p, sizeof(p), "%s/cgroup.procs", cg->v2);
	_cleanup_free_ char *txt = NULL;
	int r = read_file_at(AT_FDCWD, p, 1 << 20, &txt, NULL);
	if (r < 0)
		return r;
	int n = 0, init_fd = -1;
	for (char *sv = NULL, *t = strtok_r(txt, "\n", &sv); t; t = strtok_r(NULL, "\n", &sv)) {
		uint64_t pid;
		if (parse_u64(t, &pid) < 0 || pid <= 1 || pid > INT32_MAX)
			continue;
		/* pinned first, then checked: a pid reused meanwhile is not signalled */
		_cleanup_close_ int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
		if (fd < 0 || !in_cgroup((pid_t)pid, cg->v2))
			continue;
		char sp[64];
		snprintf(sp, sizeof(sp), "/proc/%d/status", (int)pid);
		_cleanup_free_ char *st = NULL;
		if (read_file_at(AT_FDCWD, sp, 65536, &st, NULL) < 0)
			continue;
		/* the command is the init of the exec's own pid namespace: the
		 * kernel drops a signal it has no handler for, where a process
		 * of the reference's (in the container's namespace) would die of
		 * it. Its default action, then: terminated (after the others had
		 * their TERM: it is the last one signalled) */
		if (nspid_last(status_field(st, "NSpid")) == 1 && !mask_has(status_field(st, "SigCgt"), SIGTERM) &&
		    !mask_has(status_field(st, "SigIgn"), SIGTERM)) {
			if (init_fd < 0) {
				init_fd = fd;
				fd = -1;
			}
			continue;
		}
		if (syscall(SYS_pidfd_send_signal, fd, SIGTERM, NULL, 0) == 0)
			n++;
	}
	if (init_fd >= 0) {
		/* it had no handler when the stop came: it ends by this TERM,
		 * also when it wins the race and exits on its own first (its
		 * child died of the TERM above and the shell ended with 143) */
		*init_killed = true;
		if (syscall(SYS_pidfd_send_signal, init_fd, SIGKILL, NULL, 0) == 0)
			n++;
		close(init_fd);
	}
	return n;
}
