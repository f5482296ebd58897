/*
 * retention.c - the retention pass and its thread (retention.h).
 *
 * A pass reads the graph's runs oldest first, a page at a time (charter_retention_due), and
 * archives each run due before it reads the next page; a run removed shifts the ranks after
 * it, so the next page starts that many places earlier. Write, flush, read back, verify, index,
 * and only then remove: a failure before the removal leaves the run in Redis and removes the
 * file; a failed removal keeps the file and its index line, since an unanswered removal may
 * have removed the run.
 */
#include "runs/retention.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/metrics.h"
#include "core/status.h"
#include "db/store.h"
#include "evidence/archive_index.h"
#include "evidence/archive_run.h"

#define RETENTION_PAGE "200"
#define RETENTION_IDLE_MS 5000 /* between rounds when no graph has a period */

/* mkdir -p of path (mode 0700). Returns 0 or -1. */
static const char *text_of(const json_t *o, const char *k, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : dflt;
}

static int make_folders(const char *path)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* The archive's name under the archive folder, "<graph>/<YYYY-MM-DD>/<run>.charter-archive",
 * the day the run ended (UTC). */
static void archive_name(const char *graph, const char *run_id, const char *ended_at, char *out,
                         size_t n)
{
    time_t t = (time_t)strtoll(ended_at, NULL, 10);
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, n, "%s/%04d-%02d-%02d/%s.charter-archive", graph, tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, run_id);
}

/* The archive's path for run_id (the day it ended, read from the graph), its folders made.
 * Returns STATUS_OK, STATUS_EUNAVAILABLE (a folder; why says which) or the store's failure. */
static int archive_path(store *st, const char *run_id, const char *dir, char *name, size_t nn,
                        char *path, size_t np, char *why, size_t nw)
{
    json_t *run = NULL;
    int rc = q_run_export(st, run_id, "run", "0", "1", 0, NULL, &run);
    if (rc != STATUS_OK) {
        snprintf(why, nw, "the run could not be read (%s)", store_last_error(st));
        return rc;
    }
    archive_name(store_graph(st), run_id, text_of(run, "ended_at", "0"), name, nn);
    json_decref(run);
    snprintf(path, np, "%s/%s", dir, name);
    char folder[1024];
    snprintf(folder, sizeof folder, "%s", path);
    *strrchr(folder, '/') = '\0';
    if (make_folders(folder) != 0) {
        snprintf(why, nw, "the folder %.160s cannot be made (%s)", folder, strerror(errno));
        return STATUS_EUNAVAILABLE;
    }
    return STATUS_OK;
}

/* Archives one run: write, read back and verify, remove, keeping its invocations' compact
 * records for window_s seconds (0: forever). Returns STATUS_OK (bytes written in *bytes) or
 * the failing step's status, logged. */
static int archive_one(store *st, const char *run_id, const char *dir, long long window_s,
                       unsigned long long *bytes)
{
    archive_run_summary s = {0};
    char why[256] = "", name[512], path[1024];
    int rc = archive_path(st, run_id, dir, name, sizeof name, path, sizeof path, why, sizeof why);
    if (rc == STATUS_OK)
        rc = archive_run_write(st, run_id, path, &s, why, sizeof why);
    if (rc == STATUS_OK && (rc = archive_run_verify(path, run_id, &s, why, sizeof why)) != 0)
        unlink(path);
    /* Indexed before the run leaves, so every removed run is named in its folder's index. */
    char graph_dir[1024];
    snprintf(graph_dir, sizeof graph_dir, "%s/%s", dir, store_graph(st));
    if (rc == STATUS_OK &&
        (rc = archive_index_add(graph_dir, run_id, name + strlen(store_graph(st)) + 1,
                                s.context_ids)) != 0) {
        /* The run stays, so the file goes: one the index does not name fails the folder's
         * audit. Should the line have been written before the failure, the next pass writes
         * the file again and a line after it, the last line of a file being the one read. */
        unlink(path);
        snprintf(why, sizeof why, "the archive could not be added to %.150s/%s", graph_dir,
                 ARCHIVE_INDEX_NAME);
    }
    bool sent = false;
    if (rc == STATUS_OK && (rc = archive_run_remove(st, run_id, name, &s, window_s)) != STATUS_OK) {
        snprintf(why, sizeof why, "the run could not be removed (%s)", store_last_error(st));
        sent = true;
    }
    if (rc == STATUS_OK)
        *bytes = s.bytes;
    else if (sent && rc == STATUS_EUNAVAILABLE)
        /* The removal was sent and not answered: it may have landed. Its archive is written
         * and indexed either way, and the next pass finds out (a run still stored is due
         * again; one removed is named by the index). */
        log_error("run %s: its archive %s is written, but whether the run left the database is "
                  "unknown: %s; the next pass finds out",
                  run_id, path, why);
    else
        log_error("run %s was not archived: %s; it stays in the database", run_id, why);
    archive_run_summary_free(&s);
    return rc;
}

/* The database's time in seconds (charter_time), or -1. */
static double db_now(store *st)
{
    json_t *reply = NULL;
    double t = -1;
    if (q_time(st, &reply) == STATUS_OK)
        t = strtod(text_of(reply, "now", "-1"), NULL);
    json_decref(reply);
    return t;
}

/* One page of due runs from *cursor, each archived; *cursor moves past the page. */
static int pass_page(store *st, const char *owner, const char *cutoff, const retention_period *p,
                     const char *dir, unsigned long long *cursor, retention_result *out,
                     double *oldest, bool *done)
{
    char at[24];
    snprintf(at, sizeof at, "%llu", *cursor);
    json_t *reply = NULL;
    int rc = q_retention_due(st, cutoff, at, RETENTION_PAGE, &reply);
    if (rc != STATUS_OK)
        return rc;
    unsigned removed = 0;
    size_t i;
    json_t *id;
    json_array_foreach(json_object_get(reply, "due"), i, id)
    {
        json_t *lease = NULL;
        char ms[16];
        snprintf(ms, sizeof ms, "%d", RETENTION_LEASE_MS);
        bool held = q_retention_lease(st, owner, ms, &lease) == STATUS_OK &&
                    json_is_true(json_object_get(lease, "held"));
        json_decref(lease);
        unsigned long long bytes = 0;
        if (held && archive_one(st, json_string_value(id), dir, p->invocation_window_s, &bytes) ==
                        STATUS_OK) {
            out->archived++;
            out->bytes += bytes;
            removed++;
            metrics_archived(bytes);
        } else {
            out->failed++;
        }
    }
    double t = strtod(text_of(reply, "oldest", ""), NULL);
    if (t > 0 && (*oldest <= 0 || t < *oldest))
        *oldest = t;
    *cursor = (unsigned long long)json_integer_value(json_object_get(reply, "next")) - removed;
    *done = json_is_true(json_object_get(reply, "done"));
    json_decref(reply);
    return STATUS_OK;
}

int retention_pass(store *st, const char *owner, const retention_period *p, const char *archive_dir,
                   retention_result *out)
{
    memset(out, 0, sizeof *out);
    out->used_memory = -1;
    out->kept = -1;
    char ms[16];
    snprintf(ms, sizeof ms, "%d", RETENTION_LEASE_MS);
    json_t *lease = NULL;
    int rc = q_retention_lease(st, owner, ms, &lease);
    out->held = rc == STATUS_OK && json_is_true(json_object_get(lease, "held"));
    json_decref(lease);
    if (!out->held)
        return rc;
    double now = db_now(st), oldest = 0;
    if (now < 0)
        return STATUS_EUNAVAILABLE;
    char cutoff[32];
    snprintf(cutoff, sizeof cutoff, "%.6f", now - (double)p->retention_s);
    unsigned long long cursor = 0;
    bool done = false;
    while (rc == STATUS_OK && !done)
        rc = pass_page(st, owner, cutoff, p, archive_dir, &cursor, out, &oldest, &done);
    out->oldest_s = oldest > 0 ? (long long)(now - oldest) : 0;
    store_used_memory(st, &out->used_memory);
    json_t *kept = NULL;
    if (q_archived_invocations(st, &kept) == STATUS_OK)
        out->kept = (long long)json_integer_value(json_object_get(kept, "kept"));
    json_decref(kept);
    metrics_set_retention(out->used_memory, out->oldest_s, out->kept);
    log_info("retention pass on graph %s: %u runs archived (%llu bytes), %u not archived, "
             "oldest ended run left %llds old, %lld compact invocation records kept, database "
             "used_memory %lld bytes",
             store_graph(st), out->archived, out->bytes, out->failed, out->oldest_s, out->kept,
             out->used_memory);
    return rc;
}

/* --- every graph ------------------------------------------------------------------------- */

int retention_round(store *st, const char *owner, const retention_period *dflt,
                    const char *archive_dir, long long *shortest_s)
{
    json_t *list = NULL;
    const char *home = store_graph(st);
    char graph[72];
    snprintf(graph, sizeof graph, "%s", home);
    /* A registry that cannot be read leaves the default graph alone to archive. */
    if (q_tenant_list(st, graph, &list) != STATUS_OK) {
        json_decref(list);
        list = json_pack("{s:[{s:s, s:I}]}", "tenants", "name", graph, "retention_seconds",
                         (json_int_t)0);
    }
    long long oldest = 0, used = -1, kept = -1;
    *shortest_s = 0;
    int rc = STATUS_OK;
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(list, "tenants"), i, t)
    {
        const char *name = json_string_value(json_object_get(t, "name"));
        long long own = (long long)json_integer_value(json_object_get(t, "retention_seconds"));
        long long window =
            (long long)json_integer_value(json_object_get(t, "invocation_window_seconds"));
        retention_period p = {own > 0 ? own : dflt->retention_s,
                              window > 0 ? window : dflt->invocation_window_s};
        if (name == NULL || p.retention_s <= 0 || store_use_graph(st, name) != STATUS_OK)
            continue;
        retention_result res;
        int prc = retention_pass(st, owner, &p, archive_dir, &res);
        if (prc != STATUS_OK)
            rc = prc;
        oldest = res.oldest_s > oldest ? res.oldest_s : oldest;
        used = res.used_memory >= 0 ? res.used_memory : used;
        if (res.kept >= 0)
            kept = (kept < 0 ? 0 : kept) + res.kept;
        if (*shortest_s == 0 || p.retention_s < *shortest_s)
            *shortest_s = p.retention_s;
    }
    (void)store_use_graph(st, graph);
    json_decref(list);
    metrics_set_retention(used, oldest, kept);
    return rc;
}

/* --- the thread --------------------------------------------------------------------------- */

struct retention {
    retention_opts o;
    store *st;
    char owner[96];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_bool stopping;
};

static void *retention_main(void *arg)
{
    retention *r = arg;
    while (!atomic_load(&r->stopping)) {
        long long shortest = 0;
        retention_period p = {r->o.retention_s, r->o.invocation_window_s};
        retention_round(r->st, r->owner, &p, r->o.archive_dir, &shortest);
        /* A quarter of the shortest period in force, 1 to 60 s; with none in force, the
         * registry is read again soon, so a tenant created with a period is seen. */
        long long every_ms = shortest > 0 ? shortest * 1000 / 4 : RETENTION_IDLE_MS;
        every_ms = every_ms < 1000 ? 1000 : every_ms > 60000 ? 60000 : every_ms;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += every_ms / 1000;
        until.tv_nsec += (every_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&r->mu);
        while (!atomic_load(&r->stopping) &&
               pthread_cond_timedwait(&r->cv, &r->mu, &until) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&r->mu);
    }
    return NULL;
}

int retention_start(const retention_opts *o, retention **out, char *err, size_t errlen)
{
    *out = NULL;
    if (o->retention_s <= 0 && !o->tenants_only)
        return STATUS_OK;
    retention *r = calloc(1, sizeof *r);
    if (r == NULL)
        return STATUS_ENOMEM;
    r->o = *o;
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    snprintf(r->owner, sizeof r->owner, "%s:%d:retention", host, (int)getpid());
    if (store_open(o->redis_url, o->graph, o->timeout_ms, &r->st) != STATUS_OK) {
        snprintf(err, errlen, "the retention pass cannot reach the database");
        free(r);
        return STATUS_EUNAVAILABLE;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (pthread_create(&r->thread, NULL, retention_main, r) != 0) {
        store_close(r->st);
        free(r);
        return STATUS_ENOMEM;
    }
    *out = r;
    return STATUS_OK;
}

void retention_stop(retention *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    atomic_store(&r->stopping, true);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    store_close(r->st);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}
