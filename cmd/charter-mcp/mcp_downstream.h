/*
 * mcp_downstream.h - what mcp_downstream.c (the downstream servers, their tools and their
 * stdio children) and mcp_downstream_http.c (the url servers, over Streamable HTTP with
 * libcurl) share: how an exchange with a server can fail, and one HTTP exchange.
 */
#ifndef CHARTER_MCP_DOWNSTREAM_H
#define CHARTER_MCP_DOWNSTREAM_H

#include "mcp.h"

/* How an exchange with a server can end, besides an answer. The request reached the server
 * (what it did is unknown) unless the exchange says it was not sent. */
enum {
    DS_EOF = 1,      /* a child exited; a url server closed the connection without answering */
    DS_TIMEOUT,      /* no answer within the server's timeout_ms */
    DS_TOO_LARGE,    /* the answer is larger than MCP_DOWNSTREAM_MAX_MESSAGE */
    DS_IO,           /* reading or writing failed; a url server could not be reached */
    DS_NOT_JSON,     /* a child wrote a line, or a url server an answer, that is no message */
    DS_HTTP_REFUSED, /* a url server refused the request with a 4xx status: it did not act */
    DS_HTTP_FAILED,  /* a url server answered a status or a body that is no answer to it */
};

/* The server answered the request with a JSON-RPC error: it failed, and the server goes on. */
#define DS_ANSWERED_ERROR 100

/* What one HTTP exchange with a url server is sent with (every string owned). */
typedef struct {
    const char *name;   /* the server's name, for messages (borrowed) */
    char *url;          /* where to POST */
    char *auth;         /* "Authorization: Bearer ..." or NULL */
    char *session_id;   /* Mcp-Session-Id, or NULL before initialize */
    char protocol[16];  /* MCP-Protocol-Version to send, or "" before initialize */
    long long deadline; /* monotonic milliseconds (ds_now_ms) by which everything an exchange
                           does, answers to the server's requests included, is over */
} ds_http_peer;

/* Monotonic milliseconds: what deadlines are counted in. */
long long ds_now_ms(void);

/* Copies what an exchange with d is sent with into *p (call with d->lock held), to be over by
 * deadline (ds_now_ms milliseconds). 0, or -1 when out of memory (nothing to free). */
int ds_http_peer_of(const mcp_downstream *d, long long deadline, ds_http_peer *p);
/* Frees what a peer holds, wiping the credential. */
void ds_http_peer_free(ds_http_peer *p);

/* Reads the bearer token d's declaration names (credential_env or credential_file) into
 * d->auth as a whole header line, or leaves it NULL when the declaration names none. 0, or -1
 * with err saying what is missing or malformed (never the token). Call with d->lock held. */
int ds_http_credential(mcp_downstream *d, char *err, size_t errlen);

/* POSTs msg (one JSON-RPC message) to the server and reads its answer, JSON or an event
 * stream, as far as the response whose id is want (want < 0: none is awaited, a notification
 * or a response of ours, and only the status of the answer is read). Requests the server
 * sends in the stream of an awaited response are answered (ping with an empty result,
 * anything else with "method not found"), each answer an exchange that awaits nothing, so an
 * answer never leads to another; none is answered once p->deadline has passed. Returns 0 with
 * *answer the response (a new reference; NULL when none was awaited) and, when the server
 * issued one, *session_id (malloc'd; NULL otherwise); or a DS_* code with err set (DS_TIMEOUT
 * once p->deadline passed). *sent says whether the request reached the server. Text the
 * server wrote (an error's message, a refused request's body) is never put in err: it goes to
 * stderr, with the credential's value masked. */
int ds_http_exchange(const ds_http_peer *p, const json_t *msg, json_int_t want, json_t **answer,
                     char **session_id, bool *sent, char *err, size_t errlen);

/* Writes text a server sent (len bytes: an error's message, a refused request's body) to
 * stderr as one line headed by what, each occurrence of the bearer token in auth (a whole
 * "Authorization: Bearer ..." line, or NULL) masked and control characters replaced. */
void ds_log_server_text(const char *server, const char *what, const char *text, size_t len,
                        const char *auth);

/* Ends the session p names with DELETE (its answer, or none, is ignored: a server may refuse
 * to end sessions, or be gone). */
void ds_http_delete(const ds_http_peer *p);

/* libcurl's global state, set up once before any thread calls it: 0 or -1. */
int ds_http_global_init(void);
void ds_http_global_cleanup(void);

#endif
