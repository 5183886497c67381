/* SPDX-License-Identifier: Apache-2.0 */
/* Who is on the other end of a unix connection (agent/caller/pod.c
 * bk_peer_pidfd), against the real kernel, on both paths: SO_PEERPIDFD
 * (6.5) and the fallback for older kernels — SO_PEERCRED + pidfd_open,
 * re-checked by who holds the peer socket (sock_diag). The fallback must
 * name the process that connected while it holds the connection, and
 * refuse when the pid SO_PEERCRED names no longer holds it (what a pid
 * reused by another process looks like) or is gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "agent/caller/pod.h"
#include "lib/util.h"

enum how { HOLD, DROP, EXIT };

struct peer {
	pid_t connector;  /* the process that called connect() */
	pid_t holder;     /* its child, which also holds the socket (DROP, EXIT) */
	int conn;         /* our accepted end */
};

static int listener(struct sockaddr_un *sa, socklen_t *sl)
{
	int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	static int seq;
	int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "bk-test-peer-%d-%d", (int)getpid(), seq++);
	*sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	assert_int_equal(bind(l, (struct sockaddr *)sa, *sl), 0);
	assert_int_equal(listen(l, 4), 0);
	return l;
}

/* A connector that connects, then (DROP) hands the socket to a child and
 * closes its own, staying alive, or (EXIT) hands it over and exits. */
static void make_peer(enum how how, struct peer *p)
{
	struct sockaddr_un sa;
	socklen_t sl;
	int l = listener(&sa, &sl);
	int ready[2];
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		/* a failed assertion leaves the test early: nothing outlives it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(l);
		int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&sa, sl) < 0)
			_exit(1);
		pid_t h = 0;
		if (how != HOLD) {
			h = fork();
			if (h == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				pause(); /* holds s until killed */
				_exit(0);
			}
			close(s);
		}
		if (write(ready[1], &h, sizeof(h)) != sizeof(h))
			_exit(1);
		if (how == EXIT)
			_exit(0);
		pause();
		_exit(0);
	}
	close(ready[1]);
	pid_t h = 0;
	assert_int_equal(read(ready[0], &h, sizeof(h)), sizeof(h));
	close(ready[0]);
	p->connector = c;
	p->holder = h;
	if (how == EXIT)
		assert_int_equal(waitpid(c, NULL, 0), c);
	p->conn = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(p->conn >= 0);
	close(l);
}

static void end_peer(enum how how, struct peer *p)
{
	close(p->conn);
	if (p->holder > 0) {
		kill(p->holder, SIGKILL);
		/* the holder is the connector's child: reaped by init once the
		 * connector is gone, else by the connector's exit below */
	}
	if (how != EXIT) {
		kill(p->connector, SIGKILL);
		waitpid(p->connector, NULL, 0);
	}
}

static bool have_peerpidfd(void)
{
	int sv[2], fd = -1;
	socklen_t l = sizeof(fd);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	bool ok = getsockopt(sv[0], SOL_SOCKET, 77 /* SO_PEERPIDFD */, &fd, &l) == 0 && fd >= 0;
	if (fd >= 0)
		close(fd);
	close(sv[0]);
	close(sv[1]);
	return ok;
}

static void test_fallback_names_the_connector(void **state)
{
	struct peer p;
	make_peer(HOLD, &p);
	pid_t pid = 0;
	int fd = -1;
	enum bk_peer_via via = BK_PEER_VIA_PIDFD;
	int r = bk_peer_pidfd(p.conn, false, &pid, &fd, &via);
	assert_int_equal(r, 0);
	assert_int_equal(pid, p.connector);
	assert_int_equal(via, BK_PEER_VIA_PEERCRED);
	assert_true(fd >= 0);
	close(fd);
	end_peer(HOLD, &p);
}

static void test_peerpidfd_names_the_connector(void **state)
{
	if (!have_peerpidfd())
		skip();
	struct peer p;
	make_peer(HOLD, &p);
	pid_t pid = 0;
	int fd = -1;
	enum bk_peer_via via = BK_PEER_VIA_PEERCRED;
	assert_int_equal(bk_peer_pidfd(p.conn, true, &pid, &fd, &via), 0);
	assert_int_equal(pid, p.connector);
	assert_int_equal(via, BK_PEER_VIA_PIDFD);
	close(fd);
	end_peer(HOLD, &p);
}

/* The pid SO_PEERCRED names is alive but no longer holds the connection:
 * what a pid reused by an unrelated process looks like to the agent. */
static void test_fallback_refuses_a_pid_without_the_socket(void **state)
{
	struct peer p;
	make_peer(DROP, &p);
	pid_t pid = 0;
	int fd = -1;
	enum bk_peer_via via;
	int r = bk_peer_pidfd(p.conn, false, &pid, &fd, &via);
	assert_int_equal(r, -ESRCH);
	assert_int_equal(fd, -1);
	end_peer(DROP, &p);
}

static void test_fallback_refuses_a_gone_connector(void **state)
{
	struct peer p;
	make_peer(EXIT, &p);
	pid_t pid = 0;
	int fd = -1;
	enum bk_peer_via via;
	int r = bk_peer_pidfd(p.conn, false, &pid, &fd, &via);
	assert_true(r < 0);
	assert_int_equal(fd, -1);
	end_peer(EXIT, &p);
}

static void test_unix_peer_ino(void **state)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	struct stat st;
	assert_int_equal(fstat(sv[1], &st), 0);
	uint64_t peer = 0;
	int r = bk_unix_peer_ino(sv[0], -1, &peer);
	if (r == -ENOENT || r == -EPROTONOSUPPORT)
		skip(); /* no CONFIG_UNIX_DIAG here */
	assert_int_equal(r, 0);
	assert_int_equal(peer, (uint64_t)st.st_ino);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unix_peer_ino),
		cmocka_unit_test(test_fallback_names_the_connector),
		cmocka_unit_test(test_peerpidfd_names_the_connector),
		cmocka_unit_test(test_fallback_refuses_a_pid_without_the_socket),
		cmocka_unit_test(test_fallback_refuses_a_gone_connector),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
