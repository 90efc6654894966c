/*
 * analyze/metrics.c — derived metrics of counted events, as pure functions:
 * multiplexing scaling, CPI/IPC, miss ratios, bandwidth, CPU utilization.
 *
 * Formulas follow LIKWID's groups (see /work/shared/reference.md). A metric
 * whose inputs were not counted is NaN, never 0: the renderer leaves it out
 * rather than printing a zero that looks like a measurement.
 */
#include <math.h>
#include <string.h>

#include "analyze/analyze.h"

double metric_scale(uint64_t value, uint64_t enabled, uint64_t running, double *running_fraction)
{
    if (running_fraction)
        *running_fraction = enabled ? (double)running / (double)enabled : 0.0;
    if (running == 0)
        return NAN; /* never scheduled: nothing to scale from */
    if (enabled <= running)
        return (double)value;
    /* The counter ran running/enabled of the time: extrapolate linearly, as perf stat does. */
    return (double)value * ((double)enabled / (double)running);
}

double metric_ratio(double num, double den)
{
    if (isnan(num) || isnan(den) || den <= 0.0)
        return NAN;
    return num / den;
}

double metric_cpi(double cycles, double instructions)
{
    return metric_ratio(cycles, instructions);
}

double metric_ipc(double cycles, double instructions)
{
    return metric_ratio(instructions, cycles);
}

double metric_bandwidth_bytes_per_s(double cas_reads, double cas_writes, double seconds)
{
    if (isnan(cas_reads) && isnan(cas_writes))
        return NAN;
    double lines = (isnan(cas_reads) ? 0.0 : cas_reads) + (isnan(cas_writes) ? 0.0 : cas_writes);
    return metric_ratio(lines * 64.0, seconds);
}

double metric_llc_estimate_bytes_per_s(double llc_misses, double seconds)
{
    return metric_ratio(llc_misses * 64.0, seconds);
}

double metric_rate_per_s(double count, double seconds)
{
    return metric_ratio(count, seconds);
}

double metric_cpus_utilized(double task_clock_ns, double wall_ns)
{
    return metric_ratio(task_clock_ns, wall_ns);
}

double stat_count_scaled(const struct stat_count *c, double *running_fraction)
{
    return metric_scale(c->value, c->time_enabled, c->time_running, running_fraction);
}

/* Sum of the scaled values of every count with this role (IMC boxes are many). */
static double sum_role(const struct stat_result *r, enum pmu_role role)
{
    double sum = NAN;
    for (size_t i = 0; i < r->ncounts; i++) {
        if (r->counts[i].role != role)
            continue;
        double v = stat_count_scaled(&r->counts[i], NULL);
        if (isnan(v))
            continue;
        sum = isnan(sum) ? v : sum + v;
    }
    return sum;
}

void stat_metrics_compute(const struct stat_result *r, struct stat_metrics *m)
{
    memset(m, 0, sizeof *m);
    m->wall_s = r->wall_ns / 1e9;
    m->task_clock_ns = sum_role(r, PMU_ROLE_TASK_CLOCK);
    m->cpus_utilized = metric_cpus_utilized(m->task_clock_ns, (double)r->wall_ns);
    m->cycles = sum_role(r, PMU_ROLE_CYCLES);
    m->instructions = sum_role(r, PMU_ROLE_INSTRUCTIONS);
    m->cpi = metric_cpi(m->cycles, m->instructions);
    m->ipc = metric_ipc(m->cycles, m->instructions);
    m->ghz = metric_ratio(m->cycles, m->task_clock_ns); /* cycles per ns = GHz */
    m->l2_misses = sum_role(r, PMU_ROLE_L2_MISSES);
    m->l2_refs = sum_role(r, PMU_ROLE_L2_REFS);
    m->l2_miss_ratio = metric_ratio(m->l2_misses, m->l2_refs);
    m->l2_miss_rate = metric_ratio(m->l2_misses, m->instructions);
    m->llc_misses = sum_role(r, PMU_ROLE_LLC_MISSES);
    m->llc_refs = sum_role(r, PMU_ROLE_LLC_REFS);
    m->llc_miss_ratio = metric_ratio(m->llc_misses, m->llc_refs);
    double rd = sum_role(r, PMU_ROLE_IMC_READS), wr = sum_role(r, PMU_ROLE_IMC_WRITES);
    m->bandwidth_bytes_per_s = metric_bandwidth_bytes_per_s(rd, wr, m->wall_s);
    if (!isnan(m->bandwidth_bytes_per_s)) {
        m->bandwidth_socket_wide = true;
    } else {
        m->bandwidth_bytes_per_s = metric_llc_estimate_bytes_per_s(m->llc_misses, m->wall_s);
        m->bandwidth_estimate = !isnan(m->bandwidth_bytes_per_s);
    }
}
