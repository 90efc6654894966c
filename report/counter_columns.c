/*
 * report/counter_columns.c — the hotspot table's counter columns: each
 * counted event's (scaled) count over the row's self samples, then CPI and
 * IPC, LLC miss ratio and misses per 1000 instructions, and the bandwidth
 * estimate, each only when its inputs were recorded (never a column of
 * zeros standing for "not measured"). A row where a counter never ran shows
 * "-". Bandwidth per row is LLC misses x 64 B over the row's self time, and
 * its header says "est." because prefetches and write-backs are not in it.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"
#include "report/report_internal.h"

static void add_column(struct counter_columns *cc, enum counter_column_kind kind, size_t counter, const char *title,
                       const char *key)
{
    if (cc->n >= COUNTER_COLUMNS_MAX)
        return;
    struct counter_column *c = &cc->col[cc->n++];
    c->kind = kind;
    c->counter = counter;
    snprintf(c->title, sizeof c->title, "%s", title);
    snprintf(c->key, sizeof c->key, "%s", key);
    int w = (int)strlen(c->title);
    c->width = w < 9 ? 9 : w;
}

void counter_columns_plan(const struct hotspot_table *t, struct counter_columns *cc)
{
    cc->n = 0;
    const struct prof_counters *pc = t->counters;
    if (!pc || pc->n == 0 || pc->nrows == 0)
        return;
    for (size_t i = 0; i < pc->n; i++) {
        if (pc->ev[i].samples == 0)
            continue; /* described but never read: no column */
        char title[40], key[72];
        snprintf(title, sizeof title, "%.24s", pc->ev[i].name);
        snprintf(key, sizeof key, "%s", pc->ev[i].name);
        add_column(cc, CCOL_COUNT, i, title, key);
    }
    bool cyc = counters_have_role(pc, PMU_ROLE_CYCLES), ins = counters_have_role(pc, PMU_ROLE_INSTRUCTIONS);
    bool miss = counters_have_role(pc, PMU_ROLE_LLC_MISSES), refs = counters_have_role(pc, PMU_ROLE_LLC_REFS);
    if (cyc && ins) {
        add_column(cc, CCOL_CPI, 0, "CPI", "cpi");
        add_column(cc, CCOL_IPC, 0, "IPC", "ipc");
    }
    if (miss && refs)
        add_column(cc, CCOL_LLC_MISS_RATIO, 0, "LLC miss %", "llc_miss_pct");
    if (miss && ins)
        add_column(cc, CCOL_LLC_MPKI, 0, "LLC MPKI", "llc_misses_per_1k_instructions");
    if (miss)
        add_column(cc, CCOL_BANDWIDTH_EST, 0, "GB/s est.", "bandwidth_est_gb_per_s");
}

double counter_column_value(const struct hotspot_table *t, const struct hotspot_row *r,
                            const struct counter_column *c)
{
    if (!r->counters || !t->counters)
        return NAN;
    if (c->kind == CCOL_COUNT)
        return counter_scaled(r->counters, c->counter);
    struct counter_metrics m;
    double seconds = (double)r->self * (double)t->period_ns / 1e9;
    counter_metrics_compute(t->counters, r->counters, seconds, &m);
    switch (c->kind) {
    case CCOL_CPI: return m.cpi;
    case CCOL_IPC: return m.ipc;
    case CCOL_LLC_MISS_RATIO: return isnan(m.llc_miss_ratio) ? NAN : 100.0 * m.llc_miss_ratio;
    case CCOL_LLC_MPKI: return m.llc_mpki;
    case CCOL_BANDWIDTH_EST: return isnan(m.bandwidth_est) ? NAN : m.bandwidth_est / 1e9;
    default: return NAN;
    }
}

/* Counts as integers; ratios with 2 decimals (3 for bandwidth). */
static void format_value(char *buf, size_t len, const struct counter_column *c, double v)
{
    if (isnan(v))
        snprintf(buf, len, "-");
    else if (c->kind == CCOL_COUNT)
        snprintf(buf, len, "%.0f", v);
    else if (c->kind == CCOL_BANDWIDTH_EST)
        snprintf(buf, len, "%.3f", v);
    else
        snprintf(buf, len, "%.2f", v);
}

void counter_columns_text_header(FILE *out, const struct counter_columns *cc)
{
    for (size_t i = 0; i < cc->n; i++)
        fprintf(out, "%*s  ", cc->col[i].width, cc->col[i].title);
}

void counter_columns_text_cells(FILE *out, const struct counter_columns *cc, const struct hotspot_table *t,
                                const struct hotspot_row *r)
{
    for (size_t i = 0; i < cc->n; i++) {
        char buf[64];
        format_value(buf, sizeof buf, &cc->col[i], counter_column_value(t, r, &cc->col[i]));
        fprintf(out, "%*s  ", cc->col[i].width, buf);
    }
}

void counter_columns_csv_header(FILE *out, const struct counter_columns *cc)
{
    for (size_t i = 0; i < cc->n; i++) {
        /* event names are plain ([A-Za-z0-9_:.-]); quote anyway if not */
        if (strpbrk(cc->col[i].key, ",\"\r\n"))
            fprintf(out, ",\"%s\"", cc->col[i].key);
        else
            fprintf(out, ",%s", cc->col[i].key);
    }
}

void counter_columns_csv_cells(FILE *out, const struct counter_columns *cc, const struct hotspot_table *t,
                               const struct hotspot_row *r)
{
    for (size_t i = 0; i < cc->n; i++) {
        double v = counter_column_value(t, r, &cc->col[i]);
        if (isnan(v))
            fputc(',', out); /* empty: not counted for this row */
        else if (cc->col[i].kind == CCOL_COUNT)
            fprintf(out, ",%.0f", v);
        else
            fprintf(out, ",%.6g", v);
    }
}

void counter_columns_json(FILE *out, const struct counter_columns *cc, const struct hotspot_table *t,
                          const struct hotspot_row *r)
{
    if (cc->n == 0)
        return;
    fputs(",\"counters\":{", out);
    for (size_t i = 0; i < cc->n; i++) {
        double v = counter_column_value(t, r, &cc->col[i]);
        if (i)
            fputc(',', out);
        report_json_string(out, cc->col[i].key);
        if (isnan(v))
            fputs(":null", out);
        else if (cc->col[i].kind == CCOL_COUNT)
            fprintf(out, ":%.0f", v);
        else
            fprintf(out, ":%.6g", v);
    }
    fputc('}', out);
}

void counter_columns_print_header(FILE *out, const struct profile *p)
{
    const struct prof_counters *pc = p->counters;
    if (!pc || pc->n == 0)
        return;
    uint64_t with = 0;
    for (size_t i = 0; i < p->nsamples; i++)
        with += p->samples[i].counters != 0;
    fputs("  counters    ", out);
    for (size_t i = 0; i < pc->n; i++) {
        fprintf(out, "%s%s%s", i ? ", " : "", pc->ev[i].name, pc->ev[i].user_only ? " (user mode)" : "");
        /* record -c: known from the period, and unlike the counted events it
         * includes what the agent's handler itself caused */
        if (pc->ev[i].leader)
            fprintf(out, " (the sampling event: %" PRIu64 " per sample, the handler's own included)",
                    p->sample_period);
    }
    fprintf(out, " (read at each sample; %" PRIu64 " of %" PRIu64 " samples carry values: a thread's first sample "
                 "opens its counters)\n", with, p->sample_count);
    for (size_t i = 0; i < pc->n; i++) {
        const struct prof_counter *e = &pc->ev[i];
        if (e->enabled > 0 && e->running < e->enabled)
            fprintf(out, "  multiplexed %s counted %.1f %% of the time it was enabled: its counts are scaled by "
                         "enabled/running (estimates)\n",
                    e->name, 100.0 * e->running / e->enabled);
    }
}

void counter_columns_text_footer(FILE *out, const struct counter_columns *cc)
{
    for (size_t i = 0; i < cc->n; i++)
        if (cc->col[i].kind == CCOL_BANDWIDTH_EST) {
            fputs("GB/s est. = LLC misses x 64 B / self time: an estimate (no uncore memory counters per "
                  "sample; prefetches and write-backs are not in it)\n", out);
            return;
        }
}
