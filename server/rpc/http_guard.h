/*
 * http_guard.h - what both HTTP listeners (charterd --http, charter-mcp --http) hold their
 * connections to, on top of libmicrohttpd: a listen socket opened here so its errors can be
 * named, a connection cap that leaves file descriptors for everything else the process needs,
 * and a total deadline for a request's headers and one for its body.
 *
 * libmicrohttpd's own timeout (MHD_OPTION_CONNECTION_TIMEOUT) is an inactivity timeout: a
 * client that sends one byte every few seconds never reaches it. So every connection is
 * registered here (MHD_OPTION_NOTIFY_CONNECTION) with a deadline for the phase it is in, and a
 * watchdog thread shuts down the socket of any connection past its deadline; libmicrohttpd
 * then reads end-of-file and closes it on its own thread. The phases of a request:
 *
 *   headers  from the connection's opening, or from the previous answer on a kept-alive
 *            connection, until the access handler's first call (headers complete)
 *   body     from there until the body has arrived (the handler's call with no data)
 *   busy     no deadline: the listener is making the answer or sending it (bounded by the
 *            call's own deadline and by libmicrohttpd's inactivity timeout)
 *
 * Used by server/rpc/http.c and cmd/charter-mcp/mcp_http.c; it includes nothing of charterd.
 */
#ifndef CHARTER_HTTP_GUARD_H
#define CHARTER_HTTP_GUARD_H

#include <microhttpd.h>
#include <stddef.h>

typedef struct http_guard http_guard;

/* Called on the watchdog thread for each connection it closes; phase is "headers" or "body".
 * It must not call back into the guard. */
typedef void (*http_guard_closed_fn)(void *arg, const char *phase, unsigned limit_s);

typedef struct {
    unsigned header_timeout_s;      /* seconds for a request's line and headers (0: no deadline) */
    unsigned body_timeout_s;        /* seconds for its body once the headers are in (0: none) */
    http_guard_closed_fn on_closed; /* may be NULL */
    void *arg;
} http_guard_opts;

/* Opens a TCP socket listening on host:port (host a name or address, "[v6]" allowed; port a
 * decimal string), close-on-exec and non-blocking, with SO_REUSEADDR, and a backlog of
 * SOMAXCONN: connections past the cap wait there without taking a descriptor of this process.
 * Returns the socket, or -1 with one line "<what is wrong> (<how to fix>)" naming what in err. */
int http_guard_listen(const char *host, const char *port, const char *what, char *err,
                      size_t errlen);

/* "host:port" of the listening socket fd, with host as given to http_guard_listen and the port
 * the socket is bound to (the one the system picked when port 0 was asked for). Returns 0, or
 * -1 when the socket's address cannot be read or out is too small. */
int http_guard_bound(int fd, const char *host, char *out, size_t n);

/* Fits a connection cap into the open file limit (RLIMIT_NOFILE): each connection holds one
 * descriptor, and reserve more (besides those open now) must stay free for the rest of the
 * process (its NNG listener and clients, its database connections). When the soft limit is too
 * low it is raised towards the hard limit; when even that is too low, *max_connections is
 * lowered to what fits and a one-line note for the log is written to note (note[0] == '\0'
 * otherwise). Returns 0, or -1 with the reason in note when not even min_connections fit. */
int http_guard_fit_descriptors(unsigned *max_connections, unsigned reserve,
                               unsigned min_connections, char *note, size_t notelen);

/* Starts the watchdog thread. Returns 0 with *out, or -1 (out of memory or no thread). */
int http_guard_start(const http_guard_opts *o, http_guard **out);

/* Stops the watchdog and frees g; call after MHD_stop_daemon (every connection closed). NULL is
 * ignored. */
void http_guard_stop(http_guard *g);

/* The MHD_OPTION_NOTIFY_CONNECTION callback (cls: the guard): registers a connection with its
 * headers deadline when it opens, forgets it when it closes. */
void http_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode toe);

/* Phase changes, from the access handler (and the completion callback for idle): the headers
 * are in (body deadline starts); the body is in (no deadline while the answer is made); the
 * answer went out (headers deadline of the next request on a kept-alive connection). */
void http_guard_body(struct MHD_Connection *c);
void http_guard_busy(struct MHD_Connection *c);
void http_guard_idle(struct MHD_Connection *c);

#endif
