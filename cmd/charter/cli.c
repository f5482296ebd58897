/*
 * cli.c - `charter`, the command-line client of charterd: arguments, commands, exit codes.
 *
 * Each command is one call through libcharter. Output is human-readable by default
 * (cli_print.c) or, with --json, the response message as one JSON document in the proto3 JSON
 * mapping, the shape HTTP/JSON and `charter call` give (cli_json.c).
 * A decision is not an error; only the gate commands turn a deny or unknown into an exit code,
 * so a host script can branch on it.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "charter.h"
#include "cli_archive.h"
#include "cli_whatif.h"
#include "cli_help.h"
#include "cli_json.h"
#include "cli_print.h"
#include "cli_workflow.h"
#include "protojson.h"
#include "receipt.h"

#ifndef CHARTER_VERSION
#define CHARTER_VERSION "unknown"
#endif

enum {
    EXIT_OK = 0,
    EXIT_RPC = 1,
    EXIT_USAGE = 2,
    EXIT_DENY = 3,
    EXIT_UNKNOWN = 4,
    /* deliver: UNKNOWN with EFFECT_UNKNOWN, the delivery may have been committed. */
    EXIT_EFFECT_UNKNOWN = 10,
    /* verify-receipt --public-key: one code per verdict. */
    EXIT_UNSIGNED = 5,
    EXIT_WRONG_KEY = 6,
    EXIT_ALTERED = 7,
    EXIT_CHAIN_BROKEN = 8,
    EXIT_CHAIN_REORDERED = 9,
};

#define DEFAULT_CONNECT_TIMEOUT_MS 2000u
#define MAX_POSITIONAL 1024
#define MAX_OPTIONS 8

typedef struct {
    const char *url;
    const char *token;
    const char *tenant; /* --tenant / $CHARTER_TENANT: metadata "tenant", or NULL */
    uint32_t timeout_ms;
    uint32_t connect_timeout_ms;
    bool timeout_given; /* --timeout-ms was on the command line */
    bool json;
    bool verbose; /* --verbose: the call's request id on stderr */
    charter_client *client;
} cli;

typedef struct {
    const char *pos[MAX_POSITIONAL];
    size_t n_pos;
    const char *opt_name[MAX_OPTIONS]; /* without the leading "--" */
    const char *opt_value[MAX_OPTIONS];
    size_t n_opt;
} cli_args;

typedef struct cli_command {
    const char *name;
    const char *args;                 /* the usage after the command name */
    const char *summary;              /* one line for --help */
    const char *const *value_options; /* options that take a value, without "--" */
    size_t min_pos, max_pos;
    int (*run)(cli *c, const struct cli_command *cmd, const cli_args *a);
} cli_command;

static const char *progname = "charter";

/* ---- small helpers ------------------------------------------------------------------------ */

static int usage_error(const cli_command *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", progname);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    if (cmd != NULL)
        fprintf(stderr, "usage: %s [GLOBAL OPTIONS] %s %s\n", progname, cmd->name, cmd->args);
    else
        fprintf(stderr, "usage: %s [GLOBAL OPTIONS] COMMAND [ARGS]   (see %s --help)\n", progname,
                progname);
    return EXIT_USAGE;
}

/* Prints an RPC failure as one line on stderr. */
static int rpc_error(const charter_status *st)
{
    fprintf(stderr, "%s: %s: ", progname, charter_status_name(st->code));
    if (st->code == CHARTER_UNAUTHENTICATED) {
        fprintf(stderr, "%s\n", cli_help_auth_advice());
        return EXIT_RPC;
    }
    for (const char *p = st->message; *p != '\0'; p++)
        fputc(*p == '\n' || *p == '\r' ? ' ' : *p, stderr);
    if (st->message[0] == '\0')
        fputs("(no message)", stderr);
    fputc('\n', stderr);
    return EXIT_RPC;
}

/* Parses a decimal number in [0, max]; returns 0 or -1. */
static int parse_number(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (s == NULL || *s == '\0')
        return -1;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

static const char *arg_option(const cli_args *a, const char *name)
{
    const char *v = NULL;
    for (size_t i = 0; i < a->n_opt; i++)
        if (strcmp(a->opt_name[i], name) == 0)
            v = a->opt_value[i];
    return v;
}

/* An optional numeric option; 0 or EXIT_USAGE. */
static int number_option(const cli_command *cmd, const cli_args *a, const char *name, uint64_t max,
                         uint64_t *out)
{
    const char *v = arg_option(a, name);
    *out = 0;
    if (v != NULL && parse_number(v, max, out) != 0)
        return usage_error(cmd, "--%s needs a number", name);
    return 0;
}

/* Prints m as one JSON document on stdout, in the proto3 JSON mapping (cli_json.c). */
static int print_json(const ProtobufCMessage *m)
{
    return cli_json_print_message(m) == 0 ? EXIT_OK : EXIT_RPC;
}

/* The exit code of a gate command's decision: 0 allow, 3 deny, 4 unknown (or none). */
static int decision_exit(const Charter__V1__Decision *d)
{
    if (d != NULL && d->outcome == CHARTER__V1__OUTCOME__ALLOW)
        return EXIT_OK;
    if (d != NULL && d->outcome == CHARTER__V1__OUTCOME__DENY)
        return EXIT_DENY;
    return EXIT_UNKNOWN;
}

/* Reads a whole file ("-" for stdin) as text of at most max bytes without NUL bytes. *out is
 * the caller's to free. Returns 0, or EXIT_USAGE with a message printed. */
static int read_text_file(const cli_command *cmd, const char *path, size_t max, char **out)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    size_t cap = 4096, len = 0;
    char *buf;

    *out = NULL;
    if (f == NULL) {
        fprintf(stderr, "%s: cannot open %s: %s\n", progname, path, strerror(errno));
        return EXIT_USAGE;
    }
    if ((buf = malloc(cap)) == NULL) {
        if (f != stdin)
            fclose(f);
        fprintf(stderr, "%s: out of memory\n", progname);
        return EXIT_RPC;
    }
    for (;;) {
        if (len + 1 >= cap) {
            char *grown = cap * 2 <= max + 2 ? realloc(buf, cap * 2) : NULL;
            if (grown == NULL) {
                free(buf);
                if (f != stdin)
                    fclose(f);
                if (cap * 2 > max + 2)
                    return usage_error(cmd, "%s is larger than the largest message", path);
                fprintf(stderr, "%s: out of memory\n", progname);
                return EXIT_RPC;
            }
            buf = grown;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    bool failed = ferror(f) != 0;
    if (f != stdin)
        fclose(f);
    if (failed) {
        free(buf);
        fprintf(stderr, "%s: cannot read %s\n", progname, path);
        return EXIT_USAGE;
    }
    if (memchr(buf, '\0', len) != NULL) {
        free(buf);
        return usage_error(cmd, "%s holds NUL bytes: content must be text", path);
    }
    buf[len] = '\0';
    *out = buf;
    return 0;
}

/* Opens the client on first use, after a command has checked its arguments, so a usage error
 * never waits for a connection. 0 or an exit code. */
static int cli_connect(cli *c)
{
    if (c->client != NULL)
        return 0;
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = c->timeout_ms;
    o.tenant = c->tenant;
    /* Waiting for a connection longer than the call's own deadline would be pointless. */
    o.connect_timeout_ms =
        c->connect_timeout_ms < c->timeout_ms ? c->connect_timeout_ms : c->timeout_ms;
    int rv = charter_client_open(c->url, c->token, &o, &c->client);
    if (rv == 0)
        return 0;
    if (rv == -CHARTER_INVALID_ARGUMENT)
        return usage_error(NULL, "invalid --url \"%s\": use tcp://HOST:PORT or ipc:///PATH",
                           c->url);
    if (rv == -CHARTER_UNAVAILABLE) {
        fprintf(stderr,
                "%s: UNAVAILABLE: no connection to %s within %u ms (is charterd running?)\n",
                progname, c->url, (unsigned)o.connect_timeout_ms);
        return EXIT_RPC;
    }
    fprintf(stderr, "%s: %s: cannot set up a client for %s\n", progname, charter_status_name(rv),
            c->url);
    return EXIT_RPC;
}

/* ---- Runs --------------------------------------------------------------------------------- */

static bool run_active(const char *status)
{
    return status != NULL &&
           (strcmp(status, "queued") == 0 || strcmp(status, "running") == 0 ||
            strcmp(status, "recovering") == 0 || strcmp(status, "pending_approval") == 0);
}

/* Follows run_id with WaitRun until it is no longer queued, running or recovering, or
 * limit_ms passed (0: no limit). Each event is printed to out as it arrives (out NULL: not
 * printed); on a terminal, a progress line per event goes to stderr. Returns EXIT_OK when the
 * run ended, EXIT_RPC after printing why (a failed call, or the limit). */
static int follow_run(cli *c, const char *run_id, uint64_t limit_ms, FILE *out)
{
    bool progress = out == NULL && !c->json && isatty(STDERR_FILENO);
    bool header_done = false;
    uint64_t after = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint32_t poll = c->timeout_ms > 1500 ? c->timeout_ms - 1000 : 500;
    if (poll > 10000)
        poll = 10000;
    for (;;) {
        Charter__V1__WaitRunRequest req = CHARTER__V1__WAIT_RUN_REQUEST__INIT;
        Charter__V1__RunView *v = NULL;
        charter_status st;
        req.run_id = (char *)run_id;
        req.after_seq = after;
        req.timeout_ms = poll;
        struct timespec w0, w1;
        clock_gettime(CLOCK_MONOTONIC, &w0);
        if (charter_wait_run(c->client, &req, &v, &st) != 0)
            return rpc_error(&st);
        clock_gettime(CLOCK_MONOTONIC, &w1);
        /* A charterd with no wait slot free (or a single worker) answers at once with the run
         * as it is: pause before asking again rather than spin on it. */
        long waited_ms = (long)(w1.tv_sec - w0.tv_sec) * 1000 + (w1.tv_nsec - w0.tv_nsec) / 1000000;
        bool nothing_new = v->n_events == 0 && v->run != NULL && run_active(v->run->status);
        if (nothing_new && waited_ms < 100) {
            struct timespec pause = {0, 250 * 1000000L};
            nanosleep(&pause, NULL);
        }
        if (out != NULL)
            cli_print_events_follow(out, v->events, v->n_events, &header_done);
        for (size_t i = 0; i < v->n_events; i++) {
            if (progress)
                fprintf(stderr, "  %llu %s %s\n", (unsigned long long)v->events[i]->seq,
                        v->events[i]->kind, v->events[i]->detail);
            after = v->events[i]->seq;
        }
        if (out != NULL)
            fflush(out);
        bool ended = v->run != NULL && !run_active(v->run->status) && v->run->seq <= after;
        charter__v1__run_view__free_unpacked(v, NULL);
        if (ended)
            return EXIT_OK;
        clock_gettime(CLOCK_MONOTONIC, &t);
        uint64_t ms = (uint64_t)(t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (limit_ms > 0 && ms >= limit_ms) {
            fprintf(stderr, "%s: run %s has not ended after %llu ms\n", progname, run_id,
                    (unsigned long long)ms);
            return EXIT_RPC;
        }
    }
}

/* --budget k=v options into the request's budget entries (at most 4, storage in e and p). */
static int budget_options(const cli_command *cmd, const cli_args *a,
                          Charter__V1__CreateRunRequest *req,
                          Charter__V1__CreateRunRequest__BudgetEntry e[4],
                          Charter__V1__CreateRunRequest__BudgetEntry *p[4], char keys[4][32])
{
    for (size_t i = 0; i < a->n_opt; i++) {
        if (strcmp(a->opt_name[i], "budget") != 0)
            continue;
        const char *v = a->opt_value[i], *eq = strchr(v, '=');
        uint64_t n = 0; /* digits only: strtoll took " 2" and "+2" */
        if (eq == NULL || eq == v || (size_t)(eq - v) >= sizeof keys[0] ||
            parse_number(eq + 1, INT64_MAX, &n) != 0)
            return usage_error(cmd, "--budget is NAME=NUMBER (e.g. max_steps=2), not \"%s\"", v);
        if (req->n_budget >= 4)
            return usage_error(cmd, "at most four --budget options%s", "");
        size_t k = req->n_budget++;
        memcpy(keys[k], v, (size_t)(eq - v));
        keys[k][eq - v] = '\0';
        charter__v1__create_run_request__budget_entry__init(&e[k]);
        e[k].key = keys[k];
        e[k].value = (int64_t)n;
        p[k] = &e[k];
    }
    req->budget = p;
    return 0;
}

static int cmd_run(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    const char *task = arg_option(a, "task"), *mode = arg_option(a, "mode");
    const char *workflow = arg_option(a, "workflow");
    int rv;

    if (mode != NULL && strcmp(mode, "scripted") != 0 && strcmp(mode, "external") != 0 &&
        strcmp(mode, "live") != 0)
        return usage_error(cmd, "--mode is scripted, live or external, not \"%s\"", mode);
    if (task != NULL)
        req.task = (char *)task;
    if (workflow != NULL)
        req.workflow = (char *)workflow;
    if (mode != NULL)
        req.mode = (char *)mode;
    const char *async = arg_option(a, "async");
    if (async != NULL && strcmp(async, "1") != 0)
        return usage_error(cmd, "--async takes no value%s", "");
    req.async = async != NULL;
    Charter__V1__CreateRunRequest__BudgetEntry entries[4], *ptrs[4];
    char keys[4][32];
    if ((rv = budget_options(cmd, a, &req, entries, ptrs, keys)) != 0)
        return rv;
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_create_run(c->client, &req, &v, &st) != 0)
        return rpc_error(&st);
    if (!req.async && v->run != NULL && run_active(v->run->status)) {
        /* Longer than one call's deadline: follow it to its end, then show it whole. */
        char id[80];
        snprintf(id, sizeof id, "%s", v->run->id);
        charter__v1__run_view__free_unpacked(v, NULL);
        v = NULL;
        if ((rv = follow_run(c, id, 0, NULL)) != EXIT_OK)
            return rv;
        Charter__V1__GetRunRequest g = CHARTER__V1__GET_RUN_REQUEST__INIT;
        g.run_id = id;
        if (charter_get_run(c->client, &g, &v, &st) != 0)
            return rpc_error(&st);
    }
    rv = EXIT_OK;
    if (c->json) {
        rv = print_json(&v->base);
    } else {
        const Charter__V1__Run *r = v->run;
        printf("run %s  %s  (%s, %llu events)\n", r != NULL ? r->id : "-",
               r != NULL ? r->status : "-", r != NULL ? r->mode : "-",
               r != NULL ? (unsigned long long)r->seq : 0ULL);
        cli_print_decision_events(stdout, v->events, v->n_events);
    }
    charter__v1__run_view__free_unpacked(v, NULL);
    return rv;
}

static int cmd_wait(cli *c, const cli_command *cmd, const cli_args *a)
{
    (void)cmd;
    /* --timeout-ms, when given, bounds the whole wait as well as each call in it. */
    uint64_t limit = c->timeout_given ? c->timeout_ms : 0;
    int rv;
    if ((rv = cli_connect(c)) != 0)
        return rv;
    rv = follow_run(c, a->pos[0], limit, c->json ? NULL : stdout);
    if (rv != EXIT_OK)
        return rv;
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    req.run_id = (char *)a->pos[0];
    if (charter_get_run(c->client, &req, &v, &st) != 0)
        return rpc_error(&st);
    if (c->json)
        rv = print_json(&v->base);
    else
        cli_print_run(stdout, v->run);
    charter__v1__run_view__free_unpacked(v, NULL);
    return rv;
}

/* Whether CancelRun acts on a run in this status (queries/executor.lua, request_cancel). */
static bool cancel_applies(const char *status)
{
    return strcmp(status, "created") == 0 || strcmp(status, "queued") == 0 ||
           strcmp(status, "running") == 0 || strcmp(status, "recovering") == 0 ||
           strcmp(status, "pending_approval") == 0 || strcmp(status, "blocked") == 0 ||
           strcmp(status, "error") == 0 || strcmp(status, "interrupted") == 0;
}

/* The run's status (n bytes) before a call that ends it: the answer then tells a run the call
 * ended from one that had ended already. With denied_ok (CompleteRun, which a host credential
 * may call though it may not read the run), a PERMISSION_DENIED leaves it "" (not known) and
 * the call goes on: charterd, not this look, decides who may make it. Returns 0, or
 * rpc_error's exit status. */
static int status_before(cli *c, const char *run_id, bool denied_ok, char *status, size_t n)
{
    Charter__V1__GetRunRequest g = CHARTER__V1__GET_RUN_REQUEST__INIT;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    g.run_id = (char *)run_id;
    g.limit = 1;
    status[0] = '\0';
    if (charter_get_run(c->client, &g, &v, &st) != 0)
        return denied_ok && st.code == CHARTER_PERMISSION_DENIED && !st.local ? 0 : rpc_error(&st);
    snprintf(status, n, "%s", v->run && v->run->status ? v->run->status : "");
    charter__v1__run_view__free_unpacked(v, NULL);
    return 0;
}

static int cmd_cancel(cli *c, const cli_command *cmd, const cli_args *a)
{
    (void)cmd;
    Charter__V1__CancelRunRequest req = CHARTER__V1__CANCEL_RUN_REQUEST__INIT;
    Charter__V1__Run *r = NULL;
    charter_status st;
    int rv;
    req.run_id = (char *)a->pos[0];
    req.reason = (char *)(arg_option(a, "reason") ? arg_option(a, "reason") : "");
    if ((rv = cli_connect(c)) != 0)
        return rv;
    /* The status before the call tells a run that had already ended (nothing is cancelled)
     * from one this call cancelled. */
    char before[40] = "";
    if (!c->json && (rv = status_before(c, req.run_id, false, before, sizeof before)) != 0)
        return rv;
    bool ended_before = !c->json && !cancel_applies(before);
    if (charter_cancel_run(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    if (c->json)
        rv = print_json(&r->base);
    else if (ended_before || (!cancel_applies(r->status) && strcmp(r->status, "cancelled") != 0))
        printf("run %s  %s  already ended: nothing was cancelled\n", r->id, r->status);
    else
        printf("run %s  %s%s%s\n", r->id, r->status,
               r->cancel_reason && *r->cancel_reason ? "  cancel requested: " : "",
               r->cancel_reason ? r->cancel_reason : "");
    charter__v1__run__free_unpacked(r, NULL);
    return rv;
}

/* CompleteRun: the host's (here the operator's) word that an external run is over. The status
 * before the call tells a run this call completed from one that was completed already. */
static int cmd_complete(cli *c, const cli_command *cmd, const cli_args *a)
{
    (void)cmd;
    Charter__V1__CompleteRunRequest req = CHARTER__V1__COMPLETE_RUN_REQUEST__INIT;
    Charter__V1__Run *r = NULL;
    charter_status st;
    int rv;
    req.run_id = (char *)a->pos[0];
    req.reason = (char *)(arg_option(a, "reason") ? arg_option(a, "reason") : "");
    if ((rv = cli_connect(c)) != 0)
        return rv;
    char before[40] = "";
    if (!c->json && (rv = status_before(c, req.run_id, true, before, sizeof before)) != 0)
        return rv;
    bool done_before = strcmp(before, "completed") == 0;
    if (charter_complete_run(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    if (c->json)
        rv = print_json(&r->base);
    else
        printf("run %s  %s%s\n", r->id, r->status,
               done_before ? "  already completed: nothing changed" : "");
    charter__v1__run__free_unpacked(r, NULL);
    return rv;
}

static int cmd_checkpoint(cli *c, const cli_command *cmd, const cli_args *a)
{
    (void)cmd;
    Charter__V1__CheckpointRunRequest req = CHARTER__V1__CHECKPOINT_RUN_REQUEST__INIT;
    Charter__V1__Checkpoint *k = NULL;
    charter_status st;
    int rv;
    req.run_id = (char *)a->pos[0];
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_checkpoint_run(c->client, &req, &k, &st) != 0)
        return rpc_error(&st);
    if (c->json) {
        rv = print_json(&k->base);
    } else {
        /* The description goes to stderr, the token alone to stdout: `> FILE` keeps a file
         * charter resume takes. */
        fprintf(stderr,
                "checkpoint %s of run %s: before step %s (index %u), workflow %s, graph %s; "
                "steps %lld, model calls %lld, deliveries %lld, %lld ms%s\n",
                k->checkpoint_id, k->run_id, *k->step ? k->step : "(end)", k->next_step,
                k->workflow, k->graph, (long long)k->steps, (long long)k->model_calls,
                (long long)k->deliveries, (long long)k->wall_clock_ms,
                k->consumed ? "; already consumed" : "");
        printf("%s\n", k->token);
    }
    charter__v1__checkpoint__free_unpacked(k, NULL);
    return rv;
}

/* The token in text: charter checkpoint's plain output or its --json object alike hold one
 * "ckpt1." word; it ends at the first byte outside base64, '.' and hex. */
static char *checkpoint_token_in(char *text)
{
    char *t = strstr(text, "ckpt1.");
    if (t == NULL)
        return NULL;
    size_t n = strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=.");
    t[n] = '\0';
    return t;
}

static int cmd_resume(cli *c, const cli_command *cmd, const cli_args *a)
{
    char *text = NULL;
    int rv = read_text_file(cmd, a->pos[0], 1048576, &text);
    if (rv != 0)
        return rv;
    char *token = checkpoint_token_in(text);
    if (token == NULL) {
        fprintf(stderr, "%s: %s holds no checkpoint token (charter checkpoint RUN > FILE)\n",
                progname, a->pos[0]);
        free(text);
        return EXIT_USAGE;
    }
    Charter__V1__ResumeRunRequest req = CHARTER__V1__RESUME_RUN_REQUEST__INIT;
    Charter__V1__Run *r = NULL;
    charter_status st;
    req.checkpoint = token;
    if ((rv = cli_connect(c)) != 0) {
        free(text);
        return rv;
    }
    int called = charter_resume_run(c->client, &req, &r, &st);
    free(text);
    if (called != 0)
        return rpc_error(&st);
    if (c->json)
        rv = print_json(&r->base);
    else
        printf("run %s  %s  (resumed; follow it with charter wait %s)\n", r->id, r->status, r->id);
    charter__v1__run__free_unpacked(r, NULL);
    return rv;
}

static int cmd_get(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    uint64_t after, limit;
    int rv;

    if ((rv = number_option(cmd, a, "after", UINT64_MAX, &after)) != 0 ||
        (rv = number_option(cmd, a, "limit", UINT32_MAX, &limit)) != 0)
        return rv;
    req.run_id = (char *)a->pos[0];
    req.after_seq = after;
    req.limit = (uint32_t)limit;
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_get_run(c->client, &req, &v, &st) != 0)
        return rpc_error(&st);
    if (c->json)
        rv = print_json(&v->base);
    else
        cli_print_run_view(stdout, v);
    /* The artifacts come in pages too: the next ones, with no events, until the last. */
    req.after_seq = v->run != NULL ? v->run->seq : 0;
    req.artifacts_after = v->artifacts_next;
    charter__v1__run_view__free_unpacked(v, NULL);
    while (rv == EXIT_OK && req.artifacts_after != 0) {
        if (charter_get_run(c->client, &req, &v, &st) != 0)
            return rpc_error(&st);
        if (c->json) {
            rv = print_json(&v->base);
        } else {
            fprintf(stdout, "\nartifacts, continued (%zu)\n", v->n_artifacts);
            cli_print_artifacts(stdout, v->artifacts, v->n_artifacts);
        }
        req.artifacts_after = v->artifacts_next;
        charter__v1__run_view__free_unpacked(v, NULL);
    }
    return rv;
}

static int cmd_list(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__ListRunsRequest req = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
    Charter__V1__ListRunsResponse *r = NULL;
    charter_status st;
    uint64_t limit;
    int rv;

    if ((rv = number_option(cmd, a, "limit", UINT32_MAX, &limit)) != 0)
        return rv;
    req.limit = (uint32_t)limit;
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_list_runs(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    if (c->json)
        rv = print_json(&r->base);
    else
        cli_print_run_list(stdout, r->runs, r->n_runs);
    charter__v1__list_runs_response__free_unpacked(r, NULL);
    return rv;
}

static int cmd_recover(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__RecoverRunRequest req = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    Charter__V1__RecoverRunResponse *r = NULL;
    charter_status st;
    int rv = EXIT_OK;

    req.run_id = (char *)a->pos[0];
    const char *async = arg_option(a, "async");
    if (async != NULL && strcmp(async, "1") != 0)
        return usage_error(cmd, "--async takes no value%s", "");
    req.async = async != NULL;
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_recover_run(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    if (c->json) {
        rv = print_json(&r->base);
    } else {
        const char *recipient = r->recipient && *r->recipient ? r->recipient : NULL;
        printf("run %s  %s\n", r->run != NULL ? r->run->id : a->pos[0],
               r->run != NULL ? r->run->status : "-");
        if (r->decision != NULL)
            cli_print_decision(stdout, "deliver", recipient, r->decision);
        else
            /* Queued on an executor and not ended yet: no decision to show. */
            printf("recovery      in progress on an executor: follow it with charter wait %s\n",
                   r->run != NULL ? r->run->id : a->pos[0]);
        printf("acknowledged  %s\n", r->acknowledged ? "yes (nothing new was delivered)" : "no");
        if (r->n_deliveries > 0) {
            printf("\ndeliveries (%zu)\n", r->n_deliveries);
            cli_print_deliveries(stdout, r->deliveries, r->n_deliveries);
        }
    }
    charter__v1__recover_run_response__free_unpacked(r, NULL);
    return rv;
}

/* ---- Grants ------------------------------------------------------------------------------- */

static int cmd_revoke(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__RevokeGrantRequest req = CHARTER__V1__REVOKE_GRANT_REQUEST__INIT;
    Charter__V1__Grant *g = NULL;
    charter_status st;
    int rv = EXIT_OK;

    (void)cmd;
    req.grant_id = (char *)a->pos[0];
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_revoke_grant(c->client, &req, &g, &st) != 0)
        return rpc_error(&st);
    if (c->json) {
        rv = print_json(&g->base);
    } else {
        char ts[32];
        cli_format_time(g->revoked_at, ts, sizeof(ts));
        printf("revoked %s at %s\n\n", g->id, ts);
        cli_print_grant(stdout, g);
    }
    charter__v1__grant__free_unpacked(g, NULL);
    return rv;
}

static int cmd_restore(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__RestoreGrantsRequest req = CHARTER__V1__RESTORE_GRANTS_REQUEST__INIT;
    Charter__V1__RestoreGrantsResponse *r = NULL;
    charter_status st;
    int rv = EXIT_OK;

    bool all = arg_option(a, "all") != NULL;
    if (a->n_pos > 0 && all)
        return usage_error(cmd, "give a GRANT or --all, not both", NULL);
    if (a->n_pos == 0 && !all)
        return usage_error(cmd,
                           "name the GRANT to restore, or pass --all to restore every revoked "
                           "grant",
                           NULL);
    if (a->n_pos > 0)
        req.grant_id = (char *)a->pos[0];
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_restore_grants(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    if (c->json) {
        rv = print_json(&r->base);
    } else {
        for (size_t i = 0; i < r->n_restored; i++)
            printf("restored %s\n", r->restored[i]);
        if (r->n_restored == 0)
            printf("nothing to restore: %s\n",
                   a->n_pos > 0 ? "the grant is not revoked" : "no grant is revoked");
    }
    charter__v1__restore_grants_response__free_unpacked(r, NULL);
    return rv;
}

/* ---- Resources ---------------------------------------------------------------------------- */

static int cmd_quarantine(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__QuarantineResourceRequest req = CHARTER__V1__QUARANTINE_RESOURCE_REQUEST__INIT;
    Charter__V1__ResourceQuarantine *q = NULL;
    charter_status st;
    int rv = EXIT_OK;

    const char *reason = arg_option(a, "reason");
    if (reason == NULL || reason[0] == '\0')
        return usage_error(cmd, "say why with --reason TEXT (the refusals' witnesses show it)",
                           NULL);
    req.resource_id = (char *)a->pos[0];
    req.reason = (char *)reason;
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_quarantine_resource(c->client, &req, &q, &st) != 0)
        return rpc_error(&st);
    if (c->json) {
        rv = print_json(&q->base);
    } else {
        /* quarantined_at is the database's "<sec>.<usec>" text; shown like every other time. */
        char when[32];
        cli_format_time(q->quarantined_at != NULL ? strtod(q->quarantined_at, NULL) : 0, when,
                        sizeof when);
        printf("quarantined %s at %s by %s: %s\n", q->resource_id, when, q->quarantined_by,
               q->reason);
    }
    charter__v1__resource_quarantine__free_unpacked(q, NULL);
    return rv;
}

static int cmd_release(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__ReleaseResourceRequest req = CHARTER__V1__RELEASE_RESOURCE_REQUEST__INIT;
    Charter__V1__ResourceQuarantine *q = NULL;
    charter_status st;
    int rv = EXIT_OK;

    (void)cmd;
    req.resource_id = (char *)a->pos[0];
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_release_resource(c->client, &req, &q, &st) != 0)
        return rpc_error(&st);
    if (c->json)
        rv = print_json(&q->base);
    else if (q->released)
        printf("released %s\n", q->resource_id);
    else
        printf("nothing to release: %s is not quarantined\n", q->resource_id);
    charter__v1__resource_quarantine__free_unpacked(q, NULL);
    return rv;
}

static int cmd_chain(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__ShowChainRequest req = CHARTER__V1__SHOW_CHAIN_REQUEST__INIT;
    Charter__V1__GrantChain *g = NULL;
    charter_status st;
    int rv = EXIT_OK;

    (void)cmd;
    req.grant_id = (char *)a->pos[0];
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_show_chain(c->client, &req, &g, &st) != 0)
        return rpc_error(&st);
    if (c->json)
        rv = print_json(&g->base);
    else
        cli_print_chain(stdout, g);
    charter__v1__grant_chain__free_unpacked(g, NULL);
    return rv;
}

/* ---- Gate --------------------------------------------------------------------------------- */

static int cmd_trace(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__TraceArtifactRequest req = CHARTER__V1__TRACE_ARTIFACT_REQUEST__INIT;
    Charter__V1__TraceArtifactResponse *r = NULL;
    charter_status st;
    int rv = EXIT_OK;

    (void)cmd;
    req.artifact_id = (char *)a->pos[0];
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_trace_artifact(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    if (c->json)
        rv = print_json(&r->base);
    else
        cli_print_trace(stdout, a->pos[0], r->artifacts, r->n_artifacts);
    if (r->truncated && !c->json)
        printf("truncated: more artifacts are reachable than charterd's ancestry limit; only "
               "the first %zu are shown\n",
               r->n_artifacts);
    charter__v1__trace_artifact_response__free_unpacked(r, NULL);
    return rv;
}

/* Splits "a,b,c" into *items (a malloc'd array whose first entry is the one malloc'd copy of
 * the text; free both) and *n. Empty names are refused. Returns 0 or -1. */
static int cli_split_list(const char *text, char ***items, size_t *n)
{
    size_t count = 1;
    for (const char *p = text; *p != '\0'; p++)
        count += *p == ',';
    char *copy = strdup(text);
    char **out = calloc(count, sizeof *out);
    if (copy == NULL || out == NULL) {
        free(copy);
        free(out);
        return -1;
    }
    size_t k = 0;
    for (char *tok = copy, *end; tok != NULL; tok = end) {
        end = strchr(tok, ',');
        if (end != NULL)
            *end++ = '\0';
        if (*tok == '\0') {
            free(copy);
            free(out);
            return -1;
        }
        out[k++] = tok;
    }
    *items = out;
    *n = k;
    return 0;
}

static int cmd_open_step(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__OpenStepRequest req = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    Charter__V1__StepContext *s = NULL;
    charter_status st;
    int rv = EXIT_OK;
    static const char *const lists[] = {"tools", "recipients", "resources"};
    char **items[3] = {NULL, NULL, NULL};
    size_t counts[3] = {0, 0, 0};

    req.run_id = (char *)a->pos[0];
    req.step = (char *)a->pos[1];
    req.parent_context_id = (char *)arg_option(a, "parent");
    for (size_t k = 0; k < 3; k++) {
        const char *v = arg_option(a, lists[k]);
        if (v != NULL && req.parent_context_id == NULL) {
            rv = usage_error(cmd, "--%s narrows a parent context: add --parent CTX", lists[k]);
            goto done;
        }
        if (v != NULL && cli_split_list(v, &items[k], &counts[k]) != 0) {
            rv = usage_error(cmd, "--%s needs a comma-separated list of names", lists[k]);
            goto done;
        }
    }
    req.tools = items[0];
    req.n_tools = counts[0];
    req.recipients = items[1];
    req.n_recipients = counts[1];
    req.resources = items[2];
    req.n_resources = counts[2];
    if ((rv = cli_connect(c)) != 0)
        goto done;
    if (charter_open_step(c->client, &req, &s, &st) != 0) {
        rv = rpc_error(&st);
        goto done;
    }
    if (c->json)
        rv = print_json(&s->base);
    else
        cli_print_step_context(stdout, s);
    charter__v1__step_context__free_unpacked(s, NULL);
done:
    for (size_t k = 0; k < 3; k++) {
        if (items[k] != NULL)
            free(items[k][0]);
        free(items[k]);
    }
    return rv;
}

static int cmd_read_source(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__ReadSourceRequest req = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    Charter__V1__ReadSourceResponse *r = NULL;
    charter_status st;
    int rv;

    (void)cmd;
    req.context_id = (char *)a->pos[0];
    req.resource_id = (char *)a->pos[1];
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_read_source(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    if (c->json) {
        rv = print_json(&r->base);
    } else {
        rv = EXIT_OK;
        cli_print_decision(stdout, "read", a->pos[1], r->decision);
        if (r->artifact != NULL) {
            cli_print_artifact_line(stdout, "artifact  ", r->artifact);
            putchar('\n');
        }
    }
    if (rv == EXIT_OK)
        rv = decision_exit(r->decision);
    charter__v1__read_source_response__free_unpacked(r, NULL);
    return rv;
}

static int cmd_record_output(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__RecordOutputRequest req = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    Charter__V1__RecordOutputResponse *r = NULL;
    charter_status st;
    const char *title = arg_option(a, "title"), *content = arg_option(a, "content");
    const char *file = arg_option(a, "content-file");
    char *loaded = NULL;
    int rv;

    if (title == NULL)
        return usage_error(cmd, "%s needs --title", cmd->name);
    if ((content == NULL) == (file == NULL))
        return usage_error(cmd, "%s needs one of --content and --content-file", cmd->name);
    if (file != NULL) {
        if ((rv = read_text_file(cmd, file, CHARTER_DEFAULT_MAX_MESSAGE, &loaded)) != 0)
            return rv;
        content = loaded;
    }
    req.context_id = (char *)a->pos[0];
    req.title = (char *)title;
    req.content = (char *)content;
    req.input_ids = (char **)(a->pos + 1);
    req.n_input_ids = a->n_pos - 1;
    if ((rv = cli_connect(c)) != 0) {
        free(loaded);
        return rv;
    }
    rv = charter_record_output(c->client, &req, &r, &st);
    free(loaded);
    if (rv != 0)
        return rpc_error(&st);
    if (c->json) {
        rv = print_json(&r->base);
    } else {
        rv = EXIT_OK;
        cli_print_decision(stdout, "record", title, r->decision);
        if (r->artifact != NULL) {
            cli_print_artifact_line(stdout, "artifact  ", r->artifact);
            fputs("  parents ", stdout);
            for (size_t i = 0; i < r->artifact->n_parents; i++)
                printf("%s%s", i > 0 ? ", " : "", r->artifact->parents[i]);
            if (r->artifact->n_parents == 0)
                fputs("-", stdout);
            putchar('\n');
        }
    }
    if (rv == EXIT_OK)
        rv = decision_exit(r->decision);
    charter__v1__record_output_response__free_unpacked(r, NULL);
    return rv;
}

static int cmd_check_input(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__CheckInputRequest req = CHARTER__V1__CHECK_INPUT_REQUEST__INIT;
    Charter__V1__CheckInputResponse *r = NULL;
    charter_status st;
    int rv;

    (void)cmd;
    req.context_id = (char *)a->pos[0];
    req.artifact_ids = (char **)(a->pos + 1);
    req.n_artifact_ids = a->n_pos - 1;
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_check_input(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    if (c->json) {
        rv = print_json(&r->base);
    } else {
        rv = EXIT_OK;
        cli_print_decision(stdout, "input", a->pos[0], r->decision);
        printf("event     %llu\n", (unsigned long long)r->event_seq);
    }
    if (rv == EXIT_OK)
        rv = decision_exit(r->decision);
    charter__v1__check_input_response__free_unpacked(r, NULL);
    return rv;
}

static int cmd_deliver(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__DeliverRequest req = CHARTER__V1__DELIVER_REQUEST__INIT;
    Charter__V1__DeliverResponse *r = NULL;
    charter_status st;
    int rv;

    (void)cmd;
    req.context_id = (char *)a->pos[0];
    req.payload_id = (char *)a->pos[1];
    req.recipient = (char *)a->pos[2];
    req.tool = (char *)a->pos[3];
    req.invocation_id = (char *)a->pos[4];
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_deliver(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    if (c->json) {
        rv = print_json(&r->base);
    } else {
        rv = EXIT_OK;
        cli_print_decision(stdout, "deliver", a->pos[2], r->decision);
        if (r->delivery != NULL) {
            printf("acknowledged  %s\n",
                   r->acknowledged ? "yes (an earlier delivery; nothing new was sent)" : "no");
            /* A delivery acknowledged from an archived run's compact record has no details
             * (no recipient, tool, payload or event): its archive holds them. */
            const char *archive = r->delivery->archive;
            if (archive == NULL || *archive == '\0' || r->delivery->event_seq > 0)
                cli_print_deliveries(stdout, &r->delivery, 1);
            if (archive != NULL && *archive != '\0')
                printf("archive       %s (run %s left the database; its archive holds the "
                       "delivery)\n",
                       archive, r->delivery->run_id ? r->delivery->run_id : "");
        }
        if (r->pending_approval != NULL && *r->pending_approval != '\0' && r->approval != NULL)
            printf("approval      %s pending: nothing is delivered unless %s approves "
                   "(charter approve %s --as %s)\n",
                   r->pending_approval, r->approval->approver, r->pending_approval,
                   r->approval->approver);
        for (size_t k = 0; r->decision != NULL && k < r->decision->n_codes; k++)
            if (strcmp(r->decision->codes[k], "EFFECT_UNKNOWN") == 0)
                printf("effect        unknown: the delivery may have been committed; run this "
                       "same deliver again (invocation %s) to learn its outcome: an identical "
                       "retry is acknowledged, never delivered twice\n",
                       a->pos[4]);
    }
    if (rv == EXIT_OK)
        rv = decision_exit(r->decision);
    /* Not "nothing happened": the caller must retry with the same invocation ID to learn. */
    for (size_t k = 0; rv == EXIT_UNKNOWN && r->decision != NULL && k < r->decision->n_codes; k++)
        if (strcmp(r->decision->codes[k], "EFFECT_UNKNOWN") == 0)
            rv = EXIT_EFFECT_UNKNOWN;
    charter__v1__deliver_response__free_unpacked(r, NULL);
    return rv;
}

/* ---- Approvals ---------------------------------------------------------------------------- */

/* One approval per line: id, state, approver, the send, the deadline or who decided. */
static void print_approvals(Charter__V1__Approval *const *a, size_t n)
{
    if (n == 0) {
        puts("no approvals");
        return;
    }
    printf("%-36s  %-8s  %-12s  %-24s  %s\n", "approval", "state", "approver", "run", "send");
    for (size_t i = 0; i < n; i++) {
        char when[32];
        bool decided = a[i]->decided_by != NULL && *a[i]->decided_by != '\0';
        cli_format_time(decided ? a[i]->decided_at : a[i]->deadline, when, sizeof when);
        printf("%-36s  %-8s  %-12s  %-24s  %s %s to %s (%s)  %s %s%s%s\n", a[i]->id, a[i]->state,
               a[i]->approver, a[i]->run_id, a[i]->tool, a[i]->payload_id, a[i]->recipient,
               a[i]->invocation_id, decided ? "decided" : "deadline", when, decided ? " by " : "",
               decided ? a[i]->decided_by : "");
        if (a[i]->reason != NULL && *a[i]->reason != '\0')
            printf("%-36s  reason: %s\n", "", a[i]->reason);
    }
}

static int cmd_approvals(cli *c, const cli_command *cmd, const cli_args *a)
{
    (void)cmd;
    Charter__V1__ListApprovalsRequest req = CHARTER__V1__LIST_APPROVALS_REQUEST__INIT;
    Charter__V1__ListApprovalsResponse *r = NULL;
    charter_status st;
    int rv;
    req.run_id = (char *)(arg_option(a, "run") ? arg_option(a, "run") : "");
    req.state = (char *)(arg_option(a, "state") ? arg_option(a, "state") : "");
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_list_approvals(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    if (c->json)
        rv = print_json(&r->base);
    else
        print_approvals(r->approvals, r->n_approvals);
    charter__v1__list_approvals_response__free_unpacked(r, NULL);
    return rv;
}

/* `approve ID --as ACTOR` and `deny ID --as ACTOR [--reason TEXT]`. */
static int decide_approval(cli *c, const cli_args *a, const char *decision)
{
    Charter__V1__DecideApprovalRequest req = CHARTER__V1__DECIDE_APPROVAL_REQUEST__INIT;
    Charter__V1__DecideApprovalResponse *r = NULL;
    charter_status st;
    int rv;
    req.approval_id = (char *)a->pos[0];
    req.decision = (char *)decision;
    req.actor = (char *)arg_option(a, "as");
    req.reason = (char *)(arg_option(a, "reason") ? arg_option(a, "reason") : "");
    if (req.actor == NULL || *req.actor == '\0') {
        fprintf(stderr,
                "%s: %s needs --as ACTOR: the human the approval names, on whose behalf you "
                "decide\n",
                progname, decision);
        return EXIT_USAGE;
    }
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_decide_approval(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    if (c->json) {
        rv = print_json(&r->base);
    } else {
        rv = EXIT_OK;
        cli_print_decision(stdout, decision, r->approval->recipient, r->decision);
        print_approvals(&r->approval, 1);
        if (r->delivery != NULL)
            cli_print_deliveries(stdout, &r->delivery, 1);
    }
    if (rv == EXIT_OK)
        rv = decision_exit(r->decision);
    charter__v1__decide_approval_response__free_unpacked(r, NULL);
    return rv;
}

static int cmd_approve(cli *c, const cli_command *cmd, const cli_args *a)
{
    (void)cmd;
    return decide_approval(c, a, "approve");
}

static int cmd_deny(cli *c, const cli_command *cmd, const cli_args *a)
{
    (void)cmd;
    return decide_approval(c, a, "deny");
}

/* ---- Evidence ----------------------------------------------------------------------------- */

/* "a → b → c", or "-" for none. */
static void print_joined(const char *label, char *const *items, size_t n, const char *sep)
{
    printf("%-16s", label);
    for (size_t i = 0; i < n; i++)
        printf("%s%s", i > 0 ? sep : "", items[i]);
    if (n == 0)
        fputs("-", stdout);
    putchar('\n');
}

static void print_receipt(const Charter__V1__Receipt *r)
{
    char when[32];
    cli_format_time(r->time != NULL ? strtod(r->time, NULL) : 0, when, sizeof(when));
    printf("%-16s%s\n", "receipt", r->kind);
    printf("%-16s%s\n", "run", r->run_id);
    if (strcmp(r->kind, "run") != 0) {
        bool invoke = strcmp(r->kind, "invoke") == 0;
        printf("%-16s%s\n", "invocation", r->invocation_id);
        printf("%-16s%s\n", invoke ? "arguments_hash" : "payload_hash", r->payload_hash);
        printf("%-16s%s\n", invoke ? "destination" : "recipient", r->recipient);
        printf("%-16s%s\n", "tool", r->tool);
        print_joined("grant_chain", r->grant_chain, r->n_grant_chain, " \xe2\x86\x92 ");
        if (invoke)
            print_joined("lineage", r->lineage, r->n_lineage, ", ");
    } else {
        printf("%-16s%s\n", "status", r->status);
        printf("%-16s%llu\n", "last_seq", (unsigned long long)r->last_seq);
        printf("%-16s%s\n", "last_event_hash", r->last_event_hash);
        print_joined("deliveries", r->deliveries, r->n_deliveries, ", ");
        if (r->counters != NULL && *r->counters != '\0') {
            printf("%-16s%s\n", "budget", *r->budget ? r->budget : "-");
            printf("%-16s%s\n", "counters", r->counters);
        }
    }
    printf("%-16s%s (%s)\n", "time", when, r->time);
    printf("%-16s%s\n", "evaluator", r->evaluator);
    printf("%-16s%s\n", "mac", r->mac);
    if (r->signature != NULL && *r->signature != '\0') {
        printf("%-16s%s\n", "signature", r->signature);
        printf("%-16s%s\n", "key_id", r->key_id);
        printf("%-16s%llu\n", "chain_seq", (unsigned long long)r->chain_seq);
        printf("%-16s%s\n", "prev_receipt", *r->prev_receipt_hash ? r->prev_receipt_hash : "-");
    }
}

static int cmd_receipt(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__GetReceiptRequest req = CHARTER__V1__GET_RECEIPT_REQUEST__INIT;
    Charter__V1__Receipt *r = NULL;
    charter_status st;
    int rv;

    (void)cmd;
    req.run_id = (char *)a->pos[0];
    if (a->n_pos > 1)
        req.invocation_id = (char *)a->pos[1];
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_get_receipt(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    rv = EXIT_OK;
    if (c->json)
        rv = print_json(&r->base);
    else
        print_receipt(r);
    charter__v1__receipt__free_unpacked(r, NULL);
    return rv;
}

/* One receipt file as verify-receipt reads it: the receipt (NULL when the file is not a
 * receipt document) and the verdict on it. */
typedef struct {
    const char *file;
    Charter__V1__Receipt *r;
    charter_receipt_verdict verdict;
    char why[320];
} cli_receipt_file;

/* Reads path into f: 0, EXIT_USAGE (unreadable file, message printed), or 1 with f->why set
 * when the file is not a receipt document. The document is a Receipt in the proto3 JSON
 * mapping, as `charter --json receipt` and HTTP/JSON print it; the original snake_case names
 * of older files are read too. A field the Receipt lacks is refused: the mac would not cover
 * it. */
static int receipt_file_read(const cli_command *cmd, const char *path, cli_receipt_file *f)
{
    char *text = NULL;
    ProtobufCMessage *m = NULL;
    char err[256];
    int rv;
    f->file = path;
    if ((rv = read_text_file(cmd, path, (size_t)1 << 20, &text)) != 0)
        return rv;
    rv = protojson_decode(&charter__v1__receipt__descriptor, text, strlen(text), NULL, NULL, &m,
                          err, sizeof err);
    free(text);
    if (rv != PROTOJSON_OK) {
        snprintf(f->why, sizeof(f->why), "not a receipt document: %s", err);
        return 1;
    }
    f->r = (Charter__V1__Receipt *)m;
    return 0;
}

static int verdict_exit(charter_receipt_verdict v)
{
    switch (v) {
    case CHARTER_RECEIPT_VALID:
        return EXIT_OK;
    case CHARTER_RECEIPT_UNSIGNED:
        return EXIT_UNSIGNED;
    case CHARTER_RECEIPT_WRONG_KEY:
        return EXIT_WRONG_KEY;
    case CHARTER_RECEIPT_ALTERED:
        return EXIT_ALTERED;
    case CHARTER_RECEIPT_CHAIN_BROKEN:
        return EXIT_CHAIN_BROKEN;
    case CHARTER_RECEIPT_CHAIN_REORDERED:
        return EXIT_CHAIN_REORDERED;
    case CHARTER_RECEIPT_MALFORMED:
        break;
    }
    return EXIT_RPC;
}

/* The verdict on one read receipt file: its MAC under key (when given; a MAC that does not
 * match is an altered receipt, or one sealed under another key, and exits 1 as always with
 * --key), else its signature under pem (when given). Returns the file's exit status. */
static int receipt_file_verdict(cli_receipt_file *f, const unsigned char *key, size_t key_len,
                                const char *pem)
{
    f->verdict = CHARTER_RECEIPT_MALFORMED;
    if (key != NULL) {
        int mac = charter_receipt_verify(f->r, key, key_len, f->why, sizeof(f->why));
        if (mac == -CHARTER_UNAUTHENTICATED)
            f->verdict = CHARTER_RECEIPT_ALTERED;
        if (mac != 0)
            return EXIT_RPC;
    }
    if (pem != NULL)
        charter_receipt_verify_signed(f->r, pem, strlen(pem), &f->verdict, f->why, sizeof(f->why));
    else
        f->verdict = CHARTER_RECEIPT_VALID;
    return verdict_exit(f->verdict);
}

/* The --json report of verify-receipt: every file's verdict, the chain's, the exit status. */
static int print_verify_json(const cli_receipt_file *files, size_t n, const char *key_id,
                             const char *chain_verdict, const char *chain_why, int rv)
{
    json_t *list = json_array();
    for (size_t i = 0; list != NULL && i < n; i++) {
        const cli_receipt_file *f = &files[i];
        char seq[24];
        snprintf(seq, sizeof seq, "%llu", f->r ? (unsigned long long)f->r->chain_seq : 0ULL);
        json_t *one =
            json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "file", f->file, "verdict",
                      charter_receipt_verdict_name(f->verdict), "reason", f->why, "kind",
                      f->r ? f->r->kind : "", "runId", f->r ? f->r->run_id : "", "chainSeq", seq);
        if (one == NULL || json_array_append_new(list, one) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    json_t *doc = list != NULL ? json_pack("{s:b, s:i, s:o}", "valid", rv == EXIT_OK, "exit", rv,
                                           "receipts", list)
                               : NULL;
    if (doc != NULL && key_id != NULL)
        json_object_set_new(doc, "keyId", json_string(key_id));
    if (doc != NULL && chain_verdict != NULL)
        json_object_set_new(doc, "chain",
                            json_pack("{s:s, s:s}", "verdict", chain_verdict, "reason", chain_why));
    int written = cli_json_print(doc);
    json_decref(doc);
    return written == 0 ? rv : EXIT_RPC;
}

/* Offline: no connection is made. With --key each receipt's MAC is checked against the
 * integrity key; with --public-key each receipt's Ed25519 signature against the public key,
 * and, given several receipts of one run, their chain: in order, none left out between them. */
static int cmd_verify_receipt(cli *c, const cli_command *cmd, const cli_args *a)
{
    const char *keyfile = arg_option(a, "key");
    const char *pubfile = arg_option(a, "public-key");
    char why[256] = "";
    static unsigned char key[CHARTER_RECEIPT_KEY_MAX];
    size_t key_len = 0;
    char *pem = NULL;
    char key_id[65] = "";
    cli_receipt_file *files = NULL;
    size_t n = a->n_pos;
    int rv = EXIT_OK;
    char chain_why[320] = "";
    const char *chain_verdict = NULL;

    if (keyfile == NULL && pubfile == NULL)
        return usage_error(cmd, "%s needs --key KEYFILE or --public-key PUB.pem", cmd->name);
    if (keyfile != NULL &&
        charter_receipt_key_load(keyfile, key, sizeof(key), &key_len, why, sizeof(why)) != 0) {
        fprintf(stderr, "%s: %s\n", progname, why);
        return EXIT_USAGE;
    }
    if (pubfile != NULL) {
        if ((rv = read_text_file(cmd, pubfile, 65536, &pem)) != 0)
            goto out;
        if (charter_receipt_key_id(pem, strlen(pem), key_id, why, sizeof(why)) != 0) {
            fprintf(stderr, "%s: %s: %s\n", progname, pubfile, why);
            rv = EXIT_USAGE;
            goto out;
        }
    }
    if ((files = calloc(n, sizeof(*files))) == NULL) {
        fprintf(stderr, "%s: out of memory\n", progname);
        rv = EXIT_RPC;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        cli_receipt_file *f = &files[i];
        int got = receipt_file_read(cmd, a->pos[i], f);
        if (got == EXIT_USAGE) {
            rv = EXIT_USAGE;
            goto out;
        }
        int e = got == 0 ? receipt_file_verdict(f, keyfile ? key : NULL, key_len, pem) : EXIT_RPC;
        if (got != 0)
            f->verdict = CHARTER_RECEIPT_MALFORMED; /* why is set */
        if (e != EXIT_OK && rv == EXIT_OK)
            rv = e;
    }
    if (rv == EXIT_OK && pubfile != NULL && n > 1) {
        const Charter__V1__Receipt **rs = calloc(n, sizeof(*rs));
        charter_receipt_verdict v = CHARTER_RECEIPT_MALFORMED;
        size_t bad = 0;
        if (rs == NULL) {
            fprintf(stderr, "%s: out of memory\n", progname);
            rv = EXIT_RPC;
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            rs[i] = files[i].r;
        charter_receipt_verify_chain(rs, n, &v, &bad, chain_why, sizeof(chain_why));
        free(rs);
        chain_verdict = charter_receipt_verdict_name(v);
        rv = verdict_exit(v);
    }
    if (c->json) {
        rv = print_verify_json(files, n, pubfile != NULL ? key_id : NULL, chain_verdict, chain_why,
                               rv);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const cli_receipt_file *f = &files[i];
        const char *prefix = n > 1 ? f->file : "";
        const char *sep = n > 1 ? ": " : "";
        if (f->verdict != CHARTER_RECEIPT_VALID) {
            printf("invalid: %s%s%s\n", prefix, sep, f->why);
            continue;
        }
        printf("valid: %s%s%s receipt of run %s%s%s", prefix, sep, f->r->kind, f->r->run_id,
               *f->r->invocation_id ? ", invocation " : "", f->r->invocation_id);
        if (pubfile != NULL && strcmp(f->r->kind, "run") == 0 && f->r->chain_seq > 1)
            /* A run receipt takes the place after the chain's head and names it, but the head
             * stays: the run's next delivery receipt (after a recovery) takes the same place. */
            printf(" (signed by key %.16s..., place %llu in the run's receipt chain: it names the "
                   "last delivery receipt, place %llu, and no later receipt names it)",
                   key_id, (unsigned long long)f->r->chain_seq,
                   (unsigned long long)f->r->chain_seq - 1);
        else if (pubfile != NULL && strcmp(f->r->kind, "run") == 0)
            printf(" (signed by key %.16s..., place 1 in the run's receipt chain: the run had no "
                   "delivery receipt, and no later receipt names it)",
                   key_id);
        else if (pubfile != NULL)
            printf(" (signed by key %.16s..., place %llu in the run's receipt chain)", key_id,
                   (unsigned long long)f->r->chain_seq);
        putchar('\n');
    }
    if (chain_verdict != NULL) {
        if (rv == EXIT_OK)
            printf("valid: chain of %zu receipts of run %s, in order, none missing between them\n",
                   n, files[0].r->run_id);
        else
            printf("invalid: chain: %s\n", chain_why);
    }
out:
    OPENSSL_cleanse(key, sizeof(key));
    for (size_t i = 0; files != NULL && i < n; i++) {
        if (files[i].r != NULL)
            charter__v1__receipt__free_unpacked(files[i].r, NULL);
    }
    free(files);
    free(pem);
    return rv;
}

static int cmd_receipt_key(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__GetReceiptKeyRequest req = CHARTER__V1__GET_RECEIPT_KEY_REQUEST__INIT;
    Charter__V1__ReceiptKey *k = NULL;
    charter_status st;
    int rv;

    (void)cmd;
    (void)a;
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_get_receipt_key(c->client, &req, &k, &st) != 0)
        return rpc_error(&st);
    rv = EXIT_OK;
    if (c->json)
        rv = print_json(&k->base);
    else
        printf("key_id %s %s\n%s", k->algorithm, k->key_id, k->public_key_pem);
    charter__v1__receipt_key__free_unpacked(k, NULL);
    return rv;
}

static int cmd_audit(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__AuditRunRequest req = CHARTER__V1__AUDIT_RUN_REQUEST__INIT;
    Charter__V1__AuditRunResponse *r = NULL;
    charter_status st;
    int rv;

    /* --archive FILE: offline, no connection is made. */
    if (arg_option(a, "archive") != NULL)
        return a->n_pos == 0
                   ? cli_audit_archive(arg_option(a, "archive"), arg_option(a, "key"), c->json)
                   : usage_error(cmd, "%s --archive takes no RUN", cmd->name);
    if (a->n_pos != 1)
        return usage_error(cmd, "%s needs RUN (or --archive FILE)", cmd->name);
    req.run_id = (char *)a->pos[0];
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_audit_run(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    rv = EXIT_OK;
    if (c->json) {
        rv = print_json(&r->base);
    } else {
        char how[160];
        snprintf(how, sizeof how, "%s",
                 r->keyed ? "HMAC-SHA256 under the integrity key" : "SHA-256, no integrity key");
        if (r->keyless_until > 0)
            snprintf(how, sizeof how,
                     "1-%llu SHA-256, sealed by the integrity key when the graph adopted it; "
                     "later ones HMAC-SHA256",
                     (unsigned long long)r->keyless_until);
        if (r->intact)
            printf("run %s: intact (%llu events, %s)\n", a->pos[0], (unsigned long long)r->events,
                   how);
        else
            printf("run %s: NOT intact: %s\n(first bad event %llu; %llu events examined; %s)\n",
                   a->pos[0], r->problem, (unsigned long long)r->first_bad_seq,
                   (unsigned long long)r->events, how);
    }
    if (rv == EXIT_OK && !r->intact)
        rv = EXIT_RPC;
    charter__v1__audit_run_response__free_unpacked(r, NULL);
    return rv;
}

static int cmd_replay(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__ReplayDecisionRequest req = CHARTER__V1__REPLAY_DECISION_REQUEST__INIT;
    Charter__V1__ReplayDecisionResponse *r = NULL;
    charter_status st;
    uint64_t seq = 0;
    int rv;

    /* --archive FILE SEQ: offline, from the archive file alone. */
    if (arg_option(a, "archive") != NULL)
        return a->n_pos == 1 ? cli_replay_archive(arg_option(a, "archive"), a->pos[0], c->json)
                             : usage_error(cmd, "%s --archive FILE takes SEQ alone", cmd->name);
    if (a->n_pos != 2)
        return usage_error(cmd, "%s needs RUN SEQ (or --archive FILE SEQ)", cmd->name);
    if (parse_number(a->pos[1], UINT64_MAX, &seq) != 0 || seq == 0)
        return usage_error(cmd, "SEQ must be an event's seq, 1 or more, not \"%s\"", a->pos[1]);
    req.run_id = (char *)a->pos[0];
    req.seq = seq;
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_replay_decision(c->client, &req, &r, &st) != 0)
        return rpc_error(&st);
    rv = EXIT_OK;
    if (c->json)
        rv = print_json(&r->base);
    else
        cli_print_replay(stdout, a->pos[1], r);
    if (rv == EXIT_OK && !r->no_snapshot && !r->matches)
        rv = EXIT_RPC;
    charter__v1__replay_decision_response__free_unpacked(r, NULL);
    return rv;
}

/* ---- What if ----------------------------------------------------------------------------- */

static int cmd_what_if(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__WhatIfRequest req = CHARTER__V1__WHAT_IF_REQUEST__INIT;
    Charter__V1__WhatIfResponse *r = NULL;
    charter_status st;
    const char *path = arg_option(a, "workflow");
    const char *run = arg_option(a, "run");
    const char *archive = arg_option(a, "archive");
    uint64_t since, limit;
    char *bytes = NULL;
    int rv;

    if (path == NULL)
        return usage_error(cmd, "--workflow %s is required", "NEW.json");
    if (run != NULL && arg_option(a, "since") != NULL)
        return usage_error(cmd, "--run and --since exclude each other%s", "");
    if (archive != NULL && (run != NULL || arg_option(a, "since") != NULL))
        return usage_error(cmd, "--archive excludes --run and --since%s", "");
    if (archive == NULL && arg_option(a, "key") != NULL)
        return usage_error(cmd, "--key is for --archive%s", "");
    if ((rv = number_option(cmd, a, "since", INT64_MAX, &since)) != 0 ||
        (rv = number_option(cmd, a, "limit", 100000, &limit)) != 0)
        return rv;
    if ((rv = read_text_file(cmd, path, (size_t)1 << 20, &bytes)) != 0)
        return rv;
    if (archive != NULL) { /* offline: no connection is made */
        rv = cli_whatif_archive(archive, arg_option(a, "key"), bytes, limit, c->json);
        free(bytes);
        return rv;
    }
    req.workflow.data = (uint8_t *)bytes;
    req.workflow.len = strlen(bytes);
    req.run_id = (char *)(run != NULL ? run : "");
    req.since = (int64_t)since;
    req.limit = (uint32_t)limit;
    if ((rv = cli_connect(c)) != 0 || charter_what_if(c->client, &req, &r, &st) != 0) {
        free(bytes);
        return rv != 0 ? rv : rpc_error(&st);
    }
    free(bytes);
    rv = cli_whatif_print(r, c->json) == 0 ? EXIT_OK : EXIT_RPC;
    charter__v1__what_if_response__free_unpacked(r, NULL);
    return rv;
}

/* ---- Workflows ---------------------------------------------------------------------------- */

static int cmd_workflow(cli *c, const cli_command *cmd, const cli_args *a)
{
    const char *why = cli_workflow_usage(a->pos[0], a->n_pos - 1);
    int rv;

    if (why != NULL)
        return usage_error(cmd, "%s", why);
    /* validate and test need no charterd: no connection is opened for them. */
    if (!cli_workflow_offline(a->pos[0]) && (rv = cli_connect(c)) != 0)
        return rv;
    return cli_workflow_run(c->client, c->json, a->pos[0], a->n_pos > 1 ? a->pos[1] : NULL);
}

/* ---- Health ------------------------------------------------------------------------------- */

static int cmd_health(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__HealthResponse *h = NULL;
    charter_status st;
    int rv = EXIT_OK;

    (void)cmd;
    (void)a;
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_health(c->client, NULL, &h, &st) != 0)
        return rpc_error(&st);
    if (c->json)
        rv = print_json(&h->base);
    else
        cli_print_health(stdout, h);
    if (rv == EXIT_OK && strcmp(h->status, "serving") != 0) {
        fprintf(stderr, "%s: not serving: status %s, database %s\n", progname, h->status,
                h->database[0] != '\0' ? h->database : "-");
        rv = EXIT_RPC;
    }
    charter__v1__health_response__free_unpacked(h, NULL);
    return rv;
}

/* ---- call: any method, JSON in and out ----------------------------------------------------- */

/* Largest JSON request read for `call` (bytes): the server refuses larger messages anyway. */
#define CALL_MAX_JSON ((size_t)64 * 1024 * 1024)

/* `charter call METHOD [JSON|-]`: the request in the proto3 JSON mapping (proto/protojson.h),
 * the method and its message types from charter.v1's generated service descriptors, the call
 * through libcharter like any command, the answer printed in the same mapping. */
static int cmd_call(cli *c, const cli_command *cmd, const cli_args *a)
{
    const char *method = a->pos[0];
    const char *json = a->n_pos > 1 ? a->pos[1] : "{}";
    const ProtobufCMethodDescriptor *md = charter_method_find(method);
    char *text = NULL;
    ProtobufCMessage *req = NULL, *resp = NULL;
    char err[256];
    charter_status st;
    int rv;

    if (md == NULL)
        return usage_error(cmd,
                           "unknown method \"%s\": use /charter.v1.<Service>/<Method> as in "
                           "proto/charter.proto, e.g. /charter.v1.Health/Check",
                           method);
    if (strcmp(json, "-") == 0) {
        if ((rv = read_text_file(cmd, "-", CALL_MAX_JSON, &text)) != 0)
            return rv;
        json = text;
    }
    rv = protojson_decode(md->input, json, strlen(json), NULL, NULL, &req, err, sizeof err);
    if (rv != PROTOJSON_OK) {
        fprintf(stderr, "%s: %s: %s\n", progname, md->input->name, err);
        rv = EXIT_USAGE;
        goto out;
    }
    if ((rv = cli_connect(c)) != 0)
        goto out;
    if (charter_call(c->client, method, req, md->output, &resp, &st) != 0) {
        rv = rpc_error(&st);
        goto out;
    }
    rv = print_json(resp);
out:
    protobuf_c_message_free_unpacked(resp, NULL);
    protobuf_c_message_free_unpacked(req, NULL);
    free(text);
    return rv;
}

/* ---- methods: what charterd serves ---------------------------------------------------------- */

static int cmd_methods(cli *c, const cli_command *cmd, const cli_args *a)
{
    Charter__V1__ListMethodsResponse *r = NULL;
    charter_status st;
    int rv;

    (void)cmd;
    (void)a;
    if ((rv = cli_connect(c)) != 0)
        return rv;
    if (charter_list_methods(c->client, NULL, &r, &st) != 0)
        return rpc_error(&st);
    if (c->json) {
        rv = print_json(&r->base);
    } else {
        /* Columns sized to their longest entry. */
        int w_name = 6, w_req = 7;
        for (size_t i = 0; i < r->n_methods; i++) {
            int n = (int)strlen(r->methods[i]->name), q = (int)strlen(r->methods[i]->request_type);
            w_name = n > w_name ? n : w_name;
            w_req = q > w_req ? q : w_req;
        }
        printf("%-8s  %-*s  %-*s  %s\n", "ROLE", w_name, "METHOD", w_req, "REQUEST", "RESPONSE");
        for (size_t i = 0; i < r->n_methods; i++) {
            const Charter__V1__MethodInfo *m = r->methods[i];
            printf("%-8s  %-*s  %-*s  %s\n", m->min_role, w_name, m->name, w_req, m->request_type,
                   m->response_type);
        }
        rv = EXIT_OK;
    }
    charter__v1__list_methods_response__free_unpacked(r, NULL);
    return rv;
}

/* ---- retrieval: scoped search (charter.v1.Retrieval) --------------------------------------- */

/* Calls a Retrieval method with req (proto3 JSON, consumed) and prints the answer as JSON. */
static int retrieval_call(cli *c, const cli_command *cmd, const char *method, json_t *req)
{
    const ProtobufCMethodDescriptor *md = charter_method_find(method);
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    ProtobufCMessage *in = NULL, *resp = NULL;
    char err[256];
    charter_status st;
    int rv;
    json_decref(req);
    if (md == NULL || text == NULL) {
        fprintf(stderr, "%s: out of memory building %s\n", progname, method);
        rv = EXIT_RPC;
        goto out;
    }
    if (protojson_decode(md->input, text, strlen(text), NULL, NULL, &in, err, sizeof err) !=
        PROTOJSON_OK) {
        rv = usage_error(cmd, "%s", err);
        goto out;
    }
    if ((rv = cli_connect(c)) != 0)
        goto out;
    if (charter_call(c->client, method, in, md->output, &resp, &st) != 0) {
        rv = rpc_error(&st);
        goto out;
    }
    rv = print_json(resp);
out:
    protobuf_c_message_free_unpacked(resp, NULL);
    protobuf_c_message_free_unpacked(in, NULL);
    free(text);
    return rv;
}

/* Every --NAME FIELD=V1,V2 option as [{"field":..,"values":[..]}] ("FIELD=" is deny-all). */
static json_t *retrieval_filters(const cli_args *a, const char *name)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < a->n_opt; i++) {
        if (strcmp(a->opt_name[i], name) != 0)
            continue;
        const char *v = a->opt_value[i], *eq = strchr(v, '=');
        if (eq == NULL || eq == v) {
            json_decref(list);
            return NULL;
        }
        json_t *vals = json_array();
        json_t *f = json_pack("{s:s%, s:o}", "field", v, (size_t)(eq - v), "values", vals);
        for (const char *p = eq + 1; f && *p != '\0';) {
            size_t n = strcspn(p, ",");
            if (n > 0 && json_array_append_new(vals, json_stringn(p, n)) != 0)
                break;
            p += n + (p[n] == ',');
        }
        if (f == NULL || json_array_append_new(list, f) != 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

/* Sets key to the numeric option name when given; 0 or EXIT_USAGE. */
static int retrieval_number(const cli_command *cmd, const cli_args *a, const char *name,
                            json_t *req, const char *key)
{
    uint64_t n = 0;
    int rv = number_option(cmd, a, name, UINT32_MAX, &n);
    if (rv == 0 && n > 0)
        json_object_set_new(req, key, json_integer((json_int_t)n));
    return rv;
}

static int cmd_ingest(cli *c, const cli_command *cmd, const cli_args *a)
{
    char *text = NULL;
    int rv = read_text_file(cmd, a->pos[0], CALL_MAX_JSON, &text);
    if (rv != 0)
        return rv;
    json_t *req = json_loads(text, 0, NULL);
    free(text);
    if (!json_is_object(req)) {
        json_decref(req);
        return usage_error(cmd, "%s is not a JSON object {\"chunks\": [...]}", a->pos[0]);
    }
    return retrieval_call(c, cmd, "/charter.v1.Retrieval/IngestChunks", req);
}

static int cmd_scope_bind(cli *c, const cli_command *cmd, const cli_args *a)
{
    const char *principal = arg_option(a, "principal"), *task = arg_option(a, "task");
    const char *unrestricted = arg_option(a, "unrestricted");
    if (principal == NULL)
        return usage_error(cmd, "%s needs --principal", cmd->name);
    if (unrestricted != NULL && strcmp(unrestricted, "yes") != 0)
        return usage_error(cmd, "--unrestricted takes the value yes, not %s", unrestricted);
    json_t *filters = retrieval_filters(a, "filter");
    if (filters == NULL)
        return usage_error(cmd, "--filter takes FIELD=VALUE,VALUE (FIELD= denies all)%s", "");
    json_t *req = json_pack("{s:s, s:s, s:s, s:o, s:b}", "contextId", a->pos[0], "principal",
                            principal, "task", task ? task : "", "filters", filters, "unrestricted",
                            unrestricted != NULL);
    int rv;
    if (req == NULL || (rv = retrieval_number(cmd, a, "expires-in-ms", req, "expiresInMs")) != 0 ||
        (rv = retrieval_number(cmd, a, "max-follow-ups", req, "maxFollowUps")) != 0) {
        json_decref(req);
        return req == NULL ? EXIT_RPC : rv;
    }
    return retrieval_call(c, cmd, "/charter.v1.Retrieval/BindScope", req);
}

static int cmd_scope_narrow(cli *c, const cli_command *cmd, const cli_args *a)
{
    json_t *filters = retrieval_filters(a, "filter");
    if (filters == NULL)
        return usage_error(cmd, "--filter takes FIELD=VALUE,VALUE (FIELD= denies all)%s", "");
    json_t *req = json_pack("{s:s, s:o}", "scopeId", a->pos[0], "filters", filters);
    int rv;
    if (req == NULL || (rv = retrieval_number(cmd, a, "expires-in-ms", req, "expiresInMs")) != 0 ||
        (rv = retrieval_number(cmd, a, "max-follow-ups", req, "maxFollowUps")) != 0) {
        json_decref(req);
        return req == NULL ? EXIT_RPC : rv;
    }
    return retrieval_call(c, cmd, "/charter.v1.Retrieval/NarrowScope", req);
}

static int cmd_search(cli *c, const cli_command *cmd, const cli_args *a)
{
    json_t *req = json_pack("{s:s, s:s}", "scopeId", a->pos[0], "query", a->pos[1]);
    int rv;
    if (req == NULL || (rv = retrieval_number(cmd, a, "limit", req, "limit")) != 0) {
        json_decref(req);
        return req == NULL ? EXIT_RPC : rv;
    }
    return retrieval_call(c, cmd, "/charter.v1.Retrieval/Search", req);
}

static int cmd_follow_up(cli *c, const cli_command *cmd, const cli_args *a)
{
    return retrieval_call(
        c, cmd, "/charter.v1.Retrieval/FollowUp",
        json_pack("{s:s, s:s}", "parentSearchId", a->pos[0], "proposal", a->pos[1]));
}

static int cmd_scope_checkpoint(cli *c, const cli_command *cmd, const cli_args *a)
{
    const char *principal = arg_option(a, "principal"), *task = arg_option(a, "task");
    if (principal == NULL)
        return usage_error(cmd, "%s needs --principal", cmd->name);
    return retrieval_call(c, cmd, "/charter.v1.Retrieval/CheckpointScope",
                          json_pack("{s:s, s:s, s:s}", "scopeId", a->pos[0], "principal", principal,
                                    "task", task ? task : ""));
}

static int cmd_scope_resume(cli *c, const cli_command *cmd, const cli_args *a)
{
    const char *principal = arg_option(a, "principal"), *task = arg_option(a, "task");
    const char *unrestricted = arg_option(a, "authorized-unrestricted");
    if (principal == NULL)
        return usage_error(cmd, "%s needs --principal", cmd->name);
    if (unrestricted != NULL && strcmp(unrestricted, "yes") != 0)
        return usage_error(cmd, "--authorized-unrestricted takes the value yes, not %s",
                           unrestricted);
    json_t *auth = retrieval_filters(a, "authorized");
    if (auth == NULL)
        return usage_error(cmd, "--authorized takes FIELD=VALUE,VALUE%s", "");
    return retrieval_call(c, cmd, "/charter.v1.Retrieval/ResumeScope",
                          json_pack("{s:s, s:s, s:s, s:s, s:o, s:b}", "checkpointId", a->pos[0],
                                    "contextId", a->pos[1], "principal", principal, "task",
                                    task ? task : "", "authorized", auth, "authorizedUnrestricted",
                                    unrestricted != NULL));
}

static int cmd_retrieval_trace(cli *c, const cli_command *cmd, const cli_args *a)
{
    return retrieval_call(c, cmd, "/charter.v1.Retrieval/TraceRetrieval",
                          json_pack("{s:s}", "artifactId", a->pos[0]));
}

/* ---- Tenants and credentials ------------------------------------------------------------- */

/* The value of option name as a count for a quota (0..10^15); -1 when it is not one. */
static long long quota_option(const cli_args *a, const char *name)
{
    const char *v = arg_option(a, name);
    uint64_t n = 0;
    if (v == NULL)
        return 0;
    return parse_number(v, 1000000000000000ULL, &n) == 0 ? (long long)n : -1;
}

/* The value of option name as a duration ("30d", "12h", "90m", "45s", as charterd's
 * --retention) in seconds; 0 when absent, -1 when it is not one. */
static long long duration_option(const cli_args *a, const char *name)
{
    const char *v = arg_option(a, name);
    if (v == NULL)
        return 0;
    /* Digits and one unit letter, as charterd's own duration options: no sign, no space. */
    size_t digits = strspn(v, "0123456789");
    if (digits == 0 || digits > 12 || v[digits] == '\0' || v[digits + 1] != '\0')
        return -1;
    long long unit = v[digits] == 's'   ? 1
                     : v[digits] == 'm' ? 60
                     : v[digits] == 'h' ? 3600
                     : v[digits] == 'd' ? 86400
                                        : 0;
    long long n = strtoll(v, NULL, 10);
    return n >= 1 && unit > 0 && n <= 3650LL * 86400 / unit ? n * unit : -1;
}

static int cmd_tenant(cli *c, const cli_command *cmd, const cli_args *a)
{
    const char *sub = a->pos[0];
    if (strcmp(sub, "list") == 0 && a->n_pos == 1)
        return retrieval_call(c, cmd, "/charter.v1.Tenants/ListTenants", json_object());
    if (strcmp(sub, "create") != 0 || a->n_pos != 2)
        return usage_error(cmd, "%s", "use tenant create NAME [quotas] or tenant list");
    long long runs = quota_option(a, "max-runs"), arts = quota_option(a, "max-artifacts");
    long long cps = quota_option(a, "calls-per-second");
    long long retention = duration_option(a, "retention");
    long long window = duration_option(a, "invocation-window");
    if (runs < 0 || arts < 0 || cps < 0 || cps > 4294967295LL)
        return usage_error(cmd, "%s", "a quota is a whole number (0: unlimited)");
    if (retention < 0 || window < 0)
        return usage_error(cmd, "%s",
                           "--retention and --invocation-window are durations such as 30d, 12h, "
                           "90m or 45s");
    return retrieval_call(c, cmd, "/charter.v1.Tenants/CreateTenant",
                          json_pack("{s:s, s:{s:I, s:I, s:I, s:I, s:I}}", "name", a->pos[1],
                                    "quotas", "maxRuns", (json_int_t)runs, "maxArtifacts",
                                    (json_int_t)arts, "callsPerSecond", (json_int_t)cps,
                                    "retentionSeconds", (json_int_t)retention,
                                    "invocationWindowSeconds", (json_int_t)window));
}

static int cmd_credential(cli *c, const cli_command *cmd, const cli_args *a)
{
    const char *sub = a->pos[0];
    if (strcmp(sub, "list") == 0 && a->n_pos == 1)
        return retrieval_call(c, cmd, "/charter.v1.Credentials/ListCredentials", json_object());
    if (strcmp(sub, "revoke") == 0 && a->n_pos == 2)
        return retrieval_call(c, cmd, "/charter.v1.Credentials/RevokeCredential",
                              json_pack("{s:s}", "credentialId", a->pos[1]));
    if (strcmp(sub, "issue") != 0 || a->n_pos != 2)
        return usage_error(cmd, "%s",
                           "use credential issue ROLE [--actors A,B] [--label L], credential "
                           "list or credential revoke ID");
    json_t *actors = json_array();
    const char *list = arg_option(a, "actors");
    for (const char *p = list; actors != NULL && p != NULL && *p != '\0';) {
        const char *comma = strchr(p, ',');
        size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
        if (n > 0)
            json_array_append_new(actors, json_stringn(p, n));
        p = comma != NULL ? comma + 1 : p + n;
    }
    const char *label = arg_option(a, "label");
    return retrieval_call(c, cmd, "/charter.v1.Credentials/IssueCredential",
                          json_pack("{s:s, s:o, s:s}", "role", a->pos[1], "actors", actors, "label",
                                    label != NULL ? label : ""));
}

/* ---- command table and main --------------------------------------------------------------- */

static const char *const run_opts[] = {"task", "mode", "workflow", "async", "budget", NULL};
static const char *const wait_opts[] = {NULL};
static const char *const cancel_opts[] = {"reason", NULL};
static const char *const complete_opts[] = {"reason", NULL};
static const char *const open_step_opts[] = {"parent", "tools", "recipients", "resources", NULL};
static const char *const get_opts[] = {"after", "limit", NULL};
static const char *const list_opts[] = {"limit", NULL};
static const char *const record_opts[] = {"title", "content", "content-file", NULL};
static const char *const verify_opts[] = {"key", "public-key", NULL};
static const char *const no_opts[] = {NULL};
static const char *const audit_opts[] = {"archive", "key", NULL};
static const char *const archive_opts[] = {"archive", NULL};
static const char *const recover_opts[] = {"async", NULL};
static const char *const restore_opts[] = {"all", NULL};
static const char *const quarantine_opts[] = {"reason", NULL};
static const char *const what_if_opts[] = {"workflow", "run", "since", "limit",
                                           "archive",  "key", NULL};
static const char *const approvals_opts[] = {"run", "state", NULL};
static const char *const approve_opts[] = {"as", "reason", NULL};
static const char *const scope_bind_opts[] = {
    "principal", "task", "filter", "unrestricted", "expires-in-ms", "max-follow-ups", NULL};
static const char *const scope_narrow_opts[] = {"filter", "expires-in-ms", "max-follow-ups", NULL};
static const char *const search_opts[] = {"limit", NULL};
static const char *const checkpoint_opts[] = {"principal", "task", NULL};
static const char *const resume_opts[] = {"principal", "task", "authorized",
                                          "authorized-unrestricted", NULL};

static const char *const tenant_opts[] = {"max-runs",  "max-artifacts",     "calls-per-second",
                                          "retention", "invocation-window", NULL};
static const char *const credential_opts[] = {"actors", "label", NULL};

static int cmd_help(cli *c, const cli_command *cmd, const cli_args *a);

static const cli_command commands[] = {
    {"run",
     "[--task TEXT] [--mode scripted|live|external] [--workflow NAME|VERSION] [--async] "
     "[--budget NAME=N ...]",
     "create a run (of the startup workflow unless --workflow); scripted (default) drives it to "
     "its end and prints every decision; --async returns once it is queued",
     run_opts, 0, 0, cmd_run},
    {"wait", "RUN [--timeout-ms MS]",
     "follow a run's events as they happen while it is queued, running, recovering or waiting "
     "for an approval, then show its status (an external run, which its host drives, at once)",
     wait_opts, 1, 1, cmd_wait},
    {"cancel", "RUN [--reason TEXT]",
     "cancel a run: a queued one at once, a running one at its next step or during its model "
     "request; it never delivers afterwards",
     cancel_opts, 1, 1, cmd_cancel},
    {"complete", "RUN [--reason TEXT]",
     "end an external run its host drove: created -> completed, with its receipt and, under "
     "retention, its archive to follow",
     complete_opts, 1, 1, cmd_complete},
    {"checkpoint", "RUN",
     "a run's latest checkpoint: its token on stdout (keep it in a file for charter resume), "
     "what it holds on stderr",
     no_opts, 1, 1, cmd_checkpoint},
    {"resume", "CHECKPOINT_FILE|-",
     "resume an interrupted run from a checkpoint (charter checkpoint's output), once", no_opts, 1,
     1, cmd_resume},
    {"get", "RUN [--after N] [--limit N]",
     "a run with its events (seq > --after, at most --limit), deliveries and artifacts", get_opts,
     1, 1, cmd_get},
    {"list", "[--limit N]", "runs, newest first", list_opts, 0, 0, cmd_list},
    {"recover", "RUN [--async]",
     "recover a blocked, interrupted or failed run: an executor runs the recovery step; waits for "
     "its decision unless --async",
     recover_opts, 1, 1, cmd_recover},
    {"revoke", "GRANT", "revoke a grant (operator)", no_opts, 1, 1, cmd_revoke},
    {"restore", "GRANT | --all", "restore a revoked grant, or (--all) every revoked grant",
     restore_opts, 0, 1, cmd_restore},
    {"quarantine", "RESOURCE --reason TEXT",
     "quarantine a resource: every artifact derived from it, in any run, is refused at every "
     "gate until it is released (operator)",
     quarantine_opts, 1, 1, cmd_quarantine},
    {"release", "RESOURCE", "release a quarantined resource (operator)", no_opts, 1, 1,
     cmd_release},
    {"chain", "GRANT", "a grant's delegation chain, leaf first, with the guard's verdict", no_opts,
     1, 1, cmd_chain},
    {"trace", "ARTIFACT", "an artifact's ancestry as a tree", no_opts, 1, 1, cmd_trace},
    {"health", "", "charterd's health (no token needed)", no_opts, 0, 0, cmd_health},
    {"open-step", "RUN STEP [--parent CTX [--tools A,B] [--recipients A,B] [--resources A,B]]",
     "open a context of a step of an external run; with --parent, a child context narrowed to "
     "the lists given",
     open_step_opts, 2, 2, cmd_open_step},
    {"read-source", "CTX RESOURCE", "register a resource of the step as a source artifact", no_opts,
     2, 2, cmd_read_source},
    {"record-output", "CTX --title T (--content C | --content-file F) INPUT_ID...",
     "record a model output derived from exactly INPUT_IDs (F may be - for stdin)", record_opts, 1,
     MAX_POSITIONAL, cmd_record_output},
    {"check-input", "CTX ID...", "the input gate over artifacts for the context's step", no_opts, 2,
     MAX_POSITIONAL, cmd_check_input},
    {"deliver", "CTX PAYLOAD RECIPIENT TOOL INVOCATION_ID",
     "the delivery gate; on allow the delivery is committed once per invocation ID", no_opts, 5, 5,
     cmd_deliver},
    {"replay", "RUN SEQ | --archive FILE SEQ",
     "decide a recorded decision event again from its snapshot; compare with the record "
     "(--archive: from an archived run's file, offline)",
     archive_opts, 1, 2, cmd_replay},
    {"receipt", "RUN [INVOCATION_ID]",
     "the receipt of a delivery or of a tool call's effect, or of the run once it ended (--json: "
     "the document verify-receipt reads)",
     no_opts, 1, 2, cmd_receipt},
    {"verify-receipt", "FILE... (--key KEYFILE | --public-key PUB.pem)",
     "check receipts (the --json output of receipt) offline: the MAC against the integrity key, "
     "or the signature against charterd's public key; several receipts of one run, given in "
     "order, are checked as a chain too",
     verify_opts, 1, MAX_POSITIONAL, cmd_verify_receipt},
    {"receipt-key", "",
     "the public key (PEM) and key id charterd signs receipts with (for verify-receipt "
     "--public-key)",
     no_opts, 0, 0, cmd_receipt_key},
    {"audit", "RUN | --archive FILE [--key KEYFILE]",
     "walk the run's event hash chain; name the first event changed, removed or "
     "inserted, an artifact whose lineage summary differs from its raw graph, or a node "
     "of the run's workflow (a grant's edges) changed behind the API (--archive: an "
     "archived run's file, offline, with its receipts)",
     audit_opts, 0, 1, cmd_audit},
    {"what-if",
     "--workflow NEW.json [--run RUN | --since SECONDS | --archive FILE|FOLDER [--key KEYFILE]] "
     "[--limit N]",
     "decide the recorded decisions (of RUN, or of the runs of the candidate's workflow name "
     "created since SECONDS since the epoch) "
     "again under a candidate workflow and list those that would change; writes nothing "
     "(--archive: the archived run, or every run a graph's archive folder indexes, offline)",
     what_if_opts, 0, 0, cmd_what_if},
    {"workflow", CLI_WORKFLOW_USAGE,
     "with no charterd: validate a definition (every problem, exit 1 on any) or test it by the "
     "cases of a test file (exit 1 on any FAIL); on a charterd: apply a definition (operator), "
     "list or show stored ones, or rehearse FILE: apply it, run it scripted and check its expect "
     "list (exit 1 on any FAIL)",
     no_opts, 1, 2, cmd_workflow},
    {"ingest", "FILE", "index chunks of registered resources for scoped search (operator)", no_opts,
     1, 1, cmd_ingest},
    {"scope-bind",
     "CTX --principal P (--filter FIELD=V,V... | --unrestricted yes) [--task T] "
     "[--expires-in-ms N] [--max-follow-ups N]",
     "bind a retrieval scope to a step's context (operator)", scope_bind_opts, 1, 1,
     cmd_scope_bind},
    {"scope-narrow", "SCOPE --filter FIELD=V,V... [--expires-in-ms N] [--max-follow-ups N]",
     "a narrower child of a scope (operator)", scope_narrow_opts, 1, 1, cmd_scope_narrow},
    {"search", "SCOPE QUERY [--limit N]",
     "search within a scope; the hits become source artifacts of its context", search_opts, 2, 2,
     cmd_search},
    {"follow-up", "SEARCH PROPOSAL_JSON",
     "search the parent search's scope with an untrusted proposal {\"query\": ...}", no_opts, 2, 2,
     cmd_follow_up},
    {"scope-checkpoint", "SCOPE --principal P [--task T]",
     "save a scope bound to its principal and task (operator)", checkpoint_opts, 1, 1,
     cmd_scope_checkpoint},
    {"scope-resume",
     "CHECKPOINT CTX --principal P [--task T] (--authorized FIELD=V,V... | "
     "--authorized-unrestricted yes)",
     "resume a saved scope for its binding, within the caller's current authorization", resume_opts,
     2, 2, cmd_scope_resume},
    {"retrieval-trace", "ARTIFACT", "the searches and scopes that retrieved an artifact", no_opts,
     1, 1, cmd_retrieval_trace},
    {"tenant",
     "create NAME [--max-runs N] [--max-artifacts N] [--calls-per-second N] [--retention DURATION] "
     "[--invocation-window DURATION] | list",
     "create a tenant (a graph) with its quotas, printing its first operator credential once, "
     "or list tenants (admin token)",
     tenant_opts, 1, 2, cmd_tenant},
    {"credential", "issue ROLE [--actors A,B] [--label L] | list | revoke ID",
     "issue (operator, viewer or host acting for actors; the secret is printed once), list or "
     "revoke a credential of the tenant (operator)",
     credential_opts, 1, 2, cmd_credential},
    {"approvals", "[--run RUN] [--state STATE]",
     "human approvals deliveries wait for or ended with, newest first", approvals_opts, 0, 0,
     cmd_approvals},
    {"approve", "APPROVAL --as ACTOR [--reason TEXT]",
     "approve a held delivery on behalf of its human: it commits, re-checked now (operator)",
     approve_opts, 1, 1, cmd_approve},
    {"deny", "APPROVAL --as ACTOR [--reason TEXT]",
     "deny a held delivery on behalf of its human: it is never delivered (operator)", approve_opts,
     1, 1, cmd_deny},
    {"help", "[COMMAND]", "this help, or a command's usage, options and an example", no_opts, 0, 1,
     cmd_help},
    {"call", "METHOD [JSON|-]",
     "call any method, e.g. /charter.v1.Gate/Deliver, with its request as proto3 JSON (default "
     "{}; - reads stdin); prints the answer as proto3 JSON",
     no_opts, 1, 2, cmd_call},
    {"methods", "",
     "every method charterd serves, with its request and response messages and the least "
     "token it needs (viewer)",
     no_opts, 0, 0, cmd_methods},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void print_help(FILE *out)
{
    fprintf(out,
            "usage: %s [GLOBAL OPTIONS] COMMAND [ARGS]\n"
            "\n"
            "The command-line client of charterd, which decides whether an agent's action may\n"
            "happen and records why.\n"
            "\n"
            "global options (anywhere on the line):\n"
            "  --url URL               tcp://HOST:PORT or ipc:///PATH (default: $CHARTER_URL,\n"
            "                          else %s)\n"
            "  --token TOKEN           bearer token (default: $CHARTER_TOKEN, else\n"
            "                          $CHARTER_OPERATOR_TOKEN)\n"
            "  --tenant NAME           the tenant (graph) to act on, sent as metadata \"tenant\"\n"
            "                          (default: $CHARTER_TENANT, else the credential's or\n"
            "                          charterd's default graph)\n"
            "  --timeout-ms N          deadline of the call in milliseconds (default %u)\n"
            "  --connect-timeout-ms N  wait at most N ms for a connection (default %u; 0: wait\n"
            "                          within the call's deadline)\n"
            "  --json                  print the answer as one JSON document in the proto3\n"
            "                          JSON mapping, as HTTP/JSON does (lowerCamelCase,\n"
            "                          defaults left out, 64-bit integers as strings)\n"
            "  --verbose               print the call's request id on stderr (with --json, a\n"
            "                          failed call prints {\"requestId\": ...} there too)\n"
            "  --help                  this help; COMMAND --help shows the command's usage\n"
            "  --version               the version of charter and libcharter\n"
            "\n"
            "commands:\n",
            progname, CHARTER_DEFAULT_URL, (unsigned)CHARTER_DEFAULT_TIMEOUT_MS,
            (unsigned)DEFAULT_CONNECT_TIMEOUT_MS);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %s%s%s\n      %s\n", commands[i].name, commands[i].args[0] ? " " : "",
                commands[i].args, commands[i].summary);
    fputs("\n"
          "exit status:\n"
          "  0  success; for read-source, record-output, check-input and deliver: allow\n"
          "  1  the call failed (RPC error, no connection, timeout), or health is not serving;\n"
          "     one line \"charter: STATUS: message\" on stderr. Also: audit found the run's\n"
          "     events changed, removed or inserted; verify-receipt found the receipt invalid\n"
          "     (the reason on stdout); replay decided otherwise than recorded; workflow\n"
          "     validate found a problem; workflow test or rehearse had a FAIL\n"
          "  2  usage error, or a file that cannot be read (for verify-receipt, a key file\n"
          "     that breaks the key rules; for workflow test, a malformed test file)\n"
          "  3  read-source, record-output, check-input, deliver: the decision is deny\n"
          "  4  read-source, record-output, check-input, deliver: the decision is unknown\n"
          "     (facts were missing: fail closed, nothing happened)\n"
          "  5  verify-receipt --public-key: a receipt carries no signature\n"
          "  6  verify-receipt --public-key: signed by another key than the one given\n"
          "  7  verify-receipt --public-key: a receipt was altered (a changed byte)\n"
          "  8  verify-receipt --public-key: a receipt of the run is missing from the chain\n"
          "  9  verify-receipt --public-key: the receipts are not in their chain's order\n"
          " 10  deliver: unknown with EFFECT_UNKNOWN: the delivery may have been committed;\n"
          "     run the same deliver with the same invocation ID again to learn its outcome\n"
          "A deny or unknown from run, recover or chain is reported, not an error: exit 0.\n",
          out);
}

static const cli_command *command_find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static bool takes_value(const cli_command *cmd, const char *name)
{
    for (const char *const *o = cmd->value_options; *o != NULL; o++)
        if (strcmp(*o, name) == 0)
            return true;
    return false;
}

/* A command's usage, summary, options and example (cli_help.c). */
static void print_command_help(FILE *out, const cli_command *cmd)
{
    fprintf(out, "usage: %s [GLOBAL OPTIONS] %s%s%s\n\n  %s\n", progname, cmd->name,
            cmd->args[0] ? " " : "", cmd->args, cmd->summary);
    cli_help_print_details(out, cmd->name);
    fprintf(out, "\nglobal options (--url, --token, --json, ...): %s --help\n", progname);
}

/* `charter help [COMMAND]`; `charter help --commands` lists the command names, one a line,
 * for shell completion. */
static int cmd_help(cli *c, const cli_command *cmd, const cli_args *a)
{
    (void)c;
    if (a->n_pos == 0) {
        print_help(stdout);
        return EXIT_OK;
    }
    const cli_command *about = command_find(a->pos[0]);
    if (about == NULL)
        return usage_error(cmd, "unknown command \"%s\"", a->pos[0]);
    print_command_help(stdout, about);
    return EXIT_OK;
}

/* Splits the command's words into options and positional arguments. */
static int parse_command_args(const cli_command *cmd, char **words, int n, cli_args *a)
{
    bool only_positional = false;
    memset(a, 0, sizeof(*a));
    for (int i = 0; i < n; i++) {
        const char *w = words[i];
        if (!only_positional && strcmp(w, "--") == 0) {
            only_positional = true;
            continue;
        }
        if (!only_positional && w[0] == '-' && w[1] != '\0') {
            if (w[1] != '-')
                return usage_error(cmd, "unknown option %s", w);
            char name[64];
            const char *eq = strchr(w + 2, '=');
            size_t len = eq != NULL ? (size_t)(eq - (w + 2)) : strlen(w + 2);
            if (len == 0 || len >= sizeof(name))
                return usage_error(cmd, "unknown option %s", w);
            memcpy(name, w + 2, len);
            name[len] = '\0';
            if (!takes_value(cmd, name))
                return usage_error(cmd, "unknown option %s", w);
            const char *value = eq != NULL ? eq + 1 : NULL;
            if (value == NULL && (strcmp(name, "async") == 0 || strcmp(name, "all") == 0)) {
                value = "1"; /* the options that are flags */
            } else if (value == NULL) {
                if (i + 1 >= n)
                    return usage_error(cmd, "%s needs a value", w);
                value = words[++i];
            }
            if (a->n_opt >= MAX_OPTIONS)
                return usage_error(cmd, "too many options at %s", w);
            /* Point at the name inside the word itself so it outlives this loop. */
            a->opt_name[a->n_opt] = NULL;
            for (const char *const *o = cmd->value_options; *o != NULL; o++)
                if (strcmp(*o, name) == 0)
                    a->opt_name[a->n_opt] = *o;
            a->opt_value[a->n_opt++] = value;
            continue;
        }
        if (a->n_pos >= MAX_POSITIONAL)
            return usage_error(cmd, "too many arguments at %s", w);
        a->pos[a->n_pos++] = w;
    }
    if (a->n_pos < cmd->min_pos)
        return usage_error(cmd, "%s needs more arguments", cmd->name);
    if (a->n_pos > cmd->max_pos)
        return usage_error(cmd, "too many arguments for %s", cmd->name);
    for (size_t i = 0; i < a->n_pos; i++)
        if (a->pos[i][0] == '\0')
            return usage_error(cmd, "empty argument to %s", cmd->name);
    return 0;
}

/* Global options, which may appear anywhere. The rest is copied in order into rest. */
typedef struct {
    bool help, version;
} cli_flags;

static int parse_global(int argc, char **argv, cli *c, cli_flags *fl, char **rest, int *n_rest)
{
    static const char *const valued[] = {"url", "token", "timeout-ms", "connect-timeout-ms",
                                         "tenant"};
    bool only_positional = false;
    *n_rest = 0;
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        bool is_option = strncmp(w, "--", 2) == 0 || strcmp(w, "-h") == 0;
        if (only_positional || !is_option || strcmp(w, "--") == 0) {
            if (strcmp(w, "--") == 0)
                only_positional = true;
            rest[(*n_rest)++] = argv[i];
            continue;
        }
        if (strcmp(w, "--json") == 0) {
            c->json = true;
            continue;
        }
        if (strcmp(w, "--verbose") == 0) {
            c->verbose = true;
            continue;
        }
        if (strcmp(w, "--help") == 0 || strcmp(w, "-h") == 0) {
            fl->help = true;
            continue;
        }
        if (strcmp(w, "--version") == 0) {
            fl->version = true;
            continue;
        }
        const char *value = NULL;
        size_t which = sizeof(valued) / sizeof(valued[0]);
        for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]); k++) {
            size_t len = strlen(valued[k]);
            if (strncmp(w + 2, valued[k], len) == 0 && (w[2 + len] == '\0' || w[2 + len] == '=')) {
                which = k;
                value = w[2 + len] == '=' ? w + 3 + len : NULL;
                break;
            }
        }
        if (which == sizeof(valued) / sizeof(valued[0])) {
            rest[(*n_rest)++] = argv[i]; /* a command option */
            continue;
        }
        if (value == NULL) {
            if (i + 1 >= argc)
                return usage_error(NULL, "%s needs a value", w);
            value = argv[++i];
        }
        uint64_t n = 0;
        switch (which) {
        case 0:
            c->url = value;
            break;
        case 1:
            c->token = value;
            break;
        case 2:
            if (parse_number(value, CHARTER_MAX_TIMEOUT_MS, &n) != 0 || n == 0)
                return usage_error(NULL,
                                   "--timeout-ms needs a number of milliseconds, 1 to "
                                   "3600000, not \"%s\"",
                                   value);
            c->timeout_ms = (uint32_t)n;
            c->timeout_given = true;
            break;
        case 4:
            c->tenant = value;
            break;
        default:
            if (parse_number(value, CHARTER_MAX_TIMEOUT_MS, &n) != 0)
                return usage_error(NULL,
                                   "--connect-timeout-ms needs a number of milliseconds, "
                                   "0 to 3600000, not \"%s\"",
                                   value);
            c->connect_timeout_ms = (uint32_t)n;
            break;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    cli c;
    cli_flags fl = {false, false};
    cli_args args;
    char **rest;
    int n_rest = 0, rv;

    memset(&c, 0, sizeof(c));
    c.url = getenv("CHARTER_URL");
    if (c.url == NULL || c.url[0] == '\0')
        c.url = CHARTER_DEFAULT_URL;
    c.token = getenv("CHARTER_TOKEN");
    if (c.token == NULL || c.token[0] == '\0')
        c.token = getenv("CHARTER_OPERATOR_TOKEN");
    c.tenant = getenv("CHARTER_TENANT");
    c.timeout_ms = CHARTER_DEFAULT_TIMEOUT_MS;
    c.connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;

    if ((rest = calloc((size_t)argc + 1, sizeof(*rest))) == NULL) {
        fprintf(stderr, "%s: out of memory\n", progname);
        return EXIT_RPC;
    }
    if ((rv = parse_global(argc, argv, &c, &fl, rest, &n_rest)) != 0)
        goto done;
    cli_help_note_token(c.token);
    if (fl.version) {
        printf("charter %s (libcharter %s)\n", CHARTER_VERSION, charter_version());
        rv = EXIT_OK;
        goto done;
    }
    int first = (n_rest > 0 && strcmp(rest[0], "--") == 0) ? 1 : 0;
    if (n_rest <= first) {
        if (fl.help) {
            print_help(stdout);
            rv = EXIT_OK;
        } else {
            rv = usage_error(NULL, "%s", "no command given");
        }
        goto done;
    }
    const cli_command *cmd = command_find(rest[first]);
    if (cmd == NULL) {
        rv = fl.help ? (print_help(stdout), EXIT_OK)
                     : usage_error(NULL, "unknown command \"%s\"", rest[first]);
        goto done;
    }
    if (fl.help) {
        print_command_help(stdout, cmd);
        rv = EXIT_OK;
        goto done;
    }
    if (cmd->run == cmd_help && n_rest - first == 2 && strcmp(rest[first + 1], "--commands") == 0) {
        for (size_t i = 0; i < N_COMMANDS; i++)
            printf("%s\n", commands[i].name);
        rv = EXIT_OK;
        goto done;
    }
    if ((rv = parse_command_args(cmd, rest + first + 1, n_rest - first - 1, &args)) != 0)
        goto done;
    rv = cmd->run(&c, cmd, &args);
    if (c.verbose || (c.json && rv == EXIT_RPC)) {
        /* The id that names the call in charterd's log and on the events it caused. */
        char request_id[129];
        charter_client_last_request_id(c.client, request_id);
        if (request_id[0] != '\0' && c.json)
            fprintf(stderr, "{\"requestId\":\"%s\"}\n", request_id);
        else if (request_id[0] != '\0')
            fprintf(stderr, "%s: request id %s\n", progname, request_id);
    }
    charter_client_close(c.client);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: cannot write the output\n", progname);
        rv = EXIT_RPC;
    }
done:
    free(rest);
    return rv;
}
