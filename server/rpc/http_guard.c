/*
 * http_guard.c - listen socket, descriptor budget and per-phase deadlines of the HTTP
 * listeners (see http_guard.h).
 *
 * The watchdog ticks four times a second over the connections registered by the notify
 * callback; each holds the deadline of the phase it is in (0: none). A connection past its
 * deadline gets shutdown(2), never close(2): libmicrohttpd owns the descriptor and closes it
 * after reading end-of-file. The list's mutex is held across that shutdown, and the notify
 * callback removes a connection under the same mutex before libmicrohttpd closes its socket
 * (daemon.c calls MHD_CONNECTION_NOTIFY_CLOSED first), so a descriptor number is never shut
 * down after it was reused.
 */
#include "rpc/http_guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* How often the watchdog looks, milliseconds: deadlines are whole seconds. */
#define HTTP_GUARD_TICK_MS 250

typedef enum { GUARD_HEADERS = 0, GUARD_BODY, GUARD_BUSY } http_guard_phase;

typedef struct http_guard_conn {
    http_guard *g;
    int fd;
    http_guard_phase phase;
    int64_t deadline_ms; /* CLOCK_MONOTONIC milliseconds; 0: none */
    struct http_guard_conn *prev, *next;
} http_guard_conn;

struct http_guard {
    http_guard_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC: signalled to stop */
    bool stop;
    pthread_t thread;
    http_guard_conn list; /* sentinel of a circular list */
};

static int64_t http_guard_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* --- the listen socket -------------------------------------------------------------------- */

int http_guard_listen(const char *host, const char *port, const char *what, char *err,
                      size_t errlen)
{
    char h[256];
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n >= sizeof h) {
        snprintf(err, errlen, "%s: the host name is too long (use an address)", what);
        return -1;
    }
    memcpy(h, host, n);
    h[n] = '\0';
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(h, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "%s: cannot resolve %s: %s (use an address such as 127.0.0.1)", what,
                 h, gai_strerror(gai));
        return -1;
    }
    /* An IPv4 address first when a name has both, as "localhost" is usually called. */
    const struct addrinfo *pick = res;
    for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET) {
            pick = ai;
            break;
        }
    }
    int fd = socket(pick->ai_family, pick->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    pick->ai_protocol);
    int one = 1;
    int e = 0;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, pick->ai_addr, pick->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
        e = errno;
    }
    freeaddrinfo(res);
    if (e != 0) {
        if (fd >= 0) {
            close(fd);
        }
        snprintf(err, errlen, "%s: %s (%s)", what, strerror(e),
                 e == EADDRINUSE ? "is another process on that port? pick another"
                 : e == EACCES   ? "a port below 1024 needs privileges; pick another"
                                 : "check the address");
        return -1;
    }
    return fd;
}

int http_guard_bound(int fd, const char *host, char *out, size_t n)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        return -1;
    }
    unsigned port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    int w = snprintf(out, n, "%s:%u", host, port);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* --- the descriptor budget ---------------------------------------------------------------- */

/* Descriptors this process holds now (/proc/self/fd), or 64 when that cannot be read. */
static unsigned long http_guard_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) {
        return 64;
    }
    unsigned long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            n++;
        }
    }
    closedir(d);
    return n > 0 ? n - 1 : 0; /* the directory's own descriptor */
}

int http_guard_fit_descriptors(unsigned *max_connections, unsigned reserve,
                               unsigned min_connections, char *note, size_t notelen)
{
    note[0] = '\0';
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        snprintf(note, notelen, "cannot read the open file limit: %s (check the environment)",
                 strerror(errno));
        return -1;
    }
    unsigned long long open_now = http_guard_open_fds();
    unsigned long long need = open_now + reserve + *max_connections;
    if (rl.rlim_cur != RLIM_INFINITY && need > rl.rlim_cur) {
        struct rlimit raised = rl;
        raised.rlim_cur =
            rl.rlim_max == RLIM_INFINITY || need < rl.rlim_max ? (rlim_t)need : rl.rlim_max;
        if (raised.rlim_cur > rl.rlim_cur && setrlimit(RLIMIT_NOFILE, &raised) == 0) {
            rl.rlim_cur = raised.rlim_cur;
        }
    }
    if (rl.rlim_cur == RLIM_INFINITY || need <= rl.rlim_cur) {
        return 0;
    }
    unsigned long long kept = open_now + reserve;
    unsigned long long room = rl.rlim_cur > kept ? rl.rlim_cur - kept : 0;
    if (room < min_connections) {
        snprintf(note, notelen,
                 "the open file limit %llu leaves room for %llu HTTP connections besides the "
                 "%llu descriptors kept for the rest of the process (raise it: ulimit -n, or "
                 "LimitNOFILE= in the unit)",
                 (unsigned long long)rl.rlim_cur, room, kept);
        return -1;
    }
    snprintf(note, notelen,
             "HTTP connections capped at %llu instead of %u: the open file limit is %llu and %llu "
             "descriptors stay free for the rest of the process (raise it: ulimit -n, or "
             "LimitNOFILE= in the unit)",
             room, *max_connections, (unsigned long long)rl.rlim_cur, kept);
    *max_connections = (unsigned)room;
    return 0;
}

/* --- the watchdog ------------------------------------------------------------------------- */

static void *http_guard_main(void *arg)
{
    http_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        int64_t now = http_guard_now_ms();
        for (http_guard_conn *c = g->list.next; c != &g->list; c = c->next) {
            if (c->deadline_ms == 0 || now < c->deadline_ms) {
                continue;
            }
            c->deadline_ms = 0;
            (void)shutdown(c->fd, SHUT_RDWR);
            if (g->o.on_closed != NULL) {
                bool headers = c->phase == GUARD_HEADERS;
                g->o.on_closed(g->o.arg, headers ? "headers" : "body",
                               headers ? g->o.header_timeout_s : g->o.body_timeout_s);
            }
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += HTTP_GUARD_TICK_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&g->cv, &g->mu, &until);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

int http_guard_start(const http_guard_opts *o, http_guard **out)
{
    *out = NULL;
    http_guard *g = calloc(1, sizeof *g);
    if (g == NULL) {
        return -1;
    }
    g->o = *o;
    g->list.next = g->list.prev = &g->list;
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) {
        free(g);
        return -1;
    }
    int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0) {
        rc = pthread_cond_init(&g->cv, &ca);
    }
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        free(g);
        return -1;
    }
    if (pthread_mutex_init(&g->mu, NULL) != 0) {
        pthread_cond_destroy(&g->cv);
        free(g);
        return -1;
    }
    if (pthread_create(&g->thread, NULL, http_guard_main, g) != 0) {
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
        free(g);
        return -1;
    }
    *out = g;
    return 0;
}

void http_guard_stop(http_guard *g)
{
    if (g == NULL) {
        return;
    }
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    /* Every connection was closed (and forgotten) by MHD_stop_daemon before this. */
    while (g->list.next != &g->list) {
        http_guard_conn *c = g->list.next;
        c->next->prev = c->prev;
        c->prev->next = c->next;
        free(c);
    }
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

/* --- connections and their phases --------------------------------------------------------- */

/* phase with its deadline (limit_s seconds from now, 0: none), under the guard's mutex. */
static void http_guard_set(http_guard_conn *c, http_guard_phase phase, unsigned limit_s)
{
    http_guard *g = c->g;
    pthread_mutex_lock(&g->mu);
    c->phase = phase;
    c->deadline_ms = limit_s > 0 ? http_guard_now_ms() + (int64_t)limit_s * 1000 : 0;
    pthread_mutex_unlock(&g->mu);
}

void http_guard_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe)
{
    http_guard *g = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        http_guard_conn *c = calloc(1, sizeof *c);
        if (c == NULL || fd == NULL) {
            /* Not registered: libmicrohttpd's inactivity timeout still bounds it. */
            free(c);
            *socket_context = NULL;
            return;
        }
        c->g = g;
        c->fd = fd->connect_fd;
        c->phase = GUARD_HEADERS;
        c->deadline_ms = g->o.header_timeout_s > 0
                             ? http_guard_now_ms() + (int64_t)g->o.header_timeout_s * 1000
                             : 0;
        pthread_mutex_lock(&g->mu);
        c->next = &g->list;
        c->prev = g->list.prev;
        g->list.prev->next = c;
        g->list.prev = c;
        pthread_mutex_unlock(&g->mu);
        *socket_context = c;
        return;
    }
    http_guard_conn *c = *socket_context;
    if (c == NULL) {
        return;
    }
    pthread_mutex_lock(&g->mu);
    c->next->prev = c->prev;
    c->prev->next = c->next;
    pthread_mutex_unlock(&g->mu);
    free(c);
    *socket_context = NULL;
}

static http_guard_conn *http_guard_conn_of(struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i != NULL ? i->socket_context : NULL;
}

void http_guard_body(struct MHD_Connection *mc)
{
    http_guard_conn *c = http_guard_conn_of(mc);
    if (c != NULL) {
        http_guard_set(c, GUARD_BODY, c->g->o.body_timeout_s);
    }
}

void http_guard_busy(struct MHD_Connection *mc)
{
    http_guard_conn *c = http_guard_conn_of(mc);
    if (c != NULL) {
        http_guard_set(c, GUARD_BUSY, 0);
    }
}

void http_guard_idle(struct MHD_Connection *mc)
{
    http_guard_conn *c = http_guard_conn_of(mc);
    if (c != NULL) {
        http_guard_set(c, GUARD_HEADERS, c->g->o.header_timeout_s);
    }
}
