/*
 * svc_gate.c - the Gate service: what an agent host calls, step by step. Each method checks
 * its request's shape, then runs the same gate operation the built-in runner uses (gate.c,
 * deliver.c). A decision, including DENY and UNKNOWN, is a successful call; RPC errors are for
 * malformed requests, unknown IDs and callers without the operator token.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.pb-c.h"
#include "gates/deliver.h"
#include "policy/facts.h"
#include "gates/gate.h"
#include "gates/identity.h"
#include "gates/invoke.h"
#include "workflow/registry.h"
#include "rpc/services.h"
#include "rpc/wire.h"

#define REQUIRE_ID(c, field, value)                                                                \
    do {                                                                                           \
        int require_id_rc = call_require_id(c, field, value);                                      \
        if (require_id_rc != RPC_OK)                                                               \
            return require_id_rc;                                                                  \
    } while (0)

/* An error of a gate operation on context_id as an RPC status; a completed run's contexts
 * are closed, which deserves its own words. */
static int gate_fail(call *c, int rc, const char *what, const char *context_id)
{
    if (rc == STATUS_EREFUSED)
        return call_fail_statusf(
            c, rc,
            "context %s belongs to a completed run (or a cancelled or budget-exhausted one): "
            "its record is closed (start a new run)",
            context_id);
    /* The query names the object it did not find ("context c9 not found"); say that one. */
    const char *detail = c->st != NULL ? store_last_error(c->st) : NULL;
    size_t n = detail != NULL ? strlen(detail) : 0;
    if (rc == STATUS_ENOTFOUND && n > 10 && strcmp(detail + n - 10, " not found") == 0) {
        const char *named = strrchr(detail, ':'); /* past "charter_fn: not_found: " */
        return call_fail(c, RPC_NOT_FOUND, "%s", named != NULL ? named + 2 : detail);
    }
    return call_fail_status(c, rc, what);
}

static int ids_ok(call *c, const char *field, char **ids, size_t n)
{
    if (n == 0)
        return call_fail(c, RPC_INVALID_ARGUMENT, "%s: at least one artifact id", field);
    if (n > c->env->limits.max_ids)
        return call_fail(c, RPC_INVALID_ARGUMENT, "%s: more than %zu artifact ids", field,
                         c->env->limits.max_ids);
    for (size_t i = 0; i < n; i++)
        if (!ids_graph_ok(ids[i]))
            return call_fail(c, RPC_INVALID_ARGUMENT, "%s[%zu]: 1 to 128 of [A-Za-z0-9._-]", field,
                             i);
    return RPC_OK;
}

static char **strs_copy(call *c, const guard_strs *s)
{
    char **out = call_alloc(c, (s->n ? s->n : 1) * sizeof *out);
    for (size_t i = 0; out && i < s->n; i++)
        if (!(out[i] = call_strdup(c, s->items[i])))
            return NULL;
    return out;
}

/* A narrowing list of OpenStep: at most 256 names, each 1..64 of [A-Za-z0-9._-]. */
static int names_ok(call *c, const char *field, char **names, size_t n, guard_strs *out)
{
    out->items = names;
    out->n = n;
    if (n > 256)
        return call_fail(c, RPC_INVALID_ARGUMENT, "%s: more than 256 names", field);
    for (size_t i = 0; i < n; i++) {
        size_t len = names[i] ? strlen(names[i]) : 0;
        bool ok = len > 0 && len <= 64;
        for (size_t k = 0; ok && k < len; k++) {
            char ch = names[i][k];
            ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '_' || ch == '-';
        }
        if (!ok)
            return call_fail(c, RPC_INVALID_ARGUMENT, "%s[%zu]: 1 to 64 of [A-Za-z0-9._-]", field,
                             i);
    }
    return RPC_OK;
}

/* --- host credentials: only through contexts owned by their actors ------------------------- */

/* The call's host credential as the identity gate reads it. */
static identity_host host_of(const call *c, const char *method)
{
    identity_host h = {c->st, c->credential_id, c->actors, c->n_actors, method};
    return h;
}

/* An identity refusal the gate decided but could not record: it stands, and is said. */
static int host_unrecorded(call *c, int rc, guard_decision *d)
{
    rc = call_fail_statusf(c, rc, "identity mismatch (%s) could not be recorded",
                           d->witness != NULL ? d->witness : "");
    guard_decision_free(d);
    return rc;
}

/* For a host credential, the identity gate (gates/identity.c, RULE-HOST-IDENTITY) on the
 * context. *refused is set when it refuses: d then holds the recorded DENY IDENTITY_MISMATCH
 * the method answers with. Other callers pass untouched. archived (may be NULL): a context the
 * database does not have is let through with *archived set when charterd has an archive
 * folder, for the gate to answer from its run's archive; the method then checks the archived
 * owners (host_owns_archived). Returns RPC_OK or a failure (unknown context, database, an
 * unrecorded refusal). */
static int host_check_context_or_archived(call *c, const char *method, const char *context_id,
                                          guard_decision *d, bool *refused, bool *archived)
{
    *refused = false;
    if (c->role != ROLE_HOST)
        return RPC_OK;
    identity_host h = host_of(c, method);
    int rc = identity_check_context(&h, context_id, d);
    if (rc != STATUS_OK && d->outcome == GUARD_DENY)
        return host_unrecorded(c, rc, d);
    if (rc == STATUS_ENOTFOUND && archived != NULL && c->env->archive_dir != NULL) {
        guard_decision_free(d);
        *archived = true;
        return RPC_OK;
    }
    if (rc == STATUS_ENOTFOUND)
        return call_fail(c, RPC_NOT_FOUND, "context %s not found", context_id);
    if (rc != STATUS_OK) {
        guard_decision_free(d);
        return call_fail_status_id(c, rc, "context", context_id);
    }
    if (d->outcome == GUARD_ALLOW) {
        guard_decision_free(d);
        return RPC_OK;
    }
    *refused = true;
    return RPC_OK;
}

static int host_check_context(call *c, const char *method, const char *context_id,
                              guard_decision *d, bool *refused)
{
    return host_check_context_or_archived(c, method, context_id, d, refused, NULL);
}

/* A host's call through an archived run's context (host_check_context_or_archived let it
 * through) stands only when one of its actors owned the context, as the archive says
 * (identity_check_archived); else, or when the gate found nothing, it is not found, as any
 * context the host cannot act through. */
static bool host_owns_archived(call *c, const char *method, const char *context_id,
                               const json_t *owners)
{
    if (owners == NULL)
        return false;
    identity_host h = host_of(c, method);
    guard_decision d;
    bool owns = identity_check_archived(&h, context_id, owners, &d) == STATUS_OK &&
                d.outcome == GUARD_ALLOW;
    guard_decision_free(&d);
    return owns;
}

/* Why opening step ws of run_id (which follows wf) failed with rc (gate_open_step). */
static int open_step_failed(call *c, int rc, const char *run_id, const workflow *wf,
                            const workflow_step *ws)
{
    /* The run was found, and runs are never deleted: what the graph lacks is the step's
     * actor, so the run's workflow was never applied to this tenant (a run created before
     * CreateRun checked that). Never reported as a missing run. */
    if (rc == STATUS_ENOTFOUND)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "tenant %.64s does not hold actor %.64s of step %.64s: run %.64s "
                         "follows workflow %.64s (version %.12s), which was not applied to "
                         "it; apply it with `charter workflow apply FILE`",
                         c->tenant, ws->cap.actor, ws->cap.step, run_id, wf->name, wf->version);
    /* A completed run's record is closed (charter_open_context): no new step opens. */
    if (rc == STATUS_EREFUSED && strstr(store_last_error(c->st), " is completed") != NULL)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "run %s is completed: its record is closed (start a new run)", run_id);
    return call_fail_status_id(c, rc, "run", run_id);
}

static int open_step(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__OpenStepRequest *req = (const Charter__V1__OpenStepRequest *)in;
    int rc;
    REQUIRE_ID(c, "run_id", req->run_id);
    REQUIRE_ID(c, "step", req->step);
    bool child = req->parent_context_id && *req->parent_context_id;
    guard_strs lists[3];
    if ((rc = names_ok(c, "tools", req->tools, req->n_tools, &lists[0])) != RPC_OK ||
        (rc = names_ok(c, "recipients", req->recipients, req->n_recipients, &lists[1])) != RPC_OK ||
        (rc = names_ok(c, "resources", req->resources, req->n_resources, &lists[2])) != RPC_OK)
        return rc;
    if (!child && (req->n_tools || req->n_recipients || req->n_resources))
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "tools, recipients and resources narrow a parent context: set "
                         "parent_context_id");
    gate_env g = call_gate_env(c);
    const workflow_step *ws = NULL;
    json_t *ctx = NULL;
    if (child) {
        REQUIRE_ID(c, "parent_context_id", req->parent_context_id);
        guard_decision hd;
        bool refused = false;
        if ((rc = host_check_context(c, "OpenStep", req->parent_context_id, &hd, &refused)) !=
            RPC_OK)
            return rc;
        if (refused) {
            rc = call_fail(c, RPC_PERMISSION_DENIED, "IDENTITY_MISMATCH: %s",
                           hd.witness != NULL ? hd.witness : "");
            guard_decision_free(&hd);
            return rc;
        }
        char why[512];
        rc = gate_open_narrowed(&g, req->parent_context_id, req->run_id, req->step, &lists[0],
                                &lists[1], &lists[2], &ctx, &ws, why, sizeof why);
        /* Scopes only narrow: asking for more than the parent holds is refused outright. */
        if (rc == STATUS_EDENIED || rc == STATUS_EINVAL)
            return call_fail_statusf(c, rc, "%s", why);
        if (rc == STATUS_ENOTFOUND)
            return call_fail_statusf(c, rc, "context %s not found", req->parent_context_id);
        if (rc != STATUS_OK)
            return call_fail_status_id(c, rc, "context", req->parent_context_id);
    } else {
        /* The run's own workflow, pinned when it was created. */
        const workflow *wf = NULL;
        rc = registry_run_workflow(c->st, req->run_id, &wf);
        if (rc != STATUS_OK)
            return call_fail_status_id(c, rc, "run", req->run_id);
        ws = workflow_step_find(wf, req->step);
        if (!ws)
            return call_fail(c, RPC_NOT_FOUND, "step %s is not a step of workflow %s", req->step,
                             wf->name);
        g.wf = wf;
        if (c->role == ROLE_HOST) {
            identity_host h = host_of(c, "OpenStep");
            guard_decision hd;
            rc = identity_check_step(&h, req->run_id, wf, ws, &hd);
            if (rc != STATUS_OK && hd.outcome == GUARD_DENY)
                return host_unrecorded(c, rc, &hd);
            if (rc != STATUS_OK) {
                guard_decision_free(&hd);
                return call_fail_status_id(c, rc, "run", req->run_id);
            }
            if (hd.outcome != GUARD_ALLOW) {
                rc = call_fail(c, RPC_PERMISSION_DENIED, "IDENTITY_MISMATCH: %s",
                               hd.witness != NULL ? hd.witness : "");
                guard_decision_free(&hd);
                return rc;
            }
            guard_decision_free(&hd);
        }
        rc = gate_open_step(&g, req->run_id, req->step, &ctx);
        if (rc != STATUS_OK)
            return open_step_failed(c, rc, req->run_id, wf, ws);
    }
    Charter__V1__StepContext *resp = call_alloc(c, sizeof *resp);
    if (!resp) {
        json_decref(ctx);
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    charter__v1__step_context__init(resp);
    resp->context_id = call_strdup(c, json_string_value(json_object_get(ctx, "id")));
    resp->run_id = call_strdup(c, json_string_value(json_object_get(ctx, "run_id")));
    resp->workflow = call_strdup(c, json_string_value(json_object_get(ctx, "workflow")));
    resp->parent_context_id = call_strdup(c, child ? req->parent_context_id : "");
    json_decref(ctx);
    resp->step = call_strdup(c, ws->cap.step);
    resp->actor = call_strdup(c, ws->cap.actor);
    resp->grant = call_strdup(c, ws->cap.grant);
    resp->tools = strs_copy(c, &ws->cap.tools);
    resp->n_tools = ws->cap.tools.n;
    resp->recipients = strs_copy(c, &ws->cap.recipients);
    resp->n_recipients = ws->cap.recipients.n;
    resp->resources = strs_copy(c, &ws->cap.resources);
    resp->n_resources = ws->cap.resources.n;
    if (!resp->context_id || !resp->run_id || !resp->workflow || !resp->parent_context_id ||
        !resp->step || !resp->actor || !resp->grant || !resp->tools || !resp->recipients ||
        !resp->resources)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &resp->base;
    return RPC_OK;
}

static int read_source(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__ReadSourceRequest *req = (const Charter__V1__ReadSourceRequest *)in;
    int rc;
    REQUIRE_ID(c, "context_id", req->context_id);
    REQUIRE_ID(c, "resource_id", req->resource_id);
    gate_env g = call_gate_env(c);
    guard_decision d;
    json_t *artifact = NULL;
    bool refused = false;
    if ((rc = host_check_context(c, "ReadSource", req->context_id, &d, &refused)) != RPC_OK)
        return rc;
    if (!refused)
        rc = gate_read_source(&g, req->context_id, req->resource_id, &d, &artifact);
    if (rc == STATUS_EINVAL)
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "resource_id: %s is an observed resource: record what was read with "
                         "ObserveSource",
                         req->resource_id);
    if (rc != STATUS_OK) {
        guard_decision_free(&d);
        return gate_fail(c, rc, "context or resource", req->context_id);
    }
    Charter__V1__ReadSourceResponse *resp = call_alloc(c, sizeof *resp);
    if (resp) {
        charter__v1__read_source_response__init(resp);
        resp->decision = wire_decision(c, &d);
        resp->artifact = artifact ? wire_artifact(c, artifact) : NULL;
    }
    guard_decision_free(&d);
    json_decref(artifact);
    if (!resp || !resp->decision)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &resp->base;
    return RPC_OK;
}

static int observe_source(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__ObserveSourceRequest *req = (const Charter__V1__ObserveSourceRequest *)in;
    int rc;
    REQUIRE_ID(c, "context_id", req->context_id);
    REQUIRE_ID(c, "resource_id", req->resource_id);
    size_t nloc = strlen(req->locator), len = strlen(req->content);
    if (nloc == 0 || nloc > 1024)
        return call_fail(c, RPC_INVALID_ARGUMENT, "locator: 1 to 1024 bytes");
    if (len > c->env->limits.max_content)
        return call_fail(c, RPC_INVALID_ARGUMENT, "content: longer than %zu bytes",
                         c->env->limits.max_content);
    if ((rc = call_require_utf8(c, "locator", req->locator)) != RPC_OK ||
        (rc = call_require_utf8(c, "content", req->content)) != RPC_OK)
        return rc;
    gate_env g = call_gate_env(c);
    guard_decision d;
    json_t *artifact = NULL;
    bool refused = false;
    if ((rc = host_check_context(c, "ObserveSource", req->context_id, &d, &refused)) != RPC_OK)
        return rc;
    char why[256] = "";
    if (!refused)
        rc = gate_observe_source(&g, req->context_id, req->resource_id, req->content, len,
                                 req->locator, &d, &artifact, why, sizeof why);
    if (rc == STATUS_EINVAL)
        return call_fail(c, RPC_INVALID_ARGUMENT, "%s", why);
    if (rc != STATUS_OK) {
        guard_decision_free(&d);
        return gate_fail(c, rc, "context or resource", req->context_id);
    }
    Charter__V1__ObserveSourceResponse *resp = call_alloc(c, sizeof *resp);
    if (resp) {
        charter__v1__observe_source_response__init(resp);
        resp->decision = wire_decision(c, &d);
        resp->artifact = artifact ? wire_artifact(c, artifact) : NULL;
    }
    guard_decision_free(&d);
    json_decref(artifact);
    if (!resp || !resp->decision)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &resp->base;
    return RPC_OK;
}

/* The public text of an output given as fields: the context's step renders it from its
 * template (workflow_render_public), so no text of the caller's reaches a public recipient.
 * *out is malloc'd (caller frees). */
static int render_fields(call *c, const gate_env *g, const Charter__V1__RecordOutputRequest *req,
                         char **out)
{
    if (*req->content)
        return call_fail(c, RPC_INVALID_ARGUMENT, "content: must be empty when fields are set");
    const workflow_step *ws = NULL;
    guard_context ctx;
    int rc = gate_context(g, req->context_id, &ws, &ctx);
    if (rc != STATUS_OK)
        return gate_fail(c, rc, "context", req->context_id);
    facts_context_free(&ctx);
    json_t *fields = json_object();
    for (size_t i = 0; fields && i < req->n_fields; i++)
        if (json_object_set_new(fields, req->fields[i]->key, json_string(req->fields[i]->value)))
            json_decref(fields), fields = NULL;
    if (!fields)
        return call_fail(c, RPC_INVALID_ARGUMENT, "fields: keys and values must be UTF-8");
    char err[256];
    rc = workflow_render_public(ws, fields, out, err, sizeof err);
    json_decref(fields);
    if (rc != 0)
        return call_fail(c, RPC_INVALID_ARGUMENT, "fields: %s", err);
    return RPC_OK;
}

static int record_output(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__RecordOutputRequest *req = (const Charter__V1__RecordOutputRequest *)in;
    int rc;
    REQUIRE_ID(c, "context_id", req->context_id);
    if ((rc = ids_ok(c, "input_ids", req->input_ids, req->n_input_ids)) != RPC_OK)
        return rc;
    if (!req->title || !*req->title || strlen(req->title) > 256)
        return call_fail(c, RPC_INVALID_ARGUMENT, "title: 1 to 256 bytes");
    if (strlen(req->content) > c->env->limits.max_content)
        return call_fail(c, RPC_INVALID_ARGUMENT, "content: longer than %zu bytes",
                         c->env->limits.max_content);
    if ((rc = call_require_utf8(c, "title", req->title)) != RPC_OK ||
        (rc = call_require_utf8(c, "content", req->content)) != RPC_OK)
        return rc;
    gate_env g = call_gate_env(c);
    guard_decision d;
    json_t *artifact = NULL;
    bool refused = false;
    if ((rc = host_check_context(c, "RecordOutput", req->context_id, &d, &refused)) != RPC_OK)
        return rc;
    char *rendered = NULL;
    if (!refused && req->n_fields > 0 && (rc = render_fields(c, &g, req, &rendered)) != RPC_OK)
        return rc;
    if (!refused)
        rc = gate_record_output(&g, req->context_id, (const char *const *)req->input_ids,
                                req->n_input_ids, req->title, rendered ? rendered : req->content,
                                &d, &artifact);
    free(rendered);
    if (rc != STATUS_OK) {
        guard_decision_free(&d);
        return gate_fail(c, rc, "context or input artifact", req->context_id);
    }
    Charter__V1__RecordOutputResponse *resp = call_alloc(c, sizeof *resp);
    if (resp) {
        charter__v1__record_output_response__init(resp);
        resp->decision = wire_decision(c, &d);
        resp->artifact = artifact ? wire_artifact(c, artifact) : NULL;
    }
    guard_decision_free(&d);
    json_decref(artifact);
    if (!resp || !resp->decision)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &resp->base;
    return RPC_OK;
}

static int check_input(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__CheckInputRequest *req = (const Charter__V1__CheckInputRequest *)in;
    int rc;
    REQUIRE_ID(c, "context_id", req->context_id);
    if ((rc = ids_ok(c, "artifact_ids", req->artifact_ids, req->n_artifact_ids)) != RPC_OK)
        return rc;
    gate_env g = call_gate_env(c);
    guard_decision d;
    uint64_t seq = 0;
    bool refused = false;
    if ((rc = host_check_context(c, "CheckInput", req->context_id, &d, &refused)) != RPC_OK)
        return rc;
    if (!refused)
        rc = gate_check_input(&g, req->context_id, (const char *const *)req->artifact_ids,
                              req->n_artifact_ids, &d, &seq);
    if (rc != STATUS_OK) {
        guard_decision_free(&d);
        return gate_fail(c, rc, "context or artifact", req->context_id);
    }
    Charter__V1__CheckInputResponse *resp = call_alloc(c, sizeof *resp);
    if (resp) {
        charter__v1__check_input_response__init(resp);
        resp->decision = wire_decision(c, &d);
        resp->event_seq = seq;
    }
    guard_decision_free(&d);
    if (!resp || !resp->decision)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &resp->base;
    return RPC_OK;
}

/* A send held for (or ended by) a human approval: the approval, its id while pending, and its
 * code next to the decision's: APPROVAL_PENDING, or APPROVAL_DENIED, _EXPIRED, _REFUSED. */
static int approval_answer(call *c, const json_t *approval, Charter__V1__DeliverResponse *resp)
{
    const char *state = json_string_value(json_object_get(approval, "state"));
    if ((resp->approval = wire_approval(c, approval)) == NULL || state == NULL)
        return RPC_INTERNAL;
    if (strcmp(state, "pending") == 0)
        resp->pending_approval = resp->approval->id;
    char code[32];
    snprintf(code, sizeof code, "APPROVAL_%s", state);
    for (char *p = code; *p; p++)
        *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    Charter__V1__Decision *m = resp->decision;
    char **codes = call_alloc(c, (m->n_codes + 1) * sizeof *codes);
    if (codes == NULL || (codes[0] = call_strdup(c, code)) == NULL)
        return RPC_INTERNAL;
    for (size_t i = 0; i < m->n_codes; i++)
        codes[i + 1] = m->codes[i];
    m->codes = codes;
    m->n_codes++;
    return RPC_OK;
}

static int deliver(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__DeliverRequest *req = (const Charter__V1__DeliverRequest *)in;
    int rc;
    REQUIRE_ID(c, "context_id", req->context_id);
    REQUIRE_ID(c, "payload_id", req->payload_id);
    REQUIRE_ID(c, "recipient", req->recipient);
    REQUIRE_ID(c, "tool", req->tool);
    if (!ids_invocation_ok(req->invocation_id))
        return call_fail(c, RPC_INVALID_ARGUMENT, "%s", IDS_INVOCATION_RULE);
    gate_env g = call_gate_env(c);
    deliver_result r;
    memset(&r, 0, sizeof r);
    bool refused = false, archived = false;
    if ((rc = host_check_context_or_archived(c, "Deliver", req->context_id, &r.decision, &refused,
                                             &archived)) != RPC_OK)
        return rc;
    if (archived)
        rc = deliver_archived(&g, req->context_id, req->payload_id, req->recipient, req->tool,
                              req->invocation_id, &r);
    else if (!refused)
        rc = deliver_send(&g, req->context_id, req->payload_id, req->recipient, req->tool,
                          req->invocation_id, &r);
    if (archived && !host_owns_archived(c, "Deliver", req->context_id, r.archive_owners)) {
        deliver_result_free(&r);
        return call_fail(c, RPC_NOT_FOUND, "context %s not found", req->context_id);
    }
    if (rc != STATUS_OK) {
        if (rc == STATUS_ENOTFOUND && r.not_found[0] != '\0')
            rc = call_fail(c, RPC_NOT_FOUND, "%s", r.not_found);
        else
            rc = gate_fail(c, rc, "context or payload", req->context_id);
        deliver_result_free(&r);
        return rc;
    }
    Charter__V1__DeliverResponse *resp = call_alloc(c, sizeof *resp);
    if (resp) {
        charter__v1__deliver_response__init(resp);
        resp->decision = wire_decision(c, &r.decision);
        resp->delivery = r.delivery ? wire_delivery(c, r.delivery) : NULL;
        resp->acknowledged = r.acknowledged;
        resp->durable = r.durable;
        if (r.approval != NULL && resp->decision != NULL &&
            approval_answer(c, r.approval, resp) != RPC_OK)
            resp->decision = NULL;
    }
    deliver_result_free(&r);
    if (!resp || !resp->decision)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &resp->base;
    return RPC_OK;
}

/* The arguments of an Invoke request as the gate reads them (borrowed from req; the array from
 * the call's arena). */
static invoke_argument *invoke_arguments(call *c, const Charter__V1__InvokeRequest *req)
{
    invoke_argument *args = call_alloc(c, (req->n_arguments ? req->n_arguments : 1) * sizeof *args);
    for (size_t i = 0; args != NULL && i < req->n_arguments; i++) {
        const Charter__V1__InvokeArgument *a = req->arguments[i];
        args[i] = (invoke_argument){.name = a->name,
                                    .value = a->value,
                                    .lineage = (const char *const *)a->lineage,
                                    .n_lineage = a->n_lineage,
                                    .from_task = a->from_task,
                                    .quoted_from = a->quoted_from};
    }
    return args;
}

static int invoke(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__InvokeRequest *req = (const Charter__V1__InvokeRequest *)in;
    int rc;
    REQUIRE_ID(c, "context_id", req->context_id);
    REQUIRE_ID(c, "tool", req->tool);
    for (size_t i = 0; i < req->n_arguments; i++)
        if ((rc = call_require_utf8(c, "arguments.value", req->arguments[i]->value)) != RPC_OK)
            return rc;
    invoke_argument *args = invoke_arguments(c, req);
    if (args == NULL)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    gate_env g = call_gate_env(c);
    invoke_result r;
    memset(&r, 0, sizeof r);
    bool refused = false, archived = false;
    if ((rc = host_check_context_or_archived(c, "Invoke", req->context_id, &r.decision, &refused,
                                             &archived)) != RPC_OK)
        return rc;
    char why[320] = "";
    if (archived)
        rc = invoke_archived(&g, req->context_id, req->tool, req->invocation_id, args,
                             req->n_arguments, &r, why, sizeof why);
    else if (!refused)
        rc = invoke_call(&g, req->context_id, req->tool, req->invocation_id, args, req->n_arguments,
                         &r, why, sizeof why);
    if (archived && rc != STATUS_EINVAL &&
        !host_owns_archived(c, "Invoke", req->context_id, r.archive_owners)) {
        invoke_result_free(&r);
        return call_fail(c, RPC_NOT_FOUND, "context %s not found", req->context_id);
    }
    if (rc == STATUS_EINVAL) {
        invoke_result_free(&r);
        return call_fail(c, RPC_INVALID_ARGUMENT, "%s", why);
    }
    if (rc != STATUS_OK) {
        if (rc == STATUS_ENOTFOUND && r.not_found[0] != '\0')
            rc = call_fail(c, RPC_NOT_FOUND, "%s", r.not_found);
        else
            rc = gate_fail(c, rc, "context", req->context_id);
        invoke_result_free(&r);
        return rc;
    }
    Charter__V1__InvokeResponse *resp = call_alloc(c, sizeof *resp);
    if (resp) {
        charter__v1__invoke_response__init(resp);
        resp->decision = wire_decision(c, &r.decision);
        resp->delivery = r.delivery ? wire_delivery(c, r.delivery) : NULL;
        resp->acknowledged = r.acknowledged;
        resp->destination = call_strdup(c, r.destination);
    }
    invoke_result_free(&r);
    if (!resp || !resp->decision || !resp->destination)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &resp->base;
    return RPC_OK;
}

/* An ancestry entry as an artifact object wire_artifact reads: resources as ids, the first
 * producer as the context. */
static json_t *trace_entry(const json_t *a)
{
    json_t *copy = json_deep_copy(a);
    if (!copy)
        return NULL;
    json_t *ids = json_array();
    json_t *res = json_object_get(a, "resources");
    size_t i;
    json_t *r;
    json_array_foreach(res, i, r)
    {
        const char *id =
            json_is_string(r) ? json_string_value(r) : json_string_value(json_object_get(r, "id"));
        if (id)
            json_array_append_new(ids, json_string(id));
    }
    json_object_set_new(copy, "resources", ids);
    json_t *producers = json_object_get(a, "producers");
    if (json_is_array(producers) && json_array_size(producers) > 0 &&
        !json_object_get(copy, "context_id"))
        json_object_set(copy, "context_id", json_array_get(producers, 0));
    return copy;
}

static int trace_artifact(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__TraceArtifactRequest *req = (const Charter__V1__TraceArtifactRequest *)in;
    REQUIRE_ID(c, "artifact_id", req->artifact_id);
    gate_env g = call_gate_env(c);
    json_t *anc = NULL;
    int rc = gate_trace(&g, req->artifact_id, &anc);
    if (rc != STATUS_OK)
        return call_fail_status_id(c, rc, "artifact", req->artifact_id);
    json_t *arts = json_object_get(anc, "artifacts");
    size_t n = json_is_array(arts) ? json_array_size(arts) : 0;
    const json_t *cut = json_object_get(anc, "truncated");
    Charter__V1__TraceArtifactResponse *resp = call_alloc(c, sizeof *resp);
    if (resp) {
        charter__v1__trace_artifact_response__init(resp);
        /* Say so when the lineage was cut, so no caller takes a part for the whole. */
        resp->truncated = json_is_true(cut) || (json_is_integer(cut) && json_integer_value(cut));
        resp->artifacts = call_alloc(c, (n ? n : 1) * sizeof *resp->artifacts);
    }
    if (!resp || !resp->artifacts) {
        json_decref(anc);
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = trace_entry(json_array_get(arts, i));
        Charter__V1__Artifact *a = e ? wire_artifact(c, e) : NULL;
        json_decref(e);
        if (!a) {
            json_decref(anc);
            return call_fail(c, RPC_INTERNAL, "an artifact could not be encoded");
        }
        resp->artifacts[resp->n_artifacts++] = a;
    }
    json_decref(anc);
    *out = &resp->base;
    return RPC_OK;
}

/* The Gate service: one row per method, checked against the generated descriptor at
 * startup (dispatch_check_tables); dispatch enforces each row's columns (services.h). */
const svc_method svc_gate_methods[] = {
    {"OpenStep", &charter__v1__open_step_request__descriptor,
     &charter__v1__step_context__descriptor, ROLE_OPERATOR, SVC_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, open_step},
    {"ReadSource", &charter__v1__read_source_request__descriptor,
     &charter__v1__read_source_response__descriptor, ROLE_OPERATOR, SVC_HOST, SVC_QUOTA_ARTIFACTS,
     SVC_SCRIPTED_SERVED, read_source},
    {"ObserveSource", &charter__v1__observe_source_request__descriptor,
     &charter__v1__observe_source_response__descriptor, ROLE_OPERATOR, SVC_HOST,
     SVC_QUOTA_ARTIFACTS, SVC_SCRIPTED_SERVED, observe_source},
    {"RecordOutput", &charter__v1__record_output_request__descriptor,
     &charter__v1__record_output_response__descriptor, ROLE_OPERATOR, SVC_HOST, SVC_QUOTA_ARTIFACTS,
     SVC_SCRIPTED_SERVED, record_output},
    {"CheckInput", &charter__v1__check_input_request__descriptor,
     &charter__v1__check_input_response__descriptor, ROLE_OPERATOR, SVC_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, check_input},
    {"Deliver", &charter__v1__deliver_request__descriptor,
     &charter__v1__deliver_response__descriptor, ROLE_OPERATOR, SVC_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, deliver},
    {"Invoke", &charter__v1__invoke_request__descriptor, &charter__v1__invoke_response__descriptor,
     ROLE_OPERATOR, SVC_HOST, SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, invoke},
    {"TraceArtifact", &charter__v1__trace_artifact_request__descriptor,
     &charter__v1__trace_artifact_response__descriptor, ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, trace_artifact},
};
const size_t svc_gate_methods_len = sizeof svc_gate_methods / sizeof svc_gate_methods[0];
