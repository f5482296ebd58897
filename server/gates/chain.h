/*
 * chain.h - a delegation chain judged as the delivery gate judges it, for Grants/ShowChain.
 *
 * The facts are the chain as charter_grant_chain returns it and the database time
 * (charter_time); the rule is the guard's (guard_check_chain, RULE-CHAIN-*), for the leaf
 * grant's grantee, so what an operator sees is what a delivery under that grant would be
 * judged by. Nothing is recorded: it is a view, not a decision that lets anything happen.
 */
#ifndef CHARTER_CHAIN_H
#define CHARTER_CHAIN_H

#include <jansson.h>

#include "db/store.h"
#include "policy/guard.h"

/* Where chain_show failed. */
typedef enum {
    CHAIN_AT_GRANT,      /* reading or decoding the grant chain */
    CHAIN_AT_TIME,       /* reading the database time */
    CHAIN_AT_TIME_REPLY, /* the database time's reply is not a time */
    CHAIN_AT_GUARD,      /* the guard ran out of memory */
} chain_stage;

/* The chain of grant_id judged at the database time for the leaf's first grantee. *grants is
 * the chain's grants as the query returned them (a JSON list, in its order; caller decrefs)
 * and d the guard's verdict (overwritten; caller frees). Returns STATUS_OK; STATUS_ENOTFOUND
 * when no grant grant_id exists; else the failure (the store's, STATUS_EPROTO, STATUS_ENOMEM)
 * with *at saying where, *grants NULL and d zeroed. */
int chain_show(store *st, const char *grant_id, json_t **grants, guard_decision *d,
               chain_stage *at);

#endif
