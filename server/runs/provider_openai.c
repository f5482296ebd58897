/*
 * provider_openai.c - the OpenAI-compatible chat-completions shape of a live model call:
 * POST <base>/chat/completions with "Authorization: Bearer <key>", the reply schema as a strict
 * response_format, and the answer in choices[0].message.content.
 *
 * Many providers speak this shape (OpenAI, Groq, vLLM, llama.cpp's server); provider.c does
 * the transfer, the retries, the fallback and the strict check of the answer.
 */
#include "runs/provider_shape.h"

#include "runs/provider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPENAI_SCHEMA_NAME "charter_step_reply"

static char *openai_url(const provider_config *cfg)
{
    size_t n = strlen(cfg->base_url) + sizeof "/chat/completions";
    char *url = malloc(n);
    if (url != NULL) {
        snprintf(url, n, "%s/chat/completions", cfg->base_url);
    }
    return url;
}

static char *openai_key_header(const provider_config *cfg)
{
    size_t n = strlen(cfg->api_key) + sizeof "Authorization: Bearer ";
    char *h = malloc(n);
    if (h != NULL) {
        snprintf(h, n, "Authorization: Bearer %s", cfg->api_key);
    }
    return h;
}

/* The model, a system message with the instruction, a user message with the gated inputs and
 * the strict reply schema (OpenAI structured outputs). */
static json_t *openai_body(const provider_config *cfg, const char *instruction, const char *user,
                           json_t *schema)
{
    return json_pack("{s:s, s:[{s:s, s:s}, {s:s, s:s}], s:{s:s, s:{s:s, s:b, s:O}}}", "model",
                     cfg->model, "messages", "role", "system", "content", instruction, "role",
                     "user", "content", user, "response_format", "type", "json_schema",
                     "json_schema", "name", OPENAI_SCHEMA_NAME, "strict", 1, "schema", schema);
}

static int openai_answer(const provider_config *cfg, json_t *doc, char **text, size_t *len,
                         char *err, size_t errlen)
{
    json_t *choice = json_array_get(json_object_get(doc, "choices"), 0);
    json_t *message = json_object_get(choice, "message");
    if (!json_is_object(message)) {
        return provider_fail(err, errlen, cfg->api_key,
                             "the provider's reply has no choices[0].message");
    }
    const char *refusal = json_string_value(json_object_get(message, "refusal"));
    if (refusal != NULL && *refusal != '\0') {
        return provider_fail(err, errlen, cfg->api_key, "the model refused the request");
    }
    const char *finish = json_string_value(json_object_get(choice, "finish_reason"));
    if (finish != NULL && strcmp(finish, "stop") != 0) {
        return provider_fail(err, errlen, cfg->api_key,
                             "the model's answer is incomplete (finish_reason \"%.32s\")", finish);
    }
    json_t *content = json_object_get(message, "content");
    if (!json_is_string(content)) {
        return provider_fail(err, errlen, cfg->api_key,
                             "the provider's reply has no string choices[0].message.content");
    }
    size_t n = json_string_length(content);
    char *t = malloc(n + 1);
    if (t == NULL) {
        return provider_fail(err, errlen, cfg->api_key, "out of memory");
    }
    memcpy(t, json_string_value(content), n + 1);
    *text = t;
    *len = n;
    return 0;
}

const provider_shape provider_openai_shape = {
    .name = "openai",
    .url = openai_url,
    .key_header = openai_key_header,
    .body = openai_body,
    .answer = openai_answer,
};
