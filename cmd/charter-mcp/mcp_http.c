/*
 * mcp_http.c - the Streamable HTTP transport of charter-mcp (MCP revision 2025-11-25, also
 * 2025-06-18 and 2025-03-26) on libmicrohttpd: one endpoint, /mcp. POST carries one JSON-RPC
 * message and gets its answer as JSON (or as one SSE event when the client accepts only
 * text/event-stream); initialize issues an Mcp-Session-Id; DELETE ends a session; GET is 405
 * since the server offers no stream of its own. Host and Origin must be loopback names (DNS
 * rebinding), and a bearer credential is required unless --http-no-auth was given.
 *
 * Everything that needs no body is decided on the headers, before a byte of the body is read:
 * Host, Origin, the credential, the method, Accept, Content-Type, and a declared length above
 * MCP_HTTP_BODY_LIMIT (413). A body is kept up to MCP_MAX_MESSAGE; a longer one (up to the body
 * limit, and only from a client holding a credential) is counted and dropped, and answered with
 * the JSON-RPC error a longer stdio line gets. Each connection has its own libmicrohttpd thread
 * (tool calls wait for charterd), at most --http-max-connections of them; headers and body have
 * total deadlines (server/rpc/http_guard.h).
 *
 * Sessions live in a table under one short lock (find, create, end); each session's requests
 * are serialized by the session's own lock, so one session's slow tool call never holds
 * another's. charterd is reached through one libcharter client, which is thread-safe (a context
 * per call). A session belongs to the credential that opened it: another credential's requests
 * do not find it, and each credential holds at most --http-sessions-per-credential sessions.
 *
 * In conformance-fixture mode (--conformance-fixture, a test mode) a session's tool call is
 * answered on a stream that a thread of its own writes (mcp_sse.c), a GET with Last-Event-ID
 * resumes such a stream, and a POST without a session may be a 2026-07-28 stateless request
 * (mcp_stateless.c).
 */
#include <ctype.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "rpc/http_guard.h"
#include "mcp.h"
#include "mcp_sse.h"

/* A session unused this long is gone (its next request gets 404, and the client initializes
 * anew, as the MCP transport specifies); with every slot taken, a new session replaces the one
 * unused longest if that one has been idle at least SESSION_EVICT_S. Seconds. */
#define SESSION_IDLE_S (30 * 60)
#define SESSION_EVICT_S 60
#define WHY_EXPIRED "the MCP session expired (unused for 30 minutes)"
/* Bodies above this are refused on their headers (413); between MCP_MAX_MESSAGE and this, a
 * client holding a credential gets the JSON-RPC error for an oversized message. */
#define MCP_HTTP_BODY_LIMIT (4 * MCP_MAX_MESSAGE)
/* A request refused on its headers with a body of at most this many bytes (or a chunked one)
 * has the body drained, never kept, before the answer; a larger one is not read at all. */
#define MCP_HTTP_DRAIN_MAX ((size_t)16 * 1024)
/* libmicrohttpd's memory per connection: the request line and headers must fit (else 431). */
#define MCP_HTTP_CONNECTION_MEMORY ((size_t)64 * 1024)
/* Descriptors kept free besides those open at start: the connection to charterd, stdio. */
#define MCP_HTTP_FD_RESERVE 64
/* Streamed answers a fixture session keeps for resumption (Last-Event-ID); older ones go. */
#define HTTP_SSE_KEPT 8

typedef struct {
    bool used;           /* the slot holds a session (live, or ending while busy) */
    bool ending;         /* ended (DELETE, eviction): not found any more; reset when idle */
    const char *end_why; /* why it ended (static text), for the runs it started */
    char id[33];
    size_t cred;        /* the credential that opened it */
    time_t last_used;   /* CLOCK_MONOTONIC seconds of its last request */
    unsigned busy;      /* requests holding it now */
    pthread_mutex_t mu; /* serializes the session's requests: s is not shared */
    mcp_session s;
    /* Fixture mode: the session's streamed answers, newest last (under the table's lock). */
    mcp_sse *streams[HTTP_SSE_KEPT];
    unsigned n_streams; /* streams made so far: the next one's number */
} http_session;

typedef struct {
    mcp_server *srv;
    const mcp_http_opts *o;
    unsigned char (*digests)[SHA256_DIGEST_LENGTH]; /* of the credentials; none: no auth */
    size_t n_creds;
    pthread_mutex_t mu; /* guards the table's slots (not the sessions' contents) */
    http_session *sessions;
    size_t n_sessions;
    unsigned jobs;          /* fixture tool calls running on threads of their own (under mu) */
    pthread_cond_t jobs_cv; /* signalled when one ends */
} http_state;

typedef enum { REQ_POST, REQ_DELETE, REQ_GET } http_req_kind;

/* One request from its headers to its completion. */
typedef struct {
    http_req_kind kind;
    size_t cred;
    unsigned refused;     /* refused on the headers with this status: drained, then answered */
    const char *why;      /* the refusal's message (static) */
    bool json_ok, sse_ok; /* what the client accepts */
    char *body;
    size_t len, cap;
    size_t dropped; /* > 0: the body passed MCP_MAX_MESSAGE; its length so far */
} http_req;

/* Whether a Host or an Origin's host[:port] names this machine's loopback. */
static bool loopback_host(const char *h, size_t n)
{
    static const char *const names[] = {"127.0.0.1", "localhost", "[::1]"};
    for (size_t i = 0; i < 3; i++) {
        size_t l = strlen(names[i]);
        if (n >= l && strncasecmp(h, names[i], l) == 0 && (n == l || h[l] == ':'))
            return true;
    }
    return false;
}

static bool origin_ok(const char *origin)
{
    if (!origin)
        return true; /* not a browser */
    const char *p = strstr(origin, "://");
    if (!p)
        return false;
    p += 3;
    size_t n = strcspn(p, "/");
    return loopback_host(p, n);
}

/* The index of the credential an Authorization header presents in *cred; false when none
 * matches. Every credential is compared (digests, constant time), so the time taken does not
 * tell which came close. */
static bool bearer_ok(const http_state *hs, const char *auth, size_t *cred)
{
    *cred = 0;
    if (hs->n_creds == 0)
        return true;
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return false;
    unsigned char d[SHA256_DIGEST_LENGTH];
    if (!SHA256((const unsigned char *)auth + 7, strlen(auth + 7), d))
        return false;
    bool found = false;
    for (size_t i = 0; i < hs->n_creds; i++) {
        bool eq = CRYPTO_memcmp(d, hs->digests[i], sizeof d) == 0;
        if (eq && !found)
            *cred = i;
        found |= eq;
    }
    return found;
}

static time_t mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec;
}

/* --- sessions (every function here is called with hs->mu held) --------------------------- */

/* The external runs of sessions that ended, each with why its session ended, until they are
 * completed (complete_ended): a CompleteRun is a call to charterd, never made while the
 * table's lock holds up every other session. Under hs->mu (there is one table). */
typedef struct {
    mcp_run_id run_id;
    const char *why;
} http_ended_run;
static http_ended_run *ended_runs;
static size_t n_ended_runs;

/* Moves the runs s started to the runs to complete. */
static void ended_queue(mcp_session *s, const char *why)
{
    mcp_run_id *runs = NULL;
    size_t n = mcp_session_take_runs(s, &runs);
    http_ended_run *more = n ? realloc(ended_runs, (n_ended_runs + n) * sizeof *more) : NULL;
    if (n > 0 && more == NULL)
        fprintf(stderr, "charter-mcp: out of memory: %zu runs of an ended session are left open\n",
                n);
    for (size_t i = 0; more != NULL && i < n; i++) {
        memcpy(more[n_ended_runs].run_id, runs[i], sizeof(mcp_run_id));
        more[n_ended_runs++].why = why;
    }
    if (more != NULL)
        ended_runs = more;
    free(runs);
}

/* Ends h now if nothing holds it, else when the last request holding it is done; why (static
 * text; NULL: the one given first) is what the runs it started are completed with. */
static void session_end(http_session *h, const char *why)
{
    if (!h->ending || h->end_why == NULL)
        h->end_why = why;
    h->ending = true;
    if (h->busy > 0)
        return;
    ended_queue(&h->s, h->end_why != NULL ? h->end_why : "the MCP session ended");
    mcp_session_reset(&h->s);
    for (size_t i = 0; i < HTTP_SSE_KEPT; i++) {
        mcp_sse_unref(h->streams[i]);
        h->streams[i] = NULL;
    }
    h->n_streams = 0;
    h->used = false;
    h->ending = false;
    h->end_why = NULL;
    h->id[0] = '\0';
}

/* The live session id of credential cred, taken (busy); NULL when unknown, ended, expired or
 * another credential's. */
static http_session *session_take(http_state *hs, const char *id, size_t cred)
{
    time_t now = mono_s();
    for (size_t i = 0; id && i < hs->n_sessions; i++) {
        http_session *h = &hs->sessions[i];
        if (!h->used || h->ending || h->cred != cred || strcmp(h->id, id) != 0)
            continue;
        if (h->busy == 0 && now - h->last_used >= SESSION_IDLE_S) {
            session_end(h, WHY_EXPIRED);
            return NULL;
        }
        h->busy++;
        h->last_used = now;
        return h;
    }
    return NULL;
}

static void session_give(http_session *h)
{
    h->busy--;
    h->last_used = mono_s();
    if (h->ending)
        session_end(h, NULL);
}

/* The least recently used session that may be replaced: not busy, idle at least
 * SESSION_EVICT_S, of credential cred (or of any when any). */
static http_session *session_victim(http_state *hs, size_t cred, bool any, time_t now)
{
    http_session *oldest = NULL;
    for (size_t i = 0; i < hs->n_sessions; i++) {
        http_session *h = &hs->sessions[i];
        if (!h->used || h->ending || h->busy > 0 || (!any && h->cred != cred) ||
            now - h->last_used < SESSION_EVICT_S)
            continue;
        if (!oldest || h->last_used < oldest->last_used)
            oldest = h;
    }
    return oldest;
}

/* A new session of credential cred, taken (busy); NULL with *why when the credential holds
 * its share of sessions, or every slot is held, none idle long enough to be replaced. */
static http_session *session_new(http_state *hs, size_t cred, const char **why)
{
    time_t now = mono_s();
    size_t mine = 0, live = 0;
    for (size_t i = 0; i < hs->n_sessions; i++) {
        http_session *h = &hs->sessions[i];
        if (h->used && !h->ending && h->busy == 0 && now - h->last_used >= SESSION_IDLE_S)
            session_end(h, WHY_EXPIRED);
        if (h->used && !h->ending) {
            live++;
            mine += h->cred == cred;
        }
    }
    /* Without credentials (--http-no-auth) there is no one to count sessions for. */
    if (hs->n_creds > 0 && mine >= hs->o->sessions_per_credential) {
        http_session *v = session_victim(hs, cred, false, now);
        if (!v) {
            *why = "too many sessions for this credential (end one with DELETE)";
            return NULL;
        }
        session_end(v, "the MCP session was replaced by a new one of its credential");
    } else if (live >= hs->n_sessions) {
        http_session *v = session_victim(hs, cred, true, now);
        if (v)
            session_end(v, "the MCP session was replaced: every session slot was taken");
    }
    for (size_t i = 0; i < hs->n_sessions; i++) {
        http_session *h = &hs->sessions[i];
        if (h->used)
            continue;
        unsigned char rnd[16];
        if (RAND_bytes(rnd, sizeof rnd) != 1) {
            *why = "no random bytes for a session id";
            return NULL;
        }
        for (size_t k = 0; k < sizeof rnd; k++)
            snprintf(h->id + 2 * k, 3, "%02x", rnd[k]);
        memset(&h->s, 0, sizeof h->s);
        h->used = true;
        h->ending = false;
        h->cred = cred;
        h->busy = 1;
        h->last_used = now;
        return h;
    }
    *why = "too many sessions";
    return NULL;
}

/* Completes the runs of the sessions that ended (ended_queue), outside the table's lock. */
static void complete_ended(http_state *hs)
{
    pthread_mutex_lock(&hs->mu);
    http_ended_run *runs = ended_runs;
    size_t n = n_ended_runs;
    ended_runs = NULL;
    n_ended_runs = 0;
    pthread_mutex_unlock(&hs->mu);
    for (size_t i = 0; i < n; i++)
        mcp_complete_run(hs->srv, runs[i].run_id, runs[i].why);
    free(runs);
}

/* --- answers ------------------------------------------------------------------------------ */

/* Queues an answer with status and, when body is not NULL, a JSON (or SSE) body. */
static enum MHD_Result answer(struct MHD_Connection *mc, unsigned status, const char *body,
                              bool sse, const char *session)
{
    char *ev = NULL;
    const char *data = body ? body : "";
    if (body && sse) {
        size_t n = strlen(body) + 32;
        if (!(ev = malloc(n)))
            return MHD_NO;
        snprintf(ev, n, "event: message\ndata: %s\n\n", body);
        data = ev;
    }
    struct MHD_Response *res =
        MHD_create_response_from_buffer(strlen(data), (void *)data, MHD_RESPMEM_MUST_COPY);
    free(ev);
    if (!res)
        return MHD_NO;
    bool ok = true;
    if (session)
        ok = MHD_add_response_header(res, "Mcp-Session-Id", session) == MHD_YES;
    if (ok && status == 405)
        ok = MHD_add_response_header(res, "Allow", "POST, DELETE") == MHD_YES;
    if (ok && status == 401)
        ok = MHD_add_response_header(res, "WWW-Authenticate", "Bearer") == MHD_YES;
    if (ok && body)
        ok = MHD_add_response_header(res, "Content-Type",
                                     sse ? "text/event-stream" : "application/json") == MHD_YES;
    enum MHD_Result rc = ok ? MHD_queue_response(mc, status, res) : MHD_NO;
    MHD_destroy_response(res);
    return rc;
}

static enum MHD_Result answer_error(struct MHD_Connection *mc, unsigned status, int code,
                                    const char *message)
{
    char *text = mcp_jsonrpc_error_text(NULL, code, message);
    if (!text)
        return MHD_NO;
    enum MHD_Result rc = answer(mc, status, text, false, NULL);
    free(text);
    return rc;
}

/* --- requests ----------------------------------------------------------------------------- */

static const char *header(struct MHD_Connection *mc, const char *name)
{
    return MHD_lookup_connection_value(mc, MHD_HEADER_KIND, name);
}

/* Whether the message (raw) is an initialize request; no parse of ours, jansson's. */
static bool is_initialize(const void *body, size_t len)
{
    json_t *m = len <= MCP_MAX_MESSAGE ? json_loadb(body, len, 0, NULL) : NULL;
    const char *method = json_string_value(json_object_get(m, "method"));
    bool yes = method && strcmp(method, "initialize") == 0;
    json_decref(m);
    return yes;
}

/* The checks of the headers, in the order the answer names the first failure: 0 with r filled
 * in, or the status of the refusal with its message in *why. */
static unsigned check_headers(http_state *hs, struct MHD_Connection *mc, const char *method,
                              http_req *r, const char **why)
{
    const char *host = header(mc, "Host");
    if (!host || !loopback_host(host, strlen(host)) || !origin_ok(header(mc, "Origin"))) {
        *why = "Forbidden: Host or Origin not allowed";
        return 403;
    }
    if (!bearer_ok(hs, header(mc, "Authorization"), &r->cred)) {
        *why = "Unauthorized: bearer credential required";
        return 401;
    }
    bool post = strcmp(method, "POST") == 0;
    bool get = strcmp(method, "GET") == 0 && hs->srv->fixture;
    if (!post && !get && strcmp(method, "DELETE") != 0) {
        *why = "Method Not Allowed: no server stream";
        return 405;
    }
    r->kind = post ? REQ_POST : get ? REQ_GET : REQ_DELETE;
    const char *te = header(mc, "Transfer-Encoding");
    const char *cl = header(mc, "Content-Length");
    unsigned long long declared = cl && !te ? strtoull(cl, NULL, 10) : 0;
    if (!post) {
        *why = "Bad Request: GET and DELETE take no body";
        return declared > 0 || te ? 400 : 0;
    }
    const char *accept = header(mc, "Accept");
    const char *ctype = header(mc, "Content-Type");
    r->json_ok = !accept || strstr(accept, "application/json") || strstr(accept, "*/*");
    r->sse_ok = accept && strstr(accept, "text/event-stream");
    if (!r->json_ok && !r->sse_ok) {
        *why = "Not Acceptable: accept application/json or text/event-stream";
        return 406;
    }
    if (!ctype || strncasecmp(ctype, "application/json", 16) != 0) {
        *why = "Unsupported Media Type: Content-Type must be application/json";
        return 415;
    }
    if (declared > MCP_HTTP_BODY_LIMIT) {
        _Static_assert(MCP_MAX_MESSAGE == 1048576, "the message below names the limit");
        *why = "Content Too Large: message larger than 1048576 bytes";
        return 413;
    }
    if (declared > MCP_MAX_MESSAGE)
        r->dropped = 1; /* counted and dropped from the first byte */
    return 0;
}

/* The first call, headers only. Returns the request to go on with, or NULL after queueing the
 * answer in *rc. A request refused here never has its body kept: when it declares more than
 * MCP_HTTP_DRAIN_MAX bytes the answer goes out at once (and libmicrohttpd closes the
 * connection, the body unread); a smaller or chunked body is drained, counted and dropped, and
 * the refusal answered when it ends, because clients that write their whole body before
 * reading (Node's fetch, say) lose an answer sent while they still write. */
static http_req *begin(http_state *hs, struct MHD_Connection *mc, const char *method,
                       enum MHD_Result *rc)
{
    http_req *r = calloc(1, sizeof *r);
    if (!r) {
        *rc = MHD_NO;
        return NULL;
    }
    const char *why = NULL;
    unsigned status = check_headers(hs, mc, method, r, &why);
    if (status == 0)
        return r;
    const char *te = header(mc, "Transfer-Encoding");
    const char *cl = header(mc, "Content-Length");
    if (!te && cl && strtoull(cl, NULL, 10) > MCP_HTTP_DRAIN_MAX) {
        free(r);
        *rc = answer_error(mc, status, MCP_INVALID_REQUEST, why);
        return NULL;
    }
    r->refused = status;
    r->why = why;
    r->dropped = 0;
    return r;
}

/* One piece of the body: kept up to MCP_MAX_MESSAGE, then counted. Returns 0, or -1 to drop
 * the connection (out of memory, or a chunked body past MCP_HTTP_BODY_LIMIT). */
static int take(http_req *r, const char *data, size_t n)
{
    if (r->dropped == 0 && n > MCP_MAX_MESSAGE - r->len) {
        r->dropped = r->len;
        free(r->body);
        r->body = NULL;
        r->len = r->cap = 0;
    }
    if (r->dropped > 0) {
        r->dropped += n;
        return r->dropped > MCP_HTTP_BODY_LIMIT ? -1 : 0;
    }
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n)
            cap = cap > MCP_MAX_MESSAGE / 2 ? MCP_MAX_MESSAGE : cap * 2;
        char *b = realloc(r->body, cap);
        if (!b)
            return -1;
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    return 0;
}

/* --- the conformance fixture: streamed answers, resumption, stateless requests ------------- */

static void stream_notify(void *ctx, const json_t *msg)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    if (text)
        mcp_sse_append(ctx, text);
    free(text);
}

static json_t *stream_ask(void *ctx, json_t *request, unsigned timeout_ms)
{
    return mcp_sse_ask(ctx, request, timeout_ms);
}

static void stream_cut(void *ctx)
{
    mcp_sse_cut(ctx);
}

static const char *header_get(void *ctx, const char *name)
{
    return header(ctx, name);
}

/* Queues a text/event-stream answer that reads st (after: as mcp_sse_response). */
static enum MHD_Result answer_stream(struct MHD_Connection *mc, mcp_sse *st, long after)
{
    struct MHD_Response *res = mcp_sse_response(st, after);
    if (!res)
        return MHD_NO;
    bool ok = MHD_add_response_header(res, "Content-Type", "text/event-stream") == MHD_YES &&
              MHD_add_response_header(res, "Cache-Control", "no-cache") == MHD_YES;
    enum MHD_Result rc = ok ? MHD_queue_response(mc, 200, res) : MHD_NO;
    MHD_destroy_response(res);
    return rc;
}

/* A new stream of session h, kept for resumption (called with hs->mu held); the caller's
 * reference, or NULL when out of memory. */
static mcp_sse *session_stream(http_session *h)
{
    mcp_sse *st = mcp_sse_new(++h->n_streams, true);
    if (!st)
        return NULL;
    mcp_sse_unref(h->streams[0]);
    memmove(h->streams, h->streams + 1, (HTTP_SSE_KEPT - 1) * sizeof *h->streams);
    mcp_sse_ref(st);
    h->streams[HTTP_SSE_KEPT - 1] = st;
    return st;
}

/* A tool call answered on a stream: run on its own thread, holding the session's lock and its
 * busy count, while the connection's thread sends what the stream gets. */
typedef struct {
    http_state *hs;
    http_session *h;
    char *body;
    size_t len;
    mcp_sse *st;
} http_job;

static void *job_run(void *arg)
{
    http_job *j = arg;
    mcp_stream io = {j->st, stream_notify, stream_ask, stream_cut};
    char *reply = NULL;
    bool init = false;
    pthread_mutex_lock(&j->h->mu);
    j->h->s.stream = &io;
    int rc = mcp_jsonrpc_handle(j->hs->srv, &j->h->s, j->body, j->len, &reply, &init);
    j->h->s.stream = NULL;
    pthread_mutex_unlock(&j->h->mu);
    if (rc != 0 || !reply) {
        free(reply);
        reply = mcp_jsonrpc_error_text(NULL, MCP_INTERNAL_ERROR, "out of memory");
    }
    if (reply)
        mcp_sse_append(j->st, reply);
    mcp_sse_finish(j->st);
    pthread_mutex_lock(&j->hs->mu);
    session_give(j->h);
    j->hs->jobs--;
    pthread_cond_broadcast(&j->hs->jobs_cv);
    pthread_mutex_unlock(&j->hs->mu);
    mcp_sse_unref(j->st);
    free(reply);
    free(j->body);
    free(j);
    return NULL;
}

/* Starts the job of a streamed tool call in session h (taken); answers with its stream. */
static enum MHD_Result start_job(http_state *hs, struct MHD_Connection *mc, http_req *r,
                                 http_session *h, mcp_sse *st)
{
    http_job *j = calloc(1, sizeof *j);
    pthread_t t;
    pthread_attr_t attr;
    bool started = false;
    if (j && (j->body = malloc(r->len + 1)) && pthread_attr_init(&attr) == 0) {
        memcpy(j->body, r->body, r->len);
        *j = (http_job){hs, h, j->body, r->len, st};
        mcp_sse_ref(st);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_mutex_lock(&hs->mu);
        started = pthread_create(&t, &attr, job_run, j) == 0;
        hs->jobs += started;
        pthread_mutex_unlock(&hs->mu);
        pthread_attr_destroy(&attr);
        if (!started)
            mcp_sse_unref(st);
    }
    if (!started) {
        if (j)
            free(j->body);
        free(j);
        pthread_mutex_lock(&hs->mu);
        session_give(h);
        pthread_mutex_unlock(&hs->mu);
        return answer_error(mc, 500, MCP_INTERNAL_ERROR, "out of memory");
    }
    return answer_stream(mc, st, -1);
}

/* A POST in a fixture session that the fixture handles itself: the client's response to a
 * tool's request (handed to the waiting tool, whatever holds the session's lock), or a tool
 * call answered on a stream. false: the ordinary path serves it. */
static bool fixture_session_post(http_state *hs, struct MHD_Connection *mc, http_req *r,
                                 const char *sid, enum MHD_Result *rc)
{
    const char *pv = header(mc, "MCP-Protocol-Version");
    if (pv && !mcp_protocol_supported(pv))
        return false; /* refused on the ordinary path */
    json_t *m = json_loadb(r->body ? r->body : "", r->len, 0, NULL);
    const char *method = json_string_value(json_object_get(m, "method"));
    bool has_id = json_object_get(m, "id") != NULL;
    bool response =
        m && !method && has_id && (json_object_get(m, "result") || json_object_get(m, "error"));
    bool streamed = method && has_id && r->sse_ok && strcmp(method, "tools/call") == 0;
    http_session *h = NULL;
    mcp_sse *st = NULL;
    pthread_mutex_lock(&hs->mu);
    if ((response || streamed) && (h = session_take(hs, sid, r->cred)) && response) {
        for (size_t i = 0; i < HTTP_SSE_KEPT; i++)
            if (h->streams[i] && mcp_sse_deliver(h->streams[i], m))
                break;
        session_give(h);
    } else if (h && !(st = session_stream(h))) {
        session_give(h);
    }
    pthread_mutex_unlock(&hs->mu);
    json_decref(m);
    if (!h)
        return false;
    if (response)
        *rc = answer(mc, 202, NULL, false, NULL);
    else
        *rc = st ? start_job(hs, mc, r, h, st)
                 : answer_error(mc, 500, MCP_INTERNAL_ERROR, "out of memory");
    mcp_sse_unref(st);
    return true;
}

/* The answer of a stateless request: its JSON, or a stream when notifications came before it
 * or when it opened a subscriptions/listen stream. */
static enum MHD_Result stateless_answer(struct MHD_Connection *mc, http_req *r, mcp_sse *st,
                                        const mcp_stateless_answer *out)
{
    if (out->changed)
        mcp_sse_broadcast(out->changed);
    if (out->listen && mcp_sse_append(st, out->reply) == 0 &&
        mcp_sse_listen(st, out->listen_tools, out->listen_prompts, out->subscription) == 0)
        return answer_stream(mc, st, -1);
    if (!out->listen && out->reply && r->sse_ok && mcp_sse_has_events(st) &&
        mcp_sse_append(st, out->reply) == 0) {
        mcp_sse_finish(st);
        return answer_stream(mc, st, -1);
    }
    return answer(mc, out->status, out->reply, false, NULL);
}

/* A POST without a session in fixture mode: served here when it is a 2026-07-28 request. */
static bool fixture_stateless(struct MHD_Connection *mc, http_req *r, enum MHD_Result *rc)
{
    mcp_sse *st = mcp_sse_new(0, false);
    mcp_stream io = {st, stream_notify, NULL, stream_cut};
    mcp_session scratch = {0};
    scratch.stream = &io;
    mcp_headers hd = {header_get, mc};
    mcp_stateless_answer out = {0};
    int handled =
        st ? mcp_stateless_handle(&scratch, r->body ? r->body : "", r->len, &hd, &out) : -1;
    mcp_session_reset(&scratch);
    if (handled == 1) {
        mcp_sse_unref(st);
        return false;
    }
    *rc = handled == 0 && (out.reply || out.status == 202)
              ? stateless_answer(mc, r, st, &out)
              : answer_error(mc, 500, MCP_INTERNAL_ERROR, "out of memory");
    free(out.reply);
    mcp_sse_unref(st);
    return true;
}

static bool fixture_post(http_state *hs, struct MHD_Connection *mc, http_req *r,
                         enum MHD_Result *rc)
{
    if (r->dropped > 0)
        return false;
    const char *sid = header(mc, "Mcp-Session-Id");
    return sid ? fixture_session_post(hs, mc, r, sid, rc) : fixture_stateless(mc, r, rc);
}

/* GET: the resumption of a session's streamed answer after the event Last-Event-ID names. A
 * GET without one would open a stream of the server's own, which the fixture does not offer. */
static enum MHD_Result fixture_get(http_state *hs, struct MHD_Connection *mc, http_req *r)
{
    const char *sid = header(mc, "Mcp-Session-Id");
    unsigned n = 0, k = 0;
    if (!sid || mcp_sse_parse_id(header(mc, "Last-Event-ID"), &n, &k) != 0)
        return answer_error(mc, 405, MCP_INVALID_REQUEST, "Method Not Allowed: no server stream");
    mcp_sse *st = NULL;
    pthread_mutex_lock(&hs->mu);
    http_session *h = session_take(hs, sid, r->cred);
    for (size_t i = 0; h && i < HTTP_SSE_KEPT; i++)
        if (h->streams[i] && mcp_sse_number(h->streams[i]) == n)
            mcp_sse_ref(st = h->streams[i]);
    if (h)
        session_give(h);
    pthread_mutex_unlock(&hs->mu);
    if (!st)
        return answer_error(mc, 404, MCP_INVALID_REQUEST,
                            h ? "No such event stream" : "Session not found");
    enum MHD_Result rc = answer_stream(mc, st, (long)k);
    mcp_sse_unref(st);
    return rc;
}

/* POST: one JSON-RPC message, in a session (its lock held while it is handled) or, for
 * initialize, in a new one. */
static enum MHD_Result post(http_state *hs, struct MHD_Connection *mc, http_req *r)
{
    const char *body = r->body ? r->body : "";
    size_t len = r->dropped > 0 ? r->dropped : r->len;
    const char *sid = header(mc, "Mcp-Session-Id");
    const char *why = NULL;
    http_session *h = NULL;
    bool fresh = false;
    if (sid) {
        pthread_mutex_lock(&hs->mu);
        h = session_take(hs, sid, r->cred);
        pthread_mutex_unlock(&hs->mu);
        if (!h)
            return answer_error(mc, 404, MCP_INVALID_REQUEST, "Session not found");
        /* Unsupported versions are refused (400); absent means 2025-03-26. A supported one
         * other than the negotiated one is served, as the official SDK's server does. */
        const char *pv = header(mc, "MCP-Protocol-Version");
        if (pv && !mcp_protocol_supported(pv)) {
            pthread_mutex_lock(&hs->mu);
            session_give(h);
            pthread_mutex_unlock(&hs->mu);
            return answer_error(mc, 400, MCP_INVALID_REQUEST,
                                "Bad Request: unsupported MCP-Protocol-Version");
        }
    } else if (is_initialize(body, len)) {
        pthread_mutex_lock(&hs->mu);
        h = session_new(hs, r->cred, &why);
        pthread_mutex_unlock(&hs->mu);
        if (!h)
            return answer_error(mc, 503, MCP_INTERNAL_ERROR, why);
        fresh = true;
    }
    /* No session: the message is still checked (its error is the answer), never served. */
    mcp_session scratch = {0};
    char *reply = NULL;
    bool was_init = false;
    int rc;
    if (h) {
        pthread_mutex_lock(&h->mu);
        rc = mcp_jsonrpc_handle(hs->srv, &h->s, body, len, &reply, &was_init);
        pthread_mutex_unlock(&h->mu);
    } else {
        rc = mcp_jsonrpc_handle(hs->srv, &scratch, body, len, &reply, &was_init);
        mcp_session_reset(&scratch);
    }
    char id[sizeof h->id] = "";
    if (h) {
        pthread_mutex_lock(&hs->mu);
        if ((rc != 0 && fresh) || (fresh && !was_init))
            session_end(h, "the MCP session was not initialized");
        else
            snprintf(id, sizeof id, "%s", h->id);
        session_give(h);
        pthread_mutex_unlock(&hs->mu);
        if (fresh && !was_init)
            h = NULL;
    }
    if (rc != 0)
        return answer_error(mc, 500, MCP_INTERNAL_ERROR, "out of memory");
    if (!h && reply && strstr(reply, "\"error\"") == NULL) {
        /* Only ping gets here with a result: still a request outside any session. */
        free(reply);
        reply = NULL;
    }
    if (!h && !reply)
        return answer_error(mc, 400, MCP_INVALID_REQUEST,
                            "Bad Request: Mcp-Session-Id header required");
    /* A tool call may have waited on charterd longer than the inactivity timeout: the answer
     * still goes out (the option restarts libmicrohttpd's timer). */
    MHD_set_connection_option(mc, MHD_CONNECTION_OPTION_TIMEOUT, hs->o->idle_timeout_s);
    unsigned status = reply ? (h ? 200 : 400) : 202;
    enum MHD_Result ret =
        answer(mc, status, reply, reply && r->sse_ok && !r->json_ok, was_init ? id : NULL);
    free(reply);
    return ret;
}

static enum MHD_Result delete_session(http_state *hs, struct MHD_Connection *mc, http_req *r)
{
    const char *sid = header(mc, "Mcp-Session-Id");
    pthread_mutex_lock(&hs->mu);
    http_session *h = session_take(hs, sid, r->cred);
    if (h) {
        session_end(h, "the MCP session was deleted (HTTP DELETE)");
        session_give(h);
    }
    pthread_mutex_unlock(&hs->mu);
    if (h)
        return answer(mc, 200, NULL, false, NULL);
    return answer_error(mc, sid ? 404 : 400, MCP_INVALID_REQUEST,
                        sid ? "Session not found" : "Mcp-Session-Id header required");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    http_state *hs = cls;
    http_req *r = *con_cls;
    (void)url;
    (void)version;
    if (!r) {
        http_guard_body(mc);
        enum MHD_Result rc = MHD_NO;
        if (!(r = begin(hs, mc, method, &rc)))
            return rc;
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        int rc = 0;
        if (r->refused) {
            r->dropped += *upload_size;
            rc = r->dropped > MCP_HTTP_DRAIN_MAX ? -1 : 0;
        } else {
            rc = take(r, upload, *upload_size);
        }
        *upload_size = 0;
        return rc == 0 ? MHD_YES : MHD_NO;
    }
    if (r->refused) {
        unsigned status = r->refused;
        r->refused = 0;
        return answer_error(mc, status, MCP_INVALID_REQUEST, r->why);
    }
    http_guard_busy(mc);
    enum MHD_Result frc;
    if (r->kind == REQ_POST && hs->srv->fixture && fixture_post(hs, mc, r, &frc))
        return frc;
    if (r->kind == REQ_GET)
        return fixture_get(hs, mc, r);
    enum MHD_Result rc = r->kind == REQ_POST ? post(hs, mc, r) : delete_session(hs, mc, r);
    /* The runs of the sessions this request ended (DELETE), or found expired or replaced, are
     * completed before its answer goes out: libmicrohttpd sends it once this returns. */
    complete_ended(hs);
    return rc;
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    http_guard_idle(mc);
    http_req *r = *con_cls;
    if (r) {
        free(r->body);
        free(r);
        *con_cls = NULL;
    }
}

static void on_deadline(void *arg, const char *phase, unsigned limit_s)
{
    (void)arg;
    fprintf(stderr, "charter-mcp: closed an HTTP connection whose request's %s took over %u s\n",
            phase, limit_s);
}

/* The credentials' digests and the session table. Returns 0 or -1 (printed). */
static int state_init(http_state *hs, mcp_server *srv, const mcp_http_opts *o)
{
    memset(hs, 0, sizeof *hs);
    hs->srv = srv;
    hs->o = o;
    if (pthread_mutex_init(&hs->mu, NULL) != 0)
        return -1;
    if (pthread_cond_init(&hs->jobs_cv, NULL) != 0) {
        pthread_mutex_destroy(&hs->mu);
        return -1;
    }
    hs->n_creds = o->n_tokens;
    hs->digests = o->n_tokens ? calloc(o->n_tokens, sizeof *hs->digests) : NULL;
    hs->sessions = calloc(o->max_sessions, sizeof *hs->sessions);
    if ((o->n_tokens && !hs->digests) || !hs->sessions) {
        fprintf(stderr, "charter-mcp: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < o->n_tokens; i++)
        if (!SHA256((const unsigned char *)o->tokens[i], strlen(o->tokens[i]), hs->digests[i]))
            return -1;
    /* n_sessions counts the slots whose lock exists, so state_free destroys only those. */
    for (; hs->n_sessions < o->max_sessions; hs->n_sessions++)
        if (pthread_mutex_init(&hs->sessions[hs->n_sessions].mu, NULL) != 0)
            return -1;
    return 0;
}

static void state_free(http_state *hs)
{
    /* A fixture tool call still running holds its session: it ends within a second of
     * mcp_sse_shutdown (its wait for the client stops). */
    pthread_mutex_lock(&hs->mu);
    while (hs->jobs > 0)
        pthread_cond_wait(&hs->jobs_cv, &hs->mu);
    /* No request is served any more: every session still held ends with the server. */
    for (size_t i = 0; i < hs->n_sessions; i++)
        if (hs->sessions[i].used)
            ended_queue(&hs->sessions[i].s, "charter-mcp stopped");
    pthread_mutex_unlock(&hs->mu);
    complete_ended(hs);
    for (size_t i = 0; i < hs->n_sessions; i++) {
        mcp_session_reset(&hs->sessions[i].s);
        for (size_t k = 0; k < HTTP_SSE_KEPT; k++)
            mcp_sse_unref(hs->sessions[i].streams[k]);
        pthread_mutex_destroy(&hs->sessions[i].mu);
    }
    pthread_cond_destroy(&hs->jobs_cv);
    free(hs->sessions);
    free(hs->digests);
    pthread_mutex_destroy(&hs->mu);
    mcp_tasks_shutdown(); /* after the last request: nothing holds a task any more */
}

/* The server is stopping: what waits (a fixture stream's reader, a tool's wait for the
 * client, a fixture task's wait) notices within a second. */
static void serve_stop(void)
{
    mcp_sse_shutdown();
    mcp_tasks_stop();
}

/* The listening socket of addr (its port after colon), and the address it is bound to, with
 * the port the system picked for port 0, into bound. Returns the socket, or -1 said on stderr. */
static int open_listener(const char *addr, const char *colon, char *bound, size_t n)
{
    char host[128], what[160], err[512];
    snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
    snprintf(what, sizeof what, "charter-mcp: cannot listen on %s", addr);
    int fd = http_guard_listen(host, colon + 1, what, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    if (http_guard_bound(fd, host, bound, n) != 0) {
        snprintf(bound, n, "%s", addr);
    }
    return fd;
}

/* The line that says where the server listens (scripts read the port from it). */
static void log_serving(const mcp_server *srv, const char *bound, unsigned max_conn,
                        size_t sessions, unsigned per_credential)
{
    char what[160];
    if (srv->fixture)
        snprintf(what, sizeof what, "the conformance fixture (a test mode, nothing gated)");
    else
        snprintf(what, sizeof what, "step %.100s", srv->step_name);
    fprintf(stderr,
            "charter-mcp: serving %s on http://%s/mcp (at most %u connections, %zu sessions, %u "
            "per credential)\n",
            what, bound, max_conn, sessions, per_credential);
}

int mcp_http_serve(mcp_server *srv, const mcp_http_opts *o)
{
    static http_state hs;
    char err[512];
    const char *colon = strrchr(o->addr, ':');
    if (!colon || !loopback_host(o->addr, strlen(o->addr)) || strlen(colon + 1) > 5) {
        fprintf(stderr, "charter-mcp: --http takes 127.0.0.1:PORT, localhost:PORT or "
                        "[::1]:PORT (loopback only)\n");
        return -1;
    }
    if (state_init(&hs, srv, o) != 0) {
        state_free(&hs);
        return -1;
    }
    unsigned max_conn = o->max_connections;
    int ret = -1, fd = -1;
    http_guard *guard = NULL;
    struct MHD_Daemon *d = NULL;
    if (http_guard_fit_descriptors(&max_conn, MCP_HTTP_FD_RESERVE, 1, err, sizeof err) != 0) {
        fprintf(stderr, "charter-mcp: %s\n", err);
        goto out;
    }
    if (err[0])
        fprintf(stderr, "charter-mcp: %s (--http-max-connections)\n", err);
    http_guard_opts go = {o->header_timeout_s, o->body_timeout_s, on_deadline, NULL};
    if (http_guard_start(&go, &guard) != 0) {
        fprintf(stderr, "charter-mcp: cannot start the HTTP watchdog\n");
        goto out;
    }
    char bound[192];
    if ((fd = open_listener(o->addr, colon, bound, sizeof bound)) < 0) {
        goto out;
    }
    /* SIGINT and SIGTERM are taken by sigwait below; blocked before libmicrohttpd's threads
     * exist, so every one of them inherits the mask and none takes the signal. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0) {
        fprintf(stderr, "charter-mcp: cannot block signals\n");
        close(fd);
        goto out;
    }
    /* A thread per connection: a tool call waits for charterd on its connection's thread. */
    d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_AUTO, 0, NULL,
        NULL, on_request, &hs, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, max_conn,
        MHD_OPTION_CONNECTION_TIMEOUT, o->idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        MCP_HTTP_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_CONNECTION, http_guard_notify, guard,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, &hs, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "charter-mcp: cannot start the HTTP server on %s\n", o->addr);
        close(fd);
        goto out;
    }
    log_serving(srv, bound, max_conn, hs.n_sessions, o->sessions_per_credential);
    int sig = 0;
    while (sigwait(&sigs, &sig) != 0) {
    }
    serve_stop();
    ret = 0;
out:
    if (d)
        MHD_stop_daemon(d);
    http_guard_stop(guard);
    state_free(&hs);
    return ret;
}
