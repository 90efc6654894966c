/*
 * tests/unit/test_export.c — the export formats on a small synthetic profile
 * whose every figure is known: exact folded text, folded name sanitizing,
 * JSON escaping, the pstats marshal bytes decoded by a tiny marshal reader
 * written here, speedscope run merging, Chrome trace slices, and smoke tests
 * of the SVG and HTML writers.
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "analyze/analyze.h"
#include "report/export_internal.h"
#include "report/report.h"
#include "tests/unit/unit.h"

/* ---- the synthetic profile ------------------------------------------------------
 * thread 0: 3 x [spin, main], 1 x [work@10, main], 2 x [mm, work@12, main],
 *           1 x [rec, rec, main] (after a 14 ms gap)
 * thread 1: 1 x [spin, main]
 * period 1 ms, weight 1 each: total 8. */
static struct profile *make_profile(void)
{
    struct profile *p = profile_new_empty();
    uint32_t main_f = profile_add_frame(p, "main", "prog", "/src/prog.c", 5, FRAME_NATIVE);
    uint32_t spin = profile_add_frame(p, "spin", "prog", "/src/prog.c", 20, FRAME_NATIVE);
    uint32_t w10 = profile_add_frame(p, "work", "w.py", "/a/w.py", 10, FRAME_PYTHON);
    uint32_t w12 = profile_add_frame(p, "work", "w.py", "/a/w.py", 12, FRAME_PYTHON);
    uint32_t mm = profile_add_frame(p, "at::_ops::mm::call", "libtorch_cpu.so", NULL, 0, FRAME_NATIVE);
    uint32_t rec = profile_add_frame(p, "rec", "prog", NULL, 0, FRAME_NATIVE);
    uint32_t s1[] = {spin, main_f}, s3[] = {w10, main_f}, s2[] = {mm, w12, main_f}, s4[] = {rec, rec, main_f};
    uint32_t k1 = profile_add_stack(p, s1, 2), k3 = profile_add_stack(p, s3, 2);
    uint32_t k2 = profile_add_stack(p, s2, 3), k4 = profile_add_stack(p, s4, 3);
    uint32_t t0 = profile_add_thread(p, 100, 100, "main");
    uint32_t t1 = profile_add_thread(p, 100, 101, "worker");
    const uint64_t ms = 1000000;
    profile_add_sample(p, 1 * ms, t0, k1, 1);
    profile_add_sample(p, 2 * ms, t0, k1, 1);
    profile_add_sample(p, 2 * ms + 1, t1, k1, 1);
    profile_add_sample(p, 3 * ms, t0, k1, 1);
    profile_add_sample(p, 4 * ms, t0, k3, 1);
    profile_add_sample(p, 5 * ms, t0, k2, 1);
    profile_add_sample(p, 6 * ms, t0, k2, 1);
    profile_add_sample(p, 20 * ms, t0, k4, 1);
    return p;
}

/* Runs a writer into memory; returns the bytes (caller frees) and size. */
#define CAPTURE(buf, len, call)                            \
    do {                                                   \
        FILE *out_ = open_memstream(&(buf), &(len));       \
        CU_ASSERT_FATAL(out_ != NULL);                     \
        FILE *out = out_;                                  \
        CU_ASSERT_EQUAL(call, 0);                          \
        fclose(out_);                                      \
    } while (0)

static void test_folded_exact(void)
{
    struct profile *p = make_profile();
    char *buf = NULL;
    size_t len = 0;
    CAPTURE(buf, len, export_folded(out, p));
    CU_ASSERT_STRING_EQUAL(buf, "main;rec;rec 1\n"
                                "main;spin 4\n"
                                "main;work (w.py) 1\n"
                                "main;work (w.py);at::_ops::mm::call 2\n");
    free(buf);
    profile_free(p);
}

static void test_folded_names(void)
{
    char b[64];
    static const char *const cases[][2] = {
        {"a;b", "a:b"},         {"foo 123", "foo_123"}, {"x\ny", "x y"},   {"", "[unknown]"},
        {"trail  ", "trail"},   {"v2", "v2"},           {"op 1 2", "op 1_2"}, {"tab\t7", "tab_7"},
        {"f(int) 0", "f(int)_0"}, {"  ", "[unknown]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        export_folded_name(b, sizeof b, cases[i][0]);
        CU_ASSERT_STRING_EQUAL(b, cases[i][1]);
    }
    /* Truncation never leaves half a UTF-8 sequence. */
    char small[6];
    export_folded_name(small, sizeof small, "abcd\xc3\xa9xyz");
    CU_ASSERT_STRING_EQUAL(small, "abcd");
    /* A 3-byte character cut after 2 bytes, in a buffer whose next byte is
     * stale and looks like a continuation byte: the check must stop at the
     * terminator, not read the stale byte and keep half the character. */
    char stale[6];
    memset(stale, 0x80, sizeof stale);
    export_folded_name(stale, sizeof stale, "abc\xe2\x82\xacz"); /* "abc" + U+20AC + "z" */
    CU_ASSERT_STRING_EQUAL(stale, "abc");
}

static void test_json_escaping(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    export_json_string(out, "a\"b\\c\n\x01\xff\xc3\xa9\t/");
    fputc(' ', out);
    export_json_string(out, NULL);
    fputc(' ', out);
    export_json_string(out, "\xed\xa0\x80"); /* a UTF-16 surrogate: not valid UTF-8 */
    fclose(out);
    CU_ASSERT_STRING_EQUAL(buf, "\"a\\\"b\\\\c\\n\\u0001\\ufffd\xc3\xa9\\t/\" null \"\\ufffd\\ufffd\\ufffd\"");
    free(buf);

    buf = NULL;
    out = open_memstream(&buf, &len);
    export_xml_text(out, "<a & 'b'>\"");
    fclose(out);
    CU_ASSERT_STRING_EQUAL(buf, "&lt;a &amp; &#39;b&#39;&gt;&quot;");
    free(buf);
}

/* ---- a tiny marshal reader: just what export_pstats writes ---------------------- */

enum mv_type { MV_NULL, MV_INT, MV_FLOAT, MV_STR, MV_TUPLE, MV_DICT };

struct mv {
    enum mv_type type;
    long long i;
    double f;
    char *s;
    size_t n;        /* tuple items, or dict pairs */
    struct mv *items; /* tuple: n items; dict: 2n (key, value) */
};

struct reader {
    const unsigned char *p, *end;
    bool bad;
};

static uint32_t rd_u32(struct reader *r)
{
    if (r->end - r->p < 4) {
        r->bad = true;
        return 0;
    }
    uint32_t v = r->p[0] | r->p[1] << 8 | r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    r->p += 4;
    return v;
}

static void mv_read(struct reader *r, struct mv *v)
{
    memset(v, 0, sizeof *v);
    if (r->p >= r->end) {
        r->bad = true;
        return;
    }
    unsigned char code = *r->p++;
    if (code & 0x80) { /* FLAG_REF: the writer must not use references */
        r->bad = true;
        return;
    }
    switch (code) {
    case '0': v->type = MV_NULL; return;
    case 'i': v->type = MV_INT; v->i = (int32_t)rd_u32(r); return;
    case 'g': {
        v->type = MV_FLOAT;
        if (r->end - r->p < 8) {
            r->bad = true;
            return;
        }
        memcpy(&v->f, r->p, 8); /* the test machine is little-endian, like the format */
        r->p += 8;
        return;
    }
    case 'z':
    case 'u': {
        v->type = MV_STR;
        size_t n = code == 'z' ? (r->p < r->end ? *r->p++ : 0) : rd_u32(r);
        if ((size_t)(r->end - r->p) < n) {
            r->bad = true;
            return;
        }
        v->s = strndup((const char *)r->p, n);
        r->p += n;
        return;
    }
    case ')': {
        v->type = MV_TUPLE;
        v->n = r->p < r->end ? *r->p++ : 0;
        v->items = calloc(v->n ? v->n : 1, sizeof *v->items);
        for (size_t k = 0; k < v->n && !r->bad; k++)
            mv_read(r, &v->items[k]);
        return;
    }
    case '{': {
        v->type = MV_DICT;
        size_t cap = 8;
        v->items = calloc(2 * cap, sizeof *v->items);
        for (;;) {
            struct mv key;
            mv_read(r, &key);
            if (r->bad || key.type == MV_NULL)
                return;
            if (v->n == cap) {
                cap *= 2;
                v->items = realloc(v->items, 2 * cap * sizeof *v->items);
            }
            v->items[2 * v->n] = key;
            mv_read(r, &v->items[2 * v->n + 1]);
            v->n++;
        }
    }
    default: r->bad = true; return;
    }
}

static void mv_free(struct mv *v)
{
    free(v->s);
    size_t n = v->type == MV_DICT ? 2 * v->n : v->type == MV_TUPLE ? v->n : 0;
    for (size_t k = 0; k < n; k++)
        mv_free(&v->items[k]);
    free(v->items);
}

/* The value of dict d under key (file, line, name), or NULL. */
static struct mv *dict_get(struct mv *d, const char *file, long long line, const char *name)
{
    for (size_t k = 0; k < d->n; k++) {
        struct mv *key = &d->items[2 * k];
        if (key->type == MV_TUPLE && key->n == 3 && strcmp(key->items[0].s, file) == 0 &&
            key->items[1].i == line && strcmp(key->items[2].s, name) == 0)
            return &d->items[2 * k + 1];
    }
    return NULL;
}

/* Checks (cc, nc, tt, ct[, callers]) of a stats or caller tuple. */
static void check_stat(struct mv *v, long long n, double tt, double ct, size_t ncallers)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL_FATAL(v->type, MV_TUPLE);
    CU_ASSERT(v->n == 5 || v->n == 4);
    CU_ASSERT_EQUAL(v->items[0].i, n);
    CU_ASSERT_EQUAL(v->items[1].i, n);
    CU_ASSERT(fabs(v->items[2].f - tt) < 1e-12);
    CU_ASSERT(fabs(v->items[3].f - ct) < 1e-12);
    if (v->n == 5) {
        CU_ASSERT_EQUAL(v->items[4].type, MV_DICT);
        CU_ASSERT_EQUAL(v->items[4].n, ncallers);
    }
}

/* Exports p as pstats into *buf and decodes it into d (asserting that it
 * decodes); true when nothing follows the decoded value. */
static bool pstats_of(const struct profile *p, char **buf, struct mv *d)
{
    size_t len = 0;
    char err[256];
    CAPTURE(*buf, len, export_pstats(out, p, err, sizeof err));
    struct reader r = {(const unsigned char *)*buf, (const unsigned char *)*buf + len, false};
    mv_read(&r, d);
    CU_ASSERT_FALSE(r.bad);
    return r.p == r.end;
}

static void test_pstats_decode(void)
{
    struct profile *p = make_profile();
    char *buf = NULL;
    struct mv d;
    CU_ASSERT_TRUE(pstats_of(p, &buf, &d)); /* nothing after the dict */
    CU_ASSERT_EQUAL(d.type, MV_DICT);
    CU_ASSERT_EQUAL(d.n, 5); /* main, spin, work, mm, rec */
    const double ms = 0.001;
    /* Native functions with line information: (file, smallest line, name). */
    struct mv *v = dict_get(&d, "/src/prog.c", 5, "main");
    check_stat(v, 8, 0, 8 * ms, 0);
    v = dict_get(&d, "/src/prog.c", 20, "spin");
    check_stat(v, 4, 4 * ms, 4 * ms, 1);
    check_stat(dict_get(&v->items[4], "/src/prog.c", 5, "main"), 4, 4 * ms, 4 * ms, 0);
    /* Python: keyed by file and the smallest line seen (10, not 12). */
    v = dict_get(&d, "/a/w.py", 10, "work");
    check_stat(v, 3, 1 * ms, 3 * ms, 1);
    check_stat(dict_get(&v->items[4], "/src/prog.c", 5, "main"), 3, 1 * ms, 3 * ms, 0);
    v = dict_get(&d, "libtorch_cpu.so", 0, "at::_ops::mm::call");
    check_stat(v, 2, 2 * ms, 2 * ms, 1);
    check_stat(dict_get(&v->items[4], "/a/w.py", 10, "work"), 2, 2 * ms, 2 * ms, 0);
    /* Recursion: the sample counts once, on the outermost call's edge, so
     * the caller edges add up to the function (no rec -> rec edge). */
    v = dict_get(&d, "prog", 0, "rec");
    check_stat(v, 1, 1 * ms, 1 * ms, 1);
    check_stat(dict_get(&v->items[4], "/src/prog.c", 5, "main"), 1, 1 * ms, 1 * ms, 0);
    /* gprof2dot's rule: every caller is also a top-level key. */
    for (size_t k = 0; k < d.n; k++) {
        struct mv *callers = &d.items[2 * k + 1].items[4];
        for (size_t c = 0; c < callers->n; c++) {
            struct mv *ck = &callers->items[2 * c];
            CU_ASSERT_PTR_NOT_NULL(dict_get(&d, ck->items[0].s, ck->items[1].i, ck->items[2].s));
        }
    }
    mv_free(&d);
    free(buf);
    profile_free(p);
}

static void test_pstats_empty_and_native_without_module(void)
{
    struct profile *p = profile_new_empty();
    char err[256] = "";
    FILE *out = fopen("/dev/null", "w");
    CU_ASSERT_EQUAL(export_pstats(out, p, err, sizeof err), -2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no samples"));
    /* A frame without a module uses cProfile's built-in convention. */
    uint32_t f = profile_add_frame(p, "\xffodd", "", NULL, 0, FRAME_NATIVE);
    uint32_t s = profile_add_stack(p, &f, 1);
    uint32_t t = profile_add_thread(p, 1, 1, "t");
    profile_add_sample(p, 5, t, s, 2);
    fclose(out);
    char *buf = NULL;
    struct mv d;
    pstats_of(p, &buf, &d);
    CU_ASSERT_EQUAL(d.n, 1);
    /* Invalid UTF-8 became U+FFFD in a 'u' string. */
    check_stat(dict_get(&d, "~", 0, "<\xef\xbf\xbdodd>"), 1, 0.002, 0.002, 0);
    mv_free(&d);
    free(buf);
    profile_free(p);
}

/* Interpreter code leafward of the innermost Python frame is that function's
 * own time (as cProfile counts it); a foreign native frame keeps its entry,
 * and interpreter frames under it stay too (called back from C). The eval
 * loop itself is in the frame table (the splice removed it from stacks). */
static void test_pstats_interpreter_work(void)
{
    struct profile *p = profile_new_empty();
    profile_add_frame(p, "_PyEval_EvalFrameDefault", "python3.11", NULL, 0, FRAME_NATIVE);
    uint32_t main_f = profile_add_frame(p, "main", "python3.11", NULL, 0, FRAME_NATIVE);
    uint32_t hot = profile_add_frame(p, "hot", "s.py", "/a/s.py", 4, FRAME_PYTHON);
    uint32_t lfree = profile_add_frame(p, "PyObject_Free", "python3.11", NULL, 0, FRAME_NATIVE);
    uint32_t ladd = profile_add_frame(p, "python3.11+0x5a8530", "python3.11", NULL, 0, FRAME_NATIVE);
    uint32_t gemm = profile_add_frame(p, "sgemm_", "libblas.so.3", NULL, 0, FRAME_NATIVE);
    uint32_t s1[] = {lfree, hot, main_f}, s2[] = {ladd, lfree, hot, main_f}, s3[] = {hot, main_f};
    uint32_t s4[] = {gemm, hot, main_f}, s5[] = {lfree, gemm, hot, main_f};
    uint32_t t = profile_add_thread(p, 1, 1, "t");
    profile_add_sample(p, 1, t, profile_add_stack(p, s1, 3), 3);
    profile_add_sample(p, 2, t, profile_add_stack(p, s2, 4), 2);
    profile_add_sample(p, 3, t, profile_add_stack(p, s3, 2), 1);
    profile_add_sample(p, 4, t, profile_add_stack(p, s4, 3), 4);
    profile_add_sample(p, 5, t, profile_add_stack(p, s5, 4), 1);
    p->period_ns = 1000000;
    p->total_weight = 11;
    char *buf = NULL;
    struct mv d;
    pstats_of(p, &buf, &d);
    const double ms = 0.001;
    /* hot: its own 1 + the interpreter's 3 + 2 under it; sgemm_ 4 and the
     * PyObject_Free called under sgemm_ 1 are not hot's own time. */
    /* (nc counts samples, 5 in all; tt and ct their weights.) */
    check_stat(dict_get(&d, "/a/s.py", 4, "hot"), 5, 6 * ms, 11 * ms, 1);
    check_stat(dict_get(&d, "libblas.so.3", 0, "sgemm_"), 2, 4 * ms, 5 * ms, 1);
    check_stat(dict_get(&d, "python3.11", 0, "PyObject_Free"), 1, 1 * ms, 1 * ms, 1);
    CU_ASSERT_PTR_NULL(dict_get(&d, "python3.11", 0, "python3.11+0x5a8530"));
    check_stat(dict_get(&d, "python3.11", 0, "main"), 5, 0, 11 * ms, 0);
    mv_free(&d);
    free(buf);
    profile_free(p);
}

static size_t count_of(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *s = strstr(hay, needle); s; s = strstr(s + 1, needle))
        n++;
    return n;
}

static void test_speedscope_runs(void)
{
    struct profile *p = make_profile();
    char *buf = NULL;
    size_t len = 0;
    CAPTURE(buf, len, export_speedscope(out, p));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\""));
    /* Thread 0: S1 S1 S1 S3 S2 S2 S4 -> four runs; frames are functions
     * (main 0, spin 1, work 2, mm 3, rec 4), root first. */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"samples\":[[0,1],[0,2],[0,2,3],[0,4,4]],"
                                       "\"weights\":[3000000,1000000,2000000,1000000]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "{\"name\":\"work (w.py)\",\"file\":\"/a/w.py\",\"line\":10}"));
    CU_ASSERT_EQUAL(count_of(buf, "\"type\":\"sampled\""), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"activeProfileIndex\":0"));
    free(buf);
    profile_free(p);
}

static void test_chrome_slices(void)
{
    struct profile *p = make_profile();
    const struct profile *ps[1] = {p};
    struct export_options o = {.online_cpus = 2};
    char *buf = NULL;
    size_t len = 0;
    CAPTURE(buf, len, export_chrome_trace(out, ps, &o, 1));
    /* Thread 0: main > spin for 3 samples, main > work with mm below it for
     * the last two, then off CPU (a 14 ms gap) and main > rec > rec; thread
     * 1: main > spin. Whole microseconds, every slice opened is closed. */
#define SLICE(ph, name, cat, tid, ts) \
    "{\"ph\":\"" ph "\",\"name\":\"" name "\",\"cat\":\"" cat "\",\"pid\":100,\"tid\":" tid ",\"ts\":" ts "}"
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, SLICE("B", "main", "native", "100", "0") ",\n"
                                       SLICE("B", "spin", "native", "100", "0") ",\n"
                                       SLICE("E", "spin", "native", "100", "3000") ",\n"
                                       SLICE("B", "work (w.py)", "python", "100", "3000") ",\n"
                                       SLICE("B", "at::_ops::mm::call", "operator", "100", "4000") ",\n"
                                       SLICE("E", "at::_ops::mm::call", "operator", "100", "6000") ",\n"
                                       SLICE("E", "work (w.py)", "python", "100", "6000") ",\n"
                                       SLICE("E", "main", "native", "100", "6000") ",\n"
                                       SLICE("B", "main", "native", "100", "19000")));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, SLICE("B", "spin", "native", "101", "1000") ",\n"
                                       SLICE("E", "spin", "native", "101", "2000")));
#undef SLICE
    CU_ASSERT_EQUAL(count_of(buf, "\"ph\":\"B\""), 9);
    CU_ASSERT_EQUAL(count_of(buf, "\"ph\":\"E\""), 9);
    CU_ASSERT_PTR_NULL(strstr(buf, "(pid "));
    CU_ASSERT_EQUAL(count_of(buf, "\"name\":\"thread_name\""), 2);
    CU_ASSERT_EQUAL(count_of(buf, "\"name\":\"process_name\""), 1);
    /* Two threads active in the first 10 ms bucket, one in the third. */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"ts\":0,\"args\":{\"active threads\":2,\"online CPUs\":2}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"ts\":20000,\"args\":{\"active threads\":1,\"online CPUs\":2}"));
    free(buf);

    /* Two profiles with the same pid get two lanes. */
    struct profile *q = make_profile();
    const struct profile *two[2] = {p, q};
    struct export_options oo[2] = {{.online_cpus = 2}, {.online_cpus = 2}};
    CAPTURE(buf, len, export_chrome_trace(out, two, oo, 2));
    CU_ASSERT_EQUAL(count_of(buf, "\"name\":\"process_name\""), 2);
    CU_ASSERT_EQUAL(count_of(buf, "\"ph\":\"B\""), 18);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"pid\":10000100"));
    free(buf);
    profile_free(q);
    profile_free(p);
}

/* A slice of a name closed and one of that name opened at one timestamp:
 * speedscope would take the begin first, so the opening waits 1 us. */
static void test_chrome_same_name_reopened(void)
{
    struct profile *p = profile_new_empty();
    uint32_t m = profile_add_frame(p, "main", "prog", NULL, 0, FRAME_NATIVE);
    uint32_t b = profile_add_frame(p, "b", "prog", NULL, 0, FRAME_NATIVE);
    uint32_t l = profile_add_frame(p, "leaf", "prog", NULL, 0, FRAME_NATIVE);
    uint32_t s1[] = {l, b, m}, s2[] = {l, m};
    uint32_t k1 = profile_add_stack(p, s1, 3), k2 = profile_add_stack(p, s2, 2);
    uint32_t t = profile_add_thread(p, 7, 7, "t");
    profile_add_sample(p, 1000000, t, k1, 1);
    profile_add_sample(p, 2000000, t, k2, 1);
    const struct profile *ps[1] = {p};
    char *buf = NULL;
    size_t len = 0;
    CAPTURE(buf, len, export_chrome_trace(out, ps, NULL, 1));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "{\"ph\":\"E\",\"name\":\"leaf\",\"cat\":\"native\",\"pid\":7,\"tid\":7,\"ts\":1000},\n"
                                       "{\"ph\":\"E\",\"name\":\"b\",\"cat\":\"native\",\"pid\":7,\"tid\":7,\"ts\":1000},\n"
                                       "{\"ph\":\"B\",\"name\":\"leaf\",\"cat\":\"native\",\"pid\":7,\"tid\":7,\"ts\":1001},\n"
                                       "{\"ph\":\"E\",\"name\":\"leaf\",\"cat\":\"native\",\"pid\":7,\"tid\":7,\"ts\":2000}"));
    free(buf);
    profile_free(p);
}

static void test_callgrind(void)
{
    struct profile *p = make_profile();
    char *buf = NULL;
    size_t len = 0;
    CAPTURE(buf, len, export_callgrind(out, p));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "positions: line\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "events: Samples Time_ns\n"));
    /* spin's self cost on its line; main's call to it on main's line */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "fl=/src/prog.c\nfn=spin\n20 4 4000000\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "cfi=/src/prog.c\ncfn=spin\ncalls=4 20\n5 4 4000000\n"));
    /* recursion: one edge main -> rec, none rec -> rec */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "cfi=prog\ncfn=rec\ncalls=1 0\n5 1 1000000\n"));
    CU_ASSERT_PTR_NULL(strstr(buf, "fn=rec\n0 1 1000000\ncfi"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "totals: 8 8000000\n"));
    free(buf);
    profile_free(p);
}

static void test_pprof_gzip(void)
{
    struct profile *p = make_profile();
    char *buf = NULL;
    size_t len = 0;
    CAPTURE(buf, len, export_pprof(out, p));
    CU_ASSERT_FATAL(len > 18);
    CU_ASSERT((unsigned char)buf[0] == 0x1f && (unsigned char)buf[1] == 0x8b); /* gzip */
    unsigned char raw[65536];
    z_stream z = {0};
    CU_ASSERT_FATAL(inflateInit2(&z, 15 + 16) == Z_OK);
    z.next_in = (unsigned char *)buf;
    z.avail_in = (uInt)len;
    z.next_out = raw;
    z.avail_out = sizeof raw;
    CU_ASSERT(inflate(&z, Z_FINISH) == Z_STREAM_END);
    size_t n = sizeof raw - z.avail_out;
    inflateEnd(&z);
    /* the first string_table entry (field 6, length 0) is "" */
    CU_ASSERT_PTR_NOT_NULL(memmem(raw, n, "\x32\x00\x32\x07samples", 11));
    CU_ASSERT_PTR_NOT_NULL(memmem(raw, n, "nanoseconds", 11));
    CU_ASSERT_PTR_NOT_NULL(memmem(raw, n, "work (w.py)", 11));
    free(buf);
    profile_free(p);
}

static void test_svg_and_html(void)
{
    struct profile *p = make_profile();
    char *buf = NULL;
    size_t len = 0;
    struct export_options o = {.online_cpus = 2};
    CAPTURE(buf, len, export_flamegraph(out, p, &o, false));
    CU_ASSERT(strncmp(buf, "<?xml", 5) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "data-total=\"8\""));
    /* One box per tree node: main, rec, rec, spin, work, mm. */
    CU_ASSERT_EQUAL(count_of(buf, "<g class=\"f\""), 6);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "<title>main\n8 samples, 0.008 s (100.00%)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "</svg>\n"));
    /* A real size: 3 levels of 16 px plus the margins, so deep graphs scroll. */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "width=\"1200\" height=\"144\""));
    free(buf);
    struct export_options fo = {.width = 600, .countname = "ms", .colors = "hot", .minwidth_pct = 20};
    CAPTURE(buf, len, export_flamegraph(out, p, &fo, false));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "width=\"600\" height=\"144\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, ">8 ms ("));
    /* --minwidth 20%: the rec boxes (1 of 8) are left out; main, spin, work, mm (2 of 8) stay */
    CU_ASSERT_EQUAL(count_of(buf, "<g class=\"f\""), 4);
    free(buf);
    o.inverted = true;
    CAPTURE(buf, len, export_flamegraph(out, p, &o, true));
    CU_ASSERT(strncmp(buf, "<svg", 4) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "Icicle graph"));
    free(buf);
    CAPTURE(buf, len, export_html(out, p, &o));
    CU_ASSERT(strncmp(buf, "<!DOCTYPE html>", 15) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "id=\"hotspots\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "id=\"opprof-flame\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "active threads"));
    CU_ASSERT_PTR_NULL(strstr(buf, "http://www.w3.org/1999")); /* no external reference but the SVG namespace */
    CU_ASSERT_PTR_NULL(strstr(buf, "src=\"http"));
    free(buf);
    profile_free(p);
}

static void test_classify(void)
{
    struct prof_frame f = {"at::_ops::bmm::call", "libtorch_cpu.so", NULL, 0, FRAME_NATIVE};
    CU_ASSERT_EQUAL(export_classify(&f), EXPORT_CLASS_OPERATOR);
    f = (struct prof_frame){"gomp_team_barrier_wait_end", "libgomp.so.1", NULL, 0, FRAME_NATIVE};
    CU_ASSERT_EQUAL(export_classify(&f), EXPORT_CLASS_OPENMP);
    f = (struct prof_frame){"libomp.so.5+0x1234", "libomp.so.5", NULL, 0, FRAME_UNKNOWN};
    CU_ASSERT_EQUAL(export_classify(&f), EXPORT_CLASS_OPENMP);
    f = (struct prof_frame){"libfoo.so+0x10", "libfoo.so", NULL, 0, FRAME_UNKNOWN};
    CU_ASSERT_EQUAL(export_classify(&f), EXPORT_CLASS_UNKNOWN);
    f = (struct prof_frame){"step", "train.py", "/x/train.py", 3, FRAME_PYTHON};
    CU_ASSERT_EQUAL(export_classify(&f), EXPORT_CLASS_PYTHON);
    f = (struct prof_frame){"do_syscall_64", "[kernel.kallsyms]", NULL, 0, FRAME_NATIVE};
    CU_ASSERT_EQUAL(export_classify(&f), EXPORT_CLASS_KERNEL);
    f = (struct prof_frame){"sgemm_", "libblas.so.3", NULL, 0, FRAME_NATIVE};
    CU_ASSERT_EQUAL(export_classify(&f), EXPORT_CLASS_NATIVE);
}

void register_export_tests(void)
{
    CU_pSuite s = CU_add_suite("export", NULL, NULL);
    CU_add_test(s, "folded stacks: exact text", test_folded_exact);
    CU_add_test(s, "folded stacks: name sanitizing", test_folded_names);
    CU_add_test(s, "JSON and XML escaping", test_json_escaping);
    CU_add_test(s, "pstats: marshal decodes to the expected stats", test_pstats_decode);
    CU_add_test(s, "pstats: empty profile refused, built-in key convention", test_pstats_empty_and_native_without_module);
    CU_add_test(s, "pstats: interpreter work is the Python function's own time", test_pstats_interpreter_work);
    CU_add_test(s, "speedscope: runs of equal stacks merged", test_speedscope_runs);
    CU_add_test(s, "chrome trace: slices, names, active threads, lanes", test_chrome_slices);
    CU_add_test(s, "chrome trace: a name closed and reopened at once waits 1 us", test_chrome_same_name_reopened);
    CU_add_test(s, "callgrind: self, calls, recursion counted once", test_callgrind);
    CU_add_test(s, "pprof: gzipped profile.proto, string 0 empty", test_pprof_gzip);
    CU_add_test(s, "flame graph SVG and HTML page", test_svg_and_html);
    CU_add_test(s, "frame classes", test_classify);
}
