/*
 * evaluator.c - the evaluator: the deciding half of the gates (facts in, decision out), its
 * declared versions and fingerprint, and the replay of a recorded decision from its snapshot
 * by the evaluator of the version it records (see evaluator.h).
 *
 * Snapshots are the facts exactly as the gate had them, each with the evaluator version, the
 * workflow version and the step capability it acted under ({evaluator_version, workflow, cap,
 * ...}): input gate {gate:"input", step,
 * context, ancestries:[raw charter_ancestry replies]}, source gate {gate:"source", step,
 * context, resource}, delivery gate {gate:"delivery", step, context, request, ancestry, chain,
 * now, payload:{id,hash,content_sha256}}, host identity {gate:"identity", step, subject,
 * context (absent when a step was opened or a run ended), run (a run ended), owners,
 * credential, actors}, which has no "cap": the rule reads no capability. They are decoded with
 * the facts codec the store decodes replies with (facts.h) and handed to the same functions the
 * live gates call.
 */
#include "policy/evaluator.h"
#include "core/digest.h"
#include "core/invariant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the fingerprint ---------------------------------------------------------------------- */

/* The last fingerprint this thread computed: the fingerprint of a version and a workflow
 * version never changes, and a charterd decides under one workflow version nearly always, so
 * a delivery finds it here instead of hashing again. */
static _Thread_local struct {
    int version;
    char workflow[129];
    char hex[65];
} fingerprint_last;

int evaluator_fingerprint_at(int version, const char *workflow_version, char hex[65])
{
    memset(hex, '0', 64);
    hex[64] = '\0';
    if (workflow_version == NULL || version <= 0 || strlen(workflow_version) > 128)
        return -1;
    if (fingerprint_last.version == version &&
        strcmp(fingerprint_last.workflow, workflow_version) == 0) {
        memcpy(hex, fingerprint_last.hex, 65);
        return 0;
    }
    char text[200];
    int n = snprintf(text, sizeof text, "charter-evaluator-2\nversion=%d\nworkflow=%s\n", version,
                     workflow_version);
    if (n < 0 || (size_t)n >= sizeof text || digest_sha256_hex(text, (size_t)n, hex) != 0)
        return -1;
    fingerprint_last.version = version;
    memcpy(fingerprint_last.workflow, workflow_version, strlen(workflow_version) + 1);
    memcpy(fingerprint_last.hex, hex, 65);
    return 0;
}

int evaluator_fingerprint_of(const char *version, char hex[65])
{
    return evaluator_fingerprint_at(EVALUATOR_VERSION, version, hex);
}

int evaluator_fingerprint(const workflow *wf, char hex[65])
{
    return evaluator_fingerprint_of(wf != NULL ? wf->version : NULL, hex);
}

static json_t *strs_json(const guard_strs *s)
{
    json_t *list = json_array();
    for (size_t i = 0; list != NULL && i < s->n; i++)
        if (json_array_append_new(list, json_string(s->items[i])) != 0) {
            json_decref(list);
            return NULL;
        }
    return list;
}

json_t *evaluator_cap_json(const guard_stepcap *cap)
{
    return json_pack("{s:s, s:s, s:s, s:o*, s:o*, s:o*}", "step", cap->step ? cap->step : "",
                     "actor", cap->actor ? cap->actor : "", "grant", cap->grant ? cap->grant : "",
                     "tools", strs_json(&cap->tools), "recipients", strs_json(&cap->recipients),
                     "resources", strs_json(&cap->resources));
}

/* --- a candidate's labels ---------------------------------------------------------------- */

/* The label key of the entry id of the candidate's list part ("resources" or "recipients" of
 * workflow_seed_json), or -1 (a missing fact) when the candidate does not define it. */
static int candidate_label(const json_t *labels, const char *part, const char *id, const char *key)
{
    const json_t *list = json_object_get(labels, part);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *e = json_array_get(list, i);
        const char *eid = json_string_value(json_object_get(e, "id"));
        const json_t *v = json_object_get(e, key);
        if (eid != NULL && strcmp(eid, id) == 0)
            return json_is_integer(v) ? (int)json_integer_value(v) : -1;
    }
    return -1;
}

/* The ancestry as it would stand under the candidate's labels: every source resource takes
 * the candidate's, and every artifact whose stored labels were the ones recomputed from the
 * recorded facts takes the ones recomputed under the candidate's, so that a relabelling is not
 * mistaken for tampering while a label that disagreed before still disagrees. Returns
 * STATUS_OK or STATUS_ENOMEM. */
static int relabel(guard_ancestry *anc, const json_t *labels)
{
    bool *agreed = calloc(anc->n ? anc->n : 1, sizeof *agreed);
    if (agreed == NULL)
        return STATUS_ENOMEM;
    for (size_t i = 0; i < anc->n; i++) {
        int c = -1, in = -1;
        const guard_artifact *a = &anc->items[i];
        agreed[i] =
            guard_recompute_labels(anc, a->id, &c, &in) == 0 && c == a->conf && in == a->integrity;
    }
    for (size_t i = 0; i < anc->n; i++)
        for (size_t k = 0; k < anc->items[i].n_resources; k++) {
            guard_resource *r = &anc->items[i].resources[k];
            r->conf = candidate_label(labels, "resources", r->id, "conf");
            r->integrity = candidate_label(labels, "resources", r->id, "integrity");
        }
    for (size_t i = 0; i < anc->n; i++) {
        int c = -1, in = -1;
        guard_artifact *a = &anc->items[i];
        if (agreed[i] && guard_recompute_labels(anc, a->id, &c, &in) == 0) {
            a->conf = c;
            a->integrity = in;
        }
    }
    free(agreed);
    return STATUS_OK;
}

static void drop_borrowed(guard_decision *d);

/* A summary as it would stand under the candidate's labels: every source takes the
 * candidate's labels (as recorded and as now, where they agreed), the summary's labels are
 * recomputed over its sources (a derived artifact's labels are the max / min over its
 * sources), and the stored labels follow where they agreed with the summary. */
static void relabel_summary(guard_summary *s, const json_t *labels)
{
    bool stored_agreed = s->now_conf == s->conf && s->now_integrity == s->integrity;
    int conf = GUARD_CONF_PUBLIC, integrity = GUARD_INTEGRITY_TRUSTED;
    for (size_t i = 0; i < s->n_sources; i++) {
        guard_resource *r = &s->sources[i];
        bool agreed = i < s->n_now_sources && s->now_sources[i].conf == r->conf &&
                      s->now_sources[i].integrity == r->integrity;
        r->conf = candidate_label(labels, "resources", r->id, "conf");
        r->integrity = candidate_label(labels, "resources", r->id, "integrity");
        if (agreed) {
            s->now_sources[i].conf = r->conf;
            s->now_sources[i].integrity = r->integrity;
        }
        conf = r->conf < 0 || conf < 0 ? -1 : (r->conf > conf ? r->conf : conf);
        integrity = r->integrity < 0 || integrity < 0
                        ? -1
                        : (r->integrity < integrity ? r->integrity : integrity);
    }
    if (s->n_sources == 0 || conf < 0 || integrity < 0)
        return;
    s->conf = conf;
    s->integrity = integrity;
    if (stored_agreed) {
        s->now_conf = conf;
        s->now_integrity = integrity;
    }
}

/* One input decided from its lineage summary (facts_is_summary(raw)). */
static int summary_decide(const guard_stepcap *cap, const guard_context *ctx, const json_t *raw,
                          const char *id, const json_t *labels, guard_decision *one, int *conf,
                          int *integrity)
{
    guard_summary sum;
    int rc = facts_summary_from_json(raw, id, &sum);
    if (rc == STATUS_ENOMEM)
        return rc;
    if (rc != STATUS_OK) {
        guard_decision_unknown(one, "the graph could not supply the lineage summary");
        return STATUS_OK;
    }
    if (labels != NULL && sum.verified)
        relabel_summary(&sum, labels);
    if (guard_check_input_summary(cap, ctx, ctx->run_id, &sum, one) != 0) {
        guard_decision_free(one);
        guard_decision_unknown(one, "out of memory");
    } else if (one->outcome == GUARD_ALLOW) {
        *conf = sum.conf > *conf ? sum.conf : *conf;
        *integrity = sum.integrity < *integrity ? sum.integrity : *integrity;
    }
    drop_borrowed(one);
    facts_summary_free(&sum);
    return STATUS_OK;
}

/* --- the deciding half of each gate ------------------------------------------------------- */

static int outcome_rank(guard_outcome o)
{
    return o == GUARD_DENY ? 2 : o == GUARD_UNKNOWN ? 1 : 0;
}

/* The lists an allowed decision borrows from the facts: dropped once the facts are freed. */
static void drop_borrowed(guard_decision *d)
{
    free(d->chain_order.items);
    free(d->sources.items);
    memset(&d->chain_order, 0, sizeof d->chain_order);
    memset(&d->sources, 0, sizeof d->sources);
}

/* evaluator_input_decide, each ancestry relabelled under labels first when labels is not NULL
 * (what if). */
static int input_decide(const guard_stepcap *cap, const guard_context *ctx,
                        const json_t *ancestries, const char *const *ids, const json_t *labels,
                        guard_decision *d, int *conf, int *integrity)
{
    memset(d, 0, sizeof *d);
    d->outcome = GUARD_ALLOW;
    *conf = GUARD_CONF_PUBLIC;
    *integrity = GUARD_INTEGRITY_TRUSTED;
    size_t n = json_array_size(ancestries);
    if (!json_is_array(ancestries) || n == 0) {
        guard_decision_unknown(d, "no ancestry was gathered");
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *raw = json_array_get(ancestries, i);
        guard_ancestry anc = {0};
        guard_decision one = {0};
        if (facts_is_summary(raw)) {
            if (summary_decide(cap, ctx, raw, ids != NULL ? ids[i] : NULL, labels, &one, conf,
                               integrity) != STATUS_OK) {
                guard_decision_free(d);
                return STATUS_ENOMEM;
            }
            goto merge;
        }
        int rc = json_is_object(raw)
                     ? facts_ancestry_from_json(raw, ids != NULL ? ids[i] : NULL, &anc)
                     : STATUS_EUNAVAILABLE;
        if (rc == STATUS_OK && labels != NULL)
            rc = relabel(&anc, labels);
        if (rc == STATUS_ENOMEM) {
            guard_decision_free(d);
            return STATUS_ENOMEM;
        }
        if (rc != STATUS_OK) {
            guard_decision_unknown(&one, "the graph could not supply the ancestry");
        } else if (guard_check_input(cap, ctx, ctx->run_id, &anc, &one) != 0) {
            guard_decision_free(&one);
            guard_decision_unknown(&one, "out of memory");
        } else if (one.outcome == GUARD_ALLOW) {
            int c = -1, in = -1;
            if (guard_recompute_labels(&anc, anc.root, &c, &in) != 0) {
                guard_decision_free(&one);
                guard_decision_unknown(&one, "labels could not be recomputed");
            } else {
                *conf = c > *conf ? c : *conf;
                *integrity = in < *integrity ? in : *integrity;
            }
        }
        drop_borrowed(&one);
        facts_ancestry_free(&anc);
    merge:;
        /* Keep the worst verdict: DENY, then UNKNOWN, then ALLOW. */
        unsigned merged = d->codes | one.codes;
        if (outcome_rank(one.outcome) > outcome_rank(d->outcome)) {
            guard_decision_free(d);
            *d = one;
            memset(&one, 0, sizeof one);
        }
        d->codes = merged;
        /* As in the guard: a fact that could not be had makes the whole verdict UNKNOWN. */
        if (merged & (1u << GUARD_GRAPH_ERROR))
            d->outcome = GUARD_UNKNOWN;
        guard_decision_free(&one);
    }
    return 0;
}

int evaluator_input_decide(const guard_stepcap *cap, const guard_context *ctx,
                           const json_t *ancestries, const char *const *ids, guard_decision *d,
                           int *conf, int *integrity)
{
    return input_decide(cap, ctx, ancestries, ids, NULL, d, conf, integrity);
}

static bool strs_contain(const guard_strs *s, const char *v)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->items[i], v) == 0)
            return true;
    return false;
}

int evaluator_source_decide(const guard_stepcap *cap, const char *resource_id, guard_decision *d)
{
    memset(d, 0, sizeof *d);
    /* The step, not the model, says what may be read. */
    bool tool = strs_contain(&cap->tools, "read_source");
    if (tool && strs_contain(&cap->resources, resource_id)) {
        d->outcome = GUARD_ALLOW;
        return 0;
    }
    d->outcome = GUARD_DENY;
    d->codes = 1u << (tool ? GUARD_RESOURCE_OUT_OF_SCOPE : GUARD_STEP_MISMATCH);
    /* The witness names the context's own list, which for a narrowed context is narrower
     * than the step's definition. */
    const guard_strs *list = tool ? &cap->resources : &cap->tools;
    char buf[1024];
    size_t off = (size_t)snprintf(buf, sizeof buf, "%s is outside %s step {",
                                  tool ? resource_id : "read_source", cap->step);
    for (size_t i = 0; i < list->n && off < sizeof buf; i++)
        off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "", list->items[i]);
    if (off < sizeof buf)
        snprintf(buf + off, sizeof buf - off, "}");
    if ((d->witness = strdup(buf)) == NULL) {
        guard_decision_unknown(d, NULL);
        return -1;
    }
    return 0;
}

int evaluator_delivery_decide(const guard_stepcap *cap, const guard_context *ctx,
                              const guard_delivery_request *req, const guard_ancestry *anc,
                              const guard_chain *chain, double now, const char *payload_hash,
                              const char *content_hash, guard_decision *d)
{
    memset(d, 0, sizeof *d);
    /* RULE-DELIVERY-PROVENANCE: the payload's bytes against its hash. */
    /* The stored bytes must still be the ones the hash was taken of. */
    if (payload_hash == NULL || content_hash == NULL || *payload_hash == '\0' ||
        *content_hash == '\0' || strcmp(payload_hash, content_hash) != 0) {
        d->outcome = GUARD_DENY;
        d->codes = 1u << GUARD_PROVENANCE_INCOMPLETE;
        if ((d->witness = strdup("the payload's content does not match its hash")) == NULL) {
            guard_decision_unknown(d, NULL);
            return -1;
        }
        return 0;
    }
    if (guard_check_delivery(cap, ctx, req, anc, chain, now, d) != 0) {
        guard_decision_free(d);
        guard_decision_unknown(d, "out of memory");
        return -1;
    }
    return 0;
}

int evaluator_identity_decide(const guard_identity *facts, guard_decision *d)
{
    return guard_check_identity(facts, d);
}

/* --- replaying a snapshot ---------------------------------------------------------------- */

void evaluator_replay_result_free(evaluator_replay_result *r)
{
    guard_decision_free(&r->replayed);
    r->no_snapshot = false;
    r->matches = false;
    r->version = 0;
    r->before_versions = false;
}

static const char *text_of(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s != NULL ? s : "";
}

static int snapshot_fail(char *why, size_t n, const char *what)
{
    snprintf(why, n, "the snapshot cannot be decoded: %s", what);
    return STATUS_ESNAPSHOT;
}

/* A list of the recorded capability, its strings borrowed from the snapshot. */
static int cap_list(const json_t *cap, const char *key, guard_strs *out)
{
    const json_t *v = json_object_get(cap, key);
    memset(out, 0, sizeof *out);
    if (json_is_object(v) && json_object_size(v) == 0)
        return STATUS_OK;
    if (!json_is_array(v))
        return STATUS_EPROTO;
    size_t n = json_array_size(v);
    if (n == 0)
        return STATUS_OK;
    if ((out->items = calloc(n, sizeof *out->items)) == NULL)
        return STATUS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(v, i));
        if (s == NULL)
            return STATUS_EPROTO;
        out->items[out->n++] = (char *)s;
    }
    return STATUS_OK;
}

static void cap_free(guard_stepcap *cap)
{
    free(cap->tools.items);
    free(cap->recipients.items);
    free(cap->resources.items);
    memset(cap, 0, sizeof *cap);
}

/* The capability the gate acted under, as the snapshot records it (strings borrowed). */
static int cap_from(const json_t *snap, guard_stepcap *cap, char *why, size_t n)
{
    const json_t *j = json_object_get(snap, "cap");
    memset(cap, 0, sizeof *cap);
    cap->step = (char *)json_string_value(json_object_get(j, "step"));
    cap->actor = (char *)json_string_value(json_object_get(j, "actor"));
    cap->grant = (char *)json_string_value(json_object_get(j, "grant"));
    if (!json_is_object(j) || cap->step == NULL || cap->actor == NULL || cap->grant == NULL)
        return snapshot_fail(why, n, "cap");
    int rc = cap_list(j, "tools", &cap->tools);
    if (rc == STATUS_OK)
        rc = cap_list(j, "recipients", &cap->recipients);
    if (rc == STATUS_OK)
        rc = cap_list(j, "resources", &cap->resources);
    if (rc != STATUS_OK) {
        cap_free(cap);
        return rc == STATUS_ENOMEM ? rc : snapshot_fail(why, n, "cap lists");
    }
    return STATUS_OK;
}

static int replay_input(const guard_stepcap *cap, const json_t *snap, const json_t *labels,
                        guard_decision *d, char *why, size_t n)
{
    guard_context ctx;
    int rc = facts_context_from_json(json_object_get(snap, "context"), &ctx);
    if (rc == STATUS_ENOMEM)
        return rc;
    if (rc != STATUS_OK)
        return snapshot_fail(why, n, "context");
    const json_t *ancestries = json_object_get(snap, "ancestries");
    if (!json_is_array(ancestries)) {
        facts_context_free(&ctx);
        return snapshot_fail(why, n, "ancestries");
    }
    int conf, integrity;
    rc = input_decide(cap, &ctx, ancestries, NULL, labels, d, &conf, &integrity);
    facts_context_free(&ctx);
    return rc;
}

static int replay_source(const guard_stepcap *cap, const json_t *snap, guard_decision *d, char *why,
                         size_t n)
{
    const char *resource = json_string_value(json_object_get(snap, "resource"));
    if (resource == NULL)
        return snapshot_fail(why, n, "resource");
    return evaluator_source_decide(cap, resource, d) == 0 ? STATUS_OK : STATUS_ENOMEM;
}

static int replay_delivery(const guard_stepcap *cap, const json_t *snap, const json_t *labels,
                           guard_decision *d, char *why, size_t n)
{
    const json_t *rq = json_object_get(snap, "request");
    const json_t *payload = json_object_get(snap, "payload");
    const json_t *now = json_object_get(snap, "now");
    const json_t *clearance = json_object_get(rq, "recipient_clearance");
    if (!json_is_object(rq) || !json_is_object(payload) || !json_is_number(now) ||
        !json_is_integer(clearance))
        return snapshot_fail(why, n, "request, payload or now");
    guard_delivery_request req = {
        .run_id = (char *)text_of(rq, "run_id"),
        .payload_id = (char *)text_of(rq, "payload_id"),
        .recipient = (char *)text_of(rq, "recipient"),
        .recipient_clearance = (int)json_integer_value(clearance),
        .tool = (char *)text_of(rq, "tool"),
        .grant = (char *)text_of(rq, "grant"),
        .live_tool = json_is_true(json_object_get(rq, "live_tool")),
    };
    guard_context ctx;
    guard_ancestry anc = {0};
    guard_chain chain = {0};
    int rc = facts_context_from_json(json_object_get(snap, "context"), &ctx);
    if (rc != STATUS_OK)
        return rc == STATUS_ENOMEM ? rc : snapshot_fail(why, n, "context");
    guard_summary sum = {0};
    const json_t *summary = json_object_get(snap, "summary");
    if (summary != NULL) {
        /* Decided from the payload's lineage summary: it and the facts read beside it. */
        rc = facts_summary_from_json(summary, req.payload_id, &sum);
        req.summary = &sum;
    } else {
        rc = facts_ancestry_from_json(json_object_get(snap, "ancestry"), req.payload_id, &anc);
    }
    if (rc == STATUS_OK && labels != NULL) {
        /* What if: the recipient's clearance and the sources' labels are the candidate's. */
        req.recipient_clearance = candidate_label(labels, "recipients", req.recipient, "clearance");
        if (summary != NULL && sum.verified)
            relabel_summary(&sum, labels);
        else if (summary == NULL)
            rc = relabel(&anc, labels);
    }
    if (rc == STATUS_OK)
        rc = facts_chain_from_json(json_object_get(snap, "chain"), cap->grant, &chain);
    if (rc == STATUS_OK) {
        if (evaluator_delivery_decide(cap, &ctx, &req, &anc, &chain, json_number_value(now),
                                      text_of(payload, "hash"), text_of(payload, "content_sha256"),
                                      d) != 0)
            rc = STATUS_ENOMEM;
        drop_borrowed(d);
    } else if (rc != STATUS_ENOMEM) {
        rc = snapshot_fail(why, n, "ancestry or chain");
    }
    facts_ancestry_free(&anc);
    facts_summary_free(&sum);
    facts_chain_free(&chain);
    facts_context_free(&ctx);
    return rc;
}

/* --- tool invocations ----------------------------------------------------------------------- */

void evaluator_invoke_facts_free(evaluator_invoke_facts *f)
{
    for (size_t i = 0; f->sums != NULL && i < f->n_sums; i++)
        facts_summary_free(&f->sums[i]);
    free(f->sums);
    free(f->args);
    free(f->lineage);
    if (f->have_chain)
        facts_chain_free(&f->chain);
    memset(f, 0, sizeof *f);
}

/* The decoded summary of artifact id among f's, or NULL (an unknown one: UNKNOWN). */
static const guard_summary *invoke_summary(const evaluator_invoke_facts *f, const char *id)
{
    for (size_t i = 0; id != NULL && i < f->n_sums; i++)
        if (f->sums[i].id != NULL && strcmp(f->sums[i].id, id) == 0)
            return &f->sums[i];
    return NULL;
}

/* The arguments of request into f->args, each lineage pointing into f->sums. */
static int invoke_args(const json_t *args, evaluator_invoke_facts *f)
{
    size_t n = json_array_size(args), total = 0, at = 0;
    for (size_t i = 0; i < n; i++)
        total += json_array_size(json_object_get(json_array_get(args, i), "lineage"));
    f->args = calloc(n ? n : 1, sizeof *f->args);
    f->lineage = calloc(total ? total : 1, sizeof *f->lineage);
    if (f->args == NULL || f->lineage == NULL)
        return STATUS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_array_get(args, i);
        const json_t *lin = json_object_get(a, "lineage");
        const char *role = json_string_value(json_object_get(a, "role"));
        guard_invoke_arg *g = &f->args[i];
        g->name = json_string_value(json_object_get(a, "name"));
        if (g->name == NULL || role == NULL || !json_is_array(lin))
            return STATUS_EPROTO;
        g->control = strcmp(role, "control") == 0;
        g->lineage = &f->lineage[at];
        for (size_t k = 0; k < json_array_size(lin); k++)
            f->lineage[at++] = invoke_summary(f, json_string_value(json_array_get(lin, k)));
        g->n_lineage = json_array_size(lin);
    }
    f->req.args = f->args;
    f->req.n_args = n;
    return STATUS_OK;
}

int evaluator_invoke_facts_from(const json_t *request, const json_t *summaries, const json_t *chain,
                                evaluator_invoke_facts *f)
{
    memset(f, 0, sizeof *f);
    guard_invoke_request *r = &f->req;
    r->run_id = json_string_value(json_object_get(request, "run_id"));
    r->tool = json_string_value(json_object_get(request, "tool"));
    r->declared = json_is_true(json_object_get(request, "declared"));
    r->grant = json_string_value(json_object_get(request, "grant"));
    r->destination_arg = json_string_value(json_object_get(request, "destination_arg"));
    r->destination_value = json_string_value(json_object_get(request, "destination_value"));
    r->destination = json_string_value(json_object_get(request, "destination"));
    const json_t *cl = json_object_get(request, "clearance");
    r->clearance = json_is_integer(cl) ? (int)json_integer_value(cl) : -1;
    if (r->run_id == NULL || r->tool == NULL || r->grant == NULL || !json_is_array(summaries))
        return STATUS_EPROTO;
    f->n_sums = json_array_size(summaries);
    f->sums = calloc(f->n_sums ? f->n_sums : 1, sizeof *f->sums);
    if (f->sums == NULL)
        return STATUS_ENOMEM;
    for (size_t i = 0; i < f->n_sums; i++) {
        const json_t *j = json_array_get(summaries, i);
        int rc =
            facts_summary_from_json(j, json_string_value(json_object_get(j, "id")), &f->sums[i]);
        if (rc == STATUS_ENOMEM)
            return rc;
    }
    if (json_is_object(chain)) {
        int rc = facts_chain_from_json(chain, r->grant, &f->chain);
        if (rc != STATUS_OK)
            return rc;
        f->have_chain = true;
    }
    return invoke_args(json_object_get(request, "arguments"), f);
}

int evaluator_invoke_decide(const guard_stepcap *cap, const guard_context *ctx,
                            const evaluator_invoke_facts *f, double now, guard_decision *d)
{
    memset(d, 0, sizeof *d);
    if (guard_check_invoke(cap, ctx, &f->req, f->have_chain ? &f->chain : NULL, now, d) != 0) {
        guard_decision_free(d);
        guard_decision_unknown(d, "out of memory");
        return -1;
    }
    return 0;
}

/* The recorded request as the candidate workflow would have read it (new reference): whether
 * it declares the tool, each argument's role under that declaration, and the destination
 * class the destination argument's value matches among the candidate's classes, with its
 * clearance (the tool's own for a tool without a destination). An argument the candidate's
 * declaration lacks leaves the tool undeclared: the call could not be made (TOOL_NOT_PERMITTED).
 * NULL when memory ran out. */
static json_t *candidate_request(const workflow *wf, const json_t *recorded)
{
    json_t *rq = json_deep_copy(recorded);
    const char *tool = json_string_value(json_object_get(recorded, "tool"));
    const json_t *decl = tool != NULL ? workflow_live_tool(wf, tool) : NULL;
    const char *dest_arg = json_string_value(json_object_get(decl, "destination"));
    const char *value = NULL;
    bool declared = decl != NULL;
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(rq, "arguments"), i, a)
    {
        const char *name = json_string_value(json_object_get(a, "name"));
        const char *role = name != NULL ? workflow_argument_role(decl, name) : NULL;
        declared = declared && role != NULL;
        if (json_object_set_new(a, "role", json_string(role != NULL ? role : "data")) != 0) {
            json_decref(rq);
            return NULL;
        }
        if (dest_arg != NULL && name != NULL && strcmp(name, dest_arg) == 0)
            value = json_string_value(json_object_get(a, "value"));
    }
    int clearance = dest_arg == NULL && decl != NULL ? workflow_tool_clearance(decl) : -1;
    const char *dest = value != NULL ? workflow_match_destination(wf, value, &clearance) : NULL;
    json_t *set =
        json_pack("{s:b, s:s?, s:s?, s:s?, s:i}", "declared", declared, "destination_arg", dest_arg,
                  "destination_value", value, "destination", dest, "clearance", clearance);
    if (rq == NULL || set == NULL || json_object_update(rq, set) != 0) {
        json_decref(rq);
        rq = NULL;
    }
    json_decref(set);
    return rq;
}

/* An invocation's recorded facts decided again under the rules of evaluator version (0: the
 * current ones). With cand (a what if), the request is read under the candidate's declaration
 * of the tool, argument roles and destination classes (candidate_request), and every source's
 * labels are the candidate's. */
static int replay_invoke(const guard_stepcap *cap, const json_t *snap,
                         const evaluator_candidate *cand, int version, guard_decision *d, char *why,
                         size_t n)
{
    const json_t *labels = cand != NULL ? cand->labels : NULL;
    const json_t *now = json_object_get(snap, "now");
    guard_context ctx;
    if (!json_is_number(now))
        return snapshot_fail(why, n, "now");
    int rc = facts_context_from_json(json_object_get(snap, "context"), &ctx);
    if (rc != STATUS_OK)
        return rc == STATUS_ENOMEM ? rc : snapshot_fail(why, n, "context");
    evaluator_invoke_facts f;
    json_t *request = cand != NULL ? candidate_request(cand->wf, json_object_get(snap, "request"))
                                   : json_incref(json_object_get(snap, "request"));
    if (cand != NULL && request == NULL) {
        facts_context_free(&ctx);
        return STATUS_ENOMEM;
    }
    rc = evaluator_invoke_facts_from(request, json_object_get(snap, "summaries"),
                                     json_object_get(snap, "chain"), &f);
    f.req.version = version;
    if (rc == STATUS_OK && labels != NULL) {
        for (size_t i = 0; i < f.n_sums; i++)
            if (f.sums[i].verified)
                relabel_summary(&f.sums[i], labels);
    }
    if (rc == STATUS_OK) {
        rc = evaluator_invoke_decide(cap, &ctx, &f, json_number_value(now), d) == 0 ? STATUS_OK
                                                                                    : STATUS_ENOMEM;
        drop_borrowed(d);
    } else if (rc != STATUS_ENOMEM) {
        rc = snapshot_fail(why, n, "request, summaries or chain");
    }
    evaluator_invoke_facts_free(&f);
    json_decref(request);
    facts_context_free(&ctx);
    return rc;
}

/* The host identity facts of snap (strings borrowed; lists freed with identity_free). */
static int identity_from(const json_t *snap, guard_identity *id, char *why, size_t n)
{
    memset(id, 0, sizeof *id);
    id->subject = (char *)json_string_value(json_object_get(snap, "subject"));
    id->credential = (char *)json_string_value(json_object_get(snap, "credential"));
    if (id->subject == NULL || id->credential == NULL)
        return snapshot_fail(why, n, "subject or credential");
    int rc = cap_list(snap, "owners", &id->owners);
    if (rc == STATUS_OK)
        rc = cap_list(snap, "actors", &id->actors);
    if (rc != STATUS_OK) {
        free(id->owners.items);
        free(id->actors.items);
        memset(id, 0, sizeof *id);
        return rc == STATUS_ENOMEM ? rc : snapshot_fail(why, n, "owners or actors");
    }
    return STATUS_OK;
}

static void identity_free(guard_identity *id)
{
    free(id->owners.items);
    free(id->actors.items);
    memset(id, 0, sizeof *id);
}

/* The host identity check of snap decided again; with cand (a what if), a step it opened is
 * owned by the candidate's actor of that step (a context, or a run ended, keeps its recorded
 * owners). */
static int replay_identity(const json_t *snap, const evaluator_candidate *cand, guard_decision *d,
                           char *why, size_t n)
{
    guard_identity id;
    int rc = identity_from(snap, &id, why, n);
    if (rc != STATUS_OK)
        return rc;
    if (cand != NULL && json_object_get(snap, "context") == NULL &&
        json_object_get(snap, "run") == NULL) {
        const char *step = text_of(snap, "step");
        const workflow_step *ws = workflow_step_find(cand->wf, step);
        if (ws == NULL) {
            identity_free(&id);
            memset(d, 0, sizeof *d);
            d->outcome = GUARD_DENY;
            d->codes = 1u << GUARD_STEP_MISMATCH;
            char w[160];
            snprintf(w, sizeof w, "%.64s step is not in workflow %.64s", step, cand->wf->name);
            return (d->witness = strdup(w)) != NULL ? STATUS_OK : STATUS_ENOMEM;
        }
        free(id.owners.items);
        if ((id.owners.items = calloc(1, sizeof *id.owners.items)) == NULL) {
            identity_free(&id);
            return STATUS_ENOMEM;
        }
        id.owners.items[0] = ws->cap.actor;
        id.owners.n = 1;
    }
    rc = evaluator_identity_decide(&id, d) == 0 ? STATUS_OK : STATUS_ENOMEM;
    identity_free(&id);
    return rc;
}

/* The gate the snapshot records, decided again under cap (and the candidate, for a what if)
 * by the rules of evaluator version (0: the current ones). */
static int decide_snapshot(const guard_stepcap *cap, const json_t *snap,
                           const evaluator_candidate *cand, int version, guard_decision *d,
                           char *why, size_t n)
{
    const json_t *labels = cand != NULL ? cand->labels : NULL;
    const char *gate = text_of(snap, "gate");
    if (strcmp(gate, "input") == 0)
        return replay_input(cap, snap, labels, d, why, n);
    if (strcmp(gate, "delivery") == 0)
        return replay_delivery(cap, snap, labels, d, why, n);
    if (strcmp(gate, "source") == 0)
        return replay_source(cap, snap, d, why, n);
    /* A tool invocation (Gate/Invoke): no verdict of another gate changed when it came, so it
     * is decided by the version that was current then; version 3 changed its clearance rule
     * (GUARD_INVOKE_EVERY_ARGUMENT). */
    if (strcmp(gate, "invoke") == 0)
        return replay_invoke(cap, snap, cand, version, d, why, n);
    return snapshot_fail(why, n, "unknown gate");
}

/* --- the declared versions ---------------------------------------------------------------- */

/* A declared version's evaluator: decides the gate snap records again, as that version
 * decided it. */
typedef int (*evaluator_replay_fn)(const json_t *snap, guard_decision *d, char *why, size_t n);

/* The gate snap records decided again by the rules of evaluator version. */
static int replay_at(int version, const json_t *snap, guard_decision *d, char *why, size_t n)
{
    if (strcmp(text_of(snap, "gate"), "identity") == 0)
        return replay_identity(snap, NULL, d, why, n);
    guard_stepcap cap;
    int rc = cap_from(snap, &cap, why, n);
    if (rc == STATUS_OK) {
        rc = decide_snapshot(&cap, snap, NULL, version, d, why, n);
        cap_free(&cap);
    }
    return rc;
}

/* Version 2, the first declared one: the rules of guard.c and this file as they stood when
 * versions were declared. A tool call's clearance held only its data values. */
static int replay_v2(const json_t *snap, guard_decision *d, char *why, size_t n)
{
    return replay_at(2, snap, d, why, n);
}

/* Version 3: a tool call's clearance holds every argument's value, control and data, and a
 * tool without a destination has a clearance of its own (GUARD_INVOKE_EVERY_ARGUMENT). The
 * live gates decide by the same functions. */
static int replay_v3(const json_t *snap, guard_decision *d, char *why, size_t n)
{
    return replay_at(3, snap, d, why, n);
}

/* Every declared version this build replays, oldest first; the last is EVALUATOR_VERSION, the
 * one the live gates decide by. A version names behaviour: which verdict each set of facts
 * gets. A change that alters a verdict adds a row (a new EVALUATOR_VERSION) and leaves the
 * rows before it deciding as they did: the rule that changed takes the version, or keeps its
 * old form for the old row's function (docs/evidence.md "Adding an evaluator version").
 * tests/golden/evaluator-<version>.json holds the verdicts each row must keep giving. */
static const struct {
    int version;
    evaluator_replay_fn replay;
} evaluator_table[] = {
    {2, replay_v2},
    {3, replay_v3},
};

#define EVALUATOR_ROWS (sizeof evaluator_table / sizeof evaluator_table[0])

/* The first declared version: a decision recorded before versions were declared (its snapshot
 * names none) is replayed with it, the behaviour the evaluator had when they were declared. */
#define EVALUATOR_FIRST_DECLARED 2

_Static_assert(EVALUATOR_ROWS > 0, "the evaluator table has a row");
_Static_assert(GUARD_INVOKE_EVERY_ARGUMENT <= EVALUATOR_VERSION,
               "the rule of every argument's clearance belongs to a declared version");

size_t evaluator_versions(int *versions, size_t max)
{
    for (size_t i = 0; i < EVALUATOR_ROWS && i < max; i++)
        versions[i] = evaluator_table[i].version;
    return EVALUATOR_ROWS;
}

static evaluator_replay_fn evaluator_row(int version)
{
    for (size_t i = 0; i < EVALUATOR_ROWS; i++)
        if (evaluator_table[i].version == version)
            return evaluator_table[i].replay;
    return NULL;
}

bool evaluator_version_declared(int version)
{
    return evaluator_row(version) != NULL;
}

/* The declared versions as text: "2" or "2, 3". */
static void versions_text(char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < EVALUATOR_ROWS && off < n; i++)
        off +=
            (size_t)snprintf(buf + off, n - off, "%s%d", i ? ", " : "", evaluator_table[i].version);
}

/* --- replay ------------------------------------------------------------------------------ */

/* The fingerprint a decision of version under the workflow snap records must carry: that
 * version's under that workflow, or evaluator (this process's default) when snap records no
 * workflow. "" when it cannot be computed. */
static void expected_fingerprint(const char *evaluator, int version, const json_t *snap,
                                 char expected[65])
{
    const char *workflow = json_string_value(json_object_get(snap, "workflow"));
    expected[0] = '\0';
    if (workflow != NULL) {
        if (evaluator_fingerprint_at(version, workflow, expected) != 0)
            expected[0] = '\0';
    } else if (evaluator != NULL && version == EVALUATOR_VERSION) {
        snprintf(expected, 65, "%s", evaluator);
    }
}

/* A decision recorded before versions were declared: its snapshot names no version and its
 * evaluator is a fingerprint over the source bytes of the build that decided, which no build
 * since can recompute. It is replayed with the first declared version and the verdicts
 * compared; one whose fingerprint is a declared version's lost its version from the snapshot
 * and is refused. */
static int replay_version_before(const char *evaluator, const json_t *event, const json_t *snap,
                                 int *version, char *why, size_t n)
{
    const char *recorded_by = text_of(event, "evaluator");
    if (strlen(recorded_by) != 64 || !digest_is_hex(recorded_by, 64)) {
        snprintf(why, n, "it records neither an evaluator version nor an evaluator fingerprint");
        return STATUS_EFINGERPRINT;
    }
    for (size_t i = 0; i < EVALUATOR_ROWS; i++) {
        char fp[65];
        expected_fingerprint(evaluator, evaluator_table[i].version, snap, fp);
        if (strcmp(fp, recorded_by) == 0) {
            snprintf(why, n,
                     "its snapshot names no evaluator version, but evaluator %s is version %d's: "
                     "the snapshot was altered",
                     recorded_by, evaluator_table[i].version);
            return STATUS_ESNAPSHOT;
        }
    }
    *version = EVALUATOR_FIRST_DECLARED;
    if (!evaluator_version_declared(*version)) {
        snprintf(why, n,
                 "recorded before evaluator versions were declared, and this charterd no longer "
                 "has version %d, which replays such decisions",
                 *version);
        return STATUS_EFINGERPRINT;
    }
    return STATUS_OK;
}

/* The declared version event was decided by (*version), checked against the evaluator
 * fingerprint it recorded; *before when it was recorded before versions were declared. */
static int replay_version(const char *evaluator, const json_t *event, const json_t *snap,
                          int *version, bool *before, char *why, size_t n)
{
    const json_t *v = json_object_get(snap, "evaluator_version");
    *before = v == NULL;
    if (v == NULL)
        return replay_version_before(evaluator, event, snap, version, why, n);
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > 1000000)
        return snapshot_fail(why, n, "evaluator_version");
    *version = (int)json_integer_value(v);
    char have[64];
    versions_text(have, sizeof have);
    if (!evaluator_version_declared(*version)) {
        snprintf(why, n,
                 "decided by evaluator version %d, which this charterd does not have "
                 "(it replays versions %s)",
                 *version, have);
        return STATUS_EFINGERPRINT;
    }
    char expected[65];
    expected_fingerprint(evaluator, *version, snap, expected);
    const char *recorded_by = text_of(event, "evaluator");
    if (*expected == '\0' || strcmp(recorded_by, expected) != 0) {
        snprintf(why, n,
                 "decided by evaluator %s, but evaluator version %d under the recorded workflow "
                 "is %s",
                 *recorded_by ? recorded_by : "(none recorded)", *version,
                 *expected ? expected : "(none)");
        return STATUS_EFINGERPRINT;
    }
    return STATUS_OK;
}

int evaluator_replay(const char *evaluator, const json_t *event, evaluator_replay_result *out,
                     char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    if (n > 0)
        why[0] = '\0';
    const char *outcome = text_of(event, "outcome");
    if (*outcome == '\0') {
        snprintf(why, n, "it is a %s event, not a decision", text_of(event, "kind"));
        return STATUS_ENOTDECISION;
    }
    const char *text = text_of(event, "snapshot");
    if (*text == '\0') {
        out->no_snapshot = true; /* no facts: nothing is evaluated, by any evaluator */
        return STATUS_OK;
    }
    json_error_t jerr;
    json_t *snap = json_loads(text, 0, &jerr);
    if (!json_is_object(snap)) {
        json_decref(snap);
        return snapshot_fail(why, n, "not a JSON object");
    }
    int rc = replay_version(evaluator, event, snap, &out->version, &out->before_versions, why, n);
    if (rc == STATUS_OK) {
        /* replay_version answers only versions this build declares. */
        evaluator_replay_fn replay = evaluator_row(out->version);
        INVARIANT(replay != NULL);
        rc = replay(snap, &out->replayed, why, n);
    }
    json_decref(snap);
    if (rc != STATUS_OK) {
        evaluator_replay_result_free(out);
        return rc;
    }
    char codes[512];
    guard_codes_format(out->replayed.codes, codes, sizeof codes);
    const char *witness = out->replayed.witness != NULL ? out->replayed.witness : "";
    out->matches = strcmp(outcome, decision_outcome_name(out->replayed.outcome)) == 0 &&
                   strcmp(text_of(event, "codes"), codes) == 0 &&
                   strcmp(text_of(event, "witness"), witness) == 0;
    return STATUS_OK;
}

/* --- what if ------------------------------------------------------------------------------ */

int evaluator_candidate_init(const workflow *wf, evaluator_candidate *cand)
{
    cand->wf = wf;
    cand->labels = workflow_seed_json(wf);
    return cand->labels != NULL ? STATUS_OK : STATUS_ENOMEM;
}

void evaluator_candidate_free(evaluator_candidate *cand)
{
    json_decref(cand->labels);
    memset(cand, 0, sizeof *cand);
}

void evaluator_whatif_result_free(evaluator_whatif_result *r)
{
    guard_decision_free(&r->decided);
    memset(r, 0, sizeof *r);
}

/* The snapshot of event as a JSON object (new reference), NULL when there is none; *bad is set
 * when there is text that is not an object. */
static json_t *snapshot_of(const json_t *event, bool *bad)
{
    const char *text = text_of(event, "snapshot");
    *bad = false;
    if (*text == '\0')
        return NULL;
    json_t *snap = json_loads(text, 0, NULL);
    if (!json_is_object(snap)) {
        json_decref(snap);
        *bad = true;
        return NULL;
    }
    return snap;
}

int evaluator_replay_workflow(const json_t *event, char version[65])
{
    bool bad;
    json_t *snap = snapshot_of(event, &bad);
    const char *v = json_string_value(json_object_get(snap, "workflow"));
    int rc = v != NULL && *v != '\0' && strlen(v) < 65 ? STATUS_OK : STATUS_ENOTFOUND;
    snprintf(version, 65, "%s", rc == STATUS_OK ? v : "");
    json_decref(snap);
    return rc;
}

static bool strs_same_set(const guard_strs *a, const guard_strs *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!strs_contain(b, a->items[i]))
            return false;
    return true;
}

/* The items of have that bound holds (strings borrowed from have). */
static int strs_within(const guard_strs *have, const guard_strs *bound, guard_strs *out)
{
    memset(out, 0, sizeof *out);
    if (have->n == 0)
        return STATUS_OK;
    if ((out->items = calloc(have->n, sizeof *out->items)) == NULL)
        return STATUS_ENOMEM;
    for (size_t i = 0; i < have->n; i++)
        if (strs_contain(bound, have->items[i]))
            out->items[out->n++] = have->items[i];
    return STATUS_OK;
}

/* The capability the candidate gives the recorded one's step (strings borrowed from the
 * candidate; lists owned, freed with cap_free). *found is false when the candidate has no
 * such step. */
static int candidate_cap(const evaluator_candidate *cand, const workflow *recorded,
                         const guard_stepcap *was, guard_stepcap *cap, bool *found)
{
    memset(cap, 0, sizeof *cap);
    const workflow_step *ws = workflow_step_find(cand->wf, was->step);
    const workflow_step *rs = recorded != NULL ? workflow_step_find(recorded, was->step) : NULL;
    *found = ws != NULL;
    if (ws == NULL)
        return STATUS_OK;
    /* A context narrowed below its step stays narrowed: a scope never widens, whatever the
     * candidate gives the step. */
    bool narrowed = rs == NULL || !strs_same_set(&was->tools, &rs->cap.tools) ||
                    !strs_same_set(&was->recipients, &rs->cap.recipients) ||
                    !strs_same_set(&was->resources, &rs->cap.resources);
    cap->step = ws->cap.step;
    cap->actor = ws->cap.actor;
    cap->grant = ws->cap.grant;
    int rc = strs_within(&ws->cap.tools, narrowed ? &was->tools : &ws->cap.tools, &cap->tools);
    if (rc == STATUS_OK)
        rc = strs_within(&ws->cap.recipients, narrowed ? &was->recipients : &ws->cap.recipients,
                         &cap->recipients);
    if (rc == STATUS_OK)
        rc = strs_within(&ws->cap.resources, narrowed ? &was->resources : &ws->cap.resources,
                         &cap->resources);
    if (rc != STATUS_OK)
        cap_free(cap);
    return rc;
}

int evaluator_whatif(const evaluator_candidate *cand, const workflow *recorded, const json_t *event,
                     evaluator_whatif_result *out, char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    if (n > 0)
        why[0] = '\0';
    const char *outcome = text_of(event, "outcome");
    if (*outcome == '\0') {
        snprintf(why, n, "it is a %s event, not a decision", text_of(event, "kind"));
        return STATUS_ENOTDECISION;
    }
    bool bad;
    json_t *snap = snapshot_of(event, &bad);
    if (snap == NULL) {
        if (bad)
            return snapshot_fail(why, n, "not a JSON object");
        out->no_snapshot = true;
        return STATUS_OK;
    }
    const json_t *rq = json_object_get(snap, "request");
    snprintf(out->gate, sizeof out->gate, "%s", text_of(snap, "gate"));
    snprintf(out->subject, sizeof out->subject, "%s",
             !json_is_object(rq)                ? text_of(snap, "resource")
             : strcmp(out->gate, "invoke") == 0 ? text_of(rq, "tool")
                                                : text_of(rq, "recipient"));
    guard_stepcap was, cap;
    bool found = false;
    int rc;
    if (strcmp(out->gate, "identity") == 0) {
        /* The identity rule reads no capability: only a step it opened depends on the
         * workflow (who owns it). */
        snprintf(out->step, sizeof out->step, "%s", text_of(snap, "step"));
        snprintf(out->subject, sizeof out->subject, "%s", text_of(snap, "credential"));
        rc = replay_identity(snap, cand, &out->decided, why, n);
        goto out;
    }
    rc = cap_from(snap, &was, why, n);
    if (rc != STATUS_OK)
        goto out;
    snprintf(out->step, sizeof out->step, "%s", was.step);
    rc = candidate_cap(cand, recorded, &was, &cap, &found);
    if (rc == STATUS_OK && found) {
        rc = decide_snapshot(&cap, snap, cand, 0, &out->decided, why, n);
        cap_free(&cap);
    } else if (rc == STATUS_OK) {
        /* The candidate does not have the step: nothing may be done in it. */
        out->decided.outcome = GUARD_DENY;
        out->decided.codes = 1u << GUARD_STEP_MISMATCH;
        char w[160];
        snprintf(w, sizeof w, "%s step is not in workflow %s", was.step, cand->wf->name);
        if ((out->decided.witness = strdup(w)) == NULL)
            rc = STATUS_ENOMEM;
    }
    cap_free(&was);
out:
    json_decref(snap);
    if (rc != STATUS_OK) {
        evaluator_whatif_result_free(out);
        return rc;
    }
    char codes[512];
    guard_codes_format(out->decided.codes, codes, sizeof codes);
    out->changed = strcmp(outcome, decision_outcome_name(out->decided.outcome)) != 0 ||
                   strcmp(text_of(event, "codes"), codes) != 0;
    return STATUS_OK;
}
