/*
 * bench_echo.c - the transport's ceiling: a bare NNG req/rep echo, served by a process of its
 * own as charterd is one (bench_echo_proc.c starts it), with the shape of charterd's transport
 * (server/rpc/transport.c) and nothing of its work. The server is one rep0 socket listening on
 * an ipc:// address and receiving contexts ("slots", one per worker and per client thread, so
 * no request waits for one), each a small state machine on NNG's callbacks. For echo a slot
 * sends the request's bytes straight back from its callback: no thread hand-off, the limit of
 * NNG itself. For echo-fcall a slot queues the request, as charterd's do, for --workers
 * threads, each with its own hiredis connection (as each charterd worker owns one store), that
 * call the no-op function once and send the bytes back. The clients are the load's threads
 * sharing one req0 socket, a fresh context per call, as libcharter's client does. The request
 * is the envelope of a Health call (method, authorization, deadline), so the bytes on the wire
 * are a real call's.
 *
 * What it leaves out of charterd: decoding and checking the envelope and the token, dispatch,
 * the handler, encoding the answer; for echo also the hand-off of each request to a worker.
 */
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* A slot's states, as charterd's: RECV (a receive is pending), QUEUED (waiting for or held by
 * a worker), SEND (the reply is being sent), IDLE (stopped). */
typedef enum { ECHO_IDLE = 0, ECHO_RECV, ECHO_QUEUED, ECHO_SEND } echo_state;

typedef struct echo_slot {
    bench_echo *e;
    nng_ctx ctx;
    nng_aio *aio;
    echo_state state;
    nng_msg *msg;           /* the request while QUEUED */
    struct echo_slot *next; /* FIFO link while QUEUED */
} echo_slot;

typedef struct {
    bench_echo *e;
    redisContext *rc; /* this worker's connection */
    unsigned long fcall_failures;
    pthread_t thread;
    bool started;
} echo_worker;

struct bench_echo {
    nng_socket sock;
    bool sock_open;
    nng_listener listener;
    echo_slot *slots;
    unsigned n_slots;
    echo_worker *workers; /* echo-fcall only */
    unsigned n_workers;
    pthread_mutex_t mu; /* guards the FIFO and stopping */
    pthread_cond_t work_cv;
    echo_slot *head, *tail;
    bool stopping;
};

struct echo_client {
    nng_socket sock;
    uint32_t timeout_ms;
};

/* A slot's callback: a request received goes back at once (echo) or to the workers' FIFO
 * (echo-fcall); a reply sent starts the next receive. */
static void echo_slot_cb(void *arg)
{
    echo_slot *s = arg;
    bench_echo *e = s->e;
    int rv = nng_aio_result(s->aio);
    if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
        if (s->state == ECHO_SEND)
            nng_msg_free(nng_aio_get_msg(s->aio));
        s->state = ECHO_IDLE;
        return;
    }
    if (s->state == ECHO_RECV && rv == 0 && e->n_workers == 0) {
        s->state = ECHO_SEND; /* the request is still the aio's message */
        nng_ctx_send(s->ctx, s->aio);
        return;
    }
    if (s->state == ECHO_RECV && rv == 0) {
        s->msg = nng_aio_get_msg(s->aio);
        nng_aio_set_msg(s->aio, NULL);
        s->state = ECHO_QUEUED;
        pthread_mutex_lock(&e->mu);
        s->next = NULL;
        if (e->tail != NULL)
            e->tail->next = s;
        else
            e->head = s;
        e->tail = s;
        pthread_cond_signal(&e->work_cv);
        pthread_mutex_unlock(&e->mu);
        return;
    }
    if (s->state == ECHO_SEND && rv != 0)
        nng_msg_free(nng_aio_get_msg(s->aio)); /* the caller went away */
    s->state = ECHO_RECV;
    nng_ctx_recv(s->ctx, s->aio);
}

/* One FCALL of the no-op function on w's connection; counts a failure. */
static void echo_fcall(echo_worker *w)
{
    static const char *const argv[3] = {"FCALL", "bench_noop", "0"};
    static const size_t lens[3] = {5, 10, 1};
    redisReply *r = redisCommandArgv(w->rc, 3, (const char **)argv, lens);
    if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != 1)
        w->fcall_failures++;
    if (r != NULL)
        freeReplyObject(r);
}

/* An echo-fcall worker: takes a queued request, calls the no-op function, sends the request
 * back on its slot (the slot's callback receives again), until stopping. */
static void *echo_worker_main(void *arg)
{
    echo_worker *w = arg;
    bench_echo *e = w->e;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (e->head == NULL && !e->stopping)
            pthread_cond_wait(&e->work_cv, &e->mu);
        echo_slot *s = e->stopping ? NULL : e->head;
        if (s != NULL && (e->head = s->next) == NULL)
            e->tail = NULL;
        pthread_mutex_unlock(&e->mu);
        if (s == NULL)
            break;
        echo_fcall(w);
        nng_aio_set_msg(s->aio, s->msg);
        s->msg = NULL;
        s->state = ECHO_SEND;
        nng_ctx_send(s->ctx, s->aio);
    }
    return NULL;
}

/* Opens the socket and listens on url (mode 0600). */
static int echo_listen(bench_echo *e, const char *url, char *err, size_t errlen)
{
    int rv = nng_rep0_open(&e->sock);
    if (rv != 0) {
        snprintf(err, errlen, "echo: cannot open a rep0 socket: %s", nng_strerror(rv));
        return -1;
    }
    e->sock_open = true;
    if ((rv = nng_listener_create(&e->listener, e->sock, url)) != 0 ||
        ((rv = nng_listener_set_int(e->listener, NNG_OPT_IPC_PERMISSIONS, 0600)) != 0 &&
         rv != NNG_ENOTSUP) ||
        (rv = nng_listener_start(e->listener, 0)) != 0) {
        snprintf(err, errlen, "echo: cannot listen on %s: %s", url, nng_strerror(rv));
        return -1;
    }
    return 0;
}

/* The slots' contexts and aios, and (echo-fcall) the workers' connections and threads. */
static int echo_open(bench_echo *e, const char *redis_url, char *err, size_t errlen)
{
    int rv;
    for (unsigned i = 0; i < e->n_slots; i++) {
        echo_slot *s = &e->slots[i];
        s->e = e;
        if ((rv = nng_aio_alloc(&s->aio, echo_slot_cb, s)) != 0 ||
            (rv = nng_ctx_open(&s->ctx, e->sock)) != 0) {
            snprintf(err, errlen, "echo: cannot create slot %u: %s", i, nng_strerror(rv));
            return -1;
        }
    }
    for (unsigned i = 0; i < e->n_workers; i++) {
        echo_worker *w = &e->workers[i];
        w->e = e;
        if ((w->rc = redis_open(redis_url, err, errlen)) == NULL)
            return -1;
        if (pthread_create(&w->thread, NULL, echo_worker_main, w) != 0) {
            snprintf(err, errlen, "echo: cannot start worker thread %u", i);
            return -1;
        }
        w->started = true;
    }
    for (unsigned i = 0; i < e->n_slots; i++) {
        e->slots[i].state = ECHO_RECV;
        nng_ctx_recv(e->slots[i].ctx, e->slots[i].aio);
    }
    return 0;
}

/* Starts the echo server on url with slots receiving contexts; with redis_url, workers threads
 * each make one FCALL bench_noop 0 per request (the library must be loaded). -1 with err set on
 * failure, nothing left running. */
int echo_start(const char *url, unsigned slots, unsigned workers, const char *redis_url,
               bench_echo **out, char *err, size_t errlen)
{
    *out = NULL;
    bench_echo *e = calloc(1, sizeof *e);
    if (e == NULL || pthread_mutex_init(&e->mu, NULL) != 0 ||
        pthread_cond_init(&e->work_cv, NULL) != 0) {
        free(e);
        snprintf(err, errlen, "echo: out of memory");
        return -1;
    }
    e->n_slots = slots;
    e->n_workers = redis_url != NULL ? workers : 0;
    e->slots = calloc(slots, sizeof *e->slots);
    e->workers = calloc(workers, sizeof *e->workers);
    if (e->slots == NULL || e->workers == NULL) {
        snprintf(err, errlen, "echo: out of memory");
        echo_stop(e);
        return -1;
    }
    if (echo_listen(e, url, err, errlen) != 0 || echo_open(e, redis_url, err, errlen) != 0) {
        echo_stop(e);
        return -1;
    }
    *out = e;
    return 0;
}

/* Stops the workers, closes the socket (every pending operation ends), frees e. Returns the
 * FCALLs that failed. */
unsigned long echo_stop(bench_echo *e)
{
    if (e == NULL)
        return 0;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_broadcast(&e->work_cv);
    pthread_mutex_unlock(&e->mu);
    unsigned long failures = 0;
    for (unsigned i = 0; e->workers != NULL && i < e->n_workers; i++) {
        echo_worker *w = &e->workers[i];
        if (w->started)
            pthread_join(w->thread, NULL);
        if (w->rc != NULL)
            redisFree(w->rc);
        failures += w->fcall_failures;
    }
    if (e->sock_open)
        nng_close(e->sock);
    for (unsigned i = 0; e->slots != NULL && i < e->n_slots; i++) {
        if (e->slots[i].aio != NULL)
            nng_aio_free(e->slots[i].aio); /* waits for its callback */
        if (e->slots[i].msg != NULL)
            nng_msg_free(e->slots[i].msg);
    }
    free(e->slots);
    free(e->workers);
    pthread_cond_destroy(&e->work_cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
    return failures;
}

/* --- the client ------------------------------------------------------------------------------ */

/* One req0 socket dialed to url, as libcharter opens one per client (requests are never
 * resent: a lost one is a failed call). */
int echo_client_open(const char *url, uint32_t timeout_ms, echo_client **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    echo_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(err, errlen, "echo: out of memory");
        return -1;
    }
    c->timeout_ms = timeout_ms;
    int rv = nng_req0_open(&c->sock);
    if (rv != 0) {
        free(c);
        snprintf(err, errlen, "echo: cannot open a req0 socket: %s", nng_strerror(rv));
        return -1;
    }
    if ((rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_dial(c->sock, url, NULL, 0)) != 0) {
        nng_close(c->sock);
        free(c);
        snprintf(err, errlen, "echo: cannot dial %s: %s", url, nng_strerror(rv));
        return -1;
    }
    *out = c;
    return 0;
}

void echo_client_close(echo_client *c)
{
    if (c == NULL)
        return;
    nng_close(c->sock);
    free(c);
}

/* Sends msg on ctx and waits for the answer into *reply, within the client's deadline. */
static int echo_exchange(echo_client *c, nng_ctx ctx, nng_aio *aio, nng_msg *msg, nng_msg **reply)
{
    nng_aio_set_timeout(aio, (nng_duration)c->timeout_ms);
    nng_aio_set_msg(aio, msg);
    nng_ctx_send(ctx, aio);
    nng_aio_wait(aio);
    int rv = nng_aio_result(aio);
    if (rv != 0) {
        nng_msg_free(nng_aio_get_msg(aio));
        return rv;
    }
    nng_ctx_recv(ctx, aio);
    nng_aio_wait(aio);
    if ((rv = nng_aio_result(aio)) == 0)
        *reply = nng_aio_get_msg(aio);
    return rv;
}

/* One echo: req sent on a fresh context of the shared socket, the answer compared with it.
 * Returns 0, or -CHARTER_DEADLINE_EXCEEDED, -CHARTER_UNAVAILABLE (NNG failed; err says how),
 * -CHARTER_INTERNAL (the answer is not the request). */
int echo_call(echo_client *c, const uint8_t *req, size_t len, char *err, size_t errlen)
{
    nng_ctx ctx;
    nng_aio *aio = NULL;
    nng_msg *msg = NULL, *reply = NULL;
    int rv = nng_ctx_open(&ctx, c->sock);
    if (rv != 0) {
        snprintf(err, errlen, "echo: cannot open a context: %s", nng_strerror(rv));
        return -CHARTER_UNAVAILABLE;
    }
    if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0 || (rv = nng_msg_alloc(&msg, len)) != 0) {
        nng_aio_free(aio);
        nng_ctx_close(ctx);
        snprintf(err, errlen, "echo: out of memory");
        return -CHARTER_UNAVAILABLE;
    }
    memcpy(nng_msg_body(msg), req, len);
    rv = echo_exchange(c, ctx, aio, msg, &reply);
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    int code = 0;
    if (rv != 0) {
        snprintf(err, errlen, "echo: %s", nng_strerror(rv));
        code = rv == NNG_ETIMEDOUT ? -CHARTER_DEADLINE_EXCEEDED : -CHARTER_UNAVAILABLE;
    } else if (nng_msg_len(reply) != len || memcmp(nng_msg_body(reply), req, len) != 0) {
        snprintf(err, errlen, "echo: the answer (%zu bytes) is not the request (%zu bytes)",
                 nng_msg_len(reply), len);
        code = -CHARTER_INTERNAL;
    }
    if (reply != NULL)
        nng_msg_free(reply);
    return code;
}

/* The echo's request: the envelope a Health call sends (method, the authorization of the
 * operator token, the deadline as libcharter computes it), encoded into b->echo_req. */
int echo_request(bench *b)
{
    char auth[160];
    snprintf(auth, sizeof auth, "Bearer %s", b->token);
    Charter__V1__RpcRequest env = CHARTER__V1__RPC_REQUEST__INIT;
    Charter__V1__RpcRequest__MetadataEntry entry;
    Charter__V1__RpcRequest__MetadataEntry *meta[1] = {&entry};
    charter__v1__rpc_request__metadata_entry__init(&entry);
    entry.key = "authorization";
    entry.value = auth;
    env.method = "/charter.v1.Health/Check";
    env.metadata = meta;
    env.n_metadata = 1;
    uint32_t margin = b->o.timeout_ms / 10;
    margin = margin < 50 ? 50 : margin > 1000 ? 1000 : margin;
    env.timeout_ms =
        b->o.timeout_ms > 2 * margin ? b->o.timeout_ms - margin : b->o.timeout_ms / 2 + 1;
    size_t len = charter__v1__rpc_request__get_packed_size(&env);
    if (len > sizeof b->echo_req)
        return -1;
    b->echo_req_len = charter__v1__rpc_request__pack(&env, b->echo_req);
    return b->echo_req_len == len ? 0 : -1;
}
