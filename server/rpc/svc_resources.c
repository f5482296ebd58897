/*
 * svc_resources.c - charter.v1.Resources: quarantine a source resource and release it.
 *
 * Both are operator-only writes stamped by the database clock inside the query library,
 * refused under --scripted-only by their rows as the grant controls are. The rule that refuses
 * an artifact derived from a quarantined resource is the guard's (RULE-INPUT-QUARANTINE), read
 * by every gate from the lineage summary's sources; these handlers only set and lift the fact.
 */
#include <stdio.h>
#include <string.h>

#include "charter.pb-c.h"
#include "rpc/services.h"

/* The reply of charter_quarantine_resource or charter_release_resource as the message. */
static Charter__V1__ResourceQuarantine *quarantine_of(call *c, const json_t *j)
{
    Charter__V1__ResourceQuarantine *r = call_alloc(c, sizeof *r);
    if (r == NULL || !json_is_object(j))
        return NULL;
    charter__v1__resource_quarantine__init(r);
    const char *fields[] = {"id", "quarantined_at", "reason", "by"};
    char **into[] = {&r->resource_id, &r->quarantined_at, &r->reason, &r->quarantined_by};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const char *v = json_string_value(json_object_get(j, fields[i]));
        if ((*into[i] = call_strdup(c, v != NULL ? v : "")) == NULL)
            return NULL;
    }
    r->quarantined = json_is_true(json_object_get(j, "quarantined"));
    r->released = json_is_true(json_object_get(j, "released"));
    return r;
}

static int svc_resources_quarantine(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__QuarantineResourceRequest *rq =
        (const Charter__V1__QuarantineResourceRequest *)in;
    int rc;
    if ((rc = call_require_id(c, "resource_id", rq->resource_id)) != RPC_OK)
        return rc;
    const char *reason = rq->reason != NULL ? rq->reason : "";
    if ((rc = call_require_utf8(c, "reason", reason)) != RPC_OK)
        return rc;
    if (reason[0] == '\0' || strlen(reason) > 512)
        return call_fail(c, RPC_INVALID_ARGUMENT, "reason: 1 to 512 bytes saying why");
    char what[160];
    snprintf(what, sizeof what, "resource %s", rq->resource_id);
    json_t *j = NULL;
    rc = q_quarantine_resource(c->st, rq->resource_id, reason,
                               c->caller[0] != '\0' ? c->caller : "unknown", &j);
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, what);
    Charter__V1__ResourceQuarantine *r = quarantine_of(c, j);
    json_decref(j);
    if (r == NULL)
        return call_fail(c, RPC_INTERNAL, "unexpected database reply for %s", what);
    *out = &r->base;
    return RPC_OK;
}

static int svc_resources_release(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__ReleaseResourceRequest *rq = (const Charter__V1__ReleaseResourceRequest *)in;
    int rc;
    if ((rc = call_require_id(c, "resource_id", rq->resource_id)) != RPC_OK)
        return rc;
    char what[160];
    snprintf(what, sizeof what, "resource %s", rq->resource_id);
    json_t *j = NULL;
    rc = q_release_resource(c->st, rq->resource_id, &j);
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, what);
    Charter__V1__ResourceQuarantine *r = quarantine_of(c, j);
    json_decref(j);
    if (r == NULL)
        return call_fail(c, RPC_INTERNAL, "unexpected database reply for %s", what);
    *out = &r->base;
    return RPC_OK;
}

/* The Resources service: one row per method, checked against the generated descriptor at
 * startup (dispatch_check_tables); dispatch enforces each row's columns (services.h). */
const svc_method svc_resources_methods[] = {
    {"QuarantineResource", &charter__v1__quarantine_resource_request__descriptor,
     &charter__v1__resource_quarantine__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_GRANT_CONTROL, svc_resources_quarantine},
    {"ReleaseResource", &charter__v1__release_resource_request__descriptor,
     &charter__v1__resource_quarantine__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_GRANT_CONTROL, svc_resources_release},
};
const size_t svc_resources_methods_len =
    sizeof svc_resources_methods / sizeof svc_resources_methods[0];
