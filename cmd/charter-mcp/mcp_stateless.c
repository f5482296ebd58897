/*
 * mcp_stateless.c - MCP revision 2026-07-28 for the conformance fixture (--conformance-fixture):
 * stateless requests (SEP-2575: no initialize, no session; every request carries its protocol
 * version, client capabilities and client info in params._meta and the MCP-Protocol-Version
 * header), server/discover, the standard and custom request headers (SEP-2243), caching hints
 * (SEP-2549), subscriptions/listen and InputRequiredResult (SEP-2322, input_required, which
 * replaces a server's own requests to the client).
 *
 * A request is checked in the order the revision names its errors: the version header, the
 * _meta fields, the header against _meta, the version itself, then Mcp-Method, Mcp-Name and
 * Mcp-Param-* against the body. Only then is it dispatched to the fixture (mcp_fixture.c) or to
 * the 2026-07-28-only tools and prompt below. Each answer gets its resultType, and cacheable
 * ones their ttlMs and cacheScope.
 */
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

#define STATELESS_VERSION "2026-07-28"
#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS "io.modelcontextprotocol/clientCapabilities"
/* 2026-07-28 error codes (schema/2026-07-28). */
enum {
    HEADER_MISMATCH = -32020,
    MISSING_CLIENT_CAPABILITY = -32021,
    UNSUPPORTED_PROTOCOL_VERSION = -32022,
};

static const char *const legacy_versions[] = {"2024-11-05", "2025-03-26", "2025-06-18",
                                              "2025-11-25"};

typedef struct {
    const json_t *id;
    const char *method;
    const json_t *params;
    const json_t *meta;
    mcp_stateless_answer *out;
    mcp_session *s;
} request;

/* --- answers ------------------------------------------------------------------------------ */

static int answer(mcp_stateless_answer *out, unsigned status, const json_t *id, json_t *result,
                  json_t *error)
{
    json_t *msg = json_pack("{s:s, s:O?}", "jsonrpc", "2.0", "id", id);
    if (msg && !id)
        json_object_set_new(msg, "id", json_null());
    if (msg && json_object_set_new(msg, result ? "result" : "error", result ? result : error))
        json_decref(msg), msg = NULL;
    out->status = status;
    out->reply = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    return out->reply ? 0 : -1;
}

static int fail(mcp_stateless_answer *out, unsigned status, const json_t *id, int code,
                const char *message, json_t *data)
{
    json_t *e = json_pack("{s:i, s:s}", "code", code, "message", message);
    if (e && data)
        json_object_set_new(e, "data", data);
    else
        json_decref(data);
    return e ? answer(out, status, id, NULL, e) : -1;
}

/* A result as 2026-07-28 sends it: resultType, and the caching hints of a cacheable method. */
static int complete(const request *r, json_t *result)
{
    static const char *const cacheable[] = {"server/discover", "tools/list",
                                            "prompts/list",    "resources/list",
                                            "resources/read",  "resources/templates/list"};
    if (!result)
        return -1;
    if (!json_object_get(result, "resultType"))
        json_object_set_new(result, "resultType", json_string("complete"));
    for (size_t i = 0; i < sizeof cacheable / sizeof *cacheable; i++) {
        if (strcmp(r->method, cacheable[i]) != 0 || json_object_get(result, "ttlMs"))
            continue;
        bool private = strcmp(r->method, "resources/read") == 0;
        json_object_set_new(result, "ttlMs", json_integer(private ? 60000 : 300000));
        json_object_set_new(result, "cacheScope", json_string(private ? "private" : "public"));
    }
    return answer(r->out, 200, r->id, result, NULL);
}

/* The answer of a fixture call that gave result or error (one of them). */
static int finish(const request *r, int rc, json_t *result, json_t *error)
{
    if (rc != 0) {
        json_decref(result);
        json_decref(error);
        return -1;
    }
    return result ? complete(r, result) : answer(r->out, 200, r->id, NULL, error);
}

/* --- input_required (SEP-2322) ------------------------------------------------------------ */

/* An input request: the method the client answers, its params (JSON text). */
typedef struct {
    const char *key, *method, *params;
} input_request;

#define ELICIT(message, field, type)                                                               \
    "{\"message\":\"" message                                                                      \
    "\",\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"" field "\":{\"type\":\"" type  \
    "\"}},\"required\":[\"" field "\"]}}"
#define SAMPLE(text, max)                                                                          \
    "{\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"text\",\"text\":\"" text            \
    "\"}}],\"maxTokens\":" #max "}"

static const input_request in_user_name = {"user_name", "elicitation/create",
                                           ELICIT("What is your name?", "name", "string")};
static const input_request in_sample = {"sample_request", "sampling/createMessage",
                                        SAMPLE("What is the capital of France?", 100)};
static const input_request in_roots = {"roots_request", "roots/list", "{}"};
static const input_request in_confirm = {"confirm", "elicitation/create",
                                         ELICIT("Please confirm", "ok", "boolean")};
static const input_request in_greeting = {"greeting", "sampling/createMessage",
                                          SAMPLE("Generate a greeting", 50)};
static const input_request in_client_roots = {"client_roots", "roots/list", "{}"};
static const input_request in_step1 = {"step1", "elicitation/create",
                                       ELICIT("Step 1: What is your name?", "name", "string")};
static const input_request in_step2 = {
    "step2", "elicitation/create",
    ELICIT("Step 2: What is your favorite color?", "color", "string")};
static const input_request in_elicit_any = {"elicit_input", "elicitation/create",
                                            ELICIT("Elicitation input", "value", "string")};
static const input_request in_sample_any = {"sample_input", "sampling/createMessage",
                                            SAMPLE("Sample request", 50)};
static const input_request in_context = {
    "user_context", "elicitation/create",
    ELICIT("What context should the prompt use?", "context", "string")};

/* The answer to input request q in inputResponses when it is well formed, else NULL: an
 * accepted elicitation with its one field, a sampling result with content, a roots list. */
static const json_t *response_for(const json_t *responses, const input_request *q)
{
    const json_t *v = json_object_get(responses, q->key);
    if (!json_is_object(v))
        return NULL;
    if (strcmp(q->method, "roots/list") == 0)
        return json_is_array(json_object_get(v, "roots")) ? v : NULL;
    if (strcmp(q->method, "sampling/createMessage") == 0)
        return json_is_object(json_object_get(v, "content")) ? v : NULL;
    const char *action = json_string_value(json_object_get(v, "action"));
    return action && strcmp(action, "accept") == 0 && json_is_object(json_object_get(v, "content"))
               ? v
               : NULL;
}

/* The string field of an accepted elicitation, or fallback. */
static const char *elicited(const json_t *response, const char *field, const char *fallback)
{
    const char *v = json_string_value(json_object_get(json_object_get(response, "content"), field));
    return v ? v : fallback;
}

/* An InputRequiredResult asking the n requests in qs, with the signed state payload (NULL: no
 * requestState). */
static int input_required(const request *r, const input_request *const *qs, size_t n,
                          const char *state)
{
    json_t *asks = json_object();
    for (size_t i = 0; asks && i < n; i++)
        json_object_set_new(asks, qs[i]->key,
                            json_pack("{s:s, s:o}", "method", qs[i]->method, "params",
                                      json_loads(qs[i]->params, 0, NULL)));
    json_t *result = json_pack("{s:s, s:o}", "resultType", "input_required", "inputRequests", asks);
    char *signed_state = state ? mcp_fixture_sign_state(state) : NULL;
    if (result && signed_state)
        json_object_set_new(result, "requestState", json_string(signed_state));
    free(signed_state);
    if (!result || (state && !json_object_get(result, "requestState"))) {
        json_decref(result);
        return -1;
    }
    return answer(r->out, 200, r->id, result, NULL);
}

static int text_answer(const request *r, const char *text)
{
    return complete(r, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text));
}

/* The verified state payload of the request as JSON (new reference), NULL when it has none;
 * *tampered when it has one that fails verification. */
static json_t *request_state(const request *r, bool *tampered)
{
    const json_t *st = json_object_get(r->params, "requestState");
    *tampered = false;
    if (!st)
        return NULL;
    char *payload = mcp_fixture_verify_state(json_string_value(st));
    json_t *state = payload ? json_loads(payload, 0, NULL) : NULL;
    free(payload);
    *tampered = state == NULL;
    return state;
}

/* The state payload {"tool": tool, "round": round} with a fresh nonce, as text (owned). */
static char *state_text(const char *tool, int round, const char *name)
{
    unsigned char rnd[8];
    char nonce[17] = "";
    if (RAND_bytes(rnd, sizeof rnd) == 1)
        for (size_t i = 0; i < sizeof rnd; i++)
            snprintf(nonce + 2 * i, 3, "%02x", rnd[i]);
    json_t *s = json_pack("{s:s, s:i, s:s, s:s?}", "tool", tool, "round", round, "nonce", nonce,
                          "name", name);
    char *text = s ? json_dumps(s, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(s);
    return text;
}

/* Whether the verified state names tool at round. */
static bool state_is(const json_t *state, const char *tool, int round)
{
    const char *t = json_string_value(json_object_get(state, "tool"));
    return t && strcmp(t, tool) == 0 &&
           json_integer_value(json_object_get(state, "round")) == round;
}

static int asks_with_state(const request *r, const input_request *const *qs, size_t n,
                           const char *tool, int round, const char *name)
{
    char *state = state_text(tool, round, name);
    int rc = state ? input_required(r, qs, n, state) : -1;
    free(state);
    return rc;
}

static int mrtr_simple(const request *r, const char *tool, const json_t *responses)
{
    char text[512];
    const json_t *v;
    if (strcmp(tool, "test_input_required_result_elicitation") == 0) {
        if (!(v = response_for(responses, &in_user_name)))
            return input_required(r, (const input_request *[]){&in_user_name}, 1, NULL);
        snprintf(text, sizeof text, "Hello, %.400s!", elicited(v, "name", "friend"));
    } else if (strcmp(tool, "test_input_required_result_sampling") == 0) {
        if (!(v = response_for(responses, &in_sample)))
            return input_required(r, (const input_request *[]){&in_sample}, 1, NULL);
        const char *said =
            json_string_value(json_object_get(json_object_get(v, "content"), "text"));
        snprintf(text, sizeof text, "Sampling result: %.400s", said ? said : "no response");
    } else {
        if (!(v = response_for(responses, &in_roots)))
            return input_required(r, (const input_request *[]){&in_roots}, 1, NULL);
        snprintf(text, sizeof text, "Found %zu root(s)",
                 json_array_size(json_object_get(v, "roots")));
    }
    return text_answer(r, text);
}

static int mrtr_stateful(const request *r, const char *tool, const json_t *responses,
                         const json_t *state)
{
    char text[1024];
    if (strcmp(tool, "test_input_required_result_request_state") == 0 ||
        strcmp(tool, "test_input_required_result_tampered_state") == 0) {
        const json_t *v = response_for(responses, &in_confirm);
        if (!v || !state_is(state, tool, 1))
            return asks_with_state(r, (const input_request *[]){&in_confirm}, 1, tool, 1, NULL);
        return text_answer(r, strstr(tool, "tampered") ? "integrity-ok: state verified"
                                                       : "state-ok: requestState validated");
    }
    if (strcmp(tool, "test_input_required_result_multiple_inputs") == 0) {
        const json_t *n = response_for(responses, &in_user_name);
        const json_t *g = response_for(responses, &in_greeting);
        const json_t *c = response_for(responses, &in_client_roots);
        if (!n || !g || !c || !state_is(state, tool, 1))
            return asks_with_state(
                r, (const input_request *[]){&in_user_name, &in_greeting, &in_client_roots}, 3,
                tool, 1, NULL);
        const char *said =
            json_string_value(json_object_get(json_object_get(g, "content"), "text"));
        snprintf(text, sizeof text, "Name: %.200s; Greeting: %.200s; Roots: %zu",
                 elicited(n, "name", "unknown"), said ? said : "Hello there!",
                 json_array_size(json_object_get(c, "roots")));
        return text_answer(r, text);
    }
    /* test_input_required_result_multi_round: a name, then a colour, the name kept in state. */
    const json_t *v1 = response_for(responses, &in_step1);
    const json_t *v2 = response_for(responses, &in_step2);
    if (state_is(state, tool, 1) && v1)
        return asks_with_state(r, (const input_request *[]){&in_step2}, 1, tool, 2,
                               elicited(v1, "name", "friend"));
    if (state_is(state, tool, 2) && v2) {
        snprintf(text, sizeof text, "Multi-round complete for %.200s who likes %.200s",
                 json_string_value(json_object_get(state, "name")), elicited(v2, "color", "?"));
        return text_answer(r, text);
    }
    return asks_with_state(r, (const input_request *[]){&in_step1}, 1, tool, 1, NULL);
}

/* 2026-07-28 logging: a request that names no io.modelcontextprotocol/logLevel gets no log
 * message; one that names debug or info gets this tool's info message on its stream. */
static int logging_tool(const request *r)
{
    const char *level =
        json_string_value(json_object_get(r->meta, "io.modelcontextprotocol/logLevel"));
    if (level && (strcmp(level, "debug") == 0 || strcmp(level, "info") == 0) && r->s->stream) {
        json_t *msg = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}}", "jsonrpc", "2.0", "method",
                                "notifications/message", "params", "level", "info", "logger",
                                "conformance-fixture", "data", "Logging evaluated at level info");
        if (msg)
            r->s->stream->notify(r->s->stream->ctx, msg);
        json_decref(msg);
    }
    return text_answer(r, "Logging evaluated");
}

/* Asks only for what the client's capabilities allow (SEP-2322). */
static int mrtr_capabilities(const request *r, const json_t *responses)
{
    const json_t *caps = json_object_get(r->meta, META_CAPS);
    const input_request *qs[2];
    size_t n = 0;
    if (json_object_get(caps, "elicitation"))
        qs[n++] = &in_elicit_any;
    if (json_object_get(caps, "sampling"))
        qs[n++] = &in_sample_any;
    const json_t *got[2] = {NULL, NULL};
    size_t have = 0;
    for (size_t i = 0; i < n; i++)
        have += (got[i] = response_for(responses, qs[i])) != NULL;
    if (n == 0)
        return text_answer(r, "No supported capabilities declared");
    if (have < n)
        return asks_with_state(r, qs, n, "test_input_required_result_capabilities", 1, NULL);
    return text_answer(r, n == 2 ? "capabilities-ok: received elicit_input,sample_input"
                          : qs[0] == &in_elicit_any ? "capabilities-ok: received elicit_input"
                                                    : "capabilities-ok: received sample_input");
}

/* --- the 2026-07-28-only tools ------------------------------------------------------------ */

static const struct {
    const char *name, *description, *schema;
} stateless_tools[] = {
    {"test_missing_capability", "Needs the client's sampling capability",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_input_required_result_elicitation",
     "input_required: asks the client for a name (elicitation)",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_input_required_result_sampling", "input_required: asks the client for a sampling",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_input_required_result_list_roots", "input_required: asks the client for its roots",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_input_required_result_request_state",
     "input_required: asks for a confirmation with a requestState",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_input_required_result_multiple_inputs", "input_required: asks three things at once",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_input_required_result_multi_round", "input_required: asks in two rounds",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_input_required_result_tampered_state",
     "input_required: a signed requestState, refused when altered",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_input_required_result_capabilities",
     "input_required: asks only what the client's capabilities allow",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_trigger_tool_change", "Announces a tools list change to listening clients",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_trigger_prompt_change", "Announces a prompts list change to listening clients",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_streaming_elicitation",
     "Asks the client for a value with input_required, never with a request of its own",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_logging_tool",
     "Logs one info message, only when the request's _meta asks for a log level it passes",
     "{\"type\":\"object\",\"properties\":{}}"},
    {"test_custom_header", "Takes a region also sent as the Mcp-Param-Region header (SEP-2243)",
     "{\"type\":\"object\",\"properties\":{\"region\":{\"type\":\"string\","
     "\"x-mcp-header\":\"Region\"}},\"required\":[\"region\"]}"},
};

void mcp_stateless_tools(json_t *list)
{
    for (size_t i = 0; i < sizeof stateless_tools / sizeof *stateless_tools; i++)
        json_array_append_new(list, json_pack("{s:s, s:s, s:o}", "name", stateless_tools[i].name,
                                              "description", stateless_tools[i].description,
                                              "inputSchema",
                                              json_loads(stateless_tools[i].schema, 0, NULL)));
}

/* The schema of a 2026-07-28-only tool, or NULL. */
static const char *stateless_schema(const char *name)
{
    for (size_t i = 0; name && i < sizeof stateless_tools / sizeof *stateless_tools; i++)
        if (strcmp(name, stateless_tools[i].name) == 0)
            return stateless_tools[i].schema;
    return NULL;
}

static int call_stateless_tool(const request *r, const char *name)
{
    const json_t *responses = json_object_get(r->params, "inputResponses");
    if (json_object_get(r->params, "inputResponses") && !json_is_object(responses))
        return fail(r->out, 200, r->id, MCP_INVALID_PARAMS, "inputResponses must be an object",
                    NULL);
    bool tampered = false;
    json_t *state = request_state(r, &tampered);
    int rc;
    if (tampered)
        rc = fail(r->out, 200, r->id, MCP_INVALID_PARAMS, "requestState integrity check failed",
                  NULL);
    else if (strcmp(name, "test_missing_capability") == 0)
        rc = json_object_get(json_object_get(r->meta, META_CAPS), "sampling")
                 ? text_answer(r, "Success")
                 : fail(r->out, 400, r->id, MISSING_CLIENT_CAPABILITY,
                        "Missing required client capability: sampling",
                        json_pack("{s:{s:{}}}", "requiredCapabilities", "sampling"));
    else if (strcmp(name, "test_input_required_result_capabilities") == 0)
        rc = mrtr_capabilities(r, responses);
    else if (strcmp(name, "test_logging_tool") == 0)
        rc = logging_tool(r);
    else if (strcmp(name, "test_streaming_elicitation") == 0)
        rc = response_for(responses, &in_elicit_any)
                 ? text_answer(r, "Streaming complete")
                 : input_required(r, (const input_request *[]){&in_elicit_any}, 1, NULL);
    else if (strcmp(name, "test_trigger_tool_change") == 0 ||
             strcmp(name, "test_trigger_prompt_change") == 0) {
        r->out->changed = strstr(name, "tool") ? MCP_CHANGED_TOOLS : MCP_CHANGED_PROMPTS;
        rc = text_answer(r, "Mutation triggered");
    } else if (strcmp(name, "test_custom_header") == 0) {
        const char *region =
            json_string_value(json_object_get(json_object_get(r->params, "arguments"), "region"));
        char text[300];
        snprintf(text, sizeof text, "Region: %.200s", region ? region : "");
        rc = text_answer(r, text);
    } else if (strstr(name, "_elicitation") || strstr(name, "_sampling") ||
               strstr(name, "_list_roots"))
        rc = mrtr_simple(r, name, responses);
    else
        rc = mrtr_stateful(r, name, responses, state);
    json_decref(state);
    return rc;
}

/* --- methods ------------------------------------------------------------------------------ */

/* The methods of the tasks extension (SEP-2663); tasks/result and tasks/list are not among
 * them (the extension removed them): those are unknown methods like any other. */
static bool is_task_method(const char *m)
{
    return strcmp(m, "tasks/get") == 0 || strcmp(m, "tasks/update") == 0 ||
           strcmp(m, "tasks/cancel") == 0;
}

static bool declared_tasks(const request *r)
{
    return mcp_tasks_declared(json_object_get(r->meta, META_CAPS));
}

/* tasks/get, tasks/update, tasks/cancel: only for a client that declares the extension in this
 * request (-32021 otherwise, before the task is looked up); the fixture's tasks belong to no
 * session. */
static int task_method(const request *r)
{
    if (!declared_tasks(r)) {
        json_t *e = mcp_tasks_missing(r->method);
        return e ? answer(r->out, 400, r->id, NULL, e) : -1;
    }
    json_t *result = NULL, *error = NULL;
    int rc = mcp_tasks_request("", r->method, r->params, &result, &error);
    return finish(r, rc, result, error);
}

static int discover(const request *r)
{
    return complete(
        r, json_pack("{s:[s], s:{s:{s:b}, s:{s:b}, s:{}, s:{}, s:{s:{}}}, s:{s:{s:s, s:s}}}",
                     "supportedVersions", STATELESS_VERSION, "capabilities", "tools", "listChanged",
                     1, "prompts", "listChanged", 1, "resources", "completions", "extensions",
                     MCP_TASKS_EXTENSION, "_meta", "io.modelcontextprotocol/serverInfo", "name",
                     "charter-mcp-conformance-fixture", "version", charter_version()));
}

static int prompt_get(const request *r)
{
    const char *name = json_string_value(json_object_get(r->params, "name"));
    if (name && strcmp(name, "test_input_required_result_prompt") == 0) {
        const json_t *v = response_for(json_object_get(r->params, "inputResponses"), &in_context);
        if (!v)
            return input_required(r, (const input_request *[]){&in_context}, 1, NULL);
        char text[512];
        snprintf(text, sizeof text, "Prompt with context: %.400s",
                 elicited(v, "context", "unknown"));
        return complete(r, json_pack("{s:[{s:s, s:{s:s, s:s}}]}", "messages", "role", "user",
                                     "content", "type", "text", "text", text));
    }
    json_t *result = NULL, *error = NULL;
    int rc = mcp_fixture_prompt(r->params, &result, &error);
    return finish(r, rc, result, error);
}

static int prompts_list(const request *r)
{
    json_t *list = mcp_fixture_prompts();
    if (list)
        json_array_append_new(list, json_pack("{s:s, s:s}", "name",
                                              "test_input_required_result_prompt", "description",
                                              "input_required: asks the client for a context"));
    return complete(r, json_pack("{s:o}", "prompts", list));
}

static int tools_call(const request *r)
{
    const char *name = json_string_value(json_object_get(r->params, "name"));
    if (stateless_schema(name))
        return call_stateless_tool(r, name);
    json_t *result = NULL, *error = NULL;
    int rc = mcp_fixture_task_call(r->params, declared_tasks(r), &result, &error);
    if (rc == 1 && error &&
        json_integer_value(json_object_get(error, "code")) == MCP_MISSING_CLIENT_CAPABILITY)
        return answer(r->out, 400, r->id, NULL, error);
    if (rc == 0)
        rc = mcp_fixture_call(r->s, r->params, true, &result, &error);
    return finish(r, rc < 0 ? -1 : 0, result, error);
}

/* subscriptions/listen: the acknowledgement is the stream's first message; the transport keeps
 * the stream and sends it the list changes the filter asked for. */
static int listen(const request *r)
{
    const json_t *want = json_object_get(r->params, "notifications");
    mcp_stateless_answer *out = r->out;
    out->listen = true;
    out->listen_tools = json_is_true(json_object_get(want, "toolsListChanged"));
    out->listen_prompts = json_is_true(json_object_get(want, "promptsListChanged"));
    if (json_is_string(r->id))
        snprintf(out->subscription, sizeof out->subscription, "%s", json_string_value(r->id));
    else
        snprintf(out->subscription, sizeof out->subscription, "%" JSON_INTEGER_FORMAT,
                 json_integer_value(r->id));
    json_t *honoured = json_object();
    if (honoured && out->listen_tools)
        json_object_set_new(honoured, "toolsListChanged", json_true());
    if (honoured && out->listen_prompts)
        json_object_set_new(honoured, "promptsListChanged", json_true());
    json_t *ack = json_pack("{s:s, s:s, s:{s:{s:s}, s:o}}", "jsonrpc", "2.0", "method",
                            "notifications/subscriptions/acknowledged", "params", "_meta",
                            "io.modelcontextprotocol/subscriptionId", out->subscription,
                            "notifications", honoured);
    out->status = 200;
    out->reply = ack ? json_dumps(ack, JSON_COMPACT) : NULL;
    json_decref(ack);
    return out->reply ? 0 : -1;
}

static int dispatch(const request *r)
{
    static const char *const removed[] = {"initialize", "ping", "logging/setLevel",
                                          "resources/subscribe", "resources/unsubscribe"};
    const char *m = r->method;
    json_t *result = NULL, *error = NULL;
    if (strcmp(m, "server/discover") == 0)
        return discover(r);
    if (strcmp(m, "tools/list") == 0)
        return complete(r, json_pack("{s:o}", "tools", mcp_fixture_tools(true)));
    if (strcmp(m, "tools/call") == 0)
        return tools_call(r);
    if (strcmp(m, "prompts/list") == 0)
        return prompts_list(r);
    if (strcmp(m, "prompts/get") == 0)
        return prompt_get(r);
    if (strcmp(m, "resources/list") == 0)
        return complete(r, json_pack("{s:o}", "resources", mcp_fixture_resources()));
    if (strcmp(m, "resources/templates/list") == 0)
        return complete(r, json_pack("{s:o}", "resourceTemplates", mcp_fixture_templates()));
    if (strcmp(m, "resources/read") == 0) {
        int rc = mcp_fixture_read(r->params, &result, &error);
        return finish(r, rc, result, error);
    }
    if (strcmp(m, "completion/complete") == 0)
        return complete(
            r, json_pack("{s:{s:[], s:i, s:b}}", "completion", "values", "total", 0, "hasMore", 0));
    if (strcmp(m, "subscriptions/listen") == 0)
        return listen(r);
    if (is_task_method(m))
        return task_method(r);
    char msg[160];
    snprintf(msg, sizeof msg, "Method not found: %.100s", m);
    for (size_t i = 0; i < sizeof removed / sizeof *removed; i++)
        if (strcmp(m, removed[i]) == 0)
            snprintf(msg, sizeof msg, "Method not found: %s is not part of %s", m,
                     STATELESS_VERSION);
    return fail(r->out, 404, r->id, MCP_METHOD_NOT_FOUND, msg, NULL);
}

/* --- headers (SEP-2243) ------------------------------------------------------------------- */

/* v without the optional whitespace around it (RFC 9110 5.5), into buf. */
static const char *trim(const char *v, char *buf, size_t n)
{
    while (*v == ' ' || *v == '\t')
        v++;
    size_t len = strlen(v);
    while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    snprintf(buf, n, "%.*s", (int)len, v);
    return buf;
}

/* Strict base64 (padding required, standard alphabet) of in into out; -1 when invalid. */
static int base64_decode(const char *in, size_t len, char *out, size_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (len % 4 != 0 || len / 4 * 3 >= n)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        unsigned v = 0;
        int pad = 0;
        for (size_t k = 0; k < 4; k++) {
            const char *p = in[i + k] ? strchr(alphabet, in[i + k]) : NULL;
            if (in[i + k] == '=' && i + 4 == len && k >= 2) {
                pad++;
                v <<= 6;
                continue;
            }
            if (!p || pad)
                return -1;
            v = v << 6 | (unsigned)(p - alphabet);
        }
        out[o++] = (char)(v >> 16);
        if (pad < 2)
            out[o++] = (char)(v >> 8 & 0xff);
        if (pad < 1)
            out[o++] = (char)(v & 0xff);
    }
    out[o] = '\0';
    return 0;
}

/* Whether the Mcp-Param header value v names value: "=?base64?...?=" is decoded (and must be
 * valid), anything else is literal. */
static bool param_matches(const char *v, const char *value)
{
    char buf[1024], dec[1024];
    trim(v, buf, sizeof buf);
    size_t n = strlen(buf);
    if (n >= 11 && strncmp(buf, "=?base64?", 9) == 0 && strcmp(buf + n - 2, "?=") == 0) {
        if (base64_decode(buf + 9, n - 11, dec, sizeof dec) != 0)
            return false;
        return strcmp(dec, value) == 0;
    }
    return strcmp(buf, value) == 0;
}

/* Mcp-Param-* headers of a tools/call: every string argument the tool's schema marks with
 * x-mcp-header must come as that header, with the same value. */
static const char *check_params(const request *r, const mcp_headers *h)
{
    const char *schema_text =
        stateless_schema(json_string_value(json_object_get(r->params, "name")));
    json_t *schema = schema_text ? json_loads(schema_text, 0, NULL) : NULL;
    const json_t *args = json_object_get(r->params, "arguments");
    const char *key, *why = NULL;
    json_t *def;
    json_object_foreach(json_object_get(schema, "properties"), key, def)
    {
        const char *suffix = json_string_value(json_object_get(def, "x-mcp-header"));
        const char *value = json_string_value(json_object_get(args, key));
        if (!suffix || !value)
            continue;
        char name[128];
        snprintf(name, sizeof name, "Mcp-Param-%s", suffix);
        const char *v = h->get(h->ctx, name);
        if (!v || !param_matches(v, value)) {
            why = v ? "Mcp-Param header does not match the argument"
                    : "Mcp-Param header missing for an argument the tool sends as a header";
            break;
        }
    }
    json_decref(schema);
    return why;
}

/* The standard headers against the body: NULL, or why they do not match. */
static const char *check_headers(const request *r, const mcp_headers *h)
{
    char buf[1024];
    const char *m = h->get(h->ctx, "Mcp-Method");
    if (!m || strcmp(trim(m, buf, sizeof buf), r->method) != 0)
        return m ? "Mcp-Method header does not match the method" : "Mcp-Method header missing";
    const char *field =
        strcmp(r->method, "tools/call") == 0 || strcmp(r->method, "prompts/get") == 0 ? "name"
        : strcmp(r->method, "resources/read") == 0                                    ? "uri"
        : is_task_method(r->method)                                                   ? "taskId"
                                                                                      : NULL;
    const char *want = field ? json_string_value(json_object_get(r->params, field)) : NULL;
    const char *n = h->get(h->ctx, "Mcp-Name");
    if (want && (!n || strcmp(trim(n, buf, sizeof buf), want) != 0))
        return n ? "Mcp-Name header does not match the body" : "Mcp-Name header missing";
    return strcmp(r->method, "tools/call") == 0 ? check_params(r, h) : NULL;
}

/* --- the envelope ------------------------------------------------------------------------- */

static bool legacy(const char *v)
{
    for (size_t i = 0; v && i < sizeof legacy_versions / sizeof *legacy_versions; i++)
        if (strcmp(v, legacy_versions[i]) == 0)
            return true;
    return false;
}

/* The envelope's checks, in the order 2026-07-28 names them; 0 with r ready, 1 answered. */
static int check_envelope(request *r, const char *header, const mcp_headers *h, int *rc)
{
    const json_t *pv = json_object_get(r->meta, META_VERSION);
    const char *why = NULL;
    *rc = 0;
    if (!header)
        *rc =
            fail(r->out, 400, r->id, HEADER_MISMATCH, "Missing MCP-Protocol-Version header", NULL);
    else if (!json_is_object(r->meta) || !json_is_string(pv) ||
             !json_is_object(json_object_get(r->meta, META_CAPS)))
        *rc = fail(r->out, 400, r->id, MCP_INVALID_PARAMS,
                   "Invalid params: _meta needs " META_VERSION " and " META_CAPS, NULL);
    else if (strcmp(header, json_string_value(pv)) != 0)
        *rc = fail(r->out, 400, r->id, HEADER_MISMATCH,
                   "MCP-Protocol-Version header does not match _meta", NULL);
    else if (strcmp(header, STATELESS_VERSION) != 0)
        *rc = fail(r->out, 400, r->id, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                   json_pack("{s:[s], s:s}", "supported", STATELESS_VERSION, "requested", header));
    else if ((why = check_headers(r, h)))
        *rc = fail(r->out, 400, r->id, HEADER_MISMATCH, why, NULL);
    else
        return 0;
    return 1;
}

int mcp_stateless_handle(mcp_session *s, const char *body, size_t len, const mcp_headers *h,
                         mcp_stateless_answer *out)
{
    memset(out, 0, sizeof *out);
    json_t *msg = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
    const json_t *params = json_object_get(msg, "params");
    const json_t *meta = json_object_get(params, "_meta");
    const char *header = h->get(h->ctx, "MCP-Protocol-Version");
    char hv[64];
    if (header)
        header = trim(header, hv, sizeof hv);
    if ((!header && !meta) || (!meta && legacy(header))) {
        json_decref(msg);
        return 1; /* a session's request, or an initialize */
    }
    request r = {json_object_get(msg, "id"),
                 json_string_value(json_object_get(msg, "method")),
                 params,
                 meta,
                 out,
                 s};
    int rc = 0;
    if (!msg || !json_is_object(msg))
        rc = fail(out, 400, NULL, MCP_PARSE_ERROR, "Parse error", NULL);
    else if (!r.method || !r.id)
        out->status = 202; /* a notification or a response: nothing to answer */
    else if (check_envelope(&r, header, h, &rc) == 0)
        rc = dispatch(&r);
    json_decref(msg);
    return rc;
}
