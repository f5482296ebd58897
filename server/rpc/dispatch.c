/*
 * dispatch.c - decode, route, authenticate, run and encode one RPC (see dispatch.h).
 *
 * protobuf-c's unpack trusts lengths and counts inside the message, so the encoded size is
 * capped before unpacking and unpack gets an allocator with a per-call byte budget: a small
 * message cannot make the server allocate without bound. Every failure becomes an RpcResponse
 * code; the only thing that leaves without a reply is a worker that cannot allocate one.
 */
#include "rpc/dispatch.h"

#include <stdalign.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/rand.h>

#include "charter.pb-c.h"
#include "health.pb-c.h"
#include "reflection.pb-c.h"
#include "reflection_v1alpha.pb-c.h"
#include "rpc/descriptors.h"
#include "unpack_budget.h"
#include "core/digest.h"
#include "evidence/evlog.h"
#include "core/log.h"
#include "core/nulbyte.h"
#include "core/metrics.h"
#include "db/tenant.h"
#include "core/invariant.h"

/* Bytes the decoder may allocate per byte of request, and the floor for small requests. The
 * floor must cover every request the handlers accept: protobuf-c scans a repeated field into
 * 32-byte records held in doubling slabs, then allocates a pointer and a copy per string, so
 * the 1000 one- or two-character artifact ids a CheckInput may carry (about 4 kB on the wire)
 * take some 64 kB to decode. */
#define DISPATCH_BUDGET_FACTOR 8
#define DISPATCH_BUDGET_MIN ((size_t)1024 * 1024)
/* The one method dispatch_serve_quick serves: Health/Check answers from the serving status. */
#define DISPATCH_QUICK_METHOD "/charter.v1.Health/Check"
/* Longest method name looked up; anything longer cannot be one of ours. */
#define DISPATCH_METHOD_MAX 128

static const dispatch_service dispatch_services[] = {
    {&charter__v1__runs__descriptor, svc_runs_methods, &svc_runs_methods_len},
    {&charter__v1__gate__descriptor, svc_gate_methods, &svc_gate_methods_len},
    {&charter__v1__grants__descriptor, svc_grants_methods, &svc_grants_methods_len},
    {&charter__v1__resources__descriptor, svc_resources_methods, &svc_resources_methods_len},
    {&charter__v1__health__descriptor, svc_health_methods, &svc_health_methods_len},
    {&charter__v1__evidence__descriptor, svc_evidence_methods, &svc_evidence_methods_len},
    {&charter__v1__workflows__descriptor, svc_workflows_methods, &svc_workflows_methods_len},
    {&charter__v1__retrieval__descriptor, svc_retrieval_methods, &svc_retrieval_methods_len},
    {&charter__v1__reflection__descriptor, svc_reflection_methods, &svc_reflection_methods_len},
    {&charter__v1__tenants__descriptor, svc_tenants_methods, &svc_tenants_methods_len},
    {&charter__v1__credentials__descriptor, svc_credentials_methods, &svc_credentials_methods_len},
    {&charter__v1__approvals__descriptor, svc_approvals_methods, &svc_approvals_methods_len},
    /* grpc.health.v1 (proto/health.proto) after charter.v1's services. */
    {&grpc__health__v1__health__descriptor, svc_grpc_health_methods, &svc_grpc_health_methods_len},
    /* Server reflection (proto/reflection.proto, reflection_v1alpha.proto). */
    {&grpc__reflection__v1__server_reflection__descriptor, svc_grpc_reflection_methods,
     &svc_grpc_reflection_methods_len},
    {&grpc__reflection__v1alpha__server_reflection__descriptor, svc_grpc_reflection_v1alpha_methods,
     &svc_grpc_reflection_v1alpha_methods_len},
};
#define DISPATCH_N_SERVICES (sizeof dispatch_services / sizeof dispatch_services[0])

/* --- names and responses ------------------------------------------------------------------ */

const char *dispatch_code_name(int code)
{
    switch (code) {
    case RPC_OK:
        return "OK";
    case RPC_INVALID_ARGUMENT:
        return "INVALID_ARGUMENT";
    case RPC_DEADLINE_EXCEEDED:
        return "DEADLINE_EXCEEDED";
    case RPC_NOT_FOUND:
        return "NOT_FOUND";
    case RPC_ALREADY_EXISTS:
        return "ALREADY_EXISTS";
    case RPC_PERMISSION_DENIED:
        return "PERMISSION_DENIED";
    case RPC_RESOURCE_EXHAUSTED:
        return "RESOURCE_EXHAUSTED";
    case RPC_FAILED_PRECONDITION:
        return "FAILED_PRECONDITION";
    case RPC_UNIMPLEMENTED:
        return "UNIMPLEMENTED";
    case RPC_INTERNAL:
        return "INTERNAL";
    case RPC_UNAVAILABLE:
        return "UNAVAILABLE";
    case RPC_UNAUTHENTICATED:
        return "UNAUTHENTICATED";
    default:
        return "UNKNOWN";
    }
}

static int dispatch_pack_response(int code, const char *message, const uint8_t *payload,
                                  size_t payload_len, const char *request_id, uint8_t **resp,
                                  size_t *resp_len)
{
    Charter__V1__RpcResponse r = CHARTER__V1__RPC_RESPONSE__INIT;
    Charter__V1__RpcResponse__MetadataEntry rid = CHARTER__V1__RPC_RESPONSE__METADATA_ENTRY__INIT;
    Charter__V1__RpcResponse__MetadataEntry *meta[1] = {&rid};
    if (request_id != NULL && request_id[0] != '\0') {
        rid.key = (char *)"x-request-id";
        rid.value = (char *)request_id;
        r.metadata = meta;
        r.n_metadata = 1;
    }
    r.code = code;
    r.message = (char *)(message != NULL ? message : "");
    r.payload.data = (uint8_t *)payload;
    r.payload.len = payload_len;
    size_t n = charter__v1__rpc_response__get_packed_size(&r);
    uint8_t *buf = malloc(n > 0 ? n : 1);
    if (buf == NULL) {
        return -1;
    }
    *resp_len = charter__v1__rpc_response__pack(&r, buf);
    *resp = buf;
    return 0;
}

int dispatch_error_reply(int code, const char *message, uint8_t **resp, size_t *resp_len)
{
    return dispatch_pack_response(code, message, NULL, 0, NULL, resp, resp_len);
}

/* A copy of a caller-supplied name fit for one log line: printable ASCII, at most 128 bytes. */
static void dispatch_printable(const char *s, char *out, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; s != NULL && s[i] != '\0' && j + 1 < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[j++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    out[j] = '\0';
}

static long dispatch_elapsed_us(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (long)((t1.tv_sec - t0->tv_sec) * 1000000L + (t1.tv_nsec - t0->tv_nsec) / 1000);
}

/* --- routing ------------------------------------------------------------------------------ */

const dispatch_service *dispatch_services_of(size_t *n)
{
    *n = DISPATCH_N_SERVICES;
    return dispatch_services;
}

/* The request's string field "mode" (a single string), or NULL when it has none. */
static const ProtobufCFieldDescriptor *dispatch_mode_field(const ProtobufCMessageDescriptor *req)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(req, "mode");
    if (f == NULL || f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED)
        return NULL;
    return f;
}

/* The row's host, quota and scripted-only columns hold known values, and a row refused for
 * live runs under --scripted-only has a request that says its mode. */
static int dispatch_check_columns(const ProtobufCServiceDescriptor *desc,
                                  const ProtobufCMethodDescriptor *md, const svc_method *row,
                                  char *err, size_t errlen)
{
    static const char fix[] = "rebuild charterd with known values in the method table";
    if (row->host != SVC_NO_HOST && row->host != SVC_HOST) {
        snprintf(err, errlen, "method %s/%s has an unknown host column %d (%s)", desc->name,
                 md->name, (int)row->host, fix);
        return -1;
    }
    if (row->quota != SVC_QUOTA_NONE && row->quota != SVC_QUOTA_RUNS &&
        row->quota != SVC_QUOTA_ARTIFACTS) {
        snprintf(err, errlen, "method %s/%s takes an unknown quota %d (%s)", desc->name, md->name,
                 (int)row->quota, fix);
        return -1;
    }
    if (row->scripted != SVC_SCRIPTED_SERVED && row->scripted != SVC_SCRIPTED_LIVE_RUN &&
        row->scripted != SVC_SCRIPTED_GRANT_CONTROL) {
        snprintf(err, errlen, "method %s/%s has an unknown scripted-only column %d (%s)",
                 desc->name, md->name, (int)row->scripted, fix);
        return -1;
    }
    if (row->scripted == SVC_SCRIPTED_LIVE_RUN && dispatch_mode_field(md->input) == NULL) {
        snprintf(err, errlen,
                 "method %s/%s is refused for live runs under --scripted-only, but %s has no "
                 "string field mode (%s)",
                 desc->name, md->name, md->input->name, fix);
        return -1;
    }
    return 0;
}

int dispatch_check_service(const ProtobufCServiceDescriptor *desc, const svc_method *rows,
                           size_t n_rows, char *err, size_t errlen)
{
    static const char fix[] = "rebuild charterd with one row per method of proto/charter.proto";
    if (n_rows != desc->n_methods) {
        snprintf(err, errlen, "service %s declares %u methods but has %zu rows (%s)", desc->name,
                 desc->n_methods, n_rows, fix);
        return -1;
    }
    for (unsigned m = 0; m < desc->n_methods; m++) {
        const ProtobufCMethodDescriptor *md = &desc->methods[m];
        const svc_method *row = NULL;
        for (size_t i = 0; i < n_rows; i++) {
            if (rows[i].name == NULL || strcmp(rows[i].name, md->name) != 0)
                continue;
            if (row != NULL) {
                snprintf(err, errlen, "method %s/%s has two rows (%s)", desc->name, md->name, fix);
                return -1;
            }
            row = &rows[i];
        }
        if (row == NULL) {
            snprintf(err, errlen, "method %s/%s has no row (%s)", desc->name, md->name, fix);
            return -1;
        }
        if (row->request != md->input || row->response != md->output) {
            snprintf(err, errlen,
                     "the row of %s/%s declares %s -> %s, the proto says %s -> %s (%s)", desc->name,
                     md->name, row->request ? row->request->name : "(none)",
                     row->response ? row->response->name : "(none)", md->input->name,
                     md->output->name, fix);
            return -1;
        }
        if (row->handler == NULL) {
            snprintf(err, errlen, "method %s/%s has no handler (%s)", desc->name, md->name, fix);
            return -1;
        }
        if (row->min_role != ROLE_NONE && row->min_role != ROLE_VIEWER &&
            row->min_role != ROLE_OPERATOR && row->min_role != ROLE_ADMIN) {
            snprintf(err, errlen, "method %s/%s requires an unknown role %d (%s)", desc->name,
                     md->name, (int)row->min_role, fix);
            return -1;
        }
        if (dispatch_check_columns(desc, md, row, err, errlen) != 0)
            return -1;
    }
    return 0;
}

int dispatch_check_tables(char *err, size_t errlen)
{
    for (size_t i = 0; i < DISPATCH_N_SERVICES; i++) {
        const dispatch_service *s = &dispatch_services[i];
        if (dispatch_check_service(s->desc, s->methods, *s->n_methods, err, errlen) != 0)
            return -1;
    }
    /* The descriptors reflection serves and the gRPC listener reads streaming from describe
     * every row. */
    const ProtobufCServiceDescriptor *served[DISPATCH_N_SERVICES];
    for (size_t i = 0; i < DISPATCH_N_SERVICES; i++) {
        served[i] = dispatch_services[i].desc;
    }
    return descriptors_check(served, DISPATCH_N_SERVICES, err, errlen);
}

/* Resolves "/charter.v1.<Service>/<Method>". Returns 0 with the method's descriptor and the
 * row that serves it (dispatch_check_tables guarantees there is exactly one). */
static int dispatch_route(const char *method, const ProtobufCMethodDescriptor **mdp,
                          const svc_method **rowp)
{
    if (method == NULL || method[0] != '/') {
        return -1;
    }
    size_t len = strlen(method);
    if (len > DISPATCH_METHOD_MAX) {
        return -1;
    }
    const char *slash = strchr(method + 1, '/');
    if (slash == NULL || slash[1] == '\0' || strchr(slash + 1, '/') != NULL) {
        return -1;
    }
    size_t svc_len = (size_t)(slash - (method + 1));
    for (size_t i = 0; i < DISPATCH_N_SERVICES; i++) {
        const ProtobufCServiceDescriptor *d = dispatch_services[i].desc;
        if (strlen(d->name) != svc_len || memcmp(d->name, method + 1, svc_len) != 0) {
            continue;
        }
        const ProtobufCMethodDescriptor *md =
            protobuf_c_service_descriptor_get_method_by_name(d, slash + 1);
        if (md == NULL) {
            return -1;
        }
        const dispatch_service *svc = &dispatch_services[i];
        for (size_t r = 0; r < *svc->n_methods; r++) {
            if (strcmp(svc->methods[r].name, md->name) == 0) {
                /* What the startup check established, relied on by the unpack and the handler. */
                INVARIANT(svc->methods[r].request == md->input);
                *mdp = md;
                *rowp = &svc->methods[r];
                return 0;
            }
        }
        return -1;
    }
    return -1;
}

const ProtobufCMethodDescriptor *dispatch_method(const char *method)
{
    const ProtobufCMethodDescriptor *md = NULL;
    const svc_method *row = NULL;
    return dispatch_route(method, &md, &row) == 0 ? md : NULL;
}

static const char *dispatch_metadata(const Charter__V1__RpcRequest *rq, const char *key)
{
    for (size_t i = 0; i < rq->n_metadata; i++) {
        const Charter__V1__RpcRequest__MetadataEntry *e = rq->metadata[i];
        if (e != NULL && e->key != NULL && strcasecmp(e->key, key) == 0) {
            return e->value;
        }
    }
    return NULL;
}

static int dispatch_timeout(const server_env *env, uint32_t requested)
{
    if (requested == 0) {
        return env->limits.default_timeout_ms;
    }
    if (requested > (uint32_t)env->limits.max_timeout_ms) {
        return env->limits.max_timeout_ms;
    }
    return (int)requested;
}

/* A request id as the caller sent it is kept only when it is 1..DISPATCH_REQUEST_ID_MAX
 * printable ASCII bytes without spaces: it goes into log lines and events verbatim. */
#define DISPATCH_REQUEST_ID_MAX 128
static bool dispatch_request_id_ok(const char *v)
{
    size_t n = v != NULL ? strlen(v) : 0;
    if (n == 0 || n > DISPATCH_REQUEST_ID_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f) {
            return false;
        }
    }
    return true;
}

/* True when s holds n lowercase hex digits, not all zero unless zero_ok. */
static bool dispatch_lower_hex(const char *s, size_t n, bool zero_ok)
{
    if (!digest_is_hex(s, n))
        return false;
    for (size_t i = 0; i < n && !zero_ok; i++)
        if (s[i] != '0')
            return true;
    return zero_ok;
}

/* The trace-id of a W3C traceparent "vv-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>"
 * (https://www.w3.org/TR/trace-context/#traceparent-header) into out (33 bytes); false when
 * v is not one (an all-zero id is invalid there too). */
static bool dispatch_traceparent(const char *v, char out[33])
{
    if (v == NULL || strlen(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' ||
        !dispatch_lower_hex(v, 2, true) || strncmp(v, "ff", 2) == 0 ||
        !dispatch_lower_hex(v + 3, 32, false) || !dispatch_lower_hex(v + 36, 16, false) ||
        !dispatch_lower_hex(v + 53, 2, true)) {
        return false;
    }
    if (strncmp(v, "00", 2) == 0 && strlen(v) != 55) {
        return false;
    }
    memcpy(out, v + 3, 32);
    out[32] = '\0';
    return true;
}

/* Random bytes for request ids, drawn from OpenSSL's generator a page at a time per thread:
 * one RAND_bytes call (and its locks) per 256 calls instead of one per call. */
#define DISPATCH_RANDOM_PAGE 4096
static _Thread_local unsigned char dispatch_random[DISPATCH_RANDOM_PAGE];
static _Thread_local size_t dispatch_random_left;

/* 16 fresh random bytes (valid until the thread's next call), or NULL when none could be had. */
static const unsigned char *dispatch_random16(void)
{
    if (dispatch_random_left < 16) {
        if (RAND_bytes(dispatch_random, (int)sizeof dispatch_random) != 1)
            return NULL;
        dispatch_random_left = sizeof dispatch_random;
    }
    dispatch_random_left -= 16;
    return dispatch_random + dispatch_random_left;
}

/* The call's request id: the caller's x-request-id when valid, else the trace-id of a valid
 * traceparent, else 16 random bytes in hex. Returns 0, or -1 when no random bytes could be
 * had (the id is then "-"). */
static int dispatch_request_id(const Charter__V1__RpcRequest *rq, char out[129])
{
    const char *x = rq != NULL ? dispatch_metadata(rq, "x-request-id") : NULL;
    if (dispatch_request_id_ok(x)) {
        snprintf(out, DISPATCH_REQUEST_ID_MAX + 1, "%s", x);
        return 0;
    }
    if (rq != NULL && dispatch_traceparent(dispatch_metadata(rq, "traceparent"), out)) {
        return 0;
    }
    const unsigned char *raw = dispatch_random16();
    if (raw == NULL) {
        snprintf(out, 2, "-");
        return -1;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < 16; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[32] = '\0';
    return 0;
}

/* A NUL inside the envelope: in the authorization value it is a bad token, elsewhere a
 * malformed request. Nothing is cut and looked up. */
static void dispatch_refuse_nul(call *c, const Charter__V1__RpcRequest *rq, const nulbyte_hit *h)
{
    const ProtobufCFieldDescriptor *meta = protobuf_c_message_descriptor_get_field_by_name(
        &charter__v1__rpc_request__descriptor, "metadata");
    if (h->top != NULL && h->top == meta && h->top_index < rq->n_metadata &&
        rq->metadata[h->top_index]->key != NULL &&
        strcasecmp(rq->metadata[h->top_index]->key, "authorization") == 0 &&
        strstr(h->path, ".value") != NULL) {
        call_fail(c, RPC_UNAUTHENTICATED, "invalid token (it holds a NUL byte)");
        return;
    }
    call_fail(c, RPC_INVALID_ARGUMENT, "RpcRequest.%s holds a NUL byte (a string may not)",
              h->path);
}

/* --- who is calling, for which tenant -------------------------------------------------- */

static unsigned long long dispatch_json_count(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) > 0
               ? (unsigned long long)json_integer_value(v)
               : (json_is_real(v) && json_real_value(v) > 0 ? (unsigned long long)json_real_value(v)
                                                            : 0);
}

/* The registry's answer for the call's tenant (charter_tenant_admit), with the stored
 * credential cred_id and the SHA-256 of the token presented for it (both "" for none): a
 * failure as its status ("tenant X not found" is NOT_FOUND, for a verified credential or an
 * environment token only; a credential that does not verify is "invalid token" whatever the
 * tenant), else the tenant's name and quotas on the call. */
static int dispatch_admit(call *c, const char *named, const char *cred_id, const char *token_hash,
                          json_t **reply)
{
    int rc = q_tenant_admit(c->st, named != NULL ? named : "", cred_id, c->env->graph, token_hash,
                            reply);
    if (rc == STATUS_ENOTFOUND && named != NULL)
        return call_fail(c, RPC_NOT_FOUND, "tenant %s not found", named);
    if (rc == STATUS_ENOTFOUND)
        return call_fail(c, RPC_UNAUTHENTICATED, "invalid token");
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, "the tenant registry");
    if (json_is_false(json_object_get(*reply, "verified")))
        return call_fail(c, RPC_UNAUTHENTICATED, "invalid token");
    const json_t *t = json_object_get(*reply, "tenant");
    const char *name = json_string_value(json_object_get(t, "name"));
    if (name == NULL || strlen(name) >= sizeof c->tenant)
        return call_fail(c, RPC_INTERNAL, "unexpected reply from the tenant registry");
    snprintf(c->tenant, sizeof c->tenant, "%s", name);
    c->max_runs = dispatch_json_count(t, "max_runs");
    c->max_artifacts = dispatch_json_count(t, "max_artifacts");
    return RPC_OK;
}

/* calls_per_second, checked once per call after the caller is known. */
static int dispatch_rate(call *c, const json_t *reply)
{
    if (!json_is_true(json_object_get(reply, "cps_exceeded")))
        return RPC_OK;
    return call_fail(c, RPC_RESOURCE_EXHAUSTED,
                     "quota calls_per_second of tenant %s exceeded (%llu calls per second)",
                     c->tenant,
                     dispatch_json_count(json_object_get(reply, "tenant"), "calls_per_second"));
}

/* dispatch_token's answer for a well-formed stored credential: the registry decides. */
#define DISPATCH_TOKEN_STORED (-1)
/* dispatch_identify's answer, served without a store, for a caller only the database can
 * identify: the call goes to a worker. */
#define DISPATCH_NEEDS_STORE (-2)

/* The part of identifying a caller that needs no database, shared by dispatch_identify and the
 * HTTP listener's check on headers (dispatch_precheck), so the rule is written once: a bearer
 * token of the stored-credential form is DISPATCH_TOKEN_STORED when well-formed, else invalid;
 * any other authorization must be an environment token (auth_check, constant time) unless the
 * row's minimum role is ROLE_NONE. Returns RPC_OK with *role (ROLE_NONE when no token was
 * needed and none valid was sent), DISPATCH_TOKEN_STORED, or RPC_UNAUTHENTICATED with *why, a
 * static message. */
static int dispatch_token(const auth_tokens *auth, const svc_method *row, const char *authz,
                          call_role *role, const char **why)
{
    static const char scheme[] = "Bearer ";
    *role = ROLE_NONE;
    if (authz != NULL && strncasecmp(authz, scheme, sizeof scheme - 1) == 0 &&
        tenant_is_credential(authz + sizeof scheme - 1)) {
        char id[TENANT_CREDENTIAL_ID_LEN + 1];
        if (tenant_credential_id(authz + sizeof scheme - 1, id))
            return DISPATCH_TOKEN_STORED;
        *why = "invalid token";
        return RPC_UNAUTHENTICATED;
    }
    int a = auth_check(auth, authz, role);
    if (a != AUTH_OK && row->min_role != ROLE_NONE) {
        *why = a == AUTH_MISSING
                   ? "missing credentials: send metadata \"authorization: Bearer <token>\""
                   : "invalid token";
        return RPC_UNAUTHENTICATED;
    }
    return RPC_OK;
}

int dispatch_precheck(const auth_tokens *auth, const char *method, const char *authorization,
                      const char **why)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const ProtobufCMethodDescriptor *md = NULL;
    const svc_method *row = NULL;
    *why = NULL;
    if (dispatch_route(method, &md, &row) != 0) {
        *why = "unknown method";
        return RPC_UNIMPLEMENTED;
    }
    call_role role = ROLE_NONE;
    int t = dispatch_token(auth, row, authorization, &role, why);
    if (t == RPC_OK || t == DISPATCH_TOKEN_STORED)
        return RPC_OK;
    /* Counted and logged as dispatch_serve counts and logs the refusals it answers. */
    long us = dispatch_elapsed_us(&t0);
    metrics_call(method, t, us);
    char request_id[DISPATCH_REQUEST_ID_MAX + 1] = "";
    (void)dispatch_request_id(NULL, request_id);
    log_call_fields lf = {method, dispatch_code_name(t), us, "", request_id};
    log_set_call(&lf);
    log_refusal(t, dispatch_code_name(t), "call %s failed: %s (%d): %s [%ld us]", method,
                dispatch_code_name(t), t, *why, us);
    log_set_call(NULL);
    return t;
}

/* A stored credential "chc_<id>_<secret>": one registry call finds it and the tenant, and
 * counts the call against the tenant's calls_per_second only when the token's SHA-256 is the
 * stored one (so a forged token spends nothing of a tenant's quota); the digest is compared
 * again here in constant time; revoked, unknown or another tenant's is refused. */
static int dispatch_identify_stored(call *c, const char *token, const char *named)
{
    char id[TENANT_CREDENTIAL_ID_LEN + 1], token_hash[65];
    if (!tenant_credential_id(token, id))
        return call_fail(c, RPC_UNAUTHENTICATED, "invalid token");
    if (tenant_credential_hash(token, token_hash) != STATUS_OK)
        return call_fail(c, RPC_INTERNAL, "cannot digest the token");
    json_t *reply = NULL;
    int rc = dispatch_admit(c, named, id, token_hash, &reply);
    if (rc != RPC_OK)
        goto out;
    const json_t *cred = json_object_get(reply, "credential");
    if (!json_is_object(cred) ||
        !tenant_credential_matches(token, json_string_value(json_object_get(cred, "hash")))) {
        rc = call_fail(c, RPC_UNAUTHENTICATED, "invalid token");
        goto out;
    }
    const char *revoked = json_string_value(json_object_get(cred, "revoked_at"));
    if (revoked == NULL || revoked[0] != '\0') {
        rc = call_fail(c, RPC_UNAUTHENTICATED, "credential %s was revoked", id);
        goto out;
    }
    const char *bound = json_string_value(json_object_get(cred, "tenant"));
    if (bound == NULL || strcmp(bound, c->tenant) != 0) {
        rc = call_fail(c, RPC_PERMISSION_DENIED, "credential %s is bound to another tenant, not %s",
                       id, c->tenant);
        goto out;
    }
    c->role = tenant_role_of(json_string_value(json_object_get(cred, "role")));
    if (c->role == ROLE_NONE) {
        rc = call_fail(c, RPC_UNAUTHENTICATED, "credential %s has no known role", id);
        goto out;
    }
    snprintf(c->credential_id, sizeof c->credential_id, "%s", id);
    snprintf(c->caller, sizeof c->caller, "credential:%s", id);
    const json_t *actors = json_object_get(cred, "actors");
    size_t n = json_is_array(actors) ? json_array_size(actors) : 0;
    if (n > 0 && (c->actors = call_alloc(c, n * sizeof *c->actors)) == NULL) {
        rc = call_fail(c, RPC_INTERNAL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const char *a = json_string_value(json_array_get(actors, i));
        if (a != NULL && (c->actors[c->n_actors] = call_strdup(c, a)) != NULL)
            c->n_actors++;
    }
    rc = dispatch_rate(c, reply);
out:
    json_decref(reply);
    return rc;
}

/* Who calls and for which tenant, before the row's role is checked: metadata "tenant" (a
 * tenant name, or the default graph), a stored credential (which implies its tenant) or an
 * environment token (which acts for the default graph only). The default graph with an
 * environment token costs no database call; a stored credential, or an environment token
 * naming another tenant, costs one (charter_tenant_admit). A caller with no valid token that
 * names another tenant is refused without one, with the same answer whether the tenant exists
 * or not: it neither learns which tenants exist nor spends their quotas. */
static int dispatch_identify(const dispatch_ctx *d, const Charter__V1__RpcRequest *rq,
                             const svc_method *row, call *c)
{
    const server_env *env = d->env;
    const char *named = dispatch_metadata(rq, "tenant");
    snprintf(c->tenant, sizeof c->tenant, "%s", env->graph);
    if (named != NULL && strcmp(named, env->graph) != 0 && !tenant_name_ok(named)) {
        char shown[80];
        dispatch_printable(named, shown, sizeof shown);
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "tenant \"%s\": a tenant name is 1 to 64 of [A-Za-z0-9_.-], not "
                         "beginning with \"_\", not . or ..",
                         shown);
    }
    const char *authz = dispatch_metadata(rq, "authorization");
    const char *why = NULL;
    int t = dispatch_token(d->auth, row, authz, &c->role, &why);
    if (t == DISPATCH_TOKEN_STORED && c->st == NULL)
        return DISPATCH_NEEDS_STORE;
    if (t == DISPATCH_TOKEN_STORED)
        return dispatch_identify_stored(c, authz + strlen("Bearer "), named);
    if (t != RPC_OK)
        return call_fail(c, t, "%s", why);
    snprintf(c->caller, sizeof c->caller, "%s",
             c->role == ROLE_OPERATOR ? "env:operator"
             : c->role == ROLE_VIEWER ? "env:viewer"
             : c->role == ROLE_ADMIN  ? "env:admin"
                                      : "");
    if (named == NULL || strcmp(named, env->graph) == 0 || c->role == ROLE_ADMIN)
        return RPC_OK;
    if (c->role == ROLE_NONE)
        return call_fail(c, RPC_UNAUTHENTICATED,
                         "a call naming a tenant needs a credential of that tenant: send "
                         "metadata \"authorization: Bearer chc_...\"");
    if (c->st == NULL)
        return DISPATCH_NEEDS_STORE;
    json_t *reply = NULL;
    int rc = dispatch_admit(c, named, "", "", &reply);
    if (rc == RPC_OK)
        rc = call_fail(c, RPC_PERMISSION_DENIED,
                       "the environment tokens act for the default tenant %s only: call tenant "
                       "%s with one of its credentials",
                       env->graph, named);
    json_decref(reply);
    return rc;
}

/* The rows a host credential may call, from the method table, into buf (n bytes):
 * "Runs/CompleteRun, Gate/OpenStep, ReadSource, ObserveSource, RecordOutput, CheckInput, Deliver
 * and Invoke" (a service named once, before its first). */
static void dispatch_host_methods(char *buf, size_t n)
{
    size_t total = 0, seen = 0, at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < DISPATCH_N_SERVICES; i++)
        for (size_t r = 0; r < *dispatch_services[i].n_methods; r++)
            total += dispatch_services[i].methods[r].host == SVC_HOST;
    for (size_t i = 0; i < DISPATCH_N_SERVICES && at < n; i++) {
        const dispatch_service *svc = &dispatch_services[i];
        bool named = false;
        for (size_t r = 0; r < *svc->n_methods && at < n; r++) {
            if (svc->methods[r].host != SVC_HOST)
                continue;
            seen++;
            const char *sep = seen == 1 ? "" : seen == total ? " and " : ", ";
            at += (size_t)snprintf(buf + at, n - at, "%s%s%s%s", sep,
                                   named ? "" : svc->desc->short_name, named ? "" : "/",
                                   svc->methods[r].name);
            named = true;
        }
    }
}

/* Why a caller of this role may not call the row's method. */
static int dispatch_refuse_role(call *c, const svc_method *row)
{
    if (row->min_role == ROLE_ADMIN)
        return call_fail(c, RPC_PERMISSION_DENIED,
                         "this method needs the admin token (CHARTER_ADMIN_TOKEN)");
    if (c->role == ROLE_ADMIN)
        return call_fail(c, RPC_PERMISSION_DENIED,
                         "the admin token creates and lists tenants only; call with a credential "
                         "of the tenant");
    if (c->role == ROLE_HOST) {
        char methods[512];
        dispatch_host_methods(methods, sizeof methods);
        return call_fail(c, RPC_PERMISSION_DENIED, "a host credential may call only %s", methods);
    }
    return call_fail(c, RPC_PERMISSION_DENIED, "this method needs the %s token",
                     row->min_role == ROLE_OPERATOR ? "operator" : "viewer");
}

/* RULE-CALL-SCRIPTED-ONLY: under --scripted-only (a shared demo), what the row's scripted
 * column refuses: live runs, and the grant controls. Returns RPC_OK when the call is served. */
static int dispatch_refuse_scripted(call *c, const svc_method *row,
                                    const ProtobufCMethodDescriptor *md, const ProtobufCMessage *in)
{
    if (row->scripted == SVC_SCRIPTED_GRANT_CONTROL)
        return call_fail(c, RPC_PERMISSION_DENIED, "grant controls are off (--scripted-only)");
    if (row->scripted != SVC_SCRIPTED_LIVE_RUN)
        return RPC_OK;
    /* dispatch_check_tables established the field; were it gone, the call is refused (fail
     * closed). The mode is read as the handler reads it. */
    const ProtobufCFieldDescriptor *f = dispatch_mode_field(md->input);
    if (f == NULL)
        return call_fail(c, RPC_PERMISSION_DENIED, "live runs are off (--scripted-only)");
    const char *mode = *(const char *const *)(const void *)((const char *)in + f->offset);
    if (mode != NULL && strcmp(mode, "live") == 0)
        return call_fail(c, RPC_PERMISSION_DENIED, "mode: live runs are off (--scripted-only)");
    return RPC_OK;
}

/* --- one call ----------------------------------------------------------------------------- */

/* Frees what one call decoded and allocated. */
static void dispatch_release(call *c, Charter__V1__RpcRequest *rq, ProtobufCMessage *in,
                             ProtobufCAllocator *alloc)
{
    call_release(c);
    if (in != NULL) {
        protobuf_c_message_free_unpacked(in, alloc);
    }
    if (rq != NULL) {
        charter__v1__rpc_request__free_unpacked(rq, alloc);
    }
}

/* Counts the answered call c in the metrics (under its method when it was routed) and logs
 * it: a line for a failure, and for every call when verbose. */
static void dispatch_account(const server_env *env, const call *c, const char *method, bool routed,
                             const struct timespec *t0)
{
    int status = c->status;
    long us = dispatch_elapsed_us(t0);
    metrics_call(routed ? method : NULL, status, us);
    log_call_fields lf = {method, dispatch_code_name(status), us,
                          c->tenant[0] != '\0' ? c->tenant : env->graph, c->request_id};
    log_set_call(&lf);
    if (status != RPC_OK) {
        log_refusal(status, dispatch_code_name(status), "call %s failed: %s (%d): %s [%ld us]",
                    method, dispatch_code_name(status), status, c->message, us);
    } else if (log_verbose()) {
        log_info("call %s ok [%ld us]", method, us);
    }
    log_set_call(NULL);
}

/* True when rq asks Health for its own database round trip (metadata "health-source" =
 * "database"), so that it is served on a worker. */
static bool dispatch_wants_round_trip(const Charter__V1__RpcRequest *rq)
{
    const char *v = dispatch_metadata(rq, "health-source");
    return v != NULL && strcmp(v, "database") == 0;
}

/* dispatch_serve, and dispatch_serve_quick when st is NULL: then a call that would touch the
 * database (any method but DISPATCH_QUICK_METHOD, a caller the registry identifies, metadata
 * health-source: database) returns DISPATCH_NEEDS_STORE before anything of it is answered,
 * counted or logged. */
static int dispatch_run(const dispatch_ctx *d, store *st, const uint8_t *req, size_t len,
                        unsigned waited_ms, uint8_t **resp, size_t *resp_len)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    *resp = NULL;
    *resp_len = 0;

    const server_env *env = d->env;
    call c;
    memset(&c, 0, sizeof c);
    c.env = env;
    c.st = st;
    c.role = ROLE_NONE;
    c.status = RPC_OK;

    unpack_budget budget;
    unpack_budget_init(&budget, len, DISPATCH_BUDGET_FACTOR, DISPATCH_BUDGET_MIN);
    ProtobufCAllocator alloc = unpack_budget_allocator(&budget);

    Charter__V1__RpcRequest *rq = NULL;
    ProtobufCMessage *in = NULL;
    const ProtobufCMethodDescriptor *md = NULL;
    ProtobufCMessage *out = NULL;
    uint8_t *payload = NULL;
    size_t payload_len = 0;
    char method[DISPATCH_METHOD_MAX + 1] = "?";

    if (len > env->limits.max_message) {
        call_fail(&c, RPC_RESOURCE_EXHAUSTED, "request of %zu bytes exceeds the %zu byte limit",
                  len, env->limits.max_message);
        goto reply;
    }
    rq = charter__v1__rpc_request__unpack(&alloc, len, req);
    if (rq == NULL) {
        if (budget.exhausted) {
            call_fail(&c, RPC_RESOURCE_EXHAUSTED, "decoding the request needs more than %zu bytes",
                      budget.limit);
        } else {
            call_fail(&c, RPC_INVALID_ARGUMENT, "cannot decode RpcRequest");
        }
        goto reply;
    }
    dispatch_printable(rq->method, method, sizeof method);
    (void)dispatch_request_id(rq, c.request_id);
    c.watch_last = dispatch_metadata(rq, "grpc-health-last");
    nulbyte_hit nul;
    if (nulbyte_find(&charter__v1__rpc_request__descriptor, req, len, &nul) == 1) {
        dispatch_refuse_nul(&c, rq, &nul);
        goto reply;
    }

    const svc_method *row = NULL;
    if (st == NULL && (strcmp(rq->method, DISPATCH_QUICK_METHOD) != 0 || env->serving == NULL ||
                       dispatch_wants_round_trip(rq)))
        goto needs_store;
    if (dispatch_route(rq->method, &md, &row) != 0) {
        call_fail(&c, RPC_UNIMPLEMENTED, "unknown method \"%s\"", method);
        goto reply;
    }

    /* The call's deadline is set before anything of the call touches the database (the tenant
     * admission included): the wait in the queue counts against it, and no command of this
     * call runs under another call's deadline. */
    c.timeout_ms = dispatch_timeout(env, rq->timeout_ms);
    if (waited_ms >= (unsigned)c.timeout_ms) {
        call_fail(&c, RPC_DEADLINE_EXCEEDED,
                  "the call waited %u ms for a worker, past its %d ms deadline", waited_ms,
                  c.timeout_ms);
        goto reply;
    }
    c.timeout_ms -= (int)waited_ms;
    if (st != NULL)
        store_set_deadline(st, c.timeout_ms);

    int irc = dispatch_identify(d, rq, row, &c);
    if (irc == DISPATCH_NEEDS_STORE)
        goto needs_store;
    if (irc != RPC_OK) {
        goto reply;
    }

    in = protobuf_c_message_unpack(md->input, &alloc, rq->payload.len, rq->payload.data);
    if (in == NULL) {
        if (budget.exhausted) {
            call_fail(&c, RPC_RESOURCE_EXHAUSTED, "decoding %s needs more than %zu bytes",
                      md->input->name, budget.limit);
        } else {
            call_fail(&c, RPC_INVALID_ARGUMENT, "cannot decode %s", md->input->name);
        }
        goto reply;
    }

    if (nulbyte_find(md->input, rq->payload.data, rq->payload.len, &nul) == 1) {
        call_fail(&c, RPC_INVALID_ARGUMENT, "%s.%s holds a NUL byte (a string may not)",
                  md->input->name, nul.path);
        goto reply;
    }

    /* The row's role first (RULE-CALL-HOST-METHODS: a host reaches only rows open to it). */
    if (!tenant_role_allows(c.role, row->min_role, row->host == SVC_HOST)) {
        dispatch_refuse_role(&c, row);
        goto reply;
    }
    if (env->scripted_only && dispatch_refuse_scripted(&c, row, md, in) != RPC_OK)
        goto reply;
    /* RULE-CALL-QUOTA: taken before the write it bounds, given back when the call fails. */
    const char *quota = row->quota == SVC_QUOTA_RUNS && c.max_runs > 0             ? "runs"
                        : row->quota == SVC_QUOTA_ARTIFACTS && c.max_artifacts > 0 ? "artifacts"
                                                                                   : NULL;
    if (quota != NULL && st == NULL)
        goto needs_store;
    if (quota != NULL) {
        int qrc = tenant_quota_take(st, c.tenant, quota, 1);
        if (qrc != STATUS_OK) {
            if (qrc == STATUS_ELIMIT)
                call_fail(&c, RPC_RESOURCE_EXHAUSTED, "%s", store_last_error(st));
            else
                call_fail_status(&c, qrc, "the tenant's quota");
            goto reply;
        }
    }
    if (st != NULL && store_use_graph(st, c.tenant) != STATUS_OK) {
        call_fail(&c, RPC_INTERNAL, "tenant %s cannot be addressed", c.tenant);
        goto reply;
    }
    evlog_set_request_id(c.request_id);
    evlog_set_caller(c.caller);
    int rc = row->handler(&c, in, &out);
    evlog_set_request_id(NULL);
    evlog_set_caller(NULL);
    if (st != NULL)
        (void)store_use_graph(st, env->graph);
    if (quota != NULL && rc != RPC_OK)
        tenant_quota_release(st, c.tenant, quota, 1);
    if (rc != RPC_OK) {
        c.status = rc;
        if (c.message[0] == '\0') {
            snprintf(c.message, sizeof c.message, "%s", dispatch_code_name(rc));
        }
        goto reply;
    }
    if (out == NULL || out->descriptor != md->output || !protobuf_c_message_check(out)) {
        call_fail(&c, RPC_INTERNAL, "the handler of %s built no valid %s", method,
                  md->output->name);
        goto reply;
    }
    payload_len = protobuf_c_message_get_packed_size(out);
    payload = malloc(payload_len > 0 ? payload_len : 1);
    if (payload == NULL) {
        call_fail(&c, RPC_INTERNAL, "out of memory packing %s", md->output->name);
        goto reply;
    }
    protobuf_c_message_pack(out, payload);

reply:;
    /* The worker's store addresses the default graph between calls, whatever happened, and
     * carries no deadline into the next call: it ends with this one. */
    if (st != NULL) {
        (void)store_use_graph(st, env->graph);
        store_set_timeout(st, env->limits.default_timeout_ms);
    }
    if (c.request_id[0] == '\0') {
        (void)dispatch_request_id(NULL, c.request_id);
    }
    int status = c.status;
    int prc =
        status == RPC_OK
            ? dispatch_pack_response(RPC_OK, "", payload, payload_len, c.request_id, resp, resp_len)
            : dispatch_pack_response(status, c.message, NULL, 0, c.request_id, resp, resp_len);
    free(payload);
    dispatch_release(&c, rq, in, &alloc);
    dispatch_account(env, &c, method, md != NULL, &t0);
    if (prc != 0 && status == RPC_OK) {
        /* The response was too big to wrap; say so rather than stay silent. */
        prc = dispatch_pack_response(RPC_INTERNAL, "out of memory packing the response", NULL, 0,
                                     c.request_id, resp, resp_len);
    }
    return prc;

needs_store:
    INVARIANT(st == NULL && *resp == NULL);
    dispatch_release(&c, rq, in, &alloc);
    return DISPATCH_NEEDS_STORE;
}

int dispatch_serve(const dispatch_ctx *d, store *st, const uint8_t *req, size_t len,
                   unsigned waited_ms, uint8_t **resp, size_t *resp_len)
{
    INVARIANT(st != NULL);
    return dispatch_run(d, st, req, len, waited_ms, resp, resp_len);
}

/* The value of the length-delimited top-level field number field of the protobuf message in
 * buf (its last occurrence, as a decoder keeps it) into *val and *val_len; false when there is
 * none or buf is not a sequence of well-formed fields. */
static bool dispatch_scan_field(const uint8_t *buf, size_t len, uint32_t field, const uint8_t **val,
                                size_t *val_len)
{
    bool found = false;
    size_t i = 0;
    while (i < len) {
        uint64_t key = 0, n = 0;
        for (unsigned shift = 0;; shift += 7) {
            if (i >= len || shift > 63)
                return false;
            key |= (uint64_t)(buf[i] & 0x7f) << shift;
            if ((buf[i++] & 0x80) == 0)
                break;
        }
        switch (key & 7) {
        case 0: /* varint */
            while (i < len && (buf[i] & 0x80) != 0)
                i++;
            if (i++ >= len)
                return false;
            break;
        case 1: /* 64-bit */
            n = 8;
            goto skip;
        case 5: /* 32-bit */
            n = 4;
            goto skip;
        case 2: /* length-delimited */
            for (unsigned shift = 0;; shift += 7) {
                if (i >= len || shift > 63)
                    return false;
                n |= (uint64_t)(buf[i] & 0x7f) << shift;
                if ((buf[i++] & 0x80) == 0)
                    break;
            }
            if ((key >> 3) == field && n <= len - i) {
                *val = buf + i;
                *val_len = (size_t)n;
                found = true;
            }
        skip:
            if (n > len - i)
                return false;
            i += (size_t)n;
            break;
        default:
            return false;
        }
    }
    return found;
}

bool dispatch_quick_candidate(const uint8_t *req, size_t len)
{
    static const char quick[] = DISPATCH_QUICK_METHOD;
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(
        &charter__v1__rpc_request__descriptor, "method");
    const uint8_t *v = NULL;
    size_t n = 0;
    return f != NULL && dispatch_scan_field(req, len, f->id, &v, &n) && n == sizeof quick - 1 &&
           memcmp(v, quick, n) == 0;
}

int dispatch_serve_quick(const dispatch_ctx *d, const uint8_t *req, size_t len, uint8_t **resp,
                         size_t *resp_len)
{
    int rc = dispatch_run(d, NULL, req, len, 0, resp, resp_len);
    return rc == DISPATCH_NEEDS_STORE ? 1 : rc;
}
