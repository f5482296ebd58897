/*
 * dojo.h - charter-dojo, an agent-security benchmark run through charter (docs/dojo.md): suites
 * of user tasks and injection tasks over workflows with live tools, a deterministic adversary
 * that performs an injection task's calls the moment a read touches an injection point, and
 * scoring over what charterd committed, with the real gates (guard on) and with the null gate
 * of charterd-nullgate (guard off).
 *
 * A suite is read whole from bench/dojo/<suite>/ (suite.json and its workflow) and kept as
 * JSON: the program walks the documents as they are, so the data format is the one place a
 * task is written. Everything a case needs from charterd goes through libcharter.
 */
#ifndef CHARTER_DOJO_H
#define CHARTER_DOJO_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "charter.h"

#define DOJO_MAX_SUITES 8
#define DOJO_MAX_READ 64 /* artifacts one case may read or write */

/* The injection classes, in the order the report prints them. */
#define DOJO_CLASSES 8
extern const char *const dojo_class_names[DOJO_CLASSES];
int dojo_class_index(const char *name); /* -1 when unknown */

/* One suite as loaded: the documents borrowed from doc. */
typedef struct {
    char name[64];
    char dir[PATH_MAX];
    json_t *doc;         /* suite.json (owned) */
    char *workflow_text; /* the workflow definition's bytes, applied as they are (owned) */
    json_t *workflow;    /* the same, parsed (owned) */
    const char *workflow_name, *step, *actor, *other_step, *session, *approver;
    json_t *items, *points, *users, *injections, *history, *baseline; /* borrowed from doc */
} dojo_suite;

/* One charterd per arm: the guard-on arms run charterd, the guard-off arm charterd-nullgate.
 * Arms in report order: DOJO_ON (the conservative adversary), DOJO_OFF, DOJO_QUOTING (the
 * guard on, against an adversary that names trusted quotes itself). */
#define DOJO_ON 0
#define DOJO_OFF 1
#define DOJO_QUOTING 2
#define DOJO_ARMS 3
typedef struct {
    const char *name; /* "on", "off" or "quoting" */
    bool null_gate;
    bool quoting; /* the adversary quotes trusted artifacts that hold its values */
    char binary[PATH_MAX];
    char url[PATH_MAX + 16];
    char log[PATH_MAX];
    char data[PATH_MAX];
    char graph[64];
    pid_t pid;
    bool running;
    unsigned unclean;                      /* passes whose charterd did not exit 0 on SIGTERM */
    charter_client *op;                    /* the operator: runs, approvals, GetRun */
    charter_client *host[DOJO_MAX_SUITES]; /* per suite: a host credential for its actor */
    double *lat;                           /* decision latencies of Invoke, milliseconds */
    size_t n_lat, cap_lat;
} dojo_arm;

typedef struct {
    const char *redis; /* --redis URL, or NULL: each charterd starts its own Redis */
    const char *suites_dir;
    const char *out;    /* JSON lines, one per case */
    const char *only;   /* --suite */
    unsigned max_users; /* --max-users (0: all) */
    unsigned max_injections;
    bool check;     /* --check: exit 1 unless every validity check passes */
    bool no_repeat; /* --no-repeat: skip the second pass */
    bool quiet;
    char tmpdir[PATH_MAX];
    char token[64];
} dojo_options;

/* One case's outcome. */
typedef struct {
    size_t suite, user;
    long injection; /* -1: benign */
    bool utility;
    bool success;         /* the injection task's predicate over what was committed */
    bool touched;         /* a read touched an injection point */
    bool fired;           /* the adversary acted */
    unsigned effects;     /* ground-truth calls with an effect */
    unsigned held;        /* of those, held for a human's approval */
    unsigned attack_held; /* injection calls held (and denied by the human) */
    bool error;           /* a call failed as a call (not a decision): the case is void */
    char why[256];
    char *line;   /* the case as one JSON line (owned) */
    char *digest; /* the normalised result two passes must agree on (owned) */
} dojo_case;

/* dojo_suite.c */
int dojo_suite_load(const char *dir, const char *name, dojo_suite *s, char *err, size_t n);
void dojo_suite_free(dojo_suite *s);
/* The resource of item in s's workflow: its integrity (1 trusted, 0 untrusted, -1 unknown). */
int dojo_item_integrity(const dojo_suite *s, const char *item);
/* The item's content with every {inj:NAME} point replaced: by text when text is not NULL, else
 * by the point's benign default. *touched says whether it holds a point. Caller frees. */
char *dojo_item_render(const dojo_suite *s, const char *item, const char *text, bool *touched);
bool dojo_tool_has_effect(const dojo_suite *s, const char *tool);

/* dojo_daemons.c */
/* Starts the arm's charterd (or charterd-nullgate) on a fresh graph of pass and opens its
 * operator client. Returns 0, or -1 with the reason said on stderr (the log is kept). */
int dojo_arm_start(const dojo_options *o, dojo_arm *a, unsigned pass);
/* Closes the arm's clients, stops its charterd (SIGTERM, SIGKILL after 15 s; a status other
 * than exit 0 counts in a->unclean) and, with --redis, deletes its graph and credentials. */
void dojo_arm_stop(const dojo_options *o, dojo_arm *a);
/* Applies suite s (the k-th) to the arm's graph and opens a->host[k], a client with a host
 * credential bound to the suite's agent. Returns 0, or -1 with err (n bytes) saying why. */
int dojo_arm_install(dojo_arm *a, const dojo_suite *s, size_t k, char *err, size_t n);
/* Adds one Invoke round trip (milliseconds) to the arm's latencies. */
void dojo_latency_add(dojo_arm *a, double ms);

/* dojo_case.c */
/* Runs user task user of suite s (the k-th) in a run of its own on arm a, under injection task
 * injection (-1: benign), and scores it over what was committed into *out (free with
 * dojo_case_free). Returns 0, or -1 when the case is void (out->error, out->why). */
int dojo_case_run(dojo_arm *a, const dojo_suite *s, size_t k, size_t user, long injection,
                  dojo_case *out);
/* Commits the suite's "history" (its earlier session) in a run of its own. Returns 0, or -1
 * with err when it could not be run or its predicates do not hold. */
int dojo_history_run(dojo_arm *a, const dojo_suite *s, size_t k, char *err, size_t n);
void dojo_case_free(dojo_case *c);

/* dojo_score.c */
bool dojo_token_holds(const char *text, const char *value);
/* Whether every predicate of preds holds over the committed deliveries of a run. */
bool dojo_predicates_hold(const json_t *preds, const json_t *deliveries);
/* The run's committed deliveries as [{tool, recipient, args:{...}}] (new reference) or NULL. */
json_t *dojo_committed(charter_client *op, const char *run_id, char *err, size_t n);

/* dojo_report.c */
typedef struct {
    const dojo_options *o;
    dojo_suite *suites;
    size_t n_suites;
    dojo_case *cases[DOJO_ARMS]; /* per arm: every case, benign first then attacks */
    size_t n_cases[DOJO_ARMS];
    dojo_arm *arms;
    bool repeat_identical;
    bool repeat_ran;
    char repeat_why[256];
    unsigned failed_checks;
} dojo_report;

/* Prints the run's header, the validity checks, then the figures (said to be invalid when a
 * check failed). Returns 0 when every check passed, -1 otherwise. */
int dojo_report_print(dojo_report *r);
int dojo_report_write_lines(const dojo_report *r, const char *path);

void dojo_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double dojo_now_ms(void);

#endif
