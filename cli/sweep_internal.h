/*
 * cli/sweep_internal.h — what cli/cmd_sweep.c (options) shares with
 * cli/sweep_run.c (running and analyzing the combinations). Not part of
 * cli.h: other folders see only cmd_sweep().
 */
#ifndef OPPROF_SWEEP_INTERNAL_H
#define OPPROF_SWEEP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "analyze/analyze.h"

#define SWEEP_MAX_PARAMS 4

struct sweep_param {
    char *name;
    char **values;
    size_t nvalues;
};

/* One sweep in progress: where it writes, how each row is recorded, and the
 * rows so far. */
struct sweep_ctx {
    const char *sweepdir;
    double timeout_s;
    const char *events;      /* -e / --metrics, passed to every row's record (NULL: none) */
    char counters[320];      /* why rows have no CPI/bandwidth (sweep_counters_note) */
    struct sweep_row *rows;
    size_t nrows, cap;
    bool any_failed;
};

/* What the op runner is asked to do for every row. */
struct sweep_op_spec {
    enum sweep_op op;
    const char *op_text;     /* as the user wrote it: the runner judges it */
    char **shapes, **dtypes, **threads;
    size_t nshapes, ndtypes, nthreads; /* nthreads 0: PyTorch's default */
    int warmup, repeat;
    double min_time_s;
    const char *python, *runner;
};

/* Every combination of ps (the first parameter varies slowest), {name}
 * substituted into cmd. 0, or -1 on out of memory. */
int sweep_run_params(struct sweep_ctx *c, struct sweep_param *ps, size_t np, char **cmd, size_t ncmd);
/* Every shape x dtype x threads through the runner. 0, or -1 on out of memory. */
int sweep_run_ops(struct sweep_ctx *c, const struct sweep_op_spec *s);

/* The events string for record of -e EVENTS and --metrics SET (either may be
 * NULL): malloc'd "EVENTS,{cycles,instructions}", NULL when neither is given
 * or on error (err then says why). */
char *sweep_events_string(const char *events, const char *metrics, char *err, size_t errlen, bool *bad);
/* One sentence on why the rows will have no CPI and bandwidth: not asked
 * for, no PMU (the kernel's reason), or not stored by record yet. */
void sweep_counters_note(const char *events, char *out, size_t outlen);

/* The runner op_bench.py (see cmd_sweep.c for where it is looked for). */
int sweep_find_runner(char *out, size_t outlen);

#endif
