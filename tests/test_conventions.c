/*
 * test_conventions.c - the conventions a tool or an operator expects of charterd: the standard
 * grpc.health.v1 health check (Check and the long-poll Watch, over NNG and over HTTP/JSON),
 * the method listing (Reflection/ListMethods against the dispatch table), --log-format json,
 * and request ids followed from the caller's metadata to the reply, the log line and the
 * events the call caused.
 *
 * One real charterd on a redis-server of the suite's own (so that stopping it for the
 * NOT_SERVING case disturbs no other suite), started with --log-format json --verbose and
 * --http on a free loopback port; HTTP calls run the curl program.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <jansson.h>

#include "charter.h"
#include "rpc/dispatch.h"
#include "harness.h"
#include "suite.h"
#include "health.pb-c.h"

static harness_private_redis g_redis;
static harness_charterd g_d;
static char g_graph[64];
static char g_base[80];
static char g_hostport[64];

#define CHECK "/grpc.health.v1.Health/Check"
#define WATCH "/grpc.health.v1.Health/Watch"

/* A grpc.health.v1 call over NNG through libcharter without a token: returns the call's
 * status code (0 or a CHARTER_* number) and the serving status in *status. */
static int health_call(const char *method, const char *service, const char *last,
                       uint32_t timeout_ms, int *status)
{
    charter_client *c = NULL;
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = timeout_ms;
    o.connect_timeout_ms = 5000;
    if (charter_client_open(g_d.tcp_url, NULL, &o, &c) != 0)
        return -1;
    Grpc__Health__V1__HealthCheckRequest rq = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    rq.service = (char *)service;
    const char *md[2] = {"grpc-health-last", last};
    ProtobufCMessage *out = NULL;
    charter_status st;
    int rv = charter_call_metadata(c, method, &rq.base,
                                   &grpc__health__v1__health_check_response__descriptor,
                                   last != NULL ? md : NULL, last != NULL ? 1 : 0, &out, &st);
    *status = -1;
    if (rv == 0) {
        *status = (int)((Grpc__Health__V1__HealthCheckResponse *)out)->status;
        protobuf_c_message_free_unpacked(out, NULL);
    }
    charter_client_close(c);
    return rv == 0 ? 0 : st.code;
}

/* The same call made so that only an answer given at once arrives: as the operator, with an
 * envelope deadline (40 s) that would let a Watch wait (a caller without a token watches for
 * 10 s at most), while this side takes 10 s for the answer. Returns 0 with the serving status
 * in *status, the call's code, or -1 when no answer came (NNG's error). */
static int health_at_once(const char *method, const char *service, const char *last, int *status)
{
    Grpc__Health__V1__HealthCheckRequest rq = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    rq.service = (char *)service;
    uint8_t payload[512];
    size_t plen = grpc__health__v1__health_check_request__get_packed_size(&rq);
    if (plen > sizeof payload)
        return -1;
    grpc__health__v1__health_check_request__pack(&rq, payload);
    Charter__V1__RpcRequest env = CHARTER__V1__RPC_REQUEST__INIT;
    Charter__V1__RpcRequest__MetadataEntry auth = CHARTER__V1__RPC_REQUEST__METADATA_ENTRY__INIT;
    Charter__V1__RpcRequest__MetadataEntry md = CHARTER__V1__RPC_REQUEST__METADATA_ENTRY__INIT;
    Charter__V1__RpcRequest__MetadataEntry *mds[2] = {&auth, &md};
    env.method = (char *)method;
    env.payload.data = payload;
    env.payload.len = plen;
    env.timeout_ms = 40000;
    auth.key = "authorization";
    auth.value = "Bearer " HARNESS_OPERATOR_TOKEN;
    md.key = "grpc-health-last";
    md.value = (char *)last;
    env.metadata = mds;
    env.n_metadata = last != NULL ? 2 : 1;
    uint8_t buf[1024];
    size_t n = charter__v1__rpc_request__get_packed_size(&env);
    if (n > sizeof buf)
        return -1;
    charter__v1__rpc_request__pack(&env, buf);
    harness_response r;
    *status = -1;
    if (harness_rpc_raw(g_d.tcp_url, buf, n, 10000, &r) != 0)
        return -1;
    int code = r.code;
    Grpc__Health__V1__HealthCheckResponse *h =
        code == 0 ? grpc__health__v1__health_check_response__unpack(NULL, r.payload_len, r.payload)
                  : NULL;
    if (h != NULL) {
        *status = (int)h->status;
        grpc__health__v1__health_check_response__free_unpacked(h, NULL);
    }
    harness_response_free(&r);
    return code == 0 && h == NULL ? -1 : code;
}

static long ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (long)((t1.tv_sec - t0->tv_sec) * 1000L + (t1.tv_nsec - t0->tv_nsec) / 1000000L);
}

/* --- grpc.health.v1 over NNG -------------------------------------------------------------- */

static void test_grpc_health_check_is_serving_overall_and_per_service_without_a_token(void)
{
    int s = -1;
    CU_ASSERT_EQUAL(health_call(CHECK, "", NULL, 5000, &s), 0);
    CU_ASSERT_EQUAL(s, GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
    CU_ASSERT_EQUAL(health_call(CHECK, "charter.v1.Gate", NULL, 5000, &s), 0);
    CU_ASSERT_EQUAL(s, 1);
    CU_ASSERT_EQUAL(health_call(CHECK, "grpc.health.v1.Health", NULL, 5000, &s), 0);
    CU_ASSERT_EQUAL(s, 1);
}

static void test_grpc_health_check_of_an_unknown_service_is_not_found(void)
{
    int s = -1;
    CU_ASSERT_EQUAL(health_call(CHECK, "charter.v1.Nope", NULL, 5000, &s), CHARTER_NOT_FOUND);
    /* Short names are not service names. */
    CU_ASSERT_EQUAL(health_call(CHECK, "Gate", NULL, 5000, &s), CHARTER_NOT_FOUND);
}

static void test_grpc_health_watch_answers_at_once_without_a_last_status(void)
{
    int s = -1;
    CU_ASSERT_EQUAL(health_at_once(WATCH, "charter.v1.Runs", NULL, &s), 0);
    CU_ASSERT_EQUAL(s, 1);
    /* A status other than the current one: answered at once too. */
    CU_ASSERT_EQUAL(health_at_once(WATCH, "", "NOT_SERVING", &s), 0);
    CU_ASSERT_EQUAL(s, 1);
}

static void test_grpc_health_watch_of_an_unchanged_status_waits_until_the_deadline(void)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int s = -1;
    CU_ASSERT_EQUAL(health_call(WATCH, "", "SERVING", 2000, &s), 0);
    long ms = ms_since(&t0);
    CU_ASSERT_EQUAL(s, 1);
    CU_ASSERT(ms >= 1200); /* and answered (code 0) before the caller's 2 s ran out */
}

static void test_grpc_health_watch_of_an_unknown_service_says_service_unknown(void)
{
    int s = -1;
    CU_ASSERT_EQUAL(health_call(WATCH, "charter.v1.Nope", NULL, 5000, &s), 0);
    CU_ASSERT_EQUAL(s, GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN);
}

/* --- over HTTP/JSON ----------------------------------------------------------------------- */

/* curl POSTs body to path with the extra headers (NULL-ended); the status, body and the
 * X-Request-Id response header (or "") come back. Returns 0 when curl ran. */
static int curl_post(const char *path, const char *body, const char *const *headers, int *status,
                     char *out, size_t n, char request_id[129])
{
    char url[256], hdr_file[256];
    snprintf(url, sizeof url, "%s%s", g_base, path);
    snprintf(hdr_file, sizeof hdr_file, "%s/curl-headers", g_d.dir);
    const char *argv[32];
    size_t k = 0;
    argv[k++] = "curl";
    argv[k++] = "-sS";
    argv[k++] = "--max-time";
    argv[k++] = "20";
    argv[k++] = "-D";
    argv[k++] = hdr_file;
    argv[k++] = "-w";
    argv[k++] = "\n%{http_code}";
    argv[k++] = "-H";
    argv[k++] = "Content-Type: application/json";
    for (size_t i = 0; headers != NULL && headers[i] != NULL && k < 26; i++) {
        argv[k++] = "-H";
        argv[k++] = headers[i];
    }
    argv[k++] = "--data-binary";
    argv[k++] = body;
    argv[k++] = url;
    argv[k] = NULL;
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execvp("curl", (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < n && (r = read(fds[0], out + got, n - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = '\0';
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    char *nl = strrchr(out, '\n');
    if (nl == NULL)
        return -1;
    *nl = '\0';
    *status = atoi(nl + 1);
    request_id[0] = '\0';
    FILE *f = fopen(hdr_file, "r");
    if (f != NULL) {
        char line[512];
        while (fgets(line, sizeof line, f) != NULL) {
            if (strncasecmp(line, "X-Request-Id:", 13) == 0) {
                char *v = line + 13;
                while (*v == ' ')
                    v++;
                v[strcspn(v, "\r\n")] = '\0';
                snprintf(request_id, 129, "%.128s", v);
            }
        }
        fclose(f);
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void test_grpc_health_over_http_json_with_request_id_header(void)
{
    int status = 0;
    char body[4096], rid[129];
    const char *h[] = {"X-Request-Id: http-probe-1", NULL};
    CU_ASSERT_EQUAL(
        curl_post(CHECK, "{\"service\":\"charter.v1.Gate\"}", h, &status, body, sizeof body, rid),
        0);
    CU_ASSERT_EQUAL(status, 200);
    json_t *j = json_loads(body, 0, NULL);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "status")), "SERVING");
    json_decref(j);
    CU_ASSERT_STRING_EQUAL(rid, "http-probe-1");

    /* Unknown service: NOT_FOUND (Connect "not_found", HTTP 404), with a made request id. */
    CU_ASSERT_EQUAL(curl_post(CHECK, "{\"service\":\"charter.v1.Nope\"}", NULL, &status, body,
                              sizeof body, rid),
                    0);
    CU_ASSERT_EQUAL(status, 404);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "not_found"));
    CU_ASSERT_EQUAL(strlen(rid), 32);

    /* Watch with the last status as a header: it waits for the deadline. */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char *w[] = {"Grpc-Health-Last: SERVING", "Connect-Timeout-Ms: 1500", NULL};
    CU_ASSERT_EQUAL(curl_post(WATCH, "{}", w, &status, body, sizeof body, rid), 0);
    CU_ASSERT_EQUAL(status, 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "SERVING"));
    CU_ASSERT(ms_since(&t0) >= 900);
}

/* --- Reflection/ListMethods --------------------------------------------------------------- */

static void test_list_methods_equals_the_dispatch_table(void)
{
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(g_d.tcp_url, HARNESS_VIEWER_TOKEN, 5000, &c), 0);
    Charter__V1__ListMethodsResponse *r = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_list_methods(c, NULL, &r, &st), 0);
    size_t n_svcs = 0, k = 0;
    const dispatch_service *svcs = dispatch_services_of(&n_svcs);
    for (size_t i = 0; i < n_svcs; i++) {
        for (size_t m = 0; m < *svcs[i].n_methods; m++, k++) {
            const svc_method *row = &svcs[i].methods[m];
            if (k >= r->n_methods)
                break;
            char name[160];
            snprintf(name, sizeof name, "/%s/%s", svcs[i].desc->name, row->name);
            CU_ASSERT_STRING_EQUAL(r->methods[k]->name, name);
            CU_ASSERT_STRING_EQUAL(r->methods[k]->request_type, row->request->name);
            CU_ASSERT_STRING_EQUAL(r->methods[k]->response_type, row->response->name);
        }
    }
    CU_ASSERT_EQUAL(r->n_methods, k);
    /* Written by hand: 41 charter.v1 methods, grpc Health's
     * two, ListMethods itself, Tenants' two, Credentials' three, and server reflection's one in
     * each of v1 and v1alpha. */
    CU_ASSERT_EQUAL(r->n_methods, 51);
    int seen = 0;
    for (size_t i = 0; i < r->n_methods; i++) {
        if (strcmp(r->methods[i]->name, "/charter.v1.Gate/Deliver") == 0) {
            seen++;
            CU_ASSERT_STRING_EQUAL(r->methods[i]->request_type, "charter.v1.DeliverRequest");
            CU_ASSERT_STRING_EQUAL(r->methods[i]->min_role, "operator");
        }
        if (strcmp(r->methods[i]->name, WATCH) == 0) {
            seen++;
            CU_ASSERT_STRING_EQUAL(r->methods[i]->min_role, "none");
        }
    }
    CU_ASSERT_EQUAL(seen, 2);
    charter__v1__list_methods_response__free_unpacked(r, NULL);
    charter_client_close(c);
}

/* --- request ids and the JSON log --------------------------------------------------------- */

/* An external run created with the metadata pairs; its run id and the reply's request id come
 * back. Returns 0 or -1. */
static int create_run(const char *const *md, size_t n_pairs, char run_id[129], char request_id[129])
{
    charter_client *c = NULL;
    if (harness_client_open(g_d.tcp_url, HARNESS_OPERATOR_TOKEN, 10000, &c) != 0)
        return -1;
    Charter__V1__CreateRunRequest rq = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    rq.mode = "external";
    ProtobufCMessage *out = NULL;
    charter_status st;
    int rv = charter_call_metadata(c, "/charter.v1.Runs/CreateRun", &rq.base,
                                   &charter__v1__run_view__descriptor, md, n_pairs, &out, &st);
    if (rv == 0) {
        snprintf(run_id, 129, "%s", ((Charter__V1__RunView *)out)->run->id);
        snprintf(request_id, 129, "%s", st.request_id);
        char last[129];
        charter_client_last_request_id(c, last);
        if (strcmp(last, st.request_id) != 0)
            rv = -1;
        protobuf_c_message_free_unpacked(out, NULL);
    } else {
        fprintf(stderr, "\n  CreateRun: %s\n", st.message);
    }
    charter_client_close(c);
    return rv == 0 ? 0 : -1;
}

/* The detail of the run's run_created event into out (n bytes); 0 or -1. */
static int run_created_detail(const char *run_id, char *out, size_t n)
{
    charter_client *c = NULL;
    if (harness_client_open(g_d.tcp_url, HARNESS_VIEWER_TOKEN, 10000, &c) != 0)
        return -1;
    Charter__V1__GetRunRequest rq = CHARTER__V1__GET_RUN_REQUEST__INIT;
    rq.run_id = (char *)run_id;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    int rv = -1;
    if (charter_get_run(c, &rq, &v, &st) == 0) {
        for (size_t i = 0; i < v->n_events; i++) {
            if (strcmp(v->events[i]->kind, "run_created") == 0) {
                snprintf(out, n, "%s", v->events[i]->detail);
                rv = 0;
            }
        }
        charter__v1__run_view__free_unpacked(v, NULL);
    }
    charter_client_close(c);
    return rv;
}

/* The JSON log line of a call with request_id, parsed (caller decrefs), or NULL. Fails the
 * test on a line of charterd's log that is not a JSON object with time, level and message. */
static json_t *log_line_of(const char *request_id)
{
    FILE *f = fopen(g_d.log_path, "r");
    if (f == NULL)
        return NULL;
    char line[8192];
    json_t *found = NULL;
    while (fgets(line, sizeof line, f) != NULL) {
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        if (!json_is_object(j) || !json_is_string(json_object_get(j, "time")) ||
            !json_is_string(json_object_get(j, "level")) ||
            !json_is_string(json_object_get(j, "message"))) {
            fprintf(stderr, "\n  not a JSON log line: %s", line);
            CU_FAIL("a log line is not a JSON object with time, level and message");
        }
        const char *rid = json_string_value(json_object_get(j, "request_id"));
        if (found == NULL && rid != NULL && strcmp(rid, request_id) == 0) {
            found = j;
            continue;
        }
        json_decref(j);
    }
    fclose(f);
    return found;
}

static void test_request_id_goes_from_metadata_to_reply_log_line_and_event(void)
{
    const char *md[2] = {"x-request-id", "order-7-3f2a"};
    char run_id[129], rid[129], detail[512];
    CU_ASSERT_EQUAL_FATAL(create_run(md, 1, run_id, rid), 0);
    CU_ASSERT_STRING_EQUAL(rid, "order-7-3f2a");
    CU_ASSERT_EQUAL_FATAL(run_created_detail(run_id, detail, sizeof detail), 0);
    CU_ASSERT_STRING_EQUAL(detail, "mode external (request_id order-7-3f2a, caller env:operator)");
    usleep(200 * 1000);
    json_t *j = log_line_of("order-7-3f2a");
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "method")),
                           "/charter.v1.Runs/CreateRun");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "code")), "OK");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "tenant")), g_graph);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "level")), "info");
    CU_ASSERT(json_is_integer(json_object_get(j, "duration_us")));
    CU_ASSERT(json_integer_value(json_object_get(j, "duration_us")) > 0);
    json_decref(j);
}

static void test_traceparent_gives_its_trace_id_as_request_id(void)
{
    const char *md[2] = {"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"};
    char run_id[129], rid[129], detail[512];
    CU_ASSERT_EQUAL_FATAL(create_run(md, 1, run_id, rid), 0);
    CU_ASSERT_STRING_EQUAL(rid, "4bf92f3577b34da6a3ce929d0e0e4736");
    CU_ASSERT_EQUAL_FATAL(run_created_detail(run_id, detail, sizeof detail), 0);
    CU_ASSERT_STRING_EQUAL(
        detail, "mode external (request_id 4bf92f3577b34da6a3ce929d0e0e4736, caller env:operator)");
}

static int is_made_id(const char *s)
{
    if (strlen(s) != 32)
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

static void test_malformed_request_ids_are_replaced_by_made_ones(void)
{
    char run_id[129], rid[129], rid2[129];
    const char *spaced[2] = {"x-request-id", "two words"};
    CU_ASSERT_EQUAL_FATAL(create_run(spaced, 1, run_id, rid), 0);
    CU_ASSERT(is_made_id(rid));
    char longer[200];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    const char *too_long[2] = {"x-request-id", longer};
    CU_ASSERT_EQUAL_FATAL(create_run(too_long, 1, run_id, rid2), 0);
    CU_ASSERT(is_made_id(rid2));
    CU_ASSERT_STRING_NOT_EQUAL(rid, rid2);
    /* A traceparent with an all-zero trace id is invalid (W3C): replaced as well. */
    const char *zero[2] = {"traceparent",
                           "00-00000000000000000000000000000000-00f067aa0ba902b7-01"};
    CU_ASSERT_EQUAL_FATAL(create_run(zero, 1, run_id, rid), 0);
    CU_ASSERT(is_made_id(rid));
    /* No metadata at all: one is made. */
    CU_ASSERT_EQUAL_FATAL(create_run(NULL, 0, run_id, rid), 0);
    CU_ASSERT(is_made_id(rid));
}

static void test_a_refused_call_is_logged_as_json_with_its_code(void)
{
    int s = -1;
    CU_ASSERT_EQUAL(health_call(CHECK, "charter.v1.Missing", NULL, 5000, &s), CHARTER_NOT_FOUND);
    usleep(200 * 1000);
    FILE *f = fopen(g_d.log_path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[8192];
    int found = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        json_t *j = json_loads(line, 0, NULL);
        const char *code = json_string_value(json_object_get(j, "code"));
        const char *msg = json_string_value(json_object_get(j, "message"));
        if (code != NULL && strcmp(code, "NOT_FOUND") == 0 && msg != NULL &&
            strstr(msg, "charter.v1.Missing") != NULL) {
            found++;
            CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "level")), "warn");
            CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "method")), CHECK);
        }
        json_decref(j);
    }
    fclose(f);
    CU_ASSERT_EQUAL(found, 1);
}

/* Last: stops the suite's Redis. */
static void test_grpc_health_is_not_serving_when_the_database_is_down(void)
{
    harness_private_redis_kill(&g_redis);
    int s = -1;
    CU_ASSERT_EQUAL(health_call(CHECK, "", NULL, 5000, &s), 0);
    CU_ASSERT_EQUAL(s, GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
    CU_ASSERT_EQUAL(health_call(CHECK, "charter.v1.Gate", NULL, 5000, &s), 0);
    CU_ASSERT_EQUAL(s, 2);
    /* Watch from SERVING answers at once with the change. */
    CU_ASSERT_EQUAL(health_at_once(WATCH, "", "SERVING", &s), 0);
    CU_ASSERT_EQUAL(s, 2);
}

/* Counts the JSON log lines of the suite's charterd at level whose message holds needle. */
static int log_lines(const char *level, const char *needle)
{
    FILE *f = fopen(g_d.log_path, "r");
    if (f == NULL)
        return -1;
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        json_t *j = json_loads(line, 0, NULL);
        const char *lv = json_string_value(json_object_get(j, "level"));
        const char *msg = json_string_value(json_object_get(j, "message"));
        if (lv != NULL && msg != NULL && strcmp(lv, level) == 0 && strstr(msg, needle) != NULL)
            n++;
        json_decref(j);
    }
    fclose(f);
    return n;
}

/* After the one before (the database killed): however many calls fail while it is down, the
 * log says once that it was lost and, when it is back, once that it answers again. */
static void test_a_lost_database_and_its_return_are_logged_once_each(void)
{
    int s = -1;
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(health_call(CHECK, "", NULL, 5000, &s), 0);
    CU_ASSERT_EQUAL(s, GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
    CU_ASSERT_EQUAL(log_lines("error", "lost the database: cannot connect to Redis at unix://"), 1);
    CU_ASSERT_EQUAL(log_lines("info", "the database answers again"), 0);

    /* Back, without the query library (nothing persisted): reached, so no longer lost. */
    CU_ASSERT_EQUAL_FATAL(harness_private_redis_start(&g_redis), 0);
    for (int i = 0; i < 5; i++)
        CU_ASSERT_EQUAL(health_call(CHECK, "", NULL, 5000, &s), 0);
    CU_ASSERT_EQUAL(log_lines("error", "lost the database"), 1);
    CU_ASSERT_EQUAL(log_lines("info", "the database answers again"), 1);
}

/* ---------------------------------------------------------------------------------------- */

static int suite_init(void)
{
    if (harness_suite_redis_start(&g_redis) != 0)
        return -1;
    harness_graph_name(g_graph, sizeof g_graph, "conventions");
    const char *extra[] = {"--log-format", "json", "--verbose"};
    harness_charterd_opts o = {.graph = g_graph, .http = true, .extra_args = extra, .n_extra = 3};
    if (harness_charterd_start(&o, &g_d) != 0)
        return -1;
    snprintf(g_hostport, sizeof g_hostport, "%s", g_d.http_hostport);
    snprintf(g_base, sizeof g_base, "http://%s", g_hostport);
    return 0;
}

static int suite_clean(void)
{
    harness_charterd_kill(&g_d);
    harness_suite_redis_stop(&g_redis);
    return 0;
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"grpc health Check serving overall and per service without a token",
     test_grpc_health_check_is_serving_overall_and_per_service_without_a_token},
    {"grpc health Check of an unknown service is NOT_FOUND",
     test_grpc_health_check_of_an_unknown_service_is_not_found},
    {"grpc health Watch answers at once without a last status",
     test_grpc_health_watch_answers_at_once_without_a_last_status},
    {"grpc health Watch of an unchanged status waits until the deadline",
     test_grpc_health_watch_of_an_unchanged_status_waits_until_the_deadline},
    {"grpc health Watch of an unknown service says SERVICE_UNKNOWN",
     test_grpc_health_watch_of_an_unknown_service_says_service_unknown},
    {"grpc health over HTTP/JSON with X-Request-Id",
     test_grpc_health_over_http_json_with_request_id_header},
    {"ListMethods equals the dispatch table", test_list_methods_equals_the_dispatch_table},
    {"request id from metadata to reply, log line and event",
     test_request_id_goes_from_metadata_to_reply_log_line_and_event},
    {"traceparent gives its trace-id as request id",
     test_traceparent_gives_its_trace_id_as_request_id},
    {"malformed request ids are replaced by made ones",
     test_malformed_request_ids_are_replaced_by_made_ones},
    {"a refused call is logged as JSON with its code",
     test_a_refused_call_is_logged_as_json_with_its_code},
    {"grpc health NOT_SERVING when the database is down",
     test_grpc_health_is_not_serving_when_the_database_is_down},
    {"a lost database and its return are logged once each",
     test_a_lost_database_and_its_return_are_logged_once_each},
};
static const harness_suite suites[] = {
    {"conventions", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
