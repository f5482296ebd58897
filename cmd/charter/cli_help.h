/*
 * cli_help.h - what `charter help COMMAND` and `charter COMMAND --help` add to a command's usage
 * line: its options, one example, and the advice the CLI gives when a token is missing or
 * refused (in the words of the CLI's own variables and options, not of the wire).
 */
#ifndef CHARTER_CLI_HELP_H
#define CHARTER_CLI_HELP_H

#include <stdbool.h>
#include <stdio.h>

/* Prints the options block ("options:" and one line per option) and the "example:" block of
 * command name to out. Prints nothing for a command without an entry. */
void cli_help_print_details(FILE *out, const char *name);

/* Records whether the caller gave a token (--token, CHARTER_TOKEN or CHARTER_OPERATOR_TOKEN),
 * for cli_help_auth_advice. */
void cli_help_note_token(const char *token);

/* One line for an UNAUTHENTICATED answer: which variable or option to set when no token was
 * given, which to check when the token was refused. Static storage. */
const char *cli_help_auth_advice(void);

#endif
