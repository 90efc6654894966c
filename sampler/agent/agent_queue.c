/*
 * sampler/agent/agent_queue.c — the queue between the SIGTRAP handler (many
 * producers: every sampled thread) and the writer thread (one consumer).
 *
 * SIGNAL-HANDLER CODE: agent_queue_claim/commit run inside the handler. No
 * malloc, no locks, no stdio: only atomics on memory mapped at start-up.
 *
 * Design: a bounded ring of fixed-size slots with a sequence number per slot
 * (Vyukov's bounded queue). A producer owns a slot between claim and commit;
 * the writer consumes strictly in order, so a producer interrupted between
 * claim and commit only delays the writer, it never corrupts the queue. When
 * the ring is full the producer gets NULL and the sample is counted as lost.
 * A thread cannot re-enter its own handler (SIGTRAP is blocked while it runs).
 */
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sampler/agent/agent.h"

static struct agent_slot *slots;
static size_t slots_bytes;
static uint64_t slot_mask;
static _Atomic uint64_t head; /* next position producers claim */
static uint64_t tail;         /* next position the writer consumes (writer only) */
static size_t prefaulted;     /* bytes from the start known to be backed (writer only) */
static uint64_t resident_last;   /* the ring's last mincore reading (writer only) */
static unsigned resident_reuses; /* drains since it was taken */

/* Each slot's sequence number is stored less its index, so that the initial
 * state (seq = index) is all zeros: fresh anonymous memory, which a forked
 * child gets by mapping new pages over the inherited ring (one system call)
 * instead of writing into every slot, which copied the whole ring (~10 MB,
 * every page shared copy-on-write with the parent) in each child: a shell
 * script spawning commands under record spent half its CPU time there. */
static inline uint64_t load_seq(struct agent_slot *s, memory_order order)
{
    return atomic_load_explicit(&s->seq, order) + (uint64_t)(s - slots);
}

static inline void store_seq(struct agent_slot *s, uint64_t seq, memory_order order)
{
    atomic_store_explicit(&s->seq, seq - (uint64_t)(s - slots), order);
}

/* The ring is mapped on a 2 MB boundary, a multiple of 2 MB long, and asked
 * for transparent huge pages: a slot is ~5.4 KB, so with 4 KB pages every
 * sample lands on pages last touched one lap (~2 s at 1 kHz) earlier, and the
 * handler paid a TLB miss and a cold page walk for them (py_split: claiming a
 * slot took ~2 us with 4 KB pages, ~0.3 us with huge pages). Where THP is
 * off (transparent_hugepage=never) madvise fails and 4 KB pages serve. */
#define QUEUE_HUGE_PAGE (2u << 20)

static void *map_ring(size_t bytes)
{
    char *mem = mmap(NULL, bytes + QUEUE_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return NULL;
    char *ring = (char *)(((uintptr_t)mem + QUEUE_HUGE_PAGE - 1) & ~(uintptr_t)(QUEUE_HUGE_PAGE - 1));
    if (ring > mem)
        munmap(mem, (size_t)(ring - mem));
    size_t after = (size_t)(mem + bytes + QUEUE_HUGE_PAGE - (ring + bytes));
    if (after)
        munmap(ring + bytes, after);
    madvise(ring, bytes, MADV_HUGEPAGE);
    return ring;
}

int agent_queue_init(unsigned nslots_pow2)
{
    size_t bytes = (size_t)nslots_pow2 * sizeof(struct agent_slot);
    bytes = (bytes + QUEUE_HUGE_PAGE - 1) / QUEUE_HUGE_PAGE * QUEUE_HUGE_PAGE;
    void *mem = map_ring(bytes);
    if (!mem)
        return -1;
    slots = mem;
    slots_bytes = bytes;
    slot_mask = nslots_pow2 - 1;
    tail = 0;
    prefaulted = 0;
    resident_last = 0;
    atomic_store_explicit(&head, 0, memory_order_release);
    return 0;
}

void agent_queue_reset(void)
{
    void *fresh = mmap(slots, slots_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (fresh != MAP_FAILED)
        madvise(slots, slots_bytes, MADV_HUGEPAGE);
    else /* keep the old pages, reset them one by one */
        for (uint64_t i = 0; i <= slot_mask; i++)
            atomic_store_explicit(&slots[i].seq, 0, memory_order_relaxed);
    tail = 0;
    prefaulted = 0;
    resident_last = 0;
    atomic_store_explicit(&head, 0, memory_order_release);
}

struct agent_slot *agent_queue_claim(void)
{
    uint64_t pos = atomic_load_explicit(&head, memory_order_relaxed);
    for (;;) {
        struct agent_slot *s = &slots[pos & slot_mask];
        uint64_t seq = load_seq(s, memory_order_acquire);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&head, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed))
                return s;
        } else if (diff < 0) {
            return NULL; /* full: the writer has not released this slot yet */
        } else {
            pos = atomic_load_explicit(&head, memory_order_relaxed);
        }
    }
}

void agent_queue_commit(struct agent_slot *s)
{
    /* The slot was claimed at position seq; seq+1 tells the writer it is ready. */
    uint64_t pos = load_seq(s, memory_order_relaxed);
    store_seq(s, pos + 1, memory_order_release);
}

struct agent_slot *agent_queue_peek(void)
{
    struct agent_slot *s = &slots[tail & slot_mask];
    uint64_t seq = load_seq(s, memory_order_acquire);
    return seq == tail + 1 ? s : NULL;
}

void agent_queue_release(void)
{
    struct agent_slot *s = &slots[tail & slot_mask];
    store_seq(s, tail + slot_mask + 1, memory_order_release);
    tail++;
}

/* Writer: back the slots producers will claim next with memory before they
 * get there. A slot is ~5.4 KB and the ring is fresh anonymous memory, so
 * until it has gone round once every sample took one or two page faults
 * inside the handler (py_split, 2 s at 1 kHz: 22-40 us per sample, against
 * ~10 us with the pages present). Populating the whole ring up front would
 * cost every exec'd child ~11 MB of page faults, most of it never used by a
 * short-lived process; so the writer stays QUEUE_PREFAULT_AHEAD slots ahead
 * of the producers instead, and stops once the ring has been backed once.
 * MADV_POPULATE_WRITE (Linux 5.14) faults pages in without changing their
 * contents, so it is safe beside handlers writing into the same pages; on an
 * older kernel it fails and the handler takes the faults as before. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define QUEUE_PREFAULT_AHEAD 256 /* slots: ~1.4 MB, 25 threads at 1 kHz for one 10 ms drain interval */

/* The ring's pages in memory, which the process's RSS counts: prefaulted
 * ahead of the samples and touched by them, in 2 MB huge pages where THP
 * serves. Read with mincore in chunks (writer thread, once per drain until
 * the whole ring is resident). A ring wholly resident stays so unless its
 * pages are swapped out, so from then on it is read once in
 * RESIDENT_RECHECK_DRAINS: the mincore of ~2,800 page entries was one of
 * the writer's steady per-drain costs (~7.5 us hot on this VM, every 10 ms). */
#define RESIDENT_RECHECK_DRAINS 100

uint64_t agent_queue_resident_bytes(void)
{
    if (slots && resident_last == slots_bytes && resident_reuses < RESIDENT_RECHECK_DRAINS) {
        resident_reuses++;
        return resident_last;
    }
    resident_reuses = 0;
    static unsigned char vec[4096];
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t resident = 0;
    for (size_t off = 0; slots && off < slots_bytes; off += sizeof vec * page) {
        size_t len = slots_bytes - off < sizeof vec * page ? slots_bytes - off : sizeof vec * page;
        if (mincore((char *)slots + off, len, vec) != 0)
            return resident_last = 0;
        for (size_t i = 0; i < (len + page - 1) / page; i++)
            resident += vec[i] & 1;
    }
    return resident_last = resident * page;
}

void agent_queue_prefault(void)
{
    if (!slots || prefaulted >= slots_bytes)
        return;
    uint64_t ahead = atomic_load_explicit(&head, memory_order_relaxed) + QUEUE_PREFAULT_AHEAD;
    size_t want = ahead > slot_mask ? slots_bytes : (size_t)ahead * sizeof(struct agent_slot);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    want = (want + page - 1) / page * page;
    if (want > slots_bytes)
        want = slots_bytes;
    if (want <= prefaulted)
        return;
    /* slots and prefaulted are page-aligned: mmap'd, and rounded up above. */
    if (madvise((char *)slots + prefaulted, want - prefaulted, MADV_POPULATE_WRITE) != 0) {
        prefaulted = slots_bytes; /* not supported here: leave the faults to the handler */
        return;
    }
    prefaulted = want;
}
