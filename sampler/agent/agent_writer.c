/*
 * sampler/agent/agent_writer.c — the agent's writer thread.
 *
 * Not signal-handler code: this runs on its own thread (all signals blocked
 * there, so the workload's handlers never run on it) and may allocate. One
 * exception, marked: agent_writer_sample_queued runs in the SIGTRAP handler.
 *
 * Every ~10 ms (longer while the process is quiet) it drains the handler
 * queue into this process's stream file (docs/format.md) through format/'s
 * stream writer, which writes each distinct call chain once as a STACK
 * record (samples refer to it by id, which keeps a sample at ~32 bytes on
 * disk instead of perf's kilobytes of stack copy), each Python code object
 * once as PYCODE and each distinct Python chain once as PYSTACK (names
 * resolved by agent_python.c), and what the report needs to symbolize later:
 * executable mappings (re-read from /proc/self/maps whenever a PC falls
 * outside the known ones, so dlopen'ed libraries are covered), their
 * build-ids, thread names and the command line.
 * This file decides what the agent writes and when: samples and their tails,
 * lost-sample counters, limits, the agent's cost, and an END record on a
 * clean shutdown.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sampler/agent/agent.h"
#include "sampler/agent/unwind_table.h"

#define DRAIN_INTERVAL_NS 10000000L
/* A quiet process (the last drain took no sample and the schedstat poll
 * found that no thread had run, waited on a runqueue, started or ended: a
 * DataLoader worker waiting on its queue, a rank blocked in a collective,
 * `time.sleep`) is drained at twice the interval, then four times, up to
 * QUIET_INTERVAL_MAX_NS; the first sample queued after it wakes the writer
 * (agent_writer_sample_queued), which drains and goes back to every 10 ms.
 * Why: each wake-up of the writer costs ~40 us on this VM while nothing
 * happens (the futex wait's own switch, a schedstat read, statm and
 * getrusage, each a cold system call after a sleep: the first schedstat
 * pread after 10 ms asleep took 7.7-10.2 us, a second one right after it
 * 0.9 us), so an idle process paid ~4 ms of CPU a second. Nothing is
 * lost by the longer sleep: a poll's off-CPU charge is the interval less
 * run and runqueue time, exact at any length, and a thread that has not
 * run keeps the stack it was blocked in; the threading timeline spreads
 * each poll's figures over its interval, which holds nothing but waiting. */
#define QUIET_INTERVAL_MAX_NS 80000000ull
/* A steady process (the schedstat poll found that no thread was switched
 * in, started or ended, and the RSS moved by at most 1 MiB with no new peak
 * and no major fault: a training loop's compute) is drained at twice the
 * interval: its polls then say nothing the samples do not, and the ~47 us of
 * fixed cost a wake-up takes on this VM (futex wait, schedstat, statm,
 * getrusage) was ~60 % of the writer's CPU in torch_train.py's loop. Any
 * change brings 10 ms back at the next drain, so a change is placed within
 * one longer interval at worst: a thread that wakes or waits for a CPU ends
 * the stretch at once (it was switched in); one that stops running is seen
 * at the next poll, its off-CPU time exact (schedstat's figures are
 * cumulative); RSS growth beyond 1 MiB is charged to that interval's
 * samples. Twice, not more: at 40 ms, growth that began inside a steady
 * stretch gave more of itself to the code before it (test_memory's Python
 * line: 10.6 % off; 3.0-4.7 % at 20 ms). A period's samples must also fit in
 * an eighth of the ring at the doubled period. */
#define STEADY_INTERVAL_MAX_NS 20000000ull
static uint64_t consumed_before; /* the ring's consumed bytes at the last drain's end */
static uint64_t drain_interval_ns = DRAIN_INTERVAL_NS;
/* Set while the writer sleeps longer than DRAIN_INTERVAL_NS; the handler's
 * first sample clears it and asks for a drain (drain_asked). */
static _Atomic int writer_quiet, drain_asked;
/* The stream file is written when 64 KiB are pending or 50 ms after the last
 * write, not at every drain: each write() on ext4 also updates the file's
 * times (a journalled inode change), ~10 % of the writer's CPU on PyTorch at
 * one write a drain (TSC-timed: 6.6 -> 1.9 ms a torch_train.py --steps 60
 * run). Exec, fork, stop and an exit write everything; a process killed by
 * a signal it does not handle (SIGKILL, a crash) loses at most the last
 * 50 ms, as it loses the samples still in the queue. */
#define WRITE_INTERVAL_NS 50000000ull
#define WRITE_PENDING_BYTES (64u * 1024u)

static pthread_mutex_t writer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t writer_thread;
static _Atomic int writer_stop;
static bool writer_running; /* writer_thread is a live thread of this process */
/* The writer thread's CPU time as it read it on its way out (0: not yet).
 * agent_writer_stop sets writer_stop with the lock held, then drains and
 * reads the writer's clock. A writer that had just let go of the lock (the
 * stop was waiting for it) checks writer_stop next without the lock and
 * returns: by the time of that read the thread and its clock (EINVAL) can
 * be gone. Then this is its CPU time; without it one torch_train.py run of
 * twelve reported "0.000 s writer thread CPU" and 1.53 % where the others
 * said 4.7-6.6 % (2026-12-02). */
static _Atomic uint64_t writer_exit_cpu_ns;
static __thread int in_writer_thread;

static int stream_fd = -1;
static pid_t stream_pid;
/* The stream of this process image, written through format/'s one writer;
 * created once, reset in a fork child. */
static struct opr_writer *writer;
static bool python_on;

static uint64_t samples_written, last_lost_reported, last_taken_reported;
/* collection limits (--delay/--duration/--max-size), see emit_limits_if_changed */
static uint64_t dropped_size_cap, first_drop_ns, last_outside_reported, last_dropped_reported;
static struct opr_live *live;
/* disk full: samples the stream could not take, and why (first error) */
static uint64_t unwritten_reported;
static int write_errno;

bool agent_is_writer_thread(void) { return in_writer_thread != 0; }
bool agent_writer_owns_process(void) { return stream_pid == getpid(); }

/* ---- the writer's callbacks ----------------------------------------------- */

/* Where the stream's bytes go: the stream file, counted for the launcher's
 * status line and for --max-size across all processes. */
static size_t write_stream_file(void *ctx, const void *bytes, size_t len)
{
    (void)ctx;
    size_t n = opr_write_all(stream_fd, bytes, len);
    if (n < len && write_errno == 0)
        write_errno = errno ? errno : EIO;
    if (live)
        __atomic_fetch_add(&live->bytes, n, __ATOMIC_RELAXED);
    return n;
}

/* New code was mapped: the unwinder's snapshot of the loaded objects must
 * know it, if the loader loaded it. Not taken again when the loader's counts
 * say nothing was loaded or unloaded since: every new stream writes all its
 * MAP records, and in a fork child (a PyTorch DataLoader worker) a new
 * snapshot read each of ~300 objects' headers through a page fault, 7-12 ms
 * of the child's CPU. */
static void maps_added(void *ctx)
{
    (void)ctx;
    agent_phdr_refresh_if_changed();
}

/* A PC outside the known code led the writer to new code (one mapping
 * queried, or the maps re-read): it may be a libpython loaded late, so look
 * for Python again. The writer counts its own reads and queries. */
static void late_code(void *ctx)
{
    (void)ctx;
    if (!python_on && (python_on = agent_python_probe()))
        agent_memmap_refresh();
}

/* The writer's view of frame i of a captured Python chain. */
static bool resolve_pyframe(void *ctx, const void *frames, unsigned i, struct opr_pycode_names *out,
                            bool need_names)
{
    (void)ctx;
    struct agent_pycode_info info;
    if (!agent_python_resolve((const struct py_frame_ref *)frames + i, &info, need_names, stream_pid))
        return false;
    out->line = info.line;
    if (need_names)
        py_code_names_copy(out, info.filename, info.qualname, info.first_line);
    return true;
}

/* Appends one record to the stream (the agent_emit_fn every part of the
 * agent writes its records with). */
static void emit(uint32_t type, const void *body, size_t body_len, const void *tail, size_t tail_len)
{
    if (writer)
        opr_writer_emit(writer, type, body, body_len, tail, tail_len);
}

/* Samples a short write lost are lost samples (reason: disk full): the live
 * counters move them from samples to unwritten, so the launcher's summary
 * never claims samples that are not on disk. */
static uint64_t last_write_ns; /* when flush_stream last wrote */

static void flush_stream(void)
{
    if (!writer)
        return;
    opr_writer_flush(writer);
    last_write_ns = agent_now_ns();
    uint64_t unwritten = opr_writer_unwritten_samples(writer);
    if (unwritten > unwritten_reported && live) {
        __atomic_fetch_add(&live->unwritten, unwritten - unwritten_reported, __ATOMIC_RELAXED);
        __atomic_fetch_sub(&live->samples, unwritten - unwritten_reported, __ATOMIC_RELAXED);
    }
    unwritten_reported = unwritten;
}

/* Returns PYSTACK id + 1 for the slot's Python frames, 0 when it has none. */
static uint32_t python_stack_for(struct agent_slot *slot)
{
    return agent_writer_python_stack(agent_slot_py(slot), slot->npy);
}

/* Also used by the off-CPU poll (agent_ranks.c) for a blocked thread's frames. */
uint32_t agent_writer_python_stack(const struct py_frame_ref *py, unsigned npy)
{
    struct opr_pyframe_key keys[OPR_MAX_PYFRAMES];
    unsigned n = py_frame_keys(py, npy, keys);
    return opr_writer_python_stack(writer, keys, n, py);
}

/* ---- draining ------------------------------------------------------------ */

static void emit_lost_if_changed(bool force)
{
    uint64_t lost = atomic_load(&agent_samples_lost);
    uint64_t taken = atomic_load(&agent_samples_taken);
    if (!force && lost == last_lost_reported)
        return;
    struct opr_lost l = {agent_now_ns(), lost, taken};
    emit(OPR_REC_LOST, &l, sizeof l, NULL, 0);
    if (live)
        __atomic_fetch_add(&live->lost, lost - last_lost_reported, __ATOMIC_RELAXED);
    last_lost_reported = lost;
    last_taken_reported = taken;
}

/* --max-size: true once the streams of the whole result dir (every process
 * adds to the shared live counter), plus what this process has buffered and
 * extra bytes it is about to write, would reach the cap less this process's
 * closing records (END, cost, accounting, the final thread and memory
 * readings, UNWIND, LIMITS: 1,064 bytes plus 80 a sampled thread, the last
 * ten records of a capped known_split run with AGENT_CPU's drain counts;
 * 1 KB reserved let that run pass the cap by 8 bytes; 1.25 KB plus 80 a
 * thread reserved). So a single process's stream
 * stays under the cap; with several, each reserves its own closing records
 * only, and the dir may pass the cap by the others' (docs/opprof.1). */
static uint64_t threads_noted; /* threads this image wrote a THREAD record for */

static bool size_cap_reached_with(uint64_t extra)
{
    if (agent_config.max_bytes == 0)
        return false;
    uint64_t total = live ? __atomic_load_n(&live->bytes, __ATOMIC_RELAXED) : opr_writer_bytes(writer);
    uint64_t reserve = 1280 + 80 * threads_noted;
    return total + opr_writer_pending(writer) + extra + reserve >= agent_config.max_bytes;
}

/* Whether one drain's periodic records (SCHED_TICK, MEM_TICK, LIMITS, LOST,
 * UNWIND, OMP_TICK, counters: ~600 bytes and ~32 a thread) still fit before
 * the closing reserve. Checked against the cap alone, a drain that began
 * just short of the reserve wrote them into it, and the closing records
 * then passed the cap: 65,552 bytes for a 64 KiB cap in a CI run
 * (test_limits; two drains' SCHED_TICK, LIMITS and UNWIND after the last
 * sample). */
static bool periodic_cap_reached(void)
{
    return size_cap_reached_with(768 + 80 * threads_noted);
}

/* The most one sample can add: SAMPLE with its tails and a COUNTER_SAMPLE, a
 * new STACK (or STACK_TAIL, 8 bytes more) of n frames, and for Python frames
 * a new PYSTACK with a PYCODE per frame (names of up to ~256 bytes). */
static uint64_t sample_bytes_bound(const struct agent_slot *slot, unsigned n)
{
    return 64 + (uint64_t)slot->nctr * 24 + 24 + 8ull * n + 24 + (uint64_t)slot->npy * (16 + 24 + 256);
}

/* Past --max-size the periodic records (OpenMP ticks, unwinder counts,
 * counters of exited threads) are read and dropped: they grow with wall
 * time, not samples. The closing drain still writes their totals. */
static void emit_nothing(uint32_t type, const void *body, size_t body_len, const void *tail, size_t tail_len)
{
    (void)type, (void)body, (void)body_len, (void)tail, (void)tail_len;
}

static void note_size_cap_drop(uint64_t time_ns)
{
    if (dropped_size_cap++ == 0)
        first_drop_ns = time_ns;
}

/* One LIMITS record whenever the counts moved (forced at the end when any
 * limit was set), so the report can say what the window and the cap left out. */
static void emit_limits_if_changed(bool force)
{
    uint64_t outside = atomic_load(&agent_samples_outside_window);
    bool limited = agent_config.window_start_ns || agent_config.window_end_ns || agent_config.max_bytes;
    if (!limited || (!force && outside == last_outside_reported && dropped_size_cap == last_dropped_reported))
        return;
    struct opr_limits l = {agent_now_ns(), outside, dropped_size_cap, first_drop_ns};
    /* Past --max-size only the closing LIMITS is written: one per drain kept
     * a capped stream growing by 40 bytes every 10 ms (27 of them, 1080
     * bytes, in a 1.5 s known_split run with a 64K cap). */
    if (force || !periodic_cap_reached())
        emit(OPR_REC_LIMITS, &l, sizeof l, NULL, 0);
    if (live) {
        __atomic_fetch_add(&live->outside_window, outside - last_outside_reported, __ATOMIC_RELAXED);
        __atomic_fetch_add(&live->dropped_size_cap, dropped_size_cap - last_dropped_reported, __ATOMIC_RELAXED);
    }
    last_outside_reported = outside;
    last_dropped_reported = dropped_size_cap;
}

/* COUNTER_SAMPLE for the SAMPLE just emitted, when the handler read counters. */
static void emit_counter_sample(const struct agent_slot *slot)
{
    if (slot->nctr == 0 || slot->nctr > OPR_MAX_COUNTERS)
        return;
    struct opr_counter_sample cs = {slot->nctr, 0};
    emit(OPR_REC_COUNTER_SAMPLE, &cs, sizeof cs, slot->ctr, slot->nctr * sizeof slot->ctr[0]);
}

/* threading/OpenMP: an opener's stack at region begin (regions that repeat
 * it say so in their OMP_REGION: agent_ompt.c). */
static void emit_omp_context(const struct agent_slot *slot, uint32_t stack_id, uint32_t py_plus1)
{
    /* time_ns holds capture_context's event time (agent_ompt.c) */
    struct opr_omp_context c = {slot->omp_region, omp_rec_event_ns(slot->time_ns), slot->tid, stack_id, py_plus1, 0};
    emit(OPR_REC_OMP_CONTEXT, &c, sizeof c, NULL, 0);
}

/* Caller holds writer_lock. */
static uint64_t drain_locked(void)
{
    uint64_t drained = 0;
    struct agent_slot *slot;
    if (python_on)
        agent_memmap_maybe_refresh();
    while ((slot = agent_queue_peek()) != NULL) {
        unsigned n = slot->nframes ? slot->nframes : 1;
        if (n > OPR_MAX_FRAMES)
            n = OPR_MAX_FRAMES;
        const uint64_t *pcs = slot->pcs;
        uint16_t flags = slot->flags;
        if (slot->defer) { /* a walk the handler left to us (unwind_defer.c) */
            static uint64_t finished[OPR_MAX_FRAMES]; /* writer lock held */
            n = unwind_defer_finish(slot->defer, slot->pcs, n, finished, OPR_MAX_FRAMES, &flags);
            pcs = finished;
        }
        if (size_cap_reached_with(sample_bytes_bound(slot, n))) {
            if (slot->flags & AGENT_SLOT_OMP_CONTEXT) /* not a sample; its repeats must not name an older one */
                ompt_writer_context_lost();
            else
                note_size_cap_drop(slot->time_ns);
            agent_queue_release();
            continue;
        }
        int64_t id = opr_writer_stack_id(writer, pcs, n);
        if (slot->flags & AGENT_SLOT_OMP_CONTEXT) {
            /* threading/OpenMP: an opener's stack at region begin, not a sample */
            if (id >= 0)
                emit_omp_context(slot, (uint32_t)id, python_stack_for(slot));
            else
                ompt_writer_context_lost();
        } else if (id >= 0) {
            if (opr_writer_note_thread(writer, slot->tid)) {
                threads_noted++;
                if (live)
                    __atomic_fetch_add(&live->threads, 1, __ATOMIC_RELAXED);
            }
            struct opr_sample s = {slot->time_ns, slot->tid, (uint32_t)id, flags,
                                   slot->weight ? slot->weight : 1};
            uint32_t py = python_stack_for(slot);
            /* threading/OpenMP: the region tail only when the thread was in one */
            if (slot->omp_region)
                ompt_writer_note_sample_region(slot->omp_region, emit);
            opr_writer_sample(writer, &s, py, slot->omp_region);
            emit_counter_sample(slot); /* per-sample counters: right after its SAMPLE */
            drained++;
        } else {
            atomic_fetch_add(&agent_samples_lost, 1); /* out of memory: counted, not hidden */
        }
        agent_queue_release();
    }
    const char *note = agent_python_take_note();
    if (note)
        opr_writer_note(writer, note);
    /* threading/OpenMP: schedstat poll and OMPT rings (agent_ompt.h). Past
     * --max-size the periodic ticks stop too: they grow with wall time, not
     * with samples, and kept a capped dir growing on a slow host (89 KB for
     * a 64 KB cap). Their counts are cumulative, so the final tick at exit
     * still gives every thread's totals. */
    bool periodic_room = !periodic_cap_reached();
    if (periodic_room)
        agent_threads_poll(emit, false);
    agent_ranks_poll(emit, false); /* ranks: variables set after start (os.environ["RANK"]) */
    if (periodic_room)
        agent_memory_poll(emit, false); /* memory: RSS and page faults (agent_memory.c); not past --max-size */
    /* the closing drain (writer_stop set) writes whatever the cap allows */
    agent_emit_fn periodic = !periodic_room && !atomic_load(&writer_stop) ? emit_nothing : emit;
    ompt_writer_drain(periodic, false);
    agent_counters_reap(periodic, false); /* per-sample counters of exited threads */
    samples_written += drained;
    if (live && drained)
        __atomic_fetch_add(&live->samples, drained, __ATOMIC_RELAXED);
    emit_lost_if_changed(false);
    emit_limits_if_changed(false);
    agent_unwind_poll(periodic); /* unwind tables: build what samples asked for; UNWIND counts */
    if (opr_writer_pending(writer) >= WRITE_PENDING_BYTES || agent_now_ns() - last_write_ns >= WRITE_INTERVAL_NS)
        flush_stream();
    return drained;
}

/* The next sleep: longer while the process stays quiet (see
 * QUIET_INTERVAL_MAX_NS), back to DRAIN_INTERVAL_NS at the first sample
 * or thread that moved. */
static void next_drain_interval(uint64_t drained)
{
    uint64_t consumed = agent_queue_consumed(), used = consumed - consumed_before;
    consumed_before = consumed;
    /* past --max-size the poll is not made, and what it last said is old */
    bool polled = !periodic_cap_reached();
    if (drained == 0 && polled && agent_threads_quiet()) {
        drain_interval_ns =
            drain_interval_ns * 2 > QUIET_INTERVAL_MAX_NS ? QUIET_INTERVAL_MAX_NS : drain_interval_ns * 2;
        atomic_store_explicit(&writer_quiet, 1, memory_order_release);
        agent_writer_counts.quiet_drains++;
        return;
    }
    atomic_store_explicit(&writer_quiet, 0, memory_order_relaxed);
    if (polled && agent_threads_steady() && !agent_memory_moved() && used * 2 <= agent_queue_capacity() / 8) {
        drain_interval_ns =
            drain_interval_ns * 2 > STEADY_INTERVAL_MAX_NS ? STEADY_INTERVAL_MAX_NS : drain_interval_ns * 2;
        agent_writer_counts.steady_drains++;
    } else {
        drain_interval_ns = DRAIN_INTERVAL_NS;
    }
}

/* SIGNAL-HANDLER CODE: an atomic exchange and, once per quiet stretch,
 * agent_wake_writer's futex wake. */
void agent_writer_sample_queued(void)
{
    if (atomic_load_explicit(&writer_quiet, memory_order_relaxed) &&
        atomic_exchange_explicit(&writer_quiet, 0, memory_order_acq_rel)) {
        atomic_store_explicit(&drain_asked, 1, memory_order_release);
        agent_wake_writer();
    }
}

/* The writer posts its tid before its creator goes on: see
 * agent_threads_set_writer for why no poll may list the writer. */
static sem_t writer_started;

static void *writer_main(void *arg)
{
    (void)arg;
    in_writer_thread = 1;
    agent_threads_set_writer((uint32_t)syscall(SYS_gettid));
    sem_post(&writer_started);
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    while (!atomic_load(&writer_stop)) {
        agent_queue_prefault(); /* before the producers reach fresh pages */
        agent_unwind_prefault();         /* and before the handlers reach their walk memos' */
        agent_phdr_refresh_if_changed(); /* libraries dlopen'ed since the last drain */
        uint64_t deadline = agent_now_ns() + drain_interval_ns;
        /* a handler asked for a table, or missed a mapping: now, not at the drain */
        while (agent_unwind_wait(deadline)) {
            pthread_mutex_lock(&writer_lock);
            if (!atomic_load(&writer_stop)) {
                agent_unwind_serve();
                if (python_on || agent_config.call_graph == CALL_GRAPH_DWARF)
                    agent_memmap_maybe_refresh(); /* the table of what handlers may read */
                if (ompt_drain_wanted_take())     /* an OpenMP opener's event ring is half full */
                    ompt_writer_drain(periodic_cap_reached() ? emit_nothing : emit, false);
            }
            pthread_mutex_unlock(&writer_lock);
            if (atomic_exchange(&drain_asked, 0))
                break; /* a sample after a quiet stretch: drain now */
        }
        pthread_mutex_lock(&writer_lock);
        uint64_t drained = 0;
        if (!atomic_load(&writer_stop)) {
            drained = drain_locked();
            agent_writer_counts.drains++;
        }
        next_drain_interval(drained);
        pthread_mutex_unlock(&writer_lock);
    }
    atomic_store(&writer_exit_cpu_ns, agent_thread_cpu_ns());
    return NULL;
}

/* CPU time the writer thread has used (read from another thread through its
 * clock id), or what it read on its way out once it has ended. */
static uint64_t writer_cpu_ns(void)
{
    clockid_t cid;
    struct timespec ts;
    if (writer_running && pthread_getcpuclockid(writer_thread, &cid) == 0 && clock_gettime(cid, &ts) == 0)
        return agent_timespec_ns(&ts);
    return atomic_load(&writer_exit_cpu_ns);
}

/* ---- life cycle ---------------------------------------------------------- */

static void map_live_counters(void)
{
    char path[sizeof agent_config.result_dir + 16];
    snprintf(path, sizeof path, "%s/" OPR_LIVE_FILE, agent_config.result_dir);
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW); /* the dir may be hostile: never through a link */
    if (fd < 0)
        return;
    void *m = mmap(NULL, sizeof(struct opr_live), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m != MAP_FAILED)
        live = m;
}

/* Writer thread (agent_threads.c's status read): see opr_writer_thread_name_seen. */
void agent_writer_thread_name_seen(uint32_t tid, const char *name)
{
    if (writer && stream_fd >= 0)
        opr_writer_thread_name_seen(writer, tid, name);
}

/* A MAP record's build-id from the loaded image, through the snapshot of
 * the loaded objects, taken again first if the loader loaded or unloaded
 * anything since (an object unloaded behind our dlclose wrapper's back
 * would otherwise lend its id to whatever is mapped at its address now). */
static int loaded_build_id(void *ctx, uint64_t addr, uint8_t out[OPR_BUILD_ID_MAX])
{
    (void)ctx;
    agent_phdr_refresh_if_changed();
    return agent_phdr_build_id(addr, out);
}

/* The stream's generation: > 0 when this pid exec'ed from an earlier image. */
static int stream_generation;

/* forked: a fork child's, whose memory map is the parent's at the fork. */
static int begin_stream(bool forked)
{
    if (!writer) {
        struct opr_writer_config config = {
            .proc_dir = "/proc/self",
            .result_dir = agent_config.result_dir,
            .unreadable_thread_name = NULL, /* an exited thread keeps the name of its first record */
            .ops = {.write = write_stream_file,
                    .maps_added = maps_added,
                    .late_code = late_code,
                    .loaded_build_id = loaded_build_id,
                    .resolve_pyframe = resolve_pyframe},
        };
        if (!(writer = opr_writer_new(&config)))
            return -1;
    }
    stream_pid = getpid();
    stream_fd = opr_stream_create(agent_config.result_dir, (uint32_t)stream_pid, &stream_generation);
    if (stream_fd < 0)
        return -1;
    /* -c: samples are not time */
    uint64_t period_ns = agent_config.leader ? 0 : agent_config.period_ns;
    opr_writer_begin(writer, (uint32_t)stream_pid, (uint32_t)getppid(), agent_now_ns(), period_ns);
    opr_writer_process(writer);
    agent_counters_write_desc(emit); /* per-sample counters (-e) */
    agent_ranks_poll(emit, true); /* ranks: which rank of a job this image is */
    opr_writer_read_maps(writer);
    bool python_was_on = python_on;
    python_on = agent_python_probe();
    /* A fork child's table of readable memory is the parent's, as true here
     * as there (it is refreshed on a miss): not read again (a PyTorch
     * process's maps, ~1 ms). */
    if (python_on && !(forked && python_was_on))
        agent_memmap_refresh();
    flush_stream();
    /* An exec'ed image is the same process: count each pid once. */
    if (live && stream_generation == 0)
        __atomic_fetch_add(&live->processes, 1, __ATOMIC_RELAXED);
    return 0;
}

/* The writer thread, and its tid known before this returns. */
static bool start_writer_thread(void)
{
    if (sem_init(&writer_started, 0, 0) != 0)
        return false;
    if (pthread_create(&writer_thread, NULL, writer_main, NULL) != 0)
        return false;
    while (sem_wait(&writer_started) != 0 && errno == EINTR)
        ;
    return true;
}

int agent_writer_start(void)
{
    map_live_counters();
    if (begin_stream(false) != 0)
        return -1;
    atomic_store(&writer_stop, 0);
    atomic_store(&writer_exit_cpu_ns, 0);
    if (!start_writer_thread()) {
        close(stream_fd);
        stream_fd = -1;
        return -1;
    }
    writer_running = true;
    return 0;
}

void agent_writer_flush(void)
{
    pthread_mutex_lock(&writer_lock);
    drain_locked();
    flush_stream();
    pthread_mutex_unlock(&writer_lock);
}

/* ACCOUNTING (docs/format.md): what this image's samples do not stand for.
 * cost_ns is the agent's CPU cost already in the AGENT_COST record. */
static void emit_accounting(uint64_t process_cpu_ns, uint64_t cost_ns, uint64_t shutdown_cpu_ns)
{
    struct opr_accounting a = {.time_ns = agent_now_ns(), .startup_cpu_ns = agent_startup_cpu_ns,
                               .shutdown_cpu_ns = shutdown_cpu_ns};
    cost_ns += a.startup_cpu_ns + a.shutdown_cpu_ns;
    if (!agent_config.leader) { /* -c: samples are events, not time */
        a.sampled_ns = atomic_load(&agent_periods_taken) * agent_config.period_ns;
        if (process_cpu_ns > cost_ns + a.sampled_ns)
            a.unsampled_ns = process_cpu_ns - cost_ns - a.sampled_ns;
    }
    agent_threads_trap_blocked(&a.trap_blocked_threads, &a.trap_blocked_cpu_ns);
    a.threads_started = agent_threads_started();
    a.threads_sampled = opr_writer_thread_count(writer);
    a.unwritten_samples = opr_writer_unwritten_samples(writer);
    a.write_errno = (uint32_t)write_errno;
    emit(OPR_REC_ACCOUNTING, &a, sizeof a, NULL, 0);
    if (live) { /* for the launcher's summary, which reads no stream */
        __atomic_fetch_add(&live->cpu_ns, process_cpu_ns, __ATOMIC_RELAXED);
        __atomic_fetch_add(&live->unsampled_ns, a.unsampled_ns, __ATOMIC_RELAXED);
        __atomic_fetch_add(&live->startup_cpu_ns, a.startup_cpu_ns + a.shutdown_cpu_ns, __ATOMIC_RELAXED);
        __atomic_fetch_add(&live->trap_blocked_threads, a.trap_blocked_threads, __ATOMIC_RELAXED);
        __atomic_fetch_add(&live->threads_started, a.threads_started, __ATOMIC_RELAXED);
        __atomic_fetch_add(&live->threads_sampled, a.threads_sampled, __ATOMIC_RELAXED);
    }
}

void agent_writer_stop(bool clean)
{
    uint64_t stop_started_cpu = agent_thread_cpu_ns();
    /* Bounded wait: if the lock cannot be had (we were called from a signal
     * handler that interrupted the writer), give up rather than hang. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += 200000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    if (pthread_mutex_timedlock(&writer_lock, &deadline) != 0)
        return;
    atomic_store(&writer_stop, 1);
    drain_locked();
    /* threading/OpenMP: last schedstat read (with context switches) and
     * regions still open that samples were taken in */
    agent_threads_poll(emit, true);
    ompt_writer_drain(emit, true);
    agent_memory_poll(emit, true); /* memory: the last reading */
    /* Names may have been set after a thread's first sample. */
    opr_writer_thread_names_again(writer);
    emit_lost_if_changed(true);
    emit_limits_if_changed(true);
    agent_counters_reap(emit, true); /* per-sample counters: threads without them */
    opr_writer_python_cache_counts(writer, &agent_writer_counts.pystack_hits, &agent_writer_counts.pystack_misses);
    uint64_t full_reads, queries; /* the MAP records' maps reads, beside the readable-memory table's */
    opr_writer_maps_counts(writer, &full_reads, &queries);
    agent_writer_counts.maps_rereads += full_reads;
    agent_writer_counts.maps_probes += queries;
    struct timespec pcpu;
    struct opr_agent_cost cost = {atomic_load(&agent_handler_ns), atomic_load(&agent_samples_taken),
                                  writer_cpu_ns(), 0};
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &pcpu) == 0)
        cost.process_cpu_ns = agent_timespec_ns(&pcpu);
    emit(OPR_REC_AGENT_COST, &cost, sizeof cost, NULL, 0);
    agent_cost_emit(emit); /* the same cost on CPU clocks, and the writer's re-reads */
    /* The handler's CPU time, not its wall time: a preempted handler's wait
     * for a CPU is not CPU time the process spent (agent_cost.c). */
    uint64_t handler_cpu_ns = agent_cost_handler_cpu_estimate_ns();
    if (handler_cpu_ns == 0)
        handler_cpu_ns = cost.handler_ns;
    if (agent_config.tick_timer)
        handler_cpu_ns = 0; /* in the weights already (agent.c, tick_weight): not taken out twice */
    emit_accounting(cost.process_cpu_ns, handler_cpu_ns + cost.writer_cpu_ns,
                    agent_thread_cpu_ns() - stop_started_cpu);
    if (clean) {
        struct opr_end e = {agent_now_ns(), atomic_load(&agent_samples_taken),
                            atomic_load(&agent_samples_lost)};
        emit(OPR_REC_END, &e, sizeof e, NULL, 0);
    }
    flush_stream();
    if (stream_fd >= 0)
        close(stream_fd);
    stream_fd = -1;
    pthread_mutex_unlock(&writer_lock);
}

void agent_writer_atfork_prepare(void) { pthread_mutex_lock(&writer_lock); }
void agent_writer_atfork_parent(void) { pthread_mutex_unlock(&writer_lock); }

/* The child has a copy of the parent's state and no writer thread. Start a
 * stream of its own; the inherited perf event keeps sampling its threads. */
void agent_writer_atfork_child(void)
{
    pthread_mutex_init(&writer_lock, NULL);
    writer_running = false; /* threads do not survive fork */
    agent_memmap_atfork_child();
    agent_phdr_atfork_child();
    atomic_store(&agent_handler_ns, 0);
    agent_cost_atfork_child();
    if (stream_fd >= 0)
        close(stream_fd); /* the parent's file: never write to it from here */
    stream_fd = -1;
    opr_writer_reset(writer); /* ids, threads, mappings: the child's stream starts afresh */
    ompt_atfork_child();         /* threading/OpenMP: the parent's rings are not ours */
    gomp_atfork_child();
    agent_threads_atfork_child();
    agent_memory_atfork_child();
    samples_written = last_lost_reported = last_taken_reported = 0;
    unwritten_reported = 0;
    write_errno = 0;
    dropped_size_cap = first_drop_ns = last_outside_reported = last_dropped_reported = 0;
    threads_noted = 0;
    drain_interval_ns = DRAIN_INTERVAL_NS; /* the parent's quiet or steady stretch is not the child's */
    consumed_before = 0;
    atomic_store(&writer_quiet, 0);
    atomic_store(&drain_asked, 0);
    if (begin_stream(true) != 0)
        return;
    atomic_store(&writer_stop, 0);
    atomic_store(&writer_exit_cpu_ns, 0); /* the parent's writer's, if it had ended */
    writer_running = start_writer_thread();
    if (!writer_running) {
        opr_writer_note(writer, "the writer thread could not start in this child: samples kept until exit only");
        flush_stream();
    }
}
