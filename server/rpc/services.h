/*
 * services.h - the method tables of charter.v1's services.
 *
 * Each row declares a method once: its name in proto/charter.proto, its request and response
 * messages, the minimum role that may call it, whether a host credential may call it, the
 * tenant quota it takes, what --scripted-only does to it, and its handler. dispatch.c checks
 * every row against protobuf-c's generated service descriptors at startup (same names, same
 * messages, every method present once, known column values), so a row that names the wrong
 * method or message stops charterd, and it enforces the row's role, host column, scripted-only
 * column and quota before the handler runs, so no handler checks them itself.
 */
#ifndef CHARTER_SERVICES_H
#define CHARTER_SERVICES_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#include "rpc/call.h"
#include "core/role.h"

/* Whether a host credential (ROLE_HOST) may call a method. Only the agent-facing methods of
 * the Gate service, and Runs/CompleteRun (the host ends the external run it drove): each acts
 * through a step, a context or a run the identity gate (gates/identity.c) checks is one of the
 * host's actors'. A row open without a token (ROLE_NONE) is open to a host too, whatever this
 * says. */
typedef enum {
    SVC_NO_HOST = 0,
    SVC_HOST = 1,
} svc_host;

/* The quota of its tenant a call takes one of before its handler runs, given back when the
 * call fails (tenant.h, tenant_quota_take): a method that writes what the quota counts. */
typedef enum {
    SVC_QUOTA_NONE = 0,
    SVC_QUOTA_RUNS = 1,      /* max_runs: a new run */
    SVC_QUOTA_ARTIFACTS = 2, /* max_artifacts: a new artifact */
} svc_quota;

/* What --scripted-only (a shared demo) does to a method: refused with PERMISSION_DENIED before
 * its handler runs, or served. */
typedef enum {
    SVC_SCRIPTED_SERVED = 0,
    SVC_SCRIPTED_LIVE_RUN = 1,      /* refused when its request's string field "mode" is "live" */
    SVC_SCRIPTED_GRANT_CONTROL = 2, /* refused: grants and quarantines stay as the demo set them */
} svc_scripted;

typedef struct {
    const char *name;                           /* the method, e.g. "CreateRun" */
    const ProtobufCMessageDescriptor *request;  /* its input message */
    const ProtobufCMessageDescriptor *response; /* its output message */
    call_role min_role;                         /* ROLE_NONE: callable without a token */
    svc_host host;                              /* whether a host credential may call it */
    svc_quota quota;                            /* the quota it takes */
    svc_scripted scripted;                      /* what --scripted-only does to it */
    call_handler handler;
} svc_method;

extern const svc_method svc_runs_methods[]; /* CreateRun, GetRun, ListRuns, RecoverRun, WaitRun,
                                              CancelRun, CheckpointRun, ResumeRun,
                                              CompleteRun */
extern const size_t svc_runs_methods_len;
extern const svc_method svc_gate_methods[]; /* OpenStep, ReadSource, ObserveSource, RecordOutput,
                                               CheckInput, Deliver, Invoke, TraceArtifact */
extern const size_t svc_gate_methods_len;
extern const svc_method svc_grants_methods[]; /* RevokeGrant, RestoreGrants, ShowChain */
extern const size_t svc_grants_methods_len;
extern const svc_method svc_resources_methods[]; /* QuarantineResource, ReleaseResource */
extern const size_t svc_resources_methods_len;
extern const svc_method svc_health_methods[]; /* Check */
extern const size_t svc_health_methods_len;
extern const svc_method svc_evidence_methods[]; /* ReplayDecision, GetReceipt, AuditRun,
                                                   WhatIf, GetReceiptKey */
extern const size_t svc_evidence_methods_len;
extern const svc_method svc_workflows_methods[]; /* ApplyWorkflow, ListWorkflows, GetWorkflow */
extern const size_t svc_workflows_methods_len;
extern const svc_method svc_grpc_health_methods[]; /* grpc.health.v1.Health: Check, Watch */
extern const size_t svc_grpc_health_methods_len;
extern const svc_method svc_grpc_reflection_methods[]; /* grpc.reflection.v1 ServerReflection:
                                                         ServerReflectionInfo */
extern const size_t svc_grpc_reflection_methods_len;
extern const svc_method svc_grpc_reflection_v1alpha_methods[]; /* the same, v1alpha */
extern const size_t svc_grpc_reflection_v1alpha_methods_len;
extern const svc_method svc_reflection_methods[]; /* ListMethods */
extern const size_t svc_reflection_methods_len;

/* Evidence/WhatIf (svc_whatif.c): the recorded decisions decided again under a candidate
 * workflow. */
int svc_whatif_handler(call *c, const ProtobufCMessage *in, ProtobufCMessage **out);
extern const svc_method svc_retrieval_methods[]; /* IngestChunks, BindScope, NarrowScope,
                                                    Search, FollowUp, CheckpointScope,
                                                    ResumeScope, TraceRetrieval */
extern const size_t svc_retrieval_methods_len;
extern const svc_method svc_tenants_methods[]; /* CreateTenant, ListTenants (admin) */
extern const size_t svc_tenants_methods_len;
extern const svc_method svc_credentials_methods[]; /* IssueCredential, ListCredentials,
                                                      RevokeCredential */
extern const size_t svc_credentials_methods_len;
extern const svc_method svc_approvals_methods[]; /* ListApprovals, DecideApproval */
extern const size_t svc_approvals_methods_len;

#endif
