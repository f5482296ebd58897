/*
 * cli_workflow.c - `charter workflow apply|list|show|rehearse` on a charterd; validate and test
 * run offline (cli_workflow_offline.c).
 *
 * rehearse is the one with logic of its own: it drives a scripted run of the definition it
 * applied and walks the definition's expect list in order. Event expectations match the first
 * event of their kind and step after the previously matched event (or after the last recovery),
 * so the list reads as the run's story; a recovery expectation performs the recovery it
 * describes.
 */
#include "cli_workflow.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_help.h"
#include "cli_json.h"
#include "cli_print.h"
#include "cli_workflow_offline.h"

/* Largest file read: above the server's 1 MiB limit, so the server names the limit itself,
 * below anything that could not be sent. */
#define CLI_WORKFLOW_MAX_FILE ((size_t)4 * 1024 * 1024)

enum { WF_OK = 0, WF_FAIL = 1, WF_USAGE = 2 };

const char *cli_workflow_usage(const char *sub, size_t n_args)
{
    if (strcmp(sub, "list") == 0)
        return n_args == 0 ? NULL : "workflow list takes no argument";
    if (strcmp(sub, "apply") == 0 || strcmp(sub, "rehearse") == 0 || strcmp(sub, "validate") == 0)
        return n_args == 1 ? NULL : "workflow validate, apply and rehearse take one FILE";
    if (strcmp(sub, "test") == 0)
        return n_args == 1 ? NULL : "workflow test takes one TESTFILE";
    if (strcmp(sub, "get") == 0 || strcmp(sub, "show") == 0)
        return n_args == 1 ? NULL : "workflow show takes one WORKFLOW (a version or a name)";
    return "unknown workflow subcommand (validate, test, apply, list, show, rehearse)";
}

bool cli_workflow_offline(const char *sub)
{
    return strcmp(sub, "validate") == 0 || strcmp(sub, "test") == 0;
}

static int call_failed(const char *what, const charter_status *st)
{
    fprintf(stderr, "charter: %s: %s: ", what, charter_status_name(st->code));
    if (st->code == CHARTER_UNAUTHENTICATED) {
        fprintf(stderr, "%s\n", cli_help_auth_advice());
        return WF_FAIL;
    }
    for (const char *p = st->message; *p != '\0'; p++)
        fputc(*p == '\n' || *p == '\r' ? ' ' : *p, stderr);
    if (st->message[0] == '\0')
        fputs("(no message)", stderr);
    fputc('\n', stderr);
    return WF_FAIL;
}

int cli_workflow_read(const char *path, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "charter: cannot open %s: %s\n", path, strerror(errno));
        return WF_USAGE;
    }
    char *buf = malloc(CLI_WORKFLOW_MAX_FILE + 1);
    if (buf == NULL) {
        fclose(f);
        fprintf(stderr, "charter: out of memory reading %s\n", path);
        return WF_USAGE;
    }
    size_t n = fread(buf, 1, CLI_WORKFLOW_MAX_FILE + 1, f);
    bool failed = ferror(f) != 0;
    fclose(f);
    if (failed || n > CLI_WORKFLOW_MAX_FILE) {
        free(buf);
        fprintf(stderr, "charter: cannot read %s%s\n", path,
                failed ? "" : ": larger than 4 MiB (a definition is at most 1 MiB)");
        return WF_USAGE;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return WF_OK;
}

static int print_message_json(const ProtobufCMessage *m)
{
    return cli_json_print_message(m) == 0 ? WF_OK : WF_FAIL;
}

static void print_info(const Charter__V1__WorkflowInfo *w)
{
    char when[32];
    cli_format_time(w->applied_at, when, sizeof when);
    printf("%-10s%s\n%-10s%s\n%-10s%s\n%-10s", "workflow", w->name, "version", w->version,
           "applied", when, "steps");
    for (size_t i = 0; i < w->n_steps; i++)
        printf("%s%s", i > 0 ? " → " : "", w->steps[i]);
    if (w->n_steps == 0)
        fputs("-", stdout);
    printf("\n%-10s%s\n", "task", w->task);
}

/* ApplyWorkflow of the file at path; *info on success (caller frees). */
static int apply_file(charter_client *client, const char *path, char **bytes,
                      Charter__V1__WorkflowInfo **info)
{
    size_t len = 0;
    int rv = cli_workflow_read(path, bytes, &len);
    if (rv != WF_OK)
        return rv;
    Charter__V1__ApplyWorkflowRequest req = CHARTER__V1__APPLY_WORKFLOW_REQUEST__INIT;
    req.definition.data = (uint8_t *)*bytes;
    req.definition.len = len;
    charter_status st;
    if (charter_apply_workflow(client, &req, info, &st) != 0)
        return call_failed("workflow apply", &st);
    return WF_OK;
}

static int cmd_apply(charter_client *client, bool json, const char *path)
{
    char *bytes = NULL;
    Charter__V1__WorkflowInfo *info = NULL;
    int rv = apply_file(client, path, &bytes, &info);
    free(bytes);
    if (rv != WF_OK)
        return rv;
    if (json) {
        rv = print_message_json(&info->base);
    } else {
        printf("%s %s\n\n", info->created ? "applied" : "already applied (nothing changed):", path);
        print_info(info);
    }
    charter__v1__workflow_info__free_unpacked(info, NULL);
    return rv;
}

static int cmd_list(charter_client *client, bool json)
{
    Charter__V1__ListWorkflowsResponse *r = NULL;
    charter_status st;
    if (charter_list_workflows(client, NULL, &r, &st) != 0)
        return call_failed("workflow list", &st);
    int rv = WF_OK;
    if (json) {
        rv = print_message_json(&r->base);
    } else {
        /* Versions shortened to fit 100 columns; workflow show and --json give them whole. */
        int name_w = 4;
        for (size_t i = 0; i < r->n_workflows; i++)
            if ((int)strlen(r->workflows[i]->name) > name_w)
                name_w = (int)strlen(r->workflows[i]->name);
        printf("%-*s  %-*s  %-20s %s\n", name_w, "NAME", CLI_SHORT_HASH_LEN + 1, "VERSION",
               "APPLIED", "STEPS");
        for (size_t i = 0; i < r->n_workflows; i++) {
            const Charter__V1__WorkflowInfo *w = r->workflows[i];
            char when[32], version[32];
            cli_format_time(w->applied_at, when, sizeof when);
            printf("%-*s  %s  %-20s", name_w, w->name,
                   cli_short_hash(w->version, version, sizeof version), when);
            for (size_t k = 0; k < w->n_steps; k++)
                printf("%s%s", k > 0 ? " → " : " ", w->steps[k]);
            putchar('\n');
        }
        if (r->n_workflows == 0)
            printf("(no workflow applied)\n");
    }
    charter__v1__list_workflows_response__free_unpacked(r, NULL);
    return rv;
}

static int cmd_get(charter_client *client, bool json, const char *ref)
{
    Charter__V1__GetWorkflowRequest req = CHARTER__V1__GET_WORKFLOW_REQUEST__INIT;
    Charter__V1__WorkflowDefinition *r = NULL;
    charter_status st;
    req.workflow = (char *)ref;
    if (charter_get_workflow(client, &req, &r, &st) != 0)
        return call_failed("workflow show", &st);
    int rv = WF_OK;
    if (json) {
        rv = print_message_json(&r->base);
    } else {
        if (r->info != NULL)
            print_info(r->info);
        if (r->definition.len > 0) {
            fputs("\n", stdout);
            fwrite(r->definition.data, 1, r->definition.len, stdout);
            if (r->definition.data[r->definition.len - 1] != '\n')
                fputc('\n', stdout);
        } else {
            printf("\n(the definition is shown to the operator only)\n");
        }
    }
    charter__v1__workflow_definition__free_unpacked(r, NULL);
    return rv;
}

/* ---- test ---------------------------------------------------------------------------------- */

/* What a test run has done so far. */
typedef struct {
    charter_client *client;
    bool json;
    char run_id[129];
    uint64_t cursor; /* event expectations match events after this seq */
    unsigned passed, failed;
    json_t *results; /* --json: one object per expectation */
} wf_test;

/* The step named in an event's JSON detail, or "". */
static void event_step(const Charter__V1__Event *e, char *out, size_t n)
{
    out[0] = '\0';
    json_t *d = e->detail != NULL ? json_loads(e->detail, 0, NULL) : NULL;
    const char *s = json_string_value(json_object_get(d, "step"));
    if (s != NULL)
        snprintf(out, n, "%s", s);
    json_decref(d);
}

/* True when the codes of expect (a JSON list, or NULL: anything) are exactly codes[0..n). */
static bool codes_match(const json_t *expect, char *const *codes, size_t n)
{
    if (expect == NULL)
        return true;
    if (json_array_size(expect) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        bool found = false;
        size_t k;
        json_t *c;
        json_array_foreach(expect, k, c)
        {
            found = found || strcmp(json_string_value(c), codes[i]) == 0;
        }
        if (!found)
            return false;
    }
    return true;
}

/* "deny INPUT_OUT_OF_SCOPE,GRANT_INVALID witness "..."" of a decision into buf. */
static void decision_text(const char *outcome, char *const *codes, size_t n, const char *witness,
                          char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "%s", outcome);
    for (size_t i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i == 0 ? " " : ",", codes[i]);
    if (witness != NULL && witness[0] != '\0' && used < size)
        snprintf(buf + used, size - used, " witness \"%s\"", witness);
}

/* The expected decision of an event or recover expectation, as text. */
static void expected_text(const json_t *x, char *buf, size_t size)
{
    const json_t *codes = json_object_get(x, "codes");
    char *list[32];
    size_t n = 0;
    size_t i;
    json_t *c;
    json_array_foreach(codes, i, c)
    {
        if (n < 32)
            list[n++] = (char *)json_string_value(c);
    }
    decision_text(json_string_value(json_object_get(x, "outcome")), list, n,
                  json_string_value(json_object_get(x, "witness")), buf, size);
}

/* True when the decision fits the expectation x (outcome, and codes and witness when given). */
static bool decision_matches(const json_t *x, const char *outcome, char *const *codes, size_t n,
                             const char *witness)
{
    const char *want = json_string_value(json_object_get(x, "outcome"));
    const char *want_witness = json_string_value(json_object_get(x, "witness"));
    if (want == NULL || strcmp(want, outcome) != 0)
        return false;
    if (!codes_match(json_object_get(x, "codes"), codes, n))
        return false;
    return want_witness == NULL || strcmp(want_witness, witness != NULL ? witness : "") == 0;
}

static void report(wf_test *t, size_t index, bool pass, const char *expected, const char *observed)
{
    if (pass)
        t->passed++;
    else
        t->failed++;
    if (t->json) {
        json_array_append_new(t->results,
                              json_pack("{s:I, s:b, s:s, s:s}", "index", (json_int_t)index, "pass",
                                        pass, "expected", expected, "observed", observed));
        return;
    }
    printf("%s  expect[%zu]  %s\n      observed: %s\n", pass ? "PASS" : "FAIL", index, expected,
           observed);
}

static Charter__V1__RunView *load_run(wf_test *t, charter_status *st)
{
    Charter__V1__GetRunRequest req = CHARTER__V1__GET_RUN_REQUEST__INIT;
    Charter__V1__RunView *v = NULL;
    req.run_id = t->run_id;
    req.limit = 100000;
    if (charter_get_run(t->client, &req, &v, st) != 0)
        return NULL;
    return v;
}

static int check_event(wf_test *t, size_t index, const json_t *x)
{
    char expected[1024], observed[1024];
    const char *step = json_string_value(json_object_get(x, "step"));
    const char *kind = json_string_value(json_object_get(x, "event"));
    char want[768];
    expected_text(x, want, sizeof want);
    snprintf(expected, sizeof expected, "step %s %s: %s", step, kind, want);
    charter_status st;
    Charter__V1__RunView *v = load_run(t, &st);
    if (v == NULL)
        return call_failed("GetRun", &st);
    const Charter__V1__Event *found = NULL;
    for (size_t i = 0; i < v->n_events && found == NULL; i++) {
        const Charter__V1__Event *e = v->events[i];
        char s[80];
        if (e->seq <= t->cursor || strcmp(e->kind, kind) != 0)
            continue;
        event_step(e, s, sizeof s);
        if (strcmp(s, step) == 0)
            found = e;
    }
    if (found == NULL) {
        snprintf(observed, sizeof observed, "no %s event of step %s after event %llu", kind, step,
                 (unsigned long long)t->cursor);
        report(t, index, false, expected, observed);
    } else {
        const char *outcome = cli_outcome_word(found->outcome);
        char got[768];
        decision_text(outcome, found->codes, found->n_codes, found->witness, got, sizeof got);
        snprintf(observed, sizeof observed, "%s (event %llu)", got, (unsigned long long)found->seq);
        report(t, index, decision_matches(x, outcome, found->codes, found->n_codes, found->witness),
               expected, observed);
        t->cursor = found->seq;
    }
    charter__v1__run_view__free_unpacked(v, NULL);
    return WF_OK;
}

static int check_recover(wf_test *t, size_t index, const json_t *x)
{
    char expected[1024], observed[1024], want[768];
    expected_text(x, want, sizeof want);
    snprintf(expected, sizeof expected, "recover: %s", want);
    charter_status st;
    Charter__V1__RunView *v = load_run(t, &st);
    if (v == NULL)
        return call_failed("GetRun", &st);
    /* Events from here on belong to the recovery. */
    t->cursor = v->run != NULL ? v->run->seq : t->cursor;
    charter__v1__run_view__free_unpacked(v, NULL);

    Charter__V1__RecoverRunRequest req = CHARTER__V1__RECOVER_RUN_REQUEST__INIT;
    Charter__V1__RecoverRunResponse *r = NULL;
    req.run_id = t->run_id;
    if (charter_recover_run(t->client, &req, &r, &st) != 0) {
        snprintf(observed, sizeof observed, "RecoverRun failed: %s: %s",
                 charter_status_name(st.code), st.message);
        report(t, index, false, expected, observed);
        return WF_OK;
    }
    const Charter__V1__Decision *d = r->decision;
    const char *outcome = cli_outcome_word(d != NULL ? d->outcome : 0);
    char got[768];
    decision_text(outcome, d != NULL ? d->codes : NULL, d != NULL ? d->n_codes : 0,
                  d != NULL ? d->witness : NULL, got, sizeof got);
    snprintf(observed, sizeof observed, "%s (step %s, recipient %s%s)", got,
             r->step != NULL && r->step[0] ? r->step : "-",
             r->recipient != NULL && r->recipient[0] ? r->recipient : "-",
             r->acknowledged ? ", acknowledged" : "");
    report(t, index, d != NULL && decision_matches(x, outcome, d->codes, d->n_codes, d->witness),
           expected, observed);
    charter__v1__recover_run_response__free_unpacked(r, NULL);
    return WF_OK;
}

static int check_status(wf_test *t, size_t index, const json_t *x)
{
    char expected[128], observed[128];
    const char *want = json_string_value(json_object_get(x, "status"));
    snprintf(expected, sizeof expected, "status %s", want);
    charter_status st;
    Charter__V1__RunView *v = load_run(t, &st);
    if (v == NULL)
        return call_failed("GetRun", &st);
    const char *got = v->run != NULL ? v->run->status : "";
    snprintf(observed, sizeof observed, "status %s", got);
    report(t, index, strcmp(got, want) == 0, expected, observed);
    charter__v1__run_view__free_unpacked(v, NULL);
    return WF_OK;
}

static int check_delivery(wf_test *t, size_t index, const json_t *x)
{
    char expected[2048], observed[2048];
    const char *rcp = json_string_value(json_object_get(x, "delivery"));
    const json_t *includes = json_object_get(x, "includes");
    const json_t *excludes = json_object_get(x, "excludes");
    size_t used = (size_t)snprintf(expected, sizeof expected, "a delivery to %s", rcp);
    const json_t *lists[2] = {includes, excludes};
    for (size_t k = 0; k < 2; k++) {
        size_t i;
        json_t *s;
        json_array_foreach(lists[k], i, s)
        {
            if (used < sizeof expected)
                used += (size_t)snprintf(expected + used, sizeof expected - used, "%s\"%s\"",
                                         i == 0 ? (k == 0 ? ", holding " : ", without ") : ", ",
                                         json_string_value(s));
        }
    }
    charter_status st;
    Charter__V1__RunView *v = load_run(t, &st);
    if (v == NULL)
        return call_failed("GetRun", &st);
    const Charter__V1__Delivery *d = NULL;
    for (size_t i = 0; i < v->n_deliveries && d == NULL; i++)
        if (strcmp(v->deliveries[i]->recipient, rcp) == 0)
            d = v->deliveries[i];
    bool pass = d != NULL;
    if (d == NULL) {
        snprintf(observed, sizeof observed, "no delivery to %s", rcp);
    } else {
        used = (size_t)snprintf(observed, sizeof observed, "delivery %s", d->invocation_id);
        size_t i;
        json_t *s;
        json_array_foreach(includes, i, s)
        {
            if (strstr(d->content, json_string_value(s)) == NULL) {
                pass = false;
                if (used < sizeof observed)
                    used += (size_t)snprintf(observed + used, sizeof observed - used,
                                             "; lacks \"%s\"", json_string_value(s));
            }
        }
        json_array_foreach(excludes, i, s)
        {
            if (strstr(d->content, json_string_value(s)) != NULL) {
                pass = false;
                if (used < sizeof observed)
                    used += (size_t)snprintf(observed + used, sizeof observed - used,
                                             "; holds \"%s\"", json_string_value(s));
            }
        }
        if (pass && used < sizeof observed)
            snprintf(observed + used, sizeof observed - used, "%s",
                     json_array_size(includes) + json_array_size(excludes) > 0
                         ? "; its content is as expected"
                         : "");
    }
    report(t, index, pass, expected, observed);
    charter__v1__run_view__free_unpacked(v, NULL);
    return WF_OK;
}

/* Creates the scripted run of the applied version info and says so (text output). */
static int rehearse_start(wf_test *t, const Charter__V1__WorkflowInfo *info)
{
    Charter__V1__CreateRunRequest req = CHARTER__V1__CREATE_RUN_REQUEST__INIT;
    Charter__V1__RunView *v = NULL;
    charter_status st;
    req.mode = (char *)"scripted";
    req.workflow = info->version;
    if (charter_create_run(t->client, &req, &v, &st) != 0)
        return call_failed("CreateRun", &st);
    snprintf(t->run_id, sizeof t->run_id, "%s", v->run != NULL ? v->run->id : "");
    if (!t->json) {
        printf("workflow %s version %s (%s)\n", info->name, info->version,
               info->created ? "applied" : "already applied");
        printf("run %s  %s  (scripted, %llu events)\n\n", t->run_id,
               v->run != NULL ? v->run->status : "-",
               v->run != NULL ? (unsigned long long)v->run->seq : 0ULL);
    }
    charter__v1__run_view__free_unpacked(v, NULL);
    return WF_OK;
}

/* Every expectation of expect checked in order against the run. */
static int rehearse_walk(wf_test *t, const json_t *expect)
{
    int rv = WF_OK;
    for (size_t i = 0; i < json_array_size(expect) && rv == WF_OK; i++) {
        const json_t *x = json_array_get(expect, i);
        if (json_object_get(x, "event") != NULL)
            rv = check_event(t, i, x);
        else if (json_object_get(x, "recover") != NULL)
            rv = check_recover(t, i, x);
        else if (json_object_get(x, "status") != NULL)
            rv = check_status(t, i, x);
        else
            rv = check_delivery(t, i, x);
    }
    return rv;
}

static int rehearse_summary(const wf_test *t, const Charter__V1__WorkflowInfo *info)
{
    if (!t->json) {
        printf("\n%u of %u expectations passed%s\n", t->passed, t->passed + t->failed,
               t->failed > 0 ? "" : ": ok");
        return t->failed > 0 ? WF_FAIL : WF_OK;
    }
    json_t *out = json_pack("{s:s, s:s, s:s, s:I, s:I, s:O}", "workflow", info->name, "version",
                            info->version, "runId", t->run_id, "passed", (json_int_t)t->passed,
                            "failed", (json_int_t)t->failed, "results", t->results);
    int rv = cli_json_print(out) == 0 ? WF_OK : WF_FAIL;
    json_decref(out);
    return rv == WF_OK && t->failed > 0 ? WF_FAIL : rv;
}

/* rehearse: apply FILE, run it scripted, walk its expect list. */
static int cmd_rehearse(charter_client *client, bool json, const char *path)
{
    char *bytes = NULL;
    Charter__V1__WorkflowInfo *info = NULL;
    int rv = apply_file(client, path, &bytes, &info);
    if (rv != WF_OK) {
        free(bytes);
        return rv;
    }
    /* The server has validated the definition, expect list included. */
    json_t *doc = json_loads(bytes, JSON_REJECT_DUPLICATES, NULL);
    free(bytes);
    json_t *expect = json_object_get(doc, "expect");
    wf_test t;
    memset(&t, 0, sizeof t);
    t.client = client;
    t.json = json;
    t.results = json ? json_array() : NULL;
    if (json_array_size(expect) == 0) {
        fprintf(stderr, "charter: %s has no expect list: nothing to rehearse\n", path);
        rv = WF_FAIL;
    } else if ((rv = rehearse_start(&t, info)) == WF_OK &&
               (rv = rehearse_walk(&t, expect)) == WF_OK) {
        rv = rehearse_summary(&t, info);
    }
    json_decref(t.results);
    json_decref(doc);
    charter__v1__workflow_info__free_unpacked(info, NULL);
    return rv;
}

int cli_workflow_run(charter_client *client, bool json, const char *sub, const char *arg)
{
    if (strcmp(sub, "validate") == 0)
        return cli_workflow_validate(arg, json);
    if (strcmp(sub, "test") == 0)
        return cli_workflow_test(arg, json);
    if (strcmp(sub, "apply") == 0)
        return cmd_apply(client, json, arg);
    if (strcmp(sub, "list") == 0)
        return cmd_list(client, json);
    if (strcmp(sub, "get") == 0 || strcmp(sub, "show") == 0)
        return cmd_get(client, json, arg);
    return cmd_rehearse(client, json, arg);
}
