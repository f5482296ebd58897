/*
 * digest.h - message digests as charter writes them: lowercase hex of OpenSSL's SHA-256 and
 * SHA-1. One place for the hex form every hash of the project takes (content hashes, event
 * hashes, fingerprints, the bytes compared with Redis's sha1hex).
 */
#ifndef CHARTER_DIGEST_H
#define CHARTER_DIGEST_H

#include <stdbool.h>
#include <stddef.h>

/* True when the n bytes at s are all lowercase hex digits (the form digest_hex writes). */
bool digest_is_hex(const char *s, size_t n);

/* Lowercase hex of n bytes of md into hex, which holds 2n + 1 bytes (terminated). */
void digest_hex(const unsigned char *md, size_t n, char *hex);

/* Hex SHA-256 of len bytes into hex (65 bytes). Returns 0, or -1 when OpenSSL fails; hex is
 * then 64 '0' digits, which match no stored hash, so a caller comparing fails closed. */
int digest_sha256_hex(const void *data, size_t len, char hex[65]);

/* Hex SHA-1 of len bytes into hex (41 bytes). Returns 0, or -1 when OpenSSL fails; hex is then
 * 40 'x', which is not hex and matches nothing. */
int digest_sha1_hex(const void *data, size_t len, char hex[41]);

#endif
