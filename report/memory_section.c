/*
 * report/memory_section.c — the report's "Memory" section: peak RSS per
 * process and when it happened, anonymous/file split at the peak, page
 * faults, RSS growth charged to functions, Python lines and operators, and
 * findings. Text for people; CSV (the growth rows) and JSON (everything,
 * with each process's readings) for scripts. A pure renderer of
 * memory_analyze() (analyze/memory_tables.c).
 */
#include <stdio.h>
#include <string.h>

#include "analyze/analyze.h"
#include "report/report.h"
#include "report/report_internal.h"

#define MIB 1048576.0

static const char *const view_titles[MEMORY_VIEWS] = {"function", "Python line", "operator"};
static const char *const where_titles[MEMORY_VIEWS] = {"Module", "Function", "Python line"};

static void print_process_text(FILE *out, const struct memory_process *mp)
{
    char limit[64] = "none";
    if (mp->limit)
        snprintf(limit, sizeof limit, "%.1f MiB", mp->limit / MIB);
    fprintf(out, "  %-7u %9.1f MiB %8.2f s %9.1f MiB %9.1f MiB %9.1f MiB %12llu %8llu  %-12s %.60s\n", mp->pid,
            mp->peak_rss / MIB, mp->peak_s, mp->anon_at_peak / MIB, mp->file_at_peak / MIB, mp->hwm / MIB,
            (unsigned long long)mp->minflt, (unsigned long long)mp->majflt, limit, mp->command);
}

static void print_growth_text(FILE *out, const struct memory_summary *s, enum memory_view v, size_t limit)
{
    if (!s->nrows[v])
        return;
    fprintf(out, "\n  Growth by %s\n", view_titles[v]);
    fprintf(out, "    %12s %12s %12s  %-40s %s\n", "Self grown", "Total grown", "Released",
            v == MEMORY_BY_FUNCTION ? "Function" : (v == MEMORY_BY_LINE ? "Line" : "Operator"), where_titles[v]);
    size_t shown = 0;
    for (size_t i = 0; i < s->nrows[v] && (!limit || shown < limit); i++) {
        const struct memory_row *r = &s->rows[v][i];
        if (r->self_grown < MIB / 32 && r->total_grown < MIB / 32 && r->released < MIB / 32)
            continue; /* under 32 KiB either way: noise of the agent's own buffers */
        fprintf(out, "    %8.1f MiB %8.1f MiB %8.1f MiB  %-40s %s\n", r->self_grown / MIB, r->total_grown / MIB,
                r->released / MIB, r->name, r->where);
        shown++;
    }
}

static void print_text(FILE *out, const struct memory_summary *s, size_t limit)
{
    fputs("Memory\n", out);
    if (!s->nprocs) {
        fputs("  (no memory readings in this result: recorded by an older opprof, or attach mode could not read "
              "/proc/PID/statm)\n",
              out);
        return;
    }
    fputs("  RSS read every ~10 ms in each process (20 ms while it moves by <= 1 MiB); peak = the largest reading, "
          "kernel peak = VmHWM\n",
          out);
    uint64_t agent = 0;
    for (size_t i = 0; i < s->nprocs; i++)
        agent = s->procs[i].agent_at_peak > agent ? s->procs[i].agent_at_peak : agent;
    if (agent)
        fprintf(out,
                "  the agent's own memory (sample ring, unwind tables: %.1f MiB at the peak) is left out of RSS "
                "and growth; the kernel peak includes it\n",
                agent / MIB);
    fprintf(out, "  %-7s %13s %10s %13s %13s %13s %12s %8s  %-12s %s\n", "pid", "peak RSS", "at", "anon@peak",
            "file@peak", "kernel peak", "minor faults", "major", "cgroup limit", "command");
    for (size_t i = 0; i < s->nprocs; i++)
        print_process_text(out, &s->procs[i]);
    if (s->grown_total > 0)
        fprintf(out,
                "\n  RSS growth between readings: %.1f MiB, %.1f%% charged to the samples taken in each interval "
                "(split by their weight; all threads of the process share it), the rest in intervals without "
                "samples; released %.1f MiB, %.1f%% charged\n",
                s->grown_total / MIB, 100 * s->charged_total / s->grown_total, s->released_total / MIB,
                s->released_total > 0 ? 100 * s->charged_released / s->released_total : 0.0);
    for (int v = 0; v < MEMORY_VIEWS; v++)
        print_growth_text(out, s, (enum memory_view)v, limit ? limit : 10);
    for (size_t i = 0; i < s->nfindings; i++)
        fprintf(out, "%s  finding: %s\n", i ? "" : "\n", s->findings[i].text);
}

static void print_csv(FILE *out, const struct memory_summary *s)
{
    fputs("view,name,where,self_grown_bytes,total_grown_bytes,released_bytes\n", out);
    for (int v = 0; v < MEMORY_VIEWS; v++)
        for (size_t i = 0; i < s->nrows[v]; i++) {
            const struct memory_row *r = &s->rows[v][i];
            fprintf(out, "%s,", memory_view_name((enum memory_view)v));
            report_csv_field(out, r->name);
            fputc(',', out);
            report_csv_field(out, r->where);
            fprintf(out, ",%.0f,%.0f,%.0f\n", r->self_grown, r->total_grown, r->released);
        }
}

static void print_json_process(FILE *out, const struct profile *p, const struct memory_process *mp)
{
    fprintf(out, "{\"pid\":%u,\"command\":", mp->pid);
    report_json_string(out, mp->command);
    fprintf(out,
            ",\"peak_rss_bytes\":%llu,\"peak_s\":%.6f,\"anon_at_peak_bytes\":%llu,\"file_at_peak_bytes\":%llu,"
            "\"agent_at_peak_bytes\":%llu,\"agent_last_bytes\":%llu,\"kernel_peak_bytes\":%llu,\"first_rss_bytes\":%llu,\"last_rss_bytes\":%llu,\"minor_faults\":%llu,"
            "\"major_faults\":%llu,\"seconds\":%.6f,\"grown_bytes\":%.0f,\"released_bytes\":%.0f,"
            "\"unattributed_grown_bytes\":%.0f,\"unattributed_released_bytes\":%.0f,\"cgroup_limit_bytes\":%llu,\"cgroup_version\":%u,\"cgroup\":",
            (unsigned long long)mp->peak_rss, mp->peak_s, (unsigned long long)mp->anon_at_peak,
            (unsigned long long)mp->file_at_peak, (unsigned long long)mp->agent_at_peak,
            (unsigned long long)mp->agent_last, (unsigned long long)mp->hwm, (unsigned long long)mp->first_rss,
            (unsigned long long)mp->last_rss, (unsigned long long)mp->minflt, (unsigned long long)mp->majflt,
            mp->seconds, mp->grown, mp->released, mp->unattributed_grown, mp->unattributed_released, (unsigned long long)mp->limit,
            mp->limit_version);
    report_json_string(out, mp->cgroup);
    /* the readings: [seconds from the start, rss, anon, file, minor, major] */
    fputs(",\"readings\":[", out);
    if (p->memory && mp->stream < p->memory->nstreams) {
        const struct prof_memory_stream *ms = &p->memory->streams[mp->stream];
        uint64_t origin = ms->nticks ? ms->ticks[0].time_ns : 0;
        if (p->start_ns && p->start_ns <= origin)
            origin = p->start_ns;
        for (size_t k = 0; k < ms->nticks; k++) {
            const struct opr_mem_tick *t = &ms->ticks[k];
            fprintf(out, "%s[%.6f,%llu,%llu,%llu,%llu,%llu]", k ? "," : "", (double)(t->time_ns - origin) / 1e9,
                    (unsigned long long)t->rss_bytes, (unsigned long long)t->anon_bytes,
                    (unsigned long long)t->file_bytes, (unsigned long long)t->minflt,
                    (unsigned long long)t->majflt);
        }
    }
    fputs("]}", out);
}

static void print_json(FILE *out, const struct profile *p, const struct memory_summary *s)
{
    fputs("{\"memory\":{\"processes\":[", out);
    for (size_t i = 0; i < s->nprocs; i++) {
        if (i)
            fputc(',', out);
        print_json_process(out, p, &s->procs[i]);
    }
    fprintf(out, "],\"grown_bytes\":%.0f,\"charged_bytes\":%.0f,\"released_bytes\":%.0f,\"charged_released_bytes\":%.0f,"
                 "\"growth\":{",
            s->grown_total, s->charged_total, s->released_total, s->charged_released);
    for (int v = 0; v < MEMORY_VIEWS; v++) {
        fprintf(out, "%s\"%s\":[", v ? "," : "", memory_view_name((enum memory_view)v));
        for (size_t i = 0; i < s->nrows[v]; i++) {
            const struct memory_row *r = &s->rows[v][i];
            fputs(i ? ",{\"name\":" : "{\"name\":", out);
            report_json_string(out, r->name);
            fputs(",\"where\":", out);
            report_json_string(out, r->where);
            fprintf(out, ",\"self_grown_bytes\":%.0f,\"total_grown_bytes\":%.0f,\"released_bytes\":%.0f}",
                    r->self_grown, r->total_grown, r->released);
        }
        fputc(']', out);
    }
    fputs("},\"findings\":[", out);
    for (size_t i = 0; i < s->nfindings; i++) {
        if (i)
            fputc(',', out);
        report_json_string(out, s->findings[i].text);
    }
    fputs("]}}\n", out);
}

int report_print_memory(FILE *out, const struct profile *p, enum report_format format, size_t limit)
{
    struct memory_summary s;
    if (memory_analyze(p, &s) != 0)
        return -1;
    switch (format) {
    case FORMAT_TEXT: print_text(out, &s, limit); break;
    case FORMAT_CSV: print_csv(out, &s); break;
    case FORMAT_JSON: print_json(out, p, &s); break;
    }
    memory_summary_free(&s);
    return 0;
}
