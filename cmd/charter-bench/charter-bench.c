/*
 * charter-bench.c - a load tool for charterd: it prints figures and asserts nothing about speed.
 *
 * It starts M charterd processes against one existing Redis (or uses a charterd already
 * running), sets up a run through the public API exactly as an agent host would (CreateRun
 * "external", OpenStep "analyze", ReadSource vendor_a, RecordOutput derived from it), then lets
 * N client threads drive one workload through libcharter and reports operations, RPC errors by
 * code, decision outcomes and figures: throughput, exact latency percentiles (every sample
 * sorted), per operation the database calls, inner Redis commands, Redis time and memory and
 * charterd's CPU, and ratios to ceilings measured right after the load with the same threads
 * (a no-op FCALL under redis-benchmark; a bare NNG echo in a process of its own, with and without
 * one no-op FCALL per request). --repeat N measures N times and reports medians. Afterwards it
 * checks the workload's invariants against what the server committed and prints PASS/FAIL
 * lines (exit status 1 on a FAIL).
 *
 * Workloads:
 *   deliver       every operation is Deliver(payload -> cfo, deliver_internal) with a fresh
 *                 invocation ID; check: committed deliveries = ALLOW answers not acknowledged
 *                 (+ calls the client gave up on, timed out or disconnected, whose commit
 *                 landed anyway), each once, and none for any other answer.
 *   deliver-same  all threads send ONE invocation ID at once, round after round; check: exactly
 *                 one delivery per round, one new ALLOW per round and the rest acknowledged.
 *   check-input   a lineage of --depth outputs is recorded first (each derived from the last),
 *                 then every operation is CheckInput of the deepest artifact, and then of the
 *                 one at --compare-depth; check: every answer's input_checked event has its own
 *                 seq.
 *   health        Health/Check.
 *   echo          the transport's ceiling alone (bench_echo.c), no charterd.
 *   echo-fcall    the same with one no-op FCALL per request.
 *
 * Examples (with a redis-server on a unix socket):
 *   charter-bench --redis unix:///tmp/r/redis.sock --workload deliver --threads 16 --repeat 3
 *   charter-bench --redis unix:///tmp/r/redis.sock --daemons 2 --workload deliver-same \
 *                 --threads 200 --rounds 50
 *   charter-bench --redis unix:///tmp/r/redis.sock --workload check-input --depth 1500 \
 *                 --threads 1 --count 40 --json
 *   charter-bench --url ipc:///var/lib/charter/charterd.sock --pid 1234 --workload health
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

const char *const workload_names[WL_COUNT] = {"deliver", "deliver-same", "check-input",
                                              "health",  "echo",         "echo-fcall"};

volatile sig_atomic_t bench_interrupted;

static void bench_on_signal(int sig)
{
    (void)sig;
    bench_interrupted = 1;
}

double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Progress on stderr, so stdout holds only the report. */
void say(const bench *b, const char *fmt, ...)
{
    (void)b;
    va_list ap;
    va_start(ap, fmt);
    fputs("charter-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void check_add(bench *b, bool pass, const char *name, const char *fmt, ...)
{
    if (b->n_checks >= sizeof b->checks / sizeof b->checks[0])
        return;
    bench_check *c = &b->checks[b->n_checks++];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->pass = pass;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof c->detail, fmt, ap);
    va_end(ap);
}

int parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end = NULL;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* The command line as typed, each word quoted when a shell would need it, so a figure can be
 * made again with the command printed beside it. */
static void command_line(bench *b, int argc, char **argv)
{
    size_t n = (size_t)snprintf(b->command, sizeof b->command, "charter-bench");
    for (int i = 1; i < argc && n < sizeof b->command; i++) {
        const char *w = argv[i];
        bool plain =
            w[0] != '\0' && strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                      "0123456789_./:=,@+-") == strlen(w);
        int k = snprintf(b->command + n, sizeof b->command - n, plain ? " %s" : " '%s'", w);
        n += k > 0 ? (size_t)k : 0;
    }
}

/* The operator token (CHARTER_OPERATOR_TOKEN, or a random one for the daemons started), the
 * tag of the invocation IDs, the graphs and the worker count. 0, or the exit code. */
static int bench_init(bench *b)
{
    const char *env_token = getenv("CHARTER_OPERATOR_TOKEN");
    if (env_token != NULL && env_token[0] != '\0') {
        if (strlen(env_token) >= sizeof b->token) {
            say(b, "CHARTER_OPERATOR_TOKEN is longer than %zu characters", sizeof b->token - 1);
            return 2;
        }
        snprintf(b->token, sizeof b->token, "%s", env_token);
    } else if (b->o.url != NULL) {
        say(b, "CHARTER_OPERATOR_TOKEN is not set (the running charterd's operator token is "
               "needed)");
        return 2;
    } else if (make_token(b->token, sizeof b->token) != 0 ||
               setenv("CHARTER_OPERATOR_TOKEN", b->token, 1) != 0) {
        say(b, "cannot make an operator token");
        return 1;
    }
    snprintf(b->tag, sizeof b->tag, "b%ldx%lx", (long)getpid(), (unsigned long)time(NULL));
    if (b->o.graph != NULL)
        snprintf(b->graph, sizeof b->graph, "%s", b->o.graph);
    else
        snprintf(b->graph, sizeof b->graph, "bench_%ld", (long)getpid());
    for (unsigned g = 0; g < b->o.tenants; g++) {
        if (b->o.tenants == 1)
            snprintf(b->graphs[g], sizeof b->graphs[g], "%.79s", b->graph);
        else
            snprintf(b->graphs[g], sizeof b->graphs[g], "%.79s_t%u", b->graph, g);
    }
    if (b->o.workers != 0) {
        b->server_workers = b->o.workers;
    } else {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        b->server_workers = (unsigned)(2 * (cores < 1 ? 1 : cores > 256 ? 256 : cores));
    }
    return 0;
}

/* The no-op library, when a ceiling or the workload calls it. redis-benchmark and INFO speak
 * to one server: none on a cluster. */
static int bench_noop(bench *b)
{
    bool cluster = b->o.redis_url != NULL && strncmp(b->o.redis_url, "cluster://", 10) == 0;
    if (b->o.redis_url == NULL || cluster) {
        snprintf(b->fcall_note, sizeof b->fcall_note, "not measured: %s",
                 cluster ? "a cluster has no one Redis to measure" : "no --redis");
        return b->o.workload == WL_ECHO_FCALL ? -1 : 0;
    }
    if (b->o.no_ceiling && b->o.workload != WL_ECHO_FCALL)
        return 0;
    char err[300];
    if (redis_noop_load(b, err, sizeof err) != 0) {
        snprintf(b->fcall_note, sizeof b->fcall_note, "not measured: %.250s", err);
        say(b, "%s", err);
        return b->o.workload == WL_ECHO_FCALL ? -1 : 0;
    }
    return 0;
}

/* The charterd processes measured: the daemons started, or the running one given by --pid. */
static void bench_mem_pids(bench *b)
{
    if (b->o.url != NULL && b->o.pid != 0)
        b->mem[b->n_mem++].pid = b->o.pid;
    for (unsigned i = 0; b->o.url == NULL && i < b->n_daemons; i++)
        b->mem[b->n_mem++].pid = b->daemons[i].pid;
    for (unsigned i = 0; i < b->n_mem; i++)
        b->mem[i].hwm_load = b->mem[i].rss_load = b->mem[i].hwm_end = -1;
}

/* Before the load: the temporary folder, the daemons (or --url) and their clients, the setup
 * through the API, the lineage, the no-op library and the echo's request. */
static int bench_start(bench *b)
{
    bool echo = b->o.workload >= WL_ECHO;
    if (make_tmpdir(b) != 0)
        return -1;
    if (!echo && b->o.url == NULL) {
        if (!b->o.json)
            say(b, "starting %u charterd (%u workers each) on graph %s", b->o.daemons,
                b->server_workers, b->graph);
        if (start_daemons(b) != 0)
            return -1;
    }
    if (!echo && (open_clients(b, b->token) != 0 || (b->o.url != NULL && probe_url(b) != 0)))
        return -1;
    bench_mem_pids(b);
    if (b->o.workload < WL_HEALTH && setup_runs(b) != 0)
        return -1;
    if (b->o.workload == WL_CHECK_INPUT) {
        if (!b->o.json)
            say(b, "recording a lineage of depth %u", b->o.depth);
        if (build_lineage(b) != 0)
            return -1;
    }
    if (bench_noop(b) != 0)
        return -1;
    if (echo_request(b) != 0) {
        say(b, "cannot encode the echo's request");
        return -1;
    }
    return 0;
}

/* --repeat runs of the load and the ceilings, then the invariants. Whether there is anything
 * to report. */
static bool bench_measure(bench *b)
{
    if (b->o.workload == WL_CHECK_INPUT && !b->lineage.finished)
        return true; /* the lineage's figures and a FAIL line */
    if ((b->workers = calloc(b->o.threads, sizeof *b->workers)) == NULL) {
        say(b, "out of memory");
        return false;
    }
    for (unsigned rep = 0; rep < b->o.repeat && !bench_interrupted; rep++) {
        if (!b->o.json)
            say(b, "run %u of %u: %s, %u thread%s, %s", rep + 1, b->o.repeat,
                workload_names[b->o.workload], b->o.threads, b->o.threads == 1 ? "" : "s",
                b->o.count > 0 ? "--count" : "--duration");
        if (measure_rep(b, rep) != 0)
            break;
        b->reps_done = rep + 1;
    }
    if (b->reps_done == 0)
        return false;
    verify_workload(b);
    if (b->echo_server_deaths > 0)
        check_add(b, false, "every echo server process ran until it was stopped",
                  "%lu ended early (its ceiling is suspect)", b->echo_server_deaths);
    if (b->echo_fcall_failures > 0 || b->o.workload == WL_ECHO_FCALL)
        check_add(b, b->echo_fcall_failures == 0, "every FCALL of the echo server answered 1",
                  "%lu failed", b->echo_fcall_failures);
    for (unsigned i = 0; i < b->n_mem; i++) {
        long rss = 0;
        read_rss(b->mem[i].pid, &b->mem[i].hwm_end, &rss);
    }
    return true;
}

static void bench_finish(bench *b, bool measured)
{
    close_clients(b);
    stop_daemons(b, measured);
    redis_noop_delete(b);
    if (b->o.url == NULL && b->o.redis_url != NULL && b->n_daemons > 0) {
        if (b->o.keep)
            say(b, "keeping graph %s and %s", b->graph, b->tmpdir);
        else
            delete_graph(b);
    }
    if (!b->o.keep)
        remove_tmpdir(b);
}

int main(int argc, char **argv)
{
    static bench bb;
    bench *b = &bb;
    if (argc >= 2 && strcmp(argv[1], "--echo-server") == 0)
        return echo_server_main(argc - 2, argv + 2);
    int rc = parse_options(argc, argv, &b->o);
    if (rc >= 0)
        return rc;
    command_line(b, argc, argv);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = bench_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if ((rc = bench_init(b)) != 0)
        return rc;

    bool measured = bench_start(b) == 0 && bench_measure(b);
    bench_finish(b, measured);
    int status = 1;
    if (measured) {
        if (b->o.json)
            report_json(b);
        else
            report_text(b);
        status = 0;
        for (size_t i = 0; i < b->n_checks; i++)
            if (!b->checks[i].pass)
                status = 1;
    }
    if (bench_interrupted) {
        say(b, "interrupted");
        status = status == 0 ? 130 : status;
    }
    workers_free(b->workers, b->o.threads);
    return status;
}
