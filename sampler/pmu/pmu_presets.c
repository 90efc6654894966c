/*
 * sampler/pmu/pmu_presets.c — `--metrics cpi|memory|cache`: the events each
 * question needs, per CPU model, chosen through libpfm4's name for the core PMU.
 *
 * Vendor event names (not perf's generic cycles/instructions) are used where
 * they exist because the generic cache events map to different things on
 * different models; the generic names are the fallback for models not listed.
 * Memory bandwidth comes from uncore memory-controller CAS counts when such a
 * PMU is present (socket-wide), else from LLC misses x 64 B, labelled an
 * estimate by the renderer. Every name here is checked by tests/unit/test_pmu.c
 * with LIBPFM_ENCODE_INACTIVE=1 against the PMU models it is written for.
 */
#include <stdio.h>
#include <string.h>

#include "sampler/pmu/pmu.h"
/* After sampler.h: libpfm4's perf_event.h steps aside for the kernel's. */
#include <perfmon/pfmlib_perf_event.h>

struct preset_row {
    const char *event; /* without the PMU prefix */
    enum pmu_role role;
};

struct model_table {
    const char *const *pmus; /* libpfm4 core PMU names this table is for */
    struct preset_row cycles, instructions, l2_misses, l2_refs, llc_misses, llc_refs;
};

/* Skylake, Cascade Lake, Cooper Lake: one event layout. */
static const char *const skl_pmus[] = {"skl", "skx", "clx", NULL};
/* Ice Lake renamed the L2 and LLC reference umasks; Sapphire Rapids took the
 * LLC one back to REFERENCE. */
static const char *const icl_pmus[] = {"icl", "icx", NULL};
static const char *const spr_pmus[] = {"spr", NULL};
static const char *const zen3_pmus[] = {"amd64_fam19h_zen3", NULL};
static const char *const zen4_pmus[] = {"amd64_fam19h_zen4", NULL};

static const struct model_table tables[] = {
    {skl_pmus,
     {"CPU_CLK_UNHALTED:THREAD_P", PMU_ROLE_CYCLES},
     {"INST_RETIRED:ANY_P", PMU_ROLE_INSTRUCTIONS},
     {"L2_RQSTS:MISS", PMU_ROLE_L2_MISSES},
     {"L2_RQSTS:REFERENCES", PMU_ROLE_L2_REFS},
     {"LONGEST_LAT_CACHE:MISS", PMU_ROLE_LLC_MISSES},
     {"LONGEST_LAT_CACHE:REFERENCE", PMU_ROLE_LLC_REFS}},
    {icl_pmus,
     {"CPU_CLK_UNHALTED:THREAD_P", PMU_ROLE_CYCLES},
     {"INST_RETIRED:ANY_P", PMU_ROLE_INSTRUCTIONS},
     {"L2_RQSTS:ALL_DEMAND_MISS", PMU_ROLE_L2_MISSES},
     {"L2_RQSTS:ALL_DEMAND_REFERENCES", PMU_ROLE_L2_REFS},
     {"LONGEST_LAT_CACHE:MISS", PMU_ROLE_LLC_MISSES},
     {"LONGEST_LAT_CACHE:REFERENCES", PMU_ROLE_LLC_REFS}},
    {spr_pmus,
     {"CPU_CLK_UNHALTED:THREAD_P", PMU_ROLE_CYCLES},
     {"INST_RETIRED:ANY_P", PMU_ROLE_INSTRUCTIONS},
     {"L2_RQSTS:ALL_DEMAND_MISS", PMU_ROLE_L2_MISSES},
     {"L2_RQSTS:ALL_DEMAND_REFERENCES", PMU_ROLE_L2_REFS},
     {"LONGEST_LAT_CACHE:MISS", PMU_ROLE_LLC_MISSES},
     {"LONGEST_LAT_CACHE:REFERENCE", PMU_ROLE_LLC_REFS}},
    /* Zen: L2 misses = data-cache read misses + instruction fills that missed;
     * the L3 is an uncore PMU that cannot count one process, so "LLC misses"
     * are data-cache fills served by DRAM (local or remote). No LLC refs. */
    {zen3_pmus,
     {"CYCLES_NOT_IN_HALT", PMU_ROLE_CYCLES},
     {"RETIRED_INSTRUCTIONS", PMU_ROLE_INSTRUCTIONS},
     {"CORE_TO_L2_CACHEABLE_REQUEST_ACCESS_STATUS:LS_RD_BLK_C:IC_FILL_MISS", PMU_ROLE_L2_MISSES},
     {"CORE_TO_L2_CACHEABLE_REQUEST_ACCESS_STATUS:LS_RD_BLK_C_S:LS_RD_BLK_L_HIT_X:LS_RD_BLK_L_HIT_S:"
      "LS_RD_BLK_X:LS_RD_BLK_C:IC_FILL_HIT_X:IC_FILL_HIT_S:IC_FILL_MISS", PMU_ROLE_L2_REFS},
     {"ANY_DATA_CACHE_FILLS_FROM_SYSTEM:MEM_IO_LCL:MEM_IO_RMT", PMU_ROLE_LLC_MISSES},
     {NULL, PMU_ROLE_NONE}},
    {zen4_pmus,
     {"CYCLES_NOT_IN_HALT", PMU_ROLE_CYCLES},
     {"RETIRED_INSTRUCTIONS", PMU_ROLE_INSTRUCTIONS},
     {"CORE_TO_L2_CACHEABLE_REQUEST_ACCESS_STATUS:LS_RD_BLK_C:IC_FILL_MISS", PMU_ROLE_L2_MISSES},
     {"CORE_TO_L2_CACHEABLE_REQUEST_ACCESS_STATUS:LS_RD_BLK_C_S:LS_RD_BLK_L_HIT_X:LS_RD_BLK_L_HIT_S:"
      "LS_RD_BLK_X:LS_RD_BLK_C:IC_FILL_HIT_X:IC_FILL_HIT_S:IC_FILL_MISS", PMU_ROLE_L2_REFS},
     {"ANY_DATA_CACHE_FILLS_FROM_SYSTEM:DRAM_IO_NEAR:DRAM_IO_FAR", PMU_ROLE_LLC_MISSES},
     {NULL, PMU_ROLE_NONE}},
};

/* perf's generic names: what the kernel maps for any CPU it knows. */
static const struct model_table generic = {
    NULL,
    {"cycles", PMU_ROLE_CYCLES},
    {"instructions", PMU_ROLE_INSTRUCTIONS},
    {NULL, PMU_ROLE_NONE},
    {NULL, PMU_ROLE_NONE},
    {"cache-misses", PMU_ROLE_LLC_MISSES},
    {"cache-references", PMU_ROLE_LLC_REFS},
};

int metric_set_parse(const char *text, enum metric_set *out)
{
    if (strcmp(text, "cpi") == 0)
        *out = METRICS_CPI;
    else if (strcmp(text, "memory") == 0 || strcmp(text, "bandwidth") == 0)
        *out = METRICS_MEMORY;
    else if (strcmp(text, "cache") == 0)
        *out = METRICS_CACHE;
    else
        return -1;
    return 0;
}

const char *metric_set_name(enum metric_set set)
{
    switch (set) {
    case METRICS_NONE: return "none";
    case METRICS_CPI: return "cpi";
    case METRICS_MEMORY: return "memory";
    case METRICS_CACHE: return "cache";
    }
    return "?";
}

static const struct model_table *table_for(const char *core_pmu)
{
    for (size_t t = 0; core_pmu && t < sizeof tables / sizeof tables[0]; t++)
        for (const char *const *p = tables[t].pmus; *p; p++)
            if (strcmp(*p, core_pmu) == 0)
                return &tables[t];
    return NULL;
}

static void put(struct pmu_preset_event *out, size_t max, size_t *n, const char *prefix,
                const struct preset_row *row, bool grouped)
{
    if (!row->event || *n >= max)
        return;
    struct pmu_preset_event *e = &out[(*n)++];
    if (prefix)
        snprintf(e->event, sizeof e->event, "%s::%s", prefix, row->event);
    else
        snprintf(e->event, sizeof e->event, "%s", row->event);
    e->role = row->role;
    e->grouped = grouped;
}

size_t pmu_preset_events(enum metric_set set, const char *core_pmu, struct pmu_preset_event *out,
                         size_t max)
{
    const struct model_table *t = table_for(core_pmu);
    const char *prefix = t ? core_pmu : NULL;
    if (!t)
        t = &generic;
    size_t n = 0;
    if (set == METRICS_NONE)
        return 0;
    /* Cycles and instructions in one group: CPI from one schedule. */
    put(out, max, &n, prefix, &t->cycles, false);
    put(out, max, &n, prefix, &t->instructions, true);
    if (set == METRICS_CACHE) {
        put(out, max, &n, prefix, &t->l2_misses, false);
        put(out, max, &n, prefix, &t->l2_refs, true);
        put(out, max, &n, prefix, &t->llc_misses, false);
        put(out, max, &n, prefix, &t->llc_refs, t->llc_misses.event != NULL);
    } else if (set == METRICS_MEMORY) {
        /* LLC misses always: per process, and the bandwidth fallback. */
        put(out, max, &n, prefix, &t->llc_misses, false);
    }
    return n;
}

/* Uncore IMC boxes whose CAS_COUNT event libpfm4 knows (server parts). */
static const char *const imc_families[] = {"skx_unc_imc", "bdx_unc_imc", "hswep_unc_imc", "ivbep_unc_imc",
                                           "snbep_unc_imc"};

size_t pmu_imc_events(const char *const *present, size_t npresent, char (*out)[64], enum pmu_role *roles,
                      size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < npresent; i++) {
        for (size_t f = 0; f < sizeof imc_families / sizeof imc_families[0]; f++) {
            size_t len = strlen(imc_families[f]);
            const char *rest = present[i] + len;
            /* "skx_unc_imc3" yes, "knl_unc_imc_uclk0" no. */
            if (strncmp(present[i], imc_families[f], len) != 0 || !(*rest >= '0' && *rest <= '9'))
                continue;
            if (n + 2 > max)
                return n;
            snprintf(out[n], 64, "%s::UNC_M_CAS_COUNT:RD", present[i]);
            roles[n++] = PMU_ROLE_IMC_READS;
            snprintf(out[n], 64, "%s::UNC_M_CAS_COUNT:WR", present[i]);
            roles[n++] = PMU_ROLE_IMC_WRITES;
        }
    }
    return n;
}

static size_t present_pmus(const char **names, char (*buf)[64], size_t max)
{
    size_t n = 0;
    int i;
    pfm_for_all_pmus(i) {
        pfm_pmu_info_t pi;
        memset(&pi, 0, sizeof pi);
        pi.size = sizeof pi;
        if (n < max && pfm_get_pmu_info(i, &pi) == PFM_SUCCESS && pi.is_present) {
            snprintf(buf[n], 64, "%s", pi.name);
            names[n] = buf[n];
            n++;
        }
    }
    return n;
}

int pmu_preset_add(enum metric_set set, struct pmu_event_list *list, char *note, size_t notelen,
                   char *err, size_t errlen)
{
    if (note && notelen)
        note[0] = '\0';
    if (set == METRICS_NONE)
        return 0;
    if (pmu_init() != 0) {
        snprintf(err, errlen, "libpfm4 could not be initialized");
        return -1;
    }
    struct pmu_preset_event ev[16];
    size_t n = pmu_preset_events(set, pmu_core_pmu_name(), ev, 16);
    for (size_t i = 0; i < n; i++) {
        struct pmu_event e;
        if (pmu_encode(ev[i].event, &e, err, errlen) != 0)
            return -1;
        e.role = ev[i].role;
        if (ev[i].grouped && list->n > 0) {
            e.group = list->ev[list->n - 1].group;
            e.leader = false;
        } else {
            e.group = list->ngroups++;
            e.leader = true;
        }
        if (pmu_event_list_add(list, &e) != 0)
            return -1;
    }
    if (set == METRICS_MEMORY) {
        static char names_buf[64][64];
        const char *names[64];
        size_t np = present_pmus(names, names_buf, 64);
        char imc[32][64];
        enum pmu_role roles[32];
        size_t ni = pmu_imc_events(names, np, imc, roles, 32);
        for (size_t i = 0; i < ni; i++) {
            struct pmu_event e;
            if (pmu_encode(imc[i], &e, err, errlen) != 0)
                continue; /* a box the kernel does not expose: the others still count */
            e.role = roles[i];
            e.uncore = true;
            if (e.cpu < 0)
                e.cpu = 0;
            e.group = list->ngroups++;
            e.leader = true;
            if (pmu_event_list_add(list, &e) != 0)
                return -1;
        }
        if (ni == 0 && note)
            snprintf(note, notelen, "no memory-controller (uncore) counters here: bandwidth is "
                                    "estimated from LLC misses x 64 B");
    }
    return 0;
}
