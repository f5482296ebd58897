/*
 * http_port.h - charterd's HTTP port: the one listening socket of --http, for HTTP/1.1 (Connect,
 * the console, /healthz, /readyz, /metrics, served by libmicrohttpd) and gRPC over HTTP/2
 * (rpc/grpc.h), told apart per connection.
 *
 * The port accepts every connection itself. Cleartext: the first bytes are peeked; the HTTP/2
 * client preface ("PRI * HTTP/2.0", gRPC's prior-knowledge h2c) makes an HTTP/2 connection,
 * anything else is handed to libmicrohttpd as it stands (MHD_add_connection, nothing read).
 * With TLS (--http-cert, --http-key) the port makes the handshake with OpenSSL and ALPN decides:
 * "h2" is HTTP/2, anything else HTTP/1.1, whose bytes the port relays decrypted to
 * libmicrohttpd over a socket pair. One thread runs the port: accepts, first bytes, handshakes,
 * HTTP/2 sessions and relays, in one poll loop.
 *
 * The connection cap counts every connection, whichever protocol: past it the listening socket
 * is not polled and new connections wait in the backlog. A connection must show its first bytes
 * (or finish its handshake) within the header timeout.
 */
#ifndef CHARTER_HTTP_PORT_H
#define CHARTER_HTTP_PORT_H

#include <openssl/ssl.h>
#include <sys/socket.h>
#include <time.h>

#include "rpc/grpc.h"

/* Hands an HTTP/1.1 connection to libmicrohttpd. Returns 0 (then http_port_release is called
 * when libmicrohttpd has closed it), or -1 (fd already closed). */
typedef int (*http_port_take_fn)(void *arg, int fd, const struct sockaddr *addr, socklen_t len);

typedef struct {
    int listen_fd;             /* listening, non-blocking; owned from http_port_open on */
    unsigned max_connections;  /* connections open at once, both protocols */
    unsigned header_timeout_s; /* first bytes or TLS handshake (0: no limit) */
    SSL_CTX *tls;              /* NULL: cleartext; else borrowed, outlives the port */
    grpc_opts grpc;            /* the gRPC listener's (wake_fd is set by the port) */
    http_port_take_fn take_http1;
    void *arg;
} http_port_opts;

typedef struct http_port http_port;

/* The port, not yet accepting: its wake descriptor and the gRPC listener's call slots. Made
 * before libmicrohttpd's threads start, so they see it whole. Returns 0 and *out, or -1 with
 * one line in err (the listening socket is closed). Free with http_port_free. */
int http_port_open(const http_port_opts *o, http_port **out, char *err, size_t errlen);

/* Starts the port's thread: it accepts from now on. Returns 0, or -1 with one line in err. */
int http_port_run(http_port *p, char *err, size_t errlen);

/* An HTTP/1.1 connection libmicrohttpd held is closed (any thread): its place under the cap is
 * free again. */
void http_port_release(http_port *p);

/* Stops accepting (the listening socket closes); gRPC streams opened from now on are answered
 * UNAVAILABLE and each HTTP/2 connection is sent GOAWAY. Relays go on. */
void http_port_quiesce(http_port *p);

/* Waits until the gRPC calls in progress are answered and written, or until deadline
 * (CLOCK_REALTIME), then closes every connection the port holds and stops its thread. Later
 * calls do nothing. http_port_release may still be called (libmicrohttpd closing the HTTP/1.1
 * connections it holds) until http_port_free. NULL is ignored. */
void http_port_stop(http_port *p, const struct timespec *deadline);

/* Stops p if it was not (at once) and frees it; call after libmicrohttpd has stopped. NULL is
 * ignored. */
void http_port_free(http_port *p);

#endif
