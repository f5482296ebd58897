/*
 * gate.h - the gate operations an agent host performs, step by step: open a step, read a
 * registered source, check inputs, record an output. svc_gate.c serves them over the API and
 * runner.c calls the very same functions, so the built-in runner has no private path.
 *
 * Return values: STATUS_OK when the operation produced a decision (which may be DENY, or UNKNOWN
 * GRAPH_ERROR when the graph could not supply facts: fail closed); STATUS_ENOTFOUND for an unknown
 * run, step, context, resource or artifact; STATUS_EINVAL for a request that is malformed;
 * STATUS_EREFUSED for a context whose run is completed (its record is closed);
 * STATUS_EUNAVAILABLE where no decision is involved and the database is unreachable;
 * STATUS_ENOMEM. Every decision is recorded as an event of the run with the facts it was made
 * from (its snapshot), in the same database call as its effect where it has one.
 */
#ifndef CHARTER_GATE_H
#define CHARTER_GATE_H

#include <jansson.h>
#include <stdint.h>

#include "core/limits.h"
#include "policy/guard.h"
#include "core/status.h"
#include "db/store.h"
#include "policy/workflow.h"

/* Everything a gate operation needs; borrowed, never freed by the gate. wf is the workflow of
 * the run being opened or driven (gate_open_step, runner.c); an operation on a context never
 * uses it: it acts under the workflow version stored on the context (its run's, registry.h). */
typedef struct {
    store *st;
    const workflow *wf;
    const service_limits *limits;
    /* The archive folder (<dir>/<graph>/ holds a graph's archives), or NULL: a send or tool
     * call through a context that left the database with its run is then answered from the
     * run's archive (gates/archived.h); with NULL, not found. */
    const char *archive_dir;
} gate_env;

/* Opens a fresh context of step in run run_id, owned by the step's actor, and stores on it
 * the version of g->wf, which must be the workflow the run follows (else STATUS_EREFUSED).
 * A completed run's record is closed: STATUS_EREFUSED, the store's last error saying the run
 * "is completed", and nothing is written. *context is {"id","run_id","step","owners":[...],
 * "workflow"} (caller decrefs). A context whose workflow could not be stored is left unusable
 * (every gate fails closed on it). */
int gate_open_step(const gate_env *g, const char *run_id, const char *step, json_t **context);

/* Opens a child of context parent_id: same run (run_id) and step (step), its capability the
 * parent's narrowed to tools, recipients and resources (a list with n == 0 keeps the
 * parent's; names keep the parent's order). Nothing is written when a name lies outside the
 * parent's list: STATUS_EDENIED with why = "SCOPE_WIDENING: <list>: \"<name>\" is not in
 * the parent context <id>'s <list> {...}" (the rule of scopes that only narrow). STATUS_EINVAL
 * (why says which) when run_id or step is not the parent's; STATUS_ENOTFOUND for an unknown
 * parent. On success *context as for gate_open_step plus "parent", and *step is the child's
 * effective capability (kept by registry.h). why has whylen bytes. */
int gate_open_narrowed(const gate_env *g, const char *parent_id, const char *run_id,
                       const char *step, const guard_strs *tools, const guard_strs *recipients,
                       const guard_strs *resources, json_t **context, const workflow_step **out,
                       char *why, size_t whylen);

/* The effective step capability of an opened context and the context facts: the step of the
 * workflow version stored on the context, narrowed to the context's scope when it was opened
 * narrowed. *step is kept by registry.h (valid until exit); ctx is filled from the graph (free
 * with facts_context_free). A context without a workflow, or whose workflow or scope cannot be
 * read, is STATUS_EPROTO (callers fail closed). *wf (may be NULL) gets the workflow. */
int gate_context_of(const gate_env *g, const char *context_id, const workflow **wf,
                    const workflow_step **step, guard_context *ctx);

/* gate_context_of over a charter_context_owner reply already read (raw, whose reference it
 * takes): the same checks and the same returns, without reading the context again. */
int gate_context_from(const gate_env *g, json_t *raw, const workflow **wf,
                      const workflow_step **step, guard_context *ctx);

/* gate_context_from that reads a completed run's context too, setting *closed instead of
 * refusing it (false otherwise): for a caller that answers a retry of an invocation the run
 * committed before it was completed (acknowledged: nothing written) and refuses anything else
 * with STATUS_EREFUSED itself. */
int gate_context_closed(const gate_env *g, json_t *raw, const workflow **wf,
                        const workflow_step **step, guard_context *ctx, bool *closed);

/* gate_context_of without the workflow. */
int gate_context(const gate_env *g, const char *context_id, const workflow_step **step,
                 guard_context *ctx);

/* Registers the resource as a source artifact of the context's run, if the resource is one
 * of the step's (else DENY RESOURCE_OUT_OF_SCOPE, nothing written). On ALLOW *artifact is the
 * new artifact (caller decrefs). STATUS_EINVAL, nothing written, for an observed resource: it
 * has no registered content (gate_observe_source records what a host read). */
int gate_read_source(const gate_env *g, const char *context_id, const char *resource_id,
                     guard_decision *d, json_t **artifact);

/* Records what a host read from an observed resource of the context's step: len bytes of
 * content (a fetched page, a mail, a tool's result) read at locator (a URL, a message id, a
 * row key). The source gate decides as for gate_read_source (a resource outside the step is
 * DENY RESOURCE_OUT_OF_SCOPE, recorded, nothing else written); on ALLOW *artifact is a new
 * source artifact (caller decrefs) with the resource's labels and title, the content and its
 * SHA-256, written with its source_observed event in one call. The host's word counts for
 * nothing but the bytes and the locator: the labels come from the resource it names.
 * STATUS_EINVAL, nothing written, with why (whylen bytes) saying which, when the resource is
 * not observed in the context's workflow or the content is over its max_bytes. Otherwise
 * returns as gate_read_source. */
int gate_observe_source(const gate_env *g, const char *context_id, const char *resource_id,
                        const char *content, size_t len, const char *locator, guard_decision *d,
                        json_t **artifact, char *why, size_t whylen);

/* A retrieved chunk of a resource (borrowed strings): what it was, and the search that found
 * it. */
typedef struct {
    const char *chunk_id;
    const char *search_id;
    const char *title;
    const char *text;
} gate_chunk;

/* gate_read_source for a retrieved chunk of resource_id: the same decision (the resource must
 * be one of the step's) and the same source_read event, but the artifact's title and content are
 * the chunk's; its labels and FROM_RESOURCE edge are the resource's, so the input and delivery
 * gates judge everything derived from it. Returns as gate_read_source. */
int gate_read_chunk(const gate_env *g, const char *context_id, const char *resource_id,
                    const gate_chunk *chunk, guard_decision *d, json_t **artifact);

/* Input gate over artifacts ids (n of them) for the context's step: ALLOW only when every
 * artifact's ancestry fits, decided from each artifact's lineage summary (one database call
 * with the context, whatever the depth: charter_input_facts); an artifact without a usable
 * summary is UNKNOWN (gate_summary_verify), and only a refusal walks the ancestries, for the
 * witness's path. Writes an input_checked event with the snapshot, which names under
 * "summaries" the summary hash each input was decided with; *event_seq its seq (0 when it
 * could not be written, then the decision is UNKNOWN GRAPH_ERROR). */
int gate_check_input(const gate_env *g, const char *context_id, const char *const *ids, size_t n,
                     guard_decision *d, uint64_t *event_seq);

/* gate_check_input, and on ALLOW, for each ids[i], the SHA-256 of the content it was recorded
 * with as the lineage summary the decision was made from names it (that summary's "hash": its
 * text hashed to its summary_hash and, with an integrity key, its seal verified) into
 * hashes[i] (n of them, 65 bytes each; "" when a summary names none; left as they were on DENY
 * or UNKNOWN). An artifact's content field is in no summary and no seal, and its hash field can
 * be rewritten with it: a host that reads an input's content after the gate checks it against
 * this hash before anything sees it (runner.c). Returns as gate_check_input. */
int gate_check_input_recorded(const gate_env *g, const char *context_id, const char *const *ids,
                              size_t n, guard_decision *d, uint64_t *event_seq, char (*hashes)[65]);

/* The input gate's verdict on artifacts ids for the context's step, without recording it: for
 * choosing among candidates, after which the chosen set goes through gate_check_input (and is
 * recorded there). Returns as gate_check_input. */
int gate_evaluate_input(const gate_env *g, const char *context_id, const char *const *ids, size_t n,
                        guard_decision *d);

/* Records a model output of the context: the input gate is applied to input_ids first; on
 * ALLOW the derived artifact is created with DERIVED_FROM edges to exactly input_ids and labels
 * recomputed from them (conf = max, integrity = min). *artifact as for gate_read_source. */
int gate_record_output(const gate_env *g, const char *context_id, const char *const *input_ids,
                       size_t n, const char *title, const char *content, guard_decision *d,
                       json_t **artifact);

/* The artifact's ancestry as charter_ancestry returns it (caller decrefs). */
int gate_trace(const gate_env *g, const char *artifact_id, json_t **ancestry);

/* Hex SHA-256 of len bytes into hex (65 bytes). */
void gate_sha256_hex(const char *data, size_t len, char hex[65]);

/* Whether a decision may be made from raw, a charter_lineage_summary reply (an object with the
 * artifact's "id", with or without a summary): a decision reads the summary stored at creation
 * and never walks the ancestry in its place. raw is marked unusable (a string "unverified"
 * saying why, which facts_summary_from_json reads and the guard gives as the witness of an
 * UNKNOWN GRAPH_ERROR) when it holds no summary (deleted, or an artifact written before
 * summaries were kept), or, with an integrity key, when its summary carries no seal or one
 * that does not verify (summary_seal.h). A summary whose text does not hash to its
 * summary_hash is left to facts_summary_from_json, which finds it unverified. Returns 0
 * (raw usable or marked), or -1 when raw is not an object with an id or memory ran out. */
int gate_summary_verify(json_t *raw);

#endif
