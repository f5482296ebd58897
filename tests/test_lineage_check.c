/*
 * test_lineage_check.c - the input gate decides from the lineage summary stored at creation and
 * the payload's own node, and a payload changed behind the server's back is still refused.
 *
 * Every artifact recorded through the API carries its lineage record (field lineage) and its
 * summary (sealed under an integrity key). The tests drive a real charterd over NNG: a lineage
 * is allowed, then the payload's edge is deleted, its label changed, its producer removed, a
 * FROM_RESOURCE edge added to it, a resource relabelled, its summary edited, each directly in
 * Redis: every one turns the same check into a refusal (or UNKNOWN), and undoing it allows the
 * check again. Edits deeper than the payload no longer change a decision, not even a refusal's
 * codes (audit names them); an artifact whose summary is missing, or under a key unsealed or
 * sealed by another key, is UNKNOWN and never walked instead, and audit names it. Every
 * decision names the summary hash it used and replays from its snapshot.
 */
#include <CUnit/Basic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"

#define DEPTH 20

static char graph[64];
static harness_charterd daemon_;
static charter_client *op;
static char research[129];
static char report_ctx[129];
static char ids[DEPTH + 1][64]; /* the source, then each note */
static char run_id[129];

/* Runs one Redis command on the graph: ARGV[1] the command, ARGV[2] the key's suffix after the
 * prefix, the rest its arguments. Replies 1. */
static const char *COMMAND = "local a = {ARGV[1], KEYS[1] .. ARGV[2]} "
                             "for i = 3, #ARGV do a[#a + 1] = ARGV[i] end "
                             "redis.call(unpack(a)) return 1";

/* How many artifacts of the graph carry a lineage record that is stored. */
static const char *WITH_RECORDS =
    "local n, cursor = 0, '0' "
    "repeat "
    "  local r = redis.call('SCAN', cursor, 'MATCH', KEYS[1] .. "
    "':artifact:*', 'COUNT', 1000) "
    "  cursor = r[1] "
    "  for _, k in ipairs(r[2]) do "
    "    if redis.call('TYPE', k).ok == 'hash' then "
    "      local s = redis.call('HGET', k, 'lineage') "
    "      if s and redis.call('EXISTS', KEYS[1] .. ':lineage:' .. s) "
    "          == 1 then n = n + 1 end "
    "    end "
    "  end "
    "until cursor == '0' "
    "return n";

static void redis_do(const char *cmd, const char *suffix, const char *a, const char *b)
{
    const char *args[4] = {cmd, suffix, a, b};
    size_t n = b ? 4 : a ? 3 : 2;
    long long one = 0;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, COMMAND, args, n, &one), 0);
    CU_ASSERT_EQUAL(one, 1);
}

static int suite_init(void)
{
    harness_graph_name(graph, sizeof graph, "lineage_check");
    store *st = harness_store_open(graph);
    store_close(st);
    harness_charterd_opts o = {.graph = graph};
    if (harness_charterd_start(&o, &daemon_) != 0)
        return -1;
    return harness_client_open(daemon_.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &op);
}

static int suite_clean(void)
{
    charter_client_close(op);
    int rc = harness_charterd_stop(&daemon_);
    harness_graph_drop(graph);
    return rc == 0 ? 0 : -1;
}

/* What one CheckInput answered. */
typedef struct {
    int outcome; /* -1 when the call failed */
    char codes[256];
    char witness[512];
    uint64_t seq; /* its input_checked event */
} checked;

/* CheckInput of artifact id in context ctx. */
static checked check_one(const char *ctx, const char *id)
{
    checked c = {.outcome = -1};
    char *req_ids[1] = {(char *)id};
    Charter__V1__CheckInputRequest req = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    req.context_id = (char *)ctx;
    req.artifact_ids = req_ids;
    req.n_artifact_ids = 1;
    Charter__V1__CheckInputResponse *resp = NULL;
    charter_status st;
    if (charter_check_input(op, &req, &resp, &st) != 0 || resp->decision == NULL)
        return c;
    c.outcome = resp->decision->outcome;
    c.seq = resp->event_seq;
    size_t used = 0;
    for (size_t i = 0; i < resp->decision->n_codes && used < sizeof c.codes; i++)
        used += (size_t)snprintf(c.codes + used, sizeof c.codes - used, "%s ",
                                 resp->decision->codes[i]);
    snprintf(c.witness, sizeof c.witness, "%s",
             resp->decision->witness ? resp->decision->witness : "");
    charter__v1__check_input_response__free_unpacked(resp, NULL);
    return c;
}

/* CheckInput of the deepest note for the report step: its outcome; codes (n bytes) the
 * decision's codes joined by spaces. */
static int check_deepest(char *codes, size_t n)
{
    checked c = check_one(report_ctx, ids[DEPTH]);
    snprintf(codes, n, "%s", c.codes);
    return c.outcome;
}

/* Deliver of the deepest note to public from the report step under a fresh invocation ID: its
 * outcome; codes (n bytes) the decision's codes joined by spaces. */
static int deliver_deepest(char *codes, size_t n)
{
    static int serial;
    char inv[64];
    snprintf(inv, sizeof inv, "lineage-check-%d", ++serial);
    Charter__V1__DeliverRequest req = CHARTER__V1__DELIVER_REQUEST__INIT;
    req.context_id = report_ctx;
    req.payload_id = ids[DEPTH];
    req.recipient = "public";
    req.tool = "deliver_public";
    req.invocation_id = inv;
    Charter__V1__DeliverResponse *resp = NULL;
    charter_status st;
    codes[0] = '\0';
    if (charter_deliver(op, &req, &resp, &st) != 0 || resp->decision == NULL)
        return -1;
    int outcome = resp->decision->outcome;
    size_t used = 0;
    for (size_t i = 0; i < resp->decision->n_codes && used < n; i++)
        used += (size_t)snprintf(codes + used, n - used, "%s ", resp->decision->codes[i]);
    charter__v1__deliver_response__free_unpacked(resp, NULL);
    return outcome;
}

/* AuditRun of the suite's run: intact, or the problem it names (n bytes). */
static bool audit_intact(char *problem, size_t n)
{
    Charter__V1__AuditRunRequest req = CHARTER__V1__AUDIT_RUN_REQUEST__INIT;
    req.run_id = run_id;
    Charter__V1__AuditRunResponse *resp = NULL;
    charter_status st;
    problem[0] = '\0';
    if (charter_audit_run(op, &req, &resp, &st) != 0) {
        snprintf(problem, n, "rpc error %d", st.code);
        return false;
    }
    bool intact = resp->intact;
    snprintf(problem, n, "%s", resp->problem ? resp->problem : "");
    charter__v1__audit_run_response__free_unpacked(resp, NULL);
    return intact;
}

/* The audit names artifact id's lineage summary (and, when want is not NULL, that text). */
static void expect_audit_names(const char *id, const char *want)
{
    char problem[300], named[96];
    CU_ASSERT_FALSE(audit_intact(problem, sizeof problem));
    snprintf(named, sizeof named, "artifact %s's lineage summary", id);
    if (strstr(problem, named) == NULL)
        printf("\n    audit: %s (wanted %s)", problem, named);
    CU_ASSERT_PTR_NOT_NULL(strstr(problem, named));
    if (want != NULL)
        CU_ASSERT_PTR_NOT_NULL(strstr(problem, want));
}

static void expect_audit_intact(void)
{
    char problem[300];
    bool intact = audit_intact(problem, sizeof problem);
    if (!intact)
        printf("\n    audit: %s", problem);
    CU_ASSERT_TRUE(intact);
}

static void expect_allowed(void)
{
    char codes[256];
    CU_ASSERT_EQUAL(check_deepest(codes, sizeof codes), CHARTER__V1__OUTCOME__ALLOW);
}

static void expect_refused(const char *code)
{
    char codes[256];
    int outcome = check_deepest(codes, sizeof codes);
    CU_ASSERT_TRUE(outcome == CHARTER__V1__OUTCOME__DENY ||
                   outcome == CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_PTR_NOT_NULL(strstr(codes, code));
}

/* RecordOutput of one note derived from input in context ctx: its outcome; *out (64 bytes)
 * the new artifact's id, "" when none was recorded. */
static int record_note(const char *ctx, const char *input, const char *title, char *out)
{
    char *inputs[1] = {(char *)input};
    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    ro.context_id = (char *)ctx;
    ro.input_ids = inputs;
    ro.n_input_ids = 1;
    ro.title = (char *)title;
    ro.content = "a note";
    Charter__V1__RecordOutputResponse *rec = NULL;
    charter_status st;
    out[0] = '\0';
    if (charter_record_output(op, &ro, &rec, &st) != 0 || rec->decision == NULL)
        return -1;
    int outcome = rec->decision->outcome;
    if (rec->artifact)
        snprintf(out, 64, "%s", rec->artifact->id);
    charter__v1__record_output_response__free_unpacked(rec, NULL);
    return outcome;
}

/* Whether the snapshot of event seq of the suite's run names, under "summaries", the summary
 * hash want for artifact ARGV[3] ("*": the one the artifact stores now). Replies 1 or 0. */
static const char *NAMES_SUMMARY =
    "local s = redis.call('HGET', KEYS[1] .. ':event:' .. ARGV[1] .. ':' .. ARGV[2], "
    "'snapshot') "
    "if not s then return 0 end "
    "local want = ARGV[4] "
    "if want == '*' then want = redis.call('HGET', KEYS[1] .. ':artifact:' .. ARGV[3], "
    "'summary_hash') end "
    "if not want or want == '' and ARGV[4] == '*' then return 0 end "
    "for _, e in ipairs(cjson.decode(s).summaries or {}) do "
    "  if e.id == ARGV[3] and e.summary_hash == want then return 1 end "
    "end return 0";

/* The decision recorded as event seq names artifact id's summary hash want ("*": the one the
 * artifact stores). */
static void expect_names_summary(uint64_t seq, const char *id, const char *want)
{
    char seqs[24];
    snprintf(seqs, sizeof seqs, "%llu", (unsigned long long)seq);
    const char *args[4] = {run_id, seqs, id, want};
    long long named = 0;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, NAMES_SUMMARY, args, 4, &named), 0);
    CU_ASSERT_EQUAL(named, 1);
}

/* Replaying event seq of the suite's run decides it again, from its snapshot alone, as it was
 * recorded: the facts a decision names are enough to replay it, whatever it read. */
static void expect_replay_matches(uint64_t seq)
{
    Charter__V1__ReplayDecisionRequest req = CHARTER__V1__REPLAY_DECISION_REQUEST__INIT;
    req.run_id = run_id;
    req.seq = seq;
    Charter__V1__ReplayDecisionResponse *r = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_replay_decision(op, &req, &r, &st), 0);
    CU_ASSERT_FALSE(r->no_snapshot);
    CU_ASSERT_TRUE(r->matches);
    charter__v1__replay_decision_response__free_unpacked(r, NULL);
}

/* A public lineage DEPTH notes deep over vendor_a, recorded through the API, in scope of the
 * report step. */
static void test_a_lineage_recorded_through_the_api_carries_its_records(void)
{
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    Charter__V1__RunView *run = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &cr, &run, &st), 0);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(op, run->run->id, "research", research), 0);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(op, run->run->id, "report", report_ctx), 0);
    snprintf(run_id, sizeof run_id, "%s", run->run->id);
    charter__v1__run_view__free_unpacked(run, NULL);

    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = research;
    rs.resource_id = "vendor_a";
    Charter__V1__ReadSourceResponse *src = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_read_source(op, &rs, &src, &st), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src->artifact);
    snprintf(ids[0], sizeof ids[0], "%s", src->artifact->id);
    charter__v1__read_source_response__free_unpacked(src, NULL);
    for (int i = 1; i <= DEPTH; i++) {
        char title[64];
        snprintf(title, sizeof title, "Note %d", i);
        char *inputs[1] = {ids[i - 1]};
        Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
        ro.context_id = research;
        ro.input_ids = inputs;
        ro.n_input_ids = 1;
        ro.title = title;
        ro.content = "a note";
        Charter__V1__RecordOutputResponse *rec = NULL;
        CU_ASSERT_EQUAL_FATAL(charter_record_output(op, &ro, &rec, &st), 0);
        CU_ASSERT_EQUAL_FATAL(rec->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
        snprintf(ids[i], sizeof ids[i], "%s", rec->artifact->id);
        charter__v1__record_output_response__free_unpacked(rec, NULL);
    }
    long long with = -1;
    CU_ASSERT_EQUAL(harness_graph_eval(graph, WITH_RECORDS, NULL, 0, &with), 0);
    CU_ASSERT_EQUAL(with, DEPTH + 1);
    /* Twice: the second check compares the graph with records charterd already holds. */
    expect_allowed();
    expect_allowed();
    expect_audit_intact();
}

/* What the decision reads: the payload's own node and edges, and its sources' labels. Every
 * change of them behind the server's back turns the check into a refusal; undoing it allows
 * the check again. */
static void test_a_deleted_derived_from_edge_of_the_payload_is_refused(void)
{
    char key[128];
    snprintf(key, sizeof key, ":artifact:%s:derived_from", ids[DEPTH]);
    redis_do("SREM", key, ids[DEPTH - 1], NULL);
    expect_refused("PROVENANCE_INCOMPLETE");
    redis_do("SADD", key, ids[DEPTH - 1], NULL);
    expect_allowed();
}

static void test_a_relabelled_payload_is_refused(void)
{
    char key[128];
    snprintf(key, sizeof key, ":artifact:%s", ids[DEPTH]);
    redis_do("HSET", key, "conf", "2");
    expect_refused("LABEL_MISMATCH");
    redis_do("HSET", key, "conf", "0");
    expect_allowed();
}

/* Swaps the payload's content hash for another valid one (ARGV[2] "do"), or puts it back
 * ("undo"), as someone with redis-cli replacing the bytes and their hash would. */
static const char *SWAP_HASH =
    "local k = KEYS[1] .. ARGV[1] "
    "if ARGV[2] == 'do' then "
    "redis.call('HSET', k, 'was_hash', redis.call('HGET', k, 'hash')) "
    "redis.call('HSET', k, 'hash', string.rep('a', 64)) "
    "else redis.call('HSET', k, 'hash', redis.call('HGET', k, 'was_hash')) "
    "redis.call('HDEL', k, 'was_hash') end return 1";

/* The payload's content hash is the one its summary was made for: bytes and hash swapped
 * behind the API's back are refused at decision time, not only found by audit. */
static void test_a_payload_whose_content_hash_was_swapped_is_refused(void)
{
    char key[128];
    snprintf(key, sizeof key, ":artifact:%s", ids[DEPTH]);
    const char *swap[2] = {key, "do"}, *back[2] = {key, "undo"};
    long long one = 0;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, SWAP_HASH, swap, 2, &one), 0);
    expect_refused("PROVENANCE_INCOMPLETE");
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, SWAP_HASH, back, 2, &one), 0);
    expect_allowed();
}

static void test_a_deleted_producer_of_the_payload_is_refused(void)
{
    char key[128];
    snprintf(key, sizeof key, ":artifact:%s:produced_by", ids[DEPTH]);
    redis_do("DEL", key, NULL, NULL);
    expect_refused("PROVENANCE_INCOMPLETE");
    redis_do("SADD", key, research, NULL);
    expect_allowed();
}

static void test_a_resource_edge_added_to_a_derived_artifact_is_refused(void)
{
    char key[128];
    snprintf(key, sizeof key, ":artifact:%s:from_resource", ids[DEPTH]);
    redis_do("SADD", key, "vendor_a", NULL);
    expect_refused("PROVENANCE_INCOMPLETE");
    redis_do("DEL", key, NULL, NULL);
    expect_allowed();
}

static void test_a_relabelled_resource_is_refused(void)
{
    redis_do("HSET", ":resource:vendor_a", "conf", "2");
    expect_refused("LABEL_MISMATCH");
    redis_do("HSET", ":resource:vendor_a", "conf", "0");
    expect_allowed();
}

/* A summary edited behind the server's back no longer hashes to its summary_hash: the
 * decision is UNKNOWN, never decided from it, and restoring it allows again. */
static void test_a_tampered_summary_gives_unknown(void)
{
    char key[128];
    snprintf(key, sizeof key, ":artifact:%s", ids[DEPTH]);
    static const char *SWAP = "local k = KEYS[1] .. ARGV[1] "
                              "local s = redis.call('HGET', k, 'summary') "
                              "redis.call('HSET', k, 'summary', ARGV[2] == 'undo' and "
                              "(s:gsub('\"depth\":99', '\"depth\":21')) or "
                              "(s:gsub('\"depth\":21', '\"depth\":99'))) return 1";
    const char *tamper[2] = {key, "do"};
    long long one = 0;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, SWAP, tamper, 2, &one), 0);
    char codes[256];
    CU_ASSERT_EQUAL(check_deepest(codes, sizeof codes), CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_PTR_NOT_NULL(strstr(codes, "GRAPH_ERROR"));
    CU_ASSERT_EQUAL(deliver_deepest(codes, sizeof codes), CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_PTR_NOT_NULL(strstr(codes, "GRAPH_ERROR"));
    char made[64];
    CU_ASSERT_EQUAL(record_note(research, ids[DEPTH], "From a tampered note", made),
                    CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_STRING_EQUAL(made, "");
    expect_audit_names(ids[DEPTH], "no longer hashes to its summary_hash");
    const char *undo[2] = {key, "undo"};
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, SWAP, undo, 2, &one), 0);
    expect_allowed();
    expect_audit_intact();
}

/* Edits deeper than the payload's own node no longer change a decision: the summary stored at
 * creation stands for the ancestry (audit re-derives it from the raw graph and names them). */
static void test_deep_edits_no_longer_change_the_decision(void)
{
    char edge[128], node[128], producer[128];
    snprintf(edge, sizeof edge, ":artifact:%s:derived_from", ids[DEPTH / 2]);
    snprintf(node, sizeof node, ":artifact:%s", ids[3]);
    snprintf(producer, sizeof producer, ":artifact:%s:produced_by", ids[DEPTH - 1]);
    redis_do("SREM", edge, ids[DEPTH / 2 - 1], NULL);
    expect_allowed();
    expect_audit_names(ids[DEPTH / 2], NULL);
    redis_do("HSET", node, "conf", "2");
    expect_allowed();
    expect_audit_names(ids[3], NULL); /* the first in creation order */
    redis_do("DEL", producer, NULL, NULL);
    expect_allowed();
    char codes[256];
    CU_ASSERT_EQUAL(deliver_deepest(codes, sizeof codes), CHARTER__V1__OUTCOME__ALLOW);
    redis_do("SADD", edge, ids[DEPTH / 2 - 1], NULL);
    redis_do("HSET", node, "conf", "0");
    expect_audit_names(ids[DEPTH - 1], NULL);
    redis_do("SADD", producer, research, NULL);
    expect_audit_intact();
}

/* Every input decision names the summary hash it was decided with, in its event's snapshot. */
static void test_every_input_decision_names_its_summary_hash(void)
{
    checked c = check_one(report_ctx, ids[DEPTH]);
    CU_ASSERT_EQUAL(c.outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_TRUE_FATAL(c.seq > 0);
    expect_names_summary(c.seq, ids[DEPTH], "*");
    expect_replay_matches(c.seq);
}

static char analyze_ctx[129];
static char budget_ids[4][64]; /* budget's source, then three notes in the analyze step */

/* A refusal keeps its witness path, walked on the deny path only; an edge or a label deeper
 * than the input's own node changes neither its outcome nor its codes (the summary decides;
 * audit names the edit), only the path the witness can show. */
static void test_a_refusal_keeps_its_path_and_deep_edits_do_not_change_it(void)
{
    CU_ASSERT_EQUAL_FATAL(harness_open_step(op, run_id, "analyze", analyze_ctx), 0);
    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = analyze_ctx;
    rs.resource_id = "budget";
    Charter__V1__ReadSourceResponse *src = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_read_source(op, &rs, &src, &st), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src->artifact);
    snprintf(budget_ids[0], sizeof budget_ids[0], "%s", src->artifact->id);
    charter__v1__read_source_response__free_unpacked(src, NULL);
    for (int i = 1; i <= 3; i++) {
        char title[32];
        snprintf(title, sizeof title, "Budget note %d", i);
        CU_ASSERT_EQUAL_FATAL(record_note(analyze_ctx, budget_ids[i - 1], title, budget_ids[i]),
                              CHARTER__V1__OUTCOME__ALLOW);
    }
    checked c = check_one(report_ctx, budget_ids[3]);
    CU_ASSERT_EQUAL(c.outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_STRING_EQUAL(c.codes, "INPUT_OUT_OF_SCOPE ");
    CU_ASSERT_STRING_EQUAL(c.witness, "budget (confidential) \xe2\x86\x92 Budget note 1 "
                                      "\xe2\x86\x92 Budget note 2 \xe2\x86\x92 Budget note 3 "
                                      "\xe2\x86\x92 report step {vendor_a, vendor_b, vendor_c}");
    expect_names_summary(c.seq, budget_ids[3], "*");
    expect_replay_matches(c.seq);

    /* Budget note 2 loses its DERIVED_FROM edge: a walk would find a derived artifact without
     * parents and no budget, but the refusal is the summary's, with its short path. */
    char edge[128];
    snprintf(edge, sizeof edge, ":artifact:%s:derived_from", budget_ids[2]);
    redis_do("SREM", edge, budget_ids[1], NULL);
    c = check_one(report_ctx, budget_ids[3]);
    CU_ASSERT_EQUAL(c.outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_STRING_EQUAL(c.codes, "INPUT_OUT_OF_SCOPE ");
    CU_ASSERT_STRING_EQUAL(c.witness, "budget (confidential) \xe2\x86\x92 Budget note 3 "
                                      "\xe2\x86\x92 report step {vendor_a, vendor_b, vendor_c}");
    expect_names_summary(c.seq, budget_ids[3], "*");
    expect_replay_matches(c.seq);
    expect_audit_names(budget_ids[2], "differs from the one re-derived");
    redis_do("SADD", edge, budget_ids[1], NULL);
    expect_audit_intact();
}

/* Moves artifact ARGV[1]'s summary and summary_hash aside (ARGV[2] "do") or back ("undo"), as
 * someone with redis-cli deleting them would (or as an artifact written before summaries were
 * kept has none). */
static const char *STASH_SUMMARY = "local k = KEYS[1] .. ARGV[1] "
                                   "local from, to = 'summary', 'was_summary' "
                                   "if ARGV[2] == 'undo' then from, to = to, from end "
                                   "local f = redis.call('HMGET', k, from, from .. '_hash') "
                                   "redis.call('HSET', k, to, f[1], to .. '_hash', f[2]) "
                                   "redis.call('HDEL', k, from, from .. '_hash') return 1";

/* Checks RULE-INPUT-SUMMARY. An artifact without a summary (deleted, or written before
 * summaries were kept) is UNKNOWN at every input decision, whatever its ancestry: it is never
 * walked in the summary's place, so a deep edit cannot be decided from either. Audit names it;
 * putting the summary back allows. */
static void test_an_artifact_without_a_summary_is_unknown_never_walked(void)
{
    char key[128], made[64];
    snprintf(key, sizeof key, ":artifact:%s", ids[DEPTH]);
    const char *stash[2] = {key, "do"}, *back[2] = {key, "undo"};
    long long one = 0;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, STASH_SUMMARY, stash, 2, &one), 0);
    checked c = check_one(report_ctx, ids[DEPTH]);
    CU_ASSERT_EQUAL(c.outcome, CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_STRING_EQUAL(c.codes, "GRAPH_ERROR ");
    CU_ASSERT_PTR_NOT_NULL(strstr(c.witness, "has no lineage summary"));
    CU_ASSERT_TRUE_FATAL(c.seq > 0);
    expect_names_summary(c.seq, ids[DEPTH], "");
    expect_replay_matches(c.seq);
    /* RecordOutput's gate: UNKNOWN, and nothing is recorded. */
    CU_ASSERT_EQUAL(record_note(research, ids[DEPTH], "From an unsummarised note", made),
                    CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_STRING_EQUAL(made, "");
    /* Deliver's gate: UNKNOWN too, never decided from the ancestry walked in its place (a
     * walk would follow whatever edges were edited below the payload), and nothing is
     * committed. */
    char codes[256];
    CU_ASSERT_EQUAL(deliver_deepest(codes, sizeof codes), CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_STRING_EQUAL(codes, "GRAPH_ERROR ");
    char edge[160];
    snprintf(edge, sizeof edge, ":artifact:%s:derived_from", ids[1]);
    redis_do("DEL", edge, NULL, NULL);
    c = check_one(report_ctx, ids[DEPTH]);
    CU_ASSERT_EQUAL(c.outcome, CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_STRING_EQUAL(c.codes, "GRAPH_ERROR ");
    CU_ASSERT_EQUAL(deliver_deepest(codes, sizeof codes), CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_STRING_EQUAL(codes, "GRAPH_ERROR ");
    redis_do("SADD", edge, ids[0], NULL);
    expect_audit_names(ids[DEPTH], "has no lineage summary");
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, STASH_SUMMARY, back, 2, &one), 0);
    expect_allowed();
    expect_audit_intact();
}

/* An artifact's content rewritten behind the API's back, its hash left as it was: no gate
 * reads the content of an input (the summary names its hash, and the input gate compares the
 * stored hash with it), but a host feeds that content to a model, so audit names it. Putting
 * the content back leaves the run intact. */
static void test_audit_names_content_that_no_longer_has_its_hash(void)
{
    char key[128], problem[300], named[96];
    snprintf(key, sizeof key, ":artifact:%s", ids[DEPTH / 2]);
    redis_do("HSET", key, "content", "CEILING-48200");
    expect_allowed(); /* the payload's own node is untouched */
    CU_ASSERT_FALSE(audit_intact(problem, sizeof problem));
    snprintf(named, sizeof named, "artifact %s's content", ids[DEPTH / 2]);
    if (strstr(problem, named) == NULL)
        printf("\n    audit: %s (wanted %s)", problem, named);
    CU_ASSERT_PTR_NOT_NULL(strstr(problem, named));
    redis_do("HSET", key, "content", "a note");
    expect_audit_intact();
}

/* --- with an integrity key: summaries sealed by charterd ------------------------------------ */

static char tmpdir[] = "/tmp/charter-lineage-XXXXXX";
static char key_path[256];

static int sealed_init(void)
{
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(key_path, sizeof key_path, "%s/integrity.key", tmpdir);
    if (harness_sh("umask 077 && openssl rand -hex 32 > %s", key_path) != 0)
        return -1;
    harness_graph_name(graph, sizeof graph, "lineage_sealed");
    store *st = harness_store_open(graph);
    store_close(st);
    const char *extra[2] = {"--integrity-key", key_path};
    harness_charterd_opts o = {.graph = graph, .extra_args = extra, .n_extra = 2};
    if (harness_charterd_start(&o, &daemon_) != 0)
        return -1;
    return harness_client_open(daemon_.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &op);
}

static int sealed_clean(void)
{
    int rc = suite_clean();
    harness_sh("rm -rf %s", tmpdir);
    return rc;
}

/* Rewrites the payload's summary and its summary_hash together (ARGV[2] "do" or "undo"), as
 * someone with redis-cli who knows the hash is a SHA-1 could. */
static const char *FORGE = "local k = KEYS[1] .. ARGV[1] "
                           "local s = redis.call('HGET', k, 'summary') "
                           "local t = ARGV[2] == 'undo' and "
                           "(s:gsub('\"depth\":99', '\"depth\":21')) or "
                           "(s:gsub('\"depth\":21', '\"depth\":99')) "
                           "redis.call('HSET', k, 'summary', t, 'summary_hash', "
                           "redis.sha1hex(t)) return 1";

/* Moves artifact ARGV[1]'s summary_seal aside (ARGV[2] "do"), back ("undo"), or replaces it
 * with a seal of the right shape that is not charterd's ("forge"; "undo" puts the real one
 * back). */
static const char *STASH_SEAL =
    "local k = KEYS[1] .. ARGV[1] "
    "if ARGV[2] == 'undo' then "
    "  redis.call('HSET', k, 'summary_seal', redis.call('HGET', k, 'was_seal')) "
    "  redis.call('HDEL', k, 'was_seal') return 1 end "
    "redis.call('HSET', k, 'was_seal', redis.call('HGET', k, 'summary_seal')) "
    "if ARGV[2] == 'forge' then redis.call('HSET', k, 'summary_seal', string.rep('e', 64)) "
    "else redis.call('HDEL', k, 'summary_seal') end return 1";

/* Under a key the summary counts only with charterd's seal: a summary forged with a matching
 * SHA-1 is UNKNOWN at decision time; so is a summary whose seal is gone or is not charterd's,
 * whatever its ancestry (never walked in its place). Audit names the missing or wrong seal. */
static void test_a_forged_or_unsealed_summary_is_unknown(void)
{
    char key[128], codes[256];
    snprintf(key, sizeof key, ":artifact:%s", ids[DEPTH]);
    const char *forge[2] = {key, "do"}, *undo[2] = {key, "undo"};
    long long one = 0;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, FORGE, forge, 2, &one), 0);
    CU_ASSERT_EQUAL(check_deepest(codes, sizeof codes), CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_PTR_NOT_NULL(strstr(codes, "GRAPH_ERROR"));
    CU_ASSERT_EQUAL(deliver_deepest(codes, sizeof codes), CHARTER__V1__OUTCOME__UNKNOWN);
    expect_audit_names(ids[DEPTH], "differs from the one re-derived");
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, FORGE, undo, 2, &one), 0);
    expect_allowed();

    char edge[128];
    snprintf(edge, sizeof edge, ":artifact:%s:derived_from", ids[DEPTH / 2]);
    redis_do("SREM", edge, ids[DEPTH / 2 - 1], NULL);
    expect_allowed(); /* sealed: the summary stands for the ancestry */
    const char *unseal[2] = {key, "do"}, *reseal[2] = {key, "undo"}, *fake[2] = {key, "forge"};
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, STASH_SEAL, unseal, 2, &one), 0);
    checked c = check_one(report_ctx, ids[DEPTH]);
    CU_ASSERT_EQUAL(c.outcome, CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_STRING_EQUAL(c.codes, "GRAPH_ERROR ");
    CU_ASSERT_PTR_NOT_NULL(strstr(c.witness, "carries no seal"));
    expect_names_summary(c.seq, ids[DEPTH], "*");
    expect_replay_matches(c.seq);
    CU_ASSERT_EQUAL(deliver_deepest(codes, sizeof codes), CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_STRING_EQUAL(codes, "GRAPH_ERROR ");
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, STASH_SEAL, reseal, 2, &one), 0);
    expect_allowed();
    redis_do("SADD", edge, ids[DEPTH / 2 - 1], NULL);
    expect_audit_intact();

    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, STASH_SEAL, unseal, 2, &one), 0);
    expect_audit_names(ids[DEPTH], "carries no seal");
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, STASH_SEAL, reseal, 2, &one), 0);
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, STASH_SEAL, fake, 2, &one), 0);
    c = check_one(report_ctx, ids[DEPTH]);
    CU_ASSERT_EQUAL(c.outcome, CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.witness, "does not verify"));
    expect_audit_names(ids[DEPTH], "seal does not verify");
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, STASH_SEAL, reseal, 2, &one), 0);
    expect_allowed();
    expect_audit_intact();
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"a lineage recorded through the API carries its records",
     test_a_lineage_recorded_through_the_api_carries_its_records},
    {"a deleted DERIVED_FROM edge of the payload is refused",
     test_a_deleted_derived_from_edge_of_the_payload_is_refused},
    {"a relabelled payload is refused", test_a_relabelled_payload_is_refused},
    {"a deleted producer of the payload is refused",
     test_a_deleted_producer_of_the_payload_is_refused},
    {"a payload whose content hash was swapped is refused",
     test_a_payload_whose_content_hash_was_swapped_is_refused},
    {"a resource edge added to a derived artifact is refused",
     test_a_resource_edge_added_to_a_derived_artifact_is_refused},
    {"a relabelled resource is refused", test_a_relabelled_resource_is_refused},
    {"a tampered summary gives unknown", test_a_tampered_summary_gives_unknown},
    {"deep edits no longer change the decision", test_deep_edits_no_longer_change_the_decision},
    {"every input decision names its summary hash",
     test_every_input_decision_names_its_summary_hash},
    {"a refusal keeps its path and deep edits do not change it",
     test_a_refusal_keeps_its_path_and_deep_edits_do_not_change_it},
    {"an artifact without a summary is unknown, never walked",
     test_an_artifact_without_a_summary_is_unknown_never_walked},
    {"audit names content that no longer has its hash",
     test_audit_names_content_that_no_longer_has_its_hash},
};
static const harness_test sealed_tests[] = {
    {"a lineage recorded through the API carries its records",
     test_a_lineage_recorded_through_the_api_carries_its_records},
    {"deep edits no longer change the decision", test_deep_edits_no_longer_change_the_decision},
    {"a forged or unsealed summary is unknown", test_a_forged_or_unsealed_summary_is_unknown},
    {"audit names content that no longer has its hash",
     test_audit_names_content_that_no_longer_has_its_hash},
};
static const harness_suite suites[] = {
    {"lineage checked against its records", suite_init, suite_clean, HARNESS_TABLE(tests)},
    {"summaries sealed under an integrity key", sealed_init, sealed_clean,
     HARNESS_TABLE(sealed_tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
