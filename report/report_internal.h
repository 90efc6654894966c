/*
 * report/report_internal.h — helpers report/table.c shares with
 * report/summary.c. Not part of report.h: other folders use only the
 * renderers.
 */
#ifndef OPPROF_REPORT_INTERNAL_H
#define OPPROF_REPORT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* s as a JSON string literal (invalid UTF-8 as U+FFFD); NULL as null. */
void report_json_string(FILE *out, const char *s);
/* One CSV field, quoted (RFC 4180) only when it has to be; NULL writes nothing. */
void report_csv_field(FILE *out, const char *s);
/* A duration with a readable unit: "1.492 s", "12.000 ms". */
/* ns at the precision resolution_ns (the sample period) supports: "999 ms",
 * "1.967 s" at 1 ms per sample. */
void report_format_time(char *buf, size_t len, uint64_t ns, uint64_t resolution_ns);
void report_format_duration(char *buf, size_t len, double ns, double resolution_ns);
/* text after first, wrapped at spaces to columns (0: one line), later lines
 * after rest; a word longer than a line stays whole. Ends with a newline. */
void report_print_wrapped(FILE *out, const char *first, const char *rest, const char *text, unsigned columns);
/* Characters (UTF-8 sequences) of s, for column widths. */
size_t report_text_width(const char *s);

/* header.c: the agent's own cost, as the overhead line prints it and the
 * JSON report's "agent" object carries it. False: the recording has no
 * agent figures at all (no handler call, writer CPU or start-up recorded:
 * attach mode, an older stream), or no process CPU time. A run without a
 * sample has them without handler figures (handler_called false). */
struct profile;
struct report_agent_cost {
    bool handler_called;     /* the handler ran at least once (a run too short for one sample: not) */
    bool cpu_clock;          /* handler time on the thread CPU clock (AGENT_CPU); else wall time */
    double handler_ns;       /* handler time, all calls (timed calls' mean x calls on the CPU clock) */
    double per_sample_ns;    /* handler_ns per handler call */
    double median_ns, p99_ns; /* of the timed calls (less their clock read in older recordings; cpu_clock only; 0 otherwise, null in JSON) */
    double clock_read_ns;     /* older recordings: the clock read taken out of each timed call (0: none) */
    double timing_ns_per_sample; /* what timing 1 in N calls cost, per call, in per_sample_ns (0: an older recording) */
    uint64_t writer_cpu_ns, startup_cpu_ns;
    uint64_t omp_hook_ns; /* the agent's time around OpenMP regions in the workload's threads */
    uint64_t omp_team_wait_ns; /* libgomp's team threads spinning through it (estimate) */
    double share_pct; /* handler + writer + start-up + OpenMP hooks, % of the processes' CPU time */
};
bool report_agent_cost(const struct profile *p, struct report_agent_cost *c);

/* sweep_table.c: the short word a sweep table's CPI/BW cell shows for the
 * reason a row has no counter values ("no PMU", "not asked", "n/a"). */
const char *report_counters_word(const char *reason);
/* --- per-sample counter columns (report/counter_columns.c) --------------- */
#include "analyze/analyze.h"
#define COUNTER_COLUMNS_MAX (OPR_MAX_COUNTERS * 4 + 8)
enum counter_column_kind {
    CCOL_COUNT = 0, /* one counter's scaled count */
    CCOL_CPI, CCOL_IPC, CCOL_LLC_MISS_RATIO, CCOL_LLC_MPKI, CCOL_BANDWIDTH_EST,
};
struct counter_column {
    enum counter_column_kind kind;
    size_t counter;  /* CCOL_COUNT: index into the profile's counters */
    char title[40];  /* text header */
    char key[72];    /* CSV/JSON name */
    int width;
};
struct counter_columns {
    struct counter_column col[COUNTER_COLUMNS_MAX];
    size_t n;
};
/* The columns a table gets: only those whose inputs were recorded. */
void counter_columns_plan(const struct hotspot_table *t, struct counter_columns *cc);
/* The value of column c in row r (NaN: not counted in this row). */
double counter_column_value(const struct hotspot_table *t, const struct hotspot_row *r,
                            const struct counter_column *c);
void counter_columns_text_header(FILE *out, const struct counter_columns *cc);
void counter_columns_text_cells(FILE *out, const struct counter_columns *cc, const struct hotspot_table *t,
                                const struct hotspot_row *r);
void counter_columns_csv_header(FILE *out, const struct counter_columns *cc);
void counter_columns_csv_cells(FILE *out, const struct counter_columns *cc, const struct hotspot_table *t,
                               const struct hotspot_row *r);
void counter_columns_json(FILE *out, const struct counter_columns *cc, const struct hotspot_table *t,
                          const struct hotspot_row *r);
/* Header lines: which counters, how many samples carry them, multiplexing. */
void counter_columns_print_header(FILE *out, const struct profile *p);
/* Text footer: what the estimated columns mean (nothing without them). */
void counter_columns_text_footer(FILE *out, const struct counter_columns *cc);

#endif
