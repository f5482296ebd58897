/*
 * mcp_jsonrpc.c - JSON-RPC 2.0 framing and the MCP lifecycle of charter-mcp: one message in,
 * at most one answer out, the same for stdio and Streamable HTTP. Malformed messages, batches,
 * oversized messages, unknown methods and calls before initialize each get a JSON-RPC error and
 * change nothing; the process keeps serving. Tools live in mcp_tools.c.
 */
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

#define META_CAPS "io.modelcontextprotocol/clientCapabilities"

/* Newest first: the current revision, then the older ones the official SDKs still offer. */
static const char *const protocols[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

bool mcp_protocol_supported(const char *version)
{
    for (size_t i = 0; version && i < sizeof protocols / sizeof *protocols; i++)
        if (strcmp(version, protocols[i]) == 0)
            return true;
    return false;
}

void mcp_session_reset(mcp_session *s)
{
    for (size_t i = 0; i < s->n_shown; i++)
        free(s->shown[i]);
    memset(s, 0, sizeof *s);
}

char *mcp_jsonrpc_error_text(const json_t *id, int code, const char *message)
{
    json_t *err = json_pack("{s:s, s:O?, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error",
                            "code", code, "message", message);
    if (!err)
        return NULL;
    if (!id && json_object_set_new(err, "id", json_null()) != 0) {
        json_decref(err);
        return NULL;
    }
    char *text = json_dumps(err, JSON_COMPACT);
    json_decref(err);
    return text;
}

/* The answer carrying error (a JSON-RPC error object, stolen) as text; NULL when out of
 * memory. */
static char *error_text(const json_t *id, json_t *error)
{
    json_t *msg =
        error ? json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "error", error) : NULL;
    char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    return text;
}

static char *result_text(const json_t *id, json_t *result)
{
    if (!result)
        return NULL;
    json_t *msg = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
    if (!msg)
        return NULL;
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    return text;
}

/* What initialize answers besides the version: the step's tools and instructions, or the
 * conformance fixture's capabilities. NULL when out of memory. */
static json_t *server_description(const mcp_server *srv, const char *version)
{
    if (srv->fixture)
        return json_pack("{s:s, s:o, s:{s:s, s:s}, s:s}", "protocolVersion", version,
                         "capabilities", mcp_fixture_capabilities(), "serverInfo", "name",
                         "charter-mcp-conformance-fixture", "version", charter_version(),
                         "instructions",
                         "A conformance test fixture: no charter step, nothing is gated.");
    char instructions[512];
    snprintf(instructions, sizeof instructions,
             "You act as step \"%s\" of workflow \"%s\". Open the step, read what it may read, "
             "submit its output, then deliver or hand off. Every artifact shown to you has "
             "passed charter's input gate; refusals come back as tool results with a decision, "
             "codes and a witness.",
             srv->step_name, json_string_value(json_object_get(srv->workflow, "name")));
    json_t *d =
        json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s}, s:s}", "protocolVersion", version,
                  "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "charter-mcp",
                  "version", charter_version(), "instructions", instructions);
    /* The step that starts runs answers start_async_run with a task (mcp_async.c). */
    if (d && srv->first_step)
        json_object_set_new(json_object_get(d, "capabilities"), "extensions",
                            json_pack("{s:{}}", MCP_TASKS_EXTENSION));
    return d;
}

/* initialize: the client's version when this server speaks it, else the newest this server
 * speaks (the client then decides whether to go on, as the lifecycle specifies). */
static char *initialize(mcp_server *srv, mcp_session *s, const json_t *id, const json_t *params,
                        bool *was_initialize)
{
    if (s->initialized)
        return mcp_jsonrpc_error_text(id, MCP_INVALID_REQUEST, "already initialized");
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    if (!asked)
        return mcp_jsonrpc_error_text(id, MCP_INVALID_PARAMS,
                                      "initialize: params.protocolVersion must be a string");
    const char *version = mcp_protocol_supported(asked) ? asked : protocols[0];
    unsigned char rnd[16];
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        return mcp_jsonrpc_error_text(id, MCP_INTERNAL_ERROR, "no random bytes");
    char *text = result_text(id, server_description(srv, version));
    if (text) {
        for (size_t i = 0; i < sizeof rnd; i++)
            snprintf(s->task_owner + 2 * i, 3, "%02x", rnd[i]);
        s->tasks_extension = mcp_tasks_declared(json_object_get(params, "capabilities"));
        s->initialized = true;
        snprintf(s->protocol, sizeof s->protocol, "%s", version);
        *was_initialize = true;
    }
    return text;
}

/* Whether this request of a step's session declared the tasks extension: at initialize, or in
 * its own _meta (SEP-2663 negotiates per request). The fixture's sessions serve no tasks. */
static bool tasks_declared(const mcp_server *srv, const mcp_session *s, const json_t *params)
{
    return !srv->fixture &&
           (s->tasks_extension ||
            mcp_tasks_declared(json_object_get(json_object_get(params, "_meta"), META_CAPS)));
}

/* tasks/get, tasks/update, tasks/cancel of this session's tasks; NULL with *handled false for
 * any other method. */
static char *tasks_method(mcp_server *srv, mcp_session *s, const json_t *id, const char *method,
                          const json_t *params, bool *handled)
{
    json_t *result = NULL, *error = NULL;
    *handled = false;
    if (srv->fixture || (strcmp(method, "tasks/get") != 0 && strcmp(method, "tasks/update") != 0 &&
                         strcmp(method, "tasks/cancel") != 0))
        return NULL;
    *handled = true;
    if (!tasks_declared(srv, s, params))
        return error_text(id, mcp_tasks_missing(method));
    if (mcp_tasks_request(s->task_owner, method, params, &result, &error) != 0)
        return mcp_jsonrpc_error_text(id, MCP_INTERNAL_ERROR, "out of memory");
    return result ? result_text(id, result) : error_text(id, error);
}

static char *tools_call(mcp_server *srv, mcp_session *s, const json_t *id, const json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    const json_t *args = json_object_get(params, "arguments");
    if (!name)
        return mcp_jsonrpc_error_text(id, MCP_INVALID_PARAMS,
                                      "tools/call: params.name must be "
                                      "a string");
    if (args && !json_is_object(args))
        return mcp_jsonrpc_error_text(id, MCP_INVALID_PARAMS,
                                      "tools/call: params.arguments must be an object");
    json_t *result = NULL;
    s->tasks_now = tasks_declared(srv, s, params);
    int rc = mcp_tools_call(srv, s, name, args, &result);
    s->tasks_now = false;
    if (rc == MCP_INVALID_PARAMS) {
        char msg[160];
        snprintf(msg, sizeof msg, "Unknown tool: %.100s", name);
        return mcp_jsonrpc_error_text(id, MCP_INVALID_PARAMS, msg);
    }
    if (rc != 0)
        return mcp_jsonrpc_error_text(id, MCP_INTERNAL_ERROR, "out of memory");
    return result_text(id, result);
}

/* A request (it has an id): exactly one answer. */
static char *request(mcp_server *srv, mcp_session *s, const json_t *id, const char *method,
                     const json_t *params, bool *was_initialize)
{
    if (strcmp(method, "initialize") == 0)
        return initialize(srv, s, id, params, was_initialize);
    if (strcmp(method, "ping") == 0)
        return result_text(id, json_object());
    if (!s->initialized)
        return mcp_jsonrpc_error_text(id, MCP_INVALID_REQUEST,
                                      "not initialized: send initialize first");
    char *reply = NULL;
    if (srv->fixture && mcp_fixture_request(s, id, method, params, &reply))
        return reply;
    if (strcmp(method, "tools/list") == 0)
        return result_text(id, json_pack("{s:o}", "tools", mcp_tools_list(srv)));
    if (strcmp(method, "tools/call") == 0)
        return tools_call(srv, s, id, params);
    bool handled = false;
    char *answer = tasks_method(srv, s, id, method, params, &handled);
    if (handled)
        return answer;
    char msg[160];
    snprintf(msg, sizeof msg, "Method not found: %.100s", method);
    return mcp_jsonrpc_error_text(id, MCP_METHOD_NOT_FOUND, msg);
}

/* The answer to a message jansson could not parse (*reply, or NULL for a notification).
 * Valid JSON whose strings hold an escaped NUL (\u0000) is refused by the strict parse only
 * because no id, argument or text here may hold one; it is answered with its own id, as
 * invalid params: a "Parse error" with a null id would leave a client waiting for its answer
 * forever. Anything else is a parse error. Returns 0, or -1 when out of memory. */
static int nul_refused(const char *buf, size_t len, char **reply)
{
    json_t *msg = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
    if (!json_is_object(msg)) {
        json_decref(msg);
        *reply = mcp_jsonrpc_error_text(NULL, MCP_PARSE_ERROR, "Parse error");
        return *reply ? 0 : -1;
    }
    const json_t *id = json_object_get(msg, "id");
    bool usable = json_is_integer(id) ||
                  (json_is_string(id) && strlen(json_string_value(id)) == json_string_length(id));
    if (id == NULL) { /* a notification: never answered */
        json_decref(msg);
        return 0;
    }
    *reply = mcp_jsonrpc_error_text(usable ? id : NULL,
                                    usable ? MCP_INVALID_PARAMS : MCP_INVALID_REQUEST,
                                    "a string of the message holds a NUL byte (\\u0000), which "
                                    "charter-mcp does not accept in any id, name or value");
    json_decref(msg);
    return *reply ? 0 : -1;
}

int mcp_jsonrpc_handle(mcp_server *srv, mcp_session *s, const char *buf, size_t len, char **reply,
                       bool *was_initialize)
{
    *reply = NULL;
    *was_initialize = false;
    if (len > MCP_MAX_MESSAGE) {
        char msg[96];
        snprintf(msg, sizeof msg, "message larger than %zu bytes", MCP_MAX_MESSAGE);
        *reply = mcp_jsonrpc_error_text(NULL, MCP_INVALID_REQUEST, msg);
        return *reply ? 0 : -1;
    }
    json_error_t jerr;
    json_t *msg = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!msg)
        return nul_refused(buf, len, reply);
    if (json_is_array(msg)) {
        json_decref(msg);
        *reply = mcp_jsonrpc_error_text(NULL, MCP_INVALID_REQUEST,
                                        "batches are not supported: send one message at a time");
        return *reply ? 0 : -1;
    }
    const json_t *id = json_object_get(msg, "id");
    const json_t *method = json_object_get(msg, "method");
    const json_t *params = json_object_get(msg, "params");
    const char *version = json_string_value(json_object_get(msg, "jsonrpc"));
    if (!json_is_object(msg) || !version || strcmp(version, "2.0") != 0 ||
        (id && !json_is_string(id) && !json_is_integer(id)) ||
        (method && !json_is_string(method))) {
        bool keep = json_is_string(id) || json_is_integer(id);
        *reply = mcp_jsonrpc_error_text(keep ? id : NULL, MCP_INVALID_REQUEST, "Invalid Request");
        json_decref(msg);
        return *reply ? 0 : -1;
    }
    if (!method) {
        /* A response (a result or an error) to a request this server never sends: nothing to
         * answer. A message that is neither a request nor a response is an invalid request,
         * answered with its id: left unanswered, a client would wait for that id forever. */
        bool response =
            json_object_get(msg, "result") != NULL || json_object_get(msg, "error") != NULL;
        if (!response)
            *reply = mcp_jsonrpc_error_text(id, MCP_INVALID_REQUEST,
                                            "Invalid Request: a message needs a method (a "
                                            "request or a notification), or a result or an "
                                            "error (a response)");
        json_decref(msg);
        return response || *reply ? 0 : -1;
    }
    if (params && !json_is_object(params)) {
        if (id)
            *reply = mcp_jsonrpc_error_text(id, MCP_INVALID_PARAMS, "params must be an object");
        json_decref(msg);
        return id && !*reply ? -1 : 0;
    }
    if (!id) {
        /* Notifications (initialized, cancelled, ...) need no answer and change nothing here. */
        json_decref(msg);
        return 0;
    }
    *reply = request(srv, s, id, json_string_value(method), params, was_initialize);
    json_decref(msg);
    return *reply ? 0 : -1;
}
