/*
 * sampler/agent/unwind_defer.c — deferred walks (why: unwind_table.h): the
 * handler copies the stack of a walk that stopped at a module without a
 * table, the writer finishes the walk on the copy once the table is there.
 *
 * SIGNAL-HANDLER CODE: unwind_defer_keep() runs in the SIGTRAP handler:
 * atomics, the readable-mappings snapshot (agent_memmap.c), memcpy and
 * process_vm_readv on its own process, no malloc, no locks, no stdio. The rest runs in the writer.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sampler/agent/unwind_table.h"

struct defer_buf {
    uint8_t kind; /* enum unwind_defer_kind */
    struct unwind_resume at;
    uint64_t sp;
    size_t len;
    size_t touched; /* bytes of the buffer written since its pages were last given back */
};
/* Buffer i: its state (0 free, 1 a handler is filling it, 2 a queue slot
 * owns it), its walk and its stack bytes, in three arrays so that a
 * handler looking for a free buffer scans 2 KB of states, not one page per
 * buffer. 32 MB of bss, touched only where a walk is deferred, and then
 * only as deep as the stack is (~15 KB on Python's main thread): the first
 * free buffer is taken, so a run that defers a few walks at a time reuses
 * the same few. 512: samples wait for a table while the writer compiles it,
 * and a first run of PyTorch (no cache) compiles for ~0.5 s: with 64
 * buffers 350 of its ~500 waiting samples went to libunwind in the handler
 * (its slow path, p50 35 us, p99 0.2 ms). Buffers past the first
 * DEFER_RESIDENT are given back to the kernel when freed (MADV_DONTNEED),
 * so such a burst does not stay in the workload's RSS. */
#define DEFER_RESIDENT 64
static _Atomic int pool_state[UNWIND_DEFER_BUFS];
static struct defer_buf pool[UNWIND_DEFER_BUFS];
static uint8_t pool_bytes[UNWIND_DEFER_BUFS][UNWIND_DEFER_BYTES] __attribute__((aligned(4096)));
static bool defer_on = true;
/* Walks the writer could not finish because their module was gone by then
 * (unloaded before its table was built: dlopen_hammer loads and unloads a
 * library 4,000 times a second, and 59 of its 82 deferred walks a run were
 * cut so, where libunwind in the handler had the live module). A process
 * that unloads code that fast unwinds in the handler again after a few. */
#define VANISHED_MAX 4
static _Atomic unsigned vanished;

void agent_unwind_defer_init(void)
{
    const char *e = getenv("OPPROF_UNWIND_DEFER");
    defer_on = !(e && strcmp(e, "0") == 0);
}

/* [sp, sp + UNWIND_DEFER_BYTES) into to, one page-sized piece of the
 * remote vector each: the kernel does not split a piece, so the copy ends
 * at the first page that cannot be read (the top of a thread's stack, the
 * guard page of the next) and the bytes before it are what it returns.
 * One system call, no fault on unmapped memory: handler-safe. The target
 * is the calling thread (any task of a process names its memory), not the
 * process id: a process whose main thread has exited is a zombie leader
 * whose pid no longer has memory to read. */
static size_t copy_unknown_stack(uint8_t *to, uint64_t sp)
{
    enum { PIECE = 4096 };
    struct iovec local = {to, UNWIND_DEFER_BYTES};
    struct iovec remote[UNWIND_DEFER_BYTES / PIECE + 1];
    unsigned n = 0;
    uint64_t at = sp;
    size_t left = UNWIND_DEFER_BYTES;
    while (left > 0 && n < sizeof remote / sizeof remote[0]) {
        size_t piece = PIECE - (size_t)(at % PIECE);
        if (piece > left)
            piece = left;
        remote[n++] = (struct iovec){(void *)(uintptr_t)at, piece};
        at += piece;
        left -= piece;
    }
    long got = syscall(SYS_process_vm_readv, syscall(SYS_gettid), &local, 1UL, remote, (unsigned long)n, 0UL);
    return got > 0 ? (size_t)got : 0;
}

uint32_t unwind_defer_keep(const struct unwind_resume *rs, enum unwind_defer_kind kind)
{
    if (!defer_on || atomic_load_explicit(&vanished, memory_order_relaxed) >= VANISHED_MAX)
        return 0;
    for (unsigned i = 0; i < UNWIND_DEFER_BUFS; i++) {
        struct defer_buf *b = &pool[i];
        uint8_t *bytes = pool_bytes[i];
        int expected = 0;
        if (atomic_load_explicit(&pool_state[i], memory_order_relaxed) != 0 ||
            !atomic_compare_exchange_strong_explicit(&pool_state[i], &expected, 1, memory_order_acquire,
                                                     memory_order_relaxed))
            continue;
        /* From SP to the end of its readable mapping (the top of the thread's
         * stack), at most the buffer: the walk reads nothing below SP. */
        int t = agent_memmap_begin();
        uint64_t lo, hi;
        bool readable = agent_memmap_readable_range(t, rs->sp, 8, &lo, &hi) && !rs->unknown_stack;
        size_t len = 0;
        if (readable) {
            len = hi - rs->sp < UNWIND_DEFER_BYTES ? (size_t)(hi - rs->sp) : UNWIND_DEFER_BYTES;
            memcpy(bytes, (const void *)(uintptr_t)rs->sp, len);
        }
        agent_memmap_end(t);
        /* a stack the snapshot does not know yet: through the kernel, kept
         * when the copy ended at its first unreadable page within the
         * buffer (the whole rest of the stack is in it) and holds the word
         * whose read stopped the walk; else libunwind, which gives the
         * whole stack where a cut copy would cut the walk */
        bool unknown = !readable;
        if (unknown)
            len = copy_unknown_stack(bytes, rs->sp);
        if (len > b->touched)
            b->touched = len; /* pages to give back, kept or not (release) */
        bool holds_stop = !rs->unknown_stack || (rs->fail_addr >= rs->sp && rs->fail_addr - rs->sp + 8 <= len);
        if (unknown && (len == 0 || len == UNWIND_DEFER_BYTES || !holds_stop)) {
            atomic_store_explicit(&pool_state[i], 0, memory_order_release);
            return 0;
        }
        b->kind = (uint8_t)kind;
        b->at = *rs;
        b->sp = rs->sp;
        b->len = len;
        atomic_store_explicit(&pool_state[i], 2, memory_order_release);
        /* in this order: a reader loads the share (unknown) before the
         * whole (samples), so it never sees more of one than of the other */
        atomic_fetch_add_explicit(&unwind_counts.deferred_samples, 1, memory_order_relaxed);
        if (unknown)
            atomic_fetch_add_explicit(&unwind_counts.deferred_unknown_stack, 1, memory_order_release);
        return i + 1;
    }
    atomic_fetch_add_explicit(&unwind_counts.deferred_pool_full, 1, memory_order_relaxed);
    return 0;
}

static struct defer_buf *owned(uint32_t id)
{
    if (id < 1 || id > UNWIND_DEFER_BUFS)
        return NULL;
    return atomic_load_explicit(&pool_state[id - 1], memory_order_acquire) == 2 ? &pool[id - 1] : NULL;
}

/* Writer: buffer id is free again; past the first DEFER_RESIDENT its
 * touched pages go back to the kernel first (a burst's, see above). */
static void release(uint32_t id)
{
    struct defer_buf *b = &pool[id - 1];
    if (id > DEFER_RESIDENT && b->touched > 0) { /* touched: also by copies refused since (keep) */
        long page = sysconf(_SC_PAGESIZE);
        size_t span = page > 0 ? (b->touched + (size_t)page - 1) / (size_t)page * (size_t)page : b->touched;
        madvise(pool_bytes[id - 1], span < UNWIND_DEFER_BYTES ? span : UNWIND_DEFER_BYTES, MADV_DONTNEED);
        b->touched = 0;
    }
    atomic_store_explicit(&pool_state[id - 1], 0, memory_order_release);
}

/* The walk from where the handler stopped, on the copy. The table it
 * stopped at is wanted already (or the PC's module missed): the writer
 * builds or rescans first. Elsewhere (the final drain from an exiting
 * thread, a fork) only the tables built so far are used. */
static enum unwind_result walk_rest(const struct defer_buf *b, uint64_t *pcs, unsigned max, unsigned *n,
                                    bool *truncated)
{
    struct unwind_stack_copy copy = {b->sp, b->len, pool_bytes[b - pool]};
    enum unwind_result r = UNWIND_OK;
    for (int attempt = 0; attempt < 4; attempt++) {
        r = unwind_table_walk_copy(&b->at, &copy, pcs, max, n, truncated);
        if ((r != UNWIND_FAIL_NOT_BUILT && r != UNWIND_FAIL_NO_MODULE) || !agent_is_writer_thread())
            return r;
        agent_unwind_serve();
    }
    atomic_fetch_add_explicit(&vanished, 1, memory_order_relaxed); /* built and rescanned, still no table */
    return r;
}

unsigned unwind_defer_finish(uint32_t id, const uint64_t *pcs, unsigned n, uint64_t *out, unsigned max,
                             uint16_t *flags)
{
    if (n > max)
        n = max;
    struct defer_buf *b = owned(id);
    if (!b) { /* cannot happen: the handler set the id with the buffer owned */
        memcpy(out, pcs, n * sizeof pcs[0]);
        return n;
    }
    /* The slot's frames before the stopped one are the walk's so far (in
     * check mode libunwind's, which agreed with them). */
    unsigned keep = b->at.nframes > 1 ? b->at.nframes - 1 : 0;
    if (keep > n)
        keep = n;
    memcpy(out, pcs, keep * sizeof pcs[0]);
    unsigned m = 0;
    bool truncated = false;
    enum unwind_result r = walk_rest(b, out + keep, max - keep, &m, &truncated);
    unsigned total = keep + m;
    if (total == 0) /* no module index yet even here: the slot's PC */
        out[total++] = pcs[0];
    enum unwind_defer_kind kind = (enum unwind_defer_kind)b->kind;
    release(id);
    if (r == UNWIND_OK)
        atomic_fetch_add_explicit(&unwind_counts.deferred_finished, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&unwind_counts.deferred_cut, 1, memory_order_relaxed);
    if (kind == UNWIND_DEFER_PLAIN) {
        if (r != UNWIND_OK || truncated)
            *flags |= OPR_SAMPLE_TRUNCATED;
        return total;
    }
    /* Check mode: the sample keeps libunwind's stack (pcs); a finished walk
     * is compared with it as check_both_ways compares a handler's walk. */
    atomic_fetch_add_explicit(&unwind_counts.deferred_checked, 1, memory_order_relaxed);
    enum unwind_check_verdict v = kind == UNWIND_DEFER_CHECK_DIFFERS ? UNWIND_CHECK_DIFFERS : UNWIND_CHECK_SAME;
    if (v == UNWIND_CHECK_SAME && r == UNWIND_OK)
        v = unwind_check_differs(out, total, truncated, pcs, n, *flags & OPR_SAMPLE_TRUNCATED);
    if (v == UNWIND_CHECK_AT_ENTRY)
        atomic_fetch_add_explicit(&unwind_counts.check_at_entry, 1, memory_order_relaxed);
    else if (v != UNWIND_CHECK_SAME)
        atomic_fetch_add_explicit(&unwind_counts.deferred_disagree, 1, memory_order_relaxed);
    memcpy(out, pcs, n * sizeof pcs[0]);
    return n;
}

/* At start-up, before the timer: back the pages the first deferred walk
 * touches (the vanished count, the states, buffer 0's struct and the first
 * DEFER_BACKED_BYTES of its bytes: a Python main thread's stack, ~15 KB,
 * fits), so that the handler's copy does not take their first-touch faults
 * (3 a PyTorch run, ~2-15 us each on a VM) on top of a walk that is already
 * a tail sample. A process's first samples defer (no table is built yet),
 * often before the writer's first loop: hence here, not in the writer.
 * MADV_POPULATE_WRITE fills pages without changing a byte. Once per
 * process image: a fork child keeps the mark, as the walk memos do
 * (unwind_sample.c: copying shared pages in every short-lived child costs
 * more than its rare deferral). */
#define DEFER_BACKED_BYTES (16u * 1024u)
static bool defer_backed;

void unwind_defer_prefault(void)
{
    if (defer_backed || !defer_on)
        return;
    defer_backed = true;
    /* each may fail (Linux < 5.14): the faults then stay */
    (void)agent_populate(&vanished, sizeof vanished); /* read first; its page may hold nothing written yet */
    (void)agent_populate(pool_state, sizeof pool_state);
    (void)agent_populate(&pool[0], sizeof pool[0]);
    (void)agent_populate(pool_bytes[0], DEFER_BACKED_BYTES);
}

void unwind_defer_atfork_child(void)
{
    /* The child's queue starts empty: no slot owns a buffer, and a buffer a
     * thread of the parent was filling has no thread here. */
    atomic_store_explicit(&vanished, 0, memory_order_relaxed);
    for (unsigned i = 0; i < UNWIND_DEFER_BUFS; i++) /* written only where set: the other pages stay shared */
        if (atomic_load_explicit(&pool_state[i], memory_order_relaxed) != 0)
            atomic_store_explicit(&pool_state[i], 0, memory_order_relaxed);
}
