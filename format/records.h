/*
 * format/records.h — the records of the raw on-disk format, the twin of
 * docs/format.md: file header, record header, every record's body (the
 * variables of the agent's environment that configure one record stay beside
 * it; the others are in format/format.h).
 *
 * Included by format/format.h, format/'s one interface, which adds the
 * stream writer and reader that write and read these records; other folders
 * include format/format.h, never this file. Kept apart so that the format can
 * be read alone, as austin keeps its format in mojo.h: nothing but layouts
 * and their constants lives here.
 *
 * All multi-byte integers are little-endian (the host order on x86-64, the
 * only target so far); every record is 8-byte aligned.
 */
#ifndef OPPROF_FORMAT_RECORDS_H
#define OPPROF_FORMAT_RECORDS_H

#include <stdint.h>
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
    OPR_REC_STACK_TAIL = 16,   /* struct opr_chain_tail + uint64_t pcs[nframes]: a STACK sharing an earlier one's root side */
    OPR_REC_PYSTACK_TAIL = 17, /* struct opr_chain_tail + struct opr_pyframe_packed[nframes]: the same for PYSTACK */
    OPR_REC_SAMPLE_SHORT = 18, /* struct opr_sample_short: a SAMPLE in 32 bytes instead of 40 */
    OPR_REC_SAMPLE_RUN = 19,   /* struct opr_sample_run + packed entries: consecutive SAMPLE_SHORTs in ~10 bytes each */
    OPR_REC_AGENT_COST = 11, /* struct opr_agent_cost: what sampling cost this process */
    OPR_REC_AGENT_CPU = 15,  /* struct opr_agent_cpu: the handler's CPU time per sample (histogram), the writer's re-reads */
    OPR_REC_ACCOUNTING = 14, /* struct opr_accounting: CPU time no sample stands for, start-up cost, unwritten samples */
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
/* SAMPLE_SHORT: what most samples need (no OpenMP region tail, a weight
 * below 2^24, flags below 256) in 24 body bytes. Readers treat it as the
 * SAMPLE it stands for; a COUNTER_SAMPLE after it belongs to it. */
struct opr_sample_short {
    uint64_t time_ns;
    uint32_t tid;
    uint32_t stack_id;
    uint32_t py_stack_id_plus1;
    uint32_t weight_flags; /* weight in bits 0-23, OPR_SAMPLE_* flags in bits 24-31 */
};
#define OPR_SAMPLE_SHORT_MAX_WEIGHT 0xffffffu
/* SAMPLE_RUN: consecutive samples of a stream (any of its threads) that
 * would each be a SAMPLE_SHORT, packed. count entries follow the struct, each
 * five unsigned LEB128 numbers: the time since the previous entry's
 * (the first entry's: since base_time_ns) zigzag-encoded (samples of two
 * threads may be queued slightly out of time order), the tid (0: the
 * previous entry's; not 0 in the first entry), stack_id,
 * py_stack_id_plus1 and SAMPLE_SHORT's weight_flags. Every number fits 32
 * bits except the time. Readers take each entry as that SAMPLE_SHORT; no
 * COUNTER_SAMPLE follows a SAMPLE_RUN (a sample with counters is written
 * alone). */
struct opr_sample_run {
    uint64_t base_time_ns;
    uint32_t count;
    uint32_t pad;
};
#define OPR_SAMPLE_RUN_ENTRY_MAX 30 /* bytes of one entry at most: 10 + 4 x 5 */
#define OPR_SAMPLE_TRUNCATED 1u /* unwinding stopped at OPR_MAX_FRAMES, or cut short (docs/format.md) */
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

/* STACK_TAIL / PYSTACK_TAIL: chain `id` is the nframes elements that follow
 * (leaf first) and then the elements parent_skip..end of chain parent_id,
 * written before it in the same stream. Deep stacks differ mostly at the
 * leaf: a new chain costs its new frames, not its depth. */
struct opr_chain_tail {
    uint32_t id;
    uint32_t nframes;     /* may be 0: the chain is a root-side run of the parent */
    uint32_t parent_id;
    uint32_t parent_skip; /* < the parent's depth */
};
/* A Python frame in a PYSTACK_TAIL: opr_pyframe in 8 bytes. code_entry holds
 * the code id in bits 0-30 (0x7fffffff: OPR_PYCODE_UNKNOWN) and
 * OPR_PYFRAME_ENTRY in bit 31. */
struct opr_pyframe_packed {
    uint32_t code_entry;
    int32_t line;
};
#define OPR_PYFRAME_PACKED_UNKNOWN 0x7fffffffu

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

/* Upper bounds (ns, exclusive) of the handler-CPU histogram's buckets; the
 * last bucket is open. Fixed, so the handler only increments a counter. */
#define OPR_HANDLER_BUCKETS 24
#define OPR_HANDLER_BUCKET_BOUNDS_NS                                                                          \
    {250, 500, 750, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 8000, 10000, 12000, 16000, 24000, 32000,  \
     48000, 64000, 128000, 256000, 512000, 1024000, UINT64_MAX}

/* Written with END, after AGENT_COST: the agent's cost measured so that
 * preemption does not inflate it (handler_ns above is wall time). One
 * handler call in timed_every is timed between two reads of the thread's CPU
 * clock (a system call, 1-5 us in a handler: too dear for every sample); the
 * mean over the timed calls stands for all. */
struct opr_agent_cpu {
    uint64_t handler_cpu_ns;   /* the timed handler calls' time, summed: with timing_ns, the wall time from the
                                  handler's entry to its second CPU-clock read less the first read (between
                                  the reads, the CPU interval if less: preempted); without (older agents),
                                  the CPU interval between the reads, one read inside it */
    uint64_t handler_timed;    /* handler calls timed */
    uint64_t handler_calls;    /* handler calls the timed ones were drawn from (samples queued or lost) */
    uint32_t timed_every;      /* one call in this many is timed, per thread */
    uint32_t nbuckets;         /* OPR_HANDLER_BUCKETS */
    uint64_t buckets[OPR_HANDLER_BUCKETS]; /* timed calls per bucket of OPR_HANDLER_BUCKET_BOUNDS_NS */
    uint64_t maps_rereads;     /* full reads of /proc/self/maps by the writer (both tables) */
    uint64_t maps_probes;      /* single addresses checked instead of a full read (missed reads, new code) */
    uint64_t phdr_refreshes;   /* snapshots of the loaded objects (dl_iterate_phdr) */
    uint64_t schedstat_reads;  /* /proc/self/task/TID/schedstat reads */
    uint64_t pystack_hits;     /* Python chains found in the writer's cache */
    uint64_t pystack_misses;   /* Python chains built frame by frame */
    /* Appended (older streams end before it: read as 0). */
    uint64_t offcpu_same_wait; /* off-CPU polls that reused a blocked thread's stack: it had not run since */
    uint64_t omp_hook_ns;      /* the agent's time in workload threads around OpenMP regions (TSC, all threads) */
    uint64_t clock_read_ns;    /* older agents: one read of the thread CPU clock, measured at start (0: not measured) */
    uint64_t drains;           /* the writer's periodic drains (appended: 0 in older streams) */
    uint64_t quiet_drains;     /* of them, followed by a longer sleep: nothing ran */
    uint64_t steady_drains;    /* of them, followed by a longer sleep: no thread switched in, RSS steady */
    /* Appended after steady_drains (0 in older streams): CPU time the other
     * threads of GNU libgomp teams spent spinning while their opener ran the
     * agent's hooks outside the region (TSC, estimated; agent_gomp.c). */
    uint64_t omp_team_wait_ns;
    /* Appended after omp_team_wait_ns (0 in older streams): the wall time of
     * the timed calls' two CPU-clock reads, summed (each read at most 50 us):
     * what timing them cost, which the other calls do not pay. */
    uint64_t timing_ns;
    /* Appended after timing_ns (0 in older streams): the timed calls per
     * bucket of OPR_HANDLER_BUCKET_BOUNDS_NS of that wall time. A read that
     * waited for a CPU (threads oversubscribed) counts its wait in the sum;
     * the estimate takes the median, which a few such reads do not move. */
    uint64_t timing_buckets[OPR_HANDLER_BUCKETS];
};

/* Quantile q (0-1) of a histogram over OPR_HANDLER_BUCKET_BOUNDS_NS, linear
 * inside a bucket (the open last bucket: its lower bound); 0 when empty. */
static inline double opr_bucket_quantile_ns(const uint64_t *buckets, double q)
{
    static const uint64_t bounds[OPR_HANDLER_BUCKETS] = OPR_HANDLER_BUCKET_BOUNDS_NS;
    double total = 0;
    for (unsigned b = 0; b < OPR_HANDLER_BUCKETS; b++)
        total += (double)buckets[b];
    if (total == 0)
        return 0;
    double want = q * total, seen = 0;
    for (unsigned b = 0; b < OPR_HANDLER_BUCKETS; b++) {
        double lo = b ? (double)bounds[b - 1] : 0;
        if (buckets[b] && seen + (double)buckets[b] >= want) {
            if (b + 1 == OPR_HANDLER_BUCKETS)
                return lo;
            return lo + ((double)bounds[b] - lo) * (want - seen) / (double)buckets[b];
        }
        seen += (double)buckets[b];
    }
    return (double)bounds[OPR_HANDLER_BUCKETS - 2];
}

/* What timing the timed calls of one AGENT_CPU record cost: their median
 * times their number (the sum where a stream has no histogram of it). */
static inline double opr_agent_cpu_timing_ns(const struct opr_agent_cpu *c)
{
    double median = opr_bucket_quantile_ns(c->timing_buckets, 0.5);
    return median > 0 ? median * (double)c->handler_timed : (double)c->timing_ns;
}

/* The handler's CPU time over all calls of one AGENT_CPU record (0 when
 * nothing was timed): the timed calls' mean times all calls, plus what
 * timing them cost (opr_agent_cpu_timing_ns). Older agents (no timing_ns): the mean less
 * the one clock read each timed call holds, plus two reads per timed call
 * spread over all calls. The agent (ACCOUNTING) and the report use this one
 * estimate. */
static inline double opr_agent_cpu_estimate_ns(const struct opr_agent_cpu *c)
{
    if (c->handler_timed == 0 || c->handler_calls < c->handler_timed)
        return 0;
    double mean = (double)c->handler_cpu_ns / (double)c->handler_timed;
    if (c->timing_ns)
        return mean * (double)c->handler_calls + opr_agent_cpu_timing_ns(c);
    double read = (double)c->clock_read_ns;
    double timing = c->timed_every ? 2 * read / c->timed_every : 0;
    return ((mean > read ? mean - read : 0) + timing) * (double)c->handler_calls;
}

/* Written with END (before it, after AGENT_COST): what the samples of this
 * image do not stand for, measured in the process, so that "lost 0" is never
 * said of CPU time nobody sampled (issue 18, items 5-7). */
struct opr_accounting {
    uint64_t time_ns;
    uint64_t startup_cpu_ns;   /* agent start-up in this image (constructor or fork child), thread CPU time */
    uint64_t shutdown_cpu_ns;  /* agent shutdown (final drain, polls) up to this record, thread CPU time */
    uint64_t sampled_ns;       /* timer periods the handler took x period (incl. lost, outside the window); 0 for -c */
    uint64_t unsampled_ns;     /* process CPU - agent cost (handler, writer, start-up, shutdown) - sampled_ns, >= 0; 0 for -c */
    uint64_t trap_blocked_threads; /* threads seen with SIGTRAP in their signal mask (/proc task status SigBlk) */
    uint64_t trap_blocked_cpu_ns;  /* their CPU time (schedstat) */
    uint64_t threads_started;  /* threads of this image: the main thread + pthread_create calls */
    uint64_t threads_sampled;  /* of them, threads with at least one sample */
    uint64_t unwritten_samples;/* samples dropped because the stream could not be written (disk full, I/O error) */
    uint32_t write_errno;      /* the first write error (ENOSPC, EDQUOT, EIO...), 0: none */
    uint32_t pad;
};

/* Collection limits (record --delay/--duration/--max-size). Cumulative per
 * stream, written when they change and with END; the last one counts. */
struct opr_limits {
    uint64_t time_ns;
    uint64_t outside_window;    /* samples taken before --delay or after --duration ended: not recorded */
    uint64_t dropped_size_cap;  /* samples dropped because the result dir had reached --max-size */
    uint64_t first_drop_ns;     /* CLOCK_MONOTONIC of the first size-cap drop in this stream (0: none) */
};

/* The agent's table-driven unwinder (sampler/agent/unwind_table.h), cumulative
 * per stream: written when the counts change (at most once a second) and at
 * the end; the last one counts. */
#define OPR_REC_UNWIND 24
struct opr_unwind {
    uint64_t time_ns;
    uint64_t table_samples;      /* stacks unwound entirely by the tables (the fast path) */
    uint64_t table_frames;       /* frames of those stacks */
    uint64_t fallback_samples;   /* stacks unwound by libunwind instead; by cause: */
    uint64_t fallback_not_built; /*   the module's table was not built yet (the writer builds it) */
    uint64_t fallback_no_module; /*   a PC in no loaded object (JIT code, a library loaded since the last scan) */
    uint64_t fallback_no_table;  /*   a module without .eh_frame_hdr */
    uint64_t fallback_rule;      /*   a row the tables cannot express (DWARF expression, signal frame, ...) */
    uint64_t fallback_read;      /*   a stack slot outside the readable mappings, or a CFA not above SP */
    uint64_t check_samples;      /* OPPROF_UNWIND_CHECK=1: samples unwound both ways */
    uint64_t check_disagree;     /*   of them, with both ways complete, stacks that differ */
    uint64_t check_disagree_length; /*   of those, one stack a prefix of the other */
    uint64_t tables_built;       /* modules compiled */
    uint64_t table_bytes;        /* their mmap'ed size */
    uint64_t build_cpu_ns;       /* the writer's CPU time getting them (passes, lookups, compiling or reading) */
    /* Time of the unwinding step alone (TSC read around it, converted with
     * the writer's calibration against CLOCK_MONOTONIC), median and 99th
     * percentile over this stream, 1/4-octave resolution. Normally: "table"
     * = samples on the tables, "libunwind" = samples that fell back (the
     * failed table walk included). With OPPROF_UNWIND_CHECK=1 both walks of
     * the same samples are timed apart: the two unwinders side by side. */
    uint64_t table_p50_ns, table_p99_ns;
    uint64_t libunwind_p50_ns, libunwind_p99_ns;
    /* Tables kept across runs by build-id: of tables_built, those read from
     * the cache instead of compiled; tables written to it; cache files
     * refused (damaged, another layout) and compiled instead. */
    uint64_t cache_loaded, cache_stored, cache_rejected;
    /* OpenMP openers' contexts found unchanged (no walk, see struct
     * opr_omp_context) that check mode walked anyway, and of them those
     * whose walk differed from the context they repeated (must be 0). */
    uint64_t context_checked, context_disagree;
    /* Of table_samples, stacks finished from the thread's previous walk
     * (the memo, sampler/agent/unwind_table.h): the walk reached a frame
     * in the same state as one of the previous walk's, re-read the stack
     * words the previous walk read above it, found them equal and copied
     * its frames; replay_frames counts the frames so taken. Absent (0) in
     * streams written before them. */
    uint64_t replay_samples, replay_frames;
    /* Frames whose rule the walk looked up (every frame of table walks not
     * copied from the memo, check mode's too), and of them those whose
     * rule came from the thread's rule cache (unwind_table.h) instead of
     * the module's table. Absent (0) in streams written before them. */
    uint64_t rule_lookups, rule_cache_hits;
    /* Cache files the writer removed to keep the cache directory within
     * $OPPROF_UNWIND_CACHE_MAX, least recently used first. Absent (0) in
     * streams written before it. */
    uint64_t cache_evicted;
    /* Deferred walks (sampler/agent/unwind_table.h): stacks whose walk
     * stopped at a module without a table yet (or a PC in no module), left
     * by the handler to the writer with a copy of the stack instead of
     * going to libunwind; of them, those the writer finished and those it
     * had to cut (the copy ended, or a frame the tables cannot do); samples
     * that went to libunwind because every copy buffer was in use (they
     * are in fallback_samples too). Check mode: finished walks compared
     * with libunwind's stack, and those that differed. Absent (0) in
     * streams written before them. */
    uint64_t deferred_samples, deferred_finished, deferred_cut, deferred_pool_full;
    uint64_t deferred_checked, deferred_disagree;
    /* Of deferred_samples, those whose stack the readable-mappings snapshot
     * did not know yet (a new thread's, a grown main stack), copied through
     * the kernel; before, each went to libunwind as a "read" fallback.
     * Absent (0) in streams written before it. */
    uint64_t deferred_unknown_stack;
    /* Check mode, of check_samples and deferred_checked: stacks whose leaf
     * is a function's first instruction that no FDE covers (_init, _fini),
     * walked by the tables with the ABI's entry rule, where libunwind has no
     * rule and ends or guesses the stack. Not in the disagreements. Absent
     * (0) in streams written before it. */
    uint64_t check_at_entry;
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
    uint64_t unwritten;        /* samples lost because a stream could not be written (disk full); not in samples */
    /* ACCOUNTING totals over the processes that ended (docs/format.md) */
    uint64_t cpu_ns;           /* process CPU time */
    uint64_t unsampled_ns;     /* of it, CPU time no sample stands for */
    uint64_t startup_cpu_ns;   /* the agent's start-up and shutdown CPU time */
    uint64_t trap_blocked_threads;
    uint64_t threads_started, threads_sampled;
};
#define OPR_LIVE_MAGIC "OPLIVE01"

/* --- threading and OpenMP records (sampler/agent/agent_ompt.c, agent_threads.c) -------- */
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
/* The opener's stack and Python frames at this region's begin were those of
 * its latest OMP_CONTEXT before it (the agent found them unchanged and sent
 * no context of its own): readers take that one. */
#define OPR_OMP_REGION_CONTEXT_REPEATED 2u

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
    /* Added after the first release of the record: readers take a shorter
     * body (OPR_OMP_TICK_MIN_BYTES) and read these as 0. */
    uint32_t events_lost; /* region begin/end events lost to a full per-thread ring in the period */
    uint32_t contexts_repeated; /* regions begun whose opener's context was its previous one (was pad, 0) */
};
#define OPR_OMP_TICK_MIN_BYTES 64 /* the body up to omp_threads */
_Static_assert(OPR_OMP_TICK_MIN_BYTES == offsetof(struct opr_omp_tick, events_lost), "OMP_TICK's first body");

struct opr_omp_context {
    uint64_t region_id;
    uint64_t time_ns;
    uint32_t tid;
    uint32_t stack_id;          /* STACK record: the opener's native chain at region begin */
    uint32_t py_stack_id_plus1; /* 0: no Python frames */
    uint32_t flags;             /* OPR_OMP_CONTEXT_* (was pad, 0) */
};
/* The agent found this opener's stack unchanged since its previous context
 * (no walk: the same stack words, see sampler/agent/agent_ompt.c). */
#define OPR_OMP_CONTEXT_REPEATED 1u

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
#define OPR_ENV_TIMER "OPPROF_TIMER"                /* "tick": per-thread POSIX CPU-time timers (record --timer tick) */
#define OPR_ENV_OMP_CONTEXT "OPPROF_OMP_CONTEXT_NS" /* min ns between opener-stack captures (0, default: every region) */
#define OPR_ENV_OMP_REGIONS "OPPROF_OMP_REGIONS"    /* "0": no OpenMP region recorded (record --no-openmp-regions) */
/* --- end of threading and OpenMP records ----------------------------------- */

/* --- per-sample counters (sampler/agent/agent_counters.c, docs/format.md) ------- */
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
    uint32_t state;             /* /proc task state letter ('S', 'D', 'R'): docs/format.md */
    uint32_t pad;
};


/* --- memory over time (types 30-39; docs/format.md "Memory") --------------- */
/* Written by the agent's writer thread (sampler/agent/agent_memory.c) and by
 * attach mode from outside. Optional: a stream without them has no Memory
 * section. */
#define OPR_REC_MEM_TICK 30  /* struct opr_mem_tick: one reading of the process's RSS and page faults */
#define OPR_REC_MEM_LIMIT 31 /* struct opr_mem_limit + cgroup path: the memory limit the process runs under */

/* A reading is taken every writer period (~10 ms) and written when the RSS,
 * the high-water mark or the major faults changed since the last record
 * (and always for the first and last reading): growth between two records
 * happened after since_ns, the previous reading, which found the RSS of the
 * record before. */
struct opr_mem_tick {
    uint64_t time_ns;    /* CLOCK_MONOTONIC of this reading */
    uint64_t since_ns;   /* the reading before this one (0: none): the growth happened in (since_ns, time_ns] */
    uint64_t rss_bytes;  /* resident set: statm resident x page size */
    uint64_t anon_bytes; /* anonymous resident memory (RssAnon = resident - shared) */
    uint64_t file_bytes; /* file-backed and shared-memory resident pages (statm shared: RssFile + RssShmem) */
    uint64_t hwm_bytes;  /* the kernel's peak RSS so far (VmHWM, getrusage ru_maxrss); 0: unknown */
    uint64_t minflt;     /* minor page faults so far (cumulative, the whole process) */
    uint64_t majflt;     /* major page faults so far (had to read from disk or swap) */
    /* Of rss_bytes, the agent's own resident memory (its sample ring and
     * unwind tables, anonymous): the report leaves it out of the workload's
     * RSS and growth. Absent from older records (a 64-byte body): 0. */
    uint64_t agent_bytes;
    /* Of agent_bytes, the file-backed part (unwind tables mapped from the
     * cache: in file_bytes, not anon_bytes). Absent (72-byte body): 0. */
    uint64_t agent_file_bytes;
};
#define OPR_MEM_TICK_MIN_BODY 64 /* the body before agent_bytes was added */

/* The cgroup memory limit, read at the start of a stream: the smallest over
 * the process's cgroup and its parents (v2 memory.max, v1
 * memory.limit_in_bytes). */
struct opr_mem_limit {
    uint64_t time_ns;
    uint64_t limit_bytes; /* 0: no limit (max) or none readable */
    uint64_t high_bytes;  /* v2 memory.high (throttling starts there); 0: none */
    uint32_t version;     /* cgroup version the limit came from: 1, 2, 0 = none found */
    uint32_t path_len;    /* bytes of the process's cgroup path that follow (where the limit was read) */
};
/* --- end of memory over time ------------------------------------------------ */

#endif /* OPPROF_FORMAT_RECORDS_H */
