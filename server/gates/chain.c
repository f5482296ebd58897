/*
 * chain.c - a delegation chain judged for Grants/ShowChain (see chain.h): the facts read
 * through the query library, the verdict the guard's, the same rule the delivery gate and the
 * conditional commit apply to a send.
 */
#include "gates/chain.h"

#include <stdlib.h>
#include <string.h>

#include "policy/facts.h"

/* The database time in seconds since the epoch into *now. Returns STATUS_OK, the store's
 * failure (*at CHAIN_AT_TIME), or STATUS_EPROTO when the reply holds no positive time (*at
 * CHAIN_AT_TIME_REPLY). */
static int chain_now(store *st, double *now, chain_stage *at)
{
    json_t *tj = NULL;
    int rc = q_time(st, &tj);
    if (rc != STATUS_OK) {
        *at = CHAIN_AT_TIME;
        return rc;
    }
    const json_t *nowj = json_object_get(tj, "now");
    *now = 0;
    if (json_is_string(nowj)) {
        char *end = NULL;
        *now = strtod(json_string_value(nowj), &end);
        if (end == json_string_value(nowj))
            *now = 0;
    } else if (json_is_number(nowj)) {
        *now = json_number_value(nowj);
    }
    json_decref(tj);
    if (*now <= 0) {
        *at = CHAIN_AT_TIME_REPLY;
        return STATUS_EPROTO;
    }
    return STATUS_OK;
}

/* The leaf's first grantee, the actor a send under the leaf acts as ("" when it has none:
 * the guard then refuses the grantee). */
static const char *chain_actor(const guard_chain *chain, const char *grant_id)
{
    for (size_t i = 0; i < chain->n; i++) {
        const guard_grant *g = &chain->items[i];
        if (g->id != NULL && strcmp(g->id, grant_id) == 0 && g->n_grantees > 0 &&
            g->grantees[0].id != NULL)
            return g->grantees[0].id;
    }
    return "";
}

int chain_show(store *st, const char *grant_id, json_t **grants, guard_decision *d, chain_stage *at)
{
    *grants = NULL;
    memset(d, 0, sizeof *d);
    *at = CHAIN_AT_GRANT;
    json_t *j = NULL;
    int rc = q_grant_chain(st, grant_id, &j);
    if (rc != STATUS_OK)
        return rc;
    json_t *list = json_object_get(j, "grants");
    if (!json_is_array(list) || json_array_size(list) == 0) {
        json_decref(j);
        return STATUS_ENOTFOUND;
    }
    double now = 0;
    if ((rc = chain_now(st, &now, at)) != STATUS_OK) {
        json_decref(j);
        return rc;
    }
    guard_chain chain;
    memset(&chain, 0, sizeof chain);
    rc = facts_chain_from_json(j, grant_id, &chain);
    if (rc != STATUS_OK) {
        facts_chain_free(&chain);
        json_decref(j);
        return rc;
    }
    if (guard_check_chain(&chain, chain_actor(&chain, grant_id), now, d) != 0) {
        guard_decision_free(d);
        *at = CHAIN_AT_GUARD;
        rc = STATUS_ENOMEM;
    } else {
        /* The verdict's chain order borrows from the facts freed below; the view needs only
         * the outcome, the codes and the witness. */
        free(d->chain_order.items);
        memset(&d->chain_order, 0, sizeof d->chain_order);
        *grants = json_incref(list);
    }
    facts_chain_free(&chain);
    json_decref(j);
    return rc;
}
