/*
 * audit.h - checking a run's event hash chain and its run receipt against the graph, as an
 * auditor would after the fact: the first event that was changed, removed or inserted is
 * named, with the seq where the chain stops holding.
 *
 * The walk reads pages of the run's events (charter_audit_events), recomputes each event's hash
 * over its canonical text (evlog_event_hash) and follows the prev links; it writes nothing.
 */
#ifndef CHARTER_AUDIT_H
#define CHARTER_AUDIT_H

#include <stdbool.h>
#include <stdint.h>

#include "db/store.h"

typedef struct {
    bool intact;
    uint64_t events;        /* events examined */
    uint64_t first_bad_seq; /* 0 when intact */
    char problem[256];      /* "" when intact */
    bool keyed;             /* hashes are HMACs under the integrity key */
    uint64_t keyless_until; /* events up to this seq are plain SHA-256 (keyadopt.h); 0: none */
} audit_result;

/* Walks run_id's chain page by page (charter_audit_events) and names the first event that was
 * changed (its stored hash is not the hash of its fields, or its head hash differs), removed
 * (a place up to the run's seq holds no event; an event whose own hash holds but whose prev
 * is an earlier event's hash; the run's receipt or a delivery names a seq beyond the head) or
 * inserted (an event stored beyond the run's head, in one of the 8 places after it; an event
 * whose prev links to no event before it), or whose recorded facts cannot be read back (a snapshot
 * blob, facts record or lineage record its snapshot names is gone or no longer hashes to its
 * name: evlog_snapshot_resolve). A run receipt is only trusted when its MAC checks under
 * the integrity key (integrity_receipt_check). When the chain holds, every lineage summary of
 * the run's artifacts is re-derived bottom-up from the raw graph (charter_audit_summaries) and
 * the first artifact, in creation order, whose stored summary differs or is missing, or (with
 * an integrity key) whose seal is missing or does not verify (summary_seal.h), is named in
 * problem (first_bad_seq 0): a summary edited or deleted, a seal deleted or forged, or an edge,
 * label or producer deeper than a payload changed behind the API's back, none of which a
 * decision reads. A run whose keyless graph adopted the integrity key (keyadopt.h) has its events
 * up to the mark checked as plain SHA-256, the last of them against the hash the adoption
 * sealed, and the mark's seal under the key (keyless_until says where). With an integrity key,
 * before the summaries, every receipt attached to an effect of the run (a delivery, or a tool
 * call's effect) must verify, name the effect as stored (invocation, run, digest,
 * destination, tool, grant chain and, for a tool call, the lineage its commit kept), and a
 * tool call's stored arguments must still hash to the digest it names; the first that does
 * not is named at the effect's event. When the summaries and contents hold, the nodes the run's
 * workflow declares (the seed charterd writes when it is applied: resources, recipients,
 * actors, grants with their edge sets, lists and validity window) are compared with the graph
 * (charter_seed_clash): the first that differs or is missing is named in problem (first_bad_seq
 * 0), with the workflow's name and version; a grant's revocation is not compared, and a run
 * that follows no workflow has none to compare. Returns STATUS_OK with *out filled,
 * STATUS_ENOTFOUND, or the store's failure. */
int audit_chain(store *st, const char *run_id, audit_result *out);

#endif
