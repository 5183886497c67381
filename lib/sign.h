/* SPDX-License-Identifier: Apache-2.0 */
/* Ed25519 signatures of exec receipts (OpenSSL): the agent's node key,
 * created on first start (PKCS#8 PEM, mode 0600, never leaves the agent),
 * and the check anyone can run with the public key alone. The key id is the
 * SHA-256 (hex) of the public key's DER SubjectPublicKeyInfo, i.e.
 * `openssl pkey -pubin -in pub.pem -outform DER | sha256sum`. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct bk_signer;

/* Load the key at path, or create it there (O_EXCL, 0600) when absent. A
 * key file that is not a regular file owned by us with mode 0600 is
 * refused (it may have leaked). 0 or -errno with a sentence in err. */
int bk_signer_open(const char *path, struct bk_signer **out, bool *created, char *err, size_t errlen);
void bk_signer_free(struct bk_signer *s);
const char *bk_signer_pubkey_pem(const struct bk_signer *s);
const char *bk_signer_key_id(const struct bk_signer *s); /* 64 hex digits */
/* The detached signature of msg, base64 (88 characters + NUL fit in 96). */
int bk_signer_sign(const struct bk_signer *s, const void *msg, size_t len, char *b64, size_t b64len);

/* 1: sig_b64 is a valid signature of msg by the key in pubkey_pem; 0: it is
 * not; -errno: the key or signature cannot be read. */
int bk_sig_verify(const char *pubkey_pem, const void *msg, size_t len, const char *sig_b64);
/* The key id of a PEM public key into out (65 bytes). 0 or -EINVAL. */
int bk_pubkey_id(const char *pubkey_pem, char *out);
