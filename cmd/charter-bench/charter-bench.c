/*
 * charter-bench.c - a load tool for charterd: it prints figures and asserts nothing about speed.
 *
 * It starts M charterd processes against one existing Redis (or uses a charterd already
 * running), sets up a run through the public API exactly as an agent host would (CreateRun
 * "external", OpenStep "analyze", ReadSource vendor_a, RecordOutput derived from it), then lets
 * N client threads drive one workload through libcharter and reports operations, RPC errors by
 * code, decision outcomes, throughput, exact latency percentiles (every sample sorted),
 * charterd's peak RSS (VmHWM) and, as a ceiling, what the same Redis does with a trivial FCALL
 * under redis-benchmark. Afterwards it checks the delivery invariants against the run's
 * committed deliveries and prints PASS/FAIL lines (exit status 1 on a FAIL).
 *
 * Workloads:
 *   deliver       every operation is Deliver(payload -> cfo, deliver_internal) with a fresh
 *                 invocation ID; check: committed deliveries = ALLOW answers not acknowledged
 *                 (+ calls the client gave up on, timed out or disconnected, whose commit
 *                 landed anyway), each once, and none for any other answer.
 *   deliver-same  all threads send ONE invocation ID at once, round after round; check: exactly
 *                 one delivery per round, one new ALLOW per round and the rest acknowledged.
 *   check-input   a lineage of --depth outputs is recorded first (each derived from the last),
 *                 then every operation is CheckInput of the deepest artifact; check: every
 *                 answer's input_checked event has its own seq.
 *   health        Health/Check: the transport ceiling.
 *
 * Examples (with a redis-server on a unix socket):
 *   charter-bench --redis unix:///tmp/r/redis.sock --workload deliver --threads 16 --duration 10
 *   charter-bench --redis unix:///tmp/r/redis.sock --daemons 2 --workload deliver-same \
 *                 --threads 200 --rounds 50
 *   charter-bench --redis unix:///tmp/r/redis.sock --workload check-input --depth 1500 \
 *                 --threads 16 --duration 10 --json
 *   charter-bench --url ipc:///var/lib/charter/charterd.sock --pid 1234 --workload health
 */
#include <errno.h>
#include <fcntl.h>
#include <hiredis.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "charter.h"

#define BENCH_MAX_THREADS 1024u
#define BENCH_MAX_DAEMONS 64u
#define BENCH_MAX_DEPTH 9999u /* depth + 1 artifacts (with the source): charterd walks 10000 */
#define BENCH_MAX_KINDS 16    /* distinct decision texts kept per thread */
#define BENCH_CEILING_REQUESTS "100000"
#define BENCH_STARTUP_MS 20000.0
#define BENCH_STOP_MS 20000.0
#define BENCH_VERIFY_TIMEOUT_MS 60000u

typedef enum {
    WL_DELIVER = 0,
    WL_DELIVER_SAME,
    WL_CHECK_INPUT,
    WL_HEALTH,
} bench_workload;

static const char *const workload_names[] = {"deliver", "deliver-same", "check-input", "health"};

/* The command line. */
typedef struct {
    bench_workload workload;
    unsigned threads;
    unsigned daemons;
    unsigned workers; /* --workers of each charterd; 0: 2 x online cores, as charterd */
    unsigned depth;
    unsigned rounds;
    double duration_s;   /* 0 when count is used */
    unsigned long count; /* 0 when duration is used */
    uint32_t timeout_ms;
    const char *redis_url;
    const char *url; /* an already running charterd, or NULL */
    long pid;        /* its process for RSS, or 0 */
    const char *graph;
    const char *charterd;
    bool json;
    bool no_ceiling;
    bool keep;
    unsigned runs;    /* deliver: runs the threads are spread over (thread t uses run t % runs) */
    unsigned tenants; /* deliver: graphs, one charterd each (thread t uses graph t % tenants) */
} bench_opts;

/* One run the workload uses: its context and payload, set up through the API. */
typedef struct {
    char run_id[160];
    char context_id[160];
    char source_id[160];
    char payload_id[160];
} bench_run;

/* Redis's own account of a span of time (INFO commandstats and memory): every FCALL and
 * FCALL_RO (charterd's database calls, each with its inner commands' time) and used_memory. */
typedef struct {
    bool ok;
    unsigned long long calls, usec; /* FCALL + FCALL_RO */
    long long used_memory;
} bench_redis_stats;

/* One operation as it was answered. code is the RPC status (0 OK); the rest is set for 0. */
typedef struct {
    double ms;
    uint64_t event_seq; /* check-input: the input_checked event */
    int16_t code;
    uint8_t outcome; /* Charter__V1__Outcome */
    uint8_t acknowledged;
    uint8_t local; /* the RPC error was produced by libcharter, not answered by charterd */
} bench_sample;

/* A distinct decision text ("DENY GRANT_INVALID: witness") or RPC error, with its count. */
typedef struct {
    char text[200];
    unsigned long count;
} bench_kind;

typedef struct bench bench;

typedef struct {
    bench *b;
    unsigned index;
    charter_client *client;
    bench_sample *samples;
    size_t n, cap;
    bool oom;
    bench_kind kinds[BENCH_MAX_KINDS];
    size_t n_kinds;
    unsigned long other_kinds;
    char first_error[17][200]; /* first message per RPC code (index 0 unused) */
    pthread_t thread;
    bool started;
} bench_worker;

typedef struct {
    pid_t pid;
    char url[PATH_MAX + 16];
    char log[PATH_MAX];
    bool running;
    int status; /* waitpid status once stopped */
    bool killed;
} bench_daemon;

/* Memory of one measured charterd, in KiB (-1 when unreadable): right after the load, and
 * again after the checks (GetRun of the whole run can be the larger peak). */
typedef struct {
    long pid;
    long hwm_load, rss_load, hwm_end;
} bench_mem;

typedef struct {
    char name[160];
    bool pass;
    char detail[400];
} bench_check;

struct bench {
    bench_opts o;
    char token[128];
    char graph[80];
    char graphs[BENCH_MAX_DAEMONS][96]; /* per tenant: graph, or graph_t<i> with --tenants */
    char tag[64];                       /* prefix of every invocation ID of this process */
    char tmpdir[PATH_MAX];
    char charterd[PATH_MAX];
    bench_daemon daemons[BENCH_MAX_DAEMONS];
    unsigned n_daemons;
    charter_client *clients[BENCH_MAX_DAEMONS];
    unsigned n_clients;    /* one per charterd: the daemons started, or 1 with --url */
    charter_client *admin; /* setup and verification, long deadline (admins[0]) */
    charter_client *admins[BENCH_MAX_DAEMONS]; /* one per tenant's charterd */
    unsigned server_workers;

    /* The run the workload uses. */
    char run_id[160];
    char context_id[160];
    char source_id[160];
    char payload_id[160];
    char deepest_id[160];
    bench_run runs[BENCH_MAX_THREADS]; /* --runs of them; runs[0] is the run above */
    double setup_ms;
    double lineage_ms;

    /* The workload. */
    bench_worker *workers;
    pthread_mutex_t gate_mu;
    pthread_cond_t gate_cv;
    int go; /* 0 wait, 1 run, -1 abort: the start gate every thread waits at */
    pthread_barrier_t round_a, round_b;
    bool barriers;
    atomic_ulong issued;
    volatile bool halt_rounds;
    double deadline_ms;
    double t0_ms, elapsed_ms;

    /* Redis. */
    long long redis_mem_before, redis_mem_after;
    bench_redis_stats rs_before, rs_after;
    /* charterd CPU (utime + stime of every measured process, in clock ticks), -1 unread. */
    long long cpu_before, cpu_after;
    double fcall_per_s; /* 0 when not measured */
    char ceiling_note[300];

    bench_mem mem[BENCH_MAX_DAEMONS];
    unsigned n_mem;

    bench_check checks[16];
    size_t n_checks;
    bench_kind log_kinds[12]; /* distinct daemon log messages (digits aside), with counts */
    size_t n_log_kinds;
    unsigned long log_total, log_other;
};

static volatile sig_atomic_t bench_interrupted;

static void bench_on_signal(int sig)
{
    (void)sig;
    bench_interrupted = 1;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static void say(const bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Progress on stderr, so stdout holds only the report. */
static void say(const bench *b, const char *fmt, ...)
{
    (void)b;
    va_list ap;
    va_start(ap, fmt);
    fputs("charter-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void check_add(bench *b, bool pass, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void check_add(bench *b, bool pass, const char *name, const char *fmt, ...)
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

/* --- options ------------------------------------------------------------------------------ */

static int usage(const char *why, ...) __attribute__((format(printf, 1, 2)));

/* Prints the usage (to stderr after an error, else to stdout) and returns the exit code. */
static int usage(const char *why, ...)
{
    FILE *out = why != NULL ? stderr : stdout;
    if (why != NULL) {
        va_list ap;
        va_start(ap, why);
        fputs("charter-bench: ", stderr);
        vfprintf(stderr, why, ap);
        fputs(" (see charter-bench --help)\n", stderr);
        va_end(ap);
        return 2;
    }
    fprintf(
        out,
        "usage: charter-bench --redis URL [options]     start charterd processes and load them\n"
        "       charter-bench --url URL [--pid PID] [options]   load a charterd already running\n"
        "\n"
        "Drives one workload through libcharter from many threads and prints operations,\n"
        "RPC errors by code, decision outcomes, throughput, latency p50/p95/p99/max (every\n"
        "sample sorted, calls answered OK), charterd's peak RSS (VmHWM) and a Redis ceiling;\n"
        "then checks the delivery invariants (PASS/FAIL lines, exit 1 on a FAIL). It measures\n"
        "and asserts nothing about speed.\n"
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
        "                 setup time reported), then CheckInput of the deepest artifact.\n"
        "                 Check: every answer has its own input_checked event seq.\n"
        "  health         Health/Check: the transport ceiling.\n"
        "\n"
        "Options:\n");
    fprintf(
        out,
        "  --redis URL        unix:///path, tcp://host:port or cluster://host:port,... of an\n"
        "                     existing Redis (required\n"
        "                     unless --url; with --url it enables the ceiling)\n"
        "  --daemons M        charterd processes to start (default 1); threads are spread over\n"
        "                     them round-robin\n"
        "  --tenants N        deliver: N graphs (<graph>_t0 ...), one charterd each; thread t\n"
        "                     uses graph t mod N (--runs defaults to N). With --redis\n"
        "                     cluster://host:port,... the graphs spread over the masters\n"
        "  --workers W        --workers of each charterd (default 2 x online cores)\n"
        "  --graph NAME       graph of the charterd processes (default bench_<pid>); it must\n"
        "                     be empty, and its keys are deleted afterwards unless --keep\n"
        "  --charterd PATH    the charterd binary (default: next to charter-bench, then PATH)\n"
        "  --url URL          use this running charterd instead of starting any; its graph is\n"
        "                     never deleted\n"
        "  --pid PID          with --url: the charterd process, for its peak RSS\n"
        "  --threads N        client threads (default 16, at most 1024)\n"
        "  --runs N           deliver: spread the threads over N runs, each with its own\n"
        "                     context and payload (thread t uses run t mod N; default 1)\n"
        "  --duration S       seconds of load (default 10), or\n"
        "  --count N          total operations instead\n"
        "  --rounds R         deliver-same: rounds (default 50)\n"
        "  --depth D          check-input: lineage depth (default 1500)\n"
        "  --timeout-ms MS    deadline of each call (default 10000)\n"
        "  --json             one JSON object on stdout instead of the text report\n"
        "  --no-ceiling       skip redis-benchmark (FCALL of a no-op function, -c N -n 100000)\n"
        "  --keep             keep the graph's keys and the temporary folder (daemon logs)\n"
        "  --help, --version\n"
        "\n"
        "Environment: CHARTER_OPERATOR_TOKEN (required with --url; when starting charterd a\n"
        "random one is made if it is unset). The daemons get it through the environment.\n"
        "\n"
        "Examples:\n"
        "  charter-bench --redis unix:///tmp/r/redis.sock --workload deliver --threads 16 \\\n"
        "                --duration 10\n"
        "  charter-bench --redis unix:///tmp/r/redis.sock --daemons 2 --workload deliver-same \\\n"
        "                --threads 200 --rounds 50\n"
        "  charter-bench --redis unix:///tmp/r/redis.sock --workload check-input --depth 1500 \\\n"
        "                --threads 1 --count 200 --json\n"
        "  charter-bench --url ipc:///var/lib/charter/charterd.sock --pid 1234 --workload "
        "health\n");
    return 0;
}

static int parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
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

/* The options that take a value; any other "--" word is an unknown option. */
static bool bench_option_takes_value(const char *opt)
{
    static const char *const names[] = {"--redis",    "--url",      "--pid",       "--graph",
                                        "--charterd", "--workload", "--threads",   "--runs",
                                        "--daemons",  "--workers",  "--depth",     "--rounds",
                                        "--duration", "--count",    "--timeout-ms"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(opt, names[i]) == 0)
            return true;
    return false;
}

/* Returns -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->workload = WL_DELIVER;
    o->threads = 16;
    o->daemons = 1;
    o->depth = 1500;
    o->rounds = 50;
    o->timeout_ms = 10000;
    o->runs = 1;
    o->tenants = 1;
    bool duration_set = false;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        unsigned long v = 0;
        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0)
            return usage(NULL);
        if (strcmp(opt, "--json") == 0) {
            o->json = true;
            continue;
        }
        if (strcmp(opt, "--no-ceiling") == 0) {
            o->no_ceiling = true;
            continue;
        }
        if (strcmp(opt, "--keep") == 0) {
            o->keep = true;
            continue;
        }
        if (strcmp(opt, "--version") == 0) {
            printf("charter-bench %s\n", charter_version());
            return 0;
        }
        if (strncmp(opt, "--", 2) != 0)
            return usage("unexpected argument \"%s\"", opt);
        if (!bench_option_takes_value(opt))
            return usage("unknown option \"%s\"", opt);
        const char *val = i + 1 < argc ? argv[++i] : NULL;
        if (val == NULL)
            return usage("%s needs a value", opt);
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
            size_t k = 0;
            while (k < sizeof workload_names / sizeof workload_names[0] &&
                   strcmp(workload_names[k], val) != 0)
                k++;
            if (k == sizeof workload_names / sizeof workload_names[0])
                return usage("--workload is deliver, deliver-same, check-input or health, "
                             "got \"%s\"",
                             val);
            o->workload = (bench_workload)k;
        } else if (strcmp(opt, "--threads") == 0) {
            if (parse_ulong(val, 1, BENCH_MAX_THREADS, &v) != 0)
                return usage("--threads is 1 to %u", BENCH_MAX_THREADS);
            o->threads = (unsigned)v;
        } else if (strcmp(opt, "--runs") == 0) {
            if (parse_ulong(val, 1, BENCH_MAX_THREADS, &v) != 0)
                return usage("--runs is 1 to %u", BENCH_MAX_THREADS);
            o->runs = (unsigned)v;
        } else if (strcmp(opt, "--tenants") == 0) {
            if (parse_ulong(val, 1, BENCH_MAX_DAEMONS, &v) != 0)
                return usage("--tenants is 1 to %u", BENCH_MAX_DAEMONS);
            o->tenants = (unsigned)v;
        } else if (strcmp(opt, "--daemons") == 0) {
            if (parse_ulong(val, 1, BENCH_MAX_DAEMONS, &v) != 0)
                return usage("--daemons is 1 to %u", BENCH_MAX_DAEMONS);
            o->daemons = (unsigned)v;
        } else if (strcmp(opt, "--workers") == 0) {
            if (parse_ulong(val, 1, 1024, &v) != 0)
                return usage("--workers is 1 to 1024");
            o->workers = (unsigned)v;
        } else if (strcmp(opt, "--depth") == 0) {
            if (parse_ulong(val, 1, BENCH_MAX_DEPTH, &v) != 0)
                return usage("--depth is 1 to %u", BENCH_MAX_DEPTH);
            o->depth = (unsigned)v;
        } else if (strcmp(opt, "--rounds") == 0) {
            if (parse_ulong(val, 1, 1000000, &v) != 0)
                return usage("--rounds is 1 to 1000000");
            o->rounds = (unsigned)v;
        } else if (strcmp(opt, "--duration") == 0) {
            char *end = NULL;
            double d = strtod(val, &end);
            if (end == val || *end != '\0' || !(d > 0) || d > 86400)
                return usage("--duration is seconds, more than 0 and at most 86400");
            o->duration_s = d;
            duration_set = true;
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
    }
    if (duration_set && o->count > 0)
        return usage("give --duration or --count, not both");
    if (o->count == 0 && !duration_set)
        o->duration_s = 10;
    if (o->url == NULL && o->redis_url == NULL)
        return usage("--redis URL is required to start charterd (or pass --url of a running "
                     "one)");
    if (o->url != NULL &&
        (o->daemons != 1 || o->graph != NULL || o->charterd != NULL || o->workers != 0))
        return usage("--url uses a running charterd: --daemons, --graph, --charterd and "
                     "--workers do not apply");
    if (o->url == NULL && o->pid != 0)
        return usage("--pid goes with --url (started daemons are measured anyway)");
    if (o->runs > 1 && o->workload != WL_DELIVER)
        return usage("--runs applies to the deliver workload");
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
    if (o->runs > o->threads)
        return usage("--runs is at most --threads (%u)", o->threads);
    return -1;
}

/* --- Redis, directly (graph emptiness, cleanup, memory, the ceiling) ------------------------ */

/* Connects to unix:///path or tcp://host:port; NULL with err set on failure. */
static redisContext *redis_open(const char *url, char *err, size_t errlen)
{
    struct timeval tv = {5, 0};
    redisContext *rc = NULL;
    if (strncmp(url, "unix://", 7) == 0) {
        rc = redisConnectUnixWithTimeout(url + 7, tv);
    } else {
        char host[256];
        const char *hp = url + 6;
        const char *colon = strrchr(hp, ':');
        unsigned long port = 0;
        if (colon == NULL || (size_t)(colon - hp) >= sizeof host ||
            parse_ulong(colon + 1, 1, 65535, &port) != 0) {
            snprintf(err, errlen, "cannot parse %s (use tcp://host:port)", url);
            return NULL;
        }
        memcpy(host, hp, (size_t)(colon - hp));
        host[colon - hp] = '\0';
        rc = redisConnectWithTimeout(host, (int)port, tv);
    }
    if (rc == NULL) {
        snprintf(err, errlen, "cannot reach Redis at %s: out of memory", url);
        return NULL;
    }
    if (rc->err) {
        snprintf(err, errlen, "cannot reach Redis at %s: %s", url, rc->errstr);
        redisFree(rc);
        return NULL;
    }
    if (redisSetTimeout(rc, (struct timeval){60, 0}) != REDIS_OK) {
        snprintf(err, errlen, "cannot set a timeout on the Redis connection");
        redisFree(rc);
        return NULL;
    }
    return rc;
}

/* One command; returns the reply (caller frees) or NULL with err set (also for an error
 * reply). */
static redisReply *redis_do(redisContext *rc, int argc, const char **argv, char *err, size_t errlen)
{
    size_t lens[8];
    for (int i = 0; i < argc && i < 8; i++)
        lens[i] = strlen(argv[i]);
    redisReply *r = redisCommandArgv(rc, argc, argv, lens);
    if (r == NULL) {
        snprintf(err, errlen, "%s: %s", argv[0], rc->errstr[0] ? rc->errstr : "no reply");
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%s: %s", argv[0], r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* A connection to the server holding graph: url itself, or on a cluster:// URL the master
 * of the graph's slot (asked of the first seed: CLUSTER KEYSLOT, CLUSTER SLOTS). NULL with err
 * set on failure. */
static redisContext *redis_open_graph(const char *url, const char *graph, char *err, size_t errlen)
{
    if (strncmp(url, "cluster://", 10) != 0)
        return redis_open(url, err, errlen);
    char seed[300];
    snprintf(seed, sizeof seed, "tcp://%.*s", (int)strcspn(url + 10, ","), url + 10);
    redisContext *rc = redis_open(seed, err, errlen);
    if (rc == NULL)
        return NULL;
    char key[128];
    snprintf(key, sizeof key, "charter:{%s}", graph);
    const char *ks[3] = {"CLUSTER", "KEYSLOT", key};
    redisReply *r = redis_do(rc, 3, ks, err, errlen);
    long long slot = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    const char *sl[2] = {"CLUSTER", "SLOTS"};
    r = slot >= 0 ? redis_do(rc, 2, sl, err, errlen) : NULL;
    char node[300] = "";
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3 && slot >= e->element[0]->integer &&
            slot <= e->element[1]->integer && e->element[2]->type == REDIS_REPLY_ARRAY &&
            e->element[2]->elements >= 2 && e->element[2]->element[0]->type == REDIS_REPLY_STRING)
            snprintf(node, sizeof node, "tcp://%s:%lld", e->element[2]->element[0]->str,
                     e->element[2]->element[1]->integer);
    }
    if (r)
        freeReplyObject(r);
    redisFree(rc);
    if (node[0] == '\0') {
        snprintf(err, errlen, "no master of graph %s's slot in %s", graph, url);
        return NULL;
    }
    return redis_open(node, err, errlen);
}

/* SCAN for the graph's keys; with del, deletes them. *found counts them. */
static int redis_graph_keys(redisContext *rc, const char *graph, bool del, bool stop_at_first,
                            unsigned long long *found, char *err, size_t errlen)
{
    char pattern[128];
    snprintf(pattern, sizeof pattern, "charter:{%s}*", graph);
    char cursor[32] = "0";
    *found = 0;
    do {
        const char *argv[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
        redisReply *r = redis_do(rc, 6, argv, err, errlen);
        if (r == NULL)
            return -1;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            snprintf(err, errlen, "SCAN: unexpected reply");
            return -1;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        redisReply *keys = r->element[1];
        *found += keys->elements;
        if (del && keys->elements > 0) {
            const char **dargv = malloc((keys->elements + 1) * sizeof *dargv);
            size_t *dlen = malloc((keys->elements + 1) * sizeof *dlen);
            if (dargv == NULL || dlen == NULL) {
                free(dargv);
                free(dlen);
                freeReplyObject(r);
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            dargv[0] = "DEL";
            dlen[0] = 3;
            for (size_t i = 0; i < keys->elements; i++) {
                dargv[i + 1] = keys->element[i]->str;
                dlen[i + 1] = keys->element[i]->len;
            }
            redisReply *d = redisCommandArgv(rc, (int)keys->elements + 1, dargv, dlen);
            free(dargv);
            free(dlen);
            if (d == NULL || d->type == REDIS_REPLY_ERROR) {
                snprintf(err, errlen, "DEL: %s",
                         d ? d->str : (rc->errstr[0] ? rc->errstr : "no reply"));
                if (d)
                    freeReplyObject(d);
                freeReplyObject(r);
                return -1;
            }
            freeReplyObject(d);
        }
        freeReplyObject(r);
        if (stop_at_first && *found > 0)
            break;
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

/* used_memory of INFO memory in bytes, or -1. */
static long long redis_used_memory(const char *url)
{
    char err[256];
    redisContext *rc = redis_open(url, err, sizeof err);
    if (rc == NULL)
        return -1;
    const char *argv[2] = {"INFO", "memory"};
    redisReply *r = redis_do(rc, 2, argv, err, sizeof err);
    long long v = -1;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        const char *p = strstr(r->str, "used_memory:");
        if (p != NULL)
            v = strtoll(p + strlen("used_memory:"), NULL, 10);
    }
    if (r != NULL)
        freeReplyObject(r);
    redisFree(rc);
    return v;
}

/* The value after "<field>=" in one cmdstat line, or 0. */
static unsigned long long cmdstat_field(const char *line, const char *field)
{
    const char *p = strstr(line, field);
    return p != NULL ? strtoull(p + strlen(field), NULL, 10) : 0;
}

/* INFO commandstats and used_memory, read at one instant on one connection. */
static void redis_stats(const char *url, bench_redis_stats *out)
{
    memset(out, 0, sizeof *out);
    out->used_memory = -1;
    char err[256];
    redisContext *rc = redis_open(url, err, sizeof err);
    if (rc == NULL)
        return;
    const char *argv[2] = {"INFO", "everything"};
    redisReply *r = redis_do(rc, 2, argv, err, sizeof err);
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        const char *p = strstr(r->str, "\nused_memory:");
        if (p != NULL)
            out->used_memory = strtoll(p + strlen("\nused_memory:"), NULL, 10);
        static const char *const names[2] = {"cmdstat_fcall:", "cmdstat_fcall_ro:"};
        for (int i = 0; i < 2; i++) {
            const char *l = strstr(r->str, names[i]);
            if (l == NULL)
                continue;
            const char *eol = strchr(l, '\n');
            char line[512];
            size_t n = eol != NULL ? (size_t)(eol - l) : strlen(l);
            snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), l);
            out->calls += cmdstat_field(line, "calls=");
            out->usec += cmdstat_field(line, "usec=");
        }
        out->ok = strstr(r->str, "# Commandstats") != NULL;
    }
    if (r != NULL)
        freeReplyObject(r);
    redisFree(rc);
}

/* utime + stime of pid in clock ticks (/proc/<pid>/stat fields 14 and 15), or -1. */
static long long read_cpu_ticks(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (p == NULL)
        return -1;
    unsigned long long ut = 0, st = 0;
    /* After ") ": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
     * utime(14) stime(15). */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (long long)(ut + st);
}

/* --- charterd processes ------------------------------------------------------------------- */

static bool executable(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

/* --charterd, else charterd next to this binary, else on PATH. */
static int find_charterd(bench *b)
{
    if (b->o.charterd != NULL) {
        if (!executable(b->o.charterd)) {
            say(b, "--charterd %s is not an executable file", b->o.charterd);
            return -1;
        }
        snprintf(b->charterd, sizeof b->charterd, "%s", b->o.charterd);
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL) {
            slash[1] = '\0';
            if (snprintf(b->charterd, sizeof b->charterd, "%scharterd", self) <
                    (int)sizeof b->charterd &&
                executable(b->charterd))
                return 0;
        }
    }
    const char *path = getenv("PATH");
    while (path != NULL && *path != '\0') {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && len < PATH_MAX - 16) {
            snprintf(b->charterd, sizeof b->charterd, "%.*s/charterd", (int)len, path);
            if (executable(b->charterd))
                return 0;
        }
        path = end ? end + 1 : NULL;
    }
    say(b, "cannot find charterd next to charter-bench or on PATH (pass --charterd PATH)");
    b->charterd[0] = '\0';
    return -1;
}

/* 48 hex characters from /dev/urandom. */
static int make_token(char *out, size_t outlen)
{
    unsigned char raw[24];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, raw, sizeof raw);
    close(fd);
    if (n != (ssize_t)sizeof raw || outlen < 2 * sizeof raw + 1)
        return -1;
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

static int daemon_start(bench *b, unsigned i)
{
    bench_daemon *d = &b->daemons[i];
    char listen[PATH_MAX + 16], workers[16];
    snprintf(d->url, sizeof d->url, "ipc://%.3000s/d%u.sock", b->tmpdir, i);
    snprintf(listen, sizeof listen, "%s", d->url);
    snprintf(d->log, sizeof d->log, "%.3000s/d%u.log", b->tmpdir, i);
    snprintf(workers, sizeof workers, "%u", b->server_workers);
    int logfd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0) {
        say(b, "cannot create %s: %s", d->log, strerror(errno));
        return -1;
    }
    char *argv[] = {b->charterd,
                    "--redis",
                    (char *)b->o.redis_url,
                    "--graph",
                    b->graphs[b->o.tenants > 1 ? i : 0],
                    "--listen",
                    listen,
                    "--workers",
                    workers,
                    "--quiet",
                    NULL};
    pid_t pid = fork();
    if (pid < 0) {
        say(b, "cannot fork: %s", strerror(errno));
        close(logfd);
        return -1;
    }
    if (pid == 0) {
        /* The child: stop with the bench if it dies; logs go to the daemon's file. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        setpgid(0, 0); /* a Ctrl-C meant for the bench must not stop charterd mid-run */
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0 && dup2(devnull, STDIN_FILENO) >= 0 && devnull != STDIN_FILENO)
            close(devnull);
        dup2(logfd, STDOUT_FILENO);
        dup2(logfd, STDERR_FILENO);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execv(b->charterd, argv);
        dprintf(STDERR_FILENO, "charter-bench: cannot run %s: %s\n", b->charterd, strerror(errno));
        _exit(127);
    }
    close(logfd);
    d->pid = pid;
    d->running = true;
    return 0;
}

/* The first line of a daemon's log (why it did not start). */
static void daemon_log_head(const bench_daemon *d, char *out, size_t outlen)
{
    out[0] = '\0';
    FILE *f = fopen(d->log, "r");
    if (f == NULL)
        return;
    if (fgets(out, (int)outlen, f) != NULL)
        out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

/* Waits until Health answers on daemon i, or it exits, or the startup time passes. */
static int daemon_wait_ready(bench *b, unsigned i)
{
    bench_daemon *d = &b->daemons[i];
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = 250;
    charter_client *c = NULL;
    if (charter_client_open(d->url, NULL, &o, &c) != 0) {
        say(b, "cannot open a client of %s", d->url);
        return -1;
    }
    double until = now_ms() + BENCH_STARTUP_MS;
    int rc = -1;
    while (now_ms() < until && !bench_interrupted) {
        int status = 0;
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            d->running = false;
            d->status = status;
            char head[400];
            daemon_log_head(d, head, sizeof head);
            say(b, "charterd %u exited during startup: %s", i, head[0] ? head : "(no output)");
            break;
        }
        Charter__V1__HealthResponse *h = NULL;
        charter_status st;
        if (charter_health(c, NULL, &h, &st) == 0) {
            bool serving = h->status != NULL && strcmp(h->status, "serving") == 0;
            if (i == 0 && h->workers > 0)
                b->server_workers = h->workers;
            charter__v1__health_response__free_unpacked(h, NULL);
            if (serving) {
                rc = 0;
                break;
            }
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (rc != 0 && d->running)
        say(b, "charterd %u did not answer Health within %.0f s (log: %s)", i,
            BENCH_STARTUP_MS / 1000, d->log);
    charter_client_close(c);
    return rc;
}

/* VmHWM and VmRSS of pid in KiB (-1 when unreadable). */
static void read_rss(long pid, long *hwm, long *rss)
{
    char path[64], line[256];
    *hwm = -1;
    *rss = -1;
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0)
            *hwm = strtol(line + 6, NULL, 10);
        else if (strncmp(line, "VmRSS:", 6) == 0)
            *rss = strtol(line + 6, NULL, 10);
    }
    fclose(f);
}

/* SIGTERM, then wait (SIGKILL after BENCH_STOP_MS). */
static void daemon_stop(bench *b, unsigned i)
{
    bench_daemon *d = &b->daemons[i];
    if (!d->running)
        return;
    kill(d->pid, SIGTERM);
    double until = now_ms() + BENCH_STOP_MS;
    for (;;) {
        int status = 0;
        pid_t r = waitpid(d->pid, &status, WNOHANG);
        if (r == d->pid || (r < 0 && errno == ECHILD)) {
            d->status = status;
            break;
        }
        if (now_ms() > until) {
            say(b, "charterd %u did not stop within %.0f s of SIGTERM; killing it", i,
                BENCH_STOP_MS / 1000);
            kill(d->pid, SIGKILL);
            waitpid(d->pid, &status, 0);
            d->status = status;
            d->killed = true;
            break;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    d->running = false;
}

/* The message of a log line with every run of digits as one '#', so lines that differ only in
 * counts, ids or timings fall together. */
static void log_shape(const char *msg, char *out, size_t outlen)
{
    size_t n = 0;
    for (const char *p = msg; *p != '\0' && n + 1 < outlen; p++) {
        if (*p >= '0' && *p <= '9') {
            if (n == 0 || out[n - 1] != '#')
                out[n++] = '#';
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

/* Counts the lines every daemon logged (errors only: they run --quiet) and groups them by
 * message, without time stamps; the first line of each group is kept as its example. */
static void collect_logs(bench *b)
{
    char shapes[sizeof b->log_kinds / sizeof b->log_kinds[0]][300];
    for (unsigned i = 0; i < b->n_daemons; i++) {
        FILE *f = fopen(b->daemons[i].log, "r");
        if (f == NULL)
            continue;
        char line[1200], shape[300];
        while (fgets(line, sizeof line, f) != NULL) {
            line[strcspn(line, "\n")] = '\0';
            b->log_total++;
            const char *msg = strstr(line, "charterd: ");
            msg = msg ? msg + strlen("charterd: ") : line;
            log_shape(msg, shape, sizeof shape);
            size_t k = 0;
            while (k < b->n_log_kinds && strcmp(shapes[k], shape) != 0)
                k++;
            if (k < b->n_log_kinds) {
                b->log_kinds[k].count++;
            } else if (k < sizeof b->log_kinds / sizeof b->log_kinds[0]) {
                snprintf(shapes[k], sizeof shapes[k], "%s", shape);
                snprintf(b->log_kinds[k].text, sizeof b->log_kinds[k].text, "d%u %.180s", i, msg);
                b->log_kinds[k].count = 1;
                b->n_log_kinds++;
            } else {
                b->log_other++;
            }
        }
        fclose(f);
    }
}

static void remove_tmpdir(bench *b)
{
    if (b->tmpdir[0] == '\0')
        return;
    for (unsigned i = 0; i < b->n_daemons; i++) {
        unlink(b->daemons[i].log);
        unlink(b->daemons[i].url + strlen("ipc://"));
    }
    if (rmdir(b->tmpdir) != 0)
        say(b, "could not remove %s: %s", b->tmpdir, strerror(errno));
}

/* --- the API calls of the setup ------------------------------------------------------------ */

static const char *outcome_name(int outcome)
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
static void decision_text(const Charter__V1__Decision *d, char *out, size_t outlen)
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
static int setup_runs(bench *b)
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

/* check-input: depth outputs in a chain, the first derived from the source. */
static int build_lineage(bench *b)
{
    double t0 = now_ms();
    char prev[160];
    snprintf(prev, sizeof prev, "%s", b->source_id);
    for (unsigned k = 1; k <= b->o.depth && !bench_interrupted; k++) {
        char title[64], content[96];
        snprintf(title, sizeof title, "Lineage step %u", k);
        snprintf(content, sizeof content, "Summary %u of the Northwind quote, from step %u.", k,
                 k - 1);
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
            say(b, "lineage: RecordOutput at depth %u failed: %s: %s", k, charter_status_name(rv),
                st.message);
            return -1;
        }
        if (!allowed(out->decision) || out->artifact == NULL) {
            char text[300];
            decision_text(out->decision, text, sizeof text);
            say(b, "lineage: RecordOutput at depth %u was not allowed: %s", k, text);
            charter__v1__record_output_response__free_unpacked(out, NULL);
            return -1;
        }
        snprintf(prev, sizeof prev, "%s", out->artifact->id);
        charter__v1__record_output_response__free_unpacked(out, NULL);
        if (!b->o.json && (k % 250 == 0 || k == b->o.depth))
            say(b, "lineage: depth %u of %u recorded (%.1f s)", k, b->o.depth,
                (now_ms() - t0) / 1000);
    }
    if (bench_interrupted)
        return -1;
    snprintf(b->deepest_id, sizeof b->deepest_id, "%s", prev);
    b->lineage_ms = now_ms() - t0;
    return 0;
}

/* --- the workload ------------------------------------------------------------------------- */

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

static void invocation_id(const bench *b, unsigned thread, size_t index, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s-%u-%zu", b->tag, thread, index);
}

static void round_invocation_id(const bench *b, size_t round, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s-same-%zu", b->tag, round);
}

/* One operation of the workload into s. */
static void operate(bench_worker *w, bench_sample *s, const char *inv)
{
    bench *b = w->b;
    charter_status st;
    int rv = 0;
    const Charter__V1__Decision *decision = NULL;
    ProtobufCMessage *resp = NULL;
    double t0 = now_ms();
    switch (b->o.workload) {
    case WL_DELIVER:
    case WL_DELIVER_SAME: {
        Charter__V1__DeliverRequest req = CHARTER__V1__DELIVER_REQUEST__INIT;
        const bench_run *run = &b->runs[w->index % b->o.runs];
        req.context_id = (char *)run->context_id;
        req.payload_id = (char *)run->payload_id;
        req.recipient = "cfo";
        req.tool = "deliver_internal";
        req.invocation_id = (char *)inv;
        Charter__V1__DeliverResponse *r = NULL;
        rv = charter_deliver(w->client, &req, &r, &st);
        if (rv == 0) {
            decision = r->decision;
            s->acknowledged = r->acknowledged;
            resp = &r->base;
        }
        break;
    }
    case WL_CHECK_INPUT: {
        Charter__V1__CheckInputRequest req = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
        char *ids[1] = {b->deepest_id};
        req.context_id = b->context_id;
        req.artifact_ids = ids;
        req.n_artifact_ids = 1;
        Charter__V1__CheckInputResponse *r = NULL;
        rv = charter_check_input(w->client, &req, &r, &st);
        if (rv == 0) {
            decision = r->decision;
            s->event_seq = r->event_seq;
            resp = &r->base;
        }
        break;
    }
    case WL_HEALTH: {
        Charter__V1__HealthResponse *r = NULL;
        rv = charter_health(w->client, NULL, &r, &st);
        if (rv == 0)
            resp = &r->base;
        break;
    }
    }
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
    if (decision != NULL) {
        s->outcome = (uint8_t)decision->outcome;
        if (decision->outcome != CHARTER__V1__OUTCOME__ALLOW) {
            char text[200];
            decision_text(decision, text, sizeof text);
            kind_count(w, text);
        }
    } else if (b->o.workload != WL_HEALTH) {
        s->outcome = CHARTER__V1__OUTCOME__OUTCOME_UNSPECIFIED;
        kind_count(w, "no decision in the answer");
    }
    protobuf_c_message_free_unpacked(resp, NULL);
}

static void *worker_main(void *arg)
{
    bench_worker *w = arg;
    bench *b = w->b;
    pthread_mutex_lock(&b->gate_mu);
    while (b->go == 0)
        pthread_cond_wait(&b->gate_cv, &b->gate_mu);
    int go = b->go;
    pthread_mutex_unlock(&b->gate_mu);
    if (go < 0)
        return NULL;
    if (b->o.workload == WL_DELIVER_SAME) {
        for (size_t r = 0; r < b->o.rounds; r++) {
            /* Two barriers: the first lets one thread decide for everyone whether to stop,
             * the second releases every thread onto the same invocation at once. */
            if (pthread_barrier_wait(&b->round_a) == PTHREAD_BARRIER_SERIAL_THREAD)
                b->halt_rounds = bench_interrupted != 0;
            pthread_barrier_wait(&b->round_b);
            if (b->halt_rounds)
                break;
            char inv[128];
            round_invocation_id(b, r, inv, sizeof inv);
            bench_sample *s = sample_next(w);
            if (s == NULL) {
                bench_sample dummy;
                operate(w, &dummy, inv); /* keep the round's shape; the sample is lost */
                continue;
            }
            operate(w, s, inv);
        }
        return NULL;
    }
    for (;;) {
        if (bench_interrupted)
            break;
        if (b->o.count > 0) {
            if (atomic_fetch_add(&b->issued, 1) >= b->o.count)
                break;
        } else if (now_ms() >= b->deadline_ms) {
            break;
        }
        char inv[128];
        invocation_id(b, w->index, w->n, inv, sizeof inv);
        bench_sample *s = sample_next(w);
        if (s == NULL)
            break;
        operate(w, s, inv);
    }
    return NULL;
}

static void open_gate(bench *b, int go)
{
    pthread_mutex_lock(&b->gate_mu);
    b->go = go;
    pthread_cond_broadcast(&b->gate_cv);
    pthread_mutex_unlock(&b->gate_mu);
}

/* Starts every thread at the gate, opens it, and waits for all of them. */
static int run_workload(bench *b)
{
    unsigned n = b->o.threads;
    b->workers = calloc(n, sizeof *b->workers);
    if (b->workers == NULL) {
        say(b, "out of memory");
        return -1;
    }
    if (pthread_mutex_init(&b->gate_mu, NULL) != 0 || pthread_cond_init(&b->gate_cv, NULL) != 0 ||
        pthread_barrier_init(&b->round_a, NULL, n) != 0 ||
        pthread_barrier_init(&b->round_b, NULL, n) != 0) {
        say(b, "cannot create the thread gate");
        return -1;
    }
    b->barriers = true;
    unsigned started = 0;
    for (; started < n; started++) {
        bench_worker *w = &b->workers[started];
        w->b = b;
        w->index = started;
        w->client = b->clients[started % b->n_clients];
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            break;
        w->started = true;
    }
    if (started < n) {
        say(b, "cannot start thread %u of %u (lower --threads)", started + 1, n);
        open_gate(b, -1);
        for (unsigned i = 0; i < started; i++)
            pthread_join(b->workers[i].thread, NULL);
        return -1;
    }
    b->t0_ms = now_ms();
    b->deadline_ms = b->t0_ms + b->o.duration_s * 1000.0;
    open_gate(b, 1);
    for (unsigned i = 0; i < n; i++)
        pthread_join(b->workers[i].thread, NULL);
    b->elapsed_ms = now_ms() - b->t0_ms;
    for (unsigned i = 0; i < n; i++)
        if (b->workers[i].oom)
            say(b, "thread %u ran out of memory for samples and stopped early", i);
    return 0;
}

/* --- figures ------------------------------------------------------------------------------ */

typedef struct {
    size_t total, ok, errors;
    unsigned long by_code[17];
    unsigned long other_code;
    char first_error[17][200];
    unsigned long allow_new, acknowledged, deny, unknown, unspecified;
    double p50, p95, p99, max, mean;
    bench_kind kinds[64];
    size_t n_kinds;
    unsigned long other_kinds;
} bench_figures;

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

static void figures_kind(bench_figures *f, const char *text, unsigned long count)
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

static int figures_compute(const bench *b, bench_figures *f)
{
    memset(f, 0, sizeof *f);
    size_t total = 0;
    for (unsigned t = 0; t < b->o.threads; t++)
        total += b->workers[t].n;
    double *lat = malloc((total ? total : 1) * sizeof *lat);
    if (lat == NULL)
        return -1;
    double sum = 0;
    for (unsigned t = 0; t < b->o.threads; t++) {
        const bench_worker *w = &b->workers[t];
        for (size_t i = 0; i < w->n; i++) {
            const bench_sample *s = &w->samples[i];
            f->total++;
            if (s->code != 0) {
                f->errors++;
                if (s->code > 0 && s->code <= 16)
                    f->by_code[s->code]++;
                else
                    f->other_code++;
                continue;
            }
            f->ok++;
            lat[f->ok - 1] = s->ms;
            sum += s->ms;
            if (b->o.workload == WL_HEALTH)
                continue;
            switch (s->outcome) {
            case CHARTER__V1__OUTCOME__ALLOW:
                if (s->acknowledged)
                    f->acknowledged++;
                else
                    f->allow_new++;
                break;
            case CHARTER__V1__OUTCOME__DENY:
                f->deny++;
                break;
            case CHARTER__V1__OUTCOME__UNKNOWN:
                f->unknown++;
                break;
            default:
                f->unspecified++;
            }
        }
        for (int c = 1; c <= 16; c++)
            if (f->first_error[c][0] == '\0' && w->first_error[c][0] != '\0')
                snprintf(f->first_error[c], sizeof f->first_error[c], "%s", w->first_error[c]);
        for (size_t k = 0; k < w->n_kinds; k++)
            figures_kind(f, w->kinds[k].text, w->kinds[k].count);
        f->other_kinds += w->other_kinds;
    }
    qsort(lat, f->ok, sizeof *lat, by_value);
    f->p50 = percentile(lat, f->ok, 50);
    f->p95 = percentile(lat, f->ok, 95);
    f->p99 = percentile(lat, f->ok, 99);
    f->max = f->ok ? lat[f->ok - 1] : 0;
    f->mean = f->ok ? sum / (double)f->ok : 0;
    free(lat);
    return 0;
}

/* --- invariants --------------------------------------------------------------------------- */

/* The run's committed deliveries through GetRun. *ids is an array of n strings (free each and
 * the array). */
static int run_deliveries(bench *b, charter_client *admin, const char *run_id, char ***ids,
                          size_t *n)
{
    *ids = NULL;
    *n = 0;
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)run_id;
    req.limit = 1; /* deliveries always come whole; events are not needed */
    Charter__V1__RunView *v = NULL;
    charter_status st;
    /* Calls abandoned by the load may still occupy the server: retry while it is busy. */
    double until = now_ms() + BENCH_VERIFY_TIMEOUT_MS;
    unsigned retries = 0;
    long pause_ms = 100;
    int rv;
    while ((rv = charter_get_run(admin, &req, &v, &st)) != 0 && !bench_interrupted &&
           (rv == -CHARTER_RESOURCE_EXHAUSTED || rv == -CHARTER_UNAVAILABLE ||
            rv == -CHARTER_DEADLINE_EXCEEDED) &&
           now_ms() + (double)pause_ms < until) {
        struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        retries++;
        pause_ms = pause_ms < 2000 ? pause_ms * 2 : 2000;
    }
    if (rv != 0) {
        check_add(b, false, "GetRun answers with the run's deliveries", "%s: %s (after %u retries)",
                  charter_status_name(rv), st.message, retries);
        return -1;
    }
    if (retries > 0)
        say(b, "GetRun answered after %u retries (the server was still busy after the load)",
            retries);
    char **out = calloc(v->n_deliveries ? v->n_deliveries : 1, sizeof *out);
    if (out == NULL) {
        charter__v1__run_view__free_unpacked(v, NULL);
        return -1;
    }
    for (size_t i = 0; i < v->n_deliveries; i++) {
        const char *inv = v->deliveries[i]->invocation_id;
        if ((out[i] = strdup(inv ? inv : "")) == NULL) {
            for (size_t k = 0; k < i; k++)
                free(out[k]);
            free(out);
            charter__v1__run_view__free_unpacked(v, NULL);
            return -1;
        }
    }
    *n = v->n_deliveries;
    *ids = out;
    charter__v1__run_view__free_unpacked(v, NULL);
    return 0;
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

static void free_ids(char **ids, size_t n);

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

static void verify_deliver(bench *b)
{
    char **ids = NULL;
    size_t n = 0;
    unsigned *run_of = NULL;
    if (all_deliveries(b, &ids, &n, &run_of) != 0)
        return;
    /* seen[t][i]: how often invocation (t, i) is among the committed deliveries. */
    uint8_t **seen = calloc(b->o.threads, sizeof *seen);
    bool oom = seen == NULL;
    for (unsigned t = 0; !oom && t < b->o.threads; t++) {
        seen[t] = calloc(b->workers[t].n ? b->workers[t].n : 1, 1);
        oom = seen[t] == NULL;
    }
    size_t foreign = 0, dup = 0;
    char first_foreign[160] = "", first_dup[160] = "";
    for (size_t i = 0; !oom && i < n; i++) {
        unsigned long t = 0, k = 0;
        if (!parse_invocation(b, ids[i], &t, &k) || t >= b->o.threads || k >= b->workers[t].n ||
            t % b->o.runs != run_of[i]) {
            if (foreign++ == 0)
                snprintf(first_foreign, sizeof first_foreign, "%s", ids[i]);
            continue;
        }
        if (seen[t][k]++ > 0 && dup++ == 0)
            snprintf(first_dup, sizeof first_dup, "%s", ids[i]);
    }
    size_t allow_new = 0, allow_missing = 0, landed_error = 0, landed_refused = 0;
    char first_missing[160] = "", first_refused[200] = "";
    for (unsigned t = 0; !oom && t < b->o.threads; t++) {
        for (size_t k = 0; k < b->workers[t].n; k++) {
            const bench_sample *s = &b->workers[t].samples[k];
            bool ok_new =
                s->code == 0 && s->outcome == CHARTER__V1__OUTCOME__ALLOW && !s->acknowledged;
            if (ok_new) {
                allow_new++;
                if (seen[t][k] == 0 && allow_missing++ == 0)
                    invocation_id(b, t, k, first_missing, sizeof first_missing);
            } else if (seen[t][k] > 0 && s->code != 0 && s->local) {
                landed_error++; /* the client gave up; the effect was unknown to it */
            } else if (seen[t][k] > 0 && s->code != 0) {
                if (landed_refused++ == 0) {
                    char inv[128];
                    invocation_id(b, t, k, inv, sizeof inv);
                    snprintf(first_refused, sizeof first_refused, "%s answered RPC error %s", inv,
                             charter_status_name(s->code));
                }
            } else if (seen[t][k] > 0) {
                if (landed_refused++ == 0) {
                    char inv[128];
                    invocation_id(b, t, k, inv, sizeof inv);
                    snprintf(first_refused, sizeof first_refused, "%s answered %s%s", inv,
                             outcome_name(s->outcome), s->acknowledged ? " acknowledged" : "");
                }
            }
        }
    }
    if (oom) {
        check_add(b, false, "deliveries verified", "out of memory");
    } else {
        bool eq = n == allow_new + landed_error && allow_missing == 0 && landed_refused == 0 &&
                  foreign == 0;
        check_add(b, eq, "committed deliveries = ALLOW answers not acknowledged",
                  "%zu committed in %u run%s from %s; %zu ALLOW answers not acknowledged, "
                  "%zu of them missing%s%s; %zu calls the client gave up on (timeout, lost "
                  "connection) whose commit landed; %zu committed though answered "
                  "otherwise%s%s; %zu foreign or in another thread's run%s%s",
                  n, b->o.runs, b->o.runs == 1 ? "" : "s", b->run_id, allow_new, allow_missing,
                  allow_missing ? ", first " : "", first_missing, landed_error, landed_refused,
                  landed_refused ? ", first " : "", first_refused, foreign,
                  foreign ? ", first " : "", first_foreign);
        check_add(b, dup == 0, "every invocation appears once", "%zu duplicated%s%s", dup,
                  dup ? ", first " : "", first_dup);
    }
    for (unsigned t = 0; seen != NULL && t < b->o.threads; t++)
        free(seen[t]);
    free(seen);
    free_ids(ids, n);
    free(run_of);
}

static void verify_deliver_same(bench *b)
{
    size_t rounds = 0;
    for (unsigned t = 0; t < b->o.threads; t++)
        if (b->workers[t].n > rounds)
            rounds = b->workers[t].n;
    /* Per round: new ALLOW answers, acknowledged answers, others, RPC errors. */
    unsigned *fresh = calloc(rounds ? rounds : 1, sizeof *fresh);
    unsigned *errs = calloc(rounds ? rounds : 1, sizeof *errs);
    unsigned *count = calloc(rounds ? rounds : 1, sizeof *count);
    char **ids = NULL;
    size_t n = 0;
    if (fresh == NULL || errs == NULL || count == NULL) {
        check_add(b, false, "deliver-same verified", "out of memory");
        goto out;
    }
    size_t other = 0;
    for (unsigned t = 0; t < b->o.threads; t++)
        for (size_t r = 0; r < b->workers[t].n; r++) {
            const bench_sample *s = &b->workers[t].samples[r];
            if (s->code != 0)
                errs[r]++;
            else if (s->outcome == CHARTER__V1__OUTCOME__ALLOW && !s->acknowledged)
                fresh[r]++;
            else if (s->outcome != CHARTER__V1__OUTCOME__ALLOW)
                other++;
        }
    size_t bad_answers = 0;
    char first_bad[200] = "";
    for (size_t r = 0; r < rounds; r++) {
        bool ok = fresh[r] == 1 || (fresh[r] == 0 && errs[r] > 0);
        if (!ok && bad_answers++ == 0)
            snprintf(first_bad, sizeof first_bad, "round %zu: %u new ALLOW answers, %u errors", r,
                     fresh[r], errs[r]);
    }
    check_add(b, bad_answers == 0 && other == 0, "each round: one new ALLOW, the rest acknowledged",
              "%zu rounds; %zu rounds otherwise%s%s; %zu answers not ALLOW", rounds, bad_answers,
              bad_answers ? ", first " : "", first_bad, other);

    if (run_deliveries(b, b->admin, b->run_id, &ids, &n) != 0)
        goto out;
    size_t foreign = 0;
    char first_foreign[160] = "";
    for (size_t i = 0; i < n; i++) {
        char prefix[96];
        snprintf(prefix, sizeof prefix, "%s-same-", b->tag);
        char *end = NULL;
        size_t pl = strlen(prefix);
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
    size_t bad = 0;
    char first[160] = "";
    for (size_t r = 0; r < rounds; r++)
        if (count[r] != 1 && bad++ == 0)
            snprintf(first, sizeof first, "round %zu has %u deliveries", r, count[r]);
    check_add(b, bad == 0 && foreign == 0 && n == rounds, "exactly one delivery per round",
              "%zu committed in run %s for %zu rounds; %zu rounds otherwise%s%s; %zu foreign%s%s",
              n, b->run_id, rounds, bad, bad ? ", first " : "", first, foreign,
              foreign ? ", first " : "", first_foreign);
out:
    free(fresh);
    free(errs);
    free(count);
    free_ids(ids, n);
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

/* --- the ceiling: a trivial FCALL through redis-benchmark ---------------------------------- */

static const char noop_library[] =
    "#!lua name=benchnoop\n"
    "redis.register_function{function_name='bench_noop', callback=function() return 1 end, "
    "flags={'no-writes'}}";

/* Runs redis-benchmark and returns its "requests per second" figure, or -1. */
static double run_redis_benchmark(bench *b, char *note, size_t notelen)
{
    char clients[16], port[16] = "", host[256] = "";
    snprintf(clients, sizeof clients, "%u", b->o.threads);
    const char *argv[16];
    int argc = 0;
    argv[argc++] = "redis-benchmark";
    if (strncmp(b->o.redis_url, "unix://", 7) == 0) {
        argv[argc++] = "-s";
        argv[argc++] = b->o.redis_url + 7;
    } else {
        const char *hp = b->o.redis_url + 6;
        const char *colon = strrchr(hp, ':');
        if (colon == NULL || (size_t)(colon - hp) >= sizeof host) {
            snprintf(note, notelen, "cannot parse %s", b->o.redis_url);
            return -1;
        }
        memcpy(host, hp, (size_t)(colon - hp));
        host[colon - hp] = '\0';
        snprintf(port, sizeof port, "%s", colon + 1);
        argv[argc++] = "-h";
        argv[argc++] = host;
        argv[argc++] = "-p";
        argv[argc++] = port;
    }
    argv[argc++] = "-c";
    argv[argc++] = clients;
    argv[argc++] = "-n";
    argv[argc++] = BENCH_CEILING_REQUESTS;
    argv[argc++] = "-q";
    argv[argc++] = "FCALL";
    argv[argc++] = "bench_noop";
    argv[argc++] = "0";
    argv[argc] = NULL;

    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(note, notelen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        snprintf(note, notelen, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execvp(argv[0], (char *const *)argv);
        dprintf(STDOUT_FILENO, "cannot run redis-benchmark: %s\n", strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    size_t cap = 65536, len = 0;
    char *out = malloc(cap);
    ssize_t r;
    char chunk[4096];
    while ((r = read(fds[0], chunk, sizeof chunk)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (out != NULL && len + (size_t)r + 1 > cap) {
            char *grown = realloc(out, cap * 2 + (size_t)r);
            if (grown == NULL) {
                free(out);
                out = NULL;
            } else {
                out = grown;
                cap = cap * 2 + (size_t)r;
            }
        }
        if (out != NULL) {
            memcpy(out + len, chunk, (size_t)r);
            len += (size_t)r;
        }
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (out == NULL) {
        snprintf(note, notelen, "out of memory reading redis-benchmark");
        return -1;
    }
    out[len] = '\0';
    /* -q prints progress lines ended by \r, then "FCALL bench_noop 0: N requests per second". */
    double rps = -1;
    char *hit = NULL, *p = out;
    while ((p = strstr(p, "requests per second")) != NULL)
        hit = p++;
    if (hit != NULL) {
        char *q = hit;
        while (q > out && q[-1] == ' ')
            q--;
        while (q > out && ((q[-1] >= '0' && q[-1] <= '9') || q[-1] == '.'))
            q--;
        rps = strtod(q, NULL);
    }
    if (rps <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char *last = strrchr(out, '\n');
        snprintf(note, notelen, "redis-benchmark gave no figure (exit %d): %.200s",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, last && last[1] ? last + 1 : out);
        rps = -1;
    } else {
        snprintf(note, notelen, "redis-benchmark -c %s -n %s -q FCALL bench_noop 0", clients,
                 BENCH_CEILING_REQUESTS);
    }
    free(out);
    return rps;
}

static void measure_ceiling(bench *b)
{
    char err[300];
    redisContext *rc = redis_open(b->o.redis_url, err, sizeof err);
    if (rc == NULL) {
        snprintf(b->ceiling_note, sizeof b->ceiling_note, "%s", err);
        return;
    }
    const char *load[4] = {"FUNCTION", "LOAD", "REPLACE", noop_library};
    redisReply *r = redis_do(rc, 4, load, err, sizeof err);
    if (r == NULL) {
        snprintf(b->ceiling_note, sizeof b->ceiling_note, "FUNCTION LOAD failed: %.250s", err);
        redisFree(rc);
        return;
    }
    freeReplyObject(r);
    double rps = run_redis_benchmark(b, b->ceiling_note, sizeof b->ceiling_note);
    if (rps > 0)
        b->fcall_per_s = rps;
    const char *del[3] = {"FUNCTION", "DELETE", "benchnoop"};
    r = redis_do(rc, 3, del, err, sizeof err);
    if (r == NULL)
        say(b, "FUNCTION DELETE benchnoop failed: %s", err);
    else
        freeReplyObject(r);
    redisFree(rc);
}

/* --- the report --------------------------------------------------------------------------- */

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

static double rate_of(const bench *b, size_t n)
{
    return b->elapsed_ms > 0 ? (double)n * 1000.0 / b->elapsed_ms : 0;
}

static bool is_deliver(const bench *b)
{
    return b->o.workload == WL_DELIVER || b->o.workload == WL_DELIVER_SAME;
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

static void mem_json(const bench *b, const char *name, size_t field)
{
    long max = 0, sum = 0;
    mem_totals(b, field, &max, &sum);
    printf(",\"%s\":{\"max\":%ld,\"sum\":%ld,\"per_process\":[", name, max, sum);
    for (unsigned i = 0; i < b->n_mem; i++)
        printf("%s%ld", i ? "," : "", *(const long *)((const char *)&b->mem[i] + field));
    printf("]}");
}

static void report_text(const bench *b, const bench_figures *f)
{
    printf("workload      %s, %u thread%s, ", workload_names[b->o.workload], b->o.threads,
           b->o.threads == 1 ? "" : "s");
    if (b->o.url != NULL)
        printf("charterd at %s (graph %s, %u workers)\n", b->o.url, b->graph, b->server_workers);
    else
        printf("%u charterd (%u workers each) on %s, graph %s%s\n", b->n_daemons, b->server_workers,
               b->o.redis_url, b->graph, b->o.tenants > 1 ? "_t<i>, one charterd per tenant" : "");
    if (b->o.workload != WL_HEALTH)
        printf("setup         run %s, context %s, source %s, payload %s: %.1f ms\n", b->run_id,
               b->context_id, b->source_id, b->payload_id, b->setup_ms);
    if (b->o.workload == WL_CHECK_INPUT)
        printf("lineage       depth %u recorded in %.3f s (deepest artifact %s)\n", b->o.depth,
               b->lineage_ms / 1000, b->deepest_id);
    if (b->o.workload == WL_DELIVER_SAME)
        printf("rounds        %u of %u threads on one invocation ID each\n", b->o.rounds,
               b->o.threads);
    printf("operations    %zu in %.3f s: %zu answered, %zu RPC errors\n", f->total,
           b->elapsed_ms / 1000, f->ok, f->errors);
    printf("throughput    %.1f ops/s (answered)\n", rate_of(b, f->ok));
    printf("latency ms    p50 %.3f  p95 %.3f  p99 %.3f  max %.3f  (mean %.3f; %zu answered "
           "calls)\n",
           f->p50, f->p95, f->p99, f->max, f->mean, f->ok);
    if (b->o.workload != WL_HEALTH) {
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
    } else {
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
    if (b->n_mem > 0) {
        printf("charterd RSS  %u process%s (KiB figures from /proc/<pid>/status, in MiB)\n",
               b->n_mem, b->n_mem == 1 ? "" : "es");
        mem_line(b, "peak VmHWM after the load", offsetof(bench_mem, hwm_load));
        mem_line(b, "VmRSS after the load", offsetof(bench_mem, rss_load));
        mem_line(b, "peak VmHWM after checks", offsetof(bench_mem, hwm_end));
    } else {
        printf("charterd RSS  not measured%s\n", b->o.url ? " (pass --pid)" : "");
    }
    if (b->redis_mem_before >= 0 && b->redis_mem_after >= 0)
        printf("redis memory  used_memory %.1f MiB before the load, %.1f MiB after\n",
               b->redis_mem_before / 1048576.0, b->redis_mem_after / 1048576.0);
    if (f->ok > 0 && b->rs_before.ok && b->rs_after.ok) {
        double ops = (double)f->ok;
        printf("redis/op      %.1f us in FCALLs, %.2f database calls, %.0f bytes of used_memory "
               "(INFO deltas over the load: %llu calls, %llu us)\n",
               (double)(b->rs_after.usec - b->rs_before.usec) / ops,
               (double)(b->rs_after.calls - b->rs_before.calls) / ops,
               (double)(b->rs_after.used_memory - b->rs_before.used_memory) / ops,
               b->rs_after.calls - b->rs_before.calls, b->rs_after.usec - b->rs_before.usec);
    }
    if (f->ok > 0 && b->cpu_before >= 0 && b->cpu_after >= 0) {
        long hz = sysconf(_SC_CLK_TCK);
        printf("charterd/op   %.1f us of CPU (utime + stime of /proc/<pid>/stat over the load)\n",
               (double)(b->cpu_after - b->cpu_before) * 1e6 / (double)(hz > 0 ? hz : 100) /
                   (double)f->ok);
    }
    if (b->fcall_per_s > 0) {
        printf("ceiling       trivial FCALL %.0f/s (%s)\n", b->fcall_per_s, b->ceiling_note);
        if (is_deliver(b))
            printf("ratio         Deliver/s / trivial FCALL/s = %.4f (%.1f FCALL-equivalents per "
                   "Deliver)\n",
                   rate_of(b, f->ok) / b->fcall_per_s,
                   rate_of(b, f->ok) > 0 ? b->fcall_per_s / rate_of(b, f->ok) : 0.0);
    } else if (b->ceiling_note[0] != '\0') {
        printf("ceiling       not measured: %s\n", b->ceiling_note);
    }
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

static void report_json(const bench *b, const bench_figures *f)
{
    FILE *o = stdout;
    fprintf(o, "{\"workload\":\"%s\",\"threads\":%u,", workload_names[b->o.workload], b->o.threads);
    fprintf(o, "\"daemons\":%u,\"workers\":%u,\"graph\":", b->o.url ? 0 : b->n_daemons,
            b->server_workers);
    json_string(o, b->graph);
    fprintf(o, ",\"url\":");
    json_string(o, b->o.url ? b->o.url : "");
    fprintf(o, ",\"redis\":");
    json_string(o, b->o.redis_url ? b->o.redis_url : "");
    fprintf(o, ",\"run_id\":");
    json_string(o, b->run_id);
    fprintf(o, ",\"setup_ms\":%.3f", b->setup_ms);
    if (b->o.workload == WL_CHECK_INPUT)
        fprintf(o, ",\"depth\":%u,\"lineage_setup_ms\":%.3f", b->o.depth, b->lineage_ms);
    if (b->o.workload == WL_DELIVER_SAME)
        fprintf(o, ",\"rounds\":%u", b->o.rounds);
    fprintf(o,
            ",\"operations\":%zu,\"answered\":%zu,\"errors\":%zu,\"elapsed_s\":%.6f,"
            "\"ops_per_s\":%.3f",
            f->total, f->ok, f->errors, b->elapsed_ms / 1000, rate_of(b, f->ok));
    fprintf(o,
            ",\"latency_ms\":{\"p50\":%.6f,\"p95\":%.6f,\"p99\":%.6f,\"max\":%.6f,"
            "\"mean\":%.6f}",
            f->p50, f->p95, f->p99, f->max, f->mean);
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
    if (b->n_mem > 0) {
        fflush(o);
        mem_json(b, "rss_peak_kib_after_load", offsetof(bench_mem, hwm_load));
        mem_json(b, "rss_kib_after_load", offsetof(bench_mem, rss_load));
        mem_json(b, "rss_peak_kib_after_checks", offsetof(bench_mem, hwm_end));
    }
    if (b->redis_mem_before >= 0 && b->redis_mem_after >= 0)
        fprintf(o, ",\"redis_used_memory\":{\"before\":%lld,\"after\":%lld}", b->redis_mem_before,
                b->redis_mem_after);
    fprintf(o, ",\"runs\":%u", b->o.runs);
    if (f->ok > 0 && b->rs_before.ok && b->rs_after.ok) {
        double ops = (double)f->ok;
        fprintf(o, ",\"per_op\":{\"redis_us\":%.3f,\"db_calls\":%.4f,\"redis_bytes\":%.1f",
                (double)(b->rs_after.usec - b->rs_before.usec) / ops,
                (double)(b->rs_after.calls - b->rs_before.calls) / ops,
                (double)(b->rs_after.used_memory - b->rs_before.used_memory) / ops);
        if (b->cpu_before >= 0 && b->cpu_after >= 0) {
            long hz = sysconf(_SC_CLK_TCK);
            fprintf(o, ",\"charterd_cpu_us\":%.3f",
                    (double)(b->cpu_after - b->cpu_before) * 1e6 / (double)(hz > 0 ? hz : 100) /
                        ops);
        }
        fprintf(o, "}");
    }
    if (b->fcall_per_s > 0) {
        fprintf(o, ",\"ceiling\":{\"fcall_per_s\":%.2f", b->fcall_per_s);
        if (is_deliver(b))
            fprintf(o, ",\"ratio\":%.6f", rate_of(b, f->ok) / b->fcall_per_s);
        fprintf(o, "}");
    } else if (b->ceiling_note[0] != '\0') {
        fprintf(o, ",\"ceiling_error\":");
        json_string(o, b->ceiling_note);
    }
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

/* --- main --------------------------------------------------------------------------------- */

/* Redis's counters and the CPU of the charterd processes measured (the daemons started, or
 * --pid), at one moment. */
static void measure_point(bench *b, bench_redis_stats *rs, long long *cpu)
{
    memset(rs, 0, sizeof *rs);
    if (b->o.redis_url != NULL)
        redis_stats(b->o.redis_url, rs);
    *cpu = -1;
    long long sum = 0;
    unsigned n = 0;
    if (b->o.url != NULL && b->o.pid != 0) {
        long long t = read_cpu_ticks(b->o.pid);
        if (t >= 0) {
            sum += t;
            n++;
        }
    }
    for (unsigned i = 0; b->o.url == NULL && i < b->n_daemons; i++) {
        long long t = read_cpu_ticks(b->daemons[i].pid);
        if (t >= 0) {
            sum += t;
            n++;
        }
    }
    if (n > 0)
        *cpu = sum;
}

static int open_clients(bench *b, const char *token)
{
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = b->o.timeout_ms;
    o.connect_timeout_ms = 5000;
    b->n_clients = b->o.url ? 1 : b->n_daemons;
    for (unsigned i = 0; i < b->n_clients; i++) {
        const char *url = b->o.url ? b->o.url : b->daemons[i].url;
        int rv = charter_client_open(url, token, &o, &b->clients[i]);
        if (rv != 0) {
            say(b, "cannot connect to %s: %s", url, charter_status_name(rv));
            return -1;
        }
    }
    o.timeout_ms = BENCH_VERIFY_TIMEOUT_MS;
    for (unsigned i = 0; i < b->o.tenants; i++) {
        const char *url = b->o.url ? b->o.url : b->daemons[i].url;
        int rv = charter_client_open(url, token, &o, &b->admins[i]);
        if (rv != 0) {
            say(b, "cannot connect to %s: %s", url, charter_status_name(rv));
            return -1;
        }
    }
    b->admin = b->admins[0];
    return 0;
}

/* --url: Health tells the graph and the worker count. */
static int probe_url(bench *b)
{
    Charter__V1__HealthResponse *h = NULL;
    charter_status st;
    int rv = charter_health(b->admin, NULL, &h, &st);
    if (rv != 0) {
        say(b, "Health of %s failed: %s: %s", b->o.url, charter_status_name(rv), st.message);
        return -1;
    }
    snprintf(b->graph, sizeof b->graph, "%s", h->graph ? h->graph : "?");
    b->server_workers = h->workers;
    charter__v1__health_response__free_unpacked(h, NULL);
    return 0;
}

/* Starts the daemons: the graph must be empty first, since it is deleted afterwards. */
static int start_daemons(bench *b)
{
    char err[300];
    for (unsigned g = 0; g < b->o.tenants; g++) {
        redisContext *rc = redis_open_graph(b->o.redis_url, b->graphs[g], err, sizeof err);
        if (rc == NULL) {
            say(b, "%s", err);
            return -1;
        }
        unsigned long long found = 0;
        int r = redis_graph_keys(rc, b->graphs[g], false, true, &found, err, sizeof err);
        redisFree(rc);
        if (r != 0) {
            say(b, "cannot scan graph %s: %s", b->graphs[g], err);
            return -1;
        }
        if (found > 0) {
            say(b, "graph %s already holds data in %s; refusing to load it (pick another --graph)",
                b->graphs[g], b->o.redis_url);
            return -1;
        }
    }
    if (find_charterd(b) != 0)
        return -1;
    snprintf(b->tmpdir, sizeof b->tmpdir, "/tmp/charter-bench.XXXXXX");
    if (mkdtemp(b->tmpdir) == NULL) {
        say(b, "cannot create a temporary folder: %s", strerror(errno));
        b->tmpdir[0] = '\0';
        return -1;
    }
    for (unsigned i = 0; i < b->o.daemons; i++) {
        if (daemon_start(b, i) != 0)
            return -1;
        b->n_daemons = i + 1;
    }
    for (unsigned i = 0; i < b->n_daemons; i++)
        if (daemon_wait_ready(b, i) != 0)
            return -1;
    return 0;
}

static void delete_graph(bench *b)
{
    char err[300];
    for (unsigned g = 0; g < b->o.tenants; g++) {
        redisContext *rc = redis_open_graph(b->o.redis_url, b->graphs[g], err, sizeof err);
        if (rc == NULL) {
            say(b, "graph %s not deleted: %s", b->graphs[g], err);
            continue;
        }
        unsigned long long n = 0;
        if (redis_graph_keys(rc, b->graphs[g], true, false, &n, err, sizeof err) != 0)
            say(b, "graph %s not fully deleted: %s", b->graphs[g], err);
        else if (!b->o.json)
            say(b, "deleted %llu keys of graph %s", n, b->graphs[g]);
        redisFree(rc);
    }
}

int main(int argc, char **argv)
{
    static bench bb;
    bench *b = &bb;
    int rc = parse_options(argc, argv, &b->o);
    if (rc >= 0)
        return rc;
    b->redis_mem_before = b->redis_mem_after = -1;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = bench_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

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
    /* redis-benchmark and INFO speak to one server: no ceiling on a cluster. */
    if (b->o.redis_url != NULL && strncmp(b->o.redis_url, "cluster://", 10) == 0)
        b->o.no_ceiling = true;
    if (b->o.workers != 0) {
        b->server_workers = b->o.workers;
    } else {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        b->server_workers = (unsigned)(2 * (cores < 1 ? 1 : cores > 256 ? 256 : cores));
    }

    int status = 1;
    bool measured = false;
    bench_figures fig;
    memset(&fig, 0, sizeof fig);

    if (b->o.url == NULL) {
        if (!b->o.json)
            say(b, "starting %u charterd (%u workers each) on graph %s", b->o.daemons,
                b->server_workers, b->graph);
        if (start_daemons(b) != 0)
            goto stop;
    } else {
        b->n_daemons = 0;
    }
    if (open_clients(b, b->token) != 0)
        goto close;
    if (b->o.url != NULL && probe_url(b) != 0)
        goto close;
    if (b->o.workload != WL_HEALTH) {
        if (setup_runs(b) != 0)
            goto close;
        if (b->o.workload == WL_CHECK_INPUT) {
            if (!b->o.json)
                say(b, "recording a lineage of depth %u", b->o.depth);
            if (build_lineage(b) != 0)
                goto close;
        }
    }
    if (b->o.redis_url != NULL)
        b->redis_mem_before = redis_used_memory(b->o.redis_url);
    measure_point(b, &b->rs_before, &b->cpu_before);
    if (!b->o.json) {
        if (b->o.workload == WL_DELIVER_SAME)
            say(b, "%s: %u thread%s, %u rounds", workload_names[b->o.workload], b->o.threads,
                b->o.threads == 1 ? "" : "s", b->o.rounds);
        else if (b->o.count > 0)
            say(b, "%s: %u thread%s, %lu operations", workload_names[b->o.workload], b->o.threads,
                b->o.threads == 1 ? "" : "s", b->o.count);
        else
            say(b, "%s: %u thread%s for %.1f s", workload_names[b->o.workload], b->o.threads,
                b->o.threads == 1 ? "" : "s", b->o.duration_s);
    }
    if (run_workload(b) != 0)
        goto close;
    measure_point(b, &b->rs_after, &b->cpu_after);
    if (b->o.redis_url != NULL)
        b->redis_mem_after = redis_used_memory(b->o.redis_url);
    /* The processes measured: the daemons started, or the running one given by --pid. */
    if (b->o.url != NULL && b->o.pid != 0)
        b->mem[b->n_mem++].pid = b->o.pid;
    for (unsigned i = 0; b->o.url == NULL && i < b->n_daemons; i++)
        b->mem[b->n_mem++].pid = b->daemons[i].pid;
    for (unsigned i = 0; i < b->n_mem; i++)
        read_rss(b->mem[i].pid, &b->mem[i].hwm_load, &b->mem[i].rss_load);
    if (figures_compute(b, &fig) != 0) {
        say(b, "out of memory computing the figures");
        goto close;
    }
    measured = true;
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
    case WL_HEALTH:
        break;
    }
    for (unsigned i = 0; i < b->n_mem; i++) {
        long rss = 0;
        read_rss(b->mem[i].pid, &b->mem[i].hwm_end, &rss);
    }
close:
    for (unsigned i = 0; i < BENCH_MAX_DAEMONS; i++)
        if (b->clients[i] != NULL) {
            charter_client_close(b->clients[i]);
            b->clients[i] = NULL;
        }
    for (unsigned i = 0; i < BENCH_MAX_DAEMONS; i++)
        if (b->admins[i] != NULL) {
            charter_client_close(b->admins[i]);
            b->admins[i] = NULL;
        }
    b->admin = NULL;
stop:
    for (unsigned i = 0; i < b->n_daemons; i++)
        if (b->o.url == NULL && b->daemons[i].running)
            kill(b->daemons[i].pid, SIGTERM);
    for (unsigned i = 0; i < b->n_daemons; i++)
        if (b->o.url == NULL)
            daemon_stop(b, i);
    if (b->o.url == NULL) {
        for (unsigned i = 0; i < b->n_daemons; i++) {
            const bench_daemon *d = &b->daemons[i];
            if (d->killed || !WIFEXITED(d->status) || WEXITSTATUS(d->status) != 0) {
                if (WIFSIGNALED(d->status))
                    say(b, "charterd %u (pid %ld) ended by signal %d", i, (long)d->pid,
                        WTERMSIG(d->status));
                else if (WIFEXITED(d->status))
                    say(b, "charterd %u (pid %ld) exited with status %d", i, (long)d->pid,
                        WEXITSTATUS(d->status));
                if (measured)
                    check_add(b, false, "charterd stopped cleanly on SIGTERM", "charterd %u: %s %d",
                              i, WIFSIGNALED(d->status) ? "signal" : "exit status",
                              WIFSIGNALED(d->status) ? WTERMSIG(d->status)
                                                     : WEXITSTATUS(d->status));
            }
        }
        collect_logs(b);
    }
    if (measured && b->o.redis_url != NULL && !b->o.no_ceiling && !bench_interrupted) {
        if (!b->o.json)
            say(b, "ceiling: redis-benchmark -c %u FCALL bench_noop 0", b->o.threads);
        measure_ceiling(b);
    }
    if (b->o.url == NULL && b->o.redis_url != NULL && b->n_daemons > 0) {
        if (b->o.keep)
            say(b, "keeping graph %s and %s", b->graph, b->tmpdir);
        else
            delete_graph(b);
    }
    if (!b->o.keep)
        remove_tmpdir(b);
    if (measured) {
        if (b->o.json)
            report_json(b, &fig);
        else
            report_text(b, &fig);
        status = 0;
        for (size_t i = 0; i < b->n_checks; i++)
            if (!b->checks[i].pass)
                status = 1;
    }
    if (bench_interrupted) {
        say(b, "interrupted");
        status = status == 0 ? 130 : status;
    }
    if (b->workers != NULL) {
        for (unsigned i = 0; i < b->o.threads; i++)
            free(b->workers[i].samples);
        free(b->workers);
    }
    if (b->barriers) {
        pthread_mutex_destroy(&b->gate_mu);
        pthread_cond_destroy(&b->gate_cv);
        pthread_barrier_destroy(&b->round_a);
        pthread_barrier_destroy(&b->round_b);
    }
    return status;
}
