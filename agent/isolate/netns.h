/* SPDX-License-Identifier: Apache-2.0 */
/* Network namespaces of execs. An exec with a fresh network namespace gets
 * one made ahead of time by a background thread (lo up, never used, kept
 * as an fd): creating one (~0.5 ms) and tearing it down stay off the exec
 * path. unshare(CLONE_NEWNET) affects only the calling thread, which
 * returns to the agent's own namespace at once; a thread that cannot is
 * never left serving (abort). An exec in the pod's namespace needs the
 * pod's own addresses instead (denied to it by the BPF layer). */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define BK_NETNS_POOL 8

struct bk_netns_pool {
	int self_netns;           /* the agent's own (not owned) */
	int fd[BK_NETNS_POOL];
	int n;
	bool stop;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool inited, started;
};

/* A fresh network namespace with lo up, made from the calling thread, which
 * then returns to self_netns. fd (O_CLOEXEC) or -errno. */
int bk_netns_fresh(int self_netns);

/* Make the first namespace, then start the thread that keeps the pool
 * full. err receives a sentence on failure. */
int bk_netns_pool_start(struct bk_netns_pool *p, int self_netns, char *err, size_t errlen);
/* Stop the thread and close what is left in the pool (also after a failed
 * or no start: p must then be zeroed). */
void bk_netns_pool_stop(struct bk_netns_pool *p);
/* A fresh namespace from the pool, or made now when it is empty. fd or -errno. */
int bk_netns_pool_take(struct bk_netns_pool *p);

/* The addresses of the network namespace of pidfd's process (IPv4 as
 * ::ffff:a.b.c.d), read from the calling thread, which then returns to
 * self_netns. The count (at most max) or -errno. */
int bk_netns_addrs_of(int self_netns, int pidfd, unsigned char (*addrs)[16], int max);

struct bk_engine;
/* bk_netns_fresh from the agent's own namespace (the self-test's probes). */
int bk_engine_fresh_netns(struct bk_engine *e);

struct exec_ctx;
/* Step "netns" of an exec with a fresh namespace: take one from the pool
 * (x->netns_fd); the exec child enters it (child.c). */
int bk_step_netns(struct exec_ctx *x);
