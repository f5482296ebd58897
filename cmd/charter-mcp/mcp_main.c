/*
 * mcp_main.c - charter-mcp: serves one step of one workflow (a role) to an MCP client, over stdio
 * (newline-delimited JSON-RPC 2.0, the default) or Streamable HTTP (--http). The role is fixed
 * at start; the process is a client of charterd like any other (libcharter, the same token as
 * the charter CLI) and holds no database access.
 */
#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mcp.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: charter-mcp --role STEP --workflow FILE|NAME [options]\n"
            "\n"
            "Serves one step of a workflow to an MCP client: tools derived from the step's\n"
            "capability, every return gated by charterd.\n"
            "\n"
            "  --role STEP             the step this process plays (fixed for its lifetime)\n"
            "  --workflow FILE|NAME    a workflow file (applied to charterd, a no-op when stored)\n"
            "                          or the name or version of a stored workflow (one that\n"
            "                          names no servers: only a file starts servers)\n"
            "  --url URL               charterd, tcp://HOST:PORT or ipc:///PATH (default:\n"
            "                          $CHARTER_URL, else %s)\n"
            "  --token TOKEN           charterd bearer token (default: $CHARTER_TOKEN, else\n"
            "                          $CHARTER_OPERATOR_TOKEN); $CHARTER_TENANT names the\n"
            "                          tenant every call acts on (default: the token's)\n"
            "  --http HOST:PORT        serve Streamable HTTP on a loopback address at /mcp\n"
            "                          instead of stdio (port 0: one the system picks, logged)\n"
            "  --http-token-file FILE  the bearer credentials HTTP clients must present, one per\n"
            "                          line, each at least 16 characters (default: the one in\n"
            "                          $CHARTER_MCP_HTTP_TOKEN); required with --http unless\n"
            "  --http-no-auth          is given (loopback Host and Origin are still checked)\n"
            "  --http-max-connections N\n"
            "                          HTTP connections open at once, 1 to 100000, each with its\n"
            "                          own thread; more wait in the listen backlog (default %u)\n"
            "  --http-max-sessions N   MCP sessions held at once, 1 to 100000 (default %u)\n"
            "  --http-sessions-per-credential N\n"
            "                          sessions one credential may hold at once (default %u;\n"
            "                          not counted with --http-no-auth)\n"
            "  --http-header-timeout S\n"
            "                          seconds for a request's line and headers (default %u;\n"
            "                          0: no limit)\n"
            "  --http-body-timeout S   seconds for its body once the headers are in (default %u;\n"
            "                          0: no limit)\n"
            "  --http-idle-timeout S   seconds without a byte either way closes a connection\n"
            "                          (default %u; 0: no limit)\n"
            "  --conformance-fixture   a test mode, with --http and without --role, --workflow\n"
            "                          or charterd: serves the fixture tools, resources and\n"
            "                          prompts of the official MCP conformance suite (2025-11-25\n"
            "                          sessions, 2026-07-28 stateless requests), nothing gated\n"
            "  --help, --version\n",
            CHARTER_DEFAULT_URL, MCP_HTTP_DEFAULT_MAX_CONNECTIONS, MCP_HTTP_DEFAULT_MAX_SESSIONS,
            MCP_HTTP_DEFAULT_SESSIONS_PER_CREDENTIAL, MCP_HTTP_DEFAULT_HEADER_TIMEOUT_S,
            MCP_HTTP_DEFAULT_BODY_TIMEOUT_S, MCP_HTTP_DEFAULT_IDLE_TIMEOUT_S);
}

static char *read_file(const char *path, size_t limit, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(limit + 1);
    size_t n = buf ? fread(buf, 1, limit + 1, f) : 0;
    fclose(f);
    if (!buf || n > limit) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Whether a charterd token was given (option or environment), for the advice on a refusal. */
static bool mcp_token_given;

/* What to set when charterd refused the call as unauthenticated: the same fallback as the CLI. */
static const char *auth_advice(void)
{
    /* Every tool calls the Gate, which takes the operator token only. */
    return mcp_token_given
               ? " (the token was refused: set CHARTER_TOKEN or CHARTER_OPERATOR_TOKEN, or pass "
                 "--token TOKEN, to charterd's CHARTER_OPERATOR_TOKEN: the Gate needs it)"
               : " (no token given: set CHARTER_TOKEN or CHARTER_OPERATOR_TOKEN, or pass --token "
                 "TOKEN: charterd's CHARTER_OPERATOR_TOKEN, which the Gate needs)";
}

/* A workflow fetched from charterd by its name may not start servers: any operator credential
 * can store one, and its servers would run commands on this host and carry this host's
 * credentials to any url. Only a file on the command line, which the operator of this host
 * wrote, names the servers charter-mcp starts. 0, or -1 with one line said. */
static int refuse_stored_servers(const mcp_server *srv, const char *arg)
{
    if (json_object_size(json_object_get(srv->workflow, "servers")) == 0)
        return 0;
    fprintf(stderr,
            "charter-mcp: workflow %s is stored in charterd and names servers: charter-mcp "
            "starts downstream servers only from a workflow file given on its command line "
            "(--workflow /path/to/workflow.json)\n",
            arg);
    return -1;
}

/* Loads the workflow: a file is applied (so runs can name its version), a name is fetched. */
static int load_workflow(mcp_server *srv, const char *arg)
{
    struct stat sb;
    charter_status st;
    int rc;
    json_error_t jerr;
    bool stored = !(stat(arg, &sb) == 0 && S_ISREG(sb.st_mode));
    if (!stored) {
        size_t len = 0;
        char *text = read_file(arg, (size_t)1 << 20, &len);
        if (!text) {
            fprintf(stderr, "charter-mcp: cannot read %s (at most 1 MiB)\n", arg);
            return -1;
        }
        Charter__V1__ApplyWorkflowRequest req = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
        req.definition.data = (uint8_t *)text;
        req.definition.len = len;
        Charter__V1__WorkflowInfo *info = NULL;
        rc = charter_apply_workflow(srv->client, &req, &info, &st);
        if (rc == 0) {
            snprintf(srv->version, sizeof srv->version, "%s", info->version);
            srv->workflow = json_loadb(text, len, 0, &jerr);
            charter__v1__workflow_info__free_unpacked(info, NULL);
        }
        free(text);
    } else {
        Charter__V1__GetWorkflowRequest req = CHARTER__V1__GET_WORKFLOW_REQUEST__INIT;
        req.workflow = (char *)arg;
        Charter__V1__WorkflowDefinition *def = NULL;
        rc = charter_get_workflow(srv->client, &req, &def, &st);
        if (rc == 0) {
            snprintf(srv->version, sizeof srv->version, "%s", def->info->version);
            srv->workflow =
                json_loadb((const char *)def->definition.data, def->definition.len, 0, &jerr);
            charter__v1__workflow_definition__free_unpacked(def, NULL);
        }
    }
    if (rc != 0) {
        fprintf(stderr, "charter-mcp: workflow %s: %s: %s%s\n", arg, charter_status_name(rc),
                st.message, rc == -CHARTER_UNAUTHENTICATED ? auth_advice() : "");
        return -1;
    }
    if (!srv->workflow) {
        fprintf(stderr, "charter-mcp: workflow %s is not JSON (or needs the operator token)\n",
                arg);
        return -1;
    }
    return stored ? refuse_stored_servers(srv, arg) : 0;
}

/* Fixes the role: the step named, its place and its public rendering. */
static int pick_step(mcp_server *srv, const char *role)
{
    const json_t *steps = json_object_get(srv->workflow, "steps");
    size_t i;
    const json_t *st;
    json_array_foreach(steps, i, st)
    {
        const char *name = json_string_value(json_object_get(st, "name"));
        if (name && strcmp(name, role) == 0) {
            srv->step = st;
            srv->step_name = name;
            srv->first_step = i == 0;
            srv->last_step = i + 1 == json_array_size(steps);
            srv->public_render =
                json_object_get(st, "public_fields") && json_object_get(st, "public_template");
            return 0;
        }
    }
    fprintf(stderr, "charter-mcp: --role %s is not a step of workflow %s; its steps:", role,
            json_string_value(json_object_get(srv->workflow, "name")));
    json_array_foreach(steps, i, st)
        fprintf(stderr, " %s", json_string_value(json_object_get(st, "name")));
    fprintf(stderr, "\n");
    return -1;
}

/* Reads one line of at most MCP_MAX_MESSAGE bytes into buf (size MCP_MAX_MESSAGE + 2). A longer
 * line is consumed whole and reported with *oversized, its bytes dropped. Returns the length, or
 * -1 at end of input. */
static long read_line(char *buf, bool *oversized)
{
    size_t n = 0;
    int ch;
    *oversized = false;
    while ((ch = getchar()) != EOF && ch != '\n') {
        if (n <= MCP_MAX_MESSAGE)
            buf[n++] = (char)ch;
        else
            *oversized = true;
    }
    if (ch == EOF && n == 0 && !*oversized)
        return -1;
    if (n > MCP_MAX_MESSAGE)
        *oversized = true;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    buf[n] = '\0';
    return (long)n;
}

/* The credentials of a token file: one per line, blank lines skipped, each at least 16
 * characters. text is split in place; *n gets how many (at most max). Returns 0, or -1 with a
 * message printed. */
static int parse_credentials(char *text, const char *path, const char **out, size_t max, size_t *n)
{
    *n = 0;
    for (char *line = strtok(text, "\r\n"); line; line = strtok(NULL, "\r\n")) {
        if (line[0] == '\0')
            continue;
        if (strlen(line) < 16) {
            fprintf(stderr, "charter-mcp: %s holds a credential shorter than 16 characters\n",
                    path);
            return -1;
        }
        if (*n == max) {
            fprintf(stderr, "charter-mcp: %s holds more than %zu credentials\n", path, max);
            return -1;
        }
        out[(*n)++] = line;
    }
    return 0;
}

/* A --http-* number option's value in [min, max] into *out; -1 (printed) when it is not. */
static int http_number(const char *name, const char *v, unsigned long min, unsigned long max,
                       unsigned *out)
{
    char *end = NULL;
    unsigned long n = v && *v >= '0' && *v <= '9' ? strtoul(v, &end, 10) : 0;
    if (!end || *end != '\0' || n < min || n > max) {
        fprintf(stderr, "charter-mcp: %s needs a number from %lu to %lu, got \"%s\"\n", name, min,
                max, v ? v : "");
        return -1;
    }
    *out = (unsigned)n;
    return 0;
}

/* Whether a is one of the --http-* number options; its value is then checked into o. */
static bool http_limit_option(const char *a, const char *v, mcp_http_opts *o, int *bad)
{
    static const struct {
        const char *name;
        unsigned long min, max;
        size_t field;
    } opts[] = {
        {"--http-max-connections", 1, 100000, offsetof(mcp_http_opts, max_connections)},
        {"--http-max-sessions", 1, 100000, offsetof(mcp_http_opts, max_sessions)},
        {"--http-sessions-per-credential", 1, 100000,
         offsetof(mcp_http_opts, sessions_per_credential)},
        {"--http-header-timeout", 0, 86400, offsetof(mcp_http_opts, header_timeout_s)},
        {"--http-body-timeout", 0, 86400, offsetof(mcp_http_opts, body_timeout_s)},
        {"--http-idle-timeout", 0, 86400, offsetof(mcp_http_opts, idle_timeout_s)},
    };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        if (strcmp(a, opts[i].name) == 0) {
            *bad = http_number(a, v, opts[i].min, opts[i].max,
                               (unsigned *)((char *)o + opts[i].field));
            return true;
        }
    }
    return false;
}

/* The role this process plays: its workflow, its step and the downstream servers the step's
 * tools are mapped onto. 0, or the exit status (printed): 2 for a workflow or role that is
 * wrong, 1 when the servers cannot be set up. */
static int start_role(mcp_server *srv, const char *wf, const char *role)
{
    if (load_workflow(srv, wf) != 0 || pick_step(srv, role) != 0)
        return 2;
    return mcp_downstream_open(srv) != 0 ? 1 : 0;
}

static int serve_stdio(mcp_server *srv)
{
    char *buf = malloc(MCP_MAX_MESSAGE + 2);
    mcp_session s = {0};
    if (!buf)
        return -1;
    fprintf(stderr, "charter-mcp: serving step %s on stdio\n", srv->step_name);
    bool oversized;
    long n;
    while ((n = read_line(buf, &oversized)) >= 0) {
        if (n == 0 && !oversized)
            continue;
        char *reply = NULL;
        bool init;
        int rc = mcp_jsonrpc_handle(srv, &s, buf, oversized ? MCP_MAX_MESSAGE + 1 : (size_t)n,
                                    &reply, &init);
        if (rc != 0)
            reply = mcp_jsonrpc_error_text(NULL, MCP_INTERNAL_ERROR, "out of memory");
        if (reply) {
            fputs(reply, stdout);
            fputc('\n', stdout);
            fflush(stdout);
            free(reply);
        }
    }
    mcp_session_end(srv, &s, "the MCP session ended (stdin closed)");
    mcp_tasks_shutdown();
    free(buf);
    return 0;
}

enum { MCP_MAX_CREDENTIALS = 256 };

/* The HTTP clients' credentials: the token file's lines (its text in *tokfile, owned), or the
 * one variable. 0, or -1 (printed). */
static int http_credentials(const char *file, const char *variable, const char **creds, size_t *n,
                            char **tokfile)
{
    *n = 0;
    *tokfile = NULL;
    if (file) {
        size_t len = 0;
        if (!(*tokfile = read_file(file, (size_t)64 * 1024, &len))) {
            fprintf(stderr, "charter-mcp: cannot read %s (at most 64 KiB)\n", file);
            return -1;
        }
        if (parse_credentials(*tokfile, file, creds, MCP_MAX_CREDENTIALS, n) != 0) {
            free(*tokfile);
            *tokfile = NULL;
            return -1;
        }
    } else if (variable && strlen(variable) >= 16) {
        creds[(*n)++] = variable;
    }
    return 0;
}

/* --conformance-fixture: serves the suite's fixture over HTTP, without charterd. */
static int serve_fixture(const char *http, const mcp_http_opts *o)
{
    static mcp_server srv;
    if (!http) {
        fprintf(stderr, "charter-mcp: --conformance-fixture needs --http HOST:PORT\n");
        return 2;
    }
    srv.fixture = true;
    return mcp_http_serve(&srv, o) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *role = NULL, *wf = NULL, *http = NULL, *http_token_file = NULL;
    const char *url = getenv("CHARTER_URL"), *token = getenv("CHARTER_TOKEN");
    const char *http_token = getenv("CHARTER_MCP_HTTP_TOKEN");
    bool no_auth = false, fixture = false;
    mcp_http_opts hopts = {NULL,
                           NULL,
                           0,
                           MCP_HTTP_DEFAULT_MAX_CONNECTIONS,
                           MCP_HTTP_DEFAULT_MAX_SESSIONS,
                           MCP_HTTP_DEFAULT_SESSIONS_PER_CREDENTIAL,
                           MCP_HTTP_DEFAULT_HEADER_TIMEOUT_S,
                           MCP_HTTP_DEFAULT_BODY_TIMEOUT_S,
                           MCP_HTTP_DEFAULT_IDLE_TIMEOUT_S};
    if (token == NULL || *token == '\0') /* as the CLI: --token, $CHARTER_TOKEN, then this */
        token = getenv("CHARTER_OPERATOR_TOKEN");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("charter-mcp %s\n", charter_version());
            return 0;
        } else if (strcmp(a, "--http-no-auth") == 0 || strcmp(a, "--conformance-fixture") == 0) {
            *(a[2] == 'h' ? &no_auth : &fixture) = true;
            continue;
        }
        int bad = 0;
        if (http_limit_option(a, v, &hopts, &bad)) {
            if (bad) {
                usage(stderr);
                return 2;
            }
            i++;
            continue;
        }
        const char **slot = strcmp(a, "--role") == 0              ? &role
                            : strcmp(a, "--workflow") == 0        ? &wf
                            : strcmp(a, "--url") == 0             ? &url
                            : strcmp(a, "--token") == 0           ? &token
                            : strcmp(a, "--http") == 0            ? &http
                            : strcmp(a, "--http-token-file") == 0 ? &http_token_file
                                                                  : NULL;
        if (!slot || !v) {
            fprintf(stderr, "charter-mcp: %s %s\n", a, slot ? "needs a value" : "is no option");
            usage(stderr);
            return 2;
        }
        *slot = v;
        i++;
    }
    mcp_token_given = token != NULL && *token != '\0';
    if (fixture && (role || wf)) {
        fprintf(stderr, "charter-mcp: --conformance-fixture serves the ungated test fixture and "
                        "takes no --role or --workflow\n");
        return 2;
    }
    if (!fixture && (!role || !wf)) {
        fprintf(stderr, "charter-mcp: --role and --workflow are required\n");
        usage(stderr);
        return 2;
    }
    static const char *creds[MCP_MAX_CREDENTIALS];
    size_t n_creds = 0;
    char *tokfile = NULL;
    if (http_credentials(http_token_file, http_token, creds, &n_creds, &tokfile) != 0)
        return 2;
    if (http && !no_auth && n_creds == 0) {
        fprintf(stderr, "charter-mcp: --http needs a bearer credential of at least 16 characters "
                        "(--http-token-file or $CHARTER_MCP_HTTP_TOKEN), or --http-no-auth\n");
        free(tokfile);
        return 2;
    }
    hopts.addr = http;
    hopts.tokens = no_auth ? NULL : creds;
    hopts.n_tokens = no_auth ? 0 : n_creds;
    int ret = 1;
    signal(SIGPIPE, SIG_IGN);
    if (fixture) {
        ret = serve_fixture(http, &hopts);
        free(tokfile);
        return ret;
    }
    static mcp_server srv;
    charter_options opts;
    charter_options_init(&opts);
    opts.tenant = getenv("CHARTER_TENANT");
    int rc = charter_client_open(url ? url : CHARTER_DEFAULT_URL, token, &opts, &srv.client);
    if (rc != 0) {
        fprintf(stderr, "charter-mcp: cannot open %s: %s\n", url ? url : CHARTER_DEFAULT_URL,
                charter_status_name(rc));
        free(tokfile);
        return 1;
    }
    if ((ret = start_role(&srv, wf, role)) != 0)
        goto out;
    ret = (http ? mcp_http_serve(&srv, &hopts) : serve_stdio(&srv)) == 0 ? 0 : 1;
out:
    mcp_downstream_close(&srv);
    json_decref(srv.workflow);
    charter_client_close(srv.client);
    free(tokfile);
    return ret;
}
