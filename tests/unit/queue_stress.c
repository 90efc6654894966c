/*
 * tests/unit/queue_stress.c — the agent's handler->writer queue under
 * contention, built with ThreadSanitizer (see Makefile.am): four producer
 * threads claim/fill/commit entries as the SIGTRAP handler does while one
 * consumer drains them as the writer thread does. Entries vary in size
 * (1-256 PCs, 0-128 Python frames), so the ring wraps at every offset, needs
 * fillers before its end, and producers give back unused bytes while others
 * claim. Every committed sample must be consumed exactly once with its
 * contents intact, and claims that find the queue full must be the only
 * ones missing (they are "lost").
 *
 * Then the ring's nursery (nursery_check).
 *
 * A plain program (not CUnit) because it must link agent_queue.c itself and
 * run under -fsanitize=thread, which the rest of the suite does not use.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "sampler/agent/agent.h"

#define PRODUCERS 4
#define PER_PRODUCER 20000

/* agent_queue.c needs nothing else from the agent. */
static _Atomic uint64_t lost[PRODUCERS];
static _Atomic int producers_done;

/* The sizes of sample i of a producer: a fixed pseudo-random sequence,
 * mostly up to 64 PCs, one in 8 up to the largest. */
static unsigned frames_of(unsigned id, uint32_t i)
{
    unsigned r = (unsigned)(((uint64_t)i * 2654435761u + id * 97u) >> 7);
    return 1 + r % (r % 8 == 0 ? OPR_MAX_FRAMES : 64);
}

static unsigned pyframes_of(unsigned id, uint32_t i)
{
    uint32_t r = (uint32_t)(((uint64_t)i * 40503u + id * 31u) >> 3);
    return r % 4 == 0 ? 0 : r % (r % 8 == 1 ? OPR_MAX_PYFRAMES + 1 : 24);
}

static uint64_t word_of(uint64_t key, unsigned k)
{
    return key * 0x9e3779b97f4a7c15ull + k;
}

static void *producer(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    for (uint32_t i = 0; i < PER_PRODUCER; i++) {
        /* Some work between samples, as a sampled thread has, so the
         * consumer keeps up most of the time and both paths are exercised. */
        for (volatile int spin = 0; spin < 20000; spin++)
            ;
        struct agent_slot *s = agent_queue_claim();
        if (!s) {
            atomic_fetch_add(&lost[id], 1);
            continue;
        }
        uint64_t key = ((uint64_t)id << 32) | i;
        s->tid = id;
        s->time_ns = i;
        s->flags = 0;
        s->nframes = (uint16_t)frames_of(id, i);
        for (unsigned k = 0; k < s->nframes; k++)
            s->pcs[k] = word_of(key, k);
        s->npy = pyframes_of(id, i);
        struct py_frame_ref *py = agent_slot_py(s);
        for (unsigned k = 0; k < s->npy; k++) {
            py[k].code = word_of(key, 1000 + k);
            py[k].fingerprint = ~py[k].code;
            py[k].instr = (int32_t)k;
            py[k].is_entry = k & 1;
        }
        agent_queue_commit(s);
    }
    atomic_fetch_add(&producers_done, 1);
    return NULL;
}

/* Whether an entry holds what its producer wrote. */
static bool intact(struct agent_slot *s)
{
    unsigned id = s->tid;
    if (id >= PRODUCERS || s->time_ns >= PER_PRODUCER)
        return false;
    uint32_t i = (uint32_t)s->time_ns;
    uint64_t key = ((uint64_t)id << 32) | i;
    if (s->nframes != frames_of(id, i) || s->npy != pyframes_of(id, i) || s->flags != 0)
        return false;
    for (unsigned k = 0; k < s->nframes; k++)
        if (s->pcs[k] != word_of(key, k))
            return false;
    const struct py_frame_ref *py = agent_slot_py(s);
    for (unsigned k = 0; k < s->npy; k++)
        if (py[k].code != word_of(key, 1000 + k) || py[k].fingerprint != ~py[k].code || py[k].instr != (int32_t)k ||
            py[k].is_entry != (k & 1))
            return false;
    return true;
}

/* One round: PRODUCERS threads against the consumer; 1 when it failed. */
static int run_round(int round)
{
    memset(lost, 0, sizeof lost);
    atomic_store(&producers_done, 0);
    pthread_t t[PRODUCERS];
    for (unsigned i = 0; i < PRODUCERS; i++)
        pthread_create(&t[i], NULL, producer, (void *)(uintptr_t)i);
    uint64_t consumed[PRODUCERS] = {0}, bad = 0, gave_back = 0;
    uint64_t last_seen[PRODUCERS];
    for (unsigned i = 0; i < PRODUCERS; i++)
        last_seen[i] = UINT64_MAX;
    for (;;) {
        /* As the writer does between drains; here while producers write
         * into the very pages it backs. */
        agent_queue_prefault();
        struct agent_slot *s = agent_queue_peek();
        if (!s) {
            if (atomic_load(&producers_done) == PRODUCERS && !agent_queue_peek())
                break;
            continue;
        }
        unsigned id = s->tid;
        if (!intact(s) || (last_seen[id] != UINT64_MAX && s->time_ns <= last_seen[id]))
            bad++;
        else {
            consumed[id]++;
            gave_back += s->bytes < sizeof *s; /* committed with the unused bytes returned */
            last_seen[id] = s->time_ns;
        }
        agent_queue_release();
    }
    for (unsigned i = 0; i < PRODUCERS; i++)
        pthread_join(t[i], NULL);
    int failed = bad != 0;
    uint64_t total_consumed = 0;
    for (unsigned i = 0; i < PRODUCERS; i++)
        total_consumed += consumed[i];
    if (total_consumed == 0 || gave_back == 0)
        failed = 1; /* nothing went through, or never the usual way: the test tested nothing */
    uint64_t total_lost = 0;
    for (unsigned i = 0; i < PRODUCERS; i++) {
        total_lost += lost[i];
        if (consumed[i] + lost[i] != PER_PRODUCER)
            failed = 1;
    }
    printf("queue_stress round %d: %d producers x %d samples: %llu consumed intact, %llu lost (queue full), "
           "%llu corrupt or out of order; %llu gave unused bytes back\n",
           round, PRODUCERS, PER_PRODUCER,
           (unsigned long long)(PRODUCERS * (uint64_t)PER_PRODUCER - total_lost),
           (unsigned long long)total_lost, (unsigned long long)bad, (unsigned long long)gave_back);
    return failed;
}

/* Whether this kernel collapses 4 KB pages into a huge page on request
 * (MADV_COLLAPSE, Linux 6.1, and THP not "never"): tried on memory of our own. */
static bool collapse_works(int *err)
{
    size_t huge = 2u << 20;
    char *mem = mmap(NULL, 2 * huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        *err = errno;
        return false;
    }
    char *aligned = (char *)(((uintptr_t)mem + huge - 1) & ~(uintptr_t)(huge - 1));
    aligned[0] = 1;
    bool ok = madvise(aligned, huge, MADV_HUGEPAGE) == 0 && madvise(aligned, huge, 25 /* MADV_COLLAPSE */) == 0;
    *err = ok ? 0 : errno;
    munmap(mem, 2 * huge);
    return ok;
}

/* The kB of huge pages /proc/self/smaps counts in the mapping holding addr. */
static long huge_kb_at(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    bool in = false;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
        else if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}

/* One small entry (8 PCs, ~0.1 KB) numbered i; NULL when the ring is full. */
static unsigned char *queue_small(uint32_t i)
{
    struct agent_slot *s = agent_queue_claim();
    if (!s)
        return NULL;
    s->tid = 0;
    s->time_ns = i;
    s->flags = 0;
    s->nframes = 8;
    for (unsigned k = 0; k < 8; k++)
        s->pcs[k] = word_of(i, k);
    s->npy = 0;
    agent_queue_commit(s);
    return (unsigned char *)s;
}

/* A ring of 4 MB, as the agent's: its first 2 MB start on 4 KB pages with
 * only 32 KB backed, so a process that takes a few samples does not zero a
 * 2 MB huge page. Once the producers pass 16 KB the writer's prefault backs
 * the nursery's pages ahead of them, and once they have left it (64 KB
 * past its end) makes those 2 MB a huge page in place: a collapse beside
 * producers writing in the nursery stalled their handlers for the whole
 * copy (agent_queue.c). Entries committed but not yet consumed, in the
 * nursery and after it, come out intact. 1 when it failed. */
static int nursery_check(void)
{
    const uint64_t nursery = 2u << 20, clear = nursery + (64u << 10);
    if (agent_queue_init(4u << 20) != 0) {
        printf("queue_stress: cannot map a 4 MB queue\n");
        return 1;
    }
    agent_queue_prefault();
    int failed = 0;
    uint64_t backed = agent_queue_resident_bytes();
    /* less on a kernel without MADV_POPULATE_WRITE (5.14): the claims fault */
    if (backed > 32u << 10) {
        printf("queue_stress: %llu bytes of a new 4 MB ring backed, more than the 32 KB nursery\n",
               (unsigned long long)backed);
        failed = 1;
    }
    /* 300 entries (~29 KB), the first 100 consumed: backed ahead, no huge page yet */
    unsigned char *start = queue_small(0), *at = start;
    uint32_t n = 1;
    for (; n < 300 && at; n++)
        at = queue_small(n);
    for (uint32_t i = 0; i < 100; i++)
        if (agent_queue_peek())
            agent_queue_release();
    uint32_t consumed = 100;
    agent_queue_prefault();
    long early = huge_kb_at(start);
    uint64_t ahead = agent_queue_resident_bytes();
    /* backed == 0: no MADV_POPULATE_WRITE here, nothing is backed ahead */
    if (early != 0 || (backed > 0 && ahead < (uint64_t)(at - start) + (128u << 10))) {
        printf("queue_stress: producers 29 KB into the nursery: %ld kB of huge pages (want 0), %llu bytes backed "
               "(want 128 KB or more ahead of them)\n",
               early, (unsigned long long)ahead);
        failed = 1;
    }
    /* On to 64 KB past the nursery, the writer's prefault every 100
     * entries; entries from 64 KB before its end on stay queued. */
    while (at && (uint64_t)(at - start) < clear) {
        at = queue_small(n++);
        if (n % 100 == 0 && (uint64_t)(at - start) + 4096 < clear) /* the promotion is the check's, below */
            agent_queue_prefault();
        for (; (uint64_t)(at - start) < nursery - (64u << 10) && consumed + 1 < n && agent_queue_peek(); consumed++)
            agent_queue_release();
    }
    if (!at) {
        printf("queue_stress: the 4 MB ring was full after %u small entries\n", n - 1);
        return 1;
    }
    long before = huge_kb_at(start);
    agent_queue_prefault(); /* the producers have left the nursery: the promotion */
    long after = huge_kb_at(start);
    uint32_t intact_entries = 0, queued = n - consumed;
    for (struct agent_slot *s; (s = agent_queue_peek()) != NULL; agent_queue_release()) {
        bool ok = s->time_ns == consumed + intact_entries && s->nframes == 8 && s->npy == 0;
        for (unsigned k = 0; ok && k < 8; k++)
            ok = s->pcs[k] == word_of(s->time_ns, k);
        intact_entries += ok;
    }
    if (intact_entries != queued) {
        printf("queue_stress: %u of the %u entries queued across the nursery's promotion came out intact\n",
               intact_entries, queued);
        failed = 1;
    }
    int err;
    if (!collapse_works(&err))
        printf("queue_stress: SKIP the nursery's huge page: this kernel does not collapse pages on request "
               "(MADV_COLLAPSE: %s)\n",
               strerror(err));
    else if (before != 0 || after < 2048) {
        printf("queue_stress: the nursery's huge pages: %ld kB while producers were in it or just past it (want 0), "
               "%ld after they left (want 2048)\n",
               before, after);
        failed = 1;
    }
    printf("queue_stress nursery: %llu bytes backed at the start, %llu with producers 29 KB in; huge pages %ld -> "
           "%ld kB; %u entries intact\n",
           (unsigned long long)backed, (unsigned long long)ahead, before, after, intact_entries);
    return failed;
}

int main(void)
{
    /* 256 KB: ~48 of the largest claims, so the ring wraps often and fills at times. */
    if (agent_queue_init(256 << 10) != 0) {
        fprintf(stderr, "queue_stress: cannot map the queue\n");
        return 2;
    }
    int failed = run_round(1);
    /* What a forked child does: entries left committed and claimed, then a
     * reset; none of them may come out, and the ring works as new. */
    for (int i = 0; i < 300; i++) {
        struct agent_slot *s = agent_queue_claim();
        if (s && i % 2 == 0) {
            s->nframes = 1;
            s->npy = 0;
            agent_queue_commit(s);
        }
    }
    agent_queue_reset();
    if (agent_queue_peek() != NULL) {
        printf("queue_stress: an entry from before the reset came out after it\n");
        failed = 1;
    }
    failed |= run_round(2);
    failed |= nursery_check();
    printf("%d passed, %d failed\n", failed ? 0 : 1, failed ? 1 : 0);
    return failed;
}
