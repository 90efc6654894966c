/*
 * report/export_callgrind.c — callgrind's profile format (callgrind_annotate,
 * KCachegrind, QCachegrind).
 *
 * Events: Samples and the CPU time they stand for in nanoseconds (record -c:
 * the event's count instead). Positions are source lines:
 *   self cost  at the line of the innermost frame (the function's own line
 *              when the profile has one, else 0)
 *   calls      caller -> callee at the caller's line, with the samples that
 *              went through that call as the "calls" count and the callee's
 *              inclusive cost
 * As in the pstats export, a sample is counted on the call edge of the
 * callee's outermost call in its stack, so under recursion the inclusive
 * costs KCachegrind adds up never exceed the samples. Files are the source
 * file when known, else the module; process-entry frames are dropped as in
 * every export.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "report/export_internal.h"
#include "report/report.h"
#include "util/util.h"

/* One cost line: self cost of a frame (callee UINT32_MAX) or a call from a
 * frame (the caller's line) to the callee function. */
struct cg_cost {
    uint32_t func;   /* the function it is written under */
    uint32_t frame;  /* profile frame giving the line */
    uint32_t callee; /* UINT32_MAX: self cost */
    uint64_t samples, weight;
};

struct cg_costs {
    struct cg_cost *v;
    size_t n, cap;
    struct hashmap index; /* (frame, callee + 1) -> index in v */
};

static struct cg_cost *cost_get(struct cg_costs *c, uint32_t func, uint32_t frame, uint32_t callee)
{
    uint64_t key = (uint64_t)frame << 32 | (uint32_t)(callee + 1);
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        struct cg_cost *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return NULL;
        c->v = v;
        c->cap = cap;
    }
    uint64_t at;
    int rc = hashmap_find_or_add_u64(&c->index, key, c->n, &at);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        c->v[c->n++] = (struct cg_cost){func, frame, callee, 0, 0};
    return &c->v[at];
}

static int by_func_then_line(const void *a, const void *b)
{
    const struct cg_cost *x = a, *y = b;
    if (x->func != y->func)
        return x->func < y->func ? -1 : 1;
    if (x->frame != y->frame)
        return x->frame < y->frame ? -1 : 1;
    return x->callee < y->callee ? -1 : x->callee > y->callee;
}

/* Collects the self and call costs of every sample. 0, or -1 on OOM. */
static int collect(const struct profile *p, const struct export_funcs *fn, struct cg_costs *c)
{
    uint64_t *weight, *count;
    if (export_stack_weights(p, &weight, &count) != 0)
        return -1;
    uint32_t *seen = calloc(fn->nfuncs ? fn->nfuncs : 1, sizeof *seen);
    int rc = seen ? 0 : -1;
    for (size_t s = 0; s < p->nstacks && rc == 0; s++) {
        const struct prof_stack *st = &p->stacks[s];
        if (!count[s] || st->nframes == 0)
            continue; /* "[no frames]" samples have no line to put them on */
        uint32_t len = export_stack_len(p, st), gen = (uint32_t)s + 1;
        struct cg_cost *self = cost_get(c, fn->of_frame[st->frames[0]], st->frames[0], UINT32_MAX);
        if (!self) {
            rc = -1;
            break;
        }
        self->samples += count[s];
        self->weight += weight[s];
        for (uint32_t k = len; k-- > 0;) {
            uint32_t callee = fn->of_frame[st->frames[k]];
            if (seen[callee] == gen)
                continue; /* an inner, recursive call */
            seen[callee] = gen;
            if (k + 1 == len)
                continue; /* the root: nobody called it */
            uint32_t caller = st->frames[k + 1];
            struct cg_cost *e = cost_get(c, fn->of_frame[caller], caller, callee);
            if (!e) {
                rc = -1;
                break;
            }
            e->samples += count[s];
            e->weight += weight[s];
        }
    }
    free(seen);
    free(weight);
    free(count);
    return rc;
}

/* "key=name" (or the bare name for an empty key), on one line: a newline
 * would end the record. */
static void write_name(FILE *out, const char *key, const char *s)
{
    if (key[0])
        fprintf(out, "%s=", key);
    for (; s && *s; s++)
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, out);
    fputc('\n', out);
}

static const char *func_file(const struct export_func *g)
{
    return g->source_file ? g->source_file : g->module ? g->module : "???";
}

int export_callgrind(FILE *out, const struct profile *p)
{
    struct export_funcs fn;
    if (export_funcs_build(p, &fn) != 0)
        return -1;
    struct cg_costs c = {0};
    hashmap_init_u64(&c.index);
    int rc = collect(p, &fn, &c);
    if (rc == 0) {
        qsort(c.v, c.n, sizeof *c.v, by_func_then_line);
        uint64_t unit = p->sample_period ? p->sample_period : (p->period_ns ? p->period_ns : 1000000);
        fputs("# callgrind format\nversion: 1\ncreator: opprof " PACKAGE_VERSION "\n", out);
        fputs("cmd: ", out);
        write_name(out, "", p->command ? p->command : "?");
        fputs("positions: line\n", out);
        if (p->sample_period)
            fprintf(out, "event: Events : %s\nevents: Samples Events\n", p->event ? p->event : "events");
        else
            fputs("event: Time_ns : CPU time (ns)\nevents: Samples Time_ns\n", out);
        uint32_t cur = UINT32_MAX;
        for (size_t i = 0; i < c.n; i++) {
            const struct cg_cost *e = &c.v[i];
            const struct export_func *g = &fn.funcs[e->func];
            int line = p->frames[e->frame].line > 0 ? p->frames[e->frame].line : 0;
            if (e->func != cur) {
                cur = e->func;
                write_name(out, "\nfl", func_file(g));
                write_name(out, "fn", g->name);
            }
            if (e->callee != UINT32_MAX) {
                const struct export_func *h = &fn.funcs[e->callee];
                write_name(out, "cfi", func_file(h));
                write_name(out, "cfn", h->name);
                fprintf(out, "calls=%" PRIu64 " %d\n", e->samples, h->min_line > 0 ? h->min_line : 0);
            }
            fprintf(out, "%d %" PRIu64 " %" PRIu64 "\n", line, e->samples, e->weight * unit);
        }
        uint64_t samples = 0, weight = 0; /* what the self costs add up to */
        for (size_t i = 0; i < c.n; i++)
            if (c.v[i].callee == UINT32_MAX)
                samples += c.v[i].samples, weight += c.v[i].weight;
        fprintf(out, "\ntotals: %" PRIu64 " %" PRIu64 "\n", samples, weight * unit);
    }
    free(c.v);
    hashmap_free(&c.index);
    export_funcs_free(&fn);
    return rc;
}
