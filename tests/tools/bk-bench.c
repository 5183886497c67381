/* SPDX-License-Identifier: Apache-2.0 */
/* Latency/throughput measurements for `make bench`.
 *   bk-bench exec ADMIN_SOCK SANDBOX[,SANDBOX...] N CONC
 *                                             exec of "true" over the admin socket; with
 *                                             several sandboxes, the execs go round-robin
 *                                             over them (the density run)
 *   bk-bench spawn N CMD [ARG...]             fork+exec+wait of CMD
 *   bk-bench floor N PID CGROUP_DIR           the kernel steps of an exec alone, no
 *                                             agent: see floor_once (x86-64)
 * Prints one JSON object: n, errors, p50_us, p99_us, mean_us, per_sec.
 * With BK_BENCH_SAMPLES=FILE, every latency in microseconds, one a line, in
 * the order measured (the plot's raw samples). BK_BENCH_CMD: the exec's
 * command instead of "true" (plain text: no quotes or backslashes). */
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "agent/isolate/seccomp.h"
#include "lib/clone3.h"
#include "lib/proto.h"
#include "lib/util.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void report(uint64_t *lat, int n, int errors, uint64_t wall_ns)
{
	const char *sf = getenv("BK_BENCH_SAMPLES");
	if (sf && sf[0]) {
		FILE *f = fopen(sf, "w");
		if (!f) {
			fprintf(stderr, "bk-bench: cannot write %s: %s\n", sf, strerror(errno));
			exit(1);
		}
		for (int i = 0; i < n; i++)
			fprintf(f, "%.1f\n", lat[i] / 1e3);
		if (fclose(f) != 0) {
			fprintf(stderr, "bk-bench: cannot write %s\n", sf);
			exit(1);
		}
	}
	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += (double)lat[i];
	int i99 = (int)((n - 1) * 0.99);
	printf("{\"n\":%d,\"errors\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f,\"per_sec\":%.1f}\n", n, errors,
	       n ? lat[(n - 1) / 2] / 1e3 : 0, n ? lat[i99] / 1e3 : 0, n ? sum / n / 1e3 : 0,
	       wall_ns ? n * 1e9 / (double)wall_ns : 0);
}

struct worker {
	const char *sock;
	char **sandboxes; /* round-robin, from first */
	int n_sandboxes, first;
	int n;
	uint64_t *lat;
	int errors;
};

static void *exec_worker(void *arg)
{
	struct worker *w = arg;
	int fd = bk_connect(w->sock);
	if (fd < 0) {
		w->errors = w->n;
		return NULL;
	}
	char req[1024];
	const char *cmd = getenv("BK_BENCH_CMD");
	if (!cmd || !cmd[0] || strpbrk(cmd, "\"\\"))
		cmd = "true";
	/* BK_BENCH_GAP_US: a pause between requests (a paced client: the
	 * agent idle between execs, as with an AI agent thinking) */
	const char *g = getenv("BK_BENCH_GAP_US");
	useconds_t gap = g ? (useconds_t)atoi(g) : 0;
	for (int i = 0; i < w->n; i++) {
		if (gap && i)
			usleep(gap);
		snprintf(req, sizeof(req), "{\"op\":\"exec\",\"args\":{\"sandbox\":\"%s\",\"command\":\"%.600s\"}}",
			 w->sandboxes[(w->first + i) % w->n_sandboxes], cmd);
		uint64_t t0 = now_ns();
		char *resp = NULL;
		int r = bk_call(fd, req, strlen(req), &resp, NULL);
		w->lat[i] = now_ns() - t0;
		if (r < 0 || !strstr(resp, "\"status\":200") || !strstr(resp, "\"exit_code\":0")) {
			if (!w->errors)
				fprintf(stderr, "bk-bench: first error (%.1f ms): %.600s\n", w->lat[i] / 1e6,
					r < 0 ? strerror(-r) : resp);
			w->errors++;
		}
		free(resp);
	}
	close(fd);
	return NULL;
}

/* ---- floor: what the kernel alone takes for an exec's required steps -------------- */

/* One iteration's child: what an exec's child does in the kernel (child.c),
 * without the agent's bookkeeping, masks, v1 cgroups or read-backs: the
 * container's mount namespace, a mount namespace of its own with a /proc
 * of its pid namespace, a fresh network namespace (made beforehand, as the
 * agent's pool makes them), the privilege drop, the agent's seccomp filter,
 * execve of the same command. */
struct floor_child {
	int mnt_fd, net_fd;
	const struct bk_seccomp *filter;
	char **argv;
};

static int floor_child(void *arg)
{
	const struct floor_child *c = arg;
	static char *const envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };
	if (setns(c->mnt_fd, CLONE_NEWNS) < 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return 101;
	if (setns(c->net_fd, CLONE_NEWNET) < 0)
		return 102;
	if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0)
		return 103;
	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno == EINVAL)
			break;
	if (setresuid(65534, 65534, 65534) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return 104;
	if (bk_seccomp_install(c->filter) < 0)
		return 105;
	execve("/bin/sh", c->argv, envp);
	return 106;
}


/* One exec's kernel steps (spawned as the agent's spawn_direct: CLONE_VM |
 * CLONE_VFORK, the child on its own stack), timed from the cgroup's mkdir to its rmdir
 * after the command was reaped: a fresh cgroup v2 directory, clone3 into
 * it (CLONE_INTO_CGROUP) and into a new pid namespace, floor_child, wait.
 * The network namespace is made before the clock starts. Returns the
 * time, or 0 on error (the reason on stderr, once). */
static uint64_t floor_once(int self_net, int mnt_fd, const char *cgdir, int i, const struct bk_seccomp *filter,
			   char *stack, size_t stack_size, bool *warned)
{
#if defined(__x86_64__)
	static char *argv[] = { "sh", "-c", "true", NULL };
	const char *why = NULL;
	if (unshare(CLONE_NEWNET) < 0) {
		why = "unshare(CLONE_NEWNET)";
		goto fail;
	}
	struct floor_child c = { .mnt_fd = mnt_fd, .net_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC),
				 .filter = filter, .argv = argv };
	if (setns(self_net, CLONE_NEWNET) < 0) {
		perror("bk-bench floor: cannot return to its network namespace");
		exit(1);
	}
	if (c.net_fd < 0) {
		why = "open of the new network namespace";
		goto fail;
	}
	char cg[4096];
	snprintf(cg, sizeof(cg), "%s/boxkite-floor-%d-%d", cgdir, (int)getpid(), i);
	uint64_t t0 = now_ns();
	if (mkdir(cg, 0755) < 0) {
		close(c.net_fd);
		why = "mkdir of the cgroup";
		goto fail;
	}
	int cgfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct clone_args ca = { .flags = CLONE_VM | CLONE_VFORK | CLONE_NEWPID | CLONE_INTO_CGROUP,
				 .exit_signal = SIGCHLD, .stack = (uint64_t)(uintptr_t)stack, .stack_size = stack_size,
				 .cgroup = (uint64_t)cgfd };
	long pid = cgfd < 0 ? -EBADF : bk_clone3_fn(&ca, floor_child, &c);
	int st = 0;
	if (pid > 0)
		waitpid((pid_t)pid, &st, 0);
	if (cgfd >= 0)
		close(cgfd);
	close(c.net_fd);
	bool gone = rmdir(cg) == 0;
	uint64_t t = now_ns() - t0;
	if (pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && gone)
		return t;
	why = pid < 0 ? "clone3" : !gone ? "rmdir of the cgroup" : "the child (101 mounts, 102 netns, 103-104 privileges, 105 seccomp, 106 execve)";
	if (!*warned && pid > 0)
		fprintf(stderr, "bk-bench floor: %s: status %#x\n", why, st);
	else if (!*warned)
		fprintf(stderr, "bk-bench floor: %s: %s\n", why, strerror(pid < 0 ? (int)-pid : errno));
	*warned = true;
	return 0;
fail:
	if (!*warned)
		fprintf(stderr, "bk-bench floor: %s: %s\n", why, strerror(errno));
	*warned = true;
	return 0;
#else
	if (!*warned)
		fprintf(stderr, "bk-bench floor: measured on x86-64 only\n");
	*warned = true;
	return 0;
#endif
}

static int floor_main(int n, pid_t target, const char *cgdir)
{
	static struct bk_seccomp filter;
	if (bk_seccomp_build(&filter) < 0) {
		fprintf(stderr, "bk-bench floor: the seccomp filter does not build\n");
		return 1;
	}
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)target);
	int mnt_fd = open(p, O_RDONLY | O_CLOEXEC), self_net = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (mnt_fd < 0 || self_net < 0) {
		fprintf(stderr, "bk-bench floor: cannot open %s: %s\n", p, strerror(errno));
		return 1;
	}
	size_t stack_size = 512u << 10;
	char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	uint64_t *lat = calloc((size_t)n, sizeof(*lat));
	if (stack == MAP_FAILED || !lat)
		return 1;
	int errors = 0;
	bool warned = false;
	uint64_t t0 = now_ns();
	int ok = 0;
	for (int i = 0; i < n; i++) {
		uint64_t t = floor_once(self_net, mnt_fd, cgdir, i, &filter, stack, stack_size, &warned);
		if (t)
			lat[ok++] = t;
		else
			errors++;
	}
	/* the latencies of the iterations that did every step */
	report(lat, ok, errors, now_ns() - t0);
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 6 && streq(argv[1], "exec")) {
		int n = atoi(argv[4]), conc = atoi(argv[5]);
		if (n <= 0 || conc <= 0 || conc > 64)
			return 2;
		char *names[256];
		int nn = 0;
		for (char *sv = NULL, *t = strtok_r(argv[3], ",", &sv); t && nn < 256; t = strtok_r(NULL, ",", &sv))
			names[nn++] = t;
		if (nn == 0)
			return 2;
		uint64_t *lat = calloc((size_t)n, sizeof(*lat));
		struct worker w[64];
		pthread_t th[64];
		uint64_t t0 = now_ns();
		for (int i = 0; i < conc; i++) {
			w[i] = (struct worker){ .sock = argv[2], .sandboxes = names, .n_sandboxes = nn, .first = i * (n / conc),
						.n = n / conc, .lat = lat + i * (n / conc) };
			pthread_create(&th[i], NULL, exec_worker, &w[i]);
		}
		int errors = 0;
		for (int i = 0; i < conc; i++) {
			pthread_join(th[i], NULL);
			errors += w[i].errors;
		}
		report(lat, (n / conc) * conc, errors, now_ns() - t0);
		free(lat);
		return 0;
	}
	if (argc >= 4 && streq(argv[1], "spawn")) {
		int n = atoi(argv[2]), errors = 0;
		if (n <= 0)
			return 2;
		uint64_t *lat = calloc((size_t)n, sizeof(*lat));
		const char *g = getenv("BK_BENCH_GAP_US"); /* paced, as the exec clients */
		useconds_t gap = g ? (useconds_t)atoi(g) : 0;
		uint64_t t0 = now_ns();
		for (int i = 0; i < n; i++) {
			if (gap && i)
				usleep(gap);
			uint64_t s = now_ns();
			pid_t pid = fork();
			if (pid == 0) {
				execvp(argv[3], argv + 3);
				_exit(127);
			}
			int st;
			waitpid(pid, &st, 0);
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				errors++;
			lat[i] = now_ns() - s;
		}
		report(lat, n, errors, now_ns() - t0);
		free(lat);
		return 0;
	}
	if (argc == 5 && streq(argv[1], "floor")) {
		int n = atoi(argv[2]);
		if (n <= 0 || atoi(argv[3]) <= 0)
			return 2;
		return floor_main(n, (pid_t)atoi(argv[3]), argv[4]);
	}
	fprintf(stderr, "usage: bk-bench exec SOCK SANDBOX[,SANDBOX...] N CONC | spawn N CMD [ARG...] | floor N PID CGROUP_DIR\n");
	return 2;
}
