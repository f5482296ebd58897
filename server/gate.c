/*
 * gate.c - the input gate and the step operations around it.
 *
 * Every operation reads its facts through the query library, asks the guard, and records the
 * decision as an event of the run in the same database call as its effect (a new artifact) or,
 * when there is no effect, in one event append. The snapshot of an input decision holds the
 * ancestries exactly as the query returned them, so the decision can be replayed later without
 * asking the graph again.
 */
#include "gate.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"

void gate_sha256_hex(const char *data, size_t len, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
        /* An all-zero hash never matches a stored one: the caller fails closed. */
        memset(hex, '0', 64);
        hex[64] = '\0';
        return;
    }
    for (unsigned i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = '\0';
}

/* A decision event's fields as charter_append_event and the writes that carry an event take
 * them. snapshot may be NULL (an operational failure records no facts). Steals nothing. */
static json_t *decision_event(const char *kind, const guard_decision *d, json_t *detail,
                              json_t *snapshot)
{
    char codes[512];
    guard_codes_format(d->codes, codes, sizeof codes);
    json_t *ev = json_object();
    if (!ev)
        return NULL;
    int rc = json_object_set_new(ev, "kind", json_string(kind));
    rc |= json_object_set_new(ev, "outcome", json_string(guard_outcome_name(d->outcome)));
    rc |= json_object_set_new(ev, "codes", json_string(codes));
    rc |= json_object_set_new(ev, "witness", json_string(d->witness ? d->witness : ""));
    if (detail)
        rc |= json_object_set(ev, "detail", detail);
    if (snapshot)
        rc |= json_object_set(ev, "snapshot", snapshot);
    if (rc) {
        json_decref(ev);
        return NULL;
    }
    return ev;
}

/* Appends ev to the run's events. Returns STORE_OK and the seq, or the store's failure. */
static int append_event(const gate_env *g, const char *run_id, json_t *ev, uint64_t *seq)
{
    char *text = json_dumps(ev, JSON_COMPACT);
    if (!text)
        return STORE_ENOMEM;
    const char *args[2] = {run_id, text};
    json_t *reply = NULL;
    int rc = store_call(g->st, "append_event", 2, args, &reply);
    free(text);
    if (rc == STORE_OK && seq) {
        json_t *s = json_object_get(reply, "seq");
        *seq = json_is_integer(s) ? (uint64_t)json_integer_value(s) : 0;
    }
    json_decref(reply);
    return rc;
}

/* Records d as an event; a decision that cannot be recorded does not stand: it becomes UNKNOWN
 * GRAPH_ERROR (every decision is recorded with its facts, or it is not a decision). */
static void record_decision(const gate_env *g, const char *run_id, const char *kind,
                            guard_decision *d, json_t *detail, json_t *snapshot, uint64_t *seq)
{
    json_t *ev = decision_event(kind, d, detail, snapshot);
    int rc = ev ? append_event(g, run_id, ev, seq) : STORE_ENOMEM;
    json_decref(ev);
    if (rc != STORE_OK) {
        guard_decision_free(d);
        guard_decision_unknown(d, "the decision could not be recorded");
        if (seq)
            *seq = 0;
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

static bool strs_contain(const guard_strs *s, const char *v)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->items[i], v) == 0)
            return true;
    return false;
}

static bool unavailable(int rc)
{
    return rc == STORE_EUNAVAILABLE || rc == STORE_EPROTO || rc == STORE_ELIMIT;
}

int gate_open_step(const gate_env *g, const char *run_id, const char *step, json_t **context)
{
    *context = NULL;
    const workflow_step *ws = workflow_step_find(g->wf, step);
    if (!ws)
        return STORE_ENOTFOUND;
    json_t *arg =
        json_pack("{s:s, s:s, s:s}", "run_id", run_id, "step", step, "actor", ws->cap.actor);
    if (!arg)
        return STORE_ENOMEM;
    json_t *reply = NULL;
    int rc = store_call_json(g->st, "open_context", arg, &reply);
    json_decref(arg);
    if (rc != STORE_OK)
        return rc;
    json_t *c = json_object_get(reply, "context");
    if (!json_is_object(c)) {
        json_decref(reply);
        return STORE_EPROTO;
    }
    *context = json_incref(c);
    json_decref(reply);
    return STORE_OK;
}

int gate_context(const gate_env *g, const char *context_id, const workflow_step **step,
                 guard_context *ctx)
{
    memset(ctx, 0, sizeof *ctx);
    int rc = store_context(g->st, context_id, ctx);
    if (rc != STORE_OK)
        return rc;
    *step = ctx->step ? workflow_step_find(g->wf, ctx->step) : NULL;
    if (!*step) {
        store_context_free(ctx);
        return STORE_ENOTFOUND;
    }
    return STORE_OK;
}

/* Input gate over ids without recording. Fills d (the worst verdict over all ids: DENY before
 * UNKNOWN before ALLOW, codes merged, the first witness kept), *snapshot (a JSON list of the
 * raw ancestries, caller decrefs) and, when every input is allowed, the recomputed labels of
 * an output derived from all of them. Returns STORE_OK, STORE_ENOTFOUND (an unknown artifact)
 * or STORE_ENOMEM. Graph failures give STORE_OK with UNKNOWN GRAPH_ERROR. */
static int check_inputs(const gate_env *g, const workflow_step *ws, const guard_context *ctx,
                        const char *const *ids, size_t n, guard_decision *d, json_t **snapshot,
                        int *conf, int *integrity)
{
    memset(d, 0, sizeof *d);
    d->outcome = GUARD_ALLOW;
    *conf = GUARD_CONF_PUBLIC;
    *integrity = GUARD_INTEGRITY_TRUSTED;
    json_t *raws = json_array();
    if (!raws)
        return STORE_ENOMEM;
    char limit[32];
    snprintf(limit, sizeof limit, "%zu", g->limits->max_ancestry);
    for (size_t i = 0; i < n; i++) {
        const char *args[2] = {ids[i], limit};
        json_t *raw = NULL;
        int rc = store_call(g->st, "ancestry", 2, args, &raw);
        if (rc == STORE_ENOTFOUND || rc == STORE_ENOMEM) {
            json_decref(raws);
            guard_decision_free(d);
            return rc;
        }
        guard_ancestry anc = {0};
        guard_decision one = {0};
        if (rc != STORE_OK || store_ancestry_from_json(raw, ids[i], &anc) != STORE_OK) {
            guard_decision_unknown(&one, "the graph could not supply the ancestry");
        } else if (guard_check_input(&ws->cap, ctx, ctx->run_id, &anc, &one) != 0) {
            guard_decision_free(&one);
            guard_decision_unknown(&one, "out of memory");
        } else if (one.outcome == GUARD_ALLOW) {
            int c = -1, in = -1;
            if (guard_recompute_labels(&anc, ids[i], &c, &in) != 0) {
                guard_decision_free(&one);
                guard_decision_unknown(&one, "labels could not be recomputed");
            } else {
                *conf = c > *conf ? c : *conf;
                *integrity = in < *integrity ? in : *integrity;
            }
        }
        if (raw && json_array_append_new(raws, raw))
            rc = STORE_ENOMEM;
        store_ancestry_free(&anc);
        /* Keep the worst verdict: DENY, then UNKNOWN, then ALLOW. */
        int rank_one = one.outcome == GUARD_DENY ? 2 : one.outcome == GUARD_UNKNOWN ? 1 : 0;
        int rank_d = d->outcome == GUARD_DENY ? 2 : d->outcome == GUARD_UNKNOWN ? 1 : 0;
        unsigned merged = d->codes | one.codes;
        if (rank_one > rank_d) {
            guard_decision_free(d);
            *d = one;
            memset(&one, 0, sizeof one);
        }
        d->codes = merged;
        /* As in the guard: a fact that could not be had makes the whole verdict UNKNOWN. */
        if (merged & (1u << GUARD_GRAPH_ERROR))
            d->outcome = GUARD_UNKNOWN;
        guard_decision_free(&one);
        if (rc == STORE_ENOMEM) {
            json_decref(raws);
            guard_decision_free(d);
            return rc;
        }
    }
    *snapshot = raws;
    return STORE_OK;
}

static json_t *input_snapshot(const workflow_step *ws, const guard_context *ctx, json_t *raws)
{
    return json_pack("{s:s, s:s, s:o*, s:O}", "gate", "input", "step", ws->cap.step, "context",
                     context_json(ctx), "ancestries", raws);
}

static json_t *input_detail(const char *context_id, const workflow_step *ws, const char *const *ids,
                            size_t n)
{
    return json_pack("{s:s, s:s, s:o*}", "context", context_id, "step", ws->cap.step, "artifacts",
                     strings_json(ids, n));
}

int gate_check_input(const gate_env *g, const char *context_id, const char *const *ids, size_t n,
                     guard_decision *d, uint64_t *event_seq)
{
    memset(d, 0, sizeof *d);
    *event_seq = 0;
    if (n == 0 || n > g->limits->max_ids)
        return STORE_EINVAL;
    const workflow_step *ws = NULL;
    guard_context ctx;
    int rc = gate_context(g, context_id, &ws, &ctx);
    if (unavailable(rc)) {
        guard_decision_unknown(d, "the graph could not supply the context");
        return STORE_OK;
    }
    if (rc != STORE_OK)
        return rc;
    json_t *raws = NULL;
    int conf, integrity;
    rc = check_inputs(g, ws, &ctx, ids, n, d, &raws, &conf, &integrity);
    if (rc == STORE_OK) {
        json_t *snap = input_snapshot(ws, &ctx, raws);
        json_t *detail = input_detail(context_id, ws, ids, n);
        record_decision(g, ctx.run_id, "input_checked", d, detail, snap, event_seq);
        json_decref(snap);
        json_decref(detail);
    }
    json_decref(raws);
    store_context_free(&ctx);
    return rc;
}

int gate_evaluate_input(const gate_env *g, const char *context_id, const char *const *ids, size_t n,
                        guard_decision *d)
{
    memset(d, 0, sizeof *d);
    if (n == 0 || n > g->limits->max_ids)
        return STORE_EINVAL;
    const workflow_step *ws = NULL;
    guard_context ctx;
    int rc = gate_context(g, context_id, &ws, &ctx);
    if (unavailable(rc)) {
        guard_decision_unknown(d, "the graph could not supply the context");
        return STORE_OK;
    }
    if (rc != STORE_OK)
        return rc;
    json_t *raws = NULL;
    int conf, integrity;
    rc = check_inputs(g, ws, &ctx, ids, n, d, &raws, &conf, &integrity);
    json_decref(raws);
    store_context_free(&ctx);
    return rc;
}

/* Creates an artifact with its edges and its event in one database call. */
static int create_artifact(const gate_env *g, json_t *arg, json_t **artifact)
{
    json_t *reply = NULL;
    int rc = store_call_json(g->st, "create_artifact", arg, &reply);
    if (rc != STORE_OK)
        return rc;
    json_t *a = json_object_get(reply, "artifact");
    if (!json_is_object(a)) {
        json_decref(reply);
        return STORE_EPROTO;
    }
    *artifact = json_incref(a);
    json_decref(reply);
    return STORE_OK;
}

int gate_read_source(const gate_env *g, const char *context_id, const char *resource_id,
                     guard_decision *d, json_t **artifact)
{
    memset(d, 0, sizeof *d);
    *artifact = NULL;
    const workflow_step *ws = NULL;
    guard_context ctx;
    int rc = gate_context(g, context_id, &ws, &ctx);
    if (unavailable(rc)) {
        guard_decision_unknown(d, "the graph could not supply the context");
        return STORE_OK;
    }
    if (rc != STORE_OK)
        return rc;

    json_t *detail = json_pack("{s:s, s:s, s:s}", "context", context_id, "step", ws->cap.step,
                               "resource", resource_id);
    if (!detail) {
        store_context_free(&ctx);
        return STORE_ENOMEM;
    }
    /* The step, not the model, says what may be read: a resource outside it is refused before
     * anything is fetched. */
    if (!strs_contain(&ws->cap.tools, "read_source") ||
        !strs_contain(&ws->cap.resources, resource_id)) {
        bool tool = strs_contain(&ws->cap.tools, "read_source");
        d->outcome = GUARD_DENY;
        d->codes = 1u << (tool ? GUARD_RESOURCE_OUT_OF_SCOPE : GUARD_STEP_MISMATCH);
        char buf[512];
        snprintf(buf, sizeof buf, "%s is not %s of %s step", resource_id,
                 tool ? "a resource" : "readable by the read_source tool", ws->cap.step);
        d->witness = strdup(buf);
        record_decision(g, ctx.run_id, "source_read", d, detail, NULL, NULL);
        json_decref(detail);
        store_context_free(&ctx);
        return STORE_OK;
    }

    const char *args[1] = {resource_id};
    json_t *res = NULL;
    rc = store_call(g->st, "get_resource", 1, args, &res);
    if (rc == STORE_OK && !json_is_object(res))
        rc = STORE_EPROTO;
    if (rc == STORE_OK) {
        const char *content = json_string_value(json_object_get(res, "content"));
        const char *title = json_string_value(json_object_get(res, "title"));
        json_t *jconf = json_object_get(res, "conf"), *jint = json_object_get(res, "integrity");
        long long conf =
            json_is_string(jconf) ? atoll(json_string_value(jconf)) : json_integer_value(jconf);
        long long integ =
            json_is_string(jint) ? atoll(json_string_value(jint)) : json_integer_value(jint);
        char hash[65];
        gate_sha256_hex(content ? content : "", content ? strlen(content) : 0, hash);
        d->outcome = GUARD_ALLOW;
        json_t *ev = decision_event("source_read", d, detail, NULL);
        json_t *arg = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:[], s:s, s:b, s:o*}",
                                "run_id", ctx.run_id, "context_id", context_id, "kind", "source",
                                "title", title ? title : resource_id, "conf", conf, "integrity",
                                integ, "hash", hash, "content", content ? content : "", "input_ids",
                                "resource", resource_id, "capture_complete", 1, "event", ev);
        rc = arg ? create_artifact(g, arg, artifact) : STORE_ENOMEM;
        json_decref(arg);
        if (rc != STORE_OK && rc != STORE_ENOMEM && rc != STORE_ENOTFOUND) {
            guard_decision_free(d);
            guard_decision_unknown(d, "the source could not be registered");
            rc = STORE_OK;
        }
    } else if (unavailable(rc)) {
        guard_decision_unknown(d, "the graph could not supply the resource");
        rc = STORE_OK;
    }
    json_decref(res);
    json_decref(detail);
    store_context_free(&ctx);
    return rc;
}

int gate_record_output(const gate_env *g, const char *context_id, const char *const *input_ids,
                       size_t n, const char *title, const char *content, guard_decision *d,
                       json_t **artifact)
{
    memset(d, 0, sizeof *d);
    *artifact = NULL;
    if (n == 0 || n > g->limits->max_ids || !title || !*title || strlen(title) > 256 || !content ||
        strlen(content) > g->limits->max_content)
        return STORE_EINVAL;
    const workflow_step *ws = NULL;
    guard_context ctx;
    int rc = gate_context(g, context_id, &ws, &ctx);
    if (unavailable(rc)) {
        guard_decision_unknown(d, "the graph could not supply the context");
        return STORE_OK;
    }
    if (rc != STORE_OK)
        return rc;
    json_t *raws = NULL;
    int conf, integrity;
    rc = check_inputs(g, ws, &ctx, input_ids, n, d, &raws, &conf, &integrity);
    if (rc != STORE_OK) {
        store_context_free(&ctx);
        return rc;
    }
    json_t *snap = input_snapshot(ws, &ctx, raws);
    json_t *detail = json_pack("{s:s, s:s, s:s, s:o*}", "context", context_id, "step", ws->cap.step,
                               "title", title, "inputs", strings_json(input_ids, n));
    if (d->outcome != GUARD_ALLOW) {
        record_decision(g, ctx.run_id, "output_refused", d, detail, snap, NULL);
    } else {
        /* Provenance is captured here, by the host: the parents are exactly the inputs that
         * passed the gate, and the labels are recomputed from them, never taken from a caller. */
        char hash[65];
        gate_sha256_hex(content, strlen(content), hash);
        json_t *ev = decision_event("output_recorded", d, detail, snap);
        json_t *arg =
            json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:o*, s:b, s:o*}", "run_id",
                      ctx.run_id, "context_id", context_id, "kind", "derived", "title", title,
                      "conf", conf, "integrity", integrity, "hash", hash, "content", content,
                      "input_ids", strings_json(input_ids, n), "capture_complete", 1, "event", ev);
        rc = arg ? create_artifact(g, arg, artifact) : STORE_ENOMEM;
        json_decref(arg);
        if (rc != STORE_OK && rc != STORE_ENOMEM && rc != STORE_ENOTFOUND) {
            guard_decision_free(d);
            guard_decision_unknown(d, "the output could not be recorded");
            rc = STORE_OK;
        }
    }
    json_decref(snap);
    json_decref(detail);
    json_decref(raws);
    store_context_free(&ctx);
    return rc;
}

int gate_trace(const gate_env *g, const char *artifact_id, json_t **ancestry)
{
    char limit[32];
    snprintf(limit, sizeof limit, "%zu", g->limits->max_ancestry);
    const char *args[2] = {artifact_id, limit};
    return store_call(g->st, "ancestry", 2, args, ancestry);
}
