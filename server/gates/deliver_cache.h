/*
 * deliver_cache.h - the immutable facts of recent sends, kept per worker thread, so a send
 * repeated with another invocation ID is decided before its one database call.
 *
 * Through the API nothing changes a completed context, an artifact (its fields, edges and
 * lineage summary), a workflow version, a recipient's clearance or a grant's structure after
 * they are written: those facts are kept here, taken from a fresh read that allowed a send
 * (deliver.c). Nothing that can change is kept: the revocation of a grant, the run's state and
 * budget, the invocation and the run's head are read only by the commit, which also compares
 * the payload's own node and edges and the context's owners with what was decided from (a
 * grant's delegated_from edges it does not read: charter audit compares them with the workflow)
 * (queries/delivery.lua, charter_commit_delivery "cached"). When it refuses, the send is read
 * afresh and decided again, and its entry is dropped.
 *
 * One table per thread: the guard's structs are read by the thread that decides with them, so
 * nothing here is shared or locked. A table holds DELIVER_CACHE_SLOTS entries; a new one
 * replaces the oldest.
 */
#ifndef CHARTER_DELIVER_CACHE_H
#define CHARTER_DELIVER_CACHE_H

#include <stdbool.h>

#include "policy/guard.h"
#include "policy/workflow.h"

#define DELIVER_CACHE_SLOTS 64

/* What one send was decided from, and the parts of its commit and record that do not change
 * from one invocation to the next. Every pointer is owned by the entry except wf and step,
 * which the registry keeps until exit. */
typedef struct {
    guard_context ctx; /* the context as read (facts_context_free) */
    const workflow *wf;
    const workflow_step *step; /* the context's step, narrowed to its scope */
    char evaluator[65];        /* the evaluator fingerprint under wf */
    guard_summary sum;         /* the payload's verified summary with its facts as read */
    guard_chain chain;         /* the step's grant chain as read, unrevoked */
    int clearance;             /* the recipient's */
    char *content;             /* the payload's stored bytes */
    char payload_hash[65];     /* its recorded hash */
    char content_sha256[65];   /* hex SHA-256 of content */
    char fingerprint[65];      /* the send's (deliver_fingerprint) */
    char *facts;               /* the facts record the decision snapshot names */
    char facts_sha[65];
    /* The commit's argument without its invocation ID and decision time: the members of
     * "cached" after decided_at, and the rest of the document, each as JSON text without its
     * opening brace (deliver.c splices them). */
    char *cached_rest;
    char *doc_rest;
} deliver_cached;

/* The entry of this thread for the send (graph, context, payload, recipient, tool), or NULL.
 * Valid until this thread's next deliver_cache_put or deliver_cache_drop. */
const deliver_cached *deliver_cache_find(const char *graph, const char *context_id,
                                         const char *payload_id, const char *recipient,
                                         const char *tool);

/* Keeps e (taking everything it owns, e is zeroed) for the send named; it replaces an entry
 * of the same send, else the oldest. On failure (memory) e is freed. */
void deliver_cache_put(const char *graph, const char *context_id, const char *payload_id,
                       const char *recipient, const char *tool, deliver_cached *e);

/* Forgets this thread's entry for the send, if any. */
void deliver_cache_drop(const char *graph, const char *context_id, const char *payload_id,
                        const char *recipient, const char *tool);

/* Frees what e owns and zeroes it. */
void deliver_cached_free(deliver_cached *e);

#endif
