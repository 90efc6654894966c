/*
 * sampler/agent/agent.h — private to the injected agent (libopprof_agent.so).
 *
 * The agent is LD_PRELOADed into every process of the workload. Its parts:
 *   agent.c          constructor/destructor, the perf_event timer, the SIGTRAP
 *                    handler that captures one sample, fork/exec/exit hooks
 *   agent_queue.c    the lock-free queue between the handler and the writer
 *   agent_writer.c   the writer thread: stack dedup, maps, threads, the stream
 *   agent_signals.c  keeps the workload's own SIGTRAP handling working
 *   unwind_sample.c  a sample's unwind: tables or libunwind, timing, check mode
 *   unwind_table.c   the handler's stack walk on unwind tables (unwind_table.h),
 *   unwind_build.c   which the writer compiles (unwind_compile.c) from each
 *                    object's .eh_frame
 *
 * Nothing outside sampler/agent/ includes this header: the agent talks to the
 * launcher only through format/format.h (records, environment variables).
 */
#ifndef OPPROF_AGENT_H
#define OPPROF_AGENT_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

/* Linux 5.14; older headers lack it (the call then fails: EINVAL). */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Back [from, from + len) with memory, whole pages, as a write would but
 * without changing a byte, so that a handler's first touch does not take
 * the page faults (~2-15 us each on a VM). Safe beside threads writing
 * there. Never from a handler: it is a system call that may sleep. 0, or
 * -1 (Linux < 5.14: EINVAL, and the faults stay). Inline, so that each
 * caller's object file names madvise for test_signal_safety. */
static inline int agent_populate(const void *from, size_t len)
{
    const uintptr_t page = 4096;
    uintptr_t lo = (uintptr_t)from & ~(page - 1), hi = ((uintptr_t)from + len + page - 1) & ~(page - 1);
    return madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
}

#include "format/format.h"
#include "sampler/common/common.h"
/* --- threading/OpenMP: the OMPT tool and the schedstat poller ------------ */
#include "sampler/agent/agent_ompt.h"
/* A queue slot that is not a sample but an OpenMP opener's calling context
 * (ompt_tool.c captures it at parallel begin; the writer emits OMP_CONTEXT). */
#define AGENT_SLOT_OMP_CONTEXT 0x8000u
/* --- end threading/OpenMP ------------------------------------------------ */

#define AGENT_HIDDEN __attribute__((visibility("hidden")))

/* One captured sample, as the handler leaves it for the writer. The queue
 * (agent_queue.c) hands out room for the largest sample and keeps only the
 * bytes used: the header and counters, then nframes PCs (at least one) and,
 * packed right after them, npy Python frames (agent_slot_py). */
#define AGENT_SLOT_PAD 0x2000u /* queue filler up to the ring's end, not a sample */
struct agent_slot {
    _Atomic uint64_t seq; /* queue bookkeeping (see agent_queue.c) */
    uint64_t time_ns;
    uint32_t tid;
    uint16_t nframes;
    uint16_t flags;       /* OPR_SAMPLE_*, AGENT_SLOT_* */
    uint32_t npy;         /* Python frames, 0 when the thread runs no Python */
    uint32_t weight;      /* periods of thread CPU time (user + kernel) it stands for */
    /* --- threading/OpenMP (ompt/ompt.h) --- */
    uint64_t omp_region;  /* sampled thread's parallel region id (0: none) */
    /* --- end threading/OpenMP --- */
    /* --- per-sample counters (agent_counters.c): deltas since the thread's
     * previous sample, {value, enabled, running}; nctr 0: none --- */
    uint32_t nctr;
    uint32_t bytes;       /* the entry's length in the queue (agent_queue.c) */
    uint32_t defer;       /* a deferred walk's stack copy (unwind_table.h), 0: none */
    uint64_t ctr[OPR_MAX_COUNTERS][3];
    uint64_t pcs[OPR_MAX_FRAMES];
    struct py_frame_ref py_room[OPR_MAX_PYFRAMES]; /* room only: the frames start at agent_slot_py */
};

/* Where the Python frames of a slot go: right after its PCs (set nframes
 * first). pcs[0] is kept even when nframes is 0: the writer reads it. */
static inline struct py_frame_ref *agent_slot_py(struct agent_slot *s)
{
    return (struct py_frame_ref *)(void *)&s->pcs[s->nframes ? s->nframes : 1];
}

/* The bytes a filled slot uses. */
static inline size_t agent_slot_used_bytes(const struct agent_slot *s)
{
    unsigned n = s->nframes ? s->nframes : 1;
    if (n > OPR_MAX_FRAMES)
        n = OPR_MAX_FRAMES;
    unsigned npy = s->npy <= OPR_MAX_PYFRAMES ? s->npy : OPR_MAX_PYFRAMES;
    return offsetof(struct agent_slot, pcs) + (size_t)n * sizeof s->pcs[0] + (size_t)npy * sizeof(struct py_frame_ref);
}

/* ---- double-buffered snapshots (agent_phdr.c, agent_memmap.c) ----------
 * A writer fills the table not published, after waiting until no handler
 * still reads it, then publishes it by storing its index in *current. A
 * handler counts itself in to the published table and re-checks that it is
 * still the published one. When a refresh published the other table in
 * between, it tries again rather than report "no snapshot": libunwind caches
 * a frame it could not find unwind info for as the outermost one for the
 * rest of the thread's life, so one spurious miss cut every later stack
 * through that PC (test_dlopen: main()'s samples stopped at spin() for a
 * whole run while other threads dlclose'd 4,000 times a second).
 * A retry keeps its count in the table it lost: the writer waits for that
 * table's readers before it fills it, so a writer republishing back to back
 * cannot flip *current in step with the retries (it did: released at once,
 * the count let the writer in just as the handler looked again, and 64 tries
 * failed in a row beside two busy loops, snapshot_stress). With both tables
 * counted the writer can finish at most the refresh already under way, so
 * the loop ends within a few rounds; the bound is a guard.
 * Handler-safe: atomics only. Returns the table index, -1 when none; the
 * caller holds one count, on that table. */
static inline int agent_snapshot_enter(_Atomic int *current, _Atomic int *readers)
{
    bool held[2] = {false, false};
    for (int attempt = 0; attempt < 64; attempt++) {
        int t = atomic_load_explicit(current, memory_order_acquire);
        if (t < 0 || t > 1)
            break;
        if (!held[t]) {
            atomic_fetch_add_explicit(&readers[t], 1, memory_order_acq_rel);
            held[t] = true;
        }
        if (atomic_load_explicit(current, memory_order_acquire) == t) {
            if (held[1 - t])
                atomic_fetch_sub_explicit(&readers[1 - t], 1, memory_order_release);
            return t;
        }
    }
    for (int t = 0; t < 2; t++)
        if (held[t])
            atomic_fetch_sub_explicit(&readers[t], 1, memory_order_release);
    return -1;
}

/* ---- agent_phdr.c: dl_iterate_phdr for the unwinder, lock-free in the handler */
struct dl_phdr_info;
AGENT_HIDDEN void agent_phdr_enter_handler(void);
AGENT_HIDDEN void agent_phdr_leave_handler(void);
AGENT_HIDDEN void agent_phdr_refresh(void);        /* writer, constructor, dlclose */
AGENT_HIDDEN void agent_phdr_refresh_if_changed(void); /* writer: after a dlopen */
AGENT_HIDDEN unsigned long long agent_phdr_unload_count(void); /* writer: unloads at the snapshot */
AGENT_HIDDEN void agent_phdr_atfork_child(void);
/* The GNU build-id of a loaded object, from its PT_NOTE segments in memory
 * (the caller holds the loader lock: a dl_iterate_phdr callback). 0: none. */
AGENT_HIDDEN unsigned agent_object_build_id(const struct dl_phdr_info *info, uint8_t out[OPR_BUILD_ID_MAX]);
/* Writer thread: the build-id of the object the snapshot has at addr (its
 * length, 0 when it has none), -1 when no object there is in the snapshot
 * (loaded since, or not by the loader). */
AGENT_HIDDEN int agent_phdr_build_id(uint64_t addr, uint8_t out[OPR_BUILD_ID_MAX]);

/* ---- agent_memmap.c: which addresses the handler may read --------------- */
AGENT_HIDDEN int agent_memmap_begin(void);                    /* handler */
/* handler: [addr, addr+len) in one listed mapping, whose range goes to [*start, *end) */
AGENT_HIDDEN bool agent_memmap_listed(int table, uint64_t addr, size_t len, uint64_t *start, uint64_t *end);
/* Whether the kernel maps [addr, addr + len) readable now (no table: a
 * system call per page spanned, no copy). */
AGENT_HIDDEN bool agent_memmap_readable_now(uint64_t addr, size_t len); /* handler */
/* The same, and the readable range that holds it ([*start, *end)), so that
 * a caller reading many words of one mapping (a stack walk) searches once. */
AGENT_HIDDEN bool agent_memmap_readable_range(int table, uint64_t addr, size_t len, uint64_t *start,
                                              uint64_t *end); /* handler */
AGENT_HIDDEN void agent_memmap_end(int table);                /* handler */
AGENT_HIDDEN void agent_memmap_refresh(void);                 /* writer */
AGENT_HIDDEN void agent_memmap_maybe_refresh(void);           /* writer */
/* Handler: ends the writer's wait now (one futex wake until the writer has
 * woken; defined in unwind_table.c, whose futex the writer waits on). */
AGENT_HIDDEN void agent_wake_writer(void);
AGENT_HIDDEN void agent_memmap_atfork_child(void);

/* ---- agent_python.c: Python frames ---------------------------------------- */
struct agent_pycode_info {
    char filename[512];
    char qualname[256];
    int first_line;
    int line;
};
AGENT_HIDDEN int agent_python_probe(void); /* 1 when Python capture is on */
AGENT_HIDDEN const char *agent_python_take_note(void);
AGENT_HIDDEN unsigned agent_python_capture(struct py_frame_ref *out, unsigned max, uint32_t tid); /* handler */
/* Writer: names and line of a captured frame, read through pid (this process's). */
AGENT_HIDDEN bool agent_python_resolve(const struct py_frame_ref *f, struct agent_pycode_info *info, bool need_names,
                                       pid_t pid);

/* ---- agent_ranks.c: rank variables, other threads' Python stacks ---------- */
/* Handler: remembers which thread state belongs to tid (fixed table, no malloc),
 * so the writer can read a blocked thread's Python stack later. */
AGENT_HIDDEN void agent_tstate_remember(uint32_t tid, uint64_t tstate);
AGENT_HIDDEN uint64_t agent_tstate_lookup(uint32_t tid);   /* writer; 0: unknown */
AGENT_HIDDEN void agent_tstate_forget(uint32_t tid);       /* writer: the state no longer matches */
AGENT_HIDDEN void agent_tstate_reset(void);                /* fork child */
AGENT_HIDDEN void agent_tstate_prefault(void);             /* Python found: back the table's pages */
/* Writer: reads another (blocked) thread's frame chain from its thread state,
 * through the same checks as the handler. Frames found, 0 when unreadable. */
AGENT_HIDDEN unsigned agent_python_capture_thread(uint64_t tstate, struct py_frame_ref *out, unsigned max,
                                                  uint32_t tid);
/* Writer: RANK record at stream start (force) and when the variables change. */
AGENT_HIDDEN void agent_ranks_poll(agent_emit_fn emit, bool force);
/* Writer (schedstat poll): a thread's run/runqueue deltas over one interval
 * (and of its count of times switched in: 0 says it never ran in between)
 * and its run time now (run_ns, schedstat's first field);
 * emits OFFCPU when a Python thread was blocked for part of it. *stat_fd is
 * the thread's /proc/self/task/<tid>/stat, opened here when first needed
 * and kept by the caller (closed when the thread is forgotten). */
AGENT_HIDDEN void agent_offcpu_note(agent_emit_fn emit, uint64_t now_ns, uint64_t interval_ns, uint32_t tid,
                                    uint64_t delta_run_ns, uint64_t delta_wait_ns, uint64_t delta_slices,
                                    uint64_t run_ns, int *stat_fd);
/* ---- agent_memory.c: RSS and page faults over time (MEM_TICK, MEM_LIMIT) ---- */
/* Writer: one reading per writer period, written when it moved; final forces one. */
AGENT_HIDDEN void agent_memory_poll(agent_emit_fn emit, bool final);
AGENT_HIDDEN void agent_memory_atfork_child(void);
/* Whether the last poll found the RSS moved by more than 1 MiB, a new peak
 * or a major fault (or could not read them): the writer then keeps its
 * 10 ms period. */
AGENT_HIDDEN bool agent_memory_moved(void);
/* agent_writer.c: PYSTACK id + 1 of captured frames (0: none), records written as needed. */
AGENT_HIDDEN uint32_t agent_writer_python_stack(const struct py_frame_ref *py, unsigned n);

/* ---- agent_queue.c: bounded multi-producer, single-consumer queue -------- */
#define AGENT_QUEUE_BYTES (4u << 20) /* the ring: ~4,000 PyTorch samples of ~1 KB */
AGENT_HIDDEN int agent_queue_init(size_t bytes);
AGENT_HIDDEN void agent_queue_reset(void);        /* in a fork child: drop the parent's entries */
AGENT_HIDDEN struct agent_slot *agent_queue_claim(void);   /* handler; NULL when full */
AGENT_HIDDEN void agent_queue_commit(struct agent_slot *s); /* handler: after nframes, npy and the frames */
AGENT_HIDDEN struct agent_slot *agent_queue_peek(void);    /* writer; NULL when empty */
AGENT_HIDDEN void agent_queue_release(void);               /* writer: done with the peeked slot */
AGENT_HIDDEN void agent_queue_prefault(void);              /* writer, constructor: back the next slots */
AGENT_HIDDEN uint64_t agent_queue_resident_bytes(void);    /* writer: the ring's pages in memory (mincore) */
AGENT_HIDDEN uint64_t agent_queue_consumed(void);          /* writer: bytes consumed since the start (or reset) */
AGENT_HIDDEN size_t agent_queue_capacity(void);            /* the ring's bytes */

/* ---- agent.c: state shared by the parts ---------------------------------- */
struct agent_config {
    char result_dir[4096];
    uint64_t period_ns;
    enum call_graph_mode call_graph;
    /* --delay/--duration: only samples taken in [window_start_ns,
     * window_end_ns) are recorded (CLOCK_MONOTONIC; end 0 = open). Absolute
     * times, so forked and exec'd processes share the launcher's window. */
    uint64_t window_start_ns, window_end_ns;
    uint64_t max_bytes; /* --max-size: samples are dropped once the result dir holds this much (0: no cap) */
    bool user_only;     /* kernel mode not sampled (perf_event_paranoid): samples weighted by thread CPU time */
    /* -c N (OPR_ENV_LEADER): samples are taken every leader_period events of
     * this event instead of every period_ns of CPU time; each weighs 1. */
    bool leader;
    uint32_t leader_type;
    uint64_t leader_config, leader_config1, leader_period;
    bool leader_user_only;
    /* --timer tick (OPR_ENV_TIMER): per-thread POSIX CPU-time timers
     * (agent_tick.c) instead of the perf event; samples weighted by CPU time */
    bool tick_timer;
};

AGENT_HIDDEN extern struct agent_config agent_config;
AGENT_HIDDEN extern _Atomic uint64_t agent_samples_taken; /* handler entries that were ours */
AGENT_HIDDEN extern _Atomic uint64_t agent_samples_lost;  /* queue full */
AGENT_HIDDEN extern _Atomic int agent_accepting;          /* 0 while starting/stopping */
AGENT_HIDDEN extern _Atomic uint64_t agent_handler_ns;    /* time spent in the handler */
AGENT_HIDDEN extern _Atomic uint64_t agent_samples_outside_window; /* --delay/--duration: not recorded */
AGENT_HIDDEN uint64_t agent_now_ns(void); /* CLOCK_MONOTONIC; async-signal-safe */
/* CLOCK_MONOTONIC and the TSC read together, to convert TSC readings to the
 * clock: TSC, clock, TSC, the tightest of three, the TSC at the middle. */
struct agent_clock_pair {
    uint64_t ns, tsc;
};
AGENT_HIDDEN struct agent_clock_pair agent_clock_pair_now(void);
/* The kernel's CPU clock of thread tid of this process (what
 * pthread_getcpuclockid makes, from a tid): ~tid << 3 | CPUCLOCK_PERTHREAD |
 * CPUCLOCK_SCHED. Read by the off-CPU poll, timed by --timer tick. */
static inline clockid_t agent_thread_cpu_clock(uint32_t tid)
{
    return (clockid_t)((~(unsigned)tid << 3) | 4u | 2u);
}
static inline uint64_t agent_timespec_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}
/* accounting (ACCOUNTING record): timer periods the handler took (sum of
 * weights), the agent's start-up CPU time in this image, the calling
 * thread's CPU clock */
AGENT_HIDDEN extern _Atomic uint64_t agent_periods_taken;
AGENT_HIDDEN extern uint64_t agent_startup_cpu_ns;
AGENT_HIDDEN uint64_t agent_thread_cpu_ns(void);
/* agent_threads.c: threads seen with SIGTRAP blocked and their CPU time;
 * threads of this image (main + pthread_create calls) */
AGENT_HIDDEN void agent_threads_trap_blocked(uint64_t *threads, uint64_t *cpu_ns);
AGENT_HIDDEN uint64_t agent_threads_started(void);

/* ---- agent_tick.c: --timer tick, one CPU-time timer per thread ---------- */
/* 0, or -1: its CPU time unsampled. from_thread_start: the first expiry at
 * one period of the thread's clock, so that its first sample's weight holds
 * its CPU time before the arm (a thread the writer found); else one period
 * from now (the thread that starts sampling). */
AGENT_HIDDEN int agent_tick_arm(uint32_t tid, uint64_t cookie, bool from_thread_start);
AGENT_HIDDEN void agent_tick_forget(uint32_t tid);              /* the thread is gone */
AGENT_HIDDEN void agent_tick_pause_all(bool pause, uint64_t cookie); /* exec, stop; resume */
AGENT_HIDDEN void agent_tick_atfork_child(void);
AGENT_HIDDEN void agent_tick_arm_new_thread(uint32_t tid); /* agent.c: the writer's poll saw tid */

/* ---- agent_cost.c: the agent's cost on CPU clocks (AGENT_CPU record) ---- */
/* One handler call's timing (agent_cost.c); cpu_ns 0: the call is not timed. */
struct agent_cost_timing {
    uint64_t cpu_ns;   /* the thread's CPU clock at begin */
    uint64_t entry_ns; /* wall clock at the handler's entry */
    uint64_t read_ns;  /* wall clock just before the CPU-clock read */
    uint64_t wall_ns;  /* wall clock just after it */
};
AGENT_HIDDEN void agent_cost_handler_begin(struct agent_cost_timing *t, uint64_t entry_ns); /* handler */
AGENT_HIDDEN void agent_cost_handler_end(const struct agent_cost_timing *t);                /* handler */
/* What the writer thread did, counted by the writer thread (phdr refreshes
 * also by dlclose callers, under agent_phdr.c's refresh lock). */
struct agent_writer_counts {
    uint64_t maps_rereads, maps_probes, phdr_refreshes, schedstat_reads, pystack_hits, pystack_misses;
    uint64_t offcpu_same_wait;
    /* agent_writer.c's periodic drains, and the longer sleeps after them */
    uint64_t drains, quiet_drains, steady_drains;
};
AGENT_HIDDEN extern struct agent_writer_counts agent_writer_counts;
AGENT_HIDDEN uint64_t agent_cost_handler_cpu_estimate_ns(void); /* writer */
AGENT_HIDDEN void agent_cost_emit(agent_emit_fn emit);          /* writer, at the end */
AGENT_HIDDEN void agent_cost_atfork_child(void);

/* The SIGTRAP handler (installed by agent_signals.c). Returns true when the
 * signal was one of opprof's samples, false when it belongs to the workload. */
AGENT_HIDDEN bool agent_handle_sample(siginfo_t *si, void *ucontext);

/* ---- agent_counters.c: per-thread counting groups read at each sample ---- */
struct agent_counter_snapshot {
    bool valid;                           /* the thread's counters were read */
    uint64_t now[OPR_MAX_COUNTERS][3];    /* value, time_enabled, time_running */
};
AGENT_HIDDEN void agent_counters_init(void);      /* constructor: parse OPR_ENV_COUNTERS */
/* handler: at entry, opens this thread's counters on its first sample, reads them */
AGENT_HIDDEN void agent_counters_enter(struct agent_counter_snapshot *snap);
/* handler: deltas of snap since the thread's previous read into slot (nctr 0: none) */
AGENT_HIDDEN void agent_counters_fill(struct agent_slot *slot, const struct agent_counter_snapshot *snap);
AGENT_HIDDEN void agent_counters_leave(void);     /* handler: at exit, the new baseline */
/* writer: COUNTER_DESC records (begin of every stream) */
AGENT_HIDDEN void agent_counters_write_desc(agent_emit_fn emit);
/* writer: closes the counters of threads that exited; final: a NOTE when some
 * threads could not get counters */
AGENT_HIDDEN void agent_counters_reap(agent_emit_fn emit, bool final);
AGENT_HIDDEN void agent_counters_atfork_child(void);

/* ---- agent_writer.c ------------------------------------------------------ */
AGENT_HIDDEN int agent_writer_start(void);        /* open the stream, start the thread */
AGENT_HIDDEN void agent_writer_stop(bool clean);  /* final drain; END record when clean */
AGENT_HIDDEN void agent_writer_flush(void);       /* drain now, from any thread but the handler */
AGENT_HIDDEN void agent_writer_atfork_prepare(void);
AGENT_HIDDEN void agent_writer_atfork_parent(void);
AGENT_HIDDEN void agent_writer_atfork_child(void);
AGENT_HIDDEN bool agent_is_writer_thread(void);
AGENT_HIDDEN bool agent_writer_owns_process(void); /* false in a vfork child */
AGENT_HIDDEN void agent_writer_thread_name_seen(uint32_t tid, const char *name); /* writer thread: status poll */
/* Handler, after queueing a sample: ends a quiet process's long sleep of
 * the writer (one futex wake per quiet stretch; agent_writer.c). */
AGENT_HIDDEN void agent_writer_sample_queued(void);

/* ---- agent_signals.c ----------------------------------------------------- */
AGENT_HIDDEN int agent_signals_install(void);

#endif
