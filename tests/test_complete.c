/*
 * test_complete.c - Runs/CompleteRun, the end of an external run, through a real charterd with
 * an integrity key: a created external run becomes completed once, with a status_changed event
 * naming why and who, that event's time the run's end (its run receipt's time); asked again it
 * is returned unchanged. Every Gate call through its contexts, and OpenStep on it, is refused
 * afterwards and writes nothing. Refused with nothing written: an unknown run (NOT_FOUND), a
 * scripted run, a cancelled one, one holding a send for a human's approval (until the human
 * decides), a viewer. A host credential completes a run whose workflow has one of its actors at
 * a step; another host is refused IDENTITY_MISMATCH, recorded, replayed and decided the same by
 * a what-if under the unchanged workflow. A retention pass leaves a created external run in the
 * database and archives it once it is completed.
 */
#include <CUnit/Basic.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "charter.h"
#include "evidence/integrity.h"
#include "harness.h"
#include "runs/retention.h"
#include "suite.h"
#include "workflow/registry.h"

static char graph[64], folder[256], keyfile[300];
static harness_charterd daemon_;
static charter_client *op, *viewer;
static store *st; /* the graph, in this process: the retention pass */
static char issued_ids[8][17];
static size_t n_issued;
/* The graph's integrity key: charterd seals events and receipts with it, and the retention
 * pass here verifies archives with it. */
static const unsigned char key[] = "complete-test-integrity-key-of-32-bytes-or-more";

/* --- calls ------------------------------------------------------------------------------- */

static charter_client *client_for(const char *token)
{
    charter_client *c = NULL;
    return harness_client_open(daemon_.tcp_url, token, 20000, &c) == 0 ? c : NULL;
}

/* CompleteRun of run through c with reason (NULL: none): libcharter's code (0 on success),
 * the run's status after it into status (32 bytes, "" on failure), the message into msg
 * (512 bytes). */
static int complete(charter_client *c, const char *run, const char *reason, char status[32],
                    char msg[512])
{
    Charter__V1__CompleteRunRequest req = CHARTER__V1__COMPLETE_RUN_REQUEST__INIT;
    req.run_id = (char *)run;
    req.reason = (char *)(reason ? reason : "");
    Charter__V1__Run *r = NULL;
    charter_status s;
    int rc = charter_complete_run(c, &req, &r, &s);
    snprintf(status, 32, "%s", rc == 0 ? r->status : "");
    snprintf(msg, 512, "%s", rc == 0 ? "" : s.message);
    charter__v1__run__free_unpacked(r, NULL);
    return rc;
}

/* The run with every event (caller frees). */
static Charter__V1__RunView *view_of(const char *run)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)run;
    req.without_content = true;
    Charter__V1__RunView *v = NULL;
    charter_status s;
    if (charter_get_run(op, &req, &v, &s) != 0) {
        fprintf(stderr, "\n  GetRun %s: %s\n", run, s.message);
        return NULL;
    }
    return v;
}

/* The run's seq (0 when it cannot be read). */
static uint64_t seq_of(const char *run)
{
    Charter__V1__RunView *v = view_of(run);
    uint64_t seq = v != NULL ? v->run->seq : 0;
    charter__v1__run_view__free_unpacked(v, NULL);
    return seq;
}

/* Issues a host credential for actor: the secret into secret (128 bytes), its id into id (17). */
static int issue_host(const char *actor, char *secret, char *id)
{
    Charter__V1__IssueCredentialRequest rq = CHARTER__V1__ISSUE_CREDENTIAL_REQUEST__INIT;
    char *actors[1] = {(char *)actor};
    rq.role = "host";
    rq.actors = actors;
    rq.n_actors = 1;
    rq.label = "test_complete";
    Charter__V1__IssuedCredential *r = NULL;
    charter_status s;
    if (charter_issue_credential(op, &rq, &r, &s) != 0) {
        fprintf(stderr, "\n  IssueCredential: %s\n", s.message);
        return -1;
    }
    snprintf(secret, 128, "%s", r->secret);
    snprintf(id, 17, "%s", r->credential->id);
    if (n_issued < 8)
        snprintf(issued_ids[n_issued++], 17, "%s", id);
    charter__v1__issued_credential__free_unpacked(r, NULL);
    return 0;
}

/* --- the end of an external run ---------------------------------------------------------- */

/* A created external run, a context of its research step and the source read there. */
static void research_run(char run[129], char ctx[129], char source[129])
{
    CU_ASSERT_EQUAL_FATAL(harness_create_run(op, "external", NULL, run, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(op, run, "research", ctx), 0);
    CU_ASSERT_EQUAL_FATAL(harness_read_source(op, ctx, "vendor_a", source), 0);
}

static void test_an_external_run_completes_once_with_its_event_and_its_end(void)
{
    char run[129], ctx[129], source[129], status[32], msg[512];
    research_run(run, ctx, source);
    uint64_t before = seq_of(run);
    CU_ASSERT_EQUAL_FATAL(complete(op, run, "the agent session ended", status, msg), 0);
    CU_ASSERT_STRING_EQUAL(status, "completed");

    /* One event more: the status change, naming why and who, at the database's time. */
    Charter__V1__RunView *v = view_of(run);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "completed");
    CU_ASSERT_EQUAL(v->run->seq, before + 1);
    CU_ASSERT_EQUAL_FATAL(v->n_events, before + 1);
    const Charter__V1__Event *e = v->events[v->n_events - 1];
    CU_ASSERT_EQUAL(e->seq, before + 1);
    CU_ASSERT_STRING_EQUAL(e->kind, "status_changed");
    CU_ASSERT_EQUAL(strncmp(e->detail, "created -> completed: {", 23), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(e->detail, "\"reason\":\"the agent session ended\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(e->detail, "\"by\":\"CompleteRun\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(e->detail, ", caller env:operator)"));
    CU_ASSERT(e->ts >= v->events[v->n_events - 2]->ts);
    double ended = e->ts;
    charter__v1__run_view__free_unpacked(v, NULL);

    /* Its run receipt: completed, sealing that event, at the time the run ended. */
    Charter__V1__GetReceiptRequest gr = CHARTER__V1__GET_RECEIPT_REQUEST__INIT;
    gr.run_id = run;
    Charter__V1__Receipt *r = NULL;
    charter_status s;
    CU_ASSERT_EQUAL_FATAL(charter_get_receipt(op, &gr, &r, &s), 0);
    CU_ASSERT_STRING_EQUAL(r->kind, "run");
    CU_ASSERT_STRING_EQUAL(r->status, "completed");
    CU_ASSERT_EQUAL(r->last_seq, before + 1);
    CU_ASSERT_EQUAL(r->n_deliveries, 0);
    double t = strtod(r->time, NULL);
    CU_ASSERT(t > ended - 1e-5 && t < ended + 1e-5);
    char why[256] = "";
    CU_ASSERT_EQUAL(integrity_receipt_check(r, why, sizeof why), STATUS_OK);
    charter__v1__receipt__free_unpacked(r, NULL);

    /* Asked again, by anyone entitled: returned unchanged, nothing written. */
    CU_ASSERT_EQUAL(complete(op, run, "again", status, msg), 0);
    CU_ASSERT_STRING_EQUAL(status, "completed");
    CU_ASSERT_EQUAL(seq_of(run), before + 1);
}

static void test_gate_calls_on_a_completed_run_are_refused_and_write_nothing(void)
{
    char run[129], ctx[129], source[129], status[32], msg[512];
    research_run(run, ctx, source);
    CU_ASSERT_EQUAL_FATAL(complete(op, run, NULL, status, msg), 0);
    uint64_t seq = seq_of(run);
    charter_status s;

    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = ctx;
    rs.resource_id = "vendor_b";
    Charter__V1__ReadSourceResponse *rr = NULL;
    CU_ASSERT_EQUAL(charter_read_source(op, &rs, &rr, &s), -CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(s.message, "belongs to a completed run"));

    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    char *inputs[1] = {source};
    ro.context_id = ctx;
    ro.input_ids = inputs;
    ro.n_input_ids = 1;
    ro.title = "Vendor summary";
    ro.content = "written after the end";
    Charter__V1__RecordOutputResponse *o = NULL;
    CU_ASSERT_EQUAL(charter_record_output(op, &ro, &o, &s), -CHARTER_FAILED_PRECONDITION);

    Charter__V1__CheckInputRequest ci = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    ci.context_id = ctx;
    ci.artifact_ids = inputs;
    ci.n_artifact_ids = 1;
    Charter__V1__CheckInputResponse *cr = NULL;
    CU_ASSERT_EQUAL(charter_check_input(op, &ci, &cr, &s), -CHARTER_FAILED_PRECONDITION);

    /* No new step either: the record is closed. */
    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = run;
    os.step = "analyze";
    Charter__V1__StepContext *sc = NULL;
    CU_ASSERT_EQUAL(charter_open_step(op, &os, &sc, &s), -CHARTER_FAILED_PRECONDITION);
    char want[256];
    snprintf(want, sizeof want, "run %s is completed: its record is closed", run);
    CU_ASSERT_PTR_NOT_NULL(strstr(s.message, want));
    CU_ASSERT_EQUAL(seq_of(run), seq);
}

/* A payments run: its pay step's context into ctx and the observed bill into bill. */
static void payments_run(char run[129], char ctx[129], char bill[129])
{
    CU_ASSERT_EQUAL_FATAL(harness_payments_run(op, run, ctx, bill), 0);
}

/* send_money of the bill's IBAN with reference ref under inv, through ctx. */
static Charter__V1__InvokeResponse *pay(const char *ctx, const char *bill, const char *inv,
                                        const char *ref, charter_status *st)
{
    char quote[140];
    snprintf(quote, sizeof quote, "quote:%s", bill);
    const harness_invoke_arg args[] = {{"iban", "DE89370400440532013000", quote},
                                       {"amount", "84.20", "task"},
                                       {"reference", ref, "task"}};
    return harness_invoke(op, ctx, "send_money", inv, args, 3, st);
}

/* A tool call committed before the run was completed, asked again after: the record is closed
 * to new calls, but a retry of a committed invocation must still learn that it was committed
 * (acknowledged, nothing written). Refused instead, a caller that lost the first answer is
 * told to start a new run, and pays twice. Other arguments under the invocation are still a
 * conflict, and a new invocation is refused, writing nothing. */
static void test_a_committed_tool_call_is_acknowledged_after_the_run_completed(void)
{
    char run[129], ctx[129], bill[129], status[32], msg[512];
    payments_run(run, ctx, bill);
    charter_status st;
    char inv[160];
    snprintf(inv, sizeof inv, "%s:pay", run);
    Charter__V1__InvokeResponse *r = pay(ctx, bill, inv, "INV-7731", &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL_FATAL(r->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_FALSE(r->acknowledged);
    charter__v1__invoke_response__free_unpacked(r, NULL);
    CU_ASSERT_EQUAL_FATAL(complete(op, run, NULL, status, msg), 0);
    uint64_t seq = seq_of(run);

    r = pay(ctx, bill, inv, "INV-7731", &st);
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r != NULL) {
        CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
        CU_ASSERT_TRUE(r->acknowledged);
        CU_ASSERT_PTR_NOT_NULL(r->delivery);
        charter__v1__invoke_response__free_unpacked(r, NULL);
    } else {
        fprintf(stderr, "\n  Invoke retry: %s\n", st.message);
    }
    r = pay(ctx, bill, inv, "INV-7732", &st);
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r != NULL) {
        CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__DENY);
        CU_ASSERT_FALSE(r->acknowledged);
        charter__v1__invoke_response__free_unpacked(r, NULL);
    }
    snprintf(inv, sizeof inv, "%s:pay-again", run);
    CU_ASSERT_PTR_NULL(pay(ctx, bill, inv, "INV-7731", &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "belongs to a completed run"));
    CU_ASSERT_EQUAL(seq_of(run), seq);
}

/* RecordOutput in ctx derived from the one input, with title and content: the artifact's id
 * into payload. */
static void record_output(const char *ctx, const char *input, const char *title,
                          const char *content, char payload[129])
{
    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    char *inputs[1] = {(char *)input};
    ro.context_id = (char *)ctx;
    ro.input_ids = inputs;
    ro.n_input_ids = 1;
    ro.title = (char *)title;
    ro.content = (char *)content;
    Charter__V1__RecordOutputResponse *o = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_record_output(op, &ro, &o, &st), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o->artifact);
    snprintf(payload, 129, "%s", o->artifact->id);
    charter__v1__record_output_response__free_unpacked(o, NULL);
}

/* Deliver of payload from ctx to the CFO under invocation inv: the answer, or NULL with st
 * set. */
static Charter__V1__DeliverResponse *send_cfo(const char *ctx, const char *payload, const char *inv,
                                              charter_status *st)
{
    Charter__V1__DeliverRequest dr = CHARTER__V1__DELIVER_REQUEST__INIT;
    dr.context_id = (char *)ctx;
    dr.payload_id = (char *)payload;
    dr.recipient = "cfo";
    dr.tool = "deliver_internal";
    dr.invocation_id = (char *)inv;
    Charter__V1__DeliverResponse *d = NULL;
    return charter_deliver(op, &dr, &d, st) == 0 ? d : NULL;
}

/* A send the run committed before it was completed, asked again with its invocation ID (a
 * caller that lost the answer), is acknowledged from its delivery, writing nothing; a new send
 * through the closed record is refused. */
static void test_a_committed_send_is_acknowledged_after_the_run_completed(void)
{
    char run[129], ctx[129], source[129], status[32], msg[512], inv[160];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(op, "external", NULL, run, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(op, run, "analyze", ctx), 0);
    CU_ASSERT_EQUAL_FATAL(harness_read_source(op, ctx, "vendor_a", source), 0);
    char payload[129];
    record_output(ctx, source, "Vendor summary", "Northwind, within budget.", payload);
    charter_status st;
    snprintf(inv, sizeof inv, "%s:send", run);
    Charter__V1__DeliverResponse *d = send_cfo(ctx, payload, inv, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL_FATAL(d->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_FALSE(d->acknowledged);
    charter__v1__deliver_response__free_unpacked(d, NULL);
    CU_ASSERT_EQUAL_FATAL(complete(op, run, NULL, status, msg), 0);
    uint64_t seq = seq_of(run);

    d = send_cfo(ctx, payload, inv, &st);
    CU_ASSERT_PTR_NOT_NULL(d);
    if (d != NULL) {
        CU_ASSERT_EQUAL(d->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
        CU_ASSERT_TRUE(d->acknowledged);
        CU_ASSERT_PTR_NOT_NULL(d->delivery);
        if (d->delivery != NULL)
            CU_ASSERT_STRING_EQUAL(d->delivery->invocation_id, inv);
        charter__v1__deliver_response__free_unpacked(d, NULL);
    } else {
        fprintf(stderr, "\n  Deliver retry: %s\n", st.message);
    }
    snprintf(inv, sizeof inv, "%s:send-again", run);
    CU_ASSERT_PTR_NULL(send_cfo(ctx, payload, inv, &st));
    CU_ASSERT_EQUAL(st.code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "belongs to a completed run"));
    CU_ASSERT_EQUAL(seq_of(run), seq);
}

static void test_complete_refuses_what_it_does_not_end_and_writes_nothing(void)
{
    char status[32], msg[512];
    CU_ASSERT_EQUAL(complete(op, "r_no_such_run", NULL, status, msg), -CHARTER_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(msg, "run r_no_such_run not found");

    /* A scripted run: its executor ended it (blocked at the refused handoff). */
    char scripted[129], st_before[32];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(op, "scripted", NULL, scripted, st_before, NULL), 0);
    CU_ASSERT_STRING_EQUAL(st_before, "blocked");
    uint64_t seq = seq_of(scripted);
    CU_ASSERT_EQUAL(complete(op, scripted, NULL, status, msg), -CHARTER_FAILED_PRECONDITION);
    char want[256];
    snprintf(want, sizeof want,
             "run %s is a scripted run (blocked): its executor ends it; CompleteRun ends external "
             "runs only",
             scripted);
    CU_ASSERT_STRING_EQUAL(msg, want);
    CU_ASSERT_EQUAL(seq_of(scripted), seq);

    /* A cancelled external run stays cancelled. */
    char run[129];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(op, "external", NULL, run, NULL, NULL), 0);
    Charter__V1__CancelRunRequest cr = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
    cr.run_id = run;
    cr.reason = "not needed";
    Charter__V1__Run *cancelled = NULL;
    charter_status s;
    CU_ASSERT_EQUAL_FATAL(charter_cancel_run(op, &cr, &cancelled, &s), 0);
    CU_ASSERT_STRING_EQUAL(cancelled->status, "cancelled");
    charter__v1__run__free_unpacked(cancelled, NULL);
    seq = seq_of(run);
    CU_ASSERT_EQUAL(complete(op, run, NULL, status, msg), -CHARTER_FAILED_PRECONDITION);
    snprintf(want, sizeof want, "run %s is cancelled: only a created external run is completed",
             run);
    CU_ASSERT_STRING_EQUAL(msg, want);
    CU_ASSERT_EQUAL(seq_of(run), seq);

    /* A viewer ends nothing; a reason past 512 bytes is refused before anything is read. */
    char open_run[129];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(op, "external", NULL, open_run, NULL, NULL), 0);
    CU_ASSERT_EQUAL(complete(viewer, open_run, NULL, status, msg), -CHARTER_PERMISSION_DENIED);
    char longer[600];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    CU_ASSERT_EQUAL(complete(op, open_run, longer, status, msg), -CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(msg, "reason: longer than 512 bytes");
    Charter__V1__RunView *v = view_of(open_run);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "created");
    CU_ASSERT_EQUAL(v->run->seq, 1);
    charter__v1__run_view__free_unpacked(v, NULL);
}

/* The analyze step of an external run of the approval workflow sends its recommendation to the
 * CFO, which human_cfo must approve: the approval's id into approval. */
static void held_send(char run[129], char approval[64])
{
    CU_ASSERT_EQUAL_FATAL(
        harness_apply_workflow_file(op, CHARTER_SOURCE_DIR "/tests/workflows/approval.json"), 0);
    charter_status s;
    char ctx[129], budget[129];
    CU_ASSERT_EQUAL_FATAL(
        harness_create_run(op, "external", "procurement_approval", run, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(harness_open_step(op, run, "analyze", ctx), 0);
    CU_ASSERT_EQUAL_FATAL(harness_read_source(op, ctx, "budget", budget), 0);
    char payload[129];
    record_output(ctx, budget, "Internal recommendation",
                  "Recommendation: vendor_b, within the approved ceiling.", payload);
    Charter__V1__DeliverRequest dr = CHARTER__V1__DELIVER_REQUEST__INIT;
    dr.context_id = ctx;
    dr.payload_id = payload;
    dr.recipient = "cfo";
    dr.tool = "deliver_internal";
    dr.invocation_id = "inv-complete-held-1";
    Charter__V1__DeliverResponse *d = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_deliver(op, &dr, &d, &s), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d->pending_approval);
    CU_ASSERT_NOT_EQUAL_FATAL(d->pending_approval[0], '\0');
    snprintf(approval, 64, "%s", d->pending_approval);
    charter__v1__deliver_response__free_unpacked(d, NULL);
}

/* A send held for a human keeps its run open: completing it would void the human's decision
 * still to come. Once the human decided (here: denied), the run completes. */
static void test_a_send_held_for_a_human_keeps_the_run_open_until_decided(void)
{
    char run[129], approval[64], status[32], msg[512];
    held_send(run, approval);
    uint64_t seq = seq_of(run);
    CU_ASSERT_EQUAL(complete(op, run, NULL, status, msg), -CHARTER_FAILED_PRECONDITION);
    char want[256];
    snprintf(want, sizeof want, "run %s holds a send for a human's approval (approval %s, pending)",
             run, approval);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, want));
    CU_ASSERT_EQUAL(seq_of(run), seq);

    Charter__V1__DecideApprovalRequest dq = CHARTER__V1__DECIDE_APPROVAL_REQUEST__INIT;
    dq.approval_id = approval;
    dq.decision = "deny";
    dq.actor = "human_cfo";
    dq.reason = "not this quarter";
    Charter__V1__DecideApprovalResponse *dres = NULL;
    charter_status s;
    CU_ASSERT_EQUAL_FATAL(charter_decide_approval(op, &dq, &dres, &s), 0);
    charter__v1__decide_approval_response__free_unpacked(dres, NULL);
    CU_ASSERT_EQUAL(complete(op, run, NULL, status, msg), 0);
    CU_ASSERT_STRING_EQUAL(status, "completed");
}

/* RULE-HOST-IDENTITY: the analyst's host completes a run of the workflow (its actor is at a
 * step), the event naming its credential; an outsider's host is refused IDENTITY_MISMATCH,
 * recorded on the run with its facts, and the refusal replays. */
static void test_a_host_completes_only_a_run_of_its_actors(void)
{
    char secret[128], id[17], osecret[128], oid[17], status[32], msg[512];
    CU_ASSERT_EQUAL_FATAL(issue_host("analyst", secret, id), 0);
    CU_ASSERT_EQUAL_FATAL(issue_host("outsider", osecret, oid), 0);
    charter_client *host = client_for(secret), *outsider = client_for(osecret);
    CU_ASSERT_PTR_NOT_NULL_FATAL(host);
    CU_ASSERT_PTR_NOT_NULL_FATAL(outsider);
    char run[129];
    CU_ASSERT_EQUAL_FATAL(harness_create_run(op, "external", NULL, run, NULL, NULL), 0);

    CU_ASSERT_EQUAL(complete(outsider, run, NULL, status, msg), -CHARTER_PERMISSION_DENIED);
    char want[256];
    snprintf(want, sizeof want,
             "IDENTITY_MISMATCH: run %s is owned by {researcher, analyst, reporter}; credential "
             "%s acts for {outsider}",
             run, oid);
    CU_ASSERT_STRING_EQUAL(msg, want);
    Charter__V1__RunView *v = view_of(run);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "created");
    CU_ASSERT_EQUAL_FATAL(v->n_events, 2);
    const Charter__V1__Event *e = v->events[1];
    CU_ASSERT_STRING_EQUAL(e->kind, "identity_checked");
    CU_ASSERT_EQUAL(e->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT_STRING_EQUAL(e->witness, want + strlen("IDENTITY_MISMATCH: "));
    uint64_t refused_seq = e->seq;
    charter__v1__run_view__free_unpacked(v, NULL);
    Charter__V1__ReplayDecisionRequest rq = CHARTER__V1__REPLAY_DECISION_REQUEST__INIT;
    rq.run_id = run;
    rq.seq = refused_seq;
    Charter__V1__ReplayDecisionResponse *rp = NULL;
    charter_status s;
    CU_ASSERT_EQUAL_FATAL(charter_replay_decision(op, &rq, &rp, &s), 0);
    CU_ASSERT_TRUE(rp->matches);
    CU_ASSERT_EQUAL(rp->replayed->outcome, CHARTER__V1__OUTCOME__DENY);
    charter__v1__replay_decision_response__free_unpacked(rp, NULL);
    /* Under the unchanged workflow a what-if decides it the same: it keeps its recorded owners
     * (it opened no step to look up in the candidate). */
    char *bytes = harness_slurp(CHARTER_SOURCE_DIR "/deploy/workflows/procurement.json");
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    Charter__V1__WhatIfRequest wq = CHARTER__V1__WHAT_IF_REQUEST__INIT;
    wq.workflow.data = (uint8_t *)bytes;
    wq.workflow.len = strlen(bytes);
    wq.run_id = run;
    Charter__V1__WhatIfResponse *wr = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_what_if(op, &wq, &wr, &s), 0);
    CU_ASSERT_EQUAL(wr->examined, 1);
    CU_ASSERT_EQUAL(wr->n_changes, 0);
    charter__v1__what_if_response__free_unpacked(wr, NULL);
    free(bytes);

    /* The host may end the run, not read it: the answer is its id and status only. */
    Charter__V1__CompleteRunRequest creq = CHARTER__V1__COMPLETE_RUN_REQUEST__INIT;
    creq.run_id = run;
    creq.reason = "the host is done";
    Charter__V1__Run *done = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_complete_run(host, &creq, &done, &s), 0);
    CU_ASSERT_STRING_EQUAL(done->id, run);
    CU_ASSERT_STRING_EQUAL(done->status, "completed");
    CU_ASSERT_STRING_EQUAL(done->task, "");
    CU_ASSERT_STRING_EQUAL(done->workflow, "");
    CU_ASSERT_EQUAL(done->seq, 0);
    charter__v1__run__free_unpacked(done, NULL);
    v = view_of(run);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    char caller[64];
    snprintf(caller, sizeof caller, ", caller credential:%s)", id);
    CU_ASSERT_PTR_NOT_NULL(strstr(v->events[v->n_events - 1]->detail, caller));
    charter__v1__run_view__free_unpacked(v, NULL);
    charter_client_close(host);
    charter_client_close(outsider);
}

/* `charter complete` as a host runs it: CompleteRun is open to a host credential, so the CLI's
 * look at the status before the call (GetRun, which a host may not call) must not stop it
 * with a refusal of another method. */
static void test_a_host_completes_its_run_with_the_cli(void)
{
    char secret[128], id[17], run[129], out[600];
    CU_ASSERT_EQUAL_FATAL(issue_host("reporter", secret, id), 0);
    CU_ASSERT_EQUAL_FATAL(harness_create_run(op, "external", NULL, run, NULL, NULL), 0);
    snprintf(out, sizeof out, "%s/complete.out", folder);
    int rc = harness_sh("CHARTER_URL='%s' CHARTER_TOKEN='%s' '%s' complete %s --reason 'host' "
                        ">'%s' 2>&1",
                        daemon_.tcp_url, secret, CHARTER_CLI_PATH, run, out);
    char *text = harness_slurp(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(rc, 0);
    char want[200];
    snprintf(want, sizeof want, "run %s  completed\n", run);
    CU_ASSERT_STRING_EQUAL(text, want);
    free(text);
    Charter__V1__RunView *v = view_of(run);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "completed");
    charter__v1__run_view__free_unpacked(v, NULL);
}

/* A retention pass archives only ended runs: a created external run stays in the database;
 * completed, it leaves for its archive. */
static void test_retention_archives_an_external_run_once_completed(void)
{
    char run[129], ctx[129], source[129], status[32], msg[512], dir[300];
    research_run(run, ctx, source);
    snprintf(dir, sizeof dir, "%s/archive", folder);
    const retention_period now = {0, 0};
    retention_result r;
    CU_ASSERT_EQUAL_FATAL(retention_pass(st, "test_complete", &now, dir, &r), STATUS_OK);
    CU_ASSERT_TRUE(r.held);
    CU_ASSERT_EQUAL(r.failed, 0);
    CU_ASSERT_NOT_EQUAL(harness_sh("test -f %s/%s/*/%s.charter-archive", dir, graph, run), 0);
    CU_ASSERT(seq_of(run) > 0); /* still in the database */

    CU_ASSERT_EQUAL_FATAL(complete(op, run, NULL, status, msg), 0);
    CU_ASSERT_EQUAL_FATAL(retention_pass(st, "test_complete", &now, dir, &r), STATUS_OK);
    CU_ASSERT_TRUE(r.held);
    CU_ASSERT_EQUAL(r.failed, 0);
    CU_ASSERT(r.archived >= 1);
    CU_ASSERT_EQUAL(harness_sh("test -f %s/%s/*/%s.charter-archive", dir, graph, run), 0);
    Charter__V1__GetRunRequest get = CHARTER__V1__GET_RUN_REQUEST__INIT;
    get.run_id = run;
    Charter__V1__RunView *v = NULL;
    charter_status s;
    CU_ASSERT_EQUAL(charter_get_run(op, &get, &v, &s), -CHARTER_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(s.message, "was archived to"));
}

/* --- the suite ---------------------------------------------------------------------------- */

static int suite_init(void)
{
    snprintf(keyfile, sizeof keyfile, "%s/integrity.key", folder);
    FILE *f = fopen(keyfile, "wb");
    if (f == NULL || fwrite(key, 1, sizeof key - 1, f) != sizeof key - 1 || fclose(f) != 0 ||
        chmod(keyfile, 0600) != 0)
        return -1;
    harness_graph_name(graph, sizeof graph, "complete");
    st = harness_store_open(graph);
    const char *extra[] = {"--integrity-key", keyfile};
    harness_charterd_opts o = {.graph = graph, .extra_args = extra, .n_extra = 2};
    if (harness_charterd_start(&o, &daemon_) != 0)
        return -1;
    op = client_for(HARNESS_OPERATOR_TOKEN);
    viewer = client_for(HARNESS_VIEWER_TOKEN);
    return op != NULL && viewer != NULL ? 0 : -1;
}

static int suite_clean(void)
{
    charter_client_close(op);
    charter_client_close(viewer);
    int rc = harness_charterd_stop(&daemon_);
    store_close(st);
    harness_graph_drop(graph);
    const char *url = harness_redis_url();
    redisContext *r = strncmp(url, "unix://", 7) == 0 ? redisConnectUnix(url + 7) : NULL;
    for (size_t i = 0; r != NULL && !r->err && i < n_issued; i++)
        freeReplyObject(redisCommand(r, "DEL charter:{_tenants}:cred:%s", issued_ids[i]));
    if (r != NULL && !r->err)
        freeReplyObject(redisCommand(r, "DEL charter:{_tenants}:creds:%s", graph));
    if (r != NULL)
        redisFree(r);
    return rc == 0 ? 0 : -1;
}

static int setup(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    if (integrity_set_key(key, sizeof key - 1) != STATUS_OK)
        return 1;
    snprintf(folder, sizeof folder, "/tmp/charter-complete-%d", (int)getpid());
    if (harness_sh("rm -rf '%s' && mkdir -m 700 -p '%s'", folder, folder) != 0)
        return 1;
    return harness_evlog_builtin("test_complete");
}

static void teardown(void)
{
    harness_sh("rm -rf '%s'", folder);
    registry_shutdown();
}

static const harness_test complete_tests[] = {
    {"an external run completes once with its event and its end",
     test_an_external_run_completes_once_with_its_event_and_its_end},
    {"Gate calls on a completed run are refused and write nothing",
     test_gate_calls_on_a_completed_run_are_refused_and_write_nothing},
    {"a committed tool call is acknowledged after the run completed",
     test_a_committed_tool_call_is_acknowledged_after_the_run_completed},
    {"a committed send is acknowledged after the run completed",
     test_a_committed_send_is_acknowledged_after_the_run_completed},
    {"CompleteRun refuses what it does not end and writes nothing",
     test_complete_refuses_what_it_does_not_end_and_writes_nothing},
    {"a send held for a human keeps the run open until decided",
     test_a_send_held_for_a_human_keeps_the_run_open_until_decided},
    {"a host completes only a run of its actors", test_a_host_completes_only_a_run_of_its_actors},
    {"a host completes its run with the CLI", test_a_host_completes_its_run_with_the_cli},
    {"retention archives an external run once completed",
     test_retention_archives_an_external_run_once_completed},
};
static const harness_suite suites[] = {
    {"CompleteRun", suite_init, suite_clean, HARNESS_TABLE(complete_tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .setup = setup, .teardown = teardown,
                                       .needs_redis = true};
