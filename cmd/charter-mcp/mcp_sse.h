/*
 * mcp_sse.h - the server-sent event streams of charter-mcp's conformance fixture (mcp_sse.c):
 * an answer streamed while its tool runs (notifications, the tool's own requests to the client,
 * then the answer), kept so that a client may resume it with Last-Event-ID, and the
 * subscriptions/listen streams of 2026-07-28. Used by mcp_http.c in fixture mode only.
 */
#ifndef CHARTER_MCP_SSE_H
#define CHARTER_MCP_SSE_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>

/* One stream: every event written to it (held until the last reference goes), and at most one
 * request of the server to the client awaiting its response. Thread-safe. */
typedef struct mcp_sse mcp_sse;

/* A new stream numbered n, one reference (the caller's); NULL when out of memory. Its event ids
 * are "n-k", k counting from 0; with priming, event 0 is the priming event (an id, the retry
 * delay, empty data) that lets the client resume before anything else was sent. */
mcp_sse *mcp_sse_new(unsigned n, bool priming);
void mcp_sse_ref(mcp_sse *st);
void mcp_sse_unref(mcp_sse *st);
unsigned mcp_sse_number(const mcp_sse *st);

/* Appends one JSON-RPC message (text) as an event. 0, or -1 when out of memory. */
int mcp_sse_append(mcp_sse *st, const char *json);
/* Whether anything but the priming event was appended. */
bool mcp_sse_has_events(const mcp_sse *st);
/* The answer is written: every reader ends after the last event. */
void mcp_sse_finish(mcp_sse *st);
/* Ends the stream's first reader (the POST's response) now; later readers (resumptions) read on
 * until the stream is finished. */
void mcp_sse_cut(mcp_sse *st);

/* A response (chunked text/event-stream) that reads st: from its start (after < 0, the first
 * reader) or from the event after event number after (a resumption). Holds a reference until
 * libmicrohttpd frees the response. NULL when out of memory. */
struct MHD_Response *mcp_sse_response(mcp_sse *st, long after);
/* The stream number and event number of a Last-Event-ID; -1 when it is none of ours. */
int mcp_sse_parse_id(const char *id, unsigned *n, unsigned *k);

/* Sends request (stolen) with a fresh id on st and waits at most timeout_ms for the response
 * that mcp_sse_deliver hands over (new reference), else NULL. */
json_t *mcp_sse_ask(mcp_sse *st, json_t *request, unsigned timeout_ms);
/* Hands response over to st's pending request when its id is that request's: true then. */
bool mcp_sse_deliver(mcp_sse *st, const json_t *response);

/* Keeps st (a reference is taken) as a subscriptions/listen stream that gets the list changes
 * asked for, tagged with subscription id sub; it leaves the list when its response is freed. */
int mcp_sse_listen(mcp_sse *st, bool tools, bool prompts, const char *sub);
/* Sends notifications/tools/list_changed (MCP_CHANGED_TOOLS) or prompts' to the listeners. */
void mcp_sse_broadcast(int changed);
/* Wakes every reader and ask to end them: the server is stopping. */
void mcp_sse_shutdown(void);

#endif
