/*
 * provider_shape.h - what one live model API supplies to the common provider (provider.c): the
 * URL of its call, the header that carries its key, its request body and where its answer
 * text lies in its reply.
 *
 * provider.c keeps everything the APIs share (configuration, the fallback order, the transfer,
 * the one wait on 429/503, cancellation, the strict check of the answer), so each API's file
 * (provider_openai.c, provider_gemini.c) holds only what differs between them.
 */
#ifndef CHARTER_PROVIDER_SHAPE_H
#define CHARTER_PROVIDER_SHAPE_H

#include <jansson.h>
#include <stddef.h>

/* provider.h's configuration; named here so this header does not include provider.h, which
 * the common provider includes beside it. */
struct provider_config;

#if defined(__GNUC__)
#define PROVIDER_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PROVIDER_PRINTF(a, b)
#endif

typedef struct {
    const char *name; /* "openai", "gemini" */
    /* The URL of cfg's call, malloc'd; NULL when out of memory. */
    char *(*url)(const struct provider_config *cfg);
    /* The header line that carries cfg's key ("Name: value"), malloc'd; NULL when out of
     * memory. The caller wipes it before freeing. */
    char *(*key_header)(const struct provider_config *cfg);
    /* The request body: the fixed instruction, the user text ({"inputs": [...]} as JSON) and
     * the step's strict reply schema (JSON Schema, borrowed). New reference, or NULL when out
     * of memory. */
    json_t *(*body)(const struct provider_config *cfg, const char *instruction, const char *user,
                    json_t *schema);
    /* The model's answer text out of doc, a 200 reply parsed as JSON: 0 with *text malloc'd
     * (the caller frees it) and *len its length in bytes, or -1 with a reason (provider_fail)
     * that quotes none of the model's text. */
    int (*answer)(const struct provider_config *cfg, json_t *doc, char **text, size_t *len,
                  char *err, size_t errlen);
} provider_shape;

extern const provider_shape provider_openai_shape;
extern const provider_shape provider_gemini_shape;

/* Writes "live model: <reason>" into err as one line, control characters made spaces, every
 * occurrence of key replaced by "[redacted]" and no UTF-8 sequence cut short. Returns -1. */
int provider_fail(char *err, size_t errlen, const char *key, const char *fmt, ...)
    PROVIDER_PRINTF(4, 5);

#endif
