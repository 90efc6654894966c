/*
 * tests/unit/test_metrics.c — derived-metric math on hand-computed values
 * (scaling, CPI, IPC, bandwidth, miss ratios, utilization) and the opprof
 * stat table rendered from hand-made counts, including a multiplexed counter.
 */
#ifndef _GNU_SOURCE
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "analyze/analyze.h"
#include "report/report.h"
#include "tests/unit/unit.h"

#define NEAR(a, b) CU_ASSERT_DOUBLE_EQUAL((a), (b), fabs(b) * 1e-9 + 1e-12)

static void test_scale(void)
{
    double f;
    NEAR(metric_scale(1000, 200, 100, &f), 2000.0); /* ran half the time: x2 */
    NEAR(f, 0.5);
    NEAR(metric_scale(1000, 100, 100, &f), 1000.0);
    NEAR(f, 1.0);
    NEAR(metric_scale(300, 400, 300, NULL), 400.0);
    CU_ASSERT(isnan(metric_scale(0, 100, 0, &f))); /* never scheduled: unknown, not 0 */
    NEAR(f, 0.0);
}

static void test_ratios(void)
{
    NEAR(metric_cpi(2e9, 4e9), 0.5);
    NEAR(metric_ipc(2e9, 4e9), 2.0);
    CU_ASSERT(isnan(metric_cpi(2e9, 0)));
    CU_ASSERT(isnan(metric_cpi(NAN, 1e9)));
    NEAR(metric_ratio(25, 100), 0.25);
    /* (1e6 + 5e5) lines x 64 B over 2 s = 48 MB/s */
    NEAR(metric_bandwidth_bytes_per_s(1e6, 5e5, 2.0), 48e6);
    NEAR(metric_bandwidth_bytes_per_s(1e6, NAN, 1.0), 64e6);
    CU_ASSERT(isnan(metric_bandwidth_bytes_per_s(NAN, NAN, 1.0)));
    /* 1e6 misses x 64 B over 0.5 s = 128 MB/s */
    NEAR(metric_llc_estimate_bytes_per_s(1e6, 0.5), 128e6);
    NEAR(metric_rate_per_s(150, 1.5), 100.0);
    NEAR(metric_cpus_utilized(1.5e9, 1e9), 1.5);
    CU_ASSERT(isnan(metric_cpus_utilized(1e9, 0)));
}

static struct stat_count count(const char *name, enum pmu_role role, uint64_t v, uint64_t en, uint64_t run)
{
    struct stat_count c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    c.role = role;
    c.hardware = role == PMU_ROLE_CYCLES || role == PMU_ROLE_INSTRUCTIONS || role == PMU_ROLE_LLC_MISSES ||
                 role == PMU_ROLE_LLC_REFS || role == PMU_ROLE_L2_MISSES || role == PMU_ROLE_L2_REFS ||
                 role == PMU_ROLE_IMC_READS || role == PMU_ROLE_IMC_WRITES;
    c.value = v;
    c.time_enabled = en;
    c.time_running = run;
    return c;
}

static void test_stat_metrics(void)
{
    struct stat_count c[] = {
        count("task-clock", PMU_ROLE_TASK_CLOCK, 2000000000, 2000000000, 2000000000),
        /* multiplexed: 1.5e9 counted in half the time -> 3e9 */
        count("cycles", PMU_ROLE_CYCLES, 1500000000, 2000000000, 1000000000),
        count("instructions", PMU_ROLE_INSTRUCTIONS, 6000000000, 2000000000, 2000000000),
        count("l2m", PMU_ROLE_L2_MISSES, 3000000, 10, 10),
        count("l2r", PMU_ROLE_L2_REFS, 12000000, 10, 10),
        count("llcm", PMU_ROLE_LLC_MISSES, 1000000, 10, 10),
        count("llcr", PMU_ROLE_LLC_REFS, 4000000, 10, 10),
    };
    struct stat_result r;
    memset(&r, 0, sizeof r);
    r.counts = c;
    r.ncounts = sizeof c / sizeof c[0];
    r.wall_ns = 1000000000;
    struct stat_metrics m;
    stat_metrics_compute(&r, &m);
    NEAR(m.wall_s, 1.0);
    NEAR(m.cpus_utilized, 2.0);
    NEAR(m.cycles, 3e9);
    NEAR(m.cpi, 0.5);
    NEAR(m.ipc, 2.0);
    NEAR(m.ghz, 1.5); /* 3e9 cycles / 2e9 ns */
    NEAR(m.l2_miss_ratio, 0.25);
    NEAR(m.l2_miss_rate, 0.0005); /* 3e6 / 6e9 */
    NEAR(m.llc_miss_ratio, 0.25);
    NEAR(m.bandwidth_bytes_per_s, 64e6); /* no IMC: LLC estimate */
    CU_ASSERT(m.bandwidth_estimate);
    CU_ASSERT(!m.bandwidth_socket_wide);

    /* Two IMC boxes: bandwidth from CAS counts, socket-wide, summed. */
    struct stat_count imc[] = {
        count("skx_unc_imc0::UNC_M_CAS_COUNT:RD", PMU_ROLE_IMC_READS, 1000000, 5, 5),
        count("skx_unc_imc1::UNC_M_CAS_COUNT:RD", PMU_ROLE_IMC_READS, 1000000, 5, 5),
        count("skx_unc_imc0::UNC_M_CAS_COUNT:WR", PMU_ROLE_IMC_WRITES, 500000, 5, 5),
        count("llcm", PMU_ROLE_LLC_MISSES, 1, 5, 5),
    };
    r.counts = imc;
    r.ncounts = 4;
    r.wall_ns = 2000000000;
    stat_metrics_compute(&r, &m);
    NEAR(m.bandwidth_bytes_per_s, 2.5e6 * 64 / 2.0);
    CU_ASSERT(m.bandwidth_socket_wide);
    CU_ASSERT(!m.bandwidth_estimate);
    CU_ASSERT(isnan(m.cpi)); /* not counted: NaN, not 0 */
    CU_ASSERT(isnan(m.cpus_utilized));
}

static char *render(const struct stat_result *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    report_print_stat(f, r, "./app --n 3");
    fclose(f);
    return buf;
}

static void test_stat_table(void)
{
    struct stat_count c[] = {
        count("task-clock", PMU_ROLE_TASK_CLOCK, 2000000000, 2000000000, 2000000000),
        count("context-switches", PMU_ROLE_CONTEXT_SWITCHES, 12, 2000000000, 2000000000),
        count("page-faults", PMU_ROLE_PAGE_FAULTS, 1500, 2000000000, 2000000000),
        count("cycles", PMU_ROLE_CYCLES, 1500000000, 2000000000, 1000000000),
        count("instructions", PMU_ROLE_INSTRUCTIONS, 6000000000, 2000000000, 2000000000),
        count("cache-misses", PMU_ROLE_LLC_MISSES, 1000000, 2000000000, 2000000000),
        count("r01c2", PMU_ROLE_NONE, 5, 2000000000, 0),
    };
    c[1].user_only = true;
    struct stat_result r;
    memset(&r, 0, sizeof r);
    r.counts = c;
    r.ncounts = sizeof c / sizeof c[0];
    r.wall_ns = 1000000000;
    r.utime_ns = 1900000000;
    r.stime_ns = 100000000;
    r.pid = 4242;
    char *t = render(&r);
    const char *want[] = {
        "counters for './app --n 3' (pid 4242",
        "           2000.00 msec  task-clock                   # 2.000 CPUs utilized\n",
        "                12       context-switches:u           # 12.000 /s\n",
        "             1,500       page-faults                  # 1.500 K/s\n",
        "     3,000,000,000       cycles                       # 1.500 GHz  (scaled: counted 50.0 % of the time)\n",
        "     6,000,000,000       instructions                 # 2.00 insn per cycle\n",
        "     <not counted>       r01c2",
        "   CPI (cycles/instruction)        0.500   (IPC 2.000)\n",
        "   Memory bandwidth           64.00 MB/s   (estimate: LLC misses x 64 B)\n",
        "value x time_enabled / time_running",
        "           1.000000 seconds time elapsed\n",
        "           1.900000 seconds user\n",
        " workload exit status 0\n",
        NULL,
    };
    for (const char *const *w = want; *w; w++) {
        if (!strstr(t, *w))
            fprintf(stderr, "\n  missing: [%s]\n%s\n", *w, t);
        CU_ASSERT_PTR_NOT_NULL(strstr(t, *w));
    }
    free(t);

    /* No PMU: software rows only, no derived-metrics block, no zero columns. */
    r.ncounts = 3;
    r.exit_status = 3;
    t = render(&r);
    CU_ASSERT_PTR_NULL(strstr(t, "cycles"));
    CU_ASSERT_PTR_NULL(strstr(t, "Derived"));
    CU_ASSERT_PTR_NULL(strstr(t, "scaled"));
    CU_ASSERT_PTR_NOT_NULL(strstr(t, "workload exit status 3"));
    free(t);
}

void register_metrics_tests(void)
{
    CU_pSuite s = CU_add_suite("metrics", NULL, NULL);
    if (!s)
        return;
    CU_add_test(s, "multiplexing scale", test_scale);
    CU_add_test(s, "CPI, IPC, bandwidth, ratios", test_ratios);
    CU_add_test(s, "stat metrics from counts", test_stat_metrics);
    CU_add_test(s, "stat table rendering", test_stat_table);
}
