/*
 * deliver.h - the delivery protocol (DESIGN.md "Delivery protocol").
 *
 * deliver_send runs three phases, one function each in deliver.c, and frees what they built in
 * one place:
 *
 * 1. Lookup (send_lookup): every fact in one read (delivery_facts with the context and the
 *    run's head; a second read only for a context that recorded no grant, or another one
 *    than its step's). An invocation already committed answers for itself: the same
 *    fingerprint is acknowledged (no new effect, even after a revocation); another
 *    fingerprint is DENY DELIVERY_CONFLICT. A context the database does not have may be one
 *    of an archived run: with an archive folder, the run's archive answers (archived.h).
 * 2. Evaluate (send_evaluate): the guard over the facts (context owner, ancestry, grant chain,
 *    recipient), with the snapshot replay decides from; a refusal is recorded and answers.
 * 2b. Hold (send_hold): when the workflow asks a human to approve a send with this tool or to
 *    this recipient, an allowed send is not committed: its commit is stored as a pending
 *    approval (approval.h) and answers UNKNOWN with the approval; approval_decide commits it.
 * 3. Commit with retry (send_commit): on ALLOW, commit_delivery: one conditional write on the
 *    database clock, its event sealed on the run head read in 1 (a moved head costs one
 *    conflict reply carrying the current head, then a new seal). Refused gives UNKNOWN
 *    GRAPH_ERROR. A transient failure is retried up to DELIVER_ATTEMPTS times. A commit sent
 *    and left unanswered (I/O error, timeout) may have landed, or may still land later (a
 *    paused server runs what sits in its socket once it resumes): each commit keeps a reserve
 *    of the deadline for looking the invocation up on a fresh connection; found, it is
 *    acknowledged. Absence proves nothing, so when no attempt learns the outcome the answer is
 *    UNKNOWN GRAPH_ERROR EFFECT_UNKNOWN ("retry with the same invocation ID"), never a claim of
 *    no effect; plain UNKNOWN only when no commit was sent unanswered.
 */
#ifndef CHARTER_DELIVER_H
#define CHARTER_DELIVER_H

#include <jansson.h>
#include <stdbool.h>

#include "gates/gate.h"

typedef struct {
    guard_decision decision;
    json_t *delivery;  /* the committed (or acknowledged) delivery object, or NULL */
    bool acknowledged; /* an earlier delivery with the same invocation and fingerprint */
    /* --durable-ack N > 0: this call's commit was confirmed by N replicas (WAIT) before the
     * answer. False otherwise, including for an acknowledged earlier delivery. */
    bool durable;
    /* The human approval the send waits for or ended with (approval.h), or NULL: set, the
     * decision is UNKNOWN (pending, no effect yet) or DENY (denied, expired, refused). */
    json_t *approval;
    /* The check charter_commit_delivery refused the commit with ("budget_deliveries",
     * "grant_revoked", ...; queries/delivery.lua), "" when no commit was refused. Set, the
     * decision is UNKNOWN and nothing was delivered. An executor ends a run whose commit was
     * refused for "budget_deliveries" budget_exhausted (runner.c). */
    char refused[32];
    /* A send through a context the database does not have, with an archive folder
     * (archived.h): the context's OWNED_BY actors as its run's archive holds them (owned, for
     * the host identity check), or NULL; and when deliver_send returns STATUS_ENOTFOUND after
     * looking in the archive, why in words ("" when it did not look). */
    json_t *archive_owners;
    char not_found[512];
} deliver_result;

/* Attempts count of commit_delivery before giving up with GRAPH_ERROR. */
#define DELIVER_ATTEMPTS 3

/* At most this many milliseconds of a call's deadline are held back from each commit for the
 * lookup that learns the outcome of a commit that went unanswered (a fifth of what remains
 * when that is less). */
#define DELIVER_LOOKUP_RESERVE_MS 200

/* Runs the protocol for one send. Returns STATUS_OK with out filled (any outcome, also one
 * answered from an archived run's file), STATUS_ENOTFOUND for an unknown context (or payload;
 * out->not_found says why when the archive was looked in), STATUS_EREFUSED for a context of a
 * completed run,
 * STATUS_EINVAL for a malformed invocation ID (1..128 of [A-Za-z0-9._:-]), STATUS_ENOMEM. out is
 * freed with deliver_result_free. */
int deliver_send(const gate_env *g, const char *context_id, const char *payload_id,
                 const char *recipient, const char *tool, const char *invocation_id,
                 deliver_result *out);
void deliver_result_free(deliver_result *r);

/* The send answered from the archive of the run its context belonged to only, never from the
 * database (archived.h): for a host whose identity check found no such context, so nothing
 * can be delivered through a context created meanwhile. g->archive_dir must be set. Returns
 * STATUS_OK with out answered, STATUS_ENOTFOUND (out->not_found says why), STATUS_EINVAL,
 * STATUS_ENOMEM. */
int deliver_archived(const gate_env *g, const char *context_id, const char *payload_id,
                     const char *recipient, const char *tool, const char *invocation_id,
                     deliver_result *out);

/* Hex SHA-256 fingerprint of a send: run, payload hash, recipient, tool and grant, each length
 * prefixed so no two sends share one. The run is part of it because invocation IDs are unique
 * per graph: another run's delivery under the same ID is a conflict, never this run's receipt. */
void deliver_fingerprint(const char *run_id, const char *payload_hash, const char *recipient,
                         const char *tool, const char *grant, char hex[65]);

#endif
