/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers shared by the agent, boxkitectl and the shim.
 * Ownership follows bubblewrap/systemd: cleanup attributes instead of free
 * ladders, steal_* to hand ownership out of a scope. */
#pragma once
#include <sys/resource.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void freep(void *p) { free(*(void **)p); }
/* Close *fd if open, and forget it (-1): a struct's descriptor closed
 * early must not be closed again later, when its number may already be
 * another thread's (procs.c closes a process's pipes one by one). */
static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
		*fd = -1;
	}
}
static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

static inline void *steal_ptr_(void **p)
{
	void *r = *p;
	*p = NULL;
	return r;
}
#define steal_ptr(p) steal_ptr_((void **)(p))
static inline int steal_fd(int *fd)
{
	int r = *fd;
	*fd = -1;
	return r;
}

static inline bool streq(const char *a, const char *b) { return strcmp(a, b) == 0; }
static inline bool startswith(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Whether a comma-separated list holds item exactly ("rw,pids" has "pids"). */
bool csv_has(const char *list, const char *item);
/* Read a whole (small) file. Returns 0 and a NUL-terminated buffer, or
 * -errno; -EFBIG when it is larger than max. */
int read_file_at(int dirfd, const char *path, size_t max, char **out, size_t *len);
/* The same, of an open file from where it is. */
int read_fd_all(int fd, size_t max, char **out, size_t *len);
/* RLIMIT_NOFILE's soft limit raised to its hard limit (as far as allowed);
 * *rl: the limits in force after it. */
int nofile_raise(struct rlimit *rl);
/* Write a string to an existing file (cgroup knobs, /proc files). */
int write_file_at(int dirfd, const char *path, const char *s);
/* Parse a non-negative decimal integer with full validation (no atoi). */
int parse_u64(const char *s, uint64_t *out);
/* Monotonic time in nanoseconds. */
uint64_t now_ns(void);
/* 16 hex digits from getrandom (an exec's id) */
void random_id(char *out, size_t len);
/* CLOCK_MONOTONIC now plus ms, for pthread_cond_timedwait on a condition
 * variable set to that clock. */
struct timespec mono_after_ms(unsigned ms);
/* A condition variable on CLOCK_MONOTONIC (for mono_after_ms). */
void mono_cond_init(pthread_cond_t *c);
/* A detached thread running fn(arg); stack: its size (0: the default).
 * 0, or pthread_create's error number. */
int thread_start_detached(void *(*fn)(void *), void *arg, size_t stack);
/* Work for after a request's answer. A request thread opens a window
 * (bk_later_open) before it handles the request and closes it after the
 * answer is sent (bk_later_close), which runs, in order, what bk_later was
 * given meanwhile: work the answer does not depend on, off its way (a
 * second close runs nothing: a send that may wait closes it before). Outside
 * a window (another thread), or with BK_LATER_MAX already waiting,
 * bk_later returns -1 and the caller does the work itself, at once. */
#define BK_LATER_MAX 16
void bk_later_open(void);
int bk_later(void (*fn)(void *), void *arg);
void bk_later_close(void);
/* mkdir -p, mode for every created component. */
int mkdir_p(const char *path, mode_t mode);
