/*
 * limits.h - the limits every call and every gate operation is held to.
 *
 * One read-only value, filled once at startup from the command line (main/config.c) and
 * handed down to the gates, the run executors and the RPC layer, which all sit above core/ and
 * so may read it without reaching up into the program's option parsing.
 */
#ifndef CHARTER_LIMITS_H
#define CHARTER_LIMITS_H

#include <stddef.h>

/* Limits every call and every gate operation is held to; set once at startup from the
 * configuration (config_limits_of) and read-only afterwards. */
typedef struct {
    size_t max_message;     /* bytes of one encoded RpcRequest (default 4 MiB) */
    size_t max_ancestry;    /* artifacts one ancestry query may return (default 10000) */
    size_t max_ids;         /* artifact ids in one request (default 1000) */
    size_t max_content;     /* bytes of one artifact's content (default 1 MiB) */
    int default_timeout_ms; /* when the request carries none (default 5000) */
    int max_timeout_ms;     /* upper bound on a request's timeout (default 60000) */
    int durable_ack;        /* replicas a committed delivery waits for (WAIT); 0: none */
} service_limits;

#endif
