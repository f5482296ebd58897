/*
 * archived.h - a send or tool call through a context that left the database with its run,
 * answered from the run's archive (docs/operator.md "Retention").
 *
 * Exactly once does not rest on this: once a run is archived its contexts, payloads and the
 * run itself are gone, so no commit through them can succeed (charter_commit_delivery refuses
 * run_not_found; the facts read finds no context). While the invocation's compact record is
 * kept (the invocation window) a Deliver retry is answered from it in the database; after the
 * window, or for a tool call (whose compact record does not cover its arguments), charterd
 * reads the run's archive: the same request is acknowledged, naming the file; another one is
 * DELIVERY_CONFLICT; an archive that does not read back whole answers UNKNOWN (no effect, and
 * none can happen); no archive naming the context is not found. The archive is found through
 * the graph folder's index, by the run when the compact record still names it, else by the
 * context ids each index line lists (archive_index_find).
 */
#ifndef CHARTER_ARCHIVED_H
#define CHARTER_ARCHIVED_H

#include <jansson.h>
#include <stddef.h>

#include "gates/gate.h"

/* A retry through a context the database does not have. Exactly one of digest (a send: its
 * archive_send_digest) and content (a tool call: its arguments as committed, with tool) is
 * set; run_id, when known (a compact record named it), finds the archive without the
 * context's index entry. Everything borrowed. */
typedef struct {
    const char *context_id;
    const char *invocation_id;
    const char *run_id;  /* or NULL */
    const char *digest;  /* a send, or NULL */
    const char *tool;    /* a tool call's tool */
    const char *content; /* a tool call's arguments as committed, or NULL */
} archived_request;

/* Looks req up in the archive of the run its context belonged to, under g->archive_dir (which
 * must be set). Returns STATUS_OK with d decided: ALLOW with *delivery (the delivery as
 * archived, shaped as charter_find_delivery replies one, with "archive": the file under the
 * archive folder, and "archived": true; caller decrefs), DENY DELIVERY_CONFLICT, or UNKNOWN
 * when the archive does not read back whole; *owners (caller decrefs, may be NULL) gets the
 * context's OWNED_BY actors as archived (for the host identity check). STATUS_ENOTFOUND
 * with why (n bytes) in words: no archive names the context, or the run's archive holds no
 * commit of the invocation. STATUS_EUNAVAILABLE, STATUS_ENOMEM. */
int archived_answer(const gate_env *g, const archived_request *req, guard_decision *d,
                    json_t **delivery, json_t **owners, char *why, size_t n);

#endif
