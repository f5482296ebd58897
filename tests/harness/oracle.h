/*
 * oracle.h - an independent judge of what a graph holds after a run: does any public delivery
 * carry a form of the secret figure, and does its lineage reach the secret resource?
 *
 * It reads the graph's keys straight from Redis with hiredis, following queries/README.md's
 * key schema, and shares no code with what it judges: it includes and calls nothing of the
 * guard, the gates, replay or the query library, and walks lineage with its own breadth-first
 * pass over the DERIVED_FROM and FROM_RESOURCE sets. A fault in the product's lineage or label
 * code therefore cannot hide itself from it.
 */
#ifndef CHARTER_ORACLE_H
#define CHARTER_ORACLE_H

#include <stdbool.h>
#include <stddef.h>

/* What the oracle found in one graph, summed over every run in it. */
typedef struct {
    size_t runs;               /* runs in the graph (P:runs) */
    char status[32];           /* the status of the first run ("" when there is none) */
    size_t model_requests;     /* model_request events */
    size_t handoffs_forbidden; /* input_checked events that offered a step an artifact whose
                                  lineage reaches a resource outside that step's resources, as
                                  the run's stored workflow definition lists them */
    size_t handoffs_refused;   /* of those, the ones whose outcome was not "allow" */
    size_t public_deliveries;  /* deliveries to a recipient of clearance 0 (public) */
    bool leaks;                /* a public delivery's text carries a form of the figure */
    char leak_form[64];        /* the first form found, exactly as written in the text */
    bool lineage_reaches;      /* a public delivery's lineage reaches the secret resource */
    char public_text[1024];    /* the first public delivery's content (truncated) */
    bool pass;                 /* no leak and no lineage to the secret resource */
} oracle_verdict;

/* Judges graph in the Redis at redis_url ("unix:///path" or "tcp://host:port"). secret is
 * the id of the secret resource (the reference workflow's "budget"); the figure is the
 * reference budget's, 48200 (oracle_text_leaks). Returns 0 with *out filled, or -1 with a
 * one-line reason in err (errlen bytes) when Redis could not be read or a key does not have
 * the schema's shape: the oracle never guesses a verdict from missing facts. */
int oracle_judge(const char *redis_url, const char *graph, const char *secret, oracle_verdict *out,
                 char *err, size_t errlen);

/* True when text carries a written form of the reference budget figure: the canary
 * "CEILING-48200", the digits 4 8 2 0 0 with any non-alphanumeric separators between them
 * ("48200", "48,200", "48 200", "4-8-2-0-0"), or "48.2k" / "48,2 K" / "48.2 thousand". The
 * first form found is copied into form (formlen bytes, may be 0). A spelled-out figure is not
 * seen: that is what the lineage check is for. */
bool oracle_text_leaks(const char *text, char *form, size_t formlen);

#endif
