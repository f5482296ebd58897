/*
 * test_async.c - runs that never hold a worker: real charterd processes on the test Redis, a
 * real local HTTP model server that answers slowly, driven through libcharter.
 *
 * CreateRun queues a run and returns at once; an executor thread claims it with a lease and
 * WaitRun follows its events to the end. CancelRun stops a run during its model request (the
 * transfer is aborted) and between steps; each budget fires; a charterd killed mid-run loses
 * its lease and another charterd marks the run interrupted, after which RecoverRun works. A
 * recovery whose send the commit refuses for max_deliveries ends the run budget_exhausted.
 * RecoverRun queues the recovery for an executor the same way, and a recovery whose holder is
 * killed becomes interrupted when its lease lapses, recoverable again on another charterd.
 */
#include <CUnit/Basic.h>
#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"

/* ---- a slow model server: every request is answered HTTP 500 after a delay --------------- */

static harness_model *slow;

static int slow_reply(void *arg, const char *path, const void *body, size_t len,
                      harness_model_reply *out)
{
    (void)arg, (void)path, (void)body, (void)len;
    out->status = 500;
    out->body = strdup("{}");
    return out->body != NULL ? 0 : -1;
}

static int slow_start(void)
{
    const char *paths[] = {"/v1/chat/completions"};
    return harness_model_start(paths, 1, slow_reply, NULL, &slow);
}

/* ---- charterd and helpers ------------------------------------------------------------------ */

static char graph[64];
static harness_charterd daemon_;
static charter_client *op;

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* How long a wait that holds a slot waits for an event before it answers, ms; and how long the
 * test waits for a call that answers at once (any call's time, well short of the former). */
#define LONG_WAIT_MS 30000
#define AT_ONCE_MS 10000

/* Calls method on url with msg as the operator, with a deadline that leaves the call room for
 * a long wait, but takes only AT_ONCE_MS for the answer: a call that waits for a run (or for
 * anything else that cannot happen meanwhile) does not answer in time. Returns harness_rpc's
 * result with *out. */
static int call_at_once(const char *url, const char *method, const ProtobufCMessage *msg,
                        harness_response *out)
{
    return harness_rpc_deadline(url, method, HARNESS_OPERATOR_TOKEN, msg, LONG_WAIT_MS + 10000,
                                AT_ONCE_MS, out);
}

static int suite_init(void)
{
    if (slow_start() != 0)
        return -1;
    harness_model_set_delay(slow, 8000);
    char slow_url[96];
    snprintf(slow_url, sizeof slow_url, "%s/v1", harness_model_url(slow));
    setenv("CHARTER_OPENAI_BASE_URL", slow_url, 1);
    setenv("CHARTER_OPENAI_API_KEY", "test-key", 1);
    setenv("CHARTER_OPENAI_MODEL", "slow-model", 1);
    setenv("CHARTER_MODEL_TIMEOUT_MS", "30000", 1);
    harness_graph_name(graph, sizeof graph, "async");
    const char *extra[] = {"--runners", "2"};
    harness_charterd_opts o = {.graph = graph, .extra_args = extra, .n_extra = 2};
    if (harness_charterd_start(&o, &daemon_) != 0)
        return -1;
    return harness_client_open(daemon_.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &op) == 0 ? 0 : -1;
}

static int suite_clean(void)
{
    charter_client_close(op);
    int rc = harness_charterd_stop(&daemon_);
    harness_graph_drop(graph);
    return rc == 0 ? 0 : -1;
}

/* CreateRun with mode, async and the budget pairs (n of them); NULL on failure, with *code. */
static Charter__V1__RunView *create(charter_client *c, const char *mode, bool async,
                                    const char *const *keys, const int64_t *values, size_t n,
                                    int *code)
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    Charter__V1__CreateRunRequest__BudgetEntry entries[4], *ptrs[4];
    for (size_t i = 0; i < n; i++) {
        charter__v1__create_run_request__budget_entry__init(&entries[i]);
        entries[i].key = (char *)keys[i];
        entries[i].value = values[i];
        ptrs[i] = &entries[i];
    }
    req.mode = (char *)mode;
    req.async = async;
    req.n_budget = n;
    req.budget = ptrs;
    Charter__V1__RunView *v = NULL;
    charter_status s;
    int rc = charter_create_run(c, &req, &v, &s);
    if (code)
        *code = rc == 0 ? 0 : s.code;
    if (rc != 0)
        fprintf(stderr, "\n  CreateRun: %d %s\n", s.code, s.message);
    return v;
}

static Charter__V1__RunView *get_run(charter_client *c, const char *id)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)id;
    Charter__V1__RunView *v = NULL;
    charter_status s;
    return charter_get_run(c, &req, &v, &s) == 0 ? v : NULL;
}

static bool active(const char *status)
{
    return strcmp(status, "queued") == 0 || strcmp(status, "running") == 0 ||
           strcmp(status, "recovering") == 0 || strcmp(status, "pending_approval") == 0;
}

/* Follows the run with WaitRun until it ends (at most limit_ms): every event once, in order.
 * Returns the number of events seen, or -1 when they were not consecutive or it never ended;
 * the last event's detail goes to last_detail. */
static long follow(charter_client *c, const char *id, int limit_ms, char *last_detail,
                   size_t n_detail, long *calls)
{
    uint64_t after = 0;
    long seen = 0;
    long long until = now_ms() + limit_ms;
    *calls = 0;
    while (now_ms() < until) {
        Charter__V1__WaitRunRequest req = CHARTER__V1__WAIT_RUN_REQUEST__INIT;
        req.run_id = (char *)id;
        req.after_seq = after;
        req.timeout_ms = 2000;
        Charter__V1__RunView *v = NULL;
        charter_status s;
        if (charter_wait_run(c, &req, &v, &s) != 0) {
            fprintf(stderr, "\n  WaitRun: %d %s\n", s.code, s.message);
            return -1;
        }
        (*calls)++;
        for (size_t i = 0; i < v->n_events; i++) {
            if (v->events[i]->seq != after + 1) {
                charter__v1__run_view__free_unpacked(v, NULL);
                return -1;
            }
            after = v->events[i]->seq;
            seen++;
            snprintf(last_detail, n_detail, "%s", v->events[i]->detail);
        }
        bool ended = !active(v->run->status) && v->run->seq == after;
        charter__v1__run_view__free_unpacked(v, NULL);
        if (ended)
            return seen;
    }
    return -1;
}

/* Waits until the run has an event of kind (at most limit_ms). */
static bool wait_for_event(charter_client *c, const char *id, const char *kind, int limit_ms)
{
    long long until = now_ms() + limit_ms;
    while (now_ms() < until) {
        Charter__V1__RunView *v = get_run(c, id);
        bool found = false;
        for (size_t i = 0; v && i < v->n_events; i++)
            found = found || strcmp(v->events[i]->kind, kind) == 0;
        if (v)
            charter__v1__run_view__free_unpacked(v, NULL);
        if (found)
            return true;
        nng_msleep(50);
    }
    return false;
}

static Charter__V1__Run *cancel(charter_client *c, const char *id, const char *reason)
{
    Charter__V1__CancelRunRequest req = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
    req.run_id = (char *)id;
    req.reason = (char *)reason;
    Charter__V1__Run *r = NULL;
    charter_status s;
    if (charter_cancel_run(c, &req, &r, &s) != 0)
        fprintf(stderr, "\n  CancelRun: %d %s\n", s.code, s.message);
    return r;
}

/* ---- the tests ------------------------------------------------------------------------------ */

/* CreateRun with async answers while the run is queued: on a charterd with no executor the
 * run cannot move on, so what the answer says is fixed (queued, nothing delivered), and a
 * call that waited for the run would not answer at all (call_at_once). An executor started
 * afterwards, in another charterd on the same graph, runs it, and WaitRun follows every
 * event to the end. */
static void test_async_create_returns_at_once_and_wait_run_follows_to_the_end(void)
{
    char g[64];
    harness_graph_name(g, sizeof g, "async_create");
    const char *none[] = {"--runners", "0"}, *one[] = {"--runners", "1"};
    harness_charterd_opts o0 = {.graph = g, .extra_args = none, .n_extra = 2};
    harness_charterd_opts o1 = {.graph = g, .extra_args = one, .n_extra = 2};
    harness_charterd idle, exec;
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o0, &idle), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(idle.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &c), 0);
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = "scripted";
    req.async = true;
    harness_response hr;
    CU_ASSERT_EQUAL_FATAL(call_at_once(idle.ipc_url, "/charter.v1.Runs/CreateRun", &req.base, &hr),
                          0);
    CU_ASSERT_EQUAL_FATAL(hr.code, 0);
    Charter__V1__RunView *v = charter__v1__run_view__unpack(NULL, hr.payload_len, hr.payload);
    harness_response_free(&hr);
    CU_ASSERT_FATAL(v != NULL && v->run != NULL);
    CU_ASSERT_STRING_EQUAL(v->run->status, "queued");
    CU_ASSERT_EQUAL(v->n_deliveries, 0);
    CU_ASSERT_EQUAL(v->run->steps, 0);
    char id[80], detail[1024] = "";
    snprintf(id, sizeof id, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o1, &exec), 0);
    long calls = 0;
    long seen = follow(c, id, 20000, detail, sizeof detail, &calls);
    CU_ASSERT_TRUE(seen > 5);
    Charter__V1__RunView *end = get_run(c, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(end);
    /* The reference workflow: the CFO delivery commits, the poisoned handoff blocks. */
    CU_ASSERT_STRING_EQUAL(end->run->status, "blocked");
    CU_ASSERT_EQUAL(end->n_deliveries, 1);
    CU_ASSERT_EQUAL((long)end->run->seq, seen);
    CU_ASSERT_EQUAL(end->run->steps, 3);
    CU_ASSERT_EQUAL(end->run->model_calls, 2);
    CU_ASSERT_EQUAL(end->run->deliveries, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, "running -> blocked"));
    charter__v1__run_view__free_unpacked(end, NULL);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&exec), 0);
    CU_ASSERT_EQUAL(harness_charterd_stop(&idle), 0);
    harness_graph_drop(g);
}

static void test_create_without_async_still_returns_the_ended_run(void)
{
    Charter__V1__RunView *v = create(op, "scripted", false, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "blocked");
    CU_ASSERT_EQUAL(v->n_deliveries, 1);
    charter__v1__run_view__free_unpacked(v, NULL);
}

/* WaitRun answers one page as GetRun does: the deliveries the page's events decided, not every
 * delivery of the run. After the delivery's event there is none; from the start, the one. */
static void test_wait_run_answers_the_deliveries_of_its_page(void)
{
    Charter__V1__RunView *v = create(op, "scripted", false, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL_FATAL(v->n_deliveries, 1);
    char id[80];
    snprintf(id, sizeof id, "%s", v->run->id);
    uint64_t decided = v->deliveries[0]->event_seq;
    charter__v1__run_view__free_unpacked(v, NULL);
    CU_ASSERT_TRUE_FATAL(decided > 0);
    uint64_t afters[2] = {decided, 0};
    size_t want[2] = {0, 1};
    for (int k = 0; k < 2; k++) {
        Charter__V1__WaitRunRequest req = CHARTER__V1__WAIT_RUN_REQUEST__INIT;
        req.run_id = id;
        req.after_seq = afters[k];
        req.timeout_ms = 1000;
        Charter__V1__RunView *w = NULL;
        charter_status s;
        CU_ASSERT_EQUAL_FATAL(charter_wait_run(op, &req, &w, &s), 0);
        CU_ASSERT_EQUAL(w->n_deliveries, want[k]);
        for (size_t i = 0; i < w->n_events; i++)
            CU_ASSERT_TRUE(w->events[i]->seq > afters[k]);
        CU_ASSERT_EQUAL(w->artifacts_next, 0);
        charter__v1__run_view__free_unpacked(w, NULL);
    }
    /* A place or seq past any the run can have is an empty page, not an invalid argument. */
    Charter__V1__GetRunRequest g = CHARTER__V1__GET_RUN_REQUEST__INIT;
    g.run_id = id;
    g.after_seq = UINT64_MAX;
    g.artifacts_after = 9223372036854775807ULL;
    Charter__V1__RunView *p = NULL;
    charter_status s;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(op, &g, &p, &s), 0);
    CU_ASSERT_EQUAL(p->n_events, 0);
    CU_ASSERT_EQUAL(p->n_artifacts, 0);
    charter__v1__run_view__free_unpacked(p, NULL);
}

static void test_unknown_or_non_positive_budgets_are_invalid_argument(void)
{
    const char *k1[] = {"max_tokens"}, *k2[] = {"max_steps"};
    int64_t one[] = {5}, zero[] = {0}, neg[] = {-3};
    int code = 0;
    CU_ASSERT_PTR_NULL(create(op, "scripted", true, k1, one, 1, &code));
    CU_ASSERT_EQUAL(code, CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(create(op, "scripted", true, k2, zero, 1, &code));
    CU_ASSERT_EQUAL(code, CHARTER_INVALID_ARGUMENT);
    CU_ASSERT_PTR_NULL(create(op, "scripted", true, k2, neg, 1, &code));
    CU_ASSERT_EQUAL(code, CHARTER_INVALID_ARGUMENT);
}

/* Runs a scripted run with one budget and returns its end (caller frees). */
static Charter__V1__RunView *run_with_budget(const char *mode, const char *key, int64_t value,
                                             char *detail, size_t n_detail)
{
    const char *k[] = {key};
    int64_t val[] = {value};
    Charter__V1__RunView *v = create(op, mode, true, k, val, 1, NULL);
    if (v == NULL)
        return NULL;
    char id[80];
    snprintf(id, sizeof id, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    long calls = 0;
    if (follow(op, id, 20000, detail, n_detail, &calls) < 0)
        return NULL;
    return get_run(op, id);
}

static void test_max_steps_fires_before_the_second_step(void)
{
    char detail[1024] = "";
    Charter__V1__RunView *v = run_with_budget("scripted", "max_steps", 1, detail, sizeof detail);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "budget_exhausted");
    CU_ASSERT_EQUAL(v->run->max_steps, 1);
    CU_ASSERT_EQUAL(v->run->steps, 1);
    CU_ASSERT_EQUAL(v->n_deliveries, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, "\"budget\":\"max_steps\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, "\"step\":\"analyze\""));
    charter__v1__run_view__free_unpacked(v, NULL);
}

static void test_max_model_calls_fires_before_the_second_model_request(void)
{
    char detail[1024] = "";
    Charter__V1__RunView *v =
        run_with_budget("scripted", "max_model_calls", 1, detail, sizeof detail);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "budget_exhausted");
    CU_ASSERT_EQUAL(v->run->model_calls, 1);
    CU_ASSERT_EQUAL(v->n_deliveries, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, "\"budget\":\"max_model_calls\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, "\"step\":\"analyze\""));
    charter__v1__run_view__free_unpacked(v, NULL);
}

/* The reference workflow delivers once; a second delivery of the same run, through the Gate
 * API, meets the budget in the commit itself. */
static void test_max_deliveries_fires_in_the_commit(void)
{
    char detail[1024] = "";
    Charter__V1__RunView *v =
        run_with_budget("scripted", "max_deliveries", 1, detail, sizeof detail);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "blocked");
    CU_ASSERT_EQUAL_FATAL(v->n_deliveries, 1);
    const char *payload = v->deliveries[0]->payload_id;
    Charter__V1__OpenStepRequest oreq = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    oreq.run_id = v->run->id;
    oreq.step = "analyze";
    Charter__V1__StepContext *ctx = NULL;
    charter_status s;
    CU_ASSERT_EQUAL_FATAL(charter_open_step(op, &oreq, &ctx, &s), 0);
    Charter__V1__DeliverRequest dreq = CHARTER__V1__DELIVER_REQUEST__INIT;
    dreq.context_id = ctx->context_id;
    dreq.payload_id = (char *)payload;
    dreq.recipient = "cfo";
    dreq.tool = "deliver_internal";
    dreq.invocation_id = "second-delivery";
    Charter__V1__DeliverResponse *dr = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_deliver(op, &dreq, &dr, &s), 0);
    CU_ASSERT_EQUAL(dr->decision->outcome, CHARTER__V1__OUTCOME__UNKNOWN);
    char want[256];
    snprintf(want, sizeof want,
             "the conditional write was refused: budget_deliveries: run %s has used up its "
             "max_deliveries budget of 1; nothing was delivered",
             v->run->id);
    CU_ASSERT_STRING_EQUAL(dr->decision->witness, want);
    CU_ASSERT_PTR_NULL(dr->delivery);
    Charter__V1__RunView *after = get_run(op, v->run->id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(after);
    CU_ASSERT_EQUAL(after->n_deliveries, 1);
    /* A Gate call changes no run's status: the run rests blocked. */
    CU_ASSERT_STRING_EQUAL(after->run->status, "blocked");
    charter__v1__run_view__free_unpacked(after, NULL);
    charter__v1__deliver_response__free_unpacked(dr, NULL);
    charter__v1__step_context__free_unpacked(ctx, NULL);
    charter__v1__run_view__free_unpacked(v, NULL);
}

/* Waits until the model server has received want requests in all (at most limit_ms): the
 * request is on the wire. */
static bool wait_for_model_requests(int want, int limit_ms)
{
    long long until = now_ms() + limit_ms;
    while (harness_model_requests(slow) < want) {
        if (now_ms() >= until)
            return false;
        nng_msleep(20);
    }
    return true;
}

/* The model's answer is held until the test releases it, after the run has ended: the run can
 * only have ended because the budget cut the model request short. */
static void test_max_wall_clock_ms_aborts_the_model_request(void)
{
    harness_model_set_delay(slow, HARNESS_MODEL_HOLD);
    int before = harness_model_requests(slow);
    char detail[1024] = "";
    Charter__V1__RunView *v =
        run_with_budget("live", "max_wall_clock_ms", 500, detail, sizeof detail);
    CU_ASSERT_PTR_NOT_NULL(v);
    CU_ASSERT_EQUAL(harness_model_requests(slow) - before, 1);
    CU_ASSERT_EQUAL(harness_model_held(slow), 1); /* never answered while the run went on */
    harness_model_release(slow);
    harness_model_set_delay(slow, 8000);
    if (v == NULL)
        return;
    CU_ASSERT_STRING_EQUAL(v->run->status, "budget_exhausted");
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, "\"budget\":\"max_wall_clock_ms\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, "\"step\":\"research\""));
    CU_ASSERT_EQUAL(v->n_deliveries, 0);
    charter__v1__run_view__free_unpacked(v, NULL);
}

/* The model's answer is held until the test releases it, after the run has ended: the run can
 * only have ended because the cancel aborted the transfer. */
static void test_cancel_during_the_model_request_aborts_it_and_names_the_step(void)
{
    harness_model_set_delay(slow, HARNESS_MODEL_HOLD);
    int before = harness_model_requests(slow);
    Charter__V1__RunView *v = create(op, "live", true, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    char id[80];
    snprintf(id, sizeof id, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    CU_ASSERT_TRUE_FATAL(wait_for_model_requests(before + 1, 10000)); /* on the wire */
    Charter__V1__Run *r = cancel(op, id, "operator stop");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_STRING_EQUAL(r->cancel_reason, "operator stop");
    charter__v1__run__free_unpacked(r, NULL);
    char detail[1024] = "";
    long calls = 0;
    CU_ASSERT_TRUE(follow(op, id, 20000, detail, sizeof detail, &calls) > 0);
    CU_ASSERT_EQUAL(harness_model_held(slow), 1); /* never answered while the run went on */
    harness_model_release(slow);
    harness_model_set_delay(slow, 8000);
    Charter__V1__RunView *end = get_run(op, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(end);
    CU_ASSERT_STRING_EQUAL(end->run->status, "cancelled");
    CU_ASSERT_EQUAL(end->n_deliveries, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, "\"reason\":\"operator stop\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, "\"step\":\"research\""));
    CU_ASSERT_EQUAL(harness_model_requests(slow) - before, 1);
    charter__v1__run_view__free_unpacked(end, NULL);
}

/* Runs `charter cancel RUN --reason REASON` against url and expects its first line to be want
 * and its exit status 0. */
static void cli_cancel_says(const char *url, const char *run, const char *reason, const char *want)
{
    char cmd[1024], line[512] = "";
    snprintf(cmd, sizeof cmd, "CHARTER_TOKEN=%s %s --url %s cancel %s --reason %s",
             HARNESS_OPERATOR_TOKEN, CHARTER_CLI_PATH, url, run, reason);
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    if (fgets(line, sizeof line, p) == NULL)
        line[0] = '\0';
    int st = pclose(p);
    CU_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CU_ASSERT_STRING_EQUAL(line, want);
}

static void test_a_queued_run_is_cancelled_at_once(void)
{
    char g2[64];
    harness_graph_name(g2, sizeof g2, "async_idle");
    const char *extra[] = {"--runners", "0"};
    harness_charterd_opts o = {.graph = g2, .extra_args = extra, .n_extra = 2};
    harness_charterd idle;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &idle), 0);
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(idle.ipc_url, HARNESS_OPERATOR_TOKEN, 10000, &c), 0);
    Charter__V1__RunView *v = create(c, "scripted", true, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "queued");
    Charter__V1__Run *r = cancel(c, v->run->id, "not needed");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_STRING_EQUAL(r->status, "cancelled");
    charter__v1__run__free_unpacked(r, NULL);

    /* The CLI: a queued run is cancelled with the reason; one that has already ended is left
     * as it is, and the line says so (exit 0 both times). */
    Charter__V1__RunView *q = create(c, "scripted", true, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    /* `charter wait --timeout-ms` bounds the whole wait: the queued run never ends here, and
     * the command gives up after 1.5 s with exit 1, saying so. */
    char cmd[1024], out[512] = "";
    snprintf(cmd, sizeof cmd,
             "CHARTER_TOKEN=%s timeout 30 %s --url %s wait %s --timeout-ms 1500 2>&1",
             HARNESS_OPERATOR_TOKEN, CHARTER_CLI_PATH, idle.ipc_url, q->run->id);
    long long w0 = now_ms();
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    char line[512];
    while (fgets(line, sizeof line, p) != NULL)
        if (strstr(line, "has not ended after") != NULL)
            snprintf(out, sizeof out, "%s", line);
    int wst = pclose(p);
    long long waited = now_ms() - w0;
    CU_ASSERT_TRUE(WIFEXITED(wst) && WEXITSTATUS(wst) == 1);
    /* It gave up by itself (exit 1, not timeout's 124), and not before its 1.5 s. */
    CU_ASSERT_TRUE(waited >= 1400);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "has not ended after"));
    char want[512];
    snprintf(want, sizeof want, "run %s  cancelled  cancel requested: by hand\n", q->run->id);
    cli_cancel_says(idle.ipc_url, q->run->id, "'by hand'", want);
    snprintf(want, sizeof want, "run %s  cancelled  already ended: nothing was cancelled\n",
             v->run->id);
    cli_cancel_says(idle.ipc_url, v->run->id, "again", want);
    charter__v1__run_view__free_unpacked(q, NULL);
    charter__v1__run_view__free_unpacked(v, NULL);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&idle), 0);
    harness_graph_drop(g2);
}

static void test_cancelling_a_blocked_run_ends_it_and_no_recovery_delivers(void)
{
    /* The reference workflow blocks at the poisoned handoff with the CFO delivery made;
     * recovery would deliver to the public. Cancelled first, it never does. */
    Charter__V1__RunView *v = create(op, "scripted", false, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL_FATAL(v->run->status, "blocked");
    char id[80];
    snprintf(id, sizeof id, "%s", v->run->id);
    size_t delivered = v->n_deliveries;
    charter__v1__run_view__free_unpacked(v, NULL);
    Charter__V1__Run *r = cancel(op, id, "do not publish");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_STRING_EQUAL(r->status, "cancelled");
    CU_ASSERT_STRING_EQUAL(r->cancel_reason, "do not publish");
    charter__v1__run__free_unpacked(r, NULL);
    Charter__V1__RecoverRunRequest rreq = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    rreq.run_id = id;
    Charter__V1__RecoverRunResponse *rr = NULL;
    charter_status s;
    CU_ASSERT_EQUAL(charter_recover_run(op, &rreq, &rr, &s), -CHARTER_FAILED_PRECONDITION);
    if (rr)
        charter__v1__recover_run_response__free_unpacked(rr, NULL);
    Charter__V1__RunView *end = get_run(op, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(end);
    CU_ASSERT_STRING_EQUAL(end->run->status, "cancelled");
    CU_ASSERT_EQUAL(end->n_deliveries, delivered);
    charter__v1__run_view__free_unpacked(end, NULL);
}

static void test_get_run_without_content_or_for_one_artifact(void)
{
    Charter__V1__RunView *v = create(op, "scripted", false, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_TRUE_FATAL(v->n_artifacts >= 2);
    char id[80], one[130], content[4096];
    snprintf(id, sizeof id, "%s", v->run->id);
    snprintf(one, sizeof one, "%s", v->artifacts[1]->id);
    snprintf(content, sizeof content, "%s", v->artifacts[1]->content);
    size_t n = v->n_artifacts;
    CU_ASSERT_TRUE(content[0] != '\0');
    charter__v1__run_view__free_unpacked(v, NULL);

    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = id;
    req.without_content = true;
    Charter__V1__RunView *m = NULL;
    charter_status s;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(op, &req, &m, &s), 0);
    CU_ASSERT_EQUAL(m->n_artifacts, n);
    for (size_t i = 0; i < m->n_artifacts; i++) {
        CU_ASSERT_STRING_EQUAL(m->artifacts[i]->content, "");
        CU_ASSERT_EQUAL(strlen(m->artifacts[i]->hash), 64);
        CU_ASSERT_TRUE(m->artifacts[i]->title[0] != '\0');
    }
    charter__v1__run_view__free_unpacked(m, NULL);

    req.without_content = false;
    req.artifact_id = one;
    CU_ASSERT_EQUAL_FATAL(charter_get_run(op, &req, &m, &s), 0);
    CU_ASSERT_EQUAL_FATAL(m->n_artifacts, 1);
    CU_ASSERT_STRING_EQUAL(m->artifacts[0]->id, one);
    CU_ASSERT_STRING_EQUAL(m->artifacts[0]->content, content);
    charter__v1__run_view__free_unpacked(m, NULL);

    req.artifact_id = "a_not_of_this_run";
    CU_ASSERT_EQUAL_FATAL(charter_get_run(op, &req, &m, &s), 0);
    CU_ASSERT_EQUAL(m->n_artifacts, 0);
    charter__v1__run_view__free_unpacked(m, NULL);
}

/* True when the run has the transition named by change ("running -> interrupted") made by a
 * reaper because the lease lapsed. */
static bool lease_lapsed(charter_client *c, const char *id, const char *change)
{
    Charter__V1__RunView *w = get_run(c, id);
    bool lapsed = false;
    for (size_t i = 0; w && i < w->n_events; i++)
        lapsed = lapsed || (strstr(w->events[i]->detail, change) != NULL &&
                            strstr(w->events[i]->detail, "lease lapsed") != NULL);
    if (w)
        charter__v1__run_view__free_unpacked(w, NULL);
    return lapsed;
}

static void test_killed_executor_loses_its_lease_and_another_charterd_interrupts_the_run(void)
{
    char g3[64];
    harness_graph_name(g3, sizeof g3, "async_kill");
    const char *extra[] = {"--runners", "1"};
    harness_charterd_opts o = {.graph = g3, .extra_args = extra, .n_extra = 2};
    harness_charterd x, y;
    /* The run's model request is held: it stays running until x is killed. */
    harness_model_set_delay(slow, HARNESS_MODEL_HOLD);
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &x), 0);
    charter_client *cx = NULL, *cy = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(x.ipc_url, HARNESS_OPERATOR_TOKEN, 10000, &cx), 0);
    Charter__V1__RunView *v = create(cx, "live", true, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    char id[80];
    snprintf(id, sizeof id, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    CU_ASSERT_TRUE_FATAL(wait_for_event(cx, id, "model_request", 10000));
    /* A second charterd starting now leaves the run alone: its lease is live. */
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &y), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(y.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &cy), 0);
    Charter__V1__RunView *mid = get_run(cy, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mid);
    CU_ASSERT_STRING_EQUAL(mid->run->status, "running");
    charter__v1__run_view__free_unpacked(mid, NULL);
    charter_client_close(cx);
    harness_charterd_kill(&x);
    long long t0 = now_ms();
    char status[32] = "";
    while (now_ms() - t0 < 15000) {
        Charter__V1__RunView *w = get_run(cy, id);
        if (w) {
            snprintf(status, sizeof status, "%s", w->run->status);
            charter__v1__run_view__free_unpacked(w, NULL);
        }
        if (strcmp(status, "interrupted") == 0)
            break;
        nng_msleep(100);
    }
    CU_ASSERT_STRING_EQUAL(status, "interrupted");
    /* Marked by y's reaper once the lease lapsed, not by y's startup. */
    CU_ASSERT_TRUE(lease_lapsed(cy, id, "running -> interrupted"));
    /* RecoverRun still works on the interrupted run (the model now fails fast). */
    harness_model_set_delay(slow, 0);
    harness_model_release(slow);
    Charter__V1__RecoverRunRequest rreq = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    rreq.run_id = id;
    Charter__V1__RecoverRunResponse *rr = NULL;
    charter_status s;
    CU_ASSERT_EQUAL(charter_recover_run(cy, &rreq, &rr, &s), 0);
    if (rr) {
        CU_ASSERT_STRING_NOT_EQUAL(rr->run->status, "interrupted");
        CU_ASSERT_STRING_NOT_EQUAL(rr->run->status, "recovering");
        charter__v1__recover_run_response__free_unpacked(rr, NULL);
    }
    charter_client_close(cy);
    CU_ASSERT_EQUAL(harness_charterd_stop(&y), 0);
    harness_graph_drop(g3);
}

/* RecoverRun of id through c (async or waiting); NULL on failure, with *code. */
static Charter__V1__RecoverRunResponse *recover(charter_client *c, const char *id, bool async,
                                                int *code)
{
    Charter__V1__RecoverRunRequest req = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    req.run_id = (char *)id;
    req.async = async;
    Charter__V1__RecoverRunResponse *r = NULL;
    charter_status s;
    int rc = charter_recover_run(c, &req, &r, &s);
    if (code)
        *code = rc == 0 ? 0 : s.code;
    if (rc != 0)
        fprintf(stderr, "\n  RecoverRun: %d %s\n", s.code, s.message);
    return r;
}

/* The run's status, polled through c until it is want (at most limit_ms); into status. */
static bool await_status(charter_client *c, const char *id, const char *want, int limit_ms,
                         char status[32])
{
    long long t0 = now_ms();
    status[0] = '\0';
    while (now_ms() - t0 < limit_ms) {
        Charter__V1__RunView *w = get_run(c, id);
        if (w) {
            snprintf(status, 32, "%s", w->run->status);
            charter__v1__run_view__free_unpacked(w, NULL);
        }
        if (strcmp(status, want) == 0)
            return true;
        nng_msleep(100);
    }
    return false;
}

/* ---- max_deliveries met by a recovery --------------------------------------------------- */

/* deploy/workflows/<name>.json applied to the suite's graph. */
static int apply_file(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/deploy/workflows/%s.json", CHARTER_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    static char def[256 * 1024];
    size_t n = fread(def, 1, sizeof def, f);
    fclose(f);
    Charter__V1__ApplyWorkflowRequest req = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    req.definition.data = (uint8_t *)def;
    req.definition.len = n;
    Charter__V1__WorkflowInfo *info = NULL;
    charter_status s;
    int rc = charter_apply_workflow(op, &req, &info, &s);
    if (info != NULL)
        charter__v1__workflow_info__free_unpacked(info, NULL);
    return rc;
}

/* A scripted run of workflow with max_deliveries 1, followed to its end (async: CreateRun
 * returns at once and WaitRun follows it); the ended run, or NULL. */
static Charter__V1__RunView *run_max_deliveries_1(const char *workflow, bool async)
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    Charter__V1__CreateRunRequest__BudgetEntry e, *ep = &e;
    charter__v1__create_run_request__budget_entry__init(&e);
    e.key = "max_deliveries";
    e.value = 1;
    req.mode = "scripted";
    req.workflow = (char *)workflow;
    req.async = async;
    req.n_budget = 1;
    req.budget = &ep;
    Charter__V1__RunView *v = NULL;
    charter_status s;
    if (charter_create_run(op, &req, &v, &s) != 0) {
        fprintf(stderr, "\n  CreateRun: %d %s\n", s.code, s.message);
        return NULL;
    }
    if (!async)
        return v;
    char id[80], detail[1024];
    snprintf(id, sizeof id, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    long calls = 0;
    return follow(op, id, 20000, detail, sizeof detail, &calls) > 0 ? get_run(op, id) : NULL;
}

/* The run id after a recovery that met its max_deliveries budget of 1 in the commit: ended
 * budget_exhausted by the recovery naming the budget and its step, the recovery's send
 * refused UNKNOWN with the budget in words, the one delivery of the run only; and it does not
 * recover again. */
static void assert_ended_by_max_deliveries(const char *id, const char *step)
{
    Charter__V1__RunView *v = get_run(op, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "budget_exhausted");
    CU_ASSERT_EQUAL(v->n_deliveries, 1);
    CU_ASSERT_EQUAL(v->run->max_deliveries, 1);
    CU_ASSERT_FATAL(v->n_events > 0);
    const Charter__V1__Event *last = v->events[v->n_events - 1];
    char want[256];
    CU_ASSERT_STRING_EQUAL(last->kind, "status_changed");
    snprintf(want, sizeof want,
             "recovering -> budget_exhausted: {\"step\":\"%s\",\"budget\":\"max_deliveries\","
             "\"by\":\"executor\"}",
             step);
    CU_ASSERT_PTR_NOT_NULL(strstr(last->detail, want));
    size_t refused = 0;
    snprintf(want, sizeof want,
             "the conditional write was refused: budget_deliveries: run %s has used up its "
             "max_deliveries budget of 1; nothing was delivered",
             id);
    for (size_t i = 0; i < v->n_events; i++) {
        const Charter__V1__Event *e = v->events[i];
        if (strcmp(e->kind, "delivery_decided") != 0 || e->outcome != CHARTER__V1__OUTCOME__UNKNOWN)
            continue;
        refused++;
        CU_ASSERT_STRING_EQUAL(e->witness, want);
    }
    CU_ASSERT_EQUAL(refused, 1);
    charter__v1__run_view__free_unpacked(v, NULL);
    int code = 0;
    CU_ASSERT_PTR_NULL(recover(op, id, false, &code));
    CU_ASSERT_EQUAL(code, CHARTER_FAILED_PRECONDITION);
}

/* max_deliveries 1 on a workflow with two sends (procurement: the CFO, then the public report;
 * support: billing, then the customer). The run delivers once and blocks at its poisoned
 * handoff, as it does without a budget. RecoverRun's recovery then sends, and the commit
 * refuses it for the budget: the recovery ends the run budget_exhausted naming max_deliveries
 * (not error, not GRAPH_ERROR), with nothing more delivered. */
static void test_max_deliveries_ends_a_recovery_budget_exhausted_delivering_nothing_more(void)
{
    CU_ASSERT_EQUAL_FATAL(apply_file("support"), 0);
    const struct {
        const char *workflow, *first, *recovery_step;
    } cases[] = {{"procurement", "cfo", "report"}, {"support", "billing", "reply"}};
    for (size_t i = 0; i < 2; i++) {
        Charter__V1__RunView *v = run_max_deliveries_1(cases[i].workflow, false);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        CU_ASSERT_STRING_EQUAL(v->run->status, "blocked");
        CU_ASSERT_EQUAL_FATAL(v->n_deliveries, 1);
        CU_ASSERT_STRING_EQUAL(v->deliveries[0]->recipient, cases[i].first);
        char id[80];
        snprintf(id, sizeof id, "%s", v->run->id);
        charter__v1__run_view__free_unpacked(v, NULL);
        int code = -1;
        Charter__V1__RecoverRunResponse *r = recover(op, id, false, &code);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        CU_ASSERT_STRING_EQUAL(r->run->status, "budget_exhausted");
        CU_ASSERT_EQUAL(r->n_deliveries, 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r->decision);
        CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__UNKNOWN);
        CU_ASSERT_EQUAL(r->decision->n_codes, 0);
        CU_ASSERT_STRING_EQUAL(r->decision->witness,
                               "the recovery ended budget_exhausted (max_deliveries): the run's "
                               "deliveries list what it delivered");
        charter__v1__recover_run_response__free_unpacked(r, NULL);
        assert_ended_by_max_deliveries(id, cases[i].recovery_step);
    }
}

/* The same through the asynchronous calls: CreateRun async and WaitRun, RecoverRun async and
 * WaitRun. */
static void test_max_deliveries_ends_an_async_recovery_budget_exhausted(void)
{
    Charter__V1__RunView *v = run_max_deliveries_1("procurement", true);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "blocked");
    CU_ASSERT_EQUAL(v->n_deliveries, 1);
    char id[80], detail[1024] = "";
    snprintf(id, sizeof id, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    int code = -1;
    Charter__V1__RecoverRunResponse *r = recover(op, id, true, &code);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_TRUE(r->decision == NULL); /* async: WaitRun shows how it ends */
    charter__v1__recover_run_response__free_unpacked(r, NULL);
    long calls = 0;
    CU_ASSERT_TRUE(follow(op, id, 20000, detail, sizeof detail, &calls) > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, "recovering -> budget_exhausted"));
    assert_ended_by_max_deliveries(id, "report");
}

/* RecoverRun with async answers while the recovery is queued: asked of a charterd while no
 * executor serves the graph, the recovery cannot move on, so the answer (recovering, no
 * decision) and the refusal of a second recovery are fixed, and a call that waited for the
 * recovery would not answer at all (call_at_once). An executor started afterwards runs it to
 * its end. */
static void test_recover_run_queues_the_recovery_on_an_executor_and_returns_at_once(void)
{
    char g[64];
    harness_graph_name(g, sizeof g, "async_recover");
    const char *none[] = {"--runners", "0"}, *one[] = {"--runners", "1"};
    harness_charterd_opts o0 = {.graph = g, .extra_args = none, .n_extra = 2};
    harness_charterd_opts o1 = {.graph = g, .extra_args = one, .n_extra = 2};
    harness_charterd idle, exec;
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o0, &idle), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(idle.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &c), 0);
    /* A scripted run blocks at the poisoned handoff; its recovery delivers the public report.
     * The executor that runs it is stopped before the recovery is asked for. */
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o1, &exec), 0);
    Charter__V1__RunView *v = create(c, "scripted", false, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL_FATAL(v->run->status, "blocked");
    char id[80], detail[1024] = "";
    snprintf(id, sizeof id, "%s", v->run->id);
    uint64_t seq = v->run->seq;
    charter__v1__run_view__free_unpacked(v, NULL);
    CU_ASSERT_EQUAL_FATAL(harness_charterd_stop(&exec), 0);
    Charter__V1__RecoverRunRequest req = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    req.run_id = id;
    req.async = true;
    harness_response hr;
    CU_ASSERT_EQUAL_FATAL(call_at_once(idle.ipc_url, "/charter.v1.Runs/RecoverRun", &req.base, &hr),
                          0);
    CU_ASSERT_EQUAL_FATAL(hr.code, 0);
    Charter__V1__RecoverRunResponse *r =
        charter__v1__recover_run_response__unpack(NULL, hr.payload_len, hr.payload);
    harness_response_free(&hr);
    CU_ASSERT_FATAL(r != NULL && r->run != NULL);
    /* Claimed and queued, never run by an RPC worker. */
    CU_ASSERT_STRING_EQUAL(r->run->status, "recovering");
    CU_ASSERT_TRUE(r->decision == NULL); /* async: the decision is WaitRun's to show */
    charter__v1__recover_run_response__free_unpacked(r, NULL);
    /* A second recovery while it is claimed is refused. */
    int code = -1;
    CU_ASSERT_PTR_NULL(recover(c, id, true, &code));
    CU_ASSERT_EQUAL(code, CHARTER_FAILED_PRECONDITION);
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o1, &exec), 0);
    long calls = 0;
    CU_ASSERT_TRUE(follow(c, id, 20000, detail, sizeof detail, &calls) > (long)seq);
    CU_ASSERT_PTR_NOT_NULL(strstr(detail, "recovering -> completed"));
    Charter__V1__RunView *end = get_run(c, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(end);
    CU_ASSERT_STRING_EQUAL(end->run->status, "completed");
    CU_ASSERT_EQUAL(end->n_deliveries, 2); /* the CFO's, then the recovery's public one */
    /* The claim names RecoverRun's recovery; the executor's lease is gone once it ended. */
    bool claimed = false;
    for (size_t i = 0; i < end->n_events; i++)
        claimed = claimed || strstr(end->events[i]->detail, "blocked -> recovering") != NULL;
    CU_ASSERT_TRUE(claimed);
    charter__v1__run_view__free_unpacked(end, NULL);
    /* A completed run is acknowledged, nothing new queued or delivered. */
    r = recover(c, id, false, &code);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_TRUE(r->acknowledged);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r->decision);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_EQUAL(r->n_deliveries, 2);
    charter__v1__recover_run_response__free_unpacked(r, NULL);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&exec), 0);
    CU_ASSERT_EQUAL(harness_charterd_stop(&idle), 0);
    harness_graph_drop(g);
}

static void test_killed_recovery_holder_leaves_the_run_interrupted_and_recoverable(void)
{
    char g5[64], id[80], status[32];
    harness_graph_name(g5, sizeof g5, "async_recover_kill");
    const char *extra[] = {"--runners", "1"};
    harness_charterd_opts o = {.graph = g5, .extra_args = extra, .n_extra = 2};
    harness_charterd x, y;
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &x), 0);
    charter_client *cx = NULL, *cy = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(x.ipc_url, HARNESS_OPERATOR_TOKEN, 10000, &cx), 0);
    /* A live run whose model fails at once ends in error: recoverable. */
    harness_model_set_delay(slow, 0);
    Charter__V1__RunView *v = create(cx, "live", false, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL_FATAL(v->run->status, "error");
    snprintf(id, sizeof id, "%s", v->run->id);
    size_t delivered = v->n_deliveries;
    charter__v1__run_view__free_unpacked(v, NULL);
    /* The recovery's model request is held on x's executor until x is killed. */
    harness_model_set_delay(slow, HARNESS_MODEL_HOLD);
    int code = -1;
    Charter__V1__RecoverRunResponse *r = recover(cx, id, true, &code);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_STRING_EQUAL(r->run->status, "recovering");
    CU_ASSERT_PTR_NULL(r->decision);
    charter__v1__recover_run_response__free_unpacked(r, NULL);
    CU_ASSERT_TRUE_FATAL(wait_for_event(cx, id, "recovery_inputs", 10000));
    /* A second charterd starting now leaves the recovery alone: its lease is live. */
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &y), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(y.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &cy), 0);
    Charter__V1__RunView *mid = get_run(cy, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mid);
    CU_ASSERT_STRING_EQUAL(mid->run->status, "recovering");
    charter__v1__run_view__free_unpacked(mid, NULL);
    charter_client_close(cx);
    harness_charterd_kill(&x);
    /* Its lease lapses; y's executor marks the run interrupted, not recovering forever. */
    CU_ASSERT_TRUE(await_status(cy, id, "interrupted", 15000, status));
    CU_ASSERT_TRUE(lease_lapsed(cy, id, "recovering -> interrupted"));
    /* RecoverRun on the other charterd works: its executor runs the recovery step again and
     * the call waits for the decision (the model now fails fast: UNKNOWN, run error). */
    harness_model_set_delay(slow, 0);
    harness_model_release(slow);
    r = recover(cy, id, false, &code);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_STRING_EQUAL(r->run->status, "error");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r->decision);
    CU_ASSERT_EQUAL(r->decision->outcome, CHARTER__V1__OUTCOME__UNKNOWN);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->decision->witness, "live model"));
    CU_ASSERT_EQUAL(r->n_deliveries, delivered);
    charter__v1__recover_run_response__free_unpacked(r, NULL);
    charter_client_close(cy);
    CU_ASSERT_EQUAL(harness_charterd_stop(&y), 0);
    harness_graph_drop(g5);
}

/* A recovery queued behind busy (here: absent) executors is not an unfinished run: a charterd
 * starting meanwhile leaves it recovering, and an executor that comes later runs it. One
 * cancelled while it waits ends cancelled at once, and no executor runs it afterwards. */
static void test_queued_recovery_survives_another_charterd_starting(void)
{
    char g6[64], id[80], id2[80], status[32];
    harness_graph_name(g6, sizeof g6, "async_recover_queued");
    const char *one[] = {"--runners", "1"};
    const char *none[] = {"--runners", "0"};
    harness_charterd_opts o1 = {.graph = g6, .extra_args = one, .n_extra = 2};
    harness_charterd_opts o0 = {.graph = g6, .extra_args = none, .n_extra = 2};
    harness_charterd x, y, z;
    charter_client *cx = NULL, *cy = NULL;
    /* A scripted run of the reference workflow ends blocked at report: recoverable. */
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o1, &x), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(x.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &cx), 0);
    Charter__V1__RunView *v = create(cx, "scripted", false, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL_FATAL(v->run->status, "blocked");
    snprintf(id, sizeof id, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    v = create(cx, "scripted", false, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL_FATAL(v->run->status, "blocked");
    snprintf(id2, sizeof id2, "%s", v->run->id);
    charter__v1__run_view__free_unpacked(v, NULL);
    charter_client_close(cx);
    CU_ASSERT_EQUAL_FATAL(harness_charterd_stop(&x), 0);
    /* No executor serves the graph now: the recovery waits on the queue. */
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o0, &y), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(y.ipc_url, HARNESS_OPERATOR_TOKEN, 30000, &cy), 0);
    int code = -1;
    Charter__V1__RecoverRunResponse *r = recover(cy, id, true, &code);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_STRING_EQUAL(r->run->status, "recovering");
    charter__v1__recover_run_response__free_unpacked(r, NULL);
    /* The second run's recovery is queued too, then cancelled before any executor took it:
     * cancelled at once, with the reason, not left recovering. */
    r = recover(cy, id2, true, &code);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_STRING_EQUAL(r->run->status, "recovering");
    charter__v1__recover_run_response__free_unpacked(r, NULL);
    Charter__V1__Run *cr = cancel(cy, id2, "not wanted now");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cr);
    CU_ASSERT_STRING_EQUAL(cr->status, "cancelled");
    charter__v1__run__free_unpacked(cr, NULL);
    Charter__V1__RunView *c2 = get_run(cy, id2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c2);
    size_t deliveries_before = c2->n_deliveries;
    uint64_t events_before = c2->n_events > 0 ? c2->events[c2->n_events - 1]->seq : 0;
    bool said = false;
    for (size_t i = 0; i < c2->n_events; i++)
        if (strstr(c2->events[i]->detail, "recovering -> cancelled") != NULL &&
            strstr(c2->events[i]->detail, "not wanted now") != NULL)
            said = true;
    CU_ASSERT_TRUE(said);
    charter__v1__run_view__free_unpacked(c2, NULL);
    /* Another charterd starts: the queued recovery is not marked interrupted. */
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o0, &z), 0);
    Charter__V1__RunView *w = get_run(cy, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_STRING_EQUAL(w->run->status, "recovering");
    charter__v1__run_view__free_unpacked(w, NULL);
    CU_ASSERT_EQUAL(harness_charterd_stop(&z), 0);
    /* An executor arrives and runs it to its end. */
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o1, &x), 0);
    CU_ASSERT_TRUE(await_status(cy, id, "completed", 15000, status));
    CU_ASSERT_STRING_EQUAL(status, "completed");
    /* The executor took the first recovery off the queue and ran it; the cancelled one it
     * never ran: still cancelled, no event and no delivery since. */
    c2 = get_run(cy, id2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c2);
    CU_ASSERT_STRING_EQUAL(c2->run->status, "cancelled");
    CU_ASSERT_EQUAL(c2->n_deliveries, deliveries_before);
    CU_ASSERT_EQUAL(c2->n_events > 0 ? c2->events[c2->n_events - 1]->seq : 0, events_before);
    charter__v1__run_view__free_unpacked(c2, NULL);
    charter_client_close(cy);
    CU_ASSERT_EQUAL(harness_charterd_stop(&x), 0);
    CU_ASSERT_EQUAL(harness_charterd_stop(&y), 0);
    harness_graph_drop(g6);
}

/* One WaitRun, in a thread of its own: what it answered. */
typedef struct {
    charter_client *c;
    const char *run_id;
    uint64_t after_seq;
    uint32_t timeout_ms;
    int rc;          /* charter_wait_run's */
    char status[32]; /* the run's status in the answer */
    size_t n_events; /* events after after_seq in the answer */
    atomic_bool done;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    Charter__V1__WaitRunRequest req = CHARTER__V1__WAIT_RUN_REQUEST__INIT;
    req.run_id = (char *)w->run_id;
    req.after_seq = w->after_seq;
    req.timeout_ms = w->timeout_ms;
    Charter__V1__RunView *v = NULL;
    charter_status s;
    w->rc = charter_wait_run(w->c, &req, &v, &s);
    if (v) {
        snprintf(w->status, sizeof w->status, "%s", v->run->status);
        w->n_events = v->n_events;
        charter__v1__run_view__free_unpacked(v, NULL);
    }
    atomic_store(&w->done, true);
    return NULL;
}

/* A charterd on a fresh graph named after name with workers workers and no executor, two
 * operator clients on it (*c1 over IPC, *c2 over TCP, each with room in its deadline for a
 * LONG_WAIT_MS wait), and a scripted run that stays queued (its id into id). Returns the run's
 * seq. */
static uint64_t idle_run(char g[64], const char *name, const char *workers, harness_charterd *d,
                         charter_client **c1, charter_client **c2, char id[80])
{
    harness_graph_name(g, 64, name);
    const char *extra[] = {"--runners", "0", "--workers", workers};
    harness_charterd_opts o = {.graph = g, .extra_args = extra, .n_extra = 4};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, d), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d->ipc_url, HARNESS_OPERATOR_TOKEN, 40000, c1), 0);
    CU_ASSERT_EQUAL_FATAL(harness_client_open(d->tcp_url, HARNESS_OPERATOR_TOKEN, 40000, c2), 0);
    Charter__V1__RunView *v = create(*c1, "scripted", true, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "queued");
    snprintf(id, 80, "%s", v->run->id);
    uint64_t seq = v->run->seq;
    charter__v1__run_view__free_unpacked(v, NULL);
    return seq;
}

/* Two WaitRuns at once on the queued run id (at seq), through c1 and c2, with one long-wait
 * slot: whichever reaches charterd second finds the slot taken and answers the run as it is
 * (queued, no event); the other holds the slot until an event comes. Nothing here depends on
 * which is which or on how long anything takes: the holder cannot answer before the run is
 * cancelled (it has LONG_WAIT_MS), and then it answers with the cancel's events. */
static void one_waits_one_answers(charter_client *c1, charter_client *c2, const char *id,
                                  uint64_t seq)
{
    waiter w[2] = {{.c = c1, .run_id = id, .after_seq = seq, .timeout_ms = LONG_WAIT_MS},
                   {.c = c2, .run_id = id, .after_seq = seq, .timeout_ms = LONG_WAIT_MS}};
    atomic_init(&w[0].done, false);
    atomic_init(&w[1].done, false);
    pthread_t t[2];
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t[0], NULL, waiter_main, &w[0]), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t[1], NULL, waiter_main, &w[1]), 0);
    long long until = now_ms() + AT_ONCE_MS;
    while (!atomic_load(&w[0].done) && !atomic_load(&w[1].done) && now_ms() < until)
        nng_msleep(10);
    bool first0 = atomic_load(&w[0].done);
    waiter *answered = first0 ? &w[0] : &w[1], *holder = first0 ? &w[1] : &w[0];
    /* One answered at once: the slot was taken. */
    bool at_once = atomic_load(&answered->done);
    CU_ASSERT_TRUE(at_once);
    if (at_once) {
        CU_ASSERT_EQUAL(answered->rc, 0);
        CU_ASSERT_STRING_EQUAL(answered->status, "queued");
        CU_ASSERT_EQUAL(answered->n_events, 0);
    }
    /* Meanwhile the other worker still answers everything else. */
    Charter__V1__HealthRequest hreq = CHARTER__V1__HEALTH_REQUEST__INIT;
    Charter__V1__HealthResponse *h = NULL;
    charter_status s;
    CU_ASSERT_EQUAL(charter_health(c2, &hreq, &h, &s), 0);
    if (h)
        charter__v1__health_response__free_unpacked(h, NULL);
    CU_ASSERT_FALSE(atomic_load(&holder->done)); /* it waits for an event */
    Charter__V1__Run *r = cancel(c1, id, "waited long enough");
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r)
        charter__v1__run__free_unpacked(r, NULL);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    /* The holder was still waiting when the cancel came, and answered with its events. */
    CU_ASSERT_EQUAL(holder->rc, 0);
    CU_ASSERT_STRING_EQUAL(holder->status, "cancelled");
    CU_ASSERT_TRUE(holder->n_events > 0);
}

static void test_long_waits_hold_at_most_half_the_workers(void)
{
    /* Two workers: one long-wait slot. Runs stay queued (no executor), so waits wait. */
    char g4[64], id[80], id2[80];
    harness_charterd d;
    charter_client *c1 = NULL, *c2 = NULL;
    uint64_t seq = idle_run(g4, "async_waits", "2", &d, &c1, &c2, id);
    one_waits_one_answers(c1, c2, id, seq);
    /* The slot is free again: of the next two waits, one waits. */
    Charter__V1__RunView *v = create(c1, "scripted", true, NULL, NULL, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v->run->status, "queued");
    snprintf(id2, sizeof id2, "%s", v->run->id);
    uint64_t seq2 = v->run->seq;
    charter__v1__run_view__free_unpacked(v, NULL);
    one_waits_one_answers(c1, c2, id2, seq2);
    charter_client_close(c1);
    charter_client_close(c2);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(g4);
}

static void test_with_one_worker_a_long_wait_never_holds_it(void)
{
    /* One worker has no half to spare: a WaitRun (any caller may send one) must not keep the
     * operator's CancelRun waiting for its timeout. The run stays queued (no executor). The
     * wait asks for LONG_WAIT_MS, and its deadline leaves room for it, but the caller gives up
     * after AT_ONCE_MS: only a wait that holds no worker answers in time. */
    char g5[64], id[80];
    harness_charterd d;
    charter_client *c1 = NULL, *c2 = NULL;
    uint64_t seq = idle_run(g5, "async_one_worker", "1", &d, &c1, &c2, id);
    Charter__V1__WaitRunRequest wreq = CHARTER__V1__WAIT_RUN_REQUEST__INIT;
    wreq.run_id = id;
    wreq.after_seq = seq;
    wreq.timeout_ms = LONG_WAIT_MS;
    harness_response hr;
    int rv = harness_rpc_deadline(d.ipc_url, "/charter.v1.Runs/WaitRun", HARNESS_OPERATOR_TOKEN,
                                  &wreq.base, LONG_WAIT_MS + 10000, AT_ONCE_MS, &hr);
    CU_ASSERT_EQUAL(rv, 0); /* not NNG_ETIMEDOUT: the wait held no worker */
    CU_ASSERT_EQUAL(hr.code, 0);
    Charter__V1__RunView *w = rv == 0 && hr.code == 0
                                  ? charter__v1__run_view__unpack(NULL, hr.payload_len, hr.payload)
                                  : NULL;
    CU_ASSERT_TRUE(w != NULL && w->run != NULL);
    if (w && w->run) {
        CU_ASSERT_STRING_EQUAL(w->run->status, "queued"); /* answered as it is */
        CU_ASSERT_EQUAL(w->n_events, 0);
    }
    if (w)
        charter__v1__run_view__free_unpacked(w, NULL);
    harness_response_free(&hr);
    Charter__V1__Run *r = cancel(c2, id, "operator stops it");
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r) {
        CU_ASSERT_STRING_EQUAL(r->status, "cancelled");
        charter__v1__run__free_unpacked(r, NULL);
    }
    charter_client_close(c1);
    charter_client_close(c2);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(g5);
}

/* --- registration ---------------------------------------------------------------------------- */

static void teardown(void)
{
    harness_model_stop(slow);
}

static const harness_test tests[] = {
    {"async CreateRun returns at once, WaitRun follows to the end",
     test_async_create_returns_at_once_and_wait_run_follows_to_the_end},
    {"CreateRun without async still returns the ended run",
     test_create_without_async_still_returns_the_ended_run},
    {"WaitRun answers the deliveries of its page",
     test_wait_run_answers_the_deliveries_of_its_page},
    {"unknown or non-positive budgets are INVALID_ARGUMENT",
     test_unknown_or_non_positive_budgets_are_invalid_argument},
    {"max_steps fires", test_max_steps_fires_before_the_second_step},
    {"max_model_calls fires", test_max_model_calls_fires_before_the_second_model_request},
    {"max_deliveries fires in the commit", test_max_deliveries_fires_in_the_commit},
    {"max_wall_clock_ms aborts the model request", test_max_wall_clock_ms_aborts_the_model_request},
    {"cancel during the model request",
     test_cancel_during_the_model_request_aborts_it_and_names_the_step},
    {"a queued run is cancelled at once", test_a_queued_run_is_cancelled_at_once},
    {"kill -9 of the executor: lease lapses, run interrupted, RecoverRun works",
     test_killed_executor_loses_its_lease_and_another_charterd_interrupts_the_run},
    {"cancelling a blocked run ends it; no recovery delivers",
     test_cancelling_a_blocked_run_ends_it_and_no_recovery_delivers},
    {"GetRun without content, or for one artifact",
     test_get_run_without_content_or_for_one_artifact},
    {"max_deliveries ends a recovery budget_exhausted, delivering nothing more",
     test_max_deliveries_ends_a_recovery_budget_exhausted_delivering_nothing_more},
    {"max_deliveries ends an async recovery budget_exhausted",
     test_max_deliveries_ends_an_async_recovery_budget_exhausted},
    {"RecoverRun queues the recovery on an executor and returns at once",
     test_recover_run_queues_the_recovery_on_an_executor_and_returns_at_once},
    {"kill -9 of a recovery's holder: run interrupted, recoverable on another",
     test_killed_recovery_holder_leaves_the_run_interrupted_and_recoverable},
    {"a queued recovery survives another charterd starting; cancelled, it ends",
     test_queued_recovery_survives_another_charterd_starting},
    {"long waits hold at most half the workers", test_long_waits_hold_at_most_half_the_workers},
    {"with one worker, a long wait never holds it",
     test_with_one_worker_a_long_wait_never_holds_it},
};
static const harness_suite suites[] = {
    {"runs that never hold a worker", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .teardown = teardown};
