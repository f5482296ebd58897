/*
 * fuzz_workflow.c - libFuzzer target for the workflow loader: a definition's JSON bytes
 * through workflow_load_buffer (parse, every rule of docs/workflows.md), and for a definition
 * that loads, the seed the graph is built from, the recovery step and each step's public
 * template rendered with no fields (which must be refused, never crash).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/workflow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    workflow *wf = NULL;
    char err[512];
    err[0] = '\0';
    if (workflow_load_buffer((const char *)data, size, &wf, err, sizeof err) != 0) {
        if (wf != NULL || err[0] == '\0') {
            fprintf(stderr, "fuzz_workflow: a refused definition left a workflow or no reason\n");
            abort();
        }
        return 0;
    }
    json_t *seed = workflow_seed_json(wf);
    if (seed == NULL) {
        abort();
    }
    char *dumped = json_dumps(seed, JSON_COMPACT);
    free(dumped);
    json_decref(seed);
    (void)workflow_recovery_step(wf);
    json_t *none = json_object();
    for (size_t i = 0; none != NULL && i < wf->n_steps; i++) {
        char *text = NULL;
        if (workflow_render_public(&wf->steps[i], none, &text, err, sizeof err) == 0) {
            free(text);
        }
    }
    json_decref(none);
    workflow_free(wf);
    return 0;
}
