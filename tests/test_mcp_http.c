/*
 * test_mcp_http.c - charter-mcp --http's limits, with a raw HTTP client against a real charterd
 * (test Redis, its own graph, no executor threads so an async run stays queued; its own HTTP
 * listener only for its /metrics).
 *
 * One charter-mcp serves the procurement workflow's research step with two credentials in its
 * token file, two sessions per credential, and one-second deadlines for headers and body. Each
 * case checks by hand: a body is not read before the credential is checked, and a declared
 * length beyond the limit is refused on the headers; a chunked body is read (initialize) and
 * counted past the message limit; a request trickled byte by byte is closed at its deadline;
 * a credential holds at most its share of sessions, and cannot use another's; and two sessions'
 * tool calls run at once: one session's call answers while another's is still waiting on
 * charterd.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <jansson.h>

#include "harness.h"
#include "suite.h"

#define CRED_A "mcp-credential-a-0123456789abcdef"
#define CRED_B "mcp-credential-b-0123456789abcdef"
#define INIT                                                                                       \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"     \
    "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"raw\",\"version\":\"1\"}}}"

static harness_charterd g_d;
static char g_graph[64];
static char g_dir[64];           /* the token file and charter-mcp's log */
static char g_hostport[64];      /* charter-mcp's HTTP address */
static char g_charterd_http[64]; /* charterd's, for its /metrics */
static pid_t g_mcp;

/* Starts charter-mcp --http (environment and arguments made before the fork) and waits until it
 * accepts connections. Returns 0 or -1. */
static int mcp_start(void)
{
    char creds[128], log[128], wf[512], url[256];
    snprintf(creds, sizeof creds, "%s/creds", g_dir);
    snprintf(log, sizeof log, "%s/mcp.log", g_dir);
    snprintf(wf, sizeof wf, "%s/deploy/workflows/procurement.json", CHARTER_SOURCE_DIR);
    FILE *f = fopen(creds, "w");
    if (f == NULL) {
        return -1;
    }
    fprintf(f, "%s\n\n%s\n", CRED_A, CRED_B);
    fclose(f);
    snprintf(url, sizeof url, "CHARTER_URL=%s", g_d.ipc_url);
    char *env[] = {url, "CHARTER_TOKEN=" HARNESS_OPERATOR_TOKEN, "PATH=/usr/bin:/bin", NULL};
    char *argv[] = {CHARTER_MCP_PATH,
                    "--role",
                    "research",
                    "--workflow",
                    wf,
                    "--http",
                    "127.0.0.1:0",
                    "--http-token-file",
                    creds,
                    "--http-sessions-per-credential",
                    "2",
                    "--http-header-timeout",
                    "1",
                    "--http-body-timeout",
                    "1",
                    NULL};
    int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0) {
        return -1;
    }
    g_mcp = fork();
    if (g_mcp == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(logfd, 1);
        dup2(logfd, 2);
        execve(argv[0], argv, env);
        _exit(127);
    }
    close(logfd);
    if (g_mcp < 0) {
        return -1;
    }
    /* It says where it serves once it listens: the port the system picked. */
    for (int i = 0; i < 400; i++) {
        int rc =
            harness_log_address(log, "charter-mcp: serving step", g_hostport, sizeof g_hostport);
        if (rc == 0) {
            return 0;
        }
        if (rc < 0 || waitpid(g_mcp, NULL, WNOHANG) == g_mcp) {
            break;
        }
        harness_sleep_ms(50);
    }
    char *text = harness_slurp(log);
    fprintf(stderr, "charter-mcp did not listen:\n%s\n", text != NULL ? text : "");
    free(text);
    return -1;
}

/* Sends one POST to /mcp: credential cred (NULL: none), session sid (NULL: none), the JSON
 * body. Returns the response's status; its session id header into sid_out and its body into
 * body when not NULL. */
static int post_on(int fd, const char *cred, const char *sid, const char *json)
{
    char head[1024];
    int n =
        snprintf(head, sizeof head,
                 "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: "
                 "application/json, text/event-stream\r\n%s%s%s%s%s%sContent-Length: %zu\r\n\r\n",
                 g_hostport, cred ? "Authorization: Bearer " : "", cred ? cred : "",
                 cred ? "\r\n" : "", sid ? "Mcp-Session-Id: " : "", sid ? sid : "",
                 sid ? "\r\nMCP-Protocol-Version: 2025-11-25\r\n" : "", strlen(json));
    if (n < 0 || (size_t)n >= sizeof head || harness_http_send(fd, head, (size_t)n) != 0 ||
        harness_http_send(fd, json, strlen(json)) != 0) {
        return -1;
    }
    return 0;
}

static int post(const char *cred, const char *sid, const char *json, char *sid_out, char *body,
                size_t n)
{
    int fd = harness_http_connect(g_hostport);
    if (fd < 0 || post_on(fd, cred, sid, json) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    char head[4096];
    int status = harness_http_read(fd, 20000, head, sizeof head, body, n);
    if (sid_out != NULL) {
        harness_http_header(head, "Mcp-Session-Id", sid_out, 33);
    }
    close(fd);
    return status;
}

/* initialize and notifications/initialized for credential cred; the session id into sid.
 * Returns the initialize status. */
static int open_session(const char *cred, char sid[33])
{
    char body[4096];
    sid[0] = '\0';
    int status = post(cred, NULL, INIT, sid, body, sizeof body);
    if (status == 200) {
        post(cred, sid, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", NULL,
             body, sizeof body);
    }
    return status;
}

static int end_session(const char *cred, const char *sid)
{
    int fd = harness_http_connect(g_hostport);
    if (fd < 0) {
        return -1;
    }
    char req[512];
    snprintf(req, sizeof req,
             "DELETE /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nMcp-Session-Id: "
             "%s\r\n\r\n",
             g_hostport, cred, sid);
    char body[512];
    int status = harness_http_send(fd, req, strlen(req)) == 0
                     ? harness_http_response(fd, 10000, body, sizeof body)
                     : -1;
    close(fd);
    return status;
}

/* structuredContent.<key> of a tools/call answer, as text into out ("" when absent). */
static void tool_field(const char *body, const char *key, char *out, size_t n)
{
    json_t *j = json_loads(body, 0, NULL);
    json_t *v =
        json_object_get(json_object_get(json_object_get(j, "result"), "structuredContent"), key);
    if (json_is_string(v)) {
        snprintf(out, n, "%s", json_string_value(v));
    } else if (json_is_integer(v)) {
        snprintf(out, n, "%lld", (long long)json_integer_value(v));
    } else {
        out[0] = '\0';
    }
    json_decref(j);
}

/* charterd's charter_workers_busy gauge (its /metrics), or -1. */
static int workers_busy(void)
{
    int fd = harness_http_connect(g_charterd_http);
    if (fd < 0) {
        return -1;
    }
    char req[128];
    snprintf(req, sizeof req, "GET /metrics HTTP/1.1\r\nHost: %s\r\n\r\n", g_charterd_http);
    static char body[60000];
    int status = harness_http_send(fd, req, strlen(req)) == 0
                     ? harness_http_response(fd, 10000, body, sizeof body)
                     : 0;
    close(fd);
    const char *g = status == 200 ? strstr(body, "\ncharter_workers_busy ") : NULL;
    return g != NULL ? atoi(g + strlen("\ncharter_workers_busy ")) : -1;
}

/* --- the cases ---------------------------------------------------------------------------- */

/* Headers without their body are answered at once: the credential (and a declared length past
 * the body limit) is judged before any body is read. (100000 bytes: past the 16 KiB a refused
 * request may drain, within the message limit.) */
static void test_body_is_not_read_before_the_credential_is_checked(void)
{
    static const struct {
        const char *cred;
        const char *length;
        int status;
    } cases[] = {
        {NULL, "100000", 401},
        {"not-a-credential-of-this-server", "100000", 401},
        {NULL, "100000000", 401},
        {CRED_A, "100000000", 413},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fd = harness_http_connect(g_hostport);
        CU_ASSERT_FATAL(fd >= 0);
        char req[512], auth[160] = "";
        if (cases[i].cred != NULL) {
            snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", cases[i].cred);
        }
        snprintf(req, sizeof req,
                 "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s"
                 "Content-Length: %s\r\n\r\n",
                 g_hostport, auth, cases[i].length);
        CU_ASSERT_EQUAL(harness_http_send(fd, req, strlen(req)), 0);
        char body[1024];
        int status = harness_http_response(fd, 10000, body, sizeof body);
        if (status != cases[i].status) {
            fprintf(stderr, "\n  case %zu: got %d %s\n", i, status, body);
        }
        CU_ASSERT_EQUAL(status, cases[i].status);
        CU_ASSERT_PTR_NOT_NULL(strstr(body, "\"code\":-32600"));
        close(fd);
    }
}

/* A chunked initialize opens a session; a chunked message past 1 MiB is counted, not kept,
 * and answered with the oversized-message error. */
static void test_chunked_bodies_are_read_and_counted(void)
{
    int fd = harness_http_connect(g_hostport);
    CU_ASSERT_FATAL(fd >= 0);
    char req[1024];
    snprintf(req, sizeof req,
             "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: "
             "application/json\r\nAuthorization: Bearer " CRED_A
             "\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n",
             g_hostport, strlen(INIT), INIT);
    CU_ASSERT_EQUAL(harness_http_send(fd, req, strlen(req)), 0);
    char head[2048], body[4096], sid[33];
    CU_ASSERT_EQUAL(harness_http_read(fd, 20000, head, sizeof head, body, sizeof body), 200);
    harness_http_header(head, "Mcp-Session-Id", sid, sizeof sid);
    CU_ASSERT_EQUAL(strlen(sid), 32);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "\"protocolVersion\":\"2025-11-25\""));
    close(fd);
    CU_ASSERT_EQUAL(end_session(CRED_A, sid), 200);

    size_t n = ((size_t)1 << 20) + 100;
    char *big = malloc(n + 64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    int k = snprintf(big, 64, "%zx\r\n", n);
    memset(big + k, ' ', n);
    memcpy(big + k + n, "\r\n0\r\n\r\n", 8);
    snprintf(req, sizeof req,
             "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: "
             "Bearer " CRED_A "\r\nTransfer-Encoding: chunked\r\n\r\n",
             g_hostport);
    fd = harness_http_connect(g_hostport);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(harness_http_send(fd, req, strlen(req)), 0);
    CU_ASSERT_EQUAL(harness_http_send(fd, big, (size_t)k + n + 7), 0);
    CU_ASSERT_EQUAL(harness_http_response(fd, 20000, body, sizeof body), 400);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "\"code\":-32600,\"message\":\"message larger than"));
    close(fd);
    free(big);
}

/* Headers trickled one byte every 200 ms (never idle long) are cut at the 1 s deadline,
 * unanswered; so is a body. Each trickle would go on for 15 s. */
static void test_slow_requests_are_closed_at_their_deadlines(void)
{
    char head[256];
    snprintf(head, sizeof head, "POST /mcp HTTP/1.1\r\nHost: %s\r\nX-Slow: ", g_hostport);
    int fd = harness_http_connect(g_hostport);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(harness_http_send(fd, head, strlen(head)), 0);
    bool answered = true;
    int sent = harness_http_trickle(fd, "abcdefgh", 200, 75, &answered);
    printf("\n    slow headers: closed after %d more bytes\n", sent);
    CU_ASSERT(sent >= 0);
    CU_ASSERT_FALSE(answered);
    close(fd);

    char req[512];
    snprintf(req, sizeof req,
             "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: "
             "Bearer " CRED_A "\r\nContent-Length: 1000\r\n\r\n{",
             g_hostport);
    fd = harness_http_connect(g_hostport);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(harness_http_send(fd, req, strlen(req)), 0);
    sent = harness_http_trickle(fd, " ", 200, 75, &answered);
    printf("    slow body: closed after %d more bytes\n", sent);
    CU_ASSERT(sent >= 0);
    CU_ASSERT_FALSE(answered);
    close(fd);
}

/* Two sessions per credential: A's third initialize is refused while B still opens one, and a
 * session is found only with the credential that opened it. */
static void test_sessions_per_credential_are_capped(void)
{
    char a1[33], a2[33], a3[33], b1[33], body[4096];
    CU_ASSERT_EQUAL(open_session(CRED_A, a1), 200);
    CU_ASSERT_EQUAL(open_session(CRED_A, a2), 200);
    int third = post(CRED_A, NULL, INIT, a3, body, sizeof body);
    CU_ASSERT_EQUAL(third, 503);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "too many sessions for this credential"));
    CU_ASSERT_EQUAL(a3[0], '\0');
    CU_ASSERT_EQUAL(open_session(CRED_B, b1), 200);
    const char *list = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}";
    CU_ASSERT_EQUAL(post(CRED_B, a1, list, NULL, body, sizeof body), 404);
    CU_ASSERT_EQUAL(post(CRED_A, a1, list, NULL, body, sizeof body), 200);
    CU_ASSERT_EQUAL(end_session(CRED_B, a1), 404);
    CU_ASSERT_EQUAL(end_session(CRED_A, a1), 200);
    CU_ASSERT_EQUAL(end_session(CRED_A, a2), 200);
    CU_ASSERT_EQUAL(end_session(CRED_B, b1), 200);
    CU_ASSERT_EQUAL(open_session(CRED_A, a3), 200); /* a slot of A's is free again */
    CU_ASSERT_EQUAL(end_session(CRED_A, a3), 200);
}

/* A tools/call of wait_run (8 s) on session 1, on a run no executor takes (charterd runs with
 * --runners 0), is held by charterd; meanwhile session 2's tools/call answers. Were tool
 * calls serialized, session 2's answer would come after session 1's. */
static void test_sessions_call_tools_concurrently(void)
{
    char s1[33], s2[33], body[8192], run1[130], run2[130], wait[512];
    CU_ASSERT_EQUAL_FATAL(open_session(CRED_A, s1), 200);
    CU_ASSERT_EQUAL_FATAL(open_session(CRED_B, s2), 200);
    const char *start =
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
        "\"start_async_run\",\"arguments\":{\"mode\":\"scripted\"}}}";
    CU_ASSERT_EQUAL_FATAL(post(CRED_A, s1, start, NULL, body, sizeof body), 200);
    tool_field(body, "run_id", run1, sizeof run1);
    CU_ASSERT_EQUAL_FATAL(post(CRED_B, s2, start, NULL, body, sizeof body), 200);
    tool_field(body, "run_id", run2, sizeof run2);
    CU_ASSERT_FATAL(run1[0] != '\0' && run2[0] != '\0');
    /* The queued run's seq: waiting after it waits for an event that does not come. */
    snprintf(wait, sizeof wait,
             "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"run_events\",\"arguments\":{\"run_id\":\"%s\"}}}",
             run1);
    CU_ASSERT_EQUAL(post(CRED_A, s1, wait, NULL, body, sizeof body), 200);
    json_t *j = json_loads(body, 0, NULL);
    json_t *run =
        json_object_get(json_object_get(json_object_get(j, "result"), "structuredContent"), "run");
    long long seq1 = (long long)json_integer_value(json_object_get(run, "seq"));
    json_decref(j);
    CU_ASSERT_FATAL(seq1 > 0);

    snprintf(
        wait, sizeof wait,
        "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
        "\"wait_run\",\"arguments\":{\"run_id\":\"%s\",\"after_seq\":%lld,\"timeout_ms\":8000}}}",
        run1, seq1);
    int slow = harness_http_connect(g_hostport);
    CU_ASSERT_FATAL(slow >= 0);
    CU_ASSERT_EQUAL(post_on(slow, CRED_A, s1, wait), 0);

    /* Session 1's call is at a charterd worker (WaitRun polls the run): the only call in
     * progress, seen on charterd's own gauge. */
    int busy = -1;
    for (int i = 0; i < 200 && busy != 1; i++) {
        busy = workers_busy();
        if (busy != 1) {
            harness_sleep_ms(50);
        }
    }
    CU_ASSERT_EQUAL_FATAL(busy, 1);

    /* Session 2 calls charterd too, and is answered first. */
    snprintf(wait, sizeof wait,
             "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"run_events\",\"arguments\":{\"run_id\":\"%s\"}}}",
             run2);
    CU_ASSERT_EQUAL(post(CRED_B, s2, wait, NULL, body, sizeof body), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "\"isError\":false"));
    CU_ASSERT_FALSE(harness_http_readable(slow, 0)); /* session 1's call is still waiting */

    CU_ASSERT_EQUAL(harness_http_response(slow, 20000, body, sizeof body), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "\"ended\":false"));
    close(slow);
    CU_ASSERT_EQUAL(end_session(CRED_A, s1), 200);
    CU_ASSERT_EQUAL(end_session(CRED_B, s2), 200);
}

/* Valid JSON whose strings hold an escaped NUL (a value read from a binary file, say) is
 * refused, with the request's own id: an answer without it (a "Parse error" with a null id)
 * would leave a client over stdio waiting for its answer forever. A notification holding one
 * gets no answer. */
static void test_a_nul_in_a_message_is_refused_with_its_id(void)
{
    char sid[33], body[4096];
    CU_ASSERT_EQUAL_FATAL(open_session(CRED_A, sid), 200);
    const char *call = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"read_source\",\"arguments\":{\"context_id\":\"c1\\u0000x\","
                       "\"resource_id\":\"vendor_a\"}}}";
    CU_ASSERT_EQUAL(post(CRED_A, sid, call, NULL, body, sizeof body), 200);
    json_t *j = json_loads(body, 0, NULL);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "id")), 7);
    json_t *err = json_object_get(j, "error");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(err, "code")), -32602);
    CU_ASSERT_PTR_NOT_NULL(strstr(json_string_value(json_object_get(err, "message"))
                                      ? json_string_value(json_object_get(err, "message"))
                                      : "",
                                  "NUL byte"));
    json_decref(j);
    const char *string_id = "{\"jsonrpc\":\"2.0\",\"id\":\"q-1\",\"method\":\"ping\","
                            "\"params\":{\"x\":\"a\\u0000\"}}";
    CU_ASSERT_EQUAL(post(CRED_A, sid, string_id, NULL, body, sizeof body), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "\"id\":\"q-1\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "-32602"));
    const char *note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":{"
                       "\"x\":\"\\u0000\"}}";
    CU_ASSERT_EQUAL(post(CRED_A, sid, note, NULL, body, sizeof body), 202);
    CU_ASSERT_EQUAL(post(CRED_A, sid, "{\"id\":3,", NULL, body, sizeof body), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(body, "\"code\":-32700"));
    CU_ASSERT_EQUAL(end_session(CRED_A, sid), 200);
}

/* A message with neither a method nor a result or an error is neither a request nor a
 * response: it is answered as an invalid request with its own id (unanswered, a client would
 * wait for it), and with a null id when it has none; a response is accepted and not answered. */
static void test_a_message_without_a_method_is_invalid(void)
{
    char sid[33], body[4096];
    CU_ASSERT_EQUAL_FATAL(open_session(CRED_A, sid), 200);
    CU_ASSERT_EQUAL(post(CRED_A, sid, "{\"jsonrpc\":\"2.0\",\"id\":2}", NULL, body, sizeof body),
                    200);
    json_t *j = json_loads(body, 0, NULL);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "id")), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(j, "error"), "code")),
                    -32600);
    json_decref(j);
    CU_ASSERT_EQUAL(post(CRED_A, sid, "{\"jsonrpc\":\"2.0\"}", NULL, body, sizeof body), 200);
    j = json_loads(body, 0, NULL);
    CU_ASSERT_TRUE(json_is_null(json_object_get(j, "id")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(j, "error"), "code")),
                    -32600);
    json_decref(j);
    CU_ASSERT_EQUAL(
        post(CRED_A, sid, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}", NULL, body, sizeof body),
        202);
    CU_ASSERT_EQUAL(end_session(CRED_A, sid), 200);
}

/* --- the suite ---------------------------------------------------------------------------- */

static int suite_init(void)
{
    harness_graph_name(g_graph, sizeof g_graph, "mcphttp");
    const char *extra[] = {"--runners", "0"};
    harness_charterd_opts o;
    memset(&o, 0, sizeof o);
    o.graph = g_graph;
    o.http = true;
    o.extra_args = extra;
    o.n_extra = 2;
    if (harness_charterd_start(&o, &g_d) != 0) {
        return -1;
    }
    snprintf(g_charterd_http, sizeof g_charterd_http, "%s", g_d.http_hostport);
    snprintf(g_dir, sizeof g_dir, "/tmp/charter-mcphttp-XXXXXX");
    if (mkdtemp(g_dir) == NULL) {
        return -1;
    }
    return mcp_start();
}

static int suite_clean(void)
{
    int st = 0;
    if (g_mcp > 0) {
        kill(g_mcp, SIGTERM);
        waitpid(g_mcp, &st, 0);
    }
    bool clean = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!clean) {
        fprintf(stderr, "charter-mcp ended with status %d\n", st);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/creds", g_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/mcp.log", g_dir);
    unlink(path);
    rmdir(g_dir);
    int rc = harness_charterd_stop(&g_d);
    harness_graph_drop(g_graph);
    return rc == 0 && clean ? 0 : -1;
}

#define T(fn)                                                                                      \
    {                                                                                              \
#fn, fn                                                                                    \
    }
static const harness_test tests[] = {
    T(test_body_is_not_read_before_the_credential_is_checked),
    T(test_chunked_bodies_are_read_and_counted),
    T(test_slow_requests_are_closed_at_their_deadlines),
    T(test_sessions_per_credential_are_capped),
    T(test_sessions_call_tools_concurrently),
    T(test_a_nul_in_a_message_is_refused_with_its_id),
    T(test_a_message_without_a_method_is_invalid),
};

static const harness_suite suites[] = {
    {"mcp_http", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
