/* SPDX-License-Identifier: Apache-2.0 */
/* boxkite-agent: the privileged per-node agent. Listens on the agent socket
 * (shims; the caller's identity comes from the kernel) and the admin socket
 * (root only), and runs every exec in its own isolation context. */
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <getopt.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "agent/api/api.h"
#include "agent/observe/metrics.h"
#include "agent/observe/observe.h"
#include "agent/isolate/recover.h"
#include "lib/log.h"
#include "lib/proto.h"
#include "lib/util.h"

#define MAX_CONNS 256

static struct bk_agent agent;
static int active_conns;
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;

struct conn {
	int fd;
	enum bk_caller_kind kind;
};

static int send_text(int fd, char *txt)
{
	if (!txt)
		return -ENOMEM;
	int r = bk_send_msg(fd, txt, strlen(txt));
	free(txt);
	return r;
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	_cleanup_close_ int fd = c->fd;
	enum bk_caller_kind kind = c->kind;
	free(c);
	struct bk_pod pod;
	bk_pod_init(&pod);
	bool refused = false;
	char why[512] = "";
	if (kind == BK_CALLER_SHIM) {
		if (bk_pod_from_peer(&agent.cfg, fd, &pod, why, sizeof(why)) < 0) {
			refused = true;
			__atomic_add_fetch(&agent.refused_callers, 1, __ATOMIC_RELAXED);
			log_warnf("caller_refused", "%s", why);
		} else {
			log_info("caller_identified", LS("pod", pod.pod_name), LS("namespace", pod.pod_namespace),
				 LS("pod_uid", pod.pod_uid), LI("pid", pod.caller_pid), LS("via", pod.identified_via));
		}
	} else {
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != 0) {
			refused = true;
			snprintf(why, sizeof(why), "the admin socket is for root only");
			__atomic_add_fetch(&agent.refused_callers, 1, __ATOMIC_RELAXED);
			log_warnf("caller_refused", "admin socket: uid %d refused", (int)cr.uid);
		}
	}
	for (;;) {
		char *req = NULL;
		size_t len = 0;
		int r = bk_recv_msg(fd, BK_REQ_MAX, &req, &len);
		if (r == 1)
			break;
		if (r < 0) {
			/* answer once with the reason, then drop the connection */
			if (r != -ECONNRESET && r != -EPIPE)
				send_text(fd, bk_api_error(400, "bad_frame", "%s", bk_proto_strerror(r)));
			break;
		}
		bk_api_client_fd = fd;
		char *resp = refused ? bk_api_error(403, "caller_refused", "%s", why)
				     : bk_api_handle(&agent, kind, kind == BK_CALLER_SHIM ? &pod : NULL, req, len);
		free(req);
		if (send_text(fd, resp) < 0)
			break;
		if (refused)
			break;
	}
	pthread_mutex_lock(&conns_lock);
	active_conns--;
	pthread_mutex_unlock(&conns_lock);
	return NULL;
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
	if (r < 0 || chmod(path, mode) < 0 || listen(fd, 128) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: boxkite-agent [--config FILE] [--socket PATH] [--admin-socket PATH]\n"
		   "                     [--state-dir DIR] [--bpffs DIR] [--runtime-root DIR]... [--metrics ADDR]\n"
		   "                     [--check-config]\n");
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
		{ "check-config", no_argument, NULL, 'C' },
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

/* One detached thread per connection, at most MAX_CONNS at once. */
static void accept_one(int lfd, enum bk_caller_kind kind)
{
	int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (cfd < 0)
		return;
	pthread_mutex_lock(&conns_lock);
	bool full = active_conns >= MAX_CONNS;
	if (!full)
		active_conns++;
	pthread_mutex_unlock(&conns_lock);
	if (full) {
		send_text(cfd, bk_api_error(429, "too_many_connections", "the agent is at its connection limit"));
		close(cfd);
		return;
	}
	struct conn *cn = malloc(sizeof(*cn));
	pthread_t th;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (!cn || (cn->fd = cfd, cn->kind = kind, pthread_create(&th, &at, conn_main, cn)) != 0) {
		free(cn);
		close(cfd);
		pthread_mutex_lock(&conns_lock);
		active_conns--;
		pthread_mutex_unlock(&conns_lock);
	}
	pthread_attr_destroy(&at);
}

/* The accept loop, until SIGTERM/SIGINT arrives on sfd. */
static void serve(int lfd, int afd, int sfd)
{
	for (;;) {
		struct pollfd pf[3] = { { .fd = lfd, .events = POLLIN }, { .fd = afd, .events = POLLIN },
					{ .fd = sfd, .events = POLLIN } };
		if (poll(pf, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (pf[2].revents & POLLIN)
			return;
		if (pf[0].revents & POLLIN)
			accept_one(lfd, BK_CALLER_SHIM);
		if (pf[1].revents & POLLIN)
			accept_one(afd, BK_CALLER_ADMIN);
	}
}

/* In-flight requests finish (an exec is bounded by its timeout). */
static void drain(void)
{
	for (int i = 0; i < 36000; i++) {
		pthread_mutex_lock(&conns_lock);
		int n = active_conns;
		pthread_mutex_unlock(&conns_lock);
		if (n == 0 || agent.engine.live == 0)
			break;
		usleep(10000);
	}
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
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	int sfd = signalfd(-1, &ss, SFD_CLOEXEC);

	agent.start_ns = now_ns();
	if ((r = join_host_cgroupns()) < 0) {
		fprintf(stderr, "boxkite-agent: cannot join the host cgroup namespace (needs hostPID and CAP_SYS_ADMIN): %s\n",
			strerror(-r));
		return 1;
	}
	if (take_pin_lock(c->bpffs) < 0) {
		fprintf(stderr, "boxkite-agent: another boxkite-agent is running with pins in %s\n", c->bpffs);
		return 1;
	}
	r = mkdir_p(c->state_dir, 0700);
	if (r < 0) {
		fprintf(stderr, "boxkite-agent: cannot create state dir %s: %s\n", c->state_dir, strerror(-r));
		return 1;
	}
	char err[512] = "";
	r = bk_engine_init(&agent.engine, c, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "boxkite-agent: refusing to start: %s\n", err);
		bk_engine_fini(&agent.engine);
		return 1;
	}
	pthread_mutex_init(&agent.stats_lock, NULL);
	log_startup_warnings(c);
	int rec = bk_recover(&agent.engine);
	if (rec > 0)
		log_warnf("recovery", "killed and removed %d exec(s) a previous agent left behind", rec);
	/* the node is unsafe until the first self-test passed */
	bk_selftest_run(&agent);
	if (bk_selftest_start(&agent) < 0)
		log_errorf("selftest", "cannot start the periodic self-test");
	if (bk_metrics_start(&agent, c->metrics, err, sizeof(err)) < 0) {
		fprintf(stderr, "boxkite-agent: %s\n", err);
		bk_selftest_stop();
		bk_engine_fini(&agent.engine);
		return 1;
	}
	int lfd = listen_unix(c->socket, 0666);
	int afd = lfd >= 0 ? listen_unix(c->admin_socket, 0600) : -1;
	if (lfd < 0 || afd < 0) {
		fprintf(stderr, "boxkite-agent: cannot listen on %s: %s\n", lfd < 0 ? c->socket : c->admin_socket,
			strerror(-(lfd < 0 ? lfd : afd)));
		bk_engine_fini(&agent.engine);
		return 1;
	}
	log_infof("started", "boxkite-agent %s listening on %s (admin %s), bpffs %s", BK_VERSION, c->socket,
		  c->admin_socket, c->bpffs);
	serve(lfd, afd, sfd);
	log_infof("stopping", "signal received: draining");
	close(lfd);
	close(afd);
	unlink(c->socket);
	unlink(c->admin_socket);
	drain();
	bk_metrics_stop();
	bk_selftest_stop();
	bk_engine_fini(&agent.engine);
	log_infof("stopped", "boxkite-agent stopped");
	return 0;
}
