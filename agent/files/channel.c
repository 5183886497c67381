/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's side of a file operation (files.h: the whole picture): spawn
 * the helper with the encoded request, read its records into a struct
 * bk_file_result under a deadline, hash the bytes of presented files as
 * they stream by (the helper has no OpenSSL), reap or kill the helper, and
 * the "file_op" audit line. */
#include "agent/files/internal.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/missing.h"

#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define HELPER_ERR_MAX 256

/* ---- names -------------------------------------------------------------------------------- */

static const char *const op_names[BK_FILE_OP_N] = {
	[BK_FILE_CREATE] = "file_create", [BK_FILE_VIEW] = "view", [BK_FILE_STR_REPLACE] = "str_replace",
	[BK_FILE_LS] = "ls",		  [BK_FILE_GLOB] = "glob", [BK_FILE_GREP] = "grep",
	[BK_FILE_PRESENT] = "present_files", [BK_FILE_WIPE] = "wipe",
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

/* ---- spawning ---------------------------------------------------------------------------------- */

/* Start the helper for q: its pid and the read end of its pipe. Returns 0
 * or -errno with a sentence in err. */
static int spawn_helper(const struct bk_pod *pod, const struct freq *q, pid_t *pid, int *rdp, char *err)
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
	/* move the three descriptors out of the way of fds 3..5 first, so
	 * the dup2 actions cannot clobber one another */
	_cleanup_close_ int a_req = fcntl(reqfd, F_DUPFD_CLOEXEC, 100);
	_cleanup_close_ int a_chan = fcntl(p[1], F_DUPFD_CLOEXEC, 100);
	_cleanup_close_ int a_pid = fcntl(pod->sandbox_pidfd, F_DUPFD_CLOEXEC, 100);
	int e = a_req < 0 || a_chan < 0 || a_pid < 0 ? errno : 0;
	close(p[1]);
	if (!e) {
		posix_spawn_file_actions_t fa;
		posix_spawnattr_t at;
		sigset_t none, dfl;
		sigemptyset(&none);
		sigemptyset(&dfl);
		sigaddset(&dfl, SIGPIPE);
		posix_spawn_file_actions_init(&fa);
		posix_spawnattr_init(&at);
		posix_spawn_file_actions_adddup2(&fa, a_req, FD_REQ);
		posix_spawn_file_actions_adddup2(&fa, a_chan, FD_CHAN);
		posix_spawn_file_actions_adddup2(&fa, a_pid, FD_PIDFD);
		posix_spawn_file_actions_addclosefrom_np(&fa, FD_PIDFD + 1);
		posix_spawnattr_setsigmask(&at, &none);
		posix_spawnattr_setsigdefault(&at, &dfl);
		posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
		char *argv[] = { (char *)bkf_helper_argv0, NULL };
		char *envp[] = { NULL };
		/* /proc/self/exe: the running agent's own image, even when the
		 * file on disk was replaced by an upgrade */
		e = posix_spawn(pid, "/proc/self/exe", &fa, &at, argv, envp);
		posix_spawn_file_actions_destroy(&fa);
		posix_spawnattr_destroy(&at);
	}
	if (e)
		return bk_fail_buf(err, HELPER_ERR_MAX, -e, "cannot start the file helper: %s", strerror(e));
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

/* Run q in a helper. Returns 0 with res filled by the helper's records, or
 * -errno with a sentence in err (spawn failure, -ETIMEDOUT, a helper that
 * died or misbehaved). */
static int run_helper(const struct bk_pod *pod, const struct freq *q, struct hashes *hs,
		      struct bk_file_result *res, char *err)
{
	pid_t pid = -1;
	_cleanup_close_ int rd = -1;
	int r = spawn_helper(pod, q, &pid, &rd, err);
	if (r < 0)
		return r;
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		int e = errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return bk_fail_buf(err, HELPER_ERR_MAX, -e, "cannot open a pidfd for the file helper: %s", strerror(e));
	}
	int timeout_ms = q->rq.op == BK_FILE_WIPE ? WIPE_TIMEOUT_MS : HELPER_TIMEOUT_MS;
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct collect c = { .op = q->rq.op, .res = res, .hs = hs };
	r = collect(&c, rd, deadline);
	siginfo_t si = { 0 };
	reap(pidfd, r == 0 && c.done, deadline, &si);
	if (r == -ETIMEDOUT)
		return bk_fail_buf(err, HELPER_ERR_MAX, r, "the file operation did not finish within %d s",
				   timeout_ms / 1000);
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
	struct hashes hs = { 0 };
	char err[HELPER_ERR_MAX] = "";
	int r = run_helper(pod, q, rq->op == BK_FILE_PRESENT ? &hs : NULL, res, err);
	if (r == -ETIMEDOUT) {
		refuse(res, r, 504, "timeout", "%s", err);
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
