/*
 * retention.h - the retention pass: ended runs older than the retention period leave Redis for
 * their archive files (docs/archive.md, docs/operator.md "Retention").
 *
 * One charterd at a time archives a graph (charter_retention_lease, on the database's clock);
 * the others' passes find the lease held and do nothing. For each ended run past the period the
 * pass writes its archive, flushes it to disk, reads it back and verifies it, and only then
 * removes the run in one call (archive_run.h). A run whose archive fails stays in Redis and is
 * tried again by the next pass.
 */
#ifndef CHARTER_RETENTION_H
#define CHARTER_RETENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "db/store.h"

/* How long one claim of the retention lease holds, in milliseconds (renewed before each run). */
#define RETENTION_LEASE_MS 60000

/* A graph's periods, in seconds: ended runs are archived retention_s after they end, and the
 * compact record of each invocation they committed stays in the database at least
 * invocation_window_s after that (0: forever; docs/operator.md "Retention"). */
typedef struct {
    long long retention_s;
    long long invocation_window_s;
} retention_period;

typedef struct {
    bool held;                /* this pass held the lease (else nothing was looked at) */
    unsigned archived;        /* runs archived and removed */
    unsigned failed;          /* runs due whose archive or removal failed (they stay) */
    unsigned long long bytes; /* bytes of the archives written */
    long long oldest_s;       /* age of the oldest ended run left in Redis, seconds (0: none) */
    long long used_memory;    /* the database's used_memory after the pass, bytes (-1: unread) */
    long long kept;           /* compact invocation records the graph keeps after the pass
                               * (charter_archived_invocations; -1: unread) */
} retention_result;

/* One pass over st's graph as owner: archives into archive_dir/<graph>/<YYYY-MM-DD>/ every run
 * that ended more than p->retention_s seconds ago (database time), keeping the compact records
 * of their invocations for p->invocation_window_s. Records the figures in the metrics and logs
 * one line. Returns STATUS_OK (*out filled, also when the lease is another's) or the store's
 * failure reading the graph. */
int retention_pass(store *st, const char *owner, const retention_period *p, const char *archive_dir,
                   retention_result *out);

/* One round over every graph this charterd serves: the default graph (st's) with dflt, then
 * each tenant of the registry with its own periods (Tenant.quotas.retention_seconds and
 * invocation_window_seconds), or dflt's where it has none; a graph whose retention period is
 * 0 is left alone. Sets the metrics' gauges for the round (the oldest ended run left over all
 * graphs, the compact records kept summed over them). *shortest_s gets the shortest retention
 * period in force (0: none). Returns STATUS_OK or the last pass's failure. */
int retention_round(store *st, const char *owner, const retention_period *dflt,
                    const char *archive_dir, long long *shortest_s);

typedef struct retention retention;

typedef struct {
    const char *redis_url;         /* borrowed for the thread's life */
    const char *graph;             /* the graph archived */
    const char *archive_dir;       /* the archive folder (borrowed) */
    int timeout_ms;                /* each database command's bound, milliseconds */
    long long retention_s;         /* the default graph's period, and a tenant's without its own */
    long long invocation_window_s; /* the same for the invocation window (0: forever) */
    bool tenants_only;             /* retention_s 0: the thread still archives the tenants with a
                                    * period of their own (else none is started) */
} retention_opts;

/* Starts the thread that runs a round (retention_round) every quarter of the shortest period in
 * force (between 1 and 60 seconds; 5 seconds when none is). Returns STATUS_OK with *out (NULL when
 * retention_s is 0 and not tenants_only; free with retention_stop), STATUS_EUNAVAILABLE (the
 * connection; err says why), STATUS_ENOMEM. */
int retention_start(const retention_opts *o, retention **out, char *err, size_t errlen);

/* Stops and joins the thread (a pass in progress ends after its current run). NULL: no-op. */
void retention_stop(retention *r);

#endif
