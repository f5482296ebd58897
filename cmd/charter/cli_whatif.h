/*
 * cli_whatif.h - `charter what-if`: its report, and the what-if over archived runs, decided
 * offline from archive files with no charterd and no database (docs/archive.md).
 */
#ifndef CHARTER_CLI_WHATIF_H
#define CHARTER_CLI_WHATIF_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "charter.h"
#include "policy/guard.h"

/* A decision as the wire gives it (server/rpc/wire.c wire_decision): outcome, the codes set
 * in codes (guard.h), the witness w. NULL when out of memory; free with
 * charter__v1__decision__free_unpacked. */
Charter__V1__Decision *cli_whatif_decision(guard_outcome outcome, unsigned codes, const char *w);

/* The recorded decision of an archived event as the wire gives it (wire_event_decision): its
 * outcome, its codes as recorded, its witness. NULL when out of memory. */
Charter__V1__Decision *cli_whatif_recorded_decision(const json_t *event);

/* Prints r: with json one document in the proto3 JSON mapping (cli_json.h), else one line a
 * change, the counts by change and the totals. Returns 0, or 1 when the JSON could not be
 * written. */
int cli_whatif_print(const Charter__V1__WhatIfResponse *r, bool json);

/* Decides every decision recorded in the archive at path again under the candidate workflow
 * (workflow_text, its JSON), as Evidence/WhatIf does for runs in the graph, and prints the same
 * report (cli_whatif_print). path is one archive file, or a graph's archive folder: every
 * archive its index lists, in the index's order, once the index holds. Each archive is audited
 * first (archive_audit, keyfile the graph's integrity key file, NULL for a keyless graph) and
 * one that is not intact is refused with the audit's words. At most limit decisions (0: 1000)
 * are examined. Returns the exit status: 0 reported, 1 an archive not intact or unreadable, 2
 * a usage error (a candidate the loader refuses, a key file that cannot be read, a keyed
 * archive without one, a folder without an index). */
int cli_whatif_archive(const char *path, const char *keyfile, const char *workflow_text,
                       uint64_t limit, bool json);

#endif
