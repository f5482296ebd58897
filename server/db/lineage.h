/*
 * lineage.h - lineage records: an artifact's lineage facts stored once, by content, and named
 * by the decisions made from them.
 *
 * An ancestry read (charter_ancestry, charter_delivery_facts) returns each artifact's facts as a
 * record that names its parents' records by their SHA-1, and the SHA-1 of the payload's record
 * (the "lineage"), which so commits to every fact of the walk. A decision's snapshot keeps that
 * reference ({"root","truncated","lineage"}) instead of a copy of the whole ancestry, so what a
 * decision stores does not grow with the depth of the lineage; the records are stored once
 * (charter_put_lineage) before the decision that names them is written. Replay resolves the
 * reference: every record is hashed again and a record that is missing or does not hash to its
 * name fails the replay, naming it.
 *
 * The gate still reads the current graph for every decision: a record is never read in place
 * of the graph, only compared with it (lineage_ancestry) or written from what a walk read, so
 * deleting an edge changes the walk's records (and their names) and the decision made from
 * them. Records are also written at creation (charter_create_artifact), and named in the
 * artifact's field lineage.
 */
#ifndef CHARTER_LINEAGE_H
#define CHARTER_LINEAGE_H

#include <jansson.h>
#include <stddef.h>

#include "core/status.h"
#include "db/store.h"

/* The ancestry of payload as charter_ancestry replies it (limit: its decimal limit), read
 * through the records stored at creation: charter_lineage_state reads the graph as it stands
 * (every artifact's fields and edges, nothing encoded or hashed) and each artifact is compared
 * here with the record its field lineage names, decoded once per process and held by name in a
 * bounded cache after its SHA-1 was checked. When every fact and every parent's record agree,
 * the reply is made of those records (its "new" empty: all are stored). Any difference (an
 * edge deleted, a label changed, a record missing or altered, an artifact without a record)
 * takes the full walk of the graph as it is (charter_ancestry), so a record never stands for a
 * graph that changed. On success *out is a new reference. Returns STATUS_OK, STATUS_ENOTFOUND
 * (no such payload), STATUS_ENOMEM, or the store's failure. */
int lineage_ancestry(store *st, const char *payload, const char *limit, json_t **out);

/* Stores the records of ancestry (an ancestry reply) that were not stored when it was read
 * (its "new" object), in calls of at most 16 records. Returns STATUS_OK (also when there is
 * nothing to store), STATUS_EPROTO (ancestry holds no "new" object), STATUS_ENOMEM or the
 * store's failure. */
int lineage_keep(store *st, const json_t *ancestry);

/* The reference a snapshot keeps for ancestry, {"root","truncated","lineage"} (a new reference
 * the caller decrefs), or NULL when ancestry names no lineage or memory ran out. */
json_t *lineage_ref(const json_t *ancestry);

/* The lineage records the walk from the record sha reads in the graph (charter_lineage_records),
 * as a new reference in *records (lineage_walk_records_fn, ctx the store; replay resolves a
 * reference from them with lineage_walk_resolve). Returns STATUS_OK, STATUS_EPROTO (a malformed
 * reference, why says so) or the store's failure. */
int lineage_graph_records(void *ctx, const char *sha, json_t **records, char *why, size_t n);

#endif
