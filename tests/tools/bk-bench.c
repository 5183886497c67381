/* SPDX-License-Identifier: Apache-2.0 */
/* Latency/throughput measurements for `make bench`.
 *   bk-bench exec ADMIN_SOCK SANDBOX[,SANDBOX...] N CONC
 *                                             exec of "true" over the admin socket; with
 *                                             several sandboxes, the execs go round-robin
 *                                             over them (the density run)
 *   bk-bench spawn N CMD [ARG...]             fork+exec+wait of CMD
 *   bk-bench floor N PID CGROUP_DIR [V1_DIR...]
 *                                             the kernel steps of an exec alone, no
 *                                             agent: see floor_once (x86-64)
 *   bk-bench seccomp N                        the seccomp install alone: see seccomp_main
 * Prints one JSON object: n, errors, p50_us, p99_us, mean_us, per_sec.
 * With BK_BENCH_SAMPLES=FILE, every latency in microseconds, one a line, in
 * the order measured (the plot's raw samples). BK_BENCH_CMD: the exec's
 * command instead of "true" (plain text: no quotes or backslashes). */
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "agent/isolate/privs.h"
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

#define FLOOR_V1_MAX 2

struct floor {
	int self_net, mnt_fd, cap_last;
	const char *cgdir;                /* cgroup v2: the exec cgroups' parent */
	const char *v1dir[FLOOR_V1_MAX];  /* v1 pids / memory: the same, where a limit is set */
	int n_v1;
	struct bk_seccomp filter;
	char *stack;
	size_t stack_size;
	bool warned;
};

/* One iteration's child: what an exec's child does in the kernel (child.c),
 * without the agent's bookkeeping, masks or other read-backs: it joins the
 * v1 cgroups, enters the container's mount namespace and makes one of its
 * own with a /proc of its pid namespace, enters a fresh network namespace
 * (made beforehand, as the agent's pool makes them), drops its privileges
 * with the agent's own bk_privs_drop (its read-back included), installs
 * the agent's seccomp filter and execs the same command. */
struct floor_child {
	int mnt_fd, net_fd, cap_last;
	int v1_procs[FLOOR_V1_MAX], n_v1;
	const struct bk_seccomp *filter;
	char **argv;
};

static int floor_child(void *arg)
{
	const struct floor_child *c = arg;
	static char *const envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };
	for (int k = 0; k < c->n_v1; k++)
		if (write(c->v1_procs[k], "0", 1) != 1)
			return 100;
	if (setns(c->mnt_fd, CLONE_NEWNS) < 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return 101;
	if (setns(c->net_fd, CLONE_NEWNET) < 0)
		return 102;
	if (bk_privs_drop(65534, 65534, c->cap_last) < 0)
		return 103;
	if (bk_seccomp_install(c->filter) < 0)
		return 105;
	execve("/bin/sh", c->argv, envp);
	return 106;
}

/* The limits the agent sets in an exec cgroup by default (pids_max and
 * memory_max of agent/parse/config.c), in those of the files that the
 * cgroup has. */
static int floor_limits(const char *path)
{
	static const char *const knobs[][2] = { { "pids.max", "256" }, { "memory.max", "536870912" },
						{ "memory.swap.max", "0" }, { "memory.limit_in_bytes", "536870912" } };
	char f[4200];
	for (size_t k = 0; k < ARRAY_SIZE(knobs); k++) {
		snprintf(f, sizeof(f), "%s/%s", path, knobs[k][0]);
		int fd = open(f, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		bool ok = write(fd, knobs[k][1], strlen(knobs[k][1])) > 0;
		close(fd);
		if (!ok)
			return -1;
	}
	return 0;
}

/* A v1 exec cgroup of iteration i under dir, with its limit; its
 * cgroup.procs opened for the child. */
static int floor_v1(const char *dir, int i, char *path, size_t len)
{
	snprintf(path, len, "%s/boxkite-floor-%d-%d", dir, (int)getpid(), i);
	if (mkdir(path, 0755) < 0 || floor_limits(path) < 0)
		return -1;
	char f[4200];
	snprintf(f, sizeof(f), "%s/cgroup.procs", path);
	return open(f, O_WRONLY | O_CLOEXEC);
}

/* One exec's kernel steps (spawned as the agent's spawn_direct: CLONE_VM |
 * CLONE_VFORK, the child on its own stack), timed from the first cgroup's
 * mkdir to the last one's rmdir after the command was reaped: fresh v2
 * (and v1) cgroups, clone3 into the v2 one (CLONE_INTO_CGROUP) and into a
 * new pid namespace, floor_child, wait. The network namespace is made
 * before the clock starts. Returns the time, or 0 on error (the first
 * error's reason on stderr). */
static uint64_t floor_once(struct floor *F, int i)
{
#if defined(__x86_64__)
	static char *argv[] = { "sh", "-c", "true", NULL };
	struct floor_child c = { .mnt_fd = F->mnt_fd, .net_fd = -1, .cap_last = F->cap_last, .filter = &F->filter,
				 .argv = argv };
	char cg[4096] = "", v1[FLOOR_V1_MAX][4096] = { "" };
	const char *why = NULL;
	int cgfd = -1, st = 0;
	uint64_t t0 = 0;
	long pid = 0;
	bool gone = true;
	if (unshare(CLONE_NEWNET) < 0) {
		why = "unshare(CLONE_NEWNET)";
		goto out;
	}
	c.net_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (setns(F->self_net, CLONE_NEWNET) < 0) {
		perror("bk-bench floor: cannot return to its network namespace");
		exit(1);
	}
	if (c.net_fd < 0) {
		why = "open of the new network namespace";
		goto out;
	}
	t0 = now_ns();
	snprintf(cg, sizeof(cg), "%s/boxkite-floor-%d-%d", F->cgdir, (int)getpid(), i);
	if (mkdir(cg, 0755) < 0) {
		cg[0] = '\0';
		why = "mkdir of the v2 cgroup";
		goto out;
	}
	if (floor_limits(cg) < 0) {
		why = "a limit of the v2 cgroup";
		goto out;
	}
	for (; c.n_v1 < F->n_v1; c.n_v1++) {
		if ((c.v1_procs[c.n_v1] = floor_v1(F->v1dir[c.n_v1], i, v1[c.n_v1], sizeof(v1[0]))) < 0) {
			why = "a v1 cgroup";
			break;
		}
	}
	if (why)
		goto out;
	if ((cgfd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		why = "open of the v2 cgroup";
		goto out;
	}
	struct clone_args ca = { .flags = CLONE_VM | CLONE_VFORK | CLONE_NEWPID | CLONE_INTO_CGROUP,
				 .exit_signal = SIGCHLD, .stack = (uint64_t)(uintptr_t)F->stack,
				 .stack_size = F->stack_size, .cgroup = (uint64_t)cgfd };
	pid = bk_clone3_fn(&ca, floor_child, &c);
	if (pid < 0) {
		errno = (int)-pid;
		why = "clone3";
		goto out;
	}
	waitpid((pid_t)pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		why = "the child (100 v1 join, 101 mounts, 102 netns, 103 privileges, 105 seccomp, 106 execve)";
out:
	if (cgfd >= 0)
		close(cgfd);
	if (c.net_fd >= 0)
		close(c.net_fd);
	for (int k = 0; k < c.n_v1; k++) {
		close(c.v1_procs[k]);
		gone &= rmdir(v1[k]) == 0;
	}
	if (why && c.n_v1 < F->n_v1 && v1[c.n_v1][0])
		rmdir(v1[c.n_v1]); /* made, its knob or cgroup.procs failed */
	if (cg[0])
		gone &= rmdir(cg) == 0;
	uint64_t t = now_ns() - t0;
	if (!why && !gone)
		why = "rmdir of a cgroup";
	if (!why)
		return t;
	if (!F->warned) {
		if (pid > 0)
			fprintf(stderr, "bk-bench floor: %s: status %#x\n", why, st);
		else
			fprintf(stderr, "bk-bench floor: %s: %s\n", why, strerror(errno));
	}
	F->warned = true;
	return 0;
#else
	if (!F->warned)
		fprintf(stderr, "bk-bench floor: measured on x86-64 only\n");
	F->warned = true;
	return 0;
#endif
}

static int floor_main(int n, pid_t target, const char *cgdir, char **v1dirs, int n_v1)
{
	static struct floor F;
	if (n_v1 > FLOOR_V1_MAX || bk_seccomp_build(&F.filter) < 0) {
		fprintf(stderr, "bk-bench floor: at most %d v1 directories; or the seccomp filter does not build\n",
			FLOOR_V1_MAX);
		return 2;
	}
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)target);
	F.mnt_fd = open(p, O_RDONLY | O_CLOEXEC);
	F.self_net = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (F.mnt_fd < 0 || F.self_net < 0) {
		fprintf(stderr, "bk-bench floor: cannot open %s: %s\n", p, strerror(errno));
		return 1;
	}
	/* the agent's bounding set loop runs to the kernel's last capability */
	_cleanup_free_ char *cl = NULL;
	uint64_t v;
	F.cap_last = read_file_at(AT_FDCWD, "/proc/sys/kernel/cap_last_cap", 64, &cl, NULL) == 0 &&
				     (cl[strcspn(cl, "\n")] = '\0', parse_u64(cl, &v) == 0) && v < 64 ? (int)v : 63;
	F.cgdir = cgdir;
	for (int k = 0; k < n_v1; k++)
		F.v1dir[F.n_v1++] = v1dirs[k];
	F.stack_size = 512u << 10;
	F.stack = mmap(NULL, F.stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	uint64_t *lat = calloc((size_t)n, sizeof(*lat));
	if (F.stack == MAP_FAILED || !lat)
		return 1;
	int errors = 0, ok = 0;
	uint64_t t0 = now_ns();
	for (int i = 0; i < n; i++) {
		uint64_t t = floor_once(&F, i);
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

/* ---- seccomp: the install alone, the agent's filter against the smallest one ------ */

/* N forked children each install a filter, timed around the seccomp()
 * call alone (as in the exec child, with no_new_privs set before the
 * clock): even ones the agent's filter, odd ones a 1-instruction filter
 * that allows everything, the kernel's fixed cost of an install. Prints
 * one JSON object: {"n", "errors", "agent_p50_us", "minimal_p50_us"}. */
static int seccomp_main(int n)
{
	static struct bk_seccomp agent_f, minimal_f;
	if (bk_seccomp_build(&agent_f) < 0)
		return 1;
	minimal_f.insns[0] = (struct sock_filter){ .code = BPF_RET | BPF_K, .k = SECCOMP_RET_ALLOW };
	minimal_f.len = 1;
	uint64_t *lat[2] = { calloc((size_t)n, sizeof(uint64_t)), calloc((size_t)n, sizeof(uint64_t)) };
	int got[2] = { 0, 0 }, errors = 0;
	if (!lat[0] || !lat[1])
		return 1;
	for (int i = 0; i < 2 * n; i++) {
		int p[2];
		if (pipe(p) < 0)
			return 1;
		pid_t pid = fork();
		if (pid == 0) {
			close(p[0]);
			uint64_t t = 0;
			if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0) {
				t = now_ns();
				t = bk_seccomp_install(i % 2 ? &minimal_f : &agent_f) == 0 ? now_ns() - t : 0;
			}
			_exit(write(p[1], &t, sizeof(t)) == sizeof(t) ? 0 : 1);
		}
		close(p[1]);
		uint64_t t = 0;
		if (pid < 0 || read(p[0], &t, sizeof(t)) != sizeof(t))
			t = 0;
		close(p[0]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		if (t)
			lat[i % 2][got[i % 2]++] = t;
		else
			errors++;
	}
	for (int k = 0; k < 2; k++)
		qsort(lat[k], (size_t)got[k], sizeof(uint64_t), cmp_u64);
	printf("{\"n\":%d,\"errors\":%d,\"agent_p50_us\":%.1f,\"minimal_p50_us\":%.1f}\n", n, errors,
	       got[0] ? lat[0][(got[0] - 1) / 2] / 1e3 : 0, got[1] ? lat[1][(got[1] - 1) / 2] / 1e3 : 0);
	free(lat[0]);
	free(lat[1]);
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
	if (argc >= 5 && streq(argv[1], "floor")) {
		int n = atoi(argv[2]);
		if (n <= 0 || atoi(argv[3]) <= 0)
			return 2;
		return floor_main(n, (pid_t)atoi(argv[3]), argv[4], argv + 5, argc - 5);
	}
	if (argc == 3 && streq(argv[1], "seccomp") && atoi(argv[2]) > 0)
		return seccomp_main(atoi(argv[2]));
	fprintf(stderr, "usage: bk-bench exec SOCK SANDBOX[,SANDBOX...] N CONC | spawn N CMD [ARG...] | floor N PID CGROUP_DIR [V1_DIR...] | seccomp N\n");
	return 2;
}
