/*
 * services.h - the handler tables of charter.v1's services.
 *
 * Each table is indexed exactly like the methods of the service's generated protobuf-c
 * descriptor (declaration order in proto/charter.proto); dispatch.c checks the lengths against
 * the descriptors at startup, so a method added to the proto without a handler stops charterd.
 */
#ifndef CHARTER_SERVICES_H
#define CHARTER_SERVICES_H

#include <stddef.h>

#include "call.h"

extern const call_handler svc_runs_handlers[]; /* CreateRun, GetRun, ListRuns, RecoverRun */
extern const size_t svc_runs_handlers_len;
extern const call_handler svc_gate_handlers[]; /* OpenStep, ReadSource, RecordOutput,
                                                  CheckInput, Deliver, TraceArtifact */
extern const size_t svc_gate_handlers_len;
extern const call_handler svc_grants_handlers[]; /* RevokeGrant, RestoreGrants, ShowChain */
extern const size_t svc_grants_handlers_len;
extern const call_handler svc_health_handlers[]; /* Check */
extern const size_t svc_health_handlers_len;
extern const call_handler svc_evidence_handlers[]; /* ReplayDecision, GetReceipt, AuditRun,
                                                      WhatIf */
extern const size_t svc_evidence_handlers_len;

/* Evidence/WhatIf (svc_whatif.c): the recorded decisions decided again under a candidate
 * workflow. */
int svc_whatif_handler(call *c, const ProtobufCMessage *in, ProtobufCMessage **out);
extern const call_handler svc_workflows_handlers[]; /* ApplyWorkflow, ListWorkflows,
                                                       GetWorkflow */
extern const size_t svc_workflows_handlers_len;
extern const call_handler svc_retrieval_handlers[]; /* IngestChunks, BindScope, NarrowScope,
                                                       Search, FollowUp, CheckpointScope,
                                                       ResumeScope, TraceRetrieval */
extern const size_t svc_retrieval_handlers_len;

#endif
