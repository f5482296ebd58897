/*
 * status.h - the one status vocabulary of charterd's domain.
 *
 * Every module of the server (store, gates, delivery, evidence, replay, runner, registry)
 * returns 0 or one of these negative codes; none keeps a private list. They are mapped to the
 * wire's gRPC status numbers in exactly one function (call_fail_status in call.c), as NNG maps
 * its nng_err values in one place.
 */
#ifndef CHARTER_STATUS_H
#define CHARTER_STATUS_H

enum {
    STATUS_OK = 0,
    /* The database and its replies. */
    STATUS_ENOMEM = -1,       /* allocation failed */
    STATUS_EUNAVAILABLE = -2, /* could not reach Redis, I/O error or timeout: effect unknown */
    STATUS_ENOTFOUND = -3,    /* the named object does not exist */
    STATUS_EREFUSED = -4,     /* a conditional write refused (commit, status transition) */
    STATUS_EEXISTS = -5,      /* the object exists already (invocation ID, run ID) */
    STATUS_EINVAL = -6,       /* the function rejected its arguments */
    STATUS_EPROTO = -7,       /* the reply was not what the library documents */
    STATUS_ELIMIT = -8,       /* a size limit of the query was reached */
    /* The gates. */
    STATUS_EDENIED = -20, /* a rule refuses the request outright (a scope that would widen) */
    /* Replay. */
    STATUS_ENOTDECISION = -30, /* the event records no decision (no outcome) */
    STATUS_EFINGERPRINT = -31, /* another evaluator decided it */
    STATUS_ESNAPSHOT = -32,    /* the snapshot cannot be decoded */
    /* Evidence. */
    STATUS_ENOKEY = -40, /* no integrity key: nothing can be sealed or signed */
    /* The run is not at rest (completed, blocked, error, cancelled or budget_exhausted). */
    STATUS_ENOTENDED = -41,
};

#endif
