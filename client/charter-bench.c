/*
 * charter-bench.c - load on a charterd through one shared libcharter client.
 *
 * N threads make calls through the same charter_client (each call on its own NNG context, as
 * any multi-threaded host would) and report throughput and latency percentiles, so the cost
 * of a method and the effect of the server's worker count can be measured from the outside.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "charter.h"

#define MAX_THREADS 1024
#define MAX_CALLS 10000000u

typedef struct {
    const char *name;   /* --method value */
    const char *method; /* shown in the report */
} bench_method;

static const bench_method methods[] = {
    {"health", "/charter.v1.Health/Check"},
    {"list", "/charter.v1.Runs/ListRuns"},
    {"get", "/charter.v1.Runs/GetRun"},
};

typedef struct {
    charter_client *client;
    const char *method;
    const char *run_id;
    unsigned calls;
    double *latency_ms; /* calls entries; failed calls are not recorded */
    unsigned ok;
    unsigned failed;
    charter_status first_error;
} bench_thread;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* One call of the thread's method; 0 or the negated status code. */
static int bench_call(bench_thread *t, charter_status *st)
{
    int rv;
    if (strcmp(t->method, "health") == 0) {
        Charter__V1__HealthResponse *h = NULL;
        if ((rv = charter_health(t->client, NULL, &h, st)) == 0)
            charter__v1__health_response__free_unpacked(h, NULL);
    } else if (strcmp(t->method, "list") == 0) {
        Charter__V1__ListRunsRequest req = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
        Charter__V1__ListRunsResponse *r = NULL;
        req.limit = 10;
        if ((rv = charter_list_runs(t->client, &req, &r, st)) == 0)
            charter__v1__list_runs_response__free_unpacked(r, NULL);
    } else {
        Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
        Charter__V1__RunView *v = NULL;
        req.run_id = (char *)t->run_id;
        if ((rv = charter_get_run(t->client, &req, &v, st)) == 0)
            charter__v1__run_view__free_unpacked(v, NULL);
    }
    return rv;
}

static void *bench_main(void *arg)
{
    bench_thread *t = arg;
    for (unsigned i = 0; i < t->calls; i++) {
        charter_status st;
        double t0 = now_ms();
        if (bench_call(t, &st) == 0) {
            t->latency_ms[t->ok++] = now_ms() - t0;
        } else if (t->failed++ == 0) {
            t->first_error = st;
        }
    }
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* The p-th percentile (0..100) of n sorted values, nearest rank. */
static double percentile(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t rank = (size_t)(p / 100.0 * (double)n + 0.5);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

static int parse_unsigned(const char *s, unsigned long max, unsigned long *out)
{
    char *end = NULL;
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    unsigned long v = strtoul(s, &end, 10);
    if (*end != '\0' || v == 0 || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Prints the usage (to stderr after an error, else to stdout) and returns the exit code. */
static int usage(const char *why)
{
    FILE *out = why != NULL ? stderr : stdout;
    if (why != NULL)
        fprintf(stderr, "charter-bench: %s\n", why);
    fprintf(out,
            "usage: charter-bench [--url URL] [--token TOKEN] [--threads N] [--calls N]\n"
            "                     [--method health|list|get] [--run RUN] [--timeout-ms N]\n"
            "  N threads (default 32) each make N calls (default 1000) through one client.\n"
            "  --url and --token default to $CHARTER_URL and $CHARTER_TOKEN (else\n"
            "  $CHARTER_OPERATOR_TOKEN); get needs --run. Exit 0 when every call succeeded.\n");
    return why != NULL ? 2 : 0;
}

int main(int argc, char **argv)
{
    const char *url = getenv("CHARTER_URL"), *token = getenv("CHARTER_TOKEN");
    const char *method = "health", *run_id = NULL;
    unsigned long threads = 32, calls = 1000, timeout_ms = CHARTER_DEFAULT_TIMEOUT_MS;

    if (url == NULL || url[0] == '\0')
        url = CHARTER_DEFAULT_URL;
    if (token == NULL || token[0] == '\0')
        token = getenv("CHARTER_OPERATOR_TOKEN");
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(opt, "--help") == 0)
            return usage(NULL);
        if (val == NULL)
            return usage("every option takes a value");
        i++;
        if (strcmp(opt, "--url") == 0)
            url = val;
        else if (strcmp(opt, "--token") == 0)
            token = val;
        else if (strcmp(opt, "--run") == 0)
            run_id = val;
        else if (strcmp(opt, "--method") == 0)
            method = val;
        else if (strcmp(opt, "--threads") == 0) {
            if (parse_unsigned(val, MAX_THREADS, &threads) != 0)
                return usage("--threads is 1 to 1024");
        } else if (strcmp(opt, "--calls") == 0) {
            if (parse_unsigned(val, MAX_CALLS, &calls) != 0)
                return usage("--calls is 1 to 10000000");
        } else if (strcmp(opt, "--timeout-ms") == 0) {
            if (parse_unsigned(val, CHARTER_MAX_TIMEOUT_MS, &timeout_ms) != 0)
                return usage("--timeout-ms is 1 to 3600000");
        } else {
            return usage("unknown option");
        }
    }
    const bench_method *m = NULL;
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strcmp(methods[i].name, method) == 0)
            m = &methods[i];
    if (m == NULL)
        return usage("--method is health, list or get");
    if (strcmp(method, "get") == 0 && run_id == NULL)
        return usage("--method get needs --run");

    charter_options o;
    charter_client *client = NULL;
    charter_options_init(&o);
    o.timeout_ms = (uint32_t)timeout_ms;
    o.connect_timeout_ms = 2000;
    int rv = charter_client_open(url, token, &o, &client);
    if (rv != 0) {
        fprintf(stderr, "charter-bench: %s: cannot connect to %s\n", charter_status_name(rv), url);
        return 1;
    }

    bench_thread *t = calloc(threads, sizeof(*t));
    pthread_t *tid = calloc(threads, sizeof(*tid));
    double *all = calloc(threads * calls, sizeof(*all));
    if (t == NULL || tid == NULL || all == NULL) {
        fprintf(stderr, "charter-bench: out of memory\n");
        free(t);
        free(tid);
        free(all);
        charter_client_close(client);
        return 1;
    }
    unsigned long started = 0;
    double t0 = now_ms();
    for (; started < threads; started++) {
        t[started].client = client;
        t[started].method = method;
        t[started].run_id = run_id;
        t[started].calls = (unsigned)calls;
        t[started].latency_ms = all + started * calls;
        if (pthread_create(&tid[started], NULL, bench_main, &t[started]) != 0) {
            fprintf(stderr, "charter-bench: cannot start thread %lu\n", started);
            break;
        }
    }
    for (unsigned long i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    double elapsed = now_ms() - t0;

    size_t ok = 0, failed = 0;
    const charter_status *first = NULL;
    for (unsigned long i = 0; i < started; i++) {
        /* Compact each thread's recorded latencies to the front of the shared array. */
        memmove(all + ok, t[i].latency_ms, t[i].ok * sizeof(*all));
        ok += t[i].ok;
        failed += t[i].failed;
        if (first == NULL && t[i].failed > 0)
            first = &t[i].first_error;
    }
    qsort(all, ok, sizeof(*all), by_value);

    printf("method    %s\n", m->method);
    printf("url       %s\n", url);
    printf("threads   %lu\n", started);
    printf("calls     %zu ok, %zu failed\n", ok, failed);
    if (first != NULL)
        printf("error     %s: %s\n", charter_status_name(first->code), first->message);
    printf("elapsed   %.3f s\n", elapsed / 1000.0);
    printf("rate      %.0f calls/s\n", elapsed > 0 ? (double)ok * 1000.0 / elapsed : 0.0);
    printf("latency   p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  max %.3f ms\n",
           percentile(all, ok, 50), percentile(all, ok, 90), percentile(all, ok, 99),
           ok > 0 ? all[ok - 1] : 0.0);

    free(t);
    free(tid);
    free(all);
    charter_client_close(client);
    return failed == 0 && started == threads ? 0 : 1;
}
