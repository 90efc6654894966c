/*
 * analyze/metrics.h — PMU derived metrics (analyze/metrics.c).
 * Part of analyze/analyze.h, the folder's one interface: include that, not
 * this file, from outside analyze/.
 */
#ifndef OPPROF_ANALYZE_METRICS_H
#define OPPROF_ANALYZE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "format/format.h"
#include "sampler/pmu/pmu.h" /* event roles and stat results the metrics read */

/* ------------------------------------------------------------------------- */
/* PMU derived metrics (analyze/metrics.c): pure functions; NaN = not counted */
/* ------------------------------------------------------------------------- */

/* value x enabled/running (multiplexing); NaN when the counter never ran.
 * running_fraction (may be NULL) gets running/enabled. */
double metric_scale(uint64_t value, uint64_t enabled, uint64_t running, double *running_fraction);
double metric_ratio(double num, double den); /* NaN when den <= 0 or either is NaN */
double metric_cpi(double cycles, double instructions);
double metric_ipc(double cycles, double instructions);
/* (CAS reads + writes) x 64 B / s: uncore memory-controller counts, socket-wide. */
double metric_bandwidth_bytes_per_s(double cas_reads, double cas_writes, double seconds);
/* LLC misses x 64 B / s: an estimate (prefetches and writebacks are missed). */
double metric_llc_estimate_bytes_per_s(double llc_misses, double seconds);
double metric_rate_per_s(double count, double seconds);
double metric_cpus_utilized(double task_clock_ns, double wall_ns);
double stat_count_scaled(const struct stat_count *c, double *running_fraction);

struct stat_metrics {
    double wall_s, task_clock_ns, cpus_utilized;
    double cycles, instructions, cpi, ipc, ghz;
    double l2_misses, l2_refs, l2_miss_ratio, l2_miss_rate; /* rate: per instruction */
    double llc_misses, llc_refs, llc_miss_ratio;
    double bandwidth_bytes_per_s;
    bool bandwidth_estimate;    /* from LLC misses x 64 */
    bool bandwidth_socket_wide; /* from uncore counters: every process on the socket */
};
void stat_metrics_compute(const struct stat_result *r, struct stat_metrics *m);

#endif
