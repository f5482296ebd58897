/*
 * test_one_call.c - a send repeated under another invocation ID is one database call: decided
 * from the immutable facts its first send was read and allowed with, committed by one call
 * that compares them with the graph and reads what can change itself. Whatever changed since
 * (a revocation, the payload's own node or edges, the context's owners, the summary's text)
 * refuses that commit, and the send is read afresh and decided as before.
 *
 * In process, on a fresh graph of the test Redis holding the reference workflow, through the
 * same gate and delivery functions charterd serves; the worker is this thread, so its cache is
 * this thread's. Database calls are counted on the store (store_calls).
 */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evidence/evlog.h"
#include "gates/deliver.h"
#include "gates/deliver_cache.h"
#include "gates/gate.h"
#include "harness.h"
#include "policy/evaluator.h"
#include "policy/workflow.h"
#include "runs/runner.h"
#include "suite.h"
#include "workflow/registry.h"

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
static char ctx[32], out[32]; /* the analyze context and its recommendation */

static int suite_init(void)
{
    harness_graph_name(graph, sizeof graph, "one_call");
    st = harness_store_open(graph);
    if (harness_install_builtin(st, &wf, "test_one_call") != 0)
        return -1;
    env = (gate_env){.st = st, .wf = wf, .limits = &limits};
    if (runner_start(&env, NULL, "external", run_id) != STATUS_OK)
        return -1;
    /* The Analyst reads the budget and records a recommendation (confidential, for the CFO). */
    json_t *c = NULL, *src = NULL, *artifact = NULL;
    guard_decision d;
    if (gate_open_step(&env, run_id, "analyze", &c) != STATUS_OK)
        return -1;
    snprintf(ctx, sizeof ctx, "%s", json_string_value(json_object_get(c, "id")));
    json_decref(c);
    if (gate_read_source(&env, ctx, "budget", &d, &src) != STATUS_OK || d.outcome != GUARD_ALLOW)
        return -1;
    guard_decision_free(&d);
    const char *inputs[1] = {json_string_value(json_object_get(src, "id"))};
    int rc = gate_record_output(&env, ctx, inputs, 1, "Internal recommendation",
                                "Recommendation: vendor_b, within the ceiling.", &d, &artifact);
    json_decref(src);
    if (rc != STATUS_OK || d.outcome != GUARD_ALLOW)
        return -1;
    guard_decision_free(&d);
    snprintf(out, sizeof out, "%s", json_string_value(json_object_get(artifact, "id")));
    json_decref(artifact);
    return 0;
}

static int suite_clean(void)
{
    store_close(st);
    harness_graph_drop(graph);
    return 0;
}

/* Runs a Lua script on the graph with up to two arguments. */
static void graph_set(const char *script, const char *a, const char *b)
{
    const char *args[2] = {a, b};
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, script, args, b ? 2 : a ? 1 : 0, NULL), 0);
}

/* Delivers the recommendation to the CFO under invocation inv: its outcome, its codes as a
 * comma list (codes, 256 bytes) and the database calls it took (*calls); *seq the event of a
 * committed delivery (0 otherwise). */
static guard_outcome send(const char *inv, char codes[256], unsigned long long *calls,
                          unsigned long long *seq)
{
    deliver_result r;
    unsigned long long before = store_calls(st);
    CU_ASSERT_EQUAL_FATAL(deliver_send(&env, ctx, out, "cfo", "deliver_internal", inv, &r),
                          STATUS_OK);
    if (calls != NULL)
        *calls = store_calls(st) - before;
    guard_codes_format(r.decision.codes, codes, 256);
    if (seq != NULL)
        *seq =
            r.delivery != NULL && !r.acknowledged
                ? (unsigned long long)json_integer_value(json_object_get(r.delivery, "event_seq"))
                : 0;
    guard_outcome o = r.decision.outcome;
    deliver_result_free(&r);
    return o;
}

/* The stored event seq of the run, its snapshot resolved (caller decrefs). */
static json_t *event_of(unsigned long long seq)
{
    char text[24], why[256];
    snprintf(text, sizeof text, "%llu", seq);
    json_t *event = NULL;
    CU_ASSERT_EQUAL_FATAL(q_get_event(st, run_id, text, &event), STATUS_OK);
    char *facts = NULL;
    CU_ASSERT_EQUAL_FATAL(
        evlog_snapshot_resolve(st, json_string_value(json_object_get(event, "snapshot")), &facts,
                               why, sizeof why),
        STATUS_OK);
    json_object_set_new(event, "resolved", json_string(facts));
    free(facts);
    return event;
}

/* The first send is read afresh (the facts, then the commit); the next ones, under other
 * invocation IDs, are one call each, and each commits. */
static void test_a_repeated_send_is_one_database_call(void)
{
    char codes[256];
    unsigned long long calls = 0, first = 0, second = 0, third = 0;
    CU_ASSERT_EQUAL(send("one:1", codes, &calls, &first), GUARD_ALLOW);
    CU_ASSERT_EQUAL(calls, 2);
    CU_ASSERT_EQUAL(send("one:2", codes, &calls, &second), GUARD_ALLOW);
    CU_ASSERT_EQUAL(calls, 1);
    CU_ASSERT_EQUAL(send("one:3", codes, &calls, &third), GUARD_ALLOW);
    CU_ASSERT_EQUAL(calls, 1);
    CU_ASSERT_TRUE(first > 0 && second == first + 1 && third == second + 1);
    /* An invocation already committed is acknowledged by the same one call. */
    deliver_result r;
    CU_ASSERT_EQUAL_FATAL(deliver_send(&env, ctx, out, "cfo", "deliver_internal", "one:2", &r),
                          STATUS_OK);
    CU_ASSERT_EQUAL(r.decision.outcome, GUARD_ALLOW);
    CU_ASSERT_TRUE(r.acknowledged);
    deliver_result_free(&r);
}

/* The one-call decision records the facts it was decided from: the same facts record as the
 * fresh read's, naming the payload's summary hash, and it replays to the same verdict. */
static void test_the_one_call_decision_names_its_summary_and_replays(void)
{
    char codes[256];
    unsigned long long fresh = 0, once = 0, calls = 0;
    CU_ASSERT_EQUAL(send("replay:1", codes, NULL, &fresh), GUARD_ALLOW);
    CU_ASSERT_EQUAL(send("replay:2", codes, &calls, &once), GUARD_ALLOW);
    CU_ASSERT_EQUAL(calls, 1);
    json_t *a = event_of(fresh), *b = event_of(once);
    json_t *sa = json_loads(json_string_value(json_object_get(a, "snapshot")), 0, NULL);
    json_t *sb = json_loads(json_string_value(json_object_get(b, "snapshot")), 0, NULL);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(sa, "facts")),
                           json_string_value(json_object_get(sb, "facts")));
    json_t *facts = json_loads(json_string_value(json_object_get(b, "resolved")), 0, NULL);
    const char *used =
        json_string_value(json_object_get(json_object_get(facts, "summary"), "summary_hash"));
    json_t *artifact = NULL;
    CU_ASSERT_EQUAL_FATAL(q_lineage_summary(st, out, &artifact), STATUS_OK);
    const char *stored = json_string_value(json_object_get(artifact, "summary_hash"));
    CU_ASSERT_TRUE(used != NULL && stored != NULL && strlen(used) == 40 &&
                   strcmp(used, stored) == 0);
    json_object_set(b, "snapshot", json_object_get(b, "resolved"));
    evaluator_replay_result res;
    char why[256];
    CU_ASSERT_EQUAL(evaluator_replay(NULL, b, &res, why, sizeof why), STATUS_OK);
    CU_ASSERT_EQUAL(res.replayed.outcome, GUARD_ALLOW);
    CU_ASSERT_TRUE(res.matches);
    evaluator_replay_result_free(&res);
    json_decref(artifact);
    json_decref(facts);
    json_decref(sa);
    json_decref(sb);
    json_decref(a);
    json_decref(b);
}

/* One change behind the one-call path's back: the send after it is refused by the one call's
 * commit, read afresh and decided with the code want (DENY or UNKNOWN, nothing delivered);
 * undone, the next send is allowed again. */
static void expect_fresh_refusal(const char *what, const char *script, const char *undo,
                                 const char *arg, const char *want)
{
    char codes[256], inv[64];
    static int serial;
    snprintf(inv, sizeof inv, "change:%d", ++serial);
    CU_ASSERT_EQUAL(send(inv, codes, NULL, NULL), GUARD_ALLOW); /* warm */
    graph_set(script, arg, NULL);
    snprintf(inv, sizeof inv, "change:%d", ++serial);
    guard_outcome o = send(inv, codes, NULL, NULL);
    printf("\n    %s: outcome %d, codes %s", what, (int)o, codes);
    CU_ASSERT_NOT_EQUAL(o, GUARD_ALLOW);
    CU_ASSERT_PTR_NOT_NULL(strstr(codes, want));
    json_t *found = NULL;
    CU_ASSERT_EQUAL(q_find_delivery(st, inv, &found), STATUS_OK);
    CU_ASSERT_FALSE(json_is_object(found));
    json_decref(found);
    graph_set(undo, arg, NULL);
    snprintf(inv, sizeof inv, "change:%d", ++serial);
    CU_ASSERT_EQUAL(send(inv, codes, NULL, NULL), GUARD_ALLOW);
}

static void test_a_changed_fact_is_read_afresh(void)
{
    char key[96];
    const char *revoke = "redis.call('HSET', KEYS[1] .. ':grant:g_analyst', 'revoked_at', "
                         "'1767225600.000000') return 1";
    const char *restore = "redis.call('HDEL', KEYS[1] .. ':grant:g_analyst', 'revoked_at') "
                          "return 1";
    expect_fresh_refusal("grant revoked", revoke, restore, NULL, "GRANT_INVALID");
    snprintf(key, sizeof key, ":artifact:%s", out);
    expect_fresh_refusal(
        "payload relabelled", "redis.call('HSET', KEYS[1] .. ARGV[1], 'conf', '1') return 1",
        "redis.call('HSET', KEYS[1] .. ARGV[1], 'conf', '2') return 1", key, "LABEL_MISMATCH");
    expect_fresh_refusal(
        "payload's producer removed",
        "redis.call('RENAME', KEYS[1] .. ARGV[1] .. ':produced_by', KEYS[1] .. ':kept') return 1",
        "redis.call('RENAME', KEYS[1] .. ':kept', KEYS[1] .. ARGV[1] .. ':produced_by') return 1",
        key, "PROVENANCE_INCOMPLETE");
    expect_fresh_refusal(
        "payload's DERIVED_FROM removed",
        "redis.call('RENAME', KEYS[1] .. ARGV[1] .. ':derived_from', KEYS[1] .. ':kept') return 1",
        "redis.call('RENAME', KEYS[1] .. ':kept', KEYS[1] .. ARGV[1] .. ':derived_from') return 1",
        key, "PROVENANCE_INCOMPLETE");
    expect_fresh_refusal(
        "summary text edited",
        "local s = redis.call('HGET', KEYS[1] .. ARGV[1], 'summary') "
        "redis.call('HSET', KEYS[1] .. ':kept', 's', s) "
        "redis.call('HSET', KEYS[1] .. ARGV[1], 'summary', s .. ' ') return 1",
        "redis.call('HSET', KEYS[1] .. ARGV[1], 'summary', "
        "redis.call('HGET', KEYS[1] .. ':kept', 's')) redis.call('DEL', KEYS[1] .. ':kept') "
        "return 1",
        key, "GRAPH_ERROR");
    snprintf(key, sizeof key, ":context:%s:owned_by", ctx);
    expect_fresh_refusal("context's owner removed",
                         "redis.call('RENAME', KEYS[1] .. ARGV[1], KEYS[1] .. ':kept') return 1",
                         "redis.call('RENAME', KEYS[1] .. ':kept', KEYS[1] .. ARGV[1]) return 1",
                         key, "IDENTITY_MISMATCH");
    printf("\n");
}

/* A grant's delegated_from edges are structure the one-call path keeps: an edit of them behind
 * the API does not refuse a kept send's commit (charter audit finds it), but every send read
 * afresh is refused, and the send is allowed again once the edge is back. */
static void test_a_grant_edge_removed_is_refused_by_a_fresh_read(void)
{
    char codes[256];
    unsigned long long calls = 0;
    CU_ASSERT_EQUAL(send("edge:1", codes, NULL, NULL), GUARD_ALLOW); /* kept */
    graph_set("redis.call('RENAME', KEYS[1] .. ':grant:g_analyst:delegated_from', "
              "KEYS[1] .. ':kept') return 1",
              NULL, NULL);
    CU_ASSERT_EQUAL(send("edge:2", codes, &calls, NULL), GUARD_ALLOW);
    CU_ASSERT_EQUAL(calls, 1); /* decided from the kept chain, its edges not read */
    deliver_cache_drop(store_graph(st), ctx, out, "cfo", "deliver_internal");
    guard_outcome o = send("edge:3", codes, &calls, NULL);
    printf("\n    grant's DELEGATED_FROM removed, read afresh: outcome %d, codes %s", (int)o,
           codes);
    CU_ASSERT_NOT_EQUAL(o, GUARD_ALLOW);
    CU_ASSERT_PTR_NOT_NULL(strstr(codes, "GRANT_INVALID"));
    json_t *found = NULL;
    CU_ASSERT_EQUAL(q_find_delivery(st, "edge:3", &found), STATUS_OK);
    CU_ASSERT_FALSE(json_is_object(found));
    json_decref(found);
    graph_set("redis.call('RENAME', KEYS[1] .. ':kept', "
              "KEYS[1] .. ':grant:g_analyst:delegated_from') return 1",
              NULL, NULL);
    CU_ASSERT_EQUAL(send("edge:4", codes, NULL, NULL), GUARD_ALLOW);
    printf("\n");
}

/* --- registration ---------------------------------------------------------------------------- */

static int setup(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return harness_evlog_builtin("test_one_call");
}

static void teardown(void)
{
    registry_shutdown();
}

static const harness_test tests[] = {
    {"a repeated send is one database call", test_a_repeated_send_is_one_database_call},
    {"the one-call decision names its summary and replays",
     test_the_one_call_decision_names_its_summary_and_replays},
    {"a changed fact is read afresh", test_a_changed_fact_is_read_afresh},
    {"a grant edge removed is refused by a fresh read",
     test_a_grant_edge_removed_is_refused_by_a_fresh_read},
};
static const harness_suite suites[] = {
    {"one database call per Deliver", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .setup = setup,
                                       .teardown = teardown};
