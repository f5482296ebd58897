/*
 * role.h - who a caller is: the roles a bearer token grants (auth.h) and the minimum role each
 * method of the dispatch table requires (services.h).
 *
 * Kept apart from the RPC layer so that auth.h, and config.c through it, need nothing else.
 * Roles are ordered: a caller may use a method whose minimum role is at most its own.
 */
#ifndef CHARTER_ROLE_H
#define CHARTER_ROLE_H

typedef enum { ROLE_NONE = 0, ROLE_VIEWER = 1, ROLE_OPERATOR = 2 } call_role;

#endif
