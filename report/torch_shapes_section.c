/*
 * report/torch_shapes_section.c — the report's "Operator FLOPs" section, from
 * `opprof record --torch-shapes`: per operator its calls, FLOPs, achieved
 * GFLOP/s, arithmetic intensity and most frequent input shapes, and the
 * hook's own cost as a row of its own. Text for people, CSV and JSON for
 * scripts (`opprof report --torch-shapes --format csv|json`).
 * A pure renderer of analyze/torch_shapes.c's figures.
 *
 * Time per operator is the sampled CPU time of the samples that have the
 * operator on their stack (its total time; the hook's own samples left
 * out): a composite operator's work runs in the operators it calls
 * (aten::convolution in aten::mkldnn_convolution), and `opprof sweep` times
 * the whole call too. For the usual leaf operators (mm, bmm, addmm, _softmax)
 * it equals their self time.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "report/report.h"
#include "report/report_internal.h"

/* Operators in print order: by time, then calls, then name. */
static int by_time(const void *a, const void *b)
{
    const struct torch_shapes_op *x = *(const struct torch_shapes_op *const *)a;
    const struct torch_shapes_op *y = *(const struct torch_shapes_op *const *)b;
    if (x->total_weight != y->total_weight)
        return x->total_weight < y->total_weight ? 1 : -1;
    if (x->calls != y->calls)
        return x->calls < y->calls ? 1 : -1;
    return strcmp(x->name, y->name);
}

static double seconds(const struct profile *p, uint64_t weight)
{
    return p->period_ns ? (double)weight * (double)p->period_ns / 1e9 : NAN;
}

struct op_figures {
    double time_s, self_pct, gflops, gflop_per_s, intensity;
};

static struct op_figures figures(const struct profile *p, const struct torch_shapes *ts,
                                 const struct torch_shapes_op *o)
{
    struct op_figures f;
    f.time_s = seconds(p, o->total_weight);
    f.self_pct = ts->all_weight ? 100.0 * (double)o->self_weight / (double)ts->all_weight : 0;
    bool any = o->flops_calls > 0;
    f.gflops = any ? o->flops / 1e9 : NAN;
    f.gflop_per_s = any && f.time_s > 0 ? o->flops / f.time_s / 1e9 : NAN;
    f.intensity = any && o->bytes > 0 ? o->flops / o->bytes : NAN;
    return f;
}

/* "float32[64,32];float32[32,16] (100 %)": the most frequent signature. */
static void top_shape(const struct torch_shapes_op *o, char *buf, size_t len)
{
    if (!o->nsigs || !o->calls) {
        snprintf(buf, len, "-");
        return;
    }
    snprintf(buf, len, "%.120s (%.0f %%)%s", o->sigs[0].args, 100.0 * (double)o->sigs[0].calls / (double)o->calls,
             o->nsigs > 1 ? " ..." : "");
}

/* v right-aligned in width columns with prec decimals, "-" when unknown. */
static void num(FILE *out, int width, int prec, double v)
{
    if (isnan(v))
        fprintf(out, "%*s", width, "-");
    else
        fprintf(out, "%*.*f", width, prec, v);
}

static void print_text(FILE *out, const struct profile *p, const struct torch_shapes *ts,
                       struct torch_shapes_op **ops, size_t n, size_t limit)
{
    fprintf(out, "Operator FLOPs (record --torch-shapes: torch %s, %s; FLOPs and bytes by opprof sweep's formulas, "
                 "time = sampled CPU time with the operator on the stack)\n",
            ts->torch_version[0] ? ts->torch_version : "?", ts->api[0] ? ts->api : "no interception");
    if (ts->unsupported[0])
        fprintf(out, "  %s\n", ts->unsupported);
    fprintf(out, "  %-28s %10s %7s %9s %11s %9s %9s  %s\n", "Operator", "Calls", "Self %", "Time s", "GFLOP",
            "GFLOP/s", "FLOP/B", "Top input shapes (share of calls)");
    for (size_t i = 0; i < n && (!limit || i < limit); i++) {
        struct op_figures f = figures(p, ts, ops[i]);
        char shape[192];
        top_shape(ops[i], shape, sizeof shape);
        fprintf(out, "  %-28s %10llu %6.1f%% ", ops[i]->name, (unsigned long long)ops[i]->calls, f.self_pct);
        num(out, 9, 3, f.time_s);
        fputc(' ', out);
        num(out, 11, 3, f.gflops);
        fputc(' ', out);
        num(out, 9, 2, f.gflop_per_s);
        fputc(' ', out);
        num(out, 9, 2, f.intensity);
        fprintf(out, "  %s\n", shape);
    }
    if (limit && n > limit)
        fprintf(out, "  ... %zu more operators (--limit 0 shows all)\n", n - limit);
    double hook_pct = ts->all_weight ? 100.0 * (double)ts->hook_weight / (double)ts->all_weight : 0;
    fprintf(out, "  %-28s %10llu %6.1f%% ", TORCH_SHAPES_HOOK_ROW, (unsigned long long)ts->hook_calls, hook_pct);
    num(out, 9, 3, seconds(p, ts->hook_weight));
    fprintf(out, "  (sampled; the hook timed itself at %.3f s)\n", (double)ts->hook_ns / 1e9);
    if (ts->bad_lines)
        fprintf(out, "  %llu malformed lines in torch_shapes.*.tsv skipped\n", (unsigned long long)ts->bad_lines);
    if (ts->inconsistent_ops)
        fprintf(out, "  %llu operators' shapes count more calls than their call count in torch_shapes.*.tsv (a "
                     "file that contradicts itself): their calls shown are the shapes' count\n",
                (unsigned long long)ts->inconsistent_ops);
}

static void print_csv(FILE *out, const struct profile *p, const struct torch_shapes *ts,
                      struct torch_shapes_op **ops, size_t n)
{
    fputs("operator,calls,flops_calls,self_pct,time_s,flops,bytes,gflop_per_s,flop_per_byte,top_shape,"
          "top_shape_calls\n", out);
    for (size_t i = 0; i <= n; i++) {
        if (i == n) { /* the hook's own row */
            report_csv_field(out, TORCH_SHAPES_HOOK_ROW);
            fprintf(out, ",%llu,0,%.4f,%.6f,,,,,,\n", (unsigned long long)ts->hook_calls,
                    ts->all_weight ? 100.0 * (double)ts->hook_weight / (double)ts->all_weight : 0,
                    seconds(p, ts->hook_weight));
            break;
        }
        const struct torch_shapes_op *o = ops[i];
        struct op_figures f = figures(p, ts, o);
        report_csv_field(out, o->name);
        fprintf(out, ",%llu,%llu,%.4f,%.6f,", (unsigned long long)o->calls, (unsigned long long)o->flops_calls,
                f.self_pct, f.time_s);
        if (o->flops_calls)
            fprintf(out, "%.0f,%.0f,", o->flops, o->bytes);
        else
            fputs(",,", out);
        if (!isnan(f.gflop_per_s))
            fprintf(out, "%.4f", f.gflop_per_s);
        fputc(',', out);
        if (!isnan(f.intensity))
            fprintf(out, "%.4f", f.intensity);
        fputc(',', out);
        report_csv_field(out, o->nsigs ? o->sigs[0].args : "");
        fprintf(out, ",%llu\n", (unsigned long long)(o->nsigs ? o->sigs[0].calls : 0));
    }
}

static void json_num(FILE *out, double v)
{
    if (isnan(v) || isinf(v))
        fputs("null", out);
    else
        fprintf(out, "%.10g", v);
}

static void print_json(FILE *out, const struct profile *p, const struct torch_shapes *ts,
                       struct torch_shapes_op **ops, size_t n)
{
    fputs("{\"torch_shapes\":{\"torch\":", out);
    report_json_string(out, ts->torch_version);
    fputs(",\"api\":", out);
    report_json_string(out, ts->api);
    fputs(",\"unsupported\":", out);
    report_json_string(out, ts->unsupported);
    fprintf(out, ",\"files\":%zu,\"malformed_lines\":%llu,\"inconsistent_operators\":%llu,\"hook\":{\"name\":",
            ts->files, (unsigned long long)ts->bad_lines, (unsigned long long)ts->inconsistent_ops);
    report_json_string(out, TORCH_SHAPES_HOOK_ROW);
    fprintf(out, ",\"calls\":%llu,\"self_s\":", (unsigned long long)ts->hook_calls);
    json_num(out, seconds(p, ts->hook_weight));
    fprintf(out, ",\"timed_s\":%.9f},\"operators\":[", (double)ts->hook_ns / 1e9);
    for (size_t i = 0; i < n; i++) {
        const struct torch_shapes_op *o = ops[i];
        struct op_figures f = figures(p, ts, o);
        fputs(i ? ",{\"name\":" : "{\"name\":", out);
        report_json_string(out, o->name);
        fprintf(out, ",\"calls\":%llu,\"unrecorded_calls\":%llu,\"flops_calls\":%llu,\"self_pct\":",
                (unsigned long long)o->calls, (unsigned long long)o->unrecorded,
                (unsigned long long)o->flops_calls);
        json_num(out, f.self_pct);
        fputs(",\"time_s\":", out);
        json_num(out, f.time_s);
        fputs(",\"flops\":", out);
        json_num(out, o->flops_calls ? o->flops : NAN);
        fputs(",\"bytes\":", out);
        json_num(out, o->flops_calls ? o->bytes : NAN);
        fputs(",\"gflop_per_s\":", out);
        json_num(out, f.gflop_per_s);
        fputs(",\"flop_per_byte\":", out);
        json_num(out, f.intensity);
        fputs(",\"shapes\":[", out);
        for (size_t s = 0; s < o->nsigs && s < 10; s++) {
            fputs(s ? ",{\"args\":" : "{\"args\":", out);
            report_json_string(out, o->sigs[s].args);
            fprintf(out, ",\"calls\":%llu,\"flops_per_call\":", (unsigned long long)o->sigs[s].calls);
            json_num(out, o->sigs[s].flops >= 0 ? o->sigs[s].flops : NAN);
            fputs(",\"bytes_per_call\":", out);
            json_num(out, o->sigs[s].flops >= 0 ? o->sigs[s].bytes : NAN);
            fputc('}', out);
        }
        fputs("]}", out);
    }
    fputs("]}}\n", out);
}

int report_print_torch_shapes(FILE *out, const struct profile *p, const struct torch_shapes *ts,
                              enum report_format format, size_t limit)
{
    struct torch_shapes_op **ops = calloc(ts->nops + 1, sizeof *ops);
    if (!ops)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < ts->nops; i++)
        if (ts->ops[i].calls)
            ops[n++] = &ts->ops[i];
    qsort(ops, n, sizeof *ops, by_time);
    if (format == FORMAT_CSV)
        print_csv(out, p, ts, ops, n);
    else if (format == FORMAT_JSON)
        print_json(out, p, ts, ops, n);
    else
        print_text(out, p, ts, ops, n, limit);
    free(ops);
    return 0;
}
