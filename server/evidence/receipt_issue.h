/*
 * receipt_issue.h - issuing receipts in charterd: a delivery's receipt right after its commit,
 * a run's receipt when the run ends, each MACed under the integrity key and, with a signing
 * key, signed with Ed25519 for its place in the run's receipt chain (proto/receipt.h defines
 * the texts), attached to the graph once, and read back for Evidence/GetReceipt.
 *
 * A receipt is stored as its JSON object text (proto field names, every field present: the
 * same document `charter --json receipt` prints and `charter verify-receipt` reads). A delivery
 * keeps the first receipt attached to it; a run keeps the receipt of its latest end. Without
 * an integrity key nothing is issued: receipt operations fail closed.
 */
#ifndef CHARTER_RECEIPT_ISSUE_H
#define CHARTER_RECEIPT_ISSUE_H

#include <jansson.h>

#include "charter.pb-c.h"
#include "db/store.h"

#include "core/status.h"

/* r as a receipt JSON object (new reference), or NULL when memory ran out. */
json_t *receipt_issue_json(const Charter__V1__Receipt *r);

/* Fills r from a receipt JSON object: strings borrowed from j (absent ones ""), the lists
 * grant_chain and deliveries malloc'd (free with receipt_issue_clear), last_seq a JSON
 * integer or a decimal string. Returns STATUS_OK, STATUS_EPROTO for a field of the wrong type,
 * STATUS_ENOMEM. */
int receipt_issue_parse(const json_t *j, Charter__V1__Receipt *r);
void receipt_issue_clear(Charter__V1__Receipt *r);

/* The receipt of delivery, a delivery object as the queries return it: the one attached to it
 * when there is one, else a new one (kind delivery, or invoke with the delivery's lineage when
 * it is an invocation's effect; time = committed_at, evaluator = the decision's fingerprint)
 * attached with charter_attach_receipt. *receipt is the receipt JSON object (caller decrefs). Returns STATUS_OK, STATUS_ENOKEY, STATUS_EPROTO for a delivery
 * that cannot be signed (a missing field), or the store's failure. */
int receipt_issue_delivery(store *st, const json_t *delivery, json_t **receipt);

/* The receipt of run_id's invocation_id: as receipt_issue_delivery for the delivery, which
 * must exist in the run (STATUS_ENOTFOUND otherwise). */
int receipt_issue_for_invocation(store *st, const char *run_id, const char *invocation_id,
                                 json_t **receipt);

/* The receipt of the run itself: the attached one when it still covers the run's last event,
 * else a new one (status, last seq, last event hash, sorted delivery invocation IDs, time of
 * the last event, this process's evaluator) attached when the run has ended. Returns STATUS_OK,
 * STATUS_ENOKEY, STATUS_ENOTENDED (status written to status, 32 bytes, when not
 * NULL), STATUS_ENOTFOUND, or the store's failure. */
int receipt_issue_run(store *st, const char *run_id, json_t **receipt, char status[32]);

#endif
