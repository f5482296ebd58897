/*
 * grpc_call.c - one gRPC call on an HTTP/2 stream (see grpc_call.h and grpc.h).
 *
 * A stream holds a call slot from its accepted headers to its end: at most n_slots calls are
 * in progress, and only an accepted stream's message is kept, up to max_message. Its
 * envelopes go out on the slot's nng_ctx; the slot's callback queues the answer and writes the
 * wake descriptor, and grpc_call_server_answers hands it to the stream on the loop thread (or
 * drops it when the stream is gone). A response is HEADERS (:status 200, content-type
 * application/grpc), DATA of 5-byte-prefixed messages, then trailers (grpc-status,
 * grpc-message); a call refused before any message is one HEADERS frame with the status
 * (trailers-only).
 */
#include "rpc/grpc_call.h"

#include <errno.h>
#include <stdarg.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "charter.pb-c.h"
#include "core/hostport.h"
#include "core/invariant.h"
#include "core/log.h"
#include "health.pb-c.h"
#include "rpc/call.h"
#include "rpc/dispatch.h"

/* A stream's header list, bytes (name + value + 32 each, as RFC 9113 counts them). */
#define GRPC_HEADER_BUDGET ((size_t)64 * 1024)
/* Time on top of a call's deadline before the listener gives up on the worker's answer. */
#define GRPC_DEADLINE_MARGIN_MS 5000
/* Largest RpcResponse taken from the transport. */
#define GRPC_MAX_REPLY ((size_t)64 * 1024 * 1024)
/* A Watch poll that saw no change is followed by the next one this much later. */
#define GRPC_WATCH_PAUSE_MS 1000
/* The 5-byte prefix of a message: a compressed flag and a big-endian length. */
#define GRPC_PREFIX 5

typedef enum { SLOT_FREE = 0, SLOT_SEND, SLOT_RECV } grpc_slot_state;

struct grpc_slot {
    grpc_call_server *srv;
    nng_ctx ctx;
    nng_aio *aio;
    grpc_slot_state state;
    grpc_stream *stream; /* NULL once the stream is gone (loop thread) */
    bool watch;          /* counted in srv->watchers */
    int rv;              /* the exchange's NNG result */
    nng_msg *reply;
    grpc_slot *next;
};

int64_t grpc_call_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* --- slots -------------------------------------------------------------------------------- */

static void grpc_slot_cb(void *arg)
{
    grpc_slot *j = arg;
    grpc_call_server *g = j->srv;
    int rv = nng_aio_result(j->aio);
    if (j->state == SLOT_SEND && rv == 0) {
        j->state = SLOT_RECV;
        nng_ctx_recv(j->ctx, j->aio);
        return;
    }
    if (j->state == SLOT_SEND) {
        nng_msg_free(nng_aio_get_msg(j->aio));
        nng_aio_set_msg(j->aio, NULL);
    }
    j->rv = rv;
    j->reply = rv == 0 ? nng_aio_get_msg(j->aio) : NULL;
    nng_aio_set_msg(j->aio, NULL);
    pthread_mutex_lock(&g->mu);
    j->next = g->answered;
    g->answered = j;
    pthread_mutex_unlock(&g->mu);
    uint64_t one = 1;
    while (write(g->wake_fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

int grpc_call_server_init(grpc_call_server *g, const char *rpc_url, unsigned n_slots, char *err,
                          size_t errlen)
{
    int rv;
    pthread_mutex_init(&g->mu, NULL);
    g->n_slots = n_slots > 0 ? n_slots : 1;
    if ((g->slots = calloc(g->n_slots, sizeof *g->slots)) == NULL) {
        g->n_slots = 0;
        snprintf(err, errlen, "out of memory starting the gRPC listener (lower --queue)");
        return -1;
    }
    if ((rv = nng_req0_open(&g->req)) != 0) {
        snprintf(err, errlen, "cannot open the gRPC listener's socket: %s (check NNG)",
                 nng_strerror(rv));
        return -1;
    }
    g->req_open = true;
    /* A request is never sent twice: a resend would run a call twice. */
    if ((rv = nng_socket_set_ms(g->req, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_socket_set_size(g->req, NNG_OPT_RECVMAXSZ, GRPC_MAX_REPLY)) != 0 ||
        (rv = nng_dial(g->req, rpc_url, NULL, 0)) != 0) {
        snprintf(err, errlen, "cannot connect the gRPC listener to %s: %s (check NNG)", rpc_url,
                 nng_strerror(rv));
        return -1;
    }
    for (unsigned i = 0; i < g->n_slots; i++) {
        grpc_slot *j = &g->slots[i];
        j->srv = g;
        if ((rv = nng_aio_alloc(&j->aio, grpc_slot_cb, j)) != 0 ||
            (rv = nng_ctx_open(&j->ctx, g->req)) != 0) {
            snprintf(err, errlen, "cannot create the gRPC listener's contexts: %s (lower --queue)",
                     nng_strerror(rv));
            return -1;
        }
        j->next = g->free_slots;
        g->free_slots = j;
    }
    return 0;
}

void grpc_call_server_free(grpc_call_server *g)
{
    if (g->req_open) {
        nng_close(g->req);
        g->req_open = false;
    }
    for (unsigned i = 0; i < g->n_slots; i++) {
        if (g->slots[i].aio != NULL) {
            nng_aio_stop(g->slots[i].aio);
            nng_msg_free(g->slots[i].reply);
            nng_aio_free(g->slots[i].aio);
        }
    }
    free(g->slots);
    g->slots = NULL;
    free(g->allow_host);
    g->allow_host = NULL;
    pthread_mutex_destroy(&g->mu);
}

static grpc_slot *grpc_slot_take(grpc_call_server *g, bool watch)
{
    grpc_slot *j = g->free_slots;
    /* Watchers hold their slot for as long as they watch: at most half of the slots. */
    if (j == NULL || (watch && g->watchers + 1 > g->n_slots / 2)) {
        return NULL;
    }
    g->free_slots = j->next;
    j->next = NULL;
    j->watch = watch;
    g->watchers += watch ? 1 : 0;
    return j;
}

static void grpc_slot_give(grpc_slot *j)
{
    grpc_call_server *g = j->srv;
    g->watchers -= j->watch ? 1 : 0;
    j->watch = false;
    j->stream = NULL;
    j->state = SLOT_FREE;
    j->next = g->free_slots;
    g->free_slots = j;
}

/* --- answers on the stream ---------------------------------------------------------------- */

#define GRPC_NV(n, v)                                                                              \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE                 \
    }

/* grpc-message is percent-encoded: every byte outside printable ASCII, and '%'. */
static void grpc_percent(const char *in, char *out, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p != '\0' && k + 4 < n; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            out[k++] = (char)*p;
        } else {
            out[k++] = '%';
            out[k++] = hex[*p >> 4];
            out[k++] = hex[*p & 15];
        }
    }
    out[k] = '\0';
}

/* Hands nghttp2 the stream's framed messages; once they are out and the call is finished, the
 * trailers. */
static ssize_t grpc_read_out(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len,
                             uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)user;
    grpc_stream *s = src->ptr;
    size_t left = s->out_len - s->out_off;
    if (left > 0) {
        size_t n = left < len ? left : len;
        memcpy(buf, s->out + s->out_off, n);
        s->out_off += n;
        if (s->out_off == s->out_len) {
            s->out_off = s->out_len = 0;
        }
        return (ssize_t)n;
    }
    if (s->plain) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        return 0;
    }
    if (!s->finish) {
        return NGHTTP2_ERR_DEFERRED;
    }
    char status[16], message[768];
    snprintf(status, sizeof status, "%d", s->status);
    grpc_percent(s->message, message, sizeof message);
    nghttp2_nv trailers[] = {GRPC_NV("grpc-status", status), GRPC_NV("grpc-message", message)};
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    if (nghttp2_submit_trailer(h2, id, trailers, s->message[0] != '\0' ? 2 : 1) != 0) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
}

/* The response headers, with the stream's messages to follow. */
static int grpc_stream_open_response(grpc_stream *s)
{
    const char *request_id = s->request_id;
    if (s->headers_sent) {
        return 0;
    }
    nghttp2_nv nv[] = {GRPC_NV(":status", "200"), GRPC_NV("content-type", "application/grpc"),
                       GRPC_NV("grpc-accept-encoding", "identity"),
                       GRPC_NV("x-request-id", request_id != NULL ? request_id : "")};
    size_t n = request_id != NULL && request_id[0] != '\0' ? 4 : 3;
    nghttp2_data_provider dp = {.source.ptr = s, .read_callback = grpc_read_out};
    s->headers_sent = true;
    return nghttp2_submit_response(s->conn->h2, s->id, nv, n, &dp);
}

static void grpc_stream_release(grpc_stream *s);

/* Ends the call with status: trailers after the messages sent, or alone (trailers-only). The
 * stream's slot goes back. */
static void grpc_stream_finish(grpc_stream *s, int status, const char *message)
{
    if (s->phase == GRPC_PHASE_DONE) {
        return;
    }
    s->phase = GRPC_PHASE_DONE;
    s->deadline_ms = 0;
    grpc_stream_release(s);
    s->status = status;
    snprintf(s->message, sizeof s->message, "%s", message != NULL ? message : "");
    if (s->headers_sent) {
        s->finish = true;
        (void)nghttp2_session_resume_data(s->conn->h2, s->id);
        return;
    }
    char code[16], text[768];
    snprintf(code, sizeof code, "%d", status);
    grpc_percent(s->message, text, sizeof text);
    nghttp2_nv nv[6] = {GRPC_NV(":status", "200"), GRPC_NV("content-type", "application/grpc"),
                        GRPC_NV("grpc-accept-encoding", "identity"), GRPC_NV("grpc-status", code)};
    size_t n = 4;
    if (text[0] != '\0') {
        nv[n++] = (nghttp2_nv)GRPC_NV("grpc-message", text);
    }
    if (s->request_id[0] != '\0') {
        nv[n++] = (nghttp2_nv)GRPC_NV("x-request-id", s->request_id);
    }
    s->headers_sent = true;
    (void)nghttp2_submit_response(s->conn->h2, s->id, nv, n, NULL);
    /* A client still sending is told to stop (RFC 9113, 8.1) once the answer is out (grpc.c,
     * grpc_on_frame_send): what it sends meanwhile is not kept. */
    s->rst_after = !s->in_ended;
}

static void grpc_stream_refuse(grpc_stream *s, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void grpc_stream_refuse(grpc_stream *s, int status, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    grpc_stream_finish(s, status, msg);
}

/* A response message (5-byte prefix, then payload) queued for nghttp2. */
static int grpc_stream_message(grpc_stream *s, const uint8_t *payload, size_t len)
{
    size_t need = s->out_len + GRPC_PREFIX + len;
    uint8_t *b = realloc(s->out, need > 0 ? need : 1);
    if (b == NULL) {
        return -1;
    }
    s->out = b;
    b += s->out_len;
    b[0] = 0;
    b[1] = (uint8_t)(len >> 24), b[2] = (uint8_t)(len >> 16), b[3] = (uint8_t)(len >> 8),
    b[4] = (uint8_t)len;
    if (len > 0) {
        memcpy(b + GRPC_PREFIX, payload, len);
    }
    s->out_len = need;
    if (s->headers_sent) {
        (void)nghttp2_session_resume_data(s->conn->h2, s->id);
        return 0;
    }
    return grpc_stream_open_response(s) == 0 ? 0 : -1;
}

/* --- headers ------------------------------------------------------------------------------ */

grpc_stream *grpc_stream_new(grpc_conn *c, int32_t id)
{
    grpc_stream *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return NULL;
    }
    s->conn = c;
    s->id = id;
    s->phase = GRPC_PHASE_HEADERS;
    unsigned t = c->srv->header_timeout_s;
    s->deadline_ms = t > 0 ? grpc_call_now_ms() + (int64_t)t * 1000 : 0;
    return s;
}

int grpc_stream_header(grpc_stream *s, const uint8_t *name, size_t nlen, const uint8_t *value,
                       size_t vlen)
{
    static const char *const names[GRPC_H_COUNT] = {
        ":method",      ":path",        ":authority",    "content-type",
        "origin",       "grpc-timeout", "grpc-encoding", "authorization",
        "x-request-id", "traceparent",  "charter-tenant"};
    s->header_bytes += nlen + vlen + 32;
    if (s->header_bytes > GRPC_HEADER_BUDGET) {
        return -1;
    }
    for (int i = 0; i < GRPC_H_COUNT; i++) {
        if (strlen(names[i]) != nlen || memcmp(names[i], name, nlen) != 0) {
            continue;
        }
        char *v = malloc(vlen + 1);
        if (v == NULL) {
            return -1;
        }
        memcpy(v, value, vlen);
        v[vlen] = '\0';
        free(s->h[i]);
        s->h[i] = v;
        break;
    }
    return 0;
}

/* grpc-timeout ("<1 to 8 digits><H|M|S|m|u|n>") in milliseconds, rounded up and capped;
 * -1 when malformed. */
static long long grpc_timeout_ms(const char *v, int max_ms)
{
    size_t n = strlen(v);
    if (n < 2 || n > 9 || strspn(v, "0123456789") != n - 1) {
        return -1;
    }
    long long x = strtoll(v, NULL, 10), ms;
    switch (v[n - 1]) {
    case 'H':
        ms = x * 3600000LL;
        break;
    case 'M':
        ms = x * 60000LL;
        break;
    case 'S':
        ms = x * 1000LL;
        break;
    case 'm':
        ms = x;
        break;
    case 'u':
        ms = (x + 999) / 1000;
        break;
    case 'n':
        ms = (x + 999999) / 1000000;
        break;
    default:
        return -1;
    }
    return ms > max_ms ? max_ms : ms < 1 ? 1 : ms;
}

static bool grpc_content_type_ok(const char *ct)
{
    static const char base[] = "application/grpc";
    if (ct == NULL || strncasecmp(ct, base, sizeof base - 1) != 0) {
        return false;
    }
    const char *rest = ct + sizeof base - 1;
    return *rest == '\0' || *rest == ';' || strncasecmp(rest, "+proto", 6) == 0;
}

/* A request that is no gRPC call at all (another method or content type): answered with an
 * HTTP status, as the gRPC protocol asks (415 for a content type). */
static void grpc_stream_not_grpc(grpc_stream *s, const char *status)
{
    static const char body[] = "charterd serves gRPC (application/grpc) over HTTP/2; Connect, "
                               "the console and /healthz over HTTP/1.1 on the same port\n";
    nghttp2_nv nv[] = {GRPC_NV(":status", status),
                       GRPC_NV("content-type", "text/plain; charset=utf-8")};
    s->phase = GRPC_PHASE_DONE;
    s->headers_sent = true;
    s->out = malloc(sizeof body);
    if (s->out != NULL) {
        memcpy(s->out, body, sizeof body - 1);
        s->out_len = sizeof body - 1;
    }
    s->plain = true;
    nghttp2_data_provider dp = {.source.ptr = s, .read_callback = grpc_read_out};
    (void)nghttp2_submit_response(s->conn->h2, s->id, nv, 2, s->out != NULL ? &dp : NULL);
}

/* The checks that need no message, in the order the answer names the first failure; 0 when
 * the call is accepted (it then holds a slot). */
static int grpc_stream_check(grpc_stream *s)
{
    grpc_call_server *g = s->conn->srv;
    const char *authority = s->h[GRPC_H_AUTHORITY], *origin = s->h[GRPC_H_ORIGIN];
    if (!hostport_names_server(authority, g->listen_host, g->allow_host)) {
        grpc_stream_refuse(s, RPC_PERMISSION_DENIED,
                           ":authority \"%.64s\" is not this server (call it by a loopback name, "
                           "or start charterd with --http-allow-host NAME)",
                           authority != NULL ? authority : "");
        return -1;
    }
    if (origin != NULL) {
        grpc_stream_refuse(s, RPC_PERMISSION_DENIED, "cross-origin calls are refused");
        return -1;
    }
    const char *path = s->h[GRPC_H_PATH];
    if (dispatch_method(path) == NULL) {
        grpc_stream_refuse(s, RPC_UNIMPLEMENTED, "unknown method \"%.128s\"",
                           path != NULL ? path : "");
        return -1;
    }
    s->shape = descriptors_shape_of(path);
    if (s->shape == DESCRIPTORS_CLIENT_STREAM) {
        grpc_stream_refuse(s, RPC_UNIMPLEMENTED, "%s: client streams are not served", path);
        return -1;
    }
    if (s->h[GRPC_H_TIMEOUT] != NULL) {
        long long t = grpc_timeout_ms(s->h[GRPC_H_TIMEOUT], g->max_timeout_ms);
        if (t < 0) {
            grpc_stream_refuse(s, RPC_INVALID_ARGUMENT,
                               "grpc-timeout must be 1 to 8 digits and a unit (H M S m u n)");
            return -1;
        }
        s->ends_ms = grpc_call_now_ms() + t;
    }
    /* A token that can never authenticate is refused before a byte of the message is kept. */
    const char *why = NULL;
    int pre = dispatch_precheck(g->auth, path, s->h[GRPC_H_AUTHORIZATION], &why);
    if (pre != RPC_OK) {
        grpc_stream_refuse(s, pre, "%s", why);
        return -1;
    }
    if (g->stopping) {
        grpc_stream_refuse(s, RPC_UNAVAILABLE,
                           "server is shutting down (retry on another charterd)");
        return -1;
    }
    bool watch = s->shape == DESCRIPTORS_SERVER_STREAM;
    if ((s->slot = grpc_slot_take(g, watch)) == NULL) {
        grpc_stream_refuse(s, RPC_RESOURCE_EXHAUSTED,
                           watch ? "server busy: %u streams watching (retry later)"
                                 : "server busy: %u gRPC calls in progress (retry later)",
                           watch ? g->watchers : g->n_slots);
        return -1;
    }
    s->slot->stream = s;
    return 0;
}

void grpc_stream_headers_done(grpc_stream *s)
{
    if (s->phase != GRPC_PHASE_HEADERS) {
        return; /* trailers of the client: nothing is read from them */
    }
    const char *m = s->h[GRPC_H_METHOD];
    if (m == NULL || strcmp(m, "POST") != 0) {
        grpc_stream_not_grpc(s, "405");
        return;
    }
    if (!grpc_content_type_ok(s->h[GRPC_H_CONTENT_TYPE])) {
        grpc_stream_not_grpc(s, "415");
        return;
    }
    if (grpc_stream_check(s) != 0) {
        return;
    }
    s->phase = GRPC_PHASE_BODY;
    unsigned t = s->conn->srv->body_timeout_s;
    s->deadline_ms = t > 0 ? grpc_call_now_ms() + (int64_t)t * 1000 : 0;
}

/* --- envelopes ---------------------------------------------------------------------------- */

/* The slot goes back (or, with an envelope still out, is given back when its answer comes). */
static void grpc_stream_release(grpc_stream *s)
{
    if (s->slot == NULL) {
        return;
    }
    if (s->in_flight) {
        s->slot->stream = NULL;
    } else {
        grpc_slot_give(s->slot);
    }
    s->slot = NULL;
}

/* The RpcRequest of one message of the stream, sent on its slot: the metadata the call
 * carries (and, for a Watch, the status it saw last), timeout_ms its deadline. */
static int grpc_stream_send(grpc_stream *s, const uint8_t *msg, size_t len, uint32_t timeout_ms)
{
    static const struct {
        grpc_header h;
        const char *key;
    } meta_of[] = {{GRPC_H_AUTHORIZATION, "authorization"},
                   {GRPC_H_REQUEST_ID, "x-request-id"},
                   {GRPC_H_TRACEPARENT, "traceparent"},
                   {GRPC_H_TENANT, "tenant"}};
    enum { N_META = sizeof meta_of / sizeof meta_of[0] + 1 };
    Charter__V1__RpcRequest env = CHARTER__V1__RPC_REQUEST__INIT;
    Charter__V1__RpcRequest__MetadataEntry entries[N_META];
    Charter__V1__RpcRequest__MetadataEntry *meta[N_META];
    env.method = s->h[GRPC_H_PATH];
    env.payload.data = (uint8_t *)msg;
    env.payload.len = len;
    env.metadata = meta;
    env.timeout_ms = timeout_ms;
    for (size_t i = 0; i < N_META; i++) {
        bool last = i == N_META - 1;
        const char *v =
            last ? (s->watch_last[0] != '\0' ? s->watch_last : NULL) : s->h[meta_of[i].h];
        if (v == NULL) {
            continue;
        }
        charter__v1__rpc_request__metadata_entry__init(&entries[env.n_metadata]);
        entries[env.n_metadata].key = (char *)(last ? "grpc-health-last" : meta_of[i].key);
        entries[env.n_metadata].value = (char *)v;
        meta[env.n_metadata] = &entries[env.n_metadata];
        env.n_metadata++;
    }
    nng_msg *m = NULL;
    if (nng_msg_alloc(&m, charter__v1__rpc_request__get_packed_size(&env)) != 0) {
        return -1;
    }
    charter__v1__rpc_request__pack(&env, nng_msg_body(m));
    grpc_slot *j = s->slot;
    j->state = SLOT_SEND;
    s->in_flight = true;
    s->conn->srv->busy++;
    uint32_t t = timeout_ms > 0 ? timeout_ms : (uint32_t)s->conn->srv->max_timeout_ms;
    nng_aio_set_timeout(j->aio, (nng_duration)t + GRPC_DEADLINE_MARGIN_MS);
    nng_aio_set_msg(j->aio, m);
    nng_ctx_send(j->ctx, j->aio);
    return 0;
}

/* The length a message's prefix declares, with its compressed flag. */
static uint32_t grpc_declared(const uint8_t *p, bool *compressed)
{
    *compressed = p[0] != 0;
    return (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
}

/* Sends the first whole message buffered, when the stream has none at the transport. Returns
 * 1 when one went, 0 when none is whole yet, -1 when the stream was answered. */
static int grpc_stream_next(grpc_stream *s)
{
    bool compressed = false;
    if (s->in_flight || s->in_len < GRPC_PREFIX) {
        return 0;
    }
    size_t n = grpc_declared(s->in, &compressed);
    if (s->in_len < GRPC_PREFIX + n) {
        return 0;
    }
    /* What is left of the caller's deadline (grpc-timeout counts from the call's start). */
    int64_t left = s->ends_ms > 0 ? s->ends_ms - grpc_call_now_ms() : 0;
    if (s->ends_ms > 0 && left <= 0) {
        grpc_stream_finish(s, RPC_DEADLINE_EXCEEDED, "the call's deadline passed");
        return -1;
    }
    if (grpc_stream_send(s, s->in + GRPC_PREFIX, n, (uint32_t)left) != 0) {
        grpc_stream_finish(s, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return -1;
    }
    memmove(s->in, s->in + GRPC_PREFIX + n, s->in_len - GRPC_PREFIX - n);
    s->in_len -= GRPC_PREFIX + n;
    return 1;
}

/* A Watch's next long poll, with the rest of its deadline. */
static void grpc_watch_poll(grpc_stream *s)
{
    int64_t now = grpc_call_now_ms();
    int64_t left = s->ends_ms > 0 ? s->ends_ms - now : s->conn->srv->max_timeout_ms;
    if (left <= 0) {
        grpc_stream_finish(s, RPC_DEADLINE_EXCEEDED, "the call's deadline passed");
        return;
    }
    if (left > s->conn->srv->max_timeout_ms) {
        left = s->conn->srv->max_timeout_ms;
    }
    s->deadline_ms = 0;
    if (grpc_stream_send(s, s->request, s->request_len, (uint32_t)left) != 0) {
        grpc_stream_finish(s, RPC_RESOURCE_EXHAUSTED, "out of memory");
    }
}

/* --- messages in -------------------------------------------------------------------------- */

/* The prefix of the message at the head of the buffer, once it is in: refused at once when it
 * declares more than max_message bytes or a compressed message. Returns 0 or -1 (answered). */
static int grpc_stream_check_prefix(grpc_stream *s)
{
    grpc_call_server *g = s->conn->srv;
    bool compressed = false;
    if (s->in_len < GRPC_PREFIX) {
        return 0;
    }
    uint32_t n = grpc_declared(s->in, &compressed);
    if (compressed) {
        grpc_stream_refuse(s, RPC_UNIMPLEMENTED,
                           "compressed messages are not accepted (grpc-encoding identity)");
        return -1;
    }
    if (n > g->max_message) {
        grpc_stream_refuse(s, RPC_RESOURCE_EXHAUSTED,
                           "request of %u bytes exceeds the %zu byte limit", n, g->max_message);
        return -1;
    }
    return 0;
}

void grpc_stream_data(grpc_stream *s, const uint8_t *data, size_t len)
{
    grpc_call_server *g = s->conn->srv;
    if (s->phase != GRPC_PHASE_BODY || len == 0) {
        return; /* refused, answered or not yet accepted: nothing is kept */
    }
    if (len > g->max_message + GRPC_PREFIX - s->in_len) {
        grpc_stream_refuse(s, RPC_RESOURCE_EXHAUSTED, "request body exceeds the %zu byte limit",
                           g->max_message);
        return;
    }
    if (s->in_len + len > s->in_cap) {
        size_t cap = s->in_cap > 0 ? s->in_cap : 4096;
        while (cap < s->in_len + len) {
            cap *= 2;
        }
        uint8_t *b = realloc(s->in, cap);
        if (b == NULL) {
            grpc_stream_refuse(s, RPC_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
        s->in = b;
        s->in_cap = cap;
    }
    memcpy(s->in + s->in_len, data, len);
    s->in_len += len;
    if (grpc_stream_check_prefix(s) != 0) {
        return;
    }
    if (s->shape == DESCRIPTORS_BIDI_STREAM && !s->held) {
        (void)grpc_stream_next(s);
    }
}

/* A unary call or a Watch has its one message: sent on. */
static void grpc_stream_single(grpc_stream *s)
{
    bool compressed = false;
    size_t n = s->in_len >= GRPC_PREFIX ? grpc_declared(s->in, &compressed) : 0;
    if (s->in_len < GRPC_PREFIX || s->in_len != GRPC_PREFIX + n) {
        grpc_stream_refuse(s, RPC_INVALID_ARGUMENT,
                           "%s takes exactly one request message (got %zu bytes)",
                           s->h[GRPC_H_PATH], s->in_len);
        return;
    }
    s->phase = GRPC_PHASE_CALL;
    s->deadline_ms = 0;
    if (s->shape == DESCRIPTORS_SERVER_STREAM) {
        s->request = s->in;
        s->request_len = n + GRPC_PREFIX;
        s->in = NULL;
        s->in_len = s->in_cap = 0;
        memmove(s->request, s->request + GRPC_PREFIX, n);
        s->request_len = n;
        grpc_watch_poll(s);
        return;
    }
    if (grpc_stream_next(s) < 0) {
        return;
    }
}

/* A stream each way, after an answer or the client's end: the next whole message goes, or
 * the stream ends once the client has and nothing is left. */
static void grpc_bidi_continue(grpc_stream *s)
{
    unsigned t = s->conn->srv->body_timeout_s;
    if (s->phase != GRPC_PHASE_BODY || s->in_flight) {
        return;
    }
    if (s->out_len > 0) {
        /* The next message waits until nghttp2 has taken the last answer (it holds it back
         * while the client's window is shut): answers queued here for a client that sends and
         * never reads would grow without bound. The client has the body deadline to take it. */
        s->held = true;
        s->deadline_ms = t > 0 ? grpc_call_now_ms() + (int64_t)t * 1000 : 0;
        return;
    }
    if (grpc_stream_next(s) != 0) {
        return;
    }
    if (!s->in_ended) {
        /* The next message is due within the body deadline of this answer. */
        s->deadline_ms = t > 0 ? grpc_call_now_ms() + (int64_t)t * 1000 : 0;
    } else if (s->in_len == 0) {
        grpc_stream_finish(s, RPC_OK, "");
    } else {
        grpc_stream_refuse(s, RPC_INVALID_ARGUMENT, "the stream ended inside a message");
    }
}

void grpc_stream_drained(grpc_stream *s)
{
    if (!s->held || s->out_len > 0) {
        return;
    }
    s->held = false;
    grpc_bidi_continue(s);
}

void grpc_stream_end(grpc_stream *s)
{
    s->in_ended = true;
    if (s->phase != GRPC_PHASE_BODY) {
        return;
    }
    if (s->shape != DESCRIPTORS_BIDI_STREAM) {
        grpc_stream_single(s);
        return;
    }
    grpc_bidi_continue(s);
}

/* --- answers ------------------------------------------------------------------------------ */

/* A Watch's answer: sent when its status differs from the last one sent; then the next poll,
 * at once after a change, GRPC_WATCH_PAUSE_MS later after none. */
static void grpc_watch_answer(grpc_stream *s, const ProtobufCBinaryData *payload)
{
    Grpc__Health__V1__HealthCheckResponse *h =
        grpc__health__v1__health_check_response__unpack(NULL, payload->len, payload->data);
    const ProtobufCEnumValue *v =
        h != NULL ? protobuf_c_enum_descriptor_get_value(
                        &grpc__health__v1__health_check_response__serving_status__descriptor,
                        (int)h->status)
                  : NULL;
    if (h != NULL) {
        grpc__health__v1__health_check_response__free_unpacked(h, NULL);
    }
    if (v == NULL) {
        grpc_stream_finish(s, RPC_INTERNAL, "the answer is not a HealthCheckResponse");
        return;
    }
    bool changed = strcmp(v->name, s->watch_last) != 0;
    if (changed) {
        snprintf(s->watch_last, sizeof s->watch_last, "%s", v->name);
        if (grpc_stream_message(s, payload->data, payload->len) != 0) {
            grpc_stream_finish(s, RPC_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
    }
    if (changed) {
        grpc_watch_poll(s);
    } else {
        s->deadline_ms = grpc_call_now_ms() + GRPC_WATCH_PAUSE_MS;
    }
}

/* The call's request id, from the answer's metadata, into out (129 bytes). */
static void grpc_request_id(const Charter__V1__RpcResponse *r, char *out)
{
    out[0] = '\0';
    for (size_t i = 0; i < r->n_metadata; i++) {
        if (r->metadata[i]->key != NULL && strcmp(r->metadata[i]->key, "x-request-id") == 0 &&
            r->metadata[i]->value != NULL) {
            snprintf(out, 129, "%s", r->metadata[i]->value);
        }
    }
}

static void grpc_stream_answer(grpc_stream *s, const Charter__V1__RpcResponse *r)
{
    grpc_request_id(r, s->request_id);
    if (r->code != RPC_OK) {
        grpc_stream_finish(s, r->code, r->message);
        return;
    }
    switch (s->shape) {
    case DESCRIPTORS_SERVER_STREAM:
        grpc_watch_answer(s, &r->payload);
        return;
    case DESCRIPTORS_BIDI_STREAM:
        if (grpc_stream_message(s, r->payload.data, r->payload.len) != 0) {
            grpc_stream_finish(s, RPC_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
        grpc_bidi_continue(s);
        return;
    default:
        if (grpc_stream_message(s, r->payload.data, r->payload.len) != 0) {
            grpc_stream_finish(s, RPC_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
        grpc_stream_finish(s, RPC_OK, "");
    }
}

/* One slot's answer, for its stream (if it is still there). */
static void grpc_slot_answered(grpc_slot *j)
{
    grpc_stream *s = j->stream;
    nng_msg *m = j->reply;
    int rv = j->rv;
    j->reply = NULL;
    j->srv->busy--;
    if (s == NULL) {
        nng_msg_free(m);
        grpc_slot_give(j);
        return;
    }
    s->in_flight = false;
    Charter__V1__RpcResponse *r =
        m != NULL ? charter__v1__rpc_response__unpack(NULL, nng_msg_len(m), nng_msg_body(m)) : NULL;
    nng_msg_free(m);
    if (rv == NNG_ETIMEDOUT) {
        grpc_stream_finish(s, RPC_DEADLINE_EXCEEDED, "no answer within the call's deadline");
    } else if (rv != 0) {
        grpc_stream_finish(s, RPC_UNAVAILABLE, "the server stopped before answering");
    } else if (r == NULL) {
        grpc_stream_finish(s, RPC_INTERNAL, "the answer is not an RpcResponse");
    } else {
        grpc_stream_answer(s, r);
    }
    if (r != NULL) {
        charter__v1__rpc_response__free_unpacked(r, NULL);
    }
}

void grpc_call_server_answers(grpc_call_server *g)
{
    pthread_mutex_lock(&g->mu);
    grpc_slot *list = g->answered;
    g->answered = NULL;
    pthread_mutex_unlock(&g->mu);
    while (list != NULL) {
        grpc_slot *j = list;
        list = j->next;
        j->next = NULL;
        grpc_slot_answered(j);
    }
}

/* --- deadlines and the end ---------------------------------------------------------------- */

void grpc_stream_tick(grpc_stream *s, int64_t now)
{
    if (s->deadline_ms == 0 || now < s->deadline_ms) {
        return;
    }
    s->deadline_ms = 0;
    if (s->phase == GRPC_PHASE_CALL) {
        grpc_watch_poll(s); /* a Watch's pause is over */
        return;
    }
    if (s->phase == GRPC_PHASE_DONE) {
        return;
    }
    if (s->held) {
        /* An answer the client did not take within the body deadline: its trailers could not
         * pass the answer either, so the stream is reset. */
        log_refusal(RPC_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED",
                    "HTTP/2 stream reset: its client did not take an answer within %u s "
                    "(--http-body-timeout)",
                    s->conn->srv->body_timeout_s);
        s->phase = GRPC_PHASE_DONE;
        grpc_stream_release(s);
        (void)nghttp2_submit_rst_stream(s->conn->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
        return;
    }
    bool headers = s->phase == GRPC_PHASE_HEADERS;
    grpc_call_server *g = s->conn->srv;
    unsigned limit = headers ? g->header_timeout_s : g->body_timeout_s;
    log_refusal(RPC_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED",
                "HTTP/2 stream reset: its request's %s did not arrive within %u s "
                "(--http-%s-timeout)",
                headers ? "headers" : "body", limit, headers ? "header" : "body");
    if (headers) {
        s->phase = GRPC_PHASE_DONE;
        (void)nghttp2_submit_rst_stream(s->conn->h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
        return;
    }
    grpc_stream_refuse(s, RPC_DEADLINE_EXCEEDED,
                       "the request's messages did not arrive within %u s", limit);
}

void grpc_stream_closed(grpc_stream *s)
{
    grpc_stream_release(s);
    for (int i = 0; i < GRPC_H_COUNT; i++) {
        free(s->h[i]);
    }
    free(s->in);
    free(s->out);
    free(s->request);
    free(s);
}
