/*
 * provider.h - the live model providers: an OpenAI-compatible chat-completions client and a
 * Gemini generateContent client, asked in a configured fallback order.
 *
 * A live model gets exactly what the scripted one gets: a fixed instruction made from the
 * step's definition and the contents of the artifacts that passed the input gate, each marked
 * as untrusted data. Its answer must match a strict JSON schema built from the step; anything
 * else (a missing, extra or ill-typed field, a value outside a public field's allowed values,
 * a non-200 status, a timeout, an over-size or malformed reply) fails that provider, and the
 * same gated request goes to the next provider of the order; when none is left it fails
 * closed. docs/models.md describes the environment, the request and the reply schema.
 */
#ifndef CHARTER_PROVIDER_H
#define CHARTER_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>

#include "runs/model.h"

#define PROVIDER_DEFAULT_TIMEOUT_MS 30000L
#define PROVIDER_MAX_TIMEOUT_MS 600000L
#define PROVIDER_MAX_REPLY_BYTES (1024 * 1024) /* a larger HTTP body aborts the transfer */
#define PROVIDER_MAX_RETRY_WAIT_S 10    /* longest Retry-After waited for; longer: fail at once */
#define PROVIDER_DEFAULT_RETRY_WAIT_S 2 /* wait on 429/503 without a usable Retry-After */
#define PROVIDER_EXCERPT_MAX 200        /* longest provider-written text quoted in a reason */
#define PROVIDER_MAX_CHAIN 2            /* providers in a fallback order: openai, gemini */
#define PROVIDER_GEMINI_DEFAULT_BASE_URL "https://generativelanguage.googleapis.com"

/* The one reason live mode gives when no provider is configured. */
#define PROVIDER_NOT_CONFIGURED                                                                    \
    "live models are not configured (set CHARTER_OPENAI_BASE_URL, CHARTER_OPENAI_API_KEY, "        \
    "CHARTER_OPENAI_MODEL, or CHARTER_GEMINI_API_KEY, CHARTER_GEMINI_MODEL)"

/* Which API a provider speaks. Zero is the OpenAI-compatible one. */
typedef enum {
    PROVIDER_OPENAI = 0, /* POST <base>/chat/completions, "Authorization: Bearer <key>" */
    PROVIDER_GEMINI = 1, /* POST <base>/v1beta/models/<model>:generateContent, x-goog-api-key */
} provider_kind;

/* Where the live model is and how long to wait for it. Strings are owned by the config. */
typedef struct provider_config {
    char *base_url;  /* e.g. "https://api.groq.com/openai/v1"; the API's path is appended */
    char *api_key;   /* sent only in the API's key header; never logged */
    char *model;     /* the provider's model name */
    long timeout_ms; /* per HTTP attempt, connection included, in milliseconds */
    provider_kind kind;
} provider_config;

/* "openai" or "gemini": the name CHARTER_PROVIDERS and the run's events use. */
const char *provider_kind_name(provider_kind kind);

/* Reads CHARTER_OPENAI_BASE_URL, CHARTER_OPENAI_API_KEY, CHARTER_OPENAI_MODEL and
 * CHARTER_MODEL_TIMEOUT_MS (milliseconds, 1..PROVIDER_MAX_TIMEOUT_MS, default
 * PROVIDER_DEFAULT_TIMEOUT_MS) into *out. An empty variable counts as unset.
 * Returns 0 with *out filled (free with provider_config_free), 1 when none of the three
 * provider variables is set (*out zeroed: live models are simply not configured), or -1 with
 * a one-line reason in err when the configuration is partial or malformed (a base URL that is
 * not http:// or https://, a timeout that is not a whole number in range). The key never
 * appears in err. */
int provider_config_from_env(provider_config *out, char *err, size_t errlen);

/* Reads CHARTER_GEMINI_API_KEY, CHARTER_GEMINI_MODEL, CHARTER_GEMINI_BASE_URL (optional,
 * default PROVIDER_GEMINI_DEFAULT_BASE_URL; tests point it at a local server) and
 * CHARTER_MODEL_TIMEOUT_MS into *out (kind PROVIDER_GEMINI). Same returns as
 * provider_config_from_env: 0 filled, 1 when neither the key nor the model is set, -1 with a
 * reason (one of the two missing, a malformed URL, key or timeout). */
int provider_gemini_config_from_env(provider_config *out, char *err, size_t errlen);

/* Frees the strings of c (the key is wiped first) and zeroes it; NULL is accepted. */
void provider_config_free(provider_config *c);

/* Process start-up, before any thread that may ask a live model exists: initialises libcurl
 * once (curl_global_init is not thread-safe) and reads the environment once
 * (provider_config_from_env, provider_gemini_config_from_env) into the process-wide fallback
 * order provider_ask uses. The order is CHARTER_PROVIDERS, a comma-separated list of provider
 * names ("openai,gemini", "gemini"), each configured and named once; unset, it is every
 * configured provider, openai first. Returns 0 (live models configured or simply not
 * configured) or -1 with a one-line reason in err when libcurl cannot be initialised, a
 * configuration is partial or malformed, or CHARTER_PROVIDERS names an unknown, unconfigured
 * or repeated provider; charterd should refuse to start then. Calls after the first return the
 * first call's result and change nothing. */
int provider_global_init(char *err, size_t errlen);

/* Process exit, after every thread that may ask a live model has ended: frees the process-wide
 * configuration and calls curl_global_cleanup. Safe to call without provider_global_init. */
void provider_global_cleanup(void);

/* True when provider_global_init succeeded and the order holds at least one provider. */
bool provider_configured(void);

/* Writes the process-wide order into names (at most n names, borrowed static strings) and
 * returns how many there are (0 when live models are not configured). */
size_t provider_order(const char **names, size_t n);

/* Asks the process-wide fallback order (provider_global_init) for the step's reply: the same
 * contract as provider_ask_chain; -1 "live models are not configured ..." when
 * provider_configured() is false. */
int provider_ask(const model_request *req, model_reply *out, char *err, size_t errlen);

/* Asks chain[0], then, when it fails, the same gated request of chain[1], and so on. Every
 * failure ends that provider's turn except an abort (req->abort answered nonzero: the run is
 * cancelled or out of budget), which ends the whole request. Each provider that failed before
 * the answer, or every one when none answered, is appended to req->fallbacks (when not NULL)
 * as {"provider", "model", "reason"}. Returns 0 with *out filled (out->provider and
 * out->model name the one that answered), or -1 with *out zeroed and a reason in err: the
 * single provider's own reason, or "live model: every provider failed (openai: ...; gemini:
 * ...)" with each reason cut to fit. n is 1..PROVIDER_MAX_CHAIN. */
int provider_ask_chain(const provider_config *chain, size_t n, const model_request *req,
                       model_reply *out, char *err, size_t errlen);

/* Asks the live model described by cfg for the step's reply: one POST to the API's URL
 * (cfg->kind), TLS verified, no redirects followed, each attempt bounded by cfg->timeout_ms.
 * On HTTP 429 or 503 it waits once (the Retry-After header in seconds or as an HTTP date;
 * PROVIDER_DEFAULT_RETRY_WAIT_S without one) and tries once more. A wait longer than
 * PROVIDER_MAX_RETRY_WAIT_S, or than req->deadline_ms leaves, is not taken: the call fails at
 * once ("... with Retry-After N s, longer than ..." / "..., beyond the run's deadline"),
 * because retrying earlier than the provider asked would not honour it. The wait asks
 * req->abort every 100 ms as a transfer does. Blocks the calling thread meanwhile; safe to
 * call from many threads at once (one curl handle per call). Returns 0 with *out filled
 * (caller frees with model_reply_free; out->model is cfg->model, out->provider its kind's
 * name), or -1 with *out zeroed and a one-line reason in err that names the fault but quotes
 * none of the model's text and never the key (a provider's own error message is quoted up to
 * PROVIDER_EXCERPT_MAX characters, key removed). Requires provider_global_init (or
 * curl_global_init) to have run. */
int provider_ask_with(const provider_config *cfg, const model_request *req, model_reply *out,
                      char *err, size_t errlen);

#endif
