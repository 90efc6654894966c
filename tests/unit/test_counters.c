/*
 * tests/unit/test_counters.c — per-sample counters on hand-computed values:
 * the delta of two reads (first read, equal reads, a counter that went
 * backwards), scaling summed deltas by enabled/running, the derived figures
 * of a row (CPI, IPC, LLC miss ratio and MPKI, bandwidth estimate),
 * aggregation per function and per thread through the hotspot tables, and
 * the CPI > 1 finding with its reason.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "analyze/analyze.h"
#include "tests/unit/unit.h"

#define NEAR(a, b) CU_ASSERT_DOUBLE_EQUAL((a), (b), fabs(b) * 1e-9 + 1e-12)

static void test_delta(void)
{
    CU_ASSERT_EQUAL(opr_counter_delta(1500, 1000), 500);
    CU_ASSERT_EQUAL(opr_counter_delta(1000, 1000), 0);
    CU_ASSERT_EQUAL(opr_counter_delta(0, 0), 0); /* first read right after opening */
    CU_ASSERT_EQUAL(opr_counter_delta(10, 1000), 0); /* reset: nothing, never 2^64 - 990 */
    CU_ASSERT_EQUAL(opr_counter_delta(UINT64_MAX, UINT64_MAX - 7), 7);
}

static void test_scaled(void)
{
    double s1[3] = {1000, 200, 100}; /* ran half the time it was enabled: x2 */
    NEAR(counter_scaled(s1, 0), 2000.0);
    double s2[3] = {1000, 100, 100};
    NEAR(counter_scaled(s2, 0), 1000.0);
    double s3[3] = {0, 100, 0}; /* enabled, never scheduled: unknown */
    CU_ASSERT(isnan(counter_scaled(s3, 0)));
    double s4[3] = {0, 0, 0}; /* no interval at all: nothing happened */
    NEAR(counter_scaled(s4, 0), 0.0);
    double two[6] = {1, 1, 1, 30, 40, 10}; /* second counter: 30 x 40/10 */
    NEAR(counter_scaled(two, 1), 120.0);
}

/* cycles, instructions, cache-references, cache-misses */
static struct prof_counter hw_events[4] = {
    {.name = "cycles", .role = PMU_ROLE_CYCLES},
    {.name = "instructions", .role = PMU_ROLE_INSTRUCTIONS},
    {.name = "cache-references", .role = PMU_ROLE_LLC_REFS},
    {.name = "cache-misses", .role = PMU_ROLE_LLC_MISSES},
};

static void test_row_metrics(void)
{
    struct prof_counters c = {.ev = hw_events, .n = 4};
    /* 10 ms of samples: 2e6 cycles, 1e6 instructions; the cache group ran
     * half the time: raw 1e4 refs / 5e3 misses -> 2e4 / 1e4 scaled. */
    double sums[12] = {2e6, 1e7, 1e7, 1e6, 1e7, 1e7, 1e4, 1e7, 5e6, 5e3, 1e7, 5e6};
    struct counter_metrics m;
    counter_metrics_compute(&c, sums, 0.01, &m);
    NEAR(m.cycles, 2e6);
    NEAR(m.instructions, 1e6);
    NEAR(m.llc_refs, 2e4);
    NEAR(m.llc_misses, 1e4);
    NEAR(m.cpi, 2.0);
    NEAR(m.ipc, 0.5);
    NEAR(m.llc_miss_ratio, 0.5);
    NEAR(m.llc_mpki, 10.0); /* 1e4 misses per 1e6 instructions */
    NEAR(m.bandwidth_est, 64e6); /* 1e4 x 64 B / 0.01 s */

    /* Without instructions: no CPI, no MPKI, the rest stays. */
    struct prof_counters c2 = {.ev = hw_events + 2, .n = 2};
    counter_metrics_compute(&c2, sums + 6, 0.01, &m);
    CU_ASSERT(isnan(m.cpi) && isnan(m.ipc) && isnan(m.llc_mpki));
    NEAR(m.llc_miss_ratio, 0.5);
    CU_ASSERT(counters_have_role(&c, PMU_ROLE_CYCLES));
    CU_ASSERT(!counters_have_role(&c2, PMU_ROLE_CYCLES));
}

/* main -> f (2 samples with counters, 1 without) and main -> g (1 sample),
 * thread 0 runs f, thread 1 runs g; per sample 1 ms. f: CPI 2 with many
 * misses; g: CPI 0.5. */
static struct profile *counted_profile(void)
{
    struct profile *p = profile_new_empty();
    p->period_ns = 1000000;
    uint32_t mainf = profile_add_frame(p, "main", "app", NULL, 0, FRAME_NATIVE);
    uint32_t f = profile_add_frame(p, "f", "app", NULL, 0, FRAME_NATIVE);
    uint32_t g = profile_add_frame(p, "g", "app", NULL, 0, FRAME_NATIVE);
    uint32_t sf[2] = {f, mainf}, sg[2] = {g, mainf};
    uint32_t stf = profile_add_stack(p, sf, 2), stg = profile_add_stack(p, sg, 2);
    uint32_t t0 = profile_add_thread(p, 1, 1, "main"), t1 = profile_add_thread(p, 1, 2, "worker");
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(counters_add_event(p, hw_events[i].name, hw_events[i].role, 0, (uint64_t)i, true),
                        (size_t)i);
    }
    CU_ASSERT_EQUAL(counters_add_event(p, "cycles", PMU_ROLE_CYCLES, 0, 0, true), 0); /* same event again */
    const uint64_t per_f[4] = {2000000, 1000000, 20000, 10000}; /* misses: 10 per 1k instructions */
    const uint64_t per_g[4] = {1000000, 2000000, 20000, 0};
    for (int s = 0; s < 4; s++) {
        bool is_g = s == 3;
        profile_add_sample(p, 1000 + (uint64_t)s, is_g ? t1 : t0, is_g ? stg : stf, 1);
        if (s == 2)
            continue; /* a thread's first sample: no counter values */
        uint32_t row = counters_new_row(p);
        CU_ASSERT(row > 0);
        for (size_t i = 0; i < 4; i++)
            counters_set(p, row, i, is_g ? per_g[i] : per_f[i], 1000000, 1000000);
        p->samples[p->nsamples - 1].counters = row;
    }
    return p;
}

static const struct hotspot_row *row_named(const struct hotspot_table *t, const char *name)
{
    for (size_t i = 0; i < t->nrows; i++)
        if (strcmp(t->rows[i].name, name) == 0)
            return &t->rows[i];
    return NULL;
}

static void test_aggregation(void)
{
    struct profile *p = counted_profile();
    struct hotspot_table t;
    CU_ASSERT_FATAL(hotspots_compute(p, GROUP_FUNCTION, &t) == 0);
    CU_ASSERT_PTR_EQUAL(t.counters, p->counters);
    const struct hotspot_row *f = row_named(&t, "f"), *g = row_named(&t, "g"), *m = row_named(&t, "main");
    CU_ASSERT_FATAL(f && g && m && f->counters && g->counters && m->counters);
    NEAR(counter_scaled(f->counters, 0), 4e6); /* two samples with values; the third has none */
    NEAR(counter_scaled(f->counters, 1), 2e6);
    NEAR(counter_scaled(g->counters, 1), 2e6);
    NEAR(counter_scaled(m->counters, 0), 0.0); /* never the leaf: no self counts */
    struct counter_metrics cm;
    counter_metrics_compute(p->counters, f->counters, (double)f->self * 1e-3, &cm);
    NEAR(cm.cpi, 2.0);
    NEAR(cm.llc_mpki, 10.0);
    counter_metrics_compute(p->counters, g->counters, (double)g->self * 1e-3, &cm);
    NEAR(cm.cpi, 0.5);
    hotspots_free(&t);

    CU_ASSERT_FATAL(hotspots_compute(p, GROUP_THREAD, &t) == 0);
    CU_ASSERT_EQUAL(t.nrows, 2);
    for (size_t i = 0; i < t.nrows; i++) {
        bool worker = strstr(t.rows[i].name, "worker") != NULL;
        NEAR(counter_scaled(t.rows[i].counters, 0), worker ? 1e6 : 4e6);
    }
    hotspots_free(&t);
    profile_free(p);
}

static void test_cpi_finding(void)
{
    struct profile *p = counted_profile();
    struct findings fs;
    CU_ASSERT_FATAL(findings_compute(p, &fs) == 0);
    size_t n = 0;
    for (size_t i = 0; i < fs.n; i++) {
        if (fs.items[i].kind != FINDING_HIGH_CPI)
            continue;
        n++;
        CU_ASSERT_STRING_EQUAL(fs.items[i].id, "high_cpi");
        CU_ASSERT(strncmp(fs.items[i].text, "f has CPI 2.00 (IPC 0.50) over 75.0 %", 37) == 0);
        CU_ASSERT(strstr(fs.items[i].text, "memory-bound: 10.0 LLC misses per 1000 instructions") != NULL);
        NEAR(fs.items[i].share, 0.75);
    }
    CU_ASSERT_EQUAL(n, 1); /* g (CPI 0.5) gets none */
    findings_free(&fs);
    profile_free(p);

    /* No counters: no CPI finding at all. */
    struct profile *q = profile_new_empty();
    uint32_t fr = profile_add_frame(q, "f", "app", NULL, 0, FRAME_NATIVE);
    uint32_t st = profile_add_stack(q, &fr, 1);
    profile_add_sample(q, 1, profile_add_thread(q, 1, 1, "t"), st, 1);
    CU_ASSERT_FATAL(findings_compute(q, &fs) == 0);
    for (size_t i = 0; i < fs.n; i++)
        CU_ASSERT(fs.items[i].kind != FINDING_HIGH_CPI);
    findings_free(&fs);
    profile_free(q);
}

/* record -e cycles,instructions -c 1000000: samples every million cycles,
 * instructions counted per sample. f: 3 samples (the first of its thread
 * without counter values) with 500k instructions each -> CPI 2; g: 1 sample
 * with 2M instructions -> CPI 0.5. The leader's count comes from the sample
 * period, only on samples that carry the other counters. */
static void test_cycles_leader(void)
{
    struct profile *p = profile_new_empty();
    p->period_ns = 0;
    p->sample_period = 1000000;
    p->sample_role = PMU_ROLE_CYCLES;
    uint32_t mainf = profile_add_frame(p, "main", "app", NULL, 0, FRAME_NATIVE);
    uint32_t f = profile_add_frame(p, "f", "app", NULL, 0, FRAME_NATIVE);
    uint32_t g = profile_add_frame(p, "g", "app", NULL, 0, FRAME_NATIVE);
    uint32_t sf[2] = {f, mainf}, sg[2] = {g, mainf};
    uint32_t stf = profile_add_stack(p, sf, 2), stg = profile_add_stack(p, sg, 2);
    uint32_t t0 = profile_add_thread(p, 1, 1, "main");
    CU_ASSERT_EQUAL(counters_add_event(p, "instructions", PMU_ROLE_INSTRUCTIONS, 0, 1, false), 0);
    for (int s = 0; s < 4; s++) {
        bool is_g = s == 3;
        profile_add_sample(p, 1000 + (uint64_t)s, t0, is_g ? stg : stf, 1);
        if (s == 0)
            continue; /* the thread's first sample opens its counters */
        uint32_t row = counters_new_row(p);
        counters_set(p, row, 0, is_g ? 2000000 : 500000, 1000, 1000);
        p->samples[p->nsamples - 1].counters = row;
    }
    CU_ASSERT_EQUAL_FATAL(counters_add_leader(p, "cycles", PMU_ROLE_CYCLES, false, 1000000), 0);
    CU_ASSERT_EQUAL(p->counters->n, 2);
    CU_ASSERT(p->counters->ev[1].leader);
    NEAR(p->counters->ev[1].value, 3e6); /* 3 samples with values x 1M */
    NEAR(p->counters->ev[0].value, 3e6); /* instructions kept */

    struct hotspot_table t;
    CU_ASSERT_FATAL(hotspots_compute(p, GROUP_FUNCTION, &t) == 0);
    const struct hotspot_row *rf = row_named(&t, "f"), *rg = row_named(&t, "g");
    CU_ASSERT_FATAL(rf && rg && rf->counters && rg->counters);
    struct counter_metrics cm;
    counter_metrics_compute(p->counters, rf->counters, 0.0, &cm);
    NEAR(cm.cycles, 2e6);
    NEAR(cm.cpi, 2.0);
    counter_metrics_compute(p->counters, rg->counters, 0.0, &cm);
    NEAR(cm.cpi, 0.5);
    hotspots_free(&t);

    /* The CPI finding speaks of cycles, not CPU time. */
    char *saved_event = p->event;
    p->event = (char *)"cycles";
    struct findings fs;
    CU_ASSERT_FATAL(findings_compute(p, &fs) == 0);
    size_t n = 0;
    for (size_t i = 0; i < fs.n; i++)
        if (fs.items[i].kind == FINDING_HIGH_CPI) {
            n++;
            CU_ASSERT(strncmp(fs.items[i].text, "f has CPI 2.00 (IPC 0.50) over 75.0 % of cycles, above 1.0", 58) == 0);
        }
    CU_ASSERT_EQUAL(n, 1);
    findings_free(&fs);
    p->event = saved_event;
    profile_free(p);
}

void register_counters_tests(void)
{
    CU_pSuite s = CU_add_suite("counters", NULL, NULL);
    if (!s)
        return;
    CU_add_test(s, "delta of two reads", test_delta);
    CU_add_test(s, "scaling summed deltas by enabled/running", test_scaled);
    CU_add_test(s, "CPI, IPC, LLC miss ratio and MPKI, bandwidth estimate", test_row_metrics);
    CU_add_test(s, "counters summed per function and per thread", test_aggregation);
    CU_add_test(s, "CPI > 1 finding with its reason", test_cpi_finding);
    CU_add_test(s, "samples led by cycles (record -c): CPI per function", test_cycles_leader);
}
