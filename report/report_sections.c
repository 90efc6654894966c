/*
 * report/report_sections.c — `opprof report` as a list of sections. The
 * command builds a plan (struct report_plan: what was asked, what was
 * computed) and this file walks one table of sections in print order; each
 * entry says when it applies and how it renders. A new section is a new
 * entry here, not a new branch in cmd_report.
 *
 * The table's order is the report's order: header, summary (Findings and
 * Phases), the main view (one of ranks-only, threading-only, callers,
 * callees, hotspots), then the trailing Ranks and Threading sections of the
 * text report.
 */
#include <stdio.h>
#include <string.h>

#include "analyze/analyze.h"
#include "report/report.h"

bool report_function_matches(const struct profile *p, const char *name, bool *exact, char *op, size_t oplen)
{
    bool partial = false;
    *exact = false;
    op[0] = '\0';
    for (size_t i = 0; i < p->nframes && !*exact; i++) {
        *exact = strcmp(p->frames[i].name, name) == 0;
        partial = partial || (name[0] && strstr(p->frames[i].name, name));
    }
    if (!*exact && hotspots_find_operator(p, name, op, oplen))
        return true;
    return *exact || partial;
}

/* Prints one callers/callees table. Returns 0, or 2 on out of memory or a
 * write error. */
static int print_neighbours(FILE *out, const struct profile *p, const char *name, bool callees,
                            const struct report_options *opts)
{
    bool exact;
    char op[256];
    (void)report_function_matches(p, name, &exact, op, sizeof op);
    struct hotspot_table t;
    if (hotspots_neighbours(p, name, callees, &t) != 0) {
        fputs("opprof report: out of memory while aggregating samples\n", stderr);
        return 2;
    }
    hotspots_sort(&t, opts->sort);
    char title[512];
    if (op[0])
        snprintf(title, sizeof title, callees ? "Kernels under %s (Share: of its self time and OpenMP runtime wait)"
                                              : "Python callers of %s (Share: of its total time)",
                 op);
    else
        snprintf(title, sizeof title, "%s of %s%s%s", callees ? "Callees" : "Callers",
                 exact ? "" : "functions containing \"", name, exact ? "" : "\"");
    int rc = report_print_table(out, p, &t, opts, title);
    hotspots_free(&t);
    return rc == 0 ? 0 : 2;
}

/* --- when each section applies ------------------------------------------- */

static bool is_text(const struct report_plan *pl)
{
    return pl->opts.format == FORMAT_TEXT;
}

static bool is_drill_down(const struct report_plan *pl)
{
    return pl->opts.callers_of || pl->opts.callees_of;
}

/* The main view is the hotspot table unless an option picked another one. */
static bool is_hotspot_view(const struct report_plan *pl)
{
    return !pl->ranks_only && !pl->threading_only && !pl->memory_only && !pl->torch_shapes_only && !is_drill_down(pl);
}

/* record --torch-shapes: alone (--torch-shapes, any format), or after the
 * text hotspot table when the result has it. */
static bool torch_shapes_only_applies(const struct report_plan *pl)
{
    return pl->torch_shapes_only && !pl->ranks_only && !pl->threading_only;
}

static bool trailing_torch_shapes_applies(const struct report_plan *pl)
{
    return is_hotspot_view(pl) && is_text(pl) && pl->torch_shapes && pl->torch_shapes->files;
}

static bool header_applies(const struct report_plan *pl)
{
    return is_text(pl);
}

/* csv/json carry no header, so an interrupted recording's caveat goes to
 * stderr, where it is not lost. */
static bool interrupted_note_applies(const struct report_plan *pl)
{
    return !is_text(pl) && !pl->profile->complete;
}

static bool summary_applies(const struct report_plan *pl)
{
    return is_text(pl) && pl->phases && !pl->torch_shapes_only;
}

static bool ranks_only_applies(const struct report_plan *pl)
{
    return pl->ranks_only;
}

static bool threading_only_applies(const struct report_plan *pl)
{
    return !pl->ranks_only && pl->threading_only;
}

static bool callers_applies(const struct report_plan *pl)
{
    return !pl->ranks_only && !pl->threading_only && pl->opts.callers_of;
}

static bool callees_applies(const struct report_plan *pl)
{
    return !pl->ranks_only && !pl->threading_only && pl->opts.callees_of;
}

/* The Ranks section follows the merged text table; it also follows the
 * Threading section of --threading, as it always has. */
static bool trailing_ranks_applies(const struct report_plan *pl)
{
    return !pl->ranks_only && pl->show_ranks && is_text(pl) && !is_drill_down(pl);
}

/* The Threading section closes the text hotspot report. */
static bool trailing_threading_applies(const struct report_plan *pl)
{
    return is_hotspot_view(pl) && is_text(pl) && pl->profile->threading;
}

/* The Memory section: alone with --memory, else after the text hotspot
 * report when the result has memory readings. */
static bool memory_only_applies(const struct report_plan *pl)
{
    return !pl->ranks_only && !pl->threading_only && pl->memory_only;
}

static bool trailing_memory_applies(const struct report_plan *pl)
{
    return is_hotspot_view(pl) && is_text(pl) && pl->profile->memory;
}

/* --- how each section renders: 0, or the exit status --------------------- */

static int render_header(FILE *out, const struct report_plan *pl)
{
    report_print_header(out, pl->profile);
    fputc('\n', out);
    return 0;
}

static int render_interrupted_note(FILE *out, const struct report_plan *pl)
{
    (void)out;
    (void)pl;
    fputs("opprof report: warning: recording did not finish (opprof record was interrupted); "
          "figures cover what was written\n",
          stderr);
    return 0;
}

static int render_summary(FILE *out, const struct report_plan *pl)
{
    report_print_summary(out, pl->phases, pl->findings, pl->profile->period_ns);
    return 0;
}

/* --ranks prints what it could even when a write fails: the status of the
 * stream is checked once, when the report is closed. */
static int render_ranks_only(FILE *out, const struct report_plan *pl)
{
    (void)report_print_ranks(out, pl->ranks, pl->opts.format);
    return 0;
}

/* report_print_threading fails only when threading_analyze runs out of
 * memory: said here, as render_hotspots does, so the cli's exit 2 comes with
 * its one line. */
static int threading_oom(void)
{
    fputs("opprof report: out of memory while analysing threads\n", stderr);
    return 2;
}

static int render_threading_only(FILE *out, const struct report_plan *pl)
{
    return report_print_threading(out, pl->profile, pl->opts.format) != 0 ? threading_oom() : 0;
}

static int render_callers(FILE *out, const struct report_plan *pl)
{
    return print_neighbours(out, pl->profile, pl->opts.callers_of, false, &pl->opts);
}

static int render_callees(FILE *out, const struct report_plan *pl)
{
    if (pl->opts.callers_of)
        fputc('\n', out);
    struct report_options o = pl->opts;
    o.callers_of = NULL; /* the JSON names the table it holds */
    return print_neighbours(out, pl->profile, pl->opts.callees_of, true, &o);
}

static int render_hotspots(FILE *out, const struct report_plan *pl)
{
    struct hotspot_table t;
    if (hotspots_compute(pl->profile, pl->opts.group_by, &t) != 0) {
        fputs("opprof report: out of memory while aggregating samples\n", stderr);
        return 2;
    }
    hotspots_sort(&t, pl->opts.sort);
    int rc = report_print_table(out, pl->profile, &t, &pl->opts, NULL) != 0 ? 2 : 0;
    hotspots_free(&t);
    return rc;
}

static int render_torch_shapes(FILE *out, const struct report_plan *pl, bool trailing)
{
    if (!pl->torch_shapes || !pl->torch_shapes->files) {
        /* --torch-shapes asked for a section the result does not have */
        fputs("opprof report: --torch-shapes: this result has no torch_shapes.*.tsv; record with "
              "`opprof record --torch-shapes -- python ...` (a program that imports torch)\n", stderr);
        return 1;
    }
    if (trailing)
        fputc('\n', out);
    if (report_print_torch_shapes(out, pl->profile, pl->torch_shapes, pl->opts.format, pl->opts.limit) != 0) {
        fputs("opprof report: out of memory while listing operator FLOPs\n", stderr);
        return 2;
    }
    return 0;
}

static int render_torch_shapes_only(FILE *out, const struct report_plan *pl)
{
    return render_torch_shapes(out, pl, false);
}

static int render_trailing_torch_shapes(FILE *out, const struct report_plan *pl)
{
    return render_torch_shapes(out, pl, true);
}

static int render_trailing_ranks(FILE *out, const struct report_plan *pl)
{
    fputc('\n', out);
    (void)report_print_ranks(out, pl->ranks, FORMAT_TEXT);
    return 0;
}

static int render_trailing_threading(FILE *out, const struct report_plan *pl)
{
    fputc('\n', out);
    return report_print_threading(out, pl->profile, FORMAT_TEXT) != 0 ? threading_oom() : 0;
}

static int memory_oom(void)
{
    fputs("opprof report: out of memory while analysing memory readings\n", stderr);
    return 2;
}

static int render_memory_only(FILE *out, const struct report_plan *pl)
{
    return report_print_memory(out, pl->profile, pl->opts.format, pl->opts.limit) != 0 ? memory_oom() : 0;
}

static int render_trailing_memory(FILE *out, const struct report_plan *pl)
{
    fputc('\n', out);
    return report_print_memory(out, pl->profile, FORMAT_TEXT, 0) != 0 ? memory_oom() : 0;
}

struct report_section {
    const char *name;
    bool (*applies)(const struct report_plan *pl);
    int (*render)(FILE *out, const struct report_plan *pl);
};

/* In print order. */
static const struct report_section report_sections[] = {
    {"header", header_applies, render_header},
    {"interrupted-note", interrupted_note_applies, render_interrupted_note},
    {"summary", summary_applies, render_summary},
    {"ranks-only", ranks_only_applies, render_ranks_only},
    {"threading-only", threading_only_applies, render_threading_only},
    {"callers", callers_applies, render_callers},
    {"callees", callees_applies, render_callees},
    {"hotspots", is_hotspot_view, render_hotspots},
    {"torch-shapes-only", torch_shapes_only_applies, render_torch_shapes_only},
    {"torch-shapes", trailing_torch_shapes_applies, render_trailing_torch_shapes},
    {"ranks", trailing_ranks_applies, render_trailing_ranks},
    {"threading", trailing_threading_applies, render_trailing_threading},
    {"memory-only", memory_only_applies, render_memory_only},
    {"memory", trailing_memory_applies, render_trailing_memory},
};

int report_render(FILE *out, const struct report_plan *pl)
{
    for (size_t i = 0; i < sizeof report_sections / sizeof report_sections[0]; i++) {
        const struct report_section *s = &report_sections[i];
        if (!s->applies(pl))
            continue;
        int rc = s->render(out, pl);
        if (rc != 0)
            return rc; /* a failed section ends the report: what follows would mislead */
    }
    return 0;
}
