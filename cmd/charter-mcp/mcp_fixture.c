/*
 * mcp_fixture.c - the conformance fixture of charter-mcp (--conformance-fixture): a test mode,
 * not a charter step. It serves the tools, resources, prompts, logging and completions that the
 * official MCP conformance suite's server scenarios name (test_simple_text, test://static-text,
 * test_simple_prompt, ...), with the behaviour each scenario expects, so that the suite can
 * check charter-mcp's protocol and transport code (mcp_jsonrpc.c, mcp_http.c, mcp_stateless.c)
 * end to end. Nothing here reaches charterd or gates anything; the fixture is never started by
 * the ordinary options.
 *
 * One table of tools, one of resources, one of prompts. Answers are the same in a 2025-11-25
 * session and in a 2026-07-28 stateless request, except where the revisions differ: a session's
 * tools may ask the client (sampling, elicitation) over the answer's stream; a stateless tool
 * answers InputRequiredResult instead (input_required), and stateless results carry resultType
 * and caching hints (mcp_stateless.c adds them).
 */
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

/* A 1x1 PNG and a minimal WAV, as the suite's scenarios expect some image and audio. */
#define FIXTURE_PNG                                                                                \
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJg" \
    "gg=="
#define FIXTURE_WAV "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
/* How long a tool waits for the client's answer to its sampling or elicitation request. */
#define FIXTURE_ASK_TIMEOUT_MS 30000

typedef struct {
    mcp_session *s;
    const json_t *params; /* the request's params (may be NULL) */
    const json_t *args;   /* params.arguments (may be NULL) */
    bool stateless;       /* a 2026-07-28 request */
} fixture_call;

/* A tool: its name, description, input schema (JSON text) and its answer. The answer is a
 * CallToolResult, or an InputRequiredResult (stateless only), or NULL with *error set to a
 * JSON-RPC error object (new reference). */
typedef struct {
    const char *name;
    const char *description;
    const char *schema;
    bool stateless_only; /* listed and called in 2026-07-28 requests only */
    bool session_only;   /* needs a session's stream (asks the client, or cuts the stream) */
    json_t *(*call)(const fixture_call *c, json_t **error);
} fixture_tool;

static json_t *text_result(const char *text)
{
    return json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);
}

static json_t *error_object(int code, const char *message, json_t *data)
{
    json_t *e = json_pack("{s:i, s:s}", "code", code, "message", message);
    if (e && data)
        json_object_set_new(e, "data", data);
    else
        json_decref(data);
    return e;
}

/* --- tools that answer at once ----------------------------------------------------------- */

static json_t *tool_simple_text(const fixture_call *c, json_t **error)
{
    (void)c;
    (void)error;
    return text_result("This is a simple text response for testing.");
}

static json_t *tool_image(const fixture_call *c, json_t **error)
{
    (void)c;
    (void)error;
    return json_pack("{s:[{s:s, s:s, s:s}]}", "content", "type", "image", "data", FIXTURE_PNG,
                     "mimeType", "image/png");
}

static json_t *tool_audio(const fixture_call *c, json_t **error)
{
    (void)c;
    (void)error;
    return json_pack("{s:[{s:s, s:s, s:s}]}", "content", "type", "audio", "data", FIXTURE_WAV,
                     "mimeType", "audio/wav");
}

static json_t *tool_embedded(const fixture_call *c, json_t **error)
{
    (void)c;
    (void)error;
    return json_pack("{s:[{s:s, s:{s:s, s:s, s:s}}]}", "content", "type", "resource", "resource",
                     "uri", "test://embedded-resource", "mimeType", "text/plain", "text",
                     "This is an embedded resource content.");
}

static json_t *tool_mixed(const fixture_call *c, json_t **error)
{
    (void)c;
    (void)error;
    return json_pack("{s:[{s:s, s:s}, {s:s, s:s, s:s}, {s:s, s:{s:s, s:s, s:s}}]}", "content",
                     "type", "text", "text", "Multiple content types test:", "type", "image",
                     "data", FIXTURE_PNG, "mimeType", "image/png", "type", "resource", "resource",
                     "uri", "test://mixed-content-resource", "mimeType", "application/json", "text",
                     "{\"test\":\"data\",\"value\":123}");
}

static json_t *tool_error(const fixture_call *c, json_t **error)
{
    (void)c;
    (void)error;
    json_t *r = text_result("This tool intentionally returns an error for testing");
    if (r)
        json_object_set_new(r, "isError", json_true());
    return r;
}

static json_t *tool_schema_2020_12(const fixture_call *c, json_t **error)
{
    (void)error;
    char *args = json_dumps(c->args ? c->args : json_object(), JSON_COMPACT | JSON_SORT_KEYS);
    char text[1024];
    snprintf(text, sizeof text, "JSON Schema 2020-12 tool called with: %.900s", args ? args : "{}");
    free(args);
    return text_result(text);
}

/* --- tools that send notifications on the answer's stream -------------------------------- */

static void notify(const fixture_call *c, json_t *msg)
{
    if (msg && c->s->stream)
        c->s->stream->notify(c->s->stream->ctx, msg);
    json_decref(msg);
}

static json_t *tool_logging(const fixture_call *c, json_t **error)
{
    (void)error;
    static const char *const lines[] = {"Tool execution started", "Tool processing data",
                                        "Tool execution completed"};
    for (size_t i = 0; i < 3; i++)
        notify(c, json_pack("{s:s, s:s, s:{s:s, s:s, s:s}}", "jsonrpc", "2.0", "method",
                            "notifications/message", "params", "level", "info", "logger",
                            "conformance-fixture", "data", lines[i]));
    return text_result("Tool with logging executed successfully");
}

/* The request's progress token (string or integer), or NULL. */
static const json_t *progress_token(const json_t *params)
{
    const json_t *t = json_object_get(json_object_get(params, "_meta"), "progressToken");
    return json_is_string(t) || json_is_integer(t) ? t : NULL;
}

static json_t *tool_progress(const fixture_call *c, json_t **error)
{
    (void)error;
    const json_t *token = progress_token(c->params);
    for (int p = 0; token && p <= 100; p += 50) {
        char msg[64];
        snprintf(msg, sizeof msg, "Completed step %d of 100", p);
        notify(c, json_pack("{s:s, s:s, s:{s:O, s:i, s:i, s:s}}", "jsonrpc", "2.0", "method",
                            "notifications/progress", "params", "progressToken", token, "progress",
                            p, "total", 100, "message", msg));
    }
    if (!token)
        return text_result("0");
    if (json_is_string(token))
        return text_result(json_string_value(token));
    char text[32];
    snprintf(text, sizeof text, "%" JSON_INTEGER_FORMAT, json_integer_value(token));
    return text_result(text);
}

/* Ends the answer's stream before the result exists: the client gets the result by resuming
 * the stream (GET with Last-Event-ID), as SEP-1699's polling describes. */
static json_t *tool_reconnection(const fixture_call *c, json_t **error)
{
    (void)error;
    if (c->s->stream)
        c->s->stream->cut(c->s->stream->ctx);
    return text_result("Reconnection test completed successfully. If you received this, the "
                       "client properly reconnected after stream closure.");
}

/* --- tools that ask the client (a session's stream) -------------------------------------- */

/* Sends method with params (stolen) to the client and waits for its answer: the response's
 * result (new reference), or NULL with why set. */
static json_t *ask(const fixture_call *c, const char *method, json_t *params, const char **why)
{
    *why = "the client cannot be asked on this transport";
    if (!params || !c->s->stream || !c->s->stream->ask) {
        json_decref(params);
        return NULL;
    }
    json_t *req =
        json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params", params);
    json_t *resp = req ? c->s->stream->ask(c->s->stream->ctx, req, FIXTURE_ASK_TIMEOUT_MS) : NULL;
    json_t *result = json_incref(json_object_get(resp, "result"));
    *why = resp ? "the client answered with an error" : "the client did not answer in time";
    json_decref(resp);
    return result;
}

static json_t *tool_sampling(const fixture_call *c, json_t **error)
{
    (void)error;
    const char *prompt = json_string_value(json_object_get(c->args, "prompt"));
    const char *why = NULL;
    json_t *r =
        ask(c, "sampling/createMessage",
            json_pack("{s:[{s:s, s:{s:s, s:s}}], s:i}", "messages", "role", "user", "content",
                      "type", "text", "text", prompt ? prompt : "", "maxTokens", 100),
            &why);
    char text[1024];
    const char *said = json_string_value(json_object_get(json_object_get(r, "content"), "text"));
    if (r)
        snprintf(text, sizeof text, "LLM response: %.900s", said ? said : "No response");
    else
        snprintf(text, sizeof text, "Sampling not supported or error: %s", why);
    json_decref(r);
    return text_result(text);
}

/* Asks elicitation/create with message and schema (JSON text); the answer's text is prefix,
 * the action and the content. */
static json_t *elicit(const fixture_call *c, const char *message, const char *schema,
                      const char *prefix)
{
    const char *why = NULL;
    json_t *r = ask(
        c, "elicitation/create",
        json_pack("{s:s, s:o}", "message", message, "requestedSchema", json_loads(schema, 0, NULL)),
        &why);
    char text[2048];
    if (r) {
        const json_t *content = json_object_get(r, "content");
        char *body = json_dumps(content ? content : json_object(), JSON_COMPACT);
        const char *action = json_string_value(json_object_get(r, "action"));
        snprintf(text, sizeof text, "%s: action=%s, content=%.1800s", prefix, action ? action : "",
                 body ? body : "{}");
        free(body);
    } else {
        snprintf(text, sizeof text, "Elicitation not supported or error: %s", why);
    }
    json_decref(r);
    return text_result(text);
}

static json_t *tool_elicitation(const fixture_call *c, json_t **error)
{
    (void)error;
    const char *message = json_string_value(json_object_get(c->args, "message"));
    return elicit(c, message ? message : "",
                  "{\"type\":\"object\",\"properties\":{\"response\":{\"type\":\"string\","
                  "\"description\":\"User's response\"}},\"required\":[\"response\"]}",
                  "User response");
}

static json_t *tool_elicitation_defaults(const fixture_call *c, json_t **error)
{
    (void)error;
    return elicit(
        c, "Please review and update the form fields with defaults",
        "{\"type\":\"object\",\"properties\":{"
        "\"name\":{\"type\":\"string\",\"description\":\"User name\",\"default\":\"John Doe\"},"
        "\"age\":{\"type\":\"integer\",\"description\":\"User age\",\"default\":30},"
        "\"score\":{\"type\":\"number\",\"description\":\"User score\",\"default\":95.5},"
        "\"status\":{\"type\":\"string\",\"description\":\"User status\",\"enum\":[\"active\","
        "\"inactive\",\"pending\"],\"default\":\"active\"},"
        "\"verified\":{\"type\":\"boolean\",\"description\":\"Verification status\","
        "\"default\":true}},\"required\":[]}",
        "Elicitation completed");
}

static json_t *tool_elicitation_enums(const fixture_call *c, json_t **error)
{
    (void)error;
    return elicit(
        c, "Please select options from the enum fields",
        "{\"type\":\"object\",\"properties\":{"
        "\"untitledSingle\":{\"type\":\"string\",\"description\":\"Select one option\","
        "\"enum\":[\"option1\",\"option2\",\"option3\"]},"
        "\"titledSingle\":{\"type\":\"string\",\"description\":\"Select one option with titles\","
        "\"oneOf\":[{\"const\":\"value1\",\"title\":\"First Option\"},{\"const\":\"value2\","
        "\"title\":\"Second Option\"},{\"const\":\"value3\",\"title\":\"Third Option\"}]},"
        "\"legacyEnum\":{\"type\":\"string\",\"description\":\"Select one option (legacy)\","
        "\"enum\":[\"opt1\",\"opt2\",\"opt3\"],\"enumNames\":[\"Option One\",\"Option Two\","
        "\"Option Three\"]},"
        "\"untitledMulti\":{\"type\":\"array\",\"description\":\"Select multiple options\","
        "\"minItems\":1,\"maxItems\":3,\"items\":{\"type\":\"string\",\"enum\":[\"option1\","
        "\"option2\",\"option3\"]}},"
        "\"titledMulti\":{\"type\":\"array\",\"description\":\"Select multiple options with "
        "titles\",\"minItems\":1,\"maxItems\":3,\"items\":{\"anyOf\":[{\"const\":\"value1\","
        "\"title\":\"First Choice\"},{\"const\":\"value2\",\"title\":\"Second Choice\"},"
        "{\"const\":\"value3\",\"title\":\"Third Choice\"}]}}},\"required\":[]}",
        "Elicitation completed");
}

/* --- the table ---------------------------------------------------------------------------- */

#define NO_ARGS "{\"type\":\"object\",\"properties\":{}}"

/* SEP-1613 and SEP-2106: the 2020-12 vocabulary, kept whole through tools/list. */
#define SCHEMA_2020_12                                                                             \
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"type\":\"object\","           \
    "\"$defs\":{\"address\":{\"$anchor\":\"addressDef\",\"type\":\"object\",\"properties\":{"      \
    "\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"}}}},"                          \
    "\"properties\":{\"name\":{\"type\":\"string\"},\"address\":{\"$ref\":\"#/$defs/address\"},"   \
    "\"contactMethod\":{\"type\":\"string\",\"enum\":[\"phone\",\"email\"]},"                      \
    "\"phone\":{\"type\":\"string\"},\"email\":{\"type\":\"string\"}},"                            \
    "\"allOf\":[{\"anyOf\":[{\"required\":[\"phone\"]},{\"required\":[\"email\"]}]}],"             \
    "\"if\":{\"properties\":{\"contactMethod\":{\"const\":\"phone\"}},"                            \
    "\"required\":[\"contactMethod\"]},\"then\":{\"required\":[\"phone\"]},"                       \
    "\"else\":{\"required\":[\"email\"]},\"additionalProperties\":false}"

static const fixture_tool tools[] = {
    {"test_simple_text", "Tests simple text content response", NO_ARGS, false, false,
     tool_simple_text},
    {"test_image_content", "Tests image content response", NO_ARGS, false, false, tool_image},
    {"test_audio_content", "Tests audio content response", NO_ARGS, false, false, tool_audio},
    {"test_embedded_resource", "Tests embedded resource content response", NO_ARGS, false, false,
     tool_embedded},
    {"test_multiple_content_types",
     "Tests response with multiple content types (text, image, resource)", NO_ARGS, false, false,
     tool_mixed},
    {"test_tool_with_logging", "Tests tool that emits log messages during execution", NO_ARGS,
     false, true, tool_logging},
    {"test_tool_with_progress", "Tests tool that reports progress notifications", NO_ARGS, false,
     false, tool_progress},
    {"test_error_handling", "Tests error response handling", NO_ARGS, false, false, tool_error},
    {"test_reconnection",
     "Tests SSE stream disconnection and client reconnection (SEP-1699): the stream closes "
     "before the result, which comes to the client that resumes with Last-Event-ID",
     NO_ARGS, false, true, tool_reconnection},
    {"test_sampling", "Tests server-initiated sampling (LLM completion request)",
     "{\"type\":\"object\",\"properties\":{\"prompt\":{\"type\":\"string\",\"description\":"
     "\"The prompt to send to the LLM\"}},\"required\":[\"prompt\"]}",
     false, true, tool_sampling},
    {"test_elicitation", "Tests server-initiated elicitation (user input request)",
     "{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\",\"description\":"
     "\"The message to show the user\"}},\"required\":[\"message\"]}",
     false, true, tool_elicitation},
    {"test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034",
     NO_ARGS, false, true, tool_elicitation_defaults},
    {"test_elicitation_sep1330_enums",
     "Tests elicitation with enum schema improvements per SEP-1330", NO_ARGS, false, true,
     tool_elicitation_enums},
    {"json_schema_2020_12_tool",
     "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)", SCHEMA_2020_12,
     false, false, tool_schema_2020_12},
};

/* The stateless tools (input_required and the rest of 2026-07-28) live in mcp_stateless.c and
 * are reached through mcp_fixture_stateless_tool. */

static json_t *tool_json(const char *name, const char *description, const char *schema)
{
    json_error_t jerr;
    json_t *s = json_loads(schema, 0, &jerr);
    if (!s) {
        fprintf(stderr, "charter-mcp: fixture schema of %s: %s\n", name, jerr.text);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:o}", "name", name, "description", description, "inputSchema", s);
}

json_t *mcp_fixture_tools(bool stateless)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < sizeof tools / sizeof *tools; i++) {
        if ((stateless && tools[i].session_only) || (!stateless && tools[i].stateless_only))
            continue;
        json_array_append_new(list,
                              tool_json(tools[i].name, tools[i].description, tools[i].schema));
    }
    if (list && stateless) {
        mcp_stateless_tools(list);
        mcp_fixture_task_tools(list);
    }
    return list;
}

int mcp_fixture_call(mcp_session *s, const json_t *params, bool stateless, json_t **result,
                     json_t **error)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    const json_t *args = json_object_get(params, "arguments");
    fixture_call c = {s, params, args, stateless};
    *result = NULL;
    *error = NULL;
    for (size_t i = 0; name && i < sizeof tools / sizeof *tools; i++) {
        if (strcmp(name, tools[i].name) != 0 || (stateless && tools[i].session_only) ||
            (!stateless && tools[i].stateless_only))
            continue;
        *result = tools[i].call(&c, error);
        return *result || *error ? 0 : -1;
    }
    char msg[160];
    snprintf(msg, sizeof msg, "Unknown tool: %.100s", name ? name : "");
    *error = error_object(MCP_INVALID_PARAMS, msg, NULL);
    return *error ? 0 : -1;
}

/* --- resources ---------------------------------------------------------------------------- */

static const struct {
    const char *uri, *name, *title, *description, *mime;
    const char *text, *blob;
} resources[] = {
    {"test://static-text", "static-text", "Static Text Resource",
     "A static text resource for testing", "text/plain",
     "This is the content of the static text resource.", NULL},
    {"test://static-binary", "static-binary", "Static Binary Resource",
     "A static binary resource (image) for testing", "image/png", NULL, FIXTURE_PNG},
    {"test://watched-resource", "watched-resource", "Watched Resource",
     "A resource clients may subscribe to", "text/plain", "Watched resource content", NULL},
};

#define TEMPLATE_PREFIX "test://template/"
#define TEMPLATE_SUFFIX "/data"

json_t *mcp_fixture_resources(void)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < sizeof resources / sizeof *resources; i++)
        json_array_append_new(
            list, json_pack("{s:s, s:s, s:s, s:s, s:s}", "uri", resources[i].uri, "name",
                            resources[i].name, "title", resources[i].title, "description",
                            resources[i].description, "mimeType", resources[i].mime));
    return list;
}

json_t *mcp_fixture_templates(void)
{
    return json_pack(
        "[{s:s, s:s, s:s, s:s, s:s}]", "uriTemplate", TEMPLATE_PREFIX "{id}" TEMPLATE_SUFFIX,
        "name", "template", "title", "Resource Template", "description",
        "A resource template with parameter substitution", "mimeType", "application/json");
}

/* The id of a URI that matches test://template/{id}/data (one path segment), or NULL. */
static char *template_id(const char *uri)
{
    size_t lp = strlen(TEMPLATE_PREFIX), ls = strlen(TEMPLATE_SUFFIX), n = strlen(uri);
    if (n <= lp + ls || strncmp(uri, TEMPLATE_PREFIX, lp) != 0 ||
        strcmp(uri + n - ls, TEMPLATE_SUFFIX) != 0)
        return NULL;
    size_t idlen = n - lp - ls;
    if (memchr(uri + lp, '/', idlen))
        return NULL;
    char *id = malloc(idlen + 1);
    if (id) {
        memcpy(id, uri + lp, idlen);
        id[idlen] = '\0';
    }
    return id;
}

int mcp_fixture_read(const json_t *params, json_t **result, json_t **error)
{
    const char *uri = json_string_value(json_object_get(params, "uri"));
    *result = *error = NULL;
    for (size_t i = 0; uri && i < sizeof resources / sizeof *resources; i++) {
        if (strcmp(uri, resources[i].uri) != 0)
            continue;
        *result = json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType",
                            resources[i].mime, resources[i].text ? "text" : "blob",
                            resources[i].text ? resources[i].text : resources[i].blob);
        return *result ? 0 : -1;
    }
    char *id = uri ? template_id(uri) : NULL;
    if (id) {
        json_t *data =
            json_pack("{s:s, s:b, s:s+}", "id", id, "templateTest", 1, "data", "Data for ID: ", id);
        char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
        json_decref(data);
        free(id);
        if (text)
            *result = json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType",
                                "application/json", "text", text);
        free(text);
        return *result ? 0 : -1;
    }
    /* SEP-2164: an unknown URI is an error naming it, never an empty contents. */
    *error = error_object(MCP_INVALID_PARAMS, "Resource not found",
                          json_pack("{s:s}", "uri", uri ? uri : ""));
    return *error ? 0 : -1;
}

/* --- prompts ------------------------------------------------------------------------------ */

json_t *mcp_fixture_prompts(void)
{
    return json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s, s:[{s:s, s:s, s:b}, {s:s, s:s, s:b}]},"
                     " {s:s, s:s, s:s, s:[{s:s, s:s, s:b}]}, {s:s, s:s, s:s}]",
                     "name", "test_simple_prompt", "title", "Simple Test Prompt", "description",
                     "A simple prompt without arguments", "name", "test_prompt_with_arguments",
                     "title", "Prompt With Arguments", "description",
                     "A prompt with required arguments", "arguments", "name", "arg1", "description",
                     "First test argument", "required", 1, "name", "arg2", "description",
                     "Second test argument", "required", 1, "name",
                     "test_prompt_with_embedded_resource", "title", "Prompt With Embedded Resource",
                     "description", "A prompt that includes an embedded resource", "arguments",
                     "name", "resourceUri", "description", "URI of the resource to embed",
                     "required", 1, "name", "test_prompt_with_image", "title", "Prompt With Image",
                     "description", "A prompt that includes image content");
}

static json_t *prompt_messages(const char *name, const json_t *args, json_t **error)
{
    const char *a1 = json_string_value(json_object_get(args, "arg1"));
    const char *a2 = json_string_value(json_object_get(args, "arg2"));
    const char *uri = json_string_value(json_object_get(args, "resourceUri"));
    if (strcmp(name, "test_simple_prompt") == 0)
        return json_pack("[{s:s, s:{s:s, s:s}}]", "role", "user", "content", "type", "text", "text",
                         "This is a simple prompt for testing.");
    if (strcmp(name, "test_prompt_with_arguments") == 0 && a1 && a2) {
        char text[1024];
        snprintf(text, sizeof text, "Prompt with arguments: arg1='%.400s', arg2='%.400s'", a1, a2);
        return json_pack("[{s:s, s:{s:s, s:s}}]", "role", "user", "content", "type", "text", "text",
                         text);
    }
    if (strcmp(name, "test_prompt_with_embedded_resource") == 0 && uri)
        return json_pack("[{s:s, s:{s:s, s:{s:s, s:s, s:s}}}, {s:s, s:{s:s, s:s}}]", "role", "user",
                         "content", "type", "resource", "resource", "uri", uri, "mimeType",
                         "text/plain", "text", "Embedded resource content for testing.", "role",
                         "user", "content", "type", "text", "text",
                         "Please process the embedded resource above.");
    if (strcmp(name, "test_prompt_with_image") == 0)
        return json_pack("[{s:s, s:{s:s, s:s, s:s}}, {s:s, s:{s:s, s:s}}]", "role", "user",
                         "content", "type", "image", "data", FIXTURE_PNG, "mimeType", "image/png",
                         "role", "user", "content", "type", "text", "text",
                         "Please analyze the image above.");
    bool known = strcmp(name, "test_prompt_with_arguments") == 0 ||
                 strcmp(name, "test_prompt_with_embedded_resource") == 0;
    *error = error_object(MCP_INVALID_PARAMS,
                          known ? "Missing required prompt arguments" : "Prompt not found", NULL);
    return NULL;
}

int mcp_fixture_prompt(const json_t *params, json_t **result, json_t **error)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    *result = *error = NULL;
    json_t *messages =
        prompt_messages(name ? name : "", json_object_get(params, "arguments"), error);
    if (messages)
        *result = json_pack("{s:o}", "messages", messages);
    return *result || *error ? 0 : -1;
}

/* --- the session's methods ----------------------------------------------------------------- */

json_t *mcp_fixture_capabilities(void)
{
    return json_pack("{s:{s:b}, s:{s:b, s:b}, s:{s:b}, s:{}, s:{}}", "tools", "listChanged", 1,
                     "resources", "subscribe", 1, "listChanged", 1, "prompts", "listChanged", 1,
                     "logging", "completions");
}

/* The answer of method in a session: 0 with *result or *error set, 1 when method is none of
 * the fixture's, -1 when out of memory. */
static int session_method(mcp_session *s, const char *method, const json_t *params, json_t **result,
                          json_t **error)
{
    *result = *error = NULL;
    if (strcmp(method, "tools/list") == 0)
        *result = json_pack("{s:o}", "tools", mcp_fixture_tools(false));
    else if (strcmp(method, "tools/call") == 0)
        return mcp_fixture_call(s, params, false, result, error);
    else if (strcmp(method, "resources/list") == 0)
        *result = json_pack("{s:o}", "resources", mcp_fixture_resources());
    else if (strcmp(method, "resources/templates/list") == 0)
        *result = json_pack("{s:o}", "resourceTemplates", mcp_fixture_templates());
    else if (strcmp(method, "resources/read") == 0)
        return mcp_fixture_read(params, result, error);
    else if (strcmp(method, "prompts/list") == 0)
        *result = json_pack("{s:o}", "prompts", mcp_fixture_prompts());
    else if (strcmp(method, "prompts/get") == 0)
        return mcp_fixture_prompt(params, result, error);
    else if (strcmp(method, "completion/complete") == 0)
        *result =
            json_pack("{s:{s:[], s:i, s:b}}", "completion", "values", "total", 0, "hasMore", 0);
    else if (strcmp(method, "resources/subscribe") == 0 ||
             strcmp(method, "resources/unsubscribe") == 0 ||
             strcmp(method, "logging/setLevel") == 0)
        *result = json_object();
    else
        return 1;
    return *result ? 0 : -1;
}

int mcp_fixture_request(mcp_session *s, const json_t *id, const char *method, const json_t *params,
                        char **reply)
{
    json_t *result = NULL, *error = NULL;
    int rc = session_method(s, method, params, &result, &error);
    if (rc == 1)
        return 0;
    json_t *msg = rc == 0 ? json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
                                      result ? "result" : "error", result ? result : error)
                          : NULL;
    if (rc != 0) {
        json_decref(result);
        json_decref(error);
    }
    *reply = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    return 1;
}

/* --- signed request state (input_required) ------------------------------------------------ */

/* The key that signs requestState: drawn once, never leaves the process. */
static unsigned char state_key[32];
static bool state_key_ready;
static pthread_once_t state_key_once = PTHREAD_ONCE_INIT;

static void state_key_init(void)
{
    state_key_ready = RAND_bytes(state_key, sizeof state_key) == 1;
}

char *mcp_fixture_sign_state(const char *payload)
{
    pthread_once(&state_key_once, state_key_init);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned maclen = 0;
    if (!state_key_ready || !HMAC(EVP_sha256(), state_key, sizeof state_key,
                                  (const unsigned char *)payload, strlen(payload), mac, &maclen))
        return NULL;
    size_t n = strlen(payload);
    char *out = malloc(n + 2 * maclen + 2);
    if (!out)
        return NULL;
    for (unsigned i = 0; i < maclen; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
    out[2 * maclen] = '.';
    memcpy(out + 2 * maclen + 1, payload, n + 1);
    return out;
}

char *mcp_fixture_verify_state(const char *state)
{
    const char *dot = state ? strchr(state, '.') : NULL;
    if (!dot)
        return NULL;
    char *expect = mcp_fixture_sign_state(dot + 1);
    bool ok = expect && strlen(expect) == strlen(state) &&
              CRYPTO_memcmp(expect, state, strlen(state)) == 0;
    free(expect);
    return ok ? strdup(dot + 1) : NULL;
}
