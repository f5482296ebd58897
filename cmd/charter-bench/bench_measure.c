/*
 * bench_measure.c - one repetition of the measurement: the workload's load (for check-input a
 * second one at --compare-depth of the same lineage), then the ceilings with the same threads,
 * right after it and on the same machine: the no-op FCALL (Redis's limit, redis-benchmark), the
 * bare echo and the echo with one no-op FCALL per request (the transport's limit, bench_echo.c).
 * Every figure is kept per repetition, so a ratio divides figures of the same repetition.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* Starts the echo server (echo-fcall: with one FCALL per request) and the client of the load. */
static int echo_up(bench *b, bench_workload kind, bench_echo_proc **e)
{
    char err[400];
    const char *redis = kind == WL_ECHO_FCALL ? b->o.redis_url : NULL;
    if (kind == WL_ECHO_FCALL && !b->noop_loaded) {
        say(b, "echo-fcall needs the library benchnoop in --redis: %s", b->fcall_note);
        return -1;
    }
    if (echo_proc_start(b->echo_url, b->server_workers + b->o.threads, b->server_workers, redis, e,
                        err, sizeof err) != 0) {
        say(b, "%s", err);
        return -1;
    }
    if (echo_client_open(b->echo_url, b->o.timeout_ms, &b->echo_client, err, sizeof err) != 0) {
        say(b, "%s", err);
        echo_proc_stop(*e, NULL);
        *e = NULL;
        return -1;
    }
    say(b, "echo server %ld ready on %s", echo_proc_pid(*e), b->echo_url);
    return 0;
}

static void echo_down(bench *b, bench_echo_proc *e)
{
    echo_client_close(b->echo_client);
    b->echo_client = NULL;
    bool died = false;
    b->echo_fcall_failures += echo_proc_stop(e, &died);
    b->echo_server_deaths += died;
}

/* Runs load l (with the echo server around it for the echo kinds) and computes its figures;
 * with points, Redis's counters and charterd's CPU are read right before and after it. */
static int run_pass(bench *b, bench_load *l, bench_pass *out, bench_point *before,
                    bench_point *after)
{
    bench_echo_proc *e = NULL;
    if ((l->kind == WL_ECHO || l->kind == WL_ECHO_FCALL) && echo_up(b, l->kind, &e) != 0)
        return -1;
    if (before != NULL)
        measure_point(b, before);
    int rc = load_run(b, l);
    if (after != NULL)
        measure_point(b, after);
    if (e != NULL)
        echo_down(b, e);
    pass_compute(b, l, before, after, out);
    free(l->from);
    l->from = NULL;
    return rc;
}

/* What the last load of the workload leaves to report beside its figures: the points around
 * the first and last load, the inner commands per operation and charterd's memory. */
static void keep_main_points(bench *b, unsigned rep, const bench_point *before,
                             const bench_point *after, const bench_pass *p)
{
    if (rep == 0)
        b->first_before = *before;
    b->last_after = *after;
    b->n_top = before->rs.ok && after->rs.ok
                   ? redis_inner_top(&before->rs, &after->rs, b->top, BENCH_TOP_CMDS)
                   : 0;
    size_t kept = 0; /* commands called at least once per 200 operations */
    for (size_t i = 0; i < b->n_top && p->ok > 0; i++) {
        double per_op = (double)b->top[i].calls / (double)p->ok;
        if (per_op >= 0.005) {
            b->top[kept] = b->top[i];
            b->top_per_op[kept++] = per_op;
        }
    }
    b->n_top = kept;
    for (unsigned i = 0; i < b->n_mem; i++)
        read_rss(b->mem[i].pid, &b->mem[i].hwm_load, &b->mem[i].rss_load);
}

/* The workload's load on target (check-input: the artifact; else unused); compare: the second
 * load of check-input, at --compare-depth. */
static int measure_workload(bench *b, unsigned rep, const char *target, bool compare)
{
    static bench_point before, after; /* large (every command's counters): not on the stack */
    bench_load l;
    memset(&l, 0, sizeof l);
    l.kind = b->o.workload;
    l.target_id = target;
    l.duration_s = b->o.duration_s;
    l.count = b->o.count;
    l.round_base = (size_t)rep * b->o.rounds;
    l.workers = b->workers;
    bench_pass p;
    if (run_pass(b, &l, &p, &before, &after) != 0)
        return -1;
    double(*f)[BENCH_MAX_REPEAT] = b->fig;
    if (compare) {
        f[FIG_CMP_OPS][rep] = p.ops_per_s;
        f[FIG_CMP_P50][rep] = p.p50;
        f[FIG_CMP_REDIS_US][rep] = p.redis_us;
        f[FIG_CMP_DB_CALLS][rep] = p.db_calls;
        f[FIG_CMP_INNER][rep] = p.inner;
        f[FIG_CMP_CPU_US][rep] = p.cpu_us;
        f[FIG_DEPTH_RATIO][rep] = p.p50 > 0 ? f[FIG_P50][rep] / p.p50 : NAN;
        return 0;
    }
    f[FIG_OPS][rep] = p.ops_per_s;
    f[FIG_P50][rep] = p.p50;
    f[FIG_P95][rep] = p.p95;
    f[FIG_P99][rep] = p.p99;
    f[FIG_REDIS_US][rep] = p.redis_us;
    f[FIG_DB_CALLS][rep] = p.db_calls;
    f[FIG_INNER][rep] = p.inner;
    f[FIG_REDIS_BYTES][rep] = p.redis_bytes;
    f[FIG_CPU_US][rep] = p.cpu_us;
    keep_main_points(b, rep, &before, &after, &p);
    return 0;
}

/* One echo ceiling (kind WL_ECHO or WL_ECHO_FCALL) for --ceiling-duration; its rate, or NAN
 * with note saying why. */
static double ceiling_echo(bench *b, bench_workload kind, char *note, size_t notelen)
{
    bench_load l;
    memset(&l, 0, sizeof l);
    l.kind = kind;
    l.duration_s = b->o.ceiling_s;
    l.workers = calloc(b->o.threads, sizeof *l.workers);
    if (l.workers == NULL) {
        snprintf(note, notelen, "out of memory");
        return NAN;
    }
    bench_pass p;
    int rc = run_pass(b, &l, &p, NULL, NULL);
    workers_free(l.workers, b->o.threads);
    if (rc != 0 || p.ok == 0) {
        snprintf(note, notelen, "not measured: the echo server or its load failed (see above)");
        return NAN;
    }
    if (kind == WL_ECHO)
        snprintf(note, notelen,
                 "%u receiving contexts answering from NNG's callbacks on %.200s, %u client "
                 "thread%s on one req0 socket, %g s; %zu answered, %zu errors",
                 b->server_workers + b->o.threads, b->echo_url, b->o.threads,
                 b->o.threads == 1 ? "" : "s", b->o.ceiling_s, p.ok, p.errors);
    else
        snprintf(note, notelen,
                 "the same, each request queued for %u workers that call FCALL bench_noop 0 on "
                 "their own connection, %g s; %zu answered, %zu errors",
                 b->server_workers, b->o.ceiling_s, p.ok, p.errors);
    return p.errors == 0 ? p.ops_per_s : NAN;
}

/* The three ceilings of repetition rep and the workload's rate over each. */
static void measure_ceilings(bench *b, unsigned rep)
{
    double(*f)[BENCH_MAX_REPEAT] = b->fig;
    if (b->noop_loaded) {
        if (!b->o.json)
            say(b, "ceiling: redis-benchmark -c %u FCALL bench_noop 0", b->o.threads);
        double rps = redis_noop_ceiling(b, b->fcall_note, sizeof b->fcall_note);
        f[FIG_FCALL][rep] = rps > 0 ? rps : NAN;
    }
    if (!b->o.json)
        say(b, "ceiling: echo, %u thread%s for %g s", b->o.threads, b->o.threads == 1 ? "" : "s",
            b->o.ceiling_s);
    f[FIG_ECHO][rep] = ceiling_echo(b, WL_ECHO, b->echo_note, sizeof b->echo_note);
    if (b->noop_loaded) {
        if (!b->o.json)
            say(b, "ceiling: echo + one FCALL per request (%u workers) for %g s", b->server_workers,
                b->o.ceiling_s);
        f[FIG_ECHO_FCALL][rep] =
            ceiling_echo(b, WL_ECHO_FCALL, b->echo_fcall_note, sizeof b->echo_fcall_note);
    }
    double ops = f[FIG_OPS][rep];
    f[FIG_R_FCALL][rep] = ops / f[FIG_FCALL][rep];
    f[FIG_R_ECHO][rep] = ops / f[FIG_ECHO][rep];
    f[FIG_R_ECHO_FCALL][rep] = ops / f[FIG_ECHO_FCALL][rep];
}

/* Repetition rep: the workload, its second depth, the ceilings. -1 when a load could not run. */
int measure_rep(bench *b, unsigned rep)
{
    for (int i = 0; i < FIG_COUNT; i++)
        b->fig[i][rep] = NAN;
    if (measure_workload(b, rep, b->deepest_id, false) != 0)
        return -1;
    if (b->o.workload == WL_CHECK_INPUT && b->compare_id[0] != '\0' && !bench_interrupted &&
        measure_workload(b, rep, b->compare_id, true) != 0)
        return -1;
    if (!b->o.no_ceiling && !bench_interrupted)
        measure_ceilings(b, rep);
    return 0;
}
