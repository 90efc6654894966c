/*
 * report/report_internal.h — helpers report/table.c shares with
 * report/summary.c. Not part of report.h: other folders use only the
 * renderers.
 */
#ifndef OPPROF_REPORT_INTERNAL_H
#define OPPROF_REPORT_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

/* s as a JSON string literal (invalid UTF-8 as U+FFFD); NULL as null. */
void report_json_string(FILE *out, const char *s);
/* A duration with a readable unit: "1.492 s", "12.000 ms". */
void report_format_time(char *buf, size_t len, uint64_t ns);

/* sweep_table.c: the short word a sweep table's CPI/BW cell shows for the
 * reason a row has no counter values ("no PMU", "not asked", "n/a"). */
const char *report_counters_word(const char *reason);

#endif
