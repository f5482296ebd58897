/*
 * test_whatif.c - Evidence/WhatIf and `charter what-if`: the recorded decisions of real runs
 * decided again under a candidate workflow, with the changes expected written down by hand.
 *
 * One charterd on the test Redis runs the reference workflow (deploy/workflows/procurement.json)
 * twice, scripted: the first run is blocked at the poisoned handoff and recovered, so it ends
 * with a public delivery that leaked nothing; the second stays blocked. Each candidate is the
 * reference definition with one edit made here. Every decision event of both runs is known:
 *   run 1: seq 4 5 6 8 10 11 13 14 16 21 23 24 (14 the cfo delivery, 16 the denied handoff,
 *          24 the public delivery)
 *   run 2: seq 4 5 6 8 10 11 13 14 16
 */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"

#define RUN1_DECISIONS 12
#define RUN2_DECISIONS 9
/* A scripted run records created, then queued and running (two status_changed events) before
 * its first step. */
#define CFO_SEQ 15
#define HANDOFF_SEQ 17
#define PUBLIC_SEQ 25

static const char *CFO_WITNESS =
    "budget (confidential) \xe2\x86\x92 Internal recommendation \xe2\x86\x92 "
    "cfo (clearance internal)";
static const char *PUBLIC_WITNESS = "vendor_c (internal) \xe2\x86\x92 Public vendor comparison "
                                    "\xe2\x86\x92 public (clearance public)";

static char graph[64];
static char tmpdir[] = "/tmp/charter-whatif-XXXXXX";
static harness_charterd daemon_;
static charter_client *op, *viewer;
static char run1[129], run2[129];

/* --- candidates: the reference definition with one edit ----------------------------------- */

static json_t *reference(void)
{
    json_error_t e;
    json_t *w = json_load_file(CHARTER_SOURCE_DIR "/deploy/workflows/procurement.json", 0, &e);
    if (w == NULL)
        fprintf(stderr, "procurement.json: %s (line %d)\n", e.text, e.line);
    return w;
}

/* The entry of list key of w whose field is value. */
static json_t *entry(json_t *w, const char *key, const char *field, const char *value)
{
    json_t *list = json_object_get(w, key);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *v = json_string_value(json_object_get(json_array_get(list, i), field));
        if (v != NULL && strcmp(v, value) == 0)
            return json_array_get(list, i);
    }
    return NULL;
}

/* cfo's clearance lowered from confidential to internal. */
static json_t *cfo_internal(void)
{
    json_t *w = reference();
    json_t *cfo = entry(w, "recipients", "id", "cfo");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cfo);
    json_object_set_new(cfo, "clearance", json_string("internal"));
    return w;
}

/* vendor_c's quote raised from public to internal. */
static json_t *vendor_c_internal(void)
{
    json_t *w = reference();
    json_t *r = entry(w, "resources", "id", "vendor_c");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    json_object_set_new(r, "confidentiality", json_string("internal"));
    return w;
}

/* The report step (and, with grant, its grant g_reporter) may also read the budget. */
static json_t *report_reads_budget(bool grant)
{
    json_t *w = reference();
    json_t *step = entry(w, "steps", "name", "report");
    json_t *g = entry(w, "grants", "id", "g_reporter");
    CU_ASSERT_PTR_NOT_NULL_FATAL(step);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    json_array_append_new(json_object_get(step, "resources"), json_string("budget"));
    if (grant)
        json_array_append_new(json_object_get(g, "resources"), json_string("budget"));
    return w;
}

/* --- calls -------------------------------------------------------------------------------- */

/* WhatIf with the candidate's bytes (w is consumed). NULL on failure, with *st filled. */
static Charter__V1__WhatIfResponse *what_if_bytes(charter_client *c, const char *bytes,
                                                  const char *run, int64_t since, uint32_t limit,
                                                  charter_status *st)
{
    Charter__V1__WhatIfRequest req = CHARTER__V1__WHAT_IF_REQUEST__INIT;
    req.workflow.data = (uint8_t *)bytes;
    req.workflow.len = strlen(bytes);
    req.run_id = (char *)(run ? run : "");
    req.since = since;
    req.limit = limit;
    Charter__V1__WhatIfResponse *r = NULL;
    charter_status local;
    if (charter_what_if(c, &req, &r, st ? st : &local) != 0) {
        if (!st)
            fprintf(stderr, "WhatIf: %s: %s\n", charter_status_name(local.code), local.message);
        return NULL;
    }
    return r;
}

static Charter__V1__WhatIfResponse *what_if(charter_client *c, json_t *w, const char *run,
                                            uint32_t limit)
{
    char *text = json_dumps(w, JSON_INDENT(2));
    json_decref(w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    Charter__V1__WhatIfResponse *r = what_if_bytes(c, text, run, 0, limit, NULL);
    free(text);
    return r;
}

/* Expects change i to be seq of run, of gate about subject (the step for the input gate),
 * recorded as was and decided now as change says, with the candidate's witness. */
static void expect_change(const Charter__V1__WhatIfResponse *r, size_t i, const char *run,
                          uint64_t seq, const char *gate, const char *step, const char *subject,
                          const char *change, const char *witness)
{
    CU_ASSERT_FATAL(i < r->n_changes);
    const Charter__V1__WhatIfChange *ch = r->changes[i];
    CU_ASSERT_STRING_EQUAL(ch->run_id, run);
    CU_ASSERT_EQUAL(ch->seq, seq);
    CU_ASSERT_STRING_EQUAL(ch->gate, gate);
    CU_ASSERT_STRING_EQUAL(ch->step, step);
    CU_ASSERT_STRING_EQUAL(ch->subject, subject);
    CU_ASSERT_STRING_EQUAL(ch->change, change);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ch->recorded);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ch->candidate);
    CU_ASSERT_STRING_EQUAL(ch->candidate->witness, witness);
    if (ch->seq != seq || strcmp(ch->change, change) != 0)
        fprintf(stderr, "change %zu: run %s seq %llu %s: %s\n", i, ch->run_id,
                (unsigned long long)ch->seq, ch->gate, ch->change);
}

static void expect_count(const Charter__V1__WhatIfResponse *r, const char *change, uint64_t n)
{
    CU_ASSERT_EQUAL_FATAL(r->n_counts, 1);
    CU_ASSERT_STRING_EQUAL(r->counts[0]->change, change);
    CU_ASSERT_EQUAL(r->counts[0]->count, n);
}

/* --- suite -------------------------------------------------------------------------------- */

static int scripted_run(char id[129])
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "scripted";
    Charter__V1__RunView *view = NULL;
    charter_status st;
    if (charter_create_run(op, &req, &view, &st) != 0) {
        fprintf(stderr, "CreateRun: %s\n", st.message);
        return -1;
    }
    snprintf(id, 129, "%s", view->run->id);
    int rc = strcmp(view->run->status, "blocked") == 0 ? 0 : -1;
    charter__v1__run_view__free_unpacked(view, NULL);
    return rc;
}

static int suite_init(void)
{
    if (!mkdtemp(tmpdir))
        return -1;
    harness_graph_name(graph, sizeof graph, "whatif");
    store *st = harness_store_open(graph);
    store_close(st);
    harness_charterd_opts o = {.graph = graph};
    if (harness_charterd_start(&o, &daemon_) != 0 ||
        harness_client_open(daemon_.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &op) != 0 ||
        harness_client_open(daemon_.tcp_url, HARNESS_VIEWER_TOKEN, 30000, &viewer) != 0)
        return -1;
    if (scripted_run(run1) != 0)
        return -1;
    Charter__V1__RecoverRunRequest rr = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    rr.run_id = run1;
    Charter__V1__RecoverRunResponse *rec = NULL;
    charter_status cst;
    if (charter_recover_run(op, &rr, &rec, &cst) != 0)
        return -1;
    int rc = strcmp(rec->run->status, "completed") == 0 ? 0 : -1;
    charter__v1__recover_run_response__free_unpacked(rec, NULL);
    /* created_at has whole-second resolution in --since: the second run starts a second later */
    struct timespec pause = {1, 100000000};
    nanosleep(&pause, NULL);
    return rc == 0 ? scripted_run(run2) : -1;
}

static int suite_clean(void)
{
    charter_client_close(op);
    charter_client_close(viewer);
    int rc = daemon_.pid ? harness_charterd_stop(&daemon_) : 0;
    harness_graph_drop(graph);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        rc = -1;
    return rc == 0 ? 0 : -1;
}

/* --- tests -------------------------------------------------------------------------------- */

static void test_unchanged_workflow_changes_no_decision(void)
{
    Charter__V1__WhatIfResponse *r = what_if(op, reference(), NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->n_changes, 0);
    CU_ASSERT_EQUAL(r->n_counts, 0);
    CU_ASSERT_EQUAL(r->examined, RUN1_DECISIONS + RUN2_DECISIONS);
    CU_ASSERT_EQUAL(r->no_snapshot, 0);
    CU_ASSERT_FALSE(r->truncated);
    CU_ASSERT_EQUAL(strlen(r->workflow_version), 64);
    charter__v1__what_if_response__free_unpacked(r, NULL);

    r = what_if(op, reference(), run1, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->n_changes, 0);
    CU_ASSERT_EQUAL(r->examined, RUN1_DECISIONS);
    charter__v1__what_if_response__free_unpacked(r, NULL);
}

static void test_tightened_cfo_clearance_denies_only_the_confidential_deliveries(void)
{
    /* Both runs sent the confidential recommendation to cfo; nothing else went to cfo, and the
     * public delivery of run 1 is public, so it stands. */
    Charter__V1__WhatIfResponse *r = what_if(op, cfo_internal(), NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL_FATAL(r->n_changes, 2);
    expect_change(r, 0, run1, CFO_SEQ, "delivery", "analyze", "cfo",
                  "allow -> deny CLEARANCE_EXCEEDED", CFO_WITNESS);
    expect_change(r, 1, run2, CFO_SEQ, "delivery", "analyze", "cfo",
                  "allow -> deny CLEARANCE_EXCEEDED", CFO_WITNESS);
    CU_ASSERT_EQUAL(r->changes[0]->recorded->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_EQUAL(r->changes[0]->candidate->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_EQUAL_FATAL(r->changes[0]->candidate->n_codes, 1);
    CU_ASSERT_STRING_EQUAL(r->changes[0]->candidate->codes[0], "CLEARANCE_EXCEEDED");
    expect_count(r, "allow -> deny CLEARANCE_EXCEEDED", 2);
    CU_ASSERT_EQUAL(r->examined, RUN1_DECISIONS + RUN2_DECISIONS);
    charter__v1__what_if_response__free_unpacked(r, NULL);
}

static void
test_internal_vendor_quote_denies_the_public_delivery_of_the_run_that_leaked_nothing(void)
{
    /* The public comparison derives from vendor_c's quote: labelled internal, it is above the
     * public recipient's clearance. Run 2 made no public delivery; the cfo may read internal. */
    Charter__V1__WhatIfResponse *r = what_if(op, vendor_c_internal(), NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL_FATAL(r->n_changes, 1);
    expect_change(r, 0, run1, PUBLIC_SEQ, "delivery", "report", "public",
                  "allow -> deny CLEARANCE_EXCEEDED", PUBLIC_WITNESS);
    expect_count(r, "allow -> deny CLEARANCE_EXCEEDED", 1);
    charter__v1__what_if_response__free_unpacked(r, NULL);
}

static void test_widened_report_step_allows_the_recorded_handoff(void)
{
    Charter__V1__WhatIfResponse *r = what_if(op, report_reads_budget(true), NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL_FATAL(r->n_changes, 2);
    expect_change(r, 0, run1, HANDOFF_SEQ, "input", "report", "",
                  "deny INPUT_OUT_OF_SCOPE -> allow", "");
    expect_change(r, 1, run2, HANDOFF_SEQ, "input", "report", "",
                  "deny INPUT_OUT_OF_SCOPE -> allow", "");
    CU_ASSERT_EQUAL(r->changes[0]->candidate->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_EQUAL(r->changes[0]->candidate->n_codes, 0);
    expect_count(r, "deny INPUT_OUT_OF_SCOPE -> allow", 2);
    charter__v1__what_if_response__free_unpacked(r, NULL);
}

static void test_invalid_candidate_is_invalid_argument_naming_the_problem(void)
{
    charter_status st;
    /* the step widened beyond its grant */
    json_t *w = report_reads_budget(false);
    char *text = json_dumps(w, 0);
    json_decref(w);
    CU_ASSERT_PTR_NULL(what_if_bytes(op, text, NULL, 0, 0, &st));
    free(text);
    CU_ASSERT_EQUAL(st.code, CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(st.message, "workflow: steps[2].resources: \"budget\" is not in the "
                                       "step's grant g_reporter's resources");
    /* not JSON at all, and nothing */
    CU_ASSERT_PTR_NULL(what_if_bytes(op, "{\"name\": ", NULL, 0, 0, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(strncmp(st.message, "workflow: ", 10), 0);
    CU_ASSERT_PTR_NULL(what_if_bytes(op, "", NULL, 0, 0, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_INVALID_ARGUMENT);
    /* a limit above the bound, an unknown run */
    char *ref = json_dumps(w = reference(), 0);
    json_decref(w);
    CU_ASSERT_PTR_NULL(what_if_bytes(op, ref, NULL, 0, 100001, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(what_if_bytes(op, ref, "r_no_such_run", 0, 0, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_NOT_FOUND);
    free(ref);
}

static void test_limit_truncates_and_says_so(void)
{
    /* Run 1's twelve decisions come first: the cfo change of run 2 is beyond the limit. */
    Charter__V1__WhatIfResponse *r = what_if(op, cfo_internal(), NULL, RUN1_DECISIONS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_TRUE(r->truncated);
    CU_ASSERT_EQUAL(r->examined, RUN1_DECISIONS);
    CU_ASSERT_EQUAL_FATAL(r->n_changes, 1);
    expect_change(r, 0, run1, CFO_SEQ, "delivery", "analyze", "cfo",
                  "allow -> deny CLEARANCE_EXCEEDED", CFO_WITNESS);
    expect_count(r, "allow -> deny CLEARANCE_EXCEEDED", 1);
    charter__v1__what_if_response__free_unpacked(r, NULL);

    /* seven decisions of run 1 end before its cfo delivery (the eighth) */
    r = what_if(op, cfo_internal(), run1, 7);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_TRUE(r->truncated);
    CU_ASSERT_EQUAL(r->examined, 7);
    CU_ASSERT_EQUAL(r->n_changes, 0);
    charter__v1__what_if_response__free_unpacked(r, NULL);

    /* exactly every decision in scope is not truncated */
    r = what_if(op, cfo_internal(), NULL, RUN1_DECISIONS + RUN2_DECISIONS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_FALSE(r->truncated);
    CU_ASSERT_EQUAL(r->n_changes, 2);
    charter__v1__what_if_response__free_unpacked(r, NULL);
}

static void test_since_scopes_the_runs_by_creation_time(void)
{
    Charter__V1__GetRunRequest g = CHARTER__V1__GET_RUN_REQUEST__INIT;
    g.run_id = run2;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(op, &g, &v, &st), 0);
    int64_t created = (int64_t)v->run->created_at;
    charter__v1__run_view__free_unpacked(v, NULL);
    CU_ASSERT_FATAL(created > 0);
    json_t *w = cfo_internal();
    char *text = json_dumps(w, 0);
    json_decref(w);
    /* run 2 was created at least a second after run 1 */
    Charter__V1__WhatIfResponse *r = what_if_bytes(op, text, NULL, created, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->examined, RUN2_DECISIONS);
    CU_ASSERT_EQUAL_FATAL(r->n_changes, 1);
    CU_ASSERT_STRING_EQUAL(r->changes[0]->run_id, run2);
    charter__v1__what_if_response__free_unpacked(r, NULL);
    r = what_if_bytes(op, text, NULL, created + 100000, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->examined, 0);
    CU_ASSERT_EQUAL(r->n_changes, 0);
    charter__v1__what_if_response__free_unpacked(r, NULL);
    free(text);
}

static void test_viewer_may_ask_and_nothing_is_written(void)
{
    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(graph, before), 0);
    Charter__V1__WhatIfResponse *r = what_if(viewer, report_reads_budget(true), NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->n_changes, 2);
    charter__v1__what_if_response__free_unpacked(r, NULL);
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(graph, after), 0);
    CU_ASSERT_STRING_EQUAL(before, after);
}

/* Runs a shell command line; its exit status or -1. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_cli_prints_each_change_and_the_counts(void)
{
    char wf[256], out[256];
    snprintf(wf, sizeof wf, "%s/cfo.json", tmpdir);
    snprintf(out, sizeof out, "%s/out.txt", tmpdir);
    json_t *w = cfo_internal();
    CU_ASSERT_EQUAL_FATAL(json_dump_file(w, wf, JSON_INDENT(2)), 0);
    json_decref(w);
    CU_ASSERT_EQUAL_FATAL(sh("CHARTER_TOKEN=%s %s --url %s what-if --workflow %s --run %s > %s",
                             HARNESS_VIEWER_TOKEN, CHARTER_CLI_PATH, daemon_.tcp_url, wf, run1,
                             out),
                          0);
    FILE *f = fopen(out, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[3][512] = {"", "", ""};
    for (int i = 0; i < 3; i++)
        if (fgets(line[i], sizeof line[i], f) == NULL)
            break;
    fclose(f);
    char want[512];
    snprintf(want, sizeof want,
             "run %s seq %d delivery cfo: allow -> deny CLEARANCE_EXCEEDED (witness %s)\n", run1,
             CFO_SEQ, CFO_WITNESS);
    CU_ASSERT_STRING_EQUAL(line[0], want);
    CU_ASSERT_STRING_EQUAL(line[1], "     1  allow -> deny CLEARANCE_EXCEEDED\n");
    CU_ASSERT_EQUAL(strncmp(line[2], "1 of 12 decisions would change", 30), 0);
    /* usage errors: no candidate; --run with --since */
    CU_ASSERT_EQUAL(
        sh("%s --url %s what-if --run %s 2>/dev/null", CHARTER_CLI_PATH, daemon_.tcp_url, run1), 2);
    CU_ASSERT_EQUAL(sh("%s --url %s what-if --workflow %s --run %s --since 1 2>/dev/null",
                       CHARTER_CLI_PATH, daemon_.tcp_url, wf, run1),
                    2);
}

/* --- a narrowed context ------------------------------------------------------------------- */

static Charter__V1__StepContext *open_step(const char *run, const char *step, const char *parent,
                                           char **resources, size_t n)
{
    Charter__V1__OpenStepRequest req = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    req.run_id = (char *)run;
    req.step = (char *)step;
    req.parent_context_id = (char *)(parent ? parent : "");
    req.resources = resources;
    req.n_resources = n;
    Charter__V1__StepContext *ctx = NULL;
    charter_status st;
    if (charter_open_step(op, &req, &ctx, &st) != 0)
        fprintf(stderr, "OpenStep: %s\n", st.message);
    return ctx;
}

/* The input gate over one artifact in ctx: its event's seq, the outcome in *outcome. */
static uint64_t check_input(const char *ctx, const char *artifact, Charter__V1__Outcome *outcome)
{
    Charter__V1__CheckInputRequest req = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    char *ids[1] = {(char *)artifact};
    req.context_id = (char *)ctx;
    req.artifact_ids = ids;
    req.n_artifact_ids = 1;
    Charter__V1__CheckInputResponse *r = NULL;
    charter_status st;
    if (charter_check_input(op, &req, &r, &st) != 0)
        return 0;
    uint64_t seq = r->event_seq;
    *outcome = r->decision->outcome;
    charter__v1__check_input_response__free_unpacked(r, NULL);
    return seq;
}

static void test_narrowed_context_stays_narrowed_under_the_candidate(void)
{
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    Charter__V1__RunView *view = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &cr, &view, &st), 0);
    char run3[129];
    snprintf(run3, sizeof run3, "%s", view->run->id);
    charter__v1__run_view__free_unpacked(view, NULL);

    Charter__V1__StepContext *research = open_step(run3, "research", NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(research);
    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = research->context_id;
    rs.resource_id = "vendor_b";
    Charter__V1__ReadSourceResponse *src = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_read_source(op, &rs, &src, &st), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src->artifact);
    char src_b[129];
    snprintf(src_b, sizeof src_b, "%s", src->artifact->id);
    charter__v1__read_source_response__free_unpacked(src, NULL);
    charter__v1__step_context__free_unpacked(research, NULL);

    /* The report step admits vendor_b; its child narrowed to vendor_a does not. */
    Charter__V1__StepContext *parent = open_step(run3, "report", NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(parent);
    char *only_a[] = {"vendor_a"};
    Charter__V1__StepContext *child = open_step(run3, "report", parent->context_id, only_a, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(child);
    Charter__V1__Outcome po = 0, co = 0;
    uint64_t parent_seq = check_input(parent->context_id, src_b, &po);
    uint64_t child_seq = check_input(child->context_id, src_b, &co);
    charter__v1__step_context__free_unpacked(parent, NULL);
    charter__v1__step_context__free_unpacked(child, NULL);
    CU_ASSERT_FATAL(parent_seq > 0 && child_seq > parent_seq);
    CU_ASSERT_EQUAL(po, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_EQUAL(co, CHARTER__V1__OUTCOME__DENY);

    /* Under the unchanged workflow the child is still held to its own list. */
    Charter__V1__WhatIfResponse *r = what_if(op, reference(), run3, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->n_changes, 0);
    CU_ASSERT_EQUAL(r->examined, 3); /* the source read and the two checks */
    charter__v1__what_if_response__free_unpacked(r, NULL);

    /* Widening the report step to the budget widens no narrowed child either; taking vendor_b
     * from the step denies the parent's check, and the child's stays the deny it was. */
    r = what_if(op, report_reads_budget(true), run3, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->n_changes, 0);
    charter__v1__what_if_response__free_unpacked(r, NULL);
    json_t *w = reference();
    json_t *report = entry(w, "steps", "name", "report");
    CU_ASSERT_PTR_NOT_NULL_FATAL(report);
    json_object_set_new(report, "resources", json_pack("[s, s]", "vendor_a", "vendor_c"));
    r = what_if(op, w, run3, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL_FATAL(r->n_changes, 1);
    expect_change(r, 0, run3, parent_seq, "input", "report", "", "allow -> deny INPUT_OUT_OF_SCOPE",
                  "vendor_b (public) \xe2\x86\x92 report step {vendor_a, vendor_c}");
    charter__v1__what_if_response__free_unpacked(r, NULL);
}

/* A scripted run of the support workflow: a procurement candidate examines only the
 * procurement runs (the two of the suite and the external one above: 3 decisions), and the
 * support definition only the support run, with no change in either. */
static void test_candidate_examines_only_the_runs_of_its_own_workflow(void)
{
    FILE *f = fopen(CHARTER_SOURCE_DIR "/deploy/workflows/support.json", "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static char support[1 << 20];
    size_t len = fread(support, 1, sizeof support - 1, f);
    fclose(f);
    support[len] = '\0';
    Charter__V1__ApplyWorkflowRequest ar = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    ar.definition.data = (uint8_t *)support;
    ar.definition.len = len;
    Charter__V1__WorkflowInfo *info = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_apply_workflow(op, &ar, &info, &st), 0);
    charter__v1__workflow_info__free_unpacked(info, NULL);
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "scripted";
    cr.workflow = "support";
    Charter__V1__RunView *view = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &cr, &view, &st), 0);
    char run4[129];
    snprintf(run4, sizeof run4, "%s", view->run->id);
    charter__v1__run_view__free_unpacked(view, NULL);

    Charter__V1__WhatIfResponse *r = what_if(op, reference(), NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->n_changes, 0);
    CU_ASSERT_EQUAL(r->examined, RUN1_DECISIONS + RUN2_DECISIONS + 3);
    for (size_t i = 0; i < r->n_changes; i++)
        CU_ASSERT_STRING_NOT_EQUAL(r->changes[i]->run_id, run4);
    charter__v1__what_if_response__free_unpacked(r, NULL);

    r = what_if_bytes(op, support, NULL, 0, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->n_changes, 0);
    uint64_t all_support = r->examined;
    charter__v1__what_if_response__free_unpacked(r, NULL);
    /* every decision examined is the support run's own */
    r = what_if_bytes(op, support, run4, 0, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(r->examined > 0);
    CU_ASSERT_EQUAL(all_support, r->examined);
    charter__v1__what_if_response__free_unpacked(r, NULL);
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"unchanged workflow changes no decision", test_unchanged_workflow_changes_no_decision},
    {"tightened cfo clearance denies only the confidential deliveries",
     test_tightened_cfo_clearance_denies_only_the_confidential_deliveries},
    {"internal vendor quote denies the public delivery of the run that leaked nothing",
     test_internal_vendor_quote_denies_the_public_delivery_of_the_run_that_leaked_nothing},
    {"widened report step allows the recorded handoff",
     test_widened_report_step_allows_the_recorded_handoff},
    {"invalid candidate is INVALID_ARGUMENT naming the problem",
     test_invalid_candidate_is_invalid_argument_naming_the_problem},
    {"limit truncates and says so", test_limit_truncates_and_says_so},
    {"since scopes the runs by creation time", test_since_scopes_the_runs_by_creation_time},
    {"viewer may ask and nothing is written", test_viewer_may_ask_and_nothing_is_written},
    {"CLI prints each change and the counts", test_cli_prints_each_change_and_the_counts},
    /* last two: they add runs to the graph the tests above count over */
    {"narrowed context stays narrowed under the candidate",
     test_narrowed_context_stays_narrowed_under_the_candidate},
    {"candidate examines only the runs of its own workflow",
     test_candidate_examines_only_the_runs_of_its_own_workflow},
};
static const harness_suite suites[] = {
    {"what if", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
