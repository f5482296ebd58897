/*
 * archive_replay.c - replay from an archive file (archive_replay.h). The file is read once: the
 * event asked for and every record kept (blobs by SHA-256, lineage records by SHA-1) are held
 * while the snapshot is resolved from them.
 */
#include "evidence/archive_replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "evidence/archive.h"
#include "evidence/snapshot_resolve.h"

typedef struct {
    char seq[24];     /* the event wanted, in decimal; "" for every decision event */
    json_t *event;    /* found (owned) */
    json_t *events;   /* with seq "": the decision events, in seq order (owned) */
    json_t *blobs;    /* {"<sha256>": "<text>"} */
    json_t *lineage;  /* {"<sha1>": "<text>"} */
    char run_id[129]; /* the manifest's */
} replay_state;

/* Keeps an event: the one wanted, or with seq "" every decision (an event with an outcome). */
static int keep_event(replay_state *r, const json_t *body)
{
    const char *seq = json_string_value(json_object_get(body, "seq"));
    const char *outcome = json_string_value(json_object_get(body, "outcome"));
    if (r->seq[0] == '\0')
        return outcome == NULL || *outcome == '\0' ||
                       json_array_append_new(r->events, json_deep_copy(body)) == 0
                   ? 0
                   : STATUS_ENOMEM;
    if (seq != NULL && strcmp(seq, r->seq) == 0 && r->event == NULL &&
        (r->event = json_deep_copy(body)) == NULL)
        return STATUS_ENOMEM;
    return 0;
}

static int replay_visit(void *ctx, uint64_t line, const char *kind, const json_t *body)
{
    (void)line;
    replay_state *r = ctx;
    if (strcmp(kind, "manifest") == 0) {
        const char *id = json_string_value(json_object_get(body, "run_id"));
        snprintf(r->run_id, sizeof r->run_id, "%s", id ? id : "");
    } else if (strcmp(kind, "event") == 0) {
        return keep_event(r, body);
    } else if (strcmp(kind, "record") == 0) {
        const char *k = json_string_value(json_object_get(body, "kind"));
        const char *sha = json_string_value(json_object_get(body, "sha"));
        json_t *text = json_object_get(body, "text");
        json_t *into = k && strcmp(k, "blob") == 0      ? r->blobs
                       : k && strcmp(k, "lineage") == 0 ? r->lineage
                                                        : NULL;
        if (into != NULL && sha != NULL && json_is_string(text) &&
            json_object_set(into, sha, text) != 0)
            return STATUS_ENOMEM;
    }
    return 0;
}

static int archived_blob(void *ctx, const char *sha, char **text)
{
    const replay_state *r = ctx;
    const char *t = json_string_value(json_object_get(r->blobs, sha));
    *text = t != NULL ? strdup(t) : NULL;
    return t == NULL ? STATUS_ENOTFOUND : *text != NULL ? STATUS_OK : STATUS_ENOMEM;
}

static int archived_lineage(void *ctx, const char *sha, json_t **records, char *why, size_t n)
{
    (void)sha;
    (void)why;
    (void)n;
    const replay_state *r = ctx;
    *records = json_incref(r->lineage); /* the walk reads the records it names among them */
    return STATUS_OK;
}

/* The snapshot of event (one of r's) resolved from the archive's records, in place. */
static int resolve_event(replay_state *r, json_t *event, char *why, size_t n)
{
    snapshot_source src = {archived_blob, archived_lineage, r};
    char *facts = NULL;
    int rc = snapshot_resolve(&src, json_string_value(json_object_get(event, "snapshot")), &facts,
                              why, n);
    if (rc == STATUS_OK && json_object_set_new(event, "snapshot", json_string(facts)) != 0)
        rc = STATUS_ENOMEM;
    free(facts);
    if (rc == STATUS_ENOTFOUND)
        rc = STATUS_EPROTO; /* the event is there; a record it names is not */
    return rc;
}

/* Reads the archive at path into r (its seq set), whole or not at all. */
static int read_archive(const char *path, replay_state *r, char *why, size_t n)
{
    archive_check check;
    int rc = r->blobs && r->lineage && r->events ? archive_read(path, replay_visit, r, &check)
                                                 : STATUS_ENOMEM;
    if (rc == STATUS_OK && !check.intact) {
        snprintf(why, n, "the archive does not read back whole: %s", check.problem);
        rc = STATUS_EPROTO;
    }
    return rc;
}

static void replay_state_free(replay_state *r)
{
    json_decref(r->event);
    json_decref(r->events);
    json_decref(r->blobs);
    json_decref(r->lineage);
}

int archive_replay(const char *path, const char *evaluator, uint64_t seq,
                   archive_replay_result *out, char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    why[0] = '\0';
    replay_state r = {.blobs = json_object(), .lineage = json_object(), .events = json_array()};
    snprintf(r.seq, sizeof r.seq, "%llu", (unsigned long long)seq);
    int rc = read_archive(path, &r, why, n);
    if (rc == STATUS_OK && r.event == NULL) {
        snprintf(why, n, "the archive holds no event %s", r.seq);
        rc = STATUS_ENOTFOUND;
    }
    if (rc == STATUS_OK)
        rc = resolve_event(&r, r.event, why, n);
    /* Without charterd its default evaluator is unknown (""): a snapshot that names no
     * workflow cannot be checked against it, and replay says so (evaluator.h). */
    if (rc == STATUS_OK)
        rc = evaluator_replay(evaluator != NULL ? evaluator : "", r.event, &out->res, why, n);
    if (rc == STATUS_OK) {
        out->event = r.event;
        r.event = NULL;
    }
    replay_state_free(&r);
    return rc;
}

int archive_decisions(const char *path, archive_decision_visit visit, void *ctx, char *why,
                      size_t n)
{
    why[0] = '\0';
    replay_state r = {.blobs = json_object(), .lineage = json_object(), .events = json_array()};
    int rc = read_archive(path, &r, why, n);
    for (size_t i = 0; rc == STATUS_OK && i < json_array_size(r.events); i++) {
        json_t *e = json_array_get(r.events, i);
        if ((rc = resolve_event(&r, e, why, n)) != STATUS_OK) {
            char named[200];
            snprintf(named, sizeof named, "%s", why);
            snprintf(why, n, "event %s: %s", json_string_value(json_object_get(e, "seq")), named);
        } else {
            rc = visit(ctx, r.run_id, e);
        }
    }
    replay_state_free(&r);
    return rc;
}

void archive_replay_result_free(archive_replay_result *r)
{
    json_decref(r->event);
    evaluator_replay_result_free(&r->res);
    memset(r, 0, sizeof *r);
}
