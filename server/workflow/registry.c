/*
 * registry.c - the process-wide table of loaded workflow versions and narrowed step
 * capabilities (see registry.h).
 *
 * Loading happens outside the lock (a graph query and a parse can take a while); the lock only
 * guards the lists. Two workers that load the same version at once both parse it, and the one
 * that inserts second frees its copy and takes the first: what a caller gets is always the one
 * kept entry, so pointers compare equal within a process.
 */
#include "workflow/registry.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A narrowed step capability: every text borrowed from the base step except the lists. */
typedef struct registry_narrow {
    struct registry_narrow *next;
    char *key;
    workflow_step step;
} registry_narrow;

#define REGISTRY_BUCKETS 4096

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static workflow **registry_wfs; /* every loaded version, owned */
static size_t registry_n_wfs;
static size_t registry_cap_wfs;
static registry_narrow *registry_buckets[REGISTRY_BUCKETS];
static size_t registry_n_narrowed;

static void registry_err(char *err, size_t errlen, const char *fmt, const char *arg)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, fmt, arg != NULL ? arg : "");
}

bool registry_is_version(const char *s)
{
    if (s == NULL || strlen(s) != 64)
        return false;
    for (const char *p = s; *p != '\0'; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* The kept workflow of version, or NULL. Call with the lock held. */
static const workflow *registry_find_locked(const char *version)
{
    for (size_t i = 0; i < registry_n_wfs; i++)
        if (strcmp(registry_wfs[i]->version, version) == 0)
            return registry_wfs[i];
    return NULL;
}

static const workflow *registry_find(const char *version)
{
    pthread_mutex_lock(&registry_lock);
    const workflow *wf = registry_find_locked(version);
    pthread_mutex_unlock(&registry_lock);
    return wf;
}

/* Keeps wf (taking it) unless its version is kept already, in which case wf is freed. *out is
 * the kept one. Returns STATUS_OK or STATUS_ENOMEM (wf freed). */
static int registry_keep(workflow *wf, const workflow **out)
{
    pthread_mutex_lock(&registry_lock);
    const workflow *have = registry_find_locked(wf->version);
    if (have == NULL && registry_n_wfs == registry_cap_wfs) {
        size_t cap = registry_cap_wfs ? registry_cap_wfs * 2 : 8;
        workflow **grown = realloc(registry_wfs, cap * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&registry_lock);
            workflow_free(wf);
            return STATUS_ENOMEM;
        }
        registry_wfs = grown;
        registry_cap_wfs = cap;
    }
    if (have == NULL) {
        registry_wfs[registry_n_wfs++] = wf;
        have = wf;
        wf = NULL;
    }
    pthread_mutex_unlock(&registry_lock);
    workflow_free(wf);
    *out = have;
    return STATUS_OK;
}

static json_t *registry_steps_json(const workflow *wf)
{
    json_t *steps = json_array();
    for (size_t i = 0; steps != NULL && i < wf->n_steps; i++) {
        if (json_array_append_new(steps, json_string(wf->steps[i].cap.step)) != 0) {
            json_decref(steps);
            return NULL;
        }
    }
    return steps;
}

/* charter_put_workflow's reply as the info registry_install hands out. */
static json_t *registry_info_of(const json_t *reply)
{
    json_t *w = json_object_get(reply, "workflow");
    json_t *created = json_object_get(reply, "created");
    if (!json_is_object(w) || !json_is_boolean(created))
        return NULL;
    json_t *info = json_deep_copy(w);
    if (info == NULL || json_object_set(info, "created", created) != 0) {
        json_decref(info);
        return NULL;
    }
    /* Redis's cjson writes an empty list as {}. */
    if (!json_is_array(json_object_get(info, "steps")) &&
        json_object_set_new(info, "steps", json_array()) != 0) {
        json_decref(info);
        return NULL;
    }
    return info;
}

int registry_install(store *st, workflow *wf, json_t **info, const workflow **out, char *err,
                     size_t errlen)
{
    if (info != NULL)
        *info = NULL;
    if (out != NULL)
        *out = NULL;
    registry_err(err, errlen, "%s", "");
    if (wf == NULL || wf->definition == NULL) {
        workflow_free(wf);
        registry_err(err, errlen, "%s", "no definition to store");
        return STATUS_EINVAL;
    }
    json_t *seed = workflow_seed_json(wf);
    json_t *steps = registry_steps_json(wf);
    json_t *meta = steps == NULL ? NULL
                                 : json_pack("{s:s, s:s, s:s, s:O}", "version", wf->version, "name",
                                             wf->name, "task", wf->task, "steps", steps);
    char *seed_text = seed != NULL ? json_dumps(seed, JSON_COMPACT) : NULL;
    char *meta_text = meta != NULL ? json_dumps(meta, JSON_COMPACT) : NULL;
    json_decref(seed);
    json_decref(steps);
    json_decref(meta);
    if (seed_text == NULL || meta_text == NULL) {
        free(seed_text);
        free(meta_text);
        workflow_free(wf);
        registry_err(err, errlen, "%s", "out of memory");
        return STATUS_ENOMEM;
    }
    json_t *reply = NULL;
    int rc = q_put_workflow(st, meta_text, wf->definition, seed_text, &reply);
    free(seed_text);
    free(meta_text);
    if (rc != STATUS_OK) {
        registry_err(err, errlen, "%s", store_last_error(st));
        workflow_free(wf);
        return rc;
    }
    const char *refused = json_string_value(json_object_get(reply, "refused"));
    if (refused != NULL) {
        /* An id clashes with a node of the graph; the reason names the entry. */
        registry_err(err, errlen, "%s", refused);
        json_decref(reply);
        workflow_free(wf);
        return STATUS_EREFUSED;
    }
    json_t *i = registry_info_of(reply);
    json_decref(reply);
    if (i == NULL) {
        workflow_free(wf);
        registry_err(err, errlen, "%s", "charter_put_workflow: unexpected reply");
        return STATUS_EPROTO;
    }
    const workflow *kept = NULL;
    rc = registry_keep(wf, &kept);
    if (rc != STATUS_OK) {
        json_decref(i);
        registry_err(err, errlen, "%s", "out of memory");
        return rc;
    }
    if (out != NULL)
        *out = kept;
    if (info != NULL)
        *info = i;
    else
        json_decref(i);
    return STATUS_OK;
}

int registry_apply(store *st, const char *definition, size_t len, json_t **info, char *err,
                   size_t errlen)
{
    workflow *wf = NULL;
    if (info != NULL)
        *info = NULL;
    if (workflow_load_buffer(definition, len, &wf, err, errlen) != 0)
        return STATUS_EINVAL;
    return registry_install(st, wf, info, NULL, err, errlen);
}

/* registry_get and registry_held: cached_ok lets a version this process has loaded answer
 * without asking the graph. */
static int registry_lookup(store *st, const char *ref, bool cached_ok, const workflow **out)
{
    *out = NULL;
    if (ref == NULL || *ref == '\0' || strlen(ref) > 128)
        return STATUS_EINVAL;
    if (cached_ok && registry_is_version(ref) && (*out = registry_find(ref)) != NULL)
        return STATUS_OK;
    json_t *reply = NULL;
    int rc = q_get_workflow(st, ref, &reply);
    if (rc != STATUS_OK)
        return rc;
    const char *version =
        json_string_value(json_object_get(json_object_get(reply, "workflow"), "version"));
    json_t *def = json_object_get(reply, "definition");
    if (!registry_is_version(version) || !json_is_string(def)) {
        json_decref(reply);
        return STATUS_EPROTO;
    }
    if ((*out = registry_find(version)) != NULL) {
        json_decref(reply);
        return STATUS_OK;
    }
    workflow *wf = NULL;
    char err[256];
    rc =
        workflow_load_buffer(json_string_value(def), json_string_length(def), &wf, err, sizeof err);
    /* The bytes are what the version names, or the stored definition is not to be trusted. */
    bool same = rc == 0 && strcmp(wf->version, version) == 0;
    if (!same) {
        if (rc != 0)
            store_note_error(st,
                             "altered in the database: the stored definition of workflow %.64s "
                             "does not load (%.100s)",
                             version, err);
        else
            store_note_error(st,
                             "altered in the database: the stored definition of workflow %.64s "
                             "hashes to %.64s",
                             version, wf->version);
    }
    json_decref(reply);
    if (!same) {
        workflow_free(wf);
        return STATUS_EPROTO;
    }
    return registry_keep(wf, out);
}

int registry_get(store *st, const char *ref, const workflow **out)
{
    return registry_lookup(st, ref, true, out);
}

int registry_held(store *st, const char *ref, const workflow **out)
{
    return registry_lookup(st, ref, false, out);
}

int registry_run_workflow(store *st, const char *run_id, const workflow **out)
{
    *out = NULL;
    json_t *reply = NULL;
    int rc = q_run_workflow(st, run_id, &reply);
    if (rc != STATUS_OK)
        return rc;
    const char *version = json_string_value(json_object_get(reply, "workflow"));
    /* A run that names no stored version has no workflow to act under: fail closed. */
    rc = registry_is_version(version) ? registry_get(st, version, out) : STATUS_EPROTO;
    json_decref(reply);
    return rc == STATUS_ENOTFOUND || rc == STATUS_EINVAL ? STATUS_EPROTO : rc;
}

/* ---- narrowed step capabilities ----------------------------------------------------------- */

static bool strs_has(const guard_strs *s, const char *x)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->items[i], x) == 0)
            return true;
    return false;
}

static void strs_clear(guard_strs *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->items[i]);
    free(s->items);
    s->items = NULL;
    s->n = 0;
}

/* The entries of base that want holds, in base's order (the canonical form of a narrowing);
 * keep_all copies base whole. Returns 0, or -1 on allocation failure (out left empty). */
static int strs_filter(const guard_strs *base, const guard_strs *want, bool keep_all,
                       guard_strs *out)
{
    out->items = NULL;
    out->n = 0;
    if (base->n == 0)
        return 0;
    out->items = calloc(base->n, sizeof *out->items);
    if (out->items == NULL)
        return -1;
    for (size_t i = 0; i < base->n; i++) {
        if (!keep_all && !strs_has(want, base->items[i]))
            continue;
        if ((out->items[out->n] = strdup(base->items[i])) == NULL) {
            strs_clear(out);
            return -1;
        }
        out->n++;
    }
    return 0;
}

static void narrow_free(registry_narrow *n)
{
    if (n == NULL)
        return;
    strs_clear(&n->step.cap.tools);
    strs_clear(&n->step.cap.recipients);
    strs_clear(&n->step.cap.resources);
    strs_clear(&n->step.reads);
    free(n->key);
    free(n);
}

static void key_append(char *key, size_t *used, const guard_strs *s)
{
    for (size_t i = 0; i < s->n; i++) {
        size_t l = strlen(s->items[i]);
        if (i > 0)
            key[(*used)++] = ',';
        memcpy(key + *used, s->items[i], l);
        *used += l;
    }
    key[(*used)++] = '\n';
}

static size_t key_size(const guard_strs *s)
{
    size_t n = 1;
    for (size_t i = 0; i < s->n; i++)
        n += strlen(s->items[i]) + 1;
    return n;
}

static uint32_t key_hash(const char *key)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)key; *p != '\0'; p++) {
        h ^= *p;
        h *= 16777619u;
    }
    return h;
}

int registry_narrowed(const workflow *wf, const workflow_step *base, const guard_strs *tools,
                      const guard_strs *recipients, const guard_strs *resources,
                      const workflow_step **out)
{
    *out = NULL;
    const guard_strs *want[3] = {tools, recipients, resources};
    const guard_strs *have[3] = {&base->cap.tools, &base->cap.recipients, &base->cap.resources};
    /* Scopes only narrow: a stored scope wider than its step is refused, never widened. */
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < want[k]->n; i++)
            if (!strs_has(have[k], want[k]->items[i]))
                return STATUS_EREFUSED;

    registry_narrow *n = calloc(1, sizeof *n);
    if (n == NULL)
        return STATUS_ENOMEM;
    n->step = *base;
    memset(&n->step.cap.tools, 0, sizeof n->step.cap.tools);
    memset(&n->step.cap.recipients, 0, sizeof n->step.cap.recipients);
    memset(&n->step.cap.resources, 0, sizeof n->step.cap.resources);
    memset(&n->step.reads, 0, sizeof n->step.reads);
    if (strs_filter(&base->cap.tools, tools, false, &n->step.cap.tools) != 0 ||
        strs_filter(&base->cap.recipients, recipients, false, &n->step.cap.recipients) != 0 ||
        strs_filter(&base->cap.resources, resources, false, &n->step.cap.resources) != 0 ||
        strs_filter(&base->reads, &n->step.cap.resources, false, &n->step.reads) != 0) {
        narrow_free(n);
        return STATUS_ENOMEM;
    }
    size_t size = strlen(wf->version) + strlen(base->cap.step) + 2 + key_size(&n->step.cap.tools) +
                  key_size(&n->step.cap.recipients) + key_size(&n->step.cap.resources) + 1;
    if ((n->key = malloc(size)) == NULL) {
        narrow_free(n);
        return STATUS_ENOMEM;
    }
    size_t used = (size_t)snprintf(n->key, size, "%s\n%s\n", wf->version, base->cap.step);
    key_append(n->key, &used, &n->step.cap.tools);
    key_append(n->key, &used, &n->step.cap.recipients);
    key_append(n->key, &used, &n->step.cap.resources);
    n->key[used] = '\0';

    uint32_t b = key_hash(n->key) % REGISTRY_BUCKETS;
    pthread_mutex_lock(&registry_lock);
    for (registry_narrow *e = registry_buckets[b]; e != NULL; e = e->next) {
        if (strcmp(e->key, n->key) == 0) {
            *out = &e->step;
            break;
        }
    }
    int rc = STATUS_OK;
    if (*out == NULL && registry_n_narrowed >= REGISTRY_MAX_NARROWED) {
        rc = STATUS_ELIMIT;
    } else if (*out == NULL) {
        n->next = registry_buckets[b];
        registry_buckets[b] = n;
        registry_n_narrowed++;
        *out = &n->step;
        n = NULL;
    }
    pthread_mutex_unlock(&registry_lock);
    narrow_free(n);
    return rc;
}

void registry_shutdown(void)
{
    pthread_mutex_lock(&registry_lock);
    for (size_t b = 0; b < REGISTRY_BUCKETS; b++) {
        registry_narrow *e = registry_buckets[b];
        while (e != NULL) {
            registry_narrow *next = e->next;
            narrow_free(e);
            e = next;
        }
        registry_buckets[b] = NULL;
    }
    registry_n_narrowed = 0;
    for (size_t i = 0; i < registry_n_wfs; i++)
        workflow_free(registry_wfs[i]);
    free(registry_wfs);
    registry_wfs = NULL;
    registry_n_wfs = registry_cap_wfs = 0;
    pthread_mutex_unlock(&registry_lock);
}
