/*
 * auth.c - bearer token check in constant time (see auth.h).
 *
 * Both digests are always compared, whichever matches, so the time taken does not say which
 * token a caller was close to.
 */
#include "rpc/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

/* SHA-256 fetched from the default provider once for the process: EVP_sha256() would make
 * every call look the implementation up again, under locks all threads share. Kept until
 * exit. */
static EVP_MD *auth_sha256;
static pthread_once_t auth_sha256_once = PTHREAD_ONCE_INIT;

static void auth_fetch_sha256(void)
{
    auth_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static int auth_digest(const char *token, size_t len, unsigned char out[32])
{
    unsigned int n = 0;
    if (pthread_once(&auth_sha256_once, auth_fetch_sha256) != 0 || auth_sha256 == NULL ||
        EVP_Digest(token, len, out, &n, auth_sha256, NULL) != 1 || n != 32) {
        return -1;
    }
    return 0;
}

int auth_init(auth_tokens *a, const char *operator_token, const char *viewer_token,
              const char *admin_token)
{
    memset(a, 0, sizeof *a);
    if (operator_token == NULL ||
        auth_digest(operator_token, strlen(operator_token), a->operator_digest) != 0) {
        return -1;
    }
    if (viewer_token != NULL && viewer_token[0] != '\0') {
        if (auth_digest(viewer_token, strlen(viewer_token), a->viewer_digest) != 0) {
            return -1;
        }
        a->has_viewer = true;
    }
    if (admin_token != NULL && admin_token[0] != '\0') {
        if (auth_digest(admin_token, strlen(admin_token), a->admin_digest) != 0) {
            return -1;
        }
        a->has_admin = true;
    }
    return 0;
}

int auth_check(const auth_tokens *a, const char *authorization, call_role *role)
{
    static const char scheme[] = "Bearer ";
    *role = ROLE_NONE;
    /* RFC 7235: the scheme name is case-insensitive ("bearer", "BEARER"); the token is not. */
    if (authorization == NULL || strncasecmp(authorization, scheme, sizeof scheme - 1) != 0) {
        return AUTH_MISSING;
    }
    const char *token = authorization + sizeof scheme - 1;
    size_t len = strlen(token);
    if (len == 0) {
        return AUTH_MISSING;
    }
    unsigned char digest[32];
    if (auth_digest(token, len, digest) != 0) {
        return AUTH_INVALID;
    }
    int is_operator = CRYPTO_memcmp(digest, a->operator_digest, sizeof digest) == 0;
    int is_viewer = CRYPTO_memcmp(digest, a->viewer_digest, sizeof digest) == 0;
    int is_admin = CRYPTO_memcmp(digest, a->admin_digest, sizeof digest) == 0;
    if (is_operator) {
        *role = ROLE_OPERATOR;
        return AUTH_OK;
    }
    if (is_viewer && a->has_viewer) {
        *role = ROLE_VIEWER;
        return AUTH_OK;
    }
    if (is_admin && a->has_admin) {
        *role = ROLE_ADMIN;
        return AUTH_OK;
    }
    return AUTH_INVALID;
}
