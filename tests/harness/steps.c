/*
 * steps.c - the libcharter calls the multi-process suites repeat to set a run up: create a
 * run, open a step, read a source, apply a workflow file, a payments run with its bill (each
 * prints what charterd said when it fails, so a suite's setup failure names its cause), and
 * running the CLI through the shell.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "charter.h"
#include "harness.h"

int harness_create_run(charter_client *c, const char *mode, const char *workflow, char run_id[129],
                       char status[32], charter_status *st)
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    req.mode = (char *)mode;
    req.workflow = (char *)(workflow ? workflow : "");
    Charter__V1__RunView *view = NULL;
    charter_status local;
    int rc = charter_create_run(c, &req, &view, st ? st : &local);
    if (rc != 0) {
        if (!st)
            fprintf(stderr, "CreateRun: %s: %s\n", charter_status_name(local.code), local.message);
        return rc;
    }
    snprintf(run_id, 129, "%s", view->run->id);
    if (status)
        snprintf(status, 32, "%s", view->run->status);
    charter__v1__run_view__free_unpacked(view, NULL);
    return 0;
}

int harness_open_step(charter_client *c, const char *run_id, const char *step, char ctx[129])
{
    Charter__V1__OpenStepRequest req = CHARTER__V1__OPEN_STEP_REQUEST__INIT;
    req.run_id = (char *)run_id;
    req.step = (char *)step;
    Charter__V1__StepContext *sc = NULL;
    charter_status st;
    int rc = charter_open_step(c, &req, &sc, &st);
    if (rc != 0) {
        fprintf(stderr, "OpenStep: %s: %s\n", charter_status_name(st.code), st.message);
        return rc;
    }
    snprintf(ctx, 129, "%s", sc->context_id);
    charter__v1__step_context__free_unpacked(sc, NULL);
    return 0;
}

int harness_read_source(charter_client *c, const char *ctx, const char *resource, char id[129])
{
    Charter__V1__ReadSourceRequest req = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    req.context_id = (char *)ctx;
    req.resource_id = (char *)resource;
    Charter__V1__ReadSourceResponse *r = NULL;
    charter_status st;
    if (charter_read_source(c, &req, &r, &st) != 0) {
        fprintf(stderr, "ReadSource: %s: %s\n", charter_status_name(st.code), st.message);
        return -1;
    }
    int ok = r->decision && r->decision->outcome == CHARTER__V1__OUTCOME__ALLOW && r->artifact;
    if (ok)
        snprintf(id, 129, "%s", r->artifact->id);
    charter__v1__read_source_response__free_unpacked(r, NULL);
    return ok ? 0 : -1;
}

int harness_apply_workflow_file(charter_client *c, const char *path)
{
    char *bytes = harness_slurp(path);
    if (bytes == NULL) {
        fprintf(stderr, "ApplyWorkflow: cannot read %s\n", path);
        return -1;
    }
    Charter__V1__ApplyWorkflowRequest wr = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    wr.definition.data = (uint8_t *)bytes;
    wr.definition.len = strlen(bytes);
    Charter__V1__WorkflowInfo *info = NULL;
    charter_status st;
    int rc = charter_apply_workflow(c, &wr, &info, &st);
    free(bytes);
    if (rc != 0) {
        fprintf(stderr, "ApplyWorkflow %s: %s: %s\n", path, charter_status_name(st.code),
                st.message);
        return -1;
    }
    charter__v1__workflow_info__free_unpacked(info, NULL);
    return 0;
}

int harness_payments_run(charter_client *c, char run[129], char ctx[129], char bill[129])
{
    if (harness_apply_workflow_file(c, CHARTER_SOURCE_DIR "/deploy/workflows/payments.json") != 0 ||
        harness_create_run(c, "external", "payments", run, NULL, NULL) != 0 ||
        harness_open_step(c, run, "pay", ctx) != 0)
        return -1;
    Charter__V1__ObserveSourceRequest req = CHARTER__V1__OBSERVE_SOURCE_REQUEST__INIT;
    req.context_id = ctx;
    req.resource_id = "bill";
    req.content = "Electricity bill INV-7731. Amount due: 84.20 EUR. Pay to IBAN "
                  "DE89370400440532013000.";
    req.locator = "file:///bills/inv-7731.txt";
    Charter__V1__ObserveSourceResponse *r = NULL;
    charter_status st;
    if (charter_observe_source(c, &req, &r, &st) != 0) {
        fprintf(stderr, "ObserveSource: %s: %s\n", charter_status_name(st.code), st.message);
        return -1;
    }
    int ok = r->artifact != NULL;
    if (ok)
        snprintf(bill, 129, "%s", r->artifact->id);
    charter__v1__observe_source_response__free_unpacked(r, NULL);
    return ok ? 0 : -1;
}

int harness_sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof cmd)
        return -1;
    int rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

char *harness_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    (void)n;
    fclose(f);
    return buf;
}
