/*
 * sampler/agent/agent_memmap.c — "may the handler read this address?"
 *
 * SIGNAL-HANDLER CODE: agent_memmap_readable() runs inside the SIGTRAP
 * handler: no malloc, no locks, no stdio, only atomics and reads of static
 * tables.
 *
 * Why: the Python frame walk follows pointers that are not always valid at
 * an arbitrary instruction. CPython 3.11's _PyEval_EvalFrameDefault stores
 * tstate->cframe = &cframe before it sets cframe.current_frame, so for a few
 * instructions the current frame is uninitialized stack data; a stale frame
 * can point into a data-stack chunk or arena that was unmapped since. Reading
 * such an address would crash the workload. Every pointer is therefore
 * checked against the process's readable mappings first.
 *
 * The writer thread reads /proc/self/maps into one of two static tables and
 * publishes it with an atomic index; before overwriting the table not in use
 * it waits until no handler is still reading it (handlers count themselves in
 * and out). A pointer outside every known range is refused and reported as a
 * miss, which makes the writer refresh the table soon.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sampler/agent/agent.h"

#define MEMMAP_MAX_RANGES 8192

struct memmap_table {
    size_t count;
    uint64_t start[MEMMAP_MAX_RANGES];
    uint64_t end[MEMMAP_MAX_RANGES];
};

static struct memmap_table tables[2];
static _Atomic int current = -1;          /* index of the published table, -1: none */
static _Atomic int readers[2];            /* handlers reading each table */
static _Atomic int miss_seen;             /* a lookup found no range */
static uint64_t last_refresh_ns;

/* Handler: counts in to the published table for one walk. Returns its
 * index, or -1 when there is none yet (then nothing may be read). */
int agent_memmap_begin(void)
{
    return agent_snapshot_enter(&current, readers);
}

void agent_memmap_end(int t)
{
    if (t >= 0)
        atomic_fetch_sub_explicit(&readers[t], 1, memory_order_release);
}

/* Handler: is [addr, addr+len) inside one readable mapping of table t? */
bool agent_memmap_readable(int t, uint64_t addr, size_t len)
{
    if (t < 0)
        return false;
    const struct memmap_table *m = &tables[t];
    size_t lo = 0, hi = m->count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (addr < m->start[mid])
            hi = mid;
        else if (addr >= m->end[mid])
            lo = mid + 1;
        else if (addr + len <= m->end[mid])
            return true;
        else
            break;
    }
    atomic_store_explicit(&miss_seen, 1, memory_order_relaxed);
    return false;
}

/* Writer thread only. Parses readable mappings into the unpublished table. */
void agent_memmap_refresh(void)
{
    int cur = atomic_load(&current);
    int next = cur == 0 ? 1 : 0;
    /* No handler may still be reading the table we are about to fill. */
    for (int spins = 0; atomic_load(&readers[next]) != 0 && spins < 1000; spins++) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&readers[next]) != 0)
        return;
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    struct memmap_table *m = &tables[next];
    size_t n = 0;
    char line[512];
    while (fgets(line, sizeof line, f) && n < MEMMAP_MAX_RANGES) {
        unsigned long long start, end;
        char perms[8];
        if (sscanf(line, "%llx-%llx %7s", &start, &end, perms) != 3 || perms[0] != 'r')
            continue;
        if (strchr(line, '\n') == NULL) {
            int c; /* skip the rest of an over-long line */
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
        }
        /* /proc/self/maps is sorted; merge adjacent readable ranges. */
        if (n > 0 && m->end[n - 1] == start) {
            m->end[n - 1] = end;
            continue;
        }
        m->start[n] = start;
        m->end[n] = end;
        n++;
    }
    fclose(f);
    m->count = n;
    atomic_store_explicit(&current, next, memory_order_release);
    atomic_store(&miss_seen, 0);
    last_refresh_ns = agent_now_ns();
}

/* Writer thread, every drain: refresh after a miss (at most every 20 ms) and
 * otherwise once a second, since memory gets mapped and unmapped. */
void agent_memmap_maybe_refresh(void)
{
    uint64_t now = agent_now_ns();
    uint64_t age = now - last_refresh_ns;
    if ((atomic_load(&miss_seen) && age > 20000000ull) || age > 1000000000ull)
        agent_memmap_refresh();
}

/* In a fork child: the parent's tables describe the same memory (fork copies
 * the address space), only the reader counts may be stale. */
void agent_memmap_atfork_child(void)
{
    atomic_store(&readers[0], 0);
    atomic_store(&readers[1], 0);
}
