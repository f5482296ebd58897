/*
 * test_approval.c - human approval of deliveries: the workflow rules, the held send, the
 * decision by the named human only, and the races a decision meets (many threads over two real
 * charterd processes on one graph in the test Redis): approve against approve and deny, against
 * a revocation of a chain grant, and against the deadline. Whatever wins, exactly one outcome is
 * recorded, once: the oracle reads the approval, the deliveries key and the event log straight
 * from the database (the query stubs), not through charterd. Threads only record what they got;
 * every assertion runs on the main thread (CUnit is not thread-safe).
 */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"
#include "policy/workflow.h"

#define N_CLIENTS 8
#define N_THREADS 16
#define REVOKE_ROUNDS 12
#define EXPIRY_ROUNDS 8
#define WORKFLOW_FILE CHARTER_SOURCE_DIR "/tests/workflows/approval.json"

static harness_private_redis suite_redis;
static char graph[64];
static store *graph_store;
static harness_charterd daemon_a, daemon_b;
static charter_client *clients[N_CLIENTS];
static char version_long[65];  /* the approval workflow, 10 minutes to decide */
static char version_short[65]; /* the same with 1 s to decide */

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A stored time "<seconds>.<6 digits>" as microseconds, exactly; -1 when it is not one. */
static long long stored_us(const char *s)
{
    long long sec = 0, usec = 0;
    if (s == NULL || sscanf(s, "%lld.%6lld", &sec, &usec) != 2)
        return -1;
    return sec * 1000000 + usec;
}

/* --- workflow rules (no server) ------------------------------------------------------------ */

static char *definition_text(void)
{
    FILE *f = fopen(WORKFLOW_FILE, "rb");
    if (f == NULL)
        return NULL;
    char *buf = malloc(WORKFLOW_MAX_FILE_BYTES + 1);
    size_t n = buf ? fread(buf, 1, WORKFLOW_MAX_FILE_BYTES, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* The approval workflow with edit applied to its parsed definition, loaded; the reason of a
 * refusal in err. Returns workflow_load_buffer's result (the workflow freed). */
static int load_edited(void (*edit)(json_t *doc), char *err, size_t errlen)
{
    char *text = definition_text();
    json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (doc == NULL)
        return -2;
    edit(doc);
    char *out = json_dumps(doc, JSON_INDENT(2));
    json_decref(doc);
    workflow *wf = NULL;
    int rc = workflow_load_buffer(out, strlen(out), &wf, err, errlen);
    workflow_free(wf);
    free(out);
    return rc;
}

static json_t *cfo_approval(json_t *doc)
{
    return json_object_get(json_array_get(json_object_get(doc, "recipients"), 0), "approval");
}
static void edit_none(json_t *doc)
{
    (void)doc;
}
static void edit_agent_approver(json_t *doc)
{
    json_object_set_new(cfo_approval(doc), "by", json_string("analyst"));
}
static void edit_unknown_approver(json_t *doc)
{
    json_object_set_new(cfo_approval(doc), "by", json_string("human_ceo"));
}
static void edit_deadline_zero(json_t *doc)
{
    json_object_set_new(cfo_approval(doc), "within_ms", json_integer(0));
}
static void edit_deadline_text(json_t *doc)
{
    json_object_set_new(cfo_approval(doc), "within_ms", json_string("600000"));
}
static void edit_unknown_tool(json_t *doc)
{
    json_object_set_new(doc, "tools",
                        json_pack("{s:{s:{s:s, s:i}}}", "send_fax", "approval", "by", "human_cfo",
                                  "within_ms", 60000));
}
static void edit_tool_other_approver(json_t *doc)
{
    json_array_append_new(json_object_get(doc, "actors"),
                          json_pack("{s:s, s:s}", "id", "human_ceo", "kind", "human"));
    json_object_set_new(doc, "tools",
                        json_pack("{s:{s:{s:s, s:i}}}", "deliver_internal", "approval", "by",
                                  "human_ceo", "within_ms", 60000));
}
static void edit_extra_field(json_t *doc)
{
    json_object_set_new(cfo_approval(doc), "quorum", json_integer(2));
}

static void test_workflow_approval_rules_name_the_field(void)
{
    char err[512];
    CU_ASSERT_EQUAL(load_edited(edit_none, err, sizeof err), 0);
    CU_ASSERT_EQUAL(load_edited(edit_agent_approver, err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(err, "recipients[0].approval.by: \"analyst\" is not a human actor: "
                                "only a human approves");
    CU_ASSERT_EQUAL(load_edited(edit_unknown_approver, err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(err, "recipients[0].approval.by: unknown actor \"human_ceo\"");
    CU_ASSERT_EQUAL(load_edited(edit_deadline_zero, err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(err, "recipients[0].approval.within_ms: 0 is outside "
                                "1000..604800000 milliseconds");
    CU_ASSERT_EQUAL(load_edited(edit_deadline_text, err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(err, "recipients[0].approval.within_ms: must be an integer");
    CU_ASSERT_EQUAL(load_edited(edit_unknown_tool, err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(err, "tools.send_fax: no grant or step lists the tool \"send_fax\"");
    CU_ASSERT_EQUAL(load_edited(edit_tool_other_approver, err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(err, "steps[1]: tool \"deliver_internal\" asks approval by human_ceo "
                                "and recipient \"cfo\" by human_cfo: a send is approved by one "
                                "human");
    CU_ASSERT_EQUAL(load_edited(edit_extra_field, err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(err, "recipients[0].approval.quorum: unknown field");
}

static void test_approval_for_names_the_human_and_the_deadline(void)
{
    workflow *wf = NULL;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(workflow_load_file(WORKFLOW_FILE, &wf, err, sizeof err), 0);
    const char *by = NULL;
    long long ms = 0;
    CU_ASSERT_EQUAL(workflow_approval_for(wf, "deliver_internal", "cfo", &by, &ms), 1);
    CU_ASSERT_STRING_EQUAL(by, "human_cfo");
    CU_ASSERT_EQUAL(ms, 600000);
    CU_ASSERT_EQUAL(workflow_approval_for(wf, "deliver_public", "public", &by, &ms), 0);
    CU_ASSERT_PTR_NULL(by);
    workflow_free(wf);
}

/* --- fixture: two charterd, the approval workflow applied twice ---------------------------- */

static int apply(charter_client *c, const char *text, char version[65])
{
    Charter__V1__ApplyWorkflowRequest req = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    req.definition.data = (uint8_t *)text;
    req.definition.len = strlen(text);
    Charter__V1__WorkflowInfo *info = NULL;
    charter_status st;
    if (charter_apply_workflow(c, &req, &info, &st) != 0) {
        fprintf(stderr, "ApplyWorkflow: %s: %s\n", charter_status_name(st.code), st.message);
        return -1;
    }
    snprintf(version, 65, "%s", info->version);
    charter__v1__workflow_info__free_unpacked(info, NULL);
    return 0;
}

static int suite_setup(void)
{
    if (harness_suite_redis_start(&suite_redis) != 0)
        return -1;
    harness_graph_name(graph, sizeof graph, "approval");
    graph_store = harness_store_open(graph);
    harness_charterd_opts o = {.graph = graph};
    if (harness_charterd_start(&o, &daemon_a) != 0 || harness_charterd_start(&o, &daemon_b) != 0)
        return -1;
    for (int i = 0; i < N_CLIENTS; i++) {
        const harness_charterd *d = (i % 2 == 0) ? &daemon_a : &daemon_b;
        const char *url = (i / 2) % 2 == 0 ? d->tcp_url : d->ipc_url;
        if (harness_client_open(url, HARNESS_OPERATOR_TOKEN, 30000, &clients[i]) != 0)
            return -1;
    }
    char *text = definition_text();
    if (text == NULL || apply(clients[0], text, version_long) != 0) {
        free(text);
        return -1;
    }
    json_t *doc = json_loads(text, 0, NULL);
    free(text);
    json_object_set_new(cfo_approval(doc), "within_ms", json_integer(1000));
    char *shorter = json_dumps(doc, JSON_INDENT(2));
    json_decref(doc);
    int rc = shorter ? apply(clients[1], shorter, version_short) : -1;
    free(shorter);
    return rc;
}

static int suite_clean(void)
{
    for (int i = 0; i < N_CLIENTS; i++) {
        charter_client_close(clients[i]);
        clients[i] = NULL;
    }
    int a = harness_charterd_stop(&daemon_a);
    int b = harness_charterd_stop(&daemon_b);
    store_close(graph_store);
    graph_store = NULL;
    harness_graph_drop(graph);
    harness_suite_redis_stop(&suite_redis);
    return a == 0 && b == 0 ? 0 : -1;
}

static int suite_init(void)
{
    if (suite_setup() == 0)
        return 0;
    suite_clean();
    return -1;
}

/* --- what a host does: an external run of the workflow, the analyze step, a payload -------- */

typedef struct {
    char run_id[129];
    char ctx[129];
    char payload[129];
} host_setup;

static int host_prepare(charter_client *c, const char *version, host_setup *h)
{
    memset(h, 0, sizeof *h);
    charter_status st;
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    cr.workflow = (char *)version;
    Charter__V1__RunView *view = NULL;
    if (charter_create_run(c, &cr, &view, &st) != 0) {
        fprintf(stderr, "CreateRun: %s\n", st.message);
        return -1;
    }
    snprintf(h->run_id, sizeof h->run_id, "%s", view->run->id);
    charter__v1__run_view__free_unpacked(view, NULL);
    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = h->run_id;
    os.step = "analyze";
    Charter__V1__StepContext *sc = NULL;
    if (charter_open_step(c, &os, &sc, &st) != 0)
        return -1;
    snprintf(h->ctx, sizeof h->ctx, "%s", sc->context_id);
    charter__v1__step_context__free_unpacked(sc, NULL);
    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = h->ctx;
    rs.resource_id = "budget";
    Charter__V1__ReadSourceResponse *r = NULL;
    if (charter_read_source(c, &rs, &r, &st) != 0 || r->artifact == NULL)
        return -1;
    char source[129];
    snprintf(source, sizeof source, "%s", r->artifact->id);
    charter__v1__read_source_response__free_unpacked(r, NULL);
    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    char *inputs[1] = {source};
    ro.context_id = h->ctx;
    ro.input_ids = inputs;
    ro.n_input_ids = 1;
    ro.title = "Internal recommendation";
    ro.content = "Recommendation: vendor_b, within the approved ceiling.";
    Charter__V1__RecordOutputResponse *o = NULL;
    if (charter_record_output(c, &ro, &o, &st) != 0 || o->artifact == NULL)
        return -1;
    snprintf(h->payload, sizeof h->payload, "%s", o->artifact->id);
    charter__v1__record_output_response__free_unpacked(o, NULL);
    return 0;
}

static int deliver(charter_client *c, const host_setup *h, const char *inv,
                   Charter__V1__DeliverResponse **out, charter_status *st)
{
    Charter__V1__DeliverRequest req = CHARTER__V1__DELIVER_REQUEST__INIT;
    req.context_id = (char *)h->ctx;
    req.payload_id = (char *)h->payload;
    req.recipient = "cfo";
    req.tool = "deliver_internal";
    req.invocation_id = (char *)inv;
    return charter_deliver(c, &req, out, st);
}

static int decide(charter_client *c, const char *id, const char *decision, const char *actor,
                  Charter__V1__DecideApprovalResponse **out, charter_status *st)
{
    Charter__V1__DecideApprovalRequest req = CHARTER__V1__DECIDE_APPROVAL_REQUEST__INIT;
    req.approval_id = (char *)id;
    req.decision = (char *)decision;
    req.actor = (char *)actor;
    req.reason = "checked by hand";
    *out = NULL;
    return charter_decide_approval(c, &req, out, st);
}

/* Holds a send for approval: the host's run, the send, and the approval id it got. */
static int hold(charter_client *c, const char *version, const char *inv, host_setup *h, char id[64])
{
    if (host_prepare(c, version, h) != 0)
        return -1;
    Charter__V1__DeliverResponse *r = NULL;
    charter_status st;
    if (deliver(c, h, inv, &r, &st) != 0) {
        fprintf(stderr, "Deliver: %s\n", st.message);
        return -1;
    }
    int ok = r->pending_approval != NULL && r->pending_approval[0] != '\0';
    if (ok)
        snprintf(id, 64, "%s", r->pending_approval);
    charter__v1__deliver_response__free_unpacked(r, NULL);
    return ok ? 0 : -1;
}

/* --- the oracle: the database itself ------------------------------------------------------- */

static json_t *stored_approval(const char *id)
{
    json_t *j = NULL;
    if (q_get_approval(graph_store, id, &j) != STATUS_OK)
        return NULL;
    json_t *a = json_incref(json_object_get(j, "approval"));
    json_decref(j);
    return a;
}

static json_t *stored_delivery(const char *inv)
{
    json_t *j = NULL;
    if (q_find_delivery(graph_store, inv, &j) != STATUS_OK)
        return NULL;
    return json_is_object(j) ? j : (json_decref(j), NULL);
}

/* Events of run_id whose detail names approval id, by kind: delivery_decided (the commit) and
 * approval_decided (a denial, an expiry, a refusal). Returns 0, or -1 when unreadable. */
static int count_decision_events(const char *run_id, const char *id, long *commits, long *others)
{
    json_t *view = NULL;
    *commits = *others = 0;
    if (q_get_run(graph_store, run_id, "0", "100000", NULL, NULL, NULL, &view) != STATUS_OK)
        return -1;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(view, "events"), i, e)
    {
        const char *kind = json_string_value(json_object_get(e, "kind"));
        const char *detail = json_string_value(json_object_get(e, "detail"));
        json_t *d = json_loads(detail ? detail : "", 0, NULL);
        const char *aid = json_string_value(json_object_get(d, "approval_id"));
        if (kind && aid && strcmp(aid, id) == 0) {
            if (strcmp(kind, "delivery_decided") == 0)
                ++*commits;
            else if (strcmp(kind, "approval_decided") == 0)
                ++*others;
        }
        json_decref(d);
    }
    json_decref(view);
    return 0;
}

/* --- behaviour ----------------------------------------------------------------------------- */

static void test_held_send_commits_only_when_its_human_approves(void)
{
    host_setup h;
    char id[64];
    const char *inv = "approval-basic-1";
    CU_ASSERT_EQUAL_FATAL(host_prepare(clients[0], version_long, &h), 0);
    Charter__V1__DeliverResponse *r = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(deliver(clients[0], &h, inv, &r, &st), 0);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT(harness_has_code(r->decision->codes, r->decision->n_codes, "APPROVAL_PENDING"));
    CU_ASSERT_PTR_NULL(r->delivery);
    CU_ASSERT_FATAL(r->pending_approval != NULL && strncmp(r->pending_approval, "ap-", 3) == 0);
    snprintf(id, sizeof id, "%s", r->pending_approval);
    CU_ASSERT_STRING_EQUAL(r->approval->state, "pending");
    CU_ASSERT_STRING_EQUAL(r->approval->approver, "human_cfo");
    CU_ASSERT(r->approval->deadline - r->approval->requested_at > 599.9);
    charter__v1__deliver_response__free_unpacked(r, NULL);
    /* Nothing delivered while it waits. */
    json_t *d = stored_delivery(inv);
    CU_ASSERT_PTR_NULL(d);
    json_decref(d);
    /* RULE-APPROVAL-ONE-PER-INVOCATION: a retry through the other charterd finds the same
     * approval; another run's send under the same invocation ID is a conflict. */
    CU_ASSERT_EQUAL_FATAL(deliver(clients[1], &h, inv, &r, &st), 0);
    CU_ASSERT_STRING_EQUAL(r->pending_approval, id);
    charter__v1__deliver_response__free_unpacked(r, NULL);
    host_setup other;
    CU_ASSERT_EQUAL_FATAL(host_prepare(clients[1], version_long, &other), 0);
    CU_ASSERT_EQUAL_FATAL(deliver(clients[0], &other, inv, &r, &st), 0);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT(harness_has_code(r->decision->codes, r->decision->n_codes, "DELIVERY_CONFLICT"));
    CU_ASSERT(r->pending_approval == NULL || r->pending_approval[0] == '\0');
    charter__v1__deliver_response__free_unpacked(r, NULL);
    /* Visible through GetRun and ListApprovals. */
    Charter__V1__GetRunRequest gr = CHARTER__V1__GET_RUN_REQUEST__INIT;
    gr.run_id = h.run_id;
    Charter__V1__RunView *view = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(clients[2], &gr, &view, &st), 0);
    CU_ASSERT_EQUAL_FATAL(view->n_approvals, 1);
    CU_ASSERT_STRING_EQUAL(view->approvals[0]->id, id);
    CU_ASSERT_STRING_EQUAL(view->approvals[0]->state, "pending");
    charter__v1__run_view__free_unpacked(view, NULL);
    Charter__V1__ListApprovalsRequest lr = CHARTER__V1__LIST_APPROVALS_REQUEST__INIT;
    lr.state = "pending";
    Charter__V1__ListApprovalsResponse *list = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_list_approvals(clients[3], &lr, &list, &st), 0);
    bool listed = false;
    for (size_t i = 0; i < list->n_approvals; i++)
        listed |= strcmp(list->approvals[i]->id, id) == 0;
    CU_ASSERT(listed);
    charter__v1__list_approvals_response__free_unpacked(list, NULL);
    /* RULE-APPROVAL-BY-APPROVER: only the named human decides: an agent (or anyone else) is
     * refused, nothing written. */
    Charter__V1__DecideApprovalResponse *dr = NULL;
    CU_ASSERT_NOT_EQUAL(decide(clients[0], id, "approve", "analyst", &dr, &st), 0);
    CU_ASSERT_EQUAL(st.code, CHARTER_PERMISSION_DENIED);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "human_cfo decides it"));
    json_t *a = stored_approval(id);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(a, "state")), "pending");
    json_decref(a);
    /* RULE-APPROVAL-COMMIT: the human approves: committed in the same conditional write as
     * any delivery, its event the delivery's. */
    CU_ASSERT_EQUAL_FATAL(decide(clients[1], id, "approve", "human_cfo", &dr, &st), 0);
    CU_ASSERT_EQUAL(dr->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_STRING_EQUAL(dr->approval->state, "approved");
    CU_ASSERT_STRING_EQUAL(dr->approval->decided_by, "human_cfo");
    CU_ASSERT_FATAL(dr->delivery != NULL);
    CU_ASSERT_STRING_EQUAL(dr->delivery->invocation_id, inv);
    CU_ASSERT_EQUAL(dr->delivery->event_seq, dr->approval->event_seq);
    charter__v1__decide_approval_response__free_unpacked(dr, NULL);
    d = stored_delivery(inv);
    CU_ASSERT_PTR_NOT_NULL(d);
    json_decref(d);
    /* RULE-APPROVAL-FINAL: a second decision names the first. */
    CU_ASSERT_NOT_EQUAL(decide(clients[2], id, "deny", "human_cfo", &dr, &st), 0);
    CU_ASSERT_EQUAL(st.code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "already decided: approved by human_cfo"));
    /* The host's retry is acknowledged with the delivery. */
    CU_ASSERT_EQUAL_FATAL(deliver(clients[3], &h, inv, &r, &st), 0);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT(r->acknowledged);
    charter__v1__deliver_response__free_unpacked(r, NULL);
    long commits = -1, others = -1;
    CU_ASSERT_EQUAL(count_decision_events(h.run_id, id, &commits, &others), 0);
    CU_ASSERT_EQUAL(commits, 1);
    CU_ASSERT_EQUAL(others, 0);
}

/* --- a scripted run whose send is held: the executor waits for the approval ------------- */

static long long mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* GetRun of run_id through c, or NULL. */
static Charter__V1__RunView *run_view(charter_client *c, const char *run_id)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)run_id;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    return charter_get_run(c, &req, &v, &st) == 0 ? v : NULL;
}

/* Polls run_id until its status is one of the comma list want (at most limit_ms); the last
 * status seen into status. */
static bool await_status(charter_client *c, const char *run_id, const char *want, int limit_ms,
                         char status[32])
{
    long long until = mono_ms() + limit_ms;
    char list[160];
    snprintf(list, sizeof list, ",%s,", want);
    status[0] = '\0';
    while (mono_ms() < until) {
        Charter__V1__RunView *v = run_view(c, run_id);
        if (v) {
            snprintf(status, 32, "%s", v->run->status);
            charter__v1__run_view__free_unpacked(v, NULL);
        }
        char pat[40];
        snprintf(pat, sizeof pat, ",%s,", status);
        if (status[0] && strstr(list, pat))
            return true;
        harness_sleep_ms(50);
    }
    return false;
}

/* A scripted run of the approval workflow (10 minutes to decide), created through c and
 * followed until its executor waits for the CFO's approval of analyze's send: the run's id and
 * the approval's id. Returns 0, or -1 when the run never got there. */
static int scripted_held(charter_client *c, char run_id[80], char approval_id[64])
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "scripted";
    req.workflow = version_long;
    req.async = true;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    if (charter_create_run(c, &req, &v, &st) != 0) {
        fprintf(stderr, "CreateRun: %s\n", st.message);
        return -1;
    }
    snprintf(run_id, 80, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    char status[32];
    if (!await_status(c, run_id, "pending_approval", 15000, status)) {
        fprintf(stderr, "run %s is %s, not pending_approval\n", run_id, status);
        return -1;
    }
    v = run_view(c, run_id);
    int rc = v && v->n_approvals == 1 && strcmp(v->approvals[0]->state, "pending") == 0 ? 0 : -1;
    if (rc == 0)
        snprintf(approval_id, 64, "%s", v->approvals[0]->id);
    if (v)
        charter__v1__run_view__free_unpacked(v, NULL);
    return rc;
}

/* The detail of the run's last status_changed event into out (n bytes). */
static void last_transition(const Charter__V1__RunView *v, char *out, size_t n)
{
    out[0] = '\0';
    for (size_t i = 0; i < v->n_events; i++)
        if (strcmp(v->events[i]->kind, "status_changed") == 0)
            snprintf(out, n, "%s", v->events[i]->detail);
}

static void test_scripted_run_waits_for_approval_and_continues_when_approved(void)
{
    char run_id[80], id[64], status[32], last[1024];
    CU_ASSERT_EQUAL_FATAL(scripted_held(clients[0], run_id, id), 0);
    /* It waits on an executor: no delivery yet, and it stays pending while nobody decides. */
    harness_sleep_ms(1500);
    Charter__V1__RunView *v = run_view(clients[1], run_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "pending_approval");
    CU_ASSERT_EQUAL(v->n_deliveries, 0);
    last_transition(v, last, sizeof last);
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "running -> pending_approval"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last, id));
    charter__v1__run_view__free_unpacked(v, NULL);
    Charter__V1__DecideApprovalResponse *dr = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(decide(clients[2], id, "approve", "human_cfo", &dr, &st), 0);
    CU_ASSERT_EQUAL(dr->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    charter__v1__decide_approval_response__free_unpacked(dr, NULL);
    /* The run goes on past analyze: the reference workflow's poisoned handoff then blocks the
     * report step, with the CFO delivery (the approved one) committed once. */
    CU_ASSERT_TRUE(
        await_status(clients[0], run_id, "completed,blocked,error,cancelled", 15000, status));
    CU_ASSERT_STRING_EQUAL(status, "blocked");
    v = run_view(clients[1], run_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(v->n_deliveries, 1);
    CU_ASSERT_EQUAL(v->run->deliveries, 1);
    if (v->n_deliveries == 1)
        CU_ASSERT_STRING_EQUAL(v->deliveries[0]->recipient, "cfo");
    bool back = false;
    for (size_t i = 0; i < v->n_events; i++)
        back = back || strstr(v->events[i]->detail, "pending_approval -> running") != NULL;
    CU_ASSERT_TRUE(back);
    last_transition(v, last, sizeof last);
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "running -> blocked"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "\"step\":\"report\""));
    charter__v1__run_view__free_unpacked(v, NULL);
    long commits = -1, others = -1;
    CU_ASSERT_EQUAL(count_decision_events(run_id, id, &commits, &others), 0);
    CU_ASSERT_EQUAL(commits, 1);
    CU_ASSERT_EQUAL(others, 0);
}

static void test_scripted_run_waiting_for_approval_is_refused_when_denied(void)
{
    char run_id[80], id[64], status[32], last[1024];
    CU_ASSERT_EQUAL_FATAL(scripted_held(clients[1], run_id, id), 0);
    Charter__V1__DecideApprovalResponse *dr = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(decide(clients[3], id, "deny", "human_cfo", &dr, &st), 0);
    charter__v1__decide_approval_response__free_unpacked(dr, NULL);
    /* Refused as any refused send: the run ends blocked at analyze, nothing delivered. */
    CU_ASSERT_TRUE(
        await_status(clients[0], run_id, "completed,blocked,error,cancelled", 15000, status));
    CU_ASSERT_STRING_EQUAL(status, "blocked");
    Charter__V1__RunView *v = run_view(clients[0], run_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(v->n_deliveries, 0);
    last_transition(v, last, sizeof last);
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "running -> blocked"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "\"step\":\"analyze\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "was denied"));
    charter__v1__run_view__free_unpacked(v, NULL);
    char inv[160];
    snprintf(inv, sizeof inv, "%s:analyze:deliver", run_id); /* the runner's invocation ID */
    json_t *d = stored_delivery(inv);
    CU_ASSERT_PTR_NULL(d);
    json_decref(d);
}

static void test_scripted_run_cancelled_while_waiting_for_approval_never_delivers(void)
{
    char run_id[80], id[64], status[32], last[1024];
    CU_ASSERT_EQUAL_FATAL(scripted_held(clients[2], run_id, id), 0);
    Charter__V1__CancelRunRequest cr = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
    cr.run_id = run_id;
    cr.reason = "vendor list changed";
    Charter__V1__Run *r = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_cancel_run(clients[3], &cr, &r, &st), 0);
    charter__v1__run__free_unpacked(r, NULL);
    /* The waiting executor sees the request at its next lease renewal. */
    CU_ASSERT_TRUE(
        await_status(clients[0], run_id, "completed,blocked,error,cancelled", 10000, status));
    CU_ASSERT_STRING_EQUAL(status, "cancelled");
    Charter__V1__RunView *v = run_view(clients[0], run_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    last_transition(v, last, sizeof last);
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "running -> cancelled"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "vendor list changed"));
    CU_ASSERT_PTR_NOT_NULL(strstr(last, "\"step\":\"analyze\""));
    charter__v1__run_view__free_unpacked(v, NULL);
    /* An approval after the cancel delivers nothing: the commit refuses the stopped run. */
    Charter__V1__DecideApprovalResponse *dr = NULL;
    CU_ASSERT_EQUAL_FATAL(decide(clients[0], id, "approve", "human_cfo", &dr, &st), 0);
    CU_ASSERT_STRING_EQUAL(dr->approval->state, "refused");
    CU_ASSERT_PTR_NULL(dr->delivery);
    charter__v1__decide_approval_response__free_unpacked(dr, NULL);
    v = run_view(clients[0], run_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL(v->n_deliveries, 0);
    charter__v1__run_view__free_unpacked(v, NULL);
}

/* A send held by an attempt that is over must not land after the run ended: the charterd
 * waiting for the approval stops (the run interrupted, the approval still pending), another
 * charterd recovers the run to completed, and only then does the human approve. The approval
 * is refused (run_stopped) and the completed run keeps the one delivery its recovery made. */
static void test_approval_of_an_earlier_attempt_never_delivers_into_an_ended_run(void)
{
    char g[64], v[65], run_id[80], status[32];
    harness_graph_name(g, sizeof g, "approval_ended");
    const char *extra[] = {"--runners", "1"};
    harness_charterd_opts o = {.graph = g, .extra_args = extra, .n_extra = 2};
    harness_charterd x, y;
    charter_client *cx = NULL, *cy = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &x), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(x.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &cx), 0);
    char *text = definition_text();
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    int applied = apply(cx, text, v);
    free(text);
    CU_ASSERT_EQUAL_FATAL(applied, 0);
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "scripted";
    req.workflow = v;
    req.async = true;
    Charter__V1__RunView *rv = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_create_run(cx, &req, &rv, &st), 0);
    snprintf(run_id, sizeof run_id, "%s", rv->run->id);
    charter__v1__run_view__free_unpacked(rv, NULL);
    CU_ASSERT_TRUE_FATAL(await_status(cx, run_id, "pending_approval", 15000, status));
    rv = run_view(cx, run_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rv);
    CU_ASSERT_EQUAL_FATAL(rv->n_approvals, 1);
    char id[64];
    snprintf(id, sizeof id, "%s", rv->approvals[0]->id);
    charter__v1__run_view__free_unpacked(rv, NULL);
    /* y starts once x holds the run; x stops while waiting: the run is interrupted. */
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &y), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(y.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &cy), 0);
    charter_client_close(cx);
    CU_ASSERT_EQUAL(harness_charterd_stop(&x), 0);
    CU_ASSERT_TRUE_FATAL(await_status(cy, run_id, "interrupted", 15000, status));
    /* y recovers it: the report step delivers to public and the run is completed. */
    Charter__V1__RecoverRunRequest rr = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    rr.run_id = run_id;
    Charter__V1__RecoverRunResponse *rec = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_recover_run(cy, &rr, &rec, &st), 0);
    CU_ASSERT_STRING_EQUAL(rec->run->status, "completed");
    charter__v1__recover_run_response__free_unpacked(rec, NULL);
    /* The CFO approves the earlier attempt's send now: refused, nothing delivered. */
    Charter__V1__DecideApprovalResponse *dr = NULL;
    CU_ASSERT_EQUAL_FATAL(decide(cy, id, "approve", "human_cfo", &dr, &st), 0);
    CU_ASSERT_STRING_EQUAL(dr->approval->state, "refused");
    CU_ASSERT_PTR_NULL(dr->delivery);
    charter__v1__decide_approval_response__free_unpacked(dr, NULL);
    rv = run_view(cy, run_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rv);
    CU_ASSERT_STRING_EQUAL(rv->run->status, "completed");
    CU_ASSERT_EQUAL(rv->n_deliveries, 1);
    if (rv->n_deliveries == 1)
        CU_ASSERT_STRING_EQUAL(rv->deliveries[0]->recipient, "public");
    charter__v1__run_view__free_unpacked(rv, NULL);
    charter_client_close(cy);
    CU_ASSERT_EQUAL(harness_charterd_stop(&y), 0);
    harness_graph_drop(g);
}

static void test_denied_send_is_never_delivered_and_stays_denied(void)
{
    host_setup h;
    char id[64];
    const char *inv = "approval-deny-1";
    CU_ASSERT_EQUAL_FATAL(hold(clients[0], version_long, inv, &h, id), 0);
    Charter__V1__DecideApprovalResponse *dr = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(decide(clients[1], id, "deny", "human_cfo", &dr, &st), 0);
    CU_ASSERT_EQUAL(dr->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT(harness_has_code(dr->decision->codes, dr->decision->n_codes, "APPROVAL_DENIED"));
    CU_ASSERT_PTR_NULL(dr->delivery);
    charter__v1__decide_approval_response__free_unpacked(dr, NULL);
    CU_ASSERT_NOT_EQUAL(decide(clients[0], id, "approve", "human_cfo", &dr, &st), 0);
    CU_ASSERT_EQUAL(st.code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "already decided: denied by human_cfo"));
    Charter__V1__DeliverResponse *r = NULL;
    CU_ASSERT_EQUAL_FATAL(deliver(clients[2], &h, inv, &r, &st), 0);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT(harness_has_code(r->decision->codes, r->decision->n_codes, "APPROVAL_DENIED"));
    CU_ASSERT_PTR_NULL(r->delivery);
    charter__v1__deliver_response__free_unpacked(r, NULL);
    json_t *d = stored_delivery(inv);
    CU_ASSERT_PTR_NULL(d);
    json_decref(d);
    long commits = -1, others = -1;
    CU_ASSERT_EQUAL(count_decision_events(h.run_id, id, &commits, &others), 0);
    CU_ASSERT_EQUAL(commits, 0);
    CU_ASSERT_EQUAL(others, 1);
}

static int revoke_grant(charter_client *c, const char *grant)
{
    Charter__V1__RevokeGrantRequest req = CHARTER__V1__REVOKE_GRANT_REQUEST__INIT;
    req.grant_id = (char *)grant;
    Charter__V1__Grant *g = NULL;
    charter_status st;
    int rc = charter_revoke_grant(c, &req, &g, &st);
    if (g)
        charter__v1__grant__free_unpacked(g, NULL);
    return rc;
}

static int restore_grants(charter_client *c)
{
    Charter__V1__RestoreGrantsRequest req = CHARTER__V1__RESTORE_GRANTS_REQUEST__INIT;
    Charter__V1__RestoreGrantsResponse *r = NULL;
    charter_status st;
    int rc = charter_restore_grants(c, &req, &r, &st);
    if (r)
        charter__v1__restore_grants_response__free_unpacked(r, NULL);
    return rc;
}

/* RULE-APPROVAL-GATE-FIRST */
static void test_gate_deny_never_becomes_an_approval(void)
{
    host_setup h;
    CU_ASSERT_EQUAL_FATAL(host_prepare(clients[0], version_long, &h), 0);
    CU_ASSERT_EQUAL_FATAL(revoke_grant(clients[1], "g_analyst"), 0);
    Charter__V1__DeliverResponse *r = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(deliver(clients[0], &h, "approval-gate-deny-1", &r, &st), 0);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT(harness_has_code(r->decision->codes, r->decision->n_codes, "GRANT_INVALID"));
    CU_ASSERT(r->pending_approval == NULL || r->pending_approval[0] == '\0');
    CU_ASSERT_PTR_NULL(r->approval);
    charter__v1__deliver_response__free_unpacked(r, NULL);
    CU_ASSERT_EQUAL(restore_grants(clients[1]), 0);
    Charter__V1__ListApprovalsRequest lr = CHARTER__V1__LIST_APPROVALS_REQUEST__INIT;
    lr.run_id = h.run_id;
    Charter__V1__ListApprovalsResponse *list = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_list_approvals(clients[2], &lr, &list, &st), 0);
    CU_ASSERT_EQUAL(list->n_approvals, 0);
    charter__v1__list_approvals_response__free_unpacked(list, NULL);
}

/* RULE-APPROVAL-SILENCE-IS-NOT-CONSENT, RULE-APPROVAL-DEADLINE-DATABASE-CLOCK: the deadline is
 * the database's, checked by the database at the decision. */
static void test_silence_is_never_consent(void)
{
    host_setup h;
    char id[64];
    const char *inv = "approval-silence-1";
    CU_ASSERT_EQUAL_FATAL(hold(clients[0], version_short, inv, &h, id), 0);
    json_t *a = stored_approval(id);
    CU_ASSERT_EQUAL(stored_us(json_string_value(json_object_get(a, "deadline"))) -
                        stored_us(json_string_value(json_object_get(a, "requested_at"))),
                    1000000);
    json_decref(a);
    usleep(1200 * 1000);
    /* Undecided past its deadline: listed expired, nothing delivered, nothing written. */
    Charter__V1__ListApprovalsRequest lr = CHARTER__V1__LIST_APPROVALS_REQUEST__INIT;
    lr.run_id = h.run_id;
    Charter__V1__ListApprovalsResponse *list = NULL;
    charter_status st;
    CU_ASSERT_EQUAL_FATAL(charter_list_approvals(clients[1], &lr, &list, &st), 0);
    CU_ASSERT_EQUAL_FATAL(list->n_approvals, 1);
    CU_ASSERT_STRING_EQUAL(list->approvals[0]->state, "expired");
    charter__v1__list_approvals_response__free_unpacked(list, NULL);
    json_t *d = stored_delivery(inv);
    CU_ASSERT_PTR_NULL(d);
    json_decref(d);
    /* An approval after the deadline is refused and records the expiry. */
    Charter__V1__DecideApprovalResponse *dr = NULL;
    CU_ASSERT_EQUAL_FATAL(decide(clients[2], id, "approve", "human_cfo", &dr, &st), 0);
    CU_ASSERT_EQUAL(dr->decision->outcome, CHARTER__V1__OUTCOME__DENY);
    CU_ASSERT(harness_has_code(dr->decision->codes, dr->decision->n_codes, "APPROVAL_EXPIRED"));
    CU_ASSERT_STRING_EQUAL(dr->approval->state, "expired");
    CU_ASSERT_PTR_NULL(dr->delivery);
    charter__v1__decide_approval_response__free_unpacked(dr, NULL);
    d = stored_delivery(inv);
    CU_ASSERT_PTR_NULL(d);
    json_decref(d);
}

/* --- races --------------------------------------------------------------------------------- */

typedef struct {
    int index;
    const char *id;
    const char *decision; /* "approve", "deny", or NULL: revoke g_analyst */
    long long start_us;   /* when to act (wall clock), 0: at once */
    int rc;
    int code;
    char state[32];
} racer;

static pthread_barrier_t race_start;

static void *racer_main(void *arg)
{
    racer *r = arg;
    charter_client *c = clients[r->index % N_CLIENTS];
    pthread_barrier_wait(&race_start);
    long long wait = r->start_us - now_us();
    if (r->start_us > 0 && wait > 0)
        usleep((useconds_t)wait);
    if (r->decision == NULL) {
        r->rc = revoke_grant(c, "g_analyst");
        return NULL;
    }
    Charter__V1__DecideApprovalResponse *dr = NULL;
    charter_status st;
    r->rc = decide(c, r->id, r->decision, "human_cfo", &dr, &st);
    r->code = r->rc == 0 ? 0 : (int)st.code;
    if (dr != NULL) {
        snprintf(r->state, sizeof r->state, "%s", dr->approval->state);
        charter__v1__decide_approval_response__free_unpacked(dr, NULL);
    }
    return NULL;
}

/* Runs n racers; returns how many got an answer (rc 0) and checks every other one got
 * FAILED_PRECONDITION (decided before). */
static int run_racers(racer *rs, int n, int *winners, int *bad)
{
    pthread_t t[N_THREADS + 1];
    *winners = *bad = 0;
    if (pthread_barrier_init(&race_start, NULL, (unsigned)n) != 0)
        return -1;
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, racer_main, &rs[i]);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&race_start);
    for (int i = 0; i < n; i++) {
        if (rs[i].decision == NULL)
            continue;
        if (rs[i].rc == 0)
            ++*winners;
        else if (rs[i].code != CHARTER_FAILED_PRECONDITION)
            ++*bad;
    }
    return 0;
}

/* One recorded outcome: the approval's state, the deliveries key and the event log agree. */
static void check_one_outcome(const host_setup *h, const char *id, const char *inv,
                              const char **state_out)
{
    json_t *a = stored_approval(id);
    CU_ASSERT_FATAL(a != NULL);
    const char *state = json_string_value(json_object_get(a, "state"));
    json_t *d = stored_delivery(inv);
    long commits = -1, others = -1;
    CU_ASSERT_EQUAL(count_decision_events(h->run_id, id, &commits, &others), 0);
    CU_ASSERT_EQUAL(commits + others, 1);
    if (state && strcmp(state, "approved") == 0) {
        CU_ASSERT_PTR_NOT_NULL(d);
        CU_ASSERT_EQUAL(commits, 1);
    } else {
        CU_ASSERT_PTR_NULL(d);
        CU_ASSERT_EQUAL(commits, 0);
    }
    static char keep[32];
    snprintf(keep, sizeof keep, "%s", state ? state : "(none)");
    *state_out = keep;
    json_decref(d);
    json_decref(a);
}

static void test_approve_deny_and_revocation_race_to_one_outcome(void)
{
    int outcomes[3] = {0}; /* approved, denied, refused */
    for (int round = 0; round < REVOKE_ROUNDS; round++) {
        host_setup h;
        char id[64], inv[64];
        snprintf(inv, sizeof inv, "approval-race-%d", round);
        CU_ASSERT_EQUAL_FATAL(hold(clients[round % N_CLIENTS], version_long, inv, &h, id), 0);
        racer rs[N_THREADS + 1];
        memset(rs, 0, sizeof rs);
        /* The revocation goes first by 0..3 ms in most rounds, so each outcome gets its turn;
         * the deciders start together. */
        long long t0 = now_us() + 50000;
        long long lead = (long long)(round % 4) * 1000;
        for (int i = 0; i < N_THREADS; i++)
            rs[i] = (racer){.index = i,
                            .id = id,
                            .decision = i % 4 == 3 ? "deny" : "approve",
                            .start_us = t0 + lead};
        rs[N_THREADS] = (racer){.index = round, .id = id, .decision = NULL, .start_us = t0};
        int winners = 0, bad = 0;
        CU_ASSERT_EQUAL_FATAL(run_racers(rs, N_THREADS + 1, &winners, &bad), 0);
        CU_ASSERT_EQUAL(winners, 1);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(rs[N_THREADS].rc, 0);
        const char *state = NULL;
        check_one_outcome(&h, id, inv, &state);
        if (strcmp(state, "approved") == 0) {
            outcomes[0]++;
            /* Committed before the revocation, on the database clock. */
            json_t *d = stored_delivery(inv);
            json_t *chain = NULL;
            CU_ASSERT_EQUAL(q_grant_chain(graph_store, "g_analyst", &chain), STATUS_OK);
            const char *revoked = json_string_value(
                json_object_get(json_array_get(json_object_get(chain, "grants"), 0), "revoked_at"));
            CU_ASSERT(stored_us(json_string_value(json_object_get(d, "committed_at"))) <
                      stored_us(revoked));
            json_decref(chain);
            json_decref(d);
        } else if (strcmp(state, "denied") == 0) {
            outcomes[1]++;
        } else {
            CU_ASSERT_STRING_EQUAL(state, "refused");
            outcomes[2]++;
            json_t *a = stored_approval(id);
            const char *reason = json_string_value(json_object_get(a, "reason"));
            CU_ASSERT_PTR_NOT_NULL(strstr(reason ? reason : "", "grant_revoked g_analyst"));
            json_decref(a);
        }
        CU_ASSERT_EQUAL_FATAL(restore_grants(clients[0]), 0);
    }
    fprintf(stderr, "\n  approve/deny/revoke: %d approved, %d denied, %d refused of %d rounds\n",
            outcomes[0], outcomes[1], outcomes[2], REVOKE_ROUNDS);
    CU_ASSERT_EQUAL(outcomes[0] + outcomes[1] + outcomes[2], REVOKE_ROUNDS);
}

static void test_approve_and_expiry_race_to_one_outcome(void)
{
    int approved = 0, expired = 0;
    for (int round = 0; round < EXPIRY_ROUNDS; round++) {
        host_setup h;
        char id[64], inv[64];
        snprintf(inv, sizeof inv, "approval-expiry-%d", round);
        CU_ASSERT_EQUAL_FATAL(hold(clients[round % N_CLIENTS], version_short, inv, &h, id), 0);
        json_t *a = stored_approval(id);
        long long deadline = stored_us(json_string_value(json_object_get(a, "deadline")));
        json_decref(a);
        CU_ASSERT_FATAL(deadline > 0);
        /* Approvals spread over 4 ms around a point that moves from 6 ms before the deadline
         * to 8 ms after it from round to round (the test Redis runs on this host's clock), so
         * the deadline falls before, among and after them. */
        racer rs[N_THREADS];
        long long centre = deadline - 6000 + (long long)(round % EXPIRY_ROUNDS) * 2000;
        for (int i = 0; i < N_THREADS; i++)
            rs[i] = (racer){.index = i,
                            .id = id,
                            .decision = "approve",
                            .start_us = centre - 2000 + (long long)i * 4000 / N_THREADS};
        int winners = 0, bad = 0;
        CU_ASSERT_EQUAL_FATAL(run_racers(rs, N_THREADS, &winners, &bad), 0);
        CU_ASSERT_EQUAL(winners, 1);
        CU_ASSERT_EQUAL(bad, 0);
        const char *state = NULL;
        check_one_outcome(&h, id, inv, &state);
        a = stored_approval(id);
        long long decided = stored_us(json_string_value(json_object_get(a, "decided_at")));
        json_decref(a);
        if (strcmp(state, "approved") == 0) {
            approved++;
            CU_ASSERT(decided < deadline);
        } else {
            CU_ASSERT_STRING_EQUAL(state, "expired");
            expired++;
            CU_ASSERT(decided >= deadline);
        }
    }
    fprintf(stderr, "\n  approve/expiry: %d approved, %d expired of %d rounds\n", approved, expired,
            EXPIRY_ROUNDS);
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test approval_rule_tests[] = {
    {"workflow_approval_rules_name_the_field", test_workflow_approval_rules_name_the_field},
    {"approval_for_names_the_human_and_the_deadline",
     test_approval_for_names_the_human_and_the_deadline},
};
static const harness_test approval_tests[] = {
    {"held_send_commits_only_when_its_human_approves",
     test_held_send_commits_only_when_its_human_approves},
    {"scripted_run_waits_for_approval_and_continues_when_approved",
     test_scripted_run_waits_for_approval_and_continues_when_approved},
    {"scripted_run_waiting_for_approval_is_refused_when_denied",
     test_scripted_run_waiting_for_approval_is_refused_when_denied},
    {"scripted_run_cancelled_while_waiting_for_approval_never_delivers",
     test_scripted_run_cancelled_while_waiting_for_approval_never_delivers},
    {"approval_of_an_earlier_attempt_never_delivers_into_an_ended_run",
     test_approval_of_an_earlier_attempt_never_delivers_into_an_ended_run},
    {"denied_send_is_never_delivered_and_stays_denied",
     test_denied_send_is_never_delivered_and_stays_denied},
    {"gate_deny_never_becomes_an_approval", test_gate_deny_never_becomes_an_approval},
    {"silence_is_never_consent", test_silence_is_never_consent},
    {"approve_deny_and_revocation_race_to_one_outcome",
     test_approve_deny_and_revocation_race_to_one_outcome},
    {"approve_and_expiry_race_to_one_outcome", test_approve_and_expiry_race_to_one_outcome},
};
static const harness_suite suites[] = {
    {"approval_rules", NULL, NULL, HARNESS_TABLE(approval_rule_tests)},
    {"approval", suite_init, suite_clean, HARNESS_TABLE(approval_tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
