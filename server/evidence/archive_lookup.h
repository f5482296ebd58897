/*
 * archive_lookup.h - a run that left the database found in the archive folder: where it went
 * (its archive's name, for an answer about the run), its archive file (for reading it online:
 * ReplayDecision, WhatIf), and an invocation in the archive of the run a context belonged to,
 * for a call through a context that left the database with its run (docs/archive.md).
 *
 * A file is read only when the graph folder's index names it for the run, as the run's archive
 * inside the folder (archive_index_file_inside): never at a name the database holds.
 *
 * The run's archive is found through the graph folder's index (archive_index_find: by the run
 * when it is known, else by the context ids each line lists), checked to be the file indexed
 * and to read back whole (archive_read), and read for three things: the context's record (its
 * OWNED_BY actors), the invocation's delivery as the run committed it, and the context its
 * committing event names, with which the send's digest (archive_send_digest) is taken again.
 * Nothing here decides: the gates compare a retry with what is found (deliver.c, invoke.c).
 */
#ifndef CHARTER_ARCHIVE_LOOKUP_H
#define CHARTER_ARCHIVE_LOOKUP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "db/store.h"

typedef struct {
    char file[512]; /* the archive, relative to the graph's folder (<day>/<run>.charter-archive) */
    char run_id[129];  /* the archived run */
    bool has_context;  /* the archive holds the context looked up */
    json_t *owners;    /* that context's OWNED_BY actor ids as archived (owned), or NULL */
    json_t *delivery;  /* the invocation's delivery, its hash as stored (owned); NULL when the
                        * run did not commit the invocation */
    char context[129]; /* the context the delivery's committing event names ("" when none) */
    char digest[65];   /* the delivery's send digest as the archive keeps it */
} archive_invocation;

void archive_invocation_free(archive_invocation *a);

/* Where run run_id of st's graph went when it was archived: name (n bytes) gets its archive's
 * name under the archive folder, "<graph>/<YYYY-MM-DD>/<run>.charter-archive", from the entry
 * the database keeps for the invocation window (charter_archived_run) or, once that expired,
 * from the index of <archive_dir>/<graph> (archive_dir NULL: the database alone). For telling
 * a caller where the run went; the file to read is found by archive_find_run. Returns
 * STATUS_OK; STATUS_ENOTFOUND (neither knows the run); STATUS_EUNAVAILABLE (the database or
 * the index could not be read); STATUS_ENOMEM. */
int archive_name_run(store *st, const char *archive_dir, const char *run_id, char *name, size_t n);

/* The archive file of run run_id of graph, found through the index of <archive_dir>/<graph>:
 * path (np bytes) the file to open, name (nn bytes) its name under the archive folder
 * ("<graph>/<file>"). The file is checked to be the run's archive inside the graph's folder,
 * then to be the one indexed (its SHA-256); whether it reads back whole is its reader's to
 * check. Returns STATUS_OK; STATUS_ENOTFOUND (no index, or it does not name the run);
 * STATUS_EPROTO (the file is missing or not the one indexed: name set, why in words);
 * STATUS_EDENIED (the index names a file that is not the run's archive in the folder:
 * refused, nothing opened, why in words); STATUS_EUNAVAILABLE; STATUS_ENOMEM. why has nw
 * bytes. */
int archive_find_run(const char *archive_dir, const char *graph, const char *run_id, char *path,
                     size_t np, char *name, size_t nn, char *why, size_t nw);

/* Finds the archive of run_id (when not NULL or ""), else of the run that had context_id, in
 * graph_dir (<archive folder>/<graph>), and reads invocation_id's delivery from it. Returns
 * STATUS_OK with *out filled (out->delivery NULL when the run did not commit it);
 * STATUS_ENOTFOUND (no index, or no run of it has the context or is run_id); STATUS_EPROTO
 * (the archive is missing, not the one indexed, not a file of the graph's folder or does not
 * read back whole: why, n bytes, says which, out->file and out->run_id name it);
 * STATUS_EUNAVAILABLE (a read failed); STATUS_ENOMEM. Free out with archive_invocation_free in
 * every case. */
int archive_find_invocation(const char *graph_dir, const char *context_id, const char *run_id,
                            const char *invocation_id, archive_invocation *out, char *why,
                            size_t n);

#endif
