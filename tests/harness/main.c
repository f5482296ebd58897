/*
 * main.c - the one main of every CUnit test program: registers the suites the program
 * declares (harness_tests, see suite.h), runs them in CUnit's basic mode and turns the result
 * into the exit status CTest reads.
 */

/*
 * Exit status: 0 when every registered test ran and nothing failed; 1 when an assertion, a
 * suite's init or a suite's cleanup failed, or when a test did not run (its suite's init
 * failed): no test is skipped silently; 2 when the program could not set CUnit up or register
 * its tests; the program's setup's own status when setup ends it.
 *
 * With CHARTER_TEST_FAIL_FAST=1 the program stops after the first test that failed (its
 * suite's cleanup and the program's teardown run, the status is 1): the mutation check only
 * needs to know that a suite fails, not every way it does.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "suite.h"

/* After each test under CHARTER_TEST_FAIL_FAST: once an assertion has failed, the suite's
 * cleanup and the program's teardown run and the program ends with status 1. */
static void fail_fast_after_test(void)
{
    if (CU_get_number_of_failures() == 0)
        return;
    CU_pSuite s = CU_get_current_suite();
    CU_pFailureRecord f = CU_get_failure_list();
    if (f != NULL)
        fprintf(stderr, "\nharness: %s:%u: %s\n", f->strFileName ? f->strFileName : "?",
                f->uiLineNumber, f->strCondition ? f->strCondition : "?");
    fprintf(stderr, "harness: stopping at the first failed test (CHARTER_TEST_FAIL_FAST)\n");
    fflush(stdout);
    if (s != NULL && s->pCleanupFunc != NULL)
        (void)s->pCleanupFunc();
    if (harness_tests.teardown != NULL)
        harness_tests.teardown();
    exit(1);
}

/* Adds every suite and test of p to the CUnit registry, in order, and writes how many tests
 * that is to *n_tests. Returns 0, or -1 (printed) when CUnit refuses one, e.g. a duplicate
 * test name. */
static int register_suites(const harness_program *p, size_t *n_tests)
{
    const char *ff = getenv("CHARTER_TEST_FAIL_FAST");
    CU_TearDownFunc after = ff != NULL && strcmp(ff, "1") == 0 ? fail_fast_after_test : NULL;
    *n_tests = 0;
    for (size_t i = 0; i < p->n_suites; i++) {
        const harness_suite *hs = &p->suites[i];
        CU_pSuite s =
            CU_add_suite_with_setup_and_teardown(hs->name, hs->init, hs->cleanup, NULL, after);
        if (s == NULL) {
            fprintf(stderr, "harness: cannot register suite \"%s\": %s\n", hs->name,
                    CU_get_error_msg());
            return -1;
        }
        for (size_t j = 0; j < hs->n_tests; j++) {
            if (CU_add_test(s, hs->tests[j].name, hs->tests[j].fn) == NULL) {
                fprintf(stderr, "harness: cannot register test \"%s\" of suite \"%s\": %s\n",
                        hs->tests[j].name, hs->name, CU_get_error_msg());
                return -1;
            }
        }
        *n_tests += hs->n_tests;
    }
    return 0;
}

/* Runs the registered tests and returns 0 when all of the n_tests ran and nothing failed,
 * else 1. Reads CUnit's run summary, so the registry must still exist. */
static int run_suites(size_t n_tests)
{
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_ErrorCode run = CU_basic_run_tests();
    unsigned records = CU_get_number_of_failure_records();
    unsigned asserts_failed = CU_get_number_of_failures();
    unsigned tests_failed = CU_get_number_of_tests_failed();
    unsigned suites_failed = CU_get_number_of_suites_failed();
    unsigned ran = CU_get_number_of_tests_run();
    int failed = run != CUE_SUCCESS || records != 0 || asserts_failed != 0 || tests_failed != 0 ||
                 suites_failed != 0;
    if (ran != n_tests) {
        fprintf(stderr, "harness: %u of %zu tests ran; the others did not (see above)\n", ran,
                n_tests);
        failed = 1;
    }
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    const harness_program *p = &harness_tests;
    if (p->setup != NULL) {
        int rc = p->setup(argc, argv);
        if (rc != 0)
            return rc;
    }
    if (p->needs_redis)
        (void)harness_redis_url(); /* ends the program, saying why, when there is none */
    if (p->ignore_sigpipe && signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        perror("harness: signal(SIGPIPE)");
        return 2;
    }
    int status = 2;
    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "harness: cannot set CUnit up: %s\n", CU_get_error_msg());
    } else {
        size_t n_tests = 0;
        if (register_suites(p, &n_tests) == 0)
            status = run_suites(n_tests);
        CU_cleanup_registry();
    }
    if (p->teardown != NULL)
        p->teardown();
    return status;
}
