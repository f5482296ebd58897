#!/usr/bin/env bash
# Writes the seed corpus of fuzz_request (tests/fuzz/corpus/fuzz_request): one RpcRequest
# envelope per method, carrying the operator token of fuzz_request.c and a request shaped as
# the CLI sent it in a recorded procurement run (its run, context, artifact and grant ids),
# plus envelopes with the viewer token, no token, a wrong token and an unknown method.
# Encoded from protobuf text format with protoc-c --encode.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus/fuzz_request
mkdir -p "$out"
op="Bearer fuzz-operator-token-0123456789abcdef"
viewer="Bearer fuzz-viewer-token-0123456789abcdefgh"
run=rfb5b61cb3f854986
enc() { protoc-c --proto_path=proto --encode="charter.v1.$1" proto/charter.proto; }
# The protobuf text-format literal of stdin's bytes (every byte as an octal escape).
octal() { od -An -v -to1 | tr -s ' \n' ' ' | sed 's/ *$//; s/^ //; s/ /\\/g; s/^/\\/'; }
# seed NAME SERVICE METHOD REQUEST_TYPE TOKEN TEXT
seed() {
  local payload
  payload=$(printf '%s\n' "$6" | enc "$4" | octal)
  [ "$payload" = '\' ] && payload=
  {
    printf 'method: "/charter.v1.%s/%s"\n' "$2" "$3"
    printf 'payload: "%s"\n' "$payload"
    [ -n "$5" ] && printf 'metadata { key: "authorization" value: "%s" }\n' "$5"
    printf 'timeout_ms: 500\n'
  } | enc RpcRequest >"$out/$1"
}
seed create_run Runs CreateRun CreateRunRequest "$op" 'task: "Q3 vendor selection" mode: "scripted"'
seed get_run Runs GetRun GetRunRequest "$op" "run_id: \"$run\" after_seq: 3 limit: 50"
seed list_runs Runs ListRuns ListRunsRequest "$viewer" 'limit: 10'
seed recover_run Runs RecoverRun RecoverRunRequest "$op" "run_id: \"$run\""
seed open_step Gate OpenStep OpenStepRequest "$op" "run_id: \"$run\" step: \"analyze\" parent_context_id: \"c1\" resources: \"vendor_a\" tools: \"deliver_internal\" recipients: \"cfo\""
seed read_source Gate ReadSource ReadSourceRequest "$op" 'context_id: "c1" resource_id: "vendor_c"'
seed record_output Gate RecordOutput RecordOutputRequest "$op" 'context_id: "c2" input_ids: "a1" input_ids: "a2" title: "analysis" content: "Vendor A is cheapest."'
seed check_input Gate CheckInput CheckInputRequest "$op" 'context_id: "c2" artifact_ids: "a1" artifact_ids: "a3"'
seed deliver Gate Deliver DeliverRequest "$op" "context_id: \"c2\" payload_id: \"a6\" recipient: \"cfo\" tool: \"deliver_internal\" invocation_id: \"$run:analyze:deliver\""
seed deliver_viewer Gate Deliver DeliverRequest "$viewer" "context_id: \"c2\" payload_id: \"a6\" recipient: \"cfo\" tool: \"deliver_internal\" invocation_id: \"$run:analyze:deliver\""
seed trace Gate TraceArtifact TraceArtifactRequest "$op" 'artifact_id: "a6"'
seed revoke Grants RevokeGrant RevokeGrantRequest "$op" 'grant_id: "g_reporter"'
seed restore Grants RestoreGrants RestoreGrantsRequest "$op" 'grant_id: "g_reporter"'
seed show_chain Grants ShowChain ShowChainRequest "$viewer" 'grant_id: "g_analyst"'
seed health Health Check HealthRequest "" ''
seed replay Evidence ReplayDecision ReplayDecisionRequest "$op" "run_id: \"$run\" seq: 14"
seed receipt Evidence GetReceipt GetReceiptRequest "$op" "run_id: \"$run\" invocation_id: \"$run:analyze:deliver\""
seed audit Evidence AuditRun AuditRunRequest "$op" "run_id: \"$run\""
seed apply_workflow Workflows ApplyWorkflow ApplyWorkflowRequest "$op" 'definition: "{\"name\":\"w\"}"'
seed list_workflows Workflows ListWorkflows ListWorkflowsRequest "$op" ''
seed get_workflow Workflows GetWorkflow GetWorkflowRequest "$op" 'workflow: "procurement"'
seed no_token Gate Deliver DeliverRequest "" 'context_id: "c2"'
seed wrong_token Runs GetRun GetRunRequest "Bearer not-the-token-at-all-0123456789" "run_id: \"$run\""
seed unknown_method Gate Teleport DeliverRequest "$op" 'context_id: "c2"'
