/*
 * http.c - Connect unary calls over libmicrohttpd, handed to the transport (see http.h).
 *
 * libmicrohttpd calls the access handler with the headers first (*con_cls NULL), then with each
 * piece of the body, then once more with none. Everything that needs no body is decided on the
 * first call (Host, Origin, method, content type and encoding, Connect-Timeout-Ms, the token,
 * the declared length, a free job), so a refused request's body is never read: the answer is
 * queued at once and libmicrohttpd closes the connection after it. A body is kept up to max_message
 * bytes (a chunked one is counted as it arrives). On the last call the JSON becomes the envelope,
 * the connection is suspended and the envelope sent on the job's nng_ctx (a fixed pool of jobs on
 * one req0 socket dialed to the transport over inproc, as in NNG's demo/rest/server.c); the
 * job's callback stores the answer and resumes the connection, and the handler's next call
 * queues it. No libmicrohttpd thread waits for a worker. Deadlines of headers and body and the
 * descriptor budget are http_guard.c's.
 */
#include "rpc/http.h"

#include <ctype.h>
#include <jansson.h>
#include <microhttpd.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "rpc/call.h"
#include "core/hostport.h"
#include "charter.pb-c.h"
#include "rpc/dispatch.h"
#include "rpc/http_guard.h"
#include "rpc/http_port.h"
#include "rpc/tls_io.h"
#include "core/log.h"
#include "core/metrics.h"
#include "protojson.h"
#include "unpack_budget.h"
#include "core/invariant.h"

/* Bytes the JSON decoder may allocate per byte of body, and the floor (as dispatch.c). */
#define HTTP_BUDGET_FACTOR 8
#define HTTP_BUDGET_MIN ((size_t)1024 * 1024)
/* Largest RpcResponse taken from the transport (a RunView can be large). */
#define HTTP_MAX_REPLY ((size_t)64 * 1024 * 1024)
/* Time on top of a call's deadline before the listener gives up on the worker's answer. */
#define HTTP_DEADLINE_MARGIN_MS 5000
#define HTTP_HOST_MAX 256
/* libmicrohttpd's memory per connection, bytes: the request line and headers must fit in it
 * (a larger head is answered 431 by libmicrohttpd), and body bytes pass through it. */
#define HTTP_CONNECTION_MEMORY ((size_t)64 * 1024)
/* Descriptors kept free for the rest of charterd besides those open when the listener starts:
 * clients of the NNG listener, database reconnects, the embedded redis-server's pipes. */
#define HTTP_FD_RESERVE 256
/* A request refused on its headers with a body of at most this many bytes (or a chunked one)
 * has the body drained, never kept, before the answer; a larger one is not read at all. */
#define HTTP_DRAIN_MAX ((size_t)16 * 1024)
/* The cap is not lowered below this to fit the open file limit; below it startup stops. */
#define HTTP_MIN_CONNECTIONS 16

typedef enum { JOB_FREE = 0, JOB_SEND, JOB_RECV } http_job_state;

typedef struct http_req http_req;

typedef struct http_job {
    http_server *s;
    nng_ctx ctx;
    nng_aio *aio;
    http_req *req; /* the suspended request waiting for this job's answer, or NULL */
    http_job_state state;
    struct http_job *next;
} http_job;

/* An answer to queue: status and a response libmicrohttpd copies from (NULL: out of memory,
 * the connection is dropped). */
typedef struct {
    unsigned status;
    struct MHD_Response *res;
} http_answer;

typedef enum { REQ_CALL, REQ_HEALTHZ, REQ_READYZ, REQ_METRICS, REQ_CONSOLE } http_req_kind;

/* One request, from its headers to its completion (MHD_OPTION_NOTIFY_COMPLETED frees it). */
struct http_req {
    http_server *s;
    struct MHD_Connection *mc;
    http_req_kind kind;
    char path[256];
    const ProtobufCMethodDescriptor *md; /* REQ_CALL: the routed method */
    http_job *job;                       /* taken on the headers; NULL once sent */
    uint32_t timeout_ms;                 /* Connect-Timeout-Ms, capped; 0: none */
    char *body;
    size_t len, cap;
    bool over;      /* a chunked body passed max_message: the rest is counted, not kept */
    size_t dropped; /* bytes counted past max_message */
    bool answered;  /* the job's callback set answer and resumed the connection */
    bool refused;   /* refused on the headers: answer goes out once the body is drained */
    bool owed;      /* counted in the server's owed until the request completes */
    http_answer answer;
};

struct http_server {
    struct MHD_Daemon *d;
    http_guard *guard;
    http_port *port; /* the listening socket, gRPC over HTTP/2, TLS */
    SSL_CTX *tls;    /* --http-cert and --http-key, or NULL */
    nng_socket req;
    bool req_open;
    http_job *jobs;
    unsigned n_jobs;
    http_job *free_jobs;
    unsigned taken; /* jobs out of the free list */
    unsigned owed;  /* requests that took a job and whose answer has not gone out yet */
    unsigned sent;  /* jobs whose call is at the transport (their connection suspended) */
    bool stopping;  /* http_stop began: new calls are answered 503 "shutting down" */
    pthread_mutex_t mu;
    pthread_cond_t idle_cv;
    size_t max_message;
    int max_timeout_ms;
    const auth_tokens *auth;
    char listen_host[HTTP_HOST_MAX];
    char address[HTTP_HOST_MAX + 8]; /* host:port as bound (the system's port for port 0) */
    char *allow_host;
};

/* --- the Connect error vocabulary --------------------------------------------------------- */

/* Connect's name and HTTP status for a gRPC status number (connectrpc.com/docs/protocol,
 * "Error Codes"). */
static const char *http_connect_code(int code, unsigned *status)
{
    static const struct {
        const char *name;
        unsigned status;
    } t[] = {
        {"ok", 200},
        {"canceled", 499},
        {"unknown", 500},
        {"invalid_argument", 400},
        {"deadline_exceeded", 504},
        {"not_found", 404},
        {"already_exists", 409},
        {"permission_denied", 403},
        {"resource_exhausted", 429},
        {"failed_precondition", 400},
        {"aborted", 409},
        {"out_of_range", 400},
        {"unimplemented", 501},
        {"internal", 500},
        {"unavailable", 503},
        {"data_loss", 500},
        {"unauthenticated", 401},
    };
    if (code < 0 || (size_t)code >= sizeof t / sizeof t[0]) {
        code = 2;
    }
    *status = t[code].status;
    return t[code].name;
}

/* --- answers ------------------------------------------------------------------------------ */

/* A response with a copy of len bytes of body and the headers every answer carries; NULL when
 * out of memory. */
static struct MHD_Response *http_response(const char *type, const char *body, size_t len)
{
    struct MHD_Response *res =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (res == NULL) {
        return NULL;
    }
    if (MHD_add_response_header(res, "Content-Type", type) != MHD_YES ||
        MHD_add_response_header(res, "Cache-Control", "no-store") != MHD_YES ||
        MHD_add_response_header(res, "X-Content-Type-Options", "nosniff") != MHD_YES) {
        MHD_destroy_response(res);
        return NULL;
    }
    return res;
}

static http_answer http_json(unsigned status, const char *body)
{
    http_answer a = {status, http_response("application/json", body, strlen(body))};
    return a;
}

/* A Connect error body for gRPC status code with message. */
static http_answer http_error_text(int code, const char *message)
{
    unsigned status = 500;
    const char *name = http_connect_code(code, &status);
    json_t *msg = json_string(message != NULL ? message : "");
    if (msg == NULL) {
        msg = json_string("(the message is not valid UTF-8)");
    }
    json_t *o = json_object();
    char *text = NULL;
    if (o != NULL && msg != NULL && json_object_set_new(o, "code", json_string(name)) == 0 &&
        json_object_set(o, "message", msg) == 0) {
        text = json_dumps(o, JSON_COMPACT);
    }
    json_decref(msg);
    json_decref(o);
    http_answer a = http_json(status, text != NULL ? text : "{\"code\":\"internal\"}");
    free(text);
    return a;
}

static http_answer http_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static http_answer http_error(int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return http_error_text(code, msg);
}

/* Queues a and releases the caller's reference to its response. A NULL response (out of
 * memory) drops the connection. */
static enum MHD_Result http_queue(struct MHD_Connection *mc, http_answer a)
{
    if (a.res == NULL) {
        return MHD_NO;
    }
    enum MHD_Result rc = MHD_queue_response(mc, a.status, a.res);
    MHD_destroy_response(a.res);
    return rc;
}

/* --- Host and Origin ---------------------------------------------------------------------- */

/* A Host header names this server (hostport_names_server): anything else may be a
 * DNS-rebinding page. */
static bool http_host_ok(const http_server *s, const char *host)
{
    return hostport_names_server(host, s->listen_host, s->allow_host) != 0;
}

/* A browser's Origin must be this server itself: no page of another origin may call. */
static bool http_origin_ok(const char *origin, const char *host)
{
    if (origin == NULL) {
        return true;
    }
    return host != NULL && strncasecmp(origin, "http://", 7) == 0 &&
           strcasecmp(origin + 7, host) == 0;
}

static bool http_json_content_type(const char *ct)
{
    if (ct == NULL) {
        return false;
    }
    size_t n = strlen("application/json");
    if (strncasecmp(ct, "application/json", n) != 0) {
        return false;
    }
    const char *rest = ct + n;
    while (*rest == ' ') {
        rest++;
    }
    return *rest == '\0' || *rest == ';';
}

static const char *http_header(struct MHD_Connection *mc, const char *name)
{
    return MHD_lookup_connection_value(mc, MHD_HEADER_KIND, name);
}

/* The declared body length: 0 with *known false for a chunked body, 0 with *known true for
 * none. */
static unsigned long long http_declared_length(struct MHD_Connection *mc, bool *known)
{
    const char *te = http_header(mc, "Transfer-Encoding");
    const char *cl = http_header(mc, "Content-Length");
    *known = te == NULL;
    if (te != NULL || cl == NULL) {
        return 0;
    }
    /* libmicrohttpd refused a malformed Content-Length before the handler ran. */
    return strtoull(cl, NULL, 10);
}

/* --- jobs --------------------------------------------------------------------------------- */

/* A free job, or NULL when every one is taken or the listener is stopping (*stopping says
 * which). */
static http_job *http_job_take(http_server *s, bool *stopping)
{
    pthread_mutex_lock(&s->mu);
    *stopping = s->stopping;
    http_job *j = s->stopping ? NULL : s->free_jobs;
    if (j != NULL) {
        s->free_jobs = j->next;
        s->taken++;
    }
    pthread_mutex_unlock(&s->mu);
    return j;
}

/* Back to the free list; sent says the job's call had gone to the transport. */
static void http_job_give(http_job *j, bool sent)
{
    http_server *s = j->s;
    j->state = JOB_FREE;
    j->req = NULL;
    pthread_mutex_lock(&s->mu);
    j->next = s->free_jobs;
    s->free_jobs = j;
    s->taken--;
    if (sent) {
        s->sent--;
    }
    pthread_cond_broadcast(&s->idle_cv);
    pthread_mutex_unlock(&s->mu);
}

/* Counts r among the requests whose answer is owed (it took a job), or settles it. http_stop
 * waits for the owed answers to go out, not only for the calls to come back. */
static void http_owe(http_req *r, bool owe)
{
    if (r->owed == owe) {
        return;
    }
    http_server *s = r->s;
    r->owed = owe;
    pthread_mutex_lock(&s->mu);
    if (owe) {
        s->owed++;
    } else {
        s->owed--;
        pthread_cond_broadcast(&s->idle_cv);
    }
    pthread_mutex_unlock(&s->mu);
}

/* The answer of the transport as an HTTP answer. */
static http_answer http_reply(const ProtobufCMethodDescriptor *md, nng_msg *m)
{
    char err[256];
    Charter__V1__RpcResponse *r =
        charter__v1__rpc_response__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
    if (r == NULL) {
        return http_error_text(RPC_INTERNAL, "the answer is not an RpcResponse");
    }
    /* The call's request id (reply metadata) as the X-Request-Id response header. */
    char request_id[129] = "";
    for (size_t i = 0; i < r->n_metadata; i++) {
        if (r->metadata[i]->key != NULL && strcmp(r->metadata[i]->key, "x-request-id") == 0 &&
            r->metadata[i]->value != NULL) {
            snprintf(request_id, sizeof request_id, "%s", r->metadata[i]->value);
        }
    }
    http_answer a;
    if (r->code != RPC_OK) {
        a = http_error_text(r->code, r->message);
        charter__v1__rpc_response__free_unpacked(r, NULL);
    } else {
        ProtobufCMessage *out =
            protobuf_c_message_unpack(md->output, NULL, r->payload.len, r->payload.data);
        charter__v1__rpc_response__free_unpacked(r, NULL);
        if (out == NULL) {
            return http_error_text(RPC_INTERNAL,
                                   "the answer's payload is not its response message");
        }
        char *text = NULL;
        int rc = protojson_encode_text(out, NULL, &text, err, sizeof err);
        protobuf_c_message_free_unpacked(out, NULL);
        if (rc != PROTOJSON_OK) {
            return http_error_text(RPC_INTERNAL, err);
        }
        a = http_json(200, text);
        free(text);
    }
    if (a.res != NULL && request_id[0] != '\0' &&
        MHD_add_response_header(a.res, "X-Request-Id", request_id) != MHD_YES) {
        MHD_destroy_response(a.res);
        a.res = NULL;
    }
    return a;
}

/* /readyz from the answer of Health/Check: ready when the database answered and the query
 * library it holds is the one this charterd needs (Health reports its version then). */
static http_answer http_readiness(nng_msg *m)
{
    Charter__V1__RpcResponse *r =
        m != NULL ? charter__v1__rpc_response__unpack(NULL, nng_msg_len(m), nng_msg_body(m)) : NULL;
    Charter__V1__HealthResponse *h = NULL;
    if (r != NULL && r->code == RPC_OK) {
        h = charter__v1__health_response__unpack(NULL, r->payload.len, r->payload.data);
    }
    bool db = h != NULL && h->database != NULL && strcmp(h->database, "up") == 0;
    bool lib = db && h->library_version != NULL && h->library_version[0] != '\0';
    char body[256];
    if (h == NULL) {
        /* The check itself was not served (busy, past its deadline): nothing is known. */
        snprintf(body, sizeof body,
                 "{\"ready\":false,\"database\":\"unknown\",\"queryLibrary\":\"unknown\"}");
    } else {
        snprintf(body, sizeof body, "{\"ready\":%s,\"database\":\"%s\",\"queryLibrary\":\"%s\"}",
                 db && lib ? "true" : "false", db ? "up" : "down",
                 /* with the database down, whether it holds the library is not known */
                 lib  ? "loaded"
                 : db ? "missing"
                      : "unknown");
    }
    if (h != NULL) {
        charter__v1__health_response__free_unpacked(h, NULL);
    }
    if (r != NULL) {
        charter__v1__rpc_response__free_unpacked(r, NULL);
    }
    return http_json(db && lib ? 200 : 503, body);
}

/* Hands a to the suspended request and resumes its connection: the handler's next call
 * queues it. The request is libmicrohttpd's again from the resume on; the job is given back
 * after it. */
static void http_job_answer(http_job *j, http_answer a)
{
    http_req *r = j->req;
    INVARIANT(r != NULL && r->job == NULL && !r->answered);
    r->answer = a;
    r->answered = true;
    MHD_resume_connection(r->mc);
    http_job_give(j, true);
}

static void http_job_cb(void *arg)
{
    http_job *j = arg;
    int rv = nng_aio_result(j->aio);
    bool readyz = j->req->kind == REQ_READYZ;
    if (j->state == JOB_SEND) {
        if (rv != 0) {
            nng_msg_free(nng_aio_get_msg(j->aio));
            nng_aio_set_msg(j->aio, NULL);
            http_job_answer(j, readyz ? http_json(503, "{\"ready\":false}")
                                      : http_error_text(RPC_UNAVAILABLE,
                                                        "the server is not serving calls (retry "
                                                        "later)"));
            return;
        }
        j->state = JOB_RECV;
        nng_ctx_recv(j->ctx, j->aio);
        return;
    }
    http_answer a;
    if (rv == 0) {
        nng_msg *m = nng_aio_get_msg(j->aio);
        nng_aio_set_msg(j->aio, NULL);
        a = readyz ? http_readiness(m) : http_reply(j->req->md, m);
        nng_msg_free(m);
    } else if (readyz) {
        a = http_readiness(NULL);
    } else if (rv == NNG_ETIMEDOUT) {
        a = http_error_text(RPC_DEADLINE_EXCEEDED, "no answer within the call's deadline");
    } else {
        a = http_error_text(RPC_UNAVAILABLE, "the server stopped before answering");
    }
    http_job_answer(j, a);
}

/* Suspends r's connection and sends m on r's job; its callback answers. */
static enum MHD_Result http_send(http_req *r, nng_msg *m, nng_duration timeout_ms)
{
    http_server *s = r->s;
    http_job *j = r->job;
    r->job = NULL;
    j->req = r;
    j->state = JOB_SEND;
    pthread_mutex_lock(&s->mu);
    s->sent++;
    pthread_mutex_unlock(&s->mu);
    /* Suspended before the send, so the callback always finds the connection suspended. */
    MHD_suspend_connection(r->mc);
    nng_aio_set_timeout(j->aio, timeout_ms);
    nng_aio_set_msg(j->aio, m);
    nng_ctx_send(j->ctx, j->aio);
    return MHD_YES;
}

/* --- one call ----------------------------------------------------------------------------- */

/* The RpcRequest of a Connect call, as an NNG message in *out; otherwise the answer in *a and
 * -1. */
static int http_envelope(http_req *r, http_answer *a, nng_msg **out)
{
    http_server *s = r->s;
    const ProtobufCMethodDescriptor *md = r->md;
    unpack_budget budget;
    unpack_budget_init(&budget, r->len, HTTP_BUDGET_FACTOR, HTTP_BUDGET_MIN);
    ProtobufCAllocator alloc = unpack_budget_allocator(&budget);
    protojson_limits limits = {s->max_message, 0};
    ProtobufCMessage *in = NULL;
    char err[256];
    int rc = protojson_decode(md->input, r->len > 0 ? r->body : "{}", r->len > 0 ? r->len : 2,
                              &alloc, &limits, &in, err, sizeof err);
    if (rc != PROTOJSON_OK) {
        if (budget.exhausted || rc == PROTOJSON_ELIMIT) {
            *a = http_error(RPC_RESOURCE_EXHAUSTED, "%s: %s", md->input->name,
                            budget.exhausted ? "decoding needs more memory than the limit" : err);
        } else {
            *a = http_error(RPC_INVALID_ARGUMENT, "%s: %s", md->input->name, err);
        }
        return -1;
    }
    size_t plen = protobuf_c_message_get_packed_size(in);
    uint8_t *payload = malloc(plen > 0 ? plen : 1);
    if (payload == NULL) {
        protobuf_c_message_free_unpacked(in, &alloc);
        *a = http_error_text(RPC_RESOURCE_EXHAUSTED, "out of memory");
        return -1;
    }
    protobuf_c_message_pack(in, payload);
    protobuf_c_message_free_unpacked(in, &alloc);

    Charter__V1__RpcRequest env = CHARTER__V1__RPC_REQUEST__INIT;
    /* The headers that are call metadata: the token, the request id and trace context, the
     * status a grpc.health.v1 Watch last saw, and the tenant. dispatch_serve validates each. */
    static const char *const headers[][2] = {{"Authorization", "authorization"},
                                             {"X-Request-Id", "x-request-id"},
                                             {"traceparent", "traceparent"},
                                             {"Grpc-Health-Last", "grpc-health-last"},
                                             {"Charter-Tenant", "tenant"}};
    enum { HTTP_META = sizeof headers / sizeof headers[0] };
    Charter__V1__RpcRequest__MetadataEntry entries[HTTP_META];
    Charter__V1__RpcRequest__MetadataEntry *meta[HTTP_META];
    env.method = r->path;
    env.payload.data = payload;
    env.payload.len = plen;
    env.metadata = meta;
    for (size_t h = 0; h < HTTP_META; h++) {
        const char *v = http_header(r->mc, headers[h][0]);
        if (v == NULL) {
            continue;
        }
        charter__v1__rpc_request__metadata_entry__init(&entries[env.n_metadata]);
        entries[env.n_metadata].key = (char *)headers[h][1];
        entries[env.n_metadata].value = (char *)v;
        meta[env.n_metadata] = &entries[env.n_metadata];
        env.n_metadata++;
    }
    env.timeout_ms = r->timeout_ms;
    size_t n = charter__v1__rpc_request__get_packed_size(&env);
    nng_msg *m = NULL;
    if (nng_msg_alloc(&m, n) != 0) {
        free(payload);
        *a = http_error_text(RPC_RESOURCE_EXHAUSTED, "out of memory");
        return -1;
    }
    charter__v1__rpc_request__pack(&env, nng_msg_body(m));
    free(payload);
    *out = m;
    return 0;
}

/* Connect-Timeout-Ms into *timeout_ms (0 when absent), capped at the listener's maximum. */
static int http_timeout_header(const http_server *s, const char *tm, uint32_t *timeout_ms)
{
    *timeout_ms = 0;
    if (tm == NULL) {
        return 0;
    }
    size_t n = strlen(tm);
    if (n == 0 || n > 10 || strspn(tm, "0123456789") != n) {
        return -1;
    }
    unsigned long long v = strtoull(tm, NULL, 10);
    if (v == 0) {
        return -1; /* Connect's timeout is positive */
    }
    *timeout_ms =
        v > (unsigned long long)s->max_timeout_ms ? (uint32_t)s->max_timeout_ms : (uint32_t)v;
    if (*timeout_ms == 0) {
        *timeout_ms = 1; /* a listener maximum of 0 */
    }
    return 0;
}

/* Adds one header to a's response; out of memory drops the response (and so the connection). */
static void http_answer_header(http_answer *a, const char *name, const char *value)
{
    if (a->res != NULL && MHD_add_response_header(a->res, name, value) != MHD_YES) {
        MHD_destroy_response(a->res);
        a->res = NULL;
    }
}

/* The body's form: JSON (415 otherwise) and uncompressed. Connect names a compressed request
 * body by Content-Encoding; charterd decompresses none, and a compressed body read as JSON
 * would be answered as a client's malformed JSON, so an encoding other than identity is
 * Connect's unimplemented, with the encodings accepted. 0, or -1 with *a. */
static int http_body_form(struct MHD_Connection *mc, http_answer *a)
{
    if (!http_json_content_type(http_header(mc, "Content-Type"))) {
        *a = http_error_text(RPC_INVALID_ARGUMENT,
                             "send Content-Type: application/json (the proto3 JSON mapping)");
        a->status = 415;
        http_answer_header(a, "Accept-Post", "application/json");
        return -1;
    }
    const char *ce = http_header(mc, "Content-Encoding");
    if (ce != NULL && strcasecmp(ce, "identity") != 0) {
        *a =
            http_error_text(RPC_UNIMPLEMENTED, "compressed request bodies are not accepted: send "
                                               "the body uncompressed (Content-Encoding identity)");
        http_answer_header(a, "Accept-Encoding", "identity");
        return -1;
    }
    return 0;
}

/* The checks of a Connect call that need no body, in the order the answer names the first
 * failure; 0 when the body is worth reading (r->job then holds a job), else *a. */
static int http_call_headers(http_req *r, const char *verb, http_answer *a)
{
    http_server *s = r->s;
    struct MHD_Connection *mc = r->mc;
    r->md = dispatch_method(r->path);
    if (r->md == NULL) {
        char shown[129];
        size_t k = 0;
        for (const char *p = r->path; *p != '\0' && k + 1 < sizeof shown; p++) {
            shown[k++] = isprint((unsigned char)*p) ? *p : '?';
        }
        shown[k] = '\0';
        *a = http_error(RPC_UNIMPLEMENTED, "unknown method \"%s\"", shown);
        return -1;
    }
    if (strcmp(verb, "POST") != 0) {
        *a = http_error(RPC_UNIMPLEMENTED, "%s takes POST (a Connect unary call)", r->path);
        return -1;
    }
    if (http_body_form(mc, a) != 0) {
        return -1;
    }
    if (http_timeout_header(s, http_header(mc, "Connect-Timeout-Ms"), &r->timeout_ms) != 0) {
        *a = http_error_text(RPC_INVALID_ARGUMENT,
                             "Connect-Timeout-Ms must be a positive whole number of milliseconds");
        return -1;
    }
    /* The header is optional; when sent it names the one version of Connect spoken here. */
    const char *cv = http_header(mc, "Connect-Protocol-Version");
    if (cv != NULL && strcmp(cv, "1") != 0) {
        *a = http_error_text(RPC_INVALID_ARGUMENT, "Connect-Protocol-Version must be \"1\"");
        return -1;
    }
    /* A token that can never authenticate is refused before a byte of the body is read. */
    const char *why = NULL;
    int pre = dispatch_precheck(s->auth, r->path, http_header(mc, "Authorization"), &why);
    if (pre != RPC_OK) {
        *a = http_error_text(pre, why);
        return -1;
    }
    bool known = false;
    unsigned long long declared = http_declared_length(mc, &known);
    if (known && declared > s->max_message) {
        *a = http_error(RPC_RESOURCE_EXHAUSTED, "request of %llu bytes exceeds the %zu byte limit",
                        declared, s->max_message);
        return -1;
    }
    bool stopping = false;
    if ((r->job = http_job_take(s, &stopping)) == NULL) {
        *a = stopping
                 ? http_error_text(RPC_UNAVAILABLE,
                                   "server is shutting down (retry on another charterd)")
                 : http_error(RPC_RESOURCE_EXHAUSTED,
                              "server busy: %u HTTP calls in progress (retry later)", s->n_jobs);
        return -1;
    }
    if (known && declared > 0) {
        /* Declared and within the limit: one allocation of the right size. */
        if ((r->body = malloc((size_t)declared)) == NULL) {
            *a = http_error_text(RPC_RESOURCE_EXHAUSTED, "out of memory");
            return -1;
        }
        r->cap = (size_t)declared;
    }
    return 0;
}

/* One piece of the body: kept while within max_message; past it (a chunked body) counted
 * and dropped. Returns 0, or -1 to drop the connection: out of memory, or more than
 * max_message bytes past the limit (the rest is not waited for). */
static int http_take(http_req *r, const char *data, size_t n)
{
    size_t max = r->s->max_message;
    if (!r->over && n > max - r->len) {
        r->over = true;
        r->dropped = r->len;
        free(r->body);
        r->body = NULL;
        r->len = r->cap = 0;
    }
    if (r->over) {
        r->dropped += n;
        return r->dropped - max > max ? -1 : 0;
    }
    if (r->len + n > r->cap) {
        size_t cap = r->cap > 0 ? r->cap : 4096;
        while (cap < r->len + n) {
            cap = cap > max / 2 ? max : cap * 2;
        }
        char *b = realloc(r->body, cap);
        if (b == NULL) {
            return -1;
        }
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    return 0;
}

static enum MHD_Result http_call(http_req *r)
{
    if (r->over) {
        return http_queue(r->mc,
                          http_error(RPC_RESOURCE_EXHAUSTED,
                                     "request body exceeds the %zu byte limit", r->s->max_message));
    }
    http_answer a;
    nng_msg *m = NULL;
    if (http_envelope(r, &a, &m) != 0) {
        return http_queue(r->mc, a);
    }
    uint32_t t = r->timeout_ms > 0 ? r->timeout_ms : (uint32_t)r->s->max_timeout_ms;
    return http_send(r, m, (nng_duration)t + HTTP_DEADLINE_MARGIN_MS);
}

/* GET /readyz: a Health/Check through the same queue and workers as every call, so "ready"
 * means a worker reached the database and found the query library, within 2 s. Metadata
 * health-source: database keeps it off the serving status Health otherwise answers from. */
static enum MHD_Result http_readyz(http_req *r)
{
    Charter__V1__RpcRequest env = CHARTER__V1__RPC_REQUEST__INIT;
    Charter__V1__RpcRequest__MetadataEntry source = CHARTER__V1__RPC_REQUEST__METADATA_ENTRY__INIT;
    Charter__V1__RpcRequest__MetadataEntry *meta[1] = {&source};
    source.key = (char *)"health-source";
    source.value = (char *)"database";
    env.metadata = meta;
    env.n_metadata = 1;
    env.method = "/charter.v1.Health/Check";
    env.timeout_ms = 2000;
    nng_msg *m = NULL;
    if (nng_msg_alloc(&m, charter__v1__rpc_request__get_packed_size(&env)) != 0) {
        return MHD_NO;
    }
    charter__v1__rpc_request__pack(&env, nng_msg_body(m));
    return http_send(r, m, 2000 + HTTP_DEADLINE_MARGIN_MS);
}

/* GET /metrics: the process's counters (metrics.h) in the Prometheus text format. */
static http_answer http_metrics(void)
{
    char *text = NULL;
    size_t len = 0;
    http_answer a = {200, NULL};
    if (metrics_render(&text, &len) == 0) {
        a.res = http_response("text/plain; version=0.0.4; charset=utf-8", text, len);
    }
    free(text);
    return a;
}

/* The console's files, compiled in (CMakeLists.txt, charter_embed). */
extern const char console_html[], console_js[], console_css[];
extern const size_t console_html_len, console_js_len, console_css_len;

/* A console file's bytes and type; false when path is none of them. */
static bool http_console_file(const char *path, const char **data, size_t *len, const char **type)
{
    if (strcmp(path, "/") == 0 || strcmp(path, "/index.html") == 0) {
        *data = console_html, *len = console_html_len, *type = "text/html; charset=utf-8";
    } else if (strcmp(path, "/console.js") == 0) {
        *data = console_js, *len = console_js_len, *type = "text/javascript; charset=utf-8";
    } else if (strcmp(path, "/console.css") == 0) {
        *data = console_css, *len = console_css_len, *type = "text/css; charset=utf-8";
    } else {
        return false;
    }
    return true;
}

/* A console file with the headers that keep a page of it to itself: no script but its own
 * files (so no inline script can run), no framing, no referrer, nothing sniffed or cached. */
static http_answer http_console(const char *path)
{
    const char *data = NULL, *type = NULL;
    size_t len = 0;
    if (!http_console_file(path, &data, &len, &type)) {
        return http_error_text(RPC_NOT_FOUND, "no such page");
    }
    http_answer a = {200, http_response(type, data, len)};
    if (a.res != NULL &&
        (MHD_add_response_header(a.res, "Content-Security-Policy",
                                 "default-src 'none'; script-src 'self'; style-src 'self'; "
                                 "img-src 'self'; connect-src 'self'; base-uri 'none'; "
                                 "form-action 'none'; frame-ancestors 'none'") != MHD_YES ||
         MHD_add_response_header(a.res, "X-Frame-Options", "DENY") != MHD_YES ||
         MHD_add_response_header(a.res, "Referrer-Policy", "no-referrer") != MHD_YES)) {
        MHD_destroy_response(a.res);
        a.res = NULL;
    }
    return a;
}

/* --- the access handler ------------------------------------------------------------------- */

/* The checks of the first call, in the order the answer names the first failure; 0 when the
 * request goes on, else *a. */
static int http_route(http_req *r, const char *url, const char *verb, http_answer *a)
{
    http_server *s = r->s;
    struct MHD_Connection *mc = r->mc;
    const char *host = http_header(mc, "Host");
    if (!http_host_ok(s, host)) {
        *a = http_error(RPC_PERMISSION_DENIED,
                        "Host \"%.64s\" is not this server (call it by a loopback name, or start "
                        "charterd with --http-allow-host NAME)",
                        host != NULL ? host : "");
        return -1;
    }
    if (!http_origin_ok(http_header(mc, "Origin"), host)) {
        *a = http_error_text(RPC_PERMISSION_DENIED, "cross-origin calls are refused");
        return -1;
    }
    size_t n = strcspn(url, "?#");
    if (n >= sizeof r->path) {
        *a = http_error_text(RPC_UNIMPLEMENTED, "unknown path");
        return -1;
    }
    memcpy(r->path, url, n);
    r->path[n] = '\0';
    bool get = strcmp(verb, "GET") == 0 || strcmp(verb, "HEAD") == 0;
    bool stopping = false;
    if (strcmp(r->path, "/healthz") == 0) {
        r->kind = REQ_HEALTHZ;
        if (!get) {
            *a = http_error_text(RPC_UNIMPLEMENTED, "/healthz takes GET");
            return -1;
        }
    } else if (get && strcmp(r->path, "/readyz") == 0) {
        r->kind = REQ_READYZ;
        if ((r->job = http_job_take(s, &stopping)) == NULL) {
            *a = http_json(503, "{\"ready\":false,\"reason\":\"busy\"}");
            return -1;
        }
    } else if (get && strcmp(r->path, "/metrics") == 0) {
        r->kind = REQ_METRICS;
    } else if (get && strncmp(r->path, "/charter.v1.", 12) != 0) {
        r->kind = REQ_CONSOLE;
    } else {
        r->kind = REQ_CALL;
        return http_call_headers(r, verb, a);
    }
    /* A page takes no body. */
    bool known = false;
    if (http_declared_length(mc, &known) > 0 || !known) {
        *a = http_error(RPC_INVALID_ARGUMENT, "%s takes no request body", r->path);
        return -1;
    }
    return 0;
}

/* The first call, headers only: routes the request and makes every check that needs no body.
 * Returns the request to go on with, or NULL with an answer in *a to queue at once. A request
 * refused here never has its body kept: when it declares more than HTTP_DRAIN_MAX bytes the
 * answer goes out at once (and libmicrohttpd closes the connection, the body unread); a
 * smaller or chunked body is drained, counted and dropped, and the refusal answered when it
 * ends, because clients that write their whole body before reading (Node's http, say) lose an
 * answer sent while they still write. */
static http_req *http_begin(http_server *s, struct MHD_Connection *mc, const char *url,
                            const char *verb, http_answer *a)
{
    http_req *r = calloc(1, sizeof *r);
    if (r == NULL) {
        *a = (http_answer){0, NULL};
        return NULL;
    }
    r->s = s;
    r->mc = mc;
    if (http_route(r, url, verb, a) == 0) {
        if (r->job != NULL) {
            http_owe(r, true);
        }
        return r;
    }
    if (r->job != NULL) {
        http_job_give(r->job, false);
        r->job = NULL;
    }
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
    bool known = false;
    if (http_declared_length(mc, &known) > HTTP_DRAIN_MAX) {
        free(r);
        return NULL;
    }
    r->refused = true;
    r->answer = *a;
    return r;
}

/* The last call: the whole request is in. */
static enum MHD_Result http_serve(http_req *r)
{
    switch (r->kind) {
    case REQ_HEALTHZ:
        return http_queue(r->mc, http_json(200, "{\"status\":\"serving\"}"));
    case REQ_READYZ:
        return http_readyz(r);
    case REQ_METRICS:
        return http_queue(r->mc, http_metrics());
    case REQ_CONSOLE:
        return http_queue(r->mc, http_console(r->path));
    case REQ_CALL:
        break;
    }
    return http_call(r);
}

static enum MHD_Result http_access(void *cls, struct MHD_Connection *mc, const char *url,
                                   const char *verb, const char *version, const char *upload,
                                   size_t *upload_size, void **con_cls)
{
    http_server *s = cls;
    http_req *r = *con_cls;
    (void)version;
    if (r == NULL) {
        http_guard_body(mc);
        http_answer a;
        if ((r = http_begin(s, mc, url, verb, &a)) == NULL) {
            return http_queue(mc, a);
        }
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        int rc = 0;
        if (r->refused) {
            r->dropped += *upload_size;
            rc = r->dropped > HTTP_DRAIN_MAX ? -1 : 0;
        } else {
            rc = http_take(r, upload, *upload_size);
        }
        *upload_size = 0;
        return rc == 0 ? MHD_YES : MHD_NO;
    }
    if (r->answered || r->refused) {
        /* Refused on the headers and drained, or answered by the job's callback, which
         * resumed the connection. */
        http_answer a = r->answer;
        r->answer.res = NULL;
        r->refused = r->answered = false;
        return http_queue(mc, a);
    }
    http_guard_busy(mc);
    return http_serve(r);
}

/* The request is over (answered, or its connection closed): its job, if it never sent a call,
 * goes back, and the next request on the connection has a headers deadline again. */
static void http_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                           enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    http_guard_idle(mc);
    http_req *r = *con_cls;
    if (r == NULL) {
        return;
    }
    *con_cls = NULL;
    if (r->job != NULL) {
        http_job_give(r->job, false);
    }
    http_owe(r, false);
    if (r->answer.res != NULL) {
        MHD_destroy_response(r->answer.res);
    }
    free(r->body);
    free(r);
}

static void http_deadline_passed(void *arg, const char *phase, unsigned limit_s)
{
    (void)arg;
    log_refusal(RPC_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED",
                "HTTP connection closed: its request's %s did not arrive within %u s "
                "(--http-%s-timeout)",
                phase, limit_s, strcmp(phase, "headers") == 0 ? "header" : "body");
}

/* --- setup and teardown ------------------------------------------------------------------- */

static void http_free(http_server *s)
{
    if (s->port != NULL) {
        /* No connection is handed to libmicrohttpd from here on. */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        http_port_stop(s->port, &now);
    }
    if (s->d != NULL) {
        MHD_stop_daemon(s->d);
    }
    http_port_free(s->port);
    http_guard_stop(s->guard);
    if (s->req_open) {
        nng_close(s->req);
    }
    for (unsigned i = 0; i < s->n_jobs; i++) {
        if (s->jobs[i].aio != NULL) {
            nng_aio_stop(s->jobs[i].aio);
            nng_aio_free(s->jobs[i].aio);
        }
    }
    free(s->jobs);
    free(s->allow_host);
    SSL_CTX_free(s->tls);
    pthread_cond_destroy(&s->idle_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static int http_fail_start(http_server *s, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int http_fail_start(http_server *s, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    if (s != NULL) {
        http_free(s);
    }
    return -1;
}

/* The req0 socket to the transport and the jobs on it. */
static int http_start_jobs(http_server *s, const http_opts *o, char *err, size_t errlen)
{
    s->n_jobs = o->max_inflight > 0 ? o->max_inflight : 1;
    s->jobs = calloc(s->n_jobs, sizeof *s->jobs);
    if (s->jobs == NULL) {
        s->n_jobs = 0;
        snprintf(err, errlen, "out of memory starting the HTTP listener (lower --queue)");
        return -1;
    }
    int rv;
    if ((rv = nng_req0_open(&s->req)) != 0) {
        snprintf(err, errlen, "cannot open the HTTP listener's socket: %s (check NNG)",
                 nng_strerror(rv));
        return -1;
    }
    s->req_open = true;
    /* A request is never sent twice: a resend would run a call twice. */
    if ((rv = nng_socket_set_ms(s->req, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_socket_set_size(s->req, NNG_OPT_RECVMAXSZ, HTTP_MAX_REPLY)) != 0 ||
        (rv = nng_dial(s->req, o->rpc_url, NULL, 0)) != 0) {
        snprintf(err, errlen, "cannot connect the HTTP listener to %s: %s (check NNG)", o->rpc_url,
                 nng_strerror(rv));
        return -1;
    }
    for (unsigned i = 0; i < s->n_jobs; i++) {
        http_job *j = &s->jobs[i];
        j->s = s;
        if ((rv = nng_aio_alloc(&j->aio, http_job_cb, j)) != 0 ||
            (rv = nng_ctx_open(&j->ctx, s->req)) != 0) {
            snprintf(err, errlen, "cannot create the HTTP listener's contexts: %s (lower --queue)",
                     nng_strerror(rv));
            return -1;
        }
        j->next = s->free_jobs;
        s->free_jobs = j;
    }
    return 0;
}

/* Worker threads of libmicrohttpd: the handler only decodes and hands over, so a few. */
static unsigned http_threads(unsigned max_connections)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned n = cores < 2 ? 2 : cores > 4 ? 4 : (unsigned)cores;
    return n > max_connections ? max_connections : n;
}

/* libmicrohttpd, HTTP/1.1 connections only: the HTTP port accepts them and hands them over
 * (http_take_http1). The notify callback keeps the guard's deadlines and frees the place of a
 * closed connection under the port's cap. */
static void http_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe)
{
    http_server *s = cls;
    http_guard_notify(s->guard, c, socket_context, toe);
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED && s->port != NULL) {
        http_port_release(s->port);
    }
}

static int http_take_http1(void *arg, int fd, const struct sockaddr *addr, socklen_t len)
{
    http_server *s = arg;
    /* libmicrohttpd closes fd itself when it cannot take it. */
    return MHD_add_connection(s->d, fd, addr, len) == MHD_YES ? 0 : -1;
}

/* The cap is the port's (http_port.h), which counts every connection of both protocols;
 * libmicrohttpd's own limit is twice it, a backstop only: it is split among its threads, and a
 * connection still counts there while its close is being notified, when the port may already
 * hand over the next one.
 * poll(2), not epoll: libmicrohttpd 0.9.75's epoll loop calls epoll_wait again, with the full
 * timeout, after a batch of exactly 128 events, and sits on the events of the first batch
 * meanwhile; under a flood of slow connections that held closed connections for up to
 * --http-idle-timeout. poll is level-triggered and bounded here by the connection cap. */
static int http_start_daemon(http_server *s, const http_opts *o, unsigned max_conn,
                             unsigned threads)
{
    s->d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
            MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
        0, NULL, NULL, http_access, s, MHD_OPTION_THREAD_POOL_SIZE, threads >= 2 ? threads : 0,
        MHD_OPTION_CONNECTION_LIMIT, 2 * max_conn, MHD_OPTION_CONNECTION_TIMEOUT, o->idle_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, HTTP_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_CONNECTION,
        http_notify, s, MHD_OPTION_NOTIFY_COMPLETED, http_completed, s, MHD_OPTION_END);
    return s->d != NULL ? 0 : -1;
}

/* The listening socket and the port that accepts on it (HTTP/1.1 to libmicrohttpd, HTTP/2 to
 * the gRPC listener), with TLS when a certificate was given. */
static int http_start_port(http_server *s, const http_opts *o, const char *hostport,
                           unsigned max_conn, char *err, size_t errlen)
{
    char what[HTTP_HOST_MAX + 32];
    snprintf(what, sizeof what, "cannot serve HTTP on %s", hostport);
    const char *colon = strrchr(hostport, ':');
    char host[HTTP_HOST_MAX];
    snprintf(host, sizeof host, "%.*s", (int)(colon - hostport), hostport);
    int fd = http_guard_listen(host, colon + 1, what, err, errlen);
    if (fd < 0) {
        return -1;
    }
    if (http_guard_bound(fd, host, s->address, sizeof s->address) != 0) {
        snprintf(s->address, sizeof s->address, "%s", hostport);
    }
    http_port_opts po = {
        .listen_fd = fd,
        .max_connections = max_conn,
        .header_timeout_s = o->header_timeout_s,
        .tls = s->tls,
        .grpc = {o->rpc_url, o->auth, o->max_message, o->max_inflight, s->max_timeout_ms,
                 s->listen_host, s->allow_host, o->header_timeout_s, o->body_timeout_s,
                 o->idle_timeout_s, -1},
        .take_http1 = http_take_http1,
        .arg = s,
    };
    return http_port_open(&po, &s->port, err, errlen);
}

/* The connection cap fitted into the open file limit: a TLS HTTP/1.1 connection takes three
 * descriptors (its socket and a socket pair to libmicrohttpd), any other one. */
static int http_fit(const http_server *s, unsigned *max_conn, unsigned threads, char *err,
                    size_t errlen)
{
    unsigned per = s->tls != NULL ? 3 : 1;
    unsigned units = *max_conn * per;
    char note[512];
    if (http_guard_fit_descriptors(&units, HTTP_FD_RESERVE + 4 * threads + 4,
                                   HTTP_MIN_CONNECTIONS * per, note, sizeof note) != 0) {
        snprintf(err, errlen, "%s", note);
        return -1;
    }
    if (note[0] != '\0') {
        log_info("%s (--http-max-connections%s)", note,
                 per > 1 ? "; a TLS connection counts 3 descriptors" : "");
    }
    *max_conn = units / per;
    return 0;
}

/* The options that need no socket: addresses, certificate, limits. */
static int http_setup(http_server *s, const http_opts *o, const char *hostport, char *err,
                      size_t errlen)
{
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle_cv, NULL);
    s->max_message = o->max_message;
    s->max_timeout_ms = o->max_timeout_ms > 0 ? o->max_timeout_ms : 60000;
    s->auth = o->auth;
    hostport_host_part(hostport, s->listen_host, sizeof s->listen_host);
    if (o->allow_host != NULL && (s->allow_host = strdup(o->allow_host)) == NULL) {
        snprintf(err, errlen, "out of memory starting the HTTP listener (free some memory)");
        return -1;
    }
    if (o->cert_file != NULL &&
        (s->tls = tls_io_context(o->cert_file, o->key_file, err, errlen)) == NULL) {
        return -1;
    }
    return http_start_jobs(s, o, err, errlen);
}

const char *http_address(const http_server *h)
{
    return h->address;
}

int http_start(const http_opts *o, http_server **out, char *err, size_t errlen)
{
    *out = NULL;
    char hostport[HTTP_HOST_MAX + 8];
    if (hostport_parse(o->addr, hostport, sizeof hostport) != 0) {
        return http_fail_start(NULL, err, errlen,
                               "--http needs HOST:PORT or PORT, got \"%s\" (e.g. 127.0.0.1:8080)",
                               o->addr != NULL ? o->addr : "");
    }
    http_server *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return http_fail_start(NULL, err, errlen,
                               "out of memory starting the HTTP listener (free some memory)");
    }
    unsigned max_conn = o->max_connections > 0 ? o->max_connections : 1;
    if (http_setup(s, o, hostport, err, errlen) != 0 ||
        http_fit(s, &max_conn, http_threads(max_conn), err, errlen) != 0) {
        http_free(s);
        return -1;
    }
    http_guard_opts go = {o->header_timeout_s, o->body_timeout_s, http_deadline_passed, NULL};
    if (http_guard_start(&go, &s->guard) != 0) {
        return http_fail_start(s, err, errlen,
                               "cannot start the HTTP listener's watchdog (free some memory)");
    }
    /* The port exists before libmicrohttpd's threads, which tell it of closed connections;
     * it accepts only once libmicrohttpd runs. */
    if (http_start_port(s, o, hostport, max_conn, err, errlen) != 0) {
        http_free(s);
        return -1;
    }
    if (http_start_daemon(s, o, max_conn, http_threads(max_conn)) != 0) {
        return http_fail_start(s, err, errlen,
                               "cannot start the HTTP server on %s (check --http and the "
                               "--http-* limits)",
                               hostport);
    }
    if (http_port_run(s->port, err, errlen) != 0) {
        http_free(s);
        return -1;
    }
    log_info("HTTP listener: HTTP/1.1 and gRPC over HTTP/2%s, at most %u connections, headers "
             "within %u s, body within %u s, idle %u s",
             s->tls != NULL ? " (TLS)" : "", max_conn, o->header_timeout_s, o->body_timeout_s,
             o->idle_timeout_s);
    *out = s;
    return 0;
}

/* Waits on idle_cv until *count is 0 or the deadline passes; with s->mu held. */
static void http_wait_zero(http_server *s, const unsigned *count, const struct timespec *deadline)
{
    while (*count > 0) {
        if (pthread_cond_timedwait(&s->idle_cv, &s->mu, deadline) != 0) {
            break;
        }
    }
}

void http_stop(http_server *s)
{
    if (s == NULL) {
        return;
    }
    /* Calls already accepted are answered before the connections close (a caller must learn
     * whether its call took effect); calls arriving meanwhile get 503 "shutting down". The wait
     * is bounded: past it, the calls still at the transport are cancelled (answered "stopped
     * before answering"), since libmicrohttpd may only stop with no connection suspended. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    const struct timespec grpc_by = deadline;
    http_port_quiesce(s->port);
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    http_wait_zero(s, &s->owed, &deadline);
    unsigned left = s->sent;
    while (s->sent > 0) {
        pthread_mutex_unlock(&s->mu);
        for (unsigned i = 0; i < s->n_jobs; i++) {
            nng_aio_cancel(s->jobs[i].aio);
        }
        pthread_mutex_lock(&s->mu);
        struct timespec tick;
        clock_gettime(CLOCK_REALTIME, &tick);
        tick.tv_nsec += 100 * 1000000L;
        if (tick.tv_nsec >= 1000000000L) {
            tick.tv_sec++;
            tick.tv_nsec -= 1000000000L;
        }
        http_wait_zero(s, &s->sent, &tick);
    }
    /* The cancelled calls' answers, and any still going out, get a moment to leave. */
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    http_wait_zero(s, &s->owed, &deadline);
    pthread_mutex_unlock(&s->mu);
    if (left > 0) {
        log_error("stopping the HTTP listener with %u calls unanswered", left);
    }
    /* gRPC calls get what is left of the same wait before every connection closes. */
    http_port_stop(s->port, &grpc_by);
    http_free(s);
}
