/*
 * identity.h - the host identity gate (docs/concepts.md "Rule IDs", RULE-HOST-IDENTITY): a host
 * credential acts only for the actors it is bound to, so it may open a step only of one of its
 * actors, act only through a context one of its actors owns, and end only a run whose workflow
 * names one of its actors at a step.
 *
 * The gate gathers the facts (the context's OWNED_BY actors through charter_context_owner, or
 * the step's actor from the run's workflow, and the credential's actors), decides with
 * evaluator_identity_decide (the guard's rule, shared with replay) and records a refusal as an
 * identity_checked decision event of the run with its snapshot and evaluator fingerprint, so
 * Evidence/ReplayDecision decides it again from the recorded facts alone. An allowed check is
 * not recorded apart: the operation it lets through records its own decision, and an
 * invocation gets one verdict in the log.
 */
#ifndef CHARTER_IDENTITY_H
#define CHARTER_IDENTITY_H

#include <jansson.h>
#include <stddef.h>

#include "db/store.h"
#include "policy/guard.h"
#include "policy/workflow.h"

/* The host credential a call came with (everything borrowed). */
typedef struct {
    store *st;
    const char *credential; /* its id */
    char *const *actors;    /* the actors it is bound to */
    size_t n_actors;
    const char *method; /* what it called, for the event's detail: "Deliver" */
} identity_host;

/* The gate for a call through context_id. d is overwritten: ALLOW, or DENY IDENTITY_MISMATCH
 * with its witness, recorded on the context's run. Returns STATUS_OK with d decided;
 * STATUS_ENOTFOUND (no such context), STATUS_EPROTO, STATUS_EUNAVAILABLE or STATUS_ENOMEM
 * with d no DENY (nothing was decided); or, when a DENY could not be recorded, the
 * recording's failure with d still that DENY: the refusal stands, the caller says it is
 * unrecorded. The caller frees d in every case. */
int identity_check_context(const identity_host *h, const char *context_id, guard_decision *d);

/* The gate for a call through context_id whose run was archived and left the database: owners
 * (a JSON list, borrowed; NULL: none) are the context's OWNED_BY actors as the run's archive
 * holds them (gates/archived.h). Decided by the same rule; nothing is recorded (there is no
 * run to record on). Returns STATUS_OK with d decided (ALLOW, or DENY IDENTITY_MISMATCH) or
 * STATUS_ENOMEM. The caller frees d. */
int identity_check_archived(const identity_host *h, const char *context_id, const json_t *owners,
                            guard_decision *d);

/* The gate for opening step ws of workflow wf (the workflow run_id follows): the step's actor
 * must be one of the credential's. d and the returns as identity_check_context (no
 * STATUS_ENOTFOUND: the run and step are resolved by the caller). */
int identity_check_step(const identity_host *h, const char *run_id, const workflow *wf,
                        const workflow_step *ws, guard_decision *d);

/* The gate for a call on run_id as a whole (Runs/CompleteRun): the actor of one of the steps of
 * wf, the workflow run_id follows, must be one of the credential's (the run's subject is "run
 * <id>", its owners those actors, and a refusal's snapshot names the run). d and the returns
 * as identity_check_step. */
int identity_check_run(const identity_host *h, const char *run_id, const workflow *wf,
                       guard_decision *d);

#endif
