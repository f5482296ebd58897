/*
 * svc_retrieval.c - charter.v1.Retrieval: scoped search over a graph's RediSearch index.
 *
 * A trusted caller binds a scope (principal, filters) to a step's context; searches of it run
 * inside the query library with the scope's filters, cut to the resources the step's grant chain
 * allows, and every hit becomes a source artifact of the context through the same operation as
 * ReadSource (gate_read_chunk), so the input and delivery gates judge what was retrieved and all
 * that is derived from it. Follow-ups come from untrusted proposals: they may carry a query only
 * (scope.c) and search the parent's scope, within its budget and expiry, which the query library
 * checks on the database's clock just before it searches.
 *
 * Trusted means the operator token today; retrieval_trusted is the one place a host credential
 * bound to a tenant and its actors will be accepted too.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.pb-c.h"
#include "core/ids.h"
#include "gates/gate.h"
#include "policy/scope.h"
#include "rpc/services.h"
#include "rpc/wire.h"

#define RETRIEVAL_MODULE "ft"

/* Set once RediSearch has been seen in MODULE LIST (a module is not unloaded under us). */
static atomic_int retrieval_engine_seen;

/* The callers allowed to bind, narrow, checkpoint and resume scopes, ingest, and search. */
/* Trusted callers: the methods that bind, narrow, search, checkpoint or resume a scope (and
 * ingest documents) need the operator role in the method table below; that row is the one
 * place a host credential bound to a tenant and its actors will be accepted too. */

/* RPC_OK when the database has RediSearch loaded; otherwise one line saying how to fix it. */
static int retrieval_engine(call *c)
{
    if (atomic_load(&retrieval_engine_seen))
        return RPC_OK;
    bool loaded = false;
    int rc = store_module_loaded(c->st, RETRIEVAL_MODULE, &loaded);
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, "the database's module list");
    if (!loaded)
        return call_fail(c, RPC_UNAVAILABLE,
                         "retrieval needs the RediSearch module in Redis: apt-get install "
                         "redis-redisearch and start redis-server with --loadmodule "
                         "/usr/lib/redis/modules/redisearch.so");
    atomic_store(&retrieval_engine_seen, 1);
    return RPC_OK;
}

/* The message of a refusal by the query library ("...: refused: SCOPE_EXPIRED: ..."). */
static const char *retrieval_refusal(call *c)
{
    const char *e = store_last_error(c->st);
    const char *p = e ? strstr(e, "refused: ") : NULL;
    return p ? p + 9 : (e ? e : "refused");
}

static int retrieval_fail(call *c, int rc, const char *what)
{
    if (rc == STATUS_EREFUSED)
        return call_fail(c, RPC_FAILED_PRECONDITION, "%s", retrieval_refusal(c));
    if (rc == STATUS_ENOTFOUND || rc == STATUS_EINVAL) {
        const char *e = store_last_error(c->st);
        const char *p = e ? strstr(e, rc == STATUS_ENOTFOUND ? "not_found: " : "invalid: ") : NULL;
        return call_fail(c, rc == STATUS_ENOTFOUND ? RPC_NOT_FOUND : RPC_INVALID_ARGUMENT, "%s",
                         p ? strchr(p, ' ') + 1 : what);
    }
    return call_fail_status(c, rc, what);
}

/* --- filters ------------------------------------------------------------------------------- */

static int retrieval_filters_in(call *c, const char *what, Charter__V1__ScopeFilter **fs, size_t n,
                                bool unrestricted, scope_filters *out)
{
    memset(out, 0, sizeof *out);
    out->unrestricted = unrestricted;
    for (size_t i = 0; i < n; i++) {
        int k = scope_field_index(fs[i]->field);
        if (k < 0)
            return call_fail(c, RPC_INVALID_ARGUMENT,
                             "%s[%zu].field must be tenant, resource_id or visibility", what, i);
        if (out->present[k])
            return call_fail(c, RPC_INVALID_ARGUMENT, "%s: %s is given twice", what,
                             scope_fields[k]);
        if (fs[i]->n_values > 1000)
            return call_fail(c, RPC_INVALID_ARGUMENT, "%s.%s: more than 1000 values", what,
                             scope_fields[k]);
        for (size_t v = 0; v < fs[i]->n_values; v++)
            if (!ids_graph_ok(fs[i]->values[v]))
                return call_fail(c, RPC_INVALID_ARGUMENT, "%s.%s[%zu]: 1 to 128 of [A-Za-z0-9._-]",
                                 what, scope_fields[k], v);
        out->present[k] = true;
        out->values[k].items = fs[i]->values;
        out->values[k].n = fs[i]->n_values;
    }
    return RPC_OK;
}

/* The filters as the query library takes them: {field: [values]}. */
static json_t *retrieval_filters_json(const scope_filters *f)
{
    json_t *o = json_object();
    for (int i = 0; o && i < SCOPE_N_FIELDS; i++) {
        if (!f->present[i])
            continue;
        json_t *list = json_array();
        for (size_t k = 0; list && k < f->values[i].n; k++)
            if (json_array_append_new(list, json_string(f->values[i].items[k])))
                json_decref(list), list = NULL;
        if (!list || json_object_set_new(o, scope_fields[i], list)) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* Filters from a stored JSON text (copied into the arena). RPC_OK or an RPC error. */
static int retrieval_filters_stored(call *c, const char *text, bool unrestricted,
                                    scope_filters *out)
{
    memset(out, 0, sizeof *out);
    out->unrestricted = unrestricted;
    json_t *o = json_loads(text ? text : "{}", 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return call_fail(c, RPC_INTERNAL, "a stored scope's filters are not a JSON object");
    }
    const char *key;
    json_t *list;
    int rc = RPC_OK;
    json_object_foreach(o, key, list)
    {
        int k = scope_field_index(key);
        char **items = NULL;
        size_t n = 0;
        if (k < 0 || wire_strings(c, list, &items, &n) != 0) {
            rc = call_fail(c, RPC_INTERNAL, "a stored scope's filters are malformed");
            break;
        }
        out->present[k] = true;
        out->values[k].items = items;
        out->values[k].n = n;
    }
    json_decref(o);
    return rc;
}

static Charter__V1__ScopeFilter **retrieval_filters_out(call *c, const scope_filters *f, size_t *n)
{
    *n = 0;
    Charter__V1__ScopeFilter **out = call_alloc(c, SCOPE_N_FIELDS * sizeof *out);
    for (int i = 0; out && i < SCOPE_N_FIELDS; i++) {
        if (!f->present[i])
            continue;
        Charter__V1__ScopeFilter *s = call_alloc(c, sizeof *s);
        if (!s)
            return NULL;
        charter__v1__scope_filter__init(s);
        s->field = (char *)scope_fields[i];
        s->values = f->values[i].items;
        s->n_values = f->values[i].n;
        out[(*n)++] = s;
    }
    return out;
}

/* A scope object of the query library as the API shows it; *filters (may be NULL) its filters. */
static Charter__V1__RetrievalScope *retrieval_scope_out(call *c, const json_t *s,
                                                        scope_filters *filters)
{
    scope_filters f;
    bool unrestricted = json_is_true(json_object_get(s, "unrestricted"));
    if (retrieval_filters_stored(c, json_string_value(json_object_get(s, "filters")), unrestricted,
                                 &f) != RPC_OK)
        return NULL;
    if (filters)
        *filters = f;
    Charter__V1__RetrievalScope *r = call_alloc(c, sizeof *r);
    if (!r)
        return NULL;
    charter__v1__retrieval_scope__init(r);
    r->scope_id = call_strdup(c, json_string_value(json_object_get(s, "id")));
    r->context_id = call_strdup(c, json_string_value(json_object_get(s, "context_id")));
    r->principal = call_strdup(c, json_string_value(json_object_get(s, "principal")));
    r->task = call_strdup(c, json_string_value(json_object_get(s, "task")));
    r->parent_scope_id = call_strdup(c, json_string_value(json_object_get(s, "parent")));
    r->resumed_from = call_strdup(c, json_string_value(json_object_get(s, "resumed_from")));
    const char *exp = json_string_value(json_object_get(s, "expires_at"));
    r->expires_at = exp && *exp ? atof(exp) : 0;
    r->unrestricted = unrestricted;
    r->max_follow_ups = (uint32_t)json_integer_value(json_object_get(s, "max_follow_ups"));
    r->follow_ups_used = (uint32_t)json_integer_value(json_object_get(s, "follow_ups_used"));
    r->filters = retrieval_filters_out(c, &f, &r->n_filters);
    if (!r->scope_id || !r->context_id || !r->principal || !r->task || !r->parent_scope_id ||
        !r->resumed_from || !r->filters)
        return NULL;
    return r;
}

/* The stored scope scope_id: *j (caller decrefs) is the scope object. */
static int retrieval_get_scope(call *c, const char *scope_id, json_t **reply, const json_t **scope)
{
    int rc = q_retrieval_get_scope(c->st, scope_id, reply);
    if (rc != STATUS_OK)
        return retrieval_fail(c, rc, "scope");
    *scope = json_object_get(*reply, "scope");
    if (!json_is_object(*scope))
        return call_fail(c, RPC_INTERNAL, "unexpected database reply for scope %s", scope_id);
    return RPC_OK;
}

/* The resources a scope of context_id may reach: its step's, cut to every grant of the step's
 * grant chain. Arena strings into *allowed. */
static int retrieval_step_bound(call *c, const char *context_id, guard_strs *allowed)
{
    gate_env g = call_gate_env(c);
    const workflow_step *ws = NULL;
    guard_context ctx;
    int rc = gate_context(&g, context_id, &ws, &ctx);
    if (rc == STATUS_EREFUSED)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "context %s belongs to a completed run: its record is closed", context_id);
    if (rc != STATUS_OK)
        return call_fail_status_id(c, rc, "context", context_id);
    facts_context_free(&ctx);
    guard_chain chain;
    memset(&chain, 0, sizeof chain);
    rc = store_grant_chain(c->st, ws->cap.grant, &chain);
    if (rc != STATUS_OK)
        return call_fail_status_id(c, rc, "grant", ws->cap.grant);
    allowed->items = call_alloc(c, (ws->cap.resources.n + 1) * sizeof(char *));
    allowed->n = 0;
    if (!allowed->items) {
        facts_chain_free(&chain);
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    /* A chain the graph could not supply allows nothing (fail closed). */
    for (size_t i = 0; chain.n > 0 && i < ws->cap.resources.n; i++) {
        const char *r = ws->cap.resources.items[i];
        bool all = true;
        for (size_t k = 0; all && k < chain.n; k++) {
            bool in = false;
            for (size_t m = 0; !in && m < chain.items[k].resources.n; m++)
                in = strcmp(chain.items[k].resources.items[m], r) == 0;
            all = in;
        }
        if (all && !(allowed->items[allowed->n++] = call_strdup(c, r))) {
            facts_chain_free(&chain);
            return call_fail(c, RPC_INTERNAL, "out of memory");
        }
    }
    facts_chain_free(&chain);
    return RPC_OK;
}

static json_t *retrieval_strs_json(const guard_strs *s)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < s->n; i++)
        if (json_array_append_new(a, json_string(s->items[i])))
            json_decref(a), a = NULL;
    return a;
}

/* Stores a scope: doc as charter_retrieval_bind_scope takes it plus filters f. */
static int retrieval_bind(call *c, json_t *doc, const scope_filters *f, ProtobufCMessage **out)
{
    json_t *fj = retrieval_filters_json(f);
    json_t *reply = NULL;
    int rc = RPC_OK;
    if (!doc || !fj || json_object_set_new(doc, "filters", fj) ||
        json_object_set_new(doc, "unrestricted", json_boolean(f->unrestricted))) {
        json_decref(doc);
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    int st = q_retrieval_bind_scope(c->st, doc, &reply);
    json_decref(doc);
    if (st != STATUS_OK) {
        json_decref(reply);
        return retrieval_fail(c, st, "scope");
    }
    Charter__V1__RetrievalScope *r = retrieval_scope_out(c, json_object_get(reply, "scope"), NULL);
    json_decref(reply);
    if (!r)
        return call_fail(c, RPC_INTERNAL, "unexpected database reply binding a scope");
    *out = &r->base;
    return rc;
}

/* --- handlers ------------------------------------------------------------------------------ */

static int retrieval_ingest(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__IngestChunksRequest *rq = (const Charter__V1__IngestChunksRequest *)in;
    int rc;
    if ((rc = retrieval_engine(c)) != RPC_OK)
        return rc;
    if (rq->n_chunks == 0 || rq->n_chunks > 10000)
        return call_fail(c, RPC_INVALID_ARGUMENT, "chunks: 1 to 10000 chunks");
    json_t *list = json_array();
    for (size_t i = 0; list && i < rq->n_chunks; i++) {
        const Charter__V1__RetrievalChunk *ch = rq->chunks[i];
        if (!ids_graph_ok(ch->chunk_id) || !ids_graph_ok(ch->resource_id) ||
            !ids_graph_ok(ch->tenant) || !ids_graph_ok(ch->visibility)) {
            json_decref(list);
            return call_fail(c, RPC_INVALID_ARGUMENT,
                             "chunks[%zu]: chunk_id, resource_id, tenant and visibility are ids "
                             "(1 to 128 of [A-Za-z0-9._-])",
                             i);
        }
        if ((rc = call_require_utf8(c, "text", ch->text)) != RPC_OK) {
            json_decref(list);
            return rc;
        }
        if (json_array_append_new(list,
                                  json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "chunk_id",
                                            ch->chunk_id, "resource_id", ch->resource_id, "tenant",
                                            ch->tenant, "visibility", ch->visibility, "revision",
                                            (json_int_t)ch->revision, "text", ch->text)))
            json_decref(list), list = NULL;
    }
    json_t *doc = list ? json_pack("{s:o}", "chunks", list) : NULL;
    if (!doc)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    json_t *reply = NULL;
    rc = q_retrieval_ingest(c->st, doc, &reply);
    json_decref(doc);
    if (rc != STATUS_OK)
        return retrieval_fail(c, rc, "chunks");
    Charter__V1__IngestChunksResponse *r = call_alloc(c, sizeof *r);
    if (!r) {
        json_decref(reply);
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    charter__v1__ingest_chunks_response__init(r);
    r->indexed = (uint32_t)json_integer_value(json_object_get(reply, "indexed"));
    json_decref(reply);
    *out = &r->base;
    return RPC_OK;
}

static int retrieval_bind_scope(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__BindScopeRequest *rq = (const Charter__V1__BindScopeRequest *)in;
    int rc;
    if ((rc = retrieval_engine(c)) != RPC_OK ||
        (rc = call_require_id(c, "context_id", rq->context_id)) != RPC_OK ||
        (rc = call_require_id(c, "principal", rq->principal)) != RPC_OK ||
        (rc = call_require_utf8(c, "task", rq->task)) != RPC_OK)
        return rc;
    scope_filters f;
    char why[512];
    if ((rc = retrieval_filters_in(c, "filters", rq->filters, rq->n_filters, rq->unrestricted,
                                   &f)) != RPC_OK)
        return rc;
    if (scope_check_bound(&f, why, sizeof why) != STATUS_OK)
        return call_fail(c, RPC_INVALID_ARGUMENT, "%s", why);
    guard_strs allowed;
    if ((rc = retrieval_step_bound(c, rq->context_id, &allowed)) != RPC_OK)
        return rc;
    if (scope_check_resources(&f, &allowed, why, sizeof why) != STATUS_OK)
        return call_fail(c, RPC_PERMISSION_DENIED, "%s", why);
    json_t *doc =
        json_pack("{s:s, s:s, s:s, s:I, s:I}", "context_id", rq->context_id, "principal",
                  rq->principal, "task", rq->task ? rq->task : "", "expires_in_ms",
                  (json_int_t)rq->expires_in_ms, "max_follow_ups", (json_int_t)rq->max_follow_ups);
    return retrieval_bind(c, doc, &f, out);
}

static int retrieval_narrow_scope(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__NarrowScopeRequest *rq = (const Charter__V1__NarrowScopeRequest *)in;
    int rc;
    if ((rc = retrieval_engine(c)) != RPC_OK ||
        (rc = call_require_id(c, "scope_id", rq->scope_id)) != RPC_OK)
        return rc;
    scope_filters narrowing, parent, child;
    if ((rc = retrieval_filters_in(c, "filters", rq->filters, rq->n_filters, false, &narrowing)) !=
        RPC_OK)
        return rc;
    json_t *reply = NULL;
    const json_t *s = NULL;
    if ((rc = retrieval_get_scope(c, rq->scope_id, &reply, &s)) != RPC_OK) {
        json_decref(reply);
        return rc;
    }
    Charter__V1__RetrievalScope *p = retrieval_scope_out(c, s, &parent);
    json_decref(reply);
    if (!p)
        return call_fail(c, RPC_INTERNAL, "unexpected database reply for scope %s", rq->scope_id);
    scope_merge(&parent, &narrowing, &child);
    char why[512], whose[160];
    snprintf(whose, sizeof whose, "the parent scope %s", rq->scope_id);
    if (scope_check_within(&child, &parent, whose, why, sizeof why) != STATUS_OK)
        return call_fail(c, RPC_PERMISSION_DENIED, "%s", why);
    json_t *doc =
        json_pack("{s:s, s:I, s:I}", "parent", rq->scope_id, "expires_in_ms",
                  (json_int_t)rq->expires_in_ms, "max_follow_ups", (json_int_t)rq->max_follow_ups);
    return retrieval_bind(c, doc, &child, out);
}

static Charter__V1__SearchLink *retrieval_link_out(call *c, const json_t *l)
{
    Charter__V1__SearchLink *s = call_alloc(c, sizeof *s);
    if (!s)
        return NULL;
    charter__v1__search_link__init(s);
    s->search_id = call_strdup(c, json_string_value(json_object_get(l, "search_id")));
    s->scope_id = call_strdup(c, json_string_value(json_object_get(l, "scope_id")));
    s->parent_search_id = call_strdup(c, json_string_value(json_object_get(l, "parent")));
    return s->search_id && s->scope_id && s->parent_search_id ? s : NULL;
}

/* One search of scope_id (parent: the search it follows up, or NULL), its hits registered as
 * source artifacts of the scope's context. */
static int retrieval_run(call *c, const char *scope_id, const char *query, unsigned limit,
                         const char *parent, ProtobufCMessage **out)
{
    int rc;
    json_t *sreply = NULL;
    const json_t *s = NULL;
    if ((rc = retrieval_get_scope(c, scope_id, &sreply, &s)) != RPC_OK) {
        json_decref(sreply);
        return rc;
    }
    char *context_id = call_strdup(c, json_string_value(json_object_get(s, "context_id")));
    json_decref(sreply);
    guard_strs allowed;
    if (!context_id)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    if ((rc = retrieval_step_bound(c, context_id, &allowed)) != RPC_OK)
        return rc;
    json_t *doc = json_pack("{s:s, s:o*, s:s, s:I, s:s, s:o*}", "scope_id", scope_id, "words",
                            scope_query_words(query), "query", query, "limit",
                            (json_int_t)(limit ? limit : 5), "parent", parent ? parent : "",
                            "resources", retrieval_strs_json(&allowed));
    if (!doc)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    json_t *reply = NULL;
    rc = q_retrieval_search(c->st, doc, &reply);
    json_decref(doc);
    if (rc != STATUS_OK)
        return retrieval_fail(c, rc, "search");

    Charter__V1__SearchResponse *r = call_alloc(c, sizeof *r);
    const json_t *search = json_object_get(reply, "search");
    const json_t *results = json_object_get(reply, "results");
    const json_t *lineage = json_object_get(reply, "lineage");
    size_t nres = json_is_array(results) ? json_array_size(results) : 0;
    size_t nlin = json_is_array(lineage) ? json_array_size(lineage) : 0;
    json_t *artifact_ids = json_array();
    if (!r || !artifact_ids)
        goto oom;
    charter__v1__search_response__init(r);
    r->search_id = call_strdup(c, json_string_value(json_object_get(search, "id")));
    r->scope_id = call_strdup(c, scope_id);
    r->parent_search_id = call_strdup(c, parent ? parent : "");
    r->denied_all = json_is_true(json_object_get(reply, "denied_all"));
    r->results = call_alloc(c, (nres + 1) * sizeof *r->results);
    r->lineage = call_alloc(c, (nlin + 1) * sizeof *r->lineage);
    if (!r->search_id || !r->scope_id || !r->parent_search_id || !r->results || !r->lineage)
        goto oom;
    for (size_t i = 0; i < nlin; i++)
        if (!(r->lineage[r->n_lineage++] = retrieval_link_out(c, json_array_get(lineage, i))))
            goto oom;
    gate_env g = call_gate_env(c);
    for (size_t i = 0; i < nres; i++) {
        const json_t *h = json_array_get(results, i);
        Charter__V1__RetrievedChunk *rc_ = call_alloc(c, sizeof *rc_);
        Charter__V1__RetrievalChunk *ch = call_alloc(c, sizeof *ch);
        if (!rc_ || !ch)
            goto oom;
        charter__v1__retrieved_chunk__init(rc_);
        charter__v1__retrieval_chunk__init(ch);
        ch->chunk_id = call_strdup(c, json_string_value(json_object_get(h, "chunk_id")));
        ch->resource_id = call_strdup(c, json_string_value(json_object_get(h, "resource_id")));
        ch->tenant = call_strdup(c, json_string_value(json_object_get(h, "tenant")));
        ch->visibility = call_strdup(c, json_string_value(json_object_get(h, "visibility")));
        ch->text = call_strdup(c, json_string_value(json_object_get(h, "text")));
        ch->revision = (uint64_t)json_integer_value(json_object_get(h, "revision"));
        rc_->score = json_number_value(json_object_get(h, "score"));
        if (!ch->chunk_id || !ch->resource_id || !ch->tenant || !ch->visibility || !ch->text)
            goto oom;
        char title[300];
        const char *rtitle = json_string_value(json_object_get(h, "title"));
        snprintf(title, sizeof title, "%.200s #%.64s", rtitle && *rtitle ? rtitle : ch->resource_id,
                 ch->chunk_id);
        gate_chunk gc = {ch->chunk_id, r->search_id, title, ch->text};
        guard_decision d;
        json_t *a = NULL;
        int st = gate_read_chunk(&g, context_id, ch->resource_id, &gc, &d, &a);
        bool allow = st == STATUS_OK && d.outcome == GUARD_ALLOW && a;
        guard_decision_free(&d);
        /* A hit the step may not read is not returned (the filters make it impossible; the
         * gate says so again). */
        if (allow) {
            rc_->chunk = ch;
            rc_->artifact = wire_artifact(c, a);
            const char *aid = json_string_value(json_object_get(a, "id"));
            if (!rc_->artifact || !aid || json_array_append_new(artifact_ids, json_string(aid))) {
                json_decref(a);
                goto oom;
            }
            r->results[r->n_results++] = rc_;
        }
        json_decref(a);
        if (st != STATUS_OK && st != STATUS_ENOTFOUND) {
            json_decref(artifact_ids);
            json_decref(reply);
            return call_fail_status(c, st, "a retrieved chunk's source artifact");
        }
    }
    if (json_array_size(artifact_ids) > 0) {
        char *ids = json_dumps(artifact_ids, JSON_COMPACT);
        rc = ids ? q_retrieval_link(c->st, r->search_id, ids, NULL) : STATUS_ENOMEM;
        free(ids);
        if (rc != STATUS_OK) {
            json_decref(artifact_ids);
            json_decref(reply);
            return call_fail_status(c, rc, "the search's artifacts");
        }
    }
    json_decref(artifact_ids);
    json_decref(reply);
    *out = &r->base;
    return RPC_OK;
oom:
    json_decref(artifact_ids);
    json_decref(reply);
    return call_fail(c, RPC_INTERNAL, "out of memory");
}

static int retrieval_search(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__SearchRequest *rq = (const Charter__V1__SearchRequest *)in;
    int rc;
    if ((rc = retrieval_engine(c)) != RPC_OK ||
        (rc = call_require_id(c, "scope_id", rq->scope_id)) != RPC_OK ||
        (rc = call_require_utf8(c, "query", rq->query)) != RPC_OK)
        return rc;
    if (rq->limit > 100)
        return call_fail(c, RPC_INVALID_ARGUMENT, "limit: 1 to 100 (0 means 5)");
    return retrieval_run(c, rq->scope_id, rq->query ? rq->query : "", rq->limit, NULL, out);
}

static int retrieval_follow_up(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__FollowUpRequest *rq = (const Charter__V1__FollowUpRequest *)in;
    int rc;
    if ((rc = retrieval_engine(c)) != RPC_OK ||
        (rc = call_require_id(c, "parent_search_id", rq->parent_search_id)) != RPC_OK ||
        (rc = call_require_utf8(c, "proposal", rq->proposal)) != RPC_OK)
        return rc;
    /* The proposal is untrusted: it is read before anything else, and a scope-bearing field
     * refuses it before any search. */
    json_t *doc = NULL;
    const char *query = NULL;
    unsigned limit = 0;
    char why[512];
    int st = scope_read_proposal(rq->proposal, &doc, &query, &limit, why, sizeof why);
    if (st == STATUS_EREFUSED)
        return call_fail(c, RPC_PERMISSION_DENIED, "%s", why);
    if (st != STATUS_OK)
        return call_fail(c, RPC_INVALID_ARGUMENT, "%s", why);
    char *q = call_strdup(c, query);
    json_decref(doc);
    if (!q)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    /* The child searches its parent's scope: the parent search names it. */
    json_t *reply = NULL;
    rc = q_retrieval_get_search(c->st, rq->parent_search_id, &reply);
    if (rc != STATUS_OK)
        return retrieval_fail(c, rc, "search");
    char *scope_id = call_strdup(
        c, json_string_value(json_object_get(json_object_get(reply, "search"), "scope_id")));
    json_decref(reply);
    if (!scope_id || !*scope_id)
        return call_fail(c, RPC_INTERNAL, "unexpected database reply for search %s",
                         rq->parent_search_id);
    return retrieval_run(c, scope_id, q, limit, rq->parent_search_id, out);
}

static int retrieval_checkpoint(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__CheckpointScopeRequest *rq = (const Charter__V1__CheckpointScopeRequest *)in;
    int rc;
    if ((rc = call_require_id(c, "scope_id", rq->scope_id)) != RPC_OK ||
        (rc = call_require_id(c, "principal", rq->principal)) != RPC_OK ||
        (rc = call_require_utf8(c, "task", rq->task)) != RPC_OK)
        return rc;
    json_t *doc = json_pack("{s:s, s:s, s:s}", "scope_id", rq->scope_id, "principal", rq->principal,
                            "task", rq->task ? rq->task : "");
    json_t *reply = NULL;
    rc = doc ? q_retrieval_checkpoint(c->st, doc, &reply) : STATUS_ENOMEM;
    json_decref(doc);
    if (rc != STATUS_OK)
        return retrieval_fail(c, rc, "checkpoint");
    Charter__V1__CheckpointScopeResponse *r = call_alloc(c, sizeof *r);
    if (r) {
        charter__v1__checkpoint_scope_response__init(r);
        r->checkpoint_id =
            call_strdup(c, json_string_value(json_object_get(reply, "checkpoint_id")));
    }
    json_decref(reply);
    if (!r || !r->checkpoint_id)
        return call_fail(c, RPC_INTERNAL, "unexpected database reply for a checkpoint");
    *out = &r->base;
    return RPC_OK;
}

static int retrieval_resume(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__ResumeScopeRequest *rq = (const Charter__V1__ResumeScopeRequest *)in;
    int rc;
    if ((rc = retrieval_engine(c)) != RPC_OK ||
        (rc = call_require_id(c, "checkpoint_id", rq->checkpoint_id)) != RPC_OK ||
        (rc = call_require_id(c, "principal", rq->principal)) != RPC_OK ||
        (rc = call_require_id(c, "context_id", rq->context_id)) != RPC_OK ||
        (rc = call_require_utf8(c, "task", rq->task)) != RPC_OK)
        return rc;
    scope_filters authorized, saved;
    char why[512];
    if ((rc = retrieval_filters_in(c, "authorized", rq->authorized, rq->n_authorized,
                                   rq->authorized_unrestricted, &authorized)) != RPC_OK)
        return rc;
    if (scope_check_bound(&authorized, why, sizeof why) != STATUS_OK)
        return call_fail(c, RPC_INVALID_ARGUMENT, "authorized: %s", why);
    json_t *reply = NULL;
    rc = q_retrieval_get_checkpoint(c->st, rq->checkpoint_id, &reply);
    if (rc != STATUS_OK)
        return retrieval_fail(c, rc, "checkpoint");
    const json_t *k = json_object_get(reply, "checkpoint");
    const char *principal = json_string_value(json_object_get(k, "principal"));
    const char *task = json_string_value(json_object_get(k, "task"));
    /* The binding first: a checkpoint serves only the caller and task it was saved for. */
    if (!principal || !task || strcmp(principal, rq->principal) != 0 ||
        strcmp(task, rq->task ? rq->task : "") != 0) {
        json_decref(reply);
        return call_fail(c, RPC_PERMISSION_DENIED,
                         "BINDING_MISMATCH: checkpoint %s is bound to another principal or task",
                         rq->checkpoint_id);
    }
    rc = retrieval_filters_stored(c, json_string_value(json_object_get(k, "filters")),
                                  json_is_true(json_object_get(k, "unrestricted")), &saved);
    json_int_t budget = json_integer_value(json_object_get(k, "max_follow_ups"));
    json_decref(reply);
    if (rc != RPC_OK)
        return rc;
    /* Then the caller's authorization now: the saved scope may not be broader than it, nor than
     * the new context's grant chain. */
    if (scope_check_within(&saved, &authorized, "the caller's current authorization", why,
                           sizeof why) != STATUS_OK)
        return call_fail(c, RPC_PERMISSION_DENIED, "%s", why);
    guard_strs allowed;
    if ((rc = retrieval_step_bound(c, rq->context_id, &allowed)) != RPC_OK)
        return rc;
    if (scope_check_resources(&saved, &allowed, why, sizeof why) != STATUS_OK)
        return call_fail(c, RPC_PERMISSION_DENIED, "%s", why);
    json_t *doc = json_pack("{s:s, s:s, s:s, s:I, s:s}", "context_id", rq->context_id, "principal",
                            rq->principal, "task", rq->task ? rq->task : "", "max_follow_ups",
                            budget, "resumed_from", rq->checkpoint_id);
    return retrieval_bind(c, doc, &saved, out);
}

static int retrieval_trace(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__TraceRetrievalRequest *rq = (const Charter__V1__TraceRetrievalRequest *)in;
    int rc;
    if ((rc = call_require_id(c, "artifact_id", rq->artifact_id)) != RPC_OK)
        return rc;
    json_t *reply = NULL;
    rc = q_retrieval_trace(c->st, rq->artifact_id, &reply);
    if (rc != STATUS_OK)
        return retrieval_fail(c, rc, "artifact");
    const json_t *list = json_object_get(reply, "searches");
    size_t n = json_is_array(list) ? json_array_size(list) : 0;
    Charter__V1__TraceRetrievalResponse *r = call_alloc(c, sizeof *r);
    if (r) {
        charter__v1__trace_retrieval_response__init(r);
        r->searches = call_alloc(c, (n + 1) * sizeof *r->searches);
        r->scopes = call_alloc(c, (n + 1) * sizeof *r->scopes);
    }
    for (size_t i = 0; r && r->searches && r->scopes && i < n; i++) {
        const json_t *e = json_array_get(list, i);
        Charter__V1__SearchLink *l = retrieval_link_out(c, e);
        const json_t *sc = json_object_get(e, "scope");
        Charter__V1__RetrievalScope *s =
            json_is_object(sc) ? retrieval_scope_out(c, sc, NULL) : NULL;
        if (!l || (json_is_object(sc) && !s)) {
            r = NULL;
            break;
        }
        r->searches[r->n_searches++] = l;
        if (s)
            r->scopes[r->n_scopes++] = s;
    }
    json_decref(reply);
    if (!r || !r->searches || !r->scopes)
        return call_fail(c, RPC_INTERNAL, "unexpected database reply for a trace");
    *out = &r->base;
    return RPC_OK;
}

/* The Retrieval service: one row per method, checked against the generated descriptor at
 * startup; dispatch enforces each row's columns (services.h). */
const svc_method svc_retrieval_methods[] = {
    {"IngestChunks", &charter__v1__ingest_chunks_request__descriptor,
     &charter__v1__ingest_chunks_response__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, retrieval_ingest},
    {"BindScope", &charter__v1__bind_scope_request__descriptor,
     &charter__v1__retrieval_scope__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, retrieval_bind_scope},
    {"NarrowScope", &charter__v1__narrow_scope_request__descriptor,
     &charter__v1__retrieval_scope__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, retrieval_narrow_scope},
    {"Search", &charter__v1__search_request__descriptor, &charter__v1__search_response__descriptor,
     ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, retrieval_search},
    {"FollowUp", &charter__v1__follow_up_request__descriptor,
     &charter__v1__search_response__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, retrieval_follow_up},
    {"CheckpointScope", &charter__v1__checkpoint_scope_request__descriptor,
     &charter__v1__checkpoint_scope_response__descriptor, ROLE_OPERATOR, SVC_NO_HOST,
     SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, retrieval_checkpoint},
    {"ResumeScope", &charter__v1__resume_scope_request__descriptor,
     &charter__v1__retrieval_scope__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, retrieval_resume},
    {"TraceRetrieval", &charter__v1__trace_retrieval_request__descriptor,
     &charter__v1__trace_retrieval_response__descriptor, ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, retrieval_trace},
};
const size_t svc_retrieval_methods_len =
    sizeof svc_retrieval_methods / sizeof svc_retrieval_methods[0];
