/*
 * report/sweep_html.c — SWEEPDIR/sweep.html: one self-contained page (no
 * network access, no other file) with the sweep's table and its plot inline,
 * in the style of the profile page of export_html.c.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/export_internal.h"
#include "report/report.h"
#include "report/report_internal.h"

static const char sweep_page_style[] =
    "body{font-family:sans-serif;margin:16px 24px;color:#222;background:#fff}\n"
    "h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ccc}\n"
    "table.sweep{border-collapse:collapse;font-size:13px}\n"
    "table.sweep th{background:#eee;padding:4px 8px;text-align:left;white-space:nowrap}\n"
    "table.sweep td{padding:2px 8px;border-bottom:1px solid #eee;font-family:monospace}\n"
    "table.sweep td.num{text-align:right;white-space:nowrap}\n"
    "table.sweep td.label{white-space:nowrap}td.why{color:#777;cursor:help}\n"
    "tr.failed td{color:#b00}.note{color:#666;font-size:12px}\n";

/* A cell with a number in format f, or the text none when v is NaN. */
static void num_cell(FILE *out, double v, const char *f, const char *none)
{
    fputs("<td class=\"num\">", out);
    if (isnan(v))
        export_xml_text(out, none);
    else
        fprintf(out, f, v);
    fputs("</td>", out);
}

/* A measured counter value, or a short word with the reason as tooltip. */
static void counter_cell(FILE *out, double v, const char *reason)
{
    if (!isnan(v)) {
        num_cell(out, v, "%.2f", "");
        return;
    }
    fputs("<td class=\"num why\" title=\"", out);
    export_xml_text(out, reason[0] ? reason : "not measured");
    fputs("\">", out);
    export_xml_text(out, report_counters_word(reason));
    fputs("</td>", out);
}

static void time_cell(FILE *out, double s)
{
    if (isnan(s))
        num_cell(out, s, "", "n/a");
    else if (s >= 1)
        num_cell(out, s, "%.3f s", "");
    else if (s >= 1e-3)
        num_cell(out, s * 1e3, "%.3f ms", "");
    else
        num_cell(out, s * 1e6, "%.1f us", "");
}

static void write_table(FILE *out, const struct sweep_row *rows, size_t n)
{
    fputs("<table class=\"sweep\" id=\"sweep\">\n<thead><tr><th>Combination</th><th>Time/call</th><th>Spread</th>"
          "<th>Calls</th><th>GFLOP/s</th><th>GB/s</th><th>Threads</th><th>CPI</th><th>BW GB/s</th>"
          "<th>Hot kernel (share)</th><th>Result</th></tr></thead>\n<tbody>\n",
          out);
    for (size_t i = 0; i < n; i++) {
        const struct sweep_row *r = &rows[i];
        fprintf(out, "<tr%s><td class=\"label\">", r->ok ? "" : " class=\"failed\"");
        export_xml_text(out, r->label);
        fputs("</td>", out);
        if (!r->ok) {
            fputs("<td colspan=\"9\">FAILED: ", out);
            export_xml_text(out, r->reason);
            fputs("</td>", out);
        } else {
            time_cell(out, r->median_s);
            num_cell(out, r->spread * 100, "%.1f%%", "n/a");
            num_cell(out, r->calls ? (double)r->calls : NAN, "%.0f", "n/a");
            num_cell(out, r->gflops, "%.2f", "n/a");
            num_cell(out, r->gbps, "%.2f", "n/a");
            num_cell(out, (double)r->threads_active, "%.0f", "");
            counter_cell(out, r->cpi, r->counters);
            counter_cell(out, r->bandwidth_gbps, r->counters);
            fputs("<td>", out);
            if (r->kernel[0]) {
                export_xml_text(out, r->kernel);
                fprintf(out, " (%.1f%%)", r->kernel_share * 100);
            } else {
                fputs("-", out);
            }
            fputs("</td>", out);
        }
        fputs("<td>", out);
        export_xml_text(out, r->dir);
        fputs("</td></tr>\n", out);
    }
    fputs("</tbody></table>\n", out);
}

void report_sweep_html(FILE *out, const struct sweep_row *rows, size_t n, const char *title, const char *what,
                       enum sweep_plot_metric metric)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>opprof sweep: ", out);
    export_xml_text(out, what ? what : "");
    fprintf(out, "</title>\n<style>\n%s</style>\n</head><body>\n<h1>", sweep_page_style);
    export_xml_text(out, title ? title : "opprof sweep");
    fputs("</h1>\n<h2>Plot</h2>\n", out);
    report_sweep_svg(out, rows, n, what, metric, true);
    fputs("<h2>Table</h2>\n", out);
    write_table(out, rows, n);
    const char *reason = NULL;
    for (size_t i = 0; i < n && !reason; i++)
        if (rows[i].ok && rows[i].counters[0] && (isnan(rows[i].cpi) || isnan(rows[i].bandwidth_gbps)))
            reason = rows[i].counters;
    if (reason) {
        fputs("<p class=\"note\">CPI and BW (measured memory bandwidth): ", out);
        export_xml_text(out, reason);
        fputs(".</p>\n", out);
    }
    fputs("<p class=\"note\">Time/call: median of the timed calls; Spread: interquartile range / median. "
          "GB/s: the bytes the operator must move per call (its byte formula) over the median time, not a "
          "measured bandwidth. CPI and BW GB/s are measured values, or the reason they are missing. Each "
          "row's result directory is a normal opprof result: <code>opprof report DIR</code>, and "
          "<code>opprof diff SWEEPDIR:ROW SWEEPDIR:ROW</code> compares two rows' operators.</p>\n"
          "</body></html>\n",
          out);
}
