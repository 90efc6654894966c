/*
 * report/report.h — renderers. Pure functions of an analyzed profile: they
 * write to a FILE* and never read the result directory themselves.
 */
#ifndef OPPROF_REPORT_H
#define OPPROF_REPORT_H

#include <stdio.h>
#include "analyze/analyze.h"

enum report_format {
    FORMAT_TEXT = 0,
    FORMAT_CSV,
    FORMAT_JSON,
};

struct report_options {
    enum report_format format;
    enum group_by group_by;
    enum sort_key sort;
    size_t limit;           /* 0: no limit */
    const char *callers_of; /* --callers NAME */
    const char *callees_of; /* --callees NAME */
    /* JSON only: the "phases" and "findings" keys (NULL: omitted). */
    const struct phase_summary *phases;
    const struct findings *findings;
    const struct rank_summary *ranks; /* JSON only: the "ranks" key (NULL: omitted) */
    /* Text: the terminal's width when stdout is one (report_terminal_columns),
     * the table's name/module/detail/source columns shrink to fit; 0: none. */
    unsigned columns;
};
/* The width of the terminal on fd (TIOCGWINSZ, else $COLUMNS), 0 when fd is
 * not a terminal: output to files and pipes keeps every character. */
unsigned report_terminal_columns(int fd);
/* Writes the text report text (len bytes) to out with every line longer than
 * columns wrapped at spaces, under its own value column ("  samples     ..."
 * continues under "...") or its bullet. */
void report_write_fitted(FILE *out, const char *text, size_t len, unsigned columns);

int report_format_parse(const char *text, enum report_format *out);

/* Header (command, duration, samples, lost, event and rate, warnings). */
void report_print_header(FILE *out, const struct profile *p);
/* What the samples cover, for headers: "user + kernel CPU time", or how a
 * user-mode-only recording accounts for kernel time. */
const char *report_sampled_modes(const struct profile *p);

/* Prints the hotspot table (or the callers/callees table) in opts->format. */
int report_print_table(FILE *out, const struct profile *p, const struct hotspot_table *t,
                       const struct report_options *opts, const char *title);

/* --- the report as a list of sections (report/report_sections.c) ---------- */
/* What `opprof report` prints, decided before anything is printed: the
 * options, the loaded profile and the analyses the sections read. */
struct report_plan {
    const struct profile *profile;     /* the one result, or the ranks merged */
    struct report_options opts;        /* opts.ranks/phases/findings: JSON keys */
    bool ranks_only;                   /* --ranks, --group-by rank */
    bool threading_only;               /* --threading */
    bool memory_only;                  /* --memory */
    const struct rank_summary *ranks;  /* the Ranks section's figures */
    bool show_ranks;                   /* the text report ends with a Ranks section */
    /* Findings and Phases head the hotspot view (NULL: not computed). */
    const struct phase_summary *phases;
    const struct findings *findings;
    /* record --torch-shapes: operator FLOPs (NULL: the result has none) and
     * --torch-shapes (that section only, in any format) */
    const struct torch_shapes *torch_shapes;
    bool torch_shapes_only;
};
/* Prints every section of the plan that applies, in order, and stops at the
 * first that fails. 0, or the exit status (2: out of memory or a write error). */
int report_render(FILE *out, const struct report_plan *plan);
/* Whether any frame is named name (*exact), or an operator is (op gets its
 * name), or else a frame contains it: the rule the callers/callees sections
 * apply, for checking before anything is printed. */
bool report_function_matches(const struct profile *p, const char *name, bool *exact, char *op, size_t oplen);
/* --- end of sections -------------------------------------------------------- */

/* --- summary of a PyTorch profile (report/summary.c) ----------------------- */
/* Text: a "Findings" section (when there are any) and a "Phases" section
 * (only when ph->pytorch: a plain native program has no phases), each
 * followed by a blank line; prints nothing when neither applies. ph or f may
 * be NULL. */
void report_print_summary(FILE *out, const struct phase_summary *ph, const struct findings *f,
                          uint64_t period_ns);
/* JSON: appends ,"phases":{...} (when ph->pytorch) and ,"findings":[...] to
 * the object being written; nothing for NULL arguments. */
void report_json_summary(FILE *out, const struct phase_summary *ph, const struct findings *f);
/* --- end of summary -------------------------------------------------------- */


/* ------------------------------------------------------------------------- */
/* opprof stat (report/stat_table.c)                                         */
/* ------------------------------------------------------------------------- */
/* perf-stat-like table of a counting run: counted events (scaled ones marked
 * with their running %), derived metrics, elapsed/user/sys, exit status. */
void report_print_stat(FILE *out, const struct stat_result *r, const char *command);
/* --- end of opprof stat ---------------------------------------------------- */

/* --- exports (report/export_*.c, `opprof export`) -------------------------- */
/* Each writes one file format to out and returns 0, or -1 on out of memory.
 * Weights are sample weights (timer periods), so every figure adds up to the
 * report's total_weight. */
struct export_options {
    bool inverted;         /* flame graph as an icicle (root at the top) */
    const char *title;     /* flame graph / page title; NULL: from the command */
    unsigned online_cpus;  /* from the result's info file; 0: unknown */
    /* flame graph, as flamegraph.pl's options of the same names: */
    double width;          /* SVG width in px; 0: 1200 */
    double minwidth;       /* boxes narrower than this (px) are left out; 0: 0.1 */
    double minwidth_pct;   /* or narrower than this % of the total when > 0 */
    const char *colors;    /* NULL/"opprof": by frame class; else a flamegraph.pl palette */
    const char *countname; /* what a sample is called; NULL: "samples" */
    bool fold_startup;     /* flame graph: import and library-init stacks end in one box */
    /* differential flame graph (opprof diff --flamegraph): B's tree coloured
     * by the change in share from this profile (A); NULL: none */
    const struct profile *diff_base;
    const char *diff_base_name; /* how A is named in the graph */
};
/* Whether name is a palette --colors accepts. */
bool export_colors_valid(const char *name);
/* Brendan Gregg's folded stacks: "root;...;leaf count\n", sorted. */
int export_folded(FILE *out, const struct profile *p);
/* Self-contained interactive SVG flame graph (embedded: no XML prolog, for
 * inlining into HTML). */
int export_flamegraph(FILE *out, const struct profile *p, const struct export_options *o, bool embedded);
/* speedscope's file format: one sampled profile per thread. */
int export_speedscope(FILE *out, const struct profile *p);
/* Chrome Trace Event JSON of one or more profiles on one clock; o[i] per profile. */
int export_chrome_trace(FILE *out, const struct profile *const *profiles, const struct export_options *o,
                        size_t nprofiles);
/* cProfile-compatible marshal data for pstats. -2 (with a sentence in err)
 * when the profile has no samples: pstats refuses an empty dict. */
int export_pstats(FILE *out, const struct profile *p, char *err, size_t errlen);
/* pprof's profile.proto, gzipped. */
int export_pprof(FILE *out, const struct profile *p);
/* callgrind's format (callgrind_annotate, KCachegrind). */
int export_callgrind(FILE *out, const struct profile *p);
/* One self-contained HTML page: summary, hotspots, flame graph, threads over time. */
int export_html(FILE *out, const struct profile *p, const struct export_options *o);
/* --- end of exports -------------------------------------------------------- */

/* --- threads and OpenMP (report/threading_section.c) ----------------------- */
/* The "Threading" section: text, or one JSON object {"threading": {...}} with
 * the 10 ms timeline. 0, or -1 on out of memory. */
int report_print_threading(FILE *out, const struct profile *p, enum report_format format);
/* --- end of threads and OpenMP --------------------------------------------- */

/* --- FLOPs per operator (report/torch_shapes_section.c) --------------------- */
/* The "Operator FLOPs" section of record --torch-shapes: text (limit rows, 0:
 * all), CSV or JSON ({"torch_shapes": {...}}). 0, or -1 on out of memory. */
int report_print_torch_shapes(FILE *out, const struct profile *p, const struct torch_shapes *ts,
                              enum report_format format, size_t limit);
/* --- end of FLOPs per operator --------------------------------------------- */

/* --- ranks of a parallel job (report/ranks_section.c) ---------------------- */
/* The "Ranks" section: text (table and the slowest rank), CSV (one row per
 * rank) or one JSON object {"format":"opprof-ranks 1","ranks":{...}}. */
int report_print_ranks(FILE *out, const struct rank_summary *s, enum report_format format);
/* Appends ,"ranks":{...} to the JSON object being written (nothing for NULL). */
void report_json_ranks(FILE *out, const struct rank_summary *s);
/* --- end of ranks ------------------------------------------------------------ */

/* --- memory over time (report/memory_section.c) ---------------------------- */
/* The "Memory" section: text (limit rows per growth table, 0: 10), CSV (the
 * growth rows of every view) or one JSON object {"memory": {...}} with each
 * process's readings. 0, or -1 on out of memory. */
int report_print_memory(FILE *out, const struct profile *p, enum report_format format, size_t limit);
/* --- end of memory --------------------------------------------------------- */

/* --- sweeps and diffs (report/sweep_table.c, sweep_plot.c, sweep_html.c) -- */
/* One row per combination; title (may be NULL) heads the text table. CPI and
 * bandwidth columns show each row's measured value, or in text a short word
 * and in the note below the table the row's reason (sweep_row.counters); in
 * CSV/JSON null plus a "counters" field with the reason. */
void report_print_sweep(FILE *out, const struct sweep_row *rows, size_t n, enum report_format format,
                        const char *title);
/* The metric on the plot's y axis. AUTO: GFLOP/s when every row that ran has
 * a flop count, else time per call. */
enum sweep_plot_metric { SWEEP_PLOT_AUTO = 0, SWEEP_PLOT_GFLOPS, SWEEP_PLOT_GBPS, SWEEP_PLOT_TIME };
int sweep_plot_metric_parse(const char *text, enum sweep_plot_metric *out); /* 0 or -1 */
/* The metric against the swept parameter as SVG: one group of bars per x
 * value (sweep_row.x) in row order, one bar per series (sweep_row.series)
 * with a legend when there are several, a y axis from 0 with ticks, unit and
 * grid lines, failed rows marked with a cross and their reason as a tooltip.
 * Bar heights are proportional to the values (each bar carries data-value).
 * embedded: no XML prolog, for inlining into HTML. what names the swept
 * thing in the title (the op or the command). */
void report_sweep_svg(FILE *out, const struct sweep_row *rows, size_t n, const char *what,
                      enum sweep_plot_metric metric, bool embedded);
/* One self-contained HTML page: the title, the table and the inline plot. */
void report_sweep_html(FILE *out, const struct sweep_row *rows, size_t n, const char *title, const char *what,
                       enum sweep_plot_metric metric);
/* Per-operator (or function) self time and share in A and B, as sorted. */
void report_print_diff(FILE *out, const struct diff_table *t, const char *a, const char *b,
                       enum report_format format, size_t limit);
/* --- end of sweeps and diffs ----------------------------------------------- */

#endif
