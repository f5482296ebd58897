/*
 * config.c - parsing and checking charterd's options and token variables (see config.h).
 *
 * Options are parsed by hand rather than with getopt so that every mistake is reported as the
 * single "<what is wrong> (<how to fix>)" line charterd promises, never as getopt's own text.
 */
#include "main/config.h"
#include "core/hostport.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "rpc/auth.h"
#include "core/status.h"
#include "db/store.h"

static void config_usage_http(void)
{
    printf(
        "  --http HOST:PORT    also serve every method as HTTP/JSON (Connect unary) and as gRPC\n"
        "                      (HTTP/2) on HOST:PORT (PORT alone: 127.0.0.1:PORT; port 0: one\n"
        "                      the system picks, logged at start unless --quiet); see\n"
        "                      docs/http.md and docs/grpc.md\n"
        "  --http-allow-host NAME\n"
        "                      accept this Host name too (default: loopback names only)\n"
        "  --http-cert FILE    serve the HTTP port over TLS with this PEM certificate chain:\n"
        "                      HTTP/1.1 by ALPN when offered, else gRPC over HTTP/2 (default:\n"
        "                      cleartext)\n"
        "  --http-key FILE     the PEM private key of --http-cert (mode 0600)\n"
        "  --http-max-connections N\n"
        "                      HTTP connections open at once, 1 to 1000000; more wait in the\n"
        "                      listen backlog (default 512; lowered at start, with a log line,\n"
        "                      when the open file limit cannot hold them besides 256 kept for\n"
        "                      NNG and the database)\n"
        "  --http-header-timeout S\n"
        "                      seconds for a request's line and headers, from the connection's\n"
        "                      opening or the previous answer (default 10; 0: no limit)\n"
        "  --http-body-timeout S\n"
        "                      seconds for a request's body once its headers are in (default\n"
        "                      30; 0: no limit)\n"
        "  --http-idle-timeout S\n"
        "                      seconds without a byte either way closes a connection (default\n"
        "                      30; 0: no limit)\n");
}

static void config_usage_tail(void);

void config_usage(void)
{
    printf(
        "usage: charterd [options]\n"
        "\n"
        "Serves charter.v1 (protobuf over NNG req/rep) from a Redis graph.\n"
        "\n"
        "  --listen URL        listen on URL (tcp://host:port or ipc:///path; port 0: one the\n"
        "                      system picks, logged at start unless --quiet); repeatable\n"
        "                      (default " CONFIG_DEFAULT_TCP_URL
        " and ipc://<data-dir>/charterd.sock)\n"
        "  --workers N         worker threads (default 2 x online cores)\n"
        "  --runners N         executor threads for scripted and live runs, 0 to 64 (default 2;\n"
        "                      0: this charterd only serves calls, others execute its runs)\n"
        "  --redis URL         use the Redis at unix:///path or redis://host:port (also\n"
        "                      tcp://host:port, unix:/path, redis+unix:///path), or the Redis\n"
        "                      Cluster at cluster://host:port[,host:port...]\n"
        "                      (default: start an embedded redis-server in the data folder)\n"
        "  --retention DURATION\n"
        "                      archive ended runs this long after they end (a whole number\n"
        "                      and s, m, h or d: 30d, 12h, 90m, 45s) and remove them from the\n"
        "                      database (default off; 0 or off: never)\n"
        "  --invocation-window DURATION\n"
        "                      keep the compact record of each invocation of an archived run\n"
        "                      this long after its run is archived, so a retry is answered from\n"
        "                      the database (default 7d; 0 or forever: keep them forever);\n"
        "                      after it, the archive answers\n"
        "  --archive-dir DIR   archive folder (default <data-dir>/archive)\n"
        "  --durable-ack N     a committed delivery waits for N replicas (WAIT) within its\n"
        "                      deadline; fewer: the answer says not yet durable (default 0)\n"
        "  --data-dir DIR      data folder, mode 0700 (default $STATE_DIRECTORY when systemd\n"
        "                      sets it, else " CONFIG_DEFAULT_DATA_DIR ")\n"
        "  --graph NAME        graph name, 1-64 of [A-Za-z0-9_.-] (default " CONFIG_DEFAULT_GRAPH
        ")\n"
        "  --workflow FILE     workflow definition (default: the built-in procurement workflow)\n"
        "  --integrity-key FILE\n"
        "                      secret of at least 32 bytes, mode 0600, owned by this user: seals\n"
        "                      events with HMAC-SHA256 and signs receipts; a graph keeps the mode\n"
        "                      (keyed or not) and the key it was first started with (default:\n"
        "                      <data-dir>/integrity.key, made at a new graph's first start)\n"
        "  --no-integrity-key  serve a new graph keyless (no receipts), or a keyless one as it is\n"
        "  --adopt-integrity-key\n"
        "                      seal a keyless graph's events with the integrity key from now on;\n"
        "                      its earlier events stay verifiable as plain SHA-256\n"
        "  --signing-key FILE  Ed25519 private key (PEM, mode 0600, owned by this user; make one\n"
        "                      with: openssl genpkey -algorithm ed25519 -out FILE): also signs\n"
        "                      every receipt, so anyone with the public key (charter receipt-key)\n"
        "                      can verify it offline; needs an integrity key\n"
        "  --max-message BYTES largest request accepted (default 4194304)\n"
        "  --timeout-ms MS     default per-call deadline (default 5000, at most 60000)\n"
        "  --queue N           requests allowed to wait beyond the workers before callers get\n"
        "                      RESOURCE_EXHAUSTED (default 256)\n");
    config_usage_http();
    config_usage_tail();
}

/* The flags and the environment of the usage text. */
static void config_usage_tail(void)
{
    printf(
        "  --scripted-only     refuse live runs and revoking or restoring grants (a shared demo)\n"
        "  --quiet             log errors only\n"
        "  --verbose           also log every successful call\n"
        "  --log-format FMT    text (default) or json: one JSON object per line\n"
        "  --help, --version\n"
        "\n"
        "Environment:\n"
        "  CHARTER_OPERATOR_TOKEN  required, at least 24 characters: full control\n"
        "  CHARTER_VIEWER_TOKEN    optional, at least 24 characters: read-only, redacted\n"
        "  CHARTER_ADMIN_TOKEN     optional, at least 24 characters: creates and lists tenants\n"
        "  CHARTER_OPENAI_BASE_URL, CHARTER_OPENAI_API_KEY, CHARTER_OPENAI_MODEL\n"
        "                          all three, or none: the OpenAI-compatible provider of live "
        "runs\n"
        "  CHARTER_GEMINI_API_KEY, CHARTER_GEMINI_MODEL [, CHARTER_GEMINI_BASE_URL]\n"
        "                          both, or neither: the Gemini provider of live runs\n"
        "  CHARTER_PROVIDERS       fallback order, e.g. openai,gemini (default: every configured\n"
        "                          provider, openai first; docs/models.md)\n"
        "  CHARTER_MODEL_TIMEOUT_MS  per model request (default 30000)\n");
}

static int config_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int config_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return CONFIG_EUSAGE;
}

/* Unsigned decimal in [min, max]; 0 on success. */
static int config_number(const char *s, unsigned long long min, unsigned long long max,
                         unsigned long long *out)
{
    if (s == NULL || *s < '0' || *s > '9') {
        return -1;
    }
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

static bool config_graph_ok(const char *g)
{
    size_t n = strlen(g);
    /* "." and ".." name folders, not graphs: the archive folder holds one per graph. */
    if (n == 0 || n > 64 || strcmp(g, ".") == 0 || strcmp(g, "..") == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = g[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
        if (!ok) {
            return false;
        }
    }
    return true;
}

static bool config_listen_ok(const char *url)
{
    static const char *const schemes[] = {"tcp://", "tcp4://", "tcp6://", "ipc://"};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t n = strlen(schemes[i]);
        if (strncmp(url, schemes[i], n) == 0 && url[n] != '\0') {
            return true;
        }
    }
    return false;
}

static unsigned config_default_workers(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) {
        cores = 1;
    }
    if (cores > 256) {
        cores = 256;
    }
    return (unsigned)(2 * cores);
}

/* True when arg is option name, as "--name=value" or "--name value" (then the value is argv's
 * next entry and *i moves past it); *value is NULL when the value is missing. */
static bool config_match(const char *arg, const char *name, int *i, int argc, char **argv,
                         const char **value)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0) {
        return false;
    }
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return true;
    }
    if (arg[n] != '\0') {
        return false;
    }
    *value = (*i + 1 < argc) ? argv[++*i] : NULL;
    return true;
}

/* True when arg is one of the --http-*-timeout options; its value (seconds, 0 to 86400) is
 * stored in cfg, or *n is ULLONG_MAX when it is missing or out of range. */
static bool config_http_timeout(const char *arg, int *i, int argc, char **argv, config *cfg,
                                const char **v, unsigned long long *n)
{
    static const struct {
        const char *name;
        size_t field;
    } opts[] = {{"--http-header-timeout", offsetof(config, http_header_timeout_s)},
                {"--http-body-timeout", offsetof(config, http_body_timeout_s)},
                {"--http-idle-timeout", offsetof(config, http_idle_timeout_s)}};
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        if (config_match(arg, opts[k].name, i, argc, argv, v)) {
            if (config_number(*v, 0, 86400, n) != 0) {
                *n = ULLONG_MAX;
            } else {
                *(unsigned *)((char *)cfg + opts[k].field) = (unsigned)*n;
            }
            return true;
        }
    }
    return false;
}

/* True when arg is --http-allow-host, --http-cert or --http-key; its value is stored in cfg,
 * or *v is NULL when it is missing or not a value of the option (config_http_names_help says
 * what one is). */
static bool config_http_names(const char *arg, int *i, int argc, char **argv, config *cfg,
                              const char **v)
{
    if (config_match(arg, "--http-allow-host", i, argc, argv, v)) {
        if (*v == NULL || (*v)[0] == '\0' || strlen(*v) > 200 || strpbrk(*v, " /:@") != NULL) {
            *v = NULL;
        }
        cfg->http_allow_host = *v;
        return true;
    }
    const char **file = config_match(arg, "--http-cert", i, argc, argv, v)  ? &cfg->http_cert
                        : config_match(arg, "--http-key", i, argc, argv, v) ? &cfg->http_key
                                                                            : NULL;
    if (file == NULL) {
        return false;
    }
    if (*v != NULL && (*v)[0] == '\0') {
        *v = NULL;
    }
    *file = *v;
    return true;
}

static const char *config_http_names_help(const char *arg)
{
    return strncmp(arg, "--http-allow-host", 17) == 0
               ? "--http-allow-host needs a host name (e.g. --http-allow-host charter.internal)"
           : strncmp(arg, "--http-cert", 11) == 0
               ? "--http-cert needs a PEM certificate file (e.g. --http-cert /etc/charter/tls.crt)"
               : "--http-key needs a PEM private key file (e.g. --http-key /etc/charter/tls.key)";
}

static int config_tokens(config *cfg, char *err, size_t errlen)
{
    const char *op = getenv("CHARTER_OPERATOR_TOKEN");
    const char *viewer = getenv("CHARTER_VIEWER_TOKEN");
    if (op == NULL || op[0] == '\0') {
        return config_fail(err, errlen,
                           "CHARTER_OPERATOR_TOKEN is not set (export CHARTER_OPERATOR_TOKEN "
                           "with at least 24 random characters, e.g. $(openssl rand -hex 24))");
    }
    if (strlen(op) < AUTH_MIN_TOKEN_LEN) {
        return config_fail(err, errlen,
                           "CHARTER_OPERATOR_TOKEN is shorter than 24 characters (use at least "
                           "24 random characters, e.g. $(openssl rand -hex 24))");
    }
    if (viewer != NULL && viewer[0] == '\0') {
        viewer = NULL;
    }
    if (viewer != NULL && strlen(viewer) < AUTH_MIN_TOKEN_LEN) {
        return config_fail(err, errlen,
                           "CHARTER_VIEWER_TOKEN is shorter than 24 characters (use at least 24 "
                           "random characters, or unset it)");
    }
    if (viewer != NULL && strcmp(viewer, op) == 0) {
        return config_fail(err, errlen,
                           "CHARTER_VIEWER_TOKEN equals CHARTER_OPERATOR_TOKEN (give the viewer "
                           "its own token, or unset it)");
    }
    const char *admin = getenv("CHARTER_ADMIN_TOKEN");
    if (admin != NULL && admin[0] == '\0') {
        admin = NULL;
    }
    if (admin != NULL && strlen(admin) < AUTH_MIN_TOKEN_LEN) {
        return config_fail(err, errlen,
                           "CHARTER_ADMIN_TOKEN is shorter than 24 characters (use at least 24 "
                           "random characters, or unset it)");
    }
    if (admin != NULL &&
        (strcmp(admin, op) == 0 || (viewer != NULL && strcmp(admin, viewer) == 0))) {
        return config_fail(err, errlen,
                           "CHARTER_ADMIN_TOKEN equals another token (give the admin its own "
                           "token, or unset it)");
    }
    cfg->operator_token = op;
    cfg->viewer_token = viewer;
    cfg->admin_token = admin;
    return CONFIG_OK;
}

/* True when arg is one of the options that take no value; it is recorded in cfg. */
static bool config_flag(const char *arg, config *cfg)
{
    static const struct {
        const char *name;
        size_t field;
    } flags[] = {{"--scripted-only", offsetof(config, scripted_only)},
                 {"--quiet", offsetof(config, quiet)},
                 {"--verbose", offsetof(config, verbose)},
                 {"--no-integrity-key", offsetof(config, no_integrity_key)},
                 {"--adopt-integrity-key", offsetof(config, adopt_integrity_key)}};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        if (strcmp(arg, flags[k].name) == 0) {
            *(bool *)((char *)cfg + flags[k].field) = true;
            return true;
        }
    }
    return false;
}

/* A duration in the forms docs/operator.md gives and no others: a whole number of ASCII
 * digits and one unit, s, m, h or d ("30d", "12h"; at most CONFIG_MAX_DURATION_S), or "0" or
 * "off" for none. Zero in any unit ("0s") is none too, as "0" is. The digits are read here, not
 * by strtoll, which takes a leading sign and white space ("+5s", " 5s"). In seconds into *out.
 * Returns 0 or -1. */
static int config_duration(const char *v, long long *out)
{
    if (v == NULL)
        return -1;
    if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0) {
        *out = 0;
        return 0;
    }
    size_t digits = strspn(v, "0123456789");
    if (digits == 0 || v[digits] == '\0' || v[digits + 1] != '\0')
        return -1;
    long long unit = v[digits] == 's'   ? 1
                     : v[digits] == 'm' ? 60
                     : v[digits] == 'h' ? 3600
                     : v[digits] == 'd' ? 86400
                                        : 0;
    if (unit == 0)
        return -1;
    long long n = 0;
    for (size_t k = 0; k < digits; k++) {
        n = n * 10 + (v[k] - '0');
        if (n > CONFIG_MAX_DURATION_S / unit)
            return -1;
    }
    *out = n * unit;
    return 0;
}

/* The options config_parse hands on: --queue, --retention, --invocation-window, --archive-dir.
 * Returns 1 when arg was one of them (recorded in cfg), 0 when it is none, CONFIG_EUSAGE with
 * err set. */
static int config_more(const char *arg, int *i, int argc, char **argv, config *cfg, char *err,
                       size_t errlen)
{
    const char *v = NULL;
    unsigned long long n = 0;
    if (config_match(arg, "--queue", i, argc, argv, &v)) {
        if (config_number(v, 0, 65536, &n) != 0)
            return config_fail(err, errlen,
                               "--queue needs a number from 0 to 65536, got \"%s\" (e.g. "
                               "--queue 256)",
                               v ? v : "");
        cfg->queue = (unsigned)n;
    } else if (config_match(arg, "--retention", i, argc, argv, &v)) {
        if (config_duration(v, &cfg->retention_s) != 0)
            return config_fail(err, errlen,
                               "--retention needs a duration: a whole number and s, m, h or d "
                               "(30d, 12h, 90m, 45s; at most 3650d), or 0 or off, got \"%s\"",
                               v ? v : "");
    } else if (config_match(arg, "--invocation-window", i, argc, argv, &v)) {
        if (v != NULL && strcmp(v, "forever") == 0)
            cfg->invocation_window_s = 0;
        else if (config_duration(v, &cfg->invocation_window_s) != 0)
            return config_fail(err, errlen,
                               "--invocation-window needs a duration: a whole number and s, m, h "
                               "or d (7d, 12h, 90m, 45s; at most 3650d), or 0, off or forever "
                               "(keep the records forever), got \"%s\"",
                               v ? v : "");
    } else if (config_match(arg, "--archive-dir", i, argc, argv, &v)) {
        if (v == NULL || v[0] == '\0')
            return config_fail(err, errlen, "--archive-dir needs a folder");
        cfg->archive_dir = v;
    } else {
        return 0;
    }
    return 1;
}

/* After the options: the key options that exclude each other, the data folder (--data-dir,
 * else systemd's $STATE_DIRECTORY, else the default), the listen default and the tokens. */
static int config_finish(config *cfg, const char *data_dir, char *err, size_t errlen)
{
    if ((cfg->http_cert == NULL) != (cfg->http_key == NULL)) {
        return config_fail(err, errlen, "--http-cert and --http-key go together (give both)");
    }
    if (cfg->no_integrity_key && cfg->integrity_key != NULL) {
        return config_fail(err, errlen,
                           "--no-integrity-key and --integrity-key exclude each other (give one)");
    }
    if (cfg->no_integrity_key && cfg->adopt_integrity_key) {
        return config_fail(err, errlen,
                           "--adopt-integrity-key needs an integrity key (drop "
                           "--no-integrity-key)");
    }
    if (cfg->no_integrity_key && cfg->signing_key != NULL) {
        return config_fail(err, errlen,
                           "--signing-key needs an integrity key: receipts are signed in addition "
                           "to their HMAC (drop --no-integrity-key)");
    }
    /* systemd's StateDirectory= names one folder, or several separated by ':' (the first). */
    const char *state = getenv("STATE_DIRECTORY");
    if (data_dir == NULL && state != NULL && state[0] != '\0' && state[0] != ':') {
        cfg->data_dir = strndup(state, strcspn(state, ":"));
    } else {
        cfg->data_dir = strdup(data_dir != NULL ? data_dir : CONFIG_DEFAULT_DATA_DIR);
    }
    if (cfg->data_dir == NULL) {
        return config_fail(err, errlen, "out of memory (free some memory)");
    }
    cfg->listen_default = (cfg->n_listen == 0);
    return config_tokens(cfg, err, errlen);
}

int config_parse(int argc, char **argv, config *cfg, char *err, size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->workers = config_default_workers();
    cfg->runners = 2;
    cfg->graph = CONFIG_DEFAULT_GRAPH;
    cfg->max_message = CONFIG_DEFAULT_MAX_MESSAGE;
    cfg->timeout_ms = CONFIG_DEFAULT_TIMEOUT_MS;
    cfg->queue = CONFIG_DEFAULT_QUEUE;
    cfg->invocation_window_s = CONFIG_DEFAULT_INVOCATION_WINDOW_S;
    cfg->http_max_connections = CONFIG_DEFAULT_HTTP_MAX_CONNECTIONS;
    cfg->http_header_timeout_s = CONFIG_DEFAULT_HTTP_HEADER_TIMEOUT_S;
    cfg->http_body_timeout_s = CONFIG_DEFAULT_HTTP_BODY_TIMEOUT_S;
    cfg->http_idle_timeout_s = CONFIG_DEFAULT_HTTP_IDLE_TIMEOUT_S;
    const char *data_dir = NULL; /* --data-dir */

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *v = NULL;
        unsigned long long n = 0;
        int more = 0;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            config_usage();
            return CONFIG_EXIT;
        } else if (strcmp(arg, "--version") == 0) {
            printf("charterd %s\n", CHARTER_VERSION);
            return CONFIG_EXIT;
        } else if (config_flag(arg, cfg)) {
            continue;
        } else if (config_match(arg, "--log-format", &i, argc, argv, &v)) {
            if (v == NULL || (strcmp(v, "text") != 0 && strcmp(v, "json") != 0)) {
                return config_fail(err, errlen, "--log-format needs text or json, got \"%s\"",
                                   v ? v : "");
            }
            cfg->log_json = strcmp(v, "json") == 0;
        } else if (config_match(arg, "--listen", &i, argc, argv, &v)) {
            if (v == NULL || !config_listen_ok(v)) {
                return config_fail(err, errlen,
                                   "--listen needs a URL, got \"%s\" (use tcp://host:port or "
                                   "ipc:///path/to/socket)",
                                   v ? v : "");
            }
            if (cfg->n_listen == CONFIG_MAX_LISTEN) {
                return config_fail(err, errlen, "too many --listen options (at most 16)");
            }
            if ((cfg->listen[cfg->n_listen] = strdup(v)) == NULL) {
                return config_fail(err, errlen, "out of memory (free some memory)");
            }
            cfg->n_listen++;
        } else if (config_match(arg, "--http", &i, argc, argv, &v)) {
            char hp[300];
            if (v == NULL || hostport_parse(v, hp, sizeof hp) != 0) {
                return config_fail(err, errlen,
                                   "--http needs HOST:PORT or PORT, got \"%s\" (e.g. --http "
                                   "127.0.0.1:8080)",
                                   v ? v : "");
            }
            cfg->http = v;
        } else if (config_http_names(arg, &i, argc, argv, cfg, &v)) {
            if (v == NULL) {
                return config_fail(err, errlen, "%s", config_http_names_help(arg));
            }
        } else if (config_match(arg, "--http-max-connections", &i, argc, argv, &v)) {
            if (config_number(v, 1, 1000000, &n) != 0) {
                return config_fail(err, errlen,
                                   "--http-max-connections needs a number from 1 to 1000000, got "
                                   "\"%s\" (e.g. --http-max-connections 512)",
                                   v ? v : "");
            }
            cfg->http_max_connections = (unsigned)n;
        } else if (config_http_timeout(arg, &i, argc, argv, cfg, &v, &n)) {
            if (n == ULLONG_MAX) {
                return config_fail(
                    err, errlen, "%.*s needs seconds from 0 to 86400, got \"%s\" (e.g. %.*s 30)",
                    (int)strcspn(arg, "="), arg, v ? v : "", (int)strcspn(arg, "="), arg);
            }
        } else if (config_match(arg, "--workers", &i, argc, argv, &v)) {
            if (config_number(v, 1, 1024, &n) != 0) {
                return config_fail(err, errlen,
                                   "--workers needs a number from 1 to 1024, got \"%s\" (e.g. "
                                   "--workers 8)",
                                   v ? v : "");
            }
            cfg->workers = (unsigned)n;
        } else if (config_match(arg, "--runners", &i, argc, argv, &v)) {
            if (config_number(v, 0, 64, &n) != 0) {
                return config_fail(err, errlen,
                                   "--runners needs a number from 0 to 64, got \"%s\" (e.g. "
                                   "--runners 4)",
                                   v ? v : "");
            }
            cfg->runners = (unsigned)n;
        } else if (config_match(arg, "--redis", &i, argc, argv, &v)) {
            if (v == NULL || store_url_canonical(v, cfg->redis_url_buf,
                                                 sizeof cfg->redis_url_buf) != STATUS_OK) {
                return config_fail(err, errlen,
                                   "--redis needs a URL, got \"%s\" (use unix:///path/redis.sock "
                                   "or redis://host:port; no credentials, database 0)",
                                   v ? v : "");
            }
            cfg->redis_url = cfg->redis_url_buf;
        } else if (config_match(arg, "--data-dir", &i, argc, argv, &v)) {
            if (v == NULL || v[0] == '\0') {
                return config_fail(err, errlen,
                                   "--data-dir needs a folder (e.g. --data-dir "
                                   "/var/lib/charter)");
            }
            data_dir = v;
        } else if (config_match(arg, "--graph", &i, argc, argv, &v)) {
            if (v == NULL || !config_graph_ok(v)) {
                return config_fail(err, errlen,
                                   "--graph needs a name, got \"%s\" (use 1 to 64 characters of "
                                   "[A-Za-z0-9_.-], not . or ..)",
                                   v ? v : "");
            }
            cfg->graph = v;
        } else if (config_match(arg, "--workflow", &i, argc, argv, &v)) {
            if (v == NULL || v[0] == '\0') {
                return config_fail(err, errlen,
                                   "--workflow needs a file (e.g. --workflow "
                                   "deploy/workflows/procurement.json)");
            }
            cfg->workflow = v;
        } else if (config_match(arg, "--integrity-key", &i, argc, argv, &v)) {
            if (v == NULL || v[0] == '\0') {
                return config_fail(err, errlen,
                                   "--integrity-key needs a file (make one with: openssl rand "
                                   "-hex 32 > FILE; chmod 600 FILE)");
            }
            cfg->integrity_key = v;
        } else if (config_match(arg, "--signing-key", &i, argc, argv, &v)) {
            if (v == NULL || v[0] == '\0') {
                return config_fail(err, errlen,
                                   "--signing-key needs a file (make one with: openssl genpkey "
                                   "-algorithm ed25519 -out FILE; chmod 600 FILE)");
            }
            cfg->signing_key = v;
        } else if (config_match(arg, "--max-message", &i, argc, argv, &v)) {
            if (config_number(v, 1024, (unsigned long long)1 << 30, &n) != 0) {
                return config_fail(err, errlen,
                                   "--max-message needs a byte count from 1024 to 1073741824, got "
                                   "\"%s\" (e.g. --max-message 4194304)",
                                   v ? v : "");
            }
            cfg->max_message = (size_t)n;
        } else if (config_match(arg, "--timeout-ms", &i, argc, argv, &v)) {
            if (config_number(v, 1, CONFIG_MAX_TIMEOUT_MS, &n) != 0) {
                return config_fail(err, errlen,
                                   "--timeout-ms needs milliseconds from 1 to 60000, got \"%s\" "
                                   "(e.g. --timeout-ms 5000)",
                                   v ? v : "");
            }
            cfg->timeout_ms = (int)n;
        } else if (config_match(arg, "--durable-ack", &i, argc, argv, &v)) {
            if (config_number(v, 0, 16, &n) != 0) {
                return config_fail(err, errlen,
                                   "--durable-ack needs a replica count from 0 to 16, got \"%s\" "
                                   "(e.g. --durable-ack 1)",
                                   v ? v : "");
            }
            cfg->durable_ack = (unsigned)n;
        } else if ((more = config_more(arg, &i, argc, argv, cfg, err, errlen)) != 0) {
            if (more < 0)
                return CONFIG_EUSAGE;
        } else {
            return config_fail(err, errlen, "unknown option \"%s\" (see charterd --help)", arg);
        }
    }
    return config_finish(cfg, data_dir, err, errlen);
}

bool config_needs_data_dir(const config *cfg)
{
    return cfg->redis_url == NULL || cfg->listen_default;
}

bool config_default_key(const config *cfg)
{
    return cfg->integrity_key == NULL && !cfg->no_integrity_key;
}

/* mkdir -p: parents with the umask's mode, the last component 0700. */
static int config_mkdirs(const char *path, char *err, size_t errlen)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof buf) {
        return config_fail(err, errlen, "--data-dir %s is too long (use a shorter path)", path);
    }
    memcpy(buf, path, n + 1);
    while (n > 1 && buf[n - 1] == '/') {
        buf[--n] = '\0';
    }
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') {
            continue;
        }
        char saved = buf[i];
        buf[i] = '\0';
        bool last = (saved == '\0');
        if (mkdir(buf, last ? 0700 : 0755) != 0 && errno != EEXIST) {
            char msg[PATH_MAX + 64];
            snprintf(msg, sizeof msg, "%s: %s", buf, strerror(errno));
            return config_fail(err, errlen,
                               "cannot create the data folder %s (check the permissions of its "
                               "parent, or pass --data-dir)",
                               msg);
        }
        buf[i] = saved;
    }
    struct stat sb;
    if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        return config_fail(err, errlen,
                           "the data folder %s is not a folder (remove it, or pass another "
                           "--data-dir)",
                           buf);
    }
    if ((sb.st_mode & 0777) != 0700 && chmod(buf, 0700) != 0) {
        return config_fail(err, errlen,
                           "cannot make the data folder %s mode 0700 (chown it to this user, or "
                           "pass another --data-dir)",
                           buf);
    }
    return 0;
}

int config_prepare_data_dir(config *cfg, char *err, size_t errlen)
{
    if (config_mkdirs(cfg->data_dir, err, errlen) != 0) {
        return -1;
    }
    char *abs = realpath(cfg->data_dir, NULL);
    if (abs == NULL) {
        return config_fail(err, errlen,
                           "cannot resolve the data folder %s (check it exists and is readable)",
                           cfg->data_dir);
    }
    free(cfg->data_dir);
    cfg->data_dir = abs;
    /* sun_path holds the socket names in this folder: redis.sock and charterd.sock. */
    if (strlen(abs) + sizeof "/charterd.sock" > sizeof(((struct sockaddr_un *)0)->sun_path)) {
        return config_fail(err, errlen,
                           "the data folder path %s is too long for a unix socket (use a "
                           "shorter --data-dir)",
                           abs);
    }
    if (cfg->listen_default && cfg->n_listen == 0) {
        size_t len = strlen(abs) + sizeof "ipc:///charterd.sock";
        char *ipc = malloc(len);
        char *tcp = strdup(CONFIG_DEFAULT_TCP_URL);
        if (ipc == NULL || tcp == NULL) {
            free(ipc);
            free(tcp);
            return config_fail(err, errlen, "out of memory (free some memory)");
        }
        snprintf(ipc, len, "ipc://%s/charterd.sock", abs);
        cfg->listen[cfg->n_listen++] = tcp;
        cfg->listen[cfg->n_listen++] = ipc;
    }
    return 0;
}

void config_free(config *cfg)
{
    for (size_t i = 0; i < cfg->n_listen; i++) {
        free(cfg->listen[i]);
        cfg->listen[i] = NULL;
    }
    cfg->n_listen = 0;
    free(cfg->data_dir);
    cfg->data_dir = NULL;
}

void config_limits_of(const config *cfg, service_limits *out)
{
    out->max_message = cfg->max_message;
    out->max_ancestry = 10000;
    out->max_ids = 1000;
    out->max_content = (size_t)1024 * 1024;
    out->default_timeout_ms = cfg->timeout_ms;
    out->max_timeout_ms = CONFIG_MAX_TIMEOUT_MS;
    out->durable_ack = (int)cfg->durable_ack;
}
