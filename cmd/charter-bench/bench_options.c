/*
 * bench_options.c - charter-bench's command line: --help (which docs/measuring.md restates,
 * tests/docs_drift.sh compares them) and the options, each checked where it is read, then
 * against each other.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static void usage_head(FILE *out)
{
    fprintf(
        out,
        "usage: charter-bench --redis URL [options]     start charterd processes and load them\n"
        "       charter-bench --url URL [--pid PID] [options]   load a charterd already running\n"
        "       charter-bench --workload echo [--redis URL] [options]   the transport alone\n"
        "\n"
        "Drives one workload through libcharter from many threads and prints operations,\n"
        "RPC errors by code, decision outcomes, and figures: throughput, latency p50/p95/p99\n"
        "(every sample sorted, calls answered OK), per operation the database calls, inner\n"
        "Redis commands, Redis time and memory and charterd's CPU, and each as a ratio to\n"
        "ceilings measured right after it with the same threads: a no-op FCALL\n"
        "(redis-benchmark), a bare NNG echo, and the echo with one no-op FCALL per request.\n"
        "With --repeat N all of it is measured N times and each figure is the median (with\n"
        "min and max). Then checks the invariants (PASS/FAIL lines, exit 1 on a FAIL). It\n"
        "asserts nothing about speed.\n"
        "\n"
        "Setup, through the API as a host would: CreateRun (mode external), OpenStep analyze,\n"
        "ReadSource vendor_a, RecordOutput derived from it (a public payload).\n"
        "\n"
        "Workloads (--workload, default deliver):\n"
        "  deliver        Deliver(payload, recipient cfo, tool deliver_internal), a fresh\n"
        "                 invocation ID per call. Check: the run's committed deliveries are\n"
        "                 the ALLOW answers not acknowledged (plus calls the client gave up on,\n"
        "                 timed out or disconnected, whose commit landed anyway), every\n"
        "                 invocation once, none for a DENY, UNKNOWN or charterd's RPC error.\n"
        "  deliver-same   every thread delivers ONE invocation ID at once, --rounds times.\n"
        "                 Check: one delivery per round; one new ALLOW, the rest acknowledged.\n"
        "  check-input    records a lineage of --depth outputs (each derived from the previous;\n"
        "                 its time reported), then CheckInput of the deepest artifact, and of\n"
        "                 the one at --compare-depth. Check: every answer has its own\n"
        "                 input_checked event seq.\n"
        "  health         Health/Check.\n"
        "  echo           no charterd: a bare NNG req/rep echo in a server process of its own,\n"
        "                 as charterd is one (receiving contexts answering from NNG's\n"
        "                 callbacks), the bytes of a Health call sent back. Check: every echo\n"
        "                 came back unchanged.\n"
        "  echo-fcall     the same, each request queued for --workers threads that call a\n"
        "                 no-op function once on their own Redis connection (needs --redis).\n"
        "\n");
}

static void usage_options(FILE *out)
{
    fprintf(
        out,
        "Options:\n"
        "  --redis URL        unix:///path, tcp://host:port or cluster://host:port,... of an\n"
        "                     existing Redis (required unless --url or --workload echo; with\n"
        "                     --url it enables the Redis figures and ceilings)\n"
        "  --daemons M        charterd processes to start (default 1); threads are spread over\n"
        "                     them round-robin\n"
        "  --tenants N        deliver: N graphs (<graph>_t0 ...), one charterd each; thread t\n"
        "                     uses graph t mod N (--runs defaults to N). With --redis\n"
        "                     cluster://host:port,... the graphs spread over the masters\n"
        "  --workers W        --workers of each charterd and of the echo server (default 2 x\n"
        "                     online cores)\n"
        "  --graph NAME       graph of the charterd processes (default bench_<pid>); it must\n"
        "                     be empty, and its keys are deleted afterwards unless --keep\n"
        "  --charterd PATH    the charterd binary (default: next to charter-bench, then PATH)\n"
        "  --url URL          use this running charterd instead of starting any; its graph is\n"
        "                     never deleted\n"
        "  --pid PID          with --url: the charterd process, for its CPU and peak RSS\n"
        "  --threads N        client threads (default 16, at most 1024)\n"
        "  --runs N           deliver: spread the threads over N runs, each with its own\n"
        "                     context and payload (thread t uses run t mod N; default 1)\n"
        "  --duration S       seconds of load (default 10), or\n"
        "  --count N          total operations instead\n"
        "  --repeat N         measure N times (the load and the ceilings; default 1, at most\n"
        "                     99) and report the median, min and max of each figure\n"
        "  --rounds R         deliver-same: rounds per repetition (default 50)\n"
        "  --depth D          check-input: lineage depth (default 1500, at most 100000)\n"
        "  --compare-depth K  check-input: also measure CheckInput at depth K of the same\n"
        "                     lineage (default 15 when --depth is above 15; 0: not)\n"
        "  --lineage-budget S check-input: stop recording the lineage after S seconds and say\n"
        "                     how far it got (default: no limit)\n"
        "  --ceiling-duration S  seconds of each echo ceiling (default: --duration, or 5)\n"
        "  --timeout-ms MS    deadline of each call (default 10000)\n"
        "  --json             one JSON object on stdout instead of the text report\n"
        "  --no-ceiling       skip the ceilings (redis-benchmark -c N -n 100000 FCALL of a\n"
        "                     no-op function, the echo and the echo with FCALL)\n"
        "  --keep             keep the graph's keys and the temporary folder (daemon logs)\n"
        "  --help, --version\n"
        "\n");
}

static void usage_tail(FILE *out)
{
    fprintf(
        out,
        "Environment: CHARTER_OPERATOR_TOKEN (required with --url; when starting charterd a\n"
        "random one is made if it is unset). The daemons get it through the environment.\n"
        "\n"
        "Examples:\n"
        "  charter-bench --redis unix:///tmp/r/redis.sock --workload deliver --threads 16 \\\n"
        "                --runs 16 --repeat 3\n"
        "  charter-bench --redis unix:///tmp/r/redis.sock --daemons 2 --workload deliver-same \\\n"
        "                --threads 200 --rounds 50\n"
        "  charter-bench --redis unix:///tmp/r/redis.sock --workload check-input --depth 1500 \\\n"
        "                --threads 1 --count 200 --json\n"
        "  charter-bench --redis unix:///tmp/r/redis.sock --workload echo-fcall --threads 16\n"
        "  charter-bench --url ipc:///var/lib/charter/charterd.sock --pid 1234 --workload "
        "health\n");
}

/* Prints the usage (to stderr after an error, else to stdout) and returns the exit code. */
static int usage(const char *why, ...) __attribute__((format(printf, 1, 2)));

static int usage(const char *why, ...)
{
    if (why != NULL) {
        va_list ap;
        va_start(ap, why);
        fputs("charter-bench: ", stderr);
        vfprintf(stderr, why, ap);
        fputs(" (see charter-bench --help)\n", stderr);
        va_end(ap);
        return 2;
    }
    usage_head(stdout);
    usage_options(stdout);
    usage_tail(stdout);
    return 0;
}

static bool graph_name_ok(const char *g)
{
    size_t n = strlen(g);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = g[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == '-'))
            return false;
    }
    return true;
}

/* The options that take a whole number, with their bounds. */
static const struct {
    const char *name;
    unsigned long min, max;
    size_t field; /* an unsigned of bench_opts */
} number_options[] = {
    {"--threads", 1, BENCH_MAX_THREADS, offsetof(bench_opts, threads)},
    {"--runs", 1, BENCH_MAX_THREADS, offsetof(bench_opts, runs)},
    {"--tenants", 1, BENCH_MAX_DAEMONS, offsetof(bench_opts, tenants)},
    {"--daemons", 1, BENCH_MAX_DAEMONS, offsetof(bench_opts, daemons)},
    {"--workers", 1, 1024, offsetof(bench_opts, workers)},
    {"--depth", 1, BENCH_MAX_DEPTH, offsetof(bench_opts, depth)},
    {"--compare-depth", 0, BENCH_MAX_DEPTH, offsetof(bench_opts, compare_depth)},
    {"--rounds", 1, 1000000, offsetof(bench_opts, rounds)},
    {"--repeat", 1, BENCH_MAX_REPEAT, offsetof(bench_opts, repeat)},
};

/* The options that take seconds (more than 0, at most a day). */
static const struct {
    const char *name;
    size_t field; /* a double of bench_opts */
} seconds_options[] = {
    {"--duration", offsetof(bench_opts, duration_s)},
    {"--ceiling-duration", offsetof(bench_opts, ceiling_s)},
    {"--lineage-budget", offsetof(bench_opts, lineage_budget_s)},
};

/* A number or seconds option: 1 when opt is none of them, 0 when read, else the exit code. */
static int parse_numeric(const char *opt, const char *val, bench_opts *o)
{
    for (size_t i = 0; i < sizeof number_options / sizeof number_options[0]; i++) {
        if (strcmp(opt, number_options[i].name) != 0)
            continue;
        unsigned long v = 0;
        if (parse_ulong(val, number_options[i].min, number_options[i].max, &v) != 0)
            return usage("%s is %lu to %lu", opt, number_options[i].min, number_options[i].max);
        *(unsigned *)((char *)o + number_options[i].field) = (unsigned)v;
        if (strcmp(opt, "--compare-depth") == 0)
            o->compare_set = true;
        return 0;
    }
    for (size_t i = 0; i < sizeof seconds_options / sizeof seconds_options[0]; i++) {
        if (strcmp(opt, seconds_options[i].name) != 0)
            continue;
        char *end = NULL;
        double d = strtod(val, &end);
        if (end == val || *end != '\0' || !(d > 0) || d > 86400)
            return usage("%s is seconds, more than 0 and at most 86400", opt);
        *(double *)((char *)o + seconds_options[i].field) = d;
        return 0;
    }
    return 1;
}

static int parse_workload(const char *val, bench_opts *o)
{
    for (int k = 0; k < WL_COUNT; k++)
        if (strcmp(workload_names[k], val) == 0) {
            o->workload = (bench_workload)k;
            return 0;
        }
    return usage("--workload is deliver, deliver-same, check-input, health, echo or echo-fcall, "
                 "got \"%s\"",
                 val);
}

/* Any other option with a value: 0 when read, else the exit code. */
static int parse_other(const char *opt, const char *val, bench_opts *o)
{
    unsigned long v = 0;
    if (strcmp(opt, "--redis") == 0) {
        if (!((strncmp(val, "unix://", 7) == 0 && val[7] == '/') ||
              (strncmp(val, "tcp://", 6) == 0 && val[6] != '\0') ||
              (strncmp(val, "cluster://", 10) == 0 && val[10] != '\0')))
            return usage("--redis needs unix:///path, tcp://host:port or "
                         "cluster://host:port,..., got \"%s\"",
                         val);
        o->redis_url = val;
    } else if (strcmp(opt, "--url") == 0) {
        if (charter_url_check(val) != 0)
            return usage("--url needs tcp://host:port or ipc:///path, got \"%s\"", val);
        o->url = val;
    } else if (strcmp(opt, "--pid") == 0) {
        if (parse_ulong(val, 1, INT_MAX, &v) != 0)
            return usage("--pid needs a process id, got \"%s\"", val);
        o->pid = (long)v;
    } else if (strcmp(opt, "--graph") == 0) {
        if (!graph_name_ok(val))
            return usage("--graph needs 1 to 64 of [A-Za-z0-9_.-], got \"%s\"", val);
        o->graph = val;
    } else if (strcmp(opt, "--charterd") == 0) {
        o->charterd = val;
    } else if (strcmp(opt, "--workload") == 0) {
        return parse_workload(val, o);
    } else if (strcmp(opt, "--count") == 0) {
        if (parse_ulong(val, 1, 100000000, &v) != 0)
            return usage("--count is 1 to 100000000");
        o->count = v;
    } else if (strcmp(opt, "--timeout-ms") == 0) {
        if (parse_ulong(val, 1, CHARTER_MAX_TIMEOUT_MS, &v) != 0)
            return usage("--timeout-ms is 1 to %u", CHARTER_MAX_TIMEOUT_MS);
        o->timeout_ms = (uint32_t)v;
    } else {
        return usage("unknown option \"%s\"", opt);
    }
    return 0;
}

/* Whether opt is an option that takes a value (any other "--" word is an unknown option). */
static bool takes_value(const char *opt)
{
    static const char *const others[] = {"--redis",    "--url",      "--pid",   "--graph",
                                         "--charterd", "--workload", "--count", "--timeout-ms"};
    for (size_t i = 0; i < sizeof number_options / sizeof number_options[0]; i++)
        if (strcmp(opt, number_options[i].name) == 0)
            return true;
    for (size_t i = 0; i < sizeof seconds_options / sizeof seconds_options[0]; i++)
        if (strcmp(opt, seconds_options[i].name) == 0)
            return true;
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        if (strcmp(opt, others[i]) == 0)
            return true;
    return false;
}

/* A flag: 1 when opt is none, 0 when set, else the exit code (--help, --version). */
static int parse_flag(const char *opt, bench_opts *o)
{
    if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0)
        return usage(NULL);
    if (strcmp(opt, "--version") == 0) {
        printf("charter-bench %s\n", charter_version());
        return 0;
    }
    if (strcmp(opt, "--json") == 0)
        o->json = true;
    else if (strcmp(opt, "--no-ceiling") == 0)
        o->no_ceiling = true;
    else if (strcmp(opt, "--keep") == 0)
        o->keep = true;
    else
        return 1;
    return -1;
}

/* The defaults that depend on other options. */
static int options_defaults(bench_opts *o)
{
    if (o->duration_s > 0 && o->count > 0)
        return usage("give --duration or --count, not both");
    if (o->count == 0 && o->duration_s == 0)
        o->duration_s = 10;
    if (o->ceiling_s == 0)
        o->ceiling_s = o->duration_s > 0 ? o->duration_s : 5;
    if (!o->compare_set)
        o->compare_depth = o->workload == WL_CHECK_INPUT && o->depth > 15 ? 15 : 0;
    if (o->tenants > 1) {
        if (o->workload != WL_DELIVER || o->url != NULL || o->daemons != 1)
            return usage("--tenants starts one charterd per graph for the deliver workload: "
                         "not with --url, --daemons or another workload");
        o->daemons = o->tenants;
        if (o->runs == 1)
            o->runs = o->tenants;
        if (o->runs % o->tenants != 0)
            return usage("--runs must be a multiple of --tenants (%u)", o->tenants);
    }
    return -1;
}

/* The options against each other. */
static int options_check(bench_opts *o)
{
    bool echo = o->workload == WL_ECHO || o->workload == WL_ECHO_FCALL;
    if (o->workload == WL_ECHO_FCALL && o->redis_url == NULL)
        return usage("--workload echo-fcall needs --redis URL");
    if (o->url == NULL && o->redis_url == NULL && o->workload != WL_ECHO)
        return usage("--redis URL is required to start charterd (or pass --url of a running "
                     "one)");
    if (o->url != NULL &&
        (o->daemons != 1 || o->graph != NULL || o->charterd != NULL || o->workers != 0))
        return usage("--url uses a running charterd: --daemons, --graph, --charterd and "
                     "--workers do not apply");
    if (echo && (o->url != NULL || o->daemons != 1 || o->graph != NULL))
        return usage("--workload %s starts no charterd: --url, --daemons and --graph do not "
                     "apply",
                     workload_names[o->workload]);
    if (o->url == NULL && o->pid != 0)
        return usage("--pid goes with --url (started daemons are measured anyway)");
    if (o->runs > 1 && o->workload != WL_DELIVER)
        return usage("--runs applies to the deliver workload");
    if (o->workload != WL_CHECK_INPUT && (o->compare_set || o->lineage_budget_s > 0))
        return usage("--compare-depth and --lineage-budget apply to the check-input workload");
    if (o->compare_depth >= o->depth && o->compare_depth > 0)
        return usage("--compare-depth is below --depth (%u)", o->depth);
    if (o->runs > o->threads)
        return usage("--runs is at most --threads (%u)", o->threads);
    return -1;
}

/* Returns -1 to go on, else the exit code. */
int parse_options(int argc, char **argv, bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->workload = WL_DELIVER;
    o->threads = 16;
    o->daemons = 1;
    o->depth = 1500;
    o->rounds = 50;
    o->repeat = 1;
    o->timeout_ms = 10000;
    o->runs = 1;
    o->tenants = 1;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        int rc = parse_flag(opt, o);
        if (rc != 1) {
            if (rc >= 0)
                return rc;
            continue;
        }
        if (strncmp(opt, "--", 2) != 0)
            return usage("unexpected argument \"%s\"", opt);
        if (!takes_value(opt))
            return usage("unknown option \"%s\"", opt);
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (val == NULL)
            return usage("%s needs a value", opt);
        i++;
        rc = parse_numeric(opt, val, o);
        if (rc == 1)
            rc = parse_other(opt, val, o);
        if (rc != 0)
            return rc;
    }
    int rc = options_defaults(o);
    return rc >= 0 ? rc : options_check(o);
}
