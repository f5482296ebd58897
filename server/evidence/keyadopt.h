/*
 * keyadopt.h - a keyless graph adopting an integrity key, and the mark of it an audit checks.
 *
 * A graph records whether its first charterd had an integrity key (evlog_claim_integrity). A
 * keyless graph may adopt one later (charterd --adopt-integrity-key): in one conditional write
 * (charter_adopt_key) the graph records the mode keyed, the key check and the database time of
 * the adoption, and every run that had events records the seq and hash of its last event with
 * a seal, the HMAC-SHA256 under the adopted key of "charter-keyless-run-1\n<run_id>\n<seq>\n
 * <hash>\n". That run's events up to the seq stay hashed with plain SHA-256 and are audited so;
 * every later event of every run is an HMAC under the key. From the adoption on the seal pins
 * the keyless history: rewriting those events changes the hash the key sealed, and a mark
 * cannot be added, moved or copied to another run without the key. Every artifact's lineage
 * summary is sealed under the key first (a keyed graph decides only from sealed summaries),
 * once charter_audit_summaries has re-derived it from the raw graph: an adoption refuses to
 * vouch for a summary that an audit would name.
 */
#ifndef CHARTER_KEYADOPT_H
#define CHARTER_KEYADOPT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "db/store.h"

/* Reads and seals the run list again when a run was created or an event written meanwhile
 * (another charterd still serving the graph), at most this many times. */
#define KEYADOPT_ATTEMPTS 8

/* The graph's recorded integrity mode into mode: "keyed", "keyless", or "" before any charterd
 * served it (charter_integrity_state; nothing is written). Returns STATUS_OK, or the store's
 * failure with its reason in err (n bytes). */
int keyadopt_graph_mode(store *st, char mode[16], char *err, size_t n);

/* Adopts the integrity key integrity.c keeps for st's keyless graph (above). Returns STATUS_OK
 * with *runs (the graph's runs when it adopted) and at (the database time, "<s>.<us>");
 * STATUS_EEXISTS when the graph is not keyless (nothing written: claim it as usual);
 * STATUS_ENOKEY without a key; STATUS_EREFUSED when a summary does not re-derive from the graph
 * or cannot be sealed (err names the artifact; the graph stays keyless, though summaries sealed
 * before it may keep their seals, which a keyless graph ignores), or when the runs kept moving
 * for KEYADOPT_ATTEMPTS attempts (err says to stop the other charterd); or the store's failure
 * (reason in err). */
int keyadopt_adopt(store *st, size_t *runs, char at[32], char *err, size_t n);

/* Checks a run's mark (the "keyless" member charter_audit_events gives: {until, head, seal};
 * NULL when the run has none) under the integrity key. Returns STATUS_OK with *until and head
 * set (0 and "" without a mark), or STATUS_EREFUSED when the mark is malformed or its seal
 * does not verify (then *until is 0). */
int keyadopt_check_mark(const char *run_id, const json_t *mark, uint64_t *until, char head[65]);

#endif
