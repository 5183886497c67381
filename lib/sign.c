/* SPDX-License-Identifier: Apache-2.0 */
#include "lib/sign.h"
#include "lib/err.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct bk_signer {
	EVP_PKEY *key;
	char *pub_pem;
	char key_id[65];
};

static int key_id_of(EVP_PKEY *k, char *out)
{
	unsigned char *der = NULL;
	int n = i2d_PUBKEY(k, &der);
	if (n <= 0)
		return -EINVAL;
	unsigned char md[32];
	unsigned int ml = 0;
	int ok = EVP_Digest(der, (size_t)n, md, &ml, EVP_sha256(), NULL);
	OPENSSL_free(der);
	if (!ok || ml != 32)
		return -EINVAL;
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	return 0;
}

static char *pub_pem_of(EVP_PKEY *k)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *out = NULL;
	if (b && PEM_write_bio_PUBKEY(b, k)) {
		char *p;
		long n = BIO_get_mem_data(b, &p);
		if (n > 0 && (out = malloc((size_t)n + 1))) {
			memcpy(out, p, (size_t)n);
			out[n] = '\0';
		}
	}
	BIO_free(b);
	return out;
}

static int create_key(const char *path, EVP_PKEY **k, char *err, size_t errlen)
{
	*k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	if (!*k)
		return bk_fail_buf(err, errlen, -EIO, "cannot create an Ed25519 key (OpenSSL)");
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return bk_fail_buf(err, errlen, -errno, "cannot create the node key %s: %s", path, strerror(errno));
	FILE *f = fdopen(fd, "w");
	int ok = f && PEM_write_PrivateKey(f, *k, NULL, NULL, 0, NULL, NULL);
	if (f && fflush(f) != 0)
		ok = 0;
	if (f && fsync(fileno(f)) != 0)
		ok = 0;
	if (f)
		fclose(f);
	else
		close(fd);
	if (!ok) {
		unlink(path);
		return bk_fail_buf(err, errlen, -EIO, "cannot write the node key %s", path);
	}
	return 0;
}

static int load_key(const char *path, EVP_PKEY **k, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return bk_fail_buf(err, errlen, -errno, "cannot open the node key %s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0600) {
		close(fd);
		return bk_fail_buf(err, errlen, -EPERM,
				   "the node key %s must be a regular file of uid %u with mode 0600 (it may have "
				   "leaked: remove it to make a new one)",
				   path, (unsigned)geteuid());
	}
	FILE *f = fdopen(fd, "r");
	*k = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
	if (f)
		fclose(f);
	else
		close(fd);
	if (!*k || EVP_PKEY_get_id(*k) != EVP_PKEY_ED25519)
		return bk_fail_buf(err, errlen, -EINVAL, "the node key %s is not an Ed25519 private key", path);
	return 0;
}

int bk_signer_open(const char *path, struct bk_signer **out, bool *created, char *err, size_t errlen)
{
	*out = NULL;
	*created = false;
	EVP_PKEY *k = NULL;
	int r;
	if (access(path, F_OK) == 0 || errno != ENOENT) {
		r = load_key(path, &k, err, errlen);
	} else {
		r = create_key(path, &k, err, errlen);
		*created = r == 0;
	}
	if (r < 0) {
		EVP_PKEY_free(k);
		return r;
	}
	struct bk_signer *s = calloc(1, sizeof(*s));
	if (!s || !(s->pub_pem = pub_pem_of(k)) || key_id_of(k, s->key_id) < 0) {
		if (s)
			free(s->pub_pem);
		free(s);
		EVP_PKEY_free(k);
		return bk_fail_buf(err, errlen, -ENOMEM, "cannot prepare the node key %s", path);
	}
	s->key = k;
	*out = s;
	return 0;
}

void bk_signer_free(struct bk_signer *s)
{
	if (!s)
		return;
	EVP_PKEY_free(s->key);
	free(s->pub_pem);
	free(s);
}

const char *bk_signer_pubkey_pem(const struct bk_signer *s) { return s->pub_pem; }
const char *bk_signer_key_id(const struct bk_signer *s) { return s->key_id; }

int bk_signer_sign(const struct bk_signer *s, const void *msg, size_t len, char *b64, size_t b64len)
{
	unsigned char sig[64];
	size_t sl = sizeof(sig);
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	int ok = c && EVP_DigestSignInit(c, NULL, NULL, NULL, s->key) == 1 &&
		 EVP_DigestSign(c, sig, &sl, msg, len) == 1;
	EVP_MD_CTX_free(c);
	if (!ok || sl != 64 || b64len < 89)
		return -EIO;
	EVP_EncodeBlock((unsigned char *)b64, sig, 64);
	return 0;
}

static EVP_PKEY *read_pub(const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *k = b ? PEM_read_bio_PUBKEY(b, NULL, NULL, NULL) : NULL;
	BIO_free(b);
	if (k && EVP_PKEY_get_id(k) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(k);
		k = NULL;
	}
	return k;
}

int bk_pubkey_id(const char *pubkey_pem, char *out)
{
	EVP_PKEY *k = read_pub(pubkey_pem);
	int r = k ? key_id_of(k, out) : -EINVAL;
	EVP_PKEY_free(k);
	return r;
}

int bk_sig_verify(const char *pubkey_pem, const void *msg, size_t len, const char *sig_b64)
{
	size_t bl = strlen(sig_b64);
	unsigned char sig[96];
	if (bl != 88)
		return 0; /* a 64-byte signature is 88 base64 characters */
	int n = EVP_DecodeBlock(sig, (const unsigned char *)sig_b64, (int)bl);
	if (n != 66) /* 88 characters decode to 66 bytes, the last two padding */
		return 0;
	EVP_PKEY *k = read_pub(pubkey_pem);
	if (!k)
		return -EINVAL;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	int ok = c && EVP_DigestVerifyInit(c, NULL, NULL, NULL, k) == 1 &&
		 EVP_DigestVerify(c, sig, 64, msg, len) == 1;
	EVP_MD_CTX_free(c);
	EVP_PKEY_free(k);
	return ok ? 1 : 0;
}
