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
 * An invoke receipt (the committed effect of a tool call, Gate/Invoke) is a delivery receipt
 * with kind=invoke, payload_hash the SHA-256 of the arguments as committed, recipient the
 * destination class ("" for none), and one more line after grant_chain:
 *
 *   lineage=<artifact id>:<hex SHA-1 of its lineage summary>,... (sorted; empty when every
 *           value came from the run's task)
 *
 * one "name=value" line each, in exactly this order, every line ended by "\n", values as the
 * receipt carries them (no trimming, no escaping). A value may not hold a newline, a carriage
 * return or a NUL, and a list item may not hold a comma or be empty, so the text is unambiguous;
 * a receipt whose fields violate this, or that sets a field its kind does not list (the MAC
 * would not cover it), is malformed and never verifies.
 *
 * A charterd started with --signing-key also signs each receipt with Ed25519, so anyone holding
 * the public key can check it offline without a secret. The signed text is the MAC's text with
 * its first line replaced and three lines added at the end:
 *
 *   format=charter-signed-receipt-1
 *   ... every line of the MAC's text after its first ...
 *   chain_seq=<decimal: the receipt's place in its run's chain, from 1>
 *   prev_receipt_hash=<hex SHA-256 of the signed text of the run's previous delivery receipt,
 *                      "" for the first>
 *   key_id=<hex SHA-256 of the raw 32-byte Ed25519 public key>
 *
 * The receipts of one run form a chain: each delivery receipt names the hash of the delivery
 * receipt before it (chain_seq one more), and a run receipt names the last delivery receipt
 * of the run as it ended (chain_seq one more than that one's) without extending the chain, so a
 * receipt removed from, or moved within, the receipts of a run shows offline. The signature
 * fields (signature, key_id, signed_text, chain_seq, prev_receipt_hash) are not part of the
 * MAC's text: HMAC verification ignores them.
 */
#ifndef CHARTER_RECEIPT_H
#define CHARTER_RECEIPT_H

#include <stddef.h>

#include "charter_codes.h"
#include "charter.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds of an integrity key file, in bytes. */
#define CHARTER_RECEIPT_KEY_MIN 32
#define CHARTER_RECEIPT_KEY_MAX 4096

/* The first line of every receipt's canonical text. */
#define CHARTER_RECEIPT_FORMAT "charter-receipt-1"
/* The first line of a run receipt that records budget and counters (two lines after
 * deliveries: "budget=..." and "counters=..."); receipts without them keep format 1, so every
 * receipt issued before still verifies. */
#define CHARTER_RECEIPT_FORMAT_2 "charter-receipt-2"

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

/* The first line of every signed receipt's text. */
#define CHARTER_RECEIPT_SIGNED_FORMAT "charter-signed-receipt-1"
/* The signed text's first line for a charter-receipt-2 receipt. */
#define CHARTER_RECEIPT_SIGNED_FORMAT_2 "charter-signed-receipt-2"

/* The verdict of an offline signature or chain check, each with its own message. */
typedef enum {
    CHARTER_RECEIPT_VALID = 0,
    CHARTER_RECEIPT_MALFORMED = 1,      /* fields the text cannot represent, or a bad key file */
    CHARTER_RECEIPT_UNSIGNED = 2,       /* no signature (or no key id) on the receipt */
    CHARTER_RECEIPT_WRONG_KEY = 3,      /* signed by another key than the public key given */
    CHARTER_RECEIPT_ALTERED = 4,        /* a byte of the receipt changed since it was signed */
    CHARTER_RECEIPT_CHAIN_BROKEN = 5,   /* a receipt of the run is missing between two given */
    CHARTER_RECEIPT_CHAIN_REORDERED = 6 /* the receipts are not in their chain's order */
} charter_receipt_verdict;

/* The verdict's stable name: "valid", "malformed", "unsigned", "wrong_key", "altered",
 * "chain_broken", "chain_reordered". */
const char *charter_receipt_verdict_name(charter_receipt_verdict v);

/* Builds the signed text of r (layout above) into *text (malloc'd, terminated, caller frees),
 * its length into *len. r->chain_seq must be 1 or more, r->prev_receipt_hash empty or 64 hex
 * digits, r->key_id 64 hex digits. Returns as charter_receipt_text. */
int charter_receipt_signed_text(const Charter__V1__Receipt *r, char **text, size_t *len, char *err,
                                size_t errlen);

/* The hash that the next receipt of r's run names: hex SHA-256 of r's signed text, into hex
 * (65 bytes). Returns as charter_receipt_signed_text, or -CHARTER_INTERNAL. */
int charter_receipt_hash(const Charter__V1__Receipt *r, char hex[65], char *err, size_t errlen);

/* The key id of an Ed25519 public key given as PEM (pem_len bytes, "-----BEGIN PUBLIC
 * KEY-----"): hex SHA-256 of the raw 32-byte key, into hex (65 bytes). Returns 0,
 * -CHARTER_INVALID_ARGUMENT (not a PEM public key, or not Ed25519; err says which), or
 * -CHARTER_INTERNAL. */
int charter_receipt_key_id(const char *pem, size_t pem_len, char hex[65], char *err, size_t errlen);

/* Checks r's Ed25519 signature offline against the public key pem (pem_len bytes), with no
 * server and no secret: r must carry a signature (base64) and a key id equal to the public
 * key's, its signed_text (when set) must be the text rebuilt from its fields, and the signature
 * must verify over that text. Returns 0 with *verdict CHARTER_RECEIPT_VALID; -CHARTER_
 * UNAUTHENTICATED with *verdict saying which check failed; -CHARTER_INVALID_ARGUMENT for a
 * public key that is not Ed25519 PEM (*verdict MALFORMED); -CHARTER_INTERNAL when OpenSSL
 * fails. reason (n bytes) says why, "valid" on success. */
int charter_receipt_verify_signed(const Charter__V1__Receipt *r, const char *pem, size_t pem_len,
                                  charter_receipt_verdict *verdict, char *reason, size_t n);

/* Checks that rs[0..count) (receipts of one run, each already verified on its own) are the
 * run's chain in order with nothing left out between them: the first is the run's first
 * receipt (chain_seq 1), every delivery receipt names the delivery receipt given before it,
 * and a run receipt names the last delivery receipt given before it. Returns 0 (*verdict
 * VALID), or -CHARTER_UNAUTHENTICATED with *verdict CHAIN_REORDERED, CHAIN_BROKEN or MALFORMED
 * (receipts of several runs, unsigned ones), *bad the index of the first receipt that does not
 * fit and reason (n bytes) why. -CHARTER_INTERNAL when OpenSSL fails. */
int charter_receipt_verify_chain(const Charter__V1__Receipt *const *rs, size_t count,
                                 charter_receipt_verdict *verdict, size_t *bad, char *reason,
                                 size_t n);

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
