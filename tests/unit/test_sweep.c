/*
 * tests/unit/test_sweep.c — analyze/sweep.c: shape parsing, flop/byte
 * formulas on hand-computed values, {name} substitution (verbatim, no shell),
 * list splitting, row derivation, the sort order of `opprof diff` and its
 * restriction to the runner's timed calls, and the plot's bar heights.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "report/report.h"
#include "tests/unit/unit.h"

static void test_op_parse(void)
{
    CU_ASSERT_EQUAL(sweep_op_parse("torch.bmm"), SWEEP_OP_BMM);
    CU_ASSERT_EQUAL(sweep_op_parse("bmm"), SWEEP_OP_BMM);
    CU_ASSERT_EQUAL(sweep_op_parse("aten::mm"), SWEEP_OP_MM);
    CU_ASSERT_EQUAL(sweep_op_parse("torch.nn.functional.layer_norm"), SWEEP_OP_LAYER_NORM);
    CU_ASSERT_EQUAL(sweep_op_parse("torch.softmax"), SWEEP_OP_SOFTMAX);
    CU_ASSERT_EQUAL(sweep_op_parse("torch.bmmx"), SWEEP_OP_UNKNOWN);
    CU_ASSERT_EQUAL(sweep_op_parse("torch.conv2d"), SWEEP_OP_CONV2D);
    CU_ASSERT_EQUAL(sweep_op_parse("torch.nn.functional.linear"), SWEEP_OP_LINEAR);
    CU_ASSERT_EQUAL(sweep_op_parse("torch.conv3d"), SWEEP_OP_UNKNOWN);
    CU_ASSERT_STRING_EQUAL(sweep_op_name(SWEEP_OP_CONV2D), "conv2d");
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
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_CONV2D, "2x3x8x10x4x3x5", d, &n, err, sizeof err), 0);
    CU_ASSERT_EQUAL(n, 7);
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_CONV2D, "2x3x8x10x4x3", d, &n, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "NxCxHxWxKxRxS"));
    /* a 9x5 kernel does not fit an 8x10 image */
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_CONV2D, "2x3x8x10x4x9x5", d, &n, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "larger than the image"));
    CU_ASSERT_EQUAL(sweep_parse_shape(SWEEP_OP_LINEAR, "10x20x30", d, &n, err, sizeof err), 0);
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
    /* the tensor read and written (2 x 2 B x 2048) plus weight and bias (2 x 2 B x 128) */
    CU_ASSERT_DOUBLE_EQUAL(b, 8192 + 512, 0.5);
    /* linear 10x20x30: 2*10*20*30 + 10*30 (bias) = 12300 flops;
     * 4 B x (10*20 + 30*20 + 10*30 + 30) = 4 x 1130 = 4520 bytes */
    CU_ASSERT_EQUAL(sweep_op_counts(SWEEP_OP_LINEAR, mm, 3, 4, &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 12300, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(b, 4520, 0.5);
    /* conv2d N=2 C=3 H=8 W=10 K=4 R=3 S=5: output 2x4x6x6 = 288 elements of
     * 3*3*5 = 45 multiply-adds: 2 * 288 * 45 = 25920 flops; bytes
     * 4 x (480 input + 180 weight + 288 output) = 3792 */
    long conv[] = {2, 3, 8, 10, 4, 3, 5};
    CU_ASSERT_EQUAL(sweep_op_counts(SWEEP_OP_CONV2D, conv, 7, 4, &f, &b), 0);
    CU_ASSERT_DOUBLE_EQUAL(f, 25920, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(b, 3792, 0.5);
    long conv_bad[] = {2, 3, 8, 10, 4, 9, 5};
    CU_ASSERT_EQUAL(sweep_op_counts(SWEEP_OP_CONV2D, conv_bad, 7, 4, &f, &b), -1);
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
    CU_ASSERT_DOUBLE_EQUAL(r.spread, 1.0, 1e-9); /* (max-min)/median without quartiles */
    r.p25_s = 0.0019;
    r.p75_s = 0.0023;
    sweep_row_derive(&r, 4e6, 1e6);
    CU_ASSERT_DOUBLE_EQUAL(r.spread, 0.2, 1e-9); /* (p75-p25)/median: an outlier call does not count */
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

/* Samples under the runner's timed function are kept, the others (start-up,
 * imports, warm-up) dropped, and the total becomes theirs. */
static void test_keep_timed(void)
{
    struct profile *p = profile_new_empty();
    uint32_t sgemm = profile_add_frame(p, "sgemm_", "libblas.so.3", NULL, 0, FRAME_NATIVE);
    uint32_t timed = profile_add_frame(p, SWEEP_TIMED_FUNCTION, "op_bench.py", "/x/op_bench.py", 101, FRAME_PYTHON);
    uint32_t warm = profile_add_frame(p, "op_bench_warm_up", "op_bench.py", "/x/op_bench.py", 96, FRAME_PYTHON);
    uint32_t mainf = profile_add_frame(p, "main", "op_bench.py", "/x/op_bench.py", 140, FRAME_PYTHON);
    uint32_t s_timed[] = {sgemm, timed, mainf}, s_warm[] = {sgemm, warm, mainf}, s_main[] = {mainf};
    uint32_t st_timed = profile_add_stack(p, s_timed, 3), st_warm = profile_add_stack(p, s_warm, 3),
             st_main = profile_add_stack(p, s_main, 1);
    uint32_t th = profile_add_thread(p, 1, 1, "python3");
    for (int i = 0; i < 7; i++)
        profile_add_sample(p, 10 + (uint64_t)i, th, st_timed, 2);
    for (int i = 0; i < 3; i++)
        profile_add_sample(p, 20 + (uint64_t)i, th, st_warm, 1);
    profile_add_sample(p, 30, th, st_main, 5);
    CU_ASSERT_EQUAL(p->total_weight, 14 + 3 + 5);
    CU_ASSERT_EQUAL(profile_keep_samples_under(p, "no_such_function"), 0);
    CU_ASSERT_EQUAL(p->nsamples, 11); /* untouched */
    CU_ASSERT_EQUAL(profile_keep_samples_under(p, SWEEP_TIMED_FUNCTION), 7);
    CU_ASSERT_EQUAL(p->nsamples, 7);
    CU_ASSERT_EQUAL(p->total_weight, 14);
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_FUNCTION, &t), 0);
    hotspots_sort(&t, SORT_SELF);
    CU_ASSERT_STRING_EQUAL(t.rows[0].name, "sgemm_");
    CU_ASSERT_EQUAL(t.rows[0].self, 14); /* 100 % of what is compared */
    hotspots_free(&t);
    profile_free(p);
}

/* The numbers after key="..." in order, up to max. */
static size_t svg_numbers(const char *svg, const char *key, double *out, size_t max)
{
    size_t n = 0;
    for (const char *s = svg; n < max && (s = strstr(s, key)); s += strlen(key))
        out[n++] = strtod(s + strlen(key), NULL);
    return n;
}

/* Bars stand on a y axis from 0: height / value is the same for every bar
 * and equals plot height / axis maximum; a failed row is a cross, no bar. */
static void test_plot_heights(void)
{
    struct sweep_row rows[3];
    memset(rows, 0, sizeof rows);
    const char *x[] = {"8x64x64x64", "8x64x13x64", "8x64"};
    double gf[] = {40, 10, NAN};
    for (int i = 0; i < 3; i++) {
        snprintf(rows[i].label, sizeof rows[i].label, "bmm %s float32", x[i]);
        snprintf(rows[i].x, sizeof rows[i].x, "%s", x[i]);
        rows[i].ok = i < 2;
        rows[i].median_s = 1e-3 * (i + 1);
        rows[i].gflops = gf[i];
        rows[i].gbps = NAN;
    }
    snprintf(rows[2].reason, sizeof rows[2].reason, "malformed shape '8x64'");
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    report_sweep_svg(out, rows, 3, "torch.bmm", SWEEP_PLOT_AUTO, false);
    fclose(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "data-metric=\"gflops\""));
    double h[4] = {0}, v[4] = {0}, max[1] = {0}, plot_h[1] = {0};
    CU_ASSERT_EQUAL_FATAL(svg_numbers(buf, " height=\"", h, 4), 4); /* svg, background, 2 bars */
    CU_ASSERT_EQUAL_FATAL(svg_numbers(strstr(buf, "class=\"bar\""), "data-value=\"", v, 4), 2);
    CU_ASSERT_EQUAL_FATAL(svg_numbers(buf, "data-max=\"", max, 1), 1);
    CU_ASSERT_EQUAL_FATAL(svg_numbers(buf, "data-plot-height=\"", plot_h, 1), 1);
    CU_ASSERT_DOUBLE_EQUAL(v[0], 40, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(v[1], 10, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(max[0], 40, 1e-9); /* ticks of 10 up to 40 */
    CU_ASSERT_DOUBLE_EQUAL(h[2], 40 / max[0] * plot_h[0], 0.01);
    CU_ASSERT_DOUBLE_EQUAL(h[3], 10 / max[0] * plot_h[0], 0.01);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "class=\"failed\" data-label=\"bmm 8x64 float32\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "failed: malformed shape &#39;8x64&#39;"));
    free(buf);

    /* time per call: microseconds below 1 ms, lower is better */
    enum sweep_plot_metric m;
    CU_ASSERT_EQUAL(sweep_plot_metric_parse("time", &m), 0);
    CU_ASSERT_EQUAL(m, SWEEP_PLOT_TIME);
    CU_ASSERT_EQUAL(sweep_plot_metric_parse("cpi", &m), -1);
    rows[0].median_s = 250e-6;
    rows[1].median_s = 500e-6;
    out = open_memstream(&buf, &len);
    report_sweep_svg(out, rows, 2, "torch.bmm", SWEEP_PLOT_TIME, true);
    fclose(out);
    CU_ASSERT_PTR_NULL(strstr(buf, "<?xml"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "data-unit=\"us\""));
    CU_ASSERT_EQUAL_FATAL(svg_numbers(strstr(buf, "class=\"bar\""), "data-value=\"", v, 4), 2);
    CU_ASSERT_DOUBLE_EQUAL(v[0], 250, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(v[1], 500, 1e-6);
    free(buf);
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
    CU_add_test(s, "diff keeps the timed calls", test_keep_timed);
    CU_add_test(s, "plot bar heights", test_plot_heights);
}
