/*
 * identity.c - the host identity gate (see identity.h): the facts of RULE-HOST-IDENTITY
 * gathered from the graph and the call's credential, decided by the evaluator, and a refusal
 * recorded with those facts so it replays.
 *
 * The snapshot is {gate:"identity", workflow, step, subject, context, run, owners, credential,
 * actors} (context absent when a step was opened or a run ended; run present, and step "", only
 * for a run ended): everything the rule reads, and nothing of the step capability, which it
 * does not read. The evaluator fingerprint is that of the run's workflow and of the
 * evaluator_version the snapshot records, as for the other gates.
 */
#include "gates/identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evidence/evlog.h"
#include "policy/evaluator.h"
#include "policy/facts.h"

static json_t *strs_json(char *const *items, size_t n)
{
    json_t *list = json_array();
    for (size_t i = 0; list != NULL && i < n; i++)
        if (json_array_append_new(list, json_string(items[i])) != 0) {
            json_decref(list);
            return NULL;
        }
    return list;
}

/* The facts as the snapshot keeps them (new reference, NULL when memory ran out). version is
 * the workflow the run follows ("" when unknown); context_id NULL for a step opened or a run
 * ended; whole_run the run's id for a run ended, else NULL. */
static json_t *identity_snapshot(const char *version, const char *step, const char *context_id,
                                 const char *whole_run, const guard_identity *id)
{
    json_t *snap = json_pack("{s:s, s:s, s:s, s:o*, s:s, s:o*, s:i}", "gate", "identity", "step",
                             step != NULL ? step : "", "subject", id->subject, "owners",
                             strs_json(id->owners.items, id->owners.n), "credential",
                             id->credential, "actors", strs_json(id->actors.items, id->actors.n),
                             "evaluator_version", EVALUATOR_VERSION);
    if (snap == NULL || json_object_size(snap) != 7 ||
        (version != NULL && *version != '\0' &&
         json_object_set_new(snap, "workflow", json_string(version)) != 0) ||
        (context_id != NULL &&
         json_object_set_new(snap, "context", json_string(context_id)) != 0) ||
        (whole_run != NULL && json_object_set_new(snap, "run", json_string(whole_run)) != 0)) {
        json_decref(snap);
        return NULL;
    }
    return snap;
}

/* Decides id and records a refusal on run_id with its facts; step NULL (and context_id NULL):
 * the check is on the run as a whole. Returns as identity.h says. */
static int identity_decide(const identity_host *h, const char *run_id, const char *version,
                           const char *step, const char *context_id, const guard_identity *id,
                           guard_decision *d)
{
    if (evaluator_identity_decide(id, d) != 0)
        return STATUS_ENOMEM;
    if (d->outcome == GUARD_ALLOW)
        return STATUS_OK;
    char fp[65] = "";
    if (version != NULL && *version != '\0' && evaluator_fingerprint_of(version, fp) != 0)
        fp[0] = '\0'; /* the process's default is recorded then */
    bool whole_run = step == NULL && context_id == NULL;
    json_t *snap = identity_snapshot(version, whole_run ? "" : step, context_id,
                                     whole_run ? run_id : NULL, id);
    json_t *detail = json_pack("{s:s, s:s}", "method", h->method, "credential", h->credential);
    evlog_owned ev;
    int rc = snap != NULL && detail != NULL
                 ? evlog_owned_event(&ev, "identity_checked", d, fp, detail, snap)
                 : STATUS_ENOMEM;
    if (rc == STATUS_OK)
        rc = evlog_append(h->st, run_id, &ev.ev, NULL);
    if (snap != NULL && detail != NULL)
        evlog_owned_free(&ev);
    json_decref(snap);
    json_decref(detail);
    return rc;
}

int identity_check_context(const identity_host *h, const char *context_id, guard_decision *d)
{
    memset(d, 0, sizeof *d);
    json_t *raw = NULL;
    int rc = q_context_owner(h->st, context_id, &raw);
    if (rc == STATUS_OK && raw == NULL)
        rc = STATUS_EPROTO;
    guard_context ctx;
    memset(&ctx, 0, sizeof ctx);
    if (rc == STATUS_OK)
        rc = facts_context_from_json(raw, &ctx);
    if (rc != STATUS_OK) {
        json_decref(raw);
        return rc;
    }
    char subject[192];
    snprintf(subject, sizeof subject, "context %s", context_id);
    guard_identity id = {
        .subject = subject,
        .owners = ctx.owners,
        .credential = (char *)h->credential,
        .actors = {(char **)h->actors, h->n_actors},
    };
    rc = identity_decide(h, ctx.run_id, json_string_value(json_object_get(raw, "workflow")),
                         ctx.step, context_id, &id, d);
    facts_context_free(&ctx);
    json_decref(raw);
    return rc;
}

int identity_check_archived(const identity_host *h, const char *context_id, const json_t *owners,
                            guard_decision *d)
{
    memset(d, 0, sizeof *d);
    size_t n = json_array_size(owners);
    char **items = calloc(n > 0 ? n : 1, sizeof *items);
    if (items == NULL)
        return STATUS_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (json_is_string(json_array_get(owners, i)))
            items[k++] = (char *)json_string_value(json_array_get(owners, i));
    char subject[192];
    snprintf(subject, sizeof subject, "context %s", context_id);
    guard_identity id = {
        .subject = subject,
        .owners = {items, k},
        .credential = (char *)h->credential,
        .actors = {(char **)h->actors, h->n_actors},
    };
    int rc = evaluator_identity_decide(&id, d) == 0 ? STATUS_OK : STATUS_ENOMEM;
    free(items);
    return rc;
}

int identity_check_step(const identity_host *h, const char *run_id, const workflow *wf,
                        const workflow_step *ws, guard_decision *d)
{
    memset(d, 0, sizeof *d);
    char subject[192];
    snprintf(subject, sizeof subject, "step %s", ws->cap.step);
    guard_identity id = {
        .subject = subject,
        .owners = {(char **)&ws->cap.actor, 1},
        .credential = (char *)h->credential,
        .actors = {(char **)h->actors, h->n_actors},
    };
    return identity_decide(h, run_id, wf->version, ws->cap.step, NULL, &id, d);
}

int identity_check_run(const identity_host *h, const char *run_id, const workflow *wf,
                       guard_decision *d)
{
    memset(d, 0, sizeof *d);
    /* The steps' actors, each once, in the workflow's order. */
    char **owners = calloc(wf->n_steps > 0 ? wf->n_steps : 1, sizeof *owners);
    if (owners == NULL)
        return STATUS_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < wf->n_steps; i++) {
        bool seen = false;
        for (size_t k = 0; k < n && !seen; k++)
            seen = strcmp(owners[k], wf->steps[i].cap.actor) == 0;
        if (!seen)
            owners[n++] = wf->steps[i].cap.actor;
    }
    char subject[192];
    snprintf(subject, sizeof subject, "run %s", run_id);
    guard_identity id = {
        .subject = subject,
        .owners = {owners, n},
        .credential = (char *)h->credential,
        .actors = {(char **)h->actors, h->n_actors},
    };
    int rc = identity_decide(h, run_id, wf->version, NULL, NULL, &id, d);
    free(owners);
    return rc;
}
