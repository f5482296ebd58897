/*
 * mcp.h - charter-mcp, the MCP surface of charter: one workflow step (a role) served to an MCP
 * client over stdio or Streamable HTTP, every call translated into the Gate API of charterd
 * through libcharter. It holds no database access and no rule of its own: decisions come from
 * charterd; what it keeps is the translation and, per MCP session, which run and context the
 * session opened and which artifacts it was shown (the provenance of its outputs).
 *
 * Files: mcp_main.c (options, workflow, stdio loop), mcp_jsonrpc.c (JSON-RPC 2.0 and the MCP
 * lifecycle), mcp_tools.c (the tools of a step), mcp_live.c (observe and the step's tools with
 * arguments), mcp_downstream.c (the downstream MCP servers the workflow names, as their
 * client; mcp_downstream_http.c for those spoken to over Streamable HTTP), mcp_async.c (runs
 * charterd executes: start, wait, cancel, events, receipt; a run as a task), mcp_http.c
 * (Streamable HTTP on libmicrohttpd), mcp_tasks.c (the io.modelcontextprotocol/tasks
 * extension: tasks in memory), mcp_session.c (the external runs a session started, completed
 * when it ends).
 * mcp_fixture.c, mcp_stateless.c and mcp_fixture_tasks.c are the conformance fixture
 * (--conformance-fixture), a test mode that serves the official conformance suite's fixture
 * tools, resources and prompts in 2025-11-25 sessions and 2026-07-28 stateless requests instead
 * of a charter step.
 */
#ifndef CHARTER_MCP_H
#define CHARTER_MCP_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "charter.h"

/* Largest JSON-RPC message accepted on either transport (bytes); larger ones are refused with a
 * JSON-RPC error and never parsed. */
#define MCP_MAX_MESSAGE ((size_t)1024 * 1024)
/* Artifacts one session may have been shown; more is refused. */
#define MCP_MAX_SHOWN 256
/* Async runs one session may start and follow; more is refused. */
#define MCP_MAX_ASYNC_RUNS 16
/* External runs one session keeps to complete when it ends; starting one more completes the
 * oldest first. */
#define MCP_MAX_STARTED_RUNS 64

/* JSON-RPC 2.0 error codes (jsonrpc.org/specification). */
enum {
    MCP_PARSE_ERROR = -32700,
    MCP_INVALID_REQUEST = -32600,
    MCP_METHOD_NOT_FOUND = -32601,
    MCP_INVALID_PARAMS = -32602,
    MCP_INTERNAL_ERROR = -32603,
};

/* The largest message a downstream server may send (bytes): a larger answer stops the server
 * and its call's outcome is unknown. */
#define MCP_DOWNSTREAM_MAX_MESSAGE ((size_t)4 * 1024 * 1024)
#define MCP_DOWNSTREAM_MAX_MESSAGE_TEXT "4194304 bytes"
/* How long one call to a downstream server may take, unless its timeout_ms says otherwise. */
#define MCP_DOWNSTREAM_DEFAULT_TIMEOUT_MS 30000
/* Downstream servers one workflow may name (WORKFLOW_MAX_SERVERS). */
#define MCP_MAX_DOWNSTREAMS 16

/* One downstream MCP server (a "servers" entry of the workflow): the child process that runs a
 * command's server, or the session with a url's server (mcp_downstream_http.c). The lock
 * serializes every exchange with a child (one request in flight), and a url server's setup;
 * tools/call requests to a url server go out side by side, each on its own connection. */
typedef struct {
    const char *name;     /* the entry's key (owned by the workflow JSON) */
    const json_t *decl;   /* {command, args, env_from, timeout_ms} or {url, credential_env |
                             credential_file, timeout_ms} (borrowed) */
    pthread_mutex_t lock; /* held for each exchange with the child, and to change anything here */
    pid_t pid;            /* the running child, or 0 */
    int in_fd, out_fd;    /* its stdin (written) and stdout (read), -1 when none */
    char *buf;            /* what it wrote and was not yet read as a line (owned) */
    size_t len;
    bool http;           /* a url's server, spoken to over Streamable HTTP */
    char *session_id;    /* the Mcp-Session-Id it issued at initialize (owned), or NULL */
    char *auth;          /* "Authorization: Bearer ..." read at initialize (owned, wiped) */
    char protocol[16];   /* the MCP revision initialize agreed on, "" before */
    unsigned generation; /* counts the sessions dropped: a failed call drops only its own */
    json_int_t next_id;  /* the id of the last request sent */
    json_t *tools;       /* its tools by name, from the last tools/list (owned) */
} mcp_downstream;

/* The answer of a downstream tool call. text is malloc'd (the caller frees it). */
typedef struct {
    bool sent;          /* the request reached the server */
    bool answered;      /* it answered with a JSON-RPC error (the call failed, nothing done) */
    bool is_error;      /* the server answered with isError */
    char *text;         /* its text content, joined by newlines */
    size_t bytes;       /* strlen(text) */
    size_t other_items; /* content items that are not text (left out) */
    char error[512];    /* why the call failed, when it did */
} mcp_downstream_answer;

/* Where a request's handler sends messages before its answer, when the transport streams the
 * answer (Streamable HTTP's SSE). A session's stream is NULL whenever the answer is one JSON
 * message: nothing but the answer goes out then. */
typedef struct mcp_stream {
    void *ctx;
    /* Queues a notification (a JSON-RPC message, not stolen) on the answer's stream. */
    void (*notify)(void *ctx, const json_t *msg);
    /* Sends request (stolen; the transport sets its id) and waits at most timeout_ms for the
     * client's response. Returns the response message (new reference: result or error), or
     * NULL when none came (timeout, stream gone, out of memory). NULL when it cannot ask. */
    json_t *(*ask)(void *ctx, json_t *request, unsigned timeout_ms);
    /* Ends the answer's HTTP response now: what follows (the answer too) is kept for the client
     * that resumes the stream with Last-Event-ID. */
    void (*cut)(void *ctx);
} mcp_stream;

/* The role this process serves, fixed at start. Strings and json are owned by the server. */
typedef struct {
    charter_client *client;
    json_t *workflow;      /* the definition (docs/workflows.md) */
    const json_t *step;    /* its step object for the role */
    const char *step_name; /* the role */
    char version[80];      /* the workflow version runs are created with */
    bool first_step;       /* may start runs */
    bool last_step;        /* its sessions complete the runs they drove when they end */
    const char *next_step; /* the step that receives this one's output, or NULL */
    bool public_render;    /* output is rendered from public_fields */
    /* The downstream servers the step's tools are mapped onto (mcp_downstream.c). */
    mcp_downstream downstreams[MCP_MAX_DOWNSTREAMS];
    size_t n_downstreams;
    /* --conformance-fixture: no role, no charterd; mcp_fixture.c answers (step_name is NULL). */
    bool fixture;
} mcp_server;
/* Everything in mcp_server is set before serving starts and only read afterwards (but the
 * downstreams, each under its own lock), and
 * libcharter's client takes calls from any number of threads at once: HTTP sessions call tools
 * concurrently, each holding only its own mcp_session. */

/* What one MCP session holds. Everything here was set by charter-mcp from charterd's answers;
 * nothing is taken from the model. */
typedef struct {
    bool initialized;  /* initialize answered */
    char protocol[16]; /* negotiated protocol version */
    char run_id[130];
    char context_id[130];
    char *shown[MCP_MAX_SHOWN]; /* artifacts shown to this session (admitted by the gate) */
    size_t n_shown;
    char output_id[130];     /* the last output recorded by this session */
    char invocation_id[40];  /* of the last send, reused when the same send is asked again */
    char invocation_of[260]; /* "<output_id> <recipient>" that invocation ID was made for */
    /* Runs charterd executes that this session started (start_async_run): the only runs its
     * wait_run, cancel_run, run_events and run_receipt may name. */
    char async_runs[MCP_MAX_ASYNC_RUNS][130];
    size_t n_async_runs;
    /* The external runs this session started (start_run), oldest first: the host that drove
     * them is this session, so charter-mcp completes them (Runs/CompleteRun) when it ends. */
    char started_runs[MCP_MAX_STARTED_RUNS][130];
    size_t n_started_runs;
    mcp_stream *stream; /* set by the transport for one request whose answer it streams */
    /* The tasks extension: whom this session's tasks belong to (128 random bits, drawn at
     * initialize), whether its initialize declared the extension, and whether the request
     * being handled declared it (the session's or the request's own _meta). */
    char task_owner[33];
    bool tasks_extension;
    bool tasks_now;
} mcp_session;

/* Frees what a session holds and zeroes it. */
void mcp_session_reset(mcp_session *s);

/* --- a session's external runs (mcp_session.c) ---------------------------------------------- */

/* A run id as a session keeps it. */
typedef char mcp_run_id[130];

/* Records run_id (an id charterd gave, at most 128 characters), an external run s just
 * started, to complete when s ends; with MCP_MAX_STARTED_RUNS kept, the oldest is completed
 * first (mcp_complete_run). */
void mcp_started_add(mcp_server *srv, mcp_session *s, const char *run_id);
/* Moves the runs s started out of it: *runs (malloc'd, the caller frees; NULL when none) and
 * their count. With no memory for the copy the runs stay in s and 0 is returned (said on
 * stderr). */
size_t mcp_session_take_runs(mcp_session *s, mcp_run_id **runs);
/* The host's word that run_id is over: Runs/CompleteRun with the reason "charter-mcp: <why>",
 * and one line on stderr ("completed run R (why)", or why it was left open: a send held for a
 * human's approval, charterd unreachable). */
void mcp_complete_run(mcp_server *srv, const char *run_id, const char *why);
/* Ends s for good: completes the runs it started (why), then mcp_session_reset. */
void mcp_session_end(mcp_server *srv, mcp_session *s, const char *why);

/* Handles one raw JSON-RPC message (bytes as received). *reply is set to the JSON text of the
 * answer (owned by the caller, free()) or NULL when none is due (a notification, a response).
 * *was_initialize is set when the message was an accepted initialize request (the HTTP
 * transport then issues a session id). Returns 0, or -1 when out of memory. */
int mcp_jsonrpc_handle(mcp_server *srv, mcp_session *s, const char *buf, size_t len, char **reply,
                       bool *was_initialize);

/* A JSON-RPC error answer as text (owned by the caller), id may be NULL (JSON null). */
char *mcp_jsonrpc_error_text(const json_t *id, int code, const char *message);

/* Whether a protocol version string is one this server speaks. */
bool mcp_protocol_supported(const char *version);

/* The tools the role may call, as the MCP tools/list "tools" array (new reference). */
json_t *mcp_tools_list(const mcp_server *srv);

/* Calls one tool. *result is the MCP CallToolResult (new reference): refusals and argument
 * errors are results with isError true and structuredContent {decision, codes, witness}.
 * Returns 0, or MCP_INVALID_PARAMS for a name that is no tool of charter-mcp at all (a
 * protocol error per the MCP specification), or -1 when out of memory. */
int mcp_tools_call(mcp_server *srv, mcp_session *s, const char *name, const json_t *args,
                   json_t **result);

/* Tool results shared by mcp_tools.c and mcp_async.c. */
/* A result whose structuredContent is body (stolen) and text its JSON; NULL when out of memory. */
json_t *mcp_result(json_t *body, bool is_error);
/* A refusal result {decision: outcome, codes: [code], witness}. */
json_t *mcp_refusal(const char *outcome, const char *code, const char *witness);
/* A refusal for a failed charterd call (rc and its status). */
json_t *mcp_rpc_refusal(int rc, const charter_status *st);
/* {seq, kind, codes, witness[, outcome]} of an event (new reference). */
json_t *mcp_event_json(const Charter__V1__Event *e);

/* Input schemas shared by the tools: an id string (1 to 128 characters) described by what, and
 * a strict object of props (stolen) whose required fields are the NULL-terminated names
 * (required NULL: every property). NULL when out of memory. */
json_t *mcp_id_schema(const char *what);
json_t *mcp_object_schema(json_t *props, const char *const *required);

/* The async-run tools (mcp_async.c): schemas and calls, listed by mcp_tools.c's catalog. */
json_t *mcp_async_start_schema(const mcp_server *srv);
json_t *mcp_async_run_schema(const mcp_server *srv);
json_t *mcp_async_wait_schema(const mcp_server *srv);
json_t *mcp_async_cancel_schema(const mcp_server *srv);
json_t *mcp_async_events_schema(const mcp_server *srv);
/* start_async_run answers a task that follows the run (a CreateTaskResult, not a tool result)
 * when s->tasks_now: tasks/get reads the run from charterd, a run waiting for a human approval
 * is input_required (no answer approves it), tasks/cancel is CancelRun. */
json_t *mcp_async_start(mcp_server *srv, mcp_session *s, const json_t *args);
json_t *mcp_async_wait(mcp_server *srv, mcp_session *s, const json_t *args);
json_t *mcp_async_cancel(mcp_server *srv, mcp_session *s, const json_t *args);
json_t *mcp_async_events(mcp_server *srv, mcp_session *s, const json_t *args);
json_t *mcp_async_receipt(mcp_server *srv, mcp_session *s, const json_t *args);

/* Shared by mcp_tools.c and mcp_live.c. */
/* {decision, codes, witness} of a charterd decision (a missing one is unknown). */
json_t *mcp_decision_json(const Charter__V1__Decision *d);
/* Metadata and hashes of an artifact; its content only when with_content. */
json_t *mcp_artifact_json(const Charter__V1__Artifact *a, bool with_content);
/* NULL when args names the context this session opened, else the refusal. */
json_t *mcp_need_context(const mcp_server *srv, const mcp_session *s, const json_t *args);
/* Whether artifact id was shown to the session; adds one (0, or -1 when full or no memory). */
bool mcp_shown_has(const mcp_session *s, const char *id);
int mcp_shown_add(mcp_session *s, const char *id);
/* Checks args against a tool's input schema: 0, or -1 with err naming the field and rule. */
int mcp_check_args(const json_t *schema, const json_t *args, char *err, size_t errlen);

/* The live tools of the step (mcp_live.c): "observe" when the step has an observed resource,
 * and one tool per tool with arguments the step lists, named as the workflow names it. */
json_t *mcp_live_list(const mcp_server *srv);
/* Calls live tool name: 1 with *result set (NULL when out of memory), or 0 when name is no
 * live tool of the step. */
int mcp_live_call(mcp_server *srv, mcp_session *s, const char *name, const json_t *args,
                  json_t **result);

/* Starts the downstream servers the step's tools are mapped onto, initializes each and lists
 * its tools, and logs one line to stderr for each mapped tool its server no longer declares as
 * mapped. A server that does not start is logged and started again at its next call. Returns 0,
 * or -1 (printed) when out of memory. */
int mcp_downstream_open(mcp_server *srv);
/* Stops every downstream server. */
void mcp_downstream_close(mcp_server *srv);
/* Before a mapped tool is invoked: its server running (started anew if it died), the tool
 * still declared as the workflow maps it, and the agent's values (given: {name: {value, ...}})
 * typed as its input schema asks. Returns NULL with *call_args the arguments of the downstream
 * call (new reference), or the refusal (DOWNSTREAM_UNAVAILABLE, DOWNSTREAM_SCHEMA_CHANGED,
 * ARGUMENT_INVALID); nothing was sent to the server either way. */
json_t *mcp_downstream_prepare(mcp_server *srv, const char *tool, const json_t *decl,
                               const json_t *given, json_t **call_args);
/* Calls the mapped downstream tool with call_args (stolen), once: never again when it fails.
 * Returns 0 with out filled, or -1 with out->error saying why (out->sent: the request reached
 * the server, so what it did is unknown). A server that died, timed out or answered with more
 * than MCP_DOWNSTREAM_MAX_MESSAGE bytes is stopped. */
int mcp_downstream_call(mcp_server *srv, const json_t *decl, json_t *call_args,
                        mcp_downstream_answer *out);

/* --- the tasks extension (mcp_tasks.c) ----------------------------------------------------- */

/* io.modelcontextprotocol/tasks (SEP-2663): a tools/call may be answered with a task the client
 * polls (tasks/get), feeds input (tasks/update) and stops (tasks/cancel). */
#define MCP_TASKS_EXTENSION "io.modelcontextprotocol/tasks"
/* The client did not declare a capability the request needs (revision 2026-07-28's
 * MissingRequiredClientCapabilityError; for HTTP the status is 400). */
#define MCP_MISSING_CLIENT_CAPABILITY (-32021)
/* Tasks held at once by this process; a task-supporting call beyond it is answered without a
 * task. */
#define MCP_MAX_TASKS 1024

typedef enum {
    MCP_TASK_WORKING,
    MCP_TASK_INPUT_REQUIRED,
    MCP_TASK_COMPLETED, /* final, like the two below */
    MCP_TASK_FAILED,
    MCP_TASK_CANCELLED,
} mcp_task_status;

typedef struct mcp_task mcp_task;

/* What drives a task (its work). Every hook is optional and called without the tasks' lock, so
 * it may call the mcp_task_* setters below; work is the pointer given to mcp_task_new. */
typedef struct {
    /* Before a task that has not ended is shown: brings it up to date from where its work lives
     * (a run's task asks charterd). 0, or -1 with *error set (a JSON-RPC error object, new
     * reference) to answer the request with; the task is then left as it was. */
    int (*refresh)(mcp_task *t, void *work, json_t **error);
    /* tasks/cancel of a task that has not ended: asks the work to stop; the task's status follows
     * when it does. 0, or -1 with *error set. Without this hook the task is cancelled at once. */
    int (*cancel)(mcp_task *t, void *work, json_t **error);
    /* tasks/update answered the last outstanding input request: answers holds every answer the
     * task received, by key (borrowed). The task is working again. */
    void (*answered)(mcp_task *t, void *work, const json_t *answers);
    /* The task is freed: frees work, after waiting for any callback of it still running. */
    void (*release)(void *work);
} mcp_task_ops;

/* A new task of owner ("": whoever holds its id), working, kept ttl_ms milliseconds from now,
 * polled at most every poll_ms. Returns it with one reference for the caller (mcp_task_unref),
 * or NULL when out of memory, without random bytes, or when MCP_MAX_TASKS tasks are held (then
 * work stays the caller's); else ops and work are the task's (work released with it). */
mcp_task *mcp_task_new(const char *owner, long long ttl_ms, long long poll_ms,
                       const mcp_task_ops *ops, void *work);
void mcp_task_unref(mcp_task *t);
/* The CreateTaskResult of t (resultType "task", the task's fields flat; new reference). */
json_t *mcp_task_created(mcp_task *t);

/* The setters a task's work calls (each takes the tasks' lock). A final status is final: once
 * completed, failed or cancelled, they change nothing (and free what they were given). */
/* Working, with the outstanding input requests withdrawn (never asked again). */
void mcp_task_working(mcp_task *t, const char *message);
/* Asks the client method with params (stolen) under key, which no other request of the task
 * ever had: the task is input_required. Returns true when key is outstanding (asked now or
 * earlier and unanswered), false when it was answered or withdrawn (nothing asked again). */
bool mcp_task_ask(mcp_task *t, const char *key, const char *method, json_t *params,
                  const char *message);
/* Completed with result (a CallToolResult, stolen; isError true for a tool's own error). */
void mcp_task_complete(mcp_task *t, json_t *result, const char *message);
/* Failed with error (a JSON-RPC error object {code, message}, stolen): a protocol error. */
void mcp_task_fail(mcp_task *t, json_t *error, const char *message);
void mcp_task_cancelled(mcp_task *t, const char *message);

/* Whether client capabilities (a ClientCapabilities object, may be NULL) declare the
 * extension. */
bool mcp_tasks_declared(const json_t *capabilities);
/* The -32021 error object a request that needs the extension gets without it (new
 * reference; data.requiredCapabilities names the extension). */
json_t *mcp_tasks_missing(const char *what);
/* tasks/get, tasks/update or tasks/cancel of owner's tasks ("": the tasks of no session):
 * 0 with *result (resultType "complete") or *error (a JSON-RPC error object) set, new
 * references; 1 when method is none of the three (tasks/result and tasks/list are not part of
 * the extension); -1 when out of memory. The caller checked the extension was declared. */
int mcp_tasks_request(const char *owner, const char *method, const json_t *params, json_t **result,
                      json_t **error);
/* The server is stopping: work that waits notices it within a second (mcp_tasks_stopping). */
void mcp_tasks_stop(void);
bool mcp_tasks_stopping(void);
/* Forgets every task (their work stopped and released). */
void mcp_tasks_shutdown(void);

/* --- the conformance fixture (mcp_fixture.c, mcp_stateless.c, mcp_fixture_tasks.c) -------- */

/* The fixture's capabilities for initialize (new reference). */
json_t *mcp_fixture_capabilities(void);
/* Answers method of an initialized fixture session: 1 with *reply set to the JSON text of the
 * answer (owned; NULL when out of memory), or 0 when method is none of the fixture's. */
int mcp_fixture_request(mcp_session *s, const json_t *id, const char *method, const json_t *params,
                        char **reply);
/* The fixture's lists (new references). stateless: the tools of a 2026-07-28 request, which
 * has no stream to ask the client on (and gets the input_required tools instead). */
json_t *mcp_fixture_tools(bool stateless);
json_t *mcp_fixture_resources(void);
json_t *mcp_fixture_templates(void);
json_t *mcp_fixture_prompts(void);
/* tools/call, resources/read and prompts/get: 0 with *result (a result object) or *error (a
 * JSON-RPC error object) set (new references), -1 when out of memory. */
int mcp_fixture_call(mcp_session *s, const json_t *params, bool stateless, json_t **result,
                     json_t **error);
int mcp_fixture_read(const json_t *params, json_t **result, json_t **error);
int mcp_fixture_prompt(const json_t *params, json_t **result, json_t **error);
/* A requestState for payload: an HMAC-SHA256 under a key drawn at start, then the payload
 * (owned, NULL when out of memory). verify gives the payload back (owned) when the state is
 * one this process signed, else NULL. */
char *mcp_fixture_sign_state(const char *payload);
char *mcp_fixture_verify_state(const char *state);
/* Appends the 2026-07-28-only tools (input_required, the list-change triggers, a tool with a
 * custom header) to list. */
void mcp_stateless_tools(json_t *list);
/* The fixture's tools of the tasks extension (mcp_fixture_tasks.c, 2026-07-28 requests only):
 * greet (never a task), slow_compute and protocol_error_job (a task when the client declared
 * the extension), failing_job, confirm_delete, multi_input and test_tool_with_task (only as a
 * task: -32021 without it). Appends them to list. */
void mcp_fixture_task_tools(json_t *list);
/* tools/call of one of them: 1 with *result or *error set (new references), 0 when name is none
 * of them, -1 when out of memory. declared: the request's client capabilities name the
 * extension. */
int mcp_fixture_task_call(const json_t *params, bool declared, json_t **result, json_t **error);

/* A request's headers, looked up by name (case-insensitively), for mcp_stateless_handle. */
typedef struct {
    const char *(*get)(void *ctx, const char *name);
    void *ctx;
} mcp_headers;

enum { MCP_CHANGED_TOOLS = 1, MCP_CHANGED_PROMPTS = 2 };

/* The answer of a 2026-07-28 request and what the transport does besides sending it. */
typedef struct {
    unsigned status; /* HTTP status */
    char *reply;     /* the JSON-RPC message (owned), NULL with 202 */
    /* subscriptions/listen: reply is the acknowledgement, the first message of a stream the
     * transport keeps open and sends the list changes asked for, tagged with subscription. */
    bool listen, listen_tools, listen_prompts;
    char subscription[64];
    int changed; /* MCP_CHANGED_*: a list changed, for the streams listening to it */
} mcp_stateless_answer;

/* Serves one POST without a session in fixture mode when it is a 2026-07-28 request (it
 * carries params._meta or an MCP-Protocol-Version header other than a session revision's):
 * 0 with out filled, 1 when it is not one (the session path serves it), -1 when out of memory.
 * s is a scratch session whose stream, when set, takes the notifications of a tool call. */
int mcp_stateless_handle(mcp_session *s, const char *body, size_t len, const mcp_headers *h,
                         mcp_stateless_answer *out);

/* Defaults of the HTTP transport's limits (the --http-* options). */
#define MCP_HTTP_DEFAULT_MAX_CONNECTIONS 64
#define MCP_HTTP_DEFAULT_MAX_SESSIONS 64
#define MCP_HTTP_DEFAULT_SESSIONS_PER_CREDENTIAL 16
#define MCP_HTTP_DEFAULT_HEADER_TIMEOUT_S 10
#define MCP_HTTP_DEFAULT_BODY_TIMEOUT_S 30
#define MCP_HTTP_DEFAULT_IDLE_TIMEOUT_S 30

typedef struct {
    const char *addr;                 /* "127.0.0.1:PORT", "localhost:PORT" or "[::1]:PORT" */
    const char *const *tokens;        /* the bearer credentials clients may present (borrowed) */
    size_t n_tokens;                  /* 0: no credential required (--http-no-auth) */
    unsigned max_connections;         /* connections open at once (each its own thread) */
    unsigned max_sessions;            /* sessions held at once */
    unsigned sessions_per_credential; /* sessions one credential may hold at once */
    unsigned header_timeout_s;        /* seconds for a request's line and headers (0: no limit) */
    unsigned body_timeout_s;          /* seconds for its body once the headers are in (0: none) */
    unsigned idle_timeout_s;          /* seconds without a byte either way closes (0: none) */
} mcp_http_opts;

/* Serves Streamable HTTP until SIGINT/SIGTERM. Returns 0 or -1 (printed). */
int mcp_http_serve(mcp_server *srv, const mcp_http_opts *o);

#endif
