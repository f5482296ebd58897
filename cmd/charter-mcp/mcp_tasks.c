/*
 * mcp_tasks.c - the io.modelcontextprotocol/tasks extension (SEP-2663): a tools/call may be
 * answered with a task (resultType "task") that the client polls with tasks/get, feeds the
 * input it asks for with tasks/update and stops with tasks/cancel. The server decides which
 * calls become tasks, and only for a request whose client declared the extension.
 *
 * Tasks live in this process's memory, in one list under one lock, each for its time to live
 * from creation (ttlMs): an expired task is forgotten at the next creation or look-up, never
 * before. A task is a small state machine (working and input_required, then completed, failed
 * or cancelled, which are final); what moves it is its work (mcp_task_ops): the conformance
 * fixture's timers on NNG's threads (mcp_fixture_tasks.c), or a run that charterd executes,
 * read when the task is read (mcp_async.c). Ids are 128 random bits; a task made in a session
 * is found by that session only (its owner).
 */
#include <openssl/rand.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp.h"

struct mcp_task {
    char id[33];
    char owner[33];
    long long created_ms, updated_ms, ttl_ms, poll_ms; /* wall clock, milliseconds */
    mcp_task_status status;
    char message[512]; /* statusMessage, "" for none */
    json_t *result;    /* completed */
    json_t *error;     /* failed */
    json_t *asks;      /* outstanding input requests by key */
    json_t *answers;   /* every answer received, by key */
    json_t *keys;      /* every key ever asked: a key is never asked twice */
    const mcp_task_ops *ops;
    void *work;
    unsigned refs; /* one for the list while listed, one per holder */
    bool listed;
    mcp_task *next;
};

static pthread_mutex_t tasks_mu = PTHREAD_MUTEX_INITIALIZER;
static mcp_task *tasks_head; /* under tasks_mu, like every task's fields but id and owner */
static size_t tasks_count;
static atomic_bool tasks_stopping;

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static bool is_final(mcp_task_status s)
{
    return s == MCP_TASK_COMPLETED || s == MCP_TASK_FAILED || s == MCP_TASK_CANCELLED;
}

static const char *status_name(mcp_task_status s)
{
    static const char *const names[] = {"working", "input_required", "completed", "failed",
                                        "cancelled"};
    return names[s];
}

/* --- the list ------------------------------------------------------------------------------ */

static void task_free(mcp_task *t)
{
    if (t->ops && t->ops->release)
        t->ops->release(t->work);
    json_decref(t->result);
    json_decref(t->error);
    json_decref(t->asks);
    json_decref(t->answers);
    json_decref(t->keys);
    free(t);
}

/* Unlists the tasks whose time to live has passed (called with tasks_mu held); those nobody
 * holds are moved to *dead, for task_free after the lock is released (their release may wait
 * for a callback that takes the lock). */
static void purge(mcp_task **dead)
{
    long long now = now_ms();
    for (mcp_task **p = &tasks_head; *p;) {
        mcp_task *t = *p;
        if (now < t->created_ms + t->ttl_ms) {
            p = &t->next;
            continue;
        }
        *p = t->next;
        t->listed = false;
        tasks_count--;
        if (--t->refs == 0) {
            t->next = *dead;
            *dead = t;
        }
    }
}

static void free_dead(mcp_task *dead)
{
    while (dead) {
        mcp_task *next = dead->next;
        task_free(dead);
        dead = next;
    }
}

mcp_task *mcp_task_new(const char *owner, long long ttl_ms, long long poll_ms,
                       const mcp_task_ops *ops, void *work)
{
    unsigned char rnd[16];
    mcp_task *t = calloc(1, sizeof *t);
    if (!t || RAND_bytes(rnd, sizeof rnd) != 1 || !(t->asks = json_object()) ||
        !(t->answers = json_object()) || !(t->keys = json_object())) {
        if (t)
            task_free(t); /* no ops yet: work stays the caller's */
        return NULL;
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(t->id + 2 * i, 3, "%02x", rnd[i]);
    snprintf(t->owner, sizeof t->owner, "%s", owner);
    t->created_ms = t->updated_ms = now_ms();
    t->ttl_ms = ttl_ms;
    t->poll_ms = poll_ms;
    t->status = MCP_TASK_WORKING;
    t->refs = 2; /* the list's and the caller's */
    mcp_task *dead = NULL;
    pthread_mutex_lock(&tasks_mu);
    purge(&dead);
    bool room = tasks_count < MCP_MAX_TASKS;
    if (room) {
        t->ops = ops;
        t->work = work;
        t->listed = true;
        t->next = tasks_head;
        tasks_head = t;
        tasks_count++;
    }
    pthread_mutex_unlock(&tasks_mu);
    free_dead(dead);
    if (!room) {
        task_free(t);
        return NULL;
    }
    return t;
}

void mcp_task_unref(mcp_task *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&tasks_mu);
    bool last = --t->refs == 0;
    pthread_mutex_unlock(&tasks_mu);
    if (last)
        task_free(t);
}

/* owner's task id, held (mcp_task_unref), or NULL. */
static mcp_task *find(const char *owner, const char *id)
{
    mcp_task *dead = NULL, *found = NULL;
    pthread_mutex_lock(&tasks_mu);
    purge(&dead);
    for (mcp_task *t = tasks_head; t && !found; t = t->next)
        if (strcmp(t->id, id) == 0 && strcmp(t->owner, owner) == 0)
            found = t;
    if (found)
        found->refs++;
    pthread_mutex_unlock(&tasks_mu);
    free_dead(dead);
    return found;
}

void mcp_tasks_stop(void)
{
    atomic_store(&tasks_stopping, true);
}

bool mcp_tasks_stopping(void)
{
    return atomic_load(&tasks_stopping);
}

void mcp_tasks_shutdown(void)
{
    mcp_task *dead = NULL;
    pthread_mutex_lock(&tasks_mu);
    while (tasks_head) {
        mcp_task *t = tasks_head;
        tasks_head = t->next;
        t->listed = false;
        tasks_count--;
        if (--t->refs == 0) {
            t->next = dead;
            dead = t;
        }
    }
    pthread_mutex_unlock(&tasks_mu);
    free_dead(dead);
}

/* --- what the work sets -------------------------------------------------------------------- */

/* Moves t to status with message (called with tasks_mu held, t not final); lastUpdatedAt moves
 * only when something changed. */
static void set_status(mcp_task *t, mcp_task_status status, const char *message)
{
    char text[sizeof t->message];
    snprintf(text, sizeof text, "%s", message ? message : "");
    if (t->status != status || strcmp(t->message, text) != 0)
        t->updated_ms = now_ms();
    t->status = status;
    memcpy(t->message, text, sizeof text);
    if (status != MCP_TASK_INPUT_REQUIRED)
        json_object_clear(t->asks);
}

void mcp_task_working(mcp_task *t, const char *message)
{
    pthread_mutex_lock(&tasks_mu);
    if (!is_final(t->status))
        set_status(t, MCP_TASK_WORKING, message);
    pthread_mutex_unlock(&tasks_mu);
}

bool mcp_task_ask(mcp_task *t, const char *key, const char *method, json_t *params,
                  const char *message)
{
    json_t *ask = json_pack("{s:s, s:o}", "method", method, "params", params);
    bool outstanding = false;
    pthread_mutex_lock(&tasks_mu);
    if (json_object_get(t->keys, key)) {
        outstanding = json_object_get(t->asks, key) != NULL;
    } else if (ask && !is_final(t->status) && json_object_set_new(t->keys, key, json_true()) == 0 &&
               json_object_set(t->asks, key, ask) == 0) {
        set_status(t, MCP_TASK_INPUT_REQUIRED, message);
        t->updated_ms = now_ms(); /* a new request, whatever the message */
        outstanding = true;
    }
    pthread_mutex_unlock(&tasks_mu);
    json_decref(ask);
    return outstanding;
}

void mcp_task_complete(mcp_task *t, json_t *result, const char *message)
{
    pthread_mutex_lock(&tasks_mu);
    if (!is_final(t->status) && result) {
        set_status(t, MCP_TASK_COMPLETED, message);
        t->result = result;
        result = NULL;
    }
    pthread_mutex_unlock(&tasks_mu);
    json_decref(result);
}

void mcp_task_fail(mcp_task *t, json_t *error, const char *message)
{
    pthread_mutex_lock(&tasks_mu);
    if (!is_final(t->status) && error) {
        set_status(t, MCP_TASK_FAILED, message);
        t->error = error;
        error = NULL;
    }
    pthread_mutex_unlock(&tasks_mu);
    json_decref(error);
}

void mcp_task_cancelled(mcp_task *t, const char *message)
{
    pthread_mutex_lock(&tasks_mu);
    if (!is_final(t->status))
        set_status(t, MCP_TASK_CANCELLED, message);
    pthread_mutex_unlock(&tasks_mu);
}

/* --- the wire ------------------------------------------------------------------------------ */

/* ISO 8601 (UTC, milliseconds) of a wall clock time in milliseconds. */
static void iso8601(long long ms, char out[32])
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char day[24];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 32, "%s.%03dZ", day, (int)(ms % 1000));
}

/* The task's fields (called with tasks_mu held): taskId, status, statusMessage, createdAt,
 * lastUpdatedAt, ttlMs, pollIntervalMs, and with detailed what its status carries (result,
 * error or inputRequests: tasks/get's DetailedTask). New reference, NULL when out of memory. */
static json_t *task_json(const mcp_task *t, const char *result_type, bool detailed)
{
    char created[32], updated[32];
    iso8601(t->created_ms, created);
    iso8601(t->updated_ms, updated);
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "resultType", result_type, "taskId", t->id,
                  "status", status_name(t->status), "createdAt", created, "lastUpdatedAt", updated,
                  "ttlMs", (json_int_t)t->ttl_ms, "pollIntervalMs", (json_int_t)t->poll_ms);
    if (o && t->message[0])
        json_object_set_new(o, "statusMessage", json_string(t->message));
    if (o && detailed && t->status == MCP_TASK_COMPLETED)
        json_object_set(o, "result", t->result);
    if (o && detailed && t->status == MCP_TASK_FAILED)
        json_object_set(o, "error", t->error);
    if (o && detailed && t->status == MCP_TASK_INPUT_REQUIRED)
        json_object_set_new(o, "inputRequests", json_deep_copy(t->asks));
    return o;
}

json_t *mcp_task_created(mcp_task *t)
{
    pthread_mutex_lock(&tasks_mu);
    json_t *o = task_json(t, "task", false);
    pthread_mutex_unlock(&tasks_mu);
    return o;
}

bool mcp_tasks_declared(const json_t *capabilities)
{
    return json_is_object(
        json_object_get(json_object_get(capabilities, "extensions"), MCP_TASKS_EXTENSION));
}

json_t *mcp_tasks_missing(const char *what)
{
    char msg[200];
    snprintf(msg, sizeof msg, "Missing required client capability: %s needs the %s extension", what,
             MCP_TASKS_EXTENSION);
    return json_pack("{s:i, s:s, s:{s:{s:{s:{}}}}}", "code", MCP_MISSING_CLIENT_CAPABILITY,
                     "message", msg, "data", "requiredCapabilities", "extensions",
                     MCP_TASKS_EXTENSION);
}

static json_t *error_object(int code, const char *message)
{
    return json_pack("{s:i, s:s}", "code", code, "message", message);
}

/* --- tasks/get, tasks/update, tasks/cancel -------------------------------------------------- */

static int get(mcp_task *t, json_t **result, json_t **error)
{
    pthread_mutex_lock(&tasks_mu);
    bool ended = is_final(t->status);
    pthread_mutex_unlock(&tasks_mu);
    if (!ended && t->ops && t->ops->refresh && t->ops->refresh(t, t->work, error) != 0)
        return *error ? 0 : -1;
    pthread_mutex_lock(&tasks_mu);
    *result = task_json(t, "complete", true);
    pthread_mutex_unlock(&tasks_mu);
    return *result ? 0 : -1;
}

/* Takes the answers to outstanding requests (others are ignored: never asked, answered before,
 * or withdrawn); once none is outstanding, the task works again and its work gets them all. */
static int update(mcp_task *t, const json_t *responses, json_t **result)
{
    const char *key;
    json_t *v, *answers = NULL;
    pthread_mutex_lock(&tasks_mu);
    size_t before = json_object_size(t->asks);
    json_object_foreach((json_t *)responses, key, v)
    {
        if (!json_object_get(t->asks, key))
            continue;
        json_object_set(t->answers, key, v);
        json_object_del(t->asks, key);
        t->updated_ms = now_ms();
    }
    if (before > 0 && json_object_size(t->asks) == 0 && t->status == MCP_TASK_INPUT_REQUIRED) {
        set_status(t, MCP_TASK_WORKING, NULL);
        answers = json_deep_copy(t->answers);
    }
    pthread_mutex_unlock(&tasks_mu);
    if (answers && t->ops && t->ops->answered)
        t->ops->answered(t, t->work, answers);
    json_decref(answers);
    *result = json_pack("{s:s}", "resultType", "complete");
    return *result ? 0 : -1;
}

static int cancel(mcp_task *t, json_t **result, json_t **error)
{
    pthread_mutex_lock(&tasks_mu);
    bool ended = is_final(t->status);
    if (!ended && !(t->ops && t->ops->cancel))
        set_status(t, MCP_TASK_CANCELLED, "cancelled by tasks/cancel");
    pthread_mutex_unlock(&tasks_mu);
    if (!ended && t->ops && t->ops->cancel && t->ops->cancel(t, t->work, error) != 0)
        return *error ? 0 : -1;
    *result = json_pack("{s:s}", "resultType", "complete");
    return *result ? 0 : -1;
}

int mcp_tasks_request(const char *owner, const char *method, const json_t *params, json_t **result,
                      json_t **error)
{
    *result = *error = NULL;
    bool is_get = strcmp(method, "tasks/get") == 0, is_update = strcmp(method, "tasks/update") == 0;
    if (!is_get && !is_update && strcmp(method, "tasks/cancel") != 0)
        return 1;
    const char *id = json_string_value(json_object_get(params, "taskId"));
    const json_t *responses = json_object_get(params, "inputResponses");
    if (!id || (is_update && !json_is_object(responses))) {
        *error =
            error_object(MCP_INVALID_PARAMS, id ? "Invalid params: inputResponses must be an object"
                                                : "Invalid params: taskId must be a string");
        return *error ? 0 : -1;
    }
    mcp_task *t = find(owner, id);
    if (!t) {
        *error = error_object(MCP_INVALID_PARAMS, "Failed to retrieve task: Task not found");
        return *error ? 0 : -1;
    }
    int rc = is_get      ? get(t, result, error)
             : is_update ? update(t, responses, result)
                         : cancel(t, result, error);
    mcp_task_unref(t);
    return rc;
}
