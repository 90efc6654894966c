/*
 * report/export_speedscope.c — speedscope's own file format
 * (https://www.speedscope.app/file-format-schema.json): shared frames (one per
 * function, with file and the smallest line sampled) and one "sampled"
 * profile per thread, samples in time order, root first.
 *
 * Consecutive samples of a thread with the same stack are written as one
 * sample carrying their summed weight: the format allows it, the views are
 * identical, and a 1M-sample recording stays a file speedscope can open.
 * Weights are in nanoseconds of sampled CPU time (weight x period).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "report/export_internal.h"
#include "report/report.h"

/* Writes the frame indices of stack s, root first. */
static void write_stack(FILE *out, const struct profile *p, const struct export_funcs *fn, uint32_t s)
{
    fputc('[', out);
    const struct prof_stack *st = &p->stacks[s];
    if (st->nframes == 0)
        fprintf(out, "%" PRIu32, fn->none);
    for (uint32_t k = export_stack_len(p, st); k-- > 0;) /* process-entry frames dropped */
        fprintf(out, "%" PRIu32 "%s", fn->of_frame[st->frames[k]], k ? "," : "");
    fputc(']', out);
}

int export_speedscope(FILE *out, const struct profile *p)
{
    struct export_funcs fn;
    if (export_funcs_build(p, &fn) != 0)
        return -1;
    /* Samples of each thread, in time order: one counting sort by thread. */
    size_t *start = calloc(p->nthreads + 1, sizeof *start);
    size_t *order = malloc((p->nsamples ? p->nsamples : 1) * sizeof *order);
    size_t *fill = calloc(p->nthreads + 1, sizeof *fill);
    if (!start || !order || !fill) {
        free(start);
        free(order);
        free(fill);
        export_funcs_free(&fn);
        return -1;
    }
    export_order_by_thread(p, start, fill, order);
    free(fill);

    uint64_t period = p->period_ns ? p->period_ns : 1000000;
    fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n", out);
    fputs("\"exporter\":\"opprof " PACKAGE_VERSION "\",\n\"name\":", out);
    export_json_string(out, p->command ? p->command : (p->dir ? p->dir : "opprof profile"));
    fputs(",\n\"shared\":{\"frames\":[\n", out);
    for (size_t f = 0; f < fn.nfuncs; f++) {
        const struct export_func *g = &fn.funcs[f];
        fputs(f ? ",\n{\"name\":" : "{\"name\":", out);
        export_json_string(out, g->name);
        if (g->source_file && g->source_file[0]) {
            fputs(",\"file\":", out);
            export_json_string(out, g->source_file);
            if (g->min_line > 0)
                fprintf(out, ",\"line\":%d", g->min_line);
        } else if (g->module && g->module[0]) {
            fputs(",\"file\":", out);
            export_json_string(out, g->module);
        }
        fputc('}', out);
    }
    fputs("]},\n\"profiles\":[", out);
    /* The busiest thread opens first. */
    size_t active = 0, written = 0, active_index = 0;
    for (size_t t = 0; t < p->nthreads; t++)
        if (start[t + 1] - start[t] > start[active + 1] - start[active])
            active = t;
    for (size_t t = 0; t < p->nthreads; t++) {
        if (start[t + 1] == start[t])
            continue;
        if (t == active)
            active_index = written;
        const struct prof_thread *th = &p->threads[t];
        char name[96];
        snprintf(name, sizeof name, "%s tid %" PRIu32 " (pid %" PRIu32 ")", th->name[0] ? th->name : "thread",
                 th->tid, th->pid);
        fputs(written++ ? ",\n{\"type\":\"sampled\",\"name\":" : "\n{\"type\":\"sampled\",\"name\":", out);
        export_json_string(out, name);
        /* Runs of equal stacks: first collect their weights, then write the
         * two parallel arrays. */
        uint64_t total = 0;
        fputs(",\"unit\":\"nanoseconds\",\"samples\":[", out);
        bool first = true;
        for (size_t i = start[t]; i < start[t + 1];) {
            uint32_t s = p->samples[order[i]].stack;
            size_t j = i;
            while (j < start[t + 1] && p->samples[order[j]].stack == s)
                j++;
            if (!first)
                fputc(',', out);
            first = false;
            write_stack(out, p, &fn, s);
            i = j;
        }
        fputs("],\"weights\":[", out);
        first = true;
        for (size_t i = start[t]; i < start[t + 1];) {
            uint32_t s = p->samples[order[i]].stack;
            uint64_t w = 0;
            for (; i < start[t + 1] && p->samples[order[i]].stack == s; i++)
                w += p->samples[order[i]].weight;
            fprintf(out, first ? "%" PRIu64 : ",%" PRIu64, w * period);
            first = false;
            total += w * period;
        }
        fprintf(out, "],\"startValue\":0,\"endValue\":%" PRIu64 "}", total);
    }
    fprintf(out, "],\n\"activeProfileIndex\":%zu}\n", active_index);
    free(start);
    free(order);
    export_funcs_free(&fn);
    return 0;
}
