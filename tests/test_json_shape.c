/*
 * test_json_shape.c - `charter --json`, `charter call` and HTTP/JSON print one shape.
 *
 * One real charterd (test Redis, its own graph, an integrity and a signing key) serves NNG and
 * HTTP/JSON. A scripted run of the built-in workflow gives a run with decisions, deliveries and
 * receipts; then each CLI command's --json output and the HTTP/JSON answer of the same method
 * with the same request are parsed and must be equal as JSON values: the same keys
 * (lowerCamelCase), the same values (64-bit integers as strings, enums by name, defaults left
 * out). The CLI's own documents (workflow validate, verify-receipt) use the same names, and a
 * receipt kept in the older snake_case form still verifies.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <jansson.h>

#include "harness.h"
#include "suite.h"

#define WORKFLOWS CHARTER_SOURCE_DIR "/deploy/workflows"

static harness_charterd g_d;
static char g_graph[64];
static char g_hostport[64];
static char g_tmp[] = "/tmp/charter-json-shape-XXXXXX";
static char g_key[128];
static char g_run[129];

/* --- the two sides ----------------------------------------------------------------------- */

/* `charter --json ARGS` (args already quoted for the shell) parsed, or NULL after a failed
 * assertion. The caller decrefs. */
static json_t *cli_doc(const char *args)
{
    char out[256];
    snprintf(out, sizeof out, "%s/cli.json", g_tmp);
    int rc = harness_sh("CHARTER_URL=%s CHARTER_TOKEN=%s %s --json %s > %s", g_d.ipc_url,
                        HARNESS_OPERATOR_TOKEN, CHARTER_CLI_PATH, args, out);
    CU_ASSERT_EQUAL(rc, 0);
    json_error_t err;
    json_t *j = json_load_file(out, JSON_REJECT_DUPLICATES, &err);
    if (j == NULL)
        fprintf(stderr, "charter --json %s: not JSON: %s\n", args, err.text);
    CU_ASSERT_PTR_NOT_NULL(j);
    return j;
}

/* The HTTP/JSON answer of method ("/charter.v1.Runs/GetRun") to the request body (JSON text)
 * with the operator token, parsed; NULL after a failed assertion. */
static json_t *http_doc(const char *method, const char *body)
{
    char req[256], out[256];
    snprintf(req, sizeof req, "%s/request.json", g_tmp);
    snprintf(out, sizeof out, "%s/http.json", g_tmp);
    FILE *f = fopen(req, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(body, f);
    fclose(f);
    int rc = harness_sh("curl -sS --fail-with-body --max-time 30 -X POST -H 'Content-Type: "
                        "application/json' -H 'Authorization: Bearer %s' --data-binary @%s "
                        "http://%s%s > %s",
                        HARNESS_OPERATOR_TOKEN, req, g_hostport, method, out);
    CU_ASSERT_EQUAL(rc, 0);
    json_error_t err;
    json_t *j = json_load_file(out, JSON_REJECT_DUPLICATES, &err);
    if (j == NULL)
        fprintf(stderr, "%s: not JSON: %s\n", method, err.text);
    CU_ASSERT_PTR_NOT_NULL(j);
    return j;
}

/* Asserts that the two documents are equal JSON values; prints both when they are not. */
static void expect_same(const char *what, const json_t *cli, const json_t *http)
{
    bool same = cli != NULL && http != NULL && json_equal(cli, http);
    if (!same) {
        char *a = cli != NULL ? json_dumps(cli, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        char *b = http != NULL ? json_dumps(http, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        fprintf(stderr, "\n%s:\n  charter --json: %.1500s\n  HTTP/JSON:      %.1500s\n", what,
                a ? a : "(none)", b ? b : "(none)");
        free(a);
        free(b);
    }
    CU_ASSERT_TRUE(same);
}

/* Compares `charter --json ARGS` with the HTTP/JSON answer of method to body; returns the HTTP
 * document (the caller decrefs) for more assertions. */
static json_t *compare(const char *args, const char *method, const char *body)
{
    json_t *cli = cli_doc(args);
    json_t *http = http_doc(method, body);
    expect_same(args, cli, http);
    json_decref(cli);
    return http;
}

/* The seq (a string in the mapping) of the run's first event of kind. */
static const char *event_seq(const json_t *view, const char *kind)
{
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(view, "events"), i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "kind")), kind) == 0)
            return json_string_value(json_object_get(e, "seq"));
    }
    return NULL;
}

/* --- the commands ------------------------------------------------------------------------ */

static void test_get_prints_the_run_view_http_gives(void)
{
    char args[512], body[512];
    snprintf(args, sizeof args, "get %s", g_run);
    snprintf(body, sizeof body, "{\"runId\":\"%s\"}", g_run);
    json_t *http = compare(args, "/charter.v1.Runs/GetRun", body);
    /* The mapping's forms, by hand: lowerCamelCase, uint64 as a string, enum by name, a
     * default (an undecided event's outcome) left out. */
    const json_t *first = json_array_get(json_object_get(http, "events"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(first, "runId")), g_run);
    CU_ASSERT_PTR_NULL(json_object_get(first, "run_id"));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(first, "seq")), "1");
    CU_ASSERT_PTR_NULL(json_object_get(first, "outcome"));
    CU_ASSERT_TRUE(json_is_real(json_object_get(first, "ts")));
    const json_t *d = json_array_get(json_object_get(http, "deliveries"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d, "recipient")), "cfo");
    CU_ASSERT_TRUE(json_is_array(json_object_get(d, "grantChain")));
    json_decref(http);
}

static void test_list_prints_the_runs_http_gives(void)
{
    json_t *http = compare("list --limit 10", "/charter.v1.Runs/ListRuns", "{\"limit\":10}");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(http, "runs")), 1);
    json_decref(http);
}

static void test_audit_prints_the_walk_http_gives(void)
{
    char args[512], body[512];
    snprintf(args, sizeof args, "audit %s", g_run);
    snprintf(body, sizeof body, "{\"runId\":\"%s\"}", g_run);
    json_t *http = compare(args, "/charter.v1.Evidence/AuditRun", body);
    CU_ASSERT_TRUE(json_is_true(json_object_get(http, "intact")));
    CU_ASSERT_TRUE(json_is_string(json_object_get(http, "events")));
    CU_ASSERT_PTR_NULL(json_object_get(http, "firstBadSeq")); /* 0: left out */
    json_decref(http);
}

static void test_replay_prints_the_decision_http_gives(void)
{
    char args[512], body[512];
    snprintf(body, sizeof body, "{\"runId\":\"%s\"}", g_run);
    json_t *view = http_doc("/charter.v1.Runs/GetRun", body);
    const char *seq = event_seq(view, "delivery_decided");
    CU_ASSERT_PTR_NOT_NULL_FATAL(seq);
    snprintf(args, sizeof args, "replay %s %s", g_run, seq);
    snprintf(body, sizeof body, "{\"runId\":\"%s\",\"seq\":\"%s\"}", g_run, seq);
    json_decref(view);
    json_t *http = compare(args, "/charter.v1.Evidence/ReplayDecision", body);
    CU_ASSERT_TRUE(json_is_true(json_object_get(http, "matches")));
    CU_ASSERT_STRING_EQUAL(
        json_string_value(json_object_get(json_object_get(http, "recorded"), "outcome")), "ALLOW");
    json_decref(http);
}

static void test_receipt_prints_the_receipt_http_gives(void)
{
    char args[512], body[512];
    snprintf(args, sizeof args, "receipt %s %s:analyze:deliver", g_run, g_run);
    snprintf(body, sizeof body, "{\"runId\":\"%s\",\"invocationId\":\"%s:analyze:deliver\"}", g_run,
             g_run);
    json_t *http = compare(args, "/charter.v1.Evidence/GetReceipt", body);
    CU_ASSERT_TRUE(json_is_string(json_object_get(http, "chainSeq")));
    CU_ASSERT_TRUE(json_is_string(json_object_get(http, "keyId")));
    json_decref(http);
}

static void test_chain_and_trace_print_what_http_gives(void)
{
    json_decref(compare("chain g_reporter", "/charter.v1.Grants/ShowChain",
                        "{\"grantId\":\"g_reporter\"}"));
    char args[512], body[512];
    snprintf(body, sizeof body, "{\"runId\":\"%s\"}", g_run);
    json_t *view = http_doc("/charter.v1.Runs/GetRun", body);
    const json_t *arts = json_object_get(view, "artifacts");
    const char *id = json_string_value(json_object_get(json_array_get(arts, 0), "id"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    snprintf(args, sizeof args, "trace %s", id);
    snprintf(body, sizeof body, "{\"artifactId\":\"%s\"}", id);
    json_decref(compare(args, "/charter.v1.Gate/TraceArtifact", body));
    json_decref(view);
}

static void test_call_prints_what_http_gives(void)
{
    char args[512], body[256];
    snprintf(body, sizeof body, "{\"runId\":\"%s\"}", g_run);
    snprintf(args, sizeof args, "call /charter.v1.Runs/GetRun '%s'", body);
    json_decref(compare(args, "/charter.v1.Runs/GetRun", body));
}

/* workflow validate has no method of its own (it needs no charterd): its document names the
 * workflow and version ApplyWorkflow gives for the same bytes; workflow apply and show print
 * what ApplyWorkflow and GetWorkflow answer over HTTP. */
static void test_workflow_validate_apply_and_show_print_what_http_gives(void)
{
    const char *file = WORKFLOWS "/procurement.json";
    char *text = harness_slurp(file);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    char b64[256];
    snprintf(b64, sizeof b64, "%s/definition.b64", g_tmp);
    CU_ASSERT_EQUAL_FATAL(harness_sh("base64 -w0 %s > %s", file, b64), 0);
    char *enc = harness_slurp(b64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(enc);
    size_t n = strlen(enc) + 32;
    char *body = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(body);
    snprintf(body, n, "{\"definition\":\"%s\"}", enc);

    json_t *validated = cli_doc("workflow validate " WORKFLOWS "/procurement.json");
    json_t *applied = http_doc("/charter.v1.Workflows/ApplyWorkflow", body);
    CU_ASSERT_TRUE(json_is_true(json_object_get(validated, "valid")));
    CU_ASSERT_TRUE(
        json_equal(json_object_get(validated, "workflow"), json_object_get(applied, "name")));
    CU_ASSERT_TRUE(
        json_equal(json_object_get(validated, "version"), json_object_get(applied, "version")));
    /* Applied again: created is false (left out) on both sides. */
    json_t *again = compare("workflow apply " WORKFLOWS "/procurement.json",
                            "/charter.v1.Workflows/ApplyWorkflow", body);
    CU_ASSERT_PTR_NULL(json_object_get(again, "created"));
    char args[512], show[512];
    snprintf(args, sizeof args, "workflow show %s",
             json_string_value(json_object_get(applied, "version")));
    snprintf(show, sizeof show, "{\"workflow\":\"%s\"}",
             json_string_value(json_object_get(applied, "version")));
    json_decref(compare(args, "/charter.v1.Workflows/GetWorkflow", show));
    json_decref(again);
    json_decref(applied);
    json_decref(validated);
    free(body);
    free(enc);
    free(text);
}

/* The receipt document as `charter --json receipt` prints it verifies, and so does the same
 * receipt in the snake_case form older releases printed (every field, defaults included). */
static void test_verify_receipt_reads_the_new_and_the_old_document(void)
{
    char args[512], file[256], old[256], out[256];
    snprintf(file, sizeof file, "%s/receipt.json", g_tmp);
    snprintf(old, sizeof old, "%s/receipt-snake.json", g_tmp);
    snprintf(out, sizeof out, "%s/verify.json", g_tmp);
    snprintf(args, sizeof args, "receipt %s %s:analyze:deliver", g_run, g_run);
    json_t *r = cli_doc(args);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(json_dump_file(r, file, 0), 0);
    json_t *snake = json_object();
    const char *key;
    json_t *value;
    json_object_foreach(r, key, value)
    {
        char name[64];
        size_t k = 0;
        for (const char *p = key; *p != '\0' && k + 2 < sizeof name; p++) {
            if (*p >= 'A' && *p <= 'Z') {
                name[k++] = '_';
                name[k++] = (char)(*p - 'A' + 'a');
            } else {
                name[k++] = *p;
            }
        }
        name[k] = '\0';
        json_object_set(snake, name, value);
    }
    /* The older form printed every field, defaults included, and 64-bit integers as numbers. */
    json_object_set_new(snake, "status", json_string(""));
    json_object_set_new(snake, "last_seq", json_integer(0));
    json_object_set_new(snake, "deliveries", json_array());
    json_object_set_new(snake, "chain_seq",
                        json_integer(atoll(json_string_value(json_object_get(r, "chainSeq")))));
    CU_ASSERT_PTR_NOT_NULL_FATAL(snake);
    CU_ASSERT_EQUAL(json_dump_file(snake, old, 0), 0);
    json_decref(snake);
    CU_ASSERT_EQUAL(harness_sh("%s --json verify-receipt %s %s --key %s > %s", CHARTER_CLI_PATH,
                               file, old, g_key, out),
                    0);
    json_t *v = json_load_file(out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_TRUE(json_is_true(json_object_get(v, "valid")));
    const json_t *one = json_array_get(json_object_get(v, "receipts"), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(one, "verdict")), "valid");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(one, "runId")), g_run);
    CU_ASSERT_PTR_NULL(json_object_get(one, "run_id"));
    json_decref(v);
    json_decref(r);
}

/* --- setup ------------------------------------------------------------------------------- */

static int suite_init(void)
{
    if (mkdtemp(g_tmp) == NULL)
        return -1;
    char sign[160];
    snprintf(g_key, sizeof g_key, "%s/integrity.key", g_tmp);
    snprintf(sign, sizeof sign, "%s/signing.pem", g_tmp);
    if (harness_sh("umask 077 && openssl rand -hex 32 > %s", g_key) != 0 ||
        harness_sh("umask 077 && openssl genpkey -algorithm ed25519 -out %s 2>/dev/null", sign) !=
            0)
        return -1;
    harness_graph_name(g_graph, sizeof g_graph, "json_shape");
    store_close(harness_store_open(g_graph));
    const char *extra[] = {"--integrity-key", g_key, "--signing-key", sign};
    harness_charterd_opts o = {.graph = g_graph, .http = true, .extra_args = extra, .n_extra = 4};
    if (harness_charterd_start(&o, &g_d) != 0)
        return -1;
    snprintf(g_hostport, sizeof g_hostport, "%s", g_d.http_hostport);
    charter_client *c = NULL;
    char status[32] = "";
    int rc = harness_client_open(g_d.ipc_url, HARNESS_OPERATOR_TOKEN, 60000, &c);
    if (rc == 0)
        rc = harness_create_run(c, "scripted", NULL, g_run, status, NULL);
    charter_client_close(c);
    /* The built-in workflow's scripted run: the analyst's delivery to the cfo is allowed, the
     * report's to the public refused, and the run blocks. */
    return rc == 0 && strcmp(status, "blocked") == 0 ? 0 : -1;
}

static int suite_clean(void)
{
    int rc = g_d.pid ? harness_charterd_stop(&g_d) : 0;
    harness_graph_drop(g_graph);
    if (harness_sh("rm -rf %s", g_tmp) != 0)
        rc = -1;
    return rc == 0 ? 0 : -1;
}

static const harness_test tests[] = {
    HARNESS_TEST(test_get_prints_the_run_view_http_gives),
    HARNESS_TEST(test_list_prints_the_runs_http_gives),
    HARNESS_TEST(test_audit_prints_the_walk_http_gives),
    HARNESS_TEST(test_replay_prints_the_decision_http_gives),
    HARNESS_TEST(test_receipt_prints_the_receipt_http_gives),
    HARNESS_TEST(test_chain_and_trace_print_what_http_gives),
    HARNESS_TEST(test_call_prints_what_http_gives),
    HARNESS_TEST(test_workflow_validate_apply_and_show_print_what_http_gives),
    HARNESS_TEST(test_verify_receipt_reads_the_new_and_the_old_document),
};

static const harness_suite suites[] = {
    {"json shape", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .needs_redis = true};
