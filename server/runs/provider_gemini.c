/*
 * provider_gemini.c - the Gemini generateContent shape of a live model call:
 * POST <base>/v1beta/models/<model>:generateContent with the key in "x-goog-api-key", the
 * instruction as systemInstruction, the gated inputs as the one user turn, and
 * generationConfig asking for application/json in the step's reply schema.
 *
 * Gemini's responseSchema is an OpenAPI subset: upper-case type names, "format": "enum" beside
 * an enum, no additionalProperties. The step's strict JSON Schema is translated to it here;
 * what the subset cannot say (no extra members) the common strict check in provider.c still
 * enforces on the answer, so an off-schema answer fails this provider all the same.
 */
#include "runs/provider_shape.h"

#include "runs/provider.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *gemini_url(const provider_config *cfg)
{
    size_t n = strlen(cfg->base_url) + strlen(cfg->model) + sizeof "/v1beta/models/" +
               sizeof ":generateContent";
    char *url = malloc(n);
    if (url != NULL) {
        snprintf(url, n, "%s/v1beta/models/%s:generateContent", cfg->base_url, cfg->model);
    }
    return url;
}

static char *gemini_key_header(const provider_config *cfg)
{
    size_t n = strlen(cfg->api_key) + sizeof "x-goog-api-key: ";
    char *h = malloc(n);
    if (h != NULL) {
        snprintf(h, n, "x-goog-api-key: %s", cfg->api_key);
    }
    return h;
}

/* The JSON Schema node s in Gemini's subset: "type" upper-cased, additionalProperties dropped,
 * "format": "enum" beside a string enum, propertyOrdering as the required order (so the
 * answer's members come in the order the instruction lists them). New reference, or NULL when
 * out of memory. */
static json_t *gemini_schema(json_t *s)
{
    json_t *out = json_object();
    if (out == NULL) {
        return NULL;
    }
    bool ok = true;
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v)
    {
        json_t *c = NULL;
        if (strcmp(k, "additionalProperties") == 0) {
            continue;
        } else if (strcmp(k, "type") == 0 && json_is_string(v)) {
            char t[16] = "";
            size_t n = json_string_length(v);
            for (size_t i = 0; i < n && i + 1 < sizeof t; i++) {
                t[i] = (char)toupper((unsigned char)json_string_value(v)[i]);
            }
            c = json_string(t);
        } else if (strcmp(k, "properties") == 0) {
            c = json_object();
            const char *name;
            json_t *p;
            json_object_foreach(v, name, p)
            {
                if (c == NULL || json_object_set_new(c, name, gemini_schema(p)) != 0) {
                    ok = false;
                }
            }
        } else if (strcmp(k, "items") == 0) {
            c = gemini_schema(v);
        } else {
            c = json_deep_copy(v);
        }
        if (!ok || json_object_set_new(out, k, c) != 0) {
            ok = false;
            break;
        }
    }
    if (ok && json_object_get(s, "enum") != NULL) {
        ok = json_object_set_new(out, "format", json_string("enum")) == 0;
    }
    json_t *required = json_object_get(s, "required");
    if (ok && json_object_get(s, "properties") != NULL && required != NULL) {
        ok = json_object_set_new(out, "propertyOrdering", json_deep_copy(required)) == 0;
    }
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* The instruction as systemInstruction, the gated inputs as the one user turn, the reply as
 * application/json in the step's schema. The model is in the URL, not the body. */
static json_t *gemini_body(const provider_config *cfg, const char *instruction, const char *user,
                           json_t *schema)
{
    (void)cfg;
    json_t *g = gemini_schema(schema);
    if (g == NULL) {
        return NULL;
    }
    return json_pack("{s:{s:[{s:s}]}, s:[{s:s, s:[{s:s}]}], s:{s:s, s:o}}", "systemInstruction",
                     "parts", "text", instruction, "contents", "role", "user", "parts", "text",
                     user, "generationConfig", "responseMimeType", "application/json",
                     "responseSchema", g);
}

/* The answer is the text of candidates[0].content.parts, thought parts left out, joined. */
static int gemini_answer(const provider_config *cfg, json_t *doc, char **text, size_t *len,
                         char *err, size_t errlen)
{
    const char *blocked =
        json_string_value(json_object_get(json_object_get(doc, "promptFeedback"), "blockReason"));
    if (blocked != NULL) {
        return provider_fail(err, errlen, cfg->api_key,
                             "the provider blocked the request (blockReason \"%.32s\")", blocked);
    }
    json_t *cand = json_array_get(json_object_get(doc, "candidates"), 0);
    if (!json_is_object(cand)) {
        return provider_fail(err, errlen, cfg->api_key,
                             "the provider's reply has no candidates[0]");
    }
    const char *finish = json_string_value(json_object_get(cand, "finishReason"));
    if (finish != NULL && strcmp(finish, "STOP") != 0) {
        return provider_fail(err, errlen, cfg->api_key,
                             "the model's answer is incomplete (finishReason \"%.32s\")", finish);
    }
    json_t *parts = json_object_get(json_object_get(cand, "content"), "parts");
    size_t total = 0;
    size_t i;
    json_t *part;
    json_array_foreach(parts, i, part)
    {
        if (json_is_true(json_object_get(part, "thought"))) {
            continue;
        }
        json_t *t = json_object_get(part, "text");
        if (!json_is_string(t)) {
            return provider_fail(err, errlen, cfg->api_key,
                                 "candidates[0].content.parts[%zu] is not text", i);
        }
        total += json_string_length(t);
    }
    if (json_array_size(parts) == 0) {
        return provider_fail(err, errlen, cfg->api_key,
                             "the provider's reply has no candidates[0].content.parts");
    }
    char *out = malloc(total + 1);
    if (out == NULL) {
        return provider_fail(err, errlen, cfg->api_key, "out of memory");
    }
    size_t n = 0;
    json_array_foreach(parts, i, part)
    {
        json_t *t = json_object_get(part, "text");
        if (json_is_true(json_object_get(part, "thought"))) {
            continue;
        }
        memcpy(out + n, json_string_value(t), json_string_length(t));
        n += json_string_length(t);
    }
    out[n] = '\0';
    *text = out;
    *len = n;
    return 0;
}

const provider_shape provider_gemini_shape = {
    .name = "gemini",
    .url = gemini_url,
    .key_header = gemini_key_header,
    .body = gemini_body,
    .answer = gemini_answer,
};
