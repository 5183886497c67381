/* SPDX-License-Identifier: Apache-2.0 */
/* OpenSSL for boxkitectl, loaded when first used.
 *
 * Most of what scripts run (`boxkitectl exec`, `status`, `events`) needs
 * no cryptography, yet loading and relocating libcrypto and libssl at every
 * start cost boxkitectl about 150 page faults and several milliseconds of
 * its whole run (make bench: "boxkitectl exec ... whole process"). So
 * boxkitectl is not linked against them: it defines the OpenSSL functions
 * its code (and lib/) calls, each of which loads Debian's libssl.so.3 /
 * libcrypto.so.3 the first time one is called (`sandbox create`'s key and
 * certificate, the shim's health check, signatures, base64) and calls the
 * library's own. The prototypes are OpenSSL's headers': a signature that
 * differs does not compile. The libraries stay the system's, updated with
 * it (not a static copy). */
#include <dlfcn.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *lib_ssl, *lib_crypto;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
	/* libssl first: it brings its libcrypto */
	lib_ssl = dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL);
	lib_crypto = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
}

static void *sym(const char *name)
{
	pthread_once(&once, load);
	void *p = NULL;
	if (lib_ssl)
		p = dlsym(lib_ssl, name);
	if (!p && lib_crypto)
		p = dlsym(lib_crypto, name);
	if (!p) {
		const char *e = dlerror();
		fprintf(stderr, "boxkitectl: cannot load OpenSSL's %s (libssl.so.3, libcrypto.so.3): %s\n", name,
			e ? e : "not found");
		exit(125);
	}
	return p;
}

/* name's pointer, of the header's type, found once */
#define REAL(name)                                                                                         \
	static __typeof__(&name) real_##name;                                                              \
	if (!real_##name)                                                                                  \
		real_##name = (__typeof__(&name))sym(#name)

#define FWD(ret, name, params, args)                                                                       \
	ret name params                                                                                    \
	{                                                                                                  \
		REAL(name);                                                                                \
		return real_##name args;                                                                   \
	}
#define FWDV(name, params, args)                                                                           \
	void name params                                                                                   \
	{                                                                                                  \
		REAL(name);                                                                                \
		real_##name args;                                                                          \
	}

FWD(long, BIO_ctrl, (BIO *bp, int cmd, long larg, void *parg), (bp, cmd, larg, parg))
FWD(int, BIO_free, (BIO *a), (a))
FWD(BIO *, BIO_new, (const BIO_METHOD *type), (type))
FWD(BIO *, BIO_new_mem_buf, (const void *buf, int len), (buf, len))
FWD(const BIO_METHOD *, BIO_s_mem, (void), ())
FWD(BIGNUM *, BN_bin2bn, (const unsigned char *s, int len, BIGNUM *ret), (s, len, ret))
FWDV(BN_free, (BIGNUM *a), (a))
FWD(ASN1_INTEGER *, BN_to_ASN1_INTEGER, (const BIGNUM *bn, ASN1_INTEGER *ai), (bn, ai))
FWDV(CRYPTO_free, (void *ptr, const char *file, int line), (ptr, file, line))
FWD(int, EVP_DecodeBlock, (unsigned char *t, const unsigned char *f, int n), (t, f, n))
FWD(int, EVP_EncodeBlock, (unsigned char *t, const unsigned char *f, int n), (t, f, n))
FWD(int, EVP_Digest,
    (const void *data, size_t count, unsigned char *md, unsigned int *size, const EVP_MD *type, ENGINE *impl),
    (data, count, md, size, type, impl))
FWD(int, EVP_DigestSign, (EVP_MD_CTX *ctx, unsigned char *sigret, size_t *siglen, const unsigned char *tbs,
			  size_t tbslen),
    (ctx, sigret, siglen, tbs, tbslen))
FWD(int, EVP_DigestSignInit, (EVP_MD_CTX *ctx, EVP_PKEY_CTX **pctx, const EVP_MD *type, ENGINE *e, EVP_PKEY *pkey),
    (ctx, pctx, type, e, pkey))
FWD(int, EVP_DigestVerify, (EVP_MD_CTX *ctx, const unsigned char *sigret, size_t siglen, const unsigned char *tbs,
			    size_t tbslen),
    (ctx, sigret, siglen, tbs, tbslen))
FWD(int, EVP_DigestVerifyInit,
    (EVP_MD_CTX *ctx, EVP_PKEY_CTX **pctx, const EVP_MD *type, ENGINE *e, EVP_PKEY *pkey),
    (ctx, pctx, type, e, pkey))
FWDV(EVP_MD_CTX_free, (EVP_MD_CTX *ctx), (ctx))
FWD(EVP_MD_CTX *, EVP_MD_CTX_new, (void), ())
FWDV(EVP_PKEY_free, (EVP_PKEY *pkey), (pkey))
FWD(int, EVP_PKEY_get_id, (const EVP_PKEY *pkey), (pkey))
FWD(const EVP_MD *, EVP_sha256, (void), ())
FWD(EVP_PKEY *, PEM_read_PrivateKey, (FILE *out, EVP_PKEY **x, pem_password_cb *cb, void *u), (out, x, cb, u))
FWD(EVP_PKEY *, PEM_read_bio_PUBKEY, (BIO *out, EVP_PKEY **x, pem_password_cb *cb, void *u), (out, x, cb, u))
FWD(int, PEM_write_PrivateKey, (FILE *out, const EVP_PKEY *x, const EVP_CIPHER *enc, const unsigned char *kstr,
				int klen, pem_password_cb *cb, void *u),
    (out, x, enc, kstr, klen, cb, u))
FWD(int, PEM_write_X509, (FILE *out, const X509 *x), (out, x))
FWD(int, PEM_write_bio_PUBKEY, (BIO *out, const EVP_PKEY *x), (out, x))
FWD(int, i2d_PUBKEY, (const EVP_PKEY *a, unsigned char **pp), (a, pp))
FWD(SSL_CTX *, SSL_CTX_new, (const SSL_METHOD *meth), (meth))
FWDV(SSL_CTX_set_verify, (SSL_CTX *ctx, int mode, SSL_verify_cb callback), (ctx, mode, callback))
FWD(int, SSL_connect, (SSL *ssl), (ssl))
FWDV(SSL_free, (SSL *ssl), (ssl))
FWD(X509 *, SSL_get0_peer_certificate, (const SSL *s), (s))
FWD(SSL *, SSL_new, (SSL_CTX *ctx), (ctx))
FWD(int, SSL_read, (SSL *ssl, void *buf, int num), (ssl, buf, num))
FWD(int, SSL_set_fd, (SSL *s, int fd), (s, fd))
FWD(int, SSL_write, (SSL *ssl, const void *buf, int num), (ssl, buf, num))
FWD(const SSL_METHOD *, TLS_client_method, (void), ())
FWD(int, X509_NAME_add_entry_by_txt, (X509_NAME *name, const char *field, int type, const unsigned char *bytes,
				      int len, int loc, int set),
    (name, field, type, bytes, len, loc, set))
FWDV(X509_free, (X509 *a), (a))
FWD(EVP_PKEY *, X509_get0_pubkey, (const X509 *x), (x))
FWD(ASN1_INTEGER *, X509_get_serialNumber, (X509 *x), (x))
FWD(X509_NAME *, X509_get_subject_name, (const X509 *a), (a))
FWD(ASN1_TIME *, X509_getm_notAfter, (const X509 *x), (x))
FWD(ASN1_TIME *, X509_getm_notBefore, (const X509 *x), (x))
FWD(ASN1_TIME *, X509_gmtime_adj, (ASN1_TIME *s, long adj), (s, adj))
FWD(X509 *, X509_new, (void), ())
FWD(int, X509_set_issuer_name, (X509 *x, const X509_NAME *name), (x, name))
FWD(int, X509_set_pubkey, (X509 *x, EVP_PKEY *pkey), (x, pkey))
FWD(int, X509_set_version, (X509 *x, long version), (x, version))
FWD(int, X509_sign, (X509 *x, EVP_PKEY *pkey, const EVP_MD *md), (x, pkey, md))

/* Variadic in OpenSSL: the key type's parameter, if it takes one (EC: the
 * curve's name; RSA: the bits, a size_t), as OpenSSL's own
 * EVP_EC_gen/EVP_RSA_gen pass it. */
EVP_PKEY *EVP_PKEY_Q_keygen(OSSL_LIB_CTX *libctx, const char *propq, const char *type, ...)
{
	REAL(EVP_PKEY_Q_keygen);
	va_list ap;
	va_start(ap, type);
	EVP_PKEY *k;
	if (strcmp(type, "EC") == 0 || strcmp(type, "SM2") == 0)
		k = real_EVP_PKEY_Q_keygen(libctx, propq, type, va_arg(ap, char *));
	else if (strcmp(type, "RSA") == 0)
		k = real_EVP_PKEY_Q_keygen(libctx, propq, type, va_arg(ap, size_t));
	else
		k = real_EVP_PKEY_Q_keygen(libctx, propq, type);
	va_end(ap);
	return k;
}
