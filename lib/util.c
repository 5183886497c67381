/* SPDX-License-Identifier: Apache-2.0 */
#include "lib/util.h"

#include <sys/random.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

int read_file_at(int dirfd, const char *path, size_t max, char **out, size_t *len)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	return read_fd_all(fd, max, out, len);
}

int read_fd_all(int fd, size_t max, char **out, size_t *len)
{
	size_t cap = 4096, n = 0;
	_cleanup_free_ char *buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			if (cap >= max)
				return -EFBIG;
			cap = cap * 2 > max ? max : cap * 2;
			char *nb = realloc(buf, cap + 1);
			if (!nb)
				return -ENOMEM;
			buf = nb;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max)
		return -EFBIG;
	buf[n] = '\0';
	if (len)
		*len = n;
	*out = steal_ptr(&buf);
	return 0;
}

int write_file_at(int dirfd, const char *path, const char *s)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	size_t n = strlen(s);
	ssize_t r = write(fd, s, n);
	if (r < 0)
		return -errno;
	if ((size_t)r != n)
		return -EIO;
	return 0;
}

int parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s)
		return -EINVAL;
	uint64_t v = 0;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

void random_id(char *out, size_t len)
{
	uint8_t b[8];
	if (getrandom(b, sizeof(b), 0) != sizeof(b))
		memset(b, 0, sizeof(b));
	snprintf(out, len, "%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct timespec mono_after_ms(unsigned ms)
{
	uint64_t t = now_ns() + (uint64_t)ms * 1000000ull;
	return (struct timespec){ .tv_sec = (time_t)(t / 1000000000ull), .tv_nsec = (long)(t % 1000000000ull) };
}

void mono_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t at;
	pthread_condattr_init(&at);
	pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
	pthread_cond_init(c, &at);
	pthread_condattr_destroy(&at);
}

int thread_start_detached(void *(*fn)(void *), void *arg, size_t stack)
{
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (stack)
		pthread_attr_setstacksize(&at, stack);
	pthread_t t;
	int r = pthread_create(&t, &at, fn, arg);
	pthread_attr_destroy(&at);
	return r;
}

static __thread struct {
	bool open;
	int n;
	struct { void (*fn)(void *); void *arg; } w[BK_LATER_MAX];
} later;

void bk_later_open(void)
{
	later.open = true;
}

int bk_later(void (*fn)(void *), void *arg)
{
	if (!later.open || later.n == BK_LATER_MAX)
		return -1;
	later.w[later.n].fn = fn;
	later.w[later.n].arg = arg;
	later.n++;
	return 0;
}

void bk_later_close(void)
{
	later.open = false;
	for (int i = 0; i < later.n; i++)
		later.w[i].fn(later.w[i].arg);
	later.n = 0;
}

int mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

bool csv_has(const char *list, const char *item)
{
	size_t wl = strlen(item);
	for (const char *p = list; *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		if (l == wl && memcmp(p, item, wl) == 0)
			return true;
		p += l + (c ? 1 : 0);
	}
	return false;
}

int nofile_raise(struct rlimit *rl)
{
	if (getrlimit(RLIMIT_NOFILE, rl) < 0)
		return -errno;
	if (rl->rlim_cur < rl->rlim_max) {
		rl->rlim_cur = rl->rlim_max;
		if (setrlimit(RLIMIT_NOFILE, rl) < 0 && getrlimit(RLIMIT_NOFILE, rl) < 0)
			return -errno;
	}
	return 0;
}
