/*
 * scope.h - the rules of retrieval scopes, as pure functions (no I/O, no clock), like guard.h.
 *
 * A scope is a set of filters {field: [values]} the search engine applies to every search of
 * it. Scopes only narrow: a child's filters lie within its parent's, and every scope lies within
 * the resources its step's grant chain allows. Follow-up proposals come from untrusted text (a
 * model, a retrieved document) and may carry only a query; anything that could name whose data
 * is searched is refused before a search happens. svc_retrieval.c applies these rules and the
 * query library (queries/retrieval.lua) stores and enforces what they allowed.
 */
#ifndef CHARTER_SCOPE_H
#define CHARTER_SCOPE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "policy/guard.h"

/* Fields a filter may name (the chunk fields the engine indexes as tags). */
#define SCOPE_N_FIELDS 3
extern const char *const scope_fields[SCOPE_N_FIELDS]; /* tenant, resource_id, visibility */

/* Filters of one scope; values are borrowed. present[i] says whether field scope_fields[i] is
 * filtered (an empty values list is deny-all for it); unrestricted says no filter was meant. */
typedef struct {
    bool present[SCOPE_N_FIELDS];
    guard_strs values[SCOPE_N_FIELDS];
    bool unrestricted;
} scope_filters;

/* Index of field in scope_fields, or -1. */
int scope_field_index(const char *field);

/* Checks filters as a trusted caller bound them: at least one filter, or unrestricted (never
 * both). Returns STATUS_OK or STATUS_EINVAL with why (whylen bytes) saying which. Values were
 * checked as ids by the caller. */
int scope_check_bound(const scope_filters *f, char *why, size_t whylen);

/* Whether child is no broader than parent: an unrestricted parent holds anything; a field the
 * parent filters must be filtered by the child with a subset of the parent's values. Returns
 * STATUS_OK or STATUS_EREFUSED with why = "SCOPE_WIDENING: ..." naming the field and value. */
int scope_check_within(const scope_filters *child, const scope_filters *parent, const char *whose,
                       char *why, size_t whylen);

/* Whether every resource_id value of f lies within allowed (the resources the step's grant
 * chain allows). Returns STATUS_OK or STATUS_EREFUSED with why = "SCOPE_WIDENING: ...". */
int scope_check_resources(const scope_filters *f, const guard_strs *allowed, char *why,
                          size_t whylen);

/* child as NarrowScope builds it: the parent's filters with each field of narrowing replacing the
 * parent's; an unrestricted parent narrowed by any field is no longer unrestricted. */
void scope_merge(const scope_filters *parent, const scope_filters *narrowing, scope_filters *child);

/* Reads an untrusted follow-up proposal (JSON text): {"query": string, "limit": n, "reason":
 * string}. Every key at any depth is checked against the scope-bearing names (principal, tenant,
 * filters, resource ids, acl, scope ids, ...; compared lowercased without punctuation). Returns
 * STATUS_OK with *query (borrowed from *doc, which the caller decrefs) and *limit (0 when
 * absent); STATUS_EREFUSED with why = "SCOPE_FIELD_REJECTED: <fields>" naming every such field;
 * STATUS_EINVAL (why says what) for text that is not such an object. */
int scope_read_proposal(const char *text, json_t **doc, const char **query, unsigned *limit,
                        char *why, size_t whylen);

/* The words of a query as the engine sees them: runs of ASCII letters and digits, lowercased,
 * at most 32 words of at most 64 bytes each; every other byte (RediSearch's operators and
 * quotes included) separates words. Returns a new JSON array (caller decrefs) or NULL when out
 * of memory. */
json_t *scope_query_words(const char *query);

#endif
