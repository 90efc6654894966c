/*
 * tests/workloads/libsplit.c — the shared library half of known_split.
 *
 * Built with -O2 -fomit-frame-pointer into tests/workloads/bin/libsplit_stripped.so
 * and then `strip --strip-all`: no .symtab, no debug info, no frame pointers.
 * spin_c stays named through .dynsym (it is exported), and stacks through it can
 * only be unwound with CFI (.eh_frame).
 *
 * split_lib_before / split_lib_after are exported but never called by the
 * workload: if a report ever names a sample after them, the symbolizer gave a PC
 * a neighbouring symbol's name. The source order is kept in the object
 * (-fno-toplevel-reorder) so they sit right around spin_c.
 */
#include "split_kernel.c"

#define EXPORT __attribute__((visibility("default")))

uint64_t split_lib_before(uint64_t n) EXPORT __attribute__((noipa));
uint64_t spin_c(uint64_t n) EXPORT __attribute__((noipa));
uint64_t split_lib_after(uint64_t n) EXPORT __attribute__((noipa));

uint64_t split_lib_before(uint64_t n)
{
    return n * 3 + 1;
}

/* 20 % of the work: 2 units per round. */
uint64_t spin_c(uint64_t n)
{
    uint64_t r;
    SPLIT_KERNEL(n, 0xc0ffee03u, r);
    return r;
}

uint64_t split_lib_after(uint64_t n)
{
    return n * 5 + 2;
}
