/*
 * test_tenants.c - one charterd serving many tenants, on the test Redis: only the admin token
 * creates and lists tenants; a bad tenant name, an unknown tenant and a credential of another
 * tenant are each refused with their own status and write nothing; nothing of tenant A is read
 * or written through tenant B's credential, whatever ids B crafts (checked through every
 * method that takes an id, with a digest of A's graph); each quota fires and names itself;
 * an executor thread runs a tenant's queued run; a tenant holding no workflow refuses a run at
 * creation saying what to apply, and a run whose workflow its tenant lacks is never reported
 * as a missing run. A graph that holds data (another charterd's default graph, on the same
 * Redis) is never taken as a tenant, and a tenant's graph is no charterd's default graph. A
 * caller without a credential of a tenant neither spends its calls_per_second nor learns
 * whether it exists, over NNG and HTTP alike.
 *
 * Tenant names carry the process id: the registry (charter:{_tenants}) is shared by every
 * test program on the same Redis.
 */
#include <CUnit/Basic.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"

#ifndef CHARTER_SOURCE_DIR
#error "CHARTER_SOURCE_DIR (the source tree's root) must be defined by the build"
#endif

#define ADMIN_TOKEN "test-admin-token-8d2b6f41c9e07a35"

static char graph[64], graph2[64];
static char tenant_a[64], tenant_b[64], tenant_q[64], tenant_r[64], tenant_w[64], tenant_f[64],
    tenant_c[64];
static char secret_a[128], secret_b[128], secret_q[128], secret_r[128], secret_w[128],
    secret_f[128], secret_c[128];
static char http_addr[64]; /* the test charterd's --http */
static harness_charterd daemon_;
static charter_client *admin, *op;
static char *workflow_def;
static char key_path[128];
static size_t workflow_len;

/* A client of the test charterd with token and (NULL: none) tenant metadata. */
static charter_client *client_for(const char *token, const char *tenant)
{
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = 20000;
    o.tenant = tenant;
    charter_client *c = NULL;
    if (charter_client_open(daemon_.tcp_url, token, &o, &c) != 0)
        return NULL;
    return c;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = malloc(1 << 20);
    size_t n = buf != NULL ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (buf != NULL)
        buf[n] = '\0';
    *len = n;
    return buf;
}

/* Creates tenant name with quotas through the admin client; its operator secret into secret. */
static int create_tenant(const char *name, uint64_t runs, uint64_t artifacts, uint32_t cps,
                         char *secret, size_t n)
{
    Charter__V1__CreateTenantRequest rq = CHARTER__V1__CREATE_TENANT_REQUEST__INIT;
    Charter__V1__TenantQuotas q = CHARTER__V1__TENANT_QUOTAS__INIT;
    q.max_runs = runs;
    q.max_artifacts = artifacts;
    q.calls_per_second = cps;
    rq.name = (char *)name;
    rq.quotas = &q;
    Charter__V1__CreateTenantResponse *r = NULL;
    charter_status st;
    if (charter_create_tenant(admin, &rq, &r, &st) != 0) {
        fprintf(stderr, "\n  CreateTenant %s: %s\n", name, st.message);
        return -1;
    }
    snprintf(secret, n, "%s", r->operator_credential->secret);
    int ok = strcmp(r->tenant->name, name) == 0 && r->tenant->quotas->max_runs == runs &&
             strcmp(r->operator_credential->credential->role, "operator") == 0 &&
             strcmp(r->operator_credential->credential->tenant, name) == 0;
    charter__v1__create_tenant_response__free_unpacked(r, NULL);
    return ok ? 0 : -1;
}

static int apply_workflow(charter_client *c)
{
    Charter__V1__ApplyWorkflowRequest rq = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    rq.definition.data = (uint8_t *)workflow_def;
    rq.definition.len = workflow_len;
    Charter__V1__WorkflowInfo *info = NULL;
    charter_status st;
    int rc = charter_apply_workflow(c, &rq, &info, &st);
    if (info != NULL)
        charter__v1__workflow_info__free_unpacked(info, NULL);
    return rc;
}

/* A connection to the test Redis (a unix socket), or NULL. */
static redisContext *redis_open(void)
{
    const char *url = harness_redis_url();
    redisContext *r = strncmp(url, "unix://", 7) == 0 ? redisConnectUnix(url + 7) : NULL;
    if (r != NULL && r->err) {
        redisFree(r);
        r = NULL;
    }
    return r;
}

/* Removes this program's tenants from the registry (their graphs are dropped apart). */
static void registry_forget(const char *const *names, size_t n)
{
    redisContext *r = redis_open();
    if (r == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        freeReplyObject(redisCommand(r, "SREM charter:{_tenants}:tenants %s", names[i]));
        freeReplyObject(redisCommand(r, "DEL charter:{_tenants}:tenant:%s", names[i]));
    }
    redisFree(r);
}

/* The number of keys matching pattern in the test Redis (a SCAN), or -1. */
static long redis_count(const char *pattern)
{
    redisContext *r = redis_open();
    if (r == NULL)
        return -1;
    long n = 0;
    char cursor[32] = "0";
    do {
        redisReply *rep = redisCommand(r, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) {
            freeReplyObject(rep);
            redisFree(r);
            return -1;
        }
        snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        n += (long)rep->element[1]->elements;
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);
    redisFree(r);
    return n;
}

static int suite_init(void)
{
    harness_graph_name(graph, sizeof graph, "tenants");
    snprintf(tenant_a, sizeof tenant_a, "ta_%d", (int)getpid());
    snprintf(tenant_b, sizeof tenant_b, "tb_%d", (int)getpid());
    snprintf(tenant_q, sizeof tenant_q, "tq_%d", (int)getpid());
    snprintf(tenant_r, sizeof tenant_r, "tr_%d", (int)getpid());
    snprintf(tenant_w, sizeof tenant_w, "tw_%d", (int)getpid());
    snprintf(tenant_f, sizeof tenant_f, "tf_%d", (int)getpid());
    snprintf(tenant_c, sizeof tenant_c, "tc_%d", (int)getpid());
    harness_graph_name(graph2, sizeof graph2, "tenants2");
    const char *names[] = {tenant_a, tenant_b, tenant_q, tenant_r,
                           tenant_w, tenant_f, tenant_c, graph2};
    for (size_t i = 0; i < 8; i++)
        harness_graph_drop(names[i]);
    registry_forget(names, 8);
    store *st = harness_store_open(graph);
    store_close(st);
    char path[512];
    snprintf(path, sizeof path, "%s/deploy/workflows/procurement.json", CHARTER_SOURCE_DIR);
    if ((workflow_def = read_file(path, &workflow_len)) == NULL)
        return -1;
    setenv("CHARTER_ADMIN_TOKEN", ADMIN_TOKEN, 1);
    /* Keyed, so receipts exist to be asked for across tenants. */
    snprintf(key_path, sizeof key_path, "/tmp/charter_tenants_%d.key", (int)getpid());
    FILE *kf = fopen(key_path, "w");
    if (kf == NULL || chmod(key_path, 0600) != 0 ||
        fprintf(kf, "%s\n", "5f1e0c9b7a6d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f") <
            0) {
        if (kf != NULL)
            fclose(kf);
        return -1;
    }
    fclose(kf);
    const char *extra[2] = {"--integrity-key", key_path};
    harness_charterd_opts o = {.graph = graph, .http = true, .extra_args = extra, .n_extra = 2};
    if (harness_charterd_start(&o, &daemon_) != 0)
        return -1;
    snprintf(http_addr, sizeof http_addr, "%s", daemon_.http_hostport);
    admin = client_for(ADMIN_TOKEN, NULL);
    op = client_for(HARNESS_OPERATOR_TOKEN, NULL);
    return admin != NULL && op != NULL ? 0 : -1;
}

static int suite_clean(void)
{
    charter_client_close(admin);
    charter_client_close(op);
    int rc = harness_charterd_stop(&daemon_);
    const char *names[] = {tenant_a, tenant_b, tenant_q, tenant_r,
                           tenant_w, tenant_f, tenant_c, graph2};
    for (size_t i = 0; i < 8; i++)
        harness_graph_drop(names[i]);
    registry_forget(names, 8);
    harness_graph_drop(graph);
    free(workflow_def);
    unlink(key_path);
    return rc == 0 ? 0 : -1;
}

/* --- admin -------------------------------------------------------------------------------- */

static void test_only_the_admin_token_creates_and_lists_tenants(void)
{
    Charter__V1__CreateTenantRequest rq = CHARTER__V1__CREATE_TENANT_REQUEST__INIT;
    rq.name = tenant_a;
    Charter__V1__CreateTenantResponse *r = NULL;
    charter_status st;
    /* The default tenant's operator is not an admin. */
    CU_ASSERT_EQUAL(charter_create_tenant(op, &rq, &r, &st), -CHARTER_PERMISSION_DENIED);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "admin token"));
    charter_client *none = client_for(NULL, NULL);
    CU_ASSERT_EQUAL(charter_create_tenant(none, &rq, &r, &st), -CHARTER_UNAUTHENTICATED);
    charter_client_close(none);

    CU_ASSERT_EQUAL_FATAL(create_tenant(tenant_a, 0, 0, 0, secret_a, sizeof secret_a), 0);
    CU_ASSERT_EQUAL_FATAL(create_tenant(tenant_b, 0, 0, 0, secret_b, sizeof secret_b), 0);
    CU_ASSERT_EQUAL(strncmp(secret_a, "chc_", 4), 0);
    CU_ASSERT_EQUAL(strlen(secret_a), 85);
    /* Again, or the default graph's own name: exists. */
    CU_ASSERT_EQUAL(charter_create_tenant(admin, &rq, &r, &st), -CHARTER_ALREADY_EXISTS);
    rq.name = graph;
    CU_ASSERT_EQUAL(charter_create_tenant(admin, &rq, &r, &st), -CHARTER_ALREADY_EXISTS);
    /* Hash-tag characters, reserved names, and the names of a folder and its parent (the
     * archive folder holds one folder per graph). */
    const char *bad[] = {"a{b}", "x}", "_tenants", "", "has space", "ü", ".", ".."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rq.name = (char *)bad[i];
        CU_ASSERT_EQUAL(charter_create_tenant(admin, &rq, &r, &st), -CHARTER_INVALID_ARGUMENT);
    }

    Charter__V1__ListTenantsRequest lq = CHARTER__V1__LIST_TENANTS_REQUEST__INIT;
    Charter__V1__ListTenantsResponse *l = NULL;
    CU_ASSERT_EQUAL(charter_list_tenants(op, &lq, &l, &st), -CHARTER_PERMISSION_DENIED);
    CU_ASSERT_EQUAL_FATAL(charter_list_tenants(admin, &lq, &l, &st), 0);
    CU_ASSERT_FATAL(l->n_tenants >= 3);
    CU_ASSERT_STRING_EQUAL(l->tenants[0]->name, graph);
    CU_ASSERT_TRUE(l->tenants[0]->implicit);
    int seen = 0;
    for (size_t i = 1; i < l->n_tenants; i++)
        seen += strcmp(l->tenants[i]->name, tenant_a) == 0 ||
                strcmp(l->tenants[i]->name, tenant_b) == 0;
    CU_ASSERT_EQUAL(seen, 2);
    charter__v1__list_tenants_response__free_unpacked(l, NULL);

    /* The admin manages tenants; it reads no tenant's graph data. */
    Charter__V1__ListRunsRequest lr = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
    Charter__V1__ListRunsResponse *runs = NULL;
    CU_ASSERT_EQUAL(charter_list_runs(admin, &lr, &runs, &st), -CHARTER_PERMISSION_DENIED);
}

/* --- bad input ---------------------------------------------------------------------------- */

static void test_bad_names_unknown_tenants_and_foreign_credentials_are_refused_writing_nothing(void)
{
    CU_ASSERT_FATAL(secret_a[0] != '\0');
    char before_a[65], before_b[65], after_a[65], after_b[65];
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(tenant_a, before_a), 0);
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(tenant_b, before_b), 0);
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    Charter__V1__RunView *v = NULL;
    charter_status st;
    struct {
        const char *token, *tenant;
        int code;
        const char *says;
    } cases[] = {
        {HARNESS_OPERATOR_TOKEN, "a{b}", CHARTER_INVALID_ARGUMENT, "tenant name"},
        {HARNESS_OPERATOR_TOKEN, "{x}", CHARTER_INVALID_ARGUMENT, "tenant name"},
        {HARNESS_OPERATOR_TOKEN, "_tenants", CHARTER_INVALID_ARGUMENT, "tenant name"},
        {secret_a, "a b", CHARTER_INVALID_ARGUMENT, "tenant name"},
        {HARNESS_OPERATOR_TOKEN, "nosuch_tenant_x", CHARTER_NOT_FOUND,
         "tenant nosuch_tenant_x not found"},
        {secret_a, "nosuch_tenant_x", CHARTER_NOT_FOUND, "tenant nosuch_tenant_x not found"},
        /* The environment tokens act for the default tenant only. */
        {HARNESS_OPERATOR_TOKEN, tenant_a, CHARTER_PERMISSION_DENIED, "default tenant"},
        /* A's credential naming B. */
        {secret_a, tenant_b, CHARTER_PERMISSION_DENIED, "another tenant"},
        {secret_b, tenant_a, CHARTER_PERMISSION_DENIED, "another tenant"},
        /* A's credential id with another secret. */
        {NULL, NULL, CHARTER_UNAUTHENTICATED, "invalid token"},
    };
    char forged[128];
    snprintf(forged, sizeof forged, "%.21s%064d", secret_a, 7);
    cases[9].token = forged;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        charter_client *c = client_for(cases[i].token, cases[i].tenant);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        int rc = charter_create_run(c, &cr, &v, &st);
        if (rc != -cases[i].code || strstr(st.message, cases[i].says) == NULL)
            fprintf(stderr, "\n  case %zu: %d %s\n", i, rc, st.message);
        CU_ASSERT_EQUAL(rc, -cases[i].code);
        CU_ASSERT_PTR_NOT_NULL(strstr(st.message, cases[i].says));
        charter_client_close(c);
    }
    CU_ASSERT_EQUAL(harness_graph_digest(tenant_a, after_a), 0);
    CU_ASSERT_EQUAL(harness_graph_digest(tenant_b, after_b), 0);
    CU_ASSERT_STRING_EQUAL(before_a, after_a);
    CU_ASSERT_STRING_EQUAL(before_b, after_b);
}

/* --- isolation ---------------------------------------------------------------------------- */

static void test_tenant_b_finds_nothing_of_tenant_a_through_every_method(void)
{
    charter_client *a = client_for(secret_a, NULL); /* the tenant is the credential's */
    charter_client *b = client_for(secret_b, tenant_b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL_FATAL(apply_workflow(a), 0);
    CU_ASSERT_EQUAL_FATAL(apply_workflow(b), 0);
    charter_status st;

    /* A: an external run with a context, a source artifact, a derived one and a delivery. */
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    cr.workflow = "procurement";
    Charter__V1__RunView *v = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(a, &cr, &v, &st), 0);
    char run[129];
    snprintf(run, sizeof run, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = run;
    os.step = "analyze";
    Charter__V1__StepContext *ctx = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_open_step(a, &os, &ctx, &st), 0);
    char context[129];
    snprintf(context, sizeof context, "%s", ctx->context_id);
    charter__v1__step_context__free_unpacked(ctx, NULL);
    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = context;
    rs.resource_id = "budget";
    Charter__V1__ReadSourceResponse *src = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_read_source(a, &rs, &src, &st), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src->artifact);
    char source[129];
    snprintf(source, sizeof source, "%s", src->artifact->id);
    charter__v1__read_source_response__free_unpacked(src, NULL);
    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    char *inputs[1] = {source};
    ro.context_id = context;
    ro.input_ids = inputs;
    ro.n_input_ids = 1;
    ro.title = "Internal recommendation";
    ro.content = "Recommendation under CEILING-48200.";
    Charter__V1__RecordOutputResponse *rec = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_record_output(a, &ro, &rec, &st), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rec->artifact);
    char derived[129];
    snprintf(derived, sizeof derived, "%s", rec->artifact->id);
    charter__v1__record_output_response__free_unpacked(rec, NULL);
    Charter__V1__DeliverRequest dr = CHARTER__V1__DELIVER_REQUEST__INIT;
    dr.context_id = context;
    dr.payload_id = derived;
    dr.recipient = "cfo";
    dr.tool = "deliver_internal";
    dr.invocation_id = "inv-a-1";
    Charter__V1__DeliverResponse *del = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_deliver(a, &dr, &del, &st), 0);
    CU_ASSERT_EQUAL(del->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    charter__v1__deliver_response__free_unpacked(del, NULL);

    /* The same ids through B: nothing found, nothing of A's changed. */
    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(tenant_a, before), 0);
    Charter__V1__GetRunRequest gr = CHARTER__V1__GET_RUN_REQUEST__INIT;
    gr.run_id = run;
    CU_ASSERT_EQUAL(charter_get_run(b, &gr, &v, &st), -CHARTER_NOT_FOUND);
    Charter__V1__WaitRunRequest wr = CHARTER__V1__WAIT_RUN_REQUEST__INIT;
    wr.run_id = run;
    wr.timeout_ms = 100;
    CU_ASSERT_EQUAL(charter_wait_run(b, &wr, &v, &st), -CHARTER_NOT_FOUND);
    CU_ASSERT_EQUAL(charter_open_step(b, &os, &ctx, &st), -CHARTER_NOT_FOUND);
    CU_ASSERT_EQUAL(charter_read_source(b, &rs, &src, &st), -CHARTER_NOT_FOUND);
    CU_ASSERT_EQUAL(charter_record_output(b, &ro, &rec, &st), -CHARTER_NOT_FOUND);
    Charter__V1__CheckInputRequest ci = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    ci.context_id = context;
    char *ids[1] = {derived};
    ci.artifact_ids = ids;
    ci.n_artifact_ids = 1;
    Charter__V1__CheckInputResponse *cir = NULL;
    CU_ASSERT_EQUAL(charter_check_input(b, &ci, &cir, &st), -CHARTER_NOT_FOUND);
    dr.invocation_id = "inv-b-1";
    CU_ASSERT_EQUAL(charter_deliver(b, &dr, &del, &st), -CHARTER_NOT_FOUND);
    Charter__V1__TraceArtifactRequest ta = CHARTER__V1__TRACE_ARTIFACT_REQUEST__INIT;
    ta.artifact_id = derived;
    Charter__V1__TraceArtifactResponse *tr = NULL;
    CU_ASSERT_EQUAL(charter_trace_artifact(b, &ta, &tr, &st), -CHARTER_NOT_FOUND);
    Charter__V1__GetReceiptRequest rq = CHARTER__V1__GET_RECEIPT_REQUEST__INIT;
    rq.run_id = run;
    rq.invocation_id = "inv-a-1";
    Charter__V1__Receipt *receipt = NULL;
    int grc = charter_get_receipt(b, &rq, &receipt, &st);
    if (grc != -CHARTER_NOT_FOUND)
        fprintf(stderr, "\n  GetReceipt: %d %s\n", grc, st.message);
    CU_ASSERT_EQUAL(grc, -CHARTER_NOT_FOUND);
    /* A gets it. */
    CU_ASSERT_EQUAL(charter_get_receipt(a, &rq, &receipt, &st), 0);
    if (receipt != NULL)
        charter__v1__receipt__free_unpacked(receipt, NULL);
    Charter__V1__AuditRunRequest ar = CHARTER__V1__AUDIT_RUN_REQUEST__INIT;
    ar.run_id = run;
    Charter__V1__AuditRunResponse *audit = NULL;
    CU_ASSERT_EQUAL(charter_audit_run(b, &ar, &audit, &st), -CHARTER_NOT_FOUND);
    Charter__V1__ReplayDecisionRequest rd = CHARTER__V1__REPLAY_DECISION_REQUEST__INIT;
    rd.run_id = run;
    rd.seq = 1;
    Charter__V1__ReplayDecisionResponse *replay = NULL;
    CU_ASSERT_EQUAL(charter_replay_decision(b, &rd, &replay, &st), -CHARTER_NOT_FOUND);
    Charter__V1__RecoverRunRequest rr = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    rr.run_id = run;
    Charter__V1__RecoverRunResponse *rec_run = NULL;
    CU_ASSERT_EQUAL(charter_recover_run(b, &rr, &rec_run, &st), -CHARTER_NOT_FOUND);
    Charter__V1__CancelRunRequest cn = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
    cn.run_id = run;
    Charter__V1__Run *cancelled = NULL;
    CU_ASSERT_EQUAL(charter_cancel_run(b, &cn, &cancelled, &st), -CHARTER_NOT_FOUND);
    /* Grants named alike live in each graph: B revoking its g_analyst leaves A's alone. */
    Charter__V1__RevokeGrantRequest rg = CHARTER__V1__REVOKE_GRANT_REQUEST__INIT;
    rg.grant_id = "g_analyst";
    Charter__V1__Grant *g = NULL;
    CU_ASSERT_EQUAL(charter_revoke_grant(b, &rg, &g, &st), 0);
    if (g != NULL)
        charter__v1__grant__free_unpacked(g, NULL);
    Charter__V1__ListRunsRequest lr = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
    Charter__V1__ListRunsResponse *runs = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_list_runs(b, &lr, &runs, &st), 0);
    CU_ASSERT_EQUAL(runs->n_runs, 0);
    charter__v1__list_runs_response__free_unpacked(runs, NULL);
    CU_ASSERT_EQUAL(harness_graph_digest(tenant_a, after), 0);
    CU_ASSERT_STRING_EQUAL(before, after);

    /* A still sees its run, and its grant unrevoked. */
    CU_ASSERT_EQUAL_FATAL(charter_get_run(a, &gr, &v, &st), 0);
    CU_ASSERT_STRING_EQUAL(v->run->id, run);
    CU_ASSERT_EQUAL(v->n_deliveries, 1);
    charter__v1__run_view__free_unpacked(v, NULL);
    Charter__V1__ShowChainRequest sc = CHARTER__V1__SHOW_CHAIN_REQUEST__INIT;
    sc.grant_id = "g_analyst";
    Charter__V1__GrantChain *chain = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_show_chain(a, &sc, &chain, &st), 0);
    CU_ASSERT_EQUAL(chain->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    charter__v1__grant_chain__free_unpacked(chain, NULL);
    /* And the default tenant's operator does not reach A either. */
    CU_ASSERT_EQUAL(charter_get_run(op, &gr, &v, &st), -CHARTER_NOT_FOUND);
    charter_client_close(a);
    charter_client_close(b);
}

/* --- quotas ------------------------------------------------------------------------------- */

/* RULE-CALL-QUOTA: each quota the method table's rows name fires and names itself. */
static void test_each_quota_fires_and_names_itself(void)
{
    CU_ASSERT_EQUAL_FATAL(create_tenant(tenant_q, 2, 1, 0, secret_q, sizeof secret_q), 0);
    CU_ASSERT_EQUAL_FATAL(create_tenant(tenant_r, 0, 0, 3, secret_r, sizeof secret_r), 0);
    charter_client *q = client_for(secret_q, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    CU_ASSERT_EQUAL_FATAL(apply_workflow(q), 0);
    charter_status st;
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    cr.workflow = "procurement";
    Charter__V1__RunView *v = NULL;
    char run[129] = "";
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL_FATAL(charter_create_run(q, &cr, &v, &st), 0);
        snprintf(run, sizeof run, "%s", v->run->id);
        charter__v1__run_view__free_unpacked(v, NULL);
    }
    CU_ASSERT_EQUAL(charter_create_run(q, &cr, &v, &st), -CHARTER_RESOURCE_EXHAUSTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "max_runs"));
    /* A refused call takes nothing: still refused, and still two runs. */
    CU_ASSERT_EQUAL(charter_create_run(q, &cr, &v, &st), -CHARTER_RESOURCE_EXHAUSTED);
    Charter__V1__ListRunsRequest lr = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
    Charter__V1__ListRunsResponse *runs = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_list_runs(q, &lr, &runs, &st), 0);
    CU_ASSERT_EQUAL(runs->n_runs, 2);
    charter__v1__list_runs_response__free_unpacked(runs, NULL);

    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = run;
    os.step = "research";
    Charter__V1__StepContext *ctx = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_open_step(q, &os, &ctx, &st), 0);
    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = ctx->context_id;
    rs.resource_id = "vendor_a";
    Charter__V1__ReadSourceResponse *src = NULL;
    CU_ASSERT_EQUAL(charter_read_source(q, &rs, &src, &st), 0);
    if (src != NULL)
        charter__v1__read_source_response__free_unpacked(src, NULL);
    rs.resource_id = "vendor_b";
    CU_ASSERT_EQUAL(charter_read_source(q, &rs, &src, &st), -CHARTER_RESOURCE_EXHAUSTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "max_artifacts"));
    charter__v1__step_context__free_unpacked(ctx, NULL);
    charter_client_close(q);

    /* calls_per_second 3: a burst of 10 calls gets at most 3 per second of the database's
     * clock (6 when it straddles a second), the rest RESOURCE_EXHAUSTED naming the quota. */
    charter_client *r = client_for(secret_r, tenant_r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    int ok = 0, refused = 0;
    for (int i = 0; i < 10; i++) {
        int rc = charter_list_runs(r, &lr, &runs, &st);
        if (rc == 0) {
            ok++;
            charter__v1__list_runs_response__free_unpacked(runs, NULL);
        } else if (rc == -CHARTER_RESOURCE_EXHAUSTED &&
                   strstr(st.message, "calls_per_second") != NULL) {
            refused++;
        }
    }
    CU_ASSERT(ok >= 3 && ok <= 6);
    CU_ASSERT_EQUAL(ok + refused, 10);
    charter_client_close(r);
}

/* --- graphs that hold data ---------------------------------------------------------------- */

/* How many of the tenants ListTenants (through admin client c) names name; -1 on failure. */
static int listed(charter_client *c, const char *name)
{
    Charter__V1__ListTenantsRequest lq = CHARTER__V1__LIST_TENANTS_REQUEST__INIT;
    Charter__V1__ListTenantsResponse *l = NULL;
    charter_status st;
    if (charter_list_tenants(c, &lq, &l, &st) != 0)
        return -1;
    int n = 0;
    for (size_t i = 0; i < l->n_tenants; i++)
        n += strcmp(l->tenants[i]->name, name) == 0;
    charter__v1__list_tenants_response__free_unpacked(l, NULL);
    return n;
}

/* The admin token of one charterd names a tenant like the default graph of another charterd
 * on the same Redis, which holds a run: ALREADY_EXISTS (the name is taken: its graph exists
 * with data, as when it names its own default graph), nothing written in that graph or the
 * registry. The admin token reaches no tenant's data through either charterd. */
static void test_a_graph_that_holds_data_is_not_taken_as_a_tenant(void)
{
    harness_charterd other;
    harness_charterd_opts o = {.graph = graph2};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &other), 0);
    charter_options copt;
    charter_options_init(&copt);
    copt.timeout_ms = 20000;
    charter_client *other_op = NULL, *other_admin = NULL;
    CU_ASSERT_EQUAL_FATAL(
        charter_client_open(other.tcp_url, HARNESS_OPERATOR_TOKEN, &copt, &other_op), 0);
    CU_ASSERT_EQUAL_FATAL(charter_client_open(other.tcp_url, ADMIN_TOKEN, &copt, &other_admin), 0);
    char run[129], status[32];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(other_op, "external", NULL, run, status, NULL), 0);

    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(graph2, before), 0);
    Charter__V1__CreateTenantRequest rq = CHARTER__V1__CREATE_TENANT_REQUEST__INIT;
    rq.name = graph2;
    Charter__V1__CreateTenantResponse *r = NULL;
    charter_status st;
    /* Through this charterd's admin (graph2 is not its default graph) and the other's. */
    int rc = charter_create_tenant(admin, &rq, &r, &st);
    if (rc != -CHARTER_ALREADY_EXISTS)
        fprintf(stderr, "\n  CreateTenant %s: %d %s\n", graph2, rc, st.message);
    CU_ASSERT_EQUAL(rc, -CHARTER_ALREADY_EXISTS);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "already holds data"));
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_EQUAL(charter_create_tenant(other_admin, &rq, &r, &st), -CHARTER_ALREADY_EXISTS);
    char key[128];
    snprintf(key, sizeof key, "charter:{_tenants}:tenant:%s", graph2);
    CU_ASSERT_EQUAL(redis_count(key), 0);
    CU_ASSERT_EQUAL(listed(admin, graph2), 0);
    CU_ASSERT_EQUAL(harness_graph_digest(graph2, after), 0);
    CU_ASSERT_STRING_EQUAL(before, after);

    /* The admin token acts on no tenant's data: not the other charterd's default graph, not a
     * created tenant's. */
    Charter__V1__ListRunsRequest lr = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
    Charter__V1__ListRunsResponse *runs = NULL;
    Charter__V1__RevokeGrantRequest rg = CHARTER__V1__REVOKE_GRANT_REQUEST__INIT;
    rg.grant_id = "g_analyst";
    Charter__V1__Grant *g = NULL;
    Charter__V1__GetRunRequest gr = CHARTER__V1__GET_RUN_REQUEST__INIT;
    gr.run_id = run;
    Charter__V1__RunView *v = NULL;
    charter_client *admin_a = client_for(ADMIN_TOKEN, tenant_a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(admin_a);
    charter_client *as_admin[] = {other_admin, admin, admin_a};
    for (size_t i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(charter_list_runs(as_admin[i], &lr, &runs, &st),
                        -CHARTER_PERMISSION_DENIED);
        CU_ASSERT_EQUAL(charter_get_run(as_admin[i], &gr, &v, &st), -CHARTER_PERMISSION_DENIED);
        CU_ASSERT_EQUAL(charter_revoke_grant(as_admin[i], &rg, &g, &st),
                        -CHARTER_PERMISSION_DENIED);
        CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "admin token"));
    }
    charter_client_close(admin_a);
    CU_ASSERT_EQUAL(harness_graph_digest(graph2, after), 0);
    CU_ASSERT_STRING_EQUAL(before, after);

    /* A registry entry named like the default graph (an older charterd could make one) is
     * listed once: as the implicit default. */
    redisContext *rc2 = redis_open();
    CU_ASSERT_PTR_NOT_NULL_FATAL(rc2);
    freeReplyObject(redisCommand(rc2, "SADD charter:{_tenants}:tenants %s", graph2));
    freeReplyObject(redisCommand(rc2,
                                 "HSET charter:{_tenants}:tenant:%s max_runs 0 max_artifacts 0 "
                                 "calls_per_second 0 created_at 1.000000 runs 0 artifacts 0",
                                 graph2));
    redisFree(rc2);
    CU_ASSERT_EQUAL(listed(other_admin, graph2), 1);
    const char *forget[] = {graph2};
    registry_forget(forget, 1);

    charter_client_close(other_op);
    charter_client_close(other_admin);
    CU_ASSERT_EQUAL(harness_charterd_stop(&other), 0);
}

/* A created tenant's graph, even before it holds anything, is refused as a charterd's default
 * graph: only the tenant's credentials reach it. */
static void test_a_tenants_graph_is_no_charterds_default_graph(void)
{
    CU_ASSERT_EQUAL_FATAL(create_tenant(tenant_c, 0, 0, 0, secret_c, sizeof secret_c), 0);
    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(tenant_c, before), 0);
    const char *args[] = {"--redis", harness_redis_url(), "--graph",
                          tenant_c,  "--listen",          "tcp://127.0.0.1:0"};
    const char *env[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    char out[2048];
    int status = harness_charterd_run(args, 6, env, 20000, out, sizeof out);
    if (status == 0 || strstr(out, "CreateTenant") == NULL)
        fprintf(stderr, "\n  charterd --graph %s: %d %s\n", tenant_c, status, out);
    CU_ASSERT_NOT_EQUAL(status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "CreateTenant"));
    CU_ASSERT_EQUAL(harness_graph_digest(tenant_c, after), 0);
    CU_ASSERT_STRING_EQUAL(before, after);
    /* Its operator still reaches it. */
    charter_client *c = client_for(secret_c, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    Charter__V1__ListRunsRequest lr = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
    Charter__V1__ListRunsResponse *runs = NULL;
    charter_status st;
    CU_ASSERT_EQUAL(charter_list_runs(c, &lr, &runs, &st), 0);
    if (runs != NULL)
        charter__v1__list_runs_response__free_unpacked(runs, NULL);
    charter_client_close(c);
}

/* --- callers without a credential of the tenant --------------------------------------------- */

/* code and message of one NNG call of method naming tenant named with token (NULL: none). */
static void answer_of(const char *token, const char *named, bool health, int *code, char msg[256])
{
    charter_client *c = client_for(token, named);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    charter_status st;
    if (health) {
        Charter__V1__HealthRequest hq = CHARTER__V1__HEALTH_REQUEST__INIT;
        Charter__V1__HealthResponse *h = NULL;
        *code = charter_health(c, &hq, &h, &st);
        if (h != NULL)
            charter__v1__health_response__free_unpacked(h, NULL);
    } else {
        Charter__V1__ListRunsRequest lr = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
        Charter__V1__ListRunsResponse *runs = NULL;
        *code = charter_list_runs(c, &lr, &runs, &st);
        if (runs != NULL)
            charter__v1__list_runs_response__free_unpacked(runs, NULL);
    }
    snprintf(msg, 256, "%s", *code != 0 ? st.message : "");
    charter_client_close(c);
}

/* The HTTP answer to path naming tenant named with token (NULL: none). */
static void http_answer_of(const char *path, const char *token, const char *named,
                           harness_http_reply *r)
{
    char auth[160], ten[96];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token != NULL ? token : "");
    snprintf(ten, sizeof ten, "Charter-Tenant: %s", named);
    const char *headers[2] = {ten, auth};
    CU_ASSERT_EQUAL_FATAL(
        harness_http_post(http_addr, path, headers, token != NULL ? 2 : 1, "{}", r), 0);
}

static void test_callers_without_a_credential_of_a_tenant_neither_spend_nor_probe_it(void)
{
    /* 20 calls per second: more than its operator makes below, far fewer than the flood. */
    CU_ASSERT_EQUAL_FATAL(create_tenant(tenant_f, 0, 0, 20, secret_f, sizeof secret_f), 0);
    char nosuch[64], bogus[128];
    snprintf(nosuch, sizeof nosuch, "nosuch_%d", (int)getpid());
    /* Well formed, unknown id; and tenant F's id with another secret. */
    snprintf(bogus, sizeof bogus, "chc_%016d_%064d", 42, 7);
    char forged[128];
    snprintf(forged, sizeof forged, "%.21s%064d", secret_f, 9);

    /* The same answer, code and message, whether the named tenant exists or not. */
    struct {
        const char *token;
        bool health;
    } probes[] = {{NULL, true}, {NULL, false}, {bogus, true}, {bogus, false}, {forged, false}};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        int code_f = 0, code_n = 0;
        char msg_f[256], msg_n[256];
        answer_of(probes[i].token, tenant_f, probes[i].health, &code_f, msg_f);
        answer_of(probes[i].token, nosuch, probes[i].health, &code_n, msg_n);
        if (code_f != code_n || strcmp(msg_f, msg_n) != 0 || code_f != -CHARTER_UNAUTHENTICATED)
            fprintf(stderr, "\n  probe %zu: existing %d \"%s\", unknown %d \"%s\"\n", i, code_f,
                    msg_f, code_n, msg_n);
        CU_ASSERT_EQUAL(code_f, -CHARTER_UNAUTHENTICATED);
        CU_ASSERT_EQUAL(code_f, code_n);
        CU_ASSERT_STRING_EQUAL(msg_f, msg_n);
    }
    const char *paths[] = {"/charter.v1.Health/Check", "/grpc.health.v1.Health/Check",
                           "/charter.v1.Runs/ListRuns"};
    for (size_t i = 0; i < 3; i++) {
        const char *tokens[] = {NULL, bogus};
        for (size_t t = 0; t < 2; t++) {
            harness_http_reply rf, rn;
            http_answer_of(paths[i], tokens[t], tenant_f, &rf);
            http_answer_of(paths[i], tokens[t], nosuch, &rn);
            if (rf.status != rn.status || strcmp(rf.body, rn.body) != 0 || rf.status != 401)
                fprintf(stderr, "\n  HTTP %s: existing %d %s, unknown %d %s\n", paths[i], rf.status,
                        rf.body, rn.status, rn.body);
            CU_ASSERT_EQUAL(rf.status, 401);
            CU_ASSERT_EQUAL(rf.status, rn.status);
            CU_ASSERT_STRING_EQUAL(rf.body, rn.body);
        }
    }

    /* A flood of such calls counts nothing against F's calls_per_second: no counter exists
     * before F's operator calls, and each of its calls after a flood succeeds. */
    char counters[128];
    snprintf(counters, sizeof counters, "charter:{_tenants}:cps:%s:*", tenant_f);
    charter_client *none = client_for(NULL, tenant_f);
    charter_client *fake = client_for(bogus, tenant_f);
    charter_client *forger = client_for(forged, tenant_f);
    charter_client *owner = client_for(secret_f, tenant_f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(none);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fake);
    CU_ASSERT_PTR_NOT_NULL_FATAL(forger);
    CU_ASSERT_PTR_NOT_NULL_FATAL(owner);
    Charter__V1__HealthRequest hq = CHARTER__V1__HEALTH_REQUEST__INIT;
    Charter__V1__HealthResponse *h = NULL;
    Charter__V1__ListRunsRequest lr = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
    Charter__V1__ListRunsResponse *runs = NULL;
    charter_status st;
    int refused = 0;
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 30; i++) {
            refused += charter_health(none, &hq, &h, &st) == -CHARTER_UNAUTHENTICATED;
            refused += charter_list_runs(none, &lr, &runs, &st) == -CHARTER_UNAUTHENTICATED;
            refused += charter_health(fake, &hq, &h, &st) == -CHARTER_UNAUTHENTICATED;
            refused += charter_list_runs(forger, &lr, &runs, &st) == -CHARTER_UNAUTHENTICATED;
        }
        if (round == 0)
            CU_ASSERT_EQUAL(redis_count(counters), 0);
        int rc = charter_list_runs(owner, &lr, &runs, &st);
        if (rc != 0)
            fprintf(stderr, "\n  round %d: F's operator: %d %s\n", round, rc, st.message);
        CU_ASSERT_EQUAL(rc, 0);
        if (runs != NULL) {
            charter__v1__list_runs_response__free_unpacked(runs, NULL);
            runs = NULL;
        }
    }
    CU_ASSERT_EQUAL(refused, 5 * 30 * 4);
    charter_client_close(none);
    charter_client_close(fake);
    charter_client_close(forger);
    charter_client_close(owner);
}

/* --- executors ---------------------------------------------------------------------------- */

static void test_an_executor_runs_a_tenants_scripted_run(void)
{
    charter_client *a = client_for(secret_a, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    /* The test above revoked nothing of A's; the reference run blocks at the handoff. */
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.workflow = "procurement";
    Charter__V1__RunView *v = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(a, &cr, &v, &st), 0);
    CU_ASSERT_STRING_EQUAL(v->run->status, "blocked");
    int delivered = 0;
    for (size_t i = 0; i < v->n_events; i++)
        delivered += strcmp(v->events[i]->kind, "delivery_decided") == 0 &&
                     v->events[i]->outcome == CHARTER__V1__OUTCOME__ALLOW;
    CU_ASSERT_EQUAL(delivered, 1);
    charter__v1__run_view__free_unpacked(v, NULL);
    charter_client_close(a);
}

/* --- runs of a tenant that holds no workflow --------------------------------------------- */

/* CreateRun through c with mode and workflow (NULL: none): 0, or -code with st's message. */
static int create_run_of(charter_client *c, const char *mode, const char *workflow, char run[129],
                         charter_status *st)
{
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = (char *)mode;
    cr.workflow = (char *)workflow;
    Charter__V1__RunView *v = NULL;
    int rc = charter_create_run(c, &cr, &v, st);
    if (rc == 0) {
        snprintf(run, 129, "%s", v->run->id);
        charter__v1__run_view__free_unpacked(v, NULL);
    }
    return rc;
}

/* The version of the startup workflow (the built-in procurement one), as the default graph
 * holds it, into version. */
static int startup_version(char version[65])
{
    Charter__V1__GetWorkflowRequest rq = CHARTER__V1__GET_WORKFLOW_REQUEST__INIT;
    rq.workflow = "procurement";
    Charter__V1__WorkflowDefinition *d = NULL;
    charter_status st;
    if (charter_get_workflow(op, &rq, &d, &st) != 0)
        return -1;
    snprintf(version, 65, "%s", d->info->version);
    charter__v1__workflow_definition__free_unpacked(d, NULL);
    return strlen(version) == 64 ? 0 : -1;
}

/* A new tenant holds no workflow, not even charterd's startup one (applied to the default
 * graph only): a run of it could not be driven (its steps' actors, grants and resources are
 * not in the tenant's graph), so CreateRun refuses it, names what is missing and says how to
 * apply it, and writes nothing: FAILED_PRECONDITION when no workflow is named (the startup
 * one is implied), NOT_FOUND for one the call names. A version this charterd has loaded for
 * another graph is not the tenant's either. */
static void test_a_tenant_holding_no_workflow_refuses_a_run_saying_to_apply_one(void)
{
    CU_ASSERT_EQUAL_FATAL(create_tenant(tenant_w, 0, 0, 0, secret_w, sizeof secret_w), 0);
    charter_client *w = client_for(secret_w, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    char version[65], before[65], after[65], run[129], want[512];
    CU_ASSERT_EQUAL_FATAL(startup_version(version), 0);
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(tenant_w, before), 0);
    charter_status st;
    /* No workflow named: the startup workflow, which the tenant does not hold. */
    snprintf(want, sizeof want,
             "tenant %s holds no workflow named procurement (charterd's startup workflow, "
             "version %.12s): apply it with `charter workflow apply FILE` first, or name one the "
             "tenant holds",
             tenant_w, version);
    const char *modes[] = {"external", "scripted"};
    for (size_t i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(create_run_of(w, modes[i], NULL, run, &st), -CHARTER_FAILED_PRECONDITION);
        CU_ASSERT_STRING_EQUAL(st.message, want);
    }
    /* Named, by name or by the version charterd runs the default graph with, or unknown. */
    const char *named[][2] = {
        {"procurement", "named procurement"}, {version, NULL}, {"nosuch", "named nosuch"}};
    for (size_t i = 0; i < 3; i++) {
        char what[128];
        snprintf(what, sizeof what, "%s", named[i][1] ? named[i][1] : "");
        if (named[i][1] == NULL)
            snprintf(what, sizeof what, "version %s", version);
        snprintf(want, sizeof want,
                 "tenant %s holds no workflow %s: apply one with `charter workflow apply FILE` "
                 "first",
                 tenant_w, what);
        CU_ASSERT_EQUAL(create_run_of(w, "external", named[i][0], run, &st), -CHARTER_NOT_FOUND);
        CU_ASSERT_STRING_EQUAL(st.message, want);
    }
    CU_ASSERT_EQUAL(harness_graph_digest(tenant_w, after), 0);
    CU_ASSERT_STRING_EQUAL(before, after);
    /* The default graph holds its startup workflow: a run of it is created as ever, and a
     * workflow it does not hold is refused the same way. */
    CU_ASSERT_EQUAL(create_run_of(op, "external", NULL, run, &st), 0);
    snprintf(want, sizeof want,
             "tenant %s holds no workflow named nosuch: apply one with `charter workflow apply "
             "FILE` first",
             graph);
    CU_ASSERT_EQUAL(create_run_of(op, "external", "nosuch", run, &st), -CHARTER_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(st.message, want);
    charter_client_close(w);
}

/* A run that names a workflow its tenant does not hold (as CreateRun made them before it
 * checked: written here as such a run is stored) exists: GetRun finds it, and OpenStep says
 * the tenant lacks the step's actor because the workflow was never applied to it, never that
 * the run is not found. Once the tenant applies the workflow, as its README example does
 * first, a new run without a workflow named is created and driven. */
static void test_open_step_says_the_tenant_lacks_the_workflow_not_that_the_run_is_missing(void)
{
    CU_ASSERT_FATAL(secret_w[0] != '\0');
    charter_client *w = client_for(secret_w, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    char version[65];
    CU_ASSERT_EQUAL_FATAL(startup_version(version), 0);
    const char *args[2] = {"r00000000000000aa", version};
    CU_ASSERT_EQUAL_FATAL(
        harness_graph_eval(tenant_w,
                           "redis.call('HSET', KEYS[1] .. ':run:' .. ARGV[1], 'id', ARGV[1], "
                           "'task', 'earlier run', 'mode', 'external', 'status', 'created', "
                           "'seq', 0, 'workflow', ARGV[2], 'created_at', "
                           "'2026-01-01T00:00:00.000Z') "
                           "redis.call('ZADD', KEYS[1] .. ':runs', 1, ARGV[1]) return 1",
                           args, 2, NULL),
        0);
    charter_status st;
    Charter__V1__GetRunRequest gr = CHARTER__V1__GET_RUN_REQUEST__INIT;
    gr.run_id = "r00000000000000aa";
    Charter__V1__RunView *v = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(w, &gr, &v, &st), 0);
    charter__v1__run_view__free_unpacked(v, NULL);
    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = "r00000000000000aa";
    os.step = "research";
    Charter__V1__StepContext *ctx = NULL;
    char want[512];
    snprintf(want, sizeof want,
             "tenant %s does not hold actor researcher of step research: run r00000000000000aa "
             "follows workflow procurement (version %.12s), which was not applied to it; apply "
             "it with `charter workflow apply FILE`",
             tenant_w, version);
    CU_ASSERT_EQUAL(charter_open_step(w, &os, &ctx, &st), -CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_STRING_EQUAL(st.message, want);

    /* charter workflow apply deploy/workflows/procurement.json, then charter run. */
    CU_ASSERT_EQUAL_FATAL(apply_workflow(w), 0);
    char run[129];
    CU_ASSERT_EQUAL_FATAL(create_run_of(w, "external", NULL, run, &st), 0);
    os.run_id = run;
    CU_ASSERT_EQUAL_FATAL(charter_open_step(w, &os, &ctx, &st), 0);
    CU_ASSERT_STRING_EQUAL(ctx->actor, "researcher");
    charter__v1__step_context__free_unpacked(ctx, NULL);
    charter_client_close(w);
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"only the admin token creates and lists tenants",
     test_only_the_admin_token_creates_and_lists_tenants},
    {"bad names, unknown tenants and foreign credentials are refused writing nothing",
     test_bad_names_unknown_tenants_and_foreign_credentials_are_refused_writing_nothing},
    {"tenant B finds nothing of tenant A through every method",
     test_tenant_b_finds_nothing_of_tenant_a_through_every_method},
    {"each quota fires and names itself", test_each_quota_fires_and_names_itself},
    {"an executor runs a tenant's scripted run", test_an_executor_runs_a_tenants_scripted_run},
    {"a tenant holding no workflow refuses a run, saying to apply one",
     test_a_tenant_holding_no_workflow_refuses_a_run_saying_to_apply_one},
    {"OpenStep says the tenant lacks the workflow, not that the run is missing",
     test_open_step_says_the_tenant_lacks_the_workflow_not_that_the_run_is_missing},
    {"a graph that holds data is not taken as a tenant",
     test_a_graph_that_holds_data_is_not_taken_as_a_tenant},
    {"a tenant's graph is no charterd's default graph",
     test_a_tenants_graph_is_no_charterds_default_graph},
    {"callers without a credential of a tenant neither spend nor probe it",
     test_callers_without_a_credential_of_a_tenant_neither_spend_nor_probe_it},
};
static const harness_suite suites[] = {
    {"tenants", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
