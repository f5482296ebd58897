/*
 * approval.c - deciding a human approval: the four events its one atomic call may write are
 * sealed here on one head (the delivery it commits, or its denial, expiry or refusal), and the
 * database writes the one its outcome calls for (evlog_write_one_of), so the event log holds
 * exactly one record of the decision whichever way a race goes.
 */
#include "gates/approval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gates/gate.h"
#include "evidence/receipt_issue.h"
#include "core/status.h"

/* charter_request_approval: the request, then its approval_requested event. */
static int approval_request_call(store *st, int nargs, const char *const *a, json_t **out)
{
    return nargs == 2 ? q_request_approval(st, a[0], a[1], out) : STATUS_EINVAL;
}

/* charter_decide_approval: the decision, then its four events (evs of approval_decide). */
static int approval_decide_call(store *st, int nargs, const char *const *a, json_t **out)
{
    return nargs == 5 ? q_decide_approval(st, a[0], a[1], a[2], a[3], a[4], out) : STATUS_EINVAL;
}

void approval_id_of(const char *invocation_id, char id[36])
{
    char hex[65];
    gate_sha256_hex(invocation_id, strlen(invocation_id), hex);
    snprintf(id, 36, "ap-%.32s", hex);
}

int approval_request(store *st, const char *run_id, const json_t *doc, const evlog_event *requested,
                     json_t **reply)
{
    *reply = NULL;
    char *text = evlog_json_text(doc);
    if (text == NULL)
        return STATUS_ENOMEM;
    int rc = evlog_write_one_of(st, approval_request_call, run_id, text, requested, 1, reply);
    free(text);
    return rc;
}

static const char *str_of(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s != NULL ? s : "";
}

/* The texts of the four events a decision may write, owned here. */
typedef struct {
    char *commit_detail;
    char *witness[3];
    char *detail;
} decide_texts;

static void texts_free(decide_texts *t)
{
    free(t->commit_detail);
    for (int i = 0; i < 3; i++)
        free(t->witness[i]);
    free(t->detail);
}

/* The delivery_decided event the approval holds, its detail naming the approval and who
 * approved it, then approval_decided for a denial, an expiry and a refused commit. */
static int build_events(const json_t *got, const char *actor, const char *reason, decide_texts *t,
                        evlog_event evs[4])
{
    const json_t *a = json_object_get(got, "approval");
    const json_t *e = json_object_get(got, "event");
    const char *id = str_of(a, "id");
    json_t *detail = json_loads(str_of(e, "detail"), 0, NULL);
    if (!json_is_object(detail)) {
        json_decref(detail);
        detail = json_object();
    }
    if (detail == NULL || json_object_set_new(detail, "approval_id", json_string(id)) != 0 ||
        json_object_set_new(detail, "approved_by", json_string(actor)) != 0) {
        json_decref(detail);
        return STATUS_ENOMEM;
    }
    t->commit_detail = evlog_json_text(detail);
    json_decref(detail);
    json_t *d =
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "approval_id", id, "actor", actor, "invocation_id",
                  str_of(a, "invocation_id"), "step", str_of(a, "step"), "reason", reason);
    t->detail = d != NULL ? evlog_json_text(d) : NULL;
    json_decref(d);
    static const char *const fmt[3] = {
        "approval %s was denied by %s",
        "approval %s expired: %s did not decide before its deadline (silence is never consent)",
        ("approval %s was approved by %s but the conditional write was refused on the database "
         "clock (the approval's reason names the check)"),
    };
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(fmt[i]) + strlen(id) + strlen(actor) + 1;
        if ((t->witness[i] = malloc(n)) != NULL)
            snprintf(t->witness[i], n, fmt[i], id, i == 1 ? str_of(a, "approver") : actor);
    }
    if (t->commit_detail == NULL || t->detail == NULL || t->witness[0] == NULL ||
        t->witness[1] == NULL || t->witness[2] == NULL)
        return STATUS_ENOMEM;
    evs[0] = (evlog_event){
        .kind = str_of(e, "kind"),
        .outcome = str_of(e, "outcome"),
        .codes = str_of(e, "codes"),
        .witness = str_of(e, "witness"),
        .detail = t->commit_detail,
        .snapshot = str_of(e, "snapshot"),
        .evaluator = str_of(e, "evaluator"),
    };
    static const char *const codes[3] = {"APPROVAL_DENIED", "APPROVAL_EXPIRED", "APPROVAL_REFUSED"};
    static const char *const outcomes[3] = {"deny", "deny", "unknown"};
    for (int i = 0; i < 3; i++)
        evs[1 + i] = (evlog_event){
            .kind = "approval_decided",
            .outcome = outcomes[i],
            .codes = codes[i],
            .witness = t->witness[i],
            .detail = t->detail,
            .snapshot = "",
            .evaluator = "",
        };
    return STATUS_OK;
}

int approval_decide(store *st, const char *id, const char *decision, const char *actor,
                    const char *reason, json_t **reply)
{
    *reply = NULL;
    json_t *got = NULL, *arg = NULL;
    char *text = NULL;
    decide_texts t;
    memset(&t, 0, sizeof t);
    evlog_event evs[4];
    if (reason == NULL)
        reason = "";
    int rc = q_get_approval(st, id, &got);
    if (rc != STATUS_OK)
        goto out;
    const char *run_id = str_of(json_object_get(got, "approval"), "run_id");
    if ((rc = build_events(got, actor, reason, &t, evs)) != STATUS_OK)
        goto out;
    arg = json_pack("{s:s, s:s, s:s, s:s}", "approval_id", id, "decision", decision, "actor", actor,
                    "reason", reason);
    if (arg == NULL || (text = evlog_json_text(arg)) == NULL) {
        rc = STATUS_ENOMEM;
        goto out;
    }
    rc = evlog_write_one_of(st, approval_decide_call, run_id, text, evs, 4, reply);
    if (rc != STATUS_OK)
        goto out;
    const char *status = str_of(*reply, "status");
    if (strcmp(status, "not_approver") == 0) {
        rc = STATUS_EDENIED;
    } else if (strcmp(status, "final") == 0) {
        rc = STATUS_EREFUSED;
    } else if (strcmp(status, "approved") == 0 && evlog_keyed()) {
        /* The receipt, as deliver.c issues it right after a commit; a failure loses nothing
         * (GetReceipt issues it from the stored delivery later). */
        json_t *receipt = NULL;
        const json_t *delivery = json_object_get(*reply, "delivery");
        if (json_is_object(delivery))
            (void)receipt_issue_delivery(st, delivery, &receipt);
        json_decref(receipt);
    } else if (strcmp(status, "approved") != 0 && strcmp(status, "denied") != 0 &&
               strcmp(status, "expired") != 0 && strcmp(status, "refused") != 0) {
        rc = STATUS_EPROTO;
    }
out:
    if (rc != STATUS_OK && rc != STATUS_EDENIED && rc != STATUS_EREFUSED) {
        json_decref(*reply);
        *reply = NULL;
    }
    free(text);
    json_decref(arg);
    json_decref(got);
    texts_free(&t);
    return rc;
}
