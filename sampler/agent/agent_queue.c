/*
 * sampler/agent/agent_queue.c — the queue between the SIGTRAP handler (many
 * producers: every sampled thread) and the writer thread (one consumer).
 *
 * SIGNAL-HANDLER CODE: agent_queue_claim/commit run inside the handler. No
 * malloc, no locks, no stdio: only atomics on memory mapped at start-up.
 *
 * Design: a ring of bytes; positions (head, tail) are byte offsets that only
 * grow, and an entry starts on a QUEUE_ALIGN boundary. A producer claims
 * room for the largest sample (QUEUE_CLAIM, ~5.4 KB: 256 PCs and 128 Python
 * frames) with a compare-and-swap on head, fills it, and at commit gives
 * back what it did not use when no other producer claimed after it (the
 * usual case: head is moved back), else the entry keeps the whole claim.
 * A PyTorch sample uses ~1 KB, a native one ~300 bytes: fixed slots of the
 * largest size made the ring 11 MB, every page of which the writer faulted
 * in during the first 2 s of every process (20-25 ms of CPU on this VM, the
 * writer's largest cost on a 1 s native run). Entries never wrap: one that
 * would cross the end is preceded by a filler entry up to it.
 * The first word of an entry is its commit word: the entry's position while
 * it is filled, position + 1 once committed (release). The writer consumes
 * strictly in order, so a producer interrupted between claim and commit
 * only delays the writer, it never corrupts the queue. The writer zeroes
 * the first word of every QUEUE_ALIGN line it consumed before it publishes
 * the new tail, so the word where the next entry will start never holds an
 * old position + 1 by chance (it is 0, or an older entry's commit word, which
 * is smaller). When there is no room the producer gets NULL and the sample
 * is counted as lost. A thread cannot re-enter its own handler (SIGTRAP is
 * blocked while it runs).
 */
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sampler/agent/agent.h"

#define QUEUE_ALIGN 64u
#define QUEUE_ROUND(n) (((uint64_t)(n) + QUEUE_ALIGN - 1) & ~(uint64_t)(QUEUE_ALIGN - 1))
#define QUEUE_CLAIM QUEUE_ROUND(sizeof(struct agent_slot))

static unsigned char *ring;
static size_t ring_bytes;        /* a power of two */
static _Atomic uint64_t head;    /* next position producers claim */
static _Atomic uint64_t tail_published; /* the writer's tail, for the producers' room check */
static uint64_t tail;            /* next position the writer consumes (writer only) */
static size_t prefaulted;        /* bytes from the start known to be backed (writer only) */
static uint64_t resident_last;   /* the ring's last mincore reading (writer only) */
static unsigned resident_reuses; /* drains since it was taken */

static inline struct agent_slot *entry_at(uint64_t pos)
{
    return (struct agent_slot *)(void *)(ring + (pos & (ring_bytes - 1)));
}

/* The ring is mapped on a 2 MB boundary, a multiple of 2 MB long, and asked
 * for transparent huge pages: with 4 KB pages every sample lands on pages
 * last touched one lap (seconds) earlier, and the handler paid a TLB miss
 * and a cold page walk for them (py_split: claiming a
 * slot took ~2 us with 4 KB pages, ~0.3 us with huge pages). Where THP is
 * off (transparent_hugepage=never) madvise fails and 4 KB pages serve.
 *
 * Except the first 2 MB, the nursery: it starts on 4 KB pages, and only
 * QUEUE_NURSERY_BYTES of it are backed. A process that takes few samples (a
 * fork child that does one small job, an exec'd /bin/true) writes a few KB
 * in all, and zeroing a whole 2 MB huge page for them was most of what the
 * agent cost such a child: in 40 fork children of a torch process, 158 of
 * the 200 perf samples (cpu-clock, 2 kHz) in the agent's code or on its
 * behalf were the kernel clearing the ring's first huge page, 63 of them in
 * a handler's claim that got there before the writer's prefault. Once the
 * producers pass QUEUE_NURSERY_PROMOTE, the process is taking samples at a
 * steady clip, and the writer turns the nursery into a huge page
 * (promote_nursery) once they have left it. Until then the writer backs the
 * nursery's 4 KB pages QUEUE_NURSERY_BYTES at a time ahead of them. */
#define QUEUE_HUGE_PAGE (2u << 20)
#define QUEUE_NURSERY_BYTES (32u << 10)   /* backed at a time: ~25 PyTorch samples */
#define QUEUE_NURSERY_PROMOTE (16u << 10) /* head past this: a process that samples steadily */
#define QUEUE_NURSERY_LEAD (256u << 10)   /* then backed this far ahead: 25 threads at 1 kHz for ~10 ms */
#define QUEUE_NURSERY_CLEAR (64u << 10)   /* producers this far past the nursery: collapse it */
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif
static bool nursery; /* the ring's first 2 MB are still on 4 KB pages (writer, fork child) */

/* Huge pages for the ring but its nursery; MADV_NOHUGEPAGE keeps the nursery
 * on 4 KB pages where THP is "always". */
static void advise_ring(unsigned char *mem, size_t bytes)
{
    nursery = bytes >= 2 * QUEUE_HUGE_PAGE;
    if (bytes < QUEUE_HUGE_PAGE)
        return; /* a small ring (tests) */
    if (nursery) {
        madvise(mem, QUEUE_HUGE_PAGE, MADV_NOHUGEPAGE);
        madvise(mem + QUEUE_HUGE_PAGE, bytes - QUEUE_HUGE_PAGE, MADV_HUGEPAGE);
    } else {
        madvise(mem, bytes, MADV_HUGEPAGE);
    }
}

static void *map_ring(size_t bytes)
{
    if (bytes < QUEUE_HUGE_PAGE) { /* a small ring (tests) */
        void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return mem == MAP_FAILED ? NULL : mem;
    }
    char *mem = mmap(NULL, bytes + QUEUE_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return NULL;
    char *aligned = (char *)(((uintptr_t)mem + QUEUE_HUGE_PAGE - 1) & ~(uintptr_t)(QUEUE_HUGE_PAGE - 1));
    if (aligned > mem)
        munmap(mem, (size_t)(aligned - mem));
    size_t after = (size_t)(mem + bytes + QUEUE_HUGE_PAGE - (aligned + bytes));
    if (after)
        munmap(aligned + bytes, after);
    return aligned;
}

/* bytes: rounded up to a power of two, and to room for two of the largest
 * entries (a claim may need a filler as long as one before it). */
int agent_queue_init(size_t bytes)
{
    size_t size = 4096;
    while (size < bytes || size < 2 * QUEUE_CLAIM)
        size *= 2;
    void *mem = map_ring(size);
    if (!mem)
        return -1;
    ring = mem;
    ring_bytes = size;
    advise_ring(ring, ring_bytes);
    tail = 0;
    prefaulted = 0;
    resident_last = 0;
    atomic_store_explicit(&tail_published, 0, memory_order_release);
    atomic_store_explicit(&head, 0, memory_order_release);
    return 0;
}

void agent_queue_reset(void)
{
    void *fresh = mmap(ring, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (fresh != MAP_FAILED) {
        advise_ring(ring, ring_bytes);
    } else { /* keep the old pages, clear every word an entry can start at */
        for (uint64_t pos = 0; pos < ring_bytes; pos += QUEUE_ALIGN)
            atomic_store_explicit(&entry_at(pos)->seq, 0, memory_order_relaxed);
    }
    tail = 0;
    prefaulted = 0;
    resident_last = 0;
    atomic_store_explicit(&tail_published, 0, memory_order_release);
    atomic_store_explicit(&head, 0, memory_order_release);
}

/* Handler. */
struct agent_slot *agent_queue_claim(void)
{
    uint64_t pos = atomic_load_explicit(&head, memory_order_relaxed);
    uint64_t filler;
    for (;;) {
        uint64_t offset = pos & (ring_bytes - 1);
        filler = offset + QUEUE_CLAIM > ring_bytes ? ring_bytes - offset : 0;
        uint64_t end = pos + filler + QUEUE_CLAIM;
        if (end - atomic_load_explicit(&tail_published, memory_order_acquire) > ring_bytes)
            return NULL; /* full: the writer has not consumed that far yet */
        /* acquire: a producer that gave bytes back before them wrote them first */
        if (atomic_compare_exchange_weak_explicit(&head, &pos, end, memory_order_acquire, memory_order_relaxed))
            break;
    }
    if (filler) {
        struct agent_slot *f = entry_at(pos);
        f->flags = AGENT_SLOT_PAD;
        f->bytes = (uint32_t)filler;
        atomic_store_explicit(&f->seq, pos + 1, memory_order_release);
        pos += filler;
    }
    struct agent_slot *s = entry_at(pos);
    atomic_store_explicit(&s->seq, pos, memory_order_relaxed); /* claimed, not committed */
    return s;
}

/* Handler: nframes, npy and the frames are in place. */
void agent_queue_commit(struct agent_slot *s)
{
    uint64_t pos = atomic_load_explicit(&s->seq, memory_order_relaxed);
    uint64_t used = QUEUE_ROUND(agent_slot_used_bytes(s));
    uint64_t claimed_end = pos + QUEUE_CLAIM;
    /* release: the next claimer of the bytes given back sees our writes done */
    if (used < QUEUE_CLAIM && atomic_compare_exchange_strong_explicit(&head, &claimed_end, pos + used,
                                                                      memory_order_release, memory_order_relaxed))
        s->bytes = (uint32_t)used;
    else
        s->bytes = (uint32_t)QUEUE_CLAIM;
    atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
}

/* Writer: done with the entry at tail. */
static void consume_entry(void)
{
    struct agent_slot *s = entry_at(tail);
    uint64_t len = s->bytes;
    if (len < QUEUE_ALIGN || len > QUEUE_CLAIM || len % QUEUE_ALIGN)
        len = QUEUE_CLAIM; /* cannot happen: the handler set it */
    for (uint64_t off = 0; off < len; off += QUEUE_ALIGN)
        atomic_store_explicit(&entry_at(tail + off)->seq, 0, memory_order_relaxed);
    tail += len;
    atomic_store_explicit(&tail_published, tail, memory_order_release);
}

struct agent_slot *agent_queue_peek(void)
{
    for (;;) {
        struct agent_slot *s = entry_at(tail);
        if (atomic_load_explicit(&s->seq, memory_order_acquire) != tail + 1)
            return NULL;
        if (!(s->flags & AGENT_SLOT_PAD))
            return s;
        consume_entry(); /* a filler up to the ring's end */
    }
}

void agent_queue_release(void)
{
    consume_entry();
}

/* Writer: back the bytes producers will claim next with memory before they
 * get there. The ring is fresh anonymous memory, so until it has gone round
 * once a sample could take a page fault inside the handler (py_split, 2 s at
 * 1 kHz with 4 KB pages: 22-40 us per sample, against ~10 us with the pages
 * present). Populating the whole ring up front would cost every exec'd
 * child the whole ring in page faults, most of it never used by a
 * short-lived process; so the writer stays QUEUE_PREFAULT_AHEAD bytes ahead
 * of the producers instead, and stops once the ring has been backed once.
 * MADV_POPULATE_WRITE (Linux 5.14) faults pages in without changing their
 * contents, so it is safe beside handlers writing into the same pages; on an
 * older kernel it fails and the handler takes the faults as before. */
#define QUEUE_PREFAULT_AHEAD (1u << 20) /* ~1,000 PyTorch samples: 25 threads at 1 kHz for 4 drain intervals */
/* ...in whole steps of this, so that a drain whose producers have not
 * crossed a step boundary makes no system call: backing only the few KB the
 * last interval used took one madvise per drain (~370 in a 2.3 s
 * torch_train.py run, 4.1-4.6 ms under strace -T); steps make it one per MB
 * of samples. */
#define QUEUE_PREFAULT_STEP QUEUE_PREFAULT_AHEAD

/* The ring's pages in memory, which the process's RSS counts: prefaulted
 * ahead of the samples and touched by them, in 2 MB huge pages where THP
 * serves. Read with mincore in chunks (writer thread). Pages come in only
 * through the prefault or a claim, so while neither has moved since the last
 * reading (a process that takes no samples: asleep, or waiting on I/O) that
 * reading stands; it is also reused while the ring is wholly resident. Either
 * way it is read again once in RESIDENT_RECHECK_DRAINS, for pages swapped
 * out. The mincore of ~1,000-2,800 page entries was one of the writer's
 * steady per-drain costs (~7.5 us hot on this VM, every 10 ms; 12 % of the
 * writer's CPU in a sleeping python3 before the "nothing moved" case). */
#define RESIDENT_RECHECK_DRAINS 100

static uint64_t resident_head, resident_prefaulted; /* what the last reading saw (writer only) */

uint64_t agent_queue_resident_bytes(void)
{
    uint64_t h = atomic_load_explicit(&head, memory_order_relaxed);
    bool unmoved = resident_last && h == resident_head && prefaulted == resident_prefaulted;
    if (ring && (resident_last == ring_bytes || unmoved) && resident_reuses < RESIDENT_RECHECK_DRAINS) {
        resident_reuses++;
        return resident_last;
    }
    resident_head = h;
    resident_prefaulted = prefaulted;
    resident_reuses = 0;
    static unsigned char vec[4096];
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t resident = 0;
    for (size_t off = 0; ring && off < ring_bytes; off += sizeof vec * page) {
        size_t len = ring_bytes - off < sizeof vec * page ? ring_bytes - off : sizeof vec * page;
        if (mincore(ring + off, len, vec) != 0)
            return resident_last = 0;
        for (size_t i = 0; i < (len + page - 1) / page; i++)
            resident += vec[i] & 1;
    }
    return resident_last = resident * page;
}

uint64_t agent_queue_consumed(void)
{
    return tail;
}
size_t agent_queue_capacity(void)
{
    return ring_bytes;
}

/* Writer: the producers have passed QUEUE_NURSERY_PROMOTE and are out of
 * the nursery. MADV_COLLAPSE (Linux 6.1) copies the nursery's pages into a
 * huge page in place, samples and all. The kernel unmaps the pages while it
 * copies, so a handler that writes there meanwhile waits for the whole
 * collapse: 4.2-6.4 ms on this VM (2026-12-01, omp_regions_gomp), where
 * the collapse ran as soon as the producers passed 16 KB and the handlers
 * claiming slots beside them stalled 5.8-8 ms, the largest handler times
 * of the run (the TSC around agent_queue_claim). So it waits until the
 * producers are QUEUE_NURSERY_CLEAR past the nursery, where the pages are
 * backed already and no handler faults. Where it fails (an older kernel,
 * no huge page free, THP off) the nursery stays on 4 KB pages, which the
 * prefault backs like the rest, and khugepaged may still collapse it (it
 * is VM_HUGEPAGE now). */
static void promote_nursery(void)
{
    nursery = false;
    if (madvise(ring, QUEUE_HUGE_PAGE, MADV_HUGEPAGE) == 0 && madvise(ring, QUEUE_HUGE_PAGE, MADV_COLLAPSE) == 0 &&
        prefaulted < QUEUE_HUGE_PAGE)
        prefaulted = QUEUE_HUGE_PAGE;
}

/* Writer, and the thread that starts the agent or forks, before any claim. */
void agent_queue_prefault(void)
{
    if (!ring)
        return;
    uint64_t h = atomic_load_explicit(&head, memory_order_relaxed);
    if (nursery) {
        uint64_t at = h & (ring_bytes - 1);
        if (h >= QUEUE_NURSERY_PROMOTE && at >= QUEUE_HUGE_PAGE + QUEUE_NURSERY_CLEAR) {
            promote_nursery();
        } else if (h < QUEUE_HUGE_PAGE) {
            /* 4 KB pages ahead of the producers (the first step only, until
             * the process samples steadily), in whole steps: one madvise per
             * QUEUE_NURSERY_BYTES of samples at most; where it fails the
             * handler takes the faults */
            uint64_t lead = h < QUEUE_NURSERY_PROMOTE ? QUEUE_NURSERY_BYTES - 1 : QUEUE_NURSERY_LEAD;
            uint64_t want = (h + lead + QUEUE_NURSERY_BYTES - 1) / QUEUE_NURSERY_BYTES * QUEUE_NURSERY_BYTES;
            if (want > QUEUE_HUGE_PAGE)
                want = QUEUE_HUGE_PAGE;
            if (want > prefaulted) {
                if (madvise(ring + prefaulted, want - prefaulted, MADV_POPULATE_WRITE) == 0)
                    prefaulted = want;
                else
                    prefaulted = ring_bytes; /* not supported here */
            }
            if (h < QUEUE_NURSERY_PROMOTE || h + QUEUE_PREFAULT_AHEAD <= QUEUE_HUGE_PAGE)
                return; /* the huge pages after it are not needed yet */
        }
    }
    if (prefaulted >= ring_bytes)
        return;
    uint64_t ahead = h + QUEUE_PREFAULT_AHEAD;
    if (ahead <= prefaulted)
        return; /* still a whole QUEUE_PREFAULT_AHEAD backed in front of the producers */
    size_t want = ahead >= ring_bytes
                      ? ring_bytes
                      : (size_t)(ahead + QUEUE_PREFAULT_STEP - 1) / QUEUE_PREFAULT_STEP * QUEUE_PREFAULT_STEP;
    if (want > ring_bytes)
        want = ring_bytes;
    /* ring and prefaulted are page-aligned: mmap'd, and whole steps (or the
     * ring's end) above. */
    if (madvise(ring + prefaulted, want - prefaulted, MADV_POPULATE_WRITE) != 0) {
        prefaulted = ring_bytes; /* not supported here: leave the faults to the handler */
        return;
    }
    prefaulted = want;
}
