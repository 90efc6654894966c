/*
 * sampler/agent/unwind_table.c — the handler's side of the table-driven
 * unwinder (format and reasons: unwind_table.h).
 *
 * SIGNAL-HANDLER CODE: everything here runs in the SIGTRAP handler (or in
 * the writer, on a copy of a stack): no malloc, no locks, no stdio;
 * atomics, reads of the published tables and of the sampled thread's stack
 * (each stack word is checked against the readable mappings first,
 * agent_memmap.c).
 *
 * Per frame: binary search of the module index, binary search of the
 * module's rows, CFA = SP or FP + offset, return address and caller's FP
 * read from CFA + offsets. Nothing is called on that path. When a frame is
 * one the tables cannot do, the whole sample goes to libunwind (the
 * interrupted context is still there to start from), and the reason is
 * counted; when its module's table is only not built yet, the walk is
 * left to the writer with a copy of the stack (unwind_defer.c). Which
 * walker a sample gets, its timing and counts, and the check mode are in
 * unwind_sample.c.
 */
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sampler/agent/unwind_table.h"

struct unwind_index unwind_indexes[2];
_Atomic int unwind_index_current = -1;
_Atomic uint64_t unwind_index_generation;
_Atomic uint64_t unwind_index_removals;
_Atomic int unwind_index_readers[2];
_Atomic int unwind_index_miss;
_Atomic int unwind_build_wanted; /* some module is UNWIND_MOD_WANTED */
_Atomic int unwind_writer_call;
struct unwind_counters unwind_counts;
_Atomic uint64_t unwind_hist[2][UNWIND_HIST_BUCKETS];
uint64_t unwind_tsc0, unwind_ns0;
struct unwind_check_example unwind_examples[UNWIND_MAX_EXAMPLES];

/* Module holding pc in index ix, or NULL. */
static struct unwind_module *find_module(struct unwind_index *ix, uint64_t pc)
{
    size_t lo = 0, hi = ix->count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pc < ix->mod[mid].lo)
            hi = mid;
        else if (pc >= ix->mod[mid].hi)
            lo = mid + 1;
        else
            return &ix->mod[mid];
    }
    return NULL;
}

/* The rule of the last row at or below pc (rules[0], "none", when pc is
 * below the first row or past the module's last function): the bucket of
 * pc's 256 bytes gives the row covering their start, the next bucket's an
 * upper bound. Every index read from the table is clamped: a cached table
 * is mapped from a file whose rows and buckets are not checked on loading
 * (unwind_cache.c), so a damaged one gives a wrong rule, never a read
 * outside the block. [*lo, *hi) gets the PCs the row covers, pc's alone
 * when that is not known (past the last row) or the row does not hold pc
 * (a damaged table). */
static const struct unwind_rule *find_rule(const struct unwind_table *t, uint64_t pc, uint64_t *lo_pc, uint64_t *hi_pc)
{
    uint64_t off = pc - t->base;
    *lo_pc = pc;
    *hi_pc = pc + 1;
    if (pc < t->base || t->nrows == 0 || off < t->pc_off[0])
        return &t->rules[0];
    uint64_t b = off >> UNWIND_BUCKET_SHIFT;
    uint32_t row;
    if (b >= t->nbuckets) {
        row = t->nrows - 1;
    } else {
        /* The row is in [bucket[b], bucket[b + 1]]: binary search there (code
         * that pushes and pops has up to ~30 rows in 256 bytes). */
        uint64_t lo = (uint64_t)t->bucket[b] + 1, hi = b + 1 < t->nbuckets ? (uint64_t)t->bucket[b + 1] + 1 : t->nrows;
        hi = hi < t->nrows ? hi : t->nrows;
        lo = lo < hi ? lo : hi; /* both >= 1: nrows >= 1 here */
        /* The row's rule index is in another array, known to be near
         * rule_of[lo - 1] (32 indices a line): its read starts now, beside
         * the search, instead of after it. Cold, each is a read from memory
         * (~140 ns here): a rule from the tables took 482 ns instead of 509
         * (medians of nine runs each, bench/unwind_replay.sh's cold walks at
         * 16 MB on a PyTorch recording; run to run 452-554 against 458-620). */
        __builtin_prefetch(&t->rule_of[lo - 1]);
        while (lo < hi) { /* first row in [lo, hi) past off */
            uint64_t mid = (lo + hi) / 2;
            if (t->pc_off[mid] <= off)
                lo = mid + 1;
            else
                hi = mid;
        }
        row = (uint32_t)(lo - 1);
    }
    if (row + 1 < t->nrows && t->pc_off[row] <= off && off < t->pc_off[row + 1]) {
        *lo_pc = t->base + t->pc_off[row];
        *hi_pc = t->base + t->pc_off[row + 1];
    }
    uint16_t k = t->rule_of[row];
    return &t->rules[k < t->nrules ? k : 0];
}

bool unwind_pc_at_entry_row(uint64_t pc)
{
    int ix_id = agent_snapshot_enter(&unwind_index_current, unwind_index_readers);
    if (ix_id < 0)
        return false;
    struct unwind_module *m = find_module(&unwind_indexes[ix_id], pc);
    const struct unwind_table *t = m ? atomic_load_explicit(&m->table, memory_order_acquire) : NULL;
    uint64_t lo, hi;
    const struct unwind_rule *r = t ? find_rule(t, pc, &lo, &hi) : NULL;
    bool yes = r && r->cfa_reg == UNWIND_REG_SP && r->at_entry;
    atomic_fetch_sub_explicit(&unwind_index_readers[ix_id], 1, memory_order_release);
    return yes;
}

/* The rule cache's entry for a lookup PC (unwind_table.h). Fibonacci
 * hashing: call sites a few bytes apart land in different entries. */
static inline unsigned rule_cache_slot(uint64_t at)
{
    return (unsigned)((at * 0x9E3779B97F4A7C15ull) >> 54) & (UNWIND_RULE_CACHE - 1);
}

/* The leaf cache's entry for a PC: its 64-byte block, hashed. */
static inline unsigned leaf_cache_slot(uint64_t pc)
{
    return (unsigned)(((pc >> 6) * 0x9E3779B97F4A7C15ull) >> 56) & (UNWIND_LEAF_CACHE - 1);
}

/* The thread's cached rule for a lookup PC (NULL: none), and the entry a
 * table lookup should fill (*ce for a caller, *le for the leaf; NULL
 * without caches). */
static inline const struct unwind_rule *cached_rule(struct unwind_memo_slot *ms, bool leaf, uint64_t at,
                                                    uint32_t generation, struct unwind_rule_cache_entry **ce,
                                                    struct unwind_leaf_cache_entry **le)
{
    *ce = ms && !leaf ? &ms->rules[rule_cache_slot(at)] : NULL;
    *le = ms && leaf ? &ms->leaves[leaf_cache_slot(at)] : NULL;
    const struct unwind_rule_cache_entry *c = *ce;
    const struct unwind_leaf_cache_entry *l = *le;
    if (c && c->at == at && c->generation == generation && c->rule.cfa_reg != UNWIND_REG_NONE)
        return &c->rule;
    if (l && l->lo <= at && at < l->hi && l->generation == generation && l->rule.cfa_reg != UNWIND_REG_NONE)
        return &l->rule;
    return NULL;
}

/* One stack word, when it is known readable. The last readable mapping
 * found is remembered: a walk reads two words per frame, nearly all in the
 * thread's stack, one mapping (remembering a page instead searched the
 * ~1,700 mappings of a PyTorch process again at each of a deep stack's
 * pages). */
struct stack_reader {
    int memmap;              /* agent_memmap table, -1: none */
    uint64_t ok_lo, ok_hi;   /* a readable range, empty: none yet */
    const struct unwind_stack_copy *copy; /* non-NULL: only this copy is read (a deferred walk) */
    uint64_t missed;         /* the last address the snapshot refused (0: none) */
};

static inline __attribute__((always_inline)) bool read_stack_word(struct stack_reader *r, uint64_t addr, uint64_t *out)
{
    if (addr & 7)
        return false; /* the stack slots we read are 8-aligned; anything else is a wrong rule */
    if (r->copy) {
        if (addr < r->copy->sp || addr - r->copy->sp + 8 > r->copy->len)
            return false;
        memcpy(out, r->copy->bytes + (addr - r->copy->sp), 8);
        return true;
    }
    if (addr < r->ok_lo || addr + 8 > r->ok_hi) {
        if (!agent_memmap_readable_range(r->memmap, addr, 8, &r->ok_lo, &r->ok_hi)) {
            r->missed = addr;
            return false;
        }
    }
    *out = *(const uint64_t *)addr;
    return true;
}

/* Wakes the writer now (see unwind_writer_call): one futex wake per call
 * it has not answered yet. errno: the handler restores it. */
void agent_wake_writer(void)
{
    if (atomic_exchange_explicit(&unwind_writer_call, 1, memory_order_release) == 0)
        syscall(SYS_futex, (void *)&unwind_writer_call, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}


/* Asks the writer for this module's table (once). */
static void want_table(struct unwind_module *m)
{
    int expected = UNWIND_MOD_NEW;
    if (!atomic_compare_exchange_strong_explicit(&m->state, &expected, UNWIND_MOD_WANTED, memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    atomic_store_explicit(&unwind_build_wanted, 1, memory_order_release);
    agent_wake_writer();
}

/* Notes a stack word the walk read, for unwind_trace_replays. */
static inline void trace_word(struct unwind_trace *tr, uint64_t addr, uint64_t val)
{
    if (tr->nwords < UNWIND_TRACE_WORDS) {
        tr->addr[tr->nwords] = addr;
        tr->val[tr->nwords] = val;
    }
    tr->nwords++; /* past the array: the trace is not usable (replays says no) */
}

/* Whether the stack word at addr reads want (the memo's check). */
static inline bool stack_word_is(struct stack_reader *rd, uint64_t addr, uint64_t want)
{
    /* The memo's addresses were read once, so they are 8-aligned; most lie
     * in the range the walk's last read found readable (the thread's
     * stack), which one compare pair settles. A copy's reader has no such
     * range (ok_hi 0), so it always takes the full check. */
    if (addr >= rd->ok_lo && addr + 8 <= rd->ok_hi)
        return *(const uint64_t *)addr == want;
    uint64_t v;
    return read_stack_word(rd, addr, &v) && v == want;
}

/* Does the stack still hold, from memo frame i up, what the walk read
 * there? Each frame's return-address word must give the next frame's PC
 * (0 at the last frame: the stack ended on a zero return address), and
 * its saved-FP word, where a CFA above is based on it
 * (UNWIND_MEMO_FP_NEEDED), the next frame's FP. When not, *changed is the
 * frame whose word differs: frames above it may still. */
static bool memo_holds(const struct unwind_memo *mo, unsigned i, struct stack_reader *rd, unsigned *changed)
{
    unsigned last = mo->nframes - 1;
    /* Every frame below the last read its return address (ra_at != 0): the
     * walk went on from it. */
    for (unsigned f = i; f < last; f++) {
        const struct unwind_memo_frame *fr = &mo->f[f];
        if (!stack_word_is(rd, fr->ra_at, fr[1].pc) ||
            ((fr->fp_at & UNWIND_MEMO_FP_NEEDED) && !stack_word_is(rd, fr->fp_at & ~(uint64_t)3, fr[1].fp))) {
            *changed = f;
            return false;
        }
    }
    /* the last frame's saved FP leads nowhere: the walk ended there */
    *changed = last;
    return mo->f[last].ra_at == 0 || stack_word_is(rd, mo->f[last].ra_at, 0);
}

/* At frame j of this walk (state in cur), is there a frame k of the
 * previous walk with the same state whose words all read the same now?
 * Then the rest of this walk would be the previous walk's frames from k on.
 * *k only moves up: both walks go up the stack, SP growing, so each of the
 * memo's frames is looked at once. The state is the walk's whole input
 * besides memory and tables: PC, SP, and FP when it is known (an unknown FP
 * is never used until a frame restores it from memory). Only callers are
 * matched (j, k >= 1): the leaf is looked up at its own PC, a caller at
 * PC - 1. */
static bool memo_meets(const struct unwind_memo *mo, unsigned *k, unsigned *tries,
                       const struct unwind_memo_frame *cur, unsigned j, struct stack_reader *rd, unsigned max)
{
    while (*k < mo->nframes && mo->f[*k].sp < cur->sp)
        (*k)++;
    unsigned i = *k;
    if (i >= mo->nframes)
        return false;
    const struct unwind_memo_frame *fr = &mo->f[i];
    if (fr->sp != cur->sp || fr->pc != cur->pc || (fr->fp_at & 1) != (cur->fp_at & 1) ||
        ((cur->fp_at & 1) && fr->fp != cur->fp))
        return false;
    /* the walk would stop at max frames: only a walk that ends below it is copied */
    if (j + (mo->nframes - i) >= max || j + (mo->nframes - i) > UNWIND_MEMO_FRAMES)
        return false;
    unsigned changed;
    if (!memo_holds(mo, i, rd, &changed)) {
        /* The stack changed above frame i (the same function at the same
         * SP, called from elsewhere): walk on, and meet only above the
         * word that changed, a few times at most. */
        *k = ++*tries < UNWIND_MEMO_HOLD_TRIES ? changed + 1 : mo->nframes;
        return false;
    }
    return true;
}

/* A walk's use of the thread's memo: mo is the previous walk until this
 * walk meets it or gives up meeting it (then mo is rewritten), k walks its
 * frames by SP; this walk's frames wait in the slot's leaf[] (unwind_table.h). */
struct memo_walk {
    struct unwind_memo *mo; /* NULL: no memo, or this walk leaves none */
    struct unwind_memo_frame *leaf;
    unsigned k, tries;
    bool meeting, spliced;
    uint64_t generation;
};

static inline void memo_walk_begin(struct memo_walk *w, struct unwind_memo_slot *ms, unsigned *replayed)
{
    w->mo = ms ? &ms->memo : NULL;
    w->leaf = ms ? ms->leaf : NULL;
    w->k = 1;
    w->tries = 0;
    w->meeting = w->spliced = false;
    w->generation = 0;
    if (w->mo) {
        w->generation = atomic_load_explicit(&unwind_index_removals, memory_order_acquire);
        w->meeting = w->mo->nframes != 0 && w->mo->generation == w->generation;
        *replayed = 0;
    }
}

/* Frame j of the walk (its state pc, sp, fp, fp_known; pcs[j] written):
 * records it and, when the frame meets the memo, appends the memo's frames
 * above it to pcs and sets w->spliced (*n and *replayed updated). Returns
 * the frame's memo entry, for the words the walk reads next (NULL: none). */
static inline struct unwind_memo_frame *memo_walk_frame(struct memo_walk *w, unsigned j, uint64_t pc, uint64_t sp,
                                                        uint64_t fp, bool fp_known, uint64_t *pcs, unsigned *n,
                                                        struct stack_reader *rd, unsigned max, unsigned *replayed)
{
    struct unwind_memo *mo = w->mo;
    if (!mo)
        return NULL;
    if (j >= UNWIND_MEMO_FRAMES) {
        w->mo = NULL; /* too deep to keep: the memo stays the previous walk's */
        return NULL;
    }
    struct unwind_memo_frame *cur = &w->leaf[j];
    *cur = (struct unwind_memo_frame){pc, sp, fp, 0, fp_known ? 1 : 0};
    if (w->meeting && j >= 1 && memo_meets(mo, &w->k, &w->tries, cur, j, rd, max)) {
        /* frames k.. of the memo become frames j.. of this walk */
        unsigned k = w->k, more = mo->nframes - k - 1;
        for (unsigned f = 1; f <= more; f++)
            pcs[j + f] = mo->f[k + f].pc;
        if (j != k)
            memmove(&mo->f[j], &mo->f[k], (more + 1) * sizeof mo->f[0]);
        memcpy(&mo->f[0], w->leaf, j * sizeof w->leaf[0]);
        mo->nframes = j + more + 1;
        *n += more;
        *replayed = more + 1;
        w->spliced = true;
    }
    return cur;
}

/* A complete walk becomes the memo the thread's next walk reads (one
 * finished from the memo already is). A failed or cut walk leaves the memo
 * as it was: it wrote only leaf[]. */
static inline void memo_walk_end(struct memo_walk *w, bool complete, unsigned n)
{
    struct unwind_memo *mo = w->mo;
    if (!mo || w->spliced)
        return;
    if (complete) {
        memcpy(&mo->f[0], w->leaf, n * sizeof w->leaf[0]);
        mo->nframes = n;
        mo->generation = w->generation;
    }
}

/* Keeps the trace's words the result depends on (bit 0 clear). */
static inline void trace_keep_needed(struct unwind_trace *tr)
{
    if (tr->nwords > UNWIND_TRACE_WORDS)
        return; /* overflowed: never replays */
    unsigned k = 0;
    for (unsigned i = 0; i < tr->nwords; i++)
        if (!(tr->addr[i] & 1)) {
            tr->addr[k] = tr->addr[i];
            tr->val[k++] = tr->val[i];
        }
    tr->nwords = k;
}

static inline void count_rule_lookups(unsigned lookups, unsigned cache_hits)
{
    if (lookups)
        atomic_fetch_add_explicit(&unwind_counts.rule_lookups, lookups, memory_order_relaxed);
    if (cache_hits)
        atomic_fetch_add_explicit(&unwind_counts.rule_cache_hits, cache_hits, memory_order_relaxed);
}

/* A rule the caches did not have: from the module's table, filling the
 * caches' slots (ce, le; NULL when off). NULL with *res set when there is
 * none: no module at `at` (the writer is asked to rescan), no table for it,
 * or one not built yet (asked for). *m is the module of the previous miss:
 * callers are mostly in the same module as their callee. */
static inline __attribute__((always_inline)) const struct unwind_rule *
table_rule(struct unwind_index *ix, struct unwind_module **m, uint64_t at, uint32_t ix_generation,
           struct unwind_rule_cache_entry *ce, struct unwind_leaf_cache_entry *le, enum unwind_result *res)
{
    if (*m == NULL || at < (*m)->lo || at >= (*m)->hi)
        *m = find_module(ix, at);
    if (*m == NULL) {
        if (atomic_exchange_explicit(&unwind_index_miss, 1, memory_order_relaxed) == 0)
            agent_wake_writer(); /* a library loaded since the last scan: rescan now */
        *res = UNWIND_FAIL_NO_MODULE;
        return NULL;
    }
    const struct unwind_table *t = atomic_load_explicit(&(*m)->table, memory_order_acquire);
    if (t == NULL) {
        if (atomic_load_explicit(&(*m)->state, memory_order_relaxed) == UNWIND_MOD_NONE) {
            *res = UNWIND_FAIL_NO_TABLE;
        } else {
            want_table(*m);
            *res = UNWIND_FAIL_NOT_BUILT;
        }
        return NULL;
    }
    uint64_t row_lo, row_hi;
    const struct unwind_rule *r = find_rule(t, at, &row_lo, &row_hi);
    if (ce && r->cfa_reg != UNWIND_REG_NONE)
        *ce = (struct unwind_rule_cache_entry){at, *r, ix_generation};
    if (le && r->cfa_reg != UNWIND_REG_NONE)
        *le = (struct unwind_leaf_cache_entry){row_lo, row_hi, *r, ix_generation};
    return r;
}

/* The walk. With a trace (OpenMP opener contexts, not the handler), it also
 * notes every input the result depends on besides the tables: the leaf's
 * PC and SP, the leaf's FP when a rule used it, and each stack word read.
 * The handler's copy is inlined with tr == NULL, so it pays nothing. */
/* A deferred walk (copy non-NULL) starts at a resume point: its first frame
 * is a caller unless the handler stopped at the leaf, and it reads the copy
 * only. rs (non-NULL) gets where a walk that did not finish stopped. */
static inline __attribute__((always_inline)) enum unwind_result
walk(uint64_t pc, uint64_t sp, uint64_t fp, uint64_t *pcs, unsigned max, unsigned *nframes, bool *truncated,
     struct unwind_trace *tr, struct unwind_memo_slot *ms, unsigned *replayed, const struct unwind_resume *from,
     const struct unwind_stack_copy *copy, struct unwind_resume *rs)
{
    enum unwind_result res = UNWIND_OK;
    unsigned n = 0;
    uint64_t fail_addr = 0; /* the read that ended the walk (UNWIND_FAIL_READ), 0: none */
    bool fp_known = from ? from->fp_known : true;
    bool leaf_is_caller = from && from->nframes > 1;
    /* Where fp's value came from: the leaf's register (-1) or a saved-FP
     * word of the trace. A saved FP is mostly a general register's data, so
     * it is kept in the trace only when a rule bases a CFA on it. The same
     * for the memo: the frame whose saved-FP word fp came from (NULL: the
     * leaf's register, or not in the memo). */
    int fp_source = -1;
    struct unwind_memo_frame *fp_source_frame = NULL;
    struct memo_walk mw;
    memo_walk_begin(&mw, unwind_memo_on ? ms : NULL, replayed);
    struct unwind_rule_cache_entry *rc = unwind_rule_cache_on && ms ? ms->rules : NULL;
    unsigned lookups = 0, cache_hits = 0;
    *truncated = false;
    if (tr) {
        tr->leaf_pc = pc;
        tr->leaf_sp = sp;
        tr->leaf_fp = fp;
        tr->leaf_fp_used = false;
        tr->nwords = 0;
        tr->generation = atomic_load_explicit(&unwind_index_generation, memory_order_acquire);
    }
    int ix_id = agent_snapshot_enter(&unwind_index_current, unwind_index_readers);
    struct stack_reader rd = {copy ? -1 : agent_memmap_begin(), 0, 0, copy, 0};
    if (ix_id < 0) { /* before the writer's first module scan: ask for it now */
        if (atomic_exchange_explicit(&unwind_index_miss, 1, memory_order_relaxed) == 0)
            agent_wake_writer();
        res = UNWIND_FAIL_NO_MODULE;
        goto out;
    }
    struct unwind_index *ix = &unwind_indexes[ix_id];
    uint32_t ix_generation = (uint32_t)ix->removals;
    struct unwind_module *m = NULL;
    for (;;) {
        pcs[n++] = pc;
        if (n == max) {
            *truncated = true;
            break;
        }
        struct unwind_memo_frame *cur = memo_walk_frame(&mw, n - 1, pc, sp, fp, fp_known, pcs, &n, &rd, max, replayed);
        if (mw.spliced) {
            /* The memo's frames above may base a CFA on this frame's FP,
             * which came from that frame's saved-FP word (now mo->f at the
             * same index): their own walk could not mark it. */
            if (fp_known && fp_source_frame)
                mw.mo->f[fp_source_frame - mw.leaf].fp_at |= UNWIND_MEMO_FP_NEEDED;
            break;
        }
        /* A return address points after the call; the call itself (pc - 1)
         * is what the caller's row describes. The leaf is the interrupted
         * instruction itself. */
        bool leaf = n == 1 && !leaf_is_caller;
        uint64_t at = leaf ? pc : pc - 1;
        struct unwind_rule_cache_entry *ce;
        struct unwind_leaf_cache_entry *le;
        const struct unwind_rule *r = cached_rule(rc ? ms : NULL, leaf, at, ix_generation, &ce, &le);
        lookups++;
        if (r) {
            cache_hits++;
        } else {
            r = table_rule(ix, &m, at, ix_generation, ce, le, &res);
            if (r == NULL)
                break;
        }
        if (r->cfa_reg == UNWIND_REG_NONE || (r->cfa_reg == UNWIND_REG_FP && !fp_known)) {
            res = UNWIND_FAIL_RULE;
            break;
        }
        if (r->ra_where == UNWIND_UNDEFINED)
            break; /* the outermost frame: the stack ends here */
        if (r->ra_where != UNWIND_AT_CFA) { /* UNWIND_IN_LR: aarch64 only, not loaded on x86-64 */
            res = UNWIND_FAIL_RULE;
            break;
        }
        if (r->cfa_reg == UNWIND_REG_FP && fp_source_frame)
            fp_source_frame->fp_at |= UNWIND_MEMO_FP_NEEDED;
        if (tr && r->cfa_reg == UNWIND_REG_FP) {
            if (fp_source < 0)
                tr->leaf_fp_used = true;
            else if ((unsigned)fp_source < UNWIND_TRACE_WORDS)
                tr->addr[fp_source] &= ~(uint64_t)1; /* needed */
        }
        uint64_t cfa = (r->cfa_reg == UNWIND_REG_FP ? fp : sp) + (uint64_t)(int64_t)r->cfa_off;
        if (r->cfa_reg == UNWIND_REG_SP_PLT && (pc & 15) >= r->plt_push_at)
            cfa += 8; /* past the entry's push */
        uint64_t ra, caller_fp = fp;
        /* The stack grows down: each caller's frame lies above. A CFA at or
         * below SP means a wrong rule (or a corrupt FP): do not follow it.
         * Nor one so near 2^64 (a garbage FP) that CFA + an offset wraps,
         * which read_stack_word's range check would not see. */
        bool bad_cfa = cfa <= sp || cfa > UINT64_MAX - 2 * (uint64_t)INT16_MAX;
        if (bad_cfa || !read_stack_word(&rd, cfa + (uint64_t)(int64_t)r->ra_off, &ra)) {
            res = UNWIND_FAIL_READ;
            fail_addr = bad_cfa ? 0 : cfa + (uint64_t)(int64_t)r->ra_off;
            break;
        }
        if (tr)
            trace_word(tr, cfa + (uint64_t)(int64_t)r->ra_off, ra);
        if (cur)
            cur->ra_at = cfa + (uint64_t)(int64_t)r->ra_off;
        if (r->fp_where == UNWIND_AT_CFA) {
            if (!read_stack_word(&rd, cfa + (uint64_t)(int64_t)r->fp_off, &caller_fp)) {
                res = UNWIND_FAIL_READ;
                fail_addr = cfa + (uint64_t)(int64_t)r->fp_off;
                break;
            }
            if (tr) { /* bit 0 (the slot is 8-aligned): not needed unless a CFA uses it */
                fp_source = (int)tr->nwords;
                trace_word(tr, (cfa + (uint64_t)(int64_t)r->fp_off) | 1, caller_fp);
            }
            if (cur)
                cur->fp_at |= cfa + (uint64_t)(int64_t)r->fp_off;
            fp_source_frame = cur;
            fp_known = true;
        } else if (r->fp_where == UNWIND_UNDEFINED) {
            fp_known = false;
            fp_source_frame = NULL;
        }
        if (ra == 0)
            break; /* a zeroed return address also ends a stack (thread start code) */
        pc = ra;
        sp = cfa;
        fp = caller_fp;
    }
out:
    if (rs && res != UNWIND_OK)
        /* unknown_stack: the read that ended the walk was one the snapshot
         * refused (not a misaligned slot, a CFA not above SP, or a read the
         * memo's check tried earlier) */
        *rs = (struct unwind_resume){pc, sp, fp, fp_known, n, fail_addr != 0 && rd.missed == fail_addr, fail_addr};
    memo_walk_end(&mw, res == UNWIND_OK && !*truncated, n);
    if (ms) /* the handler's walks (the traced ones have no slot) */
        count_rule_lookups(lookups, cache_hits);
    if (tr)
        trace_keep_needed(tr);
    agent_memmap_end(rd.memmap);
    if (ix_id >= 0)
        atomic_fetch_sub_explicit(&unwind_index_readers[ix_id], 1, memory_order_release);
    *nframes = n;
    return res;
}

enum unwind_result unwind_table_walk(uint64_t pc, uint64_t sp, uint64_t fp, uint64_t *pcs, unsigned max,
                                     unsigned *nframes, bool *truncated)
{
    return walk(pc, sp, fp, pcs, max, nframes, truncated, NULL, NULL, NULL, NULL, NULL, NULL);
}

enum unwind_result unwind_table_walk_memo(uint64_t pc, uint64_t sp, uint64_t fp, uint64_t *pcs, unsigned max,
                                          unsigned *nframes, bool *truncated, struct unwind_memo_slot *memo,
                                          unsigned *replayed)
{
    *replayed = 0;
    return walk(pc, sp, fp, pcs, max, nframes, truncated, NULL, memo, replayed, NULL, NULL, NULL);
}

enum unwind_result unwind_table_walk_resumable(uint64_t pc, uint64_t sp, uint64_t fp, uint64_t *pcs, unsigned max,
                                               unsigned *nframes, bool *truncated, struct unwind_memo_slot *memo,
                                               unsigned *replayed, struct unwind_resume *rs)
{
    *replayed = 0;
    return walk(pc, sp, fp, pcs, max, nframes, truncated, NULL, memo, replayed, NULL, NULL, rs);
}

enum unwind_result unwind_table_walk_copy(const struct unwind_resume *rs, const struct unwind_stack_copy *copy,
                                          uint64_t *pcs, unsigned max, unsigned *nframes, bool *truncated)
{
    return walk(rs->pc, rs->sp, rs->fp, pcs, max, nframes, truncated, NULL, NULL, NULL, rs, copy, NULL);
}

enum unwind_result unwind_table_walk_traced(uint64_t pc, uint64_t sp, uint64_t fp, uint64_t *pcs, unsigned max,
                                            unsigned *nframes, bool *truncated, struct unwind_trace *tr)
{
    return walk(pc, sp, fp, pcs, max, nframes, truncated, tr, NULL, NULL, NULL, NULL, NULL);
}

/* The walk is a function of its inputs and the tables: same leaf PC and SP
 * (and FP when it was used), the same words at the same stack addresses,
 * and no module index published since (a module gone and another loaded at
 * its addresses would change the rules) give the same frames. The words
 * lie at or above the leaf SP, normally in this thread's live stack; each
 * is read as the walk reads it (readable mappings only), since a wrong rule
 * may have led the walk elsewhere. */
bool unwind_trace_replays(const struct unwind_trace *tr, uint64_t pc, uint64_t sp, uint64_t fp)
{
    if (tr->nwords > UNWIND_TRACE_WORDS || tr->leaf_pc != pc || tr->leaf_sp != sp ||
        (tr->leaf_fp_used && tr->leaf_fp != fp) ||
        tr->generation != atomic_load_explicit(&unwind_index_generation, memory_order_acquire))
        return false;
    struct stack_reader rd = {agent_memmap_begin(), 0, 0, NULL, 0};
    bool same = true;
    for (unsigned i = 0; i < tr->nwords && same; i++) {
        uint64_t v;
        same = read_stack_word(&rd, tr->addr[i], &v) && v == tr->val[i];
    }
    agent_memmap_end(rd.memmap);
    return same;
}
