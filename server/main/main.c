/*
 * main.c - charterd: start up, serve until SIGINT/SIGTERM, stop gracefully.
 *
 * Startup is a table of steps (main_steps) walked forward; shutdown walks the steps that
 * started backward, on success and on failure alike, so every resource has one place that
 * releases it. The order matters for the one-line failure promise: options and tokens, the
 * method tables, the workflow and the evaluator's fingerprint, the integrity key given, the data
 * folder, the database (embedded or --redis), the query library, the default integrity key
 * (decided by the graph's recorded mode), the graph's integrity mode (adopting the key when
 * asked), the static graph, then the transport. Nothing is logged before the service is up, so any
 * failure on the way is exactly one line "charterd: <what is wrong> (<how to fix>)".
 * Signals are blocked in every thread and taken synchronously here with sigtimedwait, so no
 * work ever runs in a signal handler.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rpc/auth.h"
#include "rpc/call.h"
#include "main/config.h"
#include "db/dbproc.h"
#include "rpc/dispatch.h"
#include "evidence/evlog.h"
#include "runs/executor.h"
#include "runs/retention.h"
#include "evidence/integrity.h"
#include "evidence/keyadopt.h"
#include "rpc/http.h"
#include "rpc/serving.h"
#include "runs/provider.h"
#include "core/log.h"
#include "main/notify.h"
#include "main/preflight.h"
#include "workflow/registry.h"
#include "policy/evaluator.h"
#include "db/store.h"
#include "rpc/transport.h"
#include "policy/workflow.h"
#include "core/invariant.h"

extern const char embedded_queries[];
extern const size_t embedded_queries_len;
extern const char embedded_workflow[];
extern const size_t embedded_workflow_len;

/* Exit statuses: 2 for a wrong command line or environment, 1 for everything else. */
enum { EXIT_USAGE = 2, EXIT_STARTUP = 1 };

static const char *main_store_error(int rc)
{
    switch (rc) {
    case STATUS_ENOMEM:
        return "out of memory";
    case STATUS_EUNAVAILABLE:
        return "unreachable";
    case STATUS_EINVAL:
        return "invalid URL or graph name";
    case STATUS_EPROTO:
        return "unexpected reply";
    default:
        return "error";
    }
}

/* "a, b, c" of a JSON list of strings into buf. */
static void main_join(const json_t *list, char *buf, size_t n)
{
    size_t used = 0;
    size_t i;
    const json_t *v;
    buf[0] = '\0';
    json_array_foreach(list, i, v)
    {
        if (!json_is_string(v)) {
            continue;
        }
        int w = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", json_string_value(v));
        if (w < 0 || (size_t)w >= n - used) {
            break;
        }
        used += (size_t)w;
    }
}

/* Where the integrity key came from, for the lines logged once charterd serves. */
typedef enum {
    MAIN_KEY_GIVEN,         /* --integrity-key, or --no-integrity-key */
    MAIN_KEY_DEFAULT,       /* <data folder>/integrity.key, as it was */
    MAIN_KEY_MADE,          /* <data folder>/integrity.key, made at this start */
    MAIN_KEY_GRAPH_KEYLESS, /* none: the graph was created keyless */
} main_key_source;

/* Everything charterd holds between startup and shutdown. */
typedef struct {
    config cfg;
    sigset_t sigs;           /* SIGINT, SIGTERM, SIGCHLD: blocked everywhere, taken in main */
    workflow *wf;            /* the loaded workflow until the registry takes it */
    char evaluator[65];      /* the evaluator's fingerprint under wf */
    dbproc *db;              /* the embedded redis-server, or NULL with --redis */
    const char *url;         /* the database's URL (cfg.redis_url or the embedded one's) */
    store *st;               /* main's own connection; workers open theirs */
    const workflow *startup; /* the startup workflow, kept by the registry */
    json_t *interrupted;     /* ids of the runs marked interrupted at startup */
    auth_tokens auth;
    server_env env;
    dispatch_ctx dctx;
    transport *tr;
    char http_rpc_url[64]; /* the in-process listener HTTP/JSON calls reach the workers by */
    http_server *hs;       /* --http, or NULL */
    executor *ex;          /* the executor threads (--runners), or NULL */
    retention *ret;        /* the retention pass (--retention), or NULL */
    serving *sv;           /* the health monitor Health answers from (rpc/serving.h) */
    char archive_dir[PATH_MAX];
    bool data_dir_ready; /* config_prepare_data_dir done */
    main_key_source key_source;
    char key_path[PATH_MAX]; /* the default key's file */
    bool adopted;            /* the keyless graph adopted the key at this start */
    size_t adopted_runs;
    char adopted_at[32];
} main_state;

/* One step of startup and its undoing. start returns 0, or the exit status after logging
 * exactly one line; stop (NULL: nothing to undo) runs only when start returned 0. */
typedef struct {
    int (*start)(main_state *m);
    void (*stop)(main_state *m);
} main_step;

/* Before any thread exists (NNG starts its own on first use), so all of them inherit it. */
static int main_block_signals(main_state *m)
{
    sigemptyset(&m->sigs);
    sigaddset(&m->sigs, SIGINT);
    sigaddset(&m->sigs, SIGTERM);
    sigaddset(&m->sigs, SIGCHLD);
    if (pthread_sigmask(SIG_BLOCK, &m->sigs, NULL) != 0) {
        log_fatal("cannot block signals (check the environment charterd runs in)");
        return EXIT_STARTUP;
    }
    signal(SIGPIPE, SIG_IGN); /* a caller that hangs up is an error code, not a crash */
    return 0;
}

/* libcurl's global state is set up once, before any worker exists; a half-configured live
 * provider stops startup rather than leaving live runs to fail one by one. */
static int main_provider_start(main_state *m)
{
    (void)m;
    char perr[512];
    if (provider_global_init(perr, sizeof perr) != 0) {
        log_fatal("%s", perr);
        return EXIT_STARTUP;
    }
    return 0;
}

static void main_provider_stop(main_state *m)
{
    (void)m;
    provider_global_cleanup();
}

static int main_check_tables(main_state *m)
{
    (void)m;
    char err[1024];
    if (dispatch_check_tables(err, sizeof err) != 0) {
        log_fatal("%s", err);
        return EXIT_STARTUP;
    }
    return 0;
}

static void main_free_workflow(main_state *m);

static int main_load_workflow(main_state *m)
{
    char werr[512];
    int rc;
    if (m->cfg.workflow != NULL) {
        rc = workflow_load_file(m->cfg.workflow, &m->wf, werr, sizeof werr);
    } else {
        rc = workflow_load_buffer(embedded_workflow, embedded_workflow_len, &m->wf, werr,
                                  sizeof werr);
    }
    if (rc != 0) {
        log_fatal("cannot load the workflow %s: %s (fix the definition, or omit --workflow to "
                  "use the built-in one)",
                  m->cfg.workflow ? m->cfg.workflow : "(built in)", werr);
        return m->cfg.workflow ? EXIT_USAGE : EXIT_STARTUP;
    }
    if (evaluator_fingerprint(m->wf, m->evaluator) != 0 ||
        evlog_configure(m->evaluator) != STATUS_OK) {
        log_fatal("cannot compute the evaluator's fingerprint (check the OpenSSL installation)");
        main_free_workflow(m);
        return EXIT_STARTUP;
    }
    return 0;
}

static void main_free_workflow(main_state *m)
{
    workflow_free(m->wf); /* NULL once the registry took it */
    m->wf = NULL;
}

/* The keys are read once into integrity.c, which alone holds them; they never reach a log
 * line. */
static int main_load_key(main_state *m)
{
    char err[1024];
    int rc = STATUS_OK;
    if (m->cfg.integrity_key != NULL)
        rc = integrity_load_key(m->cfg.integrity_key, err, sizeof err);
    if (rc == STATUS_OK && m->cfg.signing_key != NULL)
        rc = integrity_load_signing_key(m->cfg.signing_key, err, sizeof err);
    if (rc != STATUS_OK) {
        log_fatal("%s", err);
        integrity_forget();
        return EXIT_USAGE;
    }
    return 0;
}

static void main_forget_key(main_state *m)
{
    (void)m;
    integrity_forget();
}

/* A listen address that is taken fails here, before a data folder or a database exists. */
static int main_preflight(main_state *m)
{
    char err[1024];
    if (preflight_listen(&m->cfg, err, sizeof err) != 0) {
        log_fatal("%s", err);
        return EXIT_STARTUP;
    }
    return 0;
}

static int main_prepare_data_dir(main_state *m)
{
    char err[1024];
    if (!config_needs_data_dir(&m->cfg))
        return 0;
    if (config_prepare_data_dir(&m->cfg, err, sizeof err) != 0) {
        log_fatal("%s", err);
        return EXIT_STARTUP;
    }
    m->data_dir_ready = true;
    return 0;
}

static int main_start_database(main_state *m)
{
    char err[1024];
    m->url = m->cfg.redis_url;
    if (m->url == NULL) {
        if (dbproc_start(m->cfg.data_dir, 10000, &m->db, err, sizeof err) != 0) {
            m->db = NULL;
            log_fatal("%s", err);
            return EXIT_STARTUP;
        }
        m->url = dbproc_url(m->db);
    }
    return 0;
}

static void main_stop_database(main_state *m)
{
    if (m->db != NULL) {
        dbproc_stop(m->db);
        m->db = NULL;
    }
}

static int main_open_store(main_state *m)
{
    int rc = store_open(m->url, m->cfg.graph, m->cfg.timeout_ms, &m->st);
    if (rc != STATUS_OK) {
        m->st = NULL;
        log_fatal("cannot reach Redis at %s: %s (start redis-server, or pass the right --redis "
                  "URL)",
                  m->url, main_store_error(rc));
        return EXIT_STARTUP;
    }
    rc = store_load_library(m->st, embedded_queries, embedded_queries_len);
    if (rc == STATUS_EUNAVAILABLE) {
        log_fatal("cannot reach Redis at %s: %s (start redis-server, or pass the right --redis "
                  "URL)",
                  m->url, store_last_error(m->st));
        store_close(m->st);
        m->st = NULL;
        return EXIT_STARTUP;
    }
    if (rc != STATUS_OK) {
        log_fatal("cannot load the query library into Redis at %s: %s (use Redis 7 or newer with "
                  "Functions enabled, and a charterd built from one tree)",
                  m->url, store_last_error(m->st));
        store_close(m->st);
        m->st = NULL;
        return EXIT_STARTUP;
    }
    /* The functions Redis now holds against the stubs charterd calls them through, as the
     * method table is checked against the proto descriptors. */
    rc = store_check_functions(m->st);
    if (rc != STATUS_OK) {
        log_fatal("cannot use the query library in Redis at %s: %s", m->url,
                  store_last_error(m->st));
        store_close(m->st);
        m->st = NULL;
        return EXIT_STARTUP;
    }
    return 0;
}

static void main_close_store(main_state *m)
{
    if (m->st != NULL) {
        store_close(m->st);
        m->st = NULL;
    }
}

/* The default integrity key (neither --integrity-key nor --no-integrity-key), decided by the
 * graph's recorded mode before it is claimed: a new graph gets the data folder's key, made now
 * when there is none; a keyed graph needs that file (a missing one is never replaced: the
 * graph's events were sealed with the lost key); a keyless graph stays keyless unless
 * --adopt-integrity-key asks it to adopt the key. */
static int main_resolve_key(main_state *m)
{
    char mode[16], err[1024];
    if (!config_default_key(&m->cfg))
        return 0;
    if (keyadopt_graph_mode(m->st, mode, err, sizeof err) != STATUS_OK) {
        log_fatal("cannot read the integrity mode of graph %s: %s (check that Redis at %s answers)",
                  m->cfg.graph, err, m->url);
        return EXIT_STARTUP;
    }
    snprintf(m->key_path, sizeof m->key_path, "%s/%s", m->cfg.data_dir, CONFIG_DEFAULT_KEY_FILE);
    if (strcmp(mode, "keyless") == 0 && !m->cfg.adopt_integrity_key) {
        m->key_source = MAIN_KEY_GRAPH_KEYLESS;
        if (m->cfg.signing_key == NULL)
            return 0;
        log_fatal("graph %s was created without an integrity key, so --signing-key has no receipt "
                  "to sign (add --adopt-integrity-key to seal it with %s from now on, or drop "
                  "--signing-key)",
                  m->cfg.graph, m->key_path);
        return EXIT_USAGE;
    }
    /* The folder is made only now that its key is used: a keyless graph leaves none. */
    if (!m->data_dir_ready) {
        if (config_prepare_data_dir(&m->cfg, err, sizeof err) != 0) {
            log_fatal("%s", err);
            return EXIT_STARTUP;
        }
        m->data_dir_ready = true;
        snprintf(m->key_path, sizeof m->key_path, "%s/%s", m->cfg.data_dir,
                 CONFIG_DEFAULT_KEY_FILE);
    }
    bool made = false;
    int rc = integrity_default_key(m->key_path, strcmp(mode, "keyed") != 0, &made, err, sizeof err);
    if (rc == STATUS_ENOTFOUND) {
        log_fatal("graph %s: its events and receipts are sealed with an integrity key, and the key "
                  "file %s is missing (restore it from the backup of the data folder, or pass "
                  "--integrity-key FILE)",
                  m->cfg.graph, m->key_path);
        return EXIT_STARTUP;
    }
    if (rc != STATUS_OK) {
        log_fatal("%s", err);
        return EXIT_USAGE;
    }
    m->key_source = made ? MAIN_KEY_MADE : MAIN_KEY_DEFAULT;
    return 0;
}

/* With --adopt-integrity-key, a keyless graph adopts the key first (keyadopt.h); then the
 * graph's mode is claimed, or checked against the one it recorded. */
static int main_claim_integrity(main_state *m)
{
    char ierr[512];
    if (m->cfg.adopt_integrity_key && integrity_keyed()) {
        int arc = keyadopt_adopt(m->st, &m->adopted_runs, m->adopted_at, ierr, sizeof ierr);
        if (arc != STATUS_OK && arc != STATUS_EEXISTS) {
            log_fatal("graph %s: cannot adopt the integrity key: %s", m->cfg.graph, ierr);
            return EXIT_STARTUP;
        }
        m->adopted = arc == STATUS_OK;
    }
    int rc = evlog_claim_integrity(m->st, ierr, sizeof ierr);
    if (rc == STATUS_EREFUSED) {
        log_fatal("graph %s: %s", m->cfg.graph, ierr);
        return EXIT_STARTUP;
    }
    if (rc != STATUS_OK) {
        log_fatal("cannot read the integrity mode of graph %s: %s (check that Redis at %s accepts "
                  "writes)",
                  m->cfg.graph, ierr, m->url);
        return EXIT_STARTUP;
    }
    return 0;
}

/* The startup workflow is applied like any other (ApplyWorkflow): stored with its nodes,
 * refused when its ids name nodes of the graph with other content. The registry owns it from
 * here on, whether or not it could be applied. */
static int main_install_workflow(main_state *m)
{
    char wf_name[WORKFLOW_ID_MAX + 1];
    char aerr[512];
    snprintf(wf_name, sizeof wf_name, "%s", m->wf->name);
    int rc = registry_install(m->st, m->wf, NULL, &m->startup, aerr, sizeof aerr);
    m->wf = NULL;
    if (rc != STATUS_OK) {
        log_fatal("cannot apply workflow %s to graph %s: %s (%s)", wf_name, m->cfg.graph, aerr,
                  rc == STATUS_EREFUSED
                      ? "the graph holds other nodes under these ids: fix the definition or use "
                        "another --graph"
                      : "check the workflow and that Redis accepts writes");
        registry_shutdown();
        return EXIT_STARTUP;
    }
    return 0;
}

static void main_registry_stop(main_state *m)
{
    (void)m;
    registry_shutdown();
}

static int main_interrupt_runs(main_state *m)
{
    /* A run whose lease another live charterd holds is left alone; one held by a dead
     * charterd of this host is released first, so it is marked below. */
    int rc = executor_release_dead_local(m->st, NULL);
    if (rc == STATUS_OK)
        rc = evlog_interrupt_runs(m->st, &m->interrupted);
    if (rc != STATUS_OK) {
        log_fatal("cannot mark interrupted runs in graph %s: %s (check that Redis at %s accepts "
                  "writes)",
                  m->cfg.graph, store_last_error(m->st), m->url);
        json_decref(m->interrupted);
        m->interrupted = NULL;
        return EXIT_STARTUP;
    }
    return 0;
}

static void main_free_interrupted(main_state *m)
{
    json_decref(m->interrupted);
    m->interrupted = NULL;
}

/* The archive folder (--archive-dir, else <data folder>/archive) into m->archive_dir when
 * there is one: with --retention or --archive-dir; else m->archive_dir stays "". Returns 0 or
 * the exit status after logging one line. */
static int main_archive_dir(main_state *m)
{
    char err[512];
    if (m->cfg.retention_s <= 0 && m->cfg.archive_dir == NULL)
        return 0;
    if (m->cfg.archive_dir == NULL && !m->data_dir_ready) {
        if (config_prepare_data_dir(&m->cfg, err, sizeof err) != 0) {
            log_fatal("%s", err);
            return EXIT_STARTUP;
        }
        m->data_dir_ready = true;
    }
    snprintf(m->archive_dir, sizeof m->archive_dir, "%s",
             m->cfg.archive_dir ? m->cfg.archive_dir : m->cfg.data_dir);
    if (m->cfg.archive_dir == NULL)
        strncat(m->archive_dir, "/archive", sizeof m->archive_dir - strlen(m->archive_dir) - 1);
    return 0;
}

/* The tokens and the environment every call is served with. */
static int main_prepare_calls(main_state *m)
{
    if (auth_init(&m->auth, m->cfg.operator_token, m->cfg.viewer_token, m->cfg.admin_token) != 0) {
        log_fatal("cannot hash the tokens (check the OpenSSL installation)");
        return EXIT_STARTUP;
    }
    /* Calls act under the startup workflow, which the steps before installed. */
    INVARIANT(m->startup != NULL);
    server_env *env = &m->env;
    memset(env, 0, sizeof *env);
    env->wf = m->startup;
    env->graph = m->cfg.graph;
    env->version = CHARTER_VERSION;
    env->workers = m->cfg.workers;
    snprintf(env->evaluator, sizeof env->evaluator, "%s", m->evaluator);
    env->keyed = evlog_keyed();
    env->scripted_only = m->cfg.scripted_only;
    int rc = main_archive_dir(m);
    if (rc != 0)
        return rc;
    env->archive_dir = m->archive_dir[0] != '\0' ? m->archive_dir : NULL;
    config_limits_of(&m->cfg, &env->limits);
    m->dctx = (dispatch_ctx){env, &m->auth};
    return 0;
}

/* The serving status Health answers from without a worker: started before the workers, so
 * the first call already finds a fresh one. */
static int main_start_serving(main_state *m)
{
    char err[1024];
    if (serving_start(m->url, m->cfg.graph, &m->sv, err, sizeof err) != 0) {
        m->sv = NULL;
        log_fatal("%s", err);
        return EXIT_STARTUP;
    }
    m->env.serving = m->sv;
    return 0;
}

static void main_stop_serving(main_state *m)
{
    m->env.serving = NULL;
    serving_stop(m->sv);
    m->sv = NULL;
}

static int main_start_transport(main_state *m)
{
    char err[1024];
    transport_opts topts;
    memset(&topts, 0, sizeof topts);
    topts.urls = (const char *const *)m->cfg.listen;
    topts.n_urls = m->cfg.n_listen;
    /* HTTP/JSON calls reach the same workers through an in-process listener of their own. */
    const char *urls_with_http[CONFIG_MAX_LISTEN + 1];
    if (m->cfg.http != NULL) {
        snprintf(m->http_rpc_url, sizeof m->http_rpc_url, "inproc://charterd-http-%ld",
                 (long)getpid());
        for (size_t i = 0; i < m->cfg.n_listen; i++) {
            urls_with_http[i] = m->cfg.listen[i];
        }
        urls_with_http[m->cfg.n_listen] = m->http_rpc_url;
        topts.urls = urls_with_http;
        topts.n_urls = m->cfg.n_listen + 1;
    }
    topts.workers = m->cfg.workers;
    topts.queue = m->cfg.queue;
    topts.max_message = m->cfg.max_message;
    topts.redis_url = m->url;
    topts.graph = m->cfg.graph;
    topts.timeout_ms = m->cfg.timeout_ms;
    topts.dispatch = &m->dctx;
    int db_failure = 0;
    if (transport_start(&topts, &m->tr, &db_failure, err, sizeof err) != 0) {
        m->tr = NULL;
        log_fatal("%s", err);
        return EXIT_STARTUP;
    }
    return 0;
}

static void main_stop_transport(main_state *m)
{
    transport_stop(m->tr);
    m->tr = NULL;
}

/* Scripted and live runs execute here, never on an RPC worker. */
static int main_start_executor(main_state *m)
{
    char err[512];
    executor_opts o = {m->url, m->cfg.graph, m->cfg.timeout_ms, m->cfg.runners, &m->env.limits};
    if (executor_start(&o, &m->ex, err, sizeof err) != STATUS_OK) {
        m->ex = NULL;
        log_fatal("%s", err);
        return EXIT_STARTUP;
    }
    return 0;
}

static void main_stop_executor(main_state *m)
{
    executor_stop(m->ex);
    m->ex = NULL;
}

/* The invocation window in words for the log: "7d", "20s", "forever". */
static void main_window_text(long long s, char *out, size_t n)
{
    if (s <= 0)
        snprintf(out, n, "forever");
    else if (s % 86400 == 0)
        snprintf(out, n, "%lldd", s / 86400);
    else if (s % 3600 == 0)
        snprintf(out, n, "%lldh", s / 3600);
    else if (s % 60 == 0)
        snprintf(out, n, "%lldm", s / 60);
    else
        snprintf(out, n, "%llds", s);
}

/* --retention: ended runs leave the database for their archives (runs/retention.h). */
static int main_start_retention(main_state *m)
{
    char err[512], window[32];
    /* --archive-dir alone archives the tenants that have a period of their own. */
    if (m->archive_dir[0] == '\0')
        return 0;
    retention_opts o = {.redis_url = m->url,
                        .graph = m->cfg.graph,
                        .archive_dir = m->archive_dir,
                        .timeout_ms = m->cfg.timeout_ms,
                        .retention_s = m->cfg.retention_s,
                        .invocation_window_s = m->cfg.invocation_window_s,
                        .tenants_only = m->cfg.retention_s <= 0};
    if (retention_start(&o, &m->ret, err, sizeof err) != STATUS_OK) {
        log_fatal("%s", err);
        return EXIT_STARTUP;
    }
    main_window_text(m->cfg.invocation_window_s, window, sizeof window);
    if (m->cfg.retention_s > 0)
        log_info("graph %s: ended runs are archived to %s %llds after they end; the records "
                 "of their invocations stay in the database for %s (--invocation-window)",
                 m->cfg.graph, m->archive_dir, m->cfg.retention_s, window);
    else
        log_info("ended runs of the tenants with a retention period are archived to %s",
                 m->archive_dir);
    return 0;
}

static void main_stop_retention(main_state *m)
{
    retention_stop(m->ret);
    m->ret = NULL;
}

static int main_start_http(main_state *m)
{
    if (m->cfg.http == NULL) {
        return 0;
    }
    char err[1024];
    http_opts hopts;
    memset(&hopts, 0, sizeof hopts);
    hopts.addr = m->cfg.http;
    hopts.rpc_url = m->http_rpc_url;
    hopts.max_message = m->cfg.max_message;
    hopts.max_inflight = m->cfg.workers + m->cfg.queue;
    hopts.max_timeout_ms = CONFIG_MAX_TIMEOUT_MS;
    hopts.allow_host = m->cfg.http_allow_host;
    hopts.auth = &m->auth;
    hopts.max_connections = m->cfg.http_max_connections;
    hopts.header_timeout_s = m->cfg.http_header_timeout_s;
    hopts.body_timeout_s = m->cfg.http_body_timeout_s;
    hopts.idle_timeout_s = m->cfg.http_idle_timeout_s;
    hopts.cert_file = m->cfg.http_cert;
    hopts.key_file = m->cfg.http_key;
    if (http_start(&hopts, &m->hs, err, sizeof err) != 0) {
        m->hs = NULL;
        log_fatal("%s", err);
        return EXIT_STARTUP;
    }
    log_info("serving HTTP/JSON and gRPC on %s://%s", m->cfg.http_cert != NULL ? "https" : "http",
             http_address(m->hs));
    return 0;
}

static void main_stop_http(main_state *m)
{
    http_stop(m->hs);
    m->hs = NULL;
}

static const main_step main_steps[] = {
    {main_block_signals, NULL},
    {main_provider_start, main_provider_stop},
    {main_check_tables, NULL},
    {main_load_workflow, main_free_workflow},
    {main_load_key, main_forget_key},
    {main_preflight, NULL},
    {main_prepare_data_dir, NULL},
    {main_start_database, main_stop_database},
    {main_open_store, main_close_store},
    {main_resolve_key, NULL},
    {main_claim_integrity, NULL},
    {main_install_workflow, main_registry_stop},
    {main_interrupt_runs, main_free_interrupted},
    {main_prepare_calls, NULL},
    {main_start_executor, main_stop_executor},
    {main_start_retention, main_stop_retention},
    {main_start_serving, main_stop_serving},
    {main_start_transport, main_stop_transport},
    {main_start_http, main_stop_http},
};
#define MAIN_N_STEPS (sizeof main_steps / sizeof main_steps[0])

/* What became of the integrity key at this start, once charterd serves: a key made, a key
 * adopted, or a graph left keyless by default. */
static void main_log_key(const main_state *m)
{
    if (m->key_source == MAIN_KEY_MADE)
        log_info("graph %s: made a new integrity key in %s (mode 0600); keep a copy with the "
                 "backups: the graph cannot be served without it",
                 m->cfg.graph, m->key_path);
    if (m->adopted)
        log_info("graph %s adopted the integrity key at %s: the events its %zu run%s had stay "
                 "verifiable as plain SHA-256 and are sealed by the key; every later event is an "
                 "HMAC under it",
                 m->cfg.graph, m->adopted_at, m->adopted_runs, m->adopted_runs == 1 ? "" : "s");
    if (m->key_source == MAIN_KEY_GRAPH_KEYLESS)
        log_info("graph %s was created without an integrity key: no receipts or checkpoints "
                 "(restart with --adopt-integrity-key to seal its events with %s from now on)",
                 m->cfg.graph, m->key_path);
}

/* Says where charterd serves, then waits for SIGINT or SIGTERM, watching the embedded
 * database once a second. */
static void main_serve(main_state *m)
{
    char urls[1024];
    size_t used = 0;
    urls[0] = '\0';
    for (size_t i = 0; i < m->cfg.n_listen; i++) {
        char url[320];
        if (transport_listen_url(m->tr, i, url, sizeof url) != 0) {
            snprintf(url, sizeof url, "%s", m->cfg.listen[i]);
        }
        int w = snprintf(urls + used, sizeof urls - used, "%s%s", i ? ", " : "", url);
        if (w < 0 || (size_t)w >= sizeof urls - used) {
            break;
        }
        used += (size_t)w;
    }
    log_info("serving graph %s on %s with %u workers (redis %s%s, query library %s, workflow %s, "
             "%s%s)",
             m->cfg.graph, urls, m->cfg.workers, m->url, m->db ? " embedded" : "",
             STORE_LIBRARY_VERSION, m->startup->name,
             m->env.keyed ? (integrity_signing() ? "events sealed with the integrity key, receipts "
                                                   "signed with key "
                                                 : "events sealed with the integrity key")
                          : "no integrity key",
             integrity_signing() ? integrity_key_id() : "");
    main_log_key(m);
    if (notify_ready("serving") != 0) {
        log_error("cannot tell systemd that charterd is ready (check NOTIFY_SOCKET)");
    }
    const json_t *ids = m->interrupted;
    if (json_array_size(ids) > 0) {
        char list[512];
        main_join(ids, list, sizeof list);
        log_info("marked %zu runs interrupted: %s", json_array_size(ids), list);
    }

    int sig = 0;
    for (;;) {
        struct timespec tick = {1, 0};
        sig = sigtimedwait(&m->sigs, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM) {
            break;
        }
        char what[64];
        if (m->db != NULL && dbproc_check(m->db, what, sizeof what)) {
            log_error("embedded redis-server %s; calls fail with UNAVAILABLE until charterd is "
                      "restarted (see %s/redis.log)",
                      what, m->cfg.data_dir);
        }
    }
    log_info("stopping on %s: finishing calls in flight", sig == SIGINT ? "SIGINT" : "SIGTERM");
    (void)notify_stopping();
}

int main(int argc, char **argv)
{
    static main_state m;
    char err[1024];
    int rc = config_parse(argc, argv, &m.cfg, err, sizeof err);
    if (rc == CONFIG_EXIT) {
        config_free(&m.cfg);
        return 0;
    }
    if (rc != CONFIG_OK) {
        log_fatal("%s", err);
        config_free(&m.cfg);
        return EXIT_USAGE;
    }
    log_init(m.cfg.quiet, m.cfg.verbose);
    log_set_json(m.cfg.log_json);

    /* Forward through startup; a step that fails has logged its one line. */
    int status = 0;
    size_t started = 0;
    while (started < MAIN_N_STEPS && (status = main_steps[started].start(&m)) == 0) {
        started++;
    }
    if (status == 0) {
        INVARIANT(started == MAIN_N_STEPS && m.tr != NULL);
        main_serve(&m);
    }
    /* Backward through the steps that started. */
    while (started > 0) {
        const main_step *step = &main_steps[--started];
        if (step->stop != NULL) {
            step->stop(&m);
        }
    }
    if (status == 0) {
        log_info("stopped");
    }
    config_free(&m.cfg);
    return status;
}
