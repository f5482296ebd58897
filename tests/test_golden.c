/*
 * test_golden.c - the golden corpus (tests/golden/README.md): recorded decision facts and the
 * verdicts they were given, replayed offline through evaluator_replay, no database.
 *
 * tests/golden/evaluator-<N>.json holds decisions recorded by evaluator version N: each must
 * replay with that version's evaluator to its recorded outcome, codes and witness. So a change
 * that alters a verdict without a new version fails here, and so does a new version that drops
 * an old version's evaluator (that version's corpus can no longer be replayed). A declared
 * version without a corpus fails too, and the current version's corpus must cover every gate,
 * every outcome and the codes that matter. tests/golden/pre-versions.json holds decisions
 * recorded before versions were declared (their evaluator a fingerprint over source bytes):
 * each must still replay, and match, with the first declared version.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "core/digest.h"
#include "policy/evaluator.h"
#include "suite.h"

#define GOLDEN_DIR CHARTER_SOURCE_DIR "/tests/golden"
#define PRE_VERSIONS GOLDEN_DIR "/pre-versions.json"

/* The entries of a corpus file (new reference), NULL (said) when it cannot be read. */
static json_t *corpus_entries(const char *path)
{
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    json_t *entries = json_incref(json_object_get(doc, "entries"));
    json_decref(doc);
    if (!json_is_array(entries)) {
        fprintf(stderr, "\n  %s: %s\n", path, doc == NULL ? err.text : "no \"entries\" list");
        json_decref(entries);
        return NULL;
    }
    return entries;
}

/* The event of entry as charter_get_event answers it: the snapshot as its JSON text, in the
 * encoding charterd stores (sorted keys, doubles at 17 digits). New reference. */
static json_t *event_of(const json_t *entry)
{
    json_t *event = json_deep_copy(json_object_get(entry, "event"));
    const json_t *snap = json_object_get(event, "snapshot");
    char *text = json_is_object(snap)
                     ? json_dumps(snap, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17))
                     : NULL;
    if (text == NULL || json_object_set_new(event, "snapshot", json_string(text)) != 0) {
        json_decref(event);
        event = NULL;
    }
    free(text);
    return event;
}

/* Replays every entry of path and checks each replays with evaluator version version (and was
 * recorded before versions when before), to its recorded verdict. Returns the entries
 * replayed; every one that does not is named on stderr and fails an assertion. */
static size_t replay_corpus(const char *path, int version, bool before)
{
    json_t *entries = corpus_entries(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(entries);
    size_t i, ok = 0;
    json_t *entry;
    json_array_foreach(entries, i, entry)
    {
        const char *name = json_string_value(json_object_get(entry, "name"));
        json_t *event = event_of(entry);
        CU_ASSERT_PTR_NOT_NULL_FATAL(event);
        evaluator_replay_result res;
        char why[256];
        int rc = evaluator_replay(NULL, event, &res, why, sizeof why);
        bool good = rc == STATUS_OK && !res.no_snapshot && res.matches && res.version == version &&
                    res.before_versions == before;
        if (!good) {
            char codes[512] = "";
            if (rc == STATUS_OK)
                guard_codes_format(res.replayed.codes, codes, sizeof codes);
            fprintf(stderr,
                    "\n  %s entry %zu (%s, run %s seq %lld): %s: recorded %s %s, replayed %s %s "
                    "(%s) with version %d%s",
                    path, i, name ? name : "?",
                    json_string_value(json_object_get(json_object_get(entry, "event"), "run_id")),
                    (long long)json_integer_value(
                        json_object_get(json_object_get(entry, "event"), "seq")),
                    rc == STATUS_OK ? "differs" : why,
                    json_string_value(json_object_get(event, "outcome")),
                    json_string_value(json_object_get(event, "codes")),
                    rc == STATUS_OK ? decision_outcome_name(res.replayed.outcome) : "-", codes,
                    res.replayed.witness ? res.replayed.witness : "", res.version,
                    res.before_versions ? ", recorded before versions" : "");
        }
        CU_ASSERT_TRUE(good);
        ok += good;
        if (rc == STATUS_OK)
            evaluator_replay_result_free(&res);
        json_decref(event);
    }
    CU_ASSERT(json_array_size(entries) > 0);
    json_decref(entries);
    return ok;
}

static void corpus_path(int version, char *path, size_t n)
{
    snprintf(path, n, "%s/evaluator-%d.json", GOLDEN_DIR, version);
}

static void test_every_declared_version_has_a_corpus_that_replays(void)
{
    int versions[64];
    size_t n = evaluator_versions(versions, 64);
    CU_ASSERT_FATAL(n > 0 && n <= 64);
    CU_ASSERT_EQUAL(versions[n - 1], EVALUATOR_VERSION);
    for (size_t i = 0; i < n; i++) {
        char path[512];
        corpus_path(versions[i], path, sizeof path);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            fprintf(stderr,
                    "\n  evaluator version %d has no corpus: record %s "
                    "(tests/golden/record.sh)",
                    versions[i], path);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fclose(f);
        CU_ASSERT(replay_corpus(path, versions[i], false) > 0);
    }
}

/* A corpus file whose version this build does not declare: the version's evaluator was
 * dropped, so decisions recorded under it could no longer be replayed. */
static void test_every_corpus_names_a_declared_version(void)
{
    DIR *d = opendir(GOLDEN_DIR);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    struct dirent *e;
    size_t files = 0;
    while ((e = readdir(d)) != NULL) {
        int version = 0, end = 0;
        if (sscanf(e->d_name, "evaluator-%d.json%n", &version, &end) != 1 || e->d_name[end] != '\0')
            continue;
        files++;
        if (!evaluator_version_declared(version))
            fprintf(stderr,
                    "\n  %s: this build has no evaluator of version %d: a version "
                    "whose decisions were recorded must stay replayable",
                    e->d_name, version);
        CU_ASSERT_TRUE(evaluator_version_declared(version));
    }
    closedir(d);
    CU_ASSERT(files > 0);
}

static bool has_code(const char *codes, const char *code)
{
    size_t n = strlen(code);
    for (const char *p = strstr(codes, code); p != NULL; p = strstr(p + 1, code))
        if ((p == codes || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
            return true;
    return false;
}

/* How many entries of entries decide gate (NULL: any) to outcome (NULL: any) with code (NULL:
 * any). */
static size_t count_of(const json_t *entries, const char *gate, const char *outcome,
                       const char *code)
{
    size_t i, n = 0;
    const json_t *entry;
    json_array_foreach(entries, i, entry)
    {
        const json_t *ev = json_object_get(entry, "event");
        const char *g = json_string_value(json_object_get(entry, "gate"));
        const char *o = json_string_value(json_object_get(ev, "outcome"));
        const char *c = json_string_value(json_object_get(ev, "codes"));
        if ((gate == NULL || (g && strcmp(g, gate) == 0)) &&
            (outcome == NULL || (o && strcmp(o, outcome) == 0)) &&
            (code == NULL || (c && has_code(c, code))))
            n++;
    }
    return n;
}

/* What the current version's corpus must hold, whoever records it again. */
static void test_the_current_corpus_covers_every_gate_outcome_and_code(void)
{
    char path[512];
    corpus_path(EVALUATOR_VERSION, path, sizeof path);
    json_t *entries = corpus_entries(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(entries);
    static const char *const gates[] = {"input", "source", "delivery", "identity"};
    for (size_t i = 0; i < 4; i++)
        CU_ASSERT(count_of(entries, gates[i], "deny", NULL) > 0);
    static const char *const allowed[] = {"input", "source", "delivery"};
    for (size_t i = 0; i < 3; i++)
        CU_ASSERT(count_of(entries, allowed[i], "allow", NULL) > 0);
    CU_ASSERT(count_of(entries, "input", "unknown", "GRAPH_ERROR") > 0);
    CU_ASSERT(count_of(entries, "delivery", "unknown", "GRAPH_ERROR") > 0);
    static const char *const codes[] = {
        "INPUT_OUT_OF_SCOPE", "RESOURCE_OUT_OF_SCOPE", "STEP_MISMATCH",
        "CLEARANCE_EXCEEDED", "GRANT_INVALID",         "PROVENANCE_INCOMPLETE",
        "LABEL_MISMATCH",     "IDENTITY_MISMATCH",     "GRAPH_ERROR"};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        if (count_of(entries, NULL, NULL, codes[i]) == 0)
            fprintf(stderr, "\n  %s has no decision with code %s", path, codes[i]);
        CU_ASSERT(count_of(entries, NULL, NULL, codes[i]) > 0);
    }
    json_decref(entries);
}

/* Decisions recorded by the build before versions were declared (a fingerprint over the
 * guard's and the query library's source bytes) replay with the first declared version, and
 * match. */
static void test_decisions_recorded_before_versions_replay_and_match(void)
{
    json_t *entries = corpus_entries(PRE_VERSIONS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(entries);
    size_t n = json_array_size(entries);
    CU_ASSERT(count_of(entries, "input", NULL, NULL) > 0);
    CU_ASSERT(count_of(entries, "source", NULL, NULL) > 0);
    CU_ASSERT(count_of(entries, "delivery", NULL, NULL) > 0);
    CU_ASSERT(count_of(entries, "identity", NULL, NULL) > 0);
    json_decref(entries);
    CU_ASSERT_EQUAL(replay_corpus(PRE_VERSIONS, 2, true), n);
}

/* The first entry of the current corpus deciding gate, as an event (new reference). */
static json_t *current_event(const char *gate)
{
    char path[512];
    corpus_path(EVALUATOR_VERSION, path, sizeof path);
    json_t *entries = corpus_entries(path), *event = NULL;
    size_t i;
    json_t *entry;
    json_array_foreach(entries, i, entry)
    {
        if (event == NULL && strcmp(json_string_value(json_object_get(entry, "gate")), gate) == 0)
            event = event_of(entry);
    }
    json_decref(entries);
    return event;
}

/* The snapshot of event as an object (new reference) and back into the event. */
static json_t *snapshot_get(const json_t *event)
{
    return json_loads(json_string_value(json_object_get(event, "snapshot")), 0, NULL);
}

static void snapshot_put(json_t *event, json_t *snap)
{
    char *text = json_dumps(snap, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    json_object_set_new(event, "snapshot", json_string(text));
    free(text);
    json_decref(snap);
}

/* A decision claiming a version this build does not have is refused, even with the
 * fingerprint that version would have. */
static void test_a_version_this_build_does_not_have_is_refused(void)
{
    json_t *event = current_event("delivery");
    CU_ASSERT_PTR_NOT_NULL_FATAL(event);
    json_t *snap = snapshot_get(event);
    CU_ASSERT_PTR_NOT_NULL_FATAL(snap);
    const char *workflow = json_string_value(json_object_get(snap, "workflow"));
    char fp[65];
    CU_ASSERT_EQUAL_FATAL(evaluator_fingerprint_at(EVALUATOR_VERSION + 1, workflow, fp), 0);
    json_object_set_new(event, "evaluator", json_string(fp));
    json_object_set_new(snap, "evaluator_version", json_integer(EVALUATOR_VERSION + 1));
    snapshot_put(event, snap);
    evaluator_replay_result res;
    char why[256], want[64];
    CU_ASSERT_EQUAL(evaluator_replay(NULL, event, &res, why, sizeof why), STATUS_EFINGERPRINT);
    snprintf(want, sizeof want, "evaluator version %d, which this charterd does not have",
             EVALUATOR_VERSION + 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, want));
    json_decref(event);
}

/* A decision whose fingerprint is not its recorded version's under its recorded workflow is
 * refused, naming both fingerprints. */
static void test_a_fingerprint_not_of_the_recorded_version_is_refused(void)
{
    json_t *event = current_event("input");
    CU_ASSERT_PTR_NOT_NULL_FATAL(event);
    char was[65];
    snprintf(was, sizeof was, "%s", json_string_value(json_object_get(event, "evaluator")));
    const char *other = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    json_object_set_new(event, "evaluator", json_string(other));
    evaluator_replay_result res;
    char why[256];
    CU_ASSERT_EQUAL(evaluator_replay(NULL, event, &res, why, sizeof why), STATUS_EFINGERPRINT);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, other));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, was));
    /* the same decision under another workflow version than it records */
    json_t *snap = snapshot_get(event);
    json_object_set_new(snap, "workflow", json_string("another"));
    snapshot_put(event, snap);
    json_object_set_new(event, "evaluator", json_string(was));
    CU_ASSERT_EQUAL(evaluator_replay(NULL, event, &res, why, sizeof why), STATUS_EFINGERPRINT);
    json_decref(event);
}

/* A snapshot that lost its version while its fingerprint is a declared version's is not
 * taken for a decision recorded before versions were declared. */
static void test_a_snapshot_stripped_of_its_version_is_refused(void)
{
    json_t *event = current_event("source");
    CU_ASSERT_PTR_NOT_NULL_FATAL(event);
    json_t *snap = snapshot_get(event);
    CU_ASSERT_EQUAL_FATAL(json_object_del(snap, "evaluator_version"), 0);
    snapshot_put(event, snap);
    evaluator_replay_result res;
    char why[256];
    CU_ASSERT_EQUAL(evaluator_replay(NULL, event, &res, why, sizeof why), STATUS_ESNAPSHOT);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "names no evaluator version"));
    json_decref(event);
}

/* Replaying a decision recorded before versions is a comparison of verdicts: one whose
 * stored verdict was edited replays, and differs. */
static void test_an_edited_verdict_recorded_before_versions_differs(void)
{
    json_t *entries = corpus_entries(PRE_VERSIONS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(entries);
    json_t *event = NULL;
    size_t i;
    json_t *entry;
    json_array_foreach(entries, i, entry)
    {
        const char *codes =
            json_string_value(json_object_get(json_object_get(entry, "event"), "codes"));
        if (event == NULL && codes != NULL && strcmp(codes, "INPUT_OUT_OF_SCOPE") == 0)
            event = event_of(entry);
    }
    json_decref(entries);
    CU_ASSERT_PTR_NOT_NULL_FATAL(event);
    json_object_set_new(event, "outcome", json_string("allow"));
    json_object_set_new(event, "codes", json_string(""));
    json_object_set_new(event, "witness", json_string(""));
    evaluator_replay_result res;
    char why[256];
    CU_ASSERT_EQUAL_FATAL(evaluator_replay(NULL, event, &res, why, sizeof why), STATUS_OK);
    CU_ASSERT_TRUE(res.before_versions);
    CU_ASSERT_EQUAL(res.version, 2);
    CU_ASSERT_EQUAL(res.replayed.outcome, GUARD_DENY);
    CU_ASSERT_FALSE(res.matches);
    evaluator_replay_result_free(&res);
    /* with no fingerprint at all it is not a recorded decision of any evaluator */
    json_object_set_new(event, "evaluator", json_string(""));
    CU_ASSERT_EQUAL(evaluator_replay(NULL, event, &res, why, sizeof why), STATUS_EFINGERPRINT);
    json_decref(event);
}

/* The fingerprint of version under workflow as the documented text's SHA-256, computed here
 * apart with OpenSSL into want (65 bytes). */
static void fingerprint_oracle(int version, const char *workflow, char want[65])
{
    char text[256];
    int n = snprintf(text, sizeof text, "charter-evaluator-2\nversion=%d\nworkflow=%s\n", version,
                     workflow);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    CU_ASSERT_EQUAL_FATAL(EVP_Digest(text, (size_t)n, md, &len, EVP_sha256(), NULL), 1);
    digest_hex(md, len, want);
}

/* The fingerprint is the declared version and the workflow version, no source byte in it,
 * whatever was asked before (a thread keeps the last one it computed). */
static void test_the_fingerprint_is_the_version_and_the_workflow(void)
{
    const char *a = "886f5bbe7cc41006f68098e30d7711c7486ed56c94b71f25653c158ab5589b8a";
    const char *b = "0000000000000000000000000000000000000000000000000000000000000001";
    char want_a[65], want_b[65], want_next[65], got[65];
    fingerprint_oracle(EVALUATOR_VERSION, a, want_a);
    fingerprint_oracle(EVALUATOR_VERSION, b, want_b);
    fingerprint_oracle(EVALUATOR_VERSION + 1, a, want_next);
    CU_ASSERT_STRING_NOT_EQUAL(want_a, want_b);
    CU_ASSERT_STRING_NOT_EQUAL(want_a, want_next);
    for (int round = 0; round < 2; round++) {
        CU_ASSERT_EQUAL(evaluator_fingerprint_of(a, got), 0);
        CU_ASSERT_STRING_EQUAL(got, want_a);
        CU_ASSERT_EQUAL(evaluator_fingerprint_of(a, got), 0);
        CU_ASSERT_STRING_EQUAL(got, want_a);
        CU_ASSERT_EQUAL(evaluator_fingerprint_of(b, got), 0);
        CU_ASSERT_STRING_EQUAL(got, want_b);
        CU_ASSERT_EQUAL(evaluator_fingerprint_at(EVALUATOR_VERSION + 1, a, got), 0);
        CU_ASSERT_STRING_EQUAL(got, want_next);
    }
    CU_ASSERT_EQUAL(evaluator_fingerprint_at(0, a, got), -1);
    CU_ASSERT_EQUAL(evaluator_fingerprint_of(NULL, got), -1);
    CU_ASSERT_STRING_EQUAL(got, "0000000000000000000000000000000000000000000000000000000000000000");
}

static const harness_test golden_tests[] = {
    HARNESS_TEST(test_every_declared_version_has_a_corpus_that_replays),
    HARNESS_TEST(test_every_corpus_names_a_declared_version),
    HARNESS_TEST(test_the_current_corpus_covers_every_gate_outcome_and_code),
    HARNESS_TEST(test_decisions_recorded_before_versions_replay_and_match),
    HARNESS_TEST(test_a_version_this_build_does_not_have_is_refused),
    HARNESS_TEST(test_a_fingerprint_not_of_the_recorded_version_is_refused),
    HARNESS_TEST(test_a_snapshot_stripped_of_its_version_is_refused),
    HARNESS_TEST(test_an_edited_verdict_recorded_before_versions_differs),
    HARNESS_TEST(test_the_fingerprint_is_the_version_and_the_workflow),
};

static const harness_suite suites[] = {
    {"golden corpus", NULL, NULL, HARNESS_TABLE(golden_tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
