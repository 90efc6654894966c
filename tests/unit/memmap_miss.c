/*
 * tests/unit/memmap_miss.c — the agent's table of readable memory
 * (sampler/agent/agent_memmap.c) learns of new mappings from the handlers'
 * misses: every mapping missed since the writer last looked is added at its
 * next look, not only the last one missed (during an import a walk misses
 * in several new data-stack chunks and arenas between two looks, and each
 * one left out cost a system call per read for another 5-20 ms). A Python
 * read's miss (agent_memmap_listed) waits for the writer's next drain: the
 * wake-up cost the handler more than the reads it saved. A stack read's miss
 * (agent_memmap_readable_range: a thread's stack the table does not know
 * yet, which the walk copies through the kernel meanwhile) wakes the writer,
 * once until it looks.
 *
 * Two fresh mappings with a PROT_NONE page between (so the kernel keeps
 * them apart), two misses, one look: both are readable in the table after.
 * Then agent_memmap_readable_now, which asks the kernel instead of the
 * table: readable, PROT_NONE and unmapped pages.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sampler/agent/agent.h"

static uint64_t fake_now_ns = 1000000000ull;
static unsigned wakes;
struct agent_writer_counts agent_writer_counts;
uint64_t agent_now_ns(void) { return fake_now_ns; }
unsigned long long agent_phdr_unload_count(void) { return 0; }
void agent_wake_writer(void) { wakes++; }

#include "tests/unit/check.h"

static bool listed_in(int t, uint64_t addr, size_t len)
{
    uint64_t lo, hi;
    return agent_memmap_listed(t, addr, len, &lo, &hi);
}

static bool readable(uint64_t addr)
{
    int t = agent_memmap_begin();
    bool ok = listed_in(t, addr, 8);
    agent_memmap_end(t);
    return ok;
}

static bool stack_readable(uint64_t addr)
{
    int t = agent_memmap_begin();
    uint64_t lo, hi;
    bool ok = agent_memmap_readable_range(t, addr, 8, &lo, &hi);
    agent_memmap_end(t);
    return ok;
}

int main(void)
{
    agent_memmap_refresh();
    uint64_t reads = agent_writer_counts.maps_rereads;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED, "mmap failed");
    if (m == MAP_FAILED)
        return 1;
    CHECK(mprotect(m + page, page, PROT_NONE) == 0, "mprotect failed");
    uint64_t a = (uint64_t)(uintptr_t)m, b = (uint64_t)(uintptr_t)(m + 2 * page);
    CHECK(!readable(a) && !readable(b), "mapped after the table was read, yet in it");
    CHECK(!readable(a + 8), "a third miss");
    CHECK(wakes == 0, "%u wake-ups of the writer for three Python-read misses (expected 0)", wakes);
    fake_now_ns += 100000000ull; /* 100 ms on: past the miss check's interval */
    agent_memmap_maybe_refresh();
    CHECK(readable(a), "the first mapping missed is not in the table after the writer looked");
    CHECK(readable(b), "the last mapping missed is not in the table after the writer looked");
    CHECK(!readable(a + page), "the PROT_NONE page between them is in the table");
    CHECK(!stack_readable(a + page) && !stack_readable(a + page + 8), "the PROT_NONE page read as a stack");
    CHECK(wakes == 1, "%u wake-ups of the writer for two stack-read misses before it looked (expected 1)", wakes);
    fake_now_ns += 100000000ull;
    agent_memmap_maybe_refresh();
    wakes = 0;
    CHECK(!stack_readable(a + page), "the PROT_NONE page read as a stack after the writer looked");
    CHECK(wakes == 1, "a stack-read miss after the writer looked did not wake it (%u)", wakes);
    printf("memmap_miss: %llu full reads of /proc/self/maps after the first, %llu single-address queries\n",
           (unsigned long long)(agent_writer_counts.maps_rereads - reads),
           (unsigned long long)agent_writer_counts.maps_probes);
    munmap(m, 3 * page);

    /* A mapping grown since the table was read (as the heap grows): a read
     * that starts in the known part and runs past it is a miss, and the
     * writer looks up the first byte past the known part, not the read's
     * start (which the table holds: that look would add nothing). */
    char *g = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(g != MAP_FAILED, "mmap failed");
    if (g == MAP_FAILED)
        return 1;
    munmap(g + 2 * page, page);
    fake_now_ns += 10000000000ull; /* past the safety re-read: a full read now */
    agent_memmap_maybe_refresh();
    uint64_t edge = (uint64_t)(uintptr_t)(g + 2 * page);
    CHECK(readable(edge - 8), "the two-page mapping is not in the table as read");
    fake_now_ns += 100000000ull;
    agent_memmap_maybe_refresh(); /* no earlier miss left to look up */
    CHECK(mmap(g + 2 * page, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
              (void *)(g + 2 * page),
          "mmap of the third page failed");
    int t = agent_memmap_begin();
    CHECK(!listed_in(t, edge - 8, 16), "a read past the known part passed");
    agent_memmap_end(t);
    fake_now_ns += 100000000ull;
    agent_memmap_maybe_refresh();
    t = agent_memmap_begin();
    CHECK(listed_in(t, edge - 8, 16), "the grown part is not in the table after the writer looked");
    agent_memmap_end(t);
    munmap(g, 3 * page);

    /* agent_memmap_readable_now, the handler's check of the kernel's own
     * view (the innermost Python frame, agent_python.c): readable pages,
     * including a word that holds the probe's compare value; a PROT_NONE
     * page, a range running into one, and an unmapped page are not. */
    char *p = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap failed");
    if (p == MAP_FAILED)
        return 1;
    CHECK(mprotect(p + page, page, PROT_NONE) == 0, "mprotect failed");
    CHECK(munmap(p + 2 * page, page) == 0, "munmap failed");
    uint64_t at = (uint64_t)(uintptr_t)p;
    CHECK(agent_memmap_readable_now(at + 8, 80), "a readable word read as not readable");
    CHECK(agent_memmap_readable_now(at + page - 200, 200), "a readable page's last bytes read as not readable");
    for (uint32_t v = 0; v < 64; v++) { /* whatever the compare value is, a match is readable too */
        uint32_t word = v == 0 ? 0x9e3779b9u : v * 0x01010101u;
        memcpy(p + 16, &word, sizeof word);
        CHECK(agent_memmap_readable_now(at + 16, 4), "a readable word holding %#x read as not readable", word);
    }
    CHECK(!agent_memmap_readable_now(at + page, 8), "a PROT_NONE page read as readable");
    CHECK(!agent_memmap_readable_now(at + page - 8, 16), "a read running into a PROT_NONE page read as readable");
    CHECK(!agent_memmap_readable_now(at + 2 * page + 8, 8), "an unmapped page read as readable");
    CHECK(!agent_memmap_readable_now(at, 0) && !agent_memmap_readable_now(UINT64_MAX - 4, 16),
          "an empty or wrapping range read as readable");
    munmap(p, 2 * page);
    if (failures)
        printf("memmap_miss: FAILED\n");
    return failures ? 1 : 0;
}
