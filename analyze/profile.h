/*
 * analyze/profile.h — the profile model: frames, stacks, threads,
 * processes and samples of one result, how it is loaded and built.
 * Part of analyze/analyze.h, the folder's one interface: include that, not
 * this file, from outside analyze/.
 */
#ifndef OPPROF_ANALYZE_PROFILE_H
#define OPPROF_ANALYZE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROFILE_HANDLER_BUCKETS 24 /* OPR_HANDLER_BUCKETS (checked in analyze/accounting.c) */

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

/* One sample, or (a profile loaded with PROFILE_LOAD_AGGREGATED) a row
 * standing for count samples of one thread with one stack and the same
 * flags: weight is then their sum and time_ns the first one's. Rows with an
 * OpenMP region or counters are always single samples. Code that counts
 * samples adds count, never 1. */
struct prof_sample {
    uint64_t time_ns;
    uint32_t thread;  /* index into profile.threads */
    uint32_t stack;   /* index into profile.stacks */
    uint32_t weight;  /* timer periods this sample (these samples) stand for */
    uint32_t flags;   /* OPR_SAMPLE_* */
    uint32_t omp_region; /* threading: index + 1 into threading->regions (0: none) */
    uint32_t counters;   /* per-sample counters: 1 + row of profile.counters->values (0: none) */
    uint32_t count;      /* samples this row stands for (1 for a single sample) */
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
    unsigned online_cpus;        /* CPUs online when recording started (0: unknown) */
    bool complete;               /* the launcher wrote its final info */
    bool user_only;              /* kernel mode not sampled */
    bool attached;               /* opprof attach (info mode=attach): no agent ran inside the process */
    bool cpu_time_weights;       /* user_only: each sample weighs its thread's CPU time since the previous one */
    bool tick_timer;             /* record --timer tick: per-thread CPU-time timers (info timer=tick) */

    struct prof_frame *frames;    size_t nframes;
    struct prof_stack *stacks;    size_t nstacks;
    struct prof_thread *threads;  size_t nthreads;
    struct prof_process *processes; size_t nprocesses;
    struct prof_sample *samples;  size_t nsamples; /* rows, sorted by time (first sample's) */
    uint64_t sample_count;   /* samples read: the sum of the rows' counts (nsamples when not aggregated) */
    bool timeline;           /* every row is one sample (PROFILE_LOAD_SAMPLES): times are exact */

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
    /* The agent's unwinder (UNWIND records, the last of each stream): stacks
     * walked by its tables and by libunwind; with OPPROF_UNWIND_CHECK=1,
     * samples unwound both ways and those that differed. */
    uint64_t unwind_table_samples, unwind_fallback_samples, unwind_check_samples, unwind_check_disagree;
    uint64_t unwind_context_checked, unwind_context_disagree; /* OpenMP contexts repeated without a walk */
    uint64_t unwind_replay_samples; /* table walks finished from the thread's previous walk (memo) */
    /* Walks the handler left to the writer on a copy of the stack; of them,
     * finished and cut; in check mode compared with libunwind, and differing. */
    uint64_t unwind_deferred_samples, unwind_deferred_finished, unwind_deferred_cut;
    uint64_t unwind_deferred_checked, unwind_deferred_disagree;
    uint64_t unwind_deferred_unknown_stack; /* of them, stacks the agent's snapshot did not know yet */
    uint64_t unwind_check_at_entry; /* check mode: leaves at a function entry no FDE covers (not disagreements) */
    uint64_t unwind_rule_lookups, unwind_rule_cache_hits; /* frames' rules looked up; of them, from the thread's cache */
    /* Tables the agents put in place (compiled or, unwind_tables_cached of
     * them, read from the cache of earlier runs) and the writers' CPU time
     * for it. */
    uint64_t unwind_tables_built, unwind_tables_cached, unwind_build_cpu_ns;
    /* ACCOUNTING records summed over processes (analyze/accounting.c): CPU
     * time no sample stands for and why, the agent's start-up cost, samples
     * a full disk kept out. acct_cpu_ns: process CPU of the streams that had one. */
    struct {
        uint64_t cpu_ns, startup_cpu_ns, unsampled_ns, trap_blocked_threads, trap_blocked_cpu_ns;
        uint64_t threads_started, threads_sampled, unwritten_samples;
        uint64_t info_unwritten; /* the launcher's count (info): streams cut by a full disk cannot hold theirs */
        size_t streams;
    } acct;
    /* AGENT_CPU records summed over processes (analyze/accounting.c): the
     * handler's cost on the thread CPU clock, estimated per stream from its
     * timed calls (handler_cpu_est_ns), their histogram, the writer's re-reads. */
    struct profile_agent_cpu {
        uint64_t handler_cpu_est_ns, handler_timed, handler_calls;
        /* of handler_calls, those of streams with no timed call (a process
         * that took fewer samples than one in timed_every): the estimate
         * has nothing of theirs, report_agent_cost charges them the others'
         * mean per call */
        uint64_t untimed_calls;
        uint64_t buckets[PROFILE_HANDLER_BUCKETS]; /* format.h's OPR_HANDLER_BUCKET_BOUNDS_NS */
        uint64_t maps_rereads, maps_probes, phdr_refreshes, schedstat_reads, pystack_hits, pystack_misses;
        uint64_t offcpu_same_wait, omp_hook_ns;
        uint64_t omp_team_wait_ns; /* libgomp teams spinning through their openers' hooks (estimate) */
        uint64_t drains, quiet_drains, steady_drains; /* the writers' periodic drains; longer sleeps after them */
        /* older streams' clock_read_ns x handler_timed, summed: divided by
         * handler_timed, the clock read the histogram's calls each hold */
        uint64_t clock_read_timed_ns;
        uint64_t timing_ns; /* the timed calls' clock reads (opr_agent_cpu_timing_ns), in handler_cpu_est_ns */
        uint32_t timed_every;
        size_t streams;
    } agent_cpu;
    char **warnings;         /* loader warnings: truncated files, missing modules */
    size_t nwarnings;

    void *priv; /* string interning, symbolizer */
    struct prof_threading *threading; /* threads and OpenMP (NULL: none recorded) */
    struct prof_counters *counters;   /* per-sample counters (NULL: none recorded) */
    struct prof_ranks *ranks;         /* ranks and off-CPU time (NULL: none recorded) */
    struct prof_memory *memory;       /* memory over time (analyze/memory.c; NULL: none recorded) */
};

/* Loads dir, then runs profile_prepare. On failure returns -1, prints
 * nothing, and writes one sentence naming the problem and the fix into err
 * ("out of memory" with errno ENOMEM: the caller says so and exits 2).
 * Every sample is kept (profile.timeline): what a timeline needs. */
int profile_load(const char *dir, struct profile **out, char *err, size_t errlen);
/* How much of each sample a load keeps. */
enum profile_load_mode {
    PROFILE_LOAD_SAMPLES,    /* one row per sample, with its time: timelines (Chrome trace, HTML, speedscope) */
    PROFILE_LOAD_AGGREGATED, /* one row per (thread, stack, flags): memory bounded by distinct stacks x
                                threads, for every table and non-timeline export. Streams whose samples
                                carry OpenMP regions or counters keep one row per sample (worker grafting
                                matches samples by time; counter values are per sample) */
};
int profile_load_as(const char *dir, enum profile_load_mode mode, struct profile **out, char *err, size_t errlen);
/* The analysis steps after loading that rewrite samples, in one place so that
 * reports and exports of one result see the same data: OpenMP worker
 * grafting (threading_attribute). profile_load runs it. 0, or -1 with errno
 * ENOMEM. */
int profile_prepare(struct profile *p);
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
/* count samples of thread on stack with flags, the first at first_ns and the
 * last at last_ns, weighing weight together: added to the row of (thread,
 * stack, flags) when there is one with room (a new row otherwise). 0, or -1
 * with errno ENOMEM. */
int profile_add_sample_row(struct profile *p, uint64_t first_ns, uint64_t last_ns, uint32_t thread,
                           uint32_t stack, uint32_t flags, uint64_t weight, uint64_t count);

/* analyze/accounting.c: the agent's CPU cost (AGENT_CPU records). */
void profile_agent_cpu_add(struct profile_agent_cpu *to, const struct profile_agent_cpu *from);
double profile_handler_quantile_ns(const struct profile_agent_cpu *a, double q); /* q in 0..1; 0: none timed */

#endif
