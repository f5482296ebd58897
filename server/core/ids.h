/*
 * ids.h - the rules every id of the domain follows, in one place.
 *
 * The gates, the delivery protocol and the API handlers all accept ids; they check them here so
 * an id the server accepts is exactly one the query library accepts (queries/charter.lua
 * valid_id), whichever path it came in by.
 */
#ifndef CHARTER_IDS_H
#define CHARTER_IDS_H

#include <stdbool.h>

/* What an invocation ID must be, as an INVALID_ARGUMENT answer says it. */
#define IDS_INVOCATION_RULE                                                                        \
    "invocation_id: 1 to 128 of [A-Za-z0-9._:-], its part after the last colon not \"to\" or "     \
    "\"delivered\""

/* True when s is an id of the graph: 1 to 128 of [A-Za-z0-9._-]. NULL is not. */
bool ids_graph_ok(const char *s);

/* True when s is an invocation ID: 1 to 128 of [A-Za-z0-9._:-] (the colon lets a host build
 * one from a run, a step and a tool) whose part after its last colon (all of it, without one)
 * is neither "to" nor "delivered". NULL is not. */
bool ids_invocation_ok(const char *s);

#endif
