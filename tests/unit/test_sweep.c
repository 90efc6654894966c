/*
 * tests/unit/test_sweep.c — analyze/sweep.c: shape parsing, flop/byte
 * formulas on hand-computed values, {name} substitution (verbatim, no shell),
 * list splitting, row derivation and the sort order of `opprof diff`.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "tests/unit/unit.h"

static void test_op_parse(void)
{
    CU_ASSERT_EQUAL(sweep_op_parse("torch.bmm"), SWEEP_OP_BMM);
    CU_ASSERT_EQUAL(sweep_op_parse("bmm"), SWEEP_OP_BMM);
    CU_ASSERT_EQUAL(sweep_op_parse("aten::mm"), SWEEP_OP_MM);
    CU_ASSERT_EQUAL(sweep_op_parse("torch.nn.functional.layer_norm"), SWEEP_OP_LAYER_NORM);
    CU_ASSERT_EQUAL(sweep_op_parse("torch.softmax"), SWEEP_OP_SOFTMAX);
    CU_ASSERT_EQUAL(sweep_op_parse("torch.bmmx"), SWEEP_OP_UNKNOWN);
    CU_ASSERT_EQUAL(sweep_op_parse("torch.conv2d"), SWEEP_OP_UNKNOWN);
}

static void test_shape_parse(void)
{
    long d[SWEEP_MAX_DIMS];
    int n = 0;
    char err[256];
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_BMM, "8x64x13x64", d, &n, err, sizeof err), 0);
    CU_ASSERT_EQUAL(n, 4);
    CU_ASSERT_EQUAL(d[0], 8);
    CU_ASSERT_EQUAL(d[2], 13);
    CU_ASSERT_EQUAL(d[3], 64);
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_BMM, "8x64x64", d, &n, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "BxMxKxN"));
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_MM, "64x64x64", d, &n, err, sizeof err), 0);
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_MM, "64xx64x64", d, &n, err, sizeof err), -1);
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_MM, "64x0x64", d, &n, err, sizeof err), -1);
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_MM, "64x-1x64", d, &n, err, sizeof err), -1);
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_MM, "abc", d, &n, err, sizeof err), -1);
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_MM, "", d, &n, err, sizeof err), -1);
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_MM, "4x4x4x", d, &n, err, sizeof err), -1);
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_SOFTMAX, "32", d, &n, err, sizeof err), 0);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_LAYER_NORM, "2x3x4x5x6", d, &n, err, sizeof err), 0);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_SOFTMAX, "1x1x1x1x1x1x1x1x1", d, &n, err, sizeof err), -1);
}

static void test_counts(void)
{
    long bmm[] = {8, 64, 13, 32};
    double f, b;
    CU_ASSERT_EQUAL(sweep_dtype_size("float32"), 4);
    CU_ASSERT_EQUAL(sweep_dtype_size("bfloat16"), 2);
    CU_ASSERT_EQUAL(sweep_dtype_size("float64"), 8);
    CU_ASSERT_EQUAL(sweep_dtype_size("int3"), 0);
    CU_ASSERT_EQUAL(sweep_op_counts(SWEEP_OP_BMM, bmm, 4, 4, &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 2.0 * 8 * 64 * 13 * 32, 0.5); /* 425984 */
    CU_ASSERT_DOUBLE_EQUAL(f, 425984, 0.5);
    /* 4 x (8*64*13 + 8*13*32 + 8*64*32) = 4 x (6656 + 3328 + 16384) */
    CU_ASSERT_DOUBLE_EQUAL(b, 105472, 0.5);
    long mm[] = {10, 20, 30};
    CU_ASSERT_EQUAL(sweep_op_counts(SWEEP_OP_MM, mm, 3, 2, &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 12000, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(b, 2.0 * (200 + 600 + 300), 0.5);
    CU_ASSERT_EQUAL(sweep_op_counts(SWEEP_OP_ADDMM, mm, 3, 4, &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 12000 + 300, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(b, 4.0 * (200 + 600 + 300 + 300), 0.5);
    long sm[] = {16, 128};
    CU_ASSERT_EQUAL(sweep_op_counts(SWEEP_OP_SOFTMAX, sm, 2, 4, &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 5.0 * 2048, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(b, 2.0 * 4 * 2048, 0.5);
    CU_ASSERT_EQUAL(sweep_op_counts(SWEEP_OP_LAYER_NORM, sm, 2, 2, &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 8.0 * 2048, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(b, 2.0 * 2 * 2048, 0.5);
    CU_ASSERT_EQUAL(sweep_op_counts(SWEEP_OP_BMM, mm, 3, 4, &f, &b), -1);
    CU_ASSERT_EQUAL(sweep_op_counts(SWEEP_OP_UNKNOWN, mm, 3, 4, &f, &b), -1);
}

static void test_substitute(void)
{
    char *s = sweep_substitute("--size={n}", "n", "100");
    CU_ASSERT_STRING_EQUAL(s, "--size=100");
    free(s);
    s = sweep_substitute("a{n}b{n}c{nn}{m}", "n", "7");
    CU_ASSERT_STRING_EQUAL(s, "a7b7c{nn}{m}");
    free(s);
    s = sweep_substitute("{n", "n", "7");
    CU_ASSERT_STRING_EQUAL(s, "{n");
    free(s);
    /* Shell metacharacters, in the argument or in the value, stay verbatim. */
    s = sweep_substitute("$(rm -rf /); `x` | y > z '{n}' \"*\"", "n", "1;echo pwned&");
    CU_ASSERT_STRING_EQUAL(s, "$(rm -rf /); `x` | y > z '1;echo pwned&' \"*\"");
    free(s);
    s = sweep_substitute("", "n", "5");
    CU_ASSERT_STRING_EQUAL(s, "");
    free(s);
}

static void test_split_and_label(void)
{
    char **v;
    size_t n;
    CU_ASSERT_EQUAL(sweep_split_list("8x64x64x64,,4x4x4x4,", &v, &n), 0);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_STRING_EQUAL(v[0], "8x64x64x64");
    CU_ASSERT_STRING_EQUAL(v[1], "4x4x4x4");
    sweep_free_list(v, n);
    char lab[32];
    sweep_sanitize_label("bmm 4x4 t/1;$", lab, sizeof lab);
    CU_ASSERT_STRING_EQUAL(lab, "bmm_4x4_t_1__");
    double x = 0;
    CU_ASSERT_TRUE(sweep_json_number("{\"a\": 1, \"median_s\": 2.5e-3}", "median_s", &x));
    CU_ASSERT_DOUBLE_EQUAL(x, 2.5e-3, 1e-12);
    CU_ASSERT_FALSE(sweep_json_number("{\"min_s\": 1}", "median_s", &x));
}

static void test_row_derive(void)
{
    struct sweep_row r = {.median_s = 0.002, .min_s = 0.001, .max_s = 0.003};
    sweep_row_derive(&r, 4e6, 1e6);
    CU_ASSERT_DOUBLE_EQUAL(r.spread, 1.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(r.gflops, 2.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(r.gbps, 0.5, 1e-9);
    sweep_row_derive(&r, -1, 0);
    CU_ASSERT_TRUE(isnan(r.gflops));
    CU_ASSERT_TRUE(isnan(r.gbps));
}

static void test_diff_sort(void)
{
    struct hotspot_row ra[] = {{.name = "aten::bmm", .self = 50}, {.name = "aten::add", .self = 30},
                               {.name = "aten::relu", .self = 20}};
    struct hotspot_row rb[] = {{.name = "aten::bmm", .self = 80}, {.name = "aten::add", .self = 15},
                               {.name = "aten::mul", .self = 5}};
    struct hotspot_table a = {.rows = ra, .nrows = 3, .total_weight = 100, .period_ns = 1000000};
    struct hotspot_table b = {.rows = rb, .nrows = 3, .total_weight = 100, .period_ns = 2000000};
    struct diff_table d;
    CU_ASSERT_EQUAL_FATAL(diff_compute(&a, &b, &d), 0);
    diff_sort(&d);
    CU_ASSERT_EQUAL_FATAL(d.nrows, 4);
    /* changes in pp: bmm +30, relu -20, add -15, mul +5 */
    CU_ASSERT_STRING_EQUAL(d.rows[0].name, "aten::bmm");
    CU_ASSERT_STRING_EQUAL(d.rows[1].name, "aten::relu");
    CU_ASSERT_STRING_EQUAL(d.rows[2].name, "aten::add");
    CU_ASSERT_STRING_EQUAL(d.rows[3].name, "aten::mul");
    CU_ASSERT_DOUBLE_EQUAL(d.rows[0].a_s, 0.05, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(d.rows[0].b_s, 0.16, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(d.rows[1].b_share, 0.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(d.rows[3].a_share, 0.0, 1e-12);
    diff_free(&d);
}

void register_sweep_tests(void)
{
    CU_pSuite s = CU_add_suite("sweep", NULL, NULL);
    CU_add_test(s, "op names", test_op_parse);
    CU_add_test(s, "shape parsing", test_shape_parse);
    CU_add_test(s, "flop and byte formulas", test_counts);
    CU_add_test(s, "{name} substitution, verbatim", test_substitute);
    CU_add_test(s, "lists, labels, JSON numbers", test_split_and_label);
    CU_add_test(s, "row derivation", test_row_derive);
    CU_add_test(s, "diff sort order", test_diff_sort);
}
