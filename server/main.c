/*
 * main.c - charterd: start up, serve until SIGINT/SIGTERM, stop gracefully.
 *
 * Startup order matters for the one-line failure promise: options and tokens, the handler
 * tables, the workflow and the evaluator's fingerprint, the integrity key, the data folder, the
 * database (embedded or --redis), the query library, the graph's integrity mode, the static
 * graph, then the transport. Nothing is logged before the service is up,
 * so any failure on the way is exactly one line "charterd: <what is wrong> (<how to fix>)".
 * Signals are blocked in every thread and taken synchronously here with sigtimedwait, so no
 * work ever runs in a signal handler.
 */
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "call.h"
#include "config.h"
#include "dbproc.h"
#include "../client/receipt.h"
#include "dispatch.h"
#include "evlog.h"
#include "http.h"
#include "provider.h"
#include "log.h"
#include "notify.h"
#include "preflight.h"
#include "registry.h"
#include "replay.h"
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

    /* libcurl's global state is set up once, before any worker exists; a half-configured live
     * provider stops startup rather than leaving live runs to fail one by one. */
    char perr[512];
    if (provider_global_init(perr, sizeof perr) != 0) {
        log_fatal("%s", perr);
        config_free(&cfg);
        return EXIT_STARTUP;
    }

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
        rc = workflow_load_buffer(embedded_workflow, embedded_workflow_len, &wf, werr, sizeof werr);
    }
    if (rc != 0) {
        log_fatal("cannot load the workflow %s: %s (fix the definition, or omit --workflow to "
                  "use the built-in one)",
                  cfg.workflow ? cfg.workflow : "(built in)", werr);
        int code = cfg.workflow ? EXIT_USAGE : EXIT_STARTUP;
        config_free(&cfg);
        return code;
    }

    /* The key is read once, handed to evlog.c and wiped here; it never reaches a log line. */
    char evaluator[65];
    if (replay_fingerprint(wf, evaluator) != 0) {
        log_fatal("cannot compute the evaluator's fingerprint (check the OpenSSL installation)");
        workflow_free(wf);
        config_free(&cfg);
        return EXIT_STARTUP;
    }
    if (cfg.integrity_key != NULL) {
        static unsigned char key[CHARTER_RECEIPT_KEY_MAX];
        size_t key_len = 0;
        rc =
            charter_receipt_key_load(cfg.integrity_key, key, sizeof key, &key_len, err, sizeof err);
        if (rc == 0 && evlog_configure(key, key_len, evaluator) != 0) {
            snprintf(err, sizeof err, "cannot keep the integrity key (a key of %d to %d bytes)",
                     CHARTER_RECEIPT_KEY_MIN, CHARTER_RECEIPT_KEY_MAX);
            rc = -1;
        }
        OPENSSL_cleanse(key, sizeof key);
        if (rc != 0) {
            log_fatal("%s", err);
            workflow_free(wf);
            config_free(&cfg);
            return EXIT_USAGE;
        }
    } else if (evlog_configure(NULL, 0, evaluator) != 0) {
        log_fatal("cannot set the evaluator's fingerprint");
        workflow_free(wf);
        config_free(&cfg);
        return EXIT_STARTUP;
    }

    int status = EXIT_STARTUP;
    const workflow *startup = NULL;
    dbproc *db = NULL;
    store *st = NULL;
    transport *tr = NULL;
    http_server *hs = NULL;
    json_t *interrupted = NULL;

    if (preflight_listen(&cfg, err, sizeof err) != 0) {
        log_fatal("%s", err);
        goto out;
    }
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
    if (rc != STATUS_OK) {
        st = NULL;
        log_fatal("cannot reach Redis at %s: %s (start redis-server, or pass the right --redis "
                  "URL)",
                  url, main_store_error(rc));
        goto out;
    }
    rc = store_load_library(st, embedded_queries, embedded_queries_len);
    if (rc == STATUS_EUNAVAILABLE) {
        log_fatal("cannot reach Redis at %s: %s (start redis-server, or pass the right --redis "
                  "URL)",
                  url, store_last_error(st));
        goto out;
    }
    if (rc != STATUS_OK) {
        log_fatal("cannot load the query library into Redis at %s: %s (use Redis 7 or newer with "
                  "Functions enabled, and a charterd built from one tree)",
                  url, store_last_error(st));
        goto out;
    }

    char ierr[512];
    rc = evlog_claim_integrity(st, ierr, sizeof ierr);
    if (rc == STATUS_EREFUSED) {
        log_fatal("graph %s: %s", cfg.graph, ierr);
        goto out;
    }
    if (rc != STATUS_OK) {
        log_fatal("cannot read the integrity mode of graph %s: %s (check that Redis at %s accepts "
                  "writes)",
                  cfg.graph, ierr, url);
        goto out;
    }

    /* The startup workflow is applied like any other (ApplyWorkflow): stored with its nodes,
     * refused when its ids name nodes of the graph with other content. The registry owns it
     * from here on. */
    char wf_name[WORKFLOW_ID_MAX + 1];
    char aerr[512];
    snprintf(wf_name, sizeof wf_name, "%s", wf->name);
    rc = registry_install(st, wf, NULL, &startup, aerr, sizeof aerr);
    wf = NULL;
    if (rc != STATUS_OK) {
        log_fatal("cannot apply workflow %s to graph %s: %s (%s)", wf_name, cfg.graph, aerr,
                  rc == STATUS_EREFUSED
                      ? "the graph holds other nodes under these ids: fix the definition or use "
                        "another --graph"
                      : "check the workflow and that Redis accepts writes");
        goto out;
    }
    rc = evlog_interrupt_runs(st, &interrupted);
    if (rc != STATUS_OK) {
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
    env.wf = startup;
    env.graph = cfg.graph;
    env.version = CHARTER_VERSION;
    env.workers = cfg.workers;
    snprintf(env.evaluator, sizeof env.evaluator, "%s", evaluator);
    env.keyed = evlog_keyed();
    env.scripted_only = cfg.scripted_only;
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
    /* HTTP/JSON calls reach the same workers through an in-process listener of their own. */
    char http_rpc_url[64];
    const char *urls_with_http[CONFIG_MAX_LISTEN + 1];
    if (cfg.http != NULL) {
        snprintf(http_rpc_url, sizeof http_rpc_url, "inproc://charterd-http-%ld", (long)getpid());
        for (size_t i = 0; i < cfg.n_listen; i++) {
            urls_with_http[i] = cfg.listen[i];
        }
        urls_with_http[cfg.n_listen] = http_rpc_url;
        topts.urls = urls_with_http;
        topts.n_urls = cfg.n_listen + 1;
    }
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

    if (cfg.http != NULL) {
        http_opts hopts;
        memset(&hopts, 0, sizeof hopts);
        hopts.addr = cfg.http;
        hopts.rpc_url = http_rpc_url;
        hopts.max_message = cfg.max_message;
        hopts.max_inflight = cfg.workers + cfg.queue;
        hopts.max_timeout_ms = CONFIG_MAX_TIMEOUT_MS;
        hopts.allow_host = cfg.http_allow_host;
        if (http_start(&hopts, &hs, err, sizeof err) != 0) {
            hs = NULL;
            log_fatal("%s", err);
            goto out;
        }
        char hp[300];
        log_info("serving HTTP/JSON on http://%s",
                 http_parse_addr(cfg.http, hp, sizeof hp) == 0 ? hp : cfg.http);
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
    log_info("serving graph %s on %s with %u workers (redis %s%s, query library %s, workflow %s, "
             "%s)",
             cfg.graph, urls, cfg.workers, url, db ? " embedded" : "", STORE_LIBRARY_VERSION,
             startup->name,
             env.keyed ? "events sealed with the integrity key" : "no integrity key");
    if (notify_ready("serving") != 0) {
        log_error("cannot tell systemd that charterd is ready (check NOTIFY_SOCKET)");
    }
    const json_t *ids = interrupted;
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
    (void)notify_stopping();
    http_stop(hs);
    hs = NULL;
    transport_stop(tr);
    tr = NULL;
    status = 0;

out:
    http_stop(hs);
    transport_stop(tr);
    if (st != NULL) {
        store_close(st);
    }
    json_decref(interrupted);
    if (db != NULL) {
        dbproc_stop(db);
    }
    workflow_free(wf);
    registry_shutdown();
    evlog_forget_key();
    provider_global_cleanup();
    if (status == 0) {
        log_info("stopped");
    }
    config_free(&cfg);
    return status;
}
