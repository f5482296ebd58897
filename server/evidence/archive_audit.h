/*
 * archive_audit.h - auditing an archived run from its archive file alone, with no database:
 * `charter audit --archive FILE` (docs/archive.md "Verifying an archive").
 *
 * Needs nothing of charterd's process state: the file, and for a keyed graph the integrity key
 * (its HMAC under the key must be the manifest's key_check). Checks, and names the first that
 * fails: every record's SHA-256, places and end digest (archive.h); the event chain (seq 1..n
 * with no gap, each event's hash recomputed over its canonical text, each prev the hash before
 * it, the last the run's head and seq); each delivery's deciding event (an allowed
 * delivery_decided of its invocation); and every receipt kept (each delivery's and the run's:
 * the MAC under the key, and that it names what the archive holds).
 */
#ifndef CHARTER_ARCHIVE_AUDIT_H
#define CHARTER_ARCHIVE_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    bool intact;
    bool keyed;          /* the graph's events are HMACs under the integrity key */
    char run_id[129];    /* the manifest's run */
    uint64_t events;     /* events checked */
    uint64_t deliveries; /* deliveries checked */
    uint64_t receipts;   /* receipts whose MAC was checked */
    uint64_t line;       /* the archive line of the first problem (0 when intact) */
    char problem[400];   /* "" when intact */
} archive_audit_result;

/* Audits the archive at path; key (keylen bytes, may be NULL for a keyless graph) is the
 * graph's integrity key. Returns STATUS_OK with *out filled (intact or not), STATUS_ENOKEY (a
 * keyed archive and no key given: nothing can be checked beyond the file), STATUS_ENOTFOUND,
 * STATUS_EUNAVAILABLE (a read failed), STATUS_ENOMEM. */
int archive_audit(const char *path, const unsigned char *key, size_t keylen,
                  archive_audit_result *out);

#endif
