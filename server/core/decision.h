/*
 * decision.h - the decision vocabulary: the outcome of every decision and the codes that say
 * why (DESIGN.md "Guard").
 *
 * The guard (policy/) decides in these words, the event log (evidence/) records them and the
 * metrics (core/metrics.c) count them, so they sit below all three. The types keep the guard's
 * name: a code is always one the guard gives.
 */
#ifndef CHARTER_DECISION_H
#define CHARTER_DECISION_H

typedef enum { GUARD_ALLOW = 1, GUARD_DENY = 2, GUARD_UNKNOWN = 3 } guard_outcome;

/* Decision codes; DESIGN.md "Guard". decision_code_name() gives the wire spelling. */
typedef enum {
    GUARD_INPUT_OUT_OF_SCOPE = 0,
    GUARD_CLEARANCE_EXCEEDED,
    GUARD_RESOURCE_OUT_OF_SCOPE,
    GUARD_GRANT_INVALID,
    GUARD_GRANT_NOT_FOUND,
    GUARD_IDENTITY_MISMATCH,
    GUARD_STEP_MISMATCH,
    GUARD_PROVENANCE_INCOMPLETE,
    GUARD_LABEL_MISMATCH,
    GUARD_DELIVERY_CONFLICT,
    GUARD_GRAPH_ERROR,
    /* With GRAPH_ERROR on an UNKNOWN delivery: a commit was sent and its outcome could not be
     * learned, so the effect is not known (it may have landed, or land later); a retry with the
     * same invocation ID learns it. Claims neither an effect nor its absence. */
    GUARD_EFFECT_UNKNOWN,
    /* Gate/Invoke (docs/workflows.md, "Tools with arguments"): a control argument's value
     * derives from an untrusted source; the destination value matches no destination class;
     * the tool is not a declared live tool of the step. */
    GUARD_CONTROL_UNTRUSTED,
    GUARD_RECIPIENT_UNKNOWN,
    GUARD_TOOL_NOT_PERMITTED,
    /* Every gate: a source the artifact derives from was quarantined by an operator
     * (Resources/QuarantineResource); released, the artifact is decided as before. */
    GUARD_RESOURCE_QUARANTINED,
    GUARD_CODE_COUNT
} guard_code;

/* Spelling of a code on the wire ("INPUT_OUT_OF_SCOPE", ...), or "UNKNOWN_CODE" for a value
 * outside the enum. */
const char *decision_code_name(guard_code code);
/* The code for a wire spelling, or -1. */
int decision_code_from_name(const char *name);
/* "allow", "deny" or "unknown". */
const char *decision_outcome_name(guard_outcome outcome);

#endif
