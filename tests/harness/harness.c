/*
 * harness.c - the shared test harness (see harness.h): test Redis, graph names and digests,
 * a real charterd child process, raw NNG calls.
 *
 * Child processes are started with fork + execve and an environment prepared before the fork:
 * the test process may already run NNG threads, so the child does nothing between fork and
 * exec that could take a lock.
 */
#include "harness.h"

#include "charter.h"
#include "evidence/evlog.h"
#include "policy/evaluator.h"
#include "policy/workflow.h"
#include "workflow/registry.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;
extern const char embedded_queries[];
extern const size_t embedded_queries_len;

static long long harness_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void harness_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* --- the test Redis ---------------------------------------------------------------------- */

const char *harness_redis_url(void)
{
    const char *url = getenv("CHARTER_TEST_REDIS");
    if (url == NULL || url[0] == '\0') {
        fprintf(stderr, "harness: CHARTER_TEST_REDIS is not set (run the suite through CTest, "
                        "which starts the test Redis: ctest --test-dir build -R <suite>; or "
                        "start redis-server on a unix socket and export "
                        "CHARTER_TEST_REDIS=unix:///path/redis.sock)\n");
        exit(1);
    }
    return url;
}

void harness_graph_name(char *buf, size_t n, const char *test)
{
    snprintf(buf, n, "t_%s_%ld", test, (long)getpid());
}

static redisContext *harness_redis_connect(void)
{
    const char *url = harness_redis_url();
    struct timeval tv = {5, 0};
    redisContext *rc = NULL;
    if (strncmp(url, "unix://", 7) == 0) {
        rc = redisConnectUnixWithTimeout(url + 7, tv);
    } else if (strncmp(url, "tcp://", 6) == 0) {
        char host[256];
        const char *colon = strrchr(url + 6, ':');
        if (colon == NULL || (size_t)(colon - (url + 6)) >= sizeof host) {
            fprintf(stderr, "harness: bad CHARTER_TEST_REDIS %s\n", url);
            return NULL;
        }
        memcpy(host, url + 6, (size_t)(colon - (url + 6)));
        host[colon - (url + 6)] = '\0';
        rc = redisConnectWithTimeout(host, atoi(colon + 1), tv);
    } else {
        fprintf(stderr, "harness: CHARTER_TEST_REDIS %s is neither unix:// nor tcp://\n", url);
        return NULL;
    }
    if (rc == NULL || rc->err != 0) {
        fprintf(stderr, "harness: cannot reach Redis at %s: %s\n", url,
                rc ? rc->errstr : "out of memory");
        if (rc != NULL) {
            redisFree(rc);
        }
        return NULL;
    }
    redisSetTimeout(rc, tv);
    return rc;
}

extern const char embedded_workflow[];
extern const size_t embedded_workflow_len;

int harness_evlog_builtin(const char *suite)
{
    workflow *loaded = NULL;
    char err[512] = "", evaluator[65];
    if (workflow_load_buffer(embedded_workflow, embedded_workflow_len, &loaded, err, sizeof err) !=
            0 ||
        evaluator_fingerprint(loaded, evaluator) != 0 || evlog_configure(evaluator) != 0) {
        fprintf(stderr, "%s: cannot load the built-in workflow: %s\n", suite, err);
        workflow_free(loaded);
        return 2;
    }
    workflow_free(loaded);
    return 0;
}

int harness_install_builtin(store *st, const workflow **kept, const char *suite)
{
    char err[512] = "";
    workflow *loaded = NULL;
    if (evlog_claim_integrity(st, err, sizeof err) != STATUS_OK ||
        workflow_load_buffer(embedded_workflow, embedded_workflow_len, &loaded, err, sizeof err) !=
            0 ||
        registry_install(st, loaded, NULL, kept, err, sizeof err) != STATUS_OK) {
        fprintf(stderr, "%s: cannot install the workflow: %s\n", suite, err);
        return -1;
    }
    return 0;
}

store *harness_store_open(const char *graph)
{
    store *st = NULL;
    int rc = store_open(harness_redis_url(), graph, 5000, &st);
    if (rc != STATUS_OK) {
        fprintf(stderr, "harness: store_open(%s, %s) failed: %d\n", harness_redis_url(), graph, rc);
        exit(1);
    }
    rc = store_load_library(st, embedded_queries, embedded_queries_len);
    if (rc != STATUS_OK) {
        fprintf(stderr, "harness: loading the query library failed: %s\n", store_last_error(st));
        exit(1);
    }
    harness_require_empty_graph(st);
    return st;
}

void harness_require_empty_graph(store *st)
{
    json_t *j = NULL;
    int rc = q_graph_stats(st, &j);
    if (rc != STATUS_OK) {
        fprintf(stderr, "harness: charter_graph_stats failed (%d): %s\n", rc, store_last_error(st));
        exit(1);
    }
    const json_t *keys = json_object_get(j, "keys");
    double n = json_is_number(keys)   ? json_number_value(keys)
               : json_is_string(keys) ? atof(json_string_value(keys))
                                      : -1;
    json_decref(j);
    if (n != 0) {
        fprintf(stderr,
                "harness: the test graph already holds %.0f keys; refusing to run against it "
                "(use a fresh Redis or delete the graph's keys)\n",
                n);
        exit(1);
    }
}

/* Every key of graph, sorted; *n gets the count. NULL with *n == 0 for none; -1 on error. */
static int harness_graph_keys(redisContext *rc, const char *graph, char ***out, size_t *n)
{
    char pattern[160];
    snprintf(pattern, sizeof pattern, "charter:{%s}*", graph);
    char **keys = NULL;
    size_t count = 0, cap = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = redisCommand(rc, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            if (r != NULL) {
                freeReplyObject(r);
            }
            goto fail;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        redisReply *list = r->element[1];
        for (size_t i = 0; i < list->elements; i++) {
            if (count == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                char **nk = realloc(keys, ncap * sizeof *nk);
                if (nk == NULL) {
                    freeReplyObject(r);
                    goto fail;
                }
                keys = nk;
                cap = ncap;
            }
            if ((keys[count] = strdup(list->element[i]->str)) == NULL) {
                freeReplyObject(r);
                goto fail;
            }
            count++;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    /* SCAN may return a key twice; sort and drop repeats. */
    for (size_t i = 1; i < count; i++) {
        for (size_t k = i; k > 0 && strcmp(keys[k - 1], keys[k]) > 0; k--) {
            char *tmp = keys[k];
            keys[k] = keys[k - 1];
            keys[k - 1] = tmp;
        }
    }
    size_t w = 0;
    for (size_t i = 0; i < count; i++) {
        if (w > 0 && strcmp(keys[w - 1], keys[i]) == 0) {
            free(keys[i]);
            continue;
        }
        keys[w++] = keys[i];
    }
    *out = keys;
    *n = w;
    return 0;
fail:
    for (size_t i = 0; i < count; i++) {
        free(keys[i]);
    }
    free(keys);
    return -1;
}

static void harness_free_keys(char **keys, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(keys[i]);
    }
    free(keys);
}

long harness_graph_drop(const char *graph)
{
    redisContext *rc = harness_redis_connect();
    if (rc == NULL) {
        return -1;
    }
    char **keys = NULL;
    size_t n = 0;
    long dropped = -1;
    if (harness_graph_keys(rc, graph, &keys, &n) == 0) {
        dropped = 0;
        for (size_t i = 0; i < n; i++) {
            redisReply *r = redisCommand(rc, "UNLINK %s", keys[i]);
            if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
                dropped += (long)r->integer;
            }
            if (r != NULL) {
                freeReplyObject(r);
            }
        }
        harness_free_keys(keys, n);
    }
    redisFree(rc);
    return dropped;
}

static void harness_hash_bytes(EVP_MD_CTX *md, const void *p, size_t n)
{
    uint64_t len = n;
    EVP_DigestUpdate(md, &len, sizeof len);
    if (n > 0) {
        EVP_DigestUpdate(md, p, n);
    }
}

static int harness_cmp_str(const void *a, const void *b)
{
    const redisReply *x = *(const redisReply *const *)a;
    const redisReply *y = *(const redisReply *const *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->str, y->str, n);
    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* Sorts a HGETALL reply's field/value pairs by field, in place. Returns 0 or -1. */
static int harness_sort_pairs(redisReply **el, size_t n)
{
    size_t pairs = n / 2;
    redisReply **tmp = malloc((n > 0 ? n : 1) * sizeof *tmp);
    size_t *order = malloc((pairs > 0 ? pairs : 1) * sizeof *order);
    if (tmp == NULL || order == NULL) {
        free(tmp);
        free(order);
        return -1;
    }
    for (size_t i = 0; i < pairs; i++) {
        order[i] = i;
    }
    for (size_t i = 1; i < pairs; i++) {
        for (size_t k = i; k > 0 && harness_cmp_str(&el[2 * order[k - 1]], &el[2 * order[k]]) > 0;
             k--) {
            size_t s = order[k];
            order[k] = order[k - 1];
            order[k - 1] = s;
        }
    }
    for (size_t i = 0; i < pairs; i++) {
        tmp[2 * i] = el[2 * order[i]];
        tmp[2 * i + 1] = el[2 * order[i] + 1];
    }
    memcpy(el, tmp, 2 * pairs * sizeof *el);
    free(tmp);
    free(order);
    return 0;
}

/* Feeds one key's canonical contents into md. Returns 0 or -1. */
static int harness_digest_key(redisContext *rc, EVP_MD_CTX *md, const char *key)
{
    char type[32];
    redisReply *t = redisCommand(rc, "TYPE %s", key);
    if (t == NULL || t->type != REDIS_REPLY_STATUS) {
        if (t != NULL) {
            freeReplyObject(t);
        }
        return -1;
    }
    snprintf(type, sizeof type, "%s", t->str);
    freeReplyObject(t);
    if (strcmp(type, "none") == 0) {
        return 0; /* deleted between SCAN and now: not part of the graph any more */
    }
    harness_hash_bytes(md, key, strlen(key));
    harness_hash_bytes(md, type, strlen(type));
    redisReply *v = NULL;
    if (strcmp(type, "string") == 0) {
        v = redisCommand(rc, "GET %s", key);
    } else if (strcmp(type, "hash") == 0) {
        v = redisCommand(rc, "HGETALL %s", key);
    } else if (strcmp(type, "set") == 0) {
        v = redisCommand(rc, "SMEMBERS %s", key);
    } else if (strcmp(type, "zset") == 0) {
        v = redisCommand(rc, "ZRANGE %s 0 -1 WITHSCORES", key);
    } else if (strcmp(type, "list") == 0) {
        v = redisCommand(rc, "LRANGE %s 0 -1", key);
    } else {
        v = redisCommand(rc, "DUMP %s", key);
    }
    if (v == NULL) {
        return -1;
    }
    if (v->type == REDIS_REPLY_STRING) {
        harness_hash_bytes(md, v->str, v->len);
    } else if (v->type == REDIS_REPLY_ARRAY) {
        /* hash: pairs sorted by field; set: members sorted; zset and list keep their order. */
        if (strcmp(type, "set") == 0) {
            qsort(v->element, v->elements, sizeof *v->element, harness_cmp_str);
        } else if (strcmp(type, "hash") == 0 && harness_sort_pairs(v->element, v->elements) != 0) {
            freeReplyObject(v);
            return -1;
        }
        for (size_t i = 0; i < v->elements; i++) {
            if (v->element[i]->type == REDIS_REPLY_STRING) {
                harness_hash_bytes(md, v->element[i]->str, v->element[i]->len);
            }
        }
    }
    freeReplyObject(v);
    redisReply *ttl = redisCommand(rc, "PTTL %s", key);
    if (ttl == NULL || ttl->type != REDIS_REPLY_INTEGER) {
        if (ttl != NULL) {
            freeReplyObject(ttl);
        }
        return -1;
    }
    unsigned char has_ttl = ttl->integer >= 0;
    harness_hash_bytes(md, &has_ttl, 1);
    freeReplyObject(ttl);
    return 0;
}

int harness_graph_digest(const char *graph, char hex[65])
{
    hex[0] = '\0';
    redisContext *rc = harness_redis_connect();
    if (rc == NULL) {
        return -1;
    }
    char **keys = NULL;
    size_t n = 0;
    int status = -1;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (md != NULL && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
        harness_graph_keys(rc, graph, &keys, &n) == 0) {
        status = 0;
        for (size_t i = 0; i < n && status == 0; i++) {
            status = harness_digest_key(rc, md, keys[i]);
        }
        unsigned char d[32];
        unsigned int dn = 0;
        if (status == 0 && EVP_DigestFinal_ex(md, d, &dn) == 1 && dn == 32) {
            for (size_t i = 0; i < 32; i++) {
                snprintf(hex + 2 * i, 3, "%02x", d[i]);
            }
        } else {
            status = -1;
        }
        harness_free_keys(keys, n);
    }
    EVP_MD_CTX_free(md);
    redisFree(rc);
    return status;
}

static int harness_redis_simple(const char *cmd)
{
    redisContext *rc = harness_redis_connect();
    if (rc == NULL) {
        return -1;
    }
    redisReply *r = redisCommand(rc, cmd);
    int ok = r != NULL && r->type == REDIS_REPLY_STATUS ? 0 : -1;
    if (ok != 0) {
        fprintf(stderr, "harness: %s failed: %s\n", cmd,
                r && r->type == REDIS_REPLY_ERROR ? r->str : rc->errstr);
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(rc);
    return ok;
}

int harness_redis_pause(int ms)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "CLIENT PAUSE %d ALL", ms);
    return harness_redis_simple(cmd);
}

int harness_redis_unpause(void)
{
    return harness_redis_simple("CLIENT UNPAUSE");
}

/* --- child processes --------------------------------------------------------------------- */

/* A copy of environ without the token variables, plus the given ones (NULL-ended; free the
 * array and the added strings with harness_env_free). */
typedef struct {
    char **envp;
    char *added[3];
} harness_env;

static int harness_env_make(harness_env *e, const char *op, const char *viewer)
{
    memset(e, 0, sizeof *e);
    size_t n = 0;
    while (environ[n] != NULL) {
        n++;
    }
    e->envp = calloc(n + 3, sizeof *e->envp);
    if (e->envp == NULL) {
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "CHARTER_OPERATOR_TOKEN=", 23) == 0 ||
            strncmp(environ[i], "CHARTER_VIEWER_TOKEN=", 21) == 0) {
            continue;
        }
        e->envp[k++] = environ[i];
    }
    const char *tok[2] = {op, viewer};
    const char *name[2] = {"CHARTER_OPERATOR_TOKEN=", "CHARTER_VIEWER_TOKEN="};
    for (int i = 0; i < 2; i++) {
        if (tok[i] == NULL || tok[i][0] == '\0') {
            continue;
        }
        size_t len = strlen(name[i]) + strlen(tok[i]) + 1;
        char *s = malloc(len);
        if (s == NULL) {
            return -1;
        }
        snprintf(s, len, "%s%s", name[i], tok[i]);
        e->added[i] = s;
        e->envp[k++] = s;
    }
    e->envp[k] = NULL;
    return 0;
}

static void harness_env_free(harness_env *e)
{
    for (int i = 0; i < 3; i++) {
        free(e->added[i]);
    }
    free(e->envp);
}

static pid_t harness_spawn(char *const argv[], char *const envp[], const char *log_path)
{
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "harness: cannot open %s: %s\n", log_path, strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* A test that crashes must not leave its charterd behind. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) {
            _exit(127);
        }
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) {
            dup2(devnull, STDIN_FILENO);
        }
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    close(fd);
    if (pid < 0) {
        fprintf(stderr, "harness: fork: %s\n", strerror(errno));
    }
    return pid;
}

static void harness_print_log(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return;
    }
    fprintf(stderr, "---- %s ----\n", path);
    char line[1024];
    while (fgets(line, sizeof line, f) != NULL) {
        fputs(line, stderr);
    }
    fprintf(stderr, "----\n");
    fclose(f);
}

/* waitpid with a deadline; returns the status code as harness_charterd_stop describes, or -2
 * when it did not end in time. */
static int harness_wait(pid_t pid, int timeout_ms)
{
    long long deadline = harness_now_ms() + timeout_ms;
    for (;;) {
        int status = 0;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            if (WIFEXITED(status)) {
                return WEXITSTATUS(status);
            }
            if (WIFSIGNALED(status)) {
                return 128 + WTERMSIG(status);
            }
            return -1;
        }
        if (w < 0 && errno != EINTR) {
            return -1;
        }
        if (harness_now_ms() >= deadline) {
            return -2;
        }
        harness_sleep_ms(10);
    }
}

/* True when the n arguments name an integrity key option of charterd's. */
static bool harness_names_key(const char *const *args, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(args[i], "--integrity-key") == 0 || strcmp(args[i], "--no-integrity-key") == 0 ||
            strcmp(args[i], "--adopt-integrity-key") == 0 ||
            strncmp(args[i], "--integrity-key=", 16) == 0) {
            return true;
        }
    }
    return false;
}

int harness_log_address(const char *path, const char *marker, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    char line[4096];
    int rc = 1;
    while (rc == 1 && fgets(line, sizeof line, f) != NULL) {
        const char *m = strstr(line, marker);
        const char *a = m != NULL ? strstr(m, "://") : NULL;
        if (a == NULL) {
            continue;
        }
        a += 3;
        size_t len = strcspn(a, "/,\" \n");
        rc = len > 0 && len < n ? 0 : -1;
        if (rc == 0) {
            memcpy(out, a, len);
            out[len] = '\0';
        }
    }
    fclose(f);
    return rc;
}

/* charterd's command line for o, in argv (64 entries), with its addresses in out. */
static void harness_charterd_argv(const harness_charterd_opts *o, harness_charterd *out,
                                  const char **argv)
{
    size_t n = 0;
    argv[n++] = CHARTERD_PATH;
    argv[n++] = "--graph";
    argv[n++] = o->graph;
    argv[n++] = "--listen";
    argv[n++] = "tcp://127.0.0.1:0";
    argv[n++] = "--listen";
    argv[n++] = out->ipc_url;
    if (o->http) {
        argv[n++] = "--http";
        argv[n++] = "127.0.0.1:0";
    }
    if (o->embedded) {
        argv[n++] = "--data-dir";
        argv[n++] = o->data_dir;
    } else {
        argv[n++] = "--redis";
        argv[n++] = harness_redis_url();
        if (o->data_dir != NULL) {
            argv[n++] = "--data-dir";
            argv[n++] = o->data_dir;
        }
    }
    /* Keyless unless the suite names a key, or asks for charterd's default one. */
    if (!o->default_key && !harness_names_key(o->extra_args, o->n_extra)) {
        argv[n++] = "--no-integrity-key";
    }
    for (size_t i = 0; i < o->n_extra && n < 63; i++) {
        argv[n++] = o->extra_args[i];
    }
    argv[n] = NULL;
}

/* Reads the ports charterd was given from its "serving graph" line (logged once everything,
 * HTTP included, listens). Returns 0, 1 when the line is not there yet, or -1. */
static int harness_charterd_addresses(const harness_charterd_opts *o, harness_charterd *out)
{
    char hp[64];
    int rc = harness_log_address(out->log_path, "serving graph", hp, sizeof hp);
    if (rc != 0) {
        return rc;
    }
    snprintf(out->tcp_url, sizeof out->tcp_url, "tcp://%s", hp);
    if (o->http && harness_log_address(out->log_path, "serving HTTP/JSON and gRPC on",
                                       out->http_hostport, sizeof out->http_hostport) != 0) {
        return -1;
    }
    return 0;
}

/* Waits until charterd says where it serves and answers Health there. */
static int harness_charterd_wait(const harness_charterd_opts *o, harness_charterd *out)
{
    long long deadline = harness_now_ms() + (o->wait_ms > 0 ? o->wait_ms : 20000);
    bool listening = false;
    for (;;) {
        int status = 0;
        if (waitpid(out->pid, &status, WNOHANG) == out->pid) {
            fprintf(stderr, "harness: charterd exited during startup (status %d)\n",
                    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            harness_print_log(out->log_path);
            out->pid = 0;
            return -1;
        }
        int rc = listening ? 0 : harness_charterd_addresses(o, out);
        if (rc < 0) {
            fprintf(stderr, "harness: charterd's log does not say where it serves\n");
            harness_print_log(out->log_path);
            harness_charterd_kill(out);
            return -1;
        }
        listening = rc == 0;
        if (listening && harness_health(out->tcp_url, 1000, NULL) == 0) {
            return 0;
        }
        if (harness_now_ms() >= deadline) {
            fprintf(stderr, "harness: charterd did not answer Health in time\n");
            harness_print_log(out->log_path);
            harness_charterd_kill(out);
            return -1;
        }
        harness_sleep_ms(50);
    }
}

int harness_charterd_start(const harness_charterd_opts *o, harness_charterd *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < o->n_extra; i++) {
        if (strcmp(o->extra_args[i], "--quiet") == 0) {
            fprintf(stderr, "harness: a --quiet charterd does not log where it serves, which "
                            "the harness reads its ports from; start it without --quiet\n");
            return -1;
        }
    }
    snprintf(out->dir, sizeof out->dir, "/tmp/charter-test-XXXXXX");
    if (mkdtemp(out->dir) == NULL) {
        fprintf(stderr, "harness: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    snprintf(out->ipc_url, sizeof out->ipc_url, "ipc://%s/c.sock", out->dir);
    snprintf(out->log_path, sizeof out->log_path, "%s/charterd.log", out->dir);

    const char *argv[64];
    harness_charterd_argv(o, out, argv);
    harness_env env;
    if (harness_env_make(&env, o->operator_token ? o->operator_token : HARNESS_OPERATOR_TOKEN,
                         o->viewer_token ? o->viewer_token : HARNESS_VIEWER_TOKEN) != 0) {
        harness_env_free(&env);
        return -1;
    }
    out->pid = harness_spawn((char *const *)argv, env.envp, out->log_path);
    harness_env_free(&env);
    if (out->pid <= 0) {
        out->pid = 0;
        return -1;
    }
    return harness_charterd_wait(o, out);
}

int harness_charterd_stop(harness_charterd *d)
{
    if (d->pid <= 0) {
        return -1;
    }
    kill(d->pid, SIGTERM);
    int status = harness_wait(d->pid, 30000);
    if (status == -2) {
        fprintf(stderr, "harness: charterd did not stop within 30 s of SIGTERM; killing it\n");
        kill(d->pid, SIGKILL);
        harness_wait(d->pid, 10000);
        status = -1;
    }
    d->pid = 0;
    if (status != 0) {
        fprintf(stderr, "harness: charterd ended with status %d\n", status);
        harness_print_log(d->log_path);
        return status;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/c.sock", d->dir);
    unlink(path);
    unlink(d->log_path);
    rmdir(d->dir);
    return 0;
}

void harness_charterd_kill(harness_charterd *d)
{
    if (d->pid <= 0) {
        return;
    }
    kill(d->pid, SIGKILL);
    harness_wait(d->pid, 10000);
    d->pid = 0;
}

int harness_charterd_run(const char *const *args, size_t n, const char *const *env, int timeout_ms,
                         char *output, size_t n_output)
{
    if (n_output > 0) {
        output[0] = '\0';
    }
    char dir[] = "/tmp/charter-run-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        return -1;
    }
    char log_path[64];
    snprintf(log_path, sizeof log_path, "%s/out.log", dir);

    const char **argv = calloc(n + 3, sizeof *argv);
    size_t n_env = 0;
    while (env != NULL && env[n_env] != NULL) {
        n_env++;
    }
    const char **envp = calloc(n_env + 2, sizeof *envp);
    char *path = NULL;
    if (argv == NULL || envp == NULL) {
        free(argv);
        free(envp);
        rmdir(dir);
        return -1;
    }
    argv[0] = CHARTERD_PATH;
    for (size_t i = 0; i < n; i++) {
        argv[i + 1] = args[i];
    }
    if (!harness_names_key(args, n)) {
        argv[n + 1] = "--no-integrity-key";
    }
    for (size_t i = 0; i < n_env; i++) {
        envp[i] = env[i];
    }
    const char *p = getenv("PATH");
    if (p != NULL && (path = malloc(strlen(p) + 6)) != NULL) {
        snprintf(path, strlen(p) + 6, "PATH=%s", p);
        envp[n_env] = path;
    }
    pid_t pid = harness_spawn((char *const *)argv, (char *const *)envp, log_path);
    free(argv);
    free(envp);
    free(path);
    int status = -1;
    if (pid > 0) {
        status = harness_wait(pid, timeout_ms);
        if (status == -2) {
            kill(pid, SIGKILL);
            harness_wait(pid, 5000);
            status = -1;
        }
    }
    FILE *f = fopen(log_path, "r");
    if (f != NULL) {
        size_t got = n_output > 0 ? fread(output, 1, n_output - 1, f) : 0;
        if (n_output > 0) {
            output[got] = '\0';
        }
        fclose(f);
    }
    unlink(log_path);
    rmdir(dir);
    return status;
}

/* --- raw calls --------------------------------------------------------------------------- */

int harness_rpc_raw(const char *url, const void *bytes, size_t len, int timeout_ms,
                    harness_response *out)
{
    memset(out, 0, sizeof *out);
    nng_socket s;
    int rv = nng_req0_open(&s);
    if (rv != 0) {
        return rv;
    }
    if ((rv = nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, timeout_ms)) != 0 ||
        (rv = nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, timeout_ms)) != 0 ||
        (rv = nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, (size_t)256 * 1024 * 1024)) != 0 ||
        /* One connection per call: when charterd drops it (an oversized message), do not
         * redial and send the same message again. */
        (rv = nng_socket_set_ms(s, NNG_OPT_RECONNMINT, 60000)) != 0 ||
        (rv = nng_socket_set_ms(s, NNG_OPT_RECONNMAXT, 60000)) != 0 ||
        (rv = nng_dial(s, url, NULL, 0)) != 0) {
        nng_close(s);
        return rv;
    }
    void *buf = NULL;
    size_t sz = 0;
    if ((rv = nng_send(s, (void *)(len > 0 ? bytes : ""), len, 0)) != 0 ||
        (rv = nng_recv(s, &buf, &sz, NNG_FLAG_ALLOC)) != 0) {
        nng_close(s);
        return rv;
    }
    nng_close(s);
    Charter__V1__RpcResponse *r = charter__v1__rpc_response__unpack(NULL, sz, buf);
    nng_free(buf, sz);
    if (r == NULL) {
        return NNG_EPROTO;
    }
    out->code = r->code;
    out->message = strdup(r->message ? r->message : "");
    out->payload = malloc(r->payload.len > 0 ? r->payload.len : 1);
    if (out->message == NULL || out->payload == NULL) {
        charter__v1__rpc_response__free_unpacked(r, NULL);
        harness_response_free(out);
        return NNG_ENOMEM;
    }
    if (r->payload.len > 0) {
        memcpy(out->payload, r->payload.data, r->payload.len);
    }
    out->payload_len = r->payload.len;
    charter__v1__rpc_response__free_unpacked(r, NULL);
    return 0;
}

int harness_rpc(const char *url, const char *method, const char *token, const void *payload,
                size_t len, int timeout_ms, harness_response *out)
{
    Charter__V1__RpcRequest rq = CHARTER__V1__RPC_REQUEST__INIT;
    Charter__V1__RpcRequest__MetadataEntry auth = CHARTER__V1__RPC_REQUEST__METADATA_ENTRY__INIT;
    Charter__V1__RpcRequest__MetadataEntry *entries[1] = {&auth};
    char bearer[512];
    rq.method = (char *)method;
    rq.payload.data = (uint8_t *)payload;
    rq.payload.len = len;
    if (token != NULL) {
        snprintf(bearer, sizeof bearer, "Bearer %s", token);
        auth.key = "authorization";
        auth.value = bearer;
        rq.metadata = entries;
        rq.n_metadata = 1;
    }
    size_t n = charter__v1__rpc_request__get_packed_size(&rq);
    uint8_t *buf = malloc(n > 0 ? n : 1);
    if (buf == NULL) {
        memset(out, 0, sizeof *out);
        return NNG_ENOMEM;
    }
    charter__v1__rpc_request__pack(&rq, buf);
    int rv = harness_rpc_raw(url, buf, n, timeout_ms, out);
    free(buf);
    return rv;
}

int harness_rpc_msg(const char *url, const char *method, const char *token,
                    const ProtobufCMessage *msg, int timeout_ms, harness_response *out)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(n > 0 ? n : 1);
    if (buf == NULL) {
        memset(out, 0, sizeof *out);
        return NNG_ENOMEM;
    }
    protobuf_c_message_pack(msg, buf);
    int rv = harness_rpc(url, method, token, buf, n, timeout_ms, out);
    free(buf);
    return rv;
}

void harness_response_free(harness_response *r)
{
    free(r->message);
    free(r->payload);
    memset(r, 0, sizeof *r);
}

int harness_health(const char *url, int timeout_ms, Charter__V1__HealthResponse **out)
{
    harness_response r;
    if (out != NULL) {
        *out = NULL;
    }
    if (harness_rpc(url, HARNESS_HEALTH, NULL, NULL, 0, timeout_ms, &r) != 0) {
        return -1;
    }
    int status = -1;
    if (r.code == 0) {
        Charter__V1__HealthResponse *h =
            charter__v1__health_response__unpack(NULL, r.payload_len, r.payload);
        if (h != NULL) {
            status = 0;
            if (out != NULL) {
                *out = h;
            } else {
                charter__v1__health_response__free_unpacked(h, NULL);
            }
        }
    }
    harness_response_free(&r);
    return status;
}

int harness_health_until(const char *url, const char *database, int within_ms,
                         Charter__V1__HealthResponse **out)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        Charter__V1__HealthResponse *h = NULL;
        int rc = harness_health(url, within_ms > 0 ? within_ms : 1, &h);
        clock_gettime(CLOCK_MONOTONIC, &t);
        long long spent = (t.tv_sec - t0.tv_sec) * 1000LL + (t.tv_nsec - t0.tv_nsec) / 1000000;
        bool settled = rc == 0 && h->database != NULL && strcmp(h->database, database) == 0;
        if (settled || spent >= within_ms) {
            if (out != NULL)
                *out = h;
            else if (h != NULL)
                charter__v1__health_response__free_unpacked(h, NULL);
            return rc;
        }
        if (h != NULL)
            charter__v1__health_response__free_unpacked(h, NULL);
    }
}

/* --- races and faults: abandoned calls, private Redis servers, edge deletion ------------- */

#include <dirent.h>

int harness_rpc_abandon(const char *url, const char *method, const char *token,
                        const ProtobufCMessage *msg, int linger_ms)
{
    Charter__V1__RpcRequest rq = CHARTER__V1__RPC_REQUEST__INIT;
    Charter__V1__RpcRequest__MetadataEntry auth = CHARTER__V1__RPC_REQUEST__METADATA_ENTRY__INIT;
    Charter__V1__RpcRequest__MetadataEntry *entries[1] = {&auth};
    char bearer[512];
    size_t plen = msg != NULL ? protobuf_c_message_get_packed_size(msg) : 0;
    uint8_t *payload = malloc(plen > 0 ? plen : 1);
    if (payload == NULL) {
        return NNG_ENOMEM;
    }
    if (msg != NULL) {
        protobuf_c_message_pack(msg, payload);
    }
    rq.method = (char *)method;
    rq.payload.data = payload;
    rq.payload.len = plen;
    if (token != NULL) {
        snprintf(bearer, sizeof bearer, "Bearer %s", token);
        auth.key = "authorization";
        auth.value = bearer;
        rq.metadata = entries;
        rq.n_metadata = 1;
    }
    size_t n = charter__v1__rpc_request__get_packed_size(&rq);
    uint8_t *buf = malloc(n > 0 ? n : 1);
    if (buf == NULL) {
        free(payload);
        return NNG_ENOMEM;
    }
    charter__v1__rpc_request__pack(&rq, buf);
    free(payload);

    nng_socket s;
    int rv = nng_req0_open(&s);
    if (rv != 0) {
        free(buf);
        return rv;
    }
    /* Never resend: the request must reach charterd exactly once. */
    if ((rv = nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 5000)) != 0 ||
        (rv = nng_socket_set_ms(s, NNG_OPT_RECONNMINT, 60000)) != 0 ||
        (rv = nng_socket_set_ms(s, NNG_OPT_RECONNMAXT, 60000)) != 0 ||
        (rv = nng_dial(s, url, NULL, 0)) != 0 || (rv = nng_send(s, buf, n, 0)) != 0) {
        nng_close(s);
        free(buf);
        return rv;
    }
    free(buf);
    harness_sleep_ms(linger_ms > 0 ? linger_ms : 0);
    nng_close(s);
    return 0;
}

/* The argv of a private redis-server in r->dir (NULL-ended, pointing into r). */
static void harness_private_redis_argv(harness_private_redis *r, const char *server,
                                       const char *argv[24])
{
    size_t n = 0;
    argv[n++] = server;
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--unixsocket";
    argv[n++] = r->sock;
    argv[n++] = "--unixsocketperm";
    argv[n++] = "700";
    argv[n++] = "--dir";
    argv[n++] = r->dir;
    argv[n++] = "--appendonly";
    argv[n++] = r->no_persistence ? "no" : "yes";
    argv[n++] = "--appendfsync";
    argv[n++] = "always";
    argv[n++] = "--save";
    argv[n++] = "";
    argv[n++] = "--daemonize";
    argv[n++] = "no";
    /* DEBUG SLEEP (a database that stalls) for the fault tests, on the private socket only. */
    argv[n++] = "--enable-debug-command";
    argv[n++] = "local";
    argv[n] = NULL;
}

/* PING over a unix socket; 0 on PONG. */
static int harness_unix_ping(const char *sock)
{
    struct timeval tv = {0, 250000};
    redisContext *rc = redisConnectUnixWithTimeout(sock, tv);
    int ok = -1;
    if (rc != NULL && rc->err == 0 && redisSetTimeout(rc, tv) == REDIS_OK) {
        redisReply *r = redisCommand(rc, "PING");
        if (r != NULL) {
            ok = r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0 ? 0 : -1;
            freeReplyObject(r);
        }
    }
    if (rc != NULL) {
        redisFree(rc);
    }
    return ok;
}

int harness_private_redis_start(harness_private_redis *r)
{
    if (r->dir[0] == '\0') {
        snprintf(r->dir, sizeof r->dir, "/tmp/charter-redis-XXXXXX");
        if (mkdtemp(r->dir) == NULL) {
            fprintf(stderr, "harness: mkdtemp: %s\n", strerror(errno));
            r->dir[0] = '\0';
            return -1;
        }
        snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
        snprintf(r->url, sizeof r->url, "unix://%s", r->sock);
        snprintf(r->log_path, sizeof r->log_path, "%s/redis.log", r->dir);
    }
    const char *server = "/usr/bin/redis-server";
    if (access(server, X_OK) != 0) {
        server = "/usr/local/bin/redis-server";
    }
    const char *argv[24];
    harness_private_redis_argv(r, server, argv);
    unlink(r->sock); /* a socket left by a SIGKILL */
    char *envp[] = {NULL};
    r->pid = harness_spawn((char *const *)argv, envp, r->log_path);
    if (r->pid <= 0) {
        r->pid = 0;
        return -1;
    }
    long long deadline = harness_now_ms() + 10000;
    while (harness_unix_ping(r->sock) != 0) {
        int status = 0;
        if (waitpid(r->pid, &status, WNOHANG) == r->pid || harness_now_ms() >= deadline) {
            fprintf(stderr, "harness: the private redis-server in %s did not start\n", r->dir);
            harness_print_log(r->log_path);
            harness_private_redis_kill(r);
            return -1;
        }
        harness_sleep_ms(20);
    }
    return 0;
}

void harness_private_redis_kill(harness_private_redis *r)
{
    if (r->pid <= 0) {
        return;
    }
    kill(r->pid, SIGKILL);
    harness_wait(r->pid, 10000);
    r->pid = 0;
}

/* Removes path and, for a folder, everything in it (symbolic links are not followed). */
static int harness_remove_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        return errno == ENOENT ? 0 : -1;
    }
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (d == NULL) {
            return -1;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
                continue;
            }
            char child[512];
            int w = snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            if (w > 0 && (size_t)w < sizeof child) {
                harness_remove_tree(child);
            }
        }
        closedir(d);
        return rmdir(path);
    }
    return unlink(path);
}

void harness_private_redis_stop(harness_private_redis *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGTERM);
        if (harness_wait(r->pid, 10000) == -2) {
            kill(r->pid, SIGKILL);
            harness_wait(r->pid, 5000);
        }
        r->pid = 0;
    }
    if (r->dir[0] != '\0') {
        harness_remove_tree(r->dir);
        r->dir[0] = '\0';
    }
}

pid_t harness_child_pid(pid_t parent, const char *name)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ps -o pid=,comm= --ppid %ld 2>/dev/null", (long)parent);
    FILE *f = popen(cmd, "r");
    if (f == NULL) {
        return 0;
    }
    long pid = 0;
    char comm[64];
    pid_t found = 0;
    while (fscanf(f, "%ld %63s", &pid, comm) == 2) {
        if (strcmp(comm, name) == 0) {
            found = (pid_t)pid;
        }
    }
    pclose(f);
    return found;
}

int harness_redis_pause_writes(int ms)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "CLIENT PAUSE %d WRITE", ms);
    return harness_redis_simple(cmd);
}

/* True when key ends with one of suffixes. */
static bool harness_key_ends_with(const char *key, const char *const *suffixes, size_t n)
{
    size_t klen = strlen(key);
    for (size_t i = 0; i < n; i++) {
        size_t slen = strlen(suffixes[i]);
        if (klen >= slen && strcmp(key + klen - slen, suffixes[i]) == 0) {
            return true;
        }
    }
    return false;
}

long harness_graph_delete_edges(const char *graph, const char *const *suffixes, size_t n)
{
    redisContext *rc = harness_redis_connect();
    if (rc == NULL) {
        return -1;
    }
    char **keys = NULL;
    size_t count = 0;
    long deleted = -1;
    if (harness_graph_keys(rc, graph, &keys, &count) == 0) {
        deleted = 0;
        for (size_t i = 0; i < count && deleted >= 0; i++) {
            if (n > 0 && !harness_key_ends_with(keys[i], suffixes, n)) {
                continue;
            }
            redisReply *t = redisCommand(rc, "TYPE %s", keys[i]);
            bool edge = t != NULL && t->type == REDIS_REPLY_STATUS &&
                        (strcmp(t->str, "set") == 0 || strcmp(t->str, "zset") == 0);
            if (t == NULL) {
                deleted = -1;
            } else {
                freeReplyObject(t);
            }
            if (!edge) {
                continue;
            }
            redisReply *d = redisCommand(rc, "DEL %s", keys[i]);
            if (d != NULL && d->type == REDIS_REPLY_INTEGER) {
                deleted += (long)d->integer;
            } else {
                deleted = -1;
            }
            if (d != NULL) {
                freeReplyObject(d);
            }
        }
        harness_free_keys(keys, count);
    }
    redisFree(rc);
    return deleted;
}

long harness_graph_count_type(const char *graph, const char *type)
{
    redisContext *rc = harness_redis_connect();
    if (rc == NULL) {
        return -1;
    }
    char **keys = NULL;
    size_t count = 0;
    long found = -1;
    if (harness_graph_keys(rc, graph, &keys, &count) == 0) {
        found = 0;
        for (size_t i = 0; i < count && found >= 0; i++) {
            redisReply *t = redisCommand(rc, "TYPE %s", keys[i]);
            if (t == NULL) {
                found = -1;
                continue;
            }
            if (t->type == REDIS_REPLY_STATUS && strcmp(t->str, type) == 0) {
                found++;
            }
            freeReplyObject(t);
        }
        harness_free_keys(keys, count);
    }
    redisFree(rc);
    return found;
}

int harness_pause_on_run(const char *graph, const char *status, long min_deliveries, int pause_ms,
                         int timeout_ms, char run_id[129])
{
    redisContext *rc = harness_redis_connect();
    if (rc == NULL) {
        return -1;
    }
    char runs[160];
    snprintf(runs, sizeof runs, "charter:{%s}:runs", graph);
    long long known = -1;
    int result = -1;
    long long deadline = harness_now_ms() + timeout_ms;
    while (harness_now_ms() < deadline) {
        redisReply *n = redisCommand(rc, "ZCARD %s", runs);
        if (n == NULL || n->type != REDIS_REPLY_INTEGER) {
            if (n != NULL) {
                freeReplyObject(n);
            }
            break;
        }
        long long count = n->integer;
        freeReplyObject(n);
        if (known < 0) {
            known = count; /* runs that existed before: not the one awaited */
            continue;
        }
        if (count <= known) {
            continue;
        }
        redisReply *newest = redisCommand(rc, "ZREVRANGE %s 0 0", runs);
        if (newest == NULL || newest->type != REDIS_REPLY_ARRAY || newest->elements != 1) {
            if (newest != NULL) {
                freeReplyObject(newest);
            }
            continue;
        }
        snprintf(run_id, 129, "%s", newest->element[0]->str);
        freeReplyObject(newest);
        redisReply *s = redisCommand(rc, "HGET charter:{%s}:run:%s status", graph, run_id);
        bool match = s != NULL && s->type == REDIS_REPLY_STRING && strcmp(s->str, status) == 0;
        bool passed = s != NULL && s->type == REDIS_REPLY_STRING &&
                      strcmp(s->str, "created") != 0 && strcmp(s->str, "queued") != 0 &&
                      strcmp(s->str, "running") != 0 && strcmp(s->str, "recovering") != 0;
        if (s != NULL) {
            freeReplyObject(s);
        }
        if (match && min_deliveries > 0) {
            redisReply *d = redisCommand(rc, "SCARD charter:{%s}:run:%s:deliveries", graph, run_id);
            match = d != NULL && d->type == REDIS_REPLY_INTEGER && d->integer >= min_deliveries;
            if (d != NULL) {
                freeReplyObject(d);
            }
        }
        if (match) {
            redisReply *p = redisCommand(rc, "CLIENT PAUSE %d ALL", pause_ms);
            result = p != NULL && p->type == REDIS_REPLY_STATUS ? 0 : -1;
            if (p != NULL) {
                freeReplyObject(p);
            }
            break;
        }
        if (passed) {
            result = 1;
            break;
        }
    }
    redisFree(rc);
    return result;
}

long harness_graph_drop_large(const char *graph)
{
    redisContext *rc = harness_redis_connect();
    if (rc == NULL) {
        return -1;
    }
    char pattern[160];
    snprintf(pattern, sizeof pattern, "charter:{%s}*", graph);
    char cursor[32] = "0";
    long dropped = 0;
    do {
        redisReply *r = redisCommand(rc, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            if (r != NULL) {
                freeReplyObject(r);
            }
            dropped = -1;
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        redisReply *list = r->element[1];
        if (list->elements > 0) {
            const char **argv = calloc(list->elements + 1, sizeof *argv);
            size_t *lens = calloc(list->elements + 1, sizeof *lens);
            if (argv == NULL || lens == NULL) {
                free(argv);
                free(lens);
                freeReplyObject(r);
                dropped = -1;
                break;
            }
            argv[0] = "UNLINK";
            lens[0] = 6;
            for (size_t i = 0; i < list->elements; i++) {
                argv[i + 1] = list->element[i]->str;
                lens[i + 1] = list->element[i]->len;
            }
            redisReply *u = redisCommandArgv(rc, (int)list->elements + 1, argv, lens);
            if (u != NULL && u->type == REDIS_REPLY_INTEGER) {
                dropped += (long)u->integer;
            }
            if (u != NULL) {
                freeReplyObject(u);
            }
            free(argv);
            free(lens);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    redisFree(rc);
    return dropped;
}

int harness_graph_eval(const char *graph, const char *script, const char *const *args, size_t n,
                       long long *out)
{
    redisContext *rc = harness_redis_connect();
    if (rc == NULL) {
        return -1;
    }
    char prefix[160];
    snprintf(prefix, sizeof prefix, "charter:{%s}", graph);
    const char **argv = calloc(n + 4, sizeof *argv);
    if (argv == NULL) {
        redisFree(rc);
        return -1;
    }
    argv[0] = "EVAL";
    argv[1] = script;
    argv[2] = "1";
    argv[3] = prefix;
    for (size_t i = 0; i < n; i++) {
        argv[4 + i] = args[i];
    }
    redisReply *r = redisCommandArgv(rc, (int)n + 4, argv, NULL);
    free(argv);
    int status = -1;
    if (r != NULL && r->type == REDIS_REPLY_INTEGER) {
        if (out != NULL) {
            *out = r->integer;
        }
        status = 0;
    } else {
        fprintf(stderr, "harness: EVAL failed: %s\n",
                r && r->type == REDIS_REPLY_ERROR ? r->str : rc->errstr);
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    redisFree(rc);
    return status;
}

int harness_rpc_deadline(const char *url, const char *method, const char *token,
                         const ProtobufCMessage *msg, uint32_t deadline_ms, int timeout_ms,
                         harness_response *out)
{
    memset(out, 0, sizeof *out);
    Charter__V1__RpcRequest rq = CHARTER__V1__RPC_REQUEST__INIT;
    Charter__V1__RpcRequest__MetadataEntry auth = CHARTER__V1__RPC_REQUEST__METADATA_ENTRY__INIT;
    Charter__V1__RpcRequest__MetadataEntry *entries[1] = {&auth};
    char bearer[512];
    size_t plen = protobuf_c_message_get_packed_size(msg);
    uint8_t *payload = malloc(plen > 0 ? plen : 1);
    if (payload == NULL) {
        return NNG_ENOMEM;
    }
    protobuf_c_message_pack(msg, payload);
    rq.method = (char *)method;
    rq.payload.data = payload;
    rq.payload.len = plen;
    rq.timeout_ms = deadline_ms;
    if (token != NULL) {
        snprintf(bearer, sizeof bearer, "Bearer %s", token);
        auth.key = "authorization";
        auth.value = bearer;
        rq.metadata = entries;
        rq.n_metadata = 1;
    }
    size_t n = charter__v1__rpc_request__get_packed_size(&rq);
    uint8_t *buf = malloc(n > 0 ? n : 1);
    if (buf == NULL) {
        free(payload);
        return NNG_ENOMEM;
    }
    charter__v1__rpc_request__pack(&rq, buf);
    free(payload);
    int rv = harness_rpc_raw(url, buf, n, timeout_ms, out);
    free(buf);
    return rv;
}

/* --- shared by the suites ----------------------------------------------------------------- */

int harness_client_open(const char *url, const char *token, uint32_t timeout_ms,
                        charter_client **out)
{
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = timeout_ms;
    o.connect_timeout_ms = 5000;
    int rc = charter_client_open(url, token, &o, out);
    if (rc != 0)
        fprintf(stderr, "cannot open a client of %s: %s\n", url, charter_status_name(rc));
    return rc;
}

bool harness_has_code(char *const *codes, size_t n, const char *code)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(codes[i], code) == 0)
            return true;
    return false;
}

static char *harness_shared_redis_url;

int harness_suite_redis_start(harness_private_redis *r)
{
    memset(r, 0, sizeof *r);
    r->no_persistence = true;
    if (harness_private_redis_start(r) != 0)
        return -1;
    free(harness_shared_redis_url);
    harness_shared_redis_url = strdup(harness_redis_url());
    if (!harness_shared_redis_url)
        return -1;
    return setenv("CHARTER_TEST_REDIS", r->url, 1);
}

void harness_suite_redis_stop(harness_private_redis *r)
{
    if (harness_shared_redis_url) {
        setenv("CHARTER_TEST_REDIS", harness_shared_redis_url, 1);
        free(harness_shared_redis_url);
        harness_shared_redis_url = NULL;
    }
    harness_private_redis_stop(r);
}

Charter__V1__InvokeResponse *harness_invoke(charter_client *c, const char *context,
                                            const char *tool, const char *inv,
                                            const harness_invoke_arg *args, size_t n,
                                            charter_status *st)
{
    Charter__V1__InvokeArgument a[HARNESS_INVOKE_MAX_ARGS], *ap[HARNESS_INVOKE_MAX_ARGS];
    char *lineage[HARNESS_INVOKE_MAX_ARGS];
    Charter__V1__InvokeRequest req = CHARTER__V1__INVOKE_REQUEST__INIT;
    if (n > HARNESS_INVOKE_MAX_ARGS)
        n = HARNESS_INVOKE_MAX_ARGS;
    for (size_t i = 0; i < n; i++) {
        charter__v1__invoke_argument__init(&a[i]);
        a[i].name = (char *)args[i].name;
        a[i].value = (char *)args[i].value;
        if (strcmp(args[i].origin, "task") == 0) {
            a[i].from_task = true;
        } else if (strncmp(args[i].origin, "quote:", 6) == 0) {
            a[i].quoted_from = (char *)args[i].origin + 6;
        } else {
            lineage[i] = (char *)args[i].origin + 8; /* after "lineage:" */
            a[i].lineage = &lineage[i];
            a[i].n_lineage = 1;
        }
        ap[i] = &a[i];
    }
    req.context_id = (char *)context;
    req.tool = (char *)tool;
    req.invocation_id = (char *)inv;
    req.arguments = ap;
    req.n_arguments = n;
    Charter__V1__InvokeResponse *r = NULL;
    return charter_invoke(c, &req, &r, st) == 0 ? r : NULL;
}
