/*
 * store.c - the hiredis connection to one graph.
 *
 * Every call is one FCALL of the query library (queries/, built into one) with the graph prefix as
 * its only key; the JSON reply is parsed with jansson. A command that fails on I/O or times out
 * drops the context (a late reply must never be read as the answer to the next command) and
 * the next call reconnects. The replies of the fact queries are decoded by facts.c. The raw
 * call by name (store_raw.h) is for the typed stubs generated from the function headers
 * (queries.h); at startup the functions Redis loaded are compared with the stubs' table. A
 * Redis that lost the library (restarted empty, its functions flushed) gets it back from the
 * call that finds a function missing, never over a library some other charterd loaded.
 */
#include "db/store.h"
#include "core/metrics.h"
#include "db/store_raw.h"
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

#define STORE_DEFAULT_TIMEOUT_MS 5000
#define STORE_MAX_GRAPH 64
#define STORE_MAX_FN 64
#define STORE_MAX_NODES 64    /* cluster nodes one store keeps (masters and seeds) */
#define STORE_SLOTS 16384     /* Redis Cluster's hash slots */
#define STORE_SLOT_CACHE 32   /* graph slots remembered per store */
#define STORE_MAX_REDIRECTS 5 /* MOVED/ASK hops of one command */
#define STORE_MAX_SEEDS 16

/* A cluster node the store has learnt of (from the seeds, CLUSTER SLOTS or a redirect), with
 * its connection once one was opened. */
typedef struct {
    char host[256];
    int port;
    redisContext *ctx; /* NULL while disconnected */
} store_node;

/* The slot of one graph's hash tag, as the cluster computed it (CLUSTER KEYSLOT). */
typedef struct {
    char graph[STORE_MAX_GRAPH + 1];
    int slot;
} store_graph_slot;

struct store {
    redisContext *ctx; /* the connection of the current call (on a cluster, the current node's);
                          NULL while disconnected: the next call reconnects */
    bool cluster;      /* cluster:// URL: route each call to its graph's master */
    store_node nodes[STORE_MAX_NODES]; /* cluster: seeds first, then nodes learnt */
    int n_nodes;
    int n_seeds;
    int cur;                                  /* cluster: index of the node ctx belongs to */
    short *slot_node;                         /* cluster: STORE_SLOTS node indexes, -1 unknown */
    bool map_stale;                           /* refresh the slot map before the next call */
    store_graph_slot slots[STORE_SLOT_CACHE]; /* cluster: graphs whose slot is known */
    int n_slots_cached;
    char *unix_path; /* set for unix:// URLs */
    char *host;      /* set for tcp:// URLs */
    int port;
    char prefix[STORE_MAX_GRAPH + 16];      /* "charter:{<graph>}" */
    char graph[STORE_MAX_GRAPH + 1];        /* the graph the prefix names */
    char client_name[STORE_MAX_GRAPH + 16]; /* "charter.<graph>", shown by CLIENT LIST */
    int timeout_ms;                         /* per command when no deadline is set */
    struct timespec deadline; /* CLOCK_MONOTONIC instant the call's commands must end by */
    bool has_deadline;        /* set by store_set_deadline, cleared by store_set_timeout */
    bool deadline_passed;     /* a command was cut short or not sent because of it */
    int reserve_ms;           /* held back from each command's budget (store_set_reserve) */
    bool effect_unknown;      /* the last call's command was sent and its reply not read */
    bool library_refused;     /* the last call found no function and Redis answered, but the
                                 library could not be put back (restore_library) */
    char err[512];            /* room for a function-list mismatch with its node and its fix */
    bool connected_before;    /* a later connection is a reconnect (metrics) */
    /* The database's clock as last noted (store_note_time): its reading in microseconds since
     * the epoch, and the CLOCK_MONOTONIC instant it was noted at; 0 before the first. */
    long long db_us;
    struct timespec db_noted;
    unsigned long long calls; /* FCALL commands sent (store_calls) */
};

static void set_error(store *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_error(store *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->err, sizeof st->err, fmt, ap);
    va_end(ap);
}

static struct timeval timeval_of(int ms)
{
    struct timeval tv;
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    return tv;
}

/* Milliseconds a command may take now: what remains of the deadline (0 once it has passed),
 * or the per-command timeout when no deadline is set. */
static int remaining_ms(const store *st)
{
    if (!st->has_deadline)
        return st->timeout_ms;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long left = (long long)(st->deadline.tv_sec - now.tv_sec) * 1000LL +
                     (st->deadline.tv_nsec - now.tv_nsec) / 1000000L;
    if (left <= 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

/* What remains minus the reserve a caller holds back for a later command (0 when none is
 * left); without a deadline, the per-command timeout. */
static int budget_ms(const store *st)
{
    if (!st->has_deadline)
        return st->timeout_ms;
    int ms = remaining_ms(st) - st->reserve_ms;
    return ms > 0 ? ms : 0;
}

int store_remaining_ms(const store *st)
{
    return st->has_deadline ? remaining_ms(st) : st->timeout_ms;
}

void store_set_reserve(store *st, int reserve_ms)
{
    st->reserve_ms = reserve_ms > 0 ? reserve_ms : 0;
}

bool store_effect_unknown(const store *st)
{
    return st->effect_unknown;
}

static bool graph_valid(const char *graph)
{
    size_t n = graph ? strlen(graph) : 0;
    if (n == 0 || n > STORE_MAX_GRAPH)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = graph[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

int store_use_graph(store *st, const char *graph)
{
    if (!graph_valid(graph))
        return STATUS_EINVAL;
    snprintf(st->prefix, sizeof st->prefix, "charter:{%s}", graph);
    snprintf(st->graph, sizeof st->graph, "%s", graph);
    return STATUS_OK;
}

const char *store_graph(const store *st)
{
    return st->graph;
}

/* Splits "host:port" or "[v6addr]:port" (len bytes at h) into host (hostlen bytes) and port.
 * Returns STATUS_OK or STATUS_EINVAL. */
static int split_hostport(const char *h, size_t len, char *host, size_t hostlen, int *port)
{
    const char *end = h + len;
    const char *colon;
    const char *hs = h;
    size_t hl;
    if (len == 0)
        return STATUS_EINVAL;
    if (h[0] == '[') {
        const char *close = memchr(h, ']', len);
        if (!close || close + 1 >= end || close[1] != ':')
            return STATUS_EINVAL;
        hs = h + 1;
        hl = (size_t)(close - hs);
        colon = close + 1;
    } else {
        colon = NULL;
        for (const char *q = h; q < end; q++)
            if (*q == ':')
                colon = q;
        if (!colon)
            return STATUS_EINVAL;
        hl = (size_t)(colon - h);
        if (memchr(h, ':', hl))
            return STATUS_EINVAL;
    }
    if (hl == 0 || hl > 255 || hl >= hostlen || memchr(hs, '/', hl) || memchr(hs, '@', hl) ||
        memchr(hs, ',', hl) || memchr(hs, '?', hl))
        return STATUS_EINVAL;
    const char *p = colon + 1;
    size_t plen = (size_t)(end - p);
    if (plen == 0 || plen > 5)
        return STATUS_EINVAL;
    long v = 0;
    for (size_t i = 0; i < plen; i++) {
        if (p[i] < '0' || p[i] > '9')
            return STATUS_EINVAL;
        v = v * 10 + (p[i] - '0');
    }
    if (v < 1 || v > 65535)
        return STATUS_EINVAL;
    memcpy(host, hs, hl);
    host[hl] = '\0';
    *port = (int)v;
    return STATUS_OK;
}

/* "cluster://host:port[,host:port...]": each seed checked, written back as given. */
static int cluster_url_canonical(const char *url, char *out, size_t outlen)
{
    const char *h = url + 10;
    size_t len = strlen(h);
    if (len == 0 || len + 11 > outlen)
        return STATUS_EINVAL;
    int seeds = 0;
    for (const char *p = h; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        char host[256];
        int port;
        if (split_hostport(p, n, host, sizeof host, &port) != STATUS_OK ||
            ++seeds > STORE_MAX_SEEDS)
            return STATUS_EINVAL;
        p += n;
        if (comma && *++p == '\0')
            return STATUS_EINVAL; /* a trailing comma */
    }
    snprintf(out, outlen, "cluster://%s", h);
    return STATUS_OK;
}

int store_url_canonical(const char *url, char *out, size_t outlen)
{
    /* Socket-path forms: the scheme as written, then the absolute path. */
    static const char *const unix_forms[] = {"redis+unix://", "redis+unix:", "unix://", "unix:"};
    if (!url || outlen < STORE_URL_MAX)
        return STATUS_EINVAL;
    if (strncmp(url, "cluster://", 10) == 0)
        return cluster_url_canonical(url, out, outlen);
    for (size_t i = 0; i < sizeof unix_forms / sizeof unix_forms[0]; i++) {
        size_t n = strlen(unix_forms[i]);
        if (strncmp(url, unix_forms[i], n) != 0)
            continue;
        const char *path = url + n;
        if (path[0] != '/' || path[1] == '\0' || strchr(path, '?') || strlen(path) >= 108)
            return STATUS_EINVAL;
        snprintf(out, outlen, "unix://%s", path);
        return STATUS_OK;
    }
    if (strncmp(url, "tcp://", 6) == 0) {
        if (strlen(url) >= outlen)
            return STATUS_EINVAL;
        snprintf(out, outlen, "%s", url);
        return STATUS_OK;
    }
    if (strncmp(url, "redis://", 8) != 0)
        return STATUS_EINVAL;
    /* redis://host[:port][/0]: only database 0 (the query library's functions are global,
     * its keys live in database 0), no credentials in the URL. */
    const char *h = url + 8;
    size_t len = strlen(h);
    if (len > 0 && h[len - 1] == '/')
        len--;
    else if (len > 1 && strcmp(h + len - 2, "/0") == 0)
        len -= 2;
    if (len == 0 || len > 261 || memchr(h, '/', len) || memchr(h, '@', len) || memchr(h, '?', len))
        return STATUS_EINVAL;
    const char *close = h[0] == '[' ? memchr(h, ']', len) : NULL;
    const char *port_colon =
        close ? (close + 1 < h + len && close[1] == ':' ? close + 1 : NULL) : memchr(h, ':', len);
    if (h[0] == '[' && !close)
        return STATUS_EINVAL;
    if (port_colon)
        snprintf(out, outlen, "tcp://%.*s", (int)len, h);
    else
        snprintf(out, outlen, "tcp://%.*s:6379", (int)len, h);
    return STATUS_OK;
}

/* Index of the node host:port, added when new; -1 when the table is full. */
static int node_index(store *st, const char *host, int port)
{
    for (int i = 0; i < st->n_nodes; i++)
        if (st->nodes[i].port == port && strcmp(st->nodes[i].host, host) == 0)
            return i;
    if (st->n_nodes == STORE_MAX_NODES)
        return -1;
    store_node *n = &st->nodes[st->n_nodes];
    snprintf(n->host, sizeof n->host, "%s", host);
    n->port = port;
    n->ctx = NULL;
    return st->n_nodes++;
}

/* Parses a Redis URL (any form store_url_canonical accepts) into st. */
static int parse_url(store *st, const char *given)
{
    static const char unix_scheme[] = "unix://";
    static const char tcp_scheme[] = "tcp://";
    static const char cluster_scheme[] = "cluster://";
    char url[STORE_URL_MAX];
    if (store_url_canonical(given, url, sizeof url) != STATUS_OK)
        return STATUS_EINVAL;
    if (strncmp(url, unix_scheme, sizeof unix_scheme - 1) == 0) {
        const char *path = url + sizeof unix_scheme - 1;
        if (path[0] != '/' || path[1] == '\0' || strlen(path) >= 108)
            return STATUS_EINVAL;
        st->unix_path = strdup(path);
        return st->unix_path ? STATUS_OK : STATUS_ENOMEM;
    }
    if (strncmp(url, cluster_scheme, sizeof cluster_scheme - 1) == 0) {
        st->cluster = true;
        st->cur = -1;
        st->slot_node = malloc(STORE_SLOTS * sizeof *st->slot_node);
        if (!st->slot_node)
            return STATUS_ENOMEM;
        for (int i = 0; i < STORE_SLOTS; i++)
            st->slot_node[i] = -1;
        st->map_stale = true;
        for (const char *p = url + sizeof cluster_scheme - 1; *p;) {
            const char *comma = strchr(p, ',');
            size_t n = comma ? (size_t)(comma - p) : strlen(p);
            char host[256];
            int port;
            if (split_hostport(p, n, host, sizeof host, &port) != STATUS_OK ||
                node_index(st, host, port) < 0)
                return STATUS_EINVAL;
            p += n + (comma ? 1 : 0);
        }
        st->n_seeds = st->n_nodes;
        return STATUS_OK;
    }
    if (strncmp(url, tcp_scheme, sizeof tcp_scheme - 1) != 0)
        return STATUS_EINVAL;
    const char *h = url + sizeof tcp_scheme - 1;
    char host[256];
    int port;
    if (split_hostport(h, strlen(h), host, sizeof host, &port) != STATUS_OK)
        return STATUS_EINVAL;
    st->host = strdup(host);
    if (!st->host)
        return STATUS_ENOMEM;
    st->port = port;
    return STATUS_OK;
}

static void drop_connection(store *st)
{
    if (st->ctx) {
        redisFree(st->ctx);
        st->ctx = NULL;
    }
    if (st->cluster && st->cur >= 0) {
        /* The node may have failed over: learn the map again before the next call. */
        st->nodes[st->cur].ctx = NULL;
        st->map_stale = true;
    }
}

/* Opens a connection to unix_path, or host:port, bounded by what remains of the budget.
 * Returns STATUS_OK with *out, or STATUS_EUNAVAILABLE (error recorded). */
static int connect_to(store *st, const char *unix_path, const char *host, int port,
                      redisContext **out)
{
    *out = NULL;
    int ms = budget_ms(st);
    if (ms <= 0) {
        st->deadline_passed = true;
        set_error(st, "the call's deadline passed before Redis could be reached");
        return STATUS_EUNAVAILABLE;
    }
    struct timeval tv = timeval_of(ms);
    /* A socket file that is not there fails now, not after the connect timeout. */
    struct stat sb;
    if (unix_path && stat(unix_path, &sb) != 0) {
        set_error(st, "cannot connect to Redis at unix://%s: %s", unix_path, strerror(errno));
        return STATUS_EUNAVAILABLE;
    }
    redisContext *ctx = unix_path ? redisConnectUnixWithTimeout(unix_path, tv)
                                  : redisConnectWithTimeout(host, port, tv);
    if (!ctx) {
        set_error(st, "cannot connect to Redis: out of memory");
        return STATUS_EUNAVAILABLE;
    }
    if (ctx->err) {
        if (unix_path)
            set_error(st, "cannot connect to Redis at unix://%s: %s", unix_path, ctx->errstr);
        else
            set_error(st, "cannot connect to Redis at tcp://%s:%d: %s", host, port, ctx->errstr);
        redisFree(ctx);
        return STATUS_EUNAVAILABLE;
    }
    if (redisSetTimeout(ctx, tv) != REDIS_OK ||
        (!unix_path && redisEnableKeepAlive(ctx) != REDIS_OK)) {
        set_error(st, "cannot configure the Redis connection: %s", ctx->errstr);
        redisFree(ctx);
        return STATUS_EUNAVAILABLE;
    }
    /* The name lets an operator (and the reconnect test) find the graph's connections. */
    const char *argv[3] = {"CLIENT", "SETNAME", st->client_name};
    redisReply *r = redisCommandArgv(ctx, 3, argv, NULL);
    if (!r) {
        set_error(st, "Redis connection failed: %s", ctx->errstr);
        redisFree(ctx);
        return STATUS_EUNAVAILABLE;
    }
    freeReplyObject(r); /* an error reply (e.g. an ACL without CLIENT) is not a failure */
    *out = ctx;
    return STATUS_OK;
}

/* Whether this process has lost the database, and since when (CLOCK_MONOTONIC seconds): an
 * operator reads one line when Redis stops answering and one when it answers again, however
 * many workers try in between. */
static atomic_bool store_lost;
static atomic_llong store_lost_since;
/* Set by the process's first connection: before it, a failure is startup's to report (one
 * line, then exit), not a loss. */
static atomic_bool store_ever_connected;

static long long store_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec;
}

/* Counts a connection attempt in the metrics (a failure, or a reconnect after the first) and
 * logs the loss of the database and its return, once each. */
static int count_connect(store *st, int rc)
{
    if (rc != STATUS_OK) {
        metrics_db_error();
        if (!st->deadline_passed && atomic_load(&store_ever_connected) &&
            !atomic_exchange(&store_lost, true)) {
            atomic_store(&store_lost_since, store_now_s());
            log_error("lost the database: %s; calls that need it fail closed until it answers "
                      "(logged once until then)",
                      st->err);
        }
    } else {
        if (st->connected_before)
            metrics_db_reconnect();
        atomic_store(&store_ever_connected, true);
        if (atomic_exchange(&store_lost, false))
            log_info("the database answers again, %lld s after it was lost",
                     store_now_s() - atomic_load(&store_lost_since));
    }
    st->connected_before = st->connected_before || rc == STATUS_OK;
    return rc;
}

/* Makes node n the current one, connecting to it when needed. Returns STATUS_OK or
 * STATUS_EUNAVAILABLE (error recorded; the map is refreshed before the next call). */
static int use_node(store *st, int n)
{
    st->cur = n;
    st->ctx = st->nodes[n].ctx;
    if (st->ctx)
        return STATUS_OK;
    redisContext *ctx = NULL;
    int rc = count_connect(st, connect_to(st, NULL, st->nodes[n].host, st->nodes[n].port, &ctx));
    if (rc != STATUS_OK) {
        st->map_stale = true;
        return rc;
    }
    st->nodes[n].ctx = ctx;
    st->ctx = ctx;
    return STATUS_OK;
}

/* Sends a command that changes nothing (CLUSTER SLOTS, CLUSTER KEYSLOT, ASKING) on node n's
 * connection, bounded by the budget. NULL after a failure (error recorded, connection
 * dropped); the store's effect-unknown flag is left alone. */
static redisReply *node_command(store *st, int n, int argc, const char **argv)
{
    if (use_node(st, n) != STATUS_OK)
        return NULL;
    int ms = budget_ms(st);
    if (ms <= 0) {
        st->deadline_passed = true;
        set_error(st, "%s: not sent, the call's deadline has passed", argv[0]);
        return NULL;
    }
    redisReply *r = NULL;
    if (redisSetTimeout(st->ctx, timeval_of(ms)) == REDIS_OK)
        r = redisCommandArgv(st->ctx, argc, argv, NULL);
    if (!r) {
        set_error(st, "%s %s at %s:%d: %s", argv[0], argc > 1 ? argv[1] : "", st->nodes[n].host,
                  st->nodes[n].port, st->ctx->errstr[0] ? st->ctx->errstr : "I/O error");
        drop_connection(st);
    }
    return r;
}

/* Reads one CLUSTER SLOTS reply into map (STORE_SLOTS entries). asked is the node that
 * answered (its host stands in for an empty one). Returns STATUS_OK or STATUS_EPROTO. */
static int read_slot_map(store *st, const redisReply *r, int asked, short *map)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0)
        return STATUS_EPROTO;
    for (int i = 0; i < STORE_SLOTS; i++)
        map[i] = -1;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
            return STATUS_EPROTO;
        const redisReply *m = e->element[2];
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        if (m->element[0]->type != REDIS_REPLY_STRING ||
            m->element[1]->type != REDIS_REPLY_INTEGER || lo < 0 || hi >= STORE_SLOTS || lo > hi)
            return STATUS_EPROTO;
        const char *host = m->element[0]->str[0] ? m->element[0]->str : st->nodes[asked].host;
        int n = node_index(st, host, (int)m->element[1]->integer);
        if (n < 0)
            return STATUS_EPROTO;
        for (long long s = lo; s <= hi; s++)
            map[s] = (short)n;
    }
    return STATUS_OK;
}

/* Learns the slot map from the first node that answers (the nodes met so far, seeds among
 * them). Returns STATUS_OK, STATUS_EUNAVAILABLE or STATUS_EPROTO (error recorded). */
static int refresh_map(store *st)
{
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    short *map = malloc(STORE_SLOTS * sizeof *map);
    if (!map) {
        set_error(st, "out of memory");
        return STATUS_ENOMEM;
    }
    int rc = STATUS_EUNAVAILABLE;
    /* Nodes already connected first: no connection to open. */
    for (int pass = 0; pass < 2 && rc == STATUS_EUNAVAILABLE; pass++) {
        for (int i = 0; i < st->n_nodes && rc == STATUS_EUNAVAILABLE; i++) {
            if ((pass == 0) != (st->nodes[i].ctx != NULL))
                continue;
            redisReply *r = node_command(st, i, 2, argv);
            if (!r)
                continue;
            if (r->type == REDIS_REPLY_ERROR) {
                set_error(st, "CLUSTER SLOTS at %s:%d: %.160s (is it a cluster node?)",
                          st->nodes[i].host, st->nodes[i].port, r->str);
                rc = STATUS_EPROTO;
            } else if (read_slot_map(st, r, i, map) != STATUS_OK) {
                set_error(st, "CLUSTER SLOTS at %s:%d: unexpected reply", st->nodes[i].host,
                          st->nodes[i].port);
                rc = STATUS_EPROTO;
            } else {
                rc = STATUS_OK;
            }
            freeReplyObject(r);
        }
    }
    if (rc == STATUS_OK) {
        memcpy(st->slot_node, map, STORE_SLOTS * sizeof *map);
        st->map_stale = false;
    }
    free(map);
    return rc;
}

/* The slot of the current graph's hash tag: cached, else asked of a node (CLUSTER KEYSLOT;
 * the cluster's own hash, never one of ours). Returns STATUS_OK with *slot, or a failure. */
static int graph_slot(store *st, int *slot)
{
    for (int i = 0; i < st->n_slots_cached; i++)
        if (strcmp(st->slots[i].graph, st->graph) == 0) {
            *slot = st->slots[i].slot;
            return STATUS_OK;
        }
    const char *argv[3] = {"CLUSTER", "KEYSLOT", st->prefix};
    int rc = STATUS_EUNAVAILABLE;
    for (int i = 0; i < st->n_nodes && rc == STATUS_EUNAVAILABLE; i++) {
        if (st->cur >= 0 && st->nodes[st->cur].ctx && i != st->cur)
            continue; /* ask the node already connected */
        redisReply *r = node_command(st, i, 3, argv);
        if (!r)
            continue;
        if (r->type != REDIS_REPLY_INTEGER || r->integer < 0 || r->integer >= STORE_SLOTS) {
            set_error(st, "CLUSTER KEYSLOT: unexpected reply");
            rc = STATUS_EPROTO;
        } else {
            *slot = (int)r->integer;
            rc = STATUS_OK;
        }
        freeReplyObject(r);
    }
    if (rc != STATUS_OK)
        return rc;
    int at =
        st->n_slots_cached < STORE_SLOT_CACHE ? st->n_slots_cached++ : *slot % STORE_SLOT_CACHE;
    snprintf(st->slots[at].graph, sizeof st->slots[at].graph, "%s", st->graph);
    st->slots[at].slot = *slot;
    return STATUS_OK;
}

/* Cluster: makes the master of the current graph's slot the current node. */
static int route(store *st)
{
    int rc;
    if (st->map_stale && (rc = refresh_map(st)) != STATUS_OK)
        return rc;
    int slot;
    if ((rc = graph_slot(st, &slot)) != STATUS_OK)
        return rc;
    int n = st->slot_node[slot];
    if (n < 0) {
        st->map_stale = true;
        set_error(st, "slot %d of graph %s is served by no master (the cluster is not ok)", slot,
                  st->graph);
        return STATUS_EUNAVAILABLE;
    }
    return use_node(st, n);
}

/* Connects when disconnected (on a cluster: to the master of the graph's slot). Returns
 * STATUS_OK or STATUS_EUNAVAILABLE (error recorded). */
static int ensure_connected(store *st)
{
    if (st->cluster)
        return route(st);
    if (st->ctx)
        return STATUS_OK;
    return count_connect(st, connect_to(st, st->unix_path, st->host, st->port, &st->ctx));
}

int store_open(const char *url, const char *graph, int timeout_ms, store **out)
{
    *out = NULL;
    if (!graph_valid(graph))
        return STATUS_EINVAL;
    store *st = calloc(1, sizeof *st);
    if (!st)
        return STATUS_ENOMEM;
    int rc = parse_url(st, url);
    if (rc != STATUS_OK) {
        store_close(st);
        return rc;
    }
    snprintf(st->prefix, sizeof st->prefix, "charter:{%s}", graph);
    snprintf(st->graph, sizeof st->graph, "%s", graph);
    snprintf(st->client_name, sizeof st->client_name, "charter.%s", graph);
    st->timeout_ms = timeout_ms > 0 ? timeout_ms : STORE_DEFAULT_TIMEOUT_MS;
    rc = ensure_connected(st);
    if (rc != STATUS_OK) {
        store_close(st);
        return rc;
    }
    *out = st;
    return STATUS_OK;
}

bool store_is_cluster(const store *st)
{
    return st->cluster;
}

void store_close(store *st)
{
    if (!st)
        return;
    if (st->cluster) {
        for (int i = 0; i < st->n_nodes; i++)
            if (st->nodes[i].ctx)
                redisFree(st->nodes[i].ctx);
        st->ctx = NULL;
    }
    drop_connection(st);
    free(st->slot_node);
    free(st->unix_path);
    free(st->host);
    free(st);
}

void store_set_deadline(store *st, int timeout_ms)
{
    st->timeout_ms = timeout_ms > 0 ? timeout_ms : STORE_DEFAULT_TIMEOUT_MS;
    clock_gettime(CLOCK_MONOTONIC, &st->deadline);
    st->deadline.tv_sec += st->timeout_ms / 1000;
    st->deadline.tv_nsec += (long)(st->timeout_ms % 1000) * 1000000L;
    if (st->deadline.tv_nsec >= 1000000000L) {
        st->deadline.tv_sec++;
        st->deadline.tv_nsec -= 1000000000L;
    }
    st->has_deadline = true;
    st->deadline_passed = false;
    st->reserve_ms = 0;
}

bool store_deadline_passed(const store *st)
{
    return st->deadline_passed;
}

void store_set_timeout(store *st, int timeout_ms)
{
    st->has_deadline = false;
    st->deadline_passed = false;
    st->reserve_ms = 0;
    st->timeout_ms = timeout_ms > 0 ? timeout_ms : STORE_DEFAULT_TIMEOUT_MS;
    if (st->ctx && redisSetTimeout(st->ctx, timeval_of(st->timeout_ms)) != REDIS_OK)
        drop_connection(st); /* reconnect with the new timeout on the next call */
}

const char *store_last_error(const store *st)
{
    return st->err;
}

void store_note_error(store *st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->err, sizeof st->err, fmt, ap);
    va_end(ap);
}

/* Maps a Redis error reply to a status: the server being busy, loading or read-only, or a
 * cluster redirect left unfollowed (too many hops), is transient (the command did not run);
 * anything else is a protocol failure. */
static int map_redis_error(const char *msg)
{
    metrics_db_error();
    static const char *const transient[] = {"LOADING",     "BUSY",     "MASTERDOWN", "TRYAGAIN",
                                            "CLUSTERDOWN", "READONLY", "NOAUTH",     "NOPERM",
                                            "MOVED",       "ASK"};
    for (size_t i = 0; i < sizeof transient / sizeof transient[0]; i++) {
        size_t n = strlen(transient[i]);
        if (strncmp(msg, transient[i], n) == 0 && (msg[n] == ' ' || msg[n] == '\0'))
            return STATUS_EUNAVAILABLE;
    }
    return STATUS_EPROTO;
}

/* Sends argv and returns the reply, or NULL after an I/O failure or timeout, in which case the
 * context has been dropped and the error recorded. */
static redisReply *command(store *st, int argc, const char **argv, const size_t *argvlen)
{
    /* Each command of a call gets what remains of the call's deadline, not a fresh one. */
    int ms = budget_ms(st);
    if (ms <= 0) {
        st->deadline_passed = true;
        set_error(st, "%s %s: not sent, the call's deadline has passed", argv[0],
                  argc > 1 ? argv[1] : "");
        return NULL;
    }
    if (redisSetTimeout(st->ctx, timeval_of(ms)) != REDIS_OK) {
        set_error(st, "%s %s: cannot set the Redis timeout; not sent, reconnecting", argv[0],
                  argc > 1 ? argv[1] : "");
        drop_connection(st);
        return NULL;
    }
    redisReply *r = redisCommandArgv(st->ctx, argc, argv, argvlen);
    if (!r) {
        /* Written (or partly written) with no reply read: it may still run, even later. */
        st->effect_unknown = true;
        metrics_db_error();
        bool timeout = st->ctx->err == REDIS_ERR_IO &&
                       (strstr(st->ctx->errstr, "temporarily unavailable") != NULL ||
                        strstr(st->ctx->errstr, "timed out") != NULL);
        if (timeout && st->has_deadline && budget_ms(st) <= 0)
            st->deadline_passed = true;
        set_error(st, "%s %s: %s; effect unknown, reconnecting", argv[0], argc > 1 ? argv[1] : "",
                  timeout ? "timed out" : (st->ctx->errstr[0] ? st->ctx->errstr : "I/O error"));
        drop_connection(st);
    }
    return r;
}

static int status_of_err(const char *code)
{
    if (strcmp(code, "not_found") == 0)
        return STATUS_ENOTFOUND;
    if (strcmp(code, "exists") == 0)
        return STATUS_EEXISTS;
    if (strcmp(code, "refused") == 0)
        return STATUS_EREFUSED;
    if (strcmp(code, "invalid") == 0)
        return STATUS_EINVAL;
    if (strcmp(code, "limit") == 0)
        return STATUS_ELIMIT;
    return STATUS_EPROTO;
}

static bool fn_valid(const char *fn)
{
    size_t n = fn ? strlen(fn) : 0;
    if (n == 0 || n > STORE_MAX_FN)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((fn[i] >= 'a' && fn[i] <= 'z') || fn[i] == '_'))
            return false;
    return true;
}

/* Follows a cluster redirect reply: "MOVED <slot> <host>:<port>" updates the map and makes
 * that node current; "ASK <slot> <host>:<port>" makes that node current for one command and
 * sends it ASKING. Returns 1 when the command is to be sent again, 0 when msg is no redirect,
 * or a failure status (error recorded). */
static int redirect(store *st, const char *msg)
{
    bool ask = strncmp(msg, "ASK ", 4) == 0;
    if (!ask && strncmp(msg, "MOVED ", 6) != 0)
        return 0;
    int slot = -1;
    char addr[300];
    if (sscanf(msg + (ask ? 4 : 6), "%d %299s", &slot, addr) != 2 || slot < 0 ||
        slot >= STORE_SLOTS) {
        set_error(st, "unexpected redirect from Redis: %.160s", msg);
        return STATUS_EPROTO;
    }
    char host[256];
    int port;
    const char *a = addr;
    char with_host[300 + 256];
    if (addr[0] == ':' && st->cur >= 0) { /* an unknown endpoint: the node that answered */
        snprintf(with_host, sizeof with_host, "%s%s", st->nodes[st->cur].host, addr);
        a = with_host;
    }
    int n;
    if (split_hostport(a, strlen(a), host, sizeof host, &port) != STATUS_OK ||
        (n = node_index(st, host, port)) < 0) {
        set_error(st, "cannot follow the redirect %.160s", msg);
        return STATUS_EUNAVAILABLE;
    }
    if (!ask) {
        st->slot_node[slot] = (short)n;
        st->map_stale = true; /* slots move together: learn the whole map on the next call */
    }
    int rc = use_node(st, n);
    if (rc != STATUS_OK)
        return rc;
    if (ask) {
        const char *argv[1] = {"ASKING"};
        redisReply *r = node_command(st, n, 1, argv);
        if (!r)
            return STATUS_EUNAVAILABLE;
        bool ok = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!ok) {
            set_error(st, "ASKING refused at %s:%d", host, port);
            return STATUS_EUNAVAILABLE;
        }
    }
    return 1;
}

/* An error reply that means the server did not run the command and may later: BUSY (another
 * script runs), LOADING, TRYAGAIN, MASTERDOWN, CLUSTERDOWN. */
static bool store_refused_busy(const char *msg)
{
    static const char *const busy[] = {"BUSY", "LOADING", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN"};
    for (size_t i = 0; msg && i < sizeof busy / sizeof busy[0]; i++) {
        size_t n = strlen(busy[i]);
        if (strncmp(msg, busy[i], n) == 0 && (msg[n] == ' ' || msg[n] == '\0'))
            return true;
    }
    return false;
}

/* Whether an FCALL's error reply says the function does not exist: the function did not run. */
static bool store_function_missing(const char *msg)
{
    static const char missing[] = "ERR Function not found";
    return msg != NULL && strncmp(msg, missing, sizeof missing - 1) == 0;
}

/* The library source the last successful store_load_library loaded, copied (its caller's
 * buffer need not outlive the stores): what restore_library loads into a Redis that lost it.
 * NULL before the first load. */
static pthread_mutex_t store_library_mu = PTHREAD_MUTEX_INITIALIZER;
static char *store_library_src;
static size_t store_library_len;
/* A library of another version was found where one was missing: logged once until the
 * library is found right again. */
static atomic_bool store_library_foreign_logged;

/* Keeps source (len bytes) as the library to restore. Returns STATUS_OK or STATUS_ENOMEM. */
static int keep_library(const char *source, size_t len)
{
    int rc = STATUS_OK;
    pthread_mutex_lock(&store_library_mu);
    if (store_library_len != len || memcmp(store_library_src, source, len) != 0) {
        char *copy = malloc(len);
        if (copy == NULL) {
            rc = STATUS_ENOMEM;
        } else {
            memcpy(copy, source, len);
            free(store_library_src);
            store_library_src = copy;
            store_library_len = len;
        }
    }
    pthread_mutex_unlock(&store_library_mu);
    return rc;
}

/* Where the current connection goes, for messages: the node on a cluster, else the URL. */
static void store_where(const store *st, char *out, size_t n)
{
    if (st->cluster && st->cur >= 0)
        snprintf(out, n, "%s:%d", st->nodes[st->cur].host, st->nodes[st->cur].port);
    else if (st->unix_path)
        snprintf(out, n, "unix://%s", st->unix_path);
    else
        snprintf(out, n, "tcp://%s:%d", st->host ? st->host : "?", st->port);
}

/* FCALL charter_version with no key on the current connection (a keyless call runs on any
 * node): the version the loaded library reports into v (n bytes), "" when there is no such
 * function (no library). Returns STATUS_OK, STATUS_EUNAVAILABLE or STATUS_EPROTO (error
 * recorded). */
static int library_version_here(store *st, char *v, size_t n)
{
    const char *argv[3] = {"FCALL", "charter_version", "0"};
    size_t argvlen[3] = {5, 15, 1};
    v[0] = '\0';
    redisReply *r = command(st, 3, argv, argvlen);
    if (!r)
        return STATUS_EUNAVAILABLE;
    int rc = STATUS_OK;
    if (r->type == REDIS_REPLY_ERROR && !store_function_missing(r->str)) {
        rc = map_redis_error(r->str) == STATUS_EUNAVAILABLE ? STATUS_EUNAVAILABLE : STATUS_EPROTO;
        set_error(st, "charter_version: Redis error: %.160s", r->str);
    } else if (r->type != REDIS_REPLY_ERROR) {
        json_t *j = r->type == REDIS_REPLY_STRING ? json_loadb(r->str, r->len, 0, NULL) : NULL;
        const char *got = json_string_value(json_object_get(j, "version"));
        snprintf(v, n, "%s", got ? got : "(none)");
        json_decref(j);
    }
    freeReplyObject(r);
    return rc;
}

/* FUNCTION LOAD of source (len bytes) on the current connection, with REPLACE or without
 * (then Redis refuses where a library "charter" is loaded already: STATUS_EEXISTS). Returns
 * STATUS_OK, STATUS_EEXISTS, STATUS_EUNAVAILABLE or STATUS_EPROTO (error recorded). */
static int function_load(store *st, const char *source, size_t len, bool replace)
{
    const char *argv[4] = {"FUNCTION", "LOAD", "REPLACE", source};
    size_t argvlen[4] = {8, 4, 7, len};
    int argc = 4;
    if (!replace) { /* FUNCTION LOAD <source> */
        argv[2] = source;
        argvlen[2] = len;
        argc = 3;
    }
    redisReply *r = command(st, argc, argv, argvlen);
    if (!r)
        return STATUS_EUNAVAILABLE;
    int rc = STATUS_OK;
    if (!replace && r->type == REDIS_REPLY_ERROR && strstr(r->str, "already exists") != NULL) {
        rc = STATUS_EEXISTS;
    } else if (r->type == REDIS_REPLY_ERROR) {
        set_error(st, "loading the query library failed: %.200s", r->str);
        rc = map_redis_error(r->str) == STATUS_EUNAVAILABLE ? STATUS_EUNAVAILABLE : STATUS_EPROTO;
    } else if (r->type != REDIS_REPLY_STRING || strcmp(r->str, "charter") != 0) {
        set_error(st, "loading the query library gave an unexpected reply");
        rc = STATUS_EPROTO;
    }
    freeReplyObject(r);
    return rc;
}

/* FUNCTION LOAD, without REPLACE, of the kept library on the current connection: Redis loads
 * it only where no library "charter" is, so a library another charterd loaded meanwhile is
 * never replaced. Returns STATUS_OK, STATUS_EEXISTS (one is loaded), STATUS_EUNAVAILABLE or
 * STATUS_EPROTO (error recorded). */
static int load_missing_library(store *st)
{
    pthread_mutex_lock(&store_library_mu);
    size_t len = store_library_len;
    char *source = len > 0 ? malloc(len) : NULL;
    if (source != NULL)
        memcpy(source, store_library_src, len);
    pthread_mutex_unlock(&store_library_mu);
    if (source == NULL) {
        set_error(st, len > 0 ? "out of memory" : "no query library was loaded at start");
        return STATUS_EPROTO;
    }
    int rc = function_load(st, source, len, false);
    free(source);
    return rc;
}

/* After FCALL name found no function on the current connection: when the node holds no query
 * library (Redis restarted empty, or its functions were flushed), loads the one kept from
 * start and logs it; a library of another version is left alone, as startup refuses one.
 * Returns STATUS_OK when the node holds this build's version (the call may be sent again once),
 * else STATUS_EUNAVAILABLE with the error recorded; st->library_refused is set when Redis
 * answered. Nothing of the caller's call ran either way (effect known). */
static int restore_library(store *st, const char *name)
{
    char v[40], where[300];
    int rc = library_version_here(st, v, sizeof v);
    if (rc == STATUS_OK && v[0] == '\0') {
        rc = load_missing_library(st);
        store_where(st, where, sizeof where);
        if (rc == STATUS_OK) {
            atomic_store(&store_library_foreign_logged, false);
            /* An error, not information: a Redis that lost its functions most likely lost
             * the graphs it held too, which no reload brings back. */
            log_error("the query library was missing from Redis at %s (restarted empty, or its "
                      "functions flushed): loaded it again, version %s; the data it held is "
                      "gone too unless Redis kept it",
                      where, STORE_LIBRARY_VERSION);
            return STATUS_OK;
        }
        if (rc == STATUS_EEXISTS) /* loaded meanwhile, by another thread or process */
            rc = library_version_here(st, v, sizeof v);
    }
    st->effect_unknown = false;
    if (rc != STATUS_OK) {
        st->library_refused = rc != STATUS_EUNAVAILABLE;
        char was[sizeof st->err];
        snprintf(was, sizeof was, "%s", st->err);
        set_error(st, "%s: the query library is missing and could not be loaded: %.300s", name,
                  was);
        return STATUS_EUNAVAILABLE;
    }
    if (strcmp(v, STORE_LIBRARY_VERSION) == 0) {
        atomic_store(&store_library_foreign_logged, false);
        return STATUS_OK; /* back already: the function is sent again */
    }
    st->library_refused = true;
    store_where(st, where, sizeof where);
    set_error(st,
              "%s: the query library in Redis is version %.32s, charterd needs %s and does not "
              "replace another version (at %s)",
              name, v[0] ? v : "(none)", STORE_LIBRARY_VERSION, where);
    if (!atomic_exchange(&store_library_foreign_logged, true))
        log_error("the query library in Redis at %s is version %.32s, this charterd needs %s: it "
                  "does not replace it, and calls that need a function it lacks fail as "
                  "unavailable (run one charterd build per Redis; logged once)",
                  where, v[0] ? v : "(none)", STORE_LIBRARY_VERSION);
    return STATUS_EUNAVAILABLE;
}

/* Sends FCALL charter_<fn> (name receives that name, STORE_MAX_FN + 16 bytes) and waits for its
 * reply, sending it again while Redis refuses it as busy and, on a cluster, where a redirect
 * names. *reply is the reply (the caller frees it) on STATUS_OK; else NULL. */
static int fcall(store *st, const char *fn, int nargs, const char *const *args, char *name,
                 redisReply **reply)
{
    *reply = NULL;
    st->effect_unknown = false;
    st->library_refused = false;
    if (!fn_valid(fn) || nargs < 0 || nargs > STORE_CALL_MAX_ARGS || (nargs > 0 && !args)) {
        set_error(st, "store_call: bad function name or arguments");
        return STATUS_EINVAL;
    }
    for (int i = 0; i < nargs; i++) {
        if (!args[i]) {
            set_error(st, "charter_%s: argument %d is NULL", fn, i + 1);
            return STATUS_EINVAL;
        }
    }
    int rc = ensure_connected(st);
    if (rc != STATUS_OK)
        return rc;

    snprintf(name, STORE_MAX_FN + 16, "charter_%s", fn);
    const char *argv[STORE_CALL_MAX_ARGS + 4];
    size_t argvlen[STORE_CALL_MAX_ARGS + 4];
    argv[0] = "FCALL";
    argv[1] = name;
    argv[2] = "1";
    argv[3] = st->prefix;
    for (int i = 0; i < nargs; i++)
        argv[4 + i] = args[i];
    for (int i = 0; i < 4 + nargs; i++)
        argvlen[i] = strlen(argv[i]);

    redisReply *r = NULL;
    int pause_ms = 10;
    bool restored = false;
    for (int hop = 0;; hop++) {
        st->calls++;
        r = command(st, 4 + nargs, argv, argvlen);
        if (!r)
            return STATUS_EUNAVAILABLE;
        /* No such function: the call did not run, so it wrote nothing. The library is put
         * back when Redis lost it and the call sent again, once; else it fails as
         * unavailable. */
        if (r->type == REDIS_REPLY_ERROR && !restored && store_function_missing(r->str)) {
            freeReplyObject(r);
            r = NULL;
            if ((rc = restore_library(st, name)) != STATUS_OK)
                return rc;
            restored = true;
            continue;
        }
        /* Refused as busy (a long script, a load, a failover): the command did not run, so
         * it is sent again after a pause, within the call's deadline. */
        if (r->type == REDIS_REPLY_ERROR && store_refused_busy(r->str) &&
            budget_ms(st) > 2 * pause_ms) {
            freeReplyObject(r);
            struct timespec ts = {0, (long)pause_ms * 1000000L};
            nanosleep(&ts, NULL);
            pause_ms = pause_ms < 160 ? pause_ms * 2 : 160;
            continue;
        }
        if (!st->cluster || r->type != REDIS_REPLY_ERROR || hop == STORE_MAX_REDIRECTS)
            break;
        /* A redirect means the command did not run: it is sent again where it belongs. */
        int moved = redirect(st, r->str);
        if (moved == 0)
            break;
        freeReplyObject(r);
        if (moved < 0)
            return moved;
    }
    *reply = r;
    return STATUS_OK;
}

/* The status and JSON document of a reply r of function name (not freed here). */
static int reply_json(store *st, const char *name, const redisReply *r, json_t **out)
{
    int rc = STATUS_OK;
    switch (r->type) {
    case REDIS_REPLY_NIL:
        rc = STATUS_OK;
        break;
    case REDIS_REPLY_ERROR:
        rc = map_redis_error(r->str);
        set_error(st, "%s: Redis error: %.180s", name, r->str);
        if (store_function_missing(r->str)) /* the library is this build's, yet lacks it */
            set_error(st, "%s: the query library loaded has no such function (Redis: %.120s)", name,
                      r->str);
        break;
    case REDIS_REPLY_STRING: {
        json_error_t jerr;
        json_t *j = json_loadb(r->str, r->len, 0, &jerr);
        if (!j || !json_is_object(j)) {
            set_error(st, "%s: reply is not a JSON object (%s)", name,
                      j ? "other type" : jerr.text);
            json_decref(j);
            rc = STATUS_EPROTO;
            break;
        }
        const char *code = json_string_value(json_object_get(j, "err"));
        if (code) {
            const char *msg = json_string_value(json_object_get(j, "msg"));
            rc = status_of_err(code);
            set_error(st, "%s: %s: %.160s", name, code, msg ? msg : "");
            json_decref(j);
            break;
        }
        if (out)
            *out = j;
        else
            json_decref(j);
        rc = STATUS_OK;
        break;
    }
    default:
        set_error(st, "%s: unexpected reply type %d", name, r->type);
        rc = STATUS_EPROTO;
        break;
    }
    return rc;
}

int store_call(store *st, const char *fn, int nargs, const char *const *args, json_t **out)
{
    if (out)
        *out = NULL;
    st->err[0] = '\0';
    char name[STORE_MAX_FN + 16];
    redisReply *r = NULL;
    int rc = fcall(st, fn, nargs, args, name, &r);
    if (rc == STATUS_OK)
        rc = reply_json(st, name, r, out);
    freeReplyObject(r);
    return rc;
}

unsigned long long store_calls(const store *st)
{
    return st->calls;
}

void store_note_time(store *st, const char *ts)
{
    char *end = NULL;
    long long sec = ts != NULL ? strtoll(ts, &end, 10) : 0;
    if (ts == NULL || end == ts || *end != '.' || strlen(end + 1) != 6 || sec <= 0)
        return;
    long long us = sec * 1000000LL + strtoll(end + 1, NULL, 10);
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    /* The later reading stands: replies may be noted out of order, never the clock turned back. */
    if (us > st->db_us || st->db_us == 0) {
        st->db_us = us;
        st->db_noted = mono;
    }
}

bool store_db_time(const store *st, char ts[32], double *now)
{
    if (st->db_us <= 0)
        return false;
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    long long elapsed = (long long)(mono.tv_sec - st->db_noted.tv_sec) * 1000000LL +
                        (mono.tv_nsec - st->db_noted.tv_nsec) / 1000L;
    long long us = st->db_us + (elapsed > 0 ? elapsed : 0);
    snprintf(ts, 32, "%lld.%06lld", us / 1000000LL, us % 1000000LL);
    *now = strtod(ts, NULL);
    return true;
}

struct store_list {
    redisReply *reply; /* an array of strings and nils */
};

int store_call_list(store *st, const char *fn, int nargs, const char *const *args, json_t **out,
                    store_list **list)
{
    *out = NULL;
    *list = NULL;
    st->err[0] = '\0';
    char name[STORE_MAX_FN + 16];
    redisReply *r = NULL;
    int rc = fcall(st, fn, nargs, args, name, &r);
    if (rc != STATUS_OK)
        return rc;
    if (r->type != REDIS_REPLY_ARRAY) {
        rc = reply_json(st, name, r, out);
        freeReplyObject(r);
        return rc;
    }
    for (size_t i = 0; i < r->elements; i++) {
        int t = r->element[i]->type;
        if (t != REDIS_REPLY_STRING && t != REDIS_REPLY_NIL) {
            set_error(st, "%s: element %zu of the reply is of type %d", name, i, t);
            freeReplyObject(r);
            return STATUS_EPROTO;
        }
    }
    *list = malloc(sizeof **list);
    if (*list == NULL) {
        freeReplyObject(r);
        return STATUS_ENOMEM;
    }
    (*list)->reply = r;
    return STATUS_OK;
}

size_t store_list_size(const store_list *list)
{
    return list->reply->elements;
}

const char *store_list_get(const store_list *list, size_t i, size_t *len)
{
    const redisReply *e = list->reply->element[i];
    if (len)
        *len = e->type == REDIS_REPLY_STRING ? e->len : 0;
    return e->type == REDIS_REPLY_STRING ? e->str : NULL;
}

void store_list_free(store_list *list)
{
    if (list == NULL)
        return;
    freeReplyObject(list->reply);
    free(list);
}

int store_call_json(store *st, const char *fn, const json_t *arg, json_t **out)
{
    if (out)
        *out = NULL;
    st->err[0] = '\0';
    if (!arg) {
        set_error(st, "charter_%s: no argument", fn ? fn : "?");
        return STATUS_EINVAL;
    }
    char *text = json_dumps(arg, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text) {
        set_error(st, "charter_%s: cannot encode the argument", fn ? fn : "?");
        return STATUS_ENOMEM;
    }
    const char *args[1] = {text};
    int rc = store_call(st, fn, 1, args, out);
    free(text);
    return rc;
}

int store_call_on(store *st, const char *graph, const char *fn, int nargs, const char *const *args,
                  json_t **out)
{
    if (out)
        *out = NULL;
    char was[STORE_MAX_GRAPH + 1];
    snprintf(was, sizeof was, "%s", st->graph);
    int rc = store_use_graph(st, graph);
    if (rc != STATUS_OK) {
        set_error(st, "charter_%s: bad graph name", fn ? fn : "?");
        return rc;
    }
    rc = store_call(st, fn, nargs, args, out);
    /* The graph was valid when it was set, so pointing back cannot fail. */
    (void)store_use_graph(st, was);
    return rc;
}

/* Compares the library version in a charter_version reply. */
static int check_version(store *st)
{
    json_t *j = NULL;
    int rc = q_version(st, &j);
    if (rc != STATUS_OK) {
        /* Redis answered without the library this build needs: not a database that is down. */
        if (rc != STATUS_EUNAVAILABLE || st->library_refused)
            rc = STATUS_EPROTO;
        return rc;
    }
    const char *v = json_string_value(json_object_get(j, "version"));
    if (!v || strcmp(v, STORE_LIBRARY_VERSION) != 0) {
        set_error(st, "the query library reports version %.32s, charterd needs %s",
                  v ? v : "(none)", STORE_LIBRARY_VERSION);
        rc = STATUS_EPROTO;
    }
    json_decref(j);
    return rc;
}

/* FUNCTION LOAD REPLACE on the current connection. */
static int load_here(store *st, const char *source, size_t len)
{
    return function_load(st, source, len, true);
}

/* FCALL charter_version with no key on the current connection (a keyless call runs on any
 * node), compared with STORE_LIBRARY_VERSION. */
static int version_here(store *st)
{
    char v[40];
    int rc = library_version_here(st, v, sizeof v);
    if (rc == STATUS_EUNAVAILABLE)
        return rc;
    if (rc == STATUS_OK && strcmp(v, STORE_LIBRARY_VERSION) == 0)
        return STATUS_OK;
    set_error(st, "the query library at %s:%d reports version %.32s, charterd needs %s",
              st->nodes[st->cur].host, st->nodes[st->cur].port, v[0] ? v : "(none)",
              STORE_LIBRARY_VERSION);
    return STATUS_EPROTO;
}

/* Cluster: loads the library on every master of the slot map and checks its version on each
 * (replicas receive it through replication), then routes back to the graph's master. */
static int load_library_everywhere(store *st, const char *source, size_t len)
{
    int rc = refresh_map(st);
    if (rc != STATUS_OK)
        return rc;
    bool done[STORE_MAX_NODES] = {false};
    for (int s = 0; s < STORE_SLOTS; s++) {
        int n = st->slot_node[s];
        if (n < 0 || done[n])
            continue;
        done[n] = true;
        if ((rc = use_node(st, n)) != STATUS_OK || (rc = load_here(st, source, len)) != STATUS_OK ||
            (rc = version_here(st)) != STATUS_OK)
            return rc;
    }
    return route(st);
}

/* The value of field key in r, a flat field/value list (FUNCTION LIST's library and function
 * entries, as RESP2 encodes them), or NULL. */
static const redisReply *reply_field(const redisReply *r, const char *key)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i];
        if ((k->type == REDIS_REPLY_STRING || k->type == REDIS_REPLY_STATUS) &&
            strcmp(k->str, key) == 0)
            return r->element[i + 1];
    }
    return NULL;
}

/* Whether the function entry f of FUNCTION LIST carries the no-writes flag. */
static bool reply_no_writes(const redisReply *f)
{
    const redisReply *flags = reply_field(f, "flags");
    if (flags == NULL || flags->type != REDIS_REPLY_ARRAY)
        return false;
    for (size_t i = 0; i < flags->elements; i++) {
        const redisReply *e = flags->element[i];
        if ((e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) &&
            strcmp(e->str, "no-writes") == 0)
            return true;
    }
    return false;
}

/* How to mend a library that differs from the stubs, at the end of every mismatch line. */
#define STORE_FUNCTIONS_FIX                                                                        \
    "rebuild charterd so its typed stubs match queries/, or find why the library text it "         \
    "loaded differs from queries/"

/* The function entry named name in fns (FUNCTION LIST's "functions"), or NULL. */
static const redisReply *reply_function(const redisReply *fns, const char *name)
{
    for (size_t i = 0; i < fns->elements; i++) {
        const redisReply *n = reply_field(fns->element[i], "name");
        if (n != NULL && n->type == REDIS_REPLY_STRING && strcmp(n->str, name) == 0)
            return fns->element[i];
    }
    return NULL;
}

/* True when queries_functions lists name. */
static bool stubs_know(const char *name)
{
    for (size_t i = 0; i < queries_functions_len; i++)
        if (strcmp(queries_functions[i].name, name) == 0)
            return true;
    return false;
}

/* The first difference between fns (the library's "functions") and queries_functions, as the
 * store's error: one the stubs call that is missing or whose flag differs, in registry.lua's
 * order, then one the stubs do not know. where is "" or " at <node>". */
static int functions_compare(store *st, const redisReply *fns, const char *where)
{
    for (size_t i = 0; i < queries_functions_len; i++) {
        const queries_function *q = &queries_functions[i];
        const redisReply *f = reply_function(fns, q->name);
        if (f == NULL) {
            set_error(st, "the query library loaded%s has no %s, which charterd's stubs call; %s",
                      where, q->name, STORE_FUNCTIONS_FIX);
            return STATUS_EPROTO;
        }
        if (reply_no_writes(f) != q->readonly) {
            set_error(st,
                      "the query library loaded%s registers %s %s the no-writes flag, charterd's "
                      "stubs %s it; %s",
                      where, q->name, q->readonly ? "without" : "with",
                      q->readonly ? "with" : "without", STORE_FUNCTIONS_FIX);
            return STATUS_EPROTO;
        }
    }
    for (size_t i = 0; i < fns->elements; i++) {
        const redisReply *n = reply_field(fns->element[i], "name");
        if (n == NULL || n->type != REDIS_REPLY_STRING) {
            set_error(st, "FUNCTION LIST%s: a function entry without a name", where);
            return STATUS_EPROTO;
        }
        if (!stubs_know(n->str)) {
            set_error(st,
                      "the query library loaded%s registers %.64s, which charterd's stubs do not "
                      "know; %s",
                      where, n->str, STORE_FUNCTIONS_FIX);
            return STATUS_EPROTO;
        }
    }
    return STATUS_OK;
}

/* FUNCTION LIST LIBRARYNAME charter on the current connection, compared with the stubs' table.
 * where names the node in the error ("" on one server). */
static int functions_here(store *st, const char *where)
{
    const char *argv[4] = {"FUNCTION", "LIST", "LIBRARYNAME", "charter"};
    size_t argvlen[4] = {8, 4, 11, 7};
    redisReply *r = command(st, 4, argv, argvlen);
    st->effect_unknown = false; /* FUNCTION LIST changes nothing */
    if (!r)
        return STATUS_EUNAVAILABLE;
    int rc = STATUS_EPROTO;
    const redisReply *fns = NULL;
    if (r->type == REDIS_REPLY_ERROR) {
        rc = map_redis_error(r->str) == STATUS_EUNAVAILABLE ? STATUS_EUNAVAILABLE : STATUS_EPROTO;
        set_error(st, "FUNCTION LIST%s: %.200s", where, r->str);
    } else if (r->type != REDIS_REPLY_ARRAY) {
        set_error(st, "FUNCTION LIST%s: unexpected reply type %d", where, r->type);
    } else {
        /* The pattern "charter" has no wildcard, yet the name is compared all the same. */
        for (size_t i = 0; fns == NULL && i < r->elements; i++) {
            const redisReply *name = reply_field(r->element[i], "library_name");
            if (name != NULL && name->type == REDIS_REPLY_STRING &&
                strcmp(name->str, "charter") == 0)
                fns = reply_field(r->element[i], "functions");
        }
        if (fns == NULL || fns->type != REDIS_REPLY_ARRAY)
            set_error(st,
                      "the query library is not loaded%s (FUNCTION LIST has no library "
                      "charter); load it first",
                      where);
        else
            rc = functions_compare(st, fns, where);
    }
    freeReplyObject(r);
    return rc;
}

int store_check_functions(store *st)
{
    st->err[0] = '\0';
    int rc;
    if (!st->cluster) {
        if ((rc = ensure_connected(st)) != STATUS_OK)
            return rc;
        return functions_here(st, "");
    }
    /* The library is loaded on every master (load_library_everywhere): each is checked. */
    if ((rc = refresh_map(st)) != STATUS_OK)
        return rc;
    bool done[STORE_MAX_NODES] = {false};
    for (int s = 0; s < STORE_SLOTS; s++) {
        int n = st->slot_node[s];
        if (n < 0 || done[n])
            continue;
        done[n] = true;
        char where[300];
        snprintf(where, sizeof where, " at %s:%d", st->nodes[n].host, st->nodes[n].port);
        if ((rc = use_node(st, n)) != STATUS_OK || (rc = functions_here(st, where)) != STATUS_OK)
            return rc;
    }
    return route(st);
}

/* store_load_library without keeping the source. */
static int load_library(store *st, const char *source, size_t len)
{
    st->err[0] = '\0';
    if (!source || len == 0) {
        set_error(st, "no query library source");
        return STATUS_EPROTO;
    }
    if (st->cluster)
        return load_library_everywhere(st, source, len);
    int rc = ensure_connected(st);
    if (rc == STATUS_OK)
        rc = function_load(st, source, len, true);
    if (rc != STATUS_OK)
        return rc;
    return check_version(st);
}

int store_load_library(store *st, const char *source, size_t len)
{
    int rc = load_library(st, source, len);
    if (rc == STATUS_OK && (rc = keep_library(source, len)) != STATUS_OK)
        set_error(st, "out of memory keeping the query library");
    return rc;
}

int store_module_loaded(store *st, const char *name, bool *loaded)
{
    *loaded = false;
    st->err[0] = '\0';
    int rc = ensure_connected(st);
    if (rc != STATUS_OK)
        return rc;
    const char *argv[2] = {"MODULE", "LIST"};
    size_t argvlen[2] = {6, 4};
    redisReply *r = command(st, 2, argv, argvlen);
    if (!r)
        return STATUS_EUNAVAILABLE;
    if (r->type != REDIS_REPLY_ARRAY) {
        set_error(st, "MODULE LIST: unexpected reply%s%.160s",
                  r->type == REDIS_REPLY_ERROR ? ": " : "",
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
        freeReplyObject(r);
        return STATUS_EPROTO;
    }
    /* Each module is a flat list of field/value pairs ("name", "ft", "ver", 10200, ...). */
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *m = r->element[i];
        for (size_t k = 0; m && m->type == REDIS_REPLY_ARRAY && k + 1 < m->elements; k += 2) {
            const redisReply *f = m->element[k], *v = m->element[k + 1];
            if (f->type == REDIS_REPLY_STRING && strcmp(f->str, "name") == 0 &&
                v->type == REDIS_REPLY_STRING && strcmp(v->str, name) == 0)
                *loaded = true;
        }
    }
    freeReplyObject(r);
    return STATUS_OK;
}

int store_used_memory(store *st, long long *bytes)
{
    *bytes = -1;
    st->err[0] = '\0';
    int rc = ensure_connected(st);
    if (rc != STATUS_OK)
        return rc;
    const char *argv[2] = {"INFO", "memory"};
    size_t argvlen[2] = {4, 6};
    redisReply *r = command(st, 2, argv, argvlen);
    if (!r)
        return STATUS_EUNAVAILABLE;
    const char *at = r->type == REDIS_REPLY_STRING ? strstr(r->str, "\nused_memory:") : NULL;
    if (at == NULL && r->type == REDIS_REPLY_STRING && strncmp(r->str, "used_memory:", 12) == 0)
        at = r->str - 1;
    if (at != NULL)
        *bytes = strtoll(at + 13, NULL, 10);
    freeReplyObject(r);
    if (*bytes < 0) {
        set_error(st, "INFO memory: no used_memory");
        return STATUS_EPROTO;
    }
    return STATUS_OK;
}

int store_ping(store *st)
{
    st->err[0] = '\0';
    return check_version(st);
}

/* --- facts for the guard (decoded by facts.c) ---------------------------------------- */

int store_ancestry(store *st, const char *payload_id, size_t limit, guard_ancestry *out)
{
    memset(out, 0, sizeof *out);
    char lim[32];
    snprintf(lim, sizeof lim, "%zu", limit);
    json_t *j = NULL;
    int rc = q_ancestry(st, payload_id, lim, &j);
    if (rc != STATUS_OK)
        return rc;
    if (!j) {
        set_error(st, "charter_ancestry: nil reply");
        return STATUS_EPROTO;
    }
    rc = facts_ancestry_from_json(j, payload_id, out);
    if (rc == STATUS_EPROTO)
        set_error(st, "charter_ancestry: the reply is not an ancestry");
    json_decref(j);
    return rc;
}

int store_grant_chain(store *st, const char *grant_id, guard_chain *out)
{
    memset(out, 0, sizeof *out);
    json_t *j = NULL;
    int rc = q_grant_chain(st, grant_id, &j);
    if (rc != STATUS_OK)
        return rc;
    if (!j) {
        set_error(st, "charter_grant_chain: nil reply");
        return STATUS_EPROTO;
    }
    rc = facts_chain_from_json(j, grant_id, out);
    if (rc == STATUS_EPROTO)
        set_error(st, "charter_grant_chain: the reply is not a grant chain");
    json_decref(j);
    return rc;
}

int store_context(store *st, const char *context_id, guard_context *out)
{
    memset(out, 0, sizeof *out);
    json_t *j = NULL;
    int rc = q_context_owner(st, context_id, &j);
    if (rc != STATUS_OK)
        return rc;
    if (!j) {
        set_error(st, "charter_context_owner: nil reply");
        return STATUS_EPROTO;
    }
    rc = facts_context_from_json(j, out);
    if (rc == STATUS_EPROTO)
        set_error(st, "charter_context_owner: the reply is not a context");
    json_decref(j);
    return rc;
}

int store_wait_replicas(store *st, int replicas, int *confirmed)
{
    *confirmed = 0;
    st->err[0] = '\0';
    if (replicas <= 0)
        return STATUS_OK;
    if (!st->ctx) {
        set_error(st, "WAIT: the connection of the write is gone");
        return STATUS_EUNAVAILABLE;
    }
    /* WAIT for more replicas than are connected would only spend the call's time: ROLE says
     * how many there are (a master lists its connected replicas). */
    const char *role_argv[1] = {"ROLE"};
    size_t role_len[1] = {4};
    redisReply *role = command(st, 1, role_argv, role_len);
    st->effect_unknown = false; /* ROLE changes nothing */
    if (!role)
        return STATUS_EUNAVAILABLE;
    bool is_master = role->type == REDIS_REPLY_ARRAY && role->elements >= 3 &&
                     role->element[0]->type == REDIS_REPLY_STRING &&
                     strcmp(role->element[0]->str, "master") == 0 &&
                     role->element[2]->type == REDIS_REPLY_ARRAY;
    size_t connected = is_master ? role->element[2]->elements : 0;
    freeReplyObject(role);
    if (!is_master) {
        set_error(st, "WAIT: the node of the write is no master");
        return STATUS_EPROTO;
    }
    if (connected < (size_t)replicas)
        return STATUS_OK; /* *confirmed stays 0: not durable */
    /* WAIT gets half of what remains of the deadline, so its answer (how many did confirm) is
     * read and the call is still answered in time; WAIT 0 would block forever, never ask it. */
    int ms = budget_ms(st);
    if (ms < 4) {
        st->deadline_passed = st->has_deadline;
        set_error(st, "WAIT: not sent, the call's deadline has passed");
        return STATUS_EUNAVAILABLE;
    }
    int wait_ms = ms / 2;
    char nbuf[16], tbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", replicas);
    snprintf(tbuf, sizeof tbuf, "%d", wait_ms);
    const char *argv[3] = {"WAIT", nbuf, tbuf};
    size_t argvlen[3] = {4, strlen(nbuf), strlen(tbuf)};
    redisReply *r = command(st, 3, argv, argvlen);
    st->effect_unknown = false; /* WAIT changes nothing */
    if (!r)
        return STATUS_EUNAVAILABLE;
    int rc = STATUS_OK;
    if (r->type == REDIS_REPLY_INTEGER)
        *confirmed = r->integer > INT_MAX ? INT_MAX : (int)r->integer;
    else {
        set_error(st, "WAIT: unexpected reply%s%.160s", r->type == REDIS_REPLY_ERROR ? ": " : "",
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
        rc = STATUS_EPROTO;
    }
    freeReplyObject(r);
    return rc;
}
