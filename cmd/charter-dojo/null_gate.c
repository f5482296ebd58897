/*
 * null_gate.c - the null gate of charterd-nullgate, the guard-off arm of charter-dojo: a charterd
 * linked with --wrap on the deciding half of every gate (the input, source, delivery, invoke
 * and host identity decisions), on the question whether a send waits for a human's approval and
 * on public rendering, so every decision is ALLOW, nothing is held for a human and the model's
 * own text is recorded. charterd itself carries no switch: this file exists only in
 * that program, which is built for the benchmark and never installed.
 *
 * Everything else is the product's code: facts are gathered and decisions recorded, value
 * origins are checked (a value must occur where the caller says it came from), and an effect
 * is committed by the same conditional write on the database clock, given the grant chain read
 * off the facts and no source list. What that write still refuses (a revoked grant, a spent
 * run budget, an invocation ID already used) is refused in both arms.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "policy/evaluator.h"
#include "policy/guard.h"
#include "policy/workflow.h"

int __wrap_evaluator_input_decide(const guard_stepcap *cap, const guard_context *ctx,
                                  const json_t *ancestries, const char *const *ids,
                                  guard_decision *d, int *conf, int *integrity);
int __wrap_evaluator_source_decide(const guard_stepcap *cap, const char *resource_id,
                                   guard_decision *d);
int __wrap_evaluator_delivery_decide(const guard_stepcap *cap, const guard_context *ctx,
                                     const guard_delivery_request *req, const guard_ancestry *anc,
                                     const guard_chain *chain, double now, const char *payload_hash,
                                     const char *content_hash, guard_decision *d);
int __wrap_evaluator_invoke_decide(const guard_stepcap *cap, const guard_context *ctx,
                                   const evaluator_invoke_facts *f, double now, guard_decision *d);
int __wrap_evaluator_identity_decide(const guard_identity *facts, guard_decision *d);
int __wrap_workflow_render_public(const workflow_step *step, const json_t *fields, char **out,
                                  char *err, size_t errlen);
int __wrap_workflow_approval_for(const workflow *wf, const char *tool, const char *recipient,
                                 const char **by, long long *within_ms);

static int label_of(const json_t *v, int missing)
{
    return json_is_integer(v)  ? (int)json_integer_value(v)
           : json_is_string(v) ? atoi(json_string_value(v))
                               : missing;
}

/* Allows every input. An output's labels are the stored labels of its inputs (max
 * confidentiality, min integrity), read from the gathered facts, not recomputed. */
int __wrap_evaluator_input_decide(const guard_stepcap *cap, const guard_context *ctx,
                                  const json_t *ancestries, const char *const *ids,
                                  guard_decision *d, int *conf, int *integrity)
{
    (void)cap, (void)ctx, (void)ids;
    memset(d, 0, sizeof *d);
    d->outcome = GUARD_ALLOW;
    *conf = GUARD_CONF_PUBLIC;
    *integrity = GUARD_INTEGRITY_TRUSTED;
    size_t i;
    const json_t *raw;
    json_array_foreach(ancestries, i, raw)
    {
        const json_t *payload = json_array_get(json_object_get(raw, "artifacts"), 0);
        int c = label_of(json_object_get(payload, "conf"), GUARD_CONF_CONFIDENTIAL);
        int in = label_of(json_object_get(payload, "integrity"), GUARD_INTEGRITY_UNTRUSTED);
        *conf = c > *conf ? c : *conf;
        *integrity = in < *integrity ? in : *integrity;
    }
    return 0;
}

/* Allows every source read and observation. */
int __wrap_evaluator_source_decide(const guard_stepcap *cap, const char *resource_id,
                                   guard_decision *d)
{
    (void)cap, (void)resource_id;
    memset(d, 0, sizeof *d);
    d->outcome = GUARD_ALLOW;
    return 0;
}

/* The chain leaf first, read off the gathered chain facts by following each grant's first
 * parent, nothing judged: the conditional write needs it. The ids are borrowed from chain; the
 * gates free the array. Returns 0, or -1 when memory ran out. */
static int chain_order(const guard_chain *chain, guard_decision *d)
{
    if (chain == NULL || chain->leaf == NULL)
        return 0;
    d->chain_order.items = calloc(chain->n ? chain->n : 1, sizeof *d->chain_order.items);
    if (d->chain_order.items == NULL)
        return -1;
    const char *want = chain->leaf;
    while (want != NULL && d->chain_order.n < chain->n) {
        const guard_grant *g = NULL;
        for (size_t i = 0; i < chain->n && g == NULL; i++)
            if (chain->items[i].id != NULL && strcmp(chain->items[i].id, want) == 0)
                g = &chain->items[i];
        if (g == NULL)
            break;
        d->chain_order.items[d->chain_order.n++] = g->id;
        want = g->parents.n > 0 ? g->parents.items[0] : NULL;
    }
    return 0;
}

/* Allows every delivery, with the chain and no source list (the commit then checks none). */
int __wrap_evaluator_delivery_decide(const guard_stepcap *cap, const guard_context *ctx,
                                     const guard_delivery_request *req, const guard_ancestry *anc,
                                     const guard_chain *chain, double now, const char *payload_hash,
                                     const char *content_hash, guard_decision *d)
{
    (void)cap, (void)ctx, (void)req, (void)anc, (void)now, (void)payload_hash, (void)content_hash;
    memset(d, 0, sizeof *d);
    d->outcome = GUARD_ALLOW;
    return chain_order(chain, d);
}

/* Allows every tool call: no role, clearance, destination, scope or chain rule is applied. */
int __wrap_evaluator_invoke_decide(const guard_stepcap *cap, const guard_context *ctx,
                                   const evaluator_invoke_facts *f, double now, guard_decision *d)
{
    (void)cap, (void)ctx, (void)now;
    memset(d, 0, sizeof *d);
    d->outcome = GUARD_ALLOW;
    return chain_order(f->have_chain ? &f->chain : NULL, d);
}

/* Lets any host act through any context. */
int __wrap_evaluator_identity_decide(const guard_identity *facts, guard_decision *d)
{
    (void)facts;
    memset(d, 0, sizeof *d);
    d->outcome = GUARD_ALLOW;
    return 0;
}

/* Renders nothing: the runner then records the model's own text as the step's output. */
int __wrap_workflow_render_public(const workflow_step *step, const json_t *fields, char **out,
                                  char *err, size_t errlen)
{
    (void)step, (void)fields, (void)err, (void)errlen;
    *out = NULL;
    return 0;
}

/* Asks no human: every allowed send is committed at once. */
int __wrap_workflow_approval_for(const workflow *wf, const char *tool, const char *recipient,
                                 const char **by, long long *within_ms)
{
    (void)wf, (void)tool, (void)recipient;
    *by = NULL;
    *within_ms = 0;
    return 0;
}
