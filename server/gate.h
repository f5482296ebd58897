/*
 * gate.h - the gate operations an agent host performs, step by step: open a step, read a
 * registered source, check inputs, record an output. svc_gate.c serves them over the API and
 * runner.c calls the very same functions, so the built-in runner has no private path.
 *
 * Return values: STORE_OK when the operation produced a decision (which may be DENY, or UNKNOWN
 * GRAPH_ERROR when the graph could not supply facts: fail closed); STORE_ENOTFOUND for an unknown
 * run, step, context, resource or artifact; STORE_EINVAL for a request that is malformed;
 * STORE_EUNAVAILABLE where no decision is involved and the database is unreachable;
 * STORE_ENOMEM. Every decision is recorded as an event of the run with the facts it was made
 * from (its snapshot), in the same database call as its effect where it has one.
 */
#ifndef CHARTER_GATE_H
#define CHARTER_GATE_H

#include <jansson.h>
#include <stdint.h>

#include "call.h"
#include "guard.h"
#include "store.h"
#include "workflow.h"

/* Everything a gate operation needs; borrowed, never freed by the gate. */
typedef struct {
    store *st;
    const workflow *wf;
    const call_limits *limits;
} gate_env;

/* Opens a fresh context of step in run run_id, owned by the step's actor. *context is
 * {"id","run_id","step","owners":[...]} (caller decrefs). */
int gate_open_step(const gate_env *g, const char *run_id, const char *step, json_t **context);

/* The step capability of an opened context and the context facts. *cap points into the
 * workflow; ctx is filled from the graph (free with store_context_free). */
int gate_context(const gate_env *g, const char *context_id, const workflow_step **step,
                 guard_context *ctx);

/* Registers the resource as a source artifact of the context's run, if the resource is one
 * of the step's (else DENY RESOURCE_OUT_OF_SCOPE, nothing written). On ALLOW *artifact is the
 * new artifact (caller decrefs). */
int gate_read_source(const gate_env *g, const char *context_id, const char *resource_id,
                     guard_decision *d, json_t **artifact);

/* Input gate over artifacts ids (n of them) for the context's step: ALLOW only when every
 * artifact's ancestry fits. Writes an input_checked event with the snapshot; *event_seq its seq
 * (0 when it could not be written, then the decision is UNKNOWN GRAPH_ERROR). */
int gate_check_input(const gate_env *g, const char *context_id, const char *const *ids, size_t n,
                     guard_decision *d, uint64_t *event_seq);

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

#endif
