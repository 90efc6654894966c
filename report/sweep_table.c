/*
 * report/sweep_table.c — renderers of `opprof sweep` (the per-combination
 * table as text, CSV or JSON; the plot is in sweep_plot.c, the page in
 * sweep_html.c) and of `opprof diff` (per-operator self time and share in two
 * profiles). Pure: rows in, text out.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"
#include "report/report_internal.h"

static const char *const gbps_note =
    "GB/s: the bytes the operator must move per call (its byte formula) over the median "
    "time, not a measured bandwidth";

/* The reason itself goes below the table (text) or into a tooltip (HTML). */
const char *report_counters_word(const char *reason)
{
    if (strncmp(reason, "no PMU access", 13) == 0)
        return "no access";
    if (strncmp(reason, "no PMU", 6) == 0)
        return "no PMU";
    if (strncmp(reason, "not requested", 13) == 0)
        return "not asked";
    return "n/a";
}

/* A time per call with a readable unit, or "n/a". */
static void fmt_time(char *buf, size_t len, double s)
{
    if (isnan(s))
        snprintf(buf, len, "n/a");
    else if (s >= 1)
        snprintf(buf, len, "%.3f s", s);
    else if (s >= 1e-3)
        snprintf(buf, len, "%.3f ms", s * 1e3);
    else
        snprintf(buf, len, "%.1f us", s * 1e6);
}

static void fmt_num(char *buf, size_t len, double v, const char *f)
{
    if (isnan(v))
        snprintf(buf, len, "n/a");
    else
        snprintf(buf, len, f, v);
}

static void json_num(FILE *out, double v)
{
    if (isnan(v) || isinf(v))
        fputs("null", out);
    else
        fprintf(out, "%.9g", v);
}

static void csv_num(FILE *out, double v)
{
    if (!isnan(v))
        fprintf(out, "%.9g", v);
}

static void print_sweep_text(FILE *out, const struct sweep_row *rows, size_t n, const char *title)
{
    if (title)
        fprintf(out, "%s\n\n", title);
    size_t lw = strlen("Combination");
    for (size_t i = 0; i < n; i++)
        if (strlen(rows[i].label) > lw)
            lw = strlen(rows[i].label);
    fprintf(out, "%-*s  %10s %7s %6s %9s %8s %7s %10s %10s  %s\n", (int)lw, "Combination", "Time/call", "Spread",
            "Calls", "GFLOP/s", "GB/s", "Threads", "CPI", "BW", "Hot kernel (share)");
    const char *reasons[4];
    size_t nreasons = 0;
    for (size_t i = 0; i < n; i++) {
        const struct sweep_row *r = &rows[i];
        if (!r->ok) {
            fprintf(out, "%-*s  FAILED: %s\n", (int)lw, r->label, r->reason);
            continue;
        }
        char t[32], sp[32], calls[16], gf[32], gb[32], th[32], cpi[32], bw[32];
        fmt_time(t, sizeof t, r->median_s);
        fmt_num(sp, sizeof sp, r->spread * 100, "%.1f%%");
        snprintf(calls, sizeof calls, "%u", r->calls);
        fmt_num(gf, sizeof gf, r->gflops, "%.2f");
        fmt_num(gb, sizeof gb, r->gbps, "%.2f");
        snprintf(th, sizeof th, "%u", r->threads_active);
        const char *word = report_counters_word(r->counters);
        if (isnan(r->cpi))
            snprintf(cpi, sizeof cpi, "%s", word);
        else
            snprintf(cpi, sizeof cpi, "%.2f", r->cpi);
        if (isnan(r->bandwidth_gbps))
            snprintf(bw, sizeof bw, "%s", word);
        else
            snprintf(bw, sizeof bw, "%.2f", r->bandwidth_gbps);
        if ((isnan(r->cpi) || isnan(r->bandwidth_gbps)) && r->counters[0]) {
            size_t k = 0;
            while (k < nreasons && strcmp(reasons[k], r->counters) != 0)
                k++;
            if (k == nreasons && nreasons < sizeof reasons / sizeof reasons[0])
                reasons[nreasons++] = r->counters;
        }
        fprintf(out, "%-*s  %10s %7s %6s %9s %8s %7s %10s %10s  ", (int)lw, r->label, t, sp, calls, gf, gb, th, cpi, bw);
        if (r->kernel[0])
            fprintf(out, "%s (%.1f%%)\n", r->kernel, r->kernel_share * 100);
        else
            fputs("-\n", out);
    }
    fprintf(out, "\nTime/call: median of the timed calls; Spread: interquartile range / median. Threads:\n"
                 "threads with samples. Hot kernel: the top row of --group-by kernel for the operator's\n"
                 "samples (share of its self time), or of the whole run when there is no operator: a\n"
                 "compute kernel, or \"[not a kernel: ...]\" when libc, dispatch or the runtime led.\n%s.\n",
            gbps_note);
    for (size_t k = 0; k < nreasons; k++)
        fprintf(out, "CPI and BW (memory bandwidth estimated from LLC misses x 64 B): %s.\n", reasons[k]);
    if (nreasons == 0)
        fputs("CPI: cycles / instructions of the timed calls; BW: their LLC misses x 64 B / their time "
              "(an estimate, from per-sample counters).\n", out);
}

static void print_sweep_csv(FILE *out, const struct sweep_row *rows, size_t n)
{
    fputs("label,x,series,status,median_s,min_s,max_s,p25_s,p75_s,spread,calls,gflops,gbps,threads_requested,"
          "threads_active,hot_kernel,hot_kernel_share,cpi,bandwidth_gbps,counters,result_dir,reason\n",
          out);
    for (size_t i = 0; i < n; i++) {
        const struct sweep_row *r = &rows[i];
        report_csv_field(out, r->label);
        fputc(',', out);
        report_csv_field(out, r->x);
        fputc(',', out);
        report_csv_field(out, r->series);
        fputs(r->ok ? ",ok," : ",failed,", out);
        double v[] = {r->median_s, r->min_s, r->max_s, r->p25_s > 0 ? r->p25_s : NAN,
                      r->p75_s > 0 ? r->p75_s : NAN, r->spread, r->calls ? r->calls : NAN, r->gflops, r->gbps};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
            if (r->ok)
                csv_num(out, v[k]);
            fputc(',', out);
        }
        fprintf(out, "%d,%u,", r->threads, r->threads_active);
        report_csv_field(out, r->kernel);
        fputc(',', out);
        if (r->kernel[0])
            fprintf(out, "%.6f", r->kernel_share);
        fputc(',', out);
        csv_num(out, r->cpi);
        fputc(',', out);
        csv_num(out, r->bandwidth_gbps);
        fputc(',', out);
        report_csv_field(out, r->counters);
        fputc(',', out);
        report_csv_field(out, r->dir);
        fputc(',', out);
        report_csv_field(out, r->ok ? "" : r->reason);
        fputc('\n', out);
    }
}

static void print_sweep_json(FILE *out, const struct sweep_row *rows, size_t n)
{
    fputs("{\"rows\":[", out);
    for (size_t i = 0; i < n; i++) {
        const struct sweep_row *r = &rows[i];
        fputs(i ? ",\n{" : "\n{", out);
        fputs("\"label\":", out);
        report_json_string(out, r->label);
        fputs(",\"x\":", out);
        report_json_string(out, r->x);
        fputs(",\"series\":", out);
        report_json_string(out, r->series);
        fprintf(out, ",\"ok\":%s,\"result_dir\":", r->ok ? "true" : "false");
        report_json_string(out, r->dir);
        fputs(",\"reason\":", out);
        report_json_string(out, r->ok ? NULL : r->reason);
        const char *keys[] = {"median_s", "min_s", "max_s", "p25_s", "p75_s", "spread", "calls", "gflops", "gbps"};
        double v[] = {r->median_s, r->min_s, r->max_s, r->p25_s > 0 ? r->p25_s : NAN,
                      r->p75_s > 0 ? r->p75_s : NAN, r->spread, r->calls ? r->calls : NAN, r->gflops, r->gbps};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
            fprintf(out, ",\"%s\":", keys[k]);
            json_num(out, r->ok ? v[k] : NAN);
        }
        fprintf(out, ",\"threads_requested\":%d,\"threads_active\":%u,\"hot_kernel\":", r->threads,
                r->threads_active);
        report_json_string(out, r->kernel[0] ? r->kernel : NULL);
        fputs(",\"hot_kernel_share\":", out);
        json_num(out, r->kernel[0] ? r->kernel_share : NAN);
        fputs(",\"cpi\":", out);
        json_num(out, r->cpi);
        fputs(",\"bandwidth_gbps\":", out);
        json_num(out, r->bandwidth_gbps);
        fputs(",\"counters\":", out);
        report_json_string(out, r->counters[0] ? r->counters : NULL);
        fputc('}', out);
    }
    fputs("\n],\"gbps_note\":", out);
    report_json_string(out, gbps_note);
    fputs("}\n", out);
}

void report_print_sweep(FILE *out, const struct sweep_row *rows, size_t n, enum report_format format,
                        const char *title)
{
    if (format == FORMAT_CSV)
        print_sweep_csv(out, rows, n);
    else if (format == FORMAT_JSON)
        print_sweep_json(out, rows, n);
    else
        print_sweep_text(out, rows, n, title);
}

void report_print_diff(FILE *out, const struct diff_table *t, const char *a, const char *b,
                       enum report_format format, size_t limit)
{
    size_t n = limit && limit < t->nrows ? limit : t->nrows;
    if (format == FORMAT_CSV) {
        fputs("name,a_self_s,a_share,b_self_s,b_share,change_pp,change_s\n", out);
        for (size_t i = 0; i < n; i++) {
            const struct diff_row *r = &t->rows[i];
            report_csv_field(out, r->name);
            fprintf(out, ",%.9g,%.6f,%.9g,%.6f,%.3f,%.9g\n", r->a_s, r->a_share, r->b_s, r->b_share,
                    (r->b_share - r->a_share) * 100, r->b_s - r->a_s);
        }
        return;
    }
    if (format == FORMAT_JSON) {
        fputs("{\"a\":", out);
        report_json_string(out, a);
        fputs(",\"b\":", out);
        report_json_string(out, b);
        fputs(",\"grouping\":", out);
        report_json_string(out, t->grouping);
        fputs(",\"compared\":", out);
        report_json_string(out, t->scope ? t->scope : "all samples");
        fputs(",\"rows\":[", out);
        for (size_t i = 0; i < n; i++) {
            const struct diff_row *r = &t->rows[i];
            fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out);
            report_json_string(out, r->name);
            fprintf(out, ",\"a_self_s\":%.9g,\"a_share\":%.6f,\"b_self_s\":%.9g,\"b_share\":%.6f,"
                         "\"change_pp\":%.3f,\"change_s\":%.9g}",
                    r->a_s, r->a_share, r->b_s, r->b_share, (r->b_share - r->a_share) * 100, r->b_s - r->a_s);
        }
        fputs("\n]}\n", out);
        return;
    }
    fprintf(out, "A: %s\nB: %s\nCompared: %s\nSelf time per %s, sorted by the change in share\n\n", a, b,
            t->scope ? t->scope : "all samples", t->grouping ? t->grouping : "row");
    size_t nw = 4;
    for (size_t i = 0; i < n; i++)
        if (strlen(t->rows[i].name) > nw)
            nw = strlen(t->rows[i].name);
    if (nw > 60)
        nw = 60;
    fprintf(out, "%-*s  %10s %7s  %10s %7s  %9s %11s\n", (int)nw, "Name", "A self", "A %", "B self", "B %",
            "Change pp", "Change time");
    for (size_t i = 0; i < n; i++) {
        const struct diff_row *r = &t->rows[i];
        char at[32], bt[32], ct[32];
        /* The samples' times, at the precision of the sample period (not
         * fmt_time's per-call timer precision). */
        double res = (double)t->period_ns;
        report_format_duration(at, sizeof at, r->a_s * 1e9, res);
        report_format_duration(bt, sizeof bt, r->b_s * 1e9, res);
        double d = r->b_s - r->a_s;
        report_format_duration(ct + 1, sizeof ct - 1, fabs(d) * 1e9, res);
        ct[0] = d < 0 ? '-' : d > 0 ? '+' : ' ';
        fprintf(out, "%-*.*s  %10s %6.1f%%  %10s %6.1f%%  %+9.1f %11s\n", (int)nw, (int)nw, r->name, at,
                r->a_share * 100, bt, r->b_share * 100, (r->b_share - r->a_share) * 100, ct);
    }
    if (n < t->nrows)
        fprintf(out, "(%zu more row%s; --limit 0 shows all)\n", t->nrows - n, t->nrows - n == 1 ? "" : "s");
}
