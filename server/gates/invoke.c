/*
 * invoke.c - the tool-call gate: look the invocation up, check the request against the tool's
 * declaration and each value against its stated origin, decide from the lineage summaries,
 * record or commit.
 *
 * The effect of a tool is committed by charter_commit_delivery, the conditional write every
 * delivery commits by: the same checks on the database clock (run, budget, chain, invocation
 * unused, the head), with the artifacts the values came from checked in place of a payload.
 * Any number of charterd processes may run this against one Redis: exactly once comes from
 * the database, never from this process.
 */
#include "gates/invoke.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "core/invariant.h"
#include "evidence/evlog.h"
#include "evidence/receipt_issue.h"
#include "gates/approval.h"
#include "gates/archived.h"
#include "gates/deliver.h"
#include "policy/evaluator.h"
#include "policy/facts.h"
#include "policy/tokens.h"

/* One invocation in progress; everything is owned here and released by invoke_free. */
typedef struct {
    const gate_env *g;
    const char *context_id, *tool, *inv;
    const invoke_argument *args;
    size_t n;
    json_t *reply; /* charter_invoke_facts */
    const workflow *wf;
    const workflow_step *ws;
    guard_context ctx;
    bool have_ctx;
    bool closed; /* the context's run is completed: only a committed invocation is answered */
    const json_t *decl; /* the tool's declaration, or NULL */
    char *canonical;    /* the arguments as committed: {"name": value, ...}, sorted */
    char fingerprint[65];
    json_t *request; /* the request as the guard reads it (and the snapshot records it) */
    json_t *summaries;
    evaluator_invoke_facts facts;
    double now;
    char evaluator[65];
    json_t *snapshot, *detail;
    evlog_head head;
    bool have_head;
} invoke_state;

void invoke_result_free(invoke_result *r)
{
    guard_decision_free(&r->decision);
    json_decref(r->delivery);
    r->delivery = NULL;
    r->acknowledged = false;
    json_decref(r->archive_owners);
    r->archive_owners = NULL;
    r->not_found[0] = '\0';
}

static void invoke_free(invoke_state *s, invoke_result *out)
{
    /* chain_order and sources borrow from the facts freed below. */
    free(out->decision.chain_order.items);
    free(out->decision.sources.items);
    memset(&out->decision.chain_order, 0, sizeof out->decision.chain_order);
    memset(&out->decision.sources, 0, sizeof out->decision.sources);
    evaluator_invoke_facts_free(&s->facts);
    json_decref(s->reply);
    json_decref(s->request);
    json_decref(s->summaries);
    json_decref(s->snapshot);
    json_decref(s->detail);
    free(s->canonical);
    if (s->have_ctx)
        facts_context_free(&s->ctx);
}

static int bad(char *why, size_t n, const char *fmt, const char *a, const char *b)
{
    snprintf(why, n, fmt, a, b != NULL ? b : "");
    return STATUS_EINVAL;
}

/* The request's shape, before anything is read: each value and where it says it came from. */
static int check_shape(const invoke_state *s, char *why, size_t n)
{
    if (!ids_invocation_ok(s->inv))
        return bad(why, n, "%s%s", IDS_INVOCATION_RULE, "");
    if (s->n > WORKFLOW_MAX_ARGUMENTS)
        return bad(why, n, "arguments: at most 32%s%s", "", "");
    for (size_t i = 0; i < s->n; i++) {
        const invoke_argument *a = &s->args[i];
        size_t len = a->value != NULL ? strlen(a->value) : 0;
        bool quoted = a->quoted_from != NULL && a->quoted_from[0] != '\0';
        if (a->name == NULL || !ids_graph_ok(a->name))
            return bad(why, n, "arguments: a name is 1 to 64 of [A-Za-z0-9._-]%s%s", "", "");
        if (len == 0 || len > INVOKE_MAX_VALUE)
            return bad(why, n, "arguments.%s: a value is 1 to 4096 bytes%s", a->name, "");
        if ((a->n_lineage > 0) + (a->from_task ? 1 : 0) + (quoted ? 1 : 0) != 1)
            return bad(why, n,
                       "arguments.%s: say where the value came from with exactly one of "
                       "lineage, from_task and quoted_from%s",
                       a->name, "");
        for (size_t k = 0; k < a->n_lineage; k++)
            if (!ids_graph_ok(a->lineage[k]))
                return bad(why, n,
                           "arguments.%s.lineage: an artifact id is 1 to 128 of "
                           "[A-Za-z0-9._-]%s",
                           a->name, "");
        if (quoted && !ids_graph_ok(a->quoted_from))
            return bad(why, n, "arguments.%s.quoted_from: 1 to 128 of [A-Za-z0-9._-]%s", a->name,
                       "");
    }
    return STATUS_OK;
}

/* Adds id to list unless it is there. Returns 0 or -1. */
static int add_once(json_t *list, const char *id)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (strcmp(json_string_value(v), id) == 0)
            return 0;
    }
    return json_array_append_new(list, json_string(id));
}

/* 1. The facts in one read: every artifact a value names, with its content. */
static int read_facts(invoke_state *s)
{
    json_t *ids = json_array(), *quoted = json_array();
    int rc = ids && quoted ? STATUS_OK : STATUS_ENOMEM;
    for (size_t i = 0; rc == STATUS_OK && i < s->n; i++) {
        const invoke_argument *a = &s->args[i];
        for (size_t k = 0; rc == STATUS_OK && k < a->n_lineage; k++)
            rc = add_once(ids, a->lineage[k]) == 0 && add_once(quoted, a->lineage[k]) == 0
                     ? STATUS_OK
                     : STATUS_ENOMEM;
        if (rc == STATUS_OK && a->quoted_from != NULL && a->quoted_from[0] != '\0' &&
            (add_once(ids, a->quoted_from) != 0 || add_once(quoted, a->quoted_from) != 0))
            rc = STATUS_ENOMEM;
    }
    json_t *req = rc == STATUS_OK
                      ? json_pack("{s:s, s:s, s:O, s:O}", "invocation_id", s->inv, "context_id",
                                  s->context_id, "artifact_ids", ids, "quoted", quoted)
                      : NULL;
    if (rc == STATUS_OK && req == NULL)
        rc = STATUS_ENOMEM;
    if (rc == STATUS_OK)
        rc = q_invoke_facts(s->g->st, req, &s->reply);
    json_decref(req);
    json_decref(ids);
    json_decref(quoted);
    if (rc != STATUS_OK)
        return rc;
    rc = gate_context_closed(s->g, json_incref(json_object_get(s->reply, "context")), &s->wf,
                             &s->ws, &s->ctx, &s->closed);
    if (rc != STATUS_OK)
        return rc;
    /* A completed run's record is closed, but a retry of what it committed still learns of its
     * effect (invoke_call answers it from the invocation's delivery, writing nothing). */
    if (s->closed && !json_is_object(json_object_get(s->reply, "delivery"))) {
        facts_context_free(&s->ctx);
        return STATUS_EREFUSED;
    }
    s->have_ctx = true;
    s->have_head = evlog_head_parse(json_object_get(s->reply, "head"), &s->head) == STATUS_OK;
    const json_t *t = json_object_get(s->reply, "now");
    s->now = json_is_string(t) ? strtod(json_string_value(t), NULL) : json_number_value(t);
    if (s->wf == NULL || evaluator_fingerprint(s->wf, s->evaluator) != 0)
        s->evaluator[0] = '\0';
    s->decl = workflow_live_tool(s->wf, s->tool);
    return STATUS_OK;
}

/* The arguments as committed, {"name": value, ...} sorted, into s->canonical. Returns
 * STATUS_OK or STATUS_ENOMEM. */
static int canonical_arguments(invoke_state *s)
{
    json_t *o = json_object();
    for (size_t i = 0; o != NULL && i < s->n; i++)
        if (json_object_set_new(o, s->args[i].name, json_string(s->args[i].value)) != 0) {
            json_decref(o);
            o = NULL;
        }
    s->canonical = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(o);
    return s->canonical != NULL ? STATUS_OK : STATUS_ENOMEM;
}

/* The arguments as committed and the invocation's fingerprint: run, arguments, destination,
 * tool, grant (deliver_fingerprint), so a retry with other values is a conflict. */
static int fingerprint(invoke_state *s, const char *destination)
{
    if (s->canonical == NULL && canonical_arguments(s) != STATUS_OK)
        return STATUS_ENOMEM;
    char h[65];
    gate_sha256_hex(s->canonical, strlen(s->canonical), h);
    deliver_fingerprint(s->ctx.run_id, h, destination, s->tool, s->ws->cap.grant, s->fingerprint);
    return STATUS_OK;
}

/* 2a. The arguments against the tool's declaration: each declared one given once, no other. */
static int check_declared(const invoke_state *s, char *why, size_t n)
{
    const json_t *declared = json_object_get(s->decl, "arguments");
    for (size_t i = 0; i < s->n; i++) {
        if (workflow_argument_role(s->decl, s->args[i].name) == NULL)
            return bad(why, n, "arguments.%s: tool %s declares no such argument", s->args[i].name,
                       s->tool);
        for (size_t j = 0; j < i; j++)
            if (strcmp(s->args[j].name, s->args[i].name) == 0)
                return bad(why, n, "arguments.%s: given twice%s", s->args[i].name, "");
    }
    for (size_t k = 0; k < json_array_size(declared); k++) {
        const char *name = json_string_value(json_object_get(json_array_get(declared, k), "name"));
        bool given = false;
        for (size_t i = 0; i < s->n && !given; i++)
            given = strcmp(s->args[i].name, name) == 0;
        if (!given)
            return bad(why, n, "arguments.%s: missing: tool %s declares it", name, s->tool);
    }
    return STATUS_OK;
}

/* The content of artifact id as read, when it is an artifact of this run (the query reads no
 * other run's content); NULL otherwise. */
static const char *content_of(const invoke_state *s, const char *id)
{
    return json_string_value(json_object_get(json_object_get(s->reply, "contents"), id));
}

/* 2b. Every artifact a value names is of this run, checked before any content is: a caller
 * learns nothing of another run's artifacts, whatever the value (the same answer as for an
 * artifact that does not exist). */
static int check_named(const invoke_state *s, char *why, size_t n)
{
    for (size_t i = 0; i < s->n; i++) {
        const invoke_argument *a = &s->args[i];
        bool quoted = a->quoted_from != NULL && a->quoted_from[0] != '\0';
        if (quoted && content_of(s, a->quoted_from) == NULL)
            return bad(why, n, "arguments.%s.quoted_from: artifact %s not found in this run",
                       a->name, a->quoted_from);
        for (size_t k = 0; k < a->n_lineage; k++)
            if (content_of(s, a->lineage[k]) == NULL)
                return bad(why, n, "arguments.%s.lineage: artifact %s not found in this run",
                           a->name, a->lineage[k]);
    }
    return STATUS_OK;
}

/* True when one of a's lineage artifacts holds its value as a token. */
static bool lineage_holds(const invoke_state *s, const invoke_argument *a)
{
    for (size_t k = 0; k < a->n_lineage; k++)
        if (token_holds(content_of(s, a->lineage[k]), a->value))
            return true;
    return false;
}

/* 2c. Each value against where it says it came from, as a whole token: the run's task holds a
 * from_task value, the named artifact's content a quoted one, one of the lineage artifacts'
 * contents a value with a lineage (a lineage that does not hold the value vouches for
 * nothing). The content is the one its hash names (usable_summaries). */
static int check_origins(const invoke_state *s, char *why, size_t n)
{
    int rc = check_named(s, why, n);
    const char *task = json_string_value(json_object_get(s->reply, "task"));
    for (size_t i = 0; rc == STATUS_OK && i < s->n; i++) {
        const invoke_argument *a = &s->args[i];
        if (a->from_task && !token_holds(task, a->value))
            return bad(why, n, "arguments.%s: the value is not in the run's task%s", a->name, "");
        if (a->quoted_from != NULL && a->quoted_from[0] != '\0' &&
            !token_holds(content_of(s, a->quoted_from), a->value))
            return bad(why, n, "arguments.%s: the value does not occur in artifact %s", a->name,
                       a->quoted_from);
        if (a->n_lineage == 1 && !lineage_holds(s, a))
            return bad(why, n, "arguments.%s: the value does not occur in artifact %s", a->name,
                       a->lineage[0]);
        if (a->n_lineage > 1 && !lineage_holds(s, a))
            return bad(why, n,
                       "arguments.%s: the value does not occur in any artifact of its lineage "
                       "(%s, ...)",
                       a->name, a->lineage[0]);
    }
    return rc;
}

/* The summaries read, each marked unusable when charterd cannot decide from it (no summary,
 * unsealed under a key, or quoted from content that no longer hashes to its record). */
static int usable_summaries(invoke_state *s)
{
    const json_t *read = json_object_get(s->reply, "summaries");
    const json_t *contents = json_object_get(s->reply, "contents");
    s->summaries = json_array();
    size_t i;
    json_t *raw;
    json_array_foreach(read, i, raw)
    {
        json_t *copy = json_deep_copy(raw);
        if (copy == NULL || gate_summary_verify(copy) != 0 ||
            json_array_append_new(s->summaries, copy) != 0)
            return STATUS_ENOMEM;
        const char *id = json_string_value(json_object_get(copy, "id"));
        const char *c = id != NULL ? json_string_value(json_object_get(contents, id)) : NULL;
        const char *h =
            json_string_value(json_object_get(json_object_get(copy, "artifact"), "hash"));
        char actual[65];
        if (c != NULL)
            gate_sha256_hex(c, strlen(c), actual);
        if (c != NULL && (h == NULL || strcmp(h, actual) != 0) &&
            json_object_set_new(copy, "unverified",
                                json_sprintf("the content of %s does not hash to its recorded "
                                             "hash: a value quoted from it proves nothing",
                                             id)) != 0)
            return STATUS_ENOMEM;
    }
    return STATUS_OK;
}

/* One argument as the guard reads it: its role, where it came from, the artifacts. */
static json_t *argument_json(const invoke_state *s, const invoke_argument *a)
{
    const char *role = workflow_argument_role(s->decl, a->name);
    json_t *lineage = json_array();
    for (size_t k = 0; lineage != NULL && k < a->n_lineage; k++)
        if (json_array_append_new(lineage, json_string(a->lineage[k])) != 0) {
            json_decref(lineage);
            lineage = NULL;
        }
    bool quoted = a->quoted_from != NULL && a->quoted_from[0] != '\0';
    if (lineage != NULL && quoted && json_array_append_new(lineage, json_string(a->quoted_from)))
        json_decref(lineage), lineage = NULL;
    return json_pack("{s:s, s:s, s:s, s:b, s:s, s:o*}", "name", a->name, "value", a->value, "role",
                     role != NULL ? role : "data", "from_task", a->from_task, "quoted_from",
                     quoted ? a->quoted_from : "", "lineage", lineage);
}

/* 3. The request as the guard reads it and the snapshot records it, with the destination
 * class the destination argument's value matched (workflow_match_destination) and its
 * clearance, or for a tool without a destination the tool's own (workflow_tool_clearance). */
static int build_request(invoke_state *s, invoke_result *out)
{
    const char *dest_arg = json_string_value(json_object_get(s->decl, "destination"));
    const char *value = NULL;
    for (size_t i = 0; dest_arg != NULL && i < s->n; i++)
        if (strcmp(s->args[i].name, dest_arg) == 0)
            value = s->args[i].value;
    int clearance = dest_arg == NULL && s->decl != NULL ? workflow_tool_clearance(s->decl) : -1;
    const char *dest = value != NULL ? workflow_match_destination(s->wf, value, &clearance) : NULL;
    snprintf(out->destination, sizeof out->destination, "%s", dest != NULL ? dest : "");
    json_t *args = json_array();
    for (size_t i = 0; args != NULL && i < s->n; i++)
        if (json_array_append_new(args, argument_json(s, &s->args[i])) != 0) {
            json_decref(args);
            args = NULL;
        }
    s->request =
        json_pack("{s:s, s:s, s:b, s:s, s:s?, s:s?, s:s?, s:i, s:o*}", "run_id", s->ctx.run_id,
                  "tool", s->tool, "declared", s->decl != NULL && args != NULL, "grant",
                  s->ws->cap.grant, "destination_arg", dest_arg, "destination_value", value,
                  "destination", dest, "clearance", clearance, "arguments", args);
    if (s->request == NULL)
        return STATUS_ENOMEM;
    return fingerprint(s, out->destination);
}

/* The snapshot replay decides from and the detail the event carries (each argument's value and
 * lineage, for a reader of the run: a viewer gets the values redacted, wire_event). */
static int describe(invoke_state *s, const invoke_result *out)
{
    json_t *chain = json_object_get(s->reply, "chain");
    json_t *owners = json_array();
    for (size_t i = 0; owners != NULL && i < s->ctx.owners.n; i++)
        json_array_append_new(owners, json_string(s->ctx.owners.items[i]));
    s->snapshot = json_pack(
        "{s:s, s:s, s:s, s:o*, s:{s:s, s:s, s:s, s:o*}, s:O, s:O, s:O?, s:f, s:i}", "gate",
        "invoke", "workflow", s->wf != NULL ? s->wf->version : "", "step", s->ws->cap.step, "cap",
        evaluator_cap_json(&s->ws->cap), "context", "id", s->ctx.id, "run_id", s->ctx.run_id,
        "step", s->ctx.step, "owners", owners, "request", s->request, "summaries", s->summaries,
        "chain", chain, "now", s->now, "evaluator_version", EVALUATOR_VERSION);
    json_t *args = json_object_get(s->request, "arguments");
    s->detail = json_pack("{s:s, s:s, s:s, s:s, s:s, s:O}", "context", s->context_id, "step",
                          s->ws->cap.step, "tool", s->tool, "invocation_id", s->inv, "destination",
                          out->destination, "arguments", args);
    return s->snapshot != NULL && s->detail != NULL ? STATUS_OK : STATUS_ENOMEM;
}

/* Records a decision with no effect as an invoke_decided event; one that cannot be recorded
 * does not stand (UNKNOWN). */
static void record(invoke_state *s, guard_decision *d, bool with_snapshot)
{
    evlog_owned ev;
    int rc = evlog_owned_event(&ev, "invoke_decided", d, s->evaluator, s->detail,
                               with_snapshot ? s->snapshot : NULL);
    if (rc == STATUS_OK)
        rc = evlog_append(s->g->st, s->ctx.run_id, &ev.ev, NULL);
    evlog_owned_free(&ev);
    if (rc != STATUS_OK && d->outcome != GUARD_UNKNOWN) {
        guard_decision_free(d);
        guard_decision_unknown(d, "the decision could not be recorded");
    }
}

/* An existing effect of the invocation answers it: acknowledged when it is this very call
 * (same run and fingerprint), DELIVERY_CONFLICT otherwise. Takes existing's reference. */
static void answer_existing(const invoke_state *s, invoke_result *out, json_t *existing)
{
    const char *fp = json_string_value(json_object_get(existing, "fingerprint"));
    const char *run = json_string_value(json_object_get(existing, "run_id"));
    guard_decision_free(&out->decision);
    if (fp != NULL && run != NULL && strcmp(fp, s->fingerprint) == 0 &&
        strcmp(run, s->ctx.run_id) == 0) {
        out->decision.outcome = GUARD_ALLOW;
        out->delivery = existing;
        out->acknowledged = true;
        return;
    }
    char w[256];
    snprintf(w, sizeof w, "invocation %s was committed with other arguments or by another run",
             s->inv);
    out->decision.outcome = GUARD_DENY;
    out->decision.codes = 1u << GUARD_DELIVERY_CONFLICT;
    out->decision.witness = strdup(w);
    json_decref(existing);
}

/* The commit's argument: the invocation's effect, checked like a delivery, with the artifacts
 * the values came from in place of a payload (charter_commit_delivery's "invoke"). */
static json_t *commit_doc(const invoke_state *s, const invoke_result *out)
{
    json_t *arts = json_array(), *chain = json_array(), *sources = json_array();
    json_t *reached = json_array(); /* every source of every value: the commit's quarantine */
    for (size_t i = 0; arts != NULL && i < s->facts.n_sums; i++) {
        const guard_summary *g = &s->facts.sums[i];
        for (size_t k = 0; reached != NULL && k < g->n_sources; k++)
            if (g->sources[k].id != NULL && add_once(reached, g->sources[k].id) != 0)
                json_decref(reached), reached = NULL;
        json_t *parents = json_array();
        for (size_t k = 0; parents != NULL && k < g->now_parents.n; k++)
            json_array_append_new(parents, json_string(g->now_parents.items[k]));
        json_array_append_new(arts, json_pack("{s:s, s:s, s:s, s:o*}", "id", g->id, "hash",
                                              g->now_hash ? g->now_hash : "", "summary_hash",
                                              g->summary_hash ? g->summary_hash : "", "parents",
                                              parents));
    }
    for (size_t i = 0; chain != NULL && i < out->decision.chain_order.n; i++)
        json_array_append_new(chain, json_string(out->decision.chain_order.items[i]));
    for (size_t i = 0; sources != NULL && i < out->decision.sources.n; i++)
        json_array_append_new(sources, json_string(out->decision.sources.items[i]));
    char h[65];
    gate_sha256_hex(s->canonical, strlen(s->canonical), h);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o*, s:o*, s:{s:o*, s:o*}}", "run_id",
                     s->ctx.run_id, "invocation_id", s->inv, "fingerprint", s->fingerprint,
                     "payload_hash", h, "recipient", out->destination, "tool", s->tool, "content",
                     s->canonical, "grant_chain", chain, "sources", sources, "invoke", "artifacts",
                     arts, "resources", reached);
}

/* The effect's receipt, signed right after the commit as a delivery's is. A failure loses
 * nothing: Evidence/GetReceipt issues it from the stored effect later. */
static void issue_receipt(const invoke_state *s, const json_t *delivery)
{
    json_t *receipt = NULL;
    if (evlog_keyed())
        (void)receipt_issue_delivery(s->g->st, delivery, &receipt);
    json_decref(receipt);
}

/* 4. The effect, committed once: the conditional write on the database clock, up to
 * DELIVER_ATTEMPTS times; a commit whose outcome is unknown is looked up before any answer,
 * and an answer never claims no effect when one may have landed. */
static int commit(invoke_state *s, invoke_result *out)
{
    json_t *doc = commit_doc(s, out);
    char *text = doc != NULL ? evlog_json_text(doc) : NULL;
    json_decref(doc);
    evlog_owned ev;
    int rc = text != NULL ? evlog_owned_event(&ev, "invoke_decided", &out->decision, s->evaluator,
                                              s->detail, s->snapshot)
                          : STATUS_ENOMEM;
    if (rc != STATUS_OK) {
        free(text);
        return rc;
    }
    bool answered = false, maybe_landed = false;
    for (int attempt = 0; attempt < DELIVER_ATTEMPTS && !answered; attempt++) {
        json_t *reply = NULL;
        store_list *list = NULL;
        rc = evlog_commit_delivery_text(s->g->st, s->ctx.run_id, text, NULL, NULL, &ev.ev,
                                        s->have_head ? &s->head : NULL, &reply, &list);
        store_list_free(list);
        if (rc != STATUS_OK) {
            maybe_landed |= store_effect_unknown(s->g->st);
            json_t *found = NULL;
            if (maybe_landed && q_find_delivery(s->g->st, s->inv, &found) == STATUS_OK &&
                json_is_object(found)) {
                answer_existing(s, out, found);
                answered = true;
            } else {
                json_decref(found);
            }
            continue;
        }
        const char *status = json_string_value(json_object_get(reply, "status"));
        answered = true;
        if (status != NULL && strcmp(status, "committed") == 0) {
            out->delivery = json_incref(json_object_get(reply, "delivery"));
            INVARIANT(out->delivery != NULL);
            issue_receipt(s, out->delivery);
        } else if (status != NULL && strcmp(status, "exists") == 0) {
            answer_existing(s, out, json_incref(json_object_get(reply, "delivery")));
        } else {
            const char *reason = json_string_value(json_object_get(reply, "reason"));
            char w[200];
            snprintf(w, sizeof w, "the conditional write was refused: %.64s",
                     reason != NULL ? reason : "unknown reason");
            guard_decision_free(&out->decision);
            guard_decision_unknown(&out->decision, w);
            record(s, &out->decision, false);
        }
        json_decref(reply);
    }
    if (!answered) {
        guard_decision_free(&out->decision);
        guard_decision_unknown(&out->decision,
                               maybe_landed ? "the commit was sent and its outcome is unknown: "
                                              "retry with the same invocation ID"
                                            : "the commit failed 3 times");
        if (maybe_landed)
            out->decision.codes |= 1u << GUARD_EFFECT_UNKNOWN;
        record(s, &out->decision, false);
    }
    evlog_owned_free(&ev);
    free(text);
    return STATUS_OK;
}

/* The approval request of an allowed call held for approver by (within_ms): the commit it
 * would make, the invoke_decided event that commit writes (ev, unsealed), and the arguments
 * the approver reads, with their values and lineage. New reference, or NULL. */
static json_t *approval_doc(const invoke_state *s, const invoke_result *out, const evlog_event *ev,
                            const char *by, long long within_ms)
{
    char id[36];
    approval_id_of(s->inv, id);
    json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "kind", ev->kind, "outcome",
                          ev->outcome, "codes", ev->codes ? ev->codes : "", "witness",
                          ev->witness ? ev->witness : "", "detail", ev->detail ? ev->detail : "",
                          "snapshot", ev->snapshot ? ev->snapshot : "", "evaluator",
                          ev->evaluator ? ev->evaluator : "");
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:o*, s:o*, s:O}",
                     "approval_id", id, "run_id", s->ctx.run_id, "invocation_id", s->inv,
                     "fingerprint", s->fingerprint, "approver", by, "within_ms",
                     (json_int_t)within_ms, "tool", s->tool, "recipient", out->destination,
                     "payload_id", "", "step", s->ws->cap.step, "context_id", s->context_id,
                     "commit", commit_doc(s, out), "event", e, "arguments",
                     json_object_get(s->request, "arguments"));
}

/* The answer to a held call from the approval request's reply: pending is UNKNOWN with nothing
 * committed yet; approved (the effect exists) the effect, acknowledged; denied, expired or
 * refused is DENY naming the outcome; another call under the invocation ID a conflict. */
static void answer_held(const invoke_state *s, invoke_result *out, const json_t *reply,
                        const char *by)
{
    const char *status = json_string_value(json_object_get(reply, "status"));
    const json_t *approval = json_object_get(reply, "approval");
    const char *id = json_string_value(json_object_get(approval, "id"));
    const char *why = json_string_value(json_object_get(approval, "reason"));
    char w[512];
    guard_decision_free(&out->decision);
    if (status != NULL && strcmp(status, "exists") == 0) {
        answer_existing(s, out, json_incref(json_object_get(reply, "delivery")));
    } else if (status != NULL && strcmp(status, "conflict") == 0) {
        snprintf(w, sizeof w, "invocation %s awaits approval of another call", s->inv);
        out->decision.outcome = GUARD_DENY;
        out->decision.codes = 1u << GUARD_DELIVERY_CONFLICT;
        out->decision.witness = strdup(w);
    } else if (status != NULL && id != NULL && strcmp(status, "pending") == 0) {
        snprintf(w, sizeof w,
                 "awaiting approval %s by %s: nothing is committed unless %s approves before "
                 "its deadline",
                 id, by, by);
        guard_decision_unknown(&out->decision, w);
        out->decision.codes = 0;
    } else if (status != NULL && id != NULL &&
               (strcmp(status, "denied") == 0 || strcmp(status, "expired") == 0 ||
                strcmp(status, "refused") == 0)) {
        snprintf(w, sizeof w, "approval %s was %s%s%.256s", id, status, why && *why ? ": " : "",
                 why ? why : "");
        out->decision.outcome = GUARD_DENY;
        out->decision.witness = strdup(w);
    } else {
        guard_decision_unknown(&out->decision, "the approval request got an unexpected reply");
    }
}

/* A call the gate allowed to a tool or destination class that asks a human's approval is
 * held for that human (as a delivery is, docs/runs.md "Human approval"): the approval holds
 * the commit, and approving it commits the effect exactly once; the call's answer until then is
 * UNKNOWN with nothing committed. True when so (out is final). */
static bool needs_approval(invoke_state *s, invoke_result *out, int *rc)
{
    const char *by = NULL;
    long long within_ms = 0;
    if (!workflow_approval_for(s->wf, s->tool, out->destination, &by, &within_ms))
        return false;
    evlog_owned ev, requested;
    memset(&ev, 0, sizeof ev);
    memset(&requested, 0, sizeof requested);
    json_t *doc = NULL, *detail = NULL, *reply = NULL;
    char id[36];
    approval_id_of(s->inv, id);
    *rc = evlog_owned_event(&ev, "invoke_decided", &out->decision, s->evaluator, s->detail,
                            s->snapshot);
    if (*rc == STATUS_OK) {
        doc = approval_doc(s, out, &ev.ev, by, within_ms);
        detail = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s}", "approval_id", id, "approver", by,
                           "within_ms", (json_int_t)within_ms, "invocation_id", s->inv, "recipient",
                           out->destination, "tool", s->tool);
        *rc = doc != NULL && detail != NULL
                  ? evlog_owned_event(&requested, "approval_requested", NULL, NULL, detail, NULL)
                  : STATUS_ENOMEM;
    }
    if (*rc == STATUS_OK &&
        approval_request(s->g->st, s->ctx.run_id, doc, &requested.ev, &reply) != STATUS_OK) {
        guard_decision_free(&out->decision);
        guard_decision_unknown(&out->decision,
                               "the approval request could not be stored (or its outcome is "
                               "unknown): retry with the same invocation ID to learn it");
    } else if (*rc == STATUS_OK) {
        answer_held(s, out, reply, by);
    }
    json_decref(reply);
    json_decref(doc);
    json_decref(detail);
    evlog_owned_free(&ev);
    evlog_owned_free(&requested);
    return true;
}

/* A context the database does not have, as the facts read said (no reply): it may be one of
 * a run that was archived and left with its contexts. With an archive folder, the run's
 * archive answers (archived.h), found by the run the invocation's compact record still names
 * or else by the context. Returns STATUS_OK (out answered) or STATUS_ENOTFOUND (out->not_found
 * says why when the archive was looked in), STATUS_ENOMEM. */
static int answer_archived(invoke_state *s, invoke_result *out)
{
    if (s->g->archive_dir == NULL)
        return STATUS_ENOTFOUND;
    if (canonical_arguments(s) != STATUS_OK)
        return STATUS_ENOMEM;
    json_t *record = NULL;
    const char *run = NULL;
    if (q_find_delivery(s->g->st, s->inv, &record) == STATUS_OK &&
        json_is_true(json_object_get(record, "archived")))
        run = json_string_value(json_object_get(record, "run_id"));
    archived_request req = {.context_id = s->context_id,
                            .invocation_id = s->inv,
                            .run_id = run,
                            .tool = s->tool,
                            .content = s->canonical};
    int rc = archived_answer(s->g, &req, &out->decision, &out->delivery, &out->archive_owners,
                             out->not_found, sizeof out->not_found);
    json_decref(record);
    if (rc == STATUS_EUNAVAILABLE) {
        guard_decision_unknown(&out->decision, "the archive folder could not be read");
        rc = STATUS_OK;
    }
    if (rc == STATUS_OK)
        out->acknowledged = out->decision.outcome == GUARD_ALLOW;
    return rc;
}

/* The decision: the guard over the facts, recorded with them; an allowed effect is committed
 * (the commit writes the event), any other decision recorded by an append. */
static int decide(invoke_state *s, invoke_result *out)
{
    int rc = evaluator_invoke_facts_from(s->request, s->summaries,
                                         json_object_get(s->reply, "chain"), &s->facts);
    if (rc == STATUS_ENOMEM)
        return rc;
    if (rc != STATUS_OK)
        guard_decision_unknown(&out->decision, "the invocation's facts could not be decoded");
    else if (evaluator_invoke_decide(&s->ws->cap, &s->ctx, &s->facts, s->now, &out->decision) != 0)
        return STATUS_ENOMEM;
    if ((rc = describe(s, out)) != STATUS_OK)
        return rc;
    bool effect = json_is_true(json_object_get(s->decl, "effect"));
    if (out->decision.outcome == GUARD_ALLOW && needs_approval(s, out, &rc))
        return rc;
    if (out->decision.outcome == GUARD_ALLOW && effect)
        return commit(s, out);
    record(s, &out->decision, true);
    return STATUS_OK;
}

int invoke_archived(const gate_env *g, const char *context_id, const char *tool,
                    const char *invocation_id, const invoke_argument *args, size_t n,
                    invoke_result *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    invoke_state s;
    memset(&s, 0, sizeof s);
    s = (invoke_state){
        .g = g, .context_id = context_id, .tool = tool, .inv = invocation_id, .args = args, .n = n};
    int rc = check_shape(&s, why, whylen);
    if (rc == STATUS_OK)
        rc = answer_archived(&s, out);
    invoke_free(&s, out);
    return rc;
}

int invoke_call(const gate_env *g, const char *context_id, const char *tool,
                const char *invocation_id, const invoke_argument *args, size_t n,
                invoke_result *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    invoke_state s;
    memset(&s, 0, sizeof s);
    s = (invoke_state){
        .g = g, .context_id = context_id, .tool = tool, .inv = invocation_id, .args = args, .n = n};
    int rc = check_shape(&s, why, whylen);
    if (rc == STATUS_OK)
        rc = read_facts(&s);
    if (rc == STATUS_ENOTFOUND && s.reply == NULL) {
        rc = answer_archived(&s, out);
        goto out;
    }
    if (rc == STATUS_EUNAVAILABLE || rc == STATUS_EPROTO || rc == STATUS_ELIMIT) {
        guard_decision_unknown(&out->decision, "the graph could not supply the facts");
        rc = STATUS_OK;
        goto out;
    }
    /* RULE-INVOKE-TOOL comes first: a tool the step does not have is refused whatever its
     * arguments say; a declared one's arguments must be its own. */
    if (rc == STATUS_OK && s.decl != NULL)
        rc = check_declared(&s, why, whylen);
    if (rc == STATUS_OK)
        rc = usable_summaries(&s);
    if (rc == STATUS_OK)
        rc = build_request(&s, out);
    /* An invocation already committed answers for itself, even after a revocation. */
    if (rc == STATUS_OK && json_is_object(json_object_get(s.reply, "delivery"))) {
        answer_existing(&s, out, json_incref(json_object_get(s.reply, "delivery")));
        goto out;
    }
    if (rc == STATUS_OK && s.closed)
        rc = STATUS_EREFUSED; /* read_facts let it through for its delivery alone */
    if (rc == STATUS_OK)
        rc = check_origins(&s, why, whylen);
    if (rc == STATUS_OK)
        rc = decide(&s, out);
out:
    /* An ALLOW of a tool with an effect stands on a committed or acknowledged effect. */
    INVARIANT(rc != STATUS_OK || out->decision.outcome != GUARD_ALLOW || s.decl == NULL ||
              !json_is_true(json_object_get(s.decl, "effect")) || out->delivery != NULL);
    invoke_free(&s, out);
    return rc;
}
