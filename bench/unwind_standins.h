/*
 * bench/unwind_standins.h — the rest of the agent, as the unwind benches
 * (unwind_bench.c, unwind_replay.c) link the walk without it: the only
 * memory a walk may read is [readable_lo, readable_hi), which each bench
 * sets; clocks read 0 and no thread is the writer. Included once, by the
 * bench's own .c file.
 */
#ifndef OPPROF_BENCH_UNWIND_STANDINS_H
#define OPPROF_BENCH_UNWIND_STANDINS_H

#include "sampler/agent/unwind_table.h"

struct agent_config agent_config;
_Atomic int agent_accepting;
_Atomic uint64_t agent_periods_taken = 1; /* a process that has run: cached tables are read early */
static uint64_t readable_lo, readable_hi;
int agent_memmap_begin(void)
{
    return 0;
}
void agent_memmap_end(int t)
{
    (void)t;
}
bool agent_memmap_readable_range(int t, uint64_t addr, size_t len, uint64_t *lo, uint64_t *hi)
{
    (void)t;
    *lo = readable_lo, *hi = readable_hi;
    return addr >= readable_lo && addr + len <= readable_hi;
}
void agent_memmap_maybe_refresh(void)
{
}
void agent_phdr_enter_handler(void)
{
}
void agent_phdr_leave_handler(void)
{
}
uint64_t agent_now_ns(void)
{
    return 0;
}
struct agent_clock_pair agent_clock_pair_now(void)
{
    return (struct agent_clock_pair){0, 0};
}
uint64_t agent_thread_cpu_ns(void)
{
    return 0;
}
bool agent_is_writer_thread(void)
{
    return false;
}

#endif
