/*
 * keyadopt.c - a keyless graph adopting an integrity key (see keyadopt.h): the runs listed with
 * their last events, each sealed under the key, and the conditional write that records it all
 * at once; and the check of one run's seal for an audit.
 */
#include "evidence/keyadopt.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "core/status.h"
#include "evidence/integrity.h"
#include "evidence/summary_seal.h"

#define KEYADOPT_PAGE "1000"

/* The text a run's seal is the MAC of, into buf (n bytes). Returns its length, or -1. */
static int seal_text(const char *run_id, uint64_t seq, const char *head, char *buf, size_t n)
{
    int w = snprintf(buf, n, "charter-keyless-run-1\n%s\n%llu\n%s\n", run_id,
                     (unsigned long long)seq, head);
    return w > 0 && (size_t)w < n ? w : -1;
}

int keyadopt_graph_mode(store *st, char mode[16], char *err, size_t n)
{
    json_t *reply = NULL;
    mode[0] = '\0';
    int rc = q_integrity_state(st, &reply);
    if (rc != STATUS_OK) {
        snprintf(err, n, "%s", store_last_error(st));
        return rc;
    }
    const char *m = json_string_value(json_object_get(reply, "mode"));
    if (m == NULL || strlen(m) >= 16) {
        snprintf(err, n, "charter_integrity_state answered without a mode");
        rc = STATUS_EPROTO;
    } else {
        snprintf(mode, 16, "%s", m);
    }
    json_decref(reply);
    return rc;
}

/* One run of a charter_keyless_runs page as a mark {id, seq, head, seal} appended to marks. */
static int mark_run(const json_t *r, json_t *marks)
{
    const char *id = json_string_value(json_object_get(r, "id"));
    const char *head = json_string_value(json_object_get(r, "head"));
    const json_t *seq = json_object_get(r, "seq");
    char text[512], seal[65];
    int len = id != NULL && head != NULL && json_is_integer(seq) && json_integer_value(seq) >= 0
                  ? seal_text(id, (uint64_t)json_integer_value(seq), head, text, sizeof text)
                  : -1;
    if (len < 0)
        return STATUS_EPROTO;
    if (integrity_mac(text, (size_t)len, seal) != STATUS_OK)
        return STATUS_ENOMEM;
    return json_array_append_new(marks, json_pack("{s:s, s:O, s:s, s:s}", "id", id, "seq", seq,
                                                  "head", head, "seal", seal)) == 0
               ? STATUS_OK
               : STATUS_ENOMEM;
}

/* Seals the lineage summary of every artifact of run_id under the key, as charterd seals a new
 * one at creation: a keyed graph decides only from sealed summaries. A summary is sealed only
 * when charter_audit_summaries re-derives it from the raw graph (what an audit checks), so the
 * key never vouches for one edited behind the API's back. A seal already there must be this
 * key's (an earlier attempt's). Returns STATUS_OK, STATUS_EREFUSED (err names the artifact), or
 * the store's failure. */
static int seal_summaries(store *st, const char *run_id, char *err, size_t n)
{
    json_t *reply = NULL;
    int rc = q_audit_summaries(st, run_id, "1", &reply);
    if (rc != STATUS_OK) {
        snprintf(err, n, "%s", store_last_error(st));
        return rc;
    }
    const char *bad = json_string_value(json_object_get(reply, "first_bad"));
    if (bad != NULL) {
        const char *why = json_string_value(json_object_get(reply, "problem"));
        snprintf(err, n,
                 "run %s: artifact %s's lineage summary: %s (a key cannot vouch for it: "
                 "charter audit %s names it; start without --adopt-integrity-key)",
                 run_id, bad, why != NULL ? why : "it differs from the graph", run_id);
        rc = STATUS_EREFUSED;
    }
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(reply, "seals"), i, e)
    {
        const char *id = json_string_value(json_array_get(e, 0));
        const char *sh = json_string_value(json_array_get(e, 1));
        const char *seal = json_string_value(json_array_get(e, 2));
        char mac[65];
        json_t *out = NULL;
        if (rc != STATUS_OK ||
            (seal != NULL && *seal != '\0' && summary_seal_check(id, sh, seal) == STATUS_OK))
            continue;
        if (summary_seal_make(id, sh, mac) != STATUS_OK ||
            q_seal_summary(st, id, sh, mac, &out) != STATUS_OK ||
            !json_is_true(json_object_get(out, "sealed"))) {
            snprintf(err, n,
                     "artifact %s's lineage summary could not be sealed (it carries a seal of "
                     "another key, or the database refused the write)",
                     id != NULL ? id : "(unnamed)");
            rc = STATUS_EREFUSED;
        }
        json_decref(out);
    }
    json_decref(reply);
    return rc;
}

/* Every run of the graph with its last event, sealed: {"runs":[...]} into *out; and every
 * artifact's summary sealed (seal_summaries). */
static int mark_runs(store *st, json_t **out, char *err, size_t n)
{
    json_t *marks = json_array();
    int rc = marks != NULL ? STATUS_OK : STATUS_ENOMEM;
    for (size_t offset = 0; rc == STATUS_OK;) {
        char off[24];
        json_t *page = NULL;
        snprintf(off, sizeof off, "%zu", offset);
        if ((rc = q_keyless_runs(st, off, KEYADOPT_PAGE, &page)) != STATUS_OK) {
            snprintf(err, n, "%s", store_last_error(st));
            break;
        }
        const json_t *runs = json_object_get(page, "runs");
        size_t i;
        const json_t *r;
        json_array_foreach(runs, i, r)
        {
            if (rc == STATUS_OK)
                rc = mark_run(r, marks);
            if (rc == STATUS_OK)
                rc = seal_summaries(st, json_string_value(json_object_get(r, "id")), err, n);
        }
        offset += json_array_size(runs);
        bool last = json_array_size(runs) == 0;
        json_decref(page);
        if (last)
            break;
    }
    if (rc == STATUS_OK && (*out = json_pack("{s:o}", "runs", marks)) != NULL)
        return STATUS_OK;
    if (rc == STATUS_EPROTO && err[0] == '\0')
        snprintf(err, n, "charter_keyless_runs answered a run without id, seq or head");
    json_decref(marks);
    return rc == STATUS_OK ? STATUS_ENOMEM : rc;
}

/* One attempt: the runs marked and handed to charter_adopt_key. *conflict when they moved. */
static int adopt_once(store *st, const char *check, size_t *runs, char at[32], bool *conflict,
                      char *err, size_t n)
{
    json_t *marks = NULL, *reply = NULL;
    int rc = mark_runs(st, &marks, err, n);
    char *text = rc == STATUS_OK ? json_dumps(marks, JSON_COMPACT) : NULL;
    if (rc == STATUS_OK && text == NULL)
        rc = STATUS_ENOMEM;
    if (rc == STATUS_OK && (rc = q_adopt_key(st, check, text, &reply)) != STATUS_OK)
        snprintf(err, n, "%s", store_last_error(st));
    *conflict = rc == STATUS_OK && json_is_true(json_object_get(reply, "conflict"));
    if (rc == STATUS_OK && !*conflict && !json_is_true(json_object_get(reply, "adopted"))) {
        rc = STATUS_EEXISTS;
    } else if (rc == STATUS_OK && !*conflict) {
        const char *t = json_string_value(json_object_get(reply, "at"));
        snprintf(at, 32, "%s", t != NULL ? t : "");
        *runs = (size_t)json_integer_value(json_object_get(reply, "runs"));
    }
    free(text);
    json_decref(reply);
    json_decref(marks);
    return rc;
}

int keyadopt_adopt(store *st, size_t *runs, char at[32], char *err, size_t n)
{
    char check[65];
    *runs = 0;
    at[0] = '\0';
    if (n > 0)
        err[0] = '\0';
    char mode[16];
    if (!integrity_keyed())
        return STATUS_ENOKEY;
    int rc = keyadopt_graph_mode(st, mode, err, n);
    if (rc != STATUS_OK)
        return rc;
    if (strcmp(mode, "keyless") != 0)
        return STATUS_EEXISTS; /* a new or a keyed graph: claimed as usual */
    if (integrity_key_check(check) != STATUS_OK) {
        snprintf(err, n, "cannot compute the integrity key check (check the OpenSSL installation)");
        return STATUS_EPROTO;
    }
    bool conflict = true;
    for (int attempt = 0; conflict && rc == STATUS_OK && attempt < KEYADOPT_ATTEMPTS; attempt++)
        rc = adopt_once(st, check, runs, at, &conflict, err, n);
    OPENSSL_cleanse(check, sizeof check);
    if (rc == STATUS_OK && conflict) {
        snprintf(err, n,
                 "its runs kept changing while it adopted the integrity key (stop every charterd "
                 "serving the graph, then start this one with --adopt-integrity-key again)");
        rc = STATUS_EREFUSED;
    }
    return rc;
}

int keyadopt_check_mark(const char *run_id, const json_t *mark, uint64_t *until, char head[65])
{
    *until = 0;
    head[0] = '\0';
    if (mark == NULL)
        return STATUS_OK;
    const json_t *u = json_object_get(mark, "until");
    const char *h = json_string_value(json_object_get(mark, "head"));
    const char *seal = json_string_value(json_object_get(mark, "seal"));
    char text[512];
    int len = json_is_integer(u) && json_integer_value(u) > 0 && h != NULL && strlen(h) == 64 &&
                      digest_is_hex(h, 64)
                  ? seal_text(run_id, (uint64_t)json_integer_value(u), h, text, sizeof text)
                  : -1;
    if (len < 0 || seal == NULL || integrity_mac_verify(text, (size_t)len, seal) != STATUS_OK)
        return STATUS_EREFUSED;
    *until = (uint64_t)json_integer_value(u);
    snprintf(head, 65, "%s", h);
    return STATUS_OK;
}
