/*
 * charter.c - libcharter: RPC calls to charterd over one NNG req0 socket.
 *
 * A call opens its own NNG context on the client's shared socket, so concurrent calls never
 * see each other's answers (req0 matches a reply to its context by request ID). Requests are
 * never resent by the transport: a method such as CreateRun is not idempotent, so a lost
 * connection is reported to the caller rather than replayed behind its back.
 */
#include "charter.h"
#include "health.pb-c.h"
#include "unpack_budget.h"

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifndef CHARTER_VERSION
#define CHARTER_VERSION "unknown"
#endif

#define RECONNECT_MIN_MS 100
#define RECONNECT_MAX_MS 2000
/* An answer may unpack into at most this many bytes per encoded byte (plus a floor): the
 * unpacked form of a legitimate charter.v1 message stays well below it, while a hostile count
 * inside a message cannot make unpack allocate without bound. */
#define UNPACK_FACTOR 32
#define UNPACK_FLOOR ((size_t)64 * 1024)

struct charter_client {
    nng_socket sock;
    nng_dialer dialer;
    char *url;
    char *authorization; /* "Bearer <token>", or NULL to send none */
    char *tenant;        /* metadata "tenant" sent with every call, or NULL */
    uint32_t timeout_ms;
    size_t max_message;
    nng_mtx *mtx; /* guards connections */
    nng_cv *cv;   /* signalled when connections changes */
    int connections;
    nng_mtx *call_mtx;         /* guards calls, closing and ops */
    nng_cv *call_cv;           /* signalled when calls changes */
    int calls;                 /* calls in progress: close waits for them before freeing */
    bool closing;              /* charter_client_close has begun: calls answer CANCELLED */
    struct client_op *ops;     /* operations in progress, which close aborts */
    char last_request_id[129]; /* of the last answer received; guarded by call_mtx */
};

/* An NNG operation of a call in progress (send or receive on the call's context), listed so
 * that close can abort it: NNG 1.5 must not see a context closed by its call while the socket
 * is being closed under it, so close ends the calls first and closes the socket after. */
typedef struct client_op {
    nng_aio *aio;
    bool listed;
    struct client_op *next;
} client_op;

/* The services of charter.v1, for checking a call against its generated descriptor. */
static const ProtobufCServiceDescriptor *const charter_services[] = {
    &charter__v1__runs__descriptor,        &charter__v1__gate__descriptor,
    &charter__v1__grants__descriptor,      &charter__v1__health__descriptor,
    &charter__v1__evidence__descriptor,    &charter__v1__workflows__descriptor,
    &charter__v1__retrieval__descriptor,   &charter__v1__reflection__descriptor,
    &charter__v1__tenants__descriptor,     &charter__v1__credentials__descriptor,
    &grpc__health__v1__health__descriptor,
};

static const char *const status_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *charter_version(void)
{
    return CHARTER_VERSION;
}

const char *charter_status_name(int code)
{
    if (code < 0 && code > -(int)(sizeof(status_names) / sizeof(status_names[0])))
        code = -code;
    if (code < 0 || code >= (int)(sizeof(status_names) / sizeof(status_names[0])))
        return "UNKNOWN_CODE";
    return status_names[code];
}

void charter_options_init(charter_options *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof(*opts));
    opts->timeout_ms = CHARTER_DEFAULT_TIMEOUT_MS;
    opts->max_message = CHARTER_DEFAULT_MAX_MESSAGE;
    opts->connect_timeout_ms = 0;
    opts->reconnect_min_ms = RECONNECT_MIN_MS;
    opts->reconnect_max_ms = RECONNECT_MAX_MS;
}

/* Records a status (when st is not NULL) and returns the negated code. */
static int status_set(charter_status *st, int code, int local, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int status_set(charter_status *st, int code, int local, const char *fmt, ...)
{
    if (st != NULL) {
        st->code = code;
        st->local = local;
        st->message[0] = '\0';
        st->request_id[0] = '\0';
        if (fmt != NULL) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(st->message, sizeof(st->message), fmt, ap);
            va_end(ap);
        }
    }
    return -code;
}

int charter_url_check(const char *url)
{
    static const char *const schemes[] = {"tcp://", "tcp4://", "tcp6://", "ipc://", "inproc://"};
    if (url == NULL)
        return -CHARTER_INVALID_ARGUMENT;
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        size_t n = strlen(schemes[i]);
        if (strncmp(url, schemes[i], n) != 0)
            continue;
        const char *addr = url + n;
        if (*addr == '\0')
            return -CHARTER_INVALID_ARGUMENT;
        if (strncmp(schemes[i], "tcp", 3) == 0) {
            /* HOST:PORT with a port of digits only, 1..65535 (strtol alone would take a sign
             * or spaces); HOST may be empty only for listeners. */
            const char *colon = strrchr(addr, ':');
            if (colon == NULL || colon == addr || colon[1] < '0' || colon[1] > '9')
                return -CHARTER_INVALID_ARGUMENT;
            char *end = NULL;
            long port = strtol(colon + 1, &end, 10);
            if (*end != '\0' || port < 1 || port > 65535)
                return -CHARTER_INVALID_ARGUMENT;
        }
        return 0;
    }
    return -CHARTER_INVALID_ARGUMENT;
}

static int options_resolve(const charter_options *in, charter_options *out)
{
    charter_options_init(out);
    if (in == NULL)
        return 0;
    if (in->timeout_ms > CHARTER_MAX_TIMEOUT_MS || in->connect_timeout_ms > CHARTER_MAX_TIMEOUT_MS)
        return -CHARTER_INVALID_ARGUMENT;
    if (in->max_message != 0 &&
        (in->max_message < CHARTER_MIN_MAX_MESSAGE || in->max_message > CHARTER_MAX_MAX_MESSAGE))
        return -CHARTER_INVALID_ARGUMENT;
    if (in->timeout_ms != 0)
        out->timeout_ms = in->timeout_ms;
    if (in->max_message != 0)
        out->max_message = in->max_message;
    out->connect_timeout_ms = in->connect_timeout_ms;
    if (in->reconnect_min_ms != 0)
        out->reconnect_min_ms = in->reconnect_min_ms;
    if (in->reconnect_max_ms != 0)
        out->reconnect_max_ms = in->reconnect_max_ms;
    if (out->reconnect_min_ms > out->reconnect_max_ms ||
        out->reconnect_max_ms > CHARTER_MAX_TIMEOUT_MS)
        return -CHARTER_INVALID_ARGUMENT;
    return 0;
}

/* Counts connections. ADD_PRE and REM_POST both fire for every pipe that reached the socket,
 * so the count stays balanced even for a pipe the protocol rejects after ADD_PRE. */
static void client_pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    charter_client *c = arg;
    (void)p;
    nng_mtx_lock(c->mtx);
    if (ev == NNG_PIPE_EV_ADD_PRE)
        c->connections++;
    else if (ev == NNG_PIPE_EV_REM_POST && c->connections > 0)
        c->connections--;
    nng_cv_wake(c->cv);
    nng_mtx_unlock(c->mtx);
}

static int nng_to_code(int rv)
{
    switch (rv) {
    case NNG_ENOMEM:
        return CHARTER_RESOURCE_EXHAUSTED;
    case NNG_EADDRINVAL:
    case NNG_EINVAL:
    case NNG_ENOTSUP:
        return CHARTER_INVALID_ARGUMENT;
    default:
        return CHARTER_INTERNAL;
    }
}

/* Waits until the client has a connection or deadline (nng_clock milliseconds) passes. */
static bool client_wait_connected(charter_client *c, nng_time deadline)
{
    bool connected;
    nng_mtx_lock(c->mtx);
    while (c->connections == 0) {
        if (nng_cv_until(c->cv, deadline) == NNG_ETIMEDOUT)
            break;
    }
    connected = c->connections > 0;
    nng_mtx_unlock(c->mtx);
    return connected;
}

static void client_free(charter_client *c)
{
    if (c == NULL)
        return;
    if (c->call_cv != NULL)
        nng_cv_free(c->call_cv);
    if (c->call_mtx != NULL)
        nng_mtx_free(c->call_mtx);
    if (c->cv != NULL)
        nng_cv_free(c->cv);
    if (c->mtx != NULL)
        nng_mtx_free(c->mtx);
    free(c->url);
    free(c->authorization);
    free(c->tenant);
    free(c);
}

static int socket_setup(charter_client *c, const charter_options *o)
{
    int rv;
    /* NNG_DURATION_INFINITE disables req0's resend: see the file comment. */
    if ((rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0)
        return rv;
    /* Room for the envelope around a payload of max_message bytes. */
    if ((rv = nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, o->max_message + 1024)) != 0)
        return rv;
    if ((rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, (nng_duration)o->reconnect_min_ms)) !=
        0)
        return rv;
    if ((rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, (nng_duration)o->reconnect_max_ms)) !=
        0)
        return rv;
    if ((rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_PRE, client_pipe_event, c)) != 0)
        return rv;
    if ((rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, client_pipe_event, c)) != 0)
        return rv;
    if ((rv = nng_dialer_create(&c->dialer, c->sock, c->url)) != 0)
        return rv;
    /* A dialer that cannot connect yet keeps redialing in the background. */
    return nng_dialer_start(c->dialer, NNG_FLAG_NONBLOCK);
}

int charter_client_open(const char *url, const char *token, const charter_options *opts,
                        charter_client **out)
{
    charter_options o;
    charter_client *c;
    int rv;

    if (out == NULL)
        return -CHARTER_INVALID_ARGUMENT;
    *out = NULL;
    if (charter_url_check(url) != 0 || options_resolve(opts, &o) != 0)
        return -CHARTER_INVALID_ARGUMENT;
    if ((c = calloc(1, sizeof(*c))) == NULL)
        return -CHARTER_RESOURCE_EXHAUSTED;
    c->timeout_ms = o.timeout_ms;
    c->max_message = o.max_message;
    if ((c->url = strdup(url)) == NULL) {
        client_free(c);
        return -CHARTER_RESOURCE_EXHAUSTED;
    }
    if (opts != NULL && opts->tenant != NULL && opts->tenant[0] != '\0' &&
        (c->tenant = strdup(opts->tenant)) == NULL) {
        client_free(c);
        return -CHARTER_RESOURCE_EXHAUSTED;
    }
    if (token != NULL && token[0] != '\0') {
        size_t n = strlen("Bearer ") + strlen(token) + 1;
        if ((c->authorization = malloc(n)) == NULL) {
            client_free(c);
            return -CHARTER_RESOURCE_EXHAUSTED;
        }
        snprintf(c->authorization, n, "Bearer %s", token);
    }
    if ((rv = nng_mtx_alloc(&c->mtx)) != 0 || (rv = nng_cv_alloc(&c->cv, c->mtx)) != 0 ||
        (rv = nng_mtx_alloc(&c->call_mtx)) != 0 ||
        (rv = nng_cv_alloc(&c->call_cv, c->call_mtx)) != 0) {
        client_free(c);
        return -nng_to_code(rv);
    }
    if ((rv = nng_req0_open(&c->sock)) != 0) {
        client_free(c);
        return -nng_to_code(rv);
    }
    if ((rv = socket_setup(c, &o)) != 0) {
        nng_close(c->sock);
        client_free(c);
        return -nng_to_code(rv);
    }
    if (o.connect_timeout_ms > 0 &&
        !client_wait_connected(c, nng_clock() + (nng_time)o.connect_timeout_ms)) {
        charter_client_close(c);
        return -CHARTER_UNAVAILABLE;
    }
    *out = c;
    return 0;
}

void charter_client_close(charter_client *c)
{
    if (c == NULL)
        return;
    /* End the calls in flight first (each then closes its own context and lets go of the
     * client), and only then the socket; a call that starts now finds closing set. */
    nng_mtx_lock(c->call_mtx);
    c->closing = true;
    for (client_op *op = c->ops; op != NULL; op = op->next)
        nng_aio_abort(op->aio, NNG_ECLOSED);
    while (c->calls > 0)
        nng_cv_wait(c->call_cv);
    nng_mtx_unlock(c->call_mtx);
    /* Detach the callbacks first; nng_close then waits for every pipe to go away. */
    nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_PRE, NULL, NULL);
    nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, NULL, NULL);
    nng_close(c->sock);
    client_free(c);
}

/* Counts a call in; false when the client is closing (the call must not start). */
static bool client_enter(charter_client *c)
{
    bool ok;
    nng_mtx_lock(c->call_mtx);
    ok = !c->closing;
    if (ok)
        c->calls++;
    nng_mtx_unlock(c->call_mtx);
    return ok;
}

static void client_leave(charter_client *c)
{
    nng_mtx_lock(c->call_mtx);
    c->calls--;
    nng_cv_wake(c->call_cv);
    nng_mtx_unlock(c->call_mtx);
}

static bool client_closing(charter_client *c)
{
    bool closing;
    nng_mtx_lock(c->call_mtx);
    closing = c->closing;
    nng_mtx_unlock(c->call_mtx);
    return closing;
}

/* Starts a send (send true) or receive of op's aio on ctx, listed for close to abort. The
 * operation starts outside call_mtx, so callers on other threads do not queue behind NNG's own
 * locks; a close that aborted the listed operations before this one started set closing first,
 * so the look after the start finds it and aborts this one (an abort of one already aborted
 * does nothing). Returns 0, or NNG_ECLOSED when the client is closing (nothing started). */
static int client_op_start(charter_client *c, client_op *op, nng_ctx ctx, bool send)
{
    nng_mtx_lock(c->call_mtx);
    bool closing = c->closing;
    if (!closing && !op->listed) {
        op->next = c->ops;
        c->ops = op;
        op->listed = true;
    }
    nng_mtx_unlock(c->call_mtx);
    if (closing)
        return NNG_ECLOSED;
    if (send)
        nng_ctx_send(ctx, op->aio);
    else
        nng_ctx_recv(ctx, op->aio);
    if (client_closing(c))
        nng_aio_abort(op->aio, NNG_ECLOSED);
    return 0;
}

/* Takes op off the list (before its aio is freed). */
static void client_op_end(charter_client *c, client_op *op)
{
    nng_mtx_lock(c->call_mtx);
    for (client_op **p = &c->ops; op->listed && *p != NULL; p = &(*p)->next) {
        if (*p == op) {
            *p = op->next;
            op->listed = false;
            break;
        }
    }
    nng_mtx_unlock(c->call_mtx);
}

const char *charter_client_url(const charter_client *c)
{
    return c != NULL ? c->url : NULL;
}

int charter_client_connections(charter_client *c)
{
    int n;
    if (c == NULL)
        return 0;
    nng_mtx_lock(c->mtx);
    n = c->connections;
    nng_mtx_unlock(c->mtx);
    return n;
}

/* ---- unpacking under a budget ------------------------------------------------------------ */

static ProtobufCMessage *unpack_budgeted(const ProtobufCMessageDescriptor *desc, size_t len,
                                         const uint8_t *data)
{
    /* The message is malloc's memory (unpack_budget.h): callers free it with a NULL allocator. */
    unpack_budget b;
    unpack_budget_init(&b, len, UNPACK_FACTOR, UNPACK_FLOOR);
    ProtobufCAllocator a = unpack_budget_allocator(&b);
    return protobuf_c_message_unpack(desc, &a, len, data);
}

/* ---- one call ----------------------------------------------------------------------------- */

static bool same_descriptor(const ProtobufCMessageDescriptor *a,
                            const ProtobufCMessageDescriptor *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a->name, b->name) == 0);
}

/* Finds method ("/<package>.<Service>/<Method>") among charter.v1's services; NULL when it is
 * not one of them. */
static const ProtobufCMethodDescriptor *method_lookup(const char *method)
{
    if (method[0] != '/')
        return NULL;
    const char *slash = strchr(method + 1, '/');
    if (slash == NULL)
        return NULL;
    size_t svc_len = (size_t)(slash - (method + 1));
    for (size_t i = 0; i < sizeof(charter_services) / sizeof(charter_services[0]); i++) {
        const ProtobufCServiceDescriptor *s = charter_services[i];
        if (strlen(s->name) != svc_len || strncmp(s->name, method + 1, svc_len) != 0)
            continue;
        return protobuf_c_service_descriptor_get_method_by_name(s, slash + 1);
    }
    return NULL;
}

/* Packs the envelope for method around req into a new NNG message. */
static int request_build(charter_client *c, const char *method, const ProtobufCMessage *req,
                         const char *const *metadata, size_t n_pairs, nng_msg **out,
                         charter_status *st)
{
    Charter__V1__RpcRequest env = CHARTER__V1__RPC_REQUEST__INIT;
    Charter__V1__RpcRequest__MetadataEntry entries[2 + CHARTER_MAX_METADATA];
    Charter__V1__RpcRequest__MetadataEntry *meta[2 + CHARTER_MAX_METADATA];
    uint8_t *payload = NULL;
    size_t payload_len = protobuf_c_message_get_packed_size(req);
    nng_msg *msg = NULL;
    int rv;

    if (payload_len > c->max_message)
        return status_set(st, CHARTER_RESOURCE_EXHAUSTED, 1,
                          "request of %zu bytes exceeds max_message (%zu bytes)", payload_len,
                          c->max_message);
    if (payload_len > 0) {
        if ((payload = malloc(payload_len)) == NULL)
            return status_set(st, CHARTER_RESOURCE_EXHAUSTED, 1, "out of memory");
        if (protobuf_c_message_pack(req, payload) != payload_len) {
            free(payload);
            return status_set(st, CHARTER_INTERNAL, 1, "request could not be encoded");
        }
    }
    env.method = (char *)method;
    env.payload.data = payload;
    env.payload.len = payload_len;
    env.metadata = meta;
    if (c->authorization != NULL) {
        charter__v1__rpc_request__metadata_entry__init(&entries[0]);
        entries[0].key = "authorization";
        entries[0].value = c->authorization;
        meta[env.n_metadata++] = &entries[0];
    }
    if (c->tenant != NULL) {
        Charter__V1__RpcRequest__MetadataEntry *e = &entries[env.n_metadata];
        charter__v1__rpc_request__metadata_entry__init(e);
        e->key = "tenant";
        e->value = c->tenant;
        meta[env.n_metadata++] = e;
    }
    for (size_t i = 0; i < n_pairs; i++) {
        Charter__V1__RpcRequest__MetadataEntry *e = &entries[env.n_metadata];
        charter__v1__rpc_request__metadata_entry__init(e);
        e->key = (char *)metadata[2 * i];
        e->value = (char *)metadata[2 * i + 1];
        meta[env.n_metadata++] = e;
    }
    /* charterd answers by the deadline it is sent, including "the effect is not known" when
     * the database stalls: it gets the call's deadline minus a margin for the answer to travel
     * back, so that answer arrives before this client gives up (a tenth, 50 ms to 1 s). */
    uint32_t margin = c->timeout_ms / 10;
    margin = margin < 50 ? 50 : margin > 1000 ? 1000 : margin;
    env.timeout_ms = c->timeout_ms > 2 * margin ? c->timeout_ms - margin : c->timeout_ms / 2 + 1;

    size_t len = protobuf_c_message_get_packed_size(&env.base);
    if (len > c->max_message) {
        free(payload);
        return status_set(st, CHARTER_RESOURCE_EXHAUSTED, 1,
                          "request of %zu bytes exceeds max_message (%zu bytes)", len,
                          c->max_message);
    }
    if ((rv = nng_msg_alloc(&msg, len)) != 0) {
        free(payload);
        return status_set(st, CHARTER_RESOURCE_EXHAUSTED, 1, "out of memory");
    }
    size_t packed = protobuf_c_message_pack(&env.base, nng_msg_body(msg));
    free(payload);
    if (packed != len) {
        nng_msg_free(msg);
        return status_set(st, CHARTER_INTERNAL, 1, "request could not be encoded");
    }
    *out = msg;
    return 0;
}

/* Milliseconds left until deadline, at least 1 so an expired deadline still times out. */
static nng_duration remaining_ms(nng_time deadline)
{
    nng_time now = nng_clock();
    return now >= deadline ? 1 : (nng_duration)(deadline - now);
}

/* Sends msg on a fresh context and waits for the answer. Takes ownership of msg. */
static int exchange(charter_client *c, const char *method, nng_msg *msg, nng_msg **reply,
                    charter_status *st)
{
    nng_ctx ctx;
    nng_aio *aio = NULL;
    nng_time deadline = nng_clock() + (nng_time)c->timeout_ms;
    int rv;

    if ((rv = nng_ctx_open(&ctx, c->sock)) != 0) {
        nng_msg_free(msg);
        if (rv == NNG_ECLOSED)
            return status_set(st, CHARTER_CANCELLED, 1, "client closed");
        return status_set(st, nng_to_code(rv), 1, "cannot open a context: %s", nng_strerror(rv));
    }
    if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0) {
        nng_msg_free(msg);
        nng_ctx_close(ctx);
        return status_set(st, CHARTER_RESOURCE_EXHAUSTED, 1, "out of memory");
    }

    /* req0 completes a send only once a connection has taken the request, so a send timeout
     * without a connection means there was none for the whole deadline. */
    client_op op = {aio, false, NULL};
    nng_aio_set_timeout(aio, remaining_ms(deadline));
    nng_aio_set_msg(aio, msg);
    if ((rv = client_op_start(c, &op, ctx, true)) == 0) {
        nng_aio_wait(aio);
        rv = nng_aio_result(aio);
    }
    if (rv != 0) {
        nng_msg_free(nng_aio_get_msg(aio));
        client_op_end(c, &op);
        nng_aio_free(aio);
        nng_ctx_close(ctx);
        if (client_closing(c))
            return status_set(st, CHARTER_CANCELLED, 1, "client closed");
        if (rv == NNG_ETIMEDOUT && charter_client_connections(c) > 0)
            return status_set(st, CHARTER_DEADLINE_EXCEEDED, 1,
                              "%s: the request could not be sent within %u ms", method,
                              (unsigned)c->timeout_ms);
        if (rv == NNG_ETIMEDOUT)
            return status_set(st, CHARTER_UNAVAILABLE, 1, "no connection to %s within %u ms",
                              c->url, (unsigned)c->timeout_ms);
        if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
            return status_set(st, CHARTER_CANCELLED, 1, "client closed");
        return status_set(st, CHARTER_UNAVAILABLE, 1, "%s: send failed: %s", method,
                          nng_strerror(rv));
    }

    nng_aio_set_timeout(aio, remaining_ms(deadline));
    if ((rv = client_op_start(c, &op, ctx, false)) == 0) {
        nng_aio_wait(aio);
        rv = nng_aio_result(aio);
    }
    if (rv == 0)
        *reply = nng_aio_get_msg(aio);
    client_op_end(c, &op);
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    if (rv != 0 && client_closing(c))
        return status_set(st, CHARTER_CANCELLED, 1, "client closed");
    switch (rv) {
    case 0:
        return 0;
    case NNG_ETIMEDOUT:
        return status_set(st, CHARTER_DEADLINE_EXCEEDED, 1, "%s: no answer within %u ms", method,
                          (unsigned)c->timeout_ms);
    case NNG_ECONNRESET:
        return status_set(st, CHARTER_UNAVAILABLE, 1,
                          "%s: connection to %s lost after the request was sent (its effect is "
                          "unknown; an answer over max_message also closes it)",
                          method, c->url);
    case NNG_ECLOSED:
    case NNG_ECANCELED:
        return status_set(st, CHARTER_CANCELLED, 1, "client closed");
    default:
        return status_set(st, CHARTER_UNAVAILABLE, 1, "%s: receive failed: %s", method,
                          nng_strerror(rv));
    }
}

const ProtobufCMethodDescriptor *charter_method_find(const char *method)
{
    return method != NULL ? method_lookup(method) : NULL;
}

int charter_call(charter_client *c, const char *method, const ProtobufCMessage *req,
                 const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                 charter_status *status)
{
    return charter_call_metadata(c, method, req, resp_desc, NULL, 0, resp, status);
}

/* The reply metadata "x-request-id" of env into status (when both are there) and into the
 * client's last request id. */
static void status_request_id(charter_client *c, charter_status *st,
                              const Charter__V1__RpcResponse *env)
{
    for (size_t i = 0; i < env->n_metadata; i++) {
        const Charter__V1__RpcResponse__MetadataEntry *e = env->metadata[i];
        if (e->key == NULL || e->value == NULL || strcmp(e->key, "x-request-id") != 0)
            continue;
        if (st != NULL)
            snprintf(st->request_id, sizeof st->request_id, "%s", e->value);
        nng_mtx_lock(c->call_mtx);
        snprintf(c->last_request_id, sizeof c->last_request_id, "%s", e->value);
        nng_mtx_unlock(c->call_mtx);
    }
}

void charter_client_last_request_id(charter_client *c, char out[129])
{
    out[0] = '\0';
    if (c == NULL)
        return;
    nng_mtx_lock(c->call_mtx);
    snprintf(out, 129, "%s", c->last_request_id);
    nng_mtx_unlock(c->call_mtx);
}

int charter_call_metadata(charter_client *c, const char *method, const ProtobufCMessage *req,
                          const ProtobufCMessageDescriptor *resp_desc, const char *const *metadata,
                          size_t n_pairs, ProtobufCMessage **resp, charter_status *status)
{
    nng_msg *msg = NULL, *reply = NULL;
    Charter__V1__RpcResponse *env;
    int rv;

    if (resp != NULL)
        *resp = NULL;
    if (c == NULL || method == NULL || req == NULL || resp_desc == NULL || resp == NULL)
        return status_set(status, CHARTER_INVALID_ARGUMENT, 1, "NULL argument");
    if (n_pairs > CHARTER_MAX_METADATA || (n_pairs > 0 && metadata == NULL))
        return status_set(status, CHARTER_INVALID_ARGUMENT, 1,
                          "at most %d metadata pairs, none NULL", CHARTER_MAX_METADATA);
    for (size_t i = 0; i < 2 * n_pairs; i++)
        if (metadata[i] == NULL || (i % 2 == 0 && strcasecmp(metadata[i], "authorization") == 0))
            return status_set(status, CHARTER_INVALID_ARGUMENT, 1,
                              "metadata key or value NULL, or \"authorization\" (the client's "
                              "token is sent by the client)");
    if (req->descriptor == NULL || req->descriptor->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC ||
        resp_desc->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC)
        return status_set(status, CHARTER_INVALID_ARGUMENT, 1, "not a protobuf-c message");
    if (method[0] != '/' || strchr(method + 1, '/') == NULL)
        return status_set(status, CHARTER_INVALID_ARGUMENT, 1,
                          "method \"%.64s\" is not /<package>.<Service>/<Method>", method);
    const ProtobufCMethodDescriptor *m = method_lookup(method);
    if (m != NULL && !same_descriptor(m->input, req->descriptor))
        return status_set(status, CHARTER_INVALID_ARGUMENT, 1, "%s takes %s, not %s", method,
                          m->input->name, req->descriptor->name);
    if (m != NULL && !same_descriptor(m->output, resp_desc))
        return status_set(status, CHARTER_INVALID_ARGUMENT, 1, "%s returns %s, not %s", method,
                          m->output->name, resp_desc->name);

    if (!client_enter(c))
        return status_set(status, CHARTER_CANCELLED, 1, "client closed");
    if ((rv = request_build(c, method, req, metadata, n_pairs, &msg, status)) == 0)
        rv = exchange(c, method, msg, &reply, status);
    client_leave(c);
    if (rv != 0)
        return rv;

    env = (Charter__V1__RpcResponse *)unpack_budgeted(&charter__v1__rpc_response__descriptor,
                                                      nng_msg_len(reply), nng_msg_body(reply));
    nng_msg_free(reply);
    if (env == NULL)
        return status_set(status, CHARTER_INTERNAL, 1, "%s: the answer is not an RpcResponse",
                          method);
    if (env->code < 0) {
        /* A negative code must not read as success to a caller testing rv < 0 either way. */
        rv = status_set(status, CHARTER_INTERNAL, 1, "%s: invalid status %d in the answer", method,
                        (int)env->code);
        protobuf_c_message_free_unpacked(&env->base, NULL);
        return rv;
    }
    if (env->code != 0) {
        rv = status_set(status, env->code, 0, "%s", env->message);
        status_request_id(c, status, env);
        protobuf_c_message_free_unpacked(&env->base, NULL);
        return rv;
    }
    *resp = unpack_budgeted(resp_desc, env->payload.len, env->payload.data);
    if (*resp == NULL) {
        rv = status_set(status, CHARTER_INTERNAL, 1, "%s: the answer's payload is not a %s", method,
                        resp_desc->name);
        status_request_id(c, status, env);
        protobuf_c_message_free_unpacked(&env->base, NULL);
        return rv;
    }
    status_set(status, CHARTER_OK, 0, NULL);
    status_request_id(c, status, env);
    protobuf_c_message_free_unpacked(&env->base, NULL);
    return 0;
}

/* ---- typed calls -------------------------------------------------------------------------- */

/* Calls the method of svc whose input is req_desc and output resp_desc. The method name comes
 * from the service descriptor. */
static int typed_call(charter_client *c, const ProtobufCServiceDescriptor *svc,
                      const ProtobufCMessageDescriptor *req_desc, const ProtobufCMessage *req,
                      const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                      charter_status *status)
{
    const ProtobufCMethodDescriptor *m = NULL;
    char method[128];
    int rv;

    if (resp != NULL)
        *resp = NULL;
    for (unsigned i = 0; i < svc->n_methods; i++) {
        if (same_descriptor(svc->methods[i].input, req_desc) &&
            same_descriptor(svc->methods[i].output, resp_desc)) {
            m = &svc->methods[i];
            break;
        }
    }
    if (m == NULL)
        return status_set(status, CHARTER_INTERNAL, 1, "%s has no method %s -> %s", svc->name,
                          req_desc->name, resp_desc->name);
    if (req != NULL && !same_descriptor(req->descriptor, req_desc))
        return status_set(status, CHARTER_INVALID_ARGUMENT, 1, "%s.%s takes %s, not %s", svc->name,
                          m->name, req_desc->name, req->descriptor->name);
    rv = snprintf(method, sizeof(method), "/%s/%s", svc->name, m->name);
    if (rv < 0 || (size_t)rv >= sizeof(method))
        return status_set(status, CHARTER_INTERNAL, 1, "method name too long");

    if (req != NULL)
        return charter_call(c, method, req, resp_desc, resp, status);

    /* NULL: the all-defaults request, built in place from the descriptor. */
    ProtobufCMessage *empty = malloc(req_desc->sizeof_message);
    if (empty == NULL)
        return status_set(status, CHARTER_RESOURCE_EXHAUSTED, 1, "out of memory");
    protobuf_c_message_init(req_desc, empty);
    rv = charter_call(c, method, empty, resp_desc, resp, status);
    free(empty);
    return rv;
}

#define CHARTER_TYPED(fn, svc, ReqType, req_snake, RespType, resp_snake)                           \
    int fn(charter_client *c, const ReqType *req, RespType **resp, charter_status *status)         \
    {                                                                                              \
        return typed_call(c, &svc, &charter__v1__##req_snake##__descriptor,                        \
                          (const ProtobufCMessage *)req, &charter__v1__##resp_snake##__descriptor, \
                          (ProtobufCMessage **)resp, status);                                      \
    }

CHARTER_TYPED(charter_create_run, charter__v1__runs__descriptor, Charter__V1__CreateRunRequest,
              create_run_request, Charter__V1__RunView, run_view)
CHARTER_TYPED(charter_get_run, charter__v1__runs__descriptor, Charter__V1__GetRunRequest,
              get_run_request, Charter__V1__RunView, run_view)
CHARTER_TYPED(charter_list_runs, charter__v1__runs__descriptor, Charter__V1__ListRunsRequest,
              list_runs_request, Charter__V1__ListRunsResponse, list_runs_response)
CHARTER_TYPED(charter_recover_run, charter__v1__runs__descriptor, Charter__V1__RecoverRunRequest,
              recover_run_request, Charter__V1__RecoverRunResponse, recover_run_response)
CHARTER_TYPED(charter_wait_run, charter__v1__runs__descriptor, Charter__V1__WaitRunRequest,
              wait_run_request, Charter__V1__RunView, run_view)
CHARTER_TYPED(charter_cancel_run, charter__v1__runs__descriptor, Charter__V1__CancelRunRequest,
              cancel_run_request, Charter__V1__Run, run)
CHARTER_TYPED(charter_checkpoint_run, charter__v1__runs__descriptor,
              Charter__V1__CheckpointRunRequest, checkpoint_run_request, Charter__V1__Checkpoint,
              checkpoint)
CHARTER_TYPED(charter_resume_run, charter__v1__runs__descriptor, Charter__V1__ResumeRunRequest,
              resume_run_request, Charter__V1__Run, run)
CHARTER_TYPED(charter_complete_run, charter__v1__runs__descriptor, Charter__V1__CompleteRunRequest,
              complete_run_request, Charter__V1__Run, run)
CHARTER_TYPED(charter_open_step, charter__v1__gate__descriptor, Charter__V1__OpenStepRequest,
              open_step_request, Charter__V1__StepContext, step_context)
CHARTER_TYPED(charter_read_source, charter__v1__gate__descriptor, Charter__V1__ReadSourceRequest,
              read_source_request, Charter__V1__ReadSourceResponse, read_source_response)
CHARTER_TYPED(charter_observe_source, charter__v1__gate__descriptor,
              Charter__V1__ObserveSourceRequest, observe_source_request,
              Charter__V1__ObserveSourceResponse, observe_source_response)
CHARTER_TYPED(charter_invoke, charter__v1__gate__descriptor, Charter__V1__InvokeRequest,
              invoke_request, Charter__V1__InvokeResponse, invoke_response)
CHARTER_TYPED(charter_record_output, charter__v1__gate__descriptor,
              Charter__V1__RecordOutputRequest, record_output_request,
              Charter__V1__RecordOutputResponse, record_output_response)
CHARTER_TYPED(charter_check_input, charter__v1__gate__descriptor, Charter__V1__CheckInputRequest,
              check_input_request, Charter__V1__CheckInputResponse, check_input_response)
CHARTER_TYPED(charter_deliver, charter__v1__gate__descriptor, Charter__V1__DeliverRequest,
              deliver_request, Charter__V1__DeliverResponse, deliver_response)
CHARTER_TYPED(charter_trace_artifact, charter__v1__gate__descriptor,
              Charter__V1__TraceArtifactRequest, trace_artifact_request,
              Charter__V1__TraceArtifactResponse, trace_artifact_response)
CHARTER_TYPED(charter_revoke_grant, charter__v1__grants__descriptor,
              Charter__V1__RevokeGrantRequest, revoke_grant_request, Charter__V1__Grant, grant)
CHARTER_TYPED(charter_restore_grants, charter__v1__grants__descriptor,
              Charter__V1__RestoreGrantsRequest, restore_grants_request,
              Charter__V1__RestoreGrantsResponse, restore_grants_response)
CHARTER_TYPED(charter_quarantine_resource, charter__v1__resources__descriptor,
              Charter__V1__QuarantineResourceRequest, quarantine_resource_request,
              Charter__V1__ResourceQuarantine, resource_quarantine)
CHARTER_TYPED(charter_release_resource, charter__v1__resources__descriptor,
              Charter__V1__ReleaseResourceRequest, release_resource_request,
              Charter__V1__ResourceQuarantine, resource_quarantine)
CHARTER_TYPED(charter_show_chain, charter__v1__grants__descriptor, Charter__V1__ShowChainRequest,
              show_chain_request, Charter__V1__GrantChain, grant_chain)
CHARTER_TYPED(charter_health, charter__v1__health__descriptor, Charter__V1__HealthRequest,
              health_request, Charter__V1__HealthResponse, health_response)
CHARTER_TYPED(charter_replay_decision, charter__v1__evidence__descriptor,
              Charter__V1__ReplayDecisionRequest, replay_decision_request,
              Charter__V1__ReplayDecisionResponse, replay_decision_response)
CHARTER_TYPED(charter_get_receipt, charter__v1__evidence__descriptor,
              Charter__V1__GetReceiptRequest, get_receipt_request, Charter__V1__Receipt, receipt)
CHARTER_TYPED(charter_audit_run, charter__v1__evidence__descriptor, Charter__V1__AuditRunRequest,
              audit_run_request, Charter__V1__AuditRunResponse, audit_run_response)
CHARTER_TYPED(charter_what_if, charter__v1__evidence__descriptor, Charter__V1__WhatIfRequest,
              what_if_request, Charter__V1__WhatIfResponse, what_if_response)
CHARTER_TYPED(charter_apply_workflow, charter__v1__workflows__descriptor,
              Charter__V1__ApplyWorkflowRequest, apply_workflow_request, Charter__V1__WorkflowInfo,
              workflow_info)
CHARTER_TYPED(charter_list_workflows, charter__v1__workflows__descriptor,
              Charter__V1__ListWorkflowsRequest, list_workflows_request,
              Charter__V1__ListWorkflowsResponse, list_workflows_response)
CHARTER_TYPED(charter_get_workflow, charter__v1__workflows__descriptor,
              Charter__V1__GetWorkflowRequest, get_workflow_request,
              Charter__V1__WorkflowDefinition, workflow_definition)
CHARTER_TYPED(charter_get_receipt_key, charter__v1__evidence__descriptor,
              Charter__V1__GetReceiptKeyRequest, get_receipt_key_request, Charter__V1__ReceiptKey,
              receipt_key)
CHARTER_TYPED(charter_list_methods, charter__v1__reflection__descriptor,
              Charter__V1__ListMethodsRequest, list_methods_request,
              Charter__V1__ListMethodsResponse, list_methods_response)
CHARTER_TYPED(charter_create_tenant, charter__v1__tenants__descriptor,
              Charter__V1__CreateTenantRequest, create_tenant_request,
              Charter__V1__CreateTenantResponse, create_tenant_response)
CHARTER_TYPED(charter_list_tenants, charter__v1__tenants__descriptor,
              Charter__V1__ListTenantsRequest, list_tenants_request,
              Charter__V1__ListTenantsResponse, list_tenants_response)
CHARTER_TYPED(charter_issue_credential, charter__v1__credentials__descriptor,
              Charter__V1__IssueCredentialRequest, issue_credential_request,
              Charter__V1__IssuedCredential, issued_credential)
CHARTER_TYPED(charter_list_credentials, charter__v1__credentials__descriptor,
              Charter__V1__ListCredentialsRequest, list_credentials_request,
              Charter__V1__ListCredentialsResponse, list_credentials_response)
CHARTER_TYPED(charter_revoke_credential, charter__v1__credentials__descriptor,
              Charter__V1__RevokeCredentialRequest, revoke_credential_request,
              Charter__V1__Credential, credential)
CHARTER_TYPED(charter_list_approvals, charter__v1__approvals__descriptor,
              Charter__V1__ListApprovalsRequest, list_approvals_request,
              Charter__V1__ListApprovalsResponse, list_approvals_response)
CHARTER_TYPED(charter_decide_approval, charter__v1__approvals__descriptor,
              Charter__V1__DecideApprovalRequest, decide_approval_request,
              Charter__V1__DecideApprovalResponse, decide_approval_response)
