/*
 * analyze/findings.c — one-line hints at the top of `opprof report`, each
 * emitted only when the samples show it and each quoting the figures it rests
 * on (design.md: every figure traceable to samples):
 *
 *   reference_blas      time in the netlib reference BLAS (Debian's default
 *                       libblas.so.3): the fix is a library, not user code
 *   interpreter_bound   most time in the Python interpreter outside operators
 *   dominant_operator   one operator takes most of the self time
 *   high_cpi            a hot operator or function retires instructions slowly
 *   import_startup      much of the profile is modules being imported: the
 *                       run was too short for the steady state to dominate
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/hotspots_internal.h"

/* Thresholds (shares of all samples' weight). */

/* Reference BLAS: 10 % of CPU time in one library whose fix is an apt
 * install is worth a line even when it is not the top item; below that the
 * gain from OpenBLAS/MKL is small next to everything else. */
#define REFERENCE_BLAS_MIN_SHARE 0.10
/* Interpreter-bound: only when the interpreter is the majority of the time
 * does "write fewer, larger tensor operations" beat tuning any operator. */
#define INTERPRETER_MIN_SHARE 0.50
/* Dominant operator: at 40 % self one operator is the obvious first target
 * (halving it saves a fifth of the run); below that the table says enough. */
#define DOMINANT_OP_MIN_SHARE 0.40
/* Import: "import torch" alone is 1-2 s of CPU. At a fifth of the profile
 * start-up visibly dilutes every other share; a profile of minutes of
 * training keeps it under a few per cent and gets no line. */
#define IMPORT_MIN_SHARE 0.20

/* What the shares are shares of: CPU time (timer samples), or with record -c
 * the event the samples were taken on. */
static const char *sampled_quantity(const struct profile *p)
{
    return p->sample_period && p->event && p->event[0] ? p->event : "CPU time";
}

static int add_finding(struct findings *out, enum finding_kind kind, const char *id, double share,
                       const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    struct finding *items = realloc(out->items, (out->n + 1) * sizeof *items);
    if (!items)
        return -1;
    out->items = items;
    char *copy = strdup(text);
    if (!copy)
        return -1;
    items[out->n++] = (struct finding){.kind = kind, .id = id, .share = share, .text = copy};
    return 0;
}

/* The netlib reference BLAS names its routines with a short lowercase name
 * and one trailing underscore (sgemm_, dgemv_, saxpy_, isamax_, lsame_,
 * xerbla_). OpenBLAS installed as libblas.so.3 spends its time in kernels
 * with other names (sgemm_kernel_*, *_oncopy, unexported: module+0x...), so
 * this tells the two apart although both are called libblas.so.3. */
static bool is_netlib_routine(const char *name)
{
    size_t n = strlen(name);
    if (n < 3 || n > 8 || name[n - 1] != '_')
        return false;
    for (size_t i = 0; i + 1 < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')))
            return false;
    return true;
}

static bool is_blas_module(const char *module)
{
    return strncmp(module, "libblas.so", 10) == 0;
}

static bool is_interpreter_module(const char *module)
{
    return strncmp(module, "python3", 7) == 0 || strncmp(module, "libpython", 9) == 0;
}

static double share_of(uint64_t part, uint64_t whole)
{
    return whole ? (double)part / (double)whole : 0.0;
}

/* Leaf frame of a stack, NULL when it has none. */
static const struct prof_frame *leaf_of(const struct profile *p, const struct prof_stack *st)
{
    return st->nframes && st->frames[0] < p->nframes ? &p->frames[st->frames[0]] : NULL;
}

/* The row of b with the most self weight, NULL when b has none. */
static const struct hotspot_row *busiest_row(const struct hs_builder *b)
{
    const struct hotspot_row *top = NULL;
    for (size_t i = 0; i < b->nrows; i++)
        if (!top || b->rows[i].self > top->self)
            top = &b->rows[i];
    return top;
}

/* The import statement outside the import machinery that a stack under
 * `import` started from ("torch_train.py:12"): the first Python frame
 * rootward of the outermost importlib frame. Counted into rows of b. */
static int note_import_line(const struct profile *p, const struct prof_stack *st, uint64_t w,
                            struct hs_builder *b)
{
    long outer = -1;
    for (uint32_t i = 0; i < st->nframes; i++) {
        if (st->frames[i] < p->nframes && frame_is_importlib(&p->frames[st->frames[i]]))
            outer = i;
    }
    long caller = outer >= 0 ? python_frame_from(p, st, (size_t)outer + 1) : -1;
    if (caller < 0)
        return 0;
    const struct prof_frame *f = &p->frames[st->frames[caller]];
    const char *slash = strrchr(f->module, '/');
    char key[1024];
    snprintf(key, sizeof key, "%s:%d", slash ? slash + 1 : f->module, f->line);
    long r = hs_builder_row(b, key, NULL);
    if (r < 0)
        return -1;
    b->rows[r].self += w;
    return 0;
}

/* (1) Reference BLAS, (2) interpreter-bound and (5) import start-up: one pass
 * over the stacks. */
static int leaf_findings(const struct profile *p, uint64_t total, struct findings *out)
{
    struct op_index ix;
    uint64_t *sw, *sc;
    if (op_index_build(p, &ix) != 0)
        return -1;
    if (hs_fold_by_stack(p, &sw, &sc) != 0) {
        op_index_free(&ix);
        return -1;
    }
    struct hs_builder blas_fn = {0}, interp_line = {0}, import_line = {0};
    uint64_t blas_w = 0, netlib_w = 0, interp_w = 0, import_w = 0;
    const char *blas_module = NULL;
    int rc = -1;
    for (size_t s = 0; s < p->nstacks; s++) {
        if (!sc[s])
            continue;
        const struct prof_stack *st = &p->stacks[s];
        const struct prof_frame *leaf = leaf_of(p, st);
        if (!leaf)
            continue;
        if (leaf->kind != FRAME_PYTHON && is_blas_module(leaf->module)) {
            blas_w += sw[s];
            if (!blas_module)
                blas_module = leaf->module;
            if (is_netlib_routine(leaf->name)) {
                netlib_w += sw[s];
                long r = hs_builder_row(&blas_fn, leaf->name, NULL);
                if (r < 0)
                    goto done;
                blas_fn.rows[r].self += sw[s];
            }
        }
        if (stack_is_import(p, st)) {
            /* Start-up, not the workload's interpreter-bound code. */
            import_w += sw[s];
            if (note_import_line(p, st, sw[s], &import_line) != 0)
                goto done;
            continue;
        }
        if (leaf->kind != FRAME_PYTHON && is_interpreter_module(leaf->module) &&
            op_stack_innermost(&ix, p, st) < 0) {
            interp_w += sw[s];
            long py = python_frame_from(p, st, 0);
            if (py >= 0) {
                const struct prof_frame *f = &p->frames[st->frames[py]];
                char key[4096];
                snprintf(key, sizeof key, "%s:%d", f->module, f->line);
                long r = hs_builder_row(&interp_line, key, f->name);
                if (r < 0)
                    goto done;
                interp_line.rows[r].self += sw[s];
            }
        }
    }
    if (share_of(netlib_w, total) >= REFERENCE_BLAS_MIN_SHARE) {
        const struct hotspot_row *top = busiest_row(&blas_fn);
        if (add_finding(out, FINDING_REFERENCE_BLAS, "reference_blas", share_of(blas_w, total),
                        "Reference BLAS in use: %.1f %% of %s is in %s (%s %.1f %%); it is "
                        "single-threaded and unoptimized: install OpenBLAS or MKL "
                        "(update-alternatives --config libblas.so.3-x86_64-linux-gnu) or use a "
                        "PyTorch build with MKL",
                        100.0 * share_of(blas_w, total), sampled_quantity(p), blas_module, top->name,
                        100.0 * share_of(top->self, total)) != 0)
            goto done;
    }
    if (share_of(interp_w, total) >= INTERPRETER_MIN_SHARE) {
        const struct hotspot_row *top = busiest_row(&interp_line);
        char where[1024] = "";
        if (top)
            snprintf(where, sizeof where, "; the busiest line is %s in %s (%.1f %%)", top->name,
                     top->module, 100.0 * share_of(top->self, total));
        /* Tensor advice only where tensor operators run at all; a plain
         * Python program gets the general remedy. */
        if (add_finding(out, FINDING_INTERPRETER, "interpreter_bound", share_of(interp_w, total),
                        ix.any_op ? "Most %s (%.1f %%) is in the Python interpreter, not in operators%s: "
                                    "replace per-element Python work with fewer, larger tensor operations"
                                  : "Most %s (%.1f %%) is in the Python interpreter%s: move the loop "
                                    "into a vectorized library call (NumPy, PyTorch) or compiled code",
                        sampled_quantity(p), 100.0 * share_of(interp_w, total), where) != 0)
            goto done;
    }
    if (share_of(import_w, total) >= IMPORT_MIN_SHARE) {
        const struct hotspot_row *top = busiest_row(&import_line);
        char where[1024] = "";
        if (top)
            snprintf(where, sizeof where, ", %.1f %% under the import at %s", 100.0 * share_of(top->self, total),
                     top->name);
        char time[32] = "";
        if (p->period_ns)
            snprintf(time, sizeof time, " (%.2f s)", (double)import_w * (double)p->period_ns / 1e9);
        if (add_finding(out, FINDING_IMPORT, "import_startup", share_of(import_w, total),
                        "Start-up: %.1f %% of %s%s is modules being imported%s; every other share "
                        "is diluted by it: profile a longer run, or skip start-up with "
                        "'opprof record --delay S'",
                        100.0 * share_of(import_w, total), sampled_quantity(p), time, where) != 0)
            goto done;
    }
    rc = 0;
done:
    hs_builder_abort(&blas_fn);
    hs_builder_abort(&interp_line);
    hs_builder_abort(&import_line);
    free(sw);
    free(sc);
    op_index_free(&ix);
    return rc;
}

/* (3) One operator dominates the self time. */
static int dominant_op_finding(const struct profile *p, uint64_t total, struct findings *out)
{
    struct hotspot_table t;
    if (hotspots_compute(p, GROUP_OP, &t) != 0)
        return -1;
    const struct hotspot_row *top = NULL;
    for (size_t i = 0; i < t.nrows; i++)
        if (!is_no_operator_row(t.rows[i].name) && (!top || t.rows[i].self > top->self))
            top = &t.rows[i];
    int rc = 0;
    if (top && share_of(top->self, total) >= DOMINANT_OP_MIN_SHARE) {
        char caller[600] = "";
        if (top->detail)
            snprintf(caller, sizeof caller, "; its top Python caller is %s", top->detail);
        rc = add_finding(out, FINDING_DOMINANT_OP, "dominant_operator", share_of(top->self, total),
                         "%s takes %.1f %% of %s (self): start there%s", top->name,
                         100.0 * share_of(top->self, total), sampled_quantity(p), caller);
    }
    hotspots_free(&t);
    return rc;
}

/* (4) Per-sample counters: CPI above 1 on a hot operator (a PyTorch
 * profile) or function (any other), with the likely reason. VTune flags CPI
 * "may be too high" from about 1; well-tuned CPU-bound code runs at 0.5-0.75.
 * The reason comes from the LLC counters when they were recorded: many
 * misses per instruction mean the core waits on memory. */
#define HIGH_CPI 1.0
#define HIGH_CPI_MIN_SHARE 0.05
#define MEMORY_BOUND_MPKI 5.0 /* LLC misses per 1000 instructions */
#define HIGH_CPI_MAX_FINDINGS 5

static int high_cpi_findings(const struct profile *p, uint64_t total, struct findings *out)
{
    if (!p->counters || !counters_have_role(p->counters, PMU_ROLE_CYCLES) ||
        !counters_have_role(p->counters, PMU_ROLE_INSTRUCTIONS))
        return 0;
    struct op_index ix;
    if (op_index_build(p, &ix) != 0)
        return -1;
    bool ops = ix.any_op;
    op_index_free(&ix);
    struct hotspot_table t;
    if (hotspots_compute(p, ops ? GROUP_OP : GROUP_FUNCTION, &t) != 0)
        return -1;
    hotspots_sort(&t, SORT_SELF);
    bool have_llc = counters_have_role(p->counters, PMU_ROLE_LLC_MISSES);
    int rc = 0;
    size_t shown = 0;
    for (size_t i = 0; i < t.nrows && shown < HIGH_CPI_MAX_FINDINGS && rc == 0; i++) {
        const struct hotspot_row *r = &t.rows[i];
        double share = share_of(r->self, total);
        if (share < HIGH_CPI_MIN_SHARE || !r->counters || is_no_operator_row(r->name))
            continue;
        struct counter_metrics m;
        counter_metrics_compute(p->counters, r->counters, (double)r->self * (double)p->period_ns / 1e9, &m);
        if (isnan(m.cpi) || m.cpi <= HIGH_CPI)
            continue;
        char why[400];
        if (have_llc && !isnan(m.llc_mpki) && m.llc_mpki >= MEMORY_BOUND_MPKI)
            snprintf(why, sizeof why, "memory-bound: %.1f LLC misses per 1000 instructions (about %.2f GB/s est.); "
                     "improve locality (blocking, contiguous layouts) or reduce the bytes moved", m.llc_mpki,
                     m.bandwidth_est / 1e9);
        else if (have_llc)
            snprintf(why, sizeof why, "not memory-bound (%.1f LLC misses per 1000 instructions): slow instructions "
                     "(divisions, long dependency chains) or calls not inlined in the hot loop",
                     isnan(m.llc_mpki) ? 0.0 : m.llc_mpki);
        else
            snprintf(why, sizeof why, "memory stalls, slow instructions or calls not inlined; record with "
                     "-e cycles,instructions,cache-misses to tell them apart");
        rc = add_finding(out, FINDING_HIGH_CPI, "high_cpi", share,
                         "%s has CPI %.2f (IPC %.2f) over %.1f %% of %s, above %.1f: %s", r->name, m.cpi,
                         m.ipc, 100.0 * share, sampled_quantity(p), HIGH_CPI, why);
        shown++;
    }
    hotspots_free(&t);
    return rc;
}

int findings_compute(const struct profile *p, struct findings *out)
{
    memset(out, 0, sizeof *out);
    /* The denominator of the report's tables, so the figures agree. */
    uint64_t total = p->total_weight;
    for (size_t i = 0; !p->total_weight && i < p->nsamples; i++)
        total += p->samples[i].weight;
    if (total == 0)
        return 0;
    /* The advice of the leaf and operator findings (vectorize, install a
     * BLAS, skip start-up) is about where time goes: it holds for time,
     * cycles or instructions, not for page faults or context switches. */
    bool time_like = !p->sample_period || p->sample_role == PMU_ROLE_CYCLES ||
                     p->sample_role == PMU_ROLE_INSTRUCTIONS || p->sample_role == PMU_ROLE_CPU_CLOCK;
    if ((time_like && (leaf_findings(p, total, out) != 0 || dominant_op_finding(p, total, out) != 0)) ||
        high_cpi_findings(p, total, out) != 0) {
        findings_free(out);
        return -1;
    }
    return 0;
}

void findings_free(struct findings *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        free(f->items[i].text);
    free(f->items);
    f->items = NULL;
    f->n = 0;
}
