/*
 * report/sweep_plot.c — the plot of `opprof sweep`: the chosen metric
 * (GFLOP/s, GB/s from the byte count, or time per call) against the swept
 * parameter, as grouped bars on a linear y axis that starts at 0, so that a
 * bar twice as tall is a value twice as large. One group per x value in row
 * order, one bar per series (the other parameters that vary), failed rows
 * marked where their bar would be. Pure: rows in, SVG text out.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/export_internal.h"
#include "report/report.h"

int sweep_plot_metric_parse(const char *text, enum sweep_plot_metric *out)
{
    static const struct { const char *name; enum sweep_plot_metric m; } names[] = {
        {"auto", SWEEP_PLOT_AUTO}, {"gflops", SWEEP_PLOT_GFLOPS}, {"gbps", SWEEP_PLOT_GBPS},
        {"time", SWEEP_PLOT_TIME},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(text, names[i].name) == 0) {
            *out = names[i].m;
            return 0;
        }
    return -1;
}

#define MAX_GROUPS 64  /* x values drawn; more are left out with a note */
#define MAX_SERIES 8

static const char *const series_colour[MAX_SERIES] = {"#4a7fb5", "#e08a2c", "#5aa55a", "#c04d4d",
                                                      "#8c6bb1", "#8c6d31", "#d672b4", "#7f7f7f"};

/* What is plotted, in which unit: value = metric(row) * scale. */
struct plot_axis {
    enum sweep_plot_metric metric;
    double scale;
    const char *unit;   /* "GFLOP/s", "ms", ... */
    const char *label;  /* y axis title */
};

static double row_metric(const struct sweep_row *r, const struct plot_axis *ax)
{
    if (!r->ok)
        return NAN;
    double v = ax->metric == SWEEP_PLOT_GFLOPS ? r->gflops : ax->metric == SWEEP_PLOT_GBPS ? r->gbps : r->median_s;
    return v * ax->scale;
}

static void choose_axis(const struct sweep_row *rows, size_t n, enum sweep_plot_metric metric, struct plot_axis *ax)
{
    if (metric == SWEEP_PLOT_AUTO) {
        bool any = false, all = true;
        for (size_t i = 0; i < n; i++)
            if (rows[i].ok) {
                any = true;
                all = all && !isnan(rows[i].gflops);
            }
        metric = any && all ? SWEEP_PLOT_GFLOPS : SWEEP_PLOT_TIME;
    }
    ax->metric = metric;
    ax->scale = 1;
    if (metric == SWEEP_PLOT_GFLOPS) {
        ax->unit = "GFLOP/s";
        ax->label = "GFLOP/s (higher is better)";
    } else if (metric == SWEEP_PLOT_GBPS) {
        ax->unit = "GB/s";
        ax->label = "GB/s from the byte count (higher is better)";
    } else {
        double max = 0;
        for (size_t i = 0; i < n; i++)
            if (rows[i].ok && rows[i].median_s > max)
                max = rows[i].median_s;
        if (max >= 1) {
            ax->unit = "s";
            ax->label = "time per call, s (lower is better)";
        } else if (max >= 1e-3) {
            ax->scale = 1e3;
            ax->unit = "ms";
            ax->label = "time per call, ms (lower is better)";
        } else {
            ax->scale = 1e6;
            ax->unit = "us";
            ax->label = "time per call, us (lower is better)";
        }
    }
}

/* A tick step of 1, 2, 2.5 or 5 x 10^k giving about five ticks up to max. */
static double tick_step(double max)
{
    double raw = max / 5, p = pow(10, floor(log10(raw)));
    static const double m[] = {1, 2, 2.5, 5, 10};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (m[i] * p >= raw)
            return m[i] * p;
    return 10 * p;
}

/* Index of s in list (adding it when there is room); -1 when full. */
static int intern(const char **list, size_t *n, size_t max, const char *s)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(list[i], s) == 0)
            return (int)i;
    if (*n == max)
        return -1;
    list[*n] = s;
    return (int)(*n)++;
}

void report_sweep_svg(FILE *out, const struct sweep_row *rows, size_t n, const char *what,
                      enum sweep_plot_metric metric, bool embedded)
{
    struct plot_axis ax;
    choose_axis(rows, n, metric, &ax);
    const char *groups[MAX_GROUPS], *series[MAX_SERIES];
    size_t ngroups = 0, nseries = 0, left_out = 0;
    size_t longest = 1;
    double max = 0;
    for (size_t i = 0; i < n; i++) {
        const char *x = rows[i].x[0] ? rows[i].x : rows[i].label;
        if (intern(groups, &ngroups, MAX_GROUPS, x) < 0 || intern(series, &nseries, MAX_SERIES, rows[i].series) < 0) {
            left_out++;
            continue;
        }
        if (strlen(x) > longest)
            longest = strlen(x);
        double v = row_metric(&rows[i], &ax);
        if (v > max)
            max = v;
    }
    double step = max > 0 ? tick_step(max) : 1;
    double ymax = max > 0 ? ceil(max / step - 1e-9) * step : 5 * step;

    const bool legend = nseries > 1 || (nseries == 1 && series[0][0]);
    const int left = 80, top = 56, plot_h = 300, width = legend ? 900 : 760;
    const int plot_w = width - left - (legend ? 200 : 30);
    const double group_w = (double)plot_w / (double)(ngroups ? ngroups : 1);
    const bool slanted = (double)longest * 7.0 > group_w - 6; /* 7 px a character at 12 px */
    const int bottom = slanted ? 40 + (int)((double)longest * 5.2) : 50;
    const int height = top + plot_h + bottom + (left_out ? 16 : 0);
    const double base = top + plot_h;

    if (!embedded)
        fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", out);
    fprintf(out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"sans-serif\" font-size=\"12\" class=\"sweep-plot\" data-metric=\"%s\" "
            "data-unit=\"%s\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            width, height, width, height,
            ax.metric == SWEEP_PLOT_GFLOPS ? "gflops" : ax.metric == SWEEP_PLOT_GBPS ? "gbps" : "time", ax.unit);
    fprintf(out, "<text x=\"%d\" y=\"22\" font-size=\"15\">", left);
    export_xml_text(out, what ? what : "opprof sweep");
    fputs(": ", out);
    export_xml_text(out, ax.label);
    fputs("</text>\n", out);

    /* y axis: grid line, tick and value at every step from 0 to ymax */
    fprintf(out, "<g class=\"y-axis\" data-plot-bottom=\"%.2f\" data-plot-height=\"%d\" data-max=\"%.9g\">\n", base,
            plot_h, ymax);
    for (int k = 0; k * step <= ymax * (1 + 1e-9); k++) {
        double v = k * step, y = base - v / ymax * plot_h;
        fprintf(out,
                "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"#ddd\"/>"
                "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"#333\"/>"
                "<text class=\"tick\" x=\"%d\" y=\"%.2f\" text-anchor=\"end\" data-value=\"%.9g\" "
                "data-y=\"%.2f\">%g</text>\n",
                left, y, left + plot_w, y, left - 5, y, left, y, left - 8, y + 4, v, y, v);
    }
    fprintf(out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%.2f\" stroke=\"#333\"/>\n", left, top, left, base);
    fprintf(out, "<text x=\"%d\" y=\"%.2f\" text-anchor=\"middle\" transform=\"rotate(-90 %d %.2f)\">", 18,
            top + plot_h / 2.0, 18, top + plot_h / 2.0);
    export_xml_text(out, ax.label);
    fputs("</text>\n</g>\n", out);
    fprintf(out, "<line x1=\"%d\" y1=\"%.2f\" x2=\"%d\" y2=\"%.2f\" stroke=\"#333\"/>\n", left, base, left + plot_w,
            base);

    /* bars, and one x label per group */
    const double bar_w = group_w * 0.8 / (double)(nseries ? nseries : 1);
    for (size_t g = 0; g < ngroups; g++) {
        double gx = left + (double)g * group_w;
        double cx = gx + group_w / 2;
        if (slanted)
            fprintf(out, "<text class=\"x-label\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" "
                         "transform=\"rotate(-35 %.2f %.2f)\">", cx, base + 16, cx, base + 16);
        else
            fprintf(out, "<text class=\"x-label\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">", cx, base + 18);
        export_xml_text(out, groups[g]);
        fputs("</text>\n", out);
    }
    for (size_t i = 0; i < n; i++) {
        const struct sweep_row *r = &rows[i];
        const char *x = r->x[0] ? r->x : r->label;
        int g = intern(groups, &ngroups, ngroups, x), s = intern(series, &nseries, nseries, r->series);
        if (g < 0 || s < 0)
            continue;
        double bx = left + g * group_w + group_w * 0.1 + s * bar_w;
        double v = row_metric(r, &ax);
        if (!r->ok || isnan(v)) {
            /* where the bar would stand: a cross, the reason as its tooltip */
            fprintf(out, "<g class=\"%s\" data-label=\"", r->ok ? "no-value" : "failed");
            export_xml_text(out, r->label);
            fprintf(out, "\"><title>");
            export_xml_text(out, r->label);
            fputs(r->ok ? ": no value for this metric" : ": failed: ", out);
            if (!r->ok)
                export_xml_text(out, r->reason);
            fprintf(out, "</title><text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" fill=\"#b00\" "
                         "font-weight=\"bold\">%s</text></g>\n",
                    bx + bar_w / 2, base - 6, r->ok ? "n/a" : "&#x2717;");
            continue;
        }
        double h = ymax > 0 ? v / ymax * plot_h : 0;
        fprintf(out, "<rect class=\"bar\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.3f\" fill=\"%s\" "
                     "data-value=\"%.9g\" data-label=\"",
                bx, base - h, bar_w * 0.92, h, series_colour[s], v);
        export_xml_text(out, r->label);
        fputs("\"><title>", out);
        export_xml_text(out, r->label);
        fprintf(out, ": %.4g %s</title></rect>\n", v, ax.unit);
        fprintf(out, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" font-size=\"10\">%.3g</text>\n",
                bx + bar_w * 0.46, base - h - 3, v);
    }
    if (n && rows[0].x_name[0]) {
        fprintf(out, "<text class=\"x-title\" x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">", left + plot_w / 2.0,
                top + plot_h + bottom - 8);
        export_xml_text(out, rows[0].x_name);
        fputs("</text>\n", out);
    }
    if (legend) {
        double lx = left + plot_w + 20;
        for (size_t s = 0; s < nseries; s++) {
            double ly = top + 6 + (double)s * 20;
            fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                         "<text class=\"legend\" x=\"%.2f\" y=\"%.2f\">",
                    lx, ly, series_colour[s], lx + 18, ly + 10);
            export_xml_text(out, series[s][0] ? series[s] : "(default)");
            fputs("</text>\n", out);
        }
    }
    if (left_out)
        fprintf(out, "<text x=\"%d\" y=\"%d\" fill=\"#a40\">%zu rows not drawn (at most %d x values and %d "
                     "series): see the table</text>\n",
                left, height - 6, left_out, MAX_GROUPS, MAX_SERIES);
    fputs("</svg>\n", out);
}
