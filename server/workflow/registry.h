/*
 * registry.h - the workflows this charterd knows, by version.
 *
 * Definitions live in the graph (charter_put_workflow), so every charterd serving it sees the
 * same ones. A process parses each version it meets once, on demand, and keeps it until exit:
 * a loaded workflow is immutable, so a pointer handed out stays valid and any thread reads it
 * without a lock. The table of loaded versions, and the narrowed step capabilities derived
 * from them, is process-wide and guarded by one mutex. A run pins the version it was created
 * with, so applying a definition never changes a run that exists.
 */
#ifndef CHARTER_REGISTRY_H
#define CHARTER_REGISTRY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "policy/guard.h"
#include "db/store.h"
#include "policy/workflow.h"

/* Distinct narrowed step capabilities kept at once; more is STATUS_ELIMIT (fail closed). */
#define REGISTRY_MAX_NARROWED 65536

/* Stores wf in st's graph exactly as ApplyWorkflow does (charter_put_workflow: its definition
 * bytes, and its resources, recipients, actors and grants where absent) and keeps it. Takes
 * ownership of wf in every case (it is freed on failure, or when the version was loaded
 * already). On success *out (may be NULL) is the kept workflow of that version and *info (may
 * be NULL; caller decrefs) is {"name","version","task","steps":[...],"applied_at","created"}
 * with created false when the version was stored already (nothing was written). Returns
 * STATUS_OK; STATUS_EREFUSED when an id of the definition names a node of the graph with other
 * content (err says which entry and what differs; nothing written); STATUS_EUNAVAILABLE,
 * STATUS_EPROTO, STATUS_ENOMEM with err set. err has errlen bytes, always terminated. */
int registry_install(store *st, workflow *wf, json_t **info, const workflow **out, char *err,
                     size_t errlen);

/* Validates the definition (len bytes, workflow_load_buffer) and installs it. Returns as
 * registry_install, and STATUS_EINVAL with the loader's one-line reason (field path and rule)
 * in err when the definition breaks a rule; nothing is written then. */
int registry_apply(store *st, const char *definition, size_t len, json_t **info, char *err,
                   size_t errlen);

/* Whether s is spelled as a workflow version: 64 lowercase hex digits. */
bool registry_is_version(const char *s);

/* The workflow ref names: a version (64 lowercase hex digits) or a name (the latest version
 * applied under it). Loaded from the graph the first time; the stored bytes must hash to the
 * version. Returns STATUS_OK and *out (kept until registry_shutdown), STATUS_ENOTFOUND,
 * STATUS_EINVAL (ref is neither), STATUS_EPROTO (the stored definition is not valid or not the
 * version it is stored as), STATUS_EUNAVAILABLE, STATUS_ENOMEM. */
int registry_get(store *st, const char *ref, const workflow **out);

/* As registry_get, but the graph of st is always asked, even for a version this process has
 * loaded already (for another graph, or before): STATUS_ENOTFOUND means st's graph holds no
 * such workflow. A process serves many graphs (tenants), and a workflow applied to one is not
 * in another; a run may only pin a version its own graph holds (CreateRun). Costs one call
 * (charter_get_workflow, whose reply carries the definition). */
int registry_held(store *st, const char *ref, const workflow **out);

/* The workflow run run_id follows (the version stored on the run). Returns as registry_get;
 * STATUS_ENOTFOUND for an unknown run too. */
int registry_run_workflow(store *st, const char *run_id, const workflow **out);

/* The step capability of base (a step of wf) narrowed to tools, recipients and resources:
 * every other field is base's. Each list must be a subset of base's (scopes only narrow): a
 * name outside it gives STATUS_EREFUSED. The result is kept (one per distinct narrowing) until
 * registry_shutdown. Returns STATUS_OK and *out, STATUS_EREFUSED, STATUS_ELIMIT (more than
 * REGISTRY_MAX_NARROWED), STATUS_ENOMEM. */
int registry_narrowed(const workflow *wf, const workflow_step *base, const guard_strs *tools,
                      const guard_strs *recipients, const guard_strs *resources,
                      const workflow_step **out);

/* Frees every kept workflow and narrowed capability. Call once, after every thread that may
 * hold one of their pointers has stopped. */
void registry_shutdown(void);

#endif
