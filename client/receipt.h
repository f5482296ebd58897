/*
 * receipt.h - charter receipts: the canonical text a receipt's MAC covers, the MAC, the offline
 * verifier and the integrity key file, in one place compiled into both charterd and libcharter,
 * so the server that signs and the verifier that checks can never disagree on a byte.
 *
 * A receipt (charter.v1.Receipt) is authenticated with HMAC-SHA256 under the integrity key, an
 * external secret file charterd is started with (--integrity-key) and that never reaches the
 * database, a log, a receipt or an error message. The MAC is lowercase hex over this text:
 *
 *   format=charter-receipt-1
 *   kind=delivery                      kind=run
 *   run_id=<run>                       run_id=<run>
 *   invocation_id=<invocation ID>      status=<completed|blocked|error>
 *   payload_hash=<hex SHA-256>         last_seq=<decimal>
 *   recipient=<recipient>              last_event_hash=<hex>
 *   tool=<tool>                        deliveries=<invocation IDs, sorted, comma-joined>
 *   grant_chain=<leaf,...,root>        time=<seconds.microseconds>
 *   time=<seconds.microseconds>        evaluator=<hex SHA-256>
 *   evaluator=<hex SHA-256>
 *
 * one "name=value" line each, in exactly this order, every line ended by "\n", values as the
 * receipt carries them (no trimming, no escaping). A value may not hold a newline, a carriage
 * return or a NUL, and a list item may not hold a comma or be empty, so the text is unambiguous;
 * a receipt whose fields violate this, or that sets a field its kind does not list (the MAC
 * would not cover it), is malformed and never verifies.
 */
#ifndef CHARTER_RECEIPT_H
#define CHARTER_RECEIPT_H

#include <stddef.h>

#include "charter.h"
#include "charter.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds of an integrity key file, in bytes. */
#define CHARTER_RECEIPT_KEY_MIN 32
#define CHARTER_RECEIPT_KEY_MAX 4096

/* The first line of every receipt's canonical text. */
#define CHARTER_RECEIPT_FORMAT "charter-receipt-1"

/* Builds the canonical text of r (layout above) into *text (malloc'd, NUL-terminated, the
 * caller frees) and its length in bytes into *len. Returns 0, -CHARTER_INVALID_ARGUMENT when r
 * is malformed (err says which field), -CHARTER_RESOURCE_EXHAUSTED when memory ran out. err
 * (errlen bytes) is always terminated when errlen > 0. */
int charter_receipt_text(const Charter__V1__Receipt *r, char **text, size_t *len, char *err,
                         size_t errlen);

/* Lowercase hex HMAC-SHA256 under key (keylen bytes) of len bytes of data into hex (65 bytes,
 * terminated). Returns 0, or -CHARTER_INTERNAL when OpenSSL fails (hex is then all zeros,
 * which no receipt carries). */
int charter_hmac_sha256_hex(const unsigned char *key, size_t keylen, const void *data, size_t len,
                            char hex[65]);

/* The MAC of r under key: HMAC-SHA256 of charter_receipt_text(r). Returns as
 * charter_receipt_text, or -CHARTER_INTERNAL. */
int charter_receipt_mac(const Charter__V1__Receipt *r, const unsigned char *key, size_t keylen,
                        char mac[65], char *err, size_t errlen);

/* Checks r offline: r->mac must be 64 lowercase hex digits equal (compared in constant time)
 * to charter_receipt_mac(r, key). Returns 0 when valid; -CHARTER_INVALID_ARGUMENT when r is
 * malformed; -CHARTER_UNAUTHENTICATED when the MAC does not match (the receipt was altered or
 * signed under another key); -CHARTER_INTERNAL when OpenSSL fails. reason (n bytes) says why
 * on failure, "valid" on success. */
int charter_receipt_verify(const Charter__V1__Receipt *r, const unsigned char *key, size_t keylen,
                           char *reason, size_t n);

/* Reads the integrity key file at path: a regular file owned by the effective user, neither
 * readable nor writable by group or others (mode 0600 or 0400), of CHARTER_RECEIPT_KEY_MIN to
 * CHARTER_RECEIPT_KEY_MAX bytes, taken byte for byte (a trailing newline is part of the key).
 * On success returns 0, copies the bytes into key (cap bytes, at least
 * CHARTER_RECEIPT_KEY_MAX) and sets *len. Otherwise returns -CHARTER_INVALID_ARGUMENT (or
 * -CHARTER_NOT_FOUND when the file cannot be opened) with one line in err saying what is wrong
 * and how to fix it; the line names the path, never the contents. The caller should wipe key
 * (OPENSSL_cleanse) when done with it. */
int charter_receipt_key_load(const char *path, unsigned char *key, size_t cap, size_t *len,
                             char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
