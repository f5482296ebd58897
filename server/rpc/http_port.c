/*
 * http_port.c - the HTTP port's accept loop: first bytes, TLS handshakes, HTTP/2 sessions and
 * HTTP/1.1 relays in one poll loop (see http_port.h).
 *
 * A connection counts against the cap from its accept until it closes: here for the HTTP/2
 * ones and those still being told apart, in libmicrohttpd for the HTTP/1.1 ones, which
 * http_port_release gives back. A TLS HTTP/1.1 connection is counted once, by libmicrohttpd's
 * end of its socket pair. The loop sleeps in poll(2) until a descriptor is ready, a deadline
 * passes or the wake eventfd is written (an answer of a gRPC call, a freed place, a stop).
 */
#define _GNU_SOURCE /* accept4(2) */
#include "rpc/http_port.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/log.h"
#include "rpc/call.h"

/* The HTTP/2 client preface (RFC 9113, 3.4); no HTTP/1.1 request begins with "PRI". */
static const char http_port_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define HTTP_PORT_DECIDE 3
/* A connection that sent a part of "PRI" too short to decide on is looked at again this much
 * later (its bytes stay in the socket, so poll would report it at once). */
#define HTTP_PORT_RECHECK_MS 20
/* Bytes a relay holds each way. */
#define HTTP_PORT_RELAY_BUF 16384

typedef enum { PC_SNIFF = 0, PC_HANDSHAKE, PC_H2, PC_RELAY } http_port_kind;

typedef struct http_port_conn {
    http_port_kind kind;
    tls_io io;
    int64_t deadline_ms; /* first bytes or handshake (0: none) */
    int64_t recheck_ms;  /* PC_SNIFF: not polled until then (0: polled) */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    grpc_conn *g;       /* PC_H2 */
    int peer;           /* PC_RELAY: the port's end of the socket pair */
    uint8_t *up, *down; /* PC_RELAY: client to libmicrohttpd, and back */
    size_t up_len, down_len;
    bool client_eof, peer_eof;
    bool dead;
    struct http_port_conn *next;
} http_port_conn;

struct http_port {
    http_port_opts o;
    grpc_server *grpc;
    int wake_fd;
    int listen_fd;
    atomic_uint open; /* connections under the cap */
    atomic_bool quiesce, stop;
    bool quiesced;           /* loop thread */
    bool stopped;            /* http_port_stop ran (the stopping thread) */
    bool running;            /* http_port_run started the thread */
    struct timespec stop_by; /* CLOCK_REALTIME, set before stop */
    http_port_conn *conns;
    pthread_t thread;
};

static void http_port_wake(http_port *p)
{
    uint64_t one = 1;
    while (write(p->wake_fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

void http_port_release(http_port *p)
{
    unsigned before = atomic_fetch_sub(&p->open, 1);
    if (before >= p->o.max_connections) {
        http_port_wake(p); /* the listening socket is polled again */
    }
}

/* --- one connection ----------------------------------------------------------------------- */

/* Closes pc; when counted, its place under the cap is freed. */
static void http_port_drop(http_port *p, http_port_conn *pc, bool counted)
{
    if (pc->kind == PC_H2) {
        grpc_conn_close(pc->g);
    } else {
        tls_io_close(&pc->io);
    }
    if (pc->kind == PC_RELAY) {
        close(pc->peer);
        free(pc->up);
        free(pc->down);
    }
    pc->dead = true;
    if (counted) {
        atomic_fetch_sub(&p->open, 1);
    }
}

/* An HTTP/2 connection over pc's socket (or TLS session), served at once: a TLS session may
 * hold bytes already read from the socket. */
static void http_port_to_h2(http_port *p, http_port_conn *pc)
{
    /* Small frames go out at once: an answer waits for no ACK of the frame before it. */
    int one = 1;
    (void)setsockopt(pc->io.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    tls_io io = pc->io;
    pc->io.fd = -1;
    pc->io.ssl = NULL;
    if (grpc_conn_open(p->grpc, io, NULL, 0, &pc->g) != 0) {
        pc->kind = PC_SNIFF;
        http_port_drop(p, pc, true);
        return;
    }
    pc->kind = PC_H2;
    pc->deadline_ms = 0;
    if (grpc_conn_io(pc->g) != 0) {
        http_port_drop(p, pc, true);
    }
}

/* Hands pc's socket to libmicrohttpd as it stands: nothing of it was read. */
static void http_port_to_http1(http_port *p, http_port_conn *pc)
{
    int fd = pc->io.fd;
    pc->io.fd = -1;
    pc->dead = true;
    if (p->o.take_http1(p->o.arg, fd, (const struct sockaddr *)&pc->addr, pc->addrlen) != 0) {
        atomic_fetch_sub(&p->open, 1);
    }
}

/* A cleartext connection's first bytes, peeked: HTTP/2's preface or HTTP/1.1. */
static void http_port_sniff(http_port *p, http_port_conn *pc, int64_t now)
{
    char b[sizeof http_port_preface - 1];
    ssize_t n = recv(pc->io.fd, b, sizeof b, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return;
    }
    if (n <= 0) {
        http_port_drop(p, pc, true);
        return;
    }
    if (memcmp(b, http_port_preface, (size_t)n) != 0) {
        http_port_to_http1(p, pc);
    } else if (n >= HTTP_PORT_DECIDE) {
        http_port_to_h2(p, pc);
    } else {
        pc->recheck_ms = now + HTTP_PORT_RECHECK_MS;
    }
}

static int http_port_relay(http_port_conn *pc);

/* A relay for a TLS HTTP/1.1 connection: a socket pair whose other end libmicrohttpd serves. */
static void http_port_to_relay(http_port *p, http_port_conn *pc)
{
    int sv[2];
    pc->up = malloc(HTTP_PORT_RELAY_BUF);
    pc->down = malloc(HTTP_PORT_RELAY_BUF);
    if (pc->up == NULL || pc->down == NULL ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
        free(pc->up);
        free(pc->down);
        pc->up = pc->down = NULL;
        http_port_drop(p, pc, true);
        return;
    }
    pc->kind = PC_RELAY;
    pc->peer = sv[0];
    pc->deadline_ms = 0;
    /* From here libmicrohttpd's end carries the connection's place under the cap. */
    if (p->o.take_http1(p->o.arg, sv[1], (const struct sockaddr *)&pc->addr, pc->addrlen) != 0) {
        http_port_drop(p, pc, true);
        return;
    }
    /* The TLS session may hold the request already: poll would not say so. */
    if (http_port_relay(pc) != 0) {
        http_port_drop(p, pc, false);
    }
}

static void http_port_handshake(http_port *p, http_port_conn *pc)
{
    int rc = tls_io_handshake(&pc->io);
    if (rc < 0) {
        http_port_drop(p, pc, true);
    } else if (rc > 0 && tls_io_is_h2(&pc->io)) {
        http_port_to_h2(p, pc);
    } else if (rc > 0) {
        http_port_to_relay(p, pc);
    }
}

/* One direction of a relay: from buf (len bytes) to a writer. Returns -1 on failure. */
static int http_port_flush_up(http_port_conn *pc)
{
    while (pc->up_len > 0) {
        ssize_t w = send(pc->peer, pc->up, pc->up_len, MSG_NOSIGNAL);
        if (w < 0) {
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
        }
        memmove(pc->up, pc->up + w, pc->up_len - (size_t)w);
        pc->up_len -= (size_t)w;
    }
    if (pc->client_eof) {
        (void)shutdown(pc->peer, SHUT_WR);
    }
    return 0;
}

static int http_port_flush_down(http_port_conn *pc)
{
    while (pc->down_len > 0) {
        ssize_t w = tls_io_write(&pc->io, pc->down, pc->down_len);
        if (w <= 0) {
            return w;
        }
        memmove(pc->down, pc->down + w, pc->down_len - (size_t)w);
        pc->down_len -= (size_t)w;
    }
    return 0;
}

/* Moves what it can both ways until neither side can go on. Returns -1 when the relay is over:
 * libmicrohttpd closed its end and everything it wrote reached the client, or a side failed. */
static int http_port_relay(http_port_conn *pc)
{
    for (;;) {
        bool moved = false;
        if (!pc->client_eof && pc->up_len < HTTP_PORT_RELAY_BUF) {
            ssize_t n = tls_io_read(&pc->io, pc->up + pc->up_len, HTTP_PORT_RELAY_BUF - pc->up_len);
            pc->client_eof = n < 0;
            pc->up_len += n > 0 ? (size_t)n : 0;
            moved = n != 0;
        }
        short want = pc->io.want;
        if (http_port_flush_up(pc) != 0) {
            return -1;
        }
        if (!pc->peer_eof && pc->down_len < HTTP_PORT_RELAY_BUF) {
            ssize_t n =
                recv(pc->peer, pc->down + pc->down_len, HTTP_PORT_RELAY_BUF - pc->down_len, 0);
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                return -1;
            }
            pc->peer_eof = n == 0;
            pc->down_len += n > 0 ? (size_t)n : 0;
            moved = moved || n >= 0;
        }
        if (http_port_flush_down(pc) != 0) {
            return -1;
        }
        pc->io.want |= want;
        if (pc->peer_eof && pc->down_len == 0) {
            return -1;
        }
        if (!moved) {
            return 0;
        }
    }
}

/* --- the loop ----------------------------------------------------------------------------- */

/* Accepts while there is room under the cap. */
static void http_port_accept(http_port *p, int64_t now)
{
    while (atomic_load(&p->open) < p->o.max_connections) {
        http_port_conn *pc = calloc(1, sizeof *pc);
        if (pc == NULL) {
            return;
        }
        pc->addrlen = sizeof pc->addr;
        int fd = accept4(p->listen_fd, (struct sockaddr *)&pc->addr, &pc->addrlen,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            free(pc);
            return; /* EAGAIN, or a failure of one connection: the next poll tries again */
        }
        atomic_fetch_add(&p->open, 1);
        pc->io.fd = fd;
        pc->peer = -1;
        unsigned t = p->o.header_timeout_s;
        pc->deadline_ms = t > 0 ? now + (int64_t)t * 1000 : 0;
        pc->kind = PC_SNIFF;
        if (p->o.tls != NULL) {
            pc->kind = PC_HANDSHAKE;
            if (tls_io_accept(p->o.tls, fd, &pc->io) != 0) {
                close(fd);
                atomic_fetch_sub(&p->open, 1);
                free(pc);
                continue;
            }
        }
        pc->next = p->conns;
        p->conns = pc;
    }
}

/* The poll entries of one connection (one, or two for a relay) into fds. */
static size_t http_port_events(const http_port_conn *pc, struct pollfd *fds, int64_t now)
{
    switch (pc->kind) {
    case PC_SNIFF:
        fds[0] = (struct pollfd){pc->io.fd, pc->recheck_ms > now ? 0 : POLLIN, 0};
        return 1;
    case PC_HANDSHAKE:
        fds[0] = (struct pollfd){pc->io.fd, pc->io.want != 0 ? pc->io.want : POLLIN, 0};
        return 1;
    case PC_H2:
        fds[0] = (struct pollfd){grpc_conn_fd(pc->g), grpc_conn_events(pc->g), 0};
        return 1;
    case PC_RELAY:
        fds[0] = (struct pollfd){
            pc->io.fd,
            (short)(pc->io.want |
                    (!pc->client_eof && pc->up_len < HTTP_PORT_RELAY_BUF ? POLLIN : 0) |
                    (pc->down_len > 0 ? POLLOUT : 0)),
            0};
        fds[1] = (struct pollfd){
            pc->peer,
            (short)((!pc->peer_eof && pc->down_len < HTTP_PORT_RELAY_BUF ? POLLIN : 0) |
                    (pc->up_len > 0 ? POLLOUT : 0)),
            0};
        return 2;
    }
    return 0;
}

static void http_port_ready(http_port *p, http_port_conn *pc, int64_t now)
{
    switch (pc->kind) {
    case PC_SNIFF:
        http_port_sniff(p, pc, now);
        break;
    case PC_HANDSHAKE:
        http_port_handshake(p, pc);
        break;
    case PC_H2:
        if (grpc_conn_io(pc->g) != 0) {
            http_port_drop(p, pc, true);
        }
        break;
    case PC_RELAY:
        if (http_port_relay(pc) != 0) {
            http_port_drop(p, pc, false);
        }
        break;
    }
}

/* Deadlines: a connection that showed no first bytes or finished no handshake in time is
 * closed; HTTP/2 connections act on theirs. Returns the earliest deadline still ahead. */
static int64_t http_port_deadlines(http_port *p, int64_t now)
{
    int64_t next = 0;
    for (http_port_conn *pc = p->conns; pc != NULL; pc = pc->next) {
        if (pc->dead) {
            continue;
        }
        int64_t d = pc->kind == PC_H2 ? grpc_conn_deadline(pc->g) : pc->deadline_ms;
        if (pc->kind == PC_SNIFF && pc->recheck_ms > 0) {
            d = d == 0 || pc->recheck_ms < d ? pc->recheck_ms : d;
        }
        if (d == 0 || d > now) {
            next = d == 0 ? next : next == 0 || d < next ? d : next;
            continue;
        }
        if (pc->kind == PC_H2) {
            if (grpc_conn_tick(pc->g, now) != 0) {
                http_port_drop(p, pc, true);
            }
        } else if (pc->kind == PC_SNIFF && pc->recheck_ms > 0 && pc->recheck_ms <= now &&
                   (pc->deadline_ms == 0 || pc->deadline_ms > now)) {
            pc->recheck_ms = 0;
            next = now + 1;
        } else {
            log_refusal(RPC_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED",
                        "HTTP connection closed: its %s did not arrive within %u s "
                        "(--http-header-timeout)",
                        pc->kind == PC_HANDSHAKE ? "TLS handshake" : "first bytes",
                        p->o.header_timeout_s);
            http_port_drop(p, pc, true);
        }
    }
    return next;
}

static void http_port_sweep(http_port *p)
{
    for (http_port_conn **pp = &p->conns; *pp != NULL;) {
        http_port_conn *pc = *pp;
        if (pc->dead) {
            *pp = pc->next;
            free(pc);
        } else {
            pp = &pc->next;
        }
    }
}

/* The wake eventfd: answers to hand out, a stop to begin. */
static void http_port_woken(http_port *p)
{
    uint64_t n;
    while (read(p->wake_fd, &n, sizeof n) < 0 && errno == EINTR) {
    }
    grpc_server_answers(p->grpc);
    if (atomic_load(&p->quiesce) && !p->quiesced) {
        p->quiesced = true;
        close(p->listen_fd);
        p->listen_fd = -1;
        grpc_server_quiesce(p->grpc);
        for (http_port_conn *pc = p->conns; pc != NULL; pc = pc->next) {
            if (pc->kind == PC_SNIFF || pc->kind == PC_HANDSHAKE) {
                http_port_drop(p, pc, true);
            }
        }
    }
    for (http_port_conn *pc = p->conns; pc != NULL; pc = pc->next) {
        if (!pc->dead && pc->kind == PC_H2 && grpc_conn_send(pc->g) != 0) {
            http_port_drop(p, pc, true);
        }
    }
}

/* One turn: poll, then act on what is ready and on the deadlines. */
static void http_port_turn(http_port *p, struct pollfd *fds, http_port_conn **owner, size_t cap)
{
    int64_t now = grpc_now_ms();
    int64_t next = http_port_deadlines(p, now);
    http_port_sweep(p);
    size_t n = 0;
    fds[n] = (struct pollfd){p->wake_fd, POLLIN, 0};
    owner[n++] = NULL;
    bool room = atomic_load(&p->open) < p->o.max_connections;
    fds[n] = (struct pollfd){p->listen_fd, p->listen_fd >= 0 && room ? POLLIN : 0, 0};
    owner[n++] = NULL;
    for (http_port_conn *pc = p->conns; pc != NULL && n + 2 <= cap; pc = pc->next) {
        size_t k = http_port_events(pc, fds + n, now);
        for (size_t i = 0; i < k; i++) {
            owner[n + i] = pc;
        }
        n += k;
    }
    int timeout = next == 0 ? 1000 : next - now > 1000 ? 1000 : (int)(next - now);
    if (poll(fds, n, timeout < 0 ? 0 : timeout) <= 0) {
        return;
    }
    now = grpc_now_ms();
    if (fds[0].revents != 0) {
        http_port_woken(p);
    }
    if ((fds[1].revents & POLLIN) != 0 && p->listen_fd >= 0) {
        http_port_accept(p, now);
    }
    http_port_conn *last = NULL;
    for (size_t i = 2; i < n; i++) {
        if (fds[i].revents != 0 && owner[i] != last && !owner[i]->dead) {
            last = owner[i];
            http_port_ready(p, owner[i], now);
        }
    }
}

/* Whether the stop may close everything now: its deadline passed, or no gRPC call is in
 * progress and every HTTP/2 connection has written what it had. */
static bool http_port_drained(http_port *p)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (now.tv_sec > p->stop_by.tv_sec ||
        (now.tv_sec == p->stop_by.tv_sec && now.tv_nsec >= p->stop_by.tv_nsec)) {
        return true;
    }
    if (grpc_server_busy(p->grpc) > 0) {
        return false;
    }
    for (http_port_conn *pc = p->conns; pc != NULL; pc = pc->next) {
        if (!pc->dead && pc->kind == PC_H2 && (grpc_conn_events(pc->g) & POLLOUT) != 0) {
            return false;
        }
    }
    return true;
}

static void *http_port_main(void *arg)
{
    http_port *p = arg;
    size_t cap = 2 * (size_t)p->o.max_connections + 4;
    struct pollfd *fds = calloc(cap, sizeof *fds);
    http_port_conn **owner = calloc(cap, sizeof *owner);
    while (fds != NULL && owner != NULL && !(atomic_load(&p->stop) && http_port_drained(p))) {
        http_port_turn(p, fds, owner, cap);
    }
    if (fds == NULL || owner == NULL) {
        log_error("the HTTP port stopped: out of memory (free some memory and restart charterd)");
    }
    for (http_port_conn *pc = p->conns; pc != NULL; pc = pc->next) {
        if (!pc->dead) {
            http_port_drop(p, pc, pc->kind != PC_RELAY);
        }
    }
    http_port_sweep(p);
    free(fds);
    free(owner);
    return NULL;
}

int http_port_open(const http_port_opts *o, http_port **out, char *err, size_t errlen)
{
    *out = NULL;
    http_port *p = calloc(1, sizeof *p);
    int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p == NULL || wake < 0) {
        snprintf(err, errlen, "cannot start the HTTP port: %s (free some memory or descriptors)",
                 strerror(p == NULL ? ENOMEM : errno));
        goto fail;
    }
    p->o = *o;
    p->wake_fd = wake;
    p->listen_fd = o->listen_fd;
    grpc_opts go = o->grpc;
    go.wake_fd = wake;
    if (grpc_server_start(&go, &p->grpc, err, errlen) != 0) {
        goto fail;
    }
    *out = p;
    return 0;
fail:
    if (wake >= 0) {
        close(wake);
    }
    close(o->listen_fd);
    free(p);
    return -1;
}

int http_port_run(http_port *p, char *err, size_t errlen)
{
    if (pthread_create(&p->thread, NULL, http_port_main, p) != 0) {
        snprintf(err, errlen, "cannot start the HTTP port's thread (free some memory)");
        return -1;
    }
    p->running = true;
    return 0;
}

void http_port_quiesce(http_port *p)
{
    if (p != NULL) {
        atomic_store(&p->quiesce, true);
        http_port_wake(p);
    }
}

void http_port_stop(http_port *p, const struct timespec *deadline)
{
    if (p == NULL || p->stopped) {
        return;
    }
    p->stopped = true;
    p->stop_by = *deadline;
    atomic_store(&p->quiesce, true);
    atomic_store(&p->stop, true);
    http_port_wake(p);
    if (p->running) {
        pthread_join(p->thread, NULL);
    }
    if (!p->quiesced) {
        close(p->listen_fd);
    }
    /* Calls still at the transport are cancelled; their callbacks write the wake descriptor,
     * which stays open until http_port_free. */
    grpc_server_stop(p->grpc);
}

void http_port_free(http_port *p)
{
    if (p == NULL) {
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    http_port_stop(p, &now);
    close(p->wake_fd);
    free(p);
}
