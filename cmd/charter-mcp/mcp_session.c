/*
 * mcp_session.c - the external runs an MCP session ends. Nothing in charterd ends an external
 * run on its own: it would stay created, never get its run receipt and never leave the
 * database under retention. A session that serves the workflow's last step keeps the runs it
 * started (a one-step workflow) or joined, and completes them (Runs/CompleteRun) when it
 * ends: stdin closed, an HTTP session deleted, expired or replaced, or the server stopping.
 * A session of an earlier step leaves its run open for the steps after it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

void mcp_started_add(mcp_server *srv, mcp_session *s, const char *run_id)
{
    if (s->n_started_runs == MCP_MAX_STARTED_RUNS) {
        mcp_complete_run(srv, s->started_runs[0],
                         "the MCP session started more runs than charter-mcp keeps open for it");
        memmove(s->started_runs[0], s->started_runs[1],
                (MCP_MAX_STARTED_RUNS - 1) * sizeof s->started_runs[0]);
        s->n_started_runs--;
    }
    snprintf(s->started_runs[s->n_started_runs++], sizeof(mcp_run_id), "%s", run_id);
}

size_t mcp_session_take_runs(mcp_session *s, mcp_run_id **runs)
{
    *runs = NULL;
    size_t n = s->n_started_runs;
    if (n == 0)
        return 0;
    if ((*runs = malloc(n * sizeof **runs)) == NULL) {
        fprintf(stderr, "charter-mcp: out of memory: %zu runs of an ended session are left open\n",
                n);
        return 0;
    }
    memcpy(*runs, s->started_runs, n * sizeof **runs);
    s->n_started_runs = 0;
    return n;
}

void mcp_complete_run(mcp_server *srv, const char *run_id, const char *why)
{
    char reason[512];
    snprintf(reason, sizeof reason, "charter-mcp: %s", why);
    Charter__V1__CompleteRunRequest req = CHARTER__V1__COMPLETE_RUN_REQUEST__INIT;
    req.run_id = (char *)run_id;
    req.reason = reason;
    Charter__V1__Run *r = NULL;
    charter_status st;
    if (charter_complete_run(srv->client, &req, &r, &st) == 0)
        fprintf(stderr, "charter-mcp: completed run %s (%s)\n", run_id, why);
    else
        fprintf(stderr, "charter-mcp: run %s is left open (%s): %s\n", run_id, why,
                st.message[0] ? st.message : "charterd did not answer");
    charter__v1__run__free_unpacked(r, NULL);
}

void mcp_session_end(mcp_server *srv, mcp_session *s, const char *why)
{
    mcp_run_id *runs = NULL;
    size_t n = mcp_session_take_runs(s, &runs);
    for (size_t i = 0; i < n; i++)
        mcp_complete_run(srv, runs[i], why);
    free(runs);
    mcp_session_reset(s);
}
