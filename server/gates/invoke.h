/*
 * invoke.h - the tool-call gate (Gate/Invoke): a live tool invoked with arguments whose values
 * carry lineage, decided from the lineage summaries of the artifacts each value came from, and
 * for a tool with an effect committed once per invocation ID by the same conditional write as
 * a delivery (charter_commit_delivery with its "invoke" member).
 *
 * One call runs four phases, each a function in invoke.c: the facts in one read
 * (charter_invoke_facts: the context, the run's head and task, the invocation's existing
 * effect, the chain, every named artifact's summary and every quoted artifact's content); the
 * request checked against the tool's declaration and each value against where it says it came
 * from (INVALID_ARGUMENT, nothing written, when it does not hold); the decision
 * (evaluator_invoke_decide, which replay runs again over the recorded snapshot); the record:
 * an invoke_decided event, written by the commit itself for an allowed effect.
 */
#ifndef CHARTER_INVOKE_H
#define CHARTER_INVOKE_H

#include <jansson.h>
#include <stdbool.h>

#include "gates/gate.h"

/* Values of an argument are at most this many bytes. */
#define INVOKE_MAX_VALUE 4096

/* One argument as the caller gave it (borrowed). Exactly one of n_lineage > 0, from_task and
 * quoted_from (non-empty) says where the value came from. */
typedef struct {
    const char *name;
    const char *value;
    const char *const *lineage; /* artifact ids the value was derived from */
    size_t n_lineage;
    bool from_task;          /* the run's task holds the value */
    const char *quoted_from; /* the artifact whose content holds the value, or NULL / "" */
} invoke_argument;

typedef struct {
    guard_decision decision;
    json_t *delivery;     /* the committed (or acknowledged) effect, or NULL */
    bool acknowledged;    /* an earlier effect with the same invocation ID and fingerprint */
    char destination[72]; /* the destination class matched, "" when none */
    /* A call through a context the database does not have, with an archive folder
     * (archived.h): the context's OWNED_BY actors as its run's archive holds them (owned), or
     * NULL; and when invoke_call returns STATUS_ENOTFOUND after looking in the archive, why in
     * words ("" when it did not look). */
    json_t *archive_owners;
    char not_found[512];
} invoke_result;

/* Decides (and for a tool with an effect, on ALLOW commits) one invocation of tool in the
 * context. Returns STATUS_OK with out filled (any outcome; free with invoke_result_free);
 * STATUS_EINVAL with why (whylen bytes) naming the argument when the request is malformed:
 * a malformed invocation ID, an argument the tool does not declare, one it declares that is
 * missing or given twice, a value over INVOKE_MAX_VALUE bytes or empty, not exactly one of
 * lineage / from_task / quoted_from, a from_task value the run's task does not contain, a
 * quoted value that does not occur in the artifact it names (nothing is written for any of
 * them); STATUS_ENOTFOUND (context; out->not_found says why when the archive was looked
 * in), STATUS_EREFUSED (a context of a completed run), STATUS_ENOMEM. A context the database
 * does not have may be one of an archived run: with an archive folder (g->archive_dir) the
 * run's archive answers a call of a tool with an effect (archived.h): the same arguments
 * acknowledged, others DELIVERY_CONFLICT. */
int invoke_call(const gate_env *g, const char *context_id, const char *tool,
                const char *invocation_id, const invoke_argument *args, size_t n,
                invoke_result *out, char *why, size_t whylen);

void invoke_result_free(invoke_result *r);

/* The call answered from the archive of the run its context belonged to only, never from the
 * database (archived.h): for a host whose identity check found no such context. The request's
 * shape is checked as invoke_call does; g->archive_dir must be set. Returns STATUS_OK with out
 * answered, STATUS_ENOTFOUND (out->not_found says why), STATUS_EINVAL (why), STATUS_ENOMEM. */
int invoke_archived(const gate_env *g, const char *context_id, const char *tool,
                    const char *invocation_id, const invoke_argument *args, size_t n,
                    invoke_result *out, char *why, size_t whylen);

#endif
