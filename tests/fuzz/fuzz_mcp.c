/*
 * fuzz_mcp.c - libFuzzer target for charter-mcp's JSON-RPC and MCP message handling
 * (cmd/charter-mcp/mcp_jsonrpc.c, cmd/charter-mcp/mcp_tools.c) up to the first call to charterd.
 *
 * The server serves the report step of the reference workflow (deploy/workflows/procurement.json)
 * with a client whose charterd never answers (an ipc address nobody listens on, a 1 ms
 * deadline), so every tool call reaches the point where it would ask charterd and fails there as
 * UNAVAILABLE: what is fuzzed is everything before it (framing, JSON-RPC validation, the MCP
 * lifecycle, tool lookup, argument schemas, smuggling checks). Each input is one session: an
 * initialize (first byte odd) or none, then the input as one raw message. Every reply must be a
 * JSON object text.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

static mcp_server srv;

static int fuzz_mcp_setup(void)
{
    json_error_t jerr;
    srv.workflow =
        json_load_file(CHARTER_SOURCE_DIR "/deploy/workflows/procurement.json", 0, &jerr);
    if (srv.workflow == NULL)
        return -1;
    const json_t *steps = json_object_get(srv.workflow, "steps");
    size_t i;
    const json_t *st;
    json_array_foreach(steps, i, st)
    {
        const char *name = json_string_value(json_object_get(st, "name"));
        if (name != NULL && strcmp(name, "report") == 0) {
            srv.step = st;
            srv.step_name = name;
            srv.first_step = i == 0;
            srv.public_render = json_object_get(st, "public_fields") != NULL &&
                                json_object_get(st, "public_template") != NULL;
        }
    }
    if (srv.step == NULL)
        return -1;
    snprintf(srv.version, sizeof srv.version, "%064d", 0);
    srv.next_step = NULL;
    charter_options opts;
    charter_options_init(&opts);
    opts.timeout_ms = 1;
    return charter_client_open("ipc:///nonexistent/charter-fuzz.sock", "fuzz-token", &opts,
                               &srv.client) == 0
               ? 0
               : -1;
}

static void fuzz_mcp_expect_object(const char *reply)
{
    if (reply == NULL)
        return;
    json_error_t jerr;
    json_t *j = json_loads(reply, 0, &jerr);
    if (!json_is_object(j))
        abort(); /* every answer is one JSON-RPC object */
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready = -2;
    if (ready == -2)
        ready = fuzz_mcp_setup();
    if (ready != 0 || size == 0)
        return 0;
    mcp_session s;
    memset(&s, 0, sizeof s);
    char *reply = NULL;
    bool init = false;
    if (data[0] & 1) {
        static const char hello[] =
            "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
            "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
            "\"clientInfo\":{\"name\":\"fuzz\",\"version\":\"1\"}}}";
        if (mcp_jsonrpc_handle(&srv, &s, hello, sizeof hello - 1, &reply, &init) == 0)
            fuzz_mcp_expect_object(reply);
        free(reply);
        reply = NULL;
    }
    if (mcp_jsonrpc_handle(&srv, &s, (const char *)data + 1, size - 1, &reply, &init) == 0)
        fuzz_mcp_expect_object(reply);
    free(reply);
    mcp_session_reset(&s);
    return 0;
}
