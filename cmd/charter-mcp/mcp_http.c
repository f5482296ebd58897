/*
 * mcp_http.c - the Streamable HTTP transport of charter-mcp (MCP revision 2025-11-25, also
 * 2025-06-18 and 2025-03-26) on NNG's HTTP server: one endpoint, /mcp. POST carries one
 * JSON-RPC message and gets its answer as JSON (or as one SSE event when the client accepts
 * only text/event-stream); initialize issues an Mcp-Session-Id; DELETE ends a session; GET is
 * 405 since the server offers no stream of its own. Host and Origin must be loopback names (DNS
 * rebinding), and a bearer credential is required unless --http-no-auth was given.
 */
#include <ctype.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "mcp.h"

#define MAX_SESSIONS 64
/* A session unused this long is gone (its next request gets 404, and the client initializes
 * anew, as the MCP transport specifies); with every slot taken, a new session replaces the one
 * unused longest if that one has been idle at least SESSION_EVICT_S. Seconds. */
#define SESSION_IDLE_S (30 * 60)
#define SESSION_EVICT_S 60
/* NNG answers 400 itself above this; between MCP_MAX_MESSAGE and this, a JSON-RPC error. */
#define BODY_LIMIT (4 * MCP_MAX_MESSAGE)

typedef struct {
    bool used;
    char id[33];
    time_t last_used; /* CLOCK_MONOTONIC seconds of its last request */
    mcp_session s;
} http_session;

typedef struct {
    mcp_server *srv;
    const char *token; /* NULL: no credential required */
    char port[8];
    http_session sessions[MAX_SESSIONS];
} http_state;

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

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

static bool bearer_ok(const http_state *hs, const char *auth)
{
    if (!hs->token)
        return true;
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return false;
    const char *got = auth + 7;
    size_t n = strlen(hs->token);
    return strlen(got) == n && CRYPTO_memcmp(got, hs->token, n) == 0;
}

static time_t mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec;
}

static void session_end(http_session *h);

static http_session *session_find(http_state *hs, const char *id)
{
    time_t now = mono_s();
    for (size_t i = 0; id && i < MAX_SESSIONS; i++) {
        http_session *h = &hs->sessions[i];
        if (!h->used || strcmp(h->id, id) != 0)
            continue;
        if (now - h->last_used >= SESSION_IDLE_S) {
            session_end(h); /* expired */
            return NULL;
        }
        h->last_used = now;
        return h;
    }
    return NULL;
}

static http_session *session_new(http_state *hs)
{
    time_t now = mono_s();
    http_session *oldest = NULL;
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        http_session *h = &hs->sessions[i];
        if (h->used && now - h->last_used >= SESSION_IDLE_S)
            session_end(h);
        if (h->used && (!oldest || h->last_used < oldest->last_used))
            oldest = h;
    }
    if (oldest && now - oldest->last_used >= SESSION_EVICT_S) {
        bool full = true;
        for (size_t i = 0; i < MAX_SESSIONS && full; i++)
            full = hs->sessions[i].used;
        if (full)
            session_end(oldest);
    }
    for (size_t i = 0; i < MAX_SESSIONS; i++) {
        http_session *h = &hs->sessions[i];
        if (h->used)
            continue;
        unsigned char rnd[16];
        if (RAND_bytes(rnd, sizeof rnd) != 1)
            return NULL;
        for (size_t k = 0; k < sizeof rnd; k++)
            snprintf(h->id + 2 * k, 3, "%02x", rnd[k]);
        memset(&h->s, 0, sizeof h->s);
        h->used = true;
        h->last_used = now;
        return h;
    }
    return NULL;
}

static void session_end(http_session *h)
{
    mcp_session_reset(&h->s);
    h->used = false;
    h->id[0] = '\0';
}

/* Finishes the exchange with status and, when body is not NULL, a JSON (or SSE) body. */
static void answer(nng_aio *aio, uint16_t status, const char *body, bool sse, const char *session)
{
    nng_http_res *res = NULL;
    if (nng_http_res_alloc(&res) != 0) {
        nng_aio_finish(aio, NNG_ENOMEM);
        return;
    }
    int rv = nng_http_res_set_status(res, status);
    if (rv == 0 && session)
        rv = nng_http_res_set_header(res, "Mcp-Session-Id", session);
    if (rv == 0 && status == 405)
        rv = nng_http_res_set_header(res, "Allow", "POST, DELETE");
    if (rv == 0 && status == 401)
        rv = nng_http_res_set_header(res, "WWW-Authenticate", "Bearer");
    if (rv == 0 && body && sse) {
        size_t n = strlen(body) + 32;
        char *ev = malloc(n);
        rv = ev ? 0 : NNG_ENOMEM;
        if (ev) {
            snprintf(ev, n, "event: message\ndata: %s\n\n", body);
            rv = nng_http_res_set_header(res, "Content-Type", "text/event-stream");
            if (rv == 0)
                rv = nng_http_res_copy_data(res, ev, strlen(ev));
            free(ev);
        }
    } else if (rv == 0 && body) {
        rv = nng_http_res_set_header(res, "Content-Type", "application/json");
        if (rv == 0)
            rv = nng_http_res_copy_data(res, body, strlen(body));
    } else if (rv == 0) {
        rv = nng_http_res_set_data(res, NULL, 0); /* sets Content-Length: 0 */
    }
    if (rv != 0) {
        nng_http_res_free(res);
        nng_aio_finish(aio, rv);
        return;
    }
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

static void answer_error(nng_aio *aio, uint16_t status, int code, const char *message)
{
    char *text = mcp_jsonrpc_error_text(NULL, code, message);
    answer(aio, status, text, false, NULL);
    free(text);
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

static void post(http_state *hs, nng_aio *aio, nng_http_req *req)
{
    const char *accept = nng_http_req_get_header(req, "Accept");
    const char *ctype = nng_http_req_get_header(req, "Content-Type");
    bool json_ok = !accept || strstr(accept, "application/json") || strstr(accept, "*/*");
    bool sse_ok = accept && strstr(accept, "text/event-stream");
    if (!json_ok && !sse_ok) {
        answer_error(aio, 406, MCP_INVALID_REQUEST,
                     "Not Acceptable: accept application/json or text/event-stream");
        return;
    }
    if (!ctype || strncasecmp(ctype, "application/json", 16) != 0) {
        answer_error(aio, 415, MCP_INVALID_REQUEST,
                     "Unsupported Media Type: Content-Type must be application/json");
        return;
    }
    void *body = NULL;
    size_t len = 0;
    nng_http_req_get_data(req, &body, &len);
    const char *sid = nng_http_req_get_header(req, "Mcp-Session-Id");
    http_session *h = NULL;
    bool fresh = false;
    if (sid) {
        h = session_find(hs, sid);
        if (!h) {
            answer_error(aio, 404, MCP_INVALID_REQUEST, "Session not found");
            return;
        }
        /* Unsupported versions are refused (400); absent means 2025-03-26. A supported one
         * other than the negotiated one is served, as the official SDK's server does. */
        const char *pv = nng_http_req_get_header(req, "MCP-Protocol-Version");
        if (pv && !mcp_protocol_supported(pv)) {
            answer_error(aio, 400, MCP_INVALID_REQUEST,
                         "Bad Request: unsupported MCP-Protocol-Version");
            return;
        }
    } else if (is_initialize(body, len)) {
        h = session_new(hs);
        if (!h) {
            answer_error(aio, 503, MCP_INTERNAL_ERROR, "too many sessions");
            return;
        }
        fresh = true;
    }
    /* No session: the message is still checked (its error is the answer), never served. */
    mcp_session scratch = {0};
    char *reply = NULL;
    bool was_init = false;
    int rc = mcp_jsonrpc_handle(hs->srv, h ? &h->s : &scratch, body, len, &reply, &was_init);
    if (rc != 0) {
        if (fresh)
            session_end(h);
        answer_error(aio, 500, MCP_INTERNAL_ERROR, "out of memory");
        return;
    }
    if (!h && reply && strstr(reply, "\"error\"") == NULL) {
        /* Only ping gets here with a result: still a request outside any session. */
        free(reply);
        reply = NULL;
    }
    if (!h && !reply) {
        answer_error(aio, 400, MCP_INVALID_REQUEST, "Bad Request: Mcp-Session-Id header required");
        return;
    }
    if (fresh && !was_init) {
        session_end(h);
        h = NULL;
    }
    uint16_t status = reply ? (h ? 200 : 400) : 202;
    answer(aio, status, reply, reply && sse_ok && !json_ok, was_init ? h->id : NULL);
    free(reply);
}

static void on_request(nng_aio *aio)
{
    nng_http_req *req = nng_aio_get_input(aio, 0);
    nng_http_handler *handler = nng_aio_get_input(aio, 1);
    http_state *hs = nng_http_handler_get_data(handler);
    const char *host = nng_http_req_get_header(req, "Host");
    const char *method = nng_http_req_get_method(req);
    if (!host || !loopback_host(host, strlen(host)) ||
        !origin_ok(nng_http_req_get_header(req, "Origin"))) {
        answer_error(aio, 403, MCP_INVALID_REQUEST, "Forbidden: Host or Origin not allowed");
        return;
    }
    if (!bearer_ok(hs, nng_http_req_get_header(req, "Authorization"))) {
        answer_error(aio, 401, MCP_INVALID_REQUEST, "Unauthorized: bearer credential required");
        return;
    }
    pthread_mutex_lock(&hs->srv->lock);
    if (strcmp(method, "POST") == 0) {
        post(hs, aio, req);
    } else if (strcmp(method, "DELETE") == 0) {
        const char *sid = nng_http_req_get_header(req, "Mcp-Session-Id");
        http_session *h = session_find(hs, sid);
        if (h)
            session_end(h);
        if (h)
            answer(aio, 200, NULL, false, NULL);
        else
            answer_error(aio, sid ? 404 : 400, MCP_INVALID_REQUEST,
                         sid ? "Session not found" : "Mcp-Session-Id header required");
    } else {
        answer_error(aio, 405, MCP_INVALID_REQUEST, "Method Not Allowed: no server stream");
    }
    pthread_mutex_unlock(&hs->srv->lock);
}

int mcp_http_serve(mcp_server *srv, const char *addr, const char *token)
{
    static http_state hs;
    char urltext[128];
    nng_url *url = NULL;
    nng_http_server *server = NULL;
    nng_http_handler *handler = NULL;
    int ret = -1, rv;
    const char *colon = strrchr(addr, ':');
    if (!colon || !loopback_host(addr, strlen(addr)) || strlen(colon + 1) >= sizeof hs.port) {
        fprintf(stderr, "charter-mcp: --http takes 127.0.0.1:PORT, localhost:PORT or "
                        "[::1]:PORT (loopback only)\n");
        return -1;
    }
    hs.srv = srv;
    hs.token = token;
    snprintf(urltext, sizeof urltext, "http://%s/mcp", addr);
    if ((rv = nng_url_parse(&url, urltext)) != 0 ||
        (rv = nng_http_server_hold(&server, url)) != 0 ||
        (rv = nng_http_handler_alloc(&handler, "/mcp", on_request)) != 0 ||
        (rv = nng_http_handler_set_method(handler, NULL)) != 0 ||
        (rv = nng_http_handler_collect_body(handler, true, BODY_LIMIT)) != 0 ||
        (rv = nng_http_handler_set_data(handler, &hs, NULL)) != 0) {
        fprintf(stderr, "charter-mcp: cannot set up HTTP on %s: %s\n", addr, nng_strerror(rv));
        goto out;
    }
    if ((rv = nng_http_server_add_handler(server, handler)) != 0) {
        fprintf(stderr, "charter-mcp: %s\n", nng_strerror(rv));
        goto out;
    }
    handler = NULL; /* the server owns it now */
    if ((rv = nng_http_server_start(server)) != 0) {
        fprintf(stderr, "charter-mcp: cannot listen on %s: %s\n", addr, nng_strerror(rv));
        goto out;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    fprintf(stderr, "charter-mcp: serving step %s on http://%s/mcp\n", srv->step_name, addr);
    while (!stop)
        pause();
    nng_http_server_stop(server);
    ret = 0;
out:
    if (handler)
        nng_http_handler_free(handler);
    if (server)
        nng_http_server_release(server);
    nng_url_free(url);
    for (size_t i = 0; i < MAX_SESSIONS; i++)
        if (hs.sessions[i].used)
            session_end(&hs.sessions[i]);
    return ret;
}
