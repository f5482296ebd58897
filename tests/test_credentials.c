/*
 * test_credentials.c - stored credentials on a real charterd and the test Redis: the default
 * tenant's operator issues, lists and revokes them; the database holds only their SHA-256
 * (no byte of a secret is in raw Redis); a revoked credential fails on its next call; a host
 * credential acting through another actor's context is refused IDENTITY_MISMATCH, recorded as
 * a decision event with its witness (the reproduction: the Reporter's host sending the
 * Analyst's recommendation to the CFO through the Analyst's context) and replays from its
 * facts; what the method table's rows refuse before a handler runs (a host credential outside
 * the host-callable rows, --scripted-only's live runs and grant controls); every event carries
 * the caller that caused it, never a secret.
 */
#include <CUnit/Basic.h>
#include <hiredis/hiredis.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "charter.h"
#include "evidence/evlog.h"
#include "harness.h"
#include "suite.h"
#include "policy/evaluator.h"

static char graph[64];
static harness_charterd daemon_;
static charter_client *op;
static char issued_ids[8][17];
static size_t n_issued;

static charter_client *client_for(const char *token)
{
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = 20000;
    charter_client *c = NULL;
    return charter_client_open(daemon_.tcp_url, token, &o, &c) == 0 ? c : NULL;
}

/* Issues a credential of role (actors for a host) on the default tenant; the secret into
 * secret (128 bytes), the id into id (17 bytes). */
static int issue(const char *role, const char *actor, char *secret, char *id)
{
    Charter__V1__IssueCredentialRequest rq = CHARTER__V1__ISSUE_CREDENTIAL_REQUEST__INIT;
    char *actors[1] = {(char *)actor};
    rq.role = (char *)role;
    rq.actors = actor != NULL ? actors : NULL;
    rq.n_actors = actor != NULL ? 1 : 0;
    rq.label = "test";
    Charter__V1__IssuedCredential *r = NULL;
    charter_status st;
    if (charter_issue_credential(op, &rq, &r, &st) != 0) {
        fprintf(stderr, "\n  IssueCredential: %s\n", st.message);
        return -1;
    }
    snprintf(secret, 128, "%s", r->secret);
    snprintf(id, 17, "%s", r->credential->id);
    if (n_issued < 8)
        snprintf(issued_ids[n_issued++], 17, "%s", id);
    int ok = strcmp(r->credential->role, role) == 0 && strcmp(r->credential->tenant, graph) == 0 &&
             r->credential->revoked_at[0] == '\0';
    charter__v1__issued_credential__free_unpacked(r, NULL);
    return ok ? 0 : -1;
}

static redisContext *raw_redis(void)
{
    const char *url = harness_redis_url();
    redisContext *r = strncmp(url, "unix://", 7) == 0 ? redisConnectUnix(url + 7) : NULL;
    if (r != NULL && r->err) {
        redisFree(r);
        return NULL;
    }
    return r;
}

static int suite_init(void)
{
    harness_graph_name(graph, sizeof graph, "credentials");
    store *st = harness_store_open(graph);
    store_close(st);
    harness_charterd_opts o = {.graph = graph};
    if (harness_charterd_start(&o, &daemon_) != 0)
        return -1;
    op = client_for(HARNESS_OPERATOR_TOKEN);
    return op != NULL ? 0 : -1;
}

static int suite_clean(void)
{
    charter_client_close(op);
    int rc = harness_charterd_stop(&daemon_);
    harness_graph_drop(graph);
    redisContext *r = raw_redis();
    for (size_t i = 0; r != NULL && i < n_issued; i++)
        freeReplyObject(redisCommand(r, "DEL charter:{_tenants}:cred:%s", issued_ids[i]));
    if (r != NULL) {
        freeReplyObject(redisCommand(r, "DEL charter:{_tenants}:creds:%s", graph));
        redisFree(r);
    }
    return rc == 0 ? 0 : -1;
}

static void test_issue_list_and_revoke_and_a_revoked_credential_fails_its_next_call(void)
{
    char secret[128], id[17];
    CU_ASSERT_EQUAL_FATAL(issue("viewer", NULL, secret, id), 0);
    CU_ASSERT_EQUAL(strlen(secret), 85);
    CU_ASSERT_EQUAL(strncmp(secret + 4, id, 16), 0);
    charter_client *v = client_for(secret);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    charter_status st;
    /* Who the credential is, as charterd sees it. */
    Charter__V1__HealthRequest hq = CHARTER__V1__HEALTH_REQUEST__INIT;
    Charter__V1__HealthResponse *h = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_health(v, &hq, &h, &st), 0);
    CU_ASSERT_STRING_EQUAL(h->role, "viewer");
    CU_ASSERT_STRING_EQUAL(h->tenant, graph);
    char caller[64];
    snprintf(caller, sizeof caller, "credential:%s", id);
    CU_ASSERT_STRING_EQUAL(h->caller, caller);
    charter__v1__health_response__free_unpacked(h, NULL);
    Charter__V1__ListRunsRequest lr = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
    Charter__V1__ListRunsResponse *runs = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_list_runs(v, &lr, &runs, &st), 0);
    charter__v1__list_runs_response__free_unpacked(runs, NULL);
    /* A viewer neither writes nor manages credentials. */
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    Charter__V1__RunView *rv = NULL;
    CU_ASSERT_EQUAL(charter_create_run(v, &cr, &rv, &st), -CHARTER_PERMISSION_DENIED);
    Charter__V1__ListCredentialsRequest lq = CHARTER__V1__LIST_CREDENTIALS_REQUEST__INIT;
    Charter__V1__ListCredentialsResponse *l = NULL;
    CU_ASSERT_EQUAL(charter_list_credentials(v, &lq, &l, &st), -CHARTER_PERMISSION_DENIED);

    /* The list shows it, without any secret. */
    CU_ASSERT_EQUAL_FATAL(charter_list_credentials(op, &lq, &l, &st), 0);
    int found = 0;
    for (size_t i = 0; i < l->n_credentials; i++) {
        if (strcmp(l->credentials[i]->id, id) == 0) {
            found++;
            CU_ASSERT_STRING_EQUAL(l->credentials[i]->role, "viewer");
            CU_ASSERT_STRING_EQUAL(l->credentials[i]->revoked_at, "");
        }
    }
    CU_ASSERT_EQUAL(found, 1);
    charter__v1__list_credentials_response__free_unpacked(l, NULL);

    /* Bad requests. */
    Charter__V1__IssueCredentialRequest bad = CHARTER__V1__ISSUE_CREDENTIAL_REQUEST__INIT;
    Charter__V1__IssuedCredential *ic = NULL;
    bad.role = "root";
    CU_ASSERT_EQUAL(charter_issue_credential(op, &bad, &ic, &st), -CHARTER_INVALID_ARGUMENT);
    bad.role = "host";
    CU_ASSERT_EQUAL(charter_issue_credential(op, &bad, &ic, &st), -CHARTER_INVALID_ARGUMENT);

    /* Revoked: the very next call fails. */
    Charter__V1__RevokeCredentialRequest rq = CHARTER__V1__REVOKE_CREDENTIAL_REQUEST__INIT;
    rq.credential_id = id;
    Charter__V1__Credential *c = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_revoke_credential(op, &rq, &c, &st), 0);
    CU_ASSERT_STRING_NOT_EQUAL(c->revoked_at, "");
    charter__v1__credential__free_unpacked(c, NULL);
    CU_ASSERT_EQUAL(charter_list_runs(v, &lr, &runs, &st), -CHARTER_UNAUTHENTICATED);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "revoked"));
    rq.credential_id = "0000000000000000";
    CU_ASSERT_EQUAL(charter_revoke_credential(op, &rq, &c, &st), -CHARTER_NOT_FOUND);
    charter_client_close(v);

    /* The right id with another secret is no credential. */
    char forged[128];
    snprintf(forged, sizeof forged, "%.21s%064d", secret, 1);
    charter_client *f = client_for(forged);
    CU_ASSERT_EQUAL(charter_list_runs(f, &lr, &runs, &st), -CHARTER_UNAUTHENTICATED);
    charter_client_close(f);
}

static void test_the_database_holds_only_the_sha256_of_a_secret(void)
{
    char secret[128], id[17];
    CU_ASSERT_EQUAL_FATAL(issue("operator", NULL, secret, id), 0);
    redisContext *r = raw_redis();
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    /* Every key of the registry, every value: neither the token nor its secret part. */
    redisReply *keys = redisCommand(r, "KEYS charter:{_tenants}:*");
    CU_ASSERT_PTR_NOT_NULL_FATAL(keys);
    size_t checked = 0;
    for (size_t i = 0; i < keys->elements; i++) {
        const char *k = keys->element[i]->str;
        CU_ASSERT_PTR_NULL(strstr(k, secret + 21));
        redisReply *t = redisCommand(r, "TYPE %s", k);
        if (t != NULL && strcmp(t->str, "hash") == 0) {
            redisReply *h = redisCommand(r, "HGETALL %s", k);
            for (size_t j = 0; h != NULL && j < h->elements; j++) {
                CU_ASSERT_PTR_NULL(strstr(h->element[j]->str, secret + 21));
                checked++;
            }
            freeReplyObject(h);
        }
        freeReplyObject(t);
    }
    freeReplyObject(keys);
    CU_ASSERT(checked > 0);
    /* What is stored is the SHA-256 of the whole token. */
    unsigned char md[32];
    unsigned int n = 0;
    CU_ASSERT_EQUAL_FATAL(EVP_Digest(secret, strlen(secret), md, &n, EVP_sha256(), NULL), 1);
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    redisReply *hv = redisCommand(r, "HGET charter:{_tenants}:cred:%s hash", id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(hv);
    CU_ASSERT_EQUAL(hv->type, REDIS_REPLY_STRING);
    if (hv->type == REDIS_REPLY_STRING)
        CU_ASSERT_STRING_EQUAL(hv->str, hex);
    freeReplyObject(hv);
    redisFree(r);
}

/* The detail of the last event of kind in run (into out), or -1. */
static int last_event(const char *run, const char *kind, Charter__V1__Event *out_ev, char *detail,
                      char *witness, size_t n)
{
    Charter__V1__GetRunRequest gr = CHARTER__V1__GET_RUN_REQUEST__INIT;
    gr.run_id = (char *)run;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    if (charter_get_run(op, &gr, &v, &st) != 0)
        return -1;
    int rv = -1;
    for (size_t i = 0; i < v->n_events; i++) {
        if (strcmp(v->events[i]->kind, kind) == 0) {
            out_ev->outcome = v->events[i]->outcome;
            out_ev->n_codes = 0;
            for (size_t k = 0; k < v->events[i]->n_codes; k++)
                if (strcmp(v->events[i]->codes[k], "IDENTITY_MISMATCH") == 0)
                    out_ev->n_codes = 1;
            snprintf(detail, n, "%s", v->events[i]->detail);
            snprintf(witness, n, "%s", v->events[i]->witness);
            rv = 0;
        }
    }
    out_ev->seq = v->n_deliveries;
    charter__v1__run_view__free_unpacked(v, NULL);
    return rv;
}

static void test_the_reporters_host_cannot_deliver_through_the_analysts_context(void)
{
    char analyst_secret[128], analyst_id[17], reporter_secret[128], reporter_id[17];
    CU_ASSERT_EQUAL_FATAL(issue("host", "analyst", analyst_secret, analyst_id), 0);
    CU_ASSERT_EQUAL_FATAL(issue("host", "reporter", reporter_secret, reporter_id), 0);
    charter_client *analyst = client_for(analyst_secret);
    charter_client *reporter = client_for(reporter_secret);
    CU_ASSERT_PTR_NOT_NULL_FATAL(analyst);
    CU_ASSERT_PTR_NOT_NULL_FATAL(reporter);
    charter_status st;
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    Charter__V1__RunView *v = NULL;
    /* A host runs steps; it does not create runs. */
    CU_ASSERT_EQUAL(charter_create_run(analyst, &cr, &v, &st), -CHARTER_PERMISSION_DENIED);
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &cr, &v, &st), 0);
    char run[129];
    snprintf(run, sizeof run, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);

    /* The Analyst's host does its step: reads the budget, writes the recommendation. */
    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = run;
    os.step = "analyze";
    Charter__V1__StepContext *ctx = NULL;
    /* The Reporter's host cannot open the Analyst's step. */
    CU_ASSERT_EQUAL(charter_open_step(reporter, &os, &ctx, &st), -CHARTER_PERMISSION_DENIED);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "IDENTITY_MISMATCH"));
    CU_ASSERT_EQUAL_FATAL(charter_open_step(analyst, &os, &ctx, &st), 0);
    char context[129];
    snprintf(context, sizeof context, "%s", ctx->context_id);
    charter__v1__step_context__free_unpacked(ctx, NULL);
    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = context;
    rs.resource_id = "budget";
    Charter__V1__ReadSourceResponse *src = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_read_source(analyst, &rs, &src, &st), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src->artifact);
    /* A host sees the content its own actor read (it feeds its model). */
    CU_ASSERT_FALSE(src->artifact->redacted);
    char budget[129];
    snprintf(budget, sizeof budget, "%s", src->artifact->id);
    charter__v1__read_source_response__free_unpacked(src, NULL);
    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    char *inputs[1] = {budget};
    ro.context_id = context;
    ro.input_ids = inputs;
    ro.n_input_ids = 1;
    ro.title = "Internal recommendation";
    ro.content = "Recommendation: vendor_b, under CEILING-48200.";
    Charter__V1__RecordOutputResponse *rec = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_record_output(analyst, &ro, &rec, &st), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rec->artifact);
    char recommendation[129];
    snprintf(recommendation, sizeof recommendation, "%s", rec->artifact->id);
    charter__v1__record_output_response__free_unpacked(rec, NULL);

    /* The Reporter's host, holding the Analyst's context id, sends it to the CFO: refused. */
    Charter__V1__DeliverRequest dr = CHARTER__V1__DELIVER_REQUEST__INIT;
    dr.context_id = context;
    dr.payload_id = recommendation;
    dr.recipient = "cfo";
    dr.tool = "deliver_internal";
    dr.invocation_id = "inv-identity-1";
    Charter__V1__DeliverResponse *del = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_deliver(reporter, &dr, &del, &st), 0);
    CU_ASSERT_EQUAL(del->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_TRUE(
        harness_has_code(del->decision->codes, del->decision->n_codes, "IDENTITY_MISMATCH"));
    CU_ASSERT_PTR_NULL(del->delivery);
    char expect[256];
    snprintf(expect, sizeof expect,
             "context %s is owned by {analyst}; credential %s acts for {reporter}", context,
             reporter_id);
    CU_ASSERT_STRING_EQUAL(del->decision->witness, expect);
    charter__v1__deliver_response__free_unpacked(del, NULL);
    /* Recorded as a decision event with its witness and its caller; nothing delivered. */
    Charter__V1__Event ev = CHARTER__V1__EVENT__INIT;
    char detail[512], witness[512];
    CU_ASSERT_EQUAL_FATAL(last_event(run, "identity_checked", &ev, detail, witness, sizeof detail),
                          0);
    CU_ASSERT_EQUAL(ev.outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_EQUAL(ev.n_codes, 1);
    CU_ASSERT_STRING_EQUAL(witness, expect);
    char caller[64];
    snprintf(caller, sizeof caller, "credential:%s", reporter_id);
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, caller));
    CU_ASSERT_PTR_NULL(strstr(detail, reporter_secret + 21));
    CU_ASSERT_EQUAL(ev.seq, 0); /* deliveries of the run */
    /* The same through CheckInput, RecordOutput and ReadSource. */
    Charter__V1__CheckInputRequest ci = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    ci.context_id = context;
    ci.artifact_ids = inputs;
    ci.n_artifact_ids = 1;
    Charter__V1__CheckInputResponse *cir = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_check_input(reporter, &ci, &cir, &st), 0);
    CU_ASSERT_TRUE(
        harness_has_code(cir->decision->codes, cir->decision->n_codes, "IDENTITY_MISMATCH"));
    charter__v1__check_input_response__free_unpacked(cir, NULL);
    CU_ASSERT_EQUAL_FATAL(charter_record_output(reporter, &ro, &rec, &st), 0);
    CU_ASSERT_EQUAL(rec->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_PTR_NULL(rec->artifact);
    charter__v1__record_output_response__free_unpacked(rec, NULL);
    CU_ASSERT_EQUAL_FATAL(charter_read_source(reporter, &rs, &src, &st), 0);
    CU_ASSERT_EQUAL(src->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_PTR_NULL(src->artifact);
    charter__v1__read_source_response__free_unpacked(src, NULL);

    /* The Analyst's own host, same request: allowed, so the refusal was about identity. */
    CU_ASSERT_EQUAL_FATAL(charter_deliver(analyst, &dr, &del, &st), 0);
    CU_ASSERT_EQUAL(del->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    charter__v1__deliver_response__free_unpacked(del, NULL);
    CU_ASSERT_EQUAL_FATAL(last_event(run, "delivery_decided", &ev, detail, witness, sizeof detail),
                          0);
    snprintf(caller, sizeof caller, "credential:%s", analyst_id);
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, caller));
    CU_ASSERT_EQUAL(ev.seq, 1);
    charter_client_close(analyst);
    charter_client_close(reporter);
}

/* The seq of the last event of kind in run, or 0. */
static uint64_t event_seq_of(const char *run, const char *kind)
{
    Charter__V1__GetRunRequest gr = CHARTER__V1__GET_RUN_REQUEST__INIT;
    gr.run_id = (char *)run;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    if (charter_get_run(op, &gr, &v, &st) != 0)
        return 0;
    uint64_t seq = 0;
    for (size_t i = 0; i < v->n_events; i++)
        if (strcmp(v->events[i]->kind, kind) == 0)
            seq = v->events[i]->seq;
    charter__v1__run_view__free_unpacked(v, NULL);
    return seq;
}

/* RULE-HOST-IDENTITY: a host credential bound to the Reporter, acting through the Analyst's
 * context, is refused DENY IDENTITY_MISMATCH with its witness; the identity_checked event
 * keeps the facts it was decided from, and Evidence/ReplayDecision decides it again from them
 * alone: DENY, the same code and witness. The same recorded facts with the credential bound
 * to the Analyst replay as ALLOW, so the replay reads the facts rather than the verdict; and
 * a what-if in which the Analyst's step is the Reporter's lets the refused OpenStep through. */
static void test_a_host_identity_refusal_is_recorded_with_its_facts_and_replays_as_deny(void)
{
    char analyst_secret[128], analyst_id[17], reporter_secret[128], reporter_id[17];
    CU_ASSERT_EQUAL_FATAL(issue("host", "analyst", analyst_secret, analyst_id), 0);
    CU_ASSERT_EQUAL_FATAL(issue("host", "reporter", reporter_secret, reporter_id), 0);
    charter_client *analyst = client_for(analyst_secret);
    charter_client *reporter = client_for(reporter_secret);
    CU_ASSERT_PTR_NOT_NULL_FATAL(analyst);
    CU_ASSERT_PTR_NOT_NULL_FATAL(reporter);
    charter_status st;
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    Charter__V1__RunView *v = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &cr, &v, &st), 0);
    char run[129];
    snprintf(run, sizeof run, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = run;
    os.step = "analyze";
    Charter__V1__StepContext *ctx = NULL;
    /* The Reporter's host opening the Analyst's step: refused, and recorded with its facts. */
    CU_ASSERT_EQUAL(charter_open_step(reporter, &os, &ctx, &st), -CHARTER_PERMISSION_DENIED);
    char expect_step[256];
    snprintf(expect_step, sizeof expect_step,
             "IDENTITY_MISMATCH: step analyze is owned by {analyst}; credential %s acts for "
             "{reporter}",
             reporter_id);
    CU_ASSERT_STRING_EQUAL(st.message, expect_step);
    uint64_t step_seq = event_seq_of(run, "identity_checked");
    CU_ASSERT_FATAL(step_seq > 0);
    CU_ASSERT_EQUAL_FATAL(charter_open_step(analyst, &os, &ctx, &st), 0);
    char context[129];
    snprintf(context, sizeof context, "%s", ctx->context_id);
    charter__v1__step_context__free_unpacked(ctx, NULL);

    /* The Reporter's host reads the budget through the Analyst's context: refused. */
    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = context;
    rs.resource_id = "budget";
    Charter__V1__ReadSourceResponse *src = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_read_source(reporter, &rs, &src, &st), 0);
    CU_ASSERT_EQUAL(src->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_EQUAL_FATAL(src->decision->n_codes, 1);
    CU_ASSERT_STRING_EQUAL(src->decision->codes[0], "IDENTITY_MISMATCH");
    char expect[256];
    snprintf(expect, sizeof expect,
             "context %s is owned by {analyst}; credential %s acts for {reporter}", context,
             reporter_id);
    CU_ASSERT_STRING_EQUAL(src->decision->witness, expect);
    CU_ASSERT_PTR_NULL(src->artifact);
    charter__v1__read_source_response__free_unpacked(src, NULL);

    /* The event keeps its facts: the gate, the owners and the credential's actors. */
    uint64_t seq = event_seq_of(run, "identity_checked");
    CU_ASSERT_FATAL(seq > 0);
    redisContext *r = raw_redis();
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    redisReply *snap = redisCommand(r, "HGET charter:{%s}:event:%s:%llu snapshot", graph, run,
                                    (unsigned long long)seq);
    CU_ASSERT_PTR_NOT_NULL_FATAL(snap);
    CU_ASSERT_EQUAL_FATAL(snap->type, REDIS_REPLY_STRING);
    CU_ASSERT_PTR_NOT_NULL(strstr(snap->str, "\"gate\":\"identity\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(snap->str, "\"actors\":[\"reporter\"]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(snap->str, "\"owners\":[\"analyst\"]"));
    freeReplyObject(snap);
    redisFree(r);

    /* Replayed from those facts alone: DENY IDENTITY_MISMATCH, the same witness. */
    Charter__V1__ReplayDecisionRequest rq = CHARTER__V1__REPLAY_DECISION_REQUEST__INIT;
    rq.run_id = run;
    rq.seq = seq;
    Charter__V1__ReplayDecisionResponse *rp = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_replay_decision(op, &rq, &rp, &st), 0);
    CU_ASSERT_FALSE(rp->no_snapshot);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rp->replayed);
    CU_ASSERT_EQUAL(rp->recorded->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_EQUAL(rp->replayed->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_EQUAL_FATAL(rp->replayed->n_codes, 1);
    CU_ASSERT_STRING_EQUAL(rp->replayed->codes[0], "IDENTITY_MISMATCH");
    CU_ASSERT_STRING_EQUAL(rp->replayed->witness, expect);
    CU_ASSERT_TRUE(rp->matches);
    charter__v1__replay_decision_response__free_unpacked(rp, NULL);

    /* The same recorded facts, the credential bound to the Analyst: the replay allows. */
    store *sto = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(harness_redis_url(), graph, 5000, &sto), STATUS_OK);
    char seqtext[24];
    snprintf(seqtext, sizeof seqtext, "%llu", (unsigned long long)seq);
    json_t *event = NULL;
    CU_ASSERT_EQUAL_FATAL(q_get_event(sto, run, seqtext, &event), STATUS_OK);
    char *facts = NULL, why[224];
    CU_ASSERT_EQUAL_FATAL(
        evlog_snapshot_resolve(sto, json_string_value(json_object_get(event, "snapshot")), &facts,
                               why, sizeof why),
        STATUS_OK);
    json_t *facts_json = json_loads(facts, 0, NULL);
    free(facts);
    CU_ASSERT_PTR_NOT_NULL_FATAL(facts_json);
    CU_ASSERT_EQUAL(json_object_set_new(facts_json, "actors", json_pack("[s]", "analyst")), 0);
    char *allowed = json_dumps(facts_json, JSON_COMPACT);
    json_decref(facts_json);
    CU_ASSERT_PTR_NOT_NULL_FATAL(allowed);
    CU_ASSERT_EQUAL(json_object_set_new(event, "snapshot", json_string(allowed)), 0);
    free(allowed);
    evaluator_replay_result res;
    CU_ASSERT_EQUAL_FATAL(evaluator_replay(NULL, event, &res, why, sizeof why), STATUS_OK);
    CU_ASSERT_FALSE(res.no_snapshot);
    CU_ASSERT_EQUAL(res.replayed.outcome, GUARD_ALLOW);
    CU_ASSERT_EQUAL(res.replayed.codes, 0u);
    CU_ASSERT_FALSE(res.matches); /* recorded DENY, these facts ALLOW */
    evaluator_replay_result_free(&res);
    json_decref(event);
    store_close(sto);

    /* What if the analyze step were the Reporter's: the step it was refused now opens; the
     * context stays the Analyst's, so that refusal stands. */
    json_error_t jerr;
    json_t *wf = json_load_file(CHARTER_SOURCE_DIR "/deploy/workflows/procurement.json", 0, &jerr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wf);
    json_t *steps = json_object_get(wf, "steps");
    for (size_t i = 0; i < json_array_size(steps); i++) {
        json_t *one = json_array_get(steps, i);
        if (strcmp(json_string_value(json_object_get(one, "name")), "analyze") == 0)
            json_object_set_new(one, "actor", json_string("reporter"));
    }
    json_t *grants = json_object_get(wf, "grants");
    for (size_t i = 0; i < json_array_size(grants); i++) {
        json_t *one = json_array_get(grants, i);
        if (strcmp(json_string_value(json_object_get(one, "id")), "g_analyst") == 0)
            json_object_set_new(one, "grantee", json_string("reporter"));
    }
    char *candidate = json_dumps(wf, JSON_INDENT(2));
    json_decref(wf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(candidate);
    Charter__V1__WhatIfRequest wq = CHARTER__V1__WHAT_IF_REQUEST__INIT;
    wq.workflow.data = (uint8_t *)candidate;
    wq.workflow.len = strlen(candidate);
    wq.run_id = run;
    Charter__V1__WhatIfResponse *wr = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_what_if(op, &wq, &wr, &st), 0);
    free(candidate);
    CU_ASSERT_EQUAL(wr->examined, 2);
    CU_ASSERT_EQUAL(wr->no_snapshot, 0);
    CU_ASSERT_EQUAL_FATAL(wr->n_changes, 1);
    CU_ASSERT_EQUAL(wr->changes[0]->seq, step_seq);
    CU_ASSERT_STRING_EQUAL(wr->changes[0]->gate, "identity");
    CU_ASSERT_STRING_EQUAL(wr->changes[0]->step, "analyze");
    CU_ASSERT_STRING_EQUAL(wr->changes[0]->subject, reporter_id);
    CU_ASSERT_STRING_EQUAL(wr->changes[0]->change, "deny IDENTITY_MISMATCH -> allow");
    charter__v1__what_if_response__free_unpacked(wr, NULL);
    charter_client_close(analyst);
    charter_client_close(reporter);
}

/* RULE-CALL-HOST-METHODS. What dispatch refuses before a handler runs comes from the method
 * table's rows: a host credential calling a method whose row is not host-callable is refused
 * with the list of those that are (the Gate service's agent-facing methods), read from the
 * table. */
static void test_a_host_credential_is_refused_methods_its_row_does_not_open_to_hosts(void)
{
    char secret[128], id[17];
    CU_ASSERT_EQUAL_FATAL(issue("host", "analyst", secret, id), 0);
    charter_client *h = client_for(secret);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    static const char refusal[] = "a host credential may call only Runs/CompleteRun, "
                                  "Gate/OpenStep, ReadSource, ObserveSource, RecordOutput, "
                                  "CheckInput, Deliver and Invoke";
    charter_status st;
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    Charter__V1__RunView *v = NULL;
    CU_ASSERT_EQUAL(charter_create_run(h, &cr, &v, &st), -CHARTER_PERMISSION_DENIED);
    CU_ASSERT_STRING_EQUAL(st.message, refusal);
    /* Of the Gate service, but a viewer's method: not a host's either. */
    Charter__V1__TraceArtifactRequest tr = CHARTER__V1__TRACE_ARTIFACT_REQUEST__INIT;
    tr.artifact_id = "a1";
    Charter__V1__TraceArtifactResponse *t = NULL;
    CU_ASSERT_EQUAL(charter_trace_artifact(h, &tr, &t, &st), -CHARTER_PERMISSION_DENIED);
    CU_ASSERT_STRING_EQUAL(st.message, refusal);
    Charter__V1__RevokeGrantRequest rg = CHARTER__V1__REVOKE_GRANT_REQUEST__INIT;
    rg.grant_id = "g_reporter";
    Charter__V1__Grant *g = NULL;
    CU_ASSERT_EQUAL(charter_revoke_grant(h, &rg, &g, &st), -CHARTER_PERMISSION_DENIED);
    CU_ASSERT_STRING_EQUAL(st.message, refusal);
    /* A row open to all stays open to a host. */
    Charter__V1__HealthRequest hq = CHARTER__V1__HEALTH_REQUEST__INIT;
    Charter__V1__HealthResponse *hr = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_health(h, &hq, &hr, &st), 0);
    CU_ASSERT_STRING_EQUAL(hr->role, "host");
    charter__v1__health_response__free_unpacked(hr, NULL);
    charter_client_close(h);
}

/* RULE-CALL-SCRIPTED-ONLY: --scripted-only refuses, from the rows' scripted column, live runs
 * (CreateRun with mode live) and the grant controls (RevokeGrant, RestoreGrants), each
 * PERMISSION_DENIED with its words, after the role check; other runs and reads are served. A second
 * charterd on the same graph. */
static void test_scripted_only_refuses_live_runs_and_grant_controls_from_the_rows(void)
{
    static const char *const extra[] = {"--scripted-only"};
    harness_charterd demo;
    harness_charterd_opts o = {.graph = graph, .extra_args = extra, .n_extra = 1};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &demo), 0);
    charter_options opt;
    charter_options_init(&opt);
    opt.timeout_ms = 20000;
    charter_client *dop = NULL, *dview = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_client_open(demo.tcp_url, HARNESS_OPERATOR_TOKEN, &opt, &dop), 0);
    CU_ASSERT_EQUAL_FATAL(charter_client_open(demo.tcp_url, HARNESS_VIEWER_TOKEN, &opt, &dview), 0);
    charter_status st;
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "live";
    Charter__V1__RunView *v = NULL;
    CU_ASSERT_EQUAL(charter_create_run(dop, &cr, &v, &st), -CHARTER_PERMISSION_DENIED);
    CU_ASSERT_STRING_EQUAL(st.message, "mode: live runs are off (--scripted-only)");
    Charter__V1__RevokeGrantRequest rg = CHARTER__V1__REVOKE_GRANT_REQUEST__INIT;
    rg.grant_id = "g_reporter";
    Charter__V1__Grant *g = NULL;
    CU_ASSERT_EQUAL(charter_revoke_grant(dop, &rg, &g, &st), -CHARTER_PERMISSION_DENIED);
    CU_ASSERT_STRING_EQUAL(st.message, "grant controls are off (--scripted-only)");
    Charter__V1__RestoreGrantsRequest rr = CHARTER__V1__RESTORE_GRANTS_REQUEST__INIT;
    rr.grant_id = "g_reporter";
    Charter__V1__RestoreGrantsResponse *rres = NULL;
    CU_ASSERT_EQUAL(charter_restore_grants(dop, &rr, &rres, &st), -CHARTER_PERMISSION_DENIED);
    CU_ASSERT_STRING_EQUAL(st.message, "grant controls are off (--scripted-only)");
    /* The role is checked first: a viewer hears that it needs the operator token. */
    CU_ASSERT_EQUAL(charter_revoke_grant(dview, &rg, &g, &st), -CHARTER_PERMISSION_DENIED);
    CU_ASSERT_STRING_EQUAL(st.message, "this method needs the operator token");
    /* The grant is as it was, and other runs are served. */
    Charter__V1__ShowChainRequest sc = CHARTER__V1__SHOW_CHAIN_REQUEST__INIT;
    sc.grant_id = "g_reporter";
    Charter__V1__GrantChain *gc = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_show_chain(dview, &sc, &gc, &st), 0);
    CU_ASSERT_EQUAL(gc->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    charter__v1__grant_chain__free_unpacked(gc, NULL);
    cr.mode = "external";
    CU_ASSERT_EQUAL_FATAL(charter_create_run(dop, &cr, &v, &st), 0);
    CU_ASSERT_STRING_EQUAL(v->run->mode, "external");
    charter__v1__run_view__free_unpacked(v, NULL);
    charter_client_close(dop);
    charter_client_close(dview);
    CU_ASSERT_EQUAL(harness_charterd_stop(&demo), 0);
}

static void test_events_carry_the_environment_callers_name(void)
{
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    Charter__V1__RunView *v = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &cr, &v, &st), 0);
    CU_ASSERT_FATAL(v->n_events >= 1);
    CU_ASSERT_STRING_EQUAL(v->events[0]->kind, "run_created");
    CU_ASSERT_PTR_NOT_NULL(strstr(v->events[0]->detail, "caller env:operator"));
    CU_ASSERT_PTR_NULL(strstr(v->events[0]->detail, HARNESS_OPERATOR_TOKEN));
    charter__v1__run_view__free_unpacked(v, NULL);
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"issue, list and revoke; a revoked credential fails its next call",
     test_issue_list_and_revoke_and_a_revoked_credential_fails_its_next_call},
    {"the database holds only the SHA-256 of a secret",
     test_the_database_holds_only_the_sha256_of_a_secret},
    {"the Reporter's host cannot deliver through the Analyst's context",
     test_the_reporters_host_cannot_deliver_through_the_analysts_context},
    {"a host identity refusal is recorded with its facts and replays as DENY",
     test_a_host_identity_refusal_is_recorded_with_its_facts_and_replays_as_deny},
    {"a host credential is refused methods its row does not open to hosts",
     test_a_host_credential_is_refused_methods_its_row_does_not_open_to_hosts},
    {"--scripted-only refuses live runs and grant controls from the rows",
     test_scripted_only_refuses_live_runs_and_grant_controls_from_the_rows},
    {"events carry the environment caller's name", test_events_carry_the_environment_callers_name},
};
static const harness_suite suites[] = {
    {"credentials", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
