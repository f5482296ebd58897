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
 */
#include <signal.h>
#include <stdio.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "suite.h"

/* Adds every suite and test of p to the CUnit registry, in order, and writes how many tests
 * that is to *n_tests. Returns 0, or -1 (printed) when CUnit refuses one, e.g. a duplicate
 * test name. */
static int register_suites(const harness_program *p, size_t *n_tests)
{
    *n_tests = 0;
    for (size_t i = 0; i < p->n_suites; i++) {
        const harness_suite *hs = &p->suites[i];
        CU_pSuite s = CU_add_suite(hs->name, hs->init, hs->cleanup);
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
