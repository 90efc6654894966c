/*
 * sampler/agent/agent_gomp.c — GNU libgomp seen from inside, without OMPT and
 * without replacing it.
 *
 * libgomp has no OMPT, and swapping in LLVM libomp runs another program
 * (docs/guide.md, "Threads and OpenMP"). Instead the agent defines libgomp's
 * region entry points unversioned: the dynamic linker binds a program's
 * versioned references (GOMP_parallel@GOMP_4.0, from gcc -fopenmp code and
 * libtorch_cpu) to the first definition in the global scope, the preloaded
 * agent's (checked: 50 of 50 and 20 of 20 regions). Each wrapper forwards to
 * the runtime's own function with a trampoline around the outlined function,
 * so every team thread's region-body begin and end, the team size, the
 * region id and the opener's calling context are known exactly, while
 * libgomp creates, schedules and parks its threads as it always does.
 *
 * What is recorded goes through the same rings as the OMPT callbacks
 * (agent_ompt.c: omp_rec_*), so the stream carries the same OMP_REGION /
 * OMP_CONTEXT / OMP_TICK records and sample tails. A team thread outside a
 * body has AGENT_OMP_OUTSIDE_BODY set in agent_omp_region: its samples are
 * runtime time (spin, barrier, fork/join, idle wait), whatever libgomp's
 * (stripped) symbols say.
 *
 * HOT PATH (not signal context): one id, two ring pushes per region for the
 * opener and four TSC reads per team thread, no write to shared memory; the
 * per-region struct lives on the opener's stack (GOMP_parallel returns only
 * after the region ended) or, for the old GOMP_parallel_start/_end pair, in
 * a small per-thread array.
 * No malloc, no lock after the first call (dlsym resolves each entry once).
 *
 * A program that never calls GOMP_* sees nothing: no thread, no allocation.
 * Under the opt-in libomp swap the real GOMP_* are libomp's, whose OMPT
 * callbacks record the regions: the wrappers then only forward.
 */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "sampler/agent/agent.h"

#define EXPORT __attribute__((visibility("default")))
#define START_DEPTH 8 /* nested GOMP_parallel_start levels tracked per thread */

typedef void (*gomp_fn)(void *);

/* libgomp's entry points as gcc calls them (libgomp/libgomp_g.h). */
EXPORT void GOMP_parallel(gomp_fn fn, void *data, unsigned num_threads, unsigned flags);
EXPORT unsigned GOMP_parallel_reductions(gomp_fn fn, void *data, unsigned num_threads, unsigned flags);
EXPORT void GOMP_parallel_sections(gomp_fn fn, void *data, unsigned num_threads, unsigned count, unsigned flags);
#define DECL_CHUNK(name)                                                                                           \
    EXPORT void name(gomp_fn fn, void *data, unsigned num_threads, long start, long end, long incr, long chunk,   \
                     unsigned flags);
#define DECL_RUNTIME(name)                                                                                         \
    EXPORT void name(gomp_fn fn, void *data, unsigned num_threads, long start, long end, long incr, unsigned flags);
#define DECL_CHUNK_START(name)                                                                                     \
    EXPORT void name(gomp_fn fn, void *data, unsigned num_threads, long start, long end, long incr, long chunk);
DECL_CHUNK(GOMP_parallel_loop_static)
DECL_CHUNK(GOMP_parallel_loop_dynamic)
DECL_CHUNK(GOMP_parallel_loop_guided)
DECL_CHUNK(GOMP_parallel_loop_nonmonotonic_dynamic)
DECL_CHUNK(GOMP_parallel_loop_nonmonotonic_guided)
DECL_RUNTIME(GOMP_parallel_loop_runtime)
DECL_RUNTIME(GOMP_parallel_loop_nonmonotonic_runtime)
DECL_RUNTIME(GOMP_parallel_loop_maybe_nonmonotonic_runtime)
EXPORT void GOMP_parallel_end(void);
EXPORT void GOMP_parallel_start(gomp_fn fn, void *data, unsigned num_threads);
EXPORT void GOMP_parallel_sections_start(gomp_fn fn, void *data, unsigned num_threads, unsigned count);
DECL_CHUNK_START(GOMP_parallel_loop_static_start)
DECL_CHUNK_START(GOMP_parallel_loop_dynamic_start)
DECL_CHUNK_START(GOMP_parallel_loop_guided_start)
EXPORT void GOMP_parallel_loop_runtime_start(gomp_fn fn, void *data, unsigned num_threads, long start, long end,
                                             long incr);

/* One region as the trampoline sees it. Team threads only read it: the
 * opener writes it before the fork and, for the team size, from inside the
 * region. A counter of arrivals that every team thread added to took the
 * line from the opener's cache at each region: ~80 % of the trampoline's
 * own samples on omp_regions_gomp (perf record -F 20000, 100,000 regions). */
struct gomp_region {
    gomp_fn fn;
    void *data;
    uint64_t id;
    uint64_t saved;     /* the opener's agent_omp_region before the region */
    const void *opener; /* the opener's opener_mark: tells its trampoline from the others' */
    unsigned actual;    /* the team size, as the opener sees it in the region (0: not read) */
    uint64_t open_ticks; /* the opener's hook time before the fork that the team waited through */
};

/* Its address is this thread's (see struct gomp_region). */
static __thread char opener_mark;

/* ---- finding the runtime's own functions ---------------------------------- */

static _Atomic int record_mode; /* 0 unknown, 1 record (GNU libgomp under opprof), 2 forward only */

struct find_arg {
    const char *sym;
    void *found;
};

/* A runtime dlopen'ed RTLD_LOCAL (Python extension modules: import torch) is
 * not in the global scope RTLD_NEXT searches: look through every loaded
 * object whose name says OpenMP runtime (libgomp-<hash>.so.1 included). */
static int find_in_object(struct dl_phdr_info *info, size_t size, void *argp)
{
    (void)size;
    struct find_arg *a = argp;
    const char *n = info->dlpi_name;
    if (!n || !(strstr(n, "libgomp") || strstr(n, "libomp") || strstr(n, "libiomp")))
        return 0;
    void *h = dlopen(n, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    a->found = dlsym(h, a->sym);
    dlclose(h); /* NOLOAD took a reference: give it back */
    return a->found != NULL;
}

static bool is_own(void *f)
{
    Dl_info mine, theirs;
    return dladdr((void *)is_own, &mine) && dladdr(f, &theirs) && mine.dli_fbase == theirs.dli_fbase;
}

static void *resolve(const char *sym, void *_Atomic *cache)
{
    void *f = atomic_load_explicit(cache, memory_order_acquire);
    if (f)
        return f;
    /* Agent time in the workload's thread, before the wrapper's own hook
     * time starts: 30,000-34,000 TSC ticks (12-13 us) for GOMP_parallel,
     * ~12,000 for omp_get_max_threads (omp_regions_gomp, 10 runs). */
    uint64_t t0 = omp_rec_hook_now();
    f = dlsym(RTLD_NEXT, sym);
    if (!f || is_own(f)) {
        struct find_arg a = {sym, NULL};
        dl_iterate_phdr(find_in_object, &a);
        f = a.found && !is_own(a.found) ? a.found : NULL;
    }
    if (!f) {
        /* Only reachable when the program calls GOMP_* and no runtime defines
         * it: the program could not have run without opprof either. */
        static const char msg[] = "opprof agent: a GOMP_* function was called but no loaded OpenMP runtime "
                                  "defines it\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        abort();
    }
    if (atomic_load(&record_mode) == 0) {
        /* Record only for GNU libgomp under opprof record: libomp and
         * libiomp5 report through OMPT (double records otherwise). */
        Dl_info di;
        const char *dir = getenv(OPR_ENV_DIR);
        bool gomp = dladdr(f, &di) && di.dli_fname && strstr(di.dli_fname, "libgomp");
        int mode = gomp && dir && dir[0] && omp_regions_wanted() ? 1 : 2;
        int zero = 0;
        if (atomic_compare_exchange_strong(&record_mode, &zero, mode) && mode == 1)
            omp_rec_gomp_activate();
    }
    atomic_store_explicit(cache, f, memory_order_release);
    omp_rec_setup_time(omp_rec_hook_now() - t0);
    return f;
}

bool omp_regions_wanted(void)
{
    const char *v = getenv(OPR_ENV_OMP_REGIONS);
    return !(v && strcmp(v, "0") == 0);
}

#define REAL(type, name)                                                                                           \
    static void *_Atomic real_##name;                                                                             \
    __typeof__(type) f_##name = (__typeof__(type))resolve(#name, &real_##name)

static bool recording(void) { return atomic_load_explicit(&record_mode, memory_order_relaxed) == 1; }

/* ---- team threads ------------------------------------------------------------ */

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void thread_exit(void *v)
{
    (void)v;
    omp_rec_thread_end();
}

static void make_exit_key(void) { pthread_key_create(&exit_key, thread_exit); }

/* The team's size, from inside a region (libgomp's own count: what an OMPT
 * runtime reports as the implicit task's actual parallelism). */
static unsigned team_size(void)
{
    REAL(int (*)(void), omp_get_num_threads);
    int n = f_omp_get_num_threads();
    return n > 0 ? (unsigned)n : 0;
}

/* Runs the outlined function for every team thread, the opener included.
 * Four TSC reads: the hook's start, the body's two edges, the hook's end. */
static void trampoline(void *arg)
{
    struct gomp_region *r = arg;
    uint64_t t = omp_rec_hook_now();
    /* Everything read from r is read here, once: after the body its line may
     * be back in the opener's cache (its stack), a miss for each worker. */
    uint64_t saved = agent_omp_region, id = r->id;
    bool opener = r->opener == &opener_mark;
    if (!omp_rec_thread_seen()) {
        /* First region of this thread: its state is given back at its exit. */
        pthread_once(&exit_once, make_exit_key);
        pthread_setspecific(exit_key, (void *)1);
    }
    agent_omp_region = id;
    omp_rec_body_begin(&t); /* the agent's part before the body ends here */
    r->fn(r->data);
    omp_rec_body_end(&t);
    if (opener) /* after the body: a late worker may still be reading r at its start */
        r->actual = team_size();
    /* A worker goes back to waiting in the runtime: mark it so; the opener
     * (and a nested opener) gets back what it had. */
    agent_omp_region = saved ? saved : (AGENT_OMP_OUTSIDE_BODY | id);
    omp_rec_hook_time(&t); /* and after it */
}

/*
 * The team's wait: the opener's hooks outside the region (open_region before
 * the fork, close_region after the join) run while the team's other threads
 * wait for the next region in libgomp, and they spin there, not sleep: by
 * default GOMP_SPINCOUNT rounds of a pause instruction (300,000; 1,000 when
 * there are more threads than CPUs) before a futex wait. That spinning is
 * CPU the program would not have spent: on omp_regions_gomp --regions
 * 200000 --size 200 (2 threads, ~3.7 us a region) the hooks' outside cost
 * (CPU with them less CPU with the wrappers only forwarding) was about twice
 * the hook time alone, and the opener's part was ~75 % of the hook time
 * (~215 of ~280 ns a region). So each region charges its opener's outside
 * hook time once per other team thread, as an estimate the overhead line
 * names apart: the close always (the team has just left the join barrier),
 * the open only when this thread closed its previous region less than
 * TEAM_SPINS_TICKS ago (the team still spinning: 65,536 TSC ticks, 16-33 us
 * at 2-4 GHz, inside even the throttled 1,000 rounds); never when libgomp
 * does not spin (OMP_WAIT_POLICY=passive, GOMP_SPINCOUNT=0). The trampolines'
 * time needs no such charge: every team thread pays its own, side by side.
 */
#define TEAM_SPINS_TICKS 65536u
/* this opener's last close_region end, TSC (initial-exec: no __tls_get_addr call at each region) */
static __thread uint64_t last_close_tsc __attribute__((tls_model("initial-exec")));
static _Atomic uint64_t team_wait_ticks;
static _Atomic int team_spins = -1; /* -1: the environment not read yet */

static bool libgomp_spins(void)
{
    int s = atomic_load_explicit(&team_spins, memory_order_relaxed);
    if (s >= 0)
        return s;
    /* libgomp's own reading (env.c): GOMP_SPINCOUNT wins, then the policy */
    const char *count = getenv("GOMP_SPINCOUNT"), *policy = getenv("OMP_WAIT_POLICY");
    if (count && count[0])
        s = strtoull(count, NULL, 10) != 0 || strncasecmp(count, "inf", 3) == 0;
    else
        s = !(policy && strncasecmp(policy, "passive", 7) == 0);
    atomic_store_explicit(&team_spins, s, memory_order_relaxed);
    return s;
}

static void gomp_team_wait(const struct gomp_region *r, uint64_t close_ticks, uint64_t now)
{
    last_close_tsc = now;
    if (r->actual > 1 && libgomp_spins())
        atomic_fetch_add_explicit(&team_wait_ticks, (r->open_ticks + close_ticks) * (r->actual - 1),
                                  memory_order_relaxed);
}

uint64_t gomp_team_wait_ns(void)
{
    uint64_t ticks = atomic_load_explicit(&team_wait_ticks, memory_order_relaxed);
    return ticks ? (uint64_t)((double)ticks * omp_tsc_ns_per_tick()) : 0;
}

void gomp_atfork_child(void)
{
    atomic_store(&team_wait_ticks, 0); /* the child's stream counts its own */
}

static unsigned requested_team(unsigned num_threads)
{
    if (num_threads)
        return num_threads;
    REAL(int (*)(void), omp_get_max_threads);
    int n = f_omp_get_max_threads();
    return n > 0 ? (unsigned)n : 0;
}

/* The opener, before handing the region to the runtime. */
static void open_region(struct gomp_region *r, gomp_fn fn, void *data, unsigned num_threads)
{
    /* Before the hook time starts: its first call resolves
     * omp_get_max_threads, which resolve() counts itself. */
    unsigned requested = requested_team(num_threads);
    uint64_t t = omp_rec_hook_now();
    r->fn = fn;
    r->data = data;
    r->opener = &opener_mark;
    r->actual = 0;
    r->id = omp_rec_region_begin(requested, t);
    r->saved = agent_omp_region;
    /* Fork and join are runtime time for the opener too. */
    agent_omp_region = AGENT_OMP_OUTSIDE_BODY | r->id;
    uint64_t t0 = t;
    omp_rec_hook_time(&t);
    r->open_ticks = t0 - last_close_tsc < TEAM_SPINS_TICKS ? t - t0 : 0;
}

static void close_region(struct gomp_region *r)
{
    uint64_t t = omp_rec_hook_now(), t0 = t;
    omp_rec_region_end(r->id, r->actual, t);
    agent_omp_region = r->saved;
    omp_rec_hook_time(&t);
    gomp_team_wait(r, t - t0, t);
}

/* ---- GOMP 4.0+ combined entry points: return after the region ended -------- */

EXPORT void GOMP_parallel(gomp_fn fn, void *data, unsigned num_threads, unsigned flags)
{
    REAL(void (*)(gomp_fn, void *, unsigned, unsigned), GOMP_parallel);
    if (!recording()) {
        f_GOMP_parallel(fn, data, num_threads, flags);
        return;
    }
    struct gomp_region r;
    open_region(&r, fn, data, num_threads);
    f_GOMP_parallel(trampoline, &r, num_threads, flags);
    close_region(&r);
}

EXPORT unsigned GOMP_parallel_reductions(gomp_fn fn, void *data, unsigned num_threads, unsigned flags)
{
    REAL(unsigned (*)(gomp_fn, void *, unsigned, unsigned), GOMP_parallel_reductions);
    if (!recording())
        return f_GOMP_parallel_reductions(fn, data, num_threads, flags);
    struct gomp_region r;
    open_region(&r, fn, data, num_threads);
    unsigned ret = f_GOMP_parallel_reductions(trampoline, &r, num_threads, flags);
    close_region(&r);
    return ret;
}

EXPORT void GOMP_parallel_sections(gomp_fn fn, void *data, unsigned num_threads, unsigned count, unsigned flags)
{
    REAL(void (*)(gomp_fn, void *, unsigned, unsigned, unsigned), GOMP_parallel_sections);
    if (!recording()) {
        f_GOMP_parallel_sections(fn, data, num_threads, count, flags);
        return;
    }
    struct gomp_region r;
    open_region(&r, fn, data, num_threads);
    f_GOMP_parallel_sections(trampoline, &r, num_threads, count, flags);
    close_region(&r);
}

/* GOMP_parallel_loop_{static,dynamic,guided,nonmonotonic_*}: with a chunk size. */
#define LOOP_CHUNK(name)                                                                                           \
    EXPORT void name(gomp_fn fn, void *data, unsigned num_threads, long start, long end, long incr, long chunk,   \
                     unsigned flags)                                                                             \
    {                                                                                                            \
        REAL(void (*)(gomp_fn, void *, unsigned, long, long, long, long, unsigned), name);                        \
        if (!recording()) {                                                                                      \
            f_##name(fn, data, num_threads, start, end, incr, chunk, flags);                                     \
            return;                                                                                              \
        }                                                                                                        \
        struct gomp_region r;                                                                                    \
        open_region(&r, fn, data, num_threads);                                                                  \
        f_##name(trampoline, &r, num_threads, start, end, incr, chunk, flags);                                   \
        close_region(&r);                                                                                        \
    }
/* GOMP_parallel_loop_*runtime: the schedule comes from OMP_SCHEDULE, no chunk. */
#define LOOP_RUNTIME(name)                                                                                         \
    EXPORT void name(gomp_fn fn, void *data, unsigned num_threads, long start, long end, long incr, unsigned flags) \
    {                                                                                                            \
        REAL(void (*)(gomp_fn, void *, unsigned, long, long, long, unsigned), name);                              \
        if (!recording()) {                                                                                      \
            f_##name(fn, data, num_threads, start, end, incr, flags);                                            \
            return;                                                                                              \
        }                                                                                                        \
        struct gomp_region r;                                                                                    \
        open_region(&r, fn, data, num_threads);                                                                  \
        f_##name(trampoline, &r, num_threads, start, end, incr, flags);                                          \
        close_region(&r);                                                                                        \
    }

LOOP_CHUNK(GOMP_parallel_loop_static)
LOOP_CHUNK(GOMP_parallel_loop_dynamic)
LOOP_CHUNK(GOMP_parallel_loop_guided)
LOOP_CHUNK(GOMP_parallel_loop_nonmonotonic_dynamic)
LOOP_CHUNK(GOMP_parallel_loop_nonmonotonic_guided)
LOOP_RUNTIME(GOMP_parallel_loop_runtime)
LOOP_RUNTIME(GOMP_parallel_loop_nonmonotonic_runtime)
LOOP_RUNTIME(GOMP_parallel_loop_maybe_nonmonotonic_runtime)

/* ---- GOMP 1.0 pairs: *_start returns at once, the opener then calls fn
 * itself and closes with GOMP_parallel_end (code from older gcc). ---------- */

static __thread struct gomp_region start_regions[START_DEPTH];
static __thread unsigned start_depth; /* may exceed START_DEPTH: those are forwarded untracked */

/* The slot for a new *_start region, NULL when nested too deep to track. */
static struct gomp_region *start_slot(void)
{
    unsigned d = start_depth++;
    return recording() && d < START_DEPTH ? &start_regions[d] : NULL;
}

/* After *_start returned: the opener's own body begins (it calls fn itself,
 * not through the trampoline), in the team. */
static void start_body(struct gomp_region *r)
{
    if (!r)
        return;
    uint64_t t = omp_rec_hook_now();
    r->actual = team_size();
    agent_omp_region = r->id;
    omp_rec_body_begin(&t);
}

EXPORT void GOMP_parallel_end(void)
{
    REAL(void (*)(void), GOMP_parallel_end);
    unsigned d = start_depth ? --start_depth : 0;
    struct gomp_region *r = recording() && d < START_DEPTH && start_regions[d].fn ? &start_regions[d] : NULL;
    if (r) {
        uint64_t t;
        omp_rec_body_end(&t);
        agent_omp_region = AGENT_OMP_OUTSIDE_BODY | r->id; /* the join */
        omp_rec_hook_time(&t);
    }
    f_GOMP_parallel_end();
    if (r) {
        close_region(r);
        r->fn = NULL;
    }
}

EXPORT void GOMP_parallel_start(gomp_fn fn, void *data, unsigned num_threads)
{
    REAL(void (*)(gomp_fn, void *, unsigned), GOMP_parallel_start);
    struct gomp_region *r = start_slot();
    if (!r) {
        f_GOMP_parallel_start(fn, data, num_threads);
        return;
    }
    open_region(r, fn, data, num_threads); /* the opener runs fn itself */
    f_GOMP_parallel_start(trampoline, r, num_threads);
    start_body(r);
}

EXPORT void GOMP_parallel_sections_start(gomp_fn fn, void *data, unsigned num_threads, unsigned count)
{
    REAL(void (*)(gomp_fn, void *, unsigned, unsigned), GOMP_parallel_sections_start);
    struct gomp_region *r = start_slot();
    if (!r) {
        f_GOMP_parallel_sections_start(fn, data, num_threads, count);
        return;
    }
    open_region(r, fn, data, num_threads);
    f_GOMP_parallel_sections_start(trampoline, r, num_threads, count);
    start_body(r);
}

#define LOOP_CHUNK_START(name)                                                                                     \
    EXPORT void name(gomp_fn fn, void *data, unsigned num_threads, long start, long end, long incr, long chunk)   \
    {                                                                                                            \
        REAL(void (*)(gomp_fn, void *, unsigned, long, long, long, long), name);                                  \
        struct gomp_region *r = start_slot();                                                                    \
        if (!r) {                                                                                                \
            f_##name(fn, data, num_threads, start, end, incr, chunk);                                            \
            return;                                                                                              \
        }                                                                                                        \
        open_region(r, fn, data, num_threads);                                                                   \
        f_##name(trampoline, r, num_threads, start, end, incr, chunk);                                           \
        start_body(r);                                                                                           \
    }

LOOP_CHUNK_START(GOMP_parallel_loop_static_start)
LOOP_CHUNK_START(GOMP_parallel_loop_dynamic_start)
LOOP_CHUNK_START(GOMP_parallel_loop_guided_start)

EXPORT void GOMP_parallel_loop_runtime_start(gomp_fn fn, void *data, unsigned num_threads, long start, long end,
                                             long incr)
{
    REAL(void (*)(gomp_fn, void *, unsigned, long, long, long), GOMP_parallel_loop_runtime_start);
    struct gomp_region *r = start_slot();
    if (!r) {
        f_GOMP_parallel_loop_runtime_start(fn, data, num_threads, start, end, incr);
        return;
    }
    open_region(r, fn, data, num_threads);
    f_GOMP_parallel_loop_runtime_start(trampoline, r, num_threads, start, end, incr);
    start_body(r);
}
