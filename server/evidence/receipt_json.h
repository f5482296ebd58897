/*
 * receipt_json.h - a receipt (charter.v1.Receipt) as its JSON object text: proto field names,
 * every field present, the same document `charter --json receipt` prints, `charter
 * verify-receipt` reads, a delivery keeps in the graph and an archive keeps offline.
 */
#ifndef CHARTER_RECEIPT_JSON_H
#define CHARTER_RECEIPT_JSON_H

#include <jansson.h>

#include "charter.pb-c.h"

/* r as a receipt JSON object (new reference), or NULL when memory ran out. */
json_t *receipt_json_of(const Charter__V1__Receipt *r);

/* Fills r from a receipt JSON object: strings borrowed from j (absent ones ""), the lists
 * grant_chain and deliveries malloc'd (free with receipt_json_clear), last_seq a JSON
 * integer or a decimal string. Returns STATUS_OK, STATUS_EPROTO for a field of the wrong type,
 * STATUS_ENOMEM. */
int receipt_json_parse(const json_t *j, Charter__V1__Receipt *r);
void receipt_json_clear(Charter__V1__Receipt *r);

#endif
