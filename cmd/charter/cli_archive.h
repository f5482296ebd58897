/*
 * cli_archive.h - `charter audit --archive FILE`: an archived run audited from its file alone,
 * with no charterd and no database (server/evidence/archive_audit.h, docs/archive.md).
 */
#ifndef CHARTER_CLI_ARCHIVE_H
#define CHARTER_CLI_ARCHIVE_H

#include <stdbool.h>

/* Audits the archive at path (keyfile: the graph's integrity key file, NULL for a keyless
 * graph) and prints the verdict: one line, or with json a JSON object {file, runId, intact,
 * keyed, events, deliveries, receipts, line, problem}. Returns the exit status: 0 intact, 1 not
 * intact or unreadable, 2 a usage error (a key file that cannot be read, a keyed archive
 * without --key). */
int cli_audit_archive(const char *path, const char *keyfile, bool json);

/* Decides the decision event seq_text of the archive at path again from the file alone
 * (server/evidence/archive_replay.h) and prints it as `charter replay RUN SEQ` prints
 * charterd's answer for a run that left the database: the recorded and the replayed decision
 * and whether they match, or with json that ReplayDecisionResponse in the proto3 JSON
 * mapping, its archive the path. Returns the exit status: 0 they match (or the
 * event records no facts), 1 they differ or the replay failed (why on stderr), 2 a SEQ that is
 * not a number. */
int cli_replay_archive(const char *path, const char *seq_text, bool json);

#endif
