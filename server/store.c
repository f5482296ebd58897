/*
 * store.c - the hiredis connection to one graph and the decoders of the facts it returns.
 *
 * Every call is one FCALL of the query library (queries/, built into one) with the graph prefix as
 * its only key; the JSON reply is parsed with jansson. A command that fails on I/O or times out
 * drops the context (a late reply must never be read as the answer to the next command) and
 * the next call reconnects. The decoders turn the ancestry and grant-chain replies (or the
 * snapshots recorded from them) into the guard's structs, owning every byte they point to.
 */
#include "store.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define STORE_DEFAULT_TIMEOUT_MS 5000
#define STORE_MAX_GRAPH 64
#define STORE_MAX_FN 64
#define STORE_MAX_ARGS 32

struct store {
    redisContext *ctx; /* NULL while disconnected: the next call reconnects */
    char *unix_path;   /* set for unix:// URLs */
    char *host;        /* set for tcp:// URLs */
    int port;
    char prefix[STORE_MAX_GRAPH + 16];      /* "charter:{<graph>}" */
    char client_name[STORE_MAX_GRAPH + 16]; /* "charter.<graph>", shown by CLIENT LIST */
    int timeout_ms;
    char err[256];
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

/* Parses "unix:///abs/path" or "tcp://host:port" (host may be "[v6addr]") into st. */
static int parse_url(store *st, const char *url)
{
    static const char unix_scheme[] = "unix://";
    static const char tcp_scheme[] = "tcp://";
    if (!url)
        return STATUS_EINVAL;
    if (strncmp(url, unix_scheme, sizeof unix_scheme - 1) == 0) {
        const char *path = url + sizeof unix_scheme - 1;
        if (path[0] != '/' || path[1] == '\0' || strlen(path) >= 108)
            return STATUS_EINVAL;
        st->unix_path = strdup(path);
        return st->unix_path ? STATUS_OK : STATUS_ENOMEM;
    }
    if (strncmp(url, tcp_scheme, sizeof tcp_scheme - 1) != 0)
        return STATUS_EINVAL;
    const char *h = url + sizeof tcp_scheme - 1;
    const char *colon;
    size_t hlen;
    if (h[0] == '[') {
        const char *close = strchr(h, ']');
        if (!close || close[1] != ':')
            return STATUS_EINVAL;
        h++;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(h, ':');
        if (!colon)
            return STATUS_EINVAL;
        hlen = (size_t)(colon - h);
        if (memchr(h, ':', hlen))
            return STATUS_EINVAL;
    }
    if (hlen == 0 || hlen > 255 || memchr(h, '/', hlen))
        return STATUS_EINVAL;
    const char *p = colon + 1;
    if (*p == '\0' || strlen(p) > 5)
        return STATUS_EINVAL;
    long port = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return STATUS_EINVAL;
        port = port * 10 + (*p - '0');
    }
    if (port < 1 || port > 65535)
        return STATUS_EINVAL;
    st->host = strndup(h, hlen);
    if (!st->host)
        return STATUS_ENOMEM;
    st->port = (int)port;
    return STATUS_OK;
}

static void drop_connection(store *st)
{
    if (st->ctx) {
        redisFree(st->ctx);
        st->ctx = NULL;
    }
}

/* Connects when disconnected. Returns STATUS_OK or STATUS_EUNAVAILABLE (error recorded). */
static int ensure_connected(store *st)
{
    if (st->ctx)
        return STATUS_OK;
    struct timeval tv = timeval_of(st->timeout_ms);
    redisContext *ctx = st->unix_path ? redisConnectUnixWithTimeout(st->unix_path, tv)
                                      : redisConnectWithTimeout(st->host, st->port, tv);
    if (!ctx) {
        set_error(st, "cannot connect to Redis: out of memory");
        return STATUS_EUNAVAILABLE;
    }
    if (ctx->err) {
        if (st->unix_path)
            set_error(st, "cannot connect to Redis at unix://%s: %s", st->unix_path, ctx->errstr);
        else
            set_error(st, "cannot connect to Redis at tcp://%s:%d: %s", st->host, st->port,
                      ctx->errstr);
        redisFree(ctx);
        return STATUS_EUNAVAILABLE;
    }
    if (redisSetTimeout(ctx, tv) != REDIS_OK ||
        (!st->unix_path && redisEnableKeepAlive(ctx) != REDIS_OK)) {
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
    st->ctx = ctx;
    return STATUS_OK;
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

void store_close(store *st)
{
    if (!st)
        return;
    drop_connection(st);
    free(st->unix_path);
    free(st->host);
    free(st);
}

void store_set_timeout(store *st, int timeout_ms)
{
    st->timeout_ms = timeout_ms > 0 ? timeout_ms : STORE_DEFAULT_TIMEOUT_MS;
    if (st->ctx && redisSetTimeout(st->ctx, timeval_of(st->timeout_ms)) != REDIS_OK)
        drop_connection(st); /* reconnect with the new timeout on the next call */
}

const char *store_last_error(const store *st)
{
    return st->err;
}

/* Maps a Redis error reply to a status: the server being busy, loading or read-only is
 * transient (the command did not run); anything else is a protocol failure. */
static int map_redis_error(const char *msg)
{
    static const char *const transient[] = {"LOADING",     "BUSY",     "MASTERDOWN", "TRYAGAIN",
                                            "CLUSTERDOWN", "READONLY", "NOAUTH",     "NOPERM"};
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
    redisReply *r = redisCommandArgv(st->ctx, argc, argv, argvlen);
    if (!r) {
        bool timeout = st->ctx->err == REDIS_ERR_IO &&
                       (strstr(st->ctx->errstr, "temporarily unavailable") != NULL ||
                        strstr(st->ctx->errstr, "timed out") != NULL);
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

int store_call(store *st, const char *fn, int nargs, const char *const *args, json_t **out)
{
    if (out)
        *out = NULL;
    st->err[0] = '\0';
    if (!fn_valid(fn) || nargs < 0 || nargs > STORE_MAX_ARGS || (nargs > 0 && !args)) {
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

    char name[STORE_MAX_FN + 16];
    snprintf(name, sizeof name, "charter_%s", fn);
    const char *argv[STORE_MAX_ARGS + 4];
    size_t argvlen[STORE_MAX_ARGS + 4];
    argv[0] = "FCALL";
    argv[1] = name;
    argv[2] = "1";
    argv[3] = st->prefix;
    for (int i = 0; i < nargs; i++)
        argv[4 + i] = args[i];
    for (int i = 0; i < 4 + nargs; i++)
        argvlen[i] = strlen(argv[i]);

    redisReply *r = command(st, 4 + nargs, argv, argvlen);
    if (!r)
        return STATUS_EUNAVAILABLE;
    switch (r->type) {
    case REDIS_REPLY_NIL:
        rc = STATUS_OK;
        break;
    case REDIS_REPLY_ERROR:
        rc = map_redis_error(r->str);
        set_error(st, "%s: Redis error: %.180s", name, r->str);
        if (strstr(r->str, "Function not found"))
            set_error(st, "%s: the query library is not loaded (Redis: %.120s)", name, r->str);
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
    freeReplyObject(r);
    return rc;
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

/* Compares the library version in a charter_version reply. */
static int check_version(store *st)
{
    json_t *j = NULL;
    int rc = store_call(st, "version", 0, NULL, &j);
    if (rc != STATUS_OK) {
        if (rc != STATUS_EUNAVAILABLE)
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

int store_load_library(store *st, const char *source, size_t len)
{
    st->err[0] = '\0';
    if (!source || len == 0) {
        set_error(st, "no query library source");
        return STATUS_EPROTO;
    }
    int rc = ensure_connected(st);
    if (rc != STATUS_OK)
        return rc;
    const char *argv[4] = {"FUNCTION", "LOAD", "REPLACE", source};
    size_t argvlen[4] = {8, 4, 7, len};
    redisReply *r = command(st, 4, argv, argvlen);
    if (!r)
        return STATUS_EUNAVAILABLE;
    if (r->type == REDIS_REPLY_ERROR) {
        set_error(st, "loading the query library failed: %.200s", r->str);
        rc = map_redis_error(r->str) == STATUS_EUNAVAILABLE ? STATUS_EUNAVAILABLE : STATUS_EPROTO;
    } else if (r->type != REDIS_REPLY_STRING || strcmp(r->str, "charter") != 0) {
        set_error(st, "loading the query library gave an unexpected reply");
        rc = STATUS_EPROTO;
    }
    freeReplyObject(r);
    if (rc != STATUS_OK)
        return rc;
    return check_version(st);
}

int store_ping(store *st)
{
    st->err[0] = '\0';
    return check_version(st);
}

/* --- decoding facts -------------------------------------------------------------------- */

/* A text field: absent or null gives "" so the guard can always compare. */
static int dup_text(const json_t *v, char **out)
{
    const char *s = "";
    if (v && !json_is_null(v)) {
        if (!json_is_string(v))
            return STATUS_EPROTO;
        s = json_string_value(v);
    }
    *out = strdup(s);
    return *out ? STATUS_OK : STATUS_ENOMEM;
}

/* A required id: a non-empty string. */
static int dup_id(const json_t *v, char **out)
{
    if (!json_is_string(v) || json_string_length(v) == 0)
        return STATUS_EPROTO;
    *out = strdup(json_string_value(v));
    return *out ? STATUS_OK : STATUS_ENOMEM;
}

/* A label: integer (or integral number, or decimal string); absent or null gives -1. */
static int get_label(const json_t *v, int *out)
{
    *out = -1;
    if (!v || json_is_null(v))
        return STATUS_OK;
    double d;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < INT_MIN || i > INT_MAX)
            return STATUS_EPROTO;
        *out = (int)i;
        return STATUS_OK;
    }
    if (json_is_real(v)) {
        d = json_real_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        if (*s == '\0')
            return STATUS_OK;
        errno = 0;
        long l = strtol(s, &end, 10);
        if (errno || *end != '\0' || l < INT_MIN || l > INT_MAX)
            return STATUS_EPROTO;
        *out = (int)l;
        return STATUS_OK;
    } else {
        return STATUS_EPROTO;
    }
    if (d != floor(d) || d < INT_MIN || d > INT_MAX)
        return STATUS_EPROTO;
    *out = (int)d;
    return STATUS_OK;
}

/* A boolean: true/false, 1/0, "1"/"0"/"true"/"false"; absent or null gives dflt. */
static int get_bool(const json_t *v, bool dflt, bool *out)
{
    *out = dflt;
    if (!v || json_is_null(v))
        return STATUS_OK;
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return STATUS_OK;
    }
    if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
        *out = json_integer_value(v) == 1;
        return STATUS_OK;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "1") == 0 || strcmp(s, "true") == 0) {
            *out = true;
            return STATUS_OK;
        }
        if (strcmp(s, "0") == 0 || strcmp(s, "false") == 0) {
            *out = false;
            return STATUS_OK;
        }
    }
    return STATUS_EPROTO;
}

/* A time in seconds since the epoch: a number or a decimal string. Absent, null or "" gives
 * missing. */
static int get_time(const json_t *v, double missing, double *out)
{
    *out = missing;
    if (!v || json_is_null(v))
        return STATUS_OK;
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return isfinite(*out) ? STATUS_OK : STATUS_EPROTO;
    }
    if (!json_is_string(v))
        return STATUS_EPROTO;
    const char *s = json_string_value(v);
    if (*s == '\0')
        return STATUS_OK;
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (errno || *end != '\0' || !isfinite(d))
        return STATUS_EPROTO;
    *out = d;
    return STATUS_OK;
}

/* The elements of a documented list: an array, or {} (how Redis's cjson encodes an empty
 * list), or absent/null (empty). *arr is NULL for an empty list. */
static int list_of(const json_t *v, const json_t **arr, size_t *n)
{
    *arr = NULL;
    *n = 0;
    if (!v || json_is_null(v))
        return STATUS_OK;
    if (json_is_object(v) && json_object_size(v) == 0)
        return STATUS_OK;
    if (!json_is_array(v))
        return STATUS_EPROTO;
    *arr = v;
    *n = json_array_size(v);
    return STATUS_OK;
}

static void strs_free(guard_strs *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->items[i]);
    free(s->items);
    s->items = NULL;
    s->n = 0;
}

/* A list of strings. On failure s holds what was copied so far (freed by its owner). */
static int get_strs(const json_t *v, guard_strs *s)
{
    const json_t *arr;
    size_t n;
    s->items = NULL;
    s->n = 0;
    int rc = list_of(v, &arr, &n);
    if (rc != STATUS_OK || n == 0)
        return rc;
    s->items = calloc(n, sizeof *s->items);
    if (!s->items)
        return STATUS_ENOMEM;
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        if (!json_is_string(e))
            return STATUS_EPROTO;
        s->items[i] = strdup(json_string_value(e));
        if (!s->items[i])
            return STATUS_ENOMEM;
    }
    return STATUS_OK;
}

static void actors_free(guard_actor_ref *a, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(a[i].id);
        free(a[i].kind);
    }
    free(a);
}

/* A list of actor references: objects {id, kind} (kind "" when absent) or bare ids. */
static int get_actors(const json_t *v, guard_actor_ref **out, size_t *count)
{
    const json_t *arr;
    size_t n;
    *out = NULL;
    *count = 0;
    int rc = list_of(v, &arr, &n);
    if (rc != STATUS_OK || n == 0)
        return rc;
    guard_actor_ref *a = calloc(n, sizeof *a);
    if (!a)
        return STATUS_ENOMEM;
    *out = a;
    *count = n;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        if (json_is_string(e)) {
            rc = dup_id(e, &a[i].id);
            if (rc == STATUS_OK)
                rc = dup_text(NULL, &a[i].kind);
        } else if (json_is_object(e)) {
            rc = dup_id(json_object_get(e, "id"), &a[i].id);
            if (rc == STATUS_OK)
                rc = dup_text(json_object_get(e, "kind"), &a[i].kind);
        } else {
            rc = STATUS_EPROTO;
        }
        if (rc != STATUS_OK)
            return rc;
    }
    return STATUS_OK;
}

static void resources_free(guard_resource *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(r[i].id);
        free(r[i].title);
    }
    free(r);
}

/* A list of resources: objects {id, title, conf, integrity} or bare ids (labels -1). */
static int get_resources(const json_t *v, guard_resource **out, size_t *count)
{
    const json_t *arr;
    size_t n;
    *out = NULL;
    *count = 0;
    int rc = list_of(v, &arr, &n);
    if (rc != STATUS_OK || n == 0)
        return rc;
    guard_resource *r = calloc(n, sizeof *r);
    if (!r)
        return STATUS_ENOMEM;
    *out = r;
    *count = n;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        r[i].conf = -1;
        r[i].integrity = -1;
        if (json_is_string(e)) {
            rc = dup_id(e, &r[i].id);
            if (rc == STATUS_OK)
                rc = dup_text(NULL, &r[i].title);
        } else if (json_is_object(e)) {
            rc = dup_id(json_object_get(e, "id"), &r[i].id);
            if (rc == STATUS_OK)
                rc = dup_text(json_object_get(e, "title"), &r[i].title);
            if (rc == STATUS_OK)
                rc = get_label(json_object_get(e, "conf"), &r[i].conf);
            if (rc == STATUS_OK)
                rc = get_label(json_object_get(e, "integrity"), &r[i].integrity);
        } else {
            rc = STATUS_EPROTO;
        }
        if (rc != STATUS_OK)
            return rc;
    }
    return STATUS_OK;
}

static void artifact_free(guard_artifact *a)
{
    free(a->id);
    free(a->run_id);
    free(a->title);
    free(a->hash);
    strs_free(&a->input_ids);
    strs_free(&a->parents);
    resources_free(a->resources, a->n_resources);
    strs_free(&a->producers);
}

static int artifact_from_json(const json_t *e, guard_artifact *a)
{
    a->conf = -1;
    a->integrity = -1;
    if (!json_is_object(e))
        return STATUS_EPROTO;
    int rc = dup_id(json_object_get(e, "id"), &a->id);
    if (rc == STATUS_OK)
        rc = dup_text(json_object_get(e, "run_id"), &a->run_id);
    if (rc == STATUS_OK)
        rc = dup_text(json_object_get(e, "title"), &a->title);
    if (rc == STATUS_OK)
        rc = dup_text(json_object_get(e, "hash"), &a->hash);
    if (rc == STATUS_OK) {
        const json_t *kind = json_object_get(e, "kind");
        const char *k = json_is_string(kind) ? json_string_value(kind) : "";
        if (kind && !json_is_null(kind) && !json_is_string(kind))
            rc = STATUS_EPROTO;
        a->is_source = strcmp(k, "source") == 0;
        a->kind_known = a->is_source || strcmp(k, "derived") == 0;
    }
    if (rc == STATUS_OK)
        rc = get_label(json_object_get(e, "conf"), &a->conf);
    if (rc == STATUS_OK)
        rc = get_label(json_object_get(e, "integrity"), &a->integrity);
    if (rc == STATUS_OK)
        rc = get_bool(json_object_get(e, "capture_complete"), false, &a->capture_complete);
    if (rc == STATUS_OK)
        rc = get_strs(json_object_get(e, "input_ids"), &a->input_ids);
    if (rc == STATUS_OK)
        rc = get_strs(json_object_get(e, "parents"), &a->parents);
    if (rc == STATUS_OK)
        rc = get_resources(json_object_get(e, "resources"), &a->resources, &a->n_resources);
    if (rc == STATUS_OK)
        rc = get_strs(json_object_get(e, "producers"), &a->producers);
    return rc;
}

void store_ancestry_free(guard_ancestry *anc)
{
    if (!anc)
        return;
    for (size_t i = 0; i < anc->n; i++)
        artifact_free(&anc->items[i]);
    free(anc->items);
    free(anc->root);
    memset(anc, 0, sizeof *anc);
}

int store_ancestry_from_json(const json_t *j, const char *root, guard_ancestry *out)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(j))
        return STATUS_EPROTO;
    const json_t *jroot = json_object_get(j, "root");
    if (root)
        out->root = strdup(root);
    else if (json_is_string(jroot))
        out->root = strdup(json_string_value(jroot));
    else
        return STATUS_EPROTO;
    if (!out->root)
        return STATUS_ENOMEM;
    int rc = get_bool(json_object_get(j, "truncated"), false, &out->truncated);
    const json_t *arr = NULL;
    size_t n = 0;
    if (rc == STATUS_OK)
        rc = list_of(json_object_get(j, "artifacts"), &arr, &n);
    if (rc == STATUS_OK && !json_object_get(j, "artifacts"))
        rc = STATUS_EPROTO;
    if (rc == STATUS_OK && n > 0) {
        out->items = calloc(n, sizeof *out->items);
        if (!out->items)
            rc = STATUS_ENOMEM;
        else
            out->n = n;
    }
    for (size_t i = 0; rc == STATUS_OK && i < n; i++)
        rc = artifact_from_json(json_array_get(arr, i), &out->items[i]);
    if (rc != STATUS_OK)
        store_ancestry_free(out);
    return rc;
}

int store_ancestry(store *st, const char *payload_id, size_t limit, guard_ancestry *out)
{
    memset(out, 0, sizeof *out);
    char lim[32];
    snprintf(lim, sizeof lim, "%zu", limit);
    const char *args[2] = {payload_id, lim};
    json_t *j = NULL;
    int rc = store_call(st, "ancestry", 2, args, &j);
    if (rc != STATUS_OK)
        return rc;
    if (!j) {
        set_error(st, "charter_ancestry: nil reply");
        return STATUS_EPROTO;
    }
    rc = store_ancestry_from_json(j, payload_id, out);
    if (rc == STATUS_EPROTO)
        set_error(st, "charter_ancestry: the reply is not an ancestry");
    json_decref(j);
    return rc;
}

static void grant_free(guard_grant *g)
{
    free(g->id);
    strs_free(&g->tools);
    strs_free(&g->recipients);
    strs_free(&g->resources);
    strs_free(&g->parents);
    actors_free(g->grantees, g->n_grantees);
    actors_free(g->issuers, g->n_issuers);
}

/* A missing valid_from reads as never valid and a missing valid_to as expired, so a grant
 * whose validity cannot be read fails closed. */
static int grant_from_json(const json_t *e, guard_grant *g)
{
    if (!json_is_object(e))
        return STATUS_EPROTO;
    int rc = dup_id(json_object_get(e, "id"), &g->id);
    if (rc == STATUS_OK)
        rc = get_bool(json_object_get(e, "root"), false, &g->root);
    if (rc == STATUS_OK)
        rc = get_strs(json_object_get(e, "tools"), &g->tools);
    if (rc == STATUS_OK)
        rc = get_strs(json_object_get(e, "recipients"), &g->recipients);
    if (rc == STATUS_OK)
        rc = get_strs(json_object_get(e, "resources"), &g->resources);
    if (rc == STATUS_OK)
        rc = get_time(json_object_get(e, "valid_from"), HUGE_VAL, &g->valid_from);
    if (rc == STATUS_OK)
        rc = get_time(json_object_get(e, "valid_to"), 0.0, &g->valid_to);
    if (rc == STATUS_OK)
        rc = get_time(json_object_get(e, "revoked_at"), 0.0, &g->revoked_at);
    if (rc == STATUS_OK)
        rc = get_strs(json_object_get(e, "parents"), &g->parents);
    if (rc == STATUS_OK)
        rc = get_actors(json_object_get(e, "grantees"), &g->grantees, &g->n_grantees);
    if (rc == STATUS_OK)
        rc = get_actors(json_object_get(e, "issuers"), &g->issuers, &g->n_issuers);
    return rc;
}

void store_grant_chain_free(guard_chain *chain)
{
    if (!chain)
        return;
    for (size_t i = 0; i < chain->n; i++)
        grant_free(&chain->items[i]);
    free(chain->items);
    free(chain->leaf);
    memset(chain, 0, sizeof *chain);
}

int store_chain_from_json(const json_t *j, const char *leaf, guard_chain *out)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(j))
        return STATUS_EPROTO;
    const json_t *jleaf = json_object_get(j, "leaf");
    if (leaf)
        out->leaf = strdup(leaf);
    else if (json_is_string(jleaf))
        out->leaf = strdup(json_string_value(jleaf));
    else
        return STATUS_EPROTO;
    if (!out->leaf)
        return STATUS_ENOMEM;
    const json_t *arr = NULL;
    size_t n = 0;
    int rc = list_of(json_object_get(j, "grants"), &arr, &n);
    if (rc == STATUS_OK && !json_object_get(j, "grants"))
        rc = STATUS_EPROTO;
    if (rc == STATUS_OK && n > 0) {
        out->items = calloc(n, sizeof *out->items);
        if (!out->items)
            rc = STATUS_ENOMEM;
        else
            out->n = n;
    }
    for (size_t i = 0; rc == STATUS_OK && i < n; i++)
        rc = grant_from_json(json_array_get(arr, i), &out->items[i]);
    if (rc != STATUS_OK)
        store_grant_chain_free(out);
    return rc;
}

int store_grant_chain(store *st, const char *grant_id, guard_chain *out)
{
    memset(out, 0, sizeof *out);
    const char *args[1] = {grant_id};
    json_t *j = NULL;
    int rc = store_call(st, "grant_chain", 1, args, &j);
    if (rc != STATUS_OK)
        return rc;
    if (!j) {
        set_error(st, "charter_grant_chain: nil reply");
        return STATUS_EPROTO;
    }
    rc = store_chain_from_json(j, grant_id, out);
    if (rc == STATUS_EPROTO)
        set_error(st, "charter_grant_chain: the reply is not a grant chain");
    json_decref(j);
    return rc;
}

void store_context_free(guard_context *ctx)
{
    if (!ctx)
        return;
    free(ctx->id);
    free(ctx->run_id);
    free(ctx->step);
    strs_free(&ctx->owners);
    memset(ctx, 0, sizeof *ctx);
}

int store_context_from_json(const json_t *j, guard_context *out)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(j))
        return STATUS_EPROTO;
    int rc = dup_id(json_object_get(j, "id"), &out->id);
    if (rc == STATUS_OK)
        rc = dup_text(json_object_get(j, "run_id"), &out->run_id);
    if (rc == STATUS_OK)
        rc = dup_text(json_object_get(j, "step"), &out->step);
    if (rc == STATUS_OK)
        rc = get_strs(json_object_get(j, "owners"), &out->owners);
    if (rc != STATUS_OK)
        store_context_free(out);
    return rc;
}

int store_context(store *st, const char *context_id, guard_context *out)
{
    memset(out, 0, sizeof *out);
    const char *args[1] = {context_id};
    json_t *j = NULL;
    int rc = store_call(st, "context_owner", 1, args, &j);
    if (rc != STATUS_OK)
        return rc;
    if (!j) {
        set_error(st, "charter_context_owner: nil reply");
        return STATUS_EPROTO;
    }
    rc = store_context_from_json(j, out);
    if (rc == STATUS_EPROTO)
        set_error(st, "charter_context_owner: the reply is not a context");
    json_decref(j);
    return rc;
}
