/*
 * approval.h - human approval of a delivery (docs/runs.md "Human approval").
 *
 * A workflow may ask a named human actor to approve a send with a tool or to a recipient. The
 * delivery protocol (deliver.c) then holds a send the gate allowed instead of committing it:
 * approval_request stores the commit it would have made, with the decision's facts and a
 * deadline on the database clock. approval_decide, called by an operator on behalf of that
 * human, commits it through charter_commit_delivery inside the same atomic call that marks the
 * approval decided, so the re-check (revocation, expiry, payload bytes, invocation unused)
 * happens on the database clock at that moment, and approve, deny, expiry and a revocation
 * racing each other leave exactly one outcome and one event. Nothing here decides from a
 * process-local state; any number of charterd processes may decide the same approval.
 */
#ifndef CHARTER_APPROVAL_H
#define CHARTER_APPROVAL_H

#include <jansson.h>

#include "evidence/evlog.h"
#include "db/store.h"

/* "ap-" and 32 hex digits of the SHA-256 of the invocation ID: one approval per invocation. */
void approval_id_of(const char *invocation_id, char id[36]);

/* Stores the approval doc (charter_request_approval's argument, queries/approvals.lua) with
 * requested, the approval_requested event of run_id, sealed here. *reply is the function's
 * reply whatever its status (pending, the state of an existing approval, conflict, exists);
 * caller decrefs. Returns STATUS_OK, or as evlog_append (STATUS_EUNAVAILABLE: whether it was
 * stored is unknown; the same request again finds it). */
int approval_request(store *st, const char *run_id, const json_t *doc, const evlog_event *requested,
                     json_t **reply);

/* Decides approval id: decision "approve" or "deny", by actor (a human actor id), with reason
 * (may be NULL). On success *reply is charter_decide_approval's reply with status "approved"
 * (and "delivery", whose receipt is issued here when charterd has an integrity key),
 * "denied", "expired" or "refused" (with "refusal"); caller decrefs. Returns STATUS_OK,
 * STATUS_ENOTFOUND (no such approval), STATUS_EDENIED (actor is not its approver; *reply
 * still set), STATUS_EREFUSED (decided before: *reply holds the approval as it stands),
 * STATUS_EINVAL, or the store's failure (STATUS_EUNAVAILABLE: the outcome is unknown; the
 * approval, read again, tells it). */
int approval_decide(store *st, const char *id, const char *decision, const char *actor,
                    const char *reason, json_t **reply);

#endif
