/*
 * tests/unit/unwind_cfi.c — the agent's CFI compiler and table walk
 * (sampler/agent/unwind_build.c, unwind_table.c) on a hand-made .eh_frame.
 *
 * The fixture below is written byte by byte from the DWARF 5 call frame
 * instructions (section 6.4.2) for a fake code range of 0x100 bytes:
 *   FDE 1 [0x00,0x40): a frame-pointer function with remember/restore_state
 *   FDE 2 [0x40,0x50): a CFA given by a DWARF expression (tables cannot)
 *   FDE 3 [0x50,0x60): the outermost frame (return address undefined)
 *   nothing in [0x60,0x80): a gap
 *   FDE 4 [0x80,0xc0): a lazy PLT as binutils describes it: PLT0, then
 *                      16-byte entries whose CFA is the PLT's expression
 *   FDE 5 [0xc0,0xd0): the same expression with one byte changed.
 * and three function entries "from the dynamic section" (as DT_INIT and
 * DT_FINI): 0x60 and 0x70 in the gap, 0x10 inside FDE 1 (its rule stays).
 * Each row is checked through unwind_table_walk on a fake stack, against the
 * frames the instructions say. Standalone (no CUnit): the agent's sources are
 * linked directly, with the rest of the agent stubbed as in bench/.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <x86intrin.h>

#include "sampler/agent/unwind_table.h"

struct agent_config agent_config;
_Atomic int agent_accepting;
_Atomic uint64_t agent_periods_taken = 1; /* a process that has run: cached tables are read early */
#define FAKE_STACK_WORDS 256
static uint64_t fake_stack[FAKE_STACK_WORDS];
int agent_memmap_begin(void) { return 0; }
void agent_memmap_end(int t) { (void)t; }
bool agent_memmap_readable_range(int t, uint64_t addr, size_t len, uint64_t *lo, uint64_t *hi)
{
    (void)t;
    *lo = (uint64_t)(uintptr_t)fake_stack, *hi = (uint64_t)(uintptr_t)(fake_stack + FAKE_STACK_WORDS);
    return addr >= *lo && addr + len <= *hi;
}
void agent_memmap_maybe_refresh(void) {}
void agent_phdr_enter_handler(void) {}
void agent_phdr_leave_handler(void) {}
uint64_t agent_now_ns(void) { return 0; }
struct agent_clock_pair agent_clock_pair_now(void)
{
    return (struct agent_clock_pair){0, 0};
}
bool agent_is_writer_thread(void) { return false; } /* a deferred walk builds nothing here */
uint64_t agent_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return agent_timespec_ns(&ts);
}

#include "tests/unit/check.h"

static uint8_t image[1024] __attribute__((aligned(16))); /* hdr, then .eh_frame */
static uint8_t code[0x200] __attribute__((aligned(16))); /* PLT entries: PC & 15 is the offset in one */
static size_t at;

static void put(const void *b, size_t n) { memcpy(image + at, b, n), at += n; }
static void put8(uint8_t v) { put(&v, 1); }
static void put32(uint32_t v) { put(&v, 4); }
static void put_pcrel(const void *target) /* sdata4, relative to where it is stored */
{
    put32((uint32_t)(int32_t)((intptr_t)target - (intptr_t)(image + at)));
}

/* One CIE/FDE: length, then body bytes (padded with DW_CFA_nop to 4). */
static size_t begin_entry(void)
{
    size_t len_at = at;
    put32(0);
    return len_at;
}
static void end_entry(size_t len_at)
{
    while ((at - len_at) % 4)
        put8(0); /* DW_CFA_nop */
    uint32_t len = (uint32_t)(at - len_at - 4);
    memcpy(image + len_at, &len, 4);
}

static size_t cie_at;
static void fde(uint32_t begin, uint32_t range, const uint8_t *insns, size_t n)
{
    size_t e = begin_entry();
    put32((uint32_t)(at - cie_at)); /* CIE pointer: back from this field */
    put_pcrel(code + begin);
    put32(range);
    put8(0); /* augmentation data length ('z') */
    put(insns, n);
    end_entry(e);
}

static void build_fixture(void)
{
    /* .eh_frame_hdr: version 1, eh_frame_ptr pcrel|sdata4, no table */
    put8(1), put8(0x1b), put8(0xff), put8(0xff);
    put_pcrel(image + 8);
    /* CIE: "zR", code align 1, data align -8, RA column 16, FDE pointers
     * pcrel|sdata4; CFA = RSP + 8, RA at CFA - 8 */
    cie_at = begin_entry();
    put32(0), put8(1), put("zR", 3), put8(1), put8(0x78), put8(16), put8(1), put8(0x1b);
    put8(0x0c), put8(7), put8(8); /* DW_CFA_def_cfa rsp, 8 */
    put8(0x90), put8(1);          /* DW_CFA_offset r16, 1 x -8 */
    end_entry(cie_at);
    static const uint8_t f1[] = {
        0x41,             /* advance 1: push rbp */
        0x0e, 16,         /* def_cfa_offset 16 */
        0x86, 2,          /* offset rbp at CFA-16 */
        0x43,             /* advance 3: mov rbp, rsp */
        0x0d, 6,          /* def_cfa_register rbp */
        0x02, 32,         /* advance_loc1 32 (to 0x24) */
        0x0a,             /* remember_state */
        0x0c, 7, 8,       /* def_cfa rsp, 8 (an epilogue) */
        0x41,             /* advance 1 (to 0x25) */
        0x0b,             /* restore_state: rbp + 16 again */
    };
    fde(0x00, 0x40, f1, sizeof f1);
    static const uint8_t f2[] = {0x0f, 2, 0x77, 8}; /* def_cfa_expression {DW_OP_breg7 8} */
    fde(0x40, 0x10, f2, sizeof f2);
    static const uint8_t f3[] = {0x07, 16}; /* undefined r16: no caller */
    fde(0x50, 0x10, f3, sizeof f3);
    /* PLT0's push and jmp, then from 0x90 CFA = RSP + 8 + ((RIP & 15) >= 11) * 8:
     * breg7 8; breg16 0; lit15; and; lit11; ge; lit3; shl; plus */
    static const uint8_t f4[] = {0x0e, 16, 0x46, 0x0e, 24, 0x4a, 0x0f, 11, 0x77, 8, 0x80, 0,
                                 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
    fde(0x80, 0x40, f4, sizeof f4);
    static const uint8_t f5[] = {0x0f, 11, 0x77, 8, 0x80, 0, 0x3e /* lit14 */, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
    fde(0xc0, 0x10, f5, sizeof f5);
    /* A leaf past the first 256 bytes (CIE rule only): a second bucket. */
    static const uint8_t f6[] = {0x00}; /* DW_CFA_nop */
    fde(0x100, 0x10, f6, sizeof f6);
    put32(0); /* terminator */
}

/* A walk's frames against the ones expected. */
static void check_frames(const char *what, const uint64_t *pcs, unsigned n, unsigned want_n, const uint64_t *want_pcs)
{
    CHECK(n == want_n, "%s: %u frames, expected %u", what, n, want_n);
    for (unsigned i = 0; i < n && i < want_n; i++)
        CHECK(pcs[i] == want_pcs[i], "%s: frame %u is code+0x%llx, expected code+0x%llx", what, i,
              (unsigned long long)(pcs[i] - (uint64_t)(uintptr_t)code),
              (unsigned long long)(want_pcs[i] - (uint64_t)(uintptr_t)code));
}

/* Walks from pc/sp/fp; checks the result and the frames. */
static void walk(const char *what, uint64_t pc, uint64_t sp, uint64_t fp, enum unwind_result want,
                 unsigned want_n, const uint64_t *want_pcs)
{
    uint64_t pcs[16];
    unsigned n = 0;
    bool truncated;
    enum unwind_result r = unwind_table_walk(pc, sp, fp, pcs, 16, &n, &truncated);
    CHECK(r == want, "%s: result %d, expected %d", what, r, want);
    check_frames(what, pcs, n, want_n, want_pcs);
}

/* unwind_trace_replays (OpenMP contexts repeated without a walk): a walk's
 * trace replays exactly while every input its frames depend on is the same,
 * and never once one of them changed. The "rbp frame" stack is set up. */
static void check_replay(uint64_t c, uint64_t s, uint64_t outer)
{
    static struct unwind_trace tr;
    uint64_t pcs[16];
    unsigned n;
    bool truncated;
    enum unwind_result r = unwind_table_walk_traced(c + 0x10, s, s + 8 * 8, pcs, 16, &n, &truncated, &tr);
    CHECK(r == UNWIND_OK && n == 3 && pcs[2] == outer, "traced walk: result %d, %u frames", r, n);
    CHECK(tr.leaf_fp_used, "the leaf row is RBP-based: the leaf FP must be part of the trace");
    CHECK(unwind_trace_replays(&tr, c + 0x10, s, s + 8 * 8), "unchanged stack does not replay");
    CHECK(!unwind_trace_replays(&tr, c + 0x11, s, s + 8 * 8), "another leaf PC replays");
    CHECK(!unwind_trace_replays(&tr, c + 0x10, s + 8, s + 8 * 8), "another leaf SP replays");
    CHECK(!unwind_trace_replays(&tr, c + 0x10, s, s + 9 * 8), "another leaf FP replays (a CFA is based on it)");
    fake_stack[17] = outer + 1; /* the outermost return address */
    CHECK(!unwind_trace_replays(&tr, c + 0x10, s, s + 8 * 8), "a changed return address replays");
    fake_stack[17] = outer;
    fake_stack[8] = s + 18 * 8; /* the saved RBP the second frame's CFA is based on */
    CHECK(!unwind_trace_replays(&tr, c + 0x10, s, s + 8 * 8), "a changed saved FP that a CFA uses replays");
    fake_stack[8] = s + 16 * 8;
    atomic_fetch_add(&unwind_index_generation, 1); /* a module index published since */
    CHECK(!unwind_trace_replays(&tr, c + 0x10, s, s + 8 * 8), "a walk from before a module change replays");
    /* 0x02 (after push rbp, CFA = RSP + 16): the saved RBP at RSP is read
     * but no CFA uses it, and the leaf's FP is unused: neither may stop a
     * replay (they hold a general register's data in optimized code). */
    uint64_t saved[2] = {fake_stack[0], fake_stack[1]};
    fake_stack[0] = 0x1234;
    fake_stack[1] = outer;
    r = unwind_table_walk_traced(c + 0x02, s, 77, pcs, 16, &n, &truncated, &tr);
    CHECK(r == UNWIND_OK && n == 2 && !tr.leaf_fp_used && tr.nwords == 1, "SP-based walk: result %d, %u frames, "
          "fp used %d, %u words kept (expected the return address only)", r, n, tr.leaf_fp_used, tr.nwords);
    fake_stack[0] = 0x5678;
    CHECK(unwind_trace_replays(&tr, c + 0x02, s, 99), "an unused saved FP or leaf FP stopped a replay");
    fake_stack[1] = outer + 1;
    CHECK(!unwind_trace_replays(&tr, c + 0x02, s, 99), "a changed return address replays (SP-based)");
    fake_stack[0] = saved[0], fake_stack[1] = saved[1];
}

/* One walk with the memo (at most max frames, <= 64); checks frames and how
 * many came from the memo. */
static void walk_memo_max(const char *what, struct unwind_memo_slot *ms, uint64_t pc, uint64_t sp, uint64_t fp,
                          unsigned max, unsigned want_replayed, unsigned want_n, const uint64_t *want_pcs)
{
    uint64_t pcs[64];
    unsigned n = 0, replayed = 99;
    bool truncated;
    enum unwind_result r = unwind_table_walk_memo(pc, sp, fp, pcs, max, &n, &truncated, ms, &replayed);
    CHECK(r == UNWIND_OK, "%s: result %d", what, r);
    CHECK(replayed == want_replayed, "%s: %u frames from the memo, expected %u", what, replayed, want_replayed);
    check_frames(what, pcs, n, want_n, want_pcs);
}

static void walk_memo(const char *what, struct unwind_memo_slot *ms, uint64_t pc, uint64_t sp, uint64_t fp,
                      unsigned want_replayed, unsigned want_n, const uint64_t *want_pcs)
{
    walk_memo_max(what, ms, pc, sp, fp, 16, want_replayed, want_n, want_pcs);
}

/* The handler's memo (unwind_table_walk_memo): a walk finishes from the
 * previous walk of the thread only at a caller frame in the same state
 * whose words above still read the same, and gives the frames a full walk
 * gives, whatever the depth at which the two walks meet. A chain of three
 * RBP frames (rows of FDE 1) under an outermost one: */
static void check_memo(uint64_t c, uint64_t s, uint64_t outer)
{
    static struct unwind_memo_slot ms;
    memset(fake_stack, 0, sizeof fake_stack);
    fake_stack[8] = s + 16 * 8, fake_stack[9] = c + 0x06;   /* leaf's frame: saved RBP, RA */
    fake_stack[16] = s + 24 * 8, fake_stack[17] = c + 0x06; /* frame 1's */
    fake_stack[25] = outer;                                 /* frame 2's RA: the outermost */
    const uint64_t deep[] = {c + 0x10, c + 0x06, c + 0x06, outer};
    walk_memo("first walk", &ms, c + 0x10, s, s + 8 * 8, 0, 4, deep);
    walk_memo("same stack", &ms, c + 0x10, s, s + 8 * 8, 3, 4, deep);
    /* frame 2's saved RBP: read, but the outermost frame's rule bases no
     * CFA on it (optimized code keeps data in RBP): still replayed */
    fake_stack[24] = 0x5555;
    walk_memo("a saved FP no CFA uses changed", &ms, c + 0x10, s, s + 8 * 8, 3, 4, deep);
    fake_stack[24] = 0;
    /* another leaf (after push rbp, CFA = RSP + 16) under the same caller:
     * its FP register is unknown data, the caller's comes from memory */
    walk_memo("other leaf, same callers", &ms, c + 0x02, s + 8 * 8, 77, 3, 4,
              (uint64_t[]){c + 0x02, c + 0x06, c + 0x06, outer});
    /* a return address above the meeting point changed: walked in full */
    fake_stack[25] = outer + 1;
    walk_memo("changed return address", &ms, c + 0x10, s, s + 8 * 8, 0, 4,
              (uint64_t[]){c + 0x10, c + 0x06, c + 0x06, outer + 1});
    fake_stack[25] = outer;
    walk_memo("walked again", &ms, c + 0x10, s, s + 8 * 8, 0, 4, deep);
    /* a saved RBP above changed (the frames' CFAs are based on it) */
    fake_stack[16] = s + 26 * 8;
    fake_stack[27] = c + 0x55;
    walk_memo("changed saved FP", &ms, c + 0x10, s, s + 8 * 8, 0, 4,
              (uint64_t[]){c + 0x10, c + 0x06, c + 0x06, c + 0x55});
    fake_stack[16] = s + 24 * 8;
    walk_memo("walked again (2)", &ms, c + 0x10, s, s + 8 * 8, 0, 4, deep);
    /* a module index published since, with a module more: replayed */
    atomic_fetch_add(&unwind_index_generation, 1);
    walk_memo("module index with a module more", &ms, c + 0x10, s, s + 8 * 8, 3, 4, deep);
    /* one without a module of the index before: no replay */
    atomic_fetch_add(&unwind_index_removals, 1);
    walk_memo("module index with a module gone", &ms, c + 0x10, s, s + 8 * 8, 0, 4, deep);
    /* a shallower leaf whose caller is the previous walk's frame 2: the
     * walks meet at frames 1 and 2 */
    walk_memo("shallower leaf", &ms, c + 0x02, s + 16 * 8, 77, 2, 3, (uint64_t[]){c + 0x02, c + 0x06, outer});
    /* and back: frame 2 of this walk meets frame 1 of that spliced memo */
    walk_memo("deeper again", &ms, c + 0x10, s, s + 8 * 8, 2, 4, deep);
    walk_memo("deeper again, same", &ms, c + 0x10, s, s + 8 * 8, 3, 4, deep);
    /* a failed walk leaves the memo as it was */
    uint64_t pcs[16];
    unsigned n, replayed;
    bool truncated;
    enum unwind_result r = unwind_table_walk_memo(c + 0x10, s + 8, s - 4096, pcs, 16, &n, &truncated, &ms, &replayed);
    CHECK(r == UNWIND_FAIL_READ && replayed == 0, "failing walk: result %d, %u from the memo", r, replayed);
    walk_memo("after a failure", &ms, c + 0x10, s, s + 8 * 8, 3, 4, deep);
}

/* The memo met deep in the stack: a PyTorch walk's first ~20 frames (BLAS,
 * ATen, the dispatcher) change from sample to sample while the ~25 above do
 * not. Chain A: DEEP_N RBP frames 4 words apart (saved RBP, RA at each
 * frame's RBP); chain B: K frames 2 words off A's, its frame K-1 saving
 * A's frame K's RBP, so that B's frame K+1 is A's frame K+1 in state (PC,
 * SP, FP): the walks meet there, past the first 16 frames. Then a return
 * address in the middle of A changes to another PC of the same rule: the
 * walk meets A's memo at frame 1, its words do not hold above that RA, and
 * it meets again two frames up, above the change. */
#define DEEP_N 30
#define DEEP_K 20
static void check_memo_deep(uint64_t c, uint64_t s, uint64_t outer)
{
    static struct unwind_memo_slot ms;
    memset(fake_stack, 0, sizeof fake_stack);
    uint64_t want[DEEP_N];
    want[0] = c + 0x10;
    for (unsigned i = 0; i + 1 < DEEP_N; i++) {
        fake_stack[4 * i] = s + 8 * 4 * (i + 1);                       /* A's frame i: the caller's RBP */
        fake_stack[4 * i + 1] = i + 2 < DEEP_N ? c + 0x06 : outer;      /* and its return address */
        want[i + 1] = fake_stack[4 * i + 1];
    }
    for (unsigned i = 0; i < DEEP_K; i++) {
        fake_stack[4 * i + 2] = i + 1 < DEEP_K ? s + 8 * (4 * (i + 1) + 2) : s + 8 * 4 * DEEP_K; /* B's */
        fake_stack[4 * i + 3] = c + 0x06;
    }
    walk_memo_max("deep: chain A", &ms, c + 0x10, s, s, 64, 0, DEEP_N, want);
    walk_memo_max("deep: chain B meets A at frame 21", &ms, c + 0x10, s + 16, s + 16, 64, DEEP_N - (DEEP_K + 1),
                  DEEP_N, want);
    /* B's frame K took its FP from A's frame K's saved RBP, and the CFAs
     * based on that FP are above where B met A's memo: B's own walk saw no
     * CFA use it, yet the memo must check that word. Changed to skip a
     * frame (A's K + 2), B walks on below it and meets the memo above. */
    fake_stack[4 * DEEP_K] = s + 8 * 4 * (DEEP_K + 2);
    uint64_t skipped[DEEP_N - 1];
    for (unsigned i = 0, j = 0; i < DEEP_N; i++)
        if (i != DEEP_K + 2)
            skipped[j++] = want[i];
    walk_memo_max("deep: chain B, a saved FP below the meeting point changed", &ms, c + 0x10, s + 16, s + 16, 64,
                  DEEP_N - (DEEP_K + 3), DEEP_N - 1, skipped);
    fake_stack[4 * DEEP_K] = s + 8 * 4 * (DEEP_K + 1);
    walk_memo_max("deep: chain B, that FP as before", &ms, c + 0x10, s + 16, s + 16, 64, DEEP_N - (DEEP_K + 3), DEEP_N,
                  want);
    walk_memo_max("deep: chain A meets B's memo", &ms, c + 0x10, s, s, 64, DEEP_N - (DEEP_K + 1), DEEP_N, want);
    walk_memo_max("deep: chain A again, all from the memo", &ms, c + 0x10, s, s, 64, DEEP_N - 1, DEEP_N, want);
    /* frame 6's return address: another PC of the same rule */
    const unsigned m = 5;
    fake_stack[4 * m + 1] = c + 0x08;
    want[m + 1] = c + 0x08;
    walk_memo_max("deep: changed RA, met again above it", &ms, c + 0x10, s, s, 64, DEEP_N - (m + 2), DEEP_N, want);
    walk_memo_max("deep: same again", &ms, c + 0x10, s, s, 64, DEEP_N - 1, DEEP_N, want);
}

/* The thread's rule cache (unwind_table.h): a walk with a slot leaves the
 * rules it looked up, the next walk uses them (a poisoned entry shows it),
 * also after a library loaded since, and a walk after a module went does not. */
static void check_rule_cache(uint64_t c, uint64_t s, uint64_t outer)
{
    static struct unwind_memo_slot ms;
    memset(fake_stack, 0, sizeof fake_stack);
    fake_stack[8] = s + 16 * 8, fake_stack[9] = c + 0x06;
    fake_stack[16] = s + 24 * 8, fake_stack[17] = c + 0x06;
    fake_stack[25] = outer;
    const uint64_t deep[] = {c + 0x10, c + 0x06, c + 0x06, outer};
    walk_memo("rule cache: first walk", &ms, c + 0x10, s, s + 8 * 8, 0, 4, deep);
    unsigned filled = 0, leaves = 0;
    struct unwind_leaf_cache_entry *leaf = NULL;
    for (unsigned i = 0; i < UNWIND_RULE_CACHE; i++)
        if (ms.rules[i].rule.cfa_reg != UNWIND_REG_NONE)
            filled++;
    for (unsigned i = 0; i < UNWIND_LEAF_CACHE; i++) {
        if (ms.leaves[i].rule.cfa_reg != UNWIND_REG_NONE)
            leaves++;
        if (ms.leaves[i].lo <= c + 0x10 && c + 0x10 < ms.leaves[i].hi)
            leaf = &ms.leaves[i];
    }
    /* both callers at 0x05 (two lookups of one PC) and the outermost
     * frame's rule ("no caller") by PC; the leaf at 0x10 by its row's range */
    CHECK(filled == 2 && leaves == 1 && leaf != NULL && leaf->lo == c + 0x04 && leaf->hi == c + 0x24,
          "rule cache: %u caller entries, %u leaf entries, leaf's row %s (expected 2, 1 and [0x04, 0x24): after "
          "mov rbp, rsp up to the epilogue)",
          filled, leaves, leaf ? "found" : "missing");
    if (!leaf)
        return;
    /* A wrong rule in the leaf's entry: CFA = RBP + 32 reads fake_stack[11]
     * as the return address (0: the stack ends there, one frame). */
    leaf->rule.cfa_off += 16;
    ms.memo.nframes = 0; /* no replay: every frame looked up */
    walk_memo("rule cache: poisoned entry used", &ms, c + 0x10, s, s + 8 * 8, 0, 1, deep);
    /* and at another PC of the leaf's row */
    ms.memo.nframes = 0;
    walk_memo("rule cache: poisoned row used at another PC of the row", &ms, c + 0x0f, s, s + 8 * 8, 0, 1,
              (uint64_t[]){c + 0x0f});
    /* still used under an index published since with no module gone (a
     * library loaded since: its rules are for code that had none) */
    ms.memo.nframes = 0;
    unwind_indexes[0].generation++;
    walk_memo("rule cache: entry kept across an index with a module more", &ms, c + 0x10, s, s + 8 * 8, 0, 1, deep);
    /* not under an index with a module gone (or changed) since */
    ms.memo.nframes = 0;
    unwind_indexes[0].removals++;
    walk_memo("rule cache: entry of an index before a removal ignored", &ms, c + 0x10, s, s + 8 * 8, 0, 4, deep);
    CHECK(leaf->rule.cfa_off == 16 && leaf->generation == (uint32_t)unwind_indexes[0].removals,
          "rule cache: the entry was not refilled from the table (cfa_off %d)", leaf->rule.cfa_off);
}

/* The handler's slow path (agent_unwind_sample, unwind_sample.c): a walk
 * the tables cannot do goes to libunwind, but not again before the thread
 * has run as long as that walk took; meanwhile a sample keeps the tables'
 * frames, flagged truncated. At 0x45 (a DWARF expression) on a fake
 * context: libunwind walks this test's real stack, where the fake PC is
 * not, so it says "unwind failed". */
static void check_fallback_guard(uint64_t c, uint64_t s)
{
    ucontext_t uc;
    memset(&uc, 0, sizeof uc);
    uc.uc_mcontext.gregs[REG_RIP] = (greg_t)(c + 0x45);
    uc.uc_mcontext.gregs[REG_RSP] = (greg_t)s;
    uint64_t pcs[64];
    uint32_t defer;
    uint16_t flags[3] = {0, 0, 0};
    uint64_t fallbacks[3], first_began = 0, first_ended = 0;
    unsigned n[3];
    for (int i = 0; i < 3; i++) {
        /* the third once the thread has run past twice the first call's
         * time (a loaded machine may stretch that walk by a time slice) */
        while (i == 2 && __rdtsc() - first_ended < 2 * (first_ended - first_began))
            usleep(1000);
        uint64_t began = __rdtsc();
        n[i] = agent_unwind_sample(&uc, pcs, 64, &flags[i], 0, &defer);
        if (i == 0)
            first_began = began, first_ended = __rdtsc();
        fallbacks[i] = atomic_load(&unwind_counts.fallback_samples);
    }
    CHECK((flags[0] & OPR_SAMPLE_UNWIND_FAILED) && !(flags[0] & OPR_SAMPLE_TRUNCATED),
          "fallback guard: the first sample did not go to libunwind (flags %#x)", flags[0]);
    CHECK(flags[1] == OPR_SAMPLE_TRUNCATED && n[1] == 1 && pcs[0] == c + 0x45 && fallbacks[1] == fallbacks[0],
          "fallback guard: a sample right after a libunwind walk went to libunwind too, or was not kept truncated "
          "(flags %#x, %u frames)",
          flags[1], n[1]);
    CHECK((flags[2] & OPR_SAMPLE_UNWIND_FAILED) && fallbacks[2] == fallbacks[1] + 1,
          "fallback guard: a sample after the thread ran twice as long did not go to libunwind (flags %#x)", flags[2]);
}

int check_cache_files(int cd, const char *dir, struct unwind_table *t, uint64_t c, uint64_t s);

/* The cache (unwind_cache.c): a stored table maps back with the same bytes
 * and walks as the built one; then the files a load sets the time of,
 * maps though damaged, or refuses (tests/unit/unwind_cache_files.c). */
static void check_cache(struct unwind_table *t, uint64_t c, uint64_t s, uint64_t outer)
{
    char dir[] = "/tmp/unwind_cfi.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "cache: mkdtemp failed");
    setenv("OPPROF_UNWIND_CACHE", dir, 1);
    unwind_cache_init();
    struct unwind_module *m = &unwind_indexes[0].mod[0];
    unwind_cache_store("t.t3", t);
    int cd = unwind_cache_open();
    CHECK(cd >= 0, "cache: the directory %s does not open as the cache", dir);
    struct unwind_table *mapped = unwind_cache_load(cd, "t.t3", t->base);
    CHECK(mapped && mapped->nrows == t->nrows && mapped->nrules == t->nrules && mapped->nbuckets == t->nbuckets &&
              mapped->map_bytes == t->map_bytes && memcmp(mapped->pc_off, t->pc_off, t->map_bytes - sizeof *t) == 0,
          "cache: the table read back differs from the one stored");
    memset(fake_stack, 0, sizeof fake_stack);
    fake_stack[8] = s + 16 * 8, fake_stack[9] = c + 0x06, fake_stack[17] = outer;
    if (mapped) {
        atomic_store(&m->table, mapped);
        walk("cache: rbp frame, mapped table", c + 0x10, s, s + 8 * 8, UNWIND_OK, 3,
             (uint64_t[]){c + 0x10, c + 0x06, outer});
        unwind_table_free(mapped);
    }
    failures += check_cache_files(cd, dir, t, c, s);
    if (cd >= 0)
        close(cd);
    rmdir(dir);
}

/* Deferred walks (unwind_defer.c): the handler stops at a module whose
 * table is not built and keeps a copy of the stack; the walk finished on
 * the copy gives the live stack's frames even after the stack changed,
 * resumes at a caller frame as a caller (PC - 1), stops where the copy
 * ends, is cut (flagged) when the table is still missing, and check mode
 * counts a finished walk that differs from libunwind's stack. The "rbp
 * frame" stack: leaf at 0x10, caller at 0x06 (CFA s + 80), then outer. */
static void check_deferred(struct unwind_module *m, uint64_t c, uint64_t s, uint64_t outer)
{
    memset(fake_stack, 0, sizeof fake_stack);
    fake_stack[8] = s + 16 * 8, fake_stack[9] = c + 0x06;
    fake_stack[17] = outer;
    const uint64_t whole[] = {c + 0x10, c + 0x06, outer};
    struct unwind_table *t = atomic_load(&m->table);
    atomic_store(&m->table, NULL);
    atomic_store(&m->state, UNWIND_MOD_NEW);
    uint64_t pcs[16];
    unsigned n = 0, replayed;
    bool truncated;
    struct unwind_resume rs;
    enum unwind_result r = unwind_table_walk_resumable(c + 0x10, s, s + 8 * 8, pcs, 16, &n, &truncated, NULL,
                                                       &replayed, &rs);
    CHECK(r == UNWIND_FAIL_NOT_BUILT && n == 1 && rs.nframes == 1 && rs.pc == c + 0x10 && rs.sp == s,
          "deferred: walk without the table: result %d, %u frames, resume at frame %u", r, n, rs.nframes);
    CHECK(atomic_load(&m->state) == UNWIND_MOD_WANTED, "deferred: the stopped walk did not ask for the table");
    /* kept while the table is missing, finished after it is built, with
     * the live stack overwritten in between */
    uint32_t id = unwind_defer_keep(&rs, UNWIND_DEFER_PLAIN);
    uint32_t cut_id = unwind_defer_keep(&rs, UNWIND_DEFER_PLAIN);
    CHECK(id != 0 && cut_id != 0 && id != cut_id, "deferred: buffers %u and %u", id, cut_id);
    uint64_t finished_before = atomic_load(&unwind_counts.deferred_finished);
    uint64_t cut_before = atomic_load(&unwind_counts.deferred_cut);
    uint64_t out[16];
    uint16_t flags = 0;
    n = unwind_defer_finish(cut_id, pcs, 1, out, 16, &flags); /* the table is still missing */
    CHECK(n == 1 && out[0] == c + 0x10 && (flags & OPR_SAMPLE_TRUNCATED) &&
          atomic_load(&unwind_counts.deferred_cut) == cut_before + 1,
          "deferred: finished without the table: %u frames, flags %u", n, flags);
    atomic_store(&m->table, t);
    atomic_store(&m->state, UNWIND_MOD_BUILT);
    uint64_t live[64];
    memcpy(live, fake_stack, sizeof live);
    memset(fake_stack, 0, sizeof fake_stack);
    flags = 0;
    n = unwind_defer_finish(id, pcs, 1, out, 16, &flags);
    check_frames("deferred: finished on the copy", out, n, 3, whole);
    CHECK(flags == 0 && atomic_load(&unwind_counts.deferred_finished) == finished_before + 1,
          "deferred: flags %u, finished count", flags);
    /* a resume point at the caller frame: looked up as a caller */
    struct unwind_stack_copy copy = {s, sizeof live, (const uint8_t *)live};
    struct unwind_resume caller = {c + 0x06, s + 80, s + 16 * 8, true, 2, false, 0};
    r = unwind_table_walk_copy(&caller, &copy, out, 16, &n, &truncated);
    CHECK(r == UNWIND_OK, "deferred: from the caller frame: result %d", r);
    check_frames("deferred: from the caller frame", out, n, 2, whole + 1);
    /* at a row's first byte (0x01, CFA = RSP + 16) a caller is looked up
     * one byte before (0x00, CFA = RSP + 8): the return address it reads
     * ends the walk at outer, the leaf's reading (0) at once */
    uint64_t row_edge[2] = {outer, 0};
    struct unwind_stack_copy edge = {s, sizeof row_edge, (const uint8_t *)row_edge};
    struct unwind_resume at_edge = {c + 0x01, s, 0, true, 2, false, 0};
    r = unwind_table_walk_copy(&at_edge, &edge, out, 16, &n, &truncated);
    CHECK(r == UNWIND_OK && n == 2 && out[1] == outer, "deferred: caller at a row's start: result %d, %u frames",
          r, n);
    at_edge.nframes = 1; /* the leaf itself */
    r = unwind_table_walk_copy(&at_edge, &edge, out, 16, &n, &truncated);
    CHECK(r == UNWIND_OK && n == 1, "deferred: leaf at a row's start: result %d, %u frames", r, n);
    /* a copy that ends below the caller's saved words */
    copy.len = 80;
    r = unwind_table_walk_copy(&rs, &copy, out, 16, &n, &truncated);
    CHECK(r == UNWIND_FAIL_READ && n == 2, "deferred: short copy: result %d, %u frames", r, n);
    /* check mode: libunwind's stack in the slot, another outermost frame */
    memcpy(fake_stack, live, sizeof live);
    const uint64_t other[] = {c + 0x10, c + 0x06, outer + 1};
    uint64_t disagree_before = atomic_load(&unwind_counts.deferred_disagree);
    uint32_t check_id = unwind_defer_keep(&rs, UNWIND_DEFER_CHECK);
    n = unwind_defer_finish(check_id, other, 3, out, 16, &flags);
    check_frames("deferred, check mode: libunwind's stack kept", out, n, 3, other);
    CHECK(atomic_load(&unwind_counts.deferred_disagree) == disagree_before + 1,
          "deferred, check mode: a differing stack not counted");
    check_id = unwind_defer_keep(&rs, UNWIND_DEFER_CHECK);
    n = unwind_defer_finish(check_id, whole, 3, out, 16, &flags);
    CHECK(atomic_load(&unwind_counts.deferred_disagree) == disagree_before + 1,
          "deferred, check mode: an equal stack counted as differing");
}

/* A stack the readable-mappings snapshot does not know (here: anything but
 * fake_stack; in the agent, a thread started since the last maps read):
 * the walk stops at its first read and says so, the handler's copy goes
 * through the kernel and ends at the first unreadable page (the region's
 * guard page: the copy holds one page, less than the buffer), and the
 * writer finishes the walk on it. Nothing readable at SP, or readable past
 * the buffer (the copy could not hold the rest): not kept (libunwind). */
static void check_unknown_stack(uint64_t c, uint64_t outer)
{
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *region = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(region != MAP_FAILED && mprotect(region + page, (size_t)page, PROT_NONE) == 0, "unknown stack: mmap");
    uint64_t *st = (uint64_t *)(void *)region, s = (uint64_t)(uintptr_t)region;
    st[8] = s + 16 * 8, st[9] = c + 0x06;
    st[16] = s + 24 * 8, st[17] = outer;
    const uint64_t whole[] = {c + 0x10, c + 0x06, outer};
    uint64_t pcs[16], out[16];
    unsigned n = 0, replayed;
    bool truncated;
    struct unwind_resume rs;
    enum unwind_result r = unwind_table_walk_resumable(c + 0x10, s, s + 8 * 8, pcs, 16, &n, &truncated, NULL,
                                                       &replayed, &rs);
    CHECK(r == UNWIND_FAIL_READ && rs.unknown_stack && unwind_defer_wanted(r, &rs) && rs.nframes == 1,
          "unknown stack: result %d, unknown %d, resume at frame %u", r, rs.unknown_stack, rs.nframes);
    uint64_t unknown_before = atomic_load(&unwind_counts.deferred_unknown_stack);
    uint32_t id = unwind_defer_keep(&rs, UNWIND_DEFER_PLAIN);
    CHECK(id != 0 && atomic_load(&unwind_counts.deferred_unknown_stack) == unknown_before + 1,
          "unknown stack: not kept (id %u)", id);
    memset(region, 0, (size_t)page); /* the live stack moves on */
    uint16_t flags = 0;
    n = unwind_defer_finish(id, pcs, n, out, 16, &flags);
    check_frames("unknown stack: finished on the kernel's copy", out, n, 3, whole);
    CHECK(flags == 0, "unknown stack: flags %u", flags);
    /* a bad read on a known stack is not such a stop */
    struct unwind_resume known = rs;
    known.unknown_stack = false;
    CHECK(!unwind_defer_wanted(UNWIND_FAIL_READ, &known), "unknown stack: any failed read deferred");
    /* a walk stopped by a CFA not above SP read nothing: not such a stop
     * either (fake_stack is known; an FP-based CFA 4 KB below it) */
    uint64_t fs = (uint64_t)(uintptr_t)fake_stack;
    r = unwind_table_walk_resumable(c + 0x10, fs + 8, fs - 4096, pcs, 16, &n, &truncated, NULL, &replayed, &rs);
    CHECK(r == UNWIND_FAIL_READ && !rs.unknown_stack && !unwind_defer_wanted(r, &rs),
          "unknown stack: a CFA below SP taken for one (result %d, unknown %d)", r, rs.unknown_stack);
    /* the word that stopped the walk lies past the copy (in the guard
     * page): the writer would stop there too, so libunwind gets it */
    struct unwind_resume beyond = {c + 0x10, s, s + 8 * 8, true, 1, true, s + (uint64_t)page + 8};
    CHECK(unwind_defer_keep(&beyond, UNWIND_DEFER_PLAIN) == 0, "unknown stack: kept a copy without the stopping word");
    munmap(region, (size_t)page * 2);
    /* nothing readable at SP: not kept (libunwind) */
    rs.sp = (uint64_t)(uintptr_t)region; /* unmapped above */
    rs.unknown_stack = true;
    CHECK(unwind_defer_keep(&rs, UNWIND_DEFER_PLAIN) == 0, "unknown stack: an unreadable stack kept");
    /* readable past the buffer: the copy could not hold the rest */
    size_t big = UNWIND_DEFER_BYTES + (size_t)page * 4;
    region = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(region != MAP_FAILED, "unknown stack: mmap");
    rs.sp = (uint64_t)(uintptr_t)region;
    CHECK(unwind_defer_keep(&rs, UNWIND_DEFER_PLAIN) == 0, "unknown stack: a copy cut at the buffer kept");
    munmap(region, big);
}

/* Entry rows (unwind_build_table's entries): a one-byte row with the
 * call's rule where no FDE covers the entry, the gap again after it; an
 * FDE's rows win. Check mode tells a leaf there from a disagreement. */
static void check_entry_rows(uint64_t c, uint64_t s, uint64_t outer)
{
    memset(fake_stack, 0, sizeof fake_stack);
    fake_stack[0] = outer;
    walk("entry row in a gap", c + 0x70, s, 0, UNWIND_OK, 2, (uint64_t[]){c + 0x70, outer});
    walk("entry row where a gap starts", c + 0x60, s, 0, UNWIND_OK, 2, (uint64_t[]){c + 0x60, outer});
    walk("gap after an entry row", c + 0x71, s, 0, UNWIND_FAIL_RULE, 1, (uint64_t[]){c + 0x71});
    walk("gap after the other", c + 0x61, s, 0, UNWIND_FAIL_RULE, 1, (uint64_t[]){c + 0x61});
    CHECK(unwind_pc_at_entry_row(c + 0x70) && unwind_pc_at_entry_row(c + 0x60), "entry rows: not marked");
    CHECK(!unwind_pc_at_entry_row(c + 0x71) && !unwind_pc_at_entry_row(c + 0x10) && !unwind_pc_at_entry_row(c),
          "entry rows: marked where they are not (after one, or where an FDE covers the entry)");
    uint64_t table[2] = {c + 0x70, outer}, lib[1] = {c + 0x70}, other[2] = {c + 0x71, outer}, lib2[1] = {c + 0x71};
    CHECK(unwind_check_differs(table, 2, false, lib, 1, false) == UNWIND_CHECK_AT_ENTRY,
          "check: a leaf at an entry row counted as a disagreement");
    CHECK(unwind_check_differs(other, 2, false, lib2, 1, false) == UNWIND_CHECK_DIFFERS_LENGTH,
          "check: a longer stack elsewhere not counted as a disagreement");
    CHECK(unwind_check_differs(table, 2, false, table, 2, false) == UNWIND_CHECK_SAME, "check: equal stacks differ");
}

/* tests/unit/unwind_backing.c: the writer's and start-up's prefaults (each
 * returns its failures; run_defer first, while the pool is untouched). */
int check_defer_backing(const uint64_t *stack);
int check_memo_backing(void);
int check_rescan(void);

int main(void)
{
    failures += check_defer_backing(fake_stack); /* first: the pool's pages untouched */
    build_fixture();
    uint64_t c = (uint64_t)(uintptr_t)code, s = (uint64_t)(uintptr_t)fake_stack;
    /* Parsed from a copy, as the writer does: pc-relative pointers are
     * relative to the original address. */
    static uint8_t copy[sizeof image];
    memcpy(copy, image, at);
    /* the last entry lies past the code: ignored */
    uint64_t entries[] = {c + 0x70, c + 0x10, c + 0x60, c + sizeof code + 0x10};
    struct unwind_table *t = unwind_build_table(copy, at, (uint64_t)(uintptr_t)image, c, c + sizeof code, entries, 4);
    CHECK(t != NULL, "no table built");
    if (!t)
        return 1;
    printf("unwind_cfi: %u rows, %u rules, %zu bytes\n", t->nrows, t->nrules, t->map_bytes);
    struct unwind_module *m = &unwind_indexes[0].mod[0];
    m->lo = c;
    m->hi = c + sizeof code;
    atomic_store(&m->table, t);
    atomic_store(&m->state, UNWIND_MOD_BUILT);
    unwind_indexes[0].count = 1;
    atomic_store(&unwind_index_current, 0);

    uint64_t outer = c + 0x55; /* a return address into FDE 3: the walk ends there */
    /* 0x00: CFA = RSP + 8, RA at RSP. */
    memset(fake_stack, 0, sizeof fake_stack);
    fake_stack[0] = outer;
    walk("entry row", c + 0x00, s, 0, UNWIND_OK, 2, (uint64_t[]){c, outer});
    /* 0x02: after push rbp, CFA = RSP + 16: RA at RSP + 8. */
    fake_stack[1] = outer;
    walk("after push", c + 0x02, s, 0, UNWIND_OK, 2, (uint64_t[]){c + 2, outer});
    /* 0x10: CFA = RBP + 16, RA at RBP + 8, the caller's RBP at RBP. A
     * first return address into FDE 1 again (at 0x05: RBP-based too)
     * exercises the caller's RBP read from the stack. */
    memset(fake_stack, 0, sizeof fake_stack);
    fake_stack[8] = s + 16 * 8; /* saved rbp -> &fake_stack[16] */
    fake_stack[9] = c + 0x06;   /* RA: inside FDE 1 at 0x05 */
    fake_stack[17] = outer;     /* the second frame's RA at its RBP + 8 */
    walk("rbp frame", c + 0x10, s, s + 8 * 8, UNWIND_OK, 3, (uint64_t[]){c + 0x10, c + 0x06, outer});
    check_replay(c, s, outer);
    check_memo(c, s, outer);
    check_memo_deep(c, s, outer);
    check_rule_cache(c, s, outer);
    check_deferred(m, c, s, outer);
    check_unknown_stack(c, outer);
    check_entry_rows(c, s, outer);
    failures += check_memo_backing();
    /* 0x24: after remember_state + def_cfa rsp,8: CFA = RSP + 8 (epilogue). */
    /* (its row still says where the caller's RBP was saved, CFA - 16: one
     * word below the return address, so SP starts one word up the stack) */
    memset(fake_stack, 0, sizeof fake_stack);
    fake_stack[1] = outer;
    walk("epilogue row", c + 0x24, s + 8, 0, UNWIND_OK, 2, (uint64_t[]){c + 0x24, outer});
    /* 0x30: restore_state gave back CFA = RBP + 16. */
    fake_stack[8] = 0;
    fake_stack[9] = outer;
    walk("restored row", c + 0x30, s, s + 8 * 8, UNWIND_OK, 2, (uint64_t[]){c + 0x30, outer});
    /* 0x45: a DWARF expression: not for the tables. */
    walk("expression", c + 0x45, s, 0, UNWIND_FAIL_RULE, 1, (uint64_t[]){c + 0x45});
    check_fallback_guard(c, s);
    /* 0x90..0xbf: PLT entries. On the jmp (offset 0) and the push (6), the
     * return address is at RSP; from the push's end (11) one word higher. */
    memset(fake_stack, 0, sizeof fake_stack);
    fake_stack[0] = outer;
    walk("PLT entry jmp", c + 0x90, s, 0, UNWIND_OK, 2, (uint64_t[]){c + 0x90, outer});
    walk("PLT entry push", c + 0xa6, s, 0, UNWIND_OK, 2, (uint64_t[]){c + 0xa6, outer});
    fake_stack[0] = 7; /* the pushed relocation index */
    fake_stack[1] = outer;
    walk("PLT entry after push", c + 0xab, s, 0, UNWIND_OK, 2, (uint64_t[]){c + 0xab, outer});
    walk("PLT entry last byte", c + 0xbf, s, 0, UNWIND_OK, 2, (uint64_t[]){c + 0xbf, outer});
    /* PLT0 after its push (CFA = RSP + 24 from 0x86): RA two words up. */
    fake_stack[1] = 0, fake_stack[2] = outer;
    walk("PLT0", c + 0x8a, s, 0, UNWIND_OK, 2, (uint64_t[]){c + 0x8a, outer});
    /* One byte off the PLT's expression: not for the tables. */
    walk("other expression", c + 0xc0, s, 0, UNWIND_FAIL_RULE, 1, (uint64_t[]){c + 0xc0});
    /* 0x78: no FDE covers it, no entry row either. */
    walk("gap", c + 0x78, s, 0, UNWIND_FAIL_RULE, 1, (uint64_t[]){c + 0x78});
    /* 0x100: in the second bucket; CFA = RSP + 8. */
    fake_stack[0] = outer;
    walk("second bucket", c + 0x104, s, 0, UNWIND_OK, 2, (uint64_t[]){c + 0x104, outer});
    /* A return address pointing at garbage below SP: refused, not followed. */
    memset(fake_stack, 0, sizeof fake_stack);
    walk("stack outside", c + 0x10, s + 8, s - 4096, UNWIND_FAIL_READ, 1, (uint64_t[]){c + 0x10});
    check_cache(t, c, s, outer);
    atomic_store(&m->table, NULL); /* the fixture's module goes at the rescans below */
    unwind_table_free(t);
    failures += check_rescan();
    printf("unwind_cfi: %s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
