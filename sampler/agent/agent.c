/*
 * sampler/agent/agent.c — the agent's life cycle and the per-sample capture.
 *
 * SIGNAL-HANDLER CODE: agent_handle_sample() and everything it calls
 * (capture_native_stack, fp_walk, the queue) run inside the SIGTRAP handler of
 * whatever thread was sampled. No malloc, no locks, no stdio, no errno left
 * changed. Stacks are walked with the writer's unwind tables
 * (unwind_table.c); libunwind is the one library called, for the stacks
 * the tables cannot do: it is designed for signal context (we warm it up
 * in the constructor so that its one-time set-up is done, unwind_sample.c).
 *
 * How sampling works (see ../shared/design.md, "Recommended sampling design"):
 * the constructor opens one task-clock perf event on the calling thread with
 * inherit=1 + inherit_thread=1 (every thread created later gets a copy; child
 * processes do not), sigtrap=1 (each overflow sends a synchronous SIGTRAP to
 * the thread that overflowed) and remove_on_exec=1 (the kernel requires it for
 * sigtrap; the new image's agent opens its own event). A forked child opens
 * its own event in the atfork handler. So every thread is sampled without any
 * per-thread setup, and the sample is taken by the sampled thread itself.
 *
 * Kernel mode is sampled too (where perf_event_paranoid allows): a tick in a
 * page fault or a system call raises the SIGTRAP on the way back to user mode,
 * at the instruction that entered the kernel, so that code is charged. The
 * signal is queued as task work (TWA_RESUME), not made pending during a
 * blocking call: 0 EINTR in 3,000 epoll_wait/select/nanosleep calls between
 * faulting loops. One hazard: a tick inside execve raises its SIGTRAP in the
 * new image, whose SIGTRAP action is the default (core dump). Hence one event
 * per process (inherit_thread: a posix_spawn or vfork child, whose exec we
 * cannot intercept, has no event), disabled before every exec we intercept.
 *
 * With -c N (OPR_ENV_LEADER) the same event counts another event instead of
 * task-clock (cycles, page-faults, ...): a sample every N of them, weight 1.
 */
#include <dlfcn.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h> /* sscanf in the constructor only */
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <x86intrin.h> /* __rdtsc */

#include "config.h" /* HAVE_STRUCT_PERF_EVENT_ATTR_SIG_DATA for perf_attr.h */
#include "sampler/agent/agent.h"
#include "sampler/common/perf_attr.h"
#include "sampler/agent/unwind_table.h"

#ifndef TRAP_PERF
#define TRAP_PERF 6
#endif

/* Marks our event's signals (perf_event_attr.sig_data -> siginfo si_perf_data). */
#define AGENT_SIG_COOKIE 0x6f7070726f66ULL /* "opprof" */

AGENT_HIDDEN struct agent_config agent_config;
AGENT_HIDDEN _Atomic uint64_t agent_samples_taken;
AGENT_HIDDEN _Atomic uint64_t agent_samples_lost;
AGENT_HIDDEN _Atomic int agent_accepting;
AGENT_HIDDEN _Atomic uint64_t agent_handler_ns;
AGENT_HIDDEN _Atomic uint64_t agent_samples_outside_window;
AGENT_HIDDEN _Atomic uint64_t agent_periods_taken;
AGENT_HIDDEN uint64_t agent_startup_cpu_ns;

static int perf_fd = -1; /* or TICK_NO_FD: sampling by --timer tick's timers */
#define TICK_NO_FD (-2)
static pid_t event_owner_pid; /* the process that opened perf_fd */
static bool agent_started;
static void stop_agent(bool clean);

static __thread pid_t cached_tid;

uint64_t agent_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: async-signal-safe */
    return agent_timespec_ns(&ts);
}

/* A pair read late (an interrupt or preemption between the two reads; the
 * vDSO's first call faulting its data page in) skews every TSC time converted
 * through it, so the tightest of three is kept. */
struct agent_clock_pair agent_clock_pair_now(void)
{
    struct agent_clock_pair best = {0, 0};
    uint64_t best_span = UINT64_MAX;
    for (int i = 0; i < 3; i++) {
        uint64_t a = __rdtsc();
        uint64_t ns = agent_now_ns();
        uint64_t b = __rdtsc();
        if (b >= a && b - a < best_span) {
            best_span = b - a;
            best = (struct agent_clock_pair){ns, a + (b - a) / 2};
        }
    }
    return best;
}

static pid_t current_tid(void)
{
    if (cached_tid == 0)
        cached_tid = (pid_t)syscall(SYS_gettid);
    return cached_tid;
}

/*
 * Sample weights, where only user mode may be sampled (perf_event_paranoid
 * >= 2 without CAP_PERFMON: agent_config.user_only). Each sample then stands
 * for the thread's CPU time, user and kernel, since its previous sample, in
 * timer periods: a tick that lands in kernel mode is dropped (a thread that
 * faults in fresh memory lost a third of its samples), and its time goes into
 * the weight of the thread's next user-mode sample, which charges it to the
 * code that runs after the fault or system call (an approximation, said so by
 * record and report). The remainder is carried, so the weights add up to the
 * thread's CPU time; the handler's own time is left out (charged to nobody).
 * With kernel mode sampled every sample weighs 1; with --timer tick the
 * timer gives the weight (tick_weight, below).
 *
 * charged_cpu_ns is 0 in a new thread, whose CPU clock starts at 0; the
 * opener thread and a forked child's thread set it when sampling starts.
 * A vfork child shares this TLS with its parent: its clock is below the
 * parent's charged time, and then nothing is written.
 */
static __thread uint64_t charged_cpu_ns;
static __thread bool charged_cpu_ours; /* this call updated charged_cpu_ns */
static __thread uint64_t handler_entry_cpu_ns; /* the thread's CPU clock when this handler began */

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) /* async-signal-safe (POSIX) */
        return 0;
    return agent_timespec_ns(&ts);
}

uint64_t agent_thread_cpu_ns(void) { return thread_cpu_ns(); }

static uint32_t take_sample_weight(void)
{
    uint64_t now = thread_cpu_ns(), period = agent_config.period_ns;
    charged_cpu_ours = false;
    handler_entry_cpu_ns = now;
    if (now == 0 || now < charged_cpu_ns || period == 0)
        return 1; /* no clock, a vfork child, or timer slack: one period */
    uint64_t periods = (now - charged_cpu_ns + period / 2) / period;
    if (periods == 0)
        periods = 1; /* a tick is at least one period of CPU time */
    if (periods > OPR_MAX_SAMPLE_WEIGHT)
        periods = OPR_MAX_SAMPLE_WEIGHT;
    charged_cpu_ns += periods * period;
    charged_cpu_ours = true;
    return (uint32_t)periods;
}

/* --timer tick: the periods of the thread's CPU clock this signal stands
 * for, from the timer itself. The kernel re-arms a CPU-time timer when its
 * signal is taken, past the thread's clock, and counts the periods it
 * stepped over in si_overrun (it carries the remainder in the next expiry).
 * A thread armed by the writer has its first expiry at one period of its
 * clock (agent_tick.c), so its first sample stands for its CPU time since it
 * began. No CPU-clock read (each a system call: the vDSO serves no thread
 * CPU clock; the handler's first costs 4-5 us cold on a VM): the median
 * handler on torch_train.py --timer tick went from 8.3-9.8 to 6.8-7.3 us
 * (three alternated pairs, 2026-12-03). The handler's own
 * time then goes into the next sample's weight, not to nobody (a handler
 * call per tick: ~0.2 % of the thread's CPU at 250 Hz), and the accounting
 * does not take it out twice (agent_writer.c). */
static uint32_t tick_weight(const siginfo_t *si)
{
    uint64_t periods = 1 + (si->si_overrun > 0 ? (uint64_t)si->si_overrun : 0);
    return periods > OPR_MAX_SAMPLE_WEIGHT ? OPR_MAX_SAMPLE_WEIGHT : (uint32_t)periods;
}

/* The handler's own CPU time is nobody's sample. Measured on the thread's
 * CPU clock, not the wall clock: a handler preempted on a busy host spends
 * wall time that is no CPU time, and skipping that much of the thread's
 * clock lost its weight (fault_split's touch_pages: 21.5 % for a true 24.0 %
 * beside other work, total weight 1,262 periods for 1.317 s of CPU). */
static void leave_handler_uncharged(void)
{
    if (!charged_cpu_ours)
        return;
    uint64_t now = thread_cpu_ns();
    if (now > handler_entry_cpu_ns)
        charged_cpu_ns += now - handler_entry_cpu_ns;
}

/*
 * glibc 2.36's siginfo_t does not name the TRAP_PERF fields; read them at the
 * kernel's layout: _sigfault { void *addr; union { ... struct { unsigned long
 * data; u32 type; u32 flags; } perf; } } which puts data at byte 24 on x86-64.
 */
static uint64_t siginfo_perf_data(const siginfo_t *si)
{
    uint64_t data;
    memcpy(&data, (const char *)si + 24, sizeof data);
    return data;
}

/* Reads one word of our own memory without risking a fault: the frame
 * pointer chain may point anywhere when the code was built without it. */
static bool read_word_safely(uint64_t addr, uint64_t *out)
{
    struct iovec local = {out, sizeof *out};
    struct iovec remote = {(void *)addr, sizeof *out};
    return syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0) == (long)sizeof *out;
}

/* --call-graph fp: walk saved rbp/return-address pairs. Stops at the first
 * frame pointer that does not move up the stack. */
static unsigned fp_walk(const ucontext_t *uc, uint64_t *pcs, unsigned max)
{
    unsigned n = 0;
    pcs[n++] = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    uint64_t fp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP];
    uint64_t sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
    while (n < max && fp >= sp && (fp & 7) == 0) {
        uint64_t next_fp, ret;
        if (!read_word_safely(fp, &next_fp) || !read_word_safely(fp + 8, &ret) || ret == 0)
            break;
        pcs[n++] = ret;
        if (next_fp <= fp)
            break;
        fp = next_fp;
    }
    return n;
}

/* The perf event's SIGTRAP (TRAP_PERF) or, with --timer tick, a thread
 * CPU-time timer's (SI_TIMER, agent_tick.c), each with our cookie. */
static bool is_our_signal(const siginfo_t *si)
{
    if (si->si_code == TRAP_PERF)
        return siginfo_perf_data(si) == AGENT_SIG_COOKIE;
    return si->si_code == SI_TIMER && agent_config.tick_timer &&
           (uint64_t)(uintptr_t)si->si_value.sival_ptr == AGENT_SIG_COOKIE;
}

bool agent_handle_sample(siginfo_t *si, void *ucontext)
{
    if (!is_our_signal(si))
        return false;
    if (agent_is_writer_thread())
        return true; /* ours, but our own writer thread */
    uint64_t entry_ns = agent_now_ns();
    /* Even a sample that is not recorded consumes the CPU time before it, so
     * that the next one does not carry it. */
    uint32_t weight = 1;
    if (agent_config.tick_timer && !agent_config.leader)
        weight = tick_weight(si);
    else if (agent_config.user_only && !agent_config.leader)
        weight = take_sample_weight();
    /* After the weight: its CPU-clock read (user mode only), the handler's
     * first system call and its dearest, is the handler's time in a timed
     * call as in the others, and the timing's reads are not (agent_cost.c). */
    struct agent_cost_timing timing; /* timing.cpu_ns 0: not one of the calls timed */
    agent_cost_handler_begin(&timing, entry_ns);
    /* CPU time this tick stands for, whether or not it is recorded: what is
     * left of the process's CPU time was never sampled (ACCOUNTING). */
    atomic_fetch_add_explicit(&agent_periods_taken, weight, memory_order_relaxed);
    if (!atomic_load_explicit(&agent_accepting, memory_order_acquire))
        return true; /* ours, but not wanted: starting or stopping */

    if (entry_ns < agent_config.window_start_ns ||
        (agent_config.window_end_ns && entry_ns >= agent_config.window_end_ns)) {
        /* --delay/--duration: outside the window the signal still arrives
         * (one inherited event serves every thread and cannot be re-armed per
         * thread); it is counted and returns at once. */
        atomic_fetch_add_explicit(&agent_samples_outside_window, 1, memory_order_relaxed);
        agent_counters_leave(); /* counts outside the window belong to no sample */
        return true;
    }
    /* Counters first and last (agent_counters.c): the handler's own work is
     * not charged to the workload. */
    struct agent_counter_snapshot counters;
    agent_counters_enter(&counters);
    atomic_fetch_add_explicit(&agent_samples_taken, 1, memory_order_relaxed);
    struct agent_slot *slot = agent_queue_claim();
    if (slot == NULL) {
        atomic_fetch_add_explicit(&agent_samples_lost, 1, memory_order_relaxed);
        agent_counters_leave();
        return true;
    }
    agent_counters_fill(slot, &counters);
    const ucontext_t *uc = ucontext;
    slot->time_ns = entry_ns;
    slot->tid = (uint32_t)current_tid();
    slot->flags = 0;
    slot->weight = weight;
    slot->defer = 0;
    switch (agent_config.call_graph) {
    case CALL_GRAPH_DWARF:
        /* The writer's tables, libunwind where they cannot (unwind_table.c). */
        slot->nframes = (uint16_t)agent_unwind_sample(uc, slot->pcs, OPR_MAX_FRAMES, &slot->flags, (int32_t)slot->tid,
                                                     &slot->defer);
        break;
    case CALL_GRAPH_FP:
        slot->nframes = (uint16_t)fp_walk(uc, slot->pcs, OPR_MAX_FRAMES);
        break;
    case CALL_GRAPH_NONE:
    default:
        slot->pcs[0] = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
        slot->nframes = 1;
        break;
    }
    slot->npy = agent_python_capture(agent_slot_py(slot), OPR_MAX_PYFRAMES, slot->tid);
    slot->omp_region = agent_omp_region; /* threading: OpenMP region (initial-exec TLS, ompt/ompt.h) */
    agent_queue_commit(slot);
    agent_writer_sample_queued(); /* a quiet process's writer sleeps long: the first sample ends it */
    agent_counters_leave();
    /* Our own cost, so that overhead is measured, not guessed (two vDSO
     * clock reads: ~40 ns). */
    uint64_t handler_ns = agent_now_ns() - entry_ns;
    atomic_fetch_add_explicit(&agent_handler_ns, handler_ns, memory_order_relaxed);
    leave_handler_uncharged(); /* a CPU-clock read too: inside the time measured */
    agent_cost_handler_end(&timing); /* the figure the report shows (agent_cost.c) */
    return true;
}

/* ------------------------------------------------------------------------- */
/* Start, stop, fork, exec, exit                                              */
/* ------------------------------------------------------------------------- */

static int open_timer_event_mode(bool user_only)
{
    struct opr_perf_attr full; /* attr, and room for sig_data with older headers */
    opr_perf_attr_init(&full);
    struct perf_event_attr *attr = &full.attr;
    if (agent_config.leader) {
        /* -c N: the same sigtrap event, counting another event (a hardware
         * counter, page faults, ...): a sample every leader_period of them. */
        attr->type = agent_config.leader_type;
        attr->config = agent_config.leader_config;
        attr->config1 = agent_config.leader_config1;
        attr->sample_period = agent_config.leader_period;
        user_only = user_only || agent_config.leader_user_only;
    } else {
        attr->type = PERF_TYPE_SOFTWARE;
        attr->config = PERF_COUNT_SW_TASK_CLOCK;
        attr->sample_period = agent_config.period_ns;
    }
    attr->inherit = 1;
    /* inherit_thread: threads of this process; a child process opens its own */
    opr_perf_attr_sigtrap(&full, AGENT_SIG_COOKIE);
    attr->exclude_kernel = user_only ? 1 : 0; /* see the top of this file */
    attr->exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &full, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* The launcher checked which mode the kernel allows (OPR_ENV_USER_ONLY); a
 * process that lost privileges since (setuid to a user) falls back to user
 * mode with weights. */
static int open_timer_event(void)
{
    if (agent_config.tick_timer) { /* no event: this thread's timer; the writer arms the others */
        event_owner_pid = getpid();
        return agent_tick_arm((uint32_t)current_tid(), AGENT_SIG_COOKIE, false) == 0 ? TICK_NO_FD : -1;
    }
    int fd = open_timer_event_mode(agent_config.user_only);
    if (fd < 0 && !agent_config.user_only && (errno == EACCES || errno == EPERM)) {
        agent_config.user_only = true;
        fd = open_timer_event_mode(true);
    }
    if (fd >= 0)
        event_owner_pid = getpid();
    return fd;
}

static void start_after_fork_in_child(void)
{
    if (!agent_started)
        return;
    /* The child has no event of its own yet (inherit_thread), but a SIGTRAP
     * of the parent's event may still be on its way to this thread: a sample
     * taken in the middle of agent_queue_reset() would claim a slot that the
     * reset then hands out again (the queue's head going backwards), and the
     * next claim would spin forever. So refuse samples and hold SIGTRAP until
     * the child's queue, writer and event are ready. */
    atomic_store_explicit(&agent_accepting, 0, memory_order_release);
    /* A fork child's start-up (new stream, writer thread, event) is cost the
     * workload would not have: measured for the overhead line. The child's
     * thread CPU clock starts near 0, so this is the child's own. */
    uint64_t startup_began = thread_cpu_ns();
    sigset_t trap, old;
    sigemptyset(&trap);
    sigaddset(&trap, SIGTRAP);
    pthread_sigmask(SIG_BLOCK, &trap, &old);
    cached_tid = 0;
    agent_counters_atfork_child(); /* the parent's per-thread counters are not ours */
    agent_unwind_atfork_child();   /* nor are the parent's unwinding counts */
    agent_queue_reset();
    agent_queue_prefault();    /* the ring's nursery, before the child's first claim (the writer is not up yet) */
    agent_tick_atfork_child(); /* POSIX timers are not inherited: before the child's writer may arm one */
    atomic_store(&agent_samples_taken, 0);
    atomic_store(&agent_samples_lost, 0);
    atomic_store(&agent_samples_outside_window, 0);
    atomic_store(&agent_periods_taken, 0);
    agent_writer_atfork_child(); /* new stream file, new writer thread */
    /* The parent's event fd is the parent's: this process opens its own,
     * after the writer thread exists so that the writer is not counted. The
     * child's thread is a new task whose CPU clock restarted; our set-up
     * above is no sample's time. */
    if (perf_fd >= 0)
        close(perf_fd);
    charged_cpu_ns = thread_cpu_ns();
    perf_fd = open_timer_event();
    agent_startup_cpu_ns = thread_cpu_ns() - startup_began;
    if (perf_fd == -1) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        stop_agent(true); /* keeps the stream (its PROCESS record) with no samples */
        return;
    }
    atomic_store_explicit(&agent_accepting, 1, memory_order_release);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void stop_agent(bool clean)
{
    /* A vfork child shares our memory but is not us: leave our state alone. */
    if (!agent_started || !agent_writer_owns_process())
        return;
    agent_started = false;
    atomic_store_explicit(&agent_accepting, 0, memory_order_release);
    /* Only the owner may disable: in a vfork child perf_fd names the parent's
     * event, and disabling it would stop sampling in the parent. */
    if (perf_fd >= 0 && getpid() == event_owner_pid)
        ioctl(perf_fd, PERF_EVENT_IOC_DISABLE, 0);
    if (perf_fd == TICK_NO_FD && getpid() == event_owner_pid)
        agent_tick_pause_all(true, AGENT_SIG_COOKIE);
    agent_writer_stop(clean);
}

__attribute__((constructor)) static void agent_init(void)
{
    const char *dir = getenv(OPR_ENV_DIR);
    if (dir == NULL || dir[0] == '\0' || strlen(dir) >= sizeof agent_config.result_dir)
        return; /* loaded by accident: do nothing at all */
    /* The constructor's CPU time is start-up cost of every process the
     * workload starts (500 quick forks or execs pay it 500 times): measured
     * for the overhead line. */
    uint64_t startup_began = thread_cpu_ns();
    strcpy(agent_config.result_dir, dir);
    const char *period = getenv(OPR_ENV_PERIOD);
    agent_config.period_ns = period ? strtoull(period, NULL, 10) : 1000000;
    if (agent_config.period_ns < 10000)
        agent_config.period_ns = 10000;
    const char *cg = getenv(OPR_ENV_CALLGRAPH);
    agent_config.call_graph = CALL_GRAPH_DWARF;
    if (cg && strcmp(cg, "fp") == 0)
        agent_config.call_graph = CALL_GRAPH_FP;
    else if (cg && strcmp(cg, "none") == 0)
        agent_config.call_graph = CALL_GRAPH_NONE;
    const char *window = getenv(OPR_ENV_WINDOW); /* "start_ns:end_ns" */
    if (window) {
        char *end;
        agent_config.window_start_ns = strtoull(window, &end, 10);
        if (*end == ':')
            agent_config.window_end_ns = strtoull(end + 1, NULL, 10);
    }
    const char *max_bytes = getenv(OPR_ENV_MAX_BYTES);
    agent_config.max_bytes = max_bytes ? strtoull(max_bytes, NULL, 10) : 0;
    const char *user_only = getenv(OPR_ENV_USER_ONLY);
    agent_config.user_only = user_only && strcmp(user_only, "1") == 0;
    const char *timer = getenv(OPR_ENV_TIMER);
    agent_config.tick_timer = timer && strcmp(timer, "tick") == 0;
    const char *leader = getenv(OPR_ENV_LEADER); /* "type:config:config1:exclude_kernel:period" */
    if (leader && leader[0]) {
        unsigned type, excl;
        unsigned long long config, config1, lperiod;
        if (sscanf(leader, "%u:%llx:%llx:%u:%llu", &type, &config, &config1, &excl, &lperiod) == 5 &&
            lperiod > 0) {
            agent_config.leader = true;
            agent_config.leader_type = type;
            agent_config.leader_config = config;
            agent_config.leader_config1 = config1;
            agent_config.leader_user_only = excl != 0;
            agent_config.leader_period = lperiod;
        }
    }

    agent_phdr_refresh();
    agent_unwind_init(); /* OPPROF_UNWIND, OPPROF_UNWIND_CHECK */
    agent_counters_init(); /* -e events to count per sample */
    agent_unwind_warm_up(); /* libunwind's set-up, outside any handler */

    if (agent_queue_init(AGENT_QUEUE_BYTES) != 0)
        return;
    /* The ring's first pages backed now, by this thread, before any claim:
     * left to the writer's first drain, they raced the workload's first
     * claims, and a claim that got there first took the fault itself, in a
     * handler or a region's opener (a 2 MB huge page: 55-100 us, and on this
     * VM once in a while 4.4-4.6 ms of CPU; omp_regions_gomp's first region
     * spent 4.5-8.7 ms in its context's claim in 3 of 25 runs). */
    agent_queue_prefault();
    if (agent_signals_install() != 0)
        return;
    /* The writer thread starts before the event is opened, so it is not
     * counted by the inherited event in this process. */
    if (agent_writer_start() != 0)
        return;
    agent_started = true;
    pthread_atfork(agent_writer_atfork_prepare, agent_writer_atfork_parent, start_after_fork_in_child);

    charged_cpu_ns = thread_cpu_ns(); /* CPU time before sampling starts is no sample's */
    perf_fd = open_timer_event();
    agent_startup_cpu_ns = thread_cpu_ns() - startup_began;
    if (perf_fd == -1) {
        /* The launcher checked perf_event_open already; reaching here means
         * this process differs (e.g. setuid). Keep the stream with a note. */
        stop_agent(true);
        return;
    }
    atomic_store_explicit(&agent_accepting, 1, memory_order_release);
}

/* The writer's thread poll lists a new thread (agent_threads.c). */
void agent_tick_arm_new_thread(uint32_t tid)
{
    if (agent_config.tick_timer && perf_fd == TICK_NO_FD && getpid() == event_owner_pid)
        agent_tick_arm(tid, AGENT_SIG_COOKIE, true);
}

__attribute__((destructor)) static void agent_fini(void)
{
    stop_agent(true);
}

/* ---- exec and _exit: flush before the image disappears ------------------ */

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execvp_fn)(const char *, char *const[]);
typedef int (*execvpe_fn)(const char *, char *const[], char *const[]);
typedef int (*execveat_fn)(int, char *const[], char *const[]); /* fexecve */
typedef int (*execveat_at_fn)(int, const char *, char *const[], char *const[], int);

/* Before exec the event stops (a tick inside execve would raise its SIGTRAP
 * in the new image, killing it: see the top of this file) and the writer
 * drains what it has; the new image gets a new stream (the same pid, the next
 * generation). If exec fails, sampling goes on. In a vfork child neither is
 * ours to touch: it has no event, and the writer is the parent's. */
static bool stop_event_before_exec(void)
{
    if (!agent_started || perf_fd == -1 || getpid() != event_owner_pid)
        return false;
    if (perf_fd == TICK_NO_FD)
        agent_tick_pause_all(true, AGENT_SIG_COOKIE);
    else
        ioctl(perf_fd, PERF_EVENT_IOC_DISABLE, 0);
    if (agent_writer_owns_process())
        agent_writer_flush();
    return true;
}

static int resume_after_failed_exec(bool stopped, int rc)
{
    int err = errno;
    if (stopped && perf_fd == TICK_NO_FD)
        agent_tick_pause_all(false, AGENT_SIG_COOKIE);
    else if (stopped)
        ioctl(perf_fd, PERF_EVENT_IOC_ENABLE, 0);
    errno = err;
    return rc;
}

#define FLUSH_BEFORE_EXEC() bool stopped_ = stop_event_before_exec()
#define AFTER_FAILED_EXEC(rc) resume_after_failed_exec(stopped_, (rc))

__attribute__((visibility("default"))) int execve(const char *path, char *const argv[], char *const envp[])
{
    static execve_fn real;
    if (!real)
        real = (execve_fn)dlsym(RTLD_NEXT, "execve");
    FLUSH_BEFORE_EXEC();
    return AFTER_FAILED_EXEC(real(path, argv, envp));
}

__attribute__((visibility("default"))) int execv(const char *path, char *const argv[])
{
    static execvp_fn real;
    if (!real)
        real = (execvp_fn)dlsym(RTLD_NEXT, "execv");
    FLUSH_BEFORE_EXEC();
    return AFTER_FAILED_EXEC(real(path, argv));
}

__attribute__((visibility("default"))) int execvp(const char *file, char *const argv[])
{
    static execvp_fn real;
    if (!real)
        real = (execvp_fn)dlsym(RTLD_NEXT, "execvp");
    FLUSH_BEFORE_EXEC();
    return AFTER_FAILED_EXEC(real(file, argv));
}

__attribute__((visibility("default"))) int execvpe(const char *file, char *const argv[], char *const envp[])
{
    static execvpe_fn real;
    if (!real)
        real = (execvpe_fn)dlsym(RTLD_NEXT, "execvpe");
    FLUSH_BEFORE_EXEC();
    return AFTER_FAILED_EXEC(real(file, argv, envp));
}

/* glibc's execl, execle and execlp reach execve through internal calls that
 * the wrappers above do not see: gather the arguments and take the same path.
 * fexecve and execveat are wrapped for the same reason. */
#define GATHER_EXECL_ARGS(arg0, ap, argv_name, envp_out)                      \
    size_t n_ = 1;                                                            \
    va_start(ap, arg0);                                                       \
    while (va_arg(ap, const char *) != NULL)                                  \
        n_++;                                                                 \
    va_end(ap);                                                               \
    char *argv_name[n_ + 1];                                                  \
    va_start(ap, arg0);                                                       \
    argv_name[0] = (char *)(arg0);                                            \
    for (size_t i_ = 1; i_ <= n_; i_++)                                       \
        argv_name[i_] = va_arg(ap, char *); /* the last one is NULL */       \
    envp_out;                                                                 \
    va_end(ap)

__attribute__((visibility("default"))) int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER_EXECL_ARGS(arg, ap, argv, (void)0);
    return execve(path, argv, environ);
}

__attribute__((visibility("default"))) int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    char **envp;
    GATHER_EXECL_ARGS(arg, ap, argv, envp = va_arg(ap, char **));
    return execve(path, argv, envp);
}

__attribute__((visibility("default"))) int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    GATHER_EXECL_ARGS(arg, ap, argv, (void)0);
    return execvp(file, argv);
}

__attribute__((visibility("default"))) int fexecve(int fd, char *const argv[], char *const envp[])
{
    static execveat_fn real;
    if (!real)
        real = (execveat_fn)dlsym(RTLD_NEXT, "fexecve");
    FLUSH_BEFORE_EXEC();
    return AFTER_FAILED_EXEC(real(fd, argv, envp));
}

/* glibc declares execveat from 2.34 on; 2.31 (bullseye) does not. */
int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags);
__attribute__((visibility("default"))) int execveat(int dirfd, const char *path, char *const argv[],
                                                    char *const envp[], int flags)
{
    static execveat_at_fn real;
    if (!real)
        real = (execveat_at_fn)dlsym(RTLD_NEXT, "execveat");
    FLUSH_BEFORE_EXEC();
    return AFTER_FAILED_EXEC(real ? real(dirfd, path, argv, envp, flags)
                                  : (int)syscall(SYS_execveat, dirfd, path, argv, envp, flags));
}

/* _exit skips destructors (multiprocessing children leave through os._exit):
 * finish the stream first, then leave with the workload's own status. */
__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
    stop_agent(true);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status)
{
    stop_agent(true);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}
