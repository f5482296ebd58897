/*
 * test_operation.c - what an operator relies on when charterd runs as a service: readiness and
 * stopping told to systemd (sd_notify over $NOTIFY_SOCKET), a second charterd on a taken port
 * failing before it creates anything, the Redis URL forms users copy from elsewhere, a missing
 * Redis socket failing at once, and NOT_FOUND answers that name what was not found.
 * Real charterd processes, a real Redis, a real datagram socket.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "charter.h"
#include "harness.h"
#include "suite.h"
#include "db/store.h"
#include "main/config.h"

static char tmpdir[64];

static int ops_init(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/charter-ops.XXXXXX");
    return mkdtemp(tmpdir) != NULL ? 0 : -1;
}

static int ops_clean(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Reads datagrams from fd for at most ms until one contains want; 1 when seen. */
static int notify_seen(int fd, const char *want, int ms)
{
    double end = now_s() + ms / 1000.0;
    while (now_s() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        char buf[1024];
        ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
        if (n <= 0)
            continue;
        buf[n] = '\0';
        if (strstr(buf, want) != NULL)
            return 1;
    }
    return 0;
}

static void test_charterd_tells_systemd_it_is_ready_then_stopping(void)
{
    char path[96];
    snprintf(path, sizeof path, "%.64s/notify.sock", tmpdir);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CU_ASSERT_FATAL(fd >= 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    CU_ASSERT_FATAL(setenv("NOTIFY_SOCKET", path, 1) == 0);

    char graph[80];
    harness_graph_name(graph, sizeof graph, "notify");
    harness_charterd_opts o = {.graph = graph};
    harness_charterd d;
    int rc = harness_charterd_start(&o, &d);
    unsetenv("NOTIFY_SOCKET");
    CU_ASSERT_FATAL(rc == 0);
    CU_ASSERT_EQUAL(notify_seen(fd, "READY=1", 5000), 1);
    kill(d.pid, SIGTERM);
    CU_ASSERT_EQUAL(notify_seen(fd, "STOPPING=1", 5000), 1);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    close(fd);
    harness_graph_drop(graph);
}

static void test_second_charterd_on_a_taken_port_fails_before_making_its_data_folder(void)
{
    char graph[80];
    harness_graph_name(graph, sizeof graph, "taken");
    harness_charterd_opts o = {.graph = graph};
    harness_charterd first;
    CU_ASSERT_FATAL(harness_charterd_start(&o, &first) == 0);

    char data[128];
    snprintf(data, sizeof data, "%s/second-data", tmpdir);
    const char *args[] = {"--listen", first.tcp_url, "--data-dir", data};
    const char *env[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    /* The first redis-server on charterd's PATH only leaves a mark that it was started. */
    char bin[128], fake[160], mark[160], *path = NULL;
    snprintf(bin, sizeof bin, "%s/fakebin", tmpdir);
    snprintf(fake, sizeof fake, "%s/redis-server", bin);
    snprintf(mark, sizeof mark, "%s/started", bin);
    CU_ASSERT_EQUAL_FATAL(mkdir(bin, 0700), 0);
    FILE *f = fopen(fake, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "#!/bin/sh\n: > '%s'\nexit 1\n", mark);
    CU_ASSERT_EQUAL_FATAL(fclose(f), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(fake, 0700), 0);
    const char *old_path = getenv("PATH");
    CU_ASSERT_PTR_NOT_NULL_FATAL(old_path);
    size_t n_path = strlen(bin) + strlen(old_path) + 2;
    path = malloc(n_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(path);
    snprintf(path, n_path, "%s:%s", bin, old_path);
    char *kept = strdup(old_path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(kept);
    CU_ASSERT_EQUAL_FATAL(setenv("PATH", path, 1), 0);
    char out[1024];
    int status = harness_charterd_run(args, 4, env, 20000, out, sizeof out);
    CU_ASSERT_EQUAL(setenv("PATH", kept, 1), 0);
    free(kept);
    free(path);
    CU_ASSERT_EQUAL(status, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "the address is in use"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, first.tcp_url));
    struct stat sb;
    CU_ASSERT_NOT_EQUAL(stat(data, &sb), 0); /* no empty data folder left behind */
    CU_ASSERT_NOT_EQUAL(stat(mark, &sb), 0); /* no embedded redis-server was started */
    CU_ASSERT_EQUAL(harness_charterd_stop(&first), 0);
    harness_graph_drop(graph);
}

/* Port 0 for --listen tcp:// and --http: the system picks free ports as charterd binds them,
 * and the "serving" lines of its log name those ports, which answer. */
static void test_port_0_is_bound_and_logged(void)
{
    char graph[80];
    harness_graph_name(graph, sizeof graph, "port0");
    harness_charterd d;
    harness_charterd_opts o = {.graph = graph, .http = true};
    CU_ASSERT_EQUAL_FATAL(harness_charterd_start(&o, &d), 0);
    const char *tcp_port = strrchr(d.tcp_url, ':') + 1;
    const char *http_port = strrchr(d.http_hostport, ':') + 1;
    CU_ASSERT(atoi(tcp_port) > 0);
    CU_ASSERT(atoi(http_port) > 0);
    CU_ASSERT_EQUAL(harness_health(d.tcp_url, 5000, NULL), 0);
    harness_http_reply r;
    CU_ASSERT_EQUAL(
        harness_http_post(d.http_hostport, "/charter.v1.Health/Check", NULL, 0, "{}", &r), 0);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(graph);
}

/* A taken --http port fails like a taken --listen port: before anything is written, so the
 * graph is not claimed (its integrity mode, its workflow) by a start that did not happen. */
static void test_taken_http_port_fails_before_writing_to_the_graph(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CU_ASSERT_FATAL(fd >= 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    CU_ASSERT_FATAL(listen(fd, 1) == 0);
    socklen_t len = sizeof sa;
    CU_ASSERT_FATAL(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    char http[32];
    snprintf(http, sizeof http, "127.0.0.1:%d", ntohs(sa.sin_port));

    char graph[80];
    harness_graph_name(graph, sizeof graph, "httptaken");
    char before[65], after[65];
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(graph, before), 0);
    const char *args[] = {"--redis",  harness_redis_url(), "--graph", graph,
                          "--listen", "tcp://127.0.0.1:0", "--http",  http};
    const char *env[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    char out[1024];
    int status = harness_charterd_run(args, 8, env, 20000, out, sizeof out);
    CU_ASSERT_EQUAL(status, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "cannot serve HTTP on"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, http));
    CU_ASSERT_EQUAL_FATAL(harness_graph_digest(graph, after), 0);
    CU_ASSERT_STRING_EQUAL(after, before); /* nothing written */
    close(fd);
    harness_graph_drop(graph);
}

static void test_redis_url_forms_users_copy_are_canonical(void)
{
    static const struct {
        const char *in, *want; /* want NULL: refused */
    } cases[] = {
        {"unix:///var/run/redis.sock", "unix:///var/run/redis.sock"},
        {"unix:/var/run/redis.sock", "unix:///var/run/redis.sock"},
        {"redis+unix:///var/run/redis.sock", "unix:///var/run/redis.sock"},
        {"redis+unix:/var/run/redis.sock", "unix:///var/run/redis.sock"},
        {"redis://127.0.0.1:6380", "tcp://127.0.0.1:6380"},
        {"redis://localhost", "tcp://localhost:6379"},
        {"redis://localhost/0", "tcp://localhost:6379"},
        {"redis://[::1]:6380/", "tcp://[::1]:6380"},
        {"tcp://db:7000", "tcp://db:7000"},
        {"redis://user:secret@localhost:6379", NULL},
        {"redis://localhost:6379/2", NULL},
        {"rediss://localhost:6379", NULL},
        {"unix://relative.sock", NULL},
        {"localhost:6379", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[STORE_URL_MAX];
        int rc = store_url_canonical(cases[i].in, out, sizeof out);
        if (cases[i].want == NULL) {
            CU_ASSERT_EQUAL(rc, STATUS_EINVAL);
        } else {
            CU_ASSERT_EQUAL(rc, STATUS_OK);
            CU_ASSERT_STRING_EQUAL(out, cases[i].want);
        }
    }
    /* The test Redis answers through every socket-path form of its own URL. */
    const char *url = harness_redis_url();
    if (strncmp(url, "unix://", 7) == 0) {
        char alt[STORE_URL_MAX + 16];
        const char *forms[] = {"unix:%s", "redis+unix://%s", "redis+unix:%s"};
        for (size_t i = 0; i < 3; i++) {
            snprintf(alt, sizeof alt, forms[i], url + 7);
            store *st = NULL;
            CU_ASSERT_EQUAL(store_open(alt, "urlforms", 2000, &st), STATUS_OK);
            store_close(st);
        }
    }
}

static void test_missing_redis_socket_fails_at_once(void)
{
    char sock[128];
    snprintf(sock, sizeof sock, "--redis=unix://%s/no-such/redis.sock", tmpdir);
    const char *args[] = {sock, "--listen", "ipc:///tmp/charter-ops-none.sock", "--timeout-ms",
                          "30000"};
    const char *env[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    char out[1024];
    /* At once: a charterd that waited for the socket (up to its 30 s) would not have ended
     * within the 20 s given here (status -1). */
    int status = harness_charterd_run(args, 5, env, 20000, out, sizeof out);
    CU_ASSERT_EQUAL(status, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "cannot reach Redis"));
}

static void test_not_found_answers_name_the_id(void)
{
    char graph[80];
    harness_graph_name(graph, sizeof graph, "notfound");
    harness_charterd_opts o = {.graph = graph};
    harness_charterd d;
    CU_ASSERT_FATAL(harness_charterd_start(&o, &d) == 0);
    charter_client *c = NULL;
    CU_ASSERT_FATAL(harness_client_open(d.ipc_url, HARNESS_OPERATOR_TOKEN, 5000, &c) == 0);
    charter_status st;

    Charter__V1__GetRunRequest get = CHARTER__V1__GET_RUN_REQUEST__INIT;
    Charter__V1__RunView *v = NULL;
    get.run_id = "r_absent";
    CU_ASSERT_EQUAL(charter_get_run(c, &get, &v, &st), -CHARTER_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(st.message, "run r_absent not found");

    Charter__V1__TraceArtifactRequest tr = CHARTER__V1__TRACE_ARTIFACT_REQUEST__INIT;
    Charter__V1__TraceArtifactResponse *t = NULL;
    tr.artifact_id = "a_absent";
    CU_ASSERT_EQUAL(charter_trace_artifact(c, &tr, &t, &st), -CHARTER_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(st.message, "artifact a_absent not found");

    Charter__V1__ReplayDecisionRequest rp = CHARTER__V1__REPLAY_DECISION_REQUEST__INIT;
    Charter__V1__ReplayDecisionResponse *r = NULL;
    rp.run_id = "r_absent";
    rp.seq = 3;
    CU_ASSERT_EQUAL(charter_replay_decision(c, &rp, &r, &st), -CHARTER_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(st.message, "event 3 of run r_absent not found");

    Charter__V1__ReadSourceRequest rs = CHARTER__V1__READ_SOURCE_REQUEST__INIT;
    Charter__V1__ReadSourceResponse *s = NULL;
    rs.context_id = "c_absent";
    rs.resource_id = "vendor_a";
    CU_ASSERT_EQUAL(charter_read_source(c, &rs, &s, &st), -CHARTER_NOT_FOUND);
    CU_ASSERT_STRING_EQUAL(st.message, "context c_absent not found");

    charter_client_close(c);
    CU_ASSERT_EQUAL(harness_charterd_stop(&d), 0);
    harness_graph_drop(graph);
}

/* Every duration option takes the forms docs/operator.md gives, and only those: a whole number
 * of digits and one unit (s, m, h, d; zero in any unit is 0), 0, off, and for
 * --invocation-window forever. A sign, a space or anything else is refused with one line
 * naming the option and the value, as is a period beyond 3650 days. */
static void test_duration_options_take_exactly_the_documented_forms(void)
{
    static const struct {
        const char *option, *value;
        long long want; /* seconds; -1: refused */
    } cases[] = {
        {"--retention", "30d", 30LL * 86400},
        {"--retention", "12h", 12LL * 3600},
        {"--retention", "90m", 90LL * 60},
        {"--retention", "45s", 45},
        {"--retention", "0", 0},
        {"--retention", "off", 0},
        {"--retention", "0s", 0},
        {"--retention", "0d", 0},
        {"--retention", "3650d", 3650LL * 86400},
        {"--retention", "3651d", -1},
        {"--retention", "99999999999999999999s", -1},
        {"--retention", "+5s", -1},
        {"--retention", " 5s", -1},
        {"--retention", "5s ", -1},
        {"--retention", "-5s", -1},
        {"--retention", "5", -1},
        {"--retention", "5S", -1},
        {"--retention", "5sec", -1},
        {"--retention", "s", -1},
        {"--retention", "", -1},
        {"--retention", "forever", -1},
        {"--invocation-window", "7d", 7LL * 86400},
        {"--invocation-window", "0", 0},
        {"--invocation-window", "0m", 0},
        {"--invocation-window", "off", 0},
        {"--invocation-window", "forever", 0},
        {"--invocation-window", "+2s", -1},
        {"--invocation-window", "\t2s", -1},
        {"--invocation-window", "2s\n", -1},
        {"--invocation-window", "0x10s", -1},
    };
    CU_ASSERT_EQUAL_FATAL(setenv("CHARTER_OPERATOR_TOKEN", HARNESS_OPERATOR_TOKEN, 1), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[] = {"charterd", (char *)cases[i].option, (char *)cases[i].value, NULL};
        config cfg;
        char err[512] = "";
        int rc = config_parse(3, argv, &cfg, err, sizeof err);
        long long got =
            strcmp(cases[i].option, "--retention") == 0 ? cfg.retention_s : cfg.invocation_window_s;
        if (cases[i].want < 0) {
            CU_ASSERT_EQUAL(rc, CONFIG_EUSAGE);
            CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].option));
            char quoted[64];
            snprintf(quoted, sizeof quoted, "got \"%s\"", cases[i].value);
            CU_ASSERT_PTR_NOT_NULL(strstr(err, quoted));
        } else {
            CU_ASSERT_EQUAL(rc, CONFIG_OK);
            CU_ASSERT_EQUAL(got, cases[i].want);
        }
        if ((rc == CONFIG_OK) != (cases[i].want >= 0) || (rc == CONFIG_OK && got != cases[i].want))
            fprintf(stderr, "%s \"%s\": rc %d, %lld seconds, %s\n", cases[i].option, cases[i].value,
                    rc, got, err);
        config_free(&cfg);
    }
    CU_ASSERT_EQUAL(unsetenv("CHARTER_OPERATOR_TOKEN"), 0);

    /* charterd itself: the usage status and the one line, before any database is reached. */
    const char *args[] = {"--retention", "+5s",
                          "--redis",     "unix:///nonexistent/redis.sock",
                          "--listen",    "ipc:///tmp/charter-ops-none.sock"};
    const char *env[] = {"CHARTER_OPERATOR_TOKEN=" HARNESS_OPERATOR_TOKEN, NULL};
    char out[1024] = "";
    CU_ASSERT_EQUAL(harness_charterd_run(args, 6, env, 20000, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--retention"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "got \"+5s\""));
    char *nl = strchr(out, '\n');
    CU_ASSERT(nl != NULL && nl[1] == '\0');

    /* charter tenant create reads a tenant's durations by the same grammar (at least 1 of a
     * unit: 0 is charterd's default there): a usage error (2) before any call is made. */
    static const struct {
        const char *value;
        int status; /* 2: refused; 1: accepted, then no charterd answers */
    } cli[] = {{"+5s", 2}, {" 5s", 2}, {"-5s", 2}, {"5", 2}, {"0s", 2}, {"5s", 1}, {"05d", 1}};
    for (size_t i = 0; i < sizeof cli / sizeof cli[0]; i++)
        CU_ASSERT_EQUAL(
            harness_sh("'%s' --url tcp://127.0.0.1:9 --connect-timeout-ms 200 tenant create t "
                       "--retention '%s' >/dev/null 2>&1",
                       CHARTER_CLI_PATH, cli[i].value),
            cli[i].status);
}

/* The charter CLI reads the numbers of --budget and of replay --archive's SEQ as digits only,
 * as its other numbers: a sign or a leading space is a usage error (2) before any call or file
 * is read, not a number strtoll or strtoull made of it ("-1" was 18446744073709551615). */
static void test_cli_numbers_are_digits_only(void)
{
    static const struct {
        const char *value;
        int status; /* 2: refused; 1: accepted, then no charterd answers */
    } budget[] = {{"+2", 2}, {" 2", 2}, {"2 ", 2}, {"-2", 2}, {"", 2}, {"99999999999999999999", 2},
                  {"2", 1},  {"02", 1}};
    for (size_t i = 0; i < sizeof budget / sizeof budget[0]; i++)
        CU_ASSERT_EQUAL(
            harness_sh("'%s' --url tcp://127.0.0.1:9 --connect-timeout-ms 200 run --mode external "
                       "--budget 'max_steps=%s' >/dev/null 2>&1",
                       CHARTER_CLI_PATH, budget[i].value),
            budget[i].status);
    static const struct {
        const char *seq;
        int status; /* 2: refused; 1: accepted, then the archive file is not there */
    } seq[] = {{"-1", 2}, {"+5", 2}, {" 5", 2}, {"0", 2}, {"5x", 2}, {"99999999999999999999", 2},
               {"5", 1}};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++)
        CU_ASSERT_EQUAL(harness_sh("'%s' replay --archive /nonexistent/run.jsonl '%s' >/dev/null "
                                   "2>&1",
                                   CHARTER_CLI_PATH, seq[i].seq),
                        seq[i].status);
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"charterd tells systemd it is ready, then stopping",
     test_charterd_tells_systemd_it_is_ready_then_stopping},
    {"a second charterd on a taken port fails before making its data folder",
     test_second_charterd_on_a_taken_port_fails_before_making_its_data_folder},
    {"port 0 is bound and logged", test_port_0_is_bound_and_logged},
    {"a taken --http port fails before writing to the graph",
     test_taken_http_port_fails_before_writing_to_the_graph},
    {"Redis URL forms users copy are canonical", test_redis_url_forms_users_copy_are_canonical},
    {"a missing Redis socket fails at once", test_missing_redis_socket_fails_at_once},
    {"duration options take exactly the documented forms",
     test_duration_options_take_exactly_the_documented_forms},
    {"NOT_FOUND answers name the id", test_not_found_answers_name_the_id},
    {"numbers on the charter command line are digits only", test_cli_numbers_are_digits_only},
};
static const harness_suite suites[] = {
    {"operation", ops_init, ops_clean, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites), .needs_redis = true,
                                       .ignore_sigpipe = true};
