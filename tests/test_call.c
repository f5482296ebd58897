/*
 * test_call.c - `charter call METHOD JSON` against a real charterd on the test Redis.
 *
 * The CLI is run as a user runs it (CHARTER_CLI_PATH, the URL and token from its environment).
 * An external run is driven through the Gate with nothing but generic calls, up to a delivery
 * that is allowed and then acknowledged on retry; then each failure gives its exit status and
 * one line on stderr, as the README documents: 2 for an unknown method or a request that is
 * not the method's message in the proto3 JSON mapping, 1 for an RPC error.
 */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "suite.h"

#ifndef CHARTER_CLI_PATH
#error "CHARTER_CLI_PATH (the charter CLI built from this tree) must be defined by the build"
#endif

static char graph[64];
static harness_charterd daemon_;

typedef struct {
    int status;
    char out[16384];
    char err[1024];
} cli_result;

static void read_all(int fd, char *buf, size_t n)
{
    size_t got = 0;
    ssize_t k;
    while (got + 1 < n && (k = read(fd, buf + got, n - 1 - got)) > 0) {
        got += (size_t)k;
    }
    buf[got] = '\0';
    char sink[512];
    while (read(fd, sink, sizeof sink) > 0) {
    }
}

/* Runs `charter call METHOD [JSON]` with token (the operator's unless given), input on stdin
 * when not NULL. Fills r with the exit status and what it printed on each stream. */
static void call(const char *method, const char *json, const char *token, const char *input,
                 cli_result *r)
{
    int out[2], err[2], in[2];
    r->status = -1;
    r->out[0] = r->err[0] = '\0';
    if (pipe(out) != 0 || pipe(err) != 0 || pipe(in) != 0) {
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(in[1]);
        close(out[0]);
        close(err[0]);
        char url[256], tok[128];
        snprintf(url, sizeof url, "CHARTER_URL=%s", daemon_.ipc_url);
        snprintf(tok, sizeof tok, "CHARTER_TOKEN=%s",
                 token != NULL ? token : HARNESS_OPERATOR_TOKEN);
        char *env[] = {url, tok, "PATH=/usr/bin:/bin", NULL};
        const char *argv[] = {CHARTER_CLI_PATH, "call", method, json, NULL};
        execve(CHARTER_CLI_PATH, (char *const *)argv, env);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    if (input != NULL) {
        ssize_t w = write(in[1], input, strlen(input));
        (void)w;
    }
    close(in[1]);
    read_all(out[0], r->out, sizeof r->out);
    read_all(err[0], r->err, sizeof r->err);
    close(out[0]);
    close(err[0]);
    int st = 0;
    if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st)) {
        r->status = WEXITSTATUS(st);
    }
}

/* The string at path a.b of the JSON printed (static buffer), or "" when absent. */
static const char *field(const char *text, const char *obj, const char *key)
{
    static char buf[256];
    buf[0] = '\0';
    json_t *j = json_loads(text, 0, NULL);
    json_t *o = obj != NULL ? json_object_get(j, obj) : j;
    const char *s = json_string_value(json_object_get(o, key));
    snprintf(buf, sizeof buf, "%s", s != NULL ? s : "");
    json_decref(j);
    return buf;
}

static void test_health_check_with_the_default_empty_request(void)
{
    cli_result r;
    call("/charter.v1.Health/Check", NULL, NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_STRING_EQUAL(field(r.out, NULL, "status"), "serving");
    CU_ASSERT_STRING_EQUAL(field(r.out, NULL, "graph"), graph);
}

static void test_external_run_delivers_through_generic_calls(void)
{
    cli_result r;
    char json[512];
    call("/charter.v1.Runs/CreateRun", "{\"mode\":\"external\"}", NULL, NULL, &r);
    CU_ASSERT_EQUAL_FATAL(r.status, 0);
    char run[64];
    snprintf(run, sizeof run, "%s", field(r.out, "run", "id"));
    CU_ASSERT_STRING_EQUAL(field(r.out, "run", "status"), "created");

    /* Original field names are accepted as well as the lowerCamelCase ones. */
    snprintf(json, sizeof json, "{\"run_id\":\"%s\",\"step\":\"analyze\"}", run);
    call("/charter.v1.Gate/OpenStep", json, NULL, NULL, &r);
    CU_ASSERT_EQUAL_FATAL(r.status, 0);
    char ctx[64];
    snprintf(ctx, sizeof ctx, "%s", field(r.out, NULL, "contextId"));
    CU_ASSERT_STRING_EQUAL(field(r.out, NULL, "grant"), "g_analyst");

    snprintf(json, sizeof json, "{\"contextId\":\"%s\",\"resourceId\":\"vendor_a\"}", ctx);
    call("/charter.v1.Gate/ReadSource", json, NULL, NULL, &r);
    CU_ASSERT_EQUAL_FATAL(r.status, 0);
    CU_ASSERT_STRING_EQUAL(field(r.out, "decision", "outcome"), "ALLOW");
    char source[64];
    snprintf(source, sizeof source, "%s", field(r.out, "artifact", "id"));

    /* The request from stdin. */
    snprintf(json, sizeof json,
             "{\"contextId\":\"%s\",\"inputIds\":[\"%s\"],\"title\":\"Comparison\","
             "\"content\":\"Vendor A is cheapest.\"}",
             ctx, source);
    call("/charter.v1.Gate/RecordOutput", "-", NULL, json, &r);
    CU_ASSERT_EQUAL_FATAL(r.status, 0);
    CU_ASSERT_STRING_EQUAL(field(r.out, "decision", "outcome"), "ALLOW");
    char report[64];
    snprintf(report, sizeof report, "%s", field(r.out, "artifact", "id"));

    snprintf(json, sizeof json,
             "{\"contextId\":\"%s\",\"payloadId\":\"%s\",\"recipient\":\"cfo\","
             "\"tool\":\"deliver_internal\",\"invocationId\":\"call-inv-1\"}",
             ctx, report);
    call("/charter.v1.Gate/Deliver", json, NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_STRING_EQUAL(field(r.out, "decision", "outcome"), "ALLOW");
    CU_ASSERT_STRING_EQUAL(field(r.out, "delivery", "invocationId"), "call-inv-1");
    CU_ASSERT_PTR_NULL(strstr(r.out, "\"acknowledged\""));

    call("/charter.v1.Gate/Deliver", json, NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\"acknowledged\": true"));
}

static void test_unknown_method_is_a_usage_error(void)
{
    cli_result r;
    call("/charter.v1.Gate/Teleport", "{}", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_EQUAL(strncmp(r.err, "charter: unknown method \"/charter.v1.Gate/Teleport\"", 51), 0);
}

static void test_request_not_in_the_mapping_is_a_usage_error(void)
{
    cli_result r;
    call("/charter.v1.Gate/Deliver", "{\"contextId\":5}", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_STRING_EQUAL(
        r.err, "charter: charter.v1.DeliverRequest: contextId: expected a string, got a number\n");
    call("/charter.v1.Gate/ReadSource", "{\"resource\":\"vendor_a\"}", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_STRING_EQUAL(r.err, "charter: charter.v1.ReadSourceRequest: resource: unknown field "
                                  "of charter.v1.ReadSourceRequest\n");
    CU_ASSERT_STRING_EQUAL(r.out, "");
}

static void test_rpc_errors_exit_1_with_the_status(void)
{
    cli_result r;
    call("/charter.v1.Runs/ListRuns", "{}", "wrong-token-0123456789abcdef", NULL, &r);
    CU_ASSERT_EQUAL(r.status, 1);
    /* The CLI turns the wire message into advice naming what to set. */
    CU_ASSERT_EQUAL(
        strncmp(r.err, "charter: UNAUTHENTICATED: the token was refused (set CHARTER_TOKEN", 65),
        0);
    call("/charter.v1.Runs/GetRun", "{\"runId\":\"no_such_run\"}", NULL, NULL, &r);
    CU_ASSERT_EQUAL(r.status, 1);
    CU_ASSERT_EQUAL(strncmp(r.err, "charter: NOT_FOUND: ", 20), 0);
}

static int suite_init(void)
{
    harness_graph_name(graph, sizeof graph, "call");
    harness_charterd_opts o = {.graph = graph};
    return harness_charterd_start(&o, &daemon_);
}

static int suite_clean(void)
{
    int rc = harness_charterd_stop(&daemon_);
    harness_graph_drop(graph);
    return rc == 0 ? 0 : -1;
}

#define T(fn)                                                                                      \
    {                                                                                              \
#fn, fn                                                                                    \
    }
static const harness_test tests[] = {
    T(test_health_check_with_the_default_empty_request),
    T(test_external_run_delivers_through_generic_calls),
    T(test_unknown_method_is_a_usage_error),
    T(test_request_not_in_the_mapping_is_a_usage_error),
    T(test_rpc_errors_exit_1_with_the_status),
};

static const harness_suite suites[] = {
    {"call", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
