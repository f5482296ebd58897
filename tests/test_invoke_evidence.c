/*
 * test_invoke_evidence.c - the evidence of tool calls (Gate/Invoke) against a real charterd
 * started with --integrity-key and --signing-key on the test Redis, under
 * deploy/workflows/payments.json: a committed effect's signed receipt names the tool, the
 * invocation ID, the arguments' digest and their lineage summaries and verifies offline with
 * only the public key; an audit names an invoke_decided or source_observed event, a receipt or
 * an effect's arguments altered in Redis; what-if decides recorded invocations under a candidate's
 * argument roles, destination classes and tool declarations.
 */
#include <CUnit/Basic.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"

#ifndef CHARTER_SOURCE_DIR
#error "CHARTER_SOURCE_DIR (the source tree's root) must be defined by the build"
#endif

#define PAYMENTS CHARTER_SOURCE_DIR "/deploy/workflows/payments.json"
#define IBAN_BILL "DE89370400440532013000"
#define BILL                                                                                       \
    "Stadtwerke Musterstadt, electricity bill INV-7731. Amount due: 84.20 EUR. Pay to "            \
    "IBAN " IBAN_BILL ". Questions: billing@stadtwerke.example; your account manager: "            \
    "ann@corp.example"
#define TRANSACTIONS "2026-03-01 -12.00 EUR Coffee\n2026-03-02 -1.00 EUR Bakery"

static char tmpdir[] = "/tmp/charter-invoke-evidence-XXXXXX";
static char key_path[256], sign_path[256], pub_path[256];
static char graph[64];
static harness_charterd daemon_;
static charter_client *op;
static char run_id[129], ctx[129], bill[129], txs[129];

/* ---- calls ------------------------------------------------------------------------------- */

static int apply_definition(const char *bytes)
{
    Charter__V1__ApplyWorkflowRequest req = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    req.definition.data = (uint8_t *)bytes;
    req.definition.len = strlen(bytes);
    Charter__V1__WorkflowInfo *info = NULL;
    charter_status st;
    int rc = charter_apply_workflow(op, &req, &info, &st);
    if (rc != 0)
        fprintf(stderr, "ApplyWorkflow: %s\n", st.message);
    else
        charter__v1__workflow_info__free_unpacked(info, NULL);
    return rc;
}

static int observe_ok(const char *resource, const char *content, char id[129])
{
    Charter__V1__ObserveSourceRequest req = CHARTER__V1__OBSERVE_SOURCE_REQUEST__INIT;
    req.context_id = ctx;
    req.resource_id = (char *)resource;
    req.content = (char *)content;
    req.locator = "file:///bills/1";
    Charter__V1__ObserveSourceResponse *r = NULL;
    charter_status st;
    if (charter_observe_source(op, &req, &r, &st) != 0)
        return -1;
    int ok = r->decision->outcome == CHARTER__V1__OUTCOME__ALLOW && r->artifact != NULL;
    if (ok)
        snprintf(id, 129, "%s", r->artifact->id);
    charter__v1__observe_source_response__free_unpacked(r, NULL);
    return ok ? 0 : -1;
}

/* An argument: value quoted from artifact quote, or from the run's task when quote is NULL. */
typedef struct {
    const char *name, *value, *quote;
} arg_spec;

/* Invoke; the decision's outcome (-1 when the call failed). */
static int invoke(const char *tool, const char *inv, const arg_spec *args, size_t n)
{
    Charter__V1__InvokeArgument a[4], *ap[4];
    Charter__V1__InvokeRequest req = CHARTER__V1__INVOKE_REQUEST__INIT;
    for (size_t i = 0; i < n; i++) {
        charter__v1__invoke_argument__init(&a[i]);
        a[i].name = (char *)args[i].name;
        a[i].value = (char *)args[i].value;
        a[i].from_task = args[i].quote == NULL;
        a[i].quoted_from = (char *)(args[i].quote ? args[i].quote : "");
        ap[i] = &a[i];
    }
    req.context_id = ctx;
    req.tool = (char *)tool;
    req.invocation_id = (char *)inv;
    req.arguments = ap;
    req.n_arguments = n;
    Charter__V1__InvokeResponse *r = NULL;
    charter_status st;
    if (charter_invoke(op, &req, &r, &st) != 0) {
        fprintf(stderr, "\n    Invoke %s: %s\n", inv, st.message);
        return -1;
    }
    int outcome = r->decision->outcome;
    charter__v1__invoke_response__free_unpacked(r, NULL);
    return outcome;
}

/* ---- fixture ------------------------------------------------------------------------------ */

static int suite_init(void)
{
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(key_path, sizeof key_path, "%s/integrity.key", tmpdir);
    snprintf(sign_path, sizeof sign_path, "%s/sign.pem", tmpdir);
    snprintf(pub_path, sizeof pub_path, "%s/pub.pem", tmpdir);
    if (harness_sh("umask 077 && openssl rand -hex 32 > %s", key_path) != 0 ||
        harness_sh("umask 077 && openssl genpkey -algorithm ed25519 -out %s 2>/dev/null",
                   sign_path) != 0 ||
        harness_sh("openssl pkey -in %s -pubout -out %s 2>/dev/null", sign_path, pub_path) != 0)
        return -1;
    harness_graph_name(graph, sizeof graph, "invokeev");
    store_close(harness_store_open(graph));
    const char *extra[4] = {"--integrity-key", key_path, "--signing-key", sign_path};
    harness_charterd_opts o = {.graph = graph, .extra_args = extra, .n_extra = 4};
    char *bytes = harness_slurp(PAYMENTS);
    int rc =
        bytes != NULL && harness_charterd_start(&o, &daemon_) == 0 &&
                harness_client_open(daemon_.tcp_url, HARNESS_OPERATOR_TOKEN, 30000, &op) == 0 &&
                apply_definition(bytes) == 0 &&
                harness_create_run(op, "external", "payments", run_id, NULL, NULL) == 0 &&
                harness_open_step(op, run_id, "pay", ctx) == 0 &&
                observe_ok("bill", BILL, bill) == 0 &&
                observe_ok("transactions", TRANSACTIONS, txs) == 0
            ? 0
            : -1;
    free(bytes);
    return rc;
}

static int suite_clean(void)
{
    charter_client_close(op);
    int rc = daemon_.pid ? harness_charterd_stop(&daemon_) : 0;
    harness_graph_drop(graph);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        rc = -1;
    return rc == 0 ? 0 : -1;
}

/* ---- receipts ------------------------------------------------------------------------------ */

static const char *const ARGS_TEXT =
    "{\"amount\":\"84.20\",\"iban\":\"" IBAN_BILL "\",\"reference\":\"INV-7731\"}";

static void test_committed_invocation_gets_a_signed_invoke_receipt(void)
{
    const arg_spec args[] = {
        {"iban", IBAN_BILL, bill}, {"amount", "84.20", NULL}, {"reference", "INV-7731", NULL}};
    CU_ASSERT_EQUAL_FATAL(invoke("send_money", "pay-receipted", args, 3),
                          CHARTER__V1__OUTCOME__ALLOW);
    Charter__V1__GetReceiptRequest req = CHARTER__V1__GET_RECEIPT_REQUEST__INIT;
    req.run_id = run_id;
    req.invocation_id = "pay-receipted";
    Charter__V1__Receipt *r = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_get_receipt(op, &req, &r, &st), 0);
    CU_ASSERT_STRING_EQUAL(r->kind, "invoke");
    CU_ASSERT_STRING_EQUAL(r->tool, "send_money");
    CU_ASSERT_STRING_EQUAL(r->invocation_id, "pay-receipted");
    CU_ASSERT_STRING_EQUAL(r->recipient, "payee_saved");
    /* the arguments' values digest: SHA-256 of the arguments as committed */
    unsigned char md[32];
    char hex[65];
    SHA256((const unsigned char *)ARGS_TEXT, strlen(ARGS_TEXT), md);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    CU_ASSERT_STRING_EQUAL(r->payload_hash, hex);
    /* the lineage: the bill the IBAN was quoted from, with its summary's SHA-1 */
    CU_ASSERT_EQUAL_FATAL(r->n_lineage, 1);
    size_t n = strlen(bill);
    CU_ASSERT_EQUAL(strncmp(r->lineage[0], bill, n), 0);
    CU_ASSERT_EQUAL(r->lineage[0][n], ':');
    CU_ASSERT_EQUAL(strlen(r->lineage[0] + n + 1), 40);
    CU_ASSERT_NOT_EQUAL(r->signature[0], '\0');
    CU_ASSERT_PTR_NOT_NULL(strstr(r->signed_text, "\nkind=invoke\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->signed_text, "\nlineage="));
    charter__v1__receipt__free_unpacked(r, NULL);
}

static void tamper_lineage(json_t *j)
{
    json_t *l = json_object_get(j, "lineage");
    json_array_set_new(l, 0, json_string("elsewhere:0000000000000000000000000000000000000000"));
}

static void test_invoke_receipt_verifies_offline_and_names_a_changed_lineage(void)
{
    char file[300], changed[300], out[300];
    snprintf(file, sizeof file, "%s/invoke.json", tmpdir);
    snprintf(changed, sizeof changed, "%s/changed.json", tmpdir);
    snprintf(out, sizeof out, "%s/verify.out", tmpdir);
    CU_ASSERT_EQUAL_FATAL(harness_sh("CHARTER_URL=%s CHARTER_TOKEN=%s %s --json receipt %s "
                                     "pay-receipted > %s",
                                     daemon_.ipc_url, HARNESS_VIEWER_TOKEN, CHARTER_CLI_PATH,
                                     run_id, file),
                          0);
    CU_ASSERT_EQUAL(harness_sh("CHARTER_URL=ipc:///nonexistent %s verify-receipt %s "
                               "--public-key %s > %s",
                               CHARTER_CLI_PATH, file, pub_path, out),
                    0);
    char *text = harness_slurp(out);
    CU_ASSERT_PTR_NOT_NULL(text != NULL ? strstr(text, "valid: invoke receipt of run") : NULL);
    free(text);
    /* as a reader sees it: the tool, the digest and the lineage */
    CU_ASSERT_EQUAL_FATAL(harness_sh("CHARTER_URL=%s CHARTER_TOKEN=%s %s receipt %s pay-receipted "
                                     "> %s",
                                     daemon_.ipc_url, HARNESS_VIEWER_TOKEN, CHARTER_CLI_PATH,
                                     run_id, out),
                          0);
    text = harness_slurp(out);
    char want[300];
    snprintf(want, sizeof want, "\nlineage         %s:", bill);
    CU_ASSERT_PTR_NOT_NULL(text != NULL ? strstr(text, "receipt         invoke\n") : NULL);
    CU_ASSERT_PTR_NOT_NULL(text != NULL ? strstr(text, "\ntool            send_money\n") : NULL);
    CU_ASSERT_PTR_NOT_NULL(text != NULL ? strstr(text, "\narguments_hash  ") : NULL);
    CU_ASSERT_PTR_NOT_NULL(text != NULL ? strstr(text, want) : NULL);
    free(text);
    json_t *j = json_load_file(file, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    tamper_lineage(j);
    CU_ASSERT_EQUAL_FATAL(json_dump_file(j, changed, JSON_COMPACT), 0);
    json_decref(j);
    CU_ASSERT_EQUAL(harness_sh("CHARTER_URL=ipc:///nonexistent %s verify-receipt %s "
                               "--public-key %s > %s",
                               CHARTER_CLI_PATH, changed, pub_path, out),
                    7);
    text = harness_slurp(out);
    CU_ASSERT_PTR_NOT_NULL(text != NULL ? strstr(text, "altered") : NULL);
    free(text);
}

/* ---- audit -------------------------------------------------------------------------------- */

/* One raw Redis command on the test Redis, as an intruder with database access would send it;
 * the reply's string into out (n bytes, "" for none) when out is not NULL. 0 or -1. */
static int raw(const char *cmd, const char *key, const char *field, const char *value, char *out,
               size_t n)
{
    const char *url = harness_redis_url();
    struct timeval tv = {10, 0};
    redisContext *c = NULL;
    if (strncmp(url, "unix://", 7) == 0) {
        c = redisConnectUnixWithTimeout(url + 7, tv);
    } else {
        char host[256];
        const char *colon = strrchr(url + 6, ':');
        if (colon == NULL || (size_t)(colon - (url + 6)) >= sizeof host)
            return -1;
        snprintf(host, sizeof host, "%.*s", (int)(colon - (url + 6)), url + 6);
        c = redisConnectWithTimeout(host, atoi(colon + 1), tv);
    }
    if (c == NULL || c->err) {
        redisFree(c);
        return -1;
    }
    const char *argv[4] = {cmd, key, field, value};
    redisReply *r = redisCommandArgv(c, value != NULL ? 4 : 3, argv, NULL);
    int rc = r != NULL && r->type != REDIS_REPLY_ERROR ? 0 : -1;
    if (out != NULL)
        snprintf(out, n, "%s", r != NULL && r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    redisFree(c);
    return rc;
}

/* The audit of the run: intact, or the first bad seq and a problem holding word. */
static void expect_audit(bool intact, uint64_t seq, const char *word)
{
    Charter__V1__AuditRunRequest req = CHARTER__V1__AUDIT_RUN_REQUEST__INIT;
    req.run_id = run_id;
    Charter__V1__AuditRunResponse *a = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_audit_run(op, &req, &a, &st), 0);
    if (a->intact != intact || (word != NULL && strstr(a->problem, word) == NULL))
        fprintf(stderr, "\n    audit: first bad %llu: %s\n", (unsigned long long)a->first_bad_seq,
                a->problem);
    CU_ASSERT_EQUAL(a->intact, intact);
    CU_ASSERT_EQUAL(a->first_bad_seq, seq);
    if (word != NULL)
        CU_ASSERT_PTR_NOT_NULL(strstr(a->problem, word));
    charter__v1__audit_run_response__free_unpacked(a, NULL);
}

/* The seq of the last event of kind whose detail holds needle (NULL: any), or 0. */
static uint64_t event_seq(const char *kind, const char *needle)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = run_id;
    req.limit = 100000;
    Charter__V1__RunView *view = NULL;
    charter_status st;
    if (charter_get_run(op, &req, &view, &st) != 0)
        return 0;
    uint64_t seq = 0;
    for (size_t i = 0; i < view->n_events; i++)
        if (strcmp(view->events[i]->kind, kind) == 0 &&
            (needle == NULL || strstr(view->events[i]->detail, needle) != NULL))
            seq = view->events[i]->seq;
    charter__v1__run_view__free_unpacked(view, NULL);
    return seq;
}

/* Sets field of key to value, expects the audit to name seq with word, and puts it back. */
static void expect_edit_named(const char *key, const char *field, const char *value, uint64_t seq,
                              const char *word)
{
    char was[8192];
    CU_ASSERT_EQUAL_FATAL(raw("HGET", key, field, NULL, was, sizeof was), 0);
    CU_ASSERT_FATAL(was[0] != '\0');
    CU_ASSERT_EQUAL_FATAL(raw("HSET", key, field, value, NULL, 0), 0);
    expect_audit(false, seq, word);
    CU_ASSERT_EQUAL_FATAL(raw("HSET", key, field, was, NULL, 0), 0);
    expect_audit(true, 0, NULL);
}

static void test_audit_names_an_altered_invoke_or_observe_event(void)
{
    expect_audit(true, 0, NULL);
    char key[300];
    uint64_t seq = event_seq("invoke_decided", "pay-receipted");
    CU_ASSERT_NOT_EQUAL_FATAL(seq, 0);
    snprintf(key, sizeof key, "charter:{%s}:event:%s:%llu", graph, run_id, (unsigned long long)seq);
    expect_edit_named(key, "outcome", "deny", seq, "was changed");
    seq = event_seq("source_observed", NULL);
    CU_ASSERT_NOT_EQUAL_FATAL(seq, 0);
    snprintf(key, sizeof key, "charter:{%s}:event:%s:%llu", graph, run_id, (unsigned long long)seq);
    expect_edit_named(key, "detail", "{\"resource\":\"bill\"}", seq, "was changed");
}

static void test_audit_checks_the_receipt_of_an_invoke_effect(void)
{
    uint64_t seq = event_seq("invoke_decided", "pay-receipted");
    CU_ASSERT_NOT_EQUAL_FATAL(seq, 0);
    char key[300], receipt[8192];
    snprintf(key, sizeof key, "charter:{%s}:delivery:pay-receipted", graph);
    /* the arguments stored no longer hash to the digest the receipt names */
    expect_edit_named(key, "content",
                      "{\"amount\":\"8420.00\",\"iban\":\"" IBAN_BILL
                      "\",\"reference\":\"INV-7731\"}",
                      seq, "pay-receipted's arguments were changed");
    /* the effect's lineage no longer the one its receipt names */
    expect_edit_named(key, "lineage", "[\"elsewhere:0000000000000000000000000000000000000000\"]",
                      seq, "its receipt names another effect");
    /* the receipt itself: its lineage rewritten, the MAC no longer holds */
    CU_ASSERT_EQUAL_FATAL(raw("HGET", key, "receipt", NULL, receipt, sizeof receipt), 0);
    json_t *j = json_loads(receipt, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    tamper_lineage(j);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    expect_edit_named(key, "receipt", text, seq, "pay-receipted's receipt was altered");
    free(text);
}

/* ---- what if ------------------------------------------------------------------------------- */

/* The invoke changes what-if reports for the candidate (payments.json edited by edit): how
 * many, and whether one is tool's, now refused with code. */
static size_t what_if(void (*edit)(json_t *), const char *tool, const char *code, int *found)
{
    json_t *def = json_load_file(PAYMENTS, 0, NULL);
    if (def == NULL)
        return (size_t)-1;
    if (edit != NULL)
        edit(def);
    char *bytes = json_dumps(def, JSON_COMPACT);
    json_decref(def);
    Charter__V1__WhatIfRequest req = CHARTER__V1__WHAT_IF_REQUEST__INIT;
    req.workflow.data = (uint8_t *)bytes;
    req.workflow.len = strlen(bytes);
    req.run_id = run_id;
    Charter__V1__WhatIfResponse *r = NULL;
    charter_status st;
    int rc = charter_what_if(op, &req, &r, &st);
    free(bytes);
    if (rc != 0) {
        fprintf(stderr, "\n    WhatIf: %s\n", st.message);
        return (size_t)-1;
    }
    size_t n = 0;
    *found = 0;
    for (size_t i = 0; i < r->n_changes; i++) {
        const Charter__V1__WhatIfChange *c = r->changes[i];
        if (strcmp(c->gate, "invoke") != 0)
            continue;
        n++;
        if (tool != NULL && strcmp(c->subject, tool) == 0 &&
            c->recorded->outcome == CHARTER__V1__OUTCOME__ALLOW &&
            c->candidate->outcome == CHARTER__V1__OUTCOME__DENY && c->candidate->n_codes >= 1 &&
            strcmp(c->candidate->codes[0], code) == 0)
            (*found)++;
    }
    charter__v1__what_if_response__free_unpacked(r, NULL);
    return n;
}

/* The recorded decisions the candidates are tried on: a payment whose reference (data) was
 * quoted from the untrusted transactions, and a mail to the colleague class. */
static void record_decisions(void)
{
    static int done;
    if (done++)
        return;
    const arg_spec pay[] = {
        {"iban", IBAN_BILL, bill}, {"amount", "84.20", NULL}, {"reference", "Coffee", txs}};
    CU_ASSERT_EQUAL(invoke("send_money", "pay-ref-from-note", pay, 3), CHARTER__V1__OUTCOME__ALLOW);
    const arg_spec mail[] = {{"to", "ann@corp.example", bill}, {"body", "INV-7731", bill}};
    CU_ASSERT_EQUAL(invoke("send_email", "mail-colleague", mail, 2), CHARTER__V1__OUTCOME__ALLOW);
}

static void reference_is_control(json_t *def)
{
    json_t *args =
        json_object_get(json_object_get(json_object_get(def, "tools"), "send_money"), "arguments");
    json_object_set_new(json_array_get(args, 2), "role", json_string("control"));
}

static void colleague_suffix_narrowed(json_t *def)
{
    json_t *rcp = json_array_get(json_object_get(def, "recipients"), 2);
    json_object_set_new(json_object_get(rcp, "match"), "suffix", json_string("@hq.corp.example"));
}

static void send_money_deleted(json_t *def)
{
    json_object_del(json_object_get(def, "tools"), "send_money");
    /* (its scripted calls go with it: a script may only call declared tools) */
    json_t *script = json_object_get(json_array_get(json_object_get(def, "steps"), 0), "script");
    json_object_set_new(script, "invoke", json_array());
}

static void test_what_if_unchanged_workflow_changes_no_invocation(void)
{
    record_decisions();
    int found = 0;
    CU_ASSERT_EQUAL(what_if(NULL, NULL, NULL, &found), 0);
}

static void test_what_if_data_argument_made_control_is_control_untrusted(void)
{
    record_decisions();
    int found = 0;
    CU_ASSERT_EQUAL(what_if(reference_is_control, "send_money", "CONTROL_UNTRUSTED", &found), 1);
    CU_ASSERT_EQUAL(found, 1);
}

static void test_what_if_narrowed_class_suffix_reclasses_the_destination(void)
{
    record_decisions();
    int found = 0;
    /* ann@corp.example is no colleague any more: the public class, below the bill's label */
    CU_ASSERT_EQUAL(what_if(colleague_suffix_narrowed, "send_email", "CLEARANCE_EXCEEDED", &found),
                    1);
    CU_ASSERT_EQUAL(found, 1);
}

static void test_what_if_deleted_tool_is_not_permitted(void)
{
    record_decisions();
    int found = 0;
    /* both payments recorded as allowed would be refused */
    CU_ASSERT_EQUAL(what_if(send_money_deleted, "send_money", "TOOL_NOT_PERMITTED", &found), 2);
    CU_ASSERT_EQUAL(found, 2);
}

/* ---- registration --------------------------------------------------------------------------- */

#define T(fn)                                                                                      \
    {                                                                                              \
#fn, fn                                                                                    \
    }
static const harness_test tests[] = {
    T(test_committed_invocation_gets_a_signed_invoke_receipt),
    T(test_invoke_receipt_verifies_offline_and_names_a_changed_lineage),
    T(test_audit_names_an_altered_invoke_or_observe_event),
    T(test_audit_checks_the_receipt_of_an_invoke_effect),
    T(test_what_if_unchanged_workflow_changes_no_invocation),
    T(test_what_if_data_argument_made_control_is_control_untrusted),
    T(test_what_if_narrowed_class_suffix_reclasses_the_destination),
    T(test_what_if_deleted_tool_is_not_permitted),
};
#undef T

static const harness_suite suites[] = {
    {"evidence of tool calls", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
