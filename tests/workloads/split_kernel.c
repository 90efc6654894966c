/*
 * tests/workloads/split_kernel.c — the one inner loop every spin_* function runs.
 *
 * This file is #included (not compiled on its own) by known_split.c and by
 * libsplit.c, so spin_a, spin_b (main executable) and spin_c (stripped shared
 * library) execute the same machine-level loop body: a volatile accumulate whose
 * cost per iteration is one dependent load/multiply/add/store. The time split
 * between them is then set only by iteration counts (5:3:2), true by
 * construction.
 *
 * `seed` differs per caller so the compiler cannot fold the spin functions into
 * one (identical code folding) — the loop itself is identical.
 */
#ifndef SPLIT_KERNEL_INCLUDED
#define SPLIT_KERNEL_INCLUDED

#include <stdint.h>

#define SPLIT_MULT 6364136223846793005ull

static inline __attribute__((always_inline)) uint64_t
split_kernel(uint64_t iterations, uint64_t seed)
{
    volatile uint64_t acc = seed;
    for (uint64_t i = 0; i < iterations; i++)
        acc = acc * SPLIT_MULT + i;
    return acc;
}

#endif
