/*
 * sampler/pmu/pmu.h — PMU events (names through libpfm4), the presets behind
 * --metrics, the launcher side of -e/-c, and counting mode (`opprof stat`).
 */
#ifndef OPPROF_PMU_H
#define OPPROF_PMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/format.h"
/* ------------------------------------------------------------------------- */
#include <linux/perf_event.h>
#include <sys/types.h>

/* What an event measures, so derived metrics find their inputs whatever the
 * vendor calls the event. */
enum pmu_role {
    PMU_ROLE_NONE = 0,
    PMU_ROLE_CYCLES,
    PMU_ROLE_INSTRUCTIONS,
    PMU_ROLE_L2_REFS,
    PMU_ROLE_L2_MISSES,
    PMU_ROLE_LLC_REFS,
    PMU_ROLE_LLC_MISSES,  /* last-level misses, or AMD data-cache fills from DRAM */
    PMU_ROLE_IMC_READS,   /* uncore memory-controller CAS reads (socket-wide) */
    PMU_ROLE_IMC_WRITES,
    PMU_ROLE_TASK_CLOCK,
    PMU_ROLE_CPU_CLOCK,
    PMU_ROLE_CONTEXT_SWITCHES,
    PMU_ROLE_CPU_MIGRATIONS,
    PMU_ROLE_PAGE_FAULTS,
    PMU_ROLE_MINOR_FAULTS,
    PMU_ROLE_MAJOR_FAULTS,
};

struct pmu_event {
    char name[256];              /* as the user (or the preset) wrote it */
    struct perf_event_attr attr; /* libpfm4's encoding (or ours for rNNNN) */
    enum pmu_role role;
    int group;                   /* index of the {...} group; equal = scheduled together */
    bool leader;                 /* first event of its group */
    bool hardware;               /* needs a PMU (anything not PERF_TYPE_SOFTWARE) */
    bool uncore;                 /* socket-wide: opened on one CPU, not on the task */
    int cpu;                     /* CPU to open an uncore event on, -1 otherwise */
};

struct pmu_event_list {
    struct pmu_event *ev;
    size_t n, cap;
    int ngroups;
};

/* pfm_initialize once (LIBPFM_* variables must be set before). 0 or -1. */
int pmu_init(void);
/* One name (libpfm4 name with optional pmu:: prefix, generic perf name,
 * software event, or rNNNN raw hex) -> encoding; user-mode only by default.
 * On an unknown name err gets one sentence with the closest known names. */
int pmu_encode(const char *name, struct pmu_event *out, char *err, size_t errlen);
/* "a,b,{c,d},e" -> list (appended). 0, or -1 with err set. */
int pmu_parse_events(const char *spec, struct pmu_event_list *list, char *err, size_t errlen);
int pmu_event_list_add(struct pmu_event_list *list, const struct pmu_event *ev);
void pmu_event_list_free(struct pmu_event_list *list);
/* Up to max names closest (edit distance) to name among the events of pmu
 * (libpfm name; NULL: every PMU present plus the generic perf ones),
 * ", "-joined into out. Returns how many. */
size_t pmu_close_matches(const char *name, const char *pmu, size_t max, char *out, size_t outlen);
/* The host's core PMU as libpfm4 names it ("skl", "amd64_fam19h_zen3"), or
 * NULL when libpfm4 knows no core PMU here (virtual machine, unknown CPU). */
const char *pmu_core_pmu_name(void);
/* Why hardware counting is impossible, as one sentence: err is the errno of
 * perf_event_open (0: libpfm4 found no core PMU), hypervisor is the
 * /proc/cpuinfo flag, paranoid kernel.perf_event_paranoid. */
void pmu_unavailable_reason(int err, bool hypervisor, int paranoid, char *out, size_t outlen);
bool pmu_cpu_has_hypervisor_flag(void);
int pmu_read_paranoid(void);

/* Presets: events named for what the user wants to know. */
enum metric_set {
    METRICS_NONE = 0,
    METRICS_CPI,    /* cycles, instructions */
    METRICS_MEMORY, /* + memory bandwidth (uncore CAS, else LLC misses x 64 estimate) */
    METRICS_CACHE,  /* + L2 and LLC misses and references */
};
int metric_set_parse(const char *text, enum metric_set *out);
const char *metric_set_name(enum metric_set set);
struct pmu_preset_event {
    char event[256];   /* PMU-prefixed libpfm4 name, or a generic perf name */
    bool grouped;      /* scheduled with the previous event ({cycles,instructions}) */
    enum pmu_role role;
};
/* The preset's core events for the core PMU core_pmu (NULL or unknown: the
 * generic perf names). Returns how many were written (<= max). */
size_t pmu_preset_events(enum metric_set set, const char *core_pmu, struct pmu_preset_event *out,
                         size_t max);
/* Memory-controller CAS events from the names of the PMUs present: writes
 * "box::UNC_M_CAS_COUNT:RD"/":WR" pairs into out (each outlen bytes) and
 * roles. Returns how many; 0 means bandwidth must be estimated. */
size_t pmu_imc_events(const char *const *present, size_t npresent, char (*out)[64],
                      enum pmu_role *roles, size_t max);
/* Adds the preset's events for this host to list; note gets a sentence when
 * the bandwidth is an estimate. 0 or -1 (err). */
int pmu_preset_add(enum metric_set set, struct pmu_event_list *list, char *note, size_t notelen,
                   char *err, size_t errlen);

/* record -e: the events the agent counts per sample, encoded for
 * OPR_ENV_COUNTERS into env (empty: none) and their names ", "-joined into
 * names (leader->active, from -c: the first event leads, it is not counted). Events that cannot be opened here (no PMU) are dropped with one line
 * on stderr naming the reason; task-clock (the sampling timer) is not
 * counted again. 0, or -1 (one line printed) on a bad name or too many. */
struct record_leader;
int pmu_record_counters(const char *events, const struct record_leader *leader, char *env, size_t envlen,
                        char *names, size_t nameslen);

/* record -e EVENTS -c N: the sampling leader, the first event of EVENTS. */
#define OPR_MIN_HW_SAMPLE_PERIOD 100000 /* -c floor for hardware leaders (record_counters.c) */
struct record_leader {
    bool active;           /* samples are taken on this event (else on the timer) */
    char name[256];
    char env[160];         /* OPR_ENV_LEADER */
    uint64_t period;       /* events per sample */
    bool user_only;        /* exclude_kernel was needed */
    int role;              /* enum pmu_role (info: sample_role) */
};
/* Chooses the leader: 0 with out->active, or 0 with !active when this machine
 * cannot count the event (no PMU: sampling stays on the timer, and
 * pmu_record_counters names it in its one line), or -1 (one line printed) on
 * a bad name or an event that can never lead a per-thread sample (uncore,
 * task-clock: use -F). */
int pmu_record_leader(const char *events, uint64_t period, struct record_leader *out);

/* Counting mode (opprof stat). */
struct stat_count {
    char name[256];
    enum pmu_role role;
    bool hardware, uncore;
    bool user_only;        /* exclude_kernel was needed */
    bool from_rusage;      /* value taken from wait4's rusage (see stat.c) */
    uint64_t value;        /* raw count */
    uint64_t time_enabled, time_running;
};

struct stat_result {
    struct stat_count *counts; /* only events that were really counted */
    size_t ncounts;
    uint64_t wall_ns;          /* from exec to exit */
    uint64_t utime_ns, stime_ns; /* rusage of the workload and its waited-for children */
    long minflt, majflt, nvcsw, nivcsw, maxrss_kb;
    int exit_status;           /* what opprof exits with */
    int exit_signal;
    pid_t pid;
    char no_pmu_reason[320];   /* "" when every hardware event was counted */
    char note[256];            /* e.g. bandwidth estimate label */
    long online_cpus;
};

struct stat_options {
    const char *events;        /* -e (NULL: defaults) */
    enum metric_set metrics;
    char *const *argv;
    bool no_default_hw;        /* do not add cycles,instructions */
};

/* Runs argv with counters (fork, open on the waiting child with inherit and
 * enable_on_exec, release, wait). Returns the workload's exit status (127/126
 * when it could not be run, 2 when counting could not start). */
int stat_run(const struct stat_options *o, struct stat_result *r);
void stat_result_free(struct stat_result *r);

#endif
