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

/* True when one line per successful call is wanted. */
bool log_verbose(void);

/* An informational event ("serving graph ..."); dropped with --quiet. */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* An error event (a failed call, the embedded database died); always written. */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The one line of a startup failure, "charterd: " followed by the message, no timestamp. */
void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
