/*
 * cli_workflow.h - `charter workflow ...`: apply, list and show workflow definitions, and test
 * a definition against its own expected decisions.
 *
 * `charter workflow test FILE` applies FILE, runs it with the scripted adversary, recovers when
 * the expectations ask for it, and checks every expectation of the definition's expect list in
 * order (docs/workflows.md, "Expected decisions"), printing PASS or FAIL with what was observed.
 */
#ifndef CHARTER_CLI_WORKFLOW_H
#define CHARTER_CLI_WORKFLOW_H

#include <stdbool.h>
#include <stddef.h>

#include "charter.h"

/* The usage of `charter workflow`, after the command name. */
#define CLI_WORKFLOW_USAGE "apply FILE | list | show WORKFLOW | test FILE"

/* NULL when sub (with n_args arguments after it) is a valid `workflow` subcommand line, else a
 * one-line reason (static storage) for a usage error. */
const char *cli_workflow_usage(const char *sub, size_t n_args);

/* Runs subcommand sub with its argument arg (NULL when it takes none) through client, printing
 * to stdout (one JSON document when json is set) and errors to stderr. Returns the exit status:
 * 0 success, 1 a failed call or (test) a failed expectation, 2 a file that cannot be read. */
int cli_workflow_run(charter_client *client, bool json, const char *sub, const char *arg);

#endif
