/*
 * lineage_walk.h - a lineage reference ({"root","truncated","lineage":"<sha1>"}, lineage.h)
 * resolved from its records alone, with no database: what the graph's replay (db/lineage.c) and
 * an archive's (evidence/snapshot_resolve.c) both run, so they cannot disagree.
 */
#ifndef CHARTER_LINEAGE_WALK_H
#define CHARTER_LINEAGE_WALK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* True when v is a reference: an object naming a lineage and holding no artifacts. */
bool lineage_walk_is_ref(const json_t *v);

/* The ancestry ref names, {"root","truncated","artifacts":[...]} in the order of the walk that
 * read them (a new reference in *out), from records ({"<sha1>":"<record text>",...}): every
 * record reachable from the reference is checked to hash to its name and to be a record, and
 * the top one to be the root's. Returns STATUS_OK; STATUS_ENOTFOUND (a record is missing) or
 * STATUS_EPROTO (altered, not a record, not the root's: why, n bytes, names it); STATUS_ENOMEM. */
int lineage_walk_ancestry(const json_t *records, const json_t *ref, json_t **out, char *why,
                          size_t n);

/* The records the walk from the lineage record sha reads, as a new reference in *records; on a
 * failure why (n bytes) may say what failed. */
typedef int (*lineage_walk_records_fn)(void *ctx, const char *sha, json_t **records, char *why,
                                       size_t n);

/* Replaces each reference of the decision snapshot snap (its "ancestry" and each of its list
 * "ancestries") with the ancestry it names (lineage_walk_ancestry over what records gives).
 * Returns STATUS_OK (also for a snapshot without references), or the first failure. */
int lineage_walk_resolve(json_t *snap, lineage_walk_records_fn records, void *ctx, char *why,
                         size_t n);

#endif
