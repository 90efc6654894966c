/*
 * tests/unit/test_hotspots.c — self/total/neighbour aggregation on small
 * hand-built profiles whose expected numbers are worked out in the comments.
 *
 * Profiles are made with the profile_add_* builders only. Fields the builders
 * do not cover (processes) are pointed at test-owned storage and restored
 * before profile_free, so these tests do not depend on how the model frees
 * its memory.
 */
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "analyze/analyze.h"
#include "tests/unit/unit.h"

/*
 * The fixture. Frames (name, module):
 *   main(app, app.c:10)  A(app, a.c:20)  A'(app, a.c:15: a second PC in A)
 *   B(app, no line)      C(libc.so.6)    A(libx.so: same name, other module)
 * Stacks, leaf first, and their samples (thread, weight):
 *   s0 [A, main]           t0 w3
 *   s1 [B, A', main]       t1 w1, t1 w1
 *   s2 [A, B, A', main]    t0 w2          (recursion: A twice)
 *   s3 [C, B, main]        t1 w1
 *   s4 [A@libx, main]      t1 w1
 * Total weight 9 in 6 samples.
 */
static struct profile *make_fixture(void)
{
    struct profile *p = profile_new_empty();
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    uint32_t fmain = profile_add_frame(p, "main", "app", "app.c", 10, FRAME_NATIVE);
    uint32_t fa = profile_add_frame(p, "A", "app", "a.c", 20, FRAME_NATIVE);
    uint32_t fa2 = profile_add_frame(p, "A", "app", "a.c", 15, FRAME_NATIVE);
    uint32_t fb = profile_add_frame(p, "B", "app", NULL, 0, FRAME_NATIVE);
    uint32_t fc = profile_add_frame(p, "C", "libc.so.6", NULL, 0, FRAME_NATIVE);
    uint32_t fax = profile_add_frame(p, "A", "libx.so", NULL, 0, FRAME_NATIVE);
    uint32_t st0[] = {fa, fmain};
    uint32_t st1[] = {fb, fa2, fmain};
    uint32_t st2[] = {fa, fb, fa2, fmain};
    uint32_t st3[] = {fc, fb, fmain};
    uint32_t st4[] = {fax, fmain};
    uint32_t s0 = profile_add_stack(p, st0, 2);
    uint32_t s1 = profile_add_stack(p, st1, 3);
    uint32_t s2 = profile_add_stack(p, st2, 4);
    uint32_t s3 = profile_add_stack(p, st3, 3);
    uint32_t s4 = profile_add_stack(p, st4, 2);
    uint32_t t0 = profile_add_thread(p, 100, 100, "main");
    uint32_t t1 = profile_add_thread(p, 100, 101, "worker");
    (void)profile_add_thread(p, 200, 200, "idle"); /* no samples: no row */
    profile_add_sample(p, 1, t0, s0, 3);
    profile_add_sample(p, 2, t1, s1, 1);
    profile_add_sample(p, 3, t1, s1, 1);
    profile_add_sample(p, 4, t0, s2, 2);
    profile_add_sample(p, 5, t1, s3, 1);
    profile_add_sample(p, 6, t1, s4, 1);
    p->period_ns = 1000000;
    return p;
}

/* The row with this name (and module, when module is not NULL). */
static const struct hotspot_row *find_row(const struct hotspot_table *t, const char *name,
                                          const char *module)
{
    for (size_t i = 0; i < t->nrows; i++)
        if (strcmp(t->rows[i].name, name) == 0 &&
            (!module || (t->rows[i].module && strcmp(t->rows[i].module, module) == 0)))
            return &t->rows[i];
    return NULL;
}

#define CHECK_ROW(t, name, module, s, tot, n)                     \
    do {                                                          \
        const struct hotspot_row *r_ = find_row((t), (name), (module)); \
        CU_ASSERT_PTR_NOT_NULL_FATAL(r_);                         \
        CU_ASSERT_EQUAL(r_->self, (s));                           \
        CU_ASSERT_EQUAL(r_->total, (tot));                        \
        CU_ASSERT_EQUAL(r_->samples, (n));                        \
    } while (0)

static void test_builders_total_weight(void)
{
    struct profile *p = make_fixture();
    CU_ASSERT_EQUAL(p->total_weight, 9);
    CU_ASSERT_EQUAL(p->nsamples, 6);
    profile_free(p);
}

/* Function rows: A@app self 3 (s0) + 2 (s2) = 5, total 3+2+2 = 7 in 4
 * samples (s2 counts A once); main total 9; B self 2, total 2+2+1 = 5. */
static void test_function_self_total(void)
{
    struct profile *p = make_fixture();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_FUNCTION, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 5);
    CU_ASSERT_EQUAL(t.total_weight, 9);
    CU_ASSERT_EQUAL(t.period_ns, 1000000);
    CHECK_ROW(&t, "A", "app", 5, 7, 4);
    CHECK_ROW(&t, "main", "app", 0, 9, 6);
    CHECK_ROW(&t, "B", "app", 2, 5, 4);
    CHECK_ROW(&t, "C", "libc.so.6", 1, 1, 1);
    CHECK_ROW(&t, "A", "libx.so", 1, 1, 1);
    /* Self adds up to the total weight, the denominator of every %. */
    uint64_t self = 0;
    for (size_t i = 0; i < t.nrows; i++)
        self += t.rows[i].self;
    CU_ASSERT_EQUAL(self, 9);
    hotspots_free(&t);
    CU_ASSERT_PTR_NULL(t.rows);
    profile_free(p);
}

/* The source of a function is its lowest line seen; unknown stays NULL. */
static void test_function_source(void)
{
    struct profile *p = make_fixture();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_FUNCTION, &t), 0);
    const struct hotspot_row *a = find_row(&t, "A", "app");
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a->source);
    CU_ASSERT_STRING_EQUAL(a->source, "a.c:15");
    const struct hotspot_row *m = find_row(&t, "main", "app");
    CU_ASSERT_STRING_EQUAL(m->source, "app.c:10");
    CU_ASSERT_PTR_NULL(find_row(&t, "B", "app")->source);
    hotspots_free(&t);
    profile_free(p);
}

/* Modules: app is the leaf in s0, s1, s2 (3+2+2 = 7) and on every stack. */
static void test_group_module(void)
{
    struct profile *p = make_fixture();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_MODULE, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 3);
    CHECK_ROW(&t, "app", NULL, 7, 9, 6);
    CHECK_ROW(&t, "libc.so.6", NULL, 1, 1, 1);
    CHECK_ROW(&t, "libx.so", NULL, 1, 1, 1);
    CU_ASSERT_PTR_NULL(find_row(&t, "app", NULL)->module);
    hotspots_free(&t);
    profile_free(p);
}

/* Threads: t0 has s0 (3) and s2 (2); t1 has four samples of weight 1; the
 * idle thread has no samples and no row. */
static void test_group_thread(void)
{
    struct profile *p = make_fixture();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_THREAD, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 2);
    CHECK_ROW(&t, "tid 100 (main) pid 100", NULL, 5, 5, 2);
    CHECK_ROW(&t, "tid 101 (worker) pid 100", NULL, 4, 4, 4);
    hotspots_free(&t);
    profile_free(p);
}

/* Processes: one row per pid, named after the executable's basename. */
static void test_group_process(void)
{
    struct profile *p = make_fixture();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_PROCESS, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 1);
    CHECK_ROW(&t, "pid 100", NULL, 9, 9, 6); /* no process record: pid only */
    hotspots_free(&t);

    struct prof_process procs[1];
    memset(procs, 0, sizeof procs);
    procs[0].pid = 100;
    procs[0].exe = (char *)"/usr/bin/app";
    struct prof_process *saved = p->processes;
    size_t saved_n = p->nprocesses;
    p->processes = procs;
    p->nprocesses = 1;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_PROCESS, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 1);
    CHECK_ROW(&t, "pid 100 app", NULL, 9, 9, 6);
    hotspots_free(&t);
    p->processes = saved;
    p->nprocesses = saved_n;
    profile_free(p);
}

/* A -> B -> A -> B (leaf A) with weight 5: each function once in total. */
static void test_recursion_counted_once(void)
{
    struct profile *p = profile_new_empty();
    uint32_t fm = profile_add_frame(p, "main", "app", NULL, 0, FRAME_NATIVE);
    uint32_t fa = profile_add_frame(p, "A", "app", NULL, 0, FRAME_NATIVE);
    uint32_t fb = profile_add_frame(p, "B", "app", NULL, 0, FRAME_NATIVE);
    uint32_t st[] = {fa, fb, fa, fb, fm};
    uint32_t s = profile_add_stack(p, st, 5);
    uint32_t th = profile_add_thread(p, 1, 1, "t");
    profile_add_sample(p, 0, th, s, 5);
    profile_add_sample(p, 1, th, s, 1);

    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_FUNCTION, &t), 0);
    CHECK_ROW(&t, "A", "app", 6, 6, 2);
    CHECK_ROW(&t, "B", "app", 0, 6, 2);
    CHECK_ROW(&t, "main", "app", 0, 6, 2);
    hotspots_free(&t);

    /* Callers of A: B (twice on the stack, counted once) and nothing else. */
    CU_ASSERT_EQUAL_FATAL(hotspots_neighbours(p, "A", false, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 1);
    CHECK_ROW(&t, "B", "app", 6, 6, 2);
    hotspots_free(&t);
    profile_free(p);
}

/* A sample without frames still counts, in a row of its own. */
static void test_empty_stack(void)
{
    struct profile *p = profile_new_empty();
    uint32_t none[1] = {0}; /* not NULL: memcpy(dst, NULL, 0) is undefined */
    uint32_t s = profile_add_stack(p, none, 0);
    uint32_t th = profile_add_thread(p, 1, 1, "t");
    profile_add_sample(p, 0, th, s, 2);
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_FUNCTION, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 1);
    CHECK_ROW(&t, "[no stack]", NULL, 2, 2, 1);
    hotspots_free(&t);
    profile_free(p);
}

static void test_empty_profile(void)
{
    struct profile *p = profile_new_empty();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_compute(p, GROUP_FUNCTION, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 0);
    CU_ASSERT_EQUAL(t.total_weight, 0);
    hotspots_free(&t);
    CU_ASSERT_EQUAL(hotspots_neighbours(p, "main", false, &t), -1);
    profile_free(p);
}

/*
 * Callers of A (A@app and A@libx match exactly):
 *   s0 [A, main] w3:  main, A is the leaf          -> main self 3, total 3
 *   s1 [B, A', main]: main, A not leaf (2 samples) -> main total 5
 *   s2 [A, B, A', main] w2: B (A leaf) and main   -> B 2/2, main total 7
 *   s4 [A@libx, main] w1: main, leaf               -> main self 4, total 8
 */
static void test_callers(void)
{
    struct profile *p = make_fixture();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_neighbours(p, "A", false, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 2);
    CU_ASSERT_EQUAL(t.total_weight, 9);
    CHECK_ROW(&t, "main", "app", 4, 8, 5);
    CHECK_ROW(&t, "B", "app", 2, 2, 1);
    hotspots_free(&t);
    profile_free(p);
}

/* Callers of the outermost frame: [root], never the leaf here. */
static void test_callers_root(void)
{
    struct profile *p = make_fixture();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_neighbours(p, "main", false, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 1);
    CHECK_ROW(&t, "[root]", NULL, 0, 9, 6);
    CU_ASSERT_PTR_NULL(t.rows[0].module);
    hotspots_free(&t);
    profile_free(p);
}

/*
 * Callees of A: [self] where A is the leaf (s0 3, s2 2, s4 1 = 6 in 3
 * samples); B from s1 (B is the leaf: self 2) and s2 (B not the leaf): total 4.
 */
static void test_callees(void)
{
    struct profile *p = make_fixture();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_neighbours(p, "A", true, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 2);
    CHECK_ROW(&t, "[self]", NULL, 6, 6, 3);
    CHECK_ROW(&t, "B", "app", 2, 4, 3);
    hotspots_free(&t);

    /* Callees of B: s1 has B as the leaf -> [self] 2 in 2 samples; s2: A
     * (the leaf) -> A 2/2; s3: C (the leaf) -> C 1/1. */
    CU_ASSERT_EQUAL_FATAL(hotspots_neighbours(p, "B", true, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 3);
    CHECK_ROW(&t, "[self]", NULL, 2, 2, 2);
    CHECK_ROW(&t, "A", "app", 2, 2, 1);
    CHECK_ROW(&t, "C", "libc.so.6", 1, 1, 1);
    hotspots_free(&t);
    profile_free(p);
}

/* No exact name: a substring matches ("ai" -> main); nothing: -1. */
static void test_neighbours_substring_and_missing(void)
{
    struct profile *p = make_fixture();
    struct hotspot_table t;
    CU_ASSERT_EQUAL_FATAL(hotspots_neighbours(p, "ai", false, &t), 0);
    CU_ASSERT_EQUAL(t.nrows, 1);
    CHECK_ROW(&t, "[root]", NULL, 0, 9, 6);
    hotspots_free(&t);
    CU_ASSERT_EQUAL(hotspots_neighbours(p, "nosuchfunction", false, &t), -1);
    CU_ASSERT_EQUAL(t.nrows, 0);
    CU_ASSERT_EQUAL(hotspots_neighbours(p, "nosuchfunction", true, &t), -1);
    profile_free(p);
}

/* ------------------------------------------------------------------------- */

static void set_row(struct hotspot_row *r, const char *name, const char *module, uint64_t self,
                    uint64_t total, uint64_t samples)
{
    memset(r, 0, sizeof *r);
    r->name = strdup(name);
    r->module = module ? strdup(module) : NULL;
    r->self = self;
    r->total = total;
    r->samples = samples;
}

static void make_sort_table(struct hotspot_table *t)
{
    t->nrows = 5;
    t->rows = calloc(t->nrows, sizeof *t->rows);
    set_row(&t->rows[0], "b", "m", 5, 9, 3);
    set_row(&t->rows[1], "a", "m", 5, 9, 1);
    set_row(&t->rows[2], "c", "m", 5, 10, 2);
    set_row(&t->rows[3], "d", "z", 7, 7, 3);
    set_row(&t->rows[4], "d", "m", 0, 1, 0);
    t->total_weight = 17;
    t->period_ns = 1;
}

static void expect_order(const struct hotspot_table *t, const char *const *names,
                         const char *const *modules)
{
    for (size_t i = 0; i < t->nrows; i++) {
        CU_ASSERT_STRING_EQUAL(t->rows[i].name, names[i]);
        CU_ASSERT_STRING_EQUAL(t->rows[i].module, modules[i]);
    }
}

static void test_sort_orders(void)
{
    struct hotspot_table t;
    make_sort_table(&t);
    /* self desc; ties by total desc, then name */
    hotspots_sort(&t, SORT_SELF);
    expect_order(&t, (const char *[]){"d", "c", "a", "b", "d"},
                 (const char *[]){"z", "m", "m", "m", "m"});
    /* total desc; ties by self desc, then name */
    hotspots_sort(&t, SORT_TOTAL);
    expect_order(&t, (const char *[]){"c", "a", "b", "d", "d"},
                 (const char *[]){"m", "m", "m", "z", "m"});
    /* samples desc; ties (b, d@z: 3) by total */
    hotspots_sort(&t, SORT_SAMPLES);
    expect_order(&t, (const char *[]){"b", "d", "c", "a", "d"},
                 (const char *[]){"m", "z", "m", "m", "m"});
    /* name asc; the same name in two modules by module */
    hotspots_sort(&t, SORT_NAME);
    expect_order(&t, (const char *[]){"a", "b", "c", "d", "d"},
                 (const char *[]){"m", "m", "m", "m", "z"});
    hotspots_free(&t);
}

static void test_parse_names(void)
{
    enum group_by g;
    enum sort_key k;
    CU_ASSERT_EQUAL(group_by_parse("function", &g), 0);
    CU_ASSERT_EQUAL(g, GROUP_FUNCTION);
    CU_ASSERT_EQUAL(group_by_parse("module", &g), 0);
    CU_ASSERT_EQUAL(g, GROUP_MODULE);
    CU_ASSERT_EQUAL(group_by_parse("thread", &g), 0);
    CU_ASSERT_EQUAL(g, GROUP_THREAD);
    CU_ASSERT_EQUAL(group_by_parse("process", &g), 0);
    CU_ASSERT_EQUAL(g, GROUP_PROCESS);
    CU_ASSERT_EQUAL(group_by_parse("dso", &g), 0);
    CU_ASSERT_EQUAL(g, GROUP_MODULE);
    CU_ASSERT_EQUAL(group_by_parse("Function", &g), -1);
    CU_ASSERT_EQUAL(group_by_parse("", &g), -1);
    CU_ASSERT_EQUAL(group_by_parse(NULL, &g), -1);
    CU_ASSERT_STRING_EQUAL(group_by_name(GROUP_FUNCTION), "function");
    CU_ASSERT_STRING_EQUAL(group_by_name(GROUP_MODULE), "module");
    CU_ASSERT_STRING_EQUAL(group_by_name(GROUP_THREAD), "thread");
    CU_ASSERT_STRING_EQUAL(group_by_name(GROUP_PROCESS), "process");

    CU_ASSERT_EQUAL(sort_key_parse("self", &k), 0);
    CU_ASSERT_EQUAL(k, SORT_SELF);
    CU_ASSERT_EQUAL(sort_key_parse("total", &k), 0);
    CU_ASSERT_EQUAL(k, SORT_TOTAL);
    CU_ASSERT_EQUAL(sort_key_parse("samples", &k), 0);
    CU_ASSERT_EQUAL(k, SORT_SAMPLES);
    CU_ASSERT_EQUAL(sort_key_parse("name", &k), 0);
    CU_ASSERT_EQUAL(k, SORT_NAME);
    CU_ASSERT_EQUAL(sort_key_parse("selff", &k), -1);
    CU_ASSERT_STRING_EQUAL(sort_key_name(SORT_SAMPLES), "samples");
}

void register_hotspots_tests(void)
{
    CU_pSuite s = CU_add_suite("hotspots", NULL, NULL);
    if (!s)
        return;
    CU_add_test(s, "builders keep total weight", test_builders_total_weight);
    CU_add_test(s, "function self/total with recursion and weights", test_function_self_total);
    CU_add_test(s, "function source is the lowest line", test_function_source);
    CU_add_test(s, "group by module", test_group_module);
    CU_add_test(s, "group by thread", test_group_thread);
    CU_add_test(s, "group by process", test_group_process);
    CU_add_test(s, "recursion counted once per sample", test_recursion_counted_once);
    CU_add_test(s, "sample without frames", test_empty_stack);
    CU_add_test(s, "empty profile", test_empty_profile);
    CU_add_test(s, "callers", test_callers);
    CU_add_test(s, "callers of the root frame", test_callers_root);
    CU_add_test(s, "callees and [self]", test_callees);
    CU_add_test(s, "neighbours by substring, or none", test_neighbours_substring_and_missing);
    CU_add_test(s, "sort orders and ties", test_sort_orders);
    CU_add_test(s, "group-by and sort key names", test_parse_names);
}
