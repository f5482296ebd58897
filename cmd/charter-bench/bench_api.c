/*
 * bench_api.c - what charter-bench does through the API besides the load: the setup a host
 * would make (CreateRun external, OpenStep analyze, ReadSource vendor_a, RecordOutput derived
 * from it; for check-input a lineage of --depth outputs), and afterwards the invariants each
 * workload must keep, checked against what the server committed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

const char *outcome_name(int outcome)
{
    switch (outcome) {
    case CHARTER__V1__OUTCOME__ALLOW:
        return "ALLOW";
    case CHARTER__V1__OUTCOME__DENY:
        return "DENY";
    case CHARTER__V1__OUTCOME__UNKNOWN:
        return "UNKNOWN";
    default:
        return "UNSPECIFIED";
    }
}

/* "DENY GRANT_INVALID,X: witness" of a decision. */
void decision_text(const Charter__V1__Decision *d, char *out, size_t outlen)
{
    size_t used = 0;
    int w = snprintf(out, outlen, "%s", outcome_name(d ? (int)d->outcome : 0));
    used = w > 0 ? (size_t)w : 0;
    for (size_t i = 0; d != NULL && i < d->n_codes && used < outlen; i++) {
        w = snprintf(out + used, outlen - used, "%s%s", i == 0 ? " " : ",", d->codes[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    if (d != NULL && d->witness != NULL && d->witness[0] != '\0' && used < outlen)
        snprintf(out + used, outlen - used, ": %s", d->witness);
}

static bool allowed(const Charter__V1__Decision *d)
{
    return d != NULL && d->outcome == CHARTER__V1__OUTCOME__ALLOW;
}

static int setup_failed(bench *b, const char *what, int rv, const charter_status *st)
{
    say(b, "setup: %s failed: %s: %s", what, charter_status_name(rv), st->message);
    return -1;
}

/* CreateRun external, OpenStep analyze, ReadSource vendor_a, RecordOutput from it, through
 * admin (the charterd of the run's graph). */
static int setup_run(bench *b, charter_client *admin)
{
    charter_status st;
    int rv;
    double t0 = now_ms();

    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    cr.task = "charter-bench load run";
    Charter__V1__RunView *view = NULL;
    if ((rv = charter_create_run(admin, &cr, &view, &st)) != 0)
        return setup_failed(b, "CreateRun", rv, &st);
    snprintf(b->run_id, sizeof b->run_id, "%s", view->run && view->run->id ? view->run->id : "");
    charter__v1__run_view__free_unpacked(view, NULL);

    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = b->run_id;
    os.step = "analyze";
    Charter__V1__StepContext *ctx = NULL;
    if ((rv = charter_open_step(admin, &os, &ctx, &st)) != 0)
        return setup_failed(b, "OpenStep analyze", rv, &st);
    snprintf(b->context_id, sizeof b->context_id, "%s", ctx->context_id ? ctx->context_id : "");
    charter__v1__step_context__free_unpacked(ctx, NULL);

    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = b->context_id;
    rs.resource_id = "vendor_a";
    Charter__V1__ReadSourceResponse *src = NULL;
    if ((rv = charter_read_source(admin, &rs, &src, &st)) != 0)
        return setup_failed(b, "ReadSource vendor_a", rv, &st);
    if (!allowed(src->decision) || src->artifact == NULL) {
        char text[300];
        decision_text(src->decision, text, sizeof text);
        say(b, "setup: ReadSource vendor_a was not allowed: %s", text);
        charter__v1__read_source_response__free_unpacked(src, NULL);
        return -1;
    }
    snprintf(b->source_id, sizeof b->source_id, "%s", src->artifact->id);
    charter__v1__read_source_response__free_unpacked(src, NULL);

    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    char *inputs[1] = {b->source_id};
    ro.context_id = b->context_id;
    ro.input_ids = inputs;
    ro.n_input_ids = 1;
    ro.title = "Northwind summary";
    ro.content = "Northwind Desks: NW-200, 389 USD per unit, 6 weeks, 5-year warranty.";
    Charter__V1__RecordOutputResponse *out = NULL;
    if ((rv = charter_record_output(admin, &ro, &out, &st)) != 0)
        return setup_failed(b, "RecordOutput", rv, &st);
    if (!allowed(out->decision) || out->artifact == NULL) {
        char text[300];
        decision_text(out->decision, text, sizeof text);
        say(b, "setup: RecordOutput was not allowed: %s", text);
        charter__v1__record_output_response__free_unpacked(out, NULL);
        return -1;
    }
    snprintf(b->payload_id, sizeof b->payload_id, "%s", out->artifact->id);
    if (out->artifact->conf != 0)
        say(b, "setup: warning: the payload has confidentiality %d, not public",
            out->artifact->conf);
    charter__v1__record_output_response__free_unpacked(out, NULL);
    b->setup_ms = now_ms() - t0;
    snprintf(b->deepest_id, sizeof b->deepest_id, "%s", b->payload_id);
    return 0;
}

/* --runs of them: each set up as setup_run does, kept in b->runs; the first stays in the
 * run fields every workload reads. */
int setup_runs(bench *b)
{
    double total = 0;
    for (unsigned i = 0; i < b->o.runs; i++) {
        if (setup_run(b, b->admins[i % b->o.tenants]) != 0)
            return -1;
        total += b->setup_ms;
        bench_run *r = &b->runs[i];
        snprintf(r->run_id, sizeof r->run_id, "%s", b->run_id);
        snprintf(r->context_id, sizeof r->context_id, "%s", b->context_id);
        snprintf(r->source_id, sizeof r->source_id, "%s", b->source_id);
        snprintf(r->payload_id, sizeof r->payload_id, "%s", b->payload_id);
    }
    const bench_run *r = &b->runs[0];
    snprintf(b->run_id, sizeof b->run_id, "%s", r->run_id);
    snprintf(b->context_id, sizeof b->context_id, "%s", r->context_id);
    snprintf(b->source_id, sizeof b->source_id, "%s", r->source_id);
    snprintf(b->payload_id, sizeof b->payload_id, "%s", r->payload_id);
    snprintf(b->deepest_id, sizeof b->deepest_id, "%s", b->payload_id);
    b->setup_ms = total;
    return 0;
}

/* One RecordOutput of the lineage: output k derived from prev, whose id it then holds. On a
 * failure or refusal, says why in the lineage's why and returns -1. */
static int lineage_step(bench *b, unsigned k, char *prev, size_t prevlen)
{
    bench_lineage *L = &b->lineage;
    char title[64], content[96];
    snprintf(title, sizeof title, "Lineage step %u", k);
    snprintf(content, sizeof content, "Summary %u of the Northwind quote, from step %u.", k, k - 1);
    char *inputs[1] = {prev};
    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    ro.context_id = b->context_id;
    ro.input_ids = inputs;
    ro.n_input_ids = 1;
    ro.title = title;
    ro.content = content;
    Charter__V1__RecordOutputResponse *out = NULL;
    charter_status st;
    int rv = charter_record_output(b->admin, &ro, &out, &st);
    if (rv != 0) {
        snprintf(L->why, sizeof L->why, "RecordOutput at depth %u failed: %s: %.200s", k,
                 charter_status_name(rv), st.message);
        return -1;
    }
    if (!allowed(out->decision) || out->artifact == NULL) {
        char text[200];
        decision_text(out->decision, text, sizeof text);
        snprintf(L->why, sizeof L->why, "RecordOutput at depth %u was not allowed: %s", k, text);
        charter__v1__record_output_response__free_unpacked(out, NULL);
        return -1;
    }
    snprintf(prev, prevlen, "%s", out->artifact->id);
    charter__v1__record_output_response__free_unpacked(out, NULL);
    return 0;
}

/* Whether recording must stop before step k (interrupted, or out of --lineage-budget). */
static bool lineage_stop(bench *b, unsigned k, double t0)
{
    bench_lineage *L = &b->lineage;
    if (bench_interrupted) {
        snprintf(L->why, sizeof L->why, "interrupted before depth %u", k);
        return true;
    }
    if (b->o.lineage_budget_s > 0 && now_ms() - t0 > b->o.lineage_budget_s * 1000) {
        snprintf(L->why, sizeof L->why, "the --lineage-budget of %g s ran out before depth %u",
                 b->o.lineage_budget_s, k);
        return true;
    }
    return false;
}

/* check-input: --depth outputs in a chain, the first derived from the source, timed as a whole
 * and over its first and last tenth (a lineage recorded in linear time costs the same per
 * output in both), with Redis's counters and charterd's CPU around it. Progress goes to stderr
 * every 250 outputs or 5 s. Returns -1 only when interrupted; a lineage that stopped short
 * is a FAIL line and leaves the load unrun. */
int build_lineage(bench *b)
{
    bench_lineage *L = &b->lineage;
    L->span = b->o.depth / 10 > 0 ? b->o.depth / 10 : 1;
    measure_point(b, &L->before);
    double t0 = now_ms(), said = t0, span_t0 = t0;
    char prev[160];
    snprintf(prev, sizeof prev, "%s", b->source_id);
    for (unsigned k = 1; k <= b->o.depth; k++) {
        if (lineage_stop(b, k, t0))
            break;
        if (k == b->o.depth - L->span + 1)
            span_t0 = now_ms();
        if (lineage_step(b, k, prev, sizeof prev) != 0)
            break;
        L->reached = k;
        if (k == L->span)
            L->first_ms = now_ms() - t0;
        if (k == b->o.compare_depth)
            snprintf(b->compare_id, sizeof b->compare_id, "%s", prev);
        if (k % 250 == 0 || now_ms() - said >= 5000 || k == b->o.depth) {
            say(b, "lineage: depth %u of %u recorded (%.1f s)", k, b->o.depth,
                (now_ms() - t0) / 1000);
            said = now_ms();
        }
    }
    L->ms = now_ms() - t0;
    L->finished = L->reached == b->o.depth;
    if (L->finished)
        L->last_ms = now_ms() - span_t0;
    measure_point(b, &L->after);
    snprintf(b->deepest_id, sizeof b->deepest_id, "%s", prev);
    if (!L->finished) {
        say(b, "lineage: stopped at depth %u of %u: %s", L->reached, b->o.depth, L->why);
        check_add(b, false, "the lineage was recorded to --depth",
                  "%u of %u outputs in %.1f s: %s (the load was not run)", L->reached, b->o.depth,
                  L->ms / 1000, L->why);
    }
    return bench_interrupted ? -1 : 0;
}

/* --- invariants --------------------------------------------------------------------------- */

/* GetRun of req, retried while the server is busy (calls abandoned by the load may still
 * occupy it). Returns 0 with *v, or libcharter's code after recording the failed check. */
static int get_run_retry(bench *b, charter_client *admin, const Charter__V1__GetRunRequest *req,
                         Charter__V1__RunView **v)
{
    charter_status st;
    double until = now_ms() + BENCH_VERIFY_TIMEOUT_MS;
    unsigned retries = 0;
    long pause_ms = 100;
    int rv;
    while ((rv = charter_get_run(admin, req, v, &st)) != 0 && !bench_interrupted &&
           (rv == -CHARTER_RESOURCE_EXHAUSTED || rv == -CHARTER_UNAVAILABLE ||
            rv == -CHARTER_DEADLINE_EXCEEDED) &&
           now_ms() + (double)pause_ms < until) {
        struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        retries++;
        pause_ms = pause_ms < 2000 ? pause_ms * 2 : 2000;
    }
    if (rv != 0)
        check_add(b, false, "GetRun answers with the run's deliveries", "%s: %s (after %u retries)",
                  charter_status_name(rv), st.message, retries);
    else if (retries > 0)
        say(b, "GetRun answered after %u retries (the server was still busy after the load)",
            retries);
    return rv;
}

/* Appends the invocation IDs of v's deliveries to *ids (*n of them, room for *cap). */
static int add_deliveries(const Charter__V1__RunView *v, char ***ids, size_t *n, size_t *cap)
{
    for (size_t i = 0; i < v->n_deliveries; i++) {
        if (*n == *cap) {
            size_t grown = *cap ? *cap * 2 : 1024;
            char **more = realloc(*ids, grown * sizeof *more);
            if (more == NULL)
                return -1;
            *ids = more;
            *cap = grown;
        }
        const char *inv = v->deliveries[i]->invocation_id;
        if (((*ids)[*n] = strdup(inv ? inv : "")) == NULL)
            return -1;
        (*n)++;
    }
    return 0;
}

/* The run's committed deliveries through GetRun, page by page: each page of events carries the
 * deliveries they decided. *ids is an array of n strings (free each and the array). */
static int run_deliveries(bench *b, charter_client *admin, const char *run_id, char ***ids,
                          size_t *n)
{
    *ids = NULL;
    *n = 0;
    size_t cap = 0;
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)run_id;
    req.limit = 5000;
    req.without_content = true;
    for (;;) {
        Charter__V1__RunView *v = NULL;
        if (get_run_retry(b, admin, &req, &v) != 0)
            break;
        int rc = add_deliveries(v, ids, n, &cap);
        bool last =
            v->n_events == 0 || v->run == NULL || v->events[v->n_events - 1]->seq >= v->run->seq;
        if (v->n_events > 0)
            req.after_seq = v->events[v->n_events - 1]->seq;
        charter__v1__run_view__free_unpacked(v, NULL);
        if (rc != 0)
            break;
        if (last)
            return 0;
    }
    for (size_t k = 0; k < *n; k++)
        free((*ids)[k]);
    free(*ids);
    *ids = NULL;
    *n = 0;
    return -1;
}

static void free_ids(char **ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

/* Parses "<tag>-<thread>-<index>" into its numbers. */
static bool parse_invocation(const bench *b, const char *inv, unsigned long *thread,
                             unsigned long *index)
{
    size_t tl = strlen(b->tag);
    if (strncmp(inv, b->tag, tl) != 0 || inv[tl] != '-')
        return false;
    char *end = NULL;
    errno = 0;
    *thread = strtoul(inv + tl + 1, &end, 10);
    if (errno != 0 || end == inv + tl + 1 || *end != '-')
        return false;
    const char *p = end + 1;
    *index = strtoul(p, &end, 10);
    return errno == 0 && end != p && *end == '\0';
}

/* The committed deliveries of every run, in one array; run_of[i] is the index of the run
 * ids[i] was committed in (caller frees it). */
static int all_deliveries(bench *b, char ***ids, size_t *n, unsigned **run_of)
{
    *ids = NULL;
    *n = 0;
    *run_of = NULL;
    for (unsigned r = 0; r < b->o.runs; r++) {
        char **some = NULL;
        size_t k = 0;
        if (run_deliveries(b, b->admins[r % b->o.tenants], b->runs[r].run_id, &some, &k) != 0)
            goto fail;
        char **grown = realloc(*ids, (*n + k + 1) * sizeof *grown);
        if (grown != NULL)
            *ids = grown;
        unsigned *rgrown = grown ? realloc(*run_of, (*n + k + 1) * sizeof *rgrown) : NULL;
        if (rgrown != NULL)
            *run_of = rgrown;
        if (grown == NULL || rgrown == NULL) {
            free_ids(some, k);
            goto fail;
        }
        for (size_t i = 0; i < k; i++) {
            (*ids)[*n + i] = some[i];
            (*run_of)[*n + i] = r;
        }
        free(some);
        *n += k;
    }
    return 0;
fail:
    free_ids(*ids, *n);
    free(*run_of);
    *ids = NULL;
    *run_of = NULL;
    *n = 0;
    return -1;
}

/* How the committed deliveries compare with the answers: counts and a first example each. */
typedef struct {
    uint8_t **seen; /* seen[t][i]: how often invocation (t, i) is among the committed */
    size_t foreign, dup, allow_new, allow_missing, landed_error, landed_refused;
    char first_foreign[160], first_dup[160], first_missing[160], first_refused[200];
} deliver_tally;

/* Counts each committed invocation against the thread and sample it names. -1 out of memory. */
static int tally_committed(bench *b, deliver_tally *t, char **ids, size_t n, const unsigned *run_of)
{
    t->seen = calloc(b->o.threads, sizeof *t->seen);
    if (t->seen == NULL)
        return -1;
    for (unsigned k = 0; k < b->o.threads; k++)
        if ((t->seen[k] = calloc(b->workers[k].n ? b->workers[k].n : 1, 1)) == NULL)
            return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned long th = 0, k = 0;
        if (!parse_invocation(b, ids[i], &th, &k) || th >= b->o.threads || k >= b->workers[th].n ||
            th % b->o.runs != run_of[i]) {
            if (t->foreign++ == 0)
                snprintf(t->first_foreign, sizeof t->first_foreign, "%s", ids[i]);
            continue;
        }
        if (t->seen[th][k]++ > 0 && t->dup++ == 0)
            snprintf(t->first_dup, sizeof t->first_dup, "%s", ids[i]);
    }
    return 0;
}

/* Compares every answer of thread th with whether its invocation was committed. */
static void tally_answers(const bench *b, deliver_tally *t, unsigned th)
{
    char inv[128];
    for (size_t k = 0; k < b->workers[th].n; k++) {
        const bench_sample *s = &b->workers[th].samples[k];
        bool landed = t->seen[th][k] > 0;
        if (s->code == 0 && s->outcome == CHARTER__V1__OUTCOME__ALLOW && !s->acknowledged) {
            t->allow_new++;
            if (!landed && t->allow_missing++ == 0)
                invocation_id(b, th, k, t->first_missing, sizeof t->first_missing);
        } else if (landed && s->code != 0 && s->local) {
            t->landed_error++; /* the client gave up; the effect was unknown to it */
        } else if (landed && t->landed_refused++ == 0) {
            invocation_id(b, th, k, inv, sizeof inv);
            if (s->code != 0)
                snprintf(t->first_refused, sizeof t->first_refused, "%s answered RPC error %s", inv,
                         charter_status_name(s->code));
            else
                snprintf(t->first_refused, sizeof t->first_refused, "%s answered %s%s", inv,
                         outcome_name(s->outcome), s->acknowledged ? " acknowledged" : "");
        }
    }
}

static void tally_free(const bench *b, deliver_tally *t)
{
    for (unsigned k = 0; t->seen != NULL && k < b->o.threads; k++)
        free(t->seen[k]);
    free(t->seen);
}

/* deliver: the runs' committed deliveries are exactly the ALLOW answers not acknowledged (plus
 * calls the client gave up on whose commit landed), every invocation once. */
static void verify_deliver(bench *b)
{
    char **ids = NULL;
    size_t n = 0;
    unsigned *run_of = NULL;
    if (all_deliveries(b, &ids, &n, &run_of) != 0)
        return;
    deliver_tally t;
    memset(&t, 0, sizeof t);
    if (tally_committed(b, &t, ids, n, run_of) != 0) {
        check_add(b, false, "deliveries verified", "out of memory");
        goto out;
    }
    for (unsigned th = 0; th < b->o.threads; th++)
        tally_answers(b, &t, th);
    bool eq = n == t.allow_new + t.landed_error && t.allow_missing == 0 && t.landed_refused == 0 &&
              t.foreign == 0;
    check_add(b, eq, "committed deliveries = ALLOW answers not acknowledged",
              "%zu committed in %u run%s from %s; %zu ALLOW answers not acknowledged, "
              "%zu of them missing%s%s; %zu calls the client gave up on (timeout, lost "
              "connection) whose commit landed; %zu committed though answered "
              "otherwise%s%s; %zu foreign or in another thread's run%s%s",
              n, b->o.runs, b->o.runs == 1 ? "" : "s", b->run_id, t.allow_new, t.allow_missing,
              t.allow_missing ? ", first " : "", t.first_missing, t.landed_error, t.landed_refused,
              t.landed_refused ? ", first " : "", t.first_refused, t.foreign,
              t.foreign ? ", first " : "", t.first_foreign);
    check_add(b, t.dup == 0, "every invocation appears once", "%zu duplicated%s%s", t.dup,
              t.dup ? ", first " : "", t.first_dup);
out:
    tally_free(b, &t);
    free_ids(ids, n);
    free(run_of);
}

/* deliver-same, from the answers: per round one new ALLOW (or none when some call failed),
 * the rest acknowledged. rounds counts every round of every repetition. */
static void verify_rounds_answers(bench *b, size_t rounds, unsigned *fresh, unsigned *errs)
{
    size_t other = 0;
    for (unsigned t = 0; t < b->o.threads; t++)
        for (size_t i = 0; i < b->workers[t].n; i++) {
            const bench_sample *s = &b->workers[t].samples[i];
            if (s->round >= rounds)
                continue;
            if (s->code != 0)
                errs[s->round]++;
            else if (s->outcome == CHARTER__V1__OUTCOME__ALLOW && !s->acknowledged)
                fresh[s->round]++;
            else if (s->outcome != CHARTER__V1__OUTCOME__ALLOW)
                other++;
        }
    size_t bad = 0;
    char first[200] = "";
    for (size_t r = 0; r < rounds; r++) {
        bool ok = fresh[r] == 1 || (fresh[r] == 0 && errs[r] > 0);
        if (!ok && bad++ == 0)
            snprintf(first, sizeof first, "round %zu: %u new ALLOW answers, %u errors", r, fresh[r],
                     errs[r]);
    }
    check_add(b, bad == 0 && other == 0, "each round: one new ALLOW, the rest acknowledged",
              "%zu rounds; %zu rounds otherwise%s%s; %zu answers not ALLOW", rounds, bad,
              bad ? ", first " : "", first, other);
}

/* deliver-same, from the run: exactly one committed delivery per round. */
static void verify_rounds_committed(bench *b, size_t rounds, unsigned *count)
{
    char **ids = NULL;
    size_t n = 0;
    if (run_deliveries(b, b->admin, b->run_id, &ids, &n) != 0)
        return;
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s-same-", b->tag);
    size_t pl = strlen(prefix), foreign = 0, bad = 0;
    char first_foreign[160] = "", first[160] = "";
    for (size_t i = 0; i < n; i++) {
        char *end = NULL;
        unsigned long r = 0;
        if (strncmp(ids[i], prefix, pl) == 0) {
            errno = 0;
            r = strtoul(ids[i] + pl, &end, 10);
        }
        if (end == NULL || *end != '\0' || end == ids[i] + pl || r >= rounds) {
            if (foreign++ == 0)
                snprintf(first_foreign, sizeof first_foreign, "%s", ids[i]);
            continue;
        }
        count[r]++;
    }
    for (size_t r = 0; r < rounds; r++)
        if (count[r] != 1 && bad++ == 0)
            snprintf(first, sizeof first, "round %zu has %u deliveries", r, count[r]);
    check_add(b, bad == 0 && foreign == 0 && n == rounds, "exactly one delivery per round",
              "%zu committed in run %s for %zu rounds; %zu rounds otherwise%s%s; %zu foreign%s%s",
              n, b->run_id, rounds, bad, bad ? ", first " : "", first, foreign,
              foreign ? ", first " : "", first_foreign);
    free_ids(ids, n);
}

static void verify_deliver_same(bench *b)
{
    size_t rounds = 0;
    for (unsigned t = 0; t < b->o.threads; t++)
        for (size_t i = 0; i < b->workers[t].n; i++)
            if (b->workers[t].samples[i].round + 1u > rounds)
                rounds = b->workers[t].samples[i].round + 1u;
    unsigned *fresh = calloc(rounds ? rounds : 1, sizeof *fresh);
    unsigned *errs = calloc(rounds ? rounds : 1, sizeof *errs);
    unsigned *count = calloc(rounds ? rounds : 1, sizeof *count);
    if (fresh == NULL || errs == NULL || count == NULL) {
        check_add(b, false, "deliver-same verified", "out of memory");
    } else {
        verify_rounds_answers(b, rounds, fresh, errs);
        verify_rounds_committed(b, rounds, count);
    }
    free(fresh);
    free(errs);
    free(count);
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

static void verify_check_input(bench *b)
{
    size_t total = 0;
    for (unsigned t = 0; t < b->o.threads; t++)
        total += b->workers[t].n;
    uint64_t *seqs = malloc((total ? total : 1) * sizeof *seqs);
    if (seqs == NULL) {
        check_add(b, false, "check-input verified", "out of memory");
        return;
    }
    size_t n = 0, zero = 0;
    for (unsigned t = 0; t < b->o.threads; t++)
        for (size_t i = 0; i < b->workers[t].n; i++) {
            const bench_sample *s = &b->workers[t].samples[i];
            if (s->code != 0)
                continue;
            if (s->event_seq == 0)
                zero++;
            else
                seqs[n++] = s->event_seq;
        }
    qsort(seqs, n, sizeof *seqs, by_u64);
    size_t dup = 0;
    uint64_t first = 0;
    for (size_t i = 1; i < n; i++)
        if (seqs[i] == seqs[i - 1] && dup++ == 0)
            first = seqs[i];
    char which[64] = "";
    if (dup > 0)
        snprintf(which, sizeof which, " (first seq %llu)", (unsigned long long)first);
    check_add(b, dup == 0 && zero == 0, "every CheckInput answer has its own event seq",
              "%zu answers with an event; %zu share a seq%s; %zu without an event", n, dup, which,
              zero);
    free(seqs);
}

/* echo, echo-fcall: every request came back as it was sent (bench_echo.c counts a reply of
 * other bytes as an INTERNAL error), and every FCALL of echo-fcall answered. */
static void verify_echo(bench *b)
{
    size_t answered = 0, changed = 0;
    for (unsigned t = 0; t < b->o.threads; t++)
        for (size_t i = 0; i < b->workers[t].n; i++) {
            const bench_sample *s = &b->workers[t].samples[i];
            answered += s->code == 0;
            changed += s->code == CHARTER_INTERNAL;
        }
    check_add(b, changed == 0, "every echo came back unchanged",
              "%zu answered unchanged, %zu changed", answered, changed);
}

/* The invariants of the workload, over the samples of every repetition. */
void verify_workload(bench *b)
{
    switch (b->o.workload) {
    case WL_DELIVER:
        verify_deliver(b);
        break;
    case WL_DELIVER_SAME:
        verify_deliver_same(b);
        break;
    case WL_CHECK_INPUT:
        verify_check_input(b);
        break;
    case WL_ECHO:
    case WL_ECHO_FCALL:
        verify_echo(b);
        break;
    default:
        break;
    }
}
