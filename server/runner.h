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
#include <stdbool.h>

#include "gate.h"

/* Creates a run of the workflow (task NULL: the workflow's) and, for mode "scripted", drives it
 * to completed, blocked or error. mode "external" only creates it. Returns STATUS_OK and the new
 * run's id in run_id (65 bytes), STATUS_EINVAL for an unknown mode, STATUS_EUNAVAILABLE when the
 * run could not be created. A failure after creation is recorded in the run (status error). */
int runner_start(const gate_env *g, const char *task, const char *mode, char run_id[65]);

/* What a recovery did. */
typedef struct {
    guard_decision decision; /* of the public delivery */
    bool acknowledged;       /* the run already had its delivery; nothing new was sent */
} runner_recovery;

/* Recovers a blocked (or interrupted) run: claims it once, opens a fresh recovery-step context,
 * gathers the run's artifacts whose ancestry passes the step's input gate, asks the model,
 * renders the public output and delivers it. The run ends completed on ALLOW, blocked on DENY,
 * error on UNKNOWN. A run already completed is acknowledged. STATUS_EREFUSED when the run is in
 * a state that cannot be recovered (running, recovering, created), STATUS_ENOTFOUND. */
int runner_recover(const gate_env *g, const char *run_id, runner_recovery *out);

#endif
