/*
 * analyze/operators.c — which frames are PyTorch operators, and their names.
 *
 * A PyTorch sample's stack holds the operator entry points of libtorch_cpu
 * (exported, so named even in Debian's stripped library):
 *   at::_ops::addmm::call(...), at::_ops::addmm::redispatch(...)   ATen operator entry
 *   torch::autograd::generated::AddmmBackward0::apply(...)          autograd node
 *   at::native::add(...), at::cpu::add_out(...)                     kernels named after ops
 *   at::addmm(...), at::Tensor::mm(...)             torch < 1.11's entries (no at::_ops)
 * op_frame_classify() turns such a frame name into the name torch.profiler
 * shows in key_averages ("aten::addmm", "AddmmBackward0"), so that opprof's
 * operator table reads like the one users know.
 *
 * The at::_ops struct name is "<op>" or "<op>_<overload>" (ATen's codegen
 * joins the schema name and its overload name with '_'), and the mangled
 * symbol does not say where the op name ends. The overload is recognised as
 * the longest run of trailing '_'-separated words that are overload words:
 * a word starting with an uppercase letter (Tensor, Scalar, IntList,
 * Dimname, ...) or one of the lowercase words in overload_words[] (out, dim,
 * int, self, input, ...). A few op names end in such words themselves
 * (unique_dim, take_along_dim, pin_memory): kept_ops[] lists them.
 * Checked against all 2,952 at::_ops structs of Debian's libtorch 1.13.1 and
 * their schemas (torch._C._jit_get_all_schemas()): 2,859 come out exactly as
 * torch.profiler names them, including every op of common models; the
 * remaining 93 are rare overloads (sparse constructors, quantize_per_tensor
 * variants, max_dim_max, scatter_reduce) that keep a part of the overload name.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/analyze.h"
#include "analyze/hotspots_internal.h"

/* Lowercase words that occur in ATen overload names. Chosen by measurement
 * on libtorch 1.13.1 (see the top comment): each one strips more real
 * overload names than it wrongly cuts off op names. */
static const char *const overload_words[] = {
    "all",      "alpha",   "array",   "atol",      "beta",   "correction", "decimals",
    "device",   "dim",     "dimname", "dtype",     "dx",     "float",      "format",
    "generator", "grad",   "idx",     "input",     "int",    "ints",       "layout",
    "low",      "memory",  "mode",    "n",         "names",  "offset",     "ord",
    "other",    "out",     "output",  "padding",   "periodic", "result",   "rtol",
    "scalar",   "self",    "sizes",   "source",    "src",    "stable",     "start",
    "step",     "storage", "str",     "two",       "using",  "value",      "values",
    "vec",      "with",    "x",
};

/* Op names that end in overload words: without this list they would be cut
 * (unique_dim -> unique). Only ops a CPU profile can plausibly meet. */
static const char *const kept_ops[] = {
    "_pin_memory",      "pin_memory",          "unique_dim",       "take_along_dim",
    "norm_except_dim",  "dense_dim",           "sparse_dim",       "_convolution_mode",
    "_add_batch_dim",   "_remove_batch_dim",   "_resize_output",   "mkldnn_linear_backward_input",
    "_dirichlet_grad",  "_standard_gamma_grad", "retain_grad",     "retains_grad",
    "_copy_from",       "affine_grid_generator", "cudnn_affine_grid_generator",
    "split_with_sizes", "unsafe_split_with_sizes",
};

static bool is_overload_word(const char *w, size_t n)
{
    if (n == 0)
        return false;
    if (isupper((unsigned char)w[0]))
        return true;
    for (size_t i = 0; i < sizeof overload_words / sizeof overload_words[0]; i++)
        if (strlen(overload_words[i]) == n && memcmp(overload_words[i], w, n) == 0)
            return true;
    return false;
}

static bool has_alnum(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (isalnum((unsigned char)s[i]))
            return true;
    return false;
}

/* Length of the op-name part of an at::_ops struct name s[0..n). */
static size_t op_base_length(const char *s, size_t n)
{
    size_t end = n;
    for (;;) {
        size_t u = end;
        while (u > 0 && s[u - 1] != '_')
            u--;
        if (u == 0)
            break; /* no '_' left: the whole rest is the op name */
        const char *word = s + u;
        size_t wlen = end - u;
        /* An empty word is a trailing '_' (in-place op: add_, copy_): part of the name. */
        if (!is_overload_word(word, wlen) || !has_alnum(s, u - 1))
            break;
        end = u - 1;
    }
    /* An op whose own name ends in overload words: keep it whole. */
    for (size_t i = 0; i < sizeof kept_ops / sizeof kept_ops[0]; i++) {
        size_t k = strlen(kept_ops[i]);
        if (k > end && k <= n && memcmp(kept_ops[i], s, k) == 0 && kept_ops[i][end] == '_' &&
            (k == n || s[k] == '_'))
            return k;
    }
    return end;
}

static size_t ident_length(const char *s)
{
    size_t n = 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '_')
        n++;
    return n;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n > k && memcmp(s + n - k, suffix, k) == 0;
}

/* Writes prefix + s[0..n) into buf; returns buf, or NULL when it does not fit. */
static const char *emit(char *buf, size_t len, const char *prefix, const char *s, size_t n)
{
    size_t p = strlen(prefix);
    if (!buf || p + n + 1 > len)
        return NULL;
    memcpy(buf, prefix, p);
    memcpy(buf + p, s, n);
    buf[p + n] = '\0';
    return buf;
}

/* Torch before 1.11 has no at::_ops: its operator entry points are ATen's
 * free functions and Tensor methods, "at::mm(at::Tensor const&, at::Tensor
 * const&)" and "at::Tensor::mm(at::Tensor const&) const" (Debian bullseye's
 * torch 1.7.1). A free function counts only when it takes a tensor, tensor
 * options or a size list, which leaves out at::globalContext(),
 * at::get_num_threads() and the like; templates (parallel_for<...>) and
 * nested namespaces or classes (at::internal::, at::TensorIterator::) are
 * never entries. */
static enum op_frame_kind classify_legacy_entry(const char *name, char *buf, size_t len)
{
    static const char tensor_method[] = "at::Tensor::";
    bool method = strncmp(name, tensor_method, sizeof tensor_method - 1) == 0;
    if (!method && strncmp(name, "at::", 4) != 0)
        return OP_FRAME_NONE;
    const char *s = name + (method ? sizeof tensor_method - 1 : 4);
    size_t n = ident_length(s);
    if (n == 0 || !islower((unsigned char)s[0]) || s[n] != '(')
        return OP_FRAME_NONE;
    if (!method && !strstr(s + n, "at::Tensor") && !strstr(s + n, "c10::TensorOptions") &&
        !strstr(s + n, "c10::ArrayRef"))
        return OP_FRAME_NONE;
    return emit(buf, len, "aten::", s, op_base_length(s, n)) ? OP_FRAME_ATEN : OP_FRAME_NONE;
}

enum op_frame_kind op_frame_classify(const char *name, char *buf, size_t len)
{
    static const char aten_ops[] = "at::_ops::";
    static const char autograd[] = "torch::autograd::";
    static const char generated[] = "generated::";
    static const char native[] = "at::native::";
    static const char cpu[] = "at::cpu::";
    if (!name)
        return OP_FRAME_NONE;

    if (strncmp(name, aten_ops, sizeof aten_ops - 1) == 0) {
        const char *s = name + sizeof aten_ops - 1;
        size_t n = ident_length(s);
        const char *member = s + n;
        if (n == 0 || strncmp(member, "::", 2) != 0)
            return OP_FRAME_NONE;
        member += 2;
        /* Only the entry points run code; ::name / ::schema are data. */
        if (!((strncmp(member, "call", 4) == 0 && !isalnum((unsigned char)member[4]) && member[4] != '_') ||
              (strncmp(member, "redispatch", 10) == 0 && !isalnum((unsigned char)member[10]) &&
               member[10] != '_')))
            return OP_FRAME_NONE;
        return emit(buf, len, "aten::", s, op_base_length(s, n)) ? OP_FRAME_ATEN : OP_FRAME_NONE;
    }

    if (strncmp(name, autograd, sizeof autograd - 1) == 0) {
        const char *s = name + sizeof autograd - 1;
        if (strncmp(s, generated, sizeof generated - 1) == 0)
            s += sizeof generated - 1;
        size_t n = ident_length(s);
        /* Nodes are classes named in CamelCase (AddmmBackward0, AccumulateGrad,
         * CopySlices); Engine::... and the lowercase helpers are not nodes. */
        if (n == 0 || !isupper((unsigned char)s[0]) || strncmp(s + n, "::apply(", 8) != 0 ||
            (n == 6 && memcmp(s, "Engine", 6) == 0))
            return OP_FRAME_NONE;
        return emit(buf, len, "", s, n) ? OP_FRAME_AUTOGRAD : OP_FRAME_NONE;
    }

    bool is_native = strncmp(name, native, sizeof native - 1) == 0;
    bool is_cpu = !is_native && strncmp(name, cpu, sizeof cpu - 1) == 0;
    if (is_native || is_cpu) {
        const char *s = name + (is_native ? sizeof native - 1 : sizeof cpu - 1);
        size_t n = ident_length(s);
        if (n == 0)
            return OP_FRAME_NONE; /* at::native::(anonymous namespace)::... */
        if (strncmp(s + n, "(", 1) != 0) {
            /* Structured kernels are classes: at::native::structured_mm_out_cpu::impl(...). */
            if (!is_native || strncmp(s, "structured_", 11) != 0 || strncmp(s + n, "::impl(", 7) != 0)
                return OP_FRAME_NONE; /* a namespace: DEFAULT::, cpublas::, vec:: */
            s += 11;
            n -= 11;
        }
        /* Kernel names carry the backend and the out= form, before or after
         * the overload words: add_outf, mm_out_cpu, softmax_cpu, and torch
         * 1.7's addmm_cpu_out, mean_cpu_gpu. Strip until nothing changes. */
        for (size_t before = 0; n && n != before;) {
            before = n;
            if (ends_with(s, n, "_outf"))
                n -= 5;
            if (ends_with(s, n, "_cpu_gpu"))
                n -= 8;
            if (ends_with(s, n, "_cpu"))
                n -= 4;
            n = op_base_length(s, n);
        }
        if (n == 0)
            return OP_FRAME_NONE;
        return emit(buf, len, "aten::", s, n) ? OP_FRAME_FALLBACK : OP_FRAME_NONE;
    }
    return classify_legacy_entry(name, buf, len);
}

const char *op_name_from_frame(const char *name, char *buf, size_t len)
{
    return op_frame_classify(name, buf, len) != OP_FRAME_NONE ? buf : NULL;
}

bool is_no_operator_row(const char *name)
{
    return strcmp(name, NO_OPERATOR_NAME) == 0 || strcmp(name, NO_OPERATOR_IMPORT_NAME) == 0 ||
           strcmp(name, OMP_RUNTIME_WAIT_NAME) == 0 ||
           strcmp(name, TORCH_SHAPES_HOOK_ROW) == 0; /* record --torch-shapes: the hook's own cost */
}

bool op_name_matches(const char *op, const char *query)
{
    if (!op || !query || !query[0])
        return false;
    if (strcmp(op, query) == 0)
        return true;
    /* "bmm" finds "aten::bmm"; "aten::bmm" is matched exactly above. */
    return strncmp(op, "aten::", 6) == 0 && strcmp(op + 6, query) == 0;
}

/* ------------------------------------------------------------------------- */
/* Operator frames of a whole profile                                         */
/* ------------------------------------------------------------------------- */

/* Op names are interned through a hotspot row builder (name -> row index =
 * op id): a profile has many frames per op (one per sampled PC). */
int op_index_build(const struct profile *p, struct op_index *ix)
{
    memset(ix, 0, sizeof *ix);
    ix->frame_op = calloc(p->nframes + 1, sizeof *ix->frame_op);
    ix->frame_kind = calloc(p->nframes + 1, sizeof *ix->frame_kind);
    struct hs_builder names = {0};
    if (!ix->frame_op || !ix->frame_kind)
        goto oom;
    char buf[512];
    /* A torch with at::_ops (1.11+) has its entries there: an at::X(Tensor)
     * helper called inside a kernel (at::infer_size...) must then not pass
     * for torch 1.7's kind of entry and take the op's self time. */
    bool has_ops_entries = false;
    for (size_t f = 0; f < p->nframes && !has_ops_entries; f++)
        has_ops_entries = p->frames[f].kind != FRAME_PYTHON && p->frames[f].name &&
                          strncmp(p->frames[f].name, "at::_ops::", 10) == 0;
    for (size_t f = 0; f < p->nframes; f++) {
        const struct prof_frame *fr = &p->frames[f];
        if (fr->kind == FRAME_PYTHON) {
            ix->any_python = true;
            continue;
        }
        enum op_frame_kind k = op_frame_classify(fr->name, buf, sizeof buf);
        if (k == OP_FRAME_NONE ||
            (k == OP_FRAME_ATEN && has_ops_entries && strncmp(fr->name, "at::_ops::", 10) != 0))
            continue;
        long r = hs_builder_row(&names, buf, NULL);
        if (r < 0)
            goto oom;
        ix->frame_op[f] = (uint32_t)r + 1;
        ix->frame_kind[f] = (uint8_t)k;
        ix->any_op = true;
    }
    struct hotspot_table t;
    int finished = hs_builder_finish(&names, p, 0, &t);
    /* Either way the builder is spent: its rows are t's now, or freed. A
     * later hs_builder_abort (oom below) must not free them a second time. */
    memset(&names, 0, sizeof names);
    if (finished != 0)
        goto oom;
    /* Keep the interned names; the rest of the rows is not needed. */
    ix->names = calloc(t.nrows + 1, sizeof *ix->names);
    if (!ix->names) {
        hotspots_free(&t);
        goto oom;
    }
    for (size_t i = 0; i < t.nrows; i++) {
        ix->names[i] = t.rows[i].name;
        t.rows[i].name = strdup("");
        if (!t.rows[i].name) {
            ix->nnames = i + 1;
            hotspots_free(&t);
            goto oom;
        }
    }
    ix->nnames = t.nrows;
    hotspots_free(&t);
    return 0;
oom:
    hs_builder_abort(&names);
    op_index_free(ix);
    return -1;
}

void op_index_free(struct op_index *ix)
{
    if (!ix)
        return;
    for (size_t i = 0; i < ix->nnames; i++)
        free(ix->names[i]);
    free(ix->names);
    free(ix->frame_op);
    free(ix->frame_kind);
    memset(ix, 0, sizeof *ix);
}

bool op_stack_fallback(const struct op_index *ix, const struct profile *p, const struct prof_stack *st)
{
    for (uint32_t i = 0; i < st->nframes; i++) {
        uint32_t f = st->frames[i];
        if (f < p->nframes && (ix->frame_kind[f] == OP_FRAME_ATEN || ix->frame_kind[f] == OP_FRAME_AUTOGRAD))
            return false;
    }
    return true;
}

uint32_t op_frame_at(const struct op_index *ix, const struct profile *p, const struct prof_stack *st,
                     size_t i, bool fallback)
{
    uint32_t f = st->frames[i];
    if (f >= p->nframes || !ix->frame_op[f])
        return 0;
    if (ix->frame_kind[f] == OP_FRAME_FALLBACK && !fallback)
        return 0;
    return ix->frame_op[f];
}

long op_stack_innermost(const struct op_index *ix, const struct profile *p, const struct prof_stack *st)
{
    bool fallback = op_stack_fallback(ix, p, st);
    for (uint32_t i = 0; i < st->nframes; i++)
        if (op_frame_at(ix, p, st, i, fallback))
            return (long)i;
    return -1;
}

/* True for Python code of the torch package itself (nn.Module machinery,
 * torch.autograd.backward, optimizers), wherever it is installed. */
static bool inside_torch_package(const char *file)
{
    return file && (strstr(file, "-packages/torch/") || strstr(file, "/site-packages/torch/"));
}

/* The Python frame a user would call the caller of an operator: the innermost
 * one outside the torch package (a backward op's caller is the user's
 * loss.backward() line, not torch/autograd/__init__.py), or the innermost
 * Python frame when all of them are inside torch. */
long user_python_frame_from(const struct profile *p, const struct prof_stack *st, size_t from)
{
    long first = -1;
    for (size_t i = from; i < st->nframes; i++) {
        uint32_t f = st->frames[i];
        if (f >= p->nframes || p->frames[f].kind != FRAME_PYTHON)
            continue;
        if (first < 0)
            first = (long)i;
        /* record --torch-shapes: the hook's frame is nobody's call site */
        const char *file = p->frames[f].source_file;
        const char *base = file ? strrchr(file, '/') : NULL;
        if (base && strcmp(base + 1, TORCH_SHAPES_HOOK_FILE) == 0)
            continue;
        if (!inside_torch_package(file))
            return (long)i;
    }
    return first;
}

long python_frame_from(const struct profile *p, const struct prof_stack *st, size_t from)
{
    for (size_t i = from; i < st->nframes; i++) {
        uint32_t f = st->frames[i];
        if (f < p->nframes && p->frames[f].kind == FRAME_PYTHON)
            return (long)i;
    }
    return -1;
}
