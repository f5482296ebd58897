/*
 * integrity.h - the integrity keys of charterd, in one room: the HMAC-SHA256 key that seals
 * events and MACs receipts (--integrity-key) and the Ed25519 key that signs receipts
 * (--signing-key). They are loaded once at startup and no other file holds their bytes: the
 * rest of charterd asks for a MAC, a signature or a MAC check over a text it hands in.
 *
 * Both keys are secret files the operator keeps: a regular file owned by the user running
 * charterd with no group or other permission bits. Neither ever reaches the database, a log
 * line, a receipt or an error message; the public half of the signing key (and its id, the
 * hex SHA-256 of the raw public key) is what receipts and Evidence/GetReceiptKey show.
 */
#ifndef CHARTER_INTEGRITY_H
#define CHARTER_INTEGRITY_H

#include <stdbool.h>
#include <stddef.h>

#include "charter.pb-c.h"

/* Reads the integrity key file at path (rules of charter_receipt_key_load in receipt.h) and
 * keeps it. Call once at startup, before any thread uses this module. Returns STATUS_OK, or
 * STATUS_EINVAL with one line in err (errlen bytes) naming the path, never the contents. */
int integrity_load_key(const char *path, char *err, size_t errlen);

/* The default integrity key at path (charterd's <data folder>/integrity.key): loaded as by
 * integrity_load_key when the file exists. When it does not and create is set it is made
 * first: 32 random bytes from OpenSSL's RAND_bytes written as 64 lowercase hex digits and a
 * newline (what `openssl rand -hex 32` writes) to a new file of mode 0600 opened with O_EXCL, so
 * a file another start made meanwhile is loaded instead, never replaced. Returns STATUS_OK with
 * *created saying whether it was made, STATUS_ENOTFOUND when there is no file and create is
 * false, or STATUS_EINVAL with one line in err (errlen bytes) naming the path, never the key. */
int integrity_default_key(const char *path, bool create, bool *created, char *err, size_t errlen);

/* Keeps key_len bytes of key (copied) as the integrity key, or none for key_len 0. For tests
 * and tools; charterd loads its key with integrity_load_key. Returns STATUS_OK or STATUS_EINVAL
 * (longer than CHARTER_RECEIPT_KEY_MAX). */
int integrity_set_key(const unsigned char *key, size_t key_len);

/* Reads the Ed25519 private key (PEM, unencrypted) at path through OpenSSL's EVP API and keeps
 * it for signing receipts. The file must be a regular file owned by the effective user, with no
 * group or other permission bits (mode 0600 or 0400). Returns STATUS_OK, or STATUS_EINVAL with
 * one line in err saying what is wrong (not Ed25519, mode, owner, unreadable) and how to fix
 * it; the key's bytes never appear in err. */
int integrity_load_signing_key(const char *path, char *err, size_t errlen);

/* Wipes both keys from memory (at exit). */
void integrity_forget(void);

/* True when an integrity (HMAC) key is kept. */
bool integrity_keyed(void);

/* True when a signing key is kept. */
bool integrity_signing(void);

/* Lowercase hex HMAC-SHA256 under the integrity key of len bytes of data into hex (65 bytes).
 * Returns STATUS_OK, STATUS_ENOKEY (no key; hex all zeros) or STATUS_EPROTO (OpenSSL failed). */
int integrity_mac(const void *data, size_t len, char hex[65]);

/* Checks that hex is integrity_mac of len bytes of data, comparing in constant time. Returns
 * STATUS_OK, STATUS_ENOKEY (no key), STATUS_EREFUSED (it is not: forged, altered or made under
 * another key) or STATUS_EPROTO (OpenSSL failed). */
int integrity_mac_verify(const void *data, size_t len, const char *hex);

/* integrity_mac of the fixed text "charter integrity key check": what the graph records so that
 * a later start with another key is refused. Returns as integrity_mac. */
int integrity_key_check(char hex[65]);

/* The text integrity_key_check MACs: a graph's key_check is its HMAC-SHA256 under the key. */
#define INTEGRITY_KEY_CHECK_TEXT "charter integrity key check"

/* Checks r's MAC under the integrity key (charter_receipt_verify). Returns STATUS_OK,
 * STATUS_ENOKEY, or STATUS_EREFUSED (malformed or does not verify; reason, n bytes, says why). */
int integrity_receipt_check(const Charter__V1__Receipt *r, char *reason, size_t n);

/* The Ed25519 signature of len bytes of data under the signing key, base64 (88 characters and
 * a NUL) into b64. Returns STATUS_OK, STATUS_ENOKEY (no signing key) or STATUS_EPROTO. */
int integrity_sign(const void *data, size_t len, char b64[89]);

/* The signing key's id (hex SHA-256 of the raw public key) and its public key as PEM: texts
 * owned by this module, valid until integrity_forget; "" without a signing key. */
const char *integrity_key_id(void);
const char *integrity_public_pem(void);

#endif
