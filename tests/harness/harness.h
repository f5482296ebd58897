/*
 * harness.h - what charter's tests share: the test Redis, per-process graph names, a real
 * charterd process, raw RPCs over NNG and a digest of a graph's keys.
 */

/*
 * Everything is real: the Redis named by CHARTER_TEST_REDIS (CTest's fixture test_redis starts
 * one on a unix socket: tests/redis_fixture.sh), the charterd binary built from this tree
 * (CHARTERD_PATH), NNG req0 sockets carrying RpcRequest/RpcResponse exactly as any client
 * would. Functions that cannot do their job print why on stderr; those that say "aborts" end
 * the test program, because no test can mean anything without them.
 *
 * Typical use:
 *     char g[64];
 *     harness_graph_name(g, sizeof g, "rpc");           // "t_rpc_<pid>"
 *     store *st = harness_store_open(g);                // library loaded, graph checked empty
 *     harness_charterd d;
 *     harness_charterd_opts o = {.graph = g};
 *     if (harness_charterd_start(&o, &d) != 0) ...     // waits until Health/Check answers
 *     harness_response r;
 *     harness_rpc(d.tcp_url, "/charter.v1.Health/Check", NULL, NULL, 0, 2000, &r);
 *     ...
 *     CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);    // SIGTERM, exit status 0
 *     harness_graph_drop(g);
 */
#ifndef CHARTER_HARNESS_H
#define CHARTER_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "charter.h"
#include "charter.pb-c.h"
#include "db/store.h"
#include "policy/workflow.h"

/* Fixed tokens every test charterd is started with (>= 24 characters, different). */
#define HARNESS_OPERATOR_TOKEN "test-operator-token-6c1f0e2a9b7d4e55"
#define HARNESS_VIEWER_TOKEN "test-viewer-token-3a8e5d1c7f2b9a64"

/* Method names as they travel in RpcRequest.method. */
#define HARNESS_HEALTH "/charter.v1.Health/Check"

/* The test Redis URL from CHARTER_TEST_REDIS ("unix:///path/redis.sock" or
 * "tcp://host:port"). Aborts with an explanation when it is unset. */
const char *harness_redis_url(void);

/* Writes "t_<test>_<pid>" into buf (n bytes): unique per test process, a valid graph name. */
void harness_graph_name(char *buf, size_t n, const char *test);

/* Opens a store on the test Redis for graph, loads the query library compiled into charterd
 * and checks the graph is empty (harness_require_empty_graph). Aborts on any failure. The
 * caller closes it with store_close. */
store *harness_store_open(const char *graph);

/* For the suites that call the gates in-process: configures the event log (evlog_configure)
 * with the evaluator fingerprint of the built-in workflow, as charterd does at start-up.
 * Returns 0, or 2 (a suite setup's failure status) after printing why, naming suite. */
int harness_evlog_builtin(const char *suite);

/* For the suites that drive the gates in-process: claims st's graph's integrity mode and
 * installs the built-in workflow there, as charterd does at start-up; the installed version
 * into *kept. Returns 0, or -1 after printing why, naming suite. */
int harness_install_builtin(store *st, const workflow **kept, const char *suite);

/* Aborts unless charter_graph_stats reports zero keys for st's graph: a test never runs
 * against a graph that already holds data. */
void harness_require_empty_graph(store *st);

/* Deletes every key of graph in the test Redis (end of a test program). Returns the number of
 * keys deleted, or -1 when Redis could not be reached. */
long harness_graph_drop(const char *graph);

/* Hex SHA-256 over graph's keys and their contents in a canonical form (keys sorted; per key
 * its type, then the value: string bytes, hash fields sorted, set members sorted, sorted set
 * in rank order with scores, list in order; plus whether it has a TTL). Equal digests mean
 * nothing in the graph changed. Values are read by type rather than with DUMP because DUMP
 * of an unchanged hash-table-encoded set can differ after an internal rehash. Returns 0, or
 * -1 when Redis could not be reached. */
int harness_graph_digest(const char *graph, char hex[65]);

/* Makes the test Redis hold every client's commands for ms milliseconds (CLIENT PAUSE ms ALL):
 * a cheap way to keep a call in flight. Other tests sharing the Redis are only delayed.
 * Returns 0 or -1. */
int harness_redis_pause(int ms);

/* Ends a pause early (CLIENT UNPAUSE). Returns 0 or -1. */
int harness_redis_unpause(void);

/* --- a real charterd --------------------------------------------------------------------- */

typedef struct {
    const char *graph;    /* --graph (required) */
    bool embedded;        /* no --redis: charterd starts its own redis-server in data_dir */
    const char *data_dir; /* --data-dir (required when embedded) */
    const char *const *extra_args; /* more options, e.g. {"--workers", "1"} */
    size_t n_extra;
    const char *operator_token; /* NULL: HARNESS_OPERATOR_TOKEN; "": variable left unset */
    const char *viewer_token;   /* NULL: HARNESS_VIEWER_TOKEN; "": variable left unset */
    int wait_ms;                /* how long to wait for Health (0: 20000) */
    /* The integrity key charterd starts with: keyless (--no-integrity-key is added) unless the
     * extra arguments name a key option (--integrity-key, --no-integrity-key,
     * --adopt-integrity-key) or default_key is set: then charterd's own default, the key of
     * its data folder (give data_dir). A suite that relies on a key says so. */
    bool default_key;
    bool http; /* also --http 127.0.0.1:0: HTTP/JSON and gRPC on a port the system picks */
} harness_charterd_opts;

typedef struct {
    pid_t pid;              /* 0 once stopped */
    char dir[128];          /* private temporary folder (log and ipc socket) */
    char tcp_url[80];       /* tcp://127.0.0.1:<the port charterd was given by the system> */
    char http_hostport[64]; /* 127.0.0.1:<port> with opts.http, else "" */
    char ipc_url[192];      /* ipc://<dir>/c.sock */
    char log_path[192];     /* charterd's stdout and stderr */
} harness_charterd;

/* Starts CHARTERD_PATH with --graph, --listen tcp://127.0.0.1:0, --listen ipc://<dir>/c.sock,
 * --redis <test Redis> (unless embedded), --no-integrity-key (see default_key), --http 127.0.0.1:0
 * with opts.http, the tokens in its environment and the extra arguments, then waits for the line of
 * its log that says where it serves (the ports the system picked: no port is chosen here and given
 * away before charterd binds it) and until Health/Check answers over NNG. Returns 0, or -1
 * (charterd exited or never answered; its log is printed and it is killed). charterd gets SIGTERM
 * when the thread that started it ends (Linux parent-death signal), so a crashed test leaves none
 * behind: start it from the main thread. */
int harness_charterd_start(const harness_charterd_opts *o, harness_charterd *out);

/* From the first line of the log at path that holds marker, the "host:port" after the first
 * "://" that follows the marker (a URL's authority) into out. Returns 0, 1 when no line holds
 * both yet, or -1 when the log cannot be read or out is too small. */
int harness_log_address(const char *path, const char *marker, char *out, size_t n);

/* SIGTERM, then waits (at most 30 s, then SIGKILL). Returns charterd's exit status (0 for a
 * clean stop), 128 + signal when it was killed by one, or -1. Removes the private folder when
 * the exit status is 0. */
int harness_charterd_stop(harness_charterd *d);

/* SIGKILL and reap (a crash). The private folder is kept. */
void harness_charterd_kill(harness_charterd *d);

/* Runs CHARTERD_PATH with argv args (n of them, without the program name), followed by
 * --no-integrity-key unless args name a key option (as harness_charterd_start does), and env
 * (NULL-ended "NAME=value" list replacing the environment, PATH kept) to completion, at most
 * timeout_ms.
 * Returns its exit status (-1 if it could not be run or did not end), with up to n_output-1
 * bytes of what it printed (stdout then stderr) in output. */
int harness_charterd_run(const char *const *args, size_t n, const char *const *env, int timeout_ms,
                         char *output, size_t n_output);

/* --- raw calls --------------------------------------------------------------------------- */

typedef struct {
    int code;         /* RpcResponse.code */
    char *message;    /* RpcResponse.message (malloc'd, never NULL after a reply) */
    uint8_t *payload; /* RpcResponse.payload (malloc'd) */
    size_t payload_len;
} harness_response;

/* One call: an RpcRequest with method, the payload bytes, "authorization: Bearer <token>"
 * when token is not NULL, sent on a fresh req0 socket dialed to url; waits timeout_ms for the
 * reply. Returns 0 with *out filled, or the NNG error (e.g. NNG_ETIMEDOUT, NNG_ECONNREFUSED).
 * Free with harness_response_free. */
int harness_rpc(const char *url, const char *method, const char *token, const void *payload,
                size_t len, int timeout_ms, harness_response *out);

/* Same with the envelope given as raw bytes (for malformed-envelope tests).
 * Caution: when charterd drops the connection in the middle of a large send (a message above
 * twice --max-message), NNG 1.5.2's reaper can hang for good in this process, and every later
 * nng_close with it; make such calls from a separate process (see test_rpc.c). */
int harness_rpc_raw(const char *url, const void *bytes, size_t len, int timeout_ms,
                    harness_response *out);

/* Packs msg with protobuf-c and calls harness_rpc. */
int harness_rpc_msg(const char *url, const char *method, const char *token,
                    const ProtobufCMessage *msg, int timeout_ms, harness_response *out);

void harness_response_free(harness_response *r);

/* Health/Check over url. Returns 0 when it answered code 0 (then *out, if not NULL, is the
 * unpacked response, freed with charter__v1__health_response__free_unpacked), else -1. */
int harness_health(const char *url, int timeout_ms, Charter__V1__HealthResponse **out);

/* harness_health, asked again at once until its database field reads database ("up" or
 * "down") or within_ms milliseconds have passed; returns as harness_health with the last
 * answer. Health answers from a serving status at most 250 ms old (server/rpc/serving.h), so a
 * database that just died or came back shows there within that bound, not on the first call. */
int harness_health_until(const char *url, const char *database, int within_ms,
                         Charter__V1__HealthResponse **out);

/* --- races and faults -------------------------------------------------------------------- */

/* Packs msg into an RpcRequest for method (with the bearer token when not NULL), sends it on a
 * fresh req0 socket dialed to url (never resent), waits linger_ms without reading the reply,
 * then closes the socket: a caller that goes away after sending, so the reply is lost. Returns
 * 0 once the request was handed to NNG, or the NNG error. */
int harness_rpc_abandon(const char *url, const char *method, const char *token,
                        const ProtobufCMessage *msg, int linger_ms);

/* A redis-server of the test's own (not the shared test Redis), on a unix socket in a private
 * folder, with the append-only file fsynced on every write, so that data and the loaded query
 * library survive a SIGKILL and a restart on the same socket. A suite that pauses the database
 * or fills it can run on one of these (point CHARTER_TEST_REDIS at its url while it runs), so
 * that it neither delays other test programs nor is disturbed by their pauses. */
typedef struct {
    pid_t pid;           /* 0 when not running */
    char dir[128];       /* /tmp/charter-redis-XXXXXX; "" before the first start */
    char sock[192];      /* <dir>/redis.sock */
    char url[208];       /* unix://<dir>/redis.sock */
    char log_path[192];  /* <dir>/redis.log */
    bool no_persistence; /* set before starting: no append-only file, so writes are faster
                            and nothing survives a restart */
} harness_private_redis;

/* Starts the server (zero r first; a later call on a killed r restarts it in the same folder
 * and on the same socket) and waits until it answers PING (at most 10 s). Returns 0 or -1. */
int harness_private_redis_start(harness_private_redis *r);

/* SIGKILL and reap (a crash); the folder, its append-only file and the URL stay. */
void harness_private_redis_kill(harness_private_redis *r);

/* SIGTERM (SIGKILL after 10 s), reap, and remove the folder. */
void harness_private_redis_stop(harness_private_redis *r);

/* The pid of the newest child of parent whose command name is name ("redis-server"), or 0. */
pid_t harness_child_pid(pid_t parent, const char *name);

/* CLIENT PAUSE ms WRITE on the test Redis: commands that may write (every query function not
 * flagged no-writes, e.g. charter_commit_delivery) wait; read-only functions run on. Returns
 * 0 or -1. End it early with harness_redis_unpause. */
int harness_redis_pause_writes(int ms);

/* Deletes the set and sorted-set keys of graph in the test Redis (its edges and indexes)
 * whose names end with one of suffixes (n of them, e.g. ":derived_from"); n == 0 deletes every
 * set and sorted set of the graph. Node hashes and strings are never touched. Returns the
 * number of keys deleted, or -1 when Redis could not be reached. */
long harness_graph_delete_edges(const char *graph, const char *const *suffixes, size_t n);

/* The number of keys of graph in the test Redis whose TYPE is type ("hash", "set", ...), or
 * -1. */
long harness_graph_count_type(const char *graph, const char *type);

/* Watches graph in the test Redis for a run created after the call, and the moment that run's
 * status is status (e.g. "running") with at least min_deliveries deliveries committed, sends
 * CLIENT PAUSE pause_ms ALL on the same connection, so whatever charterd does next waits: a
 * way to stop a run in the middle of a step. run_id (129 bytes) gets the run's id. Returns 0
 * once paused, 1 when the run went past that point unobserved (it ended first), -1 on
 * timeout_ms or a Redis failure. */
int harness_pause_on_run(const char *graph, const char *status, long min_deliveries, int pause_ms,
                         int timeout_ms, char run_id[129]);

/* Deletes every key of graph in the test Redis, in batches and in no particular order: for a
 * graph of tens of thousands of keys, where harness_graph_drop's sorted walk is slow. Returns
 * the number of keys deleted, or -1 when Redis could not be reached. */
long harness_graph_drop_large(const char *graph);

/* Runs a Lua script (EVAL) on the test Redis with graph's key prefix "charter:{<graph>}" as its
 * only key and the n arguments, for a test that must shape a large graph quickly (bypassing
 * the query library's per-call checks: the script must follow queries/README.md's key
 * schema). *out (may be NULL) gets the script's integer reply. Returns 0, or -1 when Redis
 * could not be reached or the script failed or did not answer an integer. */
int harness_graph_eval(const char *graph, const char *script, const char *const *args, size_t n,
                       long long *out);

/* Like harness_rpc_msg, with RpcRequest.timeout_ms = deadline_ms (the server's bound on the
 * whole call, shared by its database commands) independent of how long this side waits
 * (timeout_ms): a call whose commands time out inside charterd while its caller keeps waiting for
 * the answer. */
int harness_rpc_deadline(const char *url, const char *method, const char *token,
                         const ProtobufCMessage *msg, uint32_t deadline_ms, int timeout_ms,
                         harness_response *out);

/* --- shared by the suites ----------------------------------------------------------------- */

/* Opens a libcharter client of url with token (HARNESS_OPERATOR_TOKEN or
 * HARNESS_VIEWER_TOKEN): timeout_ms per call, 5 s to connect. Returns 0, or the negated status
 * after printing why. */
int harness_client_open(const char *url, const char *token, uint32_t timeout_ms,
                        charter_client **out);

/* Sleeps ms milliseconds (resumed after signals). */
void harness_sleep_ms(long ms);

/* The setup calls of the multi-process suites (steps.c), each printing charterd's answer when
 * it fails. CreateRun of mode under workflow (NULL or "": charterd's) into run_id, with the
 * run's status into status (NULL: not wanted); st, when not NULL, gets the call's status
 * (and nothing is printed). Returns 0 or libcharter's nonzero code. */
int harness_create_run(charter_client *c, const char *mode, const char *workflow, char run_id[129],
                       char status[32], charter_status *st);

/* OpenStep of step in run_id; the context id into ctx. Returns 0 or libcharter's code. */
int harness_open_step(charter_client *c, const char *run_id, const char *step, char ctx[129]);

/* ReadSource of resource in ctx; on allow the artifact id into id. Returns 0 on allow, -1 on a
 * refusal or a failed call. */
int harness_read_source(charter_client *c, const char *ctx, const char *resource, char id[129]);

/* ApplyWorkflow of the definition in the file at path. Returns 0, or -1 after printing why. */
int harness_apply_workflow_file(charter_client *c, const char *path);

/* A payments run (deploy/workflows/payments.json, applied first): the pay step's context into
 * ctx and the bill observed there (an electricity bill naming IBAN DE89370400440532013000 and
 * 84.20 EUR) into bill. Returns 0, or -1 after printing why. */
int harness_payments_run(charter_client *c, char run[129], char ctx[129], char bill[129]);

/* Runs a printf-formatted shell command line (e.g. the charter CLI); returns its exit status,
 * or -1 when it could not run, did not exit, or the line is longer than 2047 bytes. */
int harness_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The first MiB of a file as a NUL-terminated string (caller frees), or NULL. */
char *harness_slurp(const char *path);

/* True when codes (n of them) hold code. */
bool harness_has_code(char *const *codes, size_t n, const char *code);

/* A suite that pauses the database runs on a redis-server of its own, so that it neither
 * delays other test programs sharing the test Redis nor is released early by their
 * CLIENT UNPAUSE: CHARTER_TEST_REDIS points at r (started without persistence) from
 * harness_suite_redis_start until harness_suite_redis_stop puts the shared one back.
 * Returns 0 or -1. */
int harness_suite_redis_start(harness_private_redis *r);
void harness_suite_redis_stop(harness_private_redis *r);

/* --- HTTP/JSON (http.c) -------------------------------------------------------------------- */

typedef struct {
    int status;      /* the HTTP status */
    char body[4096]; /* the reply's body (cut at 4095 bytes) */
} harness_http_reply;

/* POSTs body (NULL: "{}") as application/json to http://<hostport><path> with the curl
 * program, with n_headers (at most 8) more "Name: value" headers, waiting at most 30 s.
 * Returns 0 with *out filled, or -1 when curl failed (no reply). */
int harness_http_post(const char *hostport, const char *path, const char *const *headers,
                      size_t n_headers, const char *body, harness_http_reply *out);

/* --- raw HTTP (rawhttp.c): a client that sends exactly the bytes it is given ------------- */

/* A TCP connection to "127.0.0.1:PORT". Returns the socket, or -1. */
int harness_http_connect(const char *hostport);

/* Sends len bytes of text. Returns 0, or -1 when the server closed the connection. */
int harness_http_send(int fd, const char *text, size_t len);

/* Waits at most wait_ms for one whole response (its head, then its body by Content-Length, or
 * until the server closes) and returns its status, with up to n-1 bytes of the body in body
 * ("" when n is 0 or none). Returns 0 when the connection closed, or nothing whole came in
 * time, before a status line. */
int harness_http_response(int fd, int wait_ms, char *body, size_t n);

/* harness_http_response that also keeps the response's status line and headers (each line
 * ending in CRLF) in head (head_n bytes; 0: not wanted). */
int harness_http_read(int fd, int wait_ms, char *head, size_t head_n, char *body, size_t n);

/* The value of header name (case-insensitive) in a head from harness_http_read into out ("" when
 * absent). */
void harness_http_header(const char *head, const char *name, char *out, size_t n);

/* True when fd has data or an end of file to read within wait_ms (0: look without waiting). */
bool harness_http_readable(int fd, int wait_ms);

/* The slow client: sends one byte of bytes (cycled) every every_ms milliseconds, at most max of
 * them, and stops when the server closes the connection. Returns how many were sent before it
 * closed, or -1 when it was still open after max; *answered is set when the server sent any
 * byte back (a response) instead of only closing. */
int harness_http_trickle(int fd, const char *bytes, int every_ms, int max, bool *answered);

/* --- a fake model provider ---------------------------------------------------------------- */

/* A real local HTTP server (NNG's) standing in for a remote model provider: charterd is
 * pointed at it through CHARTER_*_BASE_URL and each suite decides what it answers. */
typedef struct harness_model harness_model;

#define HARNESS_MODEL_MAX_HEADERS 4

/* What one request is answered with, filled by the suite's reply function. */
typedef struct {
    int status; /* HTTP status (e.g. 200, 429, 500) */
    struct {
        const char *name, *value; /* copied before the reply function returns */
    } headers[HARNESS_MODEL_MAX_HEADERS];
    size_t n_headers;
    char *body;   /* malloc'd; the server takes and frees it; NULL: an empty body */
    int delay_ms; /* preset to the server's delay; the function may change it (0: at once,
                     HARNESS_MODEL_HOLD: until harness_model_release) */
} harness_model_reply;

/* Called once per request, on an NNG thread, as soon as it arrives: path is the registered
 * path it came in on, body its bytes (len of them, not NUL-terminated). Returns 0 with *out
 * filled, or nonzero (the request then fails with NNG_ENOMEM and out->body is still freed). */
typedef int (*harness_model_fn)(void *arg, const char *path, const void *body, size_t len,
                                harness_model_reply *out);

/* Starts a server on 127.0.0.1 (a free port) that takes POST on each of paths (n of them;
 * request bodies collected up to 4 MiB) and answers every request with what fn (given arg)
 * says, after the reply's delay_ms (initially 0). Returns 0 with *out (stop it with
 * harness_model_stop), or -1. */
int harness_model_start(const char *const *paths, size_t n, harness_model_fn fn, void *arg,
                        harness_model **out);

/* A delay that holds each reply until harness_model_release: the request stays unanswered
 * for as long as the test wants, whatever the machine's load. */
#define HARNESS_MODEL_HOLD (-1)

/* Sets the delay, in milliseconds, preset in each later request's reply (HARNESS_MODEL_HOLD:
 * held until released). Thread-safe. */
void harness_model_set_delay(harness_model *m, int ms);

/* Answers every request held so far (HARNESS_MODEL_HOLD) now, with what the reply function
 * chose; a caller that has gone away meanwhile is simply not answered. Returns how many were
 * released. Thread-safe. */
int harness_model_release(harness_model *m);

/* How many requests are held now (arrived, unanswered, not released). Thread-safe. */
int harness_model_held(harness_model *m);

/* How many requests have arrived so far (all paths). Thread-safe. */
int harness_model_requests(harness_model *m);

/* "http://127.0.0.1:<port>" (no trailing slash), valid until harness_model_stop. */
const char *harness_model_url(const harness_model *m);

/* Answers every delayed request still waiting (with an error), stops the server, and frees
 * everything, including the delay timers that could not be freed from their own callbacks.
 * m may be NULL. */
void harness_model_stop(harness_model *m);

/* --- Gate/Invoke --------------------------------------------------------------------------- */

/* One argument of an Invoke: its origin is "task" (from_task), "quote:ID" (quoted_from ID) or
 * "lineage:ID" (a lineage of one artifact). */
typedef struct {
    const char *name, *value, *origin;
} harness_invoke_arg;

#define HARNESS_INVOKE_MAX_ARGS 40

/* Invoke of tool with the first n (at most HARNESS_INVOKE_MAX_ARGS) of args in context under
 * invocation ID inv; the response (caller frees) or NULL with *st set. */
Charter__V1__InvokeResponse *harness_invoke(charter_client *c, const char *context,
                                            const char *tool, const char *inv,
                                            const harness_invoke_arg *args, size_t n,
                                            charter_status *st);

#endif
