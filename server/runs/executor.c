/*
 * executor.c - the executor threads that drive scripted and live runs.
 *
 * Each thread loops: reap the graph's lapsed leases (marking those runs interrupted), claim
 * the next queued run or recovery with a lease (charter_claim_run), execute it with
 * runner_execute (or runner_execute_recovery) under the workflow the run pinned, and when
 * nothing waits, sleep one poll interval. Which process
 * executes a run is decided by the database alone; nothing here is shared between threads but
 * the stop flag. Every tenant's queue is served: the default graph's and those of the tenants
 * in the registry (tenant.h), whose names are read again once a reap interval.
 */
#include "runs/executor.h"

#include <errno.h>
#include <openssl/rand.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "evidence/evlog.h"
#include "core/log.h"
#include "workflow/registry.h"
#include "runs/runner.h"
#include "core/status.h"
#include "db/store.h"
#include "db/tenant.h"

#define EXECUTOR_POLL_MS 100  /* an idle thread looks for queued runs this often */
#define EXECUTOR_REAP_MS 1000 /* and for lapsed leases this often */

typedef struct {
    executor *ex;
    store *st;
    char owner[96];
    char graph[72];  /* the default graph the thread's store was opened on */
    json_t *tenants; /* the registry's tenant names as last read (NULL before) */
    pthread_t thread;
    bool started;
} executor_thread;

struct executor {
    atomic_bool stopping;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const service_limits *limits;
    unsigned n;
    executor_thread *threads;
};

/* Marks each run whose lease lapsed interrupted; a run that moved on meanwhile is left. */
static void executor_reap(executor_thread *t)
{
    json_t *reply = NULL;
    if (q_reap_leases(t->st, &reply) != STATUS_OK) {
        json_decref(reply);
        return; /* the next round tries again */
    }
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(reply, "runs"), i, v)
    {
        const char *id = json_string_value(v);
        if (id == NULL)
            continue;
        /* A recovery's lease lapses the same way: the run becomes recoverable again. */
        int rc =
            evlog_transition(t->st, id, "queued,running,recovering,pending_approval", "interrupted",
                             "{\"by\":\"executor\",\"reason\":\"lease lapsed\"}", NULL, NULL);
        if (rc == STATUS_OK)
            log_info("run %s: its executor's lease lapsed; marked interrupted", id);
    }
    json_decref(reply);
}

/* Claims one queued run and executes it. Returns true when a run was claimed. */
static bool executor_one(executor_thread *t)
{
    char lease_ms[16];
    snprintf(lease_ms, sizeof lease_ms, "%d", EXECUTOR_LEASE_MS);
    json_t *reply = NULL;
    if (q_claim_run(t->st, t->owner, lease_ms, &reply) != STATUS_OK) {
        json_decref(reply);
        return false;
    }
    const char *id = json_string_value(json_object_get(reply, "run_id"));
    if (id == NULL || *id == '\0') {
        json_decref(reply);
        return false;
    }
    char run_id[72];
    snprintf(run_id, sizeof run_id, "%s", id);
    const char *status = json_string_value(json_object_get(reply, "status"));
    bool recovery = status && strcmp(status, "recovering") == 0;
    json_decref(reply);
    gate_env g = {t->st, NULL, t->ex->limits, NULL};
    runner_lease lease = {t->owner, EXECUTOR_LEASE_MS, &t->ex->stopping};
    int rc = registry_run_workflow(t->st, run_id, &g.wf);
    if (rc == STATUS_OK)
        rc = recovery ? runner_execute_recovery(&g, run_id, &lease)
                      : runner_execute(&g, run_id, &lease);
    if (rc != STATUS_OK && rc != STATUS_EREFUSED)
        log_error("run %s could not be executed (%s); its lease lapses and it becomes "
                  "interrupted",
                  run_id, store_last_error(t->st));
    return true;
}

/* One pass over one graph's queue: reap when due, then claim and execute one run. Returns
 * true when a run was claimed. The store addresses graph meanwhile, the default afterwards. */
static bool executor_graph(executor_thread *t, const char *graph, bool reap)
{
    if (store_use_graph(t->st, graph) != STATUS_OK)
        return false;
    if (reap)
        executor_reap(t);
    bool claimed = executor_one(t);
    (void)store_use_graph(t->st, t->graph);
    return claimed;
}

/* The default graph, then every tenant of the registry; true when a run was claimed. */
static bool executor_round(executor_thread *t, bool reap)
{
    if (reap) {
        json_t *names = NULL;
        /* A registry that cannot be read keeps the last list: queues are still served. */
        if (tenant_names(t->st, &names) == STATUS_OK) {
            json_decref(t->tenants);
            t->tenants = names;
        }
    }
    bool claimed = executor_graph(t, t->graph, reap);
    size_t i;
    json_t *v;
    json_array_foreach(t->tenants, i, v)
    {
        const char *name = json_string_value(v);
        if (name != NULL && strcmp(name, t->graph) != 0 && executor_graph(t, name, reap))
            claimed = true;
    }
    return claimed;
}

static void *executor_main(void *arg)
{
    executor_thread *t = arg;
    executor *ex = t->ex;
    struct timespec last_reap = {0, 0};
    snprintf(t->graph, sizeof t->graph, "%s", store_graph(t->st));
    while (!atomic_load(&ex->stopping)) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long since =
            (now.tv_sec - last_reap.tv_sec) * 1000 + (now.tv_nsec - last_reap.tv_nsec) / 1000000;
        bool reap = since >= EXECUTOR_REAP_MS;
        if (reap)
            last_reap = now;
        if (executor_round(t, reap))
            continue;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += EXECUTOR_POLL_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&ex->mu);
        if (!atomic_load(&ex->stopping))
            (void)pthread_cond_timedwait(&ex->cv, &ex->mu, &until);
        pthread_mutex_unlock(&ex->mu);
    }
    json_decref(t->tenants);
    t->tenants = NULL;
    return NULL;
}

int executor_start(const executor_opts *opts, executor **out, char *err, size_t errlen)
{
    *out = NULL;
    if (opts->threads == 0)
        return STATUS_OK;
    executor *ex = calloc(1, sizeof *ex);
    if (ex == NULL || (ex->threads = calloc(opts->threads, sizeof *ex->threads)) == NULL) {
        free(ex);
        snprintf(err, errlen, "out of memory starting the executor threads");
        return STATUS_ENOMEM;
    }
    atomic_init(&ex->stopping, false);
    pthread_mutex_init(&ex->mu, NULL);
    pthread_cond_init(&ex->cv, NULL);
    ex->limits = opts->limits;
    unsigned char rnd[6];
    if (RAND_bytes(rnd, sizeof rnd) != 1) {
        snprintf(err, errlen, "cannot draw the executor's id (check OpenSSL's random source)");
        executor_stop(ex);
        return STATUS_ENOMEM;
    }
    char host[64] = "host";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = '\0';
    for (unsigned i = 0; i < opts->threads; i++) {
        executor_thread *t = &ex->threads[i];
        t->ex = ex;
        snprintf(t->owner, sizeof t->owner, "%.40s:%ld:%u:%02x%02x%02x%02x%02x%02x", host,
                 (long)getpid(), i, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
        int rc = store_open(opts->redis_url, opts->graph, opts->timeout_ms, &t->st);
        if (rc != STATUS_OK) {
            snprintf(err, errlen, "executor thread %u cannot reach Redis at %s (check --redis)", i,
                     opts->redis_url);
            ex->n = i;
            executor_stop(ex);
            return STATUS_EUNAVAILABLE;
        }
        ex->n = i + 1;
        if (pthread_create(&t->thread, NULL, executor_main, t) != 0) {
            snprintf(err, errlen, "cannot start executor thread %u (check the process limits)", i);
            executor_stop(ex);
            return STATUS_ENOMEM;
        }
        t->started = true;
    }
    *out = ex;
    return STATUS_OK;
}

/* The owner id's host and pid ("<host>:<pid>:<thread>:<random>"); false when it is not one. */
static bool owner_parts(const char *owner, char host[64], long *pid)
{
    const char *colon = strchr(owner, ':');
    if (colon == NULL || (size_t)(colon - owner) >= 64)
        return false;
    memcpy(host, owner, (size_t)(colon - owner));
    host[colon - owner] = '\0';
    char *end = NULL;
    *pid = strtol(colon + 1, &end, 10);
    return end != colon + 1 && *end == ':' && *pid > 0;
}

int executor_release_dead_local(store *st, size_t *n_released)
{
    if (n_released != NULL)
        *n_released = 0;
    char me[64] = "host";
    if (gethostname(me, sizeof me) != 0)
        snprintf(me, sizeof me, "host");
    me[sizeof me - 1] = '\0';
    json_t *reply = NULL;
    int rc = q_list_leases(st, &reply);
    if (rc != STATUS_OK) {
        json_decref(reply);
        return rc;
    }
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(reply, "leases"), i, l)
    {
        const char *id = json_string_value(json_object_get(l, "run_id"));
        const char *owner = json_string_value(json_object_get(l, "owner"));
        char host[64];
        long pid = 0;
        if (id == NULL || owner == NULL || !owner_parts(owner, host, &pid))
            continue;
        /* The host name is cut to 40 bytes in the owner id (executor_start). */
        if (strncmp(host, me, 40) != 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive, or not ours to judge */
        json_t *r = NULL;
        if (q_release_lease(st, id, owner, &r) == STATUS_OK && n_released != NULL &&
            json_is_true(json_object_get(r, "released")))
            (*n_released)++;
        json_decref(r);
    }
    json_decref(reply);
    return STATUS_OK;
}

void executor_stop(executor *ex)
{
    if (ex == NULL)
        return;
    pthread_mutex_lock(&ex->mu);
    atomic_store(&ex->stopping, true);
    pthread_cond_broadcast(&ex->cv);
    pthread_mutex_unlock(&ex->mu);
    for (unsigned i = 0; i < ex->n; i++) {
        if (ex->threads[i].started)
            pthread_join(ex->threads[i].thread, NULL);
        store_close(ex->threads[i].st);
    }
    pthread_mutex_destroy(&ex->mu);
    pthread_cond_destroy(&ex->cv);
    free(ex->threads);
    free(ex);
}
