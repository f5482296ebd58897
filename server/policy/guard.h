/*
 * guard.h - the policy evaluator: facts in, a decision out.
 *
 * The guard is pure: it includes no I/O header, reads no clock and allocates only the decision
 * it returns. Every fact it decides from (ancestry, grant chain, context owners, the database
 * time) is handed in by the caller, fetched through the query library. Missing or malformed
 * facts never become ALLOW: they give UNKNOWN or DENY with a code.
 *
 * Labels are recomputed, never trusted: a source artifact's confidentiality and integrity are
 * those of its one registered resource; a derived artifact's confidentiality is the maximum of
 * its parents', its integrity the minimum. A stored label that disagrees is LABEL_MISMATCH.
 *
 * A gate collects every code that applies. The outcome is UNKNOWN when GRAPH_ERROR is among
 * them (facts missing, truncated or of the wrong object), else DENY when any code applies,
 * else ALLOW. The witness is that of the first collected code in this order: GRAPH_ERROR,
 * STEP_MISMATCH, IDENTITY_MISMATCH, GRANT_NOT_FOUND, PROVENANCE_INCOMPLETE, LABEL_MISMATCH,
 * INPUT_OUT_OF_SCOPE, CLEARANCE_EXCEEDED, RESOURCE_OUT_OF_SCOPE, GRANT_INVALID,
 * DELIVERY_CONFLICT; within one code, the first fault found (lineage breadth-first from the
 * payload, the chain from its leaf up). A path witness is written source first, the resource
 * standing for its source artifact, then the titles (ids when untitled) up to the payload,
 * along a shortest DERIVED_FROM path.
 *
 * Every gate overwrites *out without freeing it: free a decision before reusing it.
 */
#ifndef CHARTER_GUARD_H
#define CHARTER_GUARD_H

#include <stdbool.h>
#include <stddef.h>

#include "core/decision.h"

/* Confidentiality levels (Resource.conf, Artifact.conf, Recipient.clearance). */
enum { GUARD_CONF_PUBLIC = 0, GUARD_CONF_INTERNAL = 1, GUARD_CONF_CONFIDENTIAL = 2 };
/* Integrity levels. */
enum { GUARD_INTEGRITY_UNTRUSTED = 0, GUARD_INTEGRITY_TRUSTED = 1 };

/* A list of strings; the guard never frees or changes one it is given. */
typedef struct {
    char **items;
    size_t n;
} guard_strs;

/* A registered resource as seen through a FROM_RESOURCE edge. */
typedef struct {
    char *id;
    char *title;
    int conf;      /* GUARD_CONF_* ; -1 when the fact is missing */
    int integrity; /* GUARD_INTEGRITY_* ; -1 when missing */
    /* A summary's source as it stands now: when the resource is quarantined, the time (the
     * database's) and the operator's reason; "" or NULL when it is not (or the facts were
     * recorded before quarantines were read: the verdict is then the one they gave). */
    char *quarantined_at;
    char *quarantined;
} guard_resource;

/* One artifact of an ancestry with every edge around it (full collections, so the guard sees
 * missing parents, extra parents and wrong cardinalities). */
typedef struct {
    char *id;
    char *run_id;
    char *title;
    bool is_source;            /* kind == "source" */
    bool kind_known;           /* false when kind is missing or neither source nor derived */
    int conf;                  /* stored label; -1 when missing */
    int integrity;             /* stored label; -1 when missing */
    bool capture_complete;     /* the host recorded exactly the model request's inputs */
    char *hash;                /* hex SHA-256 of content as stored */
    guard_strs input_ids;      /* recorded at capture: the model request's inputs */
    guard_strs parents;        /* DERIVED_FROM edges */
    guard_resource *resources; /* FROM_RESOURCE edges */
    size_t n_resources;
    guard_strs producers; /* contexts with a PRODUCED edge to it */
} guard_artifact;

/* Every artifact reachable from root through DERIVED_FROM, root included. An ancestry whose
 * root is absent (items has no artifact with id == root) is PROVENANCE_INCOMPLETE; one that
 * is truncated is UNKNOWN GRAPH_ERROR (a cut-off lineage proves nothing either way). */
typedef struct {
    char *root;
    guard_artifact *items;
    size_t n;
    bool truncated; /* the query stopped at its size limit: facts incomplete */
} guard_ancestry;

typedef struct {
    char *id;
    char *kind; /* "human" or "agent" */
} guard_actor_ref;

/* One grant of a delegation chain with its edges. */
typedef struct {
    char *id;
    bool root;
    guard_strs tools;
    guard_strs recipients;
    guard_strs resources;
    double valid_from;  /* seconds since the epoch */
    double valid_to;    /* seconds since the epoch; the grant is valid while now < valid_to */
    double revoked_at;  /* 0 when not revoked */
    guard_strs parents; /* DELEGATED_FROM edges */
    guard_actor_ref *grantees; /* GRANTED_TO edges */
    size_t n_grantees;
    guard_actor_ref *issuers; /* ISSUED_BY edges (root grants) */
    size_t n_issuers;
} guard_grant;

/* The leaf grant and every grant reachable above it through DELEGATED_FROM, in any order. */
typedef struct {
    char *leaf;
    guard_grant *items;
    size_t n;
} guard_chain;

/* The server-owned capability of a step (the model never chooses any of it). */
typedef struct {
    char *step;
    char *actor;
    char *grant;
    guard_strs tools;
    guard_strs recipients;
    guard_strs resources;
} guard_stepcap;

/* The acting context as stored: its run, its step and its OWNED_BY actors. */
typedef struct {
    char *id;
    char *run_id;
    char *step;
    guard_strs owners;
} guard_context;

/* The facts of a host identity check: what a host credential acts through and whom it acts
 * for. */
typedef struct {
    char *subject;     /* what the call acts through: "context c3" or "step analyze" */
    guard_strs owners; /* its owners: the context's OWNED_BY actors, or the step's actor */
    char *credential;  /* the host credential's id */
    guard_strs actors; /* the actors the credential is bound to */
} guard_identity;

struct guard_summary;

/* A delivery request after the server resolved it. */
typedef struct {
    char *run_id;
    char *payload_id;
    char *recipient;
    int recipient_clearance; /* -1 when the recipient is unknown */
    char *tool;
    char *grant; /* the grant the request acts under (the step's) */
    /* The payload's lineage summary with its facts (guard_summary), or NULL: when set, the
     * payload's lineage is decided from it and the ancestry is not read. Borrowed. */
    const struct guard_summary *summary;
    /* The workflow declares tool with arguments: it is invoked, never delivered to
     * (TOOL_NOT_PERMITTED, decided alone). */
    bool live_tool;
} guard_delivery_request;

/* The verdict. codes is a bit set over guard_code; witness is a heap string (may be NULL for
 * ALLOW) owned by the decision and freed by guard_decision_free. */
typedef struct {
    guard_outcome outcome;
    unsigned codes;
    char *witness;
    /* For an allowed delivery: the chain leaf-first (ids borrowed from the chain facts) and
     * the payload's source resources (borrowed from the ancestry facts), which the
     * conditional commit re-checks on the database clock. */
    guard_strs chain_order;
    guard_strs sources;
} guard_decision;

/* Labels recomputed from the ancestry for artifact id (conf = max over sources, integrity = min).
 * Returns 0 and writes *conf, *integrity; -1 when the ancestry cannot supply them (missing
 * artifact, missing resource labels, a cycle), in which case nothing is written. */
int guard_recompute_labels(const guard_ancestry *anc, const char *id, int *conf, int *integrity);

/* Input gate (DESIGN.md "Input gate"): may the artifact whose ancestry is anc enter a model
 * request of the step cap in context ctx of run run_id?
 * ALLOW when the ancestry is complete, well formed, of this run, correctly labelled and every
 * source resource is in cap->resources; DENY INPUT_OUT_OF_SCOPE with a witness such as
 * "budget (confidential) → Internal recommendation → report step {vendor_a, vendor_b}" when a
 * source is outside; DENY IDENTITY_MISMATCH / STEP_MISMATCH when ctx is not owned by exactly
 * cap->actor, not of cap->step or of another run.
 * Well formed lineage (else PROVENANCE_INCOMPLETE): the root is present, ids are unique, every
 * artifact is of run_id, of a known kind, with a 64-hex-digit hash, and reachable from the
 * root; a source has no parents, no recorded inputs, exactly one FROM_RESOURCE resource with
 * valid labels and at most one producer; a derived artifact has no resource, at least one
 * parent, capture_complete, exactly one producer, DERIVED_FROM parents equal as a set to its
 * input_ids, and every parent present; there is no DERIVED_FROM cycle.
 * A missing ancestry, a truncated one, or cap / ctx / run_id NULL gives UNKNOWN GRAPH_ERROR.
 * On ALLOW, out->sources holds the distinct source resource ids, sorted (borrowed from anc).
 * Returns 0, or -1 on allocation failure (out is then UNKNOWN GRAPH_ERROR). */
int guard_check_input(const guard_stepcap *cap, const guard_context *ctx, const char *run_id,
                      const guard_ancestry *anc, guard_decision *out);

/* The lineage summary of one artifact, stored at its creation (README "Lineage summaries"),
 * with the facts a decision reads beside it: the artifact's own fields and edges as they stand
 * and the current labels of the sources the summary names. Strings are owned (facts.c). */
typedef struct guard_summary {
    char *id;           /* the artifact the facts are of */
    bool verified;      /* the stored text hashes to summary_hash and decodes as a summary */
    char *unverified;   /* when charterd found it unusable: why (no summary, no seal, a seal
                         * that does not verify), the witness of its UNKNOWN; else NULL */
    char *summary_hash; /* hex SHA-1 as stored */
    /* what the summary says */
    char *run_id;
    char *kind;
    char *resource;          /* a source's resource; "" for a derived artifact */
    char *hash;              /* its content hash at creation; "" in summaries kept before it was */
    int conf;                /* recomputed at creation; -1 when it could not be */
    int integrity;           /* idem */
    bool ok;                 /* every structural rule of the input gate held at creation */
    char *code;              /* when not ok: LABEL_MISMATCH or PROVENANCE_INCOMPLETE */
    char *why;               /* and its witness */
    guard_strs parents;      /* the parents it names, sorted */
    guard_resource *sources; /* every source reached, sorted, labels as at creation */
    size_t n_sources;
    /* the graph now */
    char *now_run_id;
    char *now_kind;
    char *now_hash;
    char *now_title;             /* for witnesses; "" when untitled */
    int now_conf;                /* stored label; -1 when missing */
    int now_integrity;           /* idem */
    guard_strs now_parents;      /* DERIVED_FROM, sorted */
    guard_strs now_resources;    /* FROM_RESOURCE, sorted */
    guard_strs now_producers;    /* contexts with a PRODUCED edge to it */
    guard_resource *now_sources; /* the same sources in the same order, current labels */
    size_t n_now_sources;
} guard_summary;

/* Input gate decided from a summary instead of the ancestry: the same rule, read from what
 * was derived at creation. ctx as guard_check_input. UNKNOWN GRAPH_ERROR when s is NULL, not
 * verified (witness s->unverified when set, else "the lineage summary of <id> does not hash to
 * its summary_hash"), or a source's current labels are missing; PROVENANCE_INCOMPLETE when the
 * summary is of another run, the artifact's own DERIVED_FROM / FROM_RESOURCE edges, kind or run are
 * not the ones the summary names, it has not exactly one producing context (a source at most one),
 * its hash is not 64 hex digits, or the summary records a
 * provenance failure; LABEL_MISMATCH when the stored labels are not the summary's, a source's
 * labels changed since, or the summary records one; DENY INPUT_OUT_OF_SCOPE when a source is
 * outside cap->resources (witness "budget (confidential) → a7 → report step {...}"; the gate
 * builds the full path on that deny path from the ancestry). On ALLOW, out->sources holds the
 * sources (borrowed from s). Returns 0, or -1 on allocation failure. */
int guard_check_input_summary(const guard_stepcap *cap, const guard_context *ctx,
                              const char *run_id, const guard_summary *s, guard_decision *out);

/* Delivery gate (DESIGN.md "Delivery gate"): may the payload be sent?
 * Checks the request against the step (tool in cap->tools, recipient in cap->recipients,
 * req->grant == cap->grant: else STEP_MISMATCH), the context as the input gate does (of
 * req->run_id), the ancestry as the input gate does (anc->root must be req->payload_id),
 * clearance (no source above the recipient's clearance: CLEARANCE_EXCEEDED, witness like
 * "budget (confidential) → Internal recommendation → public (clearance public)"), resources
 * (every source in cap->resources and in every grant of the chain: RESOURCE_OUT_OF_SCOPE,
 * witness ending "→ report step {...}" or "→ grant g_reporter {...}"), and the chain
 * (guard_check_chain with actor cap->actor at time now, seconds since the epoch), every grant
 * on it listing the tool and the recipient (else GRANT_INVALID, "g_analyst does not cover tool
 * deliver_public"). UNKNOWN GRAPH_ERROR when the recipient's clearance is -1, the ancestry is
 * missing, truncated or of another payload, or the chain facts are of another grant.
 * All failing codes are collected; the witness follows the order above. On ALLOW,
 * out->chain_order (leaf first) and out->sources (sorted) are set for the conditional commit.
 * Returns 0, or -1 on allocation failure (out is then UNKNOWN GRAPH_ERROR). */
int guard_check_delivery(const guard_stepcap *cap, const guard_context *ctx,
                         const guard_delivery_request *req, const guard_ancestry *anc,
                         const guard_chain *chain, double now, guard_decision *out);

/* One argument of a tool invocation after the server resolved its value's lineage. */
typedef struct {
    const char *name;
    bool control; /* role control (its integrity must be trusted); else data */
    /* The summaries of the artifacts the value came from (borrowed): the inputs of the model
     * request that wrote it, or the one artifact it was quoted from. None for a value shown to
     * be the run's task's words (trusted, public, no source). */
    const struct guard_summary *const *lineage;
    size_t n_lineage;
} guard_invoke_arg;

/* A tool invocation after the server resolved it (every string borrowed). */
typedef struct {
    const char *run_id;
    const char *tool;
    bool declared; /* the workflow declares tool with its arguments' roles */
    const char *grant;
    const char *destination_arg;   /* the control argument matched, NULL: no destination */
    const char *destination_value; /* its value */
    const char *destination;       /* the class it matched, NULL when none did */
    int clearance; /* that class's clearance; with no destination argument, the tool's own
                    * (its "clearance", public when absent); -1 when unknown */
    int version;   /* the evaluator version whose rules decide; 0: the current rules. Before
                    * GUARD_INVOKE_EVERY_ARGUMENT only data values were held to a clearance */
    const guard_invoke_arg *args;
    size_t n_args;
} guard_invoke_request;

/* The first evaluator version under which every argument's value, control or data, is held
 * to the clearance (of the destination class, or of the tool when it has no destination): a
 * control value leaves charter as surely as a data value does. */
#define GUARD_INVOKE_EVERY_ARGUMENT 3

/* Tool-call gate (docs/workflows.md, "Tools with arguments"): may the tool be invoked with
 * these values? TOOL_NOT_PERMITTED when the tool is not among cap->tools or not declared
 * (nothing else is judged then). Otherwise, all collected: the context as the input gate
 * checks it; RECIPIENT_UNKNOWN when the destination value matches no class, STEP_MISMATCH
 * when its class is not among cap->recipients; per value, its summaries as the input gate
 * reads them (UNKNOWN when one is unusable, PROVENANCE_INCOMPLETE / LABEL_MISMATCH), then
 * CONTROL_UNTRUSTED for a control value reaching an untrusted source (witness "argument iban
 * ← transactions (public) → Transaction notes: a control argument must be trusted"),
 * CLEARANCE_EXCEEDED for a value (control or data; data only before
 * GUARD_INVOKE_EVERY_ARGUMENT) reaching a source above req->clearance (witness "argument to ←
 * report (confidential) → anyone (clearance public)", or "... → tool open_folder (clearance
 * public)" for a tool without a destination),
 * RESOURCE_OUT_OF_SCOPE for a source outside cap->resources; and the chain
 * (guard_check_chain), every grant on it listing the tool, the destination class and every
 * data value's sources. On ALLOW out->chain_order (leaf first) and out->sources (the data
 * values' sources, borrowed) are set for the conditional commit. Returns 0, or -1 on
 * allocation failure (out is then UNKNOWN GRAPH_ERROR). */
int guard_check_invoke(const guard_stepcap *cap, const guard_context *ctx,
                       const guard_invoke_request *req, const guard_chain *chain, double now,
                       guard_decision *out);

/* Delegation chain validation: from chain->leaf up to a root, exactly one DELEGATED_FROM parent
 * per non-root grant (else branched), that parent present in the chain facts (else the chain
 * is incomplete), no grant seen twice (cycle), the root has root = true and exactly one issuer
 * whose kind is "human", no parent above the root, every grant unrevoked (revoked_at 0) and
 * valid_from <= now < valid_to (now in seconds since the epoch), the leaf's grantees are
 * exactly {actor}. Any failure is DENY GRANT_INVALID (GRANT_NOT_FOUND when the leaf is absent;
 * IDENTITY_MISMATCH for the grantee) with a witness naming the grant ("g_reporter revoked",
 * "g_x expired", "g_x not yet valid", "delegation cycle at g_x", ...). Grants in the facts but
 * off the walked chain are ignored. chain NULL gives UNKNOWN GRAPH_ERROR. On ALLOW,
 * out->chain_order holds the grants leaf first (ids borrowed from chain).
 * Returns 0, or -1 on allocation failure (out is then UNKNOWN GRAPH_ERROR). */
int guard_check_chain(const guard_chain *chain, const char *actor, double now, guard_decision *out);

/* Host identity (docs/concepts.md "Rule IDs", RULE-HOST-IDENTITY): a host credential acts only for
 * the actors it is bound to, so it may act through a context or open a step only when one of the
 * subject's owners is among its actors. ALLOW then; else DENY IDENTITY_MISMATCH with the witness
 * "context c3 is owned by {analyst}; credential <id> acts for {reporter}" (no owner, or no
 * actor, is a mismatch too). id NULL, or a subject or credential missing, gives UNKNOWN
 * GRAPH_ERROR. Returns 0, or -1 on allocation failure (out is then UNKNOWN GRAPH_ERROR). */
int guard_check_identity(const guard_identity *id, guard_decision *out);

/* Frees what a decision owns and zeroes it. Safe on a zeroed decision. */
void guard_decision_free(guard_decision *d);

/* Sets d to UNKNOWN GRAPH_ERROR with the given witness (copied; may be NULL). Used by callers
 * when facts could not be fetched. d is overwritten, not freed. Returns 0, -1 if the copy
 * failed (d is still UNKNOWN, without a witness). */
int guard_decision_unknown(guard_decision *d, const char *witness);

/* Codes as a comma-separated list of names ("PROVENANCE_INCOMPLETE,LABEL_MISMATCH", in code
 * order, no spaces) into buf (size bytes, always terminated when size > 0). Only whole names
 * are written: names that do not fit are left out. */
void guard_codes_format(unsigned codes, char *buf, size_t size);

#endif
