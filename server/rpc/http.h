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
 * Nothing blocks NNG's HTTP threads: a handler parses the JSON, starts the exchange and returns;
 * the reply completes the HTTP request from the req0 socket's callback. At most max_inflight
 * calls are in progress at once; one more is answered 429 resource_exhausted at once.
 */
#ifndef CHARTER_HTTP_H
#define CHARTER_HTTP_H

#include <stddef.h>

typedef struct {
    const char *addr;       /* "HOST:PORT" or "PORT" (then 127.0.0.1) to listen on */
    const char *rpc_url;    /* URL of the transport to hand calls to (an inproc:// URL) */
    size_t max_message;     /* bytes of one request body, as for an encoded RpcRequest */
    unsigned max_inflight;  /* calls in progress at once (workers + queue) */
    int max_timeout_ms;     /* upper bound of a call's deadline, milliseconds */
    const char *allow_host; /* one more Host name accepted besides loopback ones, or NULL */
} http_opts;

typedef struct http_server http_server;

/* Starts listening. Returns 0 and *out, or -1 with one line "<what is wrong> (<how to fix>)"
 * in err and nothing left running. */
int http_start(const http_opts *o, http_server **out, char *err, size_t errlen);

/* Stops accepting connections, waits for calls in progress to be answered (each is bounded by
 * its deadline) and frees h. NULL is ignored. Call before the transport stops. */
void http_stop(http_server *h);

#endif
