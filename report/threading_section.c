/*
 * report/threading_section.c — the report's "Threading" section: CPUs
 * available, runnable vs usable CPUs (oversubscription), runqueue wait,
 * OpenMP regions and active threads, imbalance, spin time in the runtime,
 * the operators whose regions ran, and findings with their fix. Text for
 * people, JSON (with the 10 ms timeline) for scripts and visual outputs.
 * A pure renderer of threading_analyze() (analyze/threading.c).
 */
#include <stdio.h>
#include <string.h>

#include "analyze/analyze.h"
#include "report/report.h"

static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void print_text(FILE *out, const struct threading_summary *s)
{
    fputs("Threading\n", out);
    fprintf(out, "  view          %s\n", s->view);
    if (!s->has_sched && s->attached) {
        fputs("  (no thread scheduling data: opprof attach samples the process from outside, and the runnable "
              "threads and runqueue waits are read by the agent `opprof record` starts inside the program; "
              "record the program with `opprof record` to see them)\n",
              out);
        return;
    }
    if (!s->has_sched) {
        fputs("  (no thread scheduling data in this result: recorded by an older opprof?)\n", out);
        return;
    }
    char limit[64] = "no cgroup CPU limit";
    if (s->cgroup_limit > 0)
        snprintf(limit, sizeof limit, "cgroup limit %.2f CPUs", s->cgroup_limit);
    fprintf(out, "  CPUs          %u online, %u in the affinity mask, %s -> %.3g usable\n", s->online, s->affinity,
            limit, s->usable_cpus);
    fprintf(out, "  runnable      %.2f threads on average while busy (max %.2f) over %u thread(s) in %u process(es): "
                 "x%.2f the usable CPUs (max x%.2f); over x%.1f in %.0f%% of the busy time\n",
            s->runnable_avg, s->runnable_max, s->nthreads, s->nprocesses, s->oversub_avg, s->oversub_max, 1.2,
            100 * s->oversub_time_share);
    fprintf(out, "  runqueue wait %.1f%% of thread time waiting for a CPU (running %.3f s, waiting %.3f s); "
                 "%llu involuntary context switches\n",
            100 * s->wait_share, s->run_s, s->wait_s, (unsigned long long)s->nivcsw);
    if (s->has_ompt) {
        fprintf(out, "  OpenMP        %llu parallel regions (%.0f /s), %.1f us average; team requested %u, actual %u; "
                     "%llu nested\n",
                (unsigned long long)s->regions, s->regions_per_s, s->region_avg_us, s->max_requested, s->max_team,
                (unsigned long long)s->nested);
        if (s->omp_events_lost)
            fprintf(out,
                    "  lost          %llu region begin/end events (an opener's event ring filled between two "
                    "drains of the writer): the regions above and their times leave them out\n",
                    (unsigned long long)s->omp_events_lost);
        fprintf(out, "  active        %.2f threads in OpenMP region bodies at most, %.2f on average while in regions\n",
                s->active_max, s->active_avg);
        fprintf(out, "  imbalance     %.1f%% of team time in regions not spent in region bodies (barrier wait, "
                     "fork/join)\n",
                100 * s->imbalance);
        fprintf(out, "  attribution   %llu worker samples charged to the opener's context (%llu exact, %llu nearest "
                     "in time: approximate), %llu not\n",
                (unsigned long long)(s->attributed_exact + s->attributed_near),
                (unsigned long long)s->attributed_exact, (unsigned long long)s->attributed_near,
                (unsigned long long)s->unattributed);
        if (s->unrecorded)
            fprintf(out,
                    "                %llu samples in regions whose begin event was lost: not charged (which thread "
                    "opened them is not known)\n",
                    (unsigned long long)s->unrecorded);
        fprintf(out, "  contexts      %llu openers' contexts at region begin (%llu found unchanged, not walked)\n",
                (unsigned long long)s->contexts, (unsigned long long)s->contexts_repeated);
    }
    fprintf(out, "  runtime spin/wait %.1f%% of samples in the OpenMP runtime: team threads outside region bodies, "
                 "or runtime wait/spin functions (%llu samples)\n",
            100 * s->spin_share, (unsigned long long)s->spin_samples);
    if (s->nops) {
        fprintf(out, "  in regions    %llu samples; by operator (or opening function):\n",
                (unsigned long long)s->region_samples);
        for (size_t i = 0; i < s->nops; i++)
            fprintf(out, "    %6.1f%%  %-40s %s%s  (%llu in oversubscribed time)\n",
                    s->region_samples ? 100.0 * s->ops[i].samples / s->region_samples : 0, s->ops[i].name,
                    s->ops[i].python[0] ? "from " : "", s->ops[i].python,
                    (unsigned long long)s->ops[i].oversub_samples);
    }
    if (s->external_contention)
        fprintf(out, "  note          threads waited %.1f%% of the time although this workload does not outnumber the "
                     "CPUs: other processes on the machine compete for them\n",
                100 * s->wait_share);
    if (s->nfindings == 0)
        fputs("  findings      none: no oversubscription, no nested parallelism\n", out);
    for (size_t i = 0; i < s->nfindings; i++)
        fprintf(out, "  finding: %s\n", s->findings[i]);
}

static void print_json(FILE *out, const struct threading_summary *s, bool timeline)
{
    fputs("{\"threading\": {\"view\": ", out);
    json_string(out, s->view);
    fprintf(out, ", \"has_sched\": %s, \"has_ompt\": %s", s->has_sched ? "true" : "false",
            s->has_ompt ? "true" : "false");
    fprintf(out, ", \"online_cpus\": %u, \"affinity_cpus\": %u, \"cgroup_limit\": %.3f, \"usable_cpus\": %.3f",
            s->online, s->affinity, s->cgroup_limit, s->usable_cpus);
    fprintf(out, ", \"processes\": %u, \"threads\": %u, \"runnable_avg\": %.3f, \"runnable_max\": %.3f", s->nprocesses,
            s->nthreads, s->runnable_avg, s->runnable_max);
    fprintf(out, ", \"oversubscription_avg\": %.3f, \"oversubscription_max\": %.3f, \"oversubscribed_time_share\": %.4f",
            s->oversub_avg, s->oversub_max, s->oversub_time_share);
    fprintf(out,
            ", \"run_s\": %.4f, \"wait_s\": %.4f, \"wait_share\": %.4f, \"involuntary_switches\": %llu, "
            "\"switches_in\": %llu",
            s->run_s, s->wait_s, s->wait_share, (unsigned long long)s->nivcsw, (unsigned long long)s->switches_in);
    fprintf(out, ", \"regions\": %llu, \"regions_per_s\": %.1f, \"region_avg_us\": %.2f, \"max_requested\": %u, "
                 "\"max_team\": %u, \"nested\": %llu",
            (unsigned long long)s->regions, s->regions_per_s, s->region_avg_us, s->max_requested, s->max_team,
            (unsigned long long)s->nested);
    fprintf(out, ", \"omp_events_lost\": %llu", (unsigned long long)s->omp_events_lost);
    fprintf(out, ", \"active_max\": %.3f, \"active_avg\": %.3f, \"imbalance\": %.4f", s->active_max, s->active_avg,
            s->imbalance);
    fprintf(out, ", \"region_samples\": %llu, \"spin_samples\": %llu, \"spin_share\": %.4f",
            (unsigned long long)s->region_samples, (unsigned long long)s->spin_samples, s->spin_share);
    fprintf(out, ", \"attributed_exact\": %llu, \"attributed_near\": %llu, \"unattributed\": %llu",
            (unsigned long long)s->attributed_exact, (unsigned long long)s->attributed_near,
            (unsigned long long)s->unattributed);
    fprintf(out, ", \"in_unrecorded_regions\": %llu", (unsigned long long)s->unrecorded);
    fprintf(out, ", \"contexts\": %llu, \"contexts_repeated\": %llu", (unsigned long long)s->contexts,
            (unsigned long long)s->contexts_repeated);
    fprintf(out, ", \"oversubscribed\": %s, \"multi_process_oversubscription\": %s, \"external_contention\": %s",
            s->oversubscribed ? "true" : "false", s->multi_process_oversub ? "true" : "false",
            s->external_contention ? "true" : "false");
    fputs(", \"operators\": [", out);
    for (size_t i = 0; i < s->nops; i++) {
        fputs(i ? ", {\"name\": " : "{\"name\": ", out);
        json_string(out, s->ops[i].name);
        fputs(", \"python\": ", out);
        json_string(out, s->ops[i].python);
        fprintf(out, ", \"samples\": %llu, \"oversubscribed_samples\": %llu}", (unsigned long long)s->ops[i].samples,
                (unsigned long long)s->ops[i].oversub_samples);
    }
    fputs("], \"findings\": [", out);
    for (size_t i = 0; i < s->nfindings; i++) {
        if (i)
            fputs(", ", out);
        json_string(out, s->findings[i]);
    }
    fputc(']', out);
    if (timeline) {
        fprintf(out, ", \"bucket_ns\": %llu, \"timeline\": [", (unsigned long long)s->bucket_ns);
        for (size_t i = 0; i < s->nbuckets; i++)
            fprintf(out, "%s[%llu, %.3f, %.3f, %.3f]", i ? ", " : "", (unsigned long long)s->timeline[i].t_ns,
                    s->timeline[i].active_omp, s->timeline[i].runnable, s->timeline[i].cpus);
        fputc(']', out);
    }
    fputs("}}\n", out);
}

int report_print_threading(FILE *out, const struct profile *p, enum report_format format)
{
    struct threading_summary s;
    if (threading_analyze(p, &s) != 0)
        return -1;
    if (format == FORMAT_JSON)
        print_json(out, &s, true);
    else
        print_text(out, &s);
    threading_summary_free(&s);
    return 0;
}
