/*
 * sampler/attach/attach.c — `opprof record -p PID`: sample a process that is already
 * running, from outside, without stopping or signalling it.
 *
 * The order of things matters for the promise "the target keeps running
 * unharmed": everything that can be refused (the pid, perf_event_open, the
 * result directory) is checked before the first event is enabled; the events
 * are opened disabled, enabled after --delay, and on timeout, Ctrl-C,
 * SIGTERM or the target's exit they are disabled and closed, which removes
 * them (and the copies inherit made in its threads and children) from the
 * target. Nothing is ever sent to the target: opprof's own SIGINT/SIGTERM
 * only end the recording.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "sampler/attach/attach_internal.h"

#define STACK_USER_BYTES 16384 /* perf's 8 KB default truncates deep stacks (reference.md) */
#define MAX_STREAMS 256

static volatile sig_atomic_t stop_signal;

uint64_t attach_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_stop_signal(int sig) { stop_signal = sig; }

static void install_stop_handlers(bool on)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on ? on_stop_signal : SIG_DFL;
    int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

/* ---- the recording's state ------------------------------------------------ */

struct attach_run {
    const struct record_options *o;
    char dir[PATH_MAX];
    uint64_t period_ns;
    struct attach_stream *streams[MAX_STREAMS];
    size_t nstreams;
    struct attach_stream_totals totals; /* of closed streams */
    uint64_t kernel_lost;               /* PERF_RECORD_LOST */
    uint64_t samples_seen;
    uint32_t *lags_us; /* Python read lag per sample with a Python-capable stream */
    size_t nlags, lags_cap;
    struct attach_pending *pending; /* samples waiting for their Python frames to be judged */
    struct attach_python_kept kept;
    uint64_t dropped_other_pids;
    bool stream_failed;
};

static struct attach_stream *stream_for(struct attach_run *r, pid_t pid, bool create)
{
    for (size_t i = 0; i < r->nstreams; i++)
        if (attach_stream_pid(r->streams[i]) == pid)
            return r->streams[i];
    if (!create || r->nstreams == MAX_STREAMS)
        return NULL;
    struct attach_stream *s = attach_stream_open(r->dir, pid, r->period_ns, r->o->call_graph);
    if (!s) {
        if (!r->stream_failed)
            fprintf(stderr, "opprof record: cannot write the stream of process %d in %s: %s\n", (int)pid, r->dir,
                    strerror(errno));
        r->stream_failed = true;
        return NULL;
    }
    r->streams[r->nstreams++] = s;
    return s;
}

static void close_stream(struct attach_run *r, pid_t pid, bool clean)
{
    for (size_t i = 0; i < r->nstreams; i++) {
        if (attach_stream_pid(r->streams[i]) != pid)
            continue;
        attach_stream_close(r->streams[i], clean, &r->totals);
        r->streams[i] = r->streams[--r->nstreams];
        return;
    }
}

static struct attach_stream *stream_of(void *arg, uint32_t pid) { return stream_for(arg, (pid_t)pid, false); }

/* The delay between a sample and the start of its Python read. */
static void note_lag(struct attach_run *r, uint64_t lag)
{
    if (r->nlags == r->lags_cap) {
        size_t cap = r->lags_cap ? r->lags_cap * 2 : 4096;
        uint32_t *l = realloc(r->lags_us, cap * sizeof *l);
        if (!l)
            return;
        r->lags_us = l;
        r->lags_cap = cap;
    }
    r->lags_us[r->nlags++] = (uint32_t)(lag / 1000 > UINT32_MAX ? UINT32_MAX : lag / 1000);
}

static void on_event(const struct attach_event *e, void *arg)
{
    struct attach_run *r = arg;
    switch (e->kind) {
    case ATTACH_EV_SAMPLE: {
        r->samples_seen++;
        struct attach_stream *s = stream_for(r, (pid_t)e->pid, true);
        if (!s) {
            r->dropped_other_pids++;
            return;
        }
        struct attach_captured c;
        if (!attach_stream_capture(s, e, &c))
            return;
        if (c.read_to)
            note_lag(r, c.read_from - c.time_ns);
        if (!r->pending || !attach_pending_add(r->pending, &c)) {
            attach_stream_emit(s, &c, false); /* out of memory: native stack only */
            r->kept.moved_on += c.npy > 0;
            free(c.py);
        }
        break;
    }
    case ATTACH_EV_SWITCH:
        if (r->pending)
            attach_pending_switch(r->pending, e->tid, e->time_ns, e->switch_out);
        break;
    case ATTACH_EV_COMM:
        /* exec(): a new image, a new stream generation at its next sample. */
        if (e->comm_exec && e->pid == e->tid) {
            if (r->pending)
                attach_pending_flush_pid(r->pending, e->pid, stream_of, r, &r->kept);
            close_stream(r, (pid_t)e->pid, false);
        }
        break;
    case ATTACH_EV_LOST:
        r->kernel_lost += e->lost;
        break;
    case ATTACH_EV_FORK:
    case ATTACH_EV_EXIT:
        break; /* children get a stream at their first sample; all close at the end */
    }
}

static void drain(struct attach_run *r, struct attach_events *ev)
{
    uint64_t lost_before = r->kernel_lost;
    attach_events_drain(ev, on_event, r);
    if (r->pending) /* the samples of the previous drain: every switch up to their reads is in */
        attach_pending_flush(r->pending, false, UINT64_MAX, stream_of, r, &r->kept);
    if (r->kernel_lost != lost_before) {
        struct attach_stream *s = stream_for(r, r->o->attach_pid, true);
        if (s)
            attach_stream_lost(s, attach_now_ns(), r->kernel_lost, r->samples_seen + r->kernel_lost, false);
    }
    for (size_t i = 0; i < r->nstreams; i++) {
        attach_stream_memory(r->streams[i], false); /* memory over time: every ~10 ms */
        attach_stream_flush(r->streams[i]);
    }
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- info ------------------------------------------------------------------- */

struct attach_facts {
    uint64_t attach_ns, start_ns, end_ns;
    time_t start_wall;
    const char *stop_reason;
    bool target_alive_after, complete;
    unsigned threads_at_attach, cpus;
    uint32_t lag_median_us, lag_max_us;
    size_t nlags;
    /* Reads that came a sampling period or more after their sample: the
     * reader was behind the target, so the thread had run on or been
     * preempted; the share the tests tell a starved reader by. */
    double lag_late_pct;
};

/* The target's argv from /proc, NULL-terminated in argv (max entries). */
static int target_argv(pid_t pid, char *buf, size_t cap, char **argv, int max)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    int argc = 0;
    for (size_t i = 0; i < n && argc < max - 1; i += strlen(buf + i) + 1)
        argv[argc++] = buf + i;
    argv[argc] = NULL;
    return argc;
}

static int write_info(const struct attach_run *r, const struct attach_facts *f)
{
    FILE *out = record_begin_info(r->dir);
    if (!out)
        return -1;
    const struct record_options *o = r->o;
    static char cmd[8192];
    char *argv[256];
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    fprintf(out, "format=opprof-raw %d\n", OPR_FORMAT_VERSION);
    fprintf(out, "opprof_version=%s\n", PACKAGE_VERSION);
    fputs("command=", out);
    if (target_argv(o->attach_pid, cmd, sizeof cmd, argv, 256) > 0)
        record_write_command(out, argv);
    else
        fprintf(out, "[pid %d]", (int)o->attach_pid);
    fputc('\n', out);
    fprintf(out, "hostname=%s\n", host);
    fprintf(out, "mode=attach\n");
    fprintf(out, "attach_pid=%d\n", (int)o->attach_pid);
    fprintf(out, "attach_delay_s=%g\n", o->delay_s);
    fprintf(out, "attach_duration_s=%g\n", o->duration_s);
    fprintf(out, "attach_threads=%u\n", f->threads_at_attach);
    fprintf(out, "event=task-clock\n");
    fprintf(out, "user_only=1\n");
    fprintf(out, "frequency_hz=%u\n", o->frequency_hz);
    fprintf(out, "period_ns=%llu\n", (unsigned long long)r->period_ns);
    fprintf(out, "call_graph=%s\n", call_graph_mode_name(o->call_graph));
    if (o->call_graph == CALL_GRAPH_DWARF)
        fprintf(out, "stack_user_bytes=%d\n", STACK_USER_BYTES);
    fprintf(out, "attach_ns=%llu\n", (unsigned long long)f->attach_ns);
    fprintf(out, "start_ns=%llu\n", (unsigned long long)f->start_ns);
    fprintf(out, "start_time=%lld\n", (long long)f->start_wall);
    fprintf(out, "online_cpus=%ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    fprintf(out, "python_frames=read-after-sample\n");
    if (o->max_size_bytes)
        fprintf(out, "max_size_bytes=%llu\n", (unsigned long long)o->max_size_bytes);
    if (f->complete) {
        fprintf(out, "end_ns=%llu\n", (unsigned long long)f->end_ns);
        fprintf(out, "attach_stop=%s\n", f->stop_reason);
        fprintf(out, "attach_target_running=%d\n", f->target_alive_after ? 1 : 0);
        if (f->nlags) {
            fprintf(out, "python_lag_median_us=%u\n", f->lag_median_us);
            fprintf(out, "python_lag_max_us=%u\n", f->lag_max_us);
            fprintf(out, "python_lag_late_pct=%.1f\n", f->lag_late_pct);
            fprintf(out, "python_exact=%llu\npython_running=%llu\npython_moved_on=%llu\n",
                    (unsigned long long)r->kept.exact, (unsigned long long)r->kept.running,
                    (unsigned long long)r->kept.moved_on);
        }
    }
    fprintf(out, "complete=%d\n", f->complete ? 1 : 0);
    return record_end_info(r->dir, out);
}

/* ---- the run ------------------------------------------------------------------ */

static int pidfd_of(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

static bool process_alive(pid_t pid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (stat(path, &st) != 0)
        return false;
    /* A zombie has exited already: its parent has not reaped it yet. */
    FILE *f = fopen(path, "re");
    char buf[512];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return !(p && (p[2] == 'Z' || p[2] == 'X'));
}

/* Sleeps up to ms, returning early on a stop signal or the target's exit. */
static bool wait_or_stop(int pidfd, pid_t pid, int ms)
{
    for (int waited = 0; waited < ms && !stop_signal; waited += 50) {
        struct timespec ts = {0, 50000000L};
        nanosleep(&ts, NULL);
        if ((pidfd < 0 || waited % 500 == 0) && !process_alive(pid))
            return false;
    }
    return !stop_signal;
}

static void print_status(const struct attach_run *r, uint64_t start_ns)
{
    uint64_t samples = r->samples_seen;
    fprintf(stderr, "\ropprof record: attached to %d, %.1f s, %llu samples\033[K", (int)r->o->attach_pid,
            (attach_now_ns() - start_ns) / 1e9, (unsigned long long)samples);
}

/* Refuses what attach mode cannot do, before anything is opened. 0, or 2
 * after a message. */
static int check_attach_request(const struct record_options *o)
{
    pid_t pid = o->attach_pid;
    if (pid <= 0 || pid == getpid()) {
        fprintf(stderr, "opprof record: -p %d: not a process opprof can attach to\n", (int)pid);
        return 2;
    }
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        fprintf(stderr, "opprof record: -p %d: no such process (check the pid with `ps -p %d`)\n", (int)pid,
                (int)pid);
        return 2;
    }
#if !defined(__x86_64__)
    if (o->call_graph == CALL_GRAPH_DWARF) {
        fprintf(stderr, "opprof record: -p: CFI unwinding from outside is implemented for x86-64 only: "
                        "use --call-graph fp or none\n");
        return 2;
    }
#endif
    if (o->events) {
        fprintf(stderr, "opprof record: -e cannot be combined with -p yet: attach mode samples task-clock\n");
        return 2;
    }
    return 0;
}

/* Samples from facts->start_ns until --duration, a stop signal or the
 * target's exit, draining the rings as they fill. Returns why it stopped:
 * "duration", "target-exit" or "interrupt". */
static const char *sample_until_stop(struct attach_run *run, struct attach_events *ev, int pidfd, pid_t pid,
                                     const struct attach_facts *facts, bool target_exited, bool show_status)
{
    const struct record_options *o = run->o;
    uint64_t deadline = o->duration_s > 0 ? facts->start_ns + (uint64_t)(o->duration_s * 1e9) : UINT64_MAX;
    uint64_t last_status = 0, last_alive_check = 0;
    const char *stop_reason = target_exited ? "target-exit" : "interrupt";
    while (!target_exited && !stop_signal) {
        uint64_t now = attach_now_ns();
        if (now >= deadline) {
            stop_reason = "duration";
            break;
        }
        uint64_t left_ms = (deadline - now) / 1000000 + 1;
        int timeout = left_ms < 100 ? (int)left_ms : 100;
        if (attach_events_wait(ev, timeout, pidfd) == 1)
            target_exited = true;
        drain(run, ev);
        now = attach_now_ns();
        if (pidfd < 0 && now - last_alive_check > 100000000ull) {
            last_alive_check = now;
            target_exited = !process_alive(pid);
        }
        if (show_status && now - last_status > 200000000ull) {
            last_status = now;
            print_status(run, facts->start_ns);
        }
    }
    if (target_exited)
        stop_reason = "target-exit";
    else if (stop_signal && strcmp(stop_reason, "duration") != 0)
        stop_reason = "interrupt";
    return stop_reason;
}

/* What attach mode could and could not see, for the report: the Python
 * read lag into facts, and notes and lost samples in the target's main
 * stream. */
static void note_what_attach_saw(struct attach_run *run, pid_t pid, struct attach_facts *facts,
                                 const char *stop_reason)
{
    if (run->nlags) {
        qsort(run->lags_us, run->nlags, sizeof run->lags_us[0], compare_u32);
        facts->lag_median_us = run->lags_us[run->nlags / 2];
        facts->lag_max_us = run->lags_us[run->nlags - 1];
        facts->nlags = run->nlags;
        size_t late = 0;
        while (late < run->nlags && (uint64_t)run->lags_us[run->nlags - 1 - late] * 1000 >= run->period_ns)
            late++;
        facts->lag_late_pct = 100.0 * (double)late / (double)run->nlags;
    }
    struct attach_stream *main_stream = stream_for(run, pid, false);
    if (!main_stream)
        return;
    char note[400];
    snprintf(note, sizeof note, "attach mode (-p %d): sampled from outside by perf_event for %.2f s; stop: %s",
             (int)pid, (facts->end_ns - facts->start_ns) / 1e9, stop_reason);
    attach_stream_note(main_stream, note);
    if (run->nlags) {
        snprintf(note, sizeof note,
                 "attach mode: Python frames were read after each sample (lag median %u us, max %u us; "
                 "%.1f %% a sampling period or more after it), not at the sampled instant: Python attribution "
                 "is statistical, not exact",
                 facts->lag_median_us, facts->lag_max_us, facts->lag_late_pct);
        attach_stream_note(main_stream, note);
    }
    if (run->kept.moved_on) {
        snprintf(note, sizeof note,
                 "attach mode: %llu samples (%.1f %%) have no Python frames: the thread ran on or was preempted "
                 "elsewhere before they could be read (busy CPUs delay the reads)",
                 (unsigned long long)run->kept.moved_on,
                 run->samples_seen ? 100.0 * (double)run->kept.moved_on / (double)run->samples_seen : 0.0);
        attach_stream_note(main_stream, note);
    }
    if (run->kernel_lost)
        attach_stream_lost(main_stream, facts->end_ns, run->kernel_lost, run->samples_seen + run->kernel_lost, true);
}

/* The closing lines on stderr: what was collected, why sampling stopped,
 * and what limits the result (size cap, unwinding, Python lag). */
static void print_attach_summary(const struct attach_run *run, pid_t pid, const char *dir,
                                 const struct attach_facts *facts, const char *stop_reason)
{
    const struct attach_stream_totals *t = &run->totals;
    unsigned long long queue_full = run->kernel_lost + t->lost, size_cap = t->dropped_size_cap;
    fprintf(stderr, "opprof record: %llu samples (%llu lost", (unsigned long long)t->samples, queue_full + size_cap);
    if (size_cap) /* per reason, as record's launcher says it */
        fprintf(stderr, ": %llu queue full, %llu size cap", queue_full, size_cap);
    fprintf(stderr, "), %llu threads, %llu processes -> %s (%.1f KB)\n", (unsigned long long)t->threads,
            (unsigned long long)t->processes, dir, t->bytes / 1024.0);
    fprintf(stderr, "opprof record: detached from %d after %.2f s (%s); the target is %s", (int)pid,
            (facts->end_ns - facts->start_ns) / 1e9,
            !strcmp(stop_reason, "duration") ? "--duration reached"
            : !strcmp(stop_reason, "target-exit") ? "the target exited"
                                                  : "interrupted",
            facts->target_alive_after ? "still running\n" : "gone\n");
    if (t->dropped_size_cap)
        fprintf(stderr, "opprof record: --max-size %.1f KB reached: %llu samples dropped (counted as lost; the "
                        "report counts them); the sample streams hold %.1f KB\n",
                run->o->max_size_bytes / 1024.0, (unsigned long long)t->dropped_size_cap, t->bytes / 1024.0);
    if (t->samples && t->unwind_failed)
        fprintf(stderr, "opprof record: %llu samples (%.1f %%) could not be unwound: leaf function only\n",
                (unsigned long long)t->unwind_failed, 100.0 * t->unwind_failed / t->samples);
    if (run->nlags)
        fprintf(stderr,
                "opprof record: Python frames read %u us (median; max %u us; %.1f %% a sampling period "
                "or more) after the sample: statistical, not exact\n",
                facts->lag_median_us, facts->lag_max_us, facts->lag_late_pct);
    if (run->kept.moved_on)
        fprintf(stderr, "opprof record: %llu samples (%.1f %%) without Python frames: the thread ran on or was "
                        "preempted elsewhere before they could be read\n",
                (unsigned long long)run->kept.moved_on,
                t->samples ? 100.0 * (double)run->kept.moved_on / (double)t->samples : 0.0);
    if (stop_signal)
        fprintf(stderr, "opprof record: stopped by signal %d; the target was not signalled\n", (int)stop_signal);
}

int record_attach(const struct record_options *o)
{
    if (check_attach_request(o) != 0)
        return 2;
    pid_t pid = o->attach_pid;
    struct attach_run run;
    memset(&run, 0, sizeof run);
    run.o = o;
    attach_stream_set_size_cap(o->max_size_bytes);
    run.period_ns = 1000000000ull / o->frequency_hz;
    char err[512];
    struct attach_events *ev = NULL;
    if (attach_events_open(&ev, pid, run.period_ns, o->call_graph, STACK_USER_BYTES, err, sizeof err) != 0) {
        fprintf(stderr, "opprof record: %s\n", err);
        return 2;
    }
    int pidfd = pidfd_of(pid);
    char dir[PATH_MAX];
    if (record_make_result_dir(o, dir, sizeof dir) != 0 || !realpath(dir, run.dir)) {
        attach_events_close(ev);
        if (pidfd >= 0)
            close(pidfd);
        return 2;
    }
    struct attach_facts facts;
    memset(&facts, 0, sizeof facts);
    facts.attach_ns = attach_now_ns();
    facts.start_wall = time(NULL);
    facts.threads_at_attach = attach_events_threads(ev);
    facts.cpus = attach_events_cpus(ev);
    if (write_info(&run, &facts) != 0) {
        fprintf(stderr, "opprof record: cannot write %s/info: %s\n", dir, strerror(errno));
        attach_events_close(ev);
        return 2;
    }
    run.pending = attach_pending_new(); /* NULL: samples are written at once, native stacks only */
    install_stop_handlers(true);
    bool show_status = !o->quiet && isatty(STDERR_FILENO);
    if (!o->quiet)
        fprintf(stderr, "opprof record: attached to process %d (%u threads, %u CPUs)%s\n", (int)pid,
                facts.threads_at_attach, facts.cpus,
                o->delay_s > 0 ? ", sampling starts after the delay" : "");

    bool target_exited = false;
    if (o->delay_s > 0)
        target_exited = !wait_or_stop(pidfd, pid, (int)(o->delay_s * 1000)) && !stop_signal;
    attach_events_rescan(ev); /* threads started during the delay (inherit covers most) */
    facts.start_ns = attach_now_ns();
    if (!target_exited && !stop_signal)
        attach_events_enable(ev, true);
    /* The target's main stream exists from the start, so even a target that
     * sleeps through the window leaves a valid (empty) result. */
    stream_for(&run, pid, true);

    const char *stop_reason = sample_until_stop(&run, ev, pidfd, pid, &facts, target_exited, show_status);
    attach_events_enable(ev, false);
    facts.end_ns = attach_now_ns();
    drain(&run, ev);
    /* Read after sampling stopped, when no switch is recorded any more: not judged, not kept. */
    if (run.pending)
        attach_pending_flush(run.pending, true, facts.end_ns, stream_of, &run, &run.kept);
    attach_events_close(ev);
    if (pidfd >= 0)
        close(pidfd);
    if (show_status)
        fputs("\r\033[K", stderr);

    note_what_attach_saw(&run, pid, &facts, stop_reason);
    while (run.nstreams > 0)
        close_stream(&run, attach_stream_pid(run.streams[0]), true);
    install_stop_handlers(false);

    facts.target_alive_after = process_alive(pid);
    facts.stop_reason = stop_reason;
    facts.complete = true;
    if (write_info(&run, &facts) != 0)
        fprintf(stderr, "opprof record: cannot finish %s/info: %s\n", dir, strerror(errno));
    if (!o->quiet)
        print_attach_summary(&run, pid, dir, &facts, stop_reason);
    free(run.lags_us);
    attach_pending_free(run.pending);
    return 0;
}
