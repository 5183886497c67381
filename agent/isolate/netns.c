/* SPDX-License-Identifier: Apache-2.0 */
/* Network namespaces of execs: the pool of fresh ones, the pod's addresses
 * (see netns.h). */
#include "agent/isolate/netns.h"
#include "agent/isolate/netlink.h"
#include "agent/isolate/step.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/util.h"

#include <fcntl.h>
#include <sched.h>

/* Back to the agent's own namespace, or die: never serve from a thread in
 * the wrong netns. */
static void netns_restore(int self_netns)
{
	if (setns(self_netns, CLONE_NEWNET) < 0) {
		log_errorf("netns_restore", "cannot return to the agent's network namespace: %s", strerror(errno));
		abort();
	}
}

int bk_netns_fresh(int self_netns)
{
	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	int r = bk_netns_lo_up();
	int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int saved = errno;
	netns_restore(self_netns);
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
	return bk_netns_fresh(e->self_netns);
}

static void *pool_filler(void *arg)
{
	struct bk_netns_pool *p = arg;
	/* refill only with CPU nobody else wants: execs come first */
	struct sched_param sp = { 0 };
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		if (p->n == (int)ARRAY_SIZE(p->fd)) {
			pthread_cond_wait(&p->cond, &p->lock);
			continue;
		}
		pthread_mutex_unlock(&p->lock);
		int fd = bk_netns_fresh(p->self_netns);
		pthread_mutex_lock(&p->lock);
		if (fd < 0) {
			/* the exec path makes its own and reports the error */
			pthread_mutex_unlock(&p->lock);
			usleep(100000);
			pthread_mutex_lock(&p->lock);
			continue;
		}
		p->fd[p->n++] = fd;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int bk_netns_pool_start(struct bk_netns_pool *p, int self_netns, char *err, size_t errlen)
{
	p->self_netns = self_netns;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->inited = true;
	int fd = bk_netns_fresh(self_netns);
	if (fd < 0)
		return bk_fail_buf(err, errlen, fd, "netns: cannot create a network namespace: %s", strerror(-fd));
	p->fd[p->n++] = fd;
	int r = pthread_create(&p->thread, NULL, pool_filler, p);
	if (r)
		return bk_fail_buf(err, errlen, -r, "cannot start the netns pool thread: %s", strerror(r));
	p->started = true;
	return 0;
}

void bk_netns_pool_stop(struct bk_netns_pool *p)
{
	if (p->started) {
		pthread_mutex_lock(&p->lock);
		p->stop = true;
		pthread_cond_signal(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->thread, NULL);
		p->started = false;
	}
	for (int i = 0; i < p->n; i++)
		close(p->fd[i]);
	p->n = 0;
	if (p->inited) {
		pthread_mutex_destroy(&p->lock);
		pthread_cond_destroy(&p->cond);
		p->inited = false;
	}
}

int bk_netns_pool_take(struct bk_netns_pool *p)
{
	int fd = -1;
	pthread_mutex_lock(&p->lock);
	if (p->n > 0)
		fd = p->fd[--p->n];
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return fd >= 0 ? fd : bk_netns_fresh(p->self_netns);
}

int bk_netns_addrs_of(int self_netns, int pidfd, unsigned char (*addrs)[16], int max)
{
	if (setns(pidfd, CLONE_NEWNET) < 0)
		return -errno;
	int n = bk_netns_addrs(addrs, max);
	netns_restore(self_netns);
	return n;
}

int bk_step_netns(struct exec_ctx *x)
{
	int fd = bk_netns_pool_take(&x->e->netns);
	if (fd < 0)
		return bk_fail(&x->err, fd, NULL, "cannot create the exec network namespace: %s", strerror(-fd));
	x->netns_fd = fd;
	return 0;
}
