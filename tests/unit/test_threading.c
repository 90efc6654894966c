/*
 * tests/unit/test_threading.c — analyze/threading.c on profiles built in
 * memory: oversubscription from schedstat ticks (one process, and two that
 * oversubscribe only together), OMP ticks, worker samples charged to the
 * opener's calling context, the loader's region lookup with placeholder regions,
 * and the operator table's OpenMP runtime wait row.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "report/report.h"
#include "tests/unit/unit.h"

#define MS 1000000ull

/* Adds SCHED_TICK records for pid: nthreads threads, each running run_ms and
 * waiting wait_ms per 10 ms, for ticks ticks. */
static void add_sched(struct profile *p, uint32_t pid, unsigned nthreads, unsigned run_ms, unsigned wait_ms,
                      unsigned ticks)
{
    for (unsigned k = 0; k <= ticks; k++) {
        char body[sizeof(struct opr_sched_tick) + 8 * sizeof(struct opr_sched_thread)];
        struct opr_sched_tick t = {1000 * MS + k * 10 * MS, nthreads, 2, 2, 0};
        memcpy(body, &t, sizeof t);
        for (unsigned i = 0; i < nthreads; i++) {
            struct opr_sched_thread e = {pid + i, 0, (uint64_t)k * run_ms * MS, (uint64_t)k * wait_ms * MS, k, k};
            memcpy(body + sizeof t + i * sizeof e, &e, sizeof e);
        }
        threading_load_record(p, pid, OPR_REC_SCHED_TICK, body, sizeof t + nthreads * sizeof(struct opr_sched_thread));
    }
}

/* The threading section as report prints it (malloc'ed text; the caller
 * frees it), or NULL when it could not be printed. */
static char *threading_text(const struct profile *p, enum report_format format)
{
    char *text = NULL;
    size_t text_len = 0;
    FILE *out = open_memstream(&text, &text_len);
    if (!out)
        return NULL;
    int rc = report_print_threading(out, p, format);
    fclose(out);
    if (rc != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static void test_single_process_fits(void)
{
    struct profile *p = profile_new_empty();
    add_sched(p, 100, 2, 9, 1, 50); /* 2 threads ~busy on 2 CPUs */
    struct threading_summary s;
    CU_ASSERT_EQUAL_FATAL(threading_analyze(p, &s), 0);
    CU_ASSERT_TRUE(s.has_sched);
    CU_ASSERT_FALSE(s.has_ompt);
    CU_ASSERT_DOUBLE_EQUAL(s.usable_cpus, 2.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(s.runnable_avg, 2.0, 0.05);
    CU_ASSERT_DOUBLE_EQUAL(s.wait_share, 0.1, 0.01);
    CU_ASSERT_FALSE(s.oversubscribed);
    CU_ASSERT_EQUAL(s.nfindings, 0);
    CU_ASSERT_TRUE(strstr(s.view, "OS-level only") != NULL);
    CU_ASSERT_TRUE(s.nbuckets >= 50);
    threading_summary_free(&s);
    profile_free(p);
}

static void test_two_processes_together(void)
{
    struct profile *p = profile_new_empty();
    add_sched(p, 100, 2, 5, 5, 50); /* each: 2 runnable threads, half waiting */
    add_sched(p, 200, 2, 5, 5, 50);
    struct threading_summary s;
    CU_ASSERT_EQUAL_FATAL(threading_analyze(p, &s), 0);
    CU_ASSERT_DOUBLE_EQUAL(s.runnable_avg, 4.0, 0.1);
    CU_ASSERT_DOUBLE_EQUAL(s.oversub_avg, 2.0, 0.05);
    CU_ASSERT_DOUBLE_EQUAL(s.wait_share, 0.5, 0.01);
    CU_ASSERT_TRUE(s.oversubscribed);
    CU_ASSERT_TRUE(s.multi_process_oversub);
    CU_ASSERT_EQUAL(s.nprocesses, 2);
    CU_ASSERT_EQUAL_FATAL(s.nfindings, 1);
    CU_ASSERT_TRUE(strstr(s.findings[0], "across 2 processes") != NULL);
    CU_ASSERT_TRUE(strstr(s.findings[0], "OMP_NUM_THREADS=1") != NULL);
    threading_summary_free(&s);
    profile_free(p);
}

/* One of two worker processes finished early (beside two busy loops: 0.6 s
 * against 6.3 s), under a shell that only waits: both workers are processes
 * of the thread view, the shell is not. The early one holds 7 % of the
 * runnable time, below the 10 % that alone makes a process count. */
static void test_early_finisher_counts(void)
{
    struct profile *p = profile_new_empty();
    add_sched(p, 100, 2, 5, 5, 100); /* 1 s, 2 runnable threads */
    add_sched(p, 200, 2, 5, 5, 8);   /* done after 80 ms */
    add_sched(p, 300, 1, 0, 0, 100); /* the shell, waiting for its children */
    struct threading_summary s;
    CU_ASSERT_EQUAL_FATAL(threading_analyze(p, &s), 0);
    CU_ASSERT_EQUAL(s.nprocesses, 2);
    threading_summary_free(&s);
    profile_free(p);
}

static void test_omp_ticks(void)
{
    struct profile *p = profile_new_empty();
    add_sched(p, 100, 4, 5, 5, 10);
    for (unsigned k = 1; k <= 10; k++) {
        /* 4 threads in bodies 75 % of each 10 ms; 100 regions of 100 us, team 4 */
        /* 3 events lost in each tick; the odd ticks as a stream from before
         * events_lost wrote them (a shorter body: read as none lost) */
        struct opr_omp_tick t = {
            1000 * MS + k * 10 * MS, 10 * MS, 30 * MS, 40 * MS, 10 * MS, 100, 100, 4, 4, 1, 4, 3, 0};
        threading_load_record(p, 100, OPR_REC_OMP_TICK, (const char *)&t, k % 2 ? OPR_OMP_TICK_MIN_BYTES : sizeof t);
    }
    struct { struct opr_omp_info i; char text[8]; } info = {{0, 201611, 4}, "test"};
    threading_load_record(p, 100, OPR_REC_OMP_INFO, (const char *)&info, sizeof info.i + 4);
    struct threading_summary s;
    CU_ASSERT_EQUAL_FATAL(threading_analyze(p, &s), 0);
    CU_ASSERT_TRUE(s.has_ompt);
    CU_ASSERT_EQUAL(s.regions, 1000);
    CU_ASSERT_DOUBLE_EQUAL(s.region_avg_us, 100.0, 0.01);
    CU_ASSERT_DOUBLE_EQUAL(s.active_max, 3.0, 0.01);
    CU_ASSERT_DOUBLE_EQUAL(s.imbalance, 0.25, 0.001);
    CU_ASSERT_EQUAL(s.max_team, 4);
    CU_ASSERT_EQUAL(s.nested, 10);
    CU_ASSERT_EQUAL(s.omp_events_lost, 15);
    char *text = threading_text(p, FORMAT_TEXT);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_TRUE(strstr(text, "lost          15 region begin/end events") != NULL); /* shown, not only counted */
    free(text);
    CU_ASSERT_TRUE(strstr(s.view, "OMPT (test)") != NULL);
    bool nested_finding = false;
    for (size_t i = 0; i < s.nfindings; i++)
        nested_finding = nested_finding || strstr(s.findings[i], "Nested parallelism") != NULL;
    CU_ASSERT_TRUE(nested_finding);
    threading_summary_free(&s);
    profile_free(p);
}

/* A process (pid 100) whose thread 100 opened region 7 (two threads) from
 * opener_fn, called by main; thread 101 is a worker. The opener's stack
 * (os) runs the outlined body under the runtime's fork entry. */
struct opener_fixture {
    struct profile *p;
    uint32_t body, invoke, opener, mainf; /* frames */
    uint32_t os;                          /* the opener's stack */
    uint32_t t_open, t_work;              /* threads */
    uint32_t region;                      /* region 7's index */
    size_t sorted;                        /* for threading_region_lookup */
};

static void opener_fixture_make(struct opener_fixture *f)
{
    struct profile *p = f->p = profile_new_empty();
    f->body = profile_add_frame(p, "work._omp_fn.0", "prog", NULL, 0, FRAME_NATIVE);
    f->invoke = profile_add_frame(p, "__kmp_invoke_microtask", "libomp.so.5", NULL, 0, FRAME_NATIVE);
    uint32_t fork = profile_add_frame(p, "GOMP_parallel", "libomp.so.5", NULL, 0, FRAME_NATIVE);
    f->opener = profile_add_frame(p, "opener_fn", "prog", NULL, 0, FRAME_NATIVE);
    f->mainf = profile_add_frame(p, "main", "prog", NULL, 0, FRAME_NATIVE);
    uint32_t os_frames[] = {f->body, f->invoke, fork, f->opener, f->mainf};
    f->os = profile_add_stack(p, os_frames, 5);
    f->t_open = profile_add_thread(p, 100, 100, "prog");
    f->t_work = profile_add_thread(p, 100, 101, "prog");
    struct opr_omp_region r = {7, 0, 1000, 5000, 100, 2, 2, 0};
    threading_load_record(p, 100, OPR_REC_OMP_REGION, (const char *)&r, sizeof r);
    f->sorted = 0;
    f->region = threading_region_lookup(p, 0, &f->sorted, 100, 7);
}

static void test_worker_charged_to_opener(void)
{
    struct opener_fixture fx;
    opener_fixture_make(&fx);
    struct profile *p = fx.p;
    uint32_t body = fx.body, invoke = fx.invoke, opener = fx.opener, mainf = fx.mainf;
    uint32_t os = fx.os, t_open = fx.t_open, t_work = fx.t_work, idx = fx.region;
    uint32_t start = profile_add_frame(p, "start_thread", "libc.so.6", NULL, 0, FRAME_NATIVE);
    uint32_t wait = profile_add_frame(p, "__kmp_wait_template", "libomp.so.5", NULL, 0, FRAME_NATIVE);
    uint32_t yield = profile_add_frame(p, "sched_yield", "libc.so.6", NULL, 0, FRAME_NATIVE);
    uint32_t ws_frames[] = {body, invoke, start};
    uint32_t spin_frames[] = {wait, invoke, start};
    uint32_t yield_frames[] = {yield, wait, invoke, start}; /* the runtime's wait loop calling libc */
    uint32_t ws = profile_add_stack(p, ws_frames, 3);
    uint32_t spin = profile_add_stack(p, spin_frames, 3);
    uint32_t yields = profile_add_stack(p, yield_frames, 4);
    size_t sorted = fx.sorted;
    CU_ASSERT_EQUAL(idx, 1);
    uint32_t placeholder = threading_region_lookup(p, 0, &sorted, 100, 9); /* no REGION record */
    CU_ASSERT_EQUAL(placeholder, 2);
    CU_ASSERT_EQUAL(threading_region_lookup(p, 0, &sorted, 100, 9), 2);
    profile_add_sample(p, 2000, t_open, os, 1);
    profile_add_sample(p, 2100, t_work, ws, 1);
    profile_add_sample(p, 2200, t_work, spin, 1);
    profile_add_sample(p, 2300, t_work, ws, 1);
    profile_add_sample(p, 2400, t_work, yields, 1);
    p->samples[0].omp_region = idx;
    p->samples[1].omp_region = idx;
    p->samples[2].omp_region = idx;
    p->samples[3].omp_region = placeholder; /* opener unknown: left alone */
    p->samples[4].omp_region = idx;
    CU_ASSERT_EQUAL(threading_attribute(p), 3);
    CU_ASSERT_EQUAL(p->threading->attributed_exact, 3);
    CU_ASSERT_EQUAL(p->threading->unrecorded, 1); /* counted, not charged */
    const struct prof_stack *g = &p->stacks[p->samples[1].stack];
    CU_ASSERT_EQUAL_FATAL(g->nframes, 3);
    CU_ASSERT_EQUAL(g->frames[0], body);
    CU_ASSERT_EQUAL(g->frames[1], opener);
    CU_ASSERT_EQUAL(g->frames[2], mainf);
    const struct prof_stack *sp = &p->stacks[p->samples[2].stack];
    CU_ASSERT_EQUAL_FATAL(sp->nframes, 3);
    CU_ASSERT_EQUAL(sp->frames[0], wait); /* spinning: the runtime leaf stays */
    CU_ASSERT_EQUAL(sp->frames[1], opener);
    const struct prof_stack *ys = &p->stacks[p->samples[4].stack];
    CU_ASSERT_EQUAL_FATAL(ys->nframes, 4);
    CU_ASSERT_EQUAL(ys->frames[0], yield); /* the call and the runtime frame that made it */
    CU_ASSERT_EQUAL(ys->frames[1], wait);
    CU_ASSERT_EQUAL(ys->frames[2], opener);
    CU_ASSERT_EQUAL(p->samples[0].stack, os);
    CU_ASSERT_EQUAL(p->samples[3].stack, ws);
    struct threading_summary s;
    CU_ASSERT_EQUAL_FATAL(threading_analyze(p, &s), 0);
    CU_ASSERT_EQUAL(s.region_samples, 5);
    CU_ASSERT_EQUAL(s.spin_samples, 2); /* sched_yield called by the runtime is spin too */
    CU_ASSERT_EQUAL(s.unrecorded, 1);
    char *text = threading_text(p, FORMAT_JSON);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_TRUE(strstr(text, "\"in_unrecorded_regions\": 1,") != NULL);
    free(text);
    /* the text says it too, once the result has the sections it is in */
    add_sched(p, 100, 2, 5, 5, 2);
    struct {
        struct opr_omp_info i;
        char text[8];
    } info = {{0, 201611, 4}, "test"};
    threading_load_record(p, 100, OPR_REC_OMP_INFO, (const char *)&info, sizeof info.i + 4);
    text = threading_text(p, FORMAT_TEXT);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_TRUE(strstr(text, "1 samples in regions whose begin event was lost: not charged") != NULL);
    free(text);
    CU_ASSERT_TRUE(s.nops >= 1);
    CU_ASSERT_STRING_EQUAL(s.ops[0].name, "opener_fn");
    /* the worker sample whose opener is unknown (its stack ends in the
     * thread's start): named after the function its GCC body came from,
     * not "start_thread" */
    bool work_named = false;
    for (size_t i = 0; i < s.nops; i++) {
        CU_ASSERT_STRING_NOT_EQUAL(s.ops[i].name, "start_thread");
        work_named = work_named || strcmp(s.ops[i].name, "work") == 0;
    }
    CU_ASSERT_TRUE(work_named);
    threading_summary_free(&s);
    profile_free(p);
}

/* A worker's stack that unwinding left inside the runtime (sched_yield <-
 * __kmp_wait, nothing rootward) names no operator: its samples go to the
 * region's opener, named by another sample of the same region, not to
 * "sched_yield". */
static void test_truncated_worker_named_by_region(void)
{
    struct opener_fixture fx;
    opener_fixture_make(&fx);
    struct profile *p = fx.p;
    uint32_t yield = profile_add_frame(p, "sched_yield", "libc.so.6", NULL, 0, FRAME_NATIVE);
    uint32_t wait = profile_add_frame(p, "__kmp_wait_template", "libomp.so.5", NULL, 0, FRAME_NATIVE);
    uint32_t cut_frames[] = {yield, wait};
    uint32_t cut = profile_add_stack(p, cut_frames, 2);
    uint32_t os = fx.os, t_open = fx.t_open, t_work = fx.t_work, idx = fx.region;
    size_t sorted = fx.sorted;
    uint32_t other = threading_region_lookup(p, 0, &sorted, 100, 9); /* a region nobody names */
    for (int i = 0; i < 3; i++)
        profile_add_sample(p, 2100 + 100 * (uint64_t)i, t_work, cut, 1);
    profile_add_sample(p, 2500, t_open, os, 1);
    profile_add_sample(p, 2600, t_work, cut, 1);
    for (size_t i = 0; i < 4; i++)
        p->samples[i].omp_region = idx;
    p->samples[4].omp_region = other;
    struct threading_summary s;
    CU_ASSERT_EQUAL_FATAL(threading_analyze(p, &s), 0);
    CU_ASSERT_EQUAL(s.region_samples, 5);
    CU_ASSERT_EQUAL_FATAL(s.nops, 2);
    CU_ASSERT_STRING_EQUAL(s.ops[0].name, "opener_fn");
    CU_ASSERT_EQUAL(s.ops[0].samples, 4);
    CU_ASSERT_STRING_EQUAL(s.ops[1].name, "sched_yield"); /* nothing better known */
    threading_summary_free(&s);
    profile_free(p);
}

/* A region whose REGION record says CONTEXT_REPEATED and that has no
 * OMP_CONTEXT of its own: its worker samples get the opener's own latest
 * context before it (by region id), not a later one, not another thread's,
 * and count as exact. The ticks' contexts_repeated count as contexts. */
static void test_repeated_context_from_opener(void)
{
    struct opener_fixture fx;
    opener_fixture_make(&fx);
    struct profile *p = fx.p;
    uint32_t start = profile_add_frame(p, "start_thread", "libc.so.6", NULL, 0, FRAME_NATIVE);
    uint32_t later = profile_add_frame(p, "later_fn", "prog", NULL, 0, FRAME_NATIVE);
    uint32_t stranger = profile_add_frame(p, "stranger_fn", "prog", NULL, 0, FRAME_NATIVE);
    uint32_t ws_frames[] = {fx.body, fx.invoke, start};
    uint32_t later_frames[] = {fx.body, fx.invoke, later, fx.mainf};
    uint32_t stranger_frames[] = {fx.body, fx.invoke, stranger, fx.mainf};
    uint32_t ws = profile_add_stack(p, ws_frames, 3);
    uint32_t ls = profile_add_stack(p, later_frames, 4);
    uint32_t ss = profile_add_stack(p, stranger_frames, 4);
    /* opener 100's full contexts at regions 5 (opener_fn) and 9 (later_fn);
     * thread 102's at region 7, nearer in id and time to region 8 */
    CU_ASSERT_EQUAL(threading_add_context(p, 100, 100, 5, 500, fx.os), 0);
    CU_ASSERT_EQUAL(threading_add_context(p, 100, 100, 9, 9000, ls), 0);
    CU_ASSERT_EQUAL(threading_add_context(p, 100, 102, 7, 7900, ss), 0);
    struct opr_omp_region r8 = {8, 0, 8000, 8800, 100, 2, 2, OPR_OMP_REGION_CONTEXT_REPEATED};
    threading_load_record(p, 100, OPR_REC_OMP_REGION, (const char *)&r8, sizeof r8);
    struct opr_omp_region r10 = {10, 0, 10000, 10800, 100, 2, 2, 0}; /* not repeated, no context */
    threading_load_record(p, 100, OPR_REC_OMP_REGION, (const char *)&r10, sizeof r10);
    size_t sorted = 0;
    uint32_t i8 = threading_region_lookup(p, 0, &sorted, 100, 8);
    uint32_t i10 = threading_region_lookup(p, 0, &sorted, 100, 10);
    profile_add_sample(p, 8400, fx.t_work, ws, 1);
    profile_add_sample(p, 10400, fx.t_work, ws, 1);
    p->samples[0].omp_region = i8;
    p->samples[1].omp_region = i10;
    CU_ASSERT_EQUAL(threading_attribute(p), 2);
    CU_ASSERT_EQUAL(p->threading->attributed_exact, 1);
    CU_ASSERT_EQUAL(p->threading->attributed_near, 1); /* region 10: the nearest context in time */
    const struct prof_stack *g = &p->stacks[p->samples[0].stack];
    CU_ASSERT_EQUAL_FATAL(g->nframes, 3);
    CU_ASSERT_EQUAL(g->frames[0], fx.body);
    CU_ASSERT_EQUAL(g->frames[1], fx.opener); /* region 5's, not 9's later_fn nor 102's stranger_fn */
    CU_ASSERT_EQUAL(g->frames[2], fx.mainf);
    struct opr_omp_tick t = {10 * MS, 10 * MS, 0, 0, 0, 3, 3, 2, 2, 0, 2, 0, 1};
    threading_load_record(p, 100, OPR_REC_OMP_TICK, (const char *)&t, sizeof t);
    struct threading_summary sum;
    CU_ASSERT_EQUAL_FATAL(threading_analyze(p, &sum), 0);
    CU_ASSERT_EQUAL(sum.contexts, 4); /* 3 records + 1 repeated */
    CU_ASSERT_EQUAL(sum.contexts_repeated, 1);
    threading_summary_free(&sum);
    profile_free(p);
}

/* OpenMP runtime wait is no operator's self time: the opener's fork/join
 * inside aten::_softmax (marked outside a body by the agent, or a leaf in the
 * runtime's wait code) and a worker's wait between regions go to
 * OMP_RUNTIME_WAIT_NAME; the operator keeps them in its total. Samples of one
 * stack split by their own flag. */
static void test_group_by_op_runtime_wait(void)
{
    struct profile *p = profile_new_empty();
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const char *cpu = "libtorch_cpu.so";
    uint32_t gomp = profile_add_frame(p, "libgomp.so.1.0.0+0x1f5e0", "libgomp.so.1.0.0", NULL, 0, FRAME_UNKNOWN);
    uint32_t barrier = profile_add_frame(p, "gomp_team_barrier_wait_end", "libgomp.so.1.0.0", NULL, 0, FRAME_NATIVE);
    uint32_t par = profile_add_frame(p, "GOMP_parallel", "libopprof_agent.so", NULL, 0, FRAME_NATIVE);
    uint32_t kern = profile_add_frame(p, "at::native::softmax_lastdim_kernel", cpu, NULL, 0, FRAME_NATIVE);
    uint32_t op = profile_add_frame(p, "at::_ops::_softmax::call(at::Tensor const&, long, bool)", cpu, NULL, 0,
                                    FRAME_NATIVE);
    uint32_t line = profile_add_frame(p, "step", "train.py", "/home/u/train.py", 7, FRAME_PYTHON);
    uint32_t start = profile_add_frame(p, "start_thread", "libc.so.6", NULL, 0, FRAME_NATIVE);
    uint32_t join[] = {gomp, par, kern, op, line};
    uint32_t body[] = {kern, op, line};
    uint32_t idle[] = {gomp, start};
    uint32_t named_wait[] = {barrier, start};
    uint32_t t0 = profile_add_thread(p, 10, 10, "python3"), t1 = profile_add_thread(p, 10, 11, "python3");
    uint32_t sj = profile_add_stack(p, join, 5), sb = profile_add_stack(p, body, 3);
    uint32_t si = profile_add_stack(p, idle, 2), sn = profile_add_stack(p, named_wait, 2);
    struct {
        uint32_t thread, stack, weight;
        bool outside;
    } sm[] = {
        {t0, sj, 2, true}, {t0, sj, 1, false}, /* the same stack, once in the join, once not marked */
        {t0, sb, 5, false}, {t1, si, 4, true}, {t1, sn, 1, false}, /* the last: by the runtime's symbol */
    };
    for (size_t i = 0; i < sizeof sm / sizeof sm[0]; i++) {
        CU_ASSERT_EQUAL_FATAL(profile_add_sample(p, i + 1, sm[i].thread, sm[i].stack, sm[i].weight), 0);
        if (sm[i].outside)
            p->samples[p->nsamples - 1].omp_region = THREADING_OUTSIDE_BODY;
    }
    p->period_ns = 1000000;
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_OP, &t), 0);
    const struct hotspot_row *softmax = NULL, *wait = NULL, *none = NULL;
    uint64_t self = 0;
    for (size_t i = 0; i < t.nrows; i++) {
        const char *n = t.rows[i].name;
        softmax = strcmp(n, "aten::_softmax") ? softmax : &t.rows[i];
        wait = strcmp(n, OMP_RUNTIME_WAIT_NAME) ? wait : &t.rows[i];
        none = strcmp(n, NO_OPERATOR_NAME) ? none : &t.rows[i];
        self += t.rows[i].self;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(softmax);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wait);
    CU_ASSERT_EQUAL(softmax->self, 6);  /* body 5 + the unmarked join sample */
    CU_ASSERT_EQUAL(softmax->total, 8); /* + the join's 2 */
    CU_ASSERT_EQUAL(wait->self, 7);
    CU_ASSERT_EQUAL(wait->total, 7);
    CU_ASSERT_PTR_NULL(none);
    CU_ASSERT_EQUAL(self, 13);
    CU_ASSERT(is_no_operator_row(OMP_RUNTIME_WAIT_NAME));
    hotspots_free(&t);
    profile_free(p);
}

void register_threading_tests(void)
{
    CU_pSuite s = CU_add_suite("threading", NULL, NULL);
    CU_add_test(s, "one process on its CPUs: not flagged", test_single_process_fits);
    CU_add_test(s, "two processes oversubscribe together", test_two_processes_together);
    CU_add_test(s, "a worker process that finished early still counts", test_early_finisher_counts);
    CU_add_test(s, "OMP ticks: regions, active threads, imbalance, nesting", test_omp_ticks);
    CU_add_test(s, "worker samples charged to the opener", test_worker_charged_to_opener);
    CU_add_test(s, "truncated worker stacks named by their region", test_truncated_worker_named_by_region);
    CU_add_test(s, "a repeated context is the opener's previous one", test_repeated_context_from_opener);
    CU_add_test(s, "group by op: OpenMP runtime wait is its own row", test_group_by_op_runtime_wait);
}
