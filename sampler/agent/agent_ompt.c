/*
 * sampler/agent/agent_ompt.c — the OMPT tool inside the agent: parallel regions, team
 * sizes, thread begin/end, time in region bodies, and the opener's calling
 * context at region begin. See ompt/ompt.h for how it fits the agent and
 * docs/format.md ("Threads and OpenMP") for the records it produces.
 *
 * HOT PATH (not signal context): the callbacks run on the workload's threads
 * at every parallel region. They use no locks and no malloc after a thread's
 * first callback: thread-local counters and a per-thread single-producer,
 * single-consumer ring of 32-byte events, drained by the writer thread.
 *
 * Region ids count up per process. parallel_data->value holds the id in its
 * low 40 bits and, once team member 0 began its implicit task, the actual team
 * size in the high 24 bits: no allocation per region.
 *
 * Calling context: at every region begin (or every OPPROF_OMP_CONTEXT_NS
 * per opener thread when set), the opener's native stack and Python frames
 * go into a handler-queue slot marked AGENT_SLOT_OMP_CONTEXT, which the
 * writer turns into an OMP_CONTEXT record; or, when they are unchanged since
 * its previous one, only the region's BEGIN event says so (capture_context),
 * and its OMP_REGION record carries OPR_OMP_REGION_CONTEXT_REPEATED. The
 * loader charges worker samples to it (analyze/threading.c).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "config.h"
#include "sampler/agent/agent_ompt.h"
#include <x86intrin.h> /* __rdtsc: the hooks' own time */

#include "sampler/agent/agent.h"
#include "sampler/agent/unwind_table.h"

__thread uint64_t agent_omp_region __attribute__((tls_model("initial-exec")));

#ifdef HAVE_OMP_TOOLS_H
#include <omp-tools.h>
#endif

/* The rings, region table and writer side below serve two sources: the OMPT
 * callbacks (LLVM libomp, Intel libiomp5) and the interposed GOMP_* entry
 * points of GNU libgomp (agent_gomp.c, through the omp_rec_* functions). */
#define ID_BITS 40
#define ID_MASK ((1ull << ID_BITS) - 1)
/* Events per thread between two drains (~10 ms): an opener pushes two a
 * region. omp_regions_gomp --size 200 opens ~10^6 regions a second: 4,096
 * slots lost most of its events, 16,384 alone still a third (the writer gets
 * little CPU beside a spinning team), so the opener also calls the writer
 * when its ring is half full (push). 512 KB per thread of address space,
 * touched only as far as events reach (team workers push none). Lost
 * events are counted (OMP_TICK events_lost). */
#define RING_SIZE 16384u
#define REGION_TABLE_SIZE 65536u  /* recent regions the writer remembers */

enum ev_kind { EV_BEGIN = 1, EV_END = 2, EV_BEGIN_REPEATED = 3 /* BEGIN; the opener's context unchanged */ };

struct omp_ev {
    uint64_t time; /* event_time_at(): TSC ticks or ns */
    uint64_t id;
    uint64_t parent; /* BEGIN: enclosing region */
    uint32_t kind;
    uint32_t arg;    /* BEGIN: requested team; END: actual team */
};

/* One per OpenMP thread; never freed (a dead one is reused by a new thread
 * once the writer has drained it). */
struct omp_thread_state {
    struct omp_ev ring[RING_SIZE];
    _Atomic uint64_t head;          /* producer: next event to write */
    _Atomic uint64_t tail;          /* writer: next event to read */
    /* Time in region bodies, in TSC ticks (the writer converts): a
     * clock_gettime at each body's start and end was ~0.1 us of every
     * region (omp_regions_gomp, 100,000 regions of 2 threads under record
     * -F 10: 181 -> 173 ms of CPU, 5 alternating runs; bare 130). */
    _Atomic uint64_t work_ticks;     /* completed bodies */
    _Atomic uint64_t body_begin_tsc; /* open body's start, 0: none */
    _Atomic uint64_t dropped;       /* events lost to a full ring */
    _Atomic int state;              /* 0 live, 1 ended, 2 ended and drained */
    uint32_t tid;
    uint64_t last_capture_ns;       /* owner only */
    /* Owner only: the last context written in full, to send "the same
     * again" when a region opens from the same place (capture_context). */
    bool have_last;
    unsigned last_npy, last_npcs;
    uint64_t last_pcs[OPR_MAX_FRAMES]; /* check mode compares a repeat with it */
    struct py_frame_ref last_py[OPR_MAX_PYFRAMES];
    struct unwind_trace last_trace;
    struct unwind_trace check_trace; /* check mode's walks (not kept) */
    uint64_t check_pcs[OPR_MAX_FRAMES];
    uint64_t writer_work_seen;       /* writer only: work_ticks already in a tick */
    uint64_t writer_dropped_seen;    /* writer only: dropped already in a tick */
    _Atomic uint64_t hook_ticks;    /* owner adds, the writer sums: omp_rec_hook_time */
    struct omp_thread_state *next;
};

struct region_entry {
    uint64_t id, parent, begin_ns, end_ns;
    uint32_t opener_tid, requested, actual;
    uint8_t referenced, emitted, begun, ctx_repeated;
};

static _Atomic(struct omp_thread_state *) threads_head;
static __thread struct omp_thread_state *my_state __attribute__((tls_model("initial-exec")));
static _Atomic uint64_t next_region_id;
static _Atomic int alive_threads;
static _Atomic int tool_active;
static uint64_t context_interval_ns; /* 0: every region (OPPROF_OMP_CONTEXT_NS) */
#ifdef HAVE_OMP_TOOLS_H
static ompt_set_callback_t set_callback;
#endif
static char runtime_version[256];
static unsigned runtime_omp_version;
static bool info_emitted;

/* Writer-side state. */
static struct region_entry *regions;
/* The highest region id given a slot: ids are handed out in order, so the
 * slots of ids up to REGION_TABLE_SIZE below it are the only ones ever
 * written. The final drain and a fork child visit those, not the whole 3 MB
 * table, whose untouched pages each cost a page fault (730 of
 * omp_regions_gomp's 1,680 faults with 2,000 regions were that scan). */
static uint64_t region_id_max;
/* Bytes of the table from its start whose pages were first touched by a
 * write (back_regions). The writer reads a slot before it writes it: on a
 * page never touched that read maps the shared zero page, and the write
 * after it replaces that mapping, which flushes the TLB of every CPU the
 * workload's threads run on with an interrupt (a TLB shootdown): one per
 * 85 regions, 728 on omp_regions_gomp --regions 60000 (8 bare), each an
 * exit to the hypervisor on both CPUs of a VM. A page written first is
 * faulted in with no flush. */
static size_t regions_backed;
/* A full context the writer could not write (--max-size, out of memory):
 * regions repeating the opener's context would name an older one, so no
 * region of this stream says "repeated" after it. */
static bool contexts_lost;
static struct opr_omp_tick tick;
static uint64_t last_tick_ns;

int ompt_tool_active(void) { return atomic_load_explicit(&tool_active, memory_order_relaxed); }

static uint32_t gettid_now(void) { return (uint32_t)syscall(SYS_gettid); }

/* A region event's time: the TSC where the clock runs on it (see
 * agent_omp_clock.c), else CLOCK_MONOTONIC ns. tsc: the TSC the caller's
 * hook began at, read once for both. */
static inline uint64_t event_time_at(uint64_t tsc)
{
    int clock = atomic_load_explicit(&omp_events_clock, memory_order_relaxed);
    if (__builtin_expect(clock == OMP_EVENT_CLOCK_UNKNOWN, 0))
        clock = omp_choose_event_clock();
    return clock == OMP_EVENT_CLOCK_TSC ? tsc : agent_now_ns();
}

/* This thread's state: registered at its first callback (thread_begin for
 * threads the runtime knows). Allocation happens once per thread. */
static struct omp_thread_state *thread_state(void)
{
    struct omp_thread_state *s = my_state;
    if (s)
        return s;
    /* Reuse a drained one. */
    for (s = atomic_load(&threads_head); s; s = s->next) {
        int drained = 2;
        if (atomic_compare_exchange_strong(&s->state, &drained, 0))
            break;
    }
    if (!s) {
        void *m = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        s = m; /* zero-filled */
        struct omp_thread_state *head = atomic_load(&threads_head);
        do
            s->next = head;
        while (!atomic_compare_exchange_weak(&threads_head, &head, s));
    }
    s->tid = gettid_now();
    s->last_capture_ns = 0;
    s->have_last = false;
    atomic_store(&s->body_begin_tsc, 0);
    my_state = s;
    return s;
}

/* A ring half full asks the writer to drain the rings now, not at its next
 * period: with a team spinning on every CPU the writer's 10 ms period
 * stretched, and an opener of ~700,000 regions a second lost a third of its
 * events even with 16,384 slots. Looked at once every RING_WAKE_EVERY
 * events, and one wake-up until the writer has taken it. */
#define RING_WAKE_EVERY 1024u
static _Atomic int drain_wanted;

int ompt_drain_wanted_take(void)
{
    return atomic_exchange_explicit(&drain_wanted, 0, memory_order_relaxed);
}

static void push(struct omp_thread_state *s, uint32_t kind, uint64_t t, uint64_t id, uint64_t parent, uint32_t arg)
{
    uint64_t h = atomic_load_explicit(&s->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&s->tail, memory_order_acquire);
    if (h - tail >= RING_SIZE) {
        atomic_fetch_add_explicit(&s->dropped, 1, memory_order_relaxed);
        return;
    }
    struct omp_ev *e = &s->ring[h & (RING_SIZE - 1)];
    e->time = t;
    e->id = id;
    e->parent = parent;
    e->kind = kind;
    e->arg = arg;
    atomic_store_explicit(&s->head, h + 1, memory_order_release);
    if (__builtin_expect(((h + 1) & (RING_WAKE_EVERY - 1)) == 0, 0) && h + 1 - tail >= RING_SIZE / 2 &&
        !atomic_exchange_explicit(&drain_wanted, 1, memory_order_relaxed))
        agent_wake_writer();
}

/* The opener's calling context, through the handler queue (the writer
 * dedups stacks and resolves Python frames). Not signal context.
 *
 * Every region gets one, and most cost a few hundred ns: a PyTorch loop
 * opens thousands of regions a second from a handful of places. The Python
 * frames are read each time (a short pointer walk) and compared with this
 * thread's last context; the native stack is not walked again when the
 * last walk's inputs are unchanged (unwind_trace_replays: same leaf SP,
 * the same return addresses and saved frame pointers at the same stack
 * addresses), which makes the walk's result the same. Then nothing is
 * queued: the region's BEGIN event says "my opener's previous context"
 * (EV_BEGIN_REPEATED). A queue slot and an OMP_CONTEXT record per such
 * region were ~90 % of omp_regions_gomp's stream (20,000 regions: 800 of
 * 892 KB), most of the writer's work on it, and 1.3 MB of queue traffic. */
static void check_repeat(struct omp_thread_state *s, uint64_t pc, uint64_t sp, uint64_t fp, uint64_t *scratch)
{
    unsigned walked;
    bool truncated;
    struct unwind_trace *tr = &s->check_trace;
    bool differ = unwind_table_walk_traced(pc, sp, fp, scratch, OPR_MAX_FRAMES, &walked, &truncated, tr) != UNWIND_OK ||
                  walked != s->last_npcs || memcmp(scratch, s->last_pcs, walked * sizeof scratch[0]) != 0;
    atomic_fetch_add_explicit(&unwind_counts.context_checked, 1, memory_order_relaxed);
    if (differ)
        atomic_fetch_add_explicit(&unwind_counts.context_disagree, 1, memory_order_relaxed);
}

/* The three registers a table walk starts from, here. On x86-64 read
 * directly: the PC is this instruction's (leaq), and SP and FP are read
 * before anything moves them, so the table's rule at that PC holds for that
 * SP. unw_getcontext, which stores every register and the FPU environment,
 * cost ~0.1 us a region (omp_regions_gomp, 100,000 regions under record
 * -F 10: 192 -> 181 ms of CPU; bare 129). */
static inline __attribute__((always_inline)) bool here_regs(uint64_t *pc, uint64_t *sp, uint64_t *fp)
{
#if defined(__x86_64__)
    __asm__ volatile("leaq 0(%%rip), %0\n\tmovq %%rsp, %1\n\tmovq %%rbp, %2" : "=r"(*pc), "=r"(*sp), "=r"(*fp));
    return true;
#else
    unw_context_t here;
    if (unw_getcontext(&here) != 0)
        return false;
    const ucontext_t *uc = (const ucontext_t *)&here;
    *pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    *sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
    *fp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP];
    return true;
#endif
}

/* now: event_time_at(). True: the opener's context is its previous one,
 * nothing queued (see above). */
static bool capture_context(struct omp_thread_state *s, uint64_t id, uint64_t now)
{
    if (!atomic_load_explicit(&agent_accepting, memory_order_acquire))
        return false;
    uint64_t pc = 0, sp = 0, fp = 0;
    bool have_regs = here_regs(&pc, &sp, &fp);
    bool tables = agent_config.call_graph == CALL_GRAPH_DWARF && agent_unwind_tables_on() && have_regs;
    struct py_frame_ref py[OPR_MAX_PYFRAMES];
    unsigned npy = agent_python_capture(py, OPR_MAX_PYFRAMES, s->tid);
    bool same = s->have_last && tables && npy == s->last_npy &&
                memcmp(py, s->last_py, npy * sizeof py[0]) == 0 && unwind_trace_replays(&s->last_trace, pc, sp, fp);
    if (same) {
        if (agent_unwind_check_on()) /* OPPROF_UNWIND_CHECK=1: walk anyway, compare */
            check_repeat(s, pc, sp, fp, s->check_pcs);
        return true;
    }
    /* A sample taken while we fill the slot is fine: the queue is MPSC and
     * the writer consumes in order (it waits for our commit). */
    struct agent_slot *slot = agent_queue_claim();
    if (!slot)
        return false; /* the writer still has the last full context: repeats stay right */
    slot->time_ns = now;
    slot->tid = s->tid;
    slot->omp_region = id;
    slot->defer = 0; /* walked here in full or by libunwind, never deferred */
    slot->flags = AGENT_SLOT_OMP_CONTEXT;
    /* The writer's unwind tables first (unwind_table.c), from our own
     * registers; libunwind when they cannot do the whole stack. */
    int n = 0;
    s->have_last = false;
    if (tables) {
        unsigned walked;
        bool truncated;
        if (unwind_table_walk_traced(pc, sp, fp, slot->pcs, OPR_MAX_FRAMES, &walked, &truncated, &s->last_trace) ==
            UNWIND_OK) {
            n = (int)walked;
            s->have_last = s->last_trace.nwords <= UNWIND_TRACE_WORDS;
        }
    }
    if (n == 0)
        n = (int)unwind_libunwind_here(slot->pcs, OPR_MAX_FRAMES);
    if (n <= 0) {
        slot->pcs[0] = 0;
        n = 1;
    }
    slot->nframes = (uint16_t)n;
    slot->npy = npy;
    memcpy(agent_slot_py(slot), py, npy * sizeof py[0]);
    if (s->have_last) {
        s->last_npy = npy;
        memcpy(s->last_py, py, npy * sizeof py[0]);
        s->last_npcs = (unsigned)n;
        memcpy(s->last_pcs, slot->pcs, (size_t)n * sizeof slot->pcs[0]);
    }
    agent_queue_commit(slot);
    return false;
}

/* ---- shared recording entry points (OMPT callbacks and agent_gomp.c) ---- */

/* A new region opened by this thread: id, BEGIN event, opener context.
 * tsc: the TSC its hook began at. */
static uint64_t region_begin(unsigned requested, uint64_t tsc)
{
    uint64_t id = atomic_fetch_add_explicit(&next_region_id, 1, memory_order_relaxed) + 1;
    struct omp_thread_state *s = thread_state();
    if (!s)
        return id;
    uint64_t now = event_time_at(tsc);
    bool repeated = false;
    if (context_interval_ns == 0) {
        repeated = capture_context(s, id, now);
    } else { /* OPPROF_OMP_CONTEXT_NS: the interval on the clock */
        uint64_t now_ns = agent_now_ns();
        if (now_ns - s->last_capture_ns >= context_interval_ns) {
            s->last_capture_ns = now_ns;
            repeated = capture_context(s, id, now);
        }
    }
    push(s, repeated ? EV_BEGIN_REPEATED : EV_BEGIN, now, id, agent_omp_region & ~AGENT_OMP_OUTSIDE_BODY, requested);
    return id;
}

static void body_end(struct omp_thread_state *s, uint64_t now);

/*
 * The agent's own time in the workload's threads around regions: the GOMP_*
 * wrappers' and OMPT callbacks' work (ids, ring pushes, the opener's calling
 * context), which no handler timing sees, paid at every region: on
 * omp_regions_gomp (20,000 regions of 2 threads) ~1,200 TSC ticks a region,
 * ~1 % of its CPU, that the overhead line left out. Timed with the TSC (two
 * reads per piece, ~25 cycles each; a CPU-clock read is a system call of
 * ~0.6 us, longer than what it would time), summed per thread, converted by
 * the writer with the TSC-to-CLOCK_MONOTONIC ratio since the constructor. Wall
 * time: a thread preempted inside a hook counts the wait too, rare in spans
 * this short.
 */
uint64_t omp_rec_hook_now(void) { return __rdtsc(); }

void omp_rec_hook_time(uint64_t *start)
{
    uint64_t now = __rdtsc();
    struct omp_thread_state *s = my_state;
    if (s && now > *start)
        atomic_store_explicit(&s->hook_ticks,
                              atomic_load_explicit(&s->hook_ticks, memory_order_relaxed) + (now - *start),
                              memory_order_relaxed);
    *start = now;
}

static _Atomic uint64_t setup_ticks;

void omp_rec_setup_time(uint64_t ticks)
{
    atomic_fetch_add_explicit(&setup_ticks, ticks, memory_order_relaxed);
}

uint64_t ompt_hook_ns(void)
{
    uint64_t ticks = atomic_load_explicit(&setup_ticks, memory_order_relaxed);
    for (struct omp_thread_state *s = atomic_load(&threads_head); s; s = s->next)
        ticks += atomic_load_explicit(&s->hook_ticks, memory_order_relaxed);
    return (uint64_t)((double)ticks * omp_tsc_ns_per_tick());
}

/* GNU libgomp has no OMPT: agent_gomp.c reports what the callbacks would. */
void omp_rec_gomp_activate(void)
{
    int was = 0;
    if (!atomic_compare_exchange_strong(&tool_active, &was, 1))
        return; /* already on (an OMPT runtime, or another thread was first) */
    const char *ctx = getenv(OPR_ENV_OMP_CONTEXT);
    if (ctx && ctx[0])
        context_interval_ns = strtoull(ctx, NULL, 10);
    runtime_omp_version = 0;
    strcpy(runtime_version, "GNU libgomp (GOMP_* entry points interposed)");
}

uint64_t omp_rec_region_begin(unsigned requested, uint64_t tsc)
{
    return region_begin(requested, tsc);
}

void omp_rec_region_end(uint64_t id, unsigned actual, uint64_t tsc)
{
    struct omp_thread_state *s = thread_state();
    if (s)
        push(s, EV_END, event_time_at(tsc), id, 0, actual);
}

bool omp_rec_thread_seen(void)
{
    return my_state != NULL;
}

void omp_rec_body_begin(uint64_t *t)
{
    bool first = my_state == NULL;
    struct omp_thread_state *s = thread_state();
    if (!s)
        return;
    if (first)
        atomic_fetch_add(&alive_threads, 1);
    body_end(s, *t); /* a nested region pauses the enclosing body where the hook began */
    omp_rec_hook_time(t);
    atomic_store_explicit(&s->body_begin_tsc, *t, memory_order_relaxed);
}

void omp_rec_body_end(uint64_t *t)
{
    *t = __rdtsc();
    struct omp_thread_state *s = my_state;
    if (s)
        body_end(s, *t);
}

/* now: the TSC */
static void body_end(struct omp_thread_state *s, uint64_t now)
{
    uint64_t b = atomic_load_explicit(&s->body_begin_tsc, memory_order_relaxed);
    if (b) {
        if (now > b)
            atomic_store_explicit(&s->work_ticks,
                                  atomic_load_explicit(&s->work_ticks, memory_order_relaxed) + (now - b),
                                  memory_order_relaxed);
        atomic_store_explicit(&s->body_begin_tsc, 0, memory_order_relaxed);
    }
}

#ifdef HAVE_OMP_TOOLS_H
static void on_parallel_begin(ompt_data_t *encountering_task_data, const ompt_frame_t *frame,
                              ompt_data_t *parallel_data, unsigned int requested, int flags,
                              const void *codeptr_ra)
{
    (void)encountering_task_data, (void)frame, (void)flags, (void)codeptr_ra;
    uint64_t t = __rdtsc();
    uint64_t id = region_begin(requested, t);
    __atomic_store_n(&parallel_data->value, id & ID_MASK, __ATOMIC_RELAXED);
    omp_rec_hook_time(&t);
}

static void on_parallel_end(ompt_data_t *parallel_data, ompt_data_t *encountering_task_data, int flags,
                            const void *codeptr_ra)
{
    (void)encountering_task_data, (void)flags, (void)codeptr_ra;
    uint64_t t = __rdtsc();
    struct omp_thread_state *s = thread_state();
    if (!s)
        return;
    uint64_t v = __atomic_load_n(&parallel_data->value, __ATOMIC_RELAXED);
    push(s, EV_END, event_time_at(t), v & ID_MASK, 0, (uint32_t)(v >> ID_BITS));
    omp_rec_hook_time(&t);
}

static void on_implicit_task(ompt_scope_endpoint_t endpoint, ompt_data_t *parallel_data, ompt_data_t *task_data,
                             unsigned int actual, unsigned int index, int flags)
{
    if (flags & ompt_task_initial)
        return; /* the initial task of a thread: not a parallel region */
    uint64_t t = __rdtsc(), now = t; /* the hook's start and the body's edge: a few instructions apart */
    struct omp_thread_state *s = thread_state();
    if (!s)
        return;
    if (endpoint == ompt_scope_begin) {
        uint64_t v = parallel_data ? __atomic_load_n(&parallel_data->value, __ATOMIC_RELAXED) : 0;
        if (index == 0 && parallel_data && actual < (1u << 24))
            __atomic_fetch_or(&parallel_data->value, (uint64_t)actual << ID_BITS, __ATOMIC_RELAXED);
        task_data->value = agent_omp_region; /* restored at the end (nesting) */
        agent_omp_region = v & ID_MASK;
        body_end(s, now); /* a nested region pauses the enclosing body */
        atomic_store_explicit(&s->body_begin_tsc, now, memory_order_relaxed);
    } else {
        body_end(s, now);
        agent_omp_region = task_data->value;
    }
    omp_rec_hook_time(&t);
}

static void on_sync_region(ompt_sync_region_t kind, ompt_scope_endpoint_t endpoint, ompt_data_t *parallel_data,
                           ompt_data_t *task_data, const void *codeptr_ra)
{
    (void)parallel_data, (void)task_data, (void)codeptr_ra;
    if (endpoint != ompt_scope_begin)
        return;
    /* Arrival at the region's closing barrier ends the body. */
    if (kind == ompt_sync_region_barrier_implicit || kind == ompt_sync_region_barrier_implicit_parallel ||
        kind == ompt_sync_region_barrier_implicit_workshare || kind == ompt_sync_region_barrier) {
        uint64_t t = __rdtsc();
        struct omp_thread_state *s = my_state;
        if (s && kind != ompt_sync_region_barrier_implicit_workshare)
            body_end(s, t);
        omp_rec_hook_time(&t);
    }
}

static void on_thread_begin(ompt_thread_t type, ompt_data_t *thread_data)
{
    (void)type, (void)thread_data;
    thread_state();
    atomic_fetch_add(&alive_threads, 1);
}

static void on_thread_end(ompt_data_t *thread_data)
{
    (void)thread_data;
    omp_rec_thread_end();
}
#endif /* HAVE_OMP_TOOLS_H */

void omp_rec_thread_end(void)
{
    struct omp_thread_state *s = my_state;
    atomic_fetch_sub(&alive_threads, 1);
    if (s) {
        body_end(s, __rdtsc());
        my_state = NULL;
        atomic_store(&s->state, 1);
    }
}

#ifdef HAVE_OMP_TOOLS_H
static int tool_initialize(ompt_function_lookup_t lookup, int initial_device_num, ompt_data_t *tool_data)
{
    (void)initial_device_num, (void)tool_data;
    set_callback = (ompt_set_callback_t)lookup("ompt_set_callback");
    if (!set_callback)
        return 0;
    set_callback(ompt_callback_thread_begin, (ompt_callback_t)on_thread_begin);
    set_callback(ompt_callback_thread_end, (ompt_callback_t)on_thread_end);
    set_callback(ompt_callback_parallel_begin, (ompt_callback_t)on_parallel_begin);
    set_callback(ompt_callback_parallel_end, (ompt_callback_t)on_parallel_end);
    set_callback(ompt_callback_implicit_task, (ompt_callback_t)on_implicit_task);
    set_callback(ompt_callback_sync_region, (ompt_callback_t)on_sync_region);
    atomic_store(&tool_active, 1);
    return 1; /* keep the tool */
}

static void tool_finalize(ompt_data_t *tool_data)
{
    (void)tool_data;
}

/* The runtime's entry point into the tool (OpenMP 5.0, 4.5.1). Only active
 * under opprof record (the agent's result dir is set). */
__attribute__((visibility("default"))) ompt_start_tool_result_t *ompt_start_tool(unsigned int omp_version,
                                                                                 const char *version);
ompt_start_tool_result_t *ompt_start_tool(unsigned int omp_version, const char *version)
{
    static ompt_start_tool_result_t result = {tool_initialize, tool_finalize, {0}};
    const char *dir = getenv(OPR_ENV_DIR);
    if (!dir || !dir[0])
        return NULL;
    if (atomic_load(&tool_active) || !omp_regions_wanted())
        return NULL; /* a second runtime in the same process: one is enough; or record --no-openmp-regions */
    const char *ctx = getenv(OPR_ENV_OMP_CONTEXT);
    if (ctx && ctx[0])
        context_interval_ns = strtoull(ctx, NULL, 10);
    runtime_omp_version = omp_version;
    if (version) {
        strncpy(runtime_version, version, sizeof runtime_version - 1);
        runtime_version[sizeof runtime_version - 1] = '\0';
    }
    return &result;
}
#endif /* HAVE_OMP_TOOLS_H */

/* ---- writer side ------------------------------------------------------ */

static void emit_region(struct region_entry *e, agent_emit_fn emit)
{
    uint32_t flags = (e->parent ? OPR_OMP_REGION_NESTED : 0) |
                     (e->ctx_repeated && !contexts_lost ? OPR_OMP_REGION_CONTEXT_REPEATED : 0);
    struct opr_omp_region r = {e->id, e->parent, e->begin_ns, e->end_ns, e->opener_tid, e->requested, e->actual, flags};
    emit(OPR_REC_OMP_REGION, &r, sizeof r, NULL, 0);
    e->emitted = 1;
}

/* The table's pages up to byte `upto`, and 16 pages past it, written before
 * they are read (see regions_backed). Ids come in order, so slots fill the
 * table from its start; one that jumps ahead backs the pages before it too. */
static void back_regions(size_t upto)
{
    if (upto <= regions_backed)
        return;
    const size_t page = 4096, table = (size_t)REGION_TABLE_SIZE * sizeof *regions;
    size_t end = ((upto + page - 1) & ~(page - 1)) + 16 * page;
    end = end < table ? end : table;
    volatile char *bytes = (volatile char *)regions;
    for (size_t off = (regions_backed + page - 1) & ~(page - 1); off < end; off += page)
        bytes[off] = 0; /* zero already: calloc's fresh pages; the write is what counts */
    regions_backed = end;
}

static struct region_entry *region_slot(uint64_t id)
{
    if (!regions) {
        regions = calloc(REGION_TABLE_SIZE, sizeof *regions);
        if (!regions)
            return NULL;
    }
    if (id > region_id_max)
        region_id_max = id;
    struct region_entry *e = &regions[id & (REGION_TABLE_SIZE - 1)];
    back_regions((size_t)((const char *)(e + 1) - (const char *)regions));
    return e;
}

/* The first id whose slot may be written: see region_id_max. */
static uint64_t region_id_low(void)
{
    return region_id_max >= REGION_TABLE_SIZE ? region_id_max - REGION_TABLE_SIZE + 1 : 0;
}

void ompt_writer_context_lost(void)
{
    contexts_lost = true;
}

void ompt_writer_note_sample_region(uint64_t id, agent_emit_fn emit)
{
    if (id & AGENT_OMP_OUTSIDE_BODY)
        return; /* a team thread in the runtime, not in a region body */
    struct region_entry *e = region_slot(id);
    if (!e)
        return;
    if (e->id != id) {
        if (e->id > id)
            return; /* too old: forgotten */
        memset(e, 0, sizeof *e); /* its BEGIN is still in a ring */
        e->id = id;
    }
    e->referenced = 1;
    if (e->begun && e->end_ns && !e->emitted)
        emit_region(e, emit);
}

static void process_event(const struct omp_thread_state *s, const struct omp_ev *ev, agent_emit_fn emit)
{
    struct region_entry *e = region_slot(ev->id);
    if (!e)
        return;
    if (ev->kind == EV_BEGIN || ev->kind == EV_BEGIN_REPEATED) {
        uint8_t referenced = e->id == ev->id ? e->referenced : 0;
        memset(e, 0, sizeof *e);
        e->id = ev->id;
        e->referenced = referenced;
        e->begun = 1;
        e->ctx_repeated = ev->kind == EV_BEGIN_REPEATED;
        if (e->ctx_repeated)
            tick.contexts_repeated++;
        e->begin_ns = omp_event_ns_at_anchor(ev->time); /* taken at this drain's start */
        e->parent = ev->parent;
        e->opener_tid = s->tid;
        e->requested = ev->arg;
        tick.regions_begun++;
        if (ev->parent)
            tick.nested++;
        if (ev->arg > tick.max_requested)
            tick.max_requested = ev->arg;
    } else if (ev->kind == EV_END && e->id == ev->id && e->begun) {
        e->end_ns = omp_event_ns_at_anchor(ev->time);
        e->actual = ev->arg;
        uint64_t d = e->end_ns > e->begin_ns ? e->end_ns - e->begin_ns : 0;
        tick.regions_ended++;
        tick.region_ns += d;
        tick.team_ns += d * (e->actual ? e->actual : 1);
        if (e->actual > tick.max_team)
            tick.max_team = e->actual;
        if (e->referenced && !e->emitted)
            emit_region(e, emit);
    }
}

void ompt_writer_drain(agent_emit_fn emit, bool final)
{
    if (!atomic_load(&tool_active))
        return;
    struct omp_clock_anchor anchor = omp_event_anchor_take();
    uint64_t now = anchor.ns, now_tsc = anchor.tsc;
    double ns_per_tick = anchor.ns_per_tick; /* body times are in ticks */
    if (!info_emitted) {
        struct opr_omp_info info = {now, runtime_omp_version, (uint32_t)strlen(runtime_version)};
        emit(OPR_REC_OMP_INFO, &info, sizeof info, runtime_version, info.text_len);
        info_emitted = true;
        last_tick_ns = now;
    }
    for (struct omp_thread_state *s = atomic_load(&threads_head); s; s = s->next) {
        int state = atomic_load(&s->state);
        uint64_t h = atomic_load_explicit(&s->head, memory_order_acquire);
        uint64_t t = atomic_load_explicit(&s->tail, memory_order_relaxed);
        for (; t != h; t++)
            process_event(s, &s->ring[t & (RING_SIZE - 1)], emit);
        atomic_store_explicit(&s->tail, t, memory_order_release);
        uint64_t dropped = atomic_load_explicit(&s->dropped, memory_order_relaxed);
        if (dropped > s->writer_dropped_seen) {
            uint64_t lost = dropped - s->writer_dropped_seen;
            tick.events_lost = lost > UINT32_MAX - tick.events_lost ? UINT32_MAX : tick.events_lost + (uint32_t)lost;
            s->writer_dropped_seen = dropped;
        }
        /* Work so far, including the open part of a body in progress. */
        uint64_t w = atomic_load_explicit(&s->work_ticks, memory_order_relaxed);
        uint64_t b = atomic_load_explicit(&s->body_begin_tsc, memory_order_relaxed);
        if (b && now_tsc > b)
            w += now_tsc - b;
        if (w > s->writer_work_seen && ns_per_tick > 0) {
            tick.work_ns += (uint64_t)((double)(w - s->writer_work_seen) * ns_per_tick);
            s->writer_work_seen = w;
        }
        if (state == 1) {
            s->writer_work_seen = atomic_load(&s->work_ticks);
            atomic_store(&s->state, 2); /* drained: a new thread may take it */
        }
    }
    if (final && regions) {
        /* Regions still open at the end, if samples were taken in them. */
        for (uint64_t id = region_id_low(); id <= region_id_max; id++) {
            struct region_entry *e = &regions[id & (REGION_TABLE_SIZE - 1)];
            if (e->referenced && e->begun && !e->emitted)
                emit_region(e, emit);
        }
    }
    tick.time_ns = now;
    tick.interval_ns = now - last_tick_ns;
    int alive = atomic_load(&alive_threads);
    tick.omp_threads = alive > 0 ? (uint32_t)alive : 0;
    emit(OPR_REC_OMP_TICK, &tick, sizeof tick, NULL, 0);
    memset(&tick, 0, sizeof tick);
    last_tick_ns = now;
}

void ompt_atfork_child(void)
{
    /* Only the forking thread survives: its state stays, the others' rings
     * are drained of the parent's events and marked ended. */
    for (struct omp_thread_state *s = atomic_load(&threads_head); s; s = s->next) {
        atomic_store(&s->tail, atomic_load(&s->head));
        s->writer_work_seen = atomic_load(&s->work_ticks);
        s->writer_dropped_seen = atomic_load(&s->dropped);
        if (s != my_state)
            atomic_store(&s->state, 2);
        else
            s->tid = gettid_now();
        s->have_last = false; /* the child's stream has its own stack ids */
        atomic_store(&s->hook_ticks, 0); /* the child's stream counts its own */
    }
    if (regions)
        for (uint64_t id = region_id_low(); id <= region_id_max; id++)
            memset(&regions[id & (REGION_TABLE_SIZE - 1)], 0, sizeof *regions);
    memset(&tick, 0, sizeof tick);
    info_emitted = false;
    contexts_lost = false;
}

