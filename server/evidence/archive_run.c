/*
 * archive_run.c - an ended run from the graph to its archive file and out of the graph
 * (archive_run.h). Pages of 500 items keep each call, and what this process holds, bounded by
 * the page rather than by the run; only the names of the records already written and the
 * context of each allowed delivery grow with the run.
 */
#include "evidence/archive_run.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/status.h"
#include "db/store.h"
#include "evidence/archive.h"
#include "evidence/integrity.h"
#include "policy/evaluator.h"

#define ARCHIVE_PAGE 500
#define ARCHIVE_PAGE_TEXT "500"
#define ARCHIVE_NAMES_PER_CALL 100

void archive_run_summary_free(archive_run_summary *s)
{
    json_decref(s->digests);
    json_decref(s->context_ids);
    memset(s, 0, sizeof *s);
}

typedef struct {
    archive_writer *w;
    store *st;
    const char *run_id;
    json_t *names;    /* {"<sha>": true once asked for, false while pending} */
    json_t *contexts; /* {"<seq>": "<context>"} of each allowed delivery_decided event */
    archive_run_summary *out;
    char *why;
    size_t n;
} export_state;

static int fail(export_state *x, int rc, const char *what)
{
    snprintf(x->why, x->n, "%s (%s)", what, store_last_error(x->st));
    return rc;
}

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

/* Adds to names each record name text holds: a quoted run of 40 hex digits (a lineage record's
 * SHA-1) anywhere, or of 64 after "facts": or "blob": (a facts record or a large snapshot). */
static int scan_names(json_t *names, const char *text)
{
    for (const char *p = strchr(text, '"'); p != NULL; p = strchr(p + 1, '"')) {
        size_t k = 0;
        while (isxdigit((unsigned char)p[1 + k]) && !isupper((unsigned char)p[1 + k]))
            k++;
        if (p[1 + k] != '"' || (k != 40 && k != 64))
            continue;
        if (k == 64 && !((p - text >= 8 && strncmp(p - 8, "\"facts\":", 8) == 0) ||
                         (p - text >= 7 && strncmp(p - 7, "\"blob\":", 7) == 0)))
            continue;
        char sha[65];
        memcpy(sha, p + 1, k);
        sha[k] = '\0';
        if (json_object_get(names, sha) == NULL && json_object_set_new(names, sha, json_false()))
            return STATUS_ENOMEM;
        p += k + 1;
    }
    return STATUS_OK;
}

static json_t *manifest_of(const char *graph, const char *run_id, const json_t *run)
{
    int versions[16];
    size_t nv = evaluator_versions(versions, 16);
    json_t *vs = json_array();
    for (size_t i = 0; vs && i < nv; i++)
        json_array_append_new(vs, json_integer(versions[i]));
    char check[65] = "";
    bool keyed = integrity_keyed();
    if (keyed && integrity_key_check(check) != 0)
        check[0] = '\0';
    return json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:i, s:o, s:s, s:O}", "format",
                     ARCHIVE_FORMAT, "graph", graph, "run_id", run_id, "written_at",
                     (json_int_t)time(NULL), "integrity", keyed ? "keyed" : "keyless", "key_check",
                     check, "signing_key_id", integrity_key_id(), "signing_public_key",
                     integrity_public_pem(), "library_version", STORE_LIBRARY_VERSION,
                     "evaluator_version", EVALUATOR_VERSION, "evaluator_versions", vs, "ended_at",
                     str(run, "ended_at"), "counts", json_object_get(run, "counts"));
}

/* What one event adds besides its record: the names its snapshot holds and, for an allowed
 * delivery, its context (the send's digest needs it). */
static int note_event(export_state *x, const json_t *ev)
{
    x->out->events++;
    snprintf(x->out->head, sizeof x->out->head, "%s", str(ev, "hash"));
    if (scan_names(x->names, str(ev, "snapshot")) != STATUS_OK)
        return STATUS_ENOMEM;
    if (!commits_delivery(str(ev, "kind")) || strcmp(str(ev, "outcome"), "allow"))
        return STATUS_OK;
    json_t *detail = json_loads(str(ev, "detail"), 0, NULL);
    int rc = json_object_set_new(x->contexts, str(ev, "seq"), json_string(str(detail, "context")))
                 ? STATUS_ENOMEM
                 : STATUS_OK;
    json_decref(detail);
    return rc;
}

static int note_delivery(export_state *x, const json_t *d)
{
    char digest[65];
    const char *ctx = str(x->contexts, str(d, "event_seq"));
    x->out->deliveries++;
    if (archive_send_digest(ctx, str(d, "payload_id"), str(d, "recipient"), str(d, "tool"),
                            digest) != STATUS_OK ||
        json_object_set_new(x->out->digests, str(d, "invocation_id"), json_string(digest)))
        return STATUS_ENOMEM;
    return STATUS_OK;
}

static int note_item(export_state *x, const char *kind, const json_t *item)
{
    if (strcmp(kind, "event") == 0)
        return note_event(x, item);
    if (strcmp(kind, "delivery") == 0)
        return note_delivery(x, item);
    if (strcmp(kind, "artifact") == 0) {
        x->out->artifacts++;
        const char *lineage = str(json_object_get(item, "hash"), "lineage");
        if (*lineage && json_object_get(x->names, lineage) == NULL &&
            json_object_set_new(x->names, lineage, json_false()))
            return STATUS_ENOMEM;
        return STATUS_OK;
    }
    if (strcmp(kind, "context") == 0) {
        x->out->contexts++;
        if (json_array_append_new(x->out->context_ids, json_string(str(item, "id"))) != 0)
            return STATUS_ENOMEM;
    } else {
        x->out->approvals++;
    }
    return STATUS_OK;
}

/* Every item of one part, page by page, each appended as a record of kind. */
static int write_part(export_state *x, const char *part, const char *kind)
{
    for (uint64_t cursor = 0;;) {
        char at[24];
        snprintf(at, sizeof at, "%llu", (unsigned long long)cursor);
        json_t *reply = NULL;
        int rc = q_run_export(x->st, x->run_id, part, at, ARCHIVE_PAGE_TEXT, 0, NULL, &reply);
        if (rc != STATUS_OK)
            return fail(x, rc, "the run could not be read");
        size_t i;
        json_t *item;
        json_array_foreach(json_object_get(reply, "items"), i, item)
        {
            if (rc == STATUS_OK)
                rc = archive_append(x->w, kind, item);
            if (rc == STATUS_OK)
                rc = note_item(x, kind, item);
        }
        bool done = json_is_true(json_object_get(reply, "done")) ||
                    json_array_size(json_object_get(reply, "items")) == 0;
        cursor += json_array_size(json_object_get(reply, "items"));
        json_decref(reply);
        if (rc != STATUS_OK)
            return fail(x, rc, "the archive could not be written");
        if (done)
            return STATUS_OK;
    }
}

/* Every record a written item names, and the records those name, until none is pending. */
static int write_records(export_state *x)
{
    for (;;) {
        const char *batch[ARCHIVE_NAMES_PER_CALL];
        size_t nb = 0;
        const char *sha;
        json_t *v;
        json_object_foreach(x->names, sha, v)
        {
            if (nb < ARCHIVE_NAMES_PER_CALL && json_is_false(v))
                batch[nb++] = sha;
        }
        if (nb == 0)
            return STATUS_OK;
        json_t *reply = NULL;
        int rc = q_run_export(x->st, x->run_id, "records", "0", "1", nb, batch, &reply);
        for (size_t i = 0; i < nb; i++)
            json_object_set_new(x->names, batch[i], json_true());
        if (rc != STATUS_OK)
            return fail(x, rc, "the run's records could not be read");
        size_t i;
        json_t *rec;
        json_array_foreach(json_object_get(reply, "items"), i, rec)
        {
            if (rc == STATUS_OK)
                rc = archive_append(x->w, "record", rec);
            if (rc == STATUS_OK)
                rc = scan_names(x->names, str(rec, "text"));
            x->out->records++;
        }
        json_decref(reply);
        if (rc != STATUS_OK)
            return fail(x, rc, "the archive could not be written");
    }
}

static const char *const PARTS[][2] = {
    {"contexts", "context"},    {"artifacts", "artifact"}, {"events", "event"},
    {"deliveries", "delivery"}, {"approvals", "approval"},
};

/* The run as it stands (charter_run_export "run"), checked to have ended. */
static int read_run(export_state *x, json_t **run)
{
    int rc = q_run_export(x->st, x->run_id, "run", "0", "1", 0, NULL, run);
    if (rc != STATUS_OK)
        return fail(x, rc, "the run could not be read");
    if (!json_is_true(json_object_get(*run, "ended"))) {
        snprintf(x->why, x->n, "run %s has not ended", x->run_id);
        return STATUS_ENOTENDED;
    }
    return STATUS_OK;
}

int archive_run_write(store *st, const char *run_id, const char *path, archive_run_summary *out,
                      char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    export_state x = {NULL, st, run_id, json_object(), json_object(), out, why, n};
    out->digests = json_object();
    out->context_ids = json_array();
    json_t *run = NULL, *manifest = NULL;
    int rc = x.names && x.contexts && out->digests && out->context_ids ? read_run(&x, &run)
                                                                       : STATUS_ENOMEM;
    if (rc == STATUS_OK) {
        snprintf(out->ended_at, sizeof out->ended_at, "%s", str(run, "ended_at"));
        manifest = manifest_of(store_graph(st), run_id, run);
        rc = manifest ? archive_create(path, manifest, &x.w) : STATUS_ENOMEM;
        if (rc != STATUS_OK)
            snprintf(why, n, "the archive %s could not be created", path);
    }
    if (rc == STATUS_OK && archive_append(x.w, "run", json_object_get(run, "run")) != STATUS_OK)
        rc = fail(&x, STATUS_EUNAVAILABLE, "the archive could not be written");
    for (size_t i = 0; rc == STATUS_OK && i < sizeof PARTS / sizeof PARTS[0]; i++)
        rc = write_part(&x, PARTS[i][0], PARTS[i][1]);
    if (rc == STATUS_OK)
        rc = write_records(&x);
    /* The run must not have moved while it was read: its head is still the last event's. */
    const char *head = str(json_object_get(run, "run"), "head");
    if (rc == STATUS_OK && strcmp(head, out->head) != 0) {
        snprintf(why, n, "run %s changed while it was archived", run_id);
        rc = STATUS_EREFUSED;
    }
    if (rc == STATUS_OK) {
        rc = archive_finish(x.w, &out->bytes);
        x.w = NULL;
        if (rc != STATUS_OK)
            snprintf(why, n, "the archive %s could not be flushed to disk", path);
    }
    archive_abandon(x.w);
    json_decref(manifest);
    json_decref(run);
    json_decref(x.names);
    json_decref(x.contexts);
    return rc;
}

/* --- reading back ------------------------------------------------------------------------- */

typedef struct {
    const char *run_id;
    archive_run_summary got;
    json_t *contexts; /* {"<seq>": "<context>"}, as note_event keeps them */
    char prev[65];    /* the hash of the last event read */
    char *why;
    size_t n;
    bool bad;
} verify_state;

static int verify_bad(verify_state *v, uint64_t line, const char *what, const char *name)
{
    snprintf(v->why, v->n, "record %llu: %s%s", (unsigned long long)line, what, name);
    v->bad = true;
    return 1;
}

static int verify_event(verify_state *v, uint64_t line, const json_t *ev)
{
    v->got.events++;
    if (strcmp(str(ev, "prev"), v->prev) != 0)
        return verify_bad(v, line, "the event does not link to the one before it: seq ",
                          str(ev, "seq"));
    snprintf(v->prev, sizeof v->prev, "%s", str(ev, "hash"));
    snprintf(v->got.head, sizeof v->got.head, "%s", v->prev);
    if (commits_delivery(str(ev, "kind")) && strcmp(str(ev, "outcome"), "allow") == 0) {
        json_t *detail = json_loads(str(ev, "detail"), 0, NULL);
        int rc =
            json_object_set_new(v->contexts, str(ev, "seq"), json_string(str(detail, "context")));
        json_decref(detail);
        if (rc != 0)
            return STATUS_ENOMEM;
    }
    return 0;
}

static int verify_visit(void *ctx, uint64_t line, const char *kind, const json_t *body)
{
    verify_state *v = ctx;
    if (strcmp(kind, "manifest") == 0)
        return strcmp(str(body, "run_id"), v->run_id) == 0 &&
                       strcmp(str(body, "format"), ARCHIVE_FORMAT) == 0
                   ? 0
                   : verify_bad(v, line, "the manifest is not of run ", v->run_id);
    if (strcmp(kind, "event") == 0)
        return verify_event(v, line, body);
    if (strcmp(kind, "delivery") == 0) {
        char digest[65];
        v->got.deliveries++;
        if (archive_send_digest(str(v->contexts, str(body, "event_seq")), str(body, "payload_id"),
                                str(body, "recipient"), str(body, "tool"), digest) != STATUS_OK ||
            json_object_set_new(v->got.digests, str(body, "invocation_id"), json_string(digest)))
            return STATUS_ENOMEM;
    } else if (strcmp(kind, "context") == 0) {
        v->got.contexts++;
    } else if (strcmp(kind, "artifact") == 0) {
        v->got.artifacts++;
    } else if (strcmp(kind, "approval") == 0) {
        v->got.approvals++;
    } else if (strcmp(kind, "record") == 0) {
        v->got.records++;
    }
    return 0;
}

/* The first count that differs between what was written and what was read, or NULL. */
static const char *count_differs(const archive_run_summary *a, const archive_run_summary *b)
{
    if (a->events != b->events)
        return "events";
    if (a->contexts != b->contexts)
        return "contexts";
    if (a->artifacts != b->artifacts)
        return "artifacts";
    if (a->deliveries != b->deliveries)
        return "deliveries";
    if (a->approvals != b->approvals)
        return "approvals";
    return a->records != b->records ? "records" : NULL;
}

int archive_run_verify(const char *path, const char *run_id, const archive_run_summary *expect,
                       char *why, size_t n)
{
    verify_state v = {.run_id = run_id, .contexts = json_object(), .why = why, .n = n};
    v.got.digests = json_object();
    archive_check check;
    int rc =
        v.contexts && v.got.digests ? archive_read(path, verify_visit, &v, &check) : STATUS_ENOMEM;
    const char *differs = NULL;
    if (rc == 1 || (rc == STATUS_OK && v.bad)) {
        rc = STATUS_EPROTO;
    } else if (rc != STATUS_OK) {
        snprintf(why, n, "the archive %s could not be read back", path);
    } else if (!check.intact) {
        snprintf(why, n, "%s", check.problem);
        rc = STATUS_EPROTO;
    } else if ((differs = count_differs(&v.got, expect)) != NULL) {
        snprintf(why, n, "the archive holds other %s than were written", differs);
        rc = STATUS_EPROTO;
    } else if (strcmp(v.got.head, expect->head) != 0) {
        snprintf(why, n, "the archive's last event is not the run's head");
        rc = STATUS_EPROTO;
    } else if (!json_equal(v.got.digests, expect->digests)) {
        snprintf(why, n, "the archive's deliveries are not the ones written");
        rc = STATUS_EPROTO;
    }
    json_decref(v.contexts);
    archive_run_summary_free(&v.got);
    return rc;
}

int archive_run_remove(store *st, const char *run_id, const char *name,
                       const archive_run_summary *written, long long window_s)
{
    char *digests = json_dumps(written->digests, JSON_COMPACT | JSON_SORT_KEYS);
    if (digests == NULL)
        return STATUS_ENOMEM;
    char window[24];
    snprintf(window, sizeof window, "%lld", window_s > 0 ? window_s : 0);
    json_t *reply = NULL;
    int rc = q_remove_run(st, run_id, written->head, name, digests, window, &reply);
    json_decref(reply);
    free(digests);
    return rc;
}
