/*
 * svc_approvals.c - the Approvals service: list the human approvals deliveries wait for, and
 * decide one on behalf of its approver (approval.h).
 *
 * DecideApproval is an operator's method: the operator acts for the human the workflow names,
 * and the database refuses any other actor. No agent-facing surface offers it (charter-mcp
 * maps a fixed list of gate methods), so a model can never approve its own send.
 */
#include <stdio.h>
#include <string.h>

#include "gates/approval.h"
#include "charter.pb-c.h"
#include "core/ids.h"
#include "rpc/services.h"
#include "core/status.h"
#include "rpc/wire.h"

/* The string v holds, or dflt. */
static const char *text_or(const json_t *v, const char *dflt)
{
    const char *s = json_string_value(v);
    return s != NULL ? s : dflt;
}

static int list_approvals(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__ListApprovalsRequest *req = (const Charter__V1__ListApprovalsRequest *)in;
    const char *run = req->run_id != NULL ? req->run_id : "";
    const char *state = req->state != NULL ? req->state : "";
    if (*run != '\0' && !ids_graph_ok(run))
        return call_fail(c, RPC_INVALID_ARGUMENT, "run_id: 1 to 128 of [A-Za-z0-9._-]");
    if (*state != '\0' && strcmp(state, "pending") != 0 && strcmp(state, "approved") != 0 &&
        strcmp(state, "denied") != 0 && strcmp(state, "expired") != 0 &&
        strcmp(state, "refused") != 0)
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "state: one of pending, approved, denied, expired, refused");
    char limit[16];
    snprintf(limit, sizeof limit, "%u", req->limit > 1000 ? 1000u : req->limit);
    json_t *j = NULL;
    int rc = q_list_approvals(c->st, run, state, limit, &j);
    if (rc != STATUS_OK)
        return call_fail_status_id(c, rc, "approvals of run", run);
    Charter__V1__ListApprovalsResponse *resp = call_alloc(c, sizeof *resp);
    if (resp != NULL) {
        charter__v1__list_approvals_response__init(resp);
        if (wire_approvals(c, json_object_get(j, "approvals"), &resp->approvals,
                           &resp->n_approvals) != 0)
            resp = NULL;
    }
    json_decref(j);
    if (resp == NULL)
        return call_fail(c, RPC_INTERNAL, "the approvals could not be encoded");
    *out = &resp->base;
    return RPC_OK;
}

/* The decision the response carries: ALLOW for a committed delivery, DENY for a denial or an
 * expiry, UNKNOWN GRAPH_ERROR for a commit refused on re-check. */
static Charter__V1__Decision *decision_of(call *c, const char *status, const json_t *approval,
                                          const json_t *reply)
{
    guard_decision d;
    memset(&d, 0, sizeof d);
    char buf[512];
    const char *id = json_string_value(json_object_get(approval, "id"));
    if (strcmp(status, "approved") == 0) {
        d.outcome = GUARD_ALLOW;
    } else if (strcmp(status, "refused") == 0) {
        const json_t *r = json_object_get(reply, "refusal");
        snprintf(buf, sizeof buf, "approval %s: the conditional write was refused: %s %s",
                 id ? id : "?", text_or(json_object_get(r, "reason"), "?"),
                 text_or(json_object_get(r, "detail"), ""));
        d.outcome = GUARD_UNKNOWN;
        d.codes = 1u << GUARD_GRAPH_ERROR;
        d.witness = buf;
    } else {
        snprintf(buf, sizeof buf, "approval %s %s%s%s", id ? id : "?", status,
                 strcmp(status, "expired") == 0 ? ": " : " by ",
                 strcmp(status, "expired") == 0
                     ? text_or(json_object_get(approval, "reason"), "")
                     : text_or(json_object_get(approval, "decided_by"), ""));
        d.outcome = GUARD_DENY;
        d.witness = buf;
    }
    Charter__V1__Decision *m = wire_decision(c, &d);
    if (m == NULL || d.outcome == GUARD_ALLOW)
        return m;
    /* The approval's own code next to the guard's (APPROVAL_DENIED, ...). */
    char code[32];
    snprintf(code, sizeof code, "APPROVAL_%s", status);
    for (char *p = code; *p; p++)
        *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    char **codes = call_alloc(c, (m->n_codes + 1) * sizeof *codes);
    if (codes == NULL || (codes[m->n_codes] = call_strdup(c, code)) == NULL)
        return NULL;
    for (size_t i = 0; i < m->n_codes; i++)
        codes[i] = m->codes[i];
    m->codes = codes;
    m->n_codes++;
    return m;
}

static int decide_approval(call *c, const ProtobufCMessage *in, ProtobufCMessage **out)
{
    const Charter__V1__DecideApprovalRequest *req = (const Charter__V1__DecideApprovalRequest *)in;
    if (req->approval_id == NULL || !ids_graph_ok(req->approval_id))
        return call_fail(c, RPC_INVALID_ARGUMENT, "approval_id: 1 to 128 of [A-Za-z0-9._-]");
    if (req->decision == NULL ||
        (strcmp(req->decision, "approve") != 0 && strcmp(req->decision, "deny") != 0))
        return call_fail(c, RPC_INVALID_ARGUMENT, "decision: approve or deny");
    if (req->actor == NULL || !ids_graph_ok(req->actor))
        return call_fail(c, RPC_INVALID_ARGUMENT,
                         "actor: the human the approval names (1 to 128 of [A-Za-z0-9._-])");
    int rc = call_require_utf8(c, "reason", req->reason);
    if (rc != RPC_OK)
        return rc;
    if (req->reason != NULL && strlen(req->reason) > 1024)
        return call_fail(c, RPC_INVALID_ARGUMENT, "reason: at most 1024 bytes");
    json_t *reply = NULL;
    int st =
        approval_decide(c->st, req->approval_id, req->decision, req->actor, req->reason, &reply);
    const json_t *approval = json_object_get(reply, "approval");
    if (st == STATUS_EDENIED) {
        rc = call_fail(c, RPC_PERMISSION_DENIED,
                       "approval %s: %s is not its approver (%s decides it)", req->approval_id,
                       req->actor, text_or(json_object_get(approval, "approver"), "?"));
    } else if (st == STATUS_EREFUSED) {
        const char *by = json_string_value(json_object_get(approval, "decided_by"));
        rc = call_fail(c, RPC_FAILED_PRECONDITION, "approval %s was already decided: %s%s%s",
                       req->approval_id, text_or(json_object_get(approval, "state"), "?"),
                       by && *by ? " by " : "", by && *by ? by : "");
    } else if (st != STATUS_OK) {
        rc = call_fail_status_id(c, st, "approval", req->approval_id);
    } else {
        Charter__V1__DecideApprovalResponse *resp = call_alloc(c, sizeof *resp);
        const char *status = json_string_value(json_object_get(reply, "status"));
        if (resp != NULL) {
            charter__v1__decide_approval_response__init(resp);
            resp->approval = wire_approval(c, approval);
            resp->decision = decision_of(c, status, approval, reply);
            const json_t *d = json_object_get(reply, "delivery");
            resp->delivery = json_is_object(d) ? wire_delivery(c, d) : NULL;
        }
        if (resp == NULL || resp->approval == NULL || resp->decision == NULL) {
            rc = call_fail(c, RPC_INTERNAL, "the decision could not be encoded");
        } else {
            *out = &resp->base;
            rc = RPC_OK;
        }
    }
    json_decref(reply);
    return rc;
}

/* The Approvals service: viewers list, only an operator decides (dispatch enforces each row's
 * role before the handler runs). */
const svc_method svc_approvals_methods[] = {
    {"ListApprovals", &charter__v1__list_approvals_request__descriptor,
     &charter__v1__list_approvals_response__descriptor, ROLE_VIEWER, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, list_approvals},
    {"DecideApproval", &charter__v1__decide_approval_request__descriptor,
     &charter__v1__decide_approval_response__descriptor, ROLE_OPERATOR, SVC_NO_HOST, SVC_QUOTA_NONE,
     SVC_SCRIPTED_SERVED, decide_approval},
};
const size_t svc_approvals_methods_len =
    sizeof svc_approvals_methods / sizeof svc_approvals_methods[0];
