/*
 * test_signed_receipts.c - receipts anyone can verify: Ed25519 signatures and the run's receipt
 * chain, against a real charterd started with --signing-key on the test Redis.
 *
 * Keys are made by the openssl command as an operator would. The signed text is pinned down
 * by hand first. Then the reference workflow runs (blocked, recovered, completed), its receipts
 * are fetched and verified with only the public key, through the C API and through the charter
 * CLI as a separate process that names no server; each tamper case (a changed byte, another
 * public key, a removed signature, a receipt removed from the chain, receipts reordered) fails
 * with its own message and exit code. A signing key file of the wrong type, mode or owner stops
 * startup with one line.
 */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"
#include "receipt.h"

static char tmpdir[] = "/tmp/charter-signed-XXXXXX";
static char key_path[256], sign_path[256], pub_path[256], other_pub_path[256], ec_path[256];
static unsigned char key_bytes[CHARTER_RECEIPT_KEY_MAX];
static size_t key_len;
static char graph[64];
static harness_charterd daemon_;
static charter_client *op, *viewer;
static char run_id[129];
static char d1_file[300], d2_file[300], run_file[300];

/* --- small helpers ----------------------------------------------------------------------- */

static Charter__V1__Receipt *receipt(const char *inv)
{
    Charter__V1__GetReceiptRequest req = CHARTER__V1__GET_RECEIPT_REQUEST__INIT;
    req.run_id = run_id;
    req.invocation_id = (char *)(inv ? inv : "");
    Charter__V1__Receipt *r = NULL;
    charter_status st;
    if (charter_get_receipt(op, &req, &r, &st) != 0) {
        fprintf(stderr, "GetReceipt: %s: %s\n", charter_status_name(st.code), st.message);
        return NULL;
    }
    return r;
}

/* Runs `charter verify-receipt FILES --public-key PUB` with no server reachable; stdout into
 * out (n bytes). Returns the exit status. */
static int cli_verify(const char *files, const char *pub, bool json, char *out, size_t n)
{
    char path[300];
    snprintf(path, sizeof path, "%s/verify.out", tmpdir);
    int rc =
        harness_sh("CHARTER_URL=ipc:///nonexistent %s %s verify-receipt %s --public-key %s > %s",
                   CHARTER_CLI_PATH, json ? "--json" : "", files, pub, path);
    char *text = harness_slurp(path);
    snprintf(out, n, "%s", text ? text : "");
    free(text);
    return rc;
}

/* Copies the receipt document src to dst with edit applied to it. 0 or -1. */
static int edited_copy(const char *src, const char *dst, void (*edit)(json_t *))
{
    json_t *j = json_load_file(src, 0, NULL);
    if (j == NULL)
        return -1;
    edit(j);
    int rc = json_dump_file(j, dst, JSON_COMPACT);
    json_decref(j);
    return rc;
}

static void change_recipient(json_t *j)
{
    json_object_set_new(j, "recipient", json_string("cfo"));
}

static void drop_signature(json_t *j)
{
    json_object_del(j, "signature");
}

static void sign_other_time(json_t *j)
{
    /* the field and the text it signs changed together: only the signature can tell */
    const char *t = json_string_value(json_object_get(j, "signedText"));
    const char *when = json_string_value(json_object_get(j, "time"));
    if (t == NULL || when == NULL || strlen(when) < 2)
        return;
    char *text = strdup(t), *moved = strdup(when);
    char *at = text ? strstr(text, when) : NULL;
    if (at != NULL && moved != NULL) {
        char d = moved[0] == '1' ? '2' : '1';
        moved[0] = d;
        at[0] = d;
        json_object_set_new(j, "time", json_string(moved));
        json_object_set_new(j, "signedText", json_string(text));
    }
    free(text);
    free(moved);
}

/* --- the signed text, by hand -------------------------------------------------------------- */

static const char *KEY_ID = "3f2a8c0d9b1e4f5a6c7d8e9f0a1b2c3d4e5f60718293a4b5c6d7e8f901234567";
static const char *PREV = "a1b2c3d4e5f60718293a4b5c6d7e8f90123456789abcdef0123456789abcdef0";

static void test_signed_text_is_the_documented_lines(void)
{
    Charter__V1__Receipt r = CHARTER__V1__RECEIPT__INIT;
    char *chain[3] = {"g_reporter", "g_analyst", "g_root"};
    r.kind = "delivery";
    r.run_id = "r1";
    r.invocation_id = "r1:report:deliver";
    r.payload_hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    r.recipient = "public";
    r.tool = "deliver_public";
    r.grant_chain = chain;
    r.n_grant_chain = 3;
    r.time = "1795977514.341293";
    r.evaluator = "9330d90ef5ab715a26ea6ac39e2d8ce3f4dead1ef54d7dbda22fd378c408bedb";
    r.chain_seq = 2;
    r.prev_receipt_hash = (char *)PREV;
    r.key_id = (char *)KEY_ID;
    const char *want = "format=charter-signed-receipt-1\n"
                       "kind=delivery\n"
                       "run_id=r1\n"
                       "invocation_id=r1:report:deliver\n"
                       "payload_hash=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f0"
                       "0a08\n"
                       "recipient=public\n"
                       "tool=deliver_public\n"
                       "grant_chain=g_reporter,g_analyst,g_root\n"
                       "time=1795977514.341293\n"
                       "evaluator=9330d90ef5ab715a26ea6ac39e2d8ce3f4dead1ef54d7dbda22fd378c408be"
                       "db\n"
                       "chain_seq=2\n"
                       "prev_receipt_hash=a1b2c3d4e5f60718293a4b5c6d7e8f90123456789abcdef0123456"
                       "789abcdef0\n"
                       "key_id=3f2a8c0d9b1e4f5a6c7d8e9f0a1b2c3d4e5f60718293a4b5c6d7e8f901234567\n";
    char *text = NULL, err[160];
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(charter_receipt_signed_text(&r, &text, &len, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(text, want);
    CU_ASSERT_EQUAL(len, strlen(want));
    free(text);

    /* the first receipt of a run names no previous one; a key id must be hex */
    r.prev_receipt_hash = "";
    r.chain_seq = 1;
    CU_ASSERT_EQUAL(charter_receipt_signed_text(&r, &text, &len, err, sizeof err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\nchain_seq=1\nprev_receipt_hash=\nkey_id="));
    free(text);
    r.key_id = "not-hex";
    CU_ASSERT_EQUAL(charter_receipt_signed_text(&r, &text, &len, err, sizeof err),
                    -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "key_id"));
    r.key_id = (char *)KEY_ID;
    r.chain_seq = 0;
    CU_ASSERT_EQUAL(charter_receipt_signed_text(&r, &text, &len, err, sizeof err),
                    -CHARTER_INVALID_ARGUMENT);
}

/* --- a charterd with a signing key --------------------------------------------------------- */

static int open_client(const harness_charterd *d, const char *token, charter_client **c)
{
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = 60000;
    o.connect_timeout_ms = 5000;
    return charter_client_open(d->ipc_url, token, &o, c);
}

static int suite_init(void)
{
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(key_path, sizeof key_path, "%s/integrity.key", tmpdir);
    snprintf(sign_path, sizeof sign_path, "%s/sign.pem", tmpdir);
    snprintf(pub_path, sizeof pub_path, "%s/pub.pem", tmpdir);
    snprintf(other_pub_path, sizeof other_pub_path, "%s/other_pub.pem", tmpdir);
    snprintf(ec_path, sizeof ec_path, "%s/ec.pem", tmpdir);
    snprintf(d1_file, sizeof d1_file, "%s/d1.json", tmpdir);
    snprintf(d2_file, sizeof d2_file, "%s/d2.json", tmpdir);
    snprintf(run_file, sizeof run_file, "%s/run.json", tmpdir);
    char err[300];
    if (harness_sh("umask 077 && openssl rand -hex 32 > %s", key_path) != 0 ||
        harness_sh("umask 077 && openssl genpkey -algorithm ed25519 -out %s 2>/dev/null",
                   sign_path) != 0 ||
        harness_sh("openssl pkey -in %s -pubout -out %s 2>/dev/null", sign_path, pub_path) != 0 ||
        harness_sh(
            "umask 077 && openssl genpkey -algorithm ed25519 2>/dev/null | openssl pkey -pubout "
            "-out %s 2>/dev/null",
            other_pub_path) != 0 ||
        harness_sh(
            "umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out %s "
            "2>/dev/null",
            ec_path) != 0 ||
        charter_receipt_key_load(key_path, key_bytes, sizeof key_bytes, &key_len, err,
                                 sizeof err) != 0)
        return -1;
    harness_graph_name(graph, sizeof graph, "signed");
    store *st = harness_store_open(graph);
    store_close(st);
    const char *extra[4] = {"--integrity-key", key_path, "--signing-key", sign_path};
    harness_charterd_opts o = {.graph = graph, .extra_args = extra, .n_extra = 4};
    if (harness_charterd_start(&o, &daemon_) != 0)
        return -1;
    if (open_client(&daemon_, HARNESS_OPERATOR_TOKEN, &op) != 0 ||
        open_client(&daemon_, HARNESS_VIEWER_TOKEN, &viewer) != 0)
        return -1;
    return 0;
}

static int suite_clean(void)
{
    charter_client_close(op);
    charter_client_close(viewer);
    int rc = daemon_.pid ? harness_charterd_stop(&daemon_) : 0;
    harness_graph_drop(graph);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        rc = -1;
    return rc == 0 ? 0 : -1;
}

static void test_receipt_key_is_the_public_half_of_the_signing_key(void)
{
    char *pem = harness_slurp(pub_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pem);
    char want_id[65], err[200];
    CU_ASSERT_EQUAL_FATAL(charter_receipt_key_id(pem, strlen(pem), want_id, err, sizeof err), 0);
    /* an operator and a viewer both get it */
    charter_client *who[2] = {op, viewer};
    for (int i = 0; i < 2; i++) {
        Charter__V1__ReceiptKey *k = NULL;
        charter_status st;
        CU_ASSERT_EQUAL_FATAL(charter_get_receipt_key(who[i], NULL, &k, &st), 0);
        CU_ASSERT_STRING_EQUAL(k->algorithm, "ed25519");
        CU_ASSERT_STRING_EQUAL(k->public_key_pem, pem);
        CU_ASSERT_STRING_EQUAL(k->key_id, want_id);
        charter__v1__receipt_key__free_unpacked(k, NULL);
    }
    /* the CLI prints the key id and the PEM, which openssl reads back as the same key */
    char out[300], got[300];
    snprintf(out, sizeof out, "%s/receipt-key.out", tmpdir);
    CU_ASSERT_EQUAL(harness_sh("CHARTER_URL=%s CHARTER_TOKEN=%s %s receipt-key > %s",
                               daemon_.ipc_url, HARNESS_VIEWER_TOKEN, CHARTER_CLI_PATH, out),
                    0);
    char *text = harness_slurp(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    snprintf(got, sizeof got, "key_id ed25519 %s\n", want_id);
    CU_ASSERT_EQUAL(strncmp(text, got, strlen(got)), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, pem));
    free(text);
    free(pem);
}

static void test_workflow_receipts_are_signed_and_chained(void)
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "scripted";
    Charter__V1__RunView *view = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(op, &req, &view, &st), 0);
    snprintf(run_id, sizeof run_id, "%s", view->run->id);
    CU_ASSERT_STRING_EQUAL(view->run->status, "blocked");
    charter__v1__run_view__free_unpacked(view, NULL);
    /* the blocked run's receipt names the CFO delivery's receipt */
    Charter__V1__Receipt *blocked = receipt(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(blocked);
    CU_ASSERT_STRING_EQUAL(blocked->status, "blocked");
    CU_ASSERT_EQUAL(blocked->chain_seq, 2);

    Charter__V1__RecoverRunRequest rr = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    rr.run_id = run_id;
    Charter__V1__RecoverRunResponse *rec = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_recover_run(op, &rr, &rec, &st), 0);
    CU_ASSERT_STRING_EQUAL(rec->run->status, "completed");
    charter__v1__recover_run_response__free_unpacked(rec, NULL);

    char inv1[200], inv2[200];
    snprintf(inv1, sizeof inv1, "%s:analyze:deliver", run_id);
    snprintf(inv2, sizeof inv2, "%s:report:deliver", run_id);
    Charter__V1__Receipt *d1 = receipt(inv1), *d2 = receipt(inv2), *run = receipt(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(run);
    CU_ASSERT_STRING_EQUAL(run->status, "completed");

    char *pem = harness_slurp(pub_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pem);
    char id[65], h1[65], h2[65], why[320];
    CU_ASSERT_EQUAL_FATAL(charter_receipt_key_id(pem, strlen(pem), id, why, sizeof why), 0);
    CU_ASSERT_EQUAL(charter_receipt_hash(d1, h1, why, sizeof why), 0);
    CU_ASSERT_EQUAL(charter_receipt_hash(d2, h2, why, sizeof why), 0);
    /* the chain by hand: CFO delivery, public delivery, the completed run */
    CU_ASSERT_EQUAL(d1->chain_seq, 1);
    CU_ASSERT_STRING_EQUAL(d1->prev_receipt_hash, "");
    CU_ASSERT_EQUAL(d2->chain_seq, 2);
    CU_ASSERT_STRING_EQUAL(d2->prev_receipt_hash, h1);
    CU_ASSERT_EQUAL(run->chain_seq, 3);
    CU_ASSERT_STRING_EQUAL(run->prev_receipt_hash, h2);
    CU_ASSERT_STRING_EQUAL(blocked->prev_receipt_hash, h1);

    Charter__V1__Receipt *all[4] = {d1, d2, run, blocked};
    for (int i = 0; i < 4; i++) {
        charter_receipt_verdict v = CHARTER_RECEIPT_MALFORMED;
        CU_ASSERT_STRING_EQUAL(all[i]->key_id, id);
        CU_ASSERT_EQUAL(strlen(all[i]->signature), 88);
        CU_ASSERT_EQUAL(
            charter_receipt_verify_signed(all[i], pem, strlen(pem), &v, why, sizeof why), 0);
        CU_ASSERT_EQUAL(v, CHARTER_RECEIPT_VALID);
        /* the text it carries is the text rebuilt from its fields; the MAC still holds */
        char *text = NULL;
        size_t len = 0;
        CU_ASSERT_EQUAL(charter_receipt_signed_text(all[i], &text, &len, why, sizeof why), 0);
        CU_ASSERT_STRING_EQUAL(all[i]->signed_text, text ? text : "");
        free(text);
        CU_ASSERT_EQUAL(charter_receipt_verify(all[i], key_bytes, key_len, why, sizeof why), 0);
    }
    const Charter__V1__Receipt *in_order[3] = {d1, d2, run};
    charter_receipt_verdict v = CHARTER_RECEIPT_MALFORMED;
    size_t bad = 9;
    CU_ASSERT_EQUAL(charter_receipt_verify_chain(in_order, 3, &v, &bad, why, sizeof why), 0);
    CU_ASSERT_EQUAL(v, CHARTER_RECEIPT_VALID);
    /* the receipt of the earlier end closes the chain as it stood then */
    const Charter__V1__Receipt *with_earlier[4] = {d1, blocked, d2, run};
    CU_ASSERT_EQUAL(charter_receipt_verify_chain(with_earlier, 4, &v, &bad, why, sizeof why), 0);

    /* through the C API: a removed receipt and a reordering, each its own verdict */
    const Charter__V1__Receipt *gap[2] = {d1, run};
    CU_ASSERT_EQUAL(charter_receipt_verify_chain(gap, 2, &v, &bad, why, sizeof why),
                    -CHARTER_UNAUTHENTICATED);
    CU_ASSERT_EQUAL(v, CHARTER_RECEIPT_CHAIN_BROKEN);
    CU_ASSERT_EQUAL(bad, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "a receipt was removed"));
    const Charter__V1__Receipt *swapped[3] = {d2, d1, run};
    CU_ASSERT_EQUAL(charter_receipt_verify_chain(swapped, 3, &v, &bad, why, sizeof why),
                    -CHARTER_UNAUTHENTICATED);
    CU_ASSERT_EQUAL(v, CHARTER_RECEIPT_CHAIN_REORDERED);
    CU_ASSERT_EQUAL(bad, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "out of order"));
    /* a changed byte, through the C API */
    char *was = d2->recipient;
    d2->recipient = "cfo";
    CU_ASSERT_EQUAL(charter_receipt_verify_signed(d2, pem, strlen(pem), &v, why, sizeof why),
                    -CHARTER_UNAUTHENTICATED);
    CU_ASSERT_EQUAL(v, CHARTER_RECEIPT_ALTERED);
    d2->recipient = was;
    char *other = harness_slurp(other_pub_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(other);
    CU_ASSERT_EQUAL(charter_receipt_verify_signed(d2, other, strlen(other), &v, why, sizeof why),
                    -CHARTER_UNAUTHENTICATED);
    CU_ASSERT_EQUAL(v, CHARTER_RECEIPT_WRONG_KEY);
    free(other);
    free(pem);
    for (int i = 0; i < 4; i++)
        charter__v1__receipt__free_unpacked(all[i], NULL);
}

static void test_cli_verifies_the_run_with_only_the_public_key(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    CU_ASSERT_EQUAL_FATAL(
        harness_sh("CHARTER_URL=%s CHARTER_TOKEN=%s %s --json receipt %s %s:analyze:"
                   "deliver > %s",
                   daemon_.ipc_url, HARNESS_VIEWER_TOKEN, CHARTER_CLI_PATH, run_id, run_id,
                   d1_file),
        0);
    CU_ASSERT_EQUAL_FATAL(
        harness_sh("CHARTER_URL=%s CHARTER_TOKEN=%s %s --json receipt %s %s:report:"
                   "deliver > %s",
                   daemon_.ipc_url, HARNESS_VIEWER_TOKEN, CHARTER_CLI_PATH, run_id, run_id,
                   d2_file),
        0);
    CU_ASSERT_EQUAL_FATAL(harness_sh("CHARTER_URL=%s CHARTER_TOKEN=%s %s --json receipt %s > %s",
                                     daemon_.ipc_url, HARNESS_VIEWER_TOKEN, CHARTER_CLI_PATH,
                                     run_id, run_file),
                          0);
    char files[1000], out[4096];
    snprintf(files, sizeof files, "%s %s %s", d1_file, d2_file, run_file);
    CU_ASSERT_EQUAL(cli_verify(files, pub_path, false, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "valid: chain of 3 receipts of run"));
    CU_ASSERT_EQUAL(cli_verify(d2_file, pub_path, false, out, sizeof out), 0);
    CU_ASSERT_EQUAL(strncmp(out, "valid: delivery receipt of run", 30), 0);

    CU_ASSERT_EQUAL(cli_verify(files, pub_path, true, out, sizeof out), 0);
    json_t *j = json_loads(out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_TRUE(json_is_true(json_object_get(j, "valid")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "exit")), 0);
    CU_ASSERT_STRING_EQUAL(
        json_string_value(json_object_get(json_object_get(j, "chain"), "verdict")), "valid");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "receipts")), 3);
    json_decref(j);

    /* the MAC of the same file still verifies with the integrity key, as before */
    char path[300];
    snprintf(path, sizeof path, "%s/mac.out", tmpdir);
    CU_ASSERT_EQUAL(harness_sh("CHARTER_URL=ipc:///nonexistent %s verify-receipt %s --key %s > %s",
                               CHARTER_CLI_PATH, d2_file, key_path, path),
                    0);
}

/* One tamper case through the CLI: exit status, the message on stdout and the --json verdict. */
static void expect_cli(const char *files, const char *pub, int code, const char *message,
                       const char *verdict)
{
    char out[4096];
    int rc = cli_verify(files, pub, false, out, sizeof out);
    CU_ASSERT_EQUAL(rc, code);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, message));
    if (rc != code || !strstr(out, message))
        fprintf(stderr, "verify-receipt %s said (%d): %s\n", files, rc, out);
    CU_ASSERT_EQUAL(cli_verify(files, pub, true, out, sizeof out), code);
    json_t *j = json_loads(out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_TRUE(json_is_false(json_object_get(j, "valid")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "exit")), code);
    const char *chain = json_string_value(json_object_get(json_object_get(j, "chain"), "verdict"));
    bool seen = chain != NULL && strcmp(chain, verdict) == 0;
    size_t i;
    json_t *one;
    json_array_foreach(json_object_get(j, "receipts"), i, one)
    {
        const char *v = json_string_value(json_object_get(one, "verdict"));
        seen = seen || (v != NULL && strcmp(v, verdict) == 0);
    }
    CU_ASSERT_TRUE(seen);
    json_decref(j);
}

static void test_cli_names_each_tampering_with_its_own_exit_code(void)
{
    CU_ASSERT_FATAL(run_id[0] != '\0');
    char changed[300], unsigned_[300], resigned[300], files[1000];
    snprintf(changed, sizeof changed, "%s/changed.json", tmpdir);
    snprintf(unsigned_, sizeof unsigned_, "%s/unsigned.json", tmpdir);
    snprintf(resigned, sizeof resigned, "%s/resigned.json", tmpdir);
    CU_ASSERT_EQUAL_FATAL(edited_copy(d2_file, changed, change_recipient), 0);
    CU_ASSERT_EQUAL_FATAL(edited_copy(d2_file, unsigned_, drop_signature), 0);
    CU_ASSERT_EQUAL_FATAL(edited_copy(d2_file, resigned, sign_other_time), 0);

    /* a changed byte: the field, or the field together with the text it signs */
    expect_cli(changed, pub_path, 7, "invalid: the receipt was altered: its fields differ",
               "altered");
    expect_cli(resigned, pub_path, 7, "the signature does not match its text", "altered");
    /* another public key */
    expect_cli(d2_file, other_pub_path, 6, "was signed by key", "wrong_key");
    /* no signature */
    expect_cli(unsigned_, pub_path, 5, "carries no signature", "unsigned");
    /* a receipt removed from the chain: in the middle, and at the start */
    snprintf(files, sizeof files, "%s %s", d1_file, run_file);
    expect_cli(files, pub_path, 8, "invalid: chain: a receipt was removed", "chain_broken");
    snprintf(files, sizeof files, "%s %s", d2_file, run_file);
    expect_cli(files, pub_path, 8, "the receipts before it are missing", "chain_broken");
    /* reordered */
    snprintf(files, sizeof files, "%s %s %s", d2_file, d1_file, run_file);
    expect_cli(files, pub_path, 9, "invalid: chain: the receipts are out of order",
               "chain_reordered");
    snprintf(files, sizeof files, "%s %s %s", d1_file, run_file, d2_file);
    expect_cli(files, pub_path, 9, "out of order", "chain_reordered");
    /* a public key file that is not one is a usage error */
    char out[512];
    CU_ASSERT_EQUAL(cli_verify(d2_file, key_path, false, out, sizeof out), 2);
}

/* Starts charterd with extra options; it must stop with exactly one line naming word. */
static void expect_refused(const char *const *extra, size_t n, const char *word)
{
    const char *args[16];
    size_t k = 0;
    args[k++] = "--graph";
    args[k++] = graph;
    args[k++] = "--redis";
    args[k++] = harness_redis_url();
    args[k++] = "--listen";
    args[k++] = "ipc:///tmp/charter-signed-never.sock";
    for (size_t i = 0; i < n; i++)
        args[k++] = extra[i];
    const char *env[2] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    char output[2048] = "";
    int rc = harness_charterd_run(args, k, env, 20000, output, sizeof output);
    CU_ASSERT_EQUAL(rc, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(output, word));
    CU_ASSERT_PTR_NULL(strstr(output, "PRIVATE KEY"));
    size_t lines = 0;
    for (const char *p = output; *p; p++)
        lines += *p == '\n';
    CU_ASSERT_EQUAL(lines, 1);
    if (!strstr(output, word) || lines != 1)
        fprintf(stderr, "charterd said (%d): %s\n", rc, output);
}

static void test_startup_refuses_a_signing_key_of_wrong_type_mode_or_owner(void)
{
    const char *ec[4] = {"--integrity-key", key_path, "--signing-key", ec_path};
    expect_refused(ec, 4, "not Ed25519");

    char lax[300];
    snprintf(lax, sizeof lax, "%s/lax.pem", tmpdir);
    CU_ASSERT_EQUAL_FATAL(harness_sh("cp %s %s && chmod 644 %s", sign_path, lax, lax), 0);
    const char *open_key[4] = {"--integrity-key", key_path, "--signing-key", lax};
    expect_refused(open_key, 4, "mode 644");

    const char *keyless[3] = {"--no-integrity-key", "--signing-key", sign_path};
    expect_refused(keyless, 3, "--signing-key needs an integrity key");

    if (geteuid() == 0) {
        char foreign[300];
        snprintf(foreign, sizeof foreign, "%s/foreign.pem", tmpdir);
        CU_ASSERT_EQUAL_FATAL(harness_sh("cp %s %s && chmod 600 %s && chown nobody %s", sign_path,
                                         foreign, foreign, foreign),
                              0);
        const char *theirs[4] = {"--integrity-key", key_path, "--signing-key", foreign};
        expect_refused(theirs, 4, "not by the user running charterd");
    } else {
        /* not root: a file of another user cannot be made here; the check is the same fstat */
        fprintf(stderr, "(owner case needs root to chown; skipped)\n");
    }
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test text_tests[] = {
    {"signed text is the documented lines", test_signed_text_is_the_documented_lines},
};
static const harness_test charterd_tests[] = {
    {"receipt key is the public half of the signing key",
     test_receipt_key_is_the_public_half_of_the_signing_key},
    {"workflow receipts are signed and chained", test_workflow_receipts_are_signed_and_chained},
    {"CLI verifies the run with only the public key",
     test_cli_verifies_the_run_with_only_the_public_key},
    {"CLI names each tampering with its own exit code",
     test_cli_names_each_tampering_with_its_own_exit_code},
    {"startup refuses a signing key of wrong type, mode or owner",
     test_startup_refuses_a_signing_key_of_wrong_type_mode_or_owner},
};
static const harness_suite suites[] = {
    {"signed text", NULL, NULL, HARNESS_TABLE(text_tests)},
    {"signed receipts from a real charterd", suite_init, suite_clean,
     HARNESS_TABLE(charterd_tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
