/*
 * main.c - charterd: start up, serve until SIGINT/SIGTERM, stop gracefully.
 *
 * Startup order matters for the one-line failure promise: options and tokens, the handler
 * tables, the workflow, the data folder, the database (embedded or --redis), the query
 * library, the static graph, then the transport. Nothing is logged before the service is up,
 * so any failure on the way is exactly one line "charterd: <what is wrong> (<how to fix>)".
 * Signals are blocked in every thread and taken synchronously here with sigtimedwait, so no
 * work ever runs in a signal handler.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "call.h"
#include "config.h"
#include "dbproc.h"
#include "dispatch.h"
#include "log.h"
#include "store.h"
#include "transport.h"
#include "workflow.h"

extern const char embedded_queries[];
extern const size_t embedded_queries_len;
extern const char embedded_workflow[];
extern const size_t embedded_workflow_len;

/* Exit statuses: 2 for a wrong command line or environment, 1 for everything else. */
enum { EXIT_USAGE = 2, EXIT_STARTUP = 1 };

static const char *main_store_error(int rc)
{
    switch (rc) {
    case STORE_ENOMEM:
        return "out of memory";
    case STORE_EUNAVAILABLE:
        return "unreachable";
    case STORE_EINVAL:
        return "invalid URL or graph name";
    case STORE_EPROTO:
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

int main(int argc, char **argv)
{
    char err[1024];
    config cfg;
    int rc = config_parse(argc, argv, &cfg, err, sizeof err);
    if (rc == CONFIG_EXIT) {
        config_free(&cfg);
        return 0;
    }
    if (rc != CONFIG_OK) {
        log_fatal("%s", err);
        config_free(&cfg);
        return EXIT_USAGE;
    }
    log_init(cfg.quiet, cfg.verbose);

    /* Before any thread exists (NNG starts its own on first use), so all of them inherit it. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGCHLD);
    if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0) {
        log_fatal("cannot block signals (check the environment charterd runs in)");
        config_free(&cfg);
        return EXIT_STARTUP;
    }
    signal(SIGPIPE, SIG_IGN); /* a caller that hangs up is an error code, not a crash */

    if (dispatch_check_tables(err, sizeof err) != 0) {
        log_fatal("%s", err);
        config_free(&cfg);
        return EXIT_STARTUP;
    }

    workflow *wf = NULL;
    char werr[512];
    if (cfg.workflow != NULL) {
        rc = workflow_load_file(cfg.workflow, &wf, werr, sizeof werr);
    } else {
        rc = workflow_load_buffer(embedded_workflow, embedded_workflow_len, &wf, werr,
                                  sizeof werr);
    }
    if (rc != 0) {
        log_fatal("cannot load the workflow %s: %s (fix the definition, or omit --workflow to "
                  "use the built-in one)",
                  cfg.workflow ? cfg.workflow : "(built in)", werr);
        int code = cfg.workflow ? EXIT_USAGE : EXIT_STARTUP;
        config_free(&cfg);
        return code;
    }

    int status = EXIT_STARTUP;
    dbproc *db = NULL;
    store *st = NULL;
    transport *tr = NULL;
    json_t *interrupted = NULL;

    if (config_needs_data_dir(&cfg) && config_prepare_data_dir(&cfg, err, sizeof err) != 0) {
        log_fatal("%s", err);
        goto out;
    }
    const char *url = cfg.redis_url;
    if (url == NULL) {
        if (dbproc_start(cfg.data_dir, 10000, &db, err, sizeof err) != 0) {
            log_fatal("%s", err);
            goto out;
        }
        url = dbproc_url(db);
    }

    rc = store_open(url, cfg.graph, cfg.timeout_ms, &st);
    if (rc != STORE_OK) {
        st = NULL;
        log_fatal("cannot reach Redis at %s: %s (start redis-server, or pass the right --redis "
                  "URL)",
                  url, main_store_error(rc));
        goto out;
    }
    rc = store_load_library(st, embedded_queries, embedded_queries_len);
    if (rc == STORE_EUNAVAILABLE) {
        log_fatal("cannot reach Redis at %s: %s (start redis-server, or pass the right --redis "
                  "URL)",
                  url, store_last_error(st));
        goto out;
    }
    if (rc != STORE_OK) {
        log_fatal("cannot load the query library into Redis at %s: %s (use Redis 7 or newer with "
                  "Functions enabled, and a charterd built from one tree)",
                  url, store_last_error(st));
        goto out;
    }

    json_t *seed = workflow_seed_json(wf);
    json_t *seeded = NULL;
    rc = seed != NULL ? store_call_json(st, "seed", seed, &seeded) : STORE_ENOMEM;
    json_decref(seed);
    json_decref(seeded);
    if (rc != STORE_OK) {
        log_fatal("cannot seed workflow %s into graph %s: %s (check the workflow and that Redis "
                  "at %s accepts writes)",
                  wf->name, cfg.graph, st ? store_last_error(st) : main_store_error(rc), url);
        goto out;
    }
    rc = store_call(st, "interrupt_runs", 0, NULL, &interrupted);
    if (rc != STORE_OK) {
        log_fatal("cannot mark interrupted runs in graph %s: %s (check that Redis at %s accepts "
                  "writes)",
                  cfg.graph, store_last_error(st), url);
        goto out;
    }

    auth_tokens auth;
    if (auth_init(&auth, cfg.operator_token, cfg.viewer_token) != 0) {
        log_fatal("cannot hash the tokens (check the OpenSSL installation)");
        goto out;
    }
    server_env env;
    memset(&env, 0, sizeof env);
    env.wf = wf;
    env.graph = cfg.graph;
    env.version = CHARTER_VERSION;
    env.workers = cfg.workers;
    env.limits.max_message = cfg.max_message;
    env.limits.max_ancestry = 10000;
    env.limits.max_ids = 1000;
    env.limits.max_content = (size_t)1024 * 1024;
    env.limits.default_timeout_ms = cfg.timeout_ms;
    env.limits.max_timeout_ms = CONFIG_MAX_TIMEOUT_MS;
    dispatch_ctx dctx = {&env, &auth};

    transport_opts topts;
    memset(&topts, 0, sizeof topts);
    topts.urls = (const char *const *)cfg.listen;
    topts.n_urls = cfg.n_listen;
    topts.workers = cfg.workers;
    topts.queue = cfg.queue;
    topts.max_message = cfg.max_message;
    topts.redis_url = url;
    topts.graph = cfg.graph;
    topts.timeout_ms = cfg.timeout_ms;
    topts.dispatch = &dctx;
    int db_failure = 0;
    if (transport_start(&topts, &tr, &db_failure, err, sizeof err) != 0) {
        tr = NULL;
        log_fatal("%s", err);
        goto out;
    }

    char urls[1024];
    size_t used = 0;
    urls[0] = '\0';
    for (size_t i = 0; i < cfg.n_listen; i++) {
        int w = snprintf(urls + used, sizeof urls - used, "%s%s", i ? ", " : "", cfg.listen[i]);
        if (w < 0 || (size_t)w >= sizeof urls - used) {
            break;
        }
        used += (size_t)w;
    }
    log_info("serving graph %s on %s with %u workers (redis %s%s, query library %s, workflow %s)",
             cfg.graph, urls, cfg.workers, url, db ? " embedded" : "", STORE_LIBRARY_VERSION,
             wf->name);
    const json_t *ids = json_object_get(interrupted, "interrupted");
    if (json_array_size(ids) > 0) {
        char list[512];
        main_join(ids, list, sizeof list);
        log_info("marked %zu runs interrupted: %s", json_array_size(ids), list);
    }

    int sig = 0;
    for (;;) {
        struct timespec tick = {1, 0};
        sig = sigtimedwait(&sigs, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM) {
            break;
        }
        char what[64];
        if (db != NULL && dbproc_check(db, what, sizeof what)) {
            log_error("embedded redis-server %s; calls fail with UNAVAILABLE until charterd is "
                      "restarted (see %s/redis.log)",
                      what, cfg.data_dir);
        }
    }
    log_info("stopping on %s: finishing calls in flight", sig == SIGINT ? "SIGINT" : "SIGTERM");
    transport_stop(tr);
    tr = NULL;
    status = 0;

out:
    transport_stop(tr);
    if (st != NULL) {
        store_close(st);
    }
    json_decref(interrupted);
    if (db != NULL) {
        dbproc_stop(db);
    }
    workflow_free(wf);
    if (status == 0) {
        log_info("stopped");
    }
    config_free(&cfg);
    return status;
}
