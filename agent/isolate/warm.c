/* SPDX-License-Identifier: Apache-2.0 */
/* Warm exec slots (see warm.h): the list, the thread that makes them, the
 * take. */
#include "agent/isolate/warm.h"
#include "agent/isolate/exec.h"
#include "agent/isolate/step.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/util.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>

/* A pod and profile to make a slot for. */
struct want {
	struct bk_pod pod; /* its own copy (sandbox_pidfd its own) */
	const struct bk_profile *profile;
	struct want *next;
};

struct bk_warm {
	struct bk_engine *e;
	struct bk_warm_ops ops;
	pthread_mutex_t lock;
	pthread_t thr;
	bool started, stop;
	int efd;                     /* wakes the thread */
	struct bk_warm_slot *ready;  /* made, waiting for a request */
	struct want *wants;          /* to make, in order */
	struct want *making;         /* being made now (counted for its pod) */
	char making_id[24];          /* ... and its exec id */
	struct bk_warm_stats st;
	int busy;                    /* execs running now (atomic) */
	uint64_t last_end_ns;        /* the last one's end (atomic) */
};

#define TICK_MS 100 /* how soon a slot whose pod went away is torn down */
#define QUIET_MS 3  /* no exec for this long: slots may be made */

static bool same_pod(const struct bk_pod *a, const struct bk_pod *b)
{
	if (!streq(a->pod_uid, b->pod_uid) || !streq(a->sandbox.id, b->sandbox.id) ||
	    a->sandbox.init_pid != b->sandbox.init_pid || a->sandbox.init_start != b->sandbox.init_start ||
	    a->uid != b->uid || a->gid != b->gid || !streq(a->pod_v2, b->pod_v2) || a->n_v1 != b->n_v1)
		return false;
	for (int i = 0; i < a->n_v1; i++)
		if (!streq(a->v1[i].ctrls, b->v1[i].ctrls) || !streq(a->v1[i].pod, b->v1[i].pod) ||
		    !streq(a->v1[i].container, b->v1[i].container))
			return false;
	return true;
}

/* The slot's child has exited (its pod's pid namespace went, or it was
 * killed); a slot without a child: its pod's sandbox container has. */
static bool child_gone(const struct bk_warm_slot *w)
{
	struct pollfd pf = { .fd = w->x.pidfd >= 0 ? w->x.pidfd : w->pod.sandbox_pidfd, .events = POLLIN };
	return pf.fd < 0 || poll(&pf, 1, 0) != 0;
}

static void wake(struct bk_warm *wm)
{
	uint64_t one = 1;
	(void)!write(wm->efd, &one, sizeof(one));
}

/* How many slots this pod and profile have, made or on their way. */
static unsigned count(struct bk_warm *wm, const struct bk_pod *pod, const struct bk_profile *prof)
{
	unsigned n = 0;
	for (struct bk_warm_slot *w = wm->ready; w; w = w->next)
		n += w->req.profile == prof && same_pod(&w->pod, pod);
	for (struct want *t = wm->wants; t; t = t->next)
		n += t->profile == prof && same_pod(&t->pod, pod);
	if (wm->making)
		n += wm->making->profile == prof && same_pod(&wm->making->pod, pod);
	return n;
}

struct bk_warm_slot *bk_warm_take(struct bk_engine *e, const struct bk_pod *pod, const struct bk_exec_req *req)
{
	struct bk_warm *wm = e->warm;
	if (!wm || req->pty) /* a slot's child has its stdio already (pipes) */
		return NULL;
	struct bk_warm_slot *got = NULL;
	pthread_mutex_lock(&wm->lock);
	for (struct bk_warm_slot **pp = &wm->ready; *pp; pp = &(*pp)->next) {
		struct bk_warm_slot *w = *pp;
		if (w->req.profile != req->profile || !same_pod(&w->pod, pod) || child_gone(w))
			continue;
		*pp = w->next;
		w->next = NULL;
		got = w;
		wm->st.ready--;
		wm->st.taken++;
		break;
	}
	pthread_mutex_unlock(&wm->lock);
	return got;
}

void bk_warm_busy(struct bk_engine *e)
{
	if (e->warm)
		__atomic_add_fetch(&e->warm->busy, 1, __ATOMIC_RELAXED);
}

/* No exec runs, none ended in the last QUIET_MS; else how long to wait. */
static int quiet_wait_ms(struct bk_warm *wm)
{
	if (__atomic_load_n(&wm->busy, __ATOMIC_RELAXED) > 0)
		return QUIET_MS;
	uint64_t end = __atomic_load_n(&wm->last_end_ns, __ATOMIC_RELAXED), now = now_ns();
	uint64_t q = (uint64_t)QUIET_MS * 1000000ull;
	return now - end >= q ? 0 : (int)((end + q - now) / 1000000ull) + 1;
}

void bk_warm_want(struct bk_engine *e, const struct bk_pod *pod, const struct bk_exec_req *req)
{
	struct bk_warm *wm = e->warm;
	if (!wm)
		return;
	__atomic_store_n(&wm->last_end_ns, now_ns(), __ATOMIC_RELAXED);
	__atomic_sub_fetch(&wm->busy, 1, __ATOMIC_RELAXED);
	/* not for names in policy: the exec's DNS proxy endpoint takes the
	 * pod's resolvers and search domains of the moment it is made */
	if (!e->cfg->warm_slots || req->profile->n_domains)
		return;
	pthread_mutex_lock(&wm->lock);
	unsigned have = count(wm, pod, req->profile);
	unsigned need = have < e->cfg->warm_slots ? (unsigned)e->cfg->warm_slots - have : 0;
	struct want **tail = &wm->wants;
	while (*tail)
		tail = &(*tail)->next;
	for (unsigned i = 0; i < need && !wm->stop; i++) {
		struct want *t = calloc(1, sizeof(*t));
		if (!t)
			break;
		t->pod = *pod;
		t->pod.sandbox_pidfd = fcntl(pod->sandbox_pidfd, F_DUPFD_CLOEXEC, 3);
		if (t->pod.sandbox_pidfd < 0) {
			free(t);
			break;
		}
		t->profile = req->profile;
		*tail = t;
		tail = &t->next;
	}
	pthread_mutex_unlock(&wm->lock);
	if (need)
		wake(wm);
}

bool bk_warm_has(struct bk_engine *e, const char *exec_id)
{
	struct bk_warm *wm = e->warm;
	if (!wm || !exec_id[0])
		return false;
	bool found = false;
	pthread_mutex_lock(&wm->lock);
	found = streq(wm->making_id, exec_id);
	for (struct bk_warm_slot *w = wm->ready; w && !found; w = w->next)
		found = streq(w->res.exec_id, exec_id);
	pthread_mutex_unlock(&wm->lock);
	return found;
}

void bk_warm_each_id(struct bk_engine *e, void (*fn)(const char *exec_id, void *ud), void *ud)
{
	struct bk_warm *wm = e->warm;
	if (!wm)
		return;
	pthread_mutex_lock(&wm->lock);
	if (wm->making_id[0])
		fn(wm->making_id, ud);
	for (struct bk_warm_slot *w = wm->ready; w; w = w->next)
		fn(w->res.exec_id, ud);
	pthread_mutex_unlock(&wm->lock);
}

void bk_warm_stats(struct bk_engine *e, struct bk_warm_stats *st)
{
	memset(st, 0, sizeof(*st));
	struct bk_warm *wm = e->warm;
	if (!wm)
		return;
	pthread_mutex_lock(&wm->lock);
	*st = wm->st;
	pthread_mutex_unlock(&wm->lock);
}

/* Make one slot for t (taken off the list; the lock not held). */
static void make(struct bk_warm *wm, struct want *t)
{
	struct bk_warm_slot *w = calloc(1, sizeof(*w));
	int r = -ENOMEM;
	if (w) {
		/* its id known before its cgroup exists (bk_warm_has) */
		random_id(w->res.exec_id, sizeof(w->res.exec_id));
		pthread_mutex_lock(&wm->lock);
		snprintf(wm->making_id, sizeof(wm->making_id), "%s", w->res.exec_id);
		pthread_mutex_unlock(&wm->lock);
		w->pod = t->pod;
		t->pod.sandbox_pidfd = -1;
		w->req = (struct bk_exec_req){ .command = "", .profile = t->profile, .client_fd = -1 };
		r = wm->ops.park(wm->e, w);
	}
	pthread_mutex_lock(&wm->lock);
	wm->making = NULL;
	wm->making_id[0] = '\0';
	bool keep = r == 0 && !wm->stop;
	if (keep) {
		/* at the tail: the oldest is taken first */
		w->made_ns = now_ns();
		struct bk_warm_slot **tail = &wm->ready;
		while (*tail)
			tail = &(*tail)->next;
		*tail = w;
		wm->st.ready++;
		wm->st.made++;
	} else if (r < 0) {
		wm->st.failed++;
	}
	pthread_mutex_unlock(&wm->lock);
	if (r < 0 && w)
		log_debug("warm_failed", LS("pod", w->pod.pod_name), LS("layer", w->res.layer),
			  LS("error", w->res.error));
	if (!keep && w)
		wm->ops.discard(w);
	bk_pod_release(&t->pod);
	free(t);
}

/* Slots unused for exec.warm_idle_s, or whose child is gone; all of them
 * when stopping. Taken off the list under the lock, torn down outside. */
static struct bk_warm_slot *collect(struct bk_warm *wm, bool all)
{
	uint64_t idle = wm->e->cfg->warm_idle_s * 1000000000ull, now = now_ns();
	struct bk_warm_slot *out = NULL;
	for (struct bk_warm_slot **pp = &wm->ready; *pp;) {
		struct bk_warm_slot *w = *pp;
		bool gone = !all && child_gone(w), old = !all && now - w->made_ns >= idle;
		if (all || gone || old) {
			*pp = w->next;
			w->next = out;
			out = w;
			wm->st.ready--;
			wm->st.gone += gone;
			wm->st.expired += old && !gone;
		} else {
			pp = &w->next;
		}
	}
	return out;
}

static void discard_all(struct bk_warm *wm, struct bk_warm_slot *w)
{
	while (w) {
		struct bk_warm_slot *n = w->next;
		wm->ops.discard(w);
		w = n;
	}
}

static void *worker(void *arg)
{
	struct bk_warm *wm = arg;
	/* below the requests: a slot is made with what they leave */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
	for (;;) {
		pthread_mutex_lock(&wm->lock);
		if (wm->stop) {
			pthread_mutex_unlock(&wm->lock);
			break;
		}
		struct want *t = wm->wants;
		int wait = t ? quiet_wait_ms(wm) : 0;
		if (t && wait) {
			pthread_mutex_unlock(&wm->lock);
			struct pollfd pf = { .fd = wm->efd, .events = POLLIN };
			if (poll(&pf, 1, wait) > 0) {
				uint64_t v;
				(void)!read(wm->efd, &v, sizeof(v));
			}
			continue;
		}
		if (t) {
			wm->wants = t->next;
			wm->making = t;
			pthread_mutex_unlock(&wm->lock);
			make(wm, t);
			continue;
		}
		struct bk_warm_slot *old = collect(wm, false);
		bool any = wm->ready != NULL;
		pthread_mutex_unlock(&wm->lock);
		discard_all(wm, old);
		struct pollfd pf = { .fd = wm->efd, .events = POLLIN };
		if (poll(&pf, 1, any ? TICK_MS : -1) > 0) {
			uint64_t v;
			(void)!read(wm->efd, &v, sizeof(v));
		}
	}
	pthread_mutex_lock(&wm->lock);
	struct bk_warm_slot *all = collect(wm, true);
	struct want *t = wm->wants;
	wm->wants = NULL;
	pthread_mutex_unlock(&wm->lock);
	discard_all(wm, all);
	while (t) {
		struct want *n = t->next;
		bk_pod_release(&t->pod);
		free(t);
		t = n;
	}
	return NULL;
}

int bk_warm_start(struct bk_engine *e, const struct bk_warm_ops *ops, char *err, size_t errlen)
{
	struct bk_warm *wm = calloc(1, sizeof(*wm));
	if (!wm)
		return bk_fail_buf(err, errlen, -ENOMEM, "warm slots: no memory");
	wm->e = e;
	wm->ops = *ops;
	pthread_mutex_init(&wm->lock, NULL);
	wm->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (wm->efd < 0) {
		int r = -errno;
		free(wm);
		return bk_fail_buf(err, errlen, r, "warm slots: eventfd: %s", strerror(-r));
	}
	int r = pthread_create(&wm->thr, NULL, worker, wm);
	if (r) {
		close(wm->efd);
		free(wm);
		return bk_fail_buf(err, errlen, -r, "warm slots: cannot start their thread: %s", strerror(r));
	}
	wm->started = true;
	e->warm = wm;
	return 0;
}

void bk_warm_stop(struct bk_engine *e)
{
	struct bk_warm *wm = e->warm;
	if (!wm)
		return;
	pthread_mutex_lock(&wm->lock);
	wm->stop = true;
	pthread_mutex_unlock(&wm->lock);
	wake(wm);
	if (wm->started)
		pthread_join(wm->thr, NULL);
	e->warm = NULL;
	close(wm->efd);
	pthread_mutex_destroy(&wm->lock);
	free(wm);
}
