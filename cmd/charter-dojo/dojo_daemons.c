/*
 * dojo_daemons.c - the two charterd processes of a pass: charterd (guard on) and
 * charterd-nullgate (guard off), each on a fresh graph, either of the --redis server or of an
 * embedded Redis each starts in its own data folder; waiting for Health, installing a suite
 * (its workflow, and a host credential for its agent), the decision latencies, and stopping.
 */
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dojo.h"

#define DOJO_STARTUP_MS 30000.0
#define DOJO_STOP_MS 15000.0

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* binary next to this program (charter-dojo lives in the build folder beside charterd). */
static int find_binary(const char *name, char *out, size_t n)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return -1;
    self[len] = '\0';
    char *slash = strrchr(self, '/');
    if (slash == NULL)
        return -1;
    slash[1] = '\0';
    if (snprintf(out, n, "%s%s", self, name) >= (int)n)
        return -1;
    return access(out, X_OK) == 0 ? 0 : -1;
}

static void child_exec(const dojo_options *o, dojo_arm *a, int logfd)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0)
        dup2(devnull, STDIN_FILENO);
    dup2(logfd, STDOUT_FILENO);
    dup2(logfd, STDERR_FILENO);
    setenv("CHARTER_OPERATOR_TOKEN", o->token, 1);
    char *argv[16];
    int k = 0;
    argv[k++] = a->binary;
    argv[k++] = "--graph";
    argv[k++] = a->graph;
    argv[k++] = "--listen";
    argv[k++] = a->url;
    argv[k++] = "--workers";
    argv[k++] = "2";
    argv[k++] = "--runners";
    argv[k++] = "0";
    argv[k++] = "--quiet";
    argv[k++] = "--no-integrity-key";
    argv[k++] = o->redis != NULL ? "--redis" : "--data-dir";
    argv[k++] = o->redis != NULL ? (char *)o->redis : a->data;
    argv[k] = NULL;
    execv(a->binary, argv);
    dprintf(STDERR_FILENO, "charter-dojo: cannot run %s: %s\n", a->binary, strerror(errno));
    _exit(127);
}

static int wait_ready(dojo_arm *a)
{
    charter_options co;
    charter_options_init(&co);
    co.timeout_ms = 500;
    charter_client *c = NULL;
    if (charter_client_open(a->url, NULL, &co, &c) != 0)
        return -1;
    double until = dojo_now_ms() + DOJO_STARTUP_MS;
    int rc = -1;
    while (rc != 0 && dojo_now_ms() < until) {
        int status = 0;
        if (waitpid(a->pid, &status, WNOHANG) == a->pid) {
            a->running = false;
            dojo_say("%s exited during startup (log %s)", a->binary, a->log);
            break;
        }
        Charter__V1__HealthResponse *h = NULL;
        charter_status st;
        if (charter_health(c, NULL, &h, &st) == 0) {
            rc = h->status != NULL && strcmp(h->status, "serving") == 0 ? 0 : -1;
            charter__v1__health_response__free_unpacked(h, NULL);
        }
        if (rc != 0)
            sleep_ms(50);
    }
    charter_client_close(c);
    return rc;
}

int dojo_arm_start(const dojo_options *o, dojo_arm *a, unsigned pass)
{
    const char *bin = a->null_gate ? "charterd-nullgate" : "charterd";
    if (find_binary(bin, a->binary, sizeof a->binary) != 0) {
        dojo_say("cannot find %s next to charter-dojo", bin);
        return -1;
    }
    snprintf(a->graph, sizeof a->graph, "dojo_%s_%u_%ld", a->name, pass, (long)getpid());
    snprintf(a->url, sizeof a->url, "ipc://%.3000s/%s%u.sock", o->tmpdir, a->name, pass);
    snprintf(a->log, sizeof a->log, "%.3000s/%s%u.log", o->tmpdir, a->name, pass);
    snprintf(a->data, sizeof a->data, "%.3000s/%s%u.data", o->tmpdir, a->name, pass);
    if (o->redis == NULL && mkdir(a->data, 0700) != 0 && errno != EEXIST)
        return -1;
    int logfd = open(a->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0)
        return -1;
    a->pid = fork();
    if (a->pid == 0)
        child_exec(o, a, logfd);
    close(logfd);
    if (a->pid < 0)
        return -1;
    a->running = true;
    if (wait_ready(a) != 0)
        return -1;
    charter_options co;
    charter_options_init(&co);
    co.timeout_ms = 30000;
    co.connect_timeout_ms = 5000;
    return charter_client_open(a->url, o->token, &co, &a->op) == 0 ? 0 : -1;
}

/* Every key of the arm's graph in the --redis server, deleted (SCAN and DEL). */
static redisContext *redis_connect_url(const char *url)
{
    if (strncmp(url, "unix://", 7) == 0)
        return redisConnectUnix(url + 7);
    char host[256];
    int port = 0;
    if (sscanf(url, "tcp://%255[^:]:%d", host, &port) == 2 ||
        sscanf(url, "redis://%255[^:]:%d", host, &port) == 2)
        return redisConnect(host, port);
    return NULL;
}

/* The host credentials issued for the graph (the registry's set of the graph's credential ids,
 * queries/tenants.lua), deleted with the graph. */
static void drop_credentials(redisContext *rc, const char *graph)
{
    redisReply *ids = redisCommand(rc, "SMEMBERS charter:{_tenants}:creds:%s", graph);
    for (size_t i = 0; ids != NULL && ids->type == REDIS_REPLY_ARRAY && i < ids->elements; i++) {
        redisReply *d = redisCommand(rc, "DEL charter:{_tenants}:cred:%s", ids->element[i]->str);
        if (d != NULL)
            freeReplyObject(d);
    }
    if (ids != NULL)
        freeReplyObject(ids);
    redisReply *d = redisCommand(rc, "DEL charter:{_tenants}:creds:%s", graph);
    if (d != NULL)
        freeReplyObject(d);
}

static void drop_graph(const char *url, const char *graph)
{
    redisContext *rc = redis_connect_url(url);
    if (rc == NULL || rc->err) {
        dojo_say("graph %s left in %s: cannot connect to delete it", graph, url);
        if (rc != NULL)
            redisFree(rc);
        return;
    }
    char cursor[32] = "0";
    do {
        redisReply *r = redisCommand(rc, "SCAN %s MATCH charter:{%s}* COUNT 1000", cursor, graph);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            if (r != NULL)
                freeReplyObject(r);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            redisReply *d = redisCommand(rc, "DEL %s", r->element[1]->element[i]->str);
            if (d != NULL)
                freeReplyObject(d);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    drop_credentials(rc, graph);
    redisFree(rc);
}

void dojo_arm_stop(const dojo_options *o, dojo_arm *a)
{
    for (size_t k = 0; k < DOJO_MAX_SUITES; k++) {
        charter_client_close(a->host[k]);
        a->host[k] = NULL;
    }
    charter_client_close(a->op);
    a->op = NULL;
    if (!a->running)
        return;
    kill(a->pid, SIGTERM);
    double until = dojo_now_ms() + DOJO_STOP_MS;
    int status = 0;
    while (waitpid(a->pid, &status, WNOHANG) == 0) {
        if (dojo_now_ms() > until) {
            kill(a->pid, SIGKILL);
            waitpid(a->pid, &status, 0);
            break;
        }
        sleep_ms(20);
    }
    a->running = false;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        a->unclean++;
        dojo_say("%s (guard %s) did not stop cleanly on SIGTERM (status %d; log %s)", a->binary,
                 a->name, status, a->log);
    }
    if (o->redis != NULL)
        drop_graph(o->redis, a->graph);
}

static int issue_host(dojo_arm *a, const dojo_suite *s, char secret[160], char *err, size_t n)
{
    Charter__V1__IssueCredentialRequest rq = CHARTER__V1__ISSUE_CREDENTIAL_REQUEST__INIT;
    char *actors[1] = {(char *)s->actor};
    rq.role = "host";
    rq.actors = actors;
    rq.n_actors = 1;
    rq.label = "charter-dojo host";
    Charter__V1__IssuedCredential *r = NULL;
    charter_status st;
    if (charter_issue_credential(a->op, &rq, &r, &st) != 0) {
        snprintf(err, n, "%s: IssueCredential: %s", s->name, st.message);
        return -1;
    }
    snprintf(secret, 160, "%s", r->secret);
    charter__v1__issued_credential__free_unpacked(r, NULL);
    return 0;
}

int dojo_arm_install(dojo_arm *a, const dojo_suite *s, size_t k, char *err, size_t n)
{
    Charter__V1__ApplyWorkflowRequest req = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    req.definition.data = (uint8_t *)s->workflow_text;
    req.definition.len = strlen(s->workflow_text);
    Charter__V1__WorkflowInfo *info = NULL;
    charter_status st;
    if (charter_apply_workflow(a->op, &req, &info, &st) != 0) {
        snprintf(err, n, "%s: ApplyWorkflow: %s", s->name, st.message);
        return -1;
    }
    charter__v1__workflow_info__free_unpacked(info, NULL);
    char secret[160];
    if (issue_host(a, s, secret, err, n) != 0)
        return -1;
    charter_options co;
    charter_options_init(&co);
    co.timeout_ms = 30000;
    co.connect_timeout_ms = 5000;
    if (charter_client_open(a->url, secret, &co, &a->host[k]) != 0) {
        snprintf(err, n, "%s: cannot open the host client", s->name);
        return -1;
    }
    return 0;
}

void dojo_latency_add(dojo_arm *a, double ms)
{
    if (a->n_lat == a->cap_lat) {
        size_t nc = a->cap_lat ? a->cap_lat * 2 : 4096;
        double *nl = realloc(a->lat, nc * sizeof *nl);
        if (nl == NULL)
            return;
        a->lat = nl;
        a->cap_lat = nc;
    }
    a->lat[a->n_lat++] = ms;
}

void dojo_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("charter-dojo: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

double dojo_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
