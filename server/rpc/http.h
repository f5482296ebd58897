/*
 * http.h - charterd's HTTP/JSON listener: every method of the API as a Connect unary call.
 *
 * `POST /charter.v1.<Service>/<Method>` with `Content-Type: application/json` carries the
 * request message in the proto3 JSON mapping (proto/protojson.h). The listener turns it into
 * the same RpcRequest envelope an NNG caller sends (authorization from the `Authorization`
 * header, the deadline from `Connect-Timeout-Ms`) and sends it over an in-process req0 socket
 * to the transport's rep0 socket, so it reaches the same queue, worker pool, limits,
 * authentication and dispatch table as every other call. The RpcResponse becomes HTTP 200 with
 * the response message as JSON, or a Connect error body {"code": "...", "message": "..."} with
 * the Connect code's HTTP status. `GET /healthz` answers 200 while the process serves.
 * `GET /readyz` sends a Health/Check through the same queue (200 when the database answered
 * and holds the query library, 503 otherwise), `GET /metrics` renders metrics.h's counters,
 * and any other GET is a file of the console (server/rpc/console/, compiled in) with a strict
 * Content-Security-Policy.
 *
 * The HTTP port (rpc/http_port.h) accepts the connections: HTTP/1.1 ones are served by
 * libmicrohttpd here, HTTP/2 ones by the gRPC listener (rpc/grpc.h), TLS when cert_file is
 * given. Everything a request can be refused for without its body is decided on its headers,
 * before a byte of the body is read: Host and Origin, the method, the content type,
 * Connect-Timeout-Ms, a token that can never authenticate (dispatch_precheck), a declared length
 * above max_message, no free call slot. A chunked body is counted as it arrives and refused once
 * over max_message. A request's headers and its body each have a total deadline (http_guard.h), a
 * connection an inactivity timeout, and at most max_connections (of both protocols) are open at
 * once (more wait in the listen backlog), fitted at start into the open file limit so NNG and the
 * database always have descriptors.
 *
 * Nothing blocks libmicrohttpd's threads: a handler parses the JSON, suspends the connection,
 * starts the exchange and returns; the reply resumes the connection from the req0 socket's
 * callback. At most max_inflight calls are in progress at once; one more is answered 429
 * resource_exhausted at once.
 */
#ifndef CHARTER_HTTP_H
#define CHARTER_HTTP_H

#include <stddef.h>

#include "rpc/auth.h"

typedef struct {
    const char *addr;          /* "HOST:PORT" or "PORT" (then 127.0.0.1) to listen on */
    const char *rpc_url;       /* URL of the transport to hand calls to (an inproc:// URL) */
    const auth_tokens *auth;   /* the environment tokens, for the check on headers (borrowed) */
    size_t max_message;        /* bytes of one request body, as for an encoded RpcRequest */
    unsigned max_inflight;     /* calls in progress at once (workers + queue) */
    int max_timeout_ms;        /* upper bound of a call's deadline, milliseconds */
    const char *allow_host;    /* one more Host name accepted besides loopback ones, or NULL */
    unsigned max_connections;  /* connections open at once; lowered to fit RLIMIT_NOFILE */
    unsigned header_timeout_s; /* seconds for a request's line and headers (0: no limit) */
    unsigned body_timeout_s;   /* seconds for its body after the headers (0: no limit) */
    unsigned idle_timeout_s;   /* seconds without a byte either way closes (0: no limit) */
    const char *cert_file;     /* --http-cert: PEM certificate chain; NULL: cleartext */
    const char *key_file;      /* --http-key: its PEM private key (with cert_file) */
} http_opts;

typedef struct http_server http_server;

/* Starts listening. Returns 0 and *out, or -1 with one line "<what is wrong> (<how to fix>)"
 * in err and nothing left running. Logs a line when max_connections had to be lowered to fit
 * the open file limit. */
int http_start(const http_opts *o, http_server **out, char *err, size_t errlen);

/* The address h serves on, "host:port", with the port it is bound to: the one the system
 * picked when --http asked for port 0. */
const char *http_address(const http_server *h);

/* Stops accepting calls (new ones get 503), waits for calls in progress to be answered
 * (bounded: 10 s, then they are cancelled) and frees h. NULL is ignored. Call before the
 * transport stops. */
void http_stop(http_server *h);

#endif
