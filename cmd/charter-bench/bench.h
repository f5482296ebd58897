/*
 * bench.h - what the files of charter-bench share: the command line, the state of one
 * invocation (the charterd processes, the runs set up, the samples of every load, the figures
 * of every repetition) and the functions each file offers the others. charter-bench.c reads
 * the command line and runs the phases; bench_daemons.c starts and stops charterd;
 * bench_api.c sets up through the API and checks the invariants afterwards; bench_load.c
 * drives a load from many threads; bench_echo.c is the transport's ceiling (a bare NNG
 * req/rep echo); bench_redis.c speaks to Redis directly; bench_report.c prints.
 */
#ifndef CHARTER_BENCH_H
#define CHARTER_BENCH_H

#include <hiredis.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "charter.h"

#define BENCH_MAX_THREADS 1024u
#define BENCH_MAX_DAEMONS 64u
#define BENCH_MAX_DEPTH 100000u /* the server decides how deep a lineage may go */
#define BENCH_MAX_REPEAT 99u
#define BENCH_MAX_KINDS 16 /* distinct decision texts kept per thread */
#define BENCH_MAX_CMDS 256 /* distinct commands of INFO commandstats kept */
#define BENCH_TOP_CMDS 12  /* inner commands listed per operation */
#define BENCH_CEILING_REQUESTS "100000"
#define BENCH_STARTUP_MS 20000.0
#define BENCH_STOP_MS 20000.0
#define BENCH_VERIFY_TIMEOUT_MS 60000u

typedef enum {
    WL_DELIVER = 0,
    WL_DELIVER_SAME,
    WL_CHECK_INPUT,
    WL_HEALTH,
    WL_ECHO,       /* the echo server process: no charterd, no Redis */
    WL_ECHO_FCALL, /* the same, one no-op FCALL per request */
    WL_COUNT
} bench_workload;

extern const char *const workload_names[WL_COUNT];

/* The command line. */
typedef struct {
    bench_workload workload;
    unsigned threads;
    unsigned daemons;
    unsigned workers; /* --workers of each charterd; 0: 2 x online cores, as charterd */
    unsigned depth;
    unsigned compare_depth; /* check-input: also measured at this depth; 0: not */
    bool compare_set;
    unsigned rounds;
    unsigned repeat;
    double duration_s;       /* 0 when count is used */
    unsigned long count;     /* 0 when duration is used */
    double ceiling_s;        /* seconds of each echo ceiling */
    double lineage_budget_s; /* check-input: stop recording after this; 0: no limit */
    uint32_t timeout_ms;
    const char *redis_url;
    const char *url; /* an already running charterd, or NULL */
    long pid;        /* its process for RSS and CPU, or 0 */
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

/* One line of INFO commandstats. */
typedef struct {
    char name[40];
    unsigned long long calls, usec;
} bench_cmdstat;

/* Redis's own account at one instant (INFO everything): every FCALL and FCALL_RO (charterd's
 * database calls, each with its inner commands' time), every other command but INFO (the
 * functions' inner commands, and anything charterd sends outside a function), used_memory. */
typedef struct {
    bool ok;
    unsigned long long calls, usec; /* FCALL + FCALL_RO */
    unsigned long long inner;       /* every other command's calls, INFO aside */
    long long used_memory;
    bench_cmdstat cmds[BENCH_MAX_CMDS];
    size_t n_cmds;
} bench_redis_stats;

/* What is read before and after a load: Redis's counters and the CPU of the charterd
 * processes measured (utime + stime in clock ticks, -1 unread). */
typedef struct {
    bench_redis_stats rs;
    long long cpu;
} bench_point;

/* One operation as it was answered. code is the RPC status (0 OK); the rest is set for 0. */
typedef struct {
    double ms;
    uint64_t event_seq; /* check-input: the input_checked event */
    uint32_t round;     /* deliver-same: the round, counted over every repetition */
    int16_t code;
    uint8_t outcome; /* Charter__V1__Outcome */
    uint8_t acknowledged;
    uint8_t local; /* the RPC error was produced by the client, not answered by the server */
} bench_sample;

/* A distinct decision text ("DENY GRANT_INVALID: witness") or RPC error, with its count. */
typedef struct {
    char text[200];
    unsigned long count;
} bench_kind;

typedef struct bench bench;
typedef struct bench_load bench_load;
typedef struct bench_echo bench_echo;
typedef struct echo_client echo_client;
typedef struct bench_echo_proc bench_echo_proc;

/* One client thread and the samples it took (over every load it served). */
typedef struct {
    bench *b;
    bench_load *load; /* the load running now */
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

/* One load: o.threads threads doing kind for a duration or a count of operations. */
struct bench_load {
    bench_workload kind;
    const char *target_id; /* check-input: the artifact checked */
    double duration_s;
    unsigned long count;
    size_t round_base;     /* deliver-same: number of the first round */
    bench_worker *workers; /* where the samples go */
    size_t *from;          /* per thread: its first sample of this load */
    pthread_mutex_t gate_mu;
    pthread_cond_t gate_cv;
    int go; /* 0 wait, 1 run, -1 abort: the start gate every thread waits at */
    pthread_barrier_t round_a, round_b;
    volatile bool halt_rounds;
    atomic_ulong issued;
    double t0_ms, deadline_ms, elapsed_ms;
};

/* The figures of one load, over its samples, and per answered operation from the points
 * read around it (NAN when not measured). */
typedef struct {
    size_t total, ok, errors;
    double elapsed_ms, ops_per_s, p50, p95, p99, max, mean;
    double redis_us, db_calls, inner, redis_bytes, cpu_us;
} bench_pass;

/* Every figure of one repetition; the report gives the median, min and max over them. */
typedef enum {
    FIG_OPS = 0,
    FIG_P50,
    FIG_P95,
    FIG_P99,
    FIG_REDIS_US,
    FIG_DB_CALLS,
    FIG_INNER,
    FIG_REDIS_BYTES,
    FIG_CPU_US,
    FIG_CMP_OPS,
    FIG_CMP_P50,
    FIG_CMP_REDIS_US,
    FIG_CMP_DB_CALLS,
    FIG_CMP_INNER,
    FIG_CMP_CPU_US,
    FIG_DEPTH_RATIO,
    FIG_FCALL,
    FIG_ECHO,
    FIG_ECHO_FCALL,
    FIG_R_FCALL,
    FIG_R_ECHO,
    FIG_R_ECHO_FCALL,
    FIG_COUNT
} bench_fig;

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

/* The recording of the check-input lineage through the API. */
typedef struct {
    unsigned reached; /* outputs recorded */
    bool finished;    /* all --depth of them */
    char why[300];    /* when not: why it stopped */
    double ms;        /* recording them */
    double first_ms;  /* the first `span` of them */
    double last_ms;   /* the last `span` of them */
    unsigned span;    /* a tenth of --depth, at least 1 */
    bench_point before, after;
} bench_lineage;

struct bench {
    bench_opts o;
    char command[2048]; /* the command line, as it was typed (quoted where needed) */
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
    char compare_id[160];              /* check-input: the artifact at --compare-depth */
    bench_run runs[BENCH_MAX_THREADS]; /* --runs of them; runs[0] is the run above */
    double setup_ms;
    bench_lineage lineage;

    /* The workload's samples over every repetition (the invariants are checked on them). */
    bench_worker *workers;
    bench_load *load; /* the load running now */

    /* The ceilings: the echo server and its request (a Health call's bytes). */
    bool noop_loaded;
    uint8_t echo_req[512];
    size_t echo_req_len;
    char echo_url[PATH_MAX + 16];
    echo_client *echo_client;
    char fcall_note[300], echo_note[600], echo_fcall_note[600];
    unsigned long echo_fcall_failures; /* FCALLs of the echo-fcall server that failed */
    unsigned long echo_server_deaths;  /* echo server processes that ended before asked to */

    /* The figures: one value per repetition (NAN when not measured). */
    unsigned reps_done;
    double fig[FIG_COUNT][BENCH_MAX_REPEAT];
    bench_point first_before, last_after; /* around the workload's first and last load */
    bench_cmdstat top[BENCH_TOP_CMDS];    /* inner commands per operation, the last load */
    double top_per_op[BENCH_TOP_CMDS];
    size_t n_top;

    bench_mem mem[BENCH_MAX_DAEMONS];
    unsigned n_mem;

    bench_check checks[16];
    size_t n_checks;
    bench_kind log_kinds[12]; /* distinct daemon log messages (digits aside), with counts */
    size_t n_log_kinds;
    unsigned long log_total, log_other;
};

extern volatile sig_atomic_t bench_interrupted;

/* charter-bench.c */
double now_ms(void);
void say(const bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void check_add(bench *b, bool pass, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out);

/* bench_options.c: -1 to go on, else the exit code. */
int parse_options(int argc, char **argv, bench_opts *o);

/* bench_redis.c */
redisContext *redis_open(const char *url, char *err, size_t errlen);
redisReply *redis_do(redisContext *rc, int argc, const char **argv, char *err, size_t errlen);
redisContext *redis_open_graph(const char *url, const char *graph, char *err, size_t errlen);
int redis_graph_keys(redisContext *rc, const char *graph, bool del, bool stop_at_first,
                     unsigned long long *found, char *err, size_t errlen);
void redis_stats(const char *url, bench_redis_stats *out);
int redis_noop_load(bench *b, char *err, size_t errlen);
void redis_noop_delete(bench *b);
double redis_noop_ceiling(bench *b, char *note, size_t notelen);
size_t redis_inner_top(const bench_redis_stats *before, const bench_redis_stats *after,
                       bench_cmdstat *top, size_t max);

/* bench_daemons.c */
long long read_cpu_ticks(long pid);
void read_rss(long pid, long *hwm, long *rss);
int make_token(char *out, size_t outlen);
int make_tmpdir(bench *b);
void remove_tmpdir(bench *b);
int start_daemons(bench *b);
void stop_daemons(bench *b, bool measured);
void delete_graph(bench *b);
int open_clients(bench *b, const char *token);
void close_clients(bench *b);
int probe_url(bench *b);

/* bench_api.c */
const char *outcome_name(int outcome);
void decision_text(const Charter__V1__Decision *d, char *out, size_t outlen);
int setup_runs(bench *b);
int build_lineage(bench *b);
void verify_workload(bench *b);

/* bench_load.c */
void invocation_id(const bench *b, unsigned thread, size_t index, char *out, size_t outlen);
void round_invocation_id(const bench *b, size_t round, char *out, size_t outlen);
void measure_point(bench *b, bench_point *p);
int load_run(bench *b, bench_load *l);
void pass_compute(const bench *b, const bench_load *l, const bench_point *before,
                  const bench_point *after, bench_pass *out);
void workers_free(bench_worker *w, unsigned n);

/* bench_echo.c */
int echo_start(const char *url, unsigned slots, unsigned workers, const char *redis_url,
               bench_echo **out, char *err, size_t errlen);
unsigned long echo_stop(bench_echo *e);
int echo_client_open(const char *url, uint32_t timeout_ms, echo_client **out, char *err,
                     size_t errlen);
int echo_call(echo_client *c, const uint8_t *req, size_t len, char *err, size_t errlen);
void echo_client_close(echo_client *c);
int echo_request(bench *b);

/* bench_echo_proc.c: the echo server in a process of its own (charter-bench --echo-server). */
int echo_server_main(int argc, char **argv);
int echo_proc_start(const char *url, unsigned slots, unsigned workers, const char *redis_url,
                    bench_echo_proc **out, char *err, size_t errlen);
unsigned long echo_proc_stop(bench_echo_proc *p, bool *died);
long echo_proc_pid(const bench_echo_proc *p);

/* bench_measure.c: one repetition, the workload and then the ceilings */
int measure_rep(bench *b, unsigned rep);

/* bench_report.c */
void report_text(const bench *b);
void report_json(const bench *b);

#endif
