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
#include <nng/supplemental/http/http.h>
#include <nng/supplemental/util/platform.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "charter.h"
#include "harness.h"

#define OPENAI_MODEL "down-model"
#define GEMINI_MODEL "gemini-test-flash"
#define GEMINI_PATH "/v1beta/models/" GEMINI_MODEL ":generateContent"

static nng_http_server *server;
static char root_url[64];
static atomic_int openai_requests, gemini_requests;

static void answer(nng_aio *aio, uint16_t status, const char *body)
{
    nng_http_res *res = NULL;
    if (nng_http_res_alloc(&res) != 0) {
        nng_aio_finish(aio, NNG_ENOMEM);
        return;
    }
    nng_http_res_set_status(res, status);
    nng_http_res_set_header(res, "Content-Type", "application/json");
    nng_http_res_copy_data(res, body, strlen(body));
    nng_aio_set_output(aio, 0, res);
    nng_aio_finish(aio, 0);
}

static void openai_handle(nng_aio *aio)
{
    atomic_fetch_add(&openai_requests, 1);
    answer(aio, 500, "{\"error\":{\"message\":\"upstream down\",\"type\":\"server_error\"}}");
}

/* Answers the step named in the system instruction: the report step with its public fields,
 * the others with their output handed on. */
static void gemini_handle(nng_aio *aio)
{
    atomic_fetch_add(&gemini_requests, 1);
    nng_http_req *req = nng_aio_get_input(aio, 0);
    void *data = NULL;
    size_t len = 0;
    nng_http_req_get_data(req, &data, &len);
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
    char *body = env != NULL ? json_dumps(env, JSON_COMPACT) : NULL;
    json_decref(env);
    if (body == NULL) {
        nng_aio_finish(aio, NNG_ENOMEM);
        return;
    }
    answer(aio, 200, body);
    free(body);
}

static int server_start(void)
{
    nng_url *url = NULL;
    nng_http_handler *h1 = NULL, *h2 = NULL;
    if (nng_url_parse(&url, "http://127.0.0.1:0") != 0)
        return -1;
    int rc = nng_http_server_hold(&server, url);
    nng_url_free(url);
    if (rc != 0 || nng_http_handler_alloc(&h1, "/v1/chat/completions", openai_handle) ||
        nng_http_handler_set_method(h1, "POST") ||
        nng_http_handler_collect_body(h1, true, 4 * 1024 * 1024) ||
        nng_http_server_add_handler(server, h1) ||
        nng_http_handler_alloc(&h2, GEMINI_PATH, gemini_handle) ||
        nng_http_handler_set_method(h2, "POST") ||
        nng_http_handler_collect_body(h2, true, 4 * 1024 * 1024) ||
        nng_http_server_add_handler(server, h2) || nng_http_server_start(server))
        return -1;
    nng_sockaddr sa;
    if (nng_http_server_get_addr(server, &sa) != 0 || sa.s_family != NNG_AF_INET)
        return -1;
    unsigned port = ((unsigned)((const uint8_t *)&sa.s_in.sa_port)[0] << 8) |
                    ((const uint8_t *)&sa.s_in.sa_port)[1];
    snprintf(root_url, sizeof root_url, "http://127.0.0.1:%u", port);
    return 0;
}

static char graph[64];
static harness_charterd daemon_;
static charter_client *op;

static int suite_init(void)
{
    if (server_start() != 0)
        return -1;
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
    harness_charterd_opts o = {.graph = graph};
    if (harness_charterd_start(&o, &daemon_) != 0)
        return -1;
    return harness_client_open(daemon_.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &op) == 0 ? 0 : -1;
}

static int suite_clean(void)
{
    charter_client_close(op);
    int rc = harness_charterd_stop(&daemon_);
    harness_graph_drop(graph);
    if (server != NULL) {
        nng_http_server_stop(server);
        nng_http_server_release(server);
    }
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

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("live providers in a fallback order", suite_init, suite_clean);
    if (!s)
        return 1;
    CU_add_test(s, "a live run falls back from openai to gemini and records why",
                test_live_run_falls_back_from_openai_to_gemini_and_records_why);
    CU_add_test(s, "CHARTER_PROVIDERS naming an unconfigured or unknown provider stops startup",
                test_providers_naming_an_unconfigured_or_unknown_provider_stops_startup);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failed ? 1 : 0;
}
