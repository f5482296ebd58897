/*
 * grpc_call.h - one gRPC call on an HTTP/2 stream, from its headers to its trailers, and the
 * call slots (NNG contexts on a req0 socket to the transport) its envelopes travel in. The
 * connection side (rpc/grpc.c) feeds a stream its headers and message bytes from nghttp2's
 * callbacks; this side checks them, sends envelopes, and answers on the stream through
 * nghttp2's submit functions. Loop thread only, but for the slots' NNG callbacks, which touch
 * nothing but the queue of answers (grpc_call_server.mu).
 */
#ifndef CHARTER_GRPC_CALL_H
#define CHARTER_GRPC_CALL_H

#include <nghttp2/nghttp2.h>
#include <nng/nng.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc/auth.h"
#include "rpc/descriptors.h"
#include "rpc/tls_io.h"

/* The request headers a call reads; each kept as sent (at most grpc's header budget). */
typedef enum {
    GRPC_H_METHOD = 0, /* :method */
    GRPC_H_PATH,       /* :path */
    GRPC_H_AUTHORITY,  /* :authority */
    GRPC_H_CONTENT_TYPE,
    GRPC_H_ORIGIN,
    GRPC_H_TIMEOUT,  /* grpc-timeout */
    GRPC_H_ENCODING, /* grpc-encoding */
    GRPC_H_AUTHORIZATION,
    GRPC_H_REQUEST_ID, /* x-request-id */
    GRPC_H_TRACEPARENT,
    GRPC_H_TENANT, /* charter-tenant */
    GRPC_H_COUNT
} grpc_header;

typedef enum {
    GRPC_PHASE_HEADERS = 0, /* headers arriving: the header deadline */
    GRPC_PHASE_BODY,        /* accepted, its messages arriving: the body deadline */
    GRPC_PHASE_CALL,        /* at the transport, or between a Watch's polls: no deadline */
    GRPC_PHASE_DONE,        /* answered (or refused); what still arrives is dropped */
} grpc_phase;

typedef struct grpc_call_server grpc_call_server;
typedef struct grpc_stream grpc_stream;
typedef struct grpc_slot grpc_slot;

/* Bytes of frames gathered into one write: HEADERS, DATA and trailers of an answer leave in
 * one segment rather than three. */
#define GRPC_OUT_BUF 16384

/* One HTTP/2 connection (rpc/grpc.c owns it). */
typedef struct grpc_conn {
    grpc_call_server *srv;
    tls_io io;
    nghttp2_session *h2;
    uint8_t *out;       /* frames nghttp2 gave to send, gathered for one write (GRPC_OUT_BUF) */
    size_t out_cap;     /* bytes allocated at out */
    size_t out_off;     /* written of them */
    size_t pend_len;    /* gathered in all */
    int64_t last_io_ms; /* the last byte either way */
    int64_t quiet_ms;   /* since when no stream is open (0: some is) */
    int64_t goaway_ms;  /* when GOAWAY was sent for a connection left quiet (0: not) */
    unsigned n_streams;
    grpc_stream *streams;   /* open streams, a list */
    struct grpc_conn *next; /* the server's list of connections */
    struct grpc_conn *prev;
} grpc_conn;

struct grpc_stream {
    grpc_conn *conn;
    int32_t id;
    grpc_phase phase;
    int64_t deadline_ms; /* of the headers or body phase; a Watch's next poll */
    char *h[GRPC_H_COUNT];
    size_t header_bytes;
    descriptors_shape shape;
    int64_t ends_ms; /* the call's deadline (grpc-timeout, capped), absolute; 0: none */
    grpc_slot *slot; /* held from the headers to the end of the call */
    bool in_flight;  /* an envelope of the stream is at the transport */
    uint8_t *in;     /* message bytes received and not yet sent on */
    size_t in_len, in_cap;
    bool in_ended;    /* the client half-closed */
    uint8_t *request; /* a Watch's request message, sent again at each poll */
    size_t request_len;
    char watch_last[32];  /* the status a Watch sent last */
    char request_id[129]; /* the call's request id, from its answer ("" before) */
    bool headers_sent;
    uint8_t *out; /* framed messages not yet taken by nghttp2 */
    size_t out_len, out_off;
    bool finish;    /* trailers go out once out is drained */
    bool plain;     /* an HTTP answer, no gRPC: out is the whole body */
    bool rst_after; /* answered before the client ended: RST_STREAM once the answer is out */
    bool held;      /* a stream each way waits for the client to take its last answer */
    int status;
    char message[256];
    grpc_stream *next;
};

/* The server side: slots, the queue of answers, what every call is checked against. */
struct grpc_call_server {
    const auth_tokens *auth;
    size_t max_message;
    int max_timeout_ms;
    char listen_host[256];
    char *allow_host;
    unsigned header_timeout_s, body_timeout_s, idle_timeout_s;
    int wake_fd;
    nng_socket req;
    bool req_open;
    grpc_slot *slots;
    unsigned n_slots;
    grpc_slot *free_slots; /* loop thread */
    unsigned busy;         /* slots whose call is at the transport (loop thread) */
    unsigned watchers;     /* slots held by Watch streams (loop thread) */
    bool stopping;
    pthread_mutex_t mu;
    grpc_slot *answered; /* slots whose answer came back (mu) */
    grpc_conn *conns;    /* open connections (loop thread) */
};

/* CLOCK_MONOTONIC in milliseconds. */
int64_t grpc_call_now_ms(void);

/* The slots and their socket; 0, or -1 with one line in err (free with grpc_call_server_free
 * in every case). */
int grpc_call_server_init(grpc_call_server *g, const char *rpc_url, unsigned n_slots, char *err,
                          size_t errlen);
void grpc_call_server_free(grpc_call_server *g);
/* Hands out the answers that came back. */
void grpc_call_server_answers(grpc_call_server *g);

/* A new stream's headers begin; NULL when out of memory. */
grpc_stream *grpc_stream_new(grpc_conn *c, int32_t id);
/* One header; -1 past the header budget (the stream is then reset). */
int grpc_stream_header(grpc_stream *s, const uint8_t *name, size_t nlen, const uint8_t *value,
                       size_t vlen);
/* The headers are complete: checked, and the call accepted or refused. */
void grpc_stream_headers_done(grpc_stream *s);
/* A held stream's last answer was taken by nghttp2: its next message goes on. */
void grpc_stream_drained(grpc_stream *s);
/* Message bytes arrived. */
void grpc_stream_data(grpc_stream *s, const uint8_t *data, size_t len);
/* The client half-closed. */
void grpc_stream_end(grpc_stream *s);
/* A deadline of the stream passed (or a Watch's pause ended) at now. */
void grpc_stream_tick(grpc_stream *s, int64_t now);
/* nghttp2 closed the stream: its slot's answer is dropped when it comes; frees s. */
void grpc_stream_closed(grpc_stream *s);

#endif
