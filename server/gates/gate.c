/*
 * gate.c - the input gate and the step operations around it.
 *
 * Every operation reads its facts through the query library, decides with the functions of
 * evaluator.h (which call the guard), and records the decision as an event of the run (sealed into
 * the run's hash chain by evlog.c) in the same database call as its effect (a new artifact) or,
 * when there is no effect, in one event append. The snapshot of a decision holds the facts
 * exactly as the queries returned them, so the decision can be replayed later without asking
 * the graph again.
 */
#include "gates/gate.h"
#include "core/digest.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "evidence/evlog.h"
#include "policy/guard.h"
#include "db/lineage.h"
#include "workflow/registry.h"
#include "policy/evaluator.h"
#include "policy/facts.h"
#include "evidence/integrity.h"
#include "evidence/summary_seal.h"
#include "core/log.h"

void gate_sha256_hex(const char *data, size_t len, char hex[65])
{
    /* On failure the hash is all zeros, which never matches a stored one: callers fail
     * closed. */
    (void)digest_sha256_hex(data, len, hex);
}

/* Records d as an event; a decision that cannot be recorded does not stand: it becomes UNKNOWN
 * GRAPH_ERROR (every decision is recorded with its facts, or it is not a decision). snapshot
 * may be NULL (an operational failure records no facts). */
static void record_decision(const gate_env *g, const char *run_id, const char *kind,
                            const char *evaluator, guard_decision *d, json_t *detail,
                            json_t *snapshot, uint64_t *seq)
{
    evlog_owned ev;
    evlog_sealed sealed;
    int rc = evlog_owned_event(&ev, kind, d, evaluator, detail, snapshot);
    if (rc == STATUS_OK)
        rc = evlog_append(g->st, run_id, &ev.ev, &sealed);
    evlog_owned_free(&ev);
    if (seq)
        *seq = rc == STATUS_OK ? sealed.seq : 0;
    if (rc != STATUS_OK) {
        guard_decision_free(d);
        guard_decision_unknown(d, "the decision could not be recorded");
    }
}

static json_t *strings_json(const char *const *items, size_t n)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        if (json_array_append_new(list, json_string(items[i]))) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

static json_t *context_json(const guard_context *ctx)
{
    json_t *owners = strings_json((const char *const *)ctx->owners.items, ctx->owners.n);
    if (!owners)
        return NULL;
    return json_pack("{s:s, s:s, s:s, s:o}", "id", ctx->id ? ctx->id : "", "run_id",
                     ctx->run_id ? ctx->run_id : "", "step", ctx->step ? ctx->step : "", "owners",
                     owners);
}

static bool unavailable(int rc)
{
    return rc == STATUS_EUNAVAILABLE || rc == STATUS_EPROTO || rc == STATUS_ELIMIT;
}

/* Stores the context's workflow (and, for a narrowed context, its parent and lists) with
 * charter_scope_context. lists is NULL for a context that is not narrowed. */
static int scope_context(const gate_env *g, const char *context_id, const char *run_id,
                         const workflow *wf, const workflow_step *ws, const char *parent,
                         json_t *lists)
{
    json_t *doc = json_pack("{s:s, s:s, s:s, s:s}", "context_id", context_id, "run_id", run_id,
                            "workflow", wf->version, "grant", ws->cap.grant);
    if (!doc || (parent && (json_object_set_new(doc, "parent", json_string(parent)) ||
                            json_object_update(doc, lists)))) {
        json_decref(doc);
        return STATUS_ENOMEM;
    }
    json_t *reply = NULL;
    int rc = q_scope_context(g->st, doc, &reply);
    json_decref(doc);
    json_decref(reply);
    return rc;
}

/* Opens a context of step ws (of workflow wf) in run_id and completes it with its workflow
 * and, when parent is set, its parent and narrowed lists. */
static int open_context(const gate_env *g, const workflow *wf, const workflow_step *ws,
                        const char *run_id, const char *parent, json_t *lists, json_t **context)
{
    *context = NULL;
    json_t *reply = NULL;
    int rc = evlog_open_context(g->st, run_id, ws->cap.step, ws->cap.actor, &reply);
    if (rc != STATUS_OK)
        return rc;
    json_t *c = json_object_get(reply, "context");
    const char *id = json_string_value(json_object_get(c, "id"));
    if (!json_is_object(c) || !id) {
        json_decref(reply);
        return STATUS_EPROTO;
    }
    rc = scope_context(g, id, run_id, wf, ws, parent, lists);
    if (rc == STATUS_OK && (json_object_set_new(c, "workflow", json_string(wf->version)) ||
                            (parent && json_object_set_new(c, "parent", json_string(parent)))))
        rc = STATUS_ENOMEM;
    if (rc == STATUS_OK)
        *context = json_incref(c);
    json_decref(reply);
    return rc;
}

int gate_open_step(const gate_env *g, const char *run_id, const char *step, json_t **context)
{
    *context = NULL;
    const workflow_step *ws = workflow_step_find(g->wf, step);
    if (!ws)
        return STATUS_ENOTFOUND;
    return open_context(g, g->wf, ws, run_id, NULL, NULL, context);
}

/* The JSON lists of a context's stored scope ({} reads as an empty list) into s. Returns
 * STATUS_OK, STATUS_EPROTO or STATUS_ENOMEM. */
static int scope_list(const json_t *scope, const char *key, guard_strs *s)
{
    const json_t *list = json_object_get(scope, key);
    memset(s, 0, sizeof *s);
    if (json_is_object(list) && json_object_size(list) == 0)
        return STATUS_OK;
    if (!json_is_array(list))
        return STATUS_EPROTO;
    size_t n = json_array_size(list);
    if (n == 0)
        return STATUS_OK;
    if (!(s->items = calloc(n, sizeof *s->items)))
        return STATUS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *v = json_string_value(json_array_get(list, i));
        if (!v)
            return STATUS_EPROTO;
        s->items[i] = (char *)v; /* borrowed from scope */
        s->n = i + 1;
    }
    return STATUS_OK;
}

/* True when the context's run has ended by a cancellation or its budget: it takes no new
 * artifact (an observation or an output), as a completed run takes nothing (gate_context_from). */
static bool run_stopped(const json_t *raw)
{
    const char *status = json_string_value(json_object_get(raw, "run_status"));
    return status != NULL &&
           (strcmp(status, "cancelled") == 0 || strcmp(status, "budget_exhausted") == 0);
}

int gate_context_of(const gate_env *g, const char *context_id, const workflow **wf,
                    const workflow_step **step, guard_context *ctx)
{
    memset(ctx, 0, sizeof *ctx);
    *step = NULL;
    if (wf)
        *wf = NULL;
    json_t *raw = NULL;
    int rc = q_context_owner(g->st, context_id, &raw);
    if (rc == STATUS_OK && !raw)
        rc = STATUS_EPROTO;
    if (rc != STATUS_OK) {
        json_decref(raw);
        return rc;
    }
    return gate_context_from(g, raw, wf, step, ctx);
}

int gate_context_from(const gate_env *g, json_t *raw, const workflow **wf,
                      const workflow_step **step, guard_context *ctx)
{
    bool closed = false;
    int rc = gate_context_closed(g, raw, wf, step, ctx, &closed);
    if (rc == STATUS_OK && closed) {
        *step = NULL;
        if (wf)
            *wf = NULL;
        facts_context_free(ctx);
        return STATUS_EREFUSED;
    }
    return rc;
}

int gate_context_closed(const gate_env *g, json_t *raw, const workflow **wf,
                        const workflow_step **step, guard_context *ctx, bool *closed)
{
    *closed = false;
    memset(ctx, 0, sizeof *ctx);
    *step = NULL;
    if (wf)
        *wf = NULL;
    int rc = raw ? facts_context_from_json(raw, ctx) : STATUS_EPROTO;
    if (rc != STATUS_OK) {
        json_decref(raw);
        return rc;
    }
    /* A completed run's record is closed: its receipt signs its last event, and no host may
     * add to it through a context it kept (gate_context_from refuses it). */
    const char *run_status = json_string_value(json_object_get(raw, "run_status"));
    *closed = run_status && strcmp(run_status, "completed") == 0;
    /* The context acts under its run's workflow version, never the one charterd started
     * with; a context that records none was never completed and is not usable. */
    const char *version = json_string_value(json_object_get(raw, "workflow"));
    const workflow *w = NULL;
    rc = version && *version ? registry_get(g->st, version, &w) : STATUS_EPROTO;
    if (rc == STATUS_ENOTFOUND || rc == STATUS_EINVAL)
        rc = STATUS_EPROTO;
    const workflow_step *base =
        rc == STATUS_OK && ctx->step ? workflow_step_find(w, ctx->step) : NULL;
    if (rc == STATUS_OK && !base)
        rc = STATUS_ENOTFOUND;
    const json_t *scope = json_object_get(raw, "scope");
    if (rc == STATUS_OK && scope && !json_is_null(scope)) {
        guard_strs lists[3];
        static const char *const keys[3] = {"tools", "recipients", "resources"};
        memset(lists, 0, sizeof lists);
        for (size_t k = 0; k < 3 && rc == STATUS_OK; k++)
            rc = scope_list(scope, keys[k], &lists[k]);
        if (rc == STATUS_OK)
            rc = registry_narrowed(w, base, &lists[0], &lists[1], &lists[2], step);
        /* A stored scope wider than its step is not a fact to act on. */
        if (rc == STATUS_EREFUSED)
            rc = STATUS_EPROTO;
        for (size_t k = 0; k < 3; k++)
            free(lists[k].items);
    } else if (rc == STATUS_OK) {
        *step = base;
    }
    json_decref(raw);
    if (rc != STATUS_OK) {
        *step = NULL;
        facts_context_free(ctx);
        return rc;
    }
    if (wf)
        *wf = w;
    return STATUS_OK;
}

int gate_context(const gate_env *g, const char *context_id, const workflow_step **step,
                 guard_context *ctx)
{
    return gate_context_of(g, context_id, NULL, step, ctx);
}

/* "a, b, c" of s into buf. */
static void strs_join(const guard_strs *s, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < s->n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", s->items[i]);
}

static bool strs_holds(const guard_strs *s, const char *x)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->items[i], x) == 0)
            return true;
    return false;
}

int gate_open_narrowed(const gate_env *g, const char *parent_id, const char *run_id,
                       const char *step, const guard_strs *tools, const guard_strs *recipients,
                       const guard_strs *resources, json_t **context, const workflow_step **out,
                       char *why, size_t whylen)
{
    *context = NULL;
    *out = NULL;
    if (whylen > 0)
        why[0] = '\0';
    const workflow *wf = NULL;
    const workflow_step *ps = NULL;
    guard_context pctx;
    int rc = gate_context_of(g, parent_id, &wf, &ps, &pctx);
    if (rc != STATUS_OK)
        return rc;
    if (run_id && *run_id && strcmp(run_id, pctx.run_id) != 0) {
        snprintf(why, whylen, "run_id: context %s is of run %s, not %s", parent_id, pctx.run_id,
                 run_id);
        facts_context_free(&pctx);
        return STATUS_EINVAL;
    }
    if (step && *step && strcmp(step, ps->cap.step) != 0) {
        snprintf(why, whylen, "step: context %s is of step %s, not %s", parent_id, ps->cap.step,
                 step);
        facts_context_free(&pctx);
        return STATUS_EINVAL;
    }
    /* Scopes only narrow: every name asked for must be in the parent's list; an empty list
     * keeps the parent's, never "unrestricted". */
    static const char *const names[3] = {"tools", "recipients", "resources"};
    const guard_strs *want[3] = {tools, recipients, resources};
    const guard_strs *have[3] = {&ps->cap.tools, &ps->cap.recipients, &ps->cap.resources};
    json_t *lists = json_object();
    for (size_t k = 0; k < 3 && lists && rc == STATUS_OK; k++) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < have[k]->n; i++) {
            const char *x = have[k]->items[i];
            if ((want[k]->n == 0 || strs_holds(want[k], x)) &&
                json_array_append_new(list, json_string(x))) {
                json_decref(list);
                list = NULL;
            }
        }
        for (size_t i = 0; list && i < want[k]->n; i++) {
            if (!strs_holds(have[k], want[k]->items[i])) {
                char parent_list[1024];
                strs_join(have[k], parent_list, sizeof parent_list);
                snprintf(why, whylen,
                         "SCOPE_WIDENING: %s: \"%s\" is not in the parent context %s's %s {%s}",
                         names[k], want[k]->items[i], parent_id, names[k], parent_list);
                rc = STATUS_EDENIED;
                break;
            }
        }
        if (!list || json_object_set_new(lists, names[k], list))
            rc = rc == STATUS_OK ? STATUS_ENOMEM : rc;
    }
    if (!lists)
        rc = STATUS_ENOMEM;
    const workflow_step *base = rc == STATUS_OK ? workflow_step_find(wf, ps->cap.step) : NULL;
    guard_strs eff[3];
    memset(eff, 0, sizeof eff);
    for (size_t k = 0; k < 3 && rc == STATUS_OK; k++)
        rc = scope_list(lists, names[k], &eff[k]);
    if (rc == STATUS_OK && !base)
        rc = STATUS_ENOTFOUND;
    if (rc == STATUS_OK)
        rc = registry_narrowed(wf, base, &eff[0], &eff[1], &eff[2], out);
    if (rc == STATUS_OK)
        rc = open_context(g, wf, base, pctx.run_id, parent_id, lists, context);
    if (rc == STATUS_OK) {
        /* The narrowing is in the graph already (the context's scope); the event tells it in
         * the run's story. It records no decision, so losing it changes none. */
        json_t *detail = json_pack("{s:s, s:s, s:s, s:O}", "context",
                                   json_string_value(json_object_get(*context, "id")), "parent",
                                   parent_id, "step", base->cap.step, "scope", lists);
        evlog_owned ev;
        if (detail &&
            evlog_owned_event(&ev, "context_narrowed", NULL, NULL, detail, NULL) == STATUS_OK)
            (void)evlog_append(g->st, pctx.run_id, &ev.ev, NULL);
        if (detail)
            evlog_owned_free(&ev);
        json_decref(detail);
    }
    for (size_t k = 0; k < 3; k++)
        free(eff[k].items);
    json_decref(lists);
    facts_context_free(&pctx);
    if (rc != STATUS_OK)
        *out = NULL;
    return rc;
}

/* RULE-INPUT-SUMMARY: only a summary that is there and, under a key, sealed by charterd. */
int gate_summary_verify(json_t *raw)
{
    const char *id = json_string_value(json_object_get(raw, "id"));
    if (!json_is_object(raw) || id == NULL)
        return -1;
    const char *sh = json_string_value(json_object_get(raw, "summary_hash"));
    char why[320];
    if (!json_is_string(json_object_get(raw, "summary")) || sh == NULL) {
        /* Never walked instead: whoever can delete a summary could otherwise have a decision
         * made from edges and labels edited below it. */
        snprintf(why, sizeof why,
                 "%.128s has no lineage summary (deleted, or written before summaries were "
                 "kept): its ancestry is not walked at decision time",
                 id);
    } else {
        const char *seal = json_string_value(json_object_get(raw, "summary_seal"));
        int rc = summary_seal_check(id, sh, seal);
        if (rc == STATUS_OK || rc == STATUS_ENOKEY)
            return 0;
        snprintf(why, sizeof why,
                 seal == NULL ? "the lineage summary of %.128s carries no seal of this charterd's "
                                "integrity key"
                              : "the seal of %.128s's lineage summary does not verify under this "
                                "charterd's integrity key",
                 id);
    }
    return json_object_set_new(raw, "unverified", json_string(why)) == 0 ? 0 : -1;
}

/* With an integrity key, seals the summary of the artifact just created (reply: the
 * create_artifact reply). A seal that cannot be stored leaves the summary unsealed, and every
 * decision on the artifact is UNKNOWN (gate_summary_verify): never an allow from an unsealed
 * summary. */
static void seal_summary(const gate_env *g, const json_t *reply)
{
    const char *sh = json_string_value(json_object_get(reply, "summary_hash"));
    const char *id = json_string_value(json_object_get(json_object_get(reply, "artifact"), "id"));
    char mac[65];
    if (!integrity_keyed())
        return;
    json_t *out = NULL;
    if (summary_seal_make(id, sh, mac) != STATUS_OK ||
        q_seal_summary(g->st, id, sh, mac, &out) != STATUS_OK ||
        !json_is_true(json_object_get(out, "sealed")))
        log_error("artifact %s: its lineage summary could not be sealed; every decision on it "
                  "is UNKNOWN",
                  id ? id : "(unnamed)");
    json_decref(out);
}

/* The ancestry of id walked in the graph (lineage.h), up to the service's limit. */
static int walk_ancestry(const gate_env *g, const char *id, json_t **raw)
{
    char limit[32];
    snprintf(limit, sizeof limit, "%zu", g->limits->max_ancestry);
    return lineage_ancestry(g->st, id, limit, raw);
}

/* What the input gate decides from and records. */
typedef struct {
    json_t *raws;      /* per input: its summary reply (gate_summary_verify), or on a refusal
                        * its walked ancestry; what the snapshot records */
    json_t *summaries; /* per input {id, summary_hash}: the summary each decision used ("" for
                        * none), recorded beside the facts whatever they are */
    int conf;          /* an output's labels, when every input is allowed */
    int integrity;
} input_facts;

static void input_facts_free(input_facts *f)
{
    json_decref(f->raws);
    json_decref(f->summaries);
    memset(f, 0, sizeof *f);
}

/* The facts of the input gate over ids in one database call (charter_input_facts): the
 * context, checked and completed by gate_context_from into *wf, *ws and *ctx, and each
 * artifact's lineage summary, checked by gate_summary_verify, into f. Returns STATUS_OK,
 * STATUS_ENOTFOUND (the context or an artifact), STATUS_EREFUSED (a completed run), the failure
 * of gate_context_from or of the store (unavailable: no facts), or STATUS_ENOMEM. */
/* adds: the facts are for a new artifact, which a stopped run refuses (STATUS_EREFUSED). */
static int read_input_facts(const gate_env *g, const char *context_id, const char *const *ids,
                            size_t n, bool adds, const workflow **wf, const workflow_step **ws,
                            guard_context *ctx, input_facts *f)
{
    memset(f, 0, sizeof *f);
    json_t *reply = NULL;
    json_t *req =
        json_pack("{s:s, s:o*}", "context_id", context_id, "artifact_ids", strings_json(ids, n));
    int rc = req ? q_input_facts(g->st, req, &reply) : STATUS_ENOMEM;
    json_decref(req);
    json_t *sums = json_object_get(reply, "summaries");
    if (rc == STATUS_OK && (!json_is_array(sums) || json_array_size(sums) != n))
        rc = STATUS_EPROTO;
    if (rc == STATUS_OK && adds && run_stopped(json_object_get(reply, "context")))
        rc = STATUS_EREFUSED;
    if (rc == STATUS_OK)
        rc = gate_context_from(g, json_incref(json_object_get(reply, "context")), wf, ws, ctx);
    if (rc != STATUS_OK) {
        json_decref(reply);
        return rc;
    }
    f->raws = json_incref(sums);
    f->summaries = json_array();
    json_decref(reply);
    for (size_t i = 0; rc == STATUS_OK && i < n; i++) {
        json_t *raw = json_array_get(f->raws, i);
        const char *sh = json_string_value(json_object_get(raw, "summary_hash"));
        if (!json_is_object(raw) || !json_is_string(json_object_get(raw, "id")))
            rc = STATUS_EPROTO;
        else if (json_is_true(json_object_get(raw, "missing")))
            rc = STATUS_ENOTFOUND;
        else if (!f->summaries || gate_summary_verify(raw) != 0 ||
                 json_array_append_new(f->summaries, json_pack("{s:s, s:s}", "id", ids[i],
                                                               "summary_hash", sh ? sh : "")))
            rc = STATUS_ENOMEM;
    }
    if (rc != STATUS_OK) {
        input_facts_free(f);
        facts_context_free(ctx);
    }
    return rc;
}

/* The deny path: a refusal names the path from the source to the artifact, which only the
 * ancestry holds. The ancestries are walked and, when the walk refuses with the same outcome
 * and codes, its witness and its facts are the ones recorded. A walk that disagrees (an edge
 * or label deeper than the inputs' own nodes was changed behind the API's back, which audit
 * names) leaves the summaries' refusal as it is: deeper raw keys never change a decision. */
static int walk_for_witness(const gate_env *g, const workflow_step *ws, const guard_context *ctx,
                            const char *const *ids, size_t n, guard_decision *d, input_facts *f)
{
    json_t *walked = json_array();
    int rc = walked ? STATUS_OK : STATUS_ENOMEM;
    for (size_t i = 0; rc == STATUS_OK && i < n; i++) {
        json_t *raw = NULL;
        int wrc = walk_ancestry(g, ids[i], &raw);
        if (wrc == STATUS_ENOMEM)
            rc = wrc;
        else if (json_array_append_new(walked, wrc == STATUS_OK && raw ? raw : json_null()))
            rc = STATUS_ENOMEM;
    }
    guard_decision w = {0};
    int wc = GUARD_CONF_PUBLIC, wi = GUARD_INTEGRITY_TRUSTED;
    if (rc == STATUS_OK && evaluator_input_decide(&ws->cap, ctx, walked, ids, &w, &wc, &wi) == 0 &&
        w.outcome == d->outcome && w.codes == d->codes) {
        guard_decision_free(d);
        *d = w;
        json_decref(f->raws);
        f->raws = walked;
        return STATUS_OK;
    }
    guard_decision_free(&w);
    json_decref(walked);
    return rc;
}

/* Input gate over ids without recording, from the facts read_input_facts gathered: decides
 * with evaluator_input_decide: d is the worst verdict over all ids (DENY before UNKNOWN before
 * ALLOW, codes merged, the first witness kept, UNKNOWN when any fact was missing or any
 * summary unverified) and, when every input is allowed, f->conf and f->integrity are the
 * recomputed labels of an output derived from all of them. Returns STATUS_OK or
 * STATUS_ENOMEM. */
static int check_inputs(const gate_env *g, const workflow_step *ws, const guard_context *ctx,
                        const char *const *ids, size_t n, guard_decision *d, input_facts *f)
{
    memset(d, 0, sizeof *d);
    if (evaluator_input_decide(&ws->cap, ctx, f->raws, ids, d, &f->conf, &f->integrity) != 0)
        return STATUS_ENOMEM;
    /* A quarantine is read with the summaries' sources, never from a walked ancestry: a walk
     * could not agree with that refusal, whose witness names the resource already, and it
     * would make the refusal's cost grow with the lineage's depth. */
    if (d->outcome == GUARD_DENY && (d->codes & (1u << GUARD_RESOURCE_QUARANTINED)) == 0)
        return walk_for_witness(g, ws, ctx, ids, n, d, f);
    return STATUS_OK;
}

/* The evaluator fingerprint of a decision made under workflow wf (fp, 65 bytes; "" when it
 * cannot be computed: the process's default is recorded then). */
static void decision_evaluator(const workflow *wf, char fp[65])
{
    if (wf == NULL || evaluator_fingerprint(wf, fp) != 0)
        fp[0] = '\0';
}

/* The facts every snapshot starts with: the gate, the workflow version and the (possibly
 * narrowed) step capability the decision was made under, and the context. */
static json_t *snapshot_base(const char *gate, const workflow *wf, const workflow_step *ws,
                             const guard_context *ctx)
{
    return json_pack("{s:s, s:s, s:s, s:o*, s:o*, s:i}", "gate", gate, "workflow",
                     wf ? wf->version : "", "step", ws->cap.step, "cap",
                     evaluator_cap_json(&ws->cap), "context", context_json(ctx),
                     /* the evaluator version replay decides it with */
                     "evaluator_version", EVALUATOR_VERSION);
}

/* The ancestries as a snapshot keeps them: each one's lineage reference, its new records
 * stored first (lineage.h), so what a decision stores does not grow with the lineage's depth.
 * A null (a fact the graph could not supply) stays null; an ancestry whose records could not be
 * stored is kept whole. Returns a new reference, or NULL when memory ran out. */
static json_t *kept_ancestries(const gate_env *g, const json_t *raws)
{
    json_t *kept = json_array();
    size_t i;
    json_t *raw;
    json_array_foreach(raws, i, raw)
    {
        json_t *ref = NULL;
        if (json_is_object(raw) && lineage_keep(g->st, raw) == STATUS_OK)
            ref = lineage_ref(raw);
        if (ref == NULL)
            ref = json_incref(raw);
        if (kept == NULL || json_array_append_new(kept, ref) != 0) {
            json_decref(kept);
            return NULL;
        }
    }
    return kept;
}

/* The input gate's snapshot: the base, the facts decided from (ancestries: the summaries, or
 * the walked ancestries of a refusal) and the summary every input was decided with. */
static json_t *input_snapshot(const gate_env *g, const workflow *wf, const workflow_step *ws,
                              const guard_context *ctx, const input_facts *f)
{
    json_t *snap = snapshot_base("input", wf, ws, ctx);
    if (snap && (json_object_set_new(snap, "ancestries", kept_ancestries(g, f->raws)) ||
                 json_object_set(snap, "summaries", f->summaries))) {
        json_decref(snap);
        return NULL;
    }
    return snap;
}

static json_t *input_detail(const char *context_id, const workflow_step *ws, const char *const *ids,
                            size_t n)
{
    return json_pack("{s:s, s:s, s:o*}", "context", context_id, "step", ws->cap.step, "artifacts",
                     strings_json(ids, n));
}

/* The SHA-256 of the content each input was recorded with, as its verified lineage summary
 * names it (its field "hash"), into hashes (n of them; "" where the summary names none). */
static void recorded_hashes(const input_facts *f, size_t n, char (*hashes)[65])
{
    for (size_t i = 0; i < n; i++) {
        const char *text =
            json_string_value(json_object_get(json_array_get(f->raws, i), "summary"));
        json_t *summary = text ? json_loads(text, 0, NULL) : NULL;
        const char *h = json_string_value(json_object_get(summary, "hash"));
        snprintf(hashes[i], 65, "%s", h && strlen(h) == 64 ? h : "");
        json_decref(summary);
    }
}

int gate_check_input(const gate_env *g, const char *context_id, const char *const *ids, size_t n,
                     guard_decision *d, uint64_t *event_seq)
{
    return gate_check_input_recorded(g, context_id, ids, n, d, event_seq, NULL);
}

int gate_check_input_recorded(const gate_env *g, const char *context_id, const char *const *ids,
                              size_t n, guard_decision *d, uint64_t *event_seq, char (*hashes)[65])
{
    memset(d, 0, sizeof *d);
    *event_seq = 0;
    if (n == 0 || n > g->limits->max_ids)
        return STATUS_EINVAL;
    const workflow_step *ws = NULL;
    const workflow *wf = NULL;
    guard_context ctx;
    input_facts f;
    int rc = read_input_facts(g, context_id, ids, n, false, &wf, &ws, &ctx, &f);
    if (unavailable(rc)) {
        guard_decision_unknown(d, "the graph could not supply the context or the lineage "
                                  "summaries");
        return STATUS_OK;
    }
    if (rc != STATUS_OK)
        return rc;
    rc = check_inputs(g, ws, &ctx, ids, n, d, &f);
    if (rc == STATUS_OK) {
        char fp[65];
        decision_evaluator(wf, fp);
        json_t *snap = input_snapshot(g, wf, ws, &ctx, &f);
        json_t *detail = input_detail(context_id, ws, ids, n);
        record_decision(g, ctx.run_id, "input_checked", fp, d, detail, snap, event_seq);
        json_decref(snap);
        json_decref(detail);
        /* An allowed input was decided from its summary (a refusal's facts may be a walk). */
        if (hashes && d->outcome == GUARD_ALLOW)
            recorded_hashes(&f, n, hashes);
    }
    input_facts_free(&f);
    facts_context_free(&ctx);
    return rc;
}

int gate_evaluate_input(const gate_env *g, const char *context_id, const char *const *ids, size_t n,
                        guard_decision *d)
{
    memset(d, 0, sizeof *d);
    if (n == 0 || n > g->limits->max_ids)
        return STATUS_EINVAL;
    const workflow_step *ws = NULL;
    guard_context ctx;
    input_facts f;
    int rc = read_input_facts(g, context_id, ids, n, false, NULL, &ws, &ctx, &f);
    if (unavailable(rc)) {
        guard_decision_unknown(d, "the graph could not supply the context or the lineage "
                                  "summaries");
        return STATUS_OK;
    }
    if (rc != STATUS_OK)
        return rc;
    rc = check_inputs(g, ws, &ctx, ids, n, d, &f);
    input_facts_free(&f);
    facts_context_free(&ctx);
    return rc;
}

/* Creates an artifact of run_id with its edges and its event ev in one database call, its
 * lineage summary made from the parents' summaries verified names ({id, summary_hash} per
 * input: the ones the input gate decided with; NULL for a source, which has no parents).
 * STATUS_EREFUSED, nothing written, when one of them was swapped since it was verified. */
static int create_artifact(const gate_env *g, const char *run_id, json_t *arg,
                           const json_t *verified, const evlog_event *ev, json_t **artifact)
{
    json_t *reply = NULL, *none = verified ? NULL : json_array();
    int rc = verified || none
                 ? evlog_create_artifact(g->st, run_id, arg, verified ? verified : none, ev, &reply)
                 : STATUS_ENOMEM;
    json_decref(none);
    if (rc != STATUS_OK)
        return rc;
    seal_summary(g, reply);
    json_t *a = json_object_get(reply, "artifact");
    if (!json_is_object(a)) {
        json_decref(reply);
        return STATUS_EPROTO;
    }
    *artifact = json_incref(a);
    json_decref(reply);
    return STATUS_OK;
}

/* The labels of resource_id as the graph holds them (conf 0..2, integrity 0..1) and its title
 * (new reference in *res). Returns STATUS_OK or the store's failure. */
static int resource_labels(const gate_env *g, const char *resource_id, json_t **res,
                           long long *conf, long long *integ)
{
    int rc = q_get_resource(g->st, resource_id, res);
    if (rc == STATUS_OK && !json_is_object(*res))
        rc = STATUS_EPROTO;
    if (rc != STATUS_OK)
        return rc;
    json_t *jc = json_object_get(*res, "conf"), *ji = json_object_get(*res, "integrity");
    *conf = json_is_string(jc) ? atoll(json_string_value(jc)) : json_integer_value(jc);
    *integ = json_is_string(ji) ? atoll(json_string_value(ji)) : json_integer_value(ji);
    return STATUS_OK;
}

/* gate_read_source, or with chunk set, gate_read_chunk: the artifact's title and content are
 * the chunk's and its detail names the chunk and the search. */
static int read_source(const gate_env *g, const char *context_id, const char *resource_id,
                       const gate_chunk *chunk, guard_decision *d, json_t **artifact)
{
    memset(d, 0, sizeof *d);
    *artifact = NULL;
    const workflow_step *ws = NULL;
    const workflow *wf = NULL;
    guard_context ctx;
    int rc = gate_context_of(g, context_id, &wf, &ws, &ctx);
    if (unavailable(rc)) {
        guard_decision_unknown(d, "the graph could not supply the context");
        return STATUS_OK;
    }
    long long max = 0;
    const char *type = NULL;
    /* An observed resource has no registered content: a host records what it read. */
    if (rc == STATUS_OK && !chunk && workflow_observed(wf, resource_id, &max, &type)) {
        facts_context_free(&ctx);
        return STATUS_EINVAL;
    }
    if (rc != STATUS_OK)
        return rc;
    json_t *detail = json_pack("{s:s, s:s, s:s}", "context", context_id, "step", ws->cap.step,
                               "resource", resource_id);
    if (detail && chunk &&
        (json_object_set_new(detail, "chunk", json_string(chunk->chunk_id)) ||
         json_object_set_new(detail, "search", json_string(chunk->search_id)))) {
        json_decref(detail);
        detail = NULL;
    }
    if (!detail) {
        facts_context_free(&ctx);
        return STATUS_ENOMEM;
    }
    /* The step, not the model, says what may be read: a resource outside it is refused before
     * anything is fetched. */
    char fp[65];
    decision_evaluator(wf, fp);
    json_t *snap = snapshot_base("source", wf, ws, &ctx);
    if (snap && json_object_set_new(snap, "resource", json_string(resource_id))) {
        json_decref(snap);
        snap = NULL;
    }
    if (!snap) {
        json_decref(detail);
        facts_context_free(&ctx);
        return STATUS_ENOMEM;
    }
    evaluator_source_decide(&ws->cap, resource_id, d);
    if (d->outcome != GUARD_ALLOW) {
        record_decision(g, ctx.run_id, "source_read", fp, d, detail, snap, NULL);
        json_decref(snap);
        json_decref(detail);
        facts_context_free(&ctx);
        return STATUS_OK;
    }

    json_t *res = NULL;
    long long conf = 0, integ = 0;
    rc = resource_labels(g, resource_id, &res, &conf, &integ);
    if (rc == STATUS_OK) {
        const char *content =
            chunk ? chunk->text : json_string_value(json_object_get(res, "content"));
        const char *title = chunk ? chunk->title : json_string_value(json_object_get(res, "title"));
        char hash[65];
        gate_sha256_hex(content ? content : "", content ? strlen(content) : 0, hash);
        evlog_owned ev = {0};
        json_t *arg = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:[], s:s, s:b}",
                                "run_id", ctx.run_id, "context_id", context_id, "kind", "source",
                                "title", title ? title : resource_id, "conf", conf, "integrity",
                                integ, "hash", hash, "content", content ? content : "", "input_ids",
                                "resource", resource_id, "capture_complete", 1);
        rc = arg ? evlog_owned_event(&ev, "source_read", d, fp, detail, snap) : STATUS_ENOMEM;
        if (rc == STATUS_OK)
            rc = create_artifact(g, ctx.run_id, arg, NULL, &ev.ev, artifact);
        evlog_owned_free(&ev);
        json_decref(arg);
        if (rc != STATUS_OK && rc != STATUS_ENOMEM && rc != STATUS_ENOTFOUND) {
            guard_decision_free(d);
            guard_decision_unknown(d, "the source could not be registered");
            rc = STATUS_OK;
        }
    } else if (unavailable(rc)) {
        guard_decision_unknown(d, "the graph could not supply the resource");
        rc = STATUS_OK;
    }
    json_decref(res);
    json_decref(snap);
    json_decref(detail);
    facts_context_free(&ctx);
    return rc;
}

int gate_read_source(const gate_env *g, const char *context_id, const char *resource_id,
                     guard_decision *d, json_t **artifact)
{
    return read_source(g, context_id, resource_id, NULL, d, artifact);
}

int gate_read_chunk(const gate_env *g, const char *context_id, const char *resource_id,
                    const gate_chunk *chunk, guard_decision *d, json_t **artifact)
{
    return read_source(g, context_id, resource_id, chunk, d, artifact);
}

/* What an observation is: the resource named, the bytes read, where they were read. */
typedef struct {
    const char *context_id, *resource_id, *content, *locator;
    size_t len;
} observation;

/* The allowed observation o recorded: the source artifact (the resource's labels and title, the
 * content and its hash, its FROM_RESOURCE edge) and its source_observed event ev in one call. */
static int observe_record(const gate_env *g, const guard_context *ctx, const observation *o,
                          guard_decision *d, evlog_owned *ev, json_t **artifact)
{
    json_t *res = NULL;
    long long conf = 0, integ = 0;
    int rc = resource_labels(g, o->resource_id, &res, &conf, &integ);
    if (unavailable(rc)) {
        json_decref(res);
        guard_decision_free(d);
        guard_decision_unknown(d, "the graph could not supply the resource");
        return STATUS_OK;
    }
    const char *title = json_string_value(json_object_get(res, "title"));
    char hash[65];
    gate_sha256_hex(o->content, o->len, hash);
    json_t *arg = rc != STATUS_OK
                      ? NULL
                      : json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:s%, s:[], s:s, "
                                  "s:b}",
                                  "run_id", ctx->run_id, "context_id", o->context_id, "kind",
                                  "source", "title", title ? title : o->resource_id, "conf", conf,
                                  "integrity", integ, "hash", hash, "content", o->content, o->len,
                                  "input_ids", "resource", o->resource_id, "capture_complete", 1);
    if (rc == STATUS_OK && arg == NULL)
        rc = STATUS_ENOMEM;
    if (rc == STATUS_OK)
        rc = create_artifact(g, ctx->run_id, arg, NULL, &ev->ev, artifact);
    json_decref(arg);
    json_decref(res);
    if (rc != STATUS_OK && rc != STATUS_ENOMEM && rc != STATUS_ENOTFOUND) {
        guard_decision_free(d);
        guard_decision_unknown(d, "the observation could not be recorded");
        rc = STATUS_OK;
    }
    return rc;
}

/* The facts and the detail of observation o: the snapshot names the resource (what the source
 * gate decides from), the locator and the content's hash; the detail adds the byte count. */
static int observe_facts(const workflow *wf, const workflow_step *ws, const guard_context *ctx,
                         const observation *o, json_t **snap, json_t **detail)
{
    char hash[65];
    gate_sha256_hex(o->content, o->len, hash);
    *snap = snapshot_base("source", wf, ws, ctx);
    if (*snap && json_object_update_new(*snap, json_pack("{s:s, s:s, s:s}", "resource",
                                                         o->resource_id, "locator", o->locator,
                                                         "content_sha256", hash)) != 0) {
        json_decref(*snap);
        *snap = NULL;
    }
    *detail = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "context", o->context_id, "step",
                        ws->cap.step, "resource", o->resource_id, "locator", o->locator, "bytes",
                        (json_int_t)o->len, "sha256", hash);
    return *snap && *detail ? STATUS_OK : STATUS_ENOMEM;
}

/* Whether o may be recorded at all under workflow wf: the resource is observed and the content
 * fits its limit. STATUS_EINVAL with why (n bytes) otherwise: nothing is written. */
static int observe_admissible(const workflow *wf, const observation *o, char *why, size_t n)
{
    long long max = 0;
    const char *type = NULL;
    if (!workflow_observed(wf, o->resource_id, &max, &type)) {
        snprintf(why, n,
                 "resource_id: %.64s is not an observed resource of workflow %.64s (its "
                 "content is registered: read it with ReadSource)",
                 o->resource_id, wf ? wf->name : "?");
        return STATUS_EINVAL;
    }
    if (!workflow_one_line(o->locator)) {
        snprintf(why, n,
                 "locator: holds a control character (where the bytes were read is one "
                 "line)");
        return STATUS_EINVAL;
    }
    if ((long long)o->len > max) {
        snprintf(why, n, "content: %zu bytes, over the %lld bytes resource %.64s allows", o->len,
                 max, o->resource_id);
        return STATUS_EINVAL;
    }
    return STATUS_OK;
}

int gate_observe_source(const gate_env *g, const char *context_id, const char *resource_id,
                        const char *content, size_t len, const char *locator, guard_decision *d,
                        json_t **artifact, char *why, size_t whylen)
{
    memset(d, 0, sizeof *d);
    *artifact = NULL;
    observation o = {context_id, resource_id, content, locator, len};
    const workflow_step *ws = NULL;
    const workflow *wf = NULL;
    guard_context ctx;
    json_t *raw = NULL;
    int rc = q_context_owner(g->st, context_id, &raw);
    if (rc == STATUS_OK && raw == NULL)
        rc = STATUS_EPROTO;
    if (rc == STATUS_OK && run_stopped(raw)) {
        json_decref(raw);
        return STATUS_EREFUSED;
    }
    if (rc == STATUS_OK)
        rc = gate_context_from(g, raw, &wf, &ws, &ctx);
    else
        json_decref(raw);
    if (unavailable(rc)) {
        guard_decision_unknown(d, "the graph could not supply the context");
        return STATUS_OK;
    }
    if (rc != STATUS_OK)
        return rc;
    json_t *snap = NULL, *detail = NULL;
    rc = observe_admissible(wf, &o, why, whylen);
    if (rc == STATUS_OK)
        rc = observe_facts(wf, ws, &ctx, &o, &snap, &detail);
    if (rc == STATUS_OK) {
        char fp[65];
        decision_evaluator(wf, fp);
        /* As for ReadSource: the step, not the host, says what may be observed; the labels
         * are the resource's, never the caller's. */
        evaluator_source_decide(&ws->cap, resource_id, d);
        if (d->outcome != GUARD_ALLOW) {
            record_decision(g, ctx.run_id, "source_observed", fp, d, detail, snap, NULL);
        } else {
            evlog_owned ev = {0};
            rc = evlog_owned_event(&ev, "source_observed", d, fp, detail, snap);
            if (rc == STATUS_OK)
                rc = observe_record(g, &ctx, &o, d, &ev, artifact);
            evlog_owned_free(&ev);
        }
    }
    json_decref(snap);
    json_decref(detail);
    facts_context_free(&ctx);
    return rc;
}

/* UNKNOWN GRAPH_ERROR for an output that could not be created (rc): when an input's lineage
 * summary was swapped after the input gate verified it (STATUS_EREFUSED), the witness names it
 * as the query library does. */
static void output_unrecorded(const gate_env *g, int rc, guard_decision *d)
{
    const char *why = rc == STATUS_EREFUSED ? strstr(store_last_error(g->st), "refused: ") : NULL;
    char witness[320];
    snprintf(witness, sizeof witness, "the output could not be recorded%s%.280s", why ? ": " : "",
             why ? why + strlen("refused: ") : "");
    guard_decision_unknown(d, witness);
}

int gate_record_output(const gate_env *g, const char *context_id, const char *const *input_ids,
                       size_t n, const char *title, const char *content, guard_decision *d,
                       json_t **artifact)
{
    memset(d, 0, sizeof *d);
    *artifact = NULL;
    if (n == 0 || n > g->limits->max_ids || !title || !*title || strlen(title) > 256 || !content ||
        strlen(content) > g->limits->max_content)
        return STATUS_EINVAL;
    const workflow_step *ws = NULL;
    const workflow *wf = NULL;
    guard_context ctx;
    input_facts f;
    int rc = read_input_facts(g, context_id, input_ids, n, true, &wf, &ws, &ctx, &f);
    if (unavailable(rc)) {
        guard_decision_unknown(d, "the graph could not supply the context or the lineage "
                                  "summaries");
        return STATUS_OK;
    }
    if (rc != STATUS_OK)
        return rc;
    rc = check_inputs(g, ws, &ctx, input_ids, n, d, &f);
    if (rc != STATUS_OK) {
        input_facts_free(&f);
        facts_context_free(&ctx);
        return rc;
    }
    char fp[65];
    decision_evaluator(wf, fp);
    json_t *snap = input_snapshot(g, wf, ws, &ctx, &f);
    json_t *detail = json_pack("{s:s, s:s, s:s, s:o*}", "context", context_id, "step", ws->cap.step,
                               "title", title, "inputs", strings_json(input_ids, n));
    if (d->outcome != GUARD_ALLOW) {
        record_decision(g, ctx.run_id, "output_refused", fp, d, detail, snap, NULL);
    } else {
        /* Provenance is captured here, by the host: the parents are exactly the inputs that
         * passed the gate, and the labels are recomputed from them, never taken from a caller. */
        char hash[65];
        gate_sha256_hex(content, strlen(content), hash);
        evlog_owned ev = {0};
        json_t *arg =
            json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:o*, s:b}", "run_id", ctx.run_id,
                      "context_id", context_id, "kind", "derived", "title", title, "conf", f.conf,
                      "integrity", f.integrity, "hash", hash, "content", content, "input_ids",
                      strings_json(input_ids, n), "capture_complete", 1);
        rc = arg ? evlog_owned_event(&ev, "output_recorded", d, fp, detail, snap) : STATUS_ENOMEM;
        /* The parents' summaries as verified above: one swapped since is refused there. */
        if (rc == STATUS_OK)
            rc = create_artifact(g, ctx.run_id, arg, f.summaries, &ev.ev, artifact);
        evlog_owned_free(&ev);
        json_decref(arg);
        if (rc != STATUS_OK && rc != STATUS_ENOMEM && rc != STATUS_ENOTFOUND) {
            guard_decision_free(d);
            output_unrecorded(g, rc, d);
            rc = STATUS_OK;
        }
    }
    json_decref(snap);
    json_decref(detail);
    input_facts_free(&f);
    facts_context_free(&ctx);
    return rc;
}

int gate_trace(const gate_env *g, const char *artifact_id, json_t **ancestry)
{
    char limit[32];
    snprintf(limit, sizeof limit, "%zu", g->limits->max_ancestry);
    return q_ancestry(g->st, artifact_id, limit, ancestry);
}
