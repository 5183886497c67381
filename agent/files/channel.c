/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's side of a file operation (files.h: the whole picture): spawn
 * the helper with the encoded request, read its records into a struct
 * bk_file_result under a deadline, hash the bytes of presented files as
 * they stream by (the helper has no OpenSSL), reap or kill the helper, and
 * the "file_op" audit line. */
#include "agent/files/internal.h"
#include "agent/isolate/cgroup.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/missing.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <linux/sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define HELPER_ERR_MAX 256

/* ---- names -------------------------------------------------------------------------------- */

static const char *const op_names[BK_FILE_OP_N] = {
	[BK_FILE_CREATE] = "file_create", [BK_FILE_VIEW] = "view", [BK_FILE_STR_REPLACE] = "str_replace",
	[BK_FILE_LS] = "ls",		  [BK_FILE_GLOB] = "glob", [BK_FILE_GREP] = "grep",
	[BK_FILE_PRESENT] = "present_files", [BK_FILE_READ_IMAGE] = "read_image", [BK_FILE_WIPE] = "wipe",
};

const char *bk_file_op_name(enum bk_file_op op) { return (unsigned)op < BK_FILE_OP_N ? op_names[op] : "unknown"; }

const char *bk_file_type_name(enum bk_file_type t)
{
	static const char *const names[BK_FILE_T_N] = {
		[BK_FILE_T_FILE] = "file",     [BK_FILE_T_DIRECTORY] = "directory", [BK_FILE_T_SYMLINK] = "symlink",
		[BK_FILE_T_OTHER] = "other", [BK_FILE_T_UNKNOWN] = "unknown",
	};
	return (unsigned)t < BK_FILE_T_N ? names[t] : "unknown";
}



/* ---- the request across exec: a sealed memfd ------------------------------------------------- */

static int req_to_memfd(const struct freq *q)
{
	_cleanup_free_ char *buf = NULL;
	size_t len;
	int r = bkf_req_encode(q, &buf, &len);
	if (r < 0)
		return r;
	_cleanup_close_ int fd = memfd_create("bk-file-request", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, buf + off, len - off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (size_t)w;
	}
	/* sealed: nothing (not even the agent) can change it under the helper */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
	    lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	return steal_fd(&fd);
}

/* ---- the helper's cgroup ------------------------------------------------------------------ */

static void helper_cgroup_end(struct bk_exec_cg *cg);
static void sweep_stale(const struct bk_agent *a, const struct bk_pod *pod);

static _Atomic uint64_t helper_seq;

/* The helper's own cgroup below the pod's, made by the same code as an
 * exec's (isolate/cgroup.c): v2 (BPF-free, but cgroup.kill and every v2
 * controller the pod delegates), plus the v1 hierarchies an exec joins on
 * hybrid hosts; memory.max HELPER_MEMORY_MAX, pids.max HELPER_PIDS_MAX. Its
 * memory, pids and CPU are the pod's, never the agent's. Returns 0 or
 * -errno with a sentence in err (the file op is then refused). */
static int helper_cgroup(struct bk_agent *a, const struct bk_pod *pod, struct bk_exec_cg *cg, char *err)
{
	bk_exec_cg_init(cg);
	sweep_stale(a, pod);
	if (a->cfg.fault[0] && streq(a->cfg.fault, "file_cgroup"))
		return bk_fail_buf(err, HELPER_ERR_MAX, -EACCES, "injected fault: file helper cgroup creation refused");
	char name[64];
	snprintf(name, sizeof(name), "boxkite-file-%d-%llu", (int)getpid(),
		 (unsigned long long)atomic_fetch_add(&helper_seq, 1));
	struct bk_error e = { 0 };
	int r = bk_exec_cg_create(&a->engine.mounts, pod, name, HELPER_PIDS_MAX, HELPER_MEMORY_MAX, cg, &e);
	if (r < 0) {
		(void)bk_exec_cg_destroy(cg);
		return bk_fail_buf(err, HELPER_ERR_MAX, r, "%s", e.msg);
	}
	return 0;
}

/* Helper cgroups of an earlier agent of this node (killed mid-op: its
 * helper died with it, its cgroup stayed) in the pod's: killed and
 * removed, in every hierarchy. This agent's own (the name holds its pid)
 * are never touched. */
static void sweep_stale(const struct bk_agent *a, const struct bk_pod *pod)
{
	const struct bk_cgroup_mounts *m = &a->engine.mounts;
	char dir[4700], mine[48];
	snprintf(dir, sizeof(dir), "%s%s", m->v2, pod->pod_v2);
	snprintf(mine, sizeof(mine), "boxkite-file-%d-", (int)getpid());
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!startswith(de->d_name, "boxkite-file-") || startswith(de->d_name, mine))
			continue;
		_cleanup_free_ struct bk_exec_cg *cg = malloc(sizeof(*cg));
		if (!cg)
			break;
		bk_exec_cg_init(cg);
		snprintf(cg->v2, sizeof(cg->v2), "%s/%s", dir, de->d_name);
		for (int i = 0; i < pod->n_v1 && cg->n_v1 < BK_CG_V1_MAX; i++) {
			int h = bk_cg_v1_find(m, pod->v1[i].ctrls);
			if (h < 0)
				continue;
			struct bk_exec_cg_v1 *v = &cg->v1[cg->n_v1++];
			snprintf(v->ctrls, sizeof(v->ctrls), "%s", pod->v1[i].ctrls);
			snprintf(v->path, sizeof(v->path), "%s%s/%s", m->v1[h].mount, pod->v1[i].pod, de->d_name);
		}
		log_info("file_cgroup_swept", LS("cgroup", cg->v2));
		helper_cgroup_end(cg);
	}
	closedir(d);
}

/* Kill what is left in the helper's cgroup and remove it, in every
 * hierarchy. Logged when something stays. */
static void helper_cgroup_end(struct bk_exec_cg *cg)
{
	if (!cg->v2[0])
		return;
	char path[sizeof(cg->v2)];
	snprintf(path, sizeof(path), "%s", cg->v2);
	int kr = bk_exec_cg_kill(cg, 5000);
	int dr = bk_exec_cg_destroy(cg);
	if (kr < 0 || dr < 0)
		log_errorf("file_cgroup", "cannot remove the file helper's cgroup %s: %s", path,
			   strerror(kr < 0 ? -kr : -dr));
}

/* ---- spawning ---------------------------------------------------------------------------------- */

struct spawn_fds {
	int req, chan, pidfd;
	int cg[FD_CG_MAX];
	int ncg;
};

/* The child of clone3 (a copy of the multi-threaded agent): only system
 * calls until execve, no allocation, no lock (files.h: why exec). */
static _Noreturn void spawn_child(const struct spawn_fds *f)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigaction(SIGPIPE, &dfl, NULL);
	if (dup2(f->req, FD_REQ) < 0 || dup2(f->chan, FD_CHAN) < 0 || dup2(f->pidfd, FD_PIDFD) < 0)
		_exit(127);
	for (int i = 0; i < f->ncg; i++)
		if (dup2(f->cg[i], FD_CG0 + i) < 0)
			_exit(127);
	syscall(SYS_close_range, FD_CG0 + f->ncg, ~0U, 0);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	char *argv[] = { (char *)bkf_helper_argv0, NULL };
	char *envp[] = { NULL };
	/* /proc/self/exe: the running agent's own image, even when the file
	 * on disk was replaced by an upgrade */
	execve("/proc/self/exe", argv, envp);
	_exit(127);
}

/* Start the helper for q inside cg (born there: clone3 CLONE_INTO_CGROUP;
 * the v1 procs descriptors go along for it to join): its pidfd and the
 * read end of its pipe. Returns 0 or -errno with a sentence in err. */
static int spawn_helper(const struct bk_pod *pod, const struct freq *q, const struct bk_exec_cg *cg, int *pidfdp,
			int *rdp, char *err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		int e = errno;
		return bk_fail_buf(err, HELPER_ERR_MAX, -e, "cannot create a pipe: %s", strerror(e));
	}
	_cleanup_close_ int rd = p[0];
	(void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	_cleanup_close_ int reqfd = req_to_memfd(q);
	if (reqfd < 0) {
		close(p[1]);
		return bk_fail_buf(err, HELPER_ERR_MAX, reqfd, "cannot pass the request to the file helper: %s",
				   strerror(-reqfd));
	}
	/* move the descriptors out of the way of fds 3.. first, so the
	 * child's dup2 calls cannot clobber one another */
	struct spawn_fds f = { .req = fcntl(reqfd, F_DUPFD_CLOEXEC, 100),
			       .chan = fcntl(p[1], F_DUPFD_CLOEXEC, 100),
			       .pidfd = fcntl(pod->sandbox_pidfd, F_DUPFD_CLOEXEC, 100) };
	int e = f.req < 0 || f.chan < 0 || f.pidfd < 0 ? errno : 0;
	int v1[FD_CG_MAX];
	int nv1 = bk_exec_cg_v1_fds(cg, v1, FD_CG_MAX);
	for (int i = 0; i < nv1 && !e; i++) {
		f.cg[f.ncg] = fcntl(v1[i], F_DUPFD_CLOEXEC, 100);
		if (f.cg[f.ncg] < 0)
			e = errno;
		else
			f.ncg++;
	}
	close(p[1]);
	long pid = -1;
	int pidfd = -1;
	if (!e && (uint32_t)f.ncg != q->n_cg)
		e = EPROTO;
	if (!e) {
		struct clone_args args = {
			.flags = CLONE_PIDFD | CLONE_INTO_CGROUP,
			.pidfd = (uint64_t)(uintptr_t)&pidfd,
			.exit_signal = SIGCHLD,
			.cgroup = (uint64_t)cg->v2_fd,
		};
		pid = syscall(SYS_clone3, &args, sizeof(args));
		if (pid == 0)
			spawn_child(&f);
		if (pid < 0)
			e = errno;
	}
	closep(&f.req);
	closep(&f.chan);
	closep(&f.pidfd);
	for (int i = 0; i < f.ncg; i++)
		closep(&f.cg[i]);
	if (e)
		return bk_fail_buf(err, HELPER_ERR_MAX, -e, "cgroup: cannot start the file helper in its cgroup: %s",
				   strerror(e));
	*pidfdp = pidfd;
	*rdp = steal_fd(&rd);
	return 0;
}

/* ---- collecting ----------------------------------------------------------------------------- */

struct hashes {
	EVP_MD_CTX *ctx[BK_FILE_PRESENT_MAX];
};

static void hashes_free(struct hashes *hs)
{
	for (size_t i = 0; i < BK_FILE_PRESENT_MAX; i++)
		EVP_MD_CTX_free(hs->ctx[i]);
}

/* A record with the bytes of presented file idx: hashed, never kept. */
static int hash_rec(struct hashes *hs, uint32_t type, const char *p, size_t n)
{
	uint32_t idx;
	if (!hs || n < sizeof(idx))
		return -EPROTO;
	memcpy(&idx, p, sizeof(idx));
	if (idx >= BK_FILE_PRESENT_MAX)
		return -EPROTO;
	if (type == REC_HBEGIN) {
		if (hs->ctx[idx] || n != sizeof(idx))
			return -EPROTO;
		hs->ctx[idx] = EVP_MD_CTX_new();
		if (!hs->ctx[idx] || !EVP_DigestInit_ex(hs->ctx[idx], EVP_sha256(), NULL))
			return -ENOMEM;
		return 0;
	}
	if (!hs->ctx[idx] || !EVP_DigestUpdate(hs->ctx[idx], p + sizeof(idx), n - sizeof(idx)))
		return -EPROTO;
	return 0;
}

struct collect {
	enum bk_file_op op;
	struct bk_file_result *res;
	struct hashes *hs;
	size_t bytes; /* string bytes of the result so far */
	bool done;    /* the last record came */
};

/* The complete records in buf[0..len): applied; returns the bytes used or
 * -errno. */
static ssize_t take_records(struct collect *c, const char *buf, size_t len)
{
	size_t off = 0;
	while (!c->done && len - off >= sizeof(struct rec_hdr)) {
		struct rec_hdr hd;
		memcpy(&hd, buf + off, sizeof(hd));
		if (hd.len > REC_MAX)
			return -EPROTO;
		if (len - off < sizeof(hd) + hd.len)
			break;
		const char *p = buf + off + sizeof(hd);
		int r = hd.type == REC_HBEGIN || hd.type == REC_HDATA
				? hash_rec(c->hs, hd.type, p, hd.len)
				: bkf_rec_apply(c->res, c->op, hd.type, p, hd.len, &c->bytes, &c->done);
		if (r < 0)
			return r;
		off += sizeof(hd) + hd.len;
	}
	return (ssize_t)off;
}

/* Read records from rd until the last one, EOF, an error or the deadline
 * (-ETIMEDOUT). */
static int collect(struct collect *c, int rd, uint64_t deadline)
{
	const size_t cap = 2 * REC_MAX + 64;
	_cleanup_free_ char *in = malloc(cap);
	size_t inlen = 0;
	if (!in)
		return -ENOMEM;
	while (!c->done) {
		uint64_t now = now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd pf = { .fd = rd, .events = POLLIN };
		int pr = poll(&pf, 1, (int)((deadline - now) / 1000000) + 1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0)
			return -errno;
		if (pr == 0)
			continue;
		ssize_t n = read(rd, in + inlen, cap - inlen);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return 0; /* the helper closed its end without a last record */
		inlen += (size_t)n;
		ssize_t used = take_records(c, in, inlen);
		if (used < 0)
			return (int)used;
		memmove(in, in + used, inlen - (size_t)used);
		inlen -= (size_t)used;
	}
	return 0;
}

/* Wait for the helper to exit (it does right after its last record) until
 * the deadline when it finished, else kill it; its status into si. */
static void reap(int pidfd, bool finished, uint64_t deadline, siginfo_t *si)
{
	if (finished) {
		struct pollfd pf = { .fd = pidfd, .events = POLLIN };
		uint64_t now = now_ns();
		int left = now < deadline ? (int)((deadline - now) / 1000000) + 1 : 0;
		if (poll(&pf, 1, left) > 0 && waitid(P_PIDFD, (id_t)pidfd, si, WEXITED) == 0)
			return;
	}
	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	while (waitid(P_PIDFD, (id_t)pidfd, si, WEXITED) < 0 && errno == EINTR)
		;
}

/* Why a helper that sent no last record ended: its CPU limit (SIGXCPU, or
 * the SIGKILL of the hard limit after it), its memory limit (the cgroup's
 * OOM killer), or something else. */
static int limit_death(const siginfo_t *si, const struct bk_exec_cg *cg, char *err)
{
	if (si->si_code != CLD_KILLED && si->si_code != CLD_DUMPED)
		return 0;
	long tick = sysconf(_SC_CLK_TCK);
	double cpu = tick > 0 ? (double)(si->si_utime + si->si_stime) / (double)tick : 0;
	if (si->si_status == SIGXCPU || (si->si_status == SIGKILL && cpu >= HELPER_CPU_S))
		return bk_fail_buf(err, HELPER_ERR_MAX, -ETIME,
				   "the file operation used up the file helper's CPU limit (%d s) and was stopped",
				   HELPER_CPU_S);
	if (si->si_status == SIGKILL && bk_exec_cg_oom_killed(cg))
		return bk_fail_buf(err, HELPER_ERR_MAX, -EDQUOT,
				   "the file operation needed more than the file helper's memory limit (%llu MiB) and was stopped",
				   HELPER_MEMORY_MAX >> 20);
	return 0;
}

/* Run q in a helper in its own cgroup (cg, made by the caller; emptied
 * here). Returns 0 with res filled by the helper's records, or -errno with
 * a sentence in err (files.h, bk_files_run: which errno means what). */
static int run_helper(const struct bk_pod *pod, const struct freq *q, struct bk_exec_cg *cg, struct hashes *hs,
		      struct bk_file_result *res, char *err)
{
	_cleanup_close_ int rd = -1, pidfd = -1;
	int r = spawn_helper(pod, q, cg, &pidfd, &rd, err);
	if (r < 0)
		return r;
	int timeout_ms = q->rq.op == BK_FILE_WIPE ? WIPE_TIMEOUT_MS : HELPER_TIMEOUT_MS;
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct collect c = { .op = q->rq.op, .res = res, .hs = hs };
	r = collect(&c, rd, deadline);
	siginfo_t si = { 0 };
	/* at the deadline, or when the helper misbehaved: everything in its
	 * cgroup goes, not only the helper */
	if (!(r == 0 && c.done) || now_ns() >= deadline)
		(void)bk_exec_cg_kill(cg, 2000);
	reap(pidfd, r == 0 && c.done, deadline, &si);
	if (r == -ETIMEDOUT)
		return bk_fail_buf(err, HELPER_ERR_MAX, r, "the file operation did not finish within %d s",
				   timeout_ms / 1000);
	if (!c.done) {
		int lr = limit_death(&si, cg, err);
		if (lr < 0)
			return lr;
	}
	if (r < 0)
		return bk_fail_buf(err, HELPER_ERR_MAX, r, "the file helper misbehaved: %s", strerror(-r));
	if (!c.done) {
		if (si.si_code == CLD_EXITED)
			return bk_fail_buf(err, HELPER_ERR_MAX, -ECHILD, "the file helper exited with status %d",
					   si.si_status);
		return bk_fail_buf(err, HELPER_ERR_MAX, -ECHILD, "the file helper died (signal %d)", si.si_status);
	}
	return 0;
}

/* ---- the entry point --------------------------------------------------------------------------- */

_printf_(5, 6) static int refuse(struct bk_file_result *res, int r, int status, const char *code, const char *fmt,
				 ...)
{
	bk_file_result_free(res);
	res->status = status;
	snprintf(res->code, sizeof(res->code), "%s", code);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->detail, sizeof(res->detail), fmt, ap);
	va_end(ap);
	return r;
}

/* The helper streamed each presented file; the agent hashed it. */
static void finish_hashes(struct hashes *hs, struct bk_file_result *res)
{
	for (size_t i = 0; i < res->nfiles; i++) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned int ml = 0;
		char *hex = res->files[i].sha256;
		hex[0] = '\0';
		if (i < BK_FILE_PRESENT_MAX && hs->ctx[i] && EVP_DigestFinal_ex(hs->ctx[i], md, &ml))
			for (unsigned int k = 0; k < ml && 2 * k + 2 < sizeof(res->files[i].sha256); k++)
				snprintf(hex + 2 * k, 3, "%02x", md[k]);
	}
}

int bk_files_run(struct bk_agent *a, const struct bk_pod *pod, const struct bk_file_req *rq,
		 struct bk_file_result *res)
{
	memset(res, 0, sizeof(*res));
	if (pod->uid == 0)
		return refuse(res, -EPERM, 503, "isolation_failed",
			      "the sandbox container runs as root; boxkite only acts as a non-root sandbox user");
	if (pod->sandbox_pidfd < 0)
		return refuse(res, -ENXIO, 503, "sandbox_unavailable", "the sandbox container is not available");
	_cleanup_free_ struct freq *q = malloc(sizeof(*q));
	if (!q)
		return refuse(res, -ENOMEM, 503, "out_of_memory", "out of memory");
	*q = (struct freq){
		.rq = *rq,
		.uid = pod->uid,
		.gid = pod->gid,
		.cap_last = a->engine.cap_last > 0 ? a->engine.cap_last : 63,
		.parent = getpid(),
	};
	char err[HELPER_ERR_MAX] = "";
	struct bk_exec_cg cg;
	int r = helper_cgroup(a, pod, &cg, err);
	if (r < 0) {
		/* fail closed: no helper runs outside its own cgroup */
		log_errorf("file_cgroup", "%s for pod %s/%s: %s", bk_file_op_name(rq->op), pod->pod_namespace,
			   pod->pod_name, err);
		refuse(res, r, 503, "isolation_failed", "cgroup: cannot make the file helper's cgroup: %s", err);
		snprintf(res->layer, sizeof(res->layer), "cgroup");
		return r;
	}
	q->n_cg = (uint32_t)bk_exec_cg_v1_fds(&cg, (int[FD_CG_MAX]){ 0 }, FD_CG_MAX);
	struct hashes hs = { 0 };
	r = run_helper(pod, q, &cg, rq->op == BK_FILE_PRESENT ? &hs : NULL, res, err);
	/* a helper that could not join the container's kept v1 cgroups
	 * (its own refusal, helper.c): the next one opens them afresh */
	if (res->status == 503 && startswith(res->detail, "cgroup:"))
		bk_exec_cg_kept_drop(&cg);
	helper_cgroup_end(&cg);
	if (r == -ETIMEDOUT) {
		refuse(res, r, 504, "timeout", "%s", err);
	} else if (r == -ETIME) {
		refuse(res, r, 422, "resource_limit", "%s", err);
	} else if (r == -EDQUOT) {
		refuse(res, r, 507, "resource_limit", "%s", err);
	} else if (r < 0 && startswith(err, "cgroup:")) {
		log_errorf("file_cgroup", "%s for pod %s/%s: %s", bk_file_op_name(rq->op), pod->pod_namespace,
			   pod->pod_name, err);
		refuse(res, r, 503, "isolation_failed", "%s", err);
		snprintf(res->layer, sizeof(res->layer), "cgroup");
	} else if (r < 0) {
		log_errorf("file_helper", "%s for pod %s/%s: %s", bk_file_op_name(rq->op), pod->pod_namespace,
			   pod->pod_name, err);
		refuse(res, r, 500, "helper_failed", "%s", err);
	} else if (rq->op == BK_FILE_PRESENT && res->status == 200) {
		finish_hashes(&hs, res);
	}
	hashes_free(&hs);
	return r;
}

void bk_files_audit(const struct bk_pod *pod, enum bk_file_op op, const struct bk_vpath *vp, int status,
		    uint64_t t0)
{
	struct log_field f[8];
	size_t n = 0;
	f[n++] = LS("op", bk_file_op_name(op));
	f[n++] = LS("pod", pod->pod_name);
	f[n++] = LS("namespace", pod->pod_namespace);
	f[n++] = LS("pod_uid", pod->pod_uid);
	/* paths only, never contents or patterns */
	if (op != BK_FILE_PRESENT && op != BK_FILE_WIPE && vp && vp->abs[0])
		f[n++] = LS("path", vp->abs);
	f[n++] = LI("status", status);
	f[n++] = LD("duration_ms", (double)(now_ns() - t0) / 1e6);
	f[n] = LEND;
	log_emit(status < 500 ? LOG_INFO : LOG_WARN, "file_op", f);
}

int bk_files_wipe(struct bk_agent *a, const struct bk_pod *pod, uint64_t *removed, uint64_t *kept, char *err,
		  size_t errlen)
{
	uint64_t t0 = now_ns();
	struct bk_file_req q = { .op = BK_FILE_WIPE };
	struct bk_file_result res;
	(void)bk_files_run(a, pod, &q, &res);
	bk_files_audit(pod, BK_FILE_WIPE, NULL, res.status, t0);
	int r = 0;
	if (res.status != 200) {
		/* the refusal says why */
		snprintf(err, errlen, "%s", res.detail);
		r = -EIO;
	} else {
		*removed = res.removed;
		*kept = res.kept;
		if (res.nunavailable > 0) {
			size_t o = (size_t)snprintf(err, errlen, "not wiped:");
			for (size_t i = 0; i < res.nunavailable && o < errlen; i++)
				o += (size_t)snprintf(err + o, errlen - o, "%s %s", i ? ";" : "", res.unavailable[i]);
			r = -ENOENT;
		} else if (res.kept > 0) {
			snprintf(err, errlen, "%" PRIu64 " entries of the previous session were kept (the sandbox user cannot remove them)",
				 res.kept);
			r = -ENOTEMPTY;
		}
	}
	bk_file_result_free(&res);
	return r;
}
