/*
 * test_history.c - a history checker: many callers deliver, revoke, restore and recover over
 * two charterd processes serving one graph while the database and the servers are made to
 * fail, every call's invocation and answer is recorded, and the recorded history is then
 * checked against what the database holds.
 *
 * Faults, injected in turn from the main thread: redis-server stopped (SIGSTOP, SIGCONT after
 * 1.5 s), made to sleep (DEBUG SLEEP 2), killed (SIGKILL) and restarted on its append-only file
 * (fsynced on every write, so nothing acknowledged may be lost), and one charterd killed
 * (SIGKILL) and restarted. Deliveries carry a 500 ms deadline, shorter than every fault.
 *
 * What must hold afterwards, whatever the faults did:
 *   - no invocation is committed twice (one ALLOW decision event per delivered invocation);
 *   - no delivery is committed while a grant on its chain was revoked (database timestamps:
 *     from the revocation's revoked_at to the database clock read before its restore was sent);
 *   - every ALLOW answer (new or acknowledged) has its delivery stored, with its payload;
 *   - every answer that claimed no effect (a DENY, an UNKNOWN without the EFFECT_UNKNOWN code,
 *     or a refusal such as INVALID_ARGUMENT) has no delivery stored;
 *   - after the servers stop and one restarts, no run is left running or recovering.
 * Callers retry only invocations whose answer left the effect unknown (no answer, UNAVAILABLE,
 * DEADLINE_EXCEEDED, INTERNAL, UNKNOWN EFFECT_UNKNOWN), always with the same invocation ID and
 * payload, so a stored delivery after a no-effect answer is always a violation. The test prints a
 * table of operations, faults and violations and requires zero violations; CHARTER_HISTORY_SECONDS
 * sets the load time and CHARTER_HISTORY_LOG names a file that receives every recorded call.
 */
#include <CUnit/Basic.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"

#define M_CREATE_RUN "/charter.v1.Runs/CreateRun"
#define M_RECOVER_RUN "/charter.v1.Runs/RecoverRun"
#define M_OPEN_STEP "/charter.v1.Gate/OpenStep"
#define M_READ_SOURCE "/charter.v1.Gate/ReadSource"
#define M_RECORD_OUTPUT "/charter.v1.Gate/RecordOutput"
#define M_DELIVER "/charter.v1.Gate/Deliver"
#define M_REVOKE "/charter.v1.Grants/RevokeGrant"
#define M_RESTORE "/charter.v1.Grants/RestoreGrants"

#define N_HOSTS 8
#define DELIVER_DEADLINE_MS 500 /* the server's deadline of each delivery */
#define CALL_WAIT_MS 8000       /* how long a caller waits for any answer */
#define LOAD_SECONDS_DEFAULT 30 /* CHARTER_HISTORY_SECONDS overrides */
#define MAX_OPS 200000
#define MAX_INTERVALS 4096

/* --- time ---------------------------------------------------------------------------------- */

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* A stored time "<seconds>.<microseconds>" as microseconds, exactly; -1 when it is not one. */
static long long stored_time_us(const char *s)
{
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    long long sec = 0, usec = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++)
        sec = sec * 10 + (*p - '0');
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 6)
                usec = usec * 10 + (*p - '0');
        for (; digits < 6; digits++)
            usec *= 10;
    }
    if (*p != '\0')
        return -1;
    return sec * 1000000 + usec;
}

/* --- the system under test ------------------------------------------------------------------ */

static char graph[64];
static harness_private_redis redis;
static harness_charterd daemons[2];
static pthread_mutex_t daemons_mtx = PTHREAD_MUTEX_INITIALIZER;
static atomic_int load_over;

/* The TCP URL of charterd i as it is now (it changes when charterd restarts). */
static void daemon_url(int i, char url[64])
{
    pthread_mutex_lock(&daemons_mtx);
    snprintf(url, 64, "%s", daemons[i].tcp_url);
    pthread_mutex_unlock(&daemons_mtx);
}

/* --- the history ----------------------------------------------------------------------------- */

typedef enum { OP_DELIVER, OP_REVOKE, OP_RESTORE, OP_CREATE_RUN, OP_RECOVER, OP_KINDS } op_kind;
static const char *const op_names[OP_KINDS] = {"deliver", "revoke", "restore", "create run",
                                               "recover"};

/* How an answer speaks of its effect. */
typedef enum {
    ANS_ALLOW,   /* OK with decision ALLOW (new or acknowledged): the effect happened */
    ANS_NONE,    /* a DENY, an UNKNOWN that claims no effect, or a refusal: nothing happened */
    ANS_UNKNOWN, /* no answer, UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL: not known */
    ANS_OK,      /* OK for a call that is not a decision */
    ANS_KINDS
} answer_class;
static const char *const answer_names[ANS_KINDS] = {"allow", "no effect", "effect unknown", "ok"};

typedef struct {
    op_kind kind;
    int daemon;
    answer_class answer;
    int transport; /* NNG error, 0 when charterd answered */
    int code;      /* RpcResponse.code */
    bool acknowledged;
    char inv[160];
    char payload[64];
    char run_id[64];
    char detail[200]; /* codes and witness, or the error message */
    int fault;        /* the fault in progress when the call started (F_* + 1), 0 for none */
} op;

static op *ops;
static size_t n_ops;
static pthread_mutex_t ops_mtx = PTHREAD_MUTEX_INITIALIZER;

static void history_add(const op *o)
{
    pthread_mutex_lock(&ops_mtx);
    if (n_ops < MAX_OPS)
        ops[n_ops++] = *o;
    pthread_mutex_unlock(&ops_mtx);
}

/* A revocation interval of one grant: revoked from from_us until at least to_us (database
 * clock, microseconds). */
typedef struct {
    char grant[32];
    long long from_us, to_us;
} interval;

static interval intervals[MAX_INTERVALS];
static size_t n_intervals;
static pthread_mutex_t intervals_mtx = PTHREAD_MUTEX_INITIALIZER;

enum { F_STOP, F_SLEEP, F_REDIS_KILL, F_CHARTERD_KILL, F_KINDS };
static const char *const fault_names[F_KINDS] = {"redis SIGSTOP 1.5 s / SIGCONT",
                                                 "redis DEBUG SLEEP 2", "redis kill -9 + restart",
                                                 "charterd kill -9 + restart"};
static int faults[F_KINDS];
static atomic_int fault_now;  /* F_* + 1 while a fault is being injected, else 0 */
static atomic_int fault_last; /* F_* + 1 of the latest fault begun */
static atomic_int fault_seq;  /* faults begun so far */
static int fault_failures;

/* --- calls ------------------------------------------------------------------------------------ */

/* One call to charterd i with a server deadline of deadline_ms. On an OK answer *out is the
 * unpacked response (caller frees). Fills o's transport, code and, on failure, detail. */
static void call(int i, const char *method, const ProtobufCMessage *req,
                 const ProtobufCMessageDescriptor *desc, uint32_t deadline_ms,
                 ProtobufCMessage **out, op *o)
{
    char url[64];
    daemon_url(i, url);
    *out = NULL;
    o->daemon = i;
    o->fault = fault_now;
    int seq0 = fault_seq;
    harness_response r;
    memset(&r, 0, sizeof r);
    o->transport = harness_rpc_deadline(url, method, HARNESS_OPERATOR_TOKEN, req, deadline_ms,
                                        CALL_WAIT_MS, &r);
    /* A call that overlapped a fault is attributed to it. */
    if (o->fault == 0)
        o->fault = fault_now ? fault_now : (fault_seq != seq0 ? fault_last : 0);
    if (o->transport != 0) {
        o->code = -1;
        snprintf(o->detail, sizeof o->detail, "no answer (NNG error %d)", o->transport);
        return;
    }
    o->code = r.code;
    if (r.code == 0) {
        *out = protobuf_c_message_unpack(desc, NULL, r.payload_len, r.payload);
        if (*out == NULL) {
            o->code = CHARTER_INTERNAL;
            snprintf(o->detail, sizeof o->detail, "undecodable %s", desc->name);
        }
    } else {
        snprintf(o->detail, sizeof o->detail, "%s: %s", charter_status_name(r.code),
                 r.message ? r.message : "");
    }
    harness_response_free(&r);
}

/* The class of an answer that is not OK (or not answered). */
static answer_class error_class(const op *o)
{
    if (o->transport != 0)
        return ANS_UNKNOWN;
    switch (o->code) {
    case CHARTER_UNAVAILABLE:
    case CHARTER_DEADLINE_EXCEEDED:
    case CHARTER_INTERNAL:
    case CHARTER_UNKNOWN:
    case CHARTER_CANCELLED:
        return ANS_UNKNOWN;
    default:
        return ANS_NONE; /* a refusal: INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, ... */
    }
}

/* The class of a decision. An UNKNOWN decision claims no effect (README: "Nothing happens")
 * unless it carries EFFECT_UNKNOWN (a commit was sent and its outcome is not known). */
static answer_class decision_class(const Charter__V1__Decision *d, op *o)
{
    if (d == NULL)
        return ANS_UNKNOWN;
    size_t used = 0;
    o->detail[0] = '\0';
    for (size_t k = 0; k < d->n_codes && used < sizeof o->detail; k++) {
        int w =
            snprintf(o->detail + used, sizeof o->detail - used, "%s%s", k ? "," : "", d->codes[k]);
        if (w > 0)
            used += (size_t)w;
    }
    if (used < sizeof o->detail && d->witness && d->witness[0])
        snprintf(o->detail + used, sizeof o->detail - used, " \"%s\"", d->witness);
    switch (d->outcome) {
    case CHARTER__V1__OUTCOME__ALLOW:
        return ANS_ALLOW;
    case CHARTER__V1__OUTCOME__DENY:
        return ANS_NONE;
    default:
        break;
    }
    /* Only the EFFECT_UNKNOWN code says so: a plain UNKNOWN claims no effect, whatever its
     * witness says. */
    bool says_unknown = false;
    for (size_t k = 0; k < d->n_codes; k++)
        if (d->codes[k] && strcmp(d->codes[k], "EFFECT_UNKNOWN") == 0)
            says_unknown = true;
    return says_unknown ? ANS_UNKNOWN : ANS_NONE;
}

/* --- one host: an external run, its analyze context and payloads, then deliveries ----------- */

typedef struct {
    int index;
    pthread_t thread;
    char run_id[64];
    char ctx[64];
    char payload[2][64];
    unsigned seq;         /* next fresh invocation number */
    char pending[8][160]; /* invocations whose effect is unknown, retried with their payload */
    int pending_payload[8];
    size_t n_pending;
    unsigned rng;
} host;

/* Sets up a fresh run for h (CreateRun external, OpenStep analyze, ReadSource budget, two
 * RecordOutputs) on charterd d. Returns 0, or -1 when a call failed (the host tries again). */
static int host_prepare(host *h, int d)
{
    op o;
    memset(&o, 0, sizeof o);
    ProtobufCMessage *out = NULL;
    int ok = -1;

    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    call(d, M_CREATE_RUN, &cr.base, &charter__v1__run_view__descriptor, 3000, &out, &o);
    if (out == NULL)
        return -1;
    snprintf(h->run_id, sizeof h->run_id, "%s", ((Charter__V1__RunView *)out)->run->id);
    protobuf_c_message_free_unpacked(out, NULL);

    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = h->run_id;
    os.step = "analyze";
    call(d, M_OPEN_STEP, &os.base, &charter__v1__step_context__descriptor, 3000, &out, &o);
    if (out == NULL)
        return -1;
    snprintf(h->ctx, sizeof h->ctx, "%s", ((Charter__V1__StepContext *)out)->context_id);
    protobuf_c_message_free_unpacked(out, NULL);

    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = h->ctx;
    rs.resource_id = "budget";
    call(d, M_READ_SOURCE, &rs.base, &charter__v1__read_source_response__descriptor, 3000, &out,
         &o);
    if (out == NULL)
        return -1;
    Charter__V1__ReadSourceResponse *src = (Charter__V1__ReadSourceResponse *)out;
    char source[64] = "";
    if (src->artifact && src->decision && src->decision->outcome == CHARTER__V1__OUTCOME__ALLOW)
        snprintf(source, sizeof source, "%s", src->artifact->id);
    protobuf_c_message_free_unpacked(out, NULL);
    if (source[0] == '\0')
        return -1;

    for (int k = 0; k < 2; k++) {
        char content[160];
        snprintf(content, sizeof content, "Recommendation %d of host %d: vendor_b, run %s.", k,
                 h->index, h->run_id);
        char *inputs[1] = {source};
        Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
        ro.context_id = h->ctx;
        ro.input_ids = inputs;
        ro.n_input_ids = 1;
        ro.title = "Internal recommendation";
        ro.content = content;
        call(d, M_RECORD_OUTPUT, &ro.base, &charter__v1__record_output_response__descriptor, 3000,
             &out, &o);
        if (out == NULL)
            return -1;
        Charter__V1__RecordOutputResponse *r = (Charter__V1__RecordOutputResponse *)out;
        if (r->artifact && r->decision && r->decision->outcome == CHARTER__V1__OUTCOME__ALLOW) {
            snprintf(h->payload[k], sizeof h->payload[k], "%s", r->artifact->id);
            ok = 0;
        } else {
            ok = -1;
        }
        protobuf_c_message_free_unpacked(out, NULL);
        if (ok != 0)
            return -1;
    }
    return ok;
}

/* One delivery by h on charterd d: a retry of a pending invocation now and then, otherwise a
 * fresh one. Returns the answer's class; *rerun is set when the run can take no more
 * deliveries (a DENY not caused by a revocation, or a refusal). */
static answer_class host_deliver(host *h, int d, bool *rerun)
{
    op o;
    memset(&o, 0, sizeof o);
    o.kind = OP_DELIVER;
    int which;
    size_t slot = SIZE_MAX;
    h->rng = h->rng * 1103515245u + 12345u;
    if (h->n_pending > 0 && ((h->rng >> 16) % 3 == 0 || h->n_pending == 8)) {
        slot = (h->rng >> 8) % h->n_pending;
        snprintf(o.inv, sizeof o.inv, "%s", h->pending[slot]);
        which = h->pending_payload[slot];
    } else {
        snprintf(o.inv, sizeof o.inv, "h%d-%s-%u", h->index, h->run_id, h->seq);
        which = (int)(h->seq % 2);
        h->seq++;
    }
    snprintf(o.payload, sizeof o.payload, "%s", h->payload[which]);
    snprintf(o.run_id, sizeof o.run_id, "%s", h->run_id);

    Charter__V1__DeliverRequest req = CHARTER__V1__DELIVER_REQUEST__INIT;
    req.context_id = h->ctx;
    req.payload_id = h->payload[which];
    req.recipient = "cfo";
    req.tool = "deliver_internal";
    req.invocation_id = o.inv;
    ProtobufCMessage *out = NULL;
    call(d, M_DELIVER, &req.base, &charter__v1__deliver_response__descriptor, DELIVER_DEADLINE_MS,
         &out, &o);
    if (out != NULL) {
        Charter__V1__DeliverResponse *r = (Charter__V1__DeliverResponse *)out;
        o.answer = decision_class(r->decision, &o);
        o.acknowledged = r->acknowledged;
        protobuf_c_message_free_unpacked(out, NULL);
    } else {
        o.answer = error_class(&o);
    }
    history_add(&o);

    /* Pending invocations: added when the effect is unknown, dropped once answered. */
    if (o.answer == ANS_UNKNOWN && slot == SIZE_MAX && h->n_pending < 8) {
        snprintf(h->pending[h->n_pending], sizeof h->pending[0], "%s", o.inv);
        h->pending_payload[h->n_pending] = which;
        h->n_pending++;
    } else if (o.answer != ANS_UNKNOWN && slot != SIZE_MAX) {
        h->n_pending--;
        if (slot != h->n_pending) {
            memcpy(h->pending[slot], h->pending[h->n_pending], sizeof h->pending[0]);
            h->pending_payload[slot] = h->pending_payload[h->n_pending];
        }
    }
    *rerun = (o.answer == ANS_NONE && strstr(o.detail, "GRANT_INVALID") == NULL &&
              strstr(o.detail, "GRAPH_ERROR") == NULL) ||
             (o.transport == 0 && o.code == CHARTER_FAILED_PRECONDITION);
    return o.answer;
}

static void *host_main(void *arg)
{
    host *h = arg;
    int d = h->index % 2;
    bool ready = false;
    while (!load_over) {
        if (!ready) {
            /* A run left with pending invocations keeps them in the history; a new run starts
             * with none (its context is another one). */
            h->n_pending = 0;
            ready = host_prepare(h, d) == 0;
            if (!ready) {
                sleep_ms(200);
                continue;
            }
        }
        bool rerun = false;
        answer_class a = host_deliver(h, d, &rerun);
        if (rerun)
            ready = false;
        if (a == ANS_UNKNOWN)
            sleep_ms(100);
    }
    return NULL;
}

/* --- the revoker: g_analyst (and now and then g_root) revoked and restored in turn ---------- */

/* The database clock in microseconds, read on the revoker's own connection; retried until the
 * database answers. */
static long long db_now_us(store **st)
{
    for (;;) {
        if (*st == NULL && store_open(redis.url, graph, 2000, st) != STATUS_OK)
            *st = NULL;
        json_t *j = NULL;
        if (*st != NULL && q_time(*st, &j) == STATUS_OK) {
            long long t = stored_time_us(json_string_value(json_object_get(j, "now")));
            json_decref(j);
            if (t > 0)
                return t;
        }
        sleep_ms(50);
    }
}

static void *revoker_main(void *arg)
{
    (void)arg;
    store *st = NULL;
    unsigned round = 0;
    while (!load_over) {
        const char *grant = round % 4 == 3 ? "g_root" : "g_analyst";
        int d = (int)(round % 2);
        round++;
        /* Revoke until answered: a repeated revocation answers the first revoked_at. */
        long long from_us = -1;
        while (from_us < 0) {
            op o;
            memset(&o, 0, sizeof o);
            o.kind = OP_REVOKE;
            snprintf(o.inv, sizeof o.inv, "%s", grant);
            Charter__V1__RevokeGrantRequest rq = CHARTER__V1__REVOKE_GRANT_REQUEST__INIT;
            rq.grant_id = (char *)grant;
            ProtobufCMessage *out = NULL;
            call(d, M_REVOKE, &rq.base, &charter__v1__grant__descriptor, 2000, &out, &o);
            if (out != NULL) {
                double at = ((Charter__V1__Grant *)out)->revoked_at;
                from_us = (long long)(at * 1e6 + 0.5);
                o.answer = ANS_OK;
                protobuf_c_message_free_unpacked(out, NULL);
            } else {
                o.answer = error_class(&o);
                sleep_ms(100);
            }
            history_add(&o);
        }
        sleep_ms(200 + (long)(round % 5) * 60);
        /* The grant is revoked at least until this moment of the database clock. */
        long long to_us = db_now_us(&st);
        for (;;) {
            op o;
            memset(&o, 0, sizeof o);
            o.kind = OP_RESTORE;
            snprintf(o.inv, sizeof o.inv, "%s", grant);
            Charter__V1__RestoreGrantsRequest rq = CHARTER__V1__RESTORE_GRANTS_REQUEST__INIT;
            rq.grant_id = (char *)grant;
            ProtobufCMessage *out = NULL;
            call(d, M_RESTORE, &rq.base, &charter__v1__restore_grants_response__descriptor, 2000,
                 &out, &o);
            o.answer = out != NULL ? ANS_OK : error_class(&o);
            history_add(&o);
            if (out != NULL) {
                protobuf_c_message_free_unpacked(out, NULL);
                break;
            }
            sleep_ms(100);
        }
        pthread_mutex_lock(&intervals_mtx);
        if (n_intervals < MAX_INTERVALS) {
            interval *iv = &intervals[n_intervals++];
            snprintf(iv->grant, sizeof iv->grant, "%s", grant);
            iv->from_us = from_us;
            iv->to_us = to_us;
        }
        pthread_mutex_unlock(&intervals_mtx);
        sleep_ms(300);
    }
    store_close(st);
    return NULL;
}

/* --- the recoverer: scripted runs that end blocked, then recovered ------------------------- */

static void *recoverer_main(void *arg)
{
    (void)arg;
    unsigned round = 0;
    while (!load_over) {
        int d = (int)(round++ % 2);
        op o;
        memset(&o, 0, sizeof o);
        o.kind = OP_CREATE_RUN;
        Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
        cr.mode = "scripted";
        ProtobufCMessage *out = NULL;
        call(d, M_CREATE_RUN, &cr.base, &charter__v1__run_view__descriptor, 5000, &out, &o);
        char run_id[64] = "";
        bool blocked = false;
        if (out != NULL) {
            Charter__V1__RunView *v = (Charter__V1__RunView *)out;
            snprintf(run_id, sizeof run_id, "%s", v->run->id);
            snprintf(o.run_id, sizeof o.run_id, "%s", run_id);
            snprintf(o.detail, sizeof o.detail, "%s", v->run->status);
            blocked = strcmp(v->run->status, "blocked") == 0;
            o.answer = ANS_OK;
            protobuf_c_message_free_unpacked(out, NULL);
        } else {
            o.answer = error_class(&o);
        }
        history_add(&o);
        if (!blocked) {
            sleep_ms(200);
            continue;
        }
        memset(&o, 0, sizeof o);
        o.kind = OP_RECOVER;
        snprintf(o.run_id, sizeof o.run_id, "%s", run_id);
        Charter__V1__RecoverRunRequest rr = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
        rr.run_id = run_id;
        call(d, M_RECOVER_RUN, &rr.base, &charter__v1__recover_run_response__descriptor, 5000, &out,
             &o);
        if (out != NULL) {
            Charter__V1__RecoverRunResponse *r = (Charter__V1__RecoverRunResponse *)out;
            o.answer = decision_class(r->decision, &o);
            o.acknowledged = r->acknowledged;
            /* The recovery's delivery is named <run>:<step>:deliver, as the runner names it. */
            snprintf(o.inv, sizeof o.inv, "%s:%s:deliver", run_id, r->step ? r->step : "");
            if (o.answer == ANS_ALLOW && r->n_deliveries > 0)
                snprintf(o.inv, sizeof o.inv, "%s",
                         r->deliveries[r->n_deliveries - 1]->invocation_id);
            protobuf_c_message_free_unpacked(out, NULL);
        } else {
            o.answer = error_class(&o);
        }
        history_add(&o);
    }
    return NULL;
}

/* --- faults ---------------------------------------------------------------------------------- */

static int redis_command(const char *cmd)
{
    struct timeval tv = {10, 0};
    redisContext *c = redisConnectUnixWithTimeout(redis.sock, tv);
    int rc = -1;
    if (c != NULL && c->err == 0) {
        redisReply *r = redisCommand(c, cmd);
        rc = r != NULL && r->type != REDIS_REPLY_ERROR ? 0 : -1;
        if (r != NULL && r->type == REDIS_REPLY_ERROR)
            fprintf(stderr, "history: %s: %s\n", cmd, r->str);
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c != NULL)
        redisFree(c);
    return rc;
}

static void inject(int kind, int round)
{
    int ok = 0;
    fault_last = kind + 1;
    fault_seq++;
    fault_now = kind + 1;
    switch (kind) {
    case F_STOP:
        ok = kill(redis.pid, SIGSTOP) == 0;
        sleep_ms(1500);
        ok = kill(redis.pid, SIGCONT) == 0 && ok;
        break;
    case F_SLEEP:
        ok = redis_command("DEBUG SLEEP 2") == 0;
        break;
    case F_REDIS_KILL:
        harness_private_redis_kill(&redis);
        sleep_ms(300);
        ok = harness_private_redis_start(&redis) == 0;
        break;
    case F_CHARTERD_KILL: {
        int i = round % 2;
        harness_charterd_opts opts = {.graph = graph};
        harness_charterd fresh;
        pthread_mutex_lock(&daemons_mtx);
        harness_charterd_kill(&daemons[i]);
        pthread_mutex_unlock(&daemons_mtx);
        sleep_ms(200);
        ok = harness_charterd_start(&opts, &fresh) == 0;
        if (ok) {
            pthread_mutex_lock(&daemons_mtx);
            daemons[i] = fresh;
            pthread_mutex_unlock(&daemons_mtx);
        }
        break;
    }
    default:
        break;
    }
    fault_now = 0;
    faults[kind]++;
    if (!ok) {
        fault_failures++;
        fprintf(stderr, "history: injecting \"%s\" failed\n", fault_names[kind]);
    }
}

/* --- the check ------------------------------------------------------------------------------- */

enum { V_TWICE, V_REVOKED, V_ALLOW_LOST, V_NO_EFFECT, V_RUNNING, V_KINDS };
static const char *const violation_names[V_KINDS] = {
    "invocation committed twice", "delivery committed while a grant of its chain was revoked",
    "acknowledged allow without its delivery", "no-effect answer with a delivery stored",
    "run left running or recovering"};
static int violations[V_KINDS];
/* No-effect answers of retries, with a delivery stored, after a call of the same invocation
 * that left the effect unknown (not violations: the earlier call may have committed). */
static int excused_retries;

static void violation(int kind, const char *fmt, const char *a, const char *b)
{
    violations[kind]++;
    if (violations[kind] <= 5) {
        fprintf(stderr, "VIOLATION (%s): ", violation_names[kind]);
        fprintf(stderr, fmt, a, b);
        fputc('\n', stderr);
    }
}

/* Every run of the graph (charter_list_runs), as db_call calls it. */
static int db_list_runs(store *st, const char *unused, json_t **out)
{
    (void)unused;
    return q_list_runs(st, "100000", out);
}

/* Every event, delivery and artifact of run id (charter_get_run), as db_call calls it. */
static int db_get_run(store *st, const char *id, json_t **out)
{
    return q_get_run(st, id, "0", "100000", NULL, NULL, NULL, out);
}

/* read(st, arg, out), tried again while the connection is being re-established (the store
 * drops a connection on its first failure and reconnects on the next call). */
static int db_call(store *st, int (*read)(store *, const char *, json_t **), const char *arg,
                   json_t **out)
{
    int rc = STATUS_EUNAVAILABLE;
    for (int attempt = 0; attempt < 50; attempt++) {
        rc = read(st, arg, out);
        if (rc != STATUS_EUNAVAILABLE)
            break;
        sleep_ms(100);
    }
    return rc;
}

/* The ALLOW delivery_decided events per invocation of one run, added to counts (inv -> n). */
static void count_allows(json_t *view, json_t *counts)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(view, "events"), i, e)
    {
        const char *kind = json_string_value(json_object_get(e, "kind"));
        const char *out = json_string_value(json_object_get(e, "outcome"));
        const char *detail = json_string_value(json_object_get(e, "detail"));
        if (!kind || strcmp(kind, "delivery_decided") != 0 || !out || strcasecmp(out, "allow") ||
            !detail)
            continue;
        json_t *d = json_loads(detail, 0, NULL);
        const char *inv = json_string_value(json_object_get(d, "invocation_id"));
        if (inv) {
            json_int_t n = json_integer_value(json_object_get(counts, inv));
            json_object_set_new(counts, inv, json_integer(n + 1));
        }
        json_decref(d);
    }
}

static void check_history(store *st, long *n_deliveries, long *n_runs)
{
    json_t *counts = json_object();
    json_t *stored = json_object(); /* inv -> delivery */
    CU_ASSERT_PTR_NOT_NULL_FATAL(counts);
    json_t *list = NULL;
    CU_ASSERT_EQUAL_FATAL(db_call(st, db_list_runs, NULL, &list), STATUS_OK);
    size_t i;
    json_t *run;
    *n_runs = 0;
    *n_deliveries = 0;
    json_array_foreach(json_object_get(list, "runs"), i, run)
    {
        const char *id = json_string_value(json_object_get(run, "id"));
        const char *status = json_string_value(json_object_get(run, "status"));
        (*n_runs)++;
        if (status && (!strcmp(status, "running") || !strcmp(status, "recovering")))
            violation(V_RUNNING, "run %s is %s", id, status);
        json_t *view = NULL;
        if (db_call(st, db_get_run, id, &view) != STATUS_OK) {
            CU_FAIL("get_run failed");
            continue;
        }
        count_allows(view, counts);
        size_t k;
        json_t *dl;
        json_array_foreach(json_object_get(view, "deliveries"), k, dl)
        {
            const char *inv = json_string_value(json_object_get(dl, "invocation_id"));
            if (inv) {
                json_object_set(stored, inv, dl);
                (*n_deliveries)++;
            }
        }
        json_decref(view);
    }
    json_decref(list);

    /* Committed twice: more than one ALLOW decision for one invocation. */
    const char *inv;
    json_t *v;
    json_object_foreach(counts, inv, v)
    {
        if (json_integer_value(v) > 1)
            violation(V_TWICE, "%s has %s allow decisions", inv,
                      json_integer_value(v) > 2 ? "more than two" : "two");
    }
    /* Committed inside a revocation interval of a grant on its chain. */
    json_object_foreach(stored, inv, v)
    {
        long long at = stored_time_us(json_string_value(json_object_get(v, "committed_at")));
        size_t g;
        json_t *grant;
        json_array_foreach(json_object_get(v, "grant_chain"), g, grant)
        {
            const char *gid = json_string_value(grant);
            for (size_t r = 0; gid && r < n_intervals; r++) {
                if (strcmp(intervals[r].grant, gid) == 0 && at >= intervals[r].from_us &&
                    at <= intervals[r].to_us)
                    violation(V_REVOKED, "%s committed while %s was revoked", inv, gid);
            }
        }
    }
    /* Each answer against what is stored. A no-effect answer speaks for its own call: after an
     * earlier call of the same invocation left the effect unknown (ops are in the order they
     * were answered, and a retry starts after the answer it retries), a stored delivery may be
     * that call's commit landing late, so it is counted apart, not as a violation. */
    json_t *unknown_before = json_object();
    CU_ASSERT_PTR_NOT_NULL_FATAL(unknown_before);
    for (size_t k = 0; k < n_ops; k++) {
        const op *o = &ops[k];
        if (o->kind != OP_DELIVER && o->kind != OP_RECOVER)
            continue;
        json_t *dl = json_object_get(stored, o->inv);
        if (o->answer == ANS_UNKNOWN)
            json_object_set_new(unknown_before, o->inv, json_true());
        if (o->answer == ANS_NONE && dl != NULL &&
            json_object_get(unknown_before, o->inv) != NULL) {
            excused_retries++;
            continue;
        }
        if (o->answer == ANS_ALLOW) {
            const char *p = json_string_value(json_object_get(dl, "payload_id"));
            if (dl == NULL || (o->kind == OP_DELIVER && (!p || strcmp(p, o->payload) != 0)))
                violation(V_ALLOW_LOST, "%s answered ALLOW%s, nothing stored", o->inv,
                          o->acknowledged ? " (acknowledged)" : "");
        } else if (o->answer == ANS_NONE && dl != NULL) {
            char during[256];
            snprintf(during, sizeof during, "%s, during %s", o->detail,
                     o->fault ? fault_names[o->fault - 1] : "no fault");
            violation(V_NO_EFFECT, "%s was committed, but answered %s", o->inv, during);
        }
    }
    json_decref(unknown_before);
    json_decref(counts);
    json_decref(stored);
}

/* --- the test -------------------------------------------------------------------------------- */

static void print_tables(long n_deliveries, long n_runs, long long load_ms)
{
    long per[OP_KINDS][ANS_KINDS];
    memset(per, 0, sizeof per);
    for (size_t k = 0; k < n_ops; k++)
        per[ops[k].kind][ops[k].answer]++;
    printf("\n    history: %zu operations in %lld ms over 2 charterd, %zu revocation intervals, "
           "%ld runs, %ld deliveries stored\n",
           n_ops, load_ms, n_intervals, n_runs, n_deliveries);
    printf("    %-12s %8s %10s %15s %8s\n", "operation", answer_names[ANS_ALLOW],
           answer_names[ANS_NONE], answer_names[ANS_UNKNOWN], answer_names[ANS_OK]);
    for (int k = 0; k < OP_KINDS; k++)
        printf("    %-12s %8ld %10ld %15ld %8ld\n", op_names[k], per[k][ANS_ALLOW],
               per[k][ANS_NONE], per[k][ANS_UNKNOWN], per[k][ANS_OK]);
    printf("    %-40s %6s\n", "fault", "count");
    for (int k = 0; k < F_KINDS; k++)
        printf("    %-40s %6d\n", fault_names[k], faults[k]);
    printf("    %-58s %6s\n", "violation", "count");
    for (int k = 0; k < V_KINDS; k++)
        printf("    %-58s %6d\n", violation_names[k], violations[k]);
    printf("    (not a violation) no-effect retry answers, delivery stored   %6d\n",
           excused_retries);
}

/* With CHARTER_HISTORY_LOG set, writes every recorded call to that file, one tab-separated
 * line each: operation, charterd, answer class, transport error, code, acknowledged,
 * invocation (or grant), payload, run, fault in progress, detail. */
static void write_history_log(void)
{
    const char *path = getenv("CHARTER_HISTORY_LOG");
    if (path == NULL || path[0] == '\0')
        return;
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        return;
    }
    for (size_t k = 0; k < n_ops; k++) {
        const op *o = &ops[k];
        fprintf(f, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", op_names[o->kind], o->daemon,
                answer_names[o->answer], o->transport, o->code, o->acknowledged, o->inv, o->payload,
                o->run_id, o->fault ? fault_names[o->fault - 1] : "-", o->detail);
    }
    fclose(f);
}

static void test_history_under_faults_has_no_violation(void)
{
    ops = calloc(MAX_OPS, sizeof *ops);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ops);
    const char *env = getenv("CHARTER_HISTORY_SECONDS");
    long seconds = env ? strtol(env, NULL, 10) : LOAD_SECONDS_DEFAULT;
    if (seconds <= 0 || seconds > 600)
        seconds = LOAD_SECONDS_DEFAULT;

    long long t_setup = now_ms();
    /* A redis-server of this test's own: it is stopped, slept and killed. */
    CU_ASSERT_EQUAL_FATAL(harness_private_redis_start(&redis), 0);
    CU_ASSERT_EQUAL_FATAL(setenv("CHARTER_TEST_REDIS", redis.url, 1), 0);
    harness_graph_name(graph, sizeof graph, "history");
    store *st = harness_store_open(graph);
    harness_charterd_opts opts = {.graph = graph};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&opts, &daemons[0]), 0);
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&opts, &daemons[1]), 0);

    static host hosts[N_HOSTS];
    pthread_t revoker, recoverer;
    for (int i = 0; i < N_HOSTS; i++) {
        hosts[i].index = i;
        hosts[i].rng = 2654435761u * (unsigned)(i + 1);
        CU_ASSERT_EQUAL_FATAL(pthread_create(&hosts[i].thread, NULL, host_main, &hosts[i]), 0);
    }
    CU_ASSERT_EQUAL_FATAL(pthread_create(&revoker, NULL, revoker_main, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&recoverer, NULL, recoverer_main, NULL), 0);

    long long t0 = now_ms();
    long long end = t0 + seconds * 1000;
    printf("\n    (setup %lld ms)", t0 - t_setup);
    int round = 0;
    sleep_ms(1500);
    while (now_ms() < end) {
        inject(round % F_KINDS, round / F_KINDS);
        round++;
        sleep_ms(1500);
    }
    load_over = 1;
    for (int i = 0; i < N_HOSTS; i++)
        pthread_join(hosts[i].thread, NULL);
    pthread_join(revoker, NULL);
    pthread_join(recoverer, NULL);
    long long load_ms = now_ms() - t0;

    /* Stop both, then one start marks whatever they left unfinished interrupted. */
    harness_charterd_stop(&daemons[0]);
    harness_charterd_stop(&daemons[1]);
    harness_charterd last;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&opts, &last), 0);
    CU_ASSERT_EQUAL(harness_charterd_stop(&last), 0);

    long long t_check = now_ms();
    long n_deliveries = 0, n_runs = 0;
    check_history(st, &n_deliveries, &n_runs);
    printf("\n    (load %lld ms, stop and restart %lld ms, check %lld ms)", load_ms,
           t_check - t0 - load_ms, now_ms() - t_check);
    print_tables(n_deliveries, n_runs, load_ms);
    write_history_log();

    CU_ASSERT_EQUAL(fault_failures, 0);
    CU_ASSERT(faults[F_STOP] > 0 && faults[F_SLEEP] > 0 && faults[F_REDIS_KILL] > 0 &&
              faults[F_CHARTERD_KILL] > 0);
    long delivered = 0;
    for (size_t k = 0; k < n_ops; k++)
        delivered += ops[k].kind == OP_DELIVER && ops[k].answer == ANS_ALLOW;
    CU_ASSERT(delivered > 0); /* the history did something */
    for (int k = 0; k < V_KINDS; k++)
        CU_ASSERT_EQUAL(violations[k], 0);

    /* The graph goes with the redis-server of this test (its folder is removed). */
    store_close(st);
    harness_private_redis_stop(&redis);
    free(ops);
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"history of deliveries, revocations and recoveries under faults has no violation",
     test_history_under_faults_has_no_violation},
};
static const harness_suite suites[] = {
    {"history under faults", NULL, NULL, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .ignore_sigpipe = true};
