/*
 * analyze/counters.h — per-sample counters (analyze/counters.c).
 * Part of analyze/analyze.h, the folder's one interface: include that, not
 * this file, from outside analyze/.
 */
#ifndef OPPROF_ANALYZE_COUNTERS_H
#define OPPROF_ANALYZE_COUNTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analyze/profile.h"
#include "sampler/pmu/pmu.h" /* enum pmu_role */

/* Per-sample counters (analyze/counters.c; COUNTER_DESC / COUNTER_SAMPLE in
 * docs/format.md): the deltas of the counting events read at each sample,
 * attributed to the sample's stack the way its time is. */
#define COUNTER_SUMS 3 /* per counter: value, time enabled, time running */
struct prof_counter {
    char *name;
    enum pmu_role role;
    uint32_t type;
    uint64_t config;
    bool user_only;
    bool leader;                    /* record -c: the sampling event, sample_period per sample */
    double value, enabled, running; /* sums over all samples (raw) */
    uint64_t samples;               /* samples that carry it */
};
struct prof_counters {
    struct prof_counter *ev;
    size_t n;
    double *values;    /* nrows x n x COUNTER_SUMS raw deltas (NaN: not counted) */
    size_t nrows, rows_cap;
};
/* Loader: the global index of a stream's counter (added when new); SIZE_MAX
 * when it cannot be added (errno ENOMEM when memory ran out). */
size_t counters_add_event(struct profile *p, const char *name, enum pmu_role role, uint32_t type,
                          uint64_t config, bool user_only);
/* Loader: a new row of NaNs for one sample; returns its 1-based id, 0 when
 * there are no counters or (errno ENOMEM) on out of memory. */
uint32_t counters_new_row(struct profile *p);
/* Loader: sets counter idx of row (1-based) to one delta. */
void counters_set(struct profile *p, uint32_t row, size_t idx, uint64_t value, uint64_t enabled,
                  uint64_t running);
void counters_free(struct prof_counters *c);
/* Loader, after the samples (record -c with other -e events counted): the
 * sampling leader as one more counter, weight x period events per sample, so
 * that rows have its metrics beside the others (CPI from a cycles leader and
 * counted instructions). Only samples that carry the other counters get it
 * (a thread's first sample opens them). Nothing without other counters.
 * 0, or -1 on out of memory. */
int counters_add_leader(struct profile *p, const char *name, enum pmu_role role, bool user_only,
                        uint64_t period);
/* Sums of each counter (COUNTER_SUMS each) per key: key_of_sample(sample) ->
 * index < nkeys (or >= nkeys: skipped). NULL when the profile has no counters
 * or on out of memory. by_stack folds per stack index (nstacks + 1 keys, the
 * last for bad stacks), else per thread index. */
double *counters_fold(const struct profile *p, bool by_stack, size_t *nkeys);

/* Derived figures of one row (or of the whole profile), NaN when an input
 * was not recorded. The scaled count of a role sums its events, each
 * extrapolated by enabled/running over the summed deltas (multiplexing). */
struct counter_metrics {
    double cycles, instructions, llc_misses, llc_refs;
    double cpi, ipc;
    double llc_miss_ratio;   /* misses / references */
    double llc_mpki;         /* misses per 1000 instructions */
    double bandwidth_est;    /* bytes/s: LLC misses x 64 / self time (an estimate) */
};
/* sums: COUNTER_SUMS per counter of c; seconds: the time those samples stand for. */
void counter_metrics_compute(const struct prof_counters *c, const double *sums, double seconds,
                             struct counter_metrics *m);
/* Scaled count of counter i from its sums (NaN when it never ran). */
double counter_scaled(const double *sums, size_t i);
/* Whether any counter of c has the role. */
bool counters_have_role(const struct prof_counters *c, enum pmu_role role);

#endif
