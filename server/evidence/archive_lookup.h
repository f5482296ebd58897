/*
 * archive_lookup.h - an invocation found in the archive of the run a context belonged to, for
 * a call through a context that left the database with its run (docs/archive.md).
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

/* Finds the archive of run_id (when not NULL or ""), else of the run that had context_id, in
 * graph_dir (<archive folder>/<graph>), and reads invocation_id's delivery from it. Returns
 * STATUS_OK with *out filled (out->delivery NULL when the run did not commit it);
 * STATUS_ENOTFOUND (no index, or no run of it has the context or is run_id); STATUS_EPROTO
 * (the archive is missing, not the one indexed or does not read back whole: why, n bytes,
 * says which, out->file and out->run_id name it); STATUS_EUNAVAILABLE (a read failed);
 * STATUS_ENOMEM. Free out with archive_invocation_free in every case. */
int archive_find_invocation(const char *graph_dir, const char *context_id, const char *run_id,
                            const char *invocation_id, archive_invocation *out, char *why,
                            size_t n);

#endif
