/*
 * report/export_html.c — one self-contained HTML page (no network access,
 * no external file) to send to a colleague or attach to an issue: a summary
 * of the recording, the hotspot table (click a header to sort), the flame
 * graph (the SVG of export_flamegraph.c, inlined) and a threads-over-time
 * chart (per thread, how busy it was in each time bucket, and the number of
 * active threads next to the online CPUs).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "report/export_internal.h"
#include "report/report.h"

#define CHART_BUCKETS 600  /* horizontal resolution of the threads chart */
#define CHART_THREADS 48   /* lanes drawn; the rest are counted in a note */

static const char page_style[] =
    "body{font-family:sans-serif;margin:16px 24px;color:#222;background:#fff}\n"
    "h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ccc}\n"
    "table.summary td{padding:2px 12px 2px 0;vertical-align:top}\n"
    "table.summary td:first-child{color:#555}\n"
    "table.hot{border-collapse:collapse;font-size:13px}\n"
    "table.hot th{cursor:pointer;background:#eee;padding:4px 8px;text-align:left;user-select:none}\n"
    "table.hot th.num,table.hot td.num{text-align:right}\n"
    "table.hot td{padding:2px 8px;border-bottom:1px solid #eee;font-family:monospace}\n"
    "table.hot th,table.hot td.num{white-space:nowrap}\n"
    "pre.report{overflow:auto;max-height:70vh;background:#fafafa;border:1px solid #ddd;padding:6px}\n"
    "div.scroll{max-height:420px;max-width:100%;overflow:auto;display:inline-block;border:1px solid #ddd}\n"
    "table.hot th.sorted-desc::after{content:' \\25BC'}table.hot th.sorted-asc::after{content:' \\25B2'}\n"
    ".note{color:#666;font-size:12px}.warn{color:#a40}\n";

/* Sorts the hotspot table by the clicked column (numbers by data-v). */
static const char page_script[] =
    "(function () {\n"
    "  var table = document.getElementById('hotspots');\n"
    "  if (!table) return;\n"
    "  var heads = table.querySelectorAll('th');\n"
    "  [].forEach.call(heads, function (th, col) {\n"
    "    th.addEventListener('click', function () {\n"
    "      var desc = !th.classList.contains('sorted-desc');\n"
    "      [].forEach.call(heads, function (h) { h.classList.remove('sorted-desc', 'sorted-asc'); });\n"
    "      th.classList.add(desc ? 'sorted-desc' : 'sorted-asc');\n"
    "      var num = th.classList.contains('num');\n"
    "      var body = table.tBodies[0], rows = [].slice.call(body.rows);\n"
    "      rows.sort(function (a, b) {\n"
    "        var x = a.cells[col], y = b.cells[col], c;\n"
    "        if (num) c = (+x.getAttribute('data-v')) - (+y.getAttribute('data-v'));\n"
    "        else c = x.textContent.localeCompare(y.textContent);\n"
    "        return desc ? -c : c;\n"
    "      });\n"
    "      rows.forEach(function (r) { body.appendChild(r); });\n"
    "    });\n"
    "  });\n"
    "})();\n";

static void html_seconds(FILE *out, double s)
{
    if (s >= 1)
        fprintf(out, "%.3f s", s);
    else
        fprintf(out, "%.1f ms", s * 1e3);
}

static void write_summary(FILE *out, const struct profile *p, const struct export_options *o)
{
    double period_s = (double)(p->period_ns ? p->period_ns : 1000000) / 1e9;
    fputs("<table class=\"summary\">\n<tr><td>command</td><td>", out);
    export_xml_text(out, p->command ? p->command : "?");
    fputs("</td></tr>\n<tr><td>result</td><td>", out);
    export_xml_text(out, p->dir ? p->dir : "(in memory)");
    fputs("</td></tr>\n", out);
    if (p->end_ns > p->start_ns && p->start_ns) {
        fputs("<tr><td>duration</td><td>", out);
        html_seconds(out, (double)(p->end_ns - p->start_ns) / 1e9);
        fputs(" (workload wall time)", out);
        if (p->exit_signal)
            fprintf(out, ", killed by signal %d", p->exit_signal);
        else if (p->exit_status >= 0)
            fprintf(out, ", exit status %d", p->exit_status);
        fputs("</td></tr>\n", out);
    }
    fprintf(out, "<tr><td>samples</td><td>%" PRIu64 " (weight %" PRIu64 ", ", p->sample_count, p->total_weight);
    if (p->sample_period) { /* record -c: events, not time */
        fprintf(out, "%" PRIu64 " events", p->total_weight * p->sample_period);
    } else {
        html_seconds(out, (double)p->total_weight * period_s);
        fputs(" of sampled CPU time", out);
    }
    fprintf(out, "); lost %" PRIu64 ", truncated stacks %" PRIu64 "</td></tr>\n", p->lost_samples,
            p->truncated_samples);
    fputs("<tr><td>event</td><td>", out);
    export_xml_text(out, p->event ? p->event : "task-clock");
    if (p->sample_period)
        fprintf(out, ", one sample per %" PRIu64 " events (shares are shares of this event, not time), %s</td></tr>\n",
                p->sample_period, report_sampled_modes(p));
    else if (p->tick_timer) /* record --timer tick: the kernel's tick set the rate */
        fprintf(out,
                ": thread CPU-time timers checked at the kernel tick (record --timer tick), weights in %.3f ms "
                "periods, %s</td></tr>\n",
                period_s * 1e3, report_sampled_modes(p));
    else
        fprintf(out, " at %u Hz (%.3f ms per sample), %s</td></tr>\n", p->frequency_hz, period_s * 1e3,
                report_sampled_modes(p));
    fprintf(out, "<tr><td>processes, threads</td><td>%zu, %zu", p->nprocesses, p->nthreads);
    if (o && o->online_cpus)
        fprintf(out, " (%u CPUs online)", o->online_cpus);
    fputs("</td></tr>\n</table>\n", out);
    if (!p->complete && p->dir)
        fputs("<p class=\"warn\">The recording did not finish (opprof record was interrupted): "
              "figures cover what was written.</p>\n",
              out);
    for (size_t i = 0; i < p->nwarnings; i++) {
        fputs("<p class=\"warn\">warning: ", out);
        export_xml_text(out, p->warnings[i]);
        fputs("</p>\n", out);
    }
}

/* What `opprof report` prints first (header, findings, phases, PyTorch
 * operators with their calling Python lines, top hotspots), rendered by the
 * report itself into a <pre>: the page says exactly what the text report
 * says, in the same words, without a second implementation. 0, or -1. */
static int write_text_report(FILE *out, const struct profile *p)
{
    struct phase_summary phases;
    struct findings findings = {0};
    if (phases_compute(p, &phases) != 0 || findings_compute(p, &findings) != 0) {
        findings_free(&findings);
        return -1;
    }
    /* The page promises the operators and their calling Python lines where
     * the program ran PyTorch: the text report shows them with --group-by
     * op; the page's own hotspot table below stays per function. */
    struct report_plan plan = {
        .profile = p,
        .opts = {.format = FORMAT_TEXT,
                 .group_by = phases.operators ? GROUP_OP : GROUP_FUNCTION,
                 .sort = SORT_SELF,
                 .limit = 20},
        .phases = &phases,
        .findings = &findings,
    };
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    int rc = mem ? report_render(mem, &plan) : 2;
    if (mem)
        fclose(mem);
    findings_free(&findings);
    if (rc != 0 || !text) {
        free(text);
        return -1;
    }
    fputs("<h2>Report</h2>\n<p class=\"note\">What <code>opprof report</code> prints (first 20 rows of each "
          "table): findings, phases and operators with the Python lines that call them when the program "
          "ran PyTorch.</p>\n<pre class=\"report\">",
          out);
    /* line by line: export_xml_text turns control characters (\n too) into blanks */
    for (char *line = text, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl)
            nl = line + strlen(line) - 1;
        else
            *nl = '\0';
        export_xml_text(out, line);
        fputc('\n', out);
    }
    fputs("</pre>\n", out);
    free(text);
    return 0;
}

static int write_hotspots(FILE *out, const struct profile *p)
{
    struct hotspot_table t;
    if (hotspots_compute(p, GROUP_FUNCTION, &t) != 0)
        return -1;
    hotspots_sort(&t, SORT_SELF);
    double period_s = (double)(t.period_ns ? t.period_ns : 1000000) / 1e9;
    double den = t.total_weight ? (double)t.total_weight : 1;
    /* Every row: a top-N by self would drop main and the other callers as
     * soon as the table is sorted by total. */
    size_t n = t.nrows;
    fprintf(out, "<p class=\"note\">All %zu functions, by self %s. Self: samples whose innermost "
                 "frame is the function; total: samples with it anywhere on the stack (once per sample). "
                 "Click a column header to sort.</p>\n",
            n, t.sample_period && !t.period_ns ? "events" : "time");
    bool events = t.sample_period && !t.period_ns; /* record -c */
    fprintf(out, "<div class=\"scroll\"><table class=\"hot\" id=\"hotspots\"><thead><tr><th class=\"num sorted-desc\">Self %%</th>"
                 "<th class=\"num\">Self %s</th><th class=\"num\">Total %%</th><th class=\"num\">Total %s</th>"
                 "<th class=\"num\">Samples</th><th>Name</th><th>Module</th><th>Source</th></tr></thead>\n<tbody>\n",
            events ? "events" : "time", events ? "events" : "time");
    for (size_t i = 0; i < n; i++) {
        const struct hotspot_row *r = &t.rows[i];
        fprintf(out, "<tr><td class=\"num\" data-v=\"%" PRIu64 "\">%.1f %%</td>", r->self,
                100.0 * (double)r->self / den);
        fprintf(out, "<td class=\"num\" data-v=\"%" PRIu64 "\">", r->self);
        if (events)
            fprintf(out, "%" PRIu64, r->self * t.sample_period);
        else
            html_seconds(out, (double)r->self * period_s);
        fprintf(out, "</td><td class=\"num\" data-v=\"%" PRIu64 "\">%.1f %%</td>", r->total,
                100.0 * (double)r->total / den);
        fprintf(out, "<td class=\"num\" data-v=\"%" PRIu64 "\">", r->total);
        if (events)
            fprintf(out, "%" PRIu64, r->total * t.sample_period);
        else
            html_seconds(out, (double)r->total * period_s);
        fprintf(out, "</td><td class=\"num\" data-v=\"%" PRIu64 "\">%" PRIu64 "</td><td>", r->samples, r->samples);
        export_xml_text(out, r->name);
        fputs("</td><td>", out);
        export_xml_text(out, r->module ? r->module : "");
        fputs("</td><td>", out);
        export_xml_text(out, r->source ? r->source : "");
        fputs("</td></tr>\n", out);
    }
    fputs("</tbody></table></div>\n", out);
    hotspots_free(&t);
    return 0;
}

/* Per thread, the share of each time bucket it was sampled (a heat strip),
 * and above them the number of threads active per bucket against the CPUs
 * online: the oversubscription picture at a glance. */
static int write_threads_chart(FILE *out, const struct profile *p, const struct export_options *o)
{
    if (p->nsamples == 0 || p->nthreads == 0) {
        fputs("<p class=\"note\">No samples.</p>\n", out);
        return 0;
    }
    uint64_t period = p->period_ns ? p->period_ns : 1000000;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < p->nsamples; i++) {
        lo = p->samples[i].time_ns < lo ? p->samples[i].time_ns : lo;
        hi = p->samples[i].time_ns > hi ? p->samples[i].time_ns : hi;
    }
    /* Buckets of at least 10 ms (ten periods): finer would be mostly noise. */
    uint64_t span = hi - lo + 1, bucket = span / CHART_BUCKETS + 1;
    if (bucket < 10 * period)
        bucket = 10 * period;
    size_t nb = (size_t)(span / bucket) + 1;
    size_t nt = p->nthreads;
    uint32_t *busy = calloc(nt * nb, sizeof *busy);
    uint32_t *active = calloc(nb, sizeof *active);
    size_t *order = malloc(nt * sizeof *order);
    if (!busy || !active || !order) {
        free(busy);
        free(active);
        free(order);
        return -1;
    }
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct prof_sample *s = &p->samples[i];
        if (s->thread >= nt)
            continue;
        size_t b = (size_t)((s->time_ns - lo) / bucket);
        if (busy[s->thread * nb + b] == 0)
            active[b]++;
        busy[s->thread * nb + b] += s->weight;
    }
    /* Busiest threads first. */
    for (size_t i = 0; i < nt; i++)
        order[i] = i;
    for (size_t i = 1; i < nt; i++)
        for (size_t j = i; j > 0 && p->threads[order[j]].samples > p->threads[order[j - 1]].samples; j--) {
            size_t x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    size_t shown = nt < CHART_THREADS ? nt : CHART_THREADS;
    uint32_t max_active = o && o->online_cpus ? o->online_cpus : 1;
    for (size_t b = 0; b < nb; b++)
        max_active = active[b] > max_active ? active[b] : max_active;

    const double left = 190, width = 1000, top = 20, area_h = 100, lane_h = 14;
    double bw = width / (double)nb;
    double height = top + area_h + 30 + shown * lane_h + 30;
    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100%%\" viewBox=\"0 0 %.0f %.0f\" "
                 "style=\"max-width:1200px;font-family:monospace;font-size:11px\">\n",
            left + width + 10, height);
    /* Active threads as a step area, online CPUs as a dashed line. */
    double ybase = top + area_h;
    fprintf(out, "<text x=\"0\" y=\"%.0f\">active threads</text>\n", top + 10);
    fprintf(out, "<text x=\"0\" y=\"%.0f\">(max %u)</text>\n", top + 24, max_active);
    fprintf(out, "<path fill=\"rgb(90,140,200)\" fill-opacity=\"0.6\" stroke=\"rgb(40,80,140)\" d=\"M%.1f %.1f", left,
            ybase);
    for (size_t b = 0; b < nb; b++) {
        double y = ybase - area_h * active[b] / max_active;
        fprintf(out, " L%.1f %.1f L%.1f %.1f", left + b * bw, y, left + (b + 1) * bw, y);
    }
    fprintf(out, " L%.1f %.1f Z\"/>\n", left + width, ybase);
    if (o && o->online_cpus) {
        double y = ybase - area_h * o->online_cpus / max_active;
        fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-dasharray=\"6 4\"/>"
                     "<text x=\"%.1f\" y=\"%.1f\" fill=\"#c00\" text-anchor=\"end\">%u online CPUs</text>\n",
                left, left + width, y, y, left + width, y - 3, o->online_cpus);
    }
    fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", left, left + width,
            ybase, ybase);
    /* Time axis. */
    double secs = (double)(nb * bucket) / 1e9;
    for (int k = 0; k <= 5; k++) {
        double x = left + width * k / 5;
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.2f s</text>\n", x, ybase + 14,
                secs * k / 5);
    }
    /* One heat strip per thread: opacity = share of the bucket sampled, or
     * with record -c (samples are events) relative to the busiest bucket. */
    double max_per_bucket = (double)bucket / (double)period;
    if (p->sample_period) {
        max_per_bucket = 1;
        for (size_t i = 0; i < nt * nb; i++)
            if (busy[i] > max_per_bucket)
                max_per_bucket = busy[i];
    }
    for (size_t r = 0; r < shown; r++) {
        size_t t = order[r];
        const struct prof_thread *th = &p->threads[t];
        double y = ybase + 24 + r * lane_h;
        fprintf(out, "<text x=\"0\" y=\"%.1f\">", y + lane_h - 3);
        char label[64];
        snprintf(label, sizeof label, "%.15s %" PRIu32, th->name[0] ? th->name : "thread", th->tid);
        export_xml_text(out, label);
        fprintf(out, "</text><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f2f2f2\"/>\n", left,
                y + 1, width, lane_h - 2);
        for (size_t b = 0; b < nb; b++) {
            uint32_t v = busy[t * nb + b];
            if (!v)
                continue;
            double share = v / max_per_bucket;
            share = share > 1 ? 1 : share;
            fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"rgb(220,90,40)\" "
                         "fill-opacity=\"%.2f\"/>\n",
                    left + b * bw, y + 1, bw, lane_h - 2, 0.15 + 0.85 * share);
        }
    }
    fputs("</svg>\n", out);
    fprintf(out, "<p class=\"note\">Buckets of %.0f ms. A thread is active in a bucket when it has at least "
                 "one sample there; the strip's darkness is %s.%s</p>\n",
            (double)bucket / 1e6,
            p->sample_period ? "its number of samples there (of the event it was sampled on), relative to the "
                               "busiest bucket"
                             : "the share of the bucket it spent on CPU",
            nt > shown ? " Only the busiest threads are drawn." : "");
    free(busy);
    free(active);
    free(order);
    return 0;
}

/* Memory over time: one RSS line per process (anonymous memory dashed
 * beneath it) from its MEM_TICK readings, on the recording's time axis. */
static void write_memory_chart(FILE *out, const struct profile *p)
{
    const struct prof_memory *m = p->memory;
    uint64_t lo = UINT64_MAX, hi = 0, peak = 1;
    for (size_t i = 0; m && i < m->nstreams; i++)
        for (size_t k = 0; k < m->streams[i].nticks; k++) {
            const struct opr_mem_tick *t = &m->streams[i].ticks[k];
            lo = t->time_ns < lo ? t->time_ns : lo;
            hi = t->time_ns > hi ? t->time_ns : hi;
            peak = t->rss_bytes > peak ? t->rss_bytes : peak;
        }
    if (lo == UINT64_MAX) {
        fputs("<p class=\"note\">No memory readings in this result.</p>\n", out);
        return;
    }
    if (p->start_ns && p->start_ns < lo)
        lo = p->start_ns;
    double span = (double)(hi - lo) + 1, left = 190, width = 1000, top = 20, area_h = 140;
    static const char *const colors[] = {"rgb(40,80,140)", "rgb(200,90,40)", "rgb(60,150,60)", "rgb(140,60,160)"};
    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100%%\" viewBox=\"0 0 %.0f %.0f\" "
                 "style=\"max-width:1200px;font-family:monospace;font-size:11px\">\n",
            left + width + 10, top + area_h + 30 + 14.0 * (double)m->nstreams);
    double ybase = top + area_h;
    fprintf(out, "<text x=\"0\" y=\"%.0f\">RSS (max %.1f MiB)</text>\n", top + 10, peak / 1048576.0);
    for (size_t i = 0; i < m->nstreams; i++) {
        const struct prof_memory_stream *ms = &m->streams[i];
        const char *color = colors[i % 4];
        for (int anon = 0; anon < 2 && ms->nticks; anon++) {
            fprintf(out, "<path fill=\"none\" stroke=\"%s\"%s d=\"", color, anon ? " stroke-dasharray=\"4 3\"" : "");
            for (size_t k = 0; k < ms->nticks; k++) {
                const struct opr_mem_tick *t = &ms->ticks[k];
                double x = left + width * (double)(t->time_ns - lo) / span;
                double y = ybase - area_h * (double)(anon ? t->anon_bytes : t->rss_bytes) / (double)peak;
                if (k && t->since_ns > ms->ticks[k - 1].time_ns && t->since_ns < t->time_ns) {
                    /* unchanged up to the reading before this record (none was written) */
                    const struct opr_mem_tick *b = &ms->ticks[k - 1];
                    double yb = ybase - area_h * (double)(anon ? b->anon_bytes : b->rss_bytes) / (double)peak;
                    fprintf(out, " L%.1f %.1f", left + width * (double)(t->since_ns - lo) / span, yb);
                }
                fprintf(out, "%s%.1f %.1f", k ? " L" : "M", x, y);
            }
            fputs("\"/>\n", out);
        }
        char label[96];
        snprintf(label, sizeof label, "pid %u", ms->pid);
        fprintf(out, "<text x=\"0\" y=\"%.1f\" fill=\"%s\">", ybase + 28 + 14.0 * (double)i, color);
        export_xml_text(out, label);
        fputs("</text>\n", out);
    }
    fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", left, left + width,
            ybase, ybase);
    for (int k = 0; k <= 5; k++)
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.2f s</text>\n", left + width * k / 5,
                ybase + 14, span / 1e9 * k / 5);
    fputs("</svg>\n<p class=\"note\">Resident set size per process, read every ~10 ms; dashed: its anonymous "
          "part (heap, stacks), the rest is file-backed or shared memory.</p>\n",
          out);
}

int export_html(FILE *out, const struct profile *p, const struct export_options *o)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>opprof: ", out);
    export_xml_text(out, p->command ? p->command : "profile");
    fprintf(out, "</title>\n<style>\n%s</style>\n</head><body>\n<h1>opprof profile</h1>\n", page_style);
    write_summary(out, p, o);
    if (write_text_report(out, p) != 0)
        return -1;
    fputs("<h2>Hotspots</h2>\n", out);
    if (write_hotspots(out, p) != 0)
        return -1;
    fputs("<h2>Flame graph</h2>\n<p class=\"note\">Click a box to zoom, \"Reset zoom\" to go back, "
          "\"Search\" to highlight functions by regular expression.</p>\n"
          "<div style=\"overflow:auto;max-height:85vh;max-width:100%\">\n",
          out);
    struct export_options fo = o ? *o : (struct export_options){0};
    fo.title = "";
    if (export_flamegraph(out, p, &fo, true) != 0)
        return -1;
    fputs("</div>\n<h2>Threads over time</h2>\n", out);
    if (write_threads_chart(out, p, o) != 0)
        return -1;
    if (p->memory) {
        fputs("<h2>Memory over time</h2>\n", out);
        write_memory_chart(out, p);
    }
    fprintf(out, "<p class=\"note\">Written by opprof %s.</p>\n<script>\n%s</script>\n</body></html>\n",
            PACKAGE_VERSION, page_script);
    return 0;
}
