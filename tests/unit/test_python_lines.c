/*
 * tests/unit/test_python_lines.c — the line-table decoders of
 * sampler/common/python_linetable.c (3.9 co_lnotab, 3.10 co_linetable, 3.11+
 * locations) against the lines the real interpreters give: the tables and
 * the expected (instruction range, line) triples in
 * python_linetable_fixture.inc were made by
 * tests/unit/make_python_linetable_fixture.py, which compiles one function
 * (loop, branches, a two-line statement, a 300-line jump, a long line)
 * under each pyenv interpreter and records code.co_lines() (3.10+) or
 * dis.findlinestarts() (3.9).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>

#include "sampler/common/python_layout.h"
#include "tests/unit/unit.h"

struct lt_range {
    int32_t first, last; /* code units, inclusive */
    int line;
};

struct lt_case {
    const char *version;
    unsigned format; /* enum py_linetable_format */
    int first_line;
    const uint8_t *table;
    size_t len;
    const struct lt_range *ranges;
    size_t nranges;
};

#include "tests/unit/python_linetable_fixture.inc"

static void test_real_tables(void)
{
    for (size_t c = 0; c < sizeof lt_cases / sizeof lt_cases[0]; c++) {
        const struct lt_case *k = &lt_cases[c];
        unsigned wrong = 0, checked = 0;
        for (size_t r = 0; r < k->nranges; r++)
            for (int32_t u = k->ranges[r].first; u <= k->ranges[r].last; u++, checked++) {
                int got = python_line_lookup(k->format, k->table, k->len, k->first_line, u);
                if (got != k->ranges[r].line && wrong++ < 3)
                    printf("\n  %s: code unit %d: line %d, CPython says %d", k->version, u, got, k->ranges[r].line);
            }
        CU_ASSERT_EQUAL(wrong, 0);
        CU_ASSERT(checked > 100); /* the fixture really covers the function */
        /* Before the first instruction: the def line. */
        CU_ASSERT_EQUAL(python_line_lookup(k->format, k->table, k->len, k->first_line, -1), k->first_line);
    }
}

/* The 300-line jump and the long line are what need more than one entry. */
static void test_fixture_has_long_entries(void)
{
    for (size_t c = 0; c < sizeof lt_cases / sizeof lt_cases[0]; c++) {
        int max_line = 0;
        for (size_t r = 0; r < lt_cases[c].nranges; r++)
            max_line = lt_cases[c].ranges[r].line > max_line ? lt_cases[c].ranges[r].line : max_line;
        CU_ASSERT(max_line > 300);
    }
}

/* Hand-made 3.9 and 3.10 tables for the edge cases: a truncated pair, a
 * 3.10 range with no line (-128), a negative line delta. */
static void test_hand_tables(void)
{
    /* lnotab: bytes 0-5 line 1, 6-9 line 4, 10- line 2; odd length ignored at the end. */
    static const uint8_t lnotab[] = {6, 3, 4, (uint8_t)-2, 9};
    CU_ASSERT_EQUAL(python_line_from_lnotab(lnotab, sizeof lnotab, 1, 2), 1);
    CU_ASSERT_EQUAL(python_line_from_lnotab(lnotab, sizeof lnotab, 1, 3), 4);
    CU_ASSERT_EQUAL(python_line_from_lnotab(lnotab, sizeof lnotab, 1, 5), 2);
    /* 3.10: [0,4) line 2, [4,8) no line (keeps 2), [8,12) line 5 */
    static const uint8_t lt310[] = {4, 1, 4, 0x80, 4, 3};
    CU_ASSERT_EQUAL(python_line_from_310(lt310, sizeof lt310, 1, 1), 2);
    CU_ASSERT_EQUAL(python_line_from_310(lt310, sizeof lt310, 1, 3), 2);
    CU_ASSERT_EQUAL(python_line_from_310(lt310, sizeof lt310, 1, 5), 5);
    CU_ASSERT_EQUAL(python_line_from_310(lt310, 0, 7, 5), 7);
}

void register_python_lines_tests(void)
{
    CU_pSuite s = CU_add_suite("python_lines", NULL, NULL);
    CU_add_test(s, "3.9-3.13 tables from real interpreters give CPython's lines", test_real_tables);
    CU_add_test(s, "the fixture holds multi-entry jumps", test_fixture_has_long_entries);
    CU_add_test(s, "lnotab and 3.10 edge cases", test_hand_tables);
}
