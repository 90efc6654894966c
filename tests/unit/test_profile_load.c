/*
 * tests/unit/test_profile_load.c — the raw-format reader on hand-built result
 * directories: a good stream, a truncated one, a corrupt one, unknown record
 * types, missing info, Python frames spliced into native stacks, the
 * aggregated load. The streams are built through format/'s writer by
 * tests/unit/test_stream.c; the compact records have test_compact_records.c.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"
#include "format/format.h"
#include "tests/unit/unit.h"

/* A stream with two stacks (addresses outside any mapping: they become
 * "[unknown] 0x..." frames), three samples on two threads, a LOST and END. */
static struct test_buf good_stream(void)
{
    struct test_stream s;
    test_stream_begin(&s, 42, false);
    struct opr_thread t = {42, OPR_THREAD_MAIN, 0, "main"};
    test_stream_record(&s, OPR_REC_THREAD, &t, sizeof t, NULL, 0);
    uint64_t s0[] = {0x1000, 0x2000, 0x3000};
    uint64_t s1[] = {0x1100, 0x2000, 0x3000};
    test_stream_stack(&s, 0, s0, 3);
    test_stream_stack(&s, 1, s1, 3);
    test_stream_sample(&s, 10, 42, 0, 0);
    test_stream_sample(&s, 20, 43, 1, 0);
    test_stream_sample(&s, 30, 42, 0, 0);
    struct opr_lost l = {40, 5, 8};
    test_stream_record(&s, OPR_REC_LOST, &l, sizeof l, NULL, 0);
    struct opr_end e = {50, 8, 5};
    test_stream_record(&s, OPR_REC_END, &e, sizeof e, NULL, 0);
    return test_stream_finish(&s);
}

/* A fresh dir with info (plus extra lines) and the good stream, loaded;
 * NULL (after a failed assertion) when it does not load. */
static struct profile *load_good_stream(const char *extra_info)
{
    unit_dir_new();
    unit_dir_write_info(extra_info);
    struct test_buf b = good_stream();
    unit_dir_write("proc-42-0.raw", b.data, b.len);
    free(b.data);
    struct profile *p = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL(profile_load(unit_dir, &p, err, sizeof err), 0);
    return p;
}

static void test_good_stream(void)
{
    struct profile *p = load_good_stream("");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->nsamples, 3);
    CU_ASSERT_EQUAL(p->total_weight, 3);
    CU_ASSERT_EQUAL(p->lost_samples, 5);
    CU_ASSERT_EQUAL(p->nthreads, 2);
    CU_ASSERT_EQUAL(p->nprocesses, 1);
    CU_ASSERT_TRUE(p->processes[0].ended_cleanly);
    CU_ASSERT_TRUE(p->complete);
    CU_ASSERT_STRING_EQUAL(p->command, "./app 'a b'");
    CU_ASSERT_EQUAL(p->period_ns, 1000000);
    CU_ASSERT_EQUAL(p->nwarnings, 0);
    /* Samples come out in time order, each with a 3-frame stack. */
    CU_ASSERT_EQUAL(p->samples[0].time_ns, 10);
    CU_ASSERT_EQUAL(p->samples[2].time_ns, 30);
    CU_ASSERT_EQUAL(p->stacks[p->samples[0].stack].nframes, 3);
    CU_ASSERT_EQUAL(p->samples[0].stack, p->samples[2].stack);
    CU_ASSERT_NOT_EQUAL(p->samples[0].stack, p->samples[1].stack);
    /* Unmapped addresses are unknown frames, never a borrowed name. */
    const struct prof_frame *leaf = &p->frames[p->stacks[p->samples[0].stack].frames[0]];
    CU_ASSERT_EQUAL(leaf->kind, FRAME_UNKNOWN);
    CU_ASSERT_PTR_NOT_NULL(strstr(leaf->name, "0x1000"));
    CU_ASSERT_STRING_EQUAL(p->threads[0].name, "main");
    profile_free(p);
    unit_dir_remove();
}

/* record -c: info says which event led and how many events a sample is;
 * such samples carry no time (period_ns 0, no rate), whatever else is there. */
static void test_event_leader_info(void)
{
    struct profile *p = load_good_stream("format=opprof-raw 2\nevent=page-faults\nsample_period=64\nsample_role=13\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_STRING_EQUAL(p->event, "page-faults");
    CU_ASSERT_EQUAL(p->sample_period, 64);
    CU_ASSERT_EQUAL(p->sample_role, PMU_ROLE_PAGE_FAULTS);
    CU_ASSERT_EQUAL(p->period_ns, 0);
    CU_ASSERT_EQUAL(p->frequency_hz, 0);
    CU_ASSERT_EQUAL(p->total_weight, 3);
    profile_free(p);
    unit_dir_remove();
}

static void test_truncated_stream_keeps_earlier_samples(void)
{
    unit_dir_new();
    unit_dir_write_info("");
    struct test_buf b = good_stream();
    /* Cut inside the third SAMPLE record: the first two survive. */
    size_t cut = b.len - 32 - 16 - 40 - 12;
    unit_dir_write("proc-42-0.raw", b.data, cut);
    struct profile *p;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(profile_load(unit_dir, &p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(p->nsamples, 2);
    CU_ASSERT_TRUE(p->processes[0].stream_truncated);
    CU_ASSERT_FALSE(p->processes[0].ended_cleanly);
    CU_ASSERT_EQUAL_FATAL(p->nwarnings, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(p->warnings[0], "truncated"));
    CU_ASSERT_PTR_NOT_NULL(strstr(p->warnings[0], "2 samples read"));
    profile_free(p);
    free(b.data);
    unit_dir_remove();
}

static void test_corrupt_magic_and_all_corrupt(void)
{
    unit_dir_new();
    unit_dir_write_info("");
    struct test_buf good = good_stream(), bad = good_stream();
    memcpy(bad.data, "GARBAGE!", 8);
    unit_dir_write("proc-42-0.raw", good.data, good.len);
    unit_dir_write("proc-43-0.raw", bad.data, bad.len);
    struct profile *p;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(profile_load(unit_dir, &p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(p->nsamples, 3);
    CU_ASSERT_EQUAL_FATAL(p->nwarnings, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(p->warnings[0], "bad magic"));
    profile_free(p);

    /* Only corrupt streams: an error sentence, not an empty report. */
    char path[512];
    snprintf(path, sizeof path, "%s/proc-42-0.raw", unit_dir);
    unlink(path);
    CU_ASSERT_EQUAL(profile_load(unit_dir, &p, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "none of its 1 sample stream"));
    free(good.data);
    free(bad.data);
    unit_dir_remove();
}

static void test_missing_info_and_missing_dir(void)
{
    struct profile *p;
    char err[512] = "";
    CU_ASSERT_EQUAL(profile_load("/nonexistent/opprof.000", &p, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "No such file"));
    unit_dir_new();
    CU_ASSERT_EQUAL(profile_load(unit_dir, &p, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not an opprof result directory"));
    unit_dir_write("info", "format=opprof-raw 99\n", 21);
    CU_ASSERT_EQUAL(profile_load(unit_dir, &p, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "version 99"));
    unit_dir_remove();
}

static void test_unknown_records_skipped_and_incomplete_run(void)
{
    unit_dir_new();
    unit_dir_write_info("complete=0\n");
    struct test_stream s;
    test_stream_begin(&s, 7, false);
    uint64_t s0[] = {0x10};
    test_stream_stack(&s, 0, s0, 1);
    uint64_t future[3] = {1, 2, 3};
    test_stream_record(&s, 999, future, sizeof future, NULL, 0); /* a newer writer's record */
    test_stream_sample(&s, 5, 7, 0, 0);
    struct test_buf b = test_stream_finish(&s);
    unit_dir_write("proc-7-0.raw", b.data, b.len);
    struct profile *p;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(profile_load(unit_dir, &p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(p->nsamples, 1);
    CU_ASSERT_FALSE(p->complete);
    /* One warning: the recording did not finish. No END: not clean. */
    CU_ASSERT_EQUAL_FATAL(p->nwarnings, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(p->warnings[0], "did not finish"));
    CU_ASSERT_FALSE(p->processes[0].ended_cleanly);
    profile_free(p);
    free(b.data);
    unit_dir_remove();
}

/* Python frames arrive as PYCODE + PYSTACK; the loader splices them where the
 * native chain has the eval loop. Here the native chain has no symbols (so no
 * eval frame is recognized): the Python frames go at the root end. */
static void test_python_frames_attached(void)
{
    unit_dir_new();
    unit_dir_write_info("");
    struct test_stream s;
    test_stream_begin(&s, 9, false);
    uint64_t s0[] = {0x10, 0x20};
    test_stream_stack(&s, 0, s0, 2);
    /* PYCODE 0 (step, def at 40, line 42 executing), then PYSTACK 0: that
     * frame, and below it an entry frame whose code object is gone. */
    struct test_pyframe frames[2] = {{"/w/train.py", "step", 40, 42}, {NULL, NULL, 0, 0}};
    struct opr_pyframe_key keys[2] = {{0x7000, 1, 10, 0, 0}, {0x7100, 2, 4, 1, 0}};
    CU_ASSERT_EQUAL(opr_writer_python_stack(s.w, keys, 2, frames), 1);
    test_stream_sample(&s, 1, 9, 0, 1);
    test_stream_sample(&s, 2, 9, 0, 0);
    struct test_buf b = test_stream_finish(&s);
    unit_dir_write("proc-9-0.raw", b.data, b.len);
    struct profile *p;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(profile_load(unit_dir, &p, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(p->nsamples, 2);
    const struct prof_stack *mixed = &p->stacks[p->samples[0].stack];
    const struct prof_stack *native = &p->stacks[p->samples[1].stack];
    CU_ASSERT_EQUAL(native->nframes, 2);
    CU_ASSERT_EQUAL_FATAL(mixed->nframes, 4);
    const struct prof_frame *py = &p->frames[mixed->frames[2]];
    CU_ASSERT_EQUAL(py->kind, FRAME_PYTHON);
    CU_ASSERT_STRING_EQUAL(py->name, "step");
    CU_ASSERT_STRING_EQUAL(py->module, "train.py");
    CU_ASSERT_STRING_EQUAL(py->source_file, "/w/train.py");
    CU_ASSERT_EQUAL(py->line, 42);
    CU_ASSERT_STRING_EQUAL(p->frames[mixed->frames[3]].name, "[unknown Python frame]");
    profile_free(p);
    free(b.data);
    unit_dir_remove();
}

/* splice_stacks on its own: eval-loop frames are replaced by Python frames up
 * to each entry frame; interpreter frames rootward of the innermost Python
 * frame are dropped, native work leafward of it stays. */
static void test_splice_rules(void)
{
    struct profile *p = profile_new_empty();
    uint32_t kernel = profile_add_frame(p, "sgemm_", "libblas.so.3", NULL, 0, FRAME_NATIVE);
    uint32_t op = profile_add_frame(p, "at::_ops::mm::call", "libtorch_cpu.so", NULL, 0, FRAME_NATIVE);
    uint32_t call = profile_add_frame(p, "_PyObject_MakeTpCall", "python3.11", NULL, 0, FRAME_NATIVE);
    uint32_t eval1 = profile_add_frame(p, "_PyEval_EvalFrameDefault", "python3.11", NULL, 0, FRAME_NATIVE);
    uint32_t pycall = profile_add_frame(p, "PyObject_Vectorcall", "python3.11", NULL, 0, FRAME_NATIVE);
    uint32_t eval2 = profile_add_frame(p, "_PyEval_EvalFrameDefault.cold", "python3.11", NULL, 0, FRAME_NATIVE);
    uint32_t libc = profile_add_frame(p, "__libc_start_main", "libc.so.6", NULL, 0, FRAME_NATIVE);
    uint32_t f_inner = profile_add_frame(p, "inner", "a.py", "a.py", 3, FRAME_PYTHON);
    uint32_t f_mid = profile_add_frame(p, "mid", "a.py", "a.py", 7, FRAME_PYTHON);
    uint32_t f_cb = profile_add_frame(p, "callback", "b.py", "b.py", 1, FRAME_PYTHON);
    uint32_t f_main = profile_add_frame(p, "<module>", "b.py", "b.py", 9, FRAME_PYTHON);
    uint32_t native[] = {kernel, op, call, eval1, pycall, eval2, libc};
    uint32_t python[] = {f_inner, f_mid, f_cb, f_main};
    bool entry[] = {false, true, false, true};
    uint32_t out[16];
    size_t n = splice_stacks(p->frames, native, 7, python, entry, 4, out);
    uint32_t expect[] = {kernel, op, f_inner, f_mid, f_cb, f_main, libc};
    CU_ASSERT_EQUAL_FATAL(n, 7);
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL(out[i], expect[i]);
    /* No Python frames: the native chain is unchanged. */
    n = splice_stacks(p->frames, native, 7, python, entry, 0, out);
    CU_ASSERT_EQUAL(n, 7);
    CU_ASSERT_EQUAL(out[3], eval1);
    profile_free(p);
}

/* A native stack that ends in unnamed anonymous code (a JIT or -X perf
 * trampoline the unwinder could not step through) counts as truncated; one
 * whose outermost frame the perf map names does not. pid 4190002: no real
 * process's /tmp/perf-PID.map can be read by mistake. */
static struct profile *load_anonymous_stacks(bool with_perf_map)
{
    unit_dir_new();
    unit_dir_write_info("");
    struct test_stream s;
    test_stream_begin(&s, 4190002, false);
    struct opr_map m = {.start = 0x7f0000000000, .end = 0x7f0000010000, .path_len = 0};
    test_stream_record(&s, OPR_REC_MAP, &m, sizeof m, NULL, 0);
    uint64_t ends_anon[] = {0x1000, 0x7f0000000104};
    uint64_t anon_inside[] = {0x7f0000000104, 0x3000};
    test_stream_stack(&s, 0, ends_anon, 2);
    test_stream_stack(&s, 1, anon_inside, 2);
    test_stream_sample(&s, 10, 4190002, 0, 0);
    test_stream_sample(&s, 20, 4190002, 1, 0);
    struct opr_end e = {50, 2, 0};
    test_stream_record(&s, OPR_REC_END, &e, sizeof e, NULL, 0);
    struct test_buf b = test_stream_finish(&s);
    unit_dir_write("proc-4190002-0.raw", b.data, b.len);
    free(b.data);
    if (with_perf_map) {
        const char map[] = "7f0000000100 10 py::step:train.py\n";
        unit_dir_write("perf-4190002.map", map, sizeof map - 1);
    }
    struct profile *p = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL(profile_load(unit_dir, &p, err, sizeof err), 0);
    return p;
}

static void test_anonymous_end_is_truncated(void)
{
    struct profile *p = load_anonymous_stacks(false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->truncated_samples, 1);
    profile_free(p);
    unit_dir_remove();
    p = load_anonymous_stacks(true);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->truncated_samples, 0);
    bool named = false;
    for (size_t i = 0; i < p->nframes; i++)
        named = named || (p->frames[i].name && strcmp(p->frames[i].name, "py::step:train.py") == 0);
    CU_ASSERT_TRUE(named);
    profile_free(p);
    unit_dir_remove();
}

static void test_builders_dedup(void)
{
    struct profile *p = profile_new_empty();
    uint32_t a = profile_add_frame(p, "f", "m", NULL, 0, FRAME_NATIVE);
    uint32_t b = profile_add_frame(p, "f", "m", NULL, 0, FRAME_NATIVE);
    uint32_t c = profile_add_frame(p, "f", "m", "x.c", 3, FRAME_NATIVE);
    CU_ASSERT_EQUAL(a, b);
    CU_ASSERT_NOT_EQUAL(a, c);
    uint32_t s1[] = {a, c}, s2[] = {a, c}, s3[] = {c, a};
    CU_ASSERT_EQUAL(profile_add_stack(p, s1, 2), profile_add_stack(p, s2, 2));
    CU_ASSERT_NOT_EQUAL(profile_add_stack(p, s1, 2), profile_add_stack(p, s3, 2));
    uint32_t t = profile_add_thread(p, 1, 2, "x");
    CU_ASSERT_EQUAL(profile_add_thread(p, 1, 2, NULL), t);
    CU_ASSERT_STRING_EQUAL(p->threads[t].name, "x");
    profile_add_sample(p, 5, t, 0, 3);
    CU_ASSERT_EQUAL(p->total_weight, 3);
    CU_ASSERT_EQUAL(p->threads[t].samples, 1);
    profile_free(p);
}

/* The good stream loaded either way (PROFILE_LOAD_AGGREGATED or not). */
static struct profile *load_good_stream_as(enum profile_load_mode mode)
{
    unit_dir_new();
    unit_dir_write_info("");
    struct test_buf b = good_stream();
    unit_dir_write("proc-42-0.raw", b.data, b.len);
    free(b.data);
    struct profile *p = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL(profile_load_as(unit_dir, mode, &p, err, sizeof err), 0);
    unit_dir_remove();
    return p;
}

/* Aggregated, the good stream's two samples of thread 42 on stack 0 are one
 * row of count 2; everything a table reads (counts, weights, stacks, thread
 * bounds, process figures) is what the sample-by-sample load gives. */
static void test_aggregated_rows(void)
{
    struct profile *a = load_good_stream_as(PROFILE_LOAD_AGGREGATED);
    struct profile *s = load_good_stream_as(PROFILE_LOAD_SAMPLES);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(s->nsamples, 3);
    CU_ASSERT_EQUAL(s->sample_count, 3);
    CU_ASSERT_TRUE(s->timeline);
    CU_ASSERT_EQUAL_FATAL(a->nsamples, 2);
    CU_ASSERT_EQUAL(a->sample_count, 3);
    CU_ASSERT_FALSE(a->timeline);
    CU_ASSERT_EQUAL(a->total_weight, s->total_weight);
    /* rows by their first sample's time: (42, stack 0) at 10, (43, stack 1) at 20 */
    CU_ASSERT_EQUAL(a->samples[0].time_ns, 10);
    CU_ASSERT_EQUAL(a->samples[0].count, 2);
    CU_ASSERT_EQUAL(a->samples[0].weight, 2);
    CU_ASSERT_EQUAL(a->samples[1].time_ns, 20);
    CU_ASSERT_EQUAL(a->samples[1].count, 1);
    /* the same stacks get the same indices: resolved in the same order */
    CU_ASSERT_EQUAL(a->nstacks, s->nstacks);
    CU_ASSERT_EQUAL(a->samples[0].stack, s->samples[0].stack);
    CU_ASSERT_EQUAL(a->samples[1].stack, s->samples[1].stack);
    CU_ASSERT_EQUAL_FATAL(a->nthreads, s->nthreads);
    for (size_t t = 0; t < a->nthreads; t++) {
        CU_ASSERT_EQUAL(a->threads[t].samples, s->threads[t].samples);
        CU_ASSERT_EQUAL(a->threads[t].first_ns, s->threads[t].first_ns);
        CU_ASSERT_EQUAL(a->threads[t].last_ns, s->threads[t].last_ns); /* 30: the row's last, not its first */
    }
    CU_ASSERT_EQUAL(a->processes[0].samples, 3);
    for (uint32_t k = 0; k < a->nstacks; k++) { /* weight and count per stack, as every table folds them */
        uint64_t wa = 0, ca = 0, ws = 0, cs = 0;
        for (size_t i = 0; i < a->nsamples; i++)
            if (a->samples[i].stack == k)
                wa += a->samples[i].weight, ca += a->samples[i].count;
        for (size_t i = 0; i < s->nsamples; i++)
            if (s->samples[i].stack == k)
                ws += s->samples[i].weight, cs += s->samples[i].count;
        CU_ASSERT_EQUAL(wa, ws);
        CU_ASSERT_EQUAL(ca, cs);
    }
    profile_free(a);
    profile_free(s);
}

/* A stream whose samples carry an OpenMP region keeps one row per sample
 * even when aggregated: worker grafting matches samples by time. */
static void test_openmp_stream_stays_per_sample(void)
{
    unit_dir_new();
    unit_dir_write_info("");
    struct test_stream st;
    test_stream_begin(&st, 42, false);
    uint64_t pcs[] = {0x1000, 0x2000};
    test_stream_stack(&st, 0, pcs, 2);
    for (int i = 0; i < 3; i++) {
        struct opr_sample smp = {10 + (uint64_t)i, 42, 0, 0, 1};
        unsigned char tail[sizeof(struct opr_sample_python) + sizeof(struct opr_sample_openmp)] = {0};
        uint64_t region = i == 1 ? (1ull << 63) | 1 : 0; /* a team thread in the runtime */
        memcpy(tail + sizeof(struct opr_sample_python), &region, sizeof region);
        test_stream_record(&st, OPR_REC_SAMPLE, &smp, sizeof smp, tail, sizeof tail);
    }
    struct test_buf b = test_stream_finish(&st);
    unit_dir_write("proc-42-0.raw", b.data, b.len);
    free(b.data);
    struct profile *p = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(profile_load_as(unit_dir, PROFILE_LOAD_AGGREGATED, &p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(p->nsamples, 3);
    CU_ASSERT_EQUAL(p->sample_count, 3);
    CU_ASSERT_TRUE(p->timeline);
    CU_ASSERT_EQUAL(p->samples[1].omp_region, THREADING_OUTSIDE_BODY);
    profile_free(p);
    unit_dir_remove();
}

/* A row's 32-bit sums never wrap: a row that would is left full and a new
 * one started; totals stay exact. */
static void test_sample_row_overflow(void)
{
    struct profile *p = profile_new_empty();
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    uint32_t f = profile_add_frame(p, "f", "m", NULL, 0, FRAME_NATIVE);
    uint32_t st = profile_add_stack(p, &f, 1);
    uint32_t t = profile_add_thread(p, 1, 1, NULL);
    CU_ASSERT_EQUAL(profile_add_sample_row(p, 5, 7, t, st, 0, UINT32_MAX - 1, 3), 0);
    CU_ASSERT_EQUAL(profile_add_sample_row(p, 2, 9, t, st, 0, 1, 1), 0);
    CU_ASSERT_EQUAL(p->nsamples, 1); /* fits exactly */
    CU_ASSERT_EQUAL(p->samples[0].weight, UINT32_MAX);
    CU_ASSERT_EQUAL(p->samples[0].time_ns, 2);
    CU_ASSERT_EQUAL(profile_add_sample_row(p, 20, 20, t, st, 0, 1, 1), 0);
    CU_ASSERT_EQUAL(p->nsamples, 2); /* would wrap: a second row */
    CU_ASSERT_EQUAL(profile_add_sample_row(p, 21, 21, t, st, OPR_SAMPLE_TRUNCATED, 1, 1), 0);
    CU_ASSERT_EQUAL(p->nsamples, 3); /* other flags: another row */
    CU_ASSERT_EQUAL(p->total_weight, (uint64_t)UINT32_MAX + 2);
    CU_ASSERT_EQUAL(p->sample_count, 6);
    CU_ASSERT_EQUAL(p->threads[t].samples, 6);
    CU_ASSERT_EQUAL(p->threads[t].first_ns, 2);
    CU_ASSERT_EQUAL(p->threads[t].last_ns, 21);
    profile_free(p);
}

void register_profile_load_tests(void)
{
    CU_pSuite s = CU_add_suite("profile_load", NULL, NULL);
    CU_add_test(s, "a good stream", test_good_stream);
    CU_add_test(s, "info of a recording sampled on an event (-c)", test_event_leader_info);
    CU_add_test(s, "truncated stream keeps earlier samples", test_truncated_stream_keeps_earlier_samples);
    CU_add_test(s, "a stack ending in anonymous code is truncated", test_anonymous_end_is_truncated);
    CU_add_test(s, "corrupt magic skipped; all corrupt is an error", test_corrupt_magic_and_all_corrupt);
    CU_add_test(s, "missing dir, missing info, other version", test_missing_info_and_missing_dir);
    CU_add_test(s, "unknown records skipped; incomplete run", test_unknown_records_skipped_and_incomplete_run);
    CU_add_test(s, "Python frames attached", test_python_frames_attached);
    CU_add_test(s, "splice rules", test_splice_rules);
    CU_add_test(s, "builders deduplicate", test_builders_dedup);
    CU_add_test(s, "aggregated load: rows per thread and stack", test_aggregated_rows);
    CU_add_test(s, "aggregated load: OpenMP streams stay per sample", test_openmp_stream_stays_per_sample);
    CU_add_test(s, "sample rows never wrap", test_sample_row_overflow);
}
