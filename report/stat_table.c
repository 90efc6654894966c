/*
 * report/stat_table.c — the `opprof stat` table: counts, multiplexing, derived
 * metrics, run times. A pure function of a stat_result (tested on hand-made
 * counts), laid out like perf stat so perf users read it at a glance.
 *
 * Only counted events get a row: events that could not be opened are absent
 * (the reason was said once by the caller), and a metric whose inputs are
 * missing is not printed rather than shown as 0.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"

/* 1234567 -> "1,234,567" (rounded). */
static void thousands(double v, char *out, size_t outlen)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", v < 0 ? 0 : v);
    size_t n = strlen(digits), o = 0;
    for (size_t i = 0; i < n && o + 2 < outlen; i++) {
        if (i && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
}

static void rate(double count, double seconds, char *out, size_t outlen)
{
    double r = metric_rate_per_s(count, seconds);
    if (isnan(r))
        snprintf(out, outlen, "?");
    else if (r >= 1e6)
        snprintf(out, outlen, "%.3f M/s", r / 1e6);
    else if (r >= 1e3)
        snprintf(out, outlen, "%.3f K/s", r / 1e3);
    else
        snprintf(out, outlen, "%.3f /s", r);
}

static void bytes_rate(double bps, char *out, size_t outlen)
{
    if (bps >= 1e9)
        snprintf(out, outlen, "%.2f GB/s", bps / 1e9);
    else if (bps >= 1e6)
        snprintf(out, outlen, "%.2f MB/s", bps / 1e6);
    else
        snprintf(out, outlen, "%.2f KB/s", bps / 1e3);
}

/* The "# ..." comment of one row, from its role and the metrics. */
static void comment(const struct stat_count *c, double value, const struct stat_metrics *m, char *out,
                    size_t outlen)
{
    out[0] = '\0';
    switch (c->role) {
    case PMU_ROLE_TASK_CLOCK:
        if (!isnan(m->cpus_utilized))
            snprintf(out, outlen, "%.3f CPUs utilized", m->cpus_utilized);
        break;
    case PMU_ROLE_CONTEXT_SWITCHES:
    case PMU_ROLE_CPU_MIGRATIONS:
    case PMU_ROLE_PAGE_FAULTS:
    case PMU_ROLE_MINOR_FAULTS:
    case PMU_ROLE_MAJOR_FAULTS:
        rate(value, m->wall_s, out, outlen);
        break;
    case PMU_ROLE_CYCLES:
        if (!isnan(m->ghz))
            snprintf(out, outlen, "%.3f GHz", m->ghz);
        break;
    case PMU_ROLE_INSTRUCTIONS:
        if (!isnan(m->ipc))
            snprintf(out, outlen, "%.2f insn per cycle", m->ipc);
        break;
    case PMU_ROLE_L2_MISSES:
        if (!isnan(m->l2_miss_ratio))
            snprintf(out, outlen, "%.2f %% of L2 requests", 100.0 * m->l2_miss_ratio);
        break;
    case PMU_ROLE_LLC_MISSES:
        if (!isnan(m->llc_miss_ratio))
            snprintf(out, outlen, "%.2f %% of LLC references", 100.0 * m->llc_miss_ratio);
        break;
    default:
        break;
    }
}

void report_print_stat(FILE *out, const struct stat_result *r, const char *command)
{
    struct stat_metrics m;
    stat_metrics_compute(r, &m);
    fprintf(out, "\n opprof stat: counters for '%s' (pid %d and every thread and child process):\n\n",
            command, (int)r->pid);
    bool any_scaled = false;
    for (size_t i = 0; i < r->ncounts; i++) {
        const struct stat_count *c = &r->counts[i];
        double running;
        double v = stat_count_scaled(c, &running);
        char name[272], num[48], note[96], extra[96] = "";
        snprintf(name, sizeof name, "%s%s", c->name, c->user_only ? ":u" : "");
        if (isnan(v)) {
            /* Opened but never scheduled on a counter: say so instead of 0. */
            fprintf(out, " %18s       %-28s (never scheduled: too many events for the counters)\n",
                    "<not counted>", name);
            continue;
        }
        if (c->role == PMU_ROLE_TASK_CLOCK || c->role == PMU_ROLE_CPU_CLOCK) {
            snprintf(num, sizeof num, "%.2f", v / 1e6);
            comment(c, v, &m, note, sizeof note);
            fprintf(out, " %18s msec  %-28s # %s\n", num, name, note);
            continue;
        }
        thousands(v, num, sizeof num);
        comment(c, v, &m, note, sizeof note);
        if (c->time_running < c->time_enabled) {
            snprintf(extra, sizeof extra, "  (scaled: counted %.1f %% of the time)", 100.0 * running);
            any_scaled = true;
        }
        if (c->uncore)
            strncat(extra, "  (socket-wide)", sizeof extra - strlen(extra) - 1);
        if (c->from_rusage)
            strncat(extra, "  (from rusage)", sizeof extra - strlen(extra) - 1);
        fprintf(out, " %18s       %-28s %s%s%s\n", num, name, note[0] ? "# " : "", note, extra);
    }

    bool have_cpi = !isnan(m.cpi), have_bw = !isnan(m.bandwidth_bytes_per_s);
    bool have_l2 = !isnan(m.l2_miss_rate) || !isnan(m.l2_miss_ratio), have_llc = !isnan(m.llc_miss_ratio);
    if (have_cpi || have_bw || have_l2 || have_llc) {
        fputs("\n Derived metrics\n", out);
        if (have_cpi)
            fprintf(out, "   %-26s %10.3f   (IPC %.3f)%s\n", "CPI (cycles/instruction)", m.cpi, m.ipc,
                    m.cpi > 1.0 ? "  high: above 1.0, look for memory stalls" : "");
        if (have_bw) {
            char b[32];
            bytes_rate(m.bandwidth_bytes_per_s, b, sizeof b);
            fprintf(out, "   %-26s %10s   %s\n", "Memory bandwidth", b,
                    m.bandwidth_socket_wide ? "(socket-wide: every process on the socket, not only this one)"
                                            : "(estimate: LLC misses x 64 B)");
        }
        if (!isnan(m.l2_miss_rate))
            fprintf(out, "   %-26s %10.3f   per 1000 instructions\n", "L2 misses", 1000.0 * m.l2_miss_rate);
        if (!isnan(m.l2_miss_ratio))
            fprintf(out, "   %-26s %9.2f %%\n", "L2 miss ratio", 100.0 * m.l2_miss_ratio);
        if (have_llc)
            fprintf(out, "   %-26s %9.2f %%\n", "LLC miss ratio", 100.0 * m.llc_miss_ratio);
    }
    if (any_scaled)
        fputs("\n Counts marked scaled were multiplexed: value x time_enabled / time_running.\n", out);

    fprintf(out, "\n %18.6f seconds time elapsed\n", m.wall_s);
    fprintf(out, " %18.6f seconds user\n", r->utime_ns / 1e9);
    fprintf(out, " %18.6f seconds sys\n", r->stime_ns / 1e9);
    if (r->exit_signal)
        fprintf(out, " workload killed by signal %d (exit status %d)\n", r->exit_signal, r->exit_status);
    else
        fprintf(out, " workload exit status %d\n", r->exit_status);
    fputc('\n', out);
}
