/*
 * config.h - charterd's command line and environment.
 *
 * Everything charterd is told at startup is read and checked here, before any socket or
 * database is touched, so a wrong option ends the process with one line naming the option and
 * how to fix it. The result is read-only once parsing is done.
 */
#ifndef CHARTER_CONFIG_H
#define CHARTER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "core/limits.h"
#include "db/store.h"

#define CONFIG_DEFAULT_TCP_URL "tcp://127.0.0.1:7433"
/* The data folder unless --data-dir names one or systemd sets $STATE_DIRECTORY. */
#define CONFIG_DEFAULT_DATA_DIR "./var/charter"
/* The integrity key's file in the data folder when neither --integrity-key nor
 * --no-integrity-key is given (config_default_key). */
#define CONFIG_DEFAULT_KEY_FILE "integrity.key"
#define CONFIG_DEFAULT_GRAPH "charter"
#define CONFIG_DEFAULT_MAX_MESSAGE ((size_t)4 * 1024 * 1024)
#define CONFIG_DEFAULT_TIMEOUT_MS 5000
#define CONFIG_MAX_TIMEOUT_MS 60000
#define CONFIG_DEFAULT_QUEUE 256
#define CONFIG_MAX_LISTEN 16
/* The HTTP listener's limits (--http-max-connections, --http-header-timeout,
 * --http-body-timeout, --http-idle-timeout): connections, then seconds. */
#define CONFIG_DEFAULT_HTTP_MAX_CONNECTIONS 512
#define CONFIG_DEFAULT_HTTP_HEADER_TIMEOUT_S 10
#define CONFIG_DEFAULT_HTTP_BODY_TIMEOUT_S 30
#define CONFIG_DEFAULT_HTTP_IDLE_TIMEOUT_S 30
/* --invocation-window when none is given: seven days, in seconds. */
#define CONFIG_DEFAULT_INVOCATION_WINDOW_S (7LL * 86400)
/* The longest --retention or --invocation-window: 3650 days, in seconds. */
#define CONFIG_MAX_DURATION_S (3650LL * 86400)

typedef struct {
    char *listen[CONFIG_MAX_LISTEN]; /* owned copies; the defaults when no --listen was given */
    size_t n_listen;
    bool listen_default;       /* no --listen: listen[] is filled by config_prepare_data_dir */
    unsigned workers;          /* worker threads (default 2 x online cores) */
    unsigned runners;          /* executor threads for scripted and live runs (default 2) */
    const char *redis_url;     /* --redis in canonical form (redis_url_buf), NULL: embedded */
    char *data_dir;            /* owned; absolute after config_prepare_data_dir */
    const char *graph;         /* --graph (borrowed) */
    const char *workflow;      /* --workflow path (borrowed), NULL: the embedded workflow */
    const char *integrity_key; /* --integrity-key path (borrowed), NULL: none given */
    bool no_integrity_key;     /* --no-integrity-key: keyless, no default key */
    bool adopt_integrity_key;  /* --adopt-integrity-key: a keyless graph adopts the key */
    const char *signing_key;   /* --signing-key path (borrowed), NULL: none */
    size_t max_message;        /* bytes of one encoded RpcRequest */
    int timeout_ms;            /* default per-call deadline, milliseconds */
    unsigned queue;            /* requests allowed to wait beyond the workers */
    bool quiet;
    bool log_json; /* --log-format json */
    bool verbose;
    const char *operator_token;        /* CHARTER_OPERATOR_TOKEN (borrowed from the environment) */
    const char *viewer_token;          /* CHARTER_VIEWER_TOKEN or NULL */
    const char *admin_token;           /* CHARTER_ADMIN_TOKEN or NULL: creates and lists tenants */
    char redis_url_buf[STORE_URL_MAX]; /* --redis as store_url_canonical wrote it */
    const char *http; /* --http HOST:PORT (borrowed) or NULL: no HTTP/JSON listener */
    /* --http-allow-host NAME (borrowed): one more Host the HTTP listener accepts, or NULL */
    const char *http_allow_host;
    const char *http_cert; /* --http-cert FILE (borrowed) or NULL: the HTTP port in cleartext */
    const char *http_key;  /* --http-key FILE (borrowed), given with http_cert */
    unsigned http_max_connections;  /* connections the HTTP listener holds open at once */
    unsigned http_header_timeout_s; /* a request's line and headers, seconds (0: no limit) */
    unsigned http_body_timeout_s;   /* its body once the headers are in, seconds (0: no limit) */
    unsigned http_idle_timeout_s;   /* no byte either way for this long closes, seconds */
    bool scripted_only;   /* --scripted-only: refuse live runs and grant controls (a shared demo) */
    unsigned durable_ack; /* --durable-ack: replicas a committed delivery waits for (0: none) */
    long long retention_s;         /* --retention: ended runs are archived this long after, seconds
                                    * (0: never) */
    long long invocation_window_s; /* --invocation-window: the compact record of an archived
                                    * run's invocation stays this long after, seconds (0:
                                    * forever) */
    const char *archive_dir;       /* --archive-dir (borrowed), NULL: <data folder>/archive */
} config;

enum {
    CONFIG_OK = 0,
    CONFIG_EXIT = 1,    /* --help or --version was printed: exit 0 */
    CONFIG_EUSAGE = -1, /* err holds "<what is wrong> (<how to fix>)" */
};

/* Parses argv and the token variables of the environment into cfg. Returns CONFIG_OK,
 * CONFIG_EXIT, or CONFIG_EUSAGE with a one-line reason in err (errlen bytes). Free with
 * config_free in every case. */
int config_parse(int argc, char **argv, config *cfg, char *err, size_t errlen);

/* Creates the data folder (mkdir -p; the folder itself mode 0700), makes cfg->data_dir
 * absolute and, when no --listen was given, fills the default listen URLs (the TCP default and
 * ipc://<data-dir>/charterd.sock). Returns 0 or -1 with a reason in err. */
int config_prepare_data_dir(config *cfg, char *err, size_t errlen);

/* True when the data folder is needed before the database is reached: embedded database or
 * default listen URLs. The default integrity key needs it too, but only once the graph's mode
 * says the key is used (main.c makes it then). */
bool config_needs_data_dir(const config *cfg);

/* True when the integrity key is the default one, <data folder>/CONFIG_DEFAULT_KEY_FILE:
 * neither --integrity-key nor --no-integrity-key was given. */
bool config_default_key(const config *cfg);

void config_free(config *cfg);

/* The limits of a parsed configuration: --max-message and --timeout-ms, the rest fixed. */
void config_limits_of(const config *cfg, service_limits *out);

/* The usage text printed by --help. */
void config_usage(void);

#endif
