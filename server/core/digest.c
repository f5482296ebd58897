/*
 * digest.c - SHA-256 and SHA-1 through OpenSSL's EVP interface, written as lowercase hex
 * (see digest.h).
 */
#include "core/digest.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>

bool digest_is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

void digest_hex(const unsigned char *md, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[2 * n] = '\0';
}

static int digest_of(const EVP_MD *type, unsigned want, const void *data, size_t len, char *hex,
                     char fill)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(data, len, md, &mdlen, type, NULL) != 1 || mdlen != want) {
        memset(hex, fill, 2 * (size_t)want);
        hex[2 * want] = '\0';
        return -1;
    }
    digest_hex(md, mdlen, hex);
    return 0;
}

/* The two digests, fetched from OpenSSL's default provider once: a digest named by
 * EVP_sha256() is fetched again on every use (OpenSSL 3), a lookup under a lock that cost
 * more than hashing a short text. NULL when the fetch failed (then the named ones are used). */
static EVP_MD *digest_sha256_md, *digest_sha1_md;
static pthread_once_t digest_once = PTHREAD_ONCE_INIT;

static void digest_fetch(void)
{
    digest_sha256_md = EVP_MD_fetch(NULL, "SHA2-256", NULL);
    digest_sha1_md = EVP_MD_fetch(NULL, "SHA1", NULL);
}

static const EVP_MD *digest_md(bool sha1)
{
    const EVP_MD *md = NULL;
    if (pthread_once(&digest_once, digest_fetch) == 0)
        md = sha1 ? digest_sha1_md : digest_sha256_md;
    return md != NULL ? md : sha1 ? EVP_sha1() : EVP_sha256();
}

int digest_sha256_hex(const void *data, size_t len, char hex[65])
{
    return digest_of(digest_md(false), 32, data, len, hex, '0');
}

int digest_sha1_hex(const void *data, size_t len, char hex[41])
{
    return digest_of(digest_md(true), 20, data, len, hex, 'x');
}
