/*
 * charter.h - libcharter, the C client of charterd (protobuf API charter.v1 over NNG req/rep).
 *
 * One charter_client holds one NNG req0 socket dialed to charterd, reconnecting on its own.
 * Every call is one RpcRequest answered by one RpcResponse on a context of its own, so any
 * number of threads may call through the same client at once. Responses are the protobuf-c
 * messages generated from proto/charter.proto (charter.pb-c.h), owned by the caller.
 */
#ifndef CHARTER_H
#define CHARTER_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "charter.pb-c.h"
#include "charter_codes.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (charter_codes.h): the gRPC status numbers, the same as RpcResponse.code.
 * Functions of this library return 0 or the negated code (-CHARTER_UNAVAILABLE, ...). */

#define CHARTER_DEFAULT_URL "tcp://127.0.0.1:7433"
#define CHARTER_DEFAULT_TIMEOUT_MS 10000u
#define CHARTER_MAX_TIMEOUT_MS 3600000u
/* Largest encoded message sent or accepted by default (bytes). A RunView with many artifacts
 * can be far larger than the server's 4 MiB request limit, hence the margin. */
#define CHARTER_DEFAULT_MAX_MESSAGE ((size_t)64 * 1024 * 1024)
#define CHARTER_MIN_MAX_MESSAGE ((size_t)1024)
#define CHARTER_MAX_MAX_MESSAGE ((size_t)1024 * 1024 * 1024)

/* The outcome of one call. code is a CHARTER_* number; message says why when code != 0 (empty
 * on success, truncated to fit). local is 1 when libcharter produced the status itself (bad
 * arguments, no connection, timeout, undecodable answer) and 0 when it is charterd's answer.
 * request_id is the call's request id as charterd returned it (reply metadata
 * "x-request-id": the one sent, or one charterd made), empty when no answer came; it names the
 * call in charterd's log and on the events it caused. */
typedef struct {
    int code;
    int local;
    char message[256];
    char request_id[129];
} charter_status;

/* Most metadata pairs charter_call_metadata sends besides the token. */
#define CHARTER_MAX_METADATA 8

/* Client options. A zeroed struct, or one set by charter_options_init, gives the defaults. */
typedef struct {
    /* Deadline of every call in milliseconds (0: CHARTER_DEFAULT_TIMEOUT_MS, at most
     * CHARTER_MAX_TIMEOUT_MS). It bounds the whole exchange on the client (waiting for a
     * connection, sending, waiting for the answer). charterd is sent this deadline less a
     * margin (a tenth, 50 ms to 1 s) as RpcRequest.timeout_ms, so its own answer at its
     * deadline (e.g. UNKNOWN with the effect not known) reaches the caller before the client
     * gives up. */
    uint32_t timeout_ms;
    /* Largest encoded RpcRequest sent and RpcResponse accepted, in bytes (0:
     * CHARTER_DEFAULT_MAX_MESSAGE; else between CHARTER_MIN_MAX_MESSAGE and
     * CHARTER_MAX_MAX_MESSAGE). */
    size_t max_message;
    /* 0: charter_client_open returns at once and the socket connects in the background (a call
     * made before the first connection waits for it within its deadline). > 0: open waits this
     * many milliseconds for a first connection and fails with CHARTER_UNAVAILABLE without one. */
    uint32_t connect_timeout_ms;
    /* Delay before redialing a lost or refused connection, doubling up to the maximum, in
     * milliseconds (0: 100 and 2000). */
    uint32_t reconnect_min_ms;
    uint32_t reconnect_max_ms;
    /* The tenant (graph) every call names, sent as metadata "tenant" (copied at open); NULL or
     * "": none, so the call acts on the tenant its credential is bound to, or on charterd's
     * default graph. 1..64 of [A-Za-z0-9_.-]; charterd refuses anything else. */
    const char *tenant;
} charter_options;

typedef struct charter_client charter_client;

/* Fills *opts with the defaults. */
void charter_options_init(charter_options *opts);

/* The library version, e.g. "0.1.0". Static storage. */
const char *charter_version(void);

/* The name of a status code: "OK", "INVALID_ARGUMENT", ..., "UNAUTHENTICATED"; a negated code
 * (as the functions here return) gives the same name; any other number gives "UNKNOWN_CODE".
 * Static storage. */
const char *charter_status_name(int code);

/* Checks a URL without opening anything: "tcp://HOST:PORT" (also tcp4://, tcp6://),
 * "ipc:///PATH" or "inproc://NAME", with a non-empty address. Returns 0 or
 * -CHARTER_INVALID_ARGUMENT. */
int charter_url_check(const char *url);

/* Opens a client of the charterd at url. token is sent with every call as metadata
 * "authorization: Bearer <token>"; NULL or "" sends no authorization (enough for Health).
 * opts may be NULL for the defaults. The token and options are copied.
 *
 * The socket is a req0 socket that redials on its own. Requests are never resent by the
 * transport: a call whose connection is lost after sending fails with CHARTER_UNAVAILABLE and
 * its effect on the server is unknown (retry a delivery with the same invocation ID).
 *
 * Returns 0 and *out, or -CHARTER_INVALID_ARGUMENT (bad URL or option, NULL out),
 * -CHARTER_UNAVAILABLE (opts->connect_timeout_ms > 0 and no connection in time),
 * -CHARTER_RESOURCE_EXHAUSTED (out of memory) or -CHARTER_INTERNAL (NNG refused to set up the
 * socket). On failure *out is NULL. Close with charter_client_close. */
int charter_client_open(const char *url, const char *token, const charter_options *opts,
                        charter_client **out);

/* Closes the socket and frees the client. Calls in progress on other threads end at once with
 * CHARTER_CANCELLED (status "client closed"), and a call that starts while close runs gets the
 * same; close returns only once every such call has stopped using the client, so none reads
 * freed memory. A call must not start after close has returned (the handle is gone). NULL is
 * ignored. */
void charter_client_close(charter_client *c);

/* The URL the client dials (owned by the client). */
const char *charter_client_url(const charter_client *c);

/* Number of connections the client holds right now (0 or 1 for one charterd). Informational:
 * it may change as soon as it is read. */
int charter_client_connections(charter_client *c);

/* One RPC. method is the full method name "/charter.v1.<Service>/<Method>"; req is the
 * request message (packed as RpcRequest.payload); resp_desc is the descriptor of the response
 * message, with which the answer's payload is unpacked into *resp.
 *
 * A method declared in proto/charter.proto is checked against its generated service
 * descriptor: req and resp_desc must be its input and output types (else
 * -CHARTER_INVALID_ARGUMENT, nothing sent). Other method names are sent unchecked; charterd
 * answers them with UNIMPLEMENTED.
 *
 * Returns 0 when the server answered code 0; *resp is then the unpacked response, owned by the
 * caller and freed with protobuf_c_message_free_unpacked(*resp, NULL). Otherwise returns the
 * negated status code, *resp is NULL and, when status is not NULL, status holds the code and
 * the reason. Codes the client produces itself (status->local = 1):
 *   CHARTER_INVALID_ARGUMENT   NULL or malformed arguments, request of the wrong type;
 *   CHARTER_UNAVAILABLE        no connection within the deadline, or the connection was lost
 *                              after the request was sent (the effect is then unknown);
 *   CHARTER_DEADLINE_EXCEEDED  no answer within the deadline (or, while connected, no chance
 *                              to send before it);
 *   CHARTER_RESOURCE_EXHAUSTED the encoded request exceeds max_message, or out of memory;
 *   CHARTER_CANCELLED          the client was closed during the call;
 *   CHARTER_INTERNAL           the answer could not be decoded.
 * A decision (ALLOW, DENY, UNKNOWN) is never an error: a denied delivery returns 0.
 *
 * Thread-safe: any number of threads may call at once on one client; each call uses its own
 * NNG context, and each thread gets the answer to its own request. */
int charter_call(charter_client *c, const char *method, const ProtobufCMessage *req,
                 const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                 charter_status *status);

/* The request id of the last answer this client received (any thread's call) into out, ""
 * before the first. For a program making one call at a time; concurrent callers read
 * charter_status.request_id of their own call instead. */
void charter_client_last_request_id(charter_client *c, char out[129]);

/* charter_call with request metadata: n_pairs key/value pairs, metadata[2i] the key and
 * metadata[2i+1] its value (borrowed for the call), e.g. {"x-request-id", "order-7"} or
 * {"traceparent", "00-<trace-id>-<parent-id>-01"}. At most CHARTER_MAX_METADATA pairs; the key
 * "authorization" is refused (the client sends its own token). Errors as charter_call, and
 * CHARTER_INVALID_ARGUMENT for too many pairs, a NULL key or value or an authorization key. */
int charter_call_metadata(charter_client *c, const char *method, const ProtobufCMessage *req,
                          const ProtobufCMessageDescriptor *resp_desc, const char *const *metadata,
                          size_t n_pairs, ProtobufCMessage **resp, charter_status *status);

/* The generated descriptor of method "/charter.v1.<Service>/<Method>" (its input and output
 * message descriptors, for charter_call), or NULL when charter.v1 declares no such method.
 * Static storage. */
const ProtobufCMethodDescriptor *charter_method_find(const char *method);

/*
 * Typed calls, one per method of proto/charter.proto. Each takes the method's request message
 * (NULL sends the all-defaults request) and, on 0, sets *resp to the response, owned by the
 * caller and freed with protobuf_c_message_free_unpacked(&(*resp)->base, NULL) or the generated
 * charter__v1__<type>__free_unpacked(*resp, NULL). Errors, status and thread-safety are those
 * of charter_call; *resp is NULL on error. The method name is taken from the generated service
 * descriptor, never spelled by hand.
 */

/* Runs/CreateRun. Mode "scripted" (default) returns after an executor thread has driven the
 * run to completed, blocked or error (or when the call's deadline passes); with req->async at
 * once, the run queued; "external" only creates it. */
int charter_create_run(charter_client *c, const Charter__V1__CreateRunRequest *req,
                       Charter__V1__RunView **resp, charter_status *status);
/* Runs/GetRun: the run, its events after req->after_seq (at most req->limit), deliveries and
 * artifacts. NOT_FOUND for an unknown run. */
int charter_get_run(charter_client *c, const Charter__V1__GetRunRequest *req,
                    Charter__V1__RunView **resp, charter_status *status);
/* Runs/ListRuns: newest first. */
int charter_list_runs(charter_client *c, const Charter__V1__ListRunsRequest *req,
                      Charter__V1__ListRunsResponse **resp, charter_status *status);
/* Runs/RecoverRun: recovers a blocked or interrupted run; FAILED_PRECONDITION when the run is
 * in a state that cannot be recovered. */
int charter_recover_run(charter_client *c, const Charter__V1__RecoverRunRequest *req,
                        Charter__V1__RecoverRunResponse **resp, charter_status *status);

/* Runs/WaitRun: long poll; the run with its events after req->after_seq as soon as there are
 * any, or once it is no longer queued, running or recovering, or after req->timeout_ms. */
int charter_wait_run(charter_client *c, const Charter__V1__WaitRunRequest *req,
                     Charter__V1__RunView **resp, charter_status *status);
/* Runs/CancelRun: asks the run to stop; the run as it is after the request. */
int charter_cancel_run(charter_client *c, const Charter__V1__CancelRunRequest *req,
                       Charter__V1__Run **resp, charter_status *status);
/* Runs/CheckpointRun: the run's latest checkpoint (its token for ResumeRun); NOT_FOUND when
 * none was recorded, FAILED_PRECONDITION "INTEGRITY_KEY_REQUIRED" without an integrity key. */
int charter_checkpoint_run(charter_client *c, const Charter__V1__CheckpointRunRequest *req,
                           Charter__V1__Checkpoint **resp, charter_status *status);
/* Runs/ResumeRun: consumes the checkpoint once and queues its interrupted run again; the run
 * as it is after the call. Refusals as the proto's ResumeRunRequest lists them. */
int charter_resume_run(charter_client *c, const Charter__V1__ResumeRunRequest *req,
                       Charter__V1__Run **resp, charter_status *status);
/* Runs/CompleteRun: ends an external run (created -> completed); a completed one is returned
 * unchanged. FAILED_PRECONDITION for a scripted or live run, another status, or a send still
 * held for a human's approval; NOT_FOUND for an unknown run. */
int charter_complete_run(charter_client *c, const Charter__V1__CompleteRunRequest *req,
                         Charter__V1__Run **resp, charter_status *status);

/* Gate/OpenStep: a fresh context of a step of the run, with its server-owned capability. */
int charter_open_step(charter_client *c, const Charter__V1__OpenStepRequest *req,
                      Charter__V1__StepContext **resp, charter_status *status);
/* Gate/ReadSource: registers a resource of the step as a source artifact. */
int charter_read_source(charter_client *c, const Charter__V1__ReadSourceRequest *req,
                        Charter__V1__ReadSourceResponse **resp, charter_status *status);
/* Gate/ObserveSource: records what the host read from an observed resource of the step as a
 * source artifact with that resource's labels. */
int charter_observe_source(charter_client *c, const Charter__V1__ObserveSourceRequest *req,
                           Charter__V1__ObserveSourceResponse **resp, charter_status *status);
/* Gate/RecordOutput: records a model output derived from exactly req->input_ids. */
int charter_record_output(charter_client *c, const Charter__V1__RecordOutputRequest *req,
                          Charter__V1__RecordOutputResponse **resp, charter_status *status);
/* Gate/CheckInput: the input gate over artifacts for the context's step. */
int charter_check_input(charter_client *c, const Charter__V1__CheckInputRequest *req,
                        Charter__V1__CheckInputResponse **resp, charter_status *status);
/* Gate/Deliver: the delivery gate and, on ALLOW, the committed delivery. Retrying with the same
 * invocation ID after CHARTER_UNAVAILABLE or CHARTER_DEADLINE_EXCEEDED is safe: an earlier
 * delivery is acknowledged, never repeated. */
int charter_deliver(charter_client *c, const Charter__V1__DeliverRequest *req,
                    Charter__V1__DeliverResponse **resp, charter_status *status);
/* Gate/Invoke: the tool-call gate over each argument's value lineage and, for a tool with an
 * effect, on ALLOW the effect committed once per invocation ID (retry as for Deliver). */
int charter_invoke(charter_client *c, const Charter__V1__InvokeRequest *req,
                   Charter__V1__InvokeResponse **resp, charter_status *status);
/* Gate/TraceArtifact: the artifact's full ancestry. */
int charter_trace_artifact(charter_client *c, const Charter__V1__TraceArtifactRequest *req,
                           Charter__V1__TraceArtifactResponse **resp, charter_status *status);

/* Grants/RevokeGrant: the grant with revoked_at set (operator token). */
int charter_revoke_grant(charter_client *c, const Charter__V1__RevokeGrantRequest *req,
                         Charter__V1__Grant **resp, charter_status *status);
/* Grants/RestoreGrants: one grant, or every revoked grant when req->grant_id is empty. */
int charter_restore_grants(charter_client *c, const Charter__V1__RestoreGrantsRequest *req,
                           Charter__V1__RestoreGrantsResponse **resp, charter_status *status);
/* Resources/QuarantineResource (operator): from the next decision on, every artifact whose
 * lineage reaches req->resource_id is refused at every gate (RESOURCE_QUARANTINED) until it is
 * released; req->reason (1 to 512 bytes) is shown in the refusals' witnesses. */
int charter_quarantine_resource(charter_client *c,
                                const Charter__V1__QuarantineResourceRequest *req,
                                Charter__V1__ResourceQuarantine **resp, charter_status *status);
/* Resources/ReleaseResource (operator): lifts the quarantine; resp->released says whether there
 * was one. */
int charter_release_resource(charter_client *c, const Charter__V1__ReleaseResourceRequest *req,
                             Charter__V1__ResourceQuarantine **resp, charter_status *status);
/* Grants/ShowChain: the delegation chain of a grant, leaf first, with the guard's verdict. */
int charter_show_chain(charter_client *c, const Charter__V1__ShowChainRequest *req,
                       Charter__V1__GrantChain **resp, charter_status *status);

/* Health/Check: needs no token. */
int charter_health(charter_client *c, const Charter__V1__HealthRequest *req,
                   Charter__V1__HealthResponse **resp, charter_status *status);

/* Evidence/ReplayDecision: decides a recorded decision event again from its snapshot, with
 * the evaluator charterd runs now, and returns both decisions. A run that left the database
 * (retention) is replayed from its archive file in charterd's archive folder, which
 * resp->archive names. FAILED_PRECONDITION when the event is no decision or was decided by
 * another evaluator (the message names both fingerprints), or when the run's archive is
 * missing or not the one its index names; NOT_FOUND for an unknown run or seq (an archived
 * run whose file charterd cannot read: the message names where it went). */
int charter_replay_decision(charter_client *c, const Charter__V1__ReplayDecisionRequest *req,
                            Charter__V1__ReplayDecisionResponse **resp, charter_status *status);
/* Evidence/GetReceipt: the signed receipt of a delivery (req->invocation_id) or of the run
 * itself (empty invocation_id; the run must have ended). Check it offline with
 * charter_receipt_verify (receipt.h). FAILED_PRECONDITION with a message starting
 * "INTEGRITY_KEY_REQUIRED" when charterd runs without an integrity key. */
int charter_get_receipt(charter_client *c, const Charter__V1__GetReceiptRequest *req,
                        Charter__V1__Receipt **resp, charter_status *status);
/* Evidence/AuditRun: walks the run's event hash chain and names the first event changed,
 * removed or inserted. */
int charter_audit_run(charter_client *c, const Charter__V1__AuditRunRequest *req,
                      Charter__V1__AuditRunResponse **resp, charter_status *status);
/* Evidence/WhatIf: decides the recorded decisions in scope (req->run_id, or runs created at or
 * after req->since) again under the candidate workflow req->workflow and returns those whose
 * outcome or codes would change, with counts by change; at most req->limit are examined
 * (resp->truncated says more were in scope). A req->run_id that left the database is decided
 * from its archive file in charterd's archive folder (resp->archive names it); runs since a
 * time are those in the database. Writes nothing; viewer or operator token.
 * INVALID_ARGUMENT naming the field and rule when the candidate is not a valid workflow. */
int charter_what_if(charter_client *c, const Charter__V1__WhatIfRequest *req,
                    Charter__V1__WhatIfResponse **resp, charter_status *status);

/* Workflows/ApplyWorkflow: validates req->definition (JSON, at most 1 MiB, docs/workflows.md)
 * and stores it with its resources, recipients, actors and grants (operator token). A
 * definition that breaks a rule, or whose ids name nodes of the graph with other content, is
 * INVALID_ARGUMENT with a message naming the field and the rule, and nothing is stored.
 * Applying the same bytes again changes nothing (resp->created is false). */
int charter_apply_workflow(charter_client *c, const Charter__V1__ApplyWorkflowRequest *req,
                           Charter__V1__WorkflowInfo **resp, charter_status *status);
/* Workflows/ListWorkflows: every stored workflow version, in the order first applied. */
int charter_list_workflows(charter_client *c, const Charter__V1__ListWorkflowsRequest *req,
                           Charter__V1__ListWorkflowsResponse **resp, charter_status *status);
/* Workflows/GetWorkflow: one version, or the latest version applied under a name. The
 * definition bytes are returned to the operator only (a viewer gets resp->definition empty:
 * definitions hold resource contents). NOT_FOUND for an unknown version or name. */
int charter_get_workflow(charter_client *c, const Charter__V1__GetWorkflowRequest *req,
                         Charter__V1__WorkflowDefinition **resp, charter_status *status);
/* Reflection/ListMethods (viewer): every method charterd serves, with its request and response
 * message names and the least token it needs, read from charterd's dispatch table. */
int charter_list_methods(charter_client *c, const Charter__V1__ListMethodsRequest *req,
                         Charter__V1__ListMethodsResponse **resp, charter_status *status);
/* Evidence/GetReceiptKey: the public key (PEM) charterd signs receipts with, and its key id,
 * for offline checks with charter_receipt_verify_signed (receipt.h). Viewer or operator.
 * FAILED_PRECONDITION with a message starting "SIGNING_KEY_REQUIRED" when charterd has no
 * --signing-key. req may be NULL. */
int charter_get_receipt_key(charter_client *c, const Charter__V1__GetReceiptKeyRequest *req,
                            Charter__V1__ReceiptKey **resp, charter_status *status);

/* Tenants/CreateTenant (admin token only): a tenant with its quotas, and its first operator
 * credential, whose secret resp->operator_credential->secret is returned this once. */
int charter_create_tenant(charter_client *c, const Charter__V1__CreateTenantRequest *req,
                          Charter__V1__CreateTenantResponse **resp, charter_status *status);
/* Tenants/ListTenants (admin token only): the implicit default graph, then every tenant. */
int charter_list_tenants(charter_client *c, const Charter__V1__ListTenantsRequest *req,
                         Charter__V1__ListTenantsResponse **resp, charter_status *status);
/* Credentials/IssueCredential (the tenant's operator): a credential of the call's tenant with
 * a role (operator, viewer, host) and, for a host, the actors it acts for. The secret
 * (resp->secret, "chc_<id>_<64 hex>") is returned this once; charterd keeps its SHA-256. */
int charter_issue_credential(charter_client *c, const Charter__V1__IssueCredentialRequest *req,
                             Charter__V1__IssuedCredential **resp, charter_status *status);
/* Credentials/ListCredentials (the tenant's operator): the tenant's credentials, no secrets. */
int charter_list_credentials(charter_client *c, const Charter__V1__ListCredentialsRequest *req,
                             Charter__V1__ListCredentialsResponse **resp, charter_status *status);
/* Credentials/RevokeCredential (the tenant's operator): the credential fails from its next
 * call on (UNAUTHENTICATED). NOT_FOUND for an id that is not one of the tenant's. */
int charter_revoke_credential(charter_client *c, const Charter__V1__RevokeCredentialRequest *req,
                              Charter__V1__Credential **resp, charter_status *status);
/* Approvals/ListApprovals (viewer): human approvals deliveries wait for or ended with, newest
 * first, filtered by req->run_id and req->state when set. A pending approval past its deadline
 * is listed "expired". */
int charter_list_approvals(charter_client *c, const Charter__V1__ListApprovalsRequest *req,
                           Charter__V1__ListApprovalsResponse **resp, charter_status *status);
/* Approvals/DecideApproval (operator, on behalf of the approval's approver): req->decision
 * "approve" commits the held delivery (re-checked on the database clock; a failed re-check is
 * state "refused"), "deny" refuses it. PERMISSION_DENIED when req->actor is not the approver,
 * FAILED_PRECONDITION naming the earlier outcome when it was decided before. */
int charter_decide_approval(charter_client *c, const Charter__V1__DecideApprovalRequest *req,
                            Charter__V1__DecideApprovalResponse **resp, charter_status *status);

#ifdef __cplusplus
}
#endif

#endif
