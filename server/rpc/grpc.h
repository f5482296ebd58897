/*
 * grpc.h - gRPC over HTTP/2 on charterd's HTTP port: every method of the dispatch table as a
 * gRPC call (application/grpc, 5-byte length-prefixed protobuf messages, grpc-status and
 * grpc-message trailers), framed by nghttp2.
 *
 * A call becomes the same RpcRequest envelope an NNG or Connect caller sends (authorization,
 * x-request-id, traceparent and charter-tenant metadata; grpc-timeout as its deadline) and goes
 * over an in-process req0 socket to the transport, so it meets the same queue, workers, limits,
 * authentication and dispatch table. RpcResponse.code is already a gRPC status: it is the
 * grpc-status as it stands (the one mapping of charter's statuses is call_fail_status).
 *
 * Unary methods are one envelope each. Of the streaming methods (the compiled-in descriptors
 * say which stream, rpc/descriptors.h): grpc.health.v1.Health/Watch is a server stream of long
 * polls (each answer sent when the status differs from the last one sent), and
 * ServerReflectionInfo a stream each way answered one envelope per request, in order. No other
 * method streams.
 *
 * Everything a call can be refused for without its message is decided on its headers, before
 * a byte of the message is kept: Host (:authority) and Origin, method and content type, the
 * method, grpc-timeout, a token that can never authenticate (dispatch_precheck), a free call
 * slot. A message whose declared length is above max_message is refused on its prefix. A
 * stream's headers and its message each have a total deadline, a connection with no stream an
 * inactivity timeout, and each connection at most GRPC_MAX_STREAMS streams at once.
 *
 * Threads: every function but grpc_server_start and grpc_server_stop runs on the HTTP port's
 * loop thread (rpc/http_port.h), which owns the connections; the answers come back on NNG's
 * threads, are queued, and the loop is woken through opts.wake_fd to hand them out.
 */
#ifndef CHARTER_GRPC_H
#define CHARTER_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/auth.h"
#include "rpc/tls_io.h"

/* Streams open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS). */
#define GRPC_MAX_STREAMS 32

typedef struct {
    const char *rpc_url;       /* the transport's in-process URL */
    const auth_tokens *auth;   /* for the check on headers (borrowed) */
    size_t max_message;        /* bytes of one request message */
    unsigned max_inflight;     /* calls in progress at once */
    int max_timeout_ms;        /* upper bound of a call's deadline */
    const char *listen_host;   /* the host listened on, for :authority (borrowed) */
    const char *allow_host;    /* one more :authority host accepted, or NULL (borrowed) */
    unsigned header_timeout_s; /* a stream's headers; a connection's wait for its next stream */
    unsigned body_timeout_s;   /* a stream's messages once its headers are in */
    unsigned idle_timeout_s;   /* no byte either way, no call in progress: closed */
    int wake_fd;               /* an eventfd written when answers wait (borrowed) */
} grpc_opts;

typedef struct grpc_server grpc_server;
typedef struct grpc_conn grpc_conn;

/* The req0 socket and its call slots. Returns 0 and *out, or -1 with one line in err. */
int grpc_server_start(const grpc_opts *o, grpc_server **out, char *err, size_t errlen);

/* Hands the answers that came back to their streams (the loop, after wake_fd was written). */
void grpc_server_answers(grpc_server *g);

/* From now on a new stream is answered UNAVAILABLE, and each connection is sent GOAWAY. */
void grpc_server_quiesce(grpc_server *g);

/* Calls at the transport now (their answers not handed out yet). */
unsigned grpc_server_busy(const grpc_server *g);

/* Waits for the calls still at the transport (cancelled), closes the socket and frees g; call
 * after every connection was closed. NULL is ignored. */
void grpc_server_stop(grpc_server *g);

/* A new HTTP/2 connection over io (owned from now on, closed by grpc_conn_close), whose first
 * n bytes (the client preface, or a part of it) were already read into seen. Returns 0 and
 * *out, or -1 (out of memory; io is closed). */
int grpc_conn_open(grpc_server *g, tls_io io, const uint8_t *seen, size_t n, grpc_conn **out);

/* The poll events the connection waits for (POLLIN, POLLOUT), and its descriptor. */
short grpc_conn_events(const grpc_conn *c);
int grpc_conn_fd(const grpc_conn *c);

/* Reads what arrived and writes what is due. Returns 0, or -1 when the connection is over
 * (then grpc_conn_close it). */
int grpc_conn_io(grpc_conn *c);

/* Writes what is due (after answers were handed out). Returns 0 or -1 as grpc_conn_io. */
int grpc_conn_send(grpc_conn *c);

/* The connection's next deadline (CLOCK_MONOTONIC milliseconds; 0 none): a stream's headers or
 * body, a connection without streams, inactivity, a Watch's next poll. */
int64_t grpc_conn_deadline(const grpc_conn *c);

/* Acts on what is due at now: resets streams past their deadline, starts due polls, and
 * says -1 when the connection is to be closed. */
int grpc_conn_tick(grpc_conn *c, int64_t now);

/* Whether no stream is open on the connection. */
bool grpc_conn_quiet(const grpc_conn *c);

/* Closes the connection and frees c; answers still owed to its streams are dropped when they
 * come. */
void grpc_conn_close(grpc_conn *c);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t grpc_now_ms(void);

#endif
