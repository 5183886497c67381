/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/caller/pod.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/missing.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>


void bk_pod_init(struct bk_pod *p)
{
	memset(p, 0, sizeof(*p));
	p->sandbox_pidfd = -1;
}

void bk_pod_release(struct bk_pod *p)
{
	closep(&p->sandbox_pidfd);
}

static int pidfd_open_(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	return fd < 0 ? -errno : fd;
}

static bool pidfd_alive(int pidfd)
{
	return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0;
}

static int pidfd_pid(int pidfd, pid_t *pid)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fdinfo/%d", pidfd);
	_cleanup_free_ char *txt = NULL;
	int r = read_file_at(AT_FDCWD, p, 65536, &txt, NULL);
	if (r < 0)
		return r;
	char *l = strstr(txt, "\nPid:");
	if (!l)
		return -ENOTSUP;
	long v = strtol(l + 5, NULL, 10);
	if (v <= 0)
		return -ESRCH; /* the peer is gone (-1) or in another pid ns (0) */
	*pid = (pid_t)v;
	return 0;
}

/* A sock_diag socket in the network namespace of the process of pidfd
 * (-1: our own): the thread enters it for the socket() call only. */
static int diag_socket(int pidfd)
{
	if (pidfd < 0) {
		int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
		return nl < 0 ? -errno : nl;
	}
	_cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return -errno;
	if (setns(pidfd, CLONE_NEWNET) < 0)
		return -errno;
	int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	int e = errno;
	if (setns(self, CLONE_NEWNET) < 0)
		abort(); /* our own namespace: cannot fail; never serve from another one */
	return nl < 0 ? -e : nl;
}

int bk_unix_peer_ino(int fd, int netns_pidfd, uint64_t *peer)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	_cleanup_close_ int nl = diag_socket(netns_pidfd);
	if (nl < 0)
		return nl;
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req r;
	} req = {
		.nlh = { .nlmsg_len = sizeof(req), .nlmsg_type = SOCK_DIAG_BY_FAMILY, .nlmsg_flags = NLM_F_REQUEST },
		.r = { .sdiag_family = AF_UNIX, .udiag_states = ~0u, .udiag_ino = (uint32_t)st.st_ino,
		       .udiag_show = UDIAG_SHOW_PEER, .udiag_cookie = { INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE } },
	};
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	if (sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	union {
		char b[8192];
		struct nlmsghdr align;
	} buf;
	ssize_t n = recv(nl, buf.b, sizeof(buf.b), 0);
	if (n < 0)
		return -errno;
	for (struct nlmsghdr *h = &buf.align; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(h);
			return e->error ? e->error : -EPROTO;
		}
		if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg)))
			continue;
		const struct unix_diag_msg *m = NLMSG_DATA(h);
		if (m->udiag_ino != (uint32_t)st.st_ino)
			continue;
		int alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
		for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen))
			if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
				*peer = *(const uint32_t *)RTA_DATA(a);
				return 0;
			}
		return -ENOTCONN;
	}
	return -ENOENT;
}

/* Whether process pid holds the socket with inode ino among its fds. */
static int holds_socket(pid_t pid, uint64_t ino)
{
	char p[64], want[48];
	snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
	DIR *d = opendir(p);
	if (!d)
		return -errno;
	int found = 0;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		char t[64];
		ssize_t l = readlinkat(dirfd(d), de->d_name, t, sizeof(t) - 1);
		if (l <= 0)
			continue;
		t[l] = '\0';
		found = streq(t, want);
	}
	closedir(d);
	return found;
}

const char *const bk_peer_via_names[] = { "so_peerpidfd", "so_peercred" };

int bk_peer_pidfd(int connfd, bool use_peerpidfd, pid_t *pid, int *pidfd, enum bk_peer_via *via)
{
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(connfd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
		return -errno;
	if (cred.pid <= 0)
		return -ESRCH; /* peer outside our pid namespace: we need hostPID */
	int fd = -1;
	socklen_t fl = sizeof(fd);
	if (use_peerpidfd && getsockopt(connfd, SOL_SOCKET, SO_PEERPIDFD, &fd, &fl) == 0 && fd >= 0) {
		pid_t p;
		int r = pidfd_pid(fd, &p);
		if (r < 0 || p != cred.pid) {
			close(fd);
			return r < 0 ? r : -ESRCH;
		}
		*pid = p;
		*pidfd = fd;
		*via = BK_PEER_VIA_PIDFD;
		return 0;
	}
	/* Fallback (kernel < 6.5, or testing.mask_features so_peerpidfd):
	 * SO_PEERCRED names the pid the peer had when it connected; that
	 * process may be gone and its pid reused since. pidfd_open pins
	 * whatever process has the pid now; it is the caller only if it
	 * holds the peer end of this very connection (the kernel's
	 * sock_diag names that socket), checked while the pidfd shows the
	 * pinned process alive — a reused pid fails the check. */
	_cleanup_close_ int pfd = pidfd_open_(cred.pid);
	if (pfd < 0)
		return pfd;
	/* the agent's end of a unix connection lives in the network
	 * namespace the caller's socket was made in, and sock_diag finds
	 * sockets of its own namespace only: ask from the caller's */
	uint64_t peer = 0;
	int r = bk_unix_peer_ino(connfd, pfd, &peer);
	if (r < 0)
		return r;
	r = holds_socket(cred.pid, peer);
	if (r <= 0)
		return r < 0 ? r : -ESRCH;
	if (!pidfd_alive(pfd))
		return -ESRCH;
	*pid = cred.pid;
	*pidfd = steal_fd(&pfd);
	*via = BK_PEER_VIA_PEERCRED;
	return 0;
}

int bk_proc_starttime(pid_t pid, unsigned long long *st)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	_cleanup_free_ char *txt = NULL;
	int r = read_file_at(AT_FDCWD, p, 8192, &txt, NULL);
	if (r < 0)
		return r;
	char *s = strrchr(txt, ')');
	if (!s)
		return -EINVAL;
	/* fields after comm: state(3) ... starttime is field 22 */
	int field = 2;
	for (char *sv = NULL, *t = strtok_r(s + 1, " ", &sv); t; t = strtok_r(NULL, " ", &sv)) {
		field++;
		if (field == 22) {
			uint64_t v;
			if (parse_u64(t, &v) < 0)
				return -EINVAL;
			*st = v;
			return 0;
		}
	}
	return -EINVAL;
}

static int read_proc_cgroup(pid_t pid, char **txt)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
	return read_file_at(AT_FDCWD, p, 65536, txt, NULL);
}

/* What a container's state.json said, kept while the file is the same one
 * (runc writes a new state.json by rename: any change is a new inode). A
 * lookup re-reads and re-parses ~20 KiB of JSON per container otherwise,
 * ~80 us of an exec's ~200 us lookup. The file is looked at (stat) before
 * it is read: content read after a replacement is kept under the old
 * file's identity, which the next look no longer matches (read again),
 * never older content under the new one. */
struct state_seen {
	int root;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim, ctim;
	int r; /* the parse's answer (-ENOENT: not a Kubernetes container) */
	struct bk_container_info ci;
};
#define STATE_N 512
static struct state_seen *state_seen[STATE_N]; /* by hash of root and id */
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned state_slot(int root, const char *id)
{
	uint32_t h = 2166136261u ^ (uint32_t)root;
	for (const unsigned char *p = (const unsigned char *)id; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h % STATE_N;
}

static bool state_same(const struct state_seen *e, int root, const char *id, const struct stat *st)
{
	return e && e->root == root && streq(e->ci.id, id) && e->dev == st->st_dev && e->ino == st->st_ino &&
	       e->size == st->st_size && e->mtim.tv_sec == st->st_mtim.tv_sec &&
	       e->mtim.tv_nsec == st->st_mtim.tv_nsec && e->ctim.tv_sec == st->st_ctim.tv_sec &&
	       e->ctim.tv_nsec == st->st_ctim.tv_nsec;
}

/* Parse a state.json (or take what was parsed from this same file).
 * *missing: there is no such file. */
static int state_of(int root, const char *id, const char *path, struct bk_container_info *ci, bool *missing)
{
	struct stat st;
	*missing = false;
	if (stat(path, &st) < 0) {
		*missing = errno == ENOENT;
		return -errno;
	}
	unsigned k = state_slot(root, id);
	pthread_mutex_lock(&state_lock);
	struct state_seen *e = state_seen[k];
	if (state_same(e, root, id, &st)) {
		int r = e->r;
		if (r == 0)
			*ci = e->ci;
		else
			memset(ci, 0, sizeof(*ci));
		pthread_mutex_unlock(&state_lock);
		return r;
	}
	pthread_mutex_unlock(&state_lock);
	_cleanup_free_ char *txt = NULL;
	size_t len;
	int r = read_file_at(AT_FDCWD, path, 1 << 20, &txt, &len);
	if (r < 0) {
		*missing = r == -ENOENT; /* (gone between the look and the read) */
		return r;
	}
	r = bk_state_parse(txt, len, ci);
	if (r == 0 && !streq(ci->id, id))
		return -EINVAL; /* (not kept: the name is the key) */
	if (r != 0 && r != -ENOENT)
		return r;
	struct state_seen *n = malloc(sizeof(*n));
	if (!n)
		return r; /* (not kept: read again next time) */
	*n = (struct state_seen){ .root = root, .dev = st.st_dev, .ino = st.st_ino, .size = st.st_size,
				  .mtim = st.st_mtim, .ctim = st.st_ctim, .r = r, .ci = *ci };
	snprintf(n->ci.id, sizeof(n->ci.id), "%s", id); /* (a -ENOENT parse left it empty) */
	pthread_mutex_lock(&state_lock);
	e = state_seen[k];
	state_seen[k] = n;
	pthread_mutex_unlock(&state_lock);
	free(e);
	return r;
}

static int read_state(const struct bk_config *c, const char *id, struct bk_container_info *ci)
{
	if (!bk_container_id_valid(id))
		return -EINVAL;
	for (int i = 0; i < c->n_roots; i++) {
		char p[512];
		snprintf(p, sizeof(p), "%s/%s/state.json", c->runtime_roots[i], id);
		bool missing;
		int r = state_of(i, id, p, ci, &missing);
		if (missing)
			continue;
		return r;
	}
	return -ENOENT;
}

int bk_runtime_each(const struct bk_config *c, bk_container_fn fn, void *ud)
{
	for (int i = 0; i < c->n_roots; i++) {
		DIR *d = opendir(c->runtime_roots[i]);
		if (!d)
			continue;
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.' || !bk_container_id_valid(de->d_name))
				continue;
			struct bk_container_info ci;
			if (read_state(c, de->d_name, &ci) < 0)
				continue;
			int r = fn(&ci, ud);
			if (r) {
				closedir(d);
				return r;
			}
		}
		closedir(d);
	}
	return 0;
}

static int uid_gid_of(pid_t pid, uid_t *uid, gid_t *gid)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	_cleanup_free_ char *txt = NULL;
	int r = read_file_at(AT_FDCWD, p, 65536, &txt, NULL);
	if (r < 0)
		return r;
	char *u = strstr(txt, "\nUid:"), *g = strstr(txt, "\nGid:");
	if (!u || !g)
		return -EINVAL;
	unsigned long a, b;
	/* real, effective, saved, fs: the effective ids are the user's */
	if (sscanf(u + 5, "%lu %lu", &a, &b) != 2)
		return -EINVAL;
	*uid = (uid_t)b;
	if (sscanf(g + 5, "%lu %lu", &a, &b) != 2)
		return -EINVAL;
	*gid = (gid_t)b;
	return 0;
}

struct find_sandbox {
	const struct bk_config *c;
	const char *pod_uid;
	const char *pod_name; /* when looking up by name */
	const char *pod_ns;   /* optional */
	struct bk_container_info found;
	int matches;
};

static int find_cb(const struct bk_container_info *ci, void *ud)
{
	struct find_sandbox *f = ud;
	if (!streq(ci->name, f->c->sandbox_container))
		return 0;
	if (f->pod_uid && !streq(ci->pod_uid, f->pod_uid))
		return 0;
	if (f->pod_name && !streq(ci->pod_name, f->pod_name))
		return 0;
	if (f->pod_ns && !streq(ci->pod_namespace, f->pod_ns))
		return 0;
	f->found = *ci;
	f->matches++;
	return 0;
}

/* Which container answered a lookup, by key (a pod's uid, or the name an
 * admin asked for): one entry per pod and per name in use, so room for
 * more than a node runs (a density run spreads execs over 100 pods, each
 * looked up by uid and by name; a cache smaller than that misses on every
 * lookup and scans every container each time). The hashes are scanned,
 * the keys compared only on a hash match. */
#define CACHE_N 1024
static uint64_t cache_h[CACHE_N]; /* 0: empty */
static struct {
	char key[600];
	char id[BK_ID_MAX + 1];
	uint64_t stamp;
} cache[CACHE_N];
static unsigned cache_next;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t cache_hash(const char *key)
{
	uint64_t h = 1469598103934665603ull;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h ? h : 1;
}

/* The runtime roots as they are now: a container made or removed since
 * (a new directory there) changes the stamp. */
static uint64_t runtime_stamp(const struct bk_config *c)
{
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < c->n_roots; i++) {
		struct stat st;
		memset(&st, 0, sizeof(st));
		if (stat(c->runtime_roots[i], &st) < 0)
			st.st_ino = 0;
		uint64_t v[4] = { st.st_ino, st.st_nlink, (uint64_t)st.st_mtim.tv_sec, (uint64_t)st.st_mtim.tv_nsec };
		for (int k = 0; k < 4; k++)
			h = (h ^ v[k]) * 1099511628211ull;
	}
	return h;
}

/* The slot holding key, or -1; under cache_lock. */
static int cache_find(const char *key, uint64_t h)
{
	for (int i = 0; i < CACHE_N; i++)
		if (cache_h[i] == h && streq(cache[i].key, key))
			return i;
	return -1;
}

static bool cache_get(const char *key, uint64_t stamp, char *id)
{
	uint64_t h = cache_hash(key);
	pthread_mutex_lock(&cache_lock);
	int i = cache_find(key, h);
	bool hit = i >= 0 && cache[i].stamp == stamp;
	if (hit)
		strcpy(id, cache[i].id);
	pthread_mutex_unlock(&cache_lock);
	return hit;
}

static void cache_put(const char *key, uint64_t stamp, const char *id)
{
	uint64_t h = cache_hash(key);
	pthread_mutex_lock(&cache_lock);
	int slot = cache_find(key, h);
	if (slot < 0)
		slot = (int)(cache_next++ % CACHE_N);
	cache_h[slot] = h;
	snprintf(cache[slot].key, sizeof(cache[slot].key), "%s", key);
	snprintf(cache[slot].id, sizeof(cache[slot].id), "%s", id);
	cache[slot].stamp = stamp;
	pthread_mutex_unlock(&cache_lock);
}

struct v1_walk {
	struct bk_pod *p;
	const char *pod_uid;
};

/* One line of the sandbox container's /proc/PID/cgroup: a v1 hierarchy in
 * which it sits under its pod is recorded (the exec will join it too). */
static int v1_cb(const char *ctrls, const char *path, void *ud)
{
	struct v1_walk *w = ud;
	struct bk_pod_ref ref;
	if (!ctrls[0] || bk_cgroup_path_parse(path, &ref) < 0 || !streq(ref.pod_uid, w->pod_uid))
		return 0;
	if (w->p->n_v1 >= BK_POD_V1_MAX)
		return -E2BIG;
	struct bk_pod_v1 *v = &w->p->v1[w->p->n_v1];
	if (strlen(ctrls) >= sizeof(v->ctrls) || strlen(ref.pod_path) >= sizeof(v->pod) ||
	    strlen(path) >= sizeof(v->container))
		return -ENAMETOOLONG;
	strcpy(v->ctrls, ctrls);
	strcpy(v->pod, ref.pod_path);
	strcpy(v->container, path);
	w->p->n_v1++;
	return 0;
}

/* Open and verify the sandbox container of the pod in p->pod_uid (or by
 * name). Fills p->sandbox, p->sandbox_pidfd, cgroup paths, uid/gid. */
static int open_sandbox(const struct bk_config *c, struct bk_pod *p, const char *name, const char *ns, char *err,
			size_t errlen)
{
	struct find_sandbox f = { .c = c, .pod_uid = name ? NULL : p->pod_uid, .pod_name = name, .pod_ns = ns };
	char key[600];
	snprintf(key, sizeof(key), "%s|%s|%s", name ? "" : p->pod_uid, name ? name : "", ns ? ns : "");
	/* Scanning every container's state.json costs ~50 us per container:
	 * remember which container answered, and re-check only that one while
	 * no container was made or removed since the scan that found it (the
	 * stamp of the runtime roots, taken before that scan): a second
	 * candidate that appears later is seen by a full scan, and refused. */
	char cached[BK_ID_MAX + 1];
	uint64_t stamp = runtime_stamp(c);
	if (cache_get(key, stamp, cached)) {
		struct bk_container_info ci;
		if (read_state(c, cached, &ci) == 0)
			find_cb(&ci, &f);
	}
	if (f.matches != 1) {
		f.matches = 0;
		bk_runtime_each(c, find_cb, &f);
		if (f.matches == 1)
			cache_put(key, stamp, f.found.id);
	}
	if (f.matches == 0)
		return bk_fail_buf(err, errlen, -ENOENT, "no \"%s\" container found for this pod",
				   c->sandbox_container);
	if (f.matches > 1) {
		return bk_fail_buf(err, errlen, -ENOTUNIQ, "%d \"%s\" containers match; refusing an ambiguous target",
				   f.matches, c->sandbox_container);
	}
	const struct bk_container_info *s = &f.found;
	int fd = pidfd_open_(s->init_pid);
	if (fd < 0)
		return bk_fail_buf(err, errlen, -ESRCH, "cannot open the sandbox container's process %d: %s",
				   (int)s->init_pid, strerror(-fd));
	_cleanup_close_ int pidfd = fd;
	unsigned long long st = 0;
	_cleanup_free_ char *cg = NULL;
	int r;
	if ((r = bk_proc_starttime(s->init_pid, &st)) < 0 || (r = read_proc_cgroup(s->init_pid, &cg)) < 0)
		return bk_fail_buf(err, errlen, r, "cannot read /proc/%d of the sandbox container: %s",
				   (int)s->init_pid, strerror(-r));
	if (s->init_start && st != s->init_start)
		return bk_fail_buf(err, errlen, -ESRCH, "the sandbox container's pid %d was reused by another process",
				   (int)s->init_pid);
	struct bk_pod_ref ref;
	r = bk_proc_cgroup_parse(cg, &ref);
	if (r < 0 || !streq(ref.container_id, s->id) || !streq(ref.pod_uid, s->pod_uid))
		return bk_fail_buf(err, errlen, -EPERM,
				   "the sandbox container's process is not in its container's cgroup");
	char path[4096];
	if (bk_proc_cgroup_v2_path(cg, path, sizeof(path)) == 0 && bk_cgroup_path_parse(path, &ref) == 0)
		snprintf(p->pod_v2, sizeof(p->pod_v2), "%s", ref.pod_path);
	else {
		return bk_fail_buf(err, errlen, -EOPNOTSUPP,
				   "the sandbox container has no cgroup v2 path (the BPF layer and cgroup.kill need it)");
	}
	struct v1_walk w = { .p = p, .pod_uid = s->pod_uid };
	p->n_v1 = 0;
	if ((r = bk_proc_cgroup_each(cg, v1_cb, &w)) < 0)
		return bk_fail_buf(err, errlen, r, "cannot record the sandbox container's v1 cgroups: %s",
				   strerror(-r));
	if ((r = uid_gid_of(s->init_pid, &p->uid, &p->gid)) < 0)
		return bk_fail_buf(err, errlen, r, "cannot read the sandbox user of pid %d: %s",
				   (int)s->init_pid, strerror(-r));
	if (!pidfd_alive(pidfd))
		return bk_fail_buf(err, errlen, -ESRCH, "the sandbox container's process exited during the lookup");
	p->sandbox = *s;
	p->sandbox_pidfd = steal_fd(&pidfd);
	if (name) {
		snprintf(p->pod_uid, sizeof(p->pod_uid), "%s", s->pod_uid);
		snprintf(p->pod_name, sizeof(p->pod_name), "%s", s->pod_name);
		snprintf(p->pod_namespace, sizeof(p->pod_namespace), "%s", s->pod_namespace);
		snprintf(p->policy_annotation, sizeof(p->policy_annotation), "%s", s->egress_policy);
	}
	return 0;
}

int bk_peer_key(const struct bk_config *c, int connfd, char *key, size_t keylen)
{
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(connfd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
		return -errno;
	snprintf(key, keylen, "uid:%u", (unsigned)cred.uid);
	if (cred.pid <= 0)
		return 0; /* outside our pid namespace: never a pod's shim */
	/* SO_PEERPIDFD pins the process that connected; without it (kernel
	 * < 6.5) the pid is read as it is now — a key, not an identity */
	int fd = -1;
	socklen_t fl = sizeof(fd);
	if (bk_config_masks(c, "so_peerpidfd") || getsockopt(connfd, SOL_SOCKET, SO_PEERPIDFD, &fd, &fl) < 0 ||
	    fd < 0)
		fd = pidfd_open_(cred.pid);
	if (fd < 0)
		return fd;
	_cleanup_close_ int pidfd = fd;
	pid_t pid;
	if (pidfd_pid(pidfd, &pid) < 0 || pid != cred.pid)
		return -ESRCH;
	_cleanup_free_ char *cg = NULL;
	struct bk_pod_ref ref;
	if (read_proc_cgroup(pid, &cg) < 0 || !pidfd_alive(pidfd))
		return -ESRCH;
	if (bk_proc_cgroup_parse(cg, &ref) == 0)
		snprintf(key, keylen, "pod:%s", ref.pod_uid);
	return 0;
}

int bk_pod_from_peer(const struct bk_config *c, int connfd, struct bk_pod *out, char *err, size_t errlen)
{
	bk_pod_init(out);
	pid_t pid;
	int fd;
	enum bk_peer_via via;
	int r = bk_peer_pidfd(connfd, !bk_config_masks(c, "so_peerpidfd"), &pid, &fd, &via);
	if (r < 0)
		return bk_fail_buf(err, errlen, -EPERM, "cannot identify the caller from the kernel: %s", strerror(-r));
	_cleanup_close_ int pidfd = fd;
	_cleanup_free_ char *cg = NULL;
	r = read_proc_cgroup(pid, &cg);
	if (r < 0 || !pidfd_alive(pidfd))
		return bk_fail_buf(err, errlen, -EPERM, "the caller exited before it could be identified");
	struct bk_pod_ref ref;
	r = bk_proc_cgroup_parse(cg, &ref);
	if (r < 0)
		return bk_fail_buf(err, errlen, -EPERM, "caller pid %d is not a container of a Kubernetes pod",
				   (int)pid);
	struct bk_container_info ci;
	r = read_state(c, ref.container_id, &ci);
	if (r < 0)
		return bk_fail_buf(err, errlen, -EPERM, "caller's container %.12s is unknown to the container runtime",
				   ref.container_id);
	if (!streq(ci.pod_uid, ref.pod_uid))
		return bk_fail_buf(err, errlen, -EPERM,
				   "caller's container %.12s belongs to another pod than its cgroup says", ref.container_id);
	if (!streq(ci.name, c->shim_container)) {
		return bk_fail_buf(err, errlen, -EPERM,
				   "caller is container \"%s\" of pod %s/%s; only the \"%s\" container may use this socket",
				   ci.name, ci.pod_namespace, ci.pod_name, c->shim_container);
	}
	out->caller_pid = pid;
	out->identified_via = bk_peer_via_names[via];
	snprintf(out->caller_container, sizeof(out->caller_container), "%s", ci.id);
	snprintf(out->pod_uid, sizeof(out->pod_uid), "%s", ci.pod_uid);
	snprintf(out->pod_name, sizeof(out->pod_name), "%s", ci.pod_name);
	snprintf(out->pod_namespace, sizeof(out->pod_namespace), "%s", ci.pod_namespace);
	snprintf(out->policy_annotation, sizeof(out->policy_annotation), "%s", ci.egress_policy);
	/* the pidfd keeps the identity honest until here */
	if (!pidfd_alive(pidfd))
		return bk_fail_buf(err, errlen, -EPERM, "the caller exited before it could be identified");
	return 0;
}

int bk_pod_by_name(const struct bk_config *c, const char *name, struct bk_pod *out, char *err, size_t errlen)
{
	bk_pod_init(out);
	char ns[256] = "", pod[256];
	const char *slash = strchr(name, '/');
	if (slash) {
		size_t nl = (size_t)(slash - name);
		if (nl == 0 || nl >= sizeof(ns))
			return bk_fail_buf(err, errlen, -EINVAL, "bad sandbox name");
		memcpy(ns, name, nl);
		ns[nl] = '\0';
		name = slash + 1;
	}
	if (!name[0] || strlen(name) >= sizeof(pod))
		return bk_fail_buf(err, errlen, -EINVAL, "bad sandbox name");
	strcpy(pod, name);
	int r = open_sandbox(c, out, pod, ns[0] ? ns : NULL, err, errlen);
	if (r == -ENOENT)
		return bk_fail_buf(err, errlen, r, "no sandbox named \"%s\" on this node", name);
	return r;
}

int bk_pod_open_sandbox(const struct bk_config *c, struct bk_pod *p, char *err, size_t errlen)
{
	return open_sandbox(c, p, NULL, NULL, err, errlen);
}
