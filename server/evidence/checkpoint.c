/*
 * checkpoint.c - sealing and opening checkpoint tokens (see checkpoint.h). The MAC is the
 * integrity key's (integrity.c keeps the key; this file only hands it text), over the token's
 * version prefix and its base64 body, so neither can be changed without the key. Base64 is
 * OpenSSL's.
 */
#include "evidence/checkpoint.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "evidence/integrity.h"
#include "core/status.h"

#define CHECKPOINT_PREFIX "ckpt1."

int checkpoint_seal(const json_t *cursor, char **token)
{
    *token = NULL;
    if (!integrity_keyed())
        return STATUS_ENOKEY;
    char *body = json_dumps(cursor, JSON_COMPACT | JSON_SORT_KEYS);
    if (body == NULL)
        return STATUS_ENOMEM;
    size_t blen = strlen(body);
    size_t plen = strlen(CHECKPOINT_PREFIX);
    size_t b64len = 4 * ((blen + 2) / 3);
    if (plen + b64len + 1 + 64 + 1 > CHECKPOINT_TOKEN_MAX) {
        free(body);
        return STATUS_ELIMIT;
    }
    char *t = malloc(plen + b64len + 1 + 64 + 1);
    if (t == NULL) {
        free(body);
        return STATUS_ENOMEM;
    }
    memcpy(t, CHECKPOINT_PREFIX, plen);
    int n = EVP_EncodeBlock((unsigned char *)t + plen, (const unsigned char *)body, (int)blen);
    free(body);
    if (n < 0 || (size_t)n != b64len) {
        free(t);
        return STATUS_EPROTO;
    }
    char mac[65];
    int rc = integrity_mac(t, plen + b64len, mac);
    if (rc != STATUS_OK) {
        free(t);
        return rc;
    }
    t[plen + b64len] = '.';
    memcpy(t + plen + b64len + 1, mac, 65);
    *token = t;
    return STATUS_OK;
}

int checkpoint_open(const char *token, json_t **cursor)
{
    *cursor = NULL;
    if (!integrity_keyed())
        return STATUS_ENOKEY;
    size_t plen = strlen(CHECKPOINT_PREFIX);
    size_t len = token != NULL ? strnlen(token, CHECKPOINT_TOKEN_MAX + 1) : 0;
    if (len > CHECKPOINT_TOKEN_MAX || len < plen + 4 + 1 + 64 ||
        strncmp(token, CHECKPOINT_PREFIX, plen) != 0 || token[len - 65] != '.')
        return STATUS_EINVAL;
    size_t b64len = len - 65 - plen;
    const char *b64 = token + plen;
    if (b64len % 4 != 0 || memchr(b64, '.', b64len) != NULL)
        return STATUS_EINVAL;
    int rc = integrity_mac_verify(token, plen + b64len, token + len - 64);
    if (rc == STATUS_EREFUSED)
        return STATUS_EDENIED;
    if (rc != STATUS_OK)
        return rc;
    unsigned char *body = malloc(b64len / 4 * 3 + 1);
    if (body == NULL)
        return STATUS_ENOMEM;
    int n = EVP_DecodeBlock(body, (const unsigned char *)b64, (int)b64len);
    if (n < 0) {
        free(body);
        return STATUS_EINVAL;
    }
    /* EVP_DecodeBlock counts the bytes the '=' padding stands for; the JSON ends before. */
    int pad = (b64[b64len - 1] == '=') + (b64[b64len - 2] == '=');
    n -= pad;
    json_error_t e;
    json_t *j = json_loadb((const char *)body, (size_t)n, JSON_REJECT_DUPLICATES, &e);
    free(body);
    if (!json_is_object(j)) {
        json_decref(j);
        return STATUS_EINVAL;
    }
    *cursor = j;
    return STATUS_OK;
}
