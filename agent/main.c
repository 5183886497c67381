/* SPDX-License-Identifier: Apache-2.0 */
/* boxkite-agent: the privileged per-node agent. Listens on the agent socket
 * (shims; the caller's identity comes from the kernel) and the admin socket
 * (root only), and runs every exec in its own isolation context. */
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <getopt.h>
#include <limits.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "agent/api/api.h"
#include "agent/observe/events.h"
#include "agent/observe/metrics.h"
#include "agent/observe/observe.h"
#include "agent/isolate/cgroup.h"
#include "agent/isolate/instances.h"
#include "agent/isolate/privs.h"
#include "agent/isolate/records.h"
#include "agent/isolate/recover.h"
#include "agent/session/procs.h"
#include "lib/log.h"
#include "lib/proto.h"
#include "lib/util.h"

/* ---- connections ------------------------------------------------------------------------
 *
 * Every open connection is a struct conn on one list. The main thread's
 * loop accepts them; while one is parked (waiting for a frame) it is in
 * the connections' epoll set (cs.cepfd), where the idle request threads
 * wait themselves: the thread the kernel wakes for a frame serves it, with
 * no hand-over from one thread to another on the request's way in (a
 * second wake-up). A parked connection costs no thread; the connection
 * goes back to the set after the answer.
 * Budgets,
 * checked at accept before anything else is spent on the caller:
 * per peer (bk_peer_key: the pod, or the uid outside pods) and in all on
 * the agent socket, and a separate one on the admin socket, so that
 * neither a pod nor a flood of host connections can lock out the others
 * or the operator. A parked connection is dropped when its deadline
 * passes: the first frame's (a peer that connects and says nothing) or
 * the idle one between requests. A caller the kernel identifies as no
 * sandbox shim (or a non-root admin caller) is answered 403 and dropped
 * before its frame is read. */

static struct bk_agent agent;

struct conn {
	int fd;
	enum bk_caller_kind kind;
	char key[80];          /* the peer's budget key; "" on the admin socket */
	bool identified;
	bool busy;             /* a worker thread has it */
	uint64_t deadline;     /* parked: dropped at this time (ns, monotonic) */
	struct bk_pod pod;
	struct conn *prev, *next;
};

struct peer_count {
	char key[80];
	int n;
};

static struct {
	pthread_mutex_t lock;
	int epfd;  /* the loop's: the listening sockets, the signals */
	int cepfd; /* the parked connections' (EPOLLONESHOT): the idle workers wait on it */
	struct conn *head;
	int n_shim, n_admin, n_busy;
	struct peer_count *peers;
	int n_peers, cap_peers;
	uint64_t last_refusal_log;
	uint64_t refusals_unlogged;
} cs = { .lock = PTHREAD_MUTEX_INITIALIZER, .epfd = -1, .cepfd = -1 };

static int send_text(int fd, char *txt)
{
	if (!txt)
		return -ENOMEM;
	int r = bk_send_msg(fd, txt, strlen(txt));
	free(txt);
	return r;
}

/* An answer from the loop: never blocks it (a fresh connection has room
 * for one small message; if not, the caller loses its answer). */
static void answer_and_drop(int fd, char *txt)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	/* unread data at close would reset the connection before the
	 * caller reads the answer: take what it sent first */
	char buf[4096];
	for (int i = 0; i < 64 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0; i++)
		;
	send_text(fd, txt);
	close(fd);
}

static struct peer_count *peer_find(const char *key, bool add)
{
	for (int i = 0; i < cs.n_peers; i++)
		if (streq(cs.peers[i].key, key))
			return &cs.peers[i];
	if (!add)
		return NULL;
	if (cs.n_peers == cs.cap_peers) {
		int nc = cs.cap_peers ? cs.cap_peers * 2 : 16;
		struct peer_count *np = realloc(cs.peers, (size_t)nc * sizeof(*np));
		if (!np)
			return NULL;
		cs.peers = np;
		cs.cap_peers = nc;
	}
	struct peer_count *pc = &cs.peers[cs.n_peers++];
	snprintf(pc->key, sizeof(pc->key), "%s", key);
	pc->n = 0;
	return pc;
}

/* Under cs.lock: forget c (its fd closed, its counts given back). */
static void conn_free_locked(struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		cs.head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->kind == BK_CALLER_ADMIN) {
		cs.n_admin--;
	} else {
		cs.n_shim--;
		struct peer_count *pc = peer_find(c->key, false);
		if (pc && --pc->n == 0)
			*pc = cs.peers[--cs.n_peers];
	}
	close(c->fd);
	bk_pod_release(&c->pod);
	free(c);
}

/* Under cs.lock: back to the set, until deadline. */
static void conn_park_locked(struct conn *c, int after_ms)
{
	c->busy = false;
	c->deadline = now_ns() + (uint64_t)after_ms * 1000000ull;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = c };
	if (epoll_ctl(cs.cepfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		conn_free_locked(c);
}

/* One request of c (its frame is there), on the worker that took it. */
static void conn_request(struct conn *c)
{
	char *req = NULL;
	size_t len = 0;
	bool keep = false;
	int r = bk_recv_msg(c->fd, BK_REQ_MAX, &req, &len);
	if (r == 0) {
		bk_api_client_fd = c->fd;
		bk_later_open(); /* what the answer does not wait for (an exec's cgroups' removal) */
		char *resp = bk_api_handle(&agent, c->kind, c->kind == BK_CALLER_SHIM ? &c->pod : NULL, req, len);
		free(req);
		/* ... nor waits for the answer: one that may not go at once (more
		 * than a chunk, or a caller whose socket is full: it stopped
		 * reading a stream) goes after that work, not before it */
		struct pollfd pf = { .fd = c->fd, .events = POLLOUT };
		if (!resp || strlen(resp) > BK_CHUNK_MAX || poll(&pf, 1, 0) != 1 || !(pf.revents & POLLOUT))
			bk_later_close();
		keep = send_text(c->fd, resp) == 0;
		bk_later_close();
	} else if (r < 0 && r != -ECONNRESET && r != -EPIPE) {
		/* answer once with the reason, then drop the connection */
		send_text(c->fd, bk_api_error(400, "bad_frame", "%s",
					      r == -EAGAIN ? "the rest of the frame did not arrive in time"
							   : bk_proto_strerror(r)));
	}
	bk_api_client_fd = -1;
	pthread_mutex_lock(&cs.lock);
	cs.n_busy--;
	__atomic_store_n(&agent.req_serving, cs.n_busy, __ATOMIC_RELAXED);
	if (keep)
		conn_park_locked(c, agent.limits.idle_ms);
	else
		conn_free_locked(c);
	pthread_mutex_unlock(&cs.lock);
}

/* The request threads (leader/followers): the idle ones wait in
 * epoll_wait on the connections' set, and the one the kernel wakes for a
 * frame serves that request itself (EPOLLONESHOT: one thread per frame).
 * One always waits: the thread that takes the last waiter's place makes
 * another before it serves (or the loop does, on its next sweep, if that
 * failed). Kept for the next request, not made per request: a thread made
 * anew costs its stack's and its heap's first touches again (glibc gives a
 * cached stack back with its pages dropped), page faults, each with TLB
 * flushes, on every exec. At most WORKER_KEEP wait (a burst's others end
 * with their request: their stacks and heaps are not held); one idle for
 * WORKER_IDLE_S ends too, unless it is the last one waiting. After the
 * loop stops (SIGTERM), no thread takes a new request. */
#define WORKER_IDLE_S 30
#define WORKER_KEEP 4
static struct {
	pthread_mutex_t lock;
	int waiting;   /* in epoll_wait, or made to be */
	bool stopping; /* the loop has stopped: no new request is taken */
} wk = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void conn_ready(struct conn *c, uint32_t events);
static void *worker(void *arg);

/* Under wk.lock: one more waiting thread. -1: none could be made. */
static int worker_add_locked(void)
{
	if (thread_start_detached(worker, NULL, 0) != 0)
		return -1;
	wk.waiting++;
	__atomic_store_n(&agent.req_waiting, wk.waiting, __ATOMIC_RELAXED);
	return 0;
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		struct epoll_event ev;
		int n = epoll_wait(cs.cepfd, &ev, 1, WORKER_IDLE_S * 1000);
		bool intr = n < 0 && errno == EINTR;
		pthread_mutex_lock(&wk.lock);
		if (wk.stopping || (n <= 0 && !intr && wk.waiting > 1)) {
			/* (a frame taken after the stop stays unread: the
			 * connection is closed with the agent, as a parked one) */
			wk.waiting--;
			__atomic_store_n(&agent.req_waiting, wk.waiting, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&wk.lock);
			return NULL;
		}
		if (n <= 0) {
			pthread_mutex_unlock(&wk.lock);
			continue;
		}
		/* (if none can be made, the loop's sweep tries again) */
		if (--wk.waiting == 0)
			worker_add_locked();
		__atomic_store_n(&agent.req_waiting, wk.waiting, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&wk.lock);
		conn_ready(ev.data.ptr, ev.events);
		pthread_mutex_lock(&wk.lock);
		if (wk.waiting >= WORKER_KEEP || wk.stopping) {
			pthread_mutex_unlock(&wk.lock);
			return NULL;
		}
		wk.waiting++;
		__atomic_store_n(&agent.req_waiting, wk.waiting, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&wk.lock);
	}
}

/* Rate-limited: one line per second, with how many went unlogged. */
static void log_refusal(const char *sock, const char *key, const char *why)
{
	__atomic_add_fetch(&agent.refused_conns, 1, __ATOMIC_RELAXED);
	uint64_t now = now_ns();
	if (now - cs.last_refusal_log < 1000000000ull && cs.last_refusal_log) {
		cs.refusals_unlogged++;
		return;
	}
	log_warn("connection_refused", LS("socket", sock), LS("peer", key), LS("why", why),
		 LI("unlogged_before", cs.refusals_unlogged));
	cs.last_refusal_log = now;
	cs.refusals_unlogged = 0;
}

/* A new connection: counted under its peer's budget, or refused (429)
 * before it costs anything more. */
static void accept_all(int lfd, enum bk_caller_kind kind)
{
	const struct bk_limits *L = &agent.limits;
	for (int burst = 0; burst < 256; burst++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE)
				log_refusal(kind == BK_CALLER_ADMIN ? "admin" : "agent", "-", "out of descriptors");
			return;
		}
		char key[80] = "";
		if (kind == BK_CALLER_SHIM && bk_peer_key(&agent.cfg, fd, key, sizeof(key)) < 0) {
			log_refusal("agent", "-", "the peer is gone");
			close(fd);
			continue;
		}
		pthread_mutex_lock(&cs.lock);
		const char *full = NULL;
		struct peer_count *pc = NULL;
		if (kind == BK_CALLER_ADMIN) {
			if (L->admin_max && cs.n_admin >= L->admin_max)
				full = "the admin socket is at its connection limit";
		} else if (L->conns_max && cs.n_shim >= L->conns_max) {
			full = "the agent is at its connection limit";
		} else if (!(pc = peer_find(key, true))) {
			full = "out of memory";
		} else if (L->conns_per_peer && pc->n >= L->conns_per_peer) {
			full = "this peer is at its connection limit";
		}
		struct conn *c = full ? NULL : calloc(1, sizeof(*c));
		if (!full && !c)
			full = "out of memory";
		if (full) {
			log_refusal(kind == BK_CALLER_ADMIN ? "admin" : "agent", key[0] ? key : "admin", full);
			pthread_mutex_unlock(&cs.lock);
			answer_and_drop(fd, bk_api_error(429, "too_many_connections", "%s", full));
			continue;
		}
		c->fd = fd;
		c->kind = kind;
		snprintf(c->key, sizeof(c->key), "%s", key);
		bk_pod_init(&c->pod);
		if (kind == BK_CALLER_ADMIN)
			cs.n_admin++;
		else {
			cs.n_shim++;
			pc->n++;
		}
		c->next = cs.head;
		if (cs.head)
			cs.head->prev = c;
		cs.head = c;
		/* a frame split over records must arrive whole; an answer must go */
		struct timeval rt = { .tv_sec = 10 }, st = { .tv_sec = 60 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &st, sizeof(st));
		c->busy = false;
		c->deadline = now_ns() + (uint64_t)L->first_frame_ms * 1000000ull;
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = c };
		if (epoll_ctl(cs.cepfd, EPOLL_CTL_ADD, fd, &ev) < 0)
			conn_free_locked(c);
		pthread_mutex_unlock(&cs.lock);
	}
}

/* Who the caller is, the first time it sends: a refused caller gets its
 * 403 from here and costs no thread. */
static bool identify(struct conn *c)
{
	char why[512] = "";
	if (c->kind == BK_CALLER_SHIM) {
		if (bk_pod_from_peer(&agent.cfg, c->fd, &c->pod, why, sizeof(why)) == 0) {
			log_info("caller_identified", LS("pod", c->pod.pod_name), LS("namespace", c->pod.pod_namespace),
				 LS("pod_uid", c->pod.pod_uid), LI("pid", c->pod.caller_pid),
				 LS("via", c->pod.identified_via));
			return true;
		}
		log_warnf("caller_refused", "%s", why);
	} else {
		struct ucred cr = { .uid = (uid_t)-1 };
		socklen_t cl = sizeof(cr);
		if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 && cr.uid == 0)
			return true;
		snprintf(why, sizeof(why), "the admin socket is for root only");
		log_warnf("caller_refused", "admin socket: uid %d refused", (int)cr.uid);
	}
	__atomic_add_fetch(&agent.refused_callers, 1, __ATOMIC_RELAXED);
	int fd = dup(c->fd);
	if (fd >= 0)
		answer_and_drop(fd, bk_api_error(403, "caller_refused", "%s", why));
	return false;
}

/* c has something to read (a frame, or its hang-up): on the worker the
 * kernel woke for it, which serves the request itself. */
static void conn_ready(struct conn *c, uint32_t events)
{
	pthread_mutex_lock(&cs.lock);
	bool hup = (events & (EPOLLERR | EPOLLHUP)) || ((events & EPOLLRDHUP) && !(events & EPOLLIN));
	if (hup) {
		conn_free_locked(c);
		pthread_mutex_unlock(&cs.lock);
		return;
	}
	c->busy = true;
	pthread_mutex_unlock(&cs.lock);
	bool go = c->identified || (c->identified = identify(c));
	pthread_mutex_lock(&cs.lock);
	if (!go) {
		conn_free_locked(c);
		pthread_mutex_unlock(&cs.lock);
		return;
	}
	cs.n_busy++;
	__atomic_store_n(&agent.req_serving, cs.n_busy, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cs.lock);
	conn_request(c);
}

/* Drop the parked connections whose deadline passed. */
static void sweep(void)
{
	uint64_t now = now_ns();
	int dropped = 0;
	pthread_mutex_lock(&cs.lock);
	for (struct conn *c = cs.head, *n; c; c = n) {
		n = c->next;
		char b;
		/* a frame that came at the last moment is served: its event is
		 * on the way (a pooled connection of a shim must not be closed
		 * under a request it already sent) */
		if (!c->busy && now >= c->deadline && recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
		    (errno == EAGAIN || errno == EWOULDBLOCK)) {
			conn_free_locked(c);
			dropped++;
		}
	}
	pthread_mutex_unlock(&cs.lock);
	if (dropped)
		__atomic_add_fetch(&agent.dropped_conns, (uint64_t)dropped, __ATOMIC_RELAXED);
}

static int listen_unix(const char *path, mode_t mode)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	char dir[sizeof(sa.sun_path)];
	strcpy(dir, path);
	int r = mkdir_p(dirname(dir), 0755);
	if (r < 0)
		return r;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	/* bind under a restrictive umask, then open up exactly as asked */
	mode_t old = umask(0177);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || chmod(path, mode) < 0 || listen(fd, 1024) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* ---- the agent's directories --------------------------------------------------------------
 *
 * Set on every start, whatever existed before (a directory left with other
 * modes, another owner, by an older agent or by hand): the directory of the
 * agent socket (the pods' directory: the only thing a sandbox pod mounts)
 * 0755 root, the state directory 0700 root. Parents the agent creates are
 * 0755; existing ones are left as they are (a pod mounts its directory, it
 * never walks the host's path to it). */

/* path as a directory of the agent's: made if missing (parents 0755),
 * owned by root, mode exactly mode. */
static int own_dir(const char *path, mode_t mode, bool refuse_shared, char *err, size_t errlen)
{
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", path);
	int r = mkdir_p(dirname(parent), 0755);
	if (r == 0 && mkdir(path, mode) < 0 && errno != EEXIST)
		r = -errno;
	_cleanup_close_ int fd = r < 0 ? -1 : open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (r == 0 && fd < 0)
		r = -errno;
	struct stat st;
	if (r == 0 && fstat(fd, &st) < 0)
		r = -errno;
	if (r < 0)
		return bk_fail_buf(err, errlen, r, "cannot create %s: %s", path, strerror(-r));
	if (refuse_shared && (st.st_mode & S_ISVTX))
		return bk_fail_buf(err, errlen, -EINVAL,
				   "%s is a shared directory (sticky bit): give the agent socket a directory of its own "
				   "(default /run/boxkite/pods/agent.sock)", path);
	if ((st.st_uid != 0 || st.st_gid != 0) && fchown(fd, 0, 0) < 0)
		r = -errno;
	if (r == 0 && (st.st_mode & 07777) != mode && fchmod(fd, mode) < 0)
		r = -errno;
	if (r < 0)
		return bk_fail_buf(err, errlen, r, "cannot set %s to root, mode %04o: %s", path, (unsigned)mode, strerror(-r));
	return 0;
}

/* Whether dir, or any of its parents, is the directory st names. */
static bool at_or_below(const char *dir, const struct stat *st)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", dir);
	for (;;) {
		struct stat s;
		if (stat(p, &s) == 0 && s.st_dev == st->st_dev && s.st_ino == st->st_ino)
			return true;
		if (streq(p, "/") || streq(p, "."))
			return false;
		char *d = dirname(p); /* p itself, shortened, or a static "." or "/" */
		if (d != p)
			memmove(p, d, strlen(d) + 1);
	}
}

static int setup_dirs(const struct bk_config *c, char *err, size_t errlen)
{
	char pods[PATH_MAX], admin[PATH_MAX], tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s", c->socket);
	snprintf(pods, sizeof(pods), "%s", dirname(tmp));
	snprintf(tmp, sizeof(tmp), "%s", c->admin_socket);
	snprintf(admin, sizeof(admin), "%s", dirname(tmp));
	const char *mk[] = { admin, pods };
	for (int i = 0; i < 2; i++) {
		int r = mkdir_p(mk[i], 0755);
		if (r < 0)
			return bk_fail_buf(err, errlen, r, "cannot create %s: %s", mk[i], strerror(-r));
	}
	/* the pods' directory holds the agent socket only: never the admin
	 * socket, never the state (a pod would see them); checked before any
	 * mode changes */
	struct stat ps;
	if (stat(pods, &ps) < 0)
		return bk_fail_buf(err, errlen, -errno, "%s: %s", pods, strerror(errno));
	bool has_admin = at_or_below(admin, &ps);
	if (has_admin || at_or_below(c->state_dir, &ps))
		return bk_fail_buf(err, errlen, -EINVAL,
				   "the agent socket's directory %s would also show sandbox pods the %s: give --socket a "
				   "directory of its own (default /run/boxkite/pods/agent.sock)",
				   pods, has_admin ? "admin socket" : "state directory");
	int r = own_dir(c->state_dir, 0700, false, err, errlen);
	return r < 0 ? r : own_dir(pods, 0755, true, err, errlen);
}

static void usage(FILE *f)
{
	static struct bk_config d; /* the defaults, as they are */
	bk_config_defaults(&d);
	fprintf(f,
		"usage: boxkite-agent [--config FILE] [--socket PATH] [--admin-socket PATH]\n"
		"                     [--state-dir DIR] [--bpffs DIR] [--runtime-root DIR]... [--metrics ADDR]\n"
		"                     [--check-config]\n"
		"       boxkite-agent --help | --version\n"
		"options (flags override the config file):\n"
		"  --config FILE        JSON config: profiles, layers, limits, self-test (read first)\n"
		"  --socket PATH        the socket sandbox pods' shims connect to (default %s)\n"
		"  --admin-socket PATH  the admin socket boxkitectl uses, mode 0600 (default %s)\n"
		"  --state-dir DIR      node key and exec records (default %s)\n"
		"  --bpffs DIR          where BPF objects are pinned (default %s)\n"
		"  --runtime-root DIR   an OCI runtime state root to find pods in, repeatable\n"
		"                       (default /run/containerd/runc/k8s.io and /run/runc)\n"
		"  --metrics ADDR       IPv4:PORT serving /metrics and /readyz, or off (default %s)\n"
		"  --check-config       parse the config, say what it means, exit\n"
		"  --help               this text\n"
		"  --version            the version\n",
		d.socket, d.admin_socket, d.state_dir, d.bpffs, d.metrics);
}

/* Flags and the config file into agent.cfg; returns -1 to go on, else the
 * exit status. The config file is read first, flags override it. */
static int parse_args(int argc, char **argv, bool *check_only)
{
	struct bk_config *c = &agent.cfg;
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },     { "socket", required_argument, NULL, 's' },
		{ "admin-socket", required_argument, NULL, 'a' }, { "state-dir", required_argument, NULL, 'd' },
		{ "bpffs", required_argument, NULL, 'b' },      { "runtime-root", required_argument, NULL, 'r' },
		{ "metrics", required_argument, NULL, 'm' },    { "help", no_argument, NULL, 'h' },
		{ "check-config", no_argument, NULL, 'C' },     { "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	char err[512] = "";
	for (int i = 1; i < argc - 1; i++)
		if (streq(argv[i], "--config") && bk_config_load(c, argv[i + 1], err, sizeof(err)) < 0) {
			fprintf(stderr, "boxkite-agent: %s\n", err);
			return 1;
		}
	int o, nroots = 0;
	char roots[BK_MAX_ROOTS][256];
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		const char *v = optarg;
		switch (o) {
		case 'c': break;
		case 's': snprintf(c->socket, sizeof(c->socket), "%s", v); break;
		case 'a': snprintf(c->admin_socket, sizeof(c->admin_socket), "%s", v); break;
		case 'd': snprintf(c->state_dir, sizeof(c->state_dir), "%s", v); break;
		case 'b': snprintf(c->bpffs, sizeof(c->bpffs), "%s", v); break;
		case 'm': snprintf(c->metrics, sizeof(c->metrics), "%s", v); break;
		case 'r':
			if (nroots == BK_MAX_ROOTS) {
				fprintf(stderr, "boxkite-agent: at most %d --runtime-root\n", BK_MAX_ROOTS);
				return 1;
			}
			snprintf(roots[nroots++], sizeof(roots[0]), "%s", v);
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("boxkite-agent %s\n", BK_VERSION); return 0;
		case 'C': *check_only = true; break;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (nroots) {
		c->n_roots = nroots;
		memcpy(c->runtime_roots, roots, sizeof(roots));
	} else if (!c->n_roots) {
		strcpy(c->runtime_roots[c->n_roots++], "/run/containerd/runc/k8s.io");
		strcpy(c->runtime_roots[c->n_roots++], "/run/runc");
	}
	return -1;
}

/* /proc/PID/cgroup paths are relative to the reader's cgroup namespace. A
 * containerized agent (hostPID) joins the host's, so that every path it
 * reads maps onto the host hierarchy it mounted. */
static int join_host_cgroupns(void)
{
	struct stat self_cg, init_cg;
	if (stat("/proc/self/ns/cgroup", &self_cg) < 0 || stat("/proc/1/ns/cgroup", &init_cg) < 0 ||
	    self_cg.st_ino == init_cg.st_ino)
		return 0;
	_cleanup_close_ int cfd = open("/proc/1/ns/cgroup", O_RDONLY | O_CLOEXEC);
	if (cfd < 0 || setns(cfd, CLONE_NEWCGROUP) < 0)
		return -errno;
	return 0;
}

/* One agent per set of pins: a second one would unpin and "recover" the
 * first one's live execs. An abstract socket is released by the kernel
 * when its owner dies, even by SIGKILL. The fd stays open for life. */
static int take_pin_lock(const char *bpffs)
{
	int lock_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un la = { .sun_family = AF_UNIX };
	int ll = snprintf(la.sun_path + 1, sizeof(la.sun_path) - 1, "boxkite-agent:%s", bpffs);
	if (lock_fd < 0 ||
	    bind(lock_fd, (struct sockaddr *)&la, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + ll)) < 0)
		return -1;
	return lock_fd;
}

static void log_startup_warnings(const struct bk_config *c)
{
	for (int i = 0; i < c->policy.n; i++)
		for (int k = 0; k < c->policy.prof[i].n_over; k++) {
			char cidr[64];
			bk_cidr_format(&c->policy.prof[i].overrides[k], cidr, sizeof(cidr));
			log_warn("deny_override", LS("profile", c->policy.prof[i].name), LS("cidr", cidr),
				 LS("msg", "operator override: this deny-set entry is not denied for this profile"));
		}
	if (!c->layer_netns || !c->layer_bpf || !c->layer_landlock || !c->layer_seccomp)
		log_warnf("layer_disabled",
			  "UNSAFE: layers turned off by configuration: netns=%s bpf=%s landlock=%s seccomp=%s",
			  c->layer_netns ? "on" : "off", c->layer_bpf ? "on" : "off", c->layer_landlock ? "on" : "off",
			  c->layer_seccomp ? "on" : "off");
}

/* The loop: accept (the workers take the frames), drop what passed its
 * deadline; until SIGTERM/SIGINT arrives on sfd. */
static void serve(int lfd, int afd, int sfd)
{
	static int tag_lfd, tag_afd, tag_sfd;
	struct epoll_event ev = { .events = EPOLLIN };
	ev.data.ptr = &tag_lfd;
	epoll_ctl(cs.epfd, EPOLL_CTL_ADD, lfd, &ev);
	ev.data.ptr = &tag_afd;
	epoll_ctl(cs.epfd, EPOLL_CTL_ADD, afd, &ev);
	ev.data.ptr = &tag_sfd;
	epoll_ctl(cs.epfd, EPOLL_CTL_ADD, sfd, &ev);
	pthread_mutex_lock(&wk.lock);
	if (worker_add_locked() < 0) /* (the sweep tries again) */
		log_errorf("worker", "cannot start a request thread: %s", strerror(errno));
	pthread_mutex_unlock(&wk.lock);
	uint64_t next_sweep = 0;
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(cs.epfd, evs, 64, 100);
		if (n < 0 && errno != EINTR)
			return;
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			if (p == &tag_sfd)
				return;
			if (p == &tag_lfd)
				accept_all(lfd, BK_CALLER_SHIM);
			else if (p == &tag_afd)
				accept_all(afd, BK_CALLER_ADMIN);
		}
		if (now_ns() >= next_sweep) {
			sweep();
			bk_instances_sweep();
			/* none waiting: the last one could not make its successor */
			pthread_mutex_lock(&wk.lock);
			if (wk.waiting == 0 && worker_add_locked() < 0)
				log_refusal("agent", "-", "cannot start a thread for the next request");
			pthread_mutex_unlock(&wk.lock);
			next_sweep = now_ns() + 100000000ull;
		}
	}
}

/* In-flight requests finish (an exec is bounded by its timeout). */
static void drain(void)
{
	for (int i = 0; i < 36000; i++) {
		pthread_mutex_lock(&cs.lock);
		int n = cs.n_busy;
		pthread_mutex_unlock(&cs.lock);
		if (n == 0 || agent.engine.live == 0)
			break;
		usleep(10000);
	}
}

/* fds one live exec may take at its peak (setup) on average: at steady
 * state it holds 4 (pidfd, stdout, stderr, the sandbox's pidfd) and its
 * connection 1; during setup up to ~14 for a moment. */
#define BK_EXEC_FDS 8

/* RLIMIT_NOFILE up to its hard limit (the exec child sets its own back to
 * 1024), and the budgets it allows: connections, then execs, each pod a
 * quarter of the execs at most. */
static uint64_t nofile_was, nofile_hard;

static void agent_limits(struct bk_limits *L)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		nofile_was = rl.rlim_cur;
	if (nofile_raise(&rl) == 0) {
		L->nofile = rl.rlim_cur == RLIM_INFINITY ? (1u << 20) : rl.rlim_cur;
		nofile_hard = rl.rlim_max;
	} else {
		L->nofile = 1024;
	}
	long n = L->nofile > (1u << 20) ? (1 << 20) : (long)L->nofile;
#define CLAMP(v, lo, hi) ((v) < (lo) ? (lo) : (v) > (hi) ? (hi) : (v))
	L->conns_max = (int)CLAMP(n / 8, 16, 1024);
	L->conns_per_peer = (int)CLAMP(L->conns_max / 2, 8, 64);
	L->admin_max = (int)CLAMP(n / 16, 8, 64);
	L->first_frame_ms = 3000;
	L->idle_ms = 60000;
#undef CLAMP
}

/* The exec budget: what is left of RLIMIT_NOFILE after 64 for the agent
 * itself (BPF objects, namespaces, the netns pool, metrics), `kept` for
 * what is kept per sandbox container (its init's pidfd and mount table; on
 * hybrid hosts its v1 cgroup.procs: isolate/instances.h), 2 per
 * connection (its socket; a file operation's own). */
static void exec_budget(struct bk_limits *L, int kept)
{
	long n = L->nofile > (1u << 20) ? (1 << 20) : (long)L->nofile;
	long b = (n - 64 - kept - 2L * (L->conns_max + L->admin_max)) / BK_EXEC_FDS;
	L->exec_budget = b < 2 ? 2 : b > (1 << 20) ? (1 << 20) : (int)b;
	L->exec_per_pod = L->exec_budget / 4 < 1 ? 1 : L->exec_budget / 4;
}

/* logged once the start is decided: a refusal stays one line */
static void log_limits(const struct bk_limits *L)
{
	log_info("nofile_raised", LI("from", nofile_was), LI("to", L->nofile), LI("hard", nofile_hard));
	log_info("limits", LI("nofile", L->nofile), LI("conns_max", L->conns_max),
		 LI("conns_per_peer", L->conns_per_peer), LI("admin_max", L->admin_max),
		 LI("first_frame_ms", L->first_frame_ms), LI("idle_ms", L->idle_ms), LI("exec_budget", L->exec_budget),
		 LI("exec_per_pod", L->exec_per_pod));
}

int main(int argc, char **argv)
{
	struct bk_config *c = &agent.cfg;
	bk_config_defaults(c);
	bool check_only = false;
	int r = parse_args(argc, argv, &check_only);
	if (r >= 0)
		return r;
	if (check_only) {
		/* the config parsed above (errors exit earlier): say what it means */
		printf("config ok: %d profile(s), default \"%s\", layers netns=%s bpf=%s seccomp=%s\n", c->policy.n,
		       c->policy.default_profile, c->layer_netns ? "on" : "off", c->layer_bpf ? "on" : "off",
		       c->layer_seccomp ? "on" : "off");
		return 0;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "boxkite-agent: must run as root (BPF, cgroups, namespaces)\n");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	/* execs, denials and self-test results also go to `boxkitectl events` */
	log_set_tap(bk_events_wants, bk_events_publish);
	/* first, while this is the only thread: every later one, and every
	 * exec child, copies its empty bounding set (privs.h) */
	if ((r = bk_privs_hand_over()) < 0)
		log_warnf("privileges", "cannot empty the agent's bounding set at start (%s): each exec child empties its own",
			  strerror(-r));
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	int sfd = signalfd(-1, &ss, SFD_CLOEXEC);

	agent.start_ns = now_ns();
	agent_limits(&agent.limits);
	exec_budget(&agent.limits, 0);
	cs.epfd = epoll_create1(EPOLL_CLOEXEC);
	cs.cepfd = epoll_create1(EPOLL_CLOEXEC);
	if (cs.epfd < 0 || cs.cepfd < 0) {
		fprintf(stderr, "boxkite-agent: epoll: %s\n", strerror(errno));
		return 1;
	}
	if ((r = join_host_cgroupns()) < 0) {
		fprintf(stderr, "boxkite-agent: cannot join the host cgroup namespace (needs hostPID and CAP_SYS_ADMIN): %s\n",
			strerror(-r));
		return 1;
	}
	if (take_pin_lock(c->bpffs) < 0) {
		fprintf(stderr, "boxkite-agent: another boxkite-agent is running with pins in %s\n", c->bpffs);
		return 1;
	}
	char err[512] = "";
	if (setup_dirs(c, err, sizeof(err)) < 0) {
		fprintf(stderr, "boxkite-agent: %s\n", err);
		return 1;
	}
	char keypath[sizeof(c->state_dir) + 16];
	snprintf(keypath, sizeof(keypath), "%s/node.key", c->state_dir);
	bool key_created = false;
	if (bk_signer_open(keypath, &agent.signer, &key_created, err, sizeof(err)) < 0) {
		fprintf(stderr, "boxkite-agent: refusing to start: receipt signing: %s\n", err);
		return 1;
	}
	const char *nn = getenv("NODE_NAME");
	if (nn && nn[0])
		snprintf(agent.node_name, sizeof(agent.node_name), "%s", nn);
	else if (gethostname(agent.node_name, sizeof(agent.node_name) - 1) < 0)
		snprintf(agent.node_name, sizeof(agent.node_name), "unknown");
	r = bk_engine_init(&agent.engine, c, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "boxkite-agent: refusing to start: %s\n", err);
		bk_engine_fini(&agent.engine);
		bk_signer_free(agent.signer);
		return 1;
	}
	/* the descriptors kept per sandbox container (instances.h) */
	exec_budget(&agent.limits, BK_INSTANCES_FDS(agent.engine.mounts.n_v1 > 0));
	pthread_mutex_init(&agent.stats_lock, NULL);
	log_limits(&agent.limits);
	log_startup_warnings(c);
	int rec = bk_recover(&agent.engine);
	if (rec > 0)
		log_warnf("recovery", "killed and removed %d exec(s) a previous agent left behind", rec);
	/* after the recovery read the previous agent's */
	if ((r = bk_records_open(c, &agent.engine.records)) < 0)
		log_warnf("records", "cannot make the record table %s/execs.table (%s): each exec is recorded in a file",
			  c->state_dir, strerror(-r));
	/* the node is unsafe until the first self-test passed */
	bk_selftest_run(&agent);
	if (bk_selftest_start(&agent) < 0)
		log_errorf("selftest", "cannot start the periodic self-test");
	if (bk_metrics_start(&agent, c->metrics, err, sizeof(err)) < 0) {
		fprintf(stderr, "boxkite-agent: %s\n", err);
		bk_selftest_stop();
		bk_engine_fini(&agent.engine);
		bk_signer_free(agent.signer);
		return 1;
	}
	int lfd = listen_unix(c->socket, 0666);
	int afd = lfd >= 0 ? listen_unix(c->admin_socket, 0600) : -1;
	if (lfd < 0 || afd < 0) {
		fprintf(stderr, "boxkite-agent: cannot listen on %s: %s\n", lfd < 0 ? c->socket : c->admin_socket,
			strerror(-(lfd < 0 ? lfd : afd)));
		bk_engine_fini(&agent.engine);
		bk_signer_free(agent.signer);
		return 1;
	}
	log_info("receipt_key", LS("key_id", bk_signer_key_id(agent.signer)), LB("created", key_created),
		 LS("path", keypath), LS("public_key", bk_signer_pubkey_pem(agent.signer)), LS("node", agent.node_name));
	log_infof("started", "boxkite-agent %s listening on %s (admin %s), bpffs %s", BK_VERSION, c->socket,
		  c->admin_socket, c->bpffs);
	serve(lfd, afd, sfd);
	pthread_mutex_lock(&wk.lock);
	wk.stopping = true;
	pthread_mutex_unlock(&wk.lock);
	log_infof("stopping", "signal received: draining");
	bk_events_shutdown();
	close(lfd);
	close(afd);
	unlink(c->socket);
	unlink(c->admin_socket);
	bk_procs_shutdown(&agent); /* background processes: killed, not left to the next agent */
	drain();
	bk_metrics_stop();
	bk_selftest_stop();
	bk_engine_fini(&agent.engine);
	bk_signer_free(agent.signer);
	log_infof("stopped", "boxkite-agent stopped");
	return 0;
}
