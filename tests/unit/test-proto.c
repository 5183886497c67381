/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/socket.h>
#include <sys/wait.h>

#include "lib/proto.h"
#include "lib/util.h"

static size_t mkrec(uint8_t *buf, uint16_t version, uint16_t flags, const char *payload, size_t n)
{
	struct bk_frame_hdr h = { .magic = BK_FRAME_MAGIC, .version = version, .flags = flags, .len = (uint32_t)n };
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), payload, n);
	return sizeof(h) + n;
}

static void frame_parse_errors(void **st)
{
	uint8_t buf[256];
	struct bk_frame_hdr h;
	const uint8_t *p;
	size_t n = mkrec(buf, 1, 0, "{}", 2);
	assert_int_equal(bk_frame_parse(buf, n, &h, &p), 0);
	assert_int_equal(h.len, 2);
	/* truncated header, truncated payload, trailing garbage */
	assert_int_equal(bk_frame_parse(buf, 3, &h, &p), -EPROTO);
	assert_int_equal(bk_frame_parse(buf, n - 1, &h, &p), -EPROTO);
	assert_int_equal(bk_frame_parse(buf, n + 1, &h, &p), -EPROTO);
	/* wrong version */
	n = mkrec(buf, 2, 0, "{}", 2);
	assert_int_equal(bk_frame_parse(buf, n, &h, &p), -EPROTONOSUPPORT);
	/* bad magic */
	n = mkrec(buf, 1, 0, "{}", 2);
	buf[0] ^= 0xff;
	assert_int_equal(bk_frame_parse(buf, n, &h, &p), -EPROTO);
	/* unknown flags */
	n = mkrec(buf, 1, 0x80, "{}", 2);
	assert_int_equal(bk_frame_parse(buf, n, &h, &p), -EPROTO);
}

static void reasm(void **st)
{
	uint8_t buf[256];
	struct bk_reasm r;
	bk_reasm_init(&r, 10);
	assert_int_equal(bk_reasm_feed(&r, buf, mkrec(buf, 1, BK_FRAME_MORE, "{\"a\":", 5)), 0);
	assert_int_equal(bk_reasm_feed(&r, buf, mkrec(buf, 1, 0, "1}", 2)), 1);
	assert_string_equal(r.buf, "{\"a\":1}");
	assert_int_equal(r.len, 7);
	/* nothing may follow a complete message */
	assert_int_equal(bk_reasm_feed(&r, buf, mkrec(buf, 1, 0, "{}", 2)), -EPROTO);
	bk_reasm_free(&r);

	/* oversized across chunks */
	bk_reasm_init(&r, 10);
	assert_int_equal(bk_reasm_feed(&r, buf, mkrec(buf, 1, BK_FRAME_MORE, "123456", 6)), 0);
	assert_int_equal(bk_reasm_feed(&r, buf, mkrec(buf, 1, 0, "123456", 6)), -EMSGSIZE);
	bk_reasm_free(&r);

	/* NUL bytes */
	bk_reasm_init(&r, 10);
	assert_int_equal(bk_reasm_feed(&r, buf, mkrec(buf, 1, 0, "{\0}", 3)), -EILSEQ);
	bk_reasm_free(&r);

	/* empty message */
	bk_reasm_init(&r, 10);
	assert_int_equal(bk_reasm_feed(&r, buf, mkrec(buf, 1, 0, "", 0)), -EPROTO);
	bk_reasm_free(&r);
}

static void socket_roundtrip(void **st)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	/* a message spanning several chunks arrives whole */
	size_t n = BK_CHUNK_MAX * 3 + 17;
	char *big = malloc(n + 1);
	memset(big, 'x', n);
	big[0] = '"';
	big[n - 1] = '"';
	big[n] = '\0';
	/* the socket buffer may not hold it all: send from a child */
	pid_t pid = fork();
	if (pid == 0) {
		_exit(bk_send_msg(sv[0], big, n) == 0 ? 0 : 1);
	}
	char *out = NULL;
	size_t outlen = 0;
	assert_int_equal(bk_recv_msg(sv[1], BK_REQ_MAX, &out, &outlen), 0);
	assert_int_equal(outlen, n);
	assert_memory_equal(out, big, n);
	free(out);
	int status;
	waitpid(pid, &status, 0);
	assert_int_equal(status, 0);

	/* over the receiver's limit */
	pid = fork();
	if (pid == 0)
		_exit(bk_send_msg(sv[0], big, n) == 0 ? 0 : 1);
	assert_int_equal(bk_recv_msg(sv[1], BK_CHUNK_MAX, &out, &outlen), -EMSGSIZE);
	waitpid(pid, &status, 0);
	free(big);

	/* a truncated header record */
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(send(sv[0], "abc", 3, 0), 3);
	assert_int_equal(bk_recv_msg(sv[1], BK_REQ_MAX, &out, &outlen), -EPROTO);
	/* orderly EOF */
	close(sv[0]);
	assert_int_equal(bk_recv_msg(sv[1], BK_REQ_MAX, &out, &outlen), 1);
	close(sv[1]);
}

/* A message of several chunks, to a reader that takes one chunk every
 * 200 ms: bk_send_msg_until's deadline (500 ms) bounds the whole message,
 * not each chunk (each of which gets through within 200 ms) */
static void send_deadline_whole_message(void **st)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	int small = BK_CHUNK_MAX; /* (doubled by the kernel) a chunk or two in flight at a time */
	assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	size_t n = BK_CHUNK_MAX * 6;
	char *big = malloc(n);
	memset(big, 'x', n);
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		char *rec = malloc(BK_CHUNK_MAX + 64);
		for (;;) {
			usleep(200000);
			if (recv(sv[1], rec, BK_CHUNK_MAX + 64, 0) <= 0)
				_exit(0);
		}
	}
	close(sv[1]);
	uint64_t t0 = now_ns();
	int r = bk_send_msg_until(sv[0], big, n, t0 + 500000000ull);
	uint64_t ms = (now_ns() - t0) / 1000000;
	close(sv[0]);
	int status;
	waitpid(pid, &status, 0);
	free(big);
	print_message("# bk_send_msg_until: %d after %llu ms\n", r, (unsigned long long)ms);
	assert_true(r == -EAGAIN || r == -ETIMEDOUT);
	assert_true(ms >= 450 && ms < 700);
	/* a deadline already passed: nothing is sent */
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(bk_send_msg_until(sv[0], "{}", 2, now_ns() - 1), -ETIMEDOUT);
	char b[64];
	assert_int_equal(recv(sv[1], b, sizeof(b), MSG_DONTWAIT), -1);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(frame_parse_errors),
		cmocka_unit_test(reasm),
		cmocka_unit_test(socket_roundtrip),
		cmocka_unit_test(send_deadline_whole_message),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
