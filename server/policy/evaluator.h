/*
 * evaluator.h - the evaluator: the decision functions the live gates and replay share, its
 * fingerprint, and the replay of one recorded decision event from the facts it recorded.
 *
 * A gate decides in two halves: gathering facts from the graph, then turning facts into a
 * decision. The second half lives here and is called by gate.c and deliver.c as they decide
 * and by replay as it decides again from an event's snapshot, so a replay runs the very code
 * that decided, never a graph query. The step capability the gate acted under (narrowed or
 * not) is one of the recorded facts. The evaluator is named by a declared version, which
 * names its behaviour, and the workflow it decides under; replay runs the evaluator of the
 * version the event records and is refused when this build does not have it.
 */
#ifndef CHARTER_EVALUATOR_H
#define CHARTER_EVALUATOR_H

#include <jansson.h>
#include <stdbool.h>

#include "policy/guard.h"
#include "policy/facts.h"
#include "policy/workflow.h"

#include "core/status.h"

/* The evaluator version this build decides by. A version names behaviour, not source: which
 * verdict (outcome, codes, witness) each set of recorded facts gets. Editing guard.c, this
 * module or the query library without changing a verdict keeps the version; a change that
 * alters a verdict bumps it and keeps the previous version's evaluator for replay
 * (docs/evidence.md "Adding an evaluator version"), and tests/golden/ fails until it does.
 * 2 is the first declared version: 1 stands for the evaluator before versions were declared,
 * whose fingerprint (format charter-evaluator-1) hashed the guard's and the query library's
 * source bytes. Every decision snapshot records the version it was decided by
 * ("evaluator_version"). */
#define EVALUATOR_VERSION 3

/* The declared versions this build replays, oldest first, into versions (at most max of
 * them); returns how many there are. The last is EVALUATOR_VERSION. */
size_t evaluator_versions(int *versions, size_t max);

/* True when this build has the evaluator of declared version version. */
bool evaluator_version_declared(int version);

/* The fingerprint of evaluator version version deciding under the workflow whose version (the
 * hex SHA-256 of its definition's bytes) is workflow_version: hex SHA-256 over the text
 * "charter-evaluator-2\n", "version=<version>\n", "workflow=<workflow_version>\n" (format 2:
 * no source bytes), into hex (65 bytes). Thread-safe (each thread keeps the last one it
 * computed). Returns 0, or -1 when OpenSSL failed, version is not positive or workflow_version
 * is NULL or longer than 128 bytes (hex is then all zeros). */
int evaluator_fingerprint_at(int version, const char *workflow_version, char hex[65]);

/* evaluator_fingerprint_at(EVALUATOR_VERSION, version): the fingerprint this build records on
 * a decision made under the workflow whose version is version. Thread-safe. */
int evaluator_fingerprint_of(const char *version, char hex[65]);

/* evaluator_fingerprint_of(wf->version). */
int evaluator_fingerprint(const workflow *wf, char hex[65]);

/* The capability cap as the "cap" of a snapshot: {step,actor,grant,tools,recipients,resources}
 * (new reference, or NULL when memory ran out). */
json_t *evaluator_cap_json(const guard_stepcap *cap);

/* --- the deciding half of each gate (shared with the live gates) -------------------------- */

/* The input gate over raw ancestry replies (a JSON list, one charter_ancestry reply per
 * artifact, null where the graph could not supply it) for capability cap in context ctx: the worst
 * verdict over all of them (DENY before UNKNOWN before ALLOW), codes merged, the first
 * witness of the worst kept; when every one is allowed, *conf and *integrity are the labels
 * of an output derived from all of them (max, min). ids (may be NULL) names each ancestry's
 * root; NULL takes the reply's own root. d is overwritten. Returns 0 or STATUS_ENOMEM. */
int evaluator_input_decide(const guard_stepcap *cap, const guard_context *ctx,
                           const json_t *ancestries, const char *const *ids, guard_decision *d,
                           int *conf, int *integrity);

/* The source gate: resource_id may be read under capability cap only when it has the read_source
 * tool (else DENY STEP_MISMATCH) and lists the resource (else DENY RESOURCE_OUT_OF_SCOPE).
 * d is overwritten. Returns 0, or -1 when the witness could not be allocated (d is then
 * UNKNOWN). */
int evaluator_source_decide(const guard_stepcap *cap, const char *resource_id, guard_decision *d);

/* The delivery gate: DENY PROVENANCE_INCOMPLETE when the payload's stored content does not
 * hash to its stored hash (content_hash is the hex SHA-256 of the content as read, "" when
 * there was none), else guard_check_delivery. d is overwritten. Returns 0, or -1 on allocation
 * failure (d is then UNKNOWN). */
int evaluator_delivery_decide(const guard_stepcap *cap, const guard_context *ctx,
                              const guard_delivery_request *req, const guard_ancestry *anc,
                              const guard_chain *chain, double now, const char *payload_hash,
                              const char *content_hash, guard_decision *d);

/* The facts of a tool invocation decoded for the guard: the request (strings borrowed from the
 * request JSON), every summary once, each argument's lineage pointing into them, the chain. */
typedef struct {
    guard_invoke_request req;
    guard_invoke_arg *args;
    guard_summary *sums; /* one per entry of the summaries JSON */
    size_t n_sums;
    const guard_summary **lineage; /* every argument's lineage, one after the other */
    guard_chain chain;
    bool have_chain;
} evaluator_invoke_facts;

/* Decodes the facts of an invocation as a snapshot records them: request {run_id, tool,
 * declared, grant, destination_arg, destination_value, destination (null: none matched),
 * clearance, arguments:[{name, role, from_task, lineage:[ids]}]}, summaries (a JSON list of
 * charter_lineage_summary replies; an id no entry names decides UNKNOWN) and chain (a
 * charter_grant_chain reply, or null). The request, summaries and chain JSON must outlive *f.
 * Returns STATUS_OK, STATUS_EPROTO (malformed), STATUS_ENOMEM; free with
 * evaluator_invoke_facts_free (safe on a zeroed or failed one). */
int evaluator_invoke_facts_from(const json_t *request, const json_t *summaries, const json_t *chain,
                                evaluator_invoke_facts *f);
void evaluator_invoke_facts_free(evaluator_invoke_facts *f);

/* The tool-call gate (Gate/Invoke): guard_check_invoke over f at now (seconds since the epoch).
 * d is overwritten; on ALLOW its chain_order and sources borrow from f. Returns 0, or -1 on
 * allocation failure (d is then UNKNOWN). */
int evaluator_invoke_decide(const guard_stepcap *cap, const guard_context *ctx,
                            const evaluator_invoke_facts *f, double now, guard_decision *d);

/* The host identity check (RULE-HOST-IDENTITY): guard_check_identity over the recorded facts.
 * d is overwritten. Returns 0, or -1 on allocation failure (d is then UNKNOWN). */
int evaluator_identity_decide(const guard_identity *facts, guard_decision *d);

/* --- replay ------------------------------------------------------------------------------ */

typedef struct {
    guard_decision replayed; /* unset (zero) when no_snapshot */
    bool no_snapshot;        /* the event records no facts: nothing to replay */
    bool matches;            /* same outcome, codes and witness as recorded */
    int version;             /* the declared evaluator version it was replayed with (0 when
                                no_snapshot) */
    bool before_versions;    /* recorded before evaluator versions were declared: its
                                fingerprint names source bytes no build can recompute, so it
                                was replayed with the first declared version and only
                                matches says whether that evaluator agrees */
} evaluator_replay_result;

/* Decides event (an event object as charter_get_event returns it) again from its snapshot,
 * with the evaluator of the declared version the snapshot records ("evaluator_version"),
 * under the capability the snapshot records. The event's evaluator fingerprint must be
 * evaluator_fingerprint_at that version and the workflow version the snapshot records
 * (evaluator, this process's default, when it records none). A snapshot that records no
 * version was decided before versions were declared: it is replayed with the first declared
 * version (out->before_versions), unless its fingerprint is a declared version's (the version
 * was taken out of it: STATUS_ESNAPSHOT). An event without a snapshot is answered
 * no_snapshot: there are no facts, so nothing is evaluated. Returns STATUS_OK with *out filled
 * (free with evaluator_replay_result_free); STATUS_ENOTDECISION; STATUS_EFINGERPRINT (a version
 * this build does not have, or a fingerprint that is not the recorded version's: why names
 * the versions or both fingerprints); STATUS_ESNAPSHOT (why says what is malformed);
 * STATUS_ENOMEM. why has n bytes. */
int evaluator_replay(const char *evaluator, const json_t *event, evaluator_replay_result *out,
                     char *why, size_t n);

void evaluator_replay_result_free(evaluator_replay_result *r);

/* --- what if: recorded facts decided under a candidate workflow -------------------------- */

/* A candidate workflow as a what-if decides under it: its step capabilities and its labels
 * (resource confidentiality and integrity, recipient clearance). */
typedef struct {
    const workflow *wf; /* borrowed: kept alive by the caller while the candidate is used */
    json_t *labels;     /* workflow_seed_json(wf) (owned) */
} evaluator_candidate;

/* Prepares *cand for wf. Returns STATUS_OK or STATUS_ENOMEM; free with evaluator_candidate_free
 * (safe on a zeroed candidate). */
int evaluator_candidate_init(const workflow *wf, evaluator_candidate *cand);
void evaluator_candidate_free(evaluator_candidate *cand);

/* The workflow version the snapshot of event records into version (65 bytes). Returns
 * STATUS_OK, or STATUS_ENOTFOUND when the event has no snapshot or the snapshot names none. */
int evaluator_replay_workflow(const json_t *event, char version[65]);

typedef struct {
    guard_decision decided; /* under the candidate; unset (zero) when no_snapshot */
    bool no_snapshot;       /* the event records no facts: nothing is decided */
    bool changed;           /* outcome or codes differ from the recorded decision */
    char gate[16];          /* "input", "source", "delivery" or "identity" */
    char step[72];          /* the step the decision was made for */
    char subject[136];      /* the delivery's recipient, the source's resource, the host
                               credential of an identity check, or "" */
} evaluator_whatif_result;

/* Decides event (as charter_get_event returns it, snapshot resolved) again from its snapshot
 * under the candidate, with the current guard: the capability is the candidate's step of the
 * same name (DENY STEP_MISMATCH when it has none), still narrowed to the recorded lists when
 * the recorded capability was narrower than recorded's step of that name (or recorded is
 * NULL: the recording workflow is unknown, so the recorded lists bound it); a delivery's
 * recipient clearance and every source resource's labels are the candidate's (-1, a missing
 * fact, for a recipient or resource it does not define), and an artifact label that agreed with
 * the recorded facts is recomputed under the candidate's (one that disagreed still disagrees).
 * The grant chain, the context, the payload and the database time are the recorded ones. A
 * host identity check keeps its recorded facts, except that a step it opened is owned by the
 * candidate's actor of that step (DENY STEP_MISMATCH when it has none); a check on a run as a
 * whole (Runs/CompleteRun) keeps its recorded owners. No fingerprint check: a what-if asks
 * what this evaluator would decide. Returns STATUS_OK with
 * *out filled (free with evaluator_whatif_result_free); STATUS_ENOTDECISION; STATUS_ESNAPSHOT
 * (why says what is malformed); STATUS_ENOMEM. why has n bytes. */
int evaluator_whatif(const evaluator_candidate *cand, const workflow *recorded, const json_t *event,
                     evaluator_whatif_result *out, char *why, size_t n);

void evaluator_whatif_result_free(evaluator_whatif_result *r);

#endif
