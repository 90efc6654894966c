/*
 * report/summary.c — the short sections at the top of `opprof report` for a
 * PyTorch profile: "Findings" (one-line hints from analyze/findings.c) and
 * "Phases" (forward / backward / optimizer step / data loading / other, from
 * analyze/phases.c), in text, and as the "findings" and "phases" keys of the
 * JSON report. The figures are shares of all samples, like every table.
 */
#include <inttypes.h>
#include <stdio.h>

#include "report/report.h"
#include "report/report_internal.h"

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

void report_print_summary(FILE *out, const struct phase_summary *ph, const struct findings *f,
                          uint64_t period_ns)
{
    if (f && f->n) {
        fputs("Findings\n", out);
        for (size_t i = 0; i < f->n; i++)
            fprintf(out, "  * %s\n", f->items[i].text ? f->items[i].text : "");
        fputc('\n', out);
    }
    if (!ph || !ph->pytorch || !ph->total_weight)
        return;
    /* period_ns 0: record -c, samples of an event */
    fputs(period_ns ? "Phases (share of CPU time)\n" : "Phases (share of the samples, which are events, not time)\n",
          out);
    for (int i = 0; i < PHASE_COUNT; i++) {
        if (!ph->weight[i])
            continue; /* a phase that never ran is noise in a short summary */
        char time[32] = "-";
        if (period_ns)
            report_format_time(time, sizeof time, ph->weight[i] * period_ns, period_ns);
        fprintf(out, "  %-15s %6.1f %% %12s  %" PRIu64 " samples\n", phase_name((enum phase)i),
                pct(ph->weight[i], ph->total_weight), time, ph->samples[i]);
    }
    fputc('\n', out);
}

void report_json_summary(FILE *out, const struct phase_summary *ph, const struct findings *f)
{
    if (ph && ph->pytorch) {
        fputs(",\"phases\":{", out);
        for (int i = 0; i < PHASE_COUNT; i++) {
            if (i)
                fputc(',', out);
            report_json_string(out, phase_name((enum phase)i));
            fprintf(out, ":{\"pct\":%.3f,\"weight\":%" PRIu64 ",\"samples\":%" PRIu64 "}",
                    pct(ph->weight[i], ph->total_weight), ph->weight[i], ph->samples[i]);
        }
        fputc('}', out);
    }
    if (f) {
        fputs(",\"findings\":[", out);
        for (size_t i = 0; i < f->n; i++) {
            fputs(i ? ",{\"id\":" : "{\"id\":", out);
            report_json_string(out, f->items[i].id);
            fprintf(out, ",\"share_pct\":%.3f,\"text\":", 100.0 * f->items[i].share);
            report_json_string(out, f->items[i].text);
            fputc('}', out);
        }
        fputc(']', out);
    }
}
