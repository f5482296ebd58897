/*
 * facts.c - the JSON facts of the query library decoded into the guard's structs (see facts.h).
 *
 * Each struct is one table of fields {key, type, where}, walked by one decoder and one free,
 * as workflow.c's field specs describe a definition: adding a fact is adding a row. Every byte
 * a decoded struct points to is owned by it.
 */
#include "policy/facts.h"

#include "core/digest.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- scalars ----------------------------------------------------------------------------- */

/* A text field: absent or null gives "" so the guard can always compare. */
static int dup_text(const json_t *v, char **out)
{
    const char *s = "";
    if (v && !json_is_null(v)) {
        if (!json_is_string(v))
            return STATUS_EPROTO;
        s = json_string_value(v);
    }
    *out = strdup(s);
    return *out ? STATUS_OK : STATUS_ENOMEM;
}

/* A required id: a non-empty string. */
static int dup_id(const json_t *v, char **out)
{
    if (!json_is_string(v) || json_string_length(v) == 0)
        return STATUS_EPROTO;
    *out = strdup(json_string_value(v));
    return *out ? STATUS_OK : STATUS_ENOMEM;
}

/* A label: integer (or integral number, or decimal string); absent or null gives -1. */
static int get_label(const json_t *v, int *out)
{
    *out = -1;
    if (!v || json_is_null(v))
        return STATUS_OK;
    double d;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < INT_MIN || i > INT_MAX)
            return STATUS_EPROTO;
        *out = (int)i;
        return STATUS_OK;
    }
    if (json_is_real(v)) {
        d = json_real_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        if (*s == '\0')
            return STATUS_OK;
        errno = 0;
        long l = strtol(s, &end, 10);
        if (errno || *end != '\0' || l < INT_MIN || l > INT_MAX)
            return STATUS_EPROTO;
        *out = (int)l;
        return STATUS_OK;
    } else {
        return STATUS_EPROTO;
    }
    if (d != floor(d) || d < INT_MIN || d > INT_MAX)
        return STATUS_EPROTO;
    *out = (int)d;
    return STATUS_OK;
}

/* A boolean: true/false, 1/0, "1"/"0"/"true"/"false"; absent or null gives false. */
static int get_bool(const json_t *v, bool *out)
{
    *out = false;
    if (!v || json_is_null(v))
        return STATUS_OK;
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return STATUS_OK;
    }
    if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
        *out = json_integer_value(v) == 1;
        return STATUS_OK;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "1") == 0 || strcmp(s, "true") == 0) {
            *out = true;
            return STATUS_OK;
        }
        if (strcmp(s, "0") == 0 || strcmp(s, "false") == 0) {
            *out = false;
            return STATUS_OK;
        }
    }
    return STATUS_EPROTO;
}

/* A time in seconds since the epoch: a number or a decimal string. Absent, null or "" gives
 * missing. */
static int get_time(const json_t *v, double missing, double *out)
{
    *out = missing;
    if (!v || json_is_null(v))
        return STATUS_OK;
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return isfinite(*out) ? STATUS_OK : STATUS_EPROTO;
    }
    if (!json_is_string(v))
        return STATUS_EPROTO;
    const char *s = json_string_value(v);
    if (*s == '\0')
        return STATUS_OK;
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (errno || *end != '\0' || !isfinite(d))
        return STATUS_EPROTO;
    *out = d;
    return STATUS_OK;
}

/* An artifact's kind: "source" or "derived" is known; absent, null or another text is not;
 * anything but a text is malformed. */
static int get_kind(const json_t *v, bool *is_source, bool *kind_known)
{
    if (v && !json_is_null(v) && !json_is_string(v))
        return STATUS_EPROTO;
    const char *k = json_is_string(v) ? json_string_value(v) : "";
    *is_source = strcmp(k, "source") == 0;
    *kind_known = *is_source || strcmp(k, "derived") == 0;
    return STATUS_OK;
}

/* The elements of a documented list: an array, or {} (how Redis's cjson encodes an empty
 * list), or absent/null (empty). *arr is NULL for an empty list. */
static int list_of(const json_t *v, const json_t **arr, size_t *n)
{
    *arr = NULL;
    *n = 0;
    if (!v || json_is_null(v))
        return STATUS_OK;
    if (json_is_object(v) && json_object_size(v) == 0)
        return STATUS_OK;
    if (!json_is_array(v))
        return STATUS_EPROTO;
    *arr = v;
    *n = json_array_size(v);
    return STATUS_OK;
}

static void strs_free(guard_strs *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->items[i]);
    free(s->items);
    s->items = NULL;
    s->n = 0;
}

/* A list of strings. On failure s holds what was copied so far (freed by its owner). */
static int get_strs(const json_t *v, guard_strs *s)
{
    const json_t *arr;
    size_t n;
    s->items = NULL;
    s->n = 0;
    int rc = list_of(v, &arr, &n);
    if (rc != STATUS_OK || n == 0)
        return rc;
    s->items = calloc(n, sizeof *s->items);
    if (!s->items)
        return STATUS_ENOMEM;
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        if (!json_is_string(e))
            return STATUS_EPROTO;
        s->items[i] = strdup(json_string_value(e));
        if (!s->items[i])
            return STATUS_ENOMEM;
    }
    return STATUS_OK;
}

/* ---- field tables ------------------------------------------------------------------------ */

typedef enum {
    F_ID,      /* char *: a non-empty string, required */
    F_TEXT,    /* char *: "" when absent */
    F_LABEL,   /* int: -1 when absent */
    F_BOOL,    /* bool: false when absent */
    F_TIME,    /* double: seconds since the epoch, missing when absent */
    F_KIND,    /* bool is_source at at, bool kind_known at count_at */
    F_STRS,    /* guard_strs */
    F_RECORDS, /* a list of records of table rec: pointer at at, count (size_t) at count_at */
} field_type;

typedef struct record_table record_table;

typedef struct {
    const char *key;
    field_type type;
    size_t at;               /* offset of the field in the struct */
    size_t count_at;         /* F_KIND: offset of kind_known; F_RECORDS: offset of the count */
    double missing;          /* F_TIME: the value of an absent time */
    const record_table *rec; /* F_RECORDS: the elements' table */
} field;

/* One struct: its fields and its size. A record whose JSON may be a bare id (resources and
 * actors) takes the id from the string and every other field as absent. */
struct record_table {
    const field *fields;
    size_t n;
    size_t size;
    bool bare_id;
};

#define AT(type, member) offsetof(type, member)
#define TABLE(type, rows, bare)                                                                    \
    {                                                                                              \
        rows, sizeof rows / sizeof rows[0], sizeof(type), bare                                     \
    }

static const field resource_fields[] = {
    {"id", F_ID, AT(guard_resource, id), 0, 0, NULL},
    {"title", F_TEXT, AT(guard_resource, title), 0, 0, NULL},
    {"conf", F_LABEL, AT(guard_resource, conf), 0, 0, NULL},
    {"integrity", F_LABEL, AT(guard_resource, integrity), 0, 0, NULL},
    {"quarantined_at", F_TEXT, AT(guard_resource, quarantined_at), 0, 0, NULL},
    {"quarantined", F_TEXT, AT(guard_resource, quarantined), 0, 0, NULL},
};
static const record_table resource_table = TABLE(guard_resource, resource_fields, true);

static const field artifact_fields[] = {
    {"id", F_ID, AT(guard_artifact, id), 0, 0, NULL},
    {"run_id", F_TEXT, AT(guard_artifact, run_id), 0, 0, NULL},
    {"title", F_TEXT, AT(guard_artifact, title), 0, 0, NULL},
    {"hash", F_TEXT, AT(guard_artifact, hash), 0, 0, NULL},
    {"kind", F_KIND, AT(guard_artifact, is_source), AT(guard_artifact, kind_known), 0, NULL},
    {"conf", F_LABEL, AT(guard_artifact, conf), 0, 0, NULL},
    {"integrity", F_LABEL, AT(guard_artifact, integrity), 0, 0, NULL},
    {"capture_complete", F_BOOL, AT(guard_artifact, capture_complete), 0, 0, NULL},
    {"input_ids", F_STRS, AT(guard_artifact, input_ids), 0, 0, NULL},
    {"parents", F_STRS, AT(guard_artifact, parents), 0, 0, NULL},
    {"resources", F_RECORDS, AT(guard_artifact, resources), AT(guard_artifact, n_resources), 0,
     &resource_table},
    {"producers", F_STRS, AT(guard_artifact, producers), 0, 0, NULL},
};
static const record_table artifact_table = TABLE(guard_artifact, artifact_fields, false);

static const field actor_fields[] = {
    {"id", F_ID, AT(guard_actor_ref, id), 0, 0, NULL},
    {"kind", F_TEXT, AT(guard_actor_ref, kind), 0, 0, NULL},
};
static const record_table actor_table = TABLE(guard_actor_ref, actor_fields, true);

/* A missing valid_from reads as never valid and a missing valid_to as expired, so a grant
 * whose validity cannot be read fails closed. */
static const field grant_fields[] = {
    {"id", F_ID, AT(guard_grant, id), 0, 0, NULL},
    {"root", F_BOOL, AT(guard_grant, root), 0, 0, NULL},
    {"tools", F_STRS, AT(guard_grant, tools), 0, 0, NULL},
    {"recipients", F_STRS, AT(guard_grant, recipients), 0, 0, NULL},
    {"resources", F_STRS, AT(guard_grant, resources), 0, 0, NULL},
    {"valid_from", F_TIME, AT(guard_grant, valid_from), 0, HUGE_VAL, NULL},
    {"valid_to", F_TIME, AT(guard_grant, valid_to), 0, 0.0, NULL},
    {"revoked_at", F_TIME, AT(guard_grant, revoked_at), 0, 0.0, NULL},
    {"parents", F_STRS, AT(guard_grant, parents), 0, 0, NULL},
    {"grantees", F_RECORDS, AT(guard_grant, grantees), AT(guard_grant, n_grantees), 0,
     &actor_table},
    {"issuers", F_RECORDS, AT(guard_grant, issuers), AT(guard_grant, n_issuers), 0, &actor_table},
};
static const record_table grant_table = TABLE(guard_grant, grant_fields, false);

static const field context_fields[] = {
    {"id", F_ID, AT(guard_context, id), 0, 0, NULL},
    {"run_id", F_TEXT, AT(guard_context, run_id), 0, 0, NULL},
    {"step", F_TEXT, AT(guard_context, step), 0, 0, NULL},
    {"owners", F_STRS, AT(guard_context, owners), 0, 0, NULL},
};
static const record_table context_table = TABLE(guard_context, context_fields, false);

/* A lineage summary's facts come from three objects (facts_summary_from_json): the summary's
 * own text, the artifact's fields now, and the reply's edges and source labels now. */
static const field summary_fields[] = {
    {"run_id", F_TEXT, AT(guard_summary, run_id), 0, 0, NULL},
    {"kind", F_TEXT, AT(guard_summary, kind), 0, 0, NULL},
    {"resource", F_TEXT, AT(guard_summary, resource), 0, 0, NULL},
    {"hash", F_TEXT, AT(guard_summary, hash), 0, 0, NULL},
    {"conf", F_LABEL, AT(guard_summary, conf), 0, 0, NULL},
    {"integrity", F_LABEL, AT(guard_summary, integrity), 0, 0, NULL},
    {"ok", F_BOOL, AT(guard_summary, ok), 0, 0, NULL},
    {"code", F_TEXT, AT(guard_summary, code), 0, 0, NULL},
    {"why", F_TEXT, AT(guard_summary, why), 0, 0, NULL},
    {"parents", F_STRS, AT(guard_summary, parents), 0, 0, NULL},
    {"sources", F_RECORDS, AT(guard_summary, sources), AT(guard_summary, n_sources), 0,
     &resource_table},
};
static const record_table summary_table = TABLE(guard_summary, summary_fields, false);

static const field summary_now_fields[] = {
    {"run_id", F_TEXT, AT(guard_summary, now_run_id), 0, 0, NULL},
    {"kind", F_TEXT, AT(guard_summary, now_kind), 0, 0, NULL},
    {"hash", F_TEXT, AT(guard_summary, now_hash), 0, 0, NULL},
    {"title", F_TEXT, AT(guard_summary, now_title), 0, 0, NULL},
    {"conf", F_LABEL, AT(guard_summary, now_conf), 0, 0, NULL},
    {"integrity", F_LABEL, AT(guard_summary, now_integrity), 0, 0, NULL},
};
static const record_table summary_now_table = TABLE(guard_summary, summary_now_fields, false);

static const field summary_edge_fields[] = {
    {"id", F_ID, AT(guard_summary, id), 0, 0, NULL},
    {"summary_hash", F_TEXT, AT(guard_summary, summary_hash), 0, 0, NULL},
    {"parents", F_STRS, AT(guard_summary, now_parents), 0, 0, NULL},
    {"resources", F_STRS, AT(guard_summary, now_resources), 0, 0, NULL},
    {"producers", F_STRS, AT(guard_summary, now_producers), 0, 0, NULL},
    {"sources", F_RECORDS, AT(guard_summary, now_sources), AT(guard_summary, n_now_sources), 0,
     &resource_table},
};
static const record_table summary_edge_table = TABLE(guard_summary, summary_edge_fields, false);

/* ---- the walk ---------------------------------------------------------------------------- */

static void record_free(const record_table *t, void *rec);

/* A list of n records of table t (NULL and 0 are accepted). */
static void records_free(const record_table *t, void *items, size_t n)
{
    for (size_t i = 0; items != NULL && i < n; i++)
        record_free(t, (char *)items + i * t->size);
    free(items);
}

/* Frees what the record owns (not the record itself) and zeroes it. */
static void record_free(const record_table *t, void *rec)
{
    char *base = rec;
    for (size_t i = 0; i < t->n; i++) {
        const field *f = &t->fields[i];
        switch (f->type) {
        case F_ID:
        case F_TEXT:
            free(*(char **)(base + f->at));
            break;
        case F_STRS:
            strs_free((guard_strs *)(base + f->at));
            break;
        case F_RECORDS:
            records_free(f->rec, *(void **)(base + f->at), *(size_t *)(base + f->count_at));
            break;
        default:
            break;
        }
    }
    memset(rec, 0, t->size);
}

static int records_from(const json_t *v, const record_table *t, void **out, size_t *count);

/* Fills rec (zeroed, of table t) from the object o, or, for a bare id, from the string id
 * alone. On failure rec holds what was filled so far (freed by its owner). */
static int record_from(const json_t *o, const json_t *id, const record_table *t, void *rec)
{
    char *base = rec;
    int rc = STATUS_OK;
    for (size_t i = 0; rc == STATUS_OK && i < t->n; i++) {
        const field *f = &t->fields[i];
        const json_t *v = id != NULL ? (f->type == F_ID ? id : NULL) : json_object_get(o, f->key);
        switch (f->type) {
        case F_ID:
            rc = dup_id(v, (char **)(base + f->at));
            break;
        case F_TEXT:
            rc = dup_text(v, (char **)(base + f->at));
            break;
        case F_LABEL:
            rc = get_label(v, (int *)(base + f->at));
            break;
        case F_BOOL:
            rc = get_bool(v, (bool *)(base + f->at));
            break;
        case F_TIME:
            rc = get_time(v, f->missing, (double *)(base + f->at));
            break;
        case F_KIND:
            rc = get_kind(v, (bool *)(base + f->at), (bool *)(base + f->count_at));
            break;
        case F_STRS:
            rc = get_strs(v, (guard_strs *)(base + f->at));
            break;
        case F_RECORDS:
            rc = records_from(v, f->rec, (void **)(base + f->at), (size_t *)(base + f->count_at));
            break;
        }
    }
    return rc;
}

/* A list of records of table t: objects, or bare ids where the table allows them. On failure
 * *out and *count hold what was decoded so far (freed by their owner). */
static int records_from(const json_t *v, const record_table *t, void **out, size_t *count)
{
    const json_t *arr;
    size_t n;
    *out = NULL;
    *count = 0;
    int rc = list_of(v, &arr, &n);
    if (rc != STATUS_OK || n == 0)
        return rc;
    char *items = calloc(n, t->size);
    if (items == NULL)
        return STATUS_ENOMEM;
    *out = items;
    *count = n;
    for (size_t i = 0; rc == STATUS_OK && i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        void *rec = items + i * t->size;
        if (t->bare_id && json_is_string(e))
            rc = record_from(NULL, e, t, rec);
        else if (json_is_object(e))
            rc = record_from(e, NULL, t, rec);
        else
            rc = STATUS_EPROTO;
    }
    return rc;
}

/* The id the caller asked for, or the reply's own (key), as an owned copy. */
static int root_of(const json_t *j, const char *key, const char *asked, char **out)
{
    const json_t *own = json_object_get(j, key);
    if (asked != NULL)
        *out = strdup(asked);
    else if (json_is_string(own))
        *out = strdup(json_string_value(own));
    else
        return STATUS_EPROTO;
    return *out != NULL ? STATUS_OK : STATUS_ENOMEM;
}

/* ---- the three facts --------------------------------------------------------------------- */

void facts_ancestry_free(guard_ancestry *anc)
{
    if (!anc)
        return;
    records_free(&artifact_table, anc->items, anc->n);
    free(anc->root);
    memset(anc, 0, sizeof *anc);
}

int facts_ancestry_from_json(const json_t *j, const char *root, guard_ancestry *out)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(j))
        return STATUS_EPROTO;
    int rc = root_of(j, "root", root, &out->root);
    if (rc == STATUS_OK)
        rc = get_bool(json_object_get(j, "truncated"), &out->truncated);
    if (rc == STATUS_OK && !json_object_get(j, "artifacts"))
        rc = STATUS_EPROTO;
    if (rc == STATUS_OK)
        rc = records_from(json_object_get(j, "artifacts"), &artifact_table, (void **)&out->items,
                          &out->n);
    if (rc != STATUS_OK)
        facts_ancestry_free(out);
    return rc;
}

void facts_chain_free(guard_chain *chain)
{
    if (!chain)
        return;
    records_free(&grant_table, chain->items, chain->n);
    free(chain->leaf);
    memset(chain, 0, sizeof *chain);
}

int facts_chain_from_json(const json_t *j, const char *leaf, guard_chain *out)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(j))
        return STATUS_EPROTO;
    int rc = root_of(j, "leaf", leaf, &out->leaf);
    if (rc == STATUS_OK && !json_object_get(j, "grants"))
        rc = STATUS_EPROTO;
    if (rc == STATUS_OK)
        rc =
            records_from(json_object_get(j, "grants"), &grant_table, (void **)&out->items, &out->n);
    if (rc != STATUS_OK)
        facts_chain_free(out);
    return rc;
}

void facts_context_free(guard_context *ctx)
{
    if (!ctx)
        return;
    record_free(&context_table, ctx);
}

int facts_context_from_json(const json_t *j, guard_context *out)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(j))
        return STATUS_EPROTO;
    int rc = record_from(j, NULL, &context_table, out);
    if (rc != STATUS_OK)
        facts_context_free(out);
    return rc;
}

/* ---- lineage summaries ------------------------------------------------------------------- */

void facts_summary_free(guard_summary *s)
{
    char **texts[] = {&s->id,       &s->unverified, &s->summary_hash, &s->run_id, &s->kind,
                      &s->resource, &s->hash,       &s->code,         &s->why,    &s->now_run_id,
                      &s->now_kind, &s->now_hash,   &s->now_title};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        free(*texts[i]);
    strs_free(&s->parents);
    strs_free(&s->now_parents);
    strs_free(&s->now_resources);
    strs_free(&s->now_producers);
    records_free(&resource_table, s->sources, s->n_sources);
    records_free(&resource_table, s->now_sources, s->n_now_sources);
    memset(s, 0, sizeof *s);
}

bool facts_is_summary(const json_t *j)
{
    return json_is_object(j) && ((json_is_string(json_object_get(j, "summary")) &&
                                  json_is_string(json_object_get(j, "summary_hash"))) ||
                                 json_is_string(json_object_get(j, "unverified")));
}

/* A reply charterd marked unusable: its id and why, nothing else is read. */
static int summary_unverified(const json_t *j, const char *id, guard_summary *out)
{
    const char *aid = json_string_value(json_object_get(j, "id"));
    const char *why = json_string_value(json_object_get(j, "unverified"));
    if (aid == NULL || *aid == '\0' || (id != NULL && strcmp(aid, id) != 0))
        return STATUS_EPROTO;
    out->id = strdup(aid);
    out->unverified = strdup(why);
    if (out->id == NULL || out->unverified == NULL) {
        facts_summary_free(out);
        return STATUS_ENOMEM;
    }
    return STATUS_OK;
}

int facts_summary_from_json(const json_t *j, const char *id, guard_summary *out)
{
    memset(out, 0, sizeof *out);
    if (!facts_is_summary(j))
        return STATUS_EPROTO;
    if (json_is_string(json_object_get(j, "unverified")))
        return summary_unverified(j, id, out);
    int rc = record_from(j, NULL, &summary_edge_table, out);
    if (rc == STATUS_OK && id != NULL && strcmp(out->id, id) != 0)
        rc = STATUS_EPROTO;
    const json_t *art = json_object_get(j, "artifact");
    if (rc == STATUS_OK)
        rc = json_is_object(art) ? record_from(art, NULL, &summary_now_table, out) : STATUS_EPROTO;
    /* The summary's facts count only when its text is the one its hash names. */
    const char *text = json_string_value(json_object_get(j, "summary"));
    char actual[41];
    json_t *sum = NULL;
    if (rc == STATUS_OK && digest_sha1_hex(text, strlen(text), actual) == 0 &&
        strcmp(actual, out->summary_hash) == 0 &&
        (sum = json_loads(text, JSON_DECODE_ANY, NULL)) != NULL && json_is_object(sum) &&
        json_is_string(json_object_get(sum, "id")) &&
        strcmp(json_string_value(json_object_get(sum, "id")), out->id) == 0) {
        rc = record_from(sum, NULL, &summary_table, out);
        /* charterd found a seal that does not verify under its integrity key (gate.c). */
        out->verified = rc == STATUS_OK && !json_is_false(json_object_get(j, "seal_ok"));
    }
    json_decref(sum);
    if (rc != STATUS_OK)
        facts_summary_free(out);
    return rc;
}
