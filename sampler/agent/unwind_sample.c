/*
 * sampler/agent/unwind_sample.c — one sample's unwind, from the handler:
 * which walker runs (the tables of unwind_table.c, or libunwind for what
 * they cannot do), its timing into the histograms the overhead line reads,
 * its counts, the check mode that walks every sample both ways
 * (OPPROF_UNWIND_CHECK=1), and each thread's memo slot.
 *
 * SIGNAL-HANDLER CODE: everything here except agent_unwind_init(),
 * unwind_memo_reap() (writer) and agent_unwind_atfork_child() runs in the
 * SIGTRAP handler: no malloc, no locks, no stdio.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h> /* __rdtsc: one instruction, no call */

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "sampler/agent/unwind_table.h"

static bool tables_on = true;
static bool check_on;
bool unwind_memo_on = true;
bool unwind_rule_cache_on = true;
static struct unwind_memo_slot memo_pool[UNWIND_MEMO_SLOTS]; /* bss: a slot's pages are touched by its thread only */
/* Slots below this were ever claimed (claims take the lowest free one): the
 * loops over owners stop here rather than read a word on each of 128 slots'
 * pages (~640 KB), which a fork child did in 0.8-3 ms. */
static _Atomic unsigned memo_slots_used;
static __thread struct unwind_memo_slot *my_memo __attribute__((tls_model("initial-exec")));
static __thread bool my_memo_none __attribute__((tls_model("initial-exec"))); /* the pool was full */

void agent_unwind_init(void)
{
    const char *mode = getenv("OPPROF_UNWIND");
    tables_on = !(mode && strcmp(mode, "libunwind") == 0);
    const char *check = getenv("OPPROF_UNWIND_CHECK");
    check_on = tables_on && check && strcmp(check, "1") == 0;
    const char *memo = getenv("OPPROF_UNWIND_MEMO");
    unwind_memo_on = !(memo && strcmp(memo, "0") == 0);
    const char *rule_cache = getenv("OPPROF_UNWIND_RULE_CACHE");
    unwind_rule_cache_on = !(rule_cache && strcmp(rule_cache, "0") == 0);
    unwind_cache_init();
    agent_unwind_defer_init();
    if (tables_on)
        unwind_defer_prefault(); /* before the timer: a process's first samples defer (no tables yet) */
    /* The calibration's start, read like the writer's pairs: a start read
     * late skews every rate taken from it, and OpenMP event times use that
     * rate in a writer's first 5 ms (agent_omp_clock.c). The first clock
     * read warms the vDSO. */
    (void)agent_now_ns();
    struct agent_clock_pair start = agent_clock_pair_now();
    unwind_tsc0 = start.tsc;
    unwind_ns0 = start.ns;
}

/* 4 buckets per octave of TSC ticks: bucket 4b+s holds [4+s, 5+s) << (b-2). */
static void time_into(int which, uint64_t ticks)
{
    unsigned k = (unsigned)ticks;
    if (ticks >= 4) {
        unsigned b = 63u - (unsigned)__builtin_clzll(ticks);
        k = b * 4 + (unsigned)((ticks >> (b - 2)) & 3);
    }
    atomic_fetch_add_explicit(&unwind_hist[which][k], 1, memory_order_relaxed);
}

bool agent_unwind_tables_on(void)
{
    return tables_on;
}
bool agent_unwind_check_on(void)
{
    return check_on;
}

/*
 * libunwind's unw_backtrace walks CFI from the handler itself, through the
 * kernel's signal frame, into the interrupted code. Its first entries are
 * this handler's own frames and the sigreturn trampoline: drop everything
 * before the interrupted PC. libunwind's dl_iterate_phdr calls are served
 * from a snapshot while we are in here (agent_phdr.c): the real one takes
 * the loader lock, which the interrupted thread may hold.
 */
/* Room for the handler's own frames above the interrupted PC, so that a
 * stack of max frames is not cut short by the frames that are dropped. */
#define LIBUNWIND_HANDLER_FRAMES 16

/* libunwind from here, outside a handler: an OpenMP hook whose stack the
 * tables cannot do yet, or cannot do at all (with LLVM's libomp that was
 * every region of omp_regions_llvm). unw_backtrace, as the handler: its
 * per-thread cache makes a repeated walk cheap (unw_step here made 22
 * sigprocmask calls a region, and the workload 1.6 times slower beside two
 * busy loops). A thread's first call makes that cache, once made by the
 * constructor for the first thread (agent_unwind_warm_up): SIGTRAP is
 * blocked meanwhile, so that no sample's handler on this thread calls
 * libunwind in the middle of it (it would wait in the pthread_once this
 * call is inside). A sample due then arrives when SIGTRAP is unblocked. */
static __thread bool here_warm __attribute__((tls_model("initial-exec")));

unsigned unwind_libunwind_here(uint64_t *pcs, unsigned max)
{
    sigset_t trap, old;
    bool blocked = false;
    if (!here_warm) {
        sigemptyset(&trap);
        sigaddset(&trap, SIGTRAP);
        blocked = pthread_sigmask(SIG_BLOCK, &trap, &old) == 0;
    }
    int n = unw_backtrace((void **)pcs, (int)max);
    if (blocked)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    here_warm = true;
    return n > 0 ? (unsigned)n : 0;
}

unsigned unwind_libunwind_walk(const ucontext_t *uc, uint64_t *pcs, unsigned max, uint16_t *flags)
{
    uint64_t raw[OPR_MAX_FRAMES + LIBUNWIND_HANDLER_FRAMES];
    uint64_t ip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    if (max > OPR_MAX_FRAMES)
        max = OPR_MAX_FRAMES;
    int asked = (int)max + LIBUNWIND_HANDLER_FRAMES;
    agent_phdr_enter_handler();
    int n = unw_backtrace((void **)raw, asked);
    agent_phdr_leave_handler();
    int skip = -1;
    for (int i = 0; i < n && i < LIBUNWIND_HANDLER_FRAMES; i++) {
        if (raw[i] == ip) {
            skip = i;
            break;
        }
    }
    if (skip < 0) {
        pcs[0] = ip;
        *flags |= OPR_SAMPLE_UNWIND_FAILED;
        return 1;
    }
    unsigned kept = (unsigned)(n - skip);
    if (kept > max || n == asked) {
        kept = kept > max ? max : kept;
        *flags |= OPR_SAMPLE_TRUNCATED;
    }
    memcpy(pcs, raw + skip, kept * sizeof pcs[0]);
    return kept;
}

/* Constructor, outside any handler. With the tables off every sample is
 * libunwind's: unw_backtrace is warmed up (its per-thread cache, 256 KB
 * mapped and filled at a thread's first call, and its pthread key). With
 * the tables on, libunwind walks only the samples they cannot (signal
 * frames, DWARF expressions; none in a PyTorch run of 3,490 samples), and
 * that warm-up took 1.1-1.3 ms of every process's start-up (7 % of the CPU
 * of 300 /bin/true runs under record): only libunwind's one-time set-up
 * runs here (tdep_init: a lock taken with signals blocked, and the pipe it
 * validates addresses with, opened now rather than at some sample), and a
 * thread's cache is made at its first fallback, as every thread but the
 * first always made it. */
void agent_unwind_warm_up(void)
{
    if (!tables_on) {
        void *warm[8];
        unw_backtrace(warm, 8);
        return;
    }
    unw_context_t context;
    unw_cursor_t cursor;
    if (unw_getcontext(&context) == 0)
        (void)unw_init_local(&cursor, &context);
}

static void count_fallback(enum unwind_result res)
{
    atomic_fetch_add_explicit(&unwind_counts.fallback_samples, 1, memory_order_relaxed);
    _Atomic uint64_t *c = NULL;
    switch (res) {
    case UNWIND_FAIL_NO_MODULE: c = &unwind_counts.fallback_no_module; break;
    case UNWIND_FAIL_NOT_BUILT: c = &unwind_counts.fallback_not_built; break;
    case UNWIND_FAIL_NO_TABLE: c = &unwind_counts.fallback_no_table; break;
    case UNWIND_FAIL_RULE: c = &unwind_counts.fallback_rule; break;
    case UNWIND_FAIL_READ: c = &unwind_counts.fallback_read; break;
    case UNWIND_OK: break;
    }
    if (c)
        atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* Both ways; the table's stack is the one recorded when it had one. Each
 * walk is timed; the order alternates from sample to sample, since the
 * second walk finds the stack in the cache that the first brought in. */
static __thread unsigned check_turn;

static void count_replay(unsigned replayed)
{
    if (replayed == 0)
        return;
    atomic_fetch_add_explicit(&unwind_counts.replay_samples, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&unwind_counts.replay_frames, replayed, memory_order_relaxed);
}

static unsigned check_both_ways(const ucontext_t *uc, uint64_t *pcs, unsigned max, uint16_t *flags,
                                struct unwind_memo_slot *memo, uint32_t *defer)
{
    struct unwind_resume rs;
    unsigned replayed = 0;
    uint64_t other[OPR_MAX_FRAMES];
    uint16_t other_flags = 0;
    unsigned n = 0, m = 0;
    bool truncated = false;
    enum unwind_result res = UNWIND_OK;
    uint64_t table_ticks = 0, lib_ticks = 0;
    bool tables_first = (check_turn++ & 1) == 0;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t t0 = __rdtsc();
        if ((pass == 0) == tables_first) {
            /* with the memo, as the handler walks: its copies are compared too */
            res = unwind_table_walk_resumable(
                (uint64_t)uc->uc_mcontext.gregs[REG_RIP], (uint64_t)uc->uc_mcontext.gregs[REG_RSP],
                (uint64_t)uc->uc_mcontext.gregs[REG_RBP], pcs, max, &n, &truncated, memo, &replayed, &rs);
            table_ticks = __rdtsc() - t0;
        } else {
            m = unwind_libunwind_walk(uc, other, max < OPR_MAX_FRAMES ? max : OPR_MAX_FRAMES, &other_flags);
            lib_ticks = __rdtsc() - t0;
        }
    }
    if (res == UNWIND_OK) {
        time_into(0, table_ticks);
        time_into(1, lib_ticks);
    }
    atomic_fetch_add_explicit(&unwind_counts.check_samples, 1, memory_order_relaxed);
    if (res != UNWIND_OK) {
        atomic_fetch_add_explicit(&unwind_counts.check_table_failed, 1, memory_order_relaxed);
        count_fallback(res);
        /* The writer finishes the walk and compares it with libunwind's
         * (the part walked here first: a prefix that differs already is
         * kept as the buffer's verdict). */
        if (unwind_defer_wanted(res, &rs)) {
            unsigned walked = rs.nframes > 1 ? rs.nframes - 1 : 0;
            bool same = walked <= m && memcmp(pcs, other, walked * sizeof pcs[0]) == 0;
            *defer = unwind_defer_keep(&rs, same ? UNWIND_DEFER_CHECK : UNWIND_DEFER_CHECK_DIFFERS);
        }
        memcpy(pcs, other, m * sizeof other[0]);
        *flags |= other_flags;
        return m;
    }
    enum unwind_check_verdict v = unwind_check_differs(pcs, n, truncated, other, m, other_flags & OPR_SAMPLE_TRUNCATED);
    if (v == UNWIND_CHECK_AT_ENTRY)
        atomic_fetch_add_explicit(&unwind_counts.check_at_entry, 1, memory_order_relaxed);
    if (v == UNWIND_CHECK_DIFFERS || v == UNWIND_CHECK_DIFFERS_LENGTH)
        atomic_fetch_add_explicit(&unwind_counts.check_disagree, 1, memory_order_relaxed);
    if (v == UNWIND_CHECK_DIFFERS_LENGTH)
        atomic_fetch_add_explicit(&unwind_counts.check_disagree_length, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&unwind_counts.table_samples, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&unwind_counts.table_frames, n, memory_order_relaxed);
    count_replay(replayed);
    if (truncated)
        *flags |= OPR_SAMPLE_TRUNCATED;
    return n;
}

struct unwind_memo_slot *unwind_memo_for(int32_t tid)
{
    if (my_memo || my_memo_none || !(unwind_memo_on || unwind_rule_cache_on) || tid <= 0)
        return my_memo;
    for (unsigned i = 0; i < UNWIND_MEMO_SLOTS; i++) {
        int32_t expected = 0;
        if (atomic_load_explicit(&memo_pool[i].owner, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&memo_pool[i].owner, &expected, tid)) {
            /* a freed slot may hold an exited thread's walk: start empty */
            memo_pool[i].memo.nframes = 0;
            unsigned used = atomic_load_explicit(&memo_slots_used, memory_order_relaxed);
            while (used < i + 1 && !atomic_compare_exchange_weak(&memo_slots_used, &used, i + 1))
                ;
            my_memo = &memo_pool[i];
            return my_memo;
        }
    }
    my_memo_none = true;
    return NULL;
}

/*
 * Writer: the pages of the memo slots that threads claim, and of the next
 * free one, made present and writable before the handlers get to them. A
 * slot is ~43 KB of bss, and its handler reads a rule-cache entry before
 * it fills it: the read maps the kernel's shared zero page and the write
 * that follows faults again to replace it (flushing the TLB of the other
 * CPU with an interrupt when the writer runs there). `perf record -e
 * exceptions:page_fault_user -g` of torch_train.py --steps 60 counted 19-21
 * faults at the walk's rule-cache writes, in the handler; with this, 3.
 * MADV_POPULATE_WRITE (Linux 5.14) faults pages in as a write would
 * without changing what they hold, so it is safe on a slot a thread is
 * using; on an older kernel it fails and the handlers take the faults as
 * before. One free slot is kept backed ahead (44 KB): the main thread's
 * first sample usually comes after the writer's first loop. A fork child
 * keeps the parent's marks: its slots are the parent's pages, shared
 * copy-on-write, and copying two whole slots in each short-lived child cost
 * more writer CPU than its handlers' copies (torch_forks.py: ~0.13 ms a
 * child, four alternating pairs).
 */
#define MEMO_BACKED_AHEAD 1
static uint64_t memo_backed[(UNWIND_MEMO_SLOTS + 63) / 64]; /* writer only: slots populated */
static bool memo_backing_failed;

static void back_memo_slot(unsigned k)
{
    if (agent_populate(&memo_pool[k], sizeof memo_pool[k]) != 0)
        memo_backing_failed = true;
    memo_backed[k / 64] |= 1ull << (k % 64);
}

void agent_unwind_prefault(void)
{
    if (!tables_on || !(unwind_memo_on || unwind_rule_cache_on) || memo_backing_failed)
        return;
    unsigned used = atomic_load_explicit(&memo_slots_used, memory_order_relaxed);
    unsigned free_ahead = 0;
    for (unsigned k = 0; k < UNWIND_MEMO_SLOTS && free_ahead < MEMO_BACKED_AHEAD; k++) {
        bool claimed = k < used && atomic_load_explicit(&memo_pool[k].owner, memory_order_relaxed) > 0;
        if (!claimed)
            free_ahead++;
        if (!(memo_backed[k / 64] & (1ull << (k % 64))))
            back_memo_slot(k);
    }
}

void unwind_memo_reap(void)
{
    pid_t pid = getpid();
    unsigned used = atomic_load(&memo_slots_used);
    for (unsigned i = 0; i < used; i++) {
        int32_t tid = atomic_load_explicit(&memo_pool[i].owner, memory_order_acquire);
        if (tid > 0 && syscall(SYS_tgkill, pid, tid, 0) != 0 && errno == ESRCH)
            atomic_store_explicit(&memo_pool[i].owner, 0, memory_order_release);
    }
}

/*
 * The slow path must leave the thread time to run. A libunwind walk can
 * take longer than a sampling period: 0.35-1.8 ms on a VM whose system
 * calls cost ~1 us (libunwind masks signals at each step), against 250 us
 * at -F 4000. A thread stopped where the tables cannot unwind (ld.so's lazy
 * binding trampoline, whose CFA is on RBX) then met its next sample as the
 * handler returned, at the same PC, and never got out: py_split.py under
 * Python 3.11 hung in 1 of 4-6 runs there (2026-11-29). So a thread falls
 * back again only once it has run, since its last libunwind walk ended, as
 * long as that walk took; until then a sample keeps the frames the tables
 * gave, flagged truncated (the report's "truncated stacks").
 */
static __thread uint64_t my_fallback_end __attribute__((tls_model("initial-exec"))); /* TSC; 0: none yet */
static __thread uint64_t my_fallback_ticks __attribute__((tls_model("initial-exec")));

static bool fallback_starves(uint64_t now)
{
    return my_fallback_end != 0 && now - my_fallback_end < my_fallback_ticks;
}

unsigned agent_unwind_sample(const ucontext_t *uc, uint64_t *pcs, unsigned max, uint16_t *flags, int32_t tid,
                             uint32_t *defer)
{
    *defer = 0;
    if (!tables_on) { /* OPPROF_UNWIND=libunwind: timed as the libunwind path */
        uint64_t t0 = __rdtsc();
        if (fallback_starves(t0)) {
            pcs[0] = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
            *flags |= OPR_SAMPLE_TRUNCATED;
            return 1;
        }
        unsigned n = unwind_libunwind_walk(uc, pcs, max, flags);
        my_fallback_end = __rdtsc();
        my_fallback_ticks = my_fallback_end - t0;
        time_into(1, my_fallback_end - t0);
        return n;
    }
    uint64_t pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    uint64_t sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
    uint64_t fp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP];
    unsigned n;
    bool truncated;
    struct unwind_memo_slot *memo = unwind_memo_for(tid);
    if (check_on)
        return check_both_ways(uc, pcs, max, flags, memo, defer);
    uint64_t t0 = __rdtsc();
    unsigned replayed;
    struct unwind_resume rs;
    enum unwind_result res = unwind_table_walk_resumable(pc, sp, fp, pcs, max, &n, &truncated, memo, &replayed, &rs);
    if (res == UNWIND_OK) {
        time_into(0, __rdtsc() - t0);
        atomic_fetch_add_explicit(&unwind_counts.table_samples, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&unwind_counts.table_frames, n, memory_order_relaxed);
        count_replay(replayed);
        if (truncated)
            *flags |= OPR_SAMPLE_TRUNCATED;
        return n;
    }
    if (unwind_defer_wanted(res, &rs)) {
        /* the writer finishes it once the table is there, or on the copy
         * of a stack the snapshot did not know (unwind_defer.c) */
        *defer = unwind_defer_keep(&rs, UNWIND_DEFER_PLAIN);
        if (*defer) {
            if (n == 0) /* stopped before the leaf: the slot keeps its PC */
                pcs[n++] = pc;
            time_into(0, __rdtsc() - t0);
            return n;
        }
    }
    if (fallback_starves(t0)) {
        /* the frames the tables gave, cut short here (counted as truncated) */
        if (n == 0)
            pcs[n++] = pc;
        *flags |= OPR_SAMPLE_TRUNCATED;
        time_into(0, __rdtsc() - t0);
        return n;
    }
    count_fallback(res);
    uint64_t lib_t0 = __rdtsc();
    n = unwind_libunwind_walk(uc, pcs, max, flags);
    my_fallback_end = __rdtsc();
    my_fallback_ticks = my_fallback_end - lib_t0;
    time_into(1, my_fallback_end - t0);
    return n;
}

/* A fork child has the parent's tables (the address space was copied); only
 * reader counts may be stale, and the counters are the parent's. */
void agent_unwind_atfork_child(void)
{
    /* The parent's threads are not here, and this one has a new tid: every
     * memo is free again (only claimed slots are written: the pool's other
     * pages stay shared with the parent). */
    unsigned used = atomic_load(&memo_slots_used);
    for (unsigned i = 0; i < used; i++)
        if (atomic_load_explicit(&memo_pool[i].owner, memory_order_relaxed) != 0)
            atomic_store_explicit(&memo_pool[i].owner, 0, memory_order_relaxed);
    my_memo = NULL;
    my_memo_none = false;
    my_fallback_end = my_fallback_ticks = 0;
    unwind_build_atfork_child();
    unwind_defer_atfork_child();
    atomic_store(&unwind_index_readers[0], 0);
    atomic_store(&unwind_index_readers[1], 0);
    memset(&unwind_counts, 0, sizeof unwind_counts);
    memset(unwind_hist, 0, sizeof unwind_hist);
    for (unsigned i = 0; i < UNWIND_MAX_EXAMPLES; i++)
        atomic_store(&unwind_examples[i].state, 0);
}
