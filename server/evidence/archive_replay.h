/*
 * archive_replay.h - a decision of an archived run decided again from its archive file alone,
 * with no database: `charter replay --archive FILE SEQ`, and charterd's ReplayDecision and
 * WhatIf of a run that left the database (docs/archive.md).
 *
 * The file must read back whole (archive.h); the event's snapshot is put back together from the
 * records the archive keeps (snapshot_resolve.h: a large snapshot, a facts record, lineage
 * records, each checked against its name) and decided again by the evaluator of the version it
 * records (evaluator_replay), as ReplayDecision does for a run still in the graph.
 */
#ifndef CHARTER_ARCHIVE_REPLAY_H
#define CHARTER_ARCHIVE_REPLAY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/evaluator.h"

typedef struct {
    json_t *event;               /* the archived event, its snapshot resolved (owned) */
    evaluator_replay_result res; /* the replay (evaluator.h) */
} archive_replay_result;

/* Replays the decision event seq of the archive at path; evaluator is the fingerprint of the
 * replaying charterd's default evaluator (evaluator_replay: what a snapshot that records no
 * workflow was decided under), "" with no charterd (`charter replay --archive`). The event
 * keeps its fields as stored (seq a decimal string). Returns STATUS_OK with *out filled
 * (free with archive_replay_result_free); STATUS_ENOTFOUND (no such file, or no event seq in
 * it); STATUS_EPROTO (the archive does not read back whole, or a record the snapshot names is
 * missing or altered: why says which); evaluator_replay's failures (STATUS_ENOTDECISION,
 * STATUS_EFINGERPRINT, STATUS_ESNAPSHOT, why saying why); STATUS_EUNAVAILABLE, STATUS_ENOMEM.
 * why has n bytes. */
int archive_replay(const char *path, const char *evaluator, uint64_t seq,
                   archive_replay_result *out, char *why, size_t n);

void archive_replay_result_free(archive_replay_result *r);

/* Visits one decision event of an archived run: the run's id and the event as the archive
 * keeps it (its fields as stored, seq a decimal string), its snapshot resolved (borrowed for
 * the call). Returns 0 to go on; anything else stops the walk, which returns it. */
typedef int (*archive_decision_visit)(void *ctx, const char *run_id, json_t *event);

/* Visits every decision event (an event with an outcome) of the archive at path, in seq order,
 * each snapshot resolved as archive_replay resolves one: `charter what-if --archive`. Nothing
 * is visited unless the file reads back whole. Returns STATUS_OK; STATUS_ENOTFOUND (no such
 * file); STATUS_EPROTO (the archive does not read back whole, or a record a snapshot names is
 * missing or altered: why says which, naming the event); STATUS_EUNAVAILABLE; STATUS_ENOMEM;
 * or what visit returned when it stopped. why has n bytes. */
int archive_decisions(const char *path, archive_decision_visit visit, void *ctx, char *why,
                      size_t n);

#endif
