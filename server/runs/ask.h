/*
 * ask.h - which model answers a step's model request: the scripted one or the live providers.
 *
 * The run's mode names it. Kept apart from model.h, which the live providers include for the
 * request and reply they share, so the two do not include each other.
 */
#ifndef CHARTER_ASK_H
#define CHARTER_ASK_H

#include <stddef.h>

#include "runs/model.h"

/* Asks the model named mode for the step's reply: "scripted" (the step's script) or "live"
 * (the providers configured by provider_global_init, in their fallback order; blocks for up to
 * two HTTP attempts of CHARTER_MODEL_TIMEOUT_MS each plus one wait of at most 10 s on 429/503,
 * per provider).
 * Returns 0, or -1 with a one-line reason in err (unknown mode, the step has no script, live
 * models are not configured, the live reply failed the step's schema or the HTTP call failed).
 * *out is owned by the caller (model_reply_free) and zeroed on failure. */
int ask_model(const char *mode, const model_request *req, model_reply *out, char *err,
              size_t errlen);

#endif
