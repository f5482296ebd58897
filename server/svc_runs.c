/*
 * svc_runs.c - the Runs service: create and drive a run, read it back with its events,
 * list runs, recover a blocked run. Runs and everything in them live in Redis, so any
 * charterd serving the graph answers the same, including after a restart.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.pb-c.h"
#include "gate.h"
#include "registry.h"
#include "provider.h"
#include "runner.h"
#include "services.h"
#include "wire.h"

/* The run view as charter_get_run returns it, converted in the call's arena. */
static int load_view(call *c, const char *run_id, uint64_t after, uint32_t limit,
                     Charter__V1__RunView **out)
{
    char a[32], l[32];
    snprintf(a, sizeof a, "%llu", (unsigned long long)after);
    snprintf(l, sizeof l, "%u", limit ? (limit > 10000 ? 10000 : limit) : 1000);
    const char *args[3] = {run_id, a, l};
    json_t *j = NULL;
    int rc = store_call(c->st, "get_run", 3, args, &j);
    if (rc != STATUS_OK)
        return call_fail_status_id(c, rc, "run", run_id);
    *out = wire_run_view(c, j);
    json_decref(j);
    if (!*out)
        return call_fail(c, RPC_INTERNAL, "the run could not be encoded");
    return RPC_OK;
}

static int create_run(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__CreateRunRequest *req = (const Charter__V1__CreateRunRequest *)in;
    int rc;
    const char *mode = req->mode && *req->mode ? req->mode : "scripted";
    if (strcmp(mode, "scripted") != 0 && strcmp(mode, "external") != 0 && strcmp(mode, "live") != 0)
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "mode: \"%.64s\" is not scripted, live or external", mode);
    if (strcmp(mode, "live") == 0 && c->env->scripted_only)
        return call_fail(c, RPC_PERMISSION_DENIED, "mode: live runs are off (--scripted-only)");
    if (strcmp(mode, "live") == 0 && !provider_configured())
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "mode: live models are not configured (set CHARTER_OPENAI_BASE_URL, "
                         "CHARTER_OPENAI_API_KEY, CHARTER_OPENAI_MODEL)");
    if (req->task && strlen(req->task) > 4096)
        return call_fail(c, RPC_INVALID_ARGUMENT, "task: longer than 4096 bytes");
    if ((rc = call_require_utf8(c, "task", req->task)) != RPC_OK)
        return rc;
    gate_env g = call_gate_env(c);
    /* The run pins this version for good: applying another one later never changes it. */
    if (req->workflow && *req->workflow) {
        rc = registry_get(c->st, req->workflow, &g.wf);
        if (rc == STATUS_ENOTFOUND)
            return call_fail_statusf(
                c, rc, "workflow %.128s is not applied to this graph (see ApplyWorkflow)",
                req->workflow);
        if (rc == STATUS_EINVAL)
            return call_fail_statusf(c, rc,
                                     "workflow: a version or a name, 1 to 128 of [A-Za-z0-9._-]");
        if (rc != STATUS_OK)
            return call_fail_status_id(c, rc, "workflow", req->workflow);
    }
    char run_id[65];
    /* A run records each step and its end: the built-in runner is bounded per database command
     * by what remains of the deadline, not cut off at it, so no run is left half-recorded. */
    store_set_timeout(c->st, c->timeout_ms);
    rc = runner_start(&g, req->task, mode, run_id);
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, "run");
    Charter__V1__RunView *view = NULL;
    rc = load_view(c, run_id, 0, 0, &view);
    if (rc == RPC_OK)
        *out = &view->base;
    return rc;
}

static int get_run(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__GetRunRequest *req = (const Charter__V1__GetRunRequest *)in;
    int rc = call_require_id(c, "run_id", req->run_id);
    if (rc != RPC_OK)
        return rc;
    Charter__V1__RunView *view = NULL;
    rc = load_view(c, req->run_id, req->after_seq, req->limit, &view);
    if (rc == RPC_OK)
        *out = &view->base;
    return rc;
}

static int list_runs(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__ListRunsRequest *req = (const Charter__V1__ListRunsRequest *)in;
    char l[32];
    snprintf(l, sizeof l, "%u", req->limit ? (req->limit > 1000 ? 1000 : req->limit) : 100);
    const char *args[1] = {l};
    json_t *j = NULL;
    int rc = store_call(c->st, "list_runs", 1, args, &j);
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, "runs");
    Charter__V1__ListRunsResponse *resp = call_alloc(c, sizeof *resp);
    json_t *runs = json_object_get(j, "runs");
    size_t n = json_is_array(runs) ? json_array_size(runs) : 0;
    if (resp)
        charter__v1__list_runs_response__init(resp);
    if (!resp || !(resp->runs = call_alloc(c, (n ? n : 1) * sizeof *resp->runs))) {
        json_decref(j);
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        Charter__V1__Run *r = wire_run(c, json_array_get(runs, i));
        if (!r) {
            json_decref(j);
            return call_fail(c, RPC_INTERNAL, "a run could not be encoded");
        }
        resp->runs[resp->n_runs++] = r;
    }
    json_decref(j);
    *out = &resp->base;
    return RPC_OK;
}

static int recover_run(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__RecoverRunRequest *req = (const Charter__V1__RecoverRunRequest *)in;
    int rc;
    if ((rc = call_require_id(c, "run_id", req->run_id)) != RPC_OK)
        return rc;
    gate_env g = call_gate_env(c);
    runner_recovery rec;
    store_set_timeout(c->st, c->timeout_ms); /* as in create_run: a run is not cut off */
    rc = runner_recover(&g, req->run_id, &rec);
    if (rc == STATUS_EREFUSED) {
        guard_decision_free(&rec.decision);
        return call_fail_statusf(
            c, rc, "run %s is not blocked, interrupted or in error: nothing to recover",
            req->run_id);
    }
    if (rc != STATUS_OK) {
        guard_decision_free(&rec.decision);
        return call_fail_status_id(c, rc, "run", req->run_id);
    }
    Charter__V1__RecoverRunResponse *resp = call_alloc(c, sizeof *resp);
    if (!resp) {
        guard_decision_free(&rec.decision);
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    charter__v1__recover_run_response__init(resp);
    resp->decision = wire_decision(c, &rec.decision);
    resp->acknowledged = rec.acknowledged;
    guard_decision_free(&rec.decision);
    const workflow *wf = NULL;
    if (registry_run_workflow(c->st, req->run_id, &wf) != STATUS_OK)
        wf = NULL; /* the recovery ran; only the names of its step and recipient are missing */
    const workflow_step *ws = workflow_recovery_step(wf);
    resp->step = call_strdup(c, ws ? ws->cap.step : "");
    resp->recipient = call_strdup(c, ws && ws->deliver_recipient ? ws->deliver_recipient : "");
    if (!resp->step || !resp->recipient)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    Charter__V1__RunView *view = NULL;
    rc = load_view(c, req->run_id, 0, 1, &view);
    if (rc != RPC_OK)
        return rc;
    resp->run = view->run;
    resp->n_deliveries = view->n_deliveries;
    resp->deliveries = view->deliveries;
    *out = &resp->base;
    return RPC_OK;
}

/* The Runs service: one row per method, checked against the generated descriptor at
 * startup (dispatch_check_tables); dispatch enforces each row's minimum role. */
const svc_method svc_runs_methods[] = {
    {"CreateRun", &charter__v1__create_run_request__descriptor, &charter__v1__run_view__descriptor,
     ROLE_OPERATOR, create_run},
    {"GetRun", &charter__v1__get_run_request__descriptor, &charter__v1__run_view__descriptor,
     ROLE_VIEWER, get_run},
    {"ListRuns", &charter__v1__list_runs_request__descriptor,
     &charter__v1__list_runs_response__descriptor, ROLE_VIEWER, list_runs},
    {"RecoverRun", &charter__v1__recover_run_request__descriptor,
     &charter__v1__recover_run_response__descriptor, ROLE_OPERATOR, recover_run},
};
const size_t svc_runs_methods_len = sizeof svc_runs_methods / sizeof svc_runs_methods[0];
