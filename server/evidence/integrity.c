/*
 * integrity.c - custody of charterd's integrity keys (see integrity.h): loading the HMAC key
 * and the Ed25519 signing key, and the operations that need their bytes (MAC, MAC check,
 * signature). Nothing here touches the database or the network.
 *
 * Both keys are set once at startup, before any worker thread runs, and only read afterwards,
 * so no lock guards them. An EVP_PKEY used for one-shot EVP_DigestSign is read-only; each
 * signature gets its own EVP_MD_CTX.
 */
#include "evidence/integrity.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "receipt.h"
#include "core/digest.h"
#include "core/status.h"

/* A PEM Ed25519 private key is about 120 bytes; anything far larger is not one. */
#define INTEGRITY_PEM_MAX 16384

static struct {
    unsigned char key[CHARTER_RECEIPT_KEY_MAX];
    size_t key_len;
    EVP_PKEY *signing;
    char key_id[65];
    char *public_pem;
} integrity;

/* --- the integrity (HMAC) key ------------------------------------------------------------- */

int integrity_set_key(const unsigned char *key, size_t key_len)
{
    if (key_len > sizeof integrity.key || (key_len > 0 && key == NULL))
        return STATUS_EINVAL;
    OPENSSL_cleanse(integrity.key, sizeof integrity.key);
    if (key_len > 0)
        memcpy(integrity.key, key, key_len);
    integrity.key_len = key_len;
    return STATUS_OK;
}

int integrity_load_key(const char *path, char *err, size_t errlen)
{
    size_t len = 0;
    OPENSSL_cleanse(integrity.key, sizeof integrity.key);
    integrity.key_len = 0;
    if (charter_receipt_key_load(path, integrity.key, sizeof integrity.key, &len, err, errlen) != 0)
        return STATUS_EINVAL;
    integrity.key_len = len;
    return STATUS_OK;
}

/* Makes a new key file at path (see integrity_default_key). Returns STATUS_OK, STATUS_EEXISTS
 * when a file is there already, or STATUS_EINVAL with err. */
static int integrity_create_key(const char *path, char *err, size_t errlen)
{
    unsigned char raw[32];
    char text[66];
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST)
        return STATUS_EEXISTS;
    if (fd < 0) {
        snprintf(err, errlen,
                 "cannot create the integrity key file %s: %s (check the data folder's "
                 "permissions, or pass --integrity-key FILE)",
                 path, strerror(errno));
        return STATUS_EINVAL;
    }
    int rc = RAND_bytes(raw, sizeof raw) == 1 ? STATUS_OK : STATUS_EINVAL;
    digest_hex(raw, sizeof raw, text);
    text[64] = '\n';
    text[65] = '\0';
    size_t done = 0;
    while (rc == STATUS_OK && done < 65) {
        ssize_t w = write(fd, text + done, 65 - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = STATUS_EINVAL;
        else
            done += (size_t)w;
    }
    if (rc == STATUS_OK && fsync(fd) != 0)
        rc = STATUS_EINVAL;
    close(fd);
    OPENSSL_cleanse(raw, sizeof raw);
    OPENSSL_cleanse(text, sizeof text);
    if (rc != STATUS_OK) {
        unlink(path);
        snprintf(err, errlen,
                 "cannot write a new integrity key to %s (check the OpenSSL installation and the "
                 "free space of the data folder, or pass --integrity-key FILE)",
                 path);
    }
    return rc;
}

int integrity_default_key(const char *path, bool create, bool *created, char *err, size_t errlen)
{
    struct stat sb;
    *created = false;
    if (lstat(path, &sb) != 0 && errno == ENOENT) {
        if (!create)
            return STATUS_ENOTFOUND;
        int rc = integrity_create_key(path, err, errlen);
        if (rc != STATUS_OK && rc != STATUS_EEXISTS)
            return rc;
        *created = rc == STATUS_OK;
    }
    return integrity_load_key(path, err, errlen);
}

bool integrity_keyed(void)
{
    return integrity.key_len > 0;
}

int integrity_mac(const void *data, size_t len, char hex[65])
{
    memset(hex, '0', 64);
    hex[64] = '\0';
    if (!integrity_keyed())
        return STATUS_ENOKEY;
    return charter_hmac_sha256_hex(integrity.key, integrity.key_len, data, len, hex) == 0
               ? STATUS_OK
               : STATUS_EPROTO;
}

int integrity_mac_verify(const void *data, size_t len, const char *hex)
{
    char want[65];
    int rc = integrity_mac(data, len, want);
    if (rc != STATUS_OK)
        return rc;
    if (hex == NULL || strlen(hex) != 64)
        return STATUS_EREFUSED;
    return CRYPTO_memcmp(want, hex, 64) == 0 ? STATUS_OK : STATUS_EREFUSED;
}


int integrity_key_check(char hex[65])
{
    return integrity_mac(INTEGRITY_KEY_CHECK_TEXT, strlen(INTEGRITY_KEY_CHECK_TEXT), hex);
}

int integrity_receipt_check(const Charter__V1__Receipt *r, char *reason, size_t n)
{
    if (!integrity_keyed()) {
        snprintf(reason, n, "no integrity key");
        return STATUS_ENOKEY;
    }
    return charter_receipt_verify(r, integrity.key, integrity.key_len, reason, n) == 0
               ? STATUS_OK
               : STATUS_EREFUSED;
}

/* --- the signing (Ed25519) key ------------------------------------------------------------ */

/* An encrypted PEM asks for a passphrase: answer none, so it fails instead of prompting. */
static int integrity_no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return 0;
}

/* Reads the file at path into buf (cap bytes) after checking, on the file opened, that it is a
 * regular file of this user with no group or other bits. Returns STATUS_OK with *len set, or
 * STATUS_EINVAL with err. */
static int integrity_read_secret(const char *path, char *buf, size_t cap, size_t *len, char *err,
                                 size_t errlen)
{
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen,
                 "cannot open the signing key file %s: %s (check the path and that this user "
                 "can read it)",
                 path, strerror(errno));
        return STATUS_EINVAL;
    }
    struct stat sb;
    int rc = STATUS_EINVAL;
    if (fstat(fd, &sb) != 0)
        snprintf(err, errlen, "cannot stat the signing key file %s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        snprintf(err, errlen, "the signing key file %s is not a regular file", path);
    else if (sb.st_uid != geteuid())
        snprintf(err, errlen,
                 "the signing key file %s is owned by uid %lu, not by the user running charterd "
                 "(uid %lu) (chown it to that user)",
                 path, (unsigned long)sb.st_uid, (unsigned long)geteuid());
    else if ((sb.st_mode & 077) != 0)
        snprintf(err, errlen,
                 "the signing key file %s is mode %03o: readable or writable by group or others "
                 "(chmod 600 %s)",
                 path, (unsigned)(sb.st_mode & 0777), path);
    else
        rc = STATUS_OK;
    size_t got = 0;
    while (rc == STATUS_OK) {
        if (got == cap) {
            snprintf(err, errlen,
                     "the signing key file %s is larger than %zu bytes: not an "
                     "Ed25519 private key",
                     path, cap);
            rc = STATUS_EINVAL;
            break;
        }
        ssize_t k = read(fd, buf + got, cap - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            snprintf(err, errlen, "cannot read the signing key file %s: %s", path, strerror(errno));
            rc = STATUS_EINVAL;
        }
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    if (rc == STATUS_OK)
        *len = got;
    return rc;
}

/* The public half of the kept signing key as PEM (malloc'd), or NULL. */
static char *integrity_public_pem_of(EVP_PKEY *key)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *pem = NULL;
    if (bio != NULL && PEM_write_bio_PUBKEY(bio, key) == 1) {
        char *data = NULL;
        long n = BIO_get_mem_data(bio, &data);
        if (n > 0 && (pem = malloc((size_t)n + 1)) != NULL) {
            memcpy(pem, data, (size_t)n);
            pem[n] = '\0';
        }
    }
    BIO_free(bio);
    return pem;
}

int integrity_load_signing_key(const char *path, char *err, size_t errlen)
{
    static char buf[INTEGRITY_PEM_MAX];
    size_t len = 0;
    EVP_PKEY *key = NULL;
    char *pem = NULL;
    char why[200];
    int rc = integrity_read_secret(path, buf, sizeof buf, &len, err, errlen);
    if (rc != STATUS_OK)
        goto out;
    rc = STATUS_EINVAL;
    BIO *bio = BIO_new_mem_buf(buf, (int)len);
    if (bio != NULL)
        key = PEM_read_bio_PrivateKey(bio, NULL, integrity_no_passphrase, NULL);
    BIO_free(bio);
    if (key == NULL) {
        snprintf(err, errlen,
                 "the signing key file %s is not an unencrypted PEM private key (make one with: "
                 "openssl genpkey -algorithm ed25519 -out FILE; chmod 600 FILE)",
                 path);
        goto out;
    }
    if (EVP_PKEY_id(key) != EVP_PKEY_ED25519) {
        snprintf(err, errlen,
                 "the signing key file %s holds a %s key, not Ed25519 (make one with: openssl "
                 "genpkey -algorithm ed25519 -out FILE; chmod 600 FILE)",
                 path, OBJ_nid2sn(EVP_PKEY_id(key)));
        goto out;
    }
    if ((pem = integrity_public_pem_of(key)) == NULL ||
        charter_receipt_key_id(pem, strlen(pem), integrity.key_id, why, sizeof why) != 0) {
        snprintf(err, errlen, "cannot derive the public key of %s (check the OpenSSL library)",
                 path);
        goto out;
    }
    EVP_PKEY_free(integrity.signing);
    free(integrity.public_pem);
    integrity.signing = key;
    integrity.public_pem = pem;
    key = NULL;
    pem = NULL;
    rc = STATUS_OK;
out:
    OPENSSL_cleanse(buf, sizeof buf);
    EVP_PKEY_free(key);
    free(pem);
    return rc;
}

bool integrity_signing(void)
{
    return integrity.signing != NULL;
}

const char *integrity_key_id(void)
{
    return integrity.signing != NULL ? integrity.key_id : "";
}

const char *integrity_public_pem(void)
{
    return integrity.signing != NULL && integrity.public_pem != NULL ? integrity.public_pem : "";
}

int integrity_sign(const void *data, size_t len, char b64[89])
{
    unsigned char sig[64];
    size_t sig_len = sizeof sig;
    b64[0] = '\0';
    if (integrity.signing == NULL)
        return STATUS_ENOKEY;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int rc = STATUS_EPROTO;
    if (ctx != NULL && EVP_DigestSignInit(ctx, NULL, NULL, NULL, integrity.signing) == 1 &&
        EVP_DigestSign(ctx, sig, &sig_len, data, len) == 1 && sig_len == 64 &&
        EVP_EncodeBlock((unsigned char *)b64, sig, 64) == 88)
        rc = STATUS_OK;
    EVP_MD_CTX_free(ctx);
    if (rc != STATUS_OK)
        b64[0] = '\0';
    return rc;
}

void integrity_forget(void)
{
    OPENSSL_cleanse(integrity.key, sizeof integrity.key);
    integrity.key_len = 0;
    EVP_PKEY_free(integrity.signing);
    integrity.signing = NULL;
    free(integrity.public_pem);
    integrity.public_pem = NULL;
    memset(integrity.key_id, 0, sizeof integrity.key_id);
}
