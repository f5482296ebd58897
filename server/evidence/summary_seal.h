/*
 * summary_seal.h - the seal of a lineage summary: charterd's HMAC under the integrity key of
 * the artifact's id and its summary's hash, stored beside the summary at creation
 * (charter_seal_summary). With a key, a summary counts only with a seal that verifies, so a
 * summary rewritten in the database with a recomputed SHA-1 is not decided from; the gates
 * check the seal at decision time and audit checks every seal of a run.
 */
#ifndef CHARTER_SUMMARY_SEAL_H
#define CHARTER_SUMMARY_SEAL_H

/* The seal of artifact id's summary whose hash is summary_hash (hex SHA-1): lowercase hex
 * HMAC-SHA256 under the integrity key of "charter-summary-1\n<id>\n<summary_hash>\n" into mac
 * (65 bytes). Returns STATUS_OK, STATUS_ENOKEY (no integrity key), STATUS_EINVAL (id or
 * summary_hash missing, empty or too long) or STATUS_EPROTO (OpenSSL failed). */
int summary_seal_make(const char *id, const char *summary_hash, char mac[65]);

/* Checks that seal is summary_seal_make of id and summary_hash, in constant time. Returns
 * STATUS_OK, STATUS_ENOKEY (no integrity key: nothing is checked), STATUS_EREFUSED (no seal,
 * or one that does not verify: forged, altered or made under another key), STATUS_EINVAL or
 * STATUS_EPROTO. */
int summary_seal_check(const char *id, const char *summary_hash, const char *seal);

#endif
