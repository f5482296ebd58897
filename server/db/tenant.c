/*
 * tenant.c - tenant names, stored credentials and quotas (see tenant.h).
 *
 * The registry is reached by pointing the worker's store at the reserved graph "_tenants" for
 * one FCALL and back at once: the store's connection stays, so a call costs one round trip.
 * A new tenant's graph is claimed the same way in its own slot, which on a Redis Cluster is
 * not the registry's: no one function could both check the graph and register the tenant.
 */
#include "db/tenant.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#include "core/digest.h"

bool tenant_name_ok(const char *name)
{
    size_t n = name != NULL ? strlen(name) : 0;
    /* "." and ".." name folders, not tenants: the archive folder holds one per graph. */
    if (n == 0 || n > TENANT_NAME_MAX || name[0] == '_' || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

bool tenant_is_credential(const char *token)
{
    return token != NULL && strncmp(token, "chc_", 4) == 0;
}

bool tenant_credential_id(const char *token, char id[TENANT_CREDENTIAL_ID_LEN + 1])
{
    if (!tenant_is_credential(token) || strlen(token) != TENANT_SECRET_LEN ||
        token[4 + TENANT_CREDENTIAL_ID_LEN] != '_' ||
        !digest_is_hex(token + 4, TENANT_CREDENTIAL_ID_LEN) ||
        !digest_is_hex(token + 5 + TENANT_CREDENTIAL_ID_LEN, 64))
        return false;
    memcpy(id, token + 4, TENANT_CREDENTIAL_ID_LEN);
    id[TENANT_CREDENTIAL_ID_LEN] = '\0';
    return true;
}

int tenant_credential_new(char id[TENANT_CREDENTIAL_ID_LEN + 1], char secret[TENANT_SECRET_LEN + 1],
                          char hash_hex[65])
{
    unsigned char raw[8 + 32];
    if (RAND_bytes(raw, (int)sizeof raw) != 1)
        return STATUS_ENOMEM;
    char hex[2 * sizeof raw + 1];
    digest_hex(raw, sizeof raw, hex);
    OPENSSL_cleanse(raw, sizeof raw);
    memcpy(id, hex, TENANT_CREDENTIAL_ID_LEN);
    id[TENANT_CREDENTIAL_ID_LEN] = '\0';
    snprintf(secret, TENANT_SECRET_LEN + 1, "chc_%.16s_%.64s", hex, hex + 16);
    OPENSSL_cleanse(hex, sizeof hex);
    if (digest_sha256_hex(secret, strlen(secret), hash_hex) != 0)
        return STATUS_ENOMEM;
    return STATUS_OK;
}

int tenant_credential_hash(const char *token, char hash_hex[65])
{
    if (token == NULL || digest_sha256_hex(token, strlen(token), hash_hex) != 0)
        return STATUS_ENOMEM;
    return STATUS_OK;
}

bool tenant_credential_matches(const char *token, const char *hash_hex)
{
    char mine[65];
    if (token == NULL || hash_hex == NULL || strlen(hash_hex) != 64 ||
        digest_sha256_hex(token, strlen(token), mine) != 0)
        return false;
    return CRYPTO_memcmp(mine, hash_hex, 64) == 0;
}

call_role tenant_role_of(const char *name)
{
    if (name == NULL)
        return ROLE_NONE;
    if (strcmp(name, "operator") == 0)
        return ROLE_OPERATOR;
    if (strcmp(name, "viewer") == 0)
        return ROLE_VIEWER;
    if (strcmp(name, "host") == 0)
        return ROLE_HOST;
    return ROLE_NONE;
}

bool tenant_role_allows(call_role role, call_role min_role, bool host_callable)
{
    if (min_role == ROLE_NONE)
        return true;
    if (min_role == ROLE_ADMIN || role == ROLE_ADMIN)
        return role == ROLE_ADMIN && min_role == ROLE_ADMIN;
    if (role == ROLE_HOST)
        return host_callable;
    return role >= min_role && min_role <= ROLE_OPERATOR;
}

int tenant_claim_graph(store *st, const char *name)
{
    if (!tenant_name_ok(name))
        return STATUS_EINVAL;
    char graph[TENANT_NAME_MAX + 1];
    snprintf(graph, sizeof graph, "%s", store_graph(st));
    int rc = store_use_graph(st, name);
    if (rc != STATUS_OK)
        return rc;
    json_t *reply = NULL;
    rc = q_graph_claim(st, name, &reply);
    json_decref(reply);
    /* The graph was valid when it was set, so pointing back cannot fail. */
    (void)store_use_graph(st, graph);
    return rc;
}

int tenant_quota_take(store *st, const char *tenant, const char *kind, unsigned n)
{
    char num[16];
    snprintf(num, sizeof num, "%u", n);
    return q_quota_take(st, tenant, kind, num, NULL);
}

void tenant_quota_release(store *st, const char *tenant, const char *kind, unsigned n)
{
    char num[16];
    snprintf(num, sizeof num, "%u", n);
    /* A release that fails leaves the count one high: the quota errs toward refusing. */
    (void)q_quota_release(st, tenant, kind, num, NULL);
}

int tenant_names(store *st, json_t **names)
{
    json_t *j = NULL;
    *names = NULL;
    int rc = q_tenant_names(st, &j);
    if (rc != STATUS_OK)
        return rc;
    json_t *list = json_object_get(j, "tenants");
    /* Redis's cjson encodes an empty list as {}. */
    *names = json_is_array(list) ? json_incref(list) : json_array();
    json_decref(j);
    return *names != NULL ? STATUS_OK : STATUS_ENOMEM;
}
