/*
 * sampler/pmu/pmu.c — event names to perf_event encodings, through libpfm4.
 *
 * `-e` takes what perf users type: generic names (cycles, instructions,
 * cache-misses), software events (task-clock, cs, page-faults, ...), vendor
 * names with or without a PMU prefix (INST_RETIRED:ANY_P,
 * skl::INST_RETIRED:ANY_P), raw rNNNN, and {a,b} groups. libpfm4 does the
 * encoding; this file adds the grouping, the role of each event (so derived
 * metrics find cycles and instructions whatever the vendor calls them), a
 * "did you mean" list from edit distance over libpfm4's event names, and the
 * one sentence that explains why hardware counters are unavailable.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sampler/pmu/pmu.h"
/* After sampler.h: libpfm4's perf_event.h steps aside for the kernel's. */
#include <perfmon/pfmlib_perf_event.h>

static int pfm_state; /* 0 not tried, 1 ok, -1 failed */

int pmu_init(void)
{
    if (pfm_state == 0)
        pfm_state = pfm_initialize() == PFM_SUCCESS ? 1 : -1;
    return pfm_state == 1 ? 0 : -1;
}

/* ---- roles ------------------------------------------------------------------ */

static enum pmu_role role_of(const struct perf_event_attr *a)
{
    if (a->type == PERF_TYPE_SOFTWARE) {
        switch (a->config) {
        case PERF_COUNT_SW_TASK_CLOCK: return PMU_ROLE_TASK_CLOCK;
        case PERF_COUNT_SW_CPU_CLOCK: return PMU_ROLE_CPU_CLOCK;
        case PERF_COUNT_SW_CONTEXT_SWITCHES: return PMU_ROLE_CONTEXT_SWITCHES;
        case PERF_COUNT_SW_CPU_MIGRATIONS: return PMU_ROLE_CPU_MIGRATIONS;
        case PERF_COUNT_SW_PAGE_FAULTS: return PMU_ROLE_PAGE_FAULTS;
        case PERF_COUNT_SW_PAGE_FAULTS_MIN: return PMU_ROLE_MINOR_FAULTS;
        case PERF_COUNT_SW_PAGE_FAULTS_MAJ: return PMU_ROLE_MAJOR_FAULTS;
        }
    } else if (a->type == PERF_TYPE_HARDWARE) {
        switch (a->config) {
        case PERF_COUNT_HW_CPU_CYCLES: return PMU_ROLE_CYCLES;
        case PERF_COUNT_HW_INSTRUCTIONS: return PMU_ROLE_INSTRUCTIONS;
        case PERF_COUNT_HW_CACHE_MISSES: return PMU_ROLE_LLC_MISSES;
        case PERF_COUNT_HW_CACHE_REFERENCES: return PMU_ROLE_LLC_REFS;
        }
    }
    return PMU_ROLE_NONE;
}

/* ---- close matches ---------------------------------------------------------- */

/* Case-insensitive Levenshtein distance (two rows; names are short). */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 255 || lb > 255)
        return 1000;
    size_t prev[256], cur[256];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb];
}

struct match {
    char name[96];
    size_t dist;
};

static void consider(struct match *best, size_t max, size_t *nbest, const char *pmu, const char *ev,
                     const char *want)
{
    size_t d = edit_distance(want, ev);
    char full[96];
    /* The generic perf PMU's names are given bare, in lower case, as perf spells them. */
    if (pmu && strcmp(pmu, "perf") != 0)
        snprintf(full, sizeof full, "%s::%s", pmu, ev);
    else {
        snprintf(full, sizeof full, "%s", ev);
        for (char *p = full; *p; p++)
            *p = (char)tolower((unsigned char)*p);
    }
    for (size_t i = 0; i < *nbest; i++)
        if (strcmp(best[i].name, full) == 0)
            return;
    size_t pos = *nbest;
    while (pos > 0 && best[pos - 1].dist > d)
        pos--;
    if (pos >= max)
        return;
    size_t last = *nbest < max ? *nbest : max - 1;
    memmove(&best[pos + 1], &best[pos], (last - pos) * sizeof best[0]);
    snprintf(best[pos].name, sizeof best[pos].name, "%s", full);
    best[pos].dist = d;
    if (*nbest < max)
        (*nbest)++;
}

size_t pmu_close_matches(const char *name, const char *pmu, size_t max, char *out, size_t outlen)
{
    if (outlen)
        out[0] = '\0';
    if (max == 0 || pmu_init() != 0)
        return 0;
    if (max > 16)
        max = 16;
    /* Compare the event part only: "skl::L2_RQST:MISS" -> "L2_RQST". */
    char want[128];
    const char *p = strstr(name, "::");
    snprintf(want, sizeof want, "%s", p ? p + 2 : name);
    char *colon = strchr(want, ':');
    if (colon)
        *colon = '\0';
    struct match best[16];
    size_t nbest = 0;
    int i;
    pfm_for_all_pmus(i) {
        pfm_pmu_info_t pi;
        memset(&pi, 0, sizeof pi);
        pi.size = sizeof pi;
        if (pfm_get_pmu_info(i, &pi) != PFM_SUCCESS)
            continue;
        if (pmu ? strcmp(pi.name, pmu) != 0 : !pi.is_present)
            continue;
        for (int e = pi.first_event; e != -1; e = pfm_get_event_next(e)) {
            pfm_event_info_t ei;
            memset(&ei, 0, sizeof ei);
            ei.size = sizeof ei;
            if (pfm_get_event_info(e, PFM_OS_NONE, &ei) == PFM_SUCCESS && ei.name)
                consider(best, max, &nbest, pi.name, ei.name, want);
        }
    }
    size_t used = 0, shown = 0;
    /* Far-off names are noise, not suggestions. */
    size_t limit = strlen(want) / 2 + 2;
    for (size_t k = 0; k < nbest; k++) {
        if (best[k].dist > limit)
            break;
        int n = snprintf(out + used, outlen - used, "%s%s", shown ? ", " : "", best[k].name);
        if (n < 0 || (size_t)n >= outlen - used)
            break;
        used += (size_t)n;
        shown++;
    }
    return shown;
}

/* Lists the unit masks of the event named in name (for PFM_ERR_UMASK/ATTR). */
static void list_umasks(const char *name, char *out, size_t outlen)
{
    out[0] = '\0';
    char base[160];
    snprintf(base, sizeof base, "%s", name);
    char *sep = strstr(base, "::");
    char *colon = strchr(sep ? sep + 2 : base, ':');
    if (colon)
        *colon = '\0';
    int idx = pfm_find_event(base);
    if (idx < 0)
        return;
    pfm_event_info_t ei;
    memset(&ei, 0, sizeof ei);
    ei.size = sizeof ei;
    if (pfm_get_event_info(idx, PFM_OS_NONE, &ei) != PFM_SUCCESS)
        return;
    size_t used = 0;
    for (int a = 0; a < ei.nattrs; a++) {
        pfm_event_attr_info_t ai;
        memset(&ai, 0, sizeof ai);
        ai.size = sizeof ai;
        if (pfm_get_event_attr_info(idx, a, PFM_OS_NONE, &ai) != PFM_SUCCESS || ai.type != PFM_ATTR_UMASK)
            continue;
        int n = snprintf(out + used, outlen - used, "%s%s", used ? ", " : "", ai.name);
        if (n < 0 || (size_t)n >= outlen - used)
            break;
        used += (size_t)n;
    }
}

static bool pmu_present(const char *pmu)
{
    int i;
    pfm_for_all_pmus(i) {
        pfm_pmu_info_t pi;
        memset(&pi, 0, sizeof pi);
        pi.size = sizeof pi;
        if (pfm_get_pmu_info(i, &pi) == PFM_SUCCESS && pi.name && strcmp(pi.name, pmu) == 0)
            return pi.is_present || getenv("LIBPFM_ENCODE_INACTIVE") != NULL;
    }
    return false;
}

/* ---- encoding --------------------------------------------------------------- */

static bool parse_raw(const char *name, uint64_t *config)
{
    if (name[0] != 'r' || !name[1] || strlen(name) > 17)
        return false;
    for (const char *p = name + 1; *p; p++)
        if (!isxdigit((unsigned char)*p))
            return false;
    *config = strtoull(name + 1, NULL, 16);
    return true;
}

int pmu_encode(const char *name, struct pmu_event *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->cpu = -1;
    if (!name[0]) {
        snprintf(err, errlen, "empty event name");
        return -1;
    }
    if (strlen(name) >= sizeof out->name) {
        snprintf(err, errlen, "event name too long: %.40s...", name);
        return -1;
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    out->attr.size = sizeof out->attr;
    uint64_t raw;
    if (parse_raw(name, &raw)) {
        /* perf's raw syntax, done here so it works whatever PMUs libpfm4 sees. */
        out->attr.type = PERF_TYPE_RAW;
        out->attr.config = raw;
        out->attr.exclude_kernel = 1;
        out->attr.exclude_hv = 1;
        out->hardware = true;
        return 0;
    }
    if (pmu_init() != 0) {
        snprintf(err, errlen, "libpfm4 could not be initialized: event names cannot be encoded");
        return -1;
    }
    pfm_perf_encode_arg_t arg;
    memset(&arg, 0, sizeof arg);
    arg.size = sizeof arg;
    arg.attr = &out->attr;
    /* User mode only by default, as opprof record samples: it works at the
     * default perf_event_paranoid=2 without privileges. */
    int rc = pfm_get_os_event_encoding(name, PFM_PLM3, PFM_OS_PERF_EVENT, &arg);
    if (rc != PFM_SUCCESS) {
        char near[512] = "";
        const char *pmu = NULL;
        char pmubuf[64];
        const char *sep = strstr(name, "::");
        if (sep && (size_t)(sep - name) < sizeof pmubuf) {
            memcpy(pmubuf, name, (size_t)(sep - name));
            pmubuf[sep - name] = '\0';
            pmu = pmubuf;
        }
        if (rc == PFM_ERR_UMASK || rc == PFM_ERR_ATTR || rc == PFM_ERR_ATTR_VAL) {
            list_umasks(name, near, sizeof near);
            snprintf(err, errlen, "event '%s': %s%s%s", name, pfm_strerror(rc),
                     near[0] ? "; this event's unit masks: " : "", near);
            return -1;
        }
        if (rc == PFM_ERR_NOTFOUND || rc == PFM_ERR_NOTSUPP) {
            /* With a pmu:: prefix, that PMU's events; else those of the PMUs present. */
            pmu_close_matches(name, pmu, 5, near, sizeof near);
            /* A vendor-looking name where libpfm4 sees no core PMU, or another
             * CPU's PMU: say why rather than only "unknown". */
            bool vendorish = strchr(name, '_') || strchr(name, ':');
            bool no_core = !pmu && vendorish && pmu_core_pmu_name() == NULL;
            bool foreign = pmu && !pmu_present(pmu);
            char why[200] = "";
            if (no_core)
                snprintf(why, sizeof why, "; libpfm4 recognises no core PMU on this machine, so only "
                                          "generic and software events (and pmu::EVENT names) are known");
            else if (foreign)
                snprintf(why, sizeof why, "; PMU '%s' is not this machine's (LIBPFM_ENCODE_INACTIVE=1 "
                                          "encodes another CPU's events)", pmu);
            snprintf(err, errlen, "unknown event '%s'%s%s%s (see `opprof stat --list`)", name,
                     near[0] ? "; closest known: " : "", near, why);
            return -1;
        }
        snprintf(err, errlen, "event '%s': %s", name, pfm_strerror(rc));
        return -1;
    }
    out->attr.size = sizeof out->attr;
    out->role = role_of(&out->attr);
    out->hardware = out->attr.type != PERF_TYPE_SOFTWARE;
    /* libpfm4 sets arg.cpu for PMUs that must be opened per CPU (uncore). */
    if (arg.cpu >= 0) {
        out->uncore = true;
        out->cpu = arg.cpu;
    }
    if (out->hardware && out->attr.type > PERF_TYPE_MAX - 1 && out->attr.type != PERF_TYPE_RAW) {
        /* A dynamic PMU type (uncore boxes under /sys/bus/event_source). */
        out->uncore = true;
        if (out->cpu < 0)
            out->cpu = 0;
    }
    return 0;
}

int pmu_event_list_add(struct pmu_event_list *l, const struct pmu_event *ev)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        struct pmu_event *p = realloc(l->ev, cap * sizeof *p);
        if (!p)
            return -1;
        l->ev = p;
        l->cap = cap;
    }
    l->ev[l->n++] = *ev;
    return 0;
}

void pmu_event_list_free(struct pmu_event_list *l)
{
    free(l->ev);
    memset(l, 0, sizeof *l);
}

int pmu_parse_events(const char *spec, struct pmu_event_list *l, char *err, size_t errlen)
{
    bool in_group = false, first_in_group = false;
    const char *p = spec;
    while (*p) {
        if (*p == ',' || *p == ' ') {
            p++;
            continue;
        }
        if (*p == '{') {
            if (in_group) {
                snprintf(err, errlen, "-e %s: groups cannot be nested", spec);
                return -1;
            }
            in_group = first_in_group = true;
            l->ngroups++;
            p++;
            continue;
        }
        if (*p == '}') {
            if (!in_group) {
                snprintf(err, errlen, "-e %s: '}' without '{'", spec);
                return -1;
            }
            in_group = false;
            p++;
            continue;
        }
        size_t len = strcspn(p, ",{} ");
        char name[256];
        if (len >= sizeof name) {
            snprintf(err, errlen, "event name too long: %.40s...", p);
            return -1;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        p += len;
        struct pmu_event ev;
        if (pmu_encode(name, &ev, err, errlen) != 0)
            return -1;
        if (in_group) {
            ev.group = l->ngroups - 1;
            ev.leader = first_in_group;
            first_in_group = false;
        } else {
            /* An event on its own is a group of one. */
            ev.group = l->ngroups++;
            ev.leader = true;
        }
        if (pmu_event_list_add(l, &ev) != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    if (in_group) {
        snprintf(err, errlen, "-e %s: '{' without '}'", spec);
        return -1;
    }
    return 0;
}

/* ---- the host ------------------------------------------------------------------- */

const char *pmu_core_pmu_name(void)
{
    static char name[64];
    if (pmu_init() != 0)
        return NULL;
    const char *found = NULL;
    int i;
    pfm_for_all_pmus(i) {
        pfm_pmu_info_t pi;
        memset(&pi, 0, sizeof pi);
        pi.size = sizeof pi;
        if (pfm_get_pmu_info(i, &pi) != PFM_SUCCESS || !pi.is_present || pi.type != PFM_PMU_TYPE_CORE)
            continue;
        /* The architecture's default PMU wins; any present core PMU otherwise. */
        if (pi.is_dfl || !found) {
            snprintf(name, sizeof name, "%s", pi.name);
            found = name;
            if (pi.is_dfl)
                break;
        }
    }
    return found;
}

bool pmu_cpu_has_hypervisor_flag(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return false;
    char line[4096];
    bool yes = false;
    while (!yes && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0)
            continue;
        for (char *t = strtok(line, " \t\n"); t; t = strtok(NULL, " \t\n"))
            if (strcmp(t, "hypervisor") == 0)
                yes = true;
        break;
    }
    fclose(f);
    return yes;
}

int pmu_read_paranoid(void)
{
    FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
    int v = -99;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = -99;
        fclose(f);
    }
    return v;
}

void pmu_unavailable_reason(int err, bool hypervisor, int paranoid, char *out, size_t outlen)
{
    if (err == EACCES || err == EPERM)
        snprintf(out, outlen,
                 "no PMU access: perf_event_paranoid=%d forbids hardware counters for this user (%s); "
                 "`sudo sysctl kernel.perf_event_paranoid=2` or lower allows them",
                 paranoid, strerror(err));
    else if (hypervisor)
        snprintf(out, outlen,
                 "no PMU: virtual machine whose hypervisor exposes no hardware performance counters%s%s%s",
                 err ? " (perf_event_open: " : "", err ? strerror(err) : "", err ? ")" : "");
    else if (err == 0)
        snprintf(out, outlen, "no PMU: unsupported CPU (libpfm4 knows no core PMU for this processor)");
    else
        snprintf(out, outlen, "no PMU: unsupported CPU or kernel without its PMU driver (perf_event_open: %s)",
                 strerror(err));
}
