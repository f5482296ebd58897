/*
 * scope.c - the rules of retrieval scopes (see scope.h): pure functions over filters and
 * proposals, no I/O, so each rule is tested on its own and applied the same way everywhere.
 */
#include "policy/scope.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/status.h"

const char *const scope_fields[SCOPE_N_FIELDS] = {"tenant", "resource_id", "visibility"};

/* Words (lowercased, punctuation dropped) that name whose data is searched: a proposal key
 * holding one of them as a part is refused. */
static const char *const scope_bearing_parts[] = {
    "principal", "tenant",     "filter", "resource", "scope",     "visibility", "unrestricted",
    "allowlist", "permission", "grant",  "acl",      "namespace", "clearance",
};
/* Whole keys that name it too but are too short to match as parts. */
static const char *const scope_bearing_keys[] = {
    "user",       "userid",     "username",    "users", "role",      "roles",        "docid",
    "docids",     "documentid", "documentids", "doc",   "docs",      "binding",      "index",
    "collection", "caller",     "identity",    "owner", "expiresat", "maxfollowups", "org",
    "orgid",      "account",    "accountid",   "where",
};
#define SCOPE_N(a) (sizeof(a) / sizeof((a)[0]))
#define SCOPE_MAX_WORDS 32
#define SCOPE_MAX_WORD 64

int scope_field_index(const char *field)
{
    for (int i = 0; field && i < SCOPE_N_FIELDS; i++)
        if (strcmp(field, scope_fields[i]) == 0)
            return i;
    return -1;
}

static bool scope_any(const scope_filters *f)
{
    for (int i = 0; i < SCOPE_N_FIELDS; i++)
        if (f->present[i])
            return true;
    return false;
}

int scope_check_bound(const scope_filters *f, char *why, size_t whylen)
{
    bool any = scope_any(f);
    if (!any && !f->unrestricted) {
        snprintf(why, whylen,
                 "a scope needs filters (tenant, resource_id or visibility); a scope without "
                 "them must be asked for with unrestricted");
        return STATUS_EINVAL;
    }
    if (any && f->unrestricted) {
        snprintf(why, whylen, "an unrestricted scope has no filters: drop one or the other");
        return STATUS_EINVAL;
    }
    return STATUS_OK;
}

static bool scope_holds(const guard_strs *s, const char *x)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->items[i], x) == 0)
            return true;
    return false;
}

int scope_check_within(const scope_filters *child, const scope_filters *parent, const char *whose,
                       char *why, size_t whylen)
{
    if (parent->unrestricted && !scope_any(parent))
        return STATUS_OK;
    if (child->unrestricted && !scope_any(child)) {
        snprintf(why, whylen, "SCOPE_WIDENING: an unrestricted scope is broader than %s", whose);
        return STATUS_EREFUSED;
    }
    for (int i = 0; i < SCOPE_N_FIELDS; i++) {
        if (!parent->present[i])
            continue;
        if (!child->present[i]) {
            snprintf(why, whylen, "SCOPE_WIDENING: %s filters %s and this scope does not", whose,
                     scope_fields[i]);
            return STATUS_EREFUSED;
        }
        for (size_t k = 0; k < child->values[i].n; k++) {
            if (!scope_holds(&parent->values[i], child->values[i].items[k])) {
                snprintf(why, whylen, "SCOPE_WIDENING: %s \"%s\" is not in %s", scope_fields[i],
                         child->values[i].items[k], whose);
                return STATUS_EREFUSED;
            }
        }
    }
    return STATUS_OK;
}

int scope_check_resources(const scope_filters *f, const guard_strs *allowed, char *why,
                          size_t whylen)
{
    int r = scope_field_index("resource_id");
    if (r < 0 || !f->present[r])
        return STATUS_OK;
    for (size_t k = 0; k < f->values[r].n; k++) {
        if (!scope_holds(allowed, f->values[r].items[k])) {
            snprintf(why, whylen,
                     "SCOPE_WIDENING: resource_id \"%s\" is not allowed by the step's grant chain",
                     f->values[r].items[k]);
            return STATUS_EREFUSED;
        }
    }
    return STATUS_OK;
}

void scope_merge(const scope_filters *parent, const scope_filters *narrowing, scope_filters *child)
{
    *child = *parent;
    for (int i = 0; i < SCOPE_N_FIELDS; i++) {
        if (narrowing->present[i]) {
            child->present[i] = true;
            child->values[i] = narrowing->values[i];
        }
    }
    if (scope_any(child))
        child->unrestricted = false;
}

/* key lowercased with everything but letters and digits dropped, into out (n bytes). */
static void scope_normal(const char *key, char *out, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; key[i] != '\0' && j + 1 < n; i++) {
        unsigned char ch = (unsigned char)key[i];
        if (isalnum(ch))
            out[j++] = (char)tolower(ch);
    }
    out[j] = '\0';
}

static bool scope_bearing(const char *key)
{
    char k[128];
    scope_normal(key, k, sizeof k);
    for (size_t i = 0; i < SCOPE_N(scope_bearing_keys); i++)
        if (strcmp(k, scope_bearing_keys[i]) == 0)
            return true;
    for (size_t i = 0; i < SCOPE_N(scope_bearing_parts); i++)
        if (strstr(k, scope_bearing_parts[i]) != NULL)
            return true;
    return false;
}

/* Appends every scope-bearing key of v (any depth) to why; returns how many. */
static size_t scope_collect(const json_t *v, char *why, size_t whylen, size_t found, int depth)
{
    if (depth > 32)
        return found;
    if (json_is_object(v)) {
        const char *key;
        const json_t *x;
        json_object_foreach((json_t *)v, key, x)
        {
            if (scope_bearing(key)) {
                size_t used = strlen(why);
                if (used < whylen)
                    snprintf(why + used, whylen - used, "%s%.64s", found ? ", " : "", key);
                found++;
            }
            found = scope_collect(x, why, whylen, found, depth + 1);
        }
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x) found = scope_collect(x, why, whylen, found, depth + 1);
    }
    return found;
}

int scope_read_proposal(const char *text, json_t **doc, const char **query, unsigned *limit,
                        char *why, size_t whylen)
{
    *doc = NULL;
    *query = NULL;
    *limit = 0;
    json_error_t err;
    json_t *j = text ? json_loads(text, JSON_REJECT_DUPLICATES, &err) : NULL;
    if (!json_is_object(j)) {
        snprintf(why, whylen, "the proposal must be a JSON object {\"query\": \"...\"}");
        json_decref(j);
        return STATUS_EINVAL;
    }
    /* Scope-bearing fields first, at any depth: they are the reason to refuse, and all of them
     * are named. */
    snprintf(why, whylen, "SCOPE_FIELD_REJECTED: ");
    if (scope_collect(j, why, whylen, 0, 0) > 0) {
        json_decref(j);
        return STATUS_EREFUSED;
    }
    const char *key;
    json_t *x;
    json_object_foreach(j, key, x)
    {
        if (strcmp(key, "query") != 0 && strcmp(key, "limit") != 0 && strcmp(key, "reason") != 0) {
            snprintf(why, whylen,
                     "the proposal may hold only query, limit and reason, not \"%.64s\"", key);
            json_decref(j);
            return STATUS_EINVAL;
        }
    }
    const json_t *q = json_object_get(j, "query");
    const json_t *l = json_object_get(j, "limit");
    if (!json_is_string(q)) {
        snprintf(why, whylen, "the proposal's query must be a string");
        json_decref(j);
        return STATUS_EINVAL;
    }
    if (l && (!json_is_integer(l) || json_integer_value(l) < 1 || json_integer_value(l) > 100)) {
        snprintf(why, whylen, "the proposal's limit must be an integer 1..100");
        json_decref(j);
        return STATUS_EINVAL;
    }
    *limit = l ? (unsigned)json_integer_value(l) : 0;
    *query = json_string_value(q);
    *doc = j;
    return STATUS_OK;
}

json_t *scope_query_words(const char *query)
{
    json_t *words = json_array();
    char w[SCOPE_MAX_WORD + 1];
    size_t len = 0;
    for (size_t i = 0; words && query; i++) {
        unsigned char ch = (unsigned char)query[i];
        bool word = ch < 0x80 && isalnum(ch);
        if (word && len < SCOPE_MAX_WORD)
            w[len++] = (char)tolower(ch);
        if (!word && len > 0) {
            w[len] = '\0';
            len = 0;
            if (json_array_size(words) < SCOPE_MAX_WORDS &&
                json_array_append_new(words, json_string(w)) != 0) {
                json_decref(words);
                return NULL;
            }
        }
        if (ch == '\0')
            break;
    }
    return words;
}
