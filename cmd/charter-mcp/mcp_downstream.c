/*
 * mcp_downstream.c - charter-mcp as an MCP client of the downstream servers a workflow names
 * ("servers"): a command's server is a child process spoken to over its stdin and stdout, one
 * JSON-RPC 2.0 message per line; a url's server is spoken to over Streamable HTTP
 * (mcp_downstream_http.c). charter-mcp starts a server (or opens a session with it),
 * initializes it and lists its tools before it serves the tools mapped onto them, and a call
 * goes out only after charterd allowed it; the answer goes back to mcp_live.c, which observes
 * it and gates it before the agent sees it.
 *
 * A server that dies, stays silent past its timeout or answers with more than
 * MCP_DOWNSTREAM_MAX_MESSAGE bytes is stopped (a url server's session dropped): the call in
 * flight is reported with its outcome unknown and never sent again, and the next call starts
 * the server (a session) anew. The child gets only the environment variables the workflow's
 * env_from names, and no open descriptor but its pipes; a url server gets only the bearer
 * token its credential_env or credential_file names.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mcp_downstream.h"

/* The MCP revision charter-mcp asks its downstream servers for. */
#define DS_PROTOCOL "2025-11-25"

long long ds_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int timeout_ms(const mcp_downstream *d)
{
    const json_t *t = json_object_get(d->decl, "timeout_ms");
    return t ? (int)json_integer_value(t) : MCP_DOWNSTREAM_DEFAULT_TIMEOUT_MS;
}

/* ---- the child process ------------------------------------------------------------------ */

/* Stops the child (if any; reaped says it was already waited for) and forgets what it said;
 * the next call starts it again. */
static void ds_stop_child(mcp_downstream *d, bool reaped)
{
    if (d->pid > 0) {
        close(d->in_fd);
        if (!reaped) {
            kill(d->pid, SIGKILL);
            while (waitpid(d->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        }
        close(d->out_fd);
    }
    d->pid = 0;
    d->in_fd = d->out_fd = -1;
    d->len = 0;
    json_decref(d->tools);
    d->tools = NULL;
}

/* Forgets the session with a url server (d->lock held): the next call opens a new one, with
 * the credential read again. */
static void ds_forget_session(mcp_downstream *d)
{
    free(d->session_id);
    d->session_id = NULL;
    if (d->auth)
        explicit_bzero(d->auth, strlen(d->auth));
    free(d->auth);
    d->auth = NULL;
    d->protocol[0] = '\0';
    d->generation++;
    json_decref(d->tools);
    d->tools = NULL;
}

/* Forgets the session with a url server and ends it with DELETE (d->lock held). */
static void ds_drop_session(mcp_downstream *d)
{
    ds_http_peer p;
    if (d->session_id && ds_http_peer_of(d, ds_now_ms() + timeout_ms(d), &p) == 0) {
        ds_http_delete(&p);
        ds_http_peer_free(&p);
    }
    ds_forget_session(d);
}

static void ds_stop(mcp_downstream *d)
{
    if (d->http)
        ds_drop_session(d);
    else
        ds_stop_child(d, false);
}

/* Whether the child is running (one that exited is reaped and forgotten), or the session with
 * a url server is open. */
static bool ds_alive(mcp_downstream *d)
{
    if (d->http)
        return d->tools != NULL;
    if (d->pid <= 0)
        return false;
    pid_t w = waitpid(d->pid, NULL, WNOHANG);
    if (w == 0)
        return true;
    ds_stop_child(d, w == d->pid);
    return false;
}

/* argv (command, then args; the strings borrowed from the workflow) and envp (NAME=value of
 * each env_from variable that is set, each malloc'd) for the child; NULL when out of memory. */
static char **child_argv(const mcp_downstream *d)
{
    const json_t *args = json_object_get(d->decl, "args");
    char **argv = calloc(json_array_size(args) + 2, sizeof *argv);
    if (!argv)
        return NULL;
    argv[0] = (char *)json_string_value(json_object_get(d->decl, "command"));
    for (size_t i = 0; i < json_array_size(args); i++)
        argv[i + 1] = (char *)json_string_value(json_array_get(args, i));
    return argv;
}

static char **child_envp(const mcp_downstream *d)
{
    const json_t *names = json_object_get(d->decl, "env_from");
    size_t n = json_array_size(names);
    char **envp = calloc(n + 1, sizeof *envp);
    for (size_t i = 0, k = 0; envp && i < n; i++) {
        const char *name = json_string_value(json_array_get(names, i));
        const char *value = getenv(name);
        if (!value)
            continue;
        size_t len = strlen(name) + strlen(value) + 2;
        if (!(envp[k] = malloc(len))) {
            for (size_t j = 0; j < k; j++)
                free(envp[j]);
            free(envp);
            return NULL;
        }
        snprintf(envp[k++], len, "%s=%s", name, value);
    }
    return envp;
}

static int ds_spawn(mcp_downstream *d, char *err, size_t errlen)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    char **argv = child_argv(d), **envp = child_envp(d);
    posix_spawn_file_actions_t fa;
    int rc = !argv || !envp ? ENOMEM : 0;
    if (rc == 0 && (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0))
        rc = errno;
    if (rc == 0 && (rc = posix_spawn_file_actions_init(&fa)) == 0) {
        /* dup2 clears close-on-exec on 0 and 1; everything else of this process stays here. */
        if ((rc = posix_spawn_file_actions_adddup2(&fa, in[0], 0)) == 0 &&
            (rc = posix_spawn_file_actions_adddup2(&fa, out[1], 1)) == 0 &&
            (rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) == 0)
            rc = posix_spawnp(&d->pid, argv[0], &fa, NULL, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
    }
    for (size_t i = 0; envp && envp[i]; i++)
        free(envp[i]);
    free(envp);
    free(argv);
    if (in[0] >= 0)
        close(in[0]);
    if (out[1] >= 0)
        close(out[1]);
    if (rc != 0) {
        snprintf(err, errlen, "server %s: cannot start %s: %s", d->name,
                 json_string_value(json_object_get(d->decl, "command")), strerror(rc));
        if (in[1] >= 0)
            close(in[1]);
        if (out[0] >= 0)
            close(out[0]);
        d->pid = 0;
        return -1;
    }
    d->in_fd = in[1];
    d->out_fd = out[0];
    d->len = 0;
    return 0;
}

/* ---- JSON-RPC over the pipes ------------------------------------------------------------ */

/* Writes msg as one line. 0, or -1 when the child no longer reads (it died). */
static int ds_send(mcp_downstream *d, const json_t *msg)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    size_t len = text ? strlen(text) : 0;
    char *line = text ? realloc(text, len + 2) : NULL;
    if (!line) {
        free(text);
        return -1;
    }
    line[len++] = '\n';
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(d->in_fd, line + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    free(line);
    return off == len ? 0 : -1;
}

/* The next whole line the child wrote, parsed (*msg, a new reference), before deadline
 * (monotonic milliseconds). 0, or DS_EOF, DS_TIMEOUT, DS_TOO_LARGE, DS_IO, or DS_NOT_JSON for
 * a line that is not a JSON object: a stdio server writes nothing else on its stdout. */
static int ds_read_message(mcp_downstream *d, long long deadline, json_t **msg)
{
    *msg = NULL;
    if (!d->buf && !(d->buf = malloc(MCP_DOWNSTREAM_MAX_MESSAGE + 1)))
        return DS_IO;
    for (;;) {
        char *nl = memchr(d->buf, '\n', d->len);
        if (nl) {
            size_t line = (size_t)(nl - d->buf);
            *msg = json_loadb(d->buf, line, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
            memmove(d->buf, nl + 1, d->len - line - 1);
            d->len -= line + 1;
            if (json_is_object(*msg))
                return 0;
            json_decref(*msg);
            *msg = NULL;
            return DS_NOT_JSON;
        }
        if (d->len > MCP_DOWNSTREAM_MAX_MESSAGE)
            return DS_TOO_LARGE;
        long long left = deadline - ds_now_ms();
        if (left <= 0)
            return DS_TIMEOUT;
        struct pollfd p = {d->out_fd, POLLIN, 0};
        int pr = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (pr < 0 && errno != EINTR)
            return DS_IO;
        if (pr <= 0)
            continue;
        ssize_t n = read(d->out_fd, d->buf + d->len, MCP_DOWNSTREAM_MAX_MESSAGE + 1 - d->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? DS_EOF : DS_IO;
        d->len += (size_t)n;
    }
}

static const char *read_failure(int rc)
{
    return rc == DS_EOF         ? "the server exited"
           : rc == DS_TIMEOUT   ? "no answer within the server's timeout_ms"
           : rc == DS_TOO_LARGE ? "the answer is larger than " MCP_DOWNSTREAM_MAX_MESSAGE_TEXT
           : rc == DS_NOT_JSON  ? "the server wrote a line that is not a JSON-RPC message"
                                : "reading the server's output failed";
}

/* A request the server sent us (sampling, roots, elicitation): none is offered, so each gets
 * "method not found" and the server goes on. */
static void refuse_server_request(mcp_downstream *d, const json_t *msg)
{
    json_t *answer =
        json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", json_object_get(msg, "id"),
                  "error", "code", MCP_METHOD_NOT_FOUND, "message",
                  "charter-mcp offers its downstream servers no client capabilities");
    if (answer)
        ds_send(d, answer);
    json_decref(answer);
}

/* The result of msg, the response to request method: 0 with *result (a new reference), or
 * DS_ANSWERED_ERROR with err set when it is an error or has no result. err says what
 * charter-mcp knows of an error (its code, the size of its message), never the server's text:
 * that goes to stderr only. */
static int take_answer(const mcp_downstream *d, const char *method, const json_t *msg,
                       json_t **result, char *err, size_t errlen)
{
    const json_t *e = json_object_get(msg, "error");
    *result = e ? NULL : json_incref(json_object_get(msg, "result"));
    if (*result)
        return 0;
    const json_t *m = json_object_get(e, "message");
    char what[64];
    snprintf(what, sizeof what, "the message of its %s error", method);
    if (json_is_string(m))
        ds_log_server_text(d->name, what, json_string_value(m), json_string_length(m), d->auth);
    if (e)
        snprintf(err, errlen,
                 "server %s: %s failed: JSON-RPC error %lld, with a %zu-byte message "
                 "not shown",
                 d->name, method, (long long)json_integer_value(json_object_get(e, "code")),
                 json_is_string(m) ? json_string_length(m) : 0);
    else
        snprintf(err, errlen, "server %s: %s: the answer has no result", d->name, method);
    return DS_ANSWERED_ERROR;
}

/* Request method (params stolen) to a url server, with d->lock held: as ds_request, but the
 * failure is the DS_* code of the exchange. The session id the server issues is kept. */
static int ds_http_request(mcp_downstream *d, const char *method, json_t *params,
                           long long deadline, json_t **result, bool *sent, char *err,
                           size_t errlen)
{
    json_int_t id = ++d->next_id;
    json_t *req = json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", id, "method", method,
                            "params", params ? params : json_object());
    json_t *msg = NULL;
    char *sid = NULL;
    ds_http_peer p;
    int rc = DS_IO;
    *result = NULL;
    *sent = false;
    snprintf(err, errlen, "out of memory");
    if (req && ds_http_peer_of(d, deadline, &p) == 0) {
        rc = ds_http_exchange(&p, req, id, &msg, &sid, sent, err, errlen);
        ds_http_peer_free(&p);
    }
    json_decref(req);
    if (rc == 0 && sid && !d->session_id)
        d->session_id = sid, sid = NULL;
    free(sid);
    if (rc == 0)
        rc = take_answer(d, method, msg, result, err, errlen);
    json_decref(msg);
    return rc;
}

/* Sends request method (params stolen) and waits for its answer until deadline (ds_now_ms
 * milliseconds): 0 with *result (a new reference), DS_ANSWERED_ERROR with err set when the
 * server answered with an error, or another nonzero code with err set when it did not answer
 * (died, timed out, too large). *sent says whether the request reached the server. A message
 * answering another id is dropped: this client has one request in flight. */
static int ds_request(mcp_downstream *d, const char *method, json_t *params, long long deadline,
                      json_t **result, bool *sent, char *err, size_t errlen)
{
    if (d->http)
        return ds_http_request(d, method, params, deadline, result, sent, err, errlen);
    json_int_t id = ++d->next_id;
    json_t *req = json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", id, "method", method,
                            "params", params ? params : json_object());
    *result = NULL;
    *sent = req && ds_send(d, req) == 0;
    json_decref(req);
    if (!*sent)
        return snprintf(err, errlen, "server %s: the server exited", d->name), -1;
    for (;;) {
        json_t *msg = NULL;
        int rc = ds_read_message(d, deadline, &msg);
        if (rc != 0)
            return snprintf(err, errlen, "server %s: %s", d->name, read_failure(rc)), -1;
        const json_t *mid = json_object_get(msg, "id");
        if (json_is_string(json_object_get(msg, "method")) && mid)
            refuse_server_request(d, msg);
        if (!json_object_get(msg, "method") && json_is_integer(mid) &&
            json_integer_value(mid) == id) {
            rc = take_answer(d, method, msg, result, err, errlen);
            json_decref(msg);
            return rc;
        }
        json_decref(msg);
    }
}

/* ---- the session with a server ---------------------------------------------------------- */

/* Sends notification note, by deadline. 0, or -1 with err set. */
static int ds_notify(mcp_downstream *d, const json_t *note, long long deadline, char *err,
                     size_t errlen)
{
    if (!d->http) {
        if (ds_send(d, note) == 0)
            return 0;
        return snprintf(err, errlen, "server %s: the server exited", d->name), -1;
    }
    ds_http_peer p;
    json_t *none = NULL;
    char *sid = NULL;
    bool sent;
    int rc = ds_http_peer_of(d, deadline, &p);
    if (rc != 0)
        return snprintf(err, errlen, "out of memory"), -1;
    rc = ds_http_exchange(&p, note, -1, &none, &sid, &sent, err, errlen);
    ds_http_peer_free(&p);
    free(sid);
    json_decref(none);
    return rc == 0 ? 0 : -1;
}

/* The tools the server lists, by name (new reference), following its pagination cursors, all
 * by deadline. */
static int ds_list_tools(mcp_downstream *d, long long deadline, char *err, size_t errlen)
{
    json_t *tools = json_object();
    const char *cursor = NULL;
    json_t *page = NULL;
    bool sent;
    for (int pages = 0; tools && pages < 64; pages++) {
        json_t *params = cursor ? json_pack("{s:s}", "cursor", cursor) : json_object();
        json_decref(page);
        if (ds_request(d, "tools/list", params, deadline, &page, &sent, err, errlen) != 0) {
            json_decref(tools);
            return -1;
        }
        size_t i;
        json_t *t;
        json_array_foreach(json_object_get(page, "tools"), i, t)
        {
            const char *name = json_string_value(json_object_get(t, "name"));
            if (name)
                json_object_set(tools, name, t);
        }
        cursor = json_string_value(json_object_get(page, "nextCursor"));
        if (!cursor)
            break;
    }
    json_decref(page);
    if (!tools)
        return snprintf(err, errlen, "out of memory"), -1;
    json_decref(d->tools);
    d->tools = tools;
    return 0;
}

/* A revision a server answered, as it may be said: a date (YYYY-MM-DD), or nothing of the
 * server's text. */
static const char *revision_shown(const char *v)
{
    bool date = v && strlen(v) == 10;
    for (size_t i = 0; date && i < 10; i++)
        date = i == 4 || i == 7 ? v[i] == '-' : v[i] >= '0' && v[i] <= '9';
    return date ? v : v ? "(not a revision date)" : "(none)";
}

/* Starts the server if it is not running: initialize (the revision it answers must be one
 * charter-mcp speaks), notifications/initialized, tools/list, everything by deadline (ds_now_ms
 * milliseconds: requests the server sends meanwhile do not stretch it). 0, or -1 with err set
 * and the child stopped. */
static int ds_ensure(mcp_downstream *d, long long deadline, char *err, size_t errlen)
{
    if (ds_alive(d) && d->tools)
        return 0;
    ds_stop(d);
    if ((d->http ? ds_http_credential(d, err, errlen) : ds_spawn(d, err, errlen)) != 0)
        return -1;
    json_t *init = NULL;
    bool sent;
    json_t *params =
        json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion", DS_PROTOCOL, "capabilities",
                  "clientInfo", "name", "charter-mcp", "version", charter_version());
    if (ds_request(d, "initialize", params, deadline, &init, &sent, err, errlen) != 0)
        goto fail;
    const char *v = json_string_value(json_object_get(init, "protocolVersion"));
    if (!mcp_protocol_supported(v)) {
        snprintf(err, errlen, "server %s: speaks MCP revision %s, which charter-mcp does not",
                 d->name, revision_shown(v));
        goto fail;
    }
    /* A url server is told the revision in a header of every later request. */
    snprintf(d->protocol, sizeof d->protocol, "%s", v);
    json_decref(init);
    init = NULL;
    json_t *note = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "notifications/initialized");
    int rc = note ? ds_notify(d, note, deadline, err, errlen) : -1;
    json_decref(note);
    if (rc != 0 || ds_list_tools(d, deadline, err, errlen) != 0)
        goto fail;
    return 0;
fail:
    json_decref(init);
    ds_stop(d);
    return -1;
}

/* ---- the mapped tools -------------------------------------------------------------------- */

static mcp_downstream *find_downstream(mcp_server *srv, const char *name)
{
    for (size_t i = 0; name && i < srv->n_downstreams; i++)
        if (strcmp(srv->downstreams[i].name, name) == 0)
            return &srv->downstreams[i];
    return NULL;
}

static bool maps_argument(const json_t *decl, const char *name)
{
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(decl, "arguments"), i, a)
    {
        if (strcmp(json_string_value(json_object_get(a, "name")), name) == 0)
            return true;
    }
    return false;
}

/* Whether the downstream tool still takes what the workflow maps onto it: every mapped
 * argument among its properties, and each argument it requires mapped. 0, or -1 with one line
 * saying what changed. */
static int check_mapping(const mcp_downstream *d, const char *tool, const json_t *decl, char *err,
                         size_t errlen)
{
    const char *dt = json_string_value(json_object_get(decl, "downstream_tool"));
    const json_t *t = json_object_get(d->tools, dt);
    if (!t)
        return snprintf(err, errlen,
                        "tool %s: server %s no longer lists tool %s: update the workflow", tool,
                        d->name, dt),
               -1;
    const json_t *schema = json_object_get(t, "inputSchema");
    const json_t *props = json_object_get(schema, "properties");
    size_t i;
    const json_t *a;
    json_array_foreach(json_object_get(decl, "arguments"), i, a)
    {
        const char *name = json_string_value(json_object_get(a, "name"));
        if (!json_object_get(props, name))
            return snprintf(err, errlen,
                            "tool %s: %s of server %s no longer takes argument \"%s\": update "
                            "the workflow",
                            tool, dt, d->name, name),
                   -1;
    }
    json_array_foreach(json_object_get(schema, "required"), i, a)
    {
        const char *name = json_string_value(a);
        if (name && !maps_argument(decl, name))
            return snprintf(err, errlen,
                            "tool %s: %s of server %s now requires argument \"%.64s\", which the "
                            "workflow does not map: update the workflow",
                            tool, dt, d->name, name),
                   -1;
    }
    return 0;
}

/* The value of one argument as the downstream tool's schema types it: a string as given, or
 * the number, boolean, array or object the string spells as JSON (decoded by jansson). NULL
 * when it spells none. */
static json_t *typed_value(const json_t *prop, const char *value)
{
    const char *type = json_string_value(json_object_get(prop, "type"));
    if (!type || strcmp(type, "string") == 0)
        return json_string(value);
    json_t *v = json_loads(value, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    bool fits = (strcmp(type, "number") == 0 && json_is_number(v)) ||
                (strcmp(type, "integer") == 0 && json_is_integer(v)) ||
                (strcmp(type, "boolean") == 0 && json_is_boolean(v)) ||
                (strcmp(type, "array") == 0 && json_is_array(v)) ||
                (strcmp(type, "object") == 0 && json_is_object(v));
    if (!fits) {
        json_decref(v);
        return NULL;
    }
    return v;
}

/* The arguments object of the downstream call from the agent's {name: {value, ...}}. NULL
 * with err set when a value does not fit the downstream tool's type for it. */
static json_t *call_arguments(const mcp_downstream *d, const json_t *decl, const json_t *given,
                              char *err, size_t errlen)
{
    const char *dt = json_string_value(json_object_get(decl, "downstream_tool"));
    const json_t *props = json_object_get(
        json_object_get(json_object_get(d->tools, dt), "inputSchema"), "properties");
    json_t *out = json_object();
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)given, name, v)
    {
        json_t *typed = typed_value(json_object_get(props, name),
                                    json_string_value(json_object_get(v, "value")));
        if (!typed || !out) {
            snprintf(err, errlen, "arguments.%.64s: %s of server %s takes a %.16s here", name, dt,
                     d->name,
                     json_string_value(json_object_get(json_object_get(props, name), "type")));
            json_decref(typed);
            json_decref(out);
            return NULL;
        }
        json_object_set_new(out, name, typed);
    }
    return out;
}

json_t *mcp_downstream_prepare(mcp_server *srv, const char *tool, const json_t *decl,
                               const json_t *given, json_t **call_args)
{
    *call_args = NULL;
    mcp_downstream *d = find_downstream(srv, json_string_value(json_object_get(decl, "server")));
    char err[512];
    if (!d) {
        snprintf(err, sizeof err, "tool %s: its server is not started by this process", tool);
        return mcp_refusal("unknown", "DOWNSTREAM_UNAVAILABLE", err);
    }
    pthread_mutex_lock(&d->lock);
    json_t *refusal = NULL;
    if (ds_ensure(d, ds_now_ms() + timeout_ms(d), err, sizeof err) != 0)
        refusal = mcp_refusal("unknown", "DOWNSTREAM_UNAVAILABLE", err);
    else if (check_mapping(d, tool, decl, err, sizeof err) != 0)
        refusal = mcp_refusal("deny", "DOWNSTREAM_SCHEMA_CHANGED", err);
    else if (!(*call_args = call_arguments(d, decl, given, err, sizeof err)))
        refusal = mcp_refusal("deny", "ARGUMENT_INVALID", err);
    pthread_mutex_unlock(&d->lock);
    return refusal;
}

/* The text items of a CallToolResult, joined by newlines (malloc'd), and how many items were
 * not text (left out). NULL when out of memory. */
static char *result_text(const json_t *result, size_t *bytes, size_t *other)
{
    size_t len = 0, i;
    const json_t *c;
    *other = 0;
    json_array_foreach(json_object_get(result, "content"), i, c)
    {
        const char *type = json_string_value(json_object_get(c, "type"));
        if (type && strcmp(type, "text") == 0 && json_is_string(json_object_get(c, "text")))
            len += json_string_length(json_object_get(c, "text")) + 1;
        else
            (*other)++;
    }
    char *text = malloc(len + 1);
    size_t off = 0;
    json_array_foreach(json_object_get(result, "content"), i, c)
    {
        const json_t *t = json_object_get(c, "text");
        const char *type = json_string_value(json_object_get(c, "type"));
        if (!text || !type || strcmp(type, "text") != 0 || !json_is_string(t))
            continue;
        if (off > 0)
            text[off++] = '\n';
        memcpy(text + off, json_string_value(t), json_string_length(t));
        off += json_string_length(t);
    }
    if (text)
        text[off] = '\0';
    *bytes = off;
    return text;
}

/* tools/call (params stolen) to a child, under its lock, by deadline: ds_request's answer. */
static int stdio_call(mcp_downstream *d, json_t *params, long long deadline, json_t **result,
                      bool *sent, char *err, size_t errlen)
{
    pthread_mutex_lock(&d->lock);
    int rc = -1;
    if (ds_alive(d))
        rc = ds_request(d, "tools/call", params, deadline, result, sent, err, errlen);
    else
        json_decref(params), snprintf(err, errlen, "server %s: the server exited", d->name);
    /* A server that failed a call mid-way is stopped: what it did is unknown, and its stream
     * may hold half an answer. One that answered with an error goes on running. */
    if (rc != 0 && rc != DS_ANSWERED_ERROR)
        ds_stop(d);
    pthread_mutex_unlock(&d->lock);
    return rc;
}

/* The session a call to a url server goes out on, copied into *p under d->lock with the
 * request's id and the session's generation: the open one, or a new one when none is open
 * (another call's failure dropped it after this call was prepared; this call never left, so
 * sending it on the new session still sends it once), its tools checked again against decl.
 * 0, or a DS_* code with err set and nothing sent. */
static int http_session(mcp_downstream *d, const json_t *decl, long long deadline, ds_http_peer *p,
                        json_int_t *id, unsigned *gen, char *err, size_t errlen)
{
    const char *dt = json_string_value(json_object_get(decl, "downstream_tool"));
    pthread_mutex_lock(&d->lock);
    int rc = 0;
    if (!d->tools &&
        (ds_ensure(d, deadline, err, errlen) != 0 || check_mapping(d, dt, decl, err, errlen) != 0))
        rc = DS_IO;
    else if (ds_http_peer_of(d, deadline, p) != 0)
        rc = (snprintf(err, errlen, "out of memory"), DS_IO);
    *id = ++d->next_id;
    *gen = d->generation;
    pthread_mutex_unlock(&d->lock);
    return rc;
}

/* tools/call (params stolen) to a url server, by deadline: its session is copied under the
 * lock, and the request goes out without it, so calls of other sessions go out side by side.
 * A call that fails but with an error answer drops the session it went out on (not a newer
 * one), and ends it with DELETE: the next call opens a new one. ds_request's answer. */
static int http_call(mcp_downstream *d, const json_t *decl, json_t *params, long long deadline,
                     json_t **result, bool *sent, char *err, size_t errlen)
{
    ds_http_peer p;
    json_int_t id;
    unsigned gen;
    *sent = false;
    int rc = http_session(d, decl, deadline, &p, &id, &gen, err, errlen);
    if (rc != 0)
        return json_decref(params), rc;
    json_t *req = json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", id, "method",
                            "tools/call", "params", params);
    json_t *msg = NULL;
    char *sid = NULL;
    rc = req ? ds_http_exchange(&p, req, id, &msg, &sid, sent, err, errlen)
             : (snprintf(err, errlen, "out of memory"), DS_IO);
    free(sid);
    json_decref(req);
    if (rc == 0)
        rc = take_answer(d, "tools/call", msg, result, err, errlen);
    json_decref(msg);
    if (rc != 0 && rc != DS_ANSWERED_ERROR) {
        pthread_mutex_lock(&d->lock);
        bool mine = d->generation == gen;
        if (mine)
            ds_forget_session(d);
        pthread_mutex_unlock(&d->lock);
        if (mine)
            ds_http_delete(&p);
    }
    ds_http_peer_free(&p);
    return rc;
}

int mcp_downstream_call(mcp_server *srv, const json_t *decl, json_t *call_args,
                        mcp_downstream_answer *out)
{
    memset(out, 0, sizeof *out);
    mcp_downstream *d = find_downstream(srv, json_string_value(json_object_get(decl, "server")));
    json_t *params =
        json_pack("{s:s, s:o}", "name", json_string_value(json_object_get(decl, "downstream_tool")),
                  "arguments", call_args);
    if (!d || !params) {
        json_decref(params);
        snprintf(out->error, sizeof out->error, "out of memory");
        return -1;
    }
    json_t *result = NULL;
    bool sent = false;
    /* One deadline for everything the call does: a server's requests do not stretch it. */
    long long deadline = ds_now_ms() + timeout_ms(d);
    int rc =
        d->http
            ? http_call(d, decl, params, deadline, &result, &sent, out->error, sizeof out->error)
            : stdio_call(d, params, deadline, &result, &sent, out->error, sizeof out->error);
    out->sent = sent;
    /* A url server that refused the request with a 4xx status did not act on it. */
    out->answered = rc == DS_ANSWERED_ERROR || rc == DS_HTTP_REFUSED;
    if (rc != 0)
        return -1;
    out->is_error = json_is_true(json_object_get(result, "isError"));
    out->text = result_text(result, &out->bytes, &out->other_items);
    json_decref(result);
    if (!out->text)
        return snprintf(out->error, sizeof out->error, "out of memory"), -1;
    return 0;
}

/* ---- start and stop --------------------------------------------------------------------- */

/* libcurl's global state was set up (a url server is among the step's). */
static bool curl_ready;

/* The servers this process's step maps a tool onto: one mcp_downstream each. */
static int add_step_servers(mcp_server *srv)
{
    const json_t *tools = json_object_get(srv->workflow, "tools");
    const json_t *servers = json_object_get(srv->workflow, "servers");
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(srv->step, "tools"), i, v)
    {
        const json_t *decl = json_object_get(tools, json_string_value(v));
        const char *name = json_string_value(json_object_get(decl, "server"));
        if (!name || find_downstream(srv, name))
            continue;
        if (srv->n_downstreams == MCP_MAX_DOWNSTREAMS)
            return -1;
        mcp_downstream *d = &srv->downstreams[srv->n_downstreams];
        memset(d, 0, sizeof *d);
        d->name = json_object_iter_key(json_object_iter_at((json_t *)servers, name));
        d->decl = json_object_get(servers, name);
        d->in_fd = d->out_fd = -1;
        d->http = json_object_get(d->decl, "url") != NULL;
        if (!d->name || !d->decl || pthread_mutex_init(&d->lock, NULL) != 0)
            return -1;
        srv->n_downstreams++;
    }
    return 0;
}

static bool step_lists(const mcp_server *srv, const char *tool)
{
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(srv->step, "tools"), i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), tool) == 0)
            return true;
    }
    return false;
}

int mcp_downstream_open(mcp_server *srv)
{
    if (add_step_servers(srv) != 0) {
        fprintf(stderr, "charter-mcp: cannot set up the downstream servers\n");
        return -1;
    }
    for (size_t i = 0; i < srv->n_downstreams && !curl_ready; i++) {
        if (srv->downstreams[i].http && ds_http_global_init() != 0) {
            fprintf(stderr, "charter-mcp: libcurl could not be initialised\n");
            return -1;
        }
        curl_ready = srv->downstreams[i].http;
    }
    for (size_t i = 0; i < srv->n_downstreams; i++) {
        mcp_downstream *d = &srv->downstreams[i];
        char err[512];
        if (ds_ensure(d, ds_now_ms() + timeout_ms(d), err, sizeof err) != 0) {
            fprintf(stderr, "charter-mcp: %s (tried again at its next call)\n", err);
            continue;
        }
        fprintf(stderr, "charter-mcp: server %s: %zu tools listed (MCP %s%s)\n", d->name,
                json_object_size(d->tools), d->protocol, d->http ? ", Streamable HTTP" : ", stdio");
    }
    /* Each mapped tool is checked against what its server declares, one line per change. */
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(srv->step, "tools"), i, v)
    {
        const json_t *decl =
            json_object_get(json_object_get(srv->workflow, "tools"), json_string_value(v));
        mcp_downstream *d =
            find_downstream(srv, json_string_value(json_object_get(decl, "server")));
        char err[512];
        if (d && d->tools && check_mapping(d, json_string_value(v), decl, err, sizeof err) != 0)
            fprintf(stderr, "charter-mcp: refused: %s\n", err);
        if (d && json_object_get(decl, "result") && !step_lists(srv, "read_source"))
            fprintf(stderr,
                    "charter-mcp: tool %s: its results are observed through the source gate, "
                    "which needs read_source among step %s's tools: none will be shown\n",
                    json_string_value(v), srv->step_name);
    }
    return 0;
}

void mcp_downstream_close(mcp_server *srv)
{
    for (size_t i = 0; i < srv->n_downstreams; i++) {
        mcp_downstream *d = &srv->downstreams[i];
        ds_stop(d);
        free(d->buf);
        d->buf = NULL;
        pthread_mutex_destroy(&d->lock);
    }
    srv->n_downstreams = 0;
    if (curl_ready)
        ds_http_global_cleanup();
    curl_ready = false;
}
