/*
 * transport.h - charterd's NNG listener and worker pool: one rep0 socket on every URL, a fixed
 * set of rep0 contexts ("slots") receiving requests, and worker threads, each owning one store
 * (its own hiredis connection), that dispatch them and reply on the slot that received them.
 */
#ifndef CHARTER_TRANSPORT_H
#define CHARTER_TRANSPORT_H

#include <stddef.h>

#include "rpc/dispatch.h"

/* Back-pressure: at most workers + queue requests are being served or waiting at once. A
 * request that arrives past that is answered at once with RESOURCE_EXHAUSTED by the slot that
 * received it; there are TRANSPORT_OVERFLOW_SLOTS more slots than that bound so the refusal
 * itself never waits for a worker. Beyond all slots, NNG leaves requests on their connections
 * until a slot is free. */
/* Slots beyond workers + queue, for answering RESOURCE_EXHAUSTED without waiting. */
#define TRANSPORT_OVERFLOW_SLOTS 8

typedef struct {
    const char *const *urls; /* tcp://host:port or ipc:///path, n_urls of them */
    size_t n_urls;
    unsigned workers;      /* worker threads, each with its own store */
    unsigned queue;        /* requests allowed to wait beyond the workers */
    size_t max_message;    /* bytes of one request; dispatch refuses larger ones with
                              RESOURCE_EXHAUSTED, NNG drops the connection of a message larger
                              than twice this before it is read into memory */
    const char *redis_url; /* for the workers' stores */
    const char *graph;
    int timeout_ms; /* connect timeout of the workers' stores */
    const dispatch_ctx *dispatch;
} transport_opts;

typedef struct transport transport;

/* Opens the workers' stores, the socket and the listeners (a stale ipc socket file is removed
 * first; ipc socket files are made mode 0600), then starts serving. On failure returns -1
 * with one line "<what is wrong> (<how to fix>)" in err and nothing is left running; if the
 * failure was reaching Redis, *db_failure is set to 1. */
int transport_start(const transport_opts *o, transport **out, int *db_failure, char *err,
                    size_t errlen);

/* The i-th listen URL as it is served: a tcp:// URL given port 0 carries the port the system
 * picked. Returns 0, or -1 when i is out of range or out is too small. */
int transport_listen_url(const transport *t, size_t i, char *out, size_t n);

/* Graceful stop: refuses new requests (UNAVAILABLE), lets every accepted request finish and
 * its reply go out, then closes the listeners and the socket, frees the stores and t. Blocks
 * until done. */
void transport_stop(transport *t);

#endif
