/*
 * test_evidence.c - replay, signed receipts and the tamper-evident event log, against real
 * charterd processes on the test Redis, driven through libcharter and the charter CLI.
 *
 * The canonical texts are pinned down first, by hand. Then a charterd with an integrity key
 * runs the reference workflow; its decisions are replayed from their snapshots (also after a
 * revocation and a restart), its receipts are checked offline, and its event log is edited,
 * cut and extended with raw Redis commands, as an intruder with database access would, so the
 * audit must name the event. Startup refuses a key that does not match the graph's.
 */
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "charter.h"
#include "evidence/evlog.h"
#include "harness.h"
#include "suite.h"
#include "evidence/integrity.h"
#include "policy/evaluator.h"
#include "receipt.h"

static const char *HANDOFF_WITNESS =
    "budget (confidential) \xe2\x86\x92 Internal recommendation \xe2\x86\x92 report step "
    "{vendor_a, vendor_b, vendor_c}";

static char tmpdir[] = "/tmp/charter-evidence-XXXXXX";
static char key_path[256], key2_path[256], key_text[65];
static unsigned char key_bytes[CHARTER_RECEIPT_KEY_MAX];
static size_t key_len;
static char graph[64], keyless_graph[64];
static harness_charterd daemon_;
static charter_client *op;
static redisContext *raw;
static char run_id[129];

/* --- small helpers ----------------------------------------------------------------------- */

static void hex_of(const unsigned char *md, unsigned n, char *hex)
{
    for (unsigned i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* Writes text to path with the given mode. 0 or -1. */
static int write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -1;
    close(fd);
    return rc == 0 && chmod(path, mode) == 0 ? 0 : -1;
}

/* A key file like `openssl rand -hex 32 > FILE`: 64 hex digits and a newline. */
static int make_key(const char *path, char text[65])
{
    unsigned char rnd[32];
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(rnd, 1, sizeof rnd, f) != sizeof rnd) {
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    hex_of(rnd, 32, text);
    char line[70];
    snprintf(line, sizeof line, "%s\n", text);
    return write_file(path, line, 0600);
}

static redisContext *raw_open(void)
{
    const char *url = harness_redis_url();
    struct timeval tv = {10, 0};
    if (strncmp(url, "unix://", 7) == 0)
        return redisConnectUnixWithTimeout(url + 7, tv);
    char host[256];
    const char *colon = strrchr(url + 6, ':');
    if (!colon || (size_t)(colon - (url + 6)) >= sizeof host)
        return NULL;
    memcpy(host, url + 6, (size_t)(colon - (url + 6)));
    host[colon - (url + 6)] = '\0';
    return redisConnectWithTimeout(host, atoi(colon + 1), tv);
}

/* One raw Redis command, as redis-cli would send it (argv, binary safe). */
static redisReply *rawv(int argc, const char **argv)
{
    return redisCommandArgv(raw, argc, argv, NULL);
}

static void rawdo(int argc, const char **argv)
{
    redisReply *r = rawv(argc, argv);
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r)
        CU_ASSERT_NOT_EQUAL(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

static void event_key(char *buf, size_t n, const char *g, const char *run, unsigned long long seq)
{
    snprintf(buf, n, "charter:{%s}:event:%s:%llu", g, run, seq);
}

/* A field of a Redis hash into out (n bytes); "" when absent. */
static void hget(const char *key, const char *field, char *out, size_t n)
{
    const char *argv[3] = {"HGET", key, field};
    redisReply *r = rawv(3, argv);
    snprintf(out, n, "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

static int open_client(const harness_charterd *d, charter_client **c)
{
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = 60000;
    o.connect_timeout_ms = 5000;
    return charter_client_open(d->ipc_url, HARNESS_OPERATOR_TOKEN, &o, c);
}

static int start_keyed(void)
{
    const char *extra[2] = {"--integrity-key", key_path};
    harness_charterd_opts o = {.graph = graph, .extra_args = extra, .n_extra = 2};
    if (harness_charterd_start(&o, &daemon_) != 0)
        return -1;
    return open_client(&daemon_, &op);
}

static Charter__V1__RunView *get_run(const char *id)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)id;
    Charter__V1__RunView *view = NULL;
    charter_status st;
    if (charter_get_run(op, &req, &view, &st) != 0) {
        fprintf(stderr, "GetRun: %s: %s\n", charter_status_name(st.code), st.message);
        return NULL;
    }
    return view;
}

/* The detail field key of an event, or "". */
static void detail_field(const Charter__V1__Event *e, const char *key, char *out, size_t n)
{
    json_t *d = json_loads(e->detail, 0, NULL);
    const char *s = json_string_value(json_object_get(d, key));
    snprintf(out, n, "%s", s ? s : "");
    json_decref(d);
}

/* The seq of the last event of kind with outcome whose detail has key = value, or 0. */
static uint64_t find_event(const char *kind, Charter__V1__Outcome outcome, const char *key,
                           const char *value)
{
    Charter__V1__RunView *v = get_run(run_id);
    uint64_t seq = 0;
    for (size_t i = 0; v && i < v->n_events; i++) {
        const Charter__V1__Event *e = v->events[i];
        char got[128];
        detail_field(e, key, got, sizeof got);
        if (strcmp(e->kind, kind) == 0 && e->outcome == outcome && strcmp(got, value) == 0)
            seq = e->seq;
    }
    if (v)
        charter__v1__run_view__free_unpacked(v, NULL);
    return seq;
}

static uint64_t run_seq(void)
{
    Charter__V1__RunView *v = get_run(run_id);
    uint64_t seq = v && v->run ? v->run->seq : 0;
    if (v)
        charter__v1__run_view__free_unpacked(v, NULL);
    return seq;
}

static Charter__V1__ReplayDecisionResponse *replay(uint64_t seq, charter_status *st)
{
    Charter__V1__ReplayDecisionRequest req = CHARTER__V1__REPLAY_DECISION_REQUEST__INIT;
    req.run_id = run_id;
    req.seq = seq;
    Charter__V1__ReplayDecisionResponse *r = NULL;
    charter_status local;
    if (charter_replay_decision(op, &req, &r, st ? st : &local) != 0)
        return NULL;
    return r;
}

static Charter__V1__AuditRunResponse *audit(void)
{
    Charter__V1__AuditRunRequest req = CHARTER__V1__AUDIT_RUN_REQUEST__INIT;
    req.run_id = run_id;
    Charter__V1__AuditRunResponse *r = NULL;
    charter_status st;
    if (charter_audit_run(op, &req, &r, &st) != 0) {
        fprintf(stderr, "AuditRun: %s: %s\n", charter_status_name(st.code), st.message);
        return NULL;
    }
    return r;
}

/* Audits the run and expects it intact (true) or broken at seq with problem containing word. */
static void expect_audit(bool intact, uint64_t seq, const char *word)
{
    Charter__V1__AuditRunResponse *a = audit();
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(a->intact, intact);
    CU_ASSERT_TRUE(a->keyed);
    if (intact) {
        CU_ASSERT_EQUAL(a->first_bad_seq, 0);
        CU_ASSERT_STRING_EQUAL(a->problem, "");
    } else {
        CU_ASSERT_EQUAL(a->first_bad_seq, seq);
        CU_ASSERT_PTR_NOT_NULL(strstr(a->problem, word));
        if (a->first_bad_seq != seq || !strstr(a->problem, word))
            fprintf(stderr, "audit: first bad %llu (expected %llu): %s\n",
                    (unsigned long long)a->first_bad_seq, (unsigned long long)seq, a->problem);
    }
    charter__v1__audit_run_response__free_unpacked(a, NULL);
}

static Charter__V1__Receipt *receipt(const char *inv, charter_status *st)
{
    Charter__V1__GetReceiptRequest req = CHARTER__V1__GET_RECEIPT_REQUEST__INIT;
    req.run_id = run_id;
    req.invocation_id = (char *)(inv ? inv : "");
    Charter__V1__Receipt *r = NULL;
    charter_status local;
    if (charter_get_receipt(op, &req, &r, st ? st : &local) != 0)
        return NULL;
    return r;
}

static Charter__V1__RecoverRunResponse *recover(void)
{
    Charter__V1__RecoverRunRequest req = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    req.run_id = run_id;
    Charter__V1__RecoverRunResponse *r = NULL;
    charter_status st;
    if (charter_recover_run(op, &req, &r, &st) != 0) {
        fprintf(stderr, "RecoverRun: %s: %s\n", charter_status_name(st.code), st.message);
        return NULL;
    }
    return r;
}

static void grant(const char *id, bool revoke)
{
    charter_status st;
    if (revoke) {
        Charter__V1__RevokeGrantRequest req = CHARTER__V1__REVOKE_GRANT_REQUEST__INIT;
        req.grant_id = (char *)id;
        Charter__V1__Grant *g = NULL;
        CU_ASSERT_EQUAL(charter_revoke_grant(op, &req, &g, &st), 0);
        if (g)
            charter__v1__grant__free_unpacked(g, NULL);
    } else {
        Charter__V1__RestoreGrantsRequest req = CHARTER__V1__RESTORE_GRANTS_REQUEST__INIT;
        req.grant_id = (char *)id;
        Charter__V1__RestoreGrantsResponse *r = NULL;
        CU_ASSERT_EQUAL(charter_restore_grants(op, &req, &r, &st), 0);
        if (r)
            charter__v1__restore_grants_response__free_unpacked(r, NULL);
    }
}

/* --- canonical texts, by hand ---------------------------------------------------------------- */

static void fill_delivery_receipt(Charter__V1__Receipt *r, char **chain)
{
    charter__v1__receipt__init(r);
    chain[0] = "g_reporter";
    chain[1] = "g_analyst";
    chain[2] = "g_root";
    r->kind = "delivery";
    r->run_id = "r1";
    r->invocation_id = "r1:report:deliver";
    r->payload_hash = "e5b89c49230261c7471ca0587298dcad16f2f6f81cc2060c59dc31273996c959";
    r->recipient = "public";
    r->tool = "deliver_public";
    r->grant_chain = chain;
    r->n_grant_chain = 3;
    r->time = "1795977514.340972";
    r->evaluator = "9330d90ef5ab715a26ea6ac39e2d8ce3f4dead1ef54d7dbda22fd378c408bedb";
}

static const char *DELIVERY_TEXT =
    "format=charter-receipt-1\n"
    "kind=delivery\n"
    "run_id=r1\n"
    "invocation_id=r1:report:deliver\n"
    "payload_hash=e5b89c49230261c7471ca0587298dcad16f2f6f81cc2060c59dc31273996c959\n"
    "recipient=public\n"
    "tool=deliver_public\n"
    "grant_chain=g_reporter,g_analyst,g_root\n"
    "time=1795977514.340972\n"
    "evaluator=9330d90ef5ab715a26ea6ac39e2d8ce3f4dead1ef54d7dbda22fd378c408bedb\n";

static void test_receipt_text_is_the_documented_lines(void)
{
    Charter__V1__Receipt r;
    char *chain[3];
    fill_delivery_receipt(&r, chain);
    char *text = NULL, err[160];
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(charter_receipt_text(&r, &text, &len, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(text, DELIVERY_TEXT);
    CU_ASSERT_EQUAL(len, strlen(DELIVERY_TEXT));
    free(text);

    Charter__V1__Receipt run = CHARTER__V1__RECEIPT__INIT;
    char *deliveries[2] = {"r1:analyze:deliver", "r1:report:deliver"};
    run.kind = "run";
    run.run_id = "r1";
    run.status = "completed";
    run.last_seq = 33;
    run.last_event_hash = "54f521b1ec799f55deee0b969cffdf9ea96153d7cf1375e44ce869ad4068046a";
    run.deliveries = deliveries;
    run.n_deliveries = 2;
    run.time = "1795977514.341293";
    run.evaluator = "9330d90ef5ab715a26ea6ac39e2d8ce3f4dead1ef54d7dbda22fd378c408bedb";
    CU_ASSERT_EQUAL_FATAL(charter_receipt_text(&run, &text, &len, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(text,
                           "format=charter-receipt-1\n"
                           "kind=run\n"
                           "run_id=r1\n"
                           "status=completed\n"
                           "last_seq=33\n"
                           "last_event_hash=54f521b1ec799f55deee0b969cffdf9ea96153d7cf1375e44ce869"
                           "ad4068046a\n"
                           "deliveries=r1:analyze:deliver,r1:report:deliver\n"
                           "time=1795977514.341293\n"
                           "evaluator=9330d90ef5ab715a26ea6ac39e2d8ce3f4dead1ef54d7dbda22fd378c408"
                           "bedb\n");
    free(text);
}

static void test_receipt_mac_is_hmac_sha256_of_the_text_and_verifies_offline(void)
{
    const unsigned char key[] = "0123456789abcdef0123456789abcdef-test-key";
    size_t klen = sizeof key - 1;
    unsigned char md[32];
    unsigned int mdlen = 0;
    char want[65], mac[65], err[200];
    HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)DELIVERY_TEXT, strlen(DELIVERY_TEXT),
         md, &mdlen);
    CU_ASSERT_EQUAL_FATAL(mdlen, 32);
    hex_of(md, 32, want);

    Charter__V1__Receipt r;
    char *chain[3];
    fill_delivery_receipt(&r, chain);
    CU_ASSERT_EQUAL_FATAL(charter_receipt_mac(&r, key, klen, mac, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(mac, want);
    r.mac = mac;
    CU_ASSERT_EQUAL(charter_receipt_verify(&r, key, klen, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(err, "valid");

    /* another recipient, another key, another order of the chain: the mac no longer holds */
    r.recipient = "cfo";
    CU_ASSERT_EQUAL(charter_receipt_verify(&r, key, klen, err, sizeof err),
                    -CHARTER_UNAUTHENTICATED);
    r.recipient = "public";
    CU_ASSERT_EQUAL(charter_receipt_verify(&r, key, klen - 1, err, sizeof err),
                    -CHARTER_UNAUTHENTICATED);
    chain[0] = "g_analyst";
    chain[1] = "g_reporter";
    CU_ASSERT_EQUAL(charter_receipt_verify(&r, key, klen, err, sizeof err),
                    -CHARTER_UNAUTHENTICATED);
    chain[0] = "g_reporter";
    chain[1] = "g_analyst";
    CU_ASSERT_EQUAL(charter_receipt_verify(&r, key, klen, err, sizeof err), 0);

    /* fields the text cannot carry, or that the mac would not cover, are malformed */
    r.status = "completed";
    CU_ASSERT_EQUAL(charter_receipt_verify(&r, key, klen, err, sizeof err),
                    -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "status"));
    r.status = "";
    r.tool = "deliver_public\nrecipient=cfo";
    CU_ASSERT_EQUAL(charter_receipt_verify(&r, key, klen, err, sizeof err),
                    -CHARTER_INVALID_ARGUMENT);
    r.tool = "deliver_public";
    chain[2] = "g_root,g_other";
    CU_ASSERT_EQUAL(charter_receipt_verify(&r, key, klen, err, sizeof err),
                    -CHARTER_INVALID_ARGUMENT);
    chain[2] = "g_root";
    r.mac = "3e8af0174c7607057b4693415e2b3951e810dcb30e3848905b3f7d903d939BAD";
    CU_ASSERT_EQUAL(charter_receipt_verify(&r, key, klen, err, sizeof err),
                    -CHARTER_INVALID_ARGUMENT);
}

static void test_event_text_and_hash_keyed_and_not(void)
{
    evlog_fields f = {"r1",
                      "2",
                      "1795977460.713344",
                      "status_changed",
                      "",
                      "",
                      "",
                      "created -> running",
                      "",
                      "",
                      "d5810ab9462f4f70a1d0d252c7fe59f52b506f331915f57f972cbdf164c2c937"};
    const char *want = "charter-event-2\n"
                       "run_id=2:r1\n"
                       "seq=1:2\n"
                       "ts=17:1795977460.713344\n"
                       "kind=14:status_changed\n"
                       "outcome=0:\n"
                       "codes=0:\n"
                       "witness=0:\n"
                       "detail=18:created -> running\n"
                       "snapshot=0:\n"
                       "evaluator=0:\n"
                       "prev=64:d5810ab9462f4f70a1d0d252c7fe59f52b506f331915f57f972cbdf164c2c937\n";
    char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(evlog_event_text(&f, &text, &len), STATUS_OK);
    CU_ASSERT_STRING_EQUAL(text, want);
    CU_ASSERT_EQUAL(len, strlen(want));
    free(text);

    unsigned char md[32];
    unsigned int mdlen = 0;
    char sha[65], hmac[65], got[65];
    EVP_Digest(want, strlen(want), md, &mdlen, EVP_sha256(), NULL);
    hex_of(md, 32, sha);
    const unsigned char key[] = "an integrity key of at least thirty-two bytes";
    HMAC(EVP_sha256(), key, (int)(sizeof key - 1), (const unsigned char *)want, strlen(want), md,
         &mdlen);
    hex_of(md, 32, hmac);

    CU_ASSERT_EQUAL_FATAL(integrity_set_key(NULL, 0), STATUS_OK);
    CU_ASSERT_EQUAL(evlog_event_hash(&f, got), STATUS_OK);
    CU_ASSERT_STRING_EQUAL(got, sha);
    CU_ASSERT_EQUAL_FATAL(integrity_set_key(key, sizeof key - 1), STATUS_OK);
    CU_ASSERT_TRUE(evlog_keyed());
    CU_ASSERT_EQUAL(evlog_event_hash(&f, got), STATUS_OK);
    CU_ASSERT_STRING_EQUAL(got, hmac);
    /* a byte more in the witness is another hash */
    f.witness = "x";
    CU_ASSERT_EQUAL(evlog_event_hash(&f, got), STATUS_OK);
    CU_ASSERT_STRING_NOT_EQUAL(got, hmac);
    integrity_forget();
    CU_ASSERT_FALSE(evlog_keyed());
}

static void test_key_file_must_be_private_and_long_enough(void)
{
    char path[300], err[400];
    unsigned char key[CHARTER_RECEIPT_KEY_MAX];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/k-test", tmpdir);
    const char *text = "5f1e0c1d3a2b4c6d8e9f00112233445566778899aabbccddeeff001122334455\n";
    CU_ASSERT_EQUAL_FATAL(write_file(path, text, 0600), 0);
    CU_ASSERT_EQUAL(charter_receipt_key_load(path, key, sizeof key, &len, err, sizeof err), 0);
    CU_ASSERT_EQUAL(len, strlen(text)); /* byte for byte, newline included */
    CU_ASSERT_EQUAL(memcmp(key, text, len), 0);

    CU_ASSERT_EQUAL_FATAL(chmod(path, 0640), 0);
    CU_ASSERT_EQUAL(charter_receipt_key_load(path, key, sizeof key, &len, err, sizeof err),
                    -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "chmod 600"));
    CU_ASSERT_PTR_NULL(strstr(err, "5f1e0c1d")); /* never the contents */
    CU_ASSERT_EQUAL_FATAL(write_file(path, "too short\n", 0600), 0);
    CU_ASSERT_EQUAL(charter_receipt_key_load(path, key, sizeof key, &len, err, sizeof err),
                    -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "10 bytes"));
    snprintf(path, sizeof path, "%s/k-missing", tmpdir);
    CU_ASSERT_EQUAL(charter_receipt_key_load(path, key, sizeof key, &len, err, sizeof err),
                    -CHARTER_NOT_FOUND);
    CU_ASSERT_EQUAL(charter_receipt_key_load(tmpdir, key, sizeof key, &len, err, sizeof err),
                    -CHARTER_INVALID_ARGUMENT); /* a folder */
}

/* --- the reference workflow with an integrity key ------------------------------------------ */

static int suite_init(void)
{
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(key_path, sizeof key_path, "%s/integrity.key", tmpdir);
    snprintf(key2_path, sizeof key2_path, "%s/other.key", tmpdir);
    char other[65];
    char err[300];
    if (make_key(key_path, key_text) != 0 || make_key(key2_path, other) != 0 ||
        charter_receipt_key_load(key_path, key_bytes, sizeof key_bytes, &key_len, err,
                                 sizeof err) != 0)
        return -1;
    harness_graph_name(graph, sizeof graph, "evidence");
    harness_graph_name(keyless_graph, sizeof keyless_graph, "evidence_keyless");
    store *st = harness_store_open(graph);
    store_close(st);
    st = harness_store_open(keyless_graph);
    store_close(st);
    if ((raw = raw_open()) == NULL || raw->err)
        return -1;
    return start_keyed();
}

static int suite_clean(void)
{
    charter_client_close(op);
    int rc = daemon_.pid ? harness_charterd_stop(&daemon_) : 0;
    harness_graph_drop(graph);
    harness_graph_drop(keyless_graph);
    if (raw)
        redisFree(raw);
    OPENSSL_cleanse(key_bytes, sizeof key_bytes);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        rc = -1;
    return rc == 0 ? 0 : -1;
}

static void test_run_is_sealed_into_an_intact_keyed_chain(void)
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "scripted";
    Charter__V1__RunView *view = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &req, &view, &st), 0);
    snprintf(run_id, sizeof run_id, "%s", view->run->id);
    CU_ASSERT_STRING_EQUAL(view->run->status, "blocked");
    uint64_t seq = view->run->seq;
    charter__v1__run_view__free_unpacked(view, NULL);

    Charter__V1__AuditRunResponse *a = audit();
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_TRUE(a->intact);
    CU_ASSERT_TRUE(a->keyed);
    CU_ASSERT_EQUAL(a->events, seq);
    charter__v1__audit_run_response__free_unpacked(a, NULL);

    /* each event's prev is its predecessor's hash, and the run's head is the last hash */
    char key[256], prev[80], hash[80], head[80];
    event_key(key, sizeof key, graph, run_id, 1);
    hget(key, "prev", prev, sizeof prev);
    CU_ASSERT_STRING_EQUAL(prev, "");
    for (uint64_t s = 2; s <= seq; s++) {
        event_key(key, sizeof key, graph, run_id, s - 1);
        hget(key, "hash", hash, sizeof hash);
        event_key(key, sizeof key, graph, run_id, s);
        hget(key, "prev", prev, sizeof prev);
        CU_ASSERT_STRING_EQUAL(prev, hash);
    }
    event_key(key, sizeof key, graph, run_id, seq);
    hget(key, "hash", hash, sizeof hash);
    snprintf(key, sizeof key, "charter:{%s}:run:%s", graph, run_id);
    hget(key, "head", head, sizeof head);
    CU_ASSERT_STRING_EQUAL(head, hash);
    CU_ASSERT_EQUAL(strlen(head), 64);
}

static void test_replay_of_poisoned_handoff_denies_with_the_same_witness(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    uint64_t seq = find_event("input_checked", CHARTER__V1__OUTCOME__DENY, "step", "report");
    CU_ASSERT_FATAL(seq > 0);
    Charter__V1__ReplayDecisionResponse *r = replay(seq, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_FALSE(r->no_snapshot);
    CU_ASSERT_TRUE(r->matches);
    CU_ASSERT_EQUAL(r->recorded->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r->replayed);
    CU_ASSERT_EQUAL(r->replayed->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_EQUAL(r->replayed->n_codes, 1);
    if (r->replayed->n_codes == 1)
        CU_ASSERT_STRING_EQUAL(r->replayed->codes[0], "INPUT_OUT_OF_SCOPE");
    CU_ASSERT_STRING_EQUAL(r->replayed->witness, HANDOFF_WITNESS);
    CU_ASSERT_STRING_EQUAL(r->recorded->witness, HANDOFF_WITNESS);
    CU_ASSERT_EQUAL(strlen(r->evaluator), 64);
    charter__v1__replay_decision_response__free_unpacked(r, NULL);

    /* an event that records no decision cannot be replayed; an unknown seq is not found */
    charter_status st;
    CU_ASSERT_PTR_NULL(replay(1, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "run_created"));
    CU_ASSERT_PTR_NULL(replay(100000, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_NOT_FOUND);
}

static void test_replay_refuses_an_event_of_another_evaluator(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    uint64_t seq = find_event("input_checked", CHARTER__V1__OUTCOME__DENY, "step", "report");
    CU_ASSERT_FATAL(seq > 0);
    char key[256], was[80];
    event_key(key, sizeof key, graph, run_id, seq);
    hget(key, "evaluator", was, sizeof was);
    CU_ASSERT_EQUAL_FATAL(strlen(was), 64);
    const char *other = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const char *edit[4] = {"HSET", key, "evaluator", other};
    rawdo(4, edit);
    charter_status st;
    CU_ASSERT_PTR_NULL(replay(seq, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, other)); /* both fingerprints are named */
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, was));
    expect_audit(false, seq, "changed"); /* and the edit shows in the chain */
    const char *back[4] = {"HSET", key, "evaluator", was};
    rawdo(4, back);
    expect_audit(true, 0, NULL);
}

/* The evaluator a decision of the build before versions were declared recorded: a
 * fingerprint over its guard's and query library's source (tests/golden/pre-versions.json). */
#define PRE_VERSIONS_EVALUATOR "0313c1505ec82fd9cb35bfb14f90db447b0b972171f9c90212bc9c9dae837f3e"

/* A replay names the evaluator version it decided with; a decision stored as the build before
 * versions recorded it (no version in its snapshot, a source fingerprint) still replays, with
 * the first declared version, and the answer says it was recorded before versions. */
static void test_replay_names_the_version_and_replays_a_decision_from_before_versions(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    uint64_t seq = find_event("input_checked", CHARTER__V1__OUTCOME__DENY, "step", "report");
    CU_ASSERT_FATAL(seq > 0);
    Charter__V1__ReplayDecisionResponse *r = replay(seq, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->evaluator_version, EVALUATOR_VERSION);
    CU_ASSERT_FALSE(r->before_versions);
    charter__v1__replay_decision_response__free_unpacked(r, NULL);

    char key[256], was[80];
    static char snapshot[65536], before[65536];
    event_key(key, sizeof key, graph, run_id, seq);
    hget(key, "evaluator", was, sizeof was);
    hget(key, "snapshot", snapshot, sizeof snapshot);
    char version[32];
    snprintf(version, sizeof version, ",\"evaluator_version\":%d", EVALUATOR_VERSION);
    char *at = strstr(snapshot, version);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    snprintf(before, sizeof before, "%.*s%s", (int)(at - snapshot), snapshot, at + strlen(version));
    const char *edit[6] = {"HSET", key, "evaluator", PRE_VERSIONS_EVALUATOR, "snapshot", before};
    rawdo(6, edit);
    r = replay(seq, NULL);
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r != NULL) {
        CU_ASSERT_TRUE(r->before_versions);
        CU_ASSERT_EQUAL(r->evaluator_version, 2);
        CU_ASSERT_TRUE(r->matches);
        CU_ASSERT_STRING_EQUAL(r->evaluator, PRE_VERSIONS_EVALUATOR);
        CU_ASSERT_STRING_EQUAL(r->replayed->witness, HANDOFF_WITNESS);
        charter__v1__replay_decision_response__free_unpacked(r, NULL);
    }
    /* Without its version but with the current fingerprint it is neither: refused. */
    const char *mixed[4] = {"HSET", key, "evaluator", was};
    rawdo(4, mixed);
    charter_status st;
    CU_ASSERT_PTR_NULL(replay(seq, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "names no evaluator version"));
    const char *back[6] = {"HSET", key, "evaluator", was, "snapshot", snapshot};
    rawdo(6, back);
    expect_audit(true, 0, NULL);
}

static void test_failed_delivery_has_no_snapshot_to_replay(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    /* A grant whose validity cannot be read: the delivery fails operationally. */
    char key[256], was[64];
    snprintf(key, sizeof key, "charter:{%s}:grant:g_reporter", graph);
    hget(key, "valid_from", was, sizeof was);
    CU_ASSERT_FATAL(was[0] != '\0');
    const char *bad[4] = {"HSET", key, "valid_from", "not-a-time"};
    rawdo(4, bad);
    Charter__V1__RecoverRunResponse *r = recover();
    const char *good[4] = {"HSET", key, "valid_from", was};
    rawdo(4, good);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_STRING_EQUAL(r->run->status, "error");
    charter__v1__recover_run_response__free_unpacked(r, NULL);

    uint64_t seq =
        find_event("delivery_decided", CHARTER__V1__OUTCOME__UNKNOWN, "recipient", "public");
    CU_ASSERT_FATAL(seq > 0);
    Charter__V1__ReplayDecisionResponse *rp = replay(seq, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rp);
    CU_ASSERT_TRUE(rp->no_snapshot);
    CU_ASSERT_PTR_NULL(rp->replayed);
    CU_ASSERT_EQUAL(rp->recorded->outcome, CHARTER__V1__OUTCOME__UNKNOWN);
    charter__v1__replay_decision_response__free_unpacked(rp, NULL);

    /* the run ended in error: it has a run receipt for that end */
    Charter__V1__Receipt *rc = receipt(NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rc);
    CU_ASSERT_STRING_EQUAL(rc->status, "error");
    char why[200];
    CU_ASSERT_EQUAL(charter_receipt_verify(rc, key_bytes, key_len, why, sizeof why), 0);
    charter__v1__receipt__free_unpacked(rc, NULL);
}

static void test_public_delivery_gets_a_receipt_that_verifies_offline(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    Charter__V1__RecoverRunResponse *r = recover();
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_STRING_EQUAL(r->run->status, "completed");
    charter__v1__recover_run_response__free_unpacked(r, NULL);

    char inv[200];
    snprintf(inv, sizeof inv, "%s:report:deliver", run_id);
    /* attached right after the commit, before anyone asked */
    char key[400], stored[2048];
    snprintf(key, sizeof key, "charter:{%s}:delivery:%s", graph, inv);
    hget(key, "receipt", stored, sizeof stored);
    CU_ASSERT(strstr(stored, "\"mac\"") != NULL);

    Charter__V1__Receipt *rc = receipt(inv, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rc);
    CU_ASSERT_STRING_EQUAL(rc->kind, "delivery");
    CU_ASSERT_STRING_EQUAL(rc->run_id, run_id);
    CU_ASSERT_STRING_EQUAL(rc->invocation_id, inv);
    CU_ASSERT_STRING_EQUAL(rc->recipient, "public");
    CU_ASSERT_STRING_EQUAL(rc->tool, "deliver_public");
    CU_ASSERT_EQUAL_FATAL(rc->n_grant_chain, 3);
    CU_ASSERT_STRING_EQUAL(rc->grant_chain[0], "g_reporter");
    CU_ASSERT_STRING_EQUAL(rc->grant_chain[2], "g_root");
    CU_ASSERT_EQUAL(strlen(rc->payload_hash), 64);
    char committed[64];
    hget(key, "committed_at", committed, sizeof committed);
    CU_ASSERT_STRING_EQUAL(rc->time, committed);
    uint64_t seq =
        find_event("delivery_decided", CHARTER__V1__OUTCOME__ALLOW, "recipient", "public");
    char ekey[256], fp[80];
    event_key(ekey, sizeof ekey, graph, run_id, seq);
    hget(ekey, "evaluator", fp, sizeof fp);
    CU_ASSERT_STRING_EQUAL(rc->evaluator, fp);
    char why[200];
    CU_ASSERT_EQUAL(charter_receipt_verify(rc, key_bytes, key_len, why, sizeof why), 0);
    /* asking again gives the same receipt */
    Charter__V1__Receipt *again = receipt(inv, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(again);
    CU_ASSERT_STRING_EQUAL(again->mac, rc->mac);
    charter__v1__receipt__free_unpacked(again, NULL);
    charter__v1__receipt__free_unpacked(rc, NULL);

    charter_status st;
    CU_ASSERT_PTR_NULL(receipt("no-such-invocation", &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_NOT_FOUND);
}

static void test_run_receipt_pins_the_last_event_and_every_delivery(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    Charter__V1__Receipt *rc = receipt(NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rc);
    CU_ASSERT_STRING_EQUAL(rc->kind, "run");
    CU_ASSERT_STRING_EQUAL(rc->status, "completed");
    CU_ASSERT_EQUAL(rc->last_seq, run_seq());
    char key[256], head[80];
    snprintf(key, sizeof key, "charter:{%s}:run:%s", graph, run_id);
    hget(key, "head", head, sizeof head);
    CU_ASSERT_STRING_EQUAL(rc->last_event_hash, head);
    CU_ASSERT_EQUAL_FATAL(rc->n_deliveries, 2);
    char a[200], b[200];
    snprintf(a, sizeof a, "%s:analyze:deliver", run_id);
    snprintf(b, sizeof b, "%s:report:deliver", run_id);
    CU_ASSERT_STRING_EQUAL(rc->deliveries[0], a); /* sorted */
    CU_ASSERT_STRING_EQUAL(rc->deliveries[1], b);
    char why[200];
    CU_ASSERT_EQUAL(charter_receipt_verify(rc, key_bytes, key_len, why, sizeof why), 0);
    charter__v1__receipt__free_unpacked(rc, NULL);
}

static void test_replay_after_revocation_still_allows_the_public_delivery(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    uint64_t seq =
        find_event("delivery_decided", CHARTER__V1__OUTCOME__ALLOW, "recipient", "public");
    CU_ASSERT_FATAL(seq > 0);
    grant("g_reporter", true);
    Charter__V1__ReplayDecisionResponse *r = replay(seq, NULL);
    grant("g_reporter", false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_FALSE(r->no_snapshot);
    CU_ASSERT_EQUAL(r->recorded->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_EQUAL(r->replayed->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_EQUAL(r->replayed->n_codes, 0);
    CU_ASSERT_TRUE(r->matches);
    charter__v1__replay_decision_response__free_unpacked(r, NULL);

    /* every decision of the run replays to what was recorded */
    Charter__V1__RunView *v = get_run(run_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    size_t decisions = 0;
    for (size_t i = 0; i < v->n_events; i++) {
        if (v->events[i]->outcome == CHARTER__V1__OUTCOME__OUTCOME_UNSPECIFIED)
            continue;
        decisions++;
        Charter__V1__ReplayDecisionResponse *one = replay(v->events[i]->seq, NULL);
        CU_ASSERT_PTR_NOT_NULL(one);
        if (one) {
            CU_ASSERT_TRUE(one->no_snapshot || one->matches);
            charter__v1__replay_decision_response__free_unpacked(one, NULL);
        }
    }
    CU_ASSERT_TRUE(decisions >= 15);
    charter__v1__run_view__free_unpacked(v, NULL);
}

/* An allowed delivery's event names the facts that repeat from delivery to delivery by a record
 * stored once ({"facts":"<sha256>","now":..}); replay puts the snapshot together from it, and a
 * record altered or deleted behind the server's back fails the replay, naming the record. */
static void test_a_delivery_facts_record_altered_or_missing_fails_its_replay(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    uint64_t seq =
        find_event("delivery_decided", CHARTER__V1__OUTCOME__ALLOW, "recipient", "public");
    CU_ASSERT_FATAL(seq > 0);
    char key[256], snap[256];
    event_key(key, sizeof key, graph, run_id, seq);
    hget(key, "snapshot", snap, sizeof snap);
    const char *open = "{\"facts\":\"";
    CU_ASSERT_EQUAL_FATAL(strncmp(snap, open, strlen(open)), 0);
    char sha[65];
    snprintf(sha, sizeof sha, "%.64s", snap + strlen(open));
    char blob[160];
    snprintf(blob, sizeof blob, "charter:{%s}:blob:%s", graph, sha);
    const char *get[2] = {"GET", blob};
    redisReply *r = rawv(2, get);
    CU_ASSERT_FATAL(r != NULL && r->type == REDIS_REPLY_STRING);
    char *was = strdup(r->str);
    freeReplyObject(r);
    CU_ASSERT_PTR_NOT_NULL_FATAL(was);
    /* The record holds the facts that decided: the gate, the chain, the request. */
    CU_ASSERT_PTR_NOT_NULL(strstr(was, "\"gate\":\"delivery\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(was, "\"chain\":"));
    CU_ASSERT_PTR_NULL(strstr(was, "\"now\":"));

    /* The recipient's clearance raised in the record, as someone with redis-cli could. */
    char *altered = strdup(was);
    char *cl = altered ? strstr(altered, "\"recipient_clearance\":") : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(cl);
    cl += strlen("\"recipient_clearance\":");
    *cl = *cl == '2' ? '3' : '2';
    const char *set[3] = {"SET", blob, altered};
    rawdo(3, set);
    charter_status st;
    Charter__V1__ReplayDecisionResponse *bad = replay(seq, &st);
    CU_ASSERT_PTR_NULL(bad);
    CU_ASSERT_EQUAL(st.code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "altered"));
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, sha));
    if (bad)
        charter__v1__replay_decision_response__free_unpacked(bad, NULL);
    /* The audit names the event whose facts can no longer be read back, and the record. */
    Charter__V1__AuditRunResponse *a = audit();
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_FALSE(a->intact);
    CU_ASSERT_EQUAL(a->first_bad_seq, seq);
    CU_ASSERT_PTR_NOT_NULL(strstr(a->problem, "altered"));
    CU_ASSERT_PTR_NOT_NULL(strstr(a->problem, sha));
    charter__v1__audit_run_response__free_unpacked(a, NULL);

    const char *del[2] = {"DEL", blob};
    rawdo(2, del);
    a = audit();
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_FALSE(a->intact);
    CU_ASSERT_EQUAL(a->first_bad_seq, seq);
    CU_ASSERT_PTR_NOT_NULL(strstr(a->problem, "missing"));
    charter__v1__audit_run_response__free_unpacked(a, NULL);
    bad = replay(seq, &st);
    CU_ASSERT_PTR_NULL(bad);
    CU_ASSERT_EQUAL(st.code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "missing"));
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, sha));
    if (bad)
        charter__v1__replay_decision_response__free_unpacked(bad, NULL);

    /* Put back, the record decides again as it did. */
    const char *back[3] = {"SET", blob, was};
    rawdo(3, back);
    Charter__V1__ReplayDecisionResponse *ok = replay(seq, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ok);
    CU_ASSERT_EQUAL(ok->replayed->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_TRUE(ok->matches);
    charter__v1__replay_decision_response__free_unpacked(ok, NULL);
    expect_audit(true, 0, NULL);
    free(altered);
    free(was);
}

static void test_cli_receipt_verifies_offline_and_fails_when_altered(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    char file[300], altered[300], out[300];
    snprintf(file, sizeof file, "%s/receipt.json", tmpdir);
    snprintf(altered, sizeof altered, "%s/altered.json", tmpdir);
    snprintf(out, sizeof out, "%s/verify.out", tmpdir);
    setenv("CHARTER_URL", daemon_.ipc_url, 1);
    setenv("CHARTER_TOKEN", HARNESS_OPERATOR_TOKEN, 1);
    CU_ASSERT_EQUAL(harness_sh("%s --json receipt %s %s:report:deliver > %s", CHARTER_CLI_PATH,
                               run_id, run_id, file),
                    0);
    /* offline: no server is named or reachable for the check */
    CU_ASSERT_EQUAL(harness_sh("CHARTER_URL=ipc:///nonexistent %s verify-receipt %s --key %s > %s",
                               CHARTER_CLI_PATH, file, key_path, out),
                    0);
    char *text = harness_slurp(out);
    CU_ASSERT(text && strncmp(text, "valid:", 6) == 0);
    free(text);

    char *json = harness_slurp(file);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    char *at = strstr(json, "\"public\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    memcpy(at, "\"cfo\"   ", 8); /* another recipient, same length */
    CU_ASSERT_EQUAL(write_file(altered, json, 0600), 0);
    free(json);
    CU_ASSERT_EQUAL(
        harness_sh("%s verify-receipt %s --key %s > %s", CHARTER_CLI_PATH, altered, key_path, out),
        1);
    text = harness_slurp(out);
    CU_ASSERT(text && strstr(text, "invalid: the mac does not match") != NULL);
    free(text);
    /* the right receipt under another key is invalid too */
    CU_ASSERT_EQUAL(
        harness_sh("%s verify-receipt %s --key %s > %s", CHARTER_CLI_PATH, file, key2_path, out),
        1);
    /* and the run receipt verifies */
    CU_ASSERT_EQUAL(harness_sh("%s --json receipt %s > %s", CHARTER_CLI_PATH, run_id, file), 0);
    CU_ASSERT_EQUAL(
        harness_sh("%s verify-receipt %s --key %s > %s", CHARTER_CLI_PATH, file, key_path, out), 0);
    CU_ASSERT_EQUAL(harness_sh("%s audit %s > %s", CHARTER_CLI_PATH, run_id, out), 0);
}

static void test_cli_restore_needs_a_grant_or_all_and_prints_no_control_characters(void)
{
    char out[300];
    snprintf(out, sizeof out, "%s/cli.out", tmpdir);
    setenv("CHARTER_URL", daemon_.ipc_url, 1);
    setenv("CHARTER_TOKEN", HARNESS_OPERATOR_TOKEN, 1);
    /* An empty variable must never restore every grant. */
    CU_ASSERT_EQUAL(harness_sh("%s restore 2>/dev/null", CHARTER_CLI_PATH), 2);
    CU_ASSERT_EQUAL(harness_sh("%s restore g_reporter --all 2>/dev/null", CHARTER_CLI_PATH), 2);
    CU_ASSERT_EQUAL(harness_sh("%s restore --all > %s", CHARTER_CLI_PATH, out), 0);

    /* A title a host chose, with terminal escape sequences, is printed defused. */
    char run[129], ctx[129], src[129];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(op, "external", NULL, run, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(op, run, "research", ctx), 0);
    CU_ASSERT_EQUAL_FATAL(harness_read_source(op, ctx, "vendor_a", src), 0);
    Charter__V1__RecordOutputRequest req = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    char *inputs[1] = {src};
    req.context_id = ctx;
    req.input_ids = inputs;
    req.n_input_ids = 1;
    req.title = "\x1b]0;owned\x07 summary \x1b[2J";
    req.content = "Northwind 389 USD per desk.";
    Charter__V1__RecordOutputResponse *r = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_record_output(op, &req, &r, &st), 0);
    charter__v1__record_output_response__free_unpacked(r, NULL);
    CU_ASSERT_EQUAL(harness_sh("%s get %s > %s", CHARTER_CLI_PATH, run, out), 0);
    char *text = harness_slurp(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NULL(strchr(text, 0x1b));
    CU_ASSERT_PTR_NULL(strchr(text, 0x07));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "?]0;owned? summary ?[2J"));
    free(text);
}

static void test_audit_names_an_edited_event(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    char key[256], was[512];
    event_key(key, sizeof key, graph, run_id, 7);
    hget(key, "detail", was, sizeof was);
    CU_ASSERT_FATAL(was[0] != '\0');
    const char *edit[4] = {"HSET", key, "detail", "{\"step\":\"research\",\"note\":\"edited\"}"};
    rawdo(4, edit);
    expect_audit(false, 7, "event 7 was changed");
    CU_ASSERT_EQUAL(harness_sh("%s audit %s > /dev/null", CHARTER_CLI_PATH, run_id), 1);
    const char *back[4] = {"HSET", key, "detail", was};
    rawdo(4, back);
    expect_audit(true, 0, NULL);

    /* an edit of the run's head is named at the last event */
    uint64_t last = run_seq();
    char rkey[256], head[80];
    snprintf(rkey, sizeof rkey, "charter:{%s}:run:%s", graph, run_id);
    hget(rkey, "head", head, sizeof head);
    const char *h1[4] = {"HSET", rkey, "head",
                         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    rawdo(4, h1);
    expect_audit(false, last, "changed");
    const char *h2[4] = {"HSET", rkey, "head", head};
    rawdo(4, h2);
    expect_audit(true, 0, NULL);
}

/* The fields of event seq as an argv for HSET (after "HSET", key); n set. Caller frees. */
static redisReply *event_fields(uint64_t seq)
{
    char key[256];
    event_key(key, sizeof key, graph, run_id, seq);
    const char *argv[2] = {"HGETALL", key};
    return rawv(2, argv);
}

static void restore_event(uint64_t seq, redisReply *fields)
{
    char key[256];
    event_key(key, sizeof key, graph, run_id, seq);
    const char *argv[64];
    int n = 0;
    argv[n++] = "HSET";
    argv[n++] = key;
    for (size_t i = 0; i < fields->elements && n < 62; i++)
        argv[n++] = fields->element[i]->str;
    rawdo(n, argv);
}

static void test_audit_names_a_removed_event(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    redisReply *saved = event_fields(9);
    CU_ASSERT_FATAL(saved && saved->elements > 0);
    char key[256];
    event_key(key, sizeof key, graph, run_id, 9);
    const char *del[2] = {"DEL", key};
    rawdo(2, del);
    expect_audit(false, 9, "event 9 was removed");
    restore_event(9, saved);
    expect_audit(true, 0, NULL);

    /* removed, and the later events moved down one place each (their seals unchanged) */
    uint64_t n = run_seq();
    char parked[256];
    snprintf(parked, sizeof parked, "charter:{%s}:parked", graph);
    const char *park[3] = {"RENAME", key, parked};
    rawdo(3, park);
    for (uint64_t s = 10; s <= n; s++) {
        char from[256], to[256];
        event_key(from, sizeof from, graph, run_id, s);
        event_key(to, sizeof to, graph, run_id, s - 1);
        const char *mv[3] = {"RENAME", from, to};
        rawdo(3, mv);
    }
    expect_audit(false, 9, "event 9 was removed");
    for (uint64_t s = n; s >= 10; s--) {
        char from[256], to[256];
        event_key(from, sizeof from, graph, run_id, s - 1);
        event_key(to, sizeof to, graph, run_id, s);
        const char *mv[3] = {"RENAME", from, to};
        rawdo(3, mv);
    }
    const char *unpark[3] = {"RENAME", parked, key};
    rawdo(3, unpark);
    expect_audit(true, 0, NULL);
    freeReplyObject(saved);

    /* the last event cut off, with the run's seq and head wound back to the one before: the
     * run receipt (and nothing in the chain itself) shows it */
    uint64_t last = run_seq();
    redisReply *tail = event_fields(last);
    char prev_hash[80], rkey[256], head[80], seqs[24], pkey[256];
    snprintf(rkey, sizeof rkey, "charter:{%s}:run:%s", graph, run_id);
    hget(rkey, "head", head, sizeof head);
    event_key(pkey, sizeof pkey, graph, run_id, last - 1);
    hget(pkey, "hash", prev_hash, sizeof prev_hash);
    event_key(key, sizeof key, graph, run_id, last);
    snprintf(seqs, sizeof seqs, "%llu", (unsigned long long)last);
    const char *del2[2] = {"DEL", key};
    rawdo(2, del2);
    char before[24];
    snprintf(before, sizeof before, "%llu", (unsigned long long)(last - 1));
    const char *wind[6] = {"HSET", rkey, "seq", before, "head", prev_hash};
    rawdo(6, wind);
    expect_audit(false, last, "removed");
    const char *unwind[6] = {"HSET", rkey, "seq", seqs, "head", head};
    rawdo(6, unwind);
    restore_event(last, tail);
    freeReplyObject(tail);
    expect_audit(true, 0, NULL);
}

/* Audits the run and expects it broken at no event (first_bad_seq 0) with exactly problem. */
static void expect_audit_problem(const char *problem)
{
    Charter__V1__AuditRunResponse *a = audit();
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_FALSE(a->intact);
    CU_ASSERT_EQUAL(a->first_bad_seq, 0);
    CU_ASSERT_STRING_EQUAL(a->problem, problem);
    charter__v1__audit_run_response__free_unpacked(a, NULL);
}

/* The members of the set key, joined by ' ' in sorted order, into out; "" when empty. */
static void smembers(const char *key, char *out, size_t n)
{
    const char *argv[3] = {"SORT", key, "ALPHA"};
    redisReply *r = rawv(3, argv);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
        used += (size_t)snprintf(out + used, used < n ? n - used : 0, "%s%s", i ? " " : "",
                                 r->element[i]->str);
    freeReplyObject(r);
}

/* A grant's structure (its edge sets and lists) never changes through the API once its
 * workflow is applied, and a delivery decided on the structure charterd keeps does not read
 * it again: an edit behind the API's back is named by audit against the run's workflow. */
static void test_audit_names_a_grant_changed_behind_the_api(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    Charter__V1__RunView *v = get_run(run_id);
    CU_ASSERT_FATAL(v != NULL && v->run != NULL);
    char version[65], want[256];
    snprintf(version, sizeof version, "%s", v->run->workflow);
    charter__v1__run_view__free_unpacked(v, NULL);
    CU_ASSERT_EQUAL_FATAL(strlen(version), 64);
    expect_audit(true, 0, NULL);

    char grant[160], parents[256], grantees[256], tools[256], was[512];
    snprintf(grant, sizeof grant, "charter:{%s}:grant:g_reporter", graph);
    snprintf(parents, sizeof parents, "%s:delegated_from", grant);
    snprintf(grantees, sizeof grantees, "%s:granted_to", grant);
    smembers(parents, was, sizeof was);
    CU_ASSERT_STRING_EQUAL_FATAL(was, "g_analyst");

    /* The delegation edge removed, then put back. */
    const char *srem[3] = {"SREM", parents, "g_analyst"};
    rawdo(3, srem);
    snprintf(want, sizeof want,
             "grant g_reporter: its delegated_from differs from workflow procurement %.12s",
             version);
    expect_audit_problem(want);
    const char *sadd[3] = {"SADD", parents, "g_analyst"};
    rawdo(3, sadd);
    expect_audit(true, 0, NULL);

    /* The set deleted, or pointed at another grant up the chain (a shortcut to the root). */
    const char *del[2] = {"DEL", parents};
    rawdo(2, del);
    expect_audit_problem(want);
    const char *root[3] = {"SADD", parents, "g_root"};
    rawdo(3, root);
    expect_audit_problem(want);
    rawdo(2, del);
    rawdo(3, sadd);
    expect_audit(true, 0, NULL);

    /* The grantee edge set deleted. */
    smembers(grantees, was, sizeof was);
    CU_ASSERT_STRING_EQUAL_FATAL(was, "reporter");
    const char *del_to[2] = {"DEL", grantees};
    rawdo(2, del_to);
    snprintf(want, sizeof want,
             "grant g_reporter: its grantee differs from workflow procurement %.12s", version);
    expect_audit_problem(want);
    const char *add_to[3] = {"SADD", grantees, "reporter"};
    rawdo(3, add_to);
    expect_audit(true, 0, NULL);

    /* A list field widened. */
    snprintf(tools, sizeof tools, "charter:{%s}:grant:g_analyst", graph);
    hget(tools, "tools", was, sizeof was);
    CU_ASSERT_FATAL(was[0] != '\0');
    const char *widen[4] = {"HSET", tools, "tools",
                            "[\"read_source\",\"deliver_internal\",\"deliver_public\","
                            "\"transfer_funds\"]"};
    rawdo(4, widen);
    snprintf(want, sizeof want,
             "grant g_analyst: its tools differs from workflow procurement %.12s", version);
    expect_audit_problem(want);
    const char *narrow[4] = {"HSET", tools, "tools", was};
    rawdo(4, narrow);
    expect_audit(true, 0, NULL);

    /* The grant's node deleted (its edge sets left). */
    char moved[300];
    snprintf(moved, sizeof moved, "%s:moved", grant);
    const char *away[3] = {"RENAME", grant, moved};
    rawdo(3, away);
    snprintf(want, sizeof want,
             "grant g_reporter: it is not in the graph, but workflow procurement %.12s "
             "declares it",
             version);
    expect_audit_problem(want);
    const char *back[3] = {"RENAME", moved, grant};
    rawdo(3, back);
    expect_audit(true, 0, NULL);

    /* The workflow the run pins removed from the graph: nothing to compare with is a finding. */
    char wkey[160], wmoved[200];
    snprintf(wkey, sizeof wkey, "charter:{%s}:workflow:%s", graph, version);
    snprintf(wmoved, sizeof wmoved, "%s:moved", wkey);
    const char *wf_away[3] = {"RENAME", wkey, wmoved};
    rawdo(3, wf_away);
    snprintf(want, sizeof want,
             "workflow %.12s, which the run follows, cannot be read back: it is not in the graph",
             version);
    expect_audit_problem(want);
    const char *wf_back[3] = {"RENAME", wmoved, wkey};
    rawdo(3, wf_back);
    expect_audit(true, 0, NULL);

    /* The CLI says the same, exits 1, and --json carries it as problem. */
    char out[300];
    snprintf(out, sizeof out, "%s/audit.out", tmpdir);
    setenv("CHARTER_URL", daemon_.ipc_url, 1);
    setenv("CHARTER_TOKEN", HARNESS_OPERATOR_TOKEN, 1);
    rawdo(3, srem);
    snprintf(want, sizeof want,
             "run %s: NOT intact: grant g_reporter: its delegated_from differs from workflow "
             "procurement %.12s\n",
             run_id, version);
    CU_ASSERT_EQUAL(harness_sh("%s audit %s > %s", CHARTER_CLI_PATH, run_id, out), 1);
    char *text = harness_slurp(out);
    CU_ASSERT(text != NULL && strncmp(text, want, strlen(want)) == 0);
    free(text);
    CU_ASSERT_EQUAL(harness_sh("%s --json audit %s > %s", CHARTER_CLI_PATH, run_id, out), 1);
    text = harness_slurp(out);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    snprintf(want, sizeof want,
             "grant g_reporter: its delegated_from differs from workflow procurement %.12s",
             version);
    const char *problem = json_string_value(json_object_get(j, "problem"));
    CU_ASSERT_STRING_EQUAL(problem ? problem : "(none)", want);
    CU_ASSERT_PTR_NULL(json_object_get(j, "intact"));
    json_decref(j);
    free(text);
    rawdo(3, sadd);
    expect_audit(true, 0, NULL);
    CU_ASSERT_EQUAL(harness_sh("%s audit %s > %s", CHARTER_CLI_PATH, run_id, out), 0);
}

static void test_audit_names_an_inserted_event(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    uint64_t last = run_seq();
    redisReply *copy = event_fields(last);
    CU_ASSERT_FATAL(copy && copy->elements > 0);
    char key[256], next[24], hash[80];
    event_key(key, sizeof key, graph, run_id, last);
    hget(key, "hash", hash, sizeof hash);
    event_key(key, sizeof key, graph, run_id, last + 1);
    snprintf(next, sizeof next, "%llu", (unsigned long long)(last + 1));
    /* a plausible event after the head: linked to it, but not sealed by charterd */
    const char *ins[18] = {
        "HSET",    key,
        "run_id",  run_id,
        "seq",     next,
        "kind",    "note",
        "ts",      "1795977514.341293",
        "prev",    hash,
        "hash",    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "detail",  "approved by nobody",
        "outcome", ""};
    rawdo(18, ins);
    expect_audit(false, last + 1, "inserted");
    /* GetRun reads the run's events up to its head: the stored extra is not among them */
    Charter__V1__GetRunRequest gr = CHARTER__V1__GET_RUN_REQUEST__INIT;
    gr.run_id = run_id;
    gr.after_seq = last - 1;
    gr.limit = 10;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(op, &gr, &v, &st), 0);
    CU_ASSERT_EQUAL(v->n_events, 1);
    CU_ASSERT_EQUAL(v->n_events >= 1 ? v->events[0]->seq : 0, last);
    charter__v1__run_view__free_unpacked(v, NULL);
    /* and no event is written over it: the run takes no new event while it is there */
    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = run_id;
    os.step = "research";
    Charter__V1__StepContext *ctx = NULL;
    CU_ASSERT_NOT_EQUAL(charter_open_step(op, &os, &ctx, &st), 0);
    char detail[64];
    hget(key, "detail", detail, sizeof detail);
    CU_ASSERT_STRING_EQUAL(detail, "approved by nobody");
    /* stored 3 places beyond the head, past empty ones: the look beyond the head finds it */
    char far[256], word[64];
    event_key(far, sizeof far, graph, run_id, last + 3);
    const char *away[3] = {"RENAME", key, far};
    rawdo(3, away);
    snprintf(word, sizeof word, "event %llu was inserted", (unsigned long long)(last + 3));
    expect_audit(false, last + 3, word);
    const char *del[2] = {"DEL", far};
    rawdo(2, del);
    expect_audit(true, 0, NULL);

    /* an event inserted in the middle, the later ones renumbered: the chain skips it */
    uint64_t at = 5;
    for (uint64_t s = last; s >= at; s--) {
        /* move event s to s + 1 as it is (its seq field and hash unchanged) */
        char from[256], to[256];
        event_key(from, sizeof from, graph, run_id, s);
        event_key(to, sizeof to, graph, run_id, s + 1);
        const char *mv[3] = {"RENAME", from, to};
        rawdo(3, mv);
    }
    const char *ins2[6] = {"HSET", NULL, "kind", "note", "detail", "inserted"};
    char mid[256];
    event_key(mid, sizeof mid, graph, run_id, at);
    ins2[1] = mid;
    rawdo(6, ins2);
    expect_audit(false, at, "event 5 was inserted");
    /* put everything back */
    const char *del3[2] = {"DEL", mid};
    rawdo(2, del3);
    for (uint64_t s = at; s <= last; s++) {
        char from[256], to[256];
        event_key(from, sizeof from, graph, run_id, s + 1);
        event_key(to, sizeof to, graph, run_id, s);
        const char *mv[3] = {"RENAME", from, to};
        rawdo(3, mv);
    }
    freeReplyObject(copy);
    expect_audit(true, 0, NULL);
}

/* Every value of every key of g; fails when one holds needle. Returns the keys seen. */
static size_t assert_graph_lacks(const char *g, const char *needle)
{
    char pattern[128];
    snprintf(pattern, sizeof pattern, "charter:{%s}*", g);
    char cursor[32] = "0";
    size_t keys = 0;
    do {
        const char *scan[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
        redisReply *r = rawv(6, scan);
        CU_ASSERT_FATAL(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            const char *k = r->element[1]->element[i]->str;
            const char *type[2] = {"TYPE", k};
            redisReply *t = rawv(2, type);
            const char *cmd = strcmp(t->str, "hash") == 0   ? "HGETALL"
                              : strcmp(t->str, "set") == 0  ? "SMEMBERS"
                              : strcmp(t->str, "zset") == 0 ? "ZRANGE"
                                                            : "GET";
            const char *get[4] = {cmd, k, "0", "-1"};
            redisReply *v = rawv(strcmp(cmd, "ZRANGE") == 0 ? 4 : 2, get);
            keys++;
            if (v && v->type == REDIS_REPLY_STRING)
                CU_ASSERT_PTR_NULL(strstr(v->str, needle));
            for (size_t j = 0; v && v->type == REDIS_REPLY_ARRAY && j < v->elements; j++)
                if (v->element[j]->type == REDIS_REPLY_STRING)
                    CU_ASSERT_PTR_NULL(strstr(v->element[j]->str, needle));
            freeReplyObject(v);
            freeReplyObject(t);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return keys;
}

static void test_key_never_reaches_redis_or_the_log(void)
{
    CU_ASSERT_TRUE(assert_graph_lacks(graph, key_text) > 50);
    char half[33];
    memcpy(half, key_text, 32);
    half[32] = '\0';
    assert_graph_lacks(graph, half);
    char *log = harness_slurp(daemon_.log_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    CU_ASSERT_PTR_NULL(strstr(log, half));
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "events sealed with the integrity key"));
    free(log);
}

static void test_everything_verifies_after_a_restart(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    Charter__V1__Receipt *before = receipt(NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(before);
    charter_client_close(op);
    op = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_stop(&daemon_), 0);
    CU_ASSERT_EQUAL_FATAL(start_keyed(), 0);
    expect_audit(true, 0, NULL);
    Charter__V1__Receipt *after = receipt(NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(after);
    CU_ASSERT_STRING_EQUAL(after->mac, before->mac);
    CU_ASSERT_EQUAL(after->last_seq, before->last_seq);
    charter__v1__receipt__free_unpacked(before, NULL);
    charter__v1__receipt__free_unpacked(after, NULL);
    uint64_t seq =
        find_event("delivery_decided", CHARTER__V1__OUTCOME__ALLOW, "recipient", "public");
    Charter__V1__ReplayDecisionResponse *r = replay(seq, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_TRUE(r->matches);
    CU_ASSERT_EQUAL(r->replayed->outcome, CHARTER__V1__OUTCOME__ALLOW);
    charter__v1__replay_decision_response__free_unpacked(r, NULL);
    /* recovering the delivered run acknowledges, and the chain stays whole */
    Charter__V1__RecoverRunResponse *rec = recover();
    CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
    CU_ASSERT_TRUE(rec->acknowledged);
    charter__v1__recover_run_response__free_unpacked(rec, NULL);
    expect_audit(true, 0, NULL);
}

/* --- concurrent writers on one run from two charterd ------------------------------------ */

typedef struct {
    const char *url;
    const char *ctx;
    const char *artifact;
    int n;
    uint64_t seqs[32];
    int allowed;
} checker;

static void *check_many(void *arg)
{
    checker *k = arg;
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = 60000;
    o.connect_timeout_ms = 5000;
    charter_client *c = NULL;
    if (charter_client_open(k->url, HARNESS_OPERATOR_TOKEN, &o, &c) != 0)
        return NULL;
    for (int i = 0; i < k->n; i++) {
        Charter__V1__CheckInputRequest req = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
        char *ids[1] = {(char *)k->artifact};
        req.context_id = (char *)k->ctx;
        req.artifact_ids = ids;
        req.n_artifact_ids = 1;
        Charter__V1__CheckInputResponse *r = NULL;
        charter_status st;
        if (charter_check_input(c, &req, &r, &st) != 0) {
            fprintf(stderr, "CheckInput: %s: %s\n", charter_status_name(st.code), st.message);
        } else {
            if (r->decision->outcome == CHARTER__V1__OUTCOME__ALLOW)
                k->allowed++;
            else
                fprintf(stderr, "CheckInput: outcome %d: %s\n", (int)r->decision->outcome,
                        r->decision->witness);
            k->seqs[i] = r->event_seq;
            charter__v1__check_input_response__free_unpacked(r, NULL);
        }
    }
    charter_client_close(c);
    return NULL;
}

static void test_two_charterd_writing_one_run_keep_one_chain(void)
{
    harness_charterd second;
    const char *extra[4] = {"--integrity-key", key_path, "--workers", "4"};
    harness_charterd_opts o = {.graph = graph, .extra_args = extra, .n_extra = 4};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &second), 0);

    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    Charter__V1__RunView *view = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &cr, &view, &st), 0);
    char ext[129];
    snprintf(ext, sizeof ext, "%s", view->run->id);
    charter__v1__run_view__free_unpacked(view, NULL);
    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = ext;
    os.step = "research";
    Charter__V1__StepContext *ctx = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_open_step(op, &os, &ctx, &st), 0);
    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = ctx->context_id;
    rs.resource_id = "vendor_a";
    Charter__V1__ReadSourceResponse *src = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_read_source(op, &rs, &src, &st), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src->artifact);

    enum { THREADS = 8, EACH = 12 };
    checker k[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&k[i], 0, sizeof k[i]);
        k[i].url = i % 2 ? second.ipc_url : daemon_.ipc_url;
        k[i].ctx = ctx->context_id;
        k[i].artifact = src->artifact->id;
        k[i].n = EACH;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, check_many, &k[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    /* every check was recorded at a seq of its own */
    unsigned char seen[THREADS * EACH + 16] = {0};
    int allowed = 0;
    for (int i = 0; i < THREADS; i++) {
        allowed += k[i].allowed;
        for (int j = 0; j < EACH; j++) {
            uint64_t s = k[i].seqs[j];
            CU_ASSERT(s >= 4 && s < sizeof seen); /* after run_created, step_opened, source */
            if (s < sizeof seen) {
                CU_ASSERT_EQUAL(seen[s], 0);
                seen[s] = 1;
            }
        }
    }
    CU_ASSERT_EQUAL(allowed, THREADS * EACH);
    if (allowed != THREADS * EACH) {
        char *l1 = harness_slurp(daemon_.log_path), *l2 = harness_slurp(second.log_path);
        fprintf(stderr, "charterd logs:\n%s\n%s\n", l1 ? l1 : "", l2 ? l2 : "");
        free(l1);
        free(l2);
    }
    snprintf(run_id, sizeof run_id, "%s", ext);
    Charter__V1__AuditRunResponse *a = audit();
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_TRUE(a->intact);
    CU_ASSERT_EQUAL(a->events, 3 + THREADS * EACH);
    charter__v1__audit_run_response__free_unpacked(a, NULL);
    charter__v1__read_source_response__free_unpacked(src, NULL);
    charter__v1__step_context__free_unpacked(ctx, NULL);
    CU_ASSERT_EQUAL(harness_charterd_stop(&second), 0);
}

/* --- keys at startup, and no key ---------------------------------------------------------- */

/* Runs charterd on g with the extra arguments to completion; expects exit status 1 or 2 and a
 * single line containing word, without the key. */
static void expect_refused(const char *g, const char *const *extra, size_t n, const char *word)
{
    const char *args[16];
    size_t k = 0;
    args[k++] = "--graph";
    args[k++] = g;
    args[k++] = "--redis";
    args[k++] = harness_redis_url();
    args[k++] = "--listen";
    args[k++] = "ipc:///tmp/charter-evidence-never.sock";
    for (size_t i = 0; i < n; i++)
        args[k++] = extra[i];
    const char *env[2] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    char output[2048] = "";
    int rc = harness_charterd_run(args, k, env, 20000, output, sizeof output);
    CU_ASSERT(rc == 1 || rc == 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(output, word));
    char half[33];
    memcpy(half, key_text, 32);
    half[32] = '\0';
    CU_ASSERT_PTR_NULL(strstr(output, half));
    size_t lines = 0;
    for (const char *p = output; *p; p++)
        lines += *p == '\n';
    CU_ASSERT_EQUAL(lines, 1);
    if (!strstr(output, word) || lines != 1)
        fprintf(stderr, "charterd said (%d): %s\n", rc, output);
}

static void test_startup_refuses_a_key_that_does_not_match_the_graph(void)
{
    expect_refused(graph, NULL, 0, "none was given");
    const char *other[2] = {"--integrity-key", key2_path};
    expect_refused(graph, other, 2, "not the one");
    char lax[300];
    snprintf(lax, sizeof lax, "%s/lax.key", tmpdir);
    char line[70];
    snprintf(line, sizeof line, "%s\n", key_text);
    CU_ASSERT_EQUAL_FATAL(write_file(lax, line, 0644), 0);
    const char *open_key[2] = {"--integrity-key", lax};
    expect_refused(graph, open_key, 2, "chmod 600");

    /* a graph started without a key stays without one */
    harness_charterd keyless;
    harness_charterd_opts o = {.graph = keyless_graph};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &keyless), 0);
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(open_client(&keyless, &c), 0);
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    Charter__V1__RunView *view = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(c, &req, &view, &st), 0);
    Charter__V1__GetReceiptRequest gr = CHARTER__V1__GET_RECEIPT_REQUEST__INIT;
    gr.run_id = view->run->id;
    Charter__V1__Receipt *r = NULL;
    CU_ASSERT_EQUAL(charter_get_receipt(c, &gr, &r, &st), -CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_EQUAL(strncmp(st.message, "INTEGRITY_KEY_REQUIRED", 22), 0);
    Charter__V1__AuditRunRequest ar = CHARTER__V1__AUDIT_RUN_REQUEST__INIT;
    ar.run_id = view->run->id;
    Charter__V1__AuditRunResponse *a = NULL;
    CU_ASSERT_EQUAL(charter_audit_run(c, &ar, &a, &st), 0);
    if (a) {
        CU_ASSERT_TRUE(a->intact);
        CU_ASSERT_FALSE(a->keyed);
        CU_ASSERT_EQUAL(a->events, view->run->seq);
        charter__v1__audit_run_response__free_unpacked(a, NULL);
    }
    charter__v1__run_view__free_unpacked(view, NULL);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&keyless), 0);
    const char *with_key[2] = {"--integrity-key", key_path};
    expect_refused(keyless_graph, with_key, 2, "without an integrity key");
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test text_tests[] = {
    {"receipt text is the documented lines", test_receipt_text_is_the_documented_lines},
    {"receipt mac is HMAC-SHA256 of the text and verifies offline",
     test_receipt_mac_is_hmac_sha256_of_the_text_and_verifies_offline},
    {"event text and hash, keyed and not", test_event_text_and_hash_keyed_and_not},
};
static const harness_test keyed_tests[] = {
    {"key file must be private and long enough", test_key_file_must_be_private_and_long_enough},
    {"run is sealed into an intact keyed chain", test_run_is_sealed_into_an_intact_keyed_chain},
    {"replay of the poisoned handoff denies with the same witness",
     test_replay_of_poisoned_handoff_denies_with_the_same_witness},
    {"replay refuses an event of another evaluator",
     test_replay_refuses_an_event_of_another_evaluator},
    {"replay names the version and replays a decision from before versions",
     test_replay_names_the_version_and_replays_a_decision_from_before_versions},
    {"failed delivery has no snapshot to replay", test_failed_delivery_has_no_snapshot_to_replay},
    {"public delivery gets a receipt that verifies offline",
     test_public_delivery_gets_a_receipt_that_verifies_offline},
    {"run receipt pins the last event and every delivery",
     test_run_receipt_pins_the_last_event_and_every_delivery},
    {"replay after revocation still allows the public delivery",
     test_replay_after_revocation_still_allows_the_public_delivery},
    {"a delivery's facts record altered or missing fails its replay and audit",
     test_a_delivery_facts_record_altered_or_missing_fails_its_replay},
    {"CLI receipt verifies offline and fails when altered",
     test_cli_receipt_verifies_offline_and_fails_when_altered},
    {"CLI restore needs a grant or --all; no control characters printed",
     test_cli_restore_needs_a_grant_or_all_and_prints_no_control_characters},
    {"audit names an edited event", test_audit_names_an_edited_event},
    {"audit names a removed event", test_audit_names_a_removed_event},
    {"audit names an inserted event", test_audit_names_an_inserted_event},
    {"audit names a grant changed behind the API", test_audit_names_a_grant_changed_behind_the_api},
    {"key never reaches Redis or the log", test_key_never_reaches_redis_or_the_log},
    {"everything verifies after a restart", test_everything_verifies_after_a_restart},
    {"startup refuses a key that does not match the graph",
     test_startup_refuses_a_key_that_does_not_match_the_graph},
    {"two charterd writing one run keep one chain",
     test_two_charterd_writing_one_run_keep_one_chain},
};
static const harness_suite suites[] = {
    {"canonical texts", NULL, NULL, HARNESS_TABLE(text_tests)},
    {"evidence with an integrity key", suite_init, suite_clean, HARNESS_TABLE(keyed_tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
