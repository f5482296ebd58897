/*
 * receipt_json.c - a receipt as its JSON object and back (receipt_json.h): the document charterd
 * stores and prints and an archive keeps, read without a database by the offline audit.
 */
#include "evidence/receipt_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

static json_t *strs_json(char *const *items, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < n; i++) {
        if (json_array_append_new(a, json_string(items[i] != NULL ? items[i] : "")) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

#define RI_S(x) ((x) != NULL ? (x) : "")

json_t *receipt_json_of(const Charter__V1__Receipt *r)
{
    json_t *chain = strs_json(r->grant_chain, r->n_grant_chain);
    json_t *deliveries = strs_json(r->deliveries, r->n_deliveries);
    if (chain == NULL || deliveries == NULL) {
        json_decref(chain);
        json_decref(deliveries);
        return NULL;
    }
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:s, s:s, s:I, s:s, s:o, s:s}",
                          "kind", RI_S(r->kind), "run_id", RI_S(r->run_id), "invocation_id",
                          RI_S(r->invocation_id), "payload_hash", RI_S(r->payload_hash),
                          "recipient", RI_S(r->recipient), "tool", RI_S(r->tool), "grant_chain",
                          chain, "time", RI_S(r->time), "evaluator", RI_S(r->evaluator), "status",
                          RI_S(r->status), "last_seq", (json_int_t)r->last_seq, "last_event_hash",
                          RI_S(r->last_event_hash), "deliveries", deliveries, "mac", RI_S(r->mac));
    /* The signature's fields, present only on a signed receipt. */
    if (j != NULL && r->signature != NULL && *r->signature != '\0') {
        json_t *sig =
            json_pack("{s:s, s:s, s:s, s:I, s:s}", "signature", r->signature, "key_id",
                      RI_S(r->key_id), "signed_text", RI_S(r->signed_text), "chain_seq",
                      (json_int_t)r->chain_seq, "prev_receipt_hash", RI_S(r->prev_receipt_hash));
        if (sig == NULL || json_object_update(j, sig) != 0) {
            json_decref(j);
            j = NULL;
        }
        json_decref(sig);
    }
    /* An invoke receipt's lineage; absent from the other kinds. */
    if (j != NULL && r->kind != NULL && strcmp(r->kind, "invoke") == 0 &&
        json_object_set_new(j, "lineage", strs_json(r->lineage, r->n_lineage)) != 0) {
        json_decref(j);
        j = NULL;
    }
    /* A charter-receipt-2 run receipt's budget and counters; absent from older receipts. */
    if (j != NULL && ((r->budget != NULL && *r->budget != '\0') ||
                      (r->counters != NULL && *r->counters != '\0'))) {
        if (json_object_set_new(j, "budget", json_string(RI_S(r->budget))) != 0 ||
            json_object_set_new(j, "counters", json_string(RI_S(r->counters))) != 0) {
            json_decref(j);
            j = NULL;
        }
    }
    return j;
}

void receipt_json_clear(Charter__V1__Receipt *r)
{
    free(r->grant_chain);
    free(r->deliveries);
    free(r->lineage);
    charter__v1__receipt__init(r);
}

/* A string field: absent or null reads as "", another type is malformed. */
static int parse_text(const json_t *j, const char *k, char **out)
{
    static char empty[] = "";
    const json_t *v = json_object_get(j, k);
    *out = empty;
    if (v == NULL || json_is_null(v))
        return STATUS_OK;
    if (!json_is_string(v))
        return STATUS_EPROTO;
    *out = (char *)json_string_value(v);
    return STATUS_OK;
}

static int parse_list(const json_t *j, const char *k, char ***out, size_t *n)
{
    const json_t *v = json_object_get(j, k);
    *out = NULL;
    *n = 0;
    if (v == NULL || json_is_null(v) || (json_is_object(v) && json_object_size(v) == 0))
        return STATUS_OK;
    if (!json_is_array(v))
        return STATUS_EPROTO;
    size_t count = json_array_size(v);
    if (count == 0)
        return STATUS_OK;
    char **items = calloc(count, sizeof *items);
    if (items == NULL)
        return STATUS_ENOMEM;
    for (size_t i = 0; i < count; i++) {
        const char *s = json_string_value(json_array_get(v, i));
        if (s == NULL) {
            free(items);
            return STATUS_EPROTO;
        }
        items[i] = (char *)s;
    }
    *out = items;
    *n = count;
    return STATUS_OK;
}

int receipt_json_parse(const json_t *j, Charter__V1__Receipt *r)
{
    charter__v1__receipt__init(r);
    if (!json_is_object(j))
        return STATUS_EPROTO;
    int rc = parse_text(j, "kind", &r->kind);
    if (rc == STATUS_OK)
        rc = parse_text(j, "run_id", &r->run_id);
    if (rc == STATUS_OK)
        rc = parse_text(j, "invocation_id", &r->invocation_id);
    if (rc == STATUS_OK)
        rc = parse_text(j, "payload_hash", &r->payload_hash);
    if (rc == STATUS_OK)
        rc = parse_text(j, "recipient", &r->recipient);
    if (rc == STATUS_OK)
        rc = parse_text(j, "tool", &r->tool);
    if (rc == STATUS_OK)
        rc = parse_text(j, "time", &r->time);
    if (rc == STATUS_OK)
        rc = parse_text(j, "evaluator", &r->evaluator);
    if (rc == STATUS_OK)
        rc = parse_text(j, "status", &r->status);
    if (rc == STATUS_OK)
        rc = parse_text(j, "last_event_hash", &r->last_event_hash);
    if (rc == STATUS_OK)
        rc = parse_text(j, "mac", &r->mac);
    if (rc == STATUS_OK)
        rc = parse_text(j, "signature", &r->signature);
    if (rc == STATUS_OK)
        rc = parse_text(j, "key_id", &r->key_id);
    if (rc == STATUS_OK)
        rc = parse_text(j, "signed_text", &r->signed_text);
    if (rc == STATUS_OK)
        rc = parse_text(j, "prev_receipt_hash", &r->prev_receipt_hash);
    if (rc == STATUS_OK)
        rc = parse_text(j, "budget", &r->budget);
    if (rc == STATUS_OK)
        rc = parse_text(j, "counters", &r->counters);
    const json_t *cseq = json_object_get(j, "chain_seq");
    if (rc == STATUS_OK && json_is_integer(cseq) && json_integer_value(cseq) >= 0)
        r->chain_seq = (uint64_t)json_integer_value(cseq);
    else if (rc == STATUS_OK && cseq != NULL && !json_is_null(cseq))
        rc = STATUS_EPROTO;
    const json_t *seq = json_object_get(j, "last_seq");
    if (rc == STATUS_OK && json_is_integer(seq) && json_integer_value(seq) >= 0) {
        r->last_seq = (uint64_t)json_integer_value(seq);
    } else if (rc == STATUS_OK && json_is_string(seq)) {
        char *end = NULL;
        const char *s = json_string_value(seq);
        r->last_seq = strtoull(s, &end, 10);
        if (*s < '0' || *s > '9' || end == NULL || *end != '\0')
            rc = STATUS_EPROTO;
    } else if (rc == STATUS_OK && seq != NULL && !json_is_null(seq)) {
        rc = STATUS_EPROTO;
    }
    if (rc == STATUS_OK)
        rc = parse_list(j, "grant_chain", &r->grant_chain, &r->n_grant_chain);
    if (rc == STATUS_OK)
        rc = parse_list(j, "deliveries", &r->deliveries, &r->n_deliveries);
    if (rc == STATUS_OK)
        rc = parse_list(j, "lineage", &r->lineage, &r->n_lineage);
    if (rc != STATUS_OK)
        receipt_json_clear(r);
    return rc;
}
