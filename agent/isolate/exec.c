/* SPDX-License-Identifier: Apache-2.0 */
#include "agent/isolate/exec.h"
#include "agent/isolate/landlock.h"
#include "agent/isolate/privs.h"
#include "agent/isolate/recover.h"
#include "lib/log.h"
#include "lib/util.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/random.h>
#include <sys/wait.h>

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

struct bk_exec_slot {
	uint64_t cgid;
	struct bk_exec_result *res;
};

#define MAX_SLOTS 1024

/* ---- denial events --------------------------------------------------------- */

static void on_event(const struct bk_event *ev, void *ud)
{
	struct bk_engine *e = ud;
	pthread_mutex_lock(&e->lock);
	struct bk_exec_result *res = NULL;
	for (int i = 0; i < e->nslots; i++)
		if (e->slots[i].cgid == ev->cgroup_id && e->slots[i].res) {
			res = e->slots[i].res;
			break;
		}
	if (!res) {
		e->events_unmatched++;
		pthread_mutex_unlock(&e->lock);
		return;
	}
	res->denied_total++;
	if (res->n_denied < BK_DENIED_MAX && ev->hook != BK_H_SOCK_CREATE) {
		struct bk_denial *d = &res->denied[res->n_denied++];
		memset(d, 0, sizeof(*d));
		if (ev->family == AF_INET6)
			inet_ntop(AF_INET6, ev->addr, d->dst, sizeof(d->dst));
		else
			inet_ntop(AF_INET, ev->addr, d->dst, sizeof(d->dst));
		d->port = ev->port;
		snprintf(d->proto, sizeof(d->proto), "%s",
			 ev->proto == IPPROTO_TCP ? "tcp" : ev->proto == IPPROTO_UDP ? "udp" :
			 (ev->proto == IPPROTO_ICMP || ev->proto == IPPROTO_ICMPV6) ? "icmp" : "ip");
		d->pid = ev->pid;
		memcpy(d->comm, ev->comm, sizeof(d->comm) - 1);
		snprintf(d->reason, sizeof(d->reason), "%s", bk_reason_name(ev->reason));
	} else if (res->n_denied < BK_DENIED_MAX) {
		struct bk_denial *d = &res->denied[res->n_denied++];
		memset(d, 0, sizeof(*d));
		snprintf(d->dst, sizeof(d->dst), "socket");
		snprintf(d->proto, sizeof(d->proto), "%s", ev->proto == IPPROTO_ICMP || ev->proto == IPPROTO_ICMPV6 ? "icmp" : "raw");
		d->pid = ev->pid;
		memcpy(d->comm, ev->comm, sizeof(d->comm) - 1);
		snprintf(d->reason, sizeof(d->reason), "%s", bk_reason_name(ev->reason));
	}
	pthread_mutex_unlock(&e->lock);
}

static void *rb_main(void *arg)
{
	struct bk_engine *e = arg;
	while (!e->stop)
		bk_filter_events_poll(e->filter, 100, on_event, e);
	return NULL;
}

static void drain_events(struct bk_engine *e)
{
	/* Events are submitted before the denied syscall returns, so one
	 * non-blocking pass after the exec finished sees all of its own. */
	if (e->filter)
		bk_filter_events_poll(e->filter, 0, on_event, e);
}

static int slot_add(struct bk_engine *e, uint64_t cgid, struct bk_exec_result *res)
{
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < e->nslots; i++)
		if (!e->slots[i].res) {
			e->slots[i].cgid = cgid;
			e->slots[i].res = res;
			e->live++;
			pthread_mutex_unlock(&e->lock);
			return 0;
		}
	pthread_mutex_unlock(&e->lock);
	return -EBUSY;
}

static void slot_del(struct bk_engine *e, struct bk_exec_result *res)
{
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < e->nslots; i++)
		if (e->slots[i].res == res) {
			e->slots[i].res = NULL;
			e->slots[i].cgid = 0;
			e->live--;
		}
	pthread_mutex_unlock(&e->lock);
}

/* ---- network namespace pool ------------------------------------------------------ */

/* Make a fresh netns with lo up from this thread (unshare affects only the
 * calling thread), keep an fd to it, and return the thread to the agent's
 * own namespace. */
int bk_engine_fresh_netns(struct bk_engine *e);

static int netns_make(struct bk_engine *e)
{
	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	int r = bk_netns_lo_up();
	int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int saved = errno;
	if (setns(e->self_netns, CLONE_NEWNET) < 0) {
		log_errorf("netns_restore", "cannot return to the agent's network namespace: %s", strerror(errno));
		abort(); /* never serve from a thread in the wrong netns */
	}
	if (fd < 0)
		return -saved;
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

int bk_engine_fresh_netns(struct bk_engine *e)
{
	return netns_make(e);
}

static void *netns_filler(void *arg)
{
	struct bk_engine *e = arg;
	/* refill only with CPU nobody else wants: execs come first */
	struct sched_param sp = { 0 };
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	pthread_mutex_lock(&e->lock);
	while (!e->stop) {
		if (e->netns_n == (int)ARRAY_SIZE(e->netns_pool)) {
			pthread_cond_wait(&e->netns_cond, &e->lock);
			continue;
		}
		pthread_mutex_unlock(&e->lock);
		int fd = netns_make(e);
		pthread_mutex_lock(&e->lock);
		if (fd < 0) {
			/* the exec path makes its own and reports the error */
			pthread_mutex_unlock(&e->lock);
			usleep(100000);
			pthread_mutex_lock(&e->lock);
			continue;
		}
		e->netns_pool[e->netns_n++] = fd;
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

static int netns_take(struct bk_engine *e)
{
	int fd = -1;
	pthread_mutex_lock(&e->lock);
	if (e->netns_n > 0)
		fd = e->netns_pool[--e->netns_n];
	pthread_cond_signal(&e->netns_cond);
	pthread_mutex_unlock(&e->lock);
	return fd >= 0 ? fd : netns_make(e);
}

/* ---- engine ------------------------------------------------------------------ */

int bk_engine_init(struct bk_engine *e, struct bk_config *cfg, char *err, size_t errlen)
{
	memset(e, 0, sizeof(*e));
	e->cfg = cfg;
	e->self_pidns = e->devnull = -1;
	pthread_mutex_init(&e->lock, NULL);
	int r = bk_cgroup_discover(&e->mounts);
	if (r < 0) {
		snprintf(err, errlen, "cgroup: no cgroup2 hierarchy mounted (needed for the BPF layer and cgroup.kill)");
		return r;
	}
	e->self_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
	e->self_netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	pthread_cond_init(&e->netns_cond, NULL);
	e->cap_last = 63;
	_cleanup_free_ char *cl = NULL;
	uint64_t v;
	if (read_file_at(AT_FDCWD, "/proc/sys/kernel/cap_last_cap", 64, &cl, NULL) == 0 && (cl[strcspn(cl, "\n")] = '\0', parse_u64(cl, &v) == 0) && v < 64)
		e->cap_last = (int)v;
	e->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (e->self_pidns < 0 || e->self_netns < 0 || e->devnull < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot open /proc/self/ns/pid or /dev/null: %s", strerror(-r));
		return r;
	}
	e->slots = calloc(MAX_SLOTS, sizeof(*e->slots));
	if (!e->slots)
		return -ENOMEM;
	e->nslots = MAX_SLOTS;
	if (cfg->layer_netns) {
		int fd = netns_make(e);
		if (fd < 0) {
			snprintf(err, errlen, "netns: cannot create a network namespace: %s", strerror(-fd));
			return fd;
		}
		e->netns_pool[e->netns_n++] = fd;
		r = pthread_create(&e->netns_thread, NULL, netns_filler, e);
		if (r) {
			snprintf(err, errlen, "cannot start the netns pool thread: %s", strerror(r));
			return -r;
		}
		e->netns_thread_started = true;
	}
	if (cfg->layer_bpf) {
		const char *base = strrchr(cfg->bpffs, '/');
		snprintf(e->keepalive, sizeof(e->keepalive), "%s/%s-keepalive", e->mounts.v2, base ? base + 1 : cfg->bpffs);
		char ferr[400] = "";
		r = bk_filter_open(cfg->bpffs, e->keepalive, &e->filter, ferr, sizeof(ferr));
		if (r < 0) {
			snprintf(err, errlen, "bpf: %s", ferr);
			return r;
		}
		r = bk_filter_load_policy(e->filter, &cfg->policy, ferr, sizeof(ferr));
		if (r < 0) {
			snprintf(err, errlen, "bpf: %s", ferr);
			return r;
		}
		r = pthread_create(&e->rb_thread, NULL, rb_main, e);
		if (r) {
			snprintf(err, errlen, "cannot start the ring buffer thread: %s", strerror(r));
			return -r;
		}
	}
	return 0;
}

void bk_engine_fini(struct bk_engine *e)
{
	e->stop = 1;
	if (e->netns_thread_started) {
		pthread_mutex_lock(&e->lock);
		pthread_cond_signal(&e->netns_cond);
		pthread_mutex_unlock(&e->lock);
		pthread_join(e->netns_thread, NULL);
		e->netns_thread_started = false;
	}
	for (int i = 0; i < e->netns_n; i++)
		close(e->netns_pool[i]);
	e->netns_n = 0;
	closep(&e->self_netns);
	if (e->filter) {
		pthread_join(e->rb_thread, NULL);
		bk_filter_close(e->filter);
		e->filter = NULL;
	}
	closep(&e->self_pidns);
	closep(&e->devnull);
	free(e->slots);
	e->slots = NULL;
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->netns_cond);
}

void bk_exec_result_free(struct bk_exec_result *r)
{
	free(r->out);
	free(r->err);
	free(r->policy_rules);
	r->out = r->err = r->policy_rules = NULL;
}

/* ---- policy inputs of one exec ----------------------------------------------------- */

static int add_local(struct bk_filter_att *att, const unsigned char *a16, uint32_t kind)
{
	for (int i = 0; i < att->n_locals; i++)
		if (!memcmp(att->locals[i].addr, a16, 16))
			return 0;
	if (att->n_locals == BK_MAX_LOCALS)
		return -E2BIG;
	memcpy(att->locals[att->n_locals].addr, a16, 16);
	att->locals[att->n_locals].kind = kind;
	att->n_locals++;
	return 0;
}

/* The pod's own addresses (denied to an exec that shares its netns). */
static int pod_addrs(struct bk_engine *e, const struct bk_pod *pod, struct bk_filter_att *att)
{
	if (setns(pod->sandbox_pidfd, CLONE_NEWNET) < 0)
		return -errno;
	unsigned char a[BK_MAX_LOCALS][16];
	int n = bk_netns_addrs(a, BK_MAX_LOCALS);
	if (setns(e->self_netns, CLONE_NEWNET) < 0) {
		log_errorf("netns_restore", "cannot return to the agent's network namespace: %s", strerror(errno));
		abort();
	}
	for (int i = 0; i < n; i++)
		add_local(att, a[i], BK_LOCAL_SELF);
	return n < 0 ? n : 0;
}

/* The pod's resolvers, from the sandbox container's own resolv.conf,
 * resolved beneath its root (a symlink there cannot point us elsewhere). */
static int pod_resolvers(const struct bk_pod *pod, struct bk_filter_att *att)
{
	char root[64];
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pod->sandbox.init_pid);
	_cleanup_close_ int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return -errno;
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	_cleanup_close_ int fd = (int)syscall(SYS_openat2, rfd, "etc/resolv.conf", &how, sizeof(how));
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	char buf[8192];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	char *save = NULL;
	for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char addr[64];
		if (sscanf(l, " nameserver %63s", addr) != 1)
			continue;
		unsigned char a16[16] = { 0 };
		if (inet_pton(AF_INET, addr, a16 + 12) == 1) {
			a16[10] = a16[11] = 0xff;
		} else if (inet_pton(AF_INET6, addr, a16) != 1)
			continue;
		add_local(att, a16, BK_LOCAL_RESOLVER);
	}
	return 0;
}

static void policy_receipt(const struct bk_config *c, const struct bk_profile *p, const struct bk_filter_att *att,
			   struct bk_exec_result *res)
{
	size_t cap = 16384;
	char *txt = malloc(cap);
	if (!txt)
		return;
	int n = bk_policy_canon(&c->policy, p, txt, cap);
	size_t off = n > 0 ? (size_t)n : 0;
	for (int i = 0; i < att->n_locals; i++) {
		char a[INET6_ADDRSTRLEN];
		const unsigned char *x = att->locals[i].addr;
		bool v4 = !memcmp(x, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);
		inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? x + 12 : x, a, sizeof(a));
		int w = snprintf(txt + off, cap - off, "%s %s\n", att->locals[i].kind == BK_LOCAL_SELF ? "self" : "resolver", a);
		if (w > 0 && (size_t)w < cap - off)
			off += (size_t)w;
	}
	unsigned char md[32];
	unsigned int ml = 0;
	EVP_Digest(txt, off, md, &ml, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(res->policy_digest + 2 * i, 3, "%02x", md[i]);
	snprintf(res->policy, sizeof(res->policy), "%s", p->name);
	res->policy_rules = txt;
}

/* ---- the child ----------------------------------------------------------------- */

struct child_msg {
	int kind; /* 1 ready, 2 error */
	int err;
	char layer[24];
	char msg[200];
	uint64_t netns_ino;
	int n_if;
	char ifaces[BK_MAX_IFACES][IFNAMSIZ];
};

struct child_args {
	int info_fd, out_fd, err_fd, devnull;
	int pidfd;                /* sandbox container init */
	int pids_procs, mem_procs;
	bool fresh_netns;
	int netns_fd;
	int landlock_fd;
	int cap_last;
	const char *fault;
	uid_t uid;
	gid_t gid;
	const char *cwd;
	char *const *argv;
	char *const *envp;
};

/* Only async-signal-safe work from here on: this runs in a clone3() child of
 * a multi-threaded process (no malloc, no stdio, no locks). */
static void child_fail(const struct child_args *a, const char *layer, const char *what, int err)
{
	struct child_msg m;
	memset(&m, 0, sizeof(m));
	m.kind = 2;
	m.err = err;
	size_t l = strlen(layer);
	memcpy(m.layer, layer, l < sizeof(m.layer) - 1 ? l : sizeof(m.layer) - 1);
	l = strlen(what);
	memcpy(m.msg, what, l < sizeof(m.msg) - 1 ? l : sizeof(m.msg) - 1);
	(void)!write(a->info_fd, &m, sizeof(m));
	_exit(127);
}

static bool fault_is(const struct child_args *a, const char *f) { return a->fault && streq(a->fault, f); }

static int write0(int fd)
{
	return write(fd, "0", 1) == 1 ? 0 : -errno;
}

/* The monitor: parent of the command, unprivileged, holds no descriptor,
 * exits with the command's status. */
static _Noreturn void monitor(const struct child_args *a, pid_t cmd)
{
	syscall(SYS_close_range, 0, ~0U, 0);
	if (bk_privs_drop(a->uid, a->gid, a->cap_last) < 0) {
		kill(cmd, SIGKILL);
		_exit(127);
	}
	int st;
	while (waitpid(cmd, &st, 0) < 0)
		if (errno != EINTR)
			_exit(127);
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static _Noreturn void child_main(const struct child_args *a)
{
	struct child_msg ready;
	memset(&ready, 0, sizeof(ready));
	ready.kind = 1;

	/* 1. the v1 hierarchies (hybrid hosts): join them before anything runs */
	if (a->pids_procs >= 0 && write0(a->pids_procs) < 0)
		child_fail(a, "cgroup", "cannot join the v1 pids cgroup", errno);
	if (a->mem_procs >= 0 && write0(a->mem_procs) < 0)
		child_fail(a, "cgroup", "cannot join the v1 memory cgroup", errno);

	/* 3. network: a fresh namespace (made by the agent, never used, lo up)
	 * must hold nothing but lo */
	if (a->fresh_netns) {
		if (fault_is(a, "netns"))
			child_fail(a, "netns", "injected fault: netns setup refused", EPERM);
		if (setns(a->netns_fd, CLONE_NEWNET) < 0)
			child_fail(a, "netns", "cannot enter the exec network namespace", errno);
	} else if (setns(a->pidfd, CLONE_NEWNET) < 0) {
		child_fail(a, "netns", "cannot join the pod network namespace", errno);
	}
	int n = bk_netns_list(ready.ifaces, BK_MAX_IFACES);
	if (n < 0)
		child_fail(a, "netns", "cannot list interfaces of the exec network namespace", -n);
	ready.n_if = n;
	if (a->fresh_netns && (n != 1 || !streq(ready.ifaces[0], "lo")))
		child_fail(a, "netns", "the fresh network namespace has interfaces other than lo", EEXIST);
	struct stat st;
	if (stat("/proc/self/ns/net", &st) < 0)
		child_fail(a, "netns", "cannot stat the exec network namespace", errno);
	ready.netns_ino = st.st_ino;

	/* 4. the sandbox container */
	if (fault_is(a, "setns"))
		child_fail(a, "container", "injected fault: setns refused", EPERM);
	if (setns(a->pidfd, CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP) < 0)
		child_fail(a, "container", "cannot enter the sandbox container's namespaces", errno);
	/* The command runs as init of a fresh pid namespace below the
	 * container's: when it exits the kernel kills whatever it left behind,
	 * and orphans never land on the container's own init (which may not
	 * reap them). This process stays as its parent and reports its exit. */
	if (fault_is(a, "pidns"))
		child_fail(a, "container", "injected fault: pid namespace refused", EPERM);
	long cmd_pid = syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, NULL, NULL, 0);
	if (cmd_pid < 0)
		child_fail(a, "container", "cannot create the exec pid namespace", errno);
	if (cmd_pid > 0)
		monitor(a, (pid_t)cmd_pid);
	/* Its own /proc: the container's shows every exec of the pod, all
	 * running as the same user, so one exec could read another's
	 * /proc/PID/environ (secret_env) or memory. A private mount namespace
	 * (a copy of the container's: /workspace is still shared) with a proc
	 * of the exec's own pid namespace shows only its own processes. */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		child_fail(a, "container", "cannot create the exec's mount namespace", errno);
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		child_fail(a, "container", "cannot mount the exec's /proc", errno);
	if (dup2(a->devnull, 0) < 0 || dup2(a->out_fd, 1) < 0 || dup2(a->err_fd, 2) < 0)
		child_fail(a, "container", "cannot set up stdio", errno);
	struct rlimit nofile = { 1024, 1024 }, core = { 0, 0 };
	if (setrlimit(RLIMIT_NOFILE, &nofile) < 0 || setrlimit(RLIMIT_CORE, &core) < 0)
		child_fail(a, "container", "cannot set rlimits", errno);
	int dr = bk_privs_drop(a->uid, a->gid, a->cap_last);
	if (dr < 0)
		child_fail(a, "container", "cannot drop privileges to the sandbox user", -dr);
	/* the kernel's execute allowlist (no_new_privs is set above) */
	if (a->landlock_fd >= 0 && (dr = bk_landlock_apply(a->landlock_fd)) < 0)
		child_fail(a, "landlock", "cannot apply the Landlock execute allowlist", -dr);
	if (chdir(a->cwd) < 0)
		child_fail(a, "container", "cannot change to the working directory", errno);
	if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		child_fail(a, "container", "cannot close inherited file descriptors", errno);
	(void)!write(a->info_fd, &ready, sizeof(ready));
	execve("/bin/sh", a->argv, a->envp);
	child_fail(a, "exec", "cannot execute /bin/sh in the sandbox container", errno);
	_exit(127);
}

/* ---- the parent ------------------------------------------------------------------- */

#define R_FAIL(layer_, err_, ...)                                                              \
	({                                                                                     \
		snprintf(res->layer, sizeof(res->layer), "%s", layer_);                        \
		snprintf(res->error, sizeof(res->error), __VA_ARGS__);                         \
		(err_) < 0 ? (err_) : -EIO;                                                    \
	})

static int append(char **buf, size_t *len, size_t *cap, const char *src, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t nc = *cap ? *cap : 4096;
		while (nc < *len + n + 1)
			nc *= 2;
		char *nb = realloc(*buf, nc);
		if (!nb)
			return -ENOMEM;
		*buf = nb;
		*cap = nc;
	}
	memcpy(*buf + *len, src, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

/* Read back, from the kernel, which programs are attached to the exec
 * cgroup; every one of ours must be there. */
static int verify_attached(struct bk_engine *e, int cg_fd, struct bk_exec_result *res)
{
	if (bk_filter_attached(e->filter, cg_fd) != BK_NPROGS)
		return -ENOENT;
	memcpy(res->progs, bk_filter_progs(e->filter), sizeof(res->progs));
	res->n_progs = BK_NPROGS;
	return 0;
}

static void new_exec_id(char *out, size_t len)
{
	uint8_t b[8];
	if (getrandom(b, sizeof(b), 0) != sizeof(b))
		memset(b, 0, sizeof(b));
	snprintf(out, len, "%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
}

int bk_exec_run(struct bk_engine *e, const struct bk_pod *pod, const struct bk_exec_req *req,
		struct bk_exec_result *res)
{
	const struct bk_config *c = e->cfg;
	uint64_t t0 = now_ns();
	int r;
	memset(res, 0, sizeof(*res));
	new_exec_id(res->exec_id, sizeof(res->exec_id));
	const struct bk_profile *prof = req->profile;
	bool fresh = c->layer_netns && prof->fresh_netns;
	res->fresh_netns = fresh;
	res->uid = pod->uid;
	res->gid = pod->gid;
	if (pod->uid == 0)
		return R_FAIL("container", -EPERM, "the sandbox container runs as root; boxkite only runs commands as a non-root sandbox user");

	/* 1. cgroup */
	struct bk_exec_cg cg;
	bk_exec_cg_init(&cg);
	char name[64], cerr[512] = "";
	snprintf(name, sizeof(name), "boxkite-exec-%s", res->exec_id);
	struct bk_filter_att att = { .attached = false };
	for (int i = 0; i < BK_NPROGS; i++)
		att.link_fd[i] = -1;
	int pidfd = -1, out_p[2] = { -1, -1 }, err_p[2] = { -1, -1 }, info_p[2] = { -1, -1 }, netns_fd = -1;
	bool slotted = false, recorded = false, spawned_called = false;
	size_t ocap = 0, ecap = 0;

	if (streq(c->fault, "cgroup")) {
		r = R_FAIL("cgroup", -EACCES, "injected fault: exec cgroup creation refused");
		goto out;
	}
	r = bk_exec_cg_create(&e->mounts, pod->pod_v2, pod->pod_pids[0] ? pod->pod_pids : NULL,
			      pod->pod_mem[0] ? pod->pod_mem : NULL, name, c->pids_max, c->memory_max, &cg, cerr,
			      sizeof(cerr));
	if (r < 0) {
		r = R_FAIL("cgroup", r, "%s", cerr);
		goto out;
	}
	/* recorded before anything can run in it: a new agent finds it */
	r = bk_exec_state_write(c, res->exec_id, &cg, pod);
	if (r < 0) {
		r = R_FAIL("cgroup", r, "cannot record the exec in the state directory %s: %s", c->state_dir, strerror(-r));
		goto out;
	}
	recorded = true;
	snprintf(res->cgroup, sizeof(res->cgroup), "%s", cg.v2);
	snprintf(res->cgroup_pids, sizeof(res->cgroup_pids), "%s", cg.pids);
	snprintf(res->cgroup_memory, sizeof(res->cgroup_memory), "%s", cg.memory);
	res->cgroup_id = cg.id;
	res->pids_max = cg.pids_max;
	res->memory_max = cg.memory_max;

	uint64_t tp = now_ns();
	res->t_us[0] = (uint32_t)((tp - t0) / 1000);
	/* 2. BPF */
	if (e->filter) {
		if (streq(c->fault, "bpf")) {
			r = R_FAIL("bpf", -EPERM, "injected fault: BPF attach refused");
			goto out;
		}
		struct bk_policy pol = {
			.flags = (fresh ? BK_POL_ALLOW_LOOPBACK : 0) | (prof->icmp ? BK_POL_ALLOW_ICMP : 0) |
				 (prof->dns ? BK_POL_ALLOW_DNS : 0),
			.profile = prof->id,
		};
		if (!fresh && (r = pod_addrs(e, pod, &att)) < 0) {
			r = R_FAIL("bpf", r, "cannot read the pod's own addresses: %s", strerror(-r));
			goto out;
		}
		if (prof->dns && (r = pod_resolvers(pod, &att)) < 0) {
			r = R_FAIL("bpf", r, "cannot read the pod's resolvers: %s", strerror(-r));
			goto out;
		}
		policy_receipt(c, prof, &att, res);
		r = bk_filter_attach(e->filter, cg.v2_fd, cg.id, res->exec_id, pol, &att, cerr, sizeof(cerr));
		if (r < 0) {
			r = R_FAIL("bpf", r, "%s", cerr);
			goto out;
		}
		r = verify_attached(e, cg.v2_fd, res);
		if (r < 0) {
			r = R_FAIL("bpf", r, "the exec cgroup does not carry every boxkite program after attach");
			goto out;
		}
		if (slot_add(e, cg.id, res) == 0)
			slotted = true;
	}

	res->t_us[1] = (uint32_t)((now_ns() - tp) / 1000);
	tp = now_ns();
	/* 3 + 4: spawn */
	if (pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0 || pipe2(info_p, O_CLOEXEC) < 0) {
		r = R_FAIL("exec", -errno, "cannot create pipes: %s", strerror(errno));
		goto out;
	}
	if (fresh) {
		netns_fd = netns_take(e);
		if (netns_fd < 0) {
			r = R_FAIL("netns", netns_fd, "cannot create the exec network namespace: %s", strerror(-netns_fd));
			netns_fd = -1;
			goto out;
		}
	}
	char *argv[] = { "sh", "-c", (char *)req->command, NULL };
	struct child_args ca = {
		.info_fd = info_p[1], .out_fd = out_p[1], .err_fd = err_p[1], .devnull = e->devnull,
		.pidfd = pod->sandbox_pidfd, .pids_procs = cg.pids_procs_fd, .mem_procs = cg.mem_procs_fd,
		.fresh_netns = fresh, .netns_fd = netns_fd, .landlock_fd = req->landlock_fd, .cap_last = e->cap_last, .fault = c->fault[0] ? c->fault : NULL,
		.uid = pod->uid, .gid = pod->gid, .cwd = req->cwd ? req->cwd : "/workspace",
		.argv = argv, .envp = req->env,
	};
	/* The child is born in the container's pid namespace: the thread's
	 * pid_for_children is switched for this clone only. */
	if (setns(pod->sandbox_pidfd, CLONE_NEWPID) < 0) {
		r = R_FAIL("container", -errno, "cannot enter the sandbox container's pid namespace: %s", strerror(errno));
		goto out;
	}
	struct clone_args args = {
		.flags = CLONE_PIDFD | CLONE_INTO_CGROUP,
		.pidfd = (uint64_t)(uintptr_t)&pidfd,
		.exit_signal = SIGCHLD,
		.cgroup = (uint64_t)cg.v2_fd,
	};
	long pid = syscall(SYS_clone3, &args, sizeof(args));
	int clone_errno = errno;
	if (pid == 0)
		child_main(&ca);
	if (req->spawned && !spawned_called) {
		spawned_called = true;
		req->spawned(req->spawned_ud);
	}
	if (setns(e->self_pidns, CLONE_NEWPID) < 0) {
		/* cannot happen for our own namespace; never spawn from a
		 * thread whose pid_for_children is wrong */
		log_errorf("pidns_restore", "cannot return to the agent's pid namespace: %s", strerror(errno));
		abort();
	}
	if (pid < 0) {
		r = R_FAIL("cgroup", -clone_errno, "clone3 into the exec cgroup failed: %s",
			   strerror(clone_errno));
		goto out;
	}
	closep(&info_p[1]);
	closep(&out_p[1]);
	closep(&err_p[1]);
	info_p[1] = out_p[1] = err_p[1] = -1;

	/* setup report from the child: ready (then EOF at execve) or error */
	struct child_msg m, last = { 0 };
	for (;;) {
		struct pollfd pf = { .fd = info_p[0], .events = POLLIN };
		int pr = poll(&pf, 1, 10000);
		if (pr <= 0) {
			last.kind = 2;
			snprintf(last.layer, sizeof(last.layer), "exec");
			snprintf(last.msg, sizeof(last.msg), "the exec child did not finish its setup in time");
			break;
		}
		ssize_t n = read(info_p[0], &m, sizeof(m));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (n == sizeof(m))
			last = m;
	}
	if (last.kind != 1) {
		if (last.kind == 0) {
			last.kind = 2;
			snprintf(last.layer, sizeof(last.layer), "exec");
			snprintf(last.msg, sizeof(last.msg), "the exec child died during setup");
		}
		bk_exec_cg_kill(&cg, 2000);
		siginfo_t si;
		waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED);
		r = R_FAIL(last.layer, -(last.err ? last.err : EIO), "%s%s%s", last.msg, last.err ? ": " : "",
			   last.err ? strerror(last.err) : "");
		goto out;
	}
	res->t_us[2] = (uint32_t)((now_ns() - tp) / 1000);
	res->landlock = req->landlock_fd >= 0;
	res->netns_inode = last.netns_ino;
	res->n_ifaces = last.n_if < BK_MAX_IFACES ? last.n_if : BK_MAX_IFACES;
	memcpy(res->ifaces, last.ifaces, sizeof(res->ifaces));

	/* 5. run: collect output, enforce caps and the timeout */
	uint64_t deadline = t0 + (uint64_t)req->timeout_s * 1000000000ull;
	bool exited = false, out_eof = false, err_eof = false, killed = false;
	uint64_t kill_deadline = 0;
	int status = 0;
	char buf[65536];
	while (!(exited && out_eof && err_eof)) {
		struct pollfd pf[4];
		int np = 0, io = -1, ie = -1, ip = -1, ic = -1;
		if (!out_eof) { io = np; pf[np++] = (struct pollfd){ .fd = out_p[0], .events = POLLIN }; }
		if (!err_eof) { ie = np; pf[np++] = (struct pollfd){ .fd = err_p[0], .events = POLLIN }; }
		if (!exited) { ip = np; pf[np++] = (struct pollfd){ .fd = pidfd, .events = POLLIN }; }
		/* nobody is left to read the answer: do not leave the exec running */
		if (req->client_fd >= 0 && !killed) { ic = np; pf[np++] = (struct pollfd){ .fd = req->client_fd, .events = POLLRDHUP }; }
		uint64_t now = now_ns();
		uint64_t until = killed ? kill_deadline : deadline;
		int to = until > now ? (int)((until - now) / 1000000) + 1 : 0;
		int pr = poll(pf, (nfds_t)np, to);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0) {
			if (killed)
				break; /* nothing left that could write: stop waiting */
			res->timed_out = true;
			bk_exec_cg_kill(&cg, 0);
			killed = true;
			kill_deadline = now_ns() + 5000000000ull;
			continue;
		}
		if (ic >= 0 && (pf[ic].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			res->requester_gone = true;
			bk_exec_cg_kill(&cg, 0);
			killed = true;
			kill_deadline = now_ns() + 5000000000ull;
		}
		for (int k = 0; k < 2; k++) {
			int idx = k == 0 ? io : ie;
			if (idx < 0 || !(pf[idx].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t n = read(pf[idx].fd, buf, sizeof(buf));
			if (n <= 0) {
				if (n < 0 && errno == EINTR)
					continue;
				if (k == 0) out_eof = true; else err_eof = true;
				continue;
			}
			char **b = k == 0 ? &res->out : &res->err;
			size_t *bl = k == 0 ? &res->outlen : &res->errlen;
			size_t *bc = k == 0 ? &ocap : &ecap;
			size_t room = *bl < req->out_cap ? req->out_cap - *bl : 0;
			size_t take = (size_t)n < room ? (size_t)n : room;
			if (take && append(b, bl, bc, buf, take) < 0) {
				res->truncated = true;
				take = 0;
			}
			if (take < (size_t)n && !res->truncated) {
				res->truncated = true;
			}
			if (res->truncated && !killed) {
				bk_exec_cg_kill(&cg, 0);
				killed = true;
				kill_deadline = now_ns() + 5000000000ull;
			}
		}
		if (ip >= 0 && (pf[ip].revents & POLLIN)) {
			siginfo_t si = { 0 };
			if (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) == 0) {
				exited = true;
				status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
				/* whatever the command left behind dies with it */
				if (!killed) {
					bk_exec_cg_kill(&cg, 0);
					killed = true;
					kill_deadline = now_ns() + 5000000000ull;
				}
			}
		}
	}
	if (!exited) {
		siginfo_t si = { 0 };
		bk_exec_cg_kill(&cg, 2000);
		if (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) == 0)
			status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
	}
	res->exit_code = res->timed_out ? 124 : status;
	/* did the BPF layer hold until the end? (read back again) */
	res->bpf_held = !e->filter || bk_filter_attached(e->filter, cg.v2_fd) == BK_NPROGS;
	if (!res->out)
		res->out = strdup("");
	if (!res->err)
		res->err = strdup("");
	r = 0;
	res->t_us[3] = (uint32_t)((now_ns() - tp) / 1000);
out:
	if (req->spawned && !spawned_called)
		req->spawned(req->spawned_ud);
	tp = now_ns();
	if (cg.v2[0]) {
		int kr = bk_exec_cg_kill(&cg, 5000);
		if (kr < 0)
			log_errorf("exec_cleanup", "exec %s: processes survive in %s: %s", res->exec_id, cg.v2, strerror(-kr));
	}
	drain_events(e);
	if (slotted)
		slot_del(e, res);
	if (e->filter && att.attached) {
		uint64_t tot = bk_filter_denied(e->filter, att.cgid);
		if (tot > res->denied_total)
			res->denied_total = tot;
	}
	if (!res->policy[0])
		snprintf(res->policy, sizeof(res->policy), "%s", prof->name);
	if (e->filter)
		bk_filter_detach(e->filter, &att);
	int dr = bk_exec_cg_destroy(&cg);
	if (dr < 0)
		log_errorf("exec_cleanup", "exec %s: cannot remove its cgroups (left for the next agent start): %s",
			  res->exec_id, strerror(-dr));
	else if (recorded)
		bk_exec_state_remove(c, res->exec_id);
	closep(&pidfd);
	closep(&netns_fd);
	closep(&out_p[0]); closep(&out_p[1]);
	closep(&err_p[0]); closep(&err_p[1]);
	closep(&info_p[0]); closep(&info_p[1]);
	res->t_us[4] = (uint32_t)((now_ns() - tp) / 1000);
	res->duration_ms = (double)(now_ns() - t0) / 1e6;
	return r;
}
