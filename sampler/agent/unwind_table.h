/*
 * sampler/agent/unwind_table.h — the agent's table-driven unwinder.
 *
 * Why: libunwind cost 33 of the handler's 48 us per sample (round 1), with a
 * slow path at 134 us and page faults on the .eh_frame of fresh libraries
 * inside the handler. Here the writer thread compiles each code module's
 * .eh_frame once into a compact table (unwind_compile.c, scheduled by
 * unwind_build.c), and the handler
 * walks a stack with two binary searches and two stack reads per frame
 * (unwind_table.c). What a table cannot express (DWARF expressions, signal
 * frames) goes to libunwind, counted; a walk that reaches a module whose
 * table is not built yet is finished by the writer (unwind_defer.c).
 *
 * The table format (one mmap'ed block per module):
 *   pc_off[nrows]   u32, sorted: row i covers [base + pc_off[i], base + pc_off[i+1])
 *   rule_of[nrows]  u16: index into rules[]
 *   rules[nrules]   struct unwind_rule, deduplicated (most functions share a
 *                   handful of rules: CFA = SP+8, SP+16, FP+16, ...)
 *   bucket[nbuckets] u32: for each 2^UNWIND_BUCKET_SHIFT bytes of text, the
 *                   row covering its first byte, so that a lookup scans a
 *                   few rows instead of a binary search over all of them
 *                   (4 bytes per 256 bytes of code)
 * rules[0] is always "no rule here" (a gap between functions): fall back.
 *
 * Architecture is data: a rule names the CFA's base as an abstract register
 * (UNWIND_REG_SP / UNWIND_REG_FP), and where the return address and the
 * caller's frame pointer are. The builder maps DWARF register numbers to
 * these through struct unwind_arch; an aarch64 port adds its unwind_arch
 * entry (SP 31, FP 29, RA 30 with RA "in the link register" at a function's
 * entry) and the three lines that load PC/SP/FP(/LR) from its ucontext.
 */
#ifndef OPPROF_UNWIND_TABLE_H
#define OPPROF_UNWIND_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#include "sampler/agent/agent.h"

/* Abstract registers a rule may name. */
enum unwind_reg {
    UNWIND_REG_NONE = 0, /* the rule cannot be expressed: fall back */
    UNWIND_REG_SP = 1,
    UNWIND_REG_FP = 2,
    /* x86-64 lazy PLT entries (16 bytes: jmp *GOT; push n; jmp PLT0), whose
     * .eh_frame rule is a DWARF expression: CFA = SP + cfa_off, plus 8 from
     * byte plt_push_at of the entry on (after the push). Recognised by its
     * exact bytes (unwind_compile.c); every other expression falls back. */
    UNWIND_REG_SP_PLT = 3,
};

/* Where a register of the caller is, once the CFA is known. */
enum unwind_where {
    UNWIND_SAME = 0,      /* unchanged (callee-saved and not saved yet, or never touched) */
    UNWIND_AT_CFA = 1,    /* saved in memory at CFA + off */
    UNWIND_IN_LR = 2,     /* the return address is still in the link register (aarch64 leaf) */
    UNWIND_UNDEFINED = 3, /* no caller: the outermost frame (_start, clone) for RA; unknown for FP */
};

/* Why a row has no rule (counted per sample that falls back). */
enum unwind_why_not {
    UNWIND_WHY_GAP = 0,        /* no FDE covers the PC */
    UNWIND_WHY_EXPRESSION = 1, /* DW_CFA_def_cfa_expression / expression rules (other than the PLT's) */
    UNWIND_WHY_REGISTER = 2,   /* CFA based on a register other than SP/FP, or RA in another register */
    UNWIND_WHY_SIGNAL = 3,     /* the CIE says signal frame ('S') */
    UNWIND_WHY_FULL = 4,       /* more distinct rules than the u16 index holds */
};

struct unwind_rule {
    int32_t cfa_off;   /* CFA = cfa_reg + cfa_off */
    uint8_t cfa_reg;   /* enum unwind_reg; NONE: no rule, see why_not */
    uint8_t ra_where;  /* enum unwind_where */
    uint8_t fp_where;  /* enum unwind_where */
    union {
        uint8_t why_not;     /* cfa_reg NONE: enum unwind_why_not */
        uint8_t plt_push_at; /* cfa_reg SP_PLT: the offset in the entry from which the CFA is 8 higher */
        uint8_t at_entry;    /* cfa_reg SP: 1 for the one-byte row at a function's first instruction that no
                              * FDE covers, known from the dynamic section (unwind_compile.c) */
    };
    int16_t ra_off;    /* RA at CFA + ra_off (x86-64: -8) */
    int16_t fp_off;    /* caller's FP at CFA + fp_off */
};

/* One module's compiled table, in one mmap'ed block (never malloc). */
struct unwind_table {
    size_t map_bytes;  /* the whole block, for munmap */
    uint64_t base;     /* row offsets are from here (the module's lowest text address) */
    uint32_t nrows, nrules;
    const uint32_t *pc_off;
    const uint16_t *rule_of;
    const struct unwind_rule *rules;
    uint32_t nbuckets;
    uint32_t from_file; /* mapped from a cache file: page-cache pages, RssFile (MEM_TICK) */
    const uint32_t *bucket;
};
#define UNWIND_BUCKET_SHIFT 8

/* How the builder reads DWARF register numbers on one architecture. */
struct unwind_arch {
    unsigned dwarf_sp, dwarf_fp, dwarf_ra;
    bool ra_in_lr_at_entry; /* aarch64: RA lives in x30 until saved */
    /* At a function's first instruction, whatever its code: CFA = SP +
     * entry_cfa_off, and the RA at CFA + entry_ra_off unless in the link
     * register (x86-64: the call pushed it, 8 and -8; aarch64: 0). */
    int32_t entry_cfa_off;
    int16_t entry_ra_off;
};
AGENT_HIDDEN extern const struct unwind_arch unwind_arch_host;

/* A module: a loaded object's text range and, once built, its table. */
enum unwind_module_state {
    UNWIND_MOD_NEW = 0,    /* not built, nobody asked */
    UNWIND_MOD_WANTED = 1, /* a sample hit it: the writer builds it next */
    UNWIND_MOD_BUILT = 2,
    UNWIND_MOD_NONE = 3,   /* no .eh_frame_hdr or the build failed: always libunwind */
};
struct unwind_module {
    uint64_t lo, hi;                          /* executable PT_LOAD range(s), absolute */
    uint64_t eh_frame_hdr;                    /* absolute address of .eh_frame_hdr, 0: none */
    uint64_t eh_limit;                        /* end of the segment holding it (bounds the copy and the parse) */
    uint64_t base;                            /* the loader's load bias (dlpi_addr), to find it again cheaply */
    _Atomic(struct unwind_table *) table;     /* NULL until built (handler: acquire load) */
    _Atomic int state;                        /* enum unwind_module_state */
    uint8_t cache_looked;                     /* writer only: its cache file was looked for (unwind_build.c) */
};

/* The published module index: sorted by lo, double-buffered like
 * agent_memmap.c (handlers count themselves in; the writer never refills
 * the index being read). */
#define UNWIND_MAX_MODULES 4096
struct unwind_index {
    size_t count;
    uint64_t generation; /* unwind_index_generation when this index was published */
    uint64_t removals;   /* unwind_index_removals then */
    struct unwind_module mod[UNWIND_MAX_MODULES];
};
AGENT_HIDDEN extern struct unwind_index unwind_indexes[2];
AGENT_HIDDEN extern _Atomic int unwind_index_current;
AGENT_HIDDEN extern _Atomic uint64_t unwind_index_generation; /* +1 at every publish */
/* +1 at a publish that drops or changes a module of the index before it.
 * What the rule cache and the memo hold (rules, and frames walked with them)
 * stays true while no module goes: a module loaded since adds rules for
 * code that had none, and a table built since is the one its module's
 * rules would come from. Counting every publish instead threw both away at
 * each library an import loads: 1,624 of ~8,600 rule-cache misses in a
 * torch_train.py --steps 60 run (2026-11-29). */
AGENT_HIDDEN extern _Atomic uint64_t unwind_index_removals;
AGENT_HIDDEN extern _Atomic int unwind_index_readers[2];
AGENT_HIDDEN extern _Atomic int unwind_index_miss; /* a PC in no module: rescan */

/* Counters (cumulative, exported as the UNWIND record, docs/format.md). */
struct unwind_counters {
    _Atomic uint64_t table_samples, table_frames;
    _Atomic uint64_t fallback_samples, fallback_not_built, fallback_no_module, fallback_no_table;
    _Atomic uint64_t fallback_rule, fallback_read;
    _Atomic uint64_t check_samples, check_disagree, check_disagree_length, check_table_failed;
    _Atomic uint64_t context_checked, context_disagree; /* agent_ompt.c, check mode */
    _Atomic uint64_t replay_samples, replay_frames;     /* table walks finished from the thread's memo */
    _Atomic uint64_t rule_lookups, rule_cache_hits;     /* frames' rules looked up; of them, from the rule cache */
    _Atomic uint64_t deferred_samples, deferred_finished, deferred_cut, deferred_pool_full; /* unwind_defer.c */
    _Atomic uint64_t deferred_checked, deferred_disagree; /* check mode: finished walks against libunwind's */
    _Atomic uint64_t deferred_unknown_stack; /* of deferred_samples: a stack the snapshot did not know, copied by the kernel */
    _Atomic uint64_t check_at_entry; /* check mode: UNWIND_CHECK_AT_ENTRY, the handler's walks and the writer's */
};
AGENT_HIDDEN extern struct unwind_counters unwind_counts;
/* Durations of the unwinding step in TSC ticks, 4 buckets per octave
 * (unwind_hist_bucket); [0] tables, [1] libunwind (see struct opr_unwind). */
#define UNWIND_HIST_BUCKETS 256
AGENT_HIDDEN extern _Atomic uint64_t unwind_hist[2][UNWIND_HIST_BUCKETS];
AGENT_HIDDEN extern uint64_t unwind_tsc0, unwind_ns0; /* calibration start (constructor) */
AGENT_HIDDEN extern _Atomic int unwind_build_wanted; /* some module is UNWIND_MOD_WANTED */
/* A handler that asks for a module's table, or finds a PC in no module,
 * sets this and wakes the writer (a futex on this word): the table is read
 * from the cache or built, or the modules rescanned, within a millisecond
 * or two instead of at the next drain, up to 10 ms later, while every
 * sample there takes libunwind's slow path (~85 such samples per PyTorch
 * run). Once per module; for a miss, at most once per drain. */
AGENT_HIDDEN extern _Atomic int unwind_writer_call;

/* --unwind-check: the first disagreements, both stacks, for a NOTE. state:
 * 0 free, 1 being filled by a handler, 2 ready, 3 reported by the writer. */
#define UNWIND_MAX_EXAMPLES 4
#define UNWIND_EXAMPLE_FRAMES 24
struct unwind_check_example {
    _Atomic int state;
    unsigned from;                 /* frames kept start here (a few before the first difference) */
    unsigned ntable_all, nlib_all; /* the stacks' depths */
    unsigned ntable, nlib;
    uint64_t table[UNWIND_EXAMPLE_FRAMES], lib[UNWIND_EXAMPLE_FRAMES];
};
AGENT_HIDDEN extern struct unwind_check_example unwind_examples[UNWIND_MAX_EXAMPLES];
/* Do the table's stack and libunwind's of one sample differ (each with
 * whether it was cut at the frame limit)? A difference is kept in a free
 * example, if any, unless it is UNWIND_CHECK_AT_ENTRY. Handler-safe: atomics
 * only (unwind_build.c). */
enum unwind_check_verdict {
    UNWIND_CHECK_SAME = 0,
    UNWIND_CHECK_DIFFERS,        /* counted as a disagreement */
    UNWIND_CHECK_DIFFERS_LENGTH, /* likewise; one stack is a prefix of the other */
    /* The tables' leaf is a function's first instruction that no FDE covers
     * (_init, _fini: crti.o has no unwind information), walked by the ABI's
     * entry rule; libunwind has no rule there and ends or guesses the stack
     * (counted apart: check_at_entry). */
    UNWIND_CHECK_AT_ENTRY,
};
AGENT_HIDDEN enum unwind_check_verdict unwind_check_differs(const uint64_t *table, unsigned nt, bool table_cut,
                                                            const uint64_t *lib, unsigned nl, bool lib_cut);
/* Is pc's row in its module's table an entry row (at_entry)? Handler-safe. */
AGENT_HIDDEN bool unwind_pc_at_entry_row(uint64_t pc);

/* Outcome of the table walk. */
enum unwind_result {
    UNWIND_OK = 0,
    UNWIND_FAIL_NO_MODULE,
    UNWIND_FAIL_NOT_BUILT,
    UNWIND_FAIL_NO_TABLE,
    UNWIND_FAIL_RULE,
    UNWIND_FAIL_READ,
};

/* ---- handler side (unwind_table.c, unwind_sample.c), async-signal-safe -- */
/* Set-up from the environment (constructor): OPPROF_UNWIND=libunwind turns
 * the tables off, OPPROF_UNWIND_CHECK=1 unwinds every sample both ways. */
AGENT_HIDDEN void agent_unwind_init(void);
AGENT_HIDDEN bool agent_unwind_tables_on(void);
AGENT_HIDDEN bool agent_unwind_check_on(void);
/* Constructor, after agent_unwind_init: libunwind's set-up outside any handler. */
AGENT_HIDDEN void agent_unwind_warm_up(void);
/* --call-graph dwarf: the interrupted context's stack into pcs (leaf first). */
AGENT_HIDDEN unsigned agent_unwind_sample(const ucontext_t *uc, uint64_t *pcs, unsigned max, uint16_t *flags,
                                          int32_t tid, uint32_t *defer);
/* The table walk alone (also the benchmark's entry). *nframes gets what was
 * walked, a prefix of the stack when the result is not UNWIND_OK. */
AGENT_HIDDEN enum unwind_result unwind_table_walk(uint64_t pc, uint64_t sp, uint64_t fp, uint64_t *pcs,
                                                  unsigned max, unsigned *nframes, bool *truncated);
/* What a walk read, so that a later walk from the same thread and the same
 * leaf can be confirmed equal by re-reading the words instead of walking
 * (agent_ompt.c: an OpenMP opener's context at every region). */
#define UNWIND_TRACE_WORDS (2 * OPR_MAX_FRAMES)
struct unwind_trace {
    uint64_t leaf_pc, leaf_sp, leaf_fp;
    bool leaf_fp_used;   /* a rule based the CFA on the leaf's FP register */
    unsigned nwords;     /* > UNWIND_TRACE_WORDS: overflowed, never replays */
    uint64_t generation; /* unwind_index_generation at the walk */
    uint64_t addr[UNWIND_TRACE_WORDS], val[UNWIND_TRACE_WORDS];
};
AGENT_HIDDEN enum unwind_result unwind_table_walk_traced(uint64_t pc, uint64_t sp, uint64_t fp, uint64_t *pcs,
                                                         unsigned max, unsigned *nframes, bool *truncated,
                                                         struct unwind_trace *tr);
/* True when a walk from (pc, sp, fp) now would give tr's walk's frames. */
AGENT_HIDDEN bool unwind_trace_replays(const struct unwind_trace *tr, uint64_t pc, uint64_t sp, uint64_t fp);
/* The handler's memo of a thread's previous walk. Samples of a thread a
 * few milliseconds apart mostly share all but their innermost frames (a
 * PyTorch operator's ~45 frames differ in the few BLAS frames at the leaf),
 * so the walk keeps, per frame, the state it walked from (PC, SP, FP and
 * whether FP is known) and where it read the return address and the
 * caller's FP. The next walk of the thread stops at the first caller frame
 * whose state equals a frame k of the previous walk and re-reads the words
 * the previous walk read from frame k on: when all hold what it found
 * (the next frame's PC and FP, or 0 where the stack ended), the rest of the
 * walk is a function of the same inputs (and of the same tables: the module
 * index generation is compared), so its frames are the previous walk's from
 * k on, copied instead of walked. One buffer, updated in place: in the
 * common case (the same depth) only the leaf frames are written, and a
 * frame costs the walk 40 bytes of memo read instead of two table lookups.
 * The frames of a walk that has not met the memo yet are kept apart (leaf[]
 * of the thread's slot) so that they do not overwrite the frames they may
 * meet, and a walk may meet the memo at any depth: when they were kept on
 * the handler's stack, 16 of them, a PyTorch walk whose first 16 frames
 * (BLAS, ATen, the dispatcher) had changed gave up meeting and walked all
 * ~45 frames: 1,073 of 2,814 walks of torch_train.py --steps 40. A walk
 * that meets a frame whose words above no longer hold goes on meeting
 * above the first word that changed (at most UNWIND_MEMO_HOLD_TRIES times).
 * Memos come from a fixed pool, one per thread (a
 * pointer in initial-exec TLS: 5 KB of thread-local storage would come out
 * of every thread's stack); a thread that finds the pool full walks
 * without one. */
#define UNWIND_MEMO_FRAMES 128
#define UNWIND_MEMO_HOLD_TRIES 4
#define UNWIND_MEMO_SLOTS 128
struct unwind_memo_frame {
    uint64_t pc, sp, fp;
    uint64_t ra_at; /* where the return address was read, 0: not read (the outermost frame) */
    /* where the caller's FP was read, 0: not read; bit 0: this frame's FP
     * is known; bit 1 (UNWIND_MEMO_FP_NEEDED): a CFA above is based on the
     * FP read there, so the memo's check reads that word again */
    uint64_t fp_at;
};
#define UNWIND_MEMO_FP_NEEDED 2u
struct unwind_memo {
    unsigned nframes; /* 0: nothing to replay (failed, truncated or too deep) */
    uint64_t generation; /* unwind_index_removals when walked */
    struct unwind_memo_frame f[UNWIND_MEMO_FRAMES];
};
/*
 * The thread's rule cache: the rules its walks looked up last, by lookup
 * PC. A PyTorch stack has ~46 frames in a dozen modules; each frame's table
 * lookup (module index, bucket, rows, rule) touches three or four cache
 * lines of tables that the workload has pushed out of the CPU's caches
 * since the last sample, one entry here touches one. Direct-mapped; an
 * entry holds a copy of the rule (never a pointer into a table that a
 * rescan may free) and the removal count of the module index it came from
 * (unwind_index_removals), so that a module loaded where another was never
 * gets the old one's rules.
 */
#define UNWIND_RULE_CACHE 1024 /* entries of 24 bytes: 24 KB per sampled thread */
struct unwind_rule_cache_entry {
    uint64_t at;               /* the PC looked up (a caller's: return address - 1) */
    struct unwind_rule rule;
    uint32_t generation; /* low bits of the index's removal count */
};
/*
 * The leaf's rules, by the PC range of their table row. A leaf is the
 * interrupted instruction, a new PC at nearly every sample of a hot loop:
 * by exact PC, a third of a torch_train.py run's handler calls missed at
 * the leaf (1,369 of 4,073, 2026-11-29), and each leaf filled an entry
 * that a caller's return address then lost. An
 * entry here holds the row's whole range: any PC in it is a hit. Indexed
 * by the PC's 64-byte block (a loop's few blocks each find their row).
 */
#define UNWIND_LEAF_CACHE 256 /* entries of 32 bytes: 8 KB per sampled thread */
struct unwind_leaf_cache_entry {
    uint64_t lo, hi; /* the row's PCs [lo, hi) */
    struct unwind_rule rule;
    uint32_t generation; /* as in unwind_rule_cache_entry */
};
struct unwind_memo_slot {
    _Atomic int32_t owner; /* tid, 0: free */
    struct unwind_memo memo;
    struct unwind_memo_frame leaf[UNWIND_MEMO_FRAMES]; /* this walk's frames until it meets the memo */
    struct unwind_rule_cache_entry rules[UNWIND_RULE_CACHE];
    struct unwind_leaf_cache_entry leaves[UNWIND_LEAF_CACHE];
};
/* The table walk with this thread's memo (NULL: none). *replayed gets the
 * number of frames copied from the previous walk (0: walked in full). */
AGENT_HIDDEN enum unwind_result unwind_table_walk_memo(uint64_t pc, uint64_t sp, uint64_t fp, uint64_t *pcs,
                                                       unsigned max, unsigned *nframes, bool *truncated,
                                                       struct unwind_memo_slot *memo, unsigned *replayed);
/* OPPROF_UNWIND_MEMO=0 and OPPROF_UNWIND_RULE_CACHE=0 turn these off
 * (set by agent_unwind_init, unwind_sample.c; read by the walk). */
AGENT_HIDDEN extern bool unwind_memo_on, unwind_rule_cache_on;
/* Handler (unwind_sample.c): this thread's memo, claimed from the pool on
 * first use; NULL when the pool is full or OPPROF_UNWIND_MEMO=0. */
AGENT_HIDDEN struct unwind_memo_slot *unwind_memo_for(int32_t tid);
/* Writer: frees the memos of threads that have exited (tgkill(pid, tid, 0)
 * says ESRCH: the thread cannot be in a handler any more). */
AGENT_HIDDEN void unwind_memo_reap(void);
/*
 * Deferred walks (unwind_defer.c). A walk that stops at a module whose
 * table is not built yet, or at a PC in no module (a library loaded since
 * the last scan), used to go to libunwind in the handler: 1.5-1.8 % of a
 * PyTorch run's samples, p50 57 us, p99 0.8-1.5 ms, the handler's whole p99.
 * Instead the handler copies the stack from the stopped frame's SP up (at
 * most UNWIND_DEFER_BYTES, to the end of its readable mapping) into a
 * buffer of a fixed pool and leaves the walk's state with it; the writer,
 * which builds the missing table (or rescans) first, finishes the walk on
 * the copy. The frames are those the live stack would have given: return
 * addresses and saved FPs are all the walk reads, and they lie above SP.
 * A copy too short for the rest of the stack, or a frame the tables cannot
 * do, leaves the stack cut there (OPR_SAMPLE_TRUNCATED), counted. When the
 * pool is full the sample goes to libunwind as before. A stack the
 * readable-mappings snapshot does not know yet is copied through the kernel
 * instead (see unwind_defer_wanted). Check mode keeps
 * libunwind's stack and compares the writer's finished walk with it.
 */
#define UNWIND_DEFER_BUFS 512
#define UNWIND_DEFER_BYTES (64u * 1024u)
struct unwind_resume { /* where a walk stopped: frame nframes - 1, in this state */
    uint64_t pc, sp, fp;
    bool fp_known;
    unsigned nframes; /* frames walked, the stopped one included (0: none, the leaf) */
    bool unknown_stack; /* UNWIND_FAIL_READ at an address the readable-mappings snapshot did not know */
    uint64_t fail_addr; /* that address (the copy must hold it, or the writer fails there too) */
};
struct unwind_stack_copy { /* stack bytes [sp, sp + len) as the handler saw them */
    uint64_t sp;
    size_t len;
    const uint8_t *bytes;
};
/* The walk on a copied stack, from a resume point (pcs[0] = rs->pc). */
AGENT_HIDDEN enum unwind_result unwind_table_walk_copy(const struct unwind_resume *rs,
                                                       const struct unwind_stack_copy *copy, uint64_t *pcs,
                                                       unsigned max, unsigned *nframes, bool *truncated);
/* The handler's walk, telling where it stopped when it did not finish. */
AGENT_HIDDEN enum unwind_result unwind_table_walk_resumable(uint64_t pc, uint64_t sp, uint64_t fp, uint64_t *pcs,
                                                            unsigned max, unsigned *nframes, bool *truncated,
                                                            struct unwind_memo_slot *memo, unsigned *replayed,
                                                            struct unwind_resume *rs);
AGENT_HIDDEN void agent_unwind_defer_init(void); /* constructor: OPPROF_UNWIND_DEFER=0 turns it off */
/* Which failed walks the writer can finish: a module without a table yet,
 * a PC in no module, and a stack read the readable-mappings snapshot
 * refused because it does not know that memory yet: a thread started since
 * the writer last read /proc/self/maps (its first ~20 ms of samples:
 * known_split's two threads sent 42 of 3,767 samples to libunwind so), or a
 * main stack grown below its last known start. Such a stack is copied
 * through the kernel (process_vm_readv), which stops at the first page it
 * cannot read instead of faulting, and kept only when the copy reached that
 * end before UNWIND_DEFER_BYTES (the whole rest of the stack is in it). */
static inline bool unwind_defer_wanted(enum unwind_result res, const struct unwind_resume *rs)
{
    return res == UNWIND_FAIL_NOT_BUILT || res == UNWIND_FAIL_NO_MODULE || (res == UNWIND_FAIL_READ && rs->unknown_stack);
}
/* Handler: copies the stack for a walk stopped at rs; returns the buffer's
 * id (> 0) for the slot, 0 when off or the pool is full. */
enum unwind_defer_kind {
    UNWIND_DEFER_PLAIN = 0,         /* the slot's frames are the walk's so far */
    UNWIND_DEFER_CHECK = 1,         /* check mode: the slot holds libunwind's stack, its prefix agreed */
    UNWIND_DEFER_CHECK_DIFFERS = 2, /* check mode: the part walked in the handler differed already */
};
AGENT_HIDDEN uint32_t unwind_defer_keep(const struct unwind_resume *rs, enum unwind_defer_kind kind);
/* Writer: the whole stack of a deferred sample into out (max frames), from
 * the slot's frames pcs[0..n) and buffer id; check mode compares it with
 * pcs and returns pcs. The buffer is free again after. */
AGENT_HIDDEN unsigned unwind_defer_finish(uint32_t id, const uint64_t *pcs, unsigned n, uint64_t *out, unsigned max,
                                          uint16_t *flags);
AGENT_HIDDEN void unwind_defer_atfork_child(void);
AGENT_HIDDEN void unwind_defer_prefault(void); /* writer: back the first buffer's pages (first-touch faults) */
/* libunwind from the handler (unw_backtrace, the handler's own frames
 * dropped; unwind_sample.c). */
AGENT_HIDDEN unsigned unwind_libunwind_walk(const ucontext_t *uc, uint64_t *pcs, unsigned max, uint16_t *flags);
/* libunwind from here, outside a handler (agent_ompt.c): pcs[0] is the
 * function that called it. */
AGENT_HIDDEN unsigned unwind_libunwind_here(uint64_t *pcs, unsigned max);
AGENT_HIDDEN void agent_unwind_atfork_child(void);

/* ---- writer side (unwind_build.c, unwind_compile.c) ------------------------ */
/* Writer hook, every drain: rescan modules when the loader's counts changed
 * or a sample missed, build the tables samples asked for (time-boxed), emit
 * the UNWIND record when the counters changed. */
AGENT_HIDDEN void agent_unwind_poll(agent_emit_fn emit);
/* The writer's wait between drains: until deadline_ns (CLOCK_MONOTONIC), or
 * true at once when a handler has asked for a table since the last call;
 * then agent_unwind_serve (writer lock held) builds what was asked. */
AGENT_HIDDEN bool agent_unwind_wait(uint64_t deadline_ns);
AGENT_HIDDEN void agent_unwind_serve(void);
/* Writer, each loop: the memo slots' pages present before handlers touch them. */
AGENT_HIDDEN void agent_unwind_prefault(void);
/* Compiles one module's .eh_frame into a fresh mmap'ed table, from bytes: a
 * copy of the object's memory from its .eh_frame_hdr (at real_addr) to the
 * end of the segment holding it. entries: the absolute addresses of
 * functions no FDE may cover (DT_INIT, DT_FINI), each given an entry row
 * where none does. NULL when there is nothing usable. */
AGENT_HIDDEN struct unwind_table *unwind_build_table(const void *bytes, size_t len, uint64_t real_addr, uint64_t lo,
                                                     uint64_t hi, const uint64_t *entries, unsigned nentries);
AGENT_HIDDEN void unwind_build_atfork_child(void);
AGENT_HIDDEN void unwind_table_free(struct unwind_table *t);
AGENT_HIDDEN void unwind_table_account(size_t bytes, bool from_file); /* a table block mapped (unwind_tables_mapped_bytes) */
/* The block of a table of these counts: its size, and where rules[] and
 * bucket[] start (unwind_cache.c; pc_off and rule_of follow the struct). */
AGENT_HIDDEN size_t unwind_table_layout(uint32_t nrows, uint32_t nrules, uint32_t nbuckets, size_t *rules_at,
                                        size_t *buckets_at);
/* Fills t: counts, base and the pointers to block's arrays. t is the block's
 * own first bytes (a table compiled here) or, for one mapped read-only from
 * the cache, a copy of them apart from it (unwind_cache.c). */
AGENT_HIDDEN void unwind_table_point(struct unwind_table *t, const void *block, size_t map_bytes, uint64_t base,
                                     uint32_t nrows, uint32_t nrules, uint32_t nbuckets);
/* The block t's arrays are in: t itself, or the mapping apart from it. */
static inline const void *unwind_table_block(const struct unwind_table *t)
{
    return (const char *)t->pc_off - sizeof *t;
}

/* ---- tables kept across runs (unwind_cache.c), writer side ---------------- */
struct dl_phdr_info;
AGENT_HIDDEN void unwind_cache_init(void); /* constructor: where (environment) */
/* The cache directory opened for one pass over modules (closed by the
 * caller), -1 when there is no cache or it is not safe to use: each lookup
 * opening and checking it again was four system calls of five per module
 * (~7 us against ~1.7 for the lookup alone; ~300 modules in a process that
 * imports torch). */
AGENT_HIDDEN int unwind_cache_open(void);
/* The cache file name of a loaded object (inside dl_iterate_phdr's callback:
 * its build-id is read from memory); false when it has no build-id or there
 * is no cache. *present: a file of that name is in dir (unwind_cache_open;
 * -1: none). */
AGENT_HIDDEN bool unwind_cache_name(int dir, const struct dl_phdr_info *info, uint64_t lo, uint64_t hi,
                                    uint64_t eh_frame_hdr, char *name, size_t cap, bool *present);
/* The table read back from dir (unwind_cache_open), checked, for a module
 * whose text starts at base; NULL when missing or rejected (a rejected file
 * is removed). */
AGENT_HIDDEN struct unwind_table *unwind_cache_load(int dir, const char *name, uint64_t base);
AGENT_HIDDEN void unwind_cache_store(const char *name, const struct unwind_table *t);
AGENT_HIDDEN void unwind_cache_counts(uint64_t *loaded, uint64_t *stored, uint64_t *rejected, uint64_t *evicted);
AGENT_HIDDEN void unwind_cache_atfork_child(void);
AGENT_HIDDEN uint64_t unwind_tables_mapped_bytes(void); /* tables mapped now, all modules */
AGENT_HIDDEN uint64_t unwind_tables_file_bytes(void);   /* of them, mapped from cache files */
/* Rescans the loaded objects now (writer, or a benchmark); build_all also
 * compiles every table at once. */
AGENT_HIDDEN void unwind_rescan(bool build_all);

#endif
