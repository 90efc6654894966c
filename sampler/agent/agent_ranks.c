/*
 * sampler/agent/agent_ranks.c — what a rank of a parallel job needs beyond CPU
 * samples: which rank this process is (RANK record) and where its Python
 * threads waited while blocked (OFFCPU records).
 *
 * Why off-CPU time: a torch.distributed rank waiting in a gloo all_reduce
 * blocks its thread on a condition variable, so the CPU-time timer never
 * samples the wait. The writer's schedstat poll (agent_threads.c) already
 * knows, per thread and interval, the time on a CPU and on a runqueue; the
 * rest of the interval the thread was blocked. For a thread that runs Python
 * we also want the Python stack it is blocked in ("all_reduce"): the handler
 * has read that thread's state before, so it leaves (tid -> PyThreadState)
 * in a fixed table here, and the poll walks the blocked thread's frame chain
 * from it (agent_python_capture_thread: the same walker as the handler's and
 * attach's, sampler/common/python_walk.c, with a reader that copies each
 * piece with process_vm_readv). A
 * blocked thread does not change its frames; if it wakes up during the walk
 * and frees a frame, the copy fails instead of faulting, and at worst the
 * stack is that of a moment later.
 *
 * agent_tstate_remember() is SIGNAL-HANDLER CODE (atomics only, no malloc).
 * The setenv/putenv/unsetenv wrappers run in the workload's threads; the
 * rest runs on the writer thread.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "sampler/agent/agent.h"

/* The stack each thread was blocked in at the previous poll: a wait that
 * ends between two polls (state R at the second) is charged to it, since it
 * is the same wait continued. Writer only. */
#define BLOCKED_SLOTS 256
static struct blocked { uint32_t tid, py_stack_plus1; uint64_t time_ns; char state; } blocked[BLOCKED_SLOTS];

/* ---- tid -> thread state, filled by the handler ------------------------- */

#define TSTATE_SLOTS 1024 /* Python threads per process we can follow */
#define TSTATE_PROBES 32

static _Atomic uint32_t tstate_tid[TSTATE_SLOTS];
static _Atomic uint64_t tstate_ptr[TSTATE_SLOTS];
static __thread uint64_t remembered_tstate; /* this thread's entry is up to date */

static unsigned slot_of(uint32_t tid) { return (tid * 2654435761u) & (TSTATE_SLOTS - 1); }

void agent_tstate_remember(uint32_t tid, uint64_t ts)
{
    if (remembered_tstate == ts || tid == 0)
        return;
    unsigned h = slot_of(tid);
    for (unsigned i = 0; i < TSTATE_PROBES; i++, h = (h + 1) & (TSTATE_SLOTS - 1)) {
        uint32_t cur = atomic_load_explicit(&tstate_tid[h], memory_order_acquire);
        if (cur == 0) {
            uint32_t expected = 0;
            if (!atomic_compare_exchange_strong(&tstate_tid[h], &expected, tid) && expected != tid)
                continue; /* another thread took the slot: probe on */
            cur = tid;
        }
        if (cur == tid) {
            atomic_store_explicit(&tstate_ptr[h], ts, memory_order_release);
            remembered_tstate = ts;
            return;
        }
    }
    /* Table full around here: this thread's waits are counted without a stack. */
}

uint64_t agent_tstate_lookup(uint32_t tid)
{
    unsigned h = slot_of(tid);
    for (unsigned i = 0; i < TSTATE_PROBES; i++, h = (h + 1) & (TSTATE_SLOTS - 1)) {
        uint32_t cur = atomic_load_explicit(&tstate_tid[h], memory_order_acquire);
        if (cur == 0)
            return 0;
        if (cur == tid)
            return atomic_load_explicit(&tstate_ptr[h], memory_order_acquire);
    }
    return 0;
}

void agent_tstate_forget(uint32_t tid)
{
    unsigned h = slot_of(tid);
    for (unsigned i = 0; i < TSTATE_PROBES; i++, h = (h + 1) & (TSTATE_SLOTS - 1)) {
        uint32_t cur = atomic_load_explicit(&tstate_tid[h], memory_order_acquire);
        if (cur == 0)
            return;
        if (cur == tid) {
            /* The slot keeps its tid (probe chains stay intact); a zero state
             * reads as unknown until the handler sees the thread again. */
            atomic_store_explicit(&tstate_ptr[h], 0, memory_order_release);
            return;
        }
    }
}

/* Once Python is found (agent_python_probe, before it turns the handlers'
 * Python walks on): back the table's pages (12 KB), so that
 * the handlers' first remember does not fault on them, twice (a read maps
 * the zero page, the compare-and-swap then faults again): 2-3 faults a
 * PyTorch run in the handler, ~2-15 us each on a VM. MADV_POPULATE_WRITE
 * changes no byte (a handler may be writing); on Linux < 5.14 it fails and
 * the faults stay. A fork child's reset writes every slot anyway. */
void agent_tstate_prefault(void)
{
    static bool backed;
    if (backed)
        return;
    backed = true;
    (void)agent_populate(tstate_tid, sizeof tstate_tid);
    (void)agent_populate(tstate_ptr, sizeof tstate_ptr);
}

void agent_tstate_reset(void)
{
    for (unsigned i = 0; i < TSTATE_SLOTS; i++) {
        atomic_store(&tstate_tid[i], 0);
        atomic_store(&tstate_ptr[i], 0);
    }
    remembered_tstate = 0; /* only the forking thread survives, and it is ours */
    memset(blocked, 0, sizeof blocked);
}

/* ---- RANK record -------------------------------------------------------- */
/* The writer thread must not call getenv: another thread may be in setenv,
 * which reallocates (and frees) the environment array (Open MPI's MPI_Init
 * sets dozens of variables; a concurrent getenv crashed 1 run in 3). So the
 * agent keeps its own copy of the rank variables: read with getenv while the
 * process has one thread (constructor, fork child), then updated by the
 * setenv/putenv/unsetenv wrappers below (a program that sets
 * os.environ["RANK"] itself, as torch.multiprocessing workers do). */

#define RANK_VARS 16
#define RANK_VALUE_MAX 24

static pthread_mutex_t rank_env_lock = PTHREAD_MUTEX_INITIALIZER;
static char rank_env_value[RANK_VARS][RANK_VALUE_MAX]; /* "" = unset */
static _Atomic unsigned rank_env_generation;
static unsigned rank_env_seen = ~0u;

static int rank_var_index(const char *name, size_t len)
{
    for (size_t i = 0; i < RANK_VARS; i++) {
        const char *v = opr_rank_variable(i);
        if (!v)
            return -1;
        if (strlen(v) == len && memcmp(v, name, len) == 0)
            return (int)i;
    }
    return -1;
}

static void rank_env_store(int i, const char *value)
{
    pthread_mutex_lock(&rank_env_lock);
    snprintf(rank_env_value[i], RANK_VALUE_MAX, "%s", value ? value : "");
    atomic_fetch_add(&rank_env_generation, 1);
    pthread_mutex_unlock(&rank_env_lock);
}

/* Single-threaded moments only (constructor, fork child). */
static void rank_env_read_all(void)
{
    for (size_t i = 0; i < RANK_VARS && opr_rank_variable(i); i++) {
        const char *v = getenv(opr_rank_variable(i));
        snprintf(rank_env_value[i], RANK_VALUE_MAX, "%s", v ? v : "");
    }
    atomic_fetch_add(&rank_env_generation, 1);
}

struct rank_env_copy {
    char value[RANK_VARS][RANK_VALUE_MAX];
};

static const char *lookup_copy(const char *name, void *ctx)
{
    const struct rank_env_copy *c = ctx;
    int i = rank_var_index(name, strlen(name));
    return i >= 0 && c->value[i][0] ? c->value[i] : NULL;
}

typedef int (*setenv_fn)(const char *, const char *, int);
typedef int (*putenv_fn)(char *);
typedef int (*unsetenv_fn)(const char *);

__attribute__((visibility("default"))) int setenv(const char *name, const char *value, int overwrite)
{
    static setenv_fn real;
    if (!real)
        real = (setenv_fn)dlsym(RTLD_NEXT, "setenv");
    int rc = real(name, value, overwrite);
    int i = rc == 0 ? rank_var_index(name, strlen(name)) : -1;
    if (i >= 0)
        rank_env_store(i, getenv(name)); /* this thread's own read, right after its write */
    return rc;
}

__attribute__((visibility("default"))) int putenv(char *string)
{
    static putenv_fn real;
    if (!real)
        real = (putenv_fn)dlsym(RTLD_NEXT, "putenv");
    int rc = real(string);
    const char *eq = strchr(string, '=');
    int i = rc == 0 && eq ? rank_var_index(string, (size_t)(eq - string)) : -1;
    if (i >= 0)
        rank_env_store(i, eq + 1);
    return rc;
}

__attribute__((visibility("default"))) int unsetenv(const char *name)
{
    static unsetenv_fn real;
    if (!real)
        real = (unsetenv_fn)dlsym(RTLD_NEXT, "unsetenv");
    int rc = real(name);
    int i = rc == 0 ? rank_var_index(name, strlen(name)) : -1;
    if (i >= 0)
        rank_env_store(i, NULL);
    return rc;
}

static struct opr_rank rank_emitted;
static bool rank_emitted_any;

void agent_ranks_poll(agent_emit_fn emit, bool force)
{
    if (force) {
        /* A new stream: the constructor or a fork child, one thread only. */
        pthread_mutex_init(&rank_env_lock, NULL);
        rank_env_read_all();
        rank_emitted_any = false;
    }
    unsigned gen = atomic_load(&rank_env_generation);
    if (gen == rank_env_seen)
        return;
    rank_env_seen = gen;
    struct rank_env_copy copy;
    pthread_mutex_lock(&rank_env_lock);
    memcpy(copy.value, rank_env_value, sizeof copy.value);
    pthread_mutex_unlock(&rank_env_lock);
    struct opr_rank r;
    opr_rank_from_lookup(&r, lookup_copy, &copy);
    if (r.rank == OPR_RANK_UNSET)
        return; /* not a rank (yet): no record */
    if (rank_emitted_any && r.rank == rank_emitted.rank && r.source == rank_emitted.source &&
        r.local_rank == rank_emitted.local_rank && r.world_size == rank_emitted.world_size)
        return;
    r.time_ns = agent_now_ns();
    emit(OPR_REC_RANK, &r, sizeof r, NULL, 0);
    rank_emitted = r;
    rank_emitted_any = true;
}

/* ---- OFFCPU records ------------------------------------------------------ */

#define OFFCPU_MIN_NS 1000000ull /* shorter gaps are scheduler noise */

/* The task state letter from /proc/self/task/<tid>/stat ('R', 'S', 'D', ...),
 * or 0 when the thread is gone. The file is kept open in *fd and re-read
 * with pread: a running thread's schedstat lags by up to a scheduler tick
 * (4 ms at HZ=250, measured), so about half the polls of a busy Python
 * thread look like a 1 ms gap and ask for its state; open + read + close
 * cost ~9 us each time, a pread ~3.4 us. */
static char task_state(uint32_t tid, int *fd)
{
    char buf[512];
    if (*fd < 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%u/stat", tid);
        *fd = open(path, O_RDONLY | O_CLOEXEC);
        if (*fd < 0)
            return 0;
    }
    ssize_t n = pread(*fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* the comm may contain spaces and ')' */
    return paren && paren[1] == ' ' ? paren[2] : 0;
}

/* Whether thread tid of this process is on a CPU now, told by its CPU clock
 * against schedstat's run time read just before (run_ns): schedstat adds a
 * running thread's current stretch only at the next tick or switch, the
 * clock adds it when read, and the two are equal for a thread off the CPU.
 * So a busy thread that only seems to have a gap (schedstat's lag) is told
 * 'R' by one clock read (~0.5 us) instead of a pread of its stat file
 * (~3.4 us); that read was most polls of a running Python thread. */
static bool thread_on_cpu_now(uint32_t tid, uint64_t run_ns)
{
    struct timespec ts;
    if (clock_gettime(agent_thread_cpu_clock(tid), &ts) != 0)
        return false;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec > run_ns;
}

static struct blocked *blocked_slot(uint32_t tid)
{
    return &blocked[slot_of(tid) & (BLOCKED_SLOTS - 1)];
}

void agent_offcpu_note(agent_emit_fn emit, uint64_t now_ns, uint64_t interval_ns, uint32_t tid, uint64_t delta_run_ns,
                       uint64_t delta_wait_ns, uint64_t delta_slices, uint64_t run_ns, int *stat_fd)
{
    if (interval_ns == 0 || delta_run_ns + delta_wait_ns + OFFCPU_MIN_NS > interval_ns)
        return;
    uint64_t ts = agent_tstate_lookup(tid);
    if (ts == 0)
        return; /* not a Python thread we have seen: no stack to charge the wait to */
    struct blocked *b = blocked_slot(tid);
    /* Blocked at the last poll and not switched in since (schedstat's run
     * time and count of times switched in have not moved): it has not run,
     * so its frames are the ones read then and are not read again: a thread
     * asleep in a long wait (a DataLoader worker's queue, time.sleep) cost
     * the writer ~10 process_vm_readv calls every 10 ms. Nor is its state
     * read: a thread that has not run cannot have entered another wait, so
     * it is still in that one or woken and not on a CPU yet, and this
     * interval's blocked time (interval - run - runqueue wait) is charged to
     * that wait's stack either way. The clock read and the pread of its stat
     * file were the dearest part of a sleeping Python thread's poll (~3.4 us
     * of it). */
    bool same_wait = b->tid == tid && b->time_ns == now_ns - interval_ns && delta_run_ns == 0 && delta_slices == 0 &&
                     (b->state == 'S' || b->state == 'D');
    char state = same_wait ? b->state : thread_on_cpu_now(tid, run_ns) ? 'R' : task_state(tid, stat_fd);
    uint32_t py_stack_plus1;
    if (same_wait) {
        py_stack_plus1 = b->py_stack_plus1;
        b->time_ns = now_ns;
        agent_writer_counts.offcpu_same_wait++;
    } else if (state == 'S' || state == 'D') {
        static struct py_frame_ref frames[OPR_MAX_PYFRAMES];
        unsigned n = agent_python_capture_thread(ts, frames, OPR_MAX_PYFRAMES, tid);
        if (n == 0)
            agent_tstate_forget(tid); /* exited and reused, or never valid */
        py_stack_plus1 = agent_writer_python_stack(frames, n);
        *b = (struct blocked){tid, py_stack_plus1, now_ns, state};
    } else if (b->tid == tid && b->time_ns == now_ns - interval_ns) {
        py_stack_plus1 = b->py_stack_plus1; /* woke up since the last poll: the wait it was in */
        b->tid = 0;
    } else {
        return; /* running, or gone, with no blocked stack to charge */
    }
    struct opr_offcpu o = {
        .time_ns = now_ns,
        .interval_ns = interval_ns,
        .offcpu_ns = interval_ns - delta_run_ns - delta_wait_ns,
        .tid = tid,
        .py_stack_id_plus1 = py_stack_plus1,
        .state = (uint32_t)(unsigned char)state,
    };
    emit(OPR_REC_OFFCPU, &o, sizeof o, NULL, 0);
}
