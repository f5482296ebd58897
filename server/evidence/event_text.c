/*
 * event_text.c - the canonical text of an event (event_text.h).
 */
#include "evidence/event_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

char *evlog_json_text(const json_t *v)
{
    if (v == NULL)
        return NULL;
    return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17) | JSON_ENCODE_ANY);
}

#define EVLOG_FORMAT "charter-event-2"

int evlog_event_text(const evlog_fields *f, char **text, size_t *len)
{
    const char *names[11] = {"run_id",  "seq",    "ts",       "kind",      "outcome", "codes",
                             "witness", "detail", "snapshot", "evaluator", "prev"};
    const char *values[11] = {f->run_id,   f->seq,       f->ts,      f->kind,
                              f->outcome,  f->codes,     f->witness, f->detail,
                              f->snapshot, f->evaluator, f->prev};
    size_t lens[11];
    size_t total = strlen(EVLOG_FORMAT) + 1;
    for (int i = 0; i < 11; i++) {
        if (values[i] == NULL)
            values[i] = "";
        lens[i] = strlen(values[i]);
        total += strlen(names[i]) + 1 + 21 + 1 + lens[i] + 1;
    }
    char *buf = malloc(total + 1);
    if (buf == NULL)
        return STATUS_ENOMEM;
    size_t off = (size_t)snprintf(buf, total + 1, "%s\n", EVLOG_FORMAT);
    for (int i = 0; i < 11; i++) {
        off += (size_t)snprintf(buf + off, total + 1 - off, "%s=%zu:", names[i], lens[i]);
        memcpy(buf + off, values[i], lens[i]);
        off += lens[i];
        buf[off++] = '\n';
    }
    buf[off] = '\0';
    *text = buf;
    *len = off;
    return STATUS_OK;
}
