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
 * A macro, not an inline function: with -g an inline function leaves DWARF
 * inlined-subroutine records, and a symbolizer that expands inline frames
 * would rightly name the leaf "split_kernel" instead of spin_X. A macro keeps
 * the leaf function spin_X whatever the debug info.
 *
 * `seed` differs per caller so the compiler cannot fold the spin functions into
 * one (identical code folding) — the loop itself is identical.
 */
#ifndef SPLIT_KERNEL_INCLUDED
#define SPLIT_KERNEL_INCLUDED

#include <stdint.h>

#define SPLIT_MULT 6364136223846793005ull

/* Runs `iterations` rounds of the loop starting from `seed`; stores the final
 * accumulator into the uint64_t lvalue `result`. */
#define SPLIT_KERNEL(iterations, seed, result)                                  \
    do {                                                                        \
        volatile uint64_t split_acc_ = (seed);                                  \
        uint64_t split_n_ = (iterations);                                       \
        for (uint64_t split_i_ = 0; split_i_ < split_n_; split_i_++)            \
            split_acc_ = split_acc_ * SPLIT_MULT + split_i_;                    \
        (result) = split_acc_;                                                  \
    } while (0)

#endif
