/* SPDX-License-Identifier: Apache-2.0 */
/* Latency/throughput measurements for `make bench`.
 *   bk-bench exec ADMIN_SOCK SANDBOX[,SANDBOX...] N CONC
 *                                             exec of "true" over the admin socket; with
 *                                             several sandboxes, the execs go round-robin
 *                                             over them (the density run)
 *   bk-bench spawn N CMD [ARG...]             fork+exec+wait of CMD
 * Prints one JSON object: n, errors, p50_us, p99_us, mean_us, per_sec.
 * With BK_BENCH_SAMPLES=FILE, every latency in microseconds, one a line, in
 * the order measured (the plot's raw samples). BK_BENCH_CMD: the exec's
 * command instead of "true" (plain text: no quotes or backslashes). */
#include <pthread.h>
#include <sys/wait.h>

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
	fprintf(stderr, "usage: bk-bench exec SOCK SANDBOX[,SANDBOX...] N CONC | spawn N CMD [ARG...]\n");
	return 2;
}
