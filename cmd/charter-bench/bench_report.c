/*
 * bench_report.c - charter-bench's report, as text or as one JSON object: the command that
 * made it, the totals over every answer (operations, RPC errors, decision outcomes), every
 * figure as the median of the repetitions with their min and max (the ceilings and the ratios
 * to them among them), the inner Redis commands per operation, charterd's memory and log, and
 * the invariant checks.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* --- totals over every answer of the workload -------------------------------------------- */

typedef struct {
    size_t total, ok, errors;
    double elapsed_ms;
    unsigned long by_code[17];
    unsigned long other_code;
    char first_error[17][200];
    unsigned long allow_new, acknowledged, deny, unknown, unspecified;
    bench_kind kinds[64];
    size_t n_kinds;
    unsigned long other_kinds;
} bench_totals;

static void totals_kind(bench_totals *f, const char *text, unsigned long count)
{
    for (size_t i = 0; i < f->n_kinds; i++)
        if (strcmp(f->kinds[i].text, text) == 0) {
            f->kinds[i].count += count;
            return;
        }
    if (f->n_kinds < sizeof f->kinds / sizeof f->kinds[0]) {
        snprintf(f->kinds[f->n_kinds].text, sizeof f->kinds[0].text, "%s", text);
        f->kinds[f->n_kinds++].count = count;
    } else {
        f->other_kinds += count;
    }
}

static void totals_sample(bench_totals *f, const bench_sample *s, bool decides)
{
    f->total++;
    if (s->code != 0) {
        f->errors++;
        if (s->code > 0 && s->code <= 16)
            f->by_code[s->code]++;
        else
            f->other_code++;
        return;
    }
    f->ok++;
    if (!decides)
        return;
    if (s->outcome == CHARTER__V1__OUTCOME__ALLOW && s->acknowledged)
        f->acknowledged++;
    else if (s->outcome == CHARTER__V1__OUTCOME__ALLOW)
        f->allow_new++;
    else if (s->outcome == CHARTER__V1__OUTCOME__DENY)
        f->deny++;
    else if (s->outcome == CHARTER__V1__OUTCOME__UNKNOWN)
        f->unknown++;
    else
        f->unspecified++;
}

static void totals_compute(const bench *b, bench_totals *f)
{
    memset(f, 0, sizeof *f);
    bool decides = b->o.workload <= WL_CHECK_INPUT;
    for (unsigned t = 0; b->workers != NULL && t < b->o.threads; t++) {
        const bench_worker *w = &b->workers[t];
        for (size_t i = 0; i < w->n; i++)
            totals_sample(f, &w->samples[i], decides);
        for (int c = 1; c <= 16; c++)
            if (f->first_error[c][0] == '\0' && w->first_error[c][0] != '\0')
                snprintf(f->first_error[c], sizeof f->first_error[c], "%s", w->first_error[c]);
        for (size_t k = 0; k < w->n_kinds; k++)
            totals_kind(f, w->kinds[k].text, w->kinds[k].count);
        f->other_kinds += w->other_kinds;
    }
}

/* --- the figures of every repetition -------------------------------------------------------- */

typedef struct {
    const char *key;   /* its name under "figures" in --json */
    const char *label; /* the text report's; %s is the operation */
    int decimals;
} fig_info;

static const fig_info figs[FIG_COUNT] = {
    [FIG_OPS] = {"ops_per_s", "%s/s", 1},
    [FIG_P50] = {"p50_ms", "latency p50, ms", 3},
    [FIG_P95] = {"p95_ms", "latency p95, ms", 3},
    [FIG_P99] = {"p99_ms", "latency p99, ms", 3},
    [FIG_REDIS_US] = {"redis_us_per_op", "Redis time per %s, us (FCALL usec)", 1},
    [FIG_DB_CALLS] = {"db_calls_per_op", "database calls per %s (FCALLs)", 2},
    [FIG_INNER] = {"inner_commands_per_op", "inner Redis commands per %s", 1},
    [FIG_REDIS_BYTES] = {"redis_bytes_per_op", "Redis memory per %s, bytes (used_memory)", 0},
    [FIG_CPU_US] = {"charterd_cpu_us_per_op", "charterd CPU per %s, us", 1},
    [FIG_CMP_OPS] = {"compare_ops_per_s", "%s/s", 1},
    [FIG_CMP_P50] = {"compare_p50_ms", "latency p50, ms", 3},
    [FIG_CMP_REDIS_US] = {"compare_redis_us_per_op", "Redis time per %s, us", 1},
    [FIG_CMP_DB_CALLS] = {"compare_db_calls_per_op", "database calls per %s", 2},
    [FIG_CMP_INNER] = {"compare_inner_commands_per_op", "inner Redis commands per %s", 1},
    [FIG_CMP_CPU_US] = {"compare_charterd_cpu_us_per_op", "charterd CPU per %s, us", 1},
    [FIG_DEPTH_RATIO] = {"p50_ratio_to_compare_depth", "p50 at depth %u / p50 at depth %u", 2},
    [FIG_FCALL] = {"noop_fcall_per_s", "ceiling: no-op FCALL/s", 0},
    [FIG_ECHO] = {"echo_per_s", "ceiling: echo/s", 0},
    [FIG_ECHO_FCALL] = {"echo_fcall_per_s", "ceiling: (echo + no-op FCALL)/s", 0},
    [FIG_R_FCALL] = {"ratio_to_noop_fcall", "%s/s / no-op FCALL/s", 4},
    [FIG_R_ECHO] = {"ratio_to_echo", "%s/s / echo/s", 4},
    [FIG_R_ECHO_FCALL] = {"ratio_to_echo_fcall", "%s/s / (echo + no-op FCALL)/s", 4},
};

/* The median, min and max of one figure over the repetitions that measured it (n of them). */
typedef struct {
    unsigned n;
    double median, min, max;
} fig_stats;

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

static fig_stats fig_summary(const bench *b, bench_fig f)
{
    double v[BENCH_MAX_REPEAT];
    fig_stats s = {0, NAN, NAN, NAN};
    for (unsigned r = 0; r < b->reps_done; r++)
        if (isfinite(b->fig[f][r]))
            v[s.n++] = b->fig[f][r];
    if (s.n == 0)
        return s;
    qsort(v, s.n, sizeof v[0], by_double);
    s.min = v[0];
    s.max = v[s.n - 1];
    s.median = s.n % 2 ? v[s.n / 2] : (v[s.n / 2 - 1] + v[s.n / 2]) / 2;
    return s;
}

/* The operation's name in labels. */
static const char *op_name(const bench *b)
{
    static const char *const names[WL_COUNT] = {"Deliver", "Deliver", "CheckInput",
                                                "Health",  "echo",    "echo+fcall"};
    return names[b->o.workload];
}

static void fig_label(const bench *b, bench_fig f, char *out, size_t outlen)
{
    char base[160];
    if (f == FIG_DEPTH_RATIO)
        snprintf(base, sizeof base, figs[f].label, b->o.depth, b->o.compare_depth);
    else
        snprintf(base, sizeof base, figs[f].label, op_name(b));
    if (f >= FIG_CMP_OPS && f <= FIG_CMP_CPU_US)
        snprintf(out, outlen, "at depth %u: %s", b->o.compare_depth, base);
    else if (f <= FIG_CPU_US && b->o.workload == WL_CHECK_INPUT)
        snprintf(out, outlen, "at depth %u: %s", b->o.depth, base);
    else
        snprintf(out, outlen, "%s", base);
}

/* --- text ----------------------------------------------------------------------------------- */

static void text_figure(const bench *b, bench_fig f)
{
    fig_stats s = fig_summary(b, f);
    if (s.n == 0)
        return;
    char label[200];
    fig_label(b, f, label, sizeof label);
    int d = figs[f].decimals;
    printf("              %-64s %12.*f", label, d, s.median);
    if (b->reps_done > 1)
        printf("  [%.*f .. %.*f]", d, s.min, d, s.max);
    if (s.n < b->reps_done)
        printf("  (%u of %u runs)", s.n, b->reps_done);
    printf("\n");
}

static void text_figures(const bench *b)
{
    if (b->reps_done == 0) {
        printf("figures       none: the load was not run\n");
        return;
    }
    /* --no-ceiling measures none, so the heading does not promise them. */
    const char *then = b->o.no_ceiling ? ", no ceilings (--no-ceiling), with"
                                       : ", then the ceilings with the same";
    if (b->reps_done == 1)
        printf("figures       one run: the load%s %u thread%s\n", then, b->o.threads,
               b->o.threads == 1 ? "" : "s");
    else
        printf("figures       median of %u runs [min .. max]; each run: the load%s %u thread%s\n",
               b->reps_done, then, b->o.threads, b->o.threads == 1 ? "" : "s");
    for (int f = 0; f < FIG_COUNT; f++)
        text_figure(b, (bench_fig)f);
    if (!isnan(b->fig[FIG_FCALL][0]) || b->fcall_note[0] != '\0')
        printf("ceilings      no-op FCALL: %s\n", b->fcall_note);
    if (b->echo_note[0] != '\0')
        printf("              echo: %s\n", b->echo_note);
    if (b->echo_fcall_note[0] != '\0')
        printf("              echo + FCALL: %s\n", b->echo_fcall_note);
    if (b->n_top > 0) {
        printf("inner/op      ");
        for (size_t i = 0; i < b->n_top; i++)
            printf("%s%s %.2f", i ? ", " : "", b->top[i].name, b->top_per_op[i]);
        printf("  (INFO commandstats deltas over the last run's load, FCALL and INFO aside)\n");
    }
}

static void text_head(const bench *b)
{
    printf("command       %s\n", b->command);
    printf("workload      %s, %u thread%s, ", workload_names[b->o.workload], b->o.threads,
           b->o.threads == 1 ? "" : "s");
    if (b->o.workload >= WL_ECHO)
        printf("the echo server process on %s%s\n", b->echo_url,
               b->o.workload == WL_ECHO_FCALL ? ", its workers calling FCALL" : "");
    else if (b->o.url != NULL)
        printf("charterd at %s (graph %s, %u workers)\n", b->o.url, b->graph, b->server_workers);
    else
        printf("%u charterd (%u workers each) on %s, graph %s%s\n", b->n_daemons, b->server_workers,
               b->o.redis_url, b->graph, b->o.tenants > 1 ? "_t<i>, one charterd per tenant" : "");
    if (b->o.workload < WL_HEALTH)
        printf("setup         run %s, context %s, source %s, payload %s: %.1f ms\n", b->run_id,
               b->context_id, b->source_id, b->payload_id, b->setup_ms);
    if (b->o.workload == WL_DELIVER_SAME)
        printf("rounds        %u of %u threads on one invocation ID each, per run\n", b->o.rounds,
               b->o.threads);
}

/* "3.00 database calls, ..." per output of the lineage, from the points around it. */
static void text_lineage_per_output(const bench_lineage *L)
{
    double n = (double)L->reached;
    const bench_redis_stats *x = &L->before.rs, *y = &L->after.rs;
    if (L->reached == 0 || !x->ok || !y->ok)
        return;
    printf("              per output: %.2f database calls, %.1f inner Redis commands, %.1f us of "
           "Redis, %.0f bytes of used_memory",
           (double)(y->calls - x->calls) / n, (double)(y->inner - x->inner) / n,
           (double)(y->usec - x->usec) / n, (double)(y->used_memory - x->used_memory) / n);
    if (L->before.cpu >= 0 && L->after.cpu >= 0) {
        long hz = sysconf(_SC_CLK_TCK);
        printf(", %.1f us of charterd CPU",
               (double)(L->after.cpu - L->before.cpu) * 1e6 / (double)(hz > 0 ? hz : 100) / n);
    }
    printf("\n");
}

static void text_lineage(const bench *b)
{
    const bench_lineage *L = &b->lineage;
    if (b->o.workload != WL_CHECK_INPUT)
        return;
    printf("lineage       depth %u of %u recorded through the API in %.3f s: %s%s\n", L->reached,
           b->o.depth, L->ms / 1000, L->finished ? "finished" : "NOT finished, ",
           L->finished ? "" : L->why);
    if (L->reached > 0)
        printf("              %.3f ms per output; the first %u: %.3f ms each%s", L->ms / L->reached,
               L->span, L->first_ms / L->span, L->finished ? "" : "\n");
    if (L->finished)
        printf(", the last %u: %.3f ms each (deepest artifact %s)\n", L->span, L->last_ms / L->span,
               b->deepest_id);
    text_lineage_per_output(L);
}

static void text_totals(const bench *b, const bench_totals *f)
{
    printf("operations    %zu over %u run%s: %zu answered, %zu RPC errors\n", f->total,
           b->reps_done, b->reps_done == 1 ? "" : "s", f->ok, f->errors);
    if (b->o.workload <= WL_CHECK_INPUT) {
        printf("outcomes      ALLOW %lu (new %lu, acknowledged %lu)  DENY %lu  UNKNOWN %lu",
               f->allow_new + f->acknowledged, f->allow_new, f->acknowledged, f->deny, f->unknown);
        if (f->unspecified)
            printf("  unspecified %lu", f->unspecified);
        printf("\n");
        for (size_t i = 0; i < f->n_kinds; i++)
            printf("              %lu x %s\n", f->kinds[i].count, f->kinds[i].text);
        if (f->other_kinds)
            printf("              %lu x other decisions\n", f->other_kinds);
    }
    if (f->errors == 0) {
        printf("errors        none\n");
        return;
    }
    printf("errors        ");
    bool first = true;
    for (int c = 1; c <= 16; c++)
        if (f->by_code[c]) {
            printf("%s%s %lu", first ? "" : ", ", charter_status_name(c), f->by_code[c]);
            first = false;
        }
    if (f->other_code)
        printf("%sother %lu", first ? "" : ", ", f->other_code);
    printf("\n");
    for (int c = 1; c <= 16; c++)
        if (f->by_code[c])
            printf("              %s: %s\n", charter_status_name(c), f->first_error[c]);
}

/* Max and sum over the measured processes of one figure (an offset into bench_mem). */
static unsigned mem_totals(const bench *b, size_t field, long *max, long *sum)
{
    unsigned n = 0;
    *max = 0;
    *sum = 0;
    for (unsigned i = 0; i < b->n_mem; i++) {
        long v = *(const long *)((const char *)&b->mem[i] + field);
        if (v < 0)
            continue;
        n++;
        *sum += v;
        if (v > *max)
            *max = v;
    }
    return n;
}

static void mem_line(const bench *b, const char *label, size_t field)
{
    long max = 0, sum = 0;
    unsigned n = mem_totals(b, field, &max, &sum);
    if (n == 0)
        return;
    printf("              %-26s max %7.1f MiB, sum %7.1f MiB [", label, max / 1024.0, sum / 1024.0);
    for (unsigned i = 0; i < b->n_mem; i++)
        printf("%s%.1f", i ? ", " : "", *(const long *)((const char *)&b->mem[i] + field) / 1024.0);
    printf("]\n");
}

/* Whether Redis's used_memory was read before the first load and after the last: without
 * --redis nothing reads it, and the zeroed figures must not be printed as if it had been. */
static bool redis_memory_read(const bench *b)
{
    return b->o.redis_url != NULL && b->reps_done > 0 && b->first_before.rs.used_memory >= 0 &&
           b->last_after.rs.used_memory >= 0;
}

static void text_memory(const bench *b)
{
    if (b->n_mem > 0) {
        printf("charterd RSS  %u process%s (KiB figures from /proc/<pid>/status, in MiB)\n",
               b->n_mem, b->n_mem == 1 ? "" : "es");
        mem_line(b, "peak VmHWM after the load", offsetof(bench_mem, hwm_load));
        mem_line(b, "VmRSS after the load", offsetof(bench_mem, rss_load));
        mem_line(b, "peak VmHWM after checks", offsetof(bench_mem, hwm_end));
    } else if (b->o.workload < WL_ECHO) {
        printf("charterd RSS  not measured%s\n", b->o.url ? " (pass --pid)" : "");
    }
    if (redis_memory_read(b))
        printf(
            "redis memory  used_memory %.1f MiB before the first load, %.1f MiB after the last\n",
            b->first_before.rs.used_memory / 1048576.0, b->last_after.rs.used_memory / 1048576.0);
}

void report_text(const bench *b)
{
    bench_totals f;
    totals_compute(b, &f);
    text_head(b);
    text_lineage(b);
    text_totals(b, &f);
    text_figures(b);
    text_memory(b);
    if (b->n_daemons > 0) {
        printf("charterd log  %lu line%s%s\n", b->log_total, b->log_total == 1 ? "" : "s",
               b->log_total ? " (count x first example of each message):" : "");
        for (size_t i = 0; i < b->n_log_kinds; i++)
            printf("              %lu x %s\n", b->log_kinds[i].count, b->log_kinds[i].text);
        if (b->log_other)
            printf("              %lu x other messages\n", b->log_other);
    }
    for (size_t i = 0; i < b->n_checks; i++)
        printf("%s %s: %s\n", b->checks[i].pass ? "PASS" : "FAIL", b->checks[i].name,
               b->checks[i].detail);
}

/* --- JSON ----------------------------------------------------------------------------------- */

static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* A number, or null when not measured. */
static void json_num(FILE *o, double v)
{
    if (isfinite(v))
        fprintf(o, "%.6g", v);
    else
        fputs("null", o);
}

static void json_figures(FILE *o, const bench *b)
{
    fprintf(o, ",\"figures\":{");
    bool first = true;
    for (int f = 0; f < FIG_COUNT; f++) {
        fig_stats s = fig_summary(b, (bench_fig)f);
        if (s.n == 0)
            continue;
        char label[200];
        fig_label(b, (bench_fig)f, label, sizeof label);
        fprintf(o, "%s\"%s\":{\"label\":", first ? "" : ",", figs[f].key);
        json_string(o, label);
        fprintf(o, ",\"median\":");
        json_num(o, s.median);
        fprintf(o, ",\"min\":");
        json_num(o, s.min);
        fprintf(o, ",\"max\":");
        json_num(o, s.max);
        fprintf(o, ",\"each\":[");
        for (unsigned r = 0; r < b->reps_done; r++) {
            fputs(r ? "," : "", o);
            json_num(o, b->fig[f][r]);
        }
        fprintf(o, "]}");
        first = false;
    }
    fprintf(o, "}");
}

/* The medians again under the names earlier versions used (ops_per_s, latency_ms, per_op,
 * ceiling), and the ceilings' commands. */
static void json_medians(FILE *o, const bench *b)
{
    static const struct {
        const char *group, *key;
        bench_fig f;
    } m[] = {{"", "ops_per_s", FIG_OPS},
             {"latency_ms", "p50", FIG_P50},
             {"latency_ms", "p95", FIG_P95},
             {"latency_ms", "p99", FIG_P99},
             {"per_op", "redis_us", FIG_REDIS_US},
             {"per_op", "db_calls", FIG_DB_CALLS},
             {"per_op", "inner_commands", FIG_INNER},
             {"per_op", "redis_bytes", FIG_REDIS_BYTES},
             {"per_op", "charterd_cpu_us", FIG_CPU_US},
             {"ceiling", "fcall_per_s", FIG_FCALL},
             {"ceiling", "echo_per_s", FIG_ECHO},
             {"ceiling", "echo_fcall_per_s", FIG_ECHO_FCALL},
             {"ceiling", "ratio", FIG_R_FCALL},
             {"ceiling", "ratio_echo", FIG_R_ECHO},
             {"ceiling", "ratio_echo_fcall", FIG_R_ECHO_FCALL}};
    const char *open = "";
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        if (strcmp(open, m[i].group) != 0) {
            fprintf(o, "%s,\"%s\":{", open[0] ? "}" : "", m[i].group);
            open = m[i].group;
        } else {
            fputc(',', o);
        }
        fprintf(o, "\"%s\":", m[i].key);
        json_num(o, fig_summary(b, m[i].f).median);
    }
    fprintf(o, ",\"fcall_command\":");
    json_string(o, b->fcall_note);
    fprintf(o, ",\"echo\":");
    json_string(o, b->echo_note);
    fprintf(o, ",\"echo_fcall\":");
    json_string(o, b->echo_fcall_note);
    fprintf(o, "}");
}

static void json_lineage(FILE *o, const bench *b)
{
    const bench_lineage *L = &b->lineage;
    if (b->o.workload != WL_CHECK_INPUT)
        return;
    fprintf(o, ",\"depth\":%u,\"compare_depth\":%u,\"lineage_setup_ms\":%.3f", b->o.depth,
            b->o.compare_depth, L->ms);
    fprintf(o, ",\"lineage\":{\"depth\":%u,\"reached\":%u,\"finished\":%s,\"ms\":%.3f,", b->o.depth,
            L->reached, L->finished ? "true" : "false", L->ms);
    fprintf(o, "\"ms_per_output\":");
    json_num(o, L->reached ? L->ms / L->reached : NAN);
    fprintf(o, ",\"span\":%u,\"first_ms_per_output\":", L->span);
    json_num(o, L->reached >= L->span ? L->first_ms / L->span : NAN);
    fprintf(o, ",\"last_ms_per_output\":");
    json_num(o, L->finished ? L->last_ms / L->span : NAN);
    double n = L->reached ? (double)L->reached : NAN;
    bool rs = L->before.rs.ok && L->after.rs.ok;
    fprintf(o, ",\"db_calls_per_output\":");
    json_num(o, rs ? (double)(L->after.rs.calls - L->before.rs.calls) / n : NAN);
    fprintf(o, ",\"inner_commands_per_output\":");
    json_num(o, rs ? (double)(L->after.rs.inner - L->before.rs.inner) / n : NAN);
    fprintf(o, ",\"redis_us_per_output\":");
    json_num(o, rs ? (double)(L->after.rs.usec - L->before.rs.usec) / n : NAN);
    fprintf(o, ",\"why\":");
    json_string(o, L->why);
    fprintf(o, "}");
}

static void json_head(FILE *o, const bench *b)
{
    fprintf(o, "{\"command\":");
    json_string(o, b->command);
    fprintf(o, ",\"workload\":\"%s\",\"threads\":%u,", workload_names[b->o.workload], b->o.threads);
    fprintf(o, "\"daemons\":%u,\"workers\":%u,\"graph\":", b->o.url ? 0 : b->n_daemons,
            b->server_workers);
    json_string(o, b->graph);
    fprintf(o, ",\"url\":");
    json_string(o, b->o.url ? b->o.url : "");
    fprintf(o, ",\"redis\":");
    json_string(o, b->o.redis_url ? b->o.redis_url : "");
    fprintf(o, ",\"run_id\":");
    json_string(o, b->run_id);
    fprintf(o, ",\"setup_ms\":%.3f,\"repeat\":%u,\"runs_done\":%u,\"runs\":%u", b->setup_ms,
            b->o.repeat, b->reps_done, b->o.runs);
    if (b->o.workload == WL_DELIVER_SAME)
        fprintf(o, ",\"rounds\":%u", b->o.rounds);
    json_lineage(o, b);
}

static void json_totals(FILE *o, const bench_totals *f)
{
    fprintf(o, ",\"operations\":%zu,\"answered\":%zu,\"errors\":%zu", f->total, f->ok, f->errors);
    fprintf(o,
            ",\"outcomes\":{\"allow\":%lu,\"allow_new\":%lu,\"acknowledged\":%lu,\"deny\":%lu,"
            "\"unknown\":%lu,\"unspecified\":%lu,\"decisions\":[",
            f->allow_new + f->acknowledged, f->allow_new, f->acknowledged, f->deny, f->unknown,
            f->unspecified);
    for (size_t i = 0; i < f->n_kinds; i++) {
        fprintf(o, "%s{\"count\":%lu,\"text\":", i ? "," : "", f->kinds[i].count);
        json_string(o, f->kinds[i].text);
        fputc('}', o);
    }
    fprintf(o, "]},\"rpc_errors\":{");
    bool first = true;
    for (int c = 1; c <= 16; c++)
        if (f->by_code[c]) {
            fprintf(o, "%s\"%s\":{\"count\":%lu,\"first\":", first ? "" : ",",
                    charter_status_name(c), f->by_code[c]);
            json_string(o, f->first_error[c]);
            fputc('}', o);
            first = false;
        }
    fprintf(o, "}");
}

static void mem_json(FILE *o, const bench *b, const char *name, size_t field)
{
    long max = 0, sum = 0;
    mem_totals(b, field, &max, &sum);
    fprintf(o, ",\"%s\":{\"max\":%ld,\"sum\":%ld,\"per_process\":[", name, max, sum);
    for (unsigned i = 0; i < b->n_mem; i++)
        fprintf(o, "%s%ld", i ? "," : "", *(const long *)((const char *)&b->mem[i] + field));
    fprintf(o, "]}");
}

static void json_memory(FILE *o, const bench *b)
{
    if (b->n_mem > 0) {
        mem_json(o, b, "rss_peak_kib_after_load", offsetof(bench_mem, hwm_load));
        mem_json(o, b, "rss_kib_after_load", offsetof(bench_mem, rss_load));
        mem_json(o, b, "rss_peak_kib_after_checks", offsetof(bench_mem, hwm_end));
    }
    if (redis_memory_read(b))
        fprintf(o, ",\"redis_used_memory\":{\"before\":%lld,\"after\":%lld}",
                b->first_before.rs.used_memory, b->last_after.rs.used_memory);
    fprintf(o, ",\"inner_commands_per_op\":{");
    for (size_t i = 0; i < b->n_top; i++) {
        fprintf(o, "%s", i ? "," : "");
        json_string(o, b->top[i].name);
        fprintf(o, ":%.4f", b->top_per_op[i]);
    }
    fprintf(o, "}");
}

static void json_tail(FILE *o, const bench *b)
{
    fprintf(o, ",\"charterd_log\":{\"lines\":%lu,\"messages\":[", b->log_total);
    for (size_t i = 0; i < b->n_log_kinds; i++) {
        fprintf(o, "%s{\"count\":%lu,\"example\":", i ? "," : "", b->log_kinds[i].count);
        json_string(o, b->log_kinds[i].text);
        fputc('}', o);
    }
    fprintf(o, "]},\"checks\":[");
    for (size_t i = 0; i < b->n_checks; i++) {
        fprintf(o, "%s{\"name\":", i ? "," : "");
        json_string(o, b->checks[i].name);
        fprintf(o, ",\"pass\":%s,\"detail\":", b->checks[i].pass ? "true" : "false");
        json_string(o, b->checks[i].detail);
        fputc('}', o);
    }
    fprintf(o, "]}\n");
}

void report_json(const bench *b)
{
    FILE *o = stdout;
    bench_totals f;
    totals_compute(b, &f);
    json_head(o, b);
    json_totals(o, &f);
    json_medians(o, b);
    json_figures(o, b);
    json_memory(o, b);
    json_tail(o, b);
}
