/* SPDX-License-Identifier: Apache-2.0 */
/* libmicrohttpd without its TLS backend.
 *
 * Debian's libmicrohttpd is built with HTTPS support on GnuTLS, so the
 * shared library drags GnuTLS and its eight dependencies (p11-kit, which
 * reads /etc/pkcs11 and may load the modules named there, nettle, hogweed,
 * gmp, tasn1, idn2, unistring, ffi) into every process that links it, and
 * its constructor initialises GnuTLS. boxkite never asks MHD for TLS: the
 * shim terminates TLS with OpenSSL itself (sidecar-shim/tls.c) and the
 * agent's metrics endpoint is plain HTTP on the node. So the shim and the
 * agent link Debian's libmicrohttpd.a, and the GnuTLS symbols it refers to
 * resolve here instead:
 *   - gnutls_global_init / gnutls_global_deinit, which MHD's constructor
 *     and destructor call, do nothing;
 *   - every other one is reached only by a daemon started with
 *     MHD_USE_TLS (or a connection of such a daemon): it names itself on
 *     stderr and aborts the process, so TLS asked of MHD by mistake can
 *     never run without encryption.
 * A libmicrohttpd that refers to a GnuTLS symbol not listed here fails the
 * link, by name. tests/shim/run.sh (the shim) and tests/e2e/test-observe.sh
 * (the agent) check that the running process maps none of those libraries. */
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

int gnutls_global_init(void);
void gnutls_global_deinit(void);

int gnutls_global_init(void) { return 0; }
void gnutls_global_deinit(void) {}

static __attribute__((noreturn)) void no_tls(const char *fn)
{
	static const char pre[] = "boxkite: libmicrohttpd called ";
	static const char post[] = ": this build has no TLS in libmicrohttpd (lib/mhd/notls.c)\n";
	/* async-signal-safe, allocation-free: this may run anywhere in MHD */
	(void)!write(2, pre, sizeof(pre) - 1);
	(void)!write(2, fn, __builtin_strlen(fn));
	(void)!write(2, post, sizeof(post) - 1);
	abort();
}

#define NO_TLS(fn)                                                                                        \
	void fn(void);                                                                                    \
	void fn(void) { no_tls(#fn); }

NO_TLS(gnutls_alpn_set_protocols)
NO_TLS(gnutls_bye)
NO_TLS(gnutls_certificate_allocate_credentials)
NO_TLS(gnutls_certificate_free_credentials)
NO_TLS(gnutls_certificate_server_set_request)
NO_TLS(gnutls_certificate_set_dh_params)
NO_TLS(gnutls_certificate_set_retrieve_function2)
NO_TLS(gnutls_certificate_set_retrieve_function3)
NO_TLS(gnutls_certificate_set_x509_key_mem)
NO_TLS(gnutls_certificate_set_x509_key_mem2)
NO_TLS(gnutls_certificate_set_x509_trust_mem)
NO_TLS(gnutls_cipher_get)
NO_TLS(gnutls_credentials_set)
NO_TLS(gnutls_deinit)
NO_TLS(gnutls_dh_params_deinit)
NO_TLS(gnutls_dh_params_import_pkcs3)
NO_TLS(gnutls_dh_params_init)
NO_TLS(gnutls_handshake)
NO_TLS(gnutls_init)
NO_TLS(gnutls_priority_deinit)
NO_TLS(gnutls_priority_init)
NO_TLS(gnutls_priority_set)
NO_TLS(gnutls_protocol_get_version)
NO_TLS(gnutls_psk_allocate_server_credentials)
NO_TLS(gnutls_psk_free_server_credentials)
NO_TLS(gnutls_psk_set_server_credentials_function)
NO_TLS(gnutls_record_check_pending)
NO_TLS(gnutls_record_get_direction)
NO_TLS(gnutls_record_recv)
NO_TLS(gnutls_record_send)
NO_TLS(gnutls_session_get_ptr)
NO_TLS(gnutls_session_set_ptr)
NO_TLS(gnutls_strerror)
NO_TLS(gnutls_transport_set_int2)

/* gnutls_malloc is GnuTLS's allocator, a variable (a function pointer) */
static void *notls_malloc(size_t n)
{
	(void)n;
	no_tls("gnutls_malloc");
}
void *(*gnutls_malloc)(size_t) = notls_malloc;
