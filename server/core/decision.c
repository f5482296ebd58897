/*
 * decision.c - the wire spelling of outcomes and decision codes (see decision.h).
 */
#include "core/decision.h"

#include <string.h>

static const char *const code_names[GUARD_CODE_COUNT] = {
    [GUARD_INPUT_OUT_OF_SCOPE] = "INPUT_OUT_OF_SCOPE",
    [GUARD_CLEARANCE_EXCEEDED] = "CLEARANCE_EXCEEDED",
    [GUARD_RESOURCE_OUT_OF_SCOPE] = "RESOURCE_OUT_OF_SCOPE",
    [GUARD_GRANT_INVALID] = "GRANT_INVALID",
    [GUARD_GRANT_NOT_FOUND] = "GRANT_NOT_FOUND",
    [GUARD_IDENTITY_MISMATCH] = "IDENTITY_MISMATCH",
    [GUARD_STEP_MISMATCH] = "STEP_MISMATCH",
    [GUARD_PROVENANCE_INCOMPLETE] = "PROVENANCE_INCOMPLETE",
    [GUARD_LABEL_MISMATCH] = "LABEL_MISMATCH",
    [GUARD_DELIVERY_CONFLICT] = "DELIVERY_CONFLICT",
    [GUARD_GRAPH_ERROR] = "GRAPH_ERROR",
    [GUARD_EFFECT_UNKNOWN] = "EFFECT_UNKNOWN",
    [GUARD_CONTROL_UNTRUSTED] = "CONTROL_UNTRUSTED",
    [GUARD_RECIPIENT_UNKNOWN] = "RECIPIENT_UNKNOWN",
    [GUARD_TOOL_NOT_PERMITTED] = "TOOL_NOT_PERMITTED",
    [GUARD_RESOURCE_QUARANTINED] = "RESOURCE_QUARANTINED",
};

const char *decision_code_name(guard_code code)
{
    if ((int)code < 0 || code >= GUARD_CODE_COUNT)
        return "UNKNOWN_CODE";
    return code_names[code];
}

int decision_code_from_name(const char *name)
{
    for (int c = 0; name != NULL && c < GUARD_CODE_COUNT; c++)
        if (strcmp(code_names[c], name) == 0)
            return c;
    return -1;
}

const char *decision_outcome_name(guard_outcome outcome)
{
    switch (outcome) {
    case GUARD_ALLOW:
        return "allow";
    case GUARD_DENY:
        return "deny";
    case GUARD_UNKNOWN:
    default:
        return "unknown";
    }
}
