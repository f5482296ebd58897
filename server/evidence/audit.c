/*
 * audit.c - the walk over a run's event hash chain (see audit.h).
 *
 * Each place of the log is checked against the events verified before it, so the problem
 * named is the first one in seq order and says which of changed, removed or inserted explains
 * it. The run receipt's MAC is checked by integrity.c, which holds the key.
 */
#include "evidence/audit.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evidence/evlog.h"
#include "evidence/integrity.h"
#include "evidence/keyadopt.h"
#include "evidence/receipt_issue.h"
#include "evidence/summary_seal.h"
#include "workflow/registry.h"
#include "core/digest.h"
#include "core/status.h"

#define AUDIT_PAGE "500"

static int audit_fail(audit_result *out, uint64_t seq, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int audit_fail(audit_result *out, uint64_t seq, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->problem, sizeof out->problem, fmt, ap);
    va_end(ap);
    out->intact = false;
    out->first_bad_seq = seq;
    return 1;
}

static const char *audit_str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s != NULL ? s : "";
}

static const char *audit_text(const json_t *v)
{
    const char *s = json_string_value(v);
    return s != NULL ? s : "";
}

/* The hashes of the events verified so far, by seq (index seq - 1). */
typedef struct {
    char (*items)[65];
    size_t n, cap;
} audit_hashes;

static int audit_hashes_add(audit_hashes *h, const char *hash)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        char(*grown)[65] = realloc(h->items, cap * sizeof *grown);
        if (grown == NULL)
            return STATUS_ENOMEM;
        h->items = grown;
        h->cap = cap;
    }
    snprintf(h->items[h->n++], 65, "%s", hash);
    return STATUS_OK;
}

/* The 1-based seq of the verified event whose hash is hash, or 0. */
static uint64_t audit_hashes_find(const audit_hashes *h, const char *hash)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->items[i], hash) == 0)
            return (uint64_t)i + 1;
    return 0;
}

/* The run an audit walks: its id and, when its keyless graph adopted a key, the seq and hash
 * of the last event it had then (keyadopt.h), checked against their seal before the walk. */
typedef struct {
    const char *id;
    uint64_t keyless_until; /* 0: every event is hashed in the graph's mode */
    char keyless_head[65];
} audit_run;

/* Whether the stored event e (an audit_events entry) hashes to its stored hash: plain SHA-256
 * for an event the run had when its graph adopted a key, whose last one must also be the hash
 * the adoption sealed; the graph's mode for every other. */
static int audit_entry_holds(const json_t *e, const audit_run *run, bool *holds)
{
    const char *run_id = run->id;
    uint64_t seq = strtoull(audit_str(e, "stored_seq"), NULL, 10);
    bool before_key = seq >= 1 && seq <= run->keyless_until;
    evlog_fields f = {run_id,
                      audit_str(e, "stored_seq"),
                      audit_str(e, "ts"),
                      audit_str(e, "kind"),
                      audit_str(e, "outcome"),
                      audit_str(e, "codes"),
                      audit_str(e, "witness"),
                      audit_str(e, "detail"),
                      audit_str(e, "snapshot"),
                      audit_str(e, "evaluator"),
                      audit_str(e, "prev")};
    char hash[65];
    int rc = evlog_event_hash_as(&f, evlog_keyed() && !before_key, hash);
    *holds = rc == STATUS_OK && strcmp(hash, audit_str(e, "hash")) == 0 &&
             strcmp(audit_str(e, "run_id"), run_id) == 0 &&
             (seq != run->keyless_until || strcmp(hash, run->keyless_head) == 0);
    return rc;
}

/* Checks one place of the log. Returns 0 to go on, 1 when the first bad event was found, or a
 * negative STATUS_E* failure. head_seq may grow: an event appended during the audit (beyond the
 * head read at its start, sealed and chained) is accepted. An event that holds whose snapshot
 * names records that are gone or altered is the first bad event too.
 *
 * next is the entry of the following place when the page holds it (NULL otherwise): an event
 * that does not hold is an insertion when the event sealed for its place follows it. */
static int audit_place(store *st, const json_t *e, const json_t *next, const audit_run *run,
                       uint64_t *head_seq, audit_hashes *verified, json_t *records,
                       audit_result *out)
{
    json_t *atj = json_object_get(e, "at");
    if (!json_is_integer(atj) || json_integer_value(atj) < 1)
        return STATUS_EPROTO;
    uint64_t at = (uint64_t)json_integer_value(atj);
    if (json_is_true(json_object_get(e, "missing"))) {
        /* A run's events are 1..head without gaps: an empty place up to the head lost its
         * event; one beyond it (a place the scan past the head looked at) is just unused. */
        if (at > *head_seq)
            return 0;
        return audit_fail(out, at, "event %llu was removed: no event is stored at seq %llu",
                          (unsigned long long)at, (unsigned long long)at);
    }
    out->events++;
    const char *stored_seq = audit_str(e, "stored_seq");
    const char *stored = audit_str(e, "hash");
    const char *prev = audit_str(e, "prev");
    bool holds = false;
    int rc = audit_entry_holds(e, run, &holds);
    if (rc != STATUS_OK)
        return rc;
    const char *expected_prev = verified->n > 0 ? verified->items[verified->n - 1] : "";
    bool links = strcmp(prev, expected_prev) == 0;
    char want_seq[24];
    snprintf(want_seq, sizeof want_seq, "%llu", (unsigned long long)at);
    bool in_place = strcmp(stored_seq, want_seq) == 0;

    if (at > *head_seq) {
        if (holds && links && in_place && at == *head_seq + 1) {
            *head_seq = at; /* appended while the audit ran */
        } else {
            return audit_fail(out, at,
                              "event %llu was inserted: it lies beyond the run's last "
                              "event %llu",
                              (unsigned long long)at, (unsigned long long)*head_seq);
        }
    } else if (!holds) {
        bool next_holds = false;
        if (next != NULL && !json_is_true(json_object_get(next, "missing")) &&
            strcmp(audit_str(next, "stored_seq"), want_seq) == 0 &&
            (rc = audit_entry_holds(next, run, &next_holds)) != STATUS_OK)
            return rc;
        if (next_holds)
            return audit_fail(out, at,
                              "event %llu was inserted: the event sealed as %llu now lies "
                              "after it",
                              (unsigned long long)at, (unsigned long long)at);
        return audit_fail(out, at,
                          "event %llu was changed: its fields no longer hash to the hash "
                          "it was sealed with",
                          (unsigned long long)at);
    } else if (!in_place) {
        unsigned long long was = strtoull(stored_seq, NULL, 10);
        return was > at ? audit_fail(out, at,
                                     "event %llu was removed: event %llu was moved into "
                                     "its place",
                                     (unsigned long long)at, was)
                        : audit_fail(out, was + 1,
                                     "event %llu was inserted: event %llu was moved "
                                     "behind it",
                                     was + 1, was);
    } else if (!links) {
        uint64_t j = *prev ? audit_hashes_find(verified, prev) : 0;
        if (j > 0 && j + 1 < at)
            return audit_fail(out, j + 1,
                              "event %llu was inserted: event %llu was sealed right after "
                              "event %llu",
                              (unsigned long long)(j + 1), (unsigned long long)at,
                              (unsigned long long)j);
        return audit_fail(out, at,
                          "event %llu was removed: the event at seq %llu was sealed after "
                          "an event no longer in the log",
                          (unsigned long long)at, (unsigned long long)at);
    }
    /* The event holds; the records its snapshot names (a snapshot blob, a delivery's facts
     * record, lineage records) must still be there and hash to their names, or its decision
     * can no longer be replayed. A record shared by many events (one delivery facts record
     * for every delivery with the same facts) is read once per audit (records). */
    const char *snapshot = audit_str(e, "snapshot");
    char key[72];
    bool keyed = evlog_snapshot_record(snapshot, key);
    if (*snapshot != '\0' && !(keyed && json_object_get(records, key) != NULL)) {
        char *resolved = NULL, why[200];
        rc = evlog_snapshot_resolve(st, snapshot, &resolved, why, sizeof why);
        free(resolved);
        if (rc == STATUS_ENOTFOUND || rc == STATUS_EPROTO)
            return audit_fail(out, at, "event %llu's recorded facts cannot be read back: %s",
                              (unsigned long long)at, why);
        if (rc != STATUS_OK)
            return rc;
        if (keyed && json_object_set_new(records, key, json_true()) != 0)
            return STATUS_ENOMEM;
    }
    return audit_hashes_add(verified, stored) == STATUS_OK ? 0 : STATUS_ENOMEM;
}

/* Notes the commit an event records: an allowed delivery_decided or invoke_decided event is
 * written by the commit of its invocation and by nothing else, so commits (invocation ID ->
 * seq) holds one event each. A second one of an invocation is named: the invocation took
 * effect twice, its first delivery record having been removed behind the API. Returns 1 when
 * it named a problem, 0 otherwise, or STATUS_ENOMEM. */
static int audit_note_commit(const json_t *e, json_t *commits, audit_result *out)
{
    const char *kind = audit_str(e, "kind");
    if ((strcmp(kind, "delivery_decided") != 0 && strcmp(kind, "invoke_decided") != 0) ||
        strcmp(audit_str(e, "outcome"), "allow") != 0)
        return 0;
    json_t *detail = json_loads(audit_str(e, "detail"), 0, NULL);
    const char *inv = audit_str(detail, "invocation_id");
    uint64_t at = (uint64_t)json_integer_value(json_object_get(e, "at"));
    json_t *before = json_object_get(commits, inv); /* "" is never noted */
    int rc = 0;
    if (before != NULL)
        rc =
            audit_fail(out, at,
                       "invocation %s took effect twice: events %llu and %llu each record its "
                       "commit (its first delivery record was removed)",
                       inv, (unsigned long long)json_integer_value(before), (unsigned long long)at);
    else if (*inv != '\0' && json_object_set_new(commits, inv, json_integer((json_int_t)at)) != 0)
        rc = STATUS_ENOMEM;
    json_decref(detail);
    return rc;
}

/* The checks after the walk: the run's head, its receipt, its deliveries. */
static void audit_tail(const json_t *run, const json_t *deliveries, uint64_t head_seq,
                       const char *run_id, const audit_hashes *verified, audit_result *out)
{
    const char *head = audit_str(run, "head");
    const char *last = verified->n > 0 ? verified->items[verified->n - 1] : "";
    if (verified->n == head_seq && strcmp(head, last) != 0) {
        audit_fail(out, head_seq, "event %llu was changed: the run's head records another hash",
                   (unsigned long long)head_seq);
        return;
    }
    size_t i;
    json_t *d;
    json_array_foreach(deliveries, i, d)
    {
        json_t *s = json_object_get(d, "event_seq");
        uint64_t seq = json_is_integer(s) ? (uint64_t)json_integer_value(s) : 0;
        if (seq == 0) {
            audit_fail(out, 0,
                       "the delivery record of invocation %s was removed: the run lists the "
                       "invocation, but no record of it is stored",
                       audit_str(d, "invocation_id"));
            return;
        }
        if (seq > head_seq) {
            audit_fail(out, head_seq + 1,
                       "event %llu was removed: delivery %s was recorded by event %llu, "
                       "beyond the run's last event %llu",
                       (unsigned long long)head_seq + 1, audit_str(d, "invocation_id"),
                       (unsigned long long)seq, (unsigned long long)head_seq);
            return;
        }
    }
    const char *text = json_string_value(json_object_get(run, "receipt"));
    if (text == NULL || !evlog_keyed())
        return;
    json_t *rj = json_loads(text, 0, NULL);
    Charter__V1__Receipt r;
    char reason[160];
    bool parsed = rj != NULL && receipt_json_parse(rj, &r) == STATUS_OK;
    if (!parsed || strcmp(r.kind, "run") != 0 || strcmp(r.run_id, run_id) != 0 ||
        integrity_receipt_check(&r, reason, sizeof reason) != STATUS_OK) {
        audit_fail(out, head_seq, "the run's receipt was altered: it does not verify");
    } else if (r.last_seq > head_seq) {
        audit_fail(out, head_seq + 1,
                   "event %llu was removed: the run's receipt covers events up to %llu",
                   (unsigned long long)head_seq + 1, (unsigned long long)r.last_seq);
    } else if (r.last_seq >= 1 && r.last_seq <= verified->n &&
               strcmp(verified->items[r.last_seq - 1], r.last_event_hash) != 0) {
        audit_fail(out, r.last_seq,
                   "event %llu was changed: the run's receipt records another hash",
                   (unsigned long long)r.last_seq);
    }
    if (parsed)
        receipt_json_clear(&r);
    json_decref(rj);
}

/* Whether the lists a (a receipt's, n items) and b (a JSON array; {} for an empty one, as the
 * database writes it) hold the same strings in the same order. */
static bool audit_same_list(char *const *a, size_t n, const json_t *b)
{
    if (json_is_object(b) && json_object_size(b) == 0 && n == 0)
        return true;
    if (!json_is_array(b) || json_array_size(b) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i], audit_text(json_array_get(b, i))) != 0)
            return false;
    return true;
}

/* The receipt attached to one effect of the run (d: the delivery object as charter_get_receipt
 * returns it) against the effect: its MAC holds under the integrity key, it names this
 * effect (invocation, run, digest, destination, tool, grant chain) and, for a tool call's
 * effect, the lineage the commit kept, and the arguments stored still hash to the digest it
 * names. Returns 1 when it names a problem, else 0. */
static int audit_effect_receipt(const json_t *d, const char *run_id, uint64_t seq,
                                audit_result *out)
{
    const char *inv = audit_str(d, "invocation_id");
    const char *text = json_string_value(json_object_get(d, "receipt"));
    json_t *rj = text != NULL ? json_loads(text, 0, NULL) : NULL;
    if (text == NULL)
        return 0; /* not issued yet: Evidence/GetReceipt issues it from the effect */
    Charter__V1__Receipt r;
    char reason[160], actual[65];
    int found = 0;
    if (rj == NULL || receipt_json_parse(rj, &r) != STATUS_OK) {
        json_decref(rj);
        return audit_fail(out, seq, "invocation %s's receipt was altered: it cannot be read", inv);
    }
    bool invoke = strcmp(r.kind, "invoke") == 0;
    const char *content = audit_str(d, "content");
    if (integrity_receipt_check(&r, reason, sizeof reason) != STATUS_OK)
        found =
            audit_fail(out, seq, "invocation %s's receipt was altered: it does not verify", inv);
    else if (strcmp(r.invocation_id, inv) != 0 || strcmp(r.run_id, run_id) != 0 ||
             strcmp(r.payload_hash, audit_str(d, "payload_hash")) != 0 ||
             strcmp(r.recipient, audit_str(d, "recipient")) != 0 ||
             strcmp(r.tool, audit_str(d, "tool")) != 0 ||
             !audit_same_list(r.grant_chain, r.n_grant_chain, json_object_get(d, "grant_chain")) ||
             (invoke && !audit_same_list(r.lineage, r.n_lineage, json_object_get(d, "lineage"))))
        found = audit_fail(out, seq,
                           "invocation %s was changed: its receipt names another effect than "
                           "the one stored",
                           inv);
    else if (invoke && (digest_sha256_hex(content, strlen(content), actual) != 0 ||
                        strcmp(actual, r.payload_hash) != 0))
        found = audit_fail(out, seq,
                           "invocation %s's arguments were changed: they no longer hash to the "
                           "digest its receipt names",
                           inv);
    receipt_json_clear(&r);
    json_decref(rj);
    return found;
}

/* With an integrity key, each effect of the run that has a receipt (deliveries: the
 * charter_audit_events list) checked by audit_effect_receipt; the first problem is named.
 * Returns STATUS_OK (out updated) or the store's failure. */
static int audit_receipts(store *st, const char *run_id, const json_t *deliveries,
                          audit_result *out)
{
    size_t i;
    json_t *e;
    json_array_foreach(deliveries, i, e)
    {
        if (!evlog_keyed() || !out->intact)
            break;
        json_t *reply = NULL;
        json_t *s = json_object_get(e, "event_seq");
        int rc = q_get_receipt(st, run_id, audit_str(e, "invocation_id"), &reply);
        if (rc != STATUS_OK)
            return rc;
        (void)audit_effect_receipt(json_object_get(reply, "delivery"), run_id,
                                   json_is_integer(s) ? (uint64_t)json_integer_value(s) : 0, out);
        json_decref(reply);
    }
    return STATUS_OK;
}

/* With an integrity key, the first of seals (charter_audit_summaries' [[id, summary_hash,
 * seal],...], in creation order) whose seal is missing or does not verify is named. Returns 1
 * when one was named, else 0. */
static int audit_seals(const json_t *seals, audit_result *out)
{
    size_t i;
    json_t *e;
    json_array_foreach(seals, i, e)
    {
        const char *id = json_string_value(json_array_get(e, 0));
        const char *sh = json_string_value(json_array_get(e, 1));
        const char *seal = json_string_value(json_array_get(e, 2));
        int rc = summary_seal_check(id, sh, seal && *seal ? seal : NULL);
        if (rc == STATUS_OK || rc == STATUS_ENOKEY)
            continue;
        return audit_fail(out, 0, "artifact %s's lineage summary: %s", id ? id : "(unnamed)",
                          seal && *seal ? "its seal does not verify under the integrity key"
                                        : "it carries no seal of the integrity key: decisions "
                                          "on it are UNKNOWN");
    }
    return 0;
}

/* Each artifact of seals (charter_audit_summaries' [[id, ...],...]: every artifact of the run,
 * in creation order, when its summaries held) read back and its content hashed: the first whose
 * stored content no longer has the SHA-256 it was recorded with (its hash, which its summary
 * names) is named. No gate reads an input's content, but a host feeds it to a model. Returns
 * STATUS_OK (out updated) or the store's failure. */
static int audit_contents(store *st, const json_t *seals, audit_result *out)
{
    size_t i;
    json_t *e;
    json_array_foreach(seals, i, e)
    {
        const char *id = json_string_value(json_array_get(e, 0));
        json_t *a = NULL;
        int rc = id != NULL ? q_get_artifact(st, id, &a) : STATUS_EPROTO;
        if (rc != STATUS_OK)
            return rc;
        const json_t *content = json_object_get(a, "content");
        const char *hash = json_string_value(json_object_get(a, "hash"));
        char actual[65];
        bool same = json_is_string(content) && hash != NULL &&
                    digest_sha256_hex(json_string_value(content), json_string_length(content),
                                      actual) == 0 &&
                    strcmp(actual, hash) == 0;
        json_decref(a);
        if (!same) {
            audit_fail(out, 0,
                       "artifact %s's content no longer has the SHA-256 it was recorded with: it "
                       "was rewritten",
                       id);
            return STATUS_OK;
        }
    }
    return STATUS_OK;
}

/* The lineage summaries of the run's artifacts re-derived bottom-up from the raw graph
 * (charter_audit_summaries), and with an integrity key their seals: the first artifact (in
 * creation order) whose stored summary differs, is missing, or whose seal is missing or does
 * not verify is named. Decisions trust the summaries and read only the payload's own node, so
 * edits deeper in the graph are found here. Returns STATUS_OK (out updated) or the store's
 * failure. */
static int audit_summaries(store *st, const char *run_id, audit_result *out)
{
    json_t *reply = NULL;
    int rc = q_audit_summaries(st, run_id, "1", &reply);
    if (rc != STATUS_OK)
        return rc;
    const char *bad = json_string_value(json_object_get(reply, "first_bad"));
    if (audit_seals(json_object_get(reply, "seals"), out) == 0 && bad != NULL) {
        const char *problem = json_string_value(json_object_get(reply, "problem"));
        audit_fail(out, 0, "artifact %s's lineage summary: %s", bad,
                   problem ? problem : "it differs from the graph");
    }
    if (out->intact)
        rc = audit_contents(st, json_object_get(reply, "seals"), out);
    json_decref(reply);
    return rc;
}

/* The nodes the run's workflow declares (its resources, recipients, actors and grants: the
 * seed charterd writes when the workflow is applied, workflow_seed_json) against the graph
 * (charter_seed_clash, a missing node clashing too). None of them changes through the API
 * once applied (a grant's revocation is state, not structure), and a delivery decided on the
 * grant structure charterd keeps does not read a grant's edges again, so an edit of them
 * behind the API is found here: the first node that differs or is missing is named. A run
 * that follows no workflow has nothing to compare. Returns STATUS_OK (out updated) or a
 * failure. */
static int audit_workflow_nodes(store *st, const char *run_id, audit_result *out)
{
    json_t *run = NULL, *reply = NULL, *seed = NULL;
    char *text = NULL;
    const workflow *wf = NULL;
    int rc = q_run_workflow(st, run_id, &run);
    const char *version = json_string_value(json_object_get(run, "workflow"));
    if (rc != STATUS_OK || version == NULL || *version == '\0')
        goto out;
    rc = registry_held(st, version, &wf);
    if (rc == STATUS_ENOTFOUND || rc == STATUS_EINVAL || rc == STATUS_EPROTO) {
        /* The run pins a version no API call removes or rewrites. */
        audit_fail(out, 0, "workflow %.12s, which the run follows, cannot be read back: %.160s",
                   version, rc == STATUS_EPROTO ? store_last_error(st) : "it is not in the graph");
        rc = STATUS_OK;
        goto out;
    }
    if (rc != STATUS_OK)
        goto out;
    if ((seed = workflow_seed_json(wf)) == NULL ||
        (text = json_dumps(seed, JSON_COMPACT)) == NULL) {
        rc = STATUS_ENOMEM;
        goto out;
    }
    if ((rc = q_seed_clash(st, text, "1", &reply)) != STATUS_OK ||
        json_object_get(reply, "clash") == NULL)
        goto out;
    const char *node = audit_str(reply, "node"), *id = audit_str(reply, "id");
    if (json_is_true(json_object_get(reply, "missing")))
        audit_fail(out, 0,
                   "%s %.128s: it is not in the graph, but workflow %.64s %.12s declares it", node,
                   id, wf->name, wf->version);
    else
        audit_fail(out, 0, "%s %.128s: its %s differs from workflow %.64s %.12s", node, id,
                   audit_str(reply, "differs"), wf->name, wf->version);
out:
    json_decref(run);
    json_decref(reply);
    json_decref(seed);
    free(text);
    return rc;
}

/* What the first page says of the run as a whole: its head seq and, when its keyless graph
 * adopted a key, its mark, which must verify under the key. Returns 0, or 1 when the mark was
 * altered (the first bad event is the last one it covers: nothing before it can be trusted). */
static int audit_first_page(const json_t *page, audit_run *run, uint64_t *head_seq,
                            audit_result *out)
{
    const json_t *r = json_object_get(page, "run");
    const json_t *s = json_object_get(r, "seq");
    const json_t *mark = json_object_get(r, "keyless");
    *head_seq = json_is_integer(s) ? (uint64_t)json_integer_value(s) : 0;
    if (keyadopt_check_mark(run->id, mark, &run->keyless_until, run->keyless_head) == STATUS_OK)
        return 0;
    json_int_t until = json_integer_value(json_object_get(mark, "until"));
    return audit_fail(out, until > 0 ? (uint64_t)until : 1,
                      "the run's mark of the events it had when its graph adopted the integrity "
                      "key was altered: its seal does not verify under the key");
}

/* What is checked once every event holds (first: the first page of the walk), each while
 * nothing was found: the run's head, deliveries and receipt against the chain (audit_tail),
 * the effects' receipts, the lineage summaries and contents, the workflow's nodes. Returns
 * STATUS_OK (out updated) or the store's failure. */
static int audit_beyond_events(store *st, const char *run_id, const json_t *first,
                               uint64_t head_seq, const audit_hashes *verified, audit_result *out)
{
    const json_t *deliveries = json_object_get(first, "deliveries");
    audit_tail(json_object_get(first, "run"), deliveries, head_seq, run_id, verified, out);
    int rc = STATUS_OK;
    if (out->intact)
        rc = audit_receipts(st, run_id, deliveries, out);
    if (rc == STATUS_OK && out->intact)
        rc = audit_summaries(st, run_id, out);
    if (rc == STATUS_OK && out->intact)
        rc = audit_workflow_nodes(st, run_id, out);
    return rc;
}

int audit_chain(store *st, const char *run_id, audit_result *out)
{
    memset(out, 0, sizeof *out);
    out->intact = true;
    out->keyed = evlog_keyed();
    audit_hashes verified = {NULL, 0, 0};
    json_t *records = json_object(); /* the snapshot records verified so far, by key */
    json_t *commits = json_object(); /* invocation ID -> the seq of the event of its commit */
    if (records == NULL || commits == NULL) {
        json_decref(records);
        json_decref(commits);
        return STATUS_ENOMEM;
    }
    json_t *first = NULL;
    audit_run run = {run_id, 0, ""};
    uint64_t head_seq = 0, after = 0, upper = 0;
    int rc = STATUS_OK, found = 0;
    do {
        char a[24];
        snprintf(a, sizeof a, "%llu", (unsigned long long)after);
        json_t *page = NULL;
        if ((rc = q_audit_events(st, run_id, a, AUDIT_PAGE, &page)) != STATUS_OK)
            break;
        json_t *u = json_object_get(page, "upper");
        json_t *events = json_object_get(page, "events");
        if (!json_is_integer(u) || json_integer_value(u) < 0) {
            json_decref(page);
            rc = STATUS_EPROTO;
            break;
        }
        if (first == NULL) {
            first = page;
            if ((found = audit_first_page(page, &run, &head_seq, out)) != 0)
                break;
        }
        upper = (uint64_t)json_integer_value(u);
        size_t i, n = 0;
        json_t *e;
        json_array_foreach(events, i, e)
        {
            n++;
            after = (uint64_t)json_integer_value(json_object_get(e, "at"));
            found = audit_place(st, e, json_array_get(events, i + 1), &run, &head_seq, &verified,
                                records, out);
            if (found == 0) /* a missing place has no kind: nothing to note */
                found = audit_note_commit(e, commits, out);
            if (found != 0)
                break;
        }
        if (page != first)
            json_decref(page);
        if (found < 0) {
            rc = found;
            break;
        }
        if (n == 0)
            break;
    } while (found == 0 && after < upper);
    out->keyless_until = run.keyless_until;
    if (rc == STATUS_OK && found == 0)
        rc = audit_beyond_events(st, run_id, first, head_seq, &verified, out);
    json_decref(first);
    free(verified.items);
    json_decref(records);
    json_decref(commits);
    if (rc != STATUS_OK)
        memset(out, 0, sizeof *out);
    return rc;
}
