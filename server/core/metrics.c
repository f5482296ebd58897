/*
 * metrics.c - process counters and their Prometheus text exposition (see metrics.h).
 *
 * Rows are fixed arrays of atomics so the call path never allocates or locks: methods get a
 * row on their first call (at most METRICS_METHODS; the dispatch table is smaller) under a
 * mutex, published with a release store of the row count that readers load with acquire.
 * Label values are only ever names from fixed tables or routed method names, so no caller can
 * add a series.
 */
#include "core/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decision.h"

#define METRICS_METHODS 64
#define METRICS_METHOD_MAX 96
#define METRICS_CODES 17 /* gRPC status numbers 0..16 */
#define METRICS_GATES 5  /* input, delivery, source, output, other */
#define METRICS_OUTCOMES 4

/* Latency bucket upper bounds, microseconds (shown in seconds). */
static const long metrics_bounds_us[] = {1000,   2500,   5000,    10000,   25000,   50000,   100000,
                                         250000, 500000, 1000000, 2500000, 5000000, 10000000};
#define METRICS_BUCKETS (sizeof metrics_bounds_us / sizeof metrics_bounds_us[0])

typedef struct {
    char name[METRICS_METHOD_MAX];
    atomic_ulong by_code[METRICS_CODES];
    atomic_ulong buckets[METRICS_BUCKETS]; /* not cumulative; summed when shown */
    atomic_ulong count;
    atomic_ulong sum_us;
} metrics_method;

static const char *const metrics_code_names[METRICS_CODES] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};
static const char *const metrics_gate_names[METRICS_GATES] = {"input", "delivery", "source",
                                                              "output", "other"};
static const char *const metrics_outcome_names[METRICS_OUTCOMES] = {"unspecified", "allow", "deny",
                                                                    "unknown"};
/* Every status a run can enter (RUN_STATUSES, queries/library.lua); "other" counts any other. */
static const char *const metrics_statuses[] = {
    "created", "queued",      "running",   "blocked",          "recovering",       "completed",
    "error",   "interrupted", "cancelled", "budget_exhausted", "pending_approval", "other"};
#define METRICS_STATUSES (sizeof metrics_statuses / sizeof metrics_statuses[0])

static struct {
    pthread_mutex_t mu;                          /* adding a method row */
    metrics_method methods[METRICS_METHODS + 1]; /* the last row is "unknown" */
    atomic_uint n_methods;
    atomic_ulong decisions[METRICS_GATES][METRICS_OUTCOMES];
    atomic_ulong decision_codes[METRICS_GATES][METRICS_OUTCOMES][GUARD_CODE_COUNT];
    atomic_ulong db_errors;
    atomic_ulong db_reconnects;
    atomic_long queue_depth;
    atomic_long workers_busy;
    atomic_ulong workers;
    atomic_ulong run_status[METRICS_STATUSES];
    atomic_ulong archived_runs;
    atomic_ulong archived_bytes;
    atomic_llong redis_used_memory;   /* -1 until a retention pass read it */
    atomic_llong oldest_unarchived_s; /* -1 until a retention pass looked */
    atomic_llong archived_records;    /* -1 until a retention pass counted them */
} metrics = {.mu = PTHREAD_MUTEX_INITIALIZER,
             .redis_used_memory = -1,
             .oldest_unarchived_s = -1,
             .archived_records = -1};

/* The row of method, added on first sight; the "unknown" row when the table is full. */
static metrics_method *metrics_row(const char *method)
{
    metrics_method *unknown = &metrics.methods[METRICS_METHODS];
    if (method == NULL || strlen(method) >= METRICS_METHOD_MAX) {
        return unknown;
    }
    unsigned n = atomic_load_explicit(&metrics.n_methods, memory_order_acquire);
    for (unsigned i = 0; i < n; i++) {
        if (strcmp(metrics.methods[i].name, method) == 0) {
            return &metrics.methods[i];
        }
    }
    metrics_method *row = unknown;
    pthread_mutex_lock(&metrics.mu);
    n = atomic_load_explicit(&metrics.n_methods, memory_order_relaxed);
    for (unsigned i = 0; i < n; i++) {
        if (strcmp(metrics.methods[i].name, method) == 0) {
            row = &metrics.methods[i];
            break;
        }
    }
    if (row == unknown && n < METRICS_METHODS) {
        row = &metrics.methods[n];
        snprintf(row->name, sizeof row->name, "%s", method);
        atomic_store_explicit(&metrics.n_methods, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&metrics.mu);
    return row;
}

void metrics_call(const char *method, int code, long us)
{
    metrics_method *row = metrics_row(method);
    if (code < 0 || code >= METRICS_CODES) {
        code = 2;
    }
    if (us < 0) {
        us = 0;
    }
    atomic_fetch_add_explicit(&row->by_code[code], 1, memory_order_relaxed);
    size_t b = 0;
    while (b < METRICS_BUCKETS && us > metrics_bounds_us[b]) {
        b++;
    }
    if (b < METRICS_BUCKETS) {
        atomic_fetch_add_explicit(&row->buckets[b], 1, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&row->sum_us, (unsigned long)us, memory_order_relaxed);
    atomic_fetch_add_explicit(&row->count, 1, memory_order_relaxed);
}

void metrics_decision(const char *kind, int outcome, unsigned codes)
{
    static const char *const kinds[METRICS_GATES - 1] = {"input_checked", "delivery_decided",
                                                         "source_read", "output_recorded"};
    int g = 0;
    while (g < METRICS_GATES - 1 && (kind == NULL || strcmp(kind, kinds[g]) != 0)) {
        g++;
    }
    if (outcome < 0 || outcome >= METRICS_OUTCOMES) {
        outcome = 0;
    }
    atomic_fetch_add_explicit(&metrics.decisions[g][outcome], 1, memory_order_relaxed);
    for (int c = 0; c < GUARD_CODE_COUNT; c++) {
        if (codes & (1u << c)) {
            atomic_fetch_add_explicit(&metrics.decision_codes[g][outcome][c], 1,
                                      memory_order_relaxed);
        }
    }
}

void metrics_db_error(void)
{
    atomic_fetch_add_explicit(&metrics.db_errors, 1, memory_order_relaxed);
}

void metrics_db_reconnect(void)
{
    atomic_fetch_add_explicit(&metrics.db_reconnects, 1, memory_order_relaxed);
}

void metrics_archived(unsigned long long bytes)
{
    atomic_fetch_add_explicit(&metrics.archived_runs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&metrics.archived_bytes, bytes, memory_order_relaxed);
}

void metrics_set_retention(long long used_memory, long long oldest_s, long long kept)
{
    atomic_store_explicit(&metrics.redis_used_memory, used_memory, memory_order_relaxed);
    atomic_store_explicit(&metrics.oldest_unarchived_s, oldest_s, memory_order_relaxed);
    atomic_store_explicit(&metrics.archived_records, kept, memory_order_relaxed);
}

void metrics_queue_add(int delta)
{
    atomic_fetch_add_explicit(&metrics.queue_depth, delta, memory_order_relaxed);
}

void metrics_workers_busy_add(int delta)
{
    atomic_fetch_add_explicit(&metrics.workers_busy, delta, memory_order_relaxed);
}

void metrics_set_workers(unsigned n)
{
    atomic_store_explicit(&metrics.workers, n, memory_order_relaxed);
}

void metrics_run_status(const char *status)
{
    size_t i = 0;
    while (i + 1 < METRICS_STATUSES &&
           (status == NULL || strcmp(status, metrics_statuses[i]) != 0)) {
        i++;
    }
    atomic_fetch_add_explicit(&metrics.run_status[i], 1, memory_order_relaxed);
}

/* --- exposition --------------------------------------------------------------------------- */

static unsigned long metrics_get(atomic_ulong *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

static void metrics_head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metrics_render_calls(FILE *f, unsigned n)
{
    metrics_head(f, "charter_calls_total", "counter",
                 "Calls answered, by method and gRPC status code.");
    for (unsigned i = 0; i <= METRICS_METHODS; i++) {
        if (i >= n && i < METRICS_METHODS) {
            continue;
        }
        metrics_method *m = &metrics.methods[i];
        const char *name = i == METRICS_METHODS ? "unknown" : m->name;
        for (int c = 0; c < METRICS_CODES; c++) {
            unsigned long v = metrics_get(&m->by_code[c]);
            if (v > 0) {
                fprintf(f, "charter_calls_total{method=\"%s\",code=\"%s\"} %lu\n", name,
                        metrics_code_names[c], v);
            }
        }
    }
    metrics_head(f, "charter_call_duration_seconds", "histogram",
                 "Time from a worker taking a call to its reply, by method.");
    for (unsigned i = 0; i <= METRICS_METHODS; i++) {
        if (i >= n && i < METRICS_METHODS) {
            continue;
        }
        metrics_method *m = &metrics.methods[i];
        unsigned long count = metrics_get(&m->count);
        if (count == 0) {
            continue;
        }
        const char *name = i == METRICS_METHODS ? "unknown" : m->name;
        unsigned long cum = 0;
        for (size_t b = 0; b < METRICS_BUCKETS; b++) {
            cum += metrics_get(&m->buckets[b]);
            fprintf(f, "charter_call_duration_seconds_bucket{method=\"%s\",le=\"%g\"} %lu\n", name,
                    (double)metrics_bounds_us[b] / 1e6, cum);
        }
        fprintf(f, "charter_call_duration_seconds_bucket{method=\"%s\",le=\"+Inf\"} %lu\n", name,
                count);
        fprintf(f, "charter_call_duration_seconds_sum{method=\"%s\"} %.6f\n", name,
                (double)metrics_get(&m->sum_us) / 1e6);
        fprintf(f, "charter_call_duration_seconds_count{method=\"%s\"} %lu\n", name, count);
    }
}

static void metrics_render_decisions(FILE *f)
{
    metrics_head(f, "charter_decisions_total", "counter",
                 "Gate decisions recorded, by gate and outcome.");
    for (int g = 0; g < METRICS_GATES; g++) {
        for (int o = 1; o < METRICS_OUTCOMES; o++) {
            fprintf(f, "charter_decisions_total{gate=\"%s\",outcome=\"%s\"} %lu\n",
                    metrics_gate_names[g], metrics_outcome_names[o],
                    metrics_get(&metrics.decisions[g][o]));
        }
    }
    metrics_head(f, "charter_decision_codes_total", "counter",
                 "Decision codes given, by gate, outcome and code (a decision with two codes "
                 "counts under both).");
    for (int g = 0; g < METRICS_GATES; g++) {
        for (int o = 0; o < METRICS_OUTCOMES; o++) {
            for (int c = 0; c < GUARD_CODE_COUNT; c++) {
                unsigned long v = metrics_get(&metrics.decision_codes[g][o][c]);
                if (v > 0) {
                    fprintf(f,
                            "charter_decision_codes_total{gate=\"%s\",outcome=\"%s\",code=\"%s\"} "
                            "%lu\n",
                            metrics_gate_names[g], metrics_outcome_names[o],
                            decision_code_name((guard_code)c), v);
                }
            }
        }
    }
}

/* The retention figures (metrics_archived, metrics_set_retention); a gauge not read yet is left
 * out rather than shown as a figure. */
static void metrics_render_retention(FILE *f)
{
    metrics_head(f, "charter_archived_runs_total", "counter",
                 "Ended runs this process archived and removed from the database.");
    fprintf(f, "charter_archived_runs_total %lu\n", metrics_get(&metrics.archived_runs));
    metrics_head(f, "charter_archived_bytes_total", "counter",
                 "Bytes of the archive files this process wrote.");
    fprintf(f, "charter_archived_bytes_total %lu\n", metrics_get(&metrics.archived_bytes));
    long long used = atomic_load_explicit(&metrics.redis_used_memory, memory_order_relaxed);
    long long oldest = atomic_load_explicit(&metrics.oldest_unarchived_s, memory_order_relaxed);
    metrics_head(f, "charter_redis_used_memory_bytes", "gauge",
                 "The database's used_memory at the last retention pass.");
    if (used >= 0)
        fprintf(f, "charter_redis_used_memory_bytes %lld\n", used);
    metrics_head(f, "charter_oldest_unarchived_ended_run_seconds", "gauge",
                 "Age of the oldest ended run still in the database at the last retention "
                 "pass (0: none).");
    if (oldest >= 0)
        fprintf(f, "charter_oldest_unarchived_ended_run_seconds %lld\n", oldest);
    long long kept = atomic_load_explicit(&metrics.archived_records, memory_order_relaxed);
    metrics_head(f, "charter_archived_invocation_records", "gauge",
                 "Compact records of archived invocations the database keeps (about 90 bytes "
                 "each; written by query library 24 on), at the last retention pass.");
    if (kept >= 0)
        fprintf(f, "charter_archived_invocation_records %lld\n", kept);
}

int metrics_render(char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (f == NULL) {
        return -1;
    }
    metrics_render_calls(f, atomic_load_explicit(&metrics.n_methods, memory_order_acquire));
    metrics_render_decisions(f);
    metrics_head(f, "charter_db_errors_total", "counter",
                 "Database commands that failed or could not connect.");
    fprintf(f, "charter_db_errors_total %lu\n", metrics_get(&metrics.db_errors));
    metrics_head(f, "charter_db_reconnects_total", "counter",
                 "Database connections opened again after one was dropped.");
    fprintf(f, "charter_db_reconnects_total %lu\n", metrics_get(&metrics.db_reconnects));
    metrics_head(f, "charter_queue_depth", "gauge", "Requests waiting for a worker.");
    fprintf(f, "charter_queue_depth %ld\n",
            atomic_load_explicit(&metrics.queue_depth, memory_order_relaxed));
    metrics_head(f, "charter_workers", "gauge", "Workers in the pool.");
    fprintf(f, "charter_workers %lu\n", metrics_get(&metrics.workers));
    metrics_head(f, "charter_workers_busy", "gauge",
                 "Workers serving a call (runs execute on workers) right now.");
    fprintf(f, "charter_workers_busy %ld\n",
            atomic_load_explicit(&metrics.workers_busy, memory_order_relaxed));
    metrics_head(f, "charter_run_status_changes_total", "counter",
                 "Runs entering a status (created or a committed status change), by status.");
    for (size_t i = 0; i < METRICS_STATUSES; i++) {
        fprintf(f, "charter_run_status_changes_total{status=\"%s\"} %lu\n", metrics_statuses[i],
                metrics_get(&metrics.run_status[i]));
    }
    metrics_render_retention(f);
    if (fclose(f) != 0 || buf == NULL) {
        free(buf);
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}
