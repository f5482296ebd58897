/*
 * test_invariant.c - INVARIANT stays on in the builds charter ships.
 *
 * Those builds define NDEBUG (CMake's RelWithDebInfo does), under which assert() checks
 * nothing. A failed INVARIANT must still log the expression and where, and abort.
 */
#include <CUnit/Basic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/invariant.h"
#include "suite.h"

/* Runs INVARIANT(1 + 1 == 3) in a child; returns its wait status and its stderr in out. */
static int failing_child(char *out, size_t n)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fd[1], STDERR_FILENO);
        close(fd[0]);
        INVARIANT(1 + 1 == 3);
        _exit(0); /* reached only when the invariant checked nothing */
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < n && (r = read(fd[0], out + got, n - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = '\0';
    close(fd[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return status;
}

static void test_a_failed_invariant_aborts_with_its_expression_in_this_build(void)
{
    char err[512];
    int status = failing_child(err, sizeof err);
    CU_ASSERT_FATAL(status != -1);
    CU_ASSERT_TRUE(WIFSIGNALED(status));
    CU_ASSERT_EQUAL(WTERMSIG(status), SIGABRT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "invariant failed: 1 + 1 == 3 at "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "test_invariant.c:"));
}

static void test_a_holding_invariant_costs_nothing_and_goes_on(void)
{
    int reached = 0;
    INVARIANT(2 + 2 == 4);
    reached = 1;
    CU_ASSERT_EQUAL(reached, 1);
}

/* --- registration ---------------------------------------------------------------------------- */

static const harness_test tests[] = {
    {"a failed invariant aborts with its expression in this build",
     test_a_failed_invariant_aborts_with_its_expression_in_this_build},
    {"a holding invariant goes on", test_a_holding_invariant_costs_nothing_and_goes_on},
};
static const harness_suite suites[] = {
    {"invariant", NULL, NULL, HARNESS_TABLE(tests)},
};

const harness_program harness_tests = {HARNESS_SUITES(suites)};
