/*
 * role.h - who a caller is: the roles a bearer token grants (auth.h) and the minimum role each
 * method of the dispatch table requires (services.h).
 *
 * Kept apart from the RPC layer so that auth.h, and config.c through it, need nothing else.
 * Viewer and operator are ordered: a caller may use a method whose minimum role is at most its
 * own. Host and admin stand outside that order (tenant.h, tenant_role_allows): a host may call
 * only the methods whose row says so (the agent-facing ones, through contexts of its actors), an
 * admin only the methods whose row names ROLE_ADMIN (creating and listing tenants) and none of
 * any tenant's graph data.
 */
#ifndef CHARTER_ROLE_H
#define CHARTER_ROLE_H

typedef enum {
    ROLE_NONE = 0,
    ROLE_VIEWER = 1,
    ROLE_OPERATOR = 2,
    ROLE_HOST = 3,  /* a stored host credential: agent-facing methods, its actors' contexts */
    ROLE_ADMIN = 4, /* CHARTER_ADMIN_TOKEN: the Tenants service only */
} call_role;

#endif
