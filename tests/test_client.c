/*
 * test_client.c - libcharter without charterd.
 *
 * The pure parts (status names, URL and option checks) are checked on hand-built values (the
 * JSON form of messages, which the CLI prints through proto/protojson.c, is test_protojson's). The
 * transport is checked against a real NNG rep0 peer run inside this process on an ipc:// socket in
 * a private temporary folder: it answers each RpcRequest with something taken from that request, so
 * every caller can tell its own answer.
 */
#include <CUnit/Basic.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "charter.h"
#include "suite.h"

#define RESPONDER_WORKERS 4
#define CALL_THREADS 32
#define CALLS_PER_THREAD 200

/* ---- helpers ------------------------------------------------------------------------------ */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static char tmpdir[64];

/* A url for an ipc socket named name inside the test's temporary folder. */
static void ipc_url(const char *name, char *url, size_t size)
{
    snprintf(url, size, "ipc://%s/%s", tmpdir, name);
}

/* ---- the responder: a real NNG rep0 peer -------------------------------------------------- */

typedef struct {
    nng_socket sock;
    pthread_t threads[RESPONDER_WORKERS];
    int n_threads;
    char url[128];
    atomic_int served;
} responder;

static const char *metadata_value(const Charter__V1__RpcRequest *req, const char *key)
{
    for (size_t i = 0; i < req->n_metadata; i++)
        if (strcmp(req->metadata[i]->key, key) == 0)
            return req->metadata[i]->value;
    return "";
}

/* Packs RpcResponse{code, message, payload} into a new NNG message, or NULL. */
static nng_msg *envelope(int32_t code, const char *message, const ProtobufCMessage *payload)
{
    Charter__V1__RpcResponse resp = CHARTER__V1__RPC_RESPONSE__INIT;
    uint8_t *buf = NULL;
    nng_msg *msg = NULL;

    resp.code = code;
    resp.message = (char *)message;
    if (payload != NULL) {
        size_t n = protobuf_c_message_get_packed_size(payload);
        if ((buf = malloc(n > 0 ? n : 1)) == NULL)
            return NULL;
        protobuf_c_message_pack(payload, buf);
        resp.payload.data = buf;
        resp.payload.len = n;
    }
    size_t len = protobuf_c_message_get_packed_size(&resp.base);
    if (nng_msg_alloc(&msg, len) == 0)
        protobuf_c_message_pack(&resp.base, nng_msg_body(msg));
    free(buf);
    return msg;
}

/* The answer to one request, or NULL to stay silent. Methods:
 *   Runs/GetRun      RunView{run{id = run_id, seq = after_seq, task = authorization}}
 *   Health/Check and Test/Echo-*   HealthResponse{status = method, database = authorization,
 *                    workers = timeout_ms}
 *   Test/Silent      no answer;  Test/Hangup  closes the caller's connection
 *   Test/Garbage     code 0 with a payload that is no HealthResponse
 *   Test/NotEnvelope bytes that are no RpcResponse;  Test/Negative  code -1
 *   Test/Quit        code 0, and *quit is set: the worker leaves once it has answered
 *   anything else    NOT_FOUND with the method as the message */
static nng_msg *responder_answer(nng_msg *in, bool *quit)
{
    Charter__V1__RpcRequest *req =
        charter__v1__rpc_request__unpack(NULL, nng_msg_len(in), nng_msg_body(in));
    nng_msg *out = NULL;

    if (req == NULL)
        return envelope(CHARTER_INVALID_ARGUMENT, "not an RpcRequest", NULL);
    const char *auth = metadata_value(req, "authorization");
    if (strcmp(req->method, "/charter.v1.Runs/GetRun") == 0) {
        Charter__V1__GetRunRequest *g =
            charter__v1__get_run_request__unpack(NULL, req->payload.len, req->payload.data);
        if (g != NULL) {
            Charter__V1__Run run = CHARTER__V1__RUN__INIT;
            Charter__V1__RunView view = CHARTER__V1__RUN_VIEW__INIT;
            run.id = g->run_id;
            run.seq = g->after_seq;
            run.task = (char *)auth;
            view.run = &run;
            out = envelope(0, "", &view.base);
            charter__v1__get_run_request__free_unpacked(g, NULL);
        }
    } else if (strcmp(req->method, "/charter.v1.Health/Check") == 0 ||
               strncmp(req->method, "/charter.v1.Test/Echo-", 22) == 0) {
        Charter__V1__HealthResponse h = CHARTER__V1__HEALTH_RESPONSE__INIT;
        h.status = req->method;
        h.database = (char *)auth;
        h.workers = req->timeout_ms;
        out = envelope(0, "", &h.base);
    } else if (strcmp(req->method, "/charter.v1.Test/Silent") == 0) {
        out = NULL;
    } else if (strcmp(req->method, "/charter.v1.Test/Hangup") == 0) {
        nng_pipe_close(nng_msg_get_pipe(in));
    } else if (strcmp(req->method, "/charter.v1.Test/Garbage") == 0) {
        Charter__V1__RpcResponse resp = CHARTER__V1__RPC_RESPONSE__INIT;
        static uint8_t junk[] = {0xff, 0xff, 0xff, 0xff};
        resp.payload.data = junk;
        resp.payload.len = sizeof(junk);
        if (nng_msg_alloc(&out, protobuf_c_message_get_packed_size(&resp.base)) == 0)
            protobuf_c_message_pack(&resp.base, nng_msg_body(out));
    } else if (strcmp(req->method, "/charter.v1.Test/NotEnvelope") == 0) {
        if (nng_msg_alloc(&out, 0) == 0)
            nng_msg_append(out, "\xff\xff\xff", 3);
    } else if (strcmp(req->method, "/charter.v1.Test/Negative") == 0) {
        out = envelope(-1, "negative", NULL);
    } else if (strcmp(req->method, "/charter.v1.Test/Quit") == 0) {
        *quit = true;
        out = envelope(0, "", NULL);
    } else {
        out = envelope(CHARTER_NOT_FOUND, req->method, NULL);
    }
    charter__v1__rpc_request__free_unpacked(req, NULL);
    return out;
}

static void *responder_worker(void *arg)
{
    responder *r = arg;
    nng_ctx ctx;
    nng_aio *aio;
    unsigned seed = (unsigned)(uintptr_t)&ctx;

    if (nng_ctx_open(&ctx, r->sock) != 0)
        return NULL;
    if (nng_aio_alloc(&aio, NULL, NULL) != 0) {
        nng_ctx_close(ctx);
        return NULL;
    }
    for (;;) {
        nng_ctx_recv(ctx, aio);
        nng_aio_wait(aio);
        if (nng_aio_result(aio) != 0)
            break;
        nng_msg *in = nng_aio_get_msg(aio);
        atomic_fetch_add(&r->served, 1);
        bool quit = false;
        nng_msg *out = responder_answer(in, &quit);
        nng_msg_free(in);
        if (out == NULL)
            continue;
        /* Now and then answer late, so answers overtake each other across workers. */
        if (rand_r(&seed) % 16 == 0)
            nng_msleep(1);
        nng_aio_set_msg(aio, out);
        nng_ctx_send(ctx, aio);
        nng_aio_wait(aio);
        if (nng_aio_result(aio) != 0) {
            nng_msg_free(out);
            if (nng_aio_result(aio) == NNG_ECLOSED)
                break;
        }
        if (quit)
            break;
    }
    nng_aio_free(aio);
    nng_ctx_close(ctx);
    return NULL;
}

static int responder_start(responder *r, const char *name)
{
    memset(r, 0, sizeof(*r));
    ipc_url(name, r->url, sizeof(r->url));
    if (nng_rep0_open(&r->sock) != 0)
        return -1;
    if (nng_listen(r->sock, r->url, NULL, 0) != 0) {
        nng_close(r->sock);
        return -1;
    }
    for (int i = 0; i < RESPONDER_WORKERS; i++) {
        if (pthread_create(&r->threads[i], NULL, responder_worker, r) != 0)
            break;
        r->n_threads++;
    }
    return r->n_threads == RESPONDER_WORKERS ? 0 : -1;
}

/* Sends one Test/Quit per worker, each answered by a worker that then leaves, so that no
 * worker is inside a context call when the socket closes: NNG 1.5 can panic ("pthread_mutex_lock:
 * Invalid argument") when a socket is closed under a context another thread is sending on.
 * Returns 0 once every worker has answered one. */
static int responder_quit_all(responder *r)
{
    nng_socket q;
    if (nng_req0_open(&q) != 0)
        return -1;
    int rc = nng_setopt_ms(q, NNG_OPT_RECVTIMEO, 10000) == 0 &&
                     nng_setopt_ms(q, NNG_OPT_SENDTIMEO, 10000) == 0 &&
                     nng_dial(q, r->url, NULL, 0) == 0
                 ? 0
                 : -1;
    Charter__V1__RpcRequest req = CHARTER__V1__RPC_REQUEST__INIT;
    req.method = "/charter.v1.Test/Quit";
    uint8_t buf[64];
    size_t n = charter__v1__rpc_request__get_packed_size(&req);
    if (n > sizeof buf)
        rc = -1;
    else
        charter__v1__rpc_request__pack(&req, buf);
    for (int i = 0; rc == 0 && i < r->n_threads; i++) {
        void *answer = NULL;
        size_t len = 0;
        if (nng_send(q, buf, n, 0) != 0 || nng_recv(q, &answer, &len, NNG_FLAG_ALLOC) != 0)
            rc = -1;
        else
            nng_free(answer, len);
    }
    nng_close(q);
    return rc;
}

static void responder_stop(responder *r)
{
    if (responder_quit_all(r) == 0) {
        for (int i = 0; i < r->n_threads; i++)
            pthread_join(r->threads[i], NULL);
        nng_close(r->sock);
        return;
    }
    nng_close(r->sock);
    for (int i = 0; i < r->n_threads; i++)
        pthread_join(r->threads[i], NULL);
}

static responder shared_responder;
static int shared_responder_ok;

/* ---- status names ------------------------------------------------------------------------- */

static void test_status_names_are_grpc_names(void)
{
    CU_ASSERT_STRING_EQUAL(charter_status_name(0), "OK");
    CU_ASSERT_STRING_EQUAL(charter_status_name(3), "INVALID_ARGUMENT");
    CU_ASSERT_STRING_EQUAL(charter_status_name(4), "DEADLINE_EXCEEDED");
    CU_ASSERT_STRING_EQUAL(charter_status_name(5), "NOT_FOUND");
    CU_ASSERT_STRING_EQUAL(charter_status_name(7), "PERMISSION_DENIED");
    CU_ASSERT_STRING_EQUAL(charter_status_name(8), "RESOURCE_EXHAUSTED");
    CU_ASSERT_STRING_EQUAL(charter_status_name(9), "FAILED_PRECONDITION");
    CU_ASSERT_STRING_EQUAL(charter_status_name(12), "UNIMPLEMENTED");
    CU_ASSERT_STRING_EQUAL(charter_status_name(13), "INTERNAL");
    CU_ASSERT_STRING_EQUAL(charter_status_name(14), "UNAVAILABLE");
    CU_ASSERT_STRING_EQUAL(charter_status_name(16), "UNAUTHENTICATED");
}

static void test_status_name_of_negated_and_unknown_codes(void)
{
    CU_ASSERT_STRING_EQUAL(charter_status_name(-14), "UNAVAILABLE");
    CU_ASSERT_STRING_EQUAL(charter_status_name(-CHARTER_DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
    CU_ASSERT_STRING_EQUAL(charter_status_name(17), "UNKNOWN_CODE");
    CU_ASSERT_STRING_EQUAL(charter_status_name(-17), "UNKNOWN_CODE");
    CU_ASSERT_STRING_EQUAL(charter_status_name(1000), "UNKNOWN_CODE");
}

/* ---- URL and option checks ---------------------------------------------------------------- */

static void test_url_check_accepts_tcp_ipc_inproc(void)
{
    CU_ASSERT_EQUAL(charter_url_check("tcp://127.0.0.1:7433"), 0);
    CU_ASSERT_EQUAL(charter_url_check("tcp://localhost:1"), 0);
    CU_ASSERT_EQUAL(charter_url_check("tcp://[::1]:65535"), 0);
    CU_ASSERT_EQUAL(charter_url_check("ipc:///tmp/charter.sock"), 0);
    CU_ASSERT_EQUAL(charter_url_check("inproc://charter"), 0);
}

static void test_url_check_refuses_malformed_urls(void)
{
    const int bad = -CHARTER_INVALID_ARGUMENT;
    CU_ASSERT_EQUAL(charter_url_check(NULL), bad);
    CU_ASSERT_EQUAL(charter_url_check(""), bad);
    CU_ASSERT_EQUAL(charter_url_check("http://127.0.0.1:7433"), bad);
    CU_ASSERT_EQUAL(charter_url_check("127.0.0.1:7433"), bad);
    CU_ASSERT_EQUAL(charter_url_check("tcp://"), bad);
    CU_ASSERT_EQUAL(charter_url_check("tcp://host"), bad);
    CU_ASSERT_EQUAL(charter_url_check("tcp://:7433"), bad);
    CU_ASSERT_EQUAL(charter_url_check("tcp://host:0"), bad);
    CU_ASSERT_EQUAL(charter_url_check("tcp://host:65536"), bad);
    CU_ASSERT_EQUAL(charter_url_check("tcp://host:74x"), bad);
    CU_ASSERT_EQUAL(charter_url_check("tcp://host:+80"), bad);
    CU_ASSERT_EQUAL(charter_url_check("tcp://host: 80"), bad);
    CU_ASSERT_EQUAL(charter_url_check("tcp://host:-1"), bad);
    CU_ASSERT_EQUAL(charter_url_check("ipc://"), bad);
}

static void test_open_refuses_bad_url_and_options(void)
{
    charter_client *c = (charter_client *)&c; /* must be reset to NULL on failure */
    charter_options o;

    CU_ASSERT_EQUAL(charter_client_open("http://x:1", NULL, NULL, &c), -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_EQUAL(charter_client_open("tcp://127.0.0.1:7433", NULL, NULL, NULL),
                    -CHARTER_INVALID_ARGUMENT);

    charter_options_init(&o);
    o.timeout_ms = CHARTER_MAX_TIMEOUT_MS + 1;
    CU_ASSERT_EQUAL(charter_client_open("tcp://127.0.0.1:7433", NULL, &o, &c),
                    -CHARTER_INVALID_ARGUMENT);
    charter_options_init(&o);
    o.max_message = 100;
    CU_ASSERT_EQUAL(charter_client_open("tcp://127.0.0.1:7433", NULL, &o, &c),
                    -CHARTER_INVALID_ARGUMENT);
    charter_options_init(&o);
    o.reconnect_min_ms = 5000;
    o.reconnect_max_ms = 100;
    CU_ASSERT_EQUAL(charter_client_open("tcp://127.0.0.1:7433", NULL, &o, &c),
                    -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(c);
    charter_client_close(NULL); /* ignored */
}

static void test_options_init_gives_documented_defaults(void)
{
    charter_options o;
    memset(&o, 0xff, sizeof(o));
    charter_options_init(&o);
    CU_ASSERT_EQUAL(o.timeout_ms, 10000u);
    CU_ASSERT_EQUAL(o.max_message, (size_t)64 * 1024 * 1024);
    CU_ASSERT_EQUAL(o.connect_timeout_ms, 0u);
    CU_ASSERT_EQUAL(o.reconnect_min_ms, 100u);
    CU_ASSERT_EQUAL(o.reconnect_max_ms, 2000u);
}

/* ---- nothing listening -------------------------------------------------------------------- */

static void test_call_where_nothing_listens_is_unavailable_within_deadline(void)
{
    char url[128];
    charter_client *c = NULL;
    charter_options o;
    charter_status st;
    Charter__V1__HealthResponse *h = (Charter__V1__HealthResponse *)&h;

    ipc_url("nobody.sock", url, sizeof(url));
    charter_options_init(&o);
    o.timeout_ms = 300;
    CU_ASSERT_EQUAL_FATAL(charter_client_open(url, "tok", &o, &c), 0);
    CU_ASSERT_STRING_EQUAL(charter_client_url(c), url);
    CU_ASSERT_EQUAL(charter_client_connections(c), 0);
    double t0 = now_ms();
    CU_ASSERT_EQUAL(charter_health(c, NULL, &h, &st), -CHARTER_UNAVAILABLE);
    double elapsed = now_ms() - t0;
    CU_ASSERT_PTR_NULL(h);
    CU_ASSERT_EQUAL(st.code, CHARTER_UNAVAILABLE);
    CU_ASSERT_EQUAL(st.local, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "no connection"));
    /* It waited for a connection until its deadline (a hang would never return; how late the
     * answer comes on a loaded machine is not this test's business). */
    CU_ASSERT(elapsed >= 250.0);
    charter_client_close(c);
}

static void test_tcp_port_where_nothing_listens_is_unavailable(void)
{
    charter_client *c = NULL;
    charter_options o;
    charter_status st;
    Charter__V1__HealthResponse *h = NULL;

    charter_options_init(&o);
    o.timeout_ms = 200;
    /* Port 1 (tcpmux) is not served on a test machine: the connection is refused. */
    CU_ASSERT_EQUAL_FATAL(charter_client_open("tcp://127.0.0.1:1", NULL, &o, &c), 0);
    CU_ASSERT_EQUAL(charter_health(c, NULL, &h, &st), -CHARTER_UNAVAILABLE);
    CU_ASSERT_EQUAL(st.local, 1);
    charter_client_close(c);
}

static void test_open_with_connect_timeout_fails_fast_without_server(void)
{
    char url[128];
    charter_client *c = (charter_client *)&c;
    charter_options o;

    ipc_url("nobody-either.sock", url, sizeof(url));
    charter_options_init(&o);
    o.connect_timeout_ms = 200;
    double t0 = now_ms();
    CU_ASSERT_EQUAL(charter_client_open(url, NULL, &o, &c), -CHARTER_UNAVAILABLE);
    double elapsed = now_ms() - t0;
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT(elapsed >= 150.0);
}

/* ---- checks before sending ---------------------------------------------------------------- */

static void test_call_with_wrong_request_type_is_refused_before_sending(void)
{
    char url[128];
    charter_client *c = NULL;
    charter_options o;
    charter_status st;
    ProtobufCMessage *resp = (ProtobufCMessage *)&resp;
    Charter__V1__HealthRequest hreq = CHARTER__V1__HEALTH_REQUEST__INIT;
    Charter__V1__GetRunRequest greq = CHARTER__V1__GET_RUN_REQUEST__INIT;

    ipc_url("nobody-third.sock", url, sizeof(url));
    charter_options_init(&o);
    o.timeout_ms = 5000;
    CU_ASSERT_EQUAL_FATAL(charter_client_open(url, NULL, &o, &c), 0);
    /* GetRun takes a GetRunRequest, not a HealthRequest. */
    CU_ASSERT_EQUAL(charter_call(c, "/charter.v1.Runs/GetRun", &hreq.base,
                                 &charter__v1__run_view__descriptor, &resp, &st),
                    -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(resp);
    CU_ASSERT_EQUAL(st.local, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "charter.v1.GetRunRequest"));
    /* ... and returns a RunView, not a HealthResponse. */
    CU_ASSERT_EQUAL(charter_call(c, "/charter.v1.Runs/GetRun", &greq.base,
                                 &charter__v1__health_response__descriptor, &resp, &st),
                    -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(
        charter_call(c, "GetRun", &greq.base, &charter__v1__run_view__descriptor, &resp, &st),
        -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(
        charter_call(c, NULL, &greq.base, &charter__v1__run_view__descriptor, &resp, &st),
        -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_EQUAL(charter_call(c, "/charter.v1.Runs/GetRun", NULL,
                                 &charter__v1__run_view__descriptor, &resp, &st),
                    -CHARTER_INVALID_ARGUMENT);
    /* None of these waited for the missing server: that would have ended UNAVAILABLE (and not
     * local INVALID_ARGUMENT) after the 5 s deadline. */
    charter_client_close(c);
}

static void test_request_over_max_message_is_refused_locally(void)
{
    char url[128];
    charter_client *c = NULL;
    charter_options o;
    charter_status st;
    Charter__V1__RecordOutputRequest req = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    Charter__V1__RecordOutputResponse *resp = NULL;
    char content[2048];

    ipc_url("nobody-fourth.sock", url, sizeof(url));
    charter_options_init(&o);
    o.max_message = 1024;
    CU_ASSERT_EQUAL_FATAL(charter_client_open(url, NULL, &o, &c), 0);
    memset(content, 'x', sizeof(content) - 1);
    content[sizeof(content) - 1] = '\0';
    req.context_id = "c1";
    req.title = "big";
    req.content = content;
    /* Refused locally (a call that waited for the missing server ends UNAVAILABLE). */
    CU_ASSERT_EQUAL(charter_record_output(c, &req, &resp, &st), -CHARTER_RESOURCE_EXHAUSTED);
    CU_ASSERT_EQUAL(st.local, 1);
    CU_ASSERT_PTR_NULL(resp);
    charter_client_close(c);
}

/* ---- against the responder ---------------------------------------------------------------- */

static charter_client *responder_client(uint32_t timeout_ms, const char *token)
{
    charter_client *c = NULL;
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = timeout_ms;
    o.connect_timeout_ms = 2000;
    if (!shared_responder_ok || charter_client_open(shared_responder.url, token, &o, &c) != 0)
        return NULL;
    return c;
}

static void test_health_sends_method_token_and_timeout(void)
{
    charter_client *c = responder_client(4321, "t0k3n");
    charter_status st;
    Charter__V1__HealthResponse *h = NULL;

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(charter_client_connections(c), 1);
    CU_ASSERT_EQUAL(charter_health(c, NULL, &h, &st), 0);
    CU_ASSERT_EQUAL(st.code, CHARTER_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_STRING_EQUAL(h->status, "/charter.v1.Health/Check");
    CU_ASSERT_STRING_EQUAL(h->database, "Bearer t0k3n");
    /* The deadline less its margin (a tenth: 432 ms) travels as the server's deadline. */
    CU_ASSERT_EQUAL(h->workers, 4321u - 432u);
    charter__v1__health_response__free_unpacked(h, NULL);
    charter_client_close(c);
}

static void test_no_token_sends_no_authorization(void)
{
    charter_client *c = responder_client(2000, NULL);
    charter_status st;
    Charter__V1__HealthResponse *h = NULL;

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL_FATAL(charter_health(c, NULL, &h, &st), 0);
    CU_ASSERT_STRING_EQUAL(h->database, "");
    charter__v1__health_response__free_unpacked(h, NULL);
    charter_client_close(c);
}

/* Each typed call names its method from the service descriptors; the responder answers
 * NOT_FOUND with the method it received as the message. */
static void test_typed_calls_send_their_method_names(void)
{
    charter_client *c = responder_client(2000, "tok");
    charter_status st;
    void *resp = (void *)&resp;

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
#define EXPECT_METHOD(call, name)                                                                  \
    do {                                                                                           \
        resp = (void *)&resp;                                                                      \
        CU_ASSERT_EQUAL(call(c, NULL, (void *)&resp, &st), -CHARTER_NOT_FOUND);                    \
        CU_ASSERT_EQUAL(st.local, 0);                                                              \
        CU_ASSERT_STRING_EQUAL(st.message, name);                                                  \
        CU_ASSERT_PTR_NULL(resp);                                                                  \
    } while (0)
    EXPECT_METHOD(charter_create_run, "/charter.v1.Runs/CreateRun");
    EXPECT_METHOD(charter_list_runs, "/charter.v1.Runs/ListRuns");
    EXPECT_METHOD(charter_recover_run, "/charter.v1.Runs/RecoverRun");
    EXPECT_METHOD(charter_open_step, "/charter.v1.Gate/OpenStep");
    EXPECT_METHOD(charter_read_source, "/charter.v1.Gate/ReadSource");
    EXPECT_METHOD(charter_record_output, "/charter.v1.Gate/RecordOutput");
    EXPECT_METHOD(charter_check_input, "/charter.v1.Gate/CheckInput");
    EXPECT_METHOD(charter_deliver, "/charter.v1.Gate/Deliver");
    EXPECT_METHOD(charter_trace_artifact, "/charter.v1.Gate/TraceArtifact");
    EXPECT_METHOD(charter_revoke_grant, "/charter.v1.Grants/RevokeGrant");
    EXPECT_METHOD(charter_restore_grants, "/charter.v1.Grants/RestoreGrants");
    EXPECT_METHOD(charter_show_chain, "/charter.v1.Grants/ShowChain");
#undef EXPECT_METHOD
    charter_client_close(c);
}

static void test_get_run_request_fields_reach_the_peer(void)
{
    charter_client *c = responder_client(2000, "op");
    charter_status st;
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    Charter__V1__RunView *v = NULL;

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    req.run_id = "r42";
    req.after_seq = 7;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(c, &req, &v, &st), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v->run);
    CU_ASSERT_STRING_EQUAL(v->run->id, "r42");
    CU_ASSERT_EQUAL(v->run->seq, 7u);
    CU_ASSERT_STRING_EQUAL(v->run->task, "Bearer op");
    CU_ASSERT_EQUAL(v->n_events, 0u);
    protobuf_c_message_free_unpacked(&v->base, NULL);
    charter_client_close(c);
}

static void test_silent_peer_gives_deadline_exceeded(void)
{
    charter_client *c = responder_client(300, NULL);
    charter_status st;
    Charter__V1__HealthRequest req = CHARTER__V1__HEALTH_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    double t0 = now_ms();
    CU_ASSERT_EQUAL(charter_call(c, "/charter.v1.Test/Silent", &req.base,
                                 &charter__v1__health_response__descriptor, &resp, &st),
                    -CHARTER_DEADLINE_EXCEEDED);
    double elapsed = now_ms() - t0;
    CU_ASSERT_EQUAL(st.local, 1);
    CU_ASSERT(elapsed >= 250.0); /* at the deadline, not before */
    CU_ASSERT_PTR_NULL(resp);
    charter_client_close(c);
}

static void test_undecodable_answers_are_internal(void)
{
    charter_client *c = responder_client(2000, NULL);
    charter_status st;
    Charter__V1__HealthRequest req = CHARTER__V1__HEALTH_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    const ProtobufCMessageDescriptor *hd = &charter__v1__health_response__descriptor;

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(charter_call(c, "/charter.v1.Test/Garbage", &req.base, hd, &resp, &st),
                    -CHARTER_INTERNAL);
    CU_ASSERT_EQUAL(st.local, 1);
    CU_ASSERT_EQUAL(charter_call(c, "/charter.v1.Test/NotEnvelope", &req.base, hd, &resp, &st),
                    -CHARTER_INTERNAL);
    CU_ASSERT_EQUAL(charter_call(c, "/charter.v1.Test/Negative", &req.base, hd, &resp, &st),
                    -CHARTER_INTERNAL);
    CU_ASSERT_PTR_NULL(resp);
    charter_client_close(c);
}

static void test_lost_connection_is_unavailable_and_not_resent(void)
{
    charter_client *c = responder_client(3000, NULL);
    charter_status st;
    Charter__V1__HealthRequest req = CHARTER__V1__HEALTH_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    Charter__V1__HealthResponse *h = NULL;

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    int served_before = atomic_load(&shared_responder.served);
    CU_ASSERT_EQUAL(charter_call(c, "/charter.v1.Test/Hangup", &req.base,
                                 &charter__v1__health_response__descriptor, &resp, &st),
                    -CHARTER_UNAVAILABLE);
    /* Reported as the lost connection it is, not as the deadline (DEADLINE_EXCEEDED). */
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "lost"));
    /* The client redials on its own; the next call goes through. */
    CU_ASSERT_EQUAL(charter_health(c, NULL, &h, &st), 0);
    if (h != NULL)
        charter__v1__health_response__free_unpacked(h, NULL);
    /* The hung-up request reached the peer exactly once. */
    CU_ASSERT_EQUAL(atomic_load(&shared_responder.served) - served_before, 2);
    charter_client_close(c);
}

/* ---- many threads, one client ------------------------------------------------------------- */

typedef struct {
    charter_client *c;
    int id;
    int ok;
    int wrong;
    int failed;
    char first_error[300];
} caller;

static void *caller_main(void *arg)
{
    caller *t = arg;
    for (int k = 0; k < CALLS_PER_THREAD; k++) {
        charter_status st;
        char expect[96];
        if (k % 2 == 0) {
            Charter__V1__HealthRequest req = CHARTER__V1__HEALTH_REQUEST__INIT;
            ProtobufCMessage *resp = NULL;
            snprintf(expect, sizeof(expect), "/charter.v1.Test/Echo-%d-%d", t->id, k);
            if (charter_call(t->c, expect, &req.base, &charter__v1__health_response__descriptor,
                             &resp, &st) != 0) {
                if (t->failed++ == 0)
                    snprintf(t->first_error, sizeof(t->first_error), "%s: %s",
                             charter_status_name(st.code), st.message);
                continue;
            }
            Charter__V1__HealthResponse *h = (Charter__V1__HealthResponse *)resp;
            if (strcmp(h->status, expect) == 0)
                t->ok++;
            else
                t->wrong++;
            protobuf_c_message_free_unpacked(resp, NULL);
        } else {
            Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
            Charter__V1__RunView *v = NULL;
            snprintf(expect, sizeof(expect), "r-%d-%d", t->id, k);
            req.run_id = expect;
            req.after_seq = (uint64_t)t->id * 1000u + (uint64_t)k;
            if (charter_get_run(t->c, &req, &v, &st) != 0) {
                if (t->failed++ == 0)
                    snprintf(t->first_error, sizeof(t->first_error), "%s: %s",
                             charter_status_name(st.code), st.message);
                continue;
            }
            if (v->run != NULL && strcmp(v->run->id, expect) == 0 && v->run->seq == req.after_seq)
                t->ok++;
            else
                t->wrong++;
            charter__v1__run_view__free_unpacked(v, NULL);
        }
    }
    return NULL;
}

static void test_32_threads_share_one_client_and_get_their_own_answers(void)
{
    charter_client *c = responder_client(30000, "shared");
    pthread_t threads[CALL_THREADS];
    static caller callers[CALL_THREADS];
    int started = 0, ok = 0, wrong = 0, failed = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    for (int i = 0; i < CALL_THREADS; i++) {
        memset(&callers[i], 0, sizeof(callers[i]));
        callers[i].c = c;
        callers[i].id = i;
        if (pthread_create(&threads[i], NULL, caller_main, &callers[i]) != 0)
            break;
        started++;
    }
    CU_ASSERT_EQUAL(started, CALL_THREADS);
    for (int i = 0; i < started; i++) {
        pthread_join(threads[i], NULL);
        ok += callers[i].ok;
        wrong += callers[i].wrong;
        failed += callers[i].failed;
        if (callers[i].failed > 0)
            fprintf(stderr, "thread %d: %s\n", i, callers[i].first_error);
    }
    CU_ASSERT_EQUAL(ok, CALL_THREADS * CALLS_PER_THREAD);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(failed, 0);
    charter_client_close(c);
}

/* ---- registration ------------------------------------------------------------------------- */

static int suite_transport_init(void)
{
    shared_responder_ok = responder_start(&shared_responder, "responder.sock") == 0;
    return shared_responder_ok ? 0 : -1;
}

static int suite_transport_clean(void)
{
    if (shared_responder_ok)
        responder_stop(&shared_responder);
    shared_responder_ok = 0;
    return 0;
}

static int setup(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/charter_client_XXXXXX");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    return 0;
}

static void teardown(void)
{
    /* Stops NNG's own threads, so a leak checker sees only what the tests left behind. */
    nng_fini();

    char path[128];
    snprintf(path, sizeof(path), "%s/responder.sock", tmpdir);
    unlink(path);
    rmdir(tmpdir);
}

static const harness_test pure[] = {
    HARNESS_TEST(test_status_names_are_grpc_names),
    HARNESS_TEST(test_status_name_of_negated_and_unknown_codes),
    HARNESS_TEST(test_url_check_accepts_tcp_ipc_inproc),
    HARNESS_TEST(test_url_check_refuses_malformed_urls),
    HARNESS_TEST(test_open_refuses_bad_url_and_options),
    HARNESS_TEST(test_options_init_gives_documented_defaults),
};
static const harness_test unreachable[] = {
    HARNESS_TEST(test_call_where_nothing_listens_is_unavailable_within_deadline),
    HARNESS_TEST(test_tcp_port_where_nothing_listens_is_unavailable),
    HARNESS_TEST(test_open_with_connect_timeout_fails_fast_without_server),
    HARNESS_TEST(test_call_with_wrong_request_type_is_refused_before_sending),
    HARNESS_TEST(test_request_over_max_message_is_refused_locally),
};
static const harness_test transport[] = {
    HARNESS_TEST(test_health_sends_method_token_and_timeout),
    HARNESS_TEST(test_no_token_sends_no_authorization),
    HARNESS_TEST(test_typed_calls_send_their_method_names),
    HARNESS_TEST(test_get_run_request_fields_reach_the_peer),
    HARNESS_TEST(test_silent_peer_gives_deadline_exceeded),
    HARNESS_TEST(test_undecodable_answers_are_internal),
    HARNESS_TEST(test_lost_connection_is_unavailable_and_not_resent),
    HARNESS_TEST(test_32_threads_share_one_client_and_get_their_own_answers),
};
static const harness_suite suites[] = {
    {"pure", NULL, NULL, HARNESS_TABLE(pure)},
    {"unreachable", NULL, NULL, HARNESS_TABLE(unreachable)},
    {"transport", suite_transport_init, suite_transport_clean, HARNESS_TABLE(transport)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .setup = setup,
                                       .teardown = teardown};
