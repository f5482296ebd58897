/*
 * workflow.h - a workflow definition: the resources, recipients, actors, grants and steps the
 * guard works with, loaded from JSON (deploy/workflows/procurement.json is the reference; any
 * number more are applied through the Workflows service and kept by registry.h).
 *
 * The definition is validated before anything is stored and then never changes. Its static
 * part (resources, recipients, actors, grants) is seeded into the graph; its steps are the
 * server-owned step capabilities (StepCap) the model never chooses; its optional expect list
 * says which decisions a scripted run of it must reach (`charter workflow rehearse`). version is
 * the hex SHA-256 of the file's bytes. A loaded workflow is never modified, so any number of
 * threads may read it at once (find steps, render, seed, ask the model).
 */
#ifndef CHARTER_WORKFLOW_H
#define CHARTER_WORKFLOW_H

#include <jansson.h>
#include <stddef.h>

#include "policy/guard.h"

/* Limits a definition must stay within (docs/workflows.md); larger definitions are refused. */
#define WORKFLOW_MAX_FILE_BYTES (1024 * 1024)
#define WORKFLOW_MAX_RESOURCES 256
#define WORKFLOW_MAX_RECIPIENTS 64
#define WORKFLOW_MAX_ACTORS 64
#define WORKFLOW_MAX_GRANTS 64
#define WORKFLOW_MAX_STEPS 32
#define WORKFLOW_MAX_TOOLS 64               /* per grant or step */
#define WORKFLOW_MAX_CONTENT_BYTES 65536    /* resource content, scripted reply content */
#define WORKFLOW_MAX_TITLE_BYTES 256        /* resource titles, output titles, public values */
#define WORKFLOW_MAX_TEXT_BYTES 4096        /* task, public_template */
#define WORKFLOW_MAX_PUBLIC_FIELDS 32       /* per step; also script fields */
#define WORKFLOW_MAX_PUBLIC_VALUES 64       /* allowed values per public field */
#define WORKFLOW_ID_MAX 64                  /* ids: 1..64 characters of [A-Za-z0-9._-] */
#define WORKFLOW_MAX_EXPECT 64              /* expectations in expect */
#define WORKFLOW_APPROVAL_MIN_MS 1000       /* a human approval's deadline, at least 1 s */
#define WORKFLOW_APPROVAL_MAX_MS 604800000  /* and at most 7 days */
#define WORKFLOW_MAX_OBSERVED_BYTES 1048576 /* an observed resource's max_bytes, at most 1 MiB */
#define WORKFLOW_MAX_MATCH_VALUES 256       /* values of a destination class */
#define WORKFLOW_MAX_ARGUMENTS 32           /* arguments of a tool */
#define WORKFLOW_MAX_SERVERS 16             /* downstream MCP servers */
#define WORKFLOW_MAX_SERVER_ARGS 64         /* a server's args; its env_from */
#define WORKFLOW_MAX_TOOL_NAME_BYTES 128    /* a downstream tool's name */

/* One step of the workflow, in execution order. Every string and guard_strs is owned by the
 * workflow; json_t members are borrowed from workflow.doc. An empty list means deny-all; it has
 * n == 0 and items may be NULL. */
typedef struct {
    guard_stepcap cap;   /* cap.step is the step's name */
    guard_strs reads;    /* resources the built-in runner reads as sources in this step */
    guard_strs receives; /* steps whose handed-off artifacts this step receives */
    char *output_title;  /* title of the artifact the step's model output becomes */
    char *deliver_tool;  /* the step's send, or NULL when it sends nothing */
    char *deliver_recipient;
    /* Public rendering: when set, the step's output is rendered by the server from
     * public_fields only; the model's free text never reaches the recipient. */
    json_t *public_fields; /* {"field": ["allowed", "values"], ...} or NULL (borrowed from doc) */
    char *public_template; /* text with {field} placeholders */
    json_t *script;        /* the scripted model's reply for this step (borrowed from doc) */
    bool recovery;         /* the step recovery re-runs from permitted inputs */
} workflow_step;

typedef struct {
    char *name;
    char *task;
    char version[65]; /* hex SHA-256 of the definition's bytes */
    json_t *doc;      /* the parsed definition (owned) */
    char *definition; /* the definition's bytes exactly as loaded, NUL-terminated (owned) */
    size_t definition_len;
    workflow_step *steps;
    size_t n_steps;
} workflow;

/* Loads and validates the definition at path (at most WORKFLOW_MAX_FILE_BYTES). On success
 * returns 0 and *out owns a new workflow (free with workflow_free). On failure returns -1,
 * leaves *out NULL and writes a one-line reason naming the field path and the rule into err
 * (errlen bytes, always terminated), e.g.
 * "grants[2].tools: \"deliver_public\" is not in the parent grant g_analyst's tools (widening)".
 * The rules are those of docs/workflows.md; the first violation found is reported. */
int workflow_load_file(const char *path, workflow **out, char *err, size_t errlen);

/* Same from bytes already in memory (len bytes, not necessarily NUL-terminated); version is
 * the hex SHA-256 of exactly these bytes. */
int workflow_load_buffer(const char *buf, size_t len, workflow **out, char *err, size_t errlen);

/* Receives one problem of a definition: the line workflow_load_buffer would give for it, e.g.
 * "grants[2].tools: \"deliver_public\" is not in the parent grant g_analyst's tools (widening)". */
typedef void (*workflow_problem_fn)(void *arg, const char *line);

/* Checks the definition in buf (len bytes) by the rules of workflow_load_buffer without
 * stopping at the first problem: every entry of resources, recipients, actors, grants, steps,
 * tools and expect that breaks a rule is handed to each (the first rule that entry breaks), in
 * the order workflow_load_buffer checks them, so the first line is the one it would give. A part
 * that refers to a part with problems is not checked, since its references could only be judged
 * against entries that are wrong: grants refer to resources, recipients and actors, steps to
 * grants, tools and expect to steps. Those parts are named in unchecked (n bytes, e.g. "steps,
 * tools, expect"; "" when every part was checked). A problem of the file as a whole (too large,
 * not JSON, not an object, an unknown or missing top-level field) is the only one reported.
 * each may be NULL (only count). Keeps nothing. Returns the number of problems: 0 exactly when
 * workflow_load_buffer accepts the definition. */
size_t workflow_check_buffer(const char *buf, size_t len, workflow_problem_fn each, void *arg,
                             char *unchecked, size_t n);

/* Parses a time of a definition (docs/workflows.md "Times": exactly "2026-01-01T00:00:00Z",
 * RFC 3339 in UTC with whole seconds, years 1970..9999) into *out, seconds since the epoch.
 * Returns 0, or -1 when s is not such a time (nothing written). */
int workflow_time_parse(const char *s, long long *out);

/* Frees the workflow and everything it owns; NULL is accepted. */
void workflow_free(workflow *wf);

/* The step named name, or NULL. */
const workflow_step *workflow_step_find(const workflow *wf, const char *name);

/* Whether a send with tool to recipient needs a human's approval (the tool's entry in the
 * definition's "tools", or the recipient's "approval"): returns 1 with *by the approver (a human
 * actor of wf, borrowed from wf) and *within_ms the time the approver has, in milliseconds (the
 * shorter when both ask; validation made both name the same approver), or 0 when none is
 * needed (*by NULL). */
int workflow_approval_for(const workflow *wf, const char *tool, const char *recipient,
                          const char **by, long long *within_ms);

/* The budgets a grant may carry a ceiling for: max_wall_clock_ms, max_model_calls, max_steps,
 * max_deliveries, in that order (workflow_budget_name). */
#define WORKFLOW_N_BUDGETS 4

/* The k-th budget's name (k < WORKFLOW_N_BUDGETS), or NULL. */
const char *workflow_budget_name(size_t k);

/* The lowest ceiling of each budget over every grant on the delegation chain of every step's
 * grant (0: no grant sets one), and the grant that sets it (borrowed from wf, or NULL): a run
 * of wf may not ask more (budgets narrow like authority). Returns 0, or -1 when a step's grant
 * is not in the definition (validation rules it out). */
int workflow_budget_ceilings(const workflow *wf, long long ceiling[WORKFLOW_N_BUDGETS],
                             const char *grant[WORKFLOW_N_BUDGETS]);

/* Whether resource_id is an observed resource of wf (its content is read by a host at run
 * time and recorded with Gate/ObserveSource): 1 with *max_bytes its limit in bytes and
 * *content_type its declared media type (borrowed from wf, NULL when none), else 0 (nothing
 * written). */
int workflow_observed(const workflow *wf, const char *resource_id, long long *max_bytes,
                      const char **content_type);

/* The declaration of live tool tool in wf ({arguments:[{name,role}], effect?, destination?,
 * result?, approval?}, borrowed from wf->doc), or NULL when wf declares no such tool with
 * arguments: such a tool cannot be invoked (TOOL_NOT_PERMITTED). */
const json_t *workflow_live_tool(const workflow *wf, const char *tool);

/* The role ("data" or "control", borrowed) of argument name of a live tool declaration, or
 * NULL when the tool declares no such argument. */
const char *workflow_argument_role(const json_t *tool, const char *name);

/* The clearance of live tool declaration tool's own server (0 public, 1 internal,
 * 2 confidential): its "clearance", public when absent, so that a tool nobody said may hold
 * labelled values holds none. It decides a tool without a destination argument; a tool with
 * one is held to the destination class matched (docs/workflows.md, "Tools with arguments"). */
int workflow_tool_clearance(const json_t *tool);

/* The destination class value belongs to: the first recipient of wf, in the definition's
 * order, whose "match" holds for value (a suffix it ends with, a listed value, or a pattern
 * matching all of it). Returns its id (borrowed) with *clearance (0 public, 1 internal,
 * 2 confidential), or NULL when no class matches (RECIPIENT_UNKNOWN). */
const char *workflow_match_destination(const workflow *wf, const char *value, int *clearance);

/* The step recovery re-runs (the last step with "recovery": true), or NULL. */
const workflow_step *workflow_recovery_step(const workflow *wf);

/* The argument of charter_seed (queries/README.md):
 *   {"resources":[{id,title,conf,integrity,content}], "recipients":[{id,clearance}],
 *    "actors":[{id,kind}], "grants":[{id,root,grantee,issuer,delegated_from,tools,recipients,
 *    resources,valid_from,valid_to}]}
 * conf, clearance: 0 public, 1 internal, 2 confidential; integrity: 0 untrusted, 1 trusted;
 * root: a JSON boolean; valid_from, valid_to: integer seconds since the epoch. A root grant has
 * "issuer" and no "delegated_from" key; a delegated grant has "delegated_from" and no "issuer"
 * key (absent keys are omitted, never null). New reference owned by the caller, or NULL on
 * allocation failure. */
json_t *workflow_seed_json(const workflow *wf);

/* Renders the public text of step from the model's fields: every placeholder of the template
 * replaced by its field's value, each value checked against the field's allowed values. A field
 * that is missing, not a string, or not allowed, or a field the step does not declare, is
 * refused. Returns 0 and sets *out (malloc'd, caller frees) or -1 with a reason in err. */
int workflow_render_public(const workflow_step *step, const json_t *fields, char **out, char *err,
                           size_t errlen);

/* True when text holds no control character (C0, DEL or C1): a text shown as one line (a
 * locator) never forges another line or a terminal sequence. */
bool workflow_one_line(const char *text);

#endif
