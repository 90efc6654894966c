/*
 * sampler/agent_queue.c — the queue between the SIGTRAP handler (many
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

#include "sampler/agent.h"

static struct agent_slot *slots;
static size_t slots_bytes;
static uint64_t slot_mask;
static _Atomic uint64_t head; /* next position producers claim */
static uint64_t tail;         /* next position the writer consumes (writer only) */

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

int agent_queue_init(unsigned nslots_pow2)
{
    size_t bytes = (size_t)nslots_pow2 * sizeof(struct agent_slot);
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return -1;
    slots = mem;
    slots_bytes = bytes;
    slot_mask = nslots_pow2 - 1;
    tail = 0;
    atomic_store_explicit(&head, 0, memory_order_release);
    return 0;
}

void agent_queue_reset(void)
{
    void *fresh = mmap(slots, slots_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (fresh == MAP_FAILED) /* keep the old pages, reset them one by one */
        for (uint64_t i = 0; i <= slot_mask; i++)
            atomic_store_explicit(&slots[i].seq, 0, memory_order_relaxed);
    tail = 0;
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
