/*
 * model.c - a step's model request and reply, and the scripted model that answers it.
 *
 * "scripted" is the deterministic adversary of the reference workflow: it returns the reply
 * written in the step's script, whatever the inputs say, so a run always follows the injection
 * and the gates, not the model, are what stop it. The reply is copied out of the workflow, so it
 * stays valid after the workflow is freed. A live model (provider.c: OpenAI-compatible, Gemini)
 * answers the same request in the same reply; ask.c chooses which one a run's mode names.
 */
#include "runs/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define MODEL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MODEL_PRINTF(a, b)
#endif

static int model_fail(char *err, size_t errlen, const char *fmt, ...) MODEL_PRINTF(3, 4);

/* Writes one line into err (control characters become spaces). Returns -1. */
static int model_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0) {
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    for (char *p = err; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            *p = ' ';
        }
    }
    return -1;
}

void model_reply_free(model_reply *r)
{
    if (r == NULL) {
        return;
    }
    free(r->content);
    free(r->model);
    free(r->provider);
    json_decref(r->fields);
    for (size_t i = 0; i < r->handoff.n; i++) {
        free(r->handoff.items[i]);
    }
    free(r->handoff.items);
    memset(r, 0, sizeof *r);
}

int model_scripted(const model_request *req, model_reply *out, char *err, size_t errlen)
{
    const workflow_step *step = req->step;
    const json_t *script = step->script;
    if (script == NULL) {
        return model_fail(err, errlen, "step %s has no scripted reply", step->cap.step);
    }
    const char *content = json_string_value(json_object_get(script, "content"));
    if (content == NULL) {
        return model_fail(err, errlen, "the scripted reply of step %s has no content",
                          step->cap.step);
    }
    out->content = strdup(content);
    if (out->content == NULL) {
        goto nomem;
    }
    const json_t *fields = json_object_get(script, "fields");
    if (fields != NULL) {
        out->fields = json_deep_copy(fields);
        if (out->fields == NULL) {
            goto nomem;
        }
    }
    const json_t *handoff = json_object_get(script, "handoff");
    size_t n = json_array_size(handoff);
    if (n > 0) {
        out->handoff.items = calloc(n, sizeof *out->handoff.items);
        if (out->handoff.items == NULL) {
            goto nomem;
        }
        for (size_t i = 0; i < n; i++) {
            const char *h = json_string_value(json_array_get(handoff, i));
            if (h == NULL) {
                model_reply_free(out);
                return model_fail(err, errlen, "the scripted handoff of step %s is malformed",
                                  step->cap.step);
            }
            out->handoff.items[i] = strdup(h);
            if (out->handoff.items[i] == NULL) {
                goto nomem;
            }
            out->handoff.n = i + 1;
        }
    }
    return 0;
nomem:
    model_reply_free(out);
    return model_fail(err, errlen, "out of memory");
}
