/*
 * bench_redis.c - charter-bench speaking to Redis directly, never through charterd: whether the
 * graph is empty and deleting it afterwards, Redis's own counters around a load (INFO
 * commandstats and used_memory), and Redis's ceiling, a no-op function (library benchnoop)
 * called by redis-benchmark with as many clients as the load has threads.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/* Connects to unix:///path or tcp://host:port; NULL with err set on failure. */
redisContext *redis_open(const char *url, char *err, size_t errlen)
{
    struct timeval tv = {5, 0};
    redisContext *rc = NULL;
    if (strncmp(url, "unix://", 7) == 0) {
        rc = redisConnectUnixWithTimeout(url + 7, tv);
    } else {
        char host[256];
        const char *hp = url + 6;
        const char *colon = strrchr(hp, ':');
        unsigned long port = 0;
        if (colon == NULL || (size_t)(colon - hp) >= sizeof host ||
            parse_ulong(colon + 1, 1, 65535, &port) != 0) {
            snprintf(err, errlen, "cannot parse %s (use tcp://host:port)", url);
            return NULL;
        }
        memcpy(host, hp, (size_t)(colon - hp));
        host[colon - hp] = '\0';
        rc = redisConnectWithTimeout(host, (int)port, tv);
    }
    if (rc == NULL) {
        snprintf(err, errlen, "cannot reach Redis at %s: out of memory", url);
        return NULL;
    }
    if (rc->err) {
        snprintf(err, errlen, "cannot reach Redis at %s: %s", url, rc->errstr);
        redisFree(rc);
        return NULL;
    }
    if (redisSetTimeout(rc, (struct timeval){60, 0}) != REDIS_OK) {
        snprintf(err, errlen, "cannot set a timeout on the Redis connection");
        redisFree(rc);
        return NULL;
    }
    return rc;
}

/* One command; returns the reply (caller frees) or NULL with err set (also for an error
 * reply). */
redisReply *redis_do(redisContext *rc, int argc, const char **argv, char *err, size_t errlen)
{
    size_t lens[8];
    for (int i = 0; i < argc && i < 8; i++)
        lens[i] = strlen(argv[i]);
    redisReply *r = redisCommandArgv(rc, argc, argv, lens);
    if (r == NULL) {
        snprintf(err, errlen, "%s: %s", argv[0], rc->errstr[0] ? rc->errstr : "no reply");
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%s: %s", argv[0], r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* The master of slot in a CLUSTER SLOTS reply, as tcp://host:port into node ("" if none). */
static void cluster_slot_master(const redisReply *r, long long slot, char *node, size_t len)
{
    node[0] = '\0';
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type == REDIS_REPLY_ARRAY && e->elements >= 3 && slot >= e->element[0]->integer &&
            slot <= e->element[1]->integer && e->element[2]->type == REDIS_REPLY_ARRAY &&
            e->element[2]->elements >= 2 && e->element[2]->element[0]->type == REDIS_REPLY_STRING)
            snprintf(node, len, "tcp://%s:%lld", e->element[2]->element[0]->str,
                     e->element[2]->element[1]->integer);
    }
}

/* A connection to the server holding graph: url itself, or on a cluster:// URL the master
 * of the graph's slot (asked of the first seed: CLUSTER KEYSLOT, CLUSTER SLOTS). NULL with err
 * set on failure. */
redisContext *redis_open_graph(const char *url, const char *graph, char *err, size_t errlen)
{
    if (strncmp(url, "cluster://", 10) != 0)
        return redis_open(url, err, errlen);
    char seed[300];
    snprintf(seed, sizeof seed, "tcp://%.*s", (int)strcspn(url + 10, ","), url + 10);
    redisContext *rc = redis_open(seed, err, errlen);
    if (rc == NULL)
        return NULL;
    char key[128];
    snprintf(key, sizeof key, "charter:{%s}", graph);
    const char *ks[3] = {"CLUSTER", "KEYSLOT", key};
    redisReply *r = redis_do(rc, 3, ks, err, errlen);
    long long slot = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    const char *sl[2] = {"CLUSTER", "SLOTS"};
    r = slot >= 0 ? redis_do(rc, 2, sl, err, errlen) : NULL;
    char node[300];
    cluster_slot_master(r, slot, node, sizeof node);
    if (r)
        freeReplyObject(r);
    redisFree(rc);
    if (node[0] == '\0') {
        snprintf(err, errlen, "no master of graph %s's slot in %s", graph, url);
        return NULL;
    }
    return redis_open(node, err, errlen);
}

/* DEL of every key of one SCAN reply's batch. */
static int redis_del_keys(redisContext *rc, const redisReply *keys, char *err, size_t errlen)
{
    const char **dargv = malloc((keys->elements + 1) * sizeof *dargv);
    size_t *dlen = malloc((keys->elements + 1) * sizeof *dlen);
    if (dargv == NULL || dlen == NULL) {
        free(dargv);
        free(dlen);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    dargv[0] = "DEL";
    dlen[0] = 3;
    for (size_t i = 0; i < keys->elements; i++) {
        dargv[i + 1] = keys->element[i]->str;
        dlen[i + 1] = keys->element[i]->len;
    }
    redisReply *d = redisCommandArgv(rc, (int)keys->elements + 1, dargv, dlen);
    free(dargv);
    free(dlen);
    if (d == NULL || d->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "DEL: %s", d ? d->str : (rc->errstr[0] ? rc->errstr : "no reply"));
        if (d)
            freeReplyObject(d);
        return -1;
    }
    freeReplyObject(d);
    return 0;
}

/* SCAN for the graph's keys; with del, deletes them. *found counts them. */
int redis_graph_keys(redisContext *rc, const char *graph, bool del, bool stop_at_first,
                     unsigned long long *found, char *err, size_t errlen)
{
    char pattern[128];
    snprintf(pattern, sizeof pattern, "charter:{%s}*", graph);
    char cursor[32] = "0";
    *found = 0;
    do {
        const char *argv[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
        redisReply *r = redis_do(rc, 6, argv, err, errlen);
        if (r == NULL)
            return -1;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            snprintf(err, errlen, "SCAN: unexpected reply");
            return -1;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        redisReply *keys = r->element[1];
        *found += keys->elements;
        if (del && keys->elements > 0 && redis_del_keys(rc, keys, err, errlen) != 0) {
            freeReplyObject(r);
            return -1;
        }
        freeReplyObject(r);
        if (stop_at_first && *found > 0)
            break;
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

/* The value after "<field>=" in one cmdstat line (up to eol), or 0. */
static unsigned long long cmdstat_field(const char *line, const char *eol, const char *field)
{
    size_t fl = strlen(field);
    for (const char *p = line; p + fl <= eol; p++)
        if (memcmp(p, field, fl) == 0 && (p == line || p[-1] == ',' || p[-1] == ':'))
            return strtoull(p + fl, NULL, 10);
    return 0;
}

/* Every "cmdstat_<name>:calls=N,usec=N,..." line of an INFO text into out. */
static void parse_cmdstats(const char *info, bench_redis_stats *out)
{
    for (const char *l = strstr(info, "cmdstat_"); l != NULL; l = strstr(l, "\ncmdstat_")) {
        if (*l == '\n')
            l++;
        const char *name = l + strlen("cmdstat_");
        const char *colon = strchr(name, ':');
        const char *eol = strchr(name, '\n');
        if (eol == NULL)
            eol = name + strlen(name);
        if (colon == NULL || colon > eol)
            continue;
        unsigned long long calls = cmdstat_field(colon, eol, "calls=");
        unsigned long long usec = cmdstat_field(colon, eol, "usec=");
        size_t nl = (size_t)(colon - name);
        bool fcall = (nl == 5 && memcmp(name, "fcall", 5) == 0) ||
                     (nl == 8 && memcmp(name, "fcall_ro", 8) == 0);
        if (fcall) {
            out->calls += calls;
            out->usec += usec;
        } else if (!(nl == 4 && memcmp(name, "info", 4) == 0)) {
            out->inner += calls;
        }
        if (out->n_cmds < BENCH_MAX_CMDS && nl < sizeof out->cmds[0].name) {
            bench_cmdstat *c = &out->cmds[out->n_cmds++];
            snprintf(c->name, sizeof c->name, "%.*s", (int)nl, name);
            c->calls = calls;
            c->usec = usec;
        }
    }
}

/* INFO everything (commandstats and used_memory), read at one instant on one connection. */
void redis_stats(const char *url, bench_redis_stats *out)
{
    memset(out, 0, sizeof *out);
    out->used_memory = -1;
    char err[256];
    redisContext *rc = redis_open(url, err, sizeof err);
    if (rc == NULL)
        return;
    const char *argv[2] = {"INFO", "everything"};
    redisReply *r = redis_do(rc, 2, argv, err, sizeof err);
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        const char *p = strstr(r->str, "\nused_memory:");
        if (p != NULL)
            out->used_memory = strtoll(p + strlen("\nused_memory:"), NULL, 10);
        const char *cs = strstr(r->str, "# Commandstats");
        if (cs != NULL)
            parse_cmdstats(cs, out);
        out->ok = cs != NULL;
    }
    if (r != NULL)
        freeReplyObject(r);
    redisFree(rc);
}

static int by_calls_desc(const void *a, const void *b)
{
    unsigned long long x = ((const bench_cmdstat *)a)->calls;
    unsigned long long y = ((const bench_cmdstat *)b)->calls;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The inner commands (all but FCALL, FCALL_RO and INFO) called between before and after, most
 * called first, at most max of them into top (calls and usec are the deltas). */
size_t redis_inner_top(const bench_redis_stats *before, const bench_redis_stats *after,
                       bench_cmdstat *top, size_t max)
{
    bench_cmdstat all[BENCH_MAX_CMDS];
    size_t n = 0;
    for (size_t i = 0; i < after->n_cmds; i++) {
        const bench_cmdstat *a = &after->cmds[i];
        if (strcmp(a->name, "fcall") == 0 || strcmp(a->name, "fcall_ro") == 0 ||
            strcmp(a->name, "info") == 0)
            continue;
        unsigned long long calls0 = 0, usec0 = 0;
        for (size_t k = 0; k < before->n_cmds; k++)
            if (strcmp(before->cmds[k].name, a->name) == 0) {
                calls0 = before->cmds[k].calls;
                usec0 = before->cmds[k].usec;
            }
        if (a->calls > calls0) {
            all[n] = *a;
            all[n].calls = a->calls - calls0;
            all[n].usec = a->usec >= usec0 ? a->usec - usec0 : 0;
            n++;
        }
    }
    qsort(all, n, sizeof all[0], by_calls_desc);
    if (n > max)
        n = max;
    memcpy(top, all, n * sizeof all[0]);
    return n;
}

/* --- the ceiling: a no-op FCALL ------------------------------------------------------------- */

static const char noop_library[] =
    "#!lua name=benchnoop\n"
    "redis.register_function{function_name='bench_noop', callback=function() return 1 end, "
    "flags={'no-writes'}}";

/* Loads the library benchnoop (the no-op function bench_noop) into --redis. */
int redis_noop_load(bench *b, char *err, size_t errlen)
{
    redisContext *rc = redis_open(b->o.redis_url, err, errlen);
    if (rc == NULL)
        return -1;
    const char *load[4] = {"FUNCTION", "LOAD", "REPLACE", noop_library};
    char why[256];
    redisReply *r = redis_do(rc, 4, load, why, sizeof why);
    redisFree(rc);
    if (r == NULL) {
        snprintf(err, errlen, "FUNCTION LOAD failed: %.200s", why);
        return -1;
    }
    freeReplyObject(r);
    b->noop_loaded = true;
    return 0;
}

void redis_noop_delete(bench *b)
{
    if (!b->noop_loaded)
        return;
    char err[300];
    redisContext *rc = redis_open(b->o.redis_url, err, sizeof err);
    const char *del[3] = {"FUNCTION", "DELETE", "benchnoop"};
    redisReply *r = rc != NULL ? redis_do(rc, 3, del, err, sizeof err) : NULL;
    if (r == NULL)
        say(b, "FUNCTION DELETE benchnoop failed: %s", err);
    else
        freeReplyObject(r);
    if (rc != NULL)
        redisFree(rc);
    b->noop_loaded = false;
}

/* redis-benchmark's arguments for --redis into argv (NULL-ended); host and port hold the
 * strings they point into. Returns -1 when the URL cannot be parsed. */
static int benchmark_argv(const bench *b, const char **argv, char *clients, char *host,
                          size_t hostlen, char *port, size_t portlen)
{
    int argc = 0;
    argv[argc++] = "redis-benchmark";
    if (strncmp(b->o.redis_url, "unix://", 7) == 0) {
        argv[argc++] = "-s";
        argv[argc++] = b->o.redis_url + 7;
    } else {
        const char *hp = b->o.redis_url + 6;
        const char *colon = strrchr(hp, ':');
        if (colon == NULL || (size_t)(colon - hp) >= hostlen)
            return -1;
        snprintf(host, hostlen, "%.*s", (int)(colon - hp), hp);
        snprintf(port, portlen, "%s", colon + 1);
        argv[argc++] = "-h";
        argv[argc++] = host;
        argv[argc++] = "-p";
        argv[argc++] = port;
    }
    const char *tail[] = {"-c",         clients, "-n", BENCH_CEILING_REQUESTS, "-q", "FCALL",
                          "bench_noop", "0",     NULL};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++)
        argv[argc++] = tail[i];
    return 0;
}

/* Reads fd to its end into a new string (caller frees), or NULL when out of memory. */
static char *read_all(int fd)
{
    size_t cap = 65536, len = 0;
    char *out = malloc(cap);
    char chunk[4096];
    ssize_t r;
    while ((r = read(fd, chunk, sizeof chunk)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (out != NULL && len + (size_t)r + 1 > cap) {
            char *grown = realloc(out, cap * 2 + (size_t)r);
            if (grown == NULL) {
                free(out);
                out = NULL;
            } else {
                out = grown;
                cap = cap * 2 + (size_t)r;
            }
        }
        if (out != NULL) {
            memcpy(out + len, chunk, (size_t)r);
            len += (size_t)r;
        }
    }
    if (out != NULL)
        out[len] = '\0';
    return out;
}

/* Runs argv with stdout and stderr into a new string (caller frees); *status is its waitpid
 * status. NULL with note set on failure. */
static char *run_capture(const char *const *argv, int *status, char *note, size_t notelen)
{
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(note, notelen, "pipe: %s", strerror(errno));
        return NULL;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        snprintf(note, notelen, "fork: %s", strerror(errno));
        return NULL;
    }
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execvp(argv[0], (char *const *)argv);
        dprintf(STDOUT_FILENO, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    char *out = read_all(fds[0]);
    close(fds[0]);
    waitpid(pid, status, 0);
    if (out == NULL)
        snprintf(note, notelen, "out of memory reading %s", argv[0]);
    return out;
}

/* The last "N requests per second" figure of redis-benchmark -q output, or -1. */
static double requests_per_second(const char *out)
{
    const char *hit = NULL, *p = out;
    while ((p = strstr(p, "requests per second")) != NULL)
        hit = p++;
    if (hit == NULL)
        return -1;
    const char *q = hit;
    while (q > out && q[-1] == ' ')
        q--;
    while (q > out && ((q[-1] >= '0' && q[-1] <= '9') || q[-1] == '.'))
        q--;
    double rps = strtod(q, NULL);
    return rps > 0 ? rps : -1;
}

/* Runs redis-benchmark FCALL bench_noop 0 (-c threads) and returns its requests per second,
 * or -1 with note saying why; note otherwise holds the command. The library must be loaded. */
double redis_noop_ceiling(bench *b, char *note, size_t notelen)
{
    char clients[16], port[16] = "", host[256] = "";
    snprintf(clients, sizeof clients, "%u", b->o.threads);
    const char *argv[20];
    if (benchmark_argv(b, argv, clients, host, sizeof host, port, sizeof port) != 0) {
        snprintf(note, notelen, "cannot parse %s", b->o.redis_url);
        return -1;
    }
    int status = 0;
    char *out = run_capture(argv, &status, note, notelen);
    if (out == NULL)
        return -1;
    double rps = requests_per_second(out);
    if (rps <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char *last = strrchr(out, '\n');
        snprintf(note, notelen, "redis-benchmark gave no figure (exit %d): %.200s",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, last && last[1] ? last + 1 : out);
        rps = -1;
    } else {
        snprintf(note, notelen, "redis-benchmark -c %s -n %s -q FCALL bench_noop 0", clients,
                 BENCH_CEILING_REQUESTS);
    }
    free(out);
    return rps;
}
