/*
 * log.h - charterd's log: one line per event on stderr, each with a UTC timestamp.
 *
 * Lines are written with a single write(2) so lines from concurrent workers never interleave.
 * Startup failures are not events: they are the process's one-line answer and are printed by
 * log_fatal without a timestamp, as "charterd: <what is wrong> (<how to fix>)".
 */
#ifndef CHARTER_LOG_H
#define CHARTER_LOG_H

#include <stdbool.h>

/* quiet drops informational lines (errors are always written); verbose adds one line per
 * successful call. Call once before any thread logs. */
void log_init(bool quiet, bool verbose);

/* With json, every timestamped line is one JSON object (jansson) instead of text:
 * {"time", "level" ("info", "warn" for refused calls, "error"), "message"} and, for a line written
 * while a call is being logged (log_set_call), "method", "code" (its gRPC name), "duration_us",
 * "tenant" (the graph) and "request_id". log_fatal stays plain text (it is the process's one-line
 * answer). Call once before any thread logs. */
void log_set_json(bool json);

/* The call a thread is logging: the fields its lines carry in the JSON format. f is borrowed
 * until log_set_call(NULL); thread-local, so workers never see each other's calls. */
typedef struct {
    const char *method;
    const char *code; /* gRPC status name, "OK" */
    long duration_us;
    const char *tenant;
    const char *request_id;
} log_call_fields;
void log_set_call(const log_call_fields *f);

/* True when one line per successful call is wanted. */
bool log_verbose(void);

/* An informational event ("serving graph ..."); dropped with --quiet. */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* An error event (a failed call, the embedded database died); always written. */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A refused or failed call (code is its gRPC status, name that status's name). Under a flood
 * the log stays readable: in each second at most LOG_REFUSALS_PER_SECOND such lines are written
 * in full, the others are only counted, and the next refusal after that second (or
 * log_refusal_flush) writes one summary line with the counts per code, e.g.
 * "4120 more refused calls not logged since 12:00:01: INVALID_ARGUMENT 4100, UNAUTHENTICATED
 * 20". Written with --quiet too, as errors are. Thread-safe. */
#define LOG_REFUSALS_PER_SECOND 5
void log_refusal(int code, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes the summary line of refusals counted but not yet logged, if any (at shutdown). */
void log_refusal_flush(void);

/* The one line of a startup failure, "charterd: " followed by the message, no timestamp. */
void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
