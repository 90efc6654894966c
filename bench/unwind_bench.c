/*
 * bench/unwind_bench.c — the agent's stack walk, table-driven against
 * libunwind, on the same stacks (run by bench/unwind_callgrind.sh under
 * valgrind --tool=callgrind, which counts instructions: repeatable on a
 * noisy machine, unlike time).
 *
 * The stacks: recursion 4..40 frames deep through four functions built
 * without frame pointers (a small frame, a 4 KB frame, an alloca frame, and
 * libc's qsort calling back into us), the same set every run. At the bottom
 * of each, the registers are taken once (unw_getcontext) and both unwinders
 * walk that same live stack ITER times:
 *   walk_tables()    unwind_table_walk(), the table walk alone
 *   walk_rules()     the handler's walk with its rule cache and the memo off
 *                    (a stack unlike the thread's previous one)
 *   walk_memo()      the handler's walk with the memo (the same stack again)
 *   walk_libunwind() unw_backtrace(), what the handler called before
 *   walk_libunwind_cold() the same after unw_flush_cache (ITER/10 + 1 times)
 * callgrind's inclusive instruction counts of these functions divided by
 * the walks give instructions per sample. Each stack is also checked: the
 * two must give the same frames (the bench stops otherwise).
 *
 * The agent's handler-side parts that need a running agent are replaced
 * below: the readable-memory check is this thread's stack (see find_stack).
 */
#include <alloca.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "sampler/agent/unwind_table.h"

/* the readable-memory check is this thread's stack (see find_stack) */
#include "bench/unwind_standins.h"

/* The main thread's stack: from 64 MB below here (the walks run deeper,
 * and valgrind maps the client stack in pieces as it grows) to the end of
 * the mappings that continue the one holding here. */
static void find_stack(void)
{
    uint64_t here = (uint64_t)(uintptr_t)&here;
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long lo, hi;
        if (sscanf(line, "%llx-%llx", &lo, &hi) != 2)
            continue;
        if (here >= lo && here < hi)
            readable_hi = hi;
        else if (readable_hi && lo == readable_hi)
            readable_hi = hi;
    }
    if (f)
        fclose(f);
    readable_lo = here - (64u << 20);
}

/* ---- the walks ------------------------------------------------------------- */
#define MAX_FRAMES 256
static long iterations = 200;
static uint64_t walks_tables, walks_rules, walks_memo, walks_libunwind, walks_cold, frames_total, frames_replayed;
static struct unwind_memo_slot memo, rules_only;
static int mismatches;

__attribute__((noinline)) static unsigned walk_tables(const ucontext_t *uc, uint64_t *pcs)
{
    unsigned n = 0;
    bool truncated;
    if (unwind_table_walk((uint64_t)uc->uc_mcontext.gregs[REG_RIP], (uint64_t)uc->uc_mcontext.gregs[REG_RSP],
                          (uint64_t)uc->uc_mcontext.gregs[REG_RBP], pcs, MAX_FRAMES, &n, &truncated) != UNWIND_OK)
        return 0;
    return n;
}

/* The handler's walk when the memo does not meet it (a stack unlike the
 * thread's previous one, as in an import's deep and changing stacks): each
 * frame's rule from the thread's rule cache (hot after the first walk
 * here), each frame walked. */
__attribute__((noinline)) static unsigned walk_rules(const ucontext_t *uc, uint64_t *pcs)
{
    unsigned n = 0, replayed = 0;
    bool truncated;
    unwind_memo_on = false;
    enum unwind_result res = unwind_table_walk_memo(
        (uint64_t)uc->uc_mcontext.gregs[REG_RIP], (uint64_t)uc->uc_mcontext.gregs[REG_RSP],
        (uint64_t)uc->uc_mcontext.gregs[REG_RBP], pcs, MAX_FRAMES, &n, &truncated, &rules_only, &replayed);
    unwind_memo_on = true;
    return res == UNWIND_OK ? n : 0;
}

/* The handler's walk with the thread's memo of its previous walk: here the
 * same stack from the same leaf every time, so every walk after the first
 * stops at the leaf's caller and re-reads the words above instead of
 * walking them (the best case: on PyTorch ~60 % of walks met the memo,
 * after walking ~13 of ~47 frames). */
__attribute__((noinline)) static unsigned walk_memo(const ucontext_t *uc, uint64_t *pcs)
{
    unsigned n = 0, replayed = 0;
    bool truncated;
    if (unwind_table_walk_memo((uint64_t)uc->uc_mcontext.gregs[REG_RIP], (uint64_t)uc->uc_mcontext.gregs[REG_RSP],
                               (uint64_t)uc->uc_mcontext.gregs[REG_RBP], pcs, MAX_FRAMES, &n, &truncated, &memo,
                               &replayed) != UNWIND_OK)
        return 0;
    frames_replayed += replayed;
    return n;
}

__attribute__((noinline)) static unsigned walk_libunwind(uint64_t *pcs)
{
    int n = unw_backtrace((void **)pcs, MAX_FRAMES);
    return n > 0 ? (unsigned)n : 0;
}

/* libunwind after its caches were flushed: what a sample costs in code it
 * has not seen yet (a fresh library, or more distinct PCs than its trace
 * cache holds); the table unwinder has no such path in the handler. */
__attribute__((noinline)) static unsigned walk_libunwind_cold(uint64_t *pcs)
{
    unw_flush_cache(unw_local_addr_space, 0, 0);
    int n = unw_backtrace((void **)pcs, MAX_FRAMES);
    return n > 0 ? (unsigned)n : 0;
}

/* Both walks from the same frame: the table walk starts at the context
 * taken here, libunwind's unw_backtrace at its own caller (this function),
 * so libunwind's list is [walk_libunwind's return into here, the rest]. */
__attribute__((noinline)) static void measure_here(void)
{
    unw_context_t ctx;
    unw_getcontext(&ctx);
    uint64_t a[MAX_FRAMES], b[MAX_FRAMES], c[MAX_FRAMES];
    unsigned na = 0, nb = 0, nc = 0;
    for (long i = 0; i < iterations; i++) {
        na = walk_tables((const ucontext_t *)&ctx, a);
        walks_tables++;
    }
    for (long i = 0; i < iterations; i++) {
        nc = walk_rules((const ucontext_t *)&ctx, c);
        walks_rules++;
    }
    if (nc != na || memcmp(a, c, na * sizeof a[0]) != 0)
        mismatches++; /* the rule cache's frames must be the walk's */
    for (long i = 0; i < iterations; i++) {
        nc = walk_memo((const ucontext_t *)&ctx, c);
        walks_memo++;
    }
    if (nc != na || memcmp(a, c, na * sizeof a[0]) != 0)
        mismatches++; /* the memo's frames must be the walk's */
    for (long i = 0; i < iterations; i++) {
        nb = walk_libunwind(b);
        walks_libunwind++;
    }
    for (long i = 0; i < iterations / 10 + 1; i++) {
        walk_libunwind_cold(b);
        walks_cold++;
    }
    frames_total += na;
    /* libunwind's list starts one frame deeper (inside walk_libunwind) and
     * the frames in this function differ by construction (two call sites);
     * the callers must be the same. */
    if (na < 2 || nb != na + 1 || memcmp(a + 1, b + 2, (na - 1) * sizeof a[0]) != 0)
    {
        if (mismatches++ == 0 && getenv("UNWIND_BENCH_SHOW")) {
            for (unsigned i = 0; i < na || i + 1 < nb; i++)
                fprintf(stderr, "%3u %16llx %16llx\n", i, i < na ? (unsigned long long)a[i] : 0ull,
                        i + 1 < nb ? (unsigned long long)b[i + 1] : 0ull);
        }
    }
}

/* ---- the stacks -------------------------------------------------------------- */
static int depth_goal;
static volatile unsigned long sink;
__attribute__((noinline)) static void down(int depth);

static int descend_pending;
static int compare_and_descend(const void *x, const void *y)
{
    if (descend_pending) { /* the first comparison descends, from inside libc's qsort */
        descend_pending = 0;
        down(depth_goal - 1);
    }
    return *(const int *)x - *(const int *)y;
}

__attribute__((noinline)) static void frame_small(int depth) { down(depth - 1); sink++; }

__attribute__((noinline)) static void frame_page(int depth)
{
    volatile char page[4096];
    page[depth & 4095] = 1;
    down(depth - 1);
    sink += (unsigned long)page[depth & 4095];
}

__attribute__((noinline)) static void frame_alloca(int depth)
{
    volatile char *p = alloca(64 + (size_t)(depth & 63));
    p[0] = 1;
    down(depth - 1);
    sink += (unsigned long)p[0];
}

__attribute__((noinline)) static void down(int depth)
{
    if (depth <= 0) {
        measure_here();
        return;
    }
    switch (depth % 4) {
    case 0: frame_small(depth); break;
    case 1: frame_page(depth); break;
    case 2: frame_alloca(depth); break;
    default: {
        int v[3] = {3, 1, 2};
        depth_goal = depth;
        descend_pending = 1;
        qsort(v, 3, sizeof v[0], compare_and_descend);
        break;
    }
    }
}

int main(int argc, char **argv)
{
    if (argc > 1)
        iterations = atol(argv[1]);
    find_stack();
    unwind_rescan(true); /* every loaded object's table, as the writer would */
    /* Warm both: libunwind caches per-thread, our tables are built. */
    down(4);
    walks_tables = walks_rules = walks_memo = walks_libunwind = walks_cold = 0;
    frames_total = frames_replayed = 0;
    mismatches = 0;
    int stacks = 0;
    for (int depth = 4; depth <= 40; depth += 3, stacks++)
        down(depth);
    printf("unwind_bench: %d stacks, %.1f frames on average, %ld walks each way per stack, "
           "%llu table walks, %llu memo walks, %llu libunwind walks, %llu cold libunwind walks, "
           "%d stacks where they differ, %.1f frames per memo walk copied from the memo\n",
           stacks, (double)frames_total / stacks, iterations, (unsigned long long)walks_tables,
           (unsigned long long)walks_memo, (unsigned long long)walks_libunwind, (unsigned long long)walks_cold,
           mismatches, (double)frames_replayed / (double)(walks_memo ? walks_memo : 1));
    return mismatches ? 1 : 0;
}
