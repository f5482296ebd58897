/*
 * test_queries.c - the query library (the queries/ sources, as built and embedded) and the store
 * (server/db/store.c) against a real Redis named by CHARTER_TEST_REDIS.
 *
 * The reference tests build a random lineage graph and random delegation chains through the
 * library, keep a plain C model of what they created, and require the ancestry and grant-chain
 * facts to equal what a plain walk over the model gives. The others pin down the conditional
 * commit, run transitions, events, revocation and the store's reconnect behaviour.
 */
#include <CUnit/Basic.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "evidence/evlog.h"
#include "harness.h"
#include "suite.h"
#include "db/store.h"
/* The raw call by name: this suite drives the library function by function, with malformed and
 * missing arguments on purpose, which the typed stubs do not let it pass. */
#include "db/store_raw.h"

extern const char embedded_queries[];
extern const size_t embedded_queries_len;

static const char *redis_url;
static char *library_src;
static size_t library_len;

/* --- small helpers --------------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd64(void)
{
    /* xorshift64*: a fixed seed gives the same graph on every run. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

static int rnd(int n)
{
    return n <= 0 ? 0 : (int)(rnd64() % (uint64_t)n);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void digest_hex(const char *md_name, const char *data, char *hex)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    const EVP_MD *type = EVP_get_digestbyname(md_name);
    if (!type || EVP_Digest(data, strlen(data), md, &n, type, NULL) != 1) {
        hex[0] = '\0';
        return;
    }
    for (unsigned int i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static void sha256_hex(const char *data, char hex[65])
{
    digest_hex("SHA256", data, hex);
}

static void sha1_hex(const char *data, char hex[41])
{
    digest_hex("SHA1", data, hex);
}

static const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static long long jint(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -999;
}

/* Length of a documented list: an array, or {} for the empty list; -1 for anything else. */
static long jlen(const json_t *v)
{
    if (json_is_array(v))
        return (long)json_array_size(v);
    if (json_is_object(v) && json_object_size(v) == 0)
        return 0;
    return -1;
}

/* Element i of a JSON list of strings, or "". */
static const char *jat(const json_t *list, size_t i)
{
    const char *s = json_string_value(json_array_get(list, i));
    return s ? s : "";
}

/* "<seconds>.<6 digits>" as every time the library writes. */
static bool time_string_ok(const char *s)
{
    size_t i = 0;
    while (s[i] >= '0' && s[i] <= '9')
        i++;
    if (i < 9 || s[i] != '.')
        return false;
    for (int k = 1; k <= 6; k++)
        if (s[i + k] < '0' || s[i + k] > '9')
            return false;
    return s[i + 7] == '\0';
}

/* --- a raw connection for checks the library does not offer (test only) ------------------ */

static redisContext *raw_open(void)
{
    struct timeval tv = {10, 0};
    redisContext *c = NULL;
    if (strncmp(redis_url, "unix://", 7) == 0) {
        c = redisConnectUnixWithTimeout(redis_url + 7, tv);
    } else if (strncmp(redis_url, "tcp://", 6) == 0) {
        char host[256];
        int port = 0;
        const char *colon = strrchr(redis_url + 6, ':');
        size_t hlen = colon ? (size_t)(colon - (redis_url + 6)) : 0;
        if (colon && hlen < sizeof host) {
            memcpy(host, redis_url + 6, hlen);
            host[hlen] = '\0';
            port = atoi(colon + 1);
            c = redisConnectWithTimeout(host, port, tv);
        }
    }
    if (!c || c->err) {
        fprintf(stderr, "raw connection to %s failed\n", redis_url);
        if (c)
            redisFree(c);
        return NULL;
    }
    return c;
}

typedef struct {
    char *buf;
    size_t len, cap;
} strbuf;

static void sb_add(strbuf *sb, const char *s, size_t n)
{
    if (n > ((size_t)1 << 40) || sb->len > ((size_t)1 << 40))
        abort();
    if (sb->len + n + 1 > sb->cap) {
        size_t cap = (sb->cap + n + 1) * 2;
        char *b = realloc(sb->buf, cap);
        if (!b)
            abort();
        sb->buf = b;
        sb->cap = cap;
    }
    memcpy(sb->buf + sb->len, s, n);
    sb->len += n;
    sb->buf[sb->len] = '\0';
}

static void sb_puts(strbuf *sb, const char *s)
{
    sb_add(sb, s, strlen(s));
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every key of the graph, as a sorted list; *n the count. Caller frees each and the array. */
static char **graph_keys(redisContext *raw, const char *graph, size_t *n)
{
    char pattern[160];
    snprintf(pattern, sizeof pattern, "charter:{%s}:*", graph);
    char **keys = NULL;
    size_t count = 0, cap = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = redisCommand(raw, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
            abort();
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            if (count == cap) {
                cap = cap ? cap * 2 : 256;
                keys = realloc(keys, cap * sizeof *keys);
                if (!keys)
                    abort();
            }
            keys[count++] = strdup(r->element[1]->element[i]->str);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    if (count)
        qsort(keys, count, sizeof *keys, cmp_strp);
    *n = count;
    return keys;
}

/* The whole graph as text (key, type, contents; sorted), to show that a refused write wrote
 * nothing. Caller frees. */
static char *graph_dump(redisContext *raw, const char *graph)
{
    size_t n = 0;
    char **keys = graph_keys(raw, graph, &n);
    strbuf sb = {0};
    sb_puts(&sb, "");
    for (size_t i = 0; i < n; i++) {
        redisReply *t = redisCommand(raw, "TYPE %s", keys[i]);
        if (!t)
            abort();
        sb_puts(&sb, keys[i]);
        sb_puts(&sb, " ");
        sb_puts(&sb, t->str);
        redisReply *r = NULL;
        if (strcmp(t->str, "hash") == 0)
            r = redisCommand(raw, "HGETALL %s", keys[i]);
        else if (strcmp(t->str, "set") == 0)
            r = redisCommand(raw, "SORT %s ALPHA", keys[i]);
        else if (strcmp(t->str, "zset") == 0)
            r = redisCommand(raw, "ZRANGE %s 0 -1 WITHSCORES", keys[i]);
        else
            r = redisCommand(raw, "DUMP %s", keys[i]);
        if (!r)
            abort();
        if (r->type == REDIS_REPLY_ARRAY) {
            /* hash fields come in no fixed order: sort the "field=value" pairs */
            size_t m = r->elements;
            char **items = calloc(m + 1, sizeof *items);
            size_t k = 0;
            bool pairs = strcmp(t->str, "hash") == 0;
            for (size_t j = 0; j < m; j += pairs ? 2 : 1) {
                strbuf e = {0};
                sb_add(&e, r->element[j]->str, r->element[j]->len);
                if (pairs) {
                    sb_puts(&e, "=");
                    sb_add(&e, r->element[j + 1]->str, r->element[j + 1]->len);
                }
                items[k++] = e.buf;
            }
            if (pairs && k)
                qsort(items, k, sizeof *items, cmp_strp);
            for (size_t j = 0; j < k; j++) {
                sb_puts(&sb, " | ");
                sb_puts(&sb, items[j]);
                free(items[j]);
            }
            free(items);
        } else if (r->type == REDIS_REPLY_STRING) {
            sb_puts(&sb, " <dump>");
        }
        sb_puts(&sb, "\n");
        freeReplyObject(r);
        freeReplyObject(t);
        free(keys[i]);
    }
    free(keys);
    return sb.buf;
}

static void raw_drop_graph(redisContext *raw, const char *graph)
{
    size_t n = 0;
    char **keys = graph_keys(raw, graph, &n);
    for (size_t i = 0; i < n; i++) {
        redisReply *r = redisCommand(raw, "UNLINK %s", keys[i]);
        if (r)
            freeReplyObject(r);
        free(keys[i]);
    }
    free(keys);
}

static void raw_exec(redisContext *raw, const char *fmt, const char *a, const char *b,
                     const char *c)
{
    redisReply *r = redisCommand(raw, fmt, a, b, c);
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r) {
        CU_ASSERT_NOT_EQUAL(r->type, REDIS_REPLY_ERROR);
        freeReplyObject(r);
    }
}

/* --- graphs ------------------------------------------------------------------------------ */

typedef struct {
    char graph[96];
    store *st;
    redisContext *raw;
} tgraph;

/* Opens the test's own graph t_<name>_<pid>, loads the library from the source tree and
 * refuses a graph that already holds data. Returns false (after a failed assertion) when the
 * graph cannot be used. */
static bool graph_open(tgraph *g, const char *name)
{
    memset(g, 0, sizeof *g);
    snprintf(g->graph, sizeof g->graph, "t_%s_%ld", name, (long)getpid());
    int rc = store_open(redis_url, g->graph, 20000, &g->st);
    if (rc != STATUS_OK) {
        fprintf(stderr, "store_open(%s, %s): %d\n", redis_url, g->graph, rc);
        CU_FAIL("store_open failed");
        return false;
    }
    rc = store_load_library(g->st, library_src, library_len);
    if (rc != STATUS_OK) {
        fprintf(stderr, "store_load_library: %s\n", store_last_error(g->st));
        CU_FAIL("store_load_library failed");
        store_close(g->st);
        g->st = NULL;
        return false;
    }
    json_t *stats = NULL;
    rc = q_graph_stats(g->st, &stats);
    long long keys = rc == STATUS_OK ? jint(stats, "keys") : -1;
    json_decref(stats);
    if (keys != 0) {
        fprintf(stderr, "graph %s is not empty (%lld keys) or unreadable: refusing to run\n",
                g->graph, keys);
        CU_FAIL("the test graph is not empty");
        store_close(g->st);
        g->st = NULL;
        return false;
    }
    g->raw = raw_open();
    if (!g->raw) {
        CU_FAIL("raw connection failed");
        store_close(g->st);
        g->st = NULL;
        return false;
    }
    return true;
}

static void graph_close(tgraph *g)
{
    if (g->raw) {
        raw_drop_graph(g->raw, g->graph);
        redisFree(g->raw);
    }
    store_close(g->st);
    memset(g, 0, sizeof *g);
}

/* A test that replaces the query library or keeps the server busy does so on a redis-server
 * of its own: the library is one per server, and other test programs may be using the shared
 * one at the same moment (deploy/sanitize.sh runs them in parallel). Returns true with redis_url
 * pointing at it; private_redis_end puts the shared URL back and stops it. */
static harness_private_redis private_redis;
static const char *shared_redis_url;

static bool private_redis_begin(void)
{
    memset(&private_redis, 0, sizeof private_redis);
    private_redis.no_persistence = true;
    if (harness_private_redis_start(&private_redis) != 0) {
        CU_FAIL("a private redis-server did not start");
        return false;
    }
    shared_redis_url = redis_url;
    redis_url = private_redis.url;
    return true;
}

static void private_redis_end(void)
{
    redis_url = shared_redis_url;
    harness_private_redis_stop(&private_redis);
}

static json_t *call_ok(tgraph *g, const char *fn, int n, const char *const *args)
{
    json_t *out = NULL;
    int rc = store_call(g->st, fn, n, args, &out);
    if (rc != STATUS_OK) {
        fprintf(stderr, "charter_%s: %d: %s\n", fn, rc, store_last_error(g->st));
        CU_FAIL("store_call failed");
    }
    return out;
}

/* Calls fn with arg (stolen) and expects success. */
static json_t *call_json_ok(tgraph *g, const char *fn, json_t *arg)
{
    json_t *out = NULL;
    int rc = arg ? store_call_json(g->st, fn, arg, &out) : STATUS_ENOMEM;
    if (rc != STATUS_OK) {
        fprintf(stderr, "charter_%s: %d: %s\n", fn, rc, store_last_error(g->st));
        CU_FAIL("store_call_json failed");
    }
    json_decref(arg);
    return out;
}

/* --- sealed events --------------------------------------------------------------------------
 * Every function that writes an event takes it sealed, as its last argument: seq, ts and prev
 * from charter_run_head, and a hash. The library stores a seal as given and checks only that it
 * continues the run's head; charterd computes the real hash (evlog.c, covered by
 * test_evidence), so here any well-formed hash will do: SHA-256 over run, seq and prev. */

/* The run's head as charter_run_head reports it (caller decrefs). */
static json_t *run_head(tgraph *g, const char *run)
{
    const char *args[1] = {run};
    return call_ok(g, "run_head", 1, args);
}

/* ev (stolen; absent texts become "") sealed as the next event of run on its current head.
 * Returns its JSON text (caller frees). */
static char *seal(tgraph *g, const char *run, json_t *ev)
{
    static const char *const texts[] = {"outcome", "codes",    "witness",
                                        "detail",  "snapshot", "evaluator"};
    json_t *h = run_head(g, run);
    long long seq = jint(h, "seq") + 1;
    char buf[256], hash[65];
    snprintf(buf, sizeof buf, "%s|%lld|%s", run, seq, jstr(h, "hash"));
    sha256_hex(buf, hash);
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if (!json_object_get(ev, texts[i]))
            json_object_set_new(ev, texts[i], json_string(""));
    json_object_set_new(ev, "seq", json_integer(seq));
    json_object_set_new(ev, "ts", json_string(jstr(h, "now")));
    json_object_set_new(ev, "prev", json_string(jstr(h, "hash")));
    json_object_set_new(ev, "hash", json_string(hash));
    char *text = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    json_decref(h);
    return text;
}

/* The kind a writing function's event has when the test gives none. */
static const char *default_kind(const char *fn)
{
    if (strcmp(fn, "create_run") == 0)
        return "run_created";
    if (strcmp(fn, "open_context") == 0)
        return "step_opened";
    if (strcmp(fn, "commit_delivery") == 0)
        return "delivery_decided";
    return "artifact_created";
}

/* charter_create_artifact's verified argument for doc: doc's "verified" (taken out) when it
 * has one, else each of its input_ids with its summary_hash as stored now, as the input gate
 * would have verified it just before (malloc'd text). */
static char *verified_of(tgraph *g, json_t *doc)
{
    json_t *v = json_incref(json_object_get(doc, "verified"));
    json_object_del(doc, "verified");
    size_t i;
    json_t *id;
    if (!v) {
        v = json_array();
        json_array_foreach(json_object_get(doc, "input_ids"), i, id)
        {
            char key[256];
            snprintf(key, sizeof key, "charter:{%s}:artifact:%s", g->graph, json_string_value(id));
            redisReply *r = redisCommand(g->raw, "HGET %s summary_hash", key);
            const char *sh = r && r->type == REDIS_REPLY_STRING ? r->str : "";
            json_array_append_new(v, json_pack("{s:O, s:s}", "id", id, "summary_hash", sh));
            freeReplyObject(r);
        }
    }
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(v);
    return text;
}

/* Calls a writing function whose first argument is the JSON doc (stolen): doc's "event" (or an
 * event of fn's default kind) is taken out, sealed on run_id's head and passed last; for
 * create_artifact, the verified summaries (verified_of) are passed between them. With list
 * (not NULL), a reply that is a flat list is *list instead. */
static int writer_call_list(tgraph *g, const char *fn, json_t *doc, json_t **out,
                            store_list **list);

static int writer_call(tgraph *g, const char *fn, json_t *doc, json_t **out)
{
    return writer_call_list(g, fn, doc, out, NULL);
}

static int writer_call_list(tgraph *g, const char *fn, json_t *doc, json_t **out, store_list **list)
{
    *out = NULL;
    if (!doc)
        return STATUS_EINVAL; /* as store_call_json: jansson refused to build it (bad UTF-8) */
    json_t *ev = json_incref(json_object_get(doc, "event"));
    json_object_del(doc, "event");
    if (!ev)
        ev = json_object();
    if (!json_object_get(ev, "kind"))
        json_object_set_new(ev, "kind", json_string(default_kind(fn)));
    const char *run = jstr(doc, strcmp(fn, "create_run") == 0 ? "id" : "run_id");
    char *sealed = seal(g, *run ? run : "none", ev);
    char *verified = strcmp(fn, "create_artifact") == 0 ? verified_of(g, doc) : NULL;
    char *text = json_dumps(doc, JSON_COMPACT);
    const char *args[3] = {text, sealed};
    int nargs = 2;
    if (verified) {
        args[1] = verified;
        args[2] = sealed;
        nargs = 3;
    }
    int rc = list != NULL ? store_call_list(g->st, fn, nargs, args, out, list)
                          : store_call(g->st, fn, nargs, args, out);
    free(text);
    free(sealed);
    free(verified);
    json_decref(doc);
    return rc;
}

static json_t *writer_ok(tgraph *g, const char *fn, json_t *doc)
{
    json_t *out = NULL;
    int rc = writer_call(g, fn, doc, &out);
    if (rc != STATUS_OK) {
        fprintf(stderr, "charter_%s: %d: %s\n", fn, rc, store_last_error(g->st));
        CU_FAIL("a writing function failed");
    }
    return out;
}

static int writer_rc(tgraph *g, const char *fn, json_t *doc)
{
    json_t *out = NULL;
    int rc = writer_call(g, fn, doc, &out);
    json_decref(out);
    return rc;
}

/* Appends an event (ev, stolen) to run through charter_append_event. */
static int append_rc(tgraph *g, const char *run, json_t *ev, json_t **out)
{
    char *sealed = seal(g, run, ev);
    const char *args[2] = {run, sealed};
    int rc = store_call(g->st, "append_event", 2, args, out);
    free(sealed);
    return rc;
}

static void create_run(tgraph *g, const char *id)
{
    json_decref(writer_ok(g, "create_run",
                          json_pack("{s:s, s:s, s:s, s:s}", "id", id, "task", "test task", "mode",
                                    "external", "workflow", "test")));
}

/* Opens a context and copies its id into id (16 bytes). */
static void open_context(tgraph *g, const char *run, const char *step, const char *actor, char *id)
{
    json_t *h = run_head(g, run);
    char detail[160];
    snprintf(detail, sizeof detail, "step %s context %s actor %s", step, jstr(h, "next_context"),
             actor);
    json_t *r =
        writer_ok(g, "open_context",
                  json_pack("{s:s, s:s, s:s, s:s, s:{s:s}}", "run_id", run, "step", step, "actor",
                            actor, "id", jstr(h, "next_context"), "event", "detail", detail));
    json_decref(h);
    snprintf(id, 16, "%s", jstr(json_object_get(r, "context"), "id"));
    json_decref(r);
}

/* Creates an artifact and copies its id into id (16 bytes); returns the call's status. */
static int create_artifact(tgraph *g, const char *run, const char *ctx, const char *kind,
                           const char *content, const char *resource, const char *const *inputs,
                           size_t n_inputs, char *id)
{
    char hash[65];
    sha256_hex(content, hash);
    json_t *in = json_array();
    for (size_t i = 0; i < n_inputs; i++)
        json_array_append_new(in, json_string(inputs[i]));
    json_t *arg =
        json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:o, s:b}", "run_id", run, "context_id",
                  ctx, "kind", kind, "title", content, "conf", 0, "integrity", 0, "hash", hash,
                  "content", content, "input_ids", in, "capture_complete", 1);
    if (resource)
        json_object_set_new(arg, "resource", json_string(resource));
    json_t *out = NULL;
    int rc = writer_call(g, "create_artifact", arg, &out);
    if (id)
        snprintf(id, 16, "%s", rc == STATUS_OK ? jstr(json_object_get(out, "artifact"), "id") : "");
    json_decref(out);
    return rc;
}

/* --- the reference test: random lineage graph ------------------------------------------------ */

#define RG_RUNS 4
#define RG_PER_RUN 400
#define RG_N (RG_RUNS * RG_PER_RUN)
#define RG_RESOURCES 6
#define RG_CONTEXTS 5
#define RG_SOURCES_FIRST 10

typedef struct {
    int run;
    bool source;
    int conf, integrity;
    bool capture;
    char title[48];
    char hash[65];
    int inputs[3]; /* as recorded, duplicates kept */
    int n_inputs;
    int resource; /* -1: none */
    int context;
} rg_art;

typedef struct {
    rg_art art[RG_N];
    int n;
    char ctx_ids[RG_RUNS * RG_CONTEXTS][16];
    int res_conf[RG_RESOURCES], res_integrity[RG_RESOURCES];
} rg_model;

static void rg_run_id(int r, char *out)
{
    snprintf(out, 16, "run%d", r);
}

static void rg_art_id(int idx, char *out)
{
    snprintf(out, 16, "a%d", idx + 1);
}

static bool rg_build(tgraph *g, rg_model *m)
{
    json_t *res = json_array(), *actors = json_array();
    for (int i = 0; i < RG_RESOURCES; i++) {
        char id[16], title[32];
        snprintf(id, sizeof id, "res%d", i);
        snprintf(title, sizeof title, "Resource %d", i);
        m->res_conf[i] = rnd(3);
        m->res_integrity[i] = rnd(2);
        json_array_append_new(res, json_pack("{s:s, s:s, s:i, s:i, s:s}", "id", id, "title", title,
                                             "conf", m->res_conf[i], "integrity",
                                             m->res_integrity[i], "content", title));
    }
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "agent%d", i);
        json_array_append_new(actors, json_pack("{s:s, s:s}", "id", id, "kind", "agent"));
    }
    json_t *r =
        call_json_ok(g, "seed", json_pack("{s:o, s:o}", "resources", res, "actors", actors));
    CU_ASSERT_EQUAL(jint(r, "created"), RG_RESOURCES + 3);
    json_decref(r);

    for (int run = 0; run < RG_RUNS; run++) {
        char rid[16];
        rg_run_id(run, rid);
        create_run(g, rid);
        for (int c = 0; c < RG_CONTEXTS; c++) {
            char step[16], actor[16];
            snprintf(step, sizeof step, "s%d", c);
            snprintf(actor, sizeof actor, "agent%d", c % 3);
            open_context(g, rid, step, actor, m->ctx_ids[run * RG_CONTEXTS + c]);
        }
    }

    for (int run = 0; run < RG_RUNS; run++) {
        int start = m->n;
        for (int k = 0; k < RG_PER_RUN; k++) {
            int idx = m->n;
            rg_art *a = &m->art[idx];
            a->run = run;
            /* runs of the thin shapes keep their sources at the start, so a late artifact's
             * lineage spans the whole run */
            a->source = k < RG_SOURCES_FIRST || (run % 4 != 0 && run % 4 != 3 && rnd(15) == 0);
            a->resource = a->source && rnd(3) != 0 ? rnd(RG_RESOURCES) : -1;
            if (!a->source) {
                a->n_inputs = 1 + rnd(3);
                for (int p = 0; p < a->n_inputs; p++) {
                    int parent;
                    switch (run % 4) {
                    case 0: /* long thin lineage: the previous artifact, then recent ones */
                        parent = p == 0 ? idx - 1 : idx - 1 - rnd(k < 5 ? k : 5);
                        break;
                    case 1: /* wide: any earlier artifact of the run */
                        parent = start + rnd(k);
                        break;
                    case 2: /* layered: the previous layer of 40 */
                        parent = k < 40 ? start + rnd(k) : start + (k / 40 - 1) * 40 + rnd(40);
                        break;
                    default: /* cross-run: a recent parent, then any earlier artifact or
                              * one near the top of an earlier run */
                        if (p == 0)
                            parent = idx - 1;
                        else if (rnd(2) || run == 0)
                            parent = rnd(idx);
                        else
                            parent = rnd(run) * RG_PER_RUN + RG_PER_RUN - 1 - rnd(50);
                        break;
                    }
                    a->inputs[p] = parent;
                }
            }
            a->conf = rnd(3);
            a->integrity = rnd(2);
            a->capture = rnd(4) != 0;
            a->context = run * RG_CONTEXTS + rnd(RG_CONTEXTS);
            snprintf(a->title, sizeof a->title, "artifact %d of run %d", idx, run);
            char content[64];
            snprintf(content, sizeof content, "content %d %llu", idx,
                     (unsigned long long)(rnd64() % 100000));
            sha256_hex(content, a->hash);

            char rid[16], res_id[16];
            rg_run_id(run, rid);
            json_t *in = json_array();
            for (int p = 0; p < a->n_inputs; p++) {
                char pid[16];
                rg_art_id(a->inputs[p], pid);
                json_array_append_new(in, json_string(pid));
            }
            json_t *arg = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:o, s:b, s:{s:s}}",
                                    "run_id", rid, "context_id", m->ctx_ids[a->context], "kind",
                                    a->source ? "source" : "derived", "title", a->title, "conf",
                                    a->conf, "integrity", a->integrity, "hash", a->hash, "content",
                                    content, "input_ids", in, "capture_complete", a->capture,
                                    "event", "kind", "output_recorded");
            if (a->resource >= 0) {
                snprintf(res_id, sizeof res_id, "res%d", a->resource);
                json_object_set_new(arg, "resource", json_string(res_id));
            }
            json_t *out = writer_ok(g, "create_artifact", arg);
            char want[16];
            rg_art_id(idx, want);
            const char *got = jstr(json_object_get(out, "artifact"), "id");
            bool ok = strcmp(got, want) == 0;
            json_decref(out);
            if (!ok) {
                fprintf(stderr, "artifact %d: id %s, expected %s\n", idx, got, want);
                CU_FAIL("artifact ids are not a1, a2, ... in creation order");
                return false;
            }
            m->n++;
        }
    }
    return true;
}

/* The plain walk: marks every artifact reachable from root through inputs; returns the count. */
static size_t rg_reach(const rg_model *m, int root, unsigned char *mark)
{
    int *stack = malloc(sizeof *stack * (size_t)(m->n * 3 + 1));
    size_t top = 0, count = 0;
    memset(mark, 0, (size_t)m->n);
    stack[top++] = root;
    mark[root] = 1;
    while (top) {
        int i = stack[--top];
        count++;
        for (int p = 0; p < m->art[i].n_inputs; p++) {
            int q = m->art[i].inputs[p];
            if (!mark[q]) {
                mark[q] = 1;
                stack[top++] = q;
            }
        }
    }
    free(stack);
    return count;
}

static bool strs_has(const guard_strs *s, const char *x)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->items[i], x) == 0)
            return true;
    return false;
}

static int mismatch(int *count, const char *what, const char *id)
{
    if (*count < 5)
        fprintf(stderr, "ancestry mismatch at %s: %s\n", id, what);
    return ++*count;
}

/* Compares one artifact of the store's ancestry with the model; returns the mismatch count. */
static int rg_compare_art(const rg_model *m, int idx, const guard_artifact *a)
{
    int bad = 0;
    const rg_art *x = &m->art[idx];
    char rid[16], id[16];
    rg_run_id(x->run, rid);
    rg_art_id(idx, id);
    if (strcmp(a->run_id, rid) != 0)
        mismatch(&bad, "run_id", id);
    if (!a->kind_known || a->is_source != x->source)
        mismatch(&bad, "kind", id);
    if (strcmp(a->title, x->title) != 0)
        mismatch(&bad, "title", id);
    if (a->conf != x->conf || a->integrity != x->integrity)
        mismatch(&bad, "labels", id);
    if (a->capture_complete != x->capture)
        mismatch(&bad, "capture_complete", id);
    if (strcmp(a->hash, x->hash) != 0)
        mismatch(&bad, "hash", id);
    if (a->input_ids.n != (size_t)x->n_inputs) {
        mismatch(&bad, "input_ids count", id);
    } else {
        for (int p = 0; p < x->n_inputs; p++) {
            char pid[16];
            rg_art_id(x->inputs[p], pid);
            if (strcmp(a->input_ids.items[p], pid) != 0)
                mismatch(&bad, "input_ids order", id);
        }
    }
    /* parents: the set of inputs, each once */
    size_t distinct = 0;
    for (int p = 0; p < x->n_inputs; p++) {
        bool dup = false;
        for (int q = 0; q < p; q++)
            dup = dup || x->inputs[q] == x->inputs[p];
        if (dup)
            continue;
        distinct++;
        char pid[16];
        rg_art_id(x->inputs[p], pid);
        if (!strs_has(&a->parents, pid))
            mismatch(&bad, "missing parent", id);
    }
    if (a->parents.n != distinct)
        mismatch(&bad, "parent count", id);
    if (x->resource < 0) {
        if (a->n_resources != 0)
            mismatch(&bad, "unexpected resource", id);
    } else {
        char res[16], title[32];
        snprintf(res, sizeof res, "res%d", x->resource);
        snprintf(title, sizeof title, "Resource %d", x->resource);
        if (a->n_resources != 1 || strcmp(a->resources[0].id, res) != 0 ||
            strcmp(a->resources[0].title, title) != 0 ||
            a->resources[0].conf != m->res_conf[x->resource] ||
            a->resources[0].integrity != m->res_integrity[x->resource])
            mismatch(&bad, "resource", id);
    }
    if (a->producers.n != 1 || strcmp(a->producers.items[0], m->ctx_ids[x->context]) != 0)
        mismatch(&bad, "producers", id);
    return bad;
}

/* Compares a whole ancestry with the plain walk from root; returns the mismatch count. */
static int rg_compare(const rg_model *m, int root, const guard_ancestry *anc)
{
    unsigned char *mark = malloc((size_t)m->n);
    unsigned char *seen = calloc((size_t)m->n, 1);
    size_t expect = rg_reach(m, root, mark);
    int bad = 0;
    char rid[16];
    rg_art_id(root, rid);
    if (anc->truncated)
        mismatch(&bad, "truncated", rid);
    if (strcmp(anc->root, rid) != 0 || anc->n == 0 || strcmp(anc->items[0].id, rid) != 0)
        mismatch(&bad, "root first", rid);
    if (anc->n != expect)
        mismatch(&bad, "artifact count", rid);
    for (size_t i = 0; i < anc->n; i++) {
        int num = 0;
        char tail;
        const char *id = anc->items[i].id;
        if (sscanf(id, "a%d%c", &num, &tail) != 1 || num < 1 || num > m->n) {
            mismatch(&bad, "unknown id", id);
            continue;
        }
        int idx = num - 1;
        if (!mark[idx])
            mismatch(&bad, "not reachable in the model", id);
        if (seen[idx])
            mismatch(&bad, "listed twice", id);
        seen[idx] = 1;
        bad += rg_compare_art(m, idx, &anc->items[i]);
    }
    free(mark);
    free(seen);
    return bad;
}

static void test_ancestry_equals_plain_walk_on_random_graph(void)
{
    tgraph g;
    if (!graph_open(&g, "ancestry"))
        return;
    rng_state = 0x9E3779B97F4A7C15ULL;
    rg_model *m = calloc(1, sizeof *m);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    if (!rg_build(&g, m)) {
        free(m);
        graph_close(&g);
        return;
    }
    CU_ASSERT(m->n >= 1500);

    unsigned char *mark = malloc((size_t)m->n);
    int bad = 0, checked = 0, largest = 0;
    size_t largest_n = 0;
    for (int t = 0; t < 120; t++) {
        int root;
        if (t < RG_RUNS)
            root = (t + 1) * RG_PER_RUN - 1; /* the last artifact of each run */
        else if (t == RG_RUNS)
            root = 0; /* a source */
        else
            root = rnd(m->n);
        size_t expect = rg_reach(m, root, mark);
        if (expect > largest_n) {
            largest_n = expect;
            largest = root;
        }
        char id[16];
        rg_art_id(root, id);
        guard_ancestry anc;
        int rc = store_ancestry(g.st, id, 100000, &anc);
        CU_ASSERT_EQUAL(rc, STATUS_OK);
        if (rc == STATUS_OK) {
            bad += rg_compare(m, root, &anc);
            checked++;
        }
        facts_ancestry_free(&anc);
    }
    CU_ASSERT_EQUAL(checked, 120);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(largest_n > 1000); /* the cross-run shape reaches across most of the graph */

    /* the limit: truncated with exactly limit artifacts, the root first */
    char id[16];
    rg_art_id(largest, id);
    guard_ancestry anc;
    CU_ASSERT_EQUAL(store_ancestry(g.st, id, largest_n - 3, &anc), STATUS_OK);
    CU_ASSERT(anc.truncated);
    CU_ASSERT_EQUAL(anc.n, largest_n - 3);
    CU_ASSERT(anc.n > 0 && strcmp(anc.items[0].id, id) == 0);
    facts_ancestry_free(&anc);
    CU_ASSERT_EQUAL(store_ancestry(g.st, id, largest_n, &anc), STATUS_OK);
    CU_ASSERT(!anc.truncated);
    CU_ASSERT_EQUAL(anc.n, largest_n);
    facts_ancestry_free(&anc);

    double t0 = now_ms();
    int rc = store_ancestry(g.st, id, 100000, &anc);
    double t1 = now_ms();
    CU_ASSERT_EQUAL(rc, STATUS_OK);
    printf("\n  [timing] store_ancestry on the random graph (%d artifacts): %zu artifacts in "
           "%.1f ms\n",
           m->n, anc.n, t1 - t0);
    facts_ancestry_free(&anc);

    /* errors */
    CU_ASSERT_EQUAL(store_ancestry(g.st, "a999999", 10, &anc), STATUS_ENOTFOUND);
    CU_ASSERT_EQUAL(anc.n, 0);
    CU_ASSERT_EQUAL(store_ancestry(g.st, "a1", 0, &anc), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_ancestry(g.st, "bad id!", 10, &anc), STATUS_EINVAL);
    free(mark);
    free(m);
    graph_close(&g);
}

/* The SHA-1 of data (core/digest.c; its header clashes with this file's digest_hex). */
int digest_sha1_hex(const void *data, size_t len, char hex[41]);
static json_t *stored_summary(tgraph *g, const char *id, char *sha);

#define DEEP_N 1500

static void test_ancestry_of_a_1500_deep_chain(void)
{
    tgraph g;
    if (!graph_open(&g, "deep"))
        return;
    json_t *seed =
        json_pack("{s:[{s:s, s:s, s:i, s:i}], s:[{s:s, s:s}]}", "resources", "id", "doc", "title",
                  "Doc", "conf", 1, "integrity", 1, "actors", "id", "agent", "kind", "agent");
    json_decref(call_json_ok(&g, "seed", seed));
    create_run(&g, "deep");
    char ctx[16], prev[16], id[16];
    open_context(&g, "deep", "chain", "agent", ctx);
    CU_ASSERT_EQUAL(create_artifact(&g, "deep", ctx, "source", "link 0", "doc", NULL, 0, prev),
                    STATUS_OK);
    int failures = 0;
    for (int i = 1; i < DEEP_N; i++) {
        char content[32];
        snprintf(content, sizeof content, "link %d", i);
        const char *in[1] = {prev};
        if (create_artifact(&g, "deep", ctx, "derived", content, NULL, in, 1, id) != STATUS_OK)
            failures++;
        memcpy(prev, id, sizeof prev);
    }
    CU_ASSERT_EQUAL(failures, 0);

    guard_ancestry anc;
    double t0 = now_ms();
    int rc = store_ancestry(g.st, prev, 100000, &anc);
    double t1 = now_ms();
    CU_ASSERT_EQUAL(rc, STATUS_OK);
    CU_ASSERT_EQUAL(anc.n, DEEP_N);
    CU_ASSERT(!anc.truncated);
    int order_bad = 0;
    for (size_t i = 0; i < anc.n; i++) {
        char want[16];
        snprintf(want, sizeof want, "a%zu", (size_t)DEEP_N - i);
        if (strcmp(anc.items[i].id, want) != 0)
            order_bad++;
    }
    CU_ASSERT_EQUAL(order_bad, 0); /* breadth-first from the leaf: a1500, a1499, ..., a1 */
    if (anc.n == DEEP_N) {
        CU_ASSERT(anc.items[DEEP_N - 1].is_source);
        CU_ASSERT_EQUAL(anc.items[DEEP_N - 1].n_resources, 1);
        CU_ASSERT_EQUAL(anc.items[DEEP_N - 1].parents.n, 0);
        CU_ASSERT_EQUAL(anc.items[0].parents.n, 1);
    }
    char deep_sha[41];
    json_t *deep = stored_summary(&g, prev, deep_sha);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(deep, "depth")), DEEP_N);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(deep, "count")), DEEP_N);
    json_decref(deep);
    printf("\n  [timing] store_ancestry on a %d-deep chain: %zu artifacts in %.1f ms\n", DEEP_N,
           anc.n, t1 - t0);
    facts_ancestry_free(&anc);
    graph_close(&g);
}

/* --- lineage summaries ----------------------------------------------------------------------- */

/* Creates an artifact with the given labels (conf, integrity) and copies its id into id. */
static int create_labelled(tgraph *g, const char *run, const char *ctx, const char *content,
                           const char *resource, const char *const *inputs, size_t n_inputs,
                           int conf, int integrity, char *id)
{
    char hash[65];
    sha256_hex(content, hash);
    json_t *in = json_array();
    for (size_t i = 0; i < n_inputs; i++)
        json_array_append_new(in, json_string(inputs[i]));
    json_t *arg = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:o, s:b}", "run_id", run,
                            "context_id", ctx, "kind", resource ? "source" : "derived", "title",
                            content, "conf", conf, "integrity", integrity, "hash", hash, "content",
                            content, "input_ids", in, "capture_complete", 1);
    if (resource)
        json_object_set_new(arg, "resource", json_string(resource));
    json_t *out = NULL;
    int rc = writer_call(g, "create_artifact", arg, &out);
    snprintf(id, 16, "%s", rc == STATUS_OK ? jstr(json_object_get(out, "artifact"), "id") : "");
    json_decref(out);
    return rc;
}

/* The stored summary of artifact id (decoded; NULL when absent), after checking that its
 * summary_hash is the SHA-1 of its text (copied into sha, 41 bytes). */
static json_t *stored_summary(tgraph *g, const char *id, char *sha)
{
    char key[256];
    snprintf(key, sizeof key, "charter:{%s}:artifact:%s", g->graph, id);
    redisReply *r = redisCommand(g->raw, "HMGET %s summary summary_hash", key);
    json_t *s = NULL;
    sha[0] = '\0';
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING) {
        char actual[41];
        CU_ASSERT_EQUAL(digest_sha1_hex(r->element[0]->str, r->element[0]->len, actual), 0);
        CU_ASSERT_STRING_EQUAL(actual, r->element[1]->str);
        snprintf(sha, 41, "%s", r->element[1]->str);
        s = json_loadb(r->element[0]->str, r->element[0]->len, 0, NULL);
    }
    if (r)
        freeReplyObject(r);
    return s;
}

static void test_create_artifact_summarises_its_lineage_from_its_parents(void)
{
    tgraph g;
    if (!graph_open(&g, "summary"))
        return;
    json_t *seed = json_pack("{s:[{s:s, s:s, s:i, s:i}, {s:s, s:s, s:i, s:i}], s:[{s:s, s:s}]}",
                             "resources", "id", "budget", "title", "Budget", "conf", 2, "integrity",
                             1, "id", "web", "title", "Web", "conf", 0, "integrity", 0, "actors",
                             "id", "agent", "kind", "agent");
    json_decref(call_json_ok(&g, "seed", seed));
    create_run(&g, "r1");
    create_run(&g, "r2");
    char ctx[16], ctx2[16], s1[16], s2[16], d[16], d2[16], x[16], y[16];
    char h1[41], h2[41], hd[41], hx[41];
    open_context(&g, "r1", "s", "agent", ctx);
    open_context(&g, "r2", "s", "agent", ctx2);
    CU_ASSERT_EQUAL(create_labelled(&g, "r1", ctx, "b", "budget", NULL, 0, 2, 1, s1), STATUS_OK);
    CU_ASSERT_EQUAL(create_labelled(&g, "r1", ctx, "w", "web", NULL, 0, 0, 0, s2), STATUS_OK);
    const char *both[2] = {s2, s1};
    CU_ASSERT_EQUAL(create_labelled(&g, "r1", ctx, "d", NULL, both, 2, 2, 0, d), STATUS_OK);
    json_t *a = stored_summary(&g, s1, h1), *b = stored_summary(&g, s2, h2);
    json_t *sd = stored_summary(&g, d, hd);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sd);
    /* labels: max / min of the parents', the sources sorted with their labels */
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(sd, "conf")), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(sd, "integrity")), 0);
    json_t *src = json_object_get(sd, "sources");
    CU_ASSERT_EQUAL(json_array_size(src), 2);
    CU_ASSERT_STRING_EQUAL(jstr(json_array_get(src, 0), "id"), "budget");
    CU_ASSERT_STRING_EQUAL(jstr(json_array_get(src, 1), "id"), "web");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(sd, "depth")), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(sd, "count")), 3);
    CU_ASSERT(json_is_true(json_object_get(sd, "ok")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(a, "depth")), 1);
    /* the Merkle DAG: the parents' summary hashes, in the order of the sorted parents */
    json_t *refs = json_object_get(sd, "refs");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(refs, 0)), h1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(refs, 1)), h2);
    CU_ASSERT(json_is_true(json_object_get(b, "ok")));
    /* stored labels that are not the recomputed ones */
    CU_ASSERT_EQUAL(create_labelled(&g, "r1", ctx, "x", NULL, both, 2, 0, 0, x), STATUS_OK);
    json_t *sx = stored_summary(&g, x, hx);
    CU_ASSERT(json_is_false(json_object_get(sx, "ok")));
    CU_ASSERT_STRING_EQUAL(jstr(sx, "code"), "LABEL_MISMATCH");
    /* a parent of another run, and a child inheriting its parent's failure */
    const char *cross[1] = {d};
    CU_ASSERT_EQUAL(create_labelled(&g, "r2", ctx2, "d2", NULL, cross, 1, 2, 0, d2), STATUS_OK);
    char h[41];
    json_t *s_d2 = stored_summary(&g, d2, h);
    CU_ASSERT(json_is_false(json_object_get(s_d2, "ok")));
    CU_ASSERT_STRING_EQUAL(jstr(s_d2, "code"), "PROVENANCE_INCOMPLETE");
    const char *after_x[1] = {x};
    CU_ASSERT_EQUAL(create_labelled(&g, "r1", ctx, "y", NULL, after_x, 1, 2, 0, y), STATUS_OK);
    json_t *sy = stored_summary(&g, y, h);
    CU_ASSERT_STRING_EQUAL(jstr(sy, "code"), "LABEL_MISMATCH");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(sy, "depth")), 3);
    json_decref(a);
    json_decref(b);
    json_decref(sd);
    json_decref(sx);
    json_decref(s_d2);
    json_decref(sy);
    graph_close(&g);
}

/* The input gate's one read: the context and, per id in order, its summary; an artifact
 * without one is {"id"} alone, an unknown artifact {"id","missing":true}; ids travel as one
 * JSON argument, so more than the store's 32 arguments fit. Audit names a missing summary
 * first in creation order and lists the seals of what it checked before it. */
static void test_input_facts_and_audit_of_missing_summaries(void)
{
    tgraph g;
    if (!graph_open(&g, "input_facts"))
        return;
    json_t *seed =
        json_pack("{s:[{s:s, s:s, s:i, s:i}], s:[{s:s, s:s}]}", "resources", "id", "web", "title",
                  "Web", "conf", 0, "integrity", 0, "actors", "id", "agent", "kind", "agent");
    json_decref(call_json_ok(&g, "seed", seed));
    create_run(&g, "r1");
    char ctx[16], s1[16], d[16], h1[41];
    open_context(&g, "r1", "s", "agent", ctx);
    CU_ASSERT_EQUAL(create_labelled(&g, "r1", ctx, "w", "web", NULL, 0, 0, 0, s1), STATUS_OK);
    const char *from[1] = {s1};
    CU_ASSERT_EQUAL(create_labelled(&g, "r1", ctx, "d", NULL, from, 1, 0, 0, d), STATUS_OK);
    json_decref(stored_summary(&g, s1, h1));
    json_t *ids = json_pack("[s, s, s]", s1, d, "nosuch");
    for (int i = 0; i < 40; i++)
        json_array_append_new(ids, json_string(s1));
    json_t *facts = call_json_ok(&g, "input_facts",
                                 json_pack("{s:s, s:O}", "context_id", ctx, "artifact_ids", ids));
    CU_ASSERT_STRING_EQUAL(jstr(json_object_get(facts, "context"), "id"), ctx);
    json_t *sums = json_object_get(facts, "summaries");
    CU_ASSERT_EQUAL_FATAL(json_array_size(sums), 43);
    CU_ASSERT_STRING_EQUAL(jstr(json_array_get(sums, 0), "summary_hash"), h1);
    CU_ASSERT_STRING_EQUAL(jstr(json_array_get(sums, 42), "summary_hash"), h1);
    CU_ASSERT(json_is_string(json_object_get(json_array_get(sums, 1), "summary")));
    CU_ASSERT(json_is_true(json_object_get(json_array_get(sums, 2), "missing")));
    json_decref(facts);
    /* A context that does not exist: not_found, whatever the ids. */
    json_t *out = NULL;
    json_t *arg = json_pack("{s:s, s:O}", "context_id", "c999", "artifact_ids", ids);
    CU_ASSERT_EQUAL(store_call_json(g.st, "input_facts", arg, &out), STATUS_ENOTFOUND);
    json_decref(arg);
    json_decref(out);
    json_decref(ids);

    /* The summary of d deleted behind the library's back: audit names it, after checking s1
     * and listing s1's seal (none: no key in this test). */
    char key[256];
    snprintf(key, sizeof key, "charter:{%s}:artifact:%s", g.graph, d);
    freeReplyObject(redisCommand(g.raw, "HDEL %s summary summary_hash", key));
    const char *aargs[2] = {"r1", "1"};
    json_t *audit = call_ok(&g, "audit_summaries", 2, aargs);
    CU_ASSERT_STRING_EQUAL(jstr(audit, "first_bad"), d);
    CU_ASSERT_PTR_NOT_NULL(strstr(jstr(audit, "problem"), "has no lineage summary"));
    json_t *seals = json_object_get(audit, "seals");
    CU_ASSERT_EQUAL_FATAL(json_array_size(seals), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_array_get(seals, 0), 0)), s1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_array_get(seals, 0), 1)), h1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_array_get(seals, 0), 2)), "");
    json_decref(audit);
    graph_close(&g);
}

/* --- the reference test: random delegation chains ------------------------------------------ */

#define GC_MAX 200

typedef struct {
    char id[24];
    bool root;
    char parents[2][24];
    int n_parents;
    char grantee[24];
    char issuer[24]; /* "" when none */
    const char *tools[4];
    int n_tools;
    const char *recipients[3];
    int n_recipients;
    const char *resources[6];
    int n_resources;
    double valid_from, valid_to, revoked_at;
    bool explicit_root;
} gc_grant;

typedef struct {
    gc_grant g[GC_MAX];
    int n;
} gc_model;

static const char *const gc_tool_pool[4] = {"t_read", "t_send", "t_pub", "t_x"};
static const char *const gc_recipient_pool[3] = {"cfo", "public", "ops"};
static const char *const gc_resource_pool[6] = {"r0", "r1", "r2", "r3", "r4", "r5"};

static int gc_subset(const char *const *pool, int n, const char **out)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (rnd(2))
            out[k++] = pool[i];
    return k;
}

static gc_grant *gc_add(gc_model *m, const char *id, const char *parent1, const char *parent2)
{
    gc_grant *g = &m->g[m->n++];
    memset(g, 0, sizeof *g);
    snprintf(g->id, sizeof g->id, "%s", id);
    if (parent1)
        snprintf(g->parents[g->n_parents++], 24, "%s", parent1);
    if (parent2)
        snprintf(g->parents[g->n_parents++], 24, "%s", parent2);
    g->root = g->n_parents == 0;
    snprintf(g->grantee, sizeof g->grantee, "agent%d", rnd(5));
    if (g->root)
        snprintf(g->issuer, sizeof g->issuer, "human%d", rnd(2));
    g->n_tools = gc_subset(gc_tool_pool, 4, g->tools);
    g->n_recipients = gc_subset(gc_recipient_pool, 3, g->recipients);
    g->n_resources = gc_subset(gc_resource_pool, 6, g->resources);
    g->valid_from = 1600000000.0 + rnd(100000000) + (rnd(2) ? 0.25 : 0.0);
    g->valid_to = g->valid_from + 1 + rnd(400000000);
    return g;
}

static json_t *gc_strs(const char *const *items, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_string(items[i]));
    return a;
}

static json_t *gc_seed_json(const gc_grant *g)
{
    json_t *o = json_pack("{s:s, s:s, s:o, s:o, s:o, s:f, s:f}", "id", g->id, "grantee", g->grantee,
                          "tools", gc_strs(g->tools, g->n_tools), "recipients",
                          gc_strs(g->recipients, g->n_recipients), "resources",
                          gc_strs(g->resources, g->n_resources), "valid_from", g->valid_from,
                          "valid_to", g->valid_to);
    if (g->issuer[0])
        json_object_set_new(o, "issuer", json_string(g->issuer));
    if (g->n_parents == 1)
        json_object_set_new(o, "delegated_from", json_string(g->parents[0]));
    else if (g->n_parents == 2)
        json_object_set_new(o, "delegated_from", json_pack("[s, s]", g->parents[0], g->parents[1]));
    if (g->explicit_root)
        json_object_set_new(o, "root", json_boolean(g->root));
    return o;
}

static int gc_find(const gc_model *m, const char *id)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->g[i].id, id) == 0)
            return i;
    return -1;
}

/* The plain walk upward from leaf: breadth-first, each name once, at most 64 grants emitted.
 * Writes grant indices into out; returns the count. */
static int gc_walk(const gc_model *m, const char *leaf, int *out)
{
    const char *queue[GC_MAX * 2 + 2];
    int head = 0, tail = 0, n = 0;
    queue[tail++] = leaf;
    while (head < tail && n < 64) {
        const char *id = queue[head++];
        int i = gc_find(m, id);
        if (i < 0)
            continue;
        out[n++] = i;
        for (int p = 0; p < m->g[i].n_parents; p++) {
            bool seen = false;
            for (int q = 0; q < tail; q++)
                seen = seen || strcmp(queue[q], m->g[i].parents[p]) == 0;
            if (!seen)
                queue[tail++] = m->g[i].parents[p];
        }
    }
    return n;
}

static bool strs_equal(const guard_strs *s, const char *const *items, int n)
{
    if (s->n != (size_t)n)
        return false;
    for (int i = 0; i < n; i++)
        if (strcmp(s->items[i], items[i]) != 0)
            return false;
    return true;
}

static int gc_compare(const gc_model *m, const char *leaf, const guard_chain *c)
{
    int expect[GC_MAX];
    int n = gc_walk(m, leaf, expect);
    int bad = 0;
    if (strcmp(c->leaf, leaf) != 0 || c->n != (size_t)n)
        mismatch(&bad, "chain size", leaf);
    if (n > 0 && c->n > 0 && strcmp(c->items[0].id, leaf) != 0)
        mismatch(&bad, "leaf first", leaf);
    for (size_t i = 0; i < c->n; i++) {
        const guard_grant *x = &c->items[i];
        int j = -1;
        for (int k = 0; k < n; k++)
            if (strcmp(m->g[expect[k]].id, x->id) == 0)
                j = expect[k];
        if (j < 0) {
            mismatch(&bad, "grant not in the walk", x->id);
            continue;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(c->items[k].id, x->id) == 0)
                mismatch(&bad, "grant listed twice", x->id);
        const gc_grant *w = &m->g[j];
        if (x->root != w->root)
            mismatch(&bad, "root", x->id);
        if (!strs_equal(&x->tools, w->tools, w->n_tools) ||
            !strs_equal(&x->recipients, w->recipients, w->n_recipients) ||
            !strs_equal(&x->resources, w->resources, w->n_resources))
            mismatch(&bad, "lists", x->id);
        if (x->valid_from != w->valid_from || x->valid_to != w->valid_to)
            mismatch(&bad, "validity", x->id);
        if (x->revoked_at != w->revoked_at)
            mismatch(&bad, "revoked_at", x->id);
        if (x->parents.n != (size_t)w->n_parents)
            mismatch(&bad, "parent count", x->id);
        for (int p = 0; p < w->n_parents; p++)
            if (!strs_has(&x->parents, w->parents[p]))
                mismatch(&bad, "parent", x->id);
        const char *gkind = strncmp(w->grantee, "agent", 5) == 0   ? "agent"
                            : strncmp(w->grantee, "human", 5) == 0 ? "human"
                                                                   : "";
        if (x->n_grantees != 1 || strcmp(x->grantees[0].id, w->grantee) != 0 ||
            strcmp(x->grantees[0].kind, gkind) != 0)
            mismatch(&bad, "grantee", x->id);
        if (w->issuer[0]) {
            if (x->n_issuers != 1 || strcmp(x->issuers[0].id, w->issuer) != 0 ||
                strcmp(x->issuers[0].kind, "human") != 0)
                mismatch(&bad, "issuer", x->id);
        } else if (x->n_issuers != 0) {
            mismatch(&bad, "unexpected issuer", x->id);
        }
    }
    return bad;
}

static void test_grant_chain_equals_plain_walk_on_random_delegations(void)
{
    tgraph g;
    if (!graph_open(&g, "chains"))
        return;
    rng_state = 0xD1B54A32D192ED03ULL;
    gc_model *m = calloc(1, sizeof *m);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    char id[24], parent[24];
    for (int c = 0; c < 6; c++) {
        int len = 1 + rnd(8);
        for (int k = 0; k < len; k++) {
            snprintf(id, sizeof id, "gc%d_%d", c, k);
            snprintf(parent, sizeof parent, "gc%d_%d", c, k - 1);
            gc_grant *x = gc_add(m, id, k ? parent : NULL, NULL);
            x->explicit_root = c % 2 == 0;
        }
    }
    /* a branch: two parents */
    char p0[24], p1[24];
    snprintf(p0, sizeof p0, "%s", m->g[gc_find(m, "gc0_0")].id);
    snprintf(p1, sizeof p1, "%s", m->g[gc_find(m, "gc1_0")].id);
    gc_add(m, "gbranch", p0, p1);
    gc_add(m, "gbranch_leaf", "gbranch", NULL);
    /* a cycle a <- b <- c <- a, and a leaf under it */
    gc_add(m, "gcyc_a", "gcyc_c", NULL);
    gc_add(m, "gcyc_b", "gcyc_a", NULL);
    gc_add(m, "gcyc_c", "gcyc_b", NULL);
    gc_add(m, "gcyc_leaf", "gcyc_b", NULL);
    /* a parent that does not exist, granted to an actor that does not exist */
    gc_grant *d = gc_add(m, "gdangle", "g_missing", NULL);
    snprintf(d->grantee, sizeof d->grantee, "ghost");
    /* a chain longer than the walk's cap */
    for (int k = 0; k < 70; k++) {
        snprintf(id, sizeof id, "glong%d", k);
        snprintf(parent, sizeof parent, "glong%d", k - 1);
        gc_add(m, id, k ? parent : NULL, NULL);
    }

    json_t *actors = json_array();
    for (int i = 0; i < 2; i++) {
        snprintf(id, sizeof id, "human%d", i);
        json_array_append_new(actors, json_pack("{s:s, s:s}", "id", id, "kind", "human"));
    }
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof id, "agent%d", i);
        json_array_append_new(actors, json_pack("{s:s, s:s}", "id", id, "kind", "agent"));
    }
    /* seeded in two calls: parents need not exist yet */
    json_t *first = json_array(), *second = json_array();
    for (int i = 0; i < m->n; i++)
        json_array_append_new(i % 2 ? first : second, gc_seed_json(&m->g[i]));
    json_t *r =
        call_json_ok(&g, "seed", json_pack("{s:o, s:o}", "actors", actors, "grants", first));
    CU_ASSERT_EQUAL(jint(r, "created"), 7 + m->n / 2);
    json_decref(r);
    r = call_json_ok(&g, "seed", json_pack("{s:o}", "grants", second));
    CU_ASSERT_EQUAL(jint(r, "created"), m->n - m->n / 2);
    json_decref(r);

    /* seeding again never overwrites: a changed grant keeps what it had */
    gc_grant changed = m->g[0];
    changed.n_tools = 1;
    changed.tools[0] = "t_changed";
    r = call_json_ok(&g, "seed", json_pack("{s:[o]}", "grants", gc_seed_json(&changed)));
    CU_ASSERT_EQUAL(jint(r, "created"), 0);
    json_decref(r);

    /* an RFC 3339 validity is stored as seconds: 2026-01-01T00:00:00Z is 1767225600 */
    r = call_json_ok(&g, "seed",
                     json_pack("{s:[{s:s, s:s, s:s, s:s, s:s}]}", "grants", "id", "giso", "grantee",
                               "human0", "issuer", "human0", "valid_from", "2026-01-01T00:00:00Z",
                               "valid_to", "2036-01-01T00:00:00.5Z"));
    CU_ASSERT_EQUAL(jint(r, "created"), 1);
    json_decref(r);
    guard_chain iso;
    CU_ASSERT_EQUAL(store_grant_chain(g.st, "giso", &iso), STATUS_OK);
    CU_ASSERT_EQUAL(iso.n, 1);
    if (iso.n == 1) {
        CU_ASSERT_EQUAL(iso.items[0].valid_from, 1767225600.0);
        CU_ASSERT_EQUAL(iso.items[0].valid_to, 2082758400.5);
        CU_ASSERT(iso.items[0].root);
        CU_ASSERT_EQUAL(iso.items[0].tools.n, 0);
    }
    facts_chain_free(&iso);

    /* revoke about one grant in five; the model keeps the database's time */
    for (int i = 0; i < m->n; i++) {
        if (rnd(5) != 0)
            continue;
        const char *args[1] = {m->g[i].id};
        json_t *rv = call_ok(&g, "revoke_grant", 1, args);
        const char *at = jstr(rv, "revoked_at");
        CU_ASSERT(time_string_ok(at));
        m->g[i].revoked_at = strtod(at, NULL);
        json_decref(rv);
    }

    int bad = 0;
    for (int i = 0; i < m->n; i++) {
        guard_chain c;
        int rc = store_grant_chain(g.st, m->g[i].id, &c);
        CU_ASSERT_EQUAL(rc, STATUS_OK);
        if (rc == STATUS_OK)
            bad += gc_compare(m, m->g[i].id, &c);
        facts_chain_free(&c);
    }
    CU_ASSERT_EQUAL(bad, 0);

    /* hand-written expectations on the special shapes */
    guard_chain c;
    CU_ASSERT_EQUAL(store_grant_chain(g.st, "gbranch_leaf", &c), STATUS_OK);
    CU_ASSERT_EQUAL(c.n, 4); /* gbranch_leaf, gbranch, gc0_0, gc1_0 */
    facts_chain_free(&c);
    CU_ASSERT_EQUAL(store_grant_chain(g.st, "gcyc_leaf", &c), STATUS_OK);
    CU_ASSERT_EQUAL(c.n, 4); /* the leaf and the three grants of the cycle, each once */
    facts_chain_free(&c);
    CU_ASSERT_EQUAL(store_grant_chain(g.st, "gdangle", &c), STATUS_OK);
    CU_ASSERT_EQUAL(c.n, 1);
    if (c.n == 1) {
        CU_ASSERT_STRING_EQUAL(c.items[0].parents.items[0], "g_missing");
        CU_ASSERT_STRING_EQUAL(c.items[0].grantees[0].kind, "");
    }
    facts_chain_free(&c);
    CU_ASSERT_EQUAL(store_grant_chain(g.st, "glong69", &c), STATUS_OK);
    CU_ASSERT_EQUAL(c.n, 64);
    if (c.n == 64) {
        CU_ASSERT_STRING_EQUAL(c.items[0].id, "glong69");
        CU_ASSERT_STRING_EQUAL(c.items[63].id, "glong6");
    }
    facts_chain_free(&c);
    CU_ASSERT_EQUAL(store_grant_chain(g.st, "g_missing", &c), STATUS_OK);
    CU_ASSERT_EQUAL(c.n, 0);
    CU_ASSERT_STRING_EQUAL(c.leaf, "g_missing");
    facts_chain_free(&c);
    free(m);
    graph_close(&g);
}

/* --- commit_delivery ------------------------------------------------------------------------ */

typedef struct {
    tgraph g;
    char ctx[16], source[16], payload[16], other[16];
    char payload_hash[65], payload_sha1[41];
} world;

#define PAYLOAD_CONTENT "Public comparison: vendor_b recommended."

static bool world_open(world *w, const char *name)
{
    memset(w, 0, sizeof *w);
    if (!graph_open(&w->g, name))
        return false;
    json_t *seed = json_pack("{s:[{s:s, s:s, s:i, s:i}, {s:s, s:s, s:i, s:i}],"
                             " s:[{s:s, s:i}, {s:s, s:i}],"
                             " s:[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}]}",
                             "resources", "id", "r_pub", "title", "Vendor page", "conf", 0,
                             "integrity", 0, "id", "r_conf", "title", "Budget", "conf", 2,
                             "integrity", 1, "recipients", "id", "cfo", "clearance", 2, "id",
                             "public", "clearance", 0, "actors", "id", "human_cfo", "kind", "human",
                             "id", "analyst", "kind", "agent", "id", "reporter", "kind", "agent");
    json_t *lists =
        json_pack("{s:[s, s], s:[s, s], s:[s, s]}", "tools", "deliver_internal", "deliver_public",
                  "recipients", "cfo", "public", "resources", "r_pub", "r_conf");
    json_t *grants = json_array();
    const char *ids[5] = {"g_root", "g_mid", "g_leaf", "g_expired", "g_future"};
    const char *parents[5] = {NULL, "g_root", "g_mid", NULL, NULL};
    const char *grantees[5] = {"human_cfo", "analyst", "reporter", "reporter", "reporter"};
    double from[5] = {0, 0, 0, 0, 4000000000.0};
    double to[5] = {4000000000.0, 4000000000.0, 4000000000.0, 1000.0, 4100000000.0};
    for (int i = 0; i < 5; i++) {
        json_t *gr = json_deep_copy(lists);
        json_object_set_new(gr, "id", json_string(ids[i]));
        json_object_set_new(gr, "grantee", json_string(grantees[i]));
        json_object_set_new(gr, "valid_from", json_real(from[i]));
        json_object_set_new(gr, "valid_to", json_real(to[i]));
        if (parents[i])
            json_object_set_new(gr, "delegated_from", json_string(parents[i]));
        else
            json_object_set_new(gr, "issuer", json_string("human_cfo"));
        json_array_append_new(grants, gr);
    }
    json_decref(lists);
    json_object_set_new(seed, "grants", grants);
    json_t *r = call_json_ok(&w->g, "seed", seed);
    CU_ASSERT_EQUAL(jint(r, "created"), 2 + 2 + 3 + 5);
    json_decref(r);
    create_run(&w->g, "run1");
    create_run(&w->g, "run2");
    open_context(&w->g, "run1", "report", "reporter", w->ctx);
    CU_ASSERT_EQUAL(create_artifact(&w->g, "run1", w->ctx, "source", "vendor page text", "r_pub",
                                    NULL, 0, w->source),
                    STATUS_OK);
    const char *in[1] = {w->source};
    CU_ASSERT_EQUAL(
        create_artifact(&w->g, "run1", w->ctx, "derived", PAYLOAD_CONTENT, NULL, in, 1, w->payload),
        STATUS_OK);
    char ctx2[16];
    open_context(&w->g, "run2", "report", "reporter", ctx2);
    CU_ASSERT_EQUAL(create_artifact(&w->g, "run2", ctx2, "source", "other run text", "r_pub", NULL,
                                    0, w->other),
                    STATUS_OK);
    sha256_hex(PAYLOAD_CONTENT, w->payload_hash);
    sha1_hex(PAYLOAD_CONTENT, w->payload_sha1);
    return true;
}

/* The argument of a commit that passes every check; callers change one field. */
static json_t *commit_arg(const world *w, const char *inv)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:[s, s, s], s:[s], s:s,"
                     " s:{s:s, s:s, s:s, s:s, s:s}}",
                     "run_id", "run1", "invocation_id", inv, "fingerprint", "fp-1", "payload_id",
                     w->payload, "payload_hash", w->payload_hash, "content_sha1", w->payload_sha1,
                     "recipient", "public", "tool", "deliver_public", "grant_chain", "g_leaf",
                     "g_mid", "g_root", "sources", "r_pub", "content", "rendered public text",
                     "event", "outcome", "allow", "codes", "", "witness", "", "detail",
                     "public delivery", "snapshot", "{\"now\":1795975261.099039,\"facts\":[]}");
}

/* Commits arg (stolen) and expects a refusal with reason, and the graph unchanged. */
static void expect_refused(world *w, json_t *arg, const char *reason)
{
    char *before = graph_dump(w->g.raw, w->g.graph);
    json_t *r = NULL;
    int rc = writer_call(&w->g, "commit_delivery", arg, &r);
    CU_ASSERT_EQUAL(rc, STATUS_OK);
    CU_ASSERT_STRING_EQUAL(jstr(r, "status"), "refused");
    CU_ASSERT_STRING_EQUAL(jstr(r, "reason"), reason);
    if (strcmp(jstr(r, "reason"), reason) != 0)
        fprintf(stderr, "expected refusal %s, got %s/%s\n", reason, jstr(r, "status"),
                jstr(r, "reason"));
    json_decref(r);
    char *after = graph_dump(w->g.raw, w->g.graph);
    CU_ASSERT_STRING_EQUAL(after, before);
    free(before);
    free(after);
}

static void set_chain(json_t *arg, const char *a, const char *b, const char *c)
{
    json_t *chain = json_array();
    json_array_append_new(chain, json_string(a));
    if (b)
        json_array_append_new(chain, json_string(b));
    if (c)
        json_array_append_new(chain, json_string(c));
    json_object_set_new(arg, "grant_chain", chain);
}

static long long run_seq(tgraph *g, const char *run)
{
    const char *args[3] = {run, "0", "1"};
    json_t *v = call_ok(g, "get_run", 3, args);
    long long seq = jint(json_object_get(v, "run"), "seq");
    json_decref(v);
    return seq;
}

/* Checks RULE-COMMIT-INVOCATION-UNUSED. */
static void test_commit_delivery_commits_once_and_writes_its_event(void)
{
    world w;
    if (!world_open(&w, "commit"))
        return;
    json_t *r = writer_ok(&w.g, "commit_delivery", commit_arg(&w, "inv-1"));
    CU_ASSERT_STRING_EQUAL(jstr(r, "status"), "committed");
    json_t *d = json_object_get(r, "delivery");
    CU_ASSERT_STRING_EQUAL(jstr(d, "invocation_id"), "inv-1");
    CU_ASSERT_STRING_EQUAL(jstr(d, "run_id"), "run1");
    CU_ASSERT_STRING_EQUAL(jstr(d, "fingerprint"), "fp-1");
    CU_ASSERT_STRING_EQUAL(jstr(d, "recipient"), "public");
    CU_ASSERT_STRING_EQUAL(jstr(d, "tool"), "deliver_public");
    CU_ASSERT_STRING_EQUAL(jstr(d, "payload_id"), w.payload);
    CU_ASSERT_STRING_EQUAL(jstr(d, "payload_hash"), w.payload_hash);
    CU_ASSERT_STRING_EQUAL(jstr(d, "content"), "rendered public text");
    json_t *chain = json_object_get(d, "grant_chain");
    CU_ASSERT_EQUAL(jlen(chain), 3);
    CU_ASSERT_STRING_EQUAL(jat(chain, 0), "g_leaf");
    CU_ASSERT_STRING_EQUAL(jat(chain, 2), "g_root");
    char committed_at[40];
    snprintf(committed_at, sizeof committed_at, "%s", jstr(d, "committed_at"));
    CU_ASSERT(time_string_ok(committed_at));
    long long seq = jint(r, "seq");
    /* run1 has run_created, step_opened and two artifact_created events: the commit is seq 5 */
    CU_ASSERT_EQUAL(seq, 5);
    CU_ASSERT_EQUAL(jint(d, "event_seq"), seq);
    json_decref(r);

    /* the DELIVERED and TO edges are the delivery's payload_id and recipient, read raw: no
     * edge set repeats them */
    char key[160];
    snprintf(key, sizeof key, "charter:{%s}:delivery:inv-1", w.g.graph);
    redisReply *rr = redisCommand(w.g.raw, "HMGET %s payload_id recipient", key);
    CU_ASSERT(rr && rr->elements == 2 && rr->element[0]->str && rr->element[1]->str &&
              strcmp(rr->element[0]->str, w.payload) == 0 &&
              strcmp(rr->element[1]->str, "public") == 0);
    freeReplyObject(rr);
    rr = redisCommand(w.g.raw, "EXISTS %s:delivered %s:to", key, key);
    CU_ASSERT(rr && rr->type == REDIS_REPLY_INTEGER && rr->integer == 0);
    freeReplyObject(rr);

    /* the run shows the delivery and its decision event stamped with the commit time */
    const char *args[3] = {"run1", "4", "10"};
    json_t *v = call_ok(&w.g, "get_run", 3, args);
    json_t *events = json_object_get(v, "events");
    CU_ASSERT_EQUAL(jlen(events), 1);
    json_t *e = json_array_get(events, 0);
    CU_ASSERT_EQUAL(jint(e, "seq"), 5);
    CU_ASSERT_STRING_EQUAL(jstr(e, "kind"), "delivery_decided");
    CU_ASSERT_STRING_EQUAL(jstr(e, "outcome"), "allow");
    CU_ASSERT_STRING_EQUAL(jstr(e, "codes"), "");
    CU_ASSERT_STRING_EQUAL(jstr(e, "detail"), "public delivery");
    CU_ASSERT_STRING_EQUAL(jstr(e, "snapshot"), "{\"now\":1795975261.099039,\"facts\":[]}");
    /* the event's ts is the time it was sealed at, read before the commit */
    CU_ASSERT(time_string_ok(jstr(e, "ts")));
    CU_ASSERT(strtod(jstr(e, "ts"), NULL) <= strtod(committed_at, NULL));
    json_t *ds = json_object_get(v, "deliveries");
    CU_ASSERT_EQUAL(jlen(ds), 1);
    CU_ASSERT_STRING_EQUAL(jstr(json_array_get(ds, 0), "invocation_id"), "inv-1");
    json_decref(v);

    const char *fargs[1] = {"inv-1"};
    v = call_ok(&w.g, "find_delivery", 1, fargs);
    CU_ASSERT_STRING_EQUAL(jstr(v, "committed_at"), committed_at);
    json_decref(v);
    const char *nargs[1] = {"inv-none"};
    json_t *none = (json_t *)1;
    CU_ASSERT_EQUAL(store_call(w.g.st, "find_delivery", 1, nargs, &none), STATUS_OK);
    CU_ASSERT_PTR_NULL(none);

    /* the same invocation again, even with other content: exists, nothing written */
    char *before = graph_dump(w.g.raw, w.g.graph);
    json_t *again = commit_arg(&w, "inv-1");
    json_object_set_new(again, "content", json_string("something else"));
    r = writer_ok(&w.g, "commit_delivery", again);
    CU_ASSERT_STRING_EQUAL(jstr(r, "status"), "exists");
    CU_ASSERT_STRING_EQUAL(jstr(json_object_get(r, "delivery"), "content"), "rendered public text");
    CU_ASSERT_STRING_EQUAL(jstr(json_object_get(r, "delivery"), "committed_at"), committed_at);
    json_decref(r);
    char *after = graph_dump(w.g.raw, w.g.graph);
    CU_ASSERT_STRING_EQUAL(after, before);
    free(before);
    free(after);

    /* an event stored behind the API at the place the next one takes: the log was altered, the
     * commit says so and writes nothing over it */
    snprintf(key, sizeof key, "charter:{%s}:event:run1:%lld", w.g.graph, seq + 1);
    rr = redisCommand(w.g.raw, "HSET %s kind planted", key);
    freeReplyObject(rr);
    before = graph_dump(w.g.raw, w.g.graph);
    CU_ASSERT_EQUAL(writer_rc(&w.g, "commit_delivery", commit_arg(&w, "inv-2")), STATUS_EEXISTS);
    CU_ASSERT_PTR_NOT_NULL(strstr(store_last_error(w.g.st), "the event log was altered"));
    after = graph_dump(w.g.raw, w.g.graph);
    CU_ASSERT_STRING_EQUAL(after, before);
    free(before);
    free(after);
    graph_close(&w.g);
}

/* Checks RULE-COMMIT-PAYLOAD-BYTES, RULE-COMMIT-RECIPIENT, RULE-COMMIT-GRANT-UNCHANGED,
 * RULE-COMMIT-GRANT-UNREVOKED, RULE-COMMIT-GRANT-UNEXPIRED, RULE-COMMIT-GRANT-TOOL,
 * RULE-COMMIT-RESOURCES. */
static void test_commit_delivery_refuses_and_writes_nothing(void)
{
    world w;
    if (!world_open(&w, "refuse"))
        return;
    char key[160];
    long long seq0 = run_seq(&w.g, "run1");

    /* a revoked grant on the chain */
    const char *mid[1] = {"g_mid"};
    json_decref(call_ok(&w.g, "revoke_grant", 1, mid));
    expect_refused(&w, commit_arg(&w, "inv-revoked"), "grant_revoked");
    json_decref(call_ok(&w.g, "restore_grants", 1, mid));

    /* an expired grant and one not valid yet */
    json_t *a = commit_arg(&w, "inv-expired");
    set_chain(a, "g_expired", NULL, NULL);
    expect_refused(&w, a, "grant_expired");
    a = commit_arg(&w, "inv-future");
    set_chain(a, "g_future", NULL, NULL);
    expect_refused(&w, a, "grant_not_yet_valid");

    /* grants that no longer list the recipient, the tool, a source */
    snprintf(key, sizeof key, "charter:{%s}:grant:g_leaf", w.g.graph);
    raw_exec(w.g.raw, "HSET %s recipients %s", key, "[\"cfo\"]", NULL);
    expect_refused(&w, commit_arg(&w, "inv-recipient"), "grant_recipient");
    raw_exec(w.g.raw, "HSET %s recipients %s", key, "[\"cfo\",\"public\"]", NULL);
    snprintf(key, sizeof key, "charter:{%s}:grant:g_mid", w.g.graph);
    raw_exec(w.g.raw, "HSET %s tools %s", key, "[\"deliver_internal\"]", NULL);
    expect_refused(&w, commit_arg(&w, "inv-tool"), "grant_tool");
    raw_exec(w.g.raw, "HSET %s tools %s", key, "[\"deliver_internal\",\"deliver_public\"]", NULL);
    snprintf(key, sizeof key, "charter:{%s}:grant:g_root", w.g.graph);
    raw_exec(w.g.raw, "HSET %s resources %s", key, "[\"r_conf\"]", NULL);
    expect_refused(&w, commit_arg(&w, "inv-source"), "grant_resource");
    raw_exec(w.g.raw, "HSET %s resources %s", key, "[\"r_pub\",\"r_conf\"]", NULL);

    /* chains that differ from the graph's */
    a = commit_arg(&w, "inv-skip");
    set_chain(a, "g_leaf", "g_root", NULL);
    expect_refused(&w, a, "chain_mismatch");
    a = commit_arg(&w, "inv-short");
    set_chain(a, "g_leaf", "g_mid", NULL);
    expect_refused(&w, a, "chain_not_rooted");
    a = commit_arg(&w, "inv-unknown-grant");
    set_chain(a, "g_nope", NULL, NULL);
    expect_refused(&w, a, "grant_not_found");
    snprintf(key, sizeof key, "charter:{%s}:grant:g_leaf:delegated_from", w.g.graph);
    raw_exec(w.g.raw, "SADD %s %s", key, "g_root", NULL); /* the leaf now branches */
    expect_refused(&w, commit_arg(&w, "inv-branch"), "chain_mismatch");
    raw_exec(w.g.raw, "SREM %s %s", key, "g_root", NULL);

    /* the payload's bytes changed since the evaluation; a wrong hash */
    snprintf(key, sizeof key, "charter:{%s}:artifact:%s", w.g.graph, w.payload);
    raw_exec(w.g.raw, "HSET %s content %s", key, "tampered", NULL);
    expect_refused(&w, commit_arg(&w, "inv-content"), "content_changed");
    raw_exec(w.g.raw, "HSET %s content %s", key, PAYLOAD_CONTENT, NULL);
    a = commit_arg(&w, "inv-hash");
    json_object_set_new(a, "payload_hash",
                        json_string("0000000000000000000000000000000000000000"
                                    "000000000000000000000000"));
    expect_refused(&w, a, "payload_hash_mismatch");

    /* unknown recipient, run, payload; a payload of another run */
    a = commit_arg(&w, "inv-recipient-unknown");
    json_object_set_new(a, "recipient", json_string("nobody"));
    expect_refused(&w, a, "recipient_not_found");
    a = commit_arg(&w, "inv-run");
    json_object_set_new(a, "run_id", json_string("run404"));
    expect_refused(&w, a, "run_not_found");
    a = commit_arg(&w, "inv-payload");
    json_object_set_new(a, "payload_id", json_string("a404"));
    expect_refused(&w, a, "payload_not_found");
    a = commit_arg(&w, "inv-other-run");
    json_object_set_new(a, "run_id", json_string("run2"));
    expect_refused(&w, a, "payload_other_run");

    /* malformed arguments: invalid, nothing written */
    char *before = graph_dump(w.g.raw, w.g.graph);
    a = commit_arg(&w, "inv-bad");
    json_object_del(a, "fingerprint");
    CU_ASSERT_EQUAL(writer_rc(&w.g, "commit_delivery", a), STATUS_EINVAL);
    a = commit_arg(&w, "inv-bad");
    json_object_set_new(a, "grant_chain", json_string("g_leaf"));
    CU_ASSERT_EQUAL(writer_rc(&w.g, "commit_delivery", a), STATUS_EINVAL);
    a = commit_arg(&w, "inv-bad:to");
    CU_ASSERT_EQUAL(writer_rc(&w.g, "commit_delivery", a), STATUS_EINVAL);
    a = commit_arg(&w, "inv-bad");
    json_object_set_new(a, "content_sha1", json_string("xyz"));
    CU_ASSERT_EQUAL(writer_rc(&w.g, "commit_delivery", a), STATUS_EINVAL);
    /* an array where an object is meant (cjson decodes [] and {} alike) */
    json_t *none = NULL;
    const char *array[1] = {"[]"};
    CU_ASSERT_EQUAL(store_call(w.g.st, "seed", 1, array, &none), STATUS_EINVAL);
    CU_ASSERT_PTR_NULL(none);
    char *after = graph_dump(w.g.raw, w.g.graph);
    CU_ASSERT_STRING_EQUAL(after, before);
    free(before);
    free(after);

    /* with everything restored the commit lands, and the refusals consumed no seq */
    json_t *r = writer_ok(&w.g, "commit_delivery", commit_arg(&w, "inv-final"));
    CU_ASSERT_STRING_EQUAL(jstr(r, "status"), "committed");
    CU_ASSERT_EQUAL(jint(r, "seq"), seq0 + 1);
    json_decref(r);
    graph_close(&w.g);
}

static int transition_rc(tgraph *g, const char *run, const char *from, const char *to,
                         json_t **out);

/* The argument of a commit in its cached form that passes every check: commit_arg with the
 * payload's summary hash and parents, and "cached" as the graph stands, decided at decided_at. */
static json_t *cached_commit_arg(const world *w, const char *inv, const char *decided_at)
{
    json_t *a = commit_arg(w, inv);
    json_object_del(a, "content");
    char key[160];
    snprintf(key, sizeof key, "charter:{%s}:artifact:%s", w->g.graph, w->payload);
    redisReply *r = redisCommand(w->g.raw, "HGET %s summary_hash", key);
    CU_ASSERT_FATAL(r != NULL && r->type == REDIS_REPLY_STRING);
    json_object_set_new(a, "summary_hash", json_string(r->str));
    freeReplyObject(r);
    json_object_set_new(a, "parents", json_pack("[s]", w->source));
    json_object_set_new(a, "cached",
                        json_pack("{s:s, s:[s], s:s, s:s, s:i, s:i, s:s, s:[], s:[s], s:s}",
                                  "context", w->ctx, "owners", "reporter", "decided_at", decided_at,
                                  "kind", "derived", "conf", 0, "integrity", 0, "title",
                                  PAYLOAD_CONTENT, "resources", "producers", w->ctx, "seal", ""));
    return a;
}

/* The database time plus delta seconds, as "<seconds>.<6 digits>" (32 bytes). */
static void time_plus(tgraph *g, long delta, char out[32])
{
    json_t *t = call_ok(g, "time", 0, NULL);
    const char *now = jstr(t, "now");
    snprintf(out, 32, "%ld%s", strtol(now, NULL, 10) + delta, strchr(now, '.'));
    json_decref(t);
}

/* One member of the cached form changed (key, a JSON value, stolen) is refused with reason. */
static void expect_cached_refused(world *w, const char *key, json_t *v, const char *reason)
{
    char now[32];
    time_plus(&w->g, 0, now);
    json_t *a = cached_commit_arg(w, "inv-cached", now);
    json_object_set_new(json_object_get(a, "cached"), key, v);
    expect_refused(w, a, reason);
}

/* The cached form: the commit compares the facts charterd decided from without reading them
 * (the context's owners, the payload's own node, edges, summary text and seal, the decision's
 * time on the database clock) with the graph, refuses any difference writing nothing, and
 * answers a commit as the flat list ["committed", seq, committed_at]. Checks
 * RULE-COMMIT-DATABASE-CLOCK, RULE-COMMIT-PAYLOAD-BYTES. */
static void test_commit_delivery_checks_what_it_was_decided_from(void)
{
    world w;
    if (!world_open(&w, "cached"))
        return;
    long long seq0 = run_seq(&w.g, "run1");
    expect_cached_refused(&w, "owners", json_pack("[s]", "analyst"), "context_changed");
    char when[32];
    time_plus(&w.g, 30, when);
    expect_cached_refused(&w, "decided_at", json_string(when), "decided_at");
    time_plus(&w.g, -30, when);
    expect_cached_refused(&w, "decided_at", json_string(when), "decided_at");
    expect_cached_refused(&w, "kind", json_string("source"), "payload_changed");
    expect_cached_refused(&w, "conf", json_integer(2), "payload_changed");
    expect_cached_refused(&w, "integrity", json_integer(1), "payload_changed");
    expect_cached_refused(&w, "title", json_string("another title"), "payload_changed");
    expect_cached_refused(&w, "seal", json_string("a seal"), "payload_changed");
    expect_cached_refused(&w, "producers", json_array(), "payload_changed");
    expect_cached_refused(&w, "resources", json_pack("[s]", "r_pub"), "payload_changed");
    /* the summary's text edited behind the API's back, its hash left */
    char key[160];
    snprintf(key, sizeof key, "charter:{%s}:artifact:%s", w.g.graph, w.payload);
    redisReply *kept = redisCommand(w.g.raw, "HGET %s summary", key);
    raw_exec(w.g.raw, "HSET %s summary %s", key, "{}", NULL);
    char now[32];
    time_plus(&w.g, 0, now);
    json_t *a = cached_commit_arg(&w, "inv-cached", now);
    expect_refused(&w, a, "payload_changed");
    raw_exec(w.g.raw, "HSET %s summary %s", key, kept->str, NULL);
    freeReplyObject(kept);
    /* cached needs summary_hash */
    a = cached_commit_arg(&w, "inv-bad", now);
    json_object_del(a, "summary_hash");
    CU_ASSERT_EQUAL(writer_rc(&w.g, "commit_delivery", a), STATUS_EINVAL);

    /* as the graph stands: committed, in one call, answered as a list */
    time_plus(&w.g, 0, now);
    json_t *r = NULL;
    store_list *l = NULL;
    CU_ASSERT_EQUAL(
        writer_call_list(&w.g, "commit_delivery", cached_commit_arg(&w, "inv-cached", now), &r, &l),
        STATUS_OK);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT_FATAL(l != NULL && store_list_size(l) == 3);
    CU_ASSERT_STRING_EQUAL(store_list_get(l, 0, NULL), "committed");
    CU_ASSERT_EQUAL(strtoll(store_list_get(l, 1, NULL), NULL, 10), seq0 + 1);
    CU_ASSERT(time_string_ok(store_list_get(l, 2, NULL)));
    store_list_free(l);
    const char *inv[1] = {"inv-cached"};
    json_t *d = call_ok(&w.g, "find_delivery", 1, inv);
    CU_ASSERT_STRING_EQUAL(jstr(d, "content"), PAYLOAD_CONTENT);
    CU_ASSERT_EQUAL(jint(d, "event_seq"), seq0 + 1);
    json_decref(d);

    /* a completed run takes no delivery, cached or not: a send decided before the run was
     * completed (CompleteRun racing a Deliver) is refused in the commit */
    json_decref(r);
    r = NULL;
    CU_ASSERT_EQUAL(transition_rc(&w.g, "run1", "created,running", "completed", &r), STATUS_OK);
    json_decref(r);
    time_plus(&w.g, 0, now);
    expect_refused(&w, cached_commit_arg(&w, "inv-done", now), "run_completed");
    expect_refused(&w, commit_arg(&w, "inv-done"), "run_completed");
    graph_close(&w.g);
}

/* --- runs, events, grants ----------------------------------------------------------------- */

/* charter_transition_run with its status_changed event sealed on the run's head; the detail
 * names the status the head reports, as charterd writes it. */
static int transition_rc(tgraph *g, const char *run, const char *from, const char *to, json_t **out)
{
    json_t *h = run_head(g, run);
    char detail[128];
    snprintf(detail, sizeof detail, "%s -> %s: test", jstr(h, "status"), to);
    json_decref(h);
    char *sealed =
        seal(g, run, json_pack("{s:s, s:s}", "kind", "status_changed", "detail", detail));
    const char *args[4] = {run, from, to, sealed};
    int rc = store_call(g->st, "transition_run", 4, args, out);
    free(sealed);
    return rc;
}

static json_t *transition(tgraph *g, const char *run, const char *from, const char *to)
{
    json_t *out = NULL;
    if (transition_rc(g, run, from, to, &out) != STATUS_OK) {
        fprintf(stderr, "charter_transition_run: %s\n", store_last_error(g->st));
        CU_FAIL("charter_transition_run failed");
    }
    return out;
}

static void test_transition_run_claims_once(void)
{
    tgraph g;
    if (!graph_open(&g, "transition"))
        return;
    create_run(&g, "r1");
    json_t *r = transition(&g, "r1", "created", "running");
    CU_ASSERT(json_is_true(json_object_get(r, "ok")));
    CU_ASSERT_STRING_EQUAL(jstr(r, "from"), "created");
    CU_ASSERT_EQUAL(jint(r, "seq"), 2);
    json_decref(r);
    r = transition(&g, "r1", "created", "running");
    CU_ASSERT(json_is_false(json_object_get(r, "ok")));
    CU_ASSERT_STRING_EQUAL(jstr(r, "status"), "running");
    json_decref(r);
    json_decref(transition(&g, "r1", "running", "blocked"));

    /* a recovery claims the blocked run once: the second claim sees "recovering" */
    char *before = NULL;
    r = transition(&g, "r1", "blocked,interrupted", "recovering");
    CU_ASSERT(json_is_true(json_object_get(r, "ok")));
    CU_ASSERT_STRING_EQUAL(jstr(r, "from"), "blocked");
    json_decref(r);
    before = graph_dump(g.raw, g.graph);
    r = transition(&g, "r1", "blocked,interrupted", "recovering");
    CU_ASSERT(json_is_false(json_object_get(r, "ok")));
    CU_ASSERT_STRING_EQUAL(jstr(r, "status"), "recovering");
    json_decref(r);
    char *after = graph_dump(g.raw, g.graph);
    CU_ASSERT_STRING_EQUAL(after, before);
    free(before);
    free(after);

    const char *args[3] = {"r1", "1", "1"};
    json_t *v = call_ok(&g, "get_run", 3, args);
    json_t *e = json_array_get(json_object_get(v, "events"), 0);
    CU_ASSERT_STRING_EQUAL(jstr(e, "kind"), "status_changed");
    CU_ASSERT_STRING_EQUAL(jstr(e, "detail"), "created -> running: test");
    CU_ASSERT_STRING_EQUAL(jstr(json_object_get(v, "run"), "status"), "recovering");
    json_decref(v);

    json_t *out = NULL;
    CU_ASSERT_EQUAL(transition_rc(&g, "r404", "created", "running", &out), STATUS_ENOTFOUND);
    CU_ASSERT_EQUAL(transition_rc(&g, "r1", "recovering", "flying", &out), STATUS_EINVAL);
    CU_ASSERT(strstr(store_last_error(g.st), "invalid") != NULL);
    CU_ASSERT_PTR_NULL(out);

    /* a detail that names another transition than the one the head allows is refused */
    before = graph_dump(g.raw, g.graph);
    char *sealed = seal(
        &g, "r1",
        json_pack("{s:s, s:s}", "kind", "status_changed", "detail", "blocked -> completed: test"));
    const char *lie[4] = {"r1", "recovering", "completed", sealed};
    CU_ASSERT_EQUAL(store_call(g.st, "transition_run", 4, lie, &out), STATUS_EINVAL);
    free(sealed);
    /* and so is an event of another kind */
    sealed =
        seal(&g, "r1",
             json_pack("{s:s, s:s}", "kind", "note", "detail", "recovering -> completed: test"));
    const char *kind[4] = {"r1", "recovering", "completed", sealed};
    CU_ASSERT_EQUAL(store_call(g.st, "transition_run", 4, kind, &out), STATUS_EINVAL);
    free(sealed);
    after = graph_dump(g.raw, g.graph);
    CU_ASSERT_STRING_EQUAL(after, before);
    free(before);
    free(after);

    json_t *dup = json_pack("{s:s}", "id", "r1");
    CU_ASSERT_EQUAL(writer_rc(&g, "create_run", dup), STATUS_EEXISTS);
    graph_close(&g);
}

static void test_append_event_numbers_seq_from_one(void)
{
    tgraph g;
    if (!graph_open(&g, "events"))
        return;
    json_t *r = writer_ok(&g, "create_run", json_pack("{s:s, s:s}", "id", "r1", "mode", "x"));
    CU_ASSERT_EQUAL(jint(r, "seq"), 1);
    CU_ASSERT_STRING_EQUAL(jstr(json_object_get(r, "run"), "status"), "created");
    CU_ASSERT(time_string_ok(jstr(json_object_get(r, "run"), "created_at")));
    json_decref(r);
    for (int i = 2; i <= 5; i++) {
        char snap[32];
        snprintf(snap, sizeof snap, "{\"n\":%d}", i);
        json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kind", "input_checked", "outcome",
                               "deny", "codes", "INPUT_OUT_OF_SCOPE,LABEL_MISMATCH", "witness",
                               "budget → report", "detail", "d", "snapshot", snap);
        json_t *a = NULL;
        CU_ASSERT_EQUAL(append_rc(&g, "r1", ev, &a), STATUS_OK);
        CU_ASSERT_EQUAL(jint(a, "seq"), i);
        CU_ASSERT(time_string_ok(jstr(a, "ts")));
        json_decref(a);
    }
    const char *args[3] = {"r1", "0", "0"};
    json_t *v = call_ok(&g, "get_run", 3, args);
    json_t *events = json_object_get(v, "events");
    CU_ASSERT_EQUAL(jlen(events), 5);
    for (size_t i = 0; i < json_array_size(events); i++)
        CU_ASSERT_EQUAL(jint(json_array_get(events, i), "seq"), (long long)i + 1);
    json_t *e = json_array_get(events, 4);
    CU_ASSERT_STRING_EQUAL(jstr(e, "codes"), "INPUT_OUT_OF_SCOPE,LABEL_MISMATCH");
    CU_ASSERT_STRING_EQUAL(jstr(e, "witness"), "budget → report");
    CU_ASSERT_STRING_EQUAL(jstr(e, "snapshot"), "{\"n\":5}");
    CU_ASSERT_EQUAL(jint(json_object_get(v, "run"), "seq"), 5);
    /* each event links to the one before it, and the run's head is the last one's hash */
    for (size_t i = 1; i < json_array_size(events); i++)
        CU_ASSERT_STRING_EQUAL(jstr(json_array_get(events, i), "prev"),
                               jstr(json_array_get(events, i - 1), "hash"));
    CU_ASSERT_STRING_EQUAL(jstr(json_array_get(events, 0), "prev"), "");
    CU_ASSERT_STRING_EQUAL(jstr(json_object_get(v, "run"), "head"), jstr(e, "hash"));
    json_decref(v);

    /* charter_get_event returns one event with its seal */
    const char *one[2] = {"r1", "3"};
    json_t *got = call_ok(&g, "get_event", 2, one);
    CU_ASSERT_EQUAL(jint(got, "seq"), 3);
    CU_ASSERT_STRING_EQUAL(jstr(got, "kind"), "input_checked");
    CU_ASSERT_EQUAL(strlen(jstr(got, "hash")), 64);
    CU_ASSERT_EQUAL(strlen(jstr(got, "prev")), 64);
    json_decref(got);
    const char *nine[2] = {"r1", "9"};
    json_t *out = NULL;
    CU_ASSERT_EQUAL(store_call(g.st, "get_event", 2, nine, &out), STATUS_ENOTFOUND);

    /* texts are stored byte for byte: a detail or snapshot given as a JSON value, or codes as
     * a list, is refused (charterd hashes exactly the text it sends) */
    CU_ASSERT_EQUAL(append_rc(&g, "r1",
                              json_pack("{s:s, s:{s:s}}", "kind", "x", "detail", "step", "report"),
                              &out),
                    STATUS_EINVAL);
    CU_ASSERT_EQUAL(append_rc(&g, "r1", json_pack("{s:s, s:[s]}", "kind", "x", "codes", "A"), &out),
                    STATUS_EINVAL);

    /* an event sealed on a head that moved is a conflict: nothing written, the head returned */
    char *stale = seal(&g, "r1", json_pack("{s:s}", "kind", "late"));
    json_decref(out);
    out = NULL;
    CU_ASSERT_EQUAL(append_rc(&g, "r1", json_pack("{s:s}", "kind", "first"), &out), STATUS_OK);
    json_decref(out);
    out = NULL;
    char *before = graph_dump(g.raw, g.graph);
    const char *late[2] = {"r1", stale};
    CU_ASSERT_EQUAL(store_call(g.st, "append_event", 2, late, &out), STATUS_OK);
    CU_ASSERT(json_is_true(json_object_get(out, "conflict")));
    json_t *head = json_object_get(out, "head");
    CU_ASSERT_EQUAL(jint(head, "seq"), 6);
    CU_ASSERT_EQUAL(strlen(jstr(head, "hash")), 64);
    CU_ASSERT(time_string_ok(jstr(head, "now")));
    json_decref(out);
    out = NULL;
    free(stale);
    /* the right seq on the wrong prev is a conflict too */
    json_t *ev =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s}", "kind", "forged",
                  "outcome", "", "codes", "", "witness", "", "detail", "", "snapshot", "",
                  "evaluator", "", "seq", (json_int_t)7, "ts", "1795975261.099039", "prev",
                  "0000000000000000000000000000000000000000000000000000000000000000", "hash",
                  "1111111111111111111111111111111111111111111111111111111111111111");
    char *forged = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    const char *fargs[2] = {"r1", forged};
    CU_ASSERT_EQUAL(store_call(g.st, "append_event", 2, fargs, &out), STATUS_OK);
    CU_ASSERT(json_is_true(json_object_get(out, "conflict")));
    json_decref(out);
    out = NULL;
    free(forged);
    char *after = graph_dump(g.raw, g.graph);
    CU_ASSERT_STRING_EQUAL(after, before);
    free(before);
    free(after);

    CU_ASSERT_EQUAL(append_rc(&g, "r404", json_pack("{s:s}", "kind", "x"), &out), STATUS_ENOTFOUND);
    const char *nokind[2] = {"r1", "{\"detail\":\"x\"}"};
    CU_ASSERT_EQUAL(store_call(g.st, "append_event", 2, nokind, &out), STATUS_EINVAL);
    const char *notjson[2] = {"r1", "{kind"};
    CU_ASSERT_EQUAL(store_call(g.st, "append_event", 2, notjson, &out), STATUS_EINVAL);
    const char *unsealed[2] = {"r1", "{\"kind\":\"x\"}"};
    CU_ASSERT_EQUAL(store_call(g.st, "append_event", 2, unsealed, &out), STATUS_EINVAL);
    CU_ASSERT_EQUAL(run_seq(&g, "r1"), 6);
    graph_close(&g);
}

static double db_time(tgraph *g)
{
    json_t *t = call_ok(g, "time", 0, NULL);
    double v = strtod(jstr(t, "now"), NULL);
    CU_ASSERT(time_string_ok(jstr(t, "now")));
    json_decref(t);
    return v;
}

static void test_revoke_stamps_database_time_and_restore_clears(void)
{
    tgraph g;
    if (!graph_open(&g, "revoke"))
        return;
    json_t *seed =
        json_pack("{s:[{s:s, s:s}], s:[{s:s, s:s, s:s, s:i, s:i},"
                  " {s:s, s:s, s:s, s:i, s:i}]}",
                  "actors", "id", "h", "kind", "human", "grants", "id", "g1", "grantee", "h",
                  "issuer", "h", "valid_from", 0, "valid_to", 2000000000, "id", "g2", "grantee",
                  "h", "delegated_from", "g1", "valid_from", 0, "valid_to", 2000000000);
    json_decref(call_json_ok(&g, "seed", seed));
    double t0 = db_time(&g);
    const char *g1[1] = {"g1"};
    json_t *r = call_ok(&g, "revoke_grant", 1, g1);
    double t1 = db_time(&g);
    char at[40];
    snprintf(at, sizeof at, "%s", jstr(r, "revoked_at"));
    CU_ASSERT(time_string_ok(at));
    double atv = strtod(at, NULL);
    CU_ASSERT(t0 <= atv && atv <= t1);
    CU_ASSERT_STRING_EQUAL(jstr(r, "id"), "g1");
    json_decref(r);
    r = call_ok(&g, "revoke_grant", 1, g1); /* kept when revoked already */
    CU_ASSERT_STRING_EQUAL(jstr(r, "revoked_at"), at);
    json_decref(r);
    guard_chain c;
    CU_ASSERT_EQUAL(store_grant_chain(g.st, "g2", &c), STATUS_OK);
    CU_ASSERT_EQUAL(c.n, 2);
    if (c.n == 2) {
        CU_ASSERT_EQUAL(c.items[0].revoked_at, 0.0);
        CU_ASSERT_EQUAL(c.items[1].revoked_at, atv);
        CU_ASSERT(c.items[1].root);
        CU_ASSERT(!c.items[0].root);
    }
    facts_chain_free(&c);

    r = call_ok(&g, "restore_grants", 1, g1);
    json_t *restored = json_object_get(r, "restored");
    CU_ASSERT_EQUAL(jlen(restored), 1);
    CU_ASSERT_STRING_EQUAL(jat(restored, 0), "g1");
    json_decref(r);
    CU_ASSERT_EQUAL(store_grant_chain(g.st, "g1", &c), STATUS_OK);
    CU_ASSERT(c.n == 1 && c.items[0].revoked_at == 0.0);
    facts_chain_free(&c);
    r = call_ok(&g, "restore_grants", 1, g1); /* nothing left to restore: an empty list */
    CU_ASSERT_EQUAL(jlen(json_object_get(r, "restored")), 0);
    json_decref(r);

    const char *g2[1] = {"g2"};
    json_decref(call_ok(&g, "revoke_grant", 1, g1));
    json_decref(call_ok(&g, "revoke_grant", 1, g2));
    const char *all[1] = {""};
    r = call_ok(&g, "restore_grants", 1, all);
    restored = json_object_get(r, "restored");
    CU_ASSERT_EQUAL(jlen(restored), 2);
    CU_ASSERT_STRING_EQUAL(jat(restored, 0), "g1");
    CU_ASSERT_STRING_EQUAL(jat(restored, 1), "g2");
    json_decref(r);
    const char *nope[1] = {"g404"};
    json_t *out = NULL;
    CU_ASSERT_EQUAL(store_call(g.st, "revoke_grant", 1, nope, &out), STATUS_ENOTFOUND);
    CU_ASSERT_EQUAL(store_call(g.st, "restore_grants", 1, nope, &out), STATUS_ENOTFOUND);
    graph_close(&g);
}

/* charter_seed_clash of seed (its text) in mode missing: the reply's clash, node, id and
 * differs ("missing" when the reply says the node is missing) joined by '|', or "" for {}. */
static void seed_clash_of(tgraph *g, const char *seed, const char *missing, char *out, size_t n)
{
    json_t *r = NULL;
    CU_ASSERT_EQUAL(q_seed_clash(g->st, seed, missing, &r), STATUS_OK);
    const char *clash = json_string_value(json_object_get(r, "clash"));
    snprintf(out, n, "%s", "");
    if (clash != NULL)
        snprintf(out, n, "%s|%s|%s|%s", clash, jstr(r, "node"), jstr(r, "id"),
                 json_is_true(json_object_get(r, "missing")) ? "missing" : jstr(r, "differs"));
    json_decref(r);
}

static void test_seed_clash_names_a_node_that_differs_and_if_asked_one_that_is_missing(void)
{
    tgraph g;
    if (!graph_open(&g, "seed_clash"))
        return;
    const char *seed = "{\"actors\":[{\"id\":\"h\",\"kind\":\"human\"}],\"grants\":["
                       "{\"id\":\"g1\",\"grantee\":\"h\",\"issuer\":\"h\",\"tools\":[\"send\"],"
                       "\"valid_from\":0,\"valid_to\":2000000000},"
                       "{\"id\":\"g2\",\"grantee\":\"h\",\"delegated_from\":\"g1\","
                       "\"tools\":[\"send\"],\"valid_from\":0,\"valid_to\":2000000000}]}";
    char why[400], key[160];
    /* Nothing stored yet: no node differs; asked, the first one missing is named. */
    seed_clash_of(&g, seed, "0", why, sizeof why);
    CU_ASSERT_STRING_EQUAL(why, "");
    seed_clash_of(&g, seed, NULL, why, sizeof why);
    CU_ASSERT_STRING_EQUAL(why, "");
    seed_clash_of(&g, seed, "1", why, sizeof why);
    CU_ASSERT_STRING_EQUAL(why, "actors[0].id: actor \"h\" is not in the graph|actor|h|missing");

    const char *args[1] = {seed};
    json_decref(call_ok(&g, "seed", 1, args));
    seed_clash_of(&g, seed, "1", why, sizeof why);
    CU_ASSERT_STRING_EQUAL(why, "");
    /* A revocation is state, not structure. */
    const char *g1[1] = {"g1"};
    json_decref(call_ok(&g, "revoke_grant", 1, g1));
    seed_clash_of(&g, seed, "1", why, sizeof why);
    CU_ASSERT_STRING_EQUAL(why, "");

    /* A delegation edge removed behind the API, then put back. */
    snprintf(key, sizeof key, "charter:{%s}:grant:g2:delegated_from", g.graph);
    raw_exec(g.raw, "SREM %s %s", key, "g1", NULL);
    seed_clash_of(&g, seed, "0", why, sizeof why);
    CU_ASSERT_STRING_EQUAL(why, "grants[1].id: grant \"g2\" is already in the graph and differs "
                                "in delegated_from; ids are shared by every workflow of a graph, "
                                "so use another id or an identical grant|grant|g2|delegated_from");
    raw_exec(g.raw, "SADD %s %s", key, "g1", NULL);
    seed_clash_of(&g, seed, "1", why, sizeof why);
    CU_ASSERT_STRING_EQUAL(why, "");

    /* A grant deleted: a clash only when a missing node is asked about (charter_put_workflow
     * would seed it again). */
    snprintf(key, sizeof key, "charter:{%s}:grant:g2", g.graph);
    raw_exec(g.raw, "RENAME %s %s:kept", key, key, NULL);
    seed_clash_of(&g, seed, "0", why, sizeof why);
    CU_ASSERT_STRING_EQUAL(why, "");
    seed_clash_of(&g, seed, "1", why, sizeof why);
    CU_ASSERT_STRING_EQUAL(why, "grants[1].id: grant \"g2\" is not in the graph|grant|g2|missing");
    raw_exec(g.raw, "RENAME %s:kept %s", key, key, NULL);
    seed_clash_of(&g, seed, "1", why, sizeof why);
    CU_ASSERT_STRING_EQUAL(why, "");

    json_t *out = NULL;
    CU_ASSERT_EQUAL(q_seed_clash(g.st, seed, "maybe", &out), STATUS_EINVAL);
    CU_ASSERT_EQUAL(q_seed_clash(g.st, "[", "1", &out), STATUS_EINVAL);
    graph_close(&g);
}

static const char *run_status(tgraph *g, const char *run, char *buf)
{
    const char *args[3] = {run, "0", "1"};
    json_t *v = call_ok(g, "get_run", 3, args);
    snprintf(buf, 32, "%s", jstr(json_object_get(v, "run"), "status"));
    json_decref(v);
    return buf;
}

static void test_interrupt_runs_marks_running_and_recovering(void)
{
    tgraph g;
    if (!graph_open(&g, "interrupt"))
        return;
    const char *runs[5] = {"r_created", "r_running", "r_recovering", "r_blocked", "r_done"};
    for (int i = 0; i < 5; i++)
        create_run(&g, runs[i]);
    for (int i = 1; i < 5; i++)
        json_decref(transition(&g, runs[i], "created", "running"));
    json_decref(transition(&g, "r_recovering", "running", "blocked"));
    json_decref(transition(&g, "r_recovering", "blocked", "recovering"));
    json_decref(transition(&g, "r_blocked", "running", "blocked"));
    json_decref(transition(&g, "r_done", "running", "completed"));

    json_t *r = call_ok(&g, "unfinished_runs", 0, NULL);
    CU_ASSERT_EQUAL(jlen(json_object_get(r, "runs")), 2);
    json_decref(r);
    json_t *list = NULL;
    CU_ASSERT_EQUAL(evlog_interrupt_runs(g.st, &list), STATUS_OK);
    CU_ASSERT_EQUAL(jlen(list), 2);
    bool running = false, recovering = false;
    for (size_t i = 0; i < json_array_size(list); i++) {
        const char *id = json_string_value(json_array_get(list, i));
        running = running || (id && strcmp(id, "r_running") == 0);
        recovering = recovering || (id && strcmp(id, "r_recovering") == 0);
    }
    CU_ASSERT(running && recovering);
    json_decref(list);

    char buf[32];
    CU_ASSERT_STRING_EQUAL(run_status(&g, "r_created", buf), "created");
    CU_ASSERT_STRING_EQUAL(run_status(&g, "r_running", buf), "interrupted");
    CU_ASSERT_STRING_EQUAL(run_status(&g, "r_recovering", buf), "interrupted");
    CU_ASSERT_STRING_EQUAL(run_status(&g, "r_blocked", buf), "blocked");
    CU_ASSERT_STRING_EQUAL(run_status(&g, "r_done", buf), "completed");
    const char *args[3] = {"r_running", "2", "10"};
    json_t *v = call_ok(&g, "get_run", 3, args);
    json_t *e = json_array_get(json_object_get(v, "events"), 0);
    CU_ASSERT_EQUAL(jint(e, "seq"), 3);
    CU_ASSERT_STRING_EQUAL(jstr(e, "kind"), "status_changed");
    CU_ASSERT_STRING_EQUAL(jstr(e, "detail"), "running -> interrupted: charterd restarted");
    json_decref(v);

    list = NULL;
    CU_ASSERT_EQUAL(evlog_interrupt_runs(g.st, &list), STATUS_OK);
    CU_ASSERT_EQUAL(jlen(list), 0);
    json_decref(list);

    const char *lim[1] = {"3"};
    r = call_ok(&g, "list_runs", 1, lim); /* newest first */
    json_t *lr = json_object_get(r, "runs");
    CU_ASSERT_EQUAL(jlen(lr), 3);
    CU_ASSERT_STRING_EQUAL(jstr(json_array_get(lr, 0), "id"), "r_done");
    CU_ASSERT_STRING_EQUAL(jstr(json_array_get(lr, 2), "id"), "r_recovering");
    json_decref(r);
    graph_close(&g);
}

static void expect_seqs(tgraph *g, const char *after, const char *limit, int first, int count)
{
    const char *args[3] = {"r1", after, limit};
    json_t *v = call_ok(g, "get_run", 3, args);
    json_t *events = json_object_get(v, "events");
    CU_ASSERT_EQUAL(jlen(events), count);
    for (int i = 0; i < count && i < (int)json_array_size(events); i++)
        CU_ASSERT_EQUAL(jint(json_array_get(events, (size_t)i), "seq"), first + i);
    json_decref(v);
}

static void test_get_run_pages_events_after_seq(void)
{
    tgraph g;
    if (!graph_open(&g, "getrun"))
        return;
    json_decref(call_json_ok(&g, "seed",
                             json_pack("{s:[{s:s, s:s}]}", "actors", "id", "ag", "kind", "agent")));
    create_run(&g, "r1");
    char ctx[16], art[16];
    open_context(&g, "r1", "research", "ag", ctx);
    CU_ASSERT_EQUAL(create_artifact(&g, "r1", ctx, "source", "the content", NULL, NULL, 0, art),
                    STATUS_OK);
    for (int i = 0; i < 7; i++) {
        json_t *out = NULL;
        CU_ASSERT_EQUAL(append_rc(&g, "r1", json_pack("{s:s}", "kind", "note"), &out), STATUS_OK);
        json_decref(out);
    }
    expect_seqs(&g, "0", "4", 1, 4);
    expect_seqs(&g, "4", "4", 5, 4);
    expect_seqs(&g, "8", "4", 9, 2);
    expect_seqs(&g, "10", "4", 0, 0);
    expect_seqs(&g, "3", "0", 4, 7); /* limit 0: the default */

    const char *args[3] = {"r1", "10", "5"};
    json_t *v = call_ok(&g, "get_run", 3, args);
    json_t *arts = json_object_get(v, "artifacts");
    CU_ASSERT_EQUAL(jlen(arts), 1);
    CU_ASSERT_STRING_EQUAL(jstr(json_array_get(arts, 0), "id"), art);
    CU_ASSERT_STRING_EQUAL(jstr(json_array_get(arts, 0), "content"), "the content");
    CU_ASSERT_STRING_EQUAL(jstr(json_array_get(arts, 0), "step"), "research");
    CU_ASSERT_EQUAL(jlen(json_object_get(v, "deliveries")), 0);
    CU_ASSERT_EQUAL(jint(json_object_get(v, "run"), "seq"), 10);
    json_decref(v);

    const char *missing[3] = {"r404", "0", "5"};
    json_t *out = NULL;
    CU_ASSERT_EQUAL(store_call(g.st, "get_run", 3, missing, &out), STATUS_ENOTFOUND);
    const char *negative[3] = {"r1", "-1", "5"};
    CU_ASSERT_EQUAL(store_call(g.st, "get_run", 3, negative, &out), STATUS_EINVAL);

    guard_context c;
    CU_ASSERT_EQUAL(store_context(g.st, ctx, &c), STATUS_OK);
    CU_ASSERT_STRING_EQUAL(c.run_id, "r1");
    CU_ASSERT_STRING_EQUAL(c.step, "research");
    CU_ASSERT(c.owners.n == 1 && strcmp(c.owners.items[0], "ag") == 0);
    facts_context_free(&c);
    CU_ASSERT_EQUAL(store_context(g.st, "c404", &c), STATUS_ENOTFOUND);
    CU_ASSERT_PTR_NULL(c.id);
    graph_close(&g);
}

/* A derived artifact of r1 in ctx whose parents are inputs (n), created with verified (a
 * [{id, summary_hash}], stolen) as the caller's verified summaries; returns the call's status. */
static int create_verified(tgraph *g, const char *ctx, const char *const *inputs, size_t n,
                           json_t *verified)
{
    char hash[65];
    sha256_hex("child", hash);
    json_t *in = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(in, json_string(inputs[i]));
    json_t *arg = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:o, s:b, s:o}", "run_id",
                            "r1", "context_id", ctx, "kind", "derived", "title", "child", "conf", 0,
                            "integrity", 0, "hash", hash, "content", "child", "input_ids", in,
                            "capture_complete", 1, "verified", verified);
    json_t *out = NULL;
    int rc = writer_call(g, "create_artifact", arg, &out);
    json_decref(out);
    return rc;
}

/* RecordOutput's gate verifies the parents' summaries (their SHA-1 and seals), then
 * charter_create_artifact reads them again to summarise the child: a parent's summary swapped
 * in between must not be folded into a summary charterd then seals. The call is given the
 * verified {id, summary_hash} list and refuses, writing nothing, when a stored one differs. */
static void test_create_artifact_refuses_a_parent_summary_other_than_the_verified_one(void)
{
    tgraph g;
    if (!graph_open(&g, "verified"))
        return;
    json_decref(
        call_json_ok(&g, "seed",
                     json_pack("{s:[{s:s, s:i, s:i}], s:[{s:s, s:s}]}", "resources", "id", "doc",
                               "conf", 0, "integrity", 0, "actors", "id", "ag", "kind", "agent")));
    create_run(&g, "r1");
    char ctx[16], a1[16], a2[16], h1[41], h2[41];
    open_context(&g, "r1", "s", "ag", ctx);
    CU_ASSERT_EQUAL(create_artifact(&g, "r1", ctx, "source", "one", "doc", NULL, 0, a1), STATUS_OK);
    CU_ASSERT_EQUAL(create_artifact(&g, "r1", ctx, "source", "two", "doc", NULL, 0, a2), STATUS_OK);
    json_decref(stored_summary(&g, a1, h1));
    json_decref(stored_summary(&g, a2, h2));
    CU_ASSERT_EQUAL_FATAL(strlen(h1), 40);
    const char *both[2] = {a1, a2};
    char *before = graph_dump(g.raw, g.graph);

    /* a1's summary as verified was another one: refused, naming a1 */
    const char *other = "0123456789abcdef0123456789abcdef01234567";
    CU_ASSERT_EQUAL(create_verified(&g, ctx, both, 2,
                                    json_pack("[{s:s, s:s}, {s:s, s:s}]", "id", a1, "summary_hash",
                                              other, "id", a2, "summary_hash", h2)),
                    STATUS_EREFUSED);
    CU_ASSERT_PTR_NOT_NULL(strstr(store_last_error(g.st), "the lineage summary of a1 is no longer "
                                                          "the one verified"));
    /* a parent the list leaves out, or an artifact that is not a parent */
    CU_ASSERT_EQUAL(
        create_verified(&g, ctx, both, 2, json_pack("[{s:s, s:s}]", "id", a1, "summary_hash", h1)),
        STATUS_EINVAL);
    CU_ASSERT_EQUAL(create_verified(&g, ctx, both, 1,
                                    json_pack("[{s:s, s:s}, {s:s, s:s}]", "id", a1, "summary_hash",
                                              h1, "id", a2, "summary_hash", h2)),
                    STATUS_EINVAL);
    char *refused = graph_dump(g.raw, g.graph);
    CU_ASSERT_STRING_EQUAL(refused, before); /* nothing written */
    free(refused);
    /* a2's summary swapped after it was verified, for one that hashes right (a1's pair) */
    char key[256];
    snprintf(key, sizeof key, "charter:{%s}:artifact:%s", g.graph, a1);
    redisReply *r = redisCommand(g.raw, "HMGET %s summary summary_hash", key);
    CU_ASSERT_FATAL(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    snprintf(key, sizeof key, "charter:{%s}:artifact:%s", g.graph, a2);
    raw_exec(g.raw, "HSET %s summary %s", key, r->element[0]->str, NULL);
    raw_exec(g.raw, "HSET %s summary_hash %s", key, r->element[1]->str, NULL);
    freeReplyObject(r);
    char *swapped = graph_dump(g.raw, g.graph);
    CU_ASSERT_EQUAL(create_verified(&g, ctx, both, 2,
                                    json_pack("[{s:s, s:s}, {s:s, s:s}]", "id", a1, "summary_hash",
                                              h1, "id", a2, "summary_hash", h2)),
                    STATUS_EREFUSED);
    CU_ASSERT_PTR_NOT_NULL(strstr(store_last_error(g.st), "the lineage summary of a2 is no longer "
                                                          "the one verified"));
    char *after = graph_dump(g.raw, g.graph);
    CU_ASSERT_STRING_EQUAL(after, swapped); /* nothing written: no artifact, edge or event */
    raw_exec(g.raw, "HSET %s summary_hash %s", key, h2, NULL);
    free(before);
    free(swapped);
    free(after);
    graph_close(&g);
}

static void test_create_artifact_refuses_missing_input_or_context(void)
{
    tgraph g;
    if (!graph_open(&g, "artifact"))
        return;
    json_decref(
        call_json_ok(&g, "seed",
                     json_pack("{s:[{s:s, s:i, s:i}], s:[{s:s, s:s}]}", "resources", "id", "doc",
                               "conf", 0, "integrity", 1, "actors", "id", "ag", "kind", "agent")));
    create_run(&g, "r1");
    create_run(&g, "r2");
    char ctx[16], a1[16], id[16];
    open_context(&g, "r1", "s", "ag", ctx);
    CU_ASSERT_EQUAL(create_artifact(&g, "r1", ctx, "source", "x", "doc", NULL, 0, a1), STATUS_OK);
    CU_ASSERT_STRING_EQUAL(a1, "a1");

    char *before = graph_dump(g.raw, g.graph);
    const char *missing_input[2] = {a1, "a404"};
    CU_ASSERT_EQUAL(create_artifact(&g, "r1", ctx, "derived", "y", NULL, missing_input, 2, id),
                    STATUS_ENOTFOUND);
    CU_ASSERT(strstr(store_last_error(g.st), "a404") != NULL);
    CU_ASSERT_EQUAL(create_artifact(&g, "r1", "c404", "derived", "y", NULL, missing_input, 1, id),
                    STATUS_ENOTFOUND);
    CU_ASSERT_EQUAL(create_artifact(&g, "r404", ctx, "derived", "y", NULL, missing_input, 1, id),
                    STATUS_ENOTFOUND);
    CU_ASSERT_EQUAL(create_artifact(&g, "r1", ctx, "source", "y", "nodoc", NULL, 0, id),
                    STATUS_ENOTFOUND);
    CU_ASSERT_EQUAL(create_artifact(&g, "r2", ctx, "derived", "y", NULL, missing_input, 1, id),
                    STATUS_EINVAL); /* the context is of r1 */
    CU_ASSERT_EQUAL(create_artifact(&g, "r1", ctx, "derived", "y", "doc", missing_input, 1, id),
                    STATUS_EINVAL); /* only a source has a resource */
    CU_ASSERT_EQUAL(create_artifact(&g, "r1", ctx, "weird", "y", NULL, NULL, 0, id), STATUS_EINVAL);
    CU_ASSERT_EQUAL(create_artifact(&g, "r1", ctx, "source", "bad \xff utf-8", NULL, NULL, 0, id),
                    STATUS_EINVAL);
    json_t *nohash = json_pack("{s:s, s:s, s:s, s:i, s:i}", "run_id", "r1", "context_id", ctx,
                               "kind", "source", "conf", 0, "integrity", 0);
    CU_ASSERT_EQUAL(writer_rc(&g, "create_artifact", nohash), STATUS_EINVAL);
    char *after = graph_dump(g.raw, g.graph);
    CU_ASSERT_STRING_EQUAL(after, before);
    free(before);
    free(after);

    /* the refusals consumed no id */
    const char *in[2] = {a1, a1};
    CU_ASSERT_EQUAL(create_artifact(&g, "r1", ctx, "derived", "y", NULL, in, 2, id), STATUS_OK);
    CU_ASSERT_STRING_EQUAL(id, "a2");
    const char *args[1] = {"a2"};
    json_t *a = call_ok(&g, "get_artifact", 1, args);
    CU_ASSERT_EQUAL(jlen(json_object_get(a, "input_ids")), 2);
    CU_ASSERT_EQUAL(jlen(json_object_get(a, "parents")), 1);
    CU_ASSERT_STRING_EQUAL(jstr(a, "context_id"), ctx);
    json_decref(a);
    json_t *stats = call_ok(&g, "graph_stats", 0, NULL);
    CU_ASSERT_EQUAL(jint(stats, "artifacts"), 2);
    CU_ASSERT_EQUAL(jint(stats, "runs"), 2);
    CU_ASSERT_EQUAL(jint(stats, "deliveries"), 0);
    json_decref(stats);
    graph_close(&g);
}

/* --- the store itself ------------------------------------------------------------------------ */

/* Kills every connection named charter.<graph> from the raw connection; returns the count. */
static int kill_store_connections(tgraph *g)
{
    redisReply *r = redisCommand(g->raw, "CLIENT LIST");
    if (!r || r->type != REDIS_REPLY_STRING) {
        if (r)
            freeReplyObject(r);
        return -1;
    }
    char name[128];
    snprintf(name, sizeof name, " name=charter.%s ", g->graph);
    int killed = 0;
    char *save = NULL;
    for (char *line = strtok_r(r->str, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strstr(line, name) || strncmp(line, "id=", 3) != 0)
            continue;
        char id[32];
        snprintf(id, sizeof id, "%lld", strtoll(line + 3, NULL, 10));
        redisReply *k = redisCommand(g->raw, "CLIENT KILL ID %s", id);
        if (k && k->type == REDIS_REPLY_INTEGER)
            killed += (int)k->integer;
        if (k)
            freeReplyObject(k);
    }
    freeReplyObject(r);
    return killed;
}

static void test_store_reconnects_after_its_connection_is_killed(void)
{
    tgraph g;
    if (!graph_open(&g, "reconnect"))
        return;
    CU_ASSERT_EQUAL(store_ping(g.st), STATUS_OK);
    CU_ASSERT_EQUAL(kill_store_connections(&g), 1);
    json_t *out = NULL;
    int rc = q_time(g.st, &out);
    CU_ASSERT(rc == STATUS_EUNAVAILABLE || rc == STATUS_OK);
    if (rc == STATUS_EUNAVAILABLE) {
        CU_ASSERT_PTR_NULL(out);
        CU_ASSERT(store_last_error(g.st)[0] != '\0');
    }
    json_decref(out);
    out = NULL;
    CU_ASSERT_EQUAL(q_time(g.st, &out), STATUS_OK);
    CU_ASSERT(time_string_ok(jstr(out, "now")));
    json_decref(out);
    /* again, on a call with arguments */
    CU_ASSERT_EQUAL(kill_store_connections(&g), 1);
    guard_chain c;
    rc = store_grant_chain(g.st, "g404", &c);
    CU_ASSERT(rc == STATUS_EUNAVAILABLE || rc == STATUS_OK);
    facts_chain_free(&c);
    CU_ASSERT_EQUAL(store_grant_chain(g.st, "g404", &c), STATUS_OK);
    CU_ASSERT_EQUAL(c.n, 0);
    facts_chain_free(&c);
    graph_close(&g);
}

static void test_store_timeout_drops_the_connection_and_the_late_reply(void)
{
    tgraph g;
    if (!private_redis_begin())
        return;
    if (!graph_open(&g, "timeout")) {
        private_redis_end();
        return;
    }
    /* Hold every command for 2 s: CLIENT PAUSE is in effect once its reply is read, so the call
     * below cannot be answered within its 100 ms, whatever the machine's load. */
    redisReply *pause = redisCommand(g.raw, "CLIENT PAUSE 2000 ALL");
    CU_ASSERT_PTR_NOT_NULL_FATAL(pause);
    CU_ASSERT_EQUAL(pause->type, REDIS_REPLY_STATUS);
    freeReplyObject(pause);
    store_set_timeout(g.st, 100);
    json_t *out = NULL;
    int rc = q_time(g.st, &out);
    CU_ASSERT_EQUAL(rc, STATUS_EUNAVAILABLE);
    CU_ASSERT_PTR_NULL(out);
    CU_ASSERT(strstr(store_last_error(g.st), "timed out") != NULL);
    /* the next call reads its own reply, not the late one */
    store_set_timeout(g.st, 5000);
    CU_ASSERT_EQUAL(q_grant_chain(g.st, "g404", &out), STATUS_OK);
    CU_ASSERT_STRING_EQUAL(jstr(out, "leaf"), "g404");
    json_decref(out);
    graph_close(&g);
    private_redis_end();
}

static void test_store_open_rejects_bad_urls_and_graphs(void)
{
    store *st = (store *)1;
    /* redis:// is accepted (test_operation); TLS and credentials in the URL are not. */
    CU_ASSERT_EQUAL(store_open("rediss://localhost:1", "g", 100, &st), STATUS_EINVAL);
    CU_ASSERT_PTR_NULL(st);
    CU_ASSERT_EQUAL(store_open("redis://user:pw@localhost:1", "g", 100, &st), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_open("tcp://localhost", "g", 100, &st), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_open("tcp://localhost:0", "g", 100, &st), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_open("tcp://localhost:99999", "g", 100, &st), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_open("tcp://:6380", "g", 100, &st), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_open("unix://relative.sock", "g", 100, &st), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_open(redis_url, "", 100, &st), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_open(redis_url, "a{b}", 100, &st), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_open(redis_url, "with space", 100, &st), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_open("unix:///nonexistent/charter-test.sock", "g", 100, &st),
                    STATUS_EUNAVAILABLE);
    CU_ASSERT_PTR_NULL(st);

    /* a library of another version is refused */
    tgraph g;
    if (!private_redis_begin())
        return;
    if (!graph_open(&g, "version")) {
        private_redis_end();
        return;
    }
    const char *other = "#!lua name=charter\n"
                        "redis.register_function('charter_version', function() return "
                        "cjson.encode({version='0'}) end)\n";
    CU_ASSERT_EQUAL(store_load_library(g.st, other, strlen(other)), STATUS_EPROTO);
    CU_ASSERT(strstr(store_last_error(g.st), "version") != NULL);
    CU_ASSERT_EQUAL(store_ping(g.st), STATUS_EPROTO);
    const char *broken = "#!lua name=charter\nthis is not lua\n";
    CU_ASSERT_EQUAL(store_load_library(g.st, broken, strlen(broken)), STATUS_EPROTO);
    CU_ASSERT_EQUAL(store_load_library(g.st, library_src, library_len), STATUS_OK);
    CU_ASSERT_EQUAL(store_ping(g.st), STATUS_OK);
    json_t *out = NULL;
    CU_ASSERT_EQUAL(store_call(g.st, "no_such_function", 0, NULL, &out), STATUS_EPROTO);
    CU_ASSERT_EQUAL(store_call(g.st, "Bad-Name", 0, NULL, &out), STATUS_EINVAL);
    graph_close(&g);
    private_redis_end();
}

/* The library text with the one occurrence of from replaced by to (caller frees), or NULL when
 * from does not occur exactly once. */
static char *library_with(const char *from, const char *to)
{
    const char *at = strstr(library_src, from);
    if (at == NULL || strstr(at + 1, from) != NULL)
        return NULL;
    size_t head = (size_t)(at - library_src), n = strlen(from), m = strlen(to);
    char *text = malloc(library_len - n + m + 1);
    if (text == NULL)
        return NULL;
    memcpy(text, library_src, head);
    memcpy(text + head, to, m);
    memcpy(text + head + m, at + n, library_len - head - n + 1);
    return text;
}

/* Loads the library with from replaced by to (its version unchanged, so the load passes) and
 * expects store_check_functions to refuse it with the error want. */
static void expect_functions_refused(tgraph *g, const char *from, const char *to, const char *want)
{
    char *text = library_with(from, to);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(store_load_library(g->st, text, strlen(text)), STATUS_OK);
    CU_ASSERT_EQUAL(store_check_functions(g->st), STATUS_EPROTO);
    CU_ASSERT_STRING_EQUAL(store_last_error(g->st), want);
    if (strcmp(store_last_error(g->st), want) != 0)
        fprintf(stderr, "\n  got:  %s\n  want: %s\n", store_last_error(g->st), want);
    free(text);
}

/* charterd's startup check (main.c): the functions FUNCTION LIST reports against the stubs'
 * table, names and no-writes flags, generated from registry.lua. */
static void test_library_check_refuses_functions_that_differ_from_the_stubs(void)
{
    tgraph g;
    if (!private_redis_begin())
        return;
    if (!graph_open(&g, "functions")) {
        private_redis_end();
        return;
    }
    CU_ASSERT_EQUAL(store_check_functions(g.st), STATUS_OK); /* the library built with them */
    expect_functions_refused(
        &g, "{'charter_time', graph.charter_time, true},",
        "{'charter_time', graph.charter_time, false},",
        "the query library loaded registers charter_time without the no-writes flag, charterd's "
        "stubs with it; rebuild charterd so its typed stubs match queries/, or find why the "
        "library text it loaded differs from queries/");
    expect_functions_refused(
        &g, "{'charter_seed', graph.charter_seed, false},",
        "{'charter_seed', graph.charter_seed, true},",
        "the query library loaded registers charter_seed with the no-writes flag, charterd's "
        "stubs without it; rebuild charterd so its typed stubs match queries/, or find why the "
        "library text it loaded differs from queries/");
    expect_functions_refused(
        &g, "    {'charter_graph_stats', graph.charter_graph_stats, true},\n", "",
        "the query library loaded has no charter_graph_stats, which charterd's stubs call; "
        "rebuild charterd so its typed stubs match queries/, or find why the library text it "
        "loaded differs from queries/");
    expect_functions_refused(
        &g, "    {'charter_time', graph.charter_time, true},\n",
        "    {'charter_time', graph.charter_time, true},\n"
        "    {'charter_time_again', graph.charter_time, true},\n",
        "the query library loaded registers charter_time_again, which charterd's stubs do not "
        "know; rebuild charterd so its typed stubs match queries/, or find why the library text "
        "it loaded differs from queries/");
    /* The real library passes again. */
    CU_ASSERT_EQUAL(store_load_library(g.st, library_src, library_len), STATUS_OK);
    CU_ASSERT_EQUAL(store_check_functions(g.st), STATUS_OK);
    graph_close(&g);
    private_redis_end();
}

static void test_decoders_accept_empty_objects_and_string_times(void)
{
    json_error_t err;
    json_t *j = json_loads(
        "{\"root\":\"a2\",\"truncated\":false,\"artifacts\":["
        "{\"id\":\"a2\",\"kind\":\"derived\",\"conf\":\"1\",\"input_ids\":{},\"parents\":[\"a1\"],"
        "\"resources\":{},\"producers\":{}},"
        "{\"id\":\"a1\",\"kind\":\"weird\",\"capture_complete\":true,"
        "\"resources\":[{\"id\":\"r\",\"conf\":2},\"r2\"]}]}",
        0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    guard_ancestry anc;
    CU_ASSERT_EQUAL(facts_ancestry_from_json(j, NULL, &anc), STATUS_OK);
    CU_ASSERT_STRING_EQUAL(anc.root, "a2");
    CU_ASSERT_EQUAL(anc.n, 2);
    if (anc.n == 2) {
        CU_ASSERT(!anc.items[0].is_source && anc.items[0].kind_known);
        CU_ASSERT_EQUAL(anc.items[0].conf, 1);
        CU_ASSERT_EQUAL(anc.items[0].integrity, -1);
        CU_ASSERT_EQUAL(anc.items[0].input_ids.n, 0);
        CU_ASSERT_EQUAL(anc.items[0].n_resources, 0);
        CU_ASSERT_STRING_EQUAL(anc.items[0].run_id, "");
        CU_ASSERT_STRING_EQUAL(anc.items[0].hash, "");
        CU_ASSERT(!anc.items[1].kind_known && !anc.items[1].is_source);
        CU_ASSERT(anc.items[1].capture_complete);
        CU_ASSERT_EQUAL(anc.items[1].n_resources, 2);
        if (anc.items[1].n_resources == 2) {
            CU_ASSERT_EQUAL(anc.items[1].resources[0].conf, 2);
            CU_ASSERT_EQUAL(anc.items[1].resources[0].integrity, -1);
            CU_ASSERT_STRING_EQUAL(anc.items[1].resources[1].id, "r2");
            CU_ASSERT_EQUAL(anc.items[1].resources[1].conf, -1);
        }
    }
    facts_ancestry_free(&anc);
    CU_ASSERT_EQUAL(anc.n, 0);
    json_decref(j);

    j = json_loads("{\"root\":\"a1\",\"artifacts\":[{\"id\":\"a1\",\"parents\":\"a0\"}]}", 0, &err);
    CU_ASSERT_EQUAL(facts_ancestry_from_json(j, "a1", &anc), STATUS_EPROTO);
    CU_ASSERT_PTR_NULL(anc.items);
    CU_ASSERT_PTR_NULL(anc.root);
    json_decref(j);

    j = json_loads("{\"leaf\":\"g\",\"grants\":[{\"id\":\"g\",\"root\":true,\"tools\":{},"
                   "\"valid_from\":\"100.5\",\"valid_to\":200,\"revoked_at\":\"150.000001\","
                   "\"grantees\":[{\"id\":\"h\",\"kind\":\"human\"}],\"issuers\":[\"h\"]},"
                   "{\"id\":\"g0\"}]}",
                   0, &err);
    guard_chain c;
    CU_ASSERT_EQUAL(facts_chain_from_json(j, NULL, &c), STATUS_OK);
    CU_ASSERT_EQUAL(c.n, 2);
    if (c.n == 2) {
        CU_ASSERT(c.items[0].root);
        CU_ASSERT_EQUAL(c.items[0].valid_from, 100.5);
        CU_ASSERT_EQUAL(c.items[0].valid_to, 200.0);
        CU_ASSERT_EQUAL(c.items[0].revoked_at, 150.000001);
        CU_ASSERT_EQUAL(c.items[0].tools.n, 0);
        CU_ASSERT_STRING_EQUAL(c.items[0].grantees[0].kind, "human");
        CU_ASSERT_STRING_EQUAL(c.items[0].issuers[0].kind, "");
        /* a grant without validity is never valid */
        CU_ASSERT(c.items[1].valid_from > 1e300);
        CU_ASSERT_EQUAL(c.items[1].valid_to, 0.0);
        CU_ASSERT_EQUAL(c.items[1].revoked_at, 0.0);
    }
    facts_chain_free(&c);
    json_decref(j);
    j = json_loads("{\"leaf\":\"g\",\"grants\":[{\"id\":\"g\",\"valid_to\":\"soon\"}]}", 0, &err);
    CU_ASSERT_EQUAL(facts_chain_from_json(j, NULL, &c), STATUS_EPROTO);
    CU_ASSERT_EQUAL(c.n, 0);
    json_decref(j);
    j = json_loads("{\"leaf\":\"g\",\"grants\":{}}", 0, &err);
    CU_ASSERT_EQUAL(facts_chain_from_json(j, NULL, &c), STATUS_OK);
    CU_ASSERT_EQUAL(c.n, 0);
    facts_chain_free(&c);
    json_decref(j);
}

/* --- main ------------------------------------------------------------------------------------ */

/* The library as charterd loads it: the concatenation of the queries/ sources the build embeds. A
 * copy, so the tests that edit it own their text. */
static bool load_library(void)
{
    library_src = malloc(embedded_queries_len + 1);
    if (library_src == NULL)
        return false;
    memcpy(library_src, embedded_queries, embedded_queries_len + 1);
    library_len = embedded_queries_len;
    return library_len > 0;
}

/* --- registration ---------------------------------------------------------------------------- */

static int setup(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN); /* a write to a killed connection must fail, not kill the test */
    redis_url = getenv("CHARTER_TEST_REDIS");
    if (!redis_url || !*redis_url) {
        fprintf(stderr, "test_queries: FAIL: CHARTER_TEST_REDIS is not set. Run the tests "
                        "through deploy/test.sh, or set it to a Redis 7 URL such as "
                        "unix:///tmp/charter-test/redis.sock\n");
        return 1;
    }
    if (!load_library())
        return 1;
    return 0;
}

static void teardown(void)
{
    free(library_src);
}

static const harness_test tests[] = {
    {"ancestry equals a plain walk on a random graph",
     test_ancestry_equals_plain_walk_on_random_graph},
    {"ancestry of a 1500-deep chain", test_ancestry_of_a_1500_deep_chain},
    {"create_artifact summarises its lineage from its parents",
     test_create_artifact_summarises_its_lineage_from_its_parents},
    {"input_facts and audit of missing summaries", test_input_facts_and_audit_of_missing_summaries},
    {"grant chain equals a plain walk on random delegations",
     test_grant_chain_equals_plain_walk_on_random_delegations},
    {"commit_delivery commits once and writes its event",
     test_commit_delivery_commits_once_and_writes_its_event},
    {"commit_delivery refuses and writes nothing", test_commit_delivery_refuses_and_writes_nothing},
    {"commit_delivery checks what it was decided from",
     test_commit_delivery_checks_what_it_was_decided_from},
    {"transition_run claims once", test_transition_run_claims_once},
    {"append_event numbers seq from one", test_append_event_numbers_seq_from_one},
    {"revoke stamps database time and restore clears",
     test_revoke_stamps_database_time_and_restore_clears},
    {"seed clash names a node that differs and, if asked, one that is missing",
     test_seed_clash_names_a_node_that_differs_and_if_asked_one_that_is_missing},
    {"interrupt_runs marks running and recovering",
     test_interrupt_runs_marks_running_and_recovering},
    {"get_run pages events after seq", test_get_run_pages_events_after_seq},
    {"create_artifact refuses a missing input or context",
     test_create_artifact_refuses_missing_input_or_context},
    {"create_artifact refuses a parent summary other than the verified one",
     test_create_artifact_refuses_a_parent_summary_other_than_the_verified_one},
    {"store reconnects after its connection is killed",
     test_store_reconnects_after_its_connection_is_killed},
    {"store timeout drops the connection and the late reply",
     test_store_timeout_drops_the_connection_and_the_late_reply},
    {"store_open rejects bad urls and graphs", test_store_open_rejects_bad_urls_and_graphs},
    {"library check refuses functions that differ from the stubs",
     test_library_check_refuses_functions_that_differ_from_the_stubs},
    {"decoders accept empty objects and string times",
     test_decoders_accept_empty_objects_and_string_times},
};
static const harness_suite suites[] = {
    {"queries", NULL, NULL, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .setup = setup,
                                       .teardown = teardown};
