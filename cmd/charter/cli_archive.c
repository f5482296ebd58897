/*
 * cli_archive.c - the offline audit of an archive file (cli_archive.h). The checks are the
 * server's own code (server/evidence/archive_audit.c), compiled into the CLI, so what charterd
 * archived and what an auditor checks can never disagree on a byte.
 */
#include "cli_archive.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/status.h"
#include "evidence/archive_audit.h"
#include "evidence/archive_index.h"
#include "evidence/archive_replay.h"
#include "policy/guard.h"
#include "receipt.h"

static int print_json_result(const char *path, const archive_audit_result *r)
{
    json_t *j =
        json_pack("{s:s, s:s, s:b, s:b, s:I, s:I, s:I, s:I, s:s}", "file", path, "run_id",
                  r->run_id, "intact", r->intact, "keyed", r->keyed, "events",
                  (json_int_t)r->events, "deliveries", (json_int_t)r->deliveries, "receipts",
                  (json_int_t)r->receipts, "line", (json_int_t)r->line, "problem", r->problem);
    char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (text == NULL)
        return 1;
    puts(text);
    free(text);
    return 0;
}

/* The audit of one graph's folder: the index, then each archive it names. */
typedef struct {
    const unsigned char *key;
    size_t key_len;
    unsigned long long intact, runs;
    bool needs_key; /* an archive is keyed and no --key was given */
    char problem[400];
} folder_audit;

static int audit_indexed(void *ctx, const char *path, const char *run_id)
{
    folder_audit *fa = ctx;
    archive_audit_result r;
    int rc = archive_audit(path, fa->key, fa->key_len, &r);
    fa->runs++;
    if (rc == STATUS_OK && r.intact) {
        fa->intact++;
        return 0;
    }
    fa->needs_key = rc == STATUS_ENOKEY;
    snprintf(fa->problem, sizeof fa->problem, "run %s: %.300s", run_id,
             rc == STATUS_OK       ? r.problem
             : rc == STATUS_ENOKEY ? "a keyed archive: give --key"
                                   : "cannot be read");
    return 1;
}

/* A folder: one graph's (it holds the index), or the archive folder (each graph under it). */
static int cli_audit_folder(const char *dir, const unsigned char *key, size_t key_len)
{
    folder_audit fa = {key, key_len, 0, 0, false, ""};
    archive_index_check check;
    int rc = archive_index_verify(dir, audit_indexed, &fa, &check);
    if (rc == STATUS_ENOTFOUND) {
        fprintf(stderr, "charter: %s holds no %s: name a graph's archive folder\n", dir,
                ARCHIVE_INDEX_NAME);
        return 2;
    }
    if (rc != STATUS_OK && rc != 1) {
        fprintf(stderr, "charter: %s cannot be read\n", dir);
        return 1;
    }
    if (rc == 1 && fa.needs_key) {
        fprintf(stderr,
                "charter: %s holds archives of a keyed graph: give its integrity key with "
                "--key KEYFILE\n",
                dir);
        return 2;
    }
    if (rc == 1 || !check.intact) {
        printf("archives %s: NOT intact: %s\n", dir, rc == 1 ? fa.problem : check.problem);
        return 1;
    }
    printf("archives %s: intact (%llu runs indexed, %llu files, every archive audited)\n", dir,
           (unsigned long long)check.runs, (unsigned long long)check.files);
    return 0;
}

int cli_audit_archive(const char *path, const char *keyfile, bool json)
{
    static unsigned char key[CHARTER_RECEIPT_KEY_MAX];
    size_t key_len = 0;
    char why[256] = "";
    if (keyfile != NULL &&
        charter_receipt_key_load(keyfile, key, sizeof key, &key_len, why, sizeof why) != 0) {
        fprintf(stderr, "charter: %s\n", why);
        return 2;
    }
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return cli_audit_folder(path, keyfile ? key : NULL, key_len);
    archive_audit_result r;
    int rc = archive_audit(path, keyfile ? key : NULL, key_len, &r);
    if (rc == STATUS_ENOKEY) {
        fprintf(stderr,
                "charter: %s is of a keyed graph: give its integrity key with --key "
                "KEYFILE\n",
                path);
        return 2;
    }
    if (rc != STATUS_OK) {
        fprintf(stderr, "charter: %s cannot be read (%s)\n", path,
                rc == STATUS_ENOTFOUND ? "no such file" : "read failed");
        return 1;
    }
    if (json && print_json_result(path, &r) != 0)
        return 1;
    if (!json && r.intact)
        printf("archive %s: run %s intact (%llu events, %llu deliveries, %llu receipts checked, "
               "%s)\n",
               path, r.run_id, (unsigned long long)r.events, (unsigned long long)r.deliveries,
               (unsigned long long)r.receipts,
               r.keyed ? "HMAC-SHA256 under the integrity key" : "SHA-256, no integrity key");
    else if (!json)
        printf("archive %s: run %s NOT intact: %s\n", path, r.run_id[0] ? r.run_id : "?",
               r.problem);
    return r.intact ? 0 : 1;
}

static const char *event_text(const json_t *e, const char *k)
{
    const char *s = json_string_value(json_object_get(e, k));
    return s != NULL ? s : "";
}

int cli_replay_archive(const char *path, const char *seq_text, bool json)
{
    /* Digits only, as charter replay RUN SEQ reads it: strtoull took " 5", "+5" and "-1" (as
     * 18446744073709551615). */
    char *end = NULL;
    errno = 0;
    unsigned long long seq = strtoull(seq_text, &end, 10);
    if (seq_text[0] < '0' || seq_text[0] > '9' || errno != 0 || seq == 0 || *end != '\0') {
        fprintf(stderr, "charter: SEQ must be an event's seq, 1 or more, not \"%s\"\n", seq_text);
        return 2;
    }
    archive_replay_result r;
    char why[256];
    int rc = archive_replay(path, "", seq, &r, why, sizeof why);
    if (rc != STATUS_OK) {
        fprintf(stderr, "charter: %s: event %llu: %s\n", path, seq,
                why[0] ? why : "cannot be replayed");
        return 1;
    }
    const guard_decision *d = &r.res.replayed;
    char codes[256] = "";
    guard_codes_format(d->codes, codes, sizeof codes);
    const char *outcome = r.res.no_snapshot ? "-" : decision_outcome_name(d->outcome);
    if (json) {
        json_t *j = json_pack(
            "{s:s, s:I, s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}, s:b, s:b, s:s, s:i}", "file", path,
            "seq", (json_int_t)seq, "recorded", "outcome", event_text(r.event, "outcome"), "codes",
            event_text(r.event, "codes"), "witness", event_text(r.event, "witness"), "replayed",
            "outcome", outcome, "codes", codes, "witness", d->witness ? d->witness : "",
            "no_snapshot", r.res.no_snapshot, "matches", r.res.matches, "evaluator",
            event_text(r.event, "evaluator"), "evaluator_version", r.res.version);
        char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(j);
        if (text)
            puts(text);
        free(text);
    } else {
        printf("recorded %-6llu %s %s %s\n", seq, event_text(r.event, "outcome"),
               event_text(r.event, "codes"), event_text(r.event, "witness"));
        printf("replayed %-6llu %s %s %s\n", seq, outcome, codes, d->witness ? d->witness : "");
        printf("matches  %s\nevaluator %s\nversion  %d\n",
               r.res.no_snapshot ? "- (nothing to replay)"
               : r.res.matches   ? "yes"
                                 : "NO",
               event_text(r.event, "evaluator"), r.res.version);
    }
    int exit_status = r.res.no_snapshot || r.res.matches ? 0 : 1;
    archive_replay_result_free(&r);
    return exit_status;
}
