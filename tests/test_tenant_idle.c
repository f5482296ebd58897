/*
 * test_tenant_idle.c - a worker that has been idle admits a stored credential, a named tenant
 * and an unknown tenant as it did before: the call's own deadline bounds the tenant admission,
 * not the one a previous call left on the worker's database connection.
 *
 * Two charterd on a redis-server of the suite's own (the suite pauses it), both with a 300 ms
 * default deadline (--timeout-ms): one with a single worker, one with the default number. Each
 * case makes a call with a short deadline, idles past it and past --timeout-ms, then calls with
 * a long deadline, over NNG (libcharter) and over HTTP/JSON (curl): that call must succeed (or
 * answer NOT_FOUND for the unknown tenant). Before, it answered DEADLINE_EXCEEDED (HTTP 504):
 * the admission ran under the previous call's deadline, long passed. For the default worker
 * count every worker is first given a call of its own (W concurrent calls held by a paused
 * database), so that none is fresh.
 */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"

#define ADMIN_TOKEN "test-admin-token-2c71d0e94b8a5f36"
/* The charterd's default deadline, the short deadline of the call before the idle time, and
 * the idle time: longer than both. */
#define DEFAULT_DEADLINE_MS "300"
#define SHORT_MS 400
#define IDLE_MS 800
#define LONG_MS 15000

static harness_private_redis redis_;
static char tenant[64], nosuch[64], secret[128];

typedef struct {
    const char *what;
    char graph[64];
    char http[64]; /* 127.0.0.1:<port> of its --http */
    harness_charterd d;
    bool started;
} daemon_t;

static daemon_t one = {.what = "--workers 1"}, many = {.what = "the default worker count"};

static charter_client *client(const daemon_t *d, const char *token, const char *named,
                              uint32_t timeout_ms)
{
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = timeout_ms;
    o.tenant = named;
    charter_client *c = NULL;
    return charter_client_open(d->d.tcp_url, token, &o, &c) == 0 ? c : NULL;
}

static int start(daemon_t *d, bool single)
{
    harness_graph_name(d->graph, sizeof d->graph, single ? "idle1" : "idlen");
    const char *extra[] = {"--timeout-ms", DEFAULT_DEADLINE_MS, "--workers", "1"};
    harness_charterd_opts o = {
        .graph = d->graph, .http = true, .extra_args = extra, .n_extra = single ? 4 : 2};
    if (harness_charterd_start(&o, &d->d) != 0)
        return -1;
    snprintf(d->http, sizeof d->http, "%s", d->d.http_hostport);
    d->started = true;
    return 0;
}

static int suite_init(void)
{
    if (harness_suite_redis_start(&redis_) != 0)
        return -1;
    setenv("CHARTER_ADMIN_TOKEN", ADMIN_TOKEN, 1);
    snprintf(tenant, sizeof tenant, "ti_%d", (int)getpid());
    snprintf(nosuch, sizeof nosuch, "nosuch_%d", (int)getpid());
    if (start(&one, true) != 0 || start(&many, false) != 0)
        return -1;
    charter_client *admin = client(&one, ADMIN_TOKEN, NULL, LONG_MS);
    if (admin == NULL)
        return -1;
    Charter__V1__CreateTenantRequest rq = CHARTER__V1__CREATE_TENANT_REQUEST__INIT;
    rq.name = tenant;
    Charter__V1__CreateTenantResponse *r = NULL;
    charter_status st;
    int rc = charter_create_tenant(admin, &rq, &r, &st);
    charter_client_close(admin);
    if (rc != 0) {
        fprintf(stderr, "\n  CreateTenant %s: %s\n", tenant, st.message);
        return -1;
    }
    snprintf(secret, sizeof secret, "%s", r->operator_credential->secret);
    charter__v1__create_tenant_response__free_unpacked(r, NULL);
    return 0;
}

static int suite_clean(void)
{
    harness_redis_unpause();
    int rc = 0;
    if (one.started && harness_charterd_stop(&one.d) != 0)
        rc = -1;
    if (many.started && harness_charterd_stop(&many.d) != 0)
        rc = -1;
    harness_suite_redis_stop(&redis_);
    return rc;
}

/* The calls each case makes: a token, the tenant it names (NULL: none) and the answer. */
typedef struct {
    const char *name;
    const char *token; /* NULL: the tenant's operator credential */
    const char *named; /* NULL: none; "T": the tenant; "N": a tenant that does not exist */
    int code;          /* libcharter's code of the long call */
    int http_status;
} idle_case;

static const idle_case cases[] = {
    {"a stored credential", NULL, NULL, 0, 200},
    {"a stored credential naming its tenant", NULL, "T", 0, 200},
    {"a stored credential naming an unknown tenant", NULL, "N", -CHARTER_NOT_FOUND, 404},
    {"the operator token naming an unknown tenant", HARNESS_OPERATOR_TOKEN, "N", -CHARTER_NOT_FOUND,
     404},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static const char *case_token(const idle_case *k)
{
    return k->token != NULL ? k->token : secret;
}

static const char *case_tenant(const idle_case *k)
{
    return k->named == NULL ? NULL : strcmp(k->named, "T") == 0 ? tenant : nosuch;
}

/* Runs/ListRuns over NNG with the case's token and tenant, the client waiting timeout_ms;
 * the code into *code and the message into msg. */
static void nng_list_runs(const daemon_t *d, const idle_case *k, uint32_t timeout_ms, int *code,
                          char msg[256])
{
    charter_client *c = client(d, case_token(k), case_tenant(k), timeout_ms);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    Charter__V1__ListRunsRequest rq = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
    Charter__V1__ListRunsResponse *r = NULL;
    charter_status st;
    *code = charter_list_runs(c, &rq, &r, &st);
    snprintf(msg, 256, "%s", st.message);
    if (r != NULL)
        charter__v1__list_runs_response__free_unpacked(r, NULL);
    charter_client_close(c);
}

/* The same over HTTP with Connect-Timeout-Ms: deadline_ms. */
static void http_list_runs(const daemon_t *d, const idle_case *k, int deadline_ms,
                           harness_http_reply *r)
{
    char auth[160], ten[96], tmo[48];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", case_token(k));
    snprintf(tmo, sizeof tmo, "Connect-Timeout-Ms: %d", deadline_ms);
    const char *headers[3] = {auth, tmo, NULL};
    size_t n = 2;
    if (case_tenant(k) != NULL) {
        snprintf(ten, sizeof ten, "Charter-Tenant: %s", case_tenant(k));
        headers[n++] = ten;
    }
    CU_ASSERT_EQUAL_FATAL(
        harness_http_post(d->http, "/charter.v1.Runs/ListRuns", headers, n, "{}", r), 0);
}

/* One case on d: over NNG, then over HTTP, a call with a short deadline, an idle time longer
 * than it and than charterd's default deadline, then a call with a long deadline. When
 * skip_short is set the workers already hold deadlines of calls made before (the caller's). */
static void idle_then_call(const daemon_t *d, const idle_case *k, bool skip_short)
{
    int code = 0;
    char msg[256];
    if (!skip_short) {
        /* Its answer does not matter: it leaves its deadline on the worker that served it. */
        nng_list_runs(d, k, SHORT_MS, &code, msg);
        harness_sleep_ms(IDLE_MS);
    }
    nng_list_runs(d, k, LONG_MS, &code, msg);
    if (code != k->code)
        fprintf(stderr, "\n  %s, %s, NNG after idling: %d %s\n", d->what, k->name, code, msg);
    CU_ASSERT_EQUAL(code, k->code);
    if (k->code == -CHARTER_NOT_FOUND)
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, "not found"));

    harness_http_reply r;
    if (!skip_short) {
        http_list_runs(d, k, SHORT_MS, &r);
        harness_sleep_ms(IDLE_MS);
    }
    http_list_runs(d, k, LONG_MS, &r);
    if (r.status != k->http_status)
        fprintf(stderr, "\n  %s, %s, HTTP after idling: %d %s\n", d->what, k->name, r.status,
                r.body);
    CU_ASSERT_EQUAL(r.status, k->http_status);
}

static void test_one_worker_admits_credentials_and_tenants_after_idling(void)
{
    for (size_t i = 0; i < N_CASES; i++)
        idle_then_call(&one, &cases[i], false);
}

/* One ListWorkflows with a deadline of HOLD_MS, made while the database is paused: it holds a
 * worker until its deadline (Health would not: it is answered without a worker). */
#define HOLD_MS 1500
static void *hold_a_worker(void *arg)
{
    const daemon_t *d = arg;
    harness_response r;
    Charter__V1__ListWorkflowsRequest rq = CHARTER__V1__LIST_WORKFLOWS_REQUEST__INIT;
    if (harness_rpc_deadline(d->d.tcp_url, "/charter.v1.Workflows/ListWorkflows",
                             HARNESS_OPERATOR_TOKEN, &rq.base, HOLD_MS, LONG_MS, &r) == 0)
        harness_response_free(&r);
    return NULL;
}

static void test_every_worker_admits_credentials_and_tenants_after_idling(void)
{
    Charter__V1__HealthResponse *h = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_health(many.d.tcp_url, LONG_MS, &h), 0);
    unsigned workers = h->workers;
    charter__v1__health_response__free_unpacked(h, NULL);
    CU_ASSERT_FATAL(workers >= 2 && workers <= 64);

    /* Every worker serves one call with a deadline and is then idle: W calls at once, each
     * held by the paused database until its deadline, so no worker takes two. */
    CU_ASSERT_EQUAL_FATAL(harness_redis_pause(HOLD_MS + 1000), 0);
    pthread_t t[64];
    unsigned started = 0;
    for (unsigned i = 0; i < workers; i++)
        if (pthread_create(&t[started], NULL, hold_a_worker, &many) == 0)
            started++;
    for (unsigned i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    CU_ASSERT_EQUAL(harness_redis_unpause(), 0);
    CU_ASSERT_EQUAL_FATAL(started, workers);
    harness_sleep_ms(IDLE_MS);
    for (size_t i = 0; i < N_CASES; i++)
        idle_then_call(&many, &cases[i], true);
    /* And once more each, with a call of a short deadline before the idle time. */
    for (size_t i = 0; i < N_CASES; i++)
        idle_then_call(&many, &cases[i], false);
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"one worker admits credentials and tenants after idling",
     test_one_worker_admits_credentials_and_tenants_after_idling},
    {"every worker admits credentials and tenants after idling",
     test_every_worker_admits_credentials_and_tenants_after_idling},
};
static const harness_suite suites[] = {
    {"tenant admission after idling", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
