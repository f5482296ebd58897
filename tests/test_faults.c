/*
 * test_faults.c - charterd fails closed when its database vanishes, its relationships are
 * deleted, it crashes, or a caller asks for more work than it allows; real charterd processes,
 * real redis-server processes (the shared test Redis, and private ones this file starts and
 * kills), real NNG.
 *
 * A fault may cost availability, never correctness: while the graph is unreachable or
 * incomplete no decision is ALLOW and nothing is delivered, charterd keeps answering and
 * recovers by itself, loading the query library again when Redis comes back without it; after
 * a crash nothing acknowledged is lost and no run is left "running".
 */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"

extern const char embedded_queries[];
extern const size_t embedded_queries_len;

/* --- helpers --------------------------------------------------------------------------------- */

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wall time of the suite in progress, reported by its cleanup. */
static long long suite_t0;

static void suite_clock_start(void)
{
    suite_t0 = now_ms();
}

static void suite_clock_report(void)
{
    printf("    (suite wall time %lld ms)\n", now_ms() - suite_t0);
}

static harness_private_redis suite_redis;

static int suite_redis_start(void)
{
    return harness_suite_redis_start(&suite_redis);
}

static void suite_redis_stop(void)
{
    harness_suite_redis_stop(&suite_redis);
}

/* A JSON string's text, or "(none)" when it is not a string, for assertions. */
static const char *text_of(const json_t *j)
{
    const char *s = json_string_value(j);
    return s ? s : "(none)";
}

static bool only_code(const Charter__V1__Decision *d, const char *code)
{
    return d && d->n_codes == 1 && strcmp(d->codes[0], code) == 0;
}

/* Removes a folder this file created (recursively; links are not followed). */
static void remove_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return;
    if (!S_ISDIR(sb.st_mode)) {
        unlink(path);
        return;
    }
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char child[512];
            int w = snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            if (w > 0 && (size_t)w < sizeof child)
                remove_tree(child);
        }
        closedir(d);
    }
    rmdir(path);
}

static int record_output(charter_client *c, const char *ctx, char **inputs, size_t n,
                         const char *title, const char *content, char id[129])
{
    Charter__V1__RecordOutputRequest req = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    req.context_id = (char *)ctx;
    req.input_ids = inputs;
    req.n_input_ids = n;
    req.title = (char *)title;
    req.content = (char *)content;
    Charter__V1__RecordOutputResponse *r = NULL;
    charter_status st;
    if (charter_record_output(c, &req, &r, &st) != 0) {
        fprintf(stderr, "RecordOutput: %s: %s\n", charter_status_name(st.code), st.message);
        return -1;
    }
    int ok = r->decision && r->decision->outcome == CHARTER__V1__OUTCOME__ALLOW && r->artifact;
    if (ok)
        snprintf(id, 129, "%s", r->artifact->id);
    else
        fprintf(stderr, "RecordOutput: outcome %d: %s\n", r->decision ? r->decision->outcome : 0,
                r->decision ? r->decision->witness : "");
    charter__v1__record_output_response__free_unpacked(r, NULL);
    return ok ? 0 : -1;
}

static int deliver(charter_client *c, const char *ctx, const char *payload, const char *recipient,
                   const char *tool, const char *inv, Charter__V1__DeliverResponse **out,
                   charter_status *st)
{
    Charter__V1__DeliverRequest req = CHARTER__V1__DELIVER_REQUEST__INIT;
    req.context_id = (char *)ctx;
    req.payload_id = (char *)payload;
    req.recipient = (char *)recipient;
    req.tool = (char *)tool;
    req.invocation_id = (char *)inv;
    return charter_deliver(c, &req, out, st);
}

/* The outcome of a delivery (0 on an RPC error), with its codes joined into codes. */
static int deliver_outcome(charter_client *c, const char *ctx, const char *payload,
                           const char *recipient, const char *tool, const char *inv, char *codes,
                           size_t n)
{
    Charter__V1__DeliverResponse *r = NULL;
    charter_status st;
    codes[0] = '\0';
    if (deliver(c, ctx, payload, recipient, tool, inv, &r, &st) != 0) {
        snprintf(codes, n, "%s", charter_status_name(st.code));
        return 0;
    }
    int outcome = r->decision ? (int)r->decision->outcome : 0;
    size_t used = 0;
    for (size_t i = 0; r->decision && i < r->decision->n_codes; i++) {
        int w = snprintf(codes + used, n - used, "%s%s", i ? "," : "", r->decision->codes[i]);
        if (w < 0 || (size_t)w >= n - used)
            break;
        used += (size_t)w;
    }
    if (r->delivery && outcome != CHARTER__V1__OUTCOME__ALLOW)
        outcome = -1; /* a delivery without ALLOW: never acceptable */
    charter__v1__deliver_response__free_unpacked(r, NULL);
    return outcome;
}

static json_t *stored_delivery(store *st, const char *inv)
{
    json_t *j = NULL;
    if (q_find_delivery(st, inv, &j) != STATUS_OK)
        return NULL;
    return j;
}

static long stat_of(store *st, const char *what)
{
    json_t *j = NULL;
    if (q_graph_stats(st, &j) != STATUS_OK)
        return -1;
    json_t *v = json_object_get(j, what);
    long n = json_is_integer(v)  ? (long)json_integer_value(v)
             : json_is_string(v) ? atol(json_string_value(v))
                                 : -1;
    json_decref(j);
    return n;
}

/* Removes a killed charterd's private folder (its log and socket). */
static void forget_daemon(harness_charterd *d)
{
    if (d->dir[0] != '\0' && strncmp(d->dir, "/tmp/charter-test-", 18) == 0)
        remove_tree(d->dir);
    d->dir[0] = '\0';
}

/* --- the graph is required: the database vanishes and comes back ---------------------------- */

static char db_graph[64];
static harness_private_redis db_redis;
static store *db_store;
static harness_charterd db_daemon;

static int db_setup(void)
{
    suite_clock_start();
    harness_graph_name(db_graph, sizeof db_graph, "faults_db");
    memset(&db_redis, 0, sizeof db_redis);
    if (harness_private_redis_start(&db_redis) != 0)
        return -1;
    if (store_open(db_redis.url, db_graph, 3000, &db_store) != STATUS_OK ||
        store_load_library(db_store, embedded_queries, embedded_queries_len) != STATUS_OK)
        return -1;
    harness_require_empty_graph(db_store);
    /* The last --redis wins: this charterd uses the private server, not the shared one. */
    const char *extra[] = {"--redis", db_redis.url, "--timeout-ms", "2000"};
    harness_charterd_opts o = {.graph = db_graph, .extra_args = extra, .n_extra = 4};
    return harness_charterd_start(&o, &db_daemon);
}

static int db_clean(void)
{
    int rc = harness_charterd_stop(&db_daemon);
    store_close(db_store);
    harness_private_redis_stop(&db_redis);
    suite_clock_report();
    return rc == 0 ? 0 : -1;
}

/* CUnit runs no cleanup after a failed init: stop whatever was started. */
static int db_init(void)
{
    if (db_setup() == 0)
        return 0;
    db_clean();
    return -1;
}

/* One call's result while the database is down: its RPC code and, for decisions, the outcome
 * and whether the codes are exactly [GRAPH_ERROR]. */
typedef struct {
    const char *method;
    int rc;
    int outcome;
    bool graph_error;
    long long took_ms;
} outage_call;

static void outage_decision(outage_call *oc, int rc, const Charter__V1__Decision *d, long long t0)
{
    oc->rc = rc;
    oc->took_ms = now_ms() - t0;
    oc->outcome = d ? (int)d->outcome : 0;
    oc->graph_error = only_code(d, "GRAPH_ERROR");
}

static void test_redis_killed_mid_run_fails_closed_and_recovers_without_restart(void)
{
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(db_daemon.tcp_url, HARNESS_OPERATOR_TOKEN, 10000, &c),
                          0);
    char run_id[129], ctx[129], src[129], payload[129];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(c, "external", NULL, run_id, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(c, run_id, "analyze", ctx), 0);
    CU_ASSERT_EQUAL_FATAL(harness_read_source(c, ctx, "budget", src), 0);
    char *inputs[1] = {src};
    CU_ASSERT_EQUAL_FATAL(
        record_output(c, ctx, inputs, 1, "Internal recommendation", "Pick vendor_b.", payload), 0);
    char codes[256];
    CU_ASSERT_EQUAL_FATAL(
        deliver_outcome(c, ctx, payload, "cfo", "deliver_internal", "db-before", codes, 256),
        CHARTER__V1__OUTCOME__ALLOW);

    harness_private_redis_kill(&db_redis);

    /* charterd keeps serving: Health answers, and says the database is down (within the
     * serving status's 250 ms bound). */
    Charter__V1__HealthResponse *h = NULL;
    charter_status st;
    CU_ASSERT_EQUAL(harness_health_until(db_daemon.tcp_url, "down", 2000, &h), 0);
    if (h) {
        CU_ASSERT_STRING_EQUAL(h->database, "down");
        CU_ASSERT_STRING_EQUAL(h->status, "database_down");
        charter__v1__health_response__free_unpacked(h, NULL);
    }

    /* Decisions are UNKNOWN GRAPH_ERROR (code 0); calls that decide nothing are UNAVAILABLE. */
    outage_call calls[24];
    size_t n = 0;
    long long t0;
    {
        Charter__V1__DeliverResponse *r = NULL;
        t0 = now_ms();
        int rc = deliver(c, ctx, payload, "cfo", "deliver_internal", "db-during", &r, &st);
        calls[n] = (outage_call){"Gate/Deliver", 0, 0, false, 0};
        outage_decision(&calls[n++], rc, r ? r->decision : NULL, t0);
        if (r) {
            CU_ASSERT_PTR_NULL(r->delivery);
            charter__v1__deliver_response__free_unpacked(r, NULL);
        }
    }
    {
        Charter__V1__ReadSourceRequest req = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
        req.context_id = ctx;
        req.resource_id = "budget";
        Charter__V1__ReadSourceResponse *r = NULL;
        t0 = now_ms();
        int rc = charter_read_source(c, &req, &r, &st);
        calls[n] = (outage_call){"Gate/ReadSource", 0, 0, false, 0};
        outage_decision(&calls[n++], rc, r ? r->decision : NULL, t0);
        if (r)
            charter__v1__read_source_response__free_unpacked(r, NULL);
    }
    {
        Charter__V1__RecordOutputRequest req = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
        req.context_id = ctx;
        req.input_ids = inputs;
        req.n_input_ids = 1;
        req.title = "Internal recommendation";
        req.content = "Pick vendor_c.";
        Charter__V1__RecordOutputResponse *r = NULL;
        t0 = now_ms();
        int rc = charter_record_output(c, &req, &r, &st);
        calls[n] = (outage_call){"Gate/RecordOutput", 0, 0, false, 0};
        outage_decision(&calls[n++], rc, r ? r->decision : NULL, t0);
        if (r)
            charter__v1__record_output_response__free_unpacked(r, NULL);
    }
    {
        Charter__V1__CheckInputRequest req = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
        req.context_id = ctx;
        req.artifact_ids = inputs;
        req.n_artifact_ids = 1;
        Charter__V1__CheckInputResponse *r = NULL;
        t0 = now_ms();
        int rc = charter_check_input(c, &req, &r, &st);
        calls[n] = (outage_call){"Gate/CheckInput", 0, 0, false, 0};
        outage_decision(&calls[n++], rc, r ? r->decision : NULL, t0);
        if (r)
            charter__v1__check_input_response__free_unpacked(r, NULL);
    }
    size_t n_decisions = n;
    {
        Charter__V1__OpenStepRequest req = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
        req.run_id = run_id;
        req.step = "analyze";
        Charter__V1__StepContext *r = NULL;
        t0 = now_ms();
        calls[n] = (outage_call){"Gate/OpenStep", charter_open_step(c, &req, &r, &st), 0, false,
                                 now_ms() - t0};
        n++;
        if (r)
            charter__v1__step_context__free_unpacked(r, NULL);
    }
    {
        Charter__V1__TraceArtifactRequest req = CHARTER__V1__TRACE_ARTIFACT_REQUEST__INIT;
        req.artifact_id = payload;
        Charter__V1__TraceArtifactResponse *r = NULL;
        t0 = now_ms();
        calls[n] = (outage_call){"Gate/TraceArtifact", charter_trace_artifact(c, &req, &r, &st), 0,
                                 false, now_ms() - t0};
        n++;
        if (r)
            charter__v1__trace_artifact_response__free_unpacked(r, NULL);
    }
    {
        Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
        req.mode = "scripted";
        Charter__V1__RunView *r = NULL;
        t0 = now_ms();
        calls[n] = (outage_call){"Runs/CreateRun", charter_create_run(c, &req, &r, &st), 0, false,
                                 now_ms() - t0};
        n++;
        if (r)
            charter__v1__run_view__free_unpacked(r, NULL);
    }
    {
        Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
        req.run_id = run_id;
        Charter__V1__RunView *r = NULL;
        t0 = now_ms();
        calls[n] = (outage_call){"Runs/GetRun", charter_get_run(c, &req, &r, &st), 0, false,
                                 now_ms() - t0};
        n++;
        if (r)
            charter__v1__run_view__free_unpacked(r, NULL);
    }
    {
        Charter__V1__ListRunsResponse *r = NULL;
        t0 = now_ms();
        calls[n] = (outage_call){"Runs/ListRuns", charter_list_runs(c, NULL, &r, &st), 0, false,
                                 now_ms() - t0};
        n++;
        if (r)
            charter__v1__list_runs_response__free_unpacked(r, NULL);
    }
    {
        Charter__V1__RecoverRunRequest req = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
        req.run_id = run_id;
        Charter__V1__RecoverRunResponse *r = NULL;
        t0 = now_ms();
        calls[n] = (outage_call){"Runs/RecoverRun", charter_recover_run(c, &req, &r, &st), 0, false,
                                 now_ms() - t0};
        n++;
        if (r)
            charter__v1__recover_run_response__free_unpacked(r, NULL);
    }
    {
        Charter__V1__RevokeGrantRequest req = CHARTER__V1__REVOKE_GRANT_REQUEST__INIT;
        req.grant_id = "g_reporter";
        Charter__V1__Grant *r = NULL;
        t0 = now_ms();
        calls[n] = (outage_call){"Grants/RevokeGrant", charter_revoke_grant(c, &req, &r, &st), 0,
                                 false, now_ms() - t0};
        n++;
        if (r)
            charter__v1__grant__free_unpacked(r, NULL);
    }
    {
        Charter__V1__RestoreGrantsResponse *r = NULL;
        t0 = now_ms();
        calls[n] = (outage_call){"Grants/RestoreGrants", charter_restore_grants(c, NULL, &r, &st),
                                 0, false, now_ms() - t0};
        n++;
        if (r)
            charter__v1__restore_grants_response__free_unpacked(r, NULL);
    }
    {
        Charter__V1__ShowChainRequest req = CHARTER__V1__SHOW_CHAIN_REQUEST__INIT;
        req.grant_id = "g_analyst";
        Charter__V1__GrantChain *r = NULL;
        t0 = now_ms();
        calls[n] = (outage_call){"Grants/ShowChain", charter_show_chain(c, &req, &r, &st), 0, false,
                                 now_ms() - t0};
        n++;
        if (r)
            charter__v1__grant_chain__free_unpacked(r, NULL);
    }
    /* The evidence and workflow services, through the generic call (methods as in the proto).
     * GetReceipt is left out: without an integrity key it is refused before any database
     * access. */
    {
        Charter__V1__ReplayDecisionRequest req = CHARTER__V1__REPLAY_DECISION_REQUEST__INIT;
        req.run_id = run_id;
        req.seq = 1;
        Charter__V1__AuditRunRequest areq = CHARTER__V1__AUDIT_RUN_REQUEST__INIT;
        areq.run_id = run_id;
        Charter__V1__ListWorkflowsRequest lreq = CHARTER__V1__LIST_WORKFLOWS_REQUEST__INIT;
        Charter__V1__GetWorkflowRequest wreq = CHARTER__V1__GET_WORKFLOW_REQUEST__INIT;
        wreq.workflow = "procurement";
        struct {
            const char *method;
            const ProtobufCMessage *req;
            const ProtobufCMessageDescriptor *resp;
        } generic[] = {
            {"/charter.v1.Evidence/ReplayDecision", &req.base,
             &charter__v1__replay_decision_response__descriptor},
            {"/charter.v1.Evidence/AuditRun", &areq.base,
             &charter__v1__audit_run_response__descriptor},
            {"/charter.v1.Workflows/ListWorkflows", &lreq.base,
             &charter__v1__list_workflows_response__descriptor},
            {"/charter.v1.Workflows/GetWorkflow", &wreq.base,
             &charter__v1__workflow_definition__descriptor},
        };
        for (size_t k = 0; k < sizeof generic / sizeof generic[0]; k++) {
            ProtobufCMessage *resp = NULL;
            t0 = now_ms();
            calls[n] = (outage_call){
                generic[k].method + 12,
                charter_call(c, generic[k].method, generic[k].req, generic[k].resp, &resp, &st), 0,
                false, now_ms() - t0};
            n++;
            if (resp)
                protobuf_c_message_free_unpacked(resp, NULL);
        }
    }
    printf("\n    with the database down:");
    for (size_t i = 0; i < n; i++)
        printf("%s %s %s", i ? "," : "", calls[i].method,
               i < n_decisions
                   ? (calls[i].outcome == CHARTER__V1__OUTCOME__UNKNOWN ? "UNKNOWN" : "not UNKNOWN")
                   : charter_status_name(calls[i].rc));
    printf("\n");
    for (size_t i = 0; i < n; i++) {
        bool ok = i < n_decisions
                      ? calls[i].rc == 0 && calls[i].outcome == CHARTER__V1__OUTCOME__UNKNOWN &&
                            calls[i].graph_error
                      : calls[i].rc == -CHARTER_UNAVAILABLE;
        if (!ok)
            fprintf(stderr, "with the database down, %s gave rc %d (%s), outcome %d\n",
                    calls[i].method, calls[i].rc, charter_status_name(calls[i].rc),
                    calls[i].outcome);
        /* Failing closed is an answer, never a hang: a hung call would have ended with the
         * client's DEADLINE_EXCEEDED after 10 s, not with these. */
        CU_ASSERT_TRUE(ok);
    }
    CU_ASSERT_EQUAL(kill(db_daemon.pid, 0), 0); /* still running */

    /* The database comes back on the same socket with everything it acknowledged; charterd
     * reconnects by itself. */
    CU_ASSERT_EQUAL_FATAL(harness_private_redis_start(&db_redis), 0);
    CU_ASSERT_EQUAL(harness_health_until(db_daemon.tcp_url, "up", 2000, &h), 0);
    if (h) {
        CU_ASSERT_STRING_EQUAL(h->database, "up");
        CU_ASSERT_STRING_EQUAL(h->status, "serving");
        charter__v1__health_response__free_unpacked(h, NULL);
    }
    CU_ASSERT_EQUAL(
        deliver_outcome(c, ctx, payload, "cfo", "deliver_internal", "db-after", codes, 256),
        CHARTER__V1__OUTCOME__ALLOW);
    /* Nothing was delivered while it was down, and the retry of that invocation now goes
     * through once. */
    json_t *during = stored_delivery(db_store, "db-during");
    CU_ASSERT_PTR_NULL(during);
    json_decref(during);
    json_t *before = stored_delivery(db_store, "db-before");
    CU_ASSERT_PTR_NOT_NULL(before);
    json_decref(before);
    json_t *view = NULL;
    CU_ASSERT_EQUAL_FATAL(q_get_run(db_store, run_id, "0", "1", NULL, NULL, NULL, &view),
                          STATUS_OK);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(view, "deliveries")), 2);
    json_decref(view);
    CU_ASSERT_EQUAL(kill(db_daemon.pid, 0), 0); /* the same process, never restarted */
    charter_client_close(c);
}

/* --- the query library is required: Redis loses it ---------------------------------------------
 */

/* The line charterd logs when it loaded the library into a Redis that had lost it. */
#define LIB_RELOADED "loaded it again, version " STORE_LIBRARY_VERSION

static char lib_graph[64];
static harness_private_redis lib_redis;
static store *lib_store;
static harness_charterd lib_daemon;

static int lib_setup(void)
{
    suite_clock_start();
    harness_graph_name(lib_graph, sizeof lib_graph, "faults_lib");
    memset(&lib_redis, 0, sizeof lib_redis);
    lib_redis.no_persistence = true; /* a restart comes back empty, functions and all */
    if (harness_private_redis_start(&lib_redis) != 0)
        return -1;
    if (store_open(lib_redis.url, lib_graph, 3000, &lib_store) != STATUS_OK ||
        store_load_library(lib_store, embedded_queries, embedded_queries_len) != STATUS_OK)
        return -1;
    harness_require_empty_graph(lib_store);
    /* One worker: each call below is served on the same connection, so which call meets the
     * missing library (or the dead server) is known. */
    const char *extra[] = {"--redis", lib_redis.url, "--timeout-ms", "2000", "--workers", "1"};
    harness_charterd_opts o = {.graph = lib_graph, .extra_args = extra, .n_extra = 6};
    return harness_charterd_start(&o, &lib_daemon);
}

static int lib_clean(void)
{
    int rc = harness_charterd_stop(&lib_daemon);
    store_close(lib_store);
    harness_private_redis_stop(&lib_redis);
    suite_clock_report();
    return rc == 0 ? 0 : -1;
}

/* CUnit runs no cleanup after a failed init: stop whatever was started. */
static int lib_init(void)
{
    if (lib_setup() == 0)
        return 0;
    lib_clean();
    return -1;
}

/* One command on the suite's own Redis; its reply (free with freeReplyObject), or NULL. */
static redisReply *lib_redis_command(int argc, const char **argv)
{
    struct timeval tv = {5, 0};
    redisContext *rc = redisConnectUnixWithTimeout(lib_redis.sock, tv);
    redisReply *r = NULL;
    if (rc != NULL && rc->err == 0 && redisSetTimeout(rc, tv) == REDIS_OK)
        r = redisCommandArgv(rc, argc, argv, NULL);
    if (r == NULL)
        fprintf(stderr, "%s on the suite's Redis: %s\n", argv[0], rc ? rc->errstr : "no memory");
    redisFree(rc);
    return r;
}

/* FUNCTION FLUSH SYNC on the suite's Redis: every library gone, keys kept. Returns 0 or -1. */
static int lib_redis_flush_functions(void)
{
    const char *argv[3] = {"FUNCTION", "FLUSH", "SYNC"};
    redisReply *r = lib_redis_command(3, argv);
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS ? 0 : -1;
    freeReplyObject(r);
    return ok;
}

/* The version the suite's Redis's library "charter" reports (FCALL charter_version) into v
 * (n bytes), "" when FUNCTION LIST shows no such library. Returns 0 or -1. */
static int lib_loaded_version(char *v, size_t n)
{
    v[0] = '\0';
    const char *list[4] = {"FUNCTION", "LIST", "LIBRARYNAME", "charter"};
    redisReply *r = lib_redis_command(4, list);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(r);
        return -1;
    }
    bool loaded = r->elements > 0;
    freeReplyObject(r);
    if (!loaded)
        return 0;
    const char *call[3] = {"FCALL", "charter_version", "0"};
    r = lib_redis_command(3, call);
    json_t *j = r != NULL && r->type == REDIS_REPLY_STRING ? json_loads(r->str, 0, NULL) : NULL;
    const char *got = json_string_value(json_object_get(j, "version"));
    if (got != NULL)
        snprintf(v, n, "%s", got);
    json_decref(j);
    freeReplyObject(r);
    return got != NULL ? 0 : -1;
}

/* Health/Check served on charterd's worker with a database round trip of its own (metadata
 * health-source: database, as /readyz sends), not from the status the health monitor keeps.
 * Returns 0 with *out (free with charter__v1__health_response__free_unpacked), or -1. */
static int lib_health_from_database(Charter__V1__HealthResponse **out)
{
    *out = NULL;
    Charter__V1__RpcRequest env = CHARTER__V1__RPC_REQUEST__INIT;
    Charter__V1__RpcRequest__MetadataEntry source = CHARTER__V1__RPC_REQUEST__METADATA_ENTRY__INIT;
    Charter__V1__RpcRequest__MetadataEntry *meta[1] = {&source};
    source.key = "health-source";
    source.value = "database";
    env.metadata = meta;
    env.n_metadata = 1;
    env.method = HARNESS_HEALTH;
    env.timeout_ms = 2000;
    size_t n = charter__v1__rpc_request__get_packed_size(&env);
    uint8_t *buf = malloc(n);
    if (buf == NULL)
        return -1;
    charter__v1__rpc_request__pack(&env, buf);
    harness_response r;
    int rv = harness_rpc_raw(lib_daemon.tcp_url, buf, n, 5000, &r);
    free(buf);
    if (rv != 0)
        return -1;
    if (r.code == 0)
        *out = charter__v1__health_response__unpack(NULL, r.payload_len, r.payload);
    harness_response_free(&r);
    return *out != NULL ? 0 : -1;
}

/* The lines of charterd's log holding needle. */
static int lib_log_lines(const char *needle)
{
    char *text = harness_slurp(lib_daemon.log_path);
    int n = 0;
    for (const char *p = text; p != NULL && (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    free(text);
    return n;
}

/* lib_log_lines, read again until it is want or within_ms have passed: a load done by
 * charterd's health monitor is logged by that thread, maybe just after a worker has answered a
 * call from the library it found loaded. */
static int lib_log_lines_until(const char *needle, int want, int within_ms)
{
    long long until = now_ms() + within_ms;
    int n;
    while ((n = lib_log_lines(needle)) != want && now_ms() < until)
        harness_sleep_ms(20);
    return n;
}

static void test_a_flushed_query_library_is_loaded_again_and_the_call_answered(void)
{
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(
        harness_client_open(lib_daemon.tcp_url, HARNESS_OPERATOR_TOKEN, 10000, &c), 0);
    char before[129], after[129], v[32];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(c, "external", NULL, before, NULL, NULL), 0);
    CU_ASSERT_EQUAL(lib_log_lines(LIB_RELOADED), 0);

    CU_ASSERT_EQUAL_FATAL(lib_redis_flush_functions(), 0);
    CU_ASSERT_EQUAL(lib_loaded_version(v, sizeof v), 0);
    CU_ASSERT_STRING_EQUAL(v, ""); /* gone; the graph's keys are still there */

    /* The call that meets the missing library is answered: the function never ran, so it is
     * sent again once the library is back. */
    charter_status st;
    int rc = harness_create_run(c, "external", NULL, after, NULL, &st);
    if (rc != 0)
        fprintf(stderr, "CreateRun after FUNCTION FLUSH: %s: %s\n", charter_status_name(st.code),
                st.message);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(lib_loaded_version(v, sizeof v), 0);
    CU_ASSERT_STRING_EQUAL(v, STORE_LIBRARY_VERSION);
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = before;
    Charter__V1__RunView *view = NULL;
    CU_ASSERT_EQUAL(charter_get_run(c, &req, &view, &st), 0); /* the run from before is kept */
    if (view)
        charter__v1__run_view__free_unpacked(view, NULL);

    Charter__V1__HealthResponse *h = NULL;
    CU_ASSERT_EQUAL_FATAL(lib_health_from_database(&h), 0);
    CU_ASSERT_STRING_EQUAL(h->status, "serving");
    CU_ASSERT_STRING_EQUAL(h->library_version, STORE_LIBRARY_VERSION);
    charter__v1__health_response__free_unpacked(h, NULL);
    /* One load, one line, however many of charterd's threads found the library missing: a
     * load that is not the first is refused by Redis (no REPLACE). */
    CU_ASSERT_EQUAL(lib_log_lines_until(LIB_RELOADED, 1, 2000), 1);
    charter_client_close(c);
}

static void test_a_query_library_of_another_version_is_never_replaced(void)
{
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(
        harness_client_open(lib_daemon.tcp_url, HARNESS_OPERATOR_TOKEN, 10000, &c), 0);
    int reloads = lib_log_lines(LIB_RELOADED);
    /* What another charterd, built with a newer library, would have loaded after the flush. */
    CU_ASSERT_EQUAL_FATAL(lib_redis_flush_functions(), 0);
    const char *newer = "#!lua name=charter\n"
                        "redis.register_function('charter_version', function() return "
                        "cjson.encode({version='999'}) end)\n";
    const char *load[3] = {"FUNCTION", "LOAD", newer};
    redisReply *r = lib_redis_command(3, load);
    CU_ASSERT_FATAL(r != NULL && r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);

    /* Its missing function wrote nothing: UNAVAILABLE, naming both versions; the library
     * stays. */
    charter_status st;
    char run[129];
    int rc = harness_create_run(c, "external", NULL, run, NULL, &st);
    CU_ASSERT_EQUAL(rc, -CHARTER_UNAVAILABLE);
    CU_ASSERT_EQUAL(st.code, CHARTER_UNAVAILABLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "version 999"));
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "needs " STORE_LIBRARY_VERSION));
    char v[32];
    CU_ASSERT_EQUAL(lib_loaded_version(v, sizeof v), 0);
    CU_ASSERT_STRING_EQUAL(v, "999");
    CU_ASSERT_EQUAL(lib_log_lines("is version 999, this charterd needs " STORE_LIBRARY_VERSION
                                  ": it does not replace it"),
                    1);
    /* Asked again: the same answer, and still that one line (each failed call has its own). */
    CU_ASSERT_EQUAL(harness_create_run(c, "external", NULL, run, NULL, &st), -CHARTER_UNAVAILABLE);
    CU_ASSERT_EQUAL(lib_log_lines("it does not replace it"), 1);
    CU_ASSERT_EQUAL(lib_loaded_version(v, sizeof v), 0);
    CU_ASSERT_STRING_EQUAL(v, "999");
    /* Health: the database answers, the library is not the one this charterd needs. */
    Charter__V1__HealthResponse *h = NULL;
    CU_ASSERT_EQUAL_FATAL(lib_health_from_database(&h), 0);
    CU_ASSERT_STRING_EQUAL(h->database, "up");
    CU_ASSERT_STRING_EQUAL(h->status, "database_down");
    CU_ASSERT_STRING_EQUAL(h->library_version, "");
    charter__v1__health_response__free_unpacked(h, NULL);
    CU_ASSERT_EQUAL(lib_log_lines(LIB_RELOADED), reloads);

    /* The library of this build put back (as its start would): served again. */
    CU_ASSERT_EQUAL_FATAL(store_load_library(lib_store, embedded_queries, embedded_queries_len),
                          STATUS_OK);
    CU_ASSERT_EQUAL(harness_create_run(c, "external", NULL, run, NULL, NULL), 0);
    charter_client_close(c);
}

static void test_redis_restarted_empty_is_served_again_without_restarting_charterd(void)
{
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(
        harness_client_open(lib_daemon.tcp_url, HARNESS_OPERATOR_TOKEN, 10000, &c), 0);
    pid_t pid = lib_daemon.pid;
    int reloads = lib_log_lines(LIB_RELOADED);
    harness_private_redis_kill(&lib_redis);
    Charter__V1__HealthResponse *h = NULL;
    CU_ASSERT_EQUAL_FATAL(lib_health_from_database(&h), 0);
    CU_ASSERT_STRING_EQUAL(h->database, "down"); /* the worker's connection is gone with it */
    charter__v1__health_response__free_unpacked(h, NULL);

    /* Started again without persistence: no data, no functions. */
    CU_ASSERT_EQUAL_FATAL(harness_private_redis_start(&lib_redis), 0);
    CU_ASSERT_EQUAL_FATAL(lib_health_from_database(&h), 0);
    CU_ASSERT_STRING_EQUAL(h->database, "up");
    CU_ASSERT_STRING_EQUAL(h->status, "serving");
    CU_ASSERT_STRING_EQUAL(h->library_version, STORE_LIBRARY_VERSION);
    charter__v1__health_response__free_unpacked(h, NULL);
    char v[32];
    CU_ASSERT_EQUAL(lib_loaded_version(v, sizeof v), 0);
    CU_ASSERT_STRING_EQUAL(v, STORE_LIBRARY_VERSION);
    Charter__V1__ListRunsResponse *runs = NULL;
    charter_status st;
    int rc = charter_list_runs(c, NULL, &runs, &st);
    if (rc != 0)
        fprintf(stderr, "ListRuns after the restart: %s: %s\n", charter_status_name(st.code),
                st.message);
    CU_ASSERT_EQUAL(rc, 0);
    if (runs) {
        CU_ASSERT_EQUAL(runs->n_runs, 0); /* the runs went with the data */
        charter__v1__list_runs_response__free_unpacked(runs, NULL);
    }
    CU_ASSERT_EQUAL(lib_log_lines_until(LIB_RELOADED, reloads + 1, 2000), reloads + 1);
    CU_ASSERT_EQUAL(kill(pid, 0), 0); /* the same process, never restarted */
    CU_ASSERT_EQUAL(lib_daemon.pid, pid);
    charter_client_close(c);
}

/* --- the graph is required: relationships removed ------------------------------------------- */

static char edge_graph[64];
static store *edge_store;
static harness_charterd edge_daemon;

static int edges_setup(void)
{
    suite_clock_start();
    harness_graph_name(edge_graph, sizeof edge_graph, "faults_edges");
    edge_store = harness_store_open(edge_graph);
    harness_charterd_opts o = {.graph = edge_graph};
    return harness_charterd_start(&o, &edge_daemon);
}

static int edges_clean(void)
{
    int rc = harness_charterd_stop(&edge_daemon);
    store_close(edge_store);
    harness_graph_drop(edge_graph);
    suite_clock_report();
    return rc == 0 ? 0 : -1;
}

/* CUnit runs no cleanup after a failed init: stop whatever was started. */
static int edges_init(void)
{
    if (edges_setup() == 0)
        return 0;
    edges_clean();
    return -1;
}

/* Deletes the edges named by suffixes, then delivers payload afresh from ctx: the decision is
 * DENY or UNKNOWN, carries the expected code, and nothing is delivered. */
static void assert_fresh_delivery_refused(charter_client *c, const char *what,
                                          const char *const *suffixes, size_t n_suffixes,
                                          const char *ctx, const char *payload, const char *inv,
                                          const char *expected_code)
{
    long hashes = harness_graph_count_type(edge_graph, "hash");
    long deliveries = stat_of(edge_store, "deliveries");
    long deleted = harness_graph_delete_edges(edge_graph, suffixes, n_suffixes);
    CU_ASSERT_TRUE(deleted > 0);
    CU_ASSERT_EQUAL(harness_graph_count_type(edge_graph, "hash"), hashes); /* nodes kept */
    char codes[256];
    int outcome =
        deliver_outcome(c, ctx, payload, "public", "deliver_public", inv, codes, sizeof codes);
    printf("\n    %s (%ld edge keys deleted): outcome %d, codes %s", what, deleted, outcome, codes);
    CU_ASSERT_TRUE(outcome == CHARTER__V1__OUTCOME__DENY ||
                   outcome == CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_PTR_NOT_NULL(strstr(codes, expected_code));
    json_t *d = stored_delivery(edge_store, inv);
    CU_ASSERT_PTR_NULL(d);
    json_decref(d);
    CU_ASSERT_EQUAL(stat_of(edge_store, "deliveries"), deliveries);
}

static void test_deleted_relationships_turn_an_allowed_delivery_into_a_refusal(void)
{
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(
        harness_client_open(edge_daemon.tcp_url, HARNESS_OPERATOR_TOKEN, 10000, &c), 0);
    char run_id[129], research[129], vendors[3][129], summary[129];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(c, "external", NULL, run_id, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(c, run_id, "research", research), 0);
    const char *names[3] = {"vendor_a", "vendor_b", "vendor_c"};
    char *inputs[3];
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL_FATAL(harness_read_source(c, research, names[i], vendors[i]), 0);
        inputs[i] = vendors[i];
    }
    CU_ASSERT_EQUAL_FATAL(record_output(c, research, inputs, 3, "Research summary",
                                        "Brightline is cheapest and fastest.", summary),
                          0);
    /* Five report contexts, each with its own public comparison, the first four delivered
     * once (a worker of charterd keeps what it decided each from), the fifth never sent. */
    char ctx[5][129], payload[5][129];
    char *from_summary[1] = {summary};
    for (int i = 0; i < 5; i++) {
        char content[96], inv[64], codes[256];
        snprintf(content, sizeof content, "Public vendor comparison %d: vendor_b.", i);
        snprintf(inv, sizeof inv, "edges-base-%d", i);
        CU_ASSERT_EQUAL_FATAL(harness_open_step(c, run_id, "report", ctx[i]), 0);
        CU_ASSERT_EQUAL_FATAL(record_output(c, ctx[i], from_summary, 1, "Public vendor comparison",
                                            content, payload[i]),
                              0);
        if (i == 4)
            break;
        CU_ASSERT_EQUAL_FATAL(deliver_outcome(c, ctx[i], payload[i], "public", "deliver_public",
                                              inv, codes, sizeof codes),
                              CHARTER__V1__OUTCOME__ALLOW);
    }

    /* Ownership: the context's OWNED_BY edge. */
    char owned[160];
    snprintf(owned, sizeof owned, ":context:%s:owned_by", ctx[0]);
    const char *ownership[1] = {owned};
    assert_fresh_delivery_refused(c, "OWNED_BY of the context", ownership, 1, ctx[0], payload[0],
                                  "edges-owner", "IDENTITY_MISMATCH");
    /* Lineage: the payload's DERIVED_FROM edges. */
    char derived[160];
    snprintf(derived, sizeof derived, ":artifact:%s:derived_from", payload[1]);
    const char *lineage[1] = {derived};
    assert_fresh_delivery_refused(c, "DERIVED_FROM of the payload", lineage, 1, ctx[1], payload[1],
                                  "edges-lineage", "PROVENANCE_INCOMPLETE");
    /* Authority: every delegation, grantee and issuer edge of the graph. A grant's edges are
     * structure a worker keeps with a send it allowed (its commit reads the grant, not its
     * edges; charter audit compares them with the workflow): a send read afresh is refused. */
    const char *authority[3] = {":delegated_from", ":granted_to", ":issued_by"};
    assert_fresh_delivery_refused(c, "grant edges, a send read afresh", authority, 3, ctx[4],
                                  payload[4], "edges-authority", "GRANT_");
    /* Everything: every set and sorted set of the graph, every node hash kept. */
    assert_fresh_delivery_refused(c, "every edge key", NULL, 0, ctx[3], payload[3], "edges-all",
                                  "_");
    printf("\n");
    charter_client_close(c);
}

/* The problem charter audit names for run_id ("" when intact) into out. */
static void audit_problem(charter_client *c, const char *run_id, char *out, size_t n)
{
    Charter__V1__AuditRunRequest req = CHARTER__V1__AUDIT_RUN_REQUEST__INIT;
    req.run_id = (char *)run_id;
    Charter__V1__AuditRunResponse *r = NULL;
    charter_status st;
    snprintf(out, n, "AuditRun failed");
    if (charter_audit_run(c, &req, &r, &st) != 0) {
        snprintf(out, n, "AuditRun: %s: %s", charter_status_name(st.code), st.message);
        return;
    }
    snprintf(out, n, "%s", r->intact ? "" : r->problem);
    charter__v1__audit_run_response__free_unpacked(r, NULL);
}

/* A delivery record deleted behind the API: the commit looks for the record of its invocation,
 * so a retry takes effect a second time; audit names the removed record, then the invocation
 * whose commit two events record. */
static void test_a_delivery_record_removed_is_named_by_audit(void)
{
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(
        harness_client_open(edge_daemon.tcp_url, HARNESS_OPERATOR_TOKEN, 10000, &c), 0);
    char run_id[129], research[129], vendor[129], report[129], payload[129], codes[256],
        problem[512];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(c, "external", NULL, run_id, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(c, run_id, "research", research), 0);
    CU_ASSERT_EQUAL_FATAL(harness_read_source(c, research, "vendor_a", vendor), 0);
    char *inputs[1] = {vendor}, summary[129];
    CU_ASSERT_EQUAL_FATAL(record_output(c, research, inputs, 1, "Research summary",
                                        "Vendor A ships in two weeks.", summary),
                          0);
    inputs[0] = summary;
    CU_ASSERT_EQUAL_FATAL(harness_open_step(c, run_id, "report", report), 0);
    CU_ASSERT_EQUAL_FATAL(record_output(c, report, inputs, 1, "Public vendor comparison",
                                        "Vendor A ships in two weeks.", payload),
                          0);
    int first = deliver_outcome(c, report, payload, "public", "deliver_public", "record-gone",
                                codes, sizeof codes);
    printf("\n    first send: outcome %d, codes %s", first, codes);
    CU_ASSERT_EQUAL_FATAL(first, CHARTER__V1__OUTCOME__ALLOW);
    audit_problem(c, run_id, problem, sizeof problem);
    CU_ASSERT_STRING_EQUAL(problem, "");

    const char *inv[1] = {"record-gone"};
    long long deleted = 0;
    CU_ASSERT_EQUAL(harness_graph_eval(edge_graph,
                                       "return redis.call('DEL', KEYS[1] .. ':delivery:' .. "
                                       "ARGV[1])",
                                       inv, 1, &deleted),
                    0);
    CU_ASSERT_EQUAL(deleted, 1);
    audit_problem(c, run_id, problem, sizeof problem);
    printf("\n    record deleted: %s", problem);
    CU_ASSERT_STRING_EQUAL(problem, "the delivery record of invocation record-gone was removed: "
                                    "the run lists the invocation, but no record of it is stored");

    CU_ASSERT_EQUAL(deliver_outcome(c, report, payload, "public", "deliver_public", "record-gone",
                                    codes, sizeof codes),
                    CHARTER__V1__OUTCOME__ALLOW);
    audit_problem(c, run_id, problem, sizeof problem);
    printf("\n    delivered again: %s\n", problem);
    CU_ASSERT_PTR_NOT_NULL(strstr(problem, "invocation record-gone took effect twice: events "));
    charter_client_close(c);
}

/* --- crash of charterd ----------------------------------------------------------------------- */

static char crash_graph[64];
static store *crash_store;

static int crash_setup(void)
{
    suite_clock_start();
    if (suite_redis_start() != 0)
        return -1;
    harness_graph_name(crash_graph, sizeof crash_graph, "faults_crash");
    crash_store = harness_store_open(crash_graph);
    return 0;
}

static int crash_clean(void)
{
    harness_redis_unpause();
    store_close(crash_store);
    harness_graph_drop(crash_graph);
    suite_redis_stop();
    suite_clock_report();
    return 0;
}

/* CUnit runs no cleanup after a failed init: stop whatever was started. */
static int crash_init(void)
{
    if (crash_setup() == 0)
        return 0;
    crash_clean();
    return -1;
}

typedef struct {
    const char *url;
    int rc;
    long long delay_ms;
} run_call;

static void *create_run_main(void *arg)
{
    run_call *rc = arg;
    harness_sleep_ms((long)rc->delay_ms);
    charter_client *c = NULL;
    if (harness_client_open(rc->url, HARNESS_OPERATOR_TOKEN, 10000, &c) != 0) {
        rc->rc = -1000;
        return NULL;
    }
    /* Quietly: the call is expected to lose its connection when charterd is killed. */
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "scripted";
    Charter__V1__RunView *view = NULL;
    charter_status st;
    rc->rc = charter_create_run(c, &req, &view, &st);
    if (view)
        charter__v1__run_view__free_unpacked(view, NULL);
    charter_client_close(c);
    return NULL;
}

static void test_kill_9_mid_run_leaves_the_run_interrupted_with_its_history(void)
{
    harness_charterd d;
    harness_charterd_opts o = {.graph = crash_graph};
    char run_id[129] = "";
    int caught = -1;
    run_call call = {NULL, 0, 150};
    int attempts = 0;
    for (int attempt = 0; attempt < 20 && caught != 0; attempt++) {
        attempts++;
        CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
        call.url = d.tcp_url;
        pthread_t th;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, create_run_main, &call), 0);
        /* Once the run has delivered to the CFO and is still running, hold the database; then
         * kill charterd in the middle of the run. */
        caught = harness_pause_on_run(crash_graph, "running", 1, 1000, 5000, run_id);
        if (caught == 0)
            harness_charterd_kill(&d);
        harness_redis_unpause();
        pthread_join(th, NULL);
        if (caught != 0) {
            CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
            continue;
        }
        forget_daemon(&d);
        /* The run may still have ended between the look and the pause: then try again. */
        json_t *j = NULL;
        CU_ASSERT_EQUAL_FATAL(q_get_run(crash_store, run_id, "0", "1", NULL, NULL, NULL, &j),
                              STATUS_OK);
        const char *status =
            json_string_value(json_object_get(json_object_get(j, "run"), "status"));
        if (!status || strcmp(status, "running") != 0)
            caught = 1;
        else
            CU_ASSERT_EQUAL(call.rc, -CHARTER_UNAVAILABLE); /* the caller lost its connection */
        json_decref(j);
    }
    CU_ASSERT_EQUAL_FATAL(caught, 0);

    json_t *before = NULL;
    CU_ASSERT_EQUAL_FATAL(q_get_run(crash_store, run_id, "0", "100000", NULL, NULL, NULL, &before),
                          STATUS_OK);
    CU_ASSERT_STRING_EQUAL(text_of(json_object_get(json_object_get(before, "run"), "status")),
                           "running");
    json_t *ev_before = json_object_get(before, "events");
    json_t *del_before = json_object_get(before, "deliveries");
    size_t n_before = json_array_size(ev_before);
    size_t d_before = json_is_array(del_before) ? json_array_size(del_before) : 0;
    CU_ASSERT_TRUE(d_before >= 1);

    /* Restart: the run is interrupted (never running), its events and deliveries reload. */
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d.tcp_url, HARNESS_OPERATOR_TOKEN, 10000, &c), 0);
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = run_id;
    Charter__V1__RunView *view = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(c, &req, &view, &st), 0);
    CU_ASSERT_STRING_EQUAL(view->run->status, "interrupted");
    CU_ASSERT_EQUAL(view->n_events, n_before + 1);
    for (size_t i = 0; i < view->n_events; i++) {
        CU_ASSERT_EQUAL(view->events[i]->seq, i + 1);
        if (i < n_before) {
            json_t *e = json_array_get(ev_before, i);
            CU_ASSERT_STRING_EQUAL(view->events[i]->kind, text_of(json_object_get(e, "kind")));
        }
    }
    if (view->n_events > 0) {
        const Charter__V1__Event *last = view->events[view->n_events - 1];
        CU_ASSERT_STRING_EQUAL(last->kind, "status_changed");
        CU_ASSERT_PTR_NOT_NULL(strstr(last->detail, "running -> interrupted"));
    }
    CU_ASSERT_EQUAL(view->n_deliveries, d_before);
    for (size_t i = 0; i < view->n_deliveries && i < d_before; i++) {
        json_t *e = json_array_get(del_before, i);
        CU_ASSERT_STRING_EQUAL(view->deliveries[i]->invocation_id,
                               text_of(json_object_get(e, "invocation_id")));
        const char *at = json_string_value(json_object_get(e, "committed_at"));
        CU_ASSERT_DOUBLE_EQUAL(view->deliveries[i]->committed_at, at ? strtod(at, NULL) : -1, 1e-7);
    }
    printf("\n    killed on attempt %d after %zu events and %zu deliveries\n", attempts, n_before,
           d_before);
    charter__v1__run_view__free_unpacked(view, NULL);
    json_decref(before);

    /* An interrupted run can be recovered: it ends, it does not stay in between. */
    Charter__V1__RecoverRunRequest rr = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    rr.run_id = run_id;
    Charter__V1__RecoverRunResponse *rec = NULL;
    CU_ASSERT_EQUAL(charter_recover_run(c, &rr, &rec, &st), 0);
    if (rec) {
        const char *s = rec->run->status;
        CU_ASSERT_TRUE(strcmp(s, "completed") == 0 || strcmp(s, "blocked") == 0 ||
                       strcmp(s, "error") == 0);
        charter__v1__recover_run_response__free_unpacked(rec, NULL);
    }
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
}

static bool process_gone(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

static void test_kill_9_of_charterd_and_its_database_loses_nothing_acknowledged(void)
{
    char top[] = "/tmp/charter-crash-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(top));
    char data[160];
    snprintf(data, sizeof data, "%s/data", top);
    char g[64];
    harness_graph_name(g, sizeof g, "faults_aof");
    harness_charterd d;
    harness_charterd_opts o = {.graph = g, .embedded = true, .data_dir = data};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d.tcp_url, HARNESS_OPERATOR_TOKEN, 20000, &c), 0);
    char run_id[129], status[32];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(c, "scripted", NULL, run_id, status, NULL), 0);
    CU_ASSERT_STRING_EQUAL(status, "blocked");
    Charter__V1__RecoverRunRequest rr = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    rr.run_id = run_id;
    Charter__V1__RecoverRunResponse *rec = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_recover_run(c, &rr, &rec, &st), 0);
    CU_ASSERT_STRING_EQUAL(rec->run->status, "completed");
    charter__v1__recover_run_response__free_unpacked(rec, NULL);
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = run_id;
    Charter__V1__RunView *before = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(c, &req, &before, &st), 0);
    CU_ASSERT_EQUAL(before->n_deliveries, 2);
    charter_client_close(c);

    /* Both processes die at once, without a chance to flush anything. */
    pid_t redis = harness_child_pid(d.pid, "redis-server");
    CU_ASSERT_TRUE_FATAL(redis > 0);
    CU_ASSERT_EQUAL(kill(redis, SIGKILL), 0);
    harness_charterd_kill(&d);
    forget_daemon(&d);
    for (int i = 0; i < 200 && !process_gone(redis); i++)
        harness_sleep_ms(25);
    CU_ASSERT_TRUE_FATAL(process_gone(redis));

    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d.tcp_url, HARNESS_OPERATOR_TOKEN, 20000, &c), 0);
    Charter__V1__RunView *after = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(c, &req, &after, &st), 0);
    CU_ASSERT_STRING_EQUAL(after->run->status, "completed");
    CU_ASSERT_EQUAL(after->n_events, before->n_events);
    CU_ASSERT_EQUAL(after->n_artifacts, before->n_artifacts);
    CU_ASSERT_EQUAL(after->n_deliveries, before->n_deliveries);
    for (size_t i = 0; i < after->n_events && i < before->n_events; i++) {
        CU_ASSERT_EQUAL(after->events[i]->seq, before->events[i]->seq);
        CU_ASSERT_STRING_EQUAL(after->events[i]->kind, before->events[i]->kind);
    }
    for (size_t i = 0; i < after->n_deliveries && i < before->n_deliveries; i++) {
        CU_ASSERT_STRING_EQUAL(after->deliveries[i]->invocation_id,
                               before->deliveries[i]->invocation_id);
        CU_ASSERT_STRING_EQUAL(after->deliveries[i]->fingerprint,
                               before->deliveries[i]->fingerprint);
        CU_ASSERT_DOUBLE_EQUAL(after->deliveries[i]->committed_at,
                               before->deliveries[i]->committed_at, 1e-7);
    }
    charter__v1__run_view__free_unpacked(after, NULL);
    charter__v1__run_view__free_unpacked(before, NULL);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    remove_tree(top);
}

/* --- bounded work ---------------------------------------------------------------------------- */

#define MAX_IDS 1000                      /* charterd's ids per call */
#define MAX_CONTENT ((size_t)1024 * 1024) /* charterd's bytes of one artifact's content */
#define MAX_ANCESTRY 10000                /* charterd's artifacts per ancestry query */

static char lim_graph[64];
static store *lim_store;
static harness_charterd lim_daemon, lim_narrow;
static charter_client *lim_client;
static char lim_run[129], lim_ctx[129], lim_src[129];

static int limits_setup(void)
{
    suite_clock_start();
    if (suite_redis_start() != 0)
        return -1;
    harness_graph_name(lim_graph, sizeof lim_graph, "faults_limits");
    lim_store = harness_store_open(lim_graph);
    harness_charterd_opts o = {.graph = lim_graph};
    /* A second charterd on the same graph with one worker and room for two waiting calls. */
    const char *extra[] = {"--workers", "1", "--queue", "2"};
    harness_charterd_opts narrow = {.graph = lim_graph, .extra_args = extra, .n_extra = 4};
    if (harness_charterd_start(&o, &lim_daemon) != 0 ||
        harness_charterd_start(&narrow, &lim_narrow) != 0 ||
        harness_client_open(lim_daemon.tcp_url, HARNESS_OPERATOR_TOKEN, 60000, &lim_client) != 0)
        return -1;
    if (harness_create_run(lim_client, "external", NULL, lim_run, NULL, NULL) != 0 ||
        harness_open_step(lim_client, lim_run, "analyze", lim_ctx) != 0 ||
        harness_read_source(lim_client, lim_ctx, "budget", lim_src) != 0)
        return -1;
    return 0;
}

static int limits_clean(void)
{
    harness_redis_unpause();
    charter_client_close(lim_client);
    int a = harness_charterd_stop(&lim_daemon);
    int b = harness_charterd_stop(&lim_narrow);
    store_close(lim_store);
    harness_graph_drop_large(lim_graph);
    suite_redis_stop();
    suite_clock_report();
    return a == 0 && b == 0 ? 0 : -1;
}

/* CUnit runs no cleanup after a failed init: stop whatever was started. */
static int limits_init(void)
{
    if (limits_setup() == 0)
        return 0;
    limits_clean();
    return -1;
}

static void test_more_ids_than_allowed_per_call_is_invalid_argument(void)
{
    char **ids = calloc(MAX_IDS + 1, sizeof *ids);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    for (size_t i = 0; i <= MAX_IDS; i++)
        ids[i] = lim_src;
    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(lim_graph, before), 0);
    charter_status st;

    Charter__V1__CheckInputRequest ci = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    ci.context_id = lim_ctx;
    ci.artifact_ids = ids;
    ci.n_artifact_ids = MAX_IDS + 1;
    Charter__V1__CheckInputResponse *cr = NULL;
    CU_ASSERT_EQUAL(charter_check_input(lim_client, &ci, &cr, &st), -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "more than 1000"));
    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    ro.context_id = lim_ctx;
    ro.input_ids = ids;
    ro.n_input_ids = MAX_IDS + 1;
    ro.title = "Too many inputs";
    ro.content = "x";
    Charter__V1__RecordOutputResponse *orr = NULL;
    CU_ASSERT_EQUAL(charter_record_output(lim_client, &ro, &orr, &st), -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "more than 1000"));
    CU_ASSERT_EQUAL(harness_graph_digest(lim_graph, after), 0);
    CU_ASSERT_STRING_EQUAL(after, before); /* refused before anything was written */

    /* Exactly the limit is served. */
    ci.n_artifact_ids = MAX_IDS;
    long long t0 = now_ms();
    CU_ASSERT_EQUAL(charter_check_input(lim_client, &ci, &cr, &st), 0);
    if (cr) {
        CU_ASSERT_EQUAL(cr->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
        CU_ASSERT_TRUE(cr->event_seq > 0);
        charter__v1__check_input_response__free_unpacked(cr, NULL);
    }
    printf("\n    CheckInput of %d ids: %lld ms\n", MAX_IDS, now_ms() - t0);
    free(ids);
}

static void test_content_over_the_limit_is_invalid_argument(void)
{
    char *big = malloc(MAX_CONTENT + 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    memset(big, 'a', MAX_CONTENT + 1);
    big[MAX_CONTENT + 1] = '\0';
    char *inputs[1] = {lim_src};
    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(lim_graph, before), 0);
    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    ro.context_id = lim_ctx;
    ro.input_ids = inputs;
    ro.n_input_ids = 1;
    ro.title = "Large output";
    ro.content = big;
    Charter__V1__RecordOutputResponse *r = NULL;
    charter_status st;
    CU_ASSERT_EQUAL(charter_record_output(lim_client, &ro, &r, &st), -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "content"));
    CU_ASSERT_EQUAL(harness_graph_digest(lim_graph, after), 0);
    CU_ASSERT_STRING_EQUAL(after, before);
    big[MAX_CONTENT] = '\0'; /* exactly the limit */
    CU_ASSERT_EQUAL(charter_record_output(lim_client, &ro, &r, &st), 0);
    if (r) {
        CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
        charter__v1__record_output_response__free_unpacked(r, NULL);
    }
    free(big);
}

static void test_small_message_claiming_huge_counts_is_resource_exhausted(void)
{
    /* A CheckInputRequest of 200000 empty artifact ids: 400 kB on the wire, far more once
     * decoded (a pointer and an allocation per id). */
    size_t n = 200000;
    uint8_t *payload = malloc(2 * n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(payload);
    for (size_t i = 0; i < n; i++) {
        payload[2 * i] = (2 << 3) | 2; /* field 2 (artifact_ids), length-delimited */
        payload[2 * i + 1] = 0;        /* length 0 */
    }
    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(lim_graph, before), 0);
    harness_response r;
    int rv = harness_rpc(lim_daemon.tcp_url, "/charter.v1.Gate/CheckInput", HARNESS_OPERATOR_TOKEN,
                         payload, 2 * n, 10000, &r);
    CU_ASSERT_EQUAL_FATAL(rv, 0);
    CU_ASSERT_EQUAL(r.code, CHARTER_RESOURCE_EXHAUSTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "decoding"));
    harness_response_free(&r);
    free(payload);
    CU_ASSERT_EQUAL(harness_health(lim_daemon.tcp_url, 3000, NULL), 0);
    CU_ASSERT_EQUAL(harness_graph_digest(lim_graph, after), 0);
    CU_ASSERT_STRING_EQUAL(after, before);
}

/* Writes a lineage of depth derived artifacts <tag>1 .. <tag><depth> over the artifact from,
 * each derived from the one before, produced by the analyze context, labelled as their budget
 * ancestry requires, with the content "derivation" and its hash. One script follows the key
 * schema of queries/README.md directly, so a lineage of ten thousand takes a fraction of a
 * second instead of the quadratic time of gating every step through RecordOutput. */
static const char LINEAGE_SCRIPT[] =
    "local P = KEYS[1]\n"
    "local run, ctx, from, depth, tag, hash = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]),\n"
    "    ARGV[5], ARGV[6]\n"
    "local t = redis.call('TIME')\n"
    "local now = string.format('%d.%06d', t[1], t[2])\n"
    "local index = P .. ':run:' .. run .. ':artifacts'\n"
    "local order = redis.call('ZCARD', index)\n"
    "local prev = from\n"
    "for k = 1, depth do\n"
    "  local id = tag .. k\n"
    "  local key = P .. ':artifact:' .. id\n"
    "  redis.call('HSET', key, 'id', id, 'run_id', run, 'kind', 'derived', 'title',\n"
    "    'Derivation ' .. k, 'conf', '2', 'integrity', '1', 'input_ids', '[\"' .. prev .. '\"]',\n"
    "    'hash', hash, 'content', 'derivation', 'capture_complete', '1', 'context_id', ctx,\n"
    "    'step', 'analyze', 'created_at', now)\n"
    "  redis.call('SADD', key .. ':derived_from', prev)\n"
    "  redis.call('SADD', key .. ':produced_by', ctx)\n"
    "  redis.call('SADD', P .. ':context:' .. ctx .. ':produced', id)\n"
    "  redis.call('ZADD', index, order + k, id)\n"
    "  prev = id\n"
    "end\n"
    "return depth\n";

static int build_lineage(const char *from, size_t depth, const char *tag, char tip[129])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char hash[65], n[32];
    EVP_Digest("derivation", strlen("derivation"), md, &mdlen, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(hash + 2 * i, 3, "%02x", md[i]);
    snprintf(n, sizeof n, "%zu", depth);
    const char *args[6] = {lim_run, lim_ctx, from, n, tag, hash};
    long long made = 0;
    if (harness_graph_eval(lim_graph, LINEAGE_SCRIPT, args, 6, &made) != 0 ||
        made != (long long)depth)
        return -1;
    snprintf(tip, 129, "%s%zu", tag, depth);
    return 0;
}

static void test_ancestry_beyond_the_limit_is_unknown_not_a_hang(void)
{
    /* Depth MAX_ANCESTRY - 1 over the source: exactly MAX_ANCESTRY artifacts, all of them seen.
     * One more derivation: the query stops at the limit and the lineage proves nothing. The
     * script writes no lineage summaries, as a graph written before they were kept: Deliver
     * decides only from a verified summary, so both are UNKNOWN, answered without a walk. */
    char at_limit[129], beyond[129];
    long long t0 = now_ms();
    CU_ASSERT_EQUAL_FATAL(build_lineage(lim_src, MAX_ANCESTRY - 1, "deep", at_limit), 0);
    long long t1 = now_ms();
    Charter__V1__DeliverResponse *r = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(
        deliver(lim_client, lim_ctx, at_limit, "cfo", "deliver_internal", "deep-at-limit", &r, &st),
        0);
    long long t2 = now_ms();
    printf("\n    built %d derivations in %lld ms; delivery at the limit: %s in %lld ms",
           MAX_ANCESTRY - 1, t1 - t0, r->decision->witness, t2 - t1);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_TRUE(only_code(r->decision, "GRAPH_ERROR"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->decision->witness, "has no lineage summary"));
    CU_ASSERT_PTR_NULL(r->delivery);
    charter__v1__deliver_response__free_unpacked(r, NULL);
    json_t *d = stored_delivery(lim_store, "deep-at-limit");
    CU_ASSERT_PTR_NULL(d);
    json_decref(d);

    /* One step further. */
    CU_ASSERT_EQUAL_FATAL(build_lineage(at_limit, 1, "beyond", beyond), 0);
    t1 = now_ms();
    CU_ASSERT_EQUAL_FATAL(
        deliver(lim_client, lim_ctx, beyond, "cfo", "deliver_internal", "deep-beyond", &r, &st), 0);
    t2 = now_ms();
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_TRUE(only_code(r->decision, "GRAPH_ERROR"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->decision->witness, "has no lineage summary"));
    CU_ASSERT_PTR_NULL(r->delivery);
    printf("\n    delivery beyond the limit: UNKNOWN (%s) in %lld ms\n", r->decision->witness,
           t2 - t1);
    charter__v1__deliver_response__free_unpacked(r, NULL);
    d = stored_delivery(lim_store, "deep-beyond");
    CU_ASSERT_PTR_NULL(d);
    json_decref(d);
    /* The input gate over it as well: UNKNOWN, recorded, never ALLOW. */
    char *ids[1] = {beyond};
    Charter__V1__CheckInputRequest ci = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    ci.context_id = lim_ctx;
    ci.artifact_ids = ids;
    ci.n_artifact_ids = 1;
    Charter__V1__CheckInputResponse *cr = NULL;
    CU_ASSERT_EQUAL(charter_check_input(lim_client, &ci, &cr, &st), 0);
    if (cr) {
        CU_ASSERT_EQUAL(cr->decision->outcome, CHARTER__V1__OUTCOME__UNKNOWN);
        CU_ASSERT_TRUE(harness_has_code(cr->decision->codes, cr->decision->n_codes, "GRAPH_ERROR"));
        charter__v1__check_input_response__free_unpacked(cr, NULL);
    }
    CU_ASSERT_EQUAL(harness_health(lim_daemon.tcp_url, 3000, NULL), 0);
}

typedef struct {
    charter_client *client;
    pthread_t thread;
    int rc;
    long long took_ms;
} queued_call;

static pthread_barrier_t queue_start;

/* A call that needs a worker and the database (Health is answered without either). */
static void *queued_listing(void *arg)
{
    queued_call *q = arg;
    pthread_barrier_wait(&queue_start);
    long long t0 = now_ms();
    Charter__V1__ListWorkflowsResponse *r = NULL;
    charter_status st;
    q->rc = charter_list_workflows(q->client, NULL, &r, &st);
    q->took_ms = now_ms() - t0;
    if (r)
        charter__v1__list_workflows_response__free_unpacked(r, NULL);
    return NULL;
}

static void test_callers_past_workers_and_queue_are_refused_at_once(void)
{
    enum { CALLERS = 20, CLIENTS = 4, SERVED = 1 + 2 /* --workers 1 --queue 2 */ };
    charter_client *cs[CLIENTS];
    for (int i = 0; i < CLIENTS; i++)
        CU_ASSERT_EQUAL_FATAL(harness_client_open(i % 2 ? lim_narrow.tcp_url : lim_narrow.ipc_url,
                                                  HARNESS_OPERATOR_TOKEN, 10000, &cs[i]),
                              0);
    queued_call qs[CALLERS];
    CU_ASSERT_EQUAL_FATAL(pthread_barrier_init(&queue_start, NULL, CALLERS), 0);
    /* The only worker and the queue fill up on the paused database. */
    CU_ASSERT_EQUAL_FATAL(harness_redis_pause(2000), 0);
    for (int i = 0; i < CALLERS; i++) {
        qs[i].client = cs[i % CLIENTS];
        CU_ASSERT_EQUAL_FATAL(pthread_create(&qs[i].thread, NULL, queued_listing, &qs[i]), 0);
    }
    for (int i = 0; i < CALLERS; i++)
        pthread_join(qs[i].thread, NULL);
    pthread_barrier_destroy(&queue_start);
    size_t served = 0, refused = 0, refused_late = 0;
    for (int i = 0; i < CALLERS; i++) {
        if (qs[i].rc == 0) {
            served++;
        } else if (qs[i].rc == -CHARTER_RESOURCE_EXHAUSTED) {
            refused++;
            refused_late += qs[i].took_ms >= 1000;
        } else {
            fprintf(stderr, "caller %d: %s after %lld ms\n", i, charter_status_name(qs[i].rc),
                    qs[i].took_ms);
        }
    }
    printf("\n    %d callers: %zu served, %zu RESOURCE_EXHAUSTED\n", CALLERS, served, refused);
    CU_ASSERT_EQUAL(served, SERVED);
    CU_ASSERT_EQUAL(refused, CALLERS - SERVED);
    CU_ASSERT_EQUAL(refused_late, 0); /* refused at once, not after the pause */
    for (int i = 0; i < CLIENTS; i++)
        charter_client_close(cs[i]);
    CU_ASSERT_EQUAL(harness_health(lim_narrow.tcp_url, 3000, NULL), 0);
}

static void test_startup_with_unreachable_tcp_redis_is_one_line(void)
{
    /* test_rpc covers a unix socket that does not exist; this is the TCP path. */
    const char *args[] = {"--redis", "tcp://127.0.0.1:1", "--listen", "tcp://127.0.0.1:1"};
    const char *env[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    char out[2048];
    int status = harness_charterd_run(args, 4, env, 15000, out, sizeof out);
    CU_ASSERT_TRUE(status > 0);
    size_t lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    CU_ASSERT_EQUAL(lines, 1);
    CU_ASSERT_EQUAL(strncmp(out, "charterd: ", 10), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "tcp://127.0.0.1:1"));
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test db_tests[] = {
    {"redis killed mid-run fails closed and recovers without restart",
     test_redis_killed_mid_run_fails_closed_and_recovers_without_restart},
};
static const harness_test lib_tests[] = {
    {"a flushed query library is loaded again and the call answered",
     test_a_flushed_query_library_is_loaded_again_and_the_call_answered},
    {"a query library of another version is never replaced",
     test_a_query_library_of_another_version_is_never_replaced},
    {"redis restarted empty is served again without restarting charterd",
     test_redis_restarted_empty_is_served_again_without_restarting_charterd},
};
static const harness_test edges_tests[] = {
    /* First: the next one deletes every edge of the graph. */
    {"a delivery record removed is named by audit",
     test_a_delivery_record_removed_is_named_by_audit},
    {"deleted relationships turn an allowed delivery into a refusal",
     test_deleted_relationships_turn_an_allowed_delivery_into_a_refusal},
};
static const harness_test crash_tests[] = {
    {"kill -9 mid-run leaves the run interrupted with its history",
     test_kill_9_mid_run_leaves_the_run_interrupted_with_its_history},
    {"kill -9 of charterd and its database loses nothing acknowledged",
     test_kill_9_of_charterd_and_its_database_loses_nothing_acknowledged},
};
static const harness_test limits_tests[] = {
    {"more ids than allowed per call is INVALID_ARGUMENT",
     test_more_ids_than_allowed_per_call_is_invalid_argument},
    {"content over the limit is INVALID_ARGUMENT", test_content_over_the_limit_is_invalid_argument},
    {"small message claiming huge counts is RESOURCE_EXHAUSTED",
     test_small_message_claiming_huge_counts_is_resource_exhausted},
    {"ancestry beyond the limit is UNKNOWN, not a hang",
     test_ancestry_beyond_the_limit_is_unknown_not_a_hang},
    {"callers past workers and queue are refused at once",
     test_callers_past_workers_and_queue_are_refused_at_once},
    {"startup with unreachable TCP redis is one line",
     test_startup_with_unreachable_tcp_redis_is_one_line},
};
static const harness_suite suites[] = {
    {"the graph is required: redis killed mid-run", db_init, db_clean, HARNESS_TABLE(db_tests)},
    {"the query library is required: redis loses it", lib_init, lib_clean,
     HARNESS_TABLE(lib_tests)},
    {"the graph is required: relationships removed", edges_init, edges_clean,
     HARNESS_TABLE(edges_tests)},
    {"crash of charterd", crash_init, crash_clean, HARNESS_TABLE(crash_tests)},
    {"bounded work", limits_init, limits_clean, HARNESS_TABLE(limits_tests)},
};

/* SIGPIPE ignored: hiredis writes to servers this program kills. */
const harness_program harness_tests = {HARNESS_SUITES(suites), .needs_redis = true,
                                       .ignore_sigpipe = true};
