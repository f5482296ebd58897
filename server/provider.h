/*
 * provider.h - the live model provider: an OpenAI-compatible chat-completions client.
 *
 * A live model gets exactly what the scripted one gets: a fixed instruction made from the
 * step's definition and the contents of the artifacts that passed the input gate, each marked
 * as untrusted data. Its answer must match a strict JSON schema built from the step; anything
 * else (a missing, extra or ill-typed field, a value outside a public field's allowed values,
 * a non-200 status, a timeout, an over-size or malformed reply) fails closed. docs/models.md
 * describes the environment, the request and the reply schema.
 */
#ifndef CHARTER_PROVIDER_H
#define CHARTER_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

#define PROVIDER_DEFAULT_TIMEOUT_MS 30000L
#define PROVIDER_MAX_TIMEOUT_MS 600000L
#define PROVIDER_MAX_REPLY_BYTES (1024 * 1024) /* a larger HTTP body aborts the transfer */
#define PROVIDER_MAX_RETRY_WAIT_S 10           /* longest Retry-After honoured on 429/503 */
#define PROVIDER_DEFAULT_RETRY_WAIT_S 2        /* wait on 429/503 without a usable Retry-After */
#define PROVIDER_EXCERPT_MAX 200 /* longest provider-written text quoted in a reason */

/* Where the live model is and how long to wait for it. Strings are owned by the config. */
typedef struct {
    char *base_url;  /* e.g. "https://api.groq.com/openai/v1"; "/chat/completions" is appended */
    char *api_key;   /* sent only as "Authorization: Bearer <key>"; never logged */
    char *model;     /* the provider's model name */
    long timeout_ms; /* per HTTP attempt, connection included, in milliseconds */
} provider_config;

/* Reads CHARTER_OPENAI_BASE_URL, CHARTER_OPENAI_API_KEY, CHARTER_OPENAI_MODEL and
 * CHARTER_MODEL_TIMEOUT_MS (milliseconds, 1..PROVIDER_MAX_TIMEOUT_MS, default
 * PROVIDER_DEFAULT_TIMEOUT_MS) into *out. An empty variable counts as unset.
 * Returns 0 with *out filled (free with provider_config_free), 1 when none of the three
 * provider variables is set (*out zeroed: live models are simply not configured), or -1 with
 * a one-line reason in err when the configuration is partial or malformed (a base URL that is
 * not http:// or https://, a timeout that is not a whole number in range). The key never
 * appears in err. */
int provider_config_from_env(provider_config *out, char *err, size_t errlen);

/* Frees the strings of c (the key is wiped first) and zeroes it; NULL is accepted. */
void provider_config_free(provider_config *c);

/* Process start-up, before any thread that may ask a live model exists: initialises libcurl
 * once (curl_global_init is not thread-safe) and reads the environment once
 * (provider_config_from_env) into the process-wide configuration provider_ask uses. Returns 0
 * (live models configured or simply not configured) or -1 with a one-line reason in err when
 * libcurl cannot be initialised or the configuration is partial or malformed; charterd should
 * refuse to start then. Calls after the first return the first call's result and change
 * nothing. */
int provider_global_init(char *err, size_t errlen);

/* Process exit, after every thread that may ask a live model has ended: frees the process-wide
 * configuration and calls curl_global_cleanup. Safe to call without provider_global_init. */
void provider_global_cleanup(void);

/* True when provider_global_init succeeded and all three provider variables were set. */
bool provider_configured(void);

/* Asks the process-wide live model (provider_global_init) for the step's reply. Same contract
 * as provider_ask_with; -1 "live models are not configured ..." when provider_configured() is
 * false. */
int provider_ask(const model_request *req, model_reply *out, char *err, size_t errlen);

/* Asks the live model described by cfg for the step's reply: one POST to
 * <base_url>/chat/completions, TLS verified, no redirects followed, each attempt bounded by
 * cfg->timeout_ms. On HTTP 429 or 503 it waits once (the Retry-After header in seconds or as
 * an HTTP date, at most PROVIDER_MAX_RETRY_WAIT_S; PROVIDER_DEFAULT_RETRY_WAIT_S without one)
 * and tries once more. Blocks the calling thread meanwhile; safe to call from many threads at
 * once (one curl handle per call). Returns 0 with *out filled (caller frees with
 * model_reply_free; out->model is cfg->model), or -1 with *out zeroed and a one-line reason in
 * err that names the fault but quotes none of the model's text and never the key (a
 * provider's own error message is quoted up to PROVIDER_EXCERPT_MAX characters, key removed).
 * Requires provider_global_init (or curl_global_init) to have run. */
int provider_ask_with(const provider_config *cfg, const model_request *req, model_reply *out,
                      char *err, size_t errlen);

#endif
