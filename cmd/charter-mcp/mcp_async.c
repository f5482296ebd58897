/*
 * mcp_async.c - the tools that start and follow runs charterd executes on its own executor
 * threads (scripted, or live with the configured model provider): start_async_run, wait_run,
 * cancel_run, run_events, run_receipt.
 *
 * They are offered to the workflow's first step only (the role that may start runs). A
 * session may follow only the runs it started itself: a run id the model makes up or copies
 * from elsewhere is refused before charterd is asked, so one role's MCP process cannot watch or
 * cancel another's work. Budgets narrow what charterd allows (their ceilings are charterd's);
 * what the model sees of a run is metadata (events with codes and witnesses, statuses,
 * counters, the receipt's hashes), never content.
 *
 * When the request declared the tasks extension, start_async_run answers a task that follows
 * the run instead (SEP-2663, mcp_tasks.c): tasks/get reads the run from charterd and maps its
 * status, tasks/cancel is CancelRun. A run waiting for a human approval is input_required, and
 * no answer the client gives approves anything: the approval is the named human's, decided out
 * of band through charterd's Approvals service, which charter-mcp never calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp.h"

/* The longest wait_run may wait: below libcharter's default call deadline (10 s), so the call
 * itself is never what times out. */
#define WAIT_MAX_MS 8000
#define REASON_MAX 256

static const char *const budget_names[] = {"max_wall_clock_ms", "max_model_calls", "max_steps",
                                           "max_deliveries"};
#define N_BUDGETS (sizeof budget_names / sizeof *budget_names)

/* ---- schemas ----------------------------------------------------------------------------- */

static json_t *run_id_schema(void)
{
    return mcp_id_schema("A run this session started with start_async_run.");
}

static json_t *seq_schema(void)
{
    return json_pack("{s:s, s:i, s:s}", "type", "integer", "minimum", 0, "description",
                     "Only events after this seq (0: from the first).");
}

json_t *mcp_async_start_schema(const mcp_server *srv)
{
    (void)srv;
    json_t *budget = json_object();
    for (size_t i = 0; budget && i < N_BUDGETS; i++)
        json_object_set_new(budget, budget_names[i],
                            json_pack("{s:s, s:i, s:I}", "type", "integer", "minimum", 1, "maximum",
                                      (json_int_t)1000000000));
    static const char *const none[] = {NULL};
    json_t *budget_schema = mcp_object_schema(budget, none);
    if (budget_schema)
        json_object_set_new(budget_schema, "description",
                            json_string("Optional budgets; the first exhausted ends the run "
                                        "budget_exhausted and nothing is delivered past it."));
    json_t *props =
        json_pack("{s:{s:s, s:[s,s], s:s}, s:o*}", "mode", "type", "string", "enum", "scripted",
                  "live", "description",
                  "scripted: the built-in scripted agents; live: the configured model provider.",
                  "budget", budget_schema);
    static const char *const req[] = {"mode", NULL};
    return mcp_object_schema(props, req);
}

json_t *mcp_async_run_schema(const mcp_server *srv)
{
    (void)srv;
    static const char *const req[] = {"run_id", NULL};
    return mcp_object_schema(json_pack("{s:o}", "run_id", run_id_schema()), req);
}

json_t *mcp_async_wait_schema(const mcp_server *srv)
{
    (void)srv;
    static const char *const req[] = {"run_id", NULL};
    return mcp_object_schema(json_pack("{s:o, s:o, s:{s:s, s:i, s:i, s:s}}", "run_id",
                                       run_id_schema(), "after_seq", seq_schema(), "timeout_ms",
                                       "type", "integer", "minimum", 1, "maximum", WAIT_MAX_MS,
                                       "description",
                                       "How long to wait for news (default and most: 8000)."),
                             req);
}

json_t *mcp_async_cancel_schema(const mcp_server *srv)
{
    (void)srv;
    static const char *const req[] = {"run_id", "reason", NULL};
    return mcp_object_schema(json_pack("{s:o, s:{s:s, s:i, s:i}}", "run_id", run_id_schema(),
                                       "reason", "type", "string", "minLength", 1, "maxLength",
                                       REASON_MAX),
                             req);
}

json_t *mcp_async_events_schema(const mcp_server *srv)
{
    (void)srv;
    static const char *const req[] = {"run_id", NULL};
    return mcp_object_schema(
        json_pack("{s:o, s:o}", "run_id", run_id_schema(), "after_seq", seq_schema()), req);
}

/* ---- the session's runs ------------------------------------------------------------------ */

/* The run_id argument when it names a run this session started; NULL (and *fail set to the
 * refusal) otherwise. */
static const char *own_run(const mcp_session *s, const json_t *args, json_t **fail)
{
    const char *id = json_string_value(json_object_get(args, "run_id"));
    for (size_t i = 0; id && i < s->n_async_runs; i++)
        if (strcmp(s->async_runs[i], id) == 0)
            return s->async_runs[i];
    *fail = mcp_refusal("deny", "RUN_NOT_STARTED_HERE",
                        "run_id names no run this session started with start_async_run");
    return NULL;
}

/* {id, status, mode, workflow, seq, budgets and counters} of a run (new reference). */
static json_t *run_json(const Charter__V1__Run *r)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I}", "id", r->id, "status", r->status, "mode",
                          r->mode, "workflow", r->workflow, "seq", (json_int_t)r->seq);
    json_t *budget = json_object(), *used = json_object();
    if (!o || !budget || !used) {
        json_decref(o);
        json_decref(budget);
        json_decref(used);
        return NULL;
    }
    const int64_t limits[N_BUDGETS] = {r->max_wall_clock_ms, r->max_model_calls, r->max_steps,
                                       r->max_deliveries};
    for (size_t i = 0; i < N_BUDGETS; i++)
        if (limits[i] > 0)
            json_object_set_new(budget, budget_names[i], json_integer((json_int_t)limits[i]));
    json_object_set_new(used, "wall_clock_ms", json_integer((json_int_t)r->wall_clock_ms));
    json_object_set_new(used, "model_calls", json_integer((json_int_t)r->model_calls));
    json_object_set_new(used, "steps", json_integer((json_int_t)r->steps));
    json_object_set_new(used, "deliveries", json_integer((json_int_t)r->deliveries));
    if (r->cancel_reason && r->cancel_reason[0])
        json_object_set_new(o, "cancel_reason", json_string(r->cancel_reason));
    json_object_set_new(o, "budget", budget);
    json_object_set_new(o, "used", used);
    return o;
}

static bool run_ended(const char *status)
{
    static const char *const ended[] = {"completed", "blocked",          "error",
                                        "cancelled", "budget_exhausted", "interrupted"};
    for (size_t i = 0; i < sizeof ended / sizeof *ended; i++)
        if (status && strcmp(status, ended[i]) == 0)
            return true;
    return false;
}

/* {decision: allow, run, ended, events after after_seq} of a run view (consumed). */
static json_t *view_result(Charter__V1__RunView *v, uint64_t after_seq)
{
    json_t *events = json_array();
    for (size_t i = 0; events && i < v->n_events; i++)
        if (v->events[i]->seq > after_seq)
            json_array_append_new(events, mcp_event_json(v->events[i]));
    json_t *body = json_pack("{s:s, s:o*, s:b, s:o*}", "decision", "allow", "run", run_json(v->run),
                             "ended", run_ended(v->run->status), "events", events);
    charter__v1__run_view__free_unpacked(v, NULL);
    return mcp_result(body, false);
}

/* ---- a run as a task (the tasks extension) ----------------------------------------------- */

/* A task is kept an hour from its creation and suggests polling every second. */
#define RUN_TASK_TTL_MS 3600000
#define RUN_TASK_POLL_MS 1000

typedef struct {
    mcp_server *srv;
    char run_id[130];
} run_work;

/* ISO 8601 (UTC, seconds) of a database time in seconds since the epoch. */
static void iso_seconds(double t, char out[32])
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The run waits for approval a (pending): the task asks the client to take note, once per
 * approval; once that is answered (or when a is not pending), it is working and says who
 * decides. The question and the status say that no answer here approves anything. */
static void run_held(mcp_task *t, const char *run_id, const Charter__V1__Approval *a)
{
    char msg[1024], key[160], deadline[32];
    iso_seconds(a->deadline, deadline);
    snprintf(msg, sizeof msg,
             "Run %s holds a send of %s to %s for the approval %s of %s, who decides it before "
             "%s, out of band (charter approve or deny %s --as %s, or charterd's console). No "
             "answer given here approves or denies it: a reply is taken as a note that you saw "
             "this, nothing more.",
             run_id, a->tool, a->recipient, a->id, a->approver, deadline, a->id, a->approver);
    snprintf(key, sizeof key, "approval-%s", a->id);
    json_t *params = json_pack("{s:s, s:{s:s, s:{}}}", "message", msg, "requestedSchema", "type",
                               "object", "properties");
    if (mcp_task_ask(t, key, "elicitation/create", params, msg))
        return;
    snprintf(msg, sizeof msg,
             "Run %s waits for %s's decision on the approval %s (before %s), taken out of band "
             "by %s alone; no answer given here approves it.",
             run_id, a->approver, a->id, deadline, a->approver);
    mcp_task_working(t, msg);
}

/* The approval a run view lists as pending, or NULL. */
static const Charter__V1__Approval *pending_approval(const Charter__V1__RunView *v)
{
    for (size_t i = 0; i < v->n_approvals; i++)
        if (strcmp(v->approvals[i]->state, "pending") == 0)
            return v->approvals[i];
    return NULL;
}

/* Moves the task to what the run view (consumed) says: working while the run is queued,
 * running or recovering; held for a human approval (run_held); completed with the run's view
 * once it rests (isError unless it rests completed); cancelled when it was cancelled. */
static void run_follow(mcp_task *t, const char *run_id, Charter__V1__RunView *v)
{
    const char *st = v->run->status;
    const Charter__V1__Approval *pending = pending_approval(v);
    char msg[512];
    snprintf(msg, sizeof msg, "run %s: %s", run_id, st);
    if (strcmp(st, "pending_approval") == 0 && pending) {
        run_held(t, run_id, pending);
    } else if (!run_ended(st)) {
        mcp_task_working(t, msg);
    } else if (strcmp(st, "cancelled") == 0) {
        if (v->run->cancel_reason && v->run->cancel_reason[0])
            snprintf(msg, sizeof msg, "run %s: cancelled (%.300s)", run_id, v->run->cancel_reason);
        mcp_task_cancelled(t, msg);
    } else {
        bool completed = strcmp(st, "completed") == 0;
        json_t *result = view_result(v, 0); /* consumes v */
        if (result)
            json_object_set_new(result, "isError", json_boolean(!completed));
        mcp_task_complete(t, result, msg);
        return;
    }
    charter__v1__run_view__free_unpacked(v, NULL);
}

static json_t *charterd_error(int rc, const charter_status *st)
{
    char msg[320];
    snprintf(msg, sizeof msg, "charterd: %s: %s", charter_status_name(rc),
             st->message[0] ? st->message : "no answer");
    return json_pack("{s:i, s:s}", "code", MCP_INTERNAL_ERROR, "message", msg);
}

static int run_refresh(mcp_task *t, void *work, json_t **error)
{
    run_work *w = work;
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = w->run_id;
    req.limit = 500;
    req.without_content = true;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    int rc = charter_get_run(w->srv->client, &req, &v, &st);
    if (rc != 0) {
        *error = charterd_error(rc, &st);
        return -1;
    }
    run_follow(t, w->run_id, v);
    return 0;
}

static int run_cancel(mcp_task *t, void *work, json_t **error)
{
    run_work *w = work;
    (void)t;
    Charter__V1__CancelRunRequest req = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
    req.run_id = w->run_id;
    req.reason = "tasks/cancel";
    Charter__V1__Run *r = NULL;
    charter_status st;
    int rc = charter_cancel_run(w->srv->client, &req, &r, &st);
    if (rc != 0) {
        *error = charterd_error(rc, &st);
        return -1;
    }
    charter__v1__run__free_unpacked(r, NULL);
    return 0;
}

static const mcp_task_ops run_ops = {run_refresh, run_cancel, NULL, free};

/* The task of run_id, this session's (its CreateTaskResult), or NULL when none could be made:
 * the caller answers the tool's result instead. */
static json_t *run_task(mcp_server *srv, mcp_session *s, const char *run_id, const char *status)
{
    run_work *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->srv = srv;
    snprintf(w->run_id, sizeof w->run_id, "%s", run_id);
    mcp_task *t = mcp_task_new(s->task_owner, RUN_TASK_TTL_MS, RUN_TASK_POLL_MS, &run_ops, w);
    if (!t) {
        free(w);
        return NULL;
    }
    char msg[200];
    snprintf(msg, sizeof msg, "run %s: %s", run_id, status);
    mcp_task_working(t, msg);
    json_t *created = mcp_task_created(t);
    mcp_task_unref(t);
    return created;
}

/* ---- the tools --------------------------------------------------------------------------- */

json_t *mcp_async_start(mcp_server *srv, mcp_session *s, const json_t *args)
{
    if (s->n_async_runs == MCP_MAX_ASYNC_RUNS)
        return mcp_refusal("deny", "TOO_MANY_RUNS",
                           "this session already started the most runs it may follow (16)");
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = (char *)json_string_value(json_object_get(args, "mode"));
    req.workflow = srv->version;
    req.async = true;
    Charter__V1__CreateRunRequest__BudgetEntry entries[N_BUDGETS];
    Charter__V1__CreateRunRequest__BudgetEntry *ptrs[N_BUDGETS];
    const json_t *budget = json_object_get(args, "budget");
    for (size_t i = 0; i < N_BUDGETS; i++) {
        const json_t *v = json_object_get(budget, budget_names[i]);
        if (!v)
            continue;
        size_t k = req.n_budget++;
        charter__v1__create_run_request__budget_entry__init(&entries[k]);
        entries[k].key = (char *)budget_names[i];
        entries[k].value = (int64_t)json_integer_value(v);
        ptrs[k] = &entries[k];
    }
    req.budget = req.n_budget ? ptrs : NULL;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    int rc = charter_create_run(srv->client, &req, &v, &st);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    snprintf(s->async_runs[s->n_async_runs], sizeof s->async_runs[0], "%s", v->run->id);
    s->n_async_runs++;
    json_t *task = s->tasks_now ? run_task(srv, s, v->run->id, v->run->status) : NULL;
    if (task) {
        charter__v1__run_view__free_unpacked(v, NULL);
        return task;
    }
    json_t *body = json_pack("{s:s, s:s, s:o*}", "decision", "allow", "run_id", v->run->id, "run",
                             run_json(v->run));
    charter__v1__run_view__free_unpacked(v, NULL);
    return mcp_result(body, false);
}

json_t *mcp_async_wait(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *fail = NULL;
    const char *run_id = own_run(s, args, &fail);
    if (!run_id)
        return fail;
    const json_t *t = json_object_get(args, "timeout_ms");
    Charter__V1__WaitRunRequest req = CHARTER__V1__WAIT_RUN_REQUEST__INIT;
    req.run_id = (char *)run_id;
    req.after_seq = (uint64_t)json_integer_value(json_object_get(args, "after_seq"));
    req.timeout_ms = t ? (uint32_t)json_integer_value(t) : WAIT_MAX_MS;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    int rc = charter_wait_run(srv->client, &req, &v, &st);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    return view_result(v, req.after_seq);
}

json_t *mcp_async_events(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *fail = NULL;
    const char *run_id = own_run(s, args, &fail);
    if (!run_id)
        return fail;
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)run_id;
    req.limit = 500;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    int rc = charter_get_run(srv->client, &req, &v, &st);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    return view_result(v, (uint64_t)json_integer_value(json_object_get(args, "after_seq")));
}

json_t *mcp_async_cancel(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *fail = NULL;
    const char *run_id = own_run(s, args, &fail);
    if (!run_id)
        return fail;
    Charter__V1__CancelRunRequest req = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
    req.run_id = (char *)run_id;
    req.reason = (char *)json_string_value(json_object_get(args, "reason"));
    Charter__V1__Run *r = NULL;
    charter_status st;
    int rc = charter_cancel_run(srv->client, &req, &r, &st);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    json_t *body = json_pack("{s:s, s:o*, s:b}", "decision", "allow", "run", run_json(r), "ended",
                             run_ended(r->status));
    charter__v1__run__free_unpacked(r, NULL);
    return mcp_result(body, false);
}

json_t *mcp_async_receipt(mcp_server *srv, mcp_session *s, const json_t *args)
{
    json_t *fail = NULL;
    const char *run_id = own_run(s, args, &fail);
    if (!run_id)
        return fail;
    Charter__V1__GetReceiptRequest req = CHARTER__V1__GET_RECEIPT_REQUEST__INIT;
    req.run_id = (char *)run_id;
    Charter__V1__Receipt *r = NULL;
    charter_status st;
    int rc = charter_get_receipt(srv->client, &req, &r, &st);
    if (rc != 0)
        return mcp_rpc_refusal(rc, &st);
    json_t *deliveries = json_array();
    for (size_t i = 0; deliveries && i < r->n_deliveries; i++)
        json_array_append_new(deliveries, json_string(r->deliveries[i]));
    json_t *body = json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:I, s:s, s:o*, s:s, s:s}}", "decision",
                             "allow", "receipt", "kind", r->kind, "run_id", r->run_id, "status",
                             r->status, "time", r->time, "last_seq", (json_int_t)r->last_seq,
                             "last_event_hash", r->last_event_hash, "deliveries", deliveries,
                             "evaluator", r->evaluator, "mac", r->mac);
    charter__v1__receipt__free_unpacked(r, NULL);
    return mcp_result(body, false);
}
