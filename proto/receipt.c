/*
 * receipt.c - canonical receipt text, HMAC-SHA256, the Ed25519 signed text and its offline
 * verifier, the run's receipt chain and the key file (see receipt.h for the texts' layout).
 *
 * Compiled into charterd (which signs) and libcharter (which verifies, with no server), so
 * both build the text with this one function. Validation is strict on purpose: any field the
 * text could not represent unambiguously, or that the MAC would not cover, makes the receipt
 * malformed rather than silently ignored.
 */
#include "receipt.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int receipt_fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int receipt_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        if (vsnprintf(err, errlen, fmt, ap) < 0)
            err[0] = '\0';
        va_end(ap);
    }
    return code;
}

/* A growing text buffer; a failed append leaves failed set and the text unusable. */
typedef struct {
    char *data;
    size_t len, cap;
    bool failed;
} receipt_buf;

static void buf_add(receipt_buf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (grown == NULL) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void buf_str(receipt_buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

/* A value fits a line when it holds no newline, carriage return (or NUL: C strings). */
static bool line_safe(const char *s)
{
    return strpbrk(s, "\r\n") == NULL;
}

static const char *or_empty(const char *s)
{
    return s != NULL ? s : "";
}

/* One "name=value\n" line; value must be line safe. */
static int add_line(receipt_buf *b, const char *name, const char *value, char *err, size_t errlen)
{
    value = or_empty(value);
    if (!line_safe(value))
        return receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                            "receipt field %s holds a line break", name);
    buf_str(b, name);
    buf_str(b, "=");
    buf_str(b, value);
    buf_str(b, "\n");
    return 0;
}

/* One "name=a,b,c\n" line; every item non-empty, line safe and without a comma. */
static int add_list(receipt_buf *b, const char *name, char *const *items, size_t n, char *err,
                    size_t errlen)
{
    buf_str(b, name);
    buf_str(b, "=");
    for (size_t i = 0; i < n; i++) {
        const char *v = or_empty(items[i]);
        if (*v == '\0' || !line_safe(v) || strchr(v, ',') != NULL)
            return receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                                "receipt field %s[%zu] is empty or holds a comma or line break",
                                name, i);
        if (i > 0)
            buf_str(b, ",");
        buf_str(b, v);
    }
    buf_str(b, "\n");
    return 0;
}

/* A field that must be empty for this kind, because the MAC would not cover it. */
static int must_be_unset(bool unset, const char *kind, const char *name, char *err, size_t errlen)
{
    if (unset)
        return 0;
    return receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                        "receipt field %s is not part of a %s receipt", name, kind);
}

static bool blank(const char *s)
{
    return s == NULL || *s == '\0';
}

/* The fields r's kind takes are set and the others unset (the MAC would not cover them). An
 * invoke receipt is a delivery receipt of a tool call that also names lineage. Returns 0 or
 * -CHARTER_INVALID_ARGUMENT with err saying which field. */
static int check_fields(const Charter__V1__Receipt *r, const char *kind, bool invoke, bool delivery,
                        char *err, size_t errlen)
{
    if (!delivery && strcmp(kind, "run") != 0)
        return receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                            "receipt kind must be \"delivery\", \"invoke\" or \"run\"");
    if (!invoke && r->n_lineage > 0)
        return receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                            "receipt field lineage is not part of a %s receipt", kind);
    if (blank(r->run_id))
        return receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT, "receipt has no run_id");
    int rc = 0;
    if (delivery) {
        if (blank(r->invocation_id))
            return receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                                "delivery receipt has no invocation_id");
        if ((rc = must_be_unset(blank(r->status), kind, "status", err, errlen)) != 0 ||
            (rc = must_be_unset(r->last_seq == 0, kind, "last_seq", err, errlen)) != 0 ||
            (rc = must_be_unset(blank(r->last_event_hash), kind, "last_event_hash", err, errlen)) !=
                0 ||
            (rc = must_be_unset(r->n_deliveries == 0, kind, "deliveries", err, errlen)) != 0 ||
            (rc = must_be_unset(blank(r->budget), kind, "budget", err, errlen)) != 0 ||
            (rc = must_be_unset(blank(r->counters), kind, "counters", err, errlen)) != 0)
            return rc;
    } else {
        if (blank(r->status))
            return receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                                "run receipt has no status");
        if ((rc = must_be_unset(blank(r->invocation_id), kind, "invocation_id", err, errlen)) !=
                0 ||
            (rc = must_be_unset(blank(r->payload_hash), kind, "payload_hash", err, errlen)) != 0 ||
            (rc = must_be_unset(blank(r->recipient), kind, "recipient", err, errlen)) != 0 ||
            (rc = must_be_unset(blank(r->tool), kind, "tool", err, errlen)) != 0 ||
            (rc = must_be_unset(r->n_grant_chain == 0, kind, "grant_chain", err, errlen)) != 0)
            return rc;
    }
    return 0;
}

int charter_receipt_text(const Charter__V1__Receipt *r, char **text, size_t *len, char *err,
                         size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (text == NULL || len == NULL)
        return receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT, "no output for the text");
    *text = NULL;
    *len = 0;
    if (r == NULL)
        return receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT, "no receipt");
    const char *kind = or_empty(r->kind);
    bool invoke = strcmp(kind, "invoke") == 0;
    bool delivery = invoke || strcmp(kind, "delivery") == 0;
    int rc = check_fields(r, kind, invoke, delivery, err, errlen);
    if (rc != 0)
        return rc;

    /* Budget and counters make it format 2; without them the text is format 1's, unchanged. */
    bool v2 = !delivery && (!blank(r->budget) || !blank(r->counters));
    receipt_buf b = {NULL, 0, 0, false};
    rc =
        add_line(&b, "format", v2 ? CHARTER_RECEIPT_FORMAT_2 : CHARTER_RECEIPT_FORMAT, err, errlen);
    if (rc == 0)
        rc = add_line(&b, "kind", kind, err, errlen);
    if (rc == 0)
        rc = add_line(&b, "run_id", r->run_id, err, errlen);
    if (delivery) {
        if (rc == 0)
            rc = add_line(&b, "invocation_id", r->invocation_id, err, errlen);
        if (rc == 0)
            rc = add_line(&b, "payload_hash", r->payload_hash, err, errlen);
        if (rc == 0)
            rc = add_line(&b, "recipient", r->recipient, err, errlen);
        if (rc == 0)
            rc = add_line(&b, "tool", r->tool, err, errlen);
        if (rc == 0)
            rc = add_list(&b, "grant_chain", r->grant_chain, r->n_grant_chain, err, errlen);
        if (rc == 0 && invoke)
            rc = add_list(&b, "lineage", r->lineage, r->n_lineage, err, errlen);
    } else {
        char seq[32];
        snprintf(seq, sizeof seq, "%llu", (unsigned long long)r->last_seq);
        if (rc == 0)
            rc = add_line(&b, "status", r->status, err, errlen);
        if (rc == 0)
            rc = add_line(&b, "last_seq", seq, err, errlen);
        if (rc == 0)
            rc = add_line(&b, "last_event_hash", r->last_event_hash, err, errlen);
        if (rc == 0)
            rc = add_list(&b, "deliveries", r->deliveries, r->n_deliveries, err, errlen);
        if (rc == 0 && v2)
            rc = add_line(&b, "budget", or_empty(r->budget), err, errlen);
        if (rc == 0 && v2)
            rc = add_line(&b, "counters", or_empty(r->counters), err, errlen);
    }
    if (rc == 0)
        rc = add_line(&b, "time", r->time, err, errlen);
    if (rc == 0)
        rc = add_line(&b, "evaluator", r->evaluator, err, errlen);
    if (rc == 0 && b.failed)
        rc = receipt_fail(err, errlen, -CHARTER_RESOURCE_EXHAUSTED, "out of memory");
    if (rc != 0) {
        free(b.data);
        return rc;
    }
    *text = b.data;
    *len = b.len;
    return 0;
}

int charter_hmac_sha256_hex(const unsigned char *key, size_t keylen, const void *data, size_t len,
                            char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    memset(hex, '0', 64);
    hex[64] = '\0';
    if (key == NULL || keylen == 0 || keylen > (size_t)INT32_MAX)
        return -CHARTER_INTERNAL;
    if (HMAC(EVP_sha256(), key, (int)keylen, data, len, md, &mdlen) == NULL || mdlen != 32)
        return -CHARTER_INTERNAL;
    for (unsigned i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    OPENSSL_cleanse(md, sizeof md);
    return 0;
}

int charter_receipt_mac(const Charter__V1__Receipt *r, const unsigned char *key, size_t keylen,
                        char mac[65], char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    memset(mac, '0', 64);
    mac[64] = '\0';
    int rc = charter_receipt_text(r, &text, &len, err, errlen);
    if (rc != 0)
        return rc;
    rc = charter_hmac_sha256_hex(key, keylen, text, len, mac);
    free(text);
    if (rc != 0)
        return receipt_fail(err, errlen, rc, "HMAC-SHA256 failed (check the OpenSSL library)");
    return 0;
}

static bool hex64(const char *s)
{
    if (s == NULL || strlen(s) != 64)
        return false;
    for (size_t i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

int charter_receipt_verify(const Charter__V1__Receipt *r, const unsigned char *key, size_t keylen,
                           char *reason, size_t n)
{
    char mac[65];
    if (r == NULL)
        return receipt_fail(reason, n, -CHARTER_INVALID_ARGUMENT, "no receipt");
    if (!hex64(r->mac))
        return receipt_fail(reason, n, -CHARTER_INVALID_ARGUMENT,
                            "the receipt's mac is not 64 lowercase hex digits");
    int rc = charter_receipt_mac(r, key, keylen, mac, reason, n);
    if (rc != 0)
        return rc;
    if (CRYPTO_memcmp(mac, r->mac, 64) != 0)
        return receipt_fail(reason, n, -CHARTER_UNAUTHENTICATED,
                            "the mac does not match: the receipt was altered or signed under "
                            "another key");
    return receipt_fail(reason, n, 0, "valid");
}

const char *charter_receipt_verdict_name(charter_receipt_verdict v)
{
    switch (v) {
    case CHARTER_RECEIPT_VALID:
        return "valid";
    case CHARTER_RECEIPT_MALFORMED:
        return "malformed";
    case CHARTER_RECEIPT_UNSIGNED:
        return "unsigned";
    case CHARTER_RECEIPT_WRONG_KEY:
        return "wrong_key";
    case CHARTER_RECEIPT_ALTERED:
        return "altered";
    case CHARTER_RECEIPT_CHAIN_BROKEN:
        return "chain_broken";
    case CHARTER_RECEIPT_CHAIN_REORDERED:
        return "chain_reordered";
    }
    return "malformed";
}

int charter_receipt_signed_text(const Charter__V1__Receipt *r, char **text, size_t *len, char *err,
                                size_t errlen)
{
    char *mac_text = NULL;
    size_t mac_len = 0;
    int rc = charter_receipt_text(r, &mac_text, &mac_len, err, errlen);
    if (rc != 0)
        return rc;
    const char *prev = or_empty(r->prev_receipt_hash);
    if (r->chain_seq == 0)
        rc = receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                          "signed receipt has no chain_seq (1 or more)");
    else if (*prev != '\0' && !hex64(prev))
        rc = receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                          "signed receipt's prev_receipt_hash is not empty or 64 hex digits");
    else if (!hex64(r->key_id))
        rc = receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                          "signed receipt's key_id is not 64 lowercase hex digits");
    if (rc != 0) {
        free(mac_text);
        return rc;
    }
    /* The MAC's text after its first line (the format line). */
    const char *body = strchr(mac_text, '\n') + 1;
    char seq[32];
    snprintf(seq, sizeof seq, "%llu", (unsigned long long)r->chain_seq);
    receipt_buf b = {NULL, 0, 0, false};
    bool v2 = strncmp(mac_text, "format=" CHARTER_RECEIPT_FORMAT_2 "\n",
                      strlen("format=" CHARTER_RECEIPT_FORMAT_2 "\n")) == 0;
    rc =
        add_line(&b, "format", v2 ? CHARTER_RECEIPT_SIGNED_FORMAT_2 : CHARTER_RECEIPT_SIGNED_FORMAT,
                 err, errlen);
    buf_add(&b, body, mac_len - (size_t)(body - mac_text));
    if (rc == 0)
        rc = add_line(&b, "chain_seq", seq, err, errlen);
    if (rc == 0)
        rc = add_line(&b, "prev_receipt_hash", prev, err, errlen);
    if (rc == 0)
        rc = add_line(&b, "key_id", r->key_id, err, errlen);
    free(mac_text);
    if (rc == 0 && b.failed)
        rc = receipt_fail(err, errlen, -CHARTER_RESOURCE_EXHAUSTED, "out of memory");
    if (rc != 0) {
        free(b.data);
        return rc;
    }
    *text = b.data;
    *len = b.len;
    return 0;
}

static void hex_of(const unsigned char *md, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[2 * n] = '\0';
}

static int sha256_hex(const void *data, size_t len, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    memset(hex, '0', 64);
    hex[64] = '\0';
    if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
        return -CHARTER_INTERNAL;
    hex_of(md, 32, hex);
    return 0;
}

int charter_receipt_hash(const Charter__V1__Receipt *r, char hex[65], char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    memset(hex, '0', 64);
    hex[64] = '\0';
    int rc = charter_receipt_signed_text(r, &text, &len, err, errlen);
    if (rc != 0)
        return rc;
    rc = sha256_hex(text, len, hex);
    free(text);
    if (rc != 0)
        return receipt_fail(err, errlen, rc, "SHA-256 failed (check the OpenSSL library)");
    return 0;
}

/* The Ed25519 public key of a PEM text; NULL with err set when it is not one. */
static EVP_PKEY *public_key_of(const char *pem, size_t pem_len, char *err, size_t errlen)
{
    if (pem == NULL || pem_len == 0 || pem_len > INT32_MAX) {
        receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT, "no public key given");
        return NULL;
    }
    BIO *bio = BIO_new_mem_buf(pem, (int)pem_len);
    EVP_PKEY *key = bio != NULL ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    if (key == NULL) {
        receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                     "the public key is not a PEM public key (make it with: openssl pkey -in "
                     "KEY -pubout -out PUB.pem, or charter receipt-key)");
        return NULL;
    }
    if (EVP_PKEY_id(key) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(key);
        receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                     "the public key is not an Ed25519 key (receipts are signed with Ed25519)");
        return NULL;
    }
    return key;
}

static int key_id_of(EVP_PKEY *key, char hex[65])
{
    unsigned char raw[32];
    size_t raw_len = sizeof raw;
    if (EVP_PKEY_get_raw_public_key(key, raw, &raw_len) != 1 || raw_len != 32)
        return -CHARTER_INTERNAL;
    return sha256_hex(raw, raw_len, hex);
}

int charter_receipt_key_id(const char *pem, size_t pem_len, char hex[65], char *err, size_t errlen)
{
    memset(hex, '0', 64);
    hex[64] = '\0';
    EVP_PKEY *key = public_key_of(pem, pem_len, err, errlen);
    if (key == NULL)
        return -CHARTER_INVALID_ARGUMENT;
    int rc = key_id_of(key, hex);
    EVP_PKEY_free(key);
    if (rc != 0)
        return receipt_fail(err, errlen, rc, "cannot read the raw public key (check OpenSSL)");
    return 0;
}

static int verdict_fail(charter_receipt_verdict *verdict, charter_receipt_verdict v, char *reason,
                        size_t n, int code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static int verdict_fail(charter_receipt_verdict *verdict, charter_receipt_verdict v, char *reason,
                        size_t n, int code, const char *fmt, ...)
{
    *verdict = v;
    if (reason != NULL && n > 0) {
        va_list ap;
        va_start(ap, fmt);
        if (vsnprintf(reason, n, fmt, ap) < 0)
            reason[0] = '\0';
        va_end(ap);
    }
    return code;
}

int charter_receipt_verify_signed(const Charter__V1__Receipt *r, const char *pem, size_t pem_len,
                                  charter_receipt_verdict *verdict, char *reason, size_t n)
{
    const int bad = -CHARTER_UNAUTHENTICATED;
    charter_receipt_verdict local;
    if (verdict == NULL)
        verdict = &local;
    *verdict = CHARTER_RECEIPT_MALFORMED;
    char why[200] = "";
    EVP_PKEY *key = public_key_of(pem, pem_len, why, sizeof why);
    if (key == NULL)
        return verdict_fail(verdict, CHARTER_RECEIPT_MALFORMED, reason, n,
                            -CHARTER_INVALID_ARGUMENT, "%s", why);
    char *text = NULL;
    size_t len = 0;
    unsigned char sig[128];
    EVP_MD_CTX *ctx = NULL;
    int rc = 0;
    char want[65];
    if (key_id_of(key, want) != 0) {
        rc = verdict_fail(verdict, CHARTER_RECEIPT_MALFORMED, reason, n, -CHARTER_INTERNAL,
                          "cannot read the raw public key (check the OpenSSL library)");
        goto out;
    }
    if (r == NULL) {
        rc = verdict_fail(verdict, CHARTER_RECEIPT_MALFORMED, reason, n, -CHARTER_INVALID_ARGUMENT,
                          "no receipt");
        goto out;
    }
    if (blank(r->signature) || blank(r->key_id)) {
        rc = verdict_fail(verdict, CHARTER_RECEIPT_UNSIGNED, reason, n, bad,
                          "the receipt carries no signature (it was issued without a signing "
                          "key, or its signature was removed)");
        goto out;
    }
    if (strcmp(r->key_id, want) != 0) {
        rc = verdict_fail(verdict, CHARTER_RECEIPT_WRONG_KEY, reason, n, bad,
                          "the receipt was signed by key %.64s, not by the public key given (key "
                          "%s)",
                          r->key_id, want);
        goto out;
    }
    if (charter_receipt_signed_text(r, &text, &len, why, sizeof why) != 0) {
        rc = verdict_fail(verdict, CHARTER_RECEIPT_MALFORMED, reason, n, -CHARTER_INVALID_ARGUMENT,
                          "%s", why);
        goto out;
    }
    if (!blank(r->signed_text) &&
        (strlen(r->signed_text) != len || memcmp(r->signed_text, text, len) != 0)) {
        rc = verdict_fail(verdict, CHARTER_RECEIPT_ALTERED, reason, n, bad,
                          "the receipt was altered: its fields differ from the text it signs");
        goto out;
    }
    /* Ed25519 signatures are 64 bytes: 88 base64 characters with their padding. */
    size_t b64 = strlen(r->signature);
    int got = b64 == 88 ? EVP_DecodeBlock(sig, (const unsigned char *)r->signature, 88) : -1;
    if (got != 66 || r->signature[86] != '=' || r->signature[87] != '=') {
        rc = verdict_fail(verdict, CHARTER_RECEIPT_ALTERED, reason, n, bad,
                          "the receipt was altered: its signature is not a base64 Ed25519 "
                          "signature");
        goto out;
    }
    if ((ctx = EVP_MD_CTX_new()) == NULL || EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) != 1) {
        rc = verdict_fail(verdict, CHARTER_RECEIPT_MALFORMED, reason, n, -CHARTER_INTERNAL,
                          "cannot start an Ed25519 verification (check the OpenSSL library)");
        goto out;
    }
    if (EVP_DigestVerify(ctx, sig, 64, (const unsigned char *)text, len) != 1) {
        rc = verdict_fail(verdict, CHARTER_RECEIPT_ALTERED, reason, n, bad,
                          "the receipt was altered: the signature does not match its text");
        goto out;
    }
    rc = verdict_fail(verdict, CHARTER_RECEIPT_VALID, reason, n, 0, "valid");
out:
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(key);
    free(text);
    return rc;
}

int charter_receipt_verify_chain(const Charter__V1__Receipt *const *rs, size_t count,
                                 charter_receipt_verdict *verdict, size_t *bad, char *reason,
                                 size_t n)
{
    const int no = -CHARTER_UNAUTHENTICATED;
    charter_receipt_verdict local_v;
    size_t local_b;
    if (verdict == NULL)
        verdict = &local_v;
    if (bad == NULL)
        bad = &local_b;
    *bad = 0;
    if (rs == NULL || count == 0)
        return verdict_fail(verdict, CHARTER_RECEIPT_MALFORMED, reason, n,
                            -CHARTER_INVALID_ARGUMENT, "no receipts");
    for (size_t i = 0; i < count; i++) {
        *bad = i;
        if (rs[i] == NULL || blank(rs[i]->run_id) || rs[i]->chain_seq == 0)
            return verdict_fail(verdict, CHARTER_RECEIPT_MALFORMED, reason, n, no,
                                "receipt %zu is not a signed receipt of a run's chain", i + 1);
        if (strcmp(rs[i]->run_id, rs[0]->run_id) != 0)
            return verdict_fail(verdict, CHARTER_RECEIPT_MALFORMED, reason, n, no,
                                "receipt %zu is of run %s, receipt 1 of run %s: a chain is one "
                                "run's",
                                i + 1, rs[i]->run_id, rs[0]->run_id);
    }
    /* Order first: a place lower than one given before it is a reordering, not a gap. */
    for (size_t i = 1; i < count; i++) {
        for (size_t j = 0; j < i; j++) {
            if (rs[i]->chain_seq < rs[j]->chain_seq) {
                *bad = i;
                return verdict_fail(verdict, CHARTER_RECEIPT_CHAIN_REORDERED, reason, n, no,
                                    "the receipts are out of order: receipt %zu (place %llu in "
                                    "run %s's chain) comes after receipt %zu (place %llu)",
                                    i + 1, (unsigned long long)rs[i]->chain_seq, rs[i]->run_id,
                                    j + 1, (unsigned long long)rs[j]->chain_seq);
            }
        }
    }
    /* Continuity: every receipt names the last delivery receipt given before it. */
    const Charter__V1__Receipt *link = NULL;
    size_t link_at = 0;
    char link_hash[65] = "";
    char why[200];
    for (size_t i = 0; i < count; i++) {
        const Charter__V1__Receipt *r = rs[i];
        uint64_t want_seq = link != NULL ? link->chain_seq + 1 : 1;
        *bad = i;
        if (strcmp(or_empty(r->prev_receipt_hash), link_hash) != 0 || r->chain_seq != want_seq) {
            if (link == NULL)
                return verdict_fail(verdict, CHARTER_RECEIPT_CHAIN_BROKEN, reason, n, no,
                                    "a receipt was removed: receipt 1 is place %llu of run %s's "
                                    "chain, and the receipts before it are missing",
                                    (unsigned long long)r->chain_seq, r->run_id);
            return verdict_fail(verdict, CHARTER_RECEIPT_CHAIN_BROKEN, reason, n, no,
                                "a receipt was removed: receipt %zu (place %llu of run %s's "
                                "chain) does not follow receipt %zu (place %llu)",
                                i + 1, (unsigned long long)r->chain_seq, r->run_id, link_at + 1,
                                (unsigned long long)link->chain_seq);
        }
        if (strcmp(or_empty(r->kind), "run") != 0) {
            int rc = charter_receipt_hash(r, link_hash, why, sizeof why);
            if (rc != 0)
                return verdict_fail(verdict, CHARTER_RECEIPT_MALFORMED, reason, n,
                                    rc == -CHARTER_INTERNAL ? rc : no, "receipt %zu: %s", i + 1,
                                    why);
            link = r;
            link_at = i;
        }
    }
    *bad = 0;
    return verdict_fail(verdict, CHARTER_RECEIPT_VALID, reason, n, 0, "valid");
}

int charter_receipt_key_load(const char *path, unsigned char *key, size_t cap, size_t *len,
                             char *err, size_t errlen)
{
    if (len != NULL)
        *len = 0;
    if (path == NULL || *path == '\0' || key == NULL || len == NULL ||
        cap < CHARTER_RECEIPT_KEY_MAX)
        return receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                            "no integrity key file given (pass a file of at least %d secret "
                            "bytes, e.g. made with: openssl rand -hex 32 > FILE; chmod 600 FILE)",
                            CHARTER_RECEIPT_KEY_MIN);
    /* Check the file that was opened, not the path again: nothing can be swapped in between. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return receipt_fail(err, errlen, -CHARTER_NOT_FOUND,
                            "cannot open the integrity key file %s: %s (check the path and that "
                            "this user can read it)",
                            path, strerror(errno));
    struct stat sb;
    int rc = 0;
    if (fstat(fd, &sb) != 0) {
        rc = receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                          "cannot stat the integrity key file %s: %s (check the file)", path,
                          strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        rc = receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                          "the integrity key file %s is not a regular file (point to the key "
                          "file itself)",
                          path);
    } else if (sb.st_uid != geteuid()) {
        rc = receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                          "the integrity key file %s is owned by uid %lu, not by this user (uid "
                          "%lu) (chown it to the user charter runs as)",
                          path, (unsigned long)sb.st_uid, (unsigned long)geteuid());
    } else if ((sb.st_mode & 077) != 0) {
        rc = receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                          "the integrity key file %s is mode %03o: readable or writable by "
                          "group or others (chmod 600 %s)",
                          path, (unsigned)(sb.st_mode & 0777), path);
    } else if (sb.st_size < CHARTER_RECEIPT_KEY_MIN || sb.st_size > CHARTER_RECEIPT_KEY_MAX) {
        rc = receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                          "the integrity key file %s holds %lld bytes, not %d to %d (make one "
                          "with: openssl rand -hex 32 > FILE)",
                          path, (long long)sb.st_size, CHARTER_RECEIPT_KEY_MIN,
                          CHARTER_RECEIPT_KEY_MAX);
    }
    /* One byte more than the largest key is read, so a file that grew since fstat is caught. */
    unsigned char extra;
    size_t got = 0;
    while (rc == 0) {
        bool over = got == CHARTER_RECEIPT_KEY_MAX;
        ssize_t k = over ? read(fd, &extra, 1) : read(fd, key + got, CHARTER_RECEIPT_KEY_MAX - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            rc = receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                              "cannot read the integrity key file %s: %s (check the file)", path,
                              strerror(errno));
            break;
        }
        if (k == 0)
            break;
        if (over) {
            rc = receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                              "the integrity key file %s is larger than %d bytes (use a key of "
                              "%d to %d bytes)",
                              path, CHARTER_RECEIPT_KEY_MAX, CHARTER_RECEIPT_KEY_MIN,
                              CHARTER_RECEIPT_KEY_MAX);
            break;
        }
        got += (size_t)k;
    }
    close(fd);
    if (rc == 0 && got < CHARTER_RECEIPT_KEY_MIN)
        rc = receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                          "the integrity key file %s holds %zu bytes, fewer than %d (make one "
                          "with: openssl rand -hex 32 > FILE)",
                          path, got, CHARTER_RECEIPT_KEY_MIN);
    if (rc != 0) {
        OPENSSL_cleanse(key, cap);
        return rc;
    }
    *len = got;
    return 0;
}
