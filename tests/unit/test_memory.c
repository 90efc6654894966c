/*
 * tests/unit/test_memory.c — memory over time (analyze/memory.c,
 * analyze/memory_tables.c): the charging arithmetic on hand-made readings and
 * samples, and the Memory section's figures on a hand-built profile.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "tests/unit/unit.h"

#define MS 1000000ull
#define MIB (1024.0 * 1024.0)

static struct opr_mem_tick tick(uint64_t t_ms, uint64_t since_ms, uint64_t rss)
{
    return (struct opr_mem_tick){.time_ns = t_ms * MS, .since_ns = since_ms * MS, .rss_bytes = rss,
                                 .anon_bytes = rss, .file_bytes = 0};
}

/* Growth splits over the interval's samples by weight; the first reading is
 * the baseline. */
static void test_split_by_weight(void)
{
    struct opr_mem_tick t[] = {tick(10, 0, 1000), tick(20, 10, 4000), tick(30, 20, 4000)};
    struct memory_sample_time s[] = {{5 * MS, 1}, {12 * MS, 1}, {15 * MS, 2}, {25 * MS, 1}};
    double grown[4] = {0}, released[4] = {0}, ug = 0, ur = 0;
    memory_charge(t, 3, s, 4, grown, released, &ug, &ur);
    CU_ASSERT_DOUBLE_EQUAL(grown[0], 0, 1e-9);    /* before the baseline */
    CU_ASSERT_DOUBLE_EQUAL(grown[1], 1000, 1e-9); /* 3000 x 1/3 */
    CU_ASSERT_DOUBLE_EQUAL(grown[2], 2000, 1e-9); /* 3000 x 2/3 */
    CU_ASSERT_DOUBLE_EQUAL(grown[3], 0, 1e-9);    /* no change in its interval */
    CU_ASSERT_DOUBLE_EQUAL(ug, 0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(ur, 0, 1e-9);
}

/* Readings with no change are not written: the record after them carries
 * since_ns, and a sample between the earlier record and since_ns is not
 * charged (the RSS had not moved yet). A sample exactly at a reading's time
 * belongs to the interval that ends there. */
static void test_since_ns_bounds_interval(void)
{
    struct opr_mem_tick t[] = {tick(10, 0, 1000), tick(100, 90, 2000)};
    struct memory_sample_time s[] = {{50 * MS, 5}, {90 * MS, 1}, {95 * MS, 1}, {100 * MS, 2}};
    double grown[4] = {0}, released[4] = {0}, ug = 0, ur = 0;
    memory_charge(t, 2, s, 4, grown, released, &ug, &ur);
    CU_ASSERT_DOUBLE_EQUAL(grown[0], 0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(grown[1], 0, 1e-9); /* at since_ns: the interval is (since, time] */
    CU_ASSERT_DOUBLE_EQUAL(grown[2], 1000.0 / 3, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(grown[3], 2000.0 / 3, 1e-9);
}

/* Shrinking goes to released (positive); intervals without samples are
 * unattributed, growth and shrinking apart; the charges add up to the change. */
static void test_release_and_unattributed(void)
{
    struct opr_mem_tick t[] = {tick(10, 0, 5000), tick(20, 10, 8000), tick(30, 20, 2000), tick(40, 30, 2500)};
    struct memory_sample_time s[] = {{15 * MS, 1}, {25 * MS, 1}, {28 * MS, 3}};
    double grown[3] = {0}, released[3] = {0}, ug = 0, ur = 0;
    memory_charge(t, 4, s, 3, grown, released, &ug, &ur);
    CU_ASSERT_DOUBLE_EQUAL(grown[0], 3000, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(released[1], 1500, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(released[2], 4500, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(ug, 500, 1e-9); /* 30-40 ms: no sample */
    CU_ASSERT_DOUBLE_EQUAL(ur, 0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(grown[0] + ug - released[1] - released[2], 2500.0 - 5000.0, 1e-9);
}

/* memory_analyze on a hand-built profile: peak and when, faults between the
 * first and last reading, growth by function (self = leaf, total = anywhere
 * once) and by Python line, and the cgroup-limit finding. */
static void test_analyze_tables(void)
{
    struct profile *p = profile_new_empty();
    CU_ASSERT_FATAL(p != NULL);
    p->start_ns = 50 * MS; /* the recording began 50 ms before the first reading */
    uint32_t f_main = profile_add_frame(p, "main", "prog", NULL, 0, FRAME_NATIVE);
    uint32_t f_grow = profile_add_frame(p, "grow_here", "prog", NULL, 0, FRAME_NATIVE);
    uint32_t f_memset = profile_add_frame(p, "memset", "libc.so.6", NULL, 0, FRAME_NATIVE);
    uint32_t f_line = profile_add_frame(p, "load", "app.py", "/x/app.py", 7, FRAME_PYTHON);
    uint32_t s1[] = {f_memset, f_grow, f_main}, s2[] = {f_grow, f_main}, s3[] = {f_memset, f_line, f_main};
    uint32_t st1 = profile_add_stack(p, s1, 3), st2 = profile_add_stack(p, s2, 2), st3 = profile_add_stack(p, s3, 3);
    p->memory = calloc(1, sizeof *p->memory);
    struct prof_memory *m = p->memory;
    m->streams = calloc(1, sizeof *m->streams);
    m->nstreams = m->streams_cap = 1;
    struct prof_memory_stream *ms = &m->streams[0];
    ms->pid = 42;
    ms->ticks = calloc(3, sizeof *ms->ticks);
    ms->nticks = ms->ticks_cap = 3;
    ms->ticks[0] = tick(100, 0, 10 * 1048576);
    ms->ticks[1] = tick(600, 590, 95 * 1048576);
    ms->ticks[1].anon_bytes = 90 * 1048576;
    ms->ticks[1].file_bytes = 5 * 1048576;
    ms->ticks[1].minflt = 300;
    ms->ticks[2] = tick(900, 890, 20 * 1048576);
    ms->ticks[2].minflt = 310;
    ms->ticks[2].majflt = 2000; /* x 100 us assumed = 0.2 s of the 0.8 s between readings */
    ms->has_limit = true;
    ms->limit.limit_bytes = 100 * 1048576;
    ms->limit.version = 2;
    ms->cgroup = strdup("/job");
    m->charges = calloc(3, sizeof *m->charges);
    m->ncharges = m->charges_cap = 3;
    m->charges[0] = (struct prof_memory_charge){st1, 60 * MIB, 0};
    m->charges[1] = (struct prof_memory_charge){st2, 20 * MIB, 0};
    m->charges[2] = (struct prof_memory_charge){st3, 5 * MIB, 75 * MIB};

    struct memory_summary s;
    CU_ASSERT_FATAL(memory_analyze(p, &s) == 0);
    CU_ASSERT_EQUAL_FATAL(s.nprocs, 1);
    CU_ASSERT_EQUAL(s.procs[0].peak_rss, 95 * 1048576ull);
    CU_ASSERT_DOUBLE_EQUAL(s.procs[0].peak_s, 0.55, 1e-9);
    CU_ASSERT_EQUAL(s.procs[0].anon_at_peak, 90 * 1048576ull);
    CU_ASSERT_EQUAL(s.procs[0].minflt, 310);
    CU_ASSERT_DOUBLE_EQUAL(s.procs[0].grown, 85 * MIB, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(s.procs[0].released, 75 * MIB, 1e-6);
    const struct memory_row *grow = NULL, *memset_row = NULL, *main_row = NULL;
    for (size_t i = 0; i < s.nrows[MEMORY_BY_FUNCTION]; i++) {
        const struct memory_row *r = &s.rows[MEMORY_BY_FUNCTION][i];
        if (!strcmp(r->name, "grow_here"))
            grow = r;
        else if (!strcmp(r->name, "memset"))
            memset_row = r;
        else if (!strcmp(r->name, "main"))
            main_row = r;
    }
    CU_ASSERT_FATAL(grow && memset_row && main_row);
    CU_ASSERT_DOUBLE_EQUAL(grow->self_grown, 20 * MIB, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(grow->total_grown, 80 * MIB, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(memset_row->self_grown, 65 * MIB, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(memset_row->released, 75 * MIB, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(main_row->total_grown, 85 * MIB, 1e-6);
    CU_ASSERT_STRING_EQUAL(s.rows[MEMORY_BY_FUNCTION][0].name, "memset"); /* most memory moved */
    CU_ASSERT_EQUAL_FATAL(s.nrows[MEMORY_BY_LINE], 1);
    CU_ASSERT_STRING_EQUAL(s.rows[MEMORY_BY_LINE][0].name, "/x/app.py:7");
    CU_ASSERT_DOUBLE_EQUAL(s.rows[MEMORY_BY_LINE][0].self_grown, 5 * MIB, 1e-6);
    CU_ASSERT_EQUAL(s.procs[0].majflt, 2000);
    CU_ASSERT_EQUAL_FATAL(s.nfindings, 2); /* major faults 25 % of the time; 95 of 100 MiB: near the limit */
    CU_ASSERT(strstr(s.findings[0].text, "2000 major page faults") != NULL);
    CU_ASSERT(strstr(s.findings[0].text, "25%") != NULL);
    CU_ASSERT(strstr(s.findings[1].text, "cgroup memory limit") != NULL);
    memory_summary_free(&s);
    profile_free(p);
}

/* The agent's resident bytes come out of the workload's: the anonymous part
 * (sample ring, tables compiled in memory) out of anon, the file-backed part
 * (tables mapped from the cache) out of file; damaged figures (the agent
 * larger than the RSS, its file part larger than itself or than file) end
 * at 0, never wrap. */
static void test_tick_without_agent(void)
{
    const uint64_t M = 1048576;
    struct opr_mem_tick t = {.rss_bytes = 300 * M, .anon_bytes = 200 * M, .file_bytes = 100 * M,
                             .agent_bytes = 50 * M, .agent_file_bytes = 30 * M};
    memory_tick_without_agent(&t);
    CU_ASSERT_EQUAL(t.rss_bytes, 250 * M);
    CU_ASSERT_EQUAL(t.anon_bytes, 180 * M);
    CU_ASSERT_EQUAL(t.file_bytes, 70 * M);
    struct opr_mem_tick old = {.rss_bytes = 300 * M, .anon_bytes = 200 * M, .file_bytes = 100 * M,
                               .agent_bytes = 50 * M}; /* a 72-byte record: no file part */
    memory_tick_without_agent(&old);
    CU_ASSERT_EQUAL(old.anon_bytes, 150 * M);
    CU_ASSERT_EQUAL(old.file_bytes, 100 * M);
    struct opr_mem_tick bad = {.rss_bytes = 10 * M, .anon_bytes = 4 * M, .file_bytes = 6 * M,
                               .agent_bytes = 40 * M, .agent_file_bytes = 90 * M};
    memory_tick_without_agent(&bad); /* agent -> 10 MiB, all of it file-backed: file 6 -> 0 */
    CU_ASSERT_EQUAL(bad.rss_bytes, 0);
    CU_ASSERT_EQUAL(bad.anon_bytes, 4 * M);
    CU_ASSERT_EQUAL(bad.file_bytes, 0);
}

/* statm's line as the agent parses it at every writer period (pread of a
 * kept-open /proc/self/statm), and text that is not statm's. */
static void test_parse_statm(void)
{
    long page = sysconf(_SC_PAGESIZE);
    struct opr_mem_tick t = {0};
    CU_ASSERT_EQUAL(opr_memory_parse_statm("65000 1200 300 500 0 9000 0\n", &t), 0);
    CU_ASSERT_EQUAL(t.rss_bytes, 1200ull * (uint64_t)page);
    CU_ASSERT_EQUAL(t.file_bytes, 300ull * (uint64_t)page);
    CU_ASSERT_EQUAL(t.anon_bytes, 900ull * (uint64_t)page);
    /* shared above resident (a moment between two counter updates): file capped at the RSS */
    CU_ASSERT_EQUAL(opr_memory_parse_statm("10 5 7 1 0 2 0\n", &t), 0);
    CU_ASSERT_EQUAL(t.file_bytes, 5ull * (uint64_t)page);
    CU_ASSERT_EQUAL(t.anon_bytes, 0);
    /* not statm: another file read through a reused descriptor, or a short read */
    struct opr_mem_tick u = {.rss_bytes = 42};
    CU_ASSERT_EQUAL(opr_memory_parse_statm("Name:\tpython3\n", &u), -1);
    CU_ASSERT_EQUAL(opr_memory_parse_statm("65000 1200", &u), -1);
    CU_ASSERT_EQUAL(opr_memory_parse_statm("", &u), -1);
    CU_ASSERT_EQUAL(u.rss_bytes, 42);
    /* the file itself, read by name: this process has some resident memory */
    struct opr_mem_tick v = {0};
    CU_ASSERT_EQUAL(opr_memory_read_statm("/proc/self", &v), 0);
    CU_ASSERT(v.rss_bytes > 0);
}

void register_memory_tests(void)
{
    CU_pSuite s = CU_add_suite("memory", NULL, NULL);
    CU_add_test(s, "growth split over the interval's samples by weight", test_split_by_weight);
    CU_add_test(s, "since_ns bounds the interval of a change", test_since_ns_bounds_interval);
    CU_add_test(s, "released and unattributed changes", test_release_and_unattributed);
    CU_add_test(s, "peak, faults, growth tables, major-fault and cgroup findings", test_analyze_tables);
    CU_add_test(s, "statm parsed from its text; other text refused", test_parse_statm);
    CU_add_test(s, "the agent's own memory out of anon and file", test_tick_without_agent);
}
