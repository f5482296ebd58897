/*
 * auth.h - bearer tokens: who is calling (DESIGN.md "The RPC envelope").
 *
 * Three environment tokens exist: the operator token (full control of the default tenant), an
 * optional viewer token (read-only, confidential content redacted) and an optional admin token
 * (creates and lists tenants, nothing else). Credentials stored in the database are tenant.h's.
 * Only their SHA-256 digests are kept; a presented token is hashed and compared with CRYPTO_memcmp
 * against both digests, so neither the comparison time nor the token lengths tell a caller how
 * close it came.
 */
#ifndef CHARTER_AUTH_H
#define CHARTER_AUTH_H

#include <stdbool.h>

#include "core/role.h"

/* The smallest token length accepted at startup, in characters. */
#define AUTH_MIN_TOKEN_LEN 24

typedef struct {
    unsigned char operator_digest[32];
    unsigned char viewer_digest[32];
    bool has_viewer;
    unsigned char admin_digest[32];
    bool has_admin;
} auth_tokens;

/* Outcome of checking one call's authorization metadata. */
enum {
    AUTH_OK = 0,
    AUTH_MISSING = -1, /* no "authorization" entry, or not of the form "Bearer <token>" */
    AUTH_INVALID = -2, /* a bearer token that is neither the operator's nor the viewer's */
};

/* Keeps the digests of the operator token (required), the viewer token and the admin token
 * (NULL or empty: none). The caller has already checked lengths and that they differ. Returns
 * 0, or -1 when hashing failed. */
int auth_init(auth_tokens *a, const char *operator_token, const char *viewer_token,
              const char *admin_token);

/* Checks the value of the "authorization" metadata entry (NULL when absent) against the
 * environment tokens. On AUTH_OK *role is ROLE_OPERATOR, ROLE_VIEWER or ROLE_ADMIN; otherwise
 * *role is ROLE_NONE. A stored credential ("chc_...") is AUTH_INVALID here (tenant.h checks it). */
int auth_check(const auth_tokens *a, const char *authorization, call_role *role);

#endif
