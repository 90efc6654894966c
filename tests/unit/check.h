/*
 * tests/unit/check.h — CHECK for the unit tests that are plain programs
 * (not CUnit: they stand in for the agent's symbols, see unwind_cfi.c):
 * prints the failed condition's line and message and counts it in the
 * including file's `failures`.
 */
#ifndef OPPROF_TESTS_UNIT_CHECK_H
#define OPPROF_TESTS_UNIT_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            printf("FAIL line %d: ", __LINE__);                                                              \
            printf(__VA_ARGS__);                                                                             \
            printf("\n");                                                                                    \
            failures++;                                                                                      \
        }                                                                                                    \
    } while (0)

#endif
