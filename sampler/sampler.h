/*
 * sampler/sampler.h — the sampler stage's interface.
 *
 * Two halves live here:
 *   1. The raw on-disk format (documented in docs/format.md). The injected agent
 *      writes it; analyze/ reads it. Nothing after the sampler reads anything else.
 *   2. The launcher API used by `opprof record` (fork/exec the workload with the
 *      agent preloaded, forward signals, wait, summarize).
 *
 * All multi-byte integers in the raw format are little-endian (the host order on
 * x86-64, the only target so far); every record is 8-byte aligned.
 */
#ifndef OPPROF_SAMPLER_H
#define OPPROF_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* ------------------------------------------------------------------------- */
/* Raw format                                                                 */
/* ------------------------------------------------------------------------- */

#define OPR_FORMAT_VERSION 1
/* The info file of a record -c result says version 2: its samples are events,
 * not time, and a reader that only knows version 1 must refuse it rather
 * than read each sample as one timer period. Streams stay version 1. */
#define OPR_INFO_VERSION_EVENTS 2
#define OPR_FILE_MAGIC "OPPROFR1" /* 8 bytes, no terminator in the file */
#define OPR_INFO_FILE "info"      /* key=value text written by the launcher */
#define OPR_LIVE_FILE ".live"     /* shared counters for the live status line */
#define OPR_MAX_FRAMES 256        /* native frames kept per sample */
#define OPR_MAX_PYFRAMES 128      /* Python frames kept per sample */
#define OPR_BUILD_ID_MAX 20

/* Per-process stream file: "proc-<pid>-<generation>.raw". A process that calls
 * exec() gets a new generation for the new image (same pid). */
struct opr_file_header {
    char magic[8];          /* OPR_FILE_MAGIC */
    uint32_t version;       /* OPR_FORMAT_VERSION */
    uint32_t header_size;   /* sizeof(struct opr_file_header) */
    uint32_t pid;
    uint32_t ppid;
    uint64_t start_ns;      /* CLOCK_MONOTONIC when the agent started in this image */
    uint64_t period_ns;     /* sampling period of the timer event */
};

enum opr_record_type {
    OPR_REC_PROCESS = 1, /* struct opr_process + exe path + NUL-separated argv */
    OPR_REC_MAP = 2,     /* struct opr_map + path */
    OPR_REC_THREAD = 3,  /* struct opr_thread */
    OPR_REC_STACK = 4,   /* struct opr_stack + uint64_t pcs[nframes] */
    OPR_REC_SAMPLE = 5,  /* struct opr_sample */
    OPR_REC_LOST = 6,    /* struct opr_lost (cumulative counters) */
    OPR_REC_END = 7,     /* struct opr_end: the image shut down cleanly */
    OPR_REC_NOTE = 8,    /* struct opr_note + text: a warning the agent wants shown */
    OPR_REC_PYCODE = 9,  /* struct opr_pycode + filename + qualname */
    OPR_REC_PYSTACK = 10,/* struct opr_pystack + struct opr_pyframe[nframes] */
    OPR_REC_AGENT_COST = 11, /* struct opr_agent_cost: what sampling cost this process */
    OPR_REC_LIMITS = 20, /* struct opr_limits (cumulative): samples not recorded by --delay/--duration/--max-size */
};

/* Every record starts with this header. size counts the header and the padding
 * up to the next multiple of 8. Readers skip types they do not know. */
struct opr_record_header {
    uint32_t type;
    uint32_t size;
};

struct opr_process {
    uint32_t pid;
    uint32_t ppid;
    uint64_t time_ns;
    uint32_t exe_len;     /* bytes of exe path that follow (no NUL) */
    uint32_t cmdline_len; /* bytes of NUL-separated argv after the exe path */
};

struct opr_map {
    uint64_t start;       /* executable mapping [start, end) in the process */
    uint64_t end;
    uint64_t pgoff;       /* file offset of start */
    uint8_t build_id_len; /* 0 when the file has no NT_GNU_BUILD_ID note */
    uint8_t build_id[OPR_BUILD_ID_MAX];
    uint8_t pad;
    uint16_t path_len;    /* bytes of path that follow (no NUL) */
};

struct opr_thread {
    uint32_t tid;
    uint32_t flags;       /* OPR_THREAD_* */
    uint64_t time_ns;
    char name[16];        /* comm, NUL-padded */
};
#define OPR_THREAD_MAIN 1u /* tid == pid */

/* A distinct native call chain, leaf first. pcs[0] is the interrupted
 * instruction; pcs[1..] are return addresses. */
struct opr_stack {
    uint32_t stack_id; /* unique within the stream file */
    uint32_t nframes;
};

struct opr_sample {
    uint64_t time_ns;
    uint32_t tid;
    uint32_t stack_id;
    uint32_t flags;  /* OPR_SAMPLE_* */
    uint32_t weight; /* number of timer periods this sample stands for (>= 1) */
};
/* In user-mode-only recordings a weight is the thread's CPU time since its
 * previous sample; a gap past this many periods (100 s at 1 kHz) is cut here
 * rather than trusted. */
#define OPR_MAX_SAMPLE_WEIGHT 100000u
/* Optional tail of a SAMPLE record (present when the body is >= 32 bytes). */
struct opr_sample_python {
    uint32_t py_stack_id_plus1; /* 0: no Python frames; else PYSTACK id + 1 */
    uint32_t reserved;
};
#define OPR_SAMPLE_TRUNCATED 1u /* unwinding stopped at OPR_MAX_FRAMES */
#define OPR_SAMPLE_UNWIND_FAILED 2u /* only the interrupted PC is known */

/* A Python code object (function), written once per stream. */
struct opr_pycode {
    uint32_t code_id;
    int32_t first_line;    /* co_firstlineno: the def line */
    uint32_t filename_len; /* bytes of co_filename that follow */
    uint32_t qualname_len; /* bytes of co_qualname after the filename */
};
#define OPR_PYCODE_UNKNOWN 0xffffffffu /* a frame whose code object could not be read */

struct opr_pyframe {
    uint32_t code_id;
    int32_t line;   /* the line executing in this frame */
    uint32_t flags; /* OPR_PYFRAME_* */
    uint32_t pad;
};
#define OPR_PYFRAME_ENTRY 1u /* entered from C: one native eval-loop frame below */

/* A distinct Python call chain, leaf first. */
struct opr_pystack {
    uint32_t py_stack_id;
    uint32_t nframes;
};

struct opr_lost {
    uint64_t time_ns;
    uint64_t lost_samples;  /* dropped because the agent's queue was full */
    uint64_t total_samples; /* samples taken by the handler so far */
};

/* Written with END: the agent's own CPU cost, measured in the process. */
struct opr_agent_cost {
    uint64_t handler_ns;      /* wall time inside the SIGTRAP handler, summed */
    uint64_t handler_calls;   /* samples the handler took (incl. lost ones) */
    uint64_t writer_cpu_ns;   /* CPU time of the writer thread */
    uint64_t process_cpu_ns;  /* CPU time of the whole process (workload + agent) */
};

/* Collection limits (record --delay/--duration/--max-size). Cumulative per
 * stream, written when they change and with END; the last one counts. */
struct opr_limits {
    uint64_t time_ns;
    uint64_t outside_window;    /* samples taken before --delay or after --duration ended: not recorded */
    uint64_t dropped_size_cap;  /* samples dropped because the result dir had reached --max-size */
    uint64_t first_drop_ns;     /* CLOCK_MONOTONIC of the first size-cap drop in this stream (0: none) */
};

struct opr_end {
    uint64_t time_ns;
    uint64_t total_samples;
    uint64_t lost_samples;
};

struct opr_note {
    uint64_t time_ns;
    uint32_t text_len;
    uint32_t pad;
};

/* Shared between the launcher and every agent through a MAP_SHARED file; only
 * updated by the agents' writer threads, read by the launcher's status line. */
struct opr_live {
    char magic[8];
    uint64_t samples;
    uint64_t lost;
    uint64_t threads;
    uint64_t processes;
    uint64_t bytes;
    uint64_t outside_window;   /* --delay/--duration: samples not recorded */
    uint64_t dropped_size_cap; /* --max-size: samples dropped */
};
#define OPR_LIVE_MAGIC "OPLIVE01"

/* --- threading and OpenMP records (ompt/, sampler/agent_threads.c) -------- */
/* Types 40-49 are reserved for this block (docs/format.md, "Threads and
 * OpenMP"). All are optional: a stream without them reports no Threading. */
#define OPR_REC_OMP_REGION 40  /* struct opr_omp_region: a region a sample was taken in */
#define OPR_REC_OMP_TICK 41    /* struct opr_omp_tick: OpenMP activity over one writer period */
#define OPR_REC_OMP_CONTEXT 42 /* struct opr_omp_context: opener's stack at a region's begin */
#define OPR_REC_OMP_INFO 43    /* struct opr_omp_info + runtime version text */
#define OPR_REC_SCHED_TICK 44  /* struct opr_sched_tick + struct opr_sched_thread[nthreads] */

/* Optional second tail of a SAMPLE record (body >= 40 bytes), after
 * struct opr_sample_python. */
struct opr_sample_openmp {
    uint64_t omp_region; /* the sampled thread's current parallel region id (0: none) */
};

struct opr_omp_region {
    uint64_t region_id;   /* unique within the stream, counts up from 1 */
    uint64_t parent_id;   /* enclosing region of the opener (0: outermost) */
    uint64_t begin_ns, end_ns; /* end_ns 0: still open when written */
    uint32_t opener_tid;  /* the thread that opened it (team member 0) */
    uint32_t requested;   /* requested team size */
    uint32_t actual;      /* actual team size (0: unknown) */
    uint32_t flags;       /* OPR_OMP_REGION_* */
};
#define OPR_OMP_REGION_NESTED 1u /* opened inside another region */

struct opr_omp_tick {
    uint64_t time_ns;       /* end of the period */
    uint64_t interval_ns;   /* length of the period */
    uint64_t work_ns;       /* thread time in region bodies (task begin to barrier arrival) */
    uint64_t team_ns;       /* sum of duration x team size of regions ended in the period */
    uint64_t region_ns;     /* sum of durations of regions ended in the period */
    uint32_t regions_begun, regions_ended;
    uint32_t max_team;      /* largest actual team of regions ended in the period */
    uint32_t max_requested; /* largest requested team */
    uint32_t nested;        /* nested regions begun in the period */
    uint32_t omp_threads;   /* OpenMP threads alive (thread_begin minus thread_end) */
};

struct opr_omp_context {
    uint64_t region_id;
    uint64_t time_ns;
    uint32_t tid;
    uint32_t stack_id;          /* STACK record: the opener's native chain at region begin */
    uint32_t py_stack_id_plus1; /* 0: no Python frames */
    uint32_t pad;
};

struct opr_omp_info {
    uint64_t time_ns;
    uint32_t omp_version; /* OMPT interface version the runtime announced */
    uint32_t text_len;    /* runtime version string that follows */
};

/* OS-level view, polled by the writer thread from /proc/self/task/<tid>. */
struct opr_sched_tick {
    uint64_t time_ns;
    uint32_t nthreads;        /* struct opr_sched_thread entries that follow */
    uint32_t online_cpus;
    uint32_t affinity_cpus;   /* CPUs in sched_getaffinity's mask */
    uint32_t cpu_limit_milli; /* cgroup CPU limit x 1000 (0: none) */
};
struct opr_sched_thread {
    uint32_t tid;
    uint32_t flags;           /* reserved */
    uint64_t run_ns;          /* schedstat: time on a CPU (cumulative) */
    uint64_t wait_ns;         /* schedstat: time runnable, waiting on the runqueue */
    uint64_t timeslices;
    uint64_t nonvoluntary_csw;/* /proc/.../status nonvoluntary_ctxt_switches (last read) */
};
#define OPR_ENV_OMP_CONTEXT "OPPROF_OMP_CONTEXT_NS" /* min ns between opener-stack captures */
/* --- end of threading and OpenMP records ----------------------------------- */

/* --- per-sample counters (sampler/agent_counters.c, docs/format.md) ------- */
#define OPR_REC_COUNTER_DESC 12   /* struct opr_counter_desc + name: one counting event */
#define OPR_REC_COUNTER_SAMPLE 13 /* struct opr_counter_sample + opr_counter_value[n] */
#define OPR_MAX_COUNTERS 8        /* counting events per thread */

/* One counting event of this stream, written once after PROCESS. */
struct opr_counter_desc {
    uint32_t index;    /* position in every COUNTER_SAMPLE of this stream */
    uint32_t role;     /* enum pmu_role: what derived metrics use it for */
    uint32_t type;     /* perf_event_attr.type */
    uint32_t group;    /* events with equal group are read (and scheduled) together */
    uint64_t config;   /* perf_event_attr.config */
    uint32_t flags;    /* OPR_COUNTER_* */
    uint32_t name_len; /* bytes of the event's name that follow */
};
#define OPR_COUNTER_USER_ONLY 1u /* exclude_kernel: user-mode counts only */
#define OPR_COUNTER_UNCORE 2u    /* socket-wide: not attributable per sample */

/* Counter deltas of the SAMPLE record just before it (same thread): what the
 * thread counted since its previous sample, outside the agent's handler. */
struct opr_counter_sample {
    uint32_t ncounters; /* opr_counter_value entries that follow */
    uint32_t flags;     /* reserved */
};
struct opr_counter_value {
    uint64_t value;   /* raw delta (not scaled) */
    uint64_t enabled; /* delta of time_enabled (ns) over the same interval */
    uint64_t running; /* delta of time_running: < enabled when multiplexed */
};
/* Delta between two reads of a monotonic 64-bit count (value, time enabled or
 * running). A smaller later value can only mean the counter was reset (never
 * a wrap: 2^64 ns is 584 years): count nothing rather than 2^64. Pure and
 * async-signal-safe (the agent's handler uses it). */
static inline uint64_t opr_counter_delta(uint64_t now, uint64_t before)
{
    return now >= before ? now - before : 0;
}
/* "type:config:config1:role:group:flags:name;..." (record_counters.c -> agent_counters.c) */
#define OPR_ENV_COUNTERS "OPPROF_COUNTERS"
/* --- end of per-sample counters ------------------------------------------- */
/* --- ranks and off-CPU time (types 50-59; docs/format.md "Ranks") ---------- */
#define OPR_REC_RANK 50   /* struct opr_rank: the launcher's rank variables seen by this image */
#define OPR_REC_OFFCPU 51 /* struct opr_offcpu: a Python thread blocked during one poll interval */

#define OPR_RANK_UNSET (-1)
/* Which variable gave opr_rank.rank (also the info file's rank_source). */
enum opr_rank_source {
    OPR_RANK_FROM_NONE = 0,
    OPR_RANK_FROM_RANK = 1,       /* RANK (torchrun, torch.distributed env://) */
    OPR_RANK_FROM_OMPI = 2,       /* OMPI_COMM_WORLD_RANK (Open MPI) */
    OPR_RANK_FROM_PMI = 3,        /* PMI_RANK (MPICH, Intel MPI, hydra) */
    OPR_RANK_FROM_SLURM = 4,      /* SLURM_PROCID (srun) */
};
struct opr_rank {
    uint64_t time_ns;     /* when the agent saw the variables */
    int32_t rank;         /* OPR_RANK_UNSET when none of the variables is set */
    int32_t local_rank;   /* LOCAL_RANK / OMPI_COMM_WORLD_LOCAL_RANK / MPI_LOCALRANKID / SLURM_LOCALID */
    int32_t world_size;   /* WORLD_SIZE / OMPI_COMM_WORLD_SIZE / PMI_SIZE / SLURM_NTASKS */
    uint32_t source;      /* enum opr_rank_source */
};
/* Written by the writer's schedstat poll for a thread that has a Python
 * thread state and spent part of the interval neither running nor runnable. */
struct opr_offcpu {
    uint64_t time_ns;     /* end of the poll interval */
    uint64_t interval_ns; /* length of the interval */
    uint64_t offcpu_ns;   /* interval - delta run - delta runqueue wait */
    uint32_t tid;
    uint32_t py_stack_id_plus1; /* the thread's Python stack at time_ns (0: unreadable) */
    uint32_t state;       /* /proc task state letter at time_ns ('S', 'D') */
    uint32_t pad;
};

/* Reads the rank variables of the environment (getenv), first hit in the
 * order RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID. Pure apart from
 * getenv; used by the launcher and (compiled in) by the agent. */
void opr_rank_from_env(struct opr_rank *out);
/* The same from another view of the environment (the agent's copy). */
void opr_rank_from_lookup(struct opr_rank *out, const char *(*lookup)(const char *name, void *ctx), void *ctx);
/* The i-th variable opr_rank_from_lookup reads (RANK, LOCAL_RANK, ...); NULL past the last. */
const char *opr_rank_variable(size_t i);
const char *opr_rank_source_name(uint32_t source); /* "RANK", ..., "" */
/* Expands -o patterns: %r rank, %p pid, %h short host name, %% a percent.
 * 0, or -1 with one sentence in err (unknown %x; %r without a rank variable). */
int record_expand_output(const char *pattern, long pid, char *out, size_t outlen, char *err, size_t errlen);
/* --- end of ranks ------------------------------------------------------------ */

/* Environment variables the launcher passes to the agent. */
#define OPR_ENV_DIR "OPPROF_RESULT_DIR"
#define OPR_ENV_PERIOD "OPPROF_PERIOD_NS"
#define OPR_ENV_USER_ONLY "OPPROF_USER_ONLY" /* "1": sample user-mode CPU time only (kernel refused) */
#define OPR_ENV_CALLGRAPH "OPPROF_CALL_GRAPH"
#define OPR_ENV_WINDOW "OPPROF_WINDOW_NS"    /* "start_ns:end_ns", CLOCK_MONOTONIC; end 0 = open */
#define OPR_ENV_MAX_BYTES "OPPROF_MAX_BYTES" /* --max-size in bytes */
/* -c N: sample on an event instead of the CPU-time timer:
 * "type:config:config1:exclude_kernel:period" (record_counters.c -> agent.c) */
#define OPR_ENV_LEADER "OPPROF_LEADER"

/* ------------------------------------------------------------------------- */
/* Launcher (opprof record)                                                   */
/* ------------------------------------------------------------------------- */

enum call_graph_mode {
    CALL_GRAPH_DWARF = 0, /* CFI unwinding (.eh_frame / .debug_frame) */
    CALL_GRAPH_FP = 1,    /* frame-pointer walk */
    CALL_GRAPH_NONE = 2,  /* leaf PC only */
};

struct record_options {
    unsigned frequency_hz;  /* samples per second of CPU time per thread */
    const char *output_dir; /* NULL: next free opprof.NNN in the cwd */
    enum call_graph_mode call_graph;
    char *const *argv;      /* the workload's command, argv[0] looked up in PATH */
    bool quiet;             /* no live status line, no summary */
    const char *events;     /* -e EVENTS as given (NULL: task-clock); see pmu.c */
    /* -c N: one sample every N events of the first -e event (the sampling
     * leader) instead of the CPU-time timer (0: the timer) */
    uint64_t sample_count;
    /* threading/OpenMP: NULL or "auto" (preload an LLVM libomp found on this
     * machine so GNU libgomp programs get OMPT), "keep" (never), or a path */
    const char *openmp_runtime;
    /* Collection limits: sample only from delay_s after the start for
     * duration_s seconds (0: unset); stop recording samples once the result
     * dir holds max_size_bytes (0: no cap). What they leave out is counted. */
    double delay_s, duration_s;
    uint64_t max_size_bytes;
    pid_t attach_pid;   /* -p: attach to this running process (0: launch argv) */
};

/* Runs the workload under the sampler. Returns the exit status opprof should
 * exit with: the workload's own (128+signal when it was killed by a signal),
 * 127 when the command was not found, 126 when it could not be executed, or 2
 * (with a message on stderr) when recording could not start. */
int record_run(const struct record_options *opts);

/* Returns the first free name opprof.NNN in dir_of (buffer must hold PATH_MAX). */
int record_next_result_dir(const char *dir_of, char *out, size_t outlen);

const char *call_graph_mode_name(enum call_graph_mode mode);

/* --- attach mode (attach*.c) -------------------------------------------- */
/* Samples the running process opts->attach_pid (its threads, and children it
 * forks meanwhile) from outside with perf_event, writing the same raw streams
 * as the agent; the target is never stopped or signalled. Stops after
 * duration_s, on SIGINT/SIGTERM/SIGHUP, or when the target exits. Returns 0
 * when the recording worked, 2 (one line on stderr) when it could not start. */
int record_attach(const struct record_options *opts);
/* Shared with launch.c: creates -o DIR (empty) or the next opprof.NNN, one
 * line on stderr on failure; and writes argv shell-quoted (info file). */
int record_make_result_dir(const struct record_options *opts, char *dir, size_t dirlen);
void record_write_command(FILE *f, char *const *argv);
/* --- end of attach mode --------------------------------------------------- */

/* Finds the first readable dir-of-/proc/self/exe + relative[i] (each starts
 * with '/'); 0 and the path in out, or -1. How installed and build-tree
 * binaries find their agent and data files. */
int path_beside_self(const char *const *relative, size_t n, char *out, size_t outlen);


/* ------------------------------------------------------------------------- */
/* PMU events and counting mode (pmu.c, pmu_presets.c, stat.c)                */
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
/* --- end of PMU section --------------------------------------------------- */

#endif
