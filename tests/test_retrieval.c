/*
 * test_retrieval.c - scoped retrieval through a real charterd on the test Redis with RediSearch:
 * scopes bounded by the step's grant chain, deny-all filters, unrestricted only when asked,
 * query syntax searched as words, proposals carrying scope-bearing fields refused before any
 * search, the follow-up budget and expiry checked at dispatch, checkpoints bound to their caller,
 * and retrieved chunks entering the lineage so the delivery gate refuses what derives from them.
 *
 * The graph is the reference workflow's (procurement): the analyze step may read the vendor
 * quotes and the confidential budget; the research step only the vendor quotes.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"
#include "policy/scope.h"
#include "core/status.h"

static char graph[64];
static harness_charterd daemon_;
static charter_client *op;
static char run_id[64], analyze_ctx[64], research_ctx[64];

#define RPC_TIMEOUT 30000

/* One Retrieval call; *code its RPC code, *msg (static) its message. Returns the unpacked
 * response (caller frees with protobuf_c_message_free_unpacked) or NULL. */
static ProtobufCMessage *call(const char *method, const ProtobufCMessage *req,
                              const ProtobufCMessageDescriptor *out, const char *token, int *code,
                              char *msg, size_t msglen)
{
    char full[128];
    snprintf(full, sizeof full, "/charter.v1.Retrieval/%s", method);
    harness_response r;
    if (harness_rpc_msg(daemon_.ipc_url, full, token ? token : HARNESS_OPERATOR_TOKEN, req,
                        RPC_TIMEOUT, &r) != 0) {
        *code = -1;
        return NULL;
    }
    *code = r.code;
    if (msg)
        snprintf(msg, msglen, "%s", r.message ? r.message : "");
    ProtobufCMessage *m = NULL;
    if (r.code == 0)
        m = protobuf_c_message_unpack(out, NULL, r.payload_len, r.payload);
    harness_response_free(&r);
    return m;
}

static Charter__V1__ScopeFilter *filter(const char *field, char **values, size_t n)
{
    Charter__V1__ScopeFilter *f = calloc(1, sizeof *f);
    charter__v1__scope_filter__init(f);
    f->field = (char *)field;
    f->values = values;
    f->n_values = n;
    return f;
}

/* BindScope on ctx with up to two filters; returns the scope id (static buffer) or NULL with
 * *code and msg. */
static const char *bind(const char *ctx, Charter__V1__ScopeFilter **fs, size_t n, bool unrestricted,
                        uint32_t expires_ms, uint32_t budget, int *code, char *msg, size_t msglen)
{
    static char id[64];
    Charter__V1__BindScopeRequest rq = CHARTER__V1__BIND_SCOPE_REQUEST__INIT;
    rq.context_id = (char *)ctx;
    rq.principal = "alice";
    rq.task = "desk refit";
    rq.filters = fs;
    rq.n_filters = n;
    rq.unrestricted = unrestricted;
    rq.expires_in_ms = expires_ms;
    rq.max_follow_ups = budget;
    Charter__V1__RetrievalScope *s = (Charter__V1__RetrievalScope *)call(
        "BindScope", &rq.base, &charter__v1__retrieval_scope__descriptor, NULL, code, msg, msglen);
    if (!s)
        return NULL;
    snprintf(id, sizeof id, "%s", s->scope_id);
    protobuf_c_message_free_unpacked(&s->base, NULL);
    return id;
}

static Charter__V1__SearchResponse *search(const char *scope, const char *query, int *code,
                                           char *msg, size_t msglen)
{
    Charter__V1__SearchRequest rq = CHARTER__V1__SEARCH_REQUEST__INIT;
    rq.scope_id = (char *)scope;
    rq.query = (char *)query;
    rq.limit = 10;
    return (Charter__V1__SearchResponse *)call(
        "Search", &rq.base, &charter__v1__search_response__descriptor, NULL, code, msg, msglen);
}

static Charter__V1__SearchResponse *follow_up(const char *parent, const char *proposal, int *code,
                                              char *msg, size_t msglen)
{
    Charter__V1__FollowUpRequest rq = CHARTER__V1__FOLLOW_UP_REQUEST__INIT;
    rq.parent_search_id = (char *)parent;
    rq.proposal = (char *)proposal;
    return (Charter__V1__SearchResponse *)call(
        "FollowUp", &rq.base, &charter__v1__search_response__descriptor, NULL, code, msg, msglen);
}

static bool has_resource(const Charter__V1__SearchResponse *r, const char *res)
{
    for (size_t i = 0; r && i < r->n_results; i++)
        if (strcmp(r->results[i]->chunk->resource_id, res) == 0)
            return true;
    return false;
}

static void free_search(Charter__V1__SearchResponse *r)
{
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
}

static int open_ctx(const char *step, char *out, size_t n)
{
    Charter__V1__OpenStepRequest rq = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    rq.run_id = run_id;
    rq.step = (char *)step;
    Charter__V1__StepContext *ctx = NULL;
    charter_status st;
    if (charter_open_step(op, &rq, &ctx, &st) != 0)
        return -1;
    snprintf(out, n, "%s", ctx->context_id);
    charter__v1__step_context__free_unpacked(ctx, NULL);
    return 0;
}

/* Chunks of the reference workflow's resources, two tenants. */
static int ingest(void)
{
    static const char *rows[][4] = {
        {"ch_budget", "budget", "finance",
         "Approved ceiling for standing desks CEILING-48200 "
         "budget memo for the office refit"},
        {"ch_va", "vendor_a", "vendors", "Northwind standing desk NW-200 unit price 389 warranty"},
        {"ch_vb", "vendor_b", "vendors", "Brightline standing desk BL-Pro unit price 352 warranty"},
        {"ch_vc", "vendor_c", "vendors", "Cascade standing desk CF-Lift unit price 371 ceiling"},
    };
    Charter__V1__RetrievalChunk ch[4];
    Charter__V1__RetrievalChunk *p[4];
    for (int i = 0; i < 4; i++) {
        charter__v1__retrieval_chunk__init(&ch[i]);
        ch[i].chunk_id = (char *)rows[i][0];
        ch[i].resource_id = (char *)rows[i][1];
        ch[i].tenant = (char *)rows[i][2];
        ch[i].visibility = i == 0 ? "confidential" : "public";
        ch[i].revision = 1;
        ch[i].text = (char *)rows[i][3];
        p[i] = &ch[i];
    }
    Charter__V1__IngestChunksRequest rq = CHARTER__V1__INGEST_CHUNKS_REQUEST__INIT;
    rq.chunks = p;
    rq.n_chunks = 4;
    int code;
    char msg[256];
    ProtobufCMessage *m =
        call("IngestChunks", &rq.base, &charter__v1__ingest_chunks_response__descriptor, NULL,
             &code, msg, sizeof msg);
    if (!m) {
        fprintf(stderr, "IngestChunks: %d %s\n", code, msg);
        return -1;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

static int suite_init(void)
{
    harness_graph_name(graph, sizeof graph, "retrieval");
    store *st = harness_store_open(graph);
    store_close(st);
    harness_charterd_opts o = {.graph = graph};
    if (harness_charterd_start(&o, &daemon_) != 0 ||
        harness_client_open(daemon_.ipc_url, HARNESS_OPERATOR_TOKEN, RPC_TIMEOUT, &op) != 0)
        return -1;
    Charter__V1__CreateRunRequest rq = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    rq.mode = "external";
    Charter__V1__RunView *v = NULL;
    charter_status cst;
    if (charter_create_run(op, &rq, &v, &cst) != 0)
        return -1;
    snprintf(run_id, sizeof run_id, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    if (open_ctx("analyze", analyze_ctx, sizeof analyze_ctx) != 0 ||
        open_ctx("research", research_ctx, sizeof research_ctx) != 0)
        return -1;
    return ingest();
}

static int suite_clean(void)
{
    charter_client_close(op);
    int rc = daemon_.pid ? harness_charterd_stop(&daemon_) : 0;
    harness_graph_drop(graph);
    return rc;
}

/* --- tests ------------------------------------------------------------------------------------ */

static void test_scope_naming_a_resource_outside_the_grant_chain_is_widening(void)
{
    char *budget[] = {"budget"};
    Charter__V1__ScopeFilter *f = filter("resource_id", budget, 1);
    int code;
    char msg[512];
    /* The research step's grant (g_research) lacks the budget. */
    const char *id = bind(research_ctx, &f, 1, false, 0, 0, &code, msg, sizeof msg);
    CU_ASSERT_PTR_NULL(id);
    CU_ASSERT_EQUAL(code, 7);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "SCOPE_WIDENING"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "budget"));
    /* The analyze step's grant has it. */
    id = bind(analyze_ctx, &f, 1, false, 0, 0, &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL(id);
    free(f);
}

static void test_unrestricted_scope_searches_only_the_steps_resources(void)
{
    int code;
    char msg[512];
    CU_ASSERT_PTR_NULL(bind(research_ctx, NULL, 0, false, 0, 0, &code, msg, sizeof msg));
    CU_ASSERT_EQUAL(code, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "unrestricted"));
    const char *id = bind(research_ctx, NULL, 0, true, 0, 0, &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    char scope[64];
    snprintf(scope, sizeof scope, "%s", id);
    Charter__V1__SearchResponse *r = search(scope, "ceiling budget desk", &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(r->n_results >= 3);
    CU_ASSERT_FALSE(has_resource(r, "budget"));
    CU_ASSERT(has_resource(r, "vendor_c"));
    free_search(r);
}

static void test_empty_filter_list_denies_every_document(void)
{
    Charter__V1__ScopeFilter *f = filter("tenant", NULL, 0);
    int code;
    char msg[512];
    const char *id = bind(analyze_ctx, &f, 1, false, 0, 0, &code, msg, sizeof msg);
    free(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    char scope[64];
    snprintf(scope, sizeof scope, "%s", id);
    Charter__V1__SearchResponse *r = search(scope, "standing desk ceiling", &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->n_results, 0);
    CU_ASSERT_TRUE(r->denied_all);
    free_search(r);
}

static void test_query_syntax_is_searched_as_words_within_the_filters(void)
{
    char *vendors[] = {"vendors"};
    Charter__V1__ScopeFilter *f = filter("tenant", vendors, 1);
    int code;
    char msg[512];
    const char *id = bind(analyze_ctx, &f, 1, false, 0, 0, &code, msg, sizeof msg);
    free(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    char scope[64];
    snprintf(scope, sizeof scope, "%s", id);
    static const char *hostile[] = {
        "@tenant:{finance}",
        "ceiling | @resource_id:{budget}",
        "-@tenant:{vendors} ceiling",
        "~ceiling ~CEILING",
        "(ceiling) | (@visibility:{confidential})",
        "\"CEILING-48200\" budget",
        "*",
        "ceil* | budg*",
        "@tenant:{vendors|finance} memo",
        "}) | (@tenant:{finance}",
        "\\@tenant\\:{finance}",
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        Charter__V1__SearchResponse *r = search(scope, hostile[i], &code, msg, sizeof msg);
        CU_ASSERT_PTR_NOT_NULL(r);
        if (!r) {
            fprintf(stderr, "query %s: %d %s\n", hostile[i], code, msg);
            continue;
        }
        /* Nothing of tenant finance, whatever the syntax. */
        for (size_t k = 0; k < r->n_results; k++) {
            CU_ASSERT_STRING_EQUAL(r->results[k]->chunk->tenant, "vendors");
            CU_ASSERT_STRING_NOT_EQUAL(r->results[k]->chunk->resource_id, "budget");
        }
        free_search(r);
    }
    /* "*" has no word: it matches nothing rather than everything. */
    Charter__V1__SearchResponse *r = search(scope, "*", &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->n_results, 0);
    free_search(r);
    /* A word inside the syntax is still a word: "ceiling" finds vendor_c's chunk. */
    r = search(scope, "@tenant:{finance} ceiling", &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(has_resource(r, "vendor_c"));
    free_search(r);
}

static void test_proposal_with_scope_bearing_fields_is_rejected_before_search(void)
{
    char *vendors[] = {"vendors"};
    Charter__V1__ScopeFilter *f = filter("tenant", vendors, 1);
    int code;
    char msg[512];
    const char *id = bind(analyze_ctx, &f, 1, false, 0, 0, &code, msg, sizeof msg);
    free(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    char scope[64];
    snprintf(scope, sizeof scope, "%s", id);
    Charter__V1__SearchResponse *r = search(scope, "standing desk", &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    char parent[64];
    snprintf(parent, sizeof parent, "%s", r->search_id);
    free_search(r);
    static const char *bad[][2] = {
        {"{\"query\":\"ceiling\",\"tenant\":\"finance\"}", "tenant"},
        {"{\"query\":\"ceiling\",\"filters\":{\"tenant\":[\"finance\"]}}", "filters"},
        {"{\"query\":\"ceiling\",\"principal\":\"cfo\"}", "principal"},
        {"{\"query\":\"ceiling\",\"resource_ids\":[\"budget\"]}", "resource_ids"},
        {"{\"query\":\"ceiling\",\"acl\":[\"*\"]}", "acl"},
        {"{\"query\":\"ceiling\",\"scope_id\":\"s1\"}", "scope_id"},
        {"{\"query\":\"ceiling\",\"reason\":\"x\",\"Tenant-ID\":\"finance\"}", "Tenant-ID"},
        {"{\"query\":\"ceiling\",\"limit\":3,\"opts\":{\"acl\":1}}", "acl"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = follow_up(parent, bad[i][0], &code, msg, sizeof msg);
        CU_ASSERT_PTR_NULL(r);
        free_search(r);
        CU_ASSERT_EQUAL(code, 7);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, "SCOPE_FIELD_REJECTED"));
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, bad[i][1]));
    }
    /* Nothing was searched: a clean follow-up is the scope's first and is allowed. */
    r = follow_up(parent, "{\"query\":\"ceiling\",\"reason\":\"the quote mentions it\"}", &code,
                  msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_STRING_EQUAL(r->scope_id, scope);
    CU_ASSERT_STRING_EQUAL(r->parent_search_id, parent);
    CU_ASSERT_EQUAL(r->n_lineage, 2);
    CU_ASSERT_FALSE(has_resource(r, "budget"));
    CU_ASSERT(has_resource(r, "vendor_c"));
    free_search(r);
}

static void test_follow_up_budget_is_checked_before_dispatch(void)
{
    char *vendors[] = {"vendors"};
    Charter__V1__ScopeFilter *f = filter("tenant", vendors, 1);
    int code;
    char msg[512];
    const char *id = bind(analyze_ctx, &f, 1, false, 0, 2, &code, msg, sizeof msg);
    free(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    char scope[64];
    snprintf(scope, sizeof scope, "%s", id);
    Charter__V1__SearchResponse *r = search(scope, "desk", &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    char parent[64];
    snprintf(parent, sizeof parent, "%s", r->search_id);
    free_search(r);
    for (int i = 0; i < 2; i++) {
        r = follow_up(parent, "{\"query\":\"warranty\"}", &code, msg, sizeof msg);
        CU_ASSERT_PTR_NOT_NULL(r);
        if (r)
            snprintf(parent, sizeof parent, "%s", r->search_id);
        free_search(r);
    }
    r = follow_up(parent, "{\"query\":\"warranty\"}", &code, msg, sizeof msg);
    CU_ASSERT_PTR_NULL(r);
    free_search(r);
    CU_ASSERT_EQUAL(code, 9);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "FOLLOW_UP_BUDGET_EXHAUSTED"));
}

static void test_expired_scope_is_refused_at_dispatch(void)
{
    char *vendors[] = {"vendors"};
    Charter__V1__ScopeFilter *f = filter("tenant", vendors, 1);
    int code;
    char msg[512];
    /* 3 s to live: the search right after the bind must still find it live on a loaded
     * machine; the follow-up waits past it. */
    const char *id = bind(analyze_ctx, &f, 1, false, 3000, 0, &code, msg, sizeof msg);
    free(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    char scope[64];
    snprintf(scope, sizeof scope, "%s", id);
    Charter__V1__SearchResponse *r = search(scope, "desk", &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    char parent[64];
    snprintf(parent, sizeof parent, "%s", r->search_id);
    free_search(r);
    usleep(3200 * 1000); /* past the scope's 3 s, counted from the bind */
    r = follow_up(parent, "{\"query\":\"warranty\"}", &code, msg, sizeof msg);
    CU_ASSERT_PTR_NULL(r);
    free_search(r);
    CU_ASSERT_EQUAL(code, 9);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "SCOPE_EXPIRED"));
    r = search(scope, "desk", &code, msg, sizeof msg);
    CU_ASSERT_PTR_NULL(r);
    free_search(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "SCOPE_EXPIRED"));
}

static void test_narrow_scope_only_narrows(void)
{
    char *both[] = {"vendors", "finance"};
    char *fin[] = {"finance"};
    char *other[] = {"globex"};
    Charter__V1__ScopeFilter *f = filter("tenant", both, 2);
    int code;
    char msg[512];
    const char *id = bind(analyze_ctx, &f, 1, false, 0, 0, &code, msg, sizeof msg);
    free(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    char scope[64];
    snprintf(scope, sizeof scope, "%s", id);
    Charter__V1__NarrowScopeRequest rq = CHARTER__V1__NARROW_SCOPE_REQUEST__INIT;
    rq.scope_id = scope;
    Charter__V1__ScopeFilter *g = filter("tenant", other, 1);
    rq.filters = &g;
    rq.n_filters = 1;
    ProtobufCMessage *m = call("NarrowScope", &rq.base, &charter__v1__retrieval_scope__descriptor,
                               NULL, &code, msg, sizeof msg);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(code, 7);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "SCOPE_WIDENING"));
    g->values = fin;
    m = call("NarrowScope", &rq.base, &charter__v1__retrieval_scope__descriptor, NULL, &code, msg,
             sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    Charter__V1__RetrievalScope *s = (Charter__V1__RetrievalScope *)m;
    CU_ASSERT_STRING_EQUAL(s->parent_scope_id, scope);
    CU_ASSERT_EQUAL(s->n_filters, 1);
    protobuf_c_message_free_unpacked(m, NULL);
    /* A viewer may not narrow (trusted callers only). */
    m = call("NarrowScope", &rq.base, &charter__v1__retrieval_scope__descriptor,
             HARNESS_VIEWER_TOKEN, &code, msg, sizeof msg);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(code, 7);
    free(g);
}

static void test_checkpoint_resumes_only_for_its_binding_and_authorization(void)
{
    char *both[] = {"vendors", "finance"};
    char *vendors[] = {"vendors"};
    Charter__V1__ScopeFilter *f = filter("tenant", both, 2);
    int code;
    char msg[512];
    const char *id = bind(analyze_ctx, &f, 1, false, 0, 0, &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    Charter__V1__CheckpointScopeRequest cq = CHARTER__V1__CHECKPOINT_SCOPE_REQUEST__INIT;
    cq.scope_id = (char *)id;
    cq.principal = "alice";
    cq.task = "desk refit";
    Charter__V1__CheckpointScopeResponse *k = (Charter__V1__CheckpointScopeResponse *)call(
        "CheckpointScope", &cq.base, &charter__v1__checkpoint_scope_response__descriptor, NULL,
        &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    Charter__V1__ResumeScopeRequest rq = CHARTER__V1__RESUME_SCOPE_REQUEST__INIT;
    rq.checkpoint_id = k->checkpoint_id;
    rq.principal = "mallory";
    rq.task = "desk refit";
    rq.context_id = analyze_ctx;
    rq.authorized = &f;
    rq.n_authorized = 1;
    ProtobufCMessage *m = call("ResumeScope", &rq.base, &charter__v1__retrieval_scope__descriptor,
                               NULL, &code, msg, sizeof msg);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(code, 7);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "BINDING_MISMATCH"));
    rq.principal = "alice";
    rq.task = "another task";
    m = call("ResumeScope", &rq.base, &charter__v1__retrieval_scope__descriptor, NULL, &code, msg,
             sizeof msg);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "BINDING_MISMATCH"));
    /* The caller's authorization has shrunk to vendors: the saved scope is broader. */
    rq.task = "desk refit";
    Charter__V1__ScopeFilter *now = filter("tenant", vendors, 1);
    rq.authorized = &now;
    m = call("ResumeScope", &rq.base, &charter__v1__retrieval_scope__descriptor, NULL, &code, msg,
             sizeof msg);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(code, 7);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "SCOPE_WIDENING"));
    /* The same authorization: resumed, bound to the new context. */
    rq.authorized = &f;
    m = call("ResumeScope", &rq.base, &charter__v1__retrieval_scope__descriptor, NULL, &code, msg,
             sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_STRING_EQUAL(((Charter__V1__RetrievalScope *)m)->resumed_from, k->checkpoint_id);
    protobuf_c_message_free_unpacked(m, NULL);
    /* A context whose grant chain lacks the budget cannot hold a resource-bound saved scope. */
    free(now);
    free(f);
    protobuf_c_message_free_unpacked(&k->base, NULL);
}

static void test_retrieved_confidential_chunk_is_refused_to_a_public_recipient(void)
{
    char *fin[] = {"finance"};
    Charter__V1__ScopeFilter *f = filter("tenant", fin, 1);
    int code;
    char msg[512];
    const char *id = bind(analyze_ctx, &f, 1, false, 0, 0, &code, msg, sizeof msg);
    free(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    char scope[64];
    snprintf(scope, sizeof scope, "%s", id);
    Charter__V1__SearchResponse *r = search(scope, "ceiling budget", &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL_FATAL(r->n_results, 1);
    Charter__V1__Artifact *a = r->results[0]->artifact;
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_STRING_EQUAL(a->kind, "source");
    CU_ASSERT_EQUAL(a->conf, 2);
    CU_ASSERT_EQUAL(a->n_resources, 1);
    CU_ASSERT_STRING_EQUAL(a->resources[0], "budget");
    char src[64];
    snprintf(src, sizeof src, "%s", a->id);
    free_search(r);

    /* The lineage of the retrieved artifact names its search and scope. */
    Charter__V1__TraceRetrievalRequest tq = CHARTER__V1__TRACE_RETRIEVAL_REQUEST__INIT;
    tq.artifact_id = src;
    Charter__V1__TraceRetrievalResponse *t = (Charter__V1__TraceRetrievalResponse *)call(
        "TraceRetrieval", &tq.base, &charter__v1__trace_retrieval_response__descriptor, NULL, &code,
        msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->n_searches, 1);
    CU_ASSERT_EQUAL_FATAL(t->n_scopes, 1);
    CU_ASSERT_STRING_EQUAL(t->scopes[0]->scope_id, scope);
    protobuf_c_message_free_unpacked(&t->base, NULL);

    /* A summary derived from it inherits its confidentiality; public may not receive it. */
    Charter__V1__RecordOutputRequest oq = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    char *inputs[] = {src};
    oq.context_id = analyze_ctx;
    oq.input_ids = inputs;
    oq.n_input_ids = 1;
    oq.title = "Budget summary";
    oq.content = "The ceiling is 48,200 USD.";
    Charter__V1__RecordOutputResponse *o = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_record_output(op, &oq, &o, &st), 0);
    CU_ASSERT_EQUAL_FATAL(o->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_EQUAL(o->artifact->conf, 2);
    Charter__V1__DeliverRequest dq = CHARTER__V1__DELIVER_REQUEST__INIT;
    dq.context_id = analyze_ctx;
    dq.payload_id = o->artifact->id;
    dq.recipient = "public";
    dq.tool = "deliver_internal";
    dq.invocation_id = "retrieval-leak-1";
    Charter__V1__DeliverResponse *d = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_deliver(op, &dq, &d, &st), 0);
    CU_ASSERT_EQUAL(d->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_TRUE(
        harness_has_code(d->decision->codes, d->decision->n_codes, "CLEARANCE_EXCEEDED"));
    charter__v1__deliver_response__free_unpacked(d, NULL);
    /* The CFO (confidential clearance) may. */
    dq.recipient = "cfo";
    dq.invocation_id = "retrieval-cfo-1";
    CU_ASSERT_EQUAL_FATAL(charter_deliver(op, &dq, &d, &st), 0);
    CU_ASSERT_EQUAL(d->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    charter__v1__deliver_response__free_unpacked(d, NULL);
    charter__v1__record_output_response__free_unpacked(o, NULL);
}

static void test_viewer_cannot_bind_or_search(void)
{
    char *vendors[] = {"vendors"};
    Charter__V1__ScopeFilter *f = filter("tenant", vendors, 1);
    Charter__V1__BindScopeRequest rq = CHARTER__V1__BIND_SCOPE_REQUEST__INIT;
    rq.context_id = analyze_ctx;
    rq.principal = "alice";
    rq.filters = &f;
    rq.n_filters = 1;
    int code;
    char msg[256];
    ProtobufCMessage *m = call("BindScope", &rq.base, &charter__v1__retrieval_scope__descriptor,
                               HARNESS_VIEWER_TOKEN, &code, msg, sizeof msg);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(code, 7);
    free(f);
}

/* --- the pure rules of scope.c -----------------------------------------------------------------
 */

static void test_query_words_drop_every_operator(void)
{
    json_t *w = scope_query_words("@tenant:{finance} | -x ~Y (z) \"q\" * pre* \\esc");
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    char *text = json_dumps(w, JSON_COMPACT);
    CU_ASSERT_STRING_EQUAL(text,
                           "[\"tenant\",\"finance\",\"x\",\"y\",\"z\",\"q\",\"pre\",\"esc\"]");
    free(text);
    json_decref(w);
    w = scope_query_words("* | () ~ -");
    CU_ASSERT_EQUAL(json_array_size(w), 0);
    json_decref(w);
}

static void test_proposal_names_every_scope_bearing_field(void)
{
    json_t *doc = NULL;
    const char *q = NULL;
    unsigned limit = 0;
    char why[256];
    int rc = scope_read_proposal("{\"query\":\"a\",\"tenant\":\"x\",\"opts\":{\"ACL\":1}}", &doc,
                                 &q, &limit, why, sizeof why);
    CU_ASSERT_EQUAL(rc, STATUS_EREFUSED);
    CU_ASSERT_PTR_NULL(doc);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "SCOPE_FIELD_REJECTED"));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "tenant"));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "ACL"));
    rc = scope_read_proposal("{\"query\":\"a\",\"colour\":1}", &doc, &q, &limit, why, sizeof why);
    CU_ASSERT_EQUAL(rc, STATUS_EINVAL);
    rc = scope_read_proposal("[\"query\"]", &doc, &q, &limit, why, sizeof why);
    CU_ASSERT_EQUAL(rc, STATUS_EINVAL);
    rc = scope_read_proposal("{\"query\":\"desk\",\"limit\":3,\"reason\":\"r\"}", &doc, &q, &limit,
                             why, sizeof why);
    CU_ASSERT_EQUAL_FATAL(rc, STATUS_OK);
    CU_ASSERT_STRING_EQUAL(q, "desk");
    CU_ASSERT_EQUAL(limit, 3);
    json_decref(doc);
}

static void test_child_without_a_field_its_parent_filters_is_widening(void)
{
    char *a[] = {"acme"}, *ab[] = {"acme", "globex"};
    scope_filters parent = {0}, child = {0};
    int t = scope_field_index("tenant");
    CU_ASSERT_FATAL(t >= 0);
    parent.present[t] = true;
    parent.values[t] = (guard_strs){a, 1};
    char why[256];
    CU_ASSERT_EQUAL(scope_check_within(&child, &parent, "the parent", why, sizeof why),
                    STATUS_EREFUSED);
    child.present[t] = true;
    child.values[t] = (guard_strs){ab, 2};
    CU_ASSERT_EQUAL(scope_check_within(&child, &parent, "the parent", why, sizeof why),
                    STATUS_EREFUSED);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "globex"));
    child.values[t] = (guard_strs){a, 1};
    CU_ASSERT_EQUAL(scope_check_within(&child, &parent, "the parent", why, sizeof why), STATUS_OK);
    /* An empty list (deny-all) is within anything. */
    child.values[t] = (guard_strs){NULL, 0};
    CU_ASSERT_EQUAL(scope_check_within(&child, &parent, "the parent", why, sizeof why), STATUS_OK);
    scope_filters none = {0};
    CU_ASSERT_EQUAL(scope_check_bound(&none, why, sizeof why), STATUS_EINVAL);
    none.unrestricted = true;
    CU_ASSERT_EQUAL(scope_check_bound(&none, why, sizeof why), STATUS_OK);
}

/* --- registration ---------------------------------------------------------------------------- */

static int setup(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    if (!getenv("CHARTER_TEST_REDIS")) {
        fprintf(stderr,
                "test_retrieval: FAIL: CHARTER_TEST_REDIS is not set (run ./deploy/test.sh)\n");
        return 1;
    }
    return 0;
}

static const harness_test retrieval_tests[] = {
    {"scope naming a resource outside the grant chain is widening",
     test_scope_naming_a_resource_outside_the_grant_chain_is_widening},
    {"unrestricted scope searches only the step's resources",
     test_unrestricted_scope_searches_only_the_steps_resources},
    {"empty filter list denies every document", test_empty_filter_list_denies_every_document},
    {"query syntax is searched as words within the filters",
     test_query_syntax_is_searched_as_words_within_the_filters},
    {"proposal with scope-bearing fields is rejected before search",
     test_proposal_with_scope_bearing_fields_is_rejected_before_search},
    {"follow-up budget is checked before dispatch",
     test_follow_up_budget_is_checked_before_dispatch},
    {"expired scope is refused at dispatch", test_expired_scope_is_refused_at_dispatch},
    {"narrow scope only narrows", test_narrow_scope_only_narrows},
    {"checkpoint resumes only for its binding and authorization",
     test_checkpoint_resumes_only_for_its_binding_and_authorization},
    {"retrieved confidential chunk is refused to a public recipient",
     test_retrieved_confidential_chunk_is_refused_to_a_public_recipient},
    {"viewer cannot bind or search", test_viewer_cannot_bind_or_search},
};
static const harness_test scope_rule_tests[] = {
    {"query words drop every operator", test_query_words_drop_every_operator},
    {"proposal names every scope-bearing field", test_proposal_names_every_scope_bearing_field},
    {"child without a field its parent filters is widening",
     test_child_without_a_field_its_parent_filters_is_widening},
};
static const harness_suite suites[] = {
    {"retrieval", suite_init, suite_clean, HARNESS_TABLE(retrieval_tests)},
    {"scope rules", NULL, NULL, HARNESS_TABLE(scope_rule_tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .setup = setup};
