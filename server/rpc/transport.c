/*
 * transport.c - the rep0 socket, its receive slots and the worker threads (see transport.h).
 * Slots are small state machines in the style of NNG's demo/async/server.c; workers are plain
 * threads, each with its own store, fed from one FIFO.
 */
#include "rpc/transport.h"

#include <errno.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/invariant.h"
#include "core/log.h"
#include "core/metrics.h"

/* A slot's states:
 *   RECV   - a receive is pending on the slot's context;
 *   QUEUED - a request waits in the FIFO or is being served by a worker;
 *   SEND   - the reply (or an immediate refusal) is being sent;
 *   IDLE   - stopped (shutdown).
 * Invariant: a slot in RECV has an operation pending on its aio (or is about to start one, or
 * is in its callback), so setting closing and cancelling every RECV slot under mu leaves no
 * receive behind; once stopping, every transition back to RECV checks closing under mu first
 * (transport_next_recv says why none is needed before). While stopping but not yet closing,
 * slots keep receiving so that late callers get an answer. */
typedef enum { SLOT_IDLE = 0, SLOT_RECV, SLOT_QUEUED, SLOT_SEND } slot_state;

typedef struct transport_slot {
    transport *t;
    nng_ctx ctx;
    nng_aio *aio;
    _Atomic slot_state state; /* written by whoever holds the slot's request; read by drain */
    nng_msg *req;
    size_t req_bytes;            /* nng_msg_len(req), counted in transport.queued_bytes */
    struct timespec queued_at;   /* when req was received (CLOCK_MONOTONIC) */
    struct transport_slot *next; /* FIFO link while QUEUED */
} transport_slot;

typedef struct {
    transport *t;
    store *st;
    pthread_t thread;
    bool started;
} transport_worker;

struct transport {
    nng_socket sock;
    bool sock_open;
    nng_listener listeners[16];
    size_t n_listeners;
    transport_slot *slots;
    size_t n_slots;
    transport_worker *workers;
    unsigned n_workers;
    const dispatch_ctx *dispatch;

    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* a request was queued, or stopping */
    pthread_cond_t idle_cv; /* a slot became IDLE */
    transport_slot *head, *tail;
    size_t pending;          /* requests queued or being served */
    size_t limit;            /* workers + queue */
    atomic_bool stopping;    /* new requests are answered UNAVAILABLE; slots keep receiving;
                                set under mu (workers wait on it), read without it */
    bool closing;            /* slots stop receiving: the socket is about to close */
    size_t max_message;      /* --max-message: larger requests are refused on arrival */
    size_t queued_bytes;     /* bytes of the requests queued or being served */
    size_t max_queued_bytes; /* refusal (RESOURCE_EXHAUSTED) beyond this */
    bool quick;              /* the dispatch keeps a serving status: Health is answered from the
                                callback (transport_quick) */
};

/* NNG's receive limit is --max-message plus this: room for the SP header (req/rep's request
 * ID, 4 bytes per hop), and a margin within which an oversized request is still read and
 * answered RESOURCE_EXHAUSTED rather than cut off. */
#define TRANSPORT_FRAME_SLACK ((size_t)64 * 1024)
/* Requests waiting or being served may hold at most this many times --max-message, and at
 * least TRANSPORT_QUEUE_BYTES_MIN: unauthenticated bytes cannot pile up in memory while the
 * workers are stalled. */
#define TRANSPORT_QUEUE_BYTES_FACTOR 4
#define TRANSPORT_QUEUE_BYTES_MIN ((size_t)16 * 1024 * 1024)

/* A reply to a caller that stopped reading is dropped after this long: the slot's send fails
 * with a timeout and the slot receives again, so a stuck connection cannot hold slots. */
#define TRANSPORT_SEND_WAIT_MS 2000

/* Starts sending reply on slot s (already SEND). The send completes on NNG's callback thread
 * (transport_slot_cb), which puts the slot back to receiving: the worker never waits for the
 * connection, which a single connection shared by many callers keeps busy with earlier
 * replies. */
static void transport_send(transport_slot *s, nng_msg *reply)
{
    nng_aio_set_timeout(s->aio, TRANSPORT_SEND_WAIT_MS);
    nng_aio_set_msg(s->aio, reply);
    nng_ctx_send(s->ctx, s->aio);
}

/* --- replies that never reach a worker --------------------------------------------------- */

/* Puts slot s back to receiving, or to IDLE once the transport is closing. Called without mu:
 * while the transport serves, this takes no lock at all (every reply passes here, and on two
 * cores a lock the callback threads share is a lock they queue on). The slot is marked RECV
 * before stopping is read, and drain sets stopping before anything else, so a slot that saw
 * no stop has its receive started long before drain, 50 ms and a settle later, sets closing
 * and cancels the RECV slots; should it not have (a thread preempted that long), drain's
 * bounded settle and nng_aio_stop end that receive. Once stopping, the move is made under mu
 * and wakes whoever waits for slots to settle (transport_drain). */
static void transport_next_recv(transport_slot *s)
{
    transport *t = s->t;
    nng_aio_set_timeout(s->aio, NNG_DURATION_INFINITE); /* a send may have set one */
    s->state = SLOT_RECV;
    if (!atomic_load(&t->stopping)) {
        nng_ctx_recv(s->ctx, s->aio);
        return;
    }
    pthread_mutex_lock(&t->mu);
    if (t->closing) {
        s->state = SLOT_IDLE;
    } else {
        nng_ctx_recv(s->ctx, s->aio);
    }
    pthread_cond_broadcast(&t->idle_cv);
    pthread_mutex_unlock(&t->mu);
}

/* Answers the request of slot s with code and message from the NNG callback thread. The slot
 * goes to SEND; its callback continues the cycle. */
static void transport_refuse(transport_slot *s, int code, const char *message)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    nng_msg *reply = NULL;
    if (dispatch_error_reply(code, message, &buf, &len) == 0 && nng_msg_alloc(&reply, len) == 0) {
        memcpy(nng_msg_body(reply), buf, len);
    }
    free(buf);
    if (reply == NULL) {
        /* Nothing to send: drop the request, keep receiving (or stop). */
        transport_next_recv(s);
        return;
    }
    s->state = SLOT_SEND;
    transport_send(s, reply);
}

/* Answers the request of slot s from the callback thread when it needs neither a worker nor
 * the database (dispatch_serve_quick: Health/Check from the serving status), so the cheapest
 * and most frequent probe costs no hand-off, and is answered even while every worker is busy.
 * Returns true when the request was taken (answered, or dropped when no reply could be
 * allocated), false when it must go to a worker. */
static bool transport_quick(transport_slot *s, nng_msg *m)
{
    transport *t = s->t;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = dispatch_serve_quick(t->dispatch, nng_msg_body(m), nng_msg_len(m), &buf, &len);
    if (rc == 1) {
        return false;
    }
    nng_msg_free(m);
    nng_msg *reply = NULL;
    if (rc != 0 || nng_msg_alloc(&reply, len) != 0) {
        free(buf);
        log_error("out of memory: a reply was dropped");
        transport_next_recv(s);
        return true;
    }
    memcpy(nng_msg_body(reply), buf, len);
    free(buf);
    s->state = SLOT_SEND;
    transport_send(s, reply);
    return true;
}

/* Appends slot s to the FIFO. Called with mu held. */
static void transport_enqueue(transport *t, transport_slot *s)
{
    s->next = NULL;
    if (t->tail != NULL) {
        t->tail->next = s;
    } else {
        t->head = s;
    }
    t->tail = s;
}

/* --- the slot state machine (runs on NNG's callback threads) ------------------------------ */

static void transport_slot_cb(void *arg)
{
    transport_slot *s = arg;
    transport *t = s->t;
    int rv = nng_aio_result(s->aio);

    if (s->state == SLOT_RECV) {
        if (rv != 0) {
            pthread_mutex_lock(&t->mu);
            if (t->closing || rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
                s->state = SLOT_IDLE;
                pthread_cond_broadcast(&t->idle_cv);
            } else {
                nng_ctx_recv(s->ctx, s->aio); /* transient (e.g. out of memory): go on */
            }
            pthread_mutex_unlock(&t->mu);
            return;
        }
        nng_msg *m = nng_aio_get_msg(s->aio);
        nng_aio_set_msg(s->aio, NULL);
        size_t bytes = nng_msg_len(m);
        if (t->quick && bytes <= t->max_message && !atomic_load(&t->stopping) &&
            dispatch_quick_candidate(nng_msg_body(m), bytes) && transport_quick(s, m)) {
            return;
        }
        pthread_mutex_lock(&t->mu);
        int code = RPC_OK;
        char msg[160];
        if (atomic_load(&t->stopping)) {
            /* Callers arriving during shutdown get the documented answer, not a lost
             * connection: the slots keep receiving until the socket closes. */
            code = RPC_UNAVAILABLE;
            snprintf(msg, sizeof msg, "server is shutting down (retry on another charterd)");
        } else if (bytes > t->max_message) {
            code = RPC_RESOURCE_EXHAUSTED;
            snprintf(msg, sizeof msg, "request of %zu bytes exceeds the %zu byte limit", bytes,
                     t->max_message);
        } else if (t->pending >= t->limit) {
            code = RPC_RESOURCE_EXHAUSTED;
            snprintf(msg, sizeof msg,
                     "server busy: %zu requests in progress or queued (retry later)", t->pending);
        } else if (t->pending > 0 && bytes > t->max_queued_bytes - t->queued_bytes) {
            code = RPC_RESOURCE_EXHAUSTED;
            snprintf(msg, sizeof msg,
                     "server busy: %zu bytes of requests in progress or queued (retry later)",
                     t->queued_bytes);
        }
        if (code != RPC_OK) {
            pthread_mutex_unlock(&t->mu);
            nng_msg_free(m);
            log_refusal(code, dispatch_code_name(code), "call refused: %s (%d): %s",
                        dispatch_code_name(code), code, msg);
            transport_refuse(s, code, msg);
            return;
        }
        t->queued_bytes += bytes;
        s->req_bytes = bytes;
        t->pending++;
        metrics_queue_add(1);
        s->req = m;
        s->state = SLOT_QUEUED;
        clock_gettime(CLOCK_MONOTONIC, &s->queued_at);
        transport_enqueue(t, s);
        pthread_cond_signal(&t->work_cv);
        pthread_mutex_unlock(&t->mu);
        return;
    }

    if (s->state == SLOT_SEND) {
        if (rv != 0) {
            nng_msg *m = nng_aio_get_msg(s->aio);
            nng_aio_set_msg(s->aio, NULL);
            nng_msg_free(m); /* the caller went away; the reply is of no use */
        }
        transport_next_recv(s);
    }
}

/* --- workers ------------------------------------------------------------------------------ */

/* Takes the first queued slot off the FIFO, or NULL. Called with mu held. */
static transport_slot *transport_dequeue(transport *t)
{
    transport_slot *s = t->head;
    if (s != NULL) {
        t->head = s->next;
        if (t->head == NULL) {
            t->tail = NULL;
        }
        s->next = NULL;
    }
    return s;
}

/* Serves the request of slot s on worker w's store. Returns the reply, or NULL when none could
 * be built (logged). The request is freed. */
static nng_msg *transport_serve(transport_worker *w, transport_slot *s)
{
    transport *t = w->t;
    uint8_t *resp = NULL;
    size_t resp_len = 0;
    nng_msg *reply = NULL;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long waited_ms = (now.tv_sec - s->queued_at.tv_sec) * 1000L +
                     (now.tv_nsec - s->queued_at.tv_nsec) / 1000000L;
    metrics_queue_add(-1);
    metrics_workers_busy_add(1);
    int rc = dispatch_serve(t->dispatch, w->st, nng_msg_body(s->req), nng_msg_len(s->req),
                            waited_ms > 0 ? (unsigned)waited_ms : 0, &resp, &resp_len);
    metrics_workers_busy_add(-1);
    nng_msg_free(s->req);
    s->req = NULL;
    if (rc == 0 && nng_msg_alloc(&reply, resp_len) == 0) {
        memcpy(nng_msg_body(reply), resp, resp_len);
    } else {
        log_error("out of memory: a reply was dropped");
    }
    free(resp);
    return reply;
}

/* A worker: one lock per request under load. The accounting of the request just served, the
 * slot's move to SEND and the taking of the next request happen in one critical section; the
 * reply is sent after it, outside the lock. The worker waits on work_cv only when the FIFO is
 * empty. */
static void *transport_worker_main(void *arg)
{
    transport_worker *w = arg;
    transport *t = w->t;
    transport_slot *done = NULL; /* served; its accounting is still to do */
    nng_msg *reply = NULL;       /* done's reply, or NULL */
    for (;;) {
        pthread_mutex_lock(&t->mu);
        if (done != NULL) {
            INVARIANT(t->pending > 0 && t->queued_bytes >= done->req_bytes);
            t->pending--;
            t->queued_bytes -= done->req_bytes;
            done->req_bytes = 0;
            if (reply != NULL) {
                done->state = SLOT_SEND;
            }
        }
        transport_slot *s = transport_dequeue(t);
        pthread_mutex_unlock(&t->mu);
        if (done != NULL && reply != NULL) {
            transport_send(done, reply);
        } else if (done != NULL) {
            transport_next_recv(done); /* no reply could be built: the request is dropped */
        }
        done = NULL;
        reply = NULL;
        if (s == NULL) {
            pthread_mutex_lock(&t->mu);
            while (t->head == NULL && !atomic_load(&t->stopping)) {
                pthread_cond_wait(&t->work_cv, &t->mu);
            }
            s = transport_dequeue(t);
            pthread_mutex_unlock(&t->mu);
            if (s == NULL) {
                break; /* stopping and nothing left to serve */
            }
        }
        reply = transport_serve(w, s);
        done = s;
    }
    return NULL;
}

/* --- setup and teardown ------------------------------------------------------------------- */

/* For ipc://path: refuse a socket someone is listening on, remove a stale one. */
static int transport_clear_ipc(const char *url, char *err, size_t errlen)
{
    if (strncmp(url, "ipc://", 6) != 0) {
        return 0;
    }
    const char *path = url + 6;
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        return 0;
    }
    if (!S_ISSOCK(sb.st_mode)) {
        snprintf(err, errlen,
                 "cannot listen on %s: %s exists and is not a socket (remove it or "
                 "pick another --listen)",
                 url, path);
        return -1;
    }
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, errlen,
                 "cannot listen on %s: the path is too long for a unix socket (use "
                 "a shorter path)",
                 url);
        return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        int live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
        close(fd);
        if (live) {
            snprintf(err, errlen,
                     "cannot listen on %s: another process is listening there (stop "
                     "it or pick another --listen)",
                     url);
            return -1;
        }
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "cannot remove the stale socket %s: %s (remove it by hand)", path,
                 strerror(errno));
        return -1;
    }
    return 0;
}

static void transport_free(transport *t)
{
    if (t == NULL) {
        return;
    }
    for (size_t i = 0; i < t->n_listeners; i++) {
        nng_listener_close(t->listeners[i]);
    }
    if (t->sock_open) {
        nng_close(t->sock);
    }
    for (size_t i = 0; i < t->n_slots; i++) {
        if (t->slots[i].aio != NULL) {
            nng_aio_free(t->slots[i].aio);
        }
        if (t->slots[i].req != NULL) {
            nng_msg_free(t->slots[i].req);
        }
    }
    free(t->slots);
    for (unsigned i = 0; i < t->n_workers; i++) {
        if (t->workers[i].st != NULL) {
            store_close(t->workers[i].st);
        }
    }
    free(t->workers);
    pthread_cond_destroy(&t->idle_cv);
    pthread_cond_destroy(&t->work_cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* An absolute CLOCK_REALTIME instant wait_ms from now, for pthread_cond_timedwait. */
static struct timespec transport_after(int wait_ms)
{
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_sec += wait_ms / 1000;
    at.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    return at;
}

/* Slots in one of the states of mask (bit 1 << state). Called with mu held. */
static size_t transport_count(const transport *t, unsigned mask)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n_slots; i++) {
        n += (mask >> t->slots[i].state) & 1u;
    }
    return n;
}

/* Waits (mu held) until no slot is in a state of mask, at most until deadline. Returns the
 * number still in one. */
static size_t transport_settle(transport *t, unsigned mask, const struct timespec *deadline)
{
    size_t busy;
    while ((busy = transport_count(t, mask)) > 0) {
        if (pthread_cond_timedwait(&t->idle_cv, &t->mu, deadline) == ETIMEDOUT) {
            return transport_count(t, mask);
        }
    }
    return 0;
}

/* Shuts the transport down in two phases. Stopping: new requests are answered UNAVAILABLE
 * "server is shutting down" (the slots keep receiving), queued and running requests are
 * served, the workers are joined, and every reply is sent (at most wait_ms). Closing: the
 * slots stop receiving and go IDLE; their operations are stopped. */
static void transport_drain(transport *t, int wait_ms)
{
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->stopping, true);
    pthread_cond_broadcast(&t->work_cv);
    pthread_mutex_unlock(&t->mu);

    for (unsigned i = 0; i < t->n_workers; i++) {
        if (t->workers[i].started) {
            pthread_join(t->workers[i].thread, NULL);
            t->workers[i].started = false;
        }
    }

    struct timespec deadline = transport_after(wait_ms);
    pthread_mutex_lock(&t->mu);
    size_t busy = transport_settle(t, (1u << SLOT_QUEUED) | (1u << SLOT_SEND), &deadline);
    pthread_mutex_unlock(&t->mu);
    if (busy > 0) {
        log_error("stopping with %zu replies still unsent", busy);
    }
    /* Replies are handed to the connections when their send completes; give the last ones a
     * moment on the wire before the connections close. Callers arriving meanwhile are still
     * answered UNAVAILABLE. */
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);

    pthread_mutex_lock(&t->mu);
    t->closing = true;
    for (size_t i = 0; i < t->n_slots; i++) {
        if (t->slots[i].state == SLOT_RECV) {
            nng_aio_cancel(t->slots[i].aio);
        }
    }
    deadline = transport_after(1000);
    transport_settle(t, ~(1u << SLOT_IDLE), &deadline);
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; i < t->n_slots; i++) {
        nng_aio_stop(t->slots[i].aio);
    }
}

/* Every slot's operation and context. Returns 0, or -1 with
 * the failure in err. */
static int transport_open_contexts(transport *t, char *err, size_t errlen)
{
    int rv;
    for (size_t i = 0; i < t->n_slots; i++) {
        transport_slot *s = &t->slots[i];
        s->t = t;
        if ((rv = nng_aio_alloc(&s->aio, transport_slot_cb, s)) != 0 ||
            (rv = nng_ctx_open(&s->ctx, t->sock)) != 0) {
            snprintf(err, errlen, "cannot create NNG contexts: %s (lower --workers/--queue)",
                     nng_strerror(rv));
            return -1;
        }
    }
    return 0;
}

/* The bytes of requests allowed to wait or be served at once, for --max-message. */
static size_t transport_queue_bytes(size_t max_message)
{
    size_t n = max_message <= SIZE_MAX / TRANSPORT_QUEUE_BYTES_FACTOR
                   ? max_message * TRANSPORT_QUEUE_BYTES_FACTOR
                   : SIZE_MAX;
    return n < TRANSPORT_QUEUE_BYTES_MIN ? TRANSPORT_QUEUE_BYTES_MIN : n;
}

int transport_start(const transport_opts *o, transport **out, int *db_failure, char *err,
                    size_t errlen)
{
    *out = NULL;
    *db_failure = 0;
    if (o->n_urls == 0 || o->n_urls > 16 || o->workers == 0) {
        snprintf(err, errlen, "nothing to listen on (pass --listen URL)");
        return -1;
    }
    transport *t = calloc(1, sizeof *t);
    if (t == NULL) {
        snprintf(err, errlen, "out of memory starting the transport (free some memory)");
        return -1;
    }
    if (pthread_mutex_init(&t->mu, NULL) != 0 || pthread_cond_init(&t->work_cv, NULL) != 0 ||
        pthread_cond_init(&t->idle_cv, NULL) != 0) {
        free(t);
        snprintf(err, errlen, "cannot create transport locks (free some resources)");
        return -1;
    }
    atomic_init(&t->stopping, false);
    t->dispatch = o->dispatch;
    t->quick = o->dispatch->env != NULL && o->dispatch->env->serving != NULL;
    t->max_message = o->max_message;
    t->max_queued_bytes = transport_queue_bytes(o->max_message);
    t->limit = (size_t)o->workers + o->queue;
    t->n_workers = o->workers;
    metrics_set_workers(o->workers);
    t->n_slots = t->limit + TRANSPORT_OVERFLOW_SLOTS;
    t->workers = calloc(t->n_workers, sizeof *t->workers);
    t->slots = calloc(t->n_slots, sizeof *t->slots);
    if (t->workers == NULL || t->slots == NULL) {
        transport_free(t);
        snprintf(err, errlen, "out of memory starting the transport (lower --workers/--queue)");
        return -1;
    }

    for (unsigned i = 0; i < t->n_workers; i++) {
        t->workers[i].t = t;
        int rc = store_open(o->redis_url, o->graph, o->timeout_ms, &t->workers[i].st);
        if (rc != STATUS_OK) {
            t->workers[i].st = NULL;
            snprintf(err, errlen,
                     "cannot connect worker %u to Redis at %s (check that Redis "
                     "runs and --redis is right)",
                     i, o->redis_url);
            *db_failure = 1;
            transport_free(t);
            return -1;
        }
    }

    int rv = nng_rep0_open(&t->sock);
    if (rv != 0) {
        snprintf(err, errlen, "cannot open the NNG socket: %s (check the NNG installation)",
                 nng_strerror(rv));
        transport_free(t);
        return -1;
    }
    t->sock_open = true;
    /* NNG refuses a frame above this as it arrives, from its length prefix, before reading it
     * into memory: the connection is closed, and no answer is possible without reading the
     * frame. Up to this, a request over max_message is answered RESOURCE_EXHAUSTED. */
    size_t recvmax = o->max_message + TRANSPORT_FRAME_SLACK;
    if ((rv = nng_socket_set_size(t->sock, NNG_OPT_RECVMAXSZ, recvmax)) != 0) {
        snprintf(err, errlen, "cannot set the message size limit: %s (check --max-message)",
                 nng_strerror(rv));
        transport_free(t);
        return -1;
    }

    if (transport_open_contexts(t, err, errlen) != 0) {
        transport_free(t);
        return -1;
    }

    for (size_t i = 0; i < o->n_urls; i++) {
        const char *url = o->urls[i];
        if (transport_clear_ipc(url, err, errlen) != 0) {
            transport_free(t);
            return -1;
        }
        nng_listener l;
        if ((rv = nng_listener_create(&l, t->sock, url)) != 0) {
            snprintf(err, errlen, "cannot listen on %s: %s (check the URL)", url, nng_strerror(rv));
            transport_free(t);
            return -1;
        }
        t->listeners[t->n_listeners++] = l;
        if ((rv = nng_listener_set_size(l, NNG_OPT_RECVMAXSZ, recvmax)) != 0) {
            snprintf(err, errlen,
                     "cannot set the message size limit on %s: %s (check "
                     "--max-message)",
                     url, nng_strerror(rv));
            transport_free(t);
            return -1;
        }
        if (strncmp(url, "ipc://", 6) == 0) {
            rv = nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, 0600);
            if (rv != 0 && rv != NNG_ENOTSUP) {
                snprintf(err, errlen, "cannot make %s mode 0600: %s (pick another --listen)", url,
                         nng_strerror(rv));
                transport_free(t);
                return -1;
            }
        }
        if ((rv = nng_listener_start(l, 0)) != 0) {
            snprintf(err, errlen,
                     "cannot listen on %s: %s (is another charterd running? pick "
                     "another --listen)",
                     url, nng_strerror(rv));
            transport_free(t);
            return -1;
        }
    }

    for (unsigned i = 0; i < t->n_workers; i++) {
        if ((rv = pthread_create(&t->workers[i].thread, NULL, transport_worker_main,
                                 &t->workers[i])) != 0) {
            snprintf(err, errlen, "cannot start worker threads: %s (lower --workers)",
                     strerror(rv));
            transport_drain(t, 1000);
            transport_free(t);
            return -1;
        }
        t->workers[i].started = true;
    }

    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->n_slots; i++) {
        t->slots[i].state = SLOT_RECV;
        nng_ctx_recv(t->slots[i].ctx, t->slots[i].aio);
    }
    pthread_mutex_unlock(&t->mu);
    *out = t;
    return 0;
}

int transport_listen_url(const transport *t, size_t i, char *out, size_t n)
{
    if (i >= t->n_listeners) {
        return -1;
    }
    char *url = NULL;
    if (nng_listener_get_string(t->listeners[i], NNG_OPT_URL, &url) != 0) {
        return -1;
    }
    int port = 0;
    const char *colon = strrchr(url, ':');
    int w;
    if (strncmp(url, "tcp", 3) == 0 && colon != NULL &&
        nng_listener_get_int(t->listeners[i], NNG_OPT_TCP_BOUND_PORT, &port) == 0) {
        w = snprintf(out, n, "%.*s:%d", (int)(colon - url), url, port);
    } else {
        w = snprintf(out, n, "%s", url);
    }
    nng_strfree(url);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* Closes the listeners and the socket on a helper thread. */
static void *transport_closer(void *arg)
{
    transport *t = arg;
    for (size_t i = 0; i < t->n_listeners; i++) {
        nng_listener_close(t->listeners[i]);
    }
    nng_close(t->sock);
    pthread_mutex_lock(&t->mu);
    t->n_listeners = 0;
    t->sock_open = false;
    pthread_cond_broadcast(&t->idle_cv);
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* Closes the listeners and the socket, waiting at most wait_ms. NNG 1.5.2 can block for ever in
 * close when a connection was cut in the middle of a large transfer (its reaper waits for an
 * operation that never completes); a stopping charterd must still exit. Returns 0 once closed,
 * -1 when the close is still blocked (then t must not be freed). */
static int transport_close_bounded(transport *t, int wait_ms)
{
    pthread_t th;
    if (pthread_create(&th, NULL, transport_closer, t) != 0) {
        transport_closer(t);
        return 0;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += wait_ms / 1000;
    deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    while (t->sock_open && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&t->idle_cv, &t->mu, &deadline);
    }
    bool closed = !t->sock_open;
    pthread_mutex_unlock(&t->mu);
    if (!closed) {
        pthread_detach(th);
        return -1;
    }
    pthread_join(th, NULL);
    return 0;
}

void transport_stop(transport *t)
{
    if (t == NULL) {
        return;
    }
    /* The listeners stay open until the end: closing an NNG listener also closes every
     * connection it accepted, which would drop the replies of calls still in flight. New
     * requests are refused with UNAVAILABLE from the moment stopping is set. */
    transport_drain(t, 10000);
    log_refusal_flush();
    if (transport_close_bounded(t, 5000) != 0) {
        /* The stores do not depend on NNG: close them; leave the rest to the process exit. */
        for (unsigned i = 0; i < t->n_workers; i++) {
            store_close(t->workers[i].st);
            t->workers[i].st = NULL;
        }
        log_error("the NNG socket did not close within 5 s; exiting without it");
        return;
    }
    transport_free(t);
}
