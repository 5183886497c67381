/* SPDX-License-Identifier: Apache-2.0 */
/* Background processes: the registry, the ring buffers, one thread per
 * process running its exec (procs.h). */
#include "agent/session/procs.h"
#include "agent/session/run.h"
#include "agent/isolate/exec.h"
#include "lib/log.h"
#include "lib/util.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

const char *const bk_proc_status_names[] = { "running", "exited", "stopped", "killed" };

struct proc {
	struct proc *next;
	int refs;           /* the registry's, the thread's, callers' (lock) */
	bool listed;        /* in the registry */
	struct bk_agent *a;
	char id[BK_PROC_ID_MAX + 1];
	char pod_uid[BK_UID_LEN + 1];
	char exec_id[24];
	char *command, *description;
	uint32_t max_runtime_s;
	uint64_t started_unix_ns, done_ns;
	enum bk_proc_state status;
	bool has_exit;
	int exit_code;
	bool started;       /* the command runs */
	bool done;          /* its exec ended (the thread's last word) */
	bool start_failed;  /* it never ran: ref */
	bool dropped;       /* killed by kill-all, /configure or the agent's stop */
	struct bk_refusal ref;
	/* output, stdout and stderr merged: byte o of the output is
	 * ring[o % cap] while o >= total - min(total, cap); ring grows up to
	 * cap (allocated) before it wraps */
	char *ring;
	size_t alloc, cap;
	uint64_t total;
	int stdin_rd, stdin_wr, stop_rd, stop_wr, term_rd, term_wr;
	pthread_mutex_t io; /* a write to stdin vs. its close */
	struct bk_pod pod;
	struct bk_exec_result *res; /* its exec's, once it ran and ended (the receipt) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER; /* started, done */
static struct proc *head;

static void proc_unref_locked(struct proc *p)
{
	if (--p->refs > 0)
		return;
	closep(&p->stdin_rd);
	closep(&p->stdin_wr);
	closep(&p->stop_rd);
	closep(&p->stop_wr);
	closep(&p->term_rd);
	closep(&p->term_wr);
	bk_pod_release(&p->pod);
	if (p->res) {
		bk_exec_result_free(p->res);
		free(p->res);
	}
	pthread_mutex_destroy(&p->io);
	free(p->ring);
	free(p->command);
	free(p->description);
	free(p);
}

static void unlist_locked(struct proc *p)
{
	if (!p->listed)
		return;
	for (struct proc **pp = &head; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	p->listed = false;
	proc_unref_locked(p);
}

static struct proc *find_locked(const char *pod_uid, const char *id)
{
	for (struct proc *p = head; p; p = p->next)
		if (streq(p->pod_uid, pod_uid) && streq(p->id, id))
			return p;
	return NULL;
}

/* SIGTERM to its cgroup's processes (the engine sees the hang-up of its
 * term pipe: bk_exec_cg_term). */
static void term_locked(struct proc *p)
{
	closep(&p->term_wr);
}

/* Its cgroup killed (the engine sees the hang-up of its stop pipe). */
static void kill_locked(struct proc *p)
{
	closep(&p->stop_wr);
}

static void ring_append(struct proc *p, const char *buf, size_t n)
{
	if (n >= p->cap) { /* only the last cap bytes stay */
		if (p->alloc < p->cap) {
			char *nb = realloc(p->ring, p->cap);
			if (!nb)
				goto lost;
			p->ring = nb;
			p->alloc = p->cap;
		}
		uint64_t t = p->total + n;
		for (size_t i = 0; i < p->cap; i++)
			p->ring[(t - p->cap + i) % p->cap] = buf[n - p->cap + i];
		p->total = t;
		return;
	}
	if (p->alloc < p->cap && p->total + n > p->alloc) {
		/* not wrapped yet (total <= alloc < cap): grow */
		size_t na = p->alloc ? p->alloc : 4096;
		while (na < p->total + n && na < p->cap)
			na *= 2;
		if (na > p->cap)
			na = p->cap;
		char *nb = realloc(p->ring, na);
		if (!nb)
			goto lost;
		p->ring = nb;
		p->alloc = na;
	}
	size_t at = (size_t)(p->total % p->cap), first = p->cap - at < n ? p->cap - at : n;
	memcpy(p->ring + at, buf, first);
	memcpy(p->ring, buf + first, n - first);
	p->total += n;
	return;
lost:
	/* no memory: the bytes are counted as written and dropped */
	p->total += n;
}

static uint64_t ring_first(const struct proc *p)
{
	uint64_t held = p->total < p->cap ? p->total : p->cap;
	if (p->alloc < p->cap && held > p->alloc) /* lost to ENOMEM */
		held = 0;
	return p->total - held;
}

static void info_fill(const struct proc *p, struct bk_proc_info *i)
{
	memset(i, 0, sizeof(*i));
	snprintf(i->id, sizeof(i->id), "%s", p->id);
	snprintf(i->exec_id, sizeof(i->exec_id), "%s", p->exec_id);
	i->command = strdup(p->command);
	i->description = p->description ? strdup(p->description) : NULL;
	i->status = p->status;
	i->has_exit = p->has_exit;
	i->exit_code = p->exit_code;
	i->started_unix_ns = p->started_unix_ns;
	i->total_bytes = p->total;
	i->dropped_bytes = ring_first(p);
}

void bk_proc_info_free(struct bk_proc_info *i)
{
	free(i->command);
	free(i->description);
	i->command = i->description = NULL;
}

/* ---- the exec's sink, on the process's thread --------------------------------------------- */

static int sink_started(void *ud, const struct bk_exec_result *res)
{
	struct proc *p = ud;
	pthread_mutex_lock(&lock);
	bool dropped = p->dropped;
	if (!dropped) {
		p->started = true;
		snprintf(p->exec_id, sizeof(p->exec_id), "%s", res->exec_id);
		pthread_cond_broadcast(&changed);
	}
	pthread_mutex_unlock(&lock);
	/* the command has its stdin: the agent keeps only the write end, so
	 * that a write after its end fails instead of filling a pipe */
	closep(&p->stdin_rd);
	return dropped ? -ECANCELED : 0;
}

static int sink_output(void *ud, int k, const char *buf, size_t n)
{
	struct proc *p = ud;
	(void)k;
	pthread_mutex_lock(&lock);
	ring_append(p, buf, n);
	pthread_mutex_unlock(&lock);
	return 0;
}

static int sink_denied(void *ud, const struct bk_denial *d)
{
	(void)ud;
	(void)d; /* in the exec's receipt, audit log and counters */
	return 0;
}

static bool pod_gone(const struct bk_pod *pod)
{
	struct pollfd pf = { .fd = pod->sandbox_pidfd, .events = POLLIN };
	return pod->sandbox_pidfd < 0 || poll(&pf, 1, 0) > 0;
}

/* Past BK_PROC_KEEP_DONE finished processes of the pod, the oldest goes. */
static void trim_done_locked(const char *pod_uid)
{
	for (;;) {
		int n = 0;
		struct proc *oldest = NULL;
		for (struct proc *q = head; q; q = q->next)
			if (q->done && streq(q->pod_uid, pod_uid)) {
				n++;
				if (!oldest || q->done_ns < oldest->done_ns)
					oldest = q;
			}
		if (n <= BK_PROC_KEEP_DONE || !oldest)
			return;
		unlist_locked(oldest);
	}
}

static void *proc_main(void *arg)
{
	struct proc *p = arg;
	const struct bk_exec_sink sink = { .ud = p, .started = sink_started, .output = sink_output,
					   .denied = sink_denied };
	struct bk_exec_args ea = { .command = p->command, .timeout = p->max_runtime_s, .client_fd = p->stop_rd,
				   .term_fd = p->term_rd, .sink = &sink, .uncapped = true, .stdin_fd = p->stdin_rd };
	struct bk_exec_result *res = calloc(1, sizeof(*res));
	struct bk_refusal ref = { 0 };
	int r = -1;
	if (res) {
		r = bk_session_exec(p->a, &p->pod, &ea, res, &ref);
	} else {
		ref.code = "out_of_memory";
		bk_fail(&ref.err, -ENOMEM, "", "no memory for the process's exec");
	}
	pthread_mutex_lock(&p->io);
	closep(&p->stdin_wr);
	pthread_mutex_unlock(&p->io);
	pthread_mutex_lock(&lock);
	if (!p->started) {
		p->start_failed = r < 0;
		p->ref = ref;
		p->status = BK_PROC_KILLED;
	} else if (r == 0) {
		if (p->status == BK_PROC_RUNNING)
			p->status = res->timed_out ? BK_PROC_KILLED : BK_PROC_EXITED;
		p->has_exit = true;
		/* the reference's (Python's returncode): -N when signal N ended
		 * it (-15: a stop's TERM; -9: the kill after the stop's grace,
		 * max_runtime_seconds, the pod's end), else its exit status */
		p->exit_code = res->signal ? -res->signal : res->exit_code;
		/* kept for its receipt; its output went to the ring */
		free(res->out);
		free(res->err);
		res->out = res->err = NULL;
		p->res = res;
		res = NULL;
	} else if (p->status == BK_PROC_RUNNING) {
		p->status = BK_PROC_KILLED; /* a read-back after its start failed: killed at once */
	}
	p->done = true;
	p->done_ns = now_ns();
	log_info("process_end", LS("process_id", p->id), LS("exec_id", p->exec_id), LS("pod_uid", p->pod_uid),
		 LS("status", bk_proc_status_names[p->status]), LI("exit_code", p->has_exit ? p->exit_code : -1),
		 LI("output_bytes", (int64_t)p->total));
	/* its pod's sandbox is gone: nobody can ask for it any more */
	if (p->started && pod_gone(&p->pod))
		unlist_locked(p);
	else
		trim_done_locked(p->pod_uid);
	pthread_cond_broadcast(&changed);
	closep(&p->stop_rd);
	closep(&p->term_rd);
	proc_unref_locked(p); /* the thread's */
	pthread_mutex_unlock(&lock);
	if (r == 0 && res)
		bk_exec_result_free(res);
	free(res);
	return NULL;
}

/* Wait (lock held) until p is done, at most ms. */
static void wait_done_locked(struct proc *p, unsigned ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (!p->done)
		if (pthread_cond_timedwait(&changed, &lock, &until) == ETIMEDOUT)
			break;
}

int bk_proc_start(struct bk_agent *a, const struct bk_pod *pod, const char *command, const char *description,
		  uint32_t max_runtime_s, struct bk_proc_info *out, int *running, struct bk_refusal *ref)
{
	memset(ref, 0, sizeof(*ref));
	struct proc *p = calloc(1, sizeof(*p));
	if (!p)
		goto nomem;
	p->stdin_rd = p->stdin_wr = p->stop_rd = p->stop_wr = p->term_rd = p->term_wr = -1;
	p->pod.sandbox_pidfd = -1;
	pthread_mutex_init(&p->io, NULL);
	p->a = a;
	p->command = strdup(command);
	p->description = description ? strdup(description) : NULL;
	if (!p->command || (description && !p->description))
		goto nomem_p;
	int fd[2], sf[2];
	if (pipe2(fd, O_CLOEXEC) < 0)
		goto pipes;
	p->stdin_rd = fd[0];
	p->stdin_wr = fd[1];
	if (pipe2(sf, O_CLOEXEC) < 0)
		goto pipes;
	p->stop_rd = sf[0];
	p->stop_wr = sf[1];
	if (pipe2(sf, O_CLOEXEC) < 0)
		goto pipes;
	p->term_rd = sf[0];
	p->term_wr = sf[1];
	fcntl(p->stdin_wr, F_SETFL, fcntl(p->stdin_wr, F_GETFL) | O_NONBLOCK);
	p->pod = *pod;
	p->pod.sandbox_pidfd = fcntl(pod->sandbox_pidfd, F_DUPFD_CLOEXEC, 3);
	if (p->pod.sandbox_pidfd < 0)
		goto pipes;
	uint8_t rb[16];
	if (getrandom(rb, sizeof(rb), 0) != sizeof(rb))
		goto pipes;
	int o = snprintf(p->id, sizeof(p->id), "proc_");
	for (size_t i = 0; i < sizeof(rb); i++)
		o += snprintf(p->id + o, sizeof(p->id) - (size_t)o, "%02x", rb[i]);
	snprintf(p->pod_uid, sizeof(p->pod_uid), "%s", pod->pod_uid);
	p->max_runtime_s = max_runtime_s;
	p->cap = (size_t)a->cfg.process_output_cap;
	p->status = BK_PROC_RUNNING;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	p->started_unix_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;

	pthread_mutex_lock(&lock);
	int n = 0;
	for (struct proc *q = head; q; q = q->next)
		if (streq(q->pod_uid, pod->pod_uid) && q->status == BK_PROC_RUNNING && !q->done)
			n++;
	if ((uint64_t)n >= a->cfg.process_max) {
		pthread_mutex_unlock(&lock);
		*running = n;
		p->refs = 1;
		proc_unref_locked(p);
		return -EBUSY;
	}
	p->refs = 3; /* registry, thread, this call */
	p->listed = true;
	p->next = head;
	head = p;
	int tr = thread_start_detached(proc_main, p, 0);
	if (tr != 0) {
		p->refs--; /* no thread */
		unlist_locked(p);
		proc_unref_locked(p);
		pthread_mutex_unlock(&lock);
		ref->code = "out_of_memory";
		bk_fail(&ref->err, -tr, "", "cannot start the process's thread: %s", strerror(tr));
		return -1;
	}
	while (!p->started && !p->done)
		pthread_cond_wait(&changed, &lock);
	int r = 0;
	if (p->started) {
		info_fill(p, out);
	} else {
		if (p->start_failed) {
			*ref = p->ref;
		} else {
			ref->code = "process_killed";
			bk_fail(&ref->err, -ECANCELED, "",
				"the process was killed before it started (kill-all or a new session)");
		}
		unlist_locked(p);
		r = -1;
	}
	proc_unref_locked(p);
	pthread_mutex_unlock(&lock);
	if (r == 0)
		log_info("process_start", LS("process_id", out->id), LS("exec_id", out->exec_id),
			 LS("pod", pod->pod_name), LS("namespace", pod->pod_namespace),
			 LI("max_runtime_seconds", max_runtime_s));
	return r;

pipes:
	ref->code = "isolation_failed";
	bk_fail(&ref->err, -errno, "exec", "cannot make the process's pipes: %s", strerror(errno));
	p->refs = 1;
	proc_unref_locked(p);
	return -1;
nomem_p:
	p->refs = 1;
	proc_unref_locked(p);
nomem:
	ref->code = "out_of_memory";
	bk_fail(&ref->err, -ENOMEM, "", "out of memory");
	return -1;
}

int bk_proc_output(struct bk_agent *a, const char *pod_uid, const char *id, int64_t since,
		   struct bk_proc_output *out)
{
	(void)a;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&lock);
	struct proc *p = find_locked(pod_uid, id);
	if (!p) {
		pthread_mutex_unlock(&lock);
		return -ENOENT;
	}
	uint64_t first = ring_first(p), from = since < 0 ? 0 : (uint64_t)since;
	if (from < first) {
		out->truncated = true;
		from = first;
	}
	if (from > p->total)
		from = p->total;
	size_t n = (size_t)(p->total - from);
	out->chunk = malloc(n + 1);
	if (!out->chunk) {
		pthread_mutex_unlock(&lock);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n;) {
		size_t at = (size_t)((from + i) % p->cap), run = p->cap - at < n - i ? p->cap - at : n - i;
		memcpy(out->chunk + i, p->ring + at, run);
		i += run;
	}
	out->chunk[n] = '\0';
	out->len = n;
	out->next_offset = p->total;
	out->dropped_bytes = first;
	out->status = p->status;
	out->has_exit = p->has_exit;
	out->exit_code = p->exit_code;
	pthread_mutex_unlock(&lock);
	return 0;
}

int bk_proc_input(struct bk_agent *a, const char *pod_uid, const char *id, const char *data, size_t n)
{
	(void)a;
	pthread_mutex_lock(&lock);
	struct proc *p = find_locked(pod_uid, id);
	if (!p) {
		pthread_mutex_unlock(&lock);
		return -ENOENT;
	}
	p->refs++;
	bool running = p->started && !p->done;
	pthread_mutex_unlock(&lock);
	int r = 0;
	pthread_mutex_lock(&p->io);
	if (!running || p->stdin_wr < 0) {
		r = -ESRCH;
	} else {
		uint64_t until = now_ns() + 10000000000ull;
		size_t off = 0;
		while (off < n) {
			ssize_t w = write(p->stdin_wr, data + off, n - off);
			if (w > 0) {
				off += (size_t)w;
				continue;
			}
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && errno != EAGAIN) {
				r = -errno;
				break;
			}
			uint64_t now = now_ns();
			if (now >= until) {
				r = -ETIMEDOUT;
				break;
			}
			struct pollfd pf = { .fd = p->stdin_wr, .events = POLLOUT };
			poll(&pf, 1, (int)((until - now) / 1000000) + 1);
		}
	}
	pthread_mutex_unlock(&p->io);
	pthread_mutex_lock(&lock);
	proc_unref_locked(p);
	pthread_mutex_unlock(&lock);
	return r;
}

int bk_proc_stop(struct bk_agent *a, const char *pod_uid, const char *id, struct bk_proc_info *out)
{
	(void)a;
	pthread_mutex_lock(&lock);
	struct proc *p = find_locked(pod_uid, id);
	if (!p) {
		pthread_mutex_unlock(&lock);
		return -ENOENT;
	}
	p->refs++;
	if (!p->done) {
		if (p->status == BK_PROC_RUNNING)
			p->status = BK_PROC_STOPPED;
		/* as the reference: SIGTERM, its grace, then SIGKILL */
		term_locked(p);
		wait_done_locked(p, BK_PROC_STOP_GRACE_MS);
		if (!p->done) {
			kill_locked(p);
			wait_done_locked(p, 15000);
		}
	}
	info_fill(p, out);
	proc_unref_locked(p);
	pthread_mutex_unlock(&lock);
	log_info("process_stop", LS("process_id", out->id), LS("exec_id", out->exec_id),
		 LS("status", bk_proc_status_names[out->status]));
	return 0;
}

int bk_proc_list(struct bk_agent *a, const char *pod_uid, struct bk_proc_info **out, size_t *n)
{
	(void)a;
	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&lock);
	size_t c = 0;
	for (struct proc *p = head; p; p = p->next)
		c += streq(p->pod_uid, pod_uid);
	struct bk_proc_info *v = calloc(c ? c : 1, sizeof(*v));
	if (!v) {
		pthread_mutex_unlock(&lock);
		return -ENOMEM;
	}
	/* oldest first, as the reference's dict (insertion order) */
	size_t i = c;
	for (struct proc *p = head; p; p = p->next)
		if (streq(p->pod_uid, pod_uid))
			info_fill(p, &v[--i]);
	pthread_mutex_unlock(&lock);
	*out = v;
	*n = c;
	return 0;
}

/* Kill and forget every process of the pod (NULL: of every pod). */
static int kill_matching(const char *pod_uid, unsigned wait_ms)
{
	pthread_mutex_lock(&lock);
	int killed = 0, n = 0;
	for (struct proc *p = head; p; p = p->next)
		n += !pod_uid || streq(p->pod_uid, pod_uid);
	struct proc **v = calloc(n ? (size_t)n : 1, sizeof(*v));
	int k = 0;
	for (struct proc *p = head, *next; p; p = next) {
		next = p->next;
		if (pod_uid && !streq(p->pod_uid, pod_uid))
			continue;
		p->dropped = true;
		if (!p->done) {
			killed++;
			p->status = BK_PROC_KILLED;
			kill_locked(p);
		}
		if (v) {
			p->refs++;
			v[k++] = p;
		}
		unlist_locked(p);
	}
	for (int i = 0; i < k; i++) {
		wait_done_locked(v[i], wait_ms);
		proc_unref_locked(v[i]);
	}
	pthread_mutex_unlock(&lock);
	free(v);
	return killed;
}

int bk_proc_kill_all(struct bk_agent *a, const char *pod_uid)
{
	(void)a;
	int killed = kill_matching(pod_uid, 10000);
	if (killed)
		log_info("process_kill_all", LS("pod_uid", pod_uid), LI("killed", killed));
	return killed;
}

int bk_proc_with_result(struct bk_agent *a, const char *pod_uid, const char *id,
			void (*fn)(void *ud, struct bk_exec_result *res, const char *command), void *ud)
{
	(void)a;
	pthread_mutex_lock(&lock);
	struct proc *p = find_locked(pod_uid, id);
	int r = !p ? -ENOENT : !p->done || !p->res ? -EAGAIN : 0;
	if (r == 0)
		fn(ud, p->res, p->command);
	pthread_mutex_unlock(&lock);
	return r;
}

void bk_procs_shutdown(struct bk_agent *a)
{
	(void)a;
	kill_matching(NULL, 5000);
}
