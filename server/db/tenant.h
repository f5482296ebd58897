/*
 * tenant.h - tenants and stored credentials: which graph a call acts on and who is calling.
 *
 * A graph is a tenant. The registry of tenants, their quotas and the stored credentials live
 * under the prefix charter:{_tenants} (queries/tenants.lua), outside every graph's hash tag;
 * the graph charterd was started with (--graph) is an implicit tenant that always exists and
 * has no quotas. A stored credential is "chc_<16 hex id>_<64 hex secret>": the id finds it in
 * one database call, only the SHA-256 of the whole token is stored, and the digest is compared
 * with CRYPTO_memcmp. Nothing of a credential is cached, so a revocation holds from the next
 * call on. These functions point the store at the registry for their call and back at the
 * graph it addressed before, whatever happens.
 */
#ifndef CHARTER_TENANT_H
#define CHARTER_TENANT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/role.h"
#include "db/store.h"

/* The graph name whose prefix holds the registry; tenant names never begin with "_". The
 * functions of queries/tenants.lua are called on it by their stubs (queries.h: their call
 * lines say "on graph _tenants"). */
#define TENANT_REGISTRY "_tenants"
/* A tenant name: 1..TENANT_NAME_MAX of [A-Za-z0-9_.-], not beginning with "_", not "." or "..". */
#define TENANT_NAME_MAX 64
/* "chc_" + 16 hex digits + "_" + 64 hex digits. */
#define TENANT_SECRET_LEN (4 + 16 + 1 + 64)
#define TENANT_CREDENTIAL_ID_LEN 16

/* True when name is a tenant name (the hash-tag characters "{" and "}" among those refused). */
bool tenant_name_ok(const char *name);

/* True when token has the form of a stored credential ("chc_..."), whether valid or not. */
bool tenant_is_credential(const char *token);

/* Parses a stored credential "chc_<id>_<secret>" into id (17 bytes). Returns true when token
 * has exactly that form (lowercase hex). */
bool tenant_credential_id(const char *token, char id[TENANT_CREDENTIAL_ID_LEN + 1]);

/* A new credential: a random id (RAND_bytes), the secret token "chc_<id>_<secret>" (returned
 * to the caller once, never stored) and the hex SHA-256 of the token (what is stored).
 * Returns STATUS_OK or STATUS_ENOMEM when no random bytes or digest could be had. */
int tenant_credential_new(char id[TENANT_CREDENTIAL_ID_LEN + 1], char secret[TENANT_SECRET_LEN + 1],
                          char hash_hex[65]);

/* True when the SHA-256 of token equals hash_hex (64 hex digits), compared in constant time. */
bool tenant_credential_matches(const char *token, const char *hash_hex);

/* The hex SHA-256 of token into hash_hex (65 bytes with its NUL): what the registry stores for
 * a credential, sent with charter_tenant_admit so only a verified credential is counted.
 * Returns STATUS_OK or STATUS_ENOMEM when no digest could be had. */
int tenant_credential_hash(const char *token, char hash_hex[65]);

/* The role a stored credential's role name gives ("operator", "viewer", "host"), or
 * ROLE_NONE for anything else. */
call_role tenant_role_of(const char *name);

/* Whether a caller of role may call a method whose dispatch row requires min_role and says
 * whether a host credential may call it (host_callable: the row's host column, rpc/services.h).
 * ROLE_NONE rows are open to all. A ROLE_ADMIN row only to the admin, and the admin to nothing
 * else (it manages tenants, it does not act on their graph data). A host may call only the
 * host-callable rows; viewer and operator follow their order. */
bool tenant_role_allows(call_role role, call_role min_role, bool host_callable);

/* Claims graph name for a new tenant (charter_graph_claim, in the graph's own slot) before it
 * is registered: refused when the graph already holds data (another charterd's default graph,
 * a tenant's graph, an older graph), so the admin token never obtains a credential for data it
 * did not create. Points st back at the graph it addressed. Returns STATUS_OK, STATUS_EEXISTS
 * (the graph holds data; store_last_error says which key), or the store's failure. */
int tenant_claim_graph(store *st, const char *name);

/* Takes n of quota kind ("runs" or "artifacts") of tenant (charter_quota_take). Returns
 * STATUS_OK, STATUS_ELIMIT (the quota would be exceeded; store_last_error names it), or the
 * store's failure. */
int tenant_quota_take(store *st, const char *tenant, const char *kind, unsigned n);

/* Gives back n of quota kind of tenant after the write it was taken for did not happen. */
void tenant_quota_release(store *st, const char *tenant, const char *kind, unsigned n);

/* The created tenants' names (charter_tenant_names), into *names (a JSON array of strings,
 * caller decrefs). Returns STATUS_OK or the store's failure. */
int tenant_names(store *st, json_t **names);

#endif
