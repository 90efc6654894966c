/*
 * analyze/hotspots.c — self/total tables over an in-memory profile.
 *
 * This is what `opprof report` prints: one row per key (function, module,
 * thread, process), with self weight (samples whose leaf maps to the key) and
 * total weight (samples with the key anywhere on the stack, counted once per
 * sample even under recursion), plus the callers/callees tables of one
 * function.
 *
 * Why it is shaped this way: a profile has millions of samples but only
 * thousands of distinct stacks and frames. So the samples are first folded
 * into a weight and a count per stack index, each distinct stack is then
 * walked once, each frame is mapped to its row once (lazily, through a
 * util/ hashmap keyed by the row's strings), and "once per
 * sample" is enforced with a per-row generation marker (the index of the stack
 * being walked) instead of a nested scan. Everything is linear in the size of
 * the profile.
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <inttypes.h>

#include "analyze/analyze.h"
#include "analyze/profile_internal.h"
#include "analyze/hotspots_internal.h"

/* ------------------------------------------------------------------------- */
/* Row builder: a growable row array plus a hash index on (name, module)      */
/* ------------------------------------------------------------------------- */


/* The index maps (name, module) to a row; the strings are read back from the
 * row, so the map stores only row numbers. */
struct row_key {
    const char *name, *module;
};

/* name, then module chained through the seed; each part's length is mixed
 * in, which keeps ("ab","c") apart from ("a","bc"). */
static uint64_t row_key_hash(const void *key, size_t len, const void *ctx)
{
    (void)len;
    (void)ctx;
    const struct row_key *k = key;
    uint64_t h = hashmap_hash_bytes(k->name, strlen(k->name), 0);
    return k->module ? hashmap_hash_bytes(k->module, strlen(k->module), h) : h;
}

static bool row_key_equal(const void *key, size_t len, uint64_t value, const void *ctx)
{
    (void)len;
    const struct hs_builder *b = ctx;
    const struct row_key *k = key;
    const struct hotspot_row *r = &b->rows[value];
    if (strcmp(r->name, k->name) != 0)
        return false;
    if (!r->module || !k->module)
        return r->module == k->module;
    return strcmp(r->module, k->module) == 0;
}

static const struct hashmap_type row_key_type = {row_key_hash, row_key_equal};

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Returns the row for (name, module), adding an empty one when it is new;
 * -1 on out of memory. module NULL is a key of its own (non-function rows). */
long hs_builder_row(struct hs_builder *b, const char *name, const char *module)
{
    /* Builders are zero-initialised by their users: set the index up on
     * first use, and point it at b every time (ctx), so that a builder
     * that was moved still finds its rows. */
    if (!b->index.type)
        hashmap_init(&b->index, &row_key_type, b);
    b->index.ctx = b;
    struct row_key k = {name, module};
    uint64_t found;
    if (hashmap_find(&b->index, &k, sizeof k, &found))
        return (long)found;
    if (b->nrows == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 32;
        struct hotspot_row *rows = realloc(b->rows, cap * sizeof *rows);
        if (!rows)
            return -1;
        b->rows = rows;
        uint32_t *gen = realloc(b->gen, cap * sizeof *gen);
        if (!gen)
            return -1;
        b->gen = gen;
        const char **sf = realloc(b->src_file, cap * sizeof *sf);
        if (!sf)
            return -1;
        b->src_file = sf;
        int *sl = realloc(b->src_line, cap * sizeof *sl);
        if (!sl)
            return -1;
        b->src_line = sl;
        b->cap = cap;
    }
    struct hotspot_row *r = &b->rows[b->nrows];
    memset(r, 0, sizeof *r);
    r->name = strdup(name);
    r->module = dup_or_null(module);
    if (!r->name || (module && !r->module)) {
        free(r->name);
        free(r->module);
        return -1;
    }
    b->gen[b->nrows] = 0;
    b->src_file[b->nrows] = NULL;
    b->src_line[b->nrows] = 0;
    if (hashmap_put(&b->index, &k, sizeof k, b->nrows) != 0) {
        free(r->name);
        free(r->module);
        return -1;
    }
    return (long)b->nrows++;
}

/* Remembers the lowest source line seen for a function row: the lowest line
 * of a function's sampled PCs is the best available stand-in for where it is
 * defined. A known line beats a file without a line. */
void hs_builder_note_source(struct hs_builder *b, size_t row, const struct prof_frame *f)
{
    if (!f->source_file || !f->source_file[0])
        return;
    const char *cur = b->src_file[row];
    int line = f->line > 0 ? f->line : 0;
    if (!cur || (line > 0 && (b->src_line[row] == 0 || line < b->src_line[row]))) {
        b->src_file[row] = f->source_file;
        b->src_line[row] = line;
    }
}

void hs_builder_use_counters(struct hs_builder *b, const struct profile *p, bool by_stack)
{
    free(b->key_ctr);
    b->key_ctr = counters_fold(p, by_stack, &b->nkeys);
    b->ctr_width = b->key_ctr ? p->counters->n * COUNTER_SUMS : 0;
    b->counters = b->key_ctr ? p->counters : NULL;
}

void hs_builder_self_counters(struct hs_builder *b, size_t r, size_t key)
{
    if (!b->ctr_width || key >= b->nkeys)
        return;
    if (r >= b->row_ctr_rows) {
        size_t rows = b->cap > r ? b->cap : r + 1;
        double *g = realloc(b->row_ctr, rows * b->ctr_width * sizeof *g);
        if (!g)
            return; /* out of memory: the row's counters stay short, never wrong */
        memset(g + b->row_ctr_rows * b->ctr_width, 0, (rows - b->row_ctr_rows) * b->ctr_width * sizeof *g);
        b->row_ctr = g;
        b->row_ctr_rows = rows;
    }
    const double *k = b->key_ctr + key * b->ctr_width;
    double *o = b->row_ctr + r * b->ctr_width;
    for (size_t j = 0; j < b->ctr_width; j++)
        o[j] += k[j];
}

/* Gives each row its own copy of its counter sums (hotspot_row.counters). */
static int builder_attach_counters(struct hs_builder *b)
{
    if (!b->ctr_width)
        return 0;
    for (size_t i = 0; i < b->nrows; i++) {
        b->rows[i].counters = calloc(b->ctr_width, sizeof(double));
        if (!b->rows[i].counters)
            return -1;
        if (i < b->row_ctr_rows)
            memcpy(b->rows[i].counters, b->row_ctr + i * b->ctr_width, b->ctr_width * sizeof(double));
    }
    return 0;
}

static void builder_free_rows(struct hs_builder *b)
{
    for (size_t i = 0; i < b->nrows; i++) {
        free(b->rows[i].name);
        free(b->rows[i].module);
        free(b->rows[i].source);
        free(b->rows[i].detail);
        free(b->rows[i].counters);
    }
    free(b->rows);
    b->rows = NULL;
    b->nrows = 0;
}

static void builder_free_index(struct hs_builder *b)
{
    free(b->gen);
    free(b->src_file);
    free(b->src_line);
    hashmap_free(&b->index);
    free(b->key_ctr);
    free(b->row_ctr);
    b->key_ctr = b->row_ctr = NULL;
    b->ctr_width = b->row_ctr_rows = 0;
    b->gen = NULL;
    b->src_file = NULL;
    b->src_line = NULL;
}

/* Hands the rows to out (formatting the source of each row) and releases the
 * index. Returns -1 (and frees everything) on out of memory. */
int hs_builder_finish(struct hs_builder *b, const struct profile *p, uint64_t counted_weight,
                          struct hotspot_table *out)
{
    for (size_t i = 0; i < b->nrows; i++) {
        if (!b->src_file[i])
            continue;
        size_t len = strlen(b->src_file[i]) + 16;
        char *s = malloc(len);
        if (!s) {
            builder_free_rows(b);
            builder_free_index(b);
            return -1;
        }
        if (b->src_line[i] > 0)
            snprintf(s, len, "%s:%d", b->src_file[i], b->src_line[i]);
        else
            snprintf(s, len, "%s", b->src_file[i]);
        b->rows[i].source = s;
    }
    const struct prof_counters *counters = b->counters;
    if (builder_attach_counters(b) != 0) {
        builder_free_rows(b);
        builder_free_index(b);
        return -1;
    }
    builder_free_index(b);
    out->counters = counters;
    out->rows = b->rows;
    out->nrows = b->nrows;
    /* The denominator is the profile's total weight (as torch.profiler divides
     * by the sum of self time); fall back to what was counted if a hand-built
     * profile left it at zero. */
    out->total_weight = p->total_weight ? p->total_weight : counted_weight;
    out->period_ns = p->period_ns;
    out->sample_period = p->sample_period;
    out->event = p->event;
    return 0;
}

void hs_builder_abort(struct hs_builder *b)
{
    builder_free_rows(b);
    builder_free_index(b);
}

/* ------------------------------------------------------------------------- */
/* Per-stack and per-thread folding of the samples                             */
/* ------------------------------------------------------------------------- */

/* Folds the samples (those only_wait selects, when it is set) into weight
 * and count per stack index. Samples with an out-of-range stack index are
 * folded into the extra slot at nstacks, which callers treat as an empty
 * stack, so the self column still adds up. */
static int fold_samples(const struct profile *p, bool only_wait, uint64_t **weight, uint64_t **count)
{
    *weight = calloc(p->nstacks + 1, sizeof **weight);
    *count = calloc(p->nstacks + 1, sizeof **count);
    if (!*weight || !*count) { /* callers free both on failure: leave them NULL */
        free(*weight);
        free(*count);
        *weight = *count = NULL;
        return -1;
    }
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct prof_sample *s = &p->samples[i];
        if (only_wait && !threading_sample_is_runtime_wait(p, s))
            continue;
        size_t k = s->stack < p->nstacks ? s->stack : p->nstacks;
        (*weight)[k] += s->weight;
        (*count)[k] += s->count;
    }
    return 0;
}

int hs_fold_by_stack(const struct profile *p, uint64_t **weight, uint64_t **count)
{
    return fold_samples(p, false, weight, count);
}

int hs_fold_runtime_wait(const struct profile *p, uint64_t **weight, uint64_t **count)
{
    return fold_samples(p, true, weight, count);
}

static int fold_by_thread(const struct profile *p, uint64_t **weight, uint64_t **count)
{
    *weight = calloc(p->nthreads + 1, sizeof **weight);
    *count = calloc(p->nthreads + 1, sizeof **count);
    if (!*weight || !*count) {
        free(*weight);
        free(*count);
        return -1;
    }
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct prof_sample *s = &p->samples[i];
        if (s->thread >= p->nthreads)
            continue; /* a loader bug; nothing sensible to name the row */
        (*weight)[s->thread] += s->weight;
        (*count)[s->thread] += s->count;
    }
    return 0;
}

/* Name of the row for samples without any frame. */
#define NO_STACK_NAME "[no stack]"
#define NO_MODULE_NAME "[unknown]"

/* GROUP_FUNCTION and GROUP_MODULE: walk each distinct sampled stack once. */
static int compute_by_frames(const struct profile *p, bool by_module, struct hotspot_table *out)
{
    uint64_t *sw, *sc;
    if (hs_fold_by_stack(p, &sw, &sc) != 0)
        return -1;
    /* frame index -> row index + 1 (0: not mapped yet) */
    uint32_t *frame_row = calloc(p->nframes + 1, sizeof *frame_row);
    if (!frame_row) {
        free(sw);
        free(sc);
        return -1;
    }
    struct hs_builder b = {0};
    hs_builder_use_counters(&b, p, true); /* per-sample counters, per stack */
    uint64_t counted = 0;
    for (size_t s = 0; s <= p->nstacks; s++) {
        uint64_t w = sw[s], n = sc[s];
        if (n == 0)
            continue;
        counted += w;
        const struct prof_stack *st = s < p->nstacks ? &p->stacks[s] : NULL;
        uint32_t nf = st ? st->nframes : 0;
        uint32_t gen = (uint32_t)s + 1;
        bool any = false;
        for (uint32_t i = 0; i < nf; i++) {
            uint32_t f = st->frames[i];
            if (f >= p->nframes)
                continue;
            if (!frame_row[f]) {
                const struct prof_frame *fr = &p->frames[f];
                long r = by_module ? hs_builder_row(&b, fr->module, NULL)
                                   : hs_builder_row(&b, fr->name, fr->module);
                if (r < 0)
                    goto oom;
                frame_row[f] = (uint32_t)r + 1;
                if (!by_module)
                    hs_builder_note_source(&b, (size_t)r, fr);
            }
            size_t r = frame_row[f] - 1;
            if (!any) {
                b.rows[r].self += w; /* the first valid frame is the leaf */
                hs_builder_self_counters(&b, r, s);
                any = true;
            }
            if (b.gen[r] != gen) {
                b.gen[r] = gen;
                b.rows[r].total += w;
                b.rows[r].samples += n;
            }
        }
        if (!any) {
            /* No frame at all: a row of its own, so self still sums to the total. */
            long r = by_module ? hs_builder_row(&b, NO_MODULE_NAME, NULL)
                               : hs_builder_row(&b, NO_STACK_NAME, NO_MODULE_NAME);
            if (r < 0)
                goto oom;
            b.rows[r].self += w;
            hs_builder_self_counters(&b, (size_t)r, s);
            b.rows[r].total += w;
            b.rows[r].samples += n;
        }
    }
    free(sw);
    free(sc);
    free(frame_row);
    return hs_builder_finish(&b, p, counted, out);
oom:
    free(sw);
    free(sc);
    free(frame_row);
    hs_builder_abort(&b);
    return -1;
}

static const char *base_name(const char *path)
{
    if (!path)
        return "";
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The process a pid belongs to. When a pid exec()ed, several process entries
 * share it; the last one (the newest image) names the row. */
static const struct prof_process *process_of(const struct profile *p, uint32_t pid)
{
    const struct prof_process *found = NULL;
    for (size_t i = 0; i < p->nprocesses; i++)
        if (p->processes[i].pid == pid)
            found = &p->processes[i];
    return found;
}

/* GROUP_THREAD and GROUP_PROCESS: self == total == the thread's (or process's)
 * weight, since every sample belongs to exactly one thread. */
static int compute_by_thread(const struct profile *p, bool by_process, struct hotspot_table *out)
{
    uint64_t *tw, *tc;
    if (fold_by_thread(p, &tw, &tc) != 0)
        return -1;
    struct hs_builder b = {0};
    hs_builder_use_counters(&b, p, false); /* per-sample counters, per thread */
    uint64_t counted = 0;
    char key[256];
    for (size_t t = 0; t < p->nthreads; t++) {
        if (tc[t] == 0)
            continue; /* threads without samples have nothing to show */
        const struct prof_thread *th = &p->threads[t];
        if (by_process) {
            const struct prof_process *pr = process_of(p, th->pid);
            const char *exe = pr ? base_name(pr->exe) : "";
            if (exe[0])
                snprintf(key, sizeof key, "pid %" PRIu32 " %s", th->pid, exe);
            else
                snprintf(key, sizeof key, "pid %" PRIu32, th->pid);
        } else {
            int nlen = (int)strnlen(th->name, sizeof th->name);
            if (nlen)
                snprintf(key, sizeof key, "tid %" PRIu32 " (%.*s) pid %" PRIu32, th->tid, nlen,
                         th->name, th->pid);
            else
                snprintf(key, sizeof key, "tid %" PRIu32 " pid %" PRIu32, th->tid, th->pid);
        }
        long r = hs_builder_row(&b, key, NULL);
        if (r < 0) {
            free(tw);
            free(tc);
            hs_builder_abort(&b);
            return -1;
        }
        b.rows[r].self += tw[t];
        hs_builder_self_counters(&b, (size_t)r, t);
        b.rows[r].total += tw[t];
        b.rows[r].samples += tc[t];
        counted += tw[t];
    }
    free(tw);
    free(tc);
    return hs_builder_finish(&b, p, counted, out);
}

int hotspots_compute(const struct profile *p, enum group_by by, struct hotspot_table *out)
{
    memset(out, 0, sizeof *out);
    switch (by) {
    case GROUP_FUNCTION:
        return compute_by_frames(p, false, out);
    case GROUP_MODULE:
        return compute_by_frames(p, true, out);
    case GROUP_THREAD:
        return compute_by_thread(p, false, out);
    case GROUP_PROCESS:
        return compute_by_thread(p, true, out);
    case GROUP_OP:
    case GROUP_LINE:
    case GROUP_PYTHON:
    case GROUP_KERNEL:
        return hotspots_compute_torch(p, by, out);
    }
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Callers and callees                                                        */
/* ------------------------------------------------------------------------- */

/* Marks the frames named name. An exact match wins; only when no frame has
 * exactly that name are frames whose name contains it used, so
 * `--callers spin` finds spin_a and spin_b, but `--callers main` does not
 * also pull in __libc_start_main. Returns the number of frames marked. */
static size_t match_frames(const struct profile *p, const char *name, bool *match)
{
    size_t n = 0;
    for (size_t f = 0; f < p->nframes; f++)
        if (strcmp(p->frames[f].name, name) == 0) {
            match[f] = true;
            n++;
        }
    if (n || !name[0])
        return n;
    for (size_t f = 0; f < p->nframes; f++)
        if (strstr(p->frames[f].name, name)) {
            match[f] = true;
            n++;
        }
    return n;
}

#define ROOT_NAME "[root]"
#define SELF_NAME "[self]"

/* Counts the neighbour row r for one distinct stack: total once per sample
 * (generation marker), self when the edge ends at the leaf. */
static void count_edge(struct hs_builder *b, size_t r, uint32_t gen, bool at_leaf, uint64_t w,
                       uint64_t n, uint32_t *self_gen)
{
    if (b->gen[r] != gen) {
        b->gen[r] = gen;
        b->rows[r].total += w;
        b->rows[r].samples += n;
    }
    if (at_leaf && self_gen[r] != gen) {
        self_gen[r] = gen;
        b->rows[r].self += w;
    }
}

/*
 * Callers (callees == false): for each occurrence of a matching frame, the
 * frame just rootward of it, or "[root]" when it is the outermost frame. The
 * self column is the weight of samples where the matching function is the
 * leaf (its own time, split by caller).
 *
 * Callees (callees == true): the frame just leafward, or "[self]" when the
 * matching function is the leaf. The self column is the weight where that
 * callee is the leaf (the callee's own time when called from here); for
 * "[self]" self == total == the function's self time.
 *
 * Total is the weight of samples with the edge anywhere on the stack, once per
 * sample per row. Percentages divide by the whole profile's total weight.
 */
int hotspots_neighbours(const struct profile *p, const char *name, bool callees,
                        struct hotspot_table *out)
{
    memset(out, 0, sizeof *out);
    /* A function named exactly name wins; else an operator ("bmm"); else the
     * functions whose name contains it. */
    char op[256];
    bool exact = false;
    for (size_t f = 0; f < p->nframes && !exact; f++)
        exact = strcmp(p->frames[f].name, name) == 0;
    if (!exact && hotspots_find_operator(p, name, op, sizeof op))
        return hotspots_op_neighbours(p, op, callees, out);
    bool *match = calloc(p->nframes + 1, sizeof *match);
    if (!match)
        return -1;
    if (match_frames(p, name, match) == 0) {
        free(match);
        return -1;
    }
    uint64_t *sw = NULL, *sc = NULL;
    uint32_t *frame_row = calloc(p->nframes + 1, sizeof *frame_row);
    uint32_t *self_gen = NULL;
    size_t self_gen_cap = 0;
    struct hs_builder b = {0};
    long special = -1; /* the [root] or [self] row, made on first use */
    if (!frame_row || hs_fold_by_stack(p, &sw, &sc) != 0)
        goto oom;
    for (size_t s = 0; s < p->nstacks; s++) {
        if (sc[s] == 0)
            continue;
        const struct prof_stack *st = &p->stacks[s];
        uint32_t gen = (uint32_t)s + 1;
        for (uint32_t i = 0; i < st->nframes; i++) {
            uint32_t f = st->frames[i];
            if (f >= p->nframes || !match[f])
                continue;
            /* The neighbour's position; out of range means [root]/[self]. */
            long j = callees ? (long)i - 1 : (long)i + 1;
            bool edge_at_leaf = callees ? (j == 0) : (i == 0);
            long r;
            if (j < 0 || j >= (long)st->nframes || st->frames[j] >= p->nframes) {
                if (special < 0)
                    special = hs_builder_row(&b, callees ? SELF_NAME : ROOT_NAME, NULL);
                r = special;
                if (callees)
                    edge_at_leaf = true; /* [self] is the function's own time */
            } else {
                uint32_t g = st->frames[j];
                if (!frame_row[g]) {
                    const struct prof_frame *fr = &p->frames[g];
                    r = hs_builder_row(&b, fr->name, fr->module);
                    if (r >= 0) {
                        frame_row[g] = (uint32_t)r + 1;
                        hs_builder_note_source(&b, (size_t)r, fr);
                    }
                } else {
                    r = (long)frame_row[g] - 1;
                }
            }
            if (r < 0)
                goto oom;
            if (b.nrows > self_gen_cap) {
                size_t cap = b.cap;
                uint32_t *g2 = realloc(self_gen, cap * sizeof *g2);
                if (!g2)
                    goto oom;
                memset(g2 + self_gen_cap, 0, (cap - self_gen_cap) * sizeof *g2);
                self_gen = g2;
                self_gen_cap = cap;
            }
            count_edge(&b, (size_t)r, gen, edge_at_leaf, sw[s], sc[s], self_gen);
        }
    }
    free(match);
    free(sw);
    free(sc);
    free(frame_row);
    free(self_gen);
    return hs_builder_finish(&b, p, p->total_weight, out);
oom:
    free(match);
    free(sw);
    free(sc);
    free(frame_row);
    free(self_gen);
    hs_builder_abort(&b);
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Sorting                                                                    */
/* ------------------------------------------------------------------------- */

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
    return a < b ? 1 : a > b ? -1 : 0;
}

/* Last tie-breakers, so the order never depends on qsort's whims. */
static int cmp_name_module(const struct hotspot_row *a, const struct hotspot_row *b)
{
    int c = strcmp(a->name, b->name);
    if (c)
        return c;
    if (!a->module || !b->module)
        c = (a->module != NULL) - (b->module != NULL);
    else
        c = strcmp(a->module, b->module);
    if (c || !a->detail || !b->detail)
        return c ? c : (a->detail != NULL) - (b->detail != NULL);
    return strcmp(a->detail, b->detail);
}

static int cmp_self(const void *x, const void *y)
{
    const struct hotspot_row *a = x, *b = y;
    int c = cmp_u64_desc(a->self, b->self);
    if (!c)
        c = cmp_u64_desc(a->total, b->total);
    return c ? c : cmp_name_module(a, b);
}

static int cmp_total(const void *x, const void *y)
{
    const struct hotspot_row *a = x, *b = y;
    int c = cmp_u64_desc(a->total, b->total);
    if (!c)
        c = cmp_u64_desc(a->self, b->self);
    return c ? c : cmp_name_module(a, b);
}

static int cmp_samples(const void *x, const void *y)
{
    const struct hotspot_row *a = x, *b = y;
    int c = cmp_u64_desc(a->samples, b->samples);
    if (!c)
        c = cmp_u64_desc(a->total, b->total);
    return c ? c : cmp_name_module(a, b);
}

static int cmp_name(const void *x, const void *y)
{
    return cmp_name_module(x, y);
}

void hotspots_sort(struct hotspot_table *t, enum sort_key key)
{
    int (*cmp)(const void *, const void *) = cmp_self;
    switch (key) {
    case SORT_SELF: cmp = cmp_self; break;
    case SORT_TOTAL: cmp = cmp_total; break;
    case SORT_SAMPLES: cmp = cmp_samples; break;
    case SORT_NAME: cmp = cmp_name; break;
    }
    if (t->nrows > 1)
        qsort(t->rows, t->nrows, sizeof *t->rows, cmp);
}

void hotspots_free(struct hotspot_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nrows; i++) {
        free(t->rows[i].name);
        free(t->rows[i].module);
        free(t->rows[i].source);
        free(t->rows[i].detail);
        free(t->rows[i].counters);
    }
    free(t->rows);
    t->rows = NULL;
    t->nrows = 0;
}

/* ------------------------------------------------------------------------- */
/* Names of group-by and sort keys                                            */
/* ------------------------------------------------------------------------- */

/* The first name of each entry is the canonical one; the others are the
 * words perf users type (symbol, dso, tid, pid). */
static const struct {
    const char *name;
    enum group_by by;
} group_names[] = {
    {"function", GROUP_FUNCTION}, {"module", GROUP_MODULE},
    {"thread", GROUP_THREAD},     {"process", GROUP_PROCESS},
    {"op", GROUP_OP},             {"line", GROUP_LINE},
    {"python", GROUP_PYTHON},     {"kernel", GROUP_KERNEL},
    {"symbol", GROUP_FUNCTION},   {"dso", GROUP_MODULE},
    {"tid", GROUP_THREAD},        {"pid", GROUP_PROCESS},
    {"operator", GROUP_OP},
};

int group_by_parse(const char *text, enum group_by *out)
{
    if (!text)
        return -1;
    for (size_t i = 0; i < sizeof group_names / sizeof group_names[0]; i++)
        if (strcmp(text, group_names[i].name) == 0) {
            *out = group_names[i].by;
            return 0;
        }
    return -1;
}

const char *group_by_name(enum group_by by)
{
    for (size_t i = 0; i < sizeof group_names / sizeof group_names[0]; i++)
        if (group_names[i].by == by)
            return group_names[i].name;
    return "?";
}

static const char *const sort_names[] = {
    [SORT_SELF] = "self",
    [SORT_TOTAL] = "total",
    [SORT_SAMPLES] = "samples",
    [SORT_NAME] = "name",
};

int sort_key_parse(const char *text, enum sort_key *out)
{
    if (!text)
        return -1;
    for (size_t i = 0; i < sizeof sort_names / sizeof sort_names[0]; i++)
        if (strcmp(text, sort_names[i]) == 0) {
            *out = (enum sort_key)i;
            return 0;
        }
    return -1;
}

const char *sort_key_name(enum sort_key key)
{
    if ((size_t)key < sizeof sort_names / sizeof sort_names[0])
        return sort_names[key];
    return "?";
}
