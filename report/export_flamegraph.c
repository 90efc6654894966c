/*
 * report/export_flamegraph.c — an interactive flame graph as one
 * self-contained SVG file (no network, no external script): boxes are
 * functions, widths are sample weights, colours say what a frame is (Python,
 * ATen operator, native, kernel, OpenMP runtime, unknown). Click a box to
 * zoom into it, click "Reset zoom" (or press Escape) to go back, "Search"
 * (or Ctrl-F) highlights functions matching a regular expression and prints
 * the share of samples they cover; hovering shows name, samples and %.
 * `inverted` draws an icicle graph (root at the top).
 *
 * The SVG has a fixed frame height (16 px) and a real width and height, as
 * flamegraph.pl's: a deep stack makes a tall page that scrolls, with text
 * readable at any depth, where a viewBox-only SVG was shrunk to fit the
 * window (3 px text for 159 frames). `width`, `minwidth`, `colors` and
 * `countname` follow flamegraph.pl's options.
 *
 * The layout is computed here (so the file shows something even in viewers
 * without JavaScript); the script only recomputes x/width on zoom. Boxes
 * narrower than 0.1 px at full view are left out, as flamegraph.pl does:
 * they are invisible and would only make the file big.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/export_internal.h"
#include "report/report.h"

#define FG_WIDTH 1200.0 /* default width, as flamegraph.pl */
#define FG_PAD 10.0
#define FG_FRAME_H 16.0
#define FG_TOP 62.0
#define FG_BOTTOM 34.0
#define FG_CHAR_W 6.6 /* 11 px monospace */
#define FG_MIN_W 0.1

static const char *const class_label[EXPORT_CLASS_COUNT] = {
    "Python", "operator (ATen)", "OpenMP runtime", "kernel", "native", "unknown"};

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void hsl_rgb(double h, double s, double l, int rgb[3])
{
    double c = (1 - fabs(2 * l - 1)) * s;
    double hp = fmod(h, 360.0) / 60.0;
    double x = c * (1 - fabs(fmod(hp, 2.0) - 1));
    double r = 0, g = 0, b = 0;
    if (hp < 1) { r = c; g = x; }
    else if (hp < 2) { r = x; g = c; }
    else if (hp < 3) { g = c; b = x; }
    else if (hp < 4) { g = x; b = c; }
    else if (hp < 5) { r = x; b = c; }
    else { r = c; b = x; }
    double m = l - c / 2;
    rgb[0] = (int)lround((r + m) * 255);
    rgb[1] = (int)lround((g + m) * 255);
    rgb[2] = (int)lround((b + m) * 255);
}

/* A colour per class, its shade varied by the name so neighbours differ
 * but a function keeps its colour across files. */
static void frame_colour(enum export_class c, const char *name, int rgb[3])
{
    double v = (name_hash(name) % 1000) / 1000.0;
    switch (c) {
    case EXPORT_CLASS_PYTHON: hsl_rgb(195 + 25 * v, 0.60, 0.55 + 0.15 * v, rgb); break;
    case EXPORT_CLASS_OPERATOR: hsl_rgb(28 + 12 * v, 0.90, 0.55 + 0.10 * v, rgb); break;
    case EXPORT_CLASS_OPENMP: hsl_rgb(272 + 18 * v, 0.50, 0.62 + 0.10 * v, rgb); break;
    case EXPORT_CLASS_KERNEL: hsl_rgb(48 + 10 * v, 0.30, 0.55 + 0.10 * v, rgb); break;
    case EXPORT_CLASS_NATIVE: hsl_rgb(0 + 18 * v, 0.72, 0.58 + 0.10 * v, rgb); break;
    default: hsl_rgb(0, 0, 0.66 + 0.10 * v, rgb); break;
    }
}

/* flamegraph.pl's palettes (its --colors), the shade from the name's hash
 * instead of rand() so a function keeps its colour across files. */
static const char *const palettes[] = {"opprof", "hot", "mem", "io", "red", "green", "blue",
                                       "aqua", "yellow", "purple", "orange"};

bool export_colors_valid(const char *name)
{
    for (size_t i = 0; i < sizeof palettes / sizeof palettes[0]; i++)
        if (strcmp(name, palettes[i]) == 0)
            return true;
    return false;
}

static void palette_colour(const char *palette, enum export_class c, const char *name, int rgb[3])
{
    if (!palette || strcmp(palette, "opprof") == 0) {
        frame_colour(c, name, rgb);
        return;
    }
    uint32_t h = name_hash(name);
    double v1 = (h % 1000) / 1000.0, v2 = ((h / 1000) % 1000) / 1000.0, v3 = ((h / 1000000) % 1000) / 1000.0;
    double r = 205 + 50 * v3, g = 230 * v1, b = 55 * v2; /* hot */
    if (strcmp(palette, "mem") == 0)
        r = 0, g = 190 + 50 * v2, b = 210 * v1;
    else if (strcmp(palette, "io") == 0)
        r = 80 + 60 * v1, g = r, b = 190 + 55 * v2;
    else if (strcmp(palette, "red") == 0)
        r = 200 + 55 * v1, g = 50 + 80 * v1, b = g;
    else if (strcmp(palette, "green") == 0)
        g = 200 + 55 * v1, r = 50 + 60 * v1, b = r;
    else if (strcmp(palette, "blue") == 0)
        r = 80 + 60 * v1, g = r, b = 205 + 50 * v1;
    else if (strcmp(palette, "yellow") == 0)
        r = 175 + 55 * v1, g = r, b = 50 + 20 * v1;
    else if (strcmp(palette, "purple") == 0)
        r = 190 + 65 * v1, g = 80 + 60 * v1, b = r;
    else if (strcmp(palette, "aqua") == 0)
        r = 50 + 60 * v1, g = 165 + 55 * v1, b = g;
    else if (strcmp(palette, "orange") == 0)
        r = 190 + 65 * v1, g = 90 + 65 * v1, b = 0;
    rgb[0] = (int)r, rgb[1] = (int)g, rgb[2] = (int)b;
}

/* The box label at width w: the name, or its head and "..", or nothing
 * (the script applies the same rule on zoom). */
static void write_label(FILE *out, const char *name, double w)
{
    long max = (long)floor((w - 6) / FG_CHAR_W);
    if (max < 3)
        return;
    size_t len = strlen(name);
    if ((long)len <= max) {
        export_xml_text(out, name);
        return;
    }
    size_t keep = (size_t)(max - 2);
    while (keep > 0 && ((unsigned char)name[keep] & 0xc0) == 0x80)
        keep--; /* do not cut a UTF-8 sequence */
    char *head = strndup(name, keep);
    if (head) {
        export_xml_text(out, head);
        free(head);
    }
    fputs("..", out);
}

/* The viewer: zoom, search, details. Written for this file; kept ES5 so
 * old viewers run it. Everything is looked up under the root's id, so the
 * same SVG works standalone and inlined in opprof's HTML page. */
static const char flame_script[] =
    "(function () {\n"
    "  var svg = document.getElementById('opprof-flame');\n"
    "  var W = +svg.getAttribute('data-width'), PAD = +svg.getAttribute('data-pad');\n"
    "  var TOTAL = +svg.getAttribute('data-total'), CH = +svg.getAttribute('data-charw');\n"
    "  var details = svg.querySelector('.fg-details'), matched = svg.querySelector('.fg-matched');\n"
    "  var reset = svg.querySelector('.fg-reset'), searchBtn = svg.querySelector('.fg-search');\n"
    "  var frames = [].slice.call(svg.querySelectorAll('g.f')).map(function (g) {\n"
    "    var r = g.querySelector('rect');\n"
    "    return { g: g, r: r, t: g.querySelector('text'), fill: r.getAttribute('fill'),\n"
    "             s: +g.getAttribute('data-s'), n: +g.getAttribute('data-n'), d: +g.getAttribute('data-d'),\n"
    "             name: g.querySelector('title').textContent.split('\\n')[0] };\n"
    "  });\n"
    "  var zs = 0, zn = TOTAL, zd = 0, query = null;\n"
    "  function label(f, w) {\n"
    "    var max = Math.floor((w - 6) / CH);\n"
    "    if (max < 3) return '';\n"
    "    return f.name.length <= max ? f.name : f.name.slice(0, max - 2) + '..';\n"
    "  }\n"
    "  function layout() {\n"
    "    var scale = (W - 2 * PAD) / zn;\n"
    "    frames.forEach(function (f) {\n"
    "      var anc = f.d < zd, show = anc ? (f.s <= zs && f.s + f.n >= zs + zn)\n"
    "                                     : (f.s >= zs && f.s + f.n <= zs + zn);\n"
    "      f.g.style.display = show ? '' : 'none';\n"
    "      if (!show) return;\n"
    "      var x = anc ? PAD : PAD + (f.s - zs) * scale, w = anc ? W - 2 * PAD : f.n * scale;\n"
    "      f.r.setAttribute('x', x.toFixed(2));\n"
    "      f.r.setAttribute('width', Math.max(w - 0.5, 0.1).toFixed(2));\n"
    "      f.t.setAttribute('x', (x + 3).toFixed(2));\n"
    "      f.t.textContent = label(f, w);\n"
    "      f.g.setAttribute('opacity', anc ? '0.6' : '1');\n"
    "    });\n"
    "    reset.style.display = zd > 0 ? '' : 'none';\n"
    "  }\n"
    "  function zoom(f) { zs = f.s; zn = f.n; zd = f.d; layout(); }\n"
    "  function unzoom() { zs = 0; zn = TOTAL; zd = 0; layout(); }\n"
    "  function search(text) {\n"
    "    var re = null;\n"
    "    if (text) { try { re = new RegExp(text); } catch (e) { re = null; } }\n"
    "    query = re;\n"
    "    var hits = [];\n"
    "    frames.forEach(function (f) {\n"
    "      var m = re !== null && re.test(f.name);\n"
    "      f.r.setAttribute('fill', m ? 'rgb(230,0,230)' : f.fill);\n"
    "      if (m) hits.push([f.s, f.s + f.n]);\n"
    "    });\n"
    "    hits.sort(function (a, b) { return a[0] - b[0]; });\n"
    "    var sum = 0, end = -1;\n"
    "    hits.forEach(function (h) {\n"
    "      if (h[0] >= end) { sum += h[1] - h[0]; end = h[1]; }\n"
    "      else if (h[1] > end) { sum += h[1] - end; end = h[1]; }\n"
    "    });\n"
    "    matched.textContent = re ? 'Matched: ' + (100 * sum / TOTAL).toFixed(1) + '% (' + sum + ' samples)' : '';\n"
    "    searchBtn.textContent = re ? 'Clear search' : 'Search';\n"
    "  }\n"
    "  function ask() {\n"
    "    if (query) { search(null); return; }\n"
    "    var t = window.prompt('Search functions (regular expression)', '');\n"
    "    if (t) search(t);\n"
    "  }\n"
    "  frames.forEach(function (f) {\n"
    "    f.g.addEventListener('click', function () { zoom(f); });\n"
    "    f.g.addEventListener('mouseover', function () {\n"
    "      var lines = f.g.querySelector('title').textContent.split('\\n');\n"
    "      details.textContent = lines.join(' \\u2014 ');\n"
    "    });\n"
    "    f.g.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
    "  });\n"
    "  reset.addEventListener('click', unzoom);\n"
    "  searchBtn.addEventListener('click', ask);\n"
    "  if (svg.getAttribute('data-standalone') === '1') {\n"
    "    document.addEventListener('keydown', function (e) {\n"
    "      if ((e.ctrlKey || e.metaKey) && e.key === 'f') { e.preventDefault(); ask(); }\n"
    "      else if (e.key === 'Escape') { unzoom(); }\n"
    "    });\n"
    "  }\n"
    "  layout();\n"
    "})();\n";

/* The layout of one graph. */
struct fg_layout {
    double width, height, scale, minw, period_s;
    uint32_t depth;
    uint64_t total;
    bool inverted;
    const char *countname, *colors;
    const struct flamediff *diff; /* differential: colours by change in share */
    const struct export_node *nodes; /* the tree's nodes (a box's index for diff) */
};

/* Title, summary line, buttons and the legend of the classes present. */
static void write_header(FILE *out, const struct profile *p, const struct export_options *o, const struct fg_layout *l,
                         const struct export_funcs *fn, const struct export_tree *t)
{
    fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#f8f8f4\"/>\n", l->width, l->height);
    fprintf(out, "<text class=\"fg-title\" x=\"%.0f\" y=\"22\" text-anchor=\"middle\">", l->width / 2);
    if (o && o->title) {
        export_xml_text(out, o->title);
    } else {
        fputs(l->diff ? "Differential flame graph: " : l->inverted ? "Icicle graph: " : "Flame graph: ", out);
        export_xml_text(out, p->command ? p->command : "opprof profile");
    }
    fputs("</text>\n", out);
    fprintf(out, "<text x=\"%.0f\" y=\"40\">%" PRIu64 " ", FG_PAD, l->total);
    export_xml_text(out, l->countname);
    if (p->sample_period) { /* record -c: samples of an event */
        fprintf(out, " (%" PRIu64 " ", l->total * p->sample_period);
        export_xml_text(out, p->event ? p->event : "event");
        fputs(" events); click a box to zoom, hover for details</text>\n", out);
    } else {
        fprintf(out, " (%.3f s of sampled CPU time); click a box to zoom, hover for details</text>\n",
                (double)l->total * l->period_s);
    }
    fprintf(out, "<text class=\"fg-btn fg-reset\" x=\"%.0f\" y=\"22\" style=\"display:none\">Reset zoom</text>\n",
            FG_PAD);
    fprintf(out, "<text class=\"fg-btn fg-search\" x=\"%.0f\" y=\"22\" text-anchor=\"end\">Search</text>\n",
            l->width - FG_PAD);
    fprintf(out, "<text class=\"fg-matched\" x=\"%.0f\" y=\"40\" text-anchor=\"end\"> </text>\n", l->width - FG_PAD);
    if (l->diff) { /* the legend says what the colours compare */
        const char *base = export_base_name(o && o->diff_base_name ? o->diff_base_name : "A");
        fputs("<rect x=\"10\" y=\"47\" width=\"10\" height=\"10\" fill=\"rgb(255,45,45)\"/>"
              "<text x=\"24\" y=\"56\">share grew from ",
              out);
        export_xml_text(out, base);
        double x = 24 + (16 + strlen(base)) * FG_CHAR_W + 16;
        fprintf(out, "</text><rect x=\"%.0f\" y=\"47\" width=\"10\" height=\"10\" fill=\"rgb(45,45,255)\"/>"
                     "<text x=\"%.0f\" y=\"56\">shrank; widths: this profile; %.1f%% of the base's samples "
                     "are on call paths absent here (not drawn)</text>\n",
                x, x + 14, 100.0 * l->diff->base_only_share);
        return;
    }
    if (l->colors && strcmp(l->colors, "opprof") != 0)
        return; /* a flamegraph.pl palette says nothing about classes */
    bool present[EXPORT_CLASS_COUNT] = {false};
    for (size_t i = 1; i < t->nnodes; i++)
        present[fn->funcs[t->nodes[i].func].cls] = true;
    double lx = FG_PAD;
    for (int c = 0; c < EXPORT_CLASS_COUNT; c++) {
        if (!present[c])
            continue;
        int rgb[3];
        frame_colour((enum export_class)c, "", rgb);
        fprintf(out, "<rect x=\"%.0f\" y=\"47\" width=\"10\" height=\"10\" fill=\"rgb(%d,%d,%d)\"/>"
                     "<text x=\"%.0f\" y=\"56\">%s</text>\n",
                lx, rgb[0], rgb[1], rgb[2], lx + 14, class_label[c]);
        lx += 14 + strlen(class_label[c]) * FG_CHAR_W + 16;
    }
}

/* One box: tooltip (title), rectangle, label. */
static void write_frame(FILE *out, const struct profile *p, const struct fg_layout *l, const struct export_func *g,
                        const struct export_node *n, uint64_t start)
{
    double w = (double)n->total * l->scale;
    double x = FG_PAD + (double)start * l->scale;
    double y = l->inverted ? FG_TOP + (n->depth - 1) * FG_FRAME_H : FG_TOP + (l->depth - n->depth) * FG_FRAME_H;
    int rgb[3];
    size_t index = (size_t)(n - l->nodes);
    double share = l->total ? (double)n->total / (double)l->total : 0;
    if (l->diff)
        flamediff_colour(l->diff, l->diff->base_share[index], share, rgb);
    else
        palette_colour(l->colors, g->cls, g->name, rgb);
    fprintf(out, "<g class=\"f\" data-s=\"%" PRIu64 "\" data-n=\"%" PRIu64 "\" data-d=\"%" PRIu32 "\"><title>", start,
            n->total, n->depth);
    export_xml_text(out, g->name);
    char amount[64];
    if (p->sample_period) /* record -c: events, not time */
        snprintf(amount, sizeof amount, "%" PRIu64 " events", n->total * p->sample_period);
    else
        snprintf(amount, sizeof amount, "%.3f s", (double)n->total * l->period_s);
    fprintf(out, "\n%" PRIu64 " ", n->total);
    export_xml_text(out, l->countname);
    fprintf(out, ", %s (%.2f%%), self %" PRIu64 " (%.2f%%), %s", amount,
            l->total ? 100.0 * (double)n->total / (double)l->total : 0.0, n->self,
            l->total ? 100.0 * (double)n->self / (double)l->total : 0.0, export_class_name(g->cls));
    if (g->module && g->module[0] && g->cls != EXPORT_CLASS_PYTHON) {
        fputs(", ", out);
        export_xml_text(out, g->module);
    } else if (g->source_file) {
        fputs(", ", out);
        export_xml_text(out, g->source_file);
        if (g->min_line > 0)
            fprintf(out, ":%d", g->min_line);
    }
    if (l->diff)
        fprintf(out, ", base %.2f%% (%+.2f pp)", 100.0 * l->diff->base_share[index],
                100.0 * (share - l->diff->base_share[index]));
    fprintf(out, "</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" rx=\"2\" "
                 "fill=\"rgb(%d,%d,%d)\"/><text class=\"l\" x=\"%.2f\" y=\"%.1f\">",
            x, y, w - 0.5 > 0.1 ? w - 0.5 : 0.1, FG_FRAME_H - 1, rgb[0], rgb[1], rgb[2], x + 3, y + FG_FRAME_H - 4.5);
    write_label(out, g->name, w);
    fputs("</text></g>\n", out);
}

int export_flamegraph(FILE *out, const struct profile *p, const struct export_options *o, bool embedded)
{
    struct export_funcs fn;
    if (export_funcs_build(p, &fn) != 0)
        return -1;
    fn.fold_startup = o && o->fold_startup;
    struct export_tree t;
    if (export_tree_build(p, &fn, &t) != 0) {
        export_funcs_free(&fn);
        return -1;
    }
    uint64_t *start = calloc(t.nnodes, sizeof *start);
    if (!start) {
        export_tree_free(&t);
        export_funcs_free(&fn);
        return -1;
    }
    /* Parents are created before their children, so index order visits a
     * parent's start before its children need it. */
    for (size_t i = 0; i < t.nnodes; i++) {
        uint64_t off = start[i];
        for (uint32_t c = t.nodes[i].first_child; c != UINT32_MAX; c = t.nodes[c].next_sibling) {
            start[c] = off;
            off += t.nodes[c].total;
        }
    }
    struct fg_layout l = {
        .width = o && o->width >= 2 * FG_PAD + 10 ? o->width : FG_WIDTH,
        .inverted = o && o->inverted,
        .total = t.nodes[0].total,
        .depth = t.max_depth ? t.max_depth : 1,
        .period_s = (double)(p->period_ns ? p->period_ns : 1000000) / 1e9,
        .countname = o && o->countname && o->countname[0] ? o->countname : "samples",
        .colors = o ? o->colors : NULL,
        .nodes = t.nodes,
    };
    struct flamediff diff;
    if (o && o->diff_base) {
        if (flamediff_compute(o->diff_base, &fn, &t, &diff) != 0) {
            free(start);
            export_tree_free(&t);
            export_funcs_free(&fn);
            return -1;
        }
        l.diff = &diff;
    }
    l.height = FG_TOP + l.depth * FG_FRAME_H + FG_BOTTOM;
    l.scale = l.total ? (l.width - 2 * FG_PAD) / (double)l.total : 0;
    l.minw = o && o->minwidth_pct > 0 ? o->minwidth_pct / 100.0 * (l.width - 2 * FG_PAD)
             : o && o->minwidth > 0   ? o->minwidth
                                      : FG_MIN_W;
    if (!embedded)
        fputs("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n", out);
    /* width and height in px, both standalone and inlined: the page scrolls
     * instead of shrinking the text of a deep graph. */
    fprintf(out,
            "<svg id=\"opprof-flame\" xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
            "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" data-width=\"%.0f\" data-pad=\"%.0f\" "
            "data-total=\"%" PRIu64 "\" data-charw=\"%.1f\" data-period-ns=\"%" PRIu64 "\" data-standalone=\"%d\">\n",
            l.width, l.height, l.width, l.height, l.width, FG_PAD, l.total, FG_CHAR_W, p->period_ns,
            embedded ? 0 : 1);
    if (!embedded)
        fprintf(out, "<!-- opprof flame graph: %" PRIu64 " samples; weights are %s -->\n", p->sample_count,
                p->sample_period ? "samples of an event (record -c)" : "timer periods");
    fputs("<style>\n"
          "#opprof-flame text { font-family: monospace; font-size: 11px; fill: #000; }\n"
          "#opprof-flame .fg-title { font-size: 16px; font-family: sans-serif; }\n"
          "#opprof-flame .fg-btn { fill: #135; cursor: pointer; font-size: 12px; text-decoration: underline; }\n"
          "#opprof-flame g.f { cursor: pointer; }\n"
          "#opprof-flame g.f:hover rect { stroke: #000; stroke-width: 0.7; }\n"
          "#opprof-flame text.l { pointer-events: none; }\n"
          "</style>\n",
          out);
    write_header(out, p, o, &l, &fn, &t);
    fputs("<g class=\"frames\">\n", out);
    for (size_t i = 1; i < t.nnodes; i++)
        if ((double)t.nodes[i].total * l.scale >= l.minw) /* else its children are narrower still */
            write_frame(out, p, &l, &fn.funcs[t.nodes[i].func], &t.nodes[i], start[i]);
    fputs("</g>\n", out);
    fprintf(out, "<text class=\"fg-details\" x=\"%.0f\" y=\"%.0f\"> </text>\n", FG_PAD, l.height - 12);
    fprintf(out, "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n</svg>\n", flame_script);
    if (l.diff)
        flamediff_free(&diff);
    free(start);
    export_tree_free(&t);
    export_funcs_free(&fn);
    return 0;
}
