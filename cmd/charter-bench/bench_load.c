/*
 * bench_load.c - one load: o.threads client threads released at once through a gate, each
 * doing one kind of operation (a Deliver, a CheckInput, a Health call, an echo) until the
 * duration or the count is spent, every answer kept as a sample. Its figures come from those
 * samples (throughput, exact latency percentiles) and from what is read around it: Redis's
 * counters and charterd's CPU, divided by the operations answered.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static void kind_count(bench_worker *w, const char *text)
{
    for (size_t i = 0; i < w->n_kinds; i++)
        if (strcmp(w->kinds[i].text, text) == 0) {
            w->kinds[i].count++;
            return;
        }
    if (w->n_kinds < BENCH_MAX_KINDS) {
        snprintf(w->kinds[w->n_kinds].text, sizeof w->kinds[0].text, "%s", text);
        w->kinds[w->n_kinds++].count = 1;
    } else {
        w->other_kinds++;
    }
}

static bench_sample *sample_next(bench_worker *w)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 4096;
        bench_sample *s = realloc(w->samples, cap * sizeof *s);
        if (s == NULL) {
            w->oom = true;
            return NULL;
        }
        w->samples = s;
        w->cap = cap;
    }
    bench_sample *s = &w->samples[w->n++];
    memset(s, 0, sizeof *s);
    return s;
}

void invocation_id(const bench *b, unsigned thread, size_t index, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s-%u-%zu", b->tag, thread, index);
}

void round_invocation_id(const bench *b, size_t round, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s-same-%zu", b->tag, round);
}

/* --- one operation ---------------------------------------------------------------------------
 * Each op_* makes one call and returns 0 or the negated code; on 0 it hands the answer's
 * message to *resp (the caller frees it) and its decision to *decision. */

static int op_deliver(bench_worker *w, bench_sample *s, const char *inv,
                      const Charter__V1__Decision **decision, ProtobufCMessage **resp,
                      charter_status *st)
{
    Charter__V1__DeliverRequest req = CHARTER__V1__DELIVER_REQUEST__INIT;
    const bench_run *run = &w->b->runs[w->index % w->b->o.runs];
    req.context_id = (char *)run->context_id;
    req.payload_id = (char *)run->payload_id;
    req.recipient = "cfo";
    req.tool = "deliver_internal";
    req.invocation_id = (char *)inv;
    Charter__V1__DeliverResponse *r = NULL;
    int rv = charter_deliver(w->client, &req, &r, st);
    if (rv == 0) {
        *decision = r->decision;
        s->acknowledged = r->acknowledged;
        *resp = &r->base;
    }
    return rv;
}

static int op_check_input(bench_worker *w, bench_sample *s, const Charter__V1__Decision **decision,
                          ProtobufCMessage **resp, charter_status *st)
{
    Charter__V1__CheckInputRequest req = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    char *ids[1] = {(char *)w->load->target_id};
    req.context_id = w->b->context_id;
    req.artifact_ids = ids;
    req.n_artifact_ids = 1;
    Charter__V1__CheckInputResponse *r = NULL;
    int rv = charter_check_input(w->client, &req, &r, st);
    if (rv == 0) {
        *decision = r->decision;
        s->event_seq = r->event_seq;
        *resp = &r->base;
    }
    return rv;
}

static int op_call(bench_worker *w, bench_sample *s, const char *inv,
                   const Charter__V1__Decision **decision, ProtobufCMessage **resp,
                   charter_status *st)
{
    const bench *b = w->b;
    switch (w->load->kind) {
    case WL_DELIVER:
    case WL_DELIVER_SAME:
        return op_deliver(w, s, inv, decision, resp, st);
    case WL_CHECK_INPUT:
        return op_check_input(w, s, decision, resp, st);
    case WL_HEALTH: {
        Charter__V1__HealthResponse *r = NULL;
        int rv = charter_health(w->client, NULL, &r, st);
        if (rv == 0)
            *resp = &r->base;
        return rv;
    }
    case WL_ECHO:
    case WL_ECHO_FCALL: {
        int rv = echo_call(b->echo_client, b->echo_req, b->echo_req_len, st->message,
                           sizeof st->message);
        st->local = 1;
        return rv;
    }
    default:
        return -CHARTER_INTERNAL;
    }
}

/* One operation of the load into s. */
static void operate(bench_worker *w, bench_sample *s, const char *inv)
{
    charter_status st;
    memset(&st, 0, sizeof st);
    const Charter__V1__Decision *decision = NULL;
    ProtobufCMessage *resp = NULL;
    double t0 = now_ms();
    int rv = op_call(w, s, inv, &decision, &resp, &st);
    s->ms = now_ms() - t0;
    if (rv != 0) {
        int code = -rv;
        s->code = (int16_t)code;
        s->local = (uint8_t)(st.local != 0);
        if (code > 0 && code <= 16 && w->first_error[code][0] == '\0')
            snprintf(w->first_error[code], sizeof w->first_error[code], "%.180s%s", st.message,
                     st.local ? " (client)" : "");
        return;
    }
    bool decides = w->load->kind <= WL_CHECK_INPUT;
    if (decision != NULL) {
        s->outcome = (uint8_t)decision->outcome;
        if (decision->outcome != CHARTER__V1__OUTCOME__ALLOW) {
            char text[200];
            decision_text(decision, text, sizeof text);
            kind_count(w, text);
        }
    } else if (decides) {
        s->outcome = CHARTER__V1__OUTCOME__OUTCOME_UNSPECIFIED;
        kind_count(w, "no decision in the answer");
    }
    if (resp != NULL)
        protobuf_c_message_free_unpacked(resp, NULL);
}

/* --- the threads ---------------------------------------------------------------------------- */

/* deliver-same: round after round, every thread on one invocation ID at once. */
static void worker_rounds(bench_worker *w)
{
    bench *b = w->b;
    bench_load *l = w->load;
    for (size_t r = 0; r < b->o.rounds; r++) {
        /* Two barriers: the first lets one thread decide for everyone whether to stop, the
         * second releases every thread onto the same invocation at once. */
        if (pthread_barrier_wait(&l->round_a) == PTHREAD_BARRIER_SERIAL_THREAD)
            l->halt_rounds = bench_interrupted != 0;
        pthread_barrier_wait(&l->round_b);
        if (l->halt_rounds)
            break;
        char inv[128];
        round_invocation_id(b, l->round_base + r, inv, sizeof inv);
        bench_sample *s = sample_next(w);
        if (s == NULL) {
            bench_sample dummy;
            memset(&dummy, 0, sizeof dummy);
            operate(w, &dummy, inv); /* keep the round's shape; the sample is lost */
            continue;
        }
        s->round = (uint32_t)(l->round_base + r);
        operate(w, s, inv);
    }
}

static void *worker_main(void *arg)
{
    bench_worker *w = arg;
    bench_load *l = w->load;
    pthread_mutex_lock(&l->gate_mu);
    while (l->go == 0)
        pthread_cond_wait(&l->gate_cv, &l->gate_mu);
    int go = l->go;
    pthread_mutex_unlock(&l->gate_mu);
    if (go < 0)
        return NULL;
    if (l->kind == WL_DELIVER_SAME) {
        worker_rounds(w);
        return NULL;
    }
    for (;;) {
        if (bench_interrupted)
            break;
        if (l->count > 0) {
            if (atomic_fetch_add(&l->issued, 1) >= l->count)
                break;
        } else if (now_ms() >= l->deadline_ms) {
            break;
        }
        char inv[128];
        invocation_id(w->b, w->index, w->n, inv, sizeof inv);
        bench_sample *s = sample_next(w);
        if (s == NULL)
            break;
        operate(w, s, inv);
    }
    return NULL;
}

static void open_gate(bench_load *l, int go)
{
    pthread_mutex_lock(&l->gate_mu);
    l->go = go;
    pthread_cond_broadcast(&l->gate_cv);
    pthread_mutex_unlock(&l->gate_mu);
}

/* Starts o.threads threads on l's workers, waiting at the gate. Returns how many started. */
static unsigned load_start_threads(bench *b, bench_load *l)
{
    unsigned started = 0;
    for (; started < b->o.threads; started++) {
        bench_worker *w = &l->workers[started];
        w->b = b;
        w->load = l;
        w->index = started;
        w->client = b->n_clients > 0 ? b->clients[started % b->n_clients] : NULL;
        l->from[started] = w->n;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            break;
        w->started = true;
    }
    return started;
}

/* Runs load l: every thread started at the gate, the gate opened, all of them joined. The
 * samples are appended to l->workers; l->from says where this load's begin. */
int load_run(bench *b, bench_load *l)
{
    unsigned n = b->o.threads;
    int rc = -1;
    atomic_init(&l->issued, 0);
    l->go = 0;
    l->halt_rounds = false;
    if ((l->from = calloc(n, sizeof *l->from)) == NULL ||
        pthread_mutex_init(&l->gate_mu, NULL) != 0 || pthread_cond_init(&l->gate_cv, NULL) != 0 ||
        pthread_barrier_init(&l->round_a, NULL, n) != 0 ||
        pthread_barrier_init(&l->round_b, NULL, n) != 0) {
        say(b, "cannot create the thread gate");
        return -1;
    }
    b->load = l;
    unsigned started = load_start_threads(b, l);
    if (started < n) {
        say(b, "cannot start thread %u of %u (lower --threads)", started + 1, n);
        open_gate(l, -1);
    } else {
        l->t0_ms = now_ms();
        l->deadline_ms = l->t0_ms + l->duration_s * 1000.0;
        open_gate(l, 1);
        rc = 0;
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(l->workers[i].thread, NULL);
    l->elapsed_ms = now_ms() - l->t0_ms;
    for (unsigned i = 0; i < started; i++)
        if (l->workers[i].oom)
            say(b, "thread %u ran out of memory for samples and stopped early", i);
    pthread_mutex_destroy(&l->gate_mu);
    pthread_cond_destroy(&l->gate_cv);
    pthread_barrier_destroy(&l->round_a);
    pthread_barrier_destroy(&l->round_b);
    b->load = NULL;
    return rc;
}

void workers_free(bench_worker *w, unsigned n)
{
    for (unsigned i = 0; w != NULL && i < n; i++)
        free(w[i].samples);
    free(w);
}

/* --- figures --------------------------------------------------------------------------------- */

/* Redis's counters and the CPU of the charterd processes measured (the daemons started, or
 * --pid), at one moment. */
void measure_point(bench *b, bench_point *p)
{
    memset(&p->rs, 0, sizeof p->rs);
    if (b->o.redis_url != NULL && strncmp(b->o.redis_url, "cluster://", 10) != 0)
        redis_stats(b->o.redis_url, &p->rs);
    p->cpu = -1;
    long long sum = 0;
    unsigned n = 0;
    for (unsigned i = 0; i < (b->o.url != NULL ? 1u : b->n_daemons); i++) {
        long pid = b->o.url != NULL ? b->o.pid : (long)b->daemons[i].pid;
        long long t = pid > 0 ? read_cpu_ticks(pid) : -1;
        if (t >= 0) {
            sum += t;
            n++;
        }
    }
    if (n > 0)
        p->cpu = sum;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* The p-th percentile of n sorted values, nearest rank: the smallest value with at least p% of
 * the samples at or below it. */
static double percentile(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return 0;
    double exact = p / 100.0 * (double)n;
    size_t rank = (size_t)exact;
    if ((double)rank < exact)
        rank++;
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

/* The per-operation figures of out from the points read around the load (NAN unmeasured). */
static void pass_per_op(const bench_point *before, const bench_point *after, bench_pass *out)
{
    out->redis_us = out->db_calls = out->inner = out->redis_bytes = out->cpu_us = NAN;
    if (out->ok == 0 || before == NULL || after == NULL)
        return;
    double ops = (double)out->ok;
    if (before->rs.ok && after->rs.ok) {
        out->redis_us = (double)(after->rs.usec - before->rs.usec) / ops;
        out->db_calls = (double)(after->rs.calls - before->rs.calls) / ops;
        out->inner = (double)(after->rs.inner - before->rs.inner) / ops;
        out->redis_bytes = (double)(after->rs.used_memory - before->rs.used_memory) / ops;
    }
    if (before->cpu >= 0 && after->cpu >= 0) {
        long hz = sysconf(_SC_CLK_TCK);
        out->cpu_us = (double)(after->cpu - before->cpu) * 1e6 / (double)(hz > 0 ? hz : 100) / ops;
    }
}

/* The figures of load l over its own samples; before and after (may be NULL) are the points
 * read around it. */
void pass_compute(const bench *b, const bench_load *l, const bench_point *before,
                  const bench_point *after, bench_pass *out)
{
    memset(out, 0, sizeof *out);
    size_t total = 0;
    for (unsigned t = 0; t < b->o.threads; t++)
        total += l->workers[t].n - l->from[t];
    double *lat = malloc((total ? total : 1) * sizeof *lat);
    double sum = 0;
    for (unsigned t = 0; t < b->o.threads; t++)
        for (size_t i = l->from[t]; i < l->workers[t].n; i++) {
            const bench_sample *s = &l->workers[t].samples[i];
            out->total++;
            if (s->code != 0) {
                out->errors++;
                continue;
            }
            if (lat != NULL)
                lat[out->ok] = s->ms;
            out->ok++;
            sum += s->ms;
        }
    out->elapsed_ms = l->elapsed_ms;
    out->ops_per_s = l->elapsed_ms > 0 ? (double)out->ok * 1000.0 / l->elapsed_ms : 0;
    out->mean = out->ok ? sum / (double)out->ok : 0;
    if (lat != NULL) {
        qsort(lat, out->ok, sizeof *lat, by_value);
        out->p50 = percentile(lat, out->ok, 50);
        out->p95 = percentile(lat, out->ok, 95);
        out->p99 = percentile(lat, out->ok, 99);
        out->max = out->ok ? lat[out->ok - 1] : 0;
    }
    free(lat);
    pass_per_op(before, after, out);
}
