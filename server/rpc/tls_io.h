/*
 * tls_io.h - one connection of the HTTP port read and written without blocking: a plain
 * socket, or an OpenSSL session over it (--http-cert, --http-key). The HTTP port and the
 * gRPC listener read and write through here alone, so neither knows which it has.
 */
#ifndef CHARTER_TLS_IO_H
#define CHARTER_TLS_IO_H

#include <openssl/ssl.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
    int fd;   /* non-blocking, owned: closed by tls_io_close */
    SSL *ssl; /* NULL for cleartext */
    /* The poll events (POLLIN, POLLOUT) the last call that could not go on waits for: a TLS
     * read may need to write, and a write to read. 0 when nothing waits. */
    short want;
} tls_io;

/* Bytes read into buf (at most n): > 0 read, 0 nothing now (io->want says on what), -1 the
 * peer closed or the connection failed. */
ssize_t tls_io_read(tls_io *io, void *buf, size_t n);

/* Bytes of buf written (at most n): > 0 written, 0 nothing now (io->want), -1 failed. */
ssize_t tls_io_write(tls_io *io, const void *buf, size_t n);

/* Drives the TLS handshake of io (accept side): 1 done, 0 not yet (io->want), -1 failed. */
int tls_io_handshake(tls_io *io);

/* Whether the client and the server agreed on HTTP/2 by ALPN ("h2"). */
int tls_io_is_h2(const tls_io *io);

/* Closes the connection (a TLS session is shut down without waiting) and frees its session. */
void tls_io_close(tls_io *io);

/* A TLS server context with the certificate chain (PEM) and its private key (PEM), TLS 1.2 or
 * later, choosing HTTP/1.1 by ALPN whenever the client offers it and HTTP/2 ("h2") when the
 * client offers HTTP/2 alone, as gRPC clients do. Returns it, or NULL with one line
 * "<what is wrong> (<how to fix>)" in err. Free with SSL_CTX_free. */
SSL_CTX *tls_io_context(const char *cert_file, const char *key_file, char *err, size_t errlen);

/* A server session for fd in ctx; 0 and io, or -1 (out of memory: fd is left open). */
int tls_io_accept(SSL_CTX *ctx, int fd, tls_io *io);

#endif
