/*
 * grpc.c - HTTP/2 connections of the gRPC listener, framed by nghttp2 (see grpc.h).
 *
 * Each connection is one nghttp2 server session fed with nghttp2_session_mem_recv from what
 * tls_io reads and drained with nghttp2_session_mem_send into what it writes: nghttp2 does
 * the framing, HPACK, flow control and the protocol's own limits (streams at once, SETTINGS
 * and PING floods, rapid resets); the calls on the streams are grpc_call.c's. A connection is
 * held to a deadline for each stream's headers and messages (the streams' own), to the header
 * timeout while it has no stream, and to the inactivity timeout while no call is in progress.
 */
#include "rpc/grpc.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "rpc/grpc_call.h"

struct grpc_server {
    grpc_call_server calls;
};

/* A request's header list advertised to clients (SETTINGS_MAX_HEADER_LIST_SIZE), bytes. */
#define GRPC_MAX_HEADER_LIST (64 * 1024)
/* Reads of one readiness of a cleartext connection, before others get their turn. */
#define GRPC_READS_PER_TURN 64

int64_t grpc_now_ms(void)
{
    return grpc_call_now_ms();
}

/* --- nghttp2's callbacks ------------------------------------------------------------------ */

static int grpc_on_begin_headers(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
    grpc_conn *c = user;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0;
    }
    grpc_stream *s = grpc_stream_new(c, frame->hd.stream_id);
    if (s == NULL) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    s->next = c->streams;
    c->streams = s;
    c->n_streams++;
    c->quiet_ms = 0;
    return nghttp2_session_set_stream_user_data(h2, frame->hd.stream_id, s);
}

static int grpc_on_header(nghttp2_session *h2, const nghttp2_frame *frame, const uint8_t *name,
                          size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    (void)flags;
    (void)user;
    grpc_stream *s = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (s == NULL || frame->hd.type != NGHTTP2_HEADERS) {
        return 0;
    }
    /* Past the budget the stream is reset (RST_STREAM INTERNAL_ERROR). */
    return grpc_stream_header(s, name, nlen, value, vlen) == 0
               ? 0
               : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

static int grpc_on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
    (void)user;
    grpc_stream *s = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (s == NULL) {
        return 0;
    }
    if (frame->hd.type == NGHTTP2_HEADERS) {
        grpc_stream_headers_done(s);
    }
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
        grpc_stream_end(s);
    }
    return 0;
}

/* A stream answered before its client ended gets RST_STREAM NO_ERROR after its last frame:
 * queued earlier, the reset could overtake the answer. */
static int grpc_on_frame_send(nghttp2_session *h2, const nghttp2_frame *frame, void *user)
{
    (void)user;
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) {
        return 0;
    }
    grpc_stream *s = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (s != NULL && s->rst_after && !s->in_ended) {
        s->rst_after = false;
        (void)nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
    }
    return 0;
}

static int grpc_on_data(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                        size_t len, void *user)
{
    (void)flags;
    (void)user;
    grpc_stream *s = nghttp2_session_get_stream_user_data(h2, id);
    if (s != NULL) {
        grpc_stream_data(s, data, len);
    }
    return 0;
}

static int grpc_on_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *user)
{
    (void)error_code;
    grpc_conn *c = user;
    grpc_stream *s = nghttp2_session_get_stream_user_data(h2, id);
    if (s == NULL) {
        return 0;
    }
    for (grpc_stream **p = &c->streams; *p != NULL; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    c->n_streams--;
    if (c->n_streams == 0) {
        c->quiet_ms = grpc_call_now_ms();
    }
    grpc_stream_closed(s);
    return 0;
}

/* --- a connection ------------------------------------------------------------------------- */

static int grpc_conn_session(grpc_conn *c)
{
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    if (nghttp2_session_callbacks_new(&cb) != 0) {
        return -1;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, grpc_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, grpc_on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, grpc_on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, grpc_on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, grpc_on_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, grpc_on_frame_send);
    int rc = nghttp2_option_new(&opt);
    if (rc == 0) {
        /* nghttp2 refuses streams past the advertised limit itself (REFUSED_STREAM). */
        nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
        rc = nghttp2_session_server_new2(&c->h2, cb, c, opt);
    }
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0) {
        return -1;
    }
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, GRPC_MAX_STREAMS},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, GRPC_MAX_HEADER_LIST},
    };
    return nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, settings, 2) == 0 ? 0 : -1;
}

int grpc_conn_open(grpc_server *g, tls_io io, const uint8_t *seen, size_t n, grpc_conn **out)
{
    *out = NULL;
    grpc_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        tls_io_close(&io);
        return -1;
    }
    c->srv = &g->calls;
    c->io = io;
    c->last_io_ms = c->quiet_ms = grpc_call_now_ms();
    if (grpc_conn_session(c) != 0 ||
        (n > 0 && nghttp2_session_mem_recv(c->h2, seen, n) != (ssize_t)n)) {
        grpc_conn_close(c);
        return -1;
    }
    c->next = g->calls.conns;
    if (c->next != NULL) {
        c->next->prev = c;
    }
    g->calls.conns = c;
    c->prev = NULL;
    *out = c;
    return 0;
}

short grpc_conn_events(const grpc_conn *c)
{
    short ev = c->io.want;
    if (nghttp2_session_want_read(c->h2)) {
        ev |= POLLIN;
    }
    if (c->out_off < c->pend_len || nghttp2_session_want_write(c->h2)) {
        ev |= POLLOUT;
    }
    return ev;
}

int grpc_conn_fd(const grpc_conn *c)
{
    return c->io.fd;
}

/* Gathers what nghttp2 has to send into c->out until GRPC_OUT_BUF bytes or more are there
 * (the last frame may pass it: nghttp2 cannot take a frame back). Returns 0, or -1 when nghttp2
 * failed or memory ran out. */
static int grpc_conn_gather(grpc_conn *c)
{
    c->out_off = c->pend_len = 0;
    while (c->pend_len < GRPC_OUT_BUF) {
        const uint8_t *d = NULL;
        ssize_t n = nghttp2_session_mem_send(c->h2, &d);
        if (n <= 0) {
            return n < 0 ? -1 : 0;
        }
        if (c->pend_len + (size_t)n > c->out_cap) {
            size_t cap =
                c->pend_len + (size_t)n > GRPC_OUT_BUF ? c->pend_len + (size_t)n : GRPC_OUT_BUF;
            uint8_t *b = realloc(c->out, cap);
            if (b == NULL) {
                return -1;
            }
            c->out = b;
            c->out_cap = cap;
        }
        memcpy(c->out + c->pend_len, d, (size_t)n);
        c->pend_len += (size_t)n;
    }
    return 0;
}

/* The streams each way whose last answer nghttp2 has taken go on with their next message. */
static void grpc_conn_drained(grpc_conn *c)
{
    for (grpc_stream *s = c->streams; s != NULL; s = s->next) {
        grpc_stream_drained(s);
    }
}

/* Writes what nghttp2 has to send until the socket would block. -1 when the connection failed
 * or the session is over (both sides done, nothing left to write). */
static int grpc_conn_flush(grpc_conn *c)
{
    for (;;) {
        if (c->out_off == c->pend_len) {
            grpc_conn_drained(c);
            if (grpc_conn_gather(c) != 0) {
                return -1;
            }
            if (c->pend_len == 0) {
                break;
            }
        }
        ssize_t w = tls_io_write(&c->io, c->out + c->out_off, c->pend_len - c->out_off);
        if (w < 0) {
            return -1;
        }
        if (w == 0) {
            return 0;
        }
        c->out_off += (size_t)w;
        c->last_io_ms = grpc_call_now_ms();
    }
    return nghttp2_session_want_read(c->h2) || nghttp2_session_want_write(c->h2) ? 0 : -1;
}

int grpc_conn_io(grpc_conn *c)
{
    uint8_t buf[16384];
    for (int i = 0; c->io.ssl != NULL || i < GRPC_READS_PER_TURN; i++) {
        ssize_t n = tls_io_read(&c->io, buf, sizeof buf);
        if (n < 0) {
            return -1;
        }
        if (n == 0) {
            break;
        }
        c->last_io_ms = grpc_call_now_ms();
        if (nghttp2_session_mem_recv(c->h2, buf, (size_t)n) < 0) {
            (void)grpc_conn_flush(c); /* the GOAWAY nghttp2 queued, if it can go */
            return -1;
        }
    }
    short want = c->io.want;
    int rc = grpc_conn_flush(c);
    c->io.want |= want;
    return rc;
}

int grpc_conn_send(grpc_conn *c)
{
    return grpc_conn_flush(c);
}

static int64_t grpc_earliest(int64_t a, int64_t b)
{
    return a == 0 ? b : b == 0 ? a : a < b ? a : b;
}

int64_t grpc_conn_deadline(const grpc_conn *c)
{
    const grpc_call_server *g = c->srv;
    int64_t d = 0;
    bool calling = false;
    for (const grpc_stream *s = c->streams; s != NULL; s = s->next) {
        d = grpc_earliest(d, s->deadline_ms);
        calling = calling || s->phase == GRPC_PHASE_CALL || s->in_flight;
    }
    if (c->n_streams == 0 && g->header_timeout_s > 0) {
        d = grpc_earliest(d, (c->goaway_ms > 0 ? c->goaway_ms : c->quiet_ms) +
                                 (int64_t)g->header_timeout_s * 1000);
    }
    if (!calling && g->idle_timeout_s > 0) {
        d = grpc_earliest(d, c->last_io_ms + (int64_t)g->idle_timeout_s * 1000);
    }
    return d;
}

int grpc_conn_tick(grpc_conn *c, int64_t now)
{
    const grpc_call_server *g = c->srv;
    for (grpc_stream *s = c->streams; s != NULL; s = s->next) {
        grpc_stream_tick(s, now);
    }
    bool calling = false;
    for (const grpc_stream *s = c->streams; s != NULL; s = s->next) {
        calling = calling || s->phase == GRPC_PHASE_CALL || s->in_flight;
    }
    int64_t quiet = (int64_t)g->header_timeout_s * 1000;
    if (c->n_streams == 0 && quiet > 0 && c->goaway_ms > 0 && now >= c->goaway_ms + quiet) {
        /* The notice went out a header timeout ago: the last GOAWAY, then the close. */
        (void)nghttp2_session_terminate_session(c->h2, NGHTTP2_NO_ERROR);
        (void)grpc_conn_flush(c);
        return -1;
    }
    if (c->n_streams == 0 && quiet > 0 && c->goaway_ms == 0 && now >= c->quiet_ms + quiet) {
        /* No call within the header timeout, as HTTP/1.1 closes a kept-alive connection, in
         * two steps so that no call is lost on the way: a shutdown notice (GOAWAY naming the
         * highest stream id, RFC 9113 6.8) tells the client to open its next calls on another
         * connection, while a call it sent meanwhile is still served; one header timeout
         * later, the last GOAWAY and the close. */
        c->goaway_ms = now;
        (void)nghttp2_submit_shutdown_notice(c->h2);
    }
    if (!calling && g->idle_timeout_s > 0 &&
        now >= c->last_io_ms + (int64_t)g->idle_timeout_s * 1000) {
        return -1;
    }
    return grpc_conn_flush(c);
}

bool grpc_conn_quiet(const grpc_conn *c)
{
    return c->n_streams == 0;
}

void grpc_conn_close(grpc_conn *c)
{
    if (c == NULL) {
        return;
    }
    grpc_call_server *g = c->srv;
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else if (g->conns == c) {
        g->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    /* nghttp2_session_del closes every stream without its callback: the streams go here. */
    while (c->streams != NULL) {
        grpc_stream *s = c->streams;
        c->streams = s->next;
        grpc_stream_closed(s);
    }
    nghttp2_session_del(c->h2);
    free(c->out);
    tls_io_close(&c->io);
    free(c);
}

/* --- the server --------------------------------------------------------------------------- */

int grpc_server_start(const grpc_opts *o, grpc_server **out, char *err, size_t errlen)
{
    *out = NULL;
    grpc_server *g = calloc(1, sizeof *g);
    if (g == NULL) {
        snprintf(err, errlen, "out of memory starting the gRPC listener (free some memory)");
        return -1;
    }
    grpc_call_server *cs = &g->calls;
    cs->auth = o->auth;
    cs->max_message = o->max_message;
    cs->max_timeout_ms = o->max_timeout_ms > 0 ? o->max_timeout_ms : 60000;
    snprintf(cs->listen_host, sizeof cs->listen_host, "%s", o->listen_host);
    cs->header_timeout_s = o->header_timeout_s;
    cs->body_timeout_s = o->body_timeout_s;
    cs->idle_timeout_s = o->idle_timeout_s;
    cs->wake_fd = o->wake_fd;
    if ((o->allow_host != NULL && (cs->allow_host = strdup(o->allow_host)) == NULL) ||
        grpc_call_server_init(cs, o->rpc_url, o->max_inflight, err, errlen) != 0) {
        if (cs->allow_host == NULL && o->allow_host != NULL) {
            snprintf(err, errlen, "out of memory starting the gRPC listener (free some memory)");
        }
        grpc_call_server_free(cs);
        free(g);
        return -1;
    }
    *out = g;
    return 0;
}

void grpc_server_answers(grpc_server *g)
{
    grpc_call_server_answers(&g->calls);
}

void grpc_server_quiesce(grpc_server *g)
{
    g->calls.stopping = true;
    for (grpc_conn *c = g->calls.conns; c != NULL; c = c->next) {
        (void)nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE,
                                    nghttp2_session_get_last_proc_stream_id(c->h2),
                                    NGHTTP2_NO_ERROR, NULL, 0);
    }
}

unsigned grpc_server_busy(const grpc_server *g)
{
    return g->calls.busy;
}

void grpc_server_stop(grpc_server *g)
{
    if (g == NULL) {
        return;
    }
    grpc_call_server_free(&g->calls);
    free(g);
}
