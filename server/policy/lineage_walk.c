/*
 * lineage_walk.c - the ancestry a lineage reference names, rebuilt from its records alone
 * (lineage_walk.h): every record checked against its SHA-1 name before it is read, then the
 * artifacts put in the order the walk read them. No database: the records come from the graph
 * (db/lineage.c) or from an archive file (evidence/snapshot_resolve.c).
 */
#include "policy/lineage_walk.h"

#include <stdio.h>
#include <string.h>

#include "core/digest.h"
#include "core/status.h"

/* A reference is an object naming a lineage and holding no artifacts. */
bool lineage_walk_is_ref(const json_t *v)
{
    return json_is_object(v) && json_is_string(json_object_get(v, "lineage")) &&
           json_object_get(v, "artifacts") == NULL;
}

static int fail(char *why, size_t n, int rc, const char *fmt, const char *a, const char *b)
{
    snprintf(why, n, fmt, a, b);
    return rc;
}

/* The parents and refs of a record: two lists of equal length ({} is Redis cjson's empty
 * list). */
static bool record_lists(const json_t *rec, const json_t **parents, const json_t **refs)
{
    *parents = json_object_get(rec, "parents");
    *refs = json_object_get(rec, "refs");
    size_t np = json_is_array(*parents) ? json_array_size(*parents) : 0;
    size_t nr = json_is_array(*refs) ? json_array_size(*refs) : 0;
    bool lists = (json_is_array(*parents) || json_is_object(*parents)) &&
                 (json_is_array(*refs) || json_is_object(*refs));
    return lists && np == nr && json_is_string(json_object_get(rec, "id"));
}

/* Verifies every record reachable from the named one and indexes them by artifact id into
 * by_id (records borrowed from verified, which owns them). */
static int verify_walk(const json_t *records, const char *top, json_t *verified, json_t *by_id,
                       char *why, size_t n)
{
    json_t *todo = json_pack("[[ss]]", top, "the decision");
    if (todo == NULL)
        return STATUS_ENOMEM;
    int rc = STATUS_OK;
    while (rc == STATUS_OK && json_array_size(todo) > 0) {
        size_t last = json_array_size(todo) - 1;
        json_t *item = json_incref(json_array_get(todo, last));
        json_array_remove(todo, last);
        const char *sha = json_string_value(json_array_get(item, 0));
        const char *named_by = json_string_value(json_array_get(item, 1));
        const char *text = json_string_value(json_object_get(records, sha));
        char actual[41];
        json_t *rec = NULL;
        const json_t *parents, *refs;
        if (json_object_get(verified, sha) != NULL) {
            /* reached twice (a shared ancestor): verified once */
        } else if (text == NULL) {
            rc = fail(why, n, STATUS_ENOTFOUND, "lineage record %s (named by %s) is missing", sha,
                      named_by);
        } else if (digest_sha1_hex(text, strlen(text), actual) != 0 || strcmp(actual, sha) != 0) {
            rc = fail(why, n, STATUS_EPROTO,
                      "lineage record %s (named by %s) was altered: it no longer hashes to its "
                      "name",
                      sha, named_by);
        } else if ((rec = json_loads(text, 0, NULL)) == NULL ||
                   !record_lists(rec, &parents, &refs)) {
            rc = fail(why, n, STATUS_EPROTO, "lineage record %s (named by %s) is not a record", sha,
                      named_by);
        } else {
            const char *id = json_string_value(json_object_get(rec, "id"));
            const json_t *other = json_object_get(by_id, id);
            if (other != NULL) {
                rc = fail(why, n, STATUS_EPROTO, "lineage record %s names artifact %s twice", sha,
                          id);
            } else if (json_object_set(by_id, id, rec) != 0 ||
                       json_object_set(verified, sha, rec) != 0) {
                rc = STATUS_ENOMEM;
            }
            size_t i;
            json_t *ref;
            json_array_foreach(json_is_array(refs) ? refs : NULL, i, ref)
            {
                if (rc != STATUS_OK)
                    break;
                if (!json_is_string(ref)) {
                    rc = fail(why, n, STATUS_EPROTO,
                              "lineage record %s of artifact %s has a bad ref", sha, id);
                } else if (json_string_length(ref) > 0 &&
                           json_object_get(verified, json_string_value(ref)) == NULL) {
                    char who[160];
                    snprintf(who, sizeof who, "artifact %.128s", id);
                    if (json_array_append_new(todo, json_pack("[ss]", json_string_value(ref), who)))
                        rc = STATUS_ENOMEM;
                }
            }
        }
        json_decref(rec);
        json_decref(item);
    }
    json_decref(todo);
    return rc;
}

/* The artifacts in the order of the walk that read them: breadth-first over parents from the
 * root, each artifact with a record once, as charter_ancestry walks. */
static int walk_order(const json_t *by_id, const char *root, json_t *artifacts)
{
    json_t *seen = json_object();
    json_t *queue = json_pack("[s]", root);
    int rc = seen && queue && json_object_set_new(seen, root, json_true()) == 0 ? STATUS_OK
                                                                                : STATUS_ENOMEM;
    for (size_t head = 0; rc == STATUS_OK && head < json_array_size(queue); head++) {
        const char *id = json_string_value(json_array_get(queue, head));
        json_t *rec = json_object_get(by_id, id);
        if (rec == NULL)
            continue; /* not in the walk: missing, or beyond its limit */
        json_t *copy = json_copy(rec);
        if (copy == NULL || json_object_del(copy, "refs") != 0 ||
            json_array_append_new(artifacts, copy) != 0) {
            rc = STATUS_ENOMEM;
            break;
        }
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(rec, "parents"), i, p)
        {
            const char *pid = json_string_value(p);
            if (pid == NULL || json_object_get(seen, pid) != NULL)
                continue;
            if (json_object_set_new(seen, pid, json_true()) != 0 ||
                json_array_append(queue, p) != 0) {
                rc = STATUS_ENOMEM;
                break;
            }
        }
    }
    json_decref(seen);
    json_decref(queue);
    return rc;
}

/* The ancestry a reference names, as charter_ancestry replied it (without the records' refs). */
int lineage_walk_ancestry(const json_t *records, const json_t *ref, json_t **out, char *why,
                          size_t n)
{
    *out = NULL;
    const char *sha = json_string_value(json_object_get(ref, "lineage"));
    const char *root = json_string_value(json_object_get(ref, "root"));
    if (root == NULL)
        return fail(why, n, STATUS_EPROTO, "lineage reference %s names no root%s", sha, "");
    int rc = STATUS_OK;
    json_t *verified = json_object();
    json_t *by_id = json_object();
    json_t *artifacts = json_array();
    if (verified == NULL || by_id == NULL || artifacts == NULL)
        rc = STATUS_ENOMEM;
    if (rc == STATUS_OK)
        rc = verify_walk(records, sha, verified, by_id, why, n);
    if (rc == STATUS_OK) {
        const json_t *top = json_object_get(verified, sha);
        if (strcmp(json_string_value(json_object_get(top, "id")), root) != 0)
            rc =
                fail(why, n, STATUS_EPROTO, "lineage record %s is not the record of %s", sha, root);
    }
    if (rc == STATUS_OK)
        rc = walk_order(by_id, root, artifacts);
    if (rc == STATUS_OK) {
        *out = json_pack("{s:s, s:O, s:O}", "root", root, "truncated",
                         json_object_get(ref, "truncated") ? json_object_get(ref, "truncated")
                                                           : json_false(),
                         "artifacts", artifacts);
        if (*out == NULL)
            rc = STATUS_ENOMEM;
    }
    json_decref(artifacts);
    json_decref(by_id);
    json_decref(verified);
    return rc;
}

int lineage_walk_resolve(json_t *snap, lineage_walk_records_fn records, void *ctx, char *why,
                         size_t n)
{
    if (n > 0)
        why[0] = '\0';
    int rc = STATUS_OK;
    json_t *one = json_object_get(snap, "ancestry");
    json_t *list = json_object_get(snap, "ancestries");
    size_t count = json_array_size(list);
    /* The single ancestry first (place 0), then each of the list (place i is item i - 1). */
    for (size_t i = 0; rc == STATUS_OK && i <= count; i++) {
        json_t *ref = i == 0 ? one : json_array_get(list, i - 1);
        if (!lineage_walk_is_ref(ref))
            continue;
        json_t *recs = NULL, *resolved = NULL;
        rc = records(ctx, json_string_value(json_object_get(ref, "lineage")), &recs, why, n);
        if (rc == STATUS_OK)
            rc = lineage_walk_ancestry(recs, ref, &resolved, why, n);
        json_decref(recs);
        if (rc == STATUS_OK && (i == 0 ? json_object_set_new(snap, "ancestry", resolved)
                                       : json_array_set_new(list, i - 1, resolved)) != 0)
            rc = STATUS_ENOMEM;
    }
    return rc;
}
