/*
 * analyze/ranks_merge.c — several results as one profile (the merged hotspot
 * table of `opprof report DIR1 DIR2 ...`).
 *
 * The merge copies frames, stacks, threads, processes and samples through the
 * model's own add functions, so equal frames of two results become one row.
 * Threads are keyed by (pid, tid) as in one result: two results from
 * different hosts that happen to share a pid share its thread rows (function
 * and operator tables are unaffected). Threading data (OpenMP, schedstat) is
 * per result and is not merged.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"

/* Adds p's frames, stacks, threads, samples, processes and warnings to m.
 * 0, or -1 with errno ENOMEM (m then half-merged: the caller frees it). */
static int merge_one(struct profile *m, const struct profile *p, uint32_t *frame_map, uint32_t *stack_map)
{
    uint32_t *scratch = malloc((OPR_MAX_FRAMES + 2 * OPR_MAX_PYFRAMES + 2) * sizeof *scratch);
    uint32_t *thread_map = malloc((p->nthreads + 1) * sizeof *thread_map);
    int rc = -1;
    if (!scratch || !thread_map)
        goto done;
    for (size_t f = 0; f < p->nframes; f++) {
        const struct prof_frame *fr = &p->frames[f];
        frame_map[f] = profile_add_frame(m, fr->name, fr->module, fr->source_file, fr->line, fr->kind);
        if (frame_map[f] == UINT32_MAX)
            goto done;
    }
    for (size_t s = 0; s < p->nstacks; s++) {
        const struct prof_stack *st = &p->stacks[s];
        uint32_t n = st->nframes <= OPR_MAX_FRAMES + 2 * OPR_MAX_PYFRAMES ? st->nframes : 0;
        for (uint32_t k = 0; k < n; k++)
            scratch[k] = frame_map[st->frames[k]];
        if ((stack_map[s] = profile_add_stack(m, scratch, n)) == UINT32_MAX)
            goto done;
    }
    for (size_t t = 0; t < p->nthreads; t++)
        if ((thread_map[t] = profile_add_thread(m, p->threads[t].pid, p->threads[t].tid, p->threads[t].name)) ==
            UINT32_MAX)
            goto done;
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct prof_sample *s = &p->samples[i];
        if (s->thread >= p->nthreads || s->stack >= p->nstacks)
            continue;
        /* Rows of one (thread, stack, flags) fold into one: the merge holds
         * distinct stacks x threads, not samples. */
        if (profile_add_sample_row(m, s->time_ns, s->time_ns, thread_map[s->thread], stack_map[s->stack], s->flags,
                                   s->weight, s->count) != 0)
            goto done;
    }
    for (size_t t = 0; t < p->nthreads; t++) { /* a row's time is its first sample's: bounds from the thread */
        struct prof_thread *mt = &m->threads[thread_map[t]];
        const struct prof_thread *pt = &p->threads[t];
        if (pt->samples && pt->first_ns < mt->first_ns)
            mt->first_ns = pt->first_ns;
        if (pt->last_ns > mt->last_ns)
            mt->last_ns = pt->last_ns;
    }
    struct profile_priv *pv = m->priv;
    for (size_t i = 0; i < p->nprocesses; i++) {
        if (profile_grow_to(&m->processes, &pv->processes_cap, m->nprocesses + 1, sizeof *m->processes) != 0)
            goto done;
        struct prof_process *pr = &m->processes[m->nprocesses++];
        *pr = p->processes[i];
        pr->exe = p->processes[i].exe ? strdup(p->processes[i].exe) : NULL;
        pr->cmdline = p->processes[i].cmdline ? strdup(p->processes[i].cmdline) : NULL;
        pr->notes = NULL; /* shown per result in each header; not repeated */
        pr->nnotes = 0;
        if ((p->processes[i].exe && !pr->exe) || (p->processes[i].cmdline && !pr->cmdline))
            goto done; /* counted already: profile_free frees what was copied */
    }
    for (size_t i = 0; i < p->nwarnings; i++) {
        char buf[1200];
        snprintf(buf, sizeof buf, "%s: %s", p->dir ? p->dir : "?", p->warnings[i]);
        if (profile_add_warning(m, buf) != 0)
            goto done;
    }
    rc = 0;
done:
    free(scratch);
    free(thread_map);
    if (rc != 0)
        errno = ENOMEM;
    return rc;
}

int profile_merge(struct profile *const *parts, size_t n, struct profile **out, char *err, size_t errlen)
{
    *out = NULL;
    struct profile *m = profile_new_empty();
    if (!m || n == 0) {
        snprintf(err, errlen, "out of memory");
        profile_free(m);
        errno = ENOMEM;
        return -1;
    }
    const struct profile *first = parts[0];
    char dirs[4096] = "";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(dirs + o, sizeof dirs - o, "%s%s", i ? " " : "", parts[i]->dir ? parts[i]->dir : "?");
        if (w > 0 && (size_t)w < sizeof dirs - o)
            o += (size_t)w;
    }
    m->dir = strdup(dirs);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s%s", first->command ? first->command : "",
             n > 1 ? "  (and the other results' commands)" : "");
    m->command = strdup(cmd);
    m->event = strdup(first->event ? first->event : "task-clock");
    m->call_graph = strdup(first->call_graph ? first->call_graph : "dwarf");
    if (!m->dir || !m->command || !m->event || !m->call_graph)
        goto nomem;
    m->period_ns = first->period_ns;
    m->frequency_hz = first->frequency_hz;
    m->sample_period = first->sample_period;
    m->sample_role = first->sample_role;
    m->start_ns = UINT64_MAX;
    m->complete = true;
    m->user_only = false;      /* any part without kernel samples makes the whole so */
    m->cpu_time_weights = true; /* ... and every such part must carry weights */
    m->exit_status = 0;
    for (size_t i = 0; i < n; i++) {
        const struct profile *p = parts[i];
        if (p->sample_period != first->sample_period ||
            (p->sample_period && p->event && first->event && strcmp(p->event, first->event))) {
            /* record -c: samples of different events (or periods) do not add up */
            char what[2][300];
            const struct profile *pp[2] = {p, first};
            for (int k = 0; k < 2; k++) {
                if (pp[k]->sample_period)
                    snprintf(what[k], sizeof what[k], "%s every %" PRIu64 " events (record -c)",
                             pp[k]->event ? pp[k]->event : "?", pp[k]->sample_period);
                else
                    snprintf(what[k], sizeof what[k], "CPU time");
            }
            snprintf(err, errlen, "%s was sampled on %s, %s on %s: their samples do not add up; report them one "
                     "by one, or record all with the same -e/-c", p->dir ? p->dir : "?", what[0],
                     first->dir ? first->dir : "?", what[1]);
            profile_free(m);
            return -1;
        } else if (p->period_ns != first->period_ns) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s was sampled every %" PRIu64 " ns, %s every %" PRIu64
                     " ns: merged shares weigh samples, not time; record all ranks with one -F",
                     p->dir, p->period_ns, first->dir, first->period_ns);
            if (profile_add_warning(m, buf) != 0)
                goto nomem;
        }
        if (p->start_ns && p->start_ns < m->start_ns)
            m->start_ns = p->start_ns;
        if (p->end_ns > m->end_ns)
            m->end_ns = p->end_ns;
        m->complete = m->complete && p->complete;
        m->user_only = m->user_only || p->user_only;
        m->tick_timer = m->tick_timer || p->tick_timer; /* any rank by --timer tick: said */
        if (p->user_only && !p->cpu_time_weights)
            m->cpu_time_weights = false;
        if (p->exit_status != 0 && m->exit_status == 0)
            m->exit_status = p->exit_status, m->exit_signal = p->exit_signal;
        m->lost_samples += p->lost_samples;
        m->truncated_samples += p->truncated_samples;
        m->unknown_frames += p->unknown_frames;
        m->agent_handler_ns += p->agent_handler_ns;
        m->agent_handler_calls += p->agent_handler_calls;
        m->agent_writer_cpu_ns += p->agent_writer_cpu_ns;
        m->process_cpu_ns += p->process_cpu_ns;
        profile_agent_cpu_add(&m->agent_cpu, &p->agent_cpu);
        m->unwind_table_samples += p->unwind_table_samples;
        m->unwind_fallback_samples += p->unwind_fallback_samples;
        m->unwind_check_samples += p->unwind_check_samples;
        m->unwind_context_checked += p->unwind_context_checked;
        m->unwind_context_disagree += p->unwind_context_disagree;
        m->unwind_replay_samples += p->unwind_replay_samples;
        m->unwind_deferred_samples += p->unwind_deferred_samples;
        m->unwind_deferred_finished += p->unwind_deferred_finished;
        m->unwind_deferred_cut += p->unwind_deferred_cut;
        m->unwind_deferred_checked += p->unwind_deferred_checked;
        m->unwind_deferred_disagree += p->unwind_deferred_disagree;
        m->unwind_deferred_unknown_stack += p->unwind_deferred_unknown_stack;
        m->unwind_check_at_entry += p->unwind_check_at_entry;
        m->unwind_rule_lookups += p->unwind_rule_lookups;
        m->unwind_rule_cache_hits += p->unwind_rule_cache_hits;
        m->unwind_check_disagree += p->unwind_check_disagree;
        m->unwind_tables_built += p->unwind_tables_built;
        m->unwind_tables_cached += p->unwind_tables_cached;
        m->unwind_build_cpu_ns += p->unwind_build_cpu_ns;
        uint32_t *frame_map = malloc((p->nframes + 1) * sizeof *frame_map);
        uint32_t *stack_map = malloc((p->nstacks + 1) * sizeof *stack_map);
        int rc = frame_map && stack_map ? merge_one(m, p, frame_map, stack_map) : -1;
        free(frame_map);
        free(stack_map);
        if (rc != 0) {
            snprintf(err, errlen, "out of memory while merging %s", p->dir ? p->dir : "a result");
            profile_free(m);
            errno = ENOMEM;
            return -1;
        }
    }
    if (m->start_ns == UINT64_MAX)
        m->start_ns = 0;
    profile_sort_samples(m);
    *out = m;
    return 0;
nomem:
    snprintf(err, errlen, "out of memory while merging the results");
    profile_free(m);
    errno = ENOMEM;
    return -1;
}
