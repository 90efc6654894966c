/*
 * report/ranks_section.c — the "Ranks" section of `opprof report` over a
 * parallel job: one row per rank, then one sentence naming the slowest rank
 * and the operator (or function) that makes it slow. Text, CSV and JSON.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"
#include "report/report_internal.h"

static void print_seconds_or_na(FILE *out, int width, double v, bool measured)
{
    if (measured)
        fprintf(out, " %*.2f", width, v);
    else
        fprintf(out, " %*s", width, "n/a");
}

static void print_text(FILE *out, const struct rank_summary *s)
{
    const char *key = s->by_operator ? "operator" : "function";
    fprintf(out, "Ranks (%zu)%s\n", s->nrows,
            s->one_host ? "" : "  [results from several hosts: their clocks are not aligned]");
    fprintf(out, "  %-10s %-12s %-16s %8s %8s %8s %6s %9s %9s %9s  Top %s (self share)\n", "Rank", "Host", "PIDs",
            "Samples", "CPU s", "Wall s", "Busy", "Comm CPU", "Comm wait", "Other wait", key);
    for (size_t i = 0; i < s->nrows; i++) {
        const struct rank_row *r = &s->rows[i];
        fprintf(out, "  %-10s %-12.12s %-16s %8llu %8.2f %8.2f %5.0f%%", r->label, r->host[0] ? r->host : "-",
                r->pids[0] ? r->pids : "-", (unsigned long long)r->samples, r->cpu_s, r->wall_s, 100.0 * r->busy);
        fprintf(out, " %9.2f", r->comm_cpu_s);
        print_seconds_or_na(out, 9, r->comm_wait_s, s->offcpu_recorded);
        print_seconds_or_na(out, 9, r->other_wait_s, s->offcpu_recorded);
        if (r->top[0])
            fprintf(out, "  %s (%.1f %%)", r->top, 100.0 * r->top_share);
        else
            fputs("  -", out);
        fprintf(out, "%s\n", (int)i == s->slowest ? "  <- slowest" : "");
    }
    if (s->slowest >= 0) {
        const struct rank_row *r = &s->rows[s->slowest];
        fprintf(out, "Slowest: %s computes %.2f s (CPU outside communication) vs %.2f s on the other ranks (median)",
                r->label, r->compute_s, s->median_compute_s);
        if (s->slowest_key[0]) {
            fprintf(out, "; %s %s takes %.2f s there vs %.2f s elsewhere", key, s->slowest_key,
                    s->slowest_key_s, s->median_key_s);
            if (s->slowest_python[0])
                fprintf(out, " (called from %s)", s->slowest_python);
        }
        fputs(".\n", out);
    }
    if (s->unranked_samples)
        fprintf(out, "Not in any rank: %llu samples of processes without a rank variable (the launcher).\n",
                (unsigned long long)s->unranked_samples);
    fputs("Busy: CPU time / wall time of the rank's processes. Comm CPU: samples in gloo, c10d, MPI or\n"
          "torch.distributed frames (Open MPI busy-polls while it waits, so its waits are here).\n",
          out);
    if (s->offcpu_recorded)
        fputs("Comm wait: time Python threads were blocked inside a torch.distributed call (off CPU, from\n"
              "schedstat every ~10 ms, stack read at the end of each interval); other wait: blocked elsewhere.\n",
              out);
    else
        fputs("Comm wait / other wait: n/a, no off-CPU records (only Python threads get them).\n", out);
}

static void print_csv(FILE *out, const struct rank_summary *s)
{
    fputs("rank,label,host,pids,samples,cpu_s,wall_s,busy,comm_cpu_s,comm_wait_s,other_wait_s,compute_s,"
          "top,top_share,slowest\n",
          out);
    for (size_t i = 0; i < s->nrows; i++) {
        const struct rank_row *r = &s->rows[i];
        fprintf(out, "%d,", (int)r->rank);
        report_csv_field(out, r->label);
        fputc(',', out);
        report_csv_field(out, r->host);
        fputc(',', out);
        report_csv_field(out, r->pids);
        fprintf(out, ",%llu,%.6f,%.6f,%.4f,%.6f,", (unsigned long long)r->samples, r->cpu_s, r->wall_s, r->busy,
                r->comm_cpu_s);
        if (s->offcpu_recorded)
            fprintf(out, "%.6f,%.6f,", r->comm_wait_s, r->other_wait_s);
        else
            fputs(",,", out);
        fprintf(out, "%.6f,", r->compute_s);
        report_csv_field(out, r->top);
        fprintf(out, ",%.4f,%d\n", r->top_share, (int)i == s->slowest ? 1 : 0);
    }
}

void report_json_ranks(FILE *out, const struct rank_summary *s)
{
    if (!s)
        return;
    fprintf(out, ",\"ranks\":{\"key\":\"%s\",\"one_host\":%s,\"offcpu_recorded\":%s,\"unranked_samples\":%llu,"
                 "\"rows\":[",
            s->by_operator ? "operator" : "function", s->one_host ? "true" : "false",
            s->offcpu_recorded ? "true" : "false", (unsigned long long)s->unranked_samples);
    for (size_t i = 0; i < s->nrows; i++) {
        const struct rank_row *r = &s->rows[i];
        fprintf(out, "%s{\"rank\":", i ? "," : "");
        if (r->rank >= 0)
            fprintf(out, "%d", (int)r->rank);
        else
            fputs("null", out);
        fputs(",\"label\":", out);
        report_json_string(out, r->label);
        fputs(",\"host\":", out);
        report_json_string(out, r->host);
        fputs(",\"pids\":", out);
        report_json_string(out, r->pids);
        fprintf(out, ",\"samples\":%llu,\"cpu_s\":%.6f,\"wall_s\":%.6f,\"busy\":%.4f,\"comm_cpu_s\":%.6f,",
                (unsigned long long)r->samples, r->cpu_s, r->wall_s, r->busy, r->comm_cpu_s);
        if (s->offcpu_recorded)
            fprintf(out, "\"comm_wait_s\":%.6f,\"other_wait_s\":%.6f,", r->comm_wait_s, r->other_wait_s);
        else
            fputs("\"comm_wait_s\":null,\"other_wait_s\":null,", out);
        fprintf(out, "\"compute_s\":%.6f,\"top\":", r->compute_s);
        report_json_string(out, r->top);
        fprintf(out, ",\"top_share\":%.4f}", r->top_share);
    }
    fputs("],\"slowest\":", out);
    if (s->slowest < 0) {
        fputs("null}", out);
        return;
    }
    fputs("{\"label\":", out);
    report_json_string(out, s->rows[s->slowest].label);
    fprintf(out, ",\"compute_s\":%.6f,\"median_compute_s\":%.6f,\"because\":", s->rows[s->slowest].compute_s,
            s->median_compute_s);
    report_json_string(out, s->slowest_key);
    fprintf(out, ",\"because_s\":%.6f,\"median_because_s\":%.6f,\"python\":", s->slowest_key_s, s->median_key_s);
    report_json_string(out, s->slowest_python);
    fputs("}}", out);
}

int report_print_ranks(FILE *out, const struct rank_summary *s, enum report_format format)
{
    switch (format) {
    case FORMAT_TEXT: print_text(out, s); break;
    case FORMAT_CSV: print_csv(out, s); break;
    case FORMAT_JSON:
        fputs("{\"format\":\"opprof-ranks 1\"", out);
        report_json_ranks(out, s);
        fputs("}\n", out);
        break;
    }
    return 0;
}
