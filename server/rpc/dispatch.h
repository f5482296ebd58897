/*
 * dispatch.h - one RPC from request bytes to response bytes (DESIGN.md "The RPC envelope").
 *
 * Decodes the RpcRequest envelope under a size cap and an allocation budget, finds the method
 * in protobuf-c's generated service descriptors (one table, no hand-kept switch), sets the
 * call's database deadline, checks the bearer token and the tenant, decodes the method's
 * request, runs the handler from services.h and packs its response into an RpcResponse. The
 * worker's store keeps no deadline between calls. Transport-agnostic: the transport hands
 * bytes in and sends the bytes it gets back.
 */
#ifndef CHARTER_DISPATCH_H
#define CHARTER_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/auth.h"
#include "rpc/call.h"
#include "rpc/services.h"
#include "db/store.h"

/* What every call is served with; read-only while workers run. */
typedef struct {
    const server_env *env;
    const auth_tokens *auth;
} dispatch_ctx;

/* A service and its method table (services.h). */
typedef struct {
    const ProtobufCServiceDescriptor *desc;
    const svc_method *methods;
    const size_t *n_methods;
} dispatch_service;

/* The services charterd serves, in the order of proto/charter.proto; *n gets their number.
 * Read-only, static storage. */
const dispatch_service *dispatch_services_of(size_t *n);

/* Checks one method table against its generated service descriptor: as many rows as the
 * descriptor has methods, each method named by exactly one row whose request and response are
 * the method's input and output messages, a handler in every row, a known role and known host,
 * quota and scripted-only columns (services.h), and a request with a string field "mode" in a
 * row refused for live runs under --scripted-only. Returns 0, or -1 with a one-line reason in
 * err (errlen bytes). */
int dispatch_check_service(const ProtobufCServiceDescriptor *desc, const svc_method *rows,
                           size_t n_rows, char *err, size_t errlen);

/* dispatch_check_service for every service charterd serves, and the compiled-in descriptors
 * (rpc/descriptors.h) against them. Returns 0, or -1 with a one-line
 * reason in err (charterd then refuses to start). */
int dispatch_check_tables(char *err, size_t errlen);

/* Every call gets a request id (metadata "x-request-id" when 1..128 printable characters
 * without spaces, else the trace-id of a valid W3C "traceparent", else 16 random bytes in hex):
 * it is returned in RpcResponse.metadata["x-request-id"], carried by the call's log line
 * (log_set_call) and put on the events the handler writes (evlog_set_request_id). */
/* Serves one request of len bytes on the worker's store st, after it waited waited_ms
 * milliseconds in the queue. The wait counts against the call's deadline: a request whose
 * deadline passed in the queue is answered DEADLINE_EXCEEDED without running (its caller has
 * given up), and the rest of the deadline bounds each database command. Always produces a
 * response for the caller (errors become RpcResponse codes): *resp is a malloc'd packed
 * RpcResponse of *resp_len bytes, freed by the caller. Returns 0, or -1 when not even an error
 * response could be allocated (nothing to send). Logs one line per failed call. */
int dispatch_serve(const dispatch_ctx *d, store *st, const uint8_t *req, size_t len,
                   unsigned waited_ms, uint8_t **resp, size_t *resp_len);

/* True when the request's method field (read from the bytes, without decoding them) names
 * the one method dispatch_serve_quick may serve, Health/Check: a cheap test the transport makes
 * on NNG's callback thread before deciding where a request is served. */
bool dispatch_quick_candidate(const uint8_t *req, size_t len);

/* Serves a request without a store, on the calling thread, when it touches no database: a
 * Health/Check (answered from the serving status, env->serving, rpc/serving.h) by a caller
 * identified without the registry (no token, or an environment token, for the default tenant)
 * and without metadata "health-source: database". Returns 0 with *resp as dispatch_serve's
 * (counted and logged the same), 1 when the call needs a worker (nothing was answered, counted
 * or logged; *resp is NULL), or -1 when no response could be allocated. */
int dispatch_serve_quick(const dispatch_ctx *d, const uint8_t *req, size_t len, uint8_t **resp,
                         size_t *resp_len);

/* A packed RpcResponse with code and message and no payload (used by the transport for
 * RESOURCE_EXHAUSTED when the queue is full). Returns 0 or -1 on allocation failure. */
int dispatch_error_reply(int code, const char *message, uint8_t **resp, size_t *resp_len);

/* The method "/charter.v1.<Service>/<Method>" as the table routes it (its input and output
 * message descriptors), or NULL when no service has it. For surfaces that decode the request
 * themselves (HTTP/JSON) before handing the envelope to dispatch_serve. */
const ProtobufCMethodDescriptor *dispatch_method(const char *method);

/* What a surface may decide from a call's method and authorization alone, before it reads the
 * request body (the HTTP listener, on the headers): the method exists, and its authorization
 * could still authenticate. The rule is dispatch_serve's own (one function serves both): a
 * bearer token of the stored-credential form passes when well-formed (the registry decides
 * later), anything else must be an environment token unless the method's row needs no role
 * (Health/Check). Returns RPC_OK (read the body and hand the call over; dispatch_serve checks
 * everything again), RPC_UNIMPLEMENTED (no such method) or RPC_UNAUTHENTICATED; *why is then
 * a static message for the answer. An UNAUTHENTICATED refusal is counted (metrics_call) and
 * logged (log_refusal) as dispatch_serve does for the refusals it answers. */
int dispatch_precheck(const auth_tokens *auth, const char *method, const char *authorization,
                      const char **why);

/* The gRPC name of an RPC_* code ("NOT_FOUND"), or "UNKNOWN". */
const char *dispatch_code_name(int code);

#endif
