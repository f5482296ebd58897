/*
 * test_keys.c - the integrity key a charterd starts with: made in the data folder at a new
 * graph's first start (mode 0600) and loaded at every later one, never replaced when it is
 * gone; a keyless graph kept keyless by default, saying how to go on; and a keyless graph
 * adopting a key (--adopt-integrity-key), its earlier events still verifying as plain SHA-256
 * and pinned by the key from then on, later ones sealed with it.
 *
 * Real charterd processes on the test Redis, each with a data folder of this suite's own. The
 * tampering is done in Redis behind charterd's back, as an attacker without the key could.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "charter.h"
#include "core/digest.h"
#include "db/store.h"
#include "evidence/evlog.h"
#include "harness.h"
#include "receipt.h"
#include "suite.h"

static char tmpdir[128];
static char keyed_graph[64], keyless_graph[64], fresh_graph[64], state_graph[64];
static char tampered_graph[64];
static char keyed_dir[192], keyless_dir[192], state_dir[192];
/* Runs of the keyless graph before it adopts, r2's context and the budget memo it read then. */
static char r1[129], r2[129], r2_ctx[129], r2_memo[129];
static uint64_t r1_seq, r2_seq;

static int suite_init(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/charter-keys-XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        return -1;
    harness_graph_name(keyed_graph, sizeof keyed_graph, "keys_default");
    harness_graph_name(keyless_graph, sizeof keyless_graph, "keys_keyless");
    harness_graph_name(fresh_graph, sizeof fresh_graph, "keys_fresh");
    harness_graph_name(state_graph, sizeof state_graph, "keys_state");
    harness_graph_name(tampered_graph, sizeof tampered_graph, "keys_tampered");
    snprintf(keyed_dir, sizeof keyed_dir, "%s/keyed", tmpdir);
    snprintf(keyless_dir, sizeof keyless_dir, "%s/keyless", tmpdir);
    snprintf(state_dir, sizeof state_dir, "%s/state", tmpdir);
    return 0;
}

static int suite_clean(void)
{
    harness_graph_drop(keyed_graph);
    harness_graph_drop(keyless_graph);
    harness_graph_drop(fresh_graph);
    harness_graph_drop(state_graph);
    harness_graph_drop(tampered_graph);
    return harness_sh("rm -rf %s", tmpdir) == 0 ? 0 : -1;
}

/* ---- helpers ---------------------------------------------------------------------------- */

/* Starts charterd on graph with data folder dir and the extra options; default_key: charterd's
 * own default key (no key option added). */
static int start(harness_charterd *d, const char *graph, const char *dir, bool default_key,
                 const char *const *extra, size_t n)
{
    harness_charterd_opts o = {.graph = graph,
                               .data_dir = dir,
                               .extra_args = extra,
                               .n_extra = n,
                               .default_key = default_key};
    return harness_charterd_start(&o, d);
}

/* Waits (at most 10 s) until charterd's log holds text; true when it does. */
static bool log_says(const harness_charterd *d, const char *text)
{
    for (int i = 0; i < 200; i++) {
        char *log = harness_slurp(d->log_path);
        bool found = log != NULL && strstr(log, text) != NULL;
        free(log);
        if (found)
            return true;
        harness_sleep_ms(50);
    }
    return false;
}

static charter_client *client_of(const harness_charterd *d)
{
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d->ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &c), 0);
    return c;
}

/* The run's seq (its last event). */
static uint64_t seq_of(charter_client *c, const char *run)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    req.run_id = (char *)run;
    if (charter_get_run(c, &req, &v, &st) != 0)
        return 0;
    uint64_t seq = v->run != NULL ? v->run->seq : 0;
    charter__v1__run_view__free_unpacked(v, NULL);
    return seq;
}

/* An external run with the analyze step open and the budget read into *memo. */
static void external_run(charter_client *c, char run[129], char ctx[129], char memo[129])
{
    CU_ASSERT_EQUAL_FATAL(harness_create_run(c, "external", NULL, run, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(c, run, "analyze", ctx), 0);
    CU_ASSERT_EQUAL_FATAL(harness_read_source(c, ctx, "budget", memo), 0);
}

/* Delivers artifact to cfo from ctx under invocation inv; true when committed. */
static bool deliver(charter_client *c, const char *ctx, const char *artifact, const char *inv)
{
    Charter__V1__DeliverRequest req = CHARTER__V1__DELIVER_REQUEST__INIT;
    Charter__V1__DeliverResponse *r = NULL;
    charter_status st;
    req.context_id = (char *)ctx;
    req.payload_id = (char *)artifact;
    req.recipient = (char *)"cfo";
    req.tool = (char *)"deliver_internal";
    req.invocation_id = (char *)inv;
    if (charter_deliver(c, &req, &r, &st) != 0)
        return false;
    bool ok = r->decision != NULL && r->decision->outcome == CHARTER__V1__OUTCOME__ALLOW;
    charter__v1__deliver_response__free_unpacked(r, NULL);
    return ok;
}

/* The receipt of delivery inv of run verifies under the key in key_file. */
static void receipt_verifies(charter_client *c, const char *run, const char *inv,
                             const char *key_file)
{
    Charter__V1__GetReceiptRequest req = CHARTER__V1__GET_RECEIPT_REQUEST__INIT;
    Charter__V1__Receipt *r = NULL;
    charter_status st;
    req.run_id = (char *)run;
    req.invocation_id = (char *)inv;
    CU_ASSERT_EQUAL_FATAL(charter_get_receipt(c, &req, &r, &st), 0);
    char *key = harness_slurp(key_file), reason[200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(key);
    CU_ASSERT_EQUAL(
        charter_receipt_verify(r, (unsigned char *)key, strlen(key), reason, sizeof reason), 0);
    free(key);
    charter__v1__receipt__free_unpacked(r, NULL);
}

/* AuditRun of run; the answer (caller frees) or NULL. */
static Charter__V1__AuditRunResponse *audit(charter_client *c, const char *run)
{
    Charter__V1__AuditRunRequest req = CHARTER__V1__AUDIT_RUN_REQUEST__INIT;
    Charter__V1__AuditRunResponse *a = NULL;
    charter_status st;
    req.run_id = (char *)run;
    return charter_audit_run(c, &req, &a, &st) == 0 ? a : NULL;
}

static void key_file_of(const char *dir, char *path, size_t n)
{
    snprintf(path, n, "%s/integrity.key", dir);
}

/* ---- a new graph ------------------------------------------------------------------------- */

static void test_a_first_start_makes_a_key_in_the_data_folder_and_seals_with_it(void)
{
    harness_charterd d;
    char key_path[256], line[512];
    key_file_of(keyed_dir, key_path, sizeof key_path);
    CU_ASSERT_EQUAL_FATAL(start(&d, keyed_graph, keyed_dir, true, NULL, 0), 0);
    struct stat sb;
    CU_ASSERT_EQUAL_FATAL(stat(key_path, &sb), 0);
    CU_ASSERT_TRUE(S_ISREG(sb.st_mode));
    CU_ASSERT_EQUAL(sb.st_mode & 0777, 0600);
    CU_ASSERT_EQUAL(sb.st_uid, geteuid());
    char *key = harness_slurp(key_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(key);
    CU_ASSERT_EQUAL(strlen(key), 65);
    CU_ASSERT_EQUAL(strspn(key, "0123456789abcdef"), 64);
    CU_ASSERT_EQUAL(key[64], '\n');
    snprintf(line, sizeof line,
             "graph %s: made a new integrity key in %s (mode 0600); keep a copy with the "
             "backups: the graph cannot be served without it",
             keyed_graph, key_path);
    CU_ASSERT_TRUE(log_says(&d, line));
    CU_ASSERT_TRUE(log_says(&d, "events sealed with the integrity key"));

    charter_client *c = client_of(&d);
    char run[129], ctx[129], memo[129], inv[160];
    external_run(c, run, ctx, memo);
    snprintf(inv, sizeof inv, "%s:cfo", run);
    CU_ASSERT_TRUE(deliver(c, ctx, memo, inv));
    receipt_verifies(c, run, inv, key_path);
    Charter__V1__AuditRunResponse *a = audit(c, run);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_TRUE(a->intact);
    CU_ASSERT_TRUE(a->keyed);
    CU_ASSERT_EQUAL(a->keyless_until, 0);
    charter__v1__audit_run_response__free_unpacked(a, NULL);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);

    /* The next start loads the same key and makes none. */
    CU_ASSERT_EQUAL_FATAL(start(&d, keyed_graph, keyed_dir, true, NULL, 0), 0);
    CU_ASSERT_TRUE(log_says(&d, "events sealed with the integrity key"));
    char *again = harness_slurp(key_path), *log = harness_slurp(d.log_path);
    CU_ASSERT_STRING_EQUAL(again, key);
    CU_ASSERT_PTR_NULL(strstr(log, "made a new integrity key"));
    free(again);
    free(log);
    free(key);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
}

static void test_a_keyed_graph_whose_key_file_is_gone_is_refused_and_never_given_a_new_one(void)
{
    char key_path[256], moved[256], want[1024];
    key_file_of(keyed_dir, key_path, sizeof key_path);
    snprintf(moved, sizeof moved, "%s/integrity.key.away", tmpdir);
    CU_ASSERT_EQUAL_FATAL(rename(key_path, moved), 0);
    harness_charterd d;
    CU_ASSERT_NOT_EQUAL(start(&d, keyed_graph, keyed_dir, true, NULL, 0), 0);
    char *log = harness_slurp(d.log_path);
    snprintf(want, sizeof want,
             "charterd: graph %s: its events and receipts are sealed with an integrity key, and "
             "the key file %s is missing (restore it from the backup of the data folder, or "
             "pass --integrity-key FILE)\n",
             keyed_graph, key_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    CU_ASSERT_STRING_EQUAL(log, want);
    free(log);
    struct stat sb;
    CU_ASSERT_EQUAL(stat(key_path, &sb), -1);
    CU_ASSERT_EQUAL(rename(moved, key_path), 0);
    harness_sh("rm -rf %s", d.dir);
}

/* ---- a keyless graph ----------------------------------------------------------------------- */

static void test_a_keyless_graph_stays_keyless_by_default_and_says_how_to_go_on(void)
{
    harness_charterd d;
    char key_path[256], line[512], memo[129];
    key_file_of(keyless_dir, key_path, sizeof key_path);
    const char *keyless[] = {"--no-integrity-key"};
    CU_ASSERT_EQUAL_FATAL(start(&d, keyless_graph, keyless_dir, false, keyless, 1), 0);
    charter_client *c = client_of(&d);
    char ctx1[129];
    external_run(c, r1, ctx1, memo);
    external_run(c, r2, r2_ctx, r2_memo);
    r1_seq = seq_of(c, r1);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);

    /* Started as a new install would be, with no key option: it stays keyless. */
    CU_ASSERT_EQUAL_FATAL(start(&d, keyless_graph, keyless_dir, true, NULL, 0), 0);
    snprintf(line, sizeof line,
             "graph %s was created without an integrity key: no receipts or checkpoints "
             "(restart with --adopt-integrity-key to seal its events with %s from now on)",
             keyless_graph, key_path);
    CU_ASSERT_TRUE(log_says(&d, line));
    c = client_of(&d);
    Charter__V1__GetReceiptRequest req = CHARTER__V1__GET_RECEIPT_REQUEST__INIT;
    Charter__V1__Receipt *r = NULL;
    charter_status st;
    req.run_id = r1;
    CU_ASSERT_EQUAL(charter_get_receipt(c, &req, &r, &st), -CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "restart charterd with --adopt-integrity-key"));
    r2_seq = seq_of(c, r2);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    struct stat sb;
    /* No key, nor a data folder to hold one, made for a graph that does not use it. */
    CU_ASSERT_EQUAL(stat(key_path, &sb), -1);
    CU_ASSERT_EQUAL(stat(keyless_dir, &sb), -1);

    /* A key given without asking to adopt it is refused, and says how. */
    char given[256], out[2048];
    snprintf(given, sizeof given, "%s/given.key", tmpdir);
    CU_ASSERT_EQUAL_FATAL(harness_sh("umask 077 && openssl rand -hex 32 > %s", given), 0);
    const char *args[] = {"--graph",  keyless_graph,       "--redis",         harness_redis_url(),
                          "--listen", "tcp://127.0.0.1:0", "--integrity-key", given};
    const char *env[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    CU_ASSERT_EQUAL(harness_charterd_run(args, 8, env, 20000, out, sizeof out), 1);
    snprintf(line, sizeof line,
             "charterd: graph %s: the graph was created without an integrity key (add "
             "--adopt-integrity-key to seal its events with this key from now on, earlier ones "
             "staying verifiable as plain SHA-256; or start charterd with --no-integrity-key)\n",
             keyless_graph);
    CU_ASSERT_STRING_EQUAL(out, line);
}

static void test_a_keyless_graph_adopts_the_key_and_its_earlier_events_stay_verifiable(void)
{
    harness_charterd d;
    char key_path[256], line[512];
    key_file_of(keyless_dir, key_path, sizeof key_path);
    const char *adopt[] = {"--adopt-integrity-key"};
    CU_ASSERT_EQUAL_FATAL(start(&d, keyless_graph, keyless_dir, false, adopt, 1), 0);
    snprintf(line, sizeof line, "graph %s adopted the integrity key at ", keyless_graph);
    CU_ASSERT_TRUE(log_says(&d, line));
    CU_ASSERT_TRUE(log_says(&d, "the events its 2 runs had stay verifiable as plain SHA-256"));
    charter_client *c = client_of(&d);

    /* r1 is untouched since: every event plain SHA-256, pinned by the adoption. */
    Charter__V1__AuditRunResponse *a = audit(c, r1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_TRUE(a->intact);
    CU_ASSERT_TRUE(a->keyed);
    CU_ASSERT_EQUAL(a->keyless_until, r1_seq);
    CU_ASSERT_EQUAL(a->events, r1_seq);
    charter__v1__audit_run_response__free_unpacked(a, NULL);

    /* r2 goes on: its new events are HMACs, chained to the keyless ones, and the memo it read
     * before, whose summary the adoption sealed, is delivered with a receipt. */
    char quote[129], inv[160];
    CU_ASSERT_EQUAL_FATAL(harness_read_source(c, r2_ctx, "vendor_a", quote), 0);
    snprintf(inv, sizeof inv, "%s:cfo", r2);
    CU_ASSERT_TRUE(deliver(c, r2_ctx, r2_memo, inv));
    receipt_verifies(c, r2, inv, key_path);
    a = audit(c, r2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_TRUE(a->intact);
    CU_ASSERT_EQUAL(a->keyless_until, r2_seq);
    CU_ASSERT_TRUE(a->events > r2_seq);
    charter__v1__audit_run_response__free_unpacked(a, NULL);

    /* A run made after the adoption is keyed throughout. */
    char r3[129], ctx[129], memo[129];
    external_run(c, r3, ctx, memo);
    a = audit(c, r3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_TRUE(a->intact);
    CU_ASSERT_EQUAL(a->keyless_until, 0);
    charter__v1__audit_run_response__free_unpacked(a, NULL);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);

    /* The graph records the moment; later starts are plain keyed starts. */
    store *st = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(harness_redis_url(), keyless_graph, 5000, &st), STATUS_OK);
    json_t *state = NULL;
    CU_ASSERT_EQUAL_FATAL(q_integrity_state(st, &state), STATUS_OK);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(state, "mode")), "keyed");
    CU_ASSERT_TRUE(json_is_string(json_object_get(state, "adopted_at")));
    json_decref(state);
    store_close(st);
    CU_ASSERT_EQUAL_FATAL(start(&d, keyless_graph, keyless_dir, true, NULL, 0), 0);
    CU_ASSERT_TRUE(log_says(&d, "events sealed with the integrity key"));
    c = client_of(&d);
    a = audit(c, r1);
    CU_ASSERT_PTR_NOT_NULL(a);
    CU_ASSERT_TRUE(a != NULL && a->intact);
    if (a != NULL)
        charter__v1__audit_run_response__free_unpacked(a, NULL);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
}

/* ---- what the adoption's seal stops -------------------------------------------------------- */

static redisContext *redis_open(void)
{
    const char *url = harness_redis_url();
    struct timeval tv = {10, 0};
    return strncmp(url, "unix://", 7) == 0 ? redisConnectUnixWithTimeout(url + 7, tv) : NULL;
}

/* A field of a Redis hash, "" when absent, into out. */
static void hget(redisContext *r, const char *key, const char *field, char *out, size_t n)
{
    redisReply *rep = redisCommand(r, "HGET %s %s", key, field);
    snprintf(out, n, "%s", rep != NULL && rep->type == REDIS_REPLY_STRING ? rep->str : "");
    freeReplyObject(rep);
}

/* Rewrites the witness of r1's last event and gives it its plain SHA-256 again, and the run
 * its new head: the chain is consistent, as anyone could make it without the key. */
static void rewrite_last_keyless_event(redisContext *r)
{
    char key[256], run_key[256], f[11][1024], hash[65];
    static const char *const names[11] = {"run_id",   "seq",       "ts",      "kind",
                                          "outcome",  "codes",     "witness", "detail",
                                          "snapshot", "evaluator", "prev"};
    snprintf(key, sizeof key, "charter:{%s}:event:%s:%llu", keyless_graph, r1,
             (unsigned long long)r1_seq);
    snprintf(run_key, sizeof run_key, "charter:{%s}:run:%s", keyless_graph, r1);
    for (int i = 0; i < 11; i++)
        hget(r, key, names[i], f[i], sizeof f[i]);
    snprintf(f[6], sizeof f[6], "nothing happened here");
    evlog_fields ev = {f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10]};
    CU_ASSERT_EQUAL_FATAL(evlog_event_hash_as(&ev, false, hash), STATUS_OK);
    freeReplyObject(redisCommand(r, "HSET %s witness %s hash %s", key, f[6], hash));
    freeReplyObject(redisCommand(r, "HSET %s head %s", run_key, hash));
}

static void test_the_adoption_seal_pins_the_keyless_events_and_its_own_mark(void)
{
    redisContext *r = redis_open();
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL_FATAL(r->err, 0);
    rewrite_last_keyless_event(r);
    /* Moving r2's mark past its keyless events would hand the keyed ones to plain SHA-256. */
    char run_key[256];
    snprintf(run_key, sizeof run_key, "charter:{%s}:run:%s", keyless_graph, r2);
    freeReplyObject(
        redisCommand(r, "HSET %s keyless_until %llu", run_key, (unsigned long long)r2_seq + 2));
    redisFree(r);

    harness_charterd d;
    CU_ASSERT_EQUAL_FATAL(start(&d, keyless_graph, keyless_dir, true, NULL, 0), 0);
    charter_client *c = client_of(&d);
    char want[256];
    Charter__V1__AuditRunResponse *a = audit(c, r1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_FALSE(a->intact);
    CU_ASSERT_EQUAL(a->first_bad_seq, r1_seq);
    snprintf(want, sizeof want,
             "event %llu was changed: its fields no longer hash to the hash it was sealed with",
             (unsigned long long)r1_seq);
    CU_ASSERT_STRING_EQUAL(a->problem, want);
    charter__v1__audit_run_response__free_unpacked(a, NULL);
    a = audit(c, r2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_FALSE(a->intact);
    CU_ASSERT_STRING_EQUAL(a->problem,
                           "the run's mark of the events it had when its graph adopted the "
                           "integrity key was altered: its seal does not verify under the key");
    charter__v1__audit_run_response__free_unpacked(a, NULL);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
}

/* A summary rewritten behind the API's back while the graph was keyless: the adoption refuses
 * to seal it, and the graph stays keyless. */
static void test_an_adoption_never_vouches_for_a_summary_edited_before_it(void)
{
    char dir[256], run[129], ctx[129], memo[129], key[256], text[4096], sha1[41], want[512];
    snprintf(dir, sizeof dir, "%s/tampered", tmpdir);
    const char *keyless[] = {"--no-integrity-key"};
    harness_charterd d;
    CU_ASSERT_EQUAL_FATAL(start(&d, tampered_graph, dir, false, keyless, 1), 0);
    charter_client *c = client_of(&d);
    external_run(c, run, ctx, memo);
    charter_client_close(c);
    CU_ASSERT_EQUAL_FATAL(harness_charterd_stop(&d), 0);

    /* The memo's summary says it is public, with a SHA-1 that matches: only a re-derivation
     * from the graph shows it. */
    redisContext *r = redis_open();
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    snprintf(key, sizeof key, "charter:{%s}:artifact:%s", tampered_graph, memo);
    hget(r, key, "summary", text, sizeof text);
    char *conf = strstr(text, "\"conf\":2");
    CU_ASSERT_PTR_NOT_NULL_FATAL(conf);
    conf[7] = '0';
    CU_ASSERT_EQUAL_FATAL(digest_sha1_hex(text, strlen(text), sha1), 0);
    freeReplyObject(redisCommand(r, "HSET %s summary %s summary_hash %s", key, text, sha1));
    redisFree(r);

    const char *adopt[] = {"--adopt-integrity-key"};
    CU_ASSERT_NOT_EQUAL(start(&d, tampered_graph, dir, false, adopt, 1), 0);
    char *log = harness_slurp(d.log_path);
    snprintf(want, sizeof want,
             "charterd: graph %s: cannot adopt the integrity key: run %s: artifact %s's lineage "
             "summary: ",
             tampered_graph, run, memo);
    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    CU_ASSERT_EQUAL(strncmp(log, want, strlen(want)), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "(a key cannot vouch for it: charter audit "));
    free(log);
    harness_sh("rm -rf %s", d.dir);
    store *st = NULL;
    json_t *state = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(harness_redis_url(), tampered_graph, 5000, &st), STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(q_integrity_state(st, &state), STATUS_OK);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(state, "mode")), "keyless");
    json_decref(state);
    store_close(st);
}

/* The adoption's write takes the runs as they were listed, or nothing. */
static void test_an_adoption_over_runs_that_moved_writes_nothing(void)
{
    store *st = harness_store_open(fresh_graph);
    json_t *reply = NULL;
    CU_ASSERT_EQUAL_FATAL(q_integrity(st, "keyless", "", &reply), STATUS_OK);
    json_decref(reply);
    static const char check[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    char stale[512];
    snprintf(stale, sizeof stale,
             "{\"runs\":[{\"id\":\"rgone\",\"seq\":3,\"head\":\"%s\",\"seal\":\"%s\"}]}", check,
             check);
    CU_ASSERT_EQUAL_FATAL(q_adopt_key(st, check, stale, &reply), STATUS_OK);
    CU_ASSERT_TRUE(json_is_true(json_object_get(reply, "conflict")));
    json_decref(reply);
    CU_ASSERT_EQUAL_FATAL(q_integrity_state(st, &reply), STATUS_OK);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(reply, "mode")), "keyless");
    CU_ASSERT_PTR_NULL(json_object_get(reply, "adopted_at"));
    json_decref(reply);
    CU_ASSERT_EQUAL_FATAL(q_adopt_key(st, check, "{\"runs\":[]}", &reply), STATUS_OK);
    CU_ASSERT_TRUE(json_is_true(json_object_get(reply, "adopted")));
    json_decref(reply);
    store_close(st);
}

/* ---- options ---------------------------------------------------------------------------- */

static void expect_usage_error(const char *const *extra, size_t n, const char *line)
{
    const char *args[8] = {"--graph", fresh_graph, "--redis", harness_redis_url()};
    for (size_t i = 0; i < n && i < 4; i++)
        args[4 + i] = extra[i];
    const char *env[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    char out[1024];
    CU_ASSERT_EQUAL(harness_charterd_run(args, 4 + n, env, 20000, out, sizeof out), 2);
    CU_ASSERT_STRING_EQUAL(out, line);
}

static void test_key_options_that_exclude_each_other_are_refused(void)
{
    const char *both[] = {"--no-integrity-key", "--integrity-key", "/nonexistent/k"};
    expect_usage_error(both, 3,
                       "charterd: --no-integrity-key and --integrity-key exclude each other "
                       "(give one)\n");
    const char *adopt[] = {"--no-integrity-key", "--adopt-integrity-key"};
    expect_usage_error(adopt, 2,
                       "charterd: --adopt-integrity-key needs an integrity key (drop "
                       "--no-integrity-key)\n");
}

/* Under systemd (StateDirectory=), the data folder and so the key are in $STATE_DIRECTORY. */
static void test_the_state_directory_systemd_names_is_the_default_data_folder(void)
{
    CU_ASSERT_EQUAL_FATAL(mkdir(state_dir, 0700), 0);
    CU_ASSERT_EQUAL_FATAL(setenv("STATE_DIRECTORY", state_dir, 1), 0);
    harness_charterd d;
    int rc = start(&d, state_graph, NULL, true, NULL, 0);
    unsetenv("STATE_DIRECTORY");
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    char key_path[256];
    key_file_of(state_dir, key_path, sizeof key_path);
    struct stat sb;
    CU_ASSERT_EQUAL(stat(key_path, &sb), 0);
    CU_ASSERT_EQUAL(sb.st_mode & 0777, 0600);
    CU_ASSERT_TRUE(log_says(&d, key_path));
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
}

static const harness_test tests[] = {
    HARNESS_TEST(test_a_first_start_makes_a_key_in_the_data_folder_and_seals_with_it),
    HARNESS_TEST(test_a_keyed_graph_whose_key_file_is_gone_is_refused_and_never_given_a_new_one),
    HARNESS_TEST(test_a_keyless_graph_stays_keyless_by_default_and_says_how_to_go_on),
    HARNESS_TEST(test_a_keyless_graph_adopts_the_key_and_its_earlier_events_stay_verifiable),
    HARNESS_TEST(test_the_adoption_seal_pins_the_keyless_events_and_its_own_mark),
    HARNESS_TEST(test_an_adoption_never_vouches_for_a_summary_edited_before_it),
    HARNESS_TEST(test_an_adoption_over_runs_that_moved_writes_nothing),
    HARNESS_TEST(test_key_options_that_exclude_each_other_are_refused),
    HARNESS_TEST(test_the_state_directory_systemd_names_is_the_default_data_folder),
};
static const harness_suite suites[] = {
    {"the integrity key a charterd starts with", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .needs_redis = true};
