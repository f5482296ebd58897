/*
 * svc_grants.c - charter.v1.Grants: revoke and restore grants, show a delegation chain.
 *
 * Revocation and restore are operator-only writes stamped by the database clock inside the
 * query library, refused under --scripted-only by their rows (SVC_SCRIPTED_GRANT_CONTROL).
 * ShowChain only translates: the chain is judged in gates/chain.c with the guard function the
 * delivery gate uses (guard_check_chain), for the leaf grant's grantee at the database time, so
 * what an operator sees is what a delivery would be judged by.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "charter.pb-c.h"
#include "gates/chain.h"
#include "rpc/services.h"
#include "rpc/wire.h"

static int svc_grants_revoke(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__RevokeGrantRequest *rq = (const Charter__V1__RevokeGrantRequest *)in;
    int rc;
    if ((rc = call_require_id(c, "grant_id", rq->grant_id)) != RPC_OK) {
        return rc;
    }
    char what[160];
    snprintf(what, sizeof what, "grant %s", rq->grant_id);
    json_t *j = NULL;
    rc = q_revoke_grant(c->st, rq->grant_id, &j);
    if (rc != STATUS_OK) {
        return call_fail_status(c, rc, what);
    }
    if (j == NULL) {
        return call_fail(c, RPC_NOT_FOUND, "%s not found", what);
    }
    Charter__V1__Grant *g = wire_grant(c, j);
    json_decref(j);
    if (g == NULL) {
        return call_fail(c, RPC_INTERNAL, "unexpected database reply for %s", what);
    }
    *out = &g->base;
    return RPC_OK;
}

static int svc_grants_restore(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__RestoreGrantsRequest *rq = (const Charter__V1__RestoreGrantsRequest *)in;
    int rc;
    const char *id = rq->grant_id != NULL ? rq->grant_id : "";
    if (id[0] != '\0' && (rc = call_require_id(c, "grant_id", id)) != RPC_OK) {
        return rc;
    }
    char what[160];
    if (id[0] != '\0') {
        snprintf(what, sizeof what, "grant %s", id);
    } else {
        snprintf(what, sizeof what, "revoked grants");
    }
    json_t *j = NULL;
    rc = q_restore_grants(c->st, id, &j);
    if (rc != STATUS_OK) {
        return call_fail_status(c, rc, what);
    }
    Charter__V1__RestoreGrantsResponse *r = call_alloc(c, sizeof *r);
    if (r == NULL) {
        json_decref(j);
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    charter__v1__restore_grants_response__init(r);
    int wrc = wire_strings(c, json_object_get(j, "restored"), &r->restored, &r->n_restored);
    json_decref(j);
    if (wrc != 0) {
        return call_fail(c, RPC_INTERNAL, "unexpected database reply for %s", what);
    }
    *out = &r->base;
    return RPC_OK;
}

/* The grants of a grant_chain reply, leaf first: follow the first parent from the leaf, then
 * whatever the walk did not reach (branches, cycles) in the order the query gave. */
static int svc_grants_order(call *c, const json_t *grants, const char *leaf,
                            Charter__V1__GrantChain *r)
{
    size_t n = json_array_size(grants);
    if (n == 0) {
        return 0;
    }
    bool *used = call_alloc(c, n * sizeof *used);
    r->grants = call_alloc(c, n * sizeof *r->grants);
    if (used == NULL || r->grants == NULL) {
        return -1;
    }
    const char *next = leaf;
    while (next != NULL && r->n_grants < n) {
        size_t i;
        const json_t *g;
        const json_t *found = NULL;
        json_array_foreach(grants, i, g)
        {
            const json_t *id = json_object_get(g, "id");
            if (!used[i] && json_is_string(id) && strcmp(json_string_value(id), next) == 0) {
                used[i] = true;
                found = g;
                break;
            }
        }
        if (found == NULL) {
            break;
        }
        if ((r->grants[r->n_grants] = wire_grant(c, found)) == NULL) {
            return -1;
        }
        r->n_grants++;
        const json_t *parents = json_object_get(found, "parents");
        const json_t *p0 = json_is_array(parents) ? json_array_get(parents, 0) : NULL;
        next = json_is_string(p0) ? json_string_value(p0) : NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!used[i]) {
            if ((r->grants[r->n_grants] = wire_grant(c, json_array_get(grants, i))) == NULL) {
                return -1;
            }
            r->n_grants++;
        }
    }
    return 0;
}

static int svc_grants_show_chain(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__ShowChainRequest *rq = (const Charter__V1__ShowChainRequest *)in;
    int rc;
    if ((rc = call_require_id(c, "grant_id", rq->grant_id)) != RPC_OK) {
        return rc;
    }
    char what[160];
    snprintf(what, sizeof what, "grant %s", rq->grant_id);
    json_t *grants = NULL;
    guard_decision d;
    chain_stage at;
    rc = chain_show(c->st, rq->grant_id, &grants, &d, &at);
    if (rc != STATUS_OK) {
        switch (at) {
        case CHAIN_AT_TIME:
            return call_fail_status(c, rc, "database time");
        case CHAIN_AT_TIME_REPLY:
            return call_fail(c, RPC_INTERNAL, "unexpected database reply for the database time");
        case CHAIN_AT_GUARD:
            return call_fail(c, RPC_INTERNAL, "out of memory evaluating %s", what);
        default:
            return call_fail_status(c, rc, what);
        }
    }
    Charter__V1__GrantChain *r = call_alloc(c, sizeof *r);
    int status = RPC_OK;
    if (r == NULL) {
        status = call_fail(c, RPC_INTERNAL, "out of memory evaluating %s", what);
    } else {
        charter__v1__grant_chain__init(r);
        if ((r->decision = wire_decision(c, &d)) == NULL ||
            svc_grants_order(c, grants, rq->grant_id, r) != 0) {
            status = call_fail(c, RPC_INTERNAL, "unexpected database reply for %s", what);
        }
    }
    guard_decision_free(&d);
    json_decref(grants);
    if (status != RPC_OK) {
        return status;
    }
    *out = &r->base;
    return RPC_OK;
}

/* The Grants service: one row per method, checked against the generated descriptor at
 * startup (dispatch_check_tables); dispatch enforces each row's columns (services.h). */
const svc_method svc_grants_methods[] = {
    {"RevokeGrant", &charter__v1__revoke_grant_request__descriptor, &charter__v1__grant__descriptor,
     ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE, SVC_SCRIPTED_GRANT_CONTROL, svc_grants_revoke},
    {"RestoreGrants", &charter__v1__restore_grants_request__descriptor,
     &charter__v1__restore_grants_response__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_GRANT_CONTROL, svc_grants_restore},
    {"ShowChain", &charter__v1__show_chain_request__descriptor,
     &charter__v1__grant_chain__descriptor, ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, svc_grants_show_chain},
};
const size_t svc_grants_methods_len = sizeof svc_grants_methods / sizeof svc_grants_methods[0];
