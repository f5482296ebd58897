/*
 * archive_lookup.c - an invocation found in an archived run's file (archive_lookup.h).
 *
 * Two reads of the one file: the first checks it whole and keeps the context's record and the
 * invocation's delivery (records are written contexts, artifacts, events, deliveries, so the
 * delivery comes after the event that committed it); the second, only when the delivery was
 * found, stops at that event to read its context. What is kept does not grow with the run.
 */
#include "evidence/archive_lookup.h"

#include <stdio.h>
#include <string.h>

#include "core/invariant.h"
#include "core/status.h"
#include "db/store.h"
#include "evidence/archive.h"
#include "evidence/archive_index.h"

void archive_invocation_free(archive_invocation *a)
{
    json_decref(a->owners);
    json_decref(a->delivery);
    memset(a, 0, sizeof *a);
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

typedef struct {
    const char *context_id, *invocation_id;
    archive_invocation *out;
    const char *seq; /* the second read: the seq of the delivery's event */
    bool other_run;  /* the manifest names another run */
} lookup_state;

/* The first read: the manifest's run, the context's record, the invocation's delivery. */
static int keep_records(void *ctx, uint64_t n, const char *kind, const json_t *body)
{
    (void)n;
    lookup_state *l = ctx;
    if (strcmp(kind, "manifest") == 0 && strcmp(str(body, "run_id"), l->out->run_id) != 0) {
        l->other_run = true;
        return 1;
    }
    if (strcmp(kind, "context") == 0 && strcmp(str(body, "id"), l->context_id) == 0) {
        json_decref(l->out->owners);
        l->out->owners = json_deep_copy(json_object_get(body, "owned_by"));
        l->out->has_context = true;
    } else if (strcmp(kind, "delivery") == 0 &&
               strcmp(str(body, "invocation_id"), l->invocation_id) == 0) {
        json_decref(l->out->delivery);
        if ((l->out->delivery = json_deep_copy(body)) == NULL)
            return STATUS_ENOMEM;
    }
    return 0;
}

/* The second read: the context the delivery's event names, when it is an allowed commit (as
 * archive_run.c takes it for the send's digest). Stops the read there. */
static int event_context(void *ctx, uint64_t n, const char *kind, const json_t *body)
{
    (void)n;
    lookup_state *l = ctx;
    if (strcmp(kind, "event") != 0 || strcmp(str(body, "seq"), l->seq) != 0)
        return 0;
    const char *k = str(body, "kind");
    bool commit = strcmp(k, "delivery_decided") == 0 || strcmp(k, "invoke_decided") == 0;
    if (commit && strcmp(str(body, "outcome"), "allow") == 0) {
        json_t *detail = json_loads(str(body, "detail"), 0, NULL);
        snprintf(l->out->context, sizeof l->out->context, "%s", str(detail, "context"));
        json_decref(detail);
    }
    return 1;
}

/* Both reads of path. Returns as archive_find_invocation. */
static int read_archive(const char *path, lookup_state *l, char *why, size_t n)
{
    archive_check check;
    int rc = archive_read(path, keep_records, l, &check);
    if (rc == 1 && l->other_run) {
        snprintf(why, n, "the archive %s is not of run %s", l->out->file, l->out->run_id);
        return STATUS_EPROTO;
    }
    if (rc == STATUS_OK && !check.intact) {
        snprintf(why, n, "the archive %s does not read back whole: %s", l->out->file,
                 check.problem);
        return STATUS_EPROTO;
    }
    if (rc != STATUS_OK)
        return rc == STATUS_ENOTFOUND ? STATUS_EPROTO : rc;
    if (l->out->delivery == NULL)
        return STATUS_OK;
    l->seq = str(l->out->delivery, "event_seq");
    rc = archive_read(path, event_context, l, &check);
    if (rc != STATUS_OK && rc != 1)
        return rc;
    const json_t *d = l->out->delivery;
    return archive_send_digest(l->out->context, str(d, "payload_id"), str(d, "recipient"),
                               str(d, "tool"), l->out->digest);
}

int archive_find_invocation(const char *graph_dir, const char *context_id, const char *run_id,
                            const char *invocation_id, archive_invocation *out, char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    int rc = archive_index_find(graph_dir, context_id, run_id, out->file, sizeof out->file,
                                out->run_id, sizeof out->run_id);
    if (rc == STATUS_EPROTO)
        snprintf(why, n, "the archive %s of run %s is missing or not the one its index names",
                 out->file, out->run_id);
    if (rc == STATUS_EDENIED) {
        snprintf(why, n,
                 "the index names %s for run %s, which is not its archive in the graph's "
                 "folder (not read)",
                 out->file, out->run_id);
        rc = STATUS_EPROTO;
    }
    if (rc != STATUS_OK)
        return rc;
    char path[1536];
    snprintf(path, sizeof path, "%s/%s", graph_dir, out->file);
    lookup_state l = {.context_id = context_id != NULL ? context_id : "",
                      .invocation_id = invocation_id,
                      .out = out};
    return read_archive(path, &l, why, n);
}

int archive_find_run(const char *archive_dir, const char *graph, const char *run_id, char *path,
                     size_t np, char *name, size_t nn, char *why, size_t nw)
{
    char graph_dir[1024], file[512] = "", run[129] = "";
    why[0] = '\0';
    snprintf(graph_dir, sizeof graph_dir, "%s/%s", archive_dir, graph);
    if (run_id == NULL || *run_id == '\0')
        return STATUS_ENOTFOUND;
    int rc = archive_index_find(graph_dir, NULL, run_id, file, sizeof file, run, sizeof run);
    snprintf(name, nn, "%s/%s", graph, file);
    snprintf(path, np, "%s/%s", graph_dir, file);
    /* archive_index_find matched the line by its run: the file is the run's own. */
    INVARIANT(rc != STATUS_OK || strcmp(run, run_id) == 0);
    if (rc == STATUS_EPROTO)
        snprintf(why, nw, "its archive %s is missing or not the one the index names", name);
    else if (rc == STATUS_EDENIED)
        snprintf(why, nw,
                 "the archive folder's index names %s, which is not its archive in the graph's "
                 "folder (not read)",
                 name);
    return rc;
}

int archive_name_run(store *st, const char *archive_dir, const char *run_id, char *name, size_t n)
{
    json_t *entry = NULL;
    int rc = q_archived_run(st, run_id, &entry);
    const char *archive = json_string_value(json_object_get(entry, "archive"));
    if (rc == STATUS_OK && archive != NULL && *archive != '\0') {
        snprintf(name, n, "%s", archive);
        json_decref(entry);
        return STATUS_OK;
    }
    json_decref(entry);
    if (rc != STATUS_OK)
        return rc == STATUS_ENOMEM ? rc : STATUS_EUNAVAILABLE;
    if (archive_dir == NULL)
        return STATUS_ENOTFOUND;
    char path[1536], why[256];
    rc = archive_find_run(archive_dir, store_graph(st), run_id, path, sizeof path, name, n, why,
                          sizeof why);
    /* A file missing or refused is still where the run went. */
    return rc == STATUS_EPROTO || rc == STATUS_EDENIED ? STATUS_OK : rc;
}
