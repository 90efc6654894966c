/*
 * report/header.c — the header of `opprof report`: what was recorded and,
 * before any number, everything that makes the numbers incomplete (lost
 * samples, an unfinished recording, processes that did not end cleanly,
 * unknown frames), the agent's own cost and how its stacks were unwound.
 * Nothing is lost silently.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"
#include "report/report_internal.h"
/* ------------------------------------------------------------------------- */
/* Header                                                                     */
/* ------------------------------------------------------------------------- */

/* Per-process problems can repeat for every worker of a large job: show the
 * first few and count the rest. */
#define MAX_PROCESS_LINES 10

static const char *base_name(const char *path)
{
    if (!path)
        return "?";
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* What --delay/--duration/--max-size left out: counted, never hidden. */
static void print_collection_limits(FILE *out, const struct profile *p)
{
    if (p->window_start_ns || p->window_end_ns) {
        double from = p->window_start_ns > p->start_ns ? (double)(p->window_start_ns - p->start_ns) / 1e9 : 0;
        fprintf(out, "  window      samples from %.1f s", from);
        if (p->window_end_ns > p->start_ns)
            fprintf(out, " to %.1f s", (double)(p->window_end_ns - p->start_ns) / 1e9);
        else
            fputs(" to the end", out);
        fprintf(out, " after the start (%" PRIu64 " samples outside the window were not recorded)\n",
                p->outside_window_samples);
    }
    if (p->size_cap_dropped_samples) {
        double at = p->first_size_cap_drop_ns > p->start_ns
                        ? (double)(p->first_size_cap_drop_ns - p->start_ns) / 1e9 : 0;
        double kib = (double)p->max_size_bytes / 1024.0;
        fprintf(out, "warning: the result reached --max-size (%.1f %s) %.1f s after the start: %" PRIu64
                     " later samples were dropped; figures cover the time before\n",
                kib >= 1024 ? kib / 1024 : kib, kib >= 1024 ? "MiB" : "KiB", at, p->size_cap_dropped_samples);
    }
}

static void print_process_warnings(FILE *out, const struct profile *p)
{
    size_t shown = 0, hidden = 0;
    for (size_t i = 0; i < p->nprocesses; i++) {
        const struct prof_process *pr = &p->processes[i];
        bool unclean = !pr->ended_cleanly, cut = pr->stream_truncated;
        size_t lines = (unclean ? 1 : 0) + (cut ? 1 : 0) + pr->nnotes;
        if (!lines)
            continue;
        if (shown >= MAX_PROCESS_LINES) {
            hidden++;
            continue;
        }
        shown++;
        if (unclean)
            fprintf(out, "warning: process %" PRIu32 " (%s) did not end cleanly; its last samples may be missing\n",
                    pr->pid, base_name(pr->exe));
        if (cut)
            fprintf(out, "warning: the data of process %" PRIu32 " (%s) ends inside a record; the rest was not read\n",
                    pr->pid, base_name(pr->exe));
        for (size_t n = 0; n < pr->nnotes; n++)
            fprintf(out, "note: process %" PRIu32 " (%s): %s\n", pr->pid, base_name(pr->exe),
                    pr->notes[n] ? pr->notes[n] : "");
    }
    if (hidden)
        fprintf(out, "warning: ... and %zu more processes with warnings or notes\n", hidden);
}

const char *report_sampled_modes(const struct profile *p)
{
    if (p->sample_period) /* record -c: the events were counted in these modes */
        return p->user_only ? "user-mode events only" : "user + kernel mode events";
    if (p->tick_timer) /* --timer tick: one sample per kernel tick at most, weighted */
        return "user + kernel CPU time, each sample weighted by its thread's CPU time since its previous one";
    if (!p->user_only)
        return "user + kernel CPU time";
    if (p->cpu_time_weights) /* agent.c: kernel time rides on the next user-mode sample */
        return "user-mode samples weighted by user + kernel CPU time";
    return "user mode only";
}

/* The agent's own cost, measured inside the workload (AGENT_COST and
 * AGENT_CPU records). The handler's share is its time on the thread CPU
 * clock, the clock the bench's outside CPU ratio uses: wall time inside the
 * handler also counts the time a preempted handler waited for a CPU, which on
 * a loaded machine made identical runs read 0.75 % to 10.1 %. Recordings
 * from before AGENT_CPU only have the wall time, and say so. Not counted by
 * either: the kernel's signal delivery and return (the bench's outside ratio
 * includes them). */
bool report_agent_cost(const struct profile *p, struct report_agent_cost *c)
{
    memset(c, 0, sizeof *c);
    /* A run shorter than one sampling period still paid the agent's start-up
     * and writer: shown, with no handler figures (`opprof record -- true`:
     * ~2 ms of start-up against the command's ~1 ms). */
    if (!p->process_cpu_ns || (!p->agent_handler_calls && !p->agent_writer_cpu_ns && !p->acct.startup_cpu_ns))
        return false;
    const struct profile_agent_cpu *a = &p->agent_cpu;
    c->handler_called = p->agent_handler_calls > 0;
    c->cpu_clock = c->handler_called && a->handler_timed > 0;
    c->handler_ns = (double)(c->cpu_clock ? a->handler_cpu_est_ns : p->agent_handler_ns);
    uint64_t calls = c->cpu_clock ? a->handler_calls : p->agent_handler_calls;
    /* Streams without a timed call have no estimate of their own: left at 0,
     * 40 fork children of one or two samples each put the handler's mean at
     * 26 us while the median of the timed calls was 117 us. They are charged
     * the mean per call of the streams that have one. */
    if (c->cpu_clock && a->untimed_calls && a->untimed_calls < a->handler_calls)
        c->handler_ns += c->handler_ns * (double)a->untimed_calls / (double)(a->handler_calls - a->untimed_calls);
    c->per_sample_ns = c->handler_ns / (double)(calls ? calls : 1);
    if (c->cpu_clock) {
        /* Older recordings: a timed call held one read of the clock that
         * timed it, which untimed calls do not pay: taken out of the
         * quantiles as out of the estimate (opr_agent_cpu_estimate_ns). Newer
         * ones hold none, and say what timing cost (agent_cost.c). */
        c->clock_read_ns = (double)a->clock_read_timed_ns / (double)a->handler_timed;
        c->timing_ns_per_sample = (double)a->timing_ns / (double)(a->handler_calls ? a->handler_calls : 1);
        double median = profile_handler_quantile_ns(a, 0.5), p99 = profile_handler_quantile_ns(a, 0.99);
        c->median_ns = median > c->clock_read_ns ? median - c->clock_read_ns : 0;
        c->p99_ns = p99 > c->clock_read_ns ? p99 - c->clock_read_ns : 0;
    }
    c->writer_cpu_ns = p->agent_writer_cpu_ns;
    c->startup_cpu_ns = p->acct.startup_cpu_ns;
    c->omp_hook_ns = a->omp_hook_ns;
    c->omp_team_wait_ns = a->omp_team_wait_ns;
    /* start-up/shutdown: paid once per process, so 500 quick forks show it */
    c->share_pct = 100.0 *
                   (c->handler_ns + (double)c->writer_cpu_ns + (double)c->startup_cpu_ns + (double)c->omp_hook_ns +
                    (double)c->omp_team_wait_ns) /
                   (double)p->process_cpu_ns;
    return true;
}

static void print_overhead(FILE *out, const struct profile *p)
{
    struct report_agent_cost c;
    if (!report_agent_cost(p, &c))
        return;
    const struct profile_agent_cpu *a = &p->agent_cpu;
    if (!c.handler_called) {
        fprintf(out, "  overhead    no handler call (no sample) + %.3f s writer thread CPU (%" PRIu64 " maps reads)",
                (double)c.writer_cpu_ns / 1e9, a->maps_rereads);
    } else if (c.cpu_clock) {
        if (c.timing_ns_per_sample > 0) /* agent_cost.c: the handler's own time, its timing's beside it */
            fprintf(out,
                    "  overhead    handler %.1f us per sample (median %.1f, p99 %.1f of 1 in %u samples timed; "
                    "%.2f us of the %.1f is timing them",
                    c.per_sample_ns / 1e3, c.median_ns / 1e3, c.p99_ns / 1e3, a->timed_every,
                    c.timing_ns_per_sample / 1e3, c.per_sample_ns / 1e3);
        else
            fprintf(out, "  overhead    handler %.1f us per sample (median %.1f, p99 %.1f; CPU time of 1 in %u samples",
                    c.per_sample_ns / 1e3, c.median_ns / 1e3, c.p99_ns / 1e3, a->timed_every);
        if (c.clock_read_ns > 0)
            fprintf(out, ", less a %.2f us clock read", c.clock_read_ns / 1e3);
        fprintf(out, ") + %.3f s writer thread CPU (%" PRIu64 " maps reads)", (double)c.writer_cpu_ns / 1e9,
                a->maps_rereads);
    } else {
        fprintf(out, "  overhead    %.1f us per sample in the signal handler (wall time) + %.3f s writer thread CPU",
                c.per_sample_ns / 1e3, (double)c.writer_cpu_ns / 1e9);
    }
    if (p->acct.streams)
        fprintf(out, " + %.3f s start-up in %zu processes", (double)c.startup_cpu_ns / 1e9, p->acct.streams);
    if (c.omp_hook_ns) /* GOMP_* wrappers and OMPT callbacks, in the workload's threads */
        fprintf(out, " + %.3f s around OpenMP regions", (double)c.omp_hook_ns / 1e9);
    if (c.omp_team_wait_ns) /* estimated: agent_gomp.c, gomp_team_wait */
        fprintf(out, " + %.3f s of OpenMP teams spinning through it", (double)c.omp_team_wait_ns / 1e9);
    fprintf(out, " = %.2f %% of the processes' CPU time\n", c.share_pct);
}

/* CPU time no sample stands for (ACCOUNTING records), from 5 % of the CPU
 * time and 10 ms up: below that it is the expected remainder (each thread
 * leaves less than one period unsampled when it ends). */
static void print_unsampled(FILE *out, const struct profile *p)
{
    const uint64_t cpu = p->process_cpu_ns, un = p->acct.unsampled_ns;
    if (!cpu || p->sample_period || un < 10000000ull || 100.0 * (double)un / (double)cpu < 5.0)
        return;
    fprintf(out, "  unsampled   %.1f %% of CPU time (%.3f s of %.3f s) produced no sample", 100.0 * (double)un / (double)cpu,
            (double)un / 1e9, (double)cpu / 1e9);
    uint64_t idle = p->acct.threads_started > p->acct.threads_sampled ? p->acct.threads_started - p->acct.threads_sampled
                                                                      : 0;
    idle = idle > p->acct.trap_blocked_threads ? idle - p->acct.trap_blocked_threads : 0;
    if (p->acct.trap_blocked_threads)
        fprintf(out, ": SIGTRAP blocked in %" PRIu64 " threads (%.3f s; opprof samples with SIGTRAP: leave it "
                     "unblocked in the threads' signal masks)",
                p->acct.trap_blocked_threads, (double)p->acct.trap_blocked_cpu_ns / 1e9);
    if (idle && p->tick_timer) /* --timer tick: armed by the writer's poll, at most once a kernel tick */
        fprintf(out,
                "%s%" PRIu64 " of %" PRIu64 " threads (in %zu processes) took no sample (each ended before the "
                "writer armed its timer, or within one kernel tick of CPU time: record --timer tick)",
                p->acct.trap_blocked_threads ? "; " : ": ", idle, p->acct.threads_started, p->acct.streams);
    else if (idle)
        fprintf(out, "%s%" PRIu64 " of %" PRIu64 " threads (in %zu processes) took no sample (each shorter than the "
                     "%.3f ms period: raise -F or reuse threads and processes)",
                p->acct.trap_blocked_threads ? "; " : ": ", idle, p->acct.threads_started, p->acct.streams,
                (double)p->period_ns / 1e6);
    if (!idle && !p->acct.trap_blocked_threads && p->tick_timer)
        fprintf(out, ": each thread ends with up to one kernel tick of CPU time after its last sample (record "
                     "--timer tick; the default timer leaves less than one period)");
    else if (!idle && !p->acct.trap_blocked_threads)
        fprintf(out, ": short-lived threads or processes: raise -F");
    fputc('\n', out);
}

/* The agent's unwinder (UNWIND records): how many stacks took the fast path. */
static void print_unwinding(FILE *out, const struct profile *p)
{
    /* Deferred walks are the tables' too; in check mode the samples keep
     * libunwind's stack and are counted there. */
    uint64_t deferred = p->unwind_deferred_samples - p->unwind_deferred_checked;
    uint64_t tables = p->unwind_table_samples + deferred;
    uint64_t unwound = tables + p->unwind_fallback_samples;
    if (!unwound)
        return;
    fprintf(out, "  unwinding   %.1f %% of stacks by the agent's unwind tables, %" PRIu64 " by libunwind",
            100.0 * (double)tables / (double)unwound, p->unwind_fallback_samples);
    if (p->unwind_replay_samples) /* of the table walks, not of libunwind's */
        fprintf(out, "; %.1f %% of the table walks finished from the thread's previous walk",
                100.0 * (double)p->unwind_replay_samples / (double)p->unwind_table_samples);
    if (p->unwind_rule_lookups)
        fprintf(out, ", %.1f %% of %" PRIu64 " frame rules from the thread's rule cache",
                100.0 * (double)p->unwind_rule_cache_hits / (double)p->unwind_rule_lookups,
                p->unwind_rule_lookups);
    if (p->unwind_deferred_samples) {
        fprintf(out, "; stopped at a module without a table yet and finished by the writer on a copy of the "
                     "stack: %" PRIu64 " (%" PRIu64 " cut short",
                p->unwind_deferred_finished, p->unwind_deferred_cut);
        if (p->unwind_deferred_unknown_stack)
            fprintf(out, "; %" PRIu64 " on stacks not in the agent's map yet, such as a new thread's, copied by the kernel",
                    p->unwind_deferred_unknown_stack);
        fputc(')', out);
    }
    if (p->unwind_check_samples)
        fprintf(out, "; checked both ways: %" PRIu64 " samples, %" PRIu64 " differ", p->unwind_check_samples,
                p->unwind_check_disagree);
    if (p->unwind_deferred_checked)
        fprintf(out, "; writer's walks checked: %" PRIu64 ", %" PRIu64 " differ", p->unwind_deferred_checked,
                p->unwind_deferred_disagree);
    if (p->unwind_check_at_entry)
        fprintf(out,
                "; not counted as differing: %" PRIu64 " stacks from a function's first instruction that no FDE "
                "covers (_init, _fini), walked by the tables with the call's rule, where libunwind stops or guesses",
                p->unwind_check_at_entry);
    if (p->unwind_context_checked)
        fprintf(out, "; OpenMP contexts repeated without a walk, walked to check: %" PRIu64 ", %" PRIu64 " differ",
                p->unwind_context_checked, p->unwind_context_disagree);
    if (p->unwind_tables_built)
        fprintf(out, "; tables: %" PRIu64 " compiled, %" PRIu64 " from the cache (%.0f ms writer CPU)",
                p->unwind_tables_built - p->unwind_tables_cached, p->unwind_tables_cached,
                (double)p->unwind_build_cpu_ns / 1e6);
    fputc('\n', out);
}

void report_print_header(FILE *out, const struct profile *p)
{
    fprintf(out, "opprof report: %s\n", p->dir ? p->dir : "(in memory)");
    fprintf(out, "  command     %s\n", p->command && p->command[0] ? p->command : "(unknown)");

    fputs("  duration    ", out);
    if (p->end_ns && p->end_ns >= p->start_ns)
        fprintf(out, "%.2f s (workload wall time)", (double)(p->end_ns - p->start_ns) / 1e9);
    else
        fputs("unknown (the recording did not finish)", out);
    if (p->exit_signal)
        fprintf(out, ", killed by signal %d (%s)\n", p->exit_signal, strsignal(p->exit_signal));
    else if (p->exit_status >= 0)
        fprintf(out, ", exit status %d\n", p->exit_status);
    else
        fputs(", exit status unknown\n", out);

    uint64_t unwind_failed = 0;
    for (size_t i = 0; i < p->nprocesses; i++)
        unwind_failed += p->processes[i].unwind_failed;
    fprintf(out, "  samples     %" PRIu64 " (", p->sample_count);
    if (p->total_weight != p->sample_count)
        fprintf(out, "weight %" PRIu64 " periods; ", p->total_weight);
    uint64_t unwritten = p->acct.info_unwritten > p->acct.unwritten_samples ? p->acct.info_unwritten
                                                                             : p->acct.unwritten_samples;
    uint64_t size_cap = p->size_cap_dropped_samples;
    fprintf(out, "lost %" PRIu64, p->lost_samples + unwritten + size_cap);
    if (unwritten || size_cap) { /* per reason: the agent's queue, the disk, --max-size */
        fprintf(out, ": %" PRIu64 " queue full", p->lost_samples);
        if (unwritten)
            fprintf(out, ", %" PRIu64 " not written, disk full", unwritten);
        if (size_cap)
            fprintf(out, ", %" PRIu64 " size cap", size_cap);
    }
    fprintf(out, ", truncated stacks %" PRIu64 ", unwind failed %" PRIu64 "), ", p->truncated_samples, unwind_failed);
    if (p->tick_timer) /* record --timer tick: the tick set the rate, not -F; weights are in periods */
        fprintf(out,
                "event thread CPU-time timers checked at the kernel tick (record --timer tick), weights in "
                "%.3f ms periods",
                (double)p->period_ns / 1e6);
    else
        fprintf(out, "event %s", p->event && p->event[0] ? p->event : "(unknown)");
    if (p->frequency_hz && !p->tick_timer)
        fprintf(out, " at %u Hz", p->frequency_hz);
    if (p->period_ns && !p->tick_timer)
        fprintf(out, " (%.3f ms per sample)", (double)p->period_ns / 1e6);
    if (p->sample_period) /* record -c: shares are shares of this event, not of time */
        fprintf(out, " (one sample per %" PRIu64 " events: shares are shares of %s, not time)",
                p->sample_period, p->event && p->event[0] ? p->event : "the event");
    fprintf(out, ", %s\n", report_sampled_modes(p));
    fprintf(out, "  processes   %zu, threads %zu\n", p->nprocesses, p->nthreads);
    print_collection_limits(out, p);
    counter_columns_print_header(out, p); /* per-sample counters */
    print_overhead(out, p);
    print_unwinding(out, p);
    print_unsampled(out, p);

    /* Said once: the loader's warning (below) says it when it is there. */
    bool said = false;
    for (size_t i = 0; i < p->nwarnings; i++)
        said = said || (p->warnings[i] && strstr(p->warnings[i], "did not finish"));
    if (!p->complete && !said)
        fputs("warning: recording did not finish (opprof record was interrupted); figures cover what was written\n",
              out);
    for (size_t i = 0; i < p->nwarnings; i++)
        fprintf(out, "warning: %s\n", p->warnings[i] ? p->warnings[i] : "");
    print_process_warnings(out, p);
    if (p->unknown_frames)
        fprintf(out, "unknown frames: %" PRIu64 " (code without a symbol, shown as module+0xoffset)\n",
                p->unknown_frames);
}

