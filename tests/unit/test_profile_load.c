/*
 * tests/unit/test_profile_load.c — the raw-format reader on hand-built result
 * directories: a good stream, a truncated one, a corrupt one, unknown record
 * types, missing info, Python frames spliced into native stacks.
 *
 * Streams are built record by record here (not by the agent or attach mode),
 * so that each field's meaning in docs/format.md is exercised on its own, but
 * through format/'s stream writer, the one both samplers write through: the
 * framing, padding and id assignment the loader is tested on are the
 * samplers' by construction.
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

struct buf {
    unsigned char *data;
    size_t len, cap;
};

static void put(struct buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 256;
        b->data = realloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

/* The writer's byte sink: the stream stays in memory. */
static size_t put_bytes(void *ctx, const void *bytes, size_t len)
{
    put(ctx, bytes, len);
    return len;
}

/* A Python frame of a test stream; filename NULL: its code object is gone
 * (the writer then writes OPR_PYCODE_UNKNOWN). */
struct test_pyframe {
    const char *filename, *qualname;
    int32_t first_line, line;
};

static bool resolve_test_pyframe(void *ctx, const void *frames, unsigned i, struct opr_pycode_names *out,
                                 bool need_names)
{
    const struct test_pyframe *f = (const struct test_pyframe *)frames + i;
    if (!f->filename)
        return false;
    snprintf(out->filename, sizeof out->filename, "%s", f->filename);
    snprintf(out->qualname, sizeof out->qualname, "%s", f->qualname);
    out->first_line = f->first_line;
    out->line = f->line;
    return true;
}

/* A stream being built in memory (no process behind it: no PROCESS, MAP or
 * THREAD records unless a test writes them). */
struct test_stream {
    struct opr_writer *w;
    struct buf out;
};

/* Set by a test: the next header()'s writer writes every chain whole. */
static bool next_classic_records;

/* Starts a stream of pid: the file header (ppid 1, 1 ms period). */
static void header(struct test_stream *s, uint32_t pid)
{
    memset(s, 0, sizeof *s);
    struct opr_writer_config config = {
        .classic_records = next_classic_records,
        .ops = {.ctx = &s->out, .write = put_bytes, .resolve_pyframe = resolve_test_pyframe},
    };
    s->w = opr_writer_new(&config);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s->w);
    opr_writer_begin(s->w, pid, 1, 0, 1000000);
}

/* The stream's bytes (the caller frees data). */
static struct buf finish(struct test_stream *s)
{
    opr_writer_flush(s->w);
    opr_writer_free(s->w);
    return s->out;
}

static void record(struct test_stream *s, uint32_t type, const void *body, size_t body_len, const void *tail,
                   size_t tail_len)
{
    opr_writer_emit(s->w, type, body, body_len, tail, tail_len);
}

static void sample(struct test_stream *s, uint64_t t, uint32_t tid, uint32_t stack, uint32_t py_plus1)
{
    struct opr_sample smp = {t, tid, stack, 0, 1};
    struct opr_sample_python py = {py_plus1, 0};
    record(s, OPR_REC_SAMPLE, &smp, sizeof smp, &py, sizeof py);
}

/* A STACK record through the writer's id table; id is the one the test's
 * samples refer to, so the writer must give the same. */
static void stack(struct test_stream *s, uint32_t id, const uint64_t *pcs, uint32_t n)
{
    CU_ASSERT_EQUAL(opr_writer_stack_id(s->w, pcs, n), id);
}

static char tmpdir[256];

static void write_file(const char *name, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fwrite(data, 1, len, f);
    fclose(f);
}

static void write_info(const char *extra)
{
    char text[512];
    snprintf(text, sizeof text,
             "format=opprof-raw 1\ncommand=./app 'a b'\nevent=task-clock\nperiod_ns=1000000\n"
             "frequency_hz=1000\nstart_ns=100\nend_ns=5000100\nexit_status=0\ncomplete=1\n%s",
             extra);
    write_file("info", text, strlen(text));
}

static void fresh_dir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/opprof-unit-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmpdir));
}

static void remove_dir(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* A stream with two stacks (addresses outside any mapping: they become
 * "[unknown] 0x..." frames), three samples on two threads, a LOST and END. */
static struct buf good_stream(void)
{
    struct test_stream s;
    header(&s, 42);
    struct opr_thread t = {42, OPR_THREAD_MAIN, 0, "main"};
    record(&s, OPR_REC_THREAD, &t, sizeof t, NULL, 0);
    uint64_t s0[] = {0x1000, 0x2000, 0x3000};
    uint64_t s1[] = {0x1100, 0x2000, 0x3000};
    stack(&s, 0, s0, 3);
    stack(&s, 1, s1, 3);
    sample(&s, 10, 42, 0, 0);
    sample(&s, 20, 43, 1, 0);
    sample(&s, 30, 42, 0, 0);
    struct opr_lost l = {40, 5, 8};
    record(&s, OPR_REC_LOST, &l, sizeof l, NULL, 0);
    struct opr_end e = {50, 8, 5};
    record(&s, OPR_REC_END, &e, sizeof e, NULL, 0);
    return finish(&s);
}

/* A fresh dir with info (plus extra lines) and the good stream, loaded;
 * NULL (after a failed assertion) when it does not load. */
static struct profile *load_good_stream(const char *extra_info)
{
    fresh_dir();
    write_info(extra_info);
    struct buf b = good_stream();
    write_file("proc-42-0.raw", b.data, b.len);
    free(b.data);
    struct profile *p = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL(profile_load(tmpdir, &p, err, sizeof err), 0);
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
    remove_dir();
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
    remove_dir();
}

static void test_truncated_stream_keeps_earlier_samples(void)
{
    fresh_dir();
    write_info("");
    struct buf b = good_stream();
    /* Cut inside the third SAMPLE record: the first two survive. */
    size_t cut = b.len - 32 - 16 - 40 - 12;
    write_file("proc-42-0.raw", b.data, cut);
    struct profile *p;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(profile_load(tmpdir, &p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(p->nsamples, 2);
    CU_ASSERT_TRUE(p->processes[0].stream_truncated);
    CU_ASSERT_FALSE(p->processes[0].ended_cleanly);
    CU_ASSERT_EQUAL_FATAL(p->nwarnings, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(p->warnings[0], "truncated"));
    CU_ASSERT_PTR_NOT_NULL(strstr(p->warnings[0], "2 samples read"));
    profile_free(p);
    free(b.data);
    remove_dir();
}

static void test_corrupt_magic_and_all_corrupt(void)
{
    fresh_dir();
    write_info("");
    struct buf good = good_stream(), bad = good_stream();
    memcpy(bad.data, "GARBAGE!", 8);
    write_file("proc-42-0.raw", good.data, good.len);
    write_file("proc-43-0.raw", bad.data, bad.len);
    struct profile *p;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(profile_load(tmpdir, &p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(p->nsamples, 3);
    CU_ASSERT_EQUAL_FATAL(p->nwarnings, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(p->warnings[0], "bad magic"));
    profile_free(p);

    /* Only corrupt streams: an error sentence, not an empty report. */
    char path[512];
    snprintf(path, sizeof path, "%s/proc-42-0.raw", tmpdir);
    unlink(path);
    CU_ASSERT_EQUAL(profile_load(tmpdir, &p, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "none of its 1 sample stream"));
    free(good.data);
    free(bad.data);
    remove_dir();
}

static void test_missing_info_and_missing_dir(void)
{
    struct profile *p;
    char err[512] = "";
    CU_ASSERT_EQUAL(profile_load("/nonexistent/opprof.000", &p, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "No such file"));
    fresh_dir();
    CU_ASSERT_EQUAL(profile_load(tmpdir, &p, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not an opprof result directory"));
    write_file("info", "format=opprof-raw 99\n", 21);
    CU_ASSERT_EQUAL(profile_load(tmpdir, &p, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "version 99"));
    remove_dir();
}

static void test_unknown_records_skipped_and_incomplete_run(void)
{
    fresh_dir();
    write_info("complete=0\n");
    struct test_stream s;
    header(&s, 7);
    uint64_t s0[] = {0x10};
    stack(&s, 0, s0, 1);
    uint64_t future[3] = {1, 2, 3};
    record(&s, 999, future, sizeof future, NULL, 0); /* a newer writer's record */
    sample(&s, 5, 7, 0, 0);
    struct buf b = finish(&s);
    write_file("proc-7-0.raw", b.data, b.len);
    struct profile *p;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(profile_load(tmpdir, &p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(p->nsamples, 1);
    CU_ASSERT_FALSE(p->complete);
    /* One warning: the recording did not finish. No END: not clean. */
    CU_ASSERT_EQUAL_FATAL(p->nwarnings, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(p->warnings[0], "did not finish"));
    CU_ASSERT_FALSE(p->processes[0].ended_cleanly);
    profile_free(p);
    free(b.data);
    remove_dir();
}

/* Python frames arrive as PYCODE + PYSTACK; the loader splices them where the
 * native chain has the eval loop. Here the native chain has no symbols (so no
 * eval frame is recognized): the Python frames go at the root end. */
static void test_python_frames_attached(void)
{
    fresh_dir();
    write_info("");
    struct test_stream s;
    header(&s, 9);
    uint64_t s0[] = {0x10, 0x20};
    stack(&s, 0, s0, 2);
    /* PYCODE 0 (step, def at 40, line 42 executing), then PYSTACK 0: that
     * frame, and below it an entry frame whose code object is gone. */
    struct test_pyframe frames[2] = {{"/w/train.py", "step", 40, 42}, {NULL, NULL, 0, 0}};
    struct opr_pyframe_key keys[2] = {{0x7000, 1, 10, 0, 0}, {0x7100, 2, 4, 1, 0}};
    CU_ASSERT_EQUAL(opr_writer_python_stack(s.w, keys, 2, frames), 1);
    sample(&s, 1, 9, 0, 1);
    sample(&s, 2, 9, 0, 0);
    struct buf b = finish(&s);
    write_file("proc-9-0.raw", b.data, b.len);
    struct profile *p;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(profile_load(tmpdir, &p, err, sizeof err), 0);
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
    remove_dir();
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
    fresh_dir();
    write_info("");
    struct test_stream s;
    header(&s, 4190002);
    struct opr_map m = {.start = 0x7f0000000000, .end = 0x7f0000010000, .path_len = 0};
    record(&s, OPR_REC_MAP, &m, sizeof m, NULL, 0);
    uint64_t ends_anon[] = {0x1000, 0x7f0000000104};
    uint64_t anon_inside[] = {0x7f0000000104, 0x3000};
    stack(&s, 0, ends_anon, 2);
    stack(&s, 1, anon_inside, 2);
    sample(&s, 10, 4190002, 0, 0);
    sample(&s, 20, 4190002, 1, 0);
    struct opr_end e = {50, 2, 0};
    record(&s, OPR_REC_END, &e, sizeof e, NULL, 0);
    struct buf b = finish(&s);
    write_file("proc-4190002-0.raw", b.data, b.len);
    free(b.data);
    if (with_perf_map) {
        const char map[] = "7f0000000100 10 py::step:train.py\n";
        write_file("perf-4190002.map", map, sizeof map - 1);
    }
    struct profile *p = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL(profile_load(tmpdir, &p, err, sizeof err), 0);
    return p;
}

static void test_anonymous_end_is_truncated(void)
{
    struct profile *p = load_anonymous_stacks(false);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->truncated_samples, 1);
    profile_free(p);
    remove_dir();
    p = load_anonymous_stacks(true);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->truncated_samples, 0);
    bool named = false;
    for (size_t i = 0; i < p->nframes; i++)
        named = named || (p->frames[i].name && strcmp(p->frames[i].name, "py::step:train.py") == 0);
    CU_ASSERT_TRUE(named);
    profile_free(p);
    remove_dir();
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
    fresh_dir();
    write_info("");
    struct buf b = good_stream();
    write_file("proc-42-0.raw", b.data, b.len);
    free(b.data);
    struct profile *p = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL(profile_load_as(tmpdir, mode, &p, err, sizeof err), 0);
    remove_dir();
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
    fresh_dir();
    write_info("");
    struct test_stream st;
    header(&st, 42);
    uint64_t pcs[] = {0x1000, 0x2000};
    stack(&st, 0, pcs, 2);
    for (int i = 0; i < 3; i++) {
        struct opr_sample smp = {10 + (uint64_t)i, 42, 0, 0, 1};
        unsigned char tail[sizeof(struct opr_sample_python) + sizeof(struct opr_sample_openmp)] = {0};
        uint64_t region = i == 1 ? (1ull << 63) | 1 : 0; /* a team thread in the runtime */
        memcpy(tail + sizeof(struct opr_sample_python), &region, sizeof region);
        record(&st, OPR_REC_SAMPLE, &smp, sizeof smp, tail, sizeof tail);
    }
    struct buf b = finish(&st);
    write_file("proc-42-0.raw", b.data, b.len);
    free(b.data);
    struct profile *p = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(profile_load_as(tmpdir, PROFILE_LOAD_AGGREGATED, &p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(p->nsamples, 3);
    CU_ASSERT_EQUAL(p->sample_count, 3);
    CU_ASSERT_TRUE(p->timeline);
    CU_ASSERT_EQUAL(p->samples[1].omp_region, THREADING_OUTSIDE_BODY);
    profile_free(p);
    remove_dir();
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

/* ---- prefix-shared chains (STACK_TAIL, PYSTACK_TAIL) ---- */

static unsigned next_random(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(*x >> 33);
}

static size_t count_type(const struct buf *b, uint32_t type)
{
    size_t n = 0;
    for (size_t off = sizeof(struct opr_file_header); off + 8 <= b->len;) {
        uint32_t t, size;
        memcpy(&t, b->data + off, 4);
        memcpy(&size, b->data + off + 4, 4);
        n += t == type;
        off += size ? size : b->len;
    }
    return n;
}

/* Samples in SAMPLE_RUN records (their count fields). */
static size_t run_entries(const struct buf *b)
{
    size_t n = 0;
    for (size_t off = sizeof(struct opr_file_header); off + 8 <= b->len;) {
        struct opr_record_header h;
        memcpy(&h, b->data + off, sizeof h);
        if (h.type == OPR_REC_SAMPLE_RUN) {
            struct opr_sample_run run;
            memcpy(&run, b->data + off + sizeof h, sizeof run);
            n += run.count;
        }
        off += h.size ? h.size : b->len;
    }
    return n;
}

/* 600 samples on chains that each drop a few leaf frames of the one before
 * and add a few more from a small pool, as real stacks do;
 * native chains reach OPR_MAX_FRAMES, Python ones OPR_MAX_PYFRAMES. */
static struct buf chain_stream(bool whole)
{
    static const char *const files[] = {"/w/a.py", "/w/b.py", "/w/c.py", "/w/d.py"};
    static const char *const names[] = {"fa", "fb", "fc", "fd", "fe", "ff", "fg", "fh"};
    struct test_stream s;
    next_classic_records = whole;
    header(&s, 7);
    next_classic_records = false;
    uint64_t x = 42, root[OPR_MAX_FRAMES], pcs[OPR_MAX_FRAMES];
    unsigned pyroot[OPR_MAX_PYFRAMES], n = 0, npy = 0;
    struct test_pyframe frames[OPR_MAX_PYFRAMES];
    struct opr_pyframe_key keys[OPR_MAX_PYFRAMES];
    for (int i = 0; i < 600; i++) {
        n -= next_random(&x) % (n < 8 ? n + 1 : 8); /* drop up to 7 leaf frames */
        for (unsigned k = 1 + next_random(&x) % 12; k > 0 && n < OPR_MAX_FRAMES; k--)
            root[n++] = 0x1000 + 16 * (next_random(&x) % 48);
        for (unsigned k = 0; k < n; k++)
            pcs[k] = root[n - 1 - k];
        int64_t id = opr_writer_stack_id(s.w, pcs, n);
        npy -= next_random(&x) % (npy < 5 ? npy + 1 : 5);
        for (unsigned k = 1 + next_random(&x) % 6; k > 0 && npy < OPR_MAX_PYFRAMES; k--)
            pyroot[npy++] = next_random(&x) % 32; /* code object c % 8, instruction c / 8 */
        for (unsigned k = 0; k < npy; k++) {
            unsigned c = pyroot[npy - 1 - k];
            frames[k] = (struct test_pyframe){files[c % 4], names[c % 8], 10 * (int32_t)(c % 8),
                                              10 * (int32_t)(c % 8) + (int32_t)(c / 8)};
            keys[k] = (struct opr_pyframe_key){0x7000 + 0x100 * (c % 8), 1, c / 8, c % 3 == 0, 0};
        }
        uint32_t py = i % 5 ? opr_writer_python_stack(s.w, keys, npy, frames) : 0;
        CU_ASSERT_TRUE_FATAL(id >= 0);
        struct opr_sample smp = {(uint64_t)i, 7, (uint32_t)id, i % 7 ? 0 : OPR_SAMPLE_TRUNCATED, 1 + i % 3};
        opr_writer_sample(s.w, &smp, py, 0);
    }
    return finish(&s);
}

static struct profile *load_buf(const struct buf *b)
{
    fresh_dir();
    write_info("");
    write_file("proc-7-0.raw", b->data, b->len);
    struct profile *p = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL(profile_load(tmpdir, &p, err, sizeof err), 0);
    remove_dir();
    return p;
}

/* The same chains and samples written in the classic records and in the
 * compact ones (STACK_TAIL, PYSTACK_TAIL, SAMPLE_RUN) load as the same
 * stacks, frame by frame, with the same weights and flags; the compact
 * stream is the smaller. */
static void test_shared_chains_load_whole(void)
{
    struct buf whole = chain_stream(true), shared = chain_stream(false);
    CU_ASSERT_EQUAL(count_type(&whole, OPR_REC_STACK_TAIL) + count_type(&whole, OPR_REC_PYSTACK_TAIL) +
                        count_type(&whole, OPR_REC_SAMPLE_SHORT) + count_type(&whole, OPR_REC_SAMPLE_RUN), 0);
    /* nothing between the samples but definitions: runs of ~400 (4 KB of entries) */
    CU_ASSERT_EQUAL(count_type(&shared, OPR_REC_SAMPLE_SHORT), 0);
    CU_ASSERT_EQUAL(run_entries(&shared), 600);
    CU_ASSERT_TRUE(count_type(&shared, OPR_REC_SAMPLE_RUN) >= 1 && count_type(&shared, OPR_REC_SAMPLE_RUN) <= 3);
    CU_ASSERT_TRUE(count_type(&shared, OPR_REC_STACK_TAIL) > 100);
    CU_ASSERT_TRUE(count_type(&shared, OPR_REC_PYSTACK_TAIL) > 50);
    CU_ASSERT_TRUE(shared.len * 3 < whole.len);
    struct profile *a = load_buf(&whole), *b = load_buf(&shared);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL_FATAL(a->nsamples, b->nsamples);
    CU_ASSERT_EQUAL(a->sample_count, 600);
    CU_ASSERT_EQUAL(a->total_weight, 1200); /* 1 + i % 3 */
    size_t differ = 0, deepest = 0;
    for (size_t i = 0; i < a->nsamples; i++) {
        const struct prof_stack *sa = &a->stacks[a->samples[i].stack], *sb = &b->stacks[b->samples[i].stack];
        bool same = sa->nframes == sb->nframes && a->samples[i].weight == b->samples[i].weight &&
                    a->samples[i].flags == b->samples[i].flags;
        for (uint32_t k = 0; same && k < sa->nframes; k++)
            same = strcmp(a->frames[sa->frames[k]].name, b->frames[sb->frames[k]].name) == 0 &&
                   a->frames[sa->frames[k]].line == b->frames[sb->frames[k]].line;
        differ += !same;
        deepest = sa->nframes > deepest ? sa->nframes : deepest;
    }
    CU_ASSERT_EQUAL(differ, 0);
    CU_ASSERT_TRUE(deepest >= 200);
    profile_free(a);
    profile_free(b);
    free(whole.data);
    free(shared.data);
}

/* A SAMPLE_RUN damaged inside: the entries before the damage load, the
 * rest of the run is skipped with one warning, and the records after it
 * still load. */
static void test_damaged_sample_run(void)
{
    struct test_stream s;
    header(&s, 7);
    uint64_t pcs[] = {0x1000};
    stack(&s, 0, pcs, 1);
    for (int i = 0; i < 5; i++) {
        struct opr_sample smp = {1000000 * (uint64_t)i, 7, 0, 0, 1};
        opr_writer_sample(s.w, &smp, 0, 0);
    }
    opr_writer_note(s.w, "after the run"); /* closes the run */
    struct opr_sample last = {9000000, 7, 0, 0, 1};
    opr_writer_sample(s.w, &last, 0, 0);
    struct buf b = finish(&s);
    CU_ASSERT_EQUAL_FATAL(count_type(&b, OPR_REC_SAMPLE_RUN), 2);
    /* 0xff from the fourth entry to the body's end: a number that never ends */
    size_t off = sizeof(struct opr_file_header);
    struct opr_record_header h = {0, 0};
    while (off < b.len) {
        memcpy(&h, b.data + off, sizeof h);
        if (h.type == OPR_REC_SAMPLE_RUN)
            break;
        off += h.size;
    }
    unsigned char *e = b.data + off + sizeof h + sizeof(struct opr_sample_run);
    size_t entry[5] = {0}, at = 0;
    for (int i = 0; i < 5; i++) { /* five numbers an entry, each ending at a byte < 0x80 */
        entry[i] = at;
        for (int k = 0; k < 5; k++)
            while (e[at++] & 0x80)
                ;
    }
    memset(e + entry[3], 0xff, h.size - sizeof h - sizeof(struct opr_sample_run) - entry[3]);
    struct profile *p = load_buf(&b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(p->sample_count, 4); /* 3 of the run, the one after the note */
    bool warned = false;
    for (size_t i = 0; i < p->nwarnings; i++)
        warned |= strstr(p->warnings[i], "damaged after 3 of its samples") != NULL;
    CU_ASSERT_TRUE(warned);
    profile_free(p);
    free(b.data);
}

/* Hostile tails: an unknown parent, a skip past the parent's end, a chain
 * deeper than OPR_MAX_FRAMES, a truncated body are skipped (their samples
 * with them); an empty tail (a root-side run of its parent) is valid. */
static void test_bad_tails_skipped(void)
{
    struct test_stream s;
    header(&s, 7);
    uint64_t pcs[OPR_MAX_FRAMES] = {0x10, 0x20, 0x30};
    CU_ASSERT_EQUAL(opr_writer_stack_id(s.w, pcs, 3), 0);
    struct opr_chain_tail bad_skip = {1, 1, 0, 3}, no_parent = {2, 1, 9, 0}, empty = {3, 0, 0, 1},
                          too_deep = {4, OPR_MAX_FRAMES - 2, 0, 0}, short_body = {5, 4, 0, 0};
    record(&s, OPR_REC_STACK_TAIL, &bad_skip, sizeof bad_skip, pcs, 8);
    record(&s, OPR_REC_STACK_TAIL, &no_parent, sizeof no_parent, pcs, 8);
    record(&s, OPR_REC_STACK_TAIL, &empty, sizeof empty, NULL, 0);
    record(&s, OPR_REC_STACK_TAIL, &too_deep, sizeof too_deep, pcs, (OPR_MAX_FRAMES - 2) * 8);
    record(&s, OPR_REC_STACK_TAIL, &short_body, sizeof short_body, pcs, 16);
    struct opr_chain_tail py_no_parent = {0, 1, 0, 0};
    struct opr_pyframe pf = {0, 1, 0, 0};
    record(&s, OPR_REC_PYSTACK_TAIL, &py_no_parent, sizeof py_no_parent, &pf, sizeof pf);
    for (uint32_t id = 1; id <= 5; id++)
        sample(&s, id, 7, id, id == 3 ? 1 : 0);
    struct buf b = finish(&s);
    struct profile *p = load_buf(&b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(p->nsamples, 1);
    const struct prof_stack *st = &p->stacks[p->samples[0].stack];
    CU_ASSERT_EQUAL(st->nframes, 2); /* 0x20, 0x30: no Python frames (PYSTACK 0 was refused) */
    profile_free(p);
    free(b.data);
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
    CU_add_test(s, "prefix-shared chains load as whole ones", test_shared_chains_load_whole);
    CU_add_test(s, "bad chain tails skipped", test_bad_tails_skipped);
    CU_add_test(s, "a damaged sample run keeps the samples before the damage", test_damaged_sample_run);
}
