/*
 * serving.h - the serving status Health answers from: is the database up and does it hold this
 * charterd's query library, as one database round trip found it at most SERVING_FRESH_MS ago.
 *
 * A monitor thread with its own store makes that round trip (store_ping) every
 * SERVING_PERIOD_MS, so a Health call answered on NNG's callback thread needs neither a worker
 * nor the database. The status is dated by when its round trip began; one older than
 * SERVING_FRESH_MS (the monitor is stuck on a database that stopped answering) reads as
 * "unreachable", so a stale "up" is never reported.
 */
#ifndef CHARTER_SERVING_H
#define CHARTER_SERVING_H

#include <stddef.h>

/* How often the monitor pings the database, milliseconds. */
#define SERVING_PERIOD_MS 100
/* The oldest round trip a status may come from, milliseconds: the bound on Health's staleness
 * documented in proto/charter.proto (HealthResponse) and docs/operator.md. */
#define SERVING_FRESH_MS 250

typedef struct serving serving;

/* Opens the monitor's store on redis_url for graph, makes the first round trip and starts the
 * monitor thread. Returns 0 with *out set (free with serving_stop), or -1 with one line
 * "<what is wrong> (<how to fix>)" in err and nothing left running. */
int serving_start(const char *redis_url, const char *graph, serving **out, char *err,
                  size_t errlen);

/* The status: STATUS_OK (the database answered and holds the library), STATUS_EPROTO (it
 * answered without the library, or with another version of it), or STATUS_EUNAVAILABLE (it did
 * not answer, or the last answer is older than SERVING_FRESH_MS). Lock-free; any thread. */
int serving_status(const serving *s);

/* Stops the monitor thread (at most one round trip's timeout) and frees s. NULL is ignored. */
void serving_stop(serving *s);

#endif
