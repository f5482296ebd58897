/*
 * evlog.h - a run's event log as a hash chain, sealed in charterd: every event carries the
 * hash of the one before it (prev) and its own hash over a canonical text, SHA-256 or, with an
 * integrity key, HMAC-SHA256, so an event that was changed, removed or inserted shows.
 *
 * The key never leaves this process (integrity.c keeps it), so the hash is computed here, not in
 * Redis; audit.c walks a chain and names the first event that does not hold. Writing an
 * event is optimistic: read the run's head (seq, hash) and the database time with a read-only
 * query, seal the event as seq + 1 on that head, and let the writing function store it only if
 * the head is still the same; when it moved, the function writes nothing and answers with the
 * new head, and the event is sealed again (at most EVLOG_ATTEMPTS times, then the write fails
 * closed). Correctness rests on that conditional write alone, so any number of charterd
 * processes may write to one run. Within one process, writers of the same run also take a
 * per-run lock around read-seal-write, so a busy run's workers queue instead of starving each
 * other with conflicts; the lock is for throughput, never for safety.
 *
 * Every function here that writes goes through that loop: callers hand over an event (kind,
 * outcome, codes, witness, detail, snapshot) and the function's other arguments, nothing else.
 */
#ifndef CHARTER_EVLOG_H
#define CHARTER_EVLOG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/guard.h"
#include "db/store.h"
#include "evidence/event_text.h"

/* Seal-and-write attempts before a write that keeps meeting a moved head fails closed. Within
 * one process writers of a run queue on its lock; across processes a writer that lost re-seals
 * at once from the head the conflict reported, and still loses a race to another process's
 * next writer now and then (on a busy two-core host about one time in three), so the bound is
 * set where losing every time is practically impossible rather than merely unlikely. */
#define EVLOG_ATTEMPTS 64

/* An event to write; every text borrowed, NULL reads as "". detail and snapshot are stored
 * byte for byte (JSON texts made by evlog_json_text). evaluator is the fingerprint of the
 * evaluator that made the decision the event records (evaluator_fingerprint_of the workflow
 * version it acted under), "" for an event that records no decision. */
typedef struct {
    const char *kind;
    const char *outcome;
    const char *codes;
    const char *witness;
    const char *detail;
    const char *snapshot;
    const char *evaluator;
    /* detail carries the call's request id and caller already (evlog_owned_event put them in
     * as it encoded the detail), so sealing does not decode it to add them */
    bool detail_tagged;
} evlog_event;

/* An event whose texts it owns (made by evlog_owned_event). */
typedef struct {
    evlog_event ev;
    char codes[512];
    char evaluator[65];
    char *witness;
    char *detail;
    char *snapshot;
} evlog_owned;

/* The request id of the call this thread serves (borrowed until evlog_set_request_id(NULL)):
 * every event the thread writes meanwhile carries it in its detail, so an event can be followed
 * back to the call that caused it. It lives in detail because the writing functions store a
 * fixed set of fields: detail is one of them and is hashed like the rest, so the chain's
 * canonical text (charter-event-2) and audit are unchanged. A JSON object detail gets a
 * "request_id" member, other text " (request_id <id>)" at its end. Thread-local. */
void evlog_set_request_id(const char *request_id);

/* Who made the call this thread serves (borrowed until evlog_set_caller(NULL)): a credential
 * id as "credential:<id>" or "env:operator" / "env:viewer" for the environment tokens, never a
 * secret. Every event the thread writes meanwhile carries it in its detail beside the request
 * id: a JSON object detail as a "caller" member, other text as ", caller <caller>" inside the
 * parentheses ("mode external (request_id r1, caller env:operator)"). Thread-local. */
void evlog_set_caller(const char *caller);

/* Fills o with an event of kind recording decision d (NULL: an event that records none, e.g.
 * a model request) made by the evaluator whose fingerprint is evaluator (NULL or "" for the
 * process's, evlog_evaluator; ignored without d), with detail and snapshot (either may be
 * NULL) as texts: a JSON string is its own text, any other value its evlog_json_text. Returns
 * STATUS_OK or STATUS_ENOMEM; free with evlog_owned_free in both cases. */
int evlog_owned_event(evlog_owned *o, const char *kind, const guard_decision *d,
                      const char *evaluator, const json_t *detail, const json_t *snapshot);
void evlog_owned_free(evlog_owned *o);

/* The head of a run as charter_run_head reports it. */
typedef struct {
    bool exists;
    uint64_t seq;          /* the last event's seq, 0 before the first */
    char hash[65];         /* the last event's hash, "" before the first */
    char status[32];       /* the run's status */
    char now[32];          /* database time "<seconds>.<6 digits>" */
    char next_context[32]; /* the context id the next charter_open_context creates */
} evlog_head;

/* How an event was sealed and written. */
typedef struct {
    uint64_t seq;
    char ts[32];
    char prev[65];
    char hash[65];
} evlog_sealed;

/* --- the process's configuration (set once at startup) ------------------------------------ */

/* Sets the evaluator fingerprint (64 hex digits, or NULL for none) of the default workflow,
 * recorded by a decision event that does not name its own. The integrity key that seals events
 * is integrity.c's (integrity_load_key). Call once before any thread uses this module;
 * read-only afterwards. Returns STATUS_OK, or STATUS_EINVAL for a malformed fingerprint. */
int evlog_configure(const char *evaluator);

/* True when events are sealed with HMAC-SHA256 under the integrity key (integrity_keyed). */
bool evlog_keyed(void);

/* The configured evaluator fingerprint ("" when none). */
const char *evlog_evaluator(void);

/* Records the process's integrity mode in the graph the first time (charter_integrity) and
 * refuses a mismatch: a keyed graph started keyless, a keyless graph started keyed, or a keyed
 * graph started with another key. Returns 0, STATUS_EREFUSED with a one-line reason in err
 * (naming no secret), or the store's failure (reason in err). */
int evlog_claim_integrity(store *st, char *err, size_t errlen);

/* --- canonical text and hashes ----------------------------------------------------------- */

/* The hash of an event: HMAC-SHA256 under the integrity key when there is one, else SHA-256,
 * over evlog_event_text(f), as lowercase hex. Returns 0 or STATUS_ENOMEM. */
int evlog_event_hash(const evlog_fields *f, char hex[65]);

/* The same with the mode named: keyed, HMAC-SHA256 under the integrity key (STATUS_ENOMEM when
 * there is none), else plain SHA-256. An audit hashes the events a run had when its keyless
 * graph adopted a key (keyadopt.h) with plain SHA-256, the later ones keyed. */
int evlog_event_hash_as(const evlog_fields *f, bool keyed, char hex[65]);

/* --- reading ------------------------------------------------------------------------------ */

/* The run's head (charter_run_head). Returns STATUS_OK or the store's failure; a run that does
 * not exist is STATUS_OK with head->exists false. */
int evlog_read_head(store *st, const char *run_id, evlog_head *head);

/* head from j, a charter_run_head reply (or the "head" of charter_delivery_facts). Returns
 * STATUS_OK or STATUS_EPROTO when j is not one. */
int evlog_head_parse(const json_t *j, evlog_head *head);

/* --- writing (each seals its event on the current head, retrying on a moved head) --------- */

/* Appends ev to run_id's events (charter_append_event). *sealed (may be NULL) tells how.
 * Returns STATUS_OK, STATUS_ENOTFOUND (run), STATUS_EINVAL, STATUS_EUNAVAILABLE (database
 * unreachable, or EVLOG_ATTEMPTS conflicts), STATUS_ENOMEM, STATUS_EPROTO. */
int evlog_append(store *st, const char *run_id, const evlog_event *ev, evlog_sealed *sealed);

/* Creates run run_doc.id (charter_create_run, run_doc {id,task,mode,workflow}) with its
 * run_created event (detail "mode <mode>"). *reply (may be NULL) is the function's reply,
 * caller decrefs. Returns as evlog_append, STATUS_EEXISTS for a taken id. */
int evlog_create_run(store *st, const json_t *run_doc, json_t **reply);

/* Moves run_id from one of the statuses in from (comma list) to to (charter_transition_run),
 * writing status_changed with detail "<old> -> <to>" and ": <detail>" when detail is not
 * empty. Returns STATUS_OK (moved; *sealed tells how, may be NULL), STATUS_EREFUSED when the run
 * was in another status (copied to current, 32 bytes, when not NULL), or as evlog_append. */
int evlog_transition(store *st, const char *run_id, const char *from, const char *to,
                     const char *detail, evlog_sealed *sealed, char current[32]);

/* Claims run_id for a recovery and queues it for the executor threads in one call
 * (charter_request_recovery): blocked, interrupted or error -> recovering, detail as
 * evlog_transition's. Same returns as evlog_transition. */
int evlog_request_recovery(store *st, const char *run_id, const char *detail, evlog_sealed *sealed,
                           char current[32]);

/* Cancels run_id when nothing executes it, in one call (charter_cancel_unclaimed): created,
 * queued, blocked, error, interrupted, or recovering with no executor holding it -> cancelled,
 * off the run queue; detail as evlog_transition's. Same returns as evlog_transition
 * (STATUS_EREFUSED for a run in another status or a recovery an executor holds). */
int evlog_cancel_unclaimed(store *st, const char *run_id, const char *detail, evlog_sealed *sealed,
                           char current[32]);

/* Ends the external run run_id in one call (charter_complete_run): created -> completed,
 * writing status_changed "created -> completed: <detail>", whose ts is the time the run ended.
 * *reply is the function's reply (caller decrefs): {"ok":true,"seq":n} when this call completed
 * it, {"ok":true,"unchanged":true} when it was completed already, {"ok":false,"reason":"mode"|
 * "status"|"approval",...} when it was refused (nothing written). Returns as evlog_append. */
int evlog_complete_run(store *st, const char *run_id, const char *detail, json_t **reply);

/* Resumes an interrupted run from its checkpoint checkpoint_id in one call
 * (charter_resume_run): the checkpoint is consumed, the run becomes queued and status_changed
 * "interrupted -> queued: <detail>" is written. workflow is the version the checkpoint was
 * taken under; counters the checkpoint's JSON counters. *reply is the function's reply (caller
 * decrefs): {"ok":false,"reason":...} when it refused. Returns as evlog_append. */
int evlog_resume_run(store *st, const char *run_id, const char *checkpoint_id, const char *workflow,
                     const char *counters, const char *detail, json_t **reply);

/* Opens a context of step owned by actor in run_id (charter_open_context), writing step_opened
 * with detail "step <step> context <id> actor <actor>". *reply as the function's reply.
 * Returns as evlog_append, STATUS_ENOTFOUND for the run or actor. */
int evlog_open_context(store *st, const char *run_id, const char *step, const char *actor,
                       json_t **reply);

/* Creates an artifact (charter_create_artifact; doc without "event") with ev as its event.
 * verified is [{id, summary_hash}], each of doc's input_ids once with the hash of the lineage
 * summary the caller verified ([] for a source): the call is STATUS_EREFUSED, nothing written,
 * when an input's stored summary is no longer that one (store_last_error names it). */
int evlog_create_artifact(store *st, const char *run_id, const json_t *doc, const json_t *verified,
                          const evlog_event *ev, json_t **reply);

/* The conditional commit (charter_commit_delivery; doc without "event") with ev, of kind
 * delivery_decided and outcome allow, as its event, sealed on the head read first. *reply is
 * the function's reply, whatever its status (committed, exists, refused). */
int evlog_commit_delivery(store *st, const char *run_id, const json_t *doc, const evlog_event *ev,
                          json_t **reply);

/* evlog_commit_delivery sealed on head (may be NULL: read it first), the run's head as read
 * with the facts (charter_delivery_facts), or on the last event this process wrote to the run
 * when that is later: no head read of its own. A moved head costs one conflict reply, which
 * carries the current head, and a new seal. facts_sha and facts (both NULL, or both given):
 * the facts record ev's snapshot names (evlog_facts_split), stored by the commit in the same
 * call unless stored already. Same returns, and STATUS_EINVAL for a facts_sha that is not 64
 * lowercase hex digits or only one of the two given. */
int evlog_commit_delivery_at(store *st, const char *run_id, const json_t *doc,
                             const char *facts_sha, const char *facts, const evlog_event *ev,
                             const evlog_head *head, json_t **reply);

/* evlog_commit_delivery_at with the argument as its JSON text doc. A commit whose argument
 * has "cached" answers a committed delivery as a flat list (*list, ["committed", "<seq>",
 * "<committed_at>"], store_list_free), everything else as *reply; one of them is set on
 * STATUS_OK. Same returns as evlog_commit_delivery_at. */
int evlog_commit_delivery_text(store *st, const char *run_id, const char *doc,
                               const char *facts_sha, const char *facts, const evlog_event *ev,
                               const evlog_head *head, json_t **reply, store_list **list);

/* Splits the decision snapshot snap into the facts that repeat from one decision to the next
 * (everything but its "now"), encoded as one record (*record, malloc'd, caller frees) named by
 * its SHA-256 (sha), and the snapshot the event keeps in its place, {"facts":"<sha>","now":..}
 * (*ref, a new reference the caller decrefs). The record is stored once, by content, as a blob
 * (charter_put_blob's key); evlog_snapshot_resolve puts the snapshot together again and fails
 * when the record is gone or altered. Returns STATUS_OK, STATUS_EINVAL (snap is no object with
 * a "now") or STATUS_ENOMEM. */
int evlog_facts_split(const json_t *snap, char **record, char sha[65], json_t **ref);

/* A query function that writes sealed events, called with nargs strings: its arguments, then
 * the sealed event(s); an adapter that passes them to the function's typed stub (queries.h) and
 * refuses another count with STATUS_EINVAL. */
typedef int (*evlog_call)(store *st, int nargs, const char *const *args, json_t **out);

/* Calls call (arg, then each of the nevs events sealed on one head) through the same
 * seal-and-write loop: the function stores at most one of the events, whichever its outcome
 * calls for, and answers "event_index" (0-based) for the one it wrote. Lets one atomic call
 * choose between outcomes whose events are sealed here (a human approval: committed, denied,
 * expired or refused). 1 <= nevs <= 4; only evs[0] may carry a snapshot over 4 KiB. *reply is
 * the function's reply. Returns as evlog_append, STATUS_EINVAL for arguments out of range. */
int evlog_write_one_of(store *st, evlog_call call, const char *run_id, const char *arg,
                       const evlog_event *evs, int nevs, json_t **reply);

/* Marks every run left running or recovering as interrupted (one transition each, detail
 * "charterd restarted"). *ids (may be NULL) is a JSON list of the runs marked, caller decrefs.
 * Returns STATUS_OK or the first failure. */
int evlog_interrupt_runs(store *st, json_t **ids);

/* The facts an event's snapshot holds, as text replay decides from: its own text, or, when the
 * event carries a blob reference {"blob":"<sha256>"} (snapshots over 4 KiB are stored once by
 * content), the blob's text after checking it still hashes to its name; with a facts reference
 * (evlog_facts_split) replaced by the snapshot it stands for, after the same check of its
 * record; and with every lineage
 * reference in it resolved from the lineage records it names (snapshot_resolve.h). *out is
 * malloc'd (caller frees). why (n bytes) names what is missing or altered. Returns STATUS_OK,
 * STATUS_ENOTFOUND (the blob or a lineage record is gone), STATUS_EPROTO (one was changed), or
 * the store's failure. */
int evlog_snapshot_resolve(store *st, const char *snapshot, char **out, char *why, size_t n);

/* The content-addressed record snapshot stands on, as key "blob:<sha256>" (a snapshot blob) or
 * "facts:<sha256>" (a delivery's facts record); every snapshot naming the same key resolves
 * from the same bytes. Returns false (key "") for a snapshot that names neither. */
bool evlog_snapshot_record(const char *snapshot, char key[72]);

#endif
