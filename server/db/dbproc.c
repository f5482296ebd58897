/*
 * dbproc.c - start, watch and stop the embedded redis-server (see dbproc.h).
 *
 * fork/exec rather than posix_spawn because the child must ask for a parent-death signal
 * (prctl) before exec. Between fork and exec the child only makes async-signal-safe calls:
 * charterd may already hold library locks in other threads.
 */
#include "db/dbproc.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/invariant.h"

/* Where Debian's redis-redisearch package installs the module (dpkg -L redis-redisearch). */
#define DBPROC_REDISEARCH "/usr/lib/redis/modules/redisearch.so"

struct dbproc {
    pid_t pid;
    char url[PATH_MAX + 16];
    char sock[PATH_MAX];
};

static long long dbproc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void dbproc_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* The first executable redis-server on PATH, into out (PATH_MAX bytes). */
static int dbproc_find_server(char *out, size_t n)
{
    const char *path = getenv("PATH");
    if (path == NULL || *path == '\0') {
        path = "/usr/local/bin:/usr/bin:/bin";
    }
    const char *p = path;
    while (*p != '\0') {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0 && len + sizeof "/redis-server" <= n) {
            memcpy(out, p, len);
            memcpy(out + len, "/redis-server", sizeof "/redis-server");
            struct stat sb;
            if (stat(out, &sb) == 0 && S_ISREG(sb.st_mode) && access(out, X_OK) == 0) {
                return 0;
            }
        }
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    return -1;
}

/* 1 when something accepts connections on the unix socket at path, else 0. */
static int dbproc_socket_live(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path) {
        return 0;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return 0;
    }
    int live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return live;
}

/* 0 when the server on sock answers PING with PONG. */
static int dbproc_ping(const char *sock)
{
    struct timeval tv = {0, 250000};
    redisContext *rc = redisConnectUnixWithTimeout(sock, tv);
    if (rc == NULL) {
        return -1;
    }
    int ok = -1;
    if (rc->err == 0 && redisSetTimeout(rc, tv) == REDIS_OK) {
        redisReply *r = redisCommand(rc, "PING");
        if (r != NULL) {
            if (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) {
                ok = 0;
            }
            freeReplyObject(r);
        }
    }
    redisFree(rc);
    return ok;
}

static void dbproc_describe(int status, char *what, size_t n)
{
    if (WIFEXITED(status)) {
        snprintf(what, n, "exited with status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        snprintf(what, n, "killed by signal %d", WTERMSIG(status));
    } else {
        snprintf(what, n, "ended (wait status %d)", status);
    }
}

/* In the child: only async-signal-safe calls until exec. */
static void dbproc_exec_child(const char *server, char *const argv[], int logfd, pid_t parent)
{
    setpgid(0, 0);
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) {
        _exit(127); /* the parent is already gone: nobody would stop this server */
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
    }
    dup2(logfd, STDOUT_FILENO);
    dup2(logfd, STDERR_FILENO);
    execv(server, argv);
    _exit(127);
}

int dbproc_start(const char *data_dir, int wait_ms, dbproc **out, char *err, size_t errlen)
{
    *out = NULL;
    char server[PATH_MAX];
    if (dbproc_find_server(server, sizeof server) != 0) {
        snprintf(err, errlen,
                 "redis-server not found (install it: apt-get install redis-server, or pass "
                 "--redis URL)");
        return -1;
    }
    dbproc *p = calloc(1, sizeof *p);
    if (p == NULL) {
        snprintf(err, errlen, "out of memory starting redis-server (free some memory)");
        return -1;
    }
    char logpath[PATH_MAX];
    int n1 = snprintf(p->sock, sizeof p->sock, "%s/redis.sock", data_dir);
    int n2 = snprintf(logpath, sizeof logpath, "%s/redis.log", data_dir);
    int n3 = snprintf(p->url, sizeof p->url, "unix://%s", p->sock);
    if (n1 < 0 || (size_t)n1 >= sizeof(((struct sockaddr_un *)0)->sun_path) || n2 < 0 ||
        (size_t)n2 >= sizeof logpath || n3 < 0 || (size_t)n3 >= sizeof p->url) {
        snprintf(err, errlen,
                 "the data folder path %s is too long for a unix socket (use a shorter "
                 "--data-dir)",
                 data_dir);
        free(p);
        return -1;
    }
    if (access(p->sock, F_OK) == 0) {
        if (dbproc_socket_live(p->sock)) {
            snprintf(err, errlen,
                     "a redis-server is already serving %s (stop it, pass --redis unix://%s to "
                     "use it, or pick another --data-dir)",
                     p->sock, p->sock);
            free(p);
            return -1;
        }
        if (unlink(p->sock) != 0 && errno != ENOENT) {
            snprintf(err, errlen, "cannot remove the stale socket %s: %s (remove it by hand)",
                     p->sock, strerror(errno));
            free(p);
            return -1;
        }
    }
    int logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0) {
        snprintf(err, errlen, "cannot open %s: %s (check the data folder's permissions)", logpath,
                 strerror(errno));
        free(p);
        return -1;
    }
    char *argv[] = {
        "redis-server",
        "--port",
        "0",
        "--unixsocket",
        p->sock,
        "--unixsocketperm",
        "700",
        "--dir",
        (char *)data_dir,
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--save",
        "",
        "--daemonize",
        "no",
        "--logfile",
        logpath,
        /* Events and deliveries hold one field of a few KiB (the snapshot, the content): kept
         * as one listpack they cost about 1.2 KiB less each than as a hash table. */
        "--hash-max-listpack-value",
        "8192",
        NULL,
        NULL,
        NULL,
    };
    INVARIANT(argv[21] == NULL && argv[23] == NULL);
    /* RediSearch (Debian's redis-redisearch) serves Retrieval; without it everything else
     * still works and Retrieval says how to install it. */
    if (access(DBPROC_REDISEARCH, R_OK) == 0) {
        argv[21] = "--loadmodule";
        argv[22] = DBPROC_REDISEARCH;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen,
                 "cannot start redis-server: fork: %s (free some memory or "
                 "processes)",
                 strerror(errno));
        close(logfd);
        free(p);
        return -1;
    }
    if (pid == 0) {
        /* The log descriptor is O_CLOEXEC; dup2 onto stdout/stderr clears that for the copies. */
        dbproc_exec_child(server, argv, logfd, parent);
    }
    close(logfd);
    p->pid = pid;

    long long deadline = dbproc_now_ms() + (wait_ms > 0 ? wait_ms : 10000);
    for (;;) {
        int status = 0;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            char what[64];
            dbproc_describe(status, what, sizeof what);
            snprintf(err, errlen, "redis-server %s during startup (see %s)", what, logpath);
            p->pid = 0;
            free(p);
            return -1;
        }
        if (dbproc_ping(p->sock) == 0) {
            break;
        }
        if (dbproc_now_ms() >= deadline) {
            snprintf(err, errlen, "redis-server did not answer PING within %d ms (see %s)", wait_ms,
                     logpath);
            dbproc_stop(p);
            return -1;
        }
        dbproc_sleep_ms(25);
    }
    *out = p;
    return 0;
}

const char *dbproc_url(const dbproc *p)
{
    return p->url;
}

pid_t dbproc_pid(const dbproc *p)
{
    return p->pid;
}

int dbproc_check(dbproc *p, char *what, size_t n)
{
    if (p == NULL || p->pid <= 0) {
        return 0;
    }
    int status = 0;
    pid_t w = waitpid(p->pid, &status, WNOHANG);
    if (w == p->pid) {
        p->pid = 0; /* reported once: later checks see no child */
        dbproc_describe(status, what, n);
        return 1;
    }
    return 0;
}

void dbproc_stop(dbproc *p)
{
    if (p == NULL) {
        return;
    }
    if (p->pid > 0) {
        kill(p->pid, SIGTERM);
        long long deadline = dbproc_now_ms() + 10000;
        bool killed = false;
        for (;;) {
            int status = 0;
            pid_t w = waitpid(p->pid, &status, WNOHANG);
            if (w == p->pid || (w < 0 && errno == ECHILD)) {
                break;
            }
            if (!killed && dbproc_now_ms() >= deadline) {
                kill(p->pid, SIGKILL);
                killed = true;
            }
            dbproc_sleep_ms(10);
        }
        p->pid = 0;
    }
    free(p);
}
