/*
 * test_fallback.c - the live providers' fallback order in a real charterd: a live run whose
 * first provider fails hands the same gated request to the next, and the run's events say
 * which provider and model answered and why the first did not.
 *
 * One NNG HTTP server in this process speaks both APIs: its OpenAI-compatible path answers
 * HTTP 500, its Gemini generateContent path answers each step in that step's schema. charterd
 * is configured through the environment exactly as in production (CHARTER_OPENAI_*,
 * CHARTER_GEMINI_*, CHARTER_PROVIDERS), with the base URLs pointed at that server.
 */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"

#define OPENAI_MODEL "down-model"
#define GEMINI_MODEL "gemini-test-flash"
#define GEMINI_PATH "/v1beta/models/" GEMINI_MODEL ":generateContent"

static harness_model *server;
static atomic_int openai_requests, gemini_requests;
static atomic_int openai_quota; /* 0: openai answers 500; 1: 429 with Retry-After: 5 */

static int openai_reply(harness_model_reply *out)
{
    atomic_fetch_add(&openai_requests, 1);
    out->delay_ms = 0; /* only gemini is slow */
    out->n_headers = 1;
    out->headers[0].name = "Content-Type";
    out->headers[0].value = "application/json";
    if (atomic_load(&openai_quota)) {
        out->status = 429;
        out->headers[1].name = "Retry-After";
        out->headers[1].value = "5";
        out->n_headers = 2;
        out->body = strdup("{\"error\":{\"message\":\"Rate limit reached\"}}");
    } else {
        out->status = 500;
        out->body = strdup("{\"error\":{\"message\":\"upstream down\",\"type\":\"server_error\"}}");
    }
    return out->body != NULL ? 0 : -1;
}

/* Answers the step named in the system instruction: the report step with its public fields,
 * the others with their output handed on; after the server's delay. */
static int gemini_reply(const void *data, size_t len, harness_model_reply *out)
{
    atomic_fetch_add(&gemini_requests, 1);
    json_t *b = json_loadb(data, len, 0, NULL);
    const char *instr = json_string_value(json_object_get(
        json_array_get(json_object_get(json_object_get(b, "systemInstruction"), "parts"), 0),
        "text"));
    bool report = instr != NULL && strstr(instr, "the step \"report\"") != NULL;
    json_decref(b);
    const char *text =
        report ? "{\"content\":\"Brightline leads.\",\"handoff\":[],\"fields\":{"
                 "\"recommended_vendor\":\"vendor_b\",\"fastest_delivery\":\"vendor_b\","
                 "\"longest_warranty\":\"vendor_b\"}}"
               : "{\"content\":\"Three vendors compared on price.\",\"handoff\":[\"output\"]}";
    json_t *env = json_pack("{s:[{s:{s:[{s:s}], s:s}, s:s}]}", "candidates", "content", "parts",
                            "text", text, "role", "model", "finishReason", "STOP");
    out->body = env != NULL ? json_dumps(env, JSON_COMPACT) : NULL;
    json_decref(env);
    out->status = 200;
    out->headers[0].name = "Content-Type";
    out->headers[0].value = "application/json";
    out->n_headers = 1;
    return out->body != NULL ? 0 : -1;
}

static int model_reply(void *arg, const char *path, const void *body, size_t len,
                       harness_model_reply *out)
{
    (void)arg;
    return strcmp(path, GEMINI_PATH) == 0 ? gemini_reply(body, len, out) : openai_reply(out);
}

static int server_start(void)
{
    const char *paths[] = {"/v1/chat/completions", GEMINI_PATH};
    return harness_model_start(paths, 2, model_reply, NULL, &server);
}

static char graph[64];
static harness_charterd daemon_;
static charter_client *op;

static int suite_init(void)
{
    if (server_start() != 0)
        return -1;
    const char *root_url = harness_model_url(server);
    char openai_url[96];
    snprintf(openai_url, sizeof openai_url, "%s/v1", root_url);
    setenv("CHARTER_OPENAI_BASE_URL", openai_url, 1);
    setenv("CHARTER_OPENAI_API_KEY", "sk-test-openai-key", 1);
    setenv("CHARTER_OPENAI_MODEL", OPENAI_MODEL, 1);
    setenv("CHARTER_GEMINI_BASE_URL", root_url, 1);
    setenv("CHARTER_GEMINI_API_KEY", "AIza-test-gemini-key", 1);
    setenv("CHARTER_GEMINI_MODEL", GEMINI_MODEL, 1);
    setenv("CHARTER_PROVIDERS", "openai,gemini", 1);
    setenv("CHARTER_MODEL_TIMEOUT_MS", "10000", 1);
    harness_graph_name(graph, sizeof graph, "fallback");
    const char *extra[] = {"--runners", "1"};
    harness_charterd_opts o = {.graph = graph, .extra_args = extra, .n_extra = 2};
    if (harness_charterd_start(&o, &daemon_) != 0)
        return -1;
    return harness_client_open(daemon_.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &op) == 0 ? 0 : -1;
}

static int suite_clean(void)
{
    charter_client_close(op);
    int rc = harness_charterd_stop(&daemon_);
    harness_graph_drop(graph);
    harness_model_stop(server);
    server = NULL;
    return rc == 0 ? 0 : -1;
}

/* The detail of the run's first event of kind (parsed; caller frees), its seq in *seq. */
static json_t *first_event(const Charter__V1__RunView *v, const char *kind, uint64_t *seq)
{
    for (size_t i = 0; i < v->n_events; i++) {
        if (strcmp(v->events[i]->kind, kind) == 0) {
            *seq = v->events[i]->seq;
            return json_loads(v->events[i]->detail, 0, NULL);
        }
    }
    return NULL;
}

static void test_live_run_falls_back_from_openai_to_gemini_and_records_why(void)
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "live";
    Charter__V1__RunView *v = NULL;
    charter_status s;
    int before_openai = atomic_load(&openai_requests);
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &req, &v, &s), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    Charter__V1__GetRunRequest g = CHARTER__V1__GET_RUN_REQUEST__INIT;
    g.run_id = v->run->id;
    Charter__V1__RunView *full = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(op, &g, &full, &s), 0);

    uint64_t req_seq = 0, reply_seq = 0;
    json_t *request = first_event(full, "model_request", &req_seq);
    json_t *reply = first_event(full, "model_reply", &reply_seq);
    CU_ASSERT_PTR_NOT_NULL_FATAL(request);
    CU_ASSERT_PTR_NOT_NULL_FATAL(reply);
    CU_ASSERT_TRUE(req_seq < reply_seq); /* the request is recorded before anything is sent */
    json_t *want_order = json_loads("[\"openai\",\"gemini\"]", 0, NULL);
    CU_ASSERT_TRUE(json_equal(json_object_get(request, "providers"), want_order));
    json_decref(want_order);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(reply, "step")), "research");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(reply, "provider")), "gemini");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(reply, "model")), GEMINI_MODEL);
    json_t *fb = json_object_get(reply, "fallbacks");
    CU_ASSERT_EQUAL_FATAL(json_array_size(fb), 1);
    json_t *f0 = json_array_get(fb, 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(f0, "provider")), "openai");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(f0, "model")), OPENAI_MODEL);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(f0, "reason")),
                           "live model: HTTP 500 from the provider: upstream down");
    /* No key in the evidence. */
    for (size_t i = 0; i < full->n_events; i++) {
        CU_ASSERT_PTR_NULL(strstr(full->events[i]->detail, "sk-test-openai-key"));
        CU_ASSERT_PTR_NULL(strstr(full->events[i]->detail, "AIza-test-gemini-key"));
    }
    CU_ASSERT_TRUE(atomic_load(&openai_requests) > before_openai);
    CU_ASSERT_TRUE(atomic_load(&gemini_requests) >= 1);
    json_decref(request);
    json_decref(reply);
    charter__v1__run_view__free_unpacked(full, NULL);
    charter__v1__run_view__free_unpacked(v, NULL);
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* openai asks for 5 s; the run's wall clock budget leaves less: no wait, gemini at once. */
static void test_retry_after_beyond_the_runs_deadline_falls_back_at_once(void)
{
    atomic_store(&openai_quota, 1);
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    Charter__V1__CreateRunRequest__BudgetEntry e;
    charter__v1__create_run_request__budget_entry__init(&e);
    e.key = "max_wall_clock_ms";
    e.value = 4000;
    Charter__V1__CreateRunRequest__BudgetEntry *ep = &e;
    req.mode = "live";
    req.n_budget = 1;
    req.budget = &ep;
    Charter__V1__RunView *v = NULL;
    charter_status s;
    int rc = charter_create_run(op, &req, &v, &s);
    atomic_store(&openai_quota, 0);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    Charter__V1__GetRunRequest g = CHARTER__V1__GET_RUN_REQUEST__INIT;
    g.run_id = v->run->id;
    Charter__V1__RunView *full = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(op, &g, &full, &s), 0);
    uint64_t seq = 0;
    json_t *reply = first_event(full, "model_reply", &seq);
    CU_ASSERT_PTR_NOT_NULL_FATAL(reply);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(reply, "provider")), "gemini");
    const char *why = json_string_value(
        json_object_get(json_array_get(json_object_get(reply, "fallbacks"), 0), "reason"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(why);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "HTTP 429 from the provider with Retry-After 5 s, beyond "
                                       "the run's deadline"));
    /* The 5 s were never waited: a wait would have run into the run's 4 s wall clock budget
     * before gemini was asked, and there would be no reply from it. */
    json_decref(reply);
    charter__v1__run_view__free_unpacked(full, NULL);
    charter__v1__run_view__free_unpacked(v, NULL);
}

static const char *status_of(const char *id, Charter__V1__RunView **out)
{
    Charter__V1__GetRunRequest g = CHARTER__V1__GET_RUN_REQUEST__INIT;
    g.run_id = (char *)id;
    charter_status s;
    *out = NULL;
    return charter_get_run(op, &g, out, &s) == 0 ? (*out)->run->status : NULL;
}

/* openai fails, gemini's answer is held until the test releases it: a cancel while gemini's
 * request is in flight aborts its transfer (the run ends while the answer is still held), and
 * the run records both failures. */
static void test_cancel_during_the_gemini_request_aborts_it(void)
{
    harness_model_set_delay(server, HARNESS_MODEL_HOLD);
    int before = atomic_load(&gemini_requests);
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "live";
    req.async = true;
    Charter__V1__RunView *v = NULL;
    charter_status s;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &req, &v, &s), 0);
    char id[80];
    snprintf(id, sizeof id, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    long long until = now_ms() + 10000;
    while (atomic_load(&gemini_requests) == before && now_ms() < until)
        nng_msleep(20);
    CU_ASSERT_FATAL(atomic_load(&gemini_requests) > before); /* on the wire */
    long long t0 = now_ms();
    Charter__V1__CancelRunRequest creq = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
    creq.run_id = id;
    creq.reason = "operator stop";
    Charter__V1__Run *r = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_cancel_run(op, &creq, &r, &s), 0);
    charter__v1__run__free_unpacked(r, NULL);
    Charter__V1__RunView *end = NULL;
    const char *st = NULL;
    while (now_ms() < t0 + 10000) {
        st = status_of(id, &end);
        if (st != NULL && strcmp(st, "cancelled") == 0)
            break;
        if (end != NULL)
            charter__v1__run_view__free_unpacked(end, NULL);
        end = NULL;
        nng_msleep(50);
    }
    CU_ASSERT_EQUAL(harness_model_held(server), 1); /* never answered while the run went on */
    harness_model_release(server);
    harness_model_set_delay(server, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(end);
    CU_ASSERT_STRING_EQUAL(end->run->status, "cancelled");
    uint64_t seq = 0;
    json_t *err = first_event(end, "model_error", &seq);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    json_t *fb = json_object_get(err, "fallbacks");
    CU_ASSERT_EQUAL_FATAL(json_array_size(fb), 2);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(fb, 0), "provider")),
                           "openai");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(fb, 1), "provider")),
                           "gemini");
    const char *why = json_string_value(json_object_get(json_array_get(fb, 1), "reason"));
    CU_ASSERT_PTR_NOT_NULL(why ? strstr(why, "live model: aborted: cancelled") : NULL);
    CU_ASSERT_PTR_NULL(first_event(end, "model_reply", &seq));
    CU_ASSERT_EQUAL(atomic_load(&gemini_requests) - before, 1);
    json_decref(err);
    charter__v1__run_view__free_unpacked(end, NULL);
}

static void test_providers_naming_an_unconfigured_or_unknown_provider_stops_startup(void)
{
    const char *args[] = {"--graph", "fallback-never-started"};
    char out[2048];
    const char *env1[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN,
                          "CHARTER_PROVIDERS=gemini", NULL};
    CU_ASSERT_NOT_EQUAL(harness_charterd_run(args, 2, env1, 20000, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "CHARTER_PROVIDERS names gemini, which is not configured"));
    const char *env2[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN,
                          "CHARTER_GEMINI_API_KEY=AIza-test-gemini-key",
                          "CHARTER_GEMINI_MODEL=" GEMINI_MODEL, "CHARTER_PROVIDERS=gemini,claude",
                          NULL};
    CU_ASSERT_NOT_EQUAL(harness_charterd_run(args, 2, env2, 20000, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "CHARTER_PROVIDERS names \"claude\""));
    CU_ASSERT_PTR_NULL(strstr(out, "AIza-test-gemini-key"));
    const char *env3[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN,
                          "CHARTER_GEMINI_API_KEY=AIza-test-gemini-key", NULL};
    CU_ASSERT_NOT_EQUAL(harness_charterd_run(args, 2, env3, 20000, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "CHARTER_GEMINI_MODEL is not set"));
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"a live run falls back from openai to gemini and records why",
     test_live_run_falls_back_from_openai_to_gemini_and_records_why},
    {"a Retry-After beyond the run's deadline falls back at once",
     test_retry_after_beyond_the_runs_deadline_falls_back_at_once},
    {"a cancel during the Gemini request aborts it",
     test_cancel_during_the_gemini_request_aborts_it},
    {"CHARTER_PROVIDERS naming an unconfigured or unknown provider stops startup",
     test_providers_naming_an_unconfigured_or_unknown_provider_stops_startup},
};
static const harness_suite suites[] = {
    {"live providers in a fallback order", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
