/*
 * test_checkpoint.c - checkpoints and their one-time resumption: real charterd processes on
 * the test Redis with an integrity key, a real local HTTP model server that answers the
 * reference workflow's steps after a delay the test sets, driven through libcharter.
 *
 * An executed run records a sealed checkpoint before each step; CheckpointRun hands it out and
 * ResumeRun consumes it once across processes (20 resumers over two charterd: one wins). A
 * forged, altered, other-graph or other-version checkpoint is refused with its own message; a
 * charterd without a key refuses both calls; a charterd killed mid-run leaves an interrupted
 * run that another charterd resumes from its checkpoint to the end; a grant revoked between
 * checkpoint and resume stops the resumed run at the first gate it meets, with the witness; a
 * delivery budget used up after the checkpoint ends the resumed run budget_exhausted.
 */
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"
#include "receipt.h"

/* ---- a model server: each request answered 200 after a delay, as the step asks ---------- */

static harness_model *model;

/* The reference workflow's own script, as a live model would answer it: research and analyze
 * hand their output on, report fills its public fields (the step whose schema names them). */
static int model_reply(void *arg, const char *path, const void *body, size_t len,
                       harness_model_reply *out)
{
    (void)arg, (void)path;
    bool report = false;
    char *text = calloc(1, len + 1);
    if (text != NULL) {
        memcpy(text, body, len);
        report = strstr(text, "recommended_vendor") != NULL;
        free(text);
    }
    const char *content =
        report ? "{\"content\":\"Brightline looks best.\",\"handoff\":[],\"fields\":{"
                 "\"recommended_vendor\":\"vendor_b\",\"fastest_delivery\":\"vendor_b\","
                 "\"longest_warranty\":\"vendor_b\"}}"
               : "{\"content\":\"Brightline Office, 352 USD per unit.\",\"handoff\":[\"output\"]}";
    json_t *env =
        json_pack("{s:s, s:s, s:s, s:[{s:i, s:{s:s, s:s, s:n}, s:s}]}", "id", "c1", "object",
                  "chat.completion", "model", "ckpt-model", "choices", "index", 0, "message",
                  "role", "assistant", "content", content, "refusal", "finish_reason", "stop");
    out->body = env ? json_dumps(env, JSON_COMPACT) : NULL;
    json_decref(env);
    out->status = 200;
    out->headers[0].name = "Content-Type";
    out->headers[0].value = "application/json";
    out->n_headers = 1;
    return out->body != NULL ? 0 : -1;
}

static int model_start(void)
{
    const char *paths[] = {"/v1/chat/completions"};
    return harness_model_start(paths, 1, model_reply, NULL, &model);
}

/* ---- keys, charterd, helpers --------------------------------------------------------------- */

static char tmpdir[] = "/tmp/charter_ckpt_XXXXXX";
static char key_path[256];
static unsigned char key_bytes[CHARTER_RECEIPT_KEY_MAX];
static size_t key_len;

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int make_key(const char *path)
{
    unsigned char rnd[32];
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        return -1;
    char line[70];
    for (int i = 0; i < 32; i++)
        snprintf(line + 2 * i, 3, "%02x", rnd[i]);
    line[64] = '\n';
    line[65] = '\0';
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    int rc = write(fd, line, 65) == 65 ? 0 : -1;
    close(fd);
    return rc;
}

/* Reads a small file into buf (n bytes, terminated); the bytes read, or -1. */
static long slurp(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    size_t got = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[got] = '\0';
    return (long)got;
}

static int suite_init(void)
{
    if (model_start() != 0 || !mkdtemp(tmpdir))
        return -1;
    harness_model_set_delay(model, 100);
    char model_url[96];
    snprintf(model_url, sizeof model_url, "%s/v1", harness_model_url(model));
    setenv("CHARTER_OPENAI_BASE_URL", model_url, 1);
    setenv("CHARTER_OPENAI_API_KEY", "test-key", 1);
    setenv("CHARTER_OPENAI_MODEL", "ckpt-model", 1);
    setenv("CHARTER_MODEL_TIMEOUT_MS", "30000", 1);
    snprintf(key_path, sizeof key_path, "%s/integrity.key", tmpdir);
    char err[300];
    if (make_key(key_path) != 0 || charter_receipt_key_load(key_path, key_bytes, sizeof key_bytes,
                                                            &key_len, err, sizeof err) != 0)
        return -1;
    return 0;
}

static int suite_clean(void)
{
    unlink(key_path);
    rmdir(tmpdir);
    return 0;
}

/* Starts a charterd on graph with the integrity key (keyed) and runners executor threads. */
static int start(const char *graph, bool keyed, const char *runners, harness_charterd *d,
                 charter_client **c)
{
    const char *extra[4] = {"--runners", runners, "--integrity-key", key_path};
    harness_charterd_opts o = {.graph = graph, .extra_args = extra, .n_extra = keyed ? 4 : 2};
    if (harness_charterd_start(&o, d) != 0)
        return -1;
    return harness_client_open(d->ipc_url, HARNESS_OPERATOR_TOKEN, 30000, c);
}

static Charter__V1__RunView *get_run(charter_client *c, const char *id)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)id;
    Charter__V1__RunView *v = NULL;
    charter_status s;
    return charter_get_run(c, &req, &v, &s) == 0 ? v : NULL;
}

/* Waits until the run has n events of kind (at most limit_ms). */
static bool wait_for_events(charter_client *c, const char *id, const char *kind, size_t n,
                            int limit_ms)
{
    long long until = now_ms() + limit_ms;
    while (now_ms() < until) {
        Charter__V1__RunView *v = get_run(c, id);
        size_t found = 0;
        for (size_t i = 0; v && i < v->n_events; i++)
            found += strcmp(v->events[i]->kind, kind) == 0;
        if (v)
            charter__v1__run_view__free_unpacked(v, NULL);
        if (found >= n)
            return true;
        nng_msleep(50);
    }
    return false;
}

/* Waits until the run's status is one of the comma-list want; its status into status. */
static bool wait_for_status(charter_client *c, const char *id, const char *want, int limit_ms,
                            char status[32])
{
    long long until = now_ms() + limit_ms;
    status[0] = '\0';
    while (now_ms() < until) {
        Charter__V1__RunView *v = get_run(c, id);
        if (v) {
            snprintf(status, 32, "%s", v->run->status);
            charter__v1__run_view__free_unpacked(v, NULL);
        }
        char pat[40];
        snprintf(pat, sizeof pat, ",%s,", status);
        char list[128];
        snprintf(list, sizeof list, ",%s,", want);
        if (status[0] && strstr(list, pat))
            return true;
        nng_msleep(50);
    }
    return false;
}

/* Waits until the model server holds n requests (HARNESS_MODEL_HOLD), at most limit_ms: the
 * run's model request is on the wire, and stays there until harness_model_release. */
static bool wait_for_held(int n, int limit_ms)
{
    long long until = now_ms() + limit_ms;
    while (harness_model_held(model) < n) {
        if (now_ms() >= until)
            return false;
        nng_msleep(20);
    }
    return true;
}

/* True when the run's events hold the transition change ("running -> interrupted") made by a
 * reaper because the lease lapsed. */
static bool lease_lapsed(charter_client *c, const char *id, const char *change);

/* Creates a live run on c; its id into id. */
static bool create_live(charter_client *c, char id[80])
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "live";
    req.async = true;
    Charter__V1__RunView *v = NULL;
    charter_status s;
    if (charter_create_run(c, &req, &v, &s) != 0) {
        fprintf(stderr, "\n  CreateRun: %d %s\n", s.code, s.message);
        return false;
    }
    snprintf(id, 80, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    return true;
}

/* An interrupted run on graph: a keyed charterd with one executor starts a live run, which
 * is stopped (charterd stops, SIGTERM) while the model request of its step model_calls+1 is
 * in flight. Every model request is held until the test releases it, so the run stops in
 * that request whatever the machine's load. */
static bool interrupted_run(const char *graph, size_t model_calls, char id[80])
{
    harness_charterd x;
    charter_client *cx = NULL;
    if (start(graph, true, "1", &x, &cx) != 0)
        return false;
    harness_model_set_delay(model, HARNESS_MODEL_HOLD);
    bool ok = create_live(cx, id);
    /* The first model_calls requests are answered once they arrive; the next one is held. Generous
     * limits: under a sanitizer, with other suites beside it, a step can be slow. */
    for (size_t i = 0; ok && i <= model_calls; i++) {
        ok = wait_for_held(1, 30000);
        if (ok && i < model_calls)
            harness_model_release(model);
    }
    if (!ok)
        fprintf(stderr, "\n  run %s of %s did not reach the model request it should stop in\n", id,
                graph);
    charter_client_close(cx);
    if (harness_charterd_stop(&x) != 0)
        ok = false;
    harness_model_set_delay(model, 100);
    harness_model_release(model);
    return ok;
}

static Charter__V1__Checkpoint *checkpoint_of(charter_client *c, const char *id, int *code,
                                              char *msg, size_t n)
{
    Charter__V1__CheckpointRunRequest req = CHARTER__V1__CHECKPOINT_RUN_REQUEST__INIT;
    req.run_id = (char *)id;
    Charter__V1__Checkpoint *k = NULL;
    charter_status s;
    int rc = charter_checkpoint_run(c, &req, &k, &s);
    if (code)
        *code = rc == 0 ? 0 : s.code;
    if (msg)
        snprintf(msg, n, "%s", rc == 0 ? "" : s.message);
    return k;
}

static bool lease_lapsed(charter_client *c, const char *id, const char *change)
{
    Charter__V1__RunView *v = get_run(c, id);
    bool lapsed = false;
    for (size_t i = 0; v && i < v->n_events; i++)
        lapsed = lapsed || (strstr(v->events[i]->detail, change) != NULL &&
                            strstr(v->events[i]->detail, "lease lapsed") != NULL);
    if (v)
        charter__v1__run_view__free_unpacked(v, NULL);
    return lapsed;
}

/* A run of a fresh graph named after name interrupted in analyze's model request (research
 * done: the checkpoint before analyze), and a charterd y on it that answers but executes
 * nothing (client *cy). Returns the run's checkpoint (caller frees), asserted to be analyze's;
 * g and id name the graph and the run. */
static Charter__V1__Checkpoint *interrupted_in_analyze(const char *name, char g[64], char id[80],
                                                       harness_charterd *y, charter_client **cy)
{
    harness_graph_name(g, 64, name);
    CU_ASSERT_TRUE_FATAL(interrupted_run(g, 1, id));
    CU_ASSERT_EQUAL_FATAL(start(g, true, "0", y, cy), 0);
    Charter__V1__Checkpoint *k = checkpoint_of(*cy, id, NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_STRING_EQUAL(k->step, "analyze");
    return k;
}

/* ResumeRun: the code (0 on success) and the message. */
static int resume(charter_client *c, const char *token, char *msg, size_t n)
{
    Charter__V1__ResumeRunRequest req = CHARTER__V1__RESUME_RUN_REQUEST__INIT;
    req.checkpoint = (char *)token;
    Charter__V1__Run *r = NULL;
    charter_status s;
    int rc = charter_resume_run(c, &req, &r, &s);
    if (msg)
        snprintf(msg, n, "%s", rc == 0 ? r->status : s.message);
    if (r)
        charter__v1__run__free_unpacked(r, NULL);
    return rc == 0 ? 0 : s.code;
}

/* The token with its cursor changed by edit and sealed again under key (key_len bytes): what
 * someone holding the key could make. malloc'd. */
static char *reseal(const char *token, const char *field, const char *value,
                    const unsigned char *key, size_t klen)
{
    const char *b64 = token + strlen("ckpt1.");
    const char *dot = strrchr(token, '.');
    size_t blen = (size_t)(dot - b64);
    unsigned char *body = calloc(1, blen);
    int n = EVP_DecodeBlock(body, (const unsigned char *)b64, (int)blen);
    while (n > 0 && body[n - 1] == '\0')
        n--;
    json_t *j = json_loadb((const char *)body, (size_t)n, 0, NULL);
    free(body);
    if (j == NULL)
        return NULL;
    json_object_set_new(j, field, json_string(value));
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    size_t tlen = strlen(text);
    char *out = calloc(1, 6 + 4 * ((tlen + 2) / 3) + 1 + 64 + 1);
    memcpy(out, "ckpt1.", 6);
    int m = EVP_EncodeBlock((unsigned char *)out + 6, (const unsigned char *)text, (int)tlen);
    free(text);
    char mac[65];
    charter_hmac_sha256_hex(key, klen, out, 6 + (size_t)m, mac);
    out[6 + m] = '.';
    memcpy(out + 6 + m + 1, mac, 65);
    return out;
}

/* ---- the tests ------------------------------------------------------------------------------ */

static void test_without_integrity_key_checkpoint_and_resume_are_refused(void)
{
    char g[64], id[80], msg[512];
    harness_graph_name(g, sizeof g, "ckpt_nokey");
    harness_charterd d;
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(start(g, false, "1", &d, &c), 0);
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    Charter__V1__RunView *v = NULL;
    charter_status s;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(c, &req, &v, &s), 0); /* scripted, to its end */
    snprintf(id, sizeof id, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    int code = 0;
    CU_ASSERT_PTR_NULL(checkpoint_of(c, id, &code, msg, sizeof msg));
    CU_ASSERT_EQUAL(code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "INTEGRITY_KEY_REQUIRED"));
    CU_ASSERT_EQUAL(
        resume(c, "ckpt1.e30=.0000000000000000000000000000000000000000000000000000000000000000",
               msg, sizeof msg),
        CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "INTEGRITY_KEY_REQUIRED"));
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(g);
}

typedef struct {
    const char *url;
    const char *token;
    int code;
    char msg[256];
} resumer;

static atomic_int go;

static void *resumer_main(void *arg)
{
    resumer *r = arg;
    charter_client *c = NULL;
    if (harness_client_open(r->url, HARNESS_OPERATOR_TOKEN, 30000, &c) != 0) {
        r->code = -1;
        return NULL;
    }
    while (!atomic_load(&go))
        ;
    r->code = resume(c, r->token, r->msg, sizeof r->msg);
    charter_client_close(c);
    return NULL;
}

static void test_twenty_resumers_over_two_charterd_exactly_one_wins(void)
{
    char g[64], id[80], msg[512];
    harness_graph_name(g, sizeof g, "ckpt_race");
    CU_ASSERT_TRUE_FATAL(interrupted_run(g, 0, id));
    harness_charterd y, z;
    charter_client *cy = NULL, *cz = NULL;
    CU_ASSERT_EQUAL_FATAL(start(g, true, "0", &y, &cy), 0);
    CU_ASSERT_EQUAL_FATAL(start(g, true, "0", &z, &cz), 0);
    char status[32];
    CU_ASSERT_TRUE_FATAL(wait_for_status(cy, id, "interrupted", 1000, status));
    int code = 0;
    Charter__V1__Checkpoint *k = checkpoint_of(cy, id, &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_STRING_EQUAL(k->step, "research");
    CU_ASSERT_EQUAL(k->next_step, 0);
    CU_ASSERT_FALSE(k->consumed);
    resumer rs[20];
    pthread_t th[20];
    atomic_store(&go, 0);
    for (int i = 0; i < 20; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        rs[i].url = i % 2 ? y.ipc_url : z.ipc_url;
        rs[i].token = k->token;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, resumer_main, &rs[i]), 0);
    }
    nng_msleep(300);
    atomic_store(&go, 1);
    int won = 0, consumed = 0;
    for (int i = 0; i < 20; i++) {
        pthread_join(th[i], NULL);
        won += rs[i].code == 0;
        consumed += rs[i].code == CHARTER_FAILED_PRECONDITION &&
                    strstr(rs[i].msg, "already consumed") != NULL;
    }
    CU_ASSERT_EQUAL(won, 1);
    CU_ASSERT_EQUAL(consumed, 19);
    Charter__V1__RunView *v = get_run(cz, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "queued"); /* neither charterd executes runs */
    size_t resumed = 0;
    for (size_t i = 0; i < v->n_events; i++)
        resumed += strstr(v->events[i]->detail, "interrupted -> queued") != NULL;
    CU_ASSERT_EQUAL(resumed, 1);
    charter__v1__run_view__free_unpacked(v, NULL);
    Charter__V1__Checkpoint *after = checkpoint_of(cz, id, NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(after);
    CU_ASSERT_TRUE(after->consumed);
    charter__v1__checkpoint__free_unpacked(after, NULL);
    charter__v1__checkpoint__free_unpacked(k, NULL);
    charter_client_close(cy);
    charter_client_close(cz);
    CU_ASSERT_EQUAL(harness_charterd_stop(&y), 0);
    CU_ASSERT_EQUAL(harness_charterd_stop(&z), 0);
    harness_graph_drop(g);
}

static void test_forged_altered_other_graph_and_other_version_checkpoints_are_refused(void)
{
    char g[64], id[80], msg[512];
    harness_charterd y;
    charter_client *cy = NULL;
    Charter__V1__Checkpoint *k = interrupted_in_analyze("ckpt_forged", g, id, &y, &cy);
    CU_ASSERT_EQUAL(k->next_step, 1);
    CU_ASSERT_EQUAL(k->steps, 1);
    CU_ASSERT_EQUAL(k->model_calls, 1);
    CU_ASSERT_STRING_EQUAL(k->graph, g);

    /* Not a token at all. */
    CU_ASSERT_EQUAL(resume(cy, "hello", msg, sizeof msg), CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "not a checkpoint token"));
    /* Altered: one byte of the cursor changed, the MAC kept. */
    char *altered = strdup(k->token);
    CU_ASSERT_PTR_NOT_NULL_FATAL(altered);
    altered[10] = altered[10] == 'A' ? 'B' : 'A';
    CU_ASSERT_EQUAL(resume(cy, altered, msg, sizeof msg), CHARTER_PERMISSION_DENIED);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "MAC mismatch"));
    free(altered);
    /* Forged: a cursor sealed under a key charterd does not hold. */
    unsigned char other[32];
    CU_ASSERT_EQUAL_FATAL(RAND_bytes(other, sizeof other), 1);
    char *forged = reseal(k->token, "step", "report", other, sizeof other);
    CU_ASSERT_PTR_NOT_NULL_FATAL(forged);
    CU_ASSERT_EQUAL(resume(cy, forged, msg, sizeof msg), CHARTER_PERMISSION_DENIED);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "MAC mismatch"));
    free(forged);
    /* Sealed under the right key but for another graph, or another workflow version. */
    char *graph2 = reseal(k->token, "graph", "t_some_other_graph", key_bytes, key_len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(graph2);
    CU_ASSERT_EQUAL(resume(cy, graph2, msg, sizeof msg), CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "taken on graph t_some_other_graph"));
    free(graph2);
    char *version2 =
        reseal(k->token, "workflow", "procurement@0000000000000000", key_bytes, key_len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(version2);
    CU_ASSERT_EQUAL(resume(cy, version2, msg, sizeof msg), CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(msg, "taken under workflow version procurement@0000000000000000"));
    free(version2);
    /* None of these consumed it: the real one resumes, once. */
    CU_ASSERT_EQUAL(resume(cy, k->token, msg, sizeof msg), 0);
    CU_ASSERT_STRING_EQUAL(msg, "queued");
    CU_ASSERT_EQUAL(resume(cy, k->token, msg, sizeof msg), CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "already consumed"));
    charter__v1__checkpoint__free_unpacked(k, NULL);
    charter_client_close(cy);
    CU_ASSERT_EQUAL(harness_charterd_stop(&y), 0);
    harness_graph_drop(g);
}

static void test_killed_executor_then_resume_on_another_charterd_runs_to_the_end(void)
{
    char g[64], id[80], msg[512], status[32];
    harness_graph_name(g, sizeof g, "ckpt_kill");
    harness_charterd x, y;
    charter_client *cx = NULL, *cy = NULL;
    CU_ASSERT_EQUAL_FATAL(start(g, true, "1", &x, &cx), 0);
    /* Each model request is held until released: research's until its checkpoint is taken,
     * analyze's for good (x is killed in it). */
    harness_model_set_delay(model, HARNESS_MODEL_HOLD);
    CU_ASSERT_TRUE_FATAL(create_live(cx, id));
    CU_ASSERT_TRUE_FATAL(wait_for_held(1, 15000));
    /* The checkpoint before research, taken while the run goes on. */
    Charter__V1__Checkpoint *first = checkpoint_of(cx, id, NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(first);
    CU_ASSERT_STRING_EQUAL(first->step, "research");
    harness_model_release(model);
    CU_ASSERT_TRUE_FATAL(wait_for_held(1, 15000));
    CU_ASSERT_TRUE_FATAL(wait_for_events(cx, id, "model_request", 2, 15000));
    /* A running run does not resume, and the refusal consumes nothing. */
    Charter__V1__Checkpoint *now = checkpoint_of(cx, id, NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(now);
    CU_ASSERT_STRING_EQUAL(now->step, "analyze");
    CU_ASSERT_EQUAL(resume(cx, now->token, msg, sizeof msg), CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "is running: only an interrupted run resumes"));
    charter__v1__checkpoint__free_unpacked(now, NULL);
    /* The second charterd starts while x holds the run's lease: it leaves the run alone. */
    CU_ASSERT_EQUAL_FATAL(start(g, true, "1", &y, &cy), 0);
    charter_client_close(cx);
    harness_charterd_kill(&x);
    harness_model_release(model);
    CU_ASSERT_TRUE_FATAL(wait_for_status(cy, id, "interrupted", 15000, status));
    /* y's reaper marked it once the lease lapsed (y's startup left it alone). */
    CU_ASSERT_TRUE(lease_lapsed(cy, id, "running -> interrupted"));
    Charter__V1__Checkpoint *k = checkpoint_of(cy, id, NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT_STRING_EQUAL(k->step, "analyze");
    CU_ASSERT_EQUAL(k->steps, 1);
    CU_ASSERT_EQUAL(k->model_calls, 1);
    CU_ASSERT_EQUAL(k->deliveries, 0);
    harness_model_set_delay(model, 100);
    /* An older checkpoint of the run is not the one to resume from. */
    CU_ASSERT_EQUAL(resume(cy, first->token, msg, sizeof msg), CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "is not run"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "latest checkpoint"));
    charter__v1__checkpoint__free_unpacked(first, NULL);
    CU_ASSERT_EQUAL(resume(cy, k->token, msg, sizeof msg), 0);
    CU_ASSERT_TRUE(wait_for_status(cy, id, "completed,blocked,error,budget_exhausted,cancelled",
                                   30000, status));
    /* The reference workflow's end: the CFO delivery commits in analyze, the report step's
     * input gate refuses the handoff derived from the confidential budget memo. */
    CU_ASSERT_STRING_EQUAL(status, "blocked");
    Charter__V1__RunView *v = get_run(cy, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(v->n_deliveries, 1);
    CU_ASSERT_EQUAL(v->run->steps, 3); /* research before, analyze and report after */
    /* research's and analyze's (in flight at the kill) before, analyze's again after the
     * resume; report stops at its input gate before its model request. */
    CU_ASSERT_EQUAL(v->run->model_calls, 3);
    size_t research_steps = 0;
    for (size_t i = 0; i < v->n_events; i++)
        research_steps += strcmp(v->events[i]->kind, "step_opened") == 0 &&
                          strstr(v->events[i]->detail, "step research") != NULL;
    CU_ASSERT_EQUAL(research_steps, 1); /* resumed at analyze, research not run again */
    charter__v1__run_view__free_unpacked(v, NULL);
    charter__v1__checkpoint__free_unpacked(k, NULL);
    charter_client_close(cy);
    CU_ASSERT_EQUAL(harness_charterd_stop(&y), 0);
    harness_graph_drop(g);
}

/* A cancel request outlives the executor that never saw it: the run is cancelled while its
 * executor is frozen (SIGSTOP, so no renewal reads the request), the executor is then killed,
 * its lease lapses and the run is interrupted with the request on it. Resuming its checkpoint
 * must not forget the request: the resumed run ends cancelled before any step, delivering
 * nothing. */
static void test_cancel_requested_before_the_executor_died_survives_a_resume(void)
{
    char g[64], id[80], msg[512], status[32];
    harness_graph_name(g, sizeof g, "ckpt_cancel");
    harness_charterd x, y;
    charter_client *cx = NULL, *cy = NULL;
    CU_ASSERT_EQUAL_FATAL(start(g, true, "1", &x, &cx), 0);
    /* research's model request is answered; analyze's is held until x is gone. */
    harness_model_set_delay(model, HARNESS_MODEL_HOLD);
    CU_ASSERT_TRUE_FATAL(create_live(cx, id));
    CU_ASSERT_TRUE_FATAL(wait_for_held(1, 15000));
    harness_model_release(model);
    CU_ASSERT_TRUE_FATAL(wait_for_held(1, 15000));
    CU_ASSERT_TRUE_FATAL(wait_for_events(cx, id, "model_request", 2, 15000));
    CU_ASSERT_EQUAL_FATAL(start(g, true, "1", &y, &cy), 0);
    charter_client_close(cx);
    CU_ASSERT_EQUAL_FATAL(kill(x.pid, SIGSTOP), 0);
    Charter__V1__CancelRunRequest cr = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
    cr.run_id = id;
    cr.reason = "stop this run";
    Charter__V1__Run *r = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_cancel_run(cy, &cr, &r, &st), 0);
    CU_ASSERT_STRING_EQUAL(r->status, "running");
    charter__v1__run__free_unpacked(r, NULL);
    harness_charterd_kill(&x);
    harness_model_set_delay(model, 100);
    harness_model_release(model);
    CU_ASSERT_TRUE_FATAL(wait_for_status(cy, id, "interrupted,cancelled", 15000, status));
    if (strcmp(status, "interrupted") == 0) {
        Charter__V1__Checkpoint *k = checkpoint_of(cy, id, NULL, NULL, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(k);
        harness_model_set_delay(model, 100);
        CU_ASSERT_EQUAL(resume(cy, k->token, msg, sizeof msg), 0);
        charter__v1__checkpoint__free_unpacked(k, NULL);
        CU_ASSERT_TRUE(wait_for_status(cy, id, "completed,blocked,error,budget_exhausted,cancelled",
                                       30000, status));
    }
    CU_ASSERT_STRING_EQUAL(status, "cancelled");
    Charter__V1__RunView *v = get_run(cy, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(v->n_deliveries, 0);
    CU_ASSERT_EQUAL(v->run->model_calls, 2); /* both before the cancel, none after */
    charter__v1__run_view__free_unpacked(v, NULL);
    charter_client_close(cy);
    CU_ASSERT_EQUAL(harness_charterd_stop(&y), 0);
    harness_graph_drop(g);
}

static void test_revocation_between_checkpoint_and_resume_stops_at_the_first_gate(void)
{
    char g[64], id[80], status[32];
    harness_graph_name(g, sizeof g, "ckpt_revoke");
    CU_ASSERT_TRUE_FATAL(interrupted_run(g, 0, id));
    harness_charterd y;
    charter_client *cy = NULL;
    CU_ASSERT_EQUAL_FATAL(start(g, true, "1", &y, &cy), 0);
    Charter__V1__Checkpoint *k = checkpoint_of(cy, id, NULL, NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    Charter__V1__RevokeGrantRequest rreq = CHARTER__V1__REVOKE_GRANT_REQUEST__INIT;
    rreq.grant_id = "g_analyst";
    Charter__V1__Grant *gr = NULL;
    charter_status s;
    CU_ASSERT_EQUAL_FATAL(charter_revoke_grant(cy, &rreq, &gr, &s), 0);
    charter__v1__grant__free_unpacked(gr, NULL);
    /* Through the CLI, as an operator does it: the token kept in a file, resumed once. */
    char file[300], out[300], err[300], cmd[2048];
    snprintf(file, sizeof file, "%s/run.ckpt", tmpdir);
    snprintf(out, sizeof out, "%s/out.txt", tmpdir);
    snprintf(err, sizeof err, "%s/err.txt", tmpdir);
    const char *envs = "CHARTER_URL=%s CHARTER_TOKEN=%s %s";
    char pre[1024];
    snprintf(pre, sizeof pre, envs, y.ipc_url, HARNESS_OPERATOR_TOKEN, CHARTER_CLI_PATH);
    snprintf(cmd, sizeof cmd, "%s checkpoint %s > %s 2> %s", pre, id, file, err);
    CU_ASSERT_EQUAL(system(cmd), 0);
    char text[4096];
    CU_ASSERT_TRUE(slurp(file, text, sizeof text) > 0);
    CU_ASSERT_EQUAL(strncmp(text, k->token, strlen(k->token)), 0);
    CU_ASSERT_TRUE(slurp(err, text, sizeof text) > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "before step research"));
    snprintf(cmd, sizeof cmd, "%s resume %s > %s 2> %s", pre, file, out, err);
    CU_ASSERT_EQUAL(system(cmd), 0);
    CU_ASSERT_TRUE(slurp(out, text, sizeof text) > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "queued"));
    snprintf(cmd, sizeof cmd, "%s --json resume - < %s > %s 2> %s", pre, file, out, err);
    CU_ASSERT_NOT_EQUAL(system(cmd), 0);
    CU_ASSERT_TRUE(slurp(err, text, sizeof text) > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "already consumed"));
    unlink(file);
    unlink(out);
    unlink(err);
    CU_ASSERT_TRUE(wait_for_status(cy, id, "completed,blocked,error,budget_exhausted,cancelled",
                                   30000, status));
    CU_ASSERT_STRING_EQUAL(status, "blocked");
    Charter__V1__RunView *v = get_run(cy, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(v->n_deliveries, 0); /* the CFO delivery no longer commits */
    /* The first gate the resumed run meets with g_analyst is analyze's delivery: DENY with the
     * witness naming the revoked grant, and the run ends there. */
    const Charter__V1__Event *deny = NULL;
    for (size_t i = 0; i < v->n_events; i++)
        if (v->events[i]->outcome == CHARTER__V1__OUTCOME__DENY && deny == NULL)
            deny = v->events[i];
    CU_ASSERT_PTR_NOT_NULL_FATAL(deny);
    CU_ASSERT_PTR_NOT_NULL(strstr(deny->witness, "g_analyst revoked"));
    bool invalid = false;
    for (size_t i = 0; i < deny->n_codes; i++)
        invalid = invalid || strcmp(deny->codes[i], "GRANT_INVALID") == 0;
    CU_ASSERT_TRUE(invalid);
    const char *last = v->events[v->n_events - 1]->detail;
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "running -> blocked"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "\"step\":\"analyze\""));
    charter__v1__run_view__free_unpacked(v, NULL);
    charter__v1__checkpoint__free_unpacked(k, NULL);
    charter_client_close(cy);
    CU_ASSERT_EQUAL(harness_charterd_stop(&y), 0);
    harness_graph_drop(g);
}

/* Sets (value non-empty) or removes the budget field of run id on graph in the database
 * itself: what lowering a run's budget since its checkpoint looks like to charterd. */
static int set_run_budget(const char *graph, const char *id, const char *field, const char *value)
{
    static const char script[] =
        "if ARGV[3] == '' then redis.call('HDEL', KEYS[1] .. ':run:' .. ARGV[1], ARGV[2]) "
        "else redis.call('HSET', KEYS[1] .. ':run:' .. ARGV[1], ARGV[2], ARGV[3]) end "
        "return 1";
    const char *args[3] = {id, field, value};
    return harness_graph_eval(graph, script, args, 3, NULL);
}

static void test_budget_used_up_at_resume_time_stops_the_resumed_run_at_once(void)
{
    char g[64], id[80], msg[512], status[32];
    /* Interrupted in analyze's model request: the checkpoint before analyze counts 1 step and
     * 1 model call, nothing delivered. y answers, executes nothing. */
    harness_charterd y, z;
    charter_client *cy = NULL, *cz = NULL;
    Charter__V1__Checkpoint *k = interrupted_in_analyze("ckpt_budget", g, id, &y, &cy);
    CU_ASSERT_EQUAL(k->steps, 1);
    /* A budget lowered since the checkpoint to what the checkpoint already used: the resume is
     * refused naming it, the checkpoint is not consumed, the run stays interrupted. */
    CU_ASSERT_EQUAL_FATAL(set_run_budget(g, id, "max_steps", "1"), 0);
    CU_ASSERT_EQUAL(resume(cy, k->token, msg, sizeof msg), CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "budget max_steps is exhausted at checkpoint"));
    Charter__V1__RunView *v = get_run(cy, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "interrupted");
    charter__v1__run_view__free_unpacked(v, NULL);
    /* Without the lowered budget the same checkpoint resumes (status queued: no executor on
     * y); lowered again before an executor claims the run, the executor checks the budget
     * before the step and stops the run at once: budget_exhausted naming max_steps and the
     * step, no model request, nothing delivered. */
    CU_ASSERT_EQUAL_FATAL(set_run_budget(g, id, "max_steps", ""), 0);
    CU_ASSERT_EQUAL(resume(cy, k->token, msg, sizeof msg), 0);
    CU_ASSERT_STRING_EQUAL(msg, "queued");
    CU_ASSERT_EQUAL_FATAL(set_run_budget(g, id, "max_steps", "1"), 0);
    CU_ASSERT_EQUAL_FATAL(start(g, true, "1", &z, &cz), 0);
    CU_ASSERT_TRUE(wait_for_status(cz, id, "completed,blocked,error,budget_exhausted,cancelled",
                                   15000, status));
    CU_ASSERT_STRING_EQUAL(status, "budget_exhausted");
    v = get_run(cz, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(v->n_deliveries, 0);
    CU_ASSERT_EQUAL(v->run->deliveries, 0);
    CU_ASSERT_EQUAL(v->run->model_calls, 2); /* research's and analyze's, as sent */
    size_t requests = 0;
    for (size_t i = 0; i < v->n_events; i++)
        requests += strcmp(v->events[i]->kind, "model_request") == 0;
    CU_ASSERT_EQUAL(requests, 2); /* research's and analyze's, both before the interruption */
    const char *last = v->events[v->n_events - 1]->detail;
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "running -> budget_exhausted"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "\"budget\":\"max_steps\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "\"step\":\"analyze\""));
    charter__v1__run_view__free_unpacked(v, NULL);
    charter__v1__checkpoint__free_unpacked(k, NULL);
    charter_client_close(cy);
    charter_client_close(cz);
    CU_ASSERT_EQUAL(harness_charterd_stop(&y), 0);
    CU_ASSERT_EQUAL(harness_charterd_stop(&z), 0);
    harness_graph_drop(g);
}

/* A send made through the Gate API while a resumed run waits on the queue uses up its
 * max_deliveries budget of 1: the checkpoint counted no delivery (ResumeRun takes it) and the
 * executor's own count lets analyze send, so the commit itself refuses analyze's send for the
 * budget. The resumed run ends budget_exhausted naming max_deliveries and analyze (not error),
 * and the Gate's send is the run's only delivery. */
static void test_a_delivery_budget_used_up_after_the_checkpoint_ends_the_resumed_run(void)
{
    char g[64], id[80], msg[512], status[32];
    harness_charterd y, z;
    charter_client *cy = NULL, *cz = NULL;
    Charter__V1__Checkpoint *k = interrupted_in_analyze("ckpt_deliveries", g, id, &y, &cy);
    CU_ASSERT_EQUAL(k->deliveries, 0);
    CU_ASSERT_EQUAL_FATAL(set_run_budget(g, id, "max_deliveries", "1"), 0);
    CU_ASSERT_EQUAL_FATAL(resume(cy, k->token, msg, sizeof msg), 0);
    CU_ASSERT_STRING_EQUAL(msg, "queued"); /* y executes nothing */
    /* The Analyst's send to the CFO through the Gate, in a context of the run. */
    charter_status s;
    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = id;
    os.step = "analyze";
    Charter__V1__StepContext *ctx = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_open_step(cy, &os, &ctx, &s), 0);
    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = ctx->context_id;
    rs.resource_id = "budget";
    Charter__V1__ReadSourceResponse *src = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_read_source(cy, &rs, &src, &s), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src->artifact);
    char *inputs[1] = {src->artifact->id};
    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    ro.context_id = ctx->context_id;
    ro.input_ids = inputs;
    ro.n_input_ids = 1;
    ro.title = "Internal recommendation";
    ro.content = "Recommendation under CEILING-48200.";
    Charter__V1__RecordOutputResponse *rec = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_record_output(cy, &ro, &rec, &s), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rec->artifact);
    Charter__V1__DeliverRequest dr = CHARTER__V1__DELIVER_REQUEST__INIT;
    dr.context_id = ctx->context_id;
    dr.payload_id = rec->artifact->id;
    dr.recipient = "cfo";
    dr.tool = "deliver_internal";
    dr.invocation_id = "gate-send";
    Charter__V1__DeliverResponse *del = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_deliver(cy, &dr, &del, &s), 0);
    CU_ASSERT_EQUAL(del->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    charter__v1__deliver_response__free_unpacked(del, NULL);
    charter__v1__record_output_response__free_unpacked(rec, NULL);
    charter__v1__read_source_response__free_unpacked(src, NULL);
    charter__v1__step_context__free_unpacked(ctx, NULL);

    CU_ASSERT_EQUAL_FATAL(start(g, true, "1", &z, &cz), 0);
    CU_ASSERT_TRUE(wait_for_status(cz, id, "completed,blocked,error,budget_exhausted,cancelled",
                                   30000, status));
    CU_ASSERT_STRING_EQUAL(status, "budget_exhausted");
    Charter__V1__RunView *v = get_run(cz, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL_FATAL(v->n_deliveries, 1);
    CU_ASSERT_STRING_EQUAL(v->deliveries[0]->invocation_id, "gate-send");
    char want[256];
    snprintf(want, sizeof want,
             "the conditional write was refused: budget_deliveries: run %s has used up its "
             "max_deliveries budget of 1; nothing was delivered",
             id);
    size_t refused = 0;
    for (size_t i = 0; i < v->n_events; i++)
        if (strcmp(v->events[i]->kind, "delivery_decided") == 0 &&
            v->events[i]->outcome == CHARTER__V1__OUTCOME__UNKNOWN) {
            refused++;
            CU_ASSERT_STRING_EQUAL(v->events[i]->witness, want);
        }
    CU_ASSERT_EQUAL(refused, 1);
    const char *last = v->events[v->n_events - 1]->detail;
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "running -> budget_exhausted"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "\"budget\":\"max_deliveries\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "\"step\":\"analyze\""));
    charter__v1__run_view__free_unpacked(v, NULL);
    charter__v1__checkpoint__free_unpacked(k, NULL);
    charter_client_close(cy);
    charter_client_close(cz);
    CU_ASSERT_EQUAL(harness_charterd_stop(&y), 0);
    CU_ASSERT_EQUAL(harness_charterd_stop(&z), 0);
    harness_graph_drop(g);
}

static void test_a_model_request_sent_after_the_checkpoint_counts_against_the_budget(void)
{
    char g[64], id[80], msg[512];
    /* Interrupted in analyze's model request: the checkpoint before analyze counts 1 model
     * call, but 2 requests went to the provider (research's, and analyze's in flight). */
    harness_charterd y;
    charter_client *cy = NULL;
    Charter__V1__Checkpoint *k = interrupted_in_analyze("ckpt_inflight", g, id, &y, &cy);
    CU_ASSERT_EQUAL(k->model_calls, 1);
    Charter__V1__RunView *v = get_run(cy, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(v->run->model_calls, 2); /* the run counts what was sent */
    charter__v1__run_view__free_unpacked(v, NULL);
    /* With max_model_calls 2, both are used up: resuming would send a third request. */
    CU_ASSERT_EQUAL_FATAL(set_run_budget(g, id, "max_model_calls", "2"), 0);
    CU_ASSERT_EQUAL(resume(cy, k->token, msg, sizeof msg), CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "budget max_model_calls is exhausted at checkpoint"));
    v = get_run(cy, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "interrupted");
    charter__v1__run_view__free_unpacked(v, NULL);
    /* With 3 the resume goes on, and the resumed run counts from 2: analyze's request again
     * is the third and last (report stops at its input gate, as in the reference run). */
    CU_ASSERT_EQUAL_FATAL(set_run_budget(g, id, "max_model_calls", "3"), 0);
    CU_ASSERT_EQUAL(resume(cy, k->token, msg, sizeof msg), 0);
    harness_charterd z;
    charter_client *cz = NULL;
    int before = harness_model_requests(model);
    CU_ASSERT_EQUAL_FATAL(start(g, true, "1", &z, &cz), 0);
    char status[32];
    CU_ASSERT_TRUE(wait_for_status(cz, id, "completed,blocked,error,budget_exhausted,cancelled",
                                   15000, status));
    CU_ASSERT_STRING_EQUAL(status, "blocked");
    CU_ASSERT_EQUAL(harness_model_requests(model) - before, 1);
    v = get_run(cz, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(v->run->model_calls, 3);
    charter__v1__run_view__free_unpacked(v, NULL);
    charter__v1__checkpoint__free_unpacked(k, NULL);
    charter_client_close(cy);
    charter_client_close(cz);
    CU_ASSERT_EQUAL(harness_charterd_stop(&y), 0);
    CU_ASSERT_EQUAL(harness_charterd_stop(&z), 0);
    harness_graph_drop(g);
}

/* The reference workflow renamed, with budget ceilings set on grants by edit (a JSON object
 * text per grant id, or NULL); the definition's text, malloc'd. */
static char *procurement_with(const char *name, const char *root_budget, const char *analyst_budget)
{
    json_error_t err;
    json_t *doc = json_load_file(CHARTER_SOURCE_DIR "/deploy/workflows/procurement.json", 0, &err);
    if (doc == NULL)
        return NULL;
    json_object_set_new(doc, "name", json_string(name));
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(doc, "grants"), i, g)
    {
        const char *id = json_string_value(json_object_get(g, "id"));
        const char *b = strcmp(id, "g_root") == 0      ? root_budget
                        : strcmp(id, "g_analyst") == 0 ? analyst_budget
                                                       : NULL;
        if (b != NULL)
            json_object_set_new(g, "budget", json_loads(b, 0, NULL));
    }
    char *text = json_dumps(doc, JSON_INDENT(1));
    json_decref(doc);
    return text;
}

static int apply(charter_client *c, const char *text, char *msg, size_t n)
{
    Charter__V1__ApplyWorkflowRequest req = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    req.definition.data = (uint8_t *)text;
    req.definition.len = strlen(text);
    Charter__V1__WorkflowInfo *w = NULL;
    charter_status s;
    int rc = charter_apply_workflow(c, &req, &w, &s);
    snprintf(msg, n, "%s", rc == 0 ? "" : s.message);
    if (w)
        charter__v1__workflow_info__free_unpacked(w, NULL);
    return rc == 0 ? 0 : s.code;
}

static Charter__V1__RunView *create_budgeted(charter_client *c, const char *workflow,
                                             const char *key, int64_t value, int *code, char *msg,
                                             size_t n)
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    Charter__V1__CreateRunRequest__BudgetEntry e, *ptr = &e;
    charter__v1__create_run_request__budget_entry__init(&e);
    e.key = (char *)key;
    e.value = value;
    req.workflow = (char *)workflow;
    req.n_budget = key ? 1 : 0;
    req.budget = &ptr;
    Charter__V1__RunView *v = NULL;
    charter_status s;
    int rc = charter_create_run(c, &req, &v, &s);
    *code = rc == 0 ? 0 : s.code;
    snprintf(msg, n, "%s", rc == 0 ? "" : s.message);
    return v;
}

static void test_budget_ceilings_narrow_down_the_grant_chain_and_bound_the_run(void)
{
    char g[64], msg[512];
    harness_graph_name(g, sizeof g, "ckpt_ceilings");
    harness_charterd d;
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(start(g, true, "1", &d, &c), 0);
    /* A delegated grant may lower a ceiling, never raise it. */
    char *wide =
        procurement_with("procurement_wide", "{\"max_model_calls\":4}", "{\"max_model_calls\":10}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(wide);
    CU_ASSERT_EQUAL(apply(c, wide, msg, sizeof msg), CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(msg, "budget.max_model_calls: 10 is above the grant g_root's ceiling 4 (widening)"));
    free(wide);
    char *unknown = procurement_with("procurement_unknown", "{\"max_tokens\":4}", NULL);
    CU_ASSERT_EQUAL(apply(c, unknown, msg, sizeof msg), CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "budget.max_tokens: unknown budget"));
    free(unknown);
    char *zero = procurement_with("procurement_zero", "{\"max_steps\":0}", NULL);
    CU_ASSERT_EQUAL(apply(c, zero, msg, sizeof msg), CHARTER_INVALID_ARGUMENT);
    free(zero);
    /* Narrowing: g_root allows 5 steps and 4 model calls, g_analyst (delegated) 2 steps. */
    char *narrow = procurement_with("procurement_ceilings",
                                    "{\"max_steps\":5,\"max_model_calls\":4}", "{\"max_steps\":2}");
    CU_ASSERT_EQUAL_FATAL(apply(c, narrow, msg, sizeof msg), 0);
    free(narrow);
    int code = 0;
    /* A run asking more than its chain allows is refused. */
    CU_ASSERT_PTR_NULL(
        create_budgeted(c, "procurement_ceilings", "max_steps", 3, &code, msg, sizeof msg));
    CU_ASSERT_EQUAL(code, CHARTER_PERMISSION_DENIED);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "SCOPE_WIDENING: budget max_steps 3 is above the ceiling 2 "
                                       "of grant g_analyst"));
    CU_ASSERT_PTR_NULL(
        create_budgeted(c, "procurement_ceilings", "max_model_calls", 5, &code, msg, sizeof msg));
    CU_ASSERT_EQUAL(code, CHARTER_PERMISSION_DENIED);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "ceiling 4 of grant g_root"));
    /* Asking less is fine; asking nothing gets the ceilings, and the step ceiling fires before
     * the third step (the reference workflow has three). */
    Charter__V1__RunView *v =
        create_budgeted(c, "procurement_ceilings", "max_steps", 1, &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "budget_exhausted");
    CU_ASSERT_EQUAL(v->run->max_steps, 1);
    CU_ASSERT_EQUAL(v->run->max_model_calls, 4);
    charter__v1__run_view__free_unpacked(v, NULL);
    v = create_budgeted(c, "procurement_ceilings", NULL, 0, &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "budget_exhausted");
    CU_ASSERT_EQUAL(v->run->max_steps, 2);
    CU_ASSERT_EQUAL(v->run->max_model_calls, 4);
    CU_ASSERT_EQUAL(v->run->steps, 2);
    const char *last = v->events[v->n_events - 1]->detail;
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "\"budget\":\"max_steps\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "\"step\":\"report\""));
    /* The run receipt records the budgets the run carried and the counters it ended with, in
     * the MAC's text (format 2): changing them breaks the MAC. */
    Charter__V1__GetReceiptRequest rq = CHARTER__V1__GET_RECEIPT_REQUEST__INIT;
    rq.run_id = v->run->id;
    Charter__V1__Receipt *r = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_get_receipt(c, &rq, &r, &st), 0);
    CU_ASSERT_STRING_EQUAL(r->status, "budget_exhausted");
    CU_ASSERT_STRING_EQUAL(r->budget, "max_model_calls=4,max_steps=2");
    CU_ASSERT_PTR_NOT_NULL(strstr(r->counters, ",model_calls=2,steps=2,deliveries=1"));
    CU_ASSERT_EQUAL(strncmp(r->counters, "wall_clock_ms=", 14), 0);
    char why[256];
    char *text = NULL;
    size_t tlen = 0;
    CU_ASSERT_EQUAL(charter_receipt_text(r, &text, &tlen, why, sizeof why), 0);
    CU_ASSERT_PTR_NOT_NULL(text ? strstr(text, "format=charter-receipt-2\n") : NULL);
    CU_ASSERT_PTR_NOT_NULL(text ? strstr(text, "\nbudget=max_model_calls=4,max_steps=2\n") : NULL);
    free(text);
    CU_ASSERT_EQUAL(charter_receipt_verify(r, key_bytes, key_len, why, sizeof why), 0);
    char *kept_counters = r->counters, *kept_budget = r->budget;
    r->counters = "wall_clock_ms=1,model_calls=0,steps=0,deliveries=0";
    CU_ASSERT_NOT_EQUAL(charter_receipt_verify(r, key_bytes, key_len, why, sizeof why), 0);
    r->budget = "";
    r->counters = ""; /* stripped back to a format 1 text: the MAC does not match either */
    CU_ASSERT_NOT_EQUAL(charter_receipt_verify(r, key_bytes, key_len, why, sizeof why), 0);
    r->counters = kept_counters;
    r->budget = kept_budget;
    charter__v1__receipt__free_unpacked(r, NULL);
    charter__v1__run_view__free_unpacked(v, NULL);
    /* The startup workflow carries no ceilings: the same request is fine there. */
    v = create_budgeted(c, NULL, "max_steps", 3, &code, msg, sizeof msg);
    CU_ASSERT_PTR_NOT_NULL(v);
    if (v)
        charter__v1__run_view__free_unpacked(v, NULL);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(g);
}

/* --- registration ---------------------------------------------------------------------------- */

static void teardown(void)
{
    harness_model_stop(model);
}

static const harness_test tests[] = {
    {"without an integrity key, checkpoint and resume are refused",
     test_without_integrity_key_checkpoint_and_resume_are_refused},
    {"20 resumers over two charterd: exactly one wins",
     test_twenty_resumers_over_two_charterd_exactly_one_wins},
    {"forged, altered, other-graph, other-version checkpoints are refused",
     test_forged_altered_other_graph_and_other_version_checkpoints_are_refused},
    {"kill -9 of the executor, resume on another charterd, run ends",
     test_killed_executor_then_resume_on_another_charterd_runs_to_the_end},
    {"a cancel requested before the executor died survives a resume",
     test_cancel_requested_before_the_executor_died_survives_a_resume},
    {"revocation between checkpoint and resume stops at the first gate",
     test_revocation_between_checkpoint_and_resume_stops_at_the_first_gate},
    {"a budget used up at resume time stops the resumed run at once",
     test_budget_used_up_at_resume_time_stops_the_resumed_run_at_once},
    {"a delivery budget used up after the checkpoint ends the resumed run",
     test_a_delivery_budget_used_up_after_the_checkpoint_ends_the_resumed_run},
    {"a model request sent after the checkpoint counts against the budget",
     test_a_model_request_sent_after_the_checkpoint_counts_against_the_budget},
    {"budget ceilings narrow down the grant chain and bound the run",
     test_budget_ceilings_narrow_down_the_grant_chain_and_bound_the_run},
};
static const harness_suite suites[] = {
    {"checkpoints and resume", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .teardown = teardown};
