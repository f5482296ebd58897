/*
 * test_http.c - charterd --http against curl: Connect unary calls in the proto3 JSON mapping.
 *
 * One real charterd (test Redis, its own graph) serves HTTP/JSON on a free loopback port; each
 * case runs the curl program and checks the HTTP status and the body by hand: several methods
 * succeed (Health, CreateRun, GetRun, ListRuns, ShowChain, an external run up to Deliver),
 * slow calls leave the listener responsive, and every error class answers its
 * Connect code with the matching status: bad JSON, unknown field, wrong type, unknown method,
 * missing or wrong token, a viewer calling an operator method, an unknown run, oversized body,
 * wrong content type, a foreign Origin or Host, a malformed Connect-Timeout-Ms. And the
 * listener's own limits, with a raw client where curl cannot say it: the token and the
 * declared length judged before the body is read, chunked bodies read and counted, total
 * deadlines for headers and body, the connection cap.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <jansson.h>
#include <time.h>

#include "harness.h"
#include "suite.h"

/* The largest request body charterd is started with, bytes. */
#define MAX_MESSAGE 65536

static harness_charterd g_d;
static char g_graph[64];
static char g_base[80]; /* http://127.0.0.1:<port> */
static char g_hostport[64];

typedef struct {
    int status; /* HTTP status, 0 when curl failed */
    char body[8192];
} http_reply;

/* Runs curl with the given arguments (NULL-ended, after "curl -sS") and an optional request
 * body file; the reply's status and body land in r. Returns 0 when curl ran to completion. */
static int curl_run(const char *const *args, http_reply *r)
{
    const char *argv[64];
    size_t n = 0;
    argv[n++] = "curl";
    argv[n++] = "-sS";
    argv[n++] = "--max-time";
    argv[n++] = "20";
    argv[n++] = "-w";
    argv[n++] = "\n%{http_code}";
    for (size_t i = 0; args[i] != NULL && n < 62; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    int fds[2];
    if (pipe(fds) != 0) {
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execvp("curl", (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    char buf[sizeof r->body + 16];
    size_t got = 0;
    ssize_t k;
    while ((k = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0) {
        got += (size_t)k;
    }
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    buf[got] = '\0';
    char *nl = strrchr(buf, '\n');
    r->status = 0;
    r->body[0] = '\0';
    if (nl == NULL) {
        return -1;
    }
    *nl = '\0';
    r->status = atoi(nl + 1);
    size_t blen = strlen(buf);
    if (blen >= sizeof r->body) {
        blen = sizeof r->body - 1;
    }
    memcpy(r->body, buf, blen);
    r->body[blen] = '\0';
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* POST body to path with the JSON content type and token (NULL: no Authorization). */
static void post(const char *path, const char *token, const char *body, http_reply *r)
{
    char url[256], auth[160];
    snprintf(url, sizeof url, "%s%s", g_base, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token != NULL ? token : "");
    const char *args[] = {"-X",
                          "POST",
                          "-H",
                          "Content-Type: application/json",
                          "-H",
                          token != NULL ? auth : "X-No-Token: 1",
                          "--data-binary",
                          body,
                          url,
                          NULL};
    CU_ASSERT_EQUAL(curl_run(args, r), 0);
}

static void expect(const http_reply *r, int status, const char *body)
{
    if (r->status != status || strcmp(r->body, body) != 0) {
        fprintf(stderr, "\n  got  %d %s\n  want %d %s\n", r->status, r->body, status, body);
    }
    CU_ASSERT_EQUAL(r->status, status);
    CU_ASSERT_STRING_EQUAL(r->body, body);
}

/* Health/Check posted as JSON with one more header and the given body, into *r. */
static void health_with_header(const char *header, const char *body, http_reply *r)
{
    char url[128];
    snprintf(url, sizeof url, "%s/charter.v1.Health/Check", g_base);
    const char *args[] = {
        "-X", "POST", "-H", "Content-Type: application/json", "-H", header, "--data-binary",
        body, url,    NULL};
    CU_ASSERT_EQUAL(curl_run(args, r), 0);
}

/* --- calls that succeed ------------------------------------------------------------------- */

static void test_healthz_answers_serving(void)
{
    http_reply r;
    char url[128];
    snprintf(url, sizeof url, "%s/healthz", g_base);
    const char *args[] = {url, NULL};
    CU_ASSERT_EQUAL(curl_run(args, &r), 0);
    expect(&r, 200, "{\"status\":\"serving\"}");
}

static void test_health_check_needs_no_token(void)
{
    http_reply r;
    post("/charter.v1.Health/Check", NULL, "{}", &r);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"status\":\"serving\",\"database\":\"up\""));
    char graph[96];
    snprintf(graph, sizeof graph, "\"graph\":\"%s\"", g_graph);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, graph));
}

static void test_create_get_and_list_a_run(void)
{
    http_reply r;
    post("/charter.v1.Runs/CreateRun", HARNESS_OPERATOR_TOKEN,
         "{\"mode\":\"external\",\"task\":\"over HTTP\"}", &r);
    CU_ASSERT_EQUAL_FATAL(r.status, 200);
    const char *id = strstr(r.body, "\"run\":{\"id\":\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    id += strlen("\"run\":{\"id\":\"");
    char run_id[64];
    size_t n = strcspn(id, "\"");
    CU_ASSERT_FATAL(n > 0 && n < sizeof run_id);
    memcpy(run_id, id, n);
    run_id[n] = '\0';
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"task\":\"over HTTP\",\"mode\":\"external\""));

    char body[160];
    snprintf(body, sizeof body, "{\"runId\":\"%s\"}", run_id);
    post("/charter.v1.Runs/GetRun", HARNESS_VIEWER_TOKEN, body, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    char want[128];
    snprintf(want, sizeof want, "{\"run\":{\"id\":\"%s\",\"task\":\"over HTTP\"", run_id);
    CU_ASSERT_EQUAL(strncmp(r.body, want, strlen(want)), 0);

    post("/charter.v1.Runs/ListRuns", HARNESS_OPERATOR_TOKEN, "{}", &r);
    CU_ASSERT_EQUAL(r.status, 200);
    snprintf(want, sizeof want, "\"id\":\"%s\"", run_id);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, want));
}

static void test_show_chain_lists_the_delegation_chain(void)
{
    http_reply r;
    post("/charter.v1.Grants/ShowChain", HARNESS_OPERATOR_TOKEN, "{\"grant_id\":\"g_reporter\"}",
         &r);
    CU_ASSERT_EQUAL(r.status, 200);
    const char *a = strstr(r.body, "\"id\":\"g_reporter\"");
    const char *b = strstr(r.body, "\"id\":\"g_analyst\"");
    const char *c = strstr(r.body, "\"id\":\"g_root\"");
    CU_ASSERT(a != NULL && b != NULL && c != NULL && a < b && b < c);
}

/* The string at obj.key (obj NULL: the top level) of a JSON reply, into out. */
static void reply_field(const http_reply *r, const char *obj, const char *key, char *out, size_t n)
{
    out[0] = '\0';
    json_t *j = json_loads(r->body, 0, NULL);
    json_t *o = obj != NULL ? json_object_get(j, obj) : j;
    const char *v = json_string_value(json_object_get(o, key));
    snprintf(out, n, "%s", v != NULL ? v : "");
    json_decref(j);
}

static void test_deliver_over_http_is_allowed_then_acknowledged(void)
{
    http_reply r;
    char body[512], run[64], ctx[64], source[64], output[64], v[64];
    post("/charter.v1.Runs/CreateRun", HARNESS_OPERATOR_TOKEN, "{\"mode\":\"external\"}", &r);
    CU_ASSERT_EQUAL_FATAL(r.status, 200);
    reply_field(&r, "run", "id", run, sizeof run);
    snprintf(body, sizeof body, "{\"runId\":\"%s\",\"step\":\"analyze\"}", run);
    post("/charter.v1.Gate/OpenStep", HARNESS_OPERATOR_TOKEN, body, &r);
    CU_ASSERT_EQUAL_FATAL(r.status, 200);
    reply_field(&r, NULL, "contextId", ctx, sizeof ctx);
    snprintf(body, sizeof body, "{\"contextId\":\"%s\",\"resourceId\":\"vendor_b\"}", ctx);
    post("/charter.v1.Gate/ReadSource", HARNESS_OPERATOR_TOKEN, body, &r);
    CU_ASSERT_EQUAL_FATAL(r.status, 200);
    reply_field(&r, "artifact", "id", source, sizeof source);
    snprintf(body, sizeof body,
             "{\"contextId\":\"%s\",\"inputIds\":[\"%s\"],\"title\":\"Pick\",\"content\":\"B.\"}",
             ctx, source);
    post("/charter.v1.Gate/RecordOutput", HARNESS_OPERATOR_TOKEN, body, &r);
    CU_ASSERT_EQUAL_FATAL(r.status, 200);
    reply_field(&r, "artifact", "id", output, sizeof output);

    snprintf(body, sizeof body,
             "{\"contextId\":\"%s\",\"payloadId\":\"%s\",\"recipient\":\"cfo\",\"tool\":"
             "\"deliver_internal\",\"invocationId\":\"http-inv-1\"}",
             ctx, output);
    post("/charter.v1.Gate/Deliver", HARNESS_OPERATOR_TOKEN, body, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_EQUAL(strncmp(r.body, "{\"decision\":{\"outcome\":\"ALLOW\"},\"delivery\":{", 44), 0);
    reply_field(&r, "delivery", "invocationId", v, sizeof v);
    CU_ASSERT_STRING_EQUAL(v, "http-inv-1");
    CU_ASSERT_PTR_NULL(strstr(r.body, "acknowledged"));
    post("/charter.v1.Gate/Deliver", HARNESS_OPERATOR_TOKEN, body, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"acknowledged\":true"));

    /* A recipient outside the step is a decision, not an HTTP error. */
    snprintf(body, sizeof body,
             "{\"contextId\":\"%s\",\"payloadId\":\"%s\",\"recipient\":\"public\",\"tool\":"
             "\"deliver_internal\",\"invocationId\":\"http-inv-2\"}",
             ctx, output);
    post("/charter.v1.Gate/Deliver", HARNESS_OPERATOR_TOKEN, body, &r);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_EQUAL(strncmp(r.body, "{\"decision\":{\"outcome\":\"DENY\"", 29), 0);
}

/* The calls the charterd at base holds now, queued or on a worker (charter_queue_depth plus
 * charter_workers_busy from GET /metrics), or -1 when /metrics did not answer. */
static long calls_in_charterd(const char *base)
{
    char cmd[160], line[256];
    snprintf(cmd, sizeof cmd, "curl -s -f --max-time 20 %s/metrics", base);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    long queued = -1, busy = -1;
    while (fgets(line, sizeof line, p) != NULL) {
        sscanf(line, "charter_queue_depth %ld", &queued);
        sscanf(line, "charter_workers_busy %ld", &busy);
    }
    int st = pclose(p);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 && queued >= 0 && busy >= 0 ? queued + busy : -1;
}

/* Calls held up by the database hold workers, never libmicrohttpd's threads: with 16 calls stuck
 * behind paused database writes (more than the listener has threads: 2 to 4), all
 * of them inside charterd, /healthz still answers, and every stuck call is answered once the
 * pause ends. Were a handler to wait for its call, /healthz would wait for the pause to end,
 * and the test ends the pause only after /healthz answered. The stuck calls' deadline
 * (Connect-Timeout-Ms) is far beyond anything the test waits for, so none runs out. */
static void test_slow_calls_do_not_hold_the_http_threads(void)
{
    enum { N = 16 };
    pid_t kids[N];
    char url[128];
    snprintf(url, sizeof url, "%s/charter.v1.Runs/CreateRun", g_base);
    CU_ASSERT_EQUAL_FATAL(calls_in_charterd(g_base), 0);
    CU_ASSERT_EQUAL_FATAL(harness_redis_pause_writes(120000), 0); /* ended below */
    for (int i = 0; i < N; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            int devnull = open("/dev/null", O_WRONLY);
            dup2(devnull, 1);
            execlp("curl", "curl", "-s", "-f", "--max-time", "90", "-X", "POST", "-H",
                   "Content-Type: application/json", "-H", "Connect-Timeout-Ms: 60000", "-H",
                   "Authorization: Bearer " HARNESS_OPERATOR_TOKEN, "-d",
                   "{\"mode\":\"external\",\"task\":\"stuck\"}", url, (char *)NULL);
            _exit(127);
        }
    }
    /* Every call has reached charterd (queued or on a worker) before /healthz is asked. */
    long held = 0;
    for (int i = 0; i < 2000 && (held = calls_in_charterd(g_base)) >= 0 && held < N; i++) {
        struct timespec tick = {0, 10 * 1000000L};
        nanosleep(&tick, NULL);
    }
    CU_ASSERT_EQUAL(held, N);
    http_reply r;
    char hz[128];
    snprintf(hz, sizeof hz, "%s/healthz", g_base);
    const char *args[] = {hz, NULL};
    CU_ASSERT_EQUAL(curl_run(args, &r), 0);
    CU_ASSERT_EQUAL(r.status, 200);
    /* No stuck call has been answered: they were held up by the pause. */
    for (int i = 0; i < N; i++) {
        int st = 0;
        CU_ASSERT_EQUAL(waitpid(kids[i], &st, WNOHANG), 0);
    }
    CU_ASSERT_EQUAL(harness_redis_unpause(), 0);
    int ok = 0;
    for (int i = 0; i < N; i++) {
        int st = 0;
        if (kids[i] > 0 && waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) &&
            WEXITSTATUS(st) == 0) {
            ok++;
        }
    }
    CU_ASSERT_EQUAL(ok, N);
}

/* A chunked body (Transfer-Encoding: chunked, as @connectrpc/connect-node sends) is read and
 * decoded like one with Content-Length; NNG's server read it as empty. */
static void test_chunked_body_is_read(void)
{
    http_reply r;
    char url[128];
    snprintf(url, sizeof url, "%s/charter.v1.Runs/CreateRun", g_base);
    const char *args[] = {"-X",
                          "POST",
                          "-H",
                          "Content-Type: application/json",
                          "-H",
                          "Transfer-Encoding: chunked",
                          "-H",
                          "Authorization: Bearer " HARNESS_OPERATOR_TOKEN,
                          "--data-binary",
                          "{\"mode\":\"external\",\"task\":\"sent in chunks\"}",
                          url,
                          NULL};
    CU_ASSERT_EQUAL(curl_run(args, &r), 0);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "\"task\":\"sent in chunks\",\"mode\":\"external\""));
}

/* A chunked body has no length to refuse on the headers: it is counted as it arrives, kept up
 * to the limit, and answered resource_exhausted once it ends past it; past twice the limit the
 * connection is closed without reading on. */
static void test_chunked_body_over_the_limit_is_refused(void)
{
    char url[128];
    snprintf(url, sizeof url, "%s/charter.v1.Runs/ListRuns", g_base);
    size_t sizes[] = {MAX_MESSAGE + 100, 3 * MAX_MESSAGE};
    for (size_t k = 0; k < 2; k++) {
        size_t n = sizes[k];
        char *body = malloc(n + 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(body);
        memset(body, ' ', n);
        body[0] = '{';
        body[n - 1] = '}';
        body[n] = '\0';
        const char *args[] = {"-X",
                              "POST",
                              "-H",
                              "Content-Type: application/json",
                              "-H",
                              "Transfer-Encoding: chunked",
                              "-H",
                              "Authorization: Bearer " HARNESS_OPERATOR_TOKEN,
                              "--data-binary",
                              body,
                              url,
                              NULL};
        http_reply r;
        int rc = curl_run(args, &r);
        if (k == 0) {
            CU_ASSERT_EQUAL(rc, 0);
            char want[160];
            snprintf(want, sizeof want,
                     "{\"code\":\"resource_exhausted\",\"message\":\"request body exceeds the "
                     "%d byte limit\"}",
                     MAX_MESSAGE);
            expect(&r, 429, want);
        } else {
            CU_ASSERT_EQUAL(r.status, 0); /* closed, no answer */
        }
        free(body);
    }
    http_reply r;
    char hz[128];
    snprintf(hz, sizeof hz, "%s/healthz", g_base);
    const char *args[] = {hz, NULL};
    CU_ASSERT_EQUAL(curl_run(args, &r), 0);
    CU_ASSERT_EQUAL(r.status, 200);
}

/* The token and the declared length are judged on the headers: a request that sends its
 * headers and no body is answered at once, where a listener that reads the body first would
 * wait for bytes that never come. Within the limit without a token, far beyond it without one,
 * with a token that is no token of this charterd, and beyond it with the operator's. */
static void test_body_is_not_read_before_the_token_and_length_are_checked(void)
{
    static const struct {
        const char *auth;
        const char *length;
        int status;
        const char *body;
    } cases[] = {
        {NULL, "60000", 401,
         "{\"code\":\"unauthenticated\",\"message\":\"missing credentials: send metadata "
         "\\\"authorization: Bearer <token>\\\"\"}"},
        {NULL, "100000000", 401,
         "{\"code\":\"unauthenticated\",\"message\":\"missing credentials: send metadata "
         "\\\"authorization: Bearer <token>\\\"\"}"},
        {"not-the-token-at-all-0123456789", "60000", 401,
         "{\"code\":\"unauthenticated\",\"message\":\"invalid token\"}"},
        {"chc_0123", "60000", 401, "{\"code\":\"unauthenticated\",\"message\":\"invalid token\"}"},
        {HARNESS_OPERATOR_TOKEN, "100000000", 429,
         "{\"code\":\"resource_exhausted\",\"message\":\"request of 100000000 bytes exceeds the "
         "65536 byte limit\"}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fd = harness_http_connect(g_hostport);
        CU_ASSERT_FATAL(fd >= 0);
        char req[512], auth[160] = "";
        if (cases[i].auth != NULL) {
            snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", cases[i].auth);
        }
        snprintf(req, sizeof req,
                 "POST /charter.v1.Runs/ListRuns HTTP/1.1\r\nHost: %s\r\nContent-Type: "
                 "application/json\r\n%sContent-Length: %s\r\n\r\n",
                 g_hostport, auth, cases[i].length);
        CU_ASSERT_EQUAL(harness_http_send(fd, req, strlen(req)), 0);
        char body[1024];
        int status = harness_http_response(fd, 10000, body, sizeof body);
        if (status != cases[i].status || strcmp(body, cases[i].body) != 0) {
            fprintf(stderr, "\n  case %zu: got %d %s\n", i, status, body);
        }
        CU_ASSERT_EQUAL(status, cases[i].status);
        CU_ASSERT_STRING_EQUAL(body, cases[i].body);
        close(fd);
    }
}

/* A charterd of this suite's own with extra options; its HTTP address into hostport. */
static int start_own(const char *name, const char *const *extra, size_t n_extra,
                     harness_charterd *d, char *graph, size_t graph_n, char *hostport, size_t hp_n)
{
    harness_graph_name(graph, graph_n, name);
    harness_charterd_opts o;
    memset(&o, 0, sizeof o);
    o.graph = graph;
    o.http = true;
    o.extra_args = extra;
    o.n_extra = n_extra;
    if (harness_charterd_start(&o, d) != 0) {
        return -1;
    }
    snprintf(hostport, hp_n, "%s", d->http_hostport);
    return 0;
}

/* Slow clients are bounded by totals, not by inactivity: one byte every 200 ms keeps
 * libmicrohttpd's inactivity timer from firing, yet a request whose headers are not in within
 * --http-header-timeout, or whose body is not in within --http-body-timeout after them, has its
 * connection closed, unanswered. Each trickle would go on for 15 s. */
static void test_slow_headers_and_bodies_are_closed_at_their_deadlines(void)
{
    char graph[64], hostport[64];
    harness_charterd d;
    const char *extra[] = {"--http-header-timeout", "1", "--http-body-timeout", "1"};
    CU_ASSERT_EQUAL_FATAL(
        start_own("httpslow", extra, 4, &d, graph, sizeof graph, hostport, sizeof hostport), 0);
    char head[256];
    snprintf(head, sizeof head, "GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Slow: ", hostport);
    int fd = harness_http_connect(hostport);
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
             "POST /charter.v1.Runs/ListRuns HTTP/1.1\r\nHost: %s\r\nContent-Type: "
             "application/json\r\nAuthorization: Bearer " HARNESS_OPERATOR_TOKEN
             "\r\nContent-Length: 1000\r\n\r\n{",
             hostport);
    fd = harness_http_connect(hostport);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(harness_http_send(fd, req, strlen(req)), 0);
    sent = harness_http_trickle(fd, " ", 200, 75, &answered);
    printf("    slow body: closed after %d more bytes\n", sent);
    CU_ASSERT(sent >= 0);
    CU_ASSERT_FALSE(answered);
    close(fd);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(graph);
}

/* One GET /healthz on fd, kept alive; its status. */
static int healthz_on(int fd, const char *hostport, int wait_ms)
{
    char req[160];
    snprintf(req, sizeof req, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", hostport);
    if (harness_http_send(fd, req, strlen(req)) != 0) {
        return -1;
    }
    char body[256];
    return harness_http_response(fd, wait_ms, body, sizeof body);
}

/* With --http-max-connections 2 and two connections open (each answered once, so accepted),
 * a third is not served while they stay: its request is answered only after one of them
 * closes. */
static void test_a_connection_past_the_cap_waits_for_a_free_one(void)
{
    char graph[64], hostport[64];
    harness_charterd d;
    const char *extra[] = {"--http-max-connections", "2"};
    CU_ASSERT_EQUAL_FATAL(
        start_own("httpcap", extra, 2, &d, graph, sizeof graph, hostport, sizeof hostport), 0);
    int a = harness_http_connect(hostport);
    int b = harness_http_connect(hostport);
    CU_ASSERT_FATAL(a >= 0 && b >= 0);
    CU_ASSERT_EQUAL(healthz_on(a, hostport, 10000), 200);
    CU_ASSERT_EQUAL(healthz_on(b, hostport, 10000), 200);
    int c = harness_http_connect(hostport); /* completed by the kernel, held in the backlog */
    CU_ASSERT_FATAL(c >= 0);
    char req[160];
    snprintf(req, sizeof req, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", hostport);
    CU_ASSERT_EQUAL(harness_http_send(c, req, strlen(req)), 0);
    CU_ASSERT_FALSE(harness_http_readable(c, 1000)); /* not served while a and b are open */
    close(a);
    char body[256];
    CU_ASSERT_EQUAL(harness_http_response(c, 10000, body, sizeof body), 200);
    CU_ASSERT_STRING_EQUAL(body, "{\"status\":\"serving\"}");
    close(b);
    close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(graph);
}

/* --- every error class -------------------------------------------------------------------- */

static void test_bad_json_is_invalid_argument(void)
{
    http_reply r;
    post("/charter.v1.Runs/ListRuns", HARNESS_OPERATOR_TOKEN, "{\"limit\":", &r);
    expect(&r, 400,
           "{\"code\":\"invalid_argument\",\"message\":\"charter.v1.ListRunsRequest: invalid JSON "
           "at line 1 column 9: unexpected token near end of file\"}");
}

static void test_unknown_field_is_invalid_argument(void)
{
    http_reply r;
    post("/charter.v1.Runs/GetRun", HARNESS_OPERATOR_TOKEN, "{\"runId\":\"r\",\"runID\":\"r\"}",
         &r);
    expect(&r, 400,
           "{\"code\":\"invalid_argument\",\"message\":\"charter.v1.GetRunRequest: runID: unknown "
           "field of charter.v1.GetRunRequest\"}");
}

static void test_wrong_type_is_invalid_argument(void)
{
    http_reply r;
    post("/charter.v1.Runs/GetRun", HARNESS_OPERATOR_TOKEN, "{\"runId\":7}", &r);
    expect(&r, 400,
           "{\"code\":\"invalid_argument\",\"message\":\"charter.v1.GetRunRequest: runId: "
           "expected a string, got a number\"}");
}

static void test_unknown_method_is_unimplemented(void)
{
    http_reply r;
    post("/charter.v1.Gate/Teleport", HARNESS_OPERATOR_TOKEN, "{}", &r);
    expect(&r, 501,
           "{\"code\":\"unimplemented\",\"message\":\"unknown method "
           "\\\"/charter.v1.Gate/Teleport\\\"\"}");
}

static void test_missing_and_wrong_tokens_are_unauthenticated(void)
{
    http_reply r;
    post("/charter.v1.Runs/ListRuns", NULL, "{}", &r);
    expect(&r, 401,
           "{\"code\":\"unauthenticated\",\"message\":\"missing credentials: send metadata "
           "\\\"authorization: Bearer <token>\\\"\"}");
    post("/charter.v1.Runs/ListRuns", "not-the-token-at-all-0123456789", "{}", &r);
    expect(&r, 401, "{\"code\":\"unauthenticated\",\"message\":\"invalid token\"}");
}

static void test_viewer_cannot_revoke(void)
{
    http_reply r;
    post("/charter.v1.Grants/RevokeGrant", HARNESS_VIEWER_TOKEN, "{\"grantId\":\"g_reporter\"}",
         &r);
    CU_ASSERT_EQUAL(r.status, 403);
    CU_ASSERT_EQUAL(strncmp(r.body, "{\"code\":\"permission_denied\",", 28), 0);
}

static void test_unknown_run_is_not_found(void)
{
    http_reply r;
    post("/charter.v1.Runs/GetRun", HARNESS_OPERATOR_TOKEN, "{\"runId\":\"no_such_run\"}", &r);
    CU_ASSERT_EQUAL(r.status, 404);
    CU_ASSERT_EQUAL(strncmp(r.body, "{\"code\":\"not_found\",", 20), 0);
}

static void test_oversized_body_is_resource_exhausted(void)
{
    /* Above the limit, within twice it: read, and refused with the Connect error. */
    size_t n = MAX_MESSAGE + 100;
    char *body = malloc(n + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(body);
    memset(body, ' ', n);
    body[0] = '{';
    body[n - 1] = '}';
    body[n] = '\0';
    http_reply r;
    post("/charter.v1.Runs/ListRuns", HARNESS_OPERATOR_TOKEN, body, &r);
    char want[160];
    snprintf(want, sizeof want,
             "{\"code\":\"resource_exhausted\",\"message\":\"request of %zu bytes exceeds the %d "
             "byte limit\"}",
             n, MAX_MESSAGE);
    expect(&r, 429, want);
    free(body);
}

static void test_wrong_content_type_is_415(void)
{
    http_reply r;
    char url[128];
    snprintf(url, sizeof url, "%s/charter.v1.Health/Check", g_base);
    const char *args[] = {"-X", "POST", "-H", "Content-Type: application/proto", "--data-binary",
                          "{}", url,    NULL};
    CU_ASSERT_EQUAL(curl_run(args, &r), 0);
    expect(&r, 415,
           "{\"code\":\"invalid_argument\",\"message\":\"send Content-Type: application/json (the "
           "proto3 JSON mapping)\"}");
}

/* A compressed body (Connect's Content-Encoding) is refused as unimplemented before it is read,
 * not decoded as JSON and blamed on the caller as malformed; identity is no compression. */
static void test_compressed_body_is_unimplemented(void)
{
    http_reply r;
    health_with_header("Content-Encoding: gzip", "\x1f\x8b\x08", &r);
    expect(&r, 501,
           "{\"code\":\"unimplemented\",\"message\":\"compressed request bodies are not "
           "accepted: send the body uncompressed (Content-Encoding identity)\"}");
    health_with_header("Content-Encoding: identity", "{}", &r);
    CU_ASSERT_EQUAL(r.status, 200);
}

static void test_foreign_origin_is_refused(void)
{
    http_reply r;
    char url[128];
    snprintf(url, sizeof url, "%s/charter.v1.Health/Check", g_base);
    const char *args[] = {"-X",
                          "POST",
                          "-H",
                          "Content-Type: application/json",
                          "-H",
                          "Origin: http://evil.example",
                          "--data-binary",
                          "{}",
                          url,
                          NULL};
    CU_ASSERT_EQUAL(curl_run(args, &r), 0);
    expect(&r, 403,
           "{\"code\":\"permission_denied\",\"message\":\"cross-origin calls are refused\"}");

    /* The server's own origin is no cross-origin call. */
    char origin[96];
    snprintf(origin, sizeof origin, "Origin: %s", g_base);
    const char *same[] = {
        "-X", "POST", "-H", "Content-Type: application/json", "-H", origin, "--data-binary",
        "{}", url,    NULL};
    CU_ASSERT_EQUAL(curl_run(same, &r), 0);
    CU_ASSERT_EQUAL(r.status, 200);
}

static void test_foreign_host_is_refused(void)
{
    http_reply r;
    char url[128];
    snprintf(url, sizeof url, "%s/healthz", g_base);
    const char *args[] = {"-H", "Host: attacker.example:80", url, NULL};
    CU_ASSERT_EQUAL(curl_run(args, &r), 0);
    expect(&r, 403,
           "{\"code\":\"permission_denied\",\"message\":\"Host \\\"attacker.example:80\\\" is not "
           "this server (call it by a loopback name, or start charterd with --http-allow-host "
           "NAME)\"}");
    char host[64];
    snprintf(host, sizeof host, "Host: localhost:%s", strchr(g_hostport, ':') + 1);
    const char *local[] = {"-H", host, url, NULL};
    CU_ASSERT_EQUAL(curl_run(local, &r), 0);
    CU_ASSERT_EQUAL(r.status, 200);
}

static void test_malformed_timeout_header_is_invalid_argument(void)
{
    http_reply r;
    /* Not a number, and zero: Connect's timeout is a positive count of milliseconds. */
    const char *headers[] = {"Connect-Timeout-Ms: soon", "Connect-Timeout-Ms: 0"};
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        health_with_header(headers[i], "{}", &r);
        expect(&r, 400,
               "{\"code\":\"invalid_argument\",\"message\":\"Connect-Timeout-Ms must be a "
               "positive whole number of milliseconds\"}");
    }
}

/* Connect-Protocol-Version is optional; sent, it must name version 1, the one spoken here. */
static void test_other_connect_protocol_version_is_invalid_argument(void)
{
    http_reply r;
    health_with_header("Connect-Protocol-Version: 2", "{}", &r);
    expect(&r, 400,
           "{\"code\":\"invalid_argument\",\"message\":\"Connect-Protocol-Version must be "
           "\\\"1\\\"\"}");
    health_with_header("Connect-Protocol-Version: 1", "{}", &r);
    CU_ASSERT_EQUAL(r.status, 200);
}

/* Past workers + queue calls in progress, one more is refused at once rather than queued:
 * a charterd with one worker and no queue, its one call held up by a paused Redis. */
static void test_calls_past_the_bound_are_refused_at_once(void)
{
    char graph2[64], hostport[64], base[80];
    harness_graph_name(graph2, sizeof graph2, "httpbound");
    const char *extra[] = {"--workers", "1", "--queue", "0"};
    harness_charterd_opts o;
    memset(&o, 0, sizeof o);
    o.graph = graph2;
    o.http = true;
    o.extra_args = extra;
    o.n_extra = 4;
    harness_charterd d;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    snprintf(hostport, sizeof hostport, "%s", d.http_hostport);
    snprintf(base, sizeof base, "http://%s", hostport);

    char url[128];
    snprintf(url, sizeof url, "%s/charter.v1.Runs/CreateRun", base);
    /* The first call (a write) is stuck until the pause is ended below, far within its
     * deadline; the second is sent once charterd holds the first. */
    CU_ASSERT_EQUAL(harness_redis_pause_writes(120000), 0);
    pid_t kid = fork();
    if (kid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        execlp("curl", "curl", "-s", "-f", "--max-time", "90", "-X", "POST", "-H",
               "Content-Type: application/json", "-H", "Connect-Timeout-Ms: 60000", "-H",
               "Authorization: Bearer " HARNESS_OPERATOR_TOKEN, "-d", "{\"mode\":\"external\"}",
               url, (char *)NULL);
        _exit(127);
    }
    long held = 0;
    for (int i = 0; i < 2000 && (held = calls_in_charterd(base)) == 0; i++) {
        struct timespec tick = {0, 10 * 1000000L};
        nanosleep(&tick, NULL);
    }
    CU_ASSERT_EQUAL(held, 1);
    snprintf(url, sizeof url, "%s/charter.v1.Runs/ListRuns", base);
    http_reply r;
    const char *args[] = {"-X", "POST",
                          "-H", "Content-Type: application/json",
                          "-H", "Authorization: Bearer " HARNESS_OPERATOR_TOKEN,
                          "-d", "{}",
                          url,  NULL};
    CU_ASSERT_EQUAL(curl_run(args, &r), 0);
    /* Refused while the first call is still stuck, not queued behind it. */
    int st = 0;
    CU_ASSERT_EQUAL(waitpid(kid, &st, WNOHANG), 0);
    expect(&r, 429,
           "{\"code\":\"resource_exhausted\",\"message\":\"server busy: 1 HTTP calls in progress "
           "(retry later)\"}");
    CU_ASSERT_EQUAL(harness_redis_unpause(), 0);
    CU_ASSERT(kid > 0 && waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(graph2);
}

/* charter_workers_busy from the /metrics of the charterd at hostport, or -1. */
static int workers_busy(const char *hostport)
{
    int fd = harness_http_connect(hostport);
    if (fd < 0) {
        return -1;
    }
    char req[128];
    snprintf(req, sizeof req, "GET /metrics HTTP/1.1\r\nHost: %s\r\n\r\n", hostport);
    static char body[60000];
    int status = harness_http_send(fd, req, strlen(req)) == 0
                     ? harness_http_response(fd, 10000, body, sizeof body)
                     : 0;
    close(fd);
    const char *g = status == 200 ? strstr(body, "\ncharter_workers_busy ") : NULL;
    return g != NULL ? atoi(g + strlen("\ncharter_workers_busy ")) : -1;
}

/* A stop answers the HTTP calls in progress before charterd exits: a call sent chunked (as
 * connect-node sends) is held at a worker by a paused Redis (seen on charter_workers_busy)
 * when SIGTERM comes, and its caller still gets its answer. libmicrohttpd may stop only with
 * no connection suspended, so the listener waits for the answers to go out, not only for the
 * calls to come back. */
static void test_stop_answers_a_chunked_call_in_progress(void)
{
    char graph[64], hostport[64];
    harness_charterd d;
    CU_ASSERT_EQUAL_FATAL(
        start_own("httpstop", NULL, 0, &d, graph, sizeof graph, hostport, sizeof hostport), 0);
    int fd = harness_http_connect(hostport);
    CU_ASSERT_FATAL(fd >= 0);
    char req[512];
    snprintf(req, sizeof req,
             "POST /charter.v1.Runs/ListRuns HTTP/1.1\r\nHost: %s\r\nContent-Type: "
             "application/json\r\nAuthorization: Bearer " HARNESS_OPERATOR_TOKEN
             "\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n{\"limit\":1}\r\n0\r\n\r\n",
             hostport);
    CU_ASSERT_EQUAL_FATAL(harness_redis_pause(3000), 0);
    CU_ASSERT_EQUAL(harness_http_send(fd, req, strlen(req)), 0);
    int busy = -1;
    for (int i = 0; i < 100 && busy != 1; i++) {
        if ((busy = workers_busy(hostport)) != 1) {
            harness_sleep_ms(20);
        }
    }
    CU_ASSERT_EQUAL(busy, 1);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0); /* SIGTERM, then waits for the exit */
    char body[256];
    CU_ASSERT_EQUAL(harness_http_response(fd, 5000, body, sizeof body), 200);
    CU_ASSERT_STRING_EQUAL(body, "{}");
    close(fd);
    harness_redis_unpause();
    harness_graph_drop(graph);
}

/* --- the suite ---------------------------------------------------------------------------- */

/* The suite pauses the database: on a redis-server of its own (harness_suite_redis_start). */
static harness_private_redis g_redis;

static int suite_init(void)
{
    if (harness_suite_redis_start(&g_redis) != 0)
        return -1;
    harness_graph_name(g_graph, sizeof g_graph, "http");
    static char max[16];
    snprintf(max, sizeof max, "%d", MAX_MESSAGE);
    const char *extra[] = {"--max-message", max};
    harness_charterd_opts o;
    memset(&o, 0, sizeof o);
    o.graph = g_graph;
    o.http = true;
    o.extra_args = extra;
    o.n_extra = 2;
    if (harness_charterd_start(&o, &g_d) != 0) {
        return -1;
    }
    snprintf(g_hostport, sizeof g_hostport, "%s", g_d.http_hostport);
    snprintf(g_base, sizeof g_base, "http://%s", g_hostport);
    return 0;
}

static int suite_clean(void)
{
    harness_redis_unpause();
    int rc = harness_charterd_stop(&g_d);
    harness_graph_drop(g_graph);
    harness_suite_redis_stop(&g_redis);
    return rc == 0 ? 0 : -1;
}

#define T(fn)                                                                                      \
    {                                                                                              \
#fn, fn                                                                                    \
    }
static const harness_test tests[] = {
    T(test_healthz_answers_serving),
    T(test_health_check_needs_no_token),
    T(test_create_get_and_list_a_run),
    T(test_show_chain_lists_the_delegation_chain),
    T(test_deliver_over_http_is_allowed_then_acknowledged),
    T(test_slow_calls_do_not_hold_the_http_threads),
    T(test_bad_json_is_invalid_argument),
    T(test_unknown_field_is_invalid_argument),
    T(test_wrong_type_is_invalid_argument),
    T(test_unknown_method_is_unimplemented),
    T(test_missing_and_wrong_tokens_are_unauthenticated),
    T(test_viewer_cannot_revoke),
    T(test_unknown_run_is_not_found),
    T(test_oversized_body_is_resource_exhausted),
    T(test_wrong_content_type_is_415),
    T(test_compressed_body_is_unimplemented),
    T(test_foreign_origin_is_refused),
    T(test_foreign_host_is_refused),
    T(test_malformed_timeout_header_is_invalid_argument),
    T(test_other_connect_protocol_version_is_invalid_argument),
    T(test_chunked_body_is_read),
    T(test_chunked_body_over_the_limit_is_refused),
    T(test_body_is_not_read_before_the_token_and_length_are_checked),
    T(test_slow_headers_and_bodies_are_closed_at_their_deadlines),
    T(test_a_connection_past_the_cap_waits_for_a_free_one),
    T(test_stop_answers_a_chunked_call_in_progress),
    T(test_calls_past_the_bound_are_refused_at_once),
};

static const harness_suite suites[] = {
    {"http", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
