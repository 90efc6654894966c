/*
 * report/table.c — the text, CSV and JSON renderers of `opprof report`.
 *
 * The text layout follows torch.profiler's key_averages().table() (Self %,
 * Self time, Total %, Total time, Samples, Name) because that is what the
 * users read every day; percentages divide by the profile's total weight, and
 * a footer states that denominator ("Self time total") as torch does. The
 * header above the table is report/header.c.
 *
 * CSV and JSON are for scripts: exact integers (nanoseconds, sample counts),
 * RFC 4180 quoting, and JSON that any strict parser accepts (control
 * characters escaped, invalid UTF-8 replaced by U+FFFD).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"
#include "report/report_internal.h"

int report_format_parse(const char *text, enum report_format *out)
{
    static const struct {
        const char *name;
        enum report_format format;
    } names[] = {{"text", FORMAT_TEXT}, {"csv", FORMAT_CSV}, {"json", FORMAT_JSON}};
    if (!text)
        return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(text, names[i].name) == 0) {
            *out = names[i].format;
            return 0;
        }
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Small formatting helpers                                                   */
/* ------------------------------------------------------------------------- */

/* A duration at the precision the profile supports, in one style for every
 * table: the unit by magnitude, and as many decimals as the resolution (the
 * sample period) gives in that unit. At 1 ms per sample: "999 ms", "1.967 s",
 * "0 ms" (not "999.000 ms" beside "0.0 us"); at 4000 Hz: "12.8 ms".
 * resolution_ns 0 (not known): 1 ns, i.e. up to three decimals. */
void report_format_duration(char *buf, size_t len, double ns, double resolution_ns)
{
    if (resolution_ns <= 0)
        resolution_ns = 1;
    double mag = fabs(ns) > resolution_ns ? fabs(ns) : resolution_ns;
    static const struct {
        double scale;
        const char *unit;
    } units[] = {{1e9, "s"}, {1e6, "ms"}, {1e3, "us"}, {1, "ns"}};
    size_t u = 0;
    while (u + 1 < sizeof units / sizeof units[0] && mag < units[u].scale * 0.9995)
        u++;
    double step = resolution_ns / units[u].scale; /* the resolution in this unit */
    int decimals = 0;
    while (step < 0.9995 && decimals < 3) {
        step *= 10;
        decimals++;
    }
    snprintf(buf, len, "%.*f %s", decimals, ns / units[u].scale, units[u].unit);
}

static void format_time(char *buf, size_t len, uint64_t ns, uint64_t resolution_ns)
{
    report_format_duration(buf, len, (double)ns, (double)resolution_ns);
}

/* An event count (record -c): "40000", "1.23 M", "4.56 G". */
static void format_count(char *buf, size_t len, uint64_t n)
{
    if (n >= 1000000000u)
        snprintf(buf, len, "%.2f G", (double)n / 1e9);
    else if (n >= 1000000u)
        snprintf(buf, len, "%.2f M", (double)n / 1e6);
    else
        snprintf(buf, len, "%" PRIu64, n);
}

/* The two "time" cells of a row: CPU time, or with record -c the events the
 * samples stand for, or "-" when neither is known. */
static void format_amount(char *buf, size_t len, const struct hotspot_table *t, uint64_t weight)
{
    if (t->period_ns)
        format_time(buf, len, weight * t->period_ns, t->period_ns);
    else if (t->sample_period)
        format_count(buf, len, weight * t->sample_period);
    else
        snprintf(buf, len, "-");
}

static double percent(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Length in bytes of the valid UTF-8 sequence at s, or 0 when the bytes there
 * are not valid UTF-8 (overlong forms and surrogates included). */
static size_t utf8_seq_len(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        if (s[1] < lo || s[1] > hi || (s[2] & 0xc0) != 0x80)
            return 0;
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        if (s[1] < lo || s[1] > hi || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
            return 0;
        return 4;
    }
    return 0;
}

/* Number of characters a terminal shows for s (UTF-8 code points; an
 * invalid byte counts as one, as it is printed as one '?'). */
size_t report_text_width(const char *s)
{
    size_t w = 0;
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        size_t n = utf8_seq_len(u);
        u += n ? n : 1;
        w++;
    }
    return w;
}

/* Prints s for a terminal: at most max_width characters (cut with "..."),
 * control characters and invalid bytes as '?', then spaces up to pad. */
static void print_text_cell(FILE *out, const char *s, size_t max_width, size_t pad)
{
    size_t w = report_text_width(s);
    size_t keep = w > max_width ? (max_width > 3 ? max_width - 3 : 0) : w;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < keep; i++) {
        size_t n = utf8_seq_len(u);
        if (n == 0 || (n == 1 && (*u < 0x20 || *u == 0x7f))) {
            fputc('?', out);
            u++;
        } else {
            fwrite(u, 1, n, out);
            u += n;
        }
    }
    size_t shown = keep;
    if (keep < w) {
        fputs("...", out);
        shown += 3;
    }
    for (; shown < pad; shown++)
        fputc(' ', out);
}

/* Writes s as a JSON string: quotes, backslashes and control characters
 * escaped; bytes that are not valid UTF-8 become U+FFFD so the output always
 * decodes. NULL is written as null. */
static void json_string(FILE *out, const char *s)
{
    if (!s) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        unsigned char c = *u;
        switch (c) {
        case '"': fputs("\\\"", out); u++; continue;
        case '\\': fputs("\\\\", out); u++; continue;
        case '\n': fputs("\\n", out); u++; continue;
        case '\r': fputs("\\r", out); u++; continue;
        case '\t': fputs("\\t", out); u++; continue;
        case '\b': fputs("\\b", out); u++; continue;
        case '\f': fputs("\\f", out); u++; continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u%04x", c);
            u++;
            continue;
        }
        size_t n = utf8_seq_len(u);
        if (n == 0) {
            fputs("\\ufffd", out);
            u++;
        } else {
            fwrite(u, 1, n, out);
            u += n;
        }
    }
    fputc('"', out);
}

void report_json_string(FILE *out, const char *s)
{
    json_string(out, s);
}

void report_format_time(char *buf, size_t len, uint64_t ns, uint64_t resolution_ns)
{
    format_time(buf, len, ns, resolution_ns);
}

void report_csv_field(FILE *out, const char *s)
{
    if (!s)
        return;
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

/* ------------------------------------------------------------------------- */
/* Tables                                                                     */
/* ------------------------------------------------------------------------- */

/* Widest name the text table shows before cutting it with "...": C++ names
 * are long, and a table wider than a terminal is read by nobody. */
#define NAME_MAX_WIDTH 60
#define MODULE_MAX_WIDTH 40
#define DETAIL_MAX_WIDTH 60

/* The default title of a hotspot table: torch.profiler's words for the
 * operator view, "Hotspots by KEY" for the others. */
static void print_default_title(FILE *out, const struct hotspot_table *t, const struct report_options *opts)
{
    const char *what = NULL;
    switch (opts->group_by) {
    case GROUP_OP: what = "Operators"; break;
    case GROUP_LINE: what = t->native_lines ? "Source lines (no Python frames)" : "Python lines"; break;
    case GROUP_PYTHON: what = "Python functions"; break;
    case GROUP_KERNEL: what = "Kernels (compute kernels per operator; other time by kind)"; break;
    default: break;
    }
    if (!what) {
        fprintf(out, "Hotspots by %s, sorted by %s", group_by_name(opts->group_by),
                sort_key_name(opts->sort));
        return;
    }
    if (opts->sort == SORT_SELF || opts->sort == SORT_TOTAL)
        fprintf(out, "%s by %s time", what, sort_key_name(opts->sort));
    else
        fprintf(out, "%s, sorted by %s", what, sort_key_name(opts->sort));
}

static size_t rows_to_print(const struct hotspot_table *t, const struct report_options *opts)
{
    return opts->limit && opts->limit < t->nrows ? opts->limit : t->nrows;
}

#define SOURCE_MAX_WIDTH 200

/* Shrinks the text columns to fit `avail` characters (two between each):
 * the source goes first (it is dropped, width 0, below 12 characters), then
 * detail and module down to 10, then the name down to 14; what is cut ends
 * in "...". NULL: a column the table does not have. */
static void fit_columns(size_t avail, size_t *name_w, size_t *module_w, size_t *detail_w, size_t *source_w)
{
    size_t *cols[] = {source_w, detail_w, module_w, name_w};
    const size_t min_w[] = {12, 10, 10, 14};
    size_t need = *name_w + (module_w ? 2 + *module_w : 0) + (detail_w ? 2 + *detail_w : 0);
    if (source_w) {
        need += 2 + *source_w;
        /* the source column takes what is left, not its maximum */
        if (need > avail) {
            size_t others = need - *source_w - 2;
            size_t left = avail > others + 2 ? avail - others - 2 : 0;
            need -= *source_w - (left < *source_w ? left : *source_w);
            *source_w = left < *source_w ? left : *source_w;
            if (*source_w < min_w[0]) {
                need -= 2 + *source_w;
                *source_w = 0;
            }
        }
    }
    for (size_t c = 1; c < 4 && need > avail; c++) {
        if (!cols[c] || *cols[c] <= min_w[c])
            continue;
        size_t cut = need - avail, room = *cols[c] - min_w[c];
        if (cut > room)
            cut = room;
        *cols[c] -= cut;
        need -= cut;
    }
}

static void print_text(FILE *out, const struct profile *p, const struct hotspot_table *t,
                       const struct report_options *opts, const char *title)
{
    size_t n = rows_to_print(t, opts);
    if (title)
        fputs(title, out);
    else
        print_default_title(out, t, opts);
    if (n < t->nrows)
        fprintf(out, " (top %zu of %zu)\n", n, t->nrows);
    else
        fputc('\n', out);
    if (t->nrows == 0) {
        fputs("  (no samples)\n", out);
        return;
    }

    /* Column widths follow the rows actually printed. */
    const char *module_title = t->module_title ? t->module_title : "Module";
    const char *detail_title = t->detail_title ? t->detail_title : "Detail";
    size_t name_w = 4, module_w = report_text_width(module_title), detail_w = report_text_width(detail_title);
    bool have_module = false, have_source = false, have_detail = false;
    for (size_t i = 0; i < n; i++) {
        size_t w = report_text_width(t->rows[i].name);
        if (w > name_w)
            name_w = w;
        if (t->rows[i].module) {
            have_module = true;
            w = report_text_width(t->rows[i].module);
            if (w > module_w)
                module_w = w;
        }
        if (t->rows[i].source)
            have_source = true;
        if (t->rows[i].detail) {
            have_detail = true;
            w = report_text_width(t->rows[i].detail);
            if (w > detail_w)
                detail_w = w;
        }
    }
    if (name_w > NAME_MAX_WIDTH)
        name_w = NAME_MAX_WIDTH;
    if (module_w > MODULE_MAX_WIDTH)
        module_w = MODULE_MAX_WIDTH;
    if (detail_w > DETAIL_MAX_WIDTH)
        detail_w = DETAIL_MAX_WIDTH;
    bool have_share = t->share_denominator != 0;
    struct counter_columns cc; /* per-sample counters: only recorded ones */
    counter_columns_plan(t, &cc);

    bool events = !t->period_ns && t->sample_period; /* record -c */
    int total_w = events ? 13 : 12; /* "Total events" needs one more */
    size_t source_w = SOURCE_MAX_WIDTH;
    if (opts->columns) {
        size_t fixed = 8 + 12 + 9 + (size_t)total_w + 9 + 2 + (have_share ? 9 : 0);
        for (size_t i = 0; i < cc.n; i++)
            fixed += (size_t)cc.col[i].width + 2;
        fit_columns(opts->columns > fixed ? opts->columns - fixed : 0, &name_w, have_module ? &module_w : NULL,
                    have_detail ? &detail_w : NULL, have_source ? &source_w : NULL);
        if (have_source && source_w == 0)
            have_source = false;
        /* Still too wide (a narrow terminal): drop the detail, then the module. */
        size_t avail = opts->columns > fixed ? opts->columns - fixed : 0;
        if (have_detail && name_w + (have_module ? 2 + module_w : 0) + 2 + detail_w > avail)
            have_detail = false;
        if (have_module && name_w + 2 + module_w > avail)
            have_module = false;
    }
    fprintf(out, "%8s%12s%9s%*s%9s  ", "Self %", events ? "Self events" : "Self time", "Total %", total_w,
            events ? "Total events" : "Total time", "Samples");
    counter_columns_text_header(out, &cc);
    if (have_share)
        fprintf(out, "%7s  ", "Share");
    print_text_cell(out, "Name", name_w, have_module || have_detail || have_source ? name_w : 0);
    if (have_module) {
        fputs("  ", out);
        print_text_cell(out, module_title, module_w, have_detail || have_source ? module_w : 0);
    }
    if (have_detail) {
        fputs("  ", out);
        print_text_cell(out, detail_title, detail_w, have_source ? detail_w : 0);
    }
    if (have_source)
        fputs("  Source", out);
    fputc('\n', out);

    for (size_t i = 0; i < n; i++) {
        const struct hotspot_row *r = &t->rows[i];
        char self_pct[32], total_pct[32], self_time[32], total_time[32];
        snprintf(self_pct, sizeof self_pct, "%.1f %%", percent(r->self, t->total_weight));
        snprintf(total_pct, sizeof total_pct, "%.1f %%", percent(r->total, t->total_weight));
        format_amount(self_time, sizeof self_time, t, r->self);
        format_amount(total_time, sizeof total_time, t, r->total);
        fprintf(out, "%8s%12s%9s%*s%9" PRIu64 "  ", self_pct, self_time, total_pct, total_w, total_time,
                r->samples);
        counter_columns_text_cells(out, &cc, t, r);
        if (have_share) {
            char share[32];
            snprintf(share, sizeof share, "%.1f %%", percent(r->total, t->share_denominator));
            fprintf(out, "%7s  ", share);
        }
        /* Pad a cell only when something follows it: no trailing blanks. */
        bool has_module = r->module && r->module[0];
        bool has_detail = have_detail && r->detail && r->detail[0];
        bool has_source = have_source && r->source;
        bool module_cell = have_module && (has_module || has_detail || has_source);
        bool detail_cell = have_detail && (has_detail || has_source);
        print_text_cell(out, r->name, name_w, module_cell || detail_cell || has_source ? name_w : 0);
        if (module_cell) {
            fputs("  ", out);
            print_text_cell(out, r->module ? r->module : "", module_w,
                            has_detail || has_source ? module_w : 0);
        }
        if (detail_cell) {
            fputs("  ", out);
            print_text_cell(out, r->detail ? r->detail : "", detail_w, has_source ? detail_w : 0);
        }
        if (has_source) {
            fputs("  ", out);
            print_text_cell(out, r->source, source_w, 0);
        }
        fputc('\n', out);
    }

    char total[32];
    format_amount(total, sizeof total, t, t->total_weight);
    if (events)
        fprintf(out, "Self events total: %s %s (", total, t->event ? t->event : "");
    else
        fprintf(out, "Self time total: %s (", total);
    if (p && p->sample_count != t->total_weight)
        fprintf(out, "%" PRIu64 " samples, weight %" PRIu64 ")\n", p->sample_count, t->total_weight);
    else
        fprintf(out, "%" PRIu64 " samples)\n", t->total_weight);
    counter_columns_text_footer(out, &cc);
}

static void print_csv(FILE *out, const struct hotspot_table *t, const struct report_options *opts)
{
    size_t n = rows_to_print(t, opts);
    /* record -c: the amounts are events, not ns */
    bool events = !t->period_ns && t->sample_period;
    uint64_t unit = events ? t->sample_period : t->period_ns;
    fputs(events ? "name,module,self_pct,self_events,total_pct,total_events,samples"
                 : "name,module,self_pct,self_ns,total_pct,total_ns,samples", out);
    if (t->share_denominator)
        fputs(",share_pct", out);
    if (t->detail_key)
        fprintf(out, ",%s", t->detail_key);
    struct counter_columns cc; /* per-sample counters */
    counter_columns_plan(t, &cc);
    counter_columns_csv_header(out, &cc);
    fputc('\n', out);
    for (size_t i = 0; i < n; i++) {
        const struct hotspot_row *r = &t->rows[i];
        report_csv_field(out, r->name);
        fputc(',', out);
        report_csv_field(out, r->module);
        fprintf(out, ",%.3f,%" PRIu64 ",%.3f,%" PRIu64 ",%" PRIu64,
                percent(r->self, t->total_weight), r->self * unit,
                percent(r->total, t->total_weight), r->total * unit, r->samples);
        if (t->share_denominator)
            fprintf(out, ",%.3f", percent(r->total, t->share_denominator));
        if (t->detail_key) {
            fputc(',', out);
            report_csv_field(out, r->detail);
        }
        counter_columns_csv_cells(out, &cc, t, r);
        fputc('\n', out);
    }
}

static void print_json(FILE *out, const struct profile *p, const struct hotspot_table *t,
                       const struct report_options *opts)
{
    size_t n = rows_to_print(t, opts);
    fputs("{\"dir\":", out);
    json_string(out, p ? p->dir : NULL);
    fputs(",\"command\":", out);
    json_string(out, p ? p->command : NULL);
    fprintf(out, ",\"period_ns\":%" PRIu64 ",\"total_weight\":%" PRIu64 ",\"lost_samples\":%" PRIu64,
            t->period_ns, t->total_weight, p ? p->lost_samples : 0);
    if (t->sample_period) { /* record -c: samples of an event, not time */
        fputs(",\"event\":", out);
        json_string(out, t->event);
        fprintf(out, ",\"sample_period\":%" PRIu64, t->sample_period);
    }
    /* collection limits: only for recordings that had one */
    if (p && (p->window_start_ns || p->window_end_ns || p->max_size_bytes))
        fprintf(out, ",\"outside_window_samples\":%" PRIu64 ",\"size_cap_dropped_samples\":%" PRIu64,
                p->outside_window_samples, p->size_cap_dropped_samples);
    fprintf(out, ",\"complete\":%s", !p || p->complete ? "true" : "false");
    if (p) /* what the samples cover: user mode only, or user and kernel mode */
        fprintf(out, ",\"user_only\":%s", p->user_only ? "true" : "false");
    if (p && (p->acct.streams || p->acct.info_unwritten)) /* ACCOUNTING: what the samples do not stand for */
        fprintf(out, ",\"accounting\":{\"process_cpu_ns\":%" PRIu64 ",\"unsampled_cpu_ns\":%" PRIu64
                     ",\"sigtrap_blocked_threads\":%" PRIu64 ",\"threads_started\":%" PRIu64
                     ",\"threads_sampled\":%" PRIu64 ",\"startup_cpu_ns\":%" PRIu64 ",\"unwritten_samples\":%" PRIu64 "}",
                p->process_cpu_ns, p->acct.unsampled_ns, p->acct.trap_blocked_threads, p->acct.threads_started,
                p->acct.threads_sampled, p->acct.startup_cpu_ns,
                p->acct.info_unwritten > p->acct.unwritten_samples ? p->acct.info_unwritten : p->acct.unwritten_samples);
    struct report_agent_cost c;
    if (p && report_agent_cost(p, &c)) { /* the overhead line's figures, and the writer's counters */
        const struct profile_agent_cpu *a = &p->agent_cpu;
        if (c.handler_called)
            fprintf(out, ",\"agent\":{\"handler_clock\":\"%s\",\"handler_ns_per_sample\":%.0f",
                    c.cpu_clock ? "thread_cpu" : "wall", c.per_sample_ns);
        else /* no sample: no handler figures */
            fputs(",\"agent\":{\"handler_clock\":null,\"handler_ns_per_sample\":null", out);
        if (c.cpu_clock) /* quantiles of the timed calls; a wall-time recording has none */
            fprintf(out,
                    ",\"handler_median_ns\":%.0f,\"handler_p99_ns\":%.0f,\"handler_timed_every\":%u"
                    ",\"handler_clock_read_ns\":%.0f,\"handler_timing_ns_per_sample\":%.0f",
                    c.median_ns, c.p99_ns, a->timed_every, c.clock_read_ns, c.timing_ns_per_sample);
        else
            fputs(",\"handler_median_ns\":null,\"handler_p99_ns\":null,\"handler_timed_every\":null"
                  ",\"handler_clock_read_ns\":null,\"handler_timing_ns_per_sample\":null",
                  out);
        fprintf(out,
                ",\"writer_cpu_ns\":%" PRIu64 ",\"startup_cpu_ns\":%" PRIu64 ",\"share_pct\":%.3f"
                ",\"maps_rereads\":%" PRIu64 ",\"maps_probes\":%" PRIu64 ",\"phdr_refreshes\":%" PRIu64
                ",\"schedstat_reads\":%" PRIu64 ",\"pystack_hits\":%" PRIu64 ",\"pystack_misses\":%" PRIu64
                ",\"offcpu_same_wait\":%" PRIu64 ",\"omp_hook_ns\":%" PRIu64 ",\"omp_team_wait_ns\":%" PRIu64
                ",\"writer_drains\":%" PRIu64 ",\"writer_quiet_drains\":%" PRIu64 ",\"writer_steady_drains\":%" PRIu64
                "}",
                c.writer_cpu_ns, c.startup_cpu_ns, c.share_pct, a->maps_rereads, a->maps_probes, a->phdr_refreshes,
                a->schedstat_reads, a->pystack_hits, a->pystack_misses, a->offcpu_same_wait, c.omp_hook_ns,
                c.omp_team_wait_ns, a->drains, a->quiet_drains, a->steady_drains);
    }
    fputs(",\"group_by\":", out);
    json_string(out, group_by_name(opts->group_by));
    fputs(",\"sort\":", out);
    json_string(out, sort_key_name(opts->sort));
    if (opts->callers_of) {
        fputs(",\"callers_of\":", out);
        json_string(out, opts->callers_of);
    } else if (opts->callees_of) {
        fputs(",\"callees_of\":", out);
        json_string(out, opts->callees_of);
    }
    fputs(",\"warnings\":[", out);
    for (size_t i = 0; p && i < p->nwarnings; i++) {
        if (i)
            fputc(',', out);
        json_string(out, p->warnings[i]);
    }
    fputc(']', out);
    report_json_summary(out, opts->phases, opts->findings);
    struct counter_columns cc; /* per-sample counters */
    counter_columns_plan(t, &cc);
    report_json_ranks(out, opts->ranks); /* ranks of a parallel job */
    fputs(",\"rows\":[", out);
    for (size_t i = 0; i < n; i++) {
        const struct hotspot_row *r = &t->rows[i];
        fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out);
        json_string(out, r->name);
        fputs(",\"module\":", out);
        json_string(out, r->module);
        if (r->source) {
            fputs(",\"source\":", out);
            json_string(out, r->source);
        }
        if (t->detail_key && r->detail) {
            fprintf(out, ",\"%s\":", t->detail_key);
            json_string(out, r->detail);
        }
        if (t->share_denominator)
            fprintf(out, ",\"share_pct\":%.3f", percent(r->total, t->share_denominator));
        counter_columns_json(out, &cc, t, r);
        if (!t->period_ns && t->sample_period) /* record -c: events, and no time */
            fprintf(out, ",\"self_pct\":%.3f,\"self_events\":%" PRIu64 ",\"self_ns\":null,\"total_pct\":%.3f,"
                    "\"total_events\":%" PRIu64 ",\"total_ns\":null,\"samples\":%" PRIu64 "}",
                    percent(r->self, t->total_weight), r->self * t->sample_period,
                    percent(r->total, t->total_weight), r->total * t->sample_period, r->samples);
        else
            fprintf(out, ",\"self_pct\":%.3f,\"self_ns\":%" PRIu64 ",\"total_pct\":%.3f,\"total_ns\":%" PRIu64
                    ",\"samples\":%" PRIu64 "}",
                    percent(r->self, t->total_weight), r->self * t->period_ns,
                    percent(r->total, t->total_weight), r->total * t->period_ns, r->samples);
    }
    fputs(n ? "\n]}\n" : "]}\n", out);
}

int report_print_table(FILE *out, const struct profile *p, const struct hotspot_table *t,
                       const struct report_options *opts, const char *title)
{
    switch (opts->format) {
    case FORMAT_TEXT: print_text(out, p, t, opts, title); break;
    case FORMAT_CSV: print_csv(out, t, opts); break;
    case FORMAT_JSON: print_json(out, p, t, opts); break;
    default: return -1;
    }
    return ferror(out) ? -1 : 0;
}
