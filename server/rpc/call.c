/*
 * call.c - one RPC's arena and status (see call.h).
 *
 * The arena is a list of blocks, one per allocation: responses are small trees of messages and
 * strings, and freeing them in one pass after packing is what lets handlers build responses
 * without tracking ownership field by field.
 */
#include "rpc/call.h"

#include <jansson.h>

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct call_block {
    call_block *next;
    max_align_t data[]; /* keeps every allocation aligned for any message type */
};

void *call_alloc(call *c, size_t size)
{
    if (size > SIZE_MAX - sizeof(call_block)) {
        return NULL;
    }
    call_block *b = calloc(1, sizeof(call_block) + (size ? size : 1));
    if (b == NULL) {
        return NULL;
    }
    b->next = c->arena;
    c->arena = b;
    return b->data;
}

char *call_strdup(call *c, const char *s)
{
    if (s == NULL) {
        return NULL;
    }
    size_t n = strlen(s);
    char *copy = call_alloc(c, n + 1);
    if (copy == NULL) {
        return NULL;
    }
    memcpy(copy, s, n + 1);
    return copy;
}

/* Calls holding a long-wait slot, process-wide. */
static atomic_int call_waiting;

int call_wait_begin(call *c, int want_ms)
{
    if (c->waiting || want_ms <= 0)
        return want_ms > 0 ? want_ms : 0;
    /* A single worker has no half to spare: its calls never wait, so none holds it. */
    int most = (int)(c->env->workers / 2);
    int now = atomic_load(&call_waiting);
    do {
        if (now >= most)
            return 0;
    } while (!atomic_compare_exchange_weak(&call_waiting, &now, now + 1));
    c->waiting = true;
    return want_ms;
}

void call_wait_end(call *c)
{
    if (c->waiting) {
        atomic_fetch_sub(&call_waiting, 1);
        c->waiting = false;
    }
}

void call_release(call *c)
{
    call_wait_end(c);
    call_block *b = c->arena;
    while (b != NULL) {
        call_block *next = b->next;
        free(b);
        b = next;
    }
    c->arena = NULL;
}

int call_fail(call *c, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->message, sizeof c->message, fmt, ap);
    va_end(ap);
    if (n < 0) {
        c->message[0] = '\0';
    }
    c->status = status;
    return status;
}

int call_fail_status(call *c, int status, const char *what)
{
    const char *w = what != NULL ? what : "object";
    const char *detail = (c->st != NULL) ? store_last_error(c->st) : NULL;
    if (detail == NULL) {
        detail = "";
    }
    const char *sep = *detail ? ": " : "";
    switch (status) {
    case STATUS_ENOTFOUND:
        return call_fail(c, RPC_NOT_FOUND, "%s not found", w);
    case STATUS_EUNAVAILABLE:
        if (c->st != NULL && store_deadline_passed(c->st))
            return call_fail(c, RPC_DEADLINE_EXCEEDED,
                             "the call's %d ms deadline passed while serving %s%s%s", c->timeout_ms,
                             w, sep, detail);
        return call_fail(c, RPC_UNAVAILABLE, "database unavailable while serving %s%s%s", w, sep,
                         detail);
    case STATUS_EREFUSED:
        return call_fail(c, RPC_FAILED_PRECONDITION, "%s: refused%s%s", w, sep, detail);
    case STATUS_EEXISTS:
        return call_fail(c, RPC_ALREADY_EXISTS, "%s already exists", w);
    case STATUS_EINVAL:
        return call_fail(c, RPC_INVALID_ARGUMENT, "%s: invalid argument%s%s", w, sep, detail);
    case STATUS_ELIMIT:
        return call_fail(c, RPC_RESOURCE_EXHAUSTED, "%s: size limit reached%s%s", w, sep, detail);
    case STATUS_EDENIED:
        return call_fail(c, RPC_PERMISSION_DENIED, "%s: denied", w);
    case STATUS_ENOMEM:
        return call_fail(c, RPC_INTERNAL, "out of memory while serving %s", w);
    case STATUS_EPROTO:
        return call_fail(c, RPC_INTERNAL, "unexpected database reply for %s%s%s", w, sep, detail);
    case STATUS_ENOTDECISION:
        return call_fail(c, RPC_FAILED_PRECONDITION, "%s records no decision", w);
    case STATUS_EFINGERPRINT:
        return call_fail(c, RPC_FAILED_PRECONDITION, "%s was decided by another evaluator", w);
    case STATUS_ESNAPSHOT:
        return call_fail(c, RPC_FAILED_PRECONDITION, "%s: its snapshot cannot be decoded", w);
    case STATUS_ENOKEY:
        return call_fail(c, RPC_FAILED_PRECONDITION,
                         "INTEGRITY_KEY_REQUIRED: %s needs the integrity key", w);
    case STATUS_ENOTENDED:
        return call_fail(c, RPC_FAILED_PRECONDITION, "%s has not ended", w);
    default:
        return call_fail(c, RPC_INTERNAL, "store error %d for %s", status, w);
    }
}

int call_fail_statusf(call *c, int status, const char *fmt, ...)
{
    int code = call_fail_status(c, status, NULL);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(c->message, sizeof c->message, fmt, ap);
    va_end(ap);
    if (n < 0) {
        c->message[0] = '\0';
    }
    return code;
}

gate_env call_gate_env(const call *c)
{
    gate_env g = {.st = c->st, .wf = c->env->wf, .limits = &c->env->limits};
    return g;
}

int call_require_id(call *c, const char *field, const char *value)
{
    if (ids_graph_ok(value))
        return RPC_OK;
    return call_fail(c, RPC_INVALID_ARGUMENT, "%s: 1 to 128 characters of [A-Za-z0-9._-]", field);
}

int call_require_utf8(call *c, const char *field, const char *value)
{
    if (value == NULL)
        return RPC_OK;
    /* jansson refuses to make a string of invalid UTF-8; that is the check. */
    json_t *probe = json_string(value);
    if (probe != NULL) {
        json_decref(probe);
        return RPC_OK;
    }
    return call_fail(c, RPC_INVALID_ARGUMENT, "%s: not valid UTF-8", field);
}

int call_fail_status_id(call *c, int status, const char *what, const char *id)
{
    char named[192];
    if (id == NULL || id[0] == '\0')
        return call_fail_status(c, status, what);
    snprintf(named, sizeof named, "%s %.128s", what != NULL ? what : "object", id);
    return call_fail_status(c, status, named);
}
