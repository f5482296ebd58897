/*
 * suite.h - how a test program declares its tests to the one CUnit main (harness/main.c).
 */

/*
 * Every tests/test_*.c ends with its tests in tables and one definition of harness_tests; it
 * has no main of its own. main.c, linked into every test program, registers the suites in
 * order, runs them in CUnit's basic mode (verbose) and exits 0 only when every registered test
 * ran and nothing failed (an assertion, a suite's init or cleanup). CMakeLists.txt registers
 * each program with one charter_suite() line naming its tier.
 *
 *     static const harness_test rpc_tests[] = {
 *         {"health answers without token", test_health_answers_without_token},
 *         HARNESS_TEST(test_unknown_method_is_unimplemented),   // named after the function
 *     };
 *     static const harness_suite suites[] = {
 *         {"rpc", rpc_init, rpc_cleanup, HARNESS_TABLE(rpc_tests)},
 *     };
 *     const harness_program harness_tests = {HARNESS_SUITES(suites), .needs_redis = true};
 */
#ifndef CHARTER_HARNESS_SUITE_H
#define CHARTER_HARNESS_SUITE_H

#include <stdbool.h>
#include <stddef.h>

#include <CUnit/CUnit.h>

/* One test: the name CUnit prints and the function it runs. */
typedef struct {
    const char *name;
    CU_TestFunc fn;
} harness_test;

/* One CUnit suite. init (may be NULL) runs before its first test; when it returns nonzero no
 * test of the suite runs and the program fails. cleanup (may be NULL) runs after its last
 * test; nonzero fails the program too. */
typedef struct {
    const char *name;
    CU_InitializeFunc init;
    CU_CleanupFunc cleanup;
    const harness_test *tests;
    size_t n_tests;
} harness_suite;

/* A whole test program, in the order main.c uses it:
 *   1. setup (may be NULL) with main's arguments, before the CUnit registry exists: returns 0
 *      to go on, or the exit status to end the program with (nothing registered, no test run).
 *      A program with a mode of its own (test_rpc's child sender) handles it here.
 *   2. needs_redis: CHARTER_TEST_REDIS is checked (harness_redis_url), ending the program with
 *      an explanation when it is unset.
 *   3. ignore_sigpipe: SIGPIPE ignored, for programs that write to servers they kill.
 *   4. the suites, registered and run in order.
 *   5. teardown (may be NULL), after the registry is cleaned up, whatever the result. */
typedef struct {
    const harness_suite *suites;
    size_t n_suites;
    int (*setup)(int argc, char **argv);
    void (*teardown)(void);
    bool needs_redis;
    bool ignore_sigpipe;
} harness_program;

/* Defined by each test program (tests/test_*.c). */
extern const harness_program harness_tests;

/* A test named after its function: HARNESS_TEST(test_x) is {"test_x", test_x}. */
#define HARNESS_TEST(fn)                                                                           \
    {                                                                                              \
#fn, fn                                                                                    \
    }

/* An array of tests and its number of elements, the last two fields of a harness_suite. */
#define HARNESS_TABLE(a) (a), (sizeof(a) / sizeof((a)[0]))

/* The suites of a program, as designated fields of its harness_program. */
#define HARNESS_SUITES(a) .suites = (a), .n_suites = (sizeof(a) / sizeof((a)[0]))

#endif
