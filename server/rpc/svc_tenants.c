/*
 * svc_tenants.c - charter.v1.Tenants and charter.v1.Credentials: creating and listing tenants
 * (the admin token only) and a tenant's own credentials (its operator).
 *
 * A credential's secret is made here from RAND_bytes, returned once in the reply and never
 * stored: the registry keeps its SHA-256 (tenant.h). A tenant is created on a graph that holds
 * no data: its graph is claimed (in its own slot) before it is registered. Each service acts on the
 * tenant dispatch resolved for the call (call.tenant), so an operator of one tenant cannot name
 * another's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "charter.pb-c.h"
#include "rpc/services.h"
#include "db/tenant.h"

static unsigned long long svc_tenants_count(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_integer(v) && json_integer_value(v) > 0)
        return (unsigned long long)json_integer_value(v);
    if (json_is_real(v) && json_real_value(v) > 0)
        return (unsigned long long)json_real_value(v);
    return 0;
}

static const char *svc_tenants_text(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s != NULL ? s : "";
}

static Charter__V1__Tenant *svc_tenants_tenant(call *c, const json_t *t)
{
    Charter__V1__Tenant *r = call_alloc(c, sizeof *r);
    Charter__V1__TenantQuotas *q = call_alloc(c, sizeof *q);
    if (r == NULL || q == NULL)
        return NULL;
    charter__v1__tenant__init(r);
    charter__v1__tenant_quotas__init(q);
    q->max_runs = svc_tenants_count(t, "max_runs");
    q->max_artifacts = svc_tenants_count(t, "max_artifacts");
    q->calls_per_second = (uint32_t)svc_tenants_count(t, "calls_per_second");
    q->retention_seconds = svc_tenants_count(t, "retention_seconds");
    q->invocation_window_seconds = svc_tenants_count(t, "invocation_window_seconds");
    r->quotas = q;
    r->name = call_strdup(c, svc_tenants_text(t, "name"));
    r->created_at = call_strdup(c, svc_tenants_text(t, "created_at"));
    r->implicit = json_is_true(json_object_get(t, "implicit"));
    r->runs = svc_tenants_count(t, "runs");
    r->artifacts = svc_tenants_count(t, "artifacts");
    return r->name != NULL && r->created_at != NULL ? r : NULL;
}

static Charter__V1__Credential *svc_tenants_credential(call *c, const json_t *j)
{
    Charter__V1__Credential *r = call_alloc(c, sizeof *r);
    if (r == NULL)
        return NULL;
    charter__v1__credential__init(r);
    r->id = call_strdup(c, svc_tenants_text(j, "id"));
    r->tenant = call_strdup(c, svc_tenants_text(j, "tenant"));
    r->role = call_strdup(c, svc_tenants_text(j, "role"));
    r->label = call_strdup(c, svc_tenants_text(j, "label"));
    r->created_at = call_strdup(c, svc_tenants_text(j, "created_at"));
    r->revoked_at = call_strdup(c, svc_tenants_text(j, "revoked_at"));
    if (!r->id || !r->tenant || !r->role || !r->label || !r->created_at || !r->revoked_at)
        return NULL;
    const json_t *actors = json_object_get(j, "actors");
    size_t n = json_is_array(actors) ? json_array_size(actors) : 0;
    r->actors = call_alloc(c, (n ? n : 1) * sizeof *r->actors);
    if (r->actors == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if ((r->actors[i] = call_strdup(c, json_string_value(json_array_get(actors, i)))) == NULL)
            return NULL;
        r->n_actors++;
    }
    return r;
}

/* The issued credential as returned once: the stored record and the secret. */
static Charter__V1__IssuedCredential *svc_tenants_issued(call *c, const json_t *cred,
                                                         const char *secret)
{
    Charter__V1__IssuedCredential *r = call_alloc(c, sizeof *r);
    if (r == NULL)
        return NULL;
    charter__v1__issued_credential__init(r);
    r->credential = svc_tenants_credential(c, cred);
    r->secret = call_strdup(c, secret);
    return r->credential != NULL && r->secret != NULL ? r : NULL;
}

/* {id, hash, role, actors, label} for the registry: never the secret. */
static json_t *svc_tenants_doc(const char *id, const char *hash, const char *role,
                               char *const *actors, size_t n_actors, const char *label)
{
    json_t *list = json_array();
    for (size_t i = 0; list != NULL && i < n_actors; i++) {
        if (json_array_append_new(list, json_string(actors[i])) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    if (list == NULL)
        return NULL;
    return json_pack("{s:s, s:s, s:s, s:o, s:s}", "id", id, "hash", hash, "role", role, "actors",
                     list, "label", label != NULL ? label : "");
}

static int svc_tenants_create(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__CreateTenantRequest *rq = (const Charter__V1__CreateTenantRequest *)in;
    int rc;
    if (!tenant_name_ok(rq->name))
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "name: a tenant name is 1 to 64 of [A-Za-z0-9_.-], not beginning with "
                         "\"_\", not . or ..");
    if (strcmp(rq->name, c->env->graph) == 0)
        return call_fail(c, RPC_ALREADY_EXISTS, "tenant %s exists (the default graph)", rq->name);
    /* The graph first, in its own slot: a name whose graph holds data (another charterd's
     * default graph, an older graph) is refused before anything is registered, so the admin
     * never gets a credential for data it did not create. */
    rc = tenant_claim_graph(c->st, rq->name);
    if (rc != STATUS_OK)
        return call_fail_statusf(c, rc, "tenant %s: %s", rq->name, store_last_error(c->st));
    char id[TENANT_CREDENTIAL_ID_LEN + 1], secret[TENANT_SECRET_LEN + 1], hash[65];
    if (tenant_credential_new(id, secret, hash) != STATUS_OK)
        return call_fail(c, RPC_INTERNAL, "no random bytes for a credential");
    const Charter__V1__TenantQuotas *q = rq->quotas;
    json_t *quotas = json_pack(
        "{s:I, s:I, s:I, s:I, s:I}", "max_runs", (json_int_t)(q != NULL ? q->max_runs : 0),
        "max_artifacts", (json_int_t)(q != NULL ? q->max_artifacts : 0), "calls_per_second",
        (json_int_t)(q != NULL ? q->calls_per_second : 0), "retention_seconds",
        (json_int_t)(q != NULL ? q->retention_seconds : 0), "invocation_window_seconds",
        (json_int_t)(q != NULL ? q->invocation_window_seconds : 0));
    json_t *doc = svc_tenants_doc(id, hash, "operator", NULL, 0, "first operator");
    char *qtext = quotas != NULL ? json_dumps(quotas, JSON_COMPACT) : NULL;
    char *dtext = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_t *j = NULL;
    if (qtext == NULL || dtext == NULL) {
        rc = call_fail(c, RPC_INTERNAL, "out of memory");
        goto out;
    }
    char what[96];
    snprintf(what, sizeof what, "tenant %s", rq->name);
    rc = q_tenant_create(c->st, rq->name, qtext, c->env->graph, dtext, &j);
    if (rc != STATUS_OK) {
        rc = call_fail_statusf(c, rc, "%s", store_last_error(c->st));
        goto out;
    }
    Charter__V1__CreateTenantResponse *r = call_alloc(c, sizeof *r);
    if (r == NULL) {
        rc = call_fail(c, RPC_INTERNAL, "out of memory");
        goto out;
    }
    charter__v1__create_tenant_response__init(r);
    r->tenant = svc_tenants_tenant(c, json_object_get(j, "tenant"));
    r->operator_credential = svc_tenants_issued(c, json_object_get(j, "credential"), secret);
    if (r->tenant == NULL || r->operator_credential == NULL) {
        rc = call_fail(c, RPC_INTERNAL, "unexpected database reply for %s", what);
        goto out;
    }
    *out = &r->base;
    rc = RPC_OK;
out:
    OPENSSL_cleanse(secret, sizeof secret);
    free(qtext);
    free(dtext);
    json_decref(quotas);
    json_decref(doc);
    json_decref(j);
    return rc;
}

static int svc_tenants_list(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    (void)in;
    json_t *j = NULL;
    int rc = q_tenant_list(c->st, c->env->graph, &j);
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, "the tenant registry");
    const json_t *list = json_object_get(j, "tenants");
    size_t n = json_is_array(list) ? json_array_size(list) : 0;
    Charter__V1__ListTenantsResponse *r = call_alloc(c, sizeof *r);
    if (r != NULL) {
        charter__v1__list_tenants_response__init(r);
        r->tenants = call_alloc(c, (n ? n : 1) * sizeof *r->tenants);
    }
    for (size_t i = 0; r != NULL && r->tenants != NULL && i < n; i++) {
        if ((r->tenants[i] = svc_tenants_tenant(c, json_array_get(list, i))) == NULL)
            r = NULL;
        else
            r->n_tenants++;
    }
    json_decref(j);
    if (r == NULL || r->tenants == NULL)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &r->base;
    return RPC_OK;
}

static int svc_credentials_issue(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__IssueCredentialRequest *rq = (const Charter__V1__IssueCredentialRequest *)in;
    call_role role = tenant_role_of(rq->role);
    if (role == ROLE_NONE)
        return call_fail(c, RPC_INVALID_ARGUMENT, "role: operator, viewer or host");
    if (role == ROLE_HOST && rq->n_actors == 0)
        return call_fail(c, RPC_INVALID_ARGUMENT, "actors: a host credential acts for 1 or more");
    if (role != ROLE_HOST && rq->n_actors > 0)
        return call_fail(c, RPC_INVALID_ARGUMENT, "actors: only a host credential acts for actors");
    if (rq->n_actors > 64)
        return call_fail(c, RPC_INVALID_ARGUMENT, "actors: at most 64");
    for (size_t i = 0; i < rq->n_actors; i++) {
        int rc = call_require_id(c, "actors", rq->actors[i]);
        if (rc != RPC_OK)
            return rc;
    }
    if (strlen(rq->label) > 128)
        return call_fail(c, RPC_INVALID_ARGUMENT, "label: at most 128 bytes");
    int rc = call_require_utf8(c, "label", rq->label);
    if (rc != RPC_OK)
        return rc;
    char id[TENANT_CREDENTIAL_ID_LEN + 1], secret[TENANT_SECRET_LEN + 1], hash[65];
    if (tenant_credential_new(id, secret, hash) != STATUS_OK)
        return call_fail(c, RPC_INTERNAL, "no random bytes for a credential");
    json_t *doc = svc_tenants_doc(id, hash, rq->role, rq->actors, rq->n_actors, rq->label);
    char *dtext = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_t *j = NULL;
    if (dtext == NULL) {
        rc = call_fail(c, RPC_INTERNAL, "out of memory");
        goto out;
    }
    rc = q_credential_issue(c->st, c->tenant, dtext, c->env->graph, &j);
    if (rc != STATUS_OK) {
        rc = call_fail_statusf(c, rc, "%s", store_last_error(c->st));
        goto out;
    }
    Charter__V1__IssuedCredential *r =
        svc_tenants_issued(c, json_object_get(j, "credential"), secret);
    if (r == NULL) {
        rc = call_fail(c, RPC_INTERNAL, "unexpected database reply for credential %s", id);
        goto out;
    }
    *out = &r->base;
    rc = RPC_OK;
out:
    OPENSSL_cleanse(secret, sizeof secret);
    free(dtext);
    json_decref(doc);
    json_decref(j);
    return rc;
}

static int svc_credentials_list(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    (void)in;
    json_t *j = NULL;
    int rc = q_credential_list(c->st, c->tenant, &j);
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, "the tenant registry");
    const json_t *list = json_object_get(j, "credentials");
    size_t n = json_is_array(list) ? json_array_size(list) : 0;
    Charter__V1__ListCredentialsResponse *r = call_alloc(c, sizeof *r);
    if (r != NULL) {
        charter__v1__list_credentials_response__init(r);
        r->credentials = call_alloc(c, (n ? n : 1) * sizeof *r->credentials);
    }
    for (size_t i = 0; r != NULL && r->credentials != NULL && i < n; i++) {
        if ((r->credentials[i] = svc_tenants_credential(c, json_array_get(list, i))) == NULL)
            r = NULL;
        else
            r->n_credentials++;
    }
    json_decref(j);
    if (r == NULL || r->credentials == NULL)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &r->base;
    return RPC_OK;
}

static int svc_credentials_revoke(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__RevokeCredentialRequest *rq =
        (const Charter__V1__RevokeCredentialRequest *)in;
    int rc = call_require_id(c, "credential_id", rq->credential_id);
    if (rc != RPC_OK)
        return rc;
    json_t *j = NULL;
    rc = q_credential_revoke(c->st, c->tenant, rq->credential_id, &j);
    if (rc != STATUS_OK)
        return call_fail_status_id(c, rc, "credential", rq->credential_id);
    Charter__V1__Credential *r = svc_tenants_credential(c, json_object_get(j, "credential"));
    json_decref(j);
    if (r == NULL)
        return call_fail(c, RPC_INTERNAL, "unexpected database reply for credential %s",
                         rq->credential_id);
    *out = &r->base;
    return RPC_OK;
}

/* The Tenants service: the admin token only (ROLE_ADMIN rows), which reaches nothing else. */
const svc_method svc_tenants_methods[] = {
    {"CreateTenant", &charter__v1__create_tenant_request__descriptor,
     &charter__v1__create_tenant_response__descriptor, ROLE_ADMIN, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, svc_tenants_create},
    {"ListTenants", &charter__v1__list_tenants_request__descriptor,
     &charter__v1__list_tenants_response__descriptor, ROLE_ADMIN, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, svc_tenants_list},
};
const size_t svc_tenants_methods_len = sizeof svc_tenants_methods / sizeof svc_tenants_methods[0];

/* The Credentials service: the tenant's operator, on the tenant of the call. */
const svc_method svc_credentials_methods[] = {
    {"IssueCredential", &charter__v1__issue_credential_request__descriptor,
     &charter__v1__issued_credential__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, svc_credentials_issue},
    {"ListCredentials", &charter__v1__list_credentials_request__descriptor,
     &charter__v1__list_credentials_response__descriptor, ROLE_OPERATOR, SVC_NO_HOST,
     SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, svc_credentials_list},
    {"RevokeCredential", &charter__v1__revoke_credential_request__descriptor,
     &charter__v1__credential__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, svc_credentials_revoke},
};
const size_t svc_credentials_methods_len =
    sizeof svc_credentials_methods / sizeof svc_credentials_methods[0];
