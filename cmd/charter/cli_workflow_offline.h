/*
 * cli_workflow_offline.h - `charter workflow validate FILE` and `charter workflow test FILE`:
 * a workflow definition checked, and the cases of a test file decided, by the code charterd
 * runs (server/policy/), in this process, with no charterd, no database and no file written.
 *
 * The test file format is docs/workflows.md "Test files".
 */
#ifndef CHARTER_CLI_WORKFLOW_OFFLINE_H
#define CHARTER_CLI_WORKFLOW_OFFLINE_H

#include <stdbool.h>

/* Checks the definition at path with charterd's validator and prints every problem it finds as
 * "PATH: FIELD PATH: rule" (stderr), or one line saying it is valid (stdout); json prints one
 * document instead. Returns 0 valid, 1 problems found, 2 the file cannot be read. */
int cli_workflow_validate(const char *path, bool json);

/* Decides every case of the test file at path under the workflow it names and prints PASS or
 * FAIL per case with the expected and the observed verdict (json: one document). Returns 0 when
 * every case passed, 1 when one failed or the workflow is not valid, 2 when the test file cannot
 * be read or breaks a rule of the format (one line naming the field path). */
int cli_workflow_test(const char *path, bool json);

#endif
