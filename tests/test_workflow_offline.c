/*
 * test_workflow_offline.c - `charter workflow validate FILE` and `charter workflow test FILE`
 * with no charterd and no database: every problem of an invalid definition named with its path,
 * the shipped test files passing, a failing case failing, a malformed test file refused with
 * the field path, and nothing touched on the way.
 *
 * The CLI runs as a user runs it (CHARTER_CLI_PATH), in an empty folder that is also its HOME
 * and TMPDIR, with CHARTER_URL naming a unix socket this program listens on. After every run
 * the folder must still be empty (nothing written) and the socket must have had no connection
 * (nothing asked of a server); a command that does connect is shown to be seen there, so the
 * check can fail. No Redis is given: the suite is of the unit tier.
 */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/digest.h"
#include "harness.h"
#include "policy/workflow.h"
#include "suite.h"

#ifndef CHARTER_SOURCE_DIR
#error "CHARTER_SOURCE_DIR (the source tree's root) must be defined by the build"
#endif
#ifndef CHARTER_CLI_PATH
#error "CHARTER_CLI_PATH (the charter CLI built from this tree) must be defined by the build"
#endif

#define WORKFLOWS CHARTER_SOURCE_DIR "/deploy/workflows"
#define PROCUREMENT WORKFLOWS "/procurement.json"
#define SUPPORT WORKFLOWS "/support.json"
#define APPROVAL CHARTER_SOURCE_DIR "/tests/workflows/approval.json"

static char base[128];  /* everything this program makes */
static char home[160];  /* the CLI's working folder, HOME and TMPDIR: must stay empty */
static char files[160]; /* the files the tests write for the CLI to read */
static char sock_path[96];
static int listener = -1; /* CHARTER_URL's socket: must see no connection */

/* What one run of the CLI did. */
typedef struct {
    int status; /* exit status, -1 if it did not end normally */
    char out[65536];
    char err[16384];
} cli_run;

static int suite_init(void)
{
    snprintf(base, sizeof base, "/tmp/charter-offline-XXXXXX");
    if (mkdtemp(base) == NULL)
        return -1;
    snprintf(home, sizeof home, "%s/home", base);
    snprintf(files, sizeof files, "%s/files", base);
    snprintf(sock_path, sizeof sock_path, "%.64s/charterd.sock", base);
    if (mkdir(home, 0700) != 0 || mkdir(files, 0700) != 0)
        return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (listener < 0 || bind(listener, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(listener, 16) != 0)
        return -1;
    return 0;
}

/* Removes the files the tests wrote (only regular files live in files/). */
static void remove_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char p[512];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d != NULL)
        closedir(d);
    rmdir(dir);
}

static int suite_clean(void)
{
    if (listener >= 0)
        close(listener);
    unlink(sock_path);
    remove_files(files);
    remove_files(home);
    remove_files(base);
    return 0;
}

/* Reads what the file at path holds into buf (n bytes, terminated). */
static void slurp(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    size_t got = f != NULL ? fread(buf, 1, n - 1, f) : 0;
    buf[got] = '\0';
    if (f != NULL)
        fclose(f);
}

/* Runs the CLI with args (n of them, without the program name) in home, its stdout and
 * stderr kept in r. Waits at most 60 s. */
static void run_cli(const char *const *args, size_t n, cli_run *r)
{
    char out_path[192], err_path[192];
    snprintf(out_path, sizeof out_path, "%s/stdout", base);
    snprintf(err_path, sizeof err_path, "%s/stderr", base);
    r->status = -1;
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0 || chdir(home) != 0)
            _exit(127);
        char url[256], h[200], tmp[200];
        snprintf(url, sizeof url, "CHARTER_URL=ipc://%s", sock_path);
        snprintf(h, sizeof h, "HOME=%s", home);
        snprintf(tmp, sizeof tmp, "TMPDIR=%s", home);
        char *env[] = {
            url, h, tmp, "CHARTER_TOKEN=offline-token-0123456789abcdef", "PATH=/usr/bin:/bin",
            NULL};
        const char *argv[16] = {CHARTER_CLI_PATH};
        for (size_t i = 0; i < n && i < 14; i++)
            argv[i + 1] = args[i];
        execve(CHARTER_CLI_PATH, (char *const *)argv, env);
        _exit(127);
    }
    time_t deadline = time(NULL) + 60;
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, WNOHANG) == 0) {
        if (time(NULL) > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (pid > 0 && WIFEXITED(status))
        r->status = WEXITSTATUS(status);
    slurp(out_path, r->out, sizeof r->out);
    slurp(err_path, r->err, sizeof r->err);
}

/* True when no one connected to CHARTER_URL's socket since the last call. */
static bool nobody_connected(void)
{
    int c = accept(listener, NULL, NULL);
    if (c < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK;
    close(c);
    while ((c = accept(listener, NULL, NULL)) >= 0)
        close(c);
    return false;
}

/* True when home holds nothing. */
static bool home_is_empty(void)
{
    DIR *d = opendir(home);
    struct dirent *e;
    size_t n = 0;
    while (d != NULL && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    if (d != NULL)
        closedir(d);
    return d != NULL && n == 0;
}

/* An offline run: it ran, asked no server and wrote nothing. */
static void run_offline(const char *const *args, size_t n, cli_run *r)
{
    run_cli(args, n, r);
    CU_ASSERT_TRUE(nobody_connected());
    CU_ASSERT_TRUE(home_is_empty());
}

static void validate(const char *path, cli_run *r)
{
    const char *args[] = {"workflow", "validate", path};
    run_offline(args, 3, r);
}

static void test_file(const char *path, cli_run *r)
{
    const char *args[] = {"workflow", "test", path};
    run_offline(args, 3, r);
}

/* Writes text into files/name; the path into path (n bytes). */
static void write_file(const char *name, const char *text, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", files, name);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* Writes the definition at from, edited by edit, into files/name. */
static void write_edited(const char *from, const char *name, void (*edit)(json_t *), char *path,
                         size_t n)
{
    json_t *doc = json_load_file(from, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    edit(doc);
    char *text = json_dumps(doc, JSON_INDENT(2));
    write_file(name, text, path, n);
    free(text);
    json_decref(doc);
}

/* ---- validate ---------------------------------------------------------------------------- */

static void expect_valid(const char *path, const char *summary)
{
    char text[1 << 17], version[65], want[1024];
    slurp(path, text, sizeof text);
    CU_ASSERT_EQUAL_FATAL(digest_sha256_hex(text, strlen(text), version), 0);
    snprintf(want, sizeof want, "%s: valid: workflow %s, version %s\n", path, summary, version);
    cli_run r;
    validate(path, &r);
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_STRING_EQUAL(r.out, want);
    CU_ASSERT_STRING_EQUAL(r.err, "");
}

static void test_validate_accepts_the_shipped_definitions(void)
{
    expect_valid(PROCUREMENT, "procurement (4 resources, 2 recipients, 4 actors, 4 grants, 3 "
                              "steps, 7 expectations)");
    expect_valid(SUPPORT, "support (3 resources, 2 recipients, 5 actors, 5 grants, 4 steps, 8 "
                          "expectations)");
    expect_valid(APPROVAL,
                 "procurement_approval (4 resources, 2 recipients, 4 actors, 4 grants, 3 steps)");
}

/* A problem in each of the three parts that stand alone. */
static void three_parts_broken(json_t *doc)
{
    json_object_set_new(json_array_get(json_object_get(doc, "resources"), 1), "confidentiality",
                        json_string("secret"));
    json_object_set_new(json_array_get(json_object_get(doc, "recipients"), 0), "clearance",
                        json_string("top"));
    json_object_set_new(json_array_get(json_object_get(doc, "actors"), 2), "colour",
                        json_string("red"));
    json_object_set_new(json_array_get(json_object_get(doc, "resources"), 3), "title",
                        json_string(""));
}

static void test_validate_names_every_problem_with_its_path(void)
{
    char path[256], want[4096], first[1024];
    write_edited(PROCUREMENT, "three.json", three_parts_broken, path, sizeof path);
    snprintf(want, sizeof want,
             "%s: resources[1].confidentiality: \"secret\" is not one of public, internal, "
             "confidential\n"
             "%s: resources[3].title: must not be empty\n"
             "%s: recipients[0].clearance: \"top\" is not one of public, internal, confidential\n"
             "%s: actors[2].colour: unknown field\n"
             "%s: 4 problems; not checked until those are fixed: grants, steps, tools, expect\n",
             path, path, path, path, path);
    cli_run r;
    validate(path, &r);
    CU_ASSERT_EQUAL(r.status, 1);
    CU_ASSERT_STRING_EQUAL(r.out, "");
    CU_ASSERT_STRING_EQUAL(r.err, want);
    /* The first line is the one charterd's loader gives (and ApplyWorkflow answers). */
    workflow *wf = NULL;
    CU_ASSERT_EQUAL(workflow_load_file(path, &wf, first, sizeof first), -1);
    CU_ASSERT_PTR_NULL(wf);
    CU_ASSERT_STRING_EQUAL(first, "resources[1].confidentiality: \"secret\" is not one of public, "
                                  "internal, confidential");
}

/* A widening grant, and steps that break two rules. */
static void grant_widens(json_t *doc)
{
    json_object_set_new(json_array_get(json_object_get(doc, "grants"), 1), "valid_to",
                        json_string("2037-01-01T00:00:00Z"));
}

static void steps_broken(json_t *doc)
{
    json_t *steps = json_object_get(doc, "steps");
    json_array_append_new(json_object_get(json_array_get(steps, 0), "resources"),
                          json_string("budget"));
    json_object_set_new(json_object_get(json_array_get(steps, 2), "deliver"), "recipient",
                        json_string("cfo"));
    json_object_set_new(json_array_get(json_object_get(doc, "expect"), 0), "step",
                        json_string("nowhere"));
}

static void test_validate_leaves_parts_that_refer_to_broken_ones_unchecked(void)
{
    char path[256], want[4096];
    cli_run r;
    write_edited(PROCUREMENT, "widening.json", grant_widens, path, sizeof path);
    snprintf(want, sizeof want,
             "%s: grants[1].valid_to: 2037-01-01T00:00:00Z is after the parent grant g_root's "
             "valid_to 2036-01-01T00:00:00Z (widening)\n"
             "%s: 1 problem; not checked until those are fixed: steps, tools, expect\n",
             path, path);
    validate(path, &r);
    CU_ASSERT_EQUAL(r.status, 1);
    CU_ASSERT_STRING_EQUAL(r.err, want);
    /* Two steps each break a rule; the expectation naming no step waits for them. */
    write_edited(PROCUREMENT, "steps.json", steps_broken, path, sizeof path);
    snprintf(want, sizeof want,
             "%s: steps[0].resources: \"budget\" is not in the step's grant g_research's "
             "resources\n"
             "%s: steps[2].deliver.recipient: \"cfo\" is not in the step's recipients\n"
             "%s: 2 problems; not checked until those are fixed: tools, expect\n",
             path, path, path);
    validate(path, &r);
    CU_ASSERT_EQUAL(r.status, 1);
    CU_ASSERT_STRING_EQUAL(r.err, want);
}

static void test_validate_reports_the_line_and_column_of_bad_json(void)
{
    char path[256], want[1024];
    write_file("syntax.json", "{\"name\": \"x\",\n \"task\": }\n", path, sizeof path);
    snprintf(want, sizeof want,
             "%s: definition: not valid JSON at line 2 column 10: unexpected token near '}'\n"
             "%s: 1 problem\n",
             path, path);
    cli_run r;
    validate(path, &r);
    CU_ASSERT_EQUAL(r.status, 1);
    CU_ASSERT_STRING_EQUAL(r.err, want);
    const char *missing[] = {"workflow", "validate", "/nonexistent/charter/wf.json"};
    run_offline(missing, 3, &r);
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_STRING_EQUAL(r.err, "charter: cannot open /nonexistent/charter/wf.json: No such "
                                  "file or directory\n");
}

static void test_validate_json_lists_the_problems(void)
{
    char path[256];
    write_edited(PROCUREMENT, "three-json.json", three_parts_broken, path, sizeof path);
    const char *args[] = {"--json", "workflow", "validate", path};
    cli_run r;
    run_offline(args, 4, &r);
    CU_ASSERT_EQUAL(r.status, 1);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_TRUE(json_is_false(json_object_get(j, "valid")));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "problems")), 4);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(j, "problems"), 3)),
                           "actors[2].colour: unknown field");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "unchecked")),
                           "grants, steps, tools, expect");
    json_decref(j);
}

/* ---- test -------------------------------------------------------------------------------- */

static size_t count_lines_starting(const char *text, const char *prefix)
{
    size_t n = 0, len = strlen(prefix);
    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, prefix, len) == 0)
            n++;
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return n;
}

static void test_the_shipped_test_files_pass(void)
{
    static const char *const paths[] = {WORKFLOWS "/procurement.test.json",
                                        WORKFLOWS "/support.test.json"};
    for (size_t i = 0; i < 2; i++) {
        cli_run r;
        test_file(paths[i], &r);
        printf("\n%s%s", r.out, r.err);
        CU_ASSERT_EQUAL(r.status, 0);
        CU_ASSERT_EQUAL(count_lines_starting(r.out, "PASS  cases["), 9);
        CU_ASSERT_EQUAL(count_lines_starting(r.out, "FAIL"), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\n9 of 9 cases passed: ok\n"));
        CU_ASSERT_STRING_EQUAL(r.err, "");
    }
}

/* The tool calls of the shipped live-tool workflows, each case decided offline as Gate/Invoke
 * decides it: the refusals with the witnesses tests/test_invoke.c gets from a live charterd. */
static void test_the_shipped_invoke_test_files_pass(void)
{
    static const struct {
        const char *path;
        const char *summary;
        int cases;
    } files[] = {{WORKFLOWS "/payments.test.json", "\n7 of 7 cases passed: ok\n", 7},
                 {WORKFLOWS "/inbox.test.json", "\n6 of 6 cases passed: ok\n", 6}};
    for (size_t i = 0; i < 2; i++) {
        cli_run r;
        test_file(files[i].path, &r);
        printf("\n%s%s", r.out, r.err);
        CU_ASSERT_EQUAL(r.status, 0);
        CU_ASSERT_EQUAL(count_lines_starting(r.out, "PASS  cases["), files[i].cases);
        CU_ASSERT_EQUAL(count_lines_starting(r.out, "FAIL"), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(r.out, files[i].summary));
        CU_ASSERT_STRING_EQUAL(r.err, "");
    }
}

/* The payments bill and note as facts, for invoke cases. */
#define PAY_FACTS                                                                                  \
    "  \"artifacts\": [\n"                                                                         \
    "    {\"id\": \"bill\", \"source\": \"bill\", \"content\": \"Pay to "                          \
    "DE89370400440532013000\"},\n"                                                                 \
    "    {\"id\": \"note\", \"source\": \"transactions\", \"content\": \"pay "                     \
    "GB33BUKB20201555555555\"}\n"                                                                  \
    "  ],\n"
#define PAY_CALL(iban, from)                                                                       \
    "{\"invoke\": {\"step\": \"pay\", \"tool\": \"send_money\", \"arguments\": ["                  \
    "{\"name\": \"iban\", \"value\": \"" iban "\", \"quoted_from\": \"" from "\"}, "               \
    "{\"name\": \"amount\", \"value\": \"84.20\", \"from_task\": true}, "                          \
    "{\"name\": \"reference\", \"value\": \"INV-7731\", \"from_task\": true}]}, "

static void test_an_invoke_case_whose_verdict_differs_fails_with_what_was_decided(void)
{
    char text[4096], path[256];
    snprintf(text, sizeof text,
             "{\"workflow\": \"%s\",\n%s  \"cases\": [\n"
             "    " PAY_CALL("GB33BUKB20201555555555",
                             "note") "\"expect\": {\"outcome\": "
                                     "\"allow\"}},\n"
                                     "    " PAY_CALL("DE89370400440532013000",
                                                     "bill") "\"expect\": {\"outcome\": "
                                                             "\"allow\"}}\n  ]}\n",
             WORKFLOWS "/payments.json", PAY_FACTS);
    write_file("invoke.test.json", text, path, sizeof path);
    cli_run r;
    test_file(path, &r);
    printf("\n%s%s", r.out, r.err);
    CU_ASSERT_EQUAL(r.status, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "FAIL  cases[0]  case 0\n"
                                         "      invoke send_money to payee_any (step pay)\n"
                                         "      expected: allow\n"
                                         "      observed: deny CONTROL_UNTRUSTED witness "
                                         "\"argument iban ← transactions (untrusted): a control "
                                         "argument must be trusted\"\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "PASS  cases[1]  case 1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\n1 of 2 cases passed\n"));
}

/* An invoke case whose value its named origin does not hold as a token is refused as the gate
 * refuses it: a lineage that does not hold the value, a fragment of a quoted value. */
static void invoke_case_refused(const char *argument, const char *why)
{
    char text[4096], path[256];
    snprintf(text, sizeof text,
             "{\"workflow\": \"%s\",\n%s  \"cases\": [{\"invoke\": {\"step\": \"pay\", "
             "\"tool\": \"send_money\", \"arguments\": [%s, "
             "{\"name\": \"amount\", \"value\": \"84.20\", \"from_task\": true}, "
             "{\"name\": \"reference\", \"value\": \"INV-7731\", \"from_task\": true}]}, "
             "\"expect\": {\"outcome\": \"deny\"}}]}\n",
             WORKFLOWS "/payments.json", PAY_FACTS, argument);
    write_file("held.test.json", text, path, sizeof path);
    cli_run r;
    test_file(path, &r);
    CU_ASSERT_NOT_EQUAL(r.status, 0);
    if (strstr(r.err, why) == NULL)
        printf("\n%s%s", r.out, r.err);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.err, why));
}

static void test_an_invoke_case_whose_origin_does_not_hold_its_value_is_refused(void)
{
    invoke_case_refused("{\"name\": \"iban\", \"value\": \"GB33BUKB20201555555555\", "
                        "\"lineage\": [\"bill\"]}",
                        "cases[0].invoke.arguments[0].lineage: no artifact it names holds the "
                        "value");
    invoke_case_refused("{\"name\": \"iban\", \"value\": \"2013000\", \"quoted_from\": "
                        "\"bill\"}",
                        "cases[0].invoke.arguments[0]: quoted_from: \"bill\" is no artifact of "
                        "the test file holding the value");
}

/* The procurement leak stated as facts: the analyst's recommendation, derived from the budget
 * memo, handed to the report step and sent to the public. */
static const char leak_facts[] = "  \"artifacts\": [\n"
                                 "    {\"id\": \"memo\", \"source\": \"budget\"},\n"
                                 "    {\"id\": \"quote\", \"source\": \"vendor_b\"},\n"
                                 "    {\"id\": \"rec\", \"title\": \"Internal recommendation\",\n"
                                 "     \"derived_from\": [\"memo\", \"quote\"]}\n"
                                 "  ],\n";

static void test_a_case_whose_verdict_differs_fails_with_what_was_decided(void)
{
    char text[4096], path[256];
    snprintf(text, sizeof text,
             "{\"workflow\": \"%s\",\n%s"
             "  \"cases\": [\n"
             "    {\"name\": \"the leak, wrongly expected to pass\",\n"
             "     \"input\": {\"step\": \"report\", \"artifacts\": [\"rec\"]},\n"
             "     \"expect\": {\"outcome\": \"allow\"}},\n"
             "    {\"name\": \"the leak refused\",\n"
             "     \"deliver\": {\"step\": \"report\", \"payload\": \"rec\", \"recipient\": "
             "\"public\"},\n"
             "     \"expect\": {\"outcome\": \"deny\", \"codes\": [\"RESOURCE_OUT_OF_SCOPE\", "
             "\"CLEARANCE_EXCEEDED\"]}},\n"
             "    {\"name\": \"the right outcome with a wrong witness\",\n"
             "     \"input\": {\"step\": \"report\", \"artifacts\": [\"rec\"]},\n"
             "     \"expect\": {\"outcome\": \"deny\", \"witness\": \"budget → report\"}}\n"
             "  ]}\n",
             PROCUREMENT, leak_facts);
    write_file("failing.test.json", text, path, sizeof path);
    cli_run r;
    test_file(path, &r);
    printf("\n%s%s", r.out, r.err);
    CU_ASSERT_EQUAL(r.status, 1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(r.out, "FAIL  cases[0]  the leak, wrongly expected to pass\n"
                      "      input rec to step report\n"
                      "      expected: allow\n"
                      "      observed: deny INPUT_OUT_OF_SCOPE witness \"budget (confidential) → "
                      "Internal recommendation → report step {vendor_a, vendor_b, vendor_c}\"\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "PASS  cases[1]  the leak refused\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "FAIL  cases[2]  the right outcome with a wrong "
                                         "witness\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\n1 of 3 cases passed\n"));
}

static void test_a_send_the_workflow_holds_for_a_human_is_approval_pending(void)
{
    char text[4096], path[256];
    snprintf(text, sizeof text,
             "{\"workflow\": \"%s\",\n%s"
             "  \"cases\": [\n"
             "    {\"deliver\": {\"step\": \"analyze\", \"payload\": \"rec\", \"recipient\": "
             "\"cfo\"},\n"
             "     \"expect\": {\"outcome\": \"unknown\", \"codes\": [\"APPROVAL_PENDING\"]}}\n"
             "  ]}\n",
             APPROVAL, leak_facts);
    write_file("approval.test.json", text, path, sizeof path);
    cli_run r;
    test_file(path, &r);
    printf("\n%s%s", r.out, r.err);
    CU_ASSERT_EQUAL(r.status, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "PASS  cases[0]  case 0\n"
                                         "      deliver rec to cfo (step analyze, tool "
                                         "deliver_internal)\n"
                                         "      expected: unknown APPROVAL_PENDING\n"
                                         "      observed: unknown APPROVAL_PENDING (the gate "
                                         "allows it; held for human_cfo's approval within "
                                         "600000 ms)\n"));
}

/* One malformed test file: its cases text (after the leak facts) and the one line refusing it. */
typedef struct {
    const char *cases;
    const char *reason;
} malformed;

static const malformed malformed_files[] = {
    {"\"cases\": [], \"colour\": 1", "test file: unknown field \"colour\""},
    {"\"cases\": []", "cases: must hold at least one case"},
    {"\"cases\": [{\"input\": {\"step\": \"publish\", \"artifacts\": [\"rec\"]}, "
     "\"expect\": {\"outcome\": \"deny\"}}]",
     "cases[0].input: step: \"publish\" is not a step of workflow procurement"},
    {"\"cases\": [{\"input\": {\"step\": \"report\", \"artifacts\": [\"recommendation\"]}, "
     "\"expect\": {\"outcome\": \"deny\"}}]",
     "cases[0].input.artifacts[0]: \"recommendation\" is not an artifact of the test file"},
    {"\"cases\": [{\"read\": {\"step\": \"report\", \"resource\": \"budget\"}, "
     "\"deliver\": {\"step\": \"report\", \"payload\": \"rec\", \"recipient\": \"public\"}, "
     "\"expect\": {\"outcome\": \"deny\"}}]",
     "cases[0]: needs exactly one of input, deliver, read, invoke (the gate it asks)"},
    {"\"cases\": [{\"read\": {\"step\": \"report\", \"resource\": \"budget\"}, "
     "\"expect\": {\"outcome\": \"allow\", \"codes\": [\"GRANT_INVALID\"]}}]",
     "cases[0].expect: an allow carries no codes and no witness (leave them out)"},
    {"\"cases\": [{\"read\": {\"step\": \"report\", \"resource\": \"budget\"}, "
     "\"expect\": {\"outcome\": \"deny\", \"codes\": [\"TOO_SECRET\"]}}]",
     "cases[0].expect: codes[0]: \"TOO_SECRET\" is not a decision code (e.g. "
     "INPUT_OUT_OF_SCOPE, or APPROVAL_PENDING)"},
    {"\"cases\": [{\"revoked\": [\"g_nobody\"], \"read\": {\"step\": \"report\", \"resource\": "
     "\"budget\"}, \"expect\": {\"outcome\": \"deny\"}}]",
     "cases[0].revoked[0]: \"g_nobody\" is not a grant of the workflow"},
    {"\"cases\": [{\"now\": \"tomorrow\", \"read\": {\"step\": \"report\", \"resource\": "
     "\"budget\"}, \"expect\": {\"outcome\": \"deny\"}}]",
     "cases[0].now: \"tomorrow\" is not an RFC 3339 UTC time like \"2026-01-01T00:00:00Z\""},
    {"\"cases\": [{\"deliver\": {\"step\": \"research\", \"payload\": \"rec\", \"recipient\": "
     "\"public\"}, \"expect\": {\"outcome\": \"deny\"}}]",
     "cases[0].deliver: step research sends nothing by itself (no deliver): name the tool"},
};

static void test_a_malformed_test_file_is_refused_with_the_field_path(void)
{
    for (size_t i = 0; i < sizeof malformed_files / sizeof malformed_files[0]; i++) {
        char text[4096], path[256], want[1024];
        snprintf(text, sizeof text, "{\"workflow\": \"%s\",\n%s  %s}\n", PROCUREMENT, leak_facts,
                 malformed_files[i].cases);
        write_file("malformed.test.json", text, path, sizeof path);
        snprintf(want, sizeof want, "charter: %s: %s\n", path, malformed_files[i].reason);
        cli_run r;
        test_file(path, &r);
        CU_ASSERT_EQUAL(r.status, 2);
        CU_ASSERT_STRING_EQUAL(r.out, "");
        CU_ASSERT_STRING_EQUAL(r.err, want);
    }
}

/* A call charterd would refuse as INVALID_ARGUMENT before deciding is a malformed test file. */
static void test_an_invoke_case_charterd_would_not_take_is_refused_with_the_field_path(void)
{
    static const malformed calls[] = {
        {PAY_CALL("FR1420041010050500013M02606", "bill") "\"expect\": {\"outcome\": \"deny\"}}",
         "cases[0].invoke.arguments[0]: quoted_from: \"bill\" is no artifact of the test file "
         "holding the value"},
        {"{\"invoke\": {\"step\": \"pay\", \"tool\": \"send_money\", \"arguments\": ["
         "{\"name\": \"memo\", \"value\": \"84.20\", \"from_task\": true}]}, "
         "\"expect\": {\"outcome\": \"deny\"}}",
         "cases[0].invoke.arguments[0]: name: tool declares no argument \"memo\""},
        {"{\"invoke\": {\"step\": \"pay\", \"tool\": \"send_money\", \"arguments\": ["
         "{\"name\": \"amount\", \"value\": \"99.00\", \"from_task\": true}]}, "
         "\"expect\": {\"outcome\": \"deny\"}}",
         "cases[0].invoke.arguments[0]: value: not in the workflow's task"},
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        char text[4096], path[256], want[1024];
        snprintf(text, sizeof text, "{\"workflow\": \"%s\",\n%s  \"cases\": [%s]}\n",
                 WORKFLOWS "/payments.json", PAY_FACTS, calls[i].cases);
        write_file("malformed-invoke.test.json", text, path, sizeof path);
        snprintf(want, sizeof want, "charter: %s: %s\n", path, calls[i].reason);
        cli_run r;
        test_file(path, &r);
        CU_ASSERT_EQUAL(r.status, 2);
        CU_ASSERT_STRING_EQUAL(r.out, "");
        CU_ASSERT_STRING_EQUAL(r.err, want);
    }
}

static void test_artifacts_derive_only_from_earlier_ones(void)
{
    char text[4096], path[256], want[1024];
    snprintf(text, sizeof text,
             "{\"workflow\": \"%s\", \"artifacts\": [\n"
             "  {\"id\": \"rec\", \"derived_from\": [\"memo\"]},\n"
             "  {\"id\": \"memo\", \"source\": \"budget\"}],\n"
             " \"cases\": [{\"read\": {\"step\": \"report\", \"resource\": \"budget\"}, "
             "\"expect\": {\"outcome\": \"deny\"}}]}\n",
             PROCUREMENT);
    write_file("order.test.json", text, path, sizeof path);
    snprintf(want, sizeof want,
             "charter: %s: artifacts[0].derived_from[0]: \"memo\" is not an earlier artifact of "
             "the test file\n",
             path);
    cli_run r;
    test_file(path, &r);
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_STRING_EQUAL(r.err, want);
}

static void test_a_definition_given_to_test_is_pointed_to_validate(void)
{
    char want[1024];
    snprintf(want, sizeof want,
             "charter: %s is a workflow definition, not a test file (docs/workflows.md, \"Test "
             "files\"): charter workflow validate %s checks it; charter workflow rehearse %s runs "
             "its expect list on a charterd\n",
             PROCUREMENT, PROCUREMENT, PROCUREMENT);
    cli_run r;
    test_file(PROCUREMENT, &r);
    CU_ASSERT_EQUAL(r.status, 2);
    CU_ASSERT_STRING_EQUAL(r.err, want);
}

static void test_a_test_of_an_invalid_workflow_fails_with_its_problem(void)
{
    char def[256], path[256], text[1024], want[2048];
    write_edited(PROCUREMENT, "widening-def.json", grant_widens, def, sizeof def);
    snprintf(text, sizeof text,
             "{\"workflow\": \"widening-def.json\", \"cases\": [{\"read\": {\"step\": \"report\", "
             "\"resource\": \"budget\"}, \"expect\": {\"outcome\": \"deny\"}}]}\n");
    write_file("invalid-workflow.test.json", text, path, sizeof path);
    snprintf(want, sizeof want,
             "charter: %s: workflow %s is not valid: grants[1].valid_to: 2037-01-01T00:00:00Z is "
             "after the parent grant g_root's valid_to 2036-01-01T00:00:00Z (widening) (charter "
             "workflow validate %s lists every problem)\n",
             path, def, def);
    cli_run r;
    test_file(path, &r);
    CU_ASSERT_EQUAL(r.status, 1);
    CU_ASSERT_STRING_EQUAL(r.err, want);
}

static void test_test_json_gives_every_result(void)
{
    const char *args[] = {"--json", "workflow", "test", WORKFLOWS "/procurement.test.json"};
    cli_run r;
    run_offline(args, 4, &r);
    CU_ASSERT_EQUAL(r.status, 0);
    json_t *j = json_loads(r.out, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "passed")), 9);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "failed")), 0);
    const json_t *leak = json_array_get(json_object_get(j, "results"), 3);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(leak, "observed")),
                           "deny INPUT_OUT_OF_SCOPE witness \"budget (confidential) → Internal "
                           "recommendation → report step {vendor_a, vendor_b, vendor_c}\"");
    json_decref(j);
}

/* The control: a command that does ask charterd is seen on CHARTER_URL's socket, so the
 * offline runs' "nobody connected" could have failed. */
static void test_a_command_that_asks_charterd_is_seen_connecting(void)
{
    const char *args[] = {"--connect-timeout-ms", "300", "--timeout-ms", "300", "workflow", "list"};
    cli_run r;
    run_cli(args, 6, &r);
    CU_ASSERT_NOT_EQUAL(r.status, 0);
    CU_ASSERT_FALSE(nobody_connected());
}

static const harness_test tests[] = {
    HARNESS_TEST(test_validate_accepts_the_shipped_definitions),
    HARNESS_TEST(test_validate_names_every_problem_with_its_path),
    HARNESS_TEST(test_validate_leaves_parts_that_refer_to_broken_ones_unchecked),
    HARNESS_TEST(test_validate_reports_the_line_and_column_of_bad_json),
    HARNESS_TEST(test_validate_json_lists_the_problems),
    HARNESS_TEST(test_the_shipped_test_files_pass),
    HARNESS_TEST(test_the_shipped_invoke_test_files_pass),
    HARNESS_TEST(test_an_invoke_case_whose_verdict_differs_fails_with_what_was_decided),
    HARNESS_TEST(test_an_invoke_case_whose_origin_does_not_hold_its_value_is_refused),
    HARNESS_TEST(test_an_invoke_case_charterd_would_not_take_is_refused_with_the_field_path),
    HARNESS_TEST(test_a_case_whose_verdict_differs_fails_with_what_was_decided),
    HARNESS_TEST(test_a_send_the_workflow_holds_for_a_human_is_approval_pending),
    HARNESS_TEST(test_a_malformed_test_file_is_refused_with_the_field_path),
    HARNESS_TEST(test_artifacts_derive_only_from_earlier_ones),
    HARNESS_TEST(test_a_definition_given_to_test_is_pointed_to_validate),
    HARNESS_TEST(test_a_test_of_an_invalid_workflow_fails_with_its_problem),
    HARNESS_TEST(test_test_json_gives_every_result),
    HARNESS_TEST(test_a_command_that_asks_charterd_is_seen_connecting),
};
static const harness_suite suites[] = {
    {"charter workflow validate and test, offline", suite_init, suite_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
