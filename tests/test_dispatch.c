/*
 * test_dispatch.c - the method tables charterd dispatches from, checked two ways: against
 * protobuf-c's generated service descriptors (a row that names the wrong method or message
 * must refuse startup) and against the table of services and methods in docs/api.md (who may
 * call what, and with which messages); and their columns (host credentials, quotas,
 * --scripted-only) against each other and a list written here. No database, no process: the
 * tables are data.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "charter.pb-c.h"
#include "rpc/dispatch.h"
#include "rpc/services.h"
#include "suite.h"

/* ---------------------------------------------------------------------------------------- */
/* The table of docs/api.md                                                                 */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    char method[96];   /* "Runs/CreateRun" */
    call_role role;    /* (viewer), (none), else operator */
    char request[96];  /* "CreateRunRequest" */
    char response[96]; /* "RunView" */
    int matched;
} readme_row;

#define README_MAX_ROWS 64
static readme_row readme_rows[README_MAX_ROWS];
static size_t n_readme_rows;

/* The name that starts at s (after a backtick): letters, digits and underscores. */
static void name_at(const char *s, char *out, size_t n)
{
    size_t j = 0;
    while (s && j + 1 < n &&
           ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
            *s == '_' || *s == '/' || *s == '.'))
        out[j++] = *s++;
    out[j] = '\0';
}

/* Reads the rows of the table under "## Services and methods" in docs/api.md: "| `Svc/Method`
 * (role) | `Request{...}` → `Response{...}` | what it does |". Returns 0 or -1. */
static int readme_load(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/api.md", CHARTER_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char line[8192];
    int in_section = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '#') {
            in_section = strcmp(line, "## Services and methods\n") == 0;
            continue;
        }
        if (!in_section || strncmp(line, "| `", 3) != 0 || n_readme_rows == README_MAX_ROWS)
            continue;
        readme_row *r = &readme_rows[n_readme_rows];
        memset(r, 0, sizeof *r);
        name_at(line + 3, r->method, sizeof r->method);
        char *cell1_end = strchr(line + 1, '|');
        if (cell1_end == NULL)
            continue;
        *cell1_end = '\0';
        r->role = strstr(line, "(viewer)")  ? ROLE_VIEWER
                  : strstr(line, "(none)")  ? ROLE_NONE
                  : strstr(line, "(admin)") ? ROLE_ADMIN
                                            : ROLE_OPERATOR;
        char *cell2 = cell1_end + 1;
        char *tick = strchr(cell2, '`');
        char *arrow = strstr(cell2, "\xe2\x86\x92 `");
        if (tick == NULL || arrow == NULL)
            continue;
        name_at(tick + 1, r->request, sizeof r->request);
        name_at(arrow + 5, r->response, sizeof r->response);
        n_readme_rows++;
    }
    fclose(f);
    return n_readme_rows > 0 ? 0 : -1;
}

static const char *role_name(call_role r)
{
    return r == ROLE_ADMIN      ? "admin"
           : r == ROLE_OPERATOR ? "operator"
           : r == ROLE_VIEWER   ? "viewer"
                                : "none";
}

static void test_readme_table_of_methods_matches_the_dispatch_table(void)
{
    CU_ASSERT_EQUAL_FATAL(readme_load(), 0);
    size_t n_services = 0;
    const dispatch_service *svcs = dispatch_services_of(&n_services);
    CU_ASSERT_EQUAL(n_services, 15);
    size_t n_rows = 0;
    for (size_t i = 0; i < n_services; i++) {
        for (size_t m = 0; m < *svcs[i].n_methods; m++) {
            const svc_method *row = &svcs[i].methods[m];
            char name[96];
            /* charter.v1's services by their short name, others (grpc.health.v1) in full. */
            snprintf(name, sizeof name, "%s/%s",
                     strcmp(svcs[i].desc->package, "charter.v1") == 0 ? svcs[i].desc->short_name
                                                                      : svcs[i].desc->name,
                     row->name);
            n_rows++;
            readme_row *r = NULL;
            for (size_t k = 0; k < n_readme_rows; k++)
                if (strcmp(readme_rows[k].method, name) == 0)
                    r = &readme_rows[k];
            if (r == NULL) {
                fprintf(stderr, "\n  docs/api.md has no row for %s\n", name);
                CU_FAIL("a method of the dispatch table is missing from docs/api.md");
                continue;
            }
            r->matched++;
            if (r->role != row->min_role)
                fprintf(stderr, "\n  %s: docs/api.md says %s, the dispatch table says %s\n", name,
                        role_name(r->role), role_name(row->min_role));
            CU_ASSERT_EQUAL(r->role, row->min_role);
            CU_ASSERT_STRING_EQUAL(r->request, row->request->short_name);
            CU_ASSERT_STRING_EQUAL(r->response, row->response->short_name);
        }
    }
    /* Every row of the table names a method, once. */
    CU_ASSERT_EQUAL(n_readme_rows, n_rows);
    for (size_t k = 0; k < n_readme_rows; k++) {
        if (readme_rows[k].matched != 1)
            fprintf(stderr, "\n  docs/api.md row %s matches %d methods\n", readme_rows[k].method,
                    readme_rows[k].matched);
        CU_ASSERT_EQUAL(readme_rows[k].matched, 1);
    }
    /* Spot checks written by hand: the table is not just compared with itself. */
    CU_ASSERT_EQUAL(n_rows, 51);
}

static void test_operator_methods_are_those_that_change_the_graph(void)
{
    static const char *const expected[] = {
        "CreateRun",
        "RecoverRun",
        "OpenStep",
        "ReadSource",
        "ObserveSource",
        "RecordOutput",
        "CheckInput",
        "Deliver",
        "Invoke",
        "RevokeGrant",
        "CancelRun",
        "RestoreGrants",
        /* Resources: a quarantine changes every decision over the resource's descendants. */
        "QuarantineResource",
        "ReleaseResource",
        "ApplyWorkflow",
        /* Retrieval: each of these writes (the index, a scope, a search and its source
         * artifacts, a checkpoint). */
        "IngestChunks",
        "BindScope",
        "NarrowScope",
        "Search",
        "FollowUp",
        "CheckpointScope",
        "ResumeScope",
        /* Credentials: the tenant's operator issues, lists and revokes. */
        "IssueCredential",
        "ListCredentials",
        "RevokeCredential",
        /* Approvals: commits a held delivery, or records its refusal. */
        "DecideApproval",
        /* Runs: a checkpoint's token is a capability to resume; resuming queues the run. */
        "CheckpointRun",
        "ResumeRun",
        /* Runs: ends an external run, closing its record for good. */
        "CompleteRun",
    };
    size_t n_services = 0;
    const dispatch_service *svcs = dispatch_services_of(&n_services);
    size_t n_operator = 0;
    for (size_t i = 0; i < n_services; i++) {
        for (size_t m = 0; m < *svcs[i].n_methods; m++) {
            const svc_method *row = &svcs[i].methods[m];
            int listed = 0;
            for (size_t k = 0; k < sizeof expected / sizeof expected[0]; k++)
                listed |= strcmp(expected[k], row->name) == 0;
            CU_ASSERT_EQUAL(row->min_role == ROLE_OPERATOR, listed);
            n_operator += row->min_role == ROLE_OPERATOR;
            /* Only the health checks are open without a token: charter.v1.Health/Check and
             * grpc.health.v1.Health/Check and Watch. */
            CU_ASSERT_EQUAL(row->min_role == ROLE_NONE,
                            strcmp(row->name, "Check") == 0 || strcmp(row->name, "Watch") == 0);
        }
    }
    CU_ASSERT_EQUAL(n_operator, 29);
}

/* ---------------------------------------------------------------------------------------- */
/* The columns dispatch enforces before a handler runs                                       */
/* ---------------------------------------------------------------------------------------- */

/* Whether name is one of list (NULL-terminated). */
static int listed_in(const char *const *list, const char *name)
{
    for (size_t k = 0; list[k] != NULL; k++)
        if (strcmp(list[k], name) == 0)
            return 1;
    return 0;
}

/* Every row, walked: a host-callable method is of the Gate service, or Runs/CompleteRun (a host
 * ends the external run it drove), and writes (operator); a
 * method that takes a quota writes; a method refused for live runs under --scripted-only says
 * its mode; a grant control is of the Grants service and writes. Which methods those are is
 * written down here by hand, so the table is not only compared with itself. */
static void test_every_row_has_consistent_host_quota_and_scripted_columns(void)
{
    static const char *const host[] = {
        "Gate/OpenStep",     "Gate/ReadSource",  "Gate/ObserveSource",
        "Gate/RecordOutput", "Gate/CheckInput",  "Gate/Deliver",
        "Gate/Invoke",       "Runs/CompleteRun", NULL};
    static const char *const runs_quota[] = {"Runs/CreateRun", NULL};
    static const char *const artifacts_quota[] = {"Gate/ReadSource", "Gate/ObserveSource",
                                                  "Gate/RecordOutput", NULL};
    static const char *const live_run[] = {"Runs/CreateRun", NULL};
    static const char *const grant_control[] = {"Grants/RevokeGrant", "Grants/RestoreGrants",
                                                "Resources/QuarantineResource",
                                                "Resources/ReleaseResource", NULL};
    size_t n_services = 0, n_host = 0, n_quota = 0, n_scripted = 0;
    const dispatch_service *svcs = dispatch_services_of(&n_services);
    for (size_t i = 0; i < n_services; i++) {
        int charter = strcmp(svcs[i].desc->package, "charter.v1") == 0;
        for (size_t m = 0; m < *svcs[i].n_methods; m++) {
            const svc_method *row = &svcs[i].methods[m];
            char name[96];
            snprintf(name, sizeof name, "%s/%s",
                     charter ? svcs[i].desc->short_name : svcs[i].desc->name, row->name);
            int is_host = row->host == SVC_HOST;
            if (is_host != listed_in(host, name))
                fprintf(stderr, "\n  %s: host column %d\n", name, (int)row->host);
            CU_ASSERT_EQUAL(is_host, listed_in(host, name));
            CU_ASSERT_EQUAL(row->quota == SVC_QUOTA_RUNS, listed_in(runs_quota, name));
            CU_ASSERT_EQUAL(row->quota == SVC_QUOTA_ARTIFACTS, listed_in(artifacts_quota, name));
            CU_ASSERT_EQUAL(row->scripted == SVC_SCRIPTED_LIVE_RUN, listed_in(live_run, name));
            CU_ASSERT_EQUAL(row->scripted == SVC_SCRIPTED_GRANT_CONTROL,
                            listed_in(grant_control, name));
            if (is_host) {
                n_host++;
                CU_ASSERT_TRUE(strcmp(svcs[i].desc->name, "charter.v1.Gate") == 0 ||
                               strcmp(name, "Runs/CompleteRun") == 0);
                CU_ASSERT_EQUAL(row->min_role, ROLE_OPERATOR);
            }
            if (row->quota != SVC_QUOTA_NONE) {
                n_quota++;
                CU_ASSERT_EQUAL(row->min_role, ROLE_OPERATOR);
            }
            if (row->scripted == SVC_SCRIPTED_LIVE_RUN) {
                n_scripted++;
                const ProtobufCFieldDescriptor *f =
                    protobuf_c_message_descriptor_get_field_by_name(row->request, "mode");
                CU_ASSERT_PTR_NOT_NULL_FATAL(f);
                CU_ASSERT_EQUAL(f->type, PROTOBUF_C_TYPE_STRING);
            }
            if (row->scripted == SVC_SCRIPTED_GRANT_CONTROL) {
                n_scripted++;
                /* The grant controls and the quarantine: a shared demo's state stays as set. */
                CU_ASSERT_TRUE(strcmp(svcs[i].desc->name, "charter.v1.Grants") == 0 ||
                               strcmp(svcs[i].desc->name, "charter.v1.Resources") == 0);
                CU_ASSERT_EQUAL(row->min_role, ROLE_OPERATOR);
            }
        }
    }
    CU_ASSERT_EQUAL(n_host, 8);
    CU_ASSERT_EQUAL(n_quota, 4);
    CU_ASSERT_EQUAL(n_scripted, 5);
}

/* ---------------------------------------------------------------------------------------- */
/* The startup check                                                                         */
/* ---------------------------------------------------------------------------------------- */

#define RUNS_N 9
static svc_method runs_rows[RUNS_N];

static int check_runs(char *err, size_t n)
{
    return dispatch_check_service(&charter__v1__runs__descriptor, runs_rows, RUNS_N, err, n);
}

static void reset_runs(void)
{
    CU_ASSERT_EQUAL_FATAL(svc_runs_methods_len, RUNS_N);
    memcpy(runs_rows, svc_runs_methods, sizeof runs_rows);
}

static void test_every_table_of_charterd_passes_the_startup_check(void)
{
    char err[512] = "";
    CU_ASSERT_EQUAL(dispatch_check_tables(err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(err, "");
}

static void test_rows_in_another_order_are_accepted_by_name(void)
{
    reset_runs();
    svc_method t = runs_rows[0];
    runs_rows[0] = runs_rows[3];
    runs_rows[3] = t;
    char err[512] = "";
    CU_ASSERT_EQUAL(check_runs(err, sizeof err), 0);
}

static void test_swapped_method_names_refuse_startup(void)
{
    reset_runs();
    /* CreateRun's handler and messages under GetRun's name, and the reverse: both rows still
     * say RunView, but the requests no longer match the proto. */
    const char *t = runs_rows[0].name;
    runs_rows[0].name = runs_rows[1].name;
    runs_rows[1].name = t;
    char err[512] = "";
    CU_ASSERT_EQUAL(check_runs(err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "charter.v1.CreateRunRequest"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "the proto says"));
}

static void test_wrong_response_message_refuses_startup(void)
{
    reset_runs();
    runs_rows[2].response = &charter__v1__run_view__descriptor; /* ListRuns returns a list */
    char err[512] = "";
    CU_ASSERT_EQUAL(check_runs(err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "Runs/ListRuns"));
}

static void test_missing_duplicate_or_empty_rows_refuse_startup(void)
{
    char err[512];
    reset_runs();
    CU_ASSERT_EQUAL(dispatch_check_service(&charter__v1__runs__descriptor, runs_rows, RUNS_N - 1,
                                           err, sizeof err),
                    -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "declares 9 methods but has 8 rows"));

    reset_runs();
    runs_rows[3] = runs_rows[2]; /* ListRuns twice, RecoverRun never */
    CU_ASSERT_EQUAL(check_runs(err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "Runs/ListRuns has two rows"));

    reset_runs();
    runs_rows[1].handler = NULL;
    CU_ASSERT_EQUAL(check_runs(err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "Runs/GetRun has no handler"));

    reset_runs();
    runs_rows[1].min_role = (call_role)7;
    CU_ASSERT_EQUAL(check_runs(err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown role"));
}

static void test_unknown_column_values_refuse_startup(void)
{
    char err[512];
    reset_runs();
    runs_rows[0].host = (svc_host)2;
    CU_ASSERT_EQUAL(check_runs(err, sizeof err), -1);
    CU_ASSERT_STRING_EQUAL(err, "method charter.v1.Runs/CreateRun has an unknown host column 2 "
                                "(rebuild charterd with known values in the method table)");

    reset_runs();
    runs_rows[1].quota = (svc_quota)3;
    CU_ASSERT_EQUAL(check_runs(err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "Runs/GetRun takes an unknown quota 3"));

    reset_runs();
    runs_rows[2].scripted = (svc_scripted)9;
    CU_ASSERT_EQUAL(check_runs(err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "Runs/ListRuns has an unknown scripted-only column 9"));

    /* GetRunRequest has no mode: a live-run refusal could not read one. */
    reset_runs();
    runs_rows[1].scripted = SVC_SCRIPTED_LIVE_RUN;
    CU_ASSERT_EQUAL(check_runs(err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "charter.v1.GetRunRequest has no string field mode"));

    /* Columns of known values pass, whatever they say. */
    reset_runs();
    runs_rows[1].quota = SVC_QUOTA_ARTIFACTS;
    runs_rows[1].host = SVC_HOST;
    CU_ASSERT_EQUAL(check_runs(err, sizeof err), 0);
}

#define T(fn)                                                                                      \
    {                                                                                              \
#fn, fn                                                                                    \
    }
/* ---------------------------------------------------------------------------------------- */
/* The call's arena                                                                         */
/* ---------------------------------------------------------------------------------------- */

/* Every allocation of a call's arena is zeroed and aligned for any type, whatever its size and
 * however many come before it, and stays intact until the call is released; the memory a
 * released call leaves to the next call is zeroed again. */
static void test_the_call_arena_hands_out_zeroed_aligned_memory(void)
{
    for (int round = 0; round < 3; round++) {
        call c;
        memset(&c, 0, sizeof c);
        unsigned char *got[600];
        size_t sizes[600];
        for (size_t i = 0; i < 600; i++) {
            sizes[i] = i % 97 == 0 ? 20000 + i : i % 61; /* a few larger than a block, 0 too */
            got[i] = call_alloc(&c, sizes[i]);
            CU_ASSERT_PTR_NOT_NULL_FATAL(got[i]);
            CU_ASSERT_EQUAL((uintptr_t)got[i] % _Alignof(max_align_t), 0);
            bool zero = true;
            for (size_t k = 0; k < sizes[i]; k++)
                zero = zero && got[i][k] == 0;
            CU_ASSERT_TRUE(zero);
            memset(got[i], (int)(i % 251) + 1, sizes[i]);
        }
        bool intact = true;
        for (size_t i = 0; i < 600; i++)
            for (size_t k = 0; k < sizes[i]; k++)
                intact = intact && got[i][k] == (unsigned char)(i % 251 + 1);
        CU_ASSERT_TRUE(intact);
        char *copy = call_strdup(&c, "invocation inv-1");
        CU_ASSERT_STRING_EQUAL(copy, "invocation inv-1");
        call_release(&c);
        CU_ASSERT_PTR_NULL(c.arena);
    }
}

static const harness_test tests[] = {
    T(test_the_call_arena_hands_out_zeroed_aligned_memory),
    T(test_readme_table_of_methods_matches_the_dispatch_table),
    T(test_operator_methods_are_those_that_change_the_graph),
    T(test_every_row_has_consistent_host_quota_and_scripted_columns),
    T(test_every_table_of_charterd_passes_the_startup_check),
    T(test_rows_in_another_order_are_accepted_by_name),
    T(test_swapped_method_names_refuse_startup),
    T(test_wrong_response_message_refuses_startup),
    T(test_missing_duplicate_or_empty_rows_refuse_startup),
    T(test_unknown_column_values_refuse_startup),
};

static const harness_suite suites[] = {
    {"dispatch tables", NULL, NULL, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
