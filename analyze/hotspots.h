/*
 * analyze/hotspots.h — self/total tables per key (analyze/hotspots.c).
 * Part of analyze/analyze.h, the folder's one interface: include that, not
 * this file, from outside analyze/.
 */
#ifndef OPPROF_ANALYZE_HOTSPOTS_H
#define OPPROF_ANALYZE_HOTSPOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analyze/profile.h"

/* ------------------------------------------------------------------------- */
/* Hotspots: self/total per key                                               */
/* ------------------------------------------------------------------------- */

enum group_by {
    GROUP_FUNCTION = 0,
    GROUP_MODULE,
    GROUP_THREAD,
    GROUP_PROCESS,
    /* PyTorch views (analyze/hotspots_torch.c); see "Operators" below. */
    GROUP_OP,     /* innermost operator frame: "aten::bmm", "AddmmBackward0" */
    GROUP_LINE,   /* Python file:line (self: innermost Python frame) */
    GROUP_PYTHON, /* Python function: qualname + file (self: innermost) */
    GROUP_KERNEL, /* innermost native function, per operator it ran under */
};

enum sort_key {
    SORT_SELF = 0,
    SORT_TOTAL,
    SORT_SAMPLES,
    SORT_NAME,
};

struct hotspot_row {
    char *name;            /* key text (function, module, "tid 123 (name)", ...) */
    char *module;          /* for GROUP_FUNCTION: module; else NULL */
    char *source;          /* "file:line" of the function where known; else NULL */
    uint64_t self;         /* weight where this key is the leaf */
    uint64_t total;        /* weight where the key is anywhere on the stack (once per sample) */
    uint64_t samples;      /* number of samples counted in total */
    char *detail;          /* the table's extra column (detail_title), or NULL */
    /* Per-sample counters summed over the samples this row is self of:
     * COUNTER_SUMS per profile counter (raw value, time enabled, time
     * running); NULL when the profile has no counters. */
    double *counters;
};

struct hotspot_table {
    struct hotspot_row *rows;
    size_t nrows;
    uint64_t total_weight; /* denominator of every percentage */
    uint64_t period_ns;    /* to turn weights into time (0: samples are not time) */
    uint64_t sample_period; /* record -c N: events per unit of weight (then period_ns is 0) */
    const char *event;      /* the event sample_period counts */
    /* Column titles when the table is not a function table (static strings,
     * NULL: the default "Module" and no detail column). detail_key names the
     * detail in CSV/JSON. */
    const char *module_title;
    const char *detail_title;
    const char *detail_key;
    bool native_lines; /* GROUP_LINE of a program without Python frames: its source lines */
    /* Nonzero: rows also get a "Share" = total / share_denominator (callers
     * of an operator: the share of that operator's total time). */
    uint64_t share_denominator;
    const struct prof_counters *counters; /* the profile's counters (NULL: none) */
};

/* Computes the table for the whole profile. Returns 0, -1 on out of memory. */
int hotspots_compute(const struct profile *p, enum group_by by, struct hotspot_table *out);

/* Callers (callees == false) or callees of the function(s) named name:
 * one row per immediate caller/callee, weight = samples whose stack has that
 * edge (counted once per sample). Returns 0; -1 when no frame matches name.
 * When no frame is named exactly name but an operator is ("bmm" or
 * "aten::bmm"), the rows are that operator's Python callers, or with callees
 * its kernels (see hotspots_op_neighbours). */
int hotspots_neighbours(const struct profile *p, const char *name, bool callees,
                        struct hotspot_table *out);

void hotspots_sort(struct hotspot_table *t, enum sort_key key);
void hotspots_free(struct hotspot_table *t);

int group_by_parse(const char *text, enum group_by *out);
int sort_key_parse(const char *text, enum sort_key *out);
const char *group_by_name(enum group_by by);
/* Canonical word for a sort key ("self", "total", ...), as sort_key_parse takes it. */
const char *sort_key_name(enum sort_key key);

#endif
