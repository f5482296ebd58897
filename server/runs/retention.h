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

typedef struct {
    bool held;                /* this pass held the lease (else nothing was looked at) */
    unsigned archived;        /* runs archived and removed */
    unsigned failed;          /* runs due whose archive or removal failed (they stay) */
    unsigned long long bytes; /* bytes of the archives written */
    long long oldest_s;       /* age of the oldest ended run left in Redis, seconds (0: none) */
    long long used_memory;    /* the database's used_memory after the pass, bytes (-1: unread) */
} retention_result;

/* One pass over st's graph as owner: archives into archive_dir/<graph>/<YYYY-MM-DD>/ every run
 * that ended more than retention_s seconds ago (database time). Records the figures in the
 * metrics and logs one line. Returns STATUS_OK (*out filled, also when the lease is another's)
 * or the store's failure reading the graph. */
int retention_pass(store *st, const char *owner, long long retention_s, const char *archive_dir,
                   retention_result *out);

typedef struct retention retention;

typedef struct {
    const char *redis_url;   /* borrowed for the thread's life */
    const char *graph;       /* the graph archived */
    const char *archive_dir; /* the archive folder (borrowed) */
    int timeout_ms;          /* each database command's bound, milliseconds */
    long long retention_s;   /* 0: no thread is started */
} retention_opts;

/* Starts the thread that runs a pass every quarter of the retention period (between 1 and 60
 * seconds). Returns STATUS_OK with *out (NULL when retention_s is 0; free with retention_stop),
 * STATUS_EUNAVAILABLE (the connection; err says why), STATUS_ENOMEM. */
int retention_start(const retention_opts *o, retention **out, char *err, size_t errlen);

/* Stops and joins the thread (a pass in progress ends after its current run). NULL: no-op. */
void retention_stop(retention *r);

#endif
