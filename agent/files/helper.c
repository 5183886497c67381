/* SPDX-License-Identifier: Apache-2.0 */
/* The file helper process (files.h: why a separate exec'd process, and how
 * it is confined). The agent binary exec'd as HELPER_ARGV0 runs
 * file_helper_entry() before main(): it decodes the request, enters the
 * sandbox container's mount namespace, drops to the sandbox user, runs one
 * operation and reports it as records on the pipe, then exits. It runs in
 * its own cgroup below the pod's (the agent made it; on hybrid hosts the
 * helper joins its v1 part itself, first thing) under RLIMIT_AS and
 * RLIMIT_CPU. */
#include "agent/files/internal.h"
#include "agent/isolate/privs.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

/* internal.h: why this is a symbol of its own */
const char bkf_helper_argv0[] = HELPER_ARGV0;

/* ---- isolation and dispatch ------------------------------------------------------------------ */

static void close_all_but(int a, int b)
{
	int lo = a < b ? a : b, hi = a < b ? b : a;
	if (lo > 3)
		syscall(SYS_close_range, 3, lo - 1, 0);
	if (hi > lo + 1)
		syscall(SYS_close_range, lo + 1, hi - 1, 0);
	syscall(SYS_close_range, hi + 1, ~0U, 0);
}

static void (*const ops[BK_FILE_OP_N])(struct hctx *, struct bk_file_result *) = {
	[BK_FILE_CREATE] = bkf_op_create, [BK_FILE_VIEW] = bkf_op_view,   [BK_FILE_STR_REPLACE] = bkf_op_str_replace,
	[BK_FILE_LS] = bkf_op_ls,	  [BK_FILE_GLOB] = bkf_op_glob,   [BK_FILE_GREP] = bkf_op_grep,
	[BK_FILE_PRESENT] = bkf_op_present, [BK_FILE_READ_IMAGE] = bkf_op_read_image, [BK_FILE_WIPE] = bkf_op_wipe,
};

/* Join the v1 cgroups the agent made for this helper (hybrid hosts; on
 * cgroup v2 the helper was born in its own cgroup, CLONE_INTO_CGROUP):
 * their cgroup.procs are open on FD_CG0.. . Done first, before the request
 * is read, so that (nearly) nothing the helper does is charged to the
 * agent. Returns how many it joined, or -errno. */
static int join_cgroups(void)
{
	int n = 0;
	for (int fd = FD_CG0; fd < FD_CG0 + FD_CG_MAX; fd++) {
		if (fcntl(fd, F_GETFD) < 0)
			break;
		if (write(fd, "0", 1) != 1)
			return -errno;
		n++;
	}
	return n;
}

/* The address-space limit (HELPER_MEMORY_MAX above what is mapped now: a
 * sanitizer build maps terabytes of shadow before main) and the CPU budget
 * (SIGXCPU at HELPER_CPU_S s, SIGKILL a second later). */
static int set_limits(enum bk_file_op op)
{
	unsigned long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "re");
	if (!f)
		return -errno;
	int ok = fscanf(f, "%llu", &pages) == 1;
	fclose(f);
	if (!ok)
		return -EIO;
	rlim_t as = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (rlim_t)HELPER_MEMORY_MAX;
	/* the session wipe may take its whole (longer) deadline */
	rlim_t cs = op == BK_FILE_WIPE ? WIPE_TIMEOUT_MS / 1000 : HELPER_CPU_S;
	struct rlimit asl = { as, as }, cpu = { cs, cs + 1 }, core = { 0, 0 };
	if (setrlimit(RLIMIT_AS, &asl) < 0 || setrlimit(RLIMIT_CPU, &cpu) < 0 || setrlimit(RLIMIT_CORE, &core) < 0)
		return -errno;
	return 0;
}

static _Noreturn void helper_main(const struct freq *q, int chan, int pidfd, int joined)
{
	struct hctx h = { .chan = chan,
			  .rq = &q->rq,
			  .uid = q->uid,
			  .budget_end = now_ns() + (uint64_t)WORK_BUDGET_MS * 1000000ull };
	/* fail closed: a helper outside its own cgroup does no work */
	if (joined < 0 || (uint32_t)joined != q->n_cg)
		bkf_fail(&h, 503, "isolation_failed", "cgroup: the file helper could not join its cgroups (%u v1 hierarchies): %s",
			 q->n_cg, joined < 0 ? strerror(-joined) : "descriptors missing");
	int lr = set_limits(q->rq.op);
	if (lr < 0)
		bkf_fail(&h, 503, "isolation_failed", "rlimits: cannot limit the file helper: %s", strerror(-lr));
	/* nothing of the agent's (sockets, BPF objects, other helpers' pipes,
	 * the cgroup descriptors) stays in this process */
	close_all_but(chan, pidfd);
	if (q->rq.op == BK_FILE_WIPE)
		bkf_wipe_prepare(pidfd);
	if (setns(pidfd, CLONE_NEWNS) < 0)
		bkf_fail(&h, 503, "isolation_failed", "cannot enter the sandbox container's mount namespace: %s",
			 strerror(errno));
	close(pidfd);
	if (chdir("/") < 0)
		bkf_fail(&h, 503, "isolation_failed", "cannot change to the container's root: %s", strerror(errno));
	umask(022);
	int r = bk_privs_drop(q->uid, q->gid, q->cap_last);
	if (r < 0)
		bkf_fail(&h, 503, "isolation_failed", "cannot drop privileges to the sandbox user: %s", strerror(-r));
	/* after the uid change (which clears it): die with the agent thread */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != q->parent)
		_exit(5);
	if ((unsigned)q->rq.op >= BK_FILE_OP_N || !ops[q->rq.op])
		bkf_fail(&h, 400, "unknown_op", "unknown file operation");
	struct bk_file_result res = { .status = 200 };
	ops[q->rq.op](&h, &res);
	bkf_reply(&h, &res);
}

/* The helper's entry: runs before main() when the agent binary is exec'd
 * as HELPER_ARGV0 (glibc passes argc/argv to ELF constructors). Anyone may
 * start the binary so; without CAP_SYS_ADMIN over the pidfd on fd 5 the
 * helper only reports that it could not enter the container. The request
 * is decoded with every length and field checked again: the memfd is the
 * agent's, but nothing in it is taken on trust. */
__attribute__((constructor)) static void file_helper_entry(int argc, char **argv, char **envp)
{
	(void)envp;
	if (argc != 1 || !argv || !argv[0] || !streq(argv[0], HELPER_ARGV0))
		return;
	syscall(SYS_close_range, FD_CG0 + FD_CG_MAX, ~0U, 0);
	int joined = join_cgroups();
	struct hctx h = { .chan = FD_CHAN };
	struct freq *q = calloc(1, sizeof(*q));
	if (!q)
		_exit(3);
	char *buf = NULL; /* q's strings point into it: kept until _exit */
	size_t len = 0;
	int r = bkf_read_all(FD_REQ, REQ_MAX, &buf, &len);
	if (r == 0)
		r = bkf_req_decode(buf, len, q);
	close(FD_REQ);
	if (r < 0)
		bkf_fail(&h, 500, "helper_failed", "the file helper got a malformed request: %s", strerror(-r));
	helper_main(q, FD_CHAN, FD_PIDFD, joined);
}
