/*
 * cli_whatif.c - `charter what-if`'s report, and what-if over archives (cli_whatif.h).
 *
 * Offline, the decisions come from archive files (server/evidence/archive_replay.c, the
 * reader `replay --archive` uses) and are decided by the evaluator's own what-if
 * (evaluator_whatif), then gathered into the WhatIfResponse Evidence/WhatIf answers, so the
 * text and the --json report read the same whichever side decided.
 */
#include "cli_whatif.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_json.h"
#include "core/status.h"
#include "evidence/archive_audit.h"
#include "evidence/archive_index.h"
#include "evidence/archive_replay.h"
#include "policy/evaluator.h"
#include "policy/guard.h"
#include "policy/workflow.h"
#include "receipt.h"

/* As Evidence/WhatIf (server/rpc/svc_whatif.c). */
#define WHATIF_DEFAULT_LIMIT 1000

/* "delivery public", "input report", "source vendor_a": what the decision was about. */
static void whatif_about(const Charter__V1__WhatIfChange *ch, char *buf, size_t n)
{
    snprintf(buf, n, "%s %s", ch->gate, *ch->subject ? ch->subject : ch->step);
}

int cli_whatif_print(const Charter__V1__WhatIfResponse *r, bool json)
{
    if (json)
        return cli_json_print_message(&r->base) == 0 ? 0 : 1;
    for (size_t i = 0; i < r->n_changes; i++) {
        const Charter__V1__WhatIfChange *ch = r->changes[i];
        const char *w = ch->candidate != NULL ? ch->candidate->witness : "";
        char about[300];
        whatif_about(ch, about, sizeof about);
        printf("run %s seq %llu %s: %s%s%s%s\n", ch->run_id, (unsigned long long)ch->seq, about,
               ch->change, *w ? " (witness " : "", w, *w ? ")" : "");
    }
    for (size_t i = 0; i < r->n_counts; i++)
        printf("%6llu  %s\n", (unsigned long long)r->counts[i]->count, r->counts[i]->change);
    printf("%zu of %llu decisions would change (%llu record no facts) under workflow %s\n",
           r->n_changes, (unsigned long long)r->examined, (unsigned long long)r->no_snapshot,
           r->workflow_version);
    if (r->truncated)
        printf("truncated: the limit was reached; more decisions are in scope (--limit)\n");
    if (r->archive != NULL && *r->archive)
        printf("decided from the archive %s (the run left the database)\n", r->archive);
    return 0;
}

/* ---- the report, built in plain memory (freed by what_if_response__free_unpacked) ---------- */

typedef struct {
    const evaluator_candidate *cand;
    uint32_t limit;
    Charter__V1__WhatIfResponse *resp;
    char why[300]; /* why a decision could not be decided */
} archive_whatif;

static int append(void ***items, size_t *n, void *item)
{
    void **p = realloc(*items, (*n + 1) * sizeof *p);
    if (p == NULL)
        return STATUS_ENOMEM;
    p[(*n)++] = item;
    *items = p;
    return STATUS_OK;
}

Charter__V1__Decision *cli_whatif_decision(guard_outcome outcome, unsigned codes, const char *w)
{
    Charter__V1__Decision *m = malloc(sizeof *m);
    if (m == NULL)
        return NULL;
    charter__v1__decision__init(m);
    m->outcome = outcome == GUARD_ALLOW  ? CHARTER__V1__OUTCOME__ALLOW
                 : outcome == GUARD_DENY ? CHARTER__V1__OUTCOME__DENY
                                         : CHARTER__V1__OUTCOME__UNKNOWN;
    m->witness = strdup(w ? w : "");
    m->codes = calloc(GUARD_CODE_COUNT, sizeof *m->codes);
    bool ok = m->witness != NULL && m->codes != NULL;
    for (int i = 0; ok && i < GUARD_CODE_COUNT; i++)
        if ((codes >> i) & 1u)
            ok = (m->codes[m->n_codes++] = strdup(decision_code_name((guard_code)i))) != NULL;
    if (!ok) {
        charter__v1__decision__free_unpacked(m, NULL);
        return NULL;
    }
    return m;
}

Charter__V1__Decision *cli_whatif_recorded_decision(const json_t *event)
{
    const char *outcome = json_string_value(json_object_get(event, "outcome"));
    const char *codes = json_string_value(json_object_get(event, "codes"));
    Charter__V1__Decision *d =
        cli_whatif_decision(outcome && strcmp(outcome, "allow") == 0  ? GUARD_ALLOW
                            : outcome && strcmp(outcome, "deny") == 0 ? GUARD_DENY
                                                                      : GUARD_UNKNOWN,
                            0, json_string_value(json_object_get(event, "witness")));
    char *copy = d != NULL && codes != NULL ? strdup(codes) : NULL;
    bool ok = d != NULL && (codes == NULL || copy != NULL);
    /* decision_of left room for every guard code; a recorded list names each at most once. */
    for (char *tok = copy, *end; ok && tok != NULL && d->n_codes < GUARD_CODE_COUNT; tok = end) {
        if ((end = strchr(tok, ',')) != NULL)
            *end++ = '\0';
        if (*tok)
            ok = (d->codes[d->n_codes++] = strdup(tok)) != NULL;
    }
    free(copy);
    if (!ok && d != NULL) {
        charter__v1__decision__free_unpacked(d, NULL);
        return NULL;
    }
    return d;
}

/* Counts one change of kind text. */
static int count_change(Charter__V1__WhatIfResponse *r, const char *text)
{
    for (size_t i = 0; i < r->n_counts; i++)
        if (strcmp(r->counts[i]->change, text) == 0) {
            r->counts[i]->count++;
            return STATUS_OK;
        }
    Charter__V1__WhatIfCount *k = malloc(sizeof *k);
    if (k == NULL)
        return STATUS_ENOMEM;
    charter__v1__what_if_count__init(k);
    k->count = 1;
    if ((k->change = strdup(text)) == NULL ||
        append((void ***)&r->counts, &r->n_counts, k) != STATUS_OK) {
        charter__v1__what_if_count__free_unpacked(k, NULL);
        return STATUS_ENOMEM;
    }
    return STATUS_OK;
}

/* The seq of an archived event, a decimal string as stored. */
static const char *event_seq(const json_t *event)
{
    const char *seq = json_string_value(json_object_get(event, "seq"));
    return seq != NULL ? seq : "?";
}

/* The change of event (recorded) to d (under the candidate): "allow -> deny CODE". */
static int keep_change(Charter__V1__WhatIfResponse *r, const char *run_id, const json_t *event,
                       const evaluator_whatif_result *d)
{
    char codes[512], line[1300];
    const char *rec = json_string_value(json_object_get(event, "codes"));
    const char *out = json_string_value(json_object_get(event, "outcome"));
    guard_codes_format(d->decided.codes, codes, sizeof codes);
    snprintf(line, sizeof line, "%s%s%s -> %s%s%s", out ? out : "", rec && *rec ? " " : "",
             rec ? rec : "", decision_outcome_name(d->decided.outcome), *codes ? " " : "", codes);
    Charter__V1__WhatIfChange *ch = malloc(sizeof *ch);
    if (ch == NULL)
        return STATUS_ENOMEM;
    charter__v1__what_if_change__init(ch);
    ch->seq = strtoull(event_seq(event), NULL, 10);
    ch->run_id = strdup(run_id);
    ch->gate = strdup(d->gate);
    ch->step = strdup(d->step);
    ch->subject = strdup(d->subject);
    ch->change = strdup(line);
    ch->recorded = cli_whatif_recorded_decision(event);
    ch->candidate = cli_whatif_decision(d->decided.outcome, d->decided.codes, d->decided.witness);
    if (!ch->run_id || !ch->gate || !ch->step || !ch->subject || !ch->change || !ch->recorded ||
        !ch->candidate || append((void ***)&r->changes, &r->n_changes, ch) != STATUS_OK) {
        charter__v1__what_if_change__free_unpacked(ch, NULL);
        return STATUS_ENOMEM;
    }
    return count_change(r, line);
}

/* Decides one archived decision again under the candidate (as svc_whatif.c examine does). The
 * archive keeps no workflow definition: the recording workflow is known only when it is the
 * candidate itself (the same version); otherwise the recorded lists bound the candidate. */
static int decide_again(void *ctx, const char *run_id, json_t *event)
{
    archive_whatif *w = ctx;
    Charter__V1__WhatIfResponse *r = w->resp;
    if (r->examined == w->limit) {
        r->truncated = true;
        return 1;
    }
    r->examined++;
    char version[65];
    const workflow *recorded = evaluator_replay_workflow(event, version) == STATUS_OK &&
                                       strcmp(version, w->cand->wf->version) == 0
                                   ? w->cand->wf
                                   : NULL;
    evaluator_whatif_result d;
    char why[224];
    int rc = evaluator_whatif(w->cand, recorded, event, &d, why, sizeof why);
    if (rc != STATUS_OK) {
        snprintf(w->why, sizeof w->why, "run %s event %s: %s", run_id, event_seq(event),
                 rc == STATUS_ENOMEM ? "out of memory" : why);
        return rc;
    }
    if (d.no_snapshot)
        r->no_snapshot++;
    else if (d.changed)
        rc = keep_change(r, run_id, event, &d);
    evaluator_whatif_result_free(&d);
    return rc;
}

/* ---- the archives in scope ---------------------------------------------------------------- */

static int list_indexed(void *ctx, const char *path, const char *run_id)
{
    (void)run_id;
    return json_array_append_new(ctx, json_string(path)) == 0 ? 0 : STATUS_ENOMEM;
}

/* The archive files path names, into *files: the file itself, or every archive the index of a
 * graph's folder lists, in its order, once the whole index holds. Returns an exit status. */
static int archives_in_scope(const char *path, json_t **files)
{
    struct stat sb;
    *files = json_array();
    if (*files == NULL)
        return 1;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return json_array_append_new(*files, json_string(path)) == 0 ? 0 : 1;
    archive_index_check check;
    int rc = archive_index_verify(path, list_indexed, *files, &check);
    if (rc == STATUS_ENOTFOUND) {
        fprintf(stderr, "charter: %s holds no %s: name a graph's archive folder\n", path,
                ARCHIVE_INDEX_NAME);
        return 2;
    }
    if (rc != STATUS_OK) {
        fprintf(stderr, "charter: %s cannot be read\n", path);
        return 1;
    }
    if (!check.intact) {
        fprintf(stderr, "charter: archives %s: NOT intact: %s\n", path, check.problem);
        return 1;
    }
    return 0;
}

/* Audits one archive as `charter audit --archive` does; only an intact one is decided from.
 * Returns an exit status. */
static int audited(const char *path, const unsigned char *key, size_t key_len)
{
    archive_audit_result a;
    int rc = archive_audit(path, key, key_len, &a);
    if (rc == STATUS_ENOKEY) {
        fprintf(stderr,
                "charter: %s is of a keyed graph: give its integrity key with --key KEYFILE\n",
                path);
        return 2;
    }
    if (rc != STATUS_OK) {
        fprintf(stderr, "charter: %s cannot be read (%s)\n", path,
                rc == STATUS_ENOTFOUND ? "no such file" : "read failed");
        return 1;
    }
    if (!a.intact) {
        fprintf(stderr, "charter: archive %s: run %s NOT intact: %s\n", path,
                a.run_id[0] ? a.run_id : "?", a.problem);
        return 1;
    }
    return 0;
}

/* Every decision of the archives in files, in order, until the limit. Returns an exit status. */
static int decide_archives(archive_whatif *w, const json_t *files, const unsigned char *key,
                           size_t key_len)
{
    for (size_t i = 0; i < json_array_size(files) && !w->resp->truncated; i++) {
        const char *path = json_string_value(json_array_get(files, i));
        int rv = audited(path, key, key_len);
        if (rv != 0)
            return rv;
        char why[256];
        int rc = archive_decisions(path, decide_again, w, why, sizeof why);
        if (rc != STATUS_OK && !(rc == 1 && w->resp->truncated)) {
            fprintf(stderr, "charter: %s: %s\n", path,
                    w->why[0]             ? w->why
                    : why[0]              ? why
                    : rc == STATUS_ENOMEM ? "out of memory"
                                          : "cannot be read");
            return 1;
        }
    }
    return 0;
}

static int load_key(const char *keyfile, unsigned char *key, size_t cap, size_t *len)
{
    char why[256] = "";
    if (keyfile != NULL && charter_receipt_key_load(keyfile, key, cap, len, why, sizeof why) != 0) {
        fprintf(stderr, "charter: %s\n", why);
        return 2;
    }
    return 0;
}

int cli_whatif_archive(const char *path, const char *keyfile, const char *workflow_text,
                       uint64_t limit, bool json)
{
    static unsigned char key[CHARTER_RECEIPT_KEY_MAX];
    size_t key_len = 0;
    workflow *wf = NULL;
    char err[512];
    int rv = load_key(keyfile, key, sizeof key, &key_len);
    if (rv != 0)
        return rv;
    if (workflow_load_buffer(workflow_text, strlen(workflow_text), &wf, err, sizeof err) != 0) {
        fprintf(stderr, "charter: workflow: %s\n", err);
        return 2;
    }
    evaluator_candidate cand = {0};
    Charter__V1__WhatIfResponse *resp = malloc(sizeof *resp);
    json_t *files = NULL;
    archive_whatif w = {.cand = &cand, .limit = limit ? (uint32_t)limit : WHATIF_DEFAULT_LIMIT};
    rv = 1;
    if (resp == NULL || evaluator_candidate_init(wf, &cand) != STATUS_OK)
        goto out;
    charter__v1__what_if_response__init(resp);
    w.resp = resp;
    if ((resp->workflow_version = strdup(wf->version)) == NULL ||
        (rv = archives_in_scope(path, &files)) != 0 ||
        (rv = decide_archives(&w, files, keyfile ? key : NULL, key_len)) != 0)
        goto out;
    rv = cli_whatif_print(resp, json);
out:
    if (resp != NULL && w.resp == NULL)
        free(resp);
    else if (resp != NULL)
        charter__v1__what_if_response__free_unpacked(resp, NULL);
    json_decref(files);
    evaluator_candidate_free(&cand);
    workflow_free(wf);
    return rv;
}
