/*
 * bench_daemons.c - the charterd processes charter-bench starts (or the one it is pointed at):
 * starting them on the temporary folder's ipc:// sockets and waiting for Health, the clients
 * that load them, their CPU time and memory from /proc, their logs, and stopping them.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* utime + stime of pid in clock ticks (/proc/<pid>/stat fields 14 and 15), or -1. */
long long read_cpu_ticks(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (p == NULL)
        return -1;
    unsigned long long ut = 0, st = 0;
    /* After ") ": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
     * utime(14) stime(15). */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (long long)(ut + st);
}

static bool executable(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

/* --charterd, else charterd next to this binary, else on PATH. */
static int find_charterd(bench *b)
{
    if (b->o.charterd != NULL) {
        if (!executable(b->o.charterd)) {
            say(b, "--charterd %s is not an executable file", b->o.charterd);
            return -1;
        }
        snprintf(b->charterd, sizeof b->charterd, "%s", b->o.charterd);
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash != NULL) {
            slash[1] = '\0';
            if (snprintf(b->charterd, sizeof b->charterd, "%scharterd", self) <
                    (int)sizeof b->charterd &&
                executable(b->charterd))
                return 0;
        }
    }
    const char *path = getenv("PATH");
    while (path != NULL && *path != '\0') {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && len < PATH_MAX - 16) {
            snprintf(b->charterd, sizeof b->charterd, "%.*s/charterd", (int)len, path);
            if (executable(b->charterd))
                return 0;
        }
        path = end ? end + 1 : NULL;
    }
    say(b, "cannot find charterd next to charter-bench or on PATH (pass --charterd PATH)");
    b->charterd[0] = '\0';
    return -1;
}

/* 48 hex characters from /dev/urandom. */
int make_token(char *out, size_t outlen)
{
    unsigned char raw[24];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, raw, sizeof raw);
    close(fd);
    if (n != (ssize_t)sizeof raw || outlen < 2 * sizeof raw + 1)
        return -1;
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

static int daemon_start(bench *b, unsigned i)
{
    bench_daemon *d = &b->daemons[i];
    char listen[PATH_MAX + 16], workers[16];
    snprintf(d->url, sizeof d->url, "ipc://%.3000s/d%u.sock", b->tmpdir, i);
    snprintf(listen, sizeof listen, "%s", d->url);
    snprintf(d->log, sizeof d->log, "%.3000s/d%u.log", b->tmpdir, i);
    snprintf(workers, sizeof workers, "%u", b->server_workers);
    int logfd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0) {
        say(b, "cannot create %s: %s", d->log, strerror(errno));
        return -1;
    }
    char *argv[] = {b->charterd,
                    "--redis",
                    (char *)b->o.redis_url,
                    "--graph",
                    b->graphs[b->o.tenants > 1 ? i : 0],
                    "--listen",
                    listen,
                    "--workers",
                    workers,
                    "--quiet",
                    /* keyless, as the figures in docs/measuring.md were taken, and no key
                     * file left in a data folder */
                    "--no-integrity-key",
                    NULL};
    pid_t pid = fork();
    if (pid < 0) {
        say(b, "cannot fork: %s", strerror(errno));
        close(logfd);
        return -1;
    }
    if (pid == 0) {
        /* The child: stop with the bench if it dies; logs go to the daemon's file. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        setpgid(0, 0); /* a Ctrl-C meant for the bench must not stop charterd mid-run */
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0 && dup2(devnull, STDIN_FILENO) >= 0 && devnull != STDIN_FILENO)
            close(devnull);
        dup2(logfd, STDOUT_FILENO);
        dup2(logfd, STDERR_FILENO);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execv(b->charterd, argv);
        dprintf(STDERR_FILENO, "charter-bench: cannot run %s: %s\n", b->charterd, strerror(errno));
        _exit(127);
    }
    close(logfd);
    d->pid = pid;
    d->running = true;
    return 0;
}

/* The first line of a daemon's log (why it did not start). */
static void daemon_log_head(const bench_daemon *d, char *out, size_t outlen)
{
    out[0] = '\0';
    FILE *f = fopen(d->log, "r");
    if (f == NULL)
        return;
    if (fgets(out, (int)outlen, f) != NULL)
        out[strcspn(out, "\n")] = '\0';
    fclose(f);
}

/* Waits until Health answers on daemon i, or it exits, or the startup time passes. */
static int daemon_wait_ready(bench *b, unsigned i)
{
    bench_daemon *d = &b->daemons[i];
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = 250;
    charter_client *c = NULL;
    if (charter_client_open(d->url, NULL, &o, &c) != 0) {
        say(b, "cannot open a client of %s", d->url);
        return -1;
    }
    double until = now_ms() + BENCH_STARTUP_MS;
    int rc = -1;
    while (now_ms() < until && !bench_interrupted) {
        int status = 0;
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            d->running = false;
            d->status = status;
            char head[400];
            daemon_log_head(d, head, sizeof head);
            say(b, "charterd %u exited during startup: %s", i, head[0] ? head : "(no output)");
            break;
        }
        Charter__V1__HealthResponse *h = NULL;
        charter_status st;
        if (charter_health(c, NULL, &h, &st) == 0) {
            bool serving = h->status != NULL && strcmp(h->status, "serving") == 0;
            if (i == 0 && h->workers > 0)
                b->server_workers = h->workers;
            charter__v1__health_response__free_unpacked(h, NULL);
            if (serving) {
                rc = 0;
                break;
            }
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (rc != 0 && d->running)
        say(b, "charterd %u did not answer Health within %.0f s (log: %s)", i,
            BENCH_STARTUP_MS / 1000, d->log);
    charter_client_close(c);
    return rc;
}

/* VmHWM and VmRSS of pid in KiB (-1 when unreadable). */
void read_rss(long pid, long *hwm, long *rss)
{
    char path[64], line[256];
    *hwm = -1;
    *rss = -1;
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0)
            *hwm = strtol(line + 6, NULL, 10);
        else if (strncmp(line, "VmRSS:", 6) == 0)
            *rss = strtol(line + 6, NULL, 10);
    }
    fclose(f);
}

/* SIGTERM, then wait (SIGKILL after BENCH_STOP_MS). */
static void daemon_stop(bench *b, unsigned i)
{
    bench_daemon *d = &b->daemons[i];
    if (!d->running)
        return;
    kill(d->pid, SIGTERM);
    double until = now_ms() + BENCH_STOP_MS;
    for (;;) {
        int status = 0;
        pid_t r = waitpid(d->pid, &status, WNOHANG);
        if (r == d->pid || (r < 0 && errno == ECHILD)) {
            d->status = status;
            break;
        }
        if (now_ms() > until) {
            say(b, "charterd %u did not stop within %.0f s of SIGTERM; killing it", i,
                BENCH_STOP_MS / 1000);
            kill(d->pid, SIGKILL);
            waitpid(d->pid, &status, 0);
            d->status = status;
            d->killed = true;
            break;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    d->running = false;
}

/* The message of a log line with every run of digits as one '#', so lines that differ only in
 * counts, ids or timings fall together. */
static void log_shape(const char *msg, char *out, size_t outlen)
{
    size_t n = 0;
    for (const char *p = msg; *p != '\0' && n + 1 < outlen; p++) {
        if (*p >= '0' && *p <= '9') {
            if (n == 0 || out[n - 1] != '#')
                out[n++] = '#';
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

/* Counts the lines every daemon logged (errors only: they run --quiet) and groups them by
 * message, without time stamps; the first line of each group is kept as its example. */
static void collect_logs(bench *b)
{
    char shapes[sizeof b->log_kinds / sizeof b->log_kinds[0]][300];
    for (unsigned i = 0; i < b->n_daemons; i++) {
        FILE *f = fopen(b->daemons[i].log, "r");
        if (f == NULL)
            continue;
        char line[1200], shape[300];
        while (fgets(line, sizeof line, f) != NULL) {
            line[strcspn(line, "\n")] = '\0';
            b->log_total++;
            const char *msg = strstr(line, "charterd: ");
            msg = msg ? msg + strlen("charterd: ") : line;
            log_shape(msg, shape, sizeof shape);
            size_t k = 0;
            while (k < b->n_log_kinds && strcmp(shapes[k], shape) != 0)
                k++;
            if (k < b->n_log_kinds) {
                b->log_kinds[k].count++;
            } else if (k < sizeof b->log_kinds / sizeof b->log_kinds[0]) {
                snprintf(shapes[k], sizeof shapes[k], "%s", shape);
                snprintf(b->log_kinds[k].text, sizeof b->log_kinds[k].text, "d%u %.180s", i, msg);
                b->log_kinds[k].count = 1;
                b->n_log_kinds++;
            } else {
                b->log_other++;
            }
        }
        fclose(f);
    }
}

/* The temporary folder of the daemons' sockets and logs and of the echo server's socket. */
int make_tmpdir(bench *b)
{
    snprintf(b->tmpdir, sizeof b->tmpdir, "/tmp/charter-bench.XXXXXX");
    if (mkdtemp(b->tmpdir) == NULL) {
        say(b, "cannot create a temporary folder: %s", strerror(errno));
        b->tmpdir[0] = '\0';
        return -1;
    }
    snprintf(b->echo_url, sizeof b->echo_url, "ipc://%.3000s/echo.sock", b->tmpdir);
    return 0;
}

void remove_tmpdir(bench *b)
{
    if (b->tmpdir[0] == '\0')
        return;
    for (unsigned i = 0; i < b->n_daemons; i++) {
        unlink(b->daemons[i].log);
        unlink(b->daemons[i].url + strlen("ipc://"));
    }
    unlink(b->echo_url + strlen("ipc://"));
    if (rmdir(b->tmpdir) != 0)
        say(b, "could not remove %s: %s", b->tmpdir, strerror(errno));
}

int open_clients(bench *b, const char *token)
{
    charter_options o;
    charter_options_init(&o);
    o.timeout_ms = b->o.timeout_ms;
    o.connect_timeout_ms = 5000;
    b->n_clients = b->o.url ? 1 : b->n_daemons;
    for (unsigned i = 0; i < b->n_clients; i++) {
        const char *url = b->o.url ? b->o.url : b->daemons[i].url;
        int rv = charter_client_open(url, token, &o, &b->clients[i]);
        if (rv != 0) {
            say(b, "cannot connect to %s: %s", url, charter_status_name(rv));
            return -1;
        }
    }
    o.timeout_ms = BENCH_VERIFY_TIMEOUT_MS;
    for (unsigned i = 0; i < b->o.tenants; i++) {
        const char *url = b->o.url ? b->o.url : b->daemons[i].url;
        int rv = charter_client_open(url, token, &o, &b->admins[i]);
        if (rv != 0) {
            say(b, "cannot connect to %s: %s", url, charter_status_name(rv));
            return -1;
        }
    }
    b->admin = b->admins[0];
    return 0;
}

/* --url: Health tells the graph and the worker count. */
int probe_url(bench *b)
{
    Charter__V1__HealthResponse *h = NULL;
    charter_status st;
    int rv = charter_health(b->admin, NULL, &h, &st);
    if (rv != 0) {
        say(b, "Health of %s failed: %s: %s", b->o.url, charter_status_name(rv), st.message);
        return -1;
    }
    snprintf(b->graph, sizeof b->graph, "%s", h->graph ? h->graph : "?");
    b->server_workers = h->workers;
    charter__v1__health_response__free_unpacked(h, NULL);
    return 0;
}

/* Starts the daemons: the graph must be empty first, since it is deleted afterwards. */
int start_daemons(bench *b)
{
    char err[300];
    for (unsigned g = 0; g < b->o.tenants; g++) {
        redisContext *rc = redis_open_graph(b->o.redis_url, b->graphs[g], err, sizeof err);
        if (rc == NULL) {
            say(b, "%s", err);
            return -1;
        }
        unsigned long long found = 0;
        int r = redis_graph_keys(rc, b->graphs[g], false, true, &found, err, sizeof err);
        redisFree(rc);
        if (r != 0) {
            say(b, "cannot scan graph %s: %s", b->graphs[g], err);
            return -1;
        }
        if (found > 0) {
            say(b, "graph %s already holds data in %s; refusing to load it (pick another --graph)",
                b->graphs[g], b->o.redis_url);
            return -1;
        }
    }
    if (find_charterd(b) != 0)
        return -1;
    for (unsigned i = 0; i < b->o.daemons; i++) {
        if (daemon_start(b, i) != 0)
            return -1;
        b->n_daemons = i + 1;
    }
    for (unsigned i = 0; i < b->n_daemons; i++)
        if (daemon_wait_ready(b, i) != 0)
            return -1;
    return 0;
}

void delete_graph(bench *b)
{
    char err[300];
    for (unsigned g = 0; g < b->o.tenants; g++) {
        redisContext *rc = redis_open_graph(b->o.redis_url, b->graphs[g], err, sizeof err);
        if (rc == NULL) {
            say(b, "graph %s not deleted: %s", b->graphs[g], err);
            continue;
        }
        unsigned long long n = 0;
        if (redis_graph_keys(rc, b->graphs[g], true, false, &n, err, sizeof err) != 0)
            say(b, "graph %s not fully deleted: %s", b->graphs[g], err);
        else if (!b->o.json)
            say(b, "deleted %llu keys of graph %s", n, b->graphs[g]);
        redisFree(rc);
    }
}

void close_clients(bench *b)
{
    for (unsigned i = 0; i < BENCH_MAX_DAEMONS; i++)
        if (b->clients[i] != NULL) {
            charter_client_close(b->clients[i]);
            b->clients[i] = NULL;
        }
    for (unsigned i = 0; i < BENCH_MAX_DAEMONS; i++)
        if (b->admins[i] != NULL) {
            charter_client_close(b->admins[i]);
            b->admins[i] = NULL;
        }
    b->admin = NULL;
}

/* Says how daemon i ended when that was not a clean exit; after a measurement that is a FAIL. */
static void daemon_report_end(bench *b, unsigned i, bool measured)
{
    const bench_daemon *d = &b->daemons[i];
    if (!d->killed && WIFEXITED(d->status) && WEXITSTATUS(d->status) == 0)
        return;
    if (WIFSIGNALED(d->status))
        say(b, "charterd %u (pid %ld) ended by signal %d", i, (long)d->pid, WTERMSIG(d->status));
    else if (WIFEXITED(d->status))
        say(b, "charterd %u (pid %ld) exited with status %d", i, (long)d->pid,
            WEXITSTATUS(d->status));
    if (measured)
        check_add(b, false, "charterd stopped cleanly on SIGTERM", "charterd %u: %s %d", i,
                  WIFSIGNALED(d->status) ? "signal" : "exit status",
                  WIFSIGNALED(d->status) ? WTERMSIG(d->status) : WEXITSTATUS(d->status));
}

/* SIGTERM to every daemon started, then waits for each, and gathers their logs. */
void stop_daemons(bench *b, bool measured)
{
    if (b->o.url != NULL)
        return;
    for (unsigned i = 0; i < b->n_daemons; i++)
        if (b->daemons[i].running)
            kill(b->daemons[i].pid, SIGTERM);
    for (unsigned i = 0; i < b->n_daemons; i++)
        daemon_stop(b, i);
    for (unsigned i = 0; i < b->n_daemons; i++)
        daemon_report_end(b, i, measured);
    collect_logs(b);
}
