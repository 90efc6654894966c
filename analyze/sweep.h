/*
 * analyze/sweep.h — sweeps and diffs (analyze/sweep.c).
 * Part of analyze/analyze.h, the folder's one interface: include that, not
 * this file, from outside analyze/.
 */
#ifndef OPPROF_ANALYZE_SWEEP_H
#define OPPROF_ANALYZE_SWEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analyze/profile.h"
#include "analyze/hotspots.h"

/* ------------------------------------------------------------------------- */
/* Sweeps and diffs (analyze/sweep.c; `opprof sweep`, `opprof diff`)         */
/* ------------------------------------------------------------------------- */
/* Pure helpers: shapes, flop/byte counts, {name} substitution, the row model
 * of a sweep table and the per-operator diff of two profiles. */
#define SWEEP_MAX_DIMS 8
enum sweep_op { SWEEP_OP_UNKNOWN = 0, SWEEP_OP_BMM, SWEEP_OP_MM, SWEEP_OP_ADDMM, SWEEP_OP_SOFTMAX,
                SWEEP_OP_LAYER_NORM, SWEEP_OP_LINEAR, SWEEP_OP_CONV2D, SWEEP_OP_BADDBMM };
/* "torch.bmm", "bmm", "aten::bmm", "torch.nn.functional.softmax" -> the op. */
enum sweep_op sweep_op_parse(const char *name);
const char *sweep_op_name(enum sweep_op op); /* "bmm", ... */
/* "8x64x64x64" -> dims; checks the count the op needs (bmm 4, mm/addmm/linear
 * 3, conv2d 7 with the kernel no larger than the image, softmax/layer_norm
 * 1..SWEEP_MAX_DIMS, baddbmm 4). 0, or -1 with one sentence in err. */
int sweep_parse_shape(enum sweep_op op, const char *text, long *dims, int *ndims, char *err, size_t errlen);
/* Bytes per element of "float32", "bfloat16", ...; 0 when unknown. */
size_t sweep_dtype_size(const char *dtype);
/* Flops and bytes moved per call (formulas in docs/guide.md). 0, or -1 when
 * the op is unknown or the shape does not fit it. */
int sweep_op_counts(enum sweep_op op, const long *dims, int ndims, size_t elem_size, double *flops,
                    double *bytes);
/* conv2d in general: input[n,c,h,w], weight[k,c/groups,r,s], output
 * [n,k,ho,wo]. The sweep's conv2d (stride 1, no padding, groups 1) is the
 * case ho = h-r+1, wo = w-s+1, groups = 1; record --torch-shapes passes the
 * output size its stride, padding and dilation give. -1 when a size is not
 * positive or groups does not divide c. */
int sweep_conv2d_counts(const long *nchw, const long *krs, long ho, long wo, long groups, size_t elem_size,
                        double *flops, double *bytes);
/* arg with every "{name}" replaced by value (malloc'd; NULL on out of memory).
 * Nothing else is interpreted: the result is one argv element, verbatim. */
char *sweep_substitute(const char *arg, const char *name, const char *value);
/* Splits "a,b,c" into malloc'd strings (empty items dropped). 0 or -1. */
int sweep_split_list(const char *text, char ***items, size_t *n);
void sweep_free_list(char **items, size_t n);
/* A label made safe for a directory name: [A-Za-z0-9._=+-] kept, others '_'. */
void sweep_sanitize_label(const char *in, char *out, size_t outlen);
/* Finds "key": <number> in a one-line JSON object; false when absent. */
bool sweep_json_number(const char *json, const char *key, double *out);

/* The Python function of tools/op_bench.py that runs the timed calls and
 * nothing else: diffs of sweep rows keep only the samples under it. */
#define SWEEP_TIMED_FUNCTION "op_bench_timed_calls"

struct sweep_row {
    char label[160];
    char x[96];            /* the swept parameter's value (shape, or the first --param) */
    char x_name[32];       /* that parameter's name ("shape", "threads", a --param name) */
    char series[96];       /* the other parameters ("float32 t1"; "" when none vary) */
    char dir[4096];        /* its result directory */
    bool ok;
    char reason[512];      /* why it failed (ok == false) */
    double median_s, min_s, max_s; /* time per call; NaN: unknown */
    double p25_s, p75_s;   /* quartiles of the timed calls (0: not given) */
    double spread;         /* (p75-p25)/median, else (max-min)/median; NaN: one call */
    unsigned calls;        /* timed calls (0: not given) */
    char counters[320];    /* why CPI and bandwidth are not shown ("no PMU: ..."),
                              "" when they are */
    double cpi, bandwidth_gbps; /* measured; NaN until record stores counter values */
    double gflops, gbps;   /* NaN when the op's counts are unknown */
    char kernel[256];      /* innermost hot kernel ("" when none) */
    double kernel_share;   /* of the op's self time (or of all samples) */
    unsigned threads_active; /* threads with samples */
    int threads;           /* requested (0: default) */
};
/* Fills spread, gflops and gbps from the times and the counts (flops < 0: unknown). */
void sweep_row_derive(struct sweep_row *r, double flops, double bytes);

/* Keeps only the samples whose stack has the Python function python_function
 * (a qualname: SWEEP_TIMED_FUNCTION), and makes their weight the total.
 * Returns how many were kept; 0 leaves the profile untouched. */
size_t profile_keep_samples_under(struct profile *p, const char *python_function);

struct diff_row {
    char *name;
    double a_s, b_s;         /* self time */
    double a_share, b_share; /* self share of all samples, 0..1 */
};
struct diff_table {
    struct diff_row *rows;
    size_t nrows;
    const char *grouping;    /* "op" or "function" */
    const char *scope;       /* which samples were compared, one sentence (NULL: all) */
    uint64_t period_ns;      /* the sample period (the times' resolution); 0: record -c */
};
/* Joins two self tables by row name. 0 or -1 on out of memory. */
int diff_compute(const struct hotspot_table *a, const struct hotspot_table *b, struct diff_table *out);
/* By |b_share - a_share| descending, then |b_s - a_s|, then name. */
void diff_sort(struct diff_table *t);
void diff_free(struct diff_table *t);

#endif
