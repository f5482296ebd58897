/*
 * event_text.h - the canonical text an event's hash is taken over (queries/README.md, "Events and
 * their hash chain"): pure, so the offline audit of an archive hashes exactly what charterd
 * sealed, with no database and no process state.
 */
#ifndef CHARTER_EVENT_TEXT_H
#define CHARTER_EVENT_TEXT_H

#include <jansson.h>
#include <stddef.h>

/* One event as stored, for hashing: every field a NUL-terminated text (seq in decimal). */
typedef struct {
    const char *run_id, *seq, *ts, *kind, *outcome, *codes, *witness, *detail, *snapshot,
        *evaluator, *prev;
} evlog_fields;

/* The canonical text of an event: the line "charter-event-2", then for run_id, seq, ts, kind,
 * outcome, codes, witness, detail, snapshot, evaluator, prev in this order one line
 * "<name>=<byte length>:<bytes>" each, every line ended by "\n" (lengths make it unambiguous
 * whatever the bytes). *text is malloc'd (caller frees), *len its length. Returns 0 or
 * STATUS_ENOMEM. */
int evlog_event_text(const evlog_fields *f, char **text, size_t *len);

/* v as compact JSON text with sorted keys and doubles at 17 significant digits, so a time
 * survives a snapshot exactly. Caller frees; NULL when v is NULL or memory ran out. */
char *evlog_json_text(const json_t *v);

#endif
