/* SPDX-License-Identifier: Apache-2.0 */
/* The interfaces of a network namespace from /proc/PID/net/dev
 * (agent/parse/netdev.c): this process's file, the file of a namespace
 * made here, crafted ones, and text that is not such a file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/parse/netdev.h"

#define HEAD                                                                                          \
	"Inter-|   Receive                                                |  Transmit\n"                  \
	" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop " \
	"fifo colls carrier compressed\n"
#define ZEROS "       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n"

static size_t read_all(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	size_t n = 0;
	ssize_t k;
	while (n < cap && (k = read(fd, buf + n, cap - n)) > 0)
		n += (size_t)k;
	close(fd);
	return n;
}

static void reads_a_sample(void **state)
{
	(void)state;
	const char t[] = HEAD "    lo:" ZEROS "  eth0:" ZEROS "a-very-long-n15:" ZEROS;
	char names[4][IFNAMSIZ];
	assert_int_equal(bk_netdev_parse(t, strlen(t), names, 4), 3);
	assert_string_equal(names[0], "lo");
	assert_string_equal(names[1], "eth0");
	assert_string_equal(names[2], "a-very-long-n15");
}

static void reads_this_process(void **state)
{
	(void)state;
	char buf[16384], names[8][IFNAMSIZ];
	size_t n = read_all("/proc/self/net/dev", buf, sizeof(buf));
	int c = bk_netdev_parse(buf, n, names, 8);
	assert_true(c >= 1);
	bool lo = false;
	for (int i = 0; i < c && i < 8; i++)
		lo |= strcmp(names[i], "lo") == 0;
	assert_true(lo);
}

/* A namespace made here (root: the unit lane runs as root) holds lo only:
 * what the exec child checks of a fresh one. */
static void reads_a_fresh_namespace(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char buf[16384], names[8][IFNAMSIZ];
		int c = -1;
		if (unshare(CLONE_NEWNET) == 0) {
			size_t n = read_all("/proc/thread-self/net/dev", buf, sizeof(buf));
			c = bk_netdev_parse(buf, n, names, 8);
			if (c == 1 && strcmp(names[0], "lo") != 0)
				c = -2;
		}
		(void)!write(p[1], &c, sizeof(c));
		_exit(0);
	}
	close(p[1]);
	int c = -3;
	assert_int_equal(read(p[0], &c, sizeof(c)), (ssize_t)sizeof(c));
	close(p[0]);
	waitpid(pid, NULL, 0);
	assert_int_equal(c, 1);
}

static void counts_interfaces_beyond_the_kept(void **state)
{
	(void)state;
	const char t[] = HEAD "    lo:" ZEROS "    a1:" ZEROS "    a2:" ZEROS "    a3:" ZEROS;
	char names[3][IFNAMSIZ];
	memset(names, 0x5a, sizeof(names));
	assert_int_equal(bk_netdev_parse(t, strlen(t), names, 2), 4);
	assert_string_equal(names[0], "lo");
	assert_string_equal(names[1], "a1");
	assert_int_equal((unsigned char)names[2][0], 0x5a); /* never written */
	/* headers alone: no interface */
	assert_int_equal(bk_netdev_parse(HEAD, strlen(HEAD), names, 2), 0);
}

static void refuses_what_is_not_net_dev(void **state)
{
	(void)state;
	const char *bad[] = {
		"",
		"    lo:" ZEROS,                                          /* no header */
		"Inter-|\n",                                              /* one header line */
		"Inter-|\n face x\n    lo:" ZEROS,                        /* second header wrong */
		HEAD "    lo:       0",                                   /* last line not ended */
		HEAD "    :" ZEROS,                                       /* empty name */
		HEAD "   l o:" ZEROS,                                     /* a blank in a name */
		HEAD "   a/b:" ZEROS,                                     /* a slash */
		HEAD "a-name-too-long16:" ZEROS,                          /* 17 bytes */
		HEAD "a-name-is-16byte:" ZEROS,                           /* 16 bytes: no room for the NUL */
		HEAD "    lo" ZEROS,                                      /* no ':' */
		HEAD "\n",                                                /* an empty line */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char names[2][IFNAMSIZ];
		if (bk_netdev_parse(bad[i], strlen(bad[i]), names, 2) != -EINVAL)
			fail_msg("accepted #%zu: %s", i, bad[i]);
	}
	/* a NUL inside a name */
	char t[512];
	int l = snprintf(t, sizeof(t), HEAD "    l0:" ZEROS);
	char names[2][IFNAMSIZ];
	t[strlen(HEAD) + 5] = '\0';
	assert_int_equal(bk_netdev_parse(t, (size_t)l, names, 2), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_a_sample),
		cmocka_unit_test(reads_this_process),
		cmocka_unit_test(reads_a_fresh_namespace),
		cmocka_unit_test(counts_interfaces_beyond_the_kept),
		cmocka_unit_test(refuses_what_is_not_net_dev),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
