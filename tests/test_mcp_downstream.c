/*
 * test_mcp_downstream.c - charter-mcp's client of a url server (cmd/charter-mcp/mcp_downstream.c
 * and mcp_downstream_http.c) against a small Streamable HTTP server in a thread of this
 * program, with no charterd: the server answers initialize, tools/list and tools/call with JSON
 * bodies, closes the connection without answering a call of its tool "fail", and counts every
 * call and session. Each case states by hand what the server must have seen.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <jansson.h>

#include "mcp.h"
#include "suite.h"

/* What charter-mcp's other files give mcp_downstream.c, as this test needs it. */
json_t *mcp_refusal(const char *outcome, const char *code, const char *witness)
{
    return json_pack("{s:s, s:s, s:s}", "outcome", outcome, "code", code, "witness", witness);
}

bool mcp_protocol_supported(const char *version)
{
    return version && strcmp(version, "2025-11-25") == 0;
}

/* ---- the server ------------------------------------------------------------------------- */

static struct {
    int listener;
    int port;
    int sessions;         /* sessions opened (initialize answered) */
    int pays;             /* tools/call of pay answered */
    int fails;            /* tools/call of fail received (never answered) */
    char pay_session[32]; /* the session the last pay went out on */
} fake;

static const char TOOLS[] =
    "{\"tools\":[{\"name\":\"pay\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"iban\":"
    "{\"type\":\"string\"}},\"required\":[\"iban\"]}},{\"name\":\"fail\",\"inputSchema\":{"
    "\"type\":\"object\",\"properties\":{\"iban\":{\"type\":\"string\"}}}}]}";

/* One request off fd: its method line, headers and body (up to sizeof buf). */
static size_t read_request(int fd, char *buf, size_t cap, char **body)
{
    size_t len = 0;
    char *end = NULL;
    while (len + 1 < cap && !end) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n <= 0)
            return 0;
        len += (size_t)n;
        buf[len] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    const char *cl = strcasestr(buf, "Content-Length:");
    size_t want = (size_t)(end - buf) + 4 + (cl ? strtoul(cl + 15, NULL, 10) : 0);
    while (len < want && len + 1 < cap) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    *body = end + 4;
    return len;
}

static void respond(int fd, const char *status, const char *extra, const char *body)
{
    char head[512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\n%sContent-Type: application/json\r\nContent-Length: "
                     "%zu\r\nConnection: close\r\n\r\n",
                     status, extra, strlen(body));
    if (write(fd, head, (size_t)n) != n || write(fd, body, strlen(body)) < 0)
        return;
}

/* A JSON-RPC result for id (the server's text is result, a JSON object). */
static void respond_result(int fd, const char *extra, json_int_t id, const char *result)
{
    char body[1024];
    snprintf(body, sizeof body, "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":%s}", (long long)id,
             result);
    respond(fd, "200 OK", extra, body);
}

static void serve_one(int fd)
{
    char buf[8192], *body = NULL;
    if (read_request(fd, buf, sizeof buf, &body) == 0)
        return;
    if (strncmp(buf, "DELETE ", 7) == 0) {
        respond(fd, "200 OK", "", "");
        return;
    }
    json_t *msg = json_loads(body, 0, NULL);
    const char *method = json_string_value(json_object_get(msg, "method"));
    json_int_t id = json_integer_value(json_object_get(msg, "id"));
    const char *sid = strcasestr(buf, "Mcp-Session-Id: ");
    if (method && strcmp(method, "initialize") == 0) {
        char extra[64];
        snprintf(extra, sizeof extra, "Mcp-Session-Id: s%d\r\n", ++fake.sessions);
        respond_result(fd, extra, id,
                       "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"tools\":{}},"
                       "\"serverInfo\":{\"name\":\"fake\",\"version\":\"1\"}}");
    } else if (method && strcmp(method, "tools/list") == 0) {
        respond_result(fd, "", id, TOOLS);
    } else if (method && strcmp(method, "tools/call") == 0) {
        const char *tool =
            json_string_value(json_object_get(json_object_get(msg, "params"), "name"));
        if (tool && strcmp(tool, "fail") == 0) {
            fake.fails++; /* the connection closes unanswered */
        } else {
            fake.pays++;
            snprintf(fake.pay_session, sizeof fake.pay_session, "%.*s",
                     sid ? (int)strcspn(sid + 16, "\r\n") : 0, sid ? sid + 16 : "");
            respond_result(fd, "", id, "{\"content\":[{\"type\":\"text\",\"text\":\"paid\"}]}");
        }
    } else {
        respond(fd, "202 Accepted", "", "");
    }
    json_decref(msg);
}

static void *serve(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept(fake.listener, NULL, NULL);
        if (fd < 0)
            return NULL;
        serve_one(fd);
        close(fd);
    }
}

static int fake_start(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    pthread_t t;
    fake.listener = socket(AF_INET, SOCK_STREAM, 0);
    if (fake.listener < 0 || bind(fake.listener, (struct sockaddr *)&a, al) != 0 ||
        listen(fake.listener, 16) != 0 ||
        getsockname(fake.listener, (struct sockaddr *)&a, &al) != 0 ||
        pthread_create(&t, NULL, serve, NULL) != 0)
        return -1;
    pthread_detach(t);
    fake.port = ntohs(a.sin_port);
    return 0;
}

/* ---- the tests -------------------------------------------------------------------------- */

/* A step whose tools pay and fail are mapped onto the fake server's, over Streamable HTTP. */
static int open_server(mcp_server *srv)
{
    memset(srv, 0, sizeof *srv);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/mcp", fake.port);
    srv->workflow = json_pack(
        "{s:{s:{s:s, s:i}}, s:{s:{s:s, s:s, s:[{s:s, s:s}]}, s:{s:s, s:s, s:[{s:s, s:s}]}}}",
        "servers", "m", "url", url, "timeout_ms", 5000, "tools", "pay", "server", "m",
        "downstream_tool", "pay", "arguments", "name", "iban", "role", "control", "fail", "server",
        "m", "downstream_tool", "fail", "arguments", "name", "iban", "role", "control");
    json_t *step = json_pack("{s:[s, s]}", "tools", "pay", "fail");
    json_object_set_new(srv->workflow, "steps", json_pack("[o]", step));
    srv->step = step;
    srv->step_name = "payer";
    return srv->workflow ? mcp_downstream_open(srv) : -1;
}

static json_t *given_iban(void)
{
    return json_pack("{s:{s:s}}", "iban", "value", "DE89370400440532013000");
}

/* Another session's call fails, and drops the session, after this call was prepared and
 * allowed but before it went out: it never reached the server, so it goes out on a new session,
 * once, and is answered. */
static void test_call_prepared_on_a_dropped_session_goes_out_once_on_a_new_one(void)
{
    mcp_server srv;
    CU_ASSERT_FATAL(open_server(&srv) == 0);
    const json_t *tools = json_object_get(srv.workflow, "tools");
    json_t *given = given_iban(), *pay_args = NULL, *fail_args = NULL;
    CU_ASSERT_PTR_NULL(
        mcp_downstream_prepare(&srv, "pay", json_object_get(tools, "pay"), given, &pay_args));
    CU_ASSERT_PTR_NULL(
        mcp_downstream_prepare(&srv, "fail", json_object_get(tools, "fail"), given, &fail_args));
    CU_ASSERT_EQUAL(fake.sessions, 1);

    mcp_downstream_answer a;
    CU_ASSERT_EQUAL(mcp_downstream_call(&srv, json_object_get(tools, "fail"), fail_args, &a), -1);
    CU_ASSERT_TRUE(a.sent);
    CU_ASSERT_EQUAL(fake.fails, 1);

    CU_ASSERT_EQUAL(mcp_downstream_call(&srv, json_object_get(tools, "pay"), pay_args, &a), 0);
    CU_ASSERT_TRUE(a.sent);
    CU_ASSERT_STRING_EQUAL(a.text ? a.text : "", "paid");
    CU_ASSERT_EQUAL(fake.pays, 1);
    CU_ASSERT_EQUAL(fake.sessions, 2);
    CU_ASSERT_STRING_EQUAL(fake.pay_session, "s2");
    free(a.text);
    json_decref(given);
    mcp_downstream_close(&srv);
    json_decref(srv.workflow);
}

static int suite_init(void)
{
    return fake_start();
}

#define T(fn)                                                                                      \
    {                                                                                              \
#fn, fn                                                                                    \
    }
static const harness_test tests[] = {
    T(test_call_prepared_on_a_dropped_session_goes_out_once_on_a_new_one),
};
#undef T

static const harness_suite suites[] = {
    {"mcp_downstream", suite_init, NULL, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
