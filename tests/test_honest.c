/*
 * test_honest.c - answers that tell the truth: NUL bytes refused rather than cut, the caller's
 * deadline bounding the whole call, the documented answer during shutdown, a client closed
 * with calls in flight, unauthenticated bytes that cannot hold memory or flood the log, and
 * truncation and tampering named as such.
 *
 * Requests with a NUL inside a string are built byte by byte (protobuf-c would stop at the
 * NUL) and sent over real NNG sockets to a real charterd; the database is a real Redis, paused
 * with CLIENT PAUSE where a call must stall.
 */
#include <CUnit/Basic.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "charter.h"
#include "charter.pb-c.h"
#include "harness.h"
#include "suite.h"

#define GET_RUN "/charter.v1.Runs/GetRun"
#define CREATE_RUN "/charter.v1.Runs/CreateRun"
#define DELIVER "/charter.v1.Gate/Deliver"
#define RECORD_OUTPUT "/charter.v1.Gate/RecordOutput"
#define TRACE "/charter.v1.Gate/TraceArtifact"

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --- requests built byte by byte ---------------------------------------------------------- */

typedef struct {
    uint8_t d[16384];
    size_t n;
} raw;

static void raw_varint(raw *b, uint64_t v)
{
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        b->d[b->n++] = byte | (v ? 0x80 : 0);
    } while (v);
}

/* A length-delimited field (string, bytes or message) holding len bytes of data. */
static void raw_field(raw *b, unsigned number, const void *data, size_t len)
{
    raw_varint(b, (uint64_t)number << 3 | 2);
    raw_varint(b, len);
    memcpy(b->d + b->n, data, len);
    b->n += len;
}

/* A string field with an explicit length, so it may hold a NUL ("X\0one", 5). */
static void raw_str(raw *b, unsigned number, const char *s, size_t len)
{
    raw_field(b, number, s, len);
}

static void raw_cstr(raw *b, unsigned number, const char *s)
{
    raw_field(b, number, s, strlen(s));
}

/* An RpcRequest: method, payload, one metadata entry (key, value), timeout. */
static void raw_envelope(raw *env, const char *method, size_t method_len, const raw *payload,
                         const char *key, const char *value, size_t value_len, uint32_t timeout)
{
    env->n = 0;
    raw_str(env, 1, method, method_len);
    raw_field(env, 2, payload->d, payload->n);
    if (key != NULL) {
        raw entry = {.n = 0};
        raw_cstr(&entry, 1, key);
        raw_str(&entry, 2, value, value_len);
        raw_field(env, 3, entry.d, entry.n);
    }
    if (timeout > 0) {
        raw_varint(env, 4 << 3 | 0);
        raw_varint(env, timeout);
    }
}

static const char bearer[] = "Bearer " HARNESS_OPERATOR_TOKEN;

/* Sends payload to method with the operator token; returns harness_rpc_raw's result. */
static int raw_call(const char *url, const char *method, const raw *payload, harness_response *r)
{
    raw env;
    raw_envelope(&env, method, strlen(method), payload, "authorization", bearer, strlen(bearer), 0);
    return harness_rpc_raw(url, env.d, env.n, 5000, r);
}

static bool contains(const char *s, const char *part)
{
    return s != NULL && strstr(s, part) != NULL;
}

/* --- helpers over libcharter ---------------------------------------------------------------- */

static int record_output(charter_client *c, const char *ctx, char *input, const char *title,
                         const char *content, char id[129])
{
    Charter__V1__RecordOutputRequest req = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    char *inputs[1] = {input};
    req.context_id = (char *)ctx;
    req.input_ids = inputs;
    req.n_input_ids = 1;
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
    charter__v1__record_output_response__free_unpacked(r, NULL);
    return ok ? 0 : -1;
}

/* A run of the reference workflow driven by hand up to an allowed internal recommendation:
 * run, analyze context, budget source and the recommendation (the payload). */
typedef struct {
    char run[129], ctx[129], src[129], payload[129];
} honest_run;

static int honest_run_open(charter_client *c, honest_run *h)
{
    charter_status st;
    if (harness_create_run(c, "external", NULL, h->run, NULL, &st) != 0) {
        fprintf(stderr, "CreateRun: %s: %s\n", charter_status_name(st.code), st.message);
        return -1;
    }
    if (harness_open_step(c, h->run, "analyze", h->ctx) != 0 ||
        harness_read_source(c, h->ctx, "budget", h->src) != 0 ||
        record_output(c, h->ctx, h->src, "Internal recommendation", "Pick vendor_b.", h->payload) !=
            0)
        return -1;
    return 0;
}

/* --- suite: NUL bytes and the Bearer scheme ----------------------------------------------- */

static char nul_graph[64];
static store *nul_store;
static harness_charterd nul_daemon;
static charter_client *nul_client;
static honest_run nul_run;
static char nul_digest[65];

static int nul_init(void)
{
    harness_graph_name(nul_graph, sizeof nul_graph, "honest_nul");
    nul_store = harness_store_open(nul_graph);
    harness_charterd_opts o = {.graph = nul_graph};
    if (harness_charterd_start(&o, &nul_daemon) != 0 ||
        harness_client_open(nul_daemon.tcp_url, HARNESS_OPERATOR_TOKEN, 10000, &nul_client) != 0 ||
        honest_run_open(nul_client, &nul_run) != 0)
        return -1;
    return harness_graph_digest(nul_graph, nul_digest);
}

static int nul_cleanup(void)
{
    charter_client_close(nul_client);
    int rc = nul_daemon.pid > 0 ? harness_charterd_stop(&nul_daemon) : 0;
    store_close(nul_store);
    harness_graph_drop_large(nul_graph);
    return rc == 0 ? 0 : -1;
}

static void assert_graph_unchanged(void)
{
    char now[65];
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(nul_graph, now), 0);
    CU_ASSERT_STRING_EQUAL(now, nul_digest);
}

static void test_run_id_with_nul_is_invalid_argument_not_the_run_before_it(void)
{
    raw p = {.n = 0};
    harness_response r;
    raw_cstr(&p, 1, nul_run.run);
    CU_ASSERT_EQUAL_FATAL(raw_call(nul_daemon.tcp_url, GET_RUN, &p, &r), 0);
    CU_ASSERT_EQUAL(r.code, 0); /* the hand-built request itself is right */
    harness_response_free(&r);

    char id[160];
    int n = snprintf(id, sizeof id, "%s%cjunk", nul_run.run, '\0');
    p.n = 0;
    raw_str(&p, 1, id, (size_t)n);
    CU_ASSERT_EQUAL_FATAL(raw_call(nul_daemon.tcp_url, GET_RUN, &p, &r), 0);
    CU_ASSERT_EQUAL(r.code, 3); /* INVALID_ARGUMENT, never run R */
    CU_ASSERT_TRUE(contains(r.message, "run_id"));
    CU_ASSERT_TRUE(contains(r.message, "NUL"));
    harness_response_free(&r);
}

static void test_invocation_ids_differing_after_a_nul_are_refused_and_write_nothing(void)
{
    static const char *const ids[2] = {"X\0one", "X\0two"};
    for (int i = 0; i < 2; i++) {
        raw p = {.n = 0};
        raw_cstr(&p, 1, nul_run.ctx);
        raw_cstr(&p, 2, nul_run.payload);
        raw_cstr(&p, 3, "cfo");
        raw_cstr(&p, 4, "deliver_internal");
        raw_str(&p, 5, ids[i], 5);
        harness_response r;
        CU_ASSERT_EQUAL_FATAL(raw_call(nul_daemon.tcp_url, DELIVER, &p, &r), 0);
        CU_ASSERT_EQUAL(r.code, 3);
        CU_ASSERT_TRUE(contains(r.message, "invocation_id"));
        harness_response_free(&r);
    }
    assert_graph_unchanged();
    json_t *j = NULL;
    CU_ASSERT_EQUAL(q_find_delivery(nul_store, "X", &j), STATUS_OK);
    CU_ASSERT_TRUE(j == NULL || json_is_null(j)); /* no delivery "X" either */
    json_decref(j);
}

static void test_title_and_content_with_nul_are_refused_not_shortened(void)
{
    static const struct {
        unsigned field;
        const char *value;
        size_t len;
        const char *name;
    } cases[2] = {{3, "Internal\0 recommendation", 24, "title"},
                  {4, "Pick vendor_b.\0 And more.", 25, "content"}};
    for (int i = 0; i < 2; i++) {
        raw p = {.n = 0};
        raw_cstr(&p, 1, nul_run.ctx);
        raw_cstr(&p, 2, nul_run.src);
        if (cases[i].field == 3) {
            raw_str(&p, 3, cases[i].value, cases[i].len);
            raw_cstr(&p, 4, "Pick vendor_b.");
        } else {
            raw_cstr(&p, 3, "Internal recommendation");
            raw_str(&p, 4, cases[i].value, cases[i].len);
        }
        harness_response r;
        CU_ASSERT_EQUAL_FATAL(raw_call(nul_daemon.tcp_url, RECORD_OUTPUT, &p, &r), 0);
        CU_ASSERT_EQUAL(r.code, 3);
        CU_ASSERT_TRUE(contains(r.message, cases[i].name));
        harness_response_free(&r);
    }
    assert_graph_unchanged();
}

static void test_token_followed_by_nul_and_junk_is_unauthenticated(void)
{
    raw p = {.n = 0}, env;
    raw_cstr(&p, 1, nul_run.run);
    char value[160];
    int n = snprintf(value, sizeof value, "%s%cjunk", bearer, '\0');
    raw_envelope(&env, GET_RUN, strlen(GET_RUN), &p, "authorization", value, (size_t)n, 0);
    harness_response r;
    CU_ASSERT_EQUAL_FATAL(harness_rpc_raw(nul_daemon.tcp_url, env.d, env.n, 5000, &r), 0);
    CU_ASSERT_EQUAL(r.code, 16);
    harness_response_free(&r);
}

static void test_method_or_metadata_with_nul_is_invalid_argument(void)
{
    raw empty = {.n = 0}, env;
    harness_response r;
    static const char method[] = HARNESS_HEALTH "\0junk";
    raw_envelope(&env, method, sizeof method - 1, &empty, NULL, NULL, 0, 0);
    CU_ASSERT_EQUAL_FATAL(harness_rpc_raw(nul_daemon.tcp_url, env.d, env.n, 5000, &r), 0);
    CU_ASSERT_EQUAL(r.code, 3);
    CU_ASSERT_TRUE(contains(r.message, "method"));
    harness_response_free(&r);

    raw_envelope(&env, HARNESS_HEALTH, strlen(HARNESS_HEALTH), &empty, "x-request-id", "a\0b", 3,
                 0);
    CU_ASSERT_EQUAL_FATAL(harness_rpc_raw(nul_daemon.tcp_url, env.d, env.n, 5000, &r), 0);
    CU_ASSERT_EQUAL(r.code, 3);
    CU_ASSERT_TRUE(contains(r.message, "metadata"));
    harness_response_free(&r);
}

static void test_bearer_scheme_is_case_insensitive_and_the_token_is_not(void)
{
    static const char *const schemes[3] = {"bearer ", "BEARER ", "bEaReR "};
    raw p = {.n = 0}, env;
    raw_cstr(&p, 1, nul_run.run);
    for (int i = 0; i < 3; i++) {
        char value[160];
        int n = snprintf(value, sizeof value, "%s%s", schemes[i], HARNESS_OPERATOR_TOKEN);
        raw_envelope(&env, GET_RUN, strlen(GET_RUN), &p, "authorization", value, (size_t)n, 0);
        harness_response r;
        CU_ASSERT_EQUAL_FATAL(harness_rpc_raw(nul_daemon.tcp_url, env.d, env.n, 5000, &r), 0);
        CU_ASSERT_EQUAL(r.code, 0);
        harness_response_free(&r);
    }
    char upper[160];
    int n = snprintf(upper, sizeof upper, "Bearer %s", HARNESS_OPERATOR_TOKEN);
    for (int i = 7; i < n; i++)
        upper[i] = (upper[i] >= 'a' && upper[i] <= 'z') ? (char)(upper[i] - 32) : upper[i];
    raw_envelope(&env, GET_RUN, strlen(GET_RUN), &p, "authorization", upper, (size_t)n, 0);
    harness_response r;
    CU_ASSERT_EQUAL_FATAL(harness_rpc_raw(nul_daemon.tcp_url, env.d, env.n, 5000, &r), 0);
    CU_ASSERT_EQUAL(r.code, 16);
    harness_response_free(&r);
}

/* --- truncation and tampering, on the same charterd --------------------------------------- */

#define ANCESTRY_LIMIT 10000 /* charterd's max_ancestry */

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

static void test_trace_says_when_the_ancestry_was_truncated(void)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char hash[65], depth[32];
    EVP_Digest("derivation", strlen("derivation"), md, &mdlen, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(hash + 2 * i, 3, "%02x", md[i]);
    snprintf(depth, sizeof depth, "%d", ANCESTRY_LIMIT);
    const char *args[6] = {nul_run.run, nul_run.ctx, nul_run.src, depth, "deep", hash};
    long long made = 0;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(nul_graph, LINEAGE_SCRIPT, args, 6, &made), 0);
    CU_ASSERT_EQUAL_FATAL(made, ANCESTRY_LIMIT);

    Charter__V1__TraceArtifactRequest req = CHARTER__V1__TRACE_ARTIFACT_REQUEST__INIT;
    Charter__V1__TraceArtifactResponse *r = NULL;
    charter_status st;
    /* The source alone: the whole lineage, not truncated. */
    req.artifact_id = nul_run.src;
    CU_ASSERT_EQUAL_FATAL(charter_trace_artifact(nul_client, &req, &r, &st), 0);
    CU_ASSERT_FALSE(r->truncated);
    CU_ASSERT_EQUAL(r->n_artifacts, 1);
    charter__v1__trace_artifact_response__free_unpacked(r, NULL);
    /* The tip: 10001 artifacts reachable, 10000 returned, and it says so. */
    char tip[64];
    snprintf(tip, sizeof tip, "deep%d", ANCESTRY_LIMIT);
    req.artifact_id = tip;
    CU_ASSERT_EQUAL_FATAL(charter_trace_artifact(nul_client, &req, &r, &st), 0);
    CU_ASSERT_TRUE(r->truncated);
    CU_ASSERT_EQUAL(r->n_artifacts, ANCESTRY_LIMIT);
    charter__v1__trace_artifact_response__free_unpacked(r, NULL);

    /* The CLI prints it. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "CHARTER_URL=%s CHARTER_TOKEN=%s %s trace %s 2>&1 | tail -n 3",
             nul_daemon.tcp_url, HARNESS_OPERATOR_TOKEN, CHARTER_CLI_PATH, tip);
    FILE *f = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    pclose(f);
    CU_ASSERT_TRUE(contains(out, "truncated"));
    CU_ASSERT_TRUE(contains(out, "first 10000"));
}

/* ApplyWorkflow of the reference workflow with another task (so another version), then its
 * stored definition altered in the database: a charterd that has not seen it names the
 * mismatch. */
static void test_tampered_stored_workflow_is_named_as_altered(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/deploy/workflows/procurement.json", CHARTER_SOURCE_DIR);
    FILE *f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static char def[256 * 1024];
    size_t n = fread(def, 1, sizeof def - 1, f);
    fclose(f);
    def[n] = '\0';
    char *task = strstr(def, "Compare three desk vendors");
    CU_ASSERT_PTR_NOT_NULL_FATAL(task);
    memcpy(task, "Compare three DESK vendors", 26);

    Charter__V1__ApplyWorkflowRequest areq = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    areq.definition.data = (uint8_t *)def;
    areq.definition.len = n;
    Charter__V1__WorkflowInfo *info = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_apply_workflow(nul_client, &areq, &info, &st), 0);
    char version[65];
    snprintf(version, sizeof version, "%s", info->version);
    charter__v1__workflow_info__free_unpacked(info, NULL);

    /* The stored bytes change; the version they are stored under does not. */
    memcpy(task, "Compare three desk VENDORS", 26);
    const char *args[2] = {version, def};
    CU_ASSERT_EQUAL_FATAL(
        harness_graph_eval(nul_graph,
                           "redis.call('HSET', KEYS[1] .. ':workflow:' .. ARGV[1], 'definition', "
                           "ARGV[2]) return 1",
                           args, 2, NULL),
        0);

    harness_charterd other;
    harness_charterd_opts o = {.graph = nul_graph};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &other), 0);
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(other.tcp_url, HARNESS_OPERATOR_TOKEN, 10000, &c), 0);
    char run[129];
    CU_ASSERT_EQUAL(harness_create_run(c, "external", version, run, NULL, &st), -CHARTER_INTERNAL);
    printf("\n    CreateRun under the altered workflow: %s: %s\n", charter_status_name(st.code),
           st.message);
    CU_ASSERT_TRUE(contains(st.message, "altered"));
    CU_ASSERT_TRUE(contains(st.message, version));
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&other), 0);
}

/* --- suite: deadlines and shutdown, on a Redis of the suite's own ------------------------ */

static harness_private_redis dl_redis;
static char dl_graph[64];
static store *dl_store;
static harness_charterd dl_daemon;
static charter_client *dl_client;

static int dl_setup(void)
{
    if (harness_suite_redis_start(&dl_redis) != 0)
        return -1;
    harness_graph_name(dl_graph, sizeof dl_graph, "honest_dl");
    dl_store = harness_store_open(dl_graph);
    const char *extra[] = {"--workers", "2"};
    harness_charterd_opts o = {.graph = dl_graph, .extra_args = extra, .n_extra = 2};
    if (harness_charterd_start(&o, &dl_daemon) != 0)
        return -1;
    return harness_client_open(dl_daemon.tcp_url, HARNESS_OPERATOR_TOKEN, 10000, &dl_client);
}

static int dl_cleanup(void)
{
    if (dl_redis.pid > 0)
        kill(dl_redis.pid, SIGCONT);
    charter_client_close(dl_client);
    int rc = dl_daemon.pid > 0 ? harness_charterd_stop(&dl_daemon) : 0;
    store_close(dl_store);
    harness_suite_redis_stop(&dl_redis);
    return rc == 0 ? 0 : -1;
}

static int dl_init(void)
{
    if (dl_setup() == 0)
        return 0;
    dl_cleanup();
    return -1;
}

static void test_read_with_the_database_paused_is_deadline_exceeded_by_the_deadline(void)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = "r-none";
    /* This side waits 6 s of the pause's 8: an answer held back until the pause ended would
     * not arrive (and would be NOT_FOUND), only one given by the deadline does. The pause
     * cannot be ended early (CLIENT UNPAUSE waits behind CLIENT PAUSE ALL in Redis 7.0). */
    CU_ASSERT_EQUAL_FATAL(harness_redis_pause(8000), 0);
    harness_response r;
    long long t0 = now_ms();
    CU_ASSERT_EQUAL_FATAL(harness_rpc_deadline(dl_daemon.tcp_url, GET_RUN, HARNESS_OPERATOR_TOKEN,
                                               &req.base, 500, 6000, &r),
                          0);
    long long took = now_ms() - t0;
    harness_redis_unpause();
    printf("\n    GetRun, 500 ms deadline, database paused: %s in %lld ms\n", r.message, took);
    CU_ASSERT_EQUAL(r.code, 4); /* DEADLINE_EXCEEDED, not UNAVAILABLE */
    harness_response_free(&r);
}

static void test_delivery_with_writes_paused_is_answered_within_its_deadline(void)
{
    honest_run h;
    CU_ASSERT_EQUAL_FATAL(honest_run_open(dl_client, &h), 0);
    Charter__V1__DeliverRequest req = CHARTER__V1__DELIVER_REQUEST__INIT;
    req.context_id = h.ctx;
    req.payload_id = h.payload;
    req.recipient = "cfo";
    req.tool = "deliver_internal";
    req.invocation_id = "dl-paused";
    /* Reads run on, every write waits: each commit attempt would time out on its own. */
    /* The pause lasts until it is ended below, after the answer: only an answer given by the
     * deadline arrives at all within this side's 10 s. */
    CU_ASSERT_EQUAL_FATAL(harness_redis_pause_writes(60000), 0);
    harness_response r;
    long long t0 = now_ms();
    CU_ASSERT_EQUAL_FATAL(harness_rpc_deadline(dl_daemon.tcp_url, DELIVER, HARNESS_OPERATOR_TOKEN,
                                               &req.base, 500, 10000, &r),
                          0);
    long long took = now_ms() - t0;
    harness_redis_unpause();
    printf("    Deliver, 500 ms deadline, writes paused: code %d (%s) in %lld ms\n", r.code,
           r.message, took);
    harness_response_free(&r);
}

/* One Deliver of h's payload under inv with a deadline_ms deadline; *out is the decoded
 * DeliverResponse (free with charter__v1__deliver_response__free_unpacked). Returns the
 * RpcResponse code, or -1 when no reply or an undecodable one came. */
static int deliver_once(const honest_run *h, const char *inv, uint32_t deadline_ms,
                        Charter__V1__DeliverResponse **out)
{
    Charter__V1__DeliverRequest req = CHARTER__V1__DELIVER_REQUEST__INIT;
    req.context_id = (char *)h->ctx;
    req.payload_id = (char *)h->payload;
    req.recipient = "cfo";
    req.tool = "deliver_internal";
    req.invocation_id = (char *)inv;
    *out = NULL;
    harness_response r;
    if (harness_rpc_deadline(dl_daemon.tcp_url, DELIVER, HARNESS_OPERATOR_TOKEN, &req.base,
                             deadline_ms, 10000, &r) != 0)
        return -1;
    int code = r.code;
    if (code == 0)
        *out = charter__v1__deliver_response__unpack(NULL, r.payload_len, r.payload);
    if (code == 0)
        printf("    Deliver %s, %u ms deadline: %s\n", inv, deadline_ms, r.message);
    harness_response_free(&r);
    return code == 0 && *out == NULL ? -1 : code;
}

static bool has_code(const Charter__V1__Decision *d, const char *code)
{
    for (size_t i = 0; d && i < d->n_codes; i++)
        if (strcmp(d->codes[i], code) == 0)
            return true;
    return false;
}

/* Counts run_id's delivery_decided events about inv: allow ones, and ones that claim no
 * effect (deny, or unknown without EFFECT_UNKNOWN). Returns 0, or -1 when unreadable. */
static int decided_events(const char *run_id, const char *inv, int *allow, int *no_effect)
{
    json_t *view = NULL;
    *allow = *no_effect = 0;
    if (q_get_run(dl_store, run_id, "0", "100000", NULL, NULL, NULL, &view) != STATUS_OK)
        return -1;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(view, "events"), i, e)
    {
        const char *kind = json_string_value(json_object_get(e, "kind"));
        const char *outcome = json_string_value(json_object_get(e, "outcome"));
        const char *codes = json_string_value(json_object_get(e, "codes"));
        const char *detail = json_string_value(json_object_get(e, "detail"));
        if (!kind || strcmp(kind, "delivery_decided") != 0 || !outcome || !detail)
            continue;
        json_t *d = json_loads(detail, 0, NULL);
        const char *dinv = json_string_value(json_object_get(d, "invocation_id"));
        if (dinv && strcmp(dinv, inv) == 0) {
            if (strcasecmp(outcome, "allow") == 0)
                (*allow)++;
            else if (!codes || !strstr(codes, "EFFECT_UNKNOWN"))
                (*no_effect)++;
        }
        json_decref(d);
    }
    json_decref(view);
    return 0;
}

static void test_delivery_whose_commit_went_unanswered_never_claims_no_effect(void)
{
    honest_run h;
    CU_ASSERT_EQUAL_FATAL(honest_run_open(dl_client, &h), 0);
    const char *inv = "dl-unanswered";
    /* Every write waits in Redis's socket while the call's deadline runs out; the commit runs
     * once writes resume, after the call was answered. */
    CU_ASSERT_EQUAL_FATAL(harness_redis_pause_writes(1500), 0);
    Charter__V1__DeliverResponse *first = NULL;
    int code = deliver_once(&h, inv, 500, &first);
    usleep(1600 * 1000); /* the pause ends on its own: the queued commit runs */
    harness_redis_unpause();
    CU_ASSERT_EQUAL_FATAL(code, 0);
    const Charter__V1__Decision *d = first->decision;
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    bool allow = d->outcome == CHARTER__V1__OUTCOME__ALLOW;
    bool effect_unknown =
        d->outcome == CHARTER__V1__OUTCOME__UNKNOWN && has_code(d, "EFFECT_UNKNOWN");
    printf("    first answer: outcome %d, effect unknown %d, witness \"%s\"\n", d->outcome,
           effect_unknown, d->witness ? d->witness : "");
    /* Never a plain UNKNOWN (README: "nothing happens") for a commit that lands. */
    CU_ASSERT_TRUE(allow || effect_unknown);
    if (effect_unknown)
        CU_ASSERT_PTR_NOT_NULL(strstr(d->witness, "same invocation ID"));
    charter__v1__deliver_response__free_unpacked(first, NULL);

    /* The retry learns the outcome: acknowledged when the commit landed (it may run once writes
     * resume), else committed now; either way one delivery. A paused server drops a command
     * whose client left, so both happen. */
    json_t *found = NULL;
    CU_ASSERT_EQUAL_FATAL(q_find_delivery(dl_store, inv, &found), STATUS_OK);
    bool landed = json_is_object(found);
    json_decref(found);
    Charter__V1__DeliverResponse *again = NULL;
    CU_ASSERT_EQUAL_FATAL(deliver_once(&h, inv, 5000, &again), 0);
    printf("    the first commit %s; the retry is %s\n", landed ? "landed" : "did not land",
           again->acknowledged ? "acknowledged" : "a new commit");
    CU_ASSERT_EQUAL(again->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_EQUAL(again->acknowledged, landed);
    charter__v1__deliver_response__free_unpacked(again, NULL);

    /* The log holds the one allow the commit wrote and nothing that contradicts it. */
    int allow_ev = 0, no_effect_ev = 0;
    CU_ASSERT_EQUAL_FATAL(decided_events(h.run, inv, &allow_ev, &no_effect_ev), 0);
    printf("    events for %s: %d allow, %d claiming no effect\n", inv, allow_ev, no_effect_ev);
    CU_ASSERT_EQUAL(allow_ev, 1);
    CU_ASSERT_EQUAL(no_effect_ev, 0);
}

typedef struct {
    const char *url;
    uint32_t deadline_ms;
    int rv;
    int code;
} slow_call;

static void *slow_call_main(void *arg)
{
    slow_call *s = arg;
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = "r-slow";
    harness_response r;
    s->rv = harness_rpc_deadline(s->url, GET_RUN, HARNESS_OPERATOR_TOKEN, &req.base, s->deadline_ms,
                                 (int)s->deadline_ms + 7000, &r);
    s->code = s->rv == 0 ? r.code : -1;
    if (s->rv == 0)
        harness_response_free(&r);
    return NULL;
}

/* Health through url until it answers code with message in its text (at most 20 s); true
 * when it did. Each try is answered at once by a charterd with no queue. */
/* A call that needs a worker (Health is answered without one): ListWorkflows. */
static bool listing_says(const char *url, int code, const char *message)
{
    long long until = now_ms() + 20000;
    while (now_ms() < until) {
        harness_response r;
        bool said = false;
        if (harness_rpc(url, "/charter.v1.Workflows/ListWorkflows", HARNESS_OPERATOR_TOKEN, NULL, 0,
                        3000, &r) == 0) {
            said = r.code == code && contains(r.message, message);
            if (said)
                printf("\n    a caller: code %d: %s", r.code, r.message);
            harness_response_free(&r);
        }
        if (said)
            return true;
        harness_sleep_ms(20);
    }
    return false;
}

/* A write that waits behind CLIENT PAUSE WRITE until the test ends the pause (its deadline
 * outlasts it): CreateRun of an external run through url. Sent again while charterd answers
 * "busy" (its one worker taken by the test's probe for a moment): a refused call has no
 * effect, and only the one that got the worker is the call under test. */
static void *held_write_main(void *arg)
{
    slow_call *s = arg;
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "external";
    for (int i = 0; i < 1000; i++) {
        harness_response r;
        s->rv = harness_rpc_deadline(s->url, "/charter.v1.Runs/CreateRun", HARNESS_OPERATOR_TOKEN,
                                     &req.base, s->deadline_ms, (int)s->deadline_ms, &r);
        s->code = s->rv == 0 ? r.code : -1;
        if (s->rv == 0)
            harness_response_free(&r);
        if (s->code != 8)
            break;
        harness_sleep_ms(5);
    }
    return NULL;
}

static void test_callers_arriving_during_shutdown_get_unavailable_shutting_down(void)
{
    harness_charterd d;
    const char *extra[] = {"--workers", "1", "--queue", "0", "--runners", "0"};
    harness_charterd_opts o = {.graph = dl_graph, .extra_args = extra, .n_extra = 6};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    /* One call keeps the only worker busy until the pause is ended below, so the shutdown has
     * a call to drain; with no queue, a caller is told "busy" while it runs, and "shutting
     * down" once SIGTERM has been taken. */
    CU_ASSERT_EQUAL_FATAL(harness_redis_pause_writes(60000), 0);
    slow_call s = {d.tcp_url, 30000, -1, -1};
    pthread_t th;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, held_write_main, &s), 0);
    CU_ASSERT_TRUE(listing_says(d.tcp_url, 8, "busy"));
    CU_ASSERT_EQUAL(kill(d.pid, SIGTERM), 0);
    CU_ASSERT_TRUE(listing_says(d.tcp_url, 14, "server is shutting down"));
    printf("\n");
    harness_redis_unpause();
    pthread_join(th, NULL);
    /* The call in flight was served, not dropped. */
    CU_ASSERT_EQUAL(s.rv, 0);
    CU_ASSERT_EQUAL(s.code, 0);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
}

/* --- unauthenticated bytes: memory and the log -------------------------------------------- */

#define SMALL_MAX_MESSAGE 1048576
#define FLOOD_FRAMES 300
#define FLOOD_FRAME_BYTES 1000000

/* A memory figure of process pid from /proc (field "VmRSS:" now, "VmHWM:" its peak), KiB. */
static long mem_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long kib = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, field, strlen(field)) == 0) {
            kib = atol(line + strlen(field));
            break;
        }
    }
    fclose(f);
    return kib;
}

static void test_large_frames_with_workers_stalled_keep_memory_bounded(void)
{
    harness_charterd d;
    const char *extra[] = {"--workers", "1", "--queue", "512", "--max-message", "1048576"};
    harness_charterd_opts o = {.graph = dl_graph, .extra_args = extra, .n_extra = 6};
    /* Under AddressSanitizer freed memory is held in a quarantine (256 MB by default), which
     * would count as memory held by frames: keep it small for this charterd. Ignored by a
     * build without sanitizers. */
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan != NULL ? strdup(asan) : NULL;
    char options[1024];
    snprintf(options, sizeof options, "%s%squarantine_size_mb=8:thread_local_quarantine_size_kb=64",
             asan != NULL ? asan : "", asan != NULL && asan[0] != '\0' ? ":" : "");
    setenv("ASAN_OPTIONS", options, 1);
    int started = harness_charterd_start(&o, &d);
    if (saved != NULL)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
    CU_ASSERT_EQUAL_FATAL(started, 0);
    long before = mem_kib(d.pid, "VmHWM:");

    nng_socket s;
    CU_ASSERT_EQUAL_FATAL(nng_req0_open(&s), 0);
    nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    CU_ASSERT_EQUAL_FATAL(nng_dial(s, d.tcp_url, NULL, 0), 0);

    /* The worker stalls on a call the stopped database never answers. */
    /* From here to the SIGCONT below no assertion ends the test: a database left stopped would
     * stall every later test of the suite (each failure jumps to the resume instead). */
    static nng_ctx ctx[FLOOD_FRAMES];
    static nng_aio *aio[FLOOD_FRAMES];
    memset(aio, 0, sizeof aio);
    int opened = 0;
    bool joinable = false;
    pthread_t th;
    slow_call stall = {d.tcp_url, 60000, -1, -1};
    uint8_t *junk = malloc(FLOOD_FRAME_BYTES);
    CU_ASSERT_PTR_NOT_NULL_FATAL(junk);
    memset(junk, 0xff, FLOOD_FRAME_BYTES);
    CU_ASSERT_EQUAL_FATAL(kill(dl_redis.pid, SIGSTOP), 0);
    joinable = pthread_create(&th, NULL, slow_call_main, &stall) == 0;
    CU_ASSERT_TRUE(joinable);
    if (!joinable)
        goto resume;
    harness_sleep_ms(300);

    long long t0 = now_ms();
    for (int i = 0; i < FLOOD_FRAMES; i++) {
        nng_msg *m = NULL;
        bool ready = nng_ctx_open(&ctx[i], s) == 0;
        if (ready && nng_aio_alloc(&aio[i], NULL, NULL) != 0) {
            nng_ctx_close(ctx[i]);
            ready = false;
        }
        if (ready)
            opened++;
        if (!ready || nng_msg_alloc(&m, FLOOD_FRAME_BYTES) != 0) {
            CU_FAIL("a frame could not be prepared");
            goto resume;
        }
        memcpy(nng_msg_body(m), junk, FLOOD_FRAME_BYTES);
        nng_aio_set_msg(aio[i], m);
        nng_aio_set_timeout(aio[i], 20000);
        nng_ctx_send(ctx[i], aio[i]);
    }
    int sent = 0;
    for (int i = 0; i < FLOOD_FRAMES; i++) {
        nng_aio_wait(aio[i]);
        if (nng_aio_result(aio[i]) == 0)
            sent++;
        else
            nng_msg_free(nng_aio_get_msg(aio[i]));
    }
    /* A send completes when the frame is handed to the connection: let it arrive. */
    harness_sleep_ms(2000);
    long sent_rss = mem_kib(d.pid, "VmRSS:");
    /* Answers to what was refused arrive at once; the rest waits for the worker. */
    int exhausted = 0;
    for (int i = 0; i < FLOOD_FRAMES; i++) {
        nng_aio_set_timeout(aio[i], i == 0 ? 2000 : 50);
        nng_ctx_recv(ctx[i], aio[i]);
        nng_aio_wait(aio[i]);
        if (nng_aio_result(aio[i]) != 0)
            continue;
        nng_msg *m = nng_aio_get_msg(aio[i]);
        Charter__V1__RpcResponse *r =
            charter__v1__rpc_response__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
        if (r != NULL && r->code == 8)
            exhausted++;
        if (r != NULL)
            charter__v1__rpc_response__free_unpacked(r, NULL);
        nng_msg_free(m);
    }
    long after = mem_kib(d.pid, "VmHWM:");
    printf("\n    %d frames of %d bytes sent in %lld ms with the worker stalled: %d answered "
           "RESOURCE_EXHAUSTED at once; charterd peak RSS %ld KiB -> %ld KiB (%ld KiB after "
           "the sends)\n",
           sent, FLOOD_FRAME_BYTES, now_ms() - t0, exhausted, before, after, sent_rss);
    CU_ASSERT_EQUAL(sent, FLOOD_FRAMES);
    CU_ASSERT_TRUE(exhausted >= FLOOD_FRAMES - 40);
    /* Queued bytes are bounded at 16 MiB; without the bound the 300 frames stay queued whole
     * (about 300 MiB more). The margin covers a sanitizer's shadow memory. */
    CU_ASSERT_TRUE(before > 0 && after > 0 && after - before < 160 * 1024);

resume:
    CU_ASSERT_EQUAL(kill(dl_redis.pid, SIGCONT), 0);
    if (joinable)
        pthread_join(th, NULL);

    /* Just over the limit (within NNG's frame allowance): answered, not dropped. */
    static uint8_t over[SMALL_MAX_MESSAGE + 16];
    memset(over, 0xff, sizeof over);
    harness_response r;
    CU_ASSERT_EQUAL(harness_rpc_raw(d.tcp_url, over, sizeof over, 5000, &r), 0);
    CU_ASSERT_EQUAL(r.code, 8);
    harness_response_free(&r);
    /* Health answers once the worker has drained the queued frames. The flood's socket is
     * closed only then, on a quiet connection: closing a req socket while its peer is still
     * answering can hang in NNG 1.5 (nanomsg/nng#1543). */
    CU_ASSERT_EQUAL(harness_health(d.tcp_url, 10000, NULL), 0);
    harness_sleep_ms(200);
    for (int i = 0; i < opened; i++) {
        nng_aio_free(aio[i]);
        nng_ctx_close(ctx[i]);
    }
    nng_close(s);
    free(junk);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
}

static long count_lines(const char *path, long *summaries)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long n = 0;
    *summaries = 0;
    char line[2048];
    while (fgets(line, sizeof line, f) != NULL) {
        n++;
        if (strstr(line, "more refused calls not logged") && strstr(line, "INVALID_ARGUMENT"))
            (*summaries)++;
    }
    fclose(f);
    return n;
}

#define GARBAGE_FRAMES 3000
/* Full lines a second (5) plus its summary, with room for a second boundary. */
#define LOG_LINES_PER_SECOND_BOUND 8

static void test_garbage_flood_writes_a_bounded_number_of_log_lines(void)
{
    harness_charterd d;
    harness_charterd_opts o = {.graph = dl_graph};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    long summaries = 0;
    long before = count_lines(d.log_path, &summaries);

    nng_socket s;
    CU_ASSERT_EQUAL_FATAL(nng_req0_open(&s), 0);
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 5000);
    CU_ASSERT_EQUAL_FATAL(nng_dial(s, d.tcp_url, NULL, 0), 0);
    static const uint8_t garbage[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    long long t0 = now_ms();
    int answered = 0;
    for (int i = 0; i < GARBAGE_FRAMES; i++) {
        void *buf = NULL;
        size_t sz = 0;
        if (nng_send(s, (void *)garbage, sizeof garbage, 0) != 0 ||
            nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC) != 0)
            break;
        nng_free(buf, sz);
        answered++;
    }
    long long took = now_ms() - t0;
    /* One more refusal in a later second writes the summary of the flood. */
    harness_sleep_ms(1100);
    void *buf = NULL;
    size_t sz = 0;
    if (nng_send(s, (void *)garbage, sizeof garbage, 0) == 0 &&
        nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC) == 0)
        nng_free(buf, sz);
    nng_close(s);
    harness_sleep_ms(100);
    long after = count_lines(d.log_path, &summaries);
    long seconds = took / 1000 + 2;
    printf("\n    %d garbage frames in %lld ms: %ld log lines, %ld summaries\n", answered, took,
           after - before, summaries);
    CU_ASSERT_EQUAL(answered, GARBAGE_FRAMES);
    CU_ASSERT_TRUE(after - before <= seconds * (LOG_LINES_PER_SECOND_BOUND));
    CU_ASSERT_TRUE(summaries >= 1);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
}

/* --- the client closed with calls in flight ----------------------------------------------- */

#define CLOSE_THREADS 8

typedef struct {
    charter_client *c;
    int rc;
    atomic_int done;
} close_call;

static atomic_int close_started;

static void *close_call_main(void *arg)
{
    close_call *cc = arg;
    atomic_fetch_add(&close_started, 1);
    /* A call the paused database holds back (Health is answered from the serving status). */
    Charter__V1__ListWorkflowsResponse *r = NULL;
    charter_status st;
    cc->rc = charter_list_workflows(cc->c, NULL, &r, &st);
    if (r != NULL)
        charter__v1__list_workflows_response__free_unpacked(r, NULL);
    atomic_store(&cc->done, 1);
    return NULL;
}

static void close_with_calls_in_flight(const char *url, const char *what)
{
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = 10000;
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_client_open(url, HARNESS_OPERATOR_TOKEN, &o, &c), 0);
    close_call calls[CLOSE_THREADS];
    atomic_store(&close_started, 0);
    pthread_t th[CLOSE_THREADS];
    for (int i = 0; i < CLOSE_THREADS; i++) {
        calls[i].c = c;
        calls[i].rc = 1;
        atomic_init(&calls[i].done, 0);
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, close_call_main, &calls[i]), 0);
    }
    /* Every thread is about to call (and, 300 ms later, waiting inside the call). */
    for (int i = 0; i < 1000 && atomic_load(&close_started) < CLOSE_THREADS; i++)
        harness_sleep_ms(10);
    harness_sleep_ms(300);
    long long t0 = now_ms();
    charter_client_close(c);
    long long took = now_ms() - t0;
    /* close returns once every call has stopped using the client (a call may still be on its
     * way back to the thread, so this count is informational; ASan and TSan check the rest). */
    int done = 0;
    for (int i = 0; i < CLOSE_THREADS; i++)
        done += atomic_load(&calls[i].done);
    int cancelled = 0;
    for (int i = 0; i < CLOSE_THREADS; i++) {
        pthread_join(th[i], NULL);
        cancelled += calls[i].rc == -CHARTER_CANCELLED;
    }
    printf("    close with %d calls in flight (%s): %d returned before close did, %d CANCELLED, "
           "close took %lld ms\n",
           CLOSE_THREADS, what, done, cancelled, took);
    /* CANCELLED, not DEADLINE_EXCEEDED: close ended them rather than waiting out their 10 s. */
    CU_ASSERT_EQUAL(cancelled, CLOSE_THREADS);
}

static void test_close_with_calls_in_flight_cancels_them_and_waits_for_them(void)
{
    printf("\n");
    /* Nothing listens there: every call waits for a connection. */
    close_with_calls_in_flight("tcp://127.0.0.1:9", "no connection");
    /* Sent and waiting for answers the paused database holds back. */
    CU_ASSERT_EQUAL_FATAL(harness_redis_pause(3000), 0);
    close_with_calls_in_flight(dl_daemon.tcp_url, "answers pending");
    harness_redis_unpause();
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test nul_tests[] = {
    HARNESS_TEST(test_run_id_with_nul_is_invalid_argument_not_the_run_before_it),
    HARNESS_TEST(test_invocation_ids_differing_after_a_nul_are_refused_and_write_nothing),
    HARNESS_TEST(test_title_and_content_with_nul_are_refused_not_shortened),
    HARNESS_TEST(test_token_followed_by_nul_and_junk_is_unauthenticated),
    HARNESS_TEST(test_method_or_metadata_with_nul_is_invalid_argument),
    HARNESS_TEST(test_bearer_scheme_is_case_insensitive_and_the_token_is_not),
    HARNESS_TEST(test_trace_says_when_the_ancestry_was_truncated),
    HARNESS_TEST(test_tampered_stored_workflow_is_named_as_altered),
};
static const harness_test dl_tests[] = {
    HARNESS_TEST(test_read_with_the_database_paused_is_deadline_exceeded_by_the_deadline),
    HARNESS_TEST(test_delivery_with_writes_paused_is_answered_within_its_deadline),
    HARNESS_TEST(test_delivery_whose_commit_went_unanswered_never_claims_no_effect),
    HARNESS_TEST(test_callers_arriving_during_shutdown_get_unavailable_shutting_down),
    HARNESS_TEST(test_large_frames_with_workers_stalled_keep_memory_bounded),
    HARNESS_TEST(test_garbage_flood_writes_a_bounded_number_of_log_lines),
    HARNESS_TEST(test_close_with_calls_in_flight_cancels_them_and_waits_for_them),
};
static const harness_suite suites[] = {
    {"NUL bytes, the Bearer scheme, truncation and tampering", nul_init, nul_cleanup,
     HARNESS_TABLE(nul_tests)},
    {"deadlines, shutdown, floods and closing, on a private Redis", dl_init, dl_cleanup,
     HARNESS_TABLE(dl_tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
