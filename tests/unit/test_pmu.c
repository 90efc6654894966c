/*
 * tests/unit/test_pmu.c — event encoding through libpfm4 for CPUs this VM is
 * not: every preset's events are encoded for Skylake, Ice Lake, Zen 3 and
 * Zen 4 with LIBPFM_ENCODE_INACTIVE=1 and PMU-prefixed names (one libpfm4
 * initialization serves every model, and the generic perf PMU stays usable),
 * plus groups, raw and software events, "did you mean" errors, the choice of
 * the bandwidth source, and the no-PMU sentence.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "sampler/pmu/pmu.h"
#include "tests/unit/unit.h"

static int suite_init(void)
{
    /* Must precede pfm_initialize (pmu_init), which reads it once. */
    setenv("LIBPFM_ENCODE_INACTIVE", "1", 1);
    return pmu_init() == 0 ? 0 : -1;
}

static void encode_ok(const char *name, uint32_t type, uint64_t config)
{
    struct pmu_event e;
    char err[768] = "";
    int rc = pmu_encode(name, &e, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n  %s: %s\n", name, err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(e.attr.type, type);
    CU_ASSERT_EQUAL(e.attr.config, config);
}

static void test_vendor_encodings(void)
{
    encode_ok("skl::INST_RETIRED:ANY_P", PERF_TYPE_RAW, 0xc0);
    encode_ok("skl::CPU_CLK_UNHALTED:THREAD_P", PERF_TYPE_RAW, 0x3c);
    encode_ok("skl::LONGEST_LAT_CACHE:MISS", PERF_TYPE_RAW, 0x412e);
    encode_ok("skl::L2_RQSTS:MISS", PERF_TYPE_RAW, 0x3f24);
    encode_ok("icl::L2_RQSTS:ALL_DEMAND_MISS", PERF_TYPE_RAW, 0x2724);
    encode_ok("amd64_fam19h_zen3::RETIRED_INSTRUCTIONS", PERF_TYPE_RAW, 0xc0);
    encode_ok("amd64_fam19h_zen3::CYCLES_NOT_IN_HALT", PERF_TYPE_RAW, 0x76);
    encode_ok("amd64_fam19h_zen3::CORE_TO_L2_CACHEABLE_REQUEST_ACCESS_STATUS:LS_RD_BLK_C:IC_FILL_MISS",
              PERF_TYPE_RAW, 0x964);
    struct pmu_event e;
    char err[256];
    CU_ASSERT_EQUAL(pmu_encode("skl::INST_RETIRED:ANY_P", &e, err, sizeof err), 0);
    CU_ASSERT(e.hardware);
    CU_ASSERT(!e.uncore);
    CU_ASSERT_EQUAL(e.attr.exclude_kernel, 1); /* user mode by default */
}

static void test_generic_software_raw(void)
{
    encode_ok("cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES);
    encode_ok("instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS);
    encode_ok("cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES);
    encode_ok("r01c2", PERF_TYPE_RAW, 0x1c2);
    struct {
        const char *name;
        uint64_t config;
        enum pmu_role role;
    } sw[] = {
        {"task-clock", PERF_COUNT_SW_TASK_CLOCK, PMU_ROLE_TASK_CLOCK},
        {"cpu-clock", PERF_COUNT_SW_CPU_CLOCK, PMU_ROLE_CPU_CLOCK},
        {"context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES, PMU_ROLE_CONTEXT_SWITCHES},
        {"cs", PERF_COUNT_SW_CONTEXT_SWITCHES, PMU_ROLE_CONTEXT_SWITCHES},
        {"cpu-migrations", PERF_COUNT_SW_CPU_MIGRATIONS, PMU_ROLE_CPU_MIGRATIONS},
        {"page-faults", PERF_COUNT_SW_PAGE_FAULTS, PMU_ROLE_PAGE_FAULTS},
        {"faults", PERF_COUNT_SW_PAGE_FAULTS, PMU_ROLE_PAGE_FAULTS},
        {"minor-faults", PERF_COUNT_SW_PAGE_FAULTS_MIN, PMU_ROLE_MINOR_FAULTS},
        {"major-faults", PERF_COUNT_SW_PAGE_FAULTS_MAJ, PMU_ROLE_MAJOR_FAULTS},
    };
    for (size_t i = 0; i < sizeof sw / sizeof sw[0]; i++) {
        struct pmu_event e;
        char err[256];
        CU_ASSERT_EQUAL_FATAL(pmu_encode(sw[i].name, &e, err, sizeof err), 0);
        CU_ASSERT_EQUAL(e.attr.type, PERF_TYPE_SOFTWARE);
        CU_ASSERT_EQUAL(e.attr.config, sw[i].config);
        CU_ASSERT_EQUAL(e.role, sw[i].role);
        CU_ASSERT(!e.hardware);
    }
    struct pmu_event e;
    char err[256];
    CU_ASSERT_EQUAL(pmu_encode("cycles", &e, err, sizeof err), 0);
    CU_ASSERT_EQUAL(e.role, PMU_ROLE_CYCLES);
    CU_ASSERT(e.hardware);
}

static void test_groups(void)
{
    struct pmu_event_list l = {0};
    char err[512];
    CU_ASSERT_EQUAL_FATAL(pmu_parse_events("{cycles,instructions},page-faults,{cs}", &l, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(l.n, 4);
    CU_ASSERT_EQUAL(l.ngroups, 3);
    CU_ASSERT_EQUAL(l.ev[0].group, 0);
    CU_ASSERT(l.ev[0].leader);
    CU_ASSERT_EQUAL(l.ev[1].group, 0);
    CU_ASSERT(!l.ev[1].leader);
    CU_ASSERT_EQUAL(l.ev[2].group, 1);
    CU_ASSERT(l.ev[2].leader);
    CU_ASSERT_EQUAL(l.ev[3].group, 2);
    CU_ASSERT(l.ev[3].leader);
    CU_ASSERT_STRING_EQUAL(l.ev[1].name, "instructions");
    pmu_event_list_free(&l);
    const char *bad[] = {"{cycles", "cycles}", "{cycles,{instructions}}"};
    for (size_t i = 0; i < 3; i++) {
        struct pmu_event_list b = {0};
        err[0] = '\0';
        CU_ASSERT_EQUAL(pmu_parse_events(bad[i], &b, err, sizeof err), -1);
        CU_ASSERT(err[0] != '\0');
        pmu_event_list_free(&b);
    }
}

/* Every event of every preset encodes for the models it is written for. */
static void check_preset(enum metric_set set, const char *pmu, size_t want_n)
{
    struct pmu_preset_event ev[16];
    size_t n = pmu_preset_events(set, pmu, ev, 16);
    CU_ASSERT_EQUAL(n, want_n);
    bool cyc = false, ins = false, l2 = false, llc = false;
    for (size_t i = 0; i < n; i++) {
        struct pmu_event e;
        char err[768] = "";
        int rc = pmu_encode(ev[i].event, &e, err, sizeof err);
        if (rc != 0)
            fprintf(stderr, "\n  preset %s on %s: %s\n", metric_set_name(set), pmu ? pmu : "generic", err);
        CU_ASSERT_EQUAL(rc, 0);
        if (pmu && strcmp(pmu, "some_future_cpu") != 0) {
            CU_ASSERT_EQUAL(strncmp(ev[i].event, pmu, strlen(pmu)), 0);
            CU_ASSERT_EQUAL(e.attr.type, PERF_TYPE_RAW);
        }
        cyc |= ev[i].role == PMU_ROLE_CYCLES;
        ins |= ev[i].role == PMU_ROLE_INSTRUCTIONS;
        l2 |= ev[i].role == PMU_ROLE_L2_MISSES;
        llc |= ev[i].role == PMU_ROLE_LLC_MISSES;
    }
    CU_ASSERT(cyc && ins);
    CU_ASSERT(n >= 2 && !ev[0].grouped && ev[1].grouped); /* CPI pair scheduled together */
    if (set == METRICS_CACHE) {
        CU_ASSERT(llc);
        if (pmu)
            CU_ASSERT(l2);
    }
    if (set == METRICS_MEMORY)
        CU_ASSERT(llc); /* the bandwidth estimate's input */
}

static void test_presets(void)
{
    const char *pmus[] = {"skl", "skx", "icl", "spr", "amd64_fam19h_zen3", "amd64_fam19h_zen4"};
    for (size_t i = 0; i < sizeof pmus / sizeof pmus[0]; i++) {
        bool amd = strncmp(pmus[i], "amd64", 5) == 0;
        check_preset(METRICS_CPI, pmus[i], 2);
        check_preset(METRICS_MEMORY, pmus[i], 3);
        check_preset(METRICS_CACHE, pmus[i], amd ? 5 : 6); /* Zen: no per-core LLC references */
    }
    check_preset(METRICS_CPI, NULL, 2);
    check_preset(METRICS_CACHE, NULL, 4);
    check_preset(METRICS_CPI, "some_future_cpu", 2); /* unknown model: generic names */
    struct pmu_preset_event g[4];
    pmu_preset_events(METRICS_CPI, "some_future_cpu", g, 4);
    CU_ASSERT_STRING_EQUAL(g[0].event, "cycles");
    struct pmu_preset_event ev[4];
    CU_ASSERT_EQUAL(pmu_preset_events(METRICS_NONE, "skl", ev, 4), 0);
    enum metric_set s;
    CU_ASSERT_EQUAL(metric_set_parse("cpi", &s), 0);
    CU_ASSERT_EQUAL(s, METRICS_CPI);
    CU_ASSERT_EQUAL(metric_set_parse("memory", &s), 0);
    CU_ASSERT_EQUAL(s, METRICS_MEMORY);
    CU_ASSERT_EQUAL(metric_set_parse("cache", &s), 0);
    CU_ASSERT_EQUAL(s, METRICS_CACHE);
    CU_ASSERT_EQUAL(metric_set_parse("flops", &s), -1);
}

static void expect_error(const char *name, const char *const *wanted)
{
    struct pmu_event e;
    char err[768] = "";
    CU_ASSERT_EQUAL(pmu_encode(name, &e, err, sizeof err), -1);
    for (; *wanted; wanted++) {
        if (!strstr(err, *wanted))
            fprintf(stderr, "\n  error for %s lacks '%s': %s\n", name, *wanted, err);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, *wanted));
    }
}

static void test_close_matches(void)
{
    expect_error("skl::INST_RETIRD:ANY_P",
                 (const char *[]){"unknown event 'skl::INST_RETIRD:ANY_P'", "skl::INST_RETIRED", NULL});
    expect_error("amd64_fam19h_zen3::RETIRED_INSTRUCTONS",
                 (const char *[]){"closest known: amd64_fam19h_zen3::RETIRED_INSTRUCTIONS", NULL});
    expect_error("cycels", (const char *[]){"unknown event 'cycels'", "cycles", NULL});
    expect_error("skl::L2_RQSTS:MISSS", (const char *[]){"unit masks", "MISS", "REFERENCES", NULL});
    /* Nothing close: no made-up suggestion. */
    struct pmu_event e;
    char err[768] = "";
    CU_ASSERT_EQUAL(pmu_encode("zzzzzzzzzzzzzzzzzzzz", &e, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(strstr(err, "closest"));
    char out[256];
    CU_ASSERT(pmu_close_matches("L2_RQST", "skl", 3, out, sizeof out) >= 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "skl::L2_RQSTS"));
}

static void test_imc_source(void)
{
    const char *server[] = {"perf", "skx", "skx_unc_imc0", "skx_unc_imc1", "knl_unc_imc_uclk0", "skx_unc_cha0"};
    char ev[8][64];
    enum pmu_role roles[8];
    size_t n = pmu_imc_events(server, 6, ev, roles, 8);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    CU_ASSERT_STRING_EQUAL(ev[0], "skx_unc_imc0::UNC_M_CAS_COUNT:RD");
    CU_ASSERT_EQUAL(roles[0], PMU_ROLE_IMC_READS);
    CU_ASSERT_STRING_EQUAL(ev[3], "skx_unc_imc1::UNC_M_CAS_COUNT:WR");
    CU_ASSERT_EQUAL(roles[3], PMU_ROLE_IMC_WRITES);
    const char *amd[] = {"perf", "perf_raw", "amd64_fam19h_zen3", "amd64_fam19h_zen3_l3"};
    CU_ASSERT_EQUAL(pmu_imc_events(amd, 4, ev, roles, 8), 0); /* -> LLC x 64 estimate */
    CU_ASSERT_EQUAL(pmu_imc_events(server, 6, ev, roles, 3), 2); /* never overflows out */
}

static void test_unavailable_reason(void)
{
    char s[320];
    pmu_unavailable_reason(ENOENT, true, 2, s, sizeof s);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "no PMU: virtual machine"));
    CU_ASSERT_PTR_NULL(strchr(s, '\n'));
    pmu_unavailable_reason(EACCES, true, 3, s, sizeof s);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "perf_event_paranoid=3"));
    pmu_unavailable_reason(0, false, 2, s, sizeof s);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "unsupported CPU"));
    pmu_unavailable_reason(EOPNOTSUPP, false, 2, s, sizeof s);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "unsupported CPU"));
}

void register_pmu_tests(void)
{
    CU_pSuite s = CU_add_suite("pmu", suite_init, NULL);
    if (!s)
        return;
    CU_add_test(s, "vendor events encode (skl, icl, zen3)", test_vendor_encodings);
    CU_add_test(s, "generic, software and raw events", test_generic_software_raw);
    CU_add_test(s, "event groups", test_groups);
    CU_add_test(s, "presets encode on skl/skx/icl/spr/zen3/zen4", test_presets);
    CU_add_test(s, "unknown names list close matches", test_close_matches);
    CU_add_test(s, "bandwidth source from the PMUs present", test_imc_source);
    CU_add_test(s, "no-PMU reason sentence", test_unavailable_reason);
}
