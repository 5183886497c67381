/* SPDX-License-Identifier: Apache-2.0 */
#include "lib/proto.h"
#include "lib/util.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

int bk_frame_parse(const void *buf, size_t n, struct bk_frame_hdr *hdr, const uint8_t **payload)
{
	struct bk_frame_hdr h;
	if (n < sizeof(h))
		return -EPROTO;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != BK_FRAME_MAGIC)
		return -EPROTO;
	if (h.version != BK_PROTO_VERSION)
		return -EPROTONOSUPPORT;
	if ((h.flags & ~BK_FRAME_FLAGS_KNOWN) || h.reserved != 0)
		return -EPROTO;
	if (h.len > BK_CHUNK_MAX || (size_t)h.len != n - sizeof(h))
		return -EPROTO;
	*hdr = h;
	*payload = (const uint8_t *)buf + sizeof(h);
	return 0;
}

void bk_reasm_init(struct bk_reasm *r, size_t max)
{
	memset(r, 0, sizeof(*r));
	r->max = max;
}

void bk_reasm_free(struct bk_reasm *r)
{
	free(r->buf);
	r->buf = NULL;
	r->len = 0;
	r->done = 0;
}

int bk_reasm_feed(struct bk_reasm *r, const void *rec, size_t n)
{
	struct bk_frame_hdr h;
	const uint8_t *p;
	if (r->done)
		return -EPROTO;
	int e = bk_frame_parse(rec, n, &h, &p);
	if (e < 0)
		return e;
	if (memchr(p, '\0', h.len))
		return -EILSEQ;
	if (h.len > r->max || r->len > r->max - h.len)
		return -EMSGSIZE;
	char *nb = realloc(r->buf, r->len + h.len + 1);
	if (!nb)
		return -ENOMEM;
	r->buf = nb;
	memcpy(r->buf + r->len, p, h.len);
	r->len += h.len;
	r->buf[r->len] = '\0';
	if (h.flags & BK_FRAME_MORE)
		return 0;
	if (r->len == 0)
		return -EPROTO; /* an empty message is not JSON */
	r->done = 1;
	return 1;
}

int bk_send_msg(int fd, const char *msg, size_t len)
{
	return bk_send_msg_until(fd, msg, len, 0);
}

int bk_send_msg_until(int fd, const char *msg, size_t len, uint64_t deadline_ns)
{
	size_t off = 0;
	do {
		if (deadline_ns) {
			/* what is left of the deadline, for this chunk (a message
			 * of several chunks must not get the whole wait per chunk) */
			uint64_t now = now_ns();
			if (now >= deadline_ns)
				return -ETIMEDOUT;
			uint64_t left = deadline_ns - now;
			struct timeval tv = { .tv_sec = (time_t)(left / 1000000000ull),
					      .tv_usec = (suseconds_t)(left % 1000000000ull / 1000) };
			if (!tv.tv_sec && !tv.tv_usec)
				tv.tv_usec = 1; /* (zero would be no limit) */
			if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
				return -errno;
		}
		size_t chunk = len - off > BK_CHUNK_MAX ? BK_CHUNK_MAX : len - off;
		struct bk_frame_hdr h = {
			.magic = BK_FRAME_MAGIC,
			.version = BK_PROTO_VERSION,
			.flags = off + chunk < len ? BK_FRAME_MORE : 0,
			.len = (uint32_t)chunk,
		};
		struct iovec iov[2] = {
			{ .iov_base = &h, .iov_len = sizeof(h) },
			{ .iov_base = (void *)(msg + off), .iov_len = chunk },
		};
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
		ssize_t r;
		do
			r = sendmsg(fd, &mh, MSG_NOSIGNAL);
		while (r < 0 && errno == EINTR);
		if (r < 0)
			return -errno;
		if ((size_t)r != sizeof(h) + chunk)
			return -EIO;
		off += chunk;
	} while (off < len);
	return 0;
}

#define REC_SIZE (sizeof(struct bk_frame_hdr) + BK_CHUNK_MAX + 1)

static int recv_msg_into(int fd, uint8_t *rec, size_t max, char **out, size_t *outlen)
{
	struct bk_reasm r;
	bk_reasm_init(&r, max);
	bool first = true;
	for (;;) {
		struct iovec iov = { .iov_base = rec, .iov_len = REC_SIZE };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n;
		do
			n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
		while (n < 0 && errno == EINTR);
		if (n < 0) {
			int e = -errno;
			bk_reasm_free(&r);
			return e;
		}
		if (n == 0) {
			bk_reasm_free(&r);
			return first ? 1 : -EPROTO;
		}
		first = false;
		if (mh.msg_flags & MSG_TRUNC) {
			bk_reasm_free(&r);
			return -EPROTO;
		}
		int e = bk_reasm_feed(&r, rec, (size_t)n);
		if (e < 0) {
			bk_reasm_free(&r);
			return e;
		}
		if (e == 1)
			break;
	}
	*out = r.buf;
	if (outlen)
		*outlen = r.len;
	return 0;
}

/* The record buffer: one per thread, kept until the thread ends. Taken
 * from malloc per message, 64 KB made glibc consolidate its small free
 * chunks every time (about 3% of the shim's CPU at 1 client); kept in a
 * malloc arena, it would pin the arena's later chunks (no trim below it).
 * Mapped apart instead: only the pages a message reaches are ever
 * resident. */
static pthread_key_t rec_key;
static bool rec_key_ok;
static pthread_once_t rec_once = PTHREAD_ONCE_INIT;

static void rec_unmap(void *b)
{
	munmap(b, REC_SIZE);
}

static void rec_key_make(void)
{
	rec_key_ok = pthread_key_create(&rec_key, rec_unmap) == 0;
}

/* The thread's buffer (NULL: no memory); *own: a buffer of this call's,
 * to unmap (no key) */
static uint8_t *rec_get(bool *own)
{
	pthread_once(&rec_once, rec_key_make);
	uint8_t *b = rec_key_ok ? pthread_getspecific(rec_key) : NULL;
	*own = false;
	if (b)
		return b;
	b = mmap(NULL, REC_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED)
		return NULL;
	if (!(rec_key_ok && pthread_setspecific(rec_key, b) == 0))
		*own = true;
	return b;
}

int bk_recv_msg(int fd, size_t max, char **out, size_t *outlen)
{
	bool own;
	uint8_t *rec = rec_get(&own);
	if (!rec)
		return -ENOMEM;
	int e = recv_msg_into(fd, rec, max, out, outlen);
	if (own)
		rec_unmap(rec);
	return e;
}

const char *bk_proto_strerror(int err)
{
	switch (err) {
	case -EPROTO:
		return "malformed frame (truncated, bad magic or length)";
	case -EPROTONOSUPPORT:
		return "unsupported protocol version";
	case -EMSGSIZE:
		return "message too large";
	case -EILSEQ:
		return "NUL byte in message";
	case -ENOMEM:
		return "out of memory";
	default:
		return "transport error";
	}
}

int bk_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

int bk_call(int fd, const char *req, size_t reqlen, char **resp, size_t *resplen)
{
	int e = bk_send_msg(fd, req, reqlen);
	if (e < 0)
		return e;
	e = bk_recv_msg(fd, BK_RESP_MAX, resp, resplen);
	if (e == 1)
		return -ECONNRESET;
	return e;
}
