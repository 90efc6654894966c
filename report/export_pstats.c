/*
 * report/export_pstats.c — cProfile-compatible statistics, so that
 * `python -m pstats F`, pstats.Stats(F).sort_stats('tottime').print_stats()
 * and gprof2dot read a sampled profile as if cProfile had written it.
 *
 * The file is marshal data of the dict cProfile's Stats keeps:
 *   {(file, firstlineno, funcname): (cc, nc, tt, ct, {caller_key: (cc, nc, tt, ct)})}
 * What the numbers mean here (a sampler sees no calls, only stacks):
 *   tt  seconds of samples whose innermost frame is the function (self)
 *   ct  seconds of samples with the function anywhere on the stack, once per
 *       sample even under recursion (total)
 *   nc = cc  number of such samples (so "percall" is about one period)
 * and per caller edge the same restricted to samples where that caller
 * made the function's outermost call in the stack: under recursion a sample
 * counts on one edge only, so a function's caller edges add up to it. As cProfile does, the interpreter's own work on a
 * Python function's bytecode (long arithmetic, allocation, PyObject_Free) is
 * that function's own time: a sample whose frames leafward of the innermost
 * Python frame are all interpreter code is charged to the Python function.
 * Native code of other modules (a torch kernel, sgemm_) keeps its own entry,
 * as cProfile gives built-ins theirs. Python functions are keyed (co_filename, smallest line
 * sampled in the function, co_qualname): the profile knows the line that was
 * executing, not the def line, so firstlineno is the lowest line seen (the
 * def line or a little after). Native functions with line information are
 * keyed (source file, smallest line sampled, name), as Python ones; without,
 * (module, 0, name), printed by pstats as "libfoo.so:0(name)"; a frame with no module gets
 * cProfile's own convention for built-ins ('~', 0, '<name>'), printed "{name}".
 *
 * Only the marshal pieces needed are written: dict '{'..'0', small tuple ')'
 * with a one-byte count, short ASCII string 'z' or UTF-8 'u', int 'i' (or 'l'
 * past 32 bits), binary float 'g'; all little-endian, no reference flags.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/export_internal.h"
#include "report/report.h"
#include "util/util.h"

/* ---- marshal writer ------------------------------------------------------------ */

static void w_u32(FILE *out, uint32_t v)
{
    unsigned char b[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xff};
    fwrite(b, 1, 4, out);
}

static void w_tuple(FILE *out, unsigned n)
{
    fputc(')', out); /* TYPE_SMALL_TUPLE */
    fputc((int)n, out);
}

/* A non-negative integer: 'i' when it fits an int32, else 'l' (base 2**15
 * digits, least significant first, digit count with the sign). */
static void w_uint(FILE *out, uint64_t v)
{
    if (v <= INT32_MAX) {
        fputc('i', out);
        w_u32(out, (uint32_t)v);
        return;
    }
    uint16_t digits[5];
    uint32_t n = 0;
    for (uint64_t x = v; x; x >>= 15)
        digits[n++] = (uint16_t)(x & 0x7fff);
    fputc('l', out);
    w_u32(out, n);
    for (uint32_t i = 0; i < n; i++) {
        fputc(digits[i] & 0xff, out);
        fputc(digits[i] >> 8, out);
    }
}

static void w_float(FILE *out, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    fputc('g', out); /* TYPE_BINARY_FLOAT: IEEE 754 little-endian */
    for (int i = 0; i < 8; i++)
        fputc((int)((bits >> (8 * i)) & 0xff), out);
}

/* A str: 'z' (short ASCII) when it can be, else 'u' with the text made valid
 * UTF-8 (marshal would refuse invalid bytes, and the whole load fails). */
static void w_str(FILE *out, const char *s)
{
    size_t len = strlen(s);
    bool ascii = len < 256;
    for (size_t i = 0; ascii && i < len; i++)
        ascii = (unsigned char)s[i] < 0x80;
    if (ascii) {
        fputc('z', out);
        fputc((int)len, out);
        fwrite(s, 1, len, out);
        return;
    }
    /* Measure the cleaned text first: the length comes before the bytes. */
    size_t clean = 0;
    for (const unsigned char *u = (const unsigned char *)s; *u;) {
        size_t n = export_utf8_len(u);
        clean += n ? n : 3;
        u += n ? n : 1;
    }
    fputc('u', out);
    w_u32(out, (uint32_t)clean);
    for (const unsigned char *u = (const unsigned char *)s; *u;) {
        size_t n = export_utf8_len(u);
        if (n)
            fwrite(u, 1, n, out);
        else
            fputs("\xef\xbf\xbd", out);
        u += n ? n : 1;
    }
}

/* ---- aggregation ----------------------------------------------------------------- */

struct pstats_func {
    uint64_t self_w, total_w, samples;
    uint32_t gen; /* 1 + the stack that last counted this function */
};

struct pstats_edge {
    uint32_t caller, callee;
    uint64_t self_w, total_w, samples;
};

/* The edges in first-seen order (the order they are written in) plus an
 * index (caller, callee) -> edge. */
struct edge_map {
    struct pstats_edge *edges;
    size_t nedges, cap;
    struct hashmap index; /* caller << 32 | callee -> edge */
};

/* The edge caller -> callee, added (zeroed) when new; NULL on out of memory.
 * The array gets its room first so that one find_or_add does the lookup and
 * the insertion. */
static struct pstats_edge *edge_get(struct edge_map *m, uint32_t caller, uint32_t callee)
{
    if (m->nedges == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        struct pstats_edge *e = realloc(m->edges, cap * sizeof *e);
        if (!e)
            return NULL;
        m->edges = e;
        m->cap = cap;
    }
    uint64_t found;
    int rc = hashmap_find_or_add_u64(&m->index, (uint64_t)caller << 32 | callee, m->nedges, &found);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        m->edges[m->nedges++] = (struct pstats_edge){caller, callee, 0, 0, 0};
    return &m->edges[found];
}

/* The pstats key of a function (see the top of the file). */
static void w_key(FILE *out, const struct export_funcs *fn, uint32_t f)
{
    const struct export_func *g = &fn->funcs[f];
    w_tuple(out, 3);
    if (g->cls == EXPORT_CLASS_PYTHON) {
        w_str(out, g->key_file ? g->key_file : g->module);
        w_uint(out, g->min_line > 0 ? (uint64_t)g->min_line : 0);
        w_str(out, g->symbol);
    } else if (g->source_file && g->source_file[0]) {
        /* debug info gave a line: pstats and gprof2dot show file:line */
        w_str(out, g->source_file);
        w_uint(out, g->min_line > 0 ? (uint64_t)g->min_line : 0);
        w_str(out, g->symbol);
    } else if (g->module && g->module[0]) {
        w_str(out, g->module);
        w_uint(out, 0);
        w_str(out, g->symbol);
    } else {
        char *bracketed = malloc(strlen(g->symbol) + 3);
        w_str(out, "~");
        w_uint(out, 0);
        if (bracketed) {
            sprintf(bracketed, "<%s>", g->symbol);
            w_str(out, bracketed);
            free(bracketed);
        } else {
            w_str(out, g->symbol);
        }
    }
}

/* The modules that hold CPython's eval loop in this profile (one per
 * interpreter binary or libpython seen; a few at most). */
#define PSTATS_MAX_INTERPRETERS 8
struct interpreters {
    const char *module[PSTATS_MAX_INTERPRETERS];
    size_t n;
};

static void find_interpreters(const struct profile *p, struct interpreters *in)
{
    in->n = 0;
    for (size_t i = 0; i < p->nframes && in->n < PSTATS_MAX_INTERPRETERS; i++) {
        const struct prof_frame *f = &p->frames[i];
        if (f->kind == FRAME_PYTHON || !f->module || !splice_is_eval_frame(f->name))
            continue;
        bool seen = false;
        for (size_t k = 0; k < in->n && !seen; k++)
            seen = strcmp(in->module[k], f->module) == 0;
        if (!seen)
            in->module[in->n++] = f->module;
    }
}

static bool is_interpreter_frame(const struct interpreters *in, const struct prof_frame *f)
{
    if (f->kind == FRAME_PYTHON || !f->module)
        return false;
    for (size_t k = 0; k < in->n; k++)
        if (strcmp(in->module[k], f->module) == 0)
            return true;
    return false;
}

/* How many leaf frames are interpreter code working for the innermost Python
 * frame (0 when a foreign native frame or no Python frame is leafward). */
static uint32_t interpreter_leaf_frames(const struct profile *p, const struct interpreters *in,
                                        const struct prof_stack *st)
{
    if (in->n == 0)
        return 0;
    for (uint32_t k = 0; k < st->nframes; k++) {
        const struct prof_frame *f = &p->frames[st->frames[k]];
        if (f->kind == FRAME_PYTHON)
            return k;
        if (!is_interpreter_frame(in, f))
            return 0;
    }
    return 0;
}

int export_pstats(FILE *out, const struct profile *p, char *err, size_t errlen)
{
    if (p->nsamples == 0 || p->total_weight == 0) {
        snprintf(err, errlen,
                 "the profile has no samples, and pstats cannot load an empty profile; "
                 "record a workload that runs long enough to be sampled");
        return -2;
    }
    struct export_funcs fn;
    if (export_funcs_build(p, &fn) != 0)
        return -1;
    struct pstats_func *funcs = calloc(fn.nfuncs, sizeof *funcs);
    struct edge_map em = {0};
    hashmap_init_u64(&em.index);
    uint64_t *weight = NULL, *count = NULL;
    uint32_t *by_callee = NULL, *start = NULL;
    int rc = -1;
    if (!funcs || export_stack_weights(p, &weight, &count) != 0)
        goto done;
    struct interpreters interp;
    find_interpreters(p, &interp);

    for (size_t s = 0; s < p->nstacks; s++) {
        if (!count[s])
            continue;
        const struct prof_stack *st = &p->stacks[s];
        uint32_t gen = (uint32_t)s + 1;
        if (st->nframes == 0) {
            struct pstats_func *f = &funcs[fn.none];
            f->self_w += weight[s];
            f->total_w += weight[s];
            f->samples += count[s];
            continue;
        }
        uint32_t first = interpreter_leaf_frames(p, &interp, st);
        uint32_t len = export_stack_len(p, st);
        if (first >= len)
            first = len - 1;
        uint32_t leaf = fn.of_frame[st->frames[first]];
        funcs[leaf].self_w += weight[s];
        /* Root to leaf: a function's sample (and the caller edge it is
         * counted on) is its outermost call in the stack, so under recursion
         * a sample counts once for the function and once among its caller
         * edges, which then never add up to more than the function; the
         * sample's self time goes to that same edge. */
        for (uint32_t k = len; k-- > first;) {
            uint32_t callee = fn.of_frame[st->frames[k]];
            struct pstats_func *f = &funcs[callee];
            if (f->gen == gen)
                continue; /* an inner, recursive call */
            f->gen = gen;
            f->total_w += weight[s];
            f->samples += count[s];
            if (k + 1 == len)
                continue;
            struct pstats_edge *e = edge_get(&em, fn.of_frame[st->frames[k + 1]], callee);
            if (!e)
                goto done;
            if (callee == leaf)
                e->self_w += weight[s];
            e->total_w += weight[s];
            e->samples += count[s];
        }
    }

    /* Edges grouped by callee (counting sort), for each function's caller dict. */
    start = calloc(fn.nfuncs + 1, sizeof *start);
    by_callee = malloc((em.nedges ? em.nedges : 1) * sizeof *by_callee);
    if (!start || !by_callee)
        goto done;
    for (size_t i = 0; i < em.nedges; i++)
        start[em.edges[i].callee + 1]++;
    for (size_t f = 0; f < fn.nfuncs; f++)
        start[f + 1] += start[f];
    {
        uint32_t *fill = calloc(fn.nfuncs, sizeof *fill);
        if (!fill)
            goto done;
        for (size_t i = 0; i < em.nedges; i++) {
            uint32_t c = em.edges[i].callee;
            by_callee[start[c] + fill[c]++] = (uint32_t)i;
        }
        free(fill);
    }

    double sec = (double)(p->period_ns ? p->period_ns : 1000000) / 1e9;
    fputc('{', out);
    for (size_t f = 0; f < fn.nfuncs; f++) {
        if (!funcs[f].samples)
            continue;
        w_key(out, &fn, (uint32_t)f);
        w_tuple(out, 5);
        w_uint(out, funcs[f].samples);
        w_uint(out, funcs[f].samples);
        w_float(out, (double)funcs[f].self_w * sec);
        w_float(out, (double)funcs[f].total_w * sec);
        fputc('{', out);
        for (uint32_t i = start[f]; i < start[f + 1]; i++) {
            const struct pstats_edge *e = &em.edges[by_callee[i]];
            w_key(out, &fn, e->caller);
            w_tuple(out, 4);
            w_uint(out, e->samples);
            w_uint(out, e->samples);
            w_float(out, (double)e->self_w * sec);
            w_float(out, (double)e->total_w * sec);
        }
        fputc('0', out); /* TYPE_NULL closes a dict */
    }
    fputc('0', out);
    rc = 0;
done:
    free(start);
    free(by_callee);
    free(weight);
    free(count);
    free(em.edges);
    hashmap_free(&em.index);
    free(funcs);
    export_funcs_free(&fn);
    return rc;
}
