/*
 * sampler/agent/agent_cost.c — what the agent costs the process, measured on
 * CPU clocks (the AGENT_CPU record, docs/format.md).
 *
 * SIGNAL-HANDLER CODE: agent_cost_handler_begin/end run inside the SIGTRAP
 * handler: atomics and clock_gettime only.
 *
 * Why a CPU clock: the handler's wall time (AGENT_COST.handler_ns) counts the
 * time a preempted handler waited for a CPU. On a loaded 2-CPU machine
 * identical runs reported 0.75 % to 10.1 % ("80.3 us per sample"): a few
 * handlers preempted for milliseconds dominated the sum. The thread's CPU
 * clock (CLOCK_THREAD_CPUTIME_ID) counts only the time the thread ran, which
 * is what the bench's outside CPU ratio measures too.
 *
 * Is it allowed in a signal handler? clock_gettime is on POSIX's list of
 * async-signal-safe functions (signal-safety(7)) for every clock id; on Linux
 * the thread CPU clock is not served by the vDSO, so it is a system call
 * (clock_gettime -> sys_clock_gettime, no lock in user space). In a handler
 * that call is dear: measured with the TSC in a throw-away build on this VM
 * (torch_train.py --steps 60, 2026-12-03), the first read 4.6-5.0 us
 * (median), the second 1.4 us, against 0.5-0.7 us back to back in a loop;
 * a timed call took 12.4 us where an untimed one took 5.9. So one handler
 * call in AGENT_COST_TIMED_EVERY per thread is timed, chosen by a per-thread
 * counter that does not depend on what the handler does, which keeps the
 * timed calls a fair sample of all of them (the mean times the calls
 * estimates the total; the histogram gives the median and p99).
 *
 * What a timed call counts as the handler's time: the wall clock (the vDSO's
 * CLOCK_MONOTONIC, ~25 ns) from the handler's entry to just before the second
 * CPU-clock read, less the first read (timed on the wall clock too): the
 * handler's work, the sample weight's own CPU-clock reads among it (agent.c:
 * the first system call of a handler is the dear one, and the untimed calls
 * pay it too), and nothing of the timing's two reads. Between the two reads,
 * the CPU interval replaces the wall clock where it is less, which happens
 * only when the thread was preempted in between (the CPU interval holds parts
 * of the two reads, ~2 us here: a bound, on a rare call); before the first
 * read there is only the weight's read and a few instructions, on the wall
 * clock alone. Timing the CPU interval alone counted parts of the reads in
 * every timed call (the report's median 7.1-8.3 us against 5.9 us measured
 * with the TSC), and a read measured back to back (0.5-0.7 us, which was
 * taken out) is not what a read costs in a handler. What the timing itself
 * costs is measured too, as the wall time of the two reads, and counted as
 * the agent's cost (AGENT_CPU timing_ns and timing_buckets): the calls that
 * are not timed do not pay it. A read that waited for a CPU counts its wait:
 * with threads oversubscribed (known_split --threads 2 beside its writer on
 * 2 CPUs) the sum made 15 us of a timed call's reads where they cost ~6, so
 * the estimate takes their median times the timed calls, and the sum caps
 * each read at TIMING_CAP_NS.
 *
 * The writer-side counters (maps re-reads, schedstat reads, Python-stack
 * cache) are plain counters of the writer thread, written once at the end.
 */
#include "sampler/agent/agent.h"

#define AGENT_COST_TIMED_EVERY 8
/* One read's wall time counted at most: a read preempted on a busy machine
 * waited, and did not run, for the rest. */
#define TIMING_CAP_NS 50000

static const uint64_t bucket_bounds[OPR_HANDLER_BUCKETS] = OPR_HANDLER_BUCKET_BOUNDS_NS;
static _Atomic uint64_t handler_cpu_ns, handler_timed, handler_calls, timing_ns;
static _Atomic uint64_t buckets[OPR_HANDLER_BUCKETS], timing_buckets[OPR_HANDLER_BUCKETS];
static __thread uint32_t handler_calls_here;

struct agent_writer_counts agent_writer_counts;

/* Handler: starts timing this call when it is one to time (t->cpu_ns 0: it
 * is not). entry_ns: the wall clock at the handler's entry; what the handler
 * did since (a sample weight's CPU-clock read) is its time too. */
void agent_cost_handler_begin(struct agent_cost_timing *t, uint64_t entry_ns)
{
    t->cpu_ns = 0;
    /* A thread's first call starts the count at a point taken from the clock:
     * always timing the first call (the coldest: first unwind through fresh
     * .eh_frame pages) would weigh it AGENT_COST_TIMED_EVERY times over. */
    if (handler_calls_here == 0)
        handler_calls_here = 1 + (uint32_t)((entry_ns >> 8) % AGENT_COST_TIMED_EVERY);
    if (handler_calls_here++ % AGENT_COST_TIMED_EVERY != 0)
        return;
    t->entry_ns = entry_ns;
    t->read_ns = agent_now_ns();
    uint64_t now = agent_thread_cpu_ns();
    t->cpu_ns = now ? now : 1; /* 1: timed, but no clock (end then finds it behind) */
    t->wall_ns = agent_now_ns();
}

static uint64_t capped(uint64_t ns) { return ns < TIMING_CAP_NS ? ns : TIMING_CAP_NS; }

static unsigned bucket_of(uint64_t ns)
{
    unsigned b = 0;
    while (b + 1 < OPR_HANDLER_BUCKETS && ns >= bucket_bounds[b])
        b++;
    return b;
}

/* Handler: counts the call, and its time when it was a timed one. */
void agent_cost_handler_end(const struct agent_cost_timing *t)
{
    atomic_fetch_add_explicit(&handler_calls, 1, memory_order_relaxed);
    if (t->cpu_ns == 0)
        return;
    uint64_t wall = agent_now_ns();
    uint64_t now = agent_thread_cpu_ns();
    uint64_t after = agent_now_ns();
    if (now < t->cpu_ns || wall < t->wall_ns || after < wall || t->wall_ns < t->read_ns || t->read_ns < t->entry_ns)
        return; /* no clock (begin's placeholder 1 with now 0) */
    uint64_t cpu = now - t->cpu_ns, inner = wall - t->wall_ns;
    uint64_t ns = (t->read_ns - t->entry_ns) + (inner <= cpu ? inner : cpu); /* cpu < inner: preempted */
    uint64_t reads = capped(t->wall_ns - t->read_ns) + capped(after - wall);
    atomic_fetch_add_explicit(&buckets[bucket_of(ns)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&handler_cpu_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&handler_timed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&timing_buckets[bucket_of(reads)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&timing_ns, reads, memory_order_relaxed);
}

/* Writer: the handler's CPU time so far, estimated from the timed calls
 * (0 when none was timed), the timing's own cost added, as the report does
 * (opr_agent_cpu_estimate_ns). */
uint64_t agent_cost_handler_cpu_estimate_ns(void)
{
    /* Zeroed, then set: gcc 10 (bullseye) takes a designated initializer
     * that stops before the array at the end for a missing one (-Werror). */
    struct opr_agent_cpu c = {0};
    c.handler_cpu_ns = atomic_load(&handler_cpu_ns);
    c.handler_timed = atomic_load(&handler_timed);
    c.handler_calls = atomic_load(&handler_calls);
    c.timed_every = AGENT_COST_TIMED_EVERY;
    c.timing_ns = atomic_load(&timing_ns);
    for (unsigned b = 0; b < OPR_HANDLER_BUCKETS; b++)
        c.timing_buckets[b] = atomic_load(&timing_buckets[b]);
    return (uint64_t)opr_agent_cpu_estimate_ns(&c);
}

/* Writer, at the end: the AGENT_CPU record. */
void agent_cost_emit(agent_emit_fn emit)
{
    struct opr_agent_cpu c = {.handler_cpu_ns = atomic_load(&handler_cpu_ns),
                              .handler_timed = atomic_load(&handler_timed),
                              .handler_calls = atomic_load(&handler_calls),
                              .timed_every = AGENT_COST_TIMED_EVERY,
                              .nbuckets = OPR_HANDLER_BUCKETS};
    for (unsigned b = 0; b < OPR_HANDLER_BUCKETS; b++) {
        c.buckets[b] = atomic_load(&buckets[b]);
        c.timing_buckets[b] = atomic_load(&timing_buckets[b]);
    }
    c.maps_rereads = agent_writer_counts.maps_rereads;
    c.maps_probes = agent_writer_counts.maps_probes;
    c.phdr_refreshes = agent_writer_counts.phdr_refreshes;
    c.schedstat_reads = agent_writer_counts.schedstat_reads;
    c.pystack_hits = agent_writer_counts.pystack_hits;
    c.pystack_misses = agent_writer_counts.pystack_misses;
    c.offcpu_same_wait = agent_writer_counts.offcpu_same_wait;
    c.omp_hook_ns = ompt_hook_ns();
    c.omp_team_wait_ns = gomp_team_wait_ns();
    c.timing_ns = atomic_load(&timing_ns);
    c.drains = agent_writer_counts.drains;
    c.quiet_drains = agent_writer_counts.quiet_drains;
    c.steady_drains = agent_writer_counts.steady_drains;
    emit(OPR_REC_AGENT_CPU, &c, sizeof c, NULL, 0);
}

/* Fork child: its stream starts afresh, and so do its counts. */
void agent_cost_atfork_child(void)
{
    atomic_store(&handler_cpu_ns, 0);
    atomic_store(&handler_timed, 0);
    atomic_store(&handler_calls, 0);
    atomic_store(&timing_ns, 0);
    for (unsigned b = 0; b < OPR_HANDLER_BUCKETS; b++) {
        atomic_store(&buckets[b], 0);
        atomic_store(&timing_buckets[b], 0);
    }
    handler_calls_here = 0;
    agent_writer_counts = (struct agent_writer_counts){0};
}
