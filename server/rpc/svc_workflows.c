/*
 * svc_workflows.c - the Workflows service: apply a definition, list and read stored ones.
 *
 * Applying validates the whole definition first (workflow.c), then stores it and its graph
 * nodes in one database call that refuses ids naming nodes of other content
 * (charter_put_workflow, through registry.c): a refused definition writes nothing. Definitions
 * hold resource contents and scripted replies, so only the operator reads their bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.pb-c.h"
#include "workflow/registry.h"
#include "rpc/services.h"
#include "rpc/wire.h"
#include "policy/workflow.h"

/* A version or a name: 1..128 characters of [A-Za-z0-9._-]. */
static bool ref_ok(const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

static double number_of(const json_t *j)
{
    if (json_is_string(j))
        return strtod(json_string_value(j), NULL);
    return json_number_value(j);
}

/* A workflow info object ({name,version,task,steps,applied_at[,created]}) as a message. */
static Charter__V1__WorkflowInfo *info_message(call *c, const json_t *j)
{
    Charter__V1__WorkflowInfo *w = call_alloc(c, sizeof *w);
    if (w == NULL || !json_is_object(j))
        return NULL;
    charter__v1__workflow_info__init(w);
    w->name = call_strdup(c, json_string_value(json_object_get(j, "name")));
    w->version = call_strdup(c, json_string_value(json_object_get(j, "version")));
    w->task = call_strdup(c, json_string_value(json_object_get(j, "task")));
    w->applied_at = number_of(json_object_get(j, "applied_at"));
    w->created = json_is_true(json_object_get(j, "created"));
    if (w->name == NULL || w->version == NULL || w->task == NULL ||
        wire_strings(c, json_object_get(j, "steps"), &w->steps, &w->n_steps) != 0)
        return NULL;
    return w;
}

static int apply_workflow(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__ApplyWorkflowRequest *req = (const Charter__V1__ApplyWorkflowRequest *)in;
    int rc;
    if (req->definition.len == 0)
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "definition: empty; send the workflow's JSON (docs/workflows.md)");
    if (req->definition.len > WORKFLOW_MAX_FILE_BYTES)
        return call_fail(c, RPC_INVALID_ARGUMENT, "definition: %zu bytes, at most %d (limit)",
                         req->definition.len, WORKFLOW_MAX_FILE_BYTES);
    char err[512];
    json_t *info = NULL;
    rc = registry_apply(c->st, (const char *)req->definition.data, req->definition.len, &info, err,
                        sizeof err);
    /* A rule of the definition, or an id clashing with the graph (refused): either way the
     * definition is the caller's to fix. */
    if (rc == STATUS_EINVAL || rc == STATUS_EREFUSED)
        return call_fail_statusf(c, STATUS_EINVAL, "%s", err);
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, "workflow");
    Charter__V1__WorkflowInfo *w = info_message(c, info);
    json_decref(info);
    if (w == NULL)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &w->base;
    return RPC_OK;
}

static int list_workflows(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    (void)in;
    json_t *j = NULL;
    int rc = q_list_workflows(c->st, &j);
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, "workflows");
    json_t *list = json_object_get(j, "workflows");
    size_t n = json_is_array(list) ? json_array_size(list) : 0;
    Charter__V1__ListWorkflowsResponse *resp = call_alloc(c, sizeof *resp);
    if (resp != NULL) {
        charter__v1__list_workflows_response__init(resp);
        resp->workflows = call_alloc(c, (n ? n : 1) * sizeof *resp->workflows);
    }
    if (resp == NULL || resp->workflows == NULL) {
        json_decref(j);
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        Charter__V1__WorkflowInfo *w = info_message(c, json_array_get(list, i));
        if (w == NULL) {
            json_decref(j);
            return call_fail(c, RPC_INTERNAL, "a workflow could not be encoded");
        }
        resp->workflows[resp->n_workflows++] = w;
    }
    json_decref(j);
    *out = &resp->base;
    return RPC_OK;
}

static int get_workflow(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__GetWorkflowRequest *req = (const Charter__V1__GetWorkflowRequest *)in;
    if (!ref_ok(req->workflow))
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "workflow: a version or a name, 1 to 128 of [A-Za-z0-9._-]");
    json_t *j = NULL;
    int rc = q_get_workflow(c->st, req->workflow, &j);
    if (rc == STATUS_ENOTFOUND)
        return call_fail_statusf(c, rc, "workflow %s is not applied to this graph", req->workflow);
    if (rc != STATUS_OK)
        return call_fail_status_id(c, rc, "workflow", req->workflow);
    Charter__V1__WorkflowDefinition *resp = call_alloc(c, sizeof *resp);
    if (resp != NULL) {
        charter__v1__workflow_definition__init(resp);
        resp->info = info_message(c, json_object_get(j, "workflow"));
    }
    const json_t *def = json_object_get(j, "definition");
    if (resp != NULL && resp->info != NULL && c->role == ROLE_OPERATOR && json_is_string(def)) {
        size_t len = json_string_length(def);
        resp->definition.data = call_alloc(c, len ? len : 1);
        if (resp->definition.data != NULL) {
            memcpy(resp->definition.data, json_string_value(def), len);
            resp->definition.len = len;
        }
    }
    json_decref(j);
    if (resp == NULL || resp->info == NULL ||
        (c->role == ROLE_OPERATOR && resp->definition.data == NULL))
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &resp->base;
    return RPC_OK;
}

/* The Workflows service: one row per method, checked against the generated descriptor at
 * startup (dispatch_check_tables); dispatch enforces each row's columns (services.h). */
const svc_method svc_workflows_methods[] = {
    {"ApplyWorkflow", &charter__v1__apply_workflow_request__descriptor,
     &charter__v1__workflow_info__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, apply_workflow},
    {"ListWorkflows", &charter__v1__list_workflows_request__descriptor,
     &charter__v1__list_workflows_response__descriptor, ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, list_workflows},
    {"GetWorkflow", &charter__v1__get_workflow_request__descriptor,
     &charter__v1__workflow_definition__descriptor, ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, get_workflow},
};
const size_t svc_workflows_methods_len =
    sizeof svc_workflows_methods / sizeof svc_workflows_methods[0];
