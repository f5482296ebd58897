/*
 * test_cluster.c - charterd on a real Redis Cluster: 3 masters and 3 replicas on loopback ports,
 * started by deploy/cluster.sh, with one charterd per graph (--redis cluster://...).
 *
 * Graphs are chosen so they land on different masters; deliveries on each commit on the
 * master of its graph's slot. Then a master is killed (SIGKILL) while deliveries run and its
 * replica takes over: every call answers ALLOW, UNAVAILABLE, DEADLINE_EXCEEDED or UNKNOWN,
 * no invocation is committed twice, and with --durable-ack 1 every answer that said ALLOW and
 * durable finds its delivery after the failover. On one Redis without replicas,
 * --durable-ack 1 answers ALLOW, not durable. Threads only record; the main thread asserts.
 * A tenant is created with its graph claimed in the graph's slot and registered in the
 * registry's, on different masters, and a graph that holds data is not taken as a tenant.
 */
#include <CUnit/Basic.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"
#include "db/store.h"

#define N_GRAPHS 3
#define ADMIN_TOKEN "test-admin-token-5b0e8c2f71d94a63"
#define LOADERS 2
#define MAX_SAMPLES 20000

static char cluster_dir[128];
static char cluster_url[STORE_URL_MAX];
static int base_port;
static char shared_redis[512]; /* CHARTER_TEST_REDIS as given, restored at the end */

typedef struct {
    char graph[64];
    int slot;
    int master_port;
    harness_charterd d;
    bool started;
    char ctx[129];
    char payload[129];
    char run_id[129];
} cluster_graph;

static cluster_graph graphs[N_GRAPHS];

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The port of the master serving slot, asked of the node at port ask (0 when none is). */
static int master_of_slot(int ask, int slot)
{
    redisContext *c = redisConnect("127.0.0.1", ask);
    if (!c || c->err) {
        redisFree(c);
        return 0;
    }
    int port = 0;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->elements >= 3 && slot >= e->element[0]->integer && slot <= e->element[1]->integer)
            port = (int)e->element[2]->element[1]->integer;
    }
    freeReplyObject(r);
    redisFree(c);
    return port;
}

static int keyslot(const char *graph)
{
    redisContext *c = redisConnect("127.0.0.1", base_port);
    if (!c || c->err) {
        redisFree(c);
        return -1;
    }
    redisReply *r = redisCommand(c, "CLUSTER KEYSLOT charter:{%s}", graph);
    int slot = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    freeReplyObject(r);
    redisFree(c);
    return slot;
}

/* Keys in slot on the node at port (CLUSTER COUNTKEYSINSLOT), -1 on failure. */
static long long keys_in_slot(int port, int slot)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        redisFree(c);
        return -1;
    }
    redisReply *r = redisCommand(c, "CLUSTER COUNTKEYSINSLOT %d", slot);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* CreateRun external, OpenStep analyze, ReadSource vendor_a, RecordOutput from it: a payload
 * the analyze step may deliver to the cfo. Returns 0 or -1. */
static int prepare_run(charter_client *c, cluster_graph *g)
{
    charter_status st;
    Charter__V1__CreateRunRequest cr = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    cr.mode = "external";
    cr.task = "cluster test run";
    Charter__V1__RunView *view = NULL;
    if (charter_create_run(c, &cr, &view, &st) != 0) {
        fprintf(stderr, "CreateRun: %s\n", st.message);
        return -1;
    }
    snprintf(g->run_id, sizeof g->run_id, "%s", view->run->id);
    charter__v1__run_view__free_unpacked(view, NULL);
    Charter__V1__OpenStepRequest os = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    os.run_id = g->run_id;
    os.step = "analyze";
    Charter__V1__StepContext *ctx = NULL;
    if (charter_open_step(c, &os, &ctx, &st) != 0) {
        fprintf(stderr, "OpenStep: %s\n", st.message);
        return -1;
    }
    snprintf(g->ctx, sizeof g->ctx, "%s", ctx->context_id);
    charter__v1__step_context__free_unpacked(ctx, NULL);
    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    rs.context_id = g->ctx;
    rs.resource_id = "vendor_a";
    Charter__V1__ReadSourceResponse *src = NULL;
    if (charter_read_source(c, &rs, &src, &st) != 0 || !src->artifact) {
        fprintf(stderr, "ReadSource: %s\n", st.message);
        return -1;
    }
    char source_id[129];
    snprintf(source_id, sizeof source_id, "%s", src->artifact->id);
    charter__v1__read_source_response__free_unpacked(src, NULL);
    Charter__V1__RecordOutputRequest ro = CHARTER__V1__RECORD_OUTPUT_REQUEST__INIT;
    char *inputs[1] = {source_id};
    ro.context_id = g->ctx;
    ro.input_ids = inputs;
    ro.n_input_ids = 1;
    ro.title = "Northwind summary";
    ro.content = "Northwind Desks: NW-200, 389 USD per unit, 6 weeks, 5-year warranty.";
    Charter__V1__RecordOutputResponse *out = NULL;
    if (charter_record_output(c, &ro, &out, &st) != 0 || !out->artifact) {
        fprintf(stderr, "RecordOutput: %s\n", st.message);
        return -1;
    }
    snprintf(g->payload, sizeof g->payload, "%s", out->artifact->id);
    charter__v1__record_output_response__free_unpacked(out, NULL);
    return 0;
}

typedef struct {
    int rv;       /* 0 or the negated RPC code */
    int outcome;  /* decision outcome when rv == 0 */
    bool durable; /* DeliverResponse.durable */
    bool acknowledged;
    char witness[200];
} deliver_answer;

static int deliver(charter_client *c, const cluster_graph *g, const char *inv, deliver_answer *a)
{
    Charter__V1__DeliverRequest req = CHARTER__V1__DELIVER_REQUEST__INIT;
    req.context_id = (char *)g->ctx;
    req.payload_id = (char *)g->payload;
    req.recipient = "cfo";
    req.tool = "deliver_internal";
    req.invocation_id = (char *)inv;
    Charter__V1__DeliverResponse *r = NULL;
    charter_status st;
    memset(a, 0, sizeof *a);
    a->rv = charter_deliver(c, &req, &r, &st);
    if (a->rv == 0) {
        a->outcome = r->decision ? (int)r->decision->outcome : 0;
        a->durable = r->durable;
        a->acknowledged = r->acknowledged;
        snprintf(a->witness, sizeof a->witness, "%s",
                 r->decision && r->decision->witness ? r->decision->witness : "");
        charter__v1__deliver_response__free_unpacked(r, NULL);
    } else {
        snprintf(a->witness, sizeof a->witness, "%.190s", st.message);
    }
    return a->rv;
}

/* One page of the run's view after after_seq (GetRun, retried while the cluster settles), or
 * NULL. */
static Charter__V1__RunView *run_page(charter_client *c, const char *run_id, uint64_t after_seq)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    req.run_id = (char *)run_id;
    req.after_seq = after_seq;
    req.without_content = true;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    int rv = -1;
    for (int i = 0; i < 50 && (rv = charter_get_run(c, &req, &v, &st)) != 0; i++)
        sleep_ms(200);
    if (rv != 0)
        fprintf(stderr, "GetRun %s: %s: %s\n", run_id, charter_status_name(rv), st.message);
    return rv == 0 ? v : NULL;
}

/* The invocation ids of the run's committed deliveries, following GetRun's pages (a page holds
 * the deliveries its events decided). Returns the count, or -1. */
static long run_deliveries(charter_client *c, const char *run_id, char ***ids)
{
    long n = 0;
    *ids = calloc(1, sizeof **ids);
    uint64_t after = 0;
    for (;;) {
        Charter__V1__RunView *v = run_page(c, run_id, after);
        if (v == NULL || *ids == NULL) {
            charter__v1__run_view__free_unpacked(v, NULL);
            return -1;
        }
        char **grown = realloc(*ids, (size_t)(n + (long)v->n_deliveries + 1) * sizeof **ids);
        if (grown != NULL) {
            *ids = grown;
            for (size_t i = 0; i < v->n_deliveries; i++)
                (*ids)[n++] = strdup(v->deliveries[i]->invocation_id);
            (*ids)[n] = NULL;
        }
        size_t events = v->n_events;
        if (events > 0)
            after = v->events[events - 1]->seq;
        charter__v1__run_view__free_unpacked(v, NULL);
        if (grown == NULL)
            return -1;
        if (events == 0)
            return n;
    }
}

/* --- the cluster ------------------------------------------------------------------------- */

static int cluster_clean(void);

/* Starts the cluster and one charterd per graph. Returns 0 or -1. */
static int cluster_start(void)
{
    const char *shared = getenv("CHARTER_TEST_REDIS");
    snprintf(shared_redis, sizeof shared_redis, "%s", shared ? shared : "");
    setenv("CHARTER_ADMIN_TOKEN", ADMIN_TOKEN, 1);
    snprintf(cluster_dir, sizeof cluster_dir, "/tmp/charter-cluster-%d", (int)getpid());
    /* Ports and cluster bus ports (+10000) below the kernel's ephemeral range (32768), where
     * outgoing connections could hold them; another base is tried when one is taken. */
    bool up = false;
    for (int attempt = 0; attempt < 3 && !up; attempt++) {
        base_port = 12000 + (int)((getpid() + attempt * 337) % 1000) * 8;
        char cmd[512];
        snprintf(cmd, sizeof cmd, "%s/deploy/cluster.sh start %s %d", CHARTER_SOURCE_DIR,
                 cluster_dir, base_port);
        FILE *p = popen(cmd, "r");
        if (!p)
            return -1;
        bool got = fgets(cluster_url, sizeof cluster_url, p) != NULL;
        up = pclose(p) == 0 && got;
        if (!up) {
            snprintf(cmd, sizeof cmd, "%s/deploy/cluster.sh stop %s; rm -rf %s", CHARTER_SOURCE_DIR,
                     cluster_dir, cluster_dir);
            if (system(cmd) != 0)
                fprintf(stderr, "stopping the cluster failed\n");
        }
    }
    if (!up)
        return -1;
    cluster_url[strcspn(cluster_url, "\n")] = '\0';
    /* charterd processes started from here use the cluster. */
    setenv("CHARTER_TEST_REDIS", cluster_url, 1);

    /* Graph names chosen so the graphs land on three different masters. */
    int n = 0;
    for (int k = 0; k < 200 && n < N_GRAPHS; k++) {
        char name[64];
        snprintf(name, sizeof name, "t_cluster_%d_%d", (int)getpid(), k);
        int slot = keyslot(name);
        int port = slot >= 0 ? master_of_slot(base_port, slot) : 0;
        bool taken = port == 0;
        for (int i = 0; i < n; i++)
            taken = taken || graphs[i].master_port == port;
        if (taken)
            continue;
        snprintf(graphs[n].graph, sizeof graphs[n].graph, "%s", name);
        graphs[n].slot = slot;
        graphs[n].master_port = port;
        n++;
    }
    if (n < N_GRAPHS)
        return -1;
    for (int i = 0; i < N_GRAPHS; i++) {
        static const char *const extra[] = {"--durable-ack", "1", "--workers",    "2",
                                            "--runners",     "0", "--timeout-ms", "3000"};
        harness_charterd_opts o = {.graph = graphs[i].graph, .extra_args = extra, .n_extra = 8};
        if (harness_charterd_start(&o, &graphs[i].d) != 0)
            return -1;
        graphs[i].started = true;
    }
    return 0;
}

/* CUnit runs no cleanup after a failed init: a half-started cluster is stopped here. */
static int cluster_init(void)
{
    if (cluster_start() == 0)
        return 0;
    cluster_clean();
    return -1;
}

static int cluster_clean(void)
{
    for (int i = 0; i < N_GRAPHS; i++)
        if (graphs[i].started)
            harness_charterd_stop(&graphs[i].d);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/deploy/cluster.sh stop %s; rm -rf %s", CHARTER_SOURCE_DIR,
             cluster_dir, cluster_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "stopping the cluster failed\n");
    if (shared_redis[0])
        setenv("CHARTER_TEST_REDIS", shared_redis, 1);
    return 0;
}

static void test_cluster_urls_are_checked(void)
{
    char out[STORE_URL_MAX];
    CU_ASSERT_EQUAL(store_url_canonical("cluster://127.0.0.1:7000,[::1]:7001", out, sizeof out),
                    STATUS_OK);
    CU_ASSERT_STRING_EQUAL(out, "cluster://127.0.0.1:7000,[::1]:7001");
    CU_ASSERT_EQUAL(store_url_canonical("cluster://", out, sizeof out), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_url_canonical("cluster://host", out, sizeof out), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_url_canonical("cluster://a:1,", out, sizeof out), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_url_canonical("cluster://a:1,,b:2", out, sizeof out), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_url_canonical("cluster://u@a:1", out, sizeof out), STATUS_EINVAL);
    CU_ASSERT_EQUAL(store_url_canonical("cluster://a:70000", out, sizeof out), STATUS_EINVAL);
}

static void test_graphs_spread_over_masters_and_deliveries_commit_durably(void)
{
    int masters[N_GRAPHS];
    for (int i = 0; i < N_GRAPHS; i++) {
        cluster_graph *g = &graphs[i];
        masters[i] = g->master_port;
        charter_client *c = NULL;
        CU_ASSERT_EQUAL_FATAL(harness_client_open(g->d.tcp_url, HARNESS_OPERATOR_TOKEN, 5000, &c),
                              0);
        CU_ASSERT_EQUAL_FATAL(prepare_run(c, g), 0);
        for (int k = 0; k < 3; k++) {
            char inv[64];
            snprintf(inv, sizeof inv, "spread-%d-%d", i, k);
            deliver_answer a;
            CU_ASSERT_EQUAL(deliver(c, g, inv, &a), 0);
            CU_ASSERT_EQUAL(a.outcome, CHARTER__V1__OUTCOME__ALLOW);
            CU_ASSERT_TRUE(a.durable); /* each master has one replica */
            CU_ASSERT_FALSE(a.acknowledged);
        }
        char **ids = NULL;
        CU_ASSERT_EQUAL(run_deliveries(c, g->run_id, &ids), 3);
        for (size_t k = 0; ids && ids[k]; k++)
            free(ids[k]);
        free(ids);
        /* The graph's keys live on its slot's master, and on no other master. */
        CU_ASSERT_TRUE(keys_in_slot(g->master_port, g->slot) > 0);
        for (int j = 0; j < N_GRAPHS; j++)
            if (graphs[j].master_port != g->master_port)
                CU_ASSERT_EQUAL(keys_in_slot(graphs[j].master_port, g->slot), 0);
        charter_client_close(c);
    }
    int distinct = 1;
    for (int i = 1; i < N_GRAPHS; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen = seen || masters[j] == masters[i];
        distinct += !seen;
    }
    CU_ASSERT_TRUE(distinct >= 2);
}

/* RediSearch 1.x is not cluster-aware, but it needs not be: the index is named under the
 * graph's prefix and the module's own keys (idx:, ft:, tag:) are named after the index, so they
 * carry the graph's hash tag too and the whole index lives on the graph's master. */
/* CreateTenant claims the tenant's graph in its own slot and registers it in the registry's
 * (charter:{_tenants}), here on another master; the tenant's credential then serves it. The
 * name of a graph that holds data (another charterd's default graph) is ALREADY_EXISTS, and
 * nothing of that graph or the registry changes. */
static void test_tenants_are_claimed_and_registered_across_slots(void)
{
    int registry_master = master_of_slot(base_port, keyslot("_tenants"));
    CU_ASSERT_FATAL(registry_master > 0);
    char name[64] = "";
    int slot = -1, master = 0;
    for (int k = 0; k < 200 && master == 0; k++) {
        snprintf(name, sizeof name, "ct_%d_%d", (int)getpid(), k);
        slot = keyslot(name);
        int port = slot >= 0 ? master_of_slot(base_port, slot) : 0;
        if (port > 0 && port != registry_master)
            master = port;
    }
    CU_ASSERT_FATAL(master > 0);
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = 20000;
    charter_client *admin = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_client_open(graphs[0].d.tcp_url, ADMIN_TOKEN, &o, &admin), 0);
    Charter__V1__CreateTenantRequest rq = CHARTER__V1__CREATE_TENANT_REQUEST__INIT;
    rq.name = name;
    Charter__V1__CreateTenantResponse *r = NULL;
    charter_status st;
    long long in_slot = keys_in_slot(master, slot);
    CU_ASSERT_FATAL(in_slot >= 0);
    int rc = charter_create_tenant(admin, &rq, &r, &st);
    if (rc != 0)
        fprintf(stderr, "\n  CreateTenant %s: %s\n", name, st.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    /* The claim, on the tenant's master, and nothing else there. */
    CU_ASSERT_EQUAL(keys_in_slot(master, slot), in_slot + 1);
    charter_client *op = NULL;
    CU_ASSERT_EQUAL_FATAL(
        charter_client_open(graphs[1].d.tcp_url, r->operator_credential->secret, &o, &op), 0);
    charter__v1__create_tenant_response__free_unpacked(r, NULL);
    Charter__V1__ListRunsRequest lr = CHARTER__V1__LIST_RUNS_REQUEST__INIT;
    Charter__V1__ListRunsResponse *runs = NULL;
    CU_ASSERT_EQUAL(charter_list_runs(op, &lr, &runs, &st), 0);
    if (runs != NULL) {
        CU_ASSERT_EQUAL(runs->n_runs, 0);
        charter__v1__list_runs_response__free_unpacked(runs, NULL);
    }
    Charter__V1__HealthRequest hq = CHARTER__V1__HEALTH_REQUEST__INIT;
    Charter__V1__HealthResponse *h = NULL;
    CU_ASSERT_EQUAL(charter_health(op, &hq, &h, &st), 0);
    if (h != NULL) {
        CU_ASSERT_STRING_EQUAL(h->tenant, name);
        charter__v1__health_response__free_unpacked(h, NULL);
    }
    charter_client_close(op);

    /* graphs[1] is another charterd's default graph, with runs. */
    long long before = keys_in_slot(graphs[1].master_port, graphs[1].slot);
    CU_ASSERT_FATAL(before > 0);
    rq.name = graphs[1].graph;
    rc = charter_create_tenant(admin, &rq, &r, &st);
    if (rc != -CHARTER_ALREADY_EXISTS)
        fprintf(stderr, "\n  CreateTenant %s: %d %s\n", graphs[1].graph, rc, st.message);
    CU_ASSERT_EQUAL(rc, -CHARTER_ALREADY_EXISTS);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.message, "already holds data"));
    CU_ASSERT_EQUAL(keys_in_slot(graphs[1].master_port, graphs[1].slot), before);
    Charter__V1__ListTenantsRequest lq = CHARTER__V1__LIST_TENANTS_REQUEST__INIT;
    Charter__V1__ListTenantsResponse *l = NULL;
    CU_ASSERT_EQUAL_FATAL(charter_list_tenants(admin, &lq, &l, &st), 0);
    int named = 0, taken = 0;
    for (size_t i = 0; i < l->n_tenants; i++) {
        named += strcmp(l->tenants[i]->name, name) == 0;
        taken += strcmp(l->tenants[i]->name, graphs[1].graph) == 0;
    }
    CU_ASSERT_EQUAL(named, 1);
    CU_ASSERT_EQUAL(taken, 0);
    charter__v1__list_tenants_response__free_unpacked(l, NULL);
    charter_client_close(admin);
}

static void test_retrieval_index_lives_on_the_graphs_master(void)
{
    const cluster_graph *g = &graphs[1];
    store *st = NULL;
    CU_ASSERT_EQUAL_FATAL(store_open(cluster_url, g->graph, 5000, &st), STATUS_OK);
    CU_ASSERT_TRUE(store_is_cluster(st));
    bool loaded = false;
    CU_ASSERT_EQUAL_FATAL(store_module_loaded(st, "ft", &loaded), STATUS_OK);
    if (!loaded) {
        printf("\n    (RediSearch is not installed: retrieval not checked)\n");
        store_close(st);
        return;
    }
    long long before = keys_in_slot(g->master_port, g->slot);
    json_t *arg = json_pack("{s:[{s:s, s:s, s:s, s:s, s:i, s:s}]}", "chunks", "chunk_id", "c1",
                            "resource_id", "vendor_a", "tenant", "acme", "visibility", "internal",
                            "revision", 1, "text", "Northwind desks ship in six weeks");
    json_t *out = NULL;
    CU_ASSERT_EQUAL(q_retrieval_ingest(st, arg, &out), STATUS_OK);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(out, "indexed")), 1);
    json_decref(out);
    json_decref(arg);
    store_close(st);
    /* The chunk, the index and its term keys: all in the graph's slot, on its master. */
    CU_ASSERT_TRUE(keys_in_slot(g->master_port, g->slot) >= before + 4);
    redisContext *c = redisConnect("127.0.0.1", g->master_port);
    CU_ASSERT_FATAL(c != NULL && !c->err);
    redisReply *r =
        redisCommand(c, "FT.SEARCH charter:{%s}:retrieval:index desks NOCONTENT", g->graph);
    CU_ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                   r->element[0]->integer == 1);
    freeReplyObject(r);
    redisFree(c);
}

/* The node id of the node at port (CLUSTER MYID) into id (64 bytes); 0 or -1. */
static int node_id(int port, char id[64])
{
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        redisFree(c);
        return -1;
    }
    redisReply *r = redisCommand(c, "CLUSTER MYID");
    int rc = r && r->type == REDIS_REPLY_STRING && r->len < 64 ? 0 : -1;
    if (rc == 0)
        snprintf(id, 64, "%s", r->str);
    freeReplyObject(r);
    redisFree(c);
    return rc;
}

/* Runs one command on the node at port; 0 when it answered no error (printed unless quiet). */
static int node_do(int port, const char *const *argv, int argc, bool quiet)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        redisFree(c);
        return -1;
    }
    redisReply *r = redisCommandArgv(c, argc, (const char **)argv, NULL);
    int rc = r && r->type != REDIS_REPLY_ERROR ? 0 : -1;
    if (rc != 0 && !quiet)
        fprintf(stderr, "%s %s at :%d: %s\n", argv[0], argc > 1 ? argv[1] : "", port,
                r ? r->str : c->errstr);
    freeReplyObject(r);
    redisFree(c);
    return rc;
}

/* Moves slot (with every key in it, in one MIGRATE) from the master at from to the master at
 * to, and tells every master. Returns 0 or -1. */
static int move_slot(int slot, int from, int to)
{
    char src[64], dst[64], sl[16], port[16];
    if (node_id(from, src) != 0 || node_id(to, dst) != 0)
        return -1;
    snprintf(sl, sizeof sl, "%d", slot);
    snprintf(port, sizeof port, "%d", to);
    const char *importing[] = {"CLUSTER", "SETSLOT", sl, "IMPORTING", src};
    const char *migrating[] = {"CLUSTER", "SETSLOT", sl, "MIGRATING", dst};
    if (node_do(to, importing, 5, false) != 0 || node_do(from, migrating, 5, false) != 0)
        return -1;
    redisContext *c = redisConnect("127.0.0.1", from);
    if (!c || c->err) {
        redisFree(c);
        return -1;
    }
    redisReply *keys = redisCommand(c, "CLUSTER GETKEYSINSLOT %d 100000", slot);
    int rc = keys && keys->type == REDIS_REPLY_ARRAY ? 0 : -1;
    if (rc == 0 && keys->elements > 0) {
        size_t n = keys->elements + 8;
        const char **argv = calloc(n, sizeof *argv);
        size_t *lens = calloc(n, sizeof *lens);
        rc = argv && lens ? 0 : -1;
        if (rc == 0) {
            const char *head[] = {"MIGRATE", "127.0.0.1", port, "", "0", "10000", "KEYS"};
            for (size_t i = 0; i < 7; i++) {
                argv[i] = head[i];
                lens[i] = strlen(head[i]);
            }
            for (size_t i = 0; i < keys->elements; i++) {
                argv[7 + i] = keys->element[i]->str;
                lens[7 + i] = keys->element[i]->len;
            }
            redisReply *m = redisCommandArgv(c, (int)(7 + keys->elements), argv, lens);
            rc = m && m->type != REDIS_REPLY_ERROR ? 0 : -1;
            if (rc != 0)
                fprintf(stderr, "MIGRATE: %s\n", m ? m->str : c->errstr);
            freeReplyObject(m);
        }
        free(argv);
        free(lens);
    }
    freeReplyObject(keys);
    redisFree(c);
    const char *node[] = {"CLUSTER", "SETSLOT", sl, "NODE", dst};
    for (int i = 0; rc == 0 && i < 6; i++)
        (void)node_do(base_port + i, node, 5, true); /* replicas refuse it */
    if (rc == 0 && (node_do(to, node, 5, false) != 0 || node_do(from, node, 5, false) != 0))
        rc = -1;
    return rc;
}

/* The slot of a graph moves to another master while its charterd keeps its old map: the next
 * calls get MOVED, follow it, and deliver on the new master. */
static void test_a_moved_slot_is_followed_to_its_new_master(void)
{
    cluster_graph *g = &graphs[2];
    int from = g->master_port;
    int to = graphs[0].master_port != from ? graphs[0].master_port : graphs[1].master_port;
    CU_ASSERT_EQUAL_FATAL(move_slot(g->slot, from, to), 0);
    g->master_port = to;
    CU_ASSERT_EQUAL(keys_in_slot(from, g->slot), 0);
    long long moved = keys_in_slot(to, g->slot);
    CU_ASSERT_TRUE(moved > 0);
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(g->d.tcp_url, HARNESS_OPERATOR_TOKEN, 5000, &c), 0);
    for (int k = 0; k < 4; k++) { /* both workers' stores meet the redirect */
        char inv[64];
        snprintf(inv, sizeof inv, "moved-%d", k);
        deliver_answer a;
        CU_ASSERT_EQUAL(deliver(c, g, inv, &a), 0);
        CU_ASSERT_EQUAL(a.outcome, CHARTER__V1__OUTCOME__ALLOW);
        CU_ASSERT_FALSE(a.acknowledged);
    }
    char **ids = NULL;
    CU_ASSERT_EQUAL(run_deliveries(c, g->run_id, &ids), 3 + 4);
    for (size_t k = 0; ids && ids[k]; k++)
        free(ids[k]);
    free(ids);
    charter_client_close(c);
    CU_ASSERT_EQUAL(keys_in_slot(from, g->slot), 0);
    CU_ASSERT_TRUE(keys_in_slot(to, g->slot) > moved);
}

/* Whether the node at port holds the query library (FUNCTION LIST LIBRARYNAME charter): 1, 0, or
 * -1 when it did not answer. */
static int node_has_library(int port)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        redisFree(c);
        return -1;
    }
    redisReply *r = redisCommand(c, "FUNCTION LIST LIBRARYNAME charter");
    int has = r && r->type == REDIS_REPLY_ARRAY ? r->elements > 0 : -1;
    freeReplyObject(r);
    redisFree(c);
    return has;
}

/* The lines of the log at path that hold both a and b. */
static int log_lines_with(const char *path, const char *a, const char *b)
{
    char *log = harness_slurp(path);
    int n = 0;
    for (char *line = log; line != NULL && *line != '\0';) {
        char *end = strchr(line, '\n');
        if (end != NULL)
            *end = '\0';
        n += strstr(line, a) != NULL && strstr(line, b) != NULL;
        line = end != NULL ? end + 1 : NULL;
    }
    free(log);
    return n;
}

/* A master that lost the query library (restarted empty, or flushed as here) gets it back
 * from the graph's charterd: the call that finds a function missing loads it on that master,
 * logs one line, and is answered; the other masters are not touched. */
static void test_a_master_that_lost_the_query_library_gets_it_back(void)
{
    cluster_graph *g = &graphs[1];
    int other =
        graphs[0].master_port != g->master_port ? graphs[0].master_port : graphs[2].master_port;
    const char *flush[] = {"FUNCTION", "FLUSH", "SYNC"};
    CU_ASSERT_EQUAL_FATAL(node_do(g->master_port, flush, 3, false), 0);
    CU_ASSERT_EQUAL(node_has_library(g->master_port), 0);
    CU_ASSERT_EQUAL(node_has_library(other), 1);
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(g->d.tcp_url, HARNESS_OPERATOR_TOKEN, 5000, &c), 0);
    for (int k = 0; k < 4; k++) { /* both workers' stores meet the master without it */
        char inv[64];
        snprintf(inv, sizeof inv, "reloaded-%d", k);
        deliver_answer a;
        CU_ASSERT_EQUAL(deliver(c, g, inv, &a), 0);
        CU_ASSERT_EQUAL(a.outcome, CHARTER__V1__OUTCOME__ALLOW);
        if (a.rv != 0 || a.outcome != CHARTER__V1__OUTCOME__ALLOW)
            fprintf(stderr, "deliver %s: rv %d outcome %d: %s\n", inv, a.rv, a.outcome, a.witness);
    }
    charter_client_close(c);
    CU_ASSERT_EQUAL(node_has_library(g->master_port), 1);
    /* One load, so one line, however many of charterd's threads met the missing library (a
     * load where one exists is refused); charterd's health monitor may be the one that loaded,
     * logging it just after a worker's call was answered. */
    char at[64];
    snprintf(at, sizeof at, "at 127.0.0.1:%d ", g->master_port);
    int lines = 0;
    for (long long until = now_ms() + 2000; lines == 0 && now_ms() < until; sleep_ms(20))
        lines =
            log_lines_with(g->d.log_path, at, "loaded it again, version " STORE_LIBRARY_VERSION);
    CU_ASSERT_EQUAL(lines, 1);
}

/* --- failover under load ----------------------------------------------------------------- */

typedef struct {
    char inv[48];
    deliver_answer a;
    long long at_ms;
} sample;

typedef struct {
    int index;
    const cluster_graph *g;
    sample *samples;
    size_t n;
} loader;

static atomic_bool load_stop;

static void *load_main(void *arg)
{
    loader *l = arg;
    charter_client *c = NULL;
    if (harness_client_open(l->g->d.tcp_url, HARNESS_OPERATOR_TOKEN, 4000, &c) != 0)
        return NULL;
    while (!atomic_load(&load_stop) && l->n < MAX_SAMPLES) {
        sample *s = &l->samples[l->n];
        snprintf(s->inv, sizeof s->inv, "fo-%d-%zu", l->index, l->n);
        deliver(c, l->g, s->inv, &s->a);
        s->at_ms = now_ms();
        l->n++;
    }
    charter_client_close(c);
    return NULL;
}

static pid_t node_pid(int port)
{
    char path[256];
    snprintf(path, sizeof path, "%s/node-%d/redis.pid", cluster_dir, port - base_port);
    FILE *f = fopen(path, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return (pid_t)pid;
}

static void test_master_killed_mid_load_loses_no_durable_delivery_and_commits_none_twice(void)
{
    cluster_graph *g = &graphs[0];
    int old_master = g->master_port;
    pid_t victim = node_pid(old_master);
    CU_ASSERT_TRUE_FATAL(victim > 0);
    /* A surviving node to ask about the map. */
    int ask = old_master == base_port ? base_port + 1 : base_port;

    loader ls[LOADERS];
    pthread_t th[LOADERS];
    atomic_store(&load_stop, false);
    for (int i = 0; i < LOADERS; i++) {
        ls[i] = (loader){.index = i, .g = g, .samples = calloc(MAX_SAMPLES, sizeof(sample))};
        CU_ASSERT_PTR_NOT_NULL_FATAL(ls[i].samples);
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, load_main, &ls[i]), 0);
    }
    sleep_ms(1000);
    long long killed_at = now_ms();
    CU_ASSERT_EQUAL(kill(victim, SIGKILL), 0);
    /* The replica takes over (cluster-node-timeout 1000 ms). */
    int new_master = 0;
    long long promoted_at = 0;
    for (int i = 0; i < 150; i++) {
        int p = master_of_slot(ask, g->slot);
        if (p != 0 && p != old_master) {
            new_master = p;
            promoted_at = now_ms();
            break;
        }
        sleep_ms(100);
    }
    CU_ASSERT_NOT_EQUAL(new_master, 0);
    sleep_ms(2500); /* load on the new master */
    atomic_store(&load_stop, true);
    for (int i = 0; i < LOADERS; i++)
        pthread_join(th[i], NULL);

    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(g->d.tcp_url, HARNESS_OPERATOR_TOKEN, 5000, &c), 0);
    char **ids = NULL;
    long n_ids = run_deliveries(c, g->run_id, &ids);
    CU_ASSERT_TRUE_FATAL(n_ids >= 0);

    size_t allow = 0, durable = 0, unavailable = 0, unknown = 0, other = 0, after = 0, lost = 0;
    for (int i = 0; i < LOADERS; i++) {
        for (size_t k = 0; k < ls[i].n; k++) {
            const sample *s = &ls[i].samples[k];
            size_t found = 0;
            for (long d = 0; d < n_ids; d++)
                found += strcmp(ids[d], s->inv) == 0;
            CU_ASSERT_TRUE(found <= 1); /* never a duplicate commit */
            if (s->a.rv == 0 && s->a.outcome == CHARTER__V1__OUTCOME__ALLOW) {
                allow++;
                after += promoted_at && s->at_ms > promoted_at + 500;
                if (s->a.durable) {
                    durable++;
                    if (found != 1) {
                        lost++;
                        fprintf(stderr, "lost durable delivery %s\n", s->inv);
                    }
                }
            } else if (s->a.rv == -CHARTER_UNAVAILABLE || s->a.rv == -CHARTER_DEADLINE_EXCEEDED) {
                unavailable++;
            } else if (s->a.rv == 0 && s->a.outcome == CHARTER__V1__OUTCOME__UNKNOWN) {
                unknown++;
            } else {
                other++;
                fprintf(stderr, "unexpected answer for %s: rv %d outcome %d: %s\n", s->inv, s->a.rv,
                        s->a.outcome, s->a.witness);
            }
        }
    }
    printf("\n    failover: master :%d killed, :%d serves after %lld ms; %zu allow (%zu durable, "
           "%zu after promotion), %zu unavailable, %zu unknown, %zu other; %ld committed\n",
           old_master, new_master, promoted_at ? promoted_at - killed_at : -1, allow, durable,
           after, unavailable, unknown, other, n_ids);
    CU_ASSERT_EQUAL(other, 0);
    CU_ASSERT_EQUAL(lost, 0);
    CU_ASSERT_TRUE(durable > 0);
    CU_ASSERT_TRUE(after > 0); /* the graph is served again by the promoted replica */
    for (long d = 0; d < n_ids; d++)
        free(ids[d]);
    free(ids);
    charter_client_close(c);
    for (int i = 0; i < LOADERS; i++)
        free(ls[i].samples);
}

/* --- one Redis, no replicas ---------------------------------------------------------------- */

static void test_durable_ack_without_replicas_answers_allow_not_durable(void)
{
    char graph[64];
    harness_graph_name(graph, sizeof graph, "cluster_single");
    store_close(harness_store_open(graph));
    static const char *const extra[] = {"--durable-ack", "1", "--workers", "1", "--runners", "0"};
    harness_charterd_opts o = {.graph = graph, .extra_args = extra, .n_extra = 6};
    cluster_graph g;
    memset(&g, 0, sizeof g);
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &g.d), 0);
    charter_client *c = NULL;
    CU_ASSERT_EQUAL_FATAL(harness_client_open(g.d.tcp_url, HARNESS_OPERATOR_TOKEN, 5000, &c), 0);
    CU_ASSERT_EQUAL_FATAL(prepare_run(c, &g), 0);
    deliver_answer a;
    CU_ASSERT_EQUAL(deliver(c, &g, "single-1", &a), 0);
    CU_ASSERT_EQUAL(a.outcome, CHARTER__V1__OUTCOME__ALLOW);
    CU_ASSERT_FALSE(a.durable);
    CU_ASSERT_PTR_NOT_NULL(strstr(a.witness, "not yet durable: 0 of 1 replicas"));
    char **ids = NULL;
    CU_ASSERT_EQUAL(run_deliveries(c, g.run_id, &ids), 1); /* committed all the same */
    for (size_t k = 0; ids && ids[k]; k++)
        free(ids[k]);
    free(ids);
    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&g.d), 0);
    harness_graph_drop(graph);
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test single_tests[] = {
    {"cluster:// URLs are checked seed by seed", test_cluster_urls_are_checked},
    {"--durable-ack 1 without replicas answers allow, not durable",
     test_durable_ack_without_replicas_answers_allow_not_durable},
};
static const harness_test cluster_tests[] = {
    {"graphs spread over masters; deliveries commit durably",
     test_graphs_spread_over_masters_and_deliveries_commit_durably},
    {"a graph's retrieval index lives on the graph's master",
     test_retrieval_index_lives_on_the_graphs_master},
    {"tenants are claimed and registered across slots",
     test_tenants_are_claimed_and_registered_across_slots},
    {"a moved slot is followed to its new master", test_a_moved_slot_is_followed_to_its_new_master},
    {"a master that lost the query library gets it back",
     test_a_master_that_lost_the_query_library_gets_it_back},
    {"a master killed mid-load: no durable delivery lost, none committed twice",
     test_master_killed_mid_load_loses_no_durable_delivery_and_commits_none_twice},
};
static const harness_suite suites[] = {
    {"durable acknowledgements on one Redis", NULL, NULL, HARNESS_TABLE(single_tests)},
    {"Redis Cluster, 3 masters and 3 replicas", cluster_init, cluster_clean,
     HARNESS_TABLE(cluster_tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .ignore_sigpipe = true};
