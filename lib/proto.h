/* SPDX-License-Identifier: Apache-2.0 */
/* Wire protocol between boxkite-shim / boxkitectl and boxkite-agent.
 *
 * Transport: AF_UNIX SOCK_SEQPACKET. One logical message (a JSON object) is
 * sent as one or more seqpacket records, each
 *
 *     struct bk_frame_hdr (16 bytes, host byte order) + payload chunk
 *
 * `flags & BK_FRAME_MORE` says another chunk of the same message follows.
 * Chunks are at most BK_CHUNK_MAX bytes (unix datagram size is bounded by the
 * sender's socket buffer, and the shim is unprivileged). The receiver bounds
 * the reassembled size (BK_REQ_MAX for requests, BK_RESP_MAX for responses)
 * and refuses a wrong magic, an unknown version, a truncated header, a length
 * that disagrees with the record, and NUL bytes in the JSON.
 *
 * Request:  {"op": "<op>", "args": {...}}
 * Response: {"status": <http-like code>, "body": {...}}
 *           Errors carry body {"detail": "<sentence>", "code": "<stable>"}
 *           exactly as API.md, so the shim relays status and body verbatim.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define BK_FRAME_MAGIC 0x314b5442u /* "BTK1" little-endian */
#define BK_PROTO_VERSION 1
#define BK_FRAME_MORE 0x1u
#define BK_FRAME_FLAGS_KNOWN BK_FRAME_MORE
#define BK_CHUNK_MAX (64u * 1024u)
#define BK_REQ_MAX (33u * 1024u * 1024u) /* a 32 MiB shim body (10 MiB file content, escaped), plus resolved secrets */
#define BK_RESP_MAX (32u * 1024u * 1024u)

struct bk_frame_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t flags;
	uint32_t len; /* payload bytes in this record */
	uint32_t reserved; /* must be 0 */
};

/* Validate one received record (n bytes at buf). On success sets *hdr and
 * *payload and returns 0. Errors: -EPROTO (truncated header, bad magic,
 * length mismatch, reserved bits), -EPROTONOSUPPORT (version). */
int bk_frame_parse(const void *buf, size_t n, struct bk_frame_hdr *hdr, const uint8_t **payload);

/* Reassembly of a chunked message, independent of the socket (fuzzable). */
struct bk_reasm {
	char *buf;
	size_t len;
	size_t max;
	int done;
};
void bk_reasm_init(struct bk_reasm *r, size_t max);
void bk_reasm_free(struct bk_reasm *r);
/* Feed one record. Returns 1 when the message is complete (r->buf is a
 * NUL-terminated JSON text of r->len bytes), 0 when more records are needed,
 * or -errno: -EMSGSIZE over max, -EPROTO/-EPROTONOSUPPORT as
 * bk_frame_parse, -EILSEQ for a NUL byte in the payload. */
int bk_reasm_feed(struct bk_reasm *r, const void *rec, size_t n);

/* Send msg (len bytes) as framed records. Returns 0 or -errno. */
int bk_send_msg(int fd, const char *msg, size_t len);
/* The same, all chunks sent by deadline_ns (now_ns(); 0: no limit): each
 * chunk's send waits (SO_SNDTIMEO, left set) only for what is left of it;
 * -ETIMEDOUT or -EAGAIN when it passed. */
int bk_send_msg_until(int fd, const char *msg, size_t len, uint64_t deadline_ns);
/* Receive one whole message. Returns 0 and *out (caller frees, NUL
 * terminated), 1 on orderly EOF before any record, or -errno. */
int bk_recv_msg(int fd, size_t max, char **out, size_t *outlen);

/* Human sentence for a protocol error code returned above. */
const char *bk_proto_strerror(int err);

/* Connect to an agent socket path (SOCK_SEQPACKET|SOCK_CLOEXEC). -errno. */
int bk_connect(const char *path);
/* One round trip: send request, receive response. -errno on transport
 * failure. */
int bk_call(int fd, const char *req, size_t reqlen, char **resp, size_t *resplen);
