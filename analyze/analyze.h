/*
 * analyze/analyze.h — from a result directory to numbers.
 *
 * profile_load() reads a result directory (only through the raw format of
 * format/format.h), symbolizes every distinct (pid, pc) once, and builds an
 * in-memory profile: frames, stacks (as frame ids), threads, processes and
 * samples. Everything after that (hotspot tables, callers/callees) is a pure
 * function of the profile, which is what the unit tests exercise.
 */
#ifndef OPPROF_ANALYZE_H
#define OPPROF_ANALYZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------- */
/* The profile model                                                          */
/* ------------------------------------------------------------------------- */

enum frame_kind {
    FRAME_NATIVE = 0,  /* a symbolized native function */
    FRAME_UNKNOWN = 1, /* no symbol: shown as module+0xoffset */
    FRAME_PYTHON = 2,  /* a Python function: name = co_qualname, module = file
                          basename, source_file = co_filename, line = the line
                          executing in that frame when the sample was taken */
};

/* A distinct code location after symbolization. Two PCs inside the same
 * function are two frames with the same name. All strings are owned by the
 * profile and are never NULL (unknown pieces are ""), except source_file. */
struct prof_frame {
    const char *name;        /* function, or "libfoo.so+0x1234" when unknown */
    const char *module;      /* module basename, "[unknown]" when unmapped */
    const char *source_file; /* NULL when no line info */
    int line;
    enum frame_kind kind;
};

struct prof_stack {
    uint32_t nframes;
    uint32_t *frames; /* indices into profile.frames, leaf first */
};

struct prof_thread {
    uint32_t pid;
    uint32_t tid;
    char name[16];
    uint64_t samples;
    uint64_t first_ns, last_ns;
};

struct prof_process {
    uint32_t pid;
    uint32_t ppid;
    char *exe;
    char *cmdline;        /* argv joined with spaces */
    uint64_t samples;     /* samples read for this process */
    uint64_t lost;        /* samples the agent dropped (queue full) */
    uint64_t truncated;   /* samples whose stack hit the frame limit */
    uint64_t unwind_failed;
    bool ended_cleanly;   /* an END record was found */
    bool stream_truncated;/* the stream file ended inside a record */
    char **notes;         /* warnings the agent recorded */
    size_t nnotes;
};

struct prof_sample {
    uint64_t time_ns;
    uint32_t thread;  /* index into profile.threads */
    uint32_t stack;   /* index into profile.stacks */
    uint32_t weight;  /* timer periods this sample stands for */
    uint32_t flags;   /* OPR_SAMPLE_* */
    uint32_t omp_region; /* threading: index + 1 into threading->regions (0: none) */
    uint32_t counters;   /* per-sample counters: 1 + row of profile.counters->values (0: none) */
};

struct profile {
    char *dir;
    /* From the info file. */
    char *command;
    char *event;
    uint64_t period_ns;          /* CPU time per unit of weight; 0 with sample_period */
    unsigned frequency_hz;
    uint64_t sample_period;      /* record -c N: events of `event` per sample (0: timer samples) */
    int sample_role;             /* enum pmu_role of `event` with sample_period */
    char *call_graph;
    uint64_t start_ns, end_ns;   /* monotonic; end_ns == 0 when recording did not finish */
    int exit_status;             /* -1 when unknown */
    int exit_signal;             /* 0 when the workload exited normally */
    bool complete;               /* the launcher wrote its final info */
    bool user_only;              /* kernel mode not sampled */
    bool cpu_time_weights;       /* user_only: each sample weighs its thread's CPU time since the previous one */

    struct prof_frame *frames;    size_t nframes;
    struct prof_stack *stacks;    size_t nstacks;
    struct prof_thread *threads;  size_t nthreads;
    struct prof_process *processes; size_t nprocesses;
    struct prof_sample *samples;  size_t nsamples; /* sorted by time */

    uint64_t total_weight;   /* sum of sample weights */
    uint64_t lost_samples;
    /* Collection limits (record --delay/--duration/--max-size): the window
     * (monotonic, 0 when none), samples it left out, samples the size cap dropped. */
    uint64_t window_start_ns, window_end_ns, max_size_bytes;
    uint64_t outside_window_samples, size_cap_dropped_samples, first_size_cap_drop_ns;
    uint64_t truncated_samples;
    uint64_t unknown_frames; /* frames (distinct (pid,pc)) without a function */
    /* The agent's own cost, summed over processes that ended cleanly. */
    uint64_t agent_handler_ns, agent_handler_calls, agent_writer_cpu_ns, process_cpu_ns;
    char **warnings;         /* loader warnings: truncated files, missing modules */
    size_t nwarnings;

    void *priv; /* string interning, symbolizer */
    struct prof_threading *threading; /* threads and OpenMP (NULL: none recorded) */
    struct prof_counters *counters;   /* per-sample counters (NULL: none recorded) */
    struct prof_ranks *ranks;         /* ranks and off-CPU time (NULL: none recorded) */
};

/* Loads dir. On failure returns -1, prints nothing, and writes one sentence
 * naming the problem and the fix into err. */
int profile_load(const char *dir, struct profile **out, char *err, size_t errlen);
void profile_free(struct profile *p);

/* True for CPython's eval loop (_PyEval_EvalFrameDefault and its clones):
 * its module is the interpreter's (python3.11 or libpython3.11.so). */
bool splice_is_eval_frame(const char *name);

/* Newest opprof.NNN in the current directory, or -1 when there is none. */
int profile_find_newest(char *out, size_t outlen);

/* Builds a profile from memory (tests and fixtures): frames and stacks are
 * copied. Used by unit tests to exercise aggregation without a recording.
 * Out of memory (util/util.h): profile_new_empty returns NULL, the adders
 * UINT32_MAX or -1, all with errno ENOMEM; the profile stays valid. */
struct profile *profile_new_empty(void);
uint32_t profile_add_frame(struct profile *p, const char *name, const char *module,
                           const char *source_file, int line, enum frame_kind kind);
uint32_t profile_add_stack(struct profile *p, const uint32_t *frames, uint32_t nframes);
uint32_t profile_add_thread(struct profile *p, uint32_t pid, uint32_t tid, const char *name);
int profile_add_sample(struct profile *p, uint64_t time_ns, uint32_t thread,
                       uint32_t stack, uint32_t weight);

/* ------------------------------------------------------------------------- */
/* Hotspots: self/total per key                                               */
/* ------------------------------------------------------------------------- */

enum group_by {
    GROUP_FUNCTION = 0,
    GROUP_MODULE,
    GROUP_THREAD,
    GROUP_PROCESS,
    /* PyTorch views (analyze/hotspots_torch.c); see "Operators" below. */
    GROUP_OP,     /* innermost operator frame: "aten::bmm", "AddmmBackward0" */
    GROUP_LINE,   /* Python file:line (self: innermost Python frame) */
    GROUP_PYTHON, /* Python function: qualname + file (self: innermost) */
    GROUP_KERNEL, /* innermost native function, per operator it ran under */
};

enum sort_key {
    SORT_SELF = 0,
    SORT_TOTAL,
    SORT_SAMPLES,
    SORT_NAME,
};

struct hotspot_row {
    char *name;            /* key text (function, module, "tid 123 (name)", ...) */
    char *module;          /* for GROUP_FUNCTION: module; else NULL */
    char *source;          /* "file:line" of the function where known; else NULL */
    uint64_t self;         /* weight where this key is the leaf */
    uint64_t total;        /* weight where the key is anywhere on the stack (once per sample) */
    uint64_t samples;      /* number of samples counted in total */
    char *detail;          /* the table's extra column (detail_title), or NULL */
    /* Per-sample counters summed over the samples this row is self of:
     * COUNTER_SUMS per profile counter (raw value, time enabled, time
     * running); NULL when the profile has no counters. */
    double *counters;
};

struct hotspot_table {
    struct hotspot_row *rows;
    size_t nrows;
    uint64_t total_weight; /* denominator of every percentage */
    uint64_t period_ns;    /* to turn weights into time (0: samples are not time) */
    uint64_t sample_period; /* record -c N: events per unit of weight (then period_ns is 0) */
    const char *event;      /* the event sample_period counts */
    /* Column titles when the table is not a function table (static strings,
     * NULL: the default "Module" and no detail column). detail_key names the
     * detail in CSV/JSON. */
    const char *module_title;
    const char *detail_title;
    const char *detail_key;
    /* Nonzero: rows also get a "Share" = total / share_denominator (callers
     * of an operator: the share of that operator's total time). */
    uint64_t share_denominator;
    const struct prof_counters *counters; /* the profile's counters (NULL: none) */
};

/* Computes the table for the whole profile. Returns 0, -1 on out of memory. */
int hotspots_compute(const struct profile *p, enum group_by by, struct hotspot_table *out);

/* Callers (callees == false) or callees of the function(s) named name:
 * one row per immediate caller/callee, weight = samples whose stack has that
 * edge (counted once per sample). Returns 0; -1 when no frame matches name.
 * When no frame is named exactly name but an operator is ("bmm" or
 * "aten::bmm"), the rows are that operator's Python callers, or with callees
 * its kernels (see hotspots_op_neighbours). */
int hotspots_neighbours(const struct profile *p, const char *name, bool callees,
                        struct hotspot_table *out);

void hotspots_sort(struct hotspot_table *t, enum sort_key key);
void hotspots_free(struct hotspot_table *t);

int group_by_parse(const char *text, enum group_by *out);
int sort_key_parse(const char *text, enum sort_key *out);
const char *group_by_name(enum group_by by);
/* Canonical word for a sort key ("self", "total", ...), as sort_key_parse takes it. */
const char *sort_key_name(enum sort_key key);


/* ------------------------------------------------------------------------- */
/* PMU derived metrics (analyze/metrics.c): pure functions; NaN = not counted */
/* ------------------------------------------------------------------------- */
#include "format/format.h"
#include "sampler/pmu/pmu.h" /* event roles and stat results the metrics read */

/* value x enabled/running (multiplexing); NaN when the counter never ran.
 * running_fraction (may be NULL) gets running/enabled. */
double metric_scale(uint64_t value, uint64_t enabled, uint64_t running, double *running_fraction);
double metric_ratio(double num, double den); /* NaN when den <= 0 or either is NaN */
double metric_cpi(double cycles, double instructions);
double metric_ipc(double cycles, double instructions);
/* (CAS reads + writes) x 64 B / s: uncore memory-controller counts, socket-wide. */
double metric_bandwidth_bytes_per_s(double cas_reads, double cas_writes, double seconds);
/* LLC misses x 64 B / s: an estimate (prefetches and writebacks are missed). */
double metric_llc_estimate_bytes_per_s(double llc_misses, double seconds);
double metric_rate_per_s(double count, double seconds);
double metric_cpus_utilized(double task_clock_ns, double wall_ns);
double stat_count_scaled(const struct stat_count *c, double *running_fraction);

struct stat_metrics {
    double wall_s, task_clock_ns, cpus_utilized;
    double cycles, instructions, cpi, ipc, ghz;
    double l2_misses, l2_refs, l2_miss_ratio, l2_miss_rate; /* rate: per instruction */
    double llc_misses, llc_refs, llc_miss_ratio;
    double bandwidth_bytes_per_s;
    bool bandwidth_estimate;    /* from LLC misses x 64 */
    bool bandwidth_socket_wide; /* from uncore counters: every process on the socket */
};
void stat_metrics_compute(const struct stat_result *r, struct stat_metrics *m);

/* Per-sample counters (analyze/counters.c; COUNTER_DESC / COUNTER_SAMPLE in
 * docs/format.md): the deltas of the counting events read at each sample,
 * attributed to the sample's stack the way its time is. */
#define COUNTER_SUMS 3 /* per counter: value, time enabled, time running */
struct prof_counter {
    char *name;
    enum pmu_role role;
    uint32_t type;
    uint64_t config;
    bool user_only;
    bool leader;                    /* record -c: the sampling event, sample_period per sample */
    double value, enabled, running; /* sums over all samples (raw) */
    uint64_t samples;               /* samples that carry it */
};
struct prof_counters {
    struct prof_counter *ev;
    size_t n;
    double *values;    /* nrows x n x COUNTER_SUMS raw deltas (NaN: not counted) */
    size_t nrows, rows_cap;
};
/* Loader: the global index of a stream's counter (added when new). */
size_t counters_add_event(struct profile *p, const char *name, enum pmu_role role, uint32_t type,
                          uint64_t config, bool user_only);
/* Loader: a new row of NaNs for one sample; returns its 1-based id, 0 on out of memory. */
uint32_t counters_new_row(struct profile *p);
/* Loader: sets counter idx of row (1-based) to one delta. */
void counters_set(struct profile *p, uint32_t row, size_t idx, uint64_t value, uint64_t enabled,
                  uint64_t running);
void counters_free(struct prof_counters *c);
/* Loader, after the samples (record -c with other -e events counted): the
 * sampling leader as one more counter, weight x period events per sample, so
 * that rows have its metrics beside the others (CPI from a cycles leader and
 * counted instructions). Only samples that carry the other counters get it
 * (a thread's first sample opens them). Nothing without other counters.
 * 0, or -1 on out of memory. */
int counters_add_leader(struct profile *p, const char *name, enum pmu_role role, bool user_only,
                        uint64_t period);
/* Sums of each counter (COUNTER_SUMS each) per key: key_of_sample(sample) ->
 * index < nkeys (or >= nkeys: skipped). NULL when the profile has no counters
 * or on out of memory. by_stack folds per stack index (nstacks + 1 keys, the
 * last for bad stacks), else per thread index. */
double *counters_fold(const struct profile *p, bool by_stack, size_t *nkeys);

/* Derived figures of one row (or of the whole profile), NaN when an input
 * was not recorded. The scaled count of a role sums its events, each
 * extrapolated by enabled/running over the summed deltas (multiplexing). */
struct counter_metrics {
    double cycles, instructions, llc_misses, llc_refs;
    double cpi, ipc;
    double llc_miss_ratio;   /* misses / references */
    double llc_mpki;         /* misses per 1000 instructions */
    double bandwidth_est;    /* bytes/s: LLC misses x 64 / self time (an estimate) */
};
/* sums: COUNTER_SUMS per counter of c; seconds: the time those samples stand for. */
void counter_metrics_compute(const struct prof_counters *c, const double *sums, double seconds,
                             struct counter_metrics *m);
/* Scaled count of counter i from its sums (NaN when it never ran). */
double counter_scaled(const double *sums, size_t i);
/* Whether any counter of c has the role. */
bool counters_have_role(const struct prof_counters *c, enum pmu_role role);
/* --- end of PMU derived metrics -------------------------------------------- */

/* ------------------------------------------------------------------------- */
/* Operators (analyze/operators.c, analyze/hotspots_torch.c)                 */
/* ------------------------------------------------------------------------- */
/* Operator attribution as design.md defines it. Op names are what
 * torch.profiler's key_averages shows: "aten::<op>" for ATen operators (the
 * overload dropped: at::_ops::add_Tensor::call -> "aten::add", in-place kept:
 * add__Tensor -> "aten::add_") and the node name for autograd nodes
 * (torch::autograd::generated::AddmmBackward0::apply -> "AddmmBackward0"). */
enum op_frame_kind {
    OP_FRAME_NONE = 0,
    OP_FRAME_ATEN,     /* at::_ops::<op>::call / ::redispatch */
    OP_FRAME_AUTOGRAD, /* torch::autograd::[generated::]<Node>::apply */
    OP_FRAME_FALLBACK, /* at::native::<op>(...), at::cpu::<op>(...): operator
                          frames only in samples without any at::_ops frame */
};
/* Classifies a frame name and writes the op name into buf (len bytes);
 * OP_FRAME_NONE (buf unspecified) when it is no operator frame. */
enum op_frame_kind op_frame_classify(const char *name, char *buf, size_t len);
/* buf holding the op name, or NULL when name is no operator frame. */
const char *op_name_from_frame(const char *name, char *buf, size_t len);
/* Whether a user's query names op: "bmm" and "aten::bmm" both name "aten::bmm". */
bool op_name_matches(const char *op, const char *query);

/* Rows for "[no operator]" / "[no Python frame]" / "[no native frame]".
 * Samples without an operator that run under `import` (stack_is_import) get
 * their own row in the operator table, so start-up is not read as a gap in
 * operator attribution. */
#define NO_OPERATOR_NAME "[no operator]"
#define NO_OPERATOR_IMPORT_NAME "[no operator: import]"
/* Whether an operator-table row is one of the two above, not an operator. */
bool is_no_operator_row(const char *name);
#define NO_PYTHON_FRAME_NAME "[no Python frame]"
#define NO_NATIVE_FRAME_NAME "[no native frame]"

/* The canonical op name in p matching query (see op_name_matches), copied into
 * buf; false when no operator of p matches. */
bool hotspots_find_operator(const struct profile *p, const char *query, char *buf, size_t len);
/* Callers (callees == false) of operator op: one row per Python line, the
 * innermost Python frame rootward of the op's innermost frame ("train.py:42",
 * detail = the Python function, source = full path:line); self = samples where
 * op is the innermost operator, total = samples with op anywhere; the share
 * column divides by op's total. Callees: the kernels (innermost native
 * function) of the samples whose innermost operator is op; share of op's self. */
int hotspots_op_neighbours(const struct profile *p, const char *op, bool callees,
                           struct hotspot_table *out);

/* ------------------------------------------------------------------------- */
/* Phases (analyze/phases.c)                                                  */
/* ------------------------------------------------------------------------- */
/* Each sample gets one phase; the first rule that matches wins:
 *   1. optimizer    a Python frame whose qualname contains "Optimizer.step" or
 *                   whose file is under /torch/optim/
 *   2. backward     an autograd node (...::apply) or torch::autograd::Engine::
 *                   frame, or a Python frame backward() under /torch/autograd/
 *                   or in torch/_tensor.py
 *   3. data loading a Python frame under /torch/utils/data/ (DataLoader, its
 *                   workers and collate)
 *   (rules 1 and 3 ignore "<module>" frames: importing torch is not a phase)
 *   4. forward      an operator frame, or a Python frame named forward or
 *                   _call_impl (nn.Module.__call__)
 *   5. other        the rest (interpreter start-up, plain Python)
 * Before all of them, 0. import: a Python frame of importlib's bootstrap
 * (stack_is_import), i.e. a module being found, loaded or run by `import`;
 * "import torch" alone is 1-2 s of CPU, and ops run while a module is
 * imported are start-up too, not forward.
 * The optimizer runs ops and may sit under nothing else, so it goes first;
 * backward before data loading because the engine never runs under a
 * DataLoader; data loading before forward because collate runs ops. */
enum phase {
    PHASE_FORWARD = 0,
    PHASE_BACKWARD,
    PHASE_OPTIMIZER,
    PHASE_DATA_LOADING,
    PHASE_IMPORT,
    PHASE_OTHER,
    PHASE_COUNT
};
struct phase_summary {
    uint64_t weight[PHASE_COUNT];
    uint64_t samples[PHASE_COUNT];
    uint64_t total_weight;  /* sum of weight[] */
    bool pytorch;           /* the profile has operator or Python frames: the
                               phases mean something */
};
const char *phase_name(enum phase ph);
/* Whether a stack runs under `import` (rule 0 above): a Python frame whose
 * file is importlib's bootstrap ("<frozen importlib._bootstrap>",
 * "<frozen importlib._bootstrap_external>", or importlib/_bootstrap*.py
 * where the interpreter was built without frozen modules). */
bool stack_is_import(const struct profile *p, const struct prof_stack *st);
bool frame_is_importlib(const struct prof_frame *f); /* one such frame */
/* The phase of one stack (rules above). */
enum phase phase_of_stack(const struct profile *p, const struct prof_stack *st);
/* Returns 0, -1 on out of memory. */
int phases_compute(const struct profile *p, struct phase_summary *out);

/* ------------------------------------------------------------------------- */
/* Findings (analyze/findings.c)                                              */
/* ------------------------------------------------------------------------- */
/* One-line hints, each backed by the figures it quotes, emitted only when its
 * threshold is met (thresholds in findings.c). */
enum finding_kind {
    FINDING_REFERENCE_BLAS = 0, /* time in netlib BLAS routines of libblas.so* */
    FINDING_INTERPRETER,        /* time in the Python interpreter, not in ops */
    FINDING_DOMINANT_OP,        /* one operator takes most self time */
    FINDING_HIGH_CPI,           /* a hot operator/function has CPI > 1 (counters) */
    FINDING_IMPORT,             /* start-up: much of the time is `import` */
};
struct finding {
    enum finding_kind kind;
    const char *id;   /* "reference_blas", "interpreter_bound", "dominant_operator", "high_cpi", "import_startup" */
    double share;     /* the share (0..1) of CPU time the finding is about */
    char *text;       /* the sentence shown to the user */
};
struct findings {
    struct finding *items;
    size_t n;
};
/* Returns 0 (out->n may be 0), -1 on out of memory. */
int findings_compute(const struct profile *p, struct findings *out);
void findings_free(struct findings *f);
/* --- end of operators, phases and findings -------------------------------- */

/* ------------------------------------------------------------------------- */
/* Threads and OpenMP (analyze/threading.c, report/threading_section.c)      */
/* ------------------------------------------------------------------------- */
/* What the loader keeps of the OMP_* and SCHED_TICK records (docs/format.md). */
struct prof_omp_region {
    uint32_t pid, opener_tid; /* opener_tid 0: the REGION record is missing */
    uint64_t id, parent, begin_ns, end_ns;
    uint32_t requested, actual, flags;
};
struct prof_omp_context {
    uint32_t pid, tid;
    uint64_t region_id, time_ns;
    uint32_t stack; /* profile stack (Python frames spliced in) */
};
struct prof_omp_tick {
    uint32_t pid;
    struct opr_omp_tick t;
};
struct prof_sched_tick {
    uint32_t pid;
    uint64_t time_ns;
    uint32_t online, affinity, limit_milli;
    size_t first, n; /* entries in prof_threading.sched_threads */
};
struct prof_sched_thread {
    uint32_t tid;
    uint64_t run_ns, wait_ns, timeslices, nivcsw;
};
struct prof_threading {
    struct prof_omp_region *regions;   size_t nregions, regions_cap;
    struct prof_omp_context *contexts; size_t ncontexts, contexts_cap;
    struct prof_omp_tick *omp_ticks;   size_t nomp_ticks, omp_ticks_cap;
    struct prof_sched_tick *sched_ticks; size_t nsched_ticks, sched_ticks_cap;
    struct prof_sched_thread *sched_threads; size_t nsched_threads, sched_threads_cap;
    char *runtime_version;  /* the first OMPT runtime's version string */
    unsigned ompt_processes;/* processes whose runtime started the OMPT tool */
    char *openmp_runtime, *openmp_setup, *openmp_libomp; /* from the info file */
    bool saw_libgomp, saw_libomp, saw_libiomp; /* runtimes mapped in some process */
    uint64_t attributed_exact, attributed_near, unattributed; /* set by threading_attribute */
};
struct prof_threading *threading_get(struct profile *p); /* creates it on first use */
void threading_free(struct prof_threading *t);
void threading_info_kv(struct profile *p, const char *key, const char *val);
/* Charges OpenMP worker samples (no Python frames, inside a region opened by
 * another thread) to the opener's calling context: the opener's own sample
 * in that region nearest in time, else its stack at region begin, else (an
 * approximation, counted apart) its nearest sample or context within 50 ms.
 * Replaces those samples' stacks; returns how many were charged. */
size_t threading_attribute(struct profile *p);
/* Loader: index + 1 of region id of the stream whose regions start at first
 * (sorted on the first call, *nsorted 0 before); a placeholder region (opener unknown) is added when it is missing. */
uint32_t threading_region_lookup(struct profile *p, size_t first, size_t *nsorted, uint32_t pid, uint64_t id);
/* Loader: OMP_REGION, OMP_TICK, OMP_INFO, SCHED_TICK bodies of process pid. */
void threading_load_record(struct profile *p, uint32_t pid, uint32_t type, const char *body, size_t len);
void threading_add_context(struct profile *p, uint32_t pid, uint32_t tid, uint64_t region_id, uint64_t time_ns,
                           uint32_t stack);
void threading_note_module(struct profile *p, const char *path); /* MAP: which OpenMP runtime */
/* Whether a module basename is an OpenMP runtime (libgomp, libomp, libiomp5). */
bool threading_is_omp_runtime(const char *module);

#define THREADING_BUCKET_NS 10000000ull
struct threading_bucket {
    uint64_t t_ns;     /* bucket start (CLOCK_MONOTONIC) */
    double active_omp; /* threads in OpenMP region bodies (average over the bucket) */
    double runnable;   /* threads running or waiting on a runqueue, all processes */
    double cpus;       /* usable CPUs */
};
struct threading_op {
    char name[160];            /* operator, or function that opened the region */
    char python[160];          /* innermost Python file:line, "" when none */
    uint64_t samples;          /* samples in OpenMP regions charged to it */
    uint64_t oversub_samples;  /* of those, in oversubscribed buckets */
};
struct threading_summary {
    bool has_sched, has_ompt;
    char view[512];            /* which view and runtime were used, one sentence */
    unsigned online, affinity; double cgroup_limit, usable_cpus;
    unsigned nprocesses, nthreads;
    double run_s, wait_s, wait_share; uint64_t nivcsw;
    double runnable_avg, runnable_max, oversub_avg, oversub_max, oversub_time_share;
    uint64_t regions; double regions_per_s, region_avg_us;
    unsigned max_requested, max_team; uint64_t nested;
    double active_max, active_avg, imbalance;
    uint64_t region_samples, spin_samples, total_samples; double spin_share;
    uint64_t attributed_exact, attributed_near, unattributed;
    struct threading_op ops[8]; size_t nops;
    bool oversubscribed, multi_process_oversub;
    bool external_contention; /* runqueue wait without oversubscribing: other processes on the machine */
    char findings[3][768]; size_t nfindings;
    struct threading_bucket *timeline; size_t nbuckets; uint64_t bucket_ns;
};
/* Pure function of the profile. 0, or -1 on out of memory. */
int threading_analyze(const struct profile *p, struct threading_summary *out);
void threading_summary_free(struct threading_summary *s);
/* --- end of threads and OpenMP --------------------------------------------- */

/* ------------------------------------------------------------------------- */
/* Ranks of a parallel job (analyze/ranks.c, analyze/ranks_merge.c,           */
/* report/ranks_section.c)                                                    */
/* ------------------------------------------------------------------------- */
/* What the loader keeps of the info file's rank keys and the RANK and OFFCPU
 * records (docs/format.md, "Ranks"). */
struct prof_rank_process {
    uint32_t pid;
    int32_t rank, local_rank, world_size; /* OPR_RANK_UNSET when not set */
    uint32_t source;                      /* enum opr_rank_source */
    uint64_t start_ns, end_ns;            /* stream start, END record (0: none) */
};
struct prof_offcpu {
    uint64_t time_ns, interval_ns, offcpu_ns;
    uint32_t thread; /* index into profile.threads */
    uint32_t stack;  /* profile stack of Python frames only; UINT32_MAX: none */
};
struct prof_ranks {
    int32_t info_rank, info_local_rank, info_world_size; /* the launcher's (-o %r runs) */
    char *info_rank_source, *hostname;
    struct prof_rank_process *procs; size_t nprocs, procs_cap;
    struct prof_offcpu *offcpu; size_t noffcpu, offcpu_cap;
};
struct prof_ranks *ranks_get(struct profile *p); /* creates it on first use */
void ranks_free(struct prof_ranks *r);
/* Loader hooks: info keys (true when the key was a rank key), stream start,
 * RANK and END records, OFFCPU intervals. */
bool ranks_info_kv(struct profile *p, const char *key, const char *val);
void ranks_note_stream(struct profile *p, uint32_t pid, uint64_t start_ns);
void ranks_note_rank(struct profile *p, uint32_t pid, const void *body, size_t len);
void ranks_note_end(struct profile *p, uint32_t pid, uint64_t end_ns);
void ranks_add_offcpu(struct profile *p, uint64_t time_ns, uint64_t interval_ns, uint64_t offcpu_ns,
                      uint32_t thread, uint32_t stack);

/* Communication: a native frame of gloo, c10d's ProcessGroup*, MPI (MPI_*,
 * PMPI_*, ompi_*, mca_*, opal_progress, or any frame in libmpi, libopen-pal,
 * libopen-rte, an mca_* plugin, UCX), or a Python frame of a
 * torch.distributed collective (all_reduce, broadcast, barrier, ...). */
bool ranks_is_comm_frame(const struct prof_frame *f);
/* The rank of process pid: its RANK record, else the info file's rank, else
 * OPR_RANK_UNSET. */
int32_t ranks_rank_of_pid(const struct profile *p, uint32_t pid);

struct rank_row {
    int32_t rank;          /* OPR_RANK_UNSET: a result without rank (named by its dir) */
    char label[64];        /* "rank 1", or the dir's name */
    char host[64];
    char pids[64];         /* "1234" or "1234,1240" */
    size_t profile;        /* index of the profile it came from */
    uint64_t samples, weight;
    double cpu_s, wall_s, busy;       /* busy = cpu_s / wall_s */
    double comm_cpu_s, compute_s;     /* compute = cpu - comm cpu */
    double comm_wait_s, other_wait_s; /* off-CPU time of Python threads */
    char top[256];         /* top operator (or function) by self time, all samples */
    double top_share;      /* of this rank's CPU time */
};
struct rank_summary {
    struct rank_row *rows; size_t nrows;
    bool by_operator;      /* keys are operators, else functions */
    bool offcpu_recorded;  /* some result has OFFCPU records: the wait columns are measured */
    bool one_host;         /* every rank on one host: one clock */
    uint64_t unranked_samples; /* samples of processes that are no rank (torchrun, mpirun) */
    int slowest;           /* row index, -1 when fewer than 2 ranks */
    char slowest_key[256]; /* operator/function with the most excess compute vs the median rank */
    char slowest_python[256]; /* innermost Python line that runs it ("" when none) */
    double slowest_key_s, median_key_s; /* its time there, and the median of the other ranks */
    double median_compute_s;  /* of the other ranks */
};
/* Groups the samples of the profiles by rank (RANK records, else the info
 * file's rank, else one row per profile when there are several) and computes
 * the table. 0, or -1 on out of memory. */
int ranks_analyze(struct profile *const *profiles, size_t n, struct rank_summary *out);
void rank_summary_free(struct rank_summary *s);
/* One profile holding the samples of several (for the merged hotspot table):
 * frames, stacks, threads, processes and samples are copied; threading data
 * is not. 0, or -1 with one sentence in err. */
int profile_merge(struct profile *const *parts, size_t n, struct profile **out, char *err, size_t errlen);
/* --- end of ranks ------------------------------------------------------------ */

/* ------------------------------------------------------------------------- */
/* Sweeps and diffs (analyze/sweep.c; `opprof sweep`, `opprof diff`)         */
/* ------------------------------------------------------------------------- */
/* Pure helpers: shapes, flop/byte counts, {name} substitution, the row model
 * of a sweep table and the per-operator diff of two profiles. */
#define SWEEP_MAX_DIMS 8
enum sweep_op { SWEEP_OP_UNKNOWN = 0, SWEEP_OP_BMM, SWEEP_OP_MM, SWEEP_OP_ADDMM, SWEEP_OP_SOFTMAX,
                SWEEP_OP_LAYER_NORM, SWEEP_OP_LINEAR, SWEEP_OP_CONV2D };
/* "torch.bmm", "bmm", "aten::bmm", "torch.nn.functional.softmax" -> the op. */
enum sweep_op sweep_op_parse(const char *name);
const char *sweep_op_name(enum sweep_op op); /* "bmm", ... */
/* "8x64x64x64" -> dims; checks the count the op needs (bmm 4, mm/addmm/linear
 * 3, conv2d 7 with the kernel no larger than the image, softmax/layer_norm
 * 1..SWEEP_MAX_DIMS). 0, or -1 with one sentence in err. */
int sweep_parse_shape(enum sweep_op op, const char *text, long *dims, int *ndims, char *err, size_t errlen);
/* Bytes per element of "float32", "bfloat16", ...; 0 when unknown. */
size_t sweep_dtype_size(const char *dtype);
/* Flops and bytes moved per call (formulas in docs/guide.md). 0, or -1 when
 * the op is unknown or the shape does not fit it. */
int sweep_op_counts(enum sweep_op op, const long *dims, int ndims, size_t elem_size, double *flops,
                    double *bytes);
/* arg with every "{name}" replaced by value (malloc'd; NULL on out of memory).
 * Nothing else is interpreted: the result is one argv element, verbatim. */
char *sweep_substitute(const char *arg, const char *name, const char *value);
/* Splits "a,b,c" into malloc'd strings (empty items dropped). 0 or -1. */
int sweep_split_list(const char *text, char ***items, size_t *n);
void sweep_free_list(char **items, size_t n);
/* A label made safe for a directory name: [A-Za-z0-9._=+-] kept, others '_'. */
void sweep_sanitize_label(const char *in, char *out, size_t outlen);
/* Finds "key": <number> in a one-line JSON object; false when absent. */
bool sweep_json_number(const char *json, const char *key, double *out);

/* The Python function of tools/op_bench.py that runs the timed calls and
 * nothing else: diffs of sweep rows keep only the samples under it. */
#define SWEEP_TIMED_FUNCTION "op_bench_timed_calls"

struct sweep_row {
    char label[160];
    char x[96];            /* the swept parameter's value (shape, or the first --param) */
    char x_name[32];       /* that parameter's name ("shape", "threads", a --param name) */
    char series[96];       /* the other parameters ("float32 t1"; "" when none vary) */
    char dir[4096];        /* its result directory */
    bool ok;
    char reason[512];      /* why it failed (ok == false) */
    double median_s, min_s, max_s; /* time per call; NaN: unknown */
    double p25_s, p75_s;   /* quartiles of the timed calls (0: not given) */
    double spread;         /* (p75-p25)/median, else (max-min)/median; NaN: one call */
    unsigned calls;        /* timed calls (0: not given) */
    char counters[320];    /* why CPI and bandwidth are not shown ("no PMU: ..."),
                              "" when they are */
    double cpi, bandwidth_gbps; /* measured; NaN until record stores counter values */
    double gflops, gbps;   /* NaN when the op's counts are unknown */
    char kernel[256];      /* innermost hot kernel ("" when none) */
    double kernel_share;   /* of the op's self time (or of all samples) */
    unsigned threads_active; /* threads with samples */
    int threads;           /* requested (0: default) */
};
/* Fills spread, gflops and gbps from the times and the counts (flops < 0: unknown). */
void sweep_row_derive(struct sweep_row *r, double flops, double bytes);

/* Keeps only the samples whose stack has the Python function python_function
 * (a qualname: SWEEP_TIMED_FUNCTION), and makes their weight the total.
 * Returns how many were kept; 0 leaves the profile untouched. */
size_t profile_keep_samples_under(struct profile *p, const char *python_function);

struct diff_row {
    char *name;
    double a_s, b_s;         /* self time */
    double a_share, b_share; /* self share of all samples, 0..1 */
};
struct diff_table {
    struct diff_row *rows;
    size_t nrows;
    const char *grouping;    /* "op" or "function" */
    const char *scope;       /* which samples were compared, one sentence (NULL: all) */
};
/* Joins two self tables by row name. 0 or -1 on out of memory. */
int diff_compute(const struct hotspot_table *a, const struct hotspot_table *b, struct diff_table *out);
/* By |b_share - a_share| descending, then |b_s - a_s|, then name. */
void diff_sort(struct diff_table *t);
void diff_free(struct diff_table *t);
/* --- end of sweeps and diffs ------------------------------------------------ */

#endif
