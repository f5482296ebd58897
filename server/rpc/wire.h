/*
 * wire.h - store replies (JSON objects of the query library) and guard decisions as protobuf
 * messages of charter.v1, built in a call's arena.
 *
 * Viewers get confidential content redacted: for ROLE_VIEWER, the content of an artifact whose
 * conf > 0, and of a delivery whose payload is not public, is left empty with redacted = true;
 * hashes and labels stay.
 */
#ifndef CHARTER_WIRE_H
#define CHARTER_WIRE_H

#include <jansson.h>

#include "rpc/call.h"
#include "charter.pb-c.h"
#include "policy/guard.h"

/* Each returns a message allocated in c's arena, or NULL on allocation failure or when j is
 * not an object. Missing fields become the proto defaults. */
Charter__V1__Artifact *wire_artifact(call *c, const json_t *j);
Charter__V1__Event *wire_event(call *c, const json_t *j);
Charter__V1__Delivery *wire_delivery(call *c, const json_t *j);
Charter__V1__Run *wire_run(call *c, const json_t *j);
Charter__V1__Grant *wire_grant(call *c, const json_t *j);
Charter__V1__Decision *wire_decision(call *c, const guard_decision *d);
/* The decision as an event (charter_get_event's object) recorded it: outcome, the codes of its
 * comma-separated list, witness. NULL when out of memory. */
Charter__V1__Decision *wire_event_decision(call *c, const json_t *event);
/* {"run","events","deliveries","artifacts"} as charter_get_run returns it. */
Charter__V1__RunView *wire_run_view(call *c, const json_t *j);

/* Copies a JSON list of strings into an arena array; *n gets its length. An empty object counts
 * as an empty list. Returns 0 or -1. */
int wire_strings(call *c, const json_t *list, char ***out, size_t *n);

/* An approval object (queries/approvals.lua) as a message in the call's arena, or NULL. */
Charter__V1__Approval *wire_approval(call *c, const json_t *j);

/* Every approval of the JSON list into *out (arena), *n its length. Returns 0 or -1. */
int wire_approvals(call *c, const json_t *list, Charter__V1__Approval ***out, size_t *n);

#endif
