/*
 * archive_audit.c - the offline audit of an archive file (archive_audit.h).
 *
 * One pass over the records, in the order the archiver writes them (manifest, run, contexts,
 * artifacts, events, deliveries, approvals, records): the run's head is known before the first
 * event, and every allowed delivery event before the deliveries that name them. The hashes are
 * the ones charterd sealed: the canonical text of event_text.h under SHA-256 or HMAC-SHA256.
 */
#include "evidence/archive_audit.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "core/status.h"
#include "evidence/archive.h"
#include "evidence/event_text.h"
#include "evidence/integrity.h"
#include "evidence/receipt_json.h"
#include "receipt.h"

typedef struct {
    archive_audit_result *out;
    const unsigned char *key;
    size_t keylen;
    json_t *run; /* the run's hash as archived (owned) */
    uint64_t keyless_until;
    uint64_t seq;      /* the last event checked */
    char prev[65];     /* its hash */
    json_t *decisions; /* {"<seq>": "<invocation>"} of allowed delivery_decided events */
    bool stopped_nokey;
} audit_state;

/* The kinds of event that commit a delivery: a send, or a tool call's effect. */
static bool commits_delivery(const char *kind)
{
    return strcmp(kind, "delivery_decided") == 0 || strcmp(kind, "invoke_decided") == 0;
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static int problem(audit_state *a, uint64_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Names the first problem; the read stops (1). */
static int problem(audit_state *a, uint64_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char what[320];
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    a->out->intact = false;
    a->out->line = line;
    snprintf(a->out->problem, sizeof a->out->problem, "record %llu: %s", (unsigned long long)line,
             what);
    return 1;
}

static int on_manifest(audit_state *a, uint64_t line, const json_t *m)
{
    if (strcmp(str(m, "format"), ARCHIVE_FORMAT) != 0)
        return problem(a, line, "the manifest's format is \"%s\", not " ARCHIVE_FORMAT,
                       str(m, "format"));
    snprintf(a->out->run_id, sizeof a->out->run_id, "%s", str(m, "run_id"));
    a->out->keyed = strcmp(str(m, "integrity"), "keyed") == 0;
    if (!a->out->keyed)
        return 0;
    if (a->key == NULL) {
        a->stopped_nokey = true;
        return 1;
    }
    char check[65];
    if (charter_hmac_sha256_hex(a->key, a->keylen, INTEGRITY_KEY_CHECK_TEXT,
                                strlen(INTEGRITY_KEY_CHECK_TEXT), check) != 0)
        return STATUS_ENOMEM;
    if (strcmp(check, str(m, "key_check")) != 0)
        return problem(a, line,
                       "the key given is not the graph's integrity key (its key_check "
                       "differs from the manifest's)");
    return 0;
}

/* The event's hash as sealed: HMAC under the key, or SHA-256 (a keyless graph, or an event
 * written before the graph adopted its key). */
static int event_hash(const audit_state *a, const json_t *ev, uint64_t seq, char hex[65])
{
    evlog_fields f = {str(ev, "run_id"),    str(ev, "seq"),     str(ev, "ts"),
                      str(ev, "kind"),      str(ev, "outcome"), str(ev, "codes"),
                      str(ev, "witness"),   str(ev, "detail"),  str(ev, "snapshot"),
                      str(ev, "evaluator"), str(ev, "prev")};
    char *text = NULL;
    size_t len = 0;
    if (evlog_event_text(&f, &text, &len) != STATUS_OK)
        return STATUS_ENOMEM;
    int rc = a->out->keyed && seq > a->keyless_until
                 ? charter_hmac_sha256_hex(a->key, a->keylen, text, len, hex)
                 : digest_sha256_hex(text, len, hex);
    free(text);
    return rc == 0 ? STATUS_OK : STATUS_ENOMEM;
}

static int on_event(audit_state *a, uint64_t line, const json_t *ev)
{
    uint64_t seq = strtoull(str(ev, "seq"), NULL, 10);
    char hex[65];
    if (seq != a->seq + 1)
        return problem(a, line, "event %llu follows event %llu: event %llu was removed",
                       (unsigned long long)seq, (unsigned long long)a->seq,
                       (unsigned long long)a->seq + 1);
    if (strcmp(str(ev, "run_id"), a->out->run_id) != 0)
        return problem(a, line, "event %llu is of run %s", (unsigned long long)seq,
                       str(ev, "run_id"));
    if (event_hash(a, ev, seq, hex) != STATUS_OK)
        return STATUS_ENOMEM;
    if (strcmp(hex, str(ev, "hash")) != 0)
        return problem(a, line, "event %llu was changed: its hash is not the hash of its fields",
                       (unsigned long long)seq);
    if (strcmp(str(ev, "prev"), a->prev) != 0)
        return problem(a, line, "event %llu does not link to event %llu: the chain was altered",
                       (unsigned long long)seq, (unsigned long long)a->seq);
    a->seq = seq;
    a->out->events++;
    snprintf(a->prev, sizeof a->prev, "%s", hex);
    if (commits_delivery(str(ev, "kind")) && strcmp(str(ev, "outcome"), "allow") == 0) {
        json_t *detail = json_loads(str(ev, "detail"), 0, NULL);
        int rc = json_object_set_new(a->decisions, str(ev, "seq"),
                                     json_string(str(detail, "invocation_id")));
        json_decref(detail);
        if (rc != 0)
            return STATUS_ENOMEM;
    }
    return 0;
}

/* The receipt text kept on an object (a delivery or the run): its MAC under the key, and the
 * fields that must name what the archive holds. "" when the receipt holds, else why not. */
static const char *receipt_problem(audit_state *a, const char *text, const char *run_id,
                                   const char *invocation_id, char *why, size_t n)
{
    json_t *j = json_loads(text, 0, NULL);
    Charter__V1__Receipt r;
    bool parsed = j != NULL && receipt_json_parse(j, &r) == STATUS_OK;
    char reason[160] = "";
    if (!parsed)
        snprintf(why, n, "is not a receipt");
    else if (a->key == NULL)
        why[0] = '\0'; /* keyless: receipts are not issued; nothing to check them with */
    else if (charter_receipt_verify(&r, a->key, a->keylen, reason, sizeof reason) != 0)
        snprintf(why, n, "does not verify under the integrity key (%s)", reason);
    else if (strcmp(r.run_id, run_id) != 0 || strcmp(r.invocation_id, invocation_id) != 0)
        snprintf(why, n, "names another run or invocation");
    else
        why[0] = '\0';
    if (parsed && a->key != NULL && why[0] == '\0')
        a->out->receipts++;
    if (parsed)
        receipt_json_clear(&r);
    json_decref(j);
    return why;
}

static int on_delivery(audit_state *a, uint64_t line, const json_t *d)
{
    const char *inv = str(d, "invocation_id");
    const char *decided = str(a->decisions, str(d, "event_seq"));
    a->out->deliveries++;
    if (strcmp(decided, inv) != 0)
        return problem(a, line,
                       "delivery %s names event %s, which is not the allowed decision of it", inv,
                       str(d, "event_seq"));
    const char *text = str(d, "receipt");
    char why[200];
    if (*text && *receipt_problem(a, text, a->out->run_id, inv, why, sizeof why))
        return problem(a, line, "the receipt of delivery %s %s", inv, why);
    return 0;
}

static int audit_visit(void *ctx, uint64_t line, const char *kind, const json_t *body)
{
    audit_state *a = ctx;
    if (strcmp(kind, "manifest") == 0)
        return on_manifest(a, line, body);
    if (strcmp(kind, "run") == 0) {
        a->run = json_deep_copy(body);
        a->keyless_until = strtoull(str(body, "keyless_until"), NULL, 10);
        return a->run ? 0 : STATUS_ENOMEM;
    }
    if (strcmp(kind, "event") == 0)
        return on_event(a, line, body);
    if (strcmp(kind, "delivery") == 0)
        return on_delivery(a, line, body);
    return 0;
}

/* After the last record: the chain ends at the run's head, and the run's receipt holds. */
static void audit_end(audit_state *a)
{
    uint64_t seq = strtoull(str(a->run, "seq"), NULL, 10);
    if (a->run == NULL) {
        problem(a, 0, "the archive holds no run record");
    } else if (a->seq != seq) {
        problem(a, 0,
                "the run's head is event %llu but the archive's events end at %llu: "
                "events were removed",
                (unsigned long long)seq, (unsigned long long)a->seq);
    } else if (strcmp(str(a->run, "head"), a->prev) != 0) {
        problem(a, 0, "event %llu was changed: the run's head records another hash",
                (unsigned long long)seq);
    } else if (*str(a->run, "receipt")) {
        char why[200];
        if (*receipt_problem(a, str(a->run, "receipt"), a->out->run_id, "", why, sizeof why))
            problem(a, 0, "the run's receipt %s", why);
    }
}

int archive_audit(const char *path, const unsigned char *key, size_t keylen,
                  archive_audit_result *out)
{
    memset(out, 0, sizeof *out);
    out->intact = true;
    audit_state a = {.out = out, .key = key, .keylen = keylen, .decisions = json_object()};
    archive_check check;
    int rc = a.decisions ? archive_read(path, audit_visit, &a, &check) : STATUS_ENOMEM;
    if (rc == 1 && a.stopped_nokey) {
        rc = STATUS_ENOKEY;
    } else if (rc == 1) {
        rc = STATUS_OK; /* a problem was named */
    } else if (rc == STATUS_OK && !check.intact) {
        out->intact = false;
        out->line = check.bad_line;
        snprintf(out->problem, sizeof out->problem, "%s", check.problem);
    } else if (rc == STATUS_OK) {
        audit_end(&a);
    }
    json_decref(a.run);
    json_decref(a.decisions);
    return rc;
}
