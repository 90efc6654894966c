/*
 * sampler/common/map_ranges.c — the sorted table of executable mappings a stream
 * writer already described in MAP records, shared by the agent's writer and
 * attach mode: both ask "is this PC inside a known mapping?" for every new
 * stack, and re-read the maps only when the answer is no (dlopen).
 */
#include <stdlib.h>

#include "sampler/common/common.h"

bool map_ranges_contain(const struct map_range *r, size_t n, uint64_t pc)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pc < r[mid].start)
            hi = mid;
        else if (pc >= r[mid].end)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

static int compare_ranges(const void *a, const void *b)
{
    const struct map_range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

void map_ranges_sort(struct map_range *r, size_t n)
{
    qsort(r, n, sizeof r[0], compare_ranges);
}
