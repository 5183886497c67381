/* SPDX-License-Identifier: Apache-2.0 */
/* The kept sandbox container instances (instances.h says what and how
 * long). */
#include "agent/isolate/instances.h"
#include "lib/util.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct bk_instance table[BK_INSTANCES];
static uint64_t clock_;

void bk_instances_lock(void)
{
	pthread_mutex_lock(&lock);
}

void bk_instances_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

void bk_instance_close_locked(struct bk_instance *in)
{
	for (int i = 0; i < in->n_v1; i++)
		close(in->v1[i].fd);
	if (in->masks_kept)
		close(in->mi_fd);
	close(in->pidfd);
	memset(in, 0, sizeof(*in));
}

static void sweep_locked(void)
{
	struct pollfd pf[BK_INSTANCES];
	int at[BK_INSTANCES], n = 0;
	for (int i = 0; i < BK_INSTANCES; i++) {
		struct bk_instance *in = &table[i];
		if (!in->pid || in->users)
			continue;
		if (in->dropped) {
			bk_instance_close_locked(in);
			continue;
		}
		pf[n] = (struct pollfd){ .fd = in->pidfd, .events = POLLIN };
		at[n++] = i;
	}
	if (n && poll(pf, (nfds_t)n, 0) > 0)
		for (int j = 0; j < n; j++)
			if (pf[j].revents)
				bk_instance_close_locked(&table[at[j]]);
}

void bk_instances_sweep(void)
{
	pthread_mutex_lock(&lock);
	sweep_locked();
	pthread_mutex_unlock(&lock);
}

struct bk_instance *bk_instance_locked(const struct bk_pod *pod)
{
	if (pod->sandbox_pidfd < 0 || pod->sandbox.init_pid <= 0)
		return NULL;
	struct bk_instance *in = NULL;
	for (int i = 0; i < BK_INSTANCES && !in; i++)
		if (table[i].pid == pod->sandbox.init_pid && table[i].start == pod->sandbox.init_start &&
		    !table[i].dropped)
			in = &table[i];
	if (!in) {
		sweep_locked();
		struct bk_instance *lru = NULL;
		for (int i = 0; i < BK_INSTANCES && !in; i++) {
			if (!table[i].pid)
				in = &table[i];
			else if (!table[i].users && (!lru || table[i].used < lru->used))
				lru = &table[i];
		}
		if (!in && lru) {
			bk_instance_close_locked(lru);
			in = lru;
		}
		if (!in)
			return NULL;
		int pfd = fcntl(pod->sandbox_pidfd, F_DUPFD_CLOEXEC, 3);
		if (pfd < 0)
			return NULL;
		in->pid = pod->sandbox.init_pid;
		in->start = pod->sandbox.init_start;
		in->pidfd = pfd;
	}
	in->used = ++clock_;
	return in;
}

void bk_instances_count(struct bk_instances_count *c)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_lock(&lock);
	for (int i = 0; i < BK_INSTANCES; i++)
		if (table[i].pid) {
			c->entries++;
			c->cgroup_fds += table[i].n_v1;
			c->mask_fds += table[i].masks_kept;
		}
	pthread_mutex_unlock(&lock);
}
