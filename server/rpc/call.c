/*
 * call.c - one RPC's arena and status (see call.h).
 *
 * The arena hands out zeroed memory from blocks of CALL_BLOCK_SIZE bytes (a larger allocation
 * gets a block of its own) and frees them in one pass after packing, which is what lets
 * handlers build responses without tracking ownership field by field. One block per thread is
 * kept from one call to the next, so a call whose response fits in it allocates nothing from
 * the heap for it.
 */
#include "rpc/call.h"

#include <jansson.h>

#include <pthread.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evidence/archive_lookup.h"

#define CALL_BLOCK_SIZE 8192

struct call_block {
    call_block *next;
    size_t size;        /* bytes of data */
    size_t used;        /* bytes of data handed out */
    max_align_t data[]; /* keeps every allocation aligned for any message type */
};

/* The block kept by each thread between calls (freed when the thread ends). */
static pthread_key_t call_spare_key;
static pthread_once_t call_spare_once = PTHREAD_ONCE_INIT;
static bool call_spare_ok;

static void call_spare_init(void)
{
    call_spare_ok = pthread_key_create(&call_spare_key, free) == 0;
}

/* A block of CALL_BLOCK_SIZE bytes: this thread's kept one, else a new one; NULL when memory
 * ran out. */
static call_block *call_block_take(size_t size)
{
    call_block *b = NULL;
    if (size == CALL_BLOCK_SIZE && pthread_once(&call_spare_once, call_spare_init) == 0 &&
        call_spare_ok && (b = pthread_getspecific(call_spare_key)) != NULL)
        (void)pthread_setspecific(call_spare_key, NULL);
    if (b == NULL && (b = malloc(sizeof(call_block) + size)) == NULL)
        return NULL;
    b->size = size;
    b->used = 0;
    return b;
}

/* Frees b, or keeps it for this thread's next call when it is a standard block and none is. */
static void call_block_give(call_block *b)
{
    if (b->size == CALL_BLOCK_SIZE && call_spare_ok &&
        pthread_getspecific(call_spare_key) == NULL && pthread_setspecific(call_spare_key, b) == 0)
        return;
    free(b);
}

void *call_alloc(call *c, size_t size)
{
    const size_t align = alignof(max_align_t);
    if (size > SIZE_MAX - sizeof(call_block) - align) {
        return NULL;
    }
    size_t need = size ? (size + align - 1) / align * align : align;
    call_block *b = c->arena;
    if (b == NULL || b->size - b->used < need) {
        b = call_block_take(need > CALL_BLOCK_SIZE ? need : CALL_BLOCK_SIZE);
        if (b == NULL) {
            return NULL;
        }
        b->next = c->arena;
        c->arena = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += need;
    memset(p, 0, need);
    return p;
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
        call_block_give(b);
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
    gate_env g = {.st = c->st,
                  .wf = c->env->wf,
                  .limits = &c->env->limits,
                  .archive_dir = c->env->archive_dir};
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

int call_fail_run(call *c, int status, const char *run_id)
{
    char name[768];
    /* Where the run went is looked up only for a run not found; a lookup that fails leaves the
     * plain answer, which is true all the same: the database has no such run. */
    if (status == STATUS_ENOTFOUND && run_id != NULL && *run_id != '\0' &&
        archive_name_run(c->st, c->env->archive_dir, run_id, name, sizeof name) == STATUS_OK)
        return call_fail(c, RPC_NOT_FOUND,
                         "run %.128s was archived to %s (charter audit --archive FILE reads it)",
                         run_id, name);
    return call_fail_status_id(c, status, "run", run_id);
}
