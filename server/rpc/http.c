/*
 * http.c - Connect unary calls over NNG's HTTP server, handed to the transport (see http.h).
 *
 * Shaped like NNG's demo/rest/server.c: a fixed pool of jobs, each an nng_ctx on one req0
 * socket dialed to the transport over inproc, carries one call from the HTTP handler to the
 * rep0 workers and back. The HTTP request's aio is completed from the job's callback, or from
 * the cancel routine when the connection goes away first; a mutex per job makes sure exactly
 * one of the two completes it.
 */
#include "rpc/http.h"

#include <ctype.h>
#include <jansson.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/http/http.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "rpc/call.h"
#include "core/hostport.h"
#include "charter.pb-c.h"
#include "rpc/dispatch.h"
#include "core/log.h"
#include "core/metrics.h"
#include "protojson.h"
#include "unpack_budget.h"

/* Bytes the JSON decoder may allocate per byte of body, and the floor (as dispatch.c). */
#define HTTP_BUDGET_FACTOR 8
#define HTTP_BUDGET_MIN ((size_t)1024 * 1024)
/* Largest RpcResponse taken from the transport (a RunView can be large). */
#define HTTP_MAX_REPLY ((size_t)64 * 1024 * 1024)
/* Time on top of a call's deadline before the listener gives up on the worker's answer. */
#define HTTP_DEADLINE_MARGIN_MS 5000
#define HTTP_HOST_MAX 256

typedef enum { JOB_FREE = 0, JOB_SEND, JOB_RECV } http_job_state;

typedef struct http_job {
    http_server *s;
    nng_ctx ctx;
    nng_aio *aio;
    pthread_mutex_t mu;
    nng_aio *http_aio; /* the HTTP request to complete; NULL once completed or cancelled */
    const ProtobufCMethodDescriptor *md;
    bool readyz; /* the call is /readyz's Health/Check: answer readiness, not the message */
    http_job_state state;
    struct http_job *next;
} http_job;

struct http_server {
    nng_http_server *srv;
    bool started;
    nng_socket req;
    bool req_open;
    http_job *jobs;
    unsigned n_jobs;
    http_job *free_jobs;
    unsigned busy;
    bool stopping; /* http_stop began: new calls are answered 503 "shutting down" */
    pthread_mutex_t mu;
    pthread_cond_t idle_cv;
    size_t max_message;
    int max_timeout_ms;
    char listen_host[HTTP_HOST_MAX];
    char *allow_host;
};

/* --- the Connect error vocabulary --------------------------------------------------------- */

/* Connect's name and HTTP status for a gRPC status number (connectrpc.com/docs/protocol,
 * "Error Codes"). */
static const char *http_connect_code(int code, uint16_t *status)
{
    static const struct {
        const char *name;
        uint16_t status;
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

/* --- responses ---------------------------------------------------------------------------- */

/* A response with status and a JSON body (body may be NULL for none). NULL when out of
 * memory, which the caller turns into a dropped connection. */
static nng_http_res *http_res(uint16_t status, const char *body)
{
    nng_http_res *res = NULL;
    if (nng_http_res_alloc(&res) != 0) {
        return NULL;
    }
    if (nng_http_res_set_status(res, status) != 0 ||
        nng_http_res_set_header(res, "Content-Type", "application/json") != 0 ||
        nng_http_res_set_header(res, "Cache-Control", "no-store") != 0 ||
        nng_http_res_set_header(res, "X-Content-Type-Options", "nosniff") != 0 ||
        (body != NULL && nng_http_res_copy_data(res, body, strlen(body)) != 0)) {
        nng_http_res_free(res);
        return NULL;
    }
    return res;
}

/* A Connect error body for gRPC status code with message. */
static nng_http_res *http_error_res(int code, const char *message)
{
    uint16_t status = 500;
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
    nng_http_res *res = http_res(status, text != NULL ? text : "{\"code\":\"internal\"}");
    free(text);
    return res;
}

static void http_finish(nng_aio *aio, nng_http_res *res)
{
    if (res == NULL) {
        nng_aio_finish(aio, NNG_ENOMEM);
        return;
    }
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

static void http_fail(nng_aio *aio, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void http_fail(nng_aio *aio, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    http_finish(aio, http_error_res(code, msg));
}

/* --- Host and Origin ---------------------------------------------------------------------- */

/* The host part of "host[:port]" or "[v6]:port" into out. */
static void http_host_part(const char *hostport, char *out, size_t n)
{
    size_t len;
    if (hostport[0] == '[') {
        const char *end = strchr(hostport, ']');
        len = end != NULL ? (size_t)(end - hostport) + 1 : strlen(hostport);
    } else {
        const char *colon = strrchr(hostport, ':');
        len = colon != NULL ? (size_t)(colon - hostport) : strlen(hostport);
    }
    if (len >= n) {
        len = n - 1;
    }
    memcpy(out, hostport, len);
    out[len] = '\0';
}

/* A Host header names this server when it is a loopback name, the address listened on, or the
 * one name the operator allowed: anything else may be a DNS-rebinding page. */
static bool http_host_ok(const http_server *s, const char *host)
{
    if (host == NULL) {
        return false;
    }
    char h[HTTP_HOST_MAX];
    http_host_part(host, h, sizeof h);
    return strcasecmp(h, "127.0.0.1") == 0 || strcasecmp(h, "localhost") == 0 ||
           strcmp(h, "[::1]") == 0 || strcasecmp(h, s->listen_host) == 0 ||
           (s->allow_host != NULL && strcasecmp(h, s->allow_host) == 0);
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

/* --- jobs --------------------------------------------------------------------------------- */

static http_job *http_job_take(http_server *s)
{
    pthread_mutex_lock(&s->mu);
    http_job *j = s->stopping ? NULL : s->free_jobs;
    if (j != NULL) {
        s->free_jobs = j->next;
        s->busy++;
    }
    pthread_mutex_unlock(&s->mu);
    return j;
}

static void http_job_give(http_job *j)
{
    http_server *s = j->s;
    j->state = JOB_FREE;
    j->md = NULL;
    j->readyz = false;
    pthread_mutex_lock(&s->mu);
    j->next = s->free_jobs;
    s->free_jobs = j;
    s->busy--;
    pthread_cond_broadcast(&s->idle_cv);
    pthread_mutex_unlock(&s->mu);
}

/* Completes the job's HTTP request with res unless the connection went away first. */
static void http_job_complete(http_job *j, nng_http_res *res)
{
    pthread_mutex_lock(&j->mu);
    nng_aio *a = j->http_aio;
    j->http_aio = NULL;
    pthread_mutex_unlock(&j->mu);
    if (a != NULL) {
        http_finish(a, res);
    } else if (res != NULL) {
        nng_http_res_free(res);
    }
}

/* The HTTP connection was closed or the server is stopping: complete the request now; the
 * call goes on and its answer is dropped. */
static void http_cancel(nng_aio *aio, void *arg, int rv)
{
    http_job *j = arg;
    pthread_mutex_lock(&j->mu);
    bool mine = j->http_aio == aio;
    if (mine) {
        j->http_aio = NULL;
    }
    pthread_mutex_unlock(&j->mu);
    if (mine) {
        nng_aio_finish(aio, rv);
    }
}

/* res with an X-Request-Id header when request_id is not empty; NULL (nothing sendable)
 * when the header cannot be added. */
static nng_http_res *http_request_id_header(nng_http_res *res, const char *request_id)
{
    if (res != NULL && request_id[0] != '\0' &&
        nng_http_res_set_header(res, "X-Request-Id", request_id) != 0) {
        nng_http_res_free(res);
        return NULL;
    }
    return res;
}

/* The answer of the transport as an HTTP response. */
static nng_http_res *http_answer(const ProtobufCMethodDescriptor *md, nng_msg *m)
{
    char err[256];
    Charter__V1__RpcResponse *r =
        charter__v1__rpc_response__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
    if (r == NULL) {
        return http_error_res(RPC_INTERNAL, "the answer is not an RpcResponse");
    }
    /* The call's request id (reply metadata) as the X-Request-Id response header. */
    char request_id[129] = "";
    for (size_t i = 0; i < r->n_metadata; i++) {
        if (r->metadata[i]->key != NULL && strcmp(r->metadata[i]->key, "x-request-id") == 0 &&
            r->metadata[i]->value != NULL) {
            snprintf(request_id, sizeof request_id, "%s", r->metadata[i]->value);
        }
    }
    nng_http_res *res = NULL;
    if (r->code != RPC_OK) {
        res = http_error_res(r->code, r->message);
        charter__v1__rpc_response__free_unpacked(r, NULL);
        return http_request_id_header(res, request_id);
    }
    ProtobufCMessage *out =
        protobuf_c_message_unpack(md->output, NULL, r->payload.len, r->payload.data);
    charter__v1__rpc_response__free_unpacked(r, NULL);
    if (out == NULL) {
        return http_error_res(RPC_INTERNAL, "the answer's payload is not its response message");
    }
    char *text = NULL;
    int rc = protojson_encode_text(out, NULL, &text, err, sizeof err);
    protobuf_c_message_free_unpacked(out, NULL);
    if (rc != PROTOJSON_OK) {
        return http_error_res(RPC_INTERNAL, err);
    }
    res = http_res(200, text);
    free(text);
    return http_request_id_header(res, request_id);
}

/* /readyz from the answer of Health/Check: ready when the database answered and the query
 * library it holds is the one this charterd needs (Health reports its version then). */
static nng_http_res *http_readiness(nng_msg *m)
{
    Charter__V1__RpcResponse *r =
        charter__v1__rpc_response__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
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
                 db && lib ? "true" : "false", db ? "up" : "down", lib ? "loaded" : "missing");
    }
    if (h != NULL) {
        charter__v1__health_response__free_unpacked(h, NULL);
    }
    if (r != NULL) {
        charter__v1__rpc_response__free_unpacked(r, NULL);
    }
    return http_res(db && lib ? 200 : 503, body);
}

static void http_job_cb(void *arg)
{
    http_job *j = arg;
    int rv = nng_aio_result(j->aio);
    if (j->state == JOB_SEND) {
        if (rv != 0) {
            nng_msg_free(nng_aio_get_msg(j->aio));
            nng_aio_set_msg(j->aio, NULL);
            http_job_complete(j, j->readyz ? http_res(503, "{\"ready\":false}")
                                           : http_error_res(RPC_UNAVAILABLE, "the server is not "
                                                                             "serving calls (retry "
                                                                             "later)"));
            http_job_give(j);
            return;
        }
        j->state = JOB_RECV;
        nng_ctx_recv(j->ctx, j->aio);
        return;
    }
    nng_http_res *res;
    if (rv == 0) {
        nng_msg *m = nng_aio_get_msg(j->aio);
        nng_aio_set_msg(j->aio, NULL);
        res = j->readyz ? http_readiness(m) : http_answer(j->md, m);
        nng_msg_free(m);
    } else if (j->readyz) {
        res = http_res(503, "{\"ready\":false}");
    } else if (rv == NNG_ETIMEDOUT) {
        res = http_error_res(RPC_DEADLINE_EXCEEDED, "no answer within the call's deadline");
    } else {
        res = http_error_res(RPC_UNAVAILABLE, "the server stopped before answering");
    }
    http_job_complete(j, res);
    http_job_give(j);
}

/* --- one call ----------------------------------------------------------------------------- */

/* The RpcRequest of a Connect call, as an NNG message in *out; on failure the HTTP request is
 * answered here and -1 returned. */
static int http_envelope(http_server *s, nng_aio *aio, nng_http_req *req, const char *path,
                         const ProtobufCMethodDescriptor *md, uint32_t *timeout_ms, nng_msg **out)
{
    void *body = NULL;
    size_t len = 0;
    nng_http_req_get_data(req, &body, &len);
    if (len > s->max_message) {
        http_fail(aio, RPC_RESOURCE_EXHAUSTED, "request of %zu bytes exceeds the %zu byte limit",
                  len, s->max_message);
        return -1;
    }
    const char *tm = nng_http_req_get_header(req, "Connect-Timeout-Ms");
    *timeout_ms = 0;
    if (tm != NULL) {
        size_t n = strlen(tm);
        if (n == 0 || n > 10 || strspn(tm, "0123456789") != n) {
            http_fail(aio, RPC_INVALID_ARGUMENT,
                      "Connect-Timeout-Ms must be a positive whole number of milliseconds");
            return -1;
        }
        unsigned long long v = strtoull(tm, NULL, 10);
        *timeout_ms =
            v > (unsigned long long)s->max_timeout_ms ? (uint32_t)s->max_timeout_ms : (uint32_t)v;
        if (*timeout_ms == 0) {
            *timeout_ms = 1;
        }
    }

    unpack_budget budget;
    unpack_budget_init(&budget, len, HTTP_BUDGET_FACTOR, HTTP_BUDGET_MIN);
    ProtobufCAllocator alloc = unpack_budget_allocator(&budget);
    protojson_limits limits = {s->max_message, 0};
    ProtobufCMessage *in = NULL;
    char err[256];
    int rc = protojson_decode(md->input, len > 0 ? body : "{}", len > 0 ? len : 2, &alloc, &limits,
                              &in, err, sizeof err);
    if (rc != PROTOJSON_OK) {
        if (budget.exhausted || rc == PROTOJSON_ELIMIT) {
            http_fail(aio, RPC_RESOURCE_EXHAUSTED, "%s: %s", md->input->name,
                      budget.exhausted ? "decoding needs more memory than the limit" : err);
        } else {
            http_fail(aio, RPC_INVALID_ARGUMENT, "%s: %s", md->input->name, err);
        }
        return -1;
    }
    size_t plen = protobuf_c_message_get_packed_size(in);
    uint8_t *payload = malloc(plen > 0 ? plen : 1);
    if (payload == NULL) {
        protobuf_c_message_free_unpacked(in, &alloc);
        http_fail(aio, RPC_RESOURCE_EXHAUSTED, "out of memory");
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
    env.method = (char *)path;
    env.payload.data = payload;
    env.payload.len = plen;
    env.metadata = meta;
    for (size_t h = 0; h < HTTP_META; h++) {
        const char *v = nng_http_req_get_header(req, headers[h][0]);
        if (v == NULL) {
            continue;
        }
        charter__v1__rpc_request__metadata_entry__init(&entries[env.n_metadata]);
        entries[env.n_metadata].key = (char *)headers[h][1];
        entries[env.n_metadata].value = (char *)v;
        meta[env.n_metadata] = &entries[env.n_metadata];
        env.n_metadata++;
    }
    env.timeout_ms = *timeout_ms;
    size_t n = charter__v1__rpc_request__get_packed_size(&env);
    nng_msg *m = NULL;
    if (nng_msg_alloc(&m, n) != 0) {
        free(payload);
        http_fail(aio, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return -1;
    }
    charter__v1__rpc_request__pack(&env, nng_msg_body(m));
    free(payload);
    *out = m;
    return 0;
}

static void http_call(http_server *s, nng_aio *aio, nng_http_req *req, const char *path)
{
    const ProtobufCMethodDescriptor *md = dispatch_method(path);
    if (md == NULL) {
        char shown[129];
        size_t k = 0;
        for (const char *p = path; *p != '\0' && k + 1 < sizeof shown; p++) {
            shown[k++] = isprint((unsigned char)*p) ? *p : '?';
        }
        shown[k] = '\0';
        http_fail(aio, RPC_UNIMPLEMENTED, "unknown method \"%s\"", shown);
        return;
    }
    if (strcmp(nng_http_req_get_method(req), "POST") != 0) {
        http_fail(aio, RPC_UNIMPLEMENTED, "%s takes POST (a Connect unary call)", path);
        return;
    }
    if (!http_json_content_type(nng_http_req_get_header(req, "Content-Type"))) {
        nng_http_res *res = http_error_res(
            RPC_INVALID_ARGUMENT, "send Content-Type: application/json (the proto3 JSON mapping)");
        if (res != NULL && (nng_http_res_set_status(res, 415) != 0 ||
                            nng_http_res_set_header(res, "Accept-Post", "application/json") != 0)) {
            nng_http_res_free(res);
            res = NULL;
        }
        http_finish(aio, res);
        return;
    }
    if (nng_http_req_get_header(req, "Transfer-Encoding") != NULL) {
        /* NNG reads only Content-Length bodies: a chunked one would arrive empty. */
        http_fail(aio, RPC_INVALID_ARGUMENT,
                  "send the body with Content-Length (chunked bodies are not read)");
        return;
    }
    http_job *j = http_job_take(s);
    if (j == NULL) {
        pthread_mutex_lock(&s->mu);
        bool stopping = s->stopping;
        pthread_mutex_unlock(&s->mu);
        if (stopping)
            http_fail(aio, RPC_UNAVAILABLE, "server is shutting down (retry on another charterd)");
        else
            http_fail(aio, RPC_RESOURCE_EXHAUSTED,
                      "server busy: %u HTTP calls in progress (retry later)", s->n_jobs);
        return;
    }
    uint32_t timeout_ms = 0;
    nng_msg *m = NULL;
    if (http_envelope(s, aio, req, path, md, &timeout_ms, &m) != 0) {
        http_job_give(j);
        return;
    }
    j->md = md;
    j->state = JOB_SEND;
    pthread_mutex_lock(&j->mu);
    j->http_aio = aio;
    pthread_mutex_unlock(&j->mu);
    nng_aio_defer(aio, http_cancel, j);
    nng_aio_set_timeout(j->aio,
                        (nng_duration)(timeout_ms > 0 ? timeout_ms : (uint32_t)s->max_timeout_ms) +
                            HTTP_DEADLINE_MARGIN_MS);
    nng_aio_set_msg(j->aio, m);
    nng_ctx_send(j->ctx, j->aio);
}

/* GET /readyz: a Health/Check through the same queue and workers as every call, so "ready"
 * means a worker reached the database and found the query library, within 2 s. */
static void http_readyz(http_server *s, nng_aio *aio)
{
    http_job *j = http_job_take(s);
    if (j == NULL) {
        http_finish(aio, http_res(503, "{\"ready\":false,\"reason\":\"busy\"}"));
        return;
    }
    Charter__V1__RpcRequest env = CHARTER__V1__RPC_REQUEST__INIT;
    env.method = "/charter.v1.Health/Check";
    env.timeout_ms = 2000;
    nng_msg *m = NULL;
    if (nng_msg_alloc(&m, charter__v1__rpc_request__get_packed_size(&env)) != 0) {
        http_job_give(j);
        http_finish(aio, NULL);
        return;
    }
    charter__v1__rpc_request__pack(&env, nng_msg_body(m));
    j->md = dispatch_method(env.method);
    j->readyz = true;
    j->state = JOB_SEND;
    pthread_mutex_lock(&j->mu);
    j->http_aio = aio;
    pthread_mutex_unlock(&j->mu);
    nng_aio_defer(aio, http_cancel, j);
    nng_aio_set_timeout(j->aio, 2000 + HTTP_DEADLINE_MARGIN_MS);
    nng_aio_set_msg(j->aio, m);
    nng_ctx_send(j->ctx, j->aio);
}

/* GET /metrics: the process's counters (metrics.h) in the Prometheus text format. */
static void http_metrics(nng_aio *aio)
{
    char *text = NULL;
    size_t len = 0;
    nng_http_res *res = NULL;
    if (metrics_render(&text, &len) == 0 && nng_http_res_alloc(&res) == 0) {
        if (nng_http_res_set_header(res, "Content-Type",
                                    "text/plain; version=0.0.4; "
                                    "charset=utf-8") != 0 ||
            nng_http_res_set_header(res, "Cache-Control", "no-store") != 0 ||
            nng_http_res_set_header(res, "X-Content-Type-Options", "nosniff") != 0 ||
            nng_http_res_copy_data(res, text, len) != 0) {
            nng_http_res_free(res);
            res = NULL;
        }
    }
    free(text);
    http_finish(aio, res);
}

/* The console's files, compiled in (CMakeLists.txt, charter_embed). */
extern const char console_html[], console_js[], console_css[];
extern const size_t console_html_len, console_js_len, console_css_len;

/* A console file with the headers that keep a page of it to itself: no script but its own
 * files (so no inline script can run), no framing, no referrer, nothing sniffed or cached. */
static void http_console(nng_aio *aio, const char *path)
{
    const char *data = NULL, *type = NULL;
    size_t len = 0;
    if (strcmp(path, "/") == 0 || strcmp(path, "/index.html") == 0) {
        data = console_html, len = console_html_len, type = "text/html; charset=utf-8";
    } else if (strcmp(path, "/console.js") == 0) {
        data = console_js, len = console_js_len, type = "text/javascript; charset=utf-8";
    } else if (strcmp(path, "/console.css") == 0) {
        data = console_css, len = console_css_len, type = "text/css; charset=utf-8";
    }
    nng_http_res *res = NULL;
    if (data == NULL) {
        http_fail(aio, RPC_NOT_FOUND, "no such page");
        return;
    }
    if (nng_http_res_alloc(&res) == 0 &&
        (nng_http_res_set_header(res, "Content-Type", type) != 0 ||
         nng_http_res_set_header(res, "Content-Security-Policy",
                                 "default-src 'none'; script-src 'self'; style-src 'self'; "
                                 "img-src 'self'; connect-src 'self'; base-uri 'none'; "
                                 "form-action 'none'; frame-ancestors 'none'") != 0 ||
         nng_http_res_set_header(res, "X-Content-Type-Options", "nosniff") != 0 ||
         nng_http_res_set_header(res, "X-Frame-Options", "DENY") != 0 ||
         nng_http_res_set_header(res, "Referrer-Policy", "no-referrer") != 0 ||
         nng_http_res_set_header(res, "Cache-Control", "no-store") != 0 ||
         nng_http_res_copy_data(res, data, len) != 0)) {
        nng_http_res_free(res);
        res = NULL;
    }
    http_finish(aio, res);
}

static void http_handle(nng_aio *aio)
{
    nng_http_req *req = nng_aio_get_input(aio, 0);
    nng_http_handler *h = nng_aio_get_input(aio, 1);
    http_server *s = nng_http_handler_get_data(h);
    const char *host = nng_http_req_get_header(req, "Host");
    if (!http_host_ok(s, host)) {
        http_fail(aio, RPC_PERMISSION_DENIED,
                  "Host \"%.64s\" is not this server (call it by a loopback name, or start "
                  "charterd with --http-allow-host NAME)",
                  host != NULL ? host : "");
        return;
    }
    if (!http_origin_ok(nng_http_req_get_header(req, "Origin"), host)) {
        http_fail(aio, RPC_PERMISSION_DENIED, "cross-origin calls are refused");
        return;
    }
    char path[256];
    const char *uri = nng_http_req_get_uri(req);
    size_t n = strcspn(uri, "?#");
    if (n >= sizeof path) {
        http_fail(aio, RPC_UNIMPLEMENTED, "unknown path");
        return;
    }
    memcpy(path, uri, n);
    path[n] = '\0';
    if (strcmp(path, "/healthz") == 0) {
        const char *m = nng_http_req_get_method(req);
        if (strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0) {
            http_fail(aio, RPC_UNIMPLEMENTED, "/healthz takes GET");
            return;
        }
        http_finish(aio, http_res(200, "{\"status\":\"serving\"}"));
        return;
    }
    const char *verb = nng_http_req_get_method(req);
    bool get = strcmp(verb, "GET") == 0 || strcmp(verb, "HEAD") == 0;
    if (get && strcmp(path, "/readyz") == 0) {
        http_readyz(s, aio);
        return;
    }
    if (get && strcmp(path, "/metrics") == 0) {
        http_metrics(aio);
        return;
    }
    if (get && strncmp(path, "/charter.v1.", 12) != 0) {
        http_console(aio, path);
        return;
    }
    http_call(s, aio, req, path);
}

/* --- setup and teardown ------------------------------------------------------------------- */

static void http_free(http_server *s)
{
    if (s->srv != NULL) {
        if (s->started) {
            nng_http_server_stop(s->srv);
        }
        nng_http_server_release(s->srv);
    }
    if (s->req_open) {
        nng_close(s->req);
    }
    for (unsigned i = 0; i < s->n_jobs; i++) {
        if (s->jobs[i].aio != NULL) {
            nng_aio_stop(s->jobs[i].aio);
            nng_aio_free(s->jobs[i].aio);
        }
        pthread_mutex_destroy(&s->jobs[i].mu);
    }
    free(s->jobs);
    free(s->allow_host);
    pthread_cond_destroy(&s->idle_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int http_start(const http_opts *o, http_server **out, char *err, size_t errlen)
{
    *out = NULL;
    char hostport[HTTP_HOST_MAX + 8];
    if (hostport_parse(o->addr, hostport, sizeof hostport) != 0) {
        snprintf(err, errlen, "--http needs HOST:PORT or PORT, got \"%s\" (e.g. 127.0.0.1:8080)",
                 o->addr != NULL ? o->addr : "");
        return -1;
    }
    http_server *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory starting the HTTP listener (free some memory)");
        return -1;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle_cv, NULL);
    s->max_message = o->max_message;
    s->max_timeout_ms = o->max_timeout_ms > 0 ? o->max_timeout_ms : 60000;
    http_host_part(hostport, s->listen_host, sizeof s->listen_host);
    if (o->allow_host != NULL && (s->allow_host = strdup(o->allow_host)) == NULL) {
        http_free(s);
        snprintf(err, errlen, "out of memory starting the HTTP listener (free some memory)");
        return -1;
    }
    s->n_jobs = o->max_inflight > 0 ? o->max_inflight : 1;
    s->jobs = calloc(s->n_jobs, sizeof *s->jobs);
    if (s->jobs == NULL) {
        s->n_jobs = 0;
        http_free(s);
        snprintf(err, errlen, "out of memory starting the HTTP listener (lower --queue)");
        return -1;
    }
    for (unsigned i = 0; i < s->n_jobs; i++) {
        pthread_mutex_init(&s->jobs[i].mu, NULL);
    }

    int rv;
    if ((rv = nng_req0_open(&s->req)) != 0) {
        http_free(s);
        snprintf(err, errlen, "cannot open the HTTP listener's socket: %s (check NNG)",
                 nng_strerror(rv));
        return -1;
    }
    s->req_open = true;
    /* A request is never sent twice: a resend would run a call twice. */
    if ((rv = nng_socket_set_ms(s->req, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_socket_set_size(s->req, NNG_OPT_RECVMAXSZ, HTTP_MAX_REPLY)) != 0 ||
        (rv = nng_dial(s->req, o->rpc_url, NULL, 0)) != 0) {
        http_free(s);
        snprintf(err, errlen, "cannot connect the HTTP listener to %s: %s (check NNG)", o->rpc_url,
                 nng_strerror(rv));
        return -1;
    }
    for (unsigned i = 0; i < s->n_jobs; i++) {
        http_job *j = &s->jobs[i];
        j->s = s;
        if ((rv = nng_aio_alloc(&j->aio, http_job_cb, j)) != 0 ||
            (rv = nng_ctx_open(&j->ctx, s->req)) != 0) {
            http_free(s);
            snprintf(err, errlen, "cannot create the HTTP listener's contexts: %s (lower --queue)",
                     nng_strerror(rv));
            return -1;
        }
        j->next = s->free_jobs;
        s->free_jobs = j;
    }

    char url[HTTP_HOST_MAX + 16];
    snprintf(url, sizeof url, "http://%s", hostport);
    nng_url *u = NULL;
    nng_http_handler *h = NULL;
    if ((rv = nng_url_parse(&u, url)) != 0) {
        http_free(s);
        snprintf(err, errlen, "--http %s is not a listen address: %s (use HOST:PORT)", o->addr,
                 nng_strerror(rv));
        return -1;
    }
    rv = nng_http_server_hold(&s->srv, u);
    nng_url_free(u);
    if (rv != 0) {
        s->srv = NULL;
        http_free(s);
        snprintf(err, errlen, "cannot create the HTTP server on %s: %s (check --http)", hostport,
                 nng_strerror(rv));
        return -1;
    }
    /* One handler for the whole tree, every method: it answers unknown paths and wrong
     * methods itself, with Connect error bodies. Bodies up to twice the limit are read so the
     * answer can say RESOURCE_EXHAUSTED; NNG refuses larger ones with 400 before reading. */
    if ((rv = nng_http_handler_alloc(&h, "/", http_handle)) != 0 ||
        (rv = nng_http_handler_set_method(h, NULL)) != 0 ||
        (rv = nng_http_handler_set_tree(h)) != 0 ||
        (rv = nng_http_handler_collect_body(h, true, s->max_message * 2)) != 0 ||
        (rv = nng_http_handler_set_data(h, s, NULL)) != 0 ||
        (rv = nng_http_server_add_handler(s->srv, h)) != 0) {
        if (h != NULL) {
            nng_http_handler_free(h);
        }
        http_free(s);
        snprintf(err, errlen, "cannot set up the HTTP handler: %s (check NNG)", nng_strerror(rv));
        return -1;
    }
    if ((rv = nng_http_server_start(s->srv)) != 0) {
        http_free(s);
        snprintf(err, errlen,
                 "cannot listen for HTTP on %s: %s (is the port taken? pick another --http)",
                 hostport, nng_strerror(rv));
        return -1;
    }
    s->started = true;
    *out = s;
    return 0;
}

void http_stop(http_server *s)
{
    if (s == NULL) {
        return;
    }
    /* Calls already accepted are answered before the connections close (a caller must learn
     * whether its call took effect); calls arriving meanwhile get 503 "shutting down". The wait
     * is bounded: past it, the answers still owed are dropped and logged. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    while (s->busy > 0) {
        if (pthread_cond_timedwait(&s->idle_cv, &s->mu, &deadline) != 0) {
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    nng_http_server_stop(s->srv);
    s->started = false;
    pthread_mutex_lock(&s->mu);
    while (s->busy > 0) {
        if (pthread_cond_timedwait(&s->idle_cv, &s->mu, &deadline) != 0) {
            break;
        }
    }
    unsigned left = s->busy;
    pthread_mutex_unlock(&s->mu);
    if (left > 0) {
        log_error("stopping the HTTP listener with %u calls unanswered", left);
    }
    http_free(s);
}
