/*
 * test_mutation_gaps.c - the checks tests/mutations.sh found no other fast suite exercising:
 * each case here fails when one policy or database check is removed, where every other suite
 * the mutation run uses still passes.
 *
 * In process, on a fresh graph of the test Redis holding the reference workflow, through the
 * same gate and delivery functions charterd serves: the Analyst reads the budget and records
 * a recommendation, which is then delivered to the CFO (allowed) or tampered with or
 * committed under a grant the database clock says has expired.
 */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gates/deliver.h"
#include "evidence/evlog.h"
#include "gates/gate.h"
#include "harness.h"
#include "suite.h"
#include "workflow/registry.h"
#include "policy/evaluator.h"
#include "runs/runner.h"
#include "policy/workflow.h"

extern const char embedded_workflow[];
extern const size_t embedded_workflow_len;

static char graph[64];
static store *st;
static const workflow *wf;
static char run_id[65];
static const service_limits limits = {
    .max_message = 4u << 20,
    .max_ancestry = 10000,
    .max_ids = 1000,
    .max_content = 1u << 20,
    .default_timeout_ms = 5000,
    .max_timeout_ms = 60000,
};
static gate_env env;

static int suite_init(void)
{
    harness_graph_name(graph, sizeof graph, "mutation_gaps");
    st = harness_store_open(graph);
    if (harness_install_builtin(st, &wf, "test_mutation_gaps") != 0)
        return -1;
    env = (gate_env){.st = st, .wf = wf, .limits = &limits};
    /* An external run: created, its steps driven here. */
    return runner_start(&env, NULL, "external", run_id) == STATUS_OK ? 0 : -1;
}

static int suite_clean(void)
{
    store_close(st);
    harness_graph_drop(graph);
    return 0;
}

/* The analyze step's output: an open context, the budget read as a source, and a recorded
 * recommendation with content. ctx (32 bytes) and out (32 bytes) get the ids, *artifact the
 * recorded artifact (caller decrefs). */
static void analyst_output(const char *content, char ctx[32], char out[32], json_t **artifact)
{
    json_t *c = NULL, *src = NULL;
    guard_decision d;
    CU_ASSERT_EQUAL_FATAL(gate_open_step(&env, run_id, "analyze", &c), STATUS_OK);
    snprintf(ctx, 32, "%s", json_string_value(json_object_get(c, "id")));
    json_decref(c);
    CU_ASSERT_EQUAL_FATAL(gate_read_source(&env, ctx, "budget", &d, &src), STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(d.outcome, GUARD_ALLOW);
    guard_decision_free(&d);
    const char *inputs[1] = {json_string_value(json_object_get(src, "id"))};
    CU_ASSERT_EQUAL_FATAL(
        gate_record_output(&env, ctx, inputs, 1, "Internal recommendation", content, &d, artifact),
        STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(d.outcome, GUARD_ALLOW);
    guard_decision_free(&d);
    json_decref(src);
    snprintf(out, 32, "%s", json_string_value(json_object_get(*artifact, "id")));
}

/* Runs a Lua script on the graph with one argument. */
static void graph_set(const char *script, const char *arg)
{
    const char *args[1] = {arg};
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, script, args, arg ? 1 : 0, NULL), 0);
}

static bool delivered(const char *inv)
{
    json_t *found = NULL;
    CU_ASSERT_EQUAL(q_find_delivery(st, inv, &found), STATUS_OK);
    bool yes = json_is_object(found);
    json_decref(found);
    return yes;
}

/* Only the delivery gate compares the payload's stored bytes with the hash taken at capture:
 * charter_commit_delivery compares what the deliverer read with what is stored, and both are
 * the altered bytes. */
/* Checks RULE-DELIVERY-PROVENANCE. */
static void test_delivery_of_artifact_altered_after_capture_is_denied(void)
{
    char ctx[32], out[32];
    json_t *artifact = NULL;
    deliver_result r;

    /* Unaltered: the CFO gets it. */
    analyst_output("Recommendation: vendor_b, within the ceiling.", ctx, out, &artifact);
    json_decref(artifact);
    CU_ASSERT_EQUAL_FATAL(
        deliver_send(&env, ctx, out, "cfo", "deliver_internal", "gaps:intact", &r), STATUS_OK);
    CU_ASSERT_EQUAL(r.decision.outcome, GUARD_ALLOW);
    CU_ASSERT_FALSE(r.acknowledged);
    deliver_result_free(&r);
    CU_ASSERT_TRUE(delivered("gaps:intact"));

    /* Altered after capture, hash left as it was: denied, nothing committed. */
    analyst_output("Recommendation: vendor_b, within the ceiling.", ctx, out, &artifact);
    json_decref(artifact);
    char script[256];
    snprintf(script, sizeof script,
             "redis.call('HSET', KEYS[1] .. ':artifact:%s', 'content', ARGV[1])\nreturn 1\n", out);
    graph_set(script, "Recommendation: vendor_a, whatever the ceiling.");
    CU_ASSERT_EQUAL_FATAL(
        deliver_send(&env, ctx, out, "cfo", "deliver_internal", "gaps:altered", &r), STATUS_OK);
    CU_ASSERT_EQUAL(r.decision.outcome, GUARD_DENY);
    CU_ASSERT_EQUAL(r.decision.codes, 1u << GUARD_PROVENANCE_INCOMPLETE);
    CU_ASSERT_STRING_EQUAL(r.decision.witness ? r.decision.witness : "",
                           "the payload's content does not match its hash");
    CU_ASSERT_PTR_NULL(r.delivery);
    deliver_result_free(&r);
    CU_ASSERT_FALSE(delivered("gaps:altered"));
}

/* The string member k of o, or "". */
static const char *text_of(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s != NULL ? s : "";
}

static void sha1_hex(const char *data, char hex[41])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    CU_ASSERT_FATAL(EVP_Digest(data, strlen(data), md, &n, EVP_sha1(), NULL) == 1 && n == 20);
    for (unsigned i = 0; i < 20; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* One charter_commit_delivery of the analyze step's payload to the CFO, as deliver.c sends it
 * after an ALLOW; returns the reply's status and, for a refusal, its reason. */
static void commit_once(const json_t *artifact, const char *inv, char status[32], char reason[64])
{
    const char *content = json_string_value(json_object_get(artifact, "content"));
    char sha1[41];
    sha1_hex(content, sha1);
    json_t *doc =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:[s, s], s:[s], s:s}", "run_id",
                  run_id, "invocation_id", inv, "fingerprint", "f", "payload_id",
                  json_string_value(json_object_get(artifact, "id")), "payload_hash",
                  json_string_value(json_object_get(artifact, "hash")), "content_sha1", sha1,
                  "recipient", "cfo", "tool", "deliver_internal", "grant_chain", "g_analyst",
                  "g_root", "sources", "budget", "content", content);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    guard_decision allow = {.outcome = GUARD_ALLOW};
    json_t *detail = json_string(inv);
    evlog_owned ev;
    CU_ASSERT_EQUAL_FATAL(evlog_owned_event(&ev, "delivery_decided", &allow, NULL, detail, NULL),
                          STATUS_OK);
    json_decref(detail);
    json_t *reply = NULL;
    CU_ASSERT_EQUAL(evlog_commit_delivery(st, run_id, doc, &ev.ev, &reply), STATUS_OK);
    snprintf(status, 32, "%s", text_of(reply, "status"));
    snprintf(reason, 64, "%s", text_of(reply, "reason"));
    evlog_owned_free(&ev);
    json_decref(reply);
    json_decref(doc);
}

/* The conditional write judges validity at TIME read inside it, today: a grant that expired a
 * minute ago by the database clock is refused at commit, whatever was evaluated before. */
/* Checks RULE-COMMIT-DATABASE-CLOCK, RULE-COMMIT-GRANT-UNEXPIRED. */
static void test_commit_refuses_grant_expired_a_minute_ago_by_database_clock(void)
{
    char ctx[32], out[32], status[32], reason[64];
    json_t *artifact = NULL;
    analyst_output("Recommendation: vendor_b.", ctx, out, &artifact);

    json_t *t = NULL;
    CU_ASSERT_EQUAL_FATAL(q_time(st, &t), STATUS_OK);
    double now = strtod(text_of(t, "now"), NULL);
    json_decref(t);
    CU_ASSERT_FATAL(now > 1767225600.0 + 3600); /* after the reference grants' valid_from */
    char when[32];
    snprintf(when, sizeof when, "%.0f", now - 60);
    const char *set_valid_to =
        "redis.call('HSET', KEYS[1] .. ':grant:g_analyst', 'valid_to', ARGV[1])\nreturn 1\n";
    graph_set(set_valid_to, when);
    commit_once(artifact, "gaps:expired", status, reason);
    CU_ASSERT_STRING_EQUAL(status, "refused");
    CU_ASSERT_STRING_EQUAL(reason, "grant_expired");
    CU_ASSERT_FALSE(delivered("gaps:expired"));

    /* The same commit with the grant valid again lands: it was the clock that refused. */
    graph_set(set_valid_to, "2082758400");
    commit_once(artifact, "gaps:valid", status, reason);
    CU_ASSERT_STRING_EQUAL(status, "committed");
    CU_ASSERT_TRUE(delivered("gaps:valid"));
    json_decref(artifact);
}

/* --- registration ---------------------------------------------------------------------------- */

static int setup(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return harness_evlog_builtin("test_mutation_gaps");
}

static void teardown(void)
{
    registry_shutdown();
}

static const harness_test tests[] = {
    {"delivery of an artifact altered after capture is denied",
     test_delivery_of_artifact_altered_after_capture_is_denied},
    {"commit refuses a grant expired a minute ago by the database clock",
     test_commit_refuses_grant_expired_a_minute_ago_by_database_clock},
};
static const harness_suite suites[] = {
    {"checks no other fast suite makes", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .setup = setup,
                                       .teardown = teardown};
