/*
 * analyze/hotspots_torch.c — the PyTorch views of `opprof report`:
 *
 *   --group-by op      innermost operator frame per sample (torch.profiler's
 *                      key_averages): self = samples whose innermost operator
 *                      is the op, total = samples with the op anywhere (once
 *                      per sample); samples without operator go to
 *                      "[no operator]" ("[no operator: import]" under
 *                      `import`) so self adds up to 100 %. Each op row
 *                      names its top Python caller (file:line, function, share
 *                      of the op's total).
 *   --group-by line    Python file:line; self = the innermost Python frame's
 *                      line; "[no Python frame]" for samples without any.
 *   --group-by python  Python function (qualname + file); self = innermost.
 *   --group-by kernel  innermost native function of each sample, one row per
 *                      (function, operator it ran under): the kernels under
 *                      each operator ("sgemm_" under "aten::mm").
 *   --callers OP       the Python lines that call OP; --callees OP its kernels.
 *
 * Same method as hotspots.c: samples folded per distinct stack, each stack
 * walked once, "once per sample" by a per-row generation marker. Rows are
 * keyed through the shared builder; where a row needs three strings (kernel,
 * module, operator) or a display name other than its key (a line shown as
 * "train.py:42" but keyed by the full path), the key is built with a
 * separator and the row is rewritten after the walk (finish_rows).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/hotspots_internal.h"

/* Joins the parts of a composite key; cannot occur in symbol or file names. */
#define KEY_SEP '\x1f'

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The file a Python frame belongs to: the full path when known. */
static const char *python_file(const struct prof_frame *f)
{
    return f->source_file && f->source_file[0] ? f->source_file : f->module;
}

/* "path:line" and "qualname" keys of a Python frame's line, in buf. */
static void line_key(char *buf, size_t len, const struct prof_frame *f)
{
    snprintf(buf, len, "%s:%d", python_file(f), f->line);
}

/* Growable per-row side array of uint32_t, kept as large as the builder. */
static int grow_u32(uint32_t **a, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 32;
    while (n < need)
        n *= 2;
    uint32_t *g = realloc(*a, n * sizeof *g);
    if (!g)
        return -1;
    memset(g + *cap, 0, (n - *cap) * sizeof *g);
    *a = g;
    *cap = n;
    return 0;
}

/* Counts weight w / n samples of one stack into row r: self when leaf,
 * total once per stack (generation marker). */
static void count_row(struct hs_builder *b, size_t r, uint32_t gen, bool self, uint64_t w, uint64_t n)
{
    if (self) {
        b->rows[r].self += w;
        hs_builder_self_counters(b, r, gen - 1); /* gen is stack index + 1 */
    }
    if (b->gen[r] != gen) {
        b->gen[r] = gen;
        b->rows[r].total += w;
        b->rows[r].samples += n;
    }
}

/* ------------------------------------------------------------------------- */
/* Rewriting rows after the walk                                              */
/* ------------------------------------------------------------------------- */

enum row_shape {
    SHAPE_PLAIN,  /* keys are already what is shown */
    SHAPE_LINE,   /* name "path:line", module "qualname" -> name "file.py:line",
                     detail qualname, source "path:line", module NULL */
    SHAPE_PYTHON, /* module "path" -> module "file.py" (source: path:line) */
    SHAPE_KERNEL, /* module "lib<SEP>op" -> module "lib", detail "op" */
};

/* Rewrites one row into its shown form; -1 on out of memory. */
static int shape_row(struct hotspot_row *r, enum row_shape shape)
{
    if (shape == SHAPE_LINE && r->module) {
        /* "[no Python frame]" has module NULL and stays as it is. */
        const char *colon = strrchr(r->name, ':');
        const char *base = base_name(r->name);
        if (colon && colon < base)
            base = r->name; /* a ':' inside a directory name: show the whole key */
        char *name = strdup(base);
        if (!name)
            return -1;
        free(r->source);
        r->source = r->name;
        r->name = name;
        r->detail = r->module;
        r->module = NULL;
    } else if (shape == SHAPE_PYTHON && r->module) {
        char *m = strdup(base_name(r->module));
        if (!m)
            return -1;
        free(r->module);
        r->module = m;
    } else if (shape == SHAPE_KERNEL && r->module) {
        char *sep = strchr(r->module, KEY_SEP);
        if (sep) {
            char *op = strdup(sep + 1);
            if (!op)
                return -1;
            *sep = '\0';
            r->detail = op;
        }
    }
    return 0;
}

static int finish_rows(struct hs_builder *b, const struct profile *p, uint64_t counted,
                       enum row_shape shape, struct hotspot_table *out)
{
    if (hs_builder_finish(b, p, counted, out) != 0)
        return -1;
    for (size_t i = 0; i < out->nrows; i++)
        if (shape_row(&out->rows[i], shape) != 0) {
            hotspots_free(out);
            return -1;
        }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The walk over distinct stacks                                              */
/* ------------------------------------------------------------------------- */

struct walk {
    const struct profile *p;
    struct op_index ix;
    uint64_t *sw, *sc;     /* weight and count per stack */
    uint64_t *wait_w, *wait_n; /* of those, runtime-wait samples (OMP_RUNTIME_WAIT_NAME) */
    struct hs_builder b;   /* the table's rows */
    uint32_t *frame_row;   /* frame -> row + 1 (views keyed by one frame) */
    uint32_t *op_row;      /* op id -> row + 1 (GROUP_OP) */
    /* GROUP_OP's top caller: rows keyed (caller line, op) */
    struct hs_builder callers;
    uint32_t *caller_frame; /* per caller row: 1 + a frame of that line */
    size_t caller_frame_cap;
};

static int walk_init(struct walk *w, const struct profile *p)
{
    memset(w, 0, sizeof *w);
    w->p = p;
    if (op_index_build(p, &w->ix) != 0)
        return -1;
    w->frame_row = calloc(p->nframes + 1, sizeof *w->frame_row);
    w->op_row = calloc(w->ix.nnames + 1, sizeof *w->op_row);
    if (!w->frame_row || !w->op_row || hs_fold_by_stack(p, &w->sw, &w->sc) != 0 ||
        hs_fold_runtime_wait(p, &w->wait_w, &w->wait_n) != 0) {
        free(w->frame_row);
        free(w->op_row);
        free(w->sw);
        free(w->sc);
        op_index_free(&w->ix);
        return -1;
    }
    hs_builder_use_counters(&w->b, p, true); /* per-sample counters, per stack */
    return 0;
}

/* Frees what the walk owns, except the rows already handed out. */
static void walk_free(struct walk *w)
{
    op_index_free(&w->ix);
    free(w->sw);
    free(w->sc);
    free(w->wait_w);
    free(w->wait_n);
    free(w->frame_row);
    free(w->op_row);
    free(w->caller_frame);
    hs_builder_abort(&w->callers);
}

/* Row of a Python frame for GROUP_LINE / GROUP_PYTHON (cached per frame). */
static long python_row(struct walk *w, uint32_t f, bool by_line)
{
    if (w->frame_row[f])
        return (long)w->frame_row[f] - 1;
    const struct prof_frame *fr = &w->p->frames[f];
    long r;
    if (by_line) {
        char key[4096];
        line_key(key, sizeof key, fr);
        r = hs_builder_row(&w->b, key, fr->name);
    } else {
        r = hs_builder_row(&w->b, fr->name, python_file(fr));
        if (r >= 0)
            hs_builder_note_source(&w->b, (size_t)r, fr);
    }
    if (r >= 0)
        w->frame_row[f] = (uint32_t)r + 1;
    return r;
}

/* GROUP_LINE's row of a native frame with line info ("path:line", the
 * function as detail, as a Python line's row), cached per frame. */
static long native_line_row(struct walk *w, uint32_t f)
{
    if (w->frame_row[f])
        return (long)w->frame_row[f] - 1;
    const struct prof_frame *fr = &w->p->frames[f];
    char key[4096];
    snprintf(key, sizeof key, "%s:%d", fr->source_file, fr->line);
    long r = hs_builder_row(&w->b, key, fr->name);
    if (r >= 0)
        w->frame_row[f] = (uint32_t)r + 1;
    return r;
}

/* Position of the innermost native (non-Python) frame, -1 when none. */
static long native_leaf(const struct profile *p, const struct prof_stack *st)
{
    for (uint32_t i = 0; i < st->nframes; i++) {
        uint32_t f = st->frames[i];
        if (f < p->nframes && p->frames[f].kind != FRAME_PYTHON)
            return (long)i;
    }
    return -1;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Whether st runs library constructors or destructors: under the dynamic
 * loader's initialisation of a library (_dl_init, from dlopen or at
 * start-up) or under exit's handlers (static destructors, atexit). */
static bool stack_in_loader_init(const struct profile *p, const struct prof_stack *st)
{
    static const char *const names[] = {"_dl_init", "call_init", "__run_exit_handlers", "_dl_fini", "__cxa_finalize"};
    for (uint32_t i = 0; i < st->nframes; i++) {
        uint32_t f = st->frames[i];
        if (f >= p->nframes || p->frames[f].kind == FRAME_PYTHON || !p->frames[f].name)
            continue;
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
            if (strcmp(p->frames[f].name, names[k]) == 0)
                return true;
    }
    return false;
}

const char *kernel_elsewhere_row(const struct prof_frame *leaf)
{
    const char *path = leaf->module ? leaf->module : "";
    const char *slash = strrchr(path, '/');
    const char *m = slash ? slash + 1 : path; /* the file, wherever the venv put it */
    const char *n = leaf->name ? leaf->name : "";
    if (has_prefix(m, "[kernel") || has_prefix(m, "vmlinux") || has_prefix(n, "[k]"))
        return "[not a kernel: system calls and the OS]";
    /* The C library and loader (syscall wrappers, malloc, symbol lookup at
     * start-up, __libc_start_call_main) and the C++ runtime; libm stays a
     * kernel: its expf/logf are compute. */
    if (has_prefix(m, "libc.so") || has_prefix(m, "libc-") || has_prefix(m, "ld-linux") || has_prefix(m, "ld-") ||
        has_prefix(m, "libpthread") || has_prefix(m, "libdl.") || has_prefix(m, "librt.") ||
        has_prefix(m, "libstdc++") || has_prefix(m, "libgcc_s") || has_prefix(m, "[vdso]") ||
        has_prefix(m, "libunwind") || has_prefix(m, "libopprof"))
        return "[not a kernel: libc, loader, C++ runtime]";
    if (has_prefix(m, "python") || has_prefix(m, "libpython"))
        return "[not a kernel: Python interpreter]";
    if (has_prefix(m, "libgomp") || has_prefix(m, "libomp") || has_prefix(m, "libiomp") || has_prefix(n, "GOMP_") ||
        has_prefix(n, "__kmp"))
        return "[not a kernel: OpenMP runtime (waits, barriers, fork/join)]";
    /* PyTorch's machinery between the Python call and the kernel: dispatch,
     * the autograd engine, tensor bookkeeping, the Python bindings. */
    if (has_prefix(n, "c10::") || has_prefix(n, "torch::autograd::") || has_prefix(n, "torch::jit::") ||
        has_prefix(n, "at::_ops::") || has_prefix(n, "at::Tensor") || has_prefix(n, "at::impl::") ||
        has_prefix(n, "pybind11::") || has_prefix(n, "THP") || has_prefix(m, "libtorch_python") ||
        has_prefix(m, "libc10."))
        return "[not a kernel: PyTorch dispatch, autograd, bindings]";
    return NULL;
}

/* The kernel row of a stack whose innermost operator is op (NULL: none). */
static long kernel_row(struct walk *w, const struct prof_stack *st, const char *op)
{
    long k = native_leaf(w->p, st);
    if (k < 0)
        return hs_builder_row(&w->b, NO_NATIVE_FRAME_NAME, NULL);
    const struct prof_frame *fr = &w->p->frames[st->frames[k]];
    /* Library constructors, registrations and destructors run by `import`,
     * by the loader at start-up or by exit are not the program's kernels,
     * whatever code they run (libtorch_cpu's op registration, codec tables). */
    if ((!op || strcmp(op, NO_OPERATOR_NAME) == 0) && (stack_is_import(w->p, st) || stack_in_loader_init(w->p, st)))
        return hs_builder_row(&w->b, "[not a kernel: start-up, imports, exit]", NULL);
    const char *elsewhere = kernel_elsewhere_row(fr);
    if (elsewhere)
        return hs_builder_row(&w->b, elsewhere, NULL);
    if (!op)
        return hs_builder_row(&w->b, fr->name, fr->module);
    size_t mlen = strlen(fr->module), olen = strlen(op);
    char *key = malloc(mlen + olen + 2);
    if (!key)
        return -1;
    memcpy(key, fr->module, mlen);
    key[mlen] = KEY_SEP;
    memcpy(key + mlen + 1, op, olen + 1);
    long r = hs_builder_row(&w->b, fr->name, key);
    free(key);
    return r;
}

/* Notes that the op in row op_r is called from the Python line at position
 * py of st (or from no Python frame): GROUP_OP's top-caller column. */
static int note_caller(struct walk *w, const struct prof_stack *st, long py, size_t op_r, uint32_t gen,
                       uint64_t weight, uint64_t n)
{
    char key[4096];
    uint32_t f = py >= 0 ? st->frames[py] : 0;
    if (py >= 0)
        line_key(key, sizeof key, &w->p->frames[f]);
    else
        snprintf(key, sizeof key, "%s", NO_PYTHON_FRAME_NAME);
    long r = hs_builder_row(&w->callers, key, w->b.rows[op_r].name);
    if (r < 0 || grow_u32(&w->caller_frame, &w->caller_frame_cap, w->callers.cap) != 0)
        return -1;
    if (py >= 0)
        w->caller_frame[r] = f + 1;
    count_row(&w->callers, (size_t)r, gen, false, weight, n);
    return 0;
}

/* Fills each op row's detail with its top Python caller. */
static int set_top_callers(struct walk *w)
{
    size_t *best = calloc(w->b.nrows + 1, sizeof *best); /* 1 + caller row */
    if (!best)
        return -1;
    for (size_t c = 0; c < w->callers.nrows; c++) {
        long r = hs_builder_row(&w->b, w->callers.rows[c].module, NULL); /* existing op row */
        if (r < 0) {
            free(best);
            return -1;
        }
        size_t cur = best[r];
        if (!cur || w->callers.rows[c].total > w->callers.rows[cur - 1].total)
            best[r] = c + 1;
    }
    for (size_t r = 0; r < w->b.nrows; r++) {
        if (!best[r] || !w->b.rows[r].total)
            continue;
        size_t c = best[r] - 1;
        char text[512];
        double pct = 100.0 * (double)w->callers.rows[c].total / (double)w->b.rows[r].total;
        if (w->caller_frame[c]) {
            const struct prof_frame *f = &w->p->frames[w->caller_frame[c] - 1];
            snprintf(text, sizeof text, "%s:%d %s (%.0f %%)", f->module, f->line, f->name, pct);
        } else {
            snprintf(text, sizeof text, "%s (%.0f %%)", w->callers.rows[c].name, pct);
        }
        w->b.rows[r].detail = strdup(text);
        if (!w->b.rows[r].detail) {
            free(best);
            return -1;
        }
    }
    free(best);
    return 0;
}

/* GROUP_OP: weight w / n samples of stack st. Self goes to the innermost
 * operator, or to the hook's row (record --torch-shapes), or "[no operator]";
 * runtime-wait samples (wait) go to OMP_RUNTIME_WAIT_NAME as self and count
 * only in the totals of the operators on the stack. gen is the stack's
 * generation (a wait part gets its own, past every stack's). */
static int count_op_stack(struct walk *w, const struct prof_stack *st, uint32_t gen, uint64_t weight, uint64_t n,
                          bool any_hook, bool wait)
{
    const struct profile *p = w->p;
    if (!wait && any_hook && torch_shapes_stack_is_hook(p, st)) {
        /* record --torch-shapes: the hook's own code, never an operator's */
        long r = hs_builder_row(&w->b, TORCH_SHAPES_HOOK_ROW, NULL);
        if (r < 0)
            return -1;
        count_row(&w->b, (size_t)r, gen, true, weight, n);
        return 0;
    }
    bool any = false;
    if (wait) {
        long r = hs_builder_row(&w->b, OMP_RUNTIME_WAIT_NAME, NULL);
        if (r < 0)
            return -1;
        count_row(&w->b, (size_t)r, gen, true, weight, n);
        any = true; /* the operators below get total only */
    }
    bool fallback = op_stack_fallback(&w->ix, p, st);
    for (uint32_t i = 0; i < st->nframes; i++) {
        uint32_t op = op_frame_at(&w->ix, p, st, i, fallback);
        if (!op)
            continue;
        if (!w->op_row[op - 1]) {
            long r = hs_builder_row(&w->b, w->ix.names[op - 1], NULL);
            if (r < 0)
                return -1;
            w->op_row[op - 1] = (uint32_t)r + 1;
        }
        size_t r = w->op_row[op - 1] - 1;
        bool first_here = w->b.gen[r] != gen; /* innermost occurrence of this op */
        count_row(&w->b, r, gen, !any, weight, n);
        any = true;
        if (first_here && note_caller(w, st, user_python_frame_from(p, st, i + 1), r, gen, weight, n) != 0)
            return -1;
    }
    if (!any) {
        const char *none = stack_is_import(p, st) ? NO_OPERATOR_IMPORT_NAME : NO_OPERATOR_NAME;
        long r = hs_builder_row(&w->b, none, NULL);
        if (r < 0)
            return -1;
        count_row(&w->b, (size_t)r, gen, true, weight, n);
    }
    return 0;
}

int hotspots_compute_torch(const struct profile *p, enum group_by by, struct hotspot_table *out)
{
    memset(out, 0, sizeof *out);
    struct walk w;
    if (walk_init(&w, p) != 0)
        return -1;
    uint64_t counted = 0;
    bool any_python = false; /* GROUP_LINE: Python lines, else native ones */
    for (size_t f = 0; f < p->nframes && !any_python; f++)
        any_python = p->frames[f].kind == FRAME_PYTHON;
    /* record --torch-shapes: the hook's samples get a row of their own */
    bool any_hook = by == GROUP_OP && w.ix.any_python && torch_shapes_profile_has_hook(p);
    for (size_t s = 0; s <= p->nstacks; s++) {
        uint64_t weight = w.sw[s], n = w.sc[s];
        if (n == 0)
            continue;
        counted += weight;
        static const struct prof_stack empty = {0, NULL};
        const struct prof_stack *st = s < p->nstacks ? &p->stacks[s] : &empty;
        uint32_t gen = (uint32_t)s + 1;
        bool any = false;
        if (by == GROUP_OP) {
            /* The stack's runtime-wait samples apart (see OMP_RUNTIME_WAIT_NAME):
             * a second pass over the same stack, with a generation of its own. */
            uint64_t wait_w = w.wait_w[s], wait_n = w.wait_n[s];
            if (n > wait_n && count_op_stack(&w, st, gen, weight - wait_w, n - wait_n, any_hook, false) != 0)
                goto oom;
            if (wait_n && count_op_stack(&w, st, gen + (uint32_t)p->nstacks + 1, wait_w, wait_n, any_hook, true) != 0)
                goto oom;
        } else if (by == GROUP_LINE || by == GROUP_PYTHON) {
            for (uint32_t i = 0; i < st->nframes; i++) {
                uint32_t f = st->frames[i];
                if (f >= p->nframes || p->frames[f].kind != FRAME_PYTHON)
                    continue;
                long r = python_row(&w, f, by == GROUP_LINE);
                if (r < 0)
                    goto oom;
                count_row(&w.b, (size_t)r, gen, !any, weight, n);
                any = true;
            }
            /* A native program: its own source lines, as perf's srcline
             * (innermost frame with line info: self; every one: total). */
            for (uint32_t i = 0; !any_python && by == GROUP_LINE && i < st->nframes; i++) {
                uint32_t f = st->frames[i];
                if (f >= p->nframes)
                    continue;
                bool has_line = p->frames[f].source_file && p->frames[f].line > 0;
                if (!has_line && i > 0)
                    continue;
                /* A leaf without line info (a stripped library) keeps its
                 * self time: "[no line info]" beside its function, not
                 * moved to the caller's line. */
                long r = has_line ? native_line_row(&w, f) : hs_builder_row(&w.b, "[no line info]", p->frames[f].name);
                if (r < 0)
                    goto oom;
                count_row(&w.b, (size_t)r, gen, !any, weight, n);
                any = true;
            }
            if (!any) {
                long r = hs_builder_row(&w.b, NO_PYTHON_FRAME_NAME, NULL);
                if (r < 0)
                    goto oom;
                count_row(&w.b, (size_t)r, gen, true, weight, n);
            }
        } else { /* GROUP_KERNEL */
            long o = op_stack_innermost(&w.ix, p, st);
            const char *op = o >= 0 ? w.ix.names[w.ix.frame_op[st->frames[o]] - 1] : NO_OPERATOR_NAME;
            long r = kernel_row(&w, st, op);
            if (r < 0)
                goto oom;
            count_row(&w.b, (size_t)r, gen, true, weight, n);
        }
    }
    if (by == GROUP_OP && set_top_callers(&w) != 0)
        goto oom;
    enum row_shape shape = by == GROUP_LINE ? SHAPE_LINE : by == GROUP_PYTHON ? SHAPE_PYTHON
                         : by == GROUP_KERNEL ? SHAPE_KERNEL : SHAPE_PLAIN;
    int rc = finish_rows(&w.b, p, counted, shape, out);
    walk_free(&w);
    if (rc != 0)
        return -1;
    switch (by) {
    case GROUP_OP:
        out->detail_title = "Top Python caller (share of total)";
        out->detail_key = "top_caller";
        break;
    case GROUP_LINE:
        out->detail_title = "Function";
        out->detail_key = "function";
        out->native_lines = !any_python;
        break;
    case GROUP_PYTHON:
        out->module_title = "File";
        break;
    case GROUP_KERNEL:
        out->detail_title = "Operator";
        out->detail_key = "operator";
        break;
    default:
        break;
    }
    return 0;
oom:
    walk_free(&w);
    hs_builder_abort(&w.b);
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Callers and callees of one operator                                        */
/* ------------------------------------------------------------------------- */

bool hotspots_find_operator(const struct profile *p, const char *query, char *buf, size_t len)
{
    char name[512];
    for (size_t f = 0; f < p->nframes; f++) {
        if (p->frames[f].kind == FRAME_PYTHON ||
            op_frame_classify(p->frames[f].name, name, sizeof name) == OP_FRAME_NONE)
            continue;
        if (op_name_matches(name, query) && strlen(name) < len) {
            strcpy(buf, name);
            return true;
        }
    }
    return false;
}

int hotspots_op_neighbours(const struct profile *p, const char *op, bool callees,
                           struct hotspot_table *out)
{
    memset(out, 0, sizeof *out);
    struct walk w;
    if (walk_init(&w, p) != 0)
        return -1;
    uint32_t id = 0; /* 1 + op id */
    for (size_t i = 0; i < w.ix.nnames && !id; i++)
        if (strcmp(w.ix.names[i], op) == 0)
            id = (uint32_t)i + 1;
    uint64_t op_total = 0, op_self = 0;
    for (size_t s = 0; id && s < p->nstacks; s++) {
        uint64_t weight = w.sw[s], n = w.sc[s];
        if (n == 0)
            continue;
        const struct prof_stack *st = &p->stacks[s];
        bool fallback = op_stack_fallback(&w.ix, p, st);
        long innermost = -1, first = -1; /* innermost op frame; innermost frame of op */
        for (uint32_t i = 0; i < st->nframes && first < 0; i++) {
            uint32_t o = op_frame_at(&w.ix, p, st, i, fallback);
            if (o && innermost < 0)
                innermost = (long)i;
            if (o == id)
                first = (long)i;
        }
        if (first < 0)
            continue;
        bool self = innermost == first;
        op_total += weight;
        op_self += self ? weight : 0;
        long r;
        if (callees) {
            if (!self)
                continue;
            /* The OpenMP runtime wait of the regions it opened: one row of its
             * own, as in --group-by op (the share's base keeps it). */
            uint64_t wait_w = w.wait_w[s], wait_n = w.wait_n[s];
            if (wait_n) {
                long wr = hs_builder_row(&w.b, OMP_RUNTIME_WAIT_NAME, NULL);
                if (wr < 0)
                    goto oom;
                count_row(&w.b, (size_t)wr, (uint32_t)(s + p->nstacks + 1), true, wait_w, wait_n);
                if (wait_n == n)
                    continue;
                weight -= wait_w, n -= wait_n;
            }
            r = kernel_row(&w, st, NULL);
        } else {
            long py = user_python_frame_from(p, st, (size_t)first + 1);
            r = py >= 0 ? python_row(&w, st->frames[py], true)
                        : hs_builder_row(&w.b, NO_PYTHON_FRAME_NAME, NULL);
        }
        if (r < 0)
            goto oom;
        count_row(&w.b, (size_t)r, (uint32_t)s + 1, self, weight, n);
    }
    int rc = finish_rows(&w.b, p, p->total_weight, callees ? SHAPE_PLAIN : SHAPE_LINE, out);
    walk_free(&w);
    if (rc != 0)
        return -1;
    out->share_denominator = callees ? op_self : op_total;
    if (!callees) {
        out->detail_title = "Function";
        out->detail_key = "function";
    }
    return 0;
oom:
    walk_free(&w);
    hs_builder_abort(&w.b);
    return -1;
}
