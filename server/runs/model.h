/*
 * model.h - what answers a step's model request.
 *
 * A model request is built by the host only from artifacts that passed the input gate; the
 * model never chooses the actor, tools, recipients, resources or grant. The scripted model is
 * the deterministic adversary of the reference workflow: it answers each step with the reply
 * scripted in the workflow definition and always follows the injection. A live model
 * (provider.h) gets the same gated request and must answer in the step's strict schema; ask.h
 * chooses between them.
 */
#ifndef CHARTER_MODEL_H
#define CHARTER_MODEL_H

#include <jansson.h>

#include "policy/workflow.h"

/* One model request: the step and the gated inputs' contents, in order. */
typedef struct {
    const workflow_step *step;
    const char *const *inputs; /* contents of the gated artifacts */
    size_t n_inputs;
    /* Optional: asked about every 100 ms while a live request is in flight; nonzero aborts the
     * HTTP transfer (the request fails with "aborted: " and the reason the hook wrote, at most
     * 128 bytes, in its buffer). NULL: never aborted. */
    int (*abort)(void *arg, char reason[128]);
    void *abort_arg;
    /* Optional: milliseconds left before the run's deadline (its wall-clock budget) when the
     * request is made; a live provider does not start a Retry-After wait that would outlast
     * it. 0: no deadline. */
    long long deadline_ms;
    /* Optional, borrowed: a JSON array the live providers append one {"provider", "model",
     * "reason"} to for each provider that failed (and handed the request to the next). */
    json_t *fallbacks;
} model_request;

/* A model's reply. content is free text (never published as is); fields are the structured
 * answer public rendering uses; handoff names what the step hands to the next step:
 * "output" (its own output) and/or "inputs" (the artifacts it was given). */
typedef struct {
    char *content;
    json_t *fields; /* may be NULL */
    guard_strs handoff;
    char *model;    /* the live model that answered (CHARTER_*_MODEL); NULL for "scripted" */
    char *provider; /* the live provider that answered ("openai", "gemini"); NULL for "scripted" */
} model_reply;

/* The scripted reply of the step: the reply its script holds (validated by workflow_load_*:
 * content a string, fields an object of strings, handoff a list of "output"/"inputs"), whatever
 * the inputs say. Returns 0, or -1 with a one-line reason in err (the step has no script, out of
 * memory). *out is owned by the caller (model_reply_free) and zeroed on failure. */
int model_scripted(const model_request *req, model_reply *out, char *err, size_t errlen);
/* Frees what r holds and zeroes it; NULL is accepted. */
void model_reply_free(model_reply *r);

#endif
