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
 * (clock_gettime -> sys_clock_gettime, no lock in user space). That call costs
 * ~0.5 us on this VM (538 ns measured, against 24 ns for CLOCK_MONOTONIC):
 * timing every sample would add ~1 us to a handler whose goal is 3. So one
 * handler call in AGENT_COST_TIMED_EVERY per thread is timed, chosen by a
 * per-thread counter that does not depend on what the handler does, which
 * keeps the timed calls a fair sample of all of them (the mean times the
 * calls estimates the total; the histogram gives the median and p99). A
 * timed call also pays for about one of its two clock reads inside the
 * interval it measures (from the point the first read samples the clock to
 * the point the second one does: one whole call): ~0.5 us too much per timed
 * call, while timing costs all calls together ~0.13 us per sample on average.
 * So the agent measures one read, outside any handler: the least of
 * back-to-back pairs (510 ns here, against 516-523 ns a call timed with the
 * TSC), a few at start-up and more in the writer thread over its first
 * drains, where they cost the workload's threads nothing and a busy start-up
 * (under load, 16 pairs at start once read 0.99 us for ~0.55) is outvoted;
 * AGENT_CPU carries it (clock_read_ns). The
 * record's times stay as measured; the estimate below and the report take
 * one read out of each timed call and put the timing's own two reads per
 * timed call back in as the agent's cost (analyze/accounting.c).
 *
 * The writer-side counters (maps re-reads, schedstat reads, Python-stack
 * cache) are plain counters of the writer thread, written once at the end.
 */
#include "sampler/agent/agent.h"

#define AGENT_COST_TIMED_EVERY 8
#define CLOCK_READ_PAIRS_AT_START 8
#define CLOCK_READ_PAIRS_A_DRAIN 4
#define CLOCK_READ_DRAINS 32

static uint64_t clock_read_ns; /* one read of the thread CPU clock: the least pair so far (0: none) */
static unsigned clock_read_drains;

/* The least of n pairs into clock_read_ns: a read interrupted (a tick, an
 * interrupt charged to the thread) only adds, so the minimum is the read. */
static void clock_read_pairs(int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t a = agent_thread_cpu_ns(), b = agent_thread_cpu_ns();
        if (a && b >= a && (clock_read_ns == 0 || b - a < clock_read_ns))
            clock_read_ns = b - a;
    }
}

/* At start, outside any handler. */
void agent_cost_calibrate(void)
{
    clock_read_ns = 0;
    clock_read_drains = 0;
    clock_read_pairs(CLOCK_READ_PAIRS_AT_START);
}

/* Writer, at each drain (its lock held): more pairs, for the first drains. */
void agent_cost_calibrate_more(void)
{
    if (clock_read_drains < CLOCK_READ_DRAINS) {
        clock_read_drains++;
        clock_read_pairs(CLOCK_READ_PAIRS_A_DRAIN);
    }
}

static const uint64_t bucket_bounds[OPR_HANDLER_BUCKETS] = OPR_HANDLER_BUCKET_BOUNDS_NS;
static _Atomic uint64_t handler_cpu_ns, handler_timed, handler_calls;
static _Atomic uint64_t buckets[OPR_HANDLER_BUCKETS];
static __thread uint32_t handler_calls_here;

struct agent_writer_counts agent_writer_counts;

/* Handler: the thread's CPU clock when this call is one to time, else 0. */
uint64_t agent_cost_handler_begin(void)
{
    /* A thread's first call starts the count at a point taken from the clock:
     * always timing the first call (the coldest: first unwind through fresh
     * .eh_frame pages) would weigh it AGENT_COST_TIMED_EVERY times over. */
    if (handler_calls_here == 0)
        handler_calls_here = 1 + (uint32_t)((agent_now_ns() >> 8) % AGENT_COST_TIMED_EVERY);
    if (handler_calls_here++ % AGENT_COST_TIMED_EVERY != 0)
        return 0;
    uint64_t now = agent_thread_cpu_ns();
    return now ? now : 1;
}

/* Handler: adds the CPU time since begin (when it was a timed call). */
void agent_cost_handler_end(uint64_t begin_cpu_ns)
{
    atomic_fetch_add_explicit(&handler_calls, 1, memory_order_relaxed);
    if (begin_cpu_ns == 0)
        return;
    uint64_t now = agent_thread_cpu_ns();
    if (now < begin_cpu_ns)
        return; /* no clock (begin was the placeholder 1 with now 0) */
    uint64_t ns = now - begin_cpu_ns;
    unsigned b = 0;
    while (b + 1 < OPR_HANDLER_BUCKETS && ns >= bucket_bounds[b])
        b++;
    atomic_fetch_add_explicit(&buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&handler_cpu_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&handler_timed, 1, memory_order_relaxed);
}

/* Writer: the handler's CPU time so far, estimated from the timed calls
 * (0 when none was timed): one clock read out of each timed call, the two
 * reads of the timing put back, as the report does (opr_agent_cpu_estimate_ns). */
uint64_t agent_cost_handler_cpu_estimate_ns(void)
{
    struct opr_agent_cpu c = {.handler_cpu_ns = atomic_load(&handler_cpu_ns),
                              .handler_timed = atomic_load(&handler_timed),
                              .handler_calls = atomic_load(&handler_calls),
                              .timed_every = AGENT_COST_TIMED_EVERY,
                              .clock_read_ns = clock_read_ns};
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
    for (unsigned b = 0; b < OPR_HANDLER_BUCKETS; b++)
        c.buckets[b] = atomic_load(&buckets[b]);
    c.maps_rereads = agent_writer_counts.maps_rereads;
    c.maps_probes = agent_writer_counts.maps_probes;
    c.phdr_refreshes = agent_writer_counts.phdr_refreshes;
    c.schedstat_reads = agent_writer_counts.schedstat_reads;
    c.pystack_hits = agent_writer_counts.pystack_hits;
    c.pystack_misses = agent_writer_counts.pystack_misses;
    c.offcpu_same_wait = agent_writer_counts.offcpu_same_wait;
    c.omp_hook_ns = ompt_hook_ns();
    c.omp_team_wait_ns = gomp_team_wait_ns();
    c.clock_read_ns = clock_read_ns;
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
    for (unsigned b = 0; b < OPR_HANDLER_BUCKETS; b++)
        atomic_store(&buckets[b], 0);
    handler_calls_here = 0;
    agent_writer_counts = (struct agent_writer_counts){0};
}
