/*
 * test_snapshots.c - decision snapshots name lineage records stored once, by content, and large
 * snapshots go to blobs stored once; both still replay, and altered or missing facts are refused.
 *
 * An allowed decision's snapshot holds the lineage summary it was decided from; a refusal,
 * which walks the ancestry for its witness's path, names the walk by its lineage record (the
 * SHA-1 of the payload's record, which names its parents' records), so checking a deep
 * artifact stores no copy of its ancestry either way; a snapshot over 4 KiB goes to a blob
 * named by its SHA-256. The tests drive a real charterd over
 * NNG: records and blobs are shared by identical decisions, replay decides from them, and a
 * record or blob changed or deleted behind the server's back is refused, naming it.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"

#define DEPTH 60

static char graph[64];
static harness_charterd daemon_;
static charter_client *op;
static char deepest[64];
static char lineage_ids[DEPTH + 1][64]; /* the source, then each note */
static uint64_t seq_all;
static char report_ctx[129];
static char narrow_ctx[129]; /* the report step narrowed to vendor_b: the lineage is refused */
static uint64_t seq_first, seq_second;           /* allowed from the lineage summary */
static uint64_t seq_walk_first, seq_walk_second; /* refused: the walk's records name its path */

static const char *COUNT_BLOBS = "local n, cursor = 0, '0' "
                                 "repeat "
                                 "  local r = redis.call('SCAN', cursor, 'MATCH', KEYS[1] .. "
                                 "':blob:*', 'COUNT', 1000) "
                                 "  cursor = r[1]; n = n + #r[2] "
                                 "until cursor == '0' "
                                 "return n";

static const char *COUNT_RECORDS = "local n, cursor = 0, '0' "
                                   "repeat "
                                   "  local r = redis.call('SCAN', cursor, 'MATCH', KEYS[1] .. "
                                   "':lineage:*', 'COUNT', 1000) "
                                   "  cursor = r[1]; n = n + #r[2] "
                                   "until cursor == '0' "
                                   "return n";

/* The longest snapshot text stored in an event of the graph, in bytes. */
static const char *LONGEST_SNAPSHOT = "local n, cursor = 0, '0' "
                                      "repeat "
                                      "  local r = redis.call('SCAN', cursor, 'MATCH', KEYS[1] .. "
                                      "':event:*', 'COUNT', 1000) "
                                      "  cursor = r[1] "
                                      "  for _, k in ipairs(r[2]) do "
                                      "    if redis.call('TYPE', k).ok == 'hash' then "
                                      "      n = math.max(n, redis.call('HSTRLEN', k, 'snapshot')) "
                                      "    end "
                                      "  end "
                                      "until cursor == '0' "
                                      "return n";

static long long eval_count(const char *script)
{
    long long n = -1;
    if (harness_graph_eval(graph, script, NULL, 0, &n) != 0)
        return -1;
    return n;
}

static long long count_blobs(void)
{
    return eval_count(COUNT_BLOBS);
}

static int suite_init(void)
{
    harness_graph_name(graph, sizeof graph, "snapshots");
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

/* A public lineage DEPTH artifacts deep, each derived from the one before, in an external run;
 * then the report step's context, for which the whole lineage is in scope. */
static void test_a_deep_lineage_is_recorded(void)
{
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    Charter__V1__RunView *run = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &cr, &run, &st), 0);
    char research[129];
    CU_ASSERT_EQUAL_FATAL(harness_open_step(op, run->run->id, "research", research), 0);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(op, run->run->id, "report", report_ctx), 0);
    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    char *vendor_b[1] = {"vendor_b"};
    os.run_id = run->run->id;
    os.step = "report";
    os.parent_context_id = report_ctx;
    os.resources = vendor_b;
    os.n_resources = 1;
    Charter__V1__StepContext *sc = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_open_step(op, &os, &sc, &st), 0);
    snprintf(narrow_ctx, sizeof narrow_ctx, "%s", sc->context_id);
    charter__v1__step_context__free_unpacked(sc, NULL);
    charter__v1__run_view__free_unpacked(run, NULL);

    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = research;
    rs.resource_id = "vendor_a";
    Charter__V1__ReadSourceResponse *src = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_read_source(op, &rs, &src, &st), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src->artifact);
    snprintf(deepest, sizeof deepest, "%s", src->artifact->id);
    snprintf(lineage_ids[0], sizeof lineage_ids[0], "%s", deepest);
    charter__v1__read_source_response__free_unpacked(src, NULL);

    for (int i = 0; i < DEPTH; i++) {
        char title[160];
        snprintf(title, sizeof title,
                 "Research note %d, a title long enough that the ancestry outgrows 4 KiB", i);
        char *inputs[1] = {deepest};
        Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
        ro.context_id = research;
        ro.input_ids = inputs;
        ro.n_input_ids = 1;
        ro.title = title;
        ro.content = "a note";
        Charter__V1__RecordOutputResponse *rec = NULL;
        CU_ASSERT_EQUAL_FATAL(charter_record_output(op, &ro, &rec, &st), 0);
        CU_ASSERT_EQUAL_FATAL(rec->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
        snprintf(deepest, sizeof deepest, "%s", rec->artifact->id);
        snprintf(lineage_ids[i + 1], sizeof lineage_ids[i + 1], "%s", deepest);
        charter__v1__record_output_response__free_unpacked(rec, NULL);
    }
}

/* CheckInput of n artifacts in context ctx: the event seq of a decision with outcome want,
 * else 0. */
static uint64_t check_in(const char *ctx, char **ids, size_t n, int want)
{
    Charter__V1__CheckInputRequest req = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    req.context_id = (char *)ctx;
    req.artifact_ids = ids;
    req.n_artifact_ids = n;
    Charter__V1__CheckInputResponse *resp = NULL;
    charter_status st;
    if (charter_check_input(op, &req, &resp, &st) != 0)
        return 0;
    uint64_t seq = (int)resp->decision->outcome == want ? resp->event_seq : 0;
    charter__v1__check_input_response__free_unpacked(resp, NULL);
    return seq;
}

/* CheckInput of n artifacts for the report step: the event seq of an ALLOW, else 0. */
static uint64_t check(char **ids, size_t n)
{
    return check_in(report_ctx, ids, n, CHARTER__V1__OUTCOME__ALLOW);
}

static uint64_t check_deepest(void)
{
    char *ids[1] = {deepest};
    return check(ids, 1);
}

static void test_a_decision_names_its_ancestry_without_copying_it(void)
{
    CU_ASSERT_FATAL(deepest[0] != '\0');
    /* Recording the lineage stored one record per artifact (each output's input check). */
    long long records = eval_count(COUNT_RECORDS);
    CU_ASSERT_TRUE(records >= DEPTH);
    CU_ASSERT_TRUE(records <= DEPTH + 1);
    seq_first = check_deepest();
    CU_ASSERT_TRUE_FATAL(seq_first > 0);
    seq_second = check_deepest();
    CU_ASSERT_TRUE_FATAL(seq_second > seq_first);
    /* Checking from the summary stores no record. */
    CU_ASSERT_EQUAL(eval_count(COUNT_RECORDS), records);
    /* The ancestry is 61 artifacts with titles of some 80 bytes: a copy would be over 12 KiB;
     * every snapshot names it, by its summary or its records, in well under 1.5 KiB. */
    long long longest = eval_count(LONGEST_SNAPSHOT);
    CU_ASSERT_TRUE(longest > 0);
    CU_ASSERT_TRUE(longest < 1536);
    /* A refusal walks the lineage for its witness's path, and its snapshot names the walk's
     * records instead of copying the lineage: the records kept at creation are the walk's. */
    char *ids[1] = {deepest};
    seq_walk_first = check_in(narrow_ctx, ids, 1, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_TRUE_FATAL(seq_walk_first > seq_second);
    seq_walk_second = check_in(narrow_ctx, ids, 1, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_TRUE_FATAL(seq_walk_second > seq_walk_first);
    /* Checking again stores no record: every fact of the walk is stored already. */
    CU_ASSERT_EQUAL(eval_count(COUNT_RECORDS), records > DEPTH ? records : DEPTH + 1);
    CU_ASSERT_TRUE(eval_count(LONGEST_SNAPSHOT) < 1536);
}

static void test_identical_decisions_share_one_blob(void)
{
    CU_ASSERT_FATAL(deepest[0] != '\0');
    /* Every artifact of the lineage at once: 61 references make a snapshot over 4 KiB. */
    char *ids[DEPTH + 1];
    for (size_t i = 0; i <= DEPTH; i++)
        ids[i] = lineage_ids[i];
    long long before = count_blobs();
    CU_ASSERT_TRUE_FATAL(before >= 0);
    seq_all = check(ids, DEPTH + 1);
    CU_ASSERT_TRUE_FATAL(seq_all > 0);
    long long after_one = count_blobs();
    CU_ASSERT_EQUAL(after_one, before + 1); /* this snapshot is new: one blob */
    CU_ASSERT_TRUE_FATAL(check(ids, DEPTH + 1) > seq_all);
    CU_ASSERT_EQUAL(count_blobs(), after_one); /* the same facts again: no second copy */
}

static Charter__V1__ReplayDecisionResponse *replay(uint64_t seq, charter_status *st)
{
    Charter__V1__ReplayDecisionRequest req = CHARTER__V1__REPLAY_DECISION_REQUEST__INIT;
    /* The decisions are events of the suite's only run. */
    Charter__V1__ListRunsRequest lr = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
    Charter__V1__ListRunsResponse *runs = NULL;
    if (charter_list_runs(op, &lr, &runs, st) != 0 || runs->n_runs == 0)
        return NULL;
    req.run_id = runs->runs[0]->id;
    req.seq = seq;
    Charter__V1__ReplayDecisionResponse *resp = NULL;
    int rc = charter_replay_decision(op, &req, &resp, st);
    charter__v1__list_runs_response__free_unpacked(runs, NULL);
    return rc == 0 ? resp : NULL;
}

static void expect_replayed(uint64_t seq, int outcome)
{
    charter_status st;
    Charter__V1__ReplayDecisionResponse *r = replay(seq, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_FALSE(r->no_snapshot);
    CU_ASSERT_TRUE(r->matches);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r->replayed);
    CU_ASSERT_EQUAL(r->replayed->outcome, outcome);
    charter__v1__replay_decision_response__free_unpacked(r, NULL);
}

static void expect_replayed_allow(uint64_t seq)
{
    expect_replayed(seq, CHARTER__V1__OUTCOME__ALLOW);
}

/* Replay of seq is refused as FAILED_PRECONDITION with a message holding both words. */
static void expect_replay_refused(uint64_t seq, const char *word, const char *names)
{
    charter_status st;
    Charter__V1__ReplayDecisionResponse *r = replay(seq, &st);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_EQUAL(st.code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, word));
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, names));
    if (r)
        charter__v1__replay_decision_response__free_unpacked(r, NULL);
}

static void test_replay_decides_from_the_lineage_records_and_the_blob(void)
{
    CU_ASSERT_FATAL(seq_first > 0 && seq_second > 0 && seq_all > 0);
    expect_replayed_allow(seq_first);
    expect_replayed_allow(seq_second);
    expect_replayed(seq_walk_first, CHARTER__V1__OUTCOME__DENY);
    expect_replayed(seq_walk_second, CHARTER__V1__OUTCOME__DENY);
    expect_replayed_allow(seq_all);
}

/* Rewrites (ARGV[2] "alter") or deletes ("delete") the lineage record whose text holds
 * ARGV[1]; returns how many records it touched. */
static const char *TOUCH_RECORD = "local n, cursor = 0, '0' "
                                  "repeat "
                                  "  local r = redis.call('SCAN', cursor, 'MATCH', KEYS[1] .. "
                                  "':lineage:*', 'COUNT', 1000) "
                                  "  cursor = r[1] "
                                  "  for _, k in ipairs(r[2]) do "
                                  "    local v = redis.call('GET', k) "
                                  "    if v:find(ARGV[1], 1, true) then "
                                  "      n = n + 1 "
                                  "      if ARGV[2] == 'delete' then redis.call('DEL', k) "
                                  "      else redis.call('SET', k, (v:gsub('\\\"conf\\\":0', "
                                  "'\\\"conf\\\":2'))) end "
                                  "    end "
                                  "  end "
                                  "until cursor == '0' "
                                  "return n";

static void test_an_altered_lineage_record_is_refused_naming_it(void)
{
    CU_ASSERT_FATAL(seq_walk_first > 0);
    /* Relabel one note's record as confidential, as someone with redis-cli could. */
    const char *args[2] = {"Research note 20,", "alter"};
    long long touched = 0;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, TOUCH_RECORD, args, 2, &touched), 0);
    CU_ASSERT_EQUAL(touched, 1);
    expect_replay_refused(seq_walk_first, "altered", "lineage record");
    /* A decision made from the summary holds its facts itself: it still replays. */
    expect_replayed_allow(seq_first);
}

static void test_a_missing_lineage_record_is_refused_naming_it(void)
{
    CU_ASSERT_FATAL(seq_walk_second > 0);
    /* A record nearer the payload than the altered one: the walk meets it first. */
    const char *args[2] = {"Research note 30,", "delete"};
    long long touched = 0;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, TOUCH_RECORD, args, 2, &touched), 0);
    CU_ASSERT_EQUAL(touched, 1);
    expect_replay_refused(seq_walk_second, "missing", "lineage record");
}

static void test_an_altered_blob_is_refused(void)
{
    CU_ASSERT_FATAL(seq_all > 0);
    /* Rewrite every blob of the graph with other facts, as someone with redis-cli could. */
    static const char *ALTER = "local n, cursor = 0, '0' "
                               "repeat "
                               "  local r = redis.call('SCAN', cursor, 'MATCH', KEYS[1] .. "
                               "':blob:*', 'COUNT', 1000) "
                               "  cursor = r[1] "
                               "  for _, k in ipairs(r[2]) do "
                               "    redis.call('SET', k, '{\"gate\":\"input\"}'); n = n + 1 "
                               "  end "
                               "until cursor == '0' "
                               "return n";
    long long altered = 0;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, ALTER, NULL, 0, &altered), 0);
    CU_ASSERT_TRUE(altered >= 1);
    expect_replay_refused(seq_all, "altered", "blob");
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"a deep lineage is recorded", test_a_deep_lineage_is_recorded},
    {"a decision names its ancestry without copying it",
     test_a_decision_names_its_ancestry_without_copying_it},
    {"identical decisions share one blob", test_identical_decisions_share_one_blob},
    {"replay decides from the lineage records and the blob",
     test_replay_decides_from_the_lineage_records_and_the_blob},
    {"an altered lineage record is refused naming it",
     test_an_altered_lineage_record_is_refused_naming_it},
    {"a missing lineage record is refused naming it",
     test_a_missing_lineage_record_is_refused_naming_it},
    {"an altered blob is refused", test_an_altered_blob_is_refused},
};
static const harness_suite suites[] = {
    {"snapshots stored by content", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
