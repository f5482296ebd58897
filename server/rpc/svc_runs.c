/*
 * svc_runs.c - the Runs service: create and drive a run, read it back with its events,
 * list runs, recover a blocked run, wait for a run's events, cancel a run, hand out a run's
 * checkpoint and resume an interrupted run from it exactly once, and end an external run its
 * host drove (CompleteRun). Scripted and live
 * runs, and recoveries, execute on the executor threads (executor.c), never here: CreateRun
 * and RecoverRun queue them. Runs
 * and everything in them live in Redis, so any charterd serving the graph answers the same,
 * including after a restart.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "charter.pb-c.h"
#include "evidence/checkpoint.h"
#include "evidence/evlog.h"
#include "gates/gate.h"
#include "gates/identity.h"
#include "workflow/registry.h"
#include "runs/provider.h"
#include "runs/runner.h"
#include "rpc/services.h"
#include "rpc/wire.h"

/* The run view as charter_get_run returns it, converted in the call's arena. artifacts_after
 * NULL: the whole run's deliveries and artifacts; else the page after it (GetRun). */
static int load_view_of(call *c, const char *run_id, uint64_t after, uint32_t limit, bool content,
                        const char *only, const uint64_t *artifacts_after,
                        Charter__V1__RunView **out)
{
    /* The query library counts places and seqs up to 10^15: beyond that is after all of them. */
    const unsigned long long last = 1000000000000000ULL;
    char a[32], l[32], aa[32] = "";
    snprintf(a, sizeof a, "%llu", after > last ? last : (unsigned long long)after);
    snprintf(l, sizeof l, "%u", limit ? (limit > 10000 ? 10000 : limit) : 1000);
    if (artifacts_after)
        snprintf(aa, sizeof aa, "%llu",
                 *artifacts_after > last ? last : (unsigned long long)*artifacts_after);
    json_t *j = NULL;
    int rc = q_get_run(c->st, run_id, a, l, content ? "1" : "0", only ? only : "",
                       artifacts_after ? aa : NULL, &j);
    /* An archived run is not found here, and the answer says where it went. */
    if (rc != STATUS_OK)
        return call_fail_run(c, rc, run_id);
    *out = wire_run_view(c, j);
    json_decref(j);
    if (!*out)
        return call_fail(c, RPC_INTERNAL, "the run could not be encoded");
    /* Its human approvals (approval.h), as of the database clock. */
    json_t *ap = NULL;
    rc = q_list_approvals(c->st, run_id, "", "0", &ap);
    if (rc == STATUS_OK && wire_approvals(c, json_object_get(ap, "approvals"), &(*out)->approvals,
                                          &(*out)->n_approvals) != 0)
        rc = STATUS_ENOMEM;
    json_decref(ap);
    if (rc != STATUS_OK)
        return call_fail_run(c, rc, run_id);
    return RPC_OK;
}

/* The run view with every artifact's content. */
static int load_view(call *c, const char *run_id, uint64_t after, uint32_t limit,
                     Charter__V1__RunView **out)
{
    return load_view_of(c, run_id, after, limit, true, NULL, NULL, out);
}

static const char *const budget_names[] = {"max_wall_clock_ms", "max_model_calls", "max_steps",
                                           "max_deliveries"};

/* The request's budget as {"max_steps":n,...} in *out (caller decrefs), or the failure. */
static int budget_of(call *c, const Charter__V1__CreateRunRequest *req, json_t **out)
{
    json_t *b = json_object();
    if (!b)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    for (size_t i = 0; i < req->n_budget; i++) {
        const char *k = req->budget[i]->key ? req->budget[i]->key : "";
        bool known = false;
        for (size_t j = 0; j < sizeof budget_names / sizeof budget_names[0]; j++)
            known = known || strcmp(k, budget_names[j]) == 0;
        if (!known) {
            json_decref(b);
            return call_fail(c, RPC_INVALID_ARGUMENT,
                             "budget: \"%.64s\" is not max_wall_clock_ms, max_model_calls, "
                             "max_steps or max_deliveries",
                             k);
        }
        if (req->budget[i]->value < 1 || req->budget[i]->value > 1000000000000000LL) {
            json_decref(b);
            return call_fail(c, RPC_INVALID_ARGUMENT, "budget: %s must be a positive integer", k);
        }
        if (json_object_set_new(b, k, json_integer(req->budget[i]->value)) != 0) {
            json_decref(b);
            return call_fail(c, RPC_INTERNAL, "out of memory");
        }
    }
    *out = b;
    return RPC_OK;
}

/* Budgets narrow like authority: a run may not ask more than the lowest ceiling any grant on
 * its steps' delegation chains sets (PERMISSION_DENIED, SCOPE_WIDENING), and a budget it does
 * not ask for is that ceiling. budget is completed in place. */
static int budget_within_ceilings(call *c, const workflow *wf, json_t *budget)
{
    long long ceiling[WORKFLOW_N_BUDGETS];
    const char *grant[WORKFLOW_N_BUDGETS];
    if (workflow_budget_ceilings(wf, ceiling, grant) != 0)
        return call_fail(c, RPC_INTERNAL, "the workflow's grant chains cannot be walked");
    for (size_t k = 0; k < WORKFLOW_N_BUDGETS; k++) {
        const char *name = workflow_budget_name(k);
        json_t *asked = json_object_get(budget, name);
        if (ceiling[k] == 0)
            continue;
        if (asked == NULL) {
            if (json_object_set_new(budget, name, json_integer(ceiling[k])) != 0)
                return call_fail(c, RPC_INTERNAL, "out of memory");
        } else if (json_integer_value(asked) > ceiling[k]) {
            return call_fail(c, RPC_PERMISSION_DENIED,
                             "SCOPE_WIDENING: budget %s %lld is above the ceiling %lld of grant "
                             "%s on the run's delegation chains",
                             name, (long long)json_integer_value(asked), ceiling[k],
                             grant[k] ? grant[k] : "?");
        }
    }
    return RPC_OK;
}

static bool run_active(const char *status)
{
    return status && (strcmp(status, "queued") == 0 || strcmp(status, "running") == 0 ||
                      strcmp(status, "recovering") == 0 || strcmp(status, "pending_approval") == 0);
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Polls the run until it has events after after_seq (want_events), or is no longer active, or
 * timeout_ms passed; leaves the run as last read in *j (caller decrefs). Each read is one page,
 * as GetRun's: at most 1000 events after after_seq, the deliveries those events decided and the
 * first 1000 artifacts without content (artifacts_next says where more start), so no poll
 * grows with the run's whole history. */
static int await_run(call *c, const char *run_id, uint64_t after_seq, bool want_events,
                     int timeout_ms, json_t **j)
{
    long long until = now_ms() + timeout_ms;
    char a[32]; /* the query library counts seqs up to 10^15: beyond that is after all */
    snprintf(a, sizeof a, "%llu",
             after_seq > 1000000000000000ULL ? 1000000000000000ULL : (unsigned long long)after_seq);
    for (;;) {
        /* Artifacts without content: a long poll reads the run every 25 ms. */
        json_t *v = NULL;
        int rc = q_get_run(c->st, run_id, a, "1000", "0", "", "0", &v);
        if (rc != STATUS_OK)
            return call_fail_run(c, rc, run_id);
        const char *st = json_string_value(json_object_get(json_object_get(v, "run"), "status"));
        if (!run_active(st) || (want_events && json_array_size(json_object_get(v, "events")) > 0) ||
            now_ms() >= until) {
            *j = v;
            return RPC_OK;
        }
        json_decref(v);
        struct timespec pause = {0, 25 * 1000000L};
        nanosleep(&pause, NULL);
    }
}

/* What of the call's deadline a wait may use: the rest goes to answering. */
static int wait_budget_ms(const call *c, uint32_t asked)
{
    int room = c->timeout_ms - (c->timeout_ms / 10 > 50 ? c->timeout_ms / 10 : 50);
    int want = asked ? (int)(asked > 600000 ? 600000 : asked) : 10000;
    return room < 0 ? 0 : (want < room ? want : room);
}

/* The workflow a new run pins for good (applying another one later never changes it): the one
 * ref names, else charterd's startup workflow. Either must be held by the call's graph: every
 * step of the run finds its actors, grants and resources there, and a tenant holds only what
 * was applied to it (the startup workflow is applied to the default graph alone). A run that
 * could not be driven is never created: NOT_FOUND for a workflow the call names, and
 * FAILED_PRECONDITION for the startup one it implies, each saying what to apply. */
static int run_workflow_of(call *c, const char *ref, const workflow **out)
{
    bool named = ref != NULL && *ref != '\0';
    int rc = registry_held(c->st, named ? ref : c->env->wf->version, out);
    if (rc == STATUS_ENOTFOUND && named) /* what the call names is not there */
        return call_fail(c, RPC_NOT_FOUND,
                         "tenant %.64s holds no workflow %s %.128s: apply one with `charter "
                         "workflow apply FILE` first",
                         c->tenant, registry_is_version(ref) ? "version" : "named", ref);
    if (rc == STATUS_ENOTFOUND)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "tenant %.64s holds no workflow named %.128s (charterd's startup "
                         "workflow, version %.12s): apply it with `charter workflow apply FILE` "
                         "first, or name one the tenant holds",
                         c->tenant, c->env->wf->name, c->env->wf->version);
    if (rc == STATUS_EINVAL)
        return call_fail_statusf(c, rc,
                                 "workflow: a version or a name, 1 to 128 of [A-Za-z0-9._-]");
    if (rc != STATUS_OK)
        return call_fail_status_id(c, rc, "workflow", named ? ref : c->env->wf->version);
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
    /* A live run under --scripted-only never gets here: its row (SVC_SCRIPTED_LIVE_RUN). */
    if (strcmp(mode, "live") == 0 && !provider_configured())
        return call_fail(c, RPC_FAILED_PRECONDITION, "mode: %s", PROVIDER_NOT_CONFIGURED);
    if (req->task && strlen(req->task) > 4096)
        return call_fail(c, RPC_INVALID_ARGUMENT, "task: longer than 4096 bytes");
    if ((rc = call_require_utf8(c, "task", req->task)) != RPC_OK)
        return rc;
    gate_env g = call_gate_env(c);
    if ((rc = run_workflow_of(c, req->workflow, &g.wf)) != RPC_OK)
        return rc;
    if (req->n_budget > 0 && strcmp(mode, "external") == 0)
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "budget: only scripted and live runs carry budgets");
    json_t *budget = NULL;
    if ((rc = budget_of(c, req, &budget)) != RPC_OK)
        return rc;
    if (strcmp(mode, "external") != 0 && (rc = budget_within_ceilings(c, g.wf, budget)) != RPC_OK) {
        json_decref(budget);
        return rc;
    }
    char run_id[65];
    rc = runner_submit(&g, req->task, mode, budget, run_id);
    json_decref(budget);
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, "run");
    if (!req->async && strcmp(mode, "external") != 0) {
        /* A caller that did not ask for async gets the run as it ends, within its deadline;
         * the run executes on an executor thread all the same. */
        json_t *j = NULL;
        rc = await_run(c, run_id, 0, false, call_wait_begin(c, wait_budget_ms(c, 600000)), &j);
        call_wait_end(c);
        if (rc != RPC_OK)
            return rc;
        json_decref(j);
    }
    /* The run's first page, as GetRun gives it: never its whole history. */
    Charter__V1__RunView *view = NULL;
    const uint64_t first = 0;
    rc = load_view_of(c, run_id, 0, 0, true, NULL, &first, &view);
    if (rc == RPC_OK)
        *out = &view->base;
    return rc;
}

static int wait_run(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__WaitRunRequest *req = (const Charter__V1__WaitRunRequest *)in;
    int rc = call_require_id(c, "run_id", req->run_id);
    if (rc != RPC_OK)
        return rc;
    json_t *j = NULL;
    rc = await_run(c, req->run_id, req->after_seq, true,
                   call_wait_begin(c, wait_budget_ms(c, req->timeout_ms)), &j);
    call_wait_end(c);
    if (rc != RPC_OK)
        return rc;
    Charter__V1__RunView *view = wire_run_view(c, j);
    json_decref(j);
    if (!view)
        return call_fail(c, RPC_INTERNAL, "the run could not be encoded");
    *out = &view->base;
    return RPC_OK;
}

static int cancel_run(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__CancelRunRequest *req = (const Charter__V1__CancelRunRequest *)in;
    int rc = call_require_id(c, "run_id", req->run_id);
    if (rc == RPC_OK)
        rc = call_require_utf8(c, "reason", req->reason);
    if (rc != RPC_OK)
        return rc;
    const char *reason = req->reason && *req->reason ? req->reason : "cancelled";
    if (strlen(reason) > 512)
        return call_fail(c, RPC_INVALID_ARGUMENT, "reason: longer than 512 bytes");
    json_t *j = NULL;
    rc = q_request_cancel(c->st, req->run_id, reason, &j);
    if (rc != STATUS_OK)
        return call_fail_run(c, rc, req->run_id);
    const char *st = json_string_value(json_object_get(j, "status"));
    /* Nothing executes a created or queued run, one resting recoverable (blocked, error,
     * interrupted), nor a recovery still waiting for an executor: it is cancelled here, so no
     * recovery delivers afterwards. */
    bool unclaimed =
        st &&
        (strcmp(st, "created") == 0 || strcmp(st, "queued") == 0 || strcmp(st, "blocked") == 0 ||
         strcmp(st, "error") == 0 || strcmp(st, "interrupted") == 0 ||
         (strcmp(st, "recovering") == 0 && !json_is_true(json_object_get(j, "leased"))));
    json_decref(j);
    if (unclaimed) {
        /* No executor holds it: cancelled here, in one call that also takes it off the queue.
         * One that claimed it meanwhile sees the request at its first renewal or in the
         * commit (the call then changes nothing). */
        json_t *d = json_pack("{s:s, s:s, s:s}", "reason", reason, "step", "", "by", "CancelRun");
        char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
        json_decref(d);
        if (!text)
            return call_fail(c, RPC_INTERNAL, "out of memory");
        rc = evlog_cancel_unclaimed(c->st, req->run_id, text, NULL, NULL);
        free(text);
        if (rc != STATUS_OK && rc != STATUS_EREFUSED)
            return call_fail_run(c, rc, req->run_id);
    }
    Charter__V1__RunView *view = NULL;
    rc = load_view(c, req->run_id, 0, 1, &view);
    if (rc == RPC_OK)
        *out = &view->run->base;
    return rc;
}

static int get_run(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__GetRunRequest *req = (const Charter__V1__GetRunRequest *)in;
    int rc = call_require_id(c, "run_id", req->run_id);
    if (rc != RPC_OK)
        return rc;
    if (req->artifact_id && *req->artifact_id &&
        (rc = call_require_id(c, "artifact_id", req->artifact_id)) != RPC_OK)
        return rc;
    Charter__V1__RunView *view = NULL;
    rc = load_view_of(c, req->run_id, req->after_seq, req->limit, !req->without_content,
                      req->artifact_id, &req->artifacts_after, &view);
    if (rc == RPC_OK)
        *out = &view->base;
    return rc;
}

static int list_runs(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__ListRunsRequest *req = (const Charter__V1__ListRunsRequest *)in;
    char l[32];
    snprintf(l, sizeof l, "%u", req->limit ? (req->limit > 1000 ? 1000 : req->limit) : 100);
    json_t *j = NULL;
    int rc = q_list_runs(c->st, l, &j);
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

/* The decision of a recovery that ended, read back from the status_changed event that ended
 * it ("recovering -> <status>: {step, codes, witness}", runner.c finish) among events (those
 * after the claim): completed is ALLOW, blocked DENY, error UNKNOWN with the codes and the
 * witness the runner recorded; a recovery stopped (cancelled, interrupted, budget_exhausted)
 * is UNKNOWN naming how it ended and why (the reason, or the budget), with GRAPH_ERROR and
 * EFFECT_UNKNOWN unless a delivery budget stopped it (its send may have landed). Returns STATUS_OK
 * and *out (guard_decision_free), or STATUS_ENOTFOUND when no such event is among events (the
 * recovery has not ended). */
static int recovery_outcome(const json_t *events, guard_decision *out)
{
    memset(out, 0, sizeof *out);
    const char *ended = NULL, *detail = NULL;
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e)
    {
        const char *kind = json_string_value(json_object_get(e, "kind"));
        const char *d = json_string_value(json_object_get(e, "detail"));
        const char *prefix = "recovering -> ";
        if (!kind || strcmp(kind, "status_changed") != 0 || !d ||
            strncmp(d, prefix, strlen(prefix)) != 0 ||
            strncmp(d + strlen(prefix), "pending_approval", 16) == 0)
            continue;
        ended = d + strlen(prefix);
        detail = strstr(ended, ": ");
    }
    if (ended == NULL)
        return STATUS_ENOTFOUND;
    json_t *j = detail ? json_loads(detail + 2, 0, NULL) : NULL;
    const char *codes = json_string_value(json_object_get(j, "codes"));
    const char *witness = json_string_value(json_object_get(j, "witness"));
    char why[256];
    if (strncmp(ended, "completed", 9) == 0) {
        out->outcome = GUARD_ALLOW;
    } else if (strncmp(ended, "blocked", 7) == 0) {
        out->outcome = GUARD_DENY;
    } else if (strncmp(ended, "error", 5) == 0) {
        out->outcome = GUARD_UNKNOWN;
    } else {
        const char *reason = json_string_value(json_object_get(j, "reason"));
        if (reason == NULL) /* budget_exhausted names its budget */
            reason = json_string_value(json_object_get(j, "budget"));
        snprintf(why, sizeof why,
                 "the recovery ended %.*s%s%.128s%s: the run's deliveries list what it delivered",
                 (int)strcspn(ended, ":"), ended, reason ? " (" : "", reason ? reason : "",
                 reason ? ")" : "");
        witness = why;
        codes = NULL;
        out->outcome = GUARD_UNKNOWN;
        /* An interrupted or cancelled recovery may have committed its send before it stopped
         * (a charterd killed right after the commit): the answer must not claim no effect. A
         * delivery budget ends it only when the commit refused the send, so nothing landed. */
        if (strncmp(ended, "budget_exhausted", 16) != 0)
            out->codes |= (1u << GUARD_GRAPH_ERROR) | (1u << GUARD_EFFECT_UNKNOWN);
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", codes ? codes : "");
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int code = decision_code_from_name(tok);
        if (code >= 0)
            out->codes |= 1u << code;
    }
    int rc = STATUS_OK;
    if (witness && *witness && (out->witness = strdup(witness)) == NULL)
        rc = STATUS_ENOMEM;
    json_decref(j);
    return rc;
}

/* RecoverRun claims the run for a recovery and queues it for the executor threads
 * (runner_request_recovery); it never runs the recovery step itself. Without async it waits
 * (a long-wait slot, within its deadline) until the recovery ends and answers its decision;
 * with async, or when the wait ends first, it answers the run as it is (recovering or
 * pending_approval) without a decision: follow it with WaitRun. */
static int recover_run(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__RecoverRunRequest *req = (const Charter__V1__RecoverRunRequest *)in;
    int rc;
    if ((rc = call_require_id(c, "run_id", req->run_id)) != RPC_OK)
        return rc;
    gate_env g = call_gate_env(c);
    runner_recovery rec;
    rc = runner_request_recovery(&g, req->run_id, &rec);
    if (rc == STATUS_EREFUSED) {
        guard_decision_free(&rec.decision);
        const char *status = rec.status[0] ? rec.status : "not blocked, interrupted or in error";
        return call_fail_statusf(c, STATUS_EREFUSED,
                                 "run %s is %s: only a blocked, interrupted or error run "
                                 "recovers; nothing to recover",
                                 req->run_id, status);
    }
    if (rc != STATUS_OK) {
        guard_decision_free(&rec.decision);
        return call_fail_run(c, rc, req->run_id);
    }
    Charter__V1__RecoverRunResponse *resp = call_alloc(c, sizeof *resp);
    if (!resp) {
        guard_decision_free(&rec.decision);
        return call_fail(c, RPC_INTERNAL, "out of memory");
    }
    charter__v1__recover_run_response__init(resp);
    resp->acknowledged = rec.acknowledged;
    if (!rec.queued) {
        resp->decision = wire_decision(c, &rec.decision);
        guard_decision_free(&rec.decision);
        if (!resp->decision)
            return call_fail(c, RPC_INTERNAL, "out of memory");
    } else {
        /* The recovery's own events only: those after its claim. */
        json_t *j = NULL;
        int wait = req->async ? 0 : call_wait_begin(c, wait_budget_ms(c, 600000));
        rc = await_run(c, req->run_id, rec.claim_seq, false, wait, &j);
        call_wait_end(c);
        if (rc != RPC_OK)
            return rc;
        guard_decision d;
        int orc = recovery_outcome(json_object_get(j, "events"), &d);
        json_decref(j);
        if (orc == STATUS_OK)
            resp->decision = wire_decision(c, &d);
        guard_decision_free(&d);
        if (orc == STATUS_ENOMEM || (orc == STATUS_OK && !resp->decision))
            return call_fail(c, RPC_INTERNAL, "out of memory");
    }
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

#define INTEGRITY_REQUIRED_CHECKPOINT                                                              \
    "INTEGRITY_KEY_REQUIRED: checkpoints are sealed with the integrity key, and this graph has "   \
    "none (restart charterd with --adopt-integrity-key to seal it from now on)"

static int checkpoint_run(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__CheckpointRunRequest *req = (const Charter__V1__CheckpointRunRequest *)in;
    int rc = call_require_id(c, "run_id", req->run_id);
    if (rc != RPC_OK)
        return rc;
    if (!evlog_keyed())
        return call_fail(c, RPC_FAILED_PRECONDITION, INTEGRITY_REQUIRED_CHECKPOINT);
    json_t *j = NULL, *cur = NULL;
    rc = q_get_checkpoint(c->st, req->run_id, &j);
    if (rc != STATUS_OK)
        return call_fail_run(c, rc, req->run_id);
    const char *token = json_string_value(json_object_get(j, "token"));
    if (token == NULL || *token == '\0') {
        json_decref(j);
        return call_fail(c, RPC_NOT_FOUND,
                         "run %s has no checkpoint: the executor records one before each step "
                         "of a scripted or live run",
                         req->run_id);
    }
    int orc = checkpoint_open(token, &cur);
    if (orc != STATUS_OK) {
        json_decref(j);
        return call_fail(c, RPC_INTERNAL,
                         "run %s: its stored checkpoint does not verify under the integrity key",
                         req->run_id);
    }
    Charter__V1__Checkpoint *resp = call_alloc(c, sizeof *resp);
    if (resp) {
        charter__v1__checkpoint__init(resp);
        json_t *k = json_object_get(cur, "counters");
        resp->run_id = call_strdup(c, req->run_id);
        resp->checkpoint_id = call_strdup(c, json_string_value(json_object_get(cur, "id")));
        resp->token = call_strdup(c, token);
        resp->step = call_strdup(c, json_string_value(json_object_get(cur, "step")));
        resp->next_step = (uint32_t)json_integer_value(json_object_get(cur, "next_step"));
        resp->workflow = call_strdup(c, json_string_value(json_object_get(cur, "workflow")));
        resp->graph = call_strdup(c, json_string_value(json_object_get(cur, "graph")));
        resp->steps = json_integer_value(json_object_get(k, "steps"));
        resp->model_calls = json_integer_value(json_object_get(k, "model_calls"));
        resp->deliveries = json_integer_value(json_object_get(k, "deliveries"));
        resp->wall_clock_ms = json_integer_value(json_object_get(k, "wall_clock_ms"));
        resp->consumed = json_is_true(json_object_get(j, "consumed"));
    }
    json_decref(j);
    json_decref(cur);
    if (!resp || !resp->run_id || !resp->checkpoint_id || !resp->token || !resp->step ||
        !resp->workflow || !resp->graph)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    *out = &resp->base;
    return RPC_OK;
}

static const char *budget_name(const json_t *r)
{
    const char *b = json_string_value(json_object_get(r, "budget"));
    return b ? b : "";
}

/* Why charter_resume_run refused, as the caller's answer. */
static int resume_refused(call *c, const json_t *r, const char *run_id, const char *ckpt_id,
                          const char *workflow)
{
    const char *reason = json_string_value(json_object_get(r, "reason"));
    const char *status = json_string_value(json_object_get(r, "status"));
    const char *latest = json_string_value(json_object_get(r, "latest"));
    const char *pinned = json_string_value(json_object_get(r, "workflow"));
    reason = reason ? reason : "";
    if (strcmp(reason, "consumed") == 0)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "checkpoint %s was already consumed: a checkpoint resumes its run once",
                         ckpt_id);
    if (strcmp(reason, "workflow") == 0)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "checkpoint %s was taken under workflow version %.128s; run %s follows "
                         "version %.128s",
                         ckpt_id, workflow, run_id, pinned ? pinned : "");
    if (strcmp(reason, "status") == 0)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "run %s is %s: only an interrupted run resumes from a checkpoint", run_id,
                         status ? status : "");
    if (strcmp(reason, "stale") == 0)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "checkpoint %s is not run %s's latest checkpoint (%s)", ckpt_id, run_id,
                         latest ? latest : "");
    if (strcmp(reason, "budget") == 0)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "run %s's budget %s is exhausted at checkpoint %s: nothing to resume",
                         run_id, budget_name(r), ckpt_id);
    return call_fail(c, RPC_INTERNAL, "unexpected database reply for the resume");
}

static int resume_run(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__ResumeRunRequest *req = (const Charter__V1__ResumeRunRequest *)in;
    if (!evlog_keyed())
        return call_fail(c, RPC_FAILED_PRECONDITION, INTEGRITY_REQUIRED_CHECKPOINT);
    if (req->checkpoint == NULL || *req->checkpoint == '\0')
        return call_fail(c, RPC_INVALID_ARGUMENT, "checkpoint is required");
    json_t *cur = NULL;
    int rc = checkpoint_open(req->checkpoint, &cur);
    if (rc == STATUS_EINVAL)
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "checkpoint: not a checkpoint token (ckpt1.<base64>.<mac>, as "
                         "CheckpointRun returns it)");
    if (rc == STATUS_EDENIED)
        return call_fail(c, RPC_PERMISSION_DENIED,
                         "checkpoint: MAC mismatch: the token was forged, altered, or sealed "
                         "under another integrity key");
    if (rc != STATUS_OK)
        return call_fail_status(c, rc, "checkpoint");
    const char *graph = json_string_value(json_object_get(cur, "graph"));
    const char *run_id = json_string_value(json_object_get(cur, "run_id"));
    const char *ckpt_id = json_string_value(json_object_get(cur, "id"));
    const char *workflow = json_string_value(json_object_get(cur, "workflow"));
    json_t *counters = json_object_get(cur, "counters");
    char *ctext = json_is_object(counters) ? json_dumps(counters, JSON_COMPACT) : NULL;
    json_t *r = NULL;
    char run[72] = "";
    if (!graph || !run_id || !ckpt_id || !workflow || !ctext) {
        rc = call_fail(c, RPC_INVALID_ARGUMENT, "checkpoint: its cursor lacks a field");
        goto out;
    }
    if (strcmp(graph, store_graph(c->st)) != 0) {
        rc = call_fail(c, RPC_INVALID_ARGUMENT,
                       "checkpoint: taken on graph %.64s; this charterd serves graph %.64s", graph,
                       store_graph(c->st));
        goto out;
    }
    snprintf(run, sizeof run, "%s", run_id);
    char detail[160];
    snprintf(detail, sizeof detail, "{\"by\":\"ResumeRun\",\"checkpoint\":\"%.40s\"}", ckpt_id);
    int src = evlog_resume_run(c->st, run_id, ckpt_id, workflow, ctext, detail, &r);
    if (src != STATUS_OK) {
        rc = call_fail_run(c, src, run_id);
        goto out;
    }
    if (!json_is_true(json_object_get(r, "ok"))) {
        rc = resume_refused(c, r, run_id, ckpt_id, workflow);
        goto out;
    }
    rc = RPC_OK;
out:
    json_decref(r);
    free(ctext);
    json_decref(cur);
    if (rc != RPC_OK)
        return rc;
    Charter__V1__RunView *view = NULL;
    rc = load_view(c, run, 0, 1, &view);
    if (rc == RPC_OK)
        *out = &view->run->base;
    return rc;
}

/* Why CompleteRun refused run_id (r: charter_complete_run's reply), as FAILED_PRECONDITION. */
static int complete_refused(call *c, const json_t *r, const char *run_id)
{
    const char *reason = json_string_value(json_object_get(r, "reason"));
    const char *status = json_string_value(json_object_get(r, "status"));
    const char *mode = json_string_value(json_object_get(r, "mode"));
    const char *approval = json_string_value(json_object_get(r, "approval"));
    status = status ? status : "";
    reason = reason ? reason : "";
    if (strcmp(reason, "mode") == 0)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "run %s is a %s run (%s): its executor ends it; CompleteRun ends external "
                         "runs only",
                         run_id, mode && *mode ? mode : "scripted", status);
    if (strcmp(reason, "approval") == 0)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "run %s holds a send for a human's approval (approval %.64s, pending): "
                         "decide it or let its deadline pass, then complete the run, or cancel it",
                         run_id, approval ? approval : "");
    if (strcmp(reason, "status") == 0)
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "run %s is %s: only a created external run is completed", run_id, status);
    return call_fail(c, RPC_INTERNAL, "unexpected database reply for the completion");
}

/* For a host credential, the identity gate (gates/identity.c, RULE-HOST-IDENTITY) on the run as
 * a whole: one of its actors is the actor of a step of the run's workflow. RPC_OK, or the
 * refusal (PERMISSION_DENIED IDENTITY_MISMATCH, recorded on the run) or failure. */
static int complete_host_check(call *c, const char *run_id)
{
    if (c->role != ROLE_HOST)
        return RPC_OK;
    const workflow *wf = NULL;
    int rc = registry_run_workflow(c->st, run_id, &wf);
    if (rc != STATUS_OK)
        return call_fail_status_id(c, rc, "run", run_id);
    identity_host h = {c->st, c->credential_id, c->actors, c->n_actors, "CompleteRun"};
    guard_decision d;
    rc = identity_check_run(&h, run_id, wf, &d);
    if (rc != STATUS_OK && d.outcome == GUARD_DENY)
        rc = call_fail_statusf(c, rc, "identity mismatch (%s) could not be recorded",
                               d.witness != NULL ? d.witness : "");
    else if (rc != STATUS_OK)
        rc = call_fail_status_id(c, rc, "run", run_id);
    else if (d.outcome != GUARD_ALLOW)
        rc = call_fail(c, RPC_PERMISSION_DENIED, "IDENTITY_MISMATCH: %s",
                       d.witness != NULL ? d.witness : "");
    else
        rc = RPC_OK;
    guard_decision_free(&d);
    return rc;
}

/* CompleteRun ends an external run: created -> completed in one database call
 * (charter_complete_run), the event naming why and who (its detail carries the caller). */
static int complete_run(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__CompleteRunRequest *req = (const Charter__V1__CompleteRunRequest *)in;
    int rc = call_require_id(c, "run_id", req->run_id);
    if (rc == RPC_OK)
        rc = call_require_utf8(c, "reason", req->reason);
    if (rc != RPC_OK)
        return rc;
    const char *reason = req->reason && *req->reason ? req->reason : "completed";
    if (strlen(reason) > 512)
        return call_fail(c, RPC_INVALID_ARGUMENT, "reason: longer than 512 bytes");
    if ((rc = complete_host_check(c, req->run_id)) != RPC_OK)
        return rc;
    json_t *d = json_pack("{s:s, s:s}", "reason", reason, "by", "CompleteRun");
    char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    if (!text)
        return call_fail(c, RPC_INTERNAL, "out of memory");
    json_t *r = NULL;
    int src = evlog_complete_run(c->st, req->run_id, text, &r);
    free(text);
    Charter__V1__RunView *view = NULL;
    if (src == STATUS_ENOTFOUND) /* GetRun's answer: not found, or where it was archived */
        rc = load_view(c, req->run_id, 0, 1, &view);
    else if (src != STATUS_OK)
        rc = call_fail_status_id(c, src, "run", req->run_id);
    else if (!json_is_true(json_object_get(r, "ok")))
        rc = complete_refused(c, r, req->run_id);
    else
        rc = load_view(c, req->run_id, 0, 1, &view);
    json_decref(r);
    if (rc == RPC_OK && c->role == ROLE_HOST) {
        /* A host may end the run, not read it: its id and status only. */
        Charter__V1__Run *run = call_alloc(c, sizeof *run);
        if (run == NULL)
            return call_fail(c, RPC_INTERNAL, "out of memory");
        charter__v1__run__init(run);
        run->id = view->run->id;
        run->status = view->run->status;
        *out = &run->base;
    } else if (rc == RPC_OK) {
        *out = &view->run->base;
    }
    return rc;
}

/* The Runs service: one row per method, checked against the generated descriptor at
 * startup (dispatch_check_tables); dispatch enforces each row's columns (services.h). */
const svc_method svc_runs_methods[] = {
    {"CreateRun", &charter__v1__create_run_request__descriptor, &charter__v1__run_view__descriptor,
     ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_RUNS, SVC_SCRIPTED_LIVE_RUN, create_run},
    {"GetRun", &charter__v1__get_run_request__descriptor, &charter__v1__run_view__descriptor,
     ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, get_run},
    {"ListRuns", &charter__v1__list_runs_request__descriptor,
     &charter__v1__list_runs_response__descriptor, ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, list_runs},
    {"RecoverRun", &charter__v1__recover_run_request__descriptor,
     &charter__v1__recover_run_response__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, recover_run},
    {"WaitRun", &charter__v1__wait_run_request__descriptor, &charter__v1__run_view__descriptor,
     ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, wait_run},
    {"CancelRun", &charter__v1__cancel_run_request__descriptor, &charter__v1__run__descriptor,
     ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, cancel_run},
    {"CheckpointRun", &charter__v1__checkpoint_run_request__descriptor,
     &charter__v1__checkpoint__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, checkpoint_run},
    {"ResumeRun", &charter__v1__resume_run_request__descriptor, &charter__v1__run__descriptor,
     ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, resume_run},
    /* A host ends the external run it drove (complete_host_check: one of its actors'). */
    {"CompleteRun", &charter__v1__complete_run_request__descriptor, &charter__v1__run__descriptor,
     ROLE_OPERATOR, SVC_HOST, SVC_QUOTA_NONE, SVC_SCRIPTED_SERVED, complete_run},
};
const size_t svc_runs_methods_len = sizeof svc_runs_methods / sizeof svc_runs_methods[0];
