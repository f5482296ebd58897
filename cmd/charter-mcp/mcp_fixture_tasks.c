/*
 * mcp_fixture_tasks.c - the conformance fixture's tools of the tasks extension (SEP-2663), in
 * 2026-07-28 requests: the tools the suite's tasks-* scenarios name, each with the behaviour
 * they expect. A test mode like the rest of the fixture: nothing here reaches charterd.
 *
 * A tool that supports tasks answers a CreateTaskResult when the request's client declared the
 * extension; its work is then a timer on NNG's threads (nng_sleep_aio: slow_compute's seconds,
 * failing_job's second) whose callback settles the task, or input the task asks for
 * (confirm_delete, multi_input) whose answers settle it. Without the extension an optional one
 * runs at once in the request, and a required one is -32021. The tasks are the process's
 * (mcp_tasks.c) and belong to no session: a stateless request has none, so the 128-bit id is
 * what finds a task.
 */
#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

#define TASK_TTL_MS 300000
#define TASK_POLL_MS 500
#define SLOW_MAX_S 120

typedef enum { SUPPORT_NONE, SUPPORT_OPTIONAL, SUPPORT_REQUIRED } task_support;

#define NO_ARGS "{\"type\":\"object\",\"properties\":{}}"

static const struct {
    const char *name, *description, *schema;
    task_support support;
} task_tools[] = {
    {"greet", "Says hello to name, at once (never a task)",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}},\"required\":[\"name\"]"
     "}",
     SUPPORT_NONE},
    {"slow_compute",
     "Waits seconds, then answers; a task when the client declared io.modelcontextprotocol/tasks",
     "{\"type\":\"object\",\"properties\":{\"seconds\":{\"type\":\"number\",\"minimum\":0,"
     "\"maximum\":120},\"label\":{\"type\":\"string\"}},\"required\":[\"seconds\"]}",
     SUPPORT_OPTIONAL},
    {"failing_job", "Only as a task: a tool error (isError) after about a second", NO_ARGS,
     SUPPORT_REQUIRED},
    {"protocol_error_job", "Fails with a protocol error (-32603); as a task, the task fails",
     NO_ARGS, SUPPORT_OPTIONAL},
    {"confirm_delete", "Only as a task: asks the client to confirm, then answers",
     "{\"type\":\"object\",\"properties\":{\"filename\":{\"type\":\"string\"}},"
     "\"required\":[\"filename\"]}",
     SUPPORT_REQUIRED},
    {"multi_input", "Only as a task: asks the client two things at once", NO_ARGS,
     SUPPORT_REQUIRED},
    {"test_tool_with_task",
     "Only as a task: asks the client for a name (input_required), then greets it in a task",
     NO_ARGS, SUPPORT_REQUIRED},
};

void mcp_fixture_task_tools(json_t *list)
{
    for (size_t i = 0; i < sizeof task_tools / sizeof *task_tools; i++)
        json_array_append_new(list,
                              json_pack("{s:s, s:s, s:o}", "name", task_tools[i].name,
                                        "description", task_tools[i].description, "inputSchema",
                                        json_loads(task_tools[i].schema, 0, NULL)));
}

static json_t *text_result(const char *text, bool is_error)
{
    return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text, "isError",
                     is_error);
}

static json_t *elicitation(const char *message, const char *field, const char *type)
{
    return json_pack("{s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}", "message", message, "requestedSchema",
                     "type", "object", "properties", field, "type", type, "required", field);
}

/* --- the work of a task --------------------------------------------------------------------- */

typedef enum {
    WORK_TEXT,
    WORK_TOOL_ERROR,
    WORK_PROTOCOL_ERROR,
    WORK_CONFIRM,
    WORK_MULTI
} work_kind;

typedef struct {
    mcp_task *task; /* the task that owns this work */
    nng_aio *aio;   /* the timer; NULL for work that waits for input */
    work_kind kind;
    char text[600]; /* what it answers (the file's name for WORK_CONFIRM) */
} fixture_work;

/* The timer's callback, on an NNG thread: settles the task (a cancelled task stays so). */
static void on_timer(void *arg)
{
    fixture_work *w = arg;
    if (nng_aio_result(w->aio) != 0)
        return; /* cancelled, or the task is being freed */
    if (w->kind == WORK_PROTOCOL_ERROR)
        mcp_task_fail(w->task,
                      json_pack("{s:i, s:s}", "code", MCP_INTERNAL_ERROR, "message",
                                "protocol_error_job: the job broke down before it had a result"),
                      "the job failed with a protocol error");
    else
        mcp_task_complete(w->task, text_result(w->text, w->kind == WORK_TOOL_ERROR), NULL);
}

static int work_cancel(mcp_task *t, void *work, json_t **error)
{
    fixture_work *w = work;
    (void)error;
    mcp_task_cancelled(t, "cancelled by tasks/cancel");
    if (w->aio)
        nng_aio_cancel(w->aio);
    return 0;
}

/* content.field of an answer that accepts (an elicitation's result), else NULL. */
static const json_t *accepted(const json_t *answer, const char *field)
{
    const char *action = json_string_value(json_object_get(answer, "action"));
    if (!action || strcmp(action, "accept") != 0)
        return NULL;
    return json_object_get(json_object_get(answer, "content"), field);
}

static void work_answered(mcp_task *t, void *work, const json_t *answers)
{
    fixture_work *w = work;
    char text[700];
    if (w->kind == WORK_CONFIRM) {
        bool yes = json_is_true(accepted(json_object_get(answers, "confirm_delete"), "confirm"));
        snprintf(text, sizeof text, "%s %s", yes ? "Deleted" : "Kept", w->text);
    } else {
        const char *a = json_string_value(accepted(json_object_get(answers, "first"), "name"));
        const char *b = json_string_value(accepted(json_object_get(answers, "second"), "name"));
        snprintf(text, sizeof text, "Received %.300s and %.300s", a ? a : "nothing",
                 b ? b : "nothing");
    }
    mcp_task_complete(t, text_result(text, false), NULL);
}

static void work_release(void *work)
{
    fixture_work *w = work;
    if (w->aio)
        nng_aio_free(w->aio); /* waits for a callback still running */
    free(w);
}

static const mcp_task_ops fixture_ops = {NULL, work_cancel, work_answered, work_release};

/* Makes the task of w (owned from here on) and starts its timer of delay_ms, or asks its input
 * when it has no timer. *result is the CreateTaskResult, *error a -32603 when no task could be
 * made. Returns 0, or -1 when out of memory. */
static int start(fixture_work *w, bool timed, unsigned delay_ms, json_t **result, json_t **error)
{
    mcp_task *t = NULL;
    if (!timed || nng_aio_alloc(&w->aio, on_timer, w) == 0)
        t = mcp_task_new("", TASK_TTL_MS, TASK_POLL_MS, &fixture_ops, w);
    if (!t) {
        if (w->aio)
            nng_aio_free(w->aio);
        free(w);
        *error = json_pack("{s:i, s:s}", "code", MCP_INTERNAL_ERROR, "message",
                           "no room for another task");
        return *error ? 0 : -1;
    }
    w->task = t;
    if (timed)
        nng_sleep_aio((nng_duration)delay_ms, w->aio);
    else if (w->kind == WORK_CONFIRM) {
        char msg[700];
        snprintf(msg, sizeof msg, "Delete %s?", w->text);
        mcp_task_ask(t, "confirm_delete", "elicitation/create",
                     elicitation(msg, "confirm", "boolean"), "waiting for the confirmation");
    } else {
        mcp_task_ask(t, "first", "elicitation/create",
                     elicitation("First input: a name", "name", "string"), NULL);
        mcp_task_ask(t, "second", "elicitation/create",
                     elicitation("Second input: a name", "name", "string"),
                     "waiting for two inputs");
    }
    *result = mcp_task_created(t);
    mcp_task_unref(t);
    return *result ? 0 : -1;
}

static int start_kind(work_kind kind, const char *text, bool timed, unsigned delay_ms,
                      json_t **result, json_t **error)
{
    fixture_work *w = calloc(1, sizeof *w);
    if (!w)
        return -1;
    w->kind = kind;
    snprintf(w->text, sizeof w->text, "%s", text);
    return start(w, timed, delay_ms, result, error);
}

/* --- the calls -------------------------------------------------------------------------------- */

/* slow_compute without a task: the wait happens in the request, a second at a time so that a
 * stopping server is noticed. */
static json_t *slow_now(unsigned seconds, const char *text)
{
    for (unsigned i = 0; i < seconds && !mcp_tasks_stopping(); i++)
        nng_msleep(1000);
    return text_result(text, false);
}

/* test_tool_with_task: the name first (input_required, SEP-2322), then the task that greets
 * it (the client's answer comes back in inputResponses). */
static int tool_with_task(const json_t *params, json_t **result, json_t **error)
{
    const json_t *responses = json_object_get(params, "inputResponses");
    if (responses && !json_is_object(responses)) {
        *error = json_pack("{s:i, s:s}", "code", MCP_INVALID_PARAMS, "message",
                           "inputResponses must be an object");
        return *error ? 0 : -1;
    }
    const char *name = json_string_value(accepted(json_object_get(responses, "user_name"), "name"));
    if (!name) {
        *result = json_pack("{s:s, s:{s:{s:s, s:o}}}", "resultType", "input_required",
                            "inputRequests", "user_name", "method", "elicitation/create", "params",
                            elicitation("What is your name?", "name", "string"));
        return *result ? 0 : -1;
    }
    char text[600];
    snprintf(text, sizeof text, "Hello, %.400s!", name);
    return start_kind(WORK_TEXT, text, true, 200, result, error);
}

/* A call of a task tool when the request declared the extension (or of greet). */
static int call(const char *name, const json_t *params, bool declared, json_t **result,
                json_t **error)
{
    const json_t *args = json_object_get(params, "arguments");
    char text[600];
    if (strcmp(name, "greet") == 0) {
        const char *who = json_string_value(json_object_get(args, "name"));
        snprintf(text, sizeof text, "Hello, %.400s!", who ? who : "");
        *result = text_result(text, false);
        return *result ? 0 : -1;
    }
    if (strcmp(name, "slow_compute") == 0) {
        double s = json_number_value(json_object_get(args, "seconds"));
        unsigned seconds = s > 0 ? (unsigned)(s < SLOW_MAX_S ? s : SLOW_MAX_S) : 0;
        const char *label = json_string_value(json_object_get(args, "label"));
        snprintf(text, sizeof text, "slow_compute %.400s: done after %u s", label ? label : "",
                 seconds);
        if (!declared)
            return (*result = slow_now(seconds, text)) ? 0 : -1;
        return start_kind(WORK_TEXT, text, true, seconds * 1000, result, error);
    }
    if (strcmp(name, "protocol_error_job") == 0 && !declared) {
        *error = json_pack("{s:i, s:s}", "code", MCP_INTERNAL_ERROR, "message",
                           "protocol_error_job: the job broke down before it had a result");
        return *error ? 0 : -1;
    }
    if (strcmp(name, "protocol_error_job") == 0)
        return start_kind(WORK_PROTOCOL_ERROR, "", true, 500, result, error);
    if (strcmp(name, "failing_job") == 0)
        return start_kind(WORK_TOOL_ERROR, "failing_job: the job failed", true, 1000, result,
                          error);
    if (strcmp(name, "confirm_delete") == 0) {
        const char *file = json_string_value(json_object_get(args, "filename"));
        return start_kind(WORK_CONFIRM, file ? file : "", false, 0, result, error);
    }
    if (strcmp(name, "multi_input") == 0)
        return start_kind(WORK_MULTI, "", false, 0, result, error);
    return tool_with_task(params, result, error);
}

int mcp_fixture_task_call(const json_t *params, bool declared, json_t **result, json_t **error)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    *result = *error = NULL;
    for (size_t i = 0; name && i < sizeof task_tools / sizeof *task_tools; i++) {
        if (strcmp(name, task_tools[i].name) != 0)
            continue;
        if (task_tools[i].support == SUPPORT_REQUIRED && !declared) {
            char what[120];
            snprintf(what, sizeof what, "tool %s", name);
            *error = mcp_tasks_missing(what);
            return *error ? 1 : -1;
        }
        return call(name, params, declared, result, error) == 0 ? 1 : -1;
    }
    return 0;
}
