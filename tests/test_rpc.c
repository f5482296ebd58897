/*
 * test_rpc.c - charterd's RPC surface against bad input, bad credentials and process events,
 * with a real charterd process and a real Redis.
 *
 * Every refused call must leave the service answering Health and the graph exactly as it was
 * (same digest of every key). Startup failures must be one line and a non-zero exit; SIGTERM
 * must let a call in flight get its reply; the embedded database must live and die with
 * charterd.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <CUnit/Basic.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <ftw.h>
#include <nng/nng.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "charter.pb-c.h"
#include "harness.h"
#include "suite.h"

#define REVOKE "/charter.v1.Grants/RevokeGrant"
#define RESTORE "/charter.v1.Grants/RestoreGrants"
#define SHOW_CHAIN "/charter.v1.Grants/ShowChain"
#define GET_RUN "/charter.v1.Runs/GetRun"
#define MAX_MESSAGE ((size_t)4 * 1024 * 1024) /* charterd's default --max-message */

static char graph[64];
static store *graph_store;
static harness_charterd server;
static char baseline[65];

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The service still answers and nothing in the graph changed since the baseline. */
static void assert_unchanged(void)
{
    CU_ASSERT_EQUAL(harness_health(server.tcp_url, 3000, NULL), 0);
    char now[65];
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(graph, now), 0);
    CU_ASSERT_STRING_EQUAL(now, baseline);
}

static int call_revoke(const char *token, const char *grant_id, harness_response *r)
{
    Charter__V1__RevokeGrantRequest rq = CHARTER__V1__REVOKE_GRANT_REQUEST__INIT;
    rq.grant_id = (char *)grant_id;
    return harness_rpc_msg(server.tcp_url, REVOKE, token, &rq.base, 3000, r);
}

static int call_show_chain_at(const char *url, const char *grant_id, harness_response *r)
{
    Charter__V1__ShowChainRequest rq = CHARTER__V1__SHOW_CHAIN_REQUEST__INIT;
    rq.grant_id = (char *)grant_id;
    return harness_rpc_msg(url, SHOW_CHAIN, HARNESS_OPERATOR_TOKEN, &rq.base, 3000, r);
}

static int call_show_chain(const char *token, const char *grant_id, harness_response *r)
{
    Charter__V1__ShowChainRequest rq = CHARTER__V1__SHOW_CHAIN_REQUEST__INIT;
    rq.grant_id = (char *)grant_id;
    return harness_rpc_msg(server.tcp_url, SHOW_CHAIN, token, &rq.base, 3000, r);
}

/* --- suite: a running charterd ----------------------------------------------------------- */

static int rpc_init(void)
{
    harness_graph_name(graph, sizeof graph, "rpc");
    graph_store = harness_store_open(graph);
    harness_charterd_opts o = {.graph = graph};
    if (harness_charterd_start(&o, &server) != 0) {
        return -1;
    }
    return harness_graph_digest(graph, baseline);
}

static int rpc_cleanup(void)
{
    if (server.pid > 0) {
        harness_charterd_kill(&server);
    }
    store_close(graph_store);
    harness_graph_drop(graph);
    return 0;
}

static void test_health_answers_without_token(void)
{
    Charter__V1__HealthResponse *h = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_health(server.tcp_url, 3000, &h), 0);
    CU_ASSERT_STRING_EQUAL(h->status, "serving");
    CU_ASSERT_STRING_EQUAL(h->database, "up");
    CU_ASSERT_STRING_EQUAL(h->library_version, STORE_LIBRARY_VERSION);
    CU_ASSERT_STRING_EQUAL(h->graph, graph);
    CU_ASSERT_TRUE(h->workers >= 1);
    CU_ASSERT_TRUE(strlen(h->version) > 0);
    charter__v1__health_response__free_unpacked(h, NULL);
}

static void test_health_answers_over_ipc_with_socket_mode_0600(void)
{
    CU_ASSERT_EQUAL(harness_health(server.ipc_url, 3000, NULL), 0);
    struct stat sb;
    CU_ASSERT_EQUAL_FATAL(stat(server.ipc_url + strlen("ipc://"), &sb), 0);
    CU_ASSERT_TRUE(S_ISSOCK(sb.st_mode));
    CU_ASSERT_EQUAL(sb.st_mode & 0777, 0600);
}

static void test_truncated_envelope_is_invalid_argument(void)
{
    Charter__V1__RpcRequest rq = CHARTER__V1__RPC_REQUEST__INIT;
    rq.method = REVOKE;
    uint8_t buf[256];
    size_t n = charter__v1__rpc_request__pack(&rq, buf);
    CU_ASSERT_TRUE_FATAL(n > 8);
    harness_response r;
    /* Cut inside the method string: its length prefix promises more bytes than arrive. */
    CU_ASSERT_EQUAL_FATAL(harness_rpc_raw(server.tcp_url, buf, 6, 3000, &r), 0);
    CU_ASSERT_EQUAL(r.code, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "RpcRequest"));
    CU_ASSERT_EQUAL(r.payload_len, 0);
    harness_response_free(&r);
    assert_unchanged();
}

static void test_truncated_payload_is_invalid_argument_naming_the_type(void)
{
    /* RevokeGrantRequest{grant_id = <16 bytes promised, 2 sent>} */
    static const uint8_t payload[] = {0x0a, 0x10, 'g', '_'};
    harness_response r;
    CU_ASSERT_EQUAL_FATAL(harness_rpc(server.tcp_url, REVOKE, HARNESS_OPERATOR_TOKEN, payload,
                                      sizeof payload, 3000, &r),
                          0);
    CU_ASSERT_EQUAL(r.code, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "cannot decode charter.v1.RevokeGrantRequest"));
    harness_response_free(&r);
    assert_unchanged();
}

static void test_random_garbage_is_invalid_argument(void)
{
    uint8_t junk[512];
    for (int round = 0; round < 8; round++) {
        /* Deterministic bytes; the first is field 1 with wire type 7, which does not exist, so
         * no seed can make this a valid envelope. */
        unsigned state = 12345u + (unsigned)round;
        for (size_t i = 0; i < sizeof junk; i++) {
            state = state * 1103515245u + 12345u;
            junk[i] = (uint8_t)(state >> 16);
        }
        junk[0] = 0x0f;
        harness_response r;
        CU_ASSERT_EQUAL_FATAL(harness_rpc_raw(server.tcp_url, junk, sizeof junk, 3000, &r), 0);
        CU_ASSERT_EQUAL(r.code, 3);
        harness_response_free(&r);
    }
    assert_unchanged();
}

static void test_empty_envelope_is_unimplemented(void)
{
    harness_response r;
    CU_ASSERT_EQUAL_FATAL(harness_rpc_raw(server.tcp_url, "", 0, 3000, &r), 0);
    CU_ASSERT_EQUAL(r.code, 12);
    harness_response_free(&r);
    assert_unchanged();
}

static void test_unknown_method_is_unimplemented_with_its_name(void)
{
    static const char *const methods[] = {
        "/charter.v1.Runs/Explode",  "/charter.v1.Nope/Check",   "charter.v1.Health/Check",
        "/charter.v1.Health/Check/", "/charter.v2.Health/Check", "",
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        harness_response r;
        CU_ASSERT_EQUAL_FATAL(
            harness_rpc(server.tcp_url, methods[i], HARNESS_OPERATOR_TOKEN, NULL, 0, 3000, &r), 0);
        CU_ASSERT_EQUAL(r.code, 12);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.message, methods[i]));
        harness_response_free(&r);
    }
    assert_unchanged();
}

static void test_missing_token_is_unauthenticated(void)
{
    harness_response r;
    CU_ASSERT_EQUAL_FATAL(call_revoke(NULL, "g_reporter", &r), 0);
    CU_ASSERT_EQUAL(r.code, 16);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "authorization"));
    harness_response_free(&r);
    assert_unchanged();
}

static void test_wrong_token_is_unauthenticated(void)
{
    static const char *const tokens[] = {
        "not-the-operator-token-at-all-000000",
        HARNESS_OPERATOR_TOKEN "x",
        "test-operator-token-6c1f0e2a9b7d4e5", /* one character short */
        "",
    };
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
        harness_response r;
        CU_ASSERT_EQUAL_FATAL(call_revoke(tokens[i], "g_reporter", &r), 0);
        CU_ASSERT_EQUAL(r.code, 16);
        harness_response_free(&r);
    }
    /* The right token under another scheme is not a bearer token. */
    Charter__V1__RevokeGrantRequest rq = CHARTER__V1__REVOKE_GRANT_REQUEST__INIT;
    rq.grant_id = "g_reporter";
    uint8_t payload[64];
    size_t plen = charter__v1__revoke_grant_request__pack(&rq, payload);
    Charter__V1__RpcRequest env = CHARTER__V1__RPC_REQUEST__INIT;
    Charter__V1__RpcRequest__MetadataEntry e = CHARTER__V1__RPC_REQUEST__METADATA_ENTRY__INIT;
    Charter__V1__RpcRequest__MetadataEntry *entries[] = {&e};
    e.key = "authorization";
    e.value = "Basic " HARNESS_OPERATOR_TOKEN;
    env.method = REVOKE;
    env.payload.data = payload;
    env.payload.len = plen;
    env.metadata = entries;
    env.n_metadata = 1;
    uint8_t buf[256];
    size_t n = charter__v1__rpc_request__pack(&env, buf);
    harness_response r;
    CU_ASSERT_EQUAL_FATAL(harness_rpc_raw(server.tcp_url, buf, n, 3000, &r), 0);
    CU_ASSERT_EQUAL(r.code, 16);
    harness_response_free(&r);
    assert_unchanged();
}

static void test_viewer_token_cannot_write(void)
{
    harness_response r;
    CU_ASSERT_EQUAL_FATAL(call_revoke(HARNESS_VIEWER_TOKEN, "g_reporter", &r), 0);
    CU_ASSERT_EQUAL(r.code, 7);
    harness_response_free(&r);

    Charter__V1__RestoreGrantsRequest rq = CHARTER__V1__RESTORE_GRANTS_REQUEST__INIT;
    CU_ASSERT_EQUAL_FATAL(
        harness_rpc_msg(server.tcp_url, RESTORE, HARNESS_VIEWER_TOKEN, &rq.base, 3000, &r), 0);
    CU_ASSERT_EQUAL(r.code, 7);
    harness_response_free(&r);
    assert_unchanged();
}

/* An envelope of exactly total bytes: a method and a payload of filler. */
static uint8_t *big_envelope(size_t total, size_t *len)
{
    size_t payload = total - 64;
    uint8_t *filler = malloc(payload);
    if (filler == NULL) {
        return NULL;
    }
    memset(filler, 'x', payload);
    Charter__V1__RpcRequest rq = CHARTER__V1__RPC_REQUEST__INIT;
    rq.method = REVOKE;
    rq.payload.data = filler;
    rq.payload.len = payload;
    size_t n = charter__v1__rpc_request__get_packed_size(&rq);
    uint8_t *buf = malloc(n);
    if (buf != NULL) {
        *len = charter__v1__rpc_request__pack(&rq, buf);
    }
    free(filler);
    return buf;
}

static void test_oversized_request_is_resource_exhausted(void)
{
    size_t len = 0;
    uint8_t *buf = big_envelope(MAX_MESSAGE + 1024, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    CU_ASSERT_TRUE(len > MAX_MESSAGE);
    harness_response r;
    CU_ASSERT_EQUAL_FATAL(harness_rpc_raw(server.tcp_url, buf, len, 5000, &r), 0);
    CU_ASSERT_EQUAL(r.code, 8);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "exceeds"));
    harness_response_free(&r);
    free(buf);
    assert_unchanged();
}

/* In a child process (see setup): sends an envelope of total bytes to url and exits with the
 * NNG result of waiting 1500 ms for the reply, without closing anything. */
static int send_oversized_and_exit(const char *url, size_t total)
{
    size_t len = 0;
    uint8_t *buf = big_envelope(total, &len);
    if (buf == NULL) {
        _exit(100);
    }
    harness_response r;
    int rv = harness_rpc_raw(url, buf, len, 1500, &r);
    _exit(rv > 99 ? 99 : rv);
}

static void test_far_oversized_request_drops_the_connection_and_service_goes_on(void)
{
    /* Above --max-message + 64 KiB NNG refuses to read the message at all: the connection is
     * closed and the caller never gets a reply. The caller runs in its own process because
     * NNG 1.5.2's reaper can hang in a process whose large send was cut off. */
    char size[32];
    snprintf(size, sizeof size, "%zu", 2 * MAX_MESSAGE + 4096);
    char *const argv[] = {"/proc/self/exe", "--send-oversized", server.tcp_url, size, NULL};
    extern char **environ;
    pid_t pid = fork();
    if (pid == 0) {
        execve("/proc/self/exe", argv, environ);
        _exit(101);
    }
    CU_ASSERT_TRUE_FATAL(pid > 0);
    int status = -1;
    for (int i = 0; i < 200; i++) { /* at most 10 s */
        if (waitpid(pid, &status, WNOHANG) == pid) {
            break;
        }
        status = -1;
        usleep(50 * 1000);
    }
    if (status == -1) {
        /* The sender itself hung in NNG 1.5.2's reaper after its large send was cut off (the
         * client-side bug this runs in a child for); what this test is about is the server,
         * checked below: it still answers and nothing changed. */
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fprintf(stderr, "    (the oversized sender hung in NNG's reaper and was killed)\n");
    } else {
        CU_ASSERT_TRUE(WIFEXITED(status));
        CU_ASSERT_EQUAL(WEXITSTATUS(status), NNG_ETIMEDOUT);
    }
    assert_unchanged();
}

static void test_unknown_ids_are_not_found(void)
{
    harness_response r;
    CU_ASSERT_EQUAL_FATAL(call_revoke(HARNESS_OPERATOR_TOKEN, "g_nonexistent", &r), 0);
    CU_ASSERT_EQUAL(r.code, 5);
    harness_response_free(&r);

    CU_ASSERT_EQUAL_FATAL(call_show_chain(HARNESS_OPERATOR_TOKEN, "g_nonexistent", &r), 0);
    CU_ASSERT_EQUAL(r.code, 5);
    harness_response_free(&r);

    Charter__V1__GetRunRequest rq = CHARTER__V1__GET_RUN_REQUEST__INIT;
    rq.run_id = "r_nonexistent";
    CU_ASSERT_EQUAL_FATAL(
        harness_rpc_msg(server.tcp_url, GET_RUN, HARNESS_OPERATOR_TOKEN, &rq.base, 3000, &r), 0);
    CU_ASSERT_EQUAL(r.code, 5);
    harness_response_free(&r);
    assert_unchanged();
}

static void test_bad_id_characters_are_invalid_argument(void)
{
    char long_id[130];
    memset(long_id, 'a', 129);
    long_id[129] = '\0';
    static const char *const fixed[] = {"g root", "g/../g_root", "", "g_root*", "g\xc3\xa9"};
    const char *ids[6];
    for (size_t i = 0; i < 5; i++) {
        ids[i] = fixed[i];
    }
    ids[5] = long_id;
    for (size_t i = 0; i < 6; i++) {
        harness_response r;
        CU_ASSERT_EQUAL_FATAL(call_revoke(HARNESS_OPERATOR_TOKEN, ids[i], &r), 0);
        CU_ASSERT_EQUAL(r.code, 3);
        harness_response_free(&r);
        CU_ASSERT_EQUAL_FATAL(call_show_chain(HARNESS_VIEWER_TOKEN, ids[i], &r), 0);
        CU_ASSERT_EQUAL(r.code, 3);
        harness_response_free(&r);
    }
    Charter__V1__GetRunRequest rq = CHARTER__V1__GET_RUN_REQUEST__INIT;
    rq.run_id = "r*1";
    harness_response r;
    CU_ASSERT_EQUAL_FATAL(
        harness_rpc_msg(server.tcp_url, GET_RUN, HARNESS_OPERATOR_TOKEN, &rq.base, 3000, &r), 0);
    CU_ASSERT_EQUAL(r.code, 3);
    harness_response_free(&r);
    assert_unchanged();
}

static Charter__V1__GrantChain *show_chain_ok(const char *token, const char *grant_id)
{
    harness_response r;
    if (call_show_chain(token, grant_id, &r) != 0) {
        return NULL;
    }
    Charter__V1__GrantChain *gc = NULL;
    CU_ASSERT_EQUAL(r.code, 0);
    if (r.code == 0) {
        gc = charter__v1__grant_chain__unpack(NULL, r.payload_len, r.payload);
    }
    harness_response_free(&r);
    return gc;
}

static void test_viewer_sees_chain_leaf_first_and_allowed(void)
{
    Charter__V1__GrantChain *gc = show_chain_ok(HARNESS_VIEWER_TOKEN, "g_reporter");
    CU_ASSERT_PTR_NOT_NULL_FATAL(gc);
    CU_ASSERT_EQUAL_FATAL(gc->n_grants, 3);
    CU_ASSERT_STRING_EQUAL(gc->grants[0]->id, "g_reporter");
    CU_ASSERT_STRING_EQUAL(gc->grants[1]->id, "g_analyst");
    CU_ASSERT_STRING_EQUAL(gc->grants[2]->id, "g_root");
    CU_ASSERT_TRUE(gc->grants[2]->root);
    CU_ASSERT_FALSE(gc->grants[0]->root);
    CU_ASSERT_EQUAL_FATAL(gc->grants[0]->n_tools, 1);
    CU_ASSERT_STRING_EQUAL(gc->grants[0]->tools[0], "deliver_public");
    CU_ASSERT_EQUAL_FATAL(gc->grants[0]->n_grantees, 1);
    CU_ASSERT_STRING_EQUAL(gc->grants[0]->grantees[0], "reporter");
    CU_ASSERT_EQUAL_FATAL(gc->grants[0]->n_parents, 1);
    CU_ASSERT_STRING_EQUAL(gc->grants[0]->parents[0], "g_analyst");
    CU_ASSERT_EQUAL(gc->grants[0]->revoked_at, 0);
    CU_ASSERT_TRUE(gc->grants[0]->valid_to > gc->grants[0]->valid_from);
    CU_ASSERT_PTR_NOT_NULL_FATAL(gc->decision);
    CU_ASSERT_EQUAL(gc->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_EQUAL(gc->decision->n_codes, 0);
    charter__v1__grant_chain__free_unpacked(gc, NULL);
    assert_unchanged();
}

static void test_revoke_denies_the_chain_and_restore_allows_it_again(void)
{
    harness_response r;
    CU_ASSERT_EQUAL_FATAL(call_revoke(HARNESS_OPERATOR_TOKEN, "g_research", &r), 0);
    CU_ASSERT_EQUAL_FATAL(r.code, 0);
    Charter__V1__Grant *g = charter__v1__grant__unpack(NULL, r.payload_len, r.payload);
    harness_response_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_STRING_EQUAL(g->id, "g_research");
    CU_ASSERT_TRUE(g->revoked_at > 0);
    charter__v1__grant__free_unpacked(g, NULL);

    Charter__V1__GrantChain *gc = show_chain_ok(HARNESS_OPERATOR_TOKEN, "g_research");
    CU_ASSERT_PTR_NOT_NULL_FATAL(gc);
    CU_ASSERT_EQUAL(gc->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_EQUAL_FATAL(gc->decision->n_codes, 1);
    CU_ASSERT_STRING_EQUAL(gc->decision->codes[0], "GRANT_INVALID");
    /* RULE-CHAIN-REVOCATION, judged by the chain gate (gates/chain.c) as a delivery would be. */
    CU_ASSERT_STRING_EQUAL(gc->decision->witness, "g_research revoked");
    CU_ASSERT_TRUE(gc->grants[0]->revoked_at > 0);
    charter__v1__grant_chain__free_unpacked(gc, NULL);

    Charter__V1__RestoreGrantsRequest rq = CHARTER__V1__RESTORE_GRANTS_REQUEST__INIT;
    rq.grant_id = "g_research";
    CU_ASSERT_EQUAL_FATAL(
        harness_rpc_msg(server.tcp_url, RESTORE, HARNESS_OPERATOR_TOKEN, &rq.base, 3000, &r), 0);
    CU_ASSERT_EQUAL_FATAL(r.code, 0);
    Charter__V1__RestoreGrantsResponse *rr =
        charter__v1__restore_grants_response__unpack(NULL, r.payload_len, r.payload);
    harness_response_free(&r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rr);
    CU_ASSERT_EQUAL_FATAL(rr->n_restored, 1);
    CU_ASSERT_STRING_EQUAL(rr->restored[0], "g_research");
    charter__v1__restore_grants_response__free_unpacked(rr, NULL);

    gc = show_chain_ok(HARNESS_OPERATOR_TOKEN, "g_research");
    CU_ASSERT_PTR_NOT_NULL_FATAL(gc);
    CU_ASSERT_EQUAL(gc->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_EQUAL(gc->grants[0]->revoked_at, 0);
    charter__v1__grant_chain__free_unpacked(gc, NULL);
    /* Later tests compare against the graph as it is now. */
    CU_ASSERT_EQUAL(harness_graph_digest(graph, baseline), 0);
}

static void test_sigterm_stops_with_exit_0(void)
{
    CU_ASSERT_EQUAL(harness_charterd_stop(&server), 0);
    /* Nothing listens any more. */
    harness_response r;
    CU_ASSERT_NOT_EQUAL(harness_rpc(server.tcp_url, HARNESS_HEALTH, NULL, NULL, 0, 500, &r), 0);
}

/* --- suite: startup failures ------------------------------------------------------------- */

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++) {
        n += (*s == '\n');
    }
    return n;
}

static void test_startup_without_operator_token_is_one_line(void)
{
    const char *args[] = {"--redis", harness_redis_url(), "--listen", "tcp://127.0.0.1:1"};
    const char *env[] = {NULL};
    char out[2048];
    int status = harness_charterd_run(args, 4, env, 10000, out, sizeof out);
    CU_ASSERT_NOT_EQUAL(status, 0);
    CU_ASSERT_TRUE(status > 0);
    CU_ASSERT_EQUAL(count_lines(out), 1);
    CU_ASSERT_EQUAL(strncmp(out, "charterd: ", 10), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "CHARTER_OPERATOR_TOKEN"));
}

static void test_startup_with_short_or_shared_tokens_is_refused(void)
{
    const char *args[] = {"--redis", harness_redis_url(), "--listen", "tcp://127.0.0.1:1"};
    const char *short_env[] = {"CHARTER_OPERATOR_TOKEN=short", NULL};
    const char *same_env[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN,
                              "CHARTER_VIEWER_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    char out[2048];
    CU_ASSERT_NOT_EQUAL(harness_charterd_run(args, 4, short_env, 10000, out, sizeof out), 0);
    CU_ASSERT_EQUAL(count_lines(out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "24"));
    CU_ASSERT_NOT_EQUAL(harness_charterd_run(args, 4, same_env, 10000, out, sizeof out), 0);
    CU_ASSERT_EQUAL(count_lines(out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "CHARTER_VIEWER_TOKEN"));
}

static void test_startup_with_unreachable_redis_is_one_line(void)
{
    const char *args[] = {"--redis", "unix:///nonexistent/redis.sock", "--listen",
                          "tcp://127.0.0.1:1"};
    const char *env[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    char out[2048];
    int status = harness_charterd_run(args, 4, env, 10000, out, sizeof out);
    CU_ASSERT_TRUE(status > 0);
    CU_ASSERT_EQUAL(count_lines(out), 1);
    CU_ASSERT_EQUAL(strncmp(out, "charterd: ", 10), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "Redis"));
}

static void test_unknown_option_is_one_line(void)
{
    const char *args[] = {"--workers", "zero"};
    const char *env[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    char out[2048];
    CU_ASSERT_EQUAL(harness_charterd_run(args, 2, env, 10000, out, sizeof out), 2);
    CU_ASSERT_EQUAL(count_lines(out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--workers"));
    /* A graph named as a folder or its parent would put its archives outside its own. */
    const char *dots[][2] = {{"--graph", "."}, {"--graph", ".."}};
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(harness_charterd_run(dots[i], 2, env, 10000, out, sizeof out), 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "not . or .."));
    }
}

static void test_help_and_version_exit_0(void)
{
    const char *help[] = {"--help"};
    const char *version[] = {"--version"};
    const char *env[] = {NULL};
    char out[4096];
    CU_ASSERT_EQUAL(harness_charterd_run(help, 1, env, 10000, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: charterd"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--listen"));
    CU_ASSERT_EQUAL(harness_charterd_run(version, 1, env, 10000, out, sizeof out), 0);
    CU_ASSERT_EQUAL(strncmp(out, "charterd ", 9), 0);
}

/* --- suite: one worker, no queue: back-pressure and shutdown ----------------------------- */

static char limits_graph[64];
static store *limits_store;
static harness_charterd limits_server;

typedef struct {
    const char *url;
    int rv;
    int code;
} slow_call;

/* A write (CreateRun of an external run) whose deadline outlasts any pause the tests make: it
 * is held by CLIENT PAUSE WRITE until the test ends the pause. */
static void *slow_write(void *arg)
{
    slow_call *sc = arg;
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "external";
    harness_response r;
    sc->rv = harness_rpc_deadline(sc->url, "/charter.v1.Runs/CreateRun", HARNESS_OPERATOR_TOKEN,
                                  &req.base, 60000, 30000, &r);
    if (sc->rv == 0) {
        sc->code = r.code;
        harness_response_free(&r);
    }
    return NULL;
}

/* The suite pauses the database: on a redis-server of its own (harness_suite_redis_start). */
static harness_private_redis limits_redis;

/* Waits (at most limit_ms) until the suite's Redis holds back an FCALL under CLIENT PAUSE
 * WRITE (CLIENT LIST flag b): the one worker is inside the slow call. charterd runs no
 * executor here, so no other client of it writes. */
static bool worker_held(int limit_ms)
{
    redisContext *rc = redisConnectUnix(limits_redis.sock);
    bool held = false;
    long long until = now_ms() + limit_ms;
    while (rc != NULL && rc->err == 0 && !held && now_ms() < until) {
        redisReply *r = redisCommand(rc, "CLIENT LIST");
        for (const char *l = r && r->type == REDIS_REPLY_STRING ? r->str : NULL; l && !held;
             l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
            const char *f = strstr(l, " flags="), *e = strchr(l, '\n');
            const char *cmd = strstr(l, " cmd=fcall ");
            held = f && cmd && (!e || cmd < e) && (!e || f < e) &&
                   memchr(f + 7, 'b', strcspn(f + 7, " ")) != NULL;
        }
        if (r)
            freeReplyObject(r);
        if (!held)
            usleep(20 * 1000);
    }
    if (rc)
        redisFree(rc);
    return held;
}

static int limits_init(void)
{
    if (harness_suite_redis_start(&limits_redis) != 0)
        return -1;
    harness_graph_name(limits_graph, sizeof limits_graph, "rpc_limits");
    limits_store = harness_store_open(limits_graph);
    static const char *const extra[] = {"--workers", "1", "--queue", "0", "--runners", "0"};
    harness_charterd_opts o = {.graph = limits_graph, .extra_args = extra, .n_extra = 6};
    return harness_charterd_start(&o, &limits_server);
}

static int limits_cleanup(void)
{
    harness_redis_unpause();
    harness_charterd_kill(&limits_server);
    store_close(limits_store);
    harness_graph_drop(limits_graph);
    harness_suite_redis_stop(&limits_redis);
    return 0;
}

static void test_call_past_workers_and_queue_is_resource_exhausted(void)
{
    /* The only worker waits on the paused database (seen held there); a second call finds no
     * room and is refused, while the first is still held. */
    CU_ASSERT_EQUAL_FATAL(harness_redis_pause_writes(60000), 0); /* ended below */
    slow_call sc = {limits_server.tcp_url, -1, -1};
    pthread_t th;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, slow_write, &sc), 0);
    CU_ASSERT_TRUE(worker_held(20000));
    harness_response r;
    /* A call that needs a worker (Health is answered without one). */
    int rv = harness_rpc(limits_server.tcp_url, "/charter.v1.Workflows/ListWorkflows",
                         HARNESS_OPERATOR_TOKEN, NULL, 0, 5000, &r);
    CU_ASSERT_EQUAL(rv, 0);
    if (rv == 0) {
        CU_ASSERT_EQUAL(r.code, 8);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.message, "busy"));
        harness_response_free(&r);
    }
    CU_ASSERT_EQUAL(harness_redis_unpause(), 0);
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(sc.rv, 0);
    CU_ASSERT_EQUAL(sc.code, 0);
    CU_ASSERT_EQUAL(harness_health(limits_server.tcp_url, 3000, NULL), 0);
}

static void test_sigterm_during_a_slow_call_still_delivers_its_reply(void)
{
    CU_ASSERT_EQUAL_FATAL(harness_redis_pause_writes(60000), 0); /* ended below */
    slow_call sc = {limits_server.tcp_url, -1, -1};
    pthread_t th;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, slow_write, &sc), 0);
    CU_ASSERT_TRUE(worker_held(20000));
    CU_ASSERT_EQUAL(kill(limits_server.pid, SIGTERM), 0);
    /* charterd is stopping once a new caller is told so (before: "busy"); the pause ends
     * only then, so the held call is answered during the shutdown. */
    bool stopping = false;
    long long until = now_ms() + 20000;
    while (!stopping && now_ms() < until) {
        harness_response r;
        if (harness_rpc(limits_server.tcp_url, HARNESS_HEALTH, NULL, NULL, 0, 2000, &r) == 0) {
            stopping = r.code == 14 && strstr(r.message, "shutting down") != NULL;
            harness_response_free(&r);
        }
        if (!stopping)
            usleep(20 * 1000);
    }
    CU_ASSERT_TRUE(stopping);
    CU_ASSERT_EQUAL(harness_redis_unpause(), 0);
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(sc.rv, 0);
    CU_ASSERT_EQUAL(sc.code, 0);
    /* The second SIGTERM of stop is ignored by a charterd already stopping. */
    CU_ASSERT_EQUAL(harness_charterd_stop(&limits_server), 0);
}

/* --- suite: embedded database ------------------------------------------------------------ */

/* The pid of a redis-server whose parent is ppid, or 0. */
static pid_t redis_child_of(pid_t ppid)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ps -o pid=,comm= --ppid %ld 2>/dev/null", (long)ppid);
    FILE *f = popen(cmd, "r");
    if (f == NULL) {
        return 0;
    }
    long pid = 0;
    char comm[64];
    pid_t found = 0;
    while (fscanf(f, "%ld %63s", &pid, comm) == 2) {
        if (strcmp(comm, "redis-server") == 0) {
            found = (pid_t)pid;
        }
    }
    pclose(f);
    return found;
}

/* False once pid has exited (a zombie counts as exited: it runs no more). */
static bool process_alive(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return false;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')');
    return close_paren != NULL && close_paren[1] == ' ' && close_paren[2] != 'Z' &&
           close_paren[2] != 'X';
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Leaves a socket file with nobody listening, as a crashed redis-server would. */
static int make_stale_socket(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path) {
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
        return -1;
    }
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    close(fd);
    return rc;
}

static void test_embedded_database_lives_and_dies_with_charterd(void)
{
    char top[] = "/tmp/charter-emb-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(top));
    char data[128], sock[160];
    snprintf(data, sizeof data, "%s/var/charter", top);
    snprintf(sock, sizeof sock, "%s/redis.sock", data);
    char g[64];
    harness_graph_name(g, sizeof g, "rpc_embedded");

    for (int round = 0; round < 2; round++) {
        if (round == 1) {
            /* A crash left a stale socket, and someone loosened the folder's mode. */
            CU_ASSERT_EQUAL(make_stale_socket(sock), 0);
            CU_ASSERT_EQUAL(chmod(data, 0755), 0);
        }
        harness_charterd d;
        harness_charterd_opts o = {.graph = g, .embedded = true, .data_dir = data};
        CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
        struct stat sb;
        CU_ASSERT_EQUAL(stat(data, &sb), 0);
        CU_ASSERT_EQUAL(sb.st_mode & 0777, 0700);
        Charter__V1__HealthResponse *h = NULL;
        CU_ASSERT_EQUAL(harness_health(d.tcp_url, 3000, &h), 0);
        if (h != NULL) {
            CU_ASSERT_STRING_EQUAL(h->status, "serving");
            CU_ASSERT_STRING_EQUAL(h->database, "up");
            charter__v1__health_response__free_unpacked(h, NULL);
        }
        CU_ASSERT_EQUAL(stat(sock, &sb), 0);
        CU_ASSERT_TRUE(S_ISSOCK(sb.st_mode));
        pid_t redis = redis_child_of(d.pid);
        CU_ASSERT_TRUE(redis > 0);
        CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
        if (redis > 0) {
            CU_ASSERT_FALSE(process_alive(redis));
        }
        CU_ASSERT_NOT_EQUAL(stat(sock, &sb), 0); /* redis-server removed its socket */
    }
    char aof[192];
    snprintf(aof, sizeof aof, "%s/appendonlydir", data);
    struct stat sb;
    CU_ASSERT_EQUAL(stat(aof, &sb), 0); /* the append-only file is on */
    nftw(top, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_killed_charterd_takes_its_embedded_database_down(void)
{
    char top[] = "/tmp/charter-emb-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(top));
    char data[128];
    snprintf(data, sizeof data, "%s/data", top);
    char g[64];
    harness_graph_name(g, sizeof g, "rpc_embedded_kill");
    harness_charterd d;
    harness_charterd_opts o = {.graph = g, .embedded = true, .data_dir = data};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    pid_t redis = redis_child_of(d.pid);
    CU_ASSERT_TRUE_FATAL(redis > 0);
    harness_charterd_kill(&d);
    /* The parent-death signal stops the orphan; give it a moment to exit. */
    bool gone = false;
    for (int i = 0; i < 100 && !gone; i++) {
        gone = !process_alive(redis);
        if (!gone) {
            usleep(50 * 1000);
        }
    }
    CU_ASSERT_TRUE(gone);
    nftw(top, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static bool file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return false;
    }
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

static void test_death_of_the_embedded_database_is_logged_and_health_says_down(void)
{
    char top[] = "/tmp/charter-emb-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(top));
    char data[128];
    snprintf(data, sizeof data, "%s/data", top);
    char g[64];
    harness_graph_name(g, sizeof g, "rpc_embedded_death");
    harness_charterd d;
    harness_charterd_opts o = {.graph = g, .embedded = true, .data_dir = data};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    pid_t redis = redis_child_of(d.pid);
    CU_ASSERT_TRUE_FATAL(redis > 0);
    CU_ASSERT_EQUAL(kill(redis, SIGKILL), 0);
    bool logged = false;
    for (int i = 0; i < 60 && !logged; i++) { /* charterd looks once a second */
        usleep(100 * 1000);
        logged = file_contains(d.log_path, "embedded redis-server killed by signal 9");
    }
    CU_ASSERT_TRUE(logged);
    Charter__V1__HealthResponse *h = NULL;
    CU_ASSERT_EQUAL(harness_health_until(d.tcp_url, "down", 3000, &h), 0);
    if (h != NULL) {
        CU_ASSERT_STRING_EQUAL(h->status, "database_down");
        CU_ASSERT_STRING_EQUAL(h->database, "down");
        charter__v1__health_response__free_unpacked(h, NULL);
    }
    /* A call that needs the database fails as UNAVAILABLE, not as a crash or a hang. */
    harness_response r;
    CU_ASSERT_EQUAL_FATAL(call_show_chain_at(d.tcp_url, "g_root", &r), 0);
    CU_ASSERT_EQUAL(r.code, 14);
    harness_response_free(&r);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    nftw(top, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* --- registration ------------------------------------------------------------------------ */

/* test_far_oversized_request_drops_the_connection_and_service_goes_on runs this program again
 * as its caller: --send-oversized URL BYTES sends one envelope and exits, running no test. */
static int setup(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--send-oversized") == 0)
        exit(send_oversized_and_exit(argv[2], (size_t)strtoull(argv[3], NULL, 10)));
    return 0;
}

static const harness_test startup_tests[] = {
    {"startup without operator token is one line", test_startup_without_operator_token_is_one_line},
    {"startup with short or shared tokens is refused",
     test_startup_with_short_or_shared_tokens_is_refused},
    {"startup with unreachable redis is one line", test_startup_with_unreachable_redis_is_one_line},
    {"unknown option is one line", test_unknown_option_is_one_line},
    {"help and version exit 0", test_help_and_version_exit_0},
};
static const harness_test rpc_tests[] = {
    {"health answers without token", test_health_answers_without_token},
    {"health answers over ipc, socket mode 0600",
     test_health_answers_over_ipc_with_socket_mode_0600},
    {"truncated envelope is INVALID_ARGUMENT", test_truncated_envelope_is_invalid_argument},
    {"truncated payload is INVALID_ARGUMENT naming the type",
     test_truncated_payload_is_invalid_argument_naming_the_type},
    {"random garbage is INVALID_ARGUMENT", test_random_garbage_is_invalid_argument},
    {"empty envelope is UNIMPLEMENTED", test_empty_envelope_is_unimplemented},
    {"unknown method is UNIMPLEMENTED with its name",
     test_unknown_method_is_unimplemented_with_its_name},
    {"missing token is UNAUTHENTICATED", test_missing_token_is_unauthenticated},
    {"wrong token is UNAUTHENTICATED", test_wrong_token_is_unauthenticated},
    {"viewer token cannot write", test_viewer_token_cannot_write},
    {"oversized request is RESOURCE_EXHAUSTED", test_oversized_request_is_resource_exhausted},
    {"far oversized request drops the connection, service goes on",
     test_far_oversized_request_drops_the_connection_and_service_goes_on},
    {"unknown ids are NOT_FOUND", test_unknown_ids_are_not_found},
    {"bad id characters are INVALID_ARGUMENT", test_bad_id_characters_are_invalid_argument},
    {"viewer sees chain leaf first and allowed", test_viewer_sees_chain_leaf_first_and_allowed},
    {"revoke denies the chain, restore allows it again",
     test_revoke_denies_the_chain_and_restore_allows_it_again},
    {"SIGTERM stops with exit 0", test_sigterm_stops_with_exit_0},
};
static const harness_test limits_tests[] = {
    {"call past workers and queue is RESOURCE_EXHAUSTED",
     test_call_past_workers_and_queue_is_resource_exhausted},
    {"SIGTERM during a slow call still delivers its reply",
     test_sigterm_during_a_slow_call_still_delivers_its_reply},
};
static const harness_test embedded_tests[] = {
    {"embedded database lives and dies with charterd",
     test_embedded_database_lives_and_dies_with_charterd},
    {"killed charterd takes its embedded database down",
     test_killed_charterd_takes_its_embedded_database_down},
    {"death of the embedded database is logged, health says down",
     test_death_of_the_embedded_database_is_logged_and_health_says_down},
};
static const harness_suite suites[] = {
    {"startup", NULL, NULL, HARNESS_TABLE(startup_tests)},
    {"rpc", rpc_init, rpc_cleanup, HARNESS_TABLE(rpc_tests)},
    {"limits", limits_init, limits_cleanup, HARNESS_TABLE(limits_tests)},
    {"embedded", NULL, NULL, HARNESS_TABLE(embedded_tests)},
};

/* needs_redis: fail loudly before anything else when the test Redis is missing. */
const harness_program harness_tests = {HARNESS_SUITES(suites), .setup = setup, .needs_redis = true};
