/*
 * test_mcp_tasks.c - charter-mcp's tasks (the io.modelcontextprotocol/tasks extension,
 * cmd/charter-mcp/mcp_tasks.c) with no transport and no charterd: tasks made with work whose
 * hooks count their calls, then driven through mcp_tasks_request as tasks/get, tasks/update and
 * tasks/cancel arrive. Each case states the answer by hand: the wire shape of a new task, the
 * owner that alone finds it, expiry at its time to live, final statuses that stay final,
 * partial answers, keys never asked twice, cancel and refresh delegated to the work, and the
 * methods the extension does not have.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>
#include <jansson.h>

#include "mcp.h"
#include "suite.h"

/* Work whose hooks count their calls and keep what they got. */
typedef struct {
    int refreshed, cancelled, answered, released;
    json_t *answers; /* the last answers the task handed over */
    bool refresh_fails;
} counting_work;

static int w_refresh(mcp_task *t, void *work, json_t **error)
{
    counting_work *w = work;
    (void)t;
    w->refreshed++;
    if (!w->refresh_fails)
        return 0;
    *error = json_pack("{s:i, s:s}", "code", MCP_INTERNAL_ERROR, "message", "source unreachable");
    return -1;
}

static int w_cancel(mcp_task *t, void *work, json_t **error)
{
    counting_work *w = work;
    (void)t;
    (void)error;
    w->cancelled++;
    return 0;
}

static void w_answered(mcp_task *t, void *work, const json_t *answers)
{
    counting_work *w = work;
    (void)t;
    w->answered++;
    json_decref(w->answers);
    w->answers = json_deep_copy(answers);
}

static void w_release(void *work)
{
    counting_work *w = work;
    w->released++;
}

static const mcp_task_ops all_hooks = {w_refresh, w_cancel, w_answered, w_release};
static const mcp_task_ops release_only = {NULL, NULL, w_answered, w_release};

/* The answer of method on owner's task id with params extra (a JSON object text or NULL):
 * the result, or the error's code in *code (0 when there is a result). */
static json_t *ask(const char *owner, const char *method, const char *id, const char *extra,
                   int *code)
{
    json_t *params = extra ? json_loads(extra, 0, NULL) : json_object();
    json_object_set_new(params, "taskId", json_string(id));
    json_t *result = NULL, *error = NULL;
    int rc = mcp_tasks_request(owner, method, params, &result, &error);
    json_decref(params);
    CU_ASSERT_EQUAL(rc, 0);
    *code = error ? (int)json_integer_value(json_object_get(error, "code")) : 0;
    json_decref(error);
    return result;
}

static const char *str(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

static char *id_of(mcp_task *t)
{
    json_t *c = mcp_task_created(t);
    char *id = strdup(str(c, "taskId"));
    json_decref(c);
    return id;
}

static void test_new_task_is_flat_and_found_by_its_owner_only(void)
{
    counting_work w = {0};
    mcp_task *t = mcp_task_new("owner-a", 60000, 500, &all_hooks, &w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    json_t *c = mcp_task_created(t);
    CU_ASSERT_STRING_EQUAL(str(c, "resultType"), "task");
    CU_ASSERT_STRING_EQUAL(str(c, "status"), "working");
    CU_ASSERT_EQUAL(strlen(str(c, "taskId")), 32);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(c, "ttlMs")), 60000);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(c, "pollIntervalMs")), 500);
    CU_ASSERT_EQUAL(strlen(str(c, "createdAt")), 24); /* 2026-01-01T00:00:00.000Z */
    CU_ASSERT_PTR_NULL(json_object_get(c, "task"));
    CU_ASSERT_PTR_NULL(json_object_get(c, "result"));
    CU_ASSERT_PTR_NULL(json_object_get(c, "requestState"));
    char *id = strdup(str(c, "taskId"));
    json_decref(c);
    int code = 0;
    CU_ASSERT_PTR_NULL(ask("owner-b", "tasks/get", id, NULL, &code));
    CU_ASSERT_EQUAL(code, MCP_INVALID_PARAMS);
    CU_ASSERT_PTR_NULL(ask("", "tasks/cancel", id, NULL, &code));
    CU_ASSERT_EQUAL(code, MCP_INVALID_PARAMS);
    json_t *g = ask("owner-a", "tasks/get", id, NULL, &code);
    CU_ASSERT_EQUAL(code, 0);
    CU_ASSERT_STRING_EQUAL(str(g, "resultType"), "complete");
    CU_ASSERT_STRING_EQUAL(str(g, "taskId"), id);
    CU_ASSERT_STRING_EQUAL(str(g, "status"), "working");
    CU_ASSERT_EQUAL(w.refreshed, 1);
    CU_ASSERT_EQUAL(w.cancelled, 0);
    json_decref(g);
    mcp_task_unref(t);
    mcp_tasks_shutdown();
    CU_ASSERT_EQUAL(w.released, 1);
    free(id);
}

static void test_task_past_its_time_to_live_is_forgotten_and_released(void)
{
    counting_work w = {0};
    mcp_task *t = mcp_task_new("", 0, 500, &all_hooks, &w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    char *id = id_of(t);
    mcp_task_unref(t);
    int code = 0;
    CU_ASSERT_PTR_NULL(ask("", "tasks/get", id, NULL, &code));
    CU_ASSERT_EQUAL(code, MCP_INVALID_PARAMS);
    CU_ASSERT_EQUAL(w.refreshed, 0);
    CU_ASSERT_EQUAL(w.released, 1);
    free(id);
}

static void test_final_status_stays_and_carries_its_result(void)
{
    counting_work w = {0};
    mcp_task *t = mcp_task_new("", 60000, 500, &all_hooks, &w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    char *id = id_of(t);
    mcp_task_complete(
        t,
        json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", "done", "isError", 1),
        NULL);
    mcp_task_working(t, "again");
    mcp_task_cancelled(t, "late");
    CU_ASSERT_FALSE(mcp_task_ask(t, "k", "elicitation/create", json_object(), NULL));
    mcp_task_fail(t, json_pack("{s:i, s:s}", "code", -32603, "message", "late"), NULL);
    int code = 0;
    json_t *ack = ask("", "tasks/cancel", id, NULL, &code);
    CU_ASSERT_EQUAL(code, 0);
    CU_ASSERT_EQUAL(json_object_size(ack), 1); /* resultType alone */
    CU_ASSERT_STRING_EQUAL(str(ack, "resultType"), "complete");
    json_decref(ack);
    CU_ASSERT_EQUAL(w.cancelled, 0);
    json_t *g = ask("", "tasks/get", id, NULL, &code);
    CU_ASSERT_STRING_EQUAL(str(g, "status"), "completed");
    CU_ASSERT_TRUE(json_is_true(json_object_get(json_object_get(g, "result"), "isError")));
    CU_ASSERT_PTR_NULL(json_object_get(g, "error"));
    CU_ASSERT_EQUAL(w.refreshed, 0); /* an ended task is not refreshed */
    json_decref(g);
    mcp_task_unref(t);
    mcp_tasks_shutdown();
    free(id);
}

static void test_partial_answers_keep_input_required_and_keys_are_never_asked_twice(void)
{
    counting_work w = {0};
    mcp_task *t = mcp_task_new("", 60000, 500, &release_only, &w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    char *id = id_of(t);
    CU_ASSERT_TRUE(mcp_task_ask(t, "a", "elicitation/create", json_object(), NULL));
    CU_ASSERT_TRUE(mcp_task_ask(t, "b", "elicitation/create", json_object(), "two asks"));
    CU_ASSERT_TRUE(mcp_task_ask(t, "a", "elicitation/create", json_object(), NULL));
    int code = 0;
    json_t *ack = ask("", "tasks/update", id,
                      "{\"inputResponses\":{\"a\":{\"action\":\"accept\"},\"zz\":{}}}", &code);
    CU_ASSERT_EQUAL(code, 0);
    json_decref(ack);
    json_t *g = ask("", "tasks/get", id, NULL, &code);
    CU_ASSERT_STRING_EQUAL(str(g, "status"), "input_required");
    json_t *asks = json_object_get(g, "inputRequests");
    CU_ASSERT_EQUAL(json_object_size(asks), 1);
    CU_ASSERT_STRING_EQUAL(str(json_object_get(asks, "b"), "method"), "elicitation/create");
    CU_ASSERT_EQUAL(w.answered, 0);
    json_decref(g);
    json_decref(ask("", "tasks/update", id, "{\"inputResponses\":{\"b\":{\"action\":\"decline\"}}}",
                    &code));
    CU_ASSERT_EQUAL(w.answered, 1);
    CU_ASSERT_EQUAL(json_object_size(w.answers), 2);
    CU_ASSERT_STRING_EQUAL(str(json_object_get(w.answers, "b"), "action"), "decline");
    CU_ASSERT_FALSE(mcp_task_ask(t, "a", "elicitation/create", json_object(), NULL));
    g = ask("", "tasks/get", id, NULL, &code);
    CU_ASSERT_STRING_EQUAL(str(g, "status"), "working");
    CU_ASSERT_PTR_NULL(json_object_get(g, "inputRequests"));
    json_decref(g);
    json_decref(w.answers);
    mcp_task_unref(t);
    mcp_tasks_shutdown();
    free(id);
}

static void test_cancel_and_refresh_go_to_the_work(void)
{
    counting_work w = {0}, plain = {0};
    mcp_task *t = mcp_task_new("", 60000, 500, &all_hooks, &w);
    mcp_task *u = mcp_task_new("", 60000, 500, &release_only, &plain);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    char *id = id_of(t), *uid = id_of(u);
    int code = 0;
    json_decref(ask("", "tasks/cancel", id, NULL, &code));
    CU_ASSERT_EQUAL(w.cancelled, 1);
    w.refresh_fails = true;
    CU_ASSERT_PTR_NULL(ask("", "tasks/get", id, NULL, &code));
    CU_ASSERT_EQUAL(code, MCP_INTERNAL_ERROR);
    w.refresh_fails = false;
    json_t *g = ask("", "tasks/get", id, NULL, &code);
    CU_ASSERT_STRING_EQUAL(str(g, "status"), "working"); /* the work has not stopped yet */
    json_decref(g);
    json_decref(ask("", "tasks/cancel", uid, NULL, &code));
    g = ask("", "tasks/get", uid, NULL, &code);
    CU_ASSERT_STRING_EQUAL(str(g, "status"), "cancelled"); /* no cancel hook: at once */
    json_decref(g);
    mcp_task_unref(t);
    mcp_task_unref(u);
    mcp_tasks_shutdown();
    CU_ASSERT_EQUAL(w.released + plain.released, 2);
    free(id);
    free(uid);
}

static void test_bad_params_and_methods_the_extension_lacks(void)
{
    json_t *result = NULL, *error = NULL,
           *p = json_pack("{s:s, s:i}", "taskId", "x", "inputResponses", 5);
    CU_ASSERT_EQUAL(mcp_tasks_request("", "tasks/result", p, &result, &error), 1);
    CU_ASSERT_EQUAL(mcp_tasks_request("", "tasks/list", p, &result, &error), 1);
    CU_ASSERT_EQUAL(mcp_tasks_request("", "tasks/update", p, &result, &error), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(error, "code")), MCP_INVALID_PARAMS);
    json_decref(error);
    json_object_del(p, "taskId");
    CU_ASSERT_EQUAL(mcp_tasks_request("", "tasks/get", p, &result, &error), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(error, "code")), MCP_INVALID_PARAMS);
    json_decref(error);
    json_decref(p);
    json_t *missing = mcp_tasks_missing("tasks/get");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(missing, "code")), -32021);
    CU_ASSERT_PTR_NOT_NULL(json_object_get(
        json_object_get(json_object_get(json_object_get(missing, "data"), "requiredCapabilities"),
                        "extensions"),
        MCP_TASKS_EXTENSION));
    json_decref(missing);
    json_t *caps = json_pack("{s:{s:{}}}", "extensions", MCP_TASKS_EXTENSION);
    CU_ASSERT_TRUE(mcp_tasks_declared(caps));
    CU_ASSERT_FALSE(mcp_tasks_declared(json_object_get(caps, "extensions")));
    CU_ASSERT_FALSE(mcp_tasks_declared(NULL));
    json_decref(caps);
}

static void test_tasks_held_at_once_are_capped(void)
{
    static counting_work w[MCP_MAX_TASKS + 1];
    size_t made = 0;
    for (size_t i = 0; i < MCP_MAX_TASKS + 1; i++) {
        mcp_task *t = mcp_task_new("", 60000, 500, &release_only, &w[i]);
        made += t != NULL;
        mcp_task_unref(t);
    }
    CU_ASSERT_EQUAL(made, MCP_MAX_TASKS);
    CU_ASSERT_EQUAL(w[MCP_MAX_TASKS].released, 0); /* not made: its work stays the caller's */
    mcp_tasks_shutdown();
    size_t released = 0;
    for (size_t i = 0; i < MCP_MAX_TASKS; i++)
        released += (size_t)w[i].released;
    CU_ASSERT_EQUAL(released, MCP_MAX_TASKS);
}

static const harness_test tests[] = {
    HARNESS_TEST(test_new_task_is_flat_and_found_by_its_owner_only),
    HARNESS_TEST(test_task_past_its_time_to_live_is_forgotten_and_released),
    HARNESS_TEST(test_final_status_stays_and_carries_its_result),
    HARNESS_TEST(test_partial_answers_keep_input_required_and_keys_are_never_asked_twice),
    HARNESS_TEST(test_cancel_and_refresh_go_to_the_work),
    HARNESS_TEST(test_bad_params_and_methods_the_extension_lacks),
    HARNESS_TEST(test_tasks_held_at_once_are_capped),
};

static const harness_suite suites[] = {
    {"mcp_tasks", NULL, NULL, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
