/*
 * snapshot_resolve.h - the facts a decision event's snapshot holds, put back together from the
 * content-addressed records it names (a large snapshot stored once, a facts record, lineage
 * records), each checked against its name before it is used. Pure: the records come from a
 * source, the graph (evlog_snapshot_resolve) or an archive file (archive_replay.h), so replay
 * reads the same facts from either.
 */
#ifndef CHARTER_SNAPSHOT_RESOLVE_H
#define CHARTER_SNAPSHOT_RESOLVE_H

#include <jansson.h>
#include <stddef.h>

/* A snapshot stored by content is the reference {"blob":"<sha256>"}; one whose repeating facts
 * are a record is {"facts":"<sha256>","now":...} (evlog_facts_split), as evlog_json_text
 * encodes it (keys sorted). */
#define SNAPSHOT_BLOB_REF "{\"blob\":\""
#define SNAPSHOT_FACTS_KEY "facts"
#define SNAPSHOT_FACTS_REF "{\"" SNAPSHOT_FACTS_KEY "\":\""

/* Where the records come from. blob: the text stored under the SHA-256 sha into *text
 * (malloc'd), unchecked; STATUS_OK, STATUS_ENOTFOUND, or another failure. lineage: the
 * lineage records the walk from the SHA-1 sha reads (lineage_walk.h). */
typedef struct {
    int (*blob)(void *ctx, const char *sha, char **text);
    int (*lineage)(void *ctx, const char *sha, json_t **records, char *why, size_t n);
    void *ctx;
} snapshot_source;

/* The facts snapshot holds, as text replay decides from: its own text, or a blob reference's
 * text; a facts reference replaced by the snapshot it stands for; every lineage reference in
 * it resolved (lineage_walk_resolve). Each record must still hash to its name. *out is
 * malloc'd (caller frees). why (n bytes) names what is missing or altered. Returns STATUS_OK,
 * STATUS_ENOTFOUND (a record is gone), STATUS_EPROTO (one was changed), STATUS_ENOMEM or the
 * source's failure. */
int snapshot_resolve(const snapshot_source *src, const char *snapshot, char **out, char *why,
                     size_t n);

#endif
