/*
 * runner.h - the built-in workflow executor.
 *
 * Drives a workflow's steps in order through the gate operations of gate.h (the same ones a
 * host uses over the API), asks the model for each step from gated inputs only, and stops the
 * run as "blocked" when a handoff is refused: the next step's model is never called. Recovery
 * claims a blocked run once (an atomic status transition) and re-runs the recovery step from
 * the run's artifacts whose ancestry fits it.
 */
#ifndef CHARTER_RUNNER_H
#define CHARTER_RUNNER_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gates/gate.h"

/* Creates a run of the workflow (task NULL: the workflow's) and, for mode "scripted", drives it
 * to completed, blocked or error. mode "external" only creates it. Returns STATUS_OK and the new
 * run's id in run_id (65 bytes), STATUS_EINVAL for an unknown mode, STATUS_EUNAVAILABLE when the
 * run could not be created. A failure after creation is recorded in the run (status error). */
int runner_start(const gate_env *g, const char *task, const char *mode, char run_id[65]);

/* Creates a run like runner_start and, for scripted and live runs, queues it for the executor
 * threads (status queued) with its budget (NULL or {"max_steps":n,...}, validated by the
 * caller: names of runner budgets, values >= 1). Returns at once: STATUS_OK and run_id (65
 * bytes), STATUS_EUNAVAILABLE, STATUS_ENOMEM. */
int runner_submit(const gate_env *g, const char *task, const char *mode, const json_t *budget,
                  char run_id[65]);

/* The lease an executor holds on a run it claimed (charter_claim_run). */
typedef struct {
    const char *owner;           /* the executor's lease owner id */
    int lease_ms;                /* each renewal holds the run this long on the database's clock */
    const atomic_bool *stopping; /* NULL, or set when charterd stops: the run ends interrupted */
} runner_lease;

/* Executes a claimed run: queued -> running, then every step as runner_start does, renewing
 * the lease with the run's counters before each step, model request and delivery and every
 * lease_ms/3 during a model request. A send held for a human approval (deliver.h) is waited
 * for on this thread (status pending_approval, the lease renewed, the approval read every
 * 200 ms), then sent again under its invocation ID: approved, acknowledged; otherwise refused. A
 * cancel request ends the run cancelled, an exhausted budget budget_exhausted (each naming the
 * step; the model request in flight is aborted); a lost lease stops it without a word (whoever
 * reaped the lease marks it interrupted). The lease is released at the end. g->wf must be the run's
 * pinned workflow. Returns STATUS_OK, STATUS_EREFUSED (the run was no longer queued: cancelled
 * meanwhile), or a store status. */
int runner_execute(const gate_env *g, const char *run_id, const runner_lease *lease);

/* What a recovery did, or that it was queued. */
typedef struct {
    guard_decision decision; /* of the public delivery (not set while queued) */
    bool acknowledged;       /* the run already had its delivery; nothing new was sent */
    bool queued;             /* runner_request_recovery: claimed and queued for an executor */
    uint64_t claim_seq;      /* the seq of the claim's status_changed event (0: none) */
    char status[32];         /* with STATUS_EREFUSED: the run's status then ("" if not read) */
} runner_recovery;

/* Recovers a blocked, interrupted or error run on the caller's thread, without a lease:
 * claims it once, opens a fresh recovery-step context, gathers the run's artifacts whose
 * ancestry passes the step's input gate, asks the model, renders the public output and
 * delivers it. The run ends completed on ALLOW, blocked on DENY, error on UNKNOWN. A run
 * already completed is acknowledged. STATUS_EREFUSED when the run is in a state that cannot be
 * recovered (running, recovering, created) or its workflow has no recovery step,
 * STATUS_ENOTFOUND. out->decision is freed with guard_decision_free. */
int runner_recover(const gate_env *g, const char *run_id, runner_recovery *out);

/* What RecoverRun does: claims a blocked, interrupted or error run for recovery and queues it
 * for the executor threads in one database call (status recovering, out->queued,
 * out->claim_seq); returns at once. A completed run is acknowledged (out->acknowledged,
 * decision ALLOW, nothing queued). Same errors as runner_recover. */
int runner_request_recovery(const gate_env *g, const char *run_id, runner_recovery *out);

/* Executes a recovery an executor claimed (charter_claim_run answered "recovering") under
 * lease, as runner_recover does once the run is claimed: the lease is renewed before the
 * model request and the delivery, every lease_ms/3 during the model request and while a send
 * waits for a human approval; a cancel request ends the run cancelled, charterd stopping
 * interrupted; a lost lease stops it without a word (the reaper marks it interrupted). A
 * recovery is outside the run's budgets and leaves its counters as they are. g->wf must be the
 * run's pinned workflow. The lease is released at the end. Returns STATUS_OK. */
int runner_execute_recovery(const gate_env *g, const char *run_id, const runner_lease *lease);

#endif
