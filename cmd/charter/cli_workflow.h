/*
 * cli_workflow.h - `charter workflow ...`: apply, list and show workflow definitions on a
 * charterd, rehearse a definition's own expected decisions there, and (cli_workflow_offline.h)
 * validate a definition or decide a test file's cases with no charterd at all.
 *
 * `charter workflow rehearse FILE` applies FILE, runs it with the scripted adversary, recovers
 * when the expectations ask for it, and checks every expectation of the definition's expect
 * list in order (docs/workflows.md, "Expected decisions"), printing PASS or FAIL with what was
 * observed. It writes the definition and a run into the graph; validate and test write nothing.
 */
#ifndef CHARTER_CLI_WORKFLOW_H
#define CHARTER_CLI_WORKFLOW_H

#include <stdbool.h>
#include <stddef.h>

#include "charter.h"

/* The usage of `charter workflow`, after the command name. */
#define CLI_WORKFLOW_USAGE                                                                         \
    "validate FILE | test TESTFILE | apply FILE | list | show WORKFLOW | rehearse FILE"

/* NULL when sub (with n_args arguments after it) is a valid `workflow` subcommand line, else a
 * one-line reason (static storage) for a usage error. */
const char *cli_workflow_usage(const char *sub, size_t n_args);

/* True when sub runs with no charterd (validate, test): no connection is opened for it. */
bool cli_workflow_offline(const char *sub);

/* Runs subcommand sub with its argument arg (NULL when it takes none) through client (NULL for
 * an offline subcommand), printing to stdout (one JSON document when json is set) and errors
 * to stderr. Returns the exit status: 0 success, 1 a failed call, a definition with problems
 * (validate) or a failed expectation or case (rehearse, test), 2 a file that cannot be read or
 * a test file that breaks a rule of its format. */
int cli_workflow_run(charter_client *client, bool json, const char *sub, const char *arg);

/* Reads the file at path whole (at most 4 MiB) into *out (NUL-terminated, the caller frees;
 * *len excludes the terminator). Returns 0, or 2 after printing why it could not. */
int cli_workflow_read(const char *path, char **out, size_t *len);

#endif
