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

#include "cli_json.h"
#include "cli_print.h"
#include "cli_whatif.h"
#include "core/status.h"
#include "evidence/archive_audit.h"
#include "evidence/archive_index.h"
#include "evidence/archive_replay.h"
#include "policy/guard.h"
#include "receipt.h"

static int print_json_result(const char *path, const archive_audit_result *r)
{
    json_t *j =
        json_pack("{s:s, s:s, s:b, s:b, s:I, s:I, s:I, s:I, s:s}", "file", path, "runId", r->run_id,
                  "intact", r->intact, "keyed", r->keyed, "events", (json_int_t)r->events,
                  "deliveries", (json_int_t)r->deliveries, "receipts", (json_int_t)r->receipts,
                  "line", (json_int_t)r->line, "problem", r->problem);
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
static int cli_audit_folder(const char *dir, const unsigned char *key, size_t key_len, bool json)
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
    bool intact = rc != 1 && check.intact;
    const char *problem = intact ? "" : rc == 1 ? fa.problem : check.problem;
    if (json) {
        /* A document of the CLI's own, as the one of a single archive. */
        json_t *j =
            json_pack("{s:s, s:b, s:I, s:I, s:s}", "folder", dir, "intact", intact, "runs",
                      (json_int_t)check.runs, "files", (json_int_t)check.files, "problem", problem);
        int printed = cli_json_print(j);
        json_decref(j);
        if (printed != 0)
            return 1;
    } else if (!intact) {
        printf("archives %s: NOT intact: %s\n", dir, problem);
    } else {
        printf("archives %s: intact (%llu runs indexed, %llu files, every archive audited)\n", dir,
               (unsigned long long)check.runs, (unsigned long long)check.files);
    }
    return intact ? 0 : 1;
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
        return cli_audit_folder(path, keyfile ? key : NULL, key_len, json);
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
    /* The answer charterd gives for a run that left the database (Evidence/ReplayDecision),
     * printed as `charter replay RUN SEQ` prints it: the same lines, the same JSON. */
    Charter__V1__ReplayDecisionResponse resp = CHARTER__V1__REPLAY_DECISION_RESPONSE__INIT;
    resp.recorded = cli_whatif_recorded_decision(r.event);
    resp.replayed = r.res.no_snapshot
                        ? NULL
                        : cli_whatif_decision(r.res.replayed.outcome, r.res.replayed.codes,
                                              r.res.replayed.witness);
    resp.no_snapshot = r.res.no_snapshot;
    resp.matches = r.res.matches;
    resp.evaluator = (char *)event_text(r.event, "evaluator");
    resp.evaluator_version = (uint32_t)r.res.version;
    resp.before_versions = r.res.before_versions;
    resp.archive = (char *)path;
    int printed = 0;
    if (resp.recorded == NULL || (!resp.no_snapshot && resp.replayed == NULL)) {
        fprintf(stderr, "charter: out of memory\n");
        printed = -1;
    } else if (json) {
        printed = cli_json_print_message(&resp.base);
    } else {
        cli_print_replay(stdout, seq_text, &resp);
    }
    if (resp.recorded != NULL)
        charter__v1__decision__free_unpacked(resp.recorded, NULL);
    if (resp.replayed != NULL)
        charter__v1__decision__free_unpacked(resp.replayed, NULL);
    if (printed != 0) {
        archive_replay_result_free(&r);
        return 1;
    }
    int exit_status = r.res.no_snapshot || r.res.matches ? 0 : 1;
    archive_replay_result_free(&r);
    return exit_status;
}
