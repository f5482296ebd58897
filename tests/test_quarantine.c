/*
 * test_quarantine.c - a quarantined resource reaches every descendant: from the next decision
 * on, every artifact whose lineage summary names it among its sources, in any run, is refused
 * at the input gate (CheckInput and RecordOutput's gate) and at the delivery gate with
 * RESOURCE_QUARANTINED and a witness naming it; released, each is allowed again. The refusal
 * is recorded with the quarantine among its facts and replays; the decision reads the
 * summary's sources, so a lineage 200 deep costs the database calls of one 1 deep.
 *
 * In process, on a fresh graph of the test Redis holding the reference workflow, through the
 * gate and delivery functions charterd serves; database calls are counted on the store
 * (store_calls). Gate/Invoke's case is in test_invoke.c, through charterd and the CLI.
 */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evidence/evlog.h"
#include "gates/deliver.h"
#include "gates/gate.h"
#include "harness.h"
#include "policy/evaluator.h"
#include "policy/workflow.h"
#include "runs/runner.h"
#include "suite.h"
#include "workflow/registry.h"

extern const char embedded_workflow[];
extern const size_t embedded_workflow_len;

#define DEPTH 200

static char graph[64];
static store *st;
static const workflow *wf;
static const service_limits limits = {
    .max_message = 4u << 20,
    .max_ancestry = 10000,
    .max_ids = 1000,
    .max_content = 1u << 20,
    .default_timeout_ms = 5000,
    .max_timeout_ms = 60000,
};
static gate_env env;

/* Two runs, each with its analyze context, the budget read and a recommendation from it. */
typedef struct {
    char run[65], ctx[32], budget[32], out[32];
} one_run;
static one_run runs[2];
static char deep[32]; /* in runs[0]: DEPTH outputs, each from the one before, from out */

/* Records an output of context ctx from input into id. Returns 0 on ALLOW. */
static int record(const char *ctx, const char *input, const char *title, char id[32])
{
    const char *inputs[1] = {input};
    guard_decision d;
    json_t *artifact = NULL;
    int rc =
        gate_record_output(&env, ctx, inputs, 1, title, "Recommendation: vendor_b.", &d, &artifact);
    int ok = rc == STATUS_OK && d.outcome == GUARD_ALLOW && artifact != NULL;
    if (ok)
        snprintf(id, 32, "%s", json_string_value(json_object_get(artifact, "id")));
    guard_decision_free(&d);
    json_decref(artifact);
    return ok ? 0 : -1;
}

static int start_run(one_run *r)
{
    json_t *c = NULL, *src = NULL;
    guard_decision d;
    if (runner_start(&env, NULL, "external", r->run) != STATUS_OK ||
        gate_open_step(&env, r->run, "analyze", &c) != STATUS_OK)
        return -1;
    snprintf(r->ctx, sizeof r->ctx, "%s", json_string_value(json_object_get(c, "id")));
    json_decref(c);
    if (gate_read_source(&env, r->ctx, "budget", &d, &src) != STATUS_OK || d.outcome != GUARD_ALLOW)
        return -1;
    guard_decision_free(&d);
    snprintf(r->budget, sizeof r->budget, "%s", json_string_value(json_object_get(src, "id")));
    json_decref(src);
    return record(r->ctx, r->budget, "Internal recommendation", r->out);
}

static int suite_init(void)
{
    harness_graph_name(graph, sizeof graph, "quarantine");
    st = harness_store_open(graph);
    if (harness_install_builtin(st, &wf, "test_quarantine") != 0)
        return -1;
    env = (gate_env){.st = st, .wf = wf, .limits = &limits};
    if (start_run(&runs[0]) != 0 || start_run(&runs[1]) != 0)
        return -1;
    char prev[32];
    snprintf(prev, sizeof prev, "%s", runs[0].out);
    for (int i = 0; i < DEPTH; i++) {
        if (record(runs[0].ctx, prev, "Revision", deep) != 0)
            return -1;
        snprintf(prev, sizeof prev, "%s", deep);
    }
    return 0;
}

static int suite_clean(void)
{
    store_close(st);
    harness_graph_drop(graph);
    return 0;
}

static void quarantine(const char *resource, const char *reason)
{
    json_t *j = NULL;
    CU_ASSERT_EQUAL_FATAL(q_quarantine_resource(st, resource, reason, "env:operator", &j),
                          STATUS_OK);
    CU_ASSERT_TRUE(json_is_true(json_object_get(j, "quarantined")));
    json_decref(j);
}

static void release(const char *resource)
{
    json_t *j = NULL;
    CU_ASSERT_EQUAL_FATAL(q_release_resource(st, resource, &j), STATUS_OK);
    CU_ASSERT_TRUE(json_is_true(json_object_get(j, "released")));
    json_decref(j);
}

/* CheckInput of id in ctx: its outcome, its first code (code, 64 bytes), its witness
 * (witness, 512 bytes), the event it was recorded as (*seq) and the database calls (*calls). */
static guard_outcome check(const char *ctx, const char *id, char code[64], char witness[512],
                           uint64_t *seq, unsigned long long *calls)
{
    const char *ids[1] = {id};
    guard_decision d;
    uint64_t s = 0;
    unsigned long long before = store_calls(st);
    CU_ASSERT_EQUAL_FATAL(gate_check_input(&env, ctx, ids, 1, &d, &s), STATUS_OK);
    if (calls != NULL)
        *calls = store_calls(st) - before;
    if (seq != NULL)
        *seq = s;
    guard_codes_format(d.codes, code, 64);
    snprintf(witness, 512, "%s", d.witness != NULL ? d.witness : "");
    guard_outcome o = d.outcome;
    guard_decision_free(&d);
    return o;
}

/* Deliver of out to the CFO from ctx under inv: its outcome and codes (64 bytes); whether a
 * delivery of inv was stored (*stored). */
static guard_outcome send(const one_run *r, const char *inv, char code[64], bool *stored)
{
    deliver_result res;
    CU_ASSERT_EQUAL_FATAL(deliver_send(&env, r->ctx, r->out, "cfo", "deliver_internal", inv, &res),
                          STATUS_OK);
    guard_codes_format(res.decision.codes, code, 64);
    guard_outcome o = res.decision.outcome;
    deliver_result_free(&res);
    json_t *found = NULL;
    CU_ASSERT_EQUAL(q_find_delivery(st, inv, &found), STATUS_OK);
    *stored = json_is_object(found);
    json_decref(found);
    return o;
}

static const char WITNESS_OUT[] = " (leaked spreadsheet) \xe2\x86\x92 Internal recommendation";

/* RULE-INPUT-QUARANTINE at each gate, in two runs; released, each allows again.
 * RULE-COMMIT-QUARANTINE: the first run's send is warm in the one-call path, which decides from
 * what it kept (no quarantine then): its commit refuses, and the fresh read denies. */
static void test_quarantine_refuses_every_descendant_at_every_gate_in_two_runs(void)
{
    char code[64], witness[512], inv[64];
    bool stored = false;
    CU_ASSERT_EQUAL(send(&runs[0], "warm:0", code, &stored), GUARD_ALLOW);
    CU_ASSERT_TRUE(stored);
    quarantine("budget", "leaked spreadsheet");
    for (int i = 0; i < 2; i++) {
        const one_run *r = &runs[i];
        /* CheckInput: the recommendation, and the source artifact itself. */
        CU_ASSERT_EQUAL(check(r->ctx, r->out, code, witness, NULL, NULL), GUARD_DENY);
        CU_ASSERT_STRING_EQUAL(code, "RESOURCE_QUARANTINED");
        CU_ASSERT_PTR_NOT_NULL(strstr(witness, "resource budget quarantined at "));
        CU_ASSERT_PTR_NOT_NULL(strstr(witness, WITNESS_OUT));
        CU_ASSERT_EQUAL(check(r->ctx, r->budget, code, witness, NULL, NULL), GUARD_DENY);
        CU_ASSERT_STRING_EQUAL(code, "RESOURCE_QUARANTINED");
        CU_ASSERT_PTR_NOT_NULL(strstr(witness, "resource budget quarantined at "));
        /* RecordOutput's gate: nothing is recorded from it. */
        char next[32] = "";
        CU_ASSERT_NOT_EQUAL(record(r->ctx, r->out, "After the quarantine", next), 0);
        CU_ASSERT_STRING_EQUAL(next, "");
        /* Deliver: refused, nothing delivered. */
        snprintf(inv, sizeof inv, "quarantined:%d", i);
        CU_ASSERT_EQUAL(send(r, inv, code, &stored), GUARD_DENY);
        CU_ASSERT_STRING_EQUAL(code, "RESOURCE_QUARANTINED");
        CU_ASSERT_FALSE(stored);
    }
    /* Another resource's descendants are untouched: the vendors' quote is read and checked. */
    release("budget");
    for (int i = 0; i < 2; i++) {
        const one_run *r = &runs[i];
        CU_ASSERT_EQUAL(check(r->ctx, r->out, code, witness, NULL, NULL), GUARD_ALLOW);
        char next[32] = "";
        CU_ASSERT_EQUAL(record(r->ctx, r->out, "After the release", next), 0);
        snprintf(inv, sizeof inv, "released:%d", i);
        CU_ASSERT_EQUAL(send(r, inv, code, &stored), GUARD_ALLOW);
        CU_ASSERT_TRUE(stored);
    }
}

/* The refusal is recorded with the quarantine among its facts: replayed, after the release
 * too, it is the same DENY with the same witness. */
static void test_quarantined_refusal_replays(void)
{
    char code[64], witness[512], why[256], text[24];
    uint64_t seq = 0;
    quarantine("budget", "leaked spreadsheet");
    CU_ASSERT_EQUAL(check(runs[1].ctx, runs[1].out, code, witness, &seq, NULL), GUARD_DENY);
    release("budget");
    CU_ASSERT_FATAL(seq > 0);
    snprintf(text, sizeof text, "%llu", (unsigned long long)seq);
    json_t *event = NULL;
    CU_ASSERT_EQUAL_FATAL(q_get_event(st, runs[1].run, text, &event), STATUS_OK);
    char *facts = NULL;
    CU_ASSERT_EQUAL_FATAL(
        evlog_snapshot_resolve(st, json_string_value(json_object_get(event, "snapshot")), &facts,
                               why, sizeof why),
        STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(facts, "\"quarantined\":\"leaked spreadsheet\""));
    json_object_set_new(event, "snapshot", json_string(facts));
    free(facts);
    evaluator_replay_result res;
    CU_ASSERT_EQUAL_FATAL(evaluator_replay(NULL, event, &res, why, sizeof why), STATUS_OK);
    CU_ASSERT_EQUAL(res.replayed.outcome, GUARD_DENY);
    CU_ASSERT_TRUE(res.matches);
    CU_ASSERT_STRING_EQUAL(res.replayed.witness != NULL ? res.replayed.witness : "", witness);
    evaluator_replay_result_free(&res);
    json_decref(event);
}

/* The decision reads the summary's sources: an artifact DEPTH outputs below the recommendation
 * takes as many database calls as the recommendation, quarantined or not. */
static void test_a_deep_lineage_costs_what_a_shallow_one_does(void)
{
    char code[64], witness[512];
    unsigned long long shallow = 0, deeper = 0;
    CU_ASSERT_EQUAL(check(runs[0].ctx, runs[0].out, code, witness, NULL, &shallow), GUARD_ALLOW);
    CU_ASSERT_EQUAL(check(runs[0].ctx, deep, code, witness, NULL, &deeper), GUARD_ALLOW);
    CU_ASSERT_EQUAL(shallow, deeper);
    quarantine("budget", "leaked spreadsheet");
    unsigned long long q_shallow = 0, q_deep = 0;
    CU_ASSERT_EQUAL(check(runs[0].ctx, runs[0].out, code, witness, NULL, &q_shallow), GUARD_DENY);
    CU_ASSERT_EQUAL(check(runs[0].ctx, deep, code, witness, NULL, &q_deep), GUARD_DENY);
    CU_ASSERT_STRING_EQUAL(code, "RESOURCE_QUARANTINED");
    CU_ASSERT_PTR_NOT_NULL(strstr(witness, "resource budget quarantined at "));
    CU_ASSERT_PTR_NOT_NULL(strstr(witness, " (leaked spreadsheet) \xe2\x86\x92 Revision"));
    CU_ASSERT_EQUAL(q_shallow, q_deep);
    release("budget");
    printf("\n    database calls of CheckInput: depth 1 %llu, depth %d %llu; quarantined: %llu, "
           "%llu\n",
           shallow, DEPTH + 1, deeper, q_shallow, q_deep);
}

/* Bad input changes nothing: an unknown resource is not_found, an empty reason invalid; a
 * second quarantine keeps the first one's time and reason; releasing twice says so. */
static void test_quarantine_arguments(void)
{
    json_t *j = NULL;
    CU_ASSERT_EQUAL(q_quarantine_resource(st, "no_such", "x", "env:operator", &j),
                    STATUS_ENOTFOUND);
    CU_ASSERT_EQUAL(q_quarantine_resource(st, "budget", "", "env:operator", &j), STATUS_EINVAL);
    CU_ASSERT_EQUAL_FATAL(q_quarantine_resource(st, "budget", "first", "a", &j), STATUS_OK);
    char at[40];
    snprintf(at, sizeof at, "%s", json_string_value(json_object_get(j, "quarantined_at")));
    json_decref(j);
    CU_ASSERT_EQUAL_FATAL(q_quarantine_resource(st, "budget", "second", "b", &j), STATUS_OK);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "quarantined_at")), at);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "reason")), "first");
    json_decref(j);
    release("budget");
    CU_ASSERT_EQUAL_FATAL(q_release_resource(st, "budget", &j), STATUS_OK);
    CU_ASSERT_FALSE(json_is_true(json_object_get(j, "released")));
    json_decref(j);
}

/* --- registration ---------------------------------------------------------------------------- */

static int setup(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return harness_evlog_builtin("test_quarantine");
}

static void teardown(void)
{
    registry_shutdown();
}

static const harness_test tests[] = {
    {"quarantine refuses every descendant at every gate in two runs",
     test_quarantine_refuses_every_descendant_at_every_gate_in_two_runs},
    {"the quarantined refusal replays", test_quarantined_refusal_replays},
    {"a deep lineage costs what a shallow one does",
     test_a_deep_lineage_costs_what_a_shallow_one_does},
    {"quarantine arguments", test_quarantine_arguments},
};
static const harness_suite suites[] = {
    {"quarantine", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .setup = setup,
                                       .teardown = teardown};
