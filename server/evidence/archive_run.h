/*
 * archive_run.h - one ended run written from the graph to its archive file (archive.h), read
 * back and checked, and only then removed from the graph (docs/archive.md).
 *
 * The run's keys are read page by page (charter_run_export), so no call holds the whole run:
 * the manifest, the run, its contexts, artifacts, events, deliveries and approvals, then every
 * record its decisions name (facts records and large snapshots by SHA-256, lineage records by
 * SHA-1, followed to the records they name in turn). archive_run_verify reads the file back
 * before archive_run_remove deletes anything.
 */
#ifndef CHARTER_ARCHIVE_RUN_H
#define CHARTER_ARCHIVE_RUN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "db/store.h"

/* What a run's archive holds, as written and as read back. */
typedef struct {
    uint64_t bytes; /* the file's size */
    uint64_t events, contexts, artifacts, deliveries, approvals, records;
    char head[65];       /* the hash of the run's last event ("" without events) */
    char ended_at[32];   /* the ts of its last event */
    json_t *digests;     /* {"<invocation id>":"<send digest>"} (archive_send_digest), owned */
    json_t *context_ids; /* ["<context id>", ...] as written (archive_run_write only), owned */
} archive_run_summary;

void archive_run_summary_free(archive_run_summary *s);

/* Writes the ended run run_id of st's graph to path (archive.h: created under path.partial,
 * named once complete and on disk). Returns STATUS_OK with *out filled, STATUS_ENOTFOUND,
 * STATUS_ENOTENDED (the run has not ended), STATUS_EREFUSED (it changed while it was read:
 * its head moved), STATUS_EUNAVAILABLE (the file, or the store), STATUS_ENOMEM; why (n bytes)
 * says what failed. Nothing is removed. */
int archive_run_write(store *st, const char *run_id, const char *path, archive_run_summary *out,
                      char *why, size_t n);

/* Reads path back and checks that it is whole (archive_read), is the archive of run_id, and
 * holds what expect says was written: the counts, the event chain's links ending at the head,
 * and each delivery's send digest. Returns STATUS_OK when it does, STATUS_EPROTO (why names
 * the first difference), or archive_read's failure. */
int archive_run_verify(const char *path, const char *run_id, const archive_run_summary *expect,
                       char *why, size_t n);

/* Removes the archived run from the graph in one call (charter_remove_run), keeping a compact
 * record of each invocation it committed for at least window_s seconds (the invocation
 * window; 0: forever); name is the archive's file name. Returns the store's status
 * (STATUS_EREFUSED: the run changed since it was archived, nothing removed). */
int archive_run_remove(store *st, const char *run_id, const char *name,
                       const archive_run_summary *written, long long window_s);

#endif
