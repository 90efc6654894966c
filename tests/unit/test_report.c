/*
 * tests/unit/test_report.c — the text, CSV and JSON renderers, checked
 * against exact expected output (so layout, quoting and escaping changes are
 * deliberate), plus the header's warnings.
 *
 * Output is captured with open_memstream. Profile fields the builders do not
 * set (dir, command, processes, warnings) point at test-owned storage and are
 * put back before profile_free.
 */
#ifndef _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "analyze/analyze.h"
#include "report/report.h"
#include "report/report_internal.h"
#include "tests/unit/unit.h"

/* A captured FILE*: open, render into it, then take the text. */
struct capture {
    FILE *f;
    char *buf;
    size_t len;
};

static void capture_open(struct capture *c)
{
    c->buf = NULL;
    c->len = 0;
    c->f = open_memstream(&c->buf, &c->len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c->f);
}

static const char *capture_text(struct capture *c)
{
    fclose(c->f);
    c->f = NULL;
    return c->buf;
}

static void capture_free(struct capture *c)
{
    free(c->buf);
    c->buf = NULL;
}

static void set_row(struct hotspot_row *r, const char *name, const char *module, const char *source,
                    uint64_t self, uint64_t total, uint64_t samples)
{
    memset(r, 0, sizeof *r);
    r->name = strdup(name);
    r->module = module ? strdup(module) : NULL;
    r->source = source ? strdup(source) : NULL;
    r->self = self;
    r->total = total;
    r->samples = samples;
}

static void new_table(struct hotspot_table *t, size_t nrows, uint64_t total_weight, uint64_t period_ns)
{
    memset(t, 0, sizeof *t);
    t->rows = calloc(nrows, sizeof *t->rows);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t->rows);
    t->nrows = nrows;
    t->total_weight = total_weight;
    t->period_ns = period_ns;
}

static void test_format_parse(void)
{
    enum report_format f;
    CU_ASSERT_EQUAL(report_format_parse("text", &f), 0);
    CU_ASSERT_EQUAL(f, FORMAT_TEXT);
    CU_ASSERT_EQUAL(report_format_parse("csv", &f), 0);
    CU_ASSERT_EQUAL(f, FORMAT_CSV);
    CU_ASSERT_EQUAL(report_format_parse("json", &f), 0);
    CU_ASSERT_EQUAL(f, FORMAT_JSON);
    CU_ASSERT_EQUAL(report_format_parse("xml", &f), -1);
    CU_ASSERT_EQUAL(report_format_parse("", &f), -1);
}

/* Three rows, limit 2: the title says so, columns fit the names. */
static void test_text_table_limit(void)
{
    struct hotspot_table t;
    new_table(&t, 3, 10, 1000000);
    set_row(&t.rows[0], "spin_a", "known_split", NULL, 5, 5, 5);
    set_row(&t.rows[1], "spin_b", "known_split", NULL, 3, 4, 4);
    set_row(&t.rows[2], "main", "known_split", NULL, 2, 10, 10);
    struct report_options o = {.format = FORMAT_TEXT, .group_by = GROUP_FUNCTION,
                               .sort = SORT_SELF, .limit = 2};
    struct capture c;
    capture_open(&c);
    CU_ASSERT_EQUAL(report_print_table(c.f, NULL, &t, &o, NULL), 0);
    CU_ASSERT_STRING_EQUAL(capture_text(&c),
        "Hotspots by function, sorted by self (top 2 of 3)\n"
        "  Self %   Self time  Total %  Total time  Samples  Name    Module\n"
        "  50.0 %        5 ms   50.0 %        5 ms        5  spin_a  known_split\n"
        "  30.0 %        3 ms   40.0 %        4 ms        4  spin_b  known_split\n"
        "Self time total: 10 ms (10 samples)\n");
    capture_free(&c);

    /* No limit, or a limit above the row count: no "(top N of M)". */
    o.limit = 0;
    capture_open(&c);
    report_print_table(c.f, NULL, &t, &o, "Callers of spin_a");
    const char *text = capture_text(&c);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "Callers of spin_a\n"));
    CU_ASSERT_PTR_NULL(strstr(text, "(top"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "  main    known_split\n"));
    capture_free(&c);
    hotspots_free(&t);
}

/* Long names are cut at 60 characters with "..."; seconds get "s"; rows
 * without a module (threads) have no Module column; sources are shown. */
/* One style for every time: the unit by magnitude, the decimals the sample
 * period supports. */
static void test_duration_precision(void)
{
    static const struct {
        double ns, res;
        const char *want;
    } cases[] = {
        {999e6, 1e6, "999 ms"},      {1967e6, 1e6, "1.967 s"},  {0, 1e6, "0 ms"},
        {1e6, 1e6, "1 ms"},          {12.75e6, 250e3, "12.8 ms"}, {250e3, 250e3, "250 us"},
        {60e9, 1e6, "60.000 s"},     {3e9, 1e9, "3 s"},         {1500, 0, "1.500 us"},
        {-601e6, 1e6, "-601 ms"},    {1.5e6, 1e6, "2 ms"},      {100e6, 10e6, "100 ms"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        report_format_duration(buf, sizeof buf, cases[i].ns, cases[i].res);
        if (strcmp(buf, cases[i].want) != 0)
            fprintf(stderr, "duration %g ns at %g ns: got '%s', want '%s'\n", cases[i].ns, cases[i].res, buf,
                    cases[i].want);
        CU_ASSERT_STRING_EQUAL(buf, cases[i].want);
    }
}

static void test_text_widths_and_units(void)
{
    char longname[71];
    memset(longname, 'x', 70);
    longname[70] = '\0';
    struct hotspot_table t;
    new_table(&t, 2, 3000, 1000000);
    set_row(&t.rows[0], longname, NULL, NULL, 2000, 2000, 2000);
    set_row(&t.rows[1], "tid 7 (w) pid 7", NULL, NULL, 1000, 1000, 1000);
    struct report_options o = {.format = FORMAT_TEXT, .group_by = GROUP_THREAD, .sort = SORT_SELF};
    struct capture c;
    capture_open(&c);
    report_print_table(c.f, NULL, &t, &o, NULL);
    char expect_row[128];
    snprintf(expect_row, sizeof expect_row, "  66.7 %%     2.000 s   66.7 %%     2.000 s     2000  %.57s...\n",
             longname);
    const char *text = capture_text(&c);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "Hotspots by thread, sorted by self\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "  Samples  Name\n")); /* no Module column */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, expect_row));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "  tid 7 (w) pid 7\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "Self time total: 3.000 s (3000 samples)\n"));
    capture_free(&c);
    hotspots_free(&t);

    new_table(&t, 1, 1, 500);
    set_row(&t.rows[0], "f", "m", "f.c:3", 1, 1, 1);
    o.group_by = GROUP_FUNCTION;
    capture_open(&c);
    report_print_table(c.f, NULL, &t, &o, NULL);
    text = capture_text(&c);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "  Name  Module  Source\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, " 100.0 %      500 ns  100.0 %      500 ns        1  f     m       f.c:3\n"));
    capture_free(&c);
    hotspots_free(&t);
}

/* The overhead line: the handler's CPU time (AGENT_CPU), its median and p99
 * from the histogram, interpolated inside a bucket; wall time only for
 * recordings without AGENT_CPU, said so. */
static void test_overhead_line(void)
{
    struct profile *p = profile_new_empty();
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    p->agent_handler_calls = 1000;
    p->agent_handler_ns = 80300000; /* 80.3 us per sample of wall time: preempted handlers */
    p->agent_writer_cpu_ns = 20000000;
    p->process_cpu_ns = 1000000000;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    report_print_header(out, p);
    fclose(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "overhead    80.3 us per sample in the signal handler (wall time) + 0.020 s"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "= 10.03 % of the processes' CPU time"));
    free(text);

    /* 100 timed calls: 60 in [2, 2.5) us, 39 in [3, 4) us, 1 in [48, 64) us. */
    struct profile_agent_cpu *a = &p->agent_cpu;
    a->handler_calls = 1000;
    a->handler_timed = 100;
    a->handler_cpu_est_ns = 3000000; /* 3.0 us per sample */
    a->timed_every = 8;
    a->buckets[6] = 60;
    a->buckets[8] = 39;
    a->buckets[18] = 1;
    a->maps_rereads = 4;
    CU_ASSERT_DOUBLE_EQUAL(profile_handler_quantile_ns(a, 0.5), 2000 + 500 * 50.0 / 60, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(profile_handler_quantile_ns(a, 0.99), 3000 + 1000 * 39.0 / 39, 1e-6);
    out = open_memstream(&text, &len);
    report_print_header(out, p);
    fclose(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "overhead    handler 3.0 us per sample (median 2.4, p99 4.0; CPU time of 1 in 8 "
                                        "samples) + 0.020 s writer thread CPU (4 maps reads)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "= 2.30 % of the processes' CPU time")); /* (3 + 20) ms of 1 s */
    free(text);
    /* A recording that measured its clock read (0.5 us): one read comes out
     * of the median and p99, and the line says so. */
    a->clock_read_timed_ns = 500 * a->handler_timed;
    out = open_memstream(&text, &len);
    report_print_header(out, p);
    fclose(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "(median 1.9, p99 3.5; CPU time of 1 in 8 samples, less a 0.50 us clock "
                                        "read) + 0.020 s writer thread CPU"));
    free(text);
    /* 250 more calls from processes with no timed call (short fork children):
     * charged the others' 3.0 us each, not 0 (which read 2.4 us, 2.30 %). */
    a->handler_calls = 1250;
    a->untimed_calls = 250;
    out = open_memstream(&text, &len);
    report_print_header(out, p);
    fclose(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "overhead    handler 3.0 us per sample (median 1.9"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "= 2.38 % of the processes' CPU time")); /* (3.75 + 20) ms of 1 s */
    free(text);
    /* A recording whose timed calls hold no clock read and measured what
     * timing them cost (AGENT_CPU timing_ns): nothing comes out of the
     * quantiles, and the line says what part of the mean the timing is. */
    a->handler_calls = 1000;
    a->untimed_calls = 0;
    a->clock_read_timed_ns = 0;
    a->timing_ns = 650000; /* 100 timed calls at 6.5 us: 0.65 us a sample */
    out = open_memstream(&text, &len);
    report_print_header(out, p);
    fclose(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "overhead    handler 3.0 us per sample (median 2.4, p99 4.0 of 1 in 8 samples "
                                        "timed; 0.65 us of the 3.0 is timing them) + 0.020 s writer thread CPU"));
    free(text);
    struct profile_agent_cpu none = {0};
    CU_ASSERT_EQUAL(profile_handler_quantile_ns(&none, 0.5), 0);
    profile_free(p);
}

/* One AGENT_CPU record's estimate: the timed calls' mean times all calls
 * plus what timing them cost (timing_ns); older streams: the mean less one
 * clock read, plus the two reads of each timed call spread over all calls,
 * or without a clock read the plain mean times the calls. */
static void test_agent_cpu_estimate(void)
{
    struct opr_agent_cpu c = {.handler_cpu_ns = 100 * 3000,
                              .handler_timed = 100,
                              .handler_calls = 800,
                              .timed_every = 8,
                              .clock_read_ns = 500};
    CU_ASSERT_DOUBLE_EQUAL(opr_agent_cpu_estimate_ns(&c), (2500 + 2 * 500 / 8.0) * 800, 1e-6);
    c.clock_read_ns = 0;
    CU_ASSERT_DOUBLE_EQUAL(opr_agent_cpu_estimate_ns(&c), 3000.0 * 800, 1e-6);
    c.clock_read_ns = 4000; /* a read above the mean takes it to 0, not below */
    CU_ASSERT_DOUBLE_EQUAL(opr_agent_cpu_estimate_ns(&c), 2 * 4000 / 8.0 * 800, 1e-6);
    /* A record with timing_ns: its timed calls hold no read (the clock read,
     * if any, is not taken out); the timing's cost is added once. */
    c.clock_read_ns = 500;
    c.timing_ns = 100 * 6500;
    CU_ASSERT_DOUBLE_EQUAL(opr_agent_cpu_estimate_ns(&c), 3000.0 * 800 + 650000, 1e-6);
    /* With the reads' histogram, their median times the timed calls: 90 calls
     * in [6, 8) us and 10 that waited for a CPU in [32, 48) us (whose sum
     * would say 9.9 us a call) give 6000 + 2000 * 50 / 90 a call. */
    c.timing_ns = 90 * 7000 + 10 * 40000;
    c.timing_buckets[11] = 90;
    c.timing_buckets[17] = 10;
    CU_ASSERT_DOUBLE_EQUAL(opr_agent_cpu_timing_ns(&c), 100 * (6000 + 2000 * 50.0 / 90), 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(opr_agent_cpu_estimate_ns(&c), 3000.0 * 800 + 100 * (6000 + 2000 * 50.0 / 90), 1e-6);
    c.handler_calls = 50; /* fewer calls than timed ones: a damaged record */
    CU_ASSERT_EQUAL(opr_agent_cpu_estimate_ns(&c), 0);
}

static void test_text_empty(void)
{
    struct hotspot_table t = {0};
    struct report_options o = {.format = FORMAT_TEXT};
    struct capture c;
    capture_open(&c);
    report_print_table(c.f, NULL, &t, &o, NULL);
    CU_ASSERT_STRING_EQUAL(capture_text(&c), "Hotspots by function, sorted by self\n  (no samples)\n");
    capture_free(&c);
}

/* RFC 4180: a field with a comma or a quote is quoted, quotes doubled. */
static void test_csv_quoting(void)
{
    struct hotspot_table t;
    new_table(&t, 3, 4, 1000000);
    set_row(&t.rows[0], "op,\"x\"", "m", NULL, 1, 2, 2);
    set_row(&t.rows[1], "plain", NULL, NULL, 3, 3, 3);
    set_row(&t.rows[2], "cut", "m", NULL, 0, 0, 0);
    struct report_options o = {.format = FORMAT_CSV, .limit = 2};
    struct capture c;
    capture_open(&c);
    CU_ASSERT_EQUAL(report_print_table(c.f, NULL, &t, &o, NULL), 0);
    CU_ASSERT_STRING_EQUAL(capture_text(&c),
        "name,module,self_pct,self_ns,total_pct,total_ns,samples\n"
        "\"op,\"\"x\"\"\",m,25.000,1000000,50.000,2000000,2\n"
        "plain,,75.000,3000000,75.000,3000000,3\n");
    capture_free(&c);
    hotspots_free(&t);
}

/* JSON: quotes, backslashes, control characters escaped, an invalid UTF-8
 * byte replaced, valid UTF-8 kept; module null for non-function rows. */
static void test_json_escaping(void)
{
    struct profile *p = profile_new_empty();
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    char *saved_dir = p->dir, *saved_cmd = p->command;
    char **saved_warn = p->warnings;
    size_t saved_nwarn = p->nwarnings;
    char *warnings[] = {(char *)"w\\1"};
    p->dir = (char *)"opprof.000";
    p->command = (char *)"./a \"b\"";
    p->lost_samples = 2;
    p->complete = true;
    p->warnings = warnings;
    p->nwarnings = 1;

    struct hotspot_table t;
    new_table(&t, 2, 2, 1000);
    set_row(&t.rows[0], "q\"b\\s\nt\x01\t\xff\xc3\xa9", "m", NULL, 1, 1, 1);
    set_row(&t.rows[1], "x", NULL, "x.c:3", 1, 2, 1);
    struct report_options o = {.format = FORMAT_JSON, .group_by = GROUP_MODULE, .sort = SORT_TOTAL};
    struct capture c;
    capture_open(&c);
    CU_ASSERT_EQUAL(report_print_table(c.f, p, &t, &o, NULL), 0);
    CU_ASSERT_STRING_EQUAL(capture_text(&c),
        "{\"dir\":\"opprof.000\",\"command\":\"./a \\\"b\\\"\",\"period_ns\":1000,\"total_weight\":2,"
        "\"lost_samples\":2,\"complete\":true,\"user_only\":false,\"group_by\":\"module\",\"sort\":\"total\","
        "\"warnings\":[\"w\\\\1\"],\"rows\":[\n"
        "{\"name\":\"q\\\"b\\\\s\\nt\\u0001\\t\\ufffd\xc3\xa9\",\"module\":\"m\",\"self_pct\":50.000,"
        "\"self_ns\":1000,\"total_pct\":50.000,\"total_ns\":1000,\"samples\":1},\n"
        "{\"name\":\"x\",\"module\":null,\"source\":\"x.c:3\",\"self_pct\":50.000,\"self_ns\":1000,"
        "\"total_pct\":100.000,\"total_ns\":2000,\"samples\":1}\n"
        "]}\n");
    capture_free(&c);

    /* A callers table says whose callers it holds; limit 1 keeps one row. */
    o.callers_of = "spin_a";
    o.limit = 1;
    p->nwarnings = 0;
    capture_open(&c);
    report_print_table(c.f, p, &t, &o, "Callers of spin_a");
    const char *text = capture_text(&c);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"callers_of\":\"spin_a\",\"warnings\":[],\"rows\":[\n{\"name\":\"q"));
    CU_ASSERT_PTR_NULL(strstr(text, "\"name\":\"x\""));
    capture_free(&c);

    hotspots_free(&t);
    p->dir = saved_dir;
    p->command = saved_cmd;
    p->warnings = saved_warn;
    p->nwarnings = saved_nwarn;
    profile_free(p);
}

/* The header of a clean recording, as in the user-facing example. */
static void test_header_clean(void)
{
    struct profile *p = profile_new_empty();
    uint32_t f = profile_add_frame(p, "main", "app", NULL, 0, FRAME_NATIVE);
    uint32_t s = profile_add_stack(p, &f, 1);
    uint32_t t0 = profile_add_thread(p, 10, 10, "app");
    uint32_t t1 = profile_add_thread(p, 10, 11, "app");
    profile_add_sample(p, 1, t0, s, 1);
    profile_add_sample(p, 2, t1, s, 1);
    profile_add_sample(p, 3, t1, s, 1);
    char *saved_dir = p->dir, *saved_cmd = p->command, *saved_event = p->event;
    struct prof_process *saved_procs = p->processes;
    size_t saved_nprocs = p->nprocesses;
    struct prof_process proc = {.pid = 10, .exe = (char *)"/x/known_split", .ended_cleanly = true};
    p->dir = (char *)"opprof.000";
    p->command = (char *)"./known_split 3";
    p->event = (char *)"task-clock";
    p->frequency_hz = 1000;
    p->period_ns = 1000000;
    p->start_ns = 5000000000ull;
    p->end_ns = 8020000000ull;
    p->exit_status = 0;
    p->complete = true;
    p->user_only = true;
    p->processes = &proc;
    p->nprocesses = 1;

    struct capture c;
    capture_open(&c);
    report_print_header(c.f, p);
    CU_ASSERT_STRING_EQUAL(capture_text(&c),
        "opprof report: opprof.000\n"
        "  command     ./known_split 3\n"
        "  duration    3.02 s (workload wall time), exit status 0\n"
        "  samples     3 (lost 0, truncated stacks 0, unwind failed 0), event task-clock at 1000 Hz "
        "(1.000 ms per sample), user mode only\n"
        "  processes   1, threads 2\n");
    capture_free(&c);

    p->exit_signal = 9;
    capture_open(&c);
    report_print_header(c.f, p);
    CU_ASSERT_PTR_NOT_NULL(strstr(capture_text(&c), "(workload wall time), killed by signal 9 ("));
    capture_free(&c);

    p->dir = saved_dir;
    p->command = saved_cmd;
    p->event = saved_event;
    p->processes = saved_procs;
    p->nprocesses = saved_nprocs;
    profile_free(p);
}

/* Everything that makes figures incomplete is said before the table. */
static void test_header_warnings(void)
{
    struct profile *p = profile_new_empty();
    uint32_t f = profile_add_frame(p, "main", "app", NULL, 0, FRAME_NATIVE);
    uint32_t s = profile_add_stack(p, &f, 1);
    uint32_t t0 = profile_add_thread(p, 42, 42, "w");
    profile_add_sample(p, 1, t0, s, 2);
    char *saved_dir = p->dir;
    char **saved_warn = p->warnings;
    size_t saved_nwarn = p->nwarnings;
    struct prof_process *saved_procs = p->processes;
    size_t saved_nprocs = p->nprocesses;
    char *notes[] = {(char *)"queue full"};
    char *warnings[] = {(char *)"module libfoo.so not found"};
    struct prof_process proc = {.pid = 42, .exe = (char *)"/bin/w", .unwind_failed = 3,
                                .ended_cleanly = false, .stream_truncated = true,
                                .notes = notes, .nnotes = 1};
    p->dir = (char *)"d";
    p->period_ns = 0; /* unknown rate: no "at N Hz", no "per sample" */
    p->frequency_hz = 0;
    p->exit_status = -1;
    p->complete = false;
    p->lost_samples = 5;
    p->truncated_samples = 1;
    p->unknown_frames = 7;
    p->warnings = warnings;
    p->nwarnings = 1;
    p->processes = &proc;
    p->nprocesses = 1;

    struct capture c;
    capture_open(&c);
    report_print_header(c.f, p);
    CU_ASSERT_STRING_EQUAL(capture_text(&c),
        "opprof report: d\n"
        "  command     (unknown)\n"
        "  duration    unknown (the recording did not finish), exit status unknown\n"
        "  samples     1 (weight 2 periods; lost 5, truncated stacks 1, unwind failed 3), event (unknown), "
        "user + kernel CPU time\n"
        "  processes   1, threads 1\n"
        "warning: recording did not finish (opprof record was interrupted); figures cover what was written\n"
        "warning: module libfoo.so not found\n"
        "warning: process 42 (w) did not end cleanly; its last samples may be missing\n"
        "warning: the data of process 42 (w) ends inside a record; the rest was not read\n"
        "note: process 42 (w): queue full\n"
        "unknown frames: 7 (code without a symbol, shown as module+0xoffset)\n");
    capture_free(&c);

    p->dir = saved_dir;
    p->warnings = saved_warn;
    p->nwarnings = saved_nwarn;
    p->processes = saved_procs;
    p->nprocesses = saved_nprocs;
    profile_free(p);
}

/* A tiny profile of one thread: stacks main -> leaf (*leaf_stack) and main
 * alone (*main_stack), no samples yet. */
static struct profile *main_and_leaf(const char *leaf, uint32_t *leaf_stack, uint32_t *main_stack, uint32_t *thread)
{
    struct profile *p = profile_new_empty();
    uint32_t fm = profile_add_frame(p, "main", "app", NULL, 0, FRAME_NATIVE);
    uint32_t fl = profile_add_frame(p, leaf, "app", NULL, 0, FRAME_NATIVE);
    uint32_t a[] = {fl, fm}, b[] = {fm};
    *leaf_stack = profile_add_stack(p, a, 2);
    *main_stack = profile_add_stack(p, b, 1);
    *thread = profile_add_thread(p, 1, 1, "t");
    return p;
}

/* From samples to CSV: the whole report path on a tiny profile. */
static void test_compute_then_csv(void)
{
    uint32_t sa, sb, th;
    struct profile *p = main_and_leaf("work", &sa, &sb, &th);
    profile_add_sample(p, 1, th, sa, 3);
    profile_add_sample(p, 2, th, sb, 1);
    p->period_ns = 2000000;
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_FUNCTION, &t), 0);
    hotspots_sort(&t, SORT_SELF);
    struct report_options o = {.format = FORMAT_CSV};
    struct capture c;
    capture_open(&c);
    report_print_table(c.f, p, &t, &o, NULL);
    CU_ASSERT_STRING_EQUAL(capture_text(&c),
        "name,module,self_pct,self_ns,total_pct,total_ns,samples\n"
        "work,app,75.000,6000000,75.000,6000000,1\n"
        "main,app,25.000,2000000,100.000,8000000,2\n");
    capture_free(&c);
    hotspots_free(&t);
    profile_free(p);
}

/* record -c: samples taken every 1000 page faults are events, not time.
 * Rows count events (weight x sample_period), the header and footer say so,
 * JSON has event/sample_period and null ns, CSV names its columns _events. */
static void test_event_leader(void)
{
    uint32_t sa, sb, th;
    struct profile *p = main_and_leaf("touch", &sa, &sb, &th);
    profile_add_sample(p, 1, th, sa, 1);
    profile_add_sample(p, 2, th, sa, 1);
    profile_add_sample(p, 3, th, sa, 1);
    profile_add_sample(p, 4, th, sb, 1);
    char *saved_event = p->event;
    p->event = (char *)"page-faults";
    p->period_ns = 0;
    p->frequency_hz = 0;
    p->sample_period = 1000;
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_FUNCTION, &t), 0);
    hotspots_sort(&t, SORT_SELF);
    CU_ASSERT_EQUAL(t.sample_period, 1000);
    CU_ASSERT_EQUAL(t.period_ns, 0);

    struct report_options o = {.format = FORMAT_CSV};
    struct capture c;
    capture_open(&c);
    report_print_table(c.f, p, &t, &o, NULL);
    CU_ASSERT_STRING_EQUAL(capture_text(&c),
        "name,module,self_pct,self_events,total_pct,total_events,samples\n"
        "touch,app,75.000,3000,75.000,3000,3\n"
        "main,app,25.000,1000,100.000,4000,4\n");
    capture_free(&c);

    o.format = FORMAT_TEXT;
    capture_open(&c);
    report_print_table(c.f, p, &t, &o, NULL);
    const char *text = capture_text(&c);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "  Self % Self events  Total % Total events  Samples"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "  75.0 %        3000   75.0 %         3000        3  touch"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "Self events total: 4000 page-faults (4 samples)\n"));
    CU_ASSERT_PTR_NULL(strstr(text, " ms"));
    capture_free(&c);

    o.format = FORMAT_JSON;
    capture_open(&c);
    report_print_table(c.f, p, &t, &o, NULL);
    text = capture_text(&c);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"period_ns\":0,\"total_weight\":4,\"lost_samples\":0,"
                                        "\"event\":\"page-faults\",\"sample_period\":1000,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"name\":\"touch\",\"module\":\"app\",\"self_pct\":75.000,"
                                        "\"self_events\":3000,\"self_ns\":null,\"total_pct\":75.000,"
                                        "\"total_events\":3000,\"total_ns\":null,\"samples\":3}"));
    capture_free(&c);

    capture_open(&c);
    report_print_header(c.f, p);
    text = capture_text(&c);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "event page-faults (one sample per 1000 events: shares are shares of "
                                        "page-faults, not time), user + kernel mode events\n"));
    CU_ASSERT_PTR_NULL(strstr(text, " Hz"));
    capture_free(&c);

    hotspots_free(&t);
    p->event = saved_event;
    profile_free(p);
}

void register_report_tests(void)
{
    CU_pSuite s = CU_add_suite("report", NULL, NULL);
    if (!s)
        return;
    CU_add_test(s, "format names", test_format_parse);
    CU_add_test(s, "text table with limit", test_text_table_limit);
    CU_add_test(s, "text widths, truncation and units", test_text_widths_and_units);
    CU_add_test(s, "durations at the sample period's precision", test_duration_precision);
    CU_add_test(s, "overhead line: handler CPU time, median and p99", test_overhead_line);
    CU_add_test(s, "overhead line: one clock read out of each timed call (AGENT_CPU estimate)",
                test_agent_cpu_estimate);
    CU_add_test(s, "text table without rows", test_text_empty);
    CU_add_test(s, "csv quoting", test_csv_quoting);
    CU_add_test(s, "json escaping", test_json_escaping);
    CU_add_test(s, "header of a clean recording", test_header_clean);
    CU_add_test(s, "header warnings", test_header_warnings);
    CU_add_test(s, "compute then csv", test_compute_then_csv);
    CU_add_test(s, "samples taken on an event (record -c)", test_event_leader);
}
