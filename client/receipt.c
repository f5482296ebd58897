/*
 * receipt.c - canonical receipt text, HMAC-SHA256, the offline verifier and the key file
 * (see receipt.h for the text's layout).
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
    bool delivery = strcmp(kind, "delivery") == 0;
    if (!delivery && strcmp(kind, "run") != 0)
        return receipt_fail(err, errlen, -CHARTER_INVALID_ARGUMENT,
                            "receipt kind must be \"delivery\" or \"run\"");
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
            (rc = must_be_unset(r->n_deliveries == 0, kind, "deliveries", err, errlen)) != 0)
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

    receipt_buf b = {NULL, 0, 0, false};
    rc = add_line(&b, "format", CHARTER_RECEIPT_FORMAT, err, errlen);
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
