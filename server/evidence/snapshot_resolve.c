/*
 * snapshot_resolve.c - a decision's snapshot put back together from its records
 * (snapshot_resolve.h). Nothing here reaches a database: the source does.
 */
#include "evidence/snapshot_resolve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "core/status.h"
#include "evidence/event_text.h"
#include "policy/lineage_walk.h"

/* The blob named sha into *text (the caller frees it), once its bytes still hash to that name.
 * STATUS_ENOTFOUND when it is gone, STATUS_EPROTO when it was altered, each named in why as
 * "<what> <sha> is missing" / "was altered"; else the source's failure. */
static int blob_get(const snapshot_source *src, const char *sha, const char *what, char **text,
                    char *why, size_t n)
{
    *text = NULL;
    char actual[65];
    int rc = src->blob(src->ctx, sha, text);
    if (rc == STATUS_ENOTFOUND) {
        snprintf(why, n, "%s %s is missing", what, sha);
    } else if (rc == STATUS_OK && digest_sha256_hex(*text, strlen(*text), actual) != 0) {
        rc = STATUS_ENOMEM;
    } else if (rc == STATUS_OK && strcmp(actual, sha) != 0) {
        rc = STATUS_EPROTO; /* changed since: its name no longer matches */
        snprintf(why, n, "%s %s was altered", what, sha);
    }
    if (rc != STATUS_OK) {
        free(*text);
        *text = NULL;
    }
    return rc;
}

/* The snapshot text with its facts reference replaced by the snapshot it stands for: the
 * record's facts with "now" put back, encoded as the snapshot would have been. text is kept as
 * it is when it is no such reference. */
static int facts_resolve(const snapshot_source *src, char **text, char *why, size_t n)
{
    size_t plen = strlen(SNAPSHOT_FACTS_REF);
    if (strncmp(*text, SNAPSHOT_FACTS_REF, plen) != 0)
        return STATUS_OK;
    json_t *ref = json_loads(*text, 0, NULL);
    const char *sha = json_string_value(json_object_get(ref, SNAPSHOT_FACTS_KEY));
    json_t *now = json_object_get(ref, "now");
    if (!json_is_object(ref) || json_object_size(ref) != 2 || sha == NULL || strlen(sha) != 64 ||
        !digest_is_hex(sha, 64) || !json_is_number(now)) {
        json_decref(ref);
        return STATUS_OK; /* not a reference: replay says what it is */
    }
    json_t *facts = NULL;
    char *full = NULL, *record = NULL;
    int rc = blob_get(src, sha, "facts record", &record, why, n);
    if (rc == STATUS_OK) {
        facts = json_loads(record, 0, NULL);
        if (!json_is_object(facts) || json_object_get(facts, "now") != NULL) {
            rc = STATUS_EPROTO;
            snprintf(why, n, "facts record %s is not a decision's facts", sha);
        } else if (json_object_set(facts, "now", now) != 0 ||
                   (full = evlog_json_text(facts)) == NULL) {
            rc = STATUS_ENOMEM;
        }
    }
    json_decref(facts);
    free(record);
    json_decref(ref);
    if (rc == STATUS_OK) {
        free(*text);
        *text = full;
    }
    return rc;
}

/* The lineage references of the snapshot text resolved; text is kept as it is when it holds
 * none. */
static int lineage_resolve_text(const snapshot_source *src, char **text, char *why, size_t n)
{
    if (strstr(*text, "\"lineage\":\"") == NULL)
        return STATUS_OK;
    json_t *snap = json_loads(*text, 0, NULL);
    if (!json_is_object(snap)) {
        json_decref(snap);
        return STATUS_OK; /* not facts replay can decode: replay says so */
    }
    int rc = lineage_walk_resolve(snap, src->lineage, src->ctx, why, n);
    char *full = rc == STATUS_OK ? json_dumps(snap, JSON_COMPACT) : NULL;
    if (rc == STATUS_OK && full == NULL)
        rc = STATUS_ENOMEM;
    json_decref(snap);
    if (rc == STATUS_OK) {
        free(*text);
        *text = full;
    }
    return rc;
}

int snapshot_resolve(const snapshot_source *src, const char *snapshot, char **out, char *why,
                     size_t n)
{
    *out = NULL;
    if (n > 0)
        why[0] = '\0';
    size_t plen = strlen(SNAPSHOT_BLOB_REF);
    int rc;
    if (snapshot == NULL || strncmp(snapshot, SNAPSHOT_BLOB_REF, plen) != 0 ||
        strlen(snapshot) != plen + 64 + 2) {
        *out = strdup(snapshot != NULL ? snapshot : "");
        rc = *out != NULL ? facts_resolve(src, out, why, n) : STATUS_ENOMEM;
    } else {
        char sha[65];
        memcpy(sha, snapshot + plen, 64);
        sha[64] = '\0';
        rc = blob_get(src, sha, "snapshot blob", out, why, n);
    }
    if (rc == STATUS_OK)
        rc = lineage_resolve_text(src, out, why, n);
    if (rc != STATUS_OK) {
        free(*out);
        *out = NULL;
    }
    return rc;
}
