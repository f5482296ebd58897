/*
 * mcp_sse.c - server-sent event streams for the conformance fixture (mcp_sse.h). A stream is a
 * growing buffer of events, each with its id; readers are libmicrohttpd responses that copy
 * from it, each from its own offset, and wait on the stream's condition for more. That one
 * buffer serves the POST's response, a resumption after the server cut that response
 * (Last-Event-ID), and the tool's requests to the client, whose responses arrive on another
 * POST and are handed over here. Readers wake at least every second, so that a server that
 * stops (mcp_sse_shutdown) never waits on them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp.h"
#include "mcp_sse.h"

/* How long a client waits before it resumes a stream the server cut (SSE retry, ms). */
#define SSE_RETRY_MS 500
/* A listening stream with nothing to say sends a comment this often (seconds), so that a client
 * that went away is noticed and its stream freed. */
#define SSE_KEEPALIVE_S 15

struct mcp_sse {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned refs;
    unsigned n;
    char *buf; /* every event so far */
    size_t len, cap;
    size_t *ends; /* ends[k]: the offset after event k */
    unsigned events, ecap;
    bool primed;
    bool done; /* the answer is in: readers end at the end */
    bool cut;  /* the first reader ends now */
    unsigned asked;
    char ask_id[48]; /* the id of the request awaiting the client's response, or "" */
    json_t *answer;  /* that response, once delivered */
    bool listening, want_tools, want_prompts;
    char sub[64];
    mcp_sse *next; /* in the listeners' list */
};

typedef struct {
    mcp_sse *st;
    size_t off;
    bool first;
    unsigned quiet_s; /* seconds without an event (listening streams) */
} sse_reader;

static atomic_bool stopping;
static pthread_mutex_t listeners_mu = PTHREAD_MUTEX_INITIALIZER;
static mcp_sse *listeners;

static struct timespec in_ms(unsigned ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Appends text as event number st->events (called with st->mu held). */
static int append_locked(mcp_sse *st, const char *fields, const char *data)
{
    char head[96];
    int h = snprintf(head, sizeof head, "id: %u-%u\n%s", st->n, st->events, fields);
    size_t need = (size_t)h + strlen(data) + 8;
    if (st->len + need > st->cap) {
        size_t cap = st->cap ? st->cap : 1024;
        while (cap < st->len + need)
            cap *= 2;
        char *b = realloc(st->buf, cap);
        if (!b)
            return -1;
        st->buf = b;
        st->cap = cap;
    }
    if (st->events == st->ecap) {
        unsigned ecap = st->ecap ? 2 * st->ecap : 8;
        size_t *e = realloc(st->ends, ecap * sizeof *e);
        if (!e)
            return -1;
        st->ends = e;
        st->ecap = ecap;
    }
    st->len += (size_t)snprintf(st->buf + st->len, st->cap - st->len, "%sdata: %s\n\n", head, data);
    st->ends[st->events++] = st->len;
    pthread_cond_broadcast(&st->cv);
    return 0;
}

mcp_sse *mcp_sse_new(unsigned n, bool priming)
{
    mcp_sse *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    bool ok = pthread_mutex_init(&st->mu, NULL) == 0;
    if (ok && pthread_cond_init(&st->cv, &ca) != 0) {
        pthread_mutex_destroy(&st->mu);
        ok = false;
    }
    pthread_condattr_destroy(&ca);
    if (!ok) {
        free(st);
        return NULL;
    }
    st->refs = 1;
    st->n = n;
    char retry[32];
    snprintf(retry, sizeof retry, "retry: %u\n", SSE_RETRY_MS);
    if (priming && append_locked(st, retry, "") != 0) {
        mcp_sse_unref(st);
        return NULL;
    }
    st->primed = priming;
    return st;
}

void mcp_sse_ref(mcp_sse *st)
{
    pthread_mutex_lock(&st->mu);
    st->refs++;
    pthread_mutex_unlock(&st->mu);
}

void mcp_sse_unref(mcp_sse *st)
{
    if (!st)
        return;
    pthread_mutex_lock(&st->mu);
    unsigned left = --st->refs;
    pthread_mutex_unlock(&st->mu);
    if (left > 0)
        return;
    json_decref(st->answer);
    free(st->buf);
    free(st->ends);
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

unsigned mcp_sse_number(const mcp_sse *st)
{
    return st->n;
}

int mcp_sse_append(mcp_sse *st, const char *json)
{
    pthread_mutex_lock(&st->mu);
    int rc = append_locked(st, "event: message\n", json);
    pthread_mutex_unlock(&st->mu);
    return rc;
}

bool mcp_sse_has_events(const mcp_sse *st)
{
    return st->events > (st->primed ? 1u : 0u);
}

void mcp_sse_finish(mcp_sse *st)
{
    pthread_mutex_lock(&st->mu);
    st->done = true;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

void mcp_sse_cut(mcp_sse *st)
{
    pthread_mutex_lock(&st->mu);
    st->cut = true;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

/* --- readers ------------------------------------------------------------------------------ */

/* Waits (st->mu held) until the reader has something to read or must end: true to read on. */
static bool reader_wait(sse_reader *rd)
{
    mcp_sse *st = rd->st;
    while (rd->off == st->len && !st->done && !(rd->first && st->cut)) {
        if (atomic_load(&stopping))
            return false;
        struct timespec t = in_ms(1000);
        if (pthread_cond_timedwait(&st->cv, &st->mu, &t) == ETIMEDOUT && st->listening &&
            ++rd->quiet_s >= SSE_KEEPALIVE_S)
            return true;
    }
    return rd->off < st->len;
}

static ssize_t reader_read(void *cls, uint64_t pos, char *out, size_t max)
{
    sse_reader *rd = cls;
    mcp_sse *st = rd->st;
    (void)pos;
    pthread_mutex_lock(&st->mu);
    ssize_t n = MHD_CONTENT_READER_END_OF_STREAM;
    if (reader_wait(rd)) {
        if (rd->off == st->len) {
            static const char keepalive[] = ": keepalive\n\n";
            n = (ssize_t)(sizeof keepalive - 1 < max ? sizeof keepalive - 1 : max);
            memcpy(out, keepalive, (size_t)n);
        } else {
            n = (ssize_t)(st->len - rd->off < max ? st->len - rd->off : max);
            memcpy(out, st->buf + rd->off, (size_t)n);
            rd->off += (size_t)n;
        }
        rd->quiet_s = 0;
    }
    pthread_mutex_unlock(&st->mu);
    return n;
}

static void unlisten(mcp_sse *st)
{
    pthread_mutex_lock(&listeners_mu);
    for (mcp_sse **p = &listeners; *p; p = &(*p)->next) {
        if (*p == st) {
            *p = st->next;
            pthread_mutex_unlock(&listeners_mu);
            mcp_sse_unref(st);
            return;
        }
    }
    pthread_mutex_unlock(&listeners_mu);
}

static void reader_free(void *cls)
{
    sse_reader *rd = cls;
    if (rd->first && rd->st->listening)
        unlisten(rd->st);
    mcp_sse_unref(rd->st);
    free(rd);
}

struct MHD_Response *mcp_sse_response(mcp_sse *st, long after)
{
    sse_reader *rd = calloc(1, sizeof *rd);
    if (!rd)
        return NULL;
    pthread_mutex_lock(&st->mu);
    rd->st = st;
    rd->first = after < 0;
    rd->off = after < 0 ? 0 : (unsigned long)after < st->events ? st->ends[after] : st->len;
    st->refs++;
    pthread_mutex_unlock(&st->mu);
    struct MHD_Response *res =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, reader_read, rd, reader_free);
    if (!res)
        reader_free(rd);
    return res;
}

int mcp_sse_parse_id(const char *id, unsigned *n, unsigned *k)
{
    char end = '\0';
    return id && sscanf(id, "%u-%u%c", n, k, &end) == 2 ? 0 : -1;
}

/* --- the server's requests to the client --------------------------------------------------- */

json_t *mcp_sse_ask(mcp_sse *st, json_t *request, unsigned timeout_ms)
{
    pthread_mutex_lock(&st->mu);
    snprintf(st->ask_id, sizeof st->ask_id, "charter-mcp-%u-%u", st->n, ++st->asked);
    char *text = NULL;
    if (json_object_set_new(request, "id", json_string(st->ask_id)) == 0)
        text = json_dumps(request, JSON_COMPACT);
    json_decref(request);
    json_t *answer = NULL;
    if (text && append_locked(st, "event: message\n", text) == 0) {
        /* Waits a second at a time, so that a stopping server is noticed. */
        struct timespec deadline = in_ms(timeout_ms), now;
        while (!st->answer && !atomic_load(&stopping)) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec > deadline.tv_sec ||
                (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
                break;
            struct timespec t = in_ms(1000);
            if (t.tv_sec > deadline.tv_sec ||
                (t.tv_sec == deadline.tv_sec && t.tv_nsec > deadline.tv_nsec))
                t = deadline;
            pthread_cond_timedwait(&st->cv, &st->mu, &t);
        }
        answer = st->answer;
        st->answer = NULL;
    }
    st->ask_id[0] = '\0';
    pthread_mutex_unlock(&st->mu);
    free(text);
    return answer;
}

bool mcp_sse_deliver(mcp_sse *st, const json_t *response)
{
    const char *id = json_string_value(json_object_get(response, "id"));
    pthread_mutex_lock(&st->mu);
    bool mine = id && st->ask_id[0] && !st->answer && strcmp(id, st->ask_id) == 0;
    if (mine) {
        st->answer = json_deep_copy(response);
        pthread_cond_broadcast(&st->cv);
    }
    pthread_mutex_unlock(&st->mu);
    return mine;
}

/* --- subscriptions/listen ------------------------------------------------------------------ */

int mcp_sse_listen(mcp_sse *st, bool tools, bool prompts, const char *sub)
{
    pthread_mutex_lock(&st->mu);
    st->listening = true;
    st->want_tools = tools;
    st->want_prompts = prompts;
    snprintf(st->sub, sizeof st->sub, "%s", sub);
    st->refs++;
    pthread_mutex_unlock(&st->mu);
    pthread_mutex_lock(&listeners_mu);
    st->next = listeners;
    listeners = st;
    pthread_mutex_unlock(&listeners_mu);
    return 0;
}

void mcp_sse_broadcast(int changed)
{
    const char *method = changed == MCP_CHANGED_TOOLS ? "notifications/tools/list_changed"
                                                      : "notifications/prompts/list_changed";
    pthread_mutex_lock(&listeners_mu);
    for (mcp_sse *st = listeners; st; st = st->next) {
        if (!(changed == MCP_CHANGED_TOOLS ? st->want_tools : st->want_prompts))
            continue;
        json_t *msg =
            json_pack("{s:s, s:s, s:{s:{s:s}}}", "jsonrpc", "2.0", "method", method, "params",
                      "_meta", "io.modelcontextprotocol/subscriptionId", st->sub);
        char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
        if (text)
            mcp_sse_append(st, text);
        free(text);
        json_decref(msg);
    }
    pthread_mutex_unlock(&listeners_mu);
}

void mcp_sse_shutdown(void)
{
    atomic_store(&stopping, true);
}
