/*
 * cli_print.h - the `charter` CLI's human-readable output: decision lines, run and event
 * tables, grant chains and artifact ancestry trees.
 *
 * Every function writes to out and returns nothing: a write error is caught once, by the
 * caller checking ferror(out) before exiting.
 */
#ifndef CHARTER_CLI_PRINT_H
#define CHARTER_CLI_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "charter.h"

/* Columns a table line aims to fit in; longer text is wrapped under its own column. */
#define CLI_TABLE_WIDTH 100
/* Hex characters of a hash kept in human output (the --json output keeps all of them). */
#define CLI_SHORT_HASH_LEN 12

/* A hash (40 or more lowercase hex characters) shortened to its first CLI_SHORT_HASH_LEN
 * characters and "…" in buf (size bytes, at least CLI_SHORT_HASH_LEN + 4); returns buf, or s
 * itself when it is not such a hash ("-" for NULL or empty). */
const char *cli_short_hash(const char *s, char *buf, size_t size);

/* "allow", "deny", "unknown", or "-" for OUTCOME_UNSPECIFIED. */
const char *cli_outcome_word(int outcome);

/* Seconds since the epoch as "YYYY-MM-DDTHH:MM:SSZ" (UTC) into buf, or "-" for 0. */
void cli_format_time(double ts, char *buf, size_t size);

/* One decision line: action, target, outcome, then codes and witness when present, e.g.
 * "handoff  report     deny  INPUT_OUT_OF_SCOPE  budget (confidential) → ...". d may be NULL
 * (printed as unknown). */
void cli_print_decision(FILE *out, const char *action, const char *target,
                        const Charter__V1__Decision *d);

/* A ReplayDecision answer for event seq: the recorded and the replayed decision lines, whether
 * they match, the evaluator and its version, and the archive it came from when it left the
 * database; `charter replay RUN SEQ` and `charter replay --archive FILE SEQ` alike. */
void cli_print_replay(FILE *out, const char *seq, const Charter__V1__ReplayDecisionResponse *r);

/* The decision events of a run, one decision line each (action and target from the event's
 * kind and detail). */
void cli_print_decision_events(FILE *out, Charter__V1__Event *const *events, size_t n);

/* A run's fields as "name  value" lines. */
void cli_print_run(FILE *out, const Charter__V1__Run *r);
/* Events as a table sized to its content: seq, time, kind, outcome, then codes and witness, or
 * the detail (a JSON object shown as "key value" pairs), wrapped under its column. */
void cli_print_events(FILE *out, Charter__V1__Event *const *events, size_t n);
/* The events of one batch of a followed run (WaitRun answers as they arrive), in fixed-width
 * columns; the header only before the first batch (*header_done false), then *header_done is
 * set. n == 0 prints nothing. */
void cli_print_events_follow(FILE *out, Charter__V1__Event *const *events, size_t n,
                             bool *header_done);
void cli_print_deliveries(FILE *out, Charter__V1__Delivery *const *d, size_t n);
void cli_print_artifacts(FILE *out, Charter__V1__Artifact *const *a, size_t n);
/* Run, events, deliveries and artifacts of a RunView. */
void cli_print_run_view(FILE *out, const Charter__V1__RunView *v);
/* Runs as a table, one line each. */
void cli_print_run_list(FILE *out, Charter__V1__Run *const *runs, size_t n);
/* A grant's fields as an indented block. */
void cli_print_grant(FILE *out, const Charter__V1__Grant *g);
/* The chain "leaf → ... → root", the guard's verdict, then each grant. */
void cli_print_chain(FILE *out, const Charter__V1__GrantChain *c);
/* The ancestry of artifact root as a tree over the parents listed in artifacts; an artifact
 * reached twice is expanded once. Artifacts the tree does not reach are listed after it. */
void cli_print_trace(FILE *out, const char *root, Charter__V1__Artifact *const *artifacts,
                     size_t n);
/* A step context's capability as "name  value" lines, the context id first. */
void cli_print_step_context(FILE *out, const Charter__V1__StepContext *s);
/* An artifact on one line: id, kind, labels, step, title, then its resources or parents. */
void cli_print_artifact_line(FILE *out, const char *indent, const Charter__V1__Artifact *a);
void cli_print_health(FILE *out, const Charter__V1__HealthResponse *h);

#endif
