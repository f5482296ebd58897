/*
 * deliver_cache.c - the per-thread table of the immutable facts of recent sends (see
 * deliver_cache.h). A thread's table is made on its first use and freed when the thread
 * ends (a pthread key's destructor), so worker threads and test threads alike leave nothing.
 */
#include "gates/deliver_cache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/facts.h"

typedef struct {
    char *key; /* "<graph>\n<context>\n<payload>\n<recipient>\n<tool>", NULL when free */
    uint32_t hash;
    deliver_cached e;
} cache_slot;

typedef struct {
    cache_slot slots[DELIVER_CACHE_SLOTS];
    size_t next; /* the slot a new entry takes when none is free or of the same send */
} cache_table;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static bool cache_key_ok;

void deliver_cached_free(deliver_cached *e)
{
    facts_context_free(&e->ctx);
    facts_summary_free(&e->sum);
    facts_chain_free(&e->chain);
    free(e->content);
    free(e->facts);
    free(e->cached_rest);
    free(e->doc_rest);
    memset(e, 0, sizeof *e);
}

static void cache_table_free(void *arg)
{
    cache_table *t = arg;
    for (size_t i = 0; t != NULL && i < DELIVER_CACHE_SLOTS; i++) {
        free(t->slots[i].key);
        deliver_cached_free(&t->slots[i].e);
    }
    free(t);
}

static void cache_init(void)
{
    cache_key_ok = pthread_key_create(&cache_key, cache_table_free) == 0;
}

/* This thread's table, made on first use; NULL when it cannot be. */
static cache_table *cache_table_of(bool create)
{
    if (pthread_once(&cache_once, cache_init) != 0 || !cache_key_ok)
        return NULL;
    cache_table *t = pthread_getspecific(cache_key);
    if (t == NULL && create) {
        t = calloc(1, sizeof *t);
        if (t != NULL && pthread_setspecific(cache_key, t) != 0) {
            free(t);
            t = NULL;
        }
    }
    return t;
}

/* The send's key (malloc'd) and its FNV-1a hash; NULL when memory ran out. */
static char *cache_key_of(const char *graph, const char *context_id, const char *payload_id,
                          const char *recipient, const char *tool, uint32_t *hash)
{
    size_t n = strlen(graph) + strlen(context_id) + strlen(payload_id) + strlen(recipient) +
               strlen(tool) + 5;
    char *key = malloc(n);
    if (key == NULL)
        return NULL;
    snprintf(key, n, "%s\n%s\n%s\n%s\n%s", graph, context_id, payload_id, recipient, tool);
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 16777619u;
    *hash = h;
    return key;
}

static cache_slot *cache_slot_of(cache_table *t, const char *key, uint32_t hash)
{
    for (size_t i = 0; t != NULL && i < DELIVER_CACHE_SLOTS; i++)
        if (t->slots[i].key != NULL && t->slots[i].hash == hash &&
            strcmp(t->slots[i].key, key) == 0)
            return &t->slots[i];
    return NULL;
}

const deliver_cached *deliver_cache_find(const char *graph, const char *context_id,
                                         const char *payload_id, const char *recipient,
                                         const char *tool)
{
    cache_table *t = cache_table_of(false);
    if (t == NULL)
        return NULL;
    uint32_t hash;
    char *key = cache_key_of(graph, context_id, payload_id, recipient, tool, &hash);
    cache_slot *s = key != NULL ? cache_slot_of(t, key, hash) : NULL;
    free(key);
    return s != NULL ? &s->e : NULL;
}

void deliver_cache_put(const char *graph, const char *context_id, const char *payload_id,
                       const char *recipient, const char *tool, deliver_cached *e)
{
    cache_table *t = cache_table_of(true);
    uint32_t hash;
    char *key =
        t != NULL ? cache_key_of(graph, context_id, payload_id, recipient, tool, &hash) : NULL;
    if (key == NULL) {
        deliver_cached_free(e);
        return;
    }
    cache_slot *s = cache_slot_of(t, key, hash);
    if (s == NULL) {
        s = &t->slots[t->next];
        t->next = (t->next + 1) % DELIVER_CACHE_SLOTS;
    }
    free(s->key);
    deliver_cached_free(&s->e);
    s->key = key;
    s->hash = hash;
    s->e = *e;
    memset(e, 0, sizeof *e);
}

void deliver_cache_drop(const char *graph, const char *context_id, const char *payload_id,
                        const char *recipient, const char *tool)
{
    cache_table *t = cache_table_of(false);
    uint32_t hash;
    char *key =
        t != NULL ? cache_key_of(graph, context_id, payload_id, recipient, tool, &hash) : NULL;
    cache_slot *s = key != NULL ? cache_slot_of(t, key, hash) : NULL;
    free(key);
    if (s == NULL)
        return;
    free(s->key);
    s->key = NULL;
    deliver_cached_free(&s->e);
}
