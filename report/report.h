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
};

int report_format_parse(const char *text, enum report_format *out);

/* Header (command, duration, samples, lost, event and rate, warnings). */
void report_print_header(FILE *out, const struct profile *p);

/* Prints the hotspot table (or the callers/callees table) in opts->format. */
int report_print_table(FILE *out, const struct profile *p, const struct hotspot_table *t,
                       const struct report_options *opts, const char *title);

#endif
