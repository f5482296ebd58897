/*
 * metrics.h - what charterd is doing, as counters an operator scrapes: `GET /metrics` on the
 * HTTP listener answers them in the Prometheus text exposition format (version 0.0.4).
 *
 * Every counter is a C11 atomic updated with relaxed order where the event happens (a call
 * finishes in dispatch, a decision event is made in evlog, a database command fails in store,
 * a request is queued or taken by a worker in transport), so a hook is one line and costs one
 * atomic add; nothing here takes a lock on the call path but the first call of a method, which
 * registers its row once. The figures are this process's since it started, never the
 * database's: several charterd processes are summed by the scraper.
 */
#ifndef CHARTER_METRICS_H
#define CHARTER_METRICS_H

#include <stddef.h>

/* One finished call: method is the routed "/charter.v1.<Service>/<Method>" (NULL or unknown
 * methods count as "unknown", so a caller cannot grow the table), code the gRPC status number
 * answered, us the time from the request's arrival at a worker to its reply, microseconds. */
void metrics_call(const char *method, int code, long us);

/* One decision about to be recorded: kind is the event kind ("input_checked" counts as gate
 * "input", "delivery_decided" as "delivery", "source_read" as "source", "output_recorded" as
 * "output", anything else as "other"), outcome
 * a guard_outcome (1 allow, 2 deny, 3 unknown), codes a bit set over guard_code (core/decision.h).
 */
void metrics_decision(const char *kind, int outcome, unsigned codes);

/* A database command failed or could not connect (store.c records the error). */
void metrics_db_error(void);

/* A worker's database connection was opened again after it had been dropped. */
void metrics_db_reconnect(void);

/* Requests waiting in the transport's queue for a worker: +1 when queued, -1 when taken. */
void metrics_queue_add(int delta);

/* Workers serving a call right now: +1 when one starts, -1 when it has answered. */
void metrics_workers_busy_add(int delta);

/* Size of the worker pool (a gauge set once at start). */
void metrics_set_workers(unsigned n);

/* A run entered status (a committed status change or a created run). Unknown statuses count
 * as "other". */
void metrics_run_status(const char *status);

/* One run archived and removed by this process's retention pass; bytes: its archive's size. */
void metrics_archived(unsigned long long bytes);

/* What the last retention pass read: the database's used_memory in bytes, the age in seconds
 * of the oldest ended run still in it (0 when none) and the compact records of archived
 * invocations it keeps (charter_archived_invocations); -1 for a figure not read. */
void metrics_set_retention(long long used_memory, long long oldest_s, long long kept);

/* The whole exposition as text into *out (malloc'd, NUL-terminated, caller frees) and its
 * length in bytes. Returns 0, or -1 when out of memory (nothing to free). */
int metrics_render(char **out, size_t *len);

#endif
