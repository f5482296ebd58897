/*
 * test_archive.c - the archive file and a run leaving Redis for it: a file reads back record for
 * record and a damaged one is named by its line; an ended run is written, read back, verified
 * and only then removed in one call, every key of it gone; a run that has not ended, or that
 * changed since its archive, is not removed; and exactly once survives the removal: a retry of
 * an archived invocation with the same send is acknowledged, with another send a conflict, and
 * nothing is committed twice. With an invocation window the compact records expire on the
 * database clock, and after it the run's archive answers a retry the same way.
 *
 * In process, on a fresh graph of the test Redis holding the reference workflow, through the
 * same gate and delivery functions charterd serves.
 */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "evidence/archive.h"
#include "evidence/archive_audit.h"
#include "evidence/archive_index.h"
#include "evidence/archive_lookup.h"
#include "evidence/archive_replay.h"
#include "evidence/archive_run.h"
#include "evidence/integrity.h"
#include "evidence/receipt_issue.h"
#include "evidence/evlog.h"
#include "gates/deliver.h"
#include "gates/gate.h"
#include "core/digest.h"
#include "harness.h"
#include "core/metrics.h"
#include "runs/retention.h"
#include "runs/runner.h"
#include "suite.h"
#include "workflow/registry.h"

extern const char embedded_workflow[];
extern const size_t embedded_workflow_len;

static char graph[64];
static store *st;
static const workflow *wf;
static char run_id[65], open_run[65];
static const service_limits limits = {
    .max_message = 4u << 20,
    .max_ancestry = 10000,
    .max_ids = 1000,
    .max_content = 1u << 20,
    .default_timeout_ms = 5000,
    .max_timeout_ms = 60000,
};
static gate_env env;
static char ctx[32], out[32]; /* the analyze context and its recommendation */
static char folder[256], path[300];
/* The graph's integrity key: its events are HMACs and its deliveries carry receipts. */
static const unsigned char key[] = "archive-test-integrity-key-of-32-bytes-or-more";

/* --- the file ----------------------------------------------------------------------------- */

static int count_visit(void *c, uint64_t n, const char *kind, const json_t *body)
{
    (void)n;
    (void)kind;
    (void)body;
    (*(int *)c)++;
    return 0;
}

/* A small archive at p: the manifest and three records. */
static void write_small(const char *p)
{
    json_t *m = json_pack("{s:s, s:s}", "format", ARCHIVE_FORMAT, "run_id", "r1");
    archive_writer *w = NULL;
    CU_ASSERT_EQUAL_FATAL(archive_create(p, m, &w), STATUS_OK);
    for (int i = 0; i < 3; i++) {
        json_t *b = json_pack("{s:i, s:s}", "seq", i + 1, "text", "some evidence");
        CU_ASSERT_EQUAL_FATAL(archive_append(w, "event", b), STATUS_OK);
        json_decref(b);
    }
    uint64_t bytes = 0;
    CU_ASSERT_EQUAL_FATAL(archive_finish(w, &bytes), STATUS_OK);
    CU_ASSERT(bytes > 0);
    json_decref(m);
}

static void test_an_archive_reads_back_every_record(void)
{
    char p[300];
    snprintf(p, sizeof p, "%s/small.archive", folder);
    write_small(p);
    char partial[320];
    snprintf(partial, sizeof partial, "%s.partial", p);
    CU_ASSERT_NOT_EQUAL(access(partial, F_OK), 0); /* renamed into place */
    archive_check check;
    int visited = 0;
    CU_ASSERT_EQUAL(archive_read(p, count_visit, &visited, &check), STATUS_OK);
    CU_ASSERT_TRUE(check.intact);
    CU_ASSERT_EQUAL(check.records, 5); /* manifest, three events, end */
    CU_ASSERT_EQUAL(visited, 4);       /* the end record is not visited */
}

/* Rewrites p with sed script (a test edits the file as an attacker or a bad disk would). */
static void damage(const char *p, const char *script)
{
    CU_ASSERT_EQUAL_FATAL(harness_sh("sed -i '%s' '%s'", script, p), 0);
}

static void test_a_flipped_byte_is_named_by_its_line(void)
{
    char p[300];
    snprintf(p, sizeof p, "%s/flipped.archive", folder);
    write_small(p);
    damage(p, "3s/some evidence/some evidencf/");
    archive_check check;
    CU_ASSERT_EQUAL(archive_read(p, NULL, NULL, &check), STATUS_OK);
    CU_ASSERT_FALSE(check.intact);
    CU_ASSERT_EQUAL(check.bad_line, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(check.problem, "line 3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(check.problem, "altered"));
}

static void test_a_removed_record_is_named(void)
{
    char p[300];
    snprintf(p, sizeof p, "%s/removed.archive", folder);
    write_small(p);
    damage(p, "2d");
    archive_check check;
    CU_ASSERT_EQUAL(archive_read(p, NULL, NULL, &check), STATUS_OK);
    CU_ASSERT_FALSE(check.intact);
    CU_ASSERT_EQUAL(check.bad_line, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(check.problem, "removed"));
}

static void test_a_cut_short_archive_is_named(void)
{
    char p[300];
    snprintf(p, sizeof p, "%s/short.archive", folder);
    write_small(p);
    damage(p, "$d");
    archive_check check;
    CU_ASSERT_EQUAL(archive_read(p, NULL, NULL, &check), STATUS_OK);
    CU_ASSERT_FALSE(check.intact);
    CU_ASSERT_EQUAL(check.bad_line, 5);
    CU_ASSERT_PTR_NOT_NULL(strstr(check.problem, "without its end record"));
}

/* A line longer than any record (a damaged or hostile file: no newline for 64 MiB and more, as
 * /dev/zero gives forever) is refused at ARCHIVE_LINE_MAX, not read into memory whole. */
static void test_a_line_longer_than_any_record_is_refused_at_the_bound(void)
{
    char p[300];
    snprintf(p, sizeof p, "%s/endless.archive", folder);
    write_small(p);
    damage(p, "2,$d");
    /* Holes read back as NUL bytes: a line of ARCHIVE_LINE_MAX + 1 MiB, no disk used. */
    CU_ASSERT_EQUAL_FATAL(harness_sh("truncate -s +%zu '%s'", ARCHIVE_LINE_MAX + 1024 * 1024, p),
                          0);
    archive_check check;
    CU_ASSERT_EQUAL(archive_read(p, NULL, NULL, &check), STATUS_OK);
    CU_ASSERT_FALSE(check.intact);
    CU_ASSERT_EQUAL(check.records, 1);
    CU_ASSERT_EQUAL(check.bad_line, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(check.problem, "longer than any record"));
    if (strstr(check.problem, "longer than any record") == NULL)
        fprintf(stderr, "\n  problem: %s\n", check.problem);
    CU_ASSERT_EQUAL(unlink(p), 0);
}

/* The same bound holds for the archive folder's index: one endless line is refused there, not
 * read whole and then blamed on a changed byte. */
static void test_an_index_line_longer_than_any_is_refused_at_the_bound(void)
{
    char gdir[300], index[400];
    snprintf(gdir, sizeof gdir, "%s/endless-index", folder);
    snprintf(index, sizeof index, "%s/%s", gdir, ARCHIVE_INDEX_NAME);
    CU_ASSERT_EQUAL_FATAL(mkdir(gdir, 0700), 0);
    CU_ASSERT_EQUAL_FATAL(harness_sh("truncate -s %zu '%s'", ARCHIVE_LINE_MAX + 1024 * 1024, index),
                          0);
    archive_index_check check;
    CU_ASSERT_EQUAL(archive_index_verify(gdir, NULL, NULL, &check), STATUS_OK);
    CU_ASSERT_FALSE(check.intact);
    CU_ASSERT_PTR_NOT_NULL(strstr(check.problem, "index line 1 is longer than any index line"));
    if (strstr(check.problem, "longer than any") == NULL)
        fprintf(stderr, "\n  problem: %s\n", check.problem);
    CU_ASSERT_EQUAL(unlink(index), 0);
    CU_ASSERT_EQUAL(rmdir(gdir), 0);
}

static void test_an_abandoned_archive_leaves_no_file(void)
{
    char p[300], partial[320];
    snprintf(p, sizeof p, "%s/abandoned.archive", folder);
    snprintf(partial, sizeof partial, "%s.partial", p);
    json_t *m = json_pack("{s:s}", "format", ARCHIVE_FORMAT);
    archive_writer *w = NULL;
    CU_ASSERT_EQUAL_FATAL(archive_create(p, m, &w), STATUS_OK);
    CU_ASSERT_EQUAL(access(partial, F_OK), 0);
    archive_abandon(w);
    CU_ASSERT_NOT_EQUAL(access(partial, F_OK), 0);
    CU_ASSERT_NOT_EQUAL(access(p, F_OK), 0);
    json_decref(m);
}

/* --- a run leaving Redis ------------------------------------------------------------------ */

static int suite_init(void)
{
    snprintf(path, sizeof path, "%s/run.archive", folder);
    harness_graph_name(graph, sizeof graph, "archive");
    st = harness_store_open(graph);
    if (harness_install_builtin(st, &wf, "test_archive") != 0)
        return -1;
    env = (gate_env){.st = st, .wf = wf, .limits = &limits};
    if (runner_start(&env, NULL, "external", run_id) != STATUS_OK ||
        runner_start(&env, NULL, "external", open_run) != STATUS_OK)
        return -1;
    /* The Analyst reads the budget and records a recommendation (confidential, for the CFO). */
    json_t *c = NULL, *src = NULL, *artifact = NULL;
    guard_decision d;
    if (gate_open_step(&env, run_id, "analyze", &c) != STATUS_OK)
        return -1;
    snprintf(ctx, sizeof ctx, "%s", json_string_value(json_object_get(c, "id")));
    json_decref(c);
    if (gate_read_source(&env, ctx, "budget", &d, &src) != STATUS_OK || d.outcome != GUARD_ALLOW)
        return -1;
    guard_decision_free(&d);
    const char *inputs[1] = {json_string_value(json_object_get(src, "id"))};
    int rc = gate_record_output(&env, ctx, inputs, 1, "Internal recommendation",
                                "Recommendation: vendor_b, within the ceiling.", &d, &artifact);
    json_decref(src);
    if (rc != STATUS_OK || d.outcome != GUARD_ALLOW)
        return -1;
    guard_decision_free(&d);
    snprintf(out, sizeof out, "%s", json_string_value(json_object_get(artifact, "id")));
    json_decref(artifact);
    return 0;
}

static int suite_clean(void)
{
    store_close(st);
    harness_graph_drop(graph);
    return 0;
}

/* Sends the recommendation under inv to recipient with tool: the outcome; *ack whether it was
 * acknowledged, codes (256 bytes) its codes. */
static guard_outcome send(const char *inv, const char *recipient, const char *tool, bool *ack,
                          char codes[256])
{
    deliver_result r;
    CU_ASSERT_EQUAL_FATAL(deliver_send(&env, ctx, out, recipient, tool, inv, &r), STATUS_OK);
    *ack = r.acknowledged;
    guard_codes_format(r.decision.codes, codes, 256);
    guard_outcome o = r.decision.outcome;
    deliver_result_free(&r);
    return o;
}

/* Keys of the graph that belong to run_id or to one of the ids named (contexts, artifacts,
 * invocations), counted in Redis. */
static long long run_keys(const char *id, const char *a, const char *b, const char *c)
{
    static const char script[] = "local n = 0\n"
                                 "for _, k in ipairs(redis.call('KEYS', KEYS[1] .. ':*')) do\n"
                                 "  for i = 1, #ARGV do\n"
                                 "    if k:find(ARGV[i], 1, true) then n = n + 1 break end\n"
                                 "  end\n"
                                 "end\n"
                                 "return n\n";
    char r[96], e[96], ca[64], cb[64], cc[96];
    snprintf(r, sizeof r, ":run:%s", id);
    snprintf(e, sizeof e, ":event:%s:", id);
    snprintf(ca, sizeof ca, ":context:%s", a);
    snprintf(cb, sizeof cb, ":artifact:%s", b);
    snprintf(cc, sizeof cc, ":delivery:%s", c);
    const char *args[5] = {r, e, ca, cb, cc};
    long long n = -1;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph, script, args, 5, &n), 0);
    return n;
}

static void test_a_run_that_has_not_ended_is_neither_written_nor_removed(void)
{
    archive_run_summary s;
    char why[256];
    CU_ASSERT_EQUAL(archive_run_write(st, open_run, path, &s, why, sizeof why), STATUS_ENOTENDED);
    CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
    archive_run_summary_free(&s);
    json_t *reply = NULL;
    CU_ASSERT_EQUAL(q_remove_run(st, open_run, "", "x", "{}", NULL, &reply), STATUS_EREFUSED);
    json_decref(reply);
    CU_ASSERT(run_keys(open_run, "none", "none", "none") > 0);
}

static void test_an_ended_run_is_archived_verified_and_removed(void)
{
    bool ack = false;
    char codes[256];
    CU_ASSERT_EQUAL_FATAL(send("inv-archived-1", "cfo", "deliver_internal", &ack, codes),
                          GUARD_ALLOW);
    CU_ASSERT_FALSE(ack);
    json_t *receipt = NULL;
    CU_ASSERT_EQUAL_FATAL(receipt_issue_for_invocation(st, run_id, "inv-archived-1", &receipt),
                          STATUS_OK);
    json_decref(receipt);
    CU_ASSERT_EQUAL_FATAL(
        evlog_transition(st, run_id, "created,running", "completed", "", NULL, NULL), STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(receipt_issue_run(st, run_id, &receipt, NULL), STATUS_OK);
    json_decref(receipt);
    CU_ASSERT(run_keys(run_id, ctx, out, "inv-archived-1") > 0);

    archive_run_summary s;
    char why[256] = "";
    CU_ASSERT_EQUAL_FATAL(archive_run_write(st, run_id, path, &s, why, sizeof why), STATUS_OK);
    CU_ASSERT_EQUAL(s.deliveries, 1);
    CU_ASSERT_EQUAL(s.contexts, 1);
    CU_ASSERT(s.events >= 5);
    CU_ASSERT(s.records >= 1); /* the facts record and lineage records its decisions name */
    CU_ASSERT(s.bytes > 0);
    CU_ASSERT_EQUAL(archive_run_verify(path, run_id, &s, why, sizeof why), STATUS_OK);

    /* A run that moved since its archive is not removed. */
    json_t *reply = NULL;
    CU_ASSERT_EQUAL(q_remove_run(st, run_id, "0000", "run.archive", "{}", NULL, &reply),
                    STATUS_EREFUSED);
    json_decref(reply);
    CU_ASSERT(run_keys(run_id, ctx, out, "inv-archived-1") > 0);

    CU_ASSERT_EQUAL_FATAL(archive_run_remove(st, run_id, "run.archive", &s, 0), STATUS_OK);
    CU_ASSERT_EQUAL(run_keys(run_id, ctx, out, "inv-archived-1"), 0);
    CU_ASSERT(run_keys(open_run, "none", "none", "none") > 0); /* the other run stays */
    json_t *gone = NULL;
    CU_ASSERT_EQUAL(q_run_export(st, run_id, "run", "0", "1", 0, NULL, &gone), STATUS_ENOTFOUND);
    json_decref(gone);
    archive_run_summary_free(&s);
}

static void test_exactly_once_survives_archiving(void)
{
    bool ack = false;
    char codes[256];
    /* The same send again: acknowledged from the record the run left, nothing committed. */
    CU_ASSERT_EQUAL(send("inv-archived-1", "cfo", "deliver_internal", &ack, codes), GUARD_ALLOW);
    CU_ASSERT_TRUE(ack);
    /* Another send under the same invocation ID: a conflict. */
    CU_ASSERT_EQUAL(send("inv-archived-1", "ceo", "deliver_internal", &ack, codes), GUARD_DENY);
    CU_ASSERT_FALSE(ack);
    CU_ASSERT_PTR_NOT_NULL(strstr(codes, "DELIVERY_CONFLICT"));
    json_t *d = NULL;
    CU_ASSERT_EQUAL_FATAL(q_find_delivery(st, "inv-archived-1", &d), STATUS_OK);
    CU_ASSERT_TRUE(json_is_true(json_object_get(d, "archived")));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d, "run_id")), run_id);
    json_decref(d);
    CU_ASSERT_EQUAL(run_keys(run_id, ctx, out, "inv-archived-1"), 0); /* nothing written again */
}

static void test_a_damaged_run_archive_fails_verification(void)
{
    char p[300];
    snprintf(p, sizeof p, "%s/damaged.archive", folder);
    CU_ASSERT_EQUAL_FATAL(harness_sh("cp '%s' '%s'", path, p), 0);
    damage(p, "4s/\"kind\"/\"kinD\"/");
    archive_run_summary s = {0};
    char why[256] = "";
    CU_ASSERT_EQUAL(archive_run_verify(p, run_id, &s, why, sizeof why), STATUS_EPROTO);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "line 4"));
}

/* The archived run audits with no database: every event's HMAC, the chain to the head, the
 * delivery's decision and both receipts. */
static void test_an_archive_audits_offline(void)
{
    archive_audit_result r;
    CU_ASSERT_EQUAL_FATAL(archive_audit(path, key, sizeof key - 1, &r), STATUS_OK);
    if (!r.intact)
        fprintf(stderr, "audit: %s\n", r.problem);
    CU_ASSERT_TRUE(r.intact);
    CU_ASSERT_TRUE(r.keyed);
    CU_ASSERT_STRING_EQUAL(r.run_id, run_id);
    CU_ASSERT(r.events >= 5);
    CU_ASSERT_EQUAL(r.deliveries, 1);
    CU_ASSERT_EQUAL(r.receipts, 2); /* the delivery's and the run's */
    CU_ASSERT_EQUAL(archive_audit(path, NULL, 0, &r), STATUS_ENOKEY);
    static const unsigned char other[] = "another-key-another-key-another-key-0123";
    CU_ASSERT_EQUAL(archive_audit(path, other, sizeof other - 1, &r), STATUS_OK);
    CU_ASSERT_FALSE(r.intact);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.problem, "not the graph's integrity key"));

    /* The CLI, with no charterd and no database: exit 0 intact, 1 not, 2 without the key. */
    char keyfile[300];
    snprintf(keyfile, sizeof keyfile, "%s/integrity.key", folder);
    FILE *f = fopen(keyfile, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite(key, 1, sizeof key - 1, f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(harness_sh("chmod 600 '%s'", keyfile), 0);
    CU_ASSERT_EQUAL(harness_sh("CHARTER_URL=tcp://127.0.0.1:1 '%s' audit --archive '%s' --key "
                               "'%s' | grep -q ' intact '",
                               CHARTER_CLI_PATH, path, keyfile),
                    0);
    CU_ASSERT_EQUAL(harness_sh("'%s' audit --archive '%s' >/dev/null 2>&1; test $? = 2",
                               CHARTER_CLI_PATH, path),
                    0);
    /* --json is a document of the CLI's own, with lowerCamelCase keys as the others. */
    CU_ASSERT_EQUAL(harness_sh("'%s' --json audit --archive '%s' --key '%s' | jq -e '.intact and "
                               "(.runId | length) > 0 and (has(\"run_id\") | not)' >/dev/null",
                               CHARTER_CLI_PATH, path, keyfile),
                    0);
}

/* Rewrites the archive at p as one who edits the file would: in the record of event seq, the
 * first digit of its ts becomes 9 and the line's SHA-256 is taken again, so every line still
 * holds and only the chain can tell. */
static void rewrite_event(const char *p, const char *seq)
{
    char *text = harness_slurp(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    char want[64];
    snprintf(want, sizeof want, "\"seq\":\"%s\"", seq);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    bool done = false;
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *ts = strstr(line, "\"ts\":\"");
        if (!done && strstr(line, "\"kind\":\"event\"") && strstr(line, want) && ts) {
            ts[6] = ts[6] == '9' ? '8' : '9';
            digest_sha256_hex(line + 65, strlen(line + 65), line);
            line[64] = ' ';
            done = true;
        }
        fprintf(f, "%s\n", line);
    }
    fclose(f);
    free(text);
    CU_ASSERT_TRUE_FATAL(done);
}

static void test_a_rewritten_event_is_named_offline(void)
{
    char p[300];
    snprintf(p, sizeof p, "%s/rewritten.archive", folder);
    CU_ASSERT_EQUAL_FATAL(harness_sh("cp '%s' '%s'", path, p), 0);
    rewrite_event(p, "2");
    archive_audit_result r;
    CU_ASSERT_EQUAL_FATAL(archive_audit(p, key, sizeof key - 1, &r), STATUS_OK);
    CU_ASSERT_FALSE(r.intact);
    char keyfile[300];
    snprintf(keyfile, sizeof keyfile, "%s/integrity.key", folder);
    CU_ASSERT_EQUAL(harness_sh("out=$('%s' audit --archive '%s' --key '%s'); st=$?; test $st = 1 "
                               "&& echo \"$out\" | grep -q 'event 2 was changed'",
                               CHARTER_CLI_PATH, p, keyfile),
                    0);
    /* The line holds: the chain names the event, before the end digest would. */
    CU_ASSERT_PTR_NOT_NULL(strstr(r.problem, "event 2 was changed"));
    archive_check check;
    CU_ASSERT_EQUAL(archive_read(p, NULL, NULL, &check), STATUS_OK);
    CU_ASSERT_FALSE(check.intact); /* and the file's own end digest sees it too */
    CU_ASSERT_PTR_NOT_NULL(strstr(check.problem, "end record's digest"));
}

/* A pass with retention 0 archives every ended run (the open one stays), names each file by
 * the day its run ended, counts it in the metrics; a second charterd finds the lease held. */
static void test_the_retention_pass_archives_ended_runs_once(void)
{
    char ended[65];
    CU_ASSERT_EQUAL_FATAL(runner_start(&env, NULL, "external", ended), STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(
        evlog_transition(st, ended, "created,running", "cancelled", "", NULL, NULL), STATUS_OK);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/pass", folder);
    retention_result other;
    const retention_period now = {0, 0};
    CU_ASSERT_EQUAL_FATAL(retention_pass(st, "charterd-a", &now, dir, &other), STATUS_OK);
    CU_ASSERT_TRUE(other.held);
    CU_ASSERT_EQUAL(other.archived, 1);
    CU_ASSERT_EQUAL(other.failed, 0);
    CU_ASSERT(other.bytes > 0);
    CU_ASSERT(other.used_memory > 0);
    CU_ASSERT_EQUAL(other.oldest_s, 0); /* no ended run is left */
    CU_ASSERT_EQUAL(run_keys(ended, "none", "none", "none"), 0);
    CU_ASSERT(run_keys(open_run, "none", "none", "none") > 0);
    CU_ASSERT_EQUAL(harness_sh("test -f %s/%s/*/%s.charter-archive", dir, graph, ended), 0);

    retention_result b;
    CU_ASSERT_EQUAL(retention_pass(st, "charterd-b", &now, dir, &b), STATUS_OK);
    CU_ASSERT_FALSE(b.held);
    CU_ASSERT_EQUAL(b.archived, 0);

    char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(metrics_render(&text, &len), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "charter_archived_runs_total 1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "charter_redis_used_memory_bytes "));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "charter_oldest_unarchived_ended_run_seconds 0\n"));
    free(text);
}

/* A pass that cannot add the run's line to the index (its name taken by a folder: open fails
 * for root too, as a mode would not) removes the archive it wrote and leaves the run in Redis
 * (docs/operator.md "Retention"): a file the index does not name would fail the folder's
 * audit. The next pass, the index writable again, archives the run. */
static void test_an_archive_the_index_cannot_name_is_removed(void)
{
    char ended[65];
    CU_ASSERT_EQUAL_FATAL(runner_start(&env, NULL, "external", ended), STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(
        evlog_transition(st, ended, "created,running", "cancelled", "", NULL, NULL), STATUS_OK);
    char dir[300], gdir[400], index[480];
    snprintf(dir, sizeof dir, "%s/noindex", folder);
    snprintf(gdir, sizeof gdir, "%s/%s", dir, graph);
    snprintf(index, sizeof index, "%s/%s", gdir, ARCHIVE_INDEX_NAME);
    CU_ASSERT_EQUAL_FATAL(harness_sh("mkdir -p '%s'", index), 0);
    const retention_period now = {0, 0};
    retention_result r;
    CU_ASSERT_EQUAL_FATAL(retention_pass(st, "charterd-a", &now, dir, &r), STATUS_OK);
    CU_ASSERT_TRUE(r.held);
    CU_ASSERT_EQUAL(r.archived, 0);
    CU_ASSERT_EQUAL(r.failed, 1);
    CU_ASSERT(run_keys(ended, "none", "none", "none") > 0);
    /* The day's folder was made; no file is in it, no .partial either. */
    CU_ASSERT_EQUAL(harness_sh("test -n \"$(find '%s' -type d -name '2*-*-*')\" && "
                               "test -z \"$(find '%s' -type f)\"",
                               gdir, gdir),
                    0);

    CU_ASSERT_EQUAL_FATAL(rmdir(index), 0);
    CU_ASSERT_EQUAL_FATAL(retention_pass(st, "charterd-a", &now, dir, &r), STATUS_OK);
    CU_ASSERT_EQUAL(r.archived, 1);
    CU_ASSERT_EQUAL(r.failed, 0);
    CU_ASSERT_EQUAL(run_keys(ended, "none", "none", "none"), 0);
    archive_index_check check;
    CU_ASSERT_EQUAL(archive_index_verify(gdir, NULL, NULL, &check), STATUS_OK);
    CU_ASSERT_TRUE(check.intact);
    CU_ASSERT_EQUAL(check.runs, 1);
    CU_ASSERT_EQUAL(check.files, 1);
}

/* --- GetRun in pages ---------------------------------------------------------------------- */

/* A paged GetRun holds the deliveries its events decided, each once over the pages, and the
 * artifacts a page at a time, chained by artifacts_next; the whole-run read is unchanged. */
static void test_get_run_pages_deliveries_and_artifacts(void)
{
    char run[65], c2[32], payload[32];
    CU_ASSERT_EQUAL_FATAL(runner_start(&env, NULL, "external", run), STATUS_OK);
    json_t *c = NULL, *src = NULL, *src2 = NULL, *artifact = NULL;
    guard_decision d;
    CU_ASSERT_EQUAL_FATAL(gate_open_step(&env, run, "analyze", &c), STATUS_OK);
    snprintf(c2, sizeof c2, "%s", json_string_value(json_object_get(c, "id")));
    json_decref(c);
    CU_ASSERT_EQUAL_FATAL(gate_read_source(&env, c2, "budget", &d, &src), STATUS_OK);
    guard_decision_free(&d);
    CU_ASSERT_EQUAL_FATAL(gate_read_source(&env, c2, "budget", &d, &src2), STATUS_OK);
    guard_decision_free(&d);
    const char *inputs[1] = {json_string_value(json_object_get(src, "id"))};
    CU_ASSERT_EQUAL_FATAL(
        gate_record_output(&env, c2, inputs, 1, "Paged", "A recommendation.", &d, &artifact),
        STATUS_OK);
    guard_decision_free(&d);
    snprintf(payload, sizeof payload, "%s", json_string_value(json_object_get(artifact, "id")));
    json_decref(src);
    json_decref(src2);
    json_decref(artifact);
    const char *invs[3] = {"inv-paged-1", "inv-paged-2", "inv-paged-3"};
    for (int i = 0; i < 3; i++) {
        deliver_result r;
        CU_ASSERT_EQUAL_FATAL(
            deliver_send(&env, c2, payload, "cfo", "deliver_internal", invs[i], &r), STATUS_OK);
        CU_ASSERT_EQUAL(r.decision.outcome, GUARD_ALLOW);
        deliver_result_free(&r);
    }
    json_t *whole = NULL;
    CU_ASSERT_EQUAL_FATAL(q_get_run(st, run, "0", "1000", "0", "", NULL, &whole), STATUS_OK);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(whole, "deliveries")), 3);
    size_t n_artifacts = json_array_size(json_object_get(whole, "artifacts"));
    CU_ASSERT_EQUAL(n_artifacts, 3);
    json_decref(whole);

    /* Events two at a time: each delivery comes with the page of its event, once. */
    size_t delivered = 0, pages = 0;
    for (long long after = 0;; pages++) {
        char a[24];
        snprintf(a, sizeof a, "%lld", after);
        json_t *page = NULL;
        CU_ASSERT_EQUAL_FATAL(q_get_run(st, run, a, "2", "0", "", "0", &page), STATUS_OK);
        json_t *events = json_object_get(page, "events");
        CU_ASSERT(json_array_size(json_object_get(page, "artifacts")) <= 2);
        long long last = after;
        if (json_array_size(events) > 0)
            last = json_integer_value(
                json_object_get(json_array_get(events, json_array_size(events) - 1), "seq"));
        size_t i;
        json_t *dv;
        json_array_foreach(json_object_get(page, "deliveries"), i, dv)
        {
            long long seq = json_integer_value(json_object_get(dv, "event_seq"));
            CU_ASSERT(seq > after && seq <= last);
            delivered++;
        }
        json_decref(page);
        if (last == after)
            break;
        after = last;
    }
    CU_ASSERT_EQUAL(delivered, 3);
    CU_ASSERT(pages >= 3);

    /* Artifacts one at a time, chained by artifacts_next until it is 0. */
    size_t seen = 0;
    char next[24] = "0";
    for (int guard = 0; guard < 10; guard++) {
        json_t *page = NULL;
        CU_ASSERT_EQUAL_FATAL(q_get_run(st, run, "1000000", "1", "0", "", next, &page), STATUS_OK);
        CU_ASSERT_EQUAL(json_array_size(json_object_get(page, "events")), 0);
        CU_ASSERT_EQUAL(json_array_size(json_object_get(page, "deliveries")), 0);
        seen += json_array_size(json_object_get(page, "artifacts"));
        json_int_t n = json_integer_value(json_object_get(page, "artifacts_next"));
        json_decref(page);
        if (n == 0)
            break;
        snprintf(next, sizeof next, "%lld", (long long)n);
    }
    CU_ASSERT_EQUAL(seen, n_artifacts);
}

/* --- replay from an archive ------------------------------------------------------------- */

/* Every decision of the archived run decides again from the file alone as it was recorded
 * (the delivery's from its facts record and lineage records); an event that is no decision
 * says so; an archive that lost a record does not replay. */
static void test_an_archived_decision_replays_offline(void)
{
    int decisions = 0, deliveries = 0;
    uint64_t delivery_seq = 0;
    char why[256];
    for (uint64_t seq = 1; seq <= 40; seq++) {
        archive_replay_result r;
        int rc = archive_replay(path, "", seq, &r, why, sizeof why);
        if (rc == STATUS_ENOTFOUND)
            break;
        if (rc == STATUS_ENOTDECISION)
            continue;
        if (rc != STATUS_OK)
            fprintf(stderr, "replay %llu: %s\n", (unsigned long long)seq, why);
        CU_ASSERT_EQUAL_FATAL(rc, STATUS_OK);
        if (!r.res.no_snapshot) {
            CU_ASSERT_TRUE(r.res.matches);
            decisions++;
            const char *kind = json_string_value(json_object_get(r.event, "kind"));
            if (kind && strcmp(kind, "delivery_decided") == 0) {
                deliveries++;
                delivery_seq = seq;
            }
        }
        archive_replay_result_free(&r);
    }
    CU_ASSERT(decisions >= 2);
    CU_ASSERT_EQUAL(deliveries, 1);
    /* The CLI, with no charterd and no database. */
    CU_ASSERT_EQUAL(harness_sh("'%s' replay --archive '%s' %llu | grep -q '^matches  yes$'",
                               CHARTER_CLI_PATH, path, (unsigned long long)delivery_seq),
                    0);
    /* What `charter replay RUN SEQ` prints, line for line and in --json field for field. */
    CU_ASSERT_EQUAL(
        harness_sh("'%s' replay --archive '%s' %llu | grep -qx 'replayed %-10llu allow'",
                   CHARTER_CLI_PATH, path, (unsigned long long)delivery_seq,
                   (unsigned long long)delivery_seq),
        0);
    CU_ASSERT_EQUAL(harness_sh("'%s' --json replay --archive '%s' %llu | jq -e '.recorded.outcome "
                               "== \"ALLOW\" and .replayed.outcome == \"ALLOW\" and .matches and "
                               ".evaluatorVersion > 0 and (has(\"evaluator_version\") | not)' "
                               ">/dev/null",
                               CHARTER_CLI_PATH, path, (unsigned long long)delivery_seq),
                    0);

    char p[300];
    snprintf(p, sizeof p, "%s/lost-record.archive", folder);
    CU_ASSERT_EQUAL_FATAL(harness_sh("cp '%s' '%s'", path, p), 0);
    damage(p, "0,/\"kind\":\"record\"/{/\"kind\":\"record\"/d}");
    archive_replay_result r;
    CU_ASSERT_EQUAL(archive_replay(p, "", 1, &r, why, sizeof why), STATUS_EPROTO);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "does not read back whole"));
}

/* --- the invocation window --------------------------------------------------------------- */

/* A graph of its own (its retention pass archives every ended run of it), one run whose
 * Analyst delivered its recommendation to the CFO under "inv-window-1", ended. */
static char wgraph[64], wrun[65], wctx[32], wout[32], wdir[300];
static char wpayload_hash[65], wcontent[128];
static store *wst;
static gate_env wenv;

static int window_init(void)
{
    harness_graph_name(wgraph, sizeof wgraph, "window");
    snprintf(wdir, sizeof wdir, "%s/window", folder);
    wst = harness_store_open(wgraph);
    const workflow *w = NULL;
    if (harness_install_builtin(wst, &w, "test_archive") != 0)
        return -1;
    wenv = (gate_env){.st = wst, .wf = w, .limits = &limits};
    json_t *c = NULL, *src = NULL, *artifact = NULL;
    guard_decision d;
    if (runner_start(&wenv, NULL, "external", wrun) != STATUS_OK ||
        gate_open_step(&wenv, wrun, "analyze", &c) != STATUS_OK)
        return -1;
    snprintf(wctx, sizeof wctx, "%s", json_string_value(json_object_get(c, "id")));
    json_decref(c);
    if (gate_read_source(&wenv, wctx, "budget", &d, &src) != STATUS_OK || d.outcome != GUARD_ALLOW)
        return -1;
    guard_decision_free(&d);
    const char *inputs[1] = {json_string_value(json_object_get(src, "id"))};
    int rc = gate_record_output(&wenv, wctx, inputs, 1, "Internal recommendation",
                                "Recommendation: vendor_a.", &d, &artifact);
    json_decref(src);
    if (rc != STATUS_OK || d.outcome != GUARD_ALLOW)
        return -1;
    guard_decision_free(&d);
    snprintf(wout, sizeof wout, "%s", json_string_value(json_object_get(artifact, "id")));
    snprintf(wpayload_hash, sizeof wpayload_hash, "%s",
             json_string_value(json_object_get(artifact, "hash")));
    snprintf(wcontent, sizeof wcontent, "%s",
             json_string_value(json_object_get(artifact, "content")));
    json_decref(artifact);
    deliver_result r;
    if (deliver_send(&wenv, wctx, wout, "cfo", "deliver_internal", "inv-window-1", &r) !=
            STATUS_OK ||
        r.decision.outcome != GUARD_ALLOW || r.acknowledged)
        return -1;
    deliver_result_free(&r);
    return evlog_transition(wst, wrun, "created,running", "completed", "", NULL, NULL) == STATUS_OK
               ? 0
               : -1;
}

static int window_clean(void)
{
    store_close(wst);
    harness_graph_drop(wgraph);
    return 0;
}

/* An integer the script answers about inv on graph g (ARGV[1] = inv, ARGV[2] = run or
 * generation). */
static long long graph_eval(const char *g, const char *script, const char *a, const char *b)
{
    const char *args[2] = {a, b};
    long long n = -1;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(g, script, args, 2, &n), 0);
    return n;
}

static long long window_eval(const char *script, const char *a, const char *b)
{
    return graph_eval(wgraph, script, a, b);
}

/* The generation whose bucket holds inv's compact record, or -1. */
static const char gen_of_script[] =
    "local tag = redis.sha1hex(ARGV[1]):sub(1, 4)\n"
    "for _, g in ipairs(redis.call('ZRANGE', KEYS[1] .. ':archived_generations', 0, -1)) do\n"
    "  if redis.call('HEXISTS', KEYS[1] .. ':archived_invocations:' .. g .. ':' .. tag,\n"
    "                ARGV[1]) == 1 then return tonumber(g) end\n"
    "end\n"
    "return -1\n";
/* PEXPIRETIME (ms) of inv's bucket in generation ARGV[2], or its PTTL with ARGV[3] set. */
static const char bucket_ttl_script[] =
    "local key = KEYS[1] .. ':archived_invocations:' .. ARGV[2] .. ':' ..\n"
    "            redis.sha1hex(ARGV[1]):sub(1, 4)\n"
    "return redis.call(ARGV[3] and 'PTTL' or 'PEXPIRETIME', key)\n";
/* The generation whose hash holds the entry of run ARGV[1] (P:archived_runs:<g>), 0 when the
 * hash of entries kept forever holds it, -1 when none does. */
static const char run_gen_script[] =
    "for _, g in ipairs(redis.call('ZRANGE', KEYS[1] .. ':archived_generations', 0, -1)) do\n"
    "  if redis.call('HEXISTS', KEYS[1] .. ':archived_runs:' .. g, ARGV[1]) == 1 then\n"
    "    return tonumber(g) end\n"
    "end\n"
    "return redis.call('HEXISTS', KEYS[1] .. ':archived_runs', ARGV[1]) - 1\n";
/* PEXPIRETIME (ms) of the entries of generation ARGV[2], or their PTTL with ARGV[3] set. */
static const char runs_ttl_script[] =
    "local key = KEYS[1] .. ':archived_runs:' .. ARGV[2]\n"
    "return redis.call(ARGV[3] and 'PTTL' or 'PEXPIRETIME', key)\n";
/* Keys of the graph whose name, or whose hash's fields, name run ARGV[1]. */
static const char run_anywhere_script[] =
    "local n = 0\n"
    "for _, k in ipairs(redis.call('KEYS', KEYS[1] .. ':*')) do\n"
    "  if k:find(ARGV[1], 1, true) then n = n + 1\n"
    "  elseif redis.call('TYPE', k).ok == 'hash' and\n"
    "         redis.call('HEXISTS', k, ARGV[1]) == 1 then n = n + 1 end\n"
    "end\n"
    "return n\n";
/* 1 when inv has a delivery hash in the graph (it was committed while its run was in Redis). */
static const char delivery_key_script[] =
    "return redis.call('EXISTS', KEYS[1] .. ':delivery:' .. ARGV[1])\n";

/* When run was archived, in whole milliseconds, as the entry the database keeps says. */
static long long archived_at_ms(store *where, const char *run)
{
    json_t *entry = NULL;
    CU_ASSERT_EQUAL_FATAL(q_archived_run(where, run, &entry), STATUS_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(entry);
    const char *at = json_string_value(json_object_get(entry, "archived_at"));
    long long s = 0, us = 0;
    CU_ASSERT_EQUAL(at != NULL ? sscanf(at, "%lld.%lld", &s, &us) : 0, 2);
    json_decref(entry);
    return s * 1000 + us / 1000;
}

static long long bucket_pttl(const char *graph_name, const char *inv, long long g)
{
    char gen[32];
    snprintf(gen, sizeof gen, "%lld", g);
    const char *args[3] = {inv, gen, "1"};
    long long n = -3;
    CU_ASSERT_EQUAL_FATAL(harness_graph_eval(graph_name, bucket_ttl_script, args, 3, &n), 0);
    return n;
}

/* Waits, on the bucket's own TTL, until Redis expired the bucket of generation g holding inv's
 * record; its PTTL then (-2 once expired). */
static long long wait_expired(const char *graph_name, const char *inv, long long g)
{
    long long ttl = bucket_pttl(graph_name, inv, g);
    for (int i = 0; i < 40 && ttl >= 0; i++) {
        harness_sleep_ms(ttl < 500 ? ttl + 5 : 500);
        ttl = bucket_pttl(graph_name, inv, g);
    }
    return ttl;
}

/* What charter_commit_delivery answers a commit of the archived invocation sent as deliver.c
 * sends one, sealed on a head given (the run left: none can be read): its status, and for a
 * refusal its reason. */
static void commit_archived(char status[32], char reason[64])
{
    char sha1[41];
    CU_ASSERT_EQUAL_FATAL(digest_sha1_hex(wcontent, strlen(wcontent), sha1), 0);
    json_t *doc =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:[s, s], s:[s]}", "run_id", wrun,
                  "invocation_id", "inv-window-1", "fingerprint", "f", "payload_id", wout,
                  "payload_hash", wpayload_hash, "content_sha1", sha1, "recipient", "cfo", "tool",
                  "deliver_internal", "grant_chain", "g_analyst", "g_root", "sources", "budget");
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    guard_decision allow = {.outcome = GUARD_ALLOW};
    json_t *detail = json_string("inv-window-1"), *t = NULL;
    evlog_owned ev;
    CU_ASSERT_EQUAL_FATAL(evlog_owned_event(&ev, "delivery_decided", &allow, NULL, detail, NULL),
                          STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(q_time(wst, &t), STATUS_OK);
    evlog_head head = {.exists = true, .seq = 100};
    memset(head.hash, '0', 64);
    snprintf(head.now, sizeof head.now, "%s", json_string_value(json_object_get(t, "now")));
    json_t *reply = NULL;
    CU_ASSERT_EQUAL(evlog_commit_delivery_at(wst, wrun, doc, NULL, NULL, &ev.ev, &head, &reply),
                    STATUS_OK);
    const char *st_ = json_string_value(json_object_get(reply, "status"));
    const char *re = json_string_value(json_object_get(reply, "reason"));
    snprintf(status, 32, "%s", st_ ? st_ : "");
    snprintf(reason, 64, "%s", re ? re : "");
    evlog_owned_free(&ev);
    json_decref(reply);
    json_decref(detail);
    json_decref(doc);
    json_decref(t);
}

/* Deliveries of inv in the run's archive file (the one file its graph's folder holds). */
static int archived_deliveries(const char *inv)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd,
             "test $(cat %s/%s/*/%s.charter-archive | grep '\"kind\":\"delivery\"' | "
             "grep -c '\"invocation_id\":\"%s\"') = 1",
             wdir, wgraph, wrun, inv);
    return harness_sh("%s", cmd) == 0 ? 1 : -1;
}

/* Archived with an invocation window of 2 s, the run's compact record lives in the generation
 * of its archive time (window/2 = 1 s), in a bucket that expires at the generation's end plus
 * the window: at least 2 s, at most 3 s after. While it lives a commit of the invocation is
 * "exists"; once Redis expired it (polled on the key's own TTL) the record is gone, the
 * count is 0, and a commit is refused run_not_found: the run left with the record's
 * window, so nothing can be delivered again. */
static void test_compact_records_expire_after_the_invocation_window(void)
{
    retention_result res;
    const retention_period window = {0, 2};
    CU_ASSERT_EQUAL_FATAL(retention_pass(wst, "charterd-w", &window, wdir, &res), STATUS_OK);
    CU_ASSERT_EQUAL_FATAL(res.archived, 1);
    CU_ASSERT_EQUAL(res.kept, 1);
    /* The index names the run's context: a call through it finds the archive. */
    CU_ASSERT_EQUAL(harness_sh("grep -q '\"contexts\":\\[\"%s\"\\]' %s/%s/%s", wctx, wdir, wgraph,
                               ARCHIVE_INDEX_NAME),
                    0);
    long long g = window_eval(gen_of_script, "inv-window-1", "");
    CU_ASSERT_FATAL(g > 0);
    char gen[32];
    snprintf(gen, sizeof gen, "%lld", g);
    long long expires = window_eval(bucket_ttl_script, "inv-window-1", gen);
    long long at = archived_at_ms(wst, wrun);
    CU_ASSERT_EQUAL(expires, (g + 3) * 1000); /* generations of 1000 ms */
    CU_ASSERT(expires - at >= 2000);          /* at least the window */
    CU_ASSERT(expires - at <= 3000 + 50);     /* at most one generation more */
    /* The run's own entry lives in the same generation, and expires with its records. */
    CU_ASSERT_EQUAL(window_eval(run_gen_script, wrun, ""), g);
    CU_ASSERT_EQUAL(window_eval(runs_ttl_script, "", gen), expires);

    json_t *d = NULL;
    CU_ASSERT_EQUAL_FATAL(q_find_delivery(wst, "inv-window-1", &d), STATUS_OK);
    CU_ASSERT_TRUE(json_is_true(json_object_get(d, "archived")));
    CU_ASSERT_PTR_NOT_NULL(strstr(json_string_value(json_object_get(d, "archive")), wrun));
    json_decref(d);
    char status[32], reason[64];
    commit_archived(status, reason);
    CU_ASSERT_STRING_EQUAL(status, "exists");

    /* Redis expires the bucket by itself: wait on its own TTL. */
    CU_ASSERT_EQUAL_FATAL(wait_expired(wgraph, "inv-window-1", g), -2);
    d = NULL;
    CU_ASSERT_EQUAL(q_find_delivery(wst, "inv-window-1", &d), STATUS_OK);
    CU_ASSERT_PTR_NULL(d);
    json_decref(d);
    json_t *kept = NULL;
    CU_ASSERT_EQUAL_FATAL(q_archived_invocations(wst, &kept), STATUS_OK);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(kept, "kept")), 0);
    json_decref(kept);
    commit_archived(status, reason);
    CU_ASSERT_STRING_EQUAL(status, "refused");
    CU_ASSERT_STRING_EQUAL(reason, "run_not_found");
    CU_ASSERT_EQUAL(window_eval(delivery_key_script, "inv-window-1", ""), 0);
}

/* After the window nothing of the run is left in the database: its entry expired with its
 * generation, no key or hash field names it, and charter_archived_run knows it no more. Where
 * it went is still known, from the archive folder's index: the file it was archived to, the
 * name the entry gave; without the folder, or for a run neither knows, not found. */
static void test_after_the_window_the_run_is_named_from_the_index(void)
{
    char gen[32];
    long long g = window_eval(run_gen_script, wrun, "");
    if (g > 0) { /* still listed: wait for Redis to expire it */
        snprintf(gen, sizeof gen, "%lld", g);
        const char *args[3] = {"", gen, "1"};
        long long ttl = 0;
        for (int i = 0; i < 40 && ttl >= 0; i++) {
            CU_ASSERT_EQUAL_FATAL(harness_graph_eval(wgraph, runs_ttl_script, args, 3, &ttl), 0);
            if (ttl >= 0)
                harness_sleep_ms(ttl < 500 ? ttl + 5 : 500);
        }
    }
    CU_ASSERT_EQUAL(window_eval(run_gen_script, wrun, ""), -1);
    CU_ASSERT_EQUAL(window_eval(run_anywhere_script, wrun, ""), 0);
    json_t *entry = NULL;
    CU_ASSERT_EQUAL(q_archived_run(wst, wrun, &entry), STATUS_OK);
    CU_ASSERT_PTR_NULL(entry);
    json_decref(entry);

    char name[768] = "", want[768];
    CU_ASSERT_EQUAL(archive_name_run(wst, NULL, wrun, name, sizeof name), STATUS_ENOTFOUND);
    CU_ASSERT_EQUAL_FATAL(archive_name_run(wst, wdir, wrun, name, sizeof name), STATUS_OK);
    snprintf(want, sizeof want, "%s/", wgraph);
    CU_ASSERT_EQUAL(strncmp(name, want, strlen(want)), 0);
    snprintf(want, sizeof want, "/%s.charter-archive", wrun);
    CU_ASSERT(strlen(name) > strlen(want) && strcmp(name + strlen(name) - strlen(want), want) == 0);
    CU_ASSERT_EQUAL(harness_sh("test -f '%s/%s'", wdir, name), 0);
    CU_ASSERT_EQUAL(archive_name_run(wst, wdir, "r-never-archived", name, sizeof name),
                    STATUS_ENOTFOUND);
}

/* After the window, with no archive folder, a retry of the send is not found: not committed,
 * not answered as a success. */
static void test_after_the_window_a_retry_is_never_a_fresh_delivery(void)
{
    deliver_result r;
    CU_ASSERT_EQUAL(deliver_send(&wenv, wctx, wout, "cfo", "deliver_internal", "inv-window-1", &r),
                    STATUS_ENOTFOUND);
    CU_ASSERT_PTR_NULL(r.delivery);
    deliver_result_free(&r);
    CU_ASSERT_EQUAL(window_eval(delivery_key_script, "inv-window-1", ""), 0);
    CU_ASSERT_EQUAL(archived_deliveries("inv-window-1"), 1);
}

/* With the archive folder, the same retry is acknowledged from the run's archive, which it
 * names; nothing is delivered again (one delivery, in the archive; none in Redis). */
static void test_after_the_window_a_retry_is_acknowledged_from_the_archive(void)
{
    gate_env a = wenv;
    a.archive_dir = wdir;
    deliver_result r;
    CU_ASSERT_EQUAL_FATAL(
        deliver_send(&a, wctx, wout, "cfo", "deliver_internal", "inv-window-1", &r), STATUS_OK);
    CU_ASSERT_EQUAL(r.decision.outcome, GUARD_ALLOW);
    CU_ASSERT_TRUE(r.acknowledged);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.delivery);
    char file[200];
    snprintf(file, sizeof file, "%s/", wgraph);
    const char *archive = json_string_value(json_object_get(r.delivery, "archive"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(archive);
    CU_ASSERT_EQUAL(strncmp(archive, file, strlen(file)), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(archive, wrun));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r.delivery, "run_id")), wrun);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r.delivery, "recipient")), "cfo");
    CU_ASSERT_PTR_NOT_NULL(strstr(r.decision.witness, "acknowledged from the archive"));
    deliver_result_free(&r);
    CU_ASSERT_EQUAL(window_eval(delivery_key_script, "inv-window-1", ""), 0);
    CU_ASSERT_EQUAL(archived_deliveries("inv-window-1"), 1);
}

/* After the window, a retry under the same invocation ID with another send is a conflict
 * from the archive; an invocation the run never committed is not found, saying so. */
static void test_after_the_window_other_content_is_a_conflict(void)
{
    gate_env a = wenv;
    a.archive_dir = wdir;
    deliver_result r;
    CU_ASSERT_EQUAL_FATAL(
        deliver_send(&a, wctx, wout, "ceo", "deliver_internal", "inv-window-1", &r), STATUS_OK);
    CU_ASSERT_EQUAL(r.decision.outcome, GUARD_DENY);
    CU_ASSERT_EQUAL(r.decision.codes, 1u << GUARD_DELIVERY_CONFLICT);
    CU_ASSERT_FALSE(r.acknowledged);
    CU_ASSERT_PTR_NULL(r.delivery);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.decision.witness, "archived to"));
    deliver_result_free(&r);
    CU_ASSERT_EQUAL(deliver_send(&a, wctx, wout, "cfo", "deliver_internal", "inv-window-2", &r),
                    STATUS_ENOTFOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.not_found, "holds no commit of invocation inv-window-2"));
    deliver_result_free(&r);
    CU_ASSERT_EQUAL(
        deliver_send(&a, "c999999", wout, "cfo", "deliver_internal", "inv-window-1", &r),
        STATUS_ENOTFOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.not_found, "context c999999 not found"));
    deliver_result_free(&r);
    CU_ASSERT_EQUAL(window_eval(delivery_key_script, "inv-window-2", ""), 0);
    CU_ASSERT_EQUAL(archived_deliveries("inv-window-1"), 1);
}

/* --- charterd --retention --------------------------------------------------------------- */

/* charterd with --retention 1s: a cancelled run leaves the database for its archive within a
 * few passes, /metrics counts it (promtool accepts the exposition), each pass logs its line,
 * and GetRun no longer finds the run. */
static void test_charterd_archives_an_ended_run_past_retention(void)
{
    char g[64], dir[300];
    harness_graph_name(g, sizeof g, "retention");
    snprintf(dir, sizeof dir, "%s/charterd", folder);
    const char *extra[] = {"--retention", "1s", "--archive-dir", dir};
    harness_charterd_opts o;
    memset(&o, 0, sizeof o);
    o.graph = g;
    o.extra_args = extra;
    o.n_extra = 4;
    o.http = true;
    harness_charterd d;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    const char *hostport = d.http_hostport;
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d.tcp_url, HARNESS_OPERATOR_TOKEN, 5000, &c), 0);
    char run[129];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(c, "external", NULL, run, NULL, NULL), 0);
    Charter__V1__CancelRunRequest req = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
    req.run_id = run;
    Charter__V1__Run *cancelled = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_cancel_run(c, &req, &cancelled, &st), 0);
    charter__v1__run__free_unpacked(cancelled, NULL);

    /* A pass every second; the run is due one second after it ended: wait for the figure. */
    int archived = -1;
    for (int i = 0; i < 150 && archived != 0; i++) {
        archived = harness_sh(
            "curl -s http://%s/metrics | grep -q '^charter_archived_runs_total 1$'", hostport);
        if (archived != 0)
            harness_sleep_ms(200);
    }
    CU_ASSERT_EQUAL(archived, 0);
    CU_ASSERT_EQUAL(harness_sh("curl -s http://%s/metrics | promtool check metrics", hostport), 0);
    CU_ASSERT_EQUAL(
        harness_sh("grep -q 'retention pass on graph %s: 1 runs archived' '%s'", g, d.log_path), 0);
    CU_ASSERT_EQUAL(harness_sh("test -f %s/%s/*/%s.charter-archive", dir, g, run), 0);
    /* The graph's folder audits whole against its index; with the run's file removed, the
     * run is named. */
    CU_ASSERT_EQUAL(harness_sh("'%s' audit --archive '%s/%s' | grep -q ': intact (1 runs indexed'",
                               CHARTER_CLI_PATH, dir, g),
                    0);
    CU_ASSERT_EQUAL(
        harness_sh("'%s' --json audit --archive '%s/%s' | jq -e '.intact and .runs == 1 "
                   "and .files == 1' >/dev/null",
                   CHARTER_CLI_PATH, dir, g),
        0);
    CU_ASSERT_EQUAL(harness_sh("rm %s/%s/*/%s.charter-archive", dir, g, run), 0);
    CU_ASSERT_EQUAL(harness_sh("out=$('%s' audit --archive '%s/%s'); st=$?; test $st = 1 && echo "
                               "\"$out\" | grep -q 'run %s: its archive .* is missing (removed)'",
                               CHARTER_CLI_PATH, dir, g, run),
                    0);
    Charter__V1__GetRunRequest get = CHARTER__V1__GET_RUN_REQUEST__INIT;
    get.run_id = run;
    Charter__V1__RunView *view = NULL;
    CU_ASSERT_NOT_EQUAL(charter_get_run(c, &get, &view, &st), 0);
    CU_ASSERT_EQUAL(st.code, CHARTER_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "was archived to"));
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(g);
}

/* Waits until charterd's /metrics at hostport counts n archived runs. */
static int wait_archived(const char *hostport, int n)
{
    int archived = -1;
    for (int i = 0; i < 150 && archived != 0; i++) {
        archived = harness_sh(
            "curl -s http://%s/metrics | grep -q '^charter_archived_runs_total %d$'", hostport, n);
        if (archived != 0)
            harness_sleep_ms(200);
    }
    return archived;
}

/* A run of two source reads in the research step, vendor_a and vendor_b, both allowed. */
static void research_run(charter_client *c, char run[129])
{
    char ctx_id[129], a[129];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(c, "external", NULL, run, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(c, run, "research", ctx_id), 0);
    CU_ASSERT_EQUAL_FATAL(harness_read_source(c, ctx_id, "vendor_a", a), 0);
    CU_ASSERT_EQUAL_FATAL(harness_read_source(c, ctx_id, "vendor_b", a), 0);
}

static void cancel(charter_client *c, const char *run)
{
    Charter__V1__CancelRunRequest req = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
    req.run_id = (char *)run;
    Charter__V1__Run *cancelled = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_cancel_run(c, &req, &cancelled, &st), 0);
    charter__v1__run__free_unpacked(cancelled, NULL);
}

/* what-if --archive decides archived runs as the live what-if decided them before they left
 * Redis: the same --json report for one run under a candidate whose research step no longer
 * reads vendor_b, the same lines for the graph's folder as for the graph, no change under the
 * unchanged workflow, and a flipped byte refused with the audit's words. */
/* Writes to path the candidate whose research step reads vendor_a alone. */
static void write_strict(const char *path)
{
    json_error_t e;
    json_t *w = json_load_file(CHARTER_SOURCE_DIR "/deploy/workflows/procurement.json", 0, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    json_t *steps = json_object_get(w, "steps");
    for (size_t i = 0; i < json_array_size(steps); i++) {
        json_t *step = json_array_get(steps, i);
        if (strcmp(json_string_value(json_object_get(step, "name")), "research") != 0)
            continue;
        json_object_set_new(step, "resources", json_pack("[s]", "vendor_a"));
        json_object_set_new(step, "reads", json_pack("[s]", "vendor_a"));
    }
    CU_ASSERT_EQUAL_FATAL(json_dump_file(w, path, JSON_INDENT(2)), 0);
    json_decref(w);
}

static void test_what_if_reads_archives_as_it_read_the_runs(void)
{
    char g[64], dir[300], strict[320], h[320];
    harness_graph_name(g, sizeof g, "whatifarch");
    snprintf(dir, sizeof dir, "%s/whatif", folder);
    snprintf(strict, sizeof strict, "%s/strict.json", folder);
    snprintf(h, sizeof h, "%s/report", folder);
    write_strict(strict);

    const char *extra[] = {"--retention", "1s", "--archive-dir", dir};
    harness_charterd_opts o = {.graph = g, .extra_args = extra, .n_extra = 4, .http = true};
    harness_charterd d;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d.tcp_url, HARNESS_OPERATOR_TOKEN, 5000, &c), 0);
    char r1[129], r2[129];
    research_run(c, r1);
    research_run(c, r2);
    /* Live, while the runs are open (an ended run leaves within a second). */
    const char *live = "CHARTER_TOKEN=" HARNESS_OPERATOR_TOKEN " '%s' --url %s ";
    char prefix[600];
    snprintf(prefix, sizeof prefix, live, CHARTER_CLI_PATH, d.tcp_url);
    CU_ASSERT_EQUAL_FATAL(harness_sh("%s --json what-if --workflow '%s' --run %s > %s.live.json",
                                     prefix, strict, r1, h),
                          0);
    CU_ASSERT_EQUAL_FATAL(
        harness_sh("%s what-if --workflow '%s' | sort > %s.live.txt", prefix, strict, h), 0);
    CU_ASSERT_EQUAL(harness_sh("grep -q '\"change\": \"allow -> deny' %s.live.json", h), 0);
    CU_ASSERT_EQUAL(harness_sh("grep -q '^2 of [0-9]* decisions would change' %s.live.txt", h), 0);
    cancel(c, r1);
    cancel(c, r2);
    CU_ASSERT_EQUAL_FATAL(wait_archived(d.http_hostport, 2), 0);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);

    /* Offline: no charterd answers at this URL. */
    const char *cli = "CHARTER_URL=tcp://127.0.0.1:1 '" CHARTER_CLI_PATH "'";
    CU_ASSERT_EQUAL(
        harness_sh("%s --json what-if --workflow '%s' --archive %s/%s/*/%s.charter-archive"
                   " > %s.archive.json && cmp %s.live.json %s.archive.json",
                   cli, strict, dir, g, r1, h, h, h),
        0);
    CU_ASSERT_EQUAL(harness_sh("%s what-if --workflow '%s' --archive %s/%s | sort > %s.folder.txt "
                               "&& cmp %s.live.txt %s.folder.txt",
                               cli, strict, dir, g, h, h, h),
                    0);
    CU_ASSERT_EQUAL(
        harness_sh("%s what-if --workflow '%s' --archive %s/%s | grep -q '^0 of [1-9][0-9]* "
                   "decisions would change'",
                   cli, CHARTER_SOURCE_DIR "/deploy/workflows/procurement.json", dir, g),
        0);
    /* A flipped byte: the audit's words, exit 1, no report. */
    char p[300];
    snprintf(p, sizeof p, "%s/flipped.charter-archive", folder);
    CU_ASSERT_EQUAL_FATAL(harness_sh("cp %s/%s/*/%s.charter-archive %s", dir, g, r1, p), 0);
    damage(p, "0,/vendor_b/s/vendor_b/vendor_x/");
    CU_ASSERT_EQUAL(
        harness_sh("a=$(%s audit --archive %s | sed 's/.*NOT intact: //'); "
                   "out=$(%s what-if --workflow '%s' --archive %s 2>%s.err); st=$?; "
                   "test $st = 1 && test -z \"$out\" && test -n \"$a\" && grep -qF \"$a\" %s.err "
                   "&& grep -q 'does not match its bytes' %s.err",
                   cli, p, cli, strict, p, h, h, h),
        0);
    harness_graph_drop(g);
}

/* --- an archived run online ------------------------------------------------------------ */

/* GetRun of run through c: its status code; its message into msg (n bytes). */
static int get_run_code(charter_client *c, const char *run, char *msg, size_t n)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)run;
    Charter__V1__RunView *view = NULL;
    charter_status st;
    memset(&st, 0, sizeof st);
    if (charter_get_run(c, &req, &view, &st) == 0) {
        charter__v1__run_view__free_unpacked(view, NULL);
        snprintf(msg, n, "found");
        return 0;
    }
    snprintf(msg, n, "%s", st.message);
    return st.code;
}

/* The seqs of run's decision events (those with an outcome), at most 16, into seqs. */
static size_t decision_seqs(charter_client *c, const char *run, uint64_t seqs[16])
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)run;
    Charter__V1__RunView *view = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(c, &req, &view, &st), 0);
    size_t n = 0;
    for (size_t i = 0; i < view->n_events && n < 16; i++)
        if (view->events[i]->outcome != CHARTER__V1__OUTCOME__OUTCOME_UNSPECIFIED)
            seqs[n++] = view->events[i]->seq;
    charter__v1__run_view__free_unpacked(view, NULL);
    return n;
}

/* The other run lookups of an archived run are not found, naming its archive name too:
 * WaitRun, CancelRun, RecoverRun and AuditRun. */
static void expect_lookups_name(charter_client *c, const char *run, const char *name)
{
    charter_status st[4];
    memset(st, 0, sizeof st);
    Charter__V1__WaitRunRequest w = CHARTER__V1__WAIT_RUN_REQUEST__INIT;
    w.run_id = (char *)run;
    w.timeout_ms = 1;
    Charter__V1__RunView *view = NULL;
    CU_ASSERT_NOT_EQUAL(charter_wait_run(c, &w, &view, &st[0]), 0);
    Charter__V1__CancelRunRequest cr = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
    cr.run_id = (char *)run;
    Charter__V1__Run *r = NULL;
    CU_ASSERT_NOT_EQUAL(charter_cancel_run(c, &cr, &r, &st[1]), 0);
    Charter__V1__RecoverRunRequest rr = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    rr.run_id = (char *)run;
    rr.async = true;
    Charter__V1__RecoverRunResponse *rec = NULL;
    CU_ASSERT_NOT_EQUAL(charter_recover_run(c, &rr, &rec, &st[2]), 0);
    Charter__V1__AuditRunRequest ar = CHARTER__V1__AUDIT_RUN_REQUEST__INIT;
    ar.run_id = (char *)run;
    Charter__V1__AuditRunResponse *audit = NULL;
    CU_ASSERT_NOT_EQUAL(charter_audit_run(c, &ar, &audit, &st[3]), 0);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(st[i].code, CHARTER_NOT_FOUND);
        CU_ASSERT_PTR_NOT_NULL(strstr(st[i].message, name));
    }
}

/* ReplayDecision of run's seq: the response (caller frees), or NULL with *st. */
static Charter__V1__ReplayDecisionResponse *replay(charter_client *c, const char *run, uint64_t seq,
                                                   charter_status *st)
{
    Charter__V1__ReplayDecisionRequest req = CHARTER__V1__REPLAY_DECISION_REQUEST__INIT;
    req.run_id = (char *)run;
    req.seq = seq;
    Charter__V1__ReplayDecisionResponse *r = NULL;
    memset(st, 0, sizeof *st);
    return charter_replay_decision(c, &req, &r, st) == 0 ? r : NULL;
}

/* WhatIf of run under the candidate text: the response (caller frees), or NULL with *st. */
static Charter__V1__WhatIfResponse *what_if(charter_client *c, const char *candidate,
                                            const char *run, charter_status *st)
{
    Charter__V1__WhatIfRequest req = CHARTER__V1__WHAT_IF_REQUEST__INIT;
    req.workflow.data = (uint8_t *)candidate;
    req.workflow.len = strlen(candidate);
    req.run_id = (char *)run;
    Charter__V1__WhatIfResponse *r = NULL;
    memset(st, 0, sizeof *st);
    return charter_what_if(c, &req, &r, st) == 0 ? r : NULL;
}

static void expect_same_decision(const Charter__V1__Decision *a, const Charter__V1__Decision *b)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(a->outcome, b->outcome);
    CU_ASSERT_STRING_EQUAL(a->witness, b->witness);
    CU_ASSERT_EQUAL_FATAL(a->n_codes, b->n_codes);
    for (size_t i = 0; i < a->n_codes; i++)
        CU_ASSERT_STRING_EQUAL(a->codes[i], b->codes[i]);
}

/* The replay of an archived decision answers as the live one did, naming the archive. */
static void expect_same_replay(const Charter__V1__ReplayDecisionResponse *live,
                               const Charter__V1__ReplayDecisionResponse *archived,
                               const char *name)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(archived);
    CU_ASSERT_TRUE(archived->matches);
    CU_ASSERT_EQUAL(archived->no_snapshot, live->no_snapshot);
    CU_ASSERT_STRING_EQUAL(archived->evaluator, live->evaluator);
    CU_ASSERT_EQUAL(archived->evaluator_version, live->evaluator_version);
    expect_same_decision(live->recorded, archived->recorded);
    if (!live->no_snapshot)
        expect_same_decision(live->replayed, archived->replayed);
    CU_ASSERT_STRING_EQUAL(live->archive, "");
    CU_ASSERT_STRING_EQUAL(archived->archive, name);
}

static void expect_same_report(const Charter__V1__WhatIfResponse *a,
                               const Charter__V1__WhatIfResponse *b)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(a->examined, b->examined);
    CU_ASSERT_EQUAL(a->no_snapshot, b->no_snapshot);
    CU_ASSERT_EQUAL(a->truncated, b->truncated);
    CU_ASSERT_STRING_EQUAL(a->workflow_version, b->workflow_version);
    CU_ASSERT_EQUAL_FATAL(a->n_changes, b->n_changes);
    for (size_t i = 0; i < a->n_changes; i++) {
        CU_ASSERT_STRING_EQUAL(a->changes[i]->run_id, b->changes[i]->run_id);
        CU_ASSERT_EQUAL(a->changes[i]->seq, b->changes[i]->seq);
        CU_ASSERT_STRING_EQUAL(a->changes[i]->change, b->changes[i]->change);
        CU_ASSERT_STRING_EQUAL(a->changes[i]->subject, b->changes[i]->subject);
        expect_same_decision(a->changes[i]->recorded, b->changes[i]->recorded);
        expect_same_decision(a->changes[i]->candidate, b->changes[i]->candidate);
    }
    CU_ASSERT_EQUAL_FATAL(a->n_counts, b->n_counts);
    for (size_t i = 0; i < a->n_counts; i++) {
        CU_ASSERT_STRING_EQUAL(a->counts[i]->change, b->counts[i]->change);
        CU_ASSERT_EQUAL(a->counts[i]->count, b->counts[i]->count);
    }
}

/* Waits, on the key's own TTL, until Redis expired the generation of graph g whose hash holds
 * run's entry (nothing to wait for when none holds it). */
static void wait_entry_expired(const char *g, const char *run)
{
    long long gen = graph_eval(g, run_gen_script, run, "");
    char text[32];
    snprintf(text, sizeof text, "%lld", gen);
    const char *args[3] = {"", text, "1"};
    long long ttl = gen > 0 ? 0 : -2;
    for (int i = 0; i < 40 && ttl >= 0; i++) {
        CU_ASSERT_EQUAL_FATAL(harness_graph_eval(g, runs_ttl_script, args, 3, &ttl), 0);
        if (ttl >= 0)
            harness_sleep_ms(ttl < 500 ? ttl + 5 : 500);
    }
    CU_ASSERT_EQUAL(graph_eval(g, run_gen_script, run, ""), -1);
}

/* Appends to graph folder gdir's index a line naming file as the archive of run, with the
 * SHA-256 of what file leads to (so only where it is can refuse it). */
static void index_line(const char *gdir, const char *run, const char *file)
{
    CU_ASSERT_EQUAL_FATAL(
        harness_sh("cd '%s' && j=$(printf '{\"bytes\":1,\"contexts\":[],\"file\":\"%s\",\"prev\":"
                   "\"\",\"run_id\":\"%s\",\"sha256\":\"%%s\"}' $(sha256sum < '%s' | cut -c1-64)) "
                   "&& printf '%%s %%s\\n' $(printf %%s \"$j\" | sha256sum | cut -c1-64) \"$j\" "
                   ">> %s",
                   gdir, file, run, file, ARCHIVE_INDEX_NAME),
        0);
}

/* What GetRun, ReplayDecision and WhatIf answer for the run rid planted in the index. */
static void expect_refused(charter_client *c, const char *candidate, const char *rid, uint64_t seq)
{
    charter_status st;
    CU_ASSERT_PTR_NULL(replay(c, rid, seq, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "not its archive in the graph's folder"));
    CU_ASSERT_PTR_NULL(what_if(c, candidate, rid, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "not its archive in the graph's folder"));
}

/* charterd --retention 1s --invocation-window 2s: a run's decisions replay and its what-if
 * report is the same once it left the database, read from its archive, which the answers
 * name; GetRun names the archive from the run's entry within the window, from the index
 * after it (nothing of the run is left in Redis then); a run neither knows is not found; and
 * an index line naming a file that is not the run's archive in the graph's folder (a symbolic
 * link out of it, another run's file) is refused, never read. */
static void test_charterd_answers_for_an_archived_run_from_its_archive(void)
{
    char g[64], dir[300], strict[320], h[320], gdir[400], name[400], msg[512];
    harness_graph_name(g, sizeof g, "online");
    snprintf(dir, sizeof dir, "%s/online", folder);
    snprintf(gdir, sizeof gdir, "%s/%s", dir, g);
    snprintf(strict, sizeof strict, "%s/online-strict.json", folder);
    snprintf(h, sizeof h, "%s/online-report", folder);
    write_strict(strict);
    char *candidate = harness_slurp(strict);
    CU_ASSERT_PTR_NOT_NULL_FATAL(candidate);
    const char *extra[] = {"--retention", "1s", "--invocation-window", "2s", "--archive-dir", dir};
    harness_charterd_opts o = {.graph = g, .extra_args = extra, .n_extra = 6, .http = true};
    harness_charterd d;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d.tcp_url, HARNESS_OPERATOR_TOKEN, 5000, &c), 0);
    char run[129], cli[600];
    research_run(c, run);
    snprintf(cli, sizeof cli, "CHARTER_TOKEN=%s '%s' --url %s --json what-if --workflow '%s'",
             HARNESS_OPERATOR_TOKEN, CHARTER_CLI_PATH, d.tcp_url, strict);

    /* Live, while the run is open. */
    uint64_t seqs[16];
    size_t n = decision_seqs(c, run, seqs);
    CU_ASSERT_FATAL(n >= 2);
    Charter__V1__ReplayDecisionResponse *live[16];
    charter_status st;
    for (size_t i = 0; i < n; i++) {
        live[i] = replay(c, run, seqs[i], &st);
        CU_ASSERT_PTR_NOT_NULL_FATAL(live[i]);
        CU_ASSERT_TRUE(live[i]->matches);
    }
    /* A seq past the largest the database numbers (10^15) is refused as the argument it is,
     * naming no query function; the same answer once the run is archived (below). */
    const char beyond[] = "seq: the decision event's seq, from 1 to 1000000000000000";
    CU_ASSERT_PTR_NULL(replay(c, run, 1000000000000001ULL, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(st.message, beyond);
    Charter__V1__WhatIfResponse *report = what_if(c, candidate, run, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(report);
    CU_ASSERT(report->n_changes >= 1);
    CU_ASSERT_STRING_EQUAL(report->archive, "");
    CU_ASSERT_EQUAL(harness_sh("%s --run %s > %s.live.json", cli, run, h), 0);
    cancel(c, run);
    CU_ASSERT_EQUAL_FATAL(wait_archived(d.http_hostport, 1), 0);

    /* Within the window: GetRun names the archive from the run's entry. */
    CU_ASSERT_EQUAL(get_run_code(c, run, msg, sizeof msg), CHARTER_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "was archived to"));
    CU_ASSERT_EQUAL_FATAL(harness_sh("cd '%s' && test -f */%s.charter-archive", gdir, run), 0);
    char *found = strstr(msg, "was archived to ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(found);
    sscanf(found + strlen("was archived to "), "%399s", name);
    CU_ASSERT_EQUAL(harness_sh("test -f '%s/%s'", dir, name), 0);
    expect_lookups_name(c, run, name);

    /* The decisions replay from the archive as they did live, and the what-if report is the
     * live one, the offline one from the file too (the archive named aside). */
    for (size_t i = 0; i < n; i++) {
        Charter__V1__ReplayDecisionResponse *r = replay(c, run, seqs[i], &st);
        expect_same_replay(live[i], r, name);
        charter__v1__replay_decision_response__free_unpacked(r, NULL);
    }
    CU_ASSERT_PTR_NULL(replay(c, run, 999, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_NOT_FOUND);
    CU_ASSERT_PTR_NULL(replay(c, run, 1000000000000001ULL, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(st.message, beyond);
    CU_ASSERT_PTR_NULL(replay(c, run, UINT64_MAX, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(st.message, beyond);
    CU_ASSERT_EQUAL(harness_sh("CHARTER_TOKEN=%s '%s' --url %s replay %s %llu | grep -qx "
                               "'archive  %s (the run left the database)'",
                               HARNESS_OPERATOR_TOKEN, CHARTER_CLI_PATH, d.tcp_url, run,
                               (unsigned long long)seqs[0], name),
                    0);
    Charter__V1__WhatIfResponse *online = what_if(c, candidate, run, &st);
    expect_same_report(report, online);
    CU_ASSERT_STRING_EQUAL(online->archive, name);
    charter__v1__what_if_response__free_unpacked(online, NULL);
    CU_ASSERT_EQUAL(harness_sh("%s --run %s > %s.online.json", cli, run, h), 0);
    CU_ASSERT_EQUAL(harness_sh("CHARTER_URL=tcp://127.0.0.1:1 '%s' --json what-if --workflow '%s' "
                               "--archive '%s/%s' > %s.offline.json",
                               CHARTER_CLI_PATH, strict, dir, name, h),
                    0);
    CU_ASSERT_EQUAL(harness_sh("test \"$(jq -r .archive %s.online.json)\" = '%s'", h, name), 0);
    CU_ASSERT_EQUAL(harness_sh("for f in live online offline; do jq -S 'del(.archive)' %s.$f.json "
                               "> %s.$f.cmp || exit 1; done; cmp %s.live.cmp %s.online.cmp && "
                               "cmp %s.live.cmp %s.offline.cmp",
                               h, h, h, h, h, h),
                    0);

    /* After the window: nothing of the run in Redis; the index names its file. */
    wait_entry_expired(g, run);
    CU_ASSERT_EQUAL(graph_eval(g, run_anywhere_script, run, ""), 0);
    CU_ASSERT_EQUAL(get_run_code(c, run, msg, sizeof msg), CHARTER_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "was archived to"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, name));
    expect_lookups_name(c, run, name);
    Charter__V1__ReplayDecisionResponse *r = replay(c, run, seqs[n - 1], &st);
    expect_same_replay(live[n - 1], r, name);
    charter__v1__replay_decision_response__free_unpacked(r, NULL);
    online = what_if(c, candidate, run, &st);
    expect_same_report(report, online);
    charter__v1__what_if_response__free_unpacked(online, NULL);

    /* A run neither the database nor the index knows. */
    CU_ASSERT_EQUAL(get_run_code(c, "rnever0archived", msg, sizeof msg), CHARTER_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "run rnever0archived not found"));
    CU_ASSERT_PTR_NULL(replay(c, "rnever0archived", 1, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_NOT_FOUND);
    CU_ASSERT_PTR_NULL(what_if(c, candidate, "rnever0archived", &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_NOT_FOUND);

    /* Index lines that lead out of the folder, or to another run's file, are not followed. */
    CU_ASSERT_EQUAL_FATAL(harness_sh("cp '%s/%s' '%s/outside.charter-archive' && mkdir -p "
                                     "'%s/2026-01-01' && ln -s '%s/outside.charter-archive' "
                                     "'%s/2026-01-01/rlinked.charter-archive'",
                                     dir, name, folder, gdir, folder, gdir),
                          0);
    index_line(gdir, "rlinked", "2026-01-01/rlinked.charter-archive");
    index_line(gdir, "rborrowed", name + strlen(g) + 1);
    expect_refused(c, candidate, "rlinked", seqs[0]);
    expect_refused(c, candidate, "rborrowed", seqs[0]);

    for (size_t i = 0; i < n; i++)
        charter__v1__replay_decision_response__free_unpacked(live[i], NULL);
    charter__v1__what_if_response__free_unpacked(report, NULL);
    free(candidate);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(g);
}

/* Issues a host credential of the graph bound to actor; its secret into secret (128 bytes). */
static int issue_host(charter_client *c, const char *actor, char *secret)
{
    Charter__V1__IssueCredentialRequest rq = CHARTER__V1__ISSUE_CREDENTIAL_REQUEST__INIT;
    char *actors[1] = {(char *)actor};
    rq.role = "host";
    rq.actors = actors;
    rq.n_actors = 1;
    rq.label = "window test";
    Charter__V1__IssuedCredential *r = NULL;
    charter_status st;
    if (charter_issue_credential(c, &rq, &r, &st) != 0) {
        fprintf(stderr, "\n  IssueCredential: %s\n", st.message);
        return -1;
    }
    snprintf(secret, 128, "%s", r->secret);
    charter__v1__issued_credential__free_unpacked(r, NULL);
    return 0;
}

/* A payments run through c: the pay step's context into ctx and the observed bill into bill. */
static void payments_run(charter_client *c, char run[129], char ctx_id[129], char bill[129])
{
    CU_ASSERT_EQUAL_FATAL(harness_payments_run(c, run, ctx_id, bill), 0);
}

/* send_money of the bill's IBAN, 84.20 EUR with reference ref, through c in ctx_id under
 * inv: the response (caller frees), or NULL with *st. */
static Charter__V1__InvokeResponse *pay(charter_client *c, const char *ctx_id, const char *bill,
                                        const char *inv, const char *ref, charter_status *st)
{
    char quote[140];
    snprintf(quote, sizeof quote, "quote:%s", bill);
    const harness_invoke_arg args[] = {{"iban", "DE89370400440532013000", quote},
                                       {"amount", "84.20", "task"},
                                       {"reference", ref, "task"}};
    return harness_invoke(c, ctx_id, "send_money", inv, args, 3, st);
}

/* Expects r acknowledged from the archive of run (the file named in its delivery). */
static void expect_archived_ack(Charter__V1__InvokeResponse *r, const char *run)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_TRUE(r->acknowledged);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r->delivery);
    CU_ASSERT_STRING_EQUAL(r->delivery->run_id, run);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->delivery->archive, run));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->delivery->archive, ".charter-archive"));
    CU_ASSERT_STRING_EQUAL(r->delivery->tool, "send_money");
    charter__v1__invoke_response__free_unpacked(r, NULL);
}

/* charterd --retention 1s --invocation-window 2s: a tool call's effect is archived with its
 * run; a retry is acknowledged from the run's archive within the window and after it (the
 * compact record expired in Redis), other arguments are a conflict, a host acting for the
 * context's actor is answered and one acting for another is not; the effect exists once, in
 * the archive. /metrics counts the compact records; --help names the option. */
static void test_charterd_answers_a_tool_call_from_the_archive_after_the_window(void)
{
    char g[64], dir[300], run[129], ctx_id[129], bill[129], payer[128], owner[128];
    harness_graph_name(g, sizeof g, "windowd");
    snprintf(dir, sizeof dir, "%s/windowd", folder);
    const char *extra[] = {"--retention", "1s", "--invocation-window", "2s", "--archive-dir", dir};
    harness_charterd_opts o = {.graph = g, .extra_args = extra, .n_extra = 6, .http = true};
    harness_charterd d;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    charter_client *c = NULL, *host = NULL, *stranger = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d.tcp_url, HARNESS_OPERATOR_TOKEN, 5000, &c), 0);
    payments_run(c, run, ctx_id, bill);
    CU_ASSERT_EQUAL_FATAL(issue_host(c, "payer", payer), 0);
    CU_ASSERT_EQUAL_FATAL(issue_host(c, "human_owner", owner), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d.tcp_url, payer, 5000, &host), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d.tcp_url, owner, 5000, &stranger), 0);
    charter_status st;
    Charter__V1__InvokeResponse *r = pay(c, ctx_id, bill, "pay-window-1", "INV-7731", &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_FALSE(r->acknowledged);
    CU_ASSERT_STRING_EQUAL(r->delivery->archive, "");
    charter__v1__invoke_response__free_unpacked(r, NULL);
    cancel(c, run);
    CU_ASSERT_EQUAL_FATAL(wait_archived(d.http_hostport, 1), 0);

    /* Within the window: the compact record names the run, whose archive answers. */
    expect_archived_ack(pay(c, ctx_id, bill, "pay-window-1", "INV-7731", &st), run);
    long long gen = graph_eval(g, gen_of_script, "pay-window-1", "");
    CU_ASSERT_FATAL(gen > 0);
    CU_ASSERT_EQUAL_FATAL(wait_expired(g, "pay-window-1", gen), -2);

    /* After it: the archive, found by the context its index line lists. */
    r = pay(c, ctx_id, bill, "pay-window-1", "INV-7731", &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->decision->witness, "acknowledged from the archive"));
    expect_archived_ack(r, run);
    expect_archived_ack(pay(host, ctx_id, bill, "pay-window-1", "INV-7731", &st), run);
    r = pay(c, ctx_id, bill, "pay-window-1", "INV-7732", &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_EQUAL_FATAL(r->decision->n_codes, 1);
    CU_ASSERT_STRING_EQUAL(r->decision->codes[0], "DELIVERY_CONFLICT");
    CU_ASSERT_FALSE(r->acknowledged);
    charter__v1__invoke_response__free_unpacked(r, NULL);
    CU_ASSERT_PTR_NULL(pay(stranger, ctx_id, bill, "pay-window-1", "INV-7731", &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_NOT_FOUND);

    /* The effect exists once: in the archive, not in Redis. */
    CU_ASSERT_EQUAL(graph_eval(g, delivery_key_script, "pay-window-1", ""), 0);
    CU_ASSERT_EQUAL(harness_sh("test $(cat %s/%s/*/%s.charter-archive | grep "
                               "'\"kind\":\"delivery\"' | grep -c '\"pay-window-1\"') = 1",
                               dir, g, run),
                    0);
    CU_ASSERT_EQUAL(harness_sh("curl -s http://%s/metrics | grep -q "
                               "'^charter_archived_invocation_records [0-9]'",
                               d.http_hostport),
                    0);
    CU_ASSERT_EQUAL(
        harness_sh("'%s' --help | grep -q -- '--invocation-window DURATION'", CHARTERD_PATH), 0);
    CU_ASSERT_EQUAL(
        harness_sh("'%s' --invocation-window 2x 2>&1 | grep -q 'needs a duration'", CHARTERD_PATH),
        0);
    charter_client_close(stranger);
    charter_client_close(host);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(g);
}

/* `charter deliver` retried after its run was archived, within the invocation window: the
 * answer comes from the compact record, which keeps the run and its archive but not the send's
 * details. The human output names the archive and prints no row of blanks with a seq of 0
 * (no event 0 exists). */
static void test_the_cli_names_the_archive_of_an_acknowledged_delivery(void)
{
    char g[64], dir[300], out[320];
    harness_graph_name(g, sizeof g, "cliack");
    snprintf(dir, sizeof dir, "%s/cliack", folder);
    snprintf(out, sizeof out, "%s/cliack.out", folder);
    const char *extra[] = {"--retention", "1s", "--archive-dir", dir};
    harness_charterd_opts o = {.graph = g, .extra_args = extra, .n_extra = 4, .http = true};
    harness_charterd d;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    CU_ASSERT_EQUAL_FATAL(
        harness_sh("export CHARTER_URL='%s' CHARTER_TOKEN='%s'; C='%s'; set -e; "
                   "R=$($C --json run --mode external | jq -r .run.id); "
                   "X=$($C --json open-step $R analyze | jq -r .contextId); "
                   "S=$($C --json read-source $X budget | jq -r .artifact.id); "
                   "P=$($C --json record-output $X --title rec --content 'vendor b' $S | "
                   "jq -r .artifact.id); "
                   "$C deliver $X $P cfo deliver_internal cli-ack-1 >/dev/null; "
                   "$C complete $R >/dev/null; echo \"$X $P $R\" >'%s'",
                   d.tcp_url, HARNESS_OPERATOR_TOKEN, CHARTER_CLI_PATH, out),
        0);
    CU_ASSERT_EQUAL_FATAL(wait_archived(d.http_hostport, 1), 0);
    CU_ASSERT_EQUAL(harness_sh("export CHARTER_URL='%s' CHARTER_TOKEN='%s'; read X P R <'%s'; "
                               "'%s' deliver $X $P cfo deliver_internal cli-ack-1 >'%s.2'",
                               d.tcp_url, HARNESS_OPERATOR_TOKEN, out, CHARTER_CLI_PATH, out),
                    0);
    char path[340];
    snprintf(path, sizeof path, "%s.2", out);
    char *text = harness_slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "acknowledged  yes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "archive       "));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, ".charter-archive"));
    CU_ASSERT_PTR_NULL(strstr(text, "INVOCATION")); /* no table of blanks */
    free(text);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(g);
}

/* The PTTL (ms) of the bucket that holds inv's compact record, or -3 when none does. */
static const char record_pttl_script[] =
    "local tag = redis.sha1hex(ARGV[1]):sub(1, 4)\n"
    "for _, g in ipairs(redis.call('ZRANGE', KEYS[1] .. ':archived_generations', 0, -1)) do\n"
    "  local k = KEYS[1] .. ':archived_invocations:' .. g .. ':' .. tag\n"
    "  if redis.call('HEXISTS', k, ARGV[1]) == 1 then return redis.call('PTTL', k) end\n"
    "end\n"
    "return -3\n";

/* A tenant's own retention period: charterd with --archive-dir and no --retention archives
 * the cancelled run of the tenant created with retention_seconds 1, and leaves the default
 * graph's cancelled run (it has no period) in the database. The tenant's invocation window
 * (an hour) is the one its archived tool call's compact record is kept for, not charterd's
 * default of seven days. */
static void test_a_tenant_keeps_its_own_retention_period(void)
{
    static const char admin_token[] = "test-admin-token-archive-5b8e2c71d04f";
    char g[64], tenant[64], dir[300];
    harness_graph_name(g, sizeof g, "tretention");
    harness_graph_name(tenant, sizeof tenant, "tenant_ret");
    snprintf(dir, sizeof dir, "%s/tenants", folder);
    setenv("CHARTER_ADMIN_TOKEN", admin_token, 1);
    const char *extra[] = {"--archive-dir", dir};
    harness_charterd_opts o = {.graph = g, .extra_args = extra, .n_extra = 2, .http = true};
    harness_charterd d;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    const char *hostport = d.http_hostport;
    unsetenv("CHARTER_ADMIN_TOKEN");
    charter_client *admin = NULL, *op = NULL, *t = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d.tcp_url, admin_token, 5000, &admin), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d.tcp_url, HARNESS_OPERATOR_TOKEN, 5000, &op), 0);
    Charter__V1__CreateTenantRequest rq = CHARTER__V1__CREATE_TENANT_REQUEST__INIT;
    Charter__V1__TenantQuotas q = CHARTER__V1__TENANT_QUOTAS__INIT;
    q.retention_seconds = 1;
    q.invocation_window_seconds = 3600;
    rq.name = tenant;
    rq.quotas = &q;
    Charter__V1__CreateTenantResponse *created = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_create_tenant(admin, &rq, &created, &st), 0);
    CU_ASSERT_EQUAL(created->tenant->quotas->retention_seconds, 1);
    CU_ASSERT_EQUAL(created->tenant->quotas->invocation_window_seconds, 3600);
    CU_ASSERT_EQUAL_FATAL(
        harness_client_open(d.tcp_url, created->operator_credential->secret, 5000, &t), 0);
    charter__v1__create_tenant_response__free_unpacked(created, NULL);
    Charter__V1__ApplyWorkflowRequest wr = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    wr.definition.data = (uint8_t *)embedded_workflow;
    wr.definition.len = embedded_workflow_len;
    Charter__V1__WorkflowInfo *info = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_apply_workflow(t, &wr, &info, &st), 0);
    charter__v1__workflow_info__free_unpacked(info, NULL);

    char trun[129], drun[129];
    charter_client *clients[2] = {t, op};
    char *runs[2] = {trun, drun};
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL_FATAL(harness_create_run(clients[i], "external", NULL, runs[i], NULL, NULL),
                              0);
        Charter__V1__CancelRunRequest cr = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
        cr.run_id = runs[i];
        Charter__V1__Run *cancelled = NULL;
        CU_ASSERT_EQUAL_FATAL(charter_cancel_run(clients[i], &cr, &cancelled, &st), 0);
        charter__v1__run__free_unpacked(cancelled, NULL);
    }
    int archived = -1;
    for (int i = 0; i < 150 && archived != 0; i++) {
        archived = harness_sh(
            "curl -s http://%s/metrics | grep -q '^charter_archived_runs_total 1$'", hostport);
        if (archived != 0)
            harness_sleep_ms(200);
    }
    CU_ASSERT_EQUAL(archived, 0);
    if (archived != 0)
        harness_sh("tail -20 '%s' >&2", d.log_path);
    CU_ASSERT_EQUAL(harness_sh("test -f %s/%s/*/%s.charter-archive", dir, tenant, trun), 0);
    /* The default graph has no period: no pass looked at it, and its run is still there. */
    CU_ASSERT_NOT_EQUAL(harness_sh("grep -q 'retention pass on graph %s:' '%s'", g, d.log_path), 0);
    Charter__V1__GetRunRequest get = CHARTER__V1__GET_RUN_REQUEST__INIT;
    get.run_id = drun;
    Charter__V1__RunView *view = NULL;
    CU_ASSERT_EQUAL(charter_get_run(op, &get, &view, &st), 0);
    if (view != NULL)
        charter__v1__run_view__free_unpacked(view, NULL);
    char prun[129], pctx[129], pbill[129];
    payments_run(t, prun, pctx, pbill);
    Charter__V1__InvokeResponse *paid = pay(t, pctx, pbill, "pay-tenant-1", "INV-7731", &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(paid);
    CU_ASSERT_EQUAL(paid->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    charter__v1__invoke_response__free_unpacked(paid, NULL);
    cancel(t, prun);
    CU_ASSERT_EQUAL_FATAL(wait_archived(hostport, 2), 0);
    long long left = graph_eval(tenant, record_pttl_script, "pay-tenant-1", "");
    CU_ASSERT(left >= 3600 * 1000 - 60 * 1000 && left <= 5400 * 1000);
    charter_client_close(t);
    charter_client_close(op);
    charter_client_close(admin);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    static const char forget[] =
        "redis.call('SREM', KEYS[1] .. ':tenants', ARGV[1])\n"
        "redis.call('DEL', KEYS[1] .. ':tenant:' .. ARGV[1])\n"
        "for _, id in ipairs(redis.call('SMEMBERS', KEYS[1] .. ':creds:' .. ARGV[1])) do\n"
        "  redis.call('DEL', KEYS[1] .. ':cred:' .. id)\n"
        "end\n"
        "redis.call('DEL', KEYS[1] .. ':creds:' .. ARGV[1])\n"
        "return 1\n";
    const char *args[1] = {tenant};
    CU_ASSERT_EQUAL(harness_graph_eval("_tenants", forget, args, 1, NULL), 0);
    harness_graph_drop(tenant);
    harness_graph_drop(g);
}

/* --- registration ---------------------------------------------------------------------------- */

static int setup(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    if (integrity_set_key(key, sizeof key - 1) != STATUS_OK)
        return 1;
    snprintf(folder, sizeof folder, "/tmp/charter-archive-%d", (int)getpid());
    if (harness_sh("rm -rf '%s' && mkdir -p '%s'", folder, folder) != 0)
        return 1;
    return harness_evlog_builtin("test_archive");
}

static void teardown(void)
{
    harness_sh("rm -rf '%s'", folder);
    registry_shutdown();
}

static const harness_test file_tests[] = {
    {"an archive reads back every record", test_an_archive_reads_back_every_record},
    {"a flipped byte is named by its line", test_a_flipped_byte_is_named_by_its_line},
    {"a removed record is named", test_a_removed_record_is_named},
    {"a cut short archive is named", test_a_cut_short_archive_is_named},
    {"a line longer than any record is refused at the bound",
     test_a_line_longer_than_any_record_is_refused_at_the_bound},
    {"an index line longer than any is refused at the bound",
     test_an_index_line_longer_than_any_is_refused_at_the_bound},
    {"an abandoned archive leaves no file", test_an_abandoned_archive_leaves_no_file},
};
static const harness_test run_tests[] = {
    {"a run that has not ended is neither written nor removed",
     test_a_run_that_has_not_ended_is_neither_written_nor_removed},
    {"an ended run is archived, verified and removed",
     test_an_ended_run_is_archived_verified_and_removed},
    {"exactly once survives archiving", test_exactly_once_survives_archiving},
    {"a damaged run archive fails verification", test_a_damaged_run_archive_fails_verification},
    {"an archive audits offline", test_an_archive_audits_offline},
    {"a rewritten event is named offline", test_a_rewritten_event_is_named_offline},
    {"an archived decision replays offline", test_an_archived_decision_replays_offline},
    {"the retention pass archives ended runs once",
     test_the_retention_pass_archives_ended_runs_once},
    {"an archive the index cannot name is removed",
     test_an_archive_the_index_cannot_name_is_removed},
};
static const harness_test window_tests[] = {
    {"compact records expire after the invocation window",
     test_compact_records_expire_after_the_invocation_window},
    {"after the window the run is named from the index",
     test_after_the_window_the_run_is_named_from_the_index},
    {"after the window a retry is never a fresh delivery",
     test_after_the_window_a_retry_is_never_a_fresh_delivery},
    {"after the window a retry is acknowledged from the archive",
     test_after_the_window_a_retry_is_acknowledged_from_the_archive},
    {"the CLI names the archive of an acknowledged delivery",
     test_the_cli_names_the_archive_of_an_acknowledged_delivery},
    {"after the window other content is a conflict",
     test_after_the_window_other_content_is_a_conflict},
};
static const harness_test paging_tests[] = {
    {"GetRun pages deliveries and artifacts", test_get_run_pages_deliveries_and_artifacts},
};
static const harness_test charterd_tests[] = {
    {"charterd archives an ended run past retention",
     test_charterd_archives_an_ended_run_past_retention},
    {"a tenant keeps its own retention period", test_a_tenant_keeps_its_own_retention_period},
    {"what-if reads archives as it read the runs", test_what_if_reads_archives_as_it_read_the_runs},
    {"charterd answers a tool call from the archive after the window",
     test_charterd_answers_a_tool_call_from_the_archive_after_the_window},
    {"charterd answers for an archived run from its archive",
     test_charterd_answers_for_an_archived_run_from_its_archive},
};
static const harness_suite suites[] = {
    {"a run leaving Redis", suite_init, NULL, HARNESS_TABLE(run_tests)},
    {"GetRun in pages", NULL, suite_clean, HARNESS_TABLE(paging_tests)},
    {"the invocation window", window_init, window_clean, HARNESS_TABLE(window_tests)},
    {"the archive file", NULL, NULL, HARNESS_TABLE(file_tests)},
    {"charterd --retention", NULL, NULL, HARNESS_TABLE(charterd_tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .setup = setup, .teardown = teardown,
                                       .needs_redis = true};
