/*
 * executor.h - the executor threads that drive scripted and live runs.
 *
 * A run never occupies an RPC worker: CreateRun (and RecoverRun, for a recovery) queues it in
 * the database, and one executor thread of whichever charterd serving the graph claims it
 * first, under a lease on the database's clock that it renews while the run executes. Each thread
 * has its own store connection. The same threads reap lapsed leases: a run whose holder died
 * becomes interrupted, whichever charterd notices first.
 */
#ifndef CHARTER_EXECUTOR_H
#define CHARTER_EXECUTOR_H

#include "core/limits.h"
#include "db/store.h"
#include "policy/workflow.h"

/* How long one lease renewal holds a run, in milliseconds: a holder that stops renewing loses
 * the run this long after its last renewal. */
#define EXECUTOR_LEASE_MS 4000

typedef struct executor executor;

typedef struct {
    const char *redis_url;        /* the database (borrowed for the executor's life) */
    const char *graph;            /* the graph served */
    int timeout_ms;               /* each database command's bound, milliseconds */
    unsigned threads;             /* executor threads, 0..64 (0: start nothing) */
    const service_limits *limits; /* borrowed for the executor's life */
} executor_opts;

/* Opens one store connection per thread and starts the threads. Returns STATUS_OK with *out
 * (free with executor_stop; NULL when threads is 0), STATUS_EUNAVAILABLE when a connection
 * could not be opened (err says which), STATUS_ENOMEM. */
int executor_start(const executor_opts *opts, executor **out, char *err, size_t errlen);

/* Releases the leases held by executors of this host whose process no longer exists (a
 * charterd killed and restarted before its lease lapsed), so that startup marks their runs
 * interrupted at once. Leases of other hosts are left to lapse. Returns STATUS_OK, or the
 * store's status (nothing is decided from a failed read). n_released (may be NULL) gets the
 * count. */
int executor_release_dead_local(store *st, size_t *n_released);

/* Stops the threads: a run in progress ends interrupted at its next check (a model request in
 * flight is aborted). Joins every thread and closes its connection. NULL is a no-op. */
void executor_stop(executor *ex);

#endif
