/*
 * tls_io.c - a socket or an OpenSSL session over it, without blocking (see tls_io.h).
 *
 * OpenSSL's non-blocking calls say what they wait for (SSL_ERROR_WANT_READ or _WRITE); that
 * becomes io->want for the poll loop. ALPN picks "http/1.1" whenever the client offers it and
 * "h2" when it offers HTTP/2 alone (tls_io_alpn); a client that offers neither gets no ALPN
 * answer and is served HTTP/1.1.
 */
#include "rpc/tls_io.h"

#include <errno.h>
#include <openssl/err.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static ssize_t tls_io_ssl_result(tls_io *io, int rc)
{
    switch (SSL_get_error(io->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        io->want = POLLIN;
        return 0;
    case SSL_ERROR_WANT_WRITE:
        io->want = POLLOUT;
        return 0;
    default:
        ERR_clear_error();
        return -1;
    }
}

ssize_t tls_io_read(tls_io *io, void *buf, size_t n)
{
    io->want = 0;
    if (io->ssl != NULL) {
        int rc = SSL_read(io->ssl, buf, n > 0x7fffffff ? 0x7fffffff : (int)n);
        return rc > 0 ? rc : tls_io_ssl_result(io, rc);
    }
    ssize_t r = recv(io->fd, buf, n, 0);
    if (r > 0) {
        return r;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        io->want = POLLIN;
        return 0;
    }
    return -1;
}

ssize_t tls_io_write(tls_io *io, const void *buf, size_t n)
{
    io->want = 0;
    if (n == 0) {
        return 0;
    }
    if (io->ssl != NULL) {
        int rc = SSL_write(io->ssl, buf, n > 0x7fffffff ? 0x7fffffff : (int)n);
        return rc > 0 ? rc : tls_io_ssl_result(io, rc);
    }
    ssize_t w = send(io->fd, buf, n, MSG_NOSIGNAL);
    if (w >= 0) {
        return w;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        io->want = POLLOUT;
        return 0;
    }
    return -1;
}

int tls_io_handshake(tls_io *io)
{
    io->want = 0;
    int rc = SSL_accept(io->ssl);
    if (rc == 1) {
        return 1;
    }
    return tls_io_ssl_result(io, rc) == 0 ? 0 : -1;
}

int tls_io_is_h2(const tls_io *io)
{
    if (io->ssl == NULL) {
        return 0;
    }
    const unsigned char *p = NULL;
    unsigned int n = 0;
    SSL_get0_alpn_selected(io->ssl, &p, &n);
    return n == 2 && memcmp(p, "h2", 2) == 0;
}

void tls_io_close(tls_io *io)
{
    if (io->ssl != NULL) {
        (void)SSL_shutdown(io->ssl);
        SSL_free(io->ssl);
        ERR_clear_error();
        io->ssl = NULL;
    }
    if (io->fd >= 0) {
        close(io->fd);
        io->fd = -1;
    }
}

/* ALPN: HTTP/1.1 whenever the client offers it, HTTP/2 only when it offers HTTP/2 alone. A
 * browser or curl offers both and must get HTTP/1.1, the protocol of the console, Connect and
 * the probes; a gRPC client offers "h2" alone (grpc-core adds "grpc-exp"). */
static int tls_io_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    static const unsigned char http1[] = "\x08http/1.1", h2[] = "\x02h2";
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, http1, sizeof http1 - 1, in, inlen) ==
            OPENSSL_NPN_NEGOTIATED ||
        SSL_select_next_proto(&sel, outlen, h2, sizeof h2 - 1, in, inlen) ==
            OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

/* One line for err: what failed, OpenSSL's reason when it has one, and how to fix it. */
static void tls_io_fail(const char *what, const char *path, const char *fix, char *err,
                        size_t errlen)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    snprintf(err, errlen, "%s %s%s%s (%s)", what, path, reason != NULL ? ": " : "",
             reason != NULL ? reason : "", fix);
}

/* Whether path can be opened for reading; err says why not. */
static int tls_io_readable(const char *option, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s %s: %s (give a PEM file charterd can read)", option, path,
                 strerror(errno));
        return -1;
    }
    fclose(f);
    return 0;
}

SSL_CTX *tls_io_context(const char *cert_file, const char *key_file, char *err, size_t errlen)
{
    if (tls_io_readable("--http-cert", cert_file, err, errlen) != 0 ||
        tls_io_readable("--http-key", key_file, err, errlen) != 0) {
        return NULL;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
        tls_io_fail("cannot create a TLS context for", cert_file, "check OpenSSL", err, errlen);
    } else if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
        tls_io_fail("--http-cert: cannot use", cert_file,
                    "give the server's certificate, then its chain, in PEM", err, errlen);
    } else if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
        tls_io_fail("--http-key: cannot use", key_file,
                    "give the unencrypted PEM key the certificate of --http-cert was made for", err,
                    errlen);
    } else if (SSL_CTX_check_private_key(ctx) != 1) {
        tls_io_fail("--http-key: cannot use", key_file,
                    "give the unencrypted PEM key the certificate of --http-cert was made for", err,
                    errlen);
    } else {
        /* HTTP/2 forbids renegotiation and compression (RFC 9113, 9.2). */
        SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        SSL_CTX_set_alpn_select_cb(ctx, tls_io_alpn, NULL);
        return ctx;
    }
    SSL_CTX_free(ctx);
    return NULL;
}

int tls_io_accept(SSL_CTX *ctx, int fd, tls_io *io)
{
    io->fd = fd;
    io->want = 0;
    io->ssl = SSL_new(ctx);
    if (io->ssl == NULL || SSL_set_fd(io->ssl, fd) != 1) {
        SSL_free(io->ssl);
        io->ssl = NULL;
        ERR_clear_error();
        return -1;
    }
    SSL_set_accept_state(io->ssl);
    return 0;
}
